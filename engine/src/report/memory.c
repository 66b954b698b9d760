/* memory.c: building a planner memory profile (see memory.h) from a lowered
 * candidate: steps grouped by what they lower, buffers classed by the
 * region their kernels need, values' lifetimes spanning every block's, and
 * the liveness walker (ipu_low_sweep) summing per tile and step group.
 */
#include <stdlib.h>
#include <string.h>

#include "report/memory.h"

enum { VALUE_STANDARD, VALUE_INTERLEAVED, SCRATCH_STANDARD, SCRATCH_INTERLEAVED, SLOTS };

static const char *KIND_NAMES[] = {"tensor", "operand", "staging", "scratch"};
static const char *ROLE_NAMES[] = {"input", "parameter", "activation", "output"};

typedef struct builder {
    ipu_ctx *ctx;
    const ipu_low_program *prog;
    const ipu_graph *g;
    uint32_t tiles, groups;
    uint32_t *group_of;    /* per step */
    uint32_t *group_first; /* per group: its first step */
    uint32_t *phase;       /* per step: its program phase (ipu_low_step_phases) */
    uint8_t *interleaved;  /* per buffer */
    uint32_t *value_first, *value_last; /* per value: group range */
    uint64_t *live;        /* walker output: (tile, group, slot) */
} builder;

static void builder_free(builder *b)
{
    free(b->group_of);
    free(b->group_first);
    free(b->phase);
    free(b->interleaved);
    free(b->value_first);
    free(b->value_last);
    free(b->live);
}

static int in_body(const ipu_low_program *prog, size_t step)
{
    return prog->repeat_iterations && step >= prog->repeat_first &&
           step < (size_t)prog->repeat_first + prog->repeat_count;
}

/* A new group starts where the label, op, program or Repeat membership
 * changes, and after any step where a buffer's life ends: inside a group
 * buffers only start, so what is live anywhere in it is live at its last
 * step, and a group's usage is exactly the largest of its steps'. */
static ipu_status group_steps(builder *b)
{
    const ipu_low_program *prog = b->prog;
    size_t steps = prog->step_count ? prog->step_count : 1;
    b->group_of = ipu_calloc(b->ctx, steps, sizeof *b->group_of);
    b->group_first = ipu_calloc(b->ctx, steps, sizeof *b->group_first);
    b->phase = ipu_calloc(b->ctx, steps, sizeof *b->phase);
    uint8_t *ends = ipu_calloc(b->ctx, steps, 1);
    if (!b->group_of || !b->group_first || !b->phase || !ends) {
        free(ends);
        return IPU_NO_MEMORY(b->ctx);
    }
    ipu_low_step_phases(prog, b->phase);
    for (size_t i = 0; i < prog->buffer_count; i++)
        ends[prog->buffers[i].last] = 1;
    b->groups = 1;
    for (size_t s = 1; s < prog->step_count; s++) {
        const ipu_low_step *x = &prog->steps[s], *y = &prog->steps[s - 1];
        if (ends[s - 1] || strcmp(x->label, y->label) || x->op != y->op || x->init != y->init ||
            in_body(prog, s) != in_body(prog, s - 1))
            b->group_first[b->groups++] = (uint32_t)s;
        b->group_of[s] = b->groups - 1;
    }
    free(ends);
    return IPU_OK;
}

/* Buffers a kernel needs in region 1 (operand i of an entry is its argument i). */
static ipu_status class_buffers(builder *b)
{
    const ipu_low_program *prog = b->prog;
    b->interleaved = ipu_calloc(b->ctx, prog->buffer_count ? prog->buffer_count : 1, 1);
    if (!b->interleaved)
        return IPU_NO_MEMORY(b->ctx);
    for (size_t k = 0; k < prog->kernel_count; k++) {
        const ipu_low_kernel *kn = &prog->kernels[k];
        ipu_kernel_call call = {.entry = kn->entry, .arg_count = kn->argc};
        for (uint32_t a = 0; a < kn->argc; a++)
            call.args[a] = kn->args[a].value;
        if (ipu_kernel_describe(&call))
            continue;
        for (uint32_t o = 0; o < call.operand_count && o < kn->argc; o++)
            if (call.operands[o].region1 && kn->args[o].buffer != IPU_LOW_LITERAL)
                b->interleaved[kn->args[o].buffer] = 1;
    }
    return IPU_OK;
}

/* Each value lives from the first group any of its blocks is used in to the last. */
static ipu_status value_lifetimes(builder *b)
{
    const ipu_low_program *prog = b->prog;
    size_t n = prog->value_count ? prog->value_count : 1;
    b->value_first = ipu_malloc(b->ctx, n * sizeof *b->value_first);
    b->value_last = ipu_calloc(b->ctx, n, sizeof *b->value_last);
    if (!b->value_first || !b->value_last)
        return IPU_NO_MEMORY(b->ctx);
    memset(b->value_first, 0xFF, n * sizeof *b->value_first);
    for (size_t i = 0; i < prog->buffer_count; i++) {
        const ipu_low_buffer *buf = &prog->buffers[i];
        if (buf->value == IPU_LOW_LITERAL)
            continue;
        uint32_t first = b->group_of[buf->first], last = b->group_of[buf->last];
        if (first < b->value_first[buf->value])
            b->value_first[buf->value] = first;
        if (last > b->value_last[buf->value])
            b->value_last[buf->value] = last;
    }
    return IPU_OK;
}

static ipu_status sweep(builder *b)
{
    const ipu_low_program *prog = b->prog;
    ipu_low_live *items = ipu_malloc(b->ctx, (prog->buffer_count ? prog->buffer_count : 1) * sizeof *items);
    if (!items)
        return IPU_NO_MEMORY(b->ctx);
    for (size_t i = 0; i < prog->buffer_count; i++) {
        const ipu_low_buffer *buf = &prog->buffers[i];
        int value = buf->value != IPU_LOW_LITERAL;
        uint32_t first = value ? b->value_first[buf->value] : b->group_of[buf->first];
        uint32_t last = value ? b->value_last[buf->value] : b->group_of[buf->last];
        uint32_t slot = (value ? VALUE_STANDARD : SCRATCH_STANDARD) + b->interleaved[i];
        items[i] = (ipu_low_live){buf->tile, first, last, slot, buf->size};
    }
    ipu_status status = ipu_low_sweep(b->ctx, b->tiles, b->groups, SLOTS, items, prog->buffer_count, &b->live);
    free(items);
    return status;
}

static uint64_t live_at(const builder *b, uint32_t tile, uint32_t group, int slot)
{
    return b->live[((size_t)tile * b->groups + group) * SLOTS + slot];
}

/* The op whose plan chose a value's layout: an operand's own op; for a
 * home, the op that homes the tensor (ipu_ir_homing_op). */
static uint32_t layout_op(const ipu_graph *g, const ipu_low_value *v)
{
    return v->op != IPU_LOW_LITERAL ? v->op : ipu_ir_homing_op(g, v->tensor);
}

static json_t *u32_array(const uint32_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i] == IPU_LOW_LITERAL ? -1 : (json_int_t)v[i]));
    return a;
}

static json_t *u64_array(const uint64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((json_int_t)v[i]));
    return a;
}

/* One value's JSON: origin, layout, copies and per-tile sizes. */
static json_t *value_json(const builder *b, uint32_t v, const uint64_t *bytes, const uint64_t *shards,
                          int interleaved, uint32_t root, const char *name, uint32_t tensor)
{
    const ipu_low_value *x = &b->prog->values[v];
    const ipu_ir_tensor *t = &b->g->tensors[tensor];
    size_t blocks = (size_t)x->replicas * x->row_parts * x->col_parts;
    uint64_t aligned = 0, payload = 0;
    for (uint32_t i = 0; i < b->tiles; i++) {
        aligned = bytes[i] > aligned ? bytes[i] : aligned;
        payload = shards[i] > payload ? shards[i] : payload;
    }
    json_t *layout = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "rows", (json_int_t)x->rows,
                               "cols", (json_int_t)x->cols, "elem", (json_int_t)x->elem, "row_parts",
                               (json_int_t)x->row_parts, "col_parts", (json_int_t)x->col_parts, "replicas",
                               (json_int_t)x->replicas, "row_bounds", u32_array(x->row_bounds, x->row_parts + 1),
                               "col_bounds", u32_array(x->col_bounds, x->col_parts + 1), "tiles",
                               u32_array(x->tiles, blocks));
    json_t *value = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "name", name, "tensor",
        t->name, "kind", KIND_NAMES[x->kind], "role", ROLE_NAMES[t->role], "root", (json_int_t)root,
        "class", interleaved ? "interleaved" : "standard", "layout", layout, "copies",
        (json_int_t)x->members, "shard_size", (json_int_t)payload, "aligned_size", (json_int_t)aligned,
        "first_step", (json_int_t)b->value_first[v], "last_step", (json_int_t)b->value_last[v],
        "tile_shards", u64_array(shards, b->tiles), "tile_bytes", u64_array(bytes, b->tiles));
    json_object_set_new(value, "op", x->op == IPU_LOW_LITERAL ? json_null() : json_integer(x->op));
    uint32_t chosen = layout_op(b->g, x);
    json_object_set_new(value, "layout_op", chosen == IPU_LOW_LITERAL ? json_null() : json_integer(chosen));
    return value;
}

/* Every value, then an alias value per tensor sharing a value's storage. */
static ipu_status values_json(const builder *b, json_t *out, json_t *alias_of)
{
    const ipu_low_program *prog = b->prog;
    size_t n = prog->value_count;
    uint64_t *bytes = ipu_calloc(b->ctx, (n ? n : 1) * b->tiles, sizeof *bytes);
    uint64_t *shards = ipu_calloc(b->ctx, (n ? n : 1) * b->tiles, sizeof *shards);
    uint8_t *inter = ipu_calloc(b->ctx, n ? n : 1, 1);
    uint32_t *alias = ipu_malloc(b->ctx, (n ? n : 1) * sizeof *alias);
    if (!bytes || !shards || !inter || !alias) {
        free(bytes), free(shards), free(inter), free(alias);
        return IPU_NO_MEMORY(b->ctx);
    }
    memset(alias, 0xFF, (n ? n : 1) * sizeof *alias);
    for (size_t i = 0; i < prog->buffer_count; i++) {
        const ipu_low_buffer *buf = &prog->buffers[i];
        if (buf->value == IPU_LOW_LITERAL)
            continue;
        bytes[(size_t)buf->value * b->tiles + buf->tile] += buf->size;
        shards[(size_t)buf->value * b->tiles + buf->tile] += buf->payload;
        inter[buf->value] |= b->interleaved[i];
        if (buf->alias != IPU_LOW_LITERAL)
            alias[buf->value] = buf->alias;
    }
    for (size_t v = 0; v < n; v++)
        json_array_append_new(out, value_json(b, (uint32_t)v, bytes + v * b->tiles, shards + v * b->tiles,
                                              inter[v], (uint32_t)v, prog->values[v].name,
                                              prog->values[v].tensor));
    for (size_t v = 0; v < n; v++) {
        if (alias[v] == IPU_LOW_LITERAL)
            continue;
        json_object_set_new(alias_of, b->g->tensors[alias[v]].name, json_integer((json_int_t)v));
        json_t *a = value_json(b, (uint32_t)v, bytes + v * b->tiles, shards + v * b->tiles, inter[v],
                               (uint32_t)v, b->g->tensors[alias[v]].name, alias[v]);
        json_object_set_new(a, "kind", json_string("alias"));
        json_array_append_new(out, a);
    }
    free(bytes), free(shards), free(inter), free(alias);
    return IPU_OK;
}

/* Exchange table bytes of the busiest tile: a 4-byte count per table and a
 * 16-byte row per send and per receive (an estimate: scheduling may split). */
static ipu_status exchange_rows(const builder *b, uint64_t *out, uint32_t *tile)
{
    const ipu_low_program *prog = b->prog;
    uint64_t *rows = ipu_calloc(b->ctx, b->tiles, sizeof *rows), best = 0;
    uint32_t *seen = ipu_calloc(b->ctx, b->tiles, sizeof *seen);
    *tile = 0;
    if (!rows || !seen) {
        free(rows), free(seen);
        return IPU_NO_MEMORY(b->ctx);
    }
    for (size_t s = 0; s < prog->step_count; s++) {
        const ipu_low_step *st = &prog->steps[s];
        if (st->kind != IPU_LOW_EXCHANGE)
            continue;
        for (uint32_t x = st->first; x < st->first + st->count; x++) {
            const ipu_low_xfer *xf = &prog->xfers[x];
            uint32_t t = prog->buffers[xf->src_buffer].tile;
            rows[t] += 16 + (seen[t] != s + 1 ? 4 : 0), seen[t] = (uint32_t)s + 1;
            for (uint32_t d = 0; d < xf->dst_count; d++) {
                t = prog->buffers[prog->xdsts[xf->first_dst + d].buffer].tile;
                rows[t] += 16 + (seen[t] != s + 1 ? 4 : 0), seen[t] = (uint32_t)s + 1;
            }
        }
    }
    for (uint32_t t = 0; t < b->tiles; t++)
        if (rows[t] > best)
            best = rows[t], *tile = t;
    free(rows), free(seen);
    *out = best;
    return IPU_OK;
}

typedef struct peak {
    uint64_t standard, interleaved, total;
    uint32_t tile, step;
} peak;

/* One step group's JSON; updates the peaks. */
static json_t *step_json(const builder *b, uint32_t group, json_t *values, peak *pk)
{
    const ipu_low_program *prog = b->prog;
    uint32_t first = b->group_first[group];
    uint32_t last = group + 1 < b->groups ? b->group_first[group + 1] - 1 : (uint32_t)prog->step_count - 1;
    const ipu_low_step *st = &prog->steps[first];
    json_t *live = json_array(), *scratch = json_array(), *usage = json_array();
    uint64_t coarse = 0, scratch_max = 0, best = 0;
    uint32_t best_tile = 0;
    for (size_t v = 0; v < prog->value_count; v++)
        if (b->value_first[v] <= group && group <= b->value_last[v]) {
            json_array_append_new(live, json_integer((json_int_t)v));
            coarse += (uint64_t)json_integer_value(json_object_get(json_array_get(values, v), "aligned_size"));
        }
    for (uint32_t t = 0; t < b->tiles; t++) {
        uint64_t ss = live_at(b, t, group, SCRATCH_STANDARD), si = live_at(b, t, group, SCRATCH_INTERLEAVED);
        uint64_t us = live_at(b, t, group, VALUE_STANDARD) + ss, ui = live_at(b, t, group, VALUE_INTERLEAVED) + si;
        json_array_append_new(scratch, json_pack("[I, I]", (json_int_t)ss, (json_int_t)si));
        json_array_append_new(usage, json_pack("[I, I]", (json_int_t)us, (json_int_t)ui));
        scratch_max = ss + si > scratch_max ? ss + si : scratch_max;
        if (us + ui > best || t == 0)
            best = us + ui, best_tile = t;
        pk->standard = us > pk->standard ? us : pk->standard;
        pk->interleaved = ui > pk->interleaved ? ui : pk->interleaved;
        if (us + ui > pk->total)
            pk->total = us + ui, pk->tile = t, pk->step = group;
    }
    const char *kind = st->op != IPU_LOW_LITERAL ? ipu_ir_op_name(b->g->ops[st->op].kind) : "carry";
    for (uint32_t s = first; st->op == IPU_LOW_LITERAL && s <= last; s++)
        if (prog->steps[s].kind == IPU_LOW_HOST_IN || prog->steps[s].kind == IPU_LOW_HOST_OUT)
            kind = prog->steps[s].kind == IPU_LOW_HOST_IN ? "host input" : "host output";
    json_t *step = json_pack("{s:I, s:s, s:s, s:b, s:I, s:[I, I], s:o, s:o, s:o, s:O, s:I, s:I}", "index",
                             (json_int_t)group, "label", st->label, "kind", kind, "init", st->init, "executions",
                             (json_int_t)(in_body(prog, first) ? prog->repeat_iterations : 1), "program_steps",
                             (json_int_t)first, (json_int_t)last, "live", live, "tile_scratch", scratch,
                             "tile_usage", usage, "usage", json_array_get(usage, best_tile), "peak_tile",
                             (json_int_t)best_tile, "coarse_usage", (json_int_t)(coarse + scratch_max));
    json_object_set_new(step, "op", st->op == IPU_LOW_LITERAL ? json_null() : json_integer(st->op));
    json_object_set_new(step, "phases", json_pack("[I, I]", (json_int_t)b->phase[first], (json_int_t)b->phase[last]));
    return step;
}

/* Where a rejected candidate is over the budget: every step whose fullest
 * tile exceeds it, and at the peak, the largest values on the peak tile
 * with the op that chose each one's layout.  When that op runs after the
 * peak step (an input homed where its first reader wants it, say), choosing
 * the layout raised this earlier peak: raised_by names those ops. */
static json_t *rejection_detail(const builder *b, json_t *values, json_t *steps, const peak *pk,
                                uint32_t budget)
{
    json_t *over = json_array(), *largest = json_array(), *raised = json_array();
    for (uint32_t gi = 0; gi < b->groups; gi++) {
        json_t *st = json_array_get(steps, gi), *u = json_object_get(st, "usage");
        json_int_t total = json_integer_value(json_array_get(u, 0)) + json_integer_value(json_array_get(u, 1));
        if (total > budget)
            json_array_append_new(over, json_pack("{s:I, s:O, s:O, s:O, s:I}", "step", (json_int_t)gi, "label",
                                                  json_object_get(st, "label"), "op", json_object_get(st, "op"),
                                                  "tile", json_object_get(st, "peak_tile"), "usage", total));
    }
    json_t *peak_step = json_array_get(steps, pk->step);
    json_t *live = json_object_get(peak_step, "live");
    size_t n = json_array_size(live);
    uint8_t *taken = ipu_calloc(b->ctx, n ? n : 1, 1);
    for (int k = 0; taken && k < 5; k++) {
        size_t pick = n;
        json_int_t most = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(values, (size_t)json_integer_value(json_array_get(live, i)));
            json_int_t bytes = json_integer_value(json_array_get(json_object_get(v, "tile_bytes"), pk->tile));
            if (!taken[i] && bytes > most)
                most = bytes, pick = i;
        }
        if (pick == n)
            break;
        taken[pick] = 1;
        json_int_t id = json_integer_value(json_array_get(live, pick));
        json_t *v = json_array_get(values, (size_t)id), *chosen = json_object_get(v, "layout_op");
        json_array_append_new(largest, json_pack("{s:I, s:O, s:I, s:O}", "value", id, "name",
                                                 json_object_get(v, "name"), "bytes", most, "layout_op", chosen));
        /* The chooser's first step comes after the peak step (each op named once). */
        uint32_t first = b->groups;
        for (uint32_t gi = 0; json_is_integer(chosen) && gi < b->groups && first == b->groups; gi++) {
            json_t *op = json_object_get(json_array_get(steps, gi), "op");
            if (json_is_integer(op) && json_integer_value(op) == json_integer_value(chosen))
                first = gi;
        }
        int named = 0;
        for (size_t r = 0; r < json_array_size(raised); r++)
            named |= json_equal(json_array_get(raised, r), chosen);
        if (first < b->groups && first > pk->step && !named)
            json_array_append(raised, chosen);
    }
    if (!taken) {
        json_decref(over), json_decref(largest), json_decref(raised);
        return NULL;
    }
    free(taken);
    return json_pack("{s:o, s:{s:I, s:O, s:O, s:I, s:I, s:o}, s:o}", "over_budget", over, "peak", "step",
                     (json_int_t)pk->step, "label", json_object_get(peak_step, "label"), "op",
                     json_object_get(peak_step, "op"), "tile", (json_int_t)pk->tile, "usage",
                     (json_int_t)pk->total, "largest", largest, "raised_by", raised);
}

ipu_status ipu_memory_profile(ipu_ctx *ctx, const ipu_low_program *prog, const ipu_graph *g,
                              const ipu_memory_profile_info *info, json_t **out)
{
    *out = NULL;
    builder b = {ctx, prog, g, prog->profile.tiles, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    ipu_status status = prog->step_count ? IPU_OK
                                         : IPU_FAIL(ctx, IPU_ERR_INTERNAL, "memory profile: no steps");
    if (status == IPU_OK)
        status = group_steps(&b);
    if (status == IPU_OK)
        status = class_buffers(&b);
    if (status == IPU_OK)
        status = value_lifetimes(&b);
    if (status == IPU_OK)
        status = sweep(&b);
    json_t *values = json_array(), *alias_of = json_object(), *steps = json_array();
    if (status == IPU_OK)
        status = values_json(&b, values, alias_of);
    peak pk = {0};
    /* A step group at a time, looking at a cancel request between them (1,472 tiles each). */
    for (uint32_t gi = 0; status == IPU_OK && gi < b.groups; gi++)
        if ((status = IPU_CHECK_CANCEL(ctx)) == IPU_OK)
            json_array_append_new(steps, step_json(&b, gi, values, &pk));
    if (status != IPU_OK) {
        json_decref(values), json_decref(alias_of), json_decref(steps);
        builder_free(&b);
        return status;
    }
    uint32_t rows_tile = 0;
    uint64_t rows = 0;
    status = exchange_rows(&b, &rows, &rows_tile);
    json_t *profile = status != IPU_OK ? NULL : json_pack(
        "{s:i, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:{s:o, s:o, s:o}, s:{s:I, s:I, s:I, s:I, s:I, s:I, "
        "s:I}}",
        "version", 3, "kind", "memory-profile", "scope", info->scope, "status", info->status, "budget",
        (json_int_t)info->budget, "memory_budget", (json_int_t)info->memory_budget, "tiles", (json_int_t)b.tiles,
        "reserve", (json_int_t)prog->profile.support_reserve, "timeline", "values", values, "steps", steps,
        "aliases", alias_of, "peak", "standard", (json_int_t)pk.standard, "interleaved",
        (json_int_t)pk.interleaved, "total", (json_int_t)pk.total, "tile", (json_int_t)pk.tile, "step",
        (json_int_t)pk.step, "exchange_rows", (json_int_t)rows, "exchange_rows_tile", (json_int_t)rows_tile);
    if (!profile) { /* json_pack took values, steps and alias_of only if it made the profile */
        if (status != IPU_OK)
            json_decref(values), json_decref(alias_of), json_decref(steps);
        builder_free(&b);
        return status != IPU_OK ? status : IPU_NO_MEMORY(ctx);
    }
    json_object_set_new(profile, "fits", json_boolean(pk.total <= info->budget));
    if (info->rejection) {
        json_t *rejection = json_deep_copy(info->rejection);
        json_t *detail = rejection_detail(&b, values, steps, &pk, info->budget);
        int bad = !rejection || !detail || json_object_update(rejection, detail);
        json_decref(detail);
        if (bad)
            json_decref(rejection);
        if (bad || json_object_set_new(profile, "rejection", rejection)) { /* set_new takes rejection */
            json_decref(profile);
            builder_free(&b);
            return IPU_NO_MEMORY(ctx);
        }
    }
    builder_free(&b);
    *out = profile;
    return IPU_OK;
}
