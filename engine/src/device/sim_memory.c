/* sim_memory.c: tile SRAM as the device sees it: accessible range, region 1
 * and alignment rules, protected ranges (runtime state, kernel code,
 * descriptors), the allocation each access must lie in, the shadow bits that
 * catch reads of bytes never written since load and of bytes whose
 * allocation's life ended since they were written (poisoning: an ended life
 * clears the written bits of its bytes and sets their ended bits), and the
 * per-tile fault slots that make fault reporting independent of the thread
 * count (the lowest faulting tile wins).
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
    f->alloc = f->other = -1;
    f->origin = IPU_NO_OP;
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
    f->phase = s->phase;
    f->origin = s->origin;
    if (f->alloc < 0 && f->address_hi > f->address_lo && s->pkg)
        f->alloc = ipu_pkg_alloc_at(s->pkg, f->tile, f->address_lo, s->phase);
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
 * (a full chunk stays full until a load or an allocation's ended life clears
 * its bits). */
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
            /* Bytes written once and poisoned since are stale, not uninitialized. */
            uint32_t at = lo - p->sram_base;
            if (t->ended[at >> 6] >> (at & 63) & 1)
                return sim_fault(s, tile, IPU_FAULT_STALE_READ, lo, hi,
                                 "%s [0x%X, 0x%llX) reads bytes [0x%X, 0x%X) not written since "
                                 "the life of the allocation that wrote them ended",
                                 accessor(label, sizeof label, what, operand), address,
                                 (unsigned long long)end, lo, hi);
            return sim_fault(s, tile, IPU_FAULT_UNINITIALIZED_READ, lo, hi,
                             "%s [0x%X, 0x%llX) reads bytes [0x%X, 0x%X) never written since load",
                             accessor(label, sizeof label, what, operand), address,
                             (unsigned long long)end, lo, hi);
        }
    }
    return 0;
}

int sim_check_allocation(sim *s, uint32_t tile, uint32_t address, uint32_t size, const char *what,
                         const char *operand)
{
    if (!s->check_allocs || size == 0)
        return 0;
    int64_t own;
    if (ipu_pkg_alloc_find(s->pkg, tile, address, size, s->phase, &own) >= 0)
        return 0;
    const ipu_package *pkg = s->pkg;
    uint64_t end = (uint64_t)address + size;
    int live = own >= 0 && ipu_pkg_alloc_live(&pkg->allocs[own], s->phase);
    /* The first byte outside the operand's own live allocation, and whose it is. */
    uint32_t out = address;
    if (live)
        out = pkg->allocs[own].address + pkg->allocs[own].size;
    int64_t reached = ipu_pkg_alloc_at(pkg, tile, out, s->phase);
    if (reached == own)
        reached = -1;
    char label[128], whose[160] = "", into[120] = "";
    if (own >= 0)
        snprintf(whose, sizeof whose, "%s allocation '%s'", live ? "runs past the end of" : "lies in",
                 ipu_pkg_string(pkg, pkg->allocs[own].name_offset));
    if (reached >= 0)
        snprintf(into, sizeof into, " into allocation '%s'",
                 ipu_pkg_string(pkg, pkg->allocs[reached].name_offset));
    sim_fault(s, tile, IPU_FAULT_OPERAND_OUTSIDE_ALLOCATION, out, (uint32_t)end,
              "%s [0x%X, 0x%llX) %s%s%s", accessor(label, sizeof label, what, operand), address,
              (unsigned long long)end, own < 0 ? "lies in no allocation live at this phase" : whose,
              own >= 0 && !live ? ", which is not live at this phase" : "", into);
    s->tiles[tile].fault.alloc = own;
    s->tiles[tile].fault.other = reached;
    return 1;
}

int sim_is_written(sim *s, uint32_t tile, uint32_t address, uint32_t size)
{
    if (size == 0)
        return 1;
    sim_tile *t = &s->tiles[tile];
    uint32_t offset = address - s->p.sram_base;
    return chunks_full(t, offset, offset + size) || first_unwritten(t->written, offset, size) < 0;
}

/* Clear the written bits of [offset, end) and set its ended bits where a
 * written bit was set; the chunks it touches are no longer full. */
static void poison(sim_tile *t, uint32_t offset, uint32_t end)
{
    uint32_t first = offset >> 6, last = (end - 1) >> 6;
    for (uint32_t w = first; w <= last; w++) {
        uint64_t mask = sim_word_mask(w, offset, end);
        t->ended[w] |= t->written[w] & mask;
        t->written[w] &= ~mask;
    }
    uint32_t c0 = offset / SIM_CHUNK, c1 = (end - 1) / SIM_CHUNK + 1;
    for (uint32_t w = c0 >> 6; w <= (c1 - 1) >> 6; w++)
        t->full[w] &= ~sim_word_mask(w, c0, c1);
}

void sim_end_lives(sim *s, uint32_t phase)
{
    if (!s->check_allocs || phase >= s->phases)
        return;
    const ipu_package *pkg = s->pkg;
    for (uint32_t i = s->dying_start[phase]; i < s->dying_start[phase + 1]; i++) {
        const ipu_pkg_alloc *a = &pkg->allocs[s->dying[i]];
        int spans_loop = 0;
        for (int l = 0; l < s->depth; l++)
            spans_loop |= a->first < s->loops[l].body_phase &&
                          s->loops[l].iteration + 1 < s->loops[l].count;
        if (a->size && !spans_loop)
            poison(&s->tiles[a->tile], a->address - s->p.sram_base,
                   a->address - s->p.sram_base + a->size);
    }
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
