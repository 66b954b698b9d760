/* matmul.c: one matmul's tile grids: their cost (DEVICE.md rates through the
 * kernel library's cycle formulas, so the estimate charges what the device
 * charges), their per-tile footprint and their operand and result layouts.
 *
 * Cost of grid (gm, gn, gk) for C[M x N] = A[M x K] . B[K x N]:
 *   compute   the slowest tile's GEMM on the largest blocks;
 *   operands  one exchange step bringing each tile its A block (the most
 *             words a tile receives, plus latency, overhead and sync);
 *   reduce    with gk > 1, one exchange step bringing each tile gk - 1 row
 *             pieces of the partials, the adds that sum them by halves
 *             (ipu_reduce_tree_half) and one adding the tile's own piece;
 *   plus one sync for the compute step.
 * Footprint: A block, B block (every member of a parameter sequence),
 * partials or result, reduction staging and the reduced piece.
 */
#include <string.h>

#include "kernels/kernels.h"
#include "numerics/numerics.h"
#include "plan/plan.h"

static uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

/* Largest band of total split into parts on multiples of align; 0 if a band is empty. */
static uint32_t max_band(uint32_t total, uint32_t parts, uint32_t align)
{
    uint32_t units = ceil_div(total, align);
    if (parts > units)
        return 0;
    uint32_t band = ceil_div(units, parts) * align;
    return band < total ? band : total;
}

static uint64_t stride(uint32_t cols, size_t elem) { return ((uint64_t)cols * elem + 7) & ~7ull; }

static uint64_t gemm_cycles(const ipu_profile *p, int in_dtype, int out_dtype, uint32_t m, uint32_t n,
                            uint32_t k)
{
    ipu_kernel_call call = {0};
    int f8 = in_dtype == IPU_DT_F143 || in_dtype == IPU_DT_F152;
    call.entry = f8 ? IPU_K_GEMM_F8 : IPU_K_GEMM_F16;
    call.args[3] = m, call.args[4] = n, call.args[5] = k;
    call.args[f8 ? 8 : 6] = (uint32_t)out_dtype;
    return ipu_kernel_cycles(&call, p);
}

static uint64_t add_cycles(const ipu_profile *p, int dtype, uint64_t count)
{
    ipu_kernel_call call = {0};
    call.entry = IPU_K_ADD;
    call.args[3] = (uint32_t)count, call.args[4] = (uint32_t)dtype;
    return ipu_kernel_cycles(&call, p);
}

uint64_t ipu_plan_exchange_cycles(const ipu_profile *p, uint64_t bytes)
{
    return p->sync_cycles + (bytes + 3) / 4 + p->exchange_latency + p->exchange_overhead;
}

int ipu_matmul_grid_cost(const ipu_profile *p, uint32_t m, uint32_t n, uint32_t k, int in_dtype,
                         int out_dtype, uint32_t members, uint32_t gm, uint32_t gn, uint32_t gk,
                         ipu_matmul_grid *out)
{
    size_t in = ipu_dtype_size(in_dtype), outsz = ipu_dtype_size(out_dtype);
    if (!in || !outsz || (uint64_t)gm * gn * gk > p->tiles || gm > m)
        return 0;
    uint32_t mb = ceil_div(m, gm), kb = max_band(k, gk, IPU_PLAN_COL_ALIGN),
             nb = max_band(n, gn, IPU_PLAN_COL_ALIGN);
    /* With gk > 1 every row band must split into gk non-empty pieces. */
    if (!kb || !nb || (gk > 1 && m / gm < gk))
        return 0;
    memset(out, 0, sizeof *out);
    out->gm = gm, out->gn = gn, out->gk = gk;
    uint64_t a_block = mb * stride(kb, in), b_block = kb * stride(nb, in) * members;
    uint64_t c_block = mb * stride(nb, outsz);
    out->compute_cycles = gemm_cycles(p, in_dtype, out_dtype, mb, nb, kb);
    out->operand_cycles = ipu_plan_exchange_cycles(p, a_block);
    out->tile_bytes = a_block + b_block + c_block;
    out->a_bytes = a_block;
    out->b_bytes = b_block;
    if (gk > 1) {
        uint64_t piece_rows = ceil_div(mb, gk), piece = piece_rows * stride(nb, outsz);
        out->reduce_cycles = ipu_plan_exchange_cycles(p, (gk - 1) * piece) +
                             add_cycles(p, out_dtype, piece / outsz);
        for (uint32_t pieces = gk - 1; pieces > 1;) {
            uint32_t half = ipu_reduce_tree_half(pieces);
            out->reduce_cycles += add_cycles(p, out_dtype, half * piece / outsz);
            pieces -= half;
        }
        out->tile_bytes += gk * piece;
    }
    out->cycles = p->sync_cycles + out->compute_cycles + out->operand_cycles + out->reduce_cycles;
    return 1;
}

ipu_status ipu_matmul_layouts(ipu_ctx *ctx, uint32_t m, uint32_t n, uint32_t k, int in_dtype,
                              int out_dtype, const ipu_matmul_grid *g, ipu_layout *a, ipu_layout *b,
                              ipu_layout *c)
{
    uint32_t gm = g->gm, gn = g->gn, gk = g->gk, in = (uint32_t)ipu_dtype_size(in_dtype),
             out = (uint32_t)ipu_dtype_size(out_dtype);
    memset(a, 0, sizeof *a), memset(b, 0, sizeof *b), memset(c, 0, sizeof *c);
    /* A block (i, l), replica j, on tile (i * gn + j) * gk + l. */
    ipu_status status = ipu_layout_grid(ctx, a, m, k, in, gm, gk, IPU_PLAN_COL_ALIGN, gn, 0, gn * gk, 1,
                                        gk);
    /* B block (l, j), replica i, on the same tile; its row bands are A's
     * column bands (both cut K on word boundaries). */
    if (status == IPU_OK)
        status = ipu_layout_grid(ctx, b, k, n, in, gk, gn, IPU_PLAN_COL_ALIGN, gm, 0, 1, gk, gn * gk);
    if (status == IPU_OK)
        memcpy(b->row_bounds, a->col_bounds, ((size_t)gk + 1) * sizeof *b->row_bounds);
    if (status == IPU_OK && gk == 1)
        status = ipu_layout_grid(ctx, c, m, n, out, gm, gn, IPU_PLAN_COL_ALIGN, 1, 0, gn, 1, 0);
    if (status == IPU_OK && gk > 1) {
        status = ipu_layout_alloc(ctx, c, m, n, out, gm * gk, gn, 1);
        for (uint32_t i = 0; status == IPU_OK && i < gm; i++) {
            uint32_t r0, r1;
            ipu_band(m, gm, 1, i, &r0, &r1);
            for (uint32_t l = 0; l < gk; l++) {
                uint32_t s0, s1;
                ipu_band(r1 - r0, gk, 1, l, &s0, &s1);
                c->row_bounds[i * gk + l + 1] = r0 + s1;
                for (uint32_t j = 0; j < gn; j++)
                    c->tiles[(size_t)(i * gk + l) * gn + j] = (i * gn + j) * gk + l;
            }
        }
        for (uint32_t j = 0; status == IPU_OK && j < gn; j++) {
            uint32_t lo;
            ipu_band(n, gn, IPU_PLAN_COL_ALIGN, j, &lo, &c->col_bounds[j + 1]);
        }
    }
    if (status != IPU_OK) {
        ipu_layout_free(a), ipu_layout_free(b), ipu_layout_free(c);
    }
    return status;
}
