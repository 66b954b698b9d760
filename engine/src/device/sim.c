/* sim.c: the simulator as a device: lifecycle, loading a package into SRAM
 * (code entries, descriptors and data marked written; runtime state, code
 * and descriptors protected; the allocations ending at each program phase
 * listed), the control-program interpreter (BSP steps, host exchange through
 * the aperture, Repeat with patch descriptors applied at each iteration; the
 * current phase and compiler op kept for checks and faults, and the lives
 * ending at a phase ended after it) and the cycle report of a run.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MADV_HUGEPAGE */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "device/sim.h"

/* Zeroed memory for all tiles' SRAM or shadow bits: fresh pages, touched only
 * when used, and backed by transparent huge pages where the kernel allows it
 * (the simulator walks hundreds of megabytes per inference, so 4 KiB pages
 * would cost a TLB miss every few rows). */
static void *tile_memory(ipu_ctx *ctx, size_t bytes)
{
    if (!ipu_allocation_allowed(ctx))
        return NULL;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

/* Release the tiles' SRAM, shadow bits and chunk summaries. */
static void free_tile_memory(sim *s)
{
    if (s->sram)
        munmap(s->sram, (size_t)s->p.tiles * s->sram_bytes);
    if (s->shadow)
        munmap(s->shadow, (size_t)s->p.tiles * s->shadow_words * sizeof(uint64_t));
    if (s->ended)
        munmap(s->ended, (size_t)s->p.tiles * s->shadow_words * sizeof(uint64_t));
    free(s->full);
    free(s->poisoned);
    s->sram = NULL;
    s->shadow = s->ended = s->full = s->poisoned = NULL;
}

/* Release what was made for the loaded package and grown while running it:
 * per-tile exchange rows, kernel scratch, lives, events, the step records.
 * None of it exists while no package is loaded (so a device freed unused
 * walks none of its tiles). */
static void sim_unload(void *impl)
{
    sim *s = impl;
    if (!s->pkg)
        return;
    sim_replay_forget(s);
    for (uint32_t t = 0; s->tiles && t < s->p.tiles; t++) {
        sim_tile *tile = &s->tiles[t];
        free(tile->sends);
        free(tile->recvs);
        free(tile->watched);
        tile->sends = tile->recvs = NULL;
        tile->watched = NULL;
        tile->send_count = tile->recv_count = tile->send_capacity = tile->recv_capacity = 0;
        tile->watched_count = tile->watched_capacity = 0;
    }
    for (int i = 0; s->scratch && s->scratch_floats && i < s->threads; i++) {
        free(s->scratch[i]);
        s->scratch[i] = NULL;
        s->scratch_floats[i] = 0;
    }
    free(s->dying_start);
    free(s->dying);
    free(s->op_compute);
    s->dying_start = NULL;
    s->dying = NULL;
    s->op_compute = NULL;
    s->op_compute_ops = 0;
    sim_events_free(s);
    free(s->steps);
    free(s->step_tiles);
    s->steps = NULL;
    s->step_tiles = NULL;
    s->step_capacity = s->step_traced = 0;
    s->pkg = NULL;
}

static void sim_destroy(void *impl)
{
    sim *s = impl;
    if (!s)
        return;
    sim_unload(s);
    free(s->scratch);
    free(s->scratch_floats);
    free(s->tiles);
    free_tile_memory(s);
    free(s);
}

/* The allocations whose life ends at each program phase, grouped by phase
 * (counting sort; allocations that live forever end at none). */
static ipu_status list_lives(sim *s, ipu_ctx *ctx, const ipu_package *pkg)
{
    free(s->dying_start);
    free(s->dying);
    s->dying = NULL;
    s->check_allocs = pkg->alloc_count > 0 && !s->allocation_checks_off;
    s->phases = (uint32_t)(2 * (pkg->init_count + pkg->main_count));
    s->dying_start = ipu_calloc(ctx, (size_t)s->phases + 1, sizeof *s->dying_start);
    s->dying = ipu_malloc(ctx, (pkg->alloc_count ? pkg->alloc_count : 1) * sizeof *s->dying);
    if (!s->dying_start || !s->dying)
        return IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < pkg->alloc_count; i++)
        if (pkg->allocs[i].last != IPU_LIFE_FOREVER)
            s->dying_start[pkg->allocs[i].last + 1]++;
    for (uint32_t p = 0; p < s->phases; p++)
        s->dying_start[p + 1] += s->dying_start[p];
    uint32_t *fill = ipu_calloc(ctx, (size_t)s->phases + 1, sizeof *fill);
    if (!fill)
        return IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < pkg->alloc_count; i++) {
        uint32_t last = pkg->allocs[i].last;
        if (last != IPU_LIFE_FOREVER)
            s->dying[s->dying_start[last] + fill[last]++] = (uint32_t)i;
    }
    free(fill);
    return IPU_OK;
}

static ipu_status load_package(sim *s, ipu_ctx *ctx, const ipu_package *pkg)
{
    size_t tiles = s->p.tiles;
    sim_replay_forget(s);
    if (!s->sram) {
        s->sram = tile_memory(ctx, tiles * s->sram_bytes);
        s->shadow = tile_memory(ctx, tiles * s->shadow_words * sizeof(uint64_t));
        s->ended = tile_memory(ctx, tiles * s->shadow_words * sizeof(uint64_t));
        s->full = ipu_calloc(ctx, tiles * s->full_words, sizeof(uint64_t));
        s->poisoned = ipu_calloc(ctx, tiles * s->full_words, sizeof(uint64_t));
        if (!s->sram || !s->shadow || !s->ended || !s->full || !s->poisoned) {
            free_tile_memory(s); /* all or none: the next initialize allocates again */
            return IPU_NO_MEMORY(ctx);
        }
    } else {
        memset(s->shadow, 0, tiles * s->shadow_words * sizeof(uint64_t));
        memset(s->ended, 0, tiles * s->shadow_words * sizeof(uint64_t));
        memset(s->full, 0, tiles * s->full_words * sizeof(uint64_t));
        memset(s->poisoned, 0, tiles * s->full_words * sizeof(uint64_t));
    }
    IPU_TRY(list_lives(s, ctx, pkg));
    IPU_TRY(sim_events_reset(s, ctx, pkg));
    for (uint32_t t = 0; t < s->p.tiles; t++) {
        sim_tile *tile = &s->tiles[t];
        tile->mem = s->sram + (size_t)t * s->sram_bytes;
        tile->written = s->shadow + (size_t)t * s->shadow_words;
        tile->ended = s->ended + (size_t)t * s->shadow_words;
        tile->full = s->full + (size_t)t * s->full_words;
        tile->poisoned = s->poisoned + (size_t)t * s->full_words;
        tile->code_entries = tile->code_bodies = 0;
        tile->outgoing_base = 0;
        tile->alloc_hint = -1;
        tile->descriptors = NULL;
        tile->writable_lo = tile->writable_hi = 0;
        tile->faulted = 0;
    }
    /* Copying the segments first touches the tiles' fresh pages: seconds for
     * a full device on a loaded machine, so a cancel request is looked at
     * between segments (each at most a tile's SRAM). */
    for (size_t i = 0; i < pkg->segment_count; i++) {
        IPU_TRY(IPU_CHECK_CANCEL(ctx));
        const ipu_pkg_segment *seg = &pkg->segments[i];
        sim_tile *tile = &s->tiles[seg->tile];
        uint8_t *dst = tile->mem + (seg->address - s->p.sram_base);
        if (seg->kind == IPU_SEG_CODE) {
            /* Kernel code bytes are not modelled: a fixed pattern per entry. */
            memset(dst, 0xC0 | (int)(seg->entry & 0x3F), seg->size);
            if (seg->entry & IPU_CODE_BODY)
                tile->code_bodies |= 1ull << (seg->entry & ~IPU_CODE_BODY);
            else
                tile->code_entries |= 1ull << seg->entry;
        } else {
            memcpy(dst, ipu_pkg_segment_bytes(pkg, seg), seg->size);
        }
        sim_mark_written(s, seg->tile, seg->address, seg->size);
    }
    return IPU_OK;
}

/* Host exchange through the aperture; *bytes receives the total moved. */
static int host_phase(sim *s, ipu_ctx *ctx, uint32_t slot, int in, ipu_host_buffer *buffers,
                      uint64_t *bytes, ipu_status *status)
{
    const ipu_package *pkg = s->pkg;
    uint64_t moved = 0;
    /* Missing input data is the caller's error, not a device fault. */
    for (uint32_t t = 0; in && t < s->p.tiles; t++) {
        uint32_t table, count;
        if (sim_fetch_u32(s, t, pkg->slot_tables[t] + 4 * slot, &table, "slot table"))
            break;
        if (!table || sim_fetch_record(s, t, table, IPU_HOST_ENTRY_SIZE, &count, "host descriptor"))
            continue;
        for (uint32_t e = 0; e < count; e++) {
            uint32_t at = table + 4 + e * IPU_HOST_ENTRY_SIZE;
            uint32_t stream = ipu_load_u32(sim_ptr(s, t, at));
            if (stream < pkg->stream_count && !buffers[stream].present) {
                *status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                   "the program reads host stream '%s', but no data was set for it",
                                   ipu_pkg_string(pkg, pkg->streams[stream].name_offset));
                return 1;
            }
        }
    }
    if (sim_collect_fault(s))
        return 1;
#pragma omp parallel for schedule(dynamic, 16) num_threads(s->threads) reduction(+ : moved)
    for (int64_t i = 0; i < (int64_t)s->p.tiles; i++) {
        uint32_t t = (uint32_t)i, table, count;
        if (sim_fetch_u32(s, t, pkg->slot_tables[t] + 4 * slot, &table, "slot table") || !table)
            continue;
        if (sim_fetch_record(s, t, table, IPU_HOST_ENTRY_SIZE, &count, "host descriptor"))
            continue;
        for (uint32_t e = 0; e < count; e++) {
            const uint8_t *d = sim_ptr(s, t, table + 4 + e * IPU_HOST_ENTRY_SIZE);
            uint32_t stream = ipu_load_u32(d), offset = ipu_load_u32(d + 4),
                     address = ipu_load_u32(d + 8), row_bytes = ipu_load_u32(d + 12),
                     rows = ipu_load_u32(d + 16), stream_stride = ipu_load_u32(d + 20),
                     tile_stride = ipu_load_u32(d + 24), reserved = ipu_load_u32(d + 28);
            const ipu_pkg_stream *st = stream < pkg->stream_count ? &pkg->streams[stream] : NULL;
            /* The extents the rows span in the stream and on the tile (no
             * overflow: (2^32 - 1)^2 + 2 * (2^32 - 1) < 2^64). */
            uint64_t stream_end = offset, tile_end = address;
            if (rows) {
                stream_end += (uint64_t)(rows - 1) * stream_stride + row_bytes;
                tile_end += (uint64_t)(rows - 1) * tile_stride + row_bytes;
            }
            const char *why = NULL;
            if (!st)
                why = "no such stream";
            else if ((st->direction == IPU_STREAM_OUTPUT) == in)
                why = "wrong direction";
            else if (reserved)
                why = "reserved word not zero";
            else if (rows == 0)
                why = "no rows";
            else if (rows > 1 && tile_stride < row_bytes)
                why = "rows overlap on the tile";
            else if (stream_end > st->size)
                why = "runs past the stream";
            else if (address < s->p.aperture_base || tile_end > s->p.aperture_end)
                why = "leaves the aperture";
            if (why) {
                sim_fault(s, t, IPU_FAULT_MALFORMED_DESCRIPTOR, address,
                          tile_end > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)tile_end,
                          "host descriptor entry %u: stream %u, %u rows of %u bytes from offset %u "
                          "(stride %u) to 0x%X (stride %u) is not a valid %s transfer inside the "
                          "aperture (%s)",
                          e, stream, rows, row_bytes, offset, stream_stride, address, tile_stride,
                          in ? "input" : "output", why);
                s->tiles[t].fault.row = (int)e;
                break;
            }
            int faulted = 0;
            for (uint32_t r = 0; r < rows && !faulted; r++) {
                uint32_t at = address + r * tile_stride;
                uint64_t from = offset + (uint64_t)r * stream_stride;
                if (sim_check(s, t, at, row_bytes, in ? 2u : 1u, 1, 0,
                              in ? "host input" : "host output", NULL) ||
                    sim_check_allocation(s, t, at, row_bytes, in ? "host input" : "host output",
                                         NULL)) {
                    s->tiles[t].fault.row = (int)e;
                    faulted = 1;
                } else if (in) {
                    memcpy(sim_ptr(s, t, at), buffers[stream].data + from, row_bytes);
                    sim_mark_written(s, t, at, row_bytes);
                } else {
                    memcpy(buffers[stream].data + from, sim_ptr(s, t, at), row_bytes);
                }
            }
            if (faulted)
                break;
            moved += (uint64_t)rows * row_bytes;
        }
    }
    *bytes = moved;
    return sim_collect_fault(s);
}

/* Apply a Repeat's patch list for one iteration; *cycles receives the cost. */
static int patch_phase(sim *s, uint32_t slot, uint32_t iteration, uint64_t *cycles)
{
    const ipu_package *pkg = s->pkg;
    uint64_t longest = 0;
    int stale = 0; /* a patch changed bytes a kept exchange phase was read from */
#pragma omp parallel for schedule(dynamic, 16) num_threads(s->threads) reduction(max : longest) \
    reduction(| : stale)
    for (int64_t i = 0; i < (int64_t)s->p.tiles; i++) {
        uint32_t t = (uint32_t)i, list, count;
        if (sim_fetch_u32(s, t, pkg->slot_tables[t] + 4 * slot, &list, "slot table") || !list)
            continue;
        if (sim_fetch_record(s, t, list, IPU_PATCH_SIZE, &count, "patch list"))
            continue;
        for (uint32_t e = 0; e < count; e++) {
            const uint8_t *d = sim_ptr(s, t, list + 4 + e * IPU_PATCH_SIZE);
            uint32_t kind = ipu_load_u32(d), target = ipu_load_u32(d + 4), a = ipu_load_u32(d + 8),
                     b = ipu_load_u32(d + 12), value;
            if (kind == IPU_PATCH_PROGRESSION) {
                value = a + iteration * b;
            } else if (kind == IPU_PATCH_TABLE && iteration < b &&
                       (uint64_t)a + 4 * (uint64_t)iteration <= 0xFFFFFFFFu - 4) {
                /* A patch table is a descriptor (DEVICE.md): read from descriptor storage, as the static
                 * timing reads it, never from tensor data a kernel may have written. */
                if (sim_fetch_u32(s, t, a + 4 * iteration, &value, "patch table")) {
                    s->tiles[t].fault.row = (int)e;
                    break;
                }
            } else {
                sim_fault(s, t, IPU_FAULT_MALFORMED_DESCRIPTOR, list, list + 4 + count * IPU_PATCH_SIZE,
                          "patch entry %u: kind %u with %u table entries at 0x%X at iteration %u", e, kind, b, a,
                          iteration);
                s->tiles[t].fault.row = (int)e;
                break;
            }
            if (sim_check_descriptor(s, t, target, 4, "patch target")) {
                s->tiles[t].fault.row = (int)e;
                break;
            }
            if (ipu_load_u32(sim_ptr(s, t, target)) != value && sim_replay_watches(s, t, target, 4))
                stale = 1;
            ipu_store_u32(sim_ptr(s, t, target), value);
        }
        if ((uint64_t)count * IPU_PATCH_CYCLES > longest)
            longest = (uint64_t)count * IPU_PATCH_CYCLES;
    }
    if (stale)
        sim_replay_forget(s);
    *cycles = longest;
    return sim_collect_fault(s);
}

/* Room for step record s->step (and its traced tiles' cycles); 0 when out of memory. */
static int step_room(sim *s)
{
    if (s->step < s->step_capacity)
        return 1;
    size_t capacity = s->step_capacity ? 2 * s->step_capacity : 64;
    sim_step *steps = ipu_realloc(s->ctx, s->steps, capacity * sizeof *steps);
    if (steps)
        s->steps = steps;
    uint64_t *tiles = steps && s->traced_count
                          ? ipu_realloc(s->ctx, s->step_tiles, capacity * s->traced_count * sizeof *tiles)
                          : s->step_tiles;
    if (!steps || (s->traced_count && !tiles))
        return 0;
    s->step_tiles = tiles;
    s->step_capacity = capacity;
    return 1;
}

/* One executed step of control op op: its cycles, the bytes its exchange
 * phase sent and received and its host transfer moved, and the compiler ops
 * its compute (or host) phase and its exchange phase lower.  Returns 1 (the
 * device stops) when out of memory. */
static int record_step(sim *s, const ipu_pkg_op *op, const char *kind, uint64_t compute, uint32_t compute_tile,
                        uint64_t sync, sim_exchange_cost xc, uint64_t host, uint64_t host_bytes, uint64_t control)
{
    s->totals[SIM_COMPUTE] += compute;
    s->totals[SIM_SYNC] += sync;
    s->totals[SIM_EXCHANGE] += xc.cycles;
    s->totals[SIM_HOST] += host;
    s->totals[SIM_CONTROL] += control;
    if (!step_room(s))
        return sim_out_of_memory(s, 0);
    /* The step as reports number it: its op's first phase, and the Repeat iteration it belongs to. */
    s->steps[s->step] = (sim_step){
        kind, s->program, s->op_index, op->origin[0],
        op->op == IPU_OP_STEP && op->b != IPU_NO_SLOT ? op->origin[1] : IPU_NO_OP,
        2 * (s->program_base + s->op_index), s->depth ? s->loops[s->depth - 1].iteration : IPU_NO_ITERATION,
        compute_tile, compute, sync, xc.cycles, host, control, xc.sent, xc.received, host_bytes};
    /* A step's own compute cycles on each traced tile (0 when the step computes nothing). */
    int computed = op->op == IPU_OP_STEP && op->a != IPU_NO_SLOT;
    for (size_t k = 0; k < s->traced_count; k++)
        s->step_tiles[s->step * s->traced_count + k] = computed ? s->tiles[s->traced[k]].step_cycles : 0;
    s->step++;
    return 0;
}

/* Enter phase half (0: compute or host, 1: exchange) of the current op. */
static void enter_phase(sim *s, const ipu_pkg_op *op, int half)
{
    s->phase = 2 * (s->program_base + s->op_index) + (uint32_t)half;
    s->origin = op->origin[half];
    sim_events_enter(s);
}

/* The end of the current phase: lives ending there end, then the observer
 * sees it.  Returns 1 (with *status) when the observer stops the run. */
static int end_phase(sim *s, ipu_status *status)
{
    if ((*status = sim_end_lives(s, s->phase)) != IPU_OK)
        return 1;
    if (!s->observer)
        return 0;
    uint32_t iteration = s->depth ? s->loops[s->depth - 1].iteration : IPU_NO_ITERATION;
    *status = s->observer(s->observer_user, s->phase, iteration);
    return *status != IPU_OK;
}

static int run_step(sim *s, const ipu_pkg_op *op, ipu_status *status)
{
    uint64_t compute = 0;
    sim_exchange_cost exchange = {0, 0, 0};
    uint32_t slowest = 0;
    enter_phase(s, op, 0);
    if (op->a != IPU_NO_SLOT) {
        if (sim_compute_phase(s, op->a) || (*status = IPU_CHECK_CANCEL(s->ctx)) != IPU_OK)
            return 1;
        for (uint32_t t = 0; t < s->p.tiles; t++)
            if (s->tiles[t].step_cycles > compute)
                compute = s->tiles[t].step_cycles, slowest = t;
        uint64_t *by_tile = s->op_compute && s->program_base && s->op_index < s->op_compute_ops
                                ? &s->op_compute[(size_t)s->op_index * s->p.tiles]
                                : NULL;
        for (uint32_t t = 0; t < s->p.tiles; t++) {
            s->tiles[t].compute_total += s->tiles[t].step_cycles;
            s->tiles[t].wait_total += compute - s->tiles[t].step_cycles;
            if (by_tile)
                by_tile[t] += s->tiles[t].step_cycles;
        }
    }
    if (end_phase(s, status))
        return 1;
    enter_phase(s, op, 1);
    if (op->b != IPU_NO_SLOT && sim_exchange_phase(s, op->b, &exchange))
        return 1;
    if (end_phase(s, status))
        return 1;
    return record_step(s, op, op->b != IPU_NO_SLOT ? "step" : "compute", compute, slowest, s->p.sync_cycles,
                       exchange, 0, 0, 0);
}

static int execute(sim *s, ipu_ctx *ctx, const ipu_pkg_op *ops, size_t begin, size_t end,
                   ipu_host_buffer *buffers, ipu_status *status)
{
    for (size_t i = begin; i < end; i++) {
        const ipu_pkg_op *op = &ops[i];
        s->op_index = (uint32_t)i;
        if ((*status = IPU_CHECK_CANCEL(ctx)) != IPU_OK)
            return 1;
        switch (op->op) {
        case IPU_OP_STEP:
            if (run_step(s, op, status))
                return 1;
            break;
        case IPU_OP_HOST_IN:
        case IPU_OP_HOST_OUT: {
            uint64_t bytes = 0;
            enter_phase(s, op, 0);
            if (host_phase(s, ctx, op->a, op->op == IPU_OP_HOST_IN, buffers, &bytes, status) ||
                end_phase(s, status) || (*status = sim_end_lives(s, s->phase + 1)) != IPU_OK)
                return 1;
            uint64_t cycles = ipu_profile_host_cycles(&s->p, bytes);
            if (record_step(s, op, op->op == IPU_OP_HOST_IN ? "host_in" : "host_out", 0, 0, s->p.sync_cycles,
                            (sim_exchange_cost){0, 0, 0}, cycles, bytes, 0))
                return 1;
            break;
        }
        case IPU_OP_REPEAT:
            /* Validation bounds nesting at 64. */
            s->loops[s->depth++] = (sim_loop){2 * (s->program_base + (uint32_t)i + 1), 0, op->a};
            for (uint32_t it = 0; it < op->a; it++) {
                s->loops[s->depth - 1].iteration = it;
                s->op_index = (uint32_t)i;
                enter_phase(s, op, 0);
                if (op->c != IPU_NO_SLOT) {
                    uint64_t cycles = 0;
                    if (patch_phase(s, op->c, it, &cycles))
                        return 1;
                    if (record_step(s, op, "patch", 0, 0, 0, (sim_exchange_cost){0, 0, 0}, 0, 0, cycles))
                        return 1;
                }
                if ((*status = sim_end_lives(s, s->phase)) != IPU_OK ||
                    (*status = sim_end_lives(s, s->phase + 1)) != IPU_OK)
                    return 1;
                if (execute(s, ctx, ops, i + 1, i + 1 + op->b, buffers, status))
                    return 1;
            }
            s->depth--;
            i += op->b;
            break;
        }
    }
    return 0;
}

static ipu_status execute_program(sim *s, ipu_ctx *ctx, const char *name, const ipu_pkg_op *ops,
                                  size_t count, ipu_host_buffer *buffers)
{
    const ipu_package *pkg = s->pkg;
    memset(&s->fault, 0, sizeof s->fault);
    atomic_store(&s->out_of_memory, 0);
    for (uint32_t t = 0; t < s->p.tiles; t++) {
        s->tiles[t].faulted = 0;
        s->tiles[t].compute_total = s->tiles[t].wait_total = 0;
    }
    /* Output buffers are rewritten by every run. */
    for (size_t i = 0; i < pkg->stream_count; i++) {
        if (pkg->streams[i].direction != IPU_STREAM_OUTPUT)
            continue;
        if (!buffers[i].data) {
            buffers[i].data = ipu_calloc(ctx, 1, pkg->streams[i].size);
            if (!buffers[i].data)
                return IPU_NO_MEMORY(ctx);
            buffers[i].size = pkg->streams[i].size;
        }
        buffers[i].present = 1;
    }
    if (s->step_traced != s->traced_count) { /* the traced tiles changed: room for as many per step */
        free(s->step_tiles);
        s->step_tiles = NULL;
        s->step_capacity = 0;
        s->step_traced = s->traced_count;
    }
    memset(s->totals, 0, sizeof s->totals);
    s->program = name;
    s->program_base = ops == pkg->main_ops ? (uint32_t)pkg->init_count : 0;
    s->depth = 0;
    s->step = 0;
    ipu_status status = IPU_OK;
    if (execute(s, ctx, ops, 0, count, buffers, &status)) {
        if (status != IPU_OK)
            return status;
        if (atomic_load(&s->out_of_memory))
            return IPU_NO_MEMORY(ctx);
        const ipu_fault *f = &s->fault;
        char op[160], allocs[640] = "";
        ipu_pkg_compiler_op_label(pkg, f->origin, op, sizeof op);
        /* What the second allocation is to the fault. */
        const char *other = f->kind == IPU_FAULT_STALE_READ        ? "; its bytes were written by allocation"
                            : f->kind == IPU_FAULT_ELEMENT_CONFLICT ? "; the other operand's allocation"
                                                                    : "; reached allocation";
        if (f->alloc < 0 && f->address_hi > f->address_lo)
            snprintf(allocs, sizeof allocs, "; no allocation live at phase %u", f->phase);
        for (int k = 0; k < 3; k++) {
            int64_t a = k == 0 ? f->alloc : k == 1 ? f->nearest : f->other;
            if (a < 0)
                continue;
            size_t used = strlen(allocs);
            snprintf(allocs + used, sizeof allocs - used, "%s '%s' (tensor '%s', phases %u..",
                     k == 0 ? "; allocation" : k == 1 ? " (the nearest in time holding it:" : other,
                     ipu_pkg_string(pkg, pkg->allocs[a].name_offset),
                     ipu_pkg_string(pkg, pkg->allocs[a].tensor_offset), pkg->allocs[a].first);
            used = strlen(allocs);
            if (pkg->allocs[a].last == IPU_LIFE_FOREVER)
                snprintf(allocs + used, sizeof allocs - used, "end)");
            else
                snprintf(allocs + used, sizeof allocs - used, "%u)", pkg->allocs[a].last);
            used = strlen(allocs);
            if (k == 1)
                snprintf(allocs + used, sizeof allocs - used, ")");
        }
        return IPU_FAIL(ctx, IPU_ERR_DEVICE_FAULT,
                        "device fault %s on tile %u at [0x%X, 0x%X), %s program op %u%s%s%s, phase "
                        "%u, step %llu: %s%s",
                        ipu_fault_kind_name(f->kind), f->tile, f->address_lo, f->address_hi,
                        f->program, f->op_index, *op ? " (" : "", op, *op ? ")" : "", f->phase,
                        (unsigned long long)f->step, f->detail, allocs);
    }
    return IPU_OK;
}

/* Run a program with ctx's allocator; the simulator keeps no context after it. */
static ipu_status run_program(sim *s, ipu_ctx *ctx, const char *name, const ipu_pkg_op *ops,
                              size_t count, ipu_host_buffer *buffers)
{
    s->ctx = ctx;
    ipu_status status = execute_program(s, ctx, name, ops, count, buffers);
    s->ctx = NULL;
    return status;
}

static ipu_status sim_initialize(void *impl, ipu_ctx *ctx, const ipu_package *pkg,
                                 ipu_host_buffer *buffers)
{
    sim *s = impl;
    s->pkg = pkg;
    IPU_TRY(load_package(s, ctx, pkg));
    return run_program(s, ctx, "init", pkg->init_ops, pkg->init_count, buffers);
}

/* A compiler op index or a Repeat iteration as JSON, null for none. */
static json_t *index_json(uint32_t index, uint32_t none)
{
    return index == none ? json_null() : json_integer(index);
}

/* The steps run so far in this invocation, as the cycle report lists them. */
static json_t *steps_json(const sim *s)
{
    json_t *steps = json_array();
    for (uint64_t i = 0; steps && i < s->step; i++) {
        const sim_step *p = &s->steps[i];
        json_t *step = json_pack(
            "{s:I, s:s, s:s, s:I, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:I, s:I}", "index",
            (json_int_t)i, "kind", p->kind, "program", p->program, "op", (json_int_t)p->op, "compiler_op",
            index_json(p->compiler_op, IPU_NO_OP), "exchange_compiler_op",
            index_json(p->exchange_compiler_op, IPU_NO_OP), "compute", (json_int_t)p->compute, "compute_tile",
            (json_int_t)p->compute_tile, "sync", (json_int_t)p->sync, "exchange", (json_int_t)p->exchange, "host",
            (json_int_t)p->host, "control", (json_int_t)p->control, "cycles",
            (json_int_t)(p->compute + p->sync + p->exchange + p->host + p->control), "phase", (json_int_t)p->phase,
            "iteration", index_json(p->iteration, IPU_NO_ITERATION), "sent_bytes", (json_int_t)p->sent,
            "received_bytes", (json_int_t)p->received, "host_bytes", (json_int_t)p->host_bytes);
        if (step && s->traced_count) {
            json_t *traced = json_array();
            for (size_t k = 0; traced && k < s->traced_count; k++)
                json_array_append_new(traced, json_integer((json_int_t)s->step_tiles[i * s->traced_count + k]));
            if (json_object_set_new(step, "tile_compute", traced)) {
                json_decref(step);
                step = NULL;
            }
        }
        if (json_array_append_new(steps, step)) {
            json_decref(steps);
            return NULL;
        }
    }
    return steps;
}

/* The cycle report of the steps run so far in this invocation; NULL when
 * out of memory. */
static json_t *cycle_report(const sim *s)
{
    json_t *steps = steps_json(s);
    if (!steps)
        return NULL;
    uint64_t cycles = 0;
    for (int i = 0; i < 5; i++)
        cycles += s->totals[i];
    json_t *compute = json_array(), *wait = json_array();
    for (uint32_t t = 0; t < s->p.tiles; t++) {
        json_array_append_new(compute, json_integer((json_int_t)s->tiles[t].compute_total));
        json_array_append_new(wait, json_integer((json_int_t)s->tiles[t].wait_total));
    }
    /* The main control ops that computed on some tile: per tile, their compute cycles over the run. */
    json_t *ops = json_array(), *cycles_by_op = json_array();
    for (size_t op = 0; op < s->op_compute_ops; op++) {
        const uint64_t *by_tile = &s->op_compute[op * s->p.tiles];
        uint32_t t = 0;
        while (t < s->p.tiles && !by_tile[t])
            t++;
        if (t == s->p.tiles)
            continue;
        json_t *row = json_array();
        for (t = 0; t < s->p.tiles; t++)
            json_array_append_new(row, json_integer((json_int_t)by_tile[t]));
        json_array_append_new(ops, json_integer((json_int_t)op));
        json_array_append_new(cycles_by_op, row);
    }
    return json_pack("{s:I, s:f, s:f, s:{s:I, s:I, s:I, s:I, s:I}, s:o, s:{s:o, s:o, s:{s:o, s:o}}}", "cycles",
                     (json_int_t)cycles, "ms", (double)cycles / s->p.clock_hz * 1e3, "clock_hz", s->p.clock_hz,
                     "totals", "compute", (json_int_t)s->totals[SIM_COMPUTE], "sync",
                     (json_int_t)s->totals[SIM_SYNC], "exchange", (json_int_t)s->totals[SIM_EXCHANGE], "host",
                     (json_int_t)s->totals[SIM_HOST], "control", (json_int_t)s->totals[SIM_CONTROL], "steps",
                     steps, "tiles", "compute", compute, "wait", wait, "compute_by_op", "op", ops, "cycles",
                     cycles_by_op);
}

/* One invocation of the main program; *result is its cycle report, also
 * when a device fault stopped it (then it covers the steps completed). */
static ipu_status sim_run(void *impl, ipu_ctx *ctx, ipu_host_buffer *buffers, json_t **result)
{
    sim *s = impl;
    s->invocation++;
    free(s->op_compute);
    s->op_compute_ops = s->pkg->main_count;
    s->op_compute = ipu_calloc(ctx, (s->op_compute_ops ? s->op_compute_ops : 1) * s->p.tiles, sizeof *s->op_compute);
    if (!s->op_compute)
        return IPU_NO_MEMORY(ctx);
    ipu_status status = run_program(s, ctx, "main", s->pkg->main_ops, s->pkg->main_count, buffers);
    if (status != IPU_OK && status != IPU_ERR_DEVICE_FAULT)
        return status;
    *result = cycle_report(s);
    return *result || status != IPU_OK ? status : IPU_NO_MEMORY(ctx);
}

static const ipu_fault *sim_fault_of(const void *impl) { return &((const sim *)impl)->fault; }

static ipu_status debug_range(const sim *s, ipu_ctx *ctx, uint32_t tile, uint32_t address,
                              size_t size)
{
    if (tile >= s->p.tiles || address < s->p.sram_base || size > s->p.sram_end ||
        address > s->p.sram_end - size)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "tile %u [0x%X, +%zu) is outside the device's SRAM", tile, address, size);
    if (!s->tiles[tile].mem)
        return IPU_FAIL(ctx, IPU_ERR_STATE, "the device holds no package yet");
    return IPU_OK;
}

static ipu_status sim_read(const void *impl, ipu_ctx *ctx, uint32_t tile, uint32_t address,
                           void *out, size_t size)
{
    const sim *s = impl;
    IPU_TRY(debug_range(s, ctx, tile, address, size));
    memcpy(out, s->tiles[tile].mem + (address - s->p.sram_base), size);
    return IPU_OK;
}

static ipu_status sim_write(void *impl, ipu_ctx *ctx, uint32_t tile, uint32_t address,
                            const void *in, size_t size)
{
    sim *s = impl;
    IPU_TRY(debug_range(s, ctx, tile, address, size));
    if (sim_replay_watches(s, tile, address, (uint32_t)size))
        sim_replay_forget(s);
    memcpy(s->tiles[tile].mem + (address - s->p.sram_base), in, size);
    sim_mark_written(s, tile, address, (uint32_t)size);
    return IPU_OK;
}

static void sim_set_allocation_checks(void *impl, int on) { ((sim *)impl)->allocation_checks_off = !on; }

static void sim_set_memory_events(void *impl, int mode) { ((sim *)impl)->events_on = mode; }

static void sim_set_traced_tiles(void *impl, const uint32_t *tiles, size_t count)
{
    sim *s = impl;
    s->traced_count = count < IPU_MAX_TRACED_TILES ? count : IPU_MAX_TRACED_TILES;
    memcpy(s->traced, tiles, s->traced_count * sizeof *tiles);
}

static const ipu_memory_events *sim_memory_events(const void *impl)
{
    const sim *s = impl;
    return s->events_on && !s->events_failed ? &s->events : NULL;
}

static void sim_set_observer(void *impl, ipu_phase_observer observer, void *user)
{
    sim *s = impl;
    s->observer = observer;
    s->observer_user = user;
}

static const ipu_device_iface SIM_IFACE = {
    "simulator", sim_initialize, sim_unload, sim_run, sim_set_allocation_checks, sim_set_observer,
    sim_set_memory_events, sim_memory_events, sim_set_traced_tiles, sim_fault_of, sim_read, sim_write,
    sim_destroy,
};

ipu_status ipu_sim_create(ipu_ctx *ctx, const ipu_profile *profile, const ipu_device_iface **iface,
                          void **impl)
{
    sim *s = ipu_calloc(ctx, 1, sizeof *s);
    if (!s)
        return IPU_NO_MEMORY(ctx);
    s->p = *profile;
    s->sram_bytes = profile->sram_end - profile->sram_base;
    /* Per-byte bits for whole chunks (sim_written.c spells a chunk out at once). */
    s->shadow_words = (s->sram_bytes + SIM_CHUNK - 1) / SIM_CHUNK * (SIM_CHUNK / 64);
    s->full_words = ((s->sram_bytes + SIM_CHUNK - 1) / SIM_CHUNK + 63) / 64;
    s->threads = ctx->threads > 0 ? ctx->threads : omp_get_max_threads();
    s->tiles = ipu_calloc(ctx, profile->tiles, sizeof *s->tiles);
    s->scratch = ipu_calloc(ctx, (size_t)s->threads, sizeof *s->scratch);
    s->scratch_floats = ipu_calloc(ctx, (size_t)s->threads, sizeof *s->scratch_floats);
    if (!s->tiles || !s->scratch || !s->scratch_floats) {
        sim_destroy(s);
        return IPU_NO_MEMORY(ctx);
    }
    *iface = &SIM_IFACE;
    *impl = s;
    return IPU_OK;
}
