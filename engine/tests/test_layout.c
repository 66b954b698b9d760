/* test_layout.c: layouts and redistributions.  Bands are checked against
 * their definition; random pairs of layouts (uneven tails, column alignment,
 * replicas, element sizes 1, 2 and 4) are redistributed and the pieces
 * applied to host copies of every block: each destination element must equal
 * the source element of the same (row, column), no piece may write outside
 * its block's storage or twice to a byte, and local copies stay on one tile.
 * Two-hop moves through a staging layout deliver the same elements to every
 * present destination block, the second hop in whole rows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "layout/layout.h"
#include "support_seed.h"

/* The value of element (row, col), as bytes of an element of size elem. */
static uint8_t value_byte(uint32_t row, uint32_t col, uint32_t byte)
{
    return (uint8_t)(row * 131u + col * 7u + byte * 59u + 1u);
}

static void test_bands_cover_and_align(void **state)
{
    (void)state;
    for (uint32_t total = 1; total < 200; total += 7)
        for (uint32_t parts = 1; parts <= 9; parts++)
            for (uint32_t align = 1; align <= 8; align *= 2) {
                uint32_t expect = 0;
                for (uint32_t b = 0; b < parts; b++) {
                    uint32_t lo, hi;
                    ipu_band(total, parts, align, b, &lo, &hi);
                    assert_int_equal(lo, expect);
                    assert_true(hi >= lo);
                    assert_true(lo % align == 0 || lo == total);
                    assert_true(hi % align == 0 || hi == total);
                    expect = hi;
                }
                assert_int_equal(expect, total);
            }
}

static uint32_t pick(uint32_t lo, uint32_t hi) { return lo + (uint32_t)(tseed_rnd() % (hi - lo + 1)); }

/* A random layout: a regular grid, or (half the time) random uneven bounds
 * and a random tile assignment. */
static void random_layout(ipu_layout *l, uint32_t rows, uint32_t cols, uint32_t elem, uint32_t tiles,
                          uint32_t max_replicas)
{
    uint32_t align = 4 / elem;
    for (;;) {
        uint32_t units = (cols + align - 1) / align;
        uint32_t row_parts = pick(1, rows < 5 ? rows : 5), col_parts = pick(1, units < 5 ? units : 5);
        uint32_t replicas = pick(1, max_replicas), blocks = row_parts * col_parts;
        if (blocks * replicas > tiles)
            continue;
        ipu_ctx *ctx = ipu_ctx_create();
        if (tseed_rnd() & 1) {
            int by_rows = tseed_rnd() & 1;
            assert_int_equal(ipu_layout_grid(ctx, l, rows, cols, elem, row_parts, col_parts, align,
                                             replicas, pick(0, tiles - blocks * replicas),
                                             by_rows ? col_parts : 1, by_rows ? 1 : row_parts, blocks),
                             IPU_OK);
        } else {
            assert_int_equal(ipu_layout_alloc(ctx, l, rows, cols, elem, row_parts, col_parts, replicas),
                             IPU_OK);
            /* Distinct sorted cut points. */
            for (uint32_t i = 1; i < row_parts; i++)
                l->row_bounds[i] = l->row_bounds[i - 1] + 1 +
                                   (uint32_t)(tseed_rnd() % (rows - l->row_bounds[i - 1] - (row_parts - i)));
            l->row_bounds[row_parts] = rows;
            for (uint32_t j = 1; j < col_parts; j++) {
                uint32_t used = l->col_bounds[j - 1] / align, left = units - used - (col_parts - j);
                l->col_bounds[j] = (used + 1 + (uint32_t)(tseed_rnd() % left)) * align;
            }
            l->col_bounds[col_parts] = cols;
            /* A random permutation prefix of the tiles. */
            uint32_t *perm = malloc(tiles * sizeof *perm);
            for (uint32_t t = 0; t < tiles; t++)
                perm[t] = t;
            for (uint32_t t = 0; t < blocks * replicas; t++) {
                uint32_t u = t + (uint32_t)(tseed_rnd() % (tiles - t)), v = perm[t];
                perm[t] = perm[u], perm[u] = v;
                l->tiles[t] = perm[t];
            }
            free(perm);
        }
        ipu_status ok = ipu_layout_check(ctx, l, tiles);
        ipu_ctx_free(ctx);
        if (ok == IPU_OK)
            return;
        ipu_layout_free(l);
    }
}

/* Host storage of every block of a layout (replicas included). */
typedef struct storage {
    uint8_t **bytes;
    uint8_t **written;
    uint32_t *size;
    uint32_t count;
} storage;

static void storage_init(storage *s, const ipu_layout *l, int fill_source)
{
    s->count = l->row_parts * l->col_parts * l->replicas;
    s->bytes = calloc(s->count, sizeof *s->bytes);
    s->written = calloc(s->count, sizeof *s->written);
    s->size = calloc(s->count, sizeof *s->size);
    for (uint32_t r = 0; r < l->replicas; r++)
        for (uint32_t i = 0; i < l->row_parts; i++)
            for (uint32_t j = 0; j < l->col_parts; j++) {
                uint32_t k = (r * l->row_parts + i) * l->col_parts + j, r0, r1, c0, c1;
                ipu_layout_block(l, i, j, &r0, &r1, &c0, &c1);
                s->size[k] = ipu_layout_block_bytes(l, i, j);
                s->bytes[k] = calloc(s->size[k], 1);
                s->written[k] = calloc(s->size[k], 1);
                uint32_t stride = ipu_layout_stride(l, c1 - c0);
                for (uint32_t row = r0; fill_source && row < r1; row++)
                    for (uint32_t col = c0; col < c1; col++)
                        for (uint32_t b = 0; b < l->elem; b++)
                            s->bytes[k][(row - r0) * stride + (col - c0) * l->elem + b] =
                                value_byte(row, col, b);
            }
}

static void storage_free(storage *s)
{
    for (uint32_t k = 0; k < s->count; k++)
        free(s->bytes[k]), free(s->written[k]);
    free(s->bytes), free(s->written), free(s->size);
}

/* Which replica of dst block index lives on tile. */
static uint32_t dst_slot(const ipu_layout *d, uint32_t block, uint32_t tile)
{
    for (uint32_t r = 0; r < d->replicas; r++)
        if (ipu_layout_tile(d, block / d->col_parts, block % d->col_parts, r) == tile)
            return r * d->row_parts * d->col_parts + block;
    fail_msg("seed %llu: destination tile %u holds no replica of block %u",
             (unsigned long long)tseed(), tile, block);
    return 0;
}

static void apply(const ipu_layout *s, const ipu_layout *d, storage *src, storage *dst,
                  const ipu_redistribution *rd, const ipu_piece *pieces, size_t count, int local)
{
    for (size_t n = 0; n < count; n++) {
        const ipu_piece *p = &pieces[n];
        assert_int_equal(p->bytes % 4, 0);
        assert_int_equal(p->src_offset % 4, 0);
        assert_true(p->src_offset + p->bytes <= src->size[p->src_block]);
        assert_int_equal(ipu_layout_tile(s, p->src_block / s->col_parts, p->src_block % s->col_parts, 0),
                         p->src_tile);
        for (uint32_t k = 0; k < p->dst_count; k++) {
            const ipu_piece_dst *q = &rd->dsts[p->first_dst + k];
            assert_true(local ? q->tile == p->src_tile : q->tile != p->src_tile);
            uint32_t slot = dst_slot(d, q->block, q->tile);
            assert_int_equal(q->offset % 4, 0);
            assert_true(q->offset + p->bytes <= dst->size[slot]);
            for (uint32_t b = 0; b < p->bytes; b++) {
                assert_int_equal(dst->written[slot][q->offset + b], 0);
                dst->written[slot][q->offset + b] = 1;
                dst->bytes[slot][q->offset + b] = src->bytes[p->src_block][p->src_offset + b];
            }
        }
    }
}

static void check_destination(const ipu_layout *d, const storage *dst)
{
    for (uint32_t r = 0; r < d->replicas; r++)
        for (uint32_t i = 0; i < d->row_parts; i++)
            for (uint32_t j = 0; j < d->col_parts; j++) {
                uint32_t k = (r * d->row_parts + i) * d->col_parts + j, r0, r1, c0, c1;
                if (d->tiles[k] == IPU_LAYOUT_ABSENT)
                    continue;
                ipu_layout_block(d, i, j, &r0, &r1, &c0, &c1);
                uint32_t stride = ipu_layout_stride(d, c1 - c0);
                for (uint32_t row = r0; row < r1; row++)
                    for (uint32_t col = c0; col < c1; col++)
                        for (uint32_t b = 0; b < d->elem; b++)
                            if (dst->bytes[k][(row - r0) * stride + (col - c0) * d->elem + b] !=
                                value_byte(row, col, b))
                                fail_msg("seed %llu: element (%u, %u) of replica %u is wrong",
                                         (unsigned long long)tseed(), row, col, r);
            }
}

static void test_random_redistributions(void **state)
{
    (void)state;
    for (int trial = 0; trial < 400; trial++) {
        uint32_t elem = 1u << pick(0, 2), tiles = 64;
        uint32_t rows = pick(1, 40), cols = pick(1, 70);
        ipu_layout s, d;
        random_layout(&s, rows, cols, elem, tiles, 1);
        random_layout(&d, rows, cols, elem, tiles, 3);
        ipu_ctx *ctx = ipu_ctx_create();
        ipu_redistribution rd;
        assert_int_equal(ipu_redistribute(ctx, &s, &d, &rd), IPU_OK);
        storage src, dst;
        storage_init(&src, &s, 1);
        storage_init(&dst, &d, 0);
        apply(&s, &d, &src, &dst, &rd, rd.pieces, rd.piece_count, 0);
        apply(&s, &d, &src, &dst, &rd, rd.copies, rd.copy_count, 1);
        check_destination(&d, &dst);
        /* A multicast piece never names one destination tile twice. */
        for (size_t n = 0; n < rd.piece_count; n++)
            for (uint32_t a = 0; a < rd.pieces[n].dst_count; a++)
                for (uint32_t b = a + 1; b < rd.pieces[n].dst_count; b++)
                    assert_true(rd.dsts[rd.pieces[n].first_dst + a].tile !=
                                    rd.dsts[rd.pieces[n].first_dst + b].tile ||
                                rd.dsts[rd.pieces[n].first_dst + a].offset !=
                                    rd.dsts[rd.pieces[n].first_dst + b].offset);
        storage_free(&src);
        storage_free(&dst);
        ipu_redistribution_free(&rd);
        ipu_layout_free(&s);
        ipu_layout_free(&d);
        ipu_ctx_free(ctx);
    }
}

static void test_staged_redistributions(void **state)
{
    (void)state;
    for (int trial = 0; trial < 200; trial++) {
        uint32_t elem = 1u << pick(0, 2), tiles = 64;
        uint32_t rows = pick(1, 40), cols = pick(1, 70);
        ipu_layout s, d, t;
        random_layout(&s, rows, cols, elem, tiles, 1);
        random_layout(&d, rows, cols, elem, tiles, 3);
        /* Some destination blocks nobody needs (never all of them). */
        size_t blocks = (size_t)d.replicas * d.row_parts * d.col_parts;
        for (size_t b = 1; b < blocks; b++)
            if (tseed_rnd() % 3 == 0)
                d.tiles[b] = IPU_LAYOUT_ABSENT;
        ipu_ctx *ctx = ipu_ctx_create();
        assert_int_equal(ipu_staging_layout(ctx, &d, tiles, &t), IPU_OK);
        assert_int_equal(t.col_parts, d.col_parts);
        assert_memory_equal(t.col_bounds, d.col_bounds, (d.col_parts + 1) * sizeof *d.col_bounds);
        ipu_redistribution hop1, hop2;
        assert_int_equal(ipu_redistribute(ctx, &s, &t, &hop1), IPU_OK);
        assert_int_equal(ipu_redistribute(ctx, &t, &d, &hop2), IPU_OK);
        storage src, mid, dst;
        storage_init(&src, &s, 1);
        storage_init(&mid, &t, 0);
        storage_init(&dst, &d, 0);
        apply(&s, &t, &src, &mid, &hop1, hop1.pieces, hop1.piece_count, 0);
        apply(&s, &t, &src, &mid, &hop1, hop1.copies, hop1.copy_count, 1);
        apply(&t, &d, &mid, &dst, &hop2, hop2.pieces, hop2.piece_count, 0);
        apply(&t, &d, &mid, &dst, &hop2, hop2.copies, hop2.copy_count, 1);
        check_destination(&d, &dst);
        /* The second hop moves whole padded rows of its destination blocks. */
        for (size_t n = 0; n < hop2.piece_count; n++) {
            const ipu_piece_dst *q = &hop2.dsts[hop2.pieces[n].first_dst];
            uint32_t j = q->block % d.col_parts;
            uint32_t stride = ipu_layout_stride(&d, d.col_bounds[j + 1] - d.col_bounds[j]);
            assert_int_equal(hop2.pieces[n].bytes % stride, 0);
            assert_int_equal(q->offset % stride, 0);
        }
        storage_free(&src);
        storage_free(&mid);
        storage_free(&dst);
        ipu_redistribution_free(&hop1);
        ipu_redistribution_free(&hop2);
        ipu_layout_free(&s);
        ipu_layout_free(&d);
        ipu_layout_free(&t);
        ipu_ctx_free(ctx);
    }
}

static void test_identical_layouts_move_nothing_remote(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_layout l, wide;
    assert_int_equal(ipu_layout_grid(ctx, &l, 29, 50, 2, 3, 4, 2, 1, 0, 4, 1, 0), IPU_OK);
    assert_int_equal(ipu_layout_check(ctx, &l, 16), IPU_OK);
    ipu_redistribution rd;
    assert_int_equal(ipu_redistribute(ctx, &l, &l, &rd), IPU_OK);
    assert_int_equal(rd.piece_count, 0);
    assert_int_equal(rd.copy_count, 12); /* each block copies itself whole */
    ipu_redistribution_free(&rd);
    /* A second replica on 12 more tiles: one unicast piece per block. */
    assert_int_equal(ipu_layout_grid(ctx, &wide, 29, 50, 2, 3, 4, 2, 2, 0, 4, 1, 12), IPU_OK);
    assert_int_equal(ipu_layout_check(ctx, &wide, 24), IPU_OK);
    assert_int_equal(ipu_redistribute(ctx, &l, &wide, &rd), IPU_OK);
    assert_int_equal(rd.piece_count, 12);
    for (size_t n = 0; n < rd.piece_count; n++)
        assert_int_equal(rd.pieces[n].dst_count, 1);
    ipu_redistribution_free(&rd);
    ipu_layout_free(&l);
    ipu_layout_free(&wide);
    ipu_ctx_free(ctx);
}

static void test_check_rejects_bad_layouts(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_layout l;
    /* Blocks (0,1) and (1,0) share tile 1. */
    assert_int_equal(ipu_layout_grid(ctx, &l, 8, 8, 4, 2, 2, 1, 1, 0, 1, 1, 0), IPU_OK);
    assert_int_equal(ipu_layout_check(ctx, &l, 16), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "already used"));
    ipu_layout_free(&l);
    ipu_ctx_clear_error(ctx);
    /* 4 row bands of 3 rows: one is empty. */
    assert_int_equal(ipu_layout_grid(ctx, &l, 3, 8, 4, 4, 1, 1, 1, 0, 1, 1, 0), IPU_OK);
    assert_int_equal(ipu_layout_check(ctx, &l, 16), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "empty"));
    ipu_layout_free(&l);
    ipu_ctx_clear_error(ctx);
    /* 1-byte columns cut at an odd element: not on a word. */
    assert_int_equal(ipu_layout_grid(ctx, &l, 8, 8, 1, 1, 2, 1, 1, 0, 1, 1, 0), IPU_OK);
    l.col_bounds[1] = 3;
    assert_int_equal(ipu_layout_check(ctx, &l, 16), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "word"));
    ipu_layout_free(&l);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_layout");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bands_cover_and_align),
        cmocka_unit_test(test_random_redistributions),
        cmocka_unit_test(test_staged_redistributions),
        cmocka_unit_test(test_identical_layouts_move_nothing_remote),
        cmocka_unit_test(test_check_rejects_bad_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
