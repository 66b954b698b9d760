/* norm.c: lowering LayerNorm (planned by plan/norm.c).  The input comes to
 * its row layout if it is not there already; gamma and beta each go from
 * their thin home to every row band's tile (low_current_member).  Then one
 * LAYERNORM call per row band.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/lowering.h"
#include "numerics/numerics.h"

ipu_status ipu_lower_layernorm(lowering *L, size_t index)
{
    const ipu_graph *g = L->g;
    const ipu_ir_op *op = &g->ops[index];
    const ipu_op_plan *o = &L->plan->ops[index];
    const ipu_ir_tensor *x = &g->tensors[op->in[0]], *gamma = &g->tensors[op->in[1]],
                        *y = &g->tensors[op->out];
    const ipu_layout *rows = o->a.tiles ? &o->a : &L->plan->home[op->in[0]];
    const ipu_layout *out = &L->plan->home[op->out];
    char label[64];
    snprintf(label, sizeof label, "op%zu layernorm %.40s", index, y->name);
    const uint32_t *x_ids, *gamma_ids, *beta_ids, *y_ids = low_home_ids(L, op->out);
    IPU_TRY(low_operand(L, index, 0, op->in[0], &o->a, label, &x_ids));
    IPU_TRY(low_current_member(L, index, 1, &o->b, label, &gamma_ids));
    IPU_TRY(low_current_member(L, index, 2, &o->b, label, &beta_ids));
    /* Injected: another framework's default epsilon (Keras's 1e-3 for the model's 1e-6). */
    float eps = ipu_low_take_inject(&L->prog->inject, IPU_INJECT_NORM_EPSILON_WRONG) ? 1e-3f : op->epsilon;
    uint32_t epsilon;
    memcpy(&epsilon, &eps, sizeof epsilon);
    IPU_TRY(low_begin_step(L, IPU_LOW_COMPUTE, label));
    if (ipu_low_take_inject(&L->prog->inject, IPU_INJECT_NORM_GAMMA_BETA_SWAPPED)) {
        const uint32_t *swap = gamma_ids;
        gamma_ids = beta_ids, beta_ids = swap;
    }
    for (uint32_t i = 0; i < rows->row_parts; i++) {
        uint32_t tile = ipu_layout_tile(rows, i, 0, 0);
        uint32_t n = rows->row_bounds[i + 1] - rows->row_bounds[i];
        IPU_TRY(low_clear(L, y_ids[i]));
        ipu_low_arg args[] = {BUF(x_ids[i], 0),
                              BUF(y_ids[i], 0),
                              BUF(gamma_ids[i], 0),
                              BUF(beta_ids[i], 0),
                              LIT(n),
                              LIT(x->cols),
                              LIT(low_elements_per_row(rows, 0)),
                              LIT(low_elements_per_row(out, 0)),
                              LIT(x->dtype),
                              LIT(gamma->dtype),
                              LIT(epsilon)};
        IPU_TRY(low_emit_kernel(L, tile, IPU_K_LAYERNORM, 11, args, -1, 0));
    }
    return IPU_OK;
}
