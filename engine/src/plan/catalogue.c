/* catalogue.c: one matmul's candidates for the search (see plan.h).
 *
 * Every tile grid (gm, gn, gk), computed at once or in gs serial pieces
 * (matmul.c), is a partition.  Partitions whose operand blocks alone (A's,
 * B's with every member of a parameter sequence, or a gathered member's) exceed the catalogue
 * budget are filtered out, and for a parameter those whose weight block
 * exceeds the search's replication bound (weight_limit); the rest are
 * enumerated in groups (group_size partitions in enumeration order), each
 * group keeps its coarse-model frontier: the
 * partitions no faster one in the group beats on the sum-of-maxima
 * footprint (matmul.c), thinned to frontier_cap evenly along the frontier,
 * the fastest and the smallest always kept.  A parameter matmul keeps three
 * such frontiers, on its resident weight block, on the rest of its
 * footprint and on the whole: the search weighs the first two differently
 * (weights stay for the whole program, the rest only while the op runs),
 * and the whole keeps the partitions small on both, which a tight budget
 * needs (a serial grid with one weight replica, say).  A parameter's grid
 * with gm > 1 is a partition twice: with every replica of its weight block
 * resident, and gathering (matmul.c: each block held once, the current
 * member brought to every replica before the GEMMs).  The merged
 * frontiers are shortlisted the same way, then pruned with the detailed model, the exact
 * per-tile footprint (ipu_matmul_tile_footprint): a shortlisted partition
 * stays unless another is at least as fast, as small on the fullest tile
 * and (for a parameter) holds no more weights.  The result is sorted
 * fastest first.
 */
#include <stdlib.h>
#include <string.h>

#include "numerics/numerics.h"
#include "plan/plan.h"

static uint64_t stride(uint32_t cols, size_t elem) { return ((uint64_t)cols * elem + 7) & ~7ull; }

/* The weights tile (i, j, l) holds for a K band of `rows` rows and a row
 * stride of `row_bytes`: every member of its block, or gathering, every
 * member of its home band i and one member's whole block. */
static uint64_t weight_bytes(uint32_t rows, uint64_t row_bytes, uint32_t members, const ipu_matmul_grid *g,
                             uint32_t i)
{
    if (!g->gather)
        return rows * row_bytes * members;
    uint32_t lo, hi;
    ipu_band(rows, g->gm, 1, i, &lo, &hi);
    return (uint64_t)(hi - lo) * row_bytes * members + rows * row_bytes;
}

/* The fullest tile of a serial grid (gs > 1).  Tile (i, j, l) holds B block
 * (l, j) and its result rows (all of band i with gk = 1, else sub-band l)
 * for the whole op; per piece t it holds that piece of A, and with gk > 1
 * the piece's partials and then, beside them, the staged chunks t of the
 * other gk - 1 partials (lower/matmul.c); and the loop's support beyond its
 * share of what the device leaves beside the budget (matmul.c).  Every term
 * grows with the column band's width, so the widest band is the fullest. */
static uint64_t serial_footprint(uint32_t m, uint32_t n, uint32_t k, size_t in, size_t out, uint32_t members,
                                 const ipu_matmul_grid *g)
{
    uint32_t widest = 0, n0, n1;
    for (uint32_t j = 0; j < g->gn; j++) {
        ipu_band(n, g->gn, IPU_PLAN_COL_ALIGN, j, &n0, &n1);
        widest = n1 - n0 > widest ? n1 - n0 : widest;
    }
    uint64_t c_row = stride(widest, out), best = 0;
    for (uint32_t i = 0; i < g->gm; i++) {
        uint32_t r0, r1, lo, hi;
        ipu_band(m, g->gm, 1, i, &r0, &r1);
        for (uint32_t l = 0; l < g->gk; l++) {
            uint32_t k0, k1, s0, s1;
            ipu_band(k, g->gk, ipu_plan_k_align(in), l, &k0, &k1);
            ipu_band(r1 - r0, g->gk, 1, l, &s0, &s1);
            uint64_t whole = weight_bytes(k1 - k0, stride(widest, in), members, g, i) +
                             (uint64_t)(g->gk == 1 ? r1 - r0 : s1 - s0) * c_row, piece_peak = 0;
            for (uint32_t t = 0; t < g->gs; t++) {
                /* Piece t's rows: chunk t of every sub-band (the same on every owner). */
                uint64_t rows = ipu_matmul_piece_rows(m, g, i, g->gk, t);
                ipu_matmul_chunk(m, g, i, l, t, &lo, &hi);
                uint64_t a = rows * stride(k1 - k0, in), partial = g->gk > 1 ? rows * c_row : 0,
                         staged = (uint64_t)(g->gk - 1) * (hi - lo) * c_row;
                uint64_t peak = a + partial > partial + staged ? a + partial : partial + staged;
                piece_peak = peak > piece_peak ? peak : piece_peak;
            }
            best = whole + piece_peak > best ? whole + piece_peak : best;
        }
    }
    return best + g->support_bytes;
}

uint64_t ipu_matmul_tile_footprint(uint32_t m, uint32_t n, uint32_t k, int in_dtype, int out_dtype,
                                   uint32_t members, const ipu_matmul_grid *g)
{
    size_t in = ipu_dtype_size(in_dtype), out = ipu_dtype_size(out_dtype);
    if (g->gs > 1)
        return serial_footprint(m, n, k, in, out, members, g);
    uint64_t best = 0;
    /* Tile (i, j, l) holds A block (i, l), B block (l, j) (weight_bytes), and its result
     * block, or with gk > 1 its partial, the staged sub-band l of the other
     * partials and its reduced piece (lower/matmul.c). */
    for (uint32_t i = 0; i < g->gm; i++) {
        uint32_t r0, r1;
        ipu_band(m, g->gm, 1, i, &r0, &r1);
        for (uint32_t l = 0; l < g->gk; l++) {
            uint32_t k0, k1, s0, s1;
            ipu_band(k, g->gk, ipu_plan_k_align(in), l, &k0, &k1);
            ipu_band(r1 - r0, g->gk, 1, l, &s0, &s1);
            for (uint32_t j = 0; j < g->gn; j++) {
                uint32_t n0, n1;
                ipu_band(n, g->gn, IPU_PLAN_COL_ALIGN, j, &n0, &n1);
                uint64_t c_row = stride(n1 - n0, out);
                uint64_t bytes = (r1 - r0) * stride(k1 - k0, in) +
                                 weight_bytes(k1 - k0, stride(n1 - n0, in), members, g, i) + (r1 - r0) * c_row;
                if (g->gk > 1)
                    bytes += (uint64_t)g->gk * (s1 - s0) * c_row;
                best = bytes > best ? bytes : best;
            }
        }
    }
    return best;
}

/* Fastest first, then smaller, then fewer tiles, then the grid itself (a total order). */
static int by_cycles(const void *pa, const void *pb)
{
    const ipu_matmul_grid *a = pa, *b = pb;
    if (a->cycles != b->cycles)
        return a->cycles < b->cycles ? -1 : 1;
    if (a->tile_bytes != b->tile_bytes)
        return a->tile_bytes < b->tile_bytes ? -1 : 1;
    uint64_t ta = (uint64_t)a->gm * a->gn * a->gk, tb = (uint64_t)b->gm * b->gn * b->gk;
    if (ta != tb)
        return ta < tb ? -1 : 1;
    if (a->gm != b->gm)
        return a->gm < b->gm ? -1 : 1;
    if (a->gn != b->gn)
        return a->gn < b->gn ? -1 : 1;
    if (a->gs != b->gs)
        return a->gs < b->gs ? -1 : 1;
    return a->gather < b->gather ? -1 : a->gather > b->gather;
}

/* What a frontier trades against cycles (coarse model): B's resident block,
 * the rest of the op's footprint, or all of it. */
enum { KEY_RESIDENT, KEY_TRANSIENT, KEY_TOTAL };

static uint64_t key_of(const ipu_matmul_grid *g, int key)
{
    return key == KEY_RESIDENT ? g->b_bytes : key == KEY_TRANSIENT ? g->tile_bytes - g->b_bytes : g->tile_bytes;
}

/* Sort fastest first and keep each key's frontier (the partitions smaller
 * on that key than every faster one), each thinned to cap evenly along it
 * with its fastest and smallest kept.  A parameter's block stays resident
 * while the rest comes and goes, so a parameter matmul keeps three
 * frontiers (resident block, the rest, the whole); others one (the whole
 * footprint).  Sets *n to the new count, in cycles order. */
static ipu_status frontier(ipu_ctx *ctx, ipu_matmul_grid *v, uint32_t *n_io, uint32_t cap, int resident)
{
    uint32_t n = *n_io;
    uint32_t *scratch = ipu_malloc(ctx, (n ? n : 1) * sizeof *scratch);
    uint8_t *keep = ipu_calloc(ctx, n ? n : 1, 1);
    if (!scratch || !keep) {
        free(scratch), free(keep);
        return IPU_NO_MEMORY(ctx);
    }
    qsort(v, n, sizeof *v, by_cycles);
    for (int key = resident ? KEY_RESIDENT : KEY_TOTAL; key <= KEY_TOTAL; key++) {
        uint32_t found = 0;
        for (uint32_t i = 0; i < n; i++)
            if (!found || key_of(&v[i], key) < key_of(&v[scratch[found - 1]], key))
                scratch[found++] = i;
        uint32_t kept = found < cap ? found : cap;
        for (uint32_t i = 0; i < kept; i++)
            keep[scratch[kept < 2 ? 0 : (uint64_t)i * (found - 1) / (kept - 1)]] = 1;
    }
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; i++)
        if (keep[i])
            v[count++] = v[i];
    free(scratch), free(keep);
    *n_io = count;
    return IPU_OK;
}

/* Whether a is at least as good as b on cycles, exact footprint and (for a
 * parameter) resident block; the caller breaks ties by order. */
static int dominates(const ipu_matmul_grid *a, const ipu_matmul_grid *b, int resident)
{
    uint64_t ar = resident ? a->b_bytes : 0, br = resident ? b->b_bytes : 0;
    return a->cycles <= b->cycles && ar <= br && a->exact_bytes <= b->exact_bytes;
}

/* Append a group's frontier to the merged list. */
static ipu_status merge(ipu_ctx *ctx, ipu_matmul_grid **merged, size_t *count, size_t *capacity,
                        const ipu_matmul_grid *kept, uint32_t n)
{
    if (*count + n > *capacity) {
        size_t grown = (*count + n) * 2;
        ipu_matmul_grid *bigger = ipu_realloc(ctx, *merged, grown * sizeof **merged);
        if (!bigger)
            return IPU_NO_MEMORY(ctx);
        *merged = bigger, *capacity = grown;
    }
    memcpy(*merged + *count, kept, n * sizeof *kept);
    *count += n;
    return IPU_OK;
}

/* Append a grid to the current group, growing it up to group entries. */
static ipu_status add_to_group(ipu_ctx *ctx, ipu_matmul_grid **current, size_t *capacity, uint32_t *filled,
                               uint32_t group, const ipu_matmul_grid *grid)
{
    if (*filled == *capacity) {
        size_t grown = *capacity * 2 < group ? *capacity * 2 : group;
        ipu_matmul_grid *bigger = ipu_realloc(ctx, *current, grown * sizeof **current);
        if (!bigger)
            return IPU_NO_MEMORY(ctx);
        *current = bigger, *capacity = grown;
    }
    (*current)[(*filled)++] = *grid;
    return IPU_OK;
}

ipu_status ipu_catalogue_matmul(ipu_ctx *ctx, const ipu_profile *p, uint32_t m, uint32_t n, uint32_t k,
                                int in_dtype, int out_dtype, uint32_t members, int resident,
                                const ipu_catalogue_options *o, ipu_catalogue *out)
{
    memset(out, 0, sizeof *out);
    uint32_t group = o->group_size ? o->group_size : 1, cap = o->frontier_cap ? o->frontier_cap : 1;
    /* The current group (grown as it fills), then the merged frontiers. */
    size_t current_capacity = group < 1024 ? group : 1024, merged_capacity = 64, merged_count = 0;
    ipu_matmul_grid *current = ipu_malloc(ctx, current_capacity * sizeof *current);
    ipu_matmul_grid *merged = ipu_malloc(ctx, merged_capacity * sizeof *merged);
    ipu_status status = current && merged ? IPU_OK : IPU_NO_MEMORY(ctx);
    uint32_t filled = 0;
    for (uint32_t gm = 1; gm <= m && gm <= p->tiles && status == IPU_OK; gm++)
        for (uint32_t gn = 1; (uint64_t)gm * gn <= p->tiles && status == IPU_OK; gn++)
            for (uint32_t gk = 1; (uint64_t)gm * gn * gk <= p->tiles && status == IPU_OK; gk++) {
                uint32_t fitted = 0;
                for (uint32_t gather = 0; gather <= (resident && gm > 1) && status == IPU_OK; gather++)
                    for (uint32_t s = 0; s < IPU_MATMUL_SERIAL_COUNTS && status == IPU_OK; s++) {
                        ipu_matmul_grid grid;
                        /* More pieces only make chunks thinner. */
                        if (!ipu_matmul_grid_cost(p, o->budget, m, n, k, in_dtype, out_dtype, members, gm, gn, gk,
                                                  ipu_matmul_serial_counts[s], gather, &grid))
                            break;
                        out->enumerated++;
                        fitted++;
                        if (grid.a_bytes > o->budget || grid.b_bytes > o->budget || grid.gathered_bytes > o->budget ||
                            (resident && o->weight_limit && grid.b_bytes > o->weight_limit)) {
                            out->filtered++;
                            continue;
                        }
                        status = add_to_group(ctx, &current, &current_capacity, &filled, group, &grid);
                        if (status == IPU_OK && filled == group) {
                            out->groups++;
                            status = frontier(ctx, current, &filled, cap, resident);
                            if (status == IPU_OK)
                                status = merge(ctx, &merged, &merged_count, &merged_capacity, current, filled);
                            filled = 0;
                        }
                    }
                if (!fitted && gk > 1)
                    break; /* larger gk only makes bands thinner */
            }
    if (status == IPU_OK && filled) {
        out->groups++;
        status = frontier(ctx, current, &filled, cap, resident);
        if (status == IPU_OK)
            status = merge(ctx, &merged, &merged_count, &merged_capacity, current, filled);
    }
    free(current);
    out->frontier = (uint32_t)merged_count;
    out->shortlisted = (uint32_t)merged_count;
    if (status == IPU_OK)
        status = frontier(ctx, merged, &out->shortlisted, cap, resident);
    /* Detailed pruning: the exact footprint of the fullest tile. */
    uint8_t *keep = status == IPU_OK ? ipu_malloc(ctx, out->shortlisted ? out->shortlisted : 1) : NULL;
    if (status == IPU_OK && !keep)
        status = IPU_NO_MEMORY(ctx);
    for (uint32_t i = 0; status == IPU_OK && i < out->shortlisted; i++)
        merged[i].exact_bytes = ipu_matmul_tile_footprint(m, n, k, in_dtype, out_dtype, members, &merged[i]);
    for (uint32_t i = 0; status == IPU_OK && i < out->shortlisted; i++) {
        keep[i] = 1;
        for (uint32_t j = 0; j < out->shortlisted && keep[i]; j++)
            keep[i] = !(j != i && dominates(&merged[j], &merged[i], resident) &&
                        (j < i || !dominates(&merged[i], &merged[j], resident)));
    }
    for (uint32_t i = 0; status == IPU_OK && i < out->shortlisted; i++)
        if (keep[i])
            merged[out->count++] = merged[i];
    free(keep);
    if (status != IPU_OK) {
        free(merged);
        memset(out, 0, sizeof *out);
        return status;
    }
    out->grids = merged;
    return IPU_OK;
}
