/* catalogue.c: one matmul's candidates for the search (see plan.h).
 *
 * Every tile grid (gm, gn, gk) with at most one block per tile is a
 * partition.  Partitions whose operand blocks alone (A's, or B's with every
 * member of a parameter sequence) exceed the catalogue budget are filtered
 * out; the rest are enumerated in groups (group_size partitions in
 * enumeration order), each group keeps its coarse-model frontier: the
 * partitions no other in the group beats on both estimated cycles and the
 * sum-of-maxima footprint (matmul.c), thinned to frontier_cap evenly along
 * the frontier, the fastest and the smallest always kept.  The merged
 * frontiers are shortlisted the same way, then pruned with the detailed
 * model, the exact per-tile footprint (ipu_matmul_tile_footprint): a
 * shortlisted partition stays when no other is at least as fast and smaller
 * on the fullest tile.  The result is sorted fastest first.
 */
#include <stdlib.h>
#include <string.h>

#include "numerics/numerics.h"
#include "plan/plan.h"

static uint64_t stride(uint32_t cols, size_t elem) { return ((uint64_t)cols * elem + 7) & ~7ull; }

uint64_t ipu_matmul_tile_footprint(uint32_t m, uint32_t n, uint32_t k, int in_dtype, int out_dtype,
                                   uint32_t members, const ipu_matmul_grid *g)
{
    size_t in = ipu_dtype_size(in_dtype), out = ipu_dtype_size(out_dtype);
    uint64_t best = 0;
    /* Tile (i, j, l) holds A block (i, l), B block (l, j), and its result
     * block, or with gk > 1 its partial, the staged sub-band l of the other
     * partials and its reduced piece (lower.c). */
    for (uint32_t i = 0; i < g->gm; i++) {
        uint32_t r0, r1;
        ipu_band(m, g->gm, 1, i, &r0, &r1);
        for (uint32_t l = 0; l < g->gk; l++) {
            uint32_t k0, k1, s0, s1;
            ipu_band(k, g->gk, IPU_PLAN_COL_ALIGN, l, &k0, &k1);
            ipu_band(r1 - r0, g->gk, 1, l, &s0, &s1);
            for (uint32_t j = 0; j < g->gn; j++) {
                uint32_t n0, n1;
                ipu_band(n, g->gn, IPU_PLAN_COL_ALIGN, j, &n0, &n1);
                uint64_t c_row = stride(n1 - n0, out);
                uint64_t bytes = (r1 - r0) * stride(k1 - k0, in) + (k1 - k0) * stride(n1 - n0, in) * members +
                                 (r1 - r0) * c_row;
                if (g->gk > 1)
                    bytes += (uint64_t)g->gk * (s1 - s0) * c_row;
                best = bytes > best ? bytes : best;
            }
        }
    }
    return best;
}

/* Fastest first, then smaller, then fewer tiles. */
static int by_cycles(const void *pa, const void *pb)
{
    const ipu_matmul_grid *a = pa, *b = pb;
    if (a->cycles != b->cycles)
        return a->cycles < b->cycles ? -1 : 1;
    if (a->tile_bytes != b->tile_bytes)
        return a->tile_bytes < b->tile_bytes ? -1 : 1;
    uint64_t ta = (uint64_t)a->gm * a->gn * a->gk, tb = (uint64_t)b->gm * b->gn * b->gk;
    return ta < tb ? -1 : ta > tb;
}

/* Sort, keep the frontier (each kept partition smaller than every faster
 * one), thin it to cap; returns the new count. */
static uint32_t frontier(ipu_matmul_grid *v, uint32_t n, uint32_t cap)
{
    qsort(v, n, sizeof *v, by_cycles);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!kept || v[i].tile_bytes < v[kept - 1].tile_bytes)
            v[kept++] = v[i];
    if (kept > cap && cap >= 2) {
        for (uint32_t i = 0; i < cap; i++)
            v[i] = v[(uint64_t)i * (kept - 1) / (cap - 1)];
        kept = cap;
    } else if (kept > cap) {
        kept = cap;
    }
    return kept;
}

ipu_status ipu_catalogue_matmul(ipu_ctx *ctx, const ipu_profile *p, uint32_t m, uint32_t n, uint32_t k,
                                int in_dtype, int out_dtype, uint32_t members,
                                const ipu_catalogue_options *o, ipu_catalogue *out)
{
    memset(out, 0, sizeof *out);
    uint32_t group = o->group_size ? o->group_size : 1, cap = o->frontier_cap ? o->frontier_cap : 1;
    /* The current group, then the merged frontiers (at most cap per group). */
    ipu_matmul_grid *current = malloc((size_t)group * sizeof *current);
    size_t merged_capacity = 64, merged_count = 0;
    ipu_matmul_grid *merged = malloc(merged_capacity * sizeof *merged);
    if (!current || !merged) {
        free(current), free(merged);
        return IPU_NO_MEMORY(ctx);
    }
    uint32_t filled = 0;
    ipu_status status = IPU_OK;
    for (uint32_t gm = 1; gm <= m && gm <= p->tiles && status == IPU_OK; gm++)
        for (uint32_t gn = 1; (uint64_t)gm * gn <= p->tiles && status == IPU_OK; gn++)
            for (uint32_t gk = 1; (uint64_t)gm * gn * gk <= p->tiles; gk++) {
                ipu_matmul_grid grid;
                if (!ipu_matmul_grid_cost(p, m, n, k, in_dtype, out_dtype, members, gm, gn, gk, &grid)) {
                    if (gk > 1)
                        break; /* larger gk only makes bands thinner */
                    continue;
                }
                out->enumerated++;
                if (grid.a_bytes > o->budget || grid.b_bytes > o->budget) {
                    out->filtered++;
                    continue;
                }
                current[filled++] = grid;
                if (filled < group)
                    continue;
                out->groups++;
                uint32_t kept = frontier(current, filled, cap);
                if (merged_count + kept > merged_capacity) {
                    size_t grown = (merged_count + kept) * 2;
                    ipu_matmul_grid *bigger = realloc(merged, grown * sizeof *merged);
                    if (!bigger) {
                        status = IPU_NO_MEMORY(ctx);
                        break;
                    }
                    merged = bigger, merged_capacity = grown;
                }
                memcpy(merged + merged_count, current, kept * sizeof *current);
                merged_count += kept;
                filled = 0;
            }
    if (status == IPU_OK && filled) {
        out->groups++;
        uint32_t kept = frontier(current, filled, cap);
        if (merged_count + kept > merged_capacity) {
            ipu_matmul_grid *bigger = realloc(merged, (merged_count + kept) * sizeof *merged);
            if (bigger)
                merged = bigger, merged_capacity = merged_count + kept;
            else
                status = IPU_NO_MEMORY(ctx);
        }
        if (status == IPU_OK) {
            memcpy(merged + merged_count, current, kept * sizeof *current);
            merged_count += kept;
        }
    }
    free(current);
    if (status != IPU_OK) {
        free(merged);
        return status;
    }
    out->frontier = (uint32_t)merged_count;
    out->shortlisted = frontier(merged, (uint32_t)merged_count, cap);
    /* Detailed pruning on the exact footprint of the fullest tile. */
    uint32_t retained = 0;
    for (uint32_t i = 0; i < out->shortlisted; i++) {
        ipu_matmul_grid g = merged[i];
        g.exact_bytes = ipu_matmul_tile_footprint(m, n, k, in_dtype, out_dtype, members, &g);
        if (!retained || g.exact_bytes < merged[retained - 1].exact_bytes)
            merged[retained++] = g;
    }
    out->grids = merged;
    out->count = retained;
    return IPU_OK;
}
