/* sim_memory.c: tile SRAM as the device sees it: accessible range, region 1
 * and alignment rules, protected ranges (runtime state, kernel code,
 * descriptors), the allocation each access must lie in, reads of bytes never
 * written since load and of bytes whose allocation's life ended since they
 * were written (sim_written.c keeps that state; an ended life poisons its
 * allocation's bytes here), and the per-tile fault slots that make fault
 * reporting independent of the thread count (the lowest faulting tile wins).
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
    f->alloc = f->other = f->nearest = -1;
    f->origin = IPU_NO_OP;
    va_list args;
    va_start(args, fmt);
    vsnprintf(f->detail, sizeof f->detail, fmt, args);
    va_end(args);
    return 1;
}

int sim_out_of_memory(sim *s, uint32_t tile)
{
    atomic_store(&s->out_of_memory, 1);
    return sim_fault(s, tile, IPU_FAULT_MALFORMED_DESCRIPTOR, 0, 0, "host out of memory");
}

void sim_stamp(sim *s, ipu_fault *f)
{
    f->program = s->program;
    f->op_index = s->op_index;
    f->step = s->step;
    f->phase = s->phase;
    f->iteration = s->depth ? s->loops[s->depth - 1].iteration : IPU_NO_ITERATION;
    f->origin = s->origin;
    if (f->alloc < 0 && f->nearest < 0 && f->address_hi > f->address_lo && s->pkg) {
        f->alloc = ipu_pkg_alloc_at(s->pkg, f->tile, f->address_lo, s->phase);
        f->nearest = ipu_pkg_alloc_nearest(s->pkg, f->tile, f->address_lo, s->phase);
    }
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
    uint32_t offset = address - p->sram_base, stop = offset + size;
    if ((access & 1u) && !sim_chunks_full(t, offset, stop)) {
        int64_t bad = sim_first_unwritten(t, offset, stop);
        if (bad >= 0) {
            /* The run of unwritten bytes inside the access. */
            uint32_t at = (uint32_t)bad, run = at + 1;
            while (run < stop && !sim_byte_written(t, run))
                run++;
            uint32_t lo = at + p->sram_base, hi = run + p->sram_base;
            /* Bytes written once and poisoned since are stale, not uninitialized. */
            if (sim_byte_ended(t, at) && s->pkg) {
                /* Name the reader's allocation and the one that wrote the bytes before. */
                if (t->faulted)
                    return 1; /* the tile's first fault stands */
                sim_fault(s, tile, IPU_FAULT_STALE_READ, lo, hi,
                          "%s [0x%X, 0x%llX) reads bytes [0x%X, 0x%X) not written since the life of "
                          "the allocation that wrote them ended",
                          accessor(label, sizeof label, what, operand), address, (unsigned long long)end,
                          lo, hi);
                t->fault.alloc = ipu_pkg_alloc_at(s->pkg, tile, lo, s->phase);
                t->fault.nearest = ipu_pkg_alloc_nearest(s->pkg, tile, lo, s->phase);
                t->fault.other = ipu_pkg_alloc_before(s->pkg, tile, lo, s->phase);
                return 1;
            }
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
    const ipu_package *pkg = s->pkg;
    sim_tile *t = &s->tiles[tile];
    if (t->alloc_hint >= 0) {
        const ipu_pkg_alloc *a = &pkg->allocs[t->alloc_hint];
        if (address >= a->address && (uint64_t)address + size <= (uint64_t)a->address + a->size &&
            ipu_pkg_alloc_live(a, s->phase))
            return 0;
    }
    int64_t own, whole = ipu_pkg_alloc_find(pkg, tile, address, size, s->phase, &own);
    if (whole >= 0) {
        t->alloc_hint = whole;
        return 0;
    }
    uint64_t end = (uint64_t)address + size;
    int live = own >= 0 && ipu_pkg_alloc_live(&pkg->allocs[own], s->phase);
    /* The first byte outside the operand's own live allocation, and whose it is. */
    uint32_t out = address;
    if (live)
        out = pkg->allocs[own].address + pkg->allocs[own].size;
    int64_t reached = ipu_pkg_alloc_at(pkg, tile, out, s->phase);
    if (reached == own)
        reached = -1;
    if (t->faulted)
        return 1; /* the tile's first fault stands */
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
    s->tiles[tile].fault.alloc = live ? own : -1;
    s->tiles[tile].fault.nearest = live ? -1 : own;
    s->tiles[tile].fault.other = reached;
    return 1;
}

ipu_status sim_end_lives(sim *s, uint32_t phase)
{
    if ((!s->check_allocs && !s->events_on) || phase >= s->phases)
        return IPU_OK;
    const ipu_package *pkg = s->pkg;
    for (uint32_t i = s->dying_start[phase]; i < s->dying_start[phase + 1]; i++) {
        ipu_status status = IPU_CHECK_CANCEL(s->ctx);
        if (status != IPU_OK)
            return status;
        const ipu_pkg_alloc *a = &pkg->allocs[s->dying[i]];
        int spans_loop = 0;
        for (int l = 0; l < s->depth; l++)
            spans_loop |= a->first < s->loops[l].body_phase &&
                          s->loops[l].iteration + 1 < s->loops[l].count;
        if (a->size && !spans_loop && s->check_allocs)
            sim_poison(&s->tiles[a->tile], a->address - s->p.sram_base,
                       a->address - s->p.sram_base + a->size);
        sim_events_end(s, s->dying[i]);
    }
    return IPU_OK;
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

uint32_t sim_descriptor_end(sim *s, uint32_t tile, uint32_t address)
{
    const ipu_pkg_segment *seg = s->tiles[tile].descriptors;
    if (!seg || address < seg->address || address - seg->address >= seg->size)
        seg = ipu_pkg_segment_at(s->pkg, tile, address, 1);
    return seg ? seg->address + seg->size : address;
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
