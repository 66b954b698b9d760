/* timeline.c: the run-time memory timeline (ipu_device_memory_timeline_json)
 * built from the memory events the device recorded (device.h
 * ipu_memory_events) and the package's allocation table.  Every executed
 * phase is measured after the lives beginning there began and before the
 * ones ending there end, so a phase's live bytes are what it can touch.
 * Live bytes are those of the tensor area (every allocation but host
 * staging, which lives in the aperture and is counted apart), by category.
 * The analysis gives per executed phase the device-wide live bytes by
 * category and the aperture's, the device's free bytes and fragmentation (1 -
 * the tiles' largest holes / their free bytes) and its most fragmented tile;
 * per tile its peak (phase, iteration, bytes by category, free bytes and the
 * largest hole then) and the ranges its code and descriptors hold; the
 * fullest tile's peak with the allocations live at it and that tile's live,
 * free, largest hole and fragmentation (1 - largest hole / free) at every
 * executed phase; per compiler op the peak of the bytes it owns and what is
 * left of them after its last phase (residual); and the allocation table, so
 * a view can say what is live at any phase.  An allocation's owner is the
 * compiler op the package says made it, or else (parameters aside: they
 * belong to no op) the op of the phase its life begins in (a tensor's home
 * block belongs to the op that first writes it).  Free bytes are the
 * accessible SRAM not held by the runtime state, code, descriptors or a live
 * allocation.
 */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"

enum { CATEGORIES = IPU_ALLOC_HOST_STAGING }; /* the tensor area's: parameter .. scratch */
static const char *CATEGORY_NAMES[CATEGORIES] = {"parameter", "activation", "operand copy", "staging", "scratch"};
static const char *KIND_NAMES[IPU_ALLOC_KIND_COUNT] = {"parameter", "activation", "operand copy",
                                                      "staging",   "scratch",    "host staging"};

typedef struct timeline {
    ipu_ctx *ctx;
    const ipu_package *pkg;
    const ipu_memory_events *ev;
    uint32_t tiles;
    uint64_t *tile_live;  /* per tile and category, now */
    uint64_t *tile_total; /* per tile, now */
    uint64_t *peak;       /* per tile: the largest total */
    uint32_t *peak_at;    /* per tile: the executed phase of it */
    uint64_t *peak_cat;   /* per tile and category, at the peak */
    uint64_t *op_live, *op_peak, *op_residual; /* per compiler op */
    uint32_t *op_peak_at;
    uint32_t *owner; /* per allocation: its compiler op (IPU_NO_OP: none) */
    uint8_t *alive;  /* per allocation, during the second pass */
} timeline;

static void timeline_free(timeline *t)
{
    free(t->tile_live), free(t->tile_total), free(t->peak), free(t->peak_at), free(t->peak_cat);
    free(t->op_live), free(t->op_peak), free(t->op_residual), free(t->op_peak_at), free(t->owner), free(t->alive);
}

/* The compiler op an executed phase lowers (IPU_NO_OP: none). */
static uint32_t phase_op(const ipu_package *pkg, uint32_t phase)
{
    size_t g = phase / 2;
    const ipu_pkg_op *op = g < pkg->init_count                   ? &pkg->init_ops[g]
                           : g - pkg->init_count < pkg->main_count ? &pkg->main_ops[g - pkg->init_count]
                                                                   : NULL;
    return op ? op->origin[phase % 2] : IPU_NO_OP;
}

static json_t *int_or_null(uint32_t value, uint32_t none)
{
    return value == none ? json_null() : json_integer(value);
}

static json_t *categories_json(const uint64_t *bytes)
{
    json_t *a = json_array();
    for (int c = 0; c < CATEGORIES; c++)
        json_array_append_new(a, json_integer((json_int_t)bytes[c]));
    return a;
}

/* Free bytes and the largest hole of tile `tile` with the allocations alive
 * now: the accessible SRAM less the runtime state, code and descriptor
 * segments and live allocations (both lists are sorted by address). */
static void holes(const timeline *t, uint32_t tile, uint64_t *free_bytes, uint64_t *largest)
{
    const ipu_package *pkg = t->pkg;
    const ipu_profile *p = &pkg->profile;
    uint64_t cursor = (uint64_t)p->sram_base + p->runtime_state_bytes, end = ipu_profile_access_end(p);
    uint32_t s = pkg->tile_segment_start[tile], s_end = pkg->tile_segment_start[tile + 1];
    uint32_t a = pkg->tile_alloc_start[tile], a_end = pkg->tile_alloc_start[tile + 1];
    *free_bytes = *largest = 0;
    for (;;) {
        while (s < s_end && pkg->segments[pkg->tile_segments[s]].kind == IPU_SEG_DATA)
            s++;
        while (a < a_end && !t->alive[pkg->tile_allocs[a]])
            a++;
        const ipu_pkg_segment *seg = s < s_end ? &pkg->segments[pkg->tile_segments[s]] : NULL;
        const ipu_pkg_alloc *al = a < a_end ? &pkg->allocs[pkg->tile_allocs[a]] : NULL;
        uint64_t lo, hi;
        if (seg && (!al || seg->address <= al->address))
            lo = seg->address, hi = (uint64_t)seg->address + seg->size, s++;
        else if (al)
            lo = al->address, hi = (uint64_t)al->address + al->size, a++;
        else
            break;
        if (lo > cursor) {
            *free_bytes += lo - cursor;
            *largest = lo - cursor > *largest ? lo - cursor : *largest;
        }
        cursor = hi > cursor ? hi : cursor;
    }
    if (end > cursor) {
        *free_bytes += end - cursor;
        *largest = end - cursor > *largest ? end - cursor : *largest;
    }
}

static double fragmentation(uint64_t free_bytes, uint64_t largest)
{
    return free_bytes ? 1.0 - (double)largest / (double)free_bytes : 0.0;
}

/* Apply event e (a life beginning or ending) to the running sums; returns
 * its allocation. */
static const ipu_pkg_alloc *apply(timeline *t, size_t e, uint64_t *device_cat, uint64_t *aperture)
{
    uint32_t index = t->ev->alloc[e] & ~IPU_EVENT_FREE;
    int ends = (t->ev->alloc[e] & IPU_EVENT_FREE) != 0;
    const ipu_pkg_alloc *a = &t->pkg->allocs[index];
    uint64_t size = a->size;
    if (a->kind >= CATEGORIES) {
        *aperture = ends ? *aperture - size : *aperture + size;
        return a;
    }
    uint64_t *cell[3] = {&t->tile_live[(size_t)a->tile * CATEGORIES + a->kind], &t->tile_total[a->tile],
                         &device_cat[a->kind]};
    for (int k = 0; k < 3; k++)
        *cell[k] = ends ? *cell[k] - size : *cell[k] + size;
    uint32_t op = t->owner[index];
    if (op != IPU_NO_OP)
        t->op_live[op] = ends ? t->op_live[op] - size : t->op_live[op] + size;
    return a;
}

/* Pass 1: per executed phase, the device's live bytes; per tile and op
 * their peaks; per op its residual. */
static json_t *steps_json(timeline *t)
{
    const ipu_memory_events *ev = t->ev;
    json_t *program = json_array(), *phase = json_array(), *iteration = json_array(), *invocation = json_array(),
           *op = json_array(), *live = json_array(), *by_category = json_array(), *aperture_json = json_array();
    uint64_t device_cat[CATEGORIES] = {0}, aperture = 0;
    size_t e = 0;
    for (size_t step = 0; step < ev->phase_count; step++) {
        size_t begun = e;
        while (e < ev->count && ev->at[e] == step && !(ev->alloc[e] & IPU_EVENT_FREE))
            apply(t, e++, device_cat, &aperture);
        for (size_t k = begun; k < e; k++) {
            const ipu_pkg_alloc *a = &t->pkg->allocs[ev->alloc[k]];
            if (a->kind >= CATEGORIES)
                continue;
            if (t->tile_total[a->tile] > t->peak[a->tile]) {
                t->peak[a->tile] = t->tile_total[a->tile];
                t->peak_at[a->tile] = (uint32_t)step;
                memcpy(&t->peak_cat[(size_t)a->tile * CATEGORIES], &t->tile_live[(size_t)a->tile * CATEGORIES],
                       CATEGORIES * sizeof *t->peak_cat);
            }
            uint32_t owner = t->owner[ev->alloc[k]];
            if (owner != IPU_NO_OP && t->op_live[owner] > t->op_peak[owner])
                t->op_peak[owner] = t->op_live[owner], t->op_peak_at[owner] = (uint32_t)step;
        }
        uint64_t total = 0;
        for (int c = 0; c < CATEGORIES; c++)
            total += device_cat[c];
        json_array_append_new(live, json_integer((json_int_t)total));
        json_array_append_new(by_category, categories_json(device_cat));
        json_array_append_new(aperture_json, json_integer((json_int_t)aperture));
        while (e < ev->count && ev->at[e] == step)
            apply(t, e++, device_cat, &aperture);
        uint32_t origin = phase_op(t->pkg, ev->phase[step]);
        if (origin < t->pkg->compiler_op_count)
            t->op_residual[origin] = t->op_live[origin];
        json_array_append_new(program, json_string(ev->program[step] ? "main" : "init"));
        json_array_append_new(phase, json_integer(ev->phase[step]));
        json_array_append_new(iteration, int_or_null(ev->iteration[step], IPU_NO_ITERATION));
        json_array_append_new(invocation, json_integer(ev->invocation[step]));
        json_array_append_new(op, int_or_null(origin, IPU_NO_OP));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "program", program, "phase", phase, "iteration",
                     iteration, "invocation", invocation, "op", op, "live", live, "by_category", by_category,
                     "aperture", aperture_json);
}

/* Each tile's free bytes and largest hole now, kept up to date for the
 * tiles whose allocations changed (dirty) and summed over the device. */
typedef struct holes_now {
    uint64_t *free_bytes, *largest;
    uint32_t *dirty; /* the tiles to measure again, dirty_count of them */
    uint8_t *marked;
    uint32_t dirty_count;
    uint64_t free_sum, largest_sum;
} holes_now;

static void mark(holes_now *h, uint32_t tile)
{
    if (!h->marked[tile])
        h->marked[tile] = 1, h->dirty[h->dirty_count++] = tile;
}

static void measure(const timeline *t, holes_now *h)
{
    for (uint32_t k = 0; k < h->dirty_count; k++) {
        uint32_t tile = h->dirty[k];
        h->free_sum -= h->free_bytes[tile], h->largest_sum -= h->largest[tile];
        holes(t, tile, &h->free_bytes[tile], &h->largest[tile]);
        h->free_sum += h->free_bytes[tile], h->largest_sum += h->largest[tile];
        h->marked[tile] = 0;
    }
    h->dirty_count = 0;
}

/* Pass 2: the events again, with the allocations alive: every tile's free
 * bytes and largest hole at every executed phase, from which the device's
 * free bytes and fragmentation (1 - the tiles' largest holes / their free
 * bytes) and its most fragmented tile per phase, each tile's free bytes and
 * largest hole at its peak, the fullest tile's at every phase and the
 * allocations live at its peak. */
static json_t *tiles_json(timeline *t, uint32_t fullest, json_t *steps, json_t **series, json_t **peak_live)
{
    const ipu_memory_events *ev = t->ev;
    uint32_t tiles = t->tiles;
    holes_now h = {ipu_calloc(t->ctx, tiles, sizeof *h.free_bytes), ipu_calloc(t->ctx, tiles, sizeof *h.largest),
                   ipu_calloc(t->ctx, tiles, sizeof *h.dirty), ipu_calloc(t->ctx, tiles, 1), 0, 0, 0};
    uint64_t *free_at = ipu_calloc(t->ctx, tiles, sizeof *free_at), *hole_at = ipu_calloc(t->ctx, tiles, sizeof *hole_at);
    if (!h.free_bytes || !h.largest || !h.dirty || !h.marked || !free_at || !hole_at) {
        free(h.free_bytes), free(h.largest), free(h.dirty), free(h.marked), free(free_at), free(hole_at);
        return NULL;
    }
    memset(t->alive, 0, t->pkg->alloc_count ? t->pkg->alloc_count : 1);
    for (uint32_t i = 0; i < tiles; i++)
        mark(&h, i);
    json_t *live = json_array(), *free_json = json_array(), *largest = json_array(), *frag = json_array();
    json_t *device_free = json_array(), *device_frag = json_array(), *worst = json_array(), *worst_tile = json_array();
    *peak_live = json_array();
    uint64_t running = 0;
    size_t e = 0;
    for (size_t step = 0; step < ev->phase_count; step++) {
        while (e < ev->count && ev->at[e] == step && !(ev->alloc[e] & IPU_EVENT_FREE)) {
            uint32_t a = ev->alloc[e++];
            t->alive[a] = 1;
            mark(&h, t->pkg->allocs[a].tile);
            if (t->pkg->allocs[a].tile == fullest && t->pkg->allocs[a].kind < CATEGORIES)
                running += t->pkg->allocs[a].size;
        }
        measure(t, &h);
        uint32_t most = 0;
        double most_frag = -1.0;
        for (uint32_t i = 0; i < tiles; i++) {
            double f = fragmentation(h.free_bytes[i], h.largest[i]);
            if (f > most_frag)
                most_frag = f, most = i;
            if (t->peak_at[i] == step)
                free_at[i] = h.free_bytes[i], hole_at[i] = h.largest[i];
        }
        if (step == t->peak_at[fullest])
            for (uint32_t k = t->pkg->tile_alloc_start[fullest]; k < t->pkg->tile_alloc_start[fullest + 1]; k++)
                if (t->alive[t->pkg->tile_allocs[k]])
                    json_array_append_new(*peak_live, json_integer(t->pkg->tile_allocs[k]));
        json_array_append_new(live, json_integer((json_int_t)running));
        json_array_append_new(free_json, json_integer((json_int_t)h.free_bytes[fullest]));
        json_array_append_new(largest, json_integer((json_int_t)h.largest[fullest]));
        json_array_append_new(frag, json_real(fragmentation(h.free_bytes[fullest], h.largest[fullest])));
        json_array_append_new(device_free, json_integer((json_int_t)h.free_sum));
        json_array_append_new(device_frag, json_real(fragmentation(h.free_sum, h.largest_sum)));
        json_array_append_new(worst, json_real(most_frag));
        json_array_append_new(worst_tile, json_integer(most));
        while (e < ev->count && ev->at[e] == step) {
            uint32_t a = ev->alloc[e++] & ~IPU_EVENT_FREE;
            t->alive[a] = 0;
            mark(&h, t->pkg->allocs[a].tile);
            if (t->pkg->allocs[a].tile == fullest && t->pkg->allocs[a].kind < CATEGORIES)
                running -= t->pkg->allocs[a].size;
        }
    }
    json_object_set_new(steps, "free", device_free);
    json_object_set_new(steps, "fragmentation", device_frag);
    json_object_set_new(steps, "most_fragmented", json_pack("{s:o, s:o}", "tile", worst_tile, "fragmentation", worst));
    *series = json_pack("{s:I, s:o, s:o, s:o, s:o}", "tile", (json_int_t)fullest, "live", live, "free", free_json,
                        "largest_hole", largest, "fragmentation", frag);
    json_t *peak = json_array(), *at = json_array(), *phase = json_array(), *iteration = json_array(),
           *cat = json_array(), *free_peak = json_array(), *hole_peak = json_array(), *frag_peak = json_array();
    for (uint32_t i = 0; i < tiles; i++) {
        uint32_t s = t->peak_at[i];
        json_array_append_new(peak, json_integer((json_int_t)t->peak[i]));
        json_array_append_new(at, json_integer(s));
        json_array_append_new(phase, json_integer(ev->phase_count ? ev->phase[s] : 0));
        json_array_append_new(iteration,
                              ev->phase_count ? int_or_null(ev->iteration[s], IPU_NO_ITERATION) : json_null());
        json_array_append_new(cat, categories_json(&t->peak_cat[(size_t)i * CATEGORIES]));
        json_array_append_new(free_peak, json_integer((json_int_t)free_at[i]));
        json_array_append_new(hole_peak, json_integer((json_int_t)hole_at[i]));
        json_array_append_new(frag_peak, json_real(fragmentation(free_at[i], hole_at[i])));
    }
    free(h.free_bytes), free(h.largest), free(h.dirty), free(h.marked), free(free_at), free(hole_at);
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "peak_bytes", peak, "peak_step", at, "peak_phase",
                     phase, "peak_iteration", iteration, "peak_by_category", cat, "free_at_peak", free_peak,
                     "largest_hole_at_peak", hole_peak, "fragmentation_at_peak", frag_peak);
}

static json_t *ops_json(const timeline *t)
{
    const ipu_package *pkg = t->pkg;
    json_t *kind = json_array(), *name = json_array(), *peak = json_array(), *at = json_array(),
           *residual = json_array();
    for (size_t i = 0; i < pkg->compiler_op_count; i++) {
        json_array_append_new(kind, json_string(ipu_pkg_string(pkg, pkg->compiler_ops[i].kind_offset)));
        json_array_append_new(name, json_string(ipu_pkg_string(pkg, pkg->compiler_ops[i].name_offset)));
        json_array_append_new(peak, json_integer((json_int_t)t->op_peak[i]));
        json_array_append_new(at, t->op_peak[i] ? json_integer(t->op_peak_at[i]) : json_null());
        json_array_append_new(residual, json_integer((json_int_t)t->op_residual[i]));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o}", "kind", kind, "name", name, "peak_bytes", peak, "peak_step", at,
                     "residual_bytes", residual);
}

/* The allocation table as columns, names, tensors and shapes ("46x1152 f16",
 * "4096 B": package format 7) as indices into strings. */
static json_t *allocations_json(const ipu_package *pkg, const uint32_t *owner)
{
    json_t *strings = json_array(), *index = json_object();
    json_t *col[10];
    for (int c = 0; c < 10; c++)
        col[c] = json_array();
    for (size_t i = 0; i < pkg->alloc_count; i++) {
        const ipu_pkg_alloc *a = &pkg->allocs[i];
        json_int_t named[3];
        const char *text[3] = {ipu_pkg_string(pkg, a->name_offset), ipu_pkg_string(pkg, a->tensor_offset),
                               ipu_pkg_string(pkg, a->shape_offset)};
        for (int k = 0; k < 3; k++) {
            json_t *at = json_object_get(index, text[k]);
            if (!at) {
                at = json_integer((json_int_t)json_array_size(strings));
                json_array_append_new(strings, json_string(text[k]));
                json_object_set_new(index, text[k], at);
            }
            named[k] = json_integer_value(at);
        }
        json_int_t v[10] = {a->tile,   a->address, a->size,
                            named[0],  named[1],   owner[i] == IPU_NO_OP ? -1 : (json_int_t)owner[i],
                            a->kind,   a->first,   a->last == IPU_LIFE_FOREVER ? -1 : (json_int_t)a->last,
                            named[2]};
        for (int c = 0; c < 10; c++)
            json_array_append_new(col[c], json_integer(v[c]));
    }
    json_decref(index);
    json_t *kinds = json_array();
    for (int k = 0; k < IPU_ALLOC_KIND_COUNT; k++)
        json_array_append_new(kinds, json_string(KIND_NAMES[k]));
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "tile", col[0], "address",
                     col[1], "size", col[2], "name", col[3], "tensor", col[4], "op", col[5], "kind", col[6], "first",
                     col[7], "last", col[8], "shape", col[9], "strings", strings, "kinds", kinds);
}

/* Per tile: code bytes, descriptor bytes less exchange tables, exchange
 * table bytes (the package meta's, when it has them), and the ranges code
 * and descriptors hold (address, size, ... in address order), with the
 * range allocations may use (after the runtime state, up to the
 * inaccessible tail), so a view can find any tile's holes at any phase. */
static json_t *support_json(ipu_ctx *ctx, const ipu_package *pkg, uint32_t tiles)
{
    uint64_t *code = ipu_calloc(ctx, tiles, sizeof *code), *desc = ipu_calloc(ctx, tiles, sizeof *desc);
    if (!code || !desc) { /* out of memory: no support, so no report */
        free(code), free(desc);
        return NULL;
    }
    json_t *meta = json_loads(pkg->meta_json ? pkg->meta_json : "{}", 0, NULL);
    json_t *tables = json_object_get(meta, "exchange_table_bytes");
    json_t *c = json_array(), *d = json_array(), *x = json_array(), *reserved = json_array();
    for (uint32_t t = 0; t < tiles; t++) {
        json_t *ranges = json_array();
        for (uint32_t k = pkg->tile_segment_start[t]; k < pkg->tile_segment_start[t + 1]; k++) {
            const ipu_pkg_segment *s = &pkg->segments[pkg->tile_segments[k]];
            if (s->kind == IPU_SEG_DATA)
                continue;
            json_array_append_new(ranges, json_integer(s->address));
            json_array_append_new(ranges, json_integer(s->size));
        }
        json_array_append_new(reserved, ranges);
    }
    for (size_t i = 0; i < pkg->segment_count; i++) {
        const ipu_pkg_segment *s = &pkg->segments[i];
        if (s->kind == IPU_SEG_CODE)
            code[s->tile] += s->size;
        else if (s->kind == IPU_SEG_DESCRIPTOR)
            desc[s->tile] += s->size;
    }
    for (uint32_t t = 0; t < tiles; t++) {
        uint64_t table = (uint64_t)json_integer_value(json_array_get(tables, t));
        table = table < desc[t] ? table : desc[t];
        json_array_append_new(c, json_integer((json_int_t)code[t]));
        json_array_append_new(d, json_integer((json_int_t)(desc[t] - table)));
        json_array_append_new(x, json_integer((json_int_t)table));
    }
    free(code), free(desc);
    json_decref(meta);
    const ipu_profile *p = &pkg->profile;
    return json_pack("{s:o, s:o, s:o, s:o, s:{s:I, s:I}}", "code", c, "descriptors", d, "exchange_tables", x,
                     "reserved", reserved, "usable", "start", (json_int_t)p->sram_base + p->runtime_state_bytes,
                     "end", (json_int_t)ipu_profile_access_end(p));
}

ipu_status ipu_device_memory_timeline_json(ipu_ctx *ctx, const ipu_device *dev, char **out_json)
{
    if (!dev || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_device_memory_timeline_json: NULL argument");
    *out_json = NULL;
    const ipu_package *pkg = ipu_device_package(dev);
    const ipu_memory_events *ev = ipu_device_memory_events(dev);
    if (!pkg || !ev)
        return IPU_FAIL(ctx, IPU_ERR_STATE,
                        "no memory events: configure the device with {\"memory_events\": true} before "
                        "initialize%s",
                        pkg ? " (or recording them ran out of memory)" : ", then initialize and run it");
    uint32_t tiles = pkg->profile.tiles;
    size_t ops = pkg->compiler_op_count ? pkg->compiler_op_count : 1;
    timeline t = {ctx, pkg, ev, tiles, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    t.tile_live = ipu_calloc(ctx, (size_t)tiles * CATEGORIES, sizeof *t.tile_live);
    t.tile_total = ipu_calloc(ctx, tiles, sizeof *t.tile_total);
    t.peak = ipu_calloc(ctx, tiles, sizeof *t.peak);
    t.peak_at = ipu_calloc(ctx, tiles, sizeof *t.peak_at);
    t.peak_cat = ipu_calloc(ctx, (size_t)tiles * CATEGORIES, sizeof *t.peak_cat);
    t.op_live = ipu_calloc(ctx, ops, sizeof *t.op_live);
    t.op_peak = ipu_calloc(ctx, ops, sizeof *t.op_peak);
    t.op_residual = ipu_calloc(ctx, ops, sizeof *t.op_residual);
    t.op_peak_at = ipu_calloc(ctx, ops, sizeof *t.op_peak_at);
    t.alive = ipu_calloc(ctx, pkg->alloc_count ? pkg->alloc_count : 1, 1);
    t.owner = ipu_calloc(ctx, pkg->alloc_count ? pkg->alloc_count : 1, sizeof *t.owner);
    if (!t.tile_live || !t.tile_total || !t.peak || !t.peak_at || !t.peak_cat || !t.op_live || !t.op_peak ||
        !t.op_residual || !t.op_peak_at || !t.alive || !t.owner) {
        timeline_free(&t);
        return IPU_NO_MEMORY(ctx);
    }
    for (size_t i = 0; i < pkg->alloc_count; i++) {
        const ipu_pkg_alloc *a = &pkg->allocs[i];
        uint32_t op = a->op != IPU_NO_OP                ? a->op
                      : a->kind == IPU_ALLOC_PARAMETER ? IPU_NO_OP
                                                        : phase_op(pkg, a->first);
        t.owner[i] = op < pkg->compiler_op_count ? op : IPU_NO_OP;
    }
    json_t *steps = steps_json(&t);
    uint32_t fullest = 0;
    for (uint32_t i = 1; i < tiles; i++)
        if (t.peak[i] > t.peak[fullest])
            fullest = i;
    json_t *series = NULL, *peak_live = NULL;
    json_t *tile_peaks = tiles_json(&t, fullest, steps, &series, &peak_live);
    json_t *categories = json_array();
    for (int c = 0; c < CATEGORIES; c++)
        json_array_append_new(categories, json_string(CATEGORY_NAMES[c]));
    uint32_t at = t.peak_at[fullest];
    json_t *report = tile_peaks ? json_pack(
        "{s:i, s:s, s:I, s:o, s:I, s:I, s:o, s:o, s:{s:I, s:I, s:I, s:o, s:I, s:o, s:o}, s:o, s:o, s:o, s:o}",
        "version", 2, "kind", "memory-timeline", "tiles", (json_int_t)tiles, "categories", categories,
        "executed_phases", (json_int_t)ev->phase_count, "events", (json_int_t)ev->count, "steps", steps,
        "tile_peaks", tile_peaks, "peak", "tile", (json_int_t)fullest, "step", (json_int_t)at, "phase",
        (json_int_t)(ev->phase_count ? ev->phase[at] : 0), "iteration",
        ev->phase_count ? int_or_null(ev->iteration[at], IPU_NO_ITERATION) : json_null(), "bytes",
        (json_int_t)t.peak[fullest], "by_category", categories_json(&t.peak_cat[(size_t)fullest * CATEGORIES]),
        "live", peak_live, "fullest_tile", series, "ops", ops_json(&t), "allocations", allocations_json(pkg, t.owner),
        "support", support_json(ctx, pkg, tiles)) : NULL;
    if (!tile_peaks)
        json_decref(steps), json_decref(categories);
    timeline_free(&t);
    *out_json = report ? json_dumps(report, JSON_COMPACT) : NULL;
    json_decref(report);
    return *out_json ? IPU_OK : IPU_NO_MEMORY(ctx);
}
