/* timing.c: the static timer (timing.h).  It walks the main program as the
 * device's interpreter does: a step costs its slowest tile's kernel cycles
 * (each descriptor's cycle formula on its arguments), the barrier, and its
 * exchange horizon (the latest receive end, or a send's end plus the wire
 * latency) plus the fixed overhead; a host transfer the barrier and its
 * bytes at the host link's rate; a Repeat iteration its longest patch list.
 * Patches are applied to a copy of each patched descriptor segment, so a
 * record read at an iteration holds what the device reads then; the init
 * program's Repeats patch first, as they do before the device's first run
 * (later runs may start from the main program's last patches: the timing is
 * the first run's).
 *
 * Each slot's records are measured once per tile and kept; a record that a
 * patch may change (its slot-table word or its bytes overlap a patch
 * target) is measured again at every execution.  The per-tile work of a
 * slot does not depend on the thread count (tiles are measured in order).
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "package/xrow.h"
#include "timing/timing.h"
#include "ipu/ipu.h"

/* What one tile's record of a slot contributes. */
typedef struct tile_cost {
    uint64_t cycles;   /* kernel cycles; exchange horizon; patch entries */
    uint64_t sent;     /* exchange bytes sent; host bytes moved */
    uint64_t received; /* exchange bytes received */
} tile_cost;

/* A slot measured on every tile: the stable tiles' share summed, the tiles
 * whose record a patch may change listed (they are measured each time). */
typedef struct slot_cache {
    int measured;
    uint64_t *compute;  /* compute slots: per tile cycles (volatile tiles refreshed) */
    tile_cost stable;   /* other slots: max cycles, summed bytes over stable tiles */
    uint32_t *volatile_tiles;
    size_t volatile_count;
} slot_cache;

/* Per control op with an exchange phase: its bytes over every execution. */
typedef struct phase_volume {
    uint64_t executions, sent, received, cycles;
} phase_volume;

typedef struct timer {
    ipu_ctx *ctx;
    const ipu_package *pkg;
    const ipu_profile *p;
    uint8_t **copies;        /* per segment: the patched copy of a descriptor segment, NULL: none */
    uint32_t *target_start;  /* per tile (tiles + 1): its patch targets, sorted, in targets */
    uint32_t *targets;
    slot_cache *slots;
    phase_volume *volumes;   /* per main control op */
    uint64_t *tile_compute, *tile_wait;
    uint64_t totals[5];      /* compute, sync, exchange, host, control */
    uint32_t loop_iteration[64];
    uint32_t depth;
    uint64_t step;
    json_t *steps;
} timer;

enum { T_COMPUTE, T_SYNC, T_EXCHANGE, T_HOST, T_CONTROL };

/* [address, address + size) on tile inside one descriptor segment: its bytes
 * (the patched copy when there is one) and, in *avail, the bytes from
 * address to the segment's end; NULL when it is not descriptor storage. */
static const uint8_t *view(const timer *tm, uint32_t tile, uint32_t address, uint32_t size, size_t *avail)
{
    const ipu_pkg_segment *seg = ipu_pkg_segment_at(tm->pkg, tile, address, size ? size : 1);
    if (!seg || seg->kind != IPU_SEG_DESCRIPTOR)
        return NULL;
    size_t index = (size_t)(seg - tm->pkg->segments);
    const uint8_t *base = tm->copies[index] ? tm->copies[index] : ipu_pkg_segment_bytes(tm->pkg, seg);
    if (avail)
        *avail = seg->address + seg->size - address;
    return base + (address - seg->address);
}

static int read_u32(const timer *tm, uint32_t tile, uint32_t address, uint32_t *value)
{
    const uint8_t *at = view(tm, tile, address, 4, NULL);
    if (at)
        *value = ipu_load_u32(at);
    return at != NULL;
}

/* Whether a patch target of tile overlaps [lo, hi). */
static int patched(const timer *tm, uint32_t tile, uint64_t lo, uint64_t hi)
{
    if (tm->target_start[tile] == tm->target_start[tile + 1])
        return 0; /* (no targets at all: targets is NULL) */
    const uint32_t *t = tm->targets + tm->target_start[tile], *end = tm->targets + tm->target_start[tile + 1];
    while (t < end) { /* first target ending after lo */
        const uint32_t *mid = t + (end - t) / 2;
        if ((uint64_t)*mid + 4 <= lo)
            t = mid + 1;
        else
            end = mid;
    }
    return t < tm->targets + tm->target_start[tile + 1] && *t < hi;
}

static ipu_status unreadable(timer *tm, uint32_t tile, uint32_t slot, const char *what, uint32_t address)
{
    return IPU_FAIL(tm->ctx, IPU_ERR_MALFORMED,
                    "static timing: tile %u, slot %u: the %s at 0x%X cannot be read (the device would fault)",
                    tile, slot, what, address);
}

/* The record of slot on tile (0: none), and whether its slot word may be patched. */
static ipu_status record_of(timer *tm, uint32_t tile, uint32_t slot, uint32_t *record, int *changes)
{
    uint32_t word = tm->pkg->slot_tables[tile] + 4 * slot;
    if (!read_u32(tm, tile, word, record))
        return unreadable(tm, tile, slot, "slot table entry", word);
    *changes = patched(tm, tile, word, (uint64_t)word + 4);
    return IPU_OK;
}

/* A compute list: the kernels' cycles; *end receives the list's end. */
static ipu_status measure_compute(timer *tm, uint32_t tile, uint32_t slot, uint32_t list, tile_cost *cost,
                                  uint64_t *end)
{
    uint32_t count;
    if (!read_u32(tm, tile, list, &count))
        return unreadable(tm, tile, slot, "compute list", list);
    uint64_t at = (uint64_t)list + 4;
    for (uint32_t d = 0; d < count; d++) {
        ipu_kernel_call call = {0};
        uint32_t head;
        if (at > 0xFFFFFFFFu - 4 || !read_u32(tm, tile, (uint32_t)at, &head))
            return unreadable(tm, tile, slot, "kernel descriptor", (uint32_t)at);
        call.entry = (int)(head & 0xFFFF);
        call.arg_count = head >> 16;
        size_t avail = 0;
        const uint8_t *args = view(tm, tile, (uint32_t)at, 4, &avail);
            if (!ipu_kernel_arg_count(call.entry) || call.arg_count > IPU_KERNEL_MAX_ARGS ||
            avail < 4 + 4 * (size_t)call.arg_count)
            return IPU_FAIL(tm->ctx, IPU_ERR_MALFORMED,
                            "static timing: tile %u, slot %u: descriptor %u at 0x%X calls entry %d with %u "
                            "arguments (the device would fault)",
                            tile, slot, d, (uint32_t)at, call.entry, call.arg_count);
        for (uint32_t i = 0; i < call.arg_count; i++)
            call.args[i] = ipu_load_u32(args + 4 + 4 * i);
        const char *bad = ipu_kernel_describe(&call);
        if (bad)
            return IPU_FAIL(tm->ctx, IPU_ERR_MALFORMED,
                            "static timing: tile %u, slot %u: descriptor %u (%s): %s (the device would fault)",
                            tile, slot, d, ipu_kernel_name(call.entry), bad);
        cost->cycles += ipu_kernel_cycles(&call, tm->p);
        at += 4 + 4 * (uint64_t)call.arg_count;
    }
    *end = at;
    return IPU_OK;
}

/* An exchange table: its horizon (without the fixed overhead) and bytes. */
static ipu_status measure_exchange(timer *tm, uint32_t tile, uint32_t slot, uint32_t table, tile_cost *cost,
                                   uint64_t *end)
{
    size_t avail;
    const uint8_t *head = view(tm, tile, table, 4, &avail);
    if (!head)
        return unreadable(tm, tile, slot, "exchange table", table);
    ipu_xrow_reader reader;
    ipu_xrow_reader_init(&reader, head + 4, avail - 4, ipu_load_u32(head));
    ipu_xrow row;
    int got;
    while ((got = ipu_xrow_next(&reader, &row)) > 0) {
        if (row.op == IPU_XROW_SET_BASE || row.op == IPU_XROW_RESET_BASE)
            continue;
        if ((row.op != IPU_XROW_SEND && row.op != IPU_XROW_RECV) ||
            (row.flags & ~(IPU_XFLAG_RELATIVE | IPU_XFLAG_PAIRED)) || row.words == 0 || row.words > (1u << 20) ||
            row.cycle > (1u << 30) || (row.op == IPU_XROW_RECV && row.peer >= tm->p->tiles))
            break;
        uint64_t bytes = (uint64_t)row.words * ipu_xrow_width(&row);
        uint64_t done = (uint64_t)row.cycle + row.words;
        if (row.op == IPU_XROW_SEND) {
            done += tm->p->exchange_latency;
            cost->sent += bytes;
        } else {
            cost->received += bytes;
        }
        if (done > cost->cycles)
            cost->cycles = done;
    }
    if (got != 0)
        return IPU_FAIL(tm->ctx, IPU_ERR_MALFORMED,
                        "static timing: tile %u, slot %u: exchange table at 0x%X, entry %u is malformed (the "
                        "device would fault)",
                        tile, slot, table, reader.entry);
    *end = (uint64_t)table + 4 + reader.next;
    return IPU_OK;
}

/* A record of a u32 count and that many entries of `size` bytes at
 * address: its entries and count, and where it ends. */
static ipu_status counted(timer *tm, uint32_t tile, uint32_t slot, uint32_t address, uint32_t size, const char *what,
                          const uint8_t **entries, uint32_t *count, uint64_t *end)
{
    size_t avail;
    const uint8_t *head = view(tm, tile, address, 4, &avail);
    *count = head ? ipu_load_u32(head) : 0;
    if (!head || (avail - 4) / size < *count)
        return unreadable(tm, tile, slot, what, address);
    *entries = head + 4;
    *end = (uint64_t)address + 4 + (uint64_t)*count * size;
    return IPU_OK;
}

/* A host descriptor: the bytes it moves (counted as sent). */
static ipu_status measure_host(timer *tm, uint32_t tile, uint32_t slot, uint32_t table, tile_cost *cost,
                               uint64_t *end)
{
    const uint8_t *entries;
    uint32_t count;
    IPU_TRY(counted(tm, tile, slot, table, IPU_HOST_ENTRY_SIZE, "host descriptor", &entries, &count, end));
    for (uint32_t e = 0; e < count; e++) {
        const uint8_t *d = entries + (size_t)e * IPU_HOST_ENTRY_SIZE;
        cost->sent += (uint64_t)ipu_load_u32(d + 12) * ipu_load_u32(d + 16);
    }
    return IPU_OK;
}

/* A patch list: its entry count. */
static ipu_status measure_patches(timer *tm, uint32_t tile, uint32_t slot, uint32_t list, tile_cost *cost,
                                  uint64_t *end)
{
    const uint8_t *entries;
    uint32_t count;
    IPU_TRY(counted(tm, tile, slot, list, IPU_PATCH_SIZE, "patch list", &entries, &count, end));
    cost->cycles = count;
    return IPU_OK;
}

typedef ipu_status (*measure_fn)(timer *tm, uint32_t tile, uint32_t slot, uint32_t record, tile_cost *cost,
                                 uint64_t *end);

/* One tile's record of slot measured; *changes: whether a patch may change it. */
static ipu_status measure_tile(timer *tm, measure_fn measure, uint32_t tile, uint32_t slot, tile_cost *cost,
                               int *changes)
{
    uint32_t record = 0;
    memset(cost, 0, sizeof *cost);
    IPU_TRY(record_of(tm, tile, slot, &record, changes));
    if (!record)
        return IPU_OK;
    uint64_t end = record;
    IPU_TRY(measure(tm, tile, slot, record, cost, &end));
    *changes |= patched(tm, tile, record, end);
    return IPU_OK;
}

/* Slot's cost over every tile: the largest cycles (and, for compute, its
 * first tile and each tile's cycles in the cache) and the summed bytes. */
static ipu_status measure_slot(timer *tm, measure_fn measure, uint32_t slot, int compute, tile_cost *total,
                               uint32_t *slowest)
{
    slot_cache *c = &tm->slots[slot];
    uint32_t tiles = tm->p->tiles;
    tile_cost cost;
    int changes = 0;
    if (!c->measured) {
        if (compute && !(c->compute = ipu_calloc(tm->ctx, tiles, sizeof *c->compute)))
            return IPU_NO_MEMORY(tm->ctx);
        size_t capacity = 0;
        for (uint32_t t = 0; t < tiles; t++) {
            IPU_TRY(measure_tile(tm, measure, t, slot, &cost, &changes));
            if (compute)
                c->compute[t] = cost.cycles;
            if (changes) {
                IPU_TRY(IPU_GROW(tm->ctx, c->volatile_tiles, c->volatile_count, capacity));
                c->volatile_tiles[c->volatile_count++] = t;
                continue;
            }
            c->stable.cycles = cost.cycles > c->stable.cycles ? cost.cycles : c->stable.cycles;
            c->stable.sent += cost.sent;
            c->stable.received += cost.received;
        }
        c->measured = 1;
    }
    *total = c->stable;
    for (size_t i = 0; i < c->volatile_count; i++) {
        uint32_t t = c->volatile_tiles[i];
        IPU_TRY(measure_tile(tm, measure, t, slot, &cost, &changes));
        if (compute)
            c->compute[t] = cost.cycles;
        total->cycles = cost.cycles > total->cycles ? cost.cycles : total->cycles;
        total->sent += cost.sent;
        total->received += cost.received;
    }
    if (compute) { /* the first tile of the most cycles, as the device names it */
        total->cycles = 0;
        *slowest = 0;
        for (uint32_t t = 0; t < tiles; t++)
            if (c->compute[t] > total->cycles)
                total->cycles = c->compute[t], *slowest = t;
    }
    return IPU_OK;
}

/* Apply slot's patch lists for one iteration, as the device does. */
static ipu_status apply_patches(timer *tm, uint32_t slot, uint32_t iteration)
{
    const ipu_package *pkg = tm->pkg;
    for (uint32_t t = 0; t < tm->p->tiles; t++) {
        uint32_t list, count;
        int changes = 0;
        IPU_TRY(record_of(tm, t, slot, &list, &changes));
        if (!list)
            continue;
        if (!read_u32(tm, t, list, &count))
            return unreadable(tm, t, slot, "patch list", list);
        for (uint32_t e = 0; e < count; e++) {
            size_t avail;
            uint64_t entry = (uint64_t)list + 4 + (uint64_t)e * IPU_PATCH_SIZE;
            const uint8_t *d = entry <= 0xFFFFFFFFu ? view(tm, t, (uint32_t)entry, IPU_PATCH_SIZE, &avail) : NULL;
            if (!d)
                return unreadable(tm, t, slot, "patch entry", (uint32_t)entry);
            uint32_t kind = ipu_load_u32(d), target = ipu_load_u32(d + 4), a = ipu_load_u32(d + 8),
                     b = ipu_load_u32(d + 12), value;
            if (kind == IPU_PATCH_PROGRESSION) {
                value = a + iteration * b;
            } else if (kind == IPU_PATCH_TABLE && iteration < b &&
                       (uint64_t)a + 4 * (uint64_t)iteration <= 0xFFFFFFFFu - 4 &&
                       read_u32(tm, t, a + 4 * iteration, &value)) {
                /* a table in descriptor storage: no kernel writes it */
            } else {
                return IPU_FAIL(tm->ctx, IPU_ERR_MALFORMED,
                                "static timing: tile %u, slot %u: patch entry %u (kind %u, table of %u at 0x%X) "
                                "has no value at iteration %u in descriptor storage",
                                t, slot, e, kind, b, a, iteration);
            }
            const ipu_pkg_segment *seg = ipu_pkg_segment_at(pkg, t, target, 4);
            if (!seg || seg->kind != IPU_SEG_DESCRIPTOR)
                return unreadable(tm, t, slot, "patch target", target);
            size_t index = (size_t)(seg - pkg->segments);
            if (!tm->copies[index]) {
                if (!(tm->copies[index] = ipu_malloc(tm->ctx, seg->size)))
                    return IPU_NO_MEMORY(tm->ctx);
                memcpy(tm->copies[index], ipu_pkg_segment_bytes(pkg, seg), seg->size);
            }
            ipu_store_u32(tm->copies[index] + (target - seg->address), value);
        }
    }
    return IPU_OK;
}

static int by_value(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Every tile's patch targets (of every Repeat's patch slot), sorted. */
static ipu_status list_targets(timer *tm)
{
    const ipu_package *pkg = tm->pkg;
    uint32_t tiles = tm->p->tiles;
    size_t count = 0, capacity = 0;
    tm->target_start = ipu_calloc(tm->ctx, (size_t)tiles + 1, sizeof *tm->target_start);
    if (!tm->target_start)
        return IPU_NO_MEMORY(tm->ctx);
    for (uint32_t t = 0; t < tiles; t++) {
        tm->target_start[t] = (uint32_t)count;
        for (int init = 0; init < 2; init++) {
            const ipu_pkg_op *ops = init ? pkg->init_ops : pkg->main_ops;
            size_t n = init ? pkg->init_count : pkg->main_count;
            for (size_t i = 0; i < n; i++) {
                uint32_t list, entries, slot = ops[i].c, word = pkg->slot_tables[t] + 4 * slot;
                if (ops[i].op != IPU_OP_REPEAT || slot == IPU_NO_SLOT || !read_u32(tm, t, word, &list) || !list)
                    continue;
                size_t avail;
                const uint8_t *head = view(tm, t, list, 4, &avail);
                entries = head ? ipu_load_u32(head) : 0;
                if (head && (avail - 4) / IPU_PATCH_SIZE < entries)
                    entries = (uint32_t)((avail - 4) / IPU_PATCH_SIZE);
                for (uint32_t e = 0; e < entries; e++) {
                    IPU_TRY(IPU_GROW(tm->ctx, tm->targets, count, capacity));
                    tm->targets[count++] = ipu_load_u32(head + 4 + (size_t)e * IPU_PATCH_SIZE + 4);
                }
            }
        }
        if (count > tm->target_start[t])
            qsort(tm->targets + tm->target_start[t], count - tm->target_start[t], sizeof *tm->targets, by_value);
    }
    tm->target_start[tiles] = (uint32_t)count;
    return IPU_OK;
}

/* The patches the init program's Repeats apply, every iteration in order:
 * the descriptors the first run of the main program starts from. */
static ipu_status initialize(timer *tm)
{
    const ipu_pkg_op *ops = tm->pkg->init_ops;
    for (size_t i = 0; i < tm->pkg->init_count; i++) {
        if (ops[i].op != IPU_OP_REPEAT || ops[i].c == IPU_NO_SLOT)
            continue;
        for (uint32_t it = 0; it < ops[i].a; it++)
            IPU_TRY(apply_patches(tm, ops[i].c, it));
    }
    return IPU_OK;
}

static json_t *origin_json(uint32_t origin)
{
    return origin == IPU_NO_OP ? json_null() : json_integer(origin);
}

/* One executed step, recorded as the device records it (exchange: its
 * cycles and bytes; host: its cycles and, in sent, the bytes it moves). */
static ipu_status record(timer *tm, uint32_t index, const ipu_pkg_op *op, const char *kind, uint64_t compute,
                         uint32_t compute_tile, uint64_t sync, tile_cost xc, tile_cost host, uint64_t control)
{
    uint64_t exchange = xc.cycles;
    tm->totals[T_COMPUTE] += compute;
    tm->totals[T_SYNC] += sync;
    tm->totals[T_EXCHANGE] += exchange;
    tm->totals[T_HOST] += host.cycles;
    tm->totals[T_CONTROL] += control;
    json_t *step = json_pack(
        "{s:I, s:s, s:s, s:I, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:I, s:I}", "index",
        (json_int_t)tm->step,
        "kind", kind, "program", "main", "op", (json_int_t)index, "compiler_op", origin_json(op->origin[0]),
        "exchange_compiler_op",
        origin_json(op->op == IPU_OP_STEP && op->b != IPU_NO_SLOT ? op->origin[1] : IPU_NO_OP), "compute",
        (json_int_t)compute, "compute_tile", (json_int_t)compute_tile, "sync", (json_int_t)sync, "exchange",
        (json_int_t)exchange, "host", (json_int_t)host.cycles, "control", (json_int_t)control, "cycles",
        (json_int_t)(compute + sync + exchange + host.cycles + control), "phase",
        (json_int_t)(2 * (tm->pkg->init_count + index)), "iteration",
        tm->depth ? json_integer(tm->loop_iteration[tm->depth - 1]) : json_null(), "sent_bytes",
        (json_int_t)xc.sent, "received_bytes", (json_int_t)xc.received, "host_bytes", (json_int_t)host.sent);
    tm->step++;
    return step && !json_array_append_new(tm->steps, step) ? IPU_OK : IPU_NO_MEMORY(tm->ctx);
}

static ipu_status run_step(timer *tm, uint32_t index, const ipu_pkg_op *op)
{
    tile_cost compute = {0, 0, 0}, exchange = {0, 0, 0};
    uint32_t slowest = 0;
    if (op->a != IPU_NO_SLOT) {
        IPU_TRY(measure_slot(tm, measure_compute, op->a, 1, &compute, &slowest));
        const uint64_t *by_tile = tm->slots[op->a].compute;
        for (uint32_t t = 0; t < tm->p->tiles; t++) {
            tm->tile_compute[t] += by_tile[t];
            tm->tile_wait[t] += compute.cycles - by_tile[t];
        }
    }
    if (op->b != IPU_NO_SLOT) {
        IPU_TRY(measure_slot(tm, measure_exchange, op->b, 0, &exchange, NULL));
        exchange.cycles += tm->p->exchange_overhead;
        phase_volume *v = &tm->volumes[index];
        v->executions++;
        v->sent += exchange.sent;
        v->received += exchange.received;
        v->cycles += exchange.cycles;
    }
    tile_cost none = {0, 0, 0};
    return record(tm, index, op, op->b != IPU_NO_SLOT ? "step" : "compute", compute.cycles, slowest,
                  tm->p->sync_cycles, exchange, none, 0);
}

static ipu_status execute(timer *tm, size_t begin, size_t end)
{
    const ipu_pkg_op *ops = tm->pkg->main_ops;
    for (size_t i = begin; i < end; i++) {
        const ipu_pkg_op *op = &ops[i];
        IPU_TRY(IPU_CHECK_CANCEL(tm->ctx));
        tile_cost cost, none = {0, 0, 0};
        switch (op->op) {
        case IPU_OP_STEP:
            IPU_TRY(run_step(tm, (uint32_t)i, op));
            break;
        case IPU_OP_HOST_IN:
        case IPU_OP_HOST_OUT:
            IPU_TRY(measure_slot(tm, measure_host, op->a, 0, &cost, NULL));
            cost.cycles = ipu_profile_host_cycles(tm->p, cost.sent);
            IPU_TRY(record(tm, (uint32_t)i, op, op->op == IPU_OP_HOST_IN ? "host_in" : "host_out", 0, 0,
                           tm->p->sync_cycles, none, cost, 0));
            break;
        case IPU_OP_REPEAT:
            if (tm->depth == sizeof tm->loop_iteration / sizeof *tm->loop_iteration)
                return IPU_FAIL(tm->ctx, IPU_ERR_MALFORMED, "static timing: Repeats nest deeper than 64");
            tm->depth++;
            for (uint32_t it = 0; it < op->a; it++) {
                tm->loop_iteration[tm->depth - 1] = it;
                if (op->c != IPU_NO_SLOT) {
                    /* Charged for the entries the list has before they apply, as the device does. */
                    IPU_TRY(measure_slot(tm, measure_patches, op->c, 0, &cost, NULL));
                    IPU_TRY(apply_patches(tm, op->c, it));
                    IPU_TRY(record(tm, (uint32_t)i, op, "patch", 0, 0, 0, none, none, cost.cycles * IPU_PATCH_CYCLES));
                }
                IPU_TRY(execute(tm, i + 1, i + 1 + op->b));
            }
            tm->depth--;
            i += op->b;
            break;
        default:
            return IPU_FAIL(tm->ctx, IPU_ERR_MALFORMED, "static timing: main op %zu has kind %u", i, op->op);
        }
    }
    return IPU_OK;
}

/* The exchange bytes per program phase and per compiler op. */
static json_t *volumes_json(const timer *tm)
{
    json_t *phases = json_array(), *ops = json_object();
    for (size_t i = 0; i < tm->pkg->main_count; i++) {
        const phase_volume *v = &tm->volumes[i];
        if (!v->executions)
            continue;
        uint32_t origin = tm->pkg->main_ops[i].origin[1];
        json_array_append_new(
            phases, json_pack("{s:I, s:o, s:I, s:I, s:I, s:I}", "phase", (json_int_t)(2 * (tm->pkg->init_count + i) + 1),
                              "compiler_op", origin_json(origin), "executions", (json_int_t)v->executions,
                              "sent_bytes", (json_int_t)v->sent, "received_bytes", (json_int_t)v->received,
                              "cycles", (json_int_t)v->cycles));
        if (origin == IPU_NO_OP)
            continue;
        char key[16];
        snprintf(key, sizeof key, "%u", origin);
        json_t *o = json_object_get(ops, key);
        if (!o)
            json_object_set_new(ops, key, o = json_pack("{s:I, s:I, s:I, s:I, s:I}", "op", (json_int_t)origin,
                                                        "phases", (json_int_t)0, "sent_bytes", (json_int_t)0,
                                                        "received_bytes", (json_int_t)0, "cycles", (json_int_t)0));
        const char *fields[] = {"phases", "sent_bytes", "received_bytes", "cycles"};
        uint64_t add[] = {v->executions, v->sent, v->received, v->cycles};
        for (int f = 0; f < 4; f++)
            json_object_set_new(o, fields[f],
                                json_integer(json_integer_value(json_object_get(o, fields[f])) + (json_int_t)add[f]));
    }
    json_t *list = json_array();
    const char *key;
    json_t *value;
    json_object_foreach(ops, key, value) json_array_append(list, value);
    json_decref(ops);
    return json_pack("{s:o, s:o}", "phases", phases, "ops", list);
}

static void timer_free(timer *tm)
{
    for (size_t i = 0; tm->copies && i < tm->pkg->segment_count; i++)
        free(tm->copies[i]);
    for (size_t i = 0; tm->slots && i < tm->pkg->slots; i++) {
        free(tm->slots[i].compute);
        free(tm->slots[i].volatile_tiles);
    }
    free(tm->copies);
    free(tm->slots);
    free(tm->volumes);
    free(tm->target_start);
    free(tm->targets);
    free(tm->tile_compute);
    free(tm->tile_wait);
    json_decref(tm->steps);
}

ipu_status ipu_timing_package(ipu_ctx *ctx, const ipu_package *pkg, json_t **out)
{
    timer tm;
    memset(&tm, 0, sizeof tm);
    tm.ctx = ctx;
    tm.pkg = pkg;
    tm.p = &pkg->profile;
    uint32_t tiles = tm.p->tiles;
    tm.copies = ipu_calloc(ctx, pkg->segment_count ? pkg->segment_count : 1, sizeof *tm.copies);
    tm.slots = ipu_calloc(ctx, pkg->slots ? pkg->slots : 1, sizeof *tm.slots);
    tm.volumes = ipu_calloc(ctx, pkg->main_count ? pkg->main_count : 1, sizeof *tm.volumes);
    tm.tile_compute = ipu_calloc(ctx, tiles ? tiles : 1, sizeof *tm.tile_compute);
    tm.tile_wait = ipu_calloc(ctx, tiles ? tiles : 1, sizeof *tm.tile_wait);
    tm.steps = json_array();
    ipu_status status = tm.copies && tm.slots && tm.volumes && tm.tile_compute && tm.tile_wait && tm.steps
                            ? list_targets(&tm)
                            : IPU_NO_MEMORY(ctx);
    if (status == IPU_OK)
        status = initialize(&tm);
    if (status == IPU_OK)
        status = execute(&tm, 0, pkg->main_count);
    json_t *result = NULL;
    if (status == IPU_OK) {
        uint64_t cycles = 0;
        for (int i = 0; i < 5; i++)
            cycles += tm.totals[i];
        json_t *compute = json_array(), *wait = json_array();
        for (uint32_t t = 0; t < tiles; t++) {
            json_array_append_new(compute, json_integer((json_int_t)tm.tile_compute[t]));
            json_array_append_new(wait, json_integer((json_int_t)tm.tile_wait[t]));
        }
        result = json_pack("{s:I, s:f, s:f, s:{s:I, s:I, s:I, s:I, s:I}, s:O, s:{s:o, s:o}, s:o}", "cycles",
                           (json_int_t)cycles, "ms", (double)cycles / tm.p->clock_hz * 1e3, "clock_hz",
                           tm.p->clock_hz, "totals", "compute", (json_int_t)tm.totals[T_COMPUTE], "sync",
                           (json_int_t)tm.totals[T_SYNC], "exchange", (json_int_t)tm.totals[T_EXCHANGE], "host",
                           (json_int_t)tm.totals[T_HOST], "control", (json_int_t)tm.totals[T_CONTROL], "steps",
                           tm.steps, "tiles", "compute", compute, "wait", wait, "exchange", volumes_json(&tm));
        if (!result)
            status = IPU_NO_MEMORY(ctx);
    }
    timer_free(&tm);
    *out = result;
    return status;
}

ipu_status ipu_package_timing_json(ipu_ctx *ctx, const ipu_package *pkg, char **out_json)
{
    if (!pkg || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_package_timing_json: NULL argument");
    json_t *timing = NULL;
    IPU_TRY(ipu_timing_package(ctx, pkg, &timing));
    *out_json = json_dumps(timing, JSON_COMPACT);
    json_decref(timing);
    return *out_json ? IPU_OK : IPU_NO_MEMORY(ctx);
}
