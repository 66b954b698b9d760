/* norm.c: planning LayerNorm.  The kernel needs whole rows, so the input is
 * normalized where it lives when its home is row-complete (one column band),
 * and otherwise brought to a row layout: min(rows, tiles) row bands spread
 * evenly over the device (an input without a home yet, such as the Repeat's
 * carried residual stream, is homed there).  The result follows the input's
 * row layout.  Gamma and beta ([1 x C], sequences inside the Repeat) are
 * homed thinly (ipu_plan_row_param_home), so their members do not crowd
 * the row tiles; every execution brings the current member to each
 * row band's tile (the b operand layout: one replica per band).
 */
#include <string.h>

#include "kernels/kernels.h"
#include "numerics/numerics.h"
#include "plan/plan.h"

static uint64_t layernorm_cycles(const ipu_profile *p, uint32_t rows, uint32_t cols, int dtype)
{
    ipu_kernel_call call = {0};
    call.entry = IPU_K_LAYERNORM;
    call.args[4] = rows, call.args[5] = cols, call.args[8] = (uint32_t)dtype;
    return ipu_kernel_cycles(&call, p);
}

ipu_status ipu_plan_layernorm(ipu_ctx *ctx, ipu_plan *plan, size_t index)
{
    const ipu_graph *g = plan->graph;
    const ipu_ir_op *op = &g->ops[index];
    const ipu_ir_tensor *x = &g->tensors[op->in[0]], *gamma = &g->tensors[op->in[1]],
                        *out = &g->tensors[op->out];
    ipu_op_plan *o = &plan->ops[index];
    ipu_layout *home = &plan->home[op->in[0]];
    uint32_t elem = (uint32_t)ipu_dtype_size(x->dtype), tiles = plan->profile.tiles;
    ipu_layout rows;
    if (home->tiles && home->col_parts == 1) {
        IPU_TRY(ipu_layout_follow(ctx, &rows, home, elem));
    } else {
        uint32_t parts = x->rows < tiles ? x->rows : tiles;
        IPU_TRY(ipu_layout_grid(ctx, &rows, x->rows, x->cols, elem, parts, 1, IPU_PLAN_COL_ALIGN, 1, 0,
                                tiles / parts, 0, 0));
        ipu_status status = home->tiles ? IPU_OK : ipu_layout_copy(ctx, home, &rows);
        if (status != IPU_OK) {
            ipu_layout_free(&rows);
            return status;
        }
    }
    uint64_t moved = 0;
    if (ipu_layout_same(home, &rows)) {
        ipu_layout_free(&rows);
    } else {
        o->a = rows;
        moved = ipu_layout_largest_block(&o->a, 1);
    }
    const ipu_layout *by_rows = o->a.tiles ? &o->a : home;
    if (!plan->home[op->out].tiles)
        IPU_TRY(ipu_layout_follow(ctx, &plan->home[op->out], by_rows,
                                  (uint32_t)ipu_dtype_size(out->dtype)));
    for (int k = 1; k <= 2; k++)
        if (!plan->home[op->in[k]].tiles)
            IPU_TRY(ipu_plan_row_param_home(ctx, plan, op->in[k]));
    /* Gamma and beta (one member) on every row band's tile. */
    uint32_t pelem = (uint32_t)ipu_dtype_size(gamma->dtype);
    IPU_TRY(ipu_layout_alloc(ctx, &o->b, 1, x->cols, pelem, 1, 1, by_rows->row_parts));
    o->b.col_bounds[1] = x->cols, o->b.row_bounds[1] = 1;
    for (uint32_t i = 0; i < by_rows->row_parts; i++)
        o->b.tiles[i] = ipu_layout_tile(by_rows, i, 0, 0);
    uint32_t band = 0;
    for (uint32_t i = 0; i < by_rows->row_parts; i++) {
        uint32_t n = by_rows->row_bounds[i + 1] - by_rows->row_bounds[i];
        band = n > band ? n : band;
    }
    uint64_t params = 2ull * ipu_layout_stride(&o->b, x->cols);
    const ipu_profile *p = &plan->profile;
    /* Gamma and beta arrive one after the other, each in an exchange of its own. */
    o->cycles = p->sync_cycles + layernorm_cycles(p, band, x->cols, x->dtype) +
                2 * ipu_plan_exchange_cycles(p, params / 2) + (moved ? ipu_plan_exchange_cycles(p, moved) : 0);
    o->tile_bytes = ipu_layout_largest_block(by_rows, 1) +
                    ipu_layout_largest_block(&plan->home[op->out], 1) + params + moved;
    return IPU_OK;
}
