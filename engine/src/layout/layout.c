/* layout.c: band arithmetic, block geometry and redistributions between
 * layouts (see layout.h).  A redistribution walks every destination block
 * against the source blocks it overlaps; full-width overlaps of equally
 * padded blocks move as one contiguous piece, others row by row; identical
 * pieces wanted on several tiles merge into one multicast transfer.  A
 * staging layout turns a row-by-row move into two hops: each staging tile
 * gathers a few rows row by row, then whole blocks of rows travel on.
 */
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"

void ipu_band(uint32_t total, uint32_t parts, uint32_t align, uint32_t index, uint32_t *lo,
              uint32_t *hi)
{
    uint64_t units = (total + (uint64_t)align - 1) / align;
    uint64_t a = (uint64_t)index * units / parts * align, b = (uint64_t)(index + 1) * units / parts * align;
    *lo = (uint32_t)(a < total ? a : total);
    *hi = (uint32_t)(b < total ? b : total);
}

ipu_status ipu_layout_alloc(ipu_ctx *ctx, ipu_layout *l, uint32_t rows, uint32_t cols, uint32_t elem,
                            uint32_t row_parts, uint32_t col_parts, uint32_t replicas)
{
    memset(l, 0, sizeof *l);
    if (!rows || !cols || !elem || !row_parts || !col_parts || !replicas)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "layout %ux%u with a zero dimension", rows,
                        cols);
    *l = (ipu_layout){rows, cols, elem, row_parts, col_parts, replicas, NULL, NULL, NULL};
    l->row_bounds = ipu_calloc(ctx, (size_t)row_parts + 1, sizeof *l->row_bounds);
    l->col_bounds = ipu_calloc(ctx, (size_t)col_parts + 1, sizeof *l->col_bounds);
    l->tiles = ipu_calloc(ctx, (size_t)replicas * row_parts * col_parts, sizeof *l->tiles);
    if (!l->row_bounds || !l->col_bounds || !l->tiles) {
        ipu_layout_free(l);
        return IPU_NO_MEMORY(ctx);
    }
    return IPU_OK;
}

ipu_status ipu_layout_grid(ipu_ctx *ctx, ipu_layout *l, uint32_t rows, uint32_t cols, uint32_t elem,
                           uint32_t row_parts, uint32_t col_parts, uint32_t col_align,
                           uint32_t replicas, uint32_t base, uint32_t row_step, uint32_t col_step,
                           uint32_t replica_step)
{
    IPU_TRY(ipu_layout_alloc(ctx, l, rows, cols, elem, row_parts, col_parts, replicas));
    uint32_t lo;
    for (uint32_t i = 0; i < row_parts; i++)
        ipu_band(rows, row_parts, 1, i, &lo, &l->row_bounds[i + 1]);
    for (uint32_t j = 0; j < col_parts; j++)
        ipu_band(cols, col_parts, col_align ? col_align : 1, j, &lo, &l->col_bounds[j + 1]);
    for (uint32_t r = 0; r < replicas; r++)
        for (uint32_t i = 0; i < row_parts; i++)
            for (uint32_t j = 0; j < col_parts; j++)
                l->tiles[((size_t)r * row_parts + i) * col_parts + j] =
                    base + i * row_step + j * col_step + r * replica_step;
    return IPU_OK;
}

ipu_status ipu_layout_copy(ipu_ctx *ctx, ipu_layout *dst, const ipu_layout *src)
{
    IPU_TRY(ipu_layout_alloc(ctx, dst, src->rows, src->cols, src->elem, src->row_parts,
                             src->col_parts, src->replicas));
    memcpy(dst->row_bounds, src->row_bounds, ((size_t)src->row_parts + 1) * sizeof *dst->row_bounds);
    memcpy(dst->col_bounds, src->col_bounds, ((size_t)src->col_parts + 1) * sizeof *dst->col_bounds);
    memcpy(dst->tiles, src->tiles,
           (size_t)src->replicas * src->row_parts * src->col_parts * sizeof *dst->tiles);
    return IPU_OK;
}

ipu_status ipu_layout_follow(ipu_ctx *ctx, ipu_layout *dst, const ipu_layout *src, uint32_t elem)
{
    IPU_TRY(ipu_layout_alloc(ctx, dst, src->rows, src->cols, elem, src->row_parts, src->col_parts, 1));
    memcpy(dst->row_bounds, src->row_bounds, ((size_t)src->row_parts + 1) * sizeof *dst->row_bounds);
    memcpy(dst->col_bounds, src->col_bounds, ((size_t)src->col_parts + 1) * sizeof *dst->col_bounds);
    memcpy(dst->tiles, src->tiles, (size_t)src->row_parts * src->col_parts * sizeof *dst->tiles);
    return IPU_OK;
}

ipu_status ipu_layout_stack_rows(ipu_ctx *ctx, ipu_layout *dst, const ipu_layout *src, uint32_t copies)
{
    if ((uint64_t)src->rows * copies > UINT32_MAX || (uint64_t)src->row_parts * copies > UINT32_MAX)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "layout: %u copies of %u rows is too many", copies,
                        src->rows);
    IPU_TRY(ipu_layout_alloc(ctx, dst, src->rows * copies, src->cols, src->elem, src->row_parts * copies,
                             src->col_parts, 1));
    size_t blocks = (size_t)src->row_parts * src->col_parts;
    for (uint32_t c = 0; c < copies; c++) {
        for (uint32_t i = 0; i < src->row_parts; i++)
            dst->row_bounds[c * src->row_parts + i] = c * src->rows + src->row_bounds[i];
        memcpy(dst->tiles + c * blocks, src->tiles, blocks * sizeof *dst->tiles);
    }
    dst->row_bounds[dst->row_parts] = dst->rows;
    memcpy(dst->col_bounds, src->col_bounds, ((size_t)src->col_parts + 1) * sizeof *dst->col_bounds);
    return IPU_OK;
}

void ipu_layout_rotate(ipu_layout *l, uint32_t by, uint32_t tiles)
{
    size_t blocks = (size_t)l->replicas * l->row_parts * l->col_parts;
    for (size_t b = 0; b < blocks; b++)
        if (l->tiles[b] != IPU_LAYOUT_ABSENT)
            l->tiles[b] = (uint32_t)(((uint64_t)l->tiles[b] + by) % tiles);
}

int ipu_layout_same_columns(const ipu_layout *a, const ipu_layout *b)
{
    return a->col_parts == b->col_parts &&
           !memcmp(a->col_bounds, b->col_bounds, ((size_t)a->col_parts + 1) * sizeof *a->col_bounds);
}

int ipu_layout_same(const ipu_layout *a, const ipu_layout *b)
{
    return a->rows == b->rows && a->cols == b->cols && a->elem == b->elem &&
           a->row_parts == b->row_parts && a->col_parts == b->col_parts && a->replicas == b->replicas &&
           !memcmp(a->row_bounds, b->row_bounds, (a->row_parts + 1) * sizeof *a->row_bounds) &&
           !memcmp(a->col_bounds, b->col_bounds, (a->col_parts + 1) * sizeof *a->col_bounds) &&
           !memcmp(a->tiles, b->tiles,
                   (size_t)a->replicas * a->row_parts * a->col_parts * sizeof *a->tiles);
}

uint64_t ipu_layout_largest_block(const ipu_layout *l, uint32_t members)
{
    uint64_t best = 0;
    for (uint32_t i = 0; i < l->row_parts; i++)
        for (uint32_t j = 0; j < l->col_parts; j++) {
            uint64_t bytes = (uint64_t)ipu_layout_block_bytes(l, i, j) * members;
            best = bytes > best ? bytes : best;
        }
    return best;
}

void ipu_layout_free(ipu_layout *l)
{
    free(l->row_bounds);
    free(l->col_bounds);
    free(l->tiles);
    l->row_bounds = l->col_bounds = l->tiles = NULL;
}

uint32_t ipu_layout_stride(const ipu_layout *l, uint32_t cols)
{
    return (cols * l->elem + 7u) & ~7u;
}

void ipu_layout_block(const ipu_layout *l, uint32_t i, uint32_t j, uint32_t *row_lo,
                      uint32_t *row_hi, uint32_t *col_lo, uint32_t *col_hi)
{
    *row_lo = l->row_bounds[i], *row_hi = l->row_bounds[i + 1];
    *col_lo = l->col_bounds[j], *col_hi = l->col_bounds[j + 1];
}

uint32_t ipu_layout_block_bytes(const ipu_layout *l, uint32_t i, uint32_t j)
{
    uint32_t r0, r1, c0, c1;
    ipu_layout_block(l, i, j, &r0, &r1, &c0, &c1);
    return (r1 - r0) * ipu_layout_stride(l, c1 - c0);
}

ipu_status ipu_layout_check(ipu_ctx *ctx, const ipu_layout *l, uint32_t tiles)
{
#define BAD(...) IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "layout %ux%u: " __VA_ARGS__)
    if (!l->row_bounds || !l->col_bounds || !l->tiles)
        return BAD("no bounds", l->rows, l->cols);
    if (l->row_bounds[0] || l->row_bounds[l->row_parts] != l->rows || l->col_bounds[0] ||
        l->col_bounds[l->col_parts] != l->cols)
        return BAD("bounds do not span the tensor", l->rows, l->cols);
    for (uint32_t i = 0; i < l->row_parts; i++)
        if (l->row_bounds[i] >= l->row_bounds[i + 1])
            return BAD("row band %u is empty", l->rows, l->cols, i);
    for (uint32_t j = 0; j < l->col_parts; j++) {
        if (l->col_bounds[j] >= l->col_bounds[j + 1])
            return BAD("column band %u is empty", l->rows, l->cols, j);
        if ((l->col_bounds[j] * l->elem) % 4)
            return BAD("column boundary %u (%u elements of %u bytes) is not on a 32-bit word",
                       l->rows, l->cols, j, l->col_bounds[j], l->elem);
    }
    uint8_t *used = ipu_calloc(ctx, tiles, 1);
    if (!used)
        return IPU_NO_MEMORY(ctx);
    size_t blocks = (size_t)l->replicas * l->row_parts * l->col_parts;
    ipu_status status = IPU_OK;
    for (size_t b = 0; b < blocks && status == IPU_OK; b++) {
        uint32_t t = l->tiles[b];
        if (t >= tiles || used[t])
            status = BAD("block %zu maps to tile %u, outside the device or already used", l->rows,
                         l->cols, b, t);
        else
            used[t] = 1;
    }
    free(used);
    return status;
#undef BAD
}

void ipu_redistribution_free(ipu_redistribution *r)
{
    free(r->pieces);
    free(r->copies);
    free(r->dsts);
    memset(r, 0, sizeof *r);
}

/* A piece of a source block wanted by one destination block, in every
 * present replica of that block (a multicast to them). */
typedef struct keyed {
    uint32_t src_tile, src_block, src_offset, bytes;
    uint32_t dst_block, dst_offset;
} keyed;

/* By source tile, offset, bytes; pieces that tie are one range, whose
 * destinations merge_pieces puts in tile order, so their order is free. */
static int by_source(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->src_tile != y->src_tile)
        return x->src_tile < y->src_tile ? -1 : 1;
    if (x->src_offset != y->src_offset)
        return x->src_offset < y->src_offset ? -1 : 1;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

static ipu_status add_keyed(ipu_ctx *ctx, keyed **items, size_t *count, size_t *capacity, keyed k)
{
    IPU_TRY(ipu_grow(ctx, (void **)items, sizeof **items, *count, capacity));
    (*items)[(*count)++] = k;
    return IPU_OK;
}

/* Every piece of the overlap of source block (p, q) and destination block (i, j). */
static ipu_status overlap_pieces(ipu_ctx *ctx, const ipu_layout *s, const ipu_layout *d, uint32_t p,
                                 uint32_t q, uint32_t i, uint32_t j, keyed **items, size_t *count,
                                 size_t *capacity)
{
    uint32_t sr0, sr1, sc0, sc1, dr0, dr1, dc0, dc1;
    ipu_layout_block(s, p, q, &sr0, &sr1, &sc0, &sc1);
    ipu_layout_block(d, i, j, &dr0, &dr1, &dc0, &dc1);
    uint32_t r0 = sr0 > dr0 ? sr0 : dr0, r1 = sr1 < dr1 ? sr1 : dr1;
    uint32_t c0 = sc0 > dc0 ? sc0 : dc0, c1 = sc1 < dc1 ? sc1 : dc1;
    if (r0 >= r1 || c0 >= c1)
        return IPU_OK;
    uint32_t s_stride = ipu_layout_stride(s, sc1 - sc0), d_stride = ipu_layout_stride(d, dc1 - dc0);
    uint32_t src_tile = ipu_layout_tile(s, p, q, 0);
    if (src_tile == IPU_LAYOUT_ABSENT)
        return IPU_OK; /* a staging layout holds only what its destination needs */
    uint32_t src_block = p * s->col_parts + q, dst_block = i * d->col_parts + j;
    if (c0 == sc0 && c1 == sc1 && c0 == dc0 && c1 == dc1 && s_stride == d_stride) /* whole rows */
        return add_keyed(ctx, items, count, capacity,
                         (keyed){src_tile, src_block, (r0 - sr0) * s_stride, (r1 - r0) * s_stride, dst_block,
                                 (r0 - dr0) * d_stride});
    uint32_t bytes = ((c1 - c0) * s->elem + 3u) & ~3u;
    for (uint32_t row = r0; row < r1; row++)
        IPU_TRY(add_keyed(ctx, items, count, capacity,
                          (keyed){src_tile, src_block, (row - sr0) * s_stride + (c0 - sc0) * s->elem, bytes,
                                  dst_block, (row - dr0) * d_stride + (c0 - dc0) * d->elem}));
    return IPU_OK;
}

/* Per destination block, its present replicas in tile order: block b's are
 * order[first[b] .. first[b + 1]). */
static ipu_status replicas_by_tile(ipu_ctx *ctx, const ipu_layout *d, uint32_t **first, uint32_t **order)
{
    size_t blocks = (size_t)d->row_parts * d->col_parts;
    *first = ipu_malloc(ctx, (blocks + 1) * sizeof **first);
    *order = ipu_malloc(ctx, (blocks * d->replicas + 1) * sizeof **order);
    if (!*first || !*order)
        return IPU_NO_MEMORY(ctx);
    uint32_t n = 0;
    for (size_t b = 0; b < blocks; b++) {
        (*first)[b] = n;
        for (uint32_t r = 0; r < d->replicas; r++) {
            uint32_t tile = d->tiles[(size_t)r * blocks + b], at = n++;
            if (tile == IPU_LAYOUT_ABSENT) {
                n--;
                continue;
            }
            for (; at > (*first)[b] && d->tiles[(size_t)(*order)[at - 1] * blocks + b] > tile; at--)
                (*order)[at] = (*order)[at - 1];
            (*order)[at] = r;
        }
    }
    (*first)[blocks] = n;
    return IPU_OK;
}

/* Destinations of pieces [a, b) (one source range): every present replica of
 * each piece's block, in tile order. */
static ipu_status group_dsts(ipu_ctx *ctx, const ipu_layout *d, const keyed *items, size_t a, size_t b,
                             const uint32_t *first, const uint32_t *order, ipu_piece_dst **dsts,
                             size_t *count, size_t *capacity)
{
    size_t blocks = (size_t)d->row_parts * d->col_parts;
    *count = 0;
    for (size_t k = a; k < b; k++) {
        uint32_t block = items[k].dst_block;
        for (uint32_t n = first[block]; n < first[block + 1]; n++) {
            IPU_TRY(ipu_grow(ctx, (void **)dsts, sizeof **dsts, *count, capacity));
            uint32_t r = order[n];
            ipu_piece_dst dst = {d->tiles[(size_t)r * blocks + block], block, r, items[k].dst_offset};
            size_t at = (*count)++;
            for (; b - a > 1 && at > 0 && (*dsts)[at - 1].tile > dst.tile; at--) /* pieces of several blocks */
                (*dsts)[at] = (*dsts)[at - 1];
            (*dsts)[at] = dst;
        }
    }
    return IPU_OK;
}

/* The pieces sorted by source, a range wanted by several destinations made
 * one: a local copy per destination on the source's tile, one transfer to
 * all the others. */
static ipu_status merge_pieces(ipu_ctx *ctx, const ipu_layout *d, const keyed *items, size_t count,
                               ipu_redistribution *out)
{
    uint32_t *first = NULL, *order = NULL;
    ipu_piece_dst *group = NULL;
    size_t group_count = 0, group_capacity = 0;
    ipu_status status = replicas_by_tile(ctx, d, &first, &order);
    for (size_t a = 0; a < count && status == IPU_OK;) {
        size_t b = a;
        while (b < count && items[b].src_tile == items[a].src_tile && items[b].src_offset == items[a].src_offset &&
               items[b].bytes == items[a].bytes)
            b++;
        status = group_dsts(ctx, d, items, a, b, first, order, &group, &group_count, &group_capacity);
        const keyed *k = &items[a];
        for (size_t g = 0; g < group_count && status == IPU_OK; g++) {
            if (group[g].tile != k->src_tile)
                continue;
            status = IPU_GROW(ctx, out->dsts, out->dst_count, out->dst_capacity);
            if (status == IPU_OK)
                status = IPU_GROW(ctx, out->copies, out->copy_count, out->copy_capacity);
            if (status == IPU_OK) {
                out->dsts[out->dst_count] = group[g];
                out->copies[out->copy_count++] =
                    (ipu_piece){k->src_tile, k->src_block, k->src_offset, k->bytes, (uint32_t)out->dst_count++, 1};
            }
        }
        /* The remote destinations, multicast: a receiver takes a piece once,
         * so a tile the bytes reach at several places (a broadcast operand's
         * stacked copies) takes them from as many pieces, one per round. */
        for (size_t g = 0; g < group_count; g++)
            if (group[g].tile == k->src_tile)
                group[g].tile = UINT32_MAX; /* taken: a local copy above */
        for (size_t left = 1; left && status == IPU_OK;) {
            uint32_t remote = 0, start = (uint32_t)out->dst_count;
            left = 0;
            for (size_t g = 0; g < group_count && status == IPU_OK; g++) {
                if (group[g].tile == UINT32_MAX)
                    continue;
                int seen = 0;
                for (uint32_t e = start; e < out->dst_count && !seen; e++)
                    seen = out->dsts[e].tile == group[g].tile;
                if (seen) {
                    left++;
                    continue;
                }
                status = IPU_GROW(ctx, out->dsts, out->dst_count, out->dst_capacity);
                if (status == IPU_OK)
                    out->dsts[out->dst_count++] = group[g], remote++, group[g].tile = UINT32_MAX;
            }
            if (status == IPU_OK && remote) {
                status = IPU_GROW(ctx, out->pieces, out->piece_count, out->piece_capacity);
                if (status == IPU_OK)
                    out->pieces[out->piece_count++] =
                        (ipu_piece){k->src_tile, k->src_block, k->src_offset, k->bytes, start, remote};
            }
        }
        a = b;
    }
    free(group);
    free(first);
    free(order);
    return status;
}

ipu_status ipu_redistribute(ipu_ctx *ctx, const ipu_layout *src, const ipu_layout *dst,
                            ipu_redistribution *out)
{
    memset(out, 0, sizeof *out);
    if (src->rows != dst->rows || src->cols != dst->cols || src->elem != dst->elem)
        return IPU_FAIL(ctx, IPU_ERR_INTERNAL, "redistribution between %ux%u and %ux%u layouts",
                        src->rows, src->cols, dst->rows, dst->cols);
    keyed *items = NULL;
    size_t count = 0, capacity = 0;
    ipu_status status = IPU_OK;
    for (uint32_t i = 0; i < dst->row_parts && status == IPU_OK; i++)
        for (uint32_t j = 0; j < dst->col_parts && status == IPU_OK; j++) {
            uint32_t dr0, dr1, dc0, dc1;
            ipu_layout_block(dst, i, j, &dr0, &dr1, &dc0, &dc1);
            /* Only the source bands that can overlap. */
            for (uint32_t p = 0; p < src->row_parts && status == IPU_OK; p++) {
                uint32_t r0 = src->row_bounds[p], r1 = src->row_bounds[p + 1];
                if (r1 <= dr0 || r0 >= dr1)
                    continue;
                for (uint32_t q = 0; q < src->col_parts && status == IPU_OK; q++) {
                    uint32_t c0 = src->col_bounds[q], c1 = src->col_bounds[q + 1];
                    if (c1 <= dc0 || c0 >= dc1)
                        continue;
                    status = overlap_pieces(ctx, src, dst, p, q, i, j, &items, &count, &capacity);
                }
            }
        }
    if (status == IPU_OK && count > 1)
        qsort(items, count, sizeof *items, by_source);
    if (status == IPU_OK)
        status = merge_pieces(ctx, dst, items, count, out);
    free(items);
    if (status != IPU_OK)
        ipu_redistribution_free(out);
    return status;
}

ipu_status ipu_redistribution_busiest(ipu_ctx *ctx, const ipu_redistribution *r, uint32_t tiles,
                                      uint32_t *out)
{
    uint32_t *rows = ipu_calloc(ctx, tiles ? tiles : 1, sizeof *rows), busiest = 0;
    if (!rows)
        return IPU_NO_MEMORY(ctx);
    for (size_t n = 0; n < r->piece_count; n++) {
        const ipu_piece *p = &r->pieces[n];
        if (p->src_tile < tiles)
            rows[p->src_tile]++;
        for (uint32_t k = 0; k < p->dst_count; k++)
            if (r->dsts[p->first_dst + k].tile < tiles)
                rows[r->dsts[p->first_dst + k].tile]++;
    }
    for (uint32_t t = 0; t < tiles; t++)
        busiest = rows[t] > busiest ? rows[t] : busiest;
    free(rows);
    *out = busiest;
    return IPU_OK;
}

ipu_status ipu_staging_layout(ipu_ctx *ctx, const ipu_layout *dst, uint32_t tiles, ipu_layout *out)
{
    uint32_t parts = tiles / dst->col_parts;
    parts = parts < 1 ? 1 : parts > dst->rows ? dst->rows : parts;
    IPU_TRY(ipu_layout_alloc(ctx, out, dst->rows, dst->cols, dst->elem, parts, dst->col_parts, 1));
    uint32_t lo;
    for (uint32_t i = 0; i < parts; i++)
        ipu_band(dst->rows, parts, 1, i, &lo, &out->row_bounds[i + 1]);
    memcpy(out->col_bounds, dst->col_bounds, ((size_t)dst->col_parts + 1) * sizeof *out->col_bounds);
    size_t blocks = (size_t)parts * dst->col_parts;
    for (size_t b = 0; b < blocks; b++)
        out->tiles[b] = IPU_LAYOUT_ABSENT;
    /* Present where a present destination block needs the rows; blocks
     * spread evenly over the device. */
    uint32_t step = (uint32_t)(tiles / blocks) ? (uint32_t)(tiles / blocks) : 1;
    for (uint32_t r = 0; r < dst->replicas; r++)
        for (uint32_t i = 0; i < dst->row_parts; i++)
            for (uint32_t j = 0; j < dst->col_parts; j++) {
                if (ipu_layout_tile(dst, i, j, r) == IPU_LAYOUT_ABSENT)
                    continue;
                for (uint32_t k = 0; k < parts; k++)
                    if (out->row_bounds[k] < dst->row_bounds[i + 1] &&
                        out->row_bounds[k + 1] > dst->row_bounds[i])
                        out->tiles[(size_t)k * dst->col_parts + j] =
                            (uint32_t)(((size_t)k * dst->col_parts + j) * step % tiles);
            }
    return IPU_OK;
}
