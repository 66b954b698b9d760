/* sim_replay.c: exchange phases kept for replay.  A phase's checks (decode,
 * ports, window matching, conflicting writers, bounds, alignment, protection
 * and the initialization of send sources) and its cost depend only on:
 *   - the descriptor bytes it reads: every tile's slot-table entry and table;
 *   - each tile's OUTGOING_BASE, through SET_BASE, RESET_BASE and relative
 *     sends;
 *   - the package's bounds and protected ranges, fixed until the next load;
 *   - the allocations live at its program phase, fixed for that phase;
 *   - the written bits of send sources, which an allocation's ended life
 *     may clear: a replay checks them first and runs the phase in full when
 *     one is clear (the full phase reports the fault).
 * So a phase that passed, uses no OUTGOING_BASE row, runs at the same program
 * phase, whose descriptor bytes are unchanged and whose sources are still
 * written passes again with the same matches and cost: running it again is
 * its copies.  Descriptor bytes change only by a load, a Repeat patch
 * or a debug write; each tile keeps the ranges the kept phases were read
 * from, and a write that would change one of them drops every kept phase.
 */
#include <stdlib.h>
#include <string.h>

#include "device/sim.h"

const sim_replay *sim_replay_find(const sim *s, uint32_t slot)
{
    const sim_replay *r = slot < s->replay_slots ? s->replays[slot] : NULL;
    return r && r->phase == s->phase ? r : NULL;
}

/* Index of the first watched range of t ending after address. */
static uint32_t first_after(const sim_tile *t, uint32_t address)
{
    uint32_t a = 0, b = t->watched_count;
    while (a < b) {
        uint32_t mid = a + (b - a) / 2;
        if (t->watched[mid].hi <= address)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

int sim_replay_watches(const sim *s, uint32_t tile, uint32_t address, uint32_t size)
{
    const sim_tile *t = &s->tiles[tile];
    uint32_t i = first_after(t, address);
    return i < t->watched_count && (uint64_t)t->watched[i].lo < (uint64_t)address + size;
}

/* Add [lo, hi) to t's watched ranges, merged with the ranges it touches. */
static int watch(sim *s, sim_tile *t, uint32_t lo, uint32_t hi)
{
    uint32_t a = first_after(t, lo > 0 ? lo - 1 : 0), end = a;
    while (end < t->watched_count && t->watched[end].lo <= hi) {
        if (t->watched[end].lo < lo)
            lo = t->watched[end].lo;
        if (t->watched[end].hi > hi)
            hi = t->watched[end].hi;
        end++;
    }
    if (end == a) {
        if (t->watched_count == t->watched_capacity) {
            uint32_t grown = t->watched_capacity ? 2 * t->watched_capacity : 16;
            sim_range *p = ipu_realloc(s->ctx, t->watched, grown * sizeof *p);
            if (!p)
                return 1;
            t->watched = p;
            t->watched_capacity = grown;
        }
        memmove(t->watched + a + 1, t->watched + a, (t->watched_count - a) * sizeof *t->watched);
        t->watched_count++;
    } else {
        memmove(t->watched + a + 1, t->watched + end,
                (t->watched_count - end) * sizeof *t->watched);
        t->watched_count -= end - a - 1;
    }
    t->watched[a] = (sim_range){lo, hi};
    return 0;
}

static void free_replay(sim_replay *r)
{
    if (r)
        free(r->first), free(r->copies), free(r->send_first), free(r->sends);
    free(r);
}

int sim_replay_keep(sim *s, uint32_t slot, sim_exchange_cost cost)
{
    uint32_t tiles = s->p.tiles;
    if (slot >= s->pkg->slots)
        return 0;
    size_t total = 0, sends = 0;
    for (uint32_t t = 0; t < tiles; t++) {
        if (s->tiles[t].uses_base)
            return 0;
        total += s->tiles[t].recv_count;
        sends += s->tiles[t].send_count;
    }
    if (!s->replays) {
        if (!(s->replays = ipu_calloc(s->ctx, s->pkg->slots, sizeof *s->replays)))
            return sim_out_of_memory(s, 0);
        s->replay_slots = s->pkg->slots;
    }
    /* Watch first: a kept phase must never outlive a change to its bytes. */
    for (uint32_t t = 0; t < tiles; t++) {
        sim_tile *tile = &s->tiles[t];
        uint32_t entry = s->pkg->slot_tables[t] + 4 * slot;
        if (watch(s, tile, entry, entry + 4) ||
            (tile->table && watch(s, tile, tile->table, tile->table + tile->table_bytes)))
            return sim_out_of_memory(s, t);
    }
    sim_replay *r = ipu_calloc(s->ctx, 1, sizeof *r);
    if (r) {
        r->first = ipu_malloc(s->ctx, ((size_t)tiles + 1) * sizeof *r->first);
        r->copies = ipu_malloc(s->ctx, (total ? total : 1) * sizeof *r->copies);
        r->send_first = ipu_malloc(s->ctx, ((size_t)tiles + 1) * sizeof *r->send_first);
        r->sends = ipu_malloc(s->ctx, (sends ? sends : 1) * sizeof *r->sends);
    }
    if (!r || !r->first || !r->copies || !r->send_first || !r->sends) {
        free_replay(r);
        return sim_out_of_memory(s, 0);
    }
    uint32_t n = 0;
    for (uint32_t t = 0; t < tiles; t++) {
        r->first[t] = n;
        for (uint32_t i = 0; i < s->tiles[t].recv_count; i++) {
            const sim_xfer *x = &s->tiles[t].recvs[i];
            r->copies[n++] = (sim_copy){x->address, x->source, x->words * x->width, x->peer};
        }
    }
    r->first[tiles] = n;
    n = 0;
    for (uint32_t t = 0; t < tiles; t++) {
        r->send_first[t] = n;
        for (uint32_t i = 0; i < s->tiles[t].send_count; i++) {
            const sim_xfer *x = &s->tiles[t].sends[i];
            r->sends[n++] = (sim_range){x->address, x->address + x->words * x->width};
        }
    }
    r->send_first[tiles] = n;
    r->phase = s->phase;
    r->cost = cost;
    free_replay(s->replays[slot]); /* kept before at another phase, or its sources cleared */
    s->replays[slot] = r;
    return 0;
}

void sim_replay_forget(sim *s)
{
    for (uint32_t i = 0; i < s->replay_slots; i++)
        free_replay(s->replays[i]);
    free(s->replays);
    s->replays = NULL;
    s->replay_slots = 0;
    for (uint32_t t = 0; s->tiles && t < s->p.tiles; t++)
        s->tiles[t].watched_count = 0;
}
