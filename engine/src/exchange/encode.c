/* encode.c: a scheduled phase's exchange tables (exchange.h).  Every tile's
 * rows are collected (its sends, then its receives), each list sorted by
 * cycle (ties by key, peer, words, address: the order never depends on
 * qsort), and written in that order; a row whose window starts where the
 * previous row's ends, or ends where it starts, by key, is written as a
 * continuation or a repeat, and repeats from consecutive tiles in turn as
 * one run (xrow.h).  Sends whose source advances per
 * Repeat iteration are relocated as exchange.h says: by OUTGOING_BASE
 * (SET_BASE first, the sends relative, RESET_BASE last) where a tile's
 * advance by one displacement, else by a patch per full row.  Measuring
 * walks the same rows without writing them, so the sizes package layout
 * reserves are exactly the bytes encoding writes.
 * Everything is single-threaded and deterministic; nothing prints.
 */
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange.h"
#include "package/format.h"
#include "package/xrow.h"

/* One row before encoding. */
typedef struct erow {
    uint32_t cycle, words, peer, address;
    uint32_t advance; /* a send's bytes per Repeat iteration */
    uint32_t flags;   /* IPU_XFLAG_RELATIVE for a send relative to OUTGOING_BASE */
    uint64_t key;
} erow;

/* Every tile's rows: tile t's sends are rows[start[t] .. start[t] + sends[t]),
 * its receives the rest of [start[t], start[t + 1]).  base[t]: the one
 * displacement its advancing sends take per iteration (0: none, or several:
 * then patched[t]). */
typedef struct tile_rows {
    erow *rows;
    size_t *start;
    uint32_t *sends;
    uint32_t *base;
    uint8_t *patched;
    int keep_base;
} tile_rows;

static void tile_rows_free(tile_rows *r)
{
    free(r->rows), free(r->start), free(r->sends), free(r->base), free(r->patched);
}

static int by_cycle(const void *a, const void *b)
{
    const erow *x = a, *y = b;
    if (x->cycle != y->cycle)
        return x->cycle < y->cycle ? -1 : 1;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->peer != y->peer)
        return x->peer < y->peer ? -1 : 1;
    if (x->words != y->words)
        return x->words < y->words ? -1 : 1;
    return (x->address > y->address) - (x->address < y->address);
}

/* Check transfer i before its rows are counted. */
static ipu_status check_xfer(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *phase, size_t i, int addressed)
{
    const ipu_xfer *x = &phase->xfers[i];
    if (x->first_dst > phase->dst_total || x->dst_count > phase->dst_total - x->first_dst)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "exchange transfer %zu: destinations [%u, %llu) are outside the "
                        "phase's %zu destinations",
                        i, x->first_dst, (unsigned long long)x->first_dst + x->dst_count, phase->dst_total);
    if (x->src_tile >= p->tiles || (uint64_t)x->cycle + p->exchange_latency > UINT32_MAX)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "exchange transfer %zu: source tile %u or cycle %u is out of range", i, x->src_tile,
                        x->cycle);
    if ((addressed && x->src_address % 4) || x->bytes == 0 || x->bytes % 4)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "exchange transfer %zu: source address 0x%X or %u bytes is not 4-byte aligned", i,
                        x->src_address, x->bytes);
    for (uint32_t d = 0; d < x->dst_count; d++) {
        const ipu_xfer_dst *dst = &phase->dsts[x->first_dst + d];
        if (dst->tile >= p->tiles)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "exchange transfer %zu: destination tile %u is out of range (%u tiles)", i, dst->tile,
                            p->tiles);
        if (addressed && dst->address % 4)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "exchange transfer %zu: destination address 0x%X on tile %u is not 4-byte aligned", i,
                            dst->address, dst->tile);
    }
    return IPU_OK;
}

/* How tile t's advancing sends move on: all by one displacement (base),
 * their rows relative to OUTGOING_BASE, or row by row (patched). */
static void relocate(tile_rows *r, uint32_t t)
{
    erow *rows = r->rows + r->start[t];
    uint32_t base = 0;
    for (uint32_t i = 0; i < r->sends[t] && !r->patched[t]; i++) {
        if (rows[i].advance && !base)
            base = rows[i].advance;
        else if (rows[i].advance && rows[i].advance != base)
            r->patched[t] = 1;
    }
    if (r->patched[t] || !base)
        return;
    r->base[t] = base;
    for (uint32_t i = 0; i < r->sends[t]; i++)
        if (rows[i].advance)
            rows[i].flags = IPU_XFLAG_RELATIVE;
}

/* Collect and sort every tile's rows. */
static ipu_status collect(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *phase, int addressed,
                          tile_rows *out)
{
    uint32_t tiles = p->tiles, latency = p->exchange_latency;
    memset(out, 0, sizeof *out);
    out->keep_base = phase->keep_base;
    out->start = ipu_calloc(ctx, (size_t)tiles + 1, sizeof *out->start);
    out->sends = ipu_calloc(ctx, tiles, sizeof *out->sends);
    out->base = ipu_calloc(ctx, tiles, sizeof *out->base);
    out->patched = ipu_calloc(ctx, tiles, sizeof *out->patched);
    size_t *fill = ipu_calloc(ctx, 2 * (size_t)tiles, sizeof *fill);
    ipu_status status = out->start && out->sends && out->base && out->patched && fill ? IPU_OK : IPU_NO_MEMORY(ctx);
    size_t *recvs = fill + tiles;
    for (size_t i = 0; i < phase->count && status == IPU_OK; i++) {
        status = check_xfer(ctx, p, phase, i, addressed);
        if (status != IPU_OK)
            break;
        const ipu_xfer *x = &phase->xfers[i];
        out->sends[x->src_tile]++;
        for (uint32_t d = 0; d < x->dst_count; d++)
            recvs[phase->dsts[x->first_dst + d].tile]++;
    }
    for (uint32_t t = 0; t < tiles && status == IPU_OK; t++) {
        if (out->sends[t] + recvs[t] + 2 > IPU_XTABLE_ROWS_MAX)
            status = IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                              "exchange phase: tile %u takes part in %zu transfers, more than a table holds (%u "
                              "rows with the OUTGOING_BASE rows)",
                              t, (size_t)out->sends[t] + recvs[t], IPU_XTABLE_ROWS_MAX);
        out->start[t + 1] = out->start[t] + out->sends[t] + recvs[t];
        fill[t] = out->start[t];
        recvs[t] = out->start[t] + out->sends[t];
    }
    if (status == IPU_OK && !(out->rows = ipu_malloc(ctx, (out->start[tiles] ? out->start[tiles] : 1) * sizeof(erow))))
        status = IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < phase->count && status == IPU_OK; i++) {
        const ipu_xfer *x = &phase->xfers[i];
        uint32_t words = x->bytes / 4;
        out->rows[fill[x->src_tile]++] = (erow){x->cycle, words, 0, x->src_address, x->src_advance, 0, x->src_key};
        for (uint32_t d = 0; d < x->dst_count; d++) {
            const ipu_xfer_dst *dst = &phase->dsts[x->first_dst + d];
            out->rows[recvs[dst->tile]++] =
                (erow){x->cycle + latency, words, x->src_tile, dst->address, 0, 0, dst->key};
        }
    }
    for (uint32_t t = 0; t < tiles && status == IPU_OK; t++) {
        erow *rows = out->rows + out->start[t];
        size_t sends = out->sends[t], all = out->start[t + 1] - out->start[t];
        qsort(rows, sends, sizeof *rows, by_cycle);
        qsort(rows + sends, all - sends, sizeof *rows, by_cycle);
        relocate(out, t);
    }
    free(fill);
    if (status != IPU_OK)
        tile_rows_free(out);
    return status;
}

static ipu_xrow xrow_of(const erow *r, uint32_t op)
{
    return (ipu_xrow){op, r->flags, r->peer, r->cycle, r->words, r->address};
}

/* Where row i's window lies against row i - 1's, by key. */
static int adjacency(const erow *rows, size_t i)
{
    if (i == 0)
        return IPU_XROW_APART;
    if (rows[i].key == rows[i - 1].key + 4ull * rows[i - 1].words)
        return IPU_XROW_AFTER;
    return rows[i].key + 4ull * rows[i].words == rows[i - 1].key ? IPU_XROW_BEFORE : IPU_XROW_APART;
}

/* The bytes row i of a list takes after row i - 1. */
static uint32_t row_size(const erow *rows, size_t i, uint32_t op)
{
    if (i == 0)
        return IPU_XROW_SIZE;
    ipu_xrow prev = xrow_of(&rows[i - 1], op), row = xrow_of(&rows[i], op);
    return ipu_xrow_size(&prev, &row, adjacency(rows, i));
}

/* The rows a run entry starting at row i of a list would hold: rows i ..
 * i + count - 1 each repeat the row before it with row i's gap and order (a
 * receive's peer one on); a run of fewer than two is none (0). */
static uint32_t run_length(const erow *rows, size_t i, size_t n, uint32_t op)
{
    if (i == 0 || row_size(rows, i, op) != IPU_XROW_REPEAT_SIZE)
        return 0;
    ipu_xrow first = xrow_of(&rows[i], op), before = xrow_of(&rows[i - 1], op);
    int order = adjacency(rows, i);
    uint32_t gap = ipu_xrow_gap(&before, &first), count = 1;
    if (!ipu_xrow_runs_on(&before, &first, order, order, gap))
        return 0;
    for (size_t j = i + 1; j < n && count < 0xFFFF; j++, count++) {
        ipu_xrow prev = xrow_of(&rows[j - 1], op), row = xrow_of(&rows[j], op);
        if (!ipu_xrow_runs_on(&prev, &row, adjacency(rows, j), order, gap))
            break;
    }
    return count >= 2 ? count : 0;
}

/* Bytes of a list of n rows of op, and its entries. */
static uint64_t list_bytes(const erow *rows, size_t n, uint32_t op, uint32_t *entries)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; (*entries)++) {
        uint32_t run = run_length(rows, i, n, op);
        bytes += run ? IPU_XROW_REPEAT_SIZE : row_size(rows, i, op);
        i += run ? run : 1;
    }
    return bytes;
}

/* The OUTGOING_BASE rows of tile t's table: SET_BASE first, RESET_BASE last. */
static uint32_t base_rows(const tile_rows *r, uint32_t t)
{
    return r->base[t] ? 1 + !r->keep_base : 0;
}

static uint64_t table_bytes(const tile_rows *r, uint32_t t)
{
    size_t all = r->start[t + 1] - r->start[t], sends = r->sends[t];
    if (!all)
        return 0;
    const erow *rows = r->rows + r->start[t];
    uint32_t entries = 0;
    return 4 + (uint64_t)base_rows(r, t) * IPU_XROW_SIZE + list_bytes(rows, sends, IPU_XROW_SEND, &entries) +
           list_bytes(rows + sends, all - sends, IPU_XROW_RECV, &entries);
}

/* Tile t's patches: the SET_BASE row's address, or every full advancing send row's. */
static uint32_t patch_count(const tile_rows *r, uint32_t t)
{
    if (r->base[t])
        return 1;
    uint32_t n = 0;
    const erow *rows = r->rows + r->start[t];
    for (uint32_t i = 0; r->patched[t] && i < r->sends[t]; i++)
        n += rows[i].advance && row_size(rows, i, IPU_XROW_SEND) == IPU_XROW_SIZE;
    return n;
}

ipu_status ipu_exchange_measure(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *phase, uint64_t *bytes,
                                uint32_t *patches)
{
    if (!p || !phase || !bytes || (phase->count && !phase->xfers) || (phase->dst_total && !phase->dsts))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "exchange measure: missing profile, phase or output");
    tile_rows r;
    IPU_TRY(collect(ctx, p, phase, 0, &r));
    for (uint32_t t = 0; t < p->tiles; t++) {
        bytes[t] = table_bytes(&r, t);
        if (patches)
            patches[t] = patch_count(&r, t);
    }
    tile_rows_free(&r);
    return IPU_OK;
}

/* Write a list of n rows of op at table + at, patching the full advancing
 * rows of a patched tile into *patch and counting its entries; returns the
 * bytes written, 0 when a row continues its predecessor by key but not by
 * address (an address that placement did not derive from its key). */
static uint64_t put_list(uint8_t *table, uint64_t at, const erow *rows, size_t n, uint32_t op, int patched,
                         ipu_xpatch **patch, uint32_t *entries)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; (*entries)++) {
        uint32_t run = run_length(rows, i, n, op), size = row_size(rows, i, op);
        for (size_t j = i; j < i + (run ? run : 1); j++) {
            int side = adjacency(rows, j);
            ipu_xrow row = xrow_of(&rows[j], op), prev = j ? xrow_of(&rows[j - 1], op) : row;
            uint32_t where = side == IPU_XROW_AFTER ? prev.address + 4 * prev.words : prev.address - 4 * row.words;
            if (row_size(rows, j, op) != IPU_XROW_SIZE && row.address != where)
                return 0;
        }
        ipu_xrow row = xrow_of(&rows[i], op), prev = i ? xrow_of(&rows[i - 1], op) : row;
        if (patched && rows[i].advance && size == IPU_XROW_SIZE)
            *(*patch)++ = (ipu_xpatch){(uint32_t)(at + bytes + 12), row.address, rows[i].advance};
        bytes += run ? ipu_xrow_put_run(table + at + bytes, row.flags, run, ipu_xrow_gap(&prev, &row), adjacency(rows, i))
                     : ipu_xrow_put(table + at + bytes, &prev, &row, size, adjacency(rows, i));
        i += run ? run : 1;
    }
    return bytes;
}

static void put_base_row(uint8_t *at, uint32_t op)
{
    ipu_xrow row = {op, 0, 0, 0, 0, 0};
    ipu_xrow_put(at, NULL, &row, IPU_XROW_SIZE, IPU_XROW_APART);
}

void ipu_xtables_free(ipu_xtables *t)
{
    free(t->data), free(t->offset), free(t->patches), free(t->patch_offset), free(t->based);
    t->data = NULL, t->offset = NULL, t->patches = NULL, t->patch_offset = NULL, t->based = NULL;
}

ipu_status ipu_exchange_encode(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *phase, ipu_xtables *out)
{
    if (!p || !phase || !out || (phase->count && !phase->xfers) || (phase->dst_total && !phase->dsts))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "exchange encode: missing profile, phase or output");
    memset(out, 0, sizeof *out);
    tile_rows r;
    IPU_TRY(collect(ctx, p, phase, 1, &r));
    uint32_t tiles = p->tiles;
    out->offset = ipu_calloc(ctx, (size_t)tiles + 1, sizeof *out->offset);
    out->patch_offset = ipu_calloc(ctx, (size_t)tiles + 1, sizeof *out->patch_offset);
    out->based = ipu_calloc(ctx, tiles, sizeof *out->based);
    ipu_status status = out->offset && out->patch_offset && out->based ? IPU_OK : IPU_NO_MEMORY(ctx);
    for (uint32_t t = 0; t < tiles && status == IPU_OK; t++) {
        out->offset[t + 1] = out->offset[t] + table_bytes(&r, t);
        out->patch_offset[t + 1] = out->patch_offset[t] + patch_count(&r, t);
        out->based[t] = r.base[t] != 0;
    }
    if (status == IPU_OK && !(out->data = ipu_malloc(ctx, out->offset[tiles] ? out->offset[tiles] : 1)))
        status = IPU_NO_MEMORY(ctx);
    size_t patches = status == IPU_OK ? out->patch_offset[tiles] : 0;
    if (status == IPU_OK && !(out->patches = ipu_malloc(ctx, (patches ? patches : 1) * sizeof *out->patches)))
        status = IPU_NO_MEMORY(ctx);
    for (uint32_t t = 0; t < tiles && status == IPU_OK; t++) {
        size_t all = r.start[t + 1] - r.start[t], sends = r.sends[t];
        if (!all)
            continue;
        uint8_t *table = out->data + out->offset[t];
        const erow *rows = r.rows + r.start[t];
        ipu_xpatch *patch = out->patches + out->patch_offset[t];
        uint32_t entries = base_rows(&r, t);
        uint64_t at = 4;
        if (r.base[t]) {
            put_base_row(table + at, IPU_XROW_SET_BASE);
            *patch++ = (ipu_xpatch){(uint32_t)at + 12, phase->base_ahead ? r.base[t] : 0, r.base[t]};
            at += IPU_XROW_SIZE;
        }
        uint64_t sent = put_list(table, at, rows, sends, IPU_XROW_SEND, r.patched[t], &patch, &entries);
        uint64_t received =
            put_list(table, at + sent, rows + sends, all - sends, IPU_XROW_RECV, 0, &patch, &entries);
        ipu_store_u32(table, entries);
        at += sent + received;
        if (r.base[t] && !r.keep_base) {
            put_base_row(table + at, IPU_XROW_RESET_BASE);
            at += IPU_XROW_SIZE;
        }
        if ((sends && !sent) || (all > sends && !received) || at != out->offset[t + 1] - out->offset[t] ||
            patch != out->patches + out->patch_offset[t + 1])
            status = IPU_INCONSISTENT(ctx, "exchange",
                                      "tile %u: windows adjacent by key are not adjacent by address", t);
    }
    tile_rows_free(&r);
    if (status != IPU_OK)
        ipu_xtables_free(out);
    return status;
}
