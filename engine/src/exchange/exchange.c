/* exchange.c: exchange v1 scheduling and table encoding (exchange.h).
 * Scheduling is greedy earliest fit, longest transfers first (ties by index):
 * every tile has a send port and a receive port, each a sorted array of
 * disjoint, coalesced busy spans.  Receive spans are kept in send-time
 * coordinates (shifted back by the latency L), so a transfer of w words sent
 * at cycle c needs the one window [c, c + w) free on its sender's send port
 * and on every destination's receive port.  The earliest common window is a
 * fixpoint over those ports (a leapfrog join): each port in turn moves the
 * candidate to its own earliest fit at or after it, until every port accepts
 * the candidate unchanged.  The candidate only grows, so this ends, at the
 * earliest cycle all ports accept.  Each port keeps a cursor per search
 * (galloping forward from where it stopped, caching the next span's start),
 * and a port that moves the candidate is asked first afterwards.  A loopback
 * transfer uses its tile's two distinct ports.  Structured multicasts (rows
 * or columns of a tile grid) take a few cursor steps per port; wide
 * multicasts to randomly scattered tiles fragment every port, and the
 * leapfrog then visits many gaps per transfer (exact earliest fit).
 * Encoding writes a tile's SEND rows, then its RECV rows, each sorted by
 * cycle (ties by the row bytes, so the order never depends on qsort).
 * Everything is single-threaded and deterministic; nothing prints.
 */
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange.h"
#include "package/format.h"

/* ---- ports: sorted, coalesced busy spans ----------------------------------- */

typedef struct xspan {
    uint32_t start, end; /* [start, end), send-time cycles */
} xspan;

typedef struct xport {
    xspan *spans;
    uint32_t count, capacity;
} xport;

/* A port as seen by one transfer's search: spans before i end at or before
 * the current candidate, and span i starts at next (2^32 when i is past the
 * last span), so a candidate window ending by next is accepted without
 * reading the port. */
typedef struct xcursor {
    xport *port;
    uint32_t i;
    uint64_t next;
} xcursor;

/* The first index j >= i whose span ends after c (count when none), by
 * galloping from i: the candidate moves forward in small steps, mostly. */
static uint32_t advance(const xport *q, uint32_t i, uint64_t c)
{
    const xspan *s = q->spans;
    uint32_t n = q->count;
    if (i >= n || s[i].end > c)
        return i;
    /* s[lo - 1] ends at or before c; the answer is in [lo, hi]. */
    uint32_t lo = i + 1, hi = lo;
    for (uint32_t step = 1; hi < n && s[hi].end <= c; step *= 2) {
        lo = hi + 1;
        hi = n - lo > step ? lo + step : n;
    }
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s[mid].end <= c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The earliest t >= c with [t, t + w) free on the cursor's port; the cursor
 * ends at the first span after the window. */
static uint64_t port_fit(xcursor *k, uint64_t c, uint64_t w)
{
    if (c + w <= k->next)
        return c;
    const xport *q = k->port;
    uint32_t i = advance(q, k->i, c);
    while (i < q->count && q->spans[i].start < c + w)
        c = q->spans[i++].end;
    k->i = i;
    k->next = i < q->count ? q->spans[i].start : (uint64_t)1 << 32;
    return c;
}

static xcursor cursor(xport *q)
{
    xcursor k = {q, 0, q->count ? q->spans[0].start : (uint64_t)1 << 32};
    return k;
}

/* Mark [a, b) busy: it is free, spans before i end at or before a and span i
 * (if any) starts at or after b. */
static ipu_status port_take(ipu_ctx *ctx, xport *q, uint32_t i, uint32_t a, uint32_t b)
{
    int left = i > 0 && q->spans[i - 1].end == a;
    int right = i < q->count && q->spans[i].start == b;
    if (left && right) {
        q->spans[i - 1].end = q->spans[i].end;
        memmove(&q->spans[i], &q->spans[i + 1], (q->count - i - 1) * sizeof *q->spans);
        q->count--;
        return IPU_OK;
    }
    if (left) {
        q->spans[i - 1].end = b;
        return IPU_OK;
    }
    if (right) {
        q->spans[i].start = a;
        return IPU_OK;
    }
    if (q->count == q->capacity) {
        uint32_t grown = q->capacity ? q->capacity * 2 : 8;
        xspan *s = ipu_realloc(ctx, q->spans, (size_t)grown * sizeof *s);
        if (!s)
            return IPU_NO_MEMORY(ctx);
        q->spans = s;
        q->capacity = grown;
    }
    memmove(&q->spans[i + 1], &q->spans[i], (q->count - i) * sizeof *q->spans);
    q->spans[i].start = a;
    q->spans[i].end = b;
    q->count++;
    return IPU_OK;
}

/* ---- validation ------------------------------------------------------------ */

/* Check every transfer before anything is written; stamp[tiles] is scratch. */
static ipu_status validate(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *phase,
                           uint32_t *stamp, uint32_t *max_dsts)
{
    *max_dsts = 0;
    for (size_t i = 0; i < phase->count; i++) {
        const ipu_xfer *x = &phase->xfers[i];
        if (x->src_tile >= p->tiles)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "exchange transfer %zu: source tile %u is out of range (%u tiles)", i,
                            x->src_tile, p->tiles);
        if (x->bytes == 0 || x->bytes % 4)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "exchange transfer %zu: %u bytes is not a positive multiple of 4", i,
                            x->bytes);
        if (x->dst_count == 0)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "exchange transfer %zu: destination count %u (at least 1 needed)", i,
                            x->dst_count);
        if (x->first_dst > phase->dst_total || x->dst_count > phase->dst_total - x->first_dst)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "exchange transfer %zu: destinations [%u, %llu) are outside the "
                            "phase's %zu destinations",
                            i, x->first_dst, (unsigned long long)x->first_dst + x->dst_count,
                            phase->dst_total);
        for (uint32_t d = 0; d < x->dst_count; d++) {
            uint32_t tile = phase->dsts[x->first_dst + d].tile;
            if (tile >= p->tiles)
                return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                "exchange transfer %zu: destination %u (entry %u) is tile %u, out "
                                "of range (%u tiles)",
                                i, d, x->first_dst + d, tile, p->tiles);
            /* Stamps hold (i mod 2^32) + 1: unique among consecutive transfers. */
            if (stamp[tile] == (uint32_t)i + 1)
                return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                "exchange transfer %zu: destination tile %u is listed twice", i,
                                tile);
            stamp[tile] = (uint32_t)i + 1;
        }
        if (x->dst_count > *max_dsts)
            *max_dsts = x->dst_count;
    }
    return IPU_OK;
}

/* ---- scheduling ---------------------------------------------------------------- */

typedef struct order_key {
    uint32_t bytes;
    size_t index;
} order_key;

/* Longest first, then by index: a total order, so qsort is deterministic. */
static int by_length(const void *a, const void *b)
{
    const order_key *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

typedef struct sched {
    xport *ports; /* tiles send ports, then tiles receive ports */
    xcursor *involved;
    order_key *order;
    uint32_t *stamp;
    uint32_t tiles;
} sched;

static void sched_free(sched *s)
{
    if (s->ports)
        for (uint32_t i = 0; i < 2 * s->tiles; i++)
            free(s->ports[i].spans);
    free(s->ports);
    free(s->involved);
    free(s->order);
    free(s->stamp);
}

/* Place one transfer at the earliest cycle all its ports accept. */
static ipu_status place(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, sched *s,
                        size_t index)
{
    ipu_xfer *x = &phase->xfers[index];
    uint64_t words = x->bytes / 4;
    size_t n = 0;
    s->involved[n++] = cursor(&s->ports[x->src_tile]);
    for (uint32_t d = 0; d < x->dst_count; d++)
        s->involved[n++] = cursor(&s->ports[s->tiles + phase->dsts[x->first_dst + d].tile]);
    /* Stop when n calls in a row accept the candidate: then the last call on
     * each port saw the final candidate.  A port that moves the candidate goes
     * to the front and the ports that moved it before are asked next (they
     * are the busy ones), which saves most calls on a crowded phase. */
    uint64_t c = 0;
    for (size_t agreed = 0, k = 0; agreed < n;) {
        uint64_t t = port_fit(&s->involved[k], c, words);
        if (t == c) {
            agreed++;
            k = k + 1 == n ? 0 : k + 1;
            continue;
        }
        c = t;
        agreed = 1;
        xcursor mover = s->involved[k];
        memmove(&s->involved[1], &s->involved[0], k * sizeof mover);
        s->involved[0] = mover;
        k = n > 1;
    }
    uint64_t horizon = c + p->exchange_latency + words;
    if (horizon > UINT32_MAX)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "exchange transfer %zu: the phase is too long (its last word would "
                        "arrive at cycle %llu)",
                        index, (unsigned long long)horizon);
    for (size_t k = 0; k < n; k++)
        IPU_TRY(port_take(ctx, s->involved[k].port, s->involved[k].i, (uint32_t)c,
                          (uint32_t)(c + words)));
    x->cycle = (uint32_t)c;
    if (horizon > phase->horizon)
        phase->horizon = horizon;
    return IPU_OK;
}

static ipu_status schedule(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, sched *s)
{
    uint32_t max_dsts = 0;
    IPU_TRY(validate(ctx, p, phase, s->stamp, &max_dsts));
    s->ports = ipu_calloc(ctx, 2 * (size_t)p->tiles, sizeof *s->ports);
    s->involved = ipu_malloc(ctx, ((size_t)max_dsts + 1) * sizeof *s->involved);
    s->order = ipu_malloc(ctx, phase->count * sizeof *s->order);
    if (!s->ports || !s->involved || !s->order)
        return IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < phase->count; i++) {
        s->order[i].bytes = phase->xfers[i].bytes;
        s->order[i].index = i;
    }
    qsort(s->order, phase->count, sizeof *s->order, by_length);
    phase->horizon = 0;
    for (size_t i = 0; i < phase->count; i++)
        IPU_TRY(place(ctx, p, phase, s, s->order[i].index));
    return IPU_OK;
}

ipu_status ipu_exchange_schedule(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase)
{
    if (!p || !phase || (phase->count && !phase->xfers) || (phase->dst_total && !phase->dsts))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "exchange schedule: missing profile, phase or transfer arrays");
    if (p->tiles == 0 || p->tiles > 0x10000u)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "exchange schedule: %u tiles (row peers hold 16 bits)", p->tiles);
    if (phase->count == 0) {
        phase->horizon = 0;
        return IPU_OK;
    }
    sched s;
    memset(&s, 0, sizeof s);
    s.tiles = p->tiles;
    s.stamp = ipu_calloc(ctx, p->tiles, sizeof *s.stamp);
    ipu_status status = s.stamp ? schedule(ctx, p, phase, &s) : IPU_NO_MEMORY(ctx);
    sched_free(&s);
    return status;
}

/* ---- encoding ------------------------------------------------------------------- */

static void put_row(uint8_t *r, uint32_t op, uint32_t peer, uint32_t cycle, uint32_t words,
                    uint32_t address)
{
    ipu_store_u32(r, op | peer << 16);
    ipu_store_u32(r + 4, cycle);
    ipu_store_u32(r + 8, words);
    ipu_store_u32(r + 12, address);
}

/* By cycle, then by the row bytes: rows that compare equal are identical. */
static int by_cycle(const void *a, const void *b)
{
    uint32_t x = ipu_load_u32((const uint8_t *)a + 4), y = ipu_load_u32((const uint8_t *)b + 4);
    if (x != y)
        return x < y ? -1 : 1;
    return memcmp(a, b, IPU_XROW_SIZE);
}

/* Check transfer i's destinations lie inside the phase's. */
static ipu_status check_dsts(ipu_ctx *ctx, const ipu_xphase *phase, size_t i)
{
    const ipu_xfer *x = &phase->xfers[i];
    if (x->first_dst > phase->dst_total || x->dst_count > phase->dst_total - x->first_dst)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "exchange transfer %zu: destinations [%u, %llu) are outside the "
                        "phase's %zu destinations",
                        i, x->first_dst, (unsigned long long)x->first_dst + x->dst_count, phase->dst_total);
    return IPU_OK;
}

void ipu_xtables_free(ipu_xtables *t)
{
    free(t->data);
    free(t->offset);
    t->data = NULL, t->offset = NULL;
}

/* Pass 1 counts every tile's sends and receives; pass 2 writes each row at
 * its tile's next free place (sends first); then every tile's sends and
 * receives are sorted by cycle. */
ipu_status ipu_exchange_encode(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *phase, ipu_xtables *out)
{
    if (!p || !phase || !out || (phase->count && !phase->xfers) || (phase->dst_total && !phase->dsts))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "exchange encode: missing profile, phase or output");
    memset(out, 0, sizeof *out);
    uint32_t tiles = p->tiles, latency = p->exchange_latency;
    uint32_t *sends = ipu_calloc(ctx, 2 * (size_t)tiles, sizeof *sends), *recvs = sends + tiles;
    uint32_t *next = ipu_calloc(ctx, 2 * (size_t)tiles, sizeof *next);
    out->offset = ipu_calloc(ctx, (size_t)tiles + 1, sizeof *out->offset);
    ipu_status status = sends && next && out->offset ? IPU_OK : IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < phase->count && status == IPU_OK; i++) {
        const ipu_xfer *x = &phase->xfers[i];
        status = check_dsts(ctx, phase, i);
        if (status == IPU_OK && (x->src_tile >= tiles || (uint64_t)x->cycle + latency > UINT32_MAX))
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "exchange transfer %zu: source tile %u or cycle %u is out of range", i, x->src_tile,
                              x->cycle);
        if (status == IPU_OK && (x->src_address % 4 || x->bytes == 0 || x->bytes % 4))
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "exchange transfer %zu: source address 0x%X or %u bytes is not 4-byte aligned", i,
                              x->src_address, x->bytes);
        if (status == IPU_OK)
            sends[x->src_tile]++;
        for (uint32_t d = 0; d < x->dst_count && status == IPU_OK; d++) {
            const ipu_xfer_dst *dst = &phase->dsts[x->first_dst + d];
            if (dst->tile >= tiles)
                status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                  "exchange transfer %zu: destination tile %u is out of range (%u tiles)", i,
                                  dst->tile, tiles);
            else if (dst->address % 4)
                status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                  "exchange transfer %zu: destination address 0x%X on tile %u is not 4-byte "
                                  "aligned",
                                  i, dst->address, dst->tile);
            else
                recvs[dst->tile]++;
        }
    }
    for (uint32_t t = 0; t < tiles && status == IPU_OK; t++) {
        uint32_t rows = sends[t] + recvs[t];
        out->offset[t + 1] = out->offset[t] + (rows ? 4 + (size_t)rows * IPU_XROW_SIZE : 0);
        next[t] = 0, next[tiles + t] = sends[t];
    }
    if (status == IPU_OK && !(out->data = ipu_malloc(ctx, out->offset[tiles] ? out->offset[tiles] : 1)))
        status = IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < phase->count && status == IPU_OK; i++) {
        const ipu_xfer *x = &phase->xfers[i];
        uint8_t *rows = out->data + out->offset[x->src_tile] + 4;
        put_row(rows + (size_t)next[x->src_tile]++ * IPU_XROW_SIZE, IPU_XROW_SEND, 0, x->cycle, x->bytes / 4,
                x->src_address);
        for (uint32_t d = 0; d < x->dst_count; d++) {
            const ipu_xfer_dst *dst = &phase->dsts[x->first_dst + d];
            rows = out->data + out->offset[dst->tile] + 4;
            put_row(rows + (size_t)next[tiles + dst->tile]++ * IPU_XROW_SIZE, IPU_XROW_RECV, x->src_tile,
                    x->cycle + latency, x->bytes / 4, dst->address);
        }
    }
    for (uint32_t t = 0; t < tiles && status == IPU_OK; t++) {
        if (out->offset[t + 1] == out->offset[t])
            continue;
        uint8_t *table = out->data + out->offset[t];
        ipu_store_u32(table, sends[t] + recvs[t]);
        qsort(table + 4, sends[t], IPU_XROW_SIZE, by_cycle);
        qsort(table + 4 + (size_t)sends[t] * IPU_XROW_SIZE, recvs[t], IPU_XROW_SIZE, by_cycle);
    }
    free(sends);
    free(next);
    if (status != IPU_OK)
        ipu_xtables_free(out);
    return status;
}
