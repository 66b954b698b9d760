/* layout.c: band arithmetic, block geometry and redistributions between
 * layouts (see layout.h).  A redistribution walks every destination block
 * against the source blocks it overlaps; full-width overlaps of equally
 * padded blocks move as one contiguous piece, others row by row; identical
 * pieces wanted on several tiles merge into one multicast transfer.
 */
#include <stdlib.h>
#include <string.h>

#include "plan/layout.h"

void ipu_band(uint32_t total, uint32_t parts, uint32_t align, uint32_t index, uint32_t *lo,
              uint32_t *hi)
{
    uint64_t units = (total + (uint64_t)align - 1) / align;
    uint64_t a = (uint64_t)index * units / parts * align, b = (uint64_t)(index + 1) * units / parts * align;
    *lo = (uint32_t)(a < total ? a : total);
    *hi = (uint32_t)(b < total ? b : total);
}

uint32_t ipu_layout_stride(const ipu_layout *l, uint32_t cols)
{
    return (cols * l->elem + 7u) & ~7u;
}

void ipu_layout_block(const ipu_layout *l, uint32_t i, uint32_t j, uint32_t *row_lo,
                      uint32_t *row_hi, uint32_t *col_lo, uint32_t *col_hi)
{
    ipu_band(l->rows, l->row_parts, 1, i, row_lo, row_hi);
    ipu_band(l->cols, l->col_parts, l->col_align, j, col_lo, col_hi);
}

uint32_t ipu_layout_block_bytes(const ipu_layout *l, uint32_t i, uint32_t j)
{
    uint32_t r0, r1, c0, c1;
    ipu_layout_block(l, i, j, &r0, &r1, &c0, &c1);
    return (r1 - r0) * ipu_layout_stride(l, c1 - c0);
}

uint32_t ipu_layout_tile(const ipu_layout *l, uint32_t i, uint32_t j, uint32_t r)
{
    return l->tile_base + i * l->row_step + j * l->col_step + r * l->replica_step;
}

ipu_status ipu_layout_check(ipu_ctx *ctx, const ipu_layout *l, uint32_t tiles)
{
    if (!l->rows || !l->cols || !l->elem || !l->row_parts || !l->col_parts || !l->col_align ||
        !l->replicas || (l->col_align * l->elem) % 4)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "layout %ux%u: zero field, or column alignment %u x %u bytes is not a "
                        "multiple of 4",
                        l->rows, l->cols, l->col_align, l->elem);
    uint64_t blocks = (uint64_t)l->row_parts * l->col_parts * l->replicas;
    if (blocks > tiles)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "layout %ux%u needs %llu blocks on %u tiles",
                        l->rows, l->cols, (unsigned long long)blocks, tiles);
    uint8_t *used = calloc(tiles, 1);
    if (!used)
        return IPU_NO_MEMORY(ctx);
    ipu_status status = IPU_OK;
    for (uint32_t r = 0; r < l->replicas && status == IPU_OK; r++)
        for (uint32_t i = 0; i < l->row_parts && status == IPU_OK; i++)
            for (uint32_t j = 0; j < l->col_parts && status == IPU_OK; j++) {
                uint32_t r0, r1, c0, c1;
                ipu_layout_block(l, i, j, &r0, &r1, &c0, &c1);
                uint64_t t = (uint64_t)l->tile_base + (uint64_t)i * l->row_step +
                             (uint64_t)j * l->col_step + (uint64_t)r * l->replica_step;
                if (r0 == r1 || c0 == c1)
                    status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                      "layout %ux%u: block (%u, %u) is empty", l->rows, l->cols, i, j);
                else if (t >= tiles || used[t])
                    status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                      "layout %ux%u: block (%u, %u) replica %u maps to tile %llu, "
                                      "outside the device or already used",
                                      l->rows, l->cols, i, j, r, (unsigned long long)t);
                else
                    used[t] = 1;
            }
    free(used);
    return status;
}

void ipu_redistribution_free(ipu_redistribution *r)
{
    free(r->pieces);
    free(r->copies);
    free(r->dsts);
    memset(r, 0, sizeof *r);
}

/* A piece keyed by its source, for merging multicast destinations. */
typedef struct keyed {
    uint32_t src_tile, src_block, src_offset, bytes;
    ipu_piece_dst dst;
} keyed;

static int by_source(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->src_tile != y->src_tile)
        return x->src_tile < y->src_tile ? -1 : 1;
    if (x->src_offset != y->src_offset)
        return x->src_offset < y->src_offset ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? -1 : 1;
    return x->dst.tile < y->dst.tile ? -1 : x->dst.tile > y->dst.tile;
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
    int whole_rows = c0 == sc0 && c1 == sc1 && c0 == dc0 && c1 == dc1 && s_stride == d_stride;
    for (uint32_t r = 0; r < d->replicas; r++) {
        ipu_piece_dst dst = {ipu_layout_tile(d, i, j, r), i * d->col_parts + j, 0};
        if (whole_rows) {
            dst.offset = (r0 - dr0) * d_stride;
            IPU_TRY(add_keyed(ctx, items, count, capacity,
                              (keyed){src_tile, p * s->col_parts + q, (r0 - sr0) * s_stride,
                                      (r1 - r0) * s_stride, dst}));
            continue;
        }
        uint32_t bytes = ((c1 - c0) * s->elem + 3u) & ~3u;
        for (uint32_t row = r0; row < r1; row++) {
            dst.offset = (row - dr0) * d_stride + (c0 - dc0) * d->elem;
            IPU_TRY(add_keyed(ctx, items, count, capacity,
                              (keyed){src_tile, p * s->col_parts + q,
                                      (row - sr0) * s_stride + (c0 - sc0) * s->elem, bytes, dst}));
        }
    }
    return IPU_OK;
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
                uint32_t r0, r1;
                ipu_band(src->rows, src->row_parts, 1, p, &r0, &r1);
                if (r1 <= dr0 || r0 >= dr1)
                    continue;
                for (uint32_t q = 0; q < src->col_parts && status == IPU_OK; q++) {
                    uint32_t c0, c1;
                    ipu_band(src->cols, src->col_parts, src->col_align, q, &c0, &c1);
                    if (c1 <= dc0 || c0 >= dc1)
                        continue;
                    status = overlap_pieces(ctx, src, dst, p, q, i, j, &items, &count, &capacity);
                }
            }
        }
    if (status == IPU_OK && count > 1)
        qsort(items, count, sizeof *items, by_source);
    for (size_t a = 0; a < count && status == IPU_OK;) {
        size_t b = a;
        while (b < count && items[b].src_tile == items[a].src_tile &&
               items[b].src_offset == items[a].src_offset && items[b].bytes == items[a].bytes)
            b++;
        for (size_t k = a; k < b && status == IPU_OK; k++) {
            if (items[k].dst.tile != items[a].src_tile)
                continue;
            /* A destination on the source's own tile: a local copy. */
            status = IPU_GROW(ctx, out->dsts, out->dst_count, out->dst_capacity);
            if (status == IPU_OK)
                status = IPU_GROW(ctx, out->copies, out->copy_count, out->copy_capacity);
            if (status == IPU_OK) {
                out->dsts[out->dst_count] = items[k].dst;
                out->copies[out->copy_count++] = (ipu_piece){items[a].src_tile, items[a].src_block,
                                                              items[a].src_offset, items[a].bytes,
                                                              (uint32_t)out->dst_count++, 1};
            }
        }
        uint32_t remote = 0, first = (uint32_t)out->dst_count;
        for (size_t k = a; k < b && status == IPU_OK; k++) {
            if (items[k].dst.tile == items[a].src_tile)
                continue;
            status = IPU_GROW(ctx, out->dsts, out->dst_count, out->dst_capacity);
            if (status == IPU_OK)
                out->dsts[out->dst_count++] = items[k].dst, remote++;
        }
        if (status == IPU_OK && remote) {
            status = IPU_GROW(ctx, out->pieces, out->piece_count, out->piece_capacity);
            if (status == IPU_OK)
                out->pieces[out->piece_count++] = (ipu_piece){items[a].src_tile, items[a].src_block,
                                                               items[a].src_offset, items[a].bytes,
                                                               first, remote};
        }
        a = b;
    }
    free(items);
    if (status != IPU_OK)
        ipu_redistribution_free(out);
    return status;
}
