/* sim_written.c: which bytes of a tile hold data written in the life of the
 * allocation that holds them.  Every 512-byte chunk is in one of three
 * states, kept in two summary bitmaps small enough to stay in cache:
 *   full:     every byte written (the per-byte bits are not consulted);
 *   poisoned: every byte unwritten, and each was written before an
 *             allocation's life ended (the per-byte bits are not consulted);
 *   neither:  the per-byte bits say it: `written` (written since load in the
 *             live allocation's life) and `ended` (written once, then its
 *             allocation's life ended).
 * A write or an ended life that covers whole chunks only flips their summary
 * bits; one that covers part of a chunk first spells the chunk's state out
 * in its per-byte bits.  So a tensor rewritten every Repeat iteration costs
 * a few summary words per iteration, not a pass over its per-byte bits.
 * Tiles are independent: each call touches one tile's state.
 */
#include <string.h>

#include "device/sim.h"

enum { CHUNK_WORDS = SIM_CHUNK / 64 };

static int chunk_bit(const uint64_t *map, uint32_t c) { return map[c >> 6] >> (c & 63) & 1; }

/* Spell chunk c's state out in its per-byte bits; it is then in neither state. */
static void spell_out(sim_tile *t, uint32_t c)
{
    uint64_t bit = 1ull << (c & 63);
    uint64_t *written = t->written + (size_t)c * CHUNK_WORDS, *ended = t->ended + (size_t)c * CHUNK_WORDS;
    if (t->full[c >> 6] & bit) {
        memset(written, 0xFF, CHUNK_WORDS * sizeof *written);
        t->full[c >> 6] &= ~bit;
    } else if (t->poisoned[c >> 6] & bit) {
        memset(written, 0, CHUNK_WORDS * sizeof *written);
        memset(ended, 0xFF, CHUNK_WORDS * sizeof *ended);
        t->poisoned[c >> 6] &= ~bit;
    }
}

/* A chunk in neither state whose written bits are all set becomes full. */
static void note_full(sim_tile *t, uint32_t c)
{
    const uint64_t *w = t->written + (size_t)c * CHUNK_WORDS;
    uint64_t all = ~0ull;
    for (uint32_t i = 0; i < CHUNK_WORDS; i++)
        all &= w[i];
    if (all == ~0ull)
        t->full[c >> 6] |= 1ull << (c & 63);
}

/* Summary bits of chunks [c0, c1): set in `set`, cleared in `clear`. */
static void flip_chunks(uint64_t *set, uint64_t *clear, uint32_t c0, uint32_t c1)
{
    for (uint32_t w = c0 >> 6; c0 < c1 && w <= (c1 - 1) >> 6; w++) {
        uint64_t mask = sim_word_mask(w, c0, c1);
        set[w] |= mask;
        clear[w] &= ~mask;
    }
}

int sim_chunks_full(const sim_tile *t, uint32_t offset, uint32_t end)
{
    uint32_t first = offset / SIM_CHUNK, stop = (end - 1) / SIM_CHUNK + 1;
    for (uint32_t w = first >> 6; w <= (stop - 1) >> 6; w++) {
        uint64_t mask = sim_word_mask(w, first, stop);
        if ((t->full[w] & mask) != mask)
            return 0;
    }
    return 1;
}

void sim_mark_written(sim *s, uint32_t tile, uint32_t address, uint32_t size)
{
    if (size == 0)
        return;
    sim_tile *t = &s->tiles[tile];
    uint32_t offset = address - s->p.sram_base, end = offset + size;
    if (sim_chunks_full(t, offset, end))
        return;
    uint32_t first = offset / SIM_CHUNK, last = (end - 1) / SIM_CHUNK;
    /* Whole chunks [c0, c1) only flip to full. */
    uint32_t c0 = offset % SIM_CHUNK ? first + 1 : first;
    uint32_t c1 = end % SIM_CHUNK && last >= c0 ? last : last + 1;
    flip_chunks(t->full, t->poisoned, c0, c1 > c0 ? c1 : c0);
    for (uint32_t c = first; c <= last; c++) {
        if ((c >= c0 && c < c1) || chunk_bit(t->full, c))
            continue;
        spell_out(t, c);
        uint32_t lo = c * SIM_CHUNK > offset ? c * SIM_CHUNK : offset;
        uint32_t hi = (c + 1) * SIM_CHUNK < end ? (c + 1) * SIM_CHUNK : end;
        for (uint32_t w = lo >> 6; w <= (hi - 1) >> 6; w++)
            t->written[w] |= sim_word_mask(w, lo, hi);
        note_full(t, c);
    }
}

void sim_poison(sim_tile *t, uint32_t offset, uint32_t end)
{
    uint32_t first = offset / SIM_CHUNK, last = (end - 1) / SIM_CHUNK;
    for (uint32_t c = first; c <= last; c++) {
        uint32_t lo = c * SIM_CHUNK > offset ? c * SIM_CHUNK : offset;
        uint32_t hi = (c + 1) * SIM_CHUNK < end ? (c + 1) * SIM_CHUNK : end;
        int whole = lo == c * SIM_CHUNK && hi == (c + 1) * SIM_CHUNK;
        if (chunk_bit(t->poisoned, c))
            continue;
        if (whole && chunk_bit(t->full, c)) {
            flip_chunks(t->poisoned, t->full, c, c + 1);
            continue;
        }
        spell_out(t, c);
        for (uint32_t w = lo >> 6; w <= (hi - 1) >> 6; w++) {
            uint64_t mask = sim_word_mask(w, lo, hi);
            t->ended[w] |= t->written[w] & mask;
            t->written[w] &= ~mask;
        }
    }
}

int64_t sim_first_unwritten(const sim_tile *t, uint32_t offset, uint32_t end)
{
    for (uint32_t c = offset / SIM_CHUNK; c <= (end - 1) / SIM_CHUNK; c++) {
        uint32_t lo = c * SIM_CHUNK > offset ? c * SIM_CHUNK : offset;
        uint32_t hi = (c + 1) * SIM_CHUNK < end ? (c + 1) * SIM_CHUNK : end;
        if (chunk_bit(t->full, c))
            continue;
        if (chunk_bit(t->poisoned, c))
            return lo;
        /* The words strictly inside are ANDed first (a loop that vectorises);
         * only a chunk with a clear bit is searched word by word. */
        const uint64_t *bits = t->written;
        uint32_t w0 = lo >> 6, w1 = (hi - 1) >> 6;
        uint64_t all = (bits[w0] | ~sim_word_mask(w0, lo, hi)) & (bits[w1] | ~sim_word_mask(w1, lo, hi));
        for (uint32_t w = w0 + 1; w < w1; w++)
            all &= bits[w];
        if (all == ~0ull)
            continue;
        for (uint32_t w = w0; w <= w1; w++) {
            uint64_t missing = ~bits[w] & sim_word_mask(w, lo, hi);
            if (missing)
                return ((int64_t)w << 6) + __builtin_ctzll(missing);
        }
    }
    return -1;
}

int sim_byte_written(const sim_tile *t, uint32_t offset)
{
    uint32_t c = offset / SIM_CHUNK;
    if (chunk_bit(t->full, c))
        return 1;
    if (chunk_bit(t->poisoned, c))
        return 0;
    return t->written[offset >> 6] >> (offset & 63) & 1;
}

int sim_byte_ended(const sim_tile *t, uint32_t offset)
{
    uint32_t c = offset / SIM_CHUNK;
    if (chunk_bit(t->poisoned, c))
        return 1;
    return !chunk_bit(t->full, c) && (t->ended[offset >> 6] >> (offset & 63) & 1);
}

int sim_is_written(sim *s, uint32_t tile, uint32_t address, uint32_t size)
{
    if (size == 0)
        return 1;
    const sim_tile *t = &s->tiles[tile];
    uint32_t offset = address - s->p.sram_base;
    return sim_chunks_full(t, offset, offset + size) || sim_first_unwritten(t, offset, offset + size) < 0;
}
