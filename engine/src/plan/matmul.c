/* matmul.c: one matmul's tile grids: their cost (DEVICE.md rates through the
 * kernel library's cycle formulas, so the estimate charges what the device
 * charges), their per-tile footprint and their operand and result layouts.
 *
 * Cost of grid (gm, gn, gk) for C[M x N] = A[M x K] . B[K x N], computed at
 * once (gs = 1):
 *   compute   the slowest tile's GEMM on the largest blocks;
 *   operands  one exchange step bringing each tile its A block (the most
 *             words a tile receives, plus latency, overhead and sync);
 *   reduce    with gk > 1, one exchange step bringing each tile gk - 1 row
 *             pieces of the partials, the adds that sum them by halves
 *             (ipu_reduce_tree_half) and one adding the tile's own piece;
 *   plus one sync for the compute step.
 * Footprint: A block, B block (every member of a parameter sequence),
 * partials or result, reduction staging and the reduced piece.
 *
 * A gathering grid (gather, gm > 1, B a parameter) keeps each B block once:
 * its home cuts block (l, j) into gm row bands, band i on replica i's tile,
 * and before the GEMMs one exchange step brings every tile the current
 * member's whole block (the other gm - 1 bands; its own band is a local
 * copy).  Rows of A then split gm ways without replicating the weights:
 * each tile receives its A rows, a weight block and its partials, which at
 * gm > 1 is less than the whole rows a weights-stationary grid must take.
 * Resident: every member's band; transient: one member's whole block.
 *
 * A serial grid (gs > 1) computes each tile's rows in gs pieces in turn
 * (ipu_matmul_chunk): per piece one step brings that piece of A, the tile
 * runs one GEMM per chunk of it (gk chunks, one per reduction owner), and
 * with gk > 1 the piece's partials are reduced at once.  It pays gs times
 * the syncs, latencies and call overheads, and its descriptors and
 * exchange tables grow with the pieces (serial_support: counted in the
 * footprint beyond its share of what the device leaves beside the budget); A, the partials and
 * the reduction staging shrink to one piece, reused across the loop.  B and
 * the result stay whole.
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

static uint64_t copy_cycles(const ipu_profile *p, uint64_t bytes)
{
    ipu_kernel_call call = {0};
    call.entry = IPU_K_COPY;
    call.args[2] = (uint32_t)bytes;
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

/* Support storage (kernel descriptors, exchange table rows, step slots) a
 * serial grid adds per tile: per piece about gk GEMM descriptors, the rows
 * bringing A's chunks and reducing the partials, the adds and the piece's
 * steps, 112 bytes a chunk and 64 a piece (measured: 467 bytes a piece at
 * gk = 4).  An eighth of what the device leaves beside the budget (the
 * support reserve at the default budget) is the grid's to use; beyond that
 * it is memory the tensors cannot have, counted with them. */
static uint64_t serial_support(const ipu_profile *p, uint32_t budget, uint32_t gk, uint32_t gs)
{
    uint64_t capacity = ipu_profile_access_end(p) - p->sram_base - p->runtime_state_bytes;
    uint64_t bytes = gs > 1 ? (uint64_t)gs * (112u * gk + 64u) : 0,
             allowance = capacity > budget ? (capacity - budget) / 8 : 0;
    return bytes > allowance ? bytes - allowance : 0;
}

const uint32_t ipu_matmul_serial_counts[IPU_MATMUL_SERIAL_COUNTS] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};

void ipu_matmul_chunk(uint32_t m, const ipu_matmul_grid *g, uint32_t i, uint32_t l, uint32_t t, uint32_t *lo,
                      uint32_t *hi)
{
    uint32_t r0, r1, s0, s1, c0, c1;
    ipu_band(m, g->gm, 1, i, &r0, &r1);
    ipu_band(r1 - r0, g->gk, 1, l, &s0, &s1);
    ipu_band(s1 - s0, g->gs, 1, t, &c0, &c1);
    *lo = r0 + s0 + c0, *hi = r0 + s0 + c1;
}

uint32_t ipu_matmul_piece_rows(uint32_t m, const ipu_matmul_grid *g, uint32_t i, uint32_t l, uint32_t t)
{
    uint32_t rows = 0, lo, hi;
    for (uint32_t q = 0; q < l; q++) {
        ipu_matmul_chunk(m, g, i, q, t, &lo, &hi);
        rows += hi - lo;
    }
    return rows;
}

int ipu_matmul_grid_cost(const ipu_profile *p, uint32_t budget, uint32_t m, uint32_t n, uint32_t k,
                         int in_dtype, int out_dtype, uint32_t members, uint32_t gm, uint32_t gn, uint32_t gk,
                         uint32_t gs, uint32_t gather, ipu_matmul_grid *out)
{
    size_t in = ipu_dtype_size(in_dtype), outsz = ipu_dtype_size(out_dtype);
    if (!in || !outsz || !gs || (uint64_t)gm * gn * gk > p->tiles || gm > m || (gather && gm < 2))
        return 0;
    uint32_t align = ipu_plan_k_align(in), mb = ceil_div(m, gm), kb = max_band(k, gk, align),
             nb = max_band(n, gn, IPU_PLAN_COL_ALIGN);
    /* With gk > 1 every row band must split into gk non-empty pieces, and
     * with gs > 1 every one of those into gs non-empty chunks. */
    if (!kb || !nb || (gk > 1 && m / gm < gk) || (gs > 1 && m / gm / gk < gs))
        return 0;
    if (gather) {
        /* Every K band must cut into gm non-empty home bands: the first
         * band is the narrowest but for the tail, the last. */
        uint32_t lo, hi, first;
        ipu_band(k, gk, align, 0, &lo, &first);
        ipu_band(k, gk, align, gk - 1, &lo, &hi);
        if (first < gm || hi - lo < gm)
            return 0;
    }
    memset(out, 0, sizeof *out);
    out->gm = gm, out->gn = gn, out->gk = gk, out->gs = gs, out->gather = gather;
    /* Largest sub-band (reduction owner's rows), chunk and piece of a band. */
    uint32_t sub = ceil_div(mb, gk), chunk = ceil_div(sub, gs), piece = gs == 1 ? mb : gk * chunk;
    uint64_t b_one = kb * stride(nb, in), own = (kb / gm) * stride(nb, in);
    uint64_t a_piece = piece * stride(kb, in), gathered = gather ? b_one : 0,
             b_block = gather ? ceil_div(kb, gm) * stride(nb, in) * members : b_one * members;
    uint64_t c_row = stride(nb, outsz), c_block = mb * c_row;
    out->compute_cycles = gs == 1 ? gemm_cycles(p, in_dtype, out_dtype, mb, nb, kb)
                                  : (uint64_t)gs * gk * gemm_cycles(p, in_dtype, out_dtype, chunk, nb, kb);
    out->operand_cycles = gs * ipu_plan_exchange_cycles(p, a_piece);
    if (gather)
        out->operand_cycles += copy_cycles(p, own) + ipu_plan_exchange_cycles(p, b_one - own);
    out->a_bytes = a_piece;
    out->b_bytes = b_block;
    out->gathered_bytes = gathered;
    if (gk == 1) {
        out->tile_bytes = a_piece + b_block + gathered + c_block;
    } else {
        /* Per piece: each owner receives gk - 1 chunks of the partials and sums them. */
        uint64_t chunk_bytes = chunk * c_row, reduce = ipu_plan_exchange_cycles(p, (gk - 1) * chunk_bytes) +
                                                       add_cycles(p, out_dtype, chunk_bytes / outsz);
        for (uint32_t pieces = gk - 1; pieces > 1;) {
            uint32_t half = ipu_reduce_tree_half(pieces);
            reduce += add_cycles(p, out_dtype, half * chunk_bytes / outsz);
            pieces -= half;
        }
        out->reduce_cycles = gs * reduce;
        /* At once: the partials, staging and the reduced piece; serial: the
         * reduced sub-band, one piece of partials and its staging. */
        out->tile_bytes = gs == 1 ? a_piece + b_block + c_block + gk * chunk_bytes
                                  : a_piece + b_block + sub * c_row + piece * c_row + (gk - 1) * chunk_bytes;
        out->tile_bytes += gathered;
    }
    out->support_bytes = serial_support(p, budget, gk, gs);
    out->tile_bytes += out->support_bytes;
    out->cycles = gs * p->sync_cycles + out->compute_cycles + out->operand_cycles + out->reduce_cycles;
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
    ipu_status status = ipu_layout_grid(ctx, a, m, k, in, gm, gk, ipu_plan_k_align(in), gn, 0, gn * gk, 1,
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

ipu_status ipu_matmul_weight_home(ipu_ctx *ctx, const ipu_matmul_grid *g, const ipu_layout *b, ipu_layout *out)
{
    uint32_t gm = g->gm, gk = b->row_parts, gn = b->col_parts;
    IPU_TRY(ipu_layout_alloc(ctx, out, b->rows, b->cols, b->elem, gk * gm, gn, 1));
    memcpy(out->col_bounds, b->col_bounds, ((size_t)gn + 1) * sizeof *out->col_bounds);
    for (uint32_t l = 0; l < gk; l++)
        for (uint32_t i = 0; i < gm; i++) {
            uint32_t lo, hi;
            ipu_band(b->row_bounds[l + 1] - b->row_bounds[l], gm, 1, i, &lo, &hi);
            out->row_bounds[l * gm + i + 1] = b->row_bounds[l] + hi;
            for (uint32_t j = 0; j < gn; j++)
                out->tiles[((size_t)l * gm + i) * gn + j] = ipu_layout_tile(b, l, j, i);
        }
    return IPU_OK;
}

ipu_status ipu_matmul_input_home(ipu_ctx *ctx, const ipu_matmul_grid *g, const ipu_layout *a, int spread,
                                 ipu_layout *out)
{
    if (g->gs == 1 && !spread)
        return ipu_layout_follow(ctx, out, a, a->elem);
    /* Band i of A cut into `cuts` row bands, cut r on replica r's tile. */
    uint32_t cuts = a->replicas < a->rows / g->gm ? a->replicas : a->rows / g->gm, lo;
    IPU_TRY(ipu_layout_alloc(ctx, out, a->rows, a->cols, a->elem, g->gm * cuts, g->gk, 1));
    memcpy(out->col_bounds, a->col_bounds, ((size_t)g->gk + 1) * sizeof *out->col_bounds);
    for (uint32_t i = 0; i < g->gm; i++) {
        uint32_t r0, r1;
        ipu_band(a->rows, g->gm, 1, i, &r0, &r1);
        for (uint32_t r = 0; r < cuts; r++) {
            uint32_t hi;
            ipu_band(r1 - r0, cuts, 1, r, &lo, &hi);
            out->row_bounds[i * cuts + r + 1] = r0 + hi;
            for (uint32_t l = 0; l < g->gk; l++)
                out->tiles[(size_t)(i * cuts + r) * g->gk + l] = ipu_layout_tile(a, i, l, r);
        }
    }
    return IPU_OK;
}
