/* exchange.c: exchange scheduling in its modes (exchange.h).  The
 * latency-oriented order is greedy earliest fit, longest transfers first
 * (ties by index), on the tile ports of ports.c.  Compact mode schedules
 * the phase in that order and in stream waves (streams.c), and keeps the
 * schedule with the smallest largest table, then the fewest table bytes,
 * then the shortest horizon (tables measured as encoding writes them);
 * with balancing, endpoint-balanced chunks replace it only when strictly
 * shorter and no larger in either table figure.  Ranked by horizon (for
 * speed), every schedule is judged by its horizon first, then its tables.  Everything is
 * single-threaded and deterministic; nothing prints.
 */
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange.h"
#include "exchange/ports.h"
#include "exchange/streams.h"

/* The first of transfer x's destination entries on tile. */
static uint32_t first_entry(const ipu_xphase *phase, const ipu_xfer *x, uint32_t tile)
{
    uint32_t d = 0;
    while (d < x->dst_count && phase->dsts[x->first_dst + d].tile != tile)
        d++;
    return d;
}

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
                                "exchange transfer %zu (from tile %u, %u bytes): destination tile %u is listed "
                                "twice (entries %u and %u)",
                                i, x->src_tile, x->bytes, tile, x->first_dst + first_entry(phase, x, tile),
                                x->first_dst + d);
            stamp[tile] = (uint32_t)i + 1;
        }
        if (x->dst_count > *max_dsts)
            *max_dsts = x->dst_count;
    }
    return IPU_OK;
}

/* ---- latency-oriented order ------------------------------------------------------ */

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

static ipu_status latency_order(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, ipu_xports *q)
{
    order_key *order = ipu_malloc(ctx, phase->count * sizeof *order);
    if (!order)
        return IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < phase->count; i++)
        order[i] = (order_key){phase->xfers[i].bytes, i};
    qsort(order, phase->count, sizeof *order, by_length);
    phase->horizon = 0;
    ipu_status status = IPU_OK;
    for (size_t i = 0; i < phase->count && status == IPU_OK; i++)
        status = ipu_xports_place(ctx, p, phase, q, order[i].index, 0);
    free(order);
    return status;
}

/* ---- candidates ---------------------------------------------------------------------- */

/* A schedule of the phase: every transfer's cycle, its horizon and its
 * tables' largest and total bytes. */
typedef struct candidate {
    uint32_t *cycles;
    uint64_t horizon, largest, total;
} candidate;

/* Record the phase's current schedule in c (tables measured into bytes). */
static ipu_status keep(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *phase, uint64_t *bytes, candidate *c)
{
    IPU_TRY(ipu_exchange_measure(ctx, p, phase, bytes, NULL));
    c->largest = c->total = 0;
    for (uint32_t t = 0; t < p->tiles; t++) {
        c->largest = bytes[t] > c->largest ? bytes[t] : c->largest;
        c->total += bytes[t];
    }
    c->horizon = phase->horizon;
    for (size_t i = 0; i < phase->count; i++)
        c->cycles[i] = phase->xfers[i].cycle;
    return IPU_OK;
}

static void restore(ipu_xphase *phase, const candidate *c)
{
    for (size_t i = 0; i < phase->count; i++)
        phase->xfers[i].cycle = c->cycles[i];
    phase->horizon = c->horizon;
}

/* Whether a ranks before b for compact tables. */
static int smaller(const candidate *a, const candidate *b)
{
    if (a->largest != b->largest)
        return a->largest < b->largest;
    if (a->total != b->total)
        return a->total < b->total;
    return a->horizon < b->horizon;
}

/* Whether a ranks before b for speed: the shorter horizon, then the smaller tables. */
static int shorter(const candidate *a, const candidate *b)
{
    if (a->horizon != b->horizon)
        return a->horizon < b->horizon;
    if (a->largest != b->largest)
        return a->largest < b->largest;
    return a->total < b->total;
}

/* Compact mode: the latency order, the stream waves and (balancing) the
 * balanced chunks, as described at the top. */
static ipu_status compact(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, ipu_xports *q,
                          const ipu_xmode *mode)
{
    uint64_t *bytes = ipu_malloc(ctx, p->tiles * sizeof *bytes);
    candidate best = {ipu_malloc(ctx, phase->count * sizeof(uint32_t)), 0, 0, 0};
    candidate next = {ipu_malloc(ctx, phase->count * sizeof(uint32_t)), 0, 0, 0};
    ipu_status status = bytes && best.cycles && next.cycles ? IPU_OK : IPU_NO_MEMORY(ctx);
    if (status == IPU_OK)
        status = latency_order(ctx, p, phase, q);
    if (status == IPU_OK)
        status = keep(ctx, p, phase, bytes, &best);
    if (status == IPU_OK) {
        ipu_xports_clear(q);
        status = ipu_xstreams_waves(ctx, p, phase, q, mode->stream_words);
    }
    if (status == IPU_OK)
        status = keep(ctx, p, phase, bytes, &next);
    int (*before)(const candidate *, const candidate *) = mode->by_horizon ? shorter : smaller;
    if (status == IPU_OK && before(&next, &best)) {
        candidate swap = best;
        best = next, next = swap;
    }
    if (status == IPU_OK && mode->balance) {
        ipu_xports_clear(q);
        uint64_t chunk = 4ull * mode->stream_words;
        status = ipu_xstreams_balanced(ctx, p, phase, q, chunk > UINT32_MAX ? UINT32_MAX : (uint32_t)chunk);
        if (status == IPU_OK)
            status = keep(ctx, p, phase, bytes, &next);
        if (status == IPU_OK && (mode->by_horizon ? shorter(&next, &best)
                                                  : next.horizon < best.horizon && next.largest <= best.largest &&
                                                        next.total <= best.total)) {
            candidate swap = best;
            best = next, next = swap;
        }
    }
    if (status == IPU_OK)
        restore(phase, &best);
    free(bytes), free(best.cycles), free(next.cycles);
    return status;
}

ipu_status ipu_exchange_schedule(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, const ipu_xmode *mode)
{
    if (!p || !phase || (phase->count && !phase->xfers) || (phase->dst_total && !phase->dsts))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "exchange schedule: missing profile, phase or transfer arrays");
    if (p->tiles == 0 || p->tiles > 0x10000u)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "exchange schedule: %u tiles (row peers hold 16 bits)", p->tiles);
    if (mode && mode->balance && !mode->stream_words)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "exchange schedule: balanced streams need a stream wave size (0 given)");
    if (phase->count == 0) {
        phase->horizon = 0;
        return IPU_OK;
    }
    uint32_t *stamp = ipu_calloc(ctx, p->tiles, sizeof *stamp);
    if (!stamp)
        return IPU_NO_MEMORY(ctx);
    uint32_t max_dsts = 0;
    ipu_status status = validate(ctx, p, phase, stamp, &max_dsts);
    free(stamp);
    IPU_TRY(status);
    ipu_xports q;
    status = ipu_xports_init(ctx, &q, p->tiles, max_dsts);
    if (status == IPU_OK)
        status = mode && mode->stream_words ? compact(ctx, p, phase, &q, mode) : latency_order(ctx, p, phase, &q);
    ipu_xports_free(&q);
    return status;
}
