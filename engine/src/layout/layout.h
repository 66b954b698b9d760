/* layout.h: how a 2-D tensor lies across tiles.  Rows are cut into
 * row_parts bands and columns into col_parts bands at explicit boundaries
 * (uneven tails allowed; inner column boundaries fall on 32-bit words so
 * every piece an exchange moves starts on a word).  Block (i, j) of replica r
 * lives on tiles[(r * row_parts + i) * col_parts + j], stored row-major with
 * each row padded to a multiple of 8 bytes (the padding is cleared to zero
 * when the block's storage is first used, so whole rows can be moved).
 *
 * A redistribution turns one layout's blocks into another's: pieces that
 * stay on a tile become local copies, the others exchange transfers, a piece
 * wanted by several tiles is one multicast transfer.  Offsets are relative to
 * each block's storage; lowering adds the placed addresses.
 */
#ifndef IPU_LAYOUT_H
#define IPU_LAYOUT_H

#include "core/core.h"

#define IPU_LAYOUT_ABSENT 0xFFFFFFFFu

typedef struct ipu_layout {
    uint32_t rows, cols, elem; /* shape and element bytes */
    uint32_t row_parts, col_parts, replicas;
    uint32_t *row_bounds; /* row_parts + 1 ascending boundaries, 0 .. rows */
    uint32_t *col_bounds; /* col_parts + 1 ascending boundaries, 0 .. cols */
    uint32_t *tiles;      /* replicas * row_parts * col_parts */
} ipu_layout;

/* Band index of total split into parts, boundaries on multiples of align. */
void ipu_band(uint32_t total, uint32_t parts, uint32_t align, uint32_t index, uint32_t *lo,
              uint32_t *hi);
/* A regular grid: even bands (columns aligned to col_align elements), block
 * (i, j) of replica r on tile base + i*row_step + j*col_step + r*replica_step. */
ipu_status ipu_layout_grid(ipu_ctx *ctx, ipu_layout *l, uint32_t rows, uint32_t cols, uint32_t elem,
                           uint32_t row_parts, uint32_t col_parts, uint32_t col_align,
                           uint32_t replicas, uint32_t base, uint32_t row_step, uint32_t col_step,
                           uint32_t replica_step);
/* Allocate the arrays for explicit bounds and tiles (filled by the caller). */
ipu_status ipu_layout_alloc(ipu_ctx *ctx, ipu_layout *l, uint32_t rows, uint32_t cols, uint32_t elem,
                            uint32_t row_parts, uint32_t col_parts, uint32_t replicas);
ipu_status ipu_layout_copy(ipu_ctx *ctx, ipu_layout *dst, const ipu_layout *src);
/* A layout like src (replica 0 only) for a tensor of elem-byte elements. */
ipu_status ipu_layout_follow(ipu_ctx *ctx, ipu_layout *dst, const ipu_layout *src, uint32_t elem);
/* src (replica 0) stacked `copies` times down the rows: a layout of
 * copies * src->rows rows whose band c * src->row_parts + i is band i of
 * copy c, on the same tile (a broadcast's source, read once per copy). */
ipu_status ipu_layout_stack_rows(ipu_ctx *ctx, ipu_layout *dst, const ipu_layout *src, uint32_t copies);
/* Move every present block from tile t to tile (t + by) % tiles. */
void ipu_layout_rotate(ipu_layout *l, uint32_t by, uint32_t tiles);
/* The columns cut alike (the pieces a move between them takes are whole rows). */
int ipu_layout_same_columns(const ipu_layout *a, const ipu_layout *b);
/* Same shape, bounds and tiles. */
int ipu_layout_same(const ipu_layout *a, const ipu_layout *b);
/* Bytes of the largest block times members (a sequence's storage). */
uint64_t ipu_layout_largest_block(const ipu_layout *l, uint32_t members);
void ipu_layout_free(ipu_layout *l);
/* Row stride in bytes of a block that is `cols` elements wide. */
uint32_t ipu_layout_stride(const ipu_layout *l, uint32_t cols);
/* The block (i, j): its rows, columns, storage bytes; and its tile for replica r. */
void ipu_layout_block(const ipu_layout *l, uint32_t i, uint32_t j, uint32_t *row_lo,
                      uint32_t *row_hi, uint32_t *col_lo, uint32_t *col_hi);
uint32_t ipu_layout_block_bytes(const ipu_layout *l, uint32_t i, uint32_t j);
static inline uint32_t ipu_layout_tile(const ipu_layout *l, uint32_t i, uint32_t j, uint32_t r)
{
    return l->tiles[((size_t)r * l->row_parts + i) * l->col_parts + j];
}
/* Check a home layout: bounds, word-aligned inner column boundaries, tiles
 * inside the device, none absent and no two blocks on one tile; the message
 * names the problem. */
ipu_status ipu_layout_check(ipu_ctx *ctx, const ipu_layout *l, uint32_t tiles);

typedef struct ipu_piece_dst {
    uint32_t tile, block; /* block index i * col_parts + j of the destination layout */
    uint32_t replica;     /* the destination layout's replica that block belongs to */
    uint32_t offset;
} ipu_piece_dst;

typedef struct ipu_piece {
    uint32_t src_tile, src_block, src_offset, bytes;
    uint32_t first_dst, dst_count; /* into the redistribution's dsts */
} ipu_piece;

typedef struct ipu_redistribution {
    ipu_piece *pieces; /* exchange transfers: every destination on another tile */
    size_t piece_count, piece_capacity;
    ipu_piece *copies; /* local copies: one destination, on the source's tile */
    size_t copy_count, copy_capacity;
    ipu_piece_dst *dsts;
    size_t dst_count, dst_capacity;
} ipu_redistribution;

/* Pieces that move src (replica 0) into every present block of every
 * replica of dst. */
ipu_status ipu_redistribute(ipu_ctx *ctx, const ipu_layout *src, const ipu_layout *dst,
                            ipu_redistribution *out);
void ipu_redistribution_free(ipu_redistribution *r);
/* Exchange rows (sends plus receives) of the busiest tile. */
ipu_status ipu_redistribution_busiest(ipu_ctx *ctx, const ipu_redistribution *r, uint32_t tiles,
                                      uint32_t *out);
/* A staging layout for moving src into dst in two hops when a direct move
 * would be row by row: dst's column bands (so the second hop moves whole
 * blocks of rows), rows cut into as many bands as the device has tiles for,
 * and only the blocks some present block of dst overlaps (the rest absent). */
ipu_status ipu_staging_layout(ipu_ctx *ctx, const ipu_layout *dst, uint32_t tiles, ipu_layout *out);

#endif
