/* sim_memory.c: tile SRAM as the device sees it: accessible range, region 1
 * and alignment rules, protected ranges (runtime state, kernel code,
 * descriptors), the shadow bits that catch reads of bytes never written since
 * load, and the per-tile fault slots that make fault reporting independent of
 * the thread count (the lowest faulting tile wins).
 */
#include <stdio.h>
#include <string.h>

#include "device/sim.h"

int sim_fault(sim *s, uint32_t tile, int kind, uint32_t lo, uint32_t hi, const char *fmt, ...)
{
    sim_tile *t = &s->tiles[tile];
    if (t->faulted)
        return 1;
    t->faulted = 1;
    ipu_fault *f = &t->fault;
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->tile = tile;
    f->address_lo = lo;
    f->address_hi = hi;
    f->entry = f->descriptor = f->row = -1;
    va_list args;
    va_start(args, fmt);
    vsnprintf(f->detail, sizeof f->detail, fmt, args);
    va_end(args);
    return 1;
}

void sim_stamp(sim *s, ipu_fault *f)
{
    f->program = s->program;
    f->op_index = s->op_index;
    f->step = s->step;
}

int sim_collect_fault(sim *s)
{
    for (uint32_t t = 0; t < s->p.tiles; t++) {
        if (s->tiles[t].faulted) {
            s->fault = s->tiles[t].fault;
            sim_stamp(s, &s->fault);
            return 1;
        }
    }
    return 0;
}

/* First protected range overlapping [lo, hi): runtime state, code, descriptors.
 * A write that finds none remembers the unprotected gap around it (from the
 * end of the protected range below to the start of the one above), and the
 * tile's next writes inside that gap skip the search. */
static int find_protected(sim *s, uint32_t tile, uint32_t lo, uint32_t hi, uint32_t *plo,
                          uint32_t *phi, const char **what)
{
    sim_tile *t = &s->tiles[tile];
    if (lo >= t->writable_lo && hi <= t->writable_hi)
        return 0;
    uint32_t state_end = s->p.sram_base + s->p.runtime_state_bytes;
    if (lo < state_end && s->p.sram_base < hi) {
        *plo = s->p.sram_base, *phi = state_end, *what = "runtime state";
        return 1;
    }
    const ipu_package *pkg = s->pkg;
    if (!pkg)
        return 0;
    uint32_t first = pkg->tile_segment_start[tile], end = pkg->tile_segment_start[tile + 1];
    /* Segments are sorted and disjoint: find the first one ending after lo. */
    uint32_t a = first, b = end;
    while (a < b) {
        uint32_t mid = a + (b - a) / 2;
        const ipu_pkg_segment *seg = &pkg->segments[pkg->tile_segments[mid]];
        if ((uint64_t)seg->address + seg->size <= lo)
            a = mid + 1;
        else
            b = mid;
    }
    uint32_t gap_hi = ipu_profile_access_end(&s->p);
    for (uint32_t i = a; i < end; i++) {
        const ipu_pkg_segment *seg = &pkg->segments[pkg->tile_segments[i]];
        if (seg->kind == IPU_SEG_DATA)
            continue;
        if (seg->address < hi) {
            *plo = seg->address, *phi = seg->address + seg->size;
            *what = seg->kind == IPU_SEG_CODE ? "kernel code" : "descriptors";
            return 1;
        }
        gap_hi = seg->address;
        break;
    }
    uint32_t gap_lo = state_end;
    for (uint32_t i = a; i-- > first;) {
        const ipu_pkg_segment *seg = &pkg->segments[pkg->tile_segments[i]];
        if (seg->kind != IPU_SEG_DATA) {
            gap_lo = seg->address + seg->size;
            break;
        }
    }
    t->writable_lo = gap_lo;
    t->writable_hi = gap_hi;
    return 0;
}

/* First byte in [offset, offset + size) whose written bit is clear, or -1.
 * The words strictly inside the range are first ANDed together (a loop that
 * vectorises); only a range with a clear bit is searched word by word. */
static int64_t first_unwritten(const uint64_t *bits, uint32_t offset, uint32_t size)
{
    if (size == 0)
        return -1;
    uint32_t end = offset + size, first = offset >> 6, last = (end - 1) >> 6;
    uint64_t all = (bits[first] | ~sim_word_mask(first, offset, end)) &
                   (bits[last] | ~sim_word_mask(last, offset, end));
    for (uint32_t w = first + 1; w < last; w++)
        all &= bits[w];
    if (all == ~0ull)
        return -1;
    for (uint32_t w = first; w <= last; w++) {
        uint64_t missing = ~bits[w] & sim_word_mask(w, offset, end);
        if (missing)
            return ((int64_t)w << 6) + __builtin_ctzll(missing);
    }
    return -1;
}

/* Is every chunk touching [offset, end) (offset < end) known to be fully written? */
static int chunks_full(const sim_tile *t, uint32_t offset, uint32_t end)
{
    uint32_t first = offset / SIM_CHUNK, stop = (end - 1) / SIM_CHUNK + 1;
    for (uint32_t w = first >> 6; w <= (stop - 1) >> 6; w++) {
        uint64_t mask = sim_word_mask(w, first, stop);
        if ((t->full[w] & mask) != mask)
            return 0;
    }
    return 1;
}

/* Mark the chunks touching [offset, end) whose written bits are now all set
 * (bits are only ever set until the next load, so a full chunk stays full). */
static void note_full(const sim *s, sim_tile *t, uint32_t offset, uint32_t end)
{
    const uint32_t words = SIM_CHUNK / 64;
    for (uint32_t c = offset / SIM_CHUNK; c <= (end - 1) / SIM_CHUNK; c++) {
        uint32_t w0 = c * words, w1 = w0 + words;
        if (w1 > s->shadow_words)
            w1 = (uint32_t)s->shadow_words;
        uint64_t all = ~0ull;
        for (uint32_t w = w0; w < w1; w++)
            all &= t->written[w];
        if (all == ~0ull)
            t->full[c >> 6] |= 1ull << (c & 63);
    }
}

void sim_mark_written(sim *s, uint32_t tile, uint32_t address, uint32_t size)
{
    if (size == 0)
        return;
    sim_tile *t = &s->tiles[tile];
    uint32_t offset = address - s->p.sram_base, end = offset + size;
    if (chunks_full(t, offset, end))
        return;
    uint64_t *bits = t->written;
    uint32_t first = offset >> 6, last = (end - 1) >> 6;
    bits[first] |= sim_word_mask(first, offset, end);
    bits[last] |= sim_word_mask(last, offset, end);
    if (last > first + 1)
        memset(bits + first + 1, 0xFF, (last - first - 1) * sizeof *bits);
    note_full(s, t, offset, end);
}

/* The accessor's name in a fault message, "what" or "what operand 'name'";
 * only a fault builds it. */
static const char *accessor(char *buf, size_t size, const char *what, const char *operand)
{
    if (!operand)
        return what;
    snprintf(buf, size, "%s operand '%s'", what, operand);
    return buf;
}

int sim_check(sim *s, uint32_t tile, uint32_t address, uint32_t size, unsigned access,
              uint32_t alignment, int region1, const char *what, const char *operand)
{
    char label[128];
    const ipu_profile *p = &s->p;
    uint64_t end = (uint64_t)address + size;
    uint32_t access_end = ipu_profile_access_end(p);
    if (address < p->sram_base || end > access_end)
        return sim_fault(s, tile, IPU_FAULT_OUT_OF_BOUNDS, address,
                         end > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)end,
                         "%s [0x%X, 0x%llX) is outside accessible SRAM [0x%X, 0x%X)",
                         accessor(label, sizeof label, what, operand), address,
                         (unsigned long long)end, p->sram_base, access_end);
    if (alignment > 1 && address % alignment)
        return sim_fault(s, tile, IPU_FAULT_MISALIGNED, address, (uint32_t)end,
                         "%s at 0x%X must be %u-byte aligned",
                         accessor(label, sizeof label, what, operand), address, alignment);
    if (region1 && address < p->region1_base)
        return sim_fault(s, tile, IPU_FAULT_MISALIGNED, address, (uint32_t)end,
                         "%s at 0x%X needs 128-bit loads, which need region 1 (from 0x%X)",
                         accessor(label, sizeof label, what, operand), address, p->region1_base);
    if (size == 0)
        return 0;
    if (access & 2u) {
        uint32_t plo, phi;
        const char *kind;
        if (find_protected(s, tile, address, (uint32_t)end, &plo, &phi, &kind)) {
            uint32_t lo = address > plo ? address : plo,
                     hi = (uint32_t)end < phi ? (uint32_t)end : phi;
            return sim_fault(s, tile, IPU_FAULT_PROTECTED_WRITE, lo, hi,
                             "%s [0x%X, 0x%llX) writes protected %s [0x%X, 0x%X)",
                             accessor(label, sizeof label, what, operand), address,
                             (unsigned long long)end, kind, plo, phi);
        }
    }
    sim_tile *t = &s->tiles[tile];
    uint32_t offset = address - p->sram_base;
    if ((access & 1u) && !chunks_full(t, offset, offset + size)) {
        int64_t bad = first_unwritten(t->written, offset, size);
        if (bad < 0) {
            note_full(s, t, offset, offset + size);
        } else {
            uint32_t lo = (uint32_t)bad + p->sram_base;
            /* Extend over the run of unwritten bytes inside the access. */
            uint32_t hi = lo + 1;
            const uint64_t *bits = t->written;
            while (hi < end && !(bits[(hi - p->sram_base) >> 6] >> ((hi - p->sram_base) & 63) & 1))
                hi++;
            return sim_fault(s, tile, IPU_FAULT_UNINITIALIZED_READ, lo, hi,
                             "%s [0x%X, 0x%llX) reads bytes [0x%X, 0x%X) never written since load",
                             accessor(label, sizeof label, what, operand), address,
                             (unsigned long long)end, lo, hi);
        }
    }
    return 0;
}

int sim_check_descriptor(sim *s, uint32_t tile, uint32_t address, uint32_t size, const char *what)
{
    sim_tile *t = &s->tiles[tile];
    const ipu_pkg_segment *seg = t->descriptors;
    if (!seg || address < seg->address ||
        (uint64_t)address + size > (uint64_t)seg->address + seg->size) {
        seg = ipu_pkg_segment_at(s->pkg, tile, address, size);
        if (seg && seg->kind == IPU_SEG_DESCRIPTOR)
            t->descriptors = seg;
    }
    if (!seg || seg->kind != IPU_SEG_DESCRIPTOR || address % 4)
        return sim_fault(s, tile, IPU_FAULT_MALFORMED_DESCRIPTOR, address, address + size,
                         "%s [0x%X, 0x%X) is not inside a descriptor segment", what, address,
                         address + size);
    return 0;
}

int sim_fetch_record(sim *s, uint32_t tile, uint32_t address, uint32_t entry_size, uint32_t *count,
                     const char *what)
{
    if (sim_fetch_u32(s, tile, address, count, what))
        return 1;
    uint64_t size = 4 + (uint64_t)*count * entry_size;
    if (size > 0xFFFFFFFFu - address)
        return sim_fault(s, tile, IPU_FAULT_MALFORMED_DESCRIPTOR, address, address + 4,
                         "%s at 0x%X claims %u entries", what, address, *count);
    return sim_check_descriptor(s, tile, address, (uint32_t)size, what);
}

int sim_fetch_u32(sim *s, uint32_t tile, uint32_t address, uint32_t *value, const char *what)
{
    if (sim_check_descriptor(s, tile, address, 4, what))
        return 1;
    *value = ipu_load_u32(sim_ptr(s, tile, address));
    return 0;
}

void sim_prefetch_next(sim *s, uint32_t tile, uint32_t slot)
{
    /* A hint only: a prefetch never faults. */
    if (tile + 1 < s->p.tiles)
        __builtin_prefetch(sim_ptr(s, tile + 1, s->pkg->slot_tables[tile + 1] + 4 * slot));
}
