/* placement.c: building the placement report (see placement.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/placement.h"

enum { KIND_PARAMETER, KIND_ACTIVATION, KIND_STAGING, KIND_HOST_TENSOR };

/* Strings are stored once and referred to by index. */
typedef struct strings {
    json_t *list;
    json_t *index; /* text -> position */
} strings;

static json_int_t intern(strings *s, const char *text)
{
    json_t *at = json_object_get(s->index, text);
    if (at)
        return json_integer_value(at);
    json_int_t n = (json_int_t)json_array_size(s->list);
    json_array_append_new(s->list, json_string(text));
    json_object_set_new(s->index, text, json_integer(n));
    return n;
}

static int buffer_kind(const ipu_low_buffer *b)
{
    if (b->aperture)
        return KIND_STAGING;
    if (b->persistent)
        return KIND_PARAMETER;
    return b->pinned ? KIND_HOST_TENSOR : KIND_ACTIVATION;
}

static json_t *allocations(ipu_ctx *ctx, const ipu_low_program *prog, const ipu_graph *g, strings *names)
{
    json_t *tile = json_array(), *address = json_array(), *size = json_array(), *first = json_array(),
           *last = json_array(), *name = json_array(), *kind = json_array(), *alias = json_array(),
           *members = json_array(), *shape = json_array();
    char text[IPU_LOW_SHAPE_MAX];
    for (size_t i = 0; i < prog->buffer_count && (i % 4096 || IPU_CHECK_CANCEL(ctx) == IPU_OK); i++) {
        const ipu_low_buffer *b = &prog->buffers[i];
        ipu_low_buffer_shape(prog, b, text, sizeof text);
        json_array_append_new(tile, json_integer(b->tile));
        json_array_append_new(address, json_integer(b->address));
        json_array_append_new(size, json_integer(b->size));
        json_array_append_new(first, json_integer(b->first));
        json_array_append_new(last, json_integer(b->last));
        json_array_append_new(name, json_integer(intern(names, b->name)));
        json_array_append_new(kind, json_integer(buffer_kind(b)));
        json_array_append_new(alias, json_integer(b->alias == IPU_LOW_LITERAL
                                                      ? -1
                                                      : intern(names, g->tensors[b->alias].name)));
        json_array_append_new(members, json_integer(b->members));
        json_array_append_new(shape, json_integer(intern(names, text)));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:[s, s, s, s]}", "tile", tile,
                     "address", address, "size", size, "first", first, "last", last, "name", name, "kind",
                     kind, "alias", alias, "members", members, "shape", shape, "kinds", "parameter",
                     "activation", "host staging", "input/output");
}

/* Per tile and step: live bytes (the estimate: the liveness walker over
 * every buffer outside the aperture) and the span of the live address
 * ranges (lowest start to highest end): what placement used. */
static json_t *footprints(ipu_ctx *ctx, const ipu_low_program *prog, json_t **gaps)
{
    uint32_t tiles = prog->profile.tiles;
    size_t steps = prog->step_count ? prog->step_count : 1;
    uint64_t *sum = NULL;
    uint32_t *top = ipu_calloc(ctx, (size_t)tiles * steps, sizeof *top);
    uint32_t *low = ipu_malloc(ctx, (size_t)tiles * steps * sizeof *low);
    ipu_low_live *items = ipu_malloc(ctx, (prog->buffer_count ? prog->buffer_count : 1) * sizeof *items);
    json_t *estimate = json_array(), *placed = json_array();
    size_t counted = 0;
    /* Staging lives in the aperture, outside the tensor area. */
    for (size_t i = 0; items && i < prog->buffer_count; i++)
        if (!prog->buffers[i].aperture)
            items[counted++] = (ipu_low_live){prog->buffers[i].tile, prog->buffers[i].first, prog->buffers[i].last,
                                           0, prog->buffers[i].size};
    if (items && ipu_low_sweep(ctx, tiles, (uint32_t)steps, 1, items, counted, &sum) != IPU_OK)
        sum = NULL;
    free(items);
    if (!sum || !top || !low) {
        free(sum), free(top), free(low);
        json_decref(estimate), json_decref(placed);
        *gaps = NULL;
        return NULL;
    }
    memset(low, 0xFF, (size_t)tiles * steps * sizeof *low);
    for (size_t i = 0; i < prog->buffer_count; i++) {
        const ipu_low_buffer *b = &prog->buffers[i];
        if (b->aperture)
            continue;
        for (uint32_t s = b->first; s <= b->last && s < steps; s++) {
            size_t at = (size_t)b->tile * steps + s;
            if (b->address + b->size > top[at])
                top[at] = b->address + b->size;
            if (b->address < low[at])
                low[at] = b->address;
        }
    }
    /* The largest differences between placed span and estimate. */
    enum { GAPS = 20 };
    uint64_t best[GAPS] = {0};
    uint32_t where[GAPS][2] = {{0}};
    for (uint32_t t = 0; t < tiles; t++) {
        json_t *e = json_array(), *p = json_array();
        for (size_t s = 0; s < steps; s++) {
            size_t at = (size_t)t * steps + s;
            uint64_t live = sum[at], span = top[at] > low[at] ? top[at] - low[at] : 0;
            json_array_append_new(e, json_integer((json_int_t)live));
            json_array_append_new(p, json_integer((json_int_t)span));
            uint64_t gap = span > live ? span - live : 0;
            for (int g = 0; g < GAPS; g++) {
                if (gap <= best[g])
                    continue;
                memmove(&best[g + 1], &best[g], (GAPS - 1 - g) * sizeof *best);
                memmove(&where[g + 1], &where[g], (GAPS - 1 - g) * sizeof *where);
                best[g] = gap, where[g][0] = t, where[g][1] = (uint32_t)s;
                break;
            }
        }
        json_array_append_new(estimate, e);
        json_array_append_new(placed, p);
    }
    *gaps = json_array();
    for (int g = 0; g < GAPS && best[g]; g++) {
        size_t at = (size_t)where[g][0] * steps + where[g][1];
        json_array_append_new(*gaps, json_pack("{s:I, s:I, s:I, s:I, s:I}", "tile", (json_int_t)where[g][0],
                                               "step", (json_int_t)where[g][1], "estimate",
                                               (json_int_t)sum[at], "placed",
                                               (json_int_t)(top[at] - low[at]), "gap", (json_int_t)best[g]));
    }
    free(sum);
    free(top);
    free(low);
    return json_pack("{s:o, s:o}", "estimate", estimate, "placed", placed);
}

static void line(json_t *step, json_t *tile, json_t *text, json_t *uses, size_t s, uint32_t t,
                 const char *words, json_t *buffers)
{
    json_array_append_new(step, json_integer((json_int_t)s));
    json_array_append_new(tile, json_integer(t));
    json_array_append_new(text, json_string(words));
    json_array_append_new(uses, buffers);
}

/* One tile's share of an exchange or host step, summarized. */
typedef struct tile_summary {
    uint32_t sends, receives, entries;
    uint64_t bytes;
    json_t *buffers; /* distinct buffer ids, in order of first use */
    uint32_t last_buffer;
} tile_summary;

static void note(tile_summary *t, uint32_t buffer, uint64_t bytes)
{
    t->bytes += bytes;
    if (!t->buffers)
        t->buffers = json_array();
    if (t->last_buffer == buffer + 1)
        return;
    t->last_buffer = buffer + 1;
    for (size_t i = 0; i < json_array_size(t->buffers); i++)
        if ((uint32_t)json_integer_value(json_array_get(t->buffers, i)) == buffer)
            return;
    json_array_append_new(t->buffers, json_integer(buffer));
}

/* Every tile's program step by step: each kernel call on its own line; a
 * tile's part of an exchange or host phase as one line. */
static json_t *listing(ipu_ctx *ctx, const ipu_low_program *prog)
{
    json_t *step = json_array(), *tile = json_array(), *text = json_array(), *uses = json_array();
    uint32_t tiles = prog->profile.tiles;
    tile_summary *sum = ipu_calloc(ctx, tiles, sizeof *sum);
    char words[160];
    for (size_t s = 0; sum && s < prog->step_count && IPU_CHECK_CANCEL(ctx) == IPU_OK; s++) {
        const ipu_low_step *st = &prog->steps[s];
        if (st->kind == IPU_LOW_COMPUTE) {
            for (uint32_t n = 0; n < st->count; n++) {
                const ipu_low_kernel *k = &prog->kernels[st->first + n];
                json_t *bufs = json_array();
                int at = snprintf(words, sizeof words, "%s", ipu_kernel_name(k->entry));
                for (uint32_t a = 0; a < k->argc && at < (int)sizeof words - 24; a++) {
                    if (k->args[a].buffer == IPU_LOW_LITERAL) {
                        at += snprintf(words + at, sizeof words - (size_t)at, " %u", k->args[a].value);
                    } else {
                        at += snprintf(words + at, sizeof words - (size_t)at, " @%u+%u", k->args[a].buffer,
                                       k->args[a].value);
                        json_array_append_new(bufs, json_integer(k->args[a].buffer));
                    }
                }
                line(step, tile, text, uses, s, k->tile, words, bufs);
            }
            continue;
        }
        memset(sum, 0, tiles * sizeof *sum);
        for (uint32_t n = 0; n < st->count; n++) {
            uint32_t i = st->first + n;
            if (st->kind == IPU_LOW_EXCHANGE) {
                const ipu_low_xfer *x = &prog->xfers[i];
                tile_summary *from = &sum[prog->buffers[x->src_buffer].tile];
                from->sends++;
                note(from, x->src_buffer, x->bytes);
                for (uint32_t d = 0; d < x->dst_count; d++) {
                    const ipu_low_xdst *q = &prog->xdsts[x->first_dst + d];
                    tile_summary *to = &sum[prog->buffers[q->buffer].tile];
                    to->receives++;
                    note(to, q->buffer, x->bytes);
                }
            } else {
                const ipu_low_host *h = &prog->hosts[i];
                tile_summary *at = &sum[prog->buffers[h->buffer].tile];
                at->entries++;
                note(at, h->buffer, (uint64_t)h->bytes * h->rows);
            }
        }
        for (uint32_t t = 0; t < tiles; t++) {
            if (!sum[t].buffers)
                continue;
            if (st->kind == IPU_LOW_EXCHANGE)
                snprintf(words, sizeof words, "exchange: %u sends, %u receives, %llu bytes", sum[t].sends,
                         sum[t].receives, (unsigned long long)sum[t].bytes);
            else
                snprintf(words, sizeof words, "host %s: %u entries, %llu bytes",
                         st->kind == IPU_LOW_HOST_IN ? "input" : "output", sum[t].entries,
                         (unsigned long long)sum[t].bytes);
            line(step, tile, text, uses, s, t, words, sum[t].buffers);
        }
    }
    if (!sum) { /* out of memory: no listing, so no report */
        json_decref(step), json_decref(tile), json_decref(text), json_decref(uses);
        return NULL;
    }
    free(sum);
    return json_pack("{s:o, s:o, s:o, s:o}", "step", step, "tile", tile, "text", text, "buffers", uses);
}

json_t *ipu_placement_report(ipu_ctx *ctx, const ipu_low_program *prog, const ipu_graph *g,
                             const ipu_support_map *support)
{
    const ipu_profile *p = &prog->profile;
    uint32_t *phase = ipu_calloc(ctx, prog->step_count + 1, sizeof *phase);
    if (!phase)
        return NULL;
    ipu_low_step_phases(prog, phase);
    strings names = {json_array(), json_object()};
    json_t *steps_label = json_array(), *steps_kind = json_array(), *steps_init = json_array(),
           *steps_phase = json_array(), *steps_op = json_array();
    static const char *KINDS[] = {"", "compute", "exchange", "host input", "host output"};
    for (size_t s = 0; s < prog->step_count; s++) {
        json_array_append_new(steps_label, json_string(prog->steps[s].label));
        json_array_append_new(steps_kind, json_string(KINDS[prog->steps[s].kind]));
        json_array_append_new(steps_init, json_boolean(prog->steps[s].init));
        json_array_append_new(steps_phase, json_integer(phase[s]));
        json_array_append_new(steps_op, prog->steps[s].origin == IPU_LOW_LITERAL ? json_null()
                                                                                : json_integer(prog->steps[s].origin));
    }
    free(phase);
    json_t *code_end = json_array(), *desc_end = json_array(), *tables = json_array();
    for (uint32_t t = 0; t < p->tiles; t++) {
        json_array_append_new(code_end, json_integer(support->code_end[t]));
        json_array_append_new(desc_end, json_integer(support->descriptor_end[t]));
        json_array_append_new(tables, json_integer(support->exchange_table_bytes[t]));
    }
    json_t *gaps = NULL;
    json_t *fp = footprints(ctx, prog, &gaps);
    json_t *report = json_pack(
        "{s:i, s:s, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:o, s:o, s:o, s:o, s:o, s:I, s:I},"
        " s:{s:I, s:I, s:o, s:I, s:o, s:o, s:I}, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:I}}",
        "version", 1, "kind", "placement", "tiles", (json_int_t)p->tiles, "device", "sram_base",
        (json_int_t)p->sram_base, "access_end", (json_int_t)ipu_profile_access_end(p), "element_bytes",
        (json_int_t)p->element_bytes, "region1_base", (json_int_t)p->region1_base, "aperture_base",
        (json_int_t)p->aperture_base, "aperture_end", (json_int_t)p->aperture_end, "runtime_state_end",
        (json_int_t)(p->sram_base + p->runtime_state_bytes), "tiles", (json_int_t)p->tiles, "steps",
        "label", steps_label, "kind", steps_kind, "init", steps_init, "phase", steps_phase, "op", steps_op,
        "repeat_first",
        (json_int_t)prog->repeat_first, "repeat_count", (json_int_t)prog->repeat_count, "support",
        "code_base", (json_int_t)support->code_base, "descriptor_base",
        (json_int_t)support->descriptor_base, "code_end", code_end, "runtime_state_bytes",
        (json_int_t)p->runtime_state_bytes, "descriptor_end", desc_end, "exchange_table_bytes", tables,
        "tensor_bytes_available", (json_int_t)support->tensor_bytes_available, "allocations",
        allocations(ctx, prog, g, &names), "footprint", fp, "gaps", gaps, "listing", listing(ctx, prog),
        "repeat", "first", (json_int_t)prog->repeat_first, "count", (json_int_t)prog->repeat_count,
        "iterations", (json_int_t)prog->repeat_iterations);
    json_t *ops = json_array();
    for (size_t i = 0; i < prog->op_count; i++)
        json_array_append_new(ops, json_pack("{s:s, s:s}", "kind", prog->ops[i].kind, "name", prog->ops[i].name));
    if (report)
        json_object_set_new(report, "ops", ops);
    else
        json_decref(ops);
    if (report)
        json_object_set_new(report, "names", names.list);
    else
        json_decref(names.list);
    json_decref(names.index);
    if (report && IPU_CHECK_CANCEL(ctx) != IPU_OK) { /* a loop stopped early: the report is not whole */
        json_decref(report);
        return NULL;
    }
    return report;
}
