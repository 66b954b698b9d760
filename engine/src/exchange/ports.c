/* ports.c: tile ports and earliest-fit placement (ports.h).  The earliest
 * common window of a transfer is a fixpoint over its ports (a leapfrog
 * join): each port in turn moves the candidate to its own earliest fit at
 * or after it, until every port accepts the candidate unchanged.  The
 * candidate only grows, so this ends, at the earliest cycle all ports
 * accept.  Each port keeps a cursor per search (galloping forward from
 * where it stopped, caching the next span's start), and a port that moves
 * the candidate is asked first afterwards.  A loopback transfer uses its
 * tile's two distinct ports.  Structured multicasts (rows or columns of a
 * tile grid) take a few cursor steps per port; wide multicasts to randomly
 * scattered tiles fragment every port, and the leapfrog then visits many
 * gaps per transfer (exact earliest fit).
 */
#include <stdlib.h>
#include <string.h>

#include "exchange/ports.h"

/* The first index j >= i whose span ends after c (count when none), by
 * galloping from i: the candidate moves forward in small steps, mostly. */
static uint32_t advance(const ipu_xport *q, uint32_t i, uint64_t c)
{
    const ipu_xspan *s = q->spans;
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
static uint64_t port_fit(ipu_xcursor *k, uint64_t c, uint64_t w)
{
    if (c + w <= k->next)
        return c;
    const ipu_xport *q = k->port;
    uint32_t i = advance(q, k->i, c);
    while (i < q->count && q->spans[i].start < c + w)
        c = q->spans[i++].end;
    k->i = i;
    k->next = i < q->count ? q->spans[i].start : (uint64_t)1 << 32;
    return c;
}

static ipu_xcursor cursor(ipu_xport *q)
{
    ipu_xcursor k = {q, 0, q->count ? q->spans[0].start : (uint64_t)1 << 32};
    return k;
}

/* Mark [a, b) busy: it is free, spans before i end at or before a and span i
 * (if any) starts at or after b. */
static ipu_status port_take(ipu_ctx *ctx, ipu_xport *q, uint32_t i, uint32_t a, uint32_t b)
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
        ipu_xspan *s = ipu_realloc(ctx, q->spans, (size_t)grown * sizeof *s);
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

ipu_status ipu_xports_init(ipu_ctx *ctx, ipu_xports *q, uint32_t tiles, uint32_t max_dsts)
{
    memset(q, 0, sizeof *q);
    q->tiles = tiles;
    q->ports = ipu_calloc(ctx, 2 * (size_t)tiles, sizeof *q->ports);
    q->involved = ipu_malloc(ctx, ((size_t)max_dsts + 1) * sizeof *q->involved);
    return q->ports && q->involved ? IPU_OK : IPU_NO_MEMORY(ctx);
}

void ipu_xports_free(ipu_xports *q)
{
    if (q->ports)
        for (uint32_t i = 0; i < 2 * q->tiles; i++)
            free(q->ports[i].spans);
    free(q->ports);
    free(q->involved);
    memset(q, 0, sizeof *q);
}

void ipu_xports_clear(ipu_xports *q)
{
    for (uint32_t i = 0; i < 2 * q->tiles; i++)
        q->ports[i].count = 0;
}

uint32_t ipu_xports_send_end(const ipu_xports *q, uint32_t tile)
{
    const ipu_xport *port = &q->ports[tile];
    return port->count ? port->spans[port->count - 1].end : 0;
}

ipu_status ipu_xports_place(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, ipu_xports *q,
                            size_t index, uint64_t floor)
{
    ipu_xfer *x = &phase->xfers[index];
    uint64_t words = x->bytes / 4;
    size_t n = 0;
    q->involved[n++] = cursor(&q->ports[x->src_tile]);
    for (uint32_t d = 0; d < x->dst_count; d++)
        q->involved[n++] = cursor(&q->ports[q->tiles + phase->dsts[x->first_dst + d].tile]);
    /* Stop when n calls in a row accept the candidate: then the last call on
     * each port saw the final candidate.  A port that moves the candidate goes
     * to the front and the ports that moved it before are asked next (they
     * are the busy ones), which saves most calls on a crowded phase. */
    uint64_t c = floor;
    for (size_t agreed = 0, k = 0; agreed < n;) {
        uint64_t t = port_fit(&q->involved[k], c, words);
        if (t == c) {
            agreed++;
            k = k + 1 == n ? 0 : k + 1;
            continue;
        }
        c = t;
        agreed = 1;
        ipu_xcursor mover = q->involved[k];
        memmove(&q->involved[1], &q->involved[0], k * sizeof mover);
        q->involved[0] = mover;
        k = n > 1;
    }
    uint64_t horizon = c + p->exchange_latency + words;
    if (horizon > UINT32_MAX)
        return IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                        "exchange transfer %zu: the phase is too long (its last word would "
                        "arrive at cycle %llu)",
                        index, (unsigned long long)horizon);
    for (size_t k = 0; k < n; k++)
        IPU_TRY(port_take(ctx, q->involved[k].port, q->involved[k].i, (uint32_t)c,
                          (uint32_t)(c + words)));
    x->cycle = (uint32_t)c;
    if (horizon > phase->horizon)
        phase->horizon = horizon;
    return IPU_OK;
}
