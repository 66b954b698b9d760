/* norm.c: lowering LayerNorm (planned by plan/norm.c).  The input comes to
 * its row layout if it is not there already; gamma and beta each go from
 * their thin home to every row band's tile: a copy on each home tile takes
 * the current member of the sequence (its source advances one member per
 * Repeat iteration) into staging, and one multicast step delivers it.  Then
 * one LAYERNORM call per row band.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/lowering.h"
#include "numerics/numerics.h"

/* The current member of parameter in[slot] on the op's b layout. */
static ipu_status current_member(lowering *L, size_t index, int slot, const char *label,
                                 const uint32_t **ids)
{
    const ipu_ir_op *op = &L->g->ops[index];
    uint32_t tensor = op->in[slot];
    const ipu_ir_tensor *t = &L->g->tensors[tensor];
    const ipu_layout *home = &L->plan->home[tensor];
    const uint32_t *home_ids = low_home_ids(L, tensor);
    uint32_t **own = &L->operands[index][slot];
    char name[64];
    snprintf(name, sizeof name, "%.40s@op%zu", t->name, index);
    IPU_TRY(low_layout_buffers(L, &L->plan->ops[index].b, tensor, 1, IPU_LOW_OPERAND, name, own));
    size_t blocks = (size_t)home->row_parts * home->col_parts;
    uint32_t *staging = ipu_calloc(L->ctx, blocks, sizeof *staging);
    if (!staging)
        return IPU_NO_MEMORY(L->ctx);
    ipu_status status = low_begin_step(L, IPU_LOW_COMPUTE, label);
    for (size_t b = 0; b < blocks && status == IPU_OK; b++) {
        uint32_t i = (uint32_t)(b / home->col_parts), j = (uint32_t)(b % home->col_parts);
        uint32_t bytes = ipu_layout_block_bytes(home, i, j), tile = ipu_layout_tile(home, i, j, 0);
        snprintf(name, sizeof name, "%.40s.member", t->name);
        status = low_new_buffer(L, tile, bytes, tensor, 0, 0, name, &staging[b]);
        ipu_low_arg args[] = {BUF(home_ids[b], 0), BUF(staging[b], 0), LIT(bytes)};
        if (status == IPU_OK)
            status = low_emit_kernel(L, tile, IPU_K_COPY, 3, args, t->sequence > 1 ? 0 : -1, bytes);
    }
    if (status == IPU_OK)
        status = low_redistribute(L, home, staging, &L->plan->ops[index].b, *own, label);
    free(staging);
    *ids = *own;
    return status;
}

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
    IPU_TRY(current_member(L, index, 1, label, &gamma_ids));
    IPU_TRY(current_member(L, index, 2, label, &beta_ids));
    uint32_t epsilon;
    memcpy(&epsilon, &op->epsilon, sizeof epsilon);
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
