/* streams.c: compact scheduling orders (streams.h).  Both orders build the
 * receive streams once: every destination of every transfer, sorted by
 * (tile, key, transfer), and each stream turned to start at its first
 * window from a tile above its own (wrapping around to the windows before
 * it, which costs one full row).  Redistributions are mostly all-to-alls
 * within groups of tiles, every receiver's buffer in sender order: unturned,
 * every receiver would first ask the group's first sender and wait for it
 * in turn; turned, the receivers of a group ask distinct senders at every
 * step.  A tile's floor is the end of its last receive so far (send-time
 * cycles); a transfer goes at the earliest fit at or after the floors of
 * all its destinations, which keeps each stream's receives in the order
 * they were taken.  A multicast transfer is placed once, by the first
 * stream that takes it.
 */
#include <stdlib.h>
#include <string.h>

#include "exchange/streams.h"

typedef struct entry {
    uint64_t key;
    uint32_t tile, xfer;
} entry;

typedef struct streams {
    entry *entries; /* by (tile, key, transfer) */
    size_t *start;  /* tiles + 1: tile t's stream is entries[start[t] .. start[t + 1]) */
    uint64_t *floor;
    uint8_t *placed; /* per transfer */
} streams;

static void streams_free(streams *s)
{
    free(s->entries), free(s->start), free(s->floor), free(s->placed);
}

static int by_stream(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->tile != y->tile)
        return x->tile < y->tile ? -1 : 1;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->xfer > y->xfer) - (x->xfer < y->xfer);
}

static ipu_status streams_build(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *phase, streams *s)
{
    memset(s, 0, sizeof *s);
    s->entries = ipu_malloc(ctx, (phase->dst_total ? phase->dst_total : 1) * sizeof *s->entries);
    s->start = ipu_calloc(ctx, (size_t)p->tiles + 1, sizeof *s->start);
    s->floor = ipu_calloc(ctx, p->tiles, sizeof *s->floor);
    s->placed = ipu_calloc(ctx, phase->count ? phase->count : 1, 1);
    if (!s->entries || !s->start || !s->floor || !s->placed) {
        streams_free(s);
        return IPU_NO_MEMORY(ctx);
    }
    size_t n = 0;
    for (size_t i = 0; i < phase->count; i++) {
        const ipu_xfer *x = &phase->xfers[i];
        for (uint32_t d = 0; d < x->dst_count; d++) {
            const ipu_xfer_dst *dst = &phase->dsts[x->first_dst + d];
            s->entries[n++] = (entry){dst->key, dst->tile, (uint32_t)i};
            s->start[dst->tile + 1]++;
        }
    }
    qsort(s->entries, n, sizeof *s->entries, by_stream);
    for (uint32_t t = 0; t < p->tiles; t++)
        s->start[t + 1] += s->start[t];
    /* Turn each stream to start after its own tile (described at the top). */
    entry *turned = ipu_malloc(ctx, (n ? n : 1) * sizeof *turned);
    if (!turned) {
        streams_free(s);
        return IPU_NO_MEMORY(ctx);
    }
    for (uint32_t t = 0; t < p->tiles; t++) {
        size_t first = s->start[t], count = s->start[t + 1] - first, shift = 0;
        while (shift < count && phase->xfers[s->entries[first + shift].xfer].src_tile <= t)
            shift++;
        if (shift == count)
            shift = 0;
        for (size_t i = 0; i < count; i++)
            turned[first + i] = s->entries[first + (i + shift) % count];
    }
    free(s->entries);
    s->entries = turned;
    return IPU_OK;
}

/* Place transfer i after its destinations' floors, and raise them. */
static ipu_status place_after_floors(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, ipu_xports *q,
                                     streams *s, uint32_t i)
{
    ipu_xfer *x = &phase->xfers[i];
    uint64_t floor = 0;
    for (uint32_t d = 0; d < x->dst_count; d++) {
        uint64_t f = s->floor[phase->dsts[x->first_dst + d].tile];
        floor = f > floor ? f : floor;
    }
    IPU_TRY(ipu_xports_place(ctx, p, phase, q, i, floor));
    for (uint32_t d = 0; d < x->dst_count; d++)
        s->floor[phase->dsts[x->first_dst + d].tile] = (uint64_t)x->cycle + x->bytes / 4;
    s->placed[i] = 1;
    return IPU_OK;
}

/* ---- waves --------------------------------------------------------------------- */

typedef struct wave_key {
    uint64_t wave, total, prefix;
    uint32_t tile, xfer;
} wave_key;

static int wave_cmp(const wave_key *x, const wave_key *y)
{
    if (x->wave != y->wave)
        return x->wave < y->wave ? -1 : 1;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    if (x->tile != y->tile)
        return x->tile < y->tile ? -1 : 1;
    if (x->prefix != y->prefix)
        return x->prefix < y->prefix ? -1 : 1;
    return (x->xfer > y->xfer) - (x->xfer < y->xfer);
}

static int by_wave(const void *a, const void *b) { return wave_cmp(a, b); }

ipu_status ipu_xstreams_waves(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, ipu_xports *q,
                              uint32_t words)
{
    streams s;
    IPU_TRY(streams_build(ctx, p, phase, &s));
    wave_key *order = ipu_malloc(ctx, (phase->count ? phase->count : 1) * sizeof *order);
    ipu_status status = order ? IPU_OK : IPU_NO_MEMORY(ctx);
    /* Each transfer is taken where it comes earliest: over its destinations'
     * streams, the smallest key. */
    for (size_t i = 0; i < phase->count && status == IPU_OK; i++)
        order[i] = (wave_key){UINT64_MAX, 0, 0, 0, (uint32_t)i};
    for (uint32_t t = 0; t < p->tiles && status == IPU_OK; t++) {
        uint64_t total = 0, prefix = 0;
        for (size_t e = s.start[t]; e < s.start[t + 1]; e++)
            total += phase->xfers[s.entries[e].xfer].bytes / 4;
        for (size_t e = s.start[t]; e < s.start[t + 1]; e++) {
            uint32_t i = s.entries[e].xfer;
            wave_key k = {prefix / words, total, prefix, t, i};
            if (wave_cmp(&k, &order[i]) < 0)
                order[i] = k;
            prefix += phase->xfers[i].bytes / 4;
        }
    }
    if (status == IPU_OK)
        qsort(order, phase->count, sizeof *order, by_wave);
    phase->horizon = 0;
    for (size_t n = 0; n < phase->count && status == IPU_OK; n++)
        status = place_after_floors(ctx, p, phase, q, &s, order[n].xfer);
    free(order);
    streams_free(&s);
    return status;
}

/* ---- endpoint-balanced chunks ---------------------------------------------------- */

typedef struct chunk_key {
    uint64_t ready, remaining;
    uint32_t tile;
} chunk_key;

static int chunk_cmp(const chunk_key *x, const chunk_key *y)
{
    if (x->ready != y->ready)
        return x->ready < y->ready ? -1 : 1;
    if (x->remaining != y->remaining)
        return x->remaining > y->remaining ? -1 : 1;
    return (x->tile > y->tile) - (x->tile < y->tile);
}

/* A binary min-heap of chunk keys, one per stream with work left. */
typedef struct heap {
    chunk_key *items;
    size_t count;
} heap;

static void heap_push(heap *h, chunk_key k)
{
    size_t i = h->count++;
    while (i && chunk_cmp(&k, &h->items[(i - 1) / 2]) < 0) {
        h->items[i] = h->items[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->items[i] = k;
}

static chunk_key heap_pop(heap *h)
{
    chunk_key top = h->items[0], last = h->items[--h->count];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->count)
            break;
        if (c + 1 < h->count && chunk_cmp(&h->items[c + 1], &h->items[c]) < 0)
            c++;
        if (chunk_cmp(&h->items[c], &last) >= 0)
            break;
        h->items[i] = h->items[c];
        i = c;
    }
    if (h->count)
        h->items[i] = last;
    return top;
}

/* Stream t's key now: its cursor moved past transfers other streams placed;
 * ready when both its receiver and its next sender are free.  Returns 0
 * when the stream has nothing left. */
static int stream_key(const ipu_xphase *phase, const ipu_xports *q, const streams *s, size_t *cursor,
                      uint64_t *left, uint32_t t, chunk_key *k)
{
    while (cursor[t] < s->start[t + 1] && s->placed[s->entries[cursor[t]].xfer])
        left[t] -= phase->xfers[s->entries[cursor[t]++].xfer].bytes / 4;
    if (cursor[t] == s->start[t + 1])
        return 0;
    uint64_t send = ipu_xports_send_end(q, phase->xfers[s->entries[cursor[t]].xfer].src_tile);
    *k = (chunk_key){s->floor[t] > send ? s->floor[t] : send, left[t], t};
    return 1;
}

ipu_status ipu_xstreams_balanced(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, ipu_xports *q,
                                 uint32_t chunk_words)
{
    streams s;
    IPU_TRY(streams_build(ctx, p, phase, &s));
    uint32_t tiles = p->tiles;
    size_t *cursor = ipu_malloc(ctx, tiles * sizeof *cursor);
    uint64_t *left = ipu_calloc(ctx, tiles, sizeof *left);
    heap h = {ipu_malloc(ctx, tiles * sizeof *h.items), 0};
    ipu_status status = cursor && left && h.items ? IPU_OK : IPU_NO_MEMORY(ctx);
    for (uint32_t t = 0; t < tiles && status == IPU_OK; t++) {
        cursor[t] = s.start[t];
        for (size_t e = s.start[t]; e < s.start[t + 1]; e++)
            left[t] += phase->xfers[s.entries[e].xfer].bytes / 4;
        chunk_key k;
        if (stream_key(phase, q, &s, cursor, left, t, &k))
            heap_push(&h, k);
    }
    phase->horizon = 0;
    while (h.count && status == IPU_OK) {
        chunk_key top = heap_pop(&h), now;
        uint32_t t = top.tile;
        if (!stream_key(phase, q, &s, cursor, left, t, &now))
            continue;
        /* Keys only grow: a stale key is a lower bound, so retake it. */
        if (h.count && chunk_cmp(&now, &h.items[0]) > 0) {
            heap_push(&h, now);
            continue;
        }
        for (uint64_t taken = 0; cursor[t] < s.start[t + 1] && taken < chunk_words && status == IPU_OK;) {
            uint32_t i = s.entries[cursor[t]++].xfer;
            uint32_t words = phase->xfers[i].bytes / 4;
            taken += words;
            left[t] -= words;
            if (!s.placed[i])
                status = place_after_floors(ctx, p, phase, q, &s, i);
        }
        if (status == IPU_OK && stream_key(phase, q, &s, cursor, left, t, &now))
            heap_push(&h, now);
    }
    free(cursor), free(left), free(h.items);
    streams_free(&s);
    return status;
}
