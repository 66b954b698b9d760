/* compile.c: the compiler's one-way pipeline for a workload: the search
 * (plan, lower, the liveness walker's per-tile peak; a candidate that does
 * not fit caps the matmul charged most at its peak and plans again, see
 * shrink.h), then exchange scheduling, placement and packaging inside
 * assemble, with each stage's wall time, the planner's estimate, memory
 * profiles of the finalists (and of a rejected search's smallest candidate)
 * and the recorded inputs and parameters that let the package run again on
 * the same data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_file.h"
#include "core/paths.h"
#include "driver/build.h"
#include "driver/mutations.h"
#include "driver/search.h"
#include "driver/shrink.h"
#include "lower/lower.h"
#include "numerics/numerics.h"
#include "place/program.h"
#include "report/memory.h"
#include "report/placement.h"
#include "timing/timing.h"
#include "workloads/workload.h"
#include "ipu/ipu.h"


/* Where and under what name memory profiles go (no directory: none). */
typedef struct profile_sink {
    char *directory;
    const char *scope;
    uint32_t budget, memory_budget;
    uint32_t written;
    json_t *names; /* the file names written, in order */
} profile_sink;

typedef struct compile_options {
    ipu_profile profile;
    uint32_t budget;          /* --memory-budget */
    ipu_plan_options plan;    /* search and catalogue budgets, frontier, attention */
    ipu_xmode exchange;       /* --exchange-stream-words, --balance-streams */
    int probe_capacity;       /* --probe-capacity */
    ipu_search_options search; /* --search-seconds, --search-beam, --search-steps (seconds 0: no search) */
    uint32_t key_bands;        /* --attention-key-bands (0: the planner's choice) */
    int inject;
    int catalogue_given; /* --catalogue-budget was given: the last resort keeps to it too */
    char *report_path, *profile_directory;
} compile_options;

/* A budget option: absent or null gives fallback; else a positive byte count. */
static ipu_status budget_option(ipu_ctx *ctx, json_t *o, const char *key, const char *flag, uint32_t fallback,
                                uint32_t *out)
{
    json_t *b = json_object_get(o, key);
    if (!b || json_is_null(b))
        *out = fallback;
    else if (json_is_integer(b) && json_integer_value(b) > 0 && json_integer_value(b) <= 0xFFFFFFFF)
        *out = (uint32_t)json_integer_value(b);
    else
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "%s (compile option '%s'): expected a positive number of bytes below 2^32, or null for "
                        "the default",
                        flag, key);
    return IPU_OK;
}

/* A count option in [1, limit]: absent or null gives fallback. */
static ipu_status count_option(ipu_ctx *ctx, json_t *o, const char *key, const char *flag, uint32_t fallback,
                               uint32_t limit, uint32_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        *out = fallback;
    else if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= limit)
        *out = (uint32_t)json_integer_value(v);
    else
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "%s: expected a whole number from 1 to %u", flag, limit);
    return IPU_OK;
}

static ipu_status parse_options(ipu_ctx *ctx, const char *options_json, compile_options *c)
{
    memset(c, 0, sizeof *c);
    json_error_t error;
    json_t *o = json_loads(options_json, JSON_REJECT_DUPLICATES, &error);
    if (!o)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "compile options: invalid JSON: %s", error.text);
    if (!json_is_object(o)) {
        json_decref(o);
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "compile options: expected a JSON object");
    }
    /* A misspelt option would otherwise leave its default in place unseen. */
    static const char *const KNOWN[] = {"profile", "memory_budget", "search_budget", "catalogue_budget",
                                        "frontier_cap", "catalogue_group", "exchange_stream_words",
                                        "search_seconds", "search_beam", "search_steps", "probe_capacity",
                                        "exchange_rank", "balance_streams", "placement_report",
                                        "memory_profile_directory", "attention", "attention_key_bands", "inject"};
    ipu_status status = ipu_options_known(ctx, o, "compile options", KNOWN, sizeof KNOWN / sizeof *KNOWN);
    if (status == IPU_OK)
        status = ipu_profile_from_json(ctx, json_object_get(o, "profile"), 0, &c->profile);
    if (status == IPU_OK)
        status = budget_option(ctx, o, "memory_budget", "--memory-budget",
                               ipu_profile_default_budget(&c->profile), &c->budget);
    if (status == IPU_OK)
        status = budget_option(ctx, o, "search_budget", "--search-budget", c->budget, &c->plan.budget);
    if (status == IPU_OK)
        status = budget_option(ctx, o, "catalogue_budget", "--catalogue-budget", c->budget,
                               &c->plan.catalogue.budget);
    c->catalogue_given = json_object_get(o, "catalogue_budget") && !json_is_null(json_object_get(o, "catalogue_budget"));
    if (status == IPU_OK)
        status = count_option(ctx, o, "frontier_cap", "--frontier-cap", 32, 1u << 16, &c->plan.catalogue.frontier_cap);
    if (status == IPU_OK)
        status = count_option(ctx, o, "catalogue_group", "--catalogue-group", 4096, 1u << 24,
                              &c->plan.catalogue.group_size);
    if (status == IPU_OK)
        status = count_option(ctx, o, "exchange_stream_words", "--exchange-stream-words", 0, 1u << 20,
                              &c->exchange.stream_words);
    json_t *seconds = json_object_get(o, "search_seconds");
    if (status == IPU_OK && seconds && !json_is_null(seconds) &&
        (!json_is_number(seconds) || json_number_value(seconds) <= 0 || json_number_value(seconds) > 86400))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "--search-seconds: expected a number of seconds in (0, 86400]");
    c->search.seconds = json_is_number(seconds) ? json_number_value(seconds) : 0;
    if (status == IPU_OK)
        status = count_option(ctx, o, "search_beam", "--search-beam", 1, 64, &c->search.beam);
    if (status == IPU_OK) {
        json_t *steps = json_object_get(o, "search_steps");
        c->search.steps = 0;
        if (steps && !json_is_null(steps))
            status = count_option(ctx, o, "search_steps", "--search-steps", 1, 1u << 16, &c->search.steps);
    }
    if (status == IPU_OK && !c->search.seconds &&
        ((json_object_get(o, "search_beam") && !json_is_null(json_object_get(o, "search_beam"))) || c->search.steps))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "--search-beam and --search-steps need --search-seconds S (the search's time budget)");
    json_t *probe = json_object_get(o, "probe_capacity");
    if (status == IPU_OK && probe && !json_is_boolean(probe))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "--probe-capacity: expected true or false");
    c->probe_capacity = json_is_true(probe);
    json_t *rank = json_object_get(o, "exchange_rank");
    const char *rank_name = json_string_value(rank);
    if (status == IPU_OK && rank && !json_is_null(rank) &&
        (!rank_name || (strcmp(rank_name, "tables") && strcmp(rank_name, "horizon"))))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "--exchange-rank: expected tables or horizon");
    c->exchange.by_horizon = rank_name && !strcmp(rank_name, "horizon");
    if (status == IPU_OK && c->exchange.by_horizon && !c->exchange.stream_words)
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "--exchange-rank horizon needs --exchange-stream-words N (it ranks the compact schedules)");
    json_t *balance = json_object_get(o, "balance_streams");
    if (status == IPU_OK && balance && !json_is_boolean(balance))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "--balance-streams: expected true or false");
    c->exchange.balance = json_is_true(balance);
    if (status == IPU_OK && c->exchange.balance && !c->exchange.stream_words)
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "--balance-streams needs --exchange-stream-words N (the wave size its chunks are 4 N of)");
    const char *path = json_string_value(json_object_get(o, "placement_report"));
    c->report_path = path ? ipu_strdup(ctx, path) : NULL;
    if (path && !c->report_path)
        status = IPU_NO_MEMORY(ctx);
    const char *dir = json_string_value(json_object_get(o, "memory_profile_directory"));
    c->profile_directory = dir ? ipu_strdup(ctx, dir) : NULL;
    if (dir && !c->profile_directory)
        status = IPU_NO_MEMORY(ctx);
    json_t *mode = json_object_get(o, "attention");
    c->plan.attention = IPU_ATTENTION_AUTO;
    if (status == IPU_OK && mode && !json_is_null(mode)) {
        const char *text = json_string_value(mode);
        int m = IPU_ATTENTION_AUTO;
        while (text && m <= IPU_ATTENTION_MATERIALIZED && strcmp(text, ipu_attention_mode_name(m)))
            m++;
        if (!text || m > IPU_ATTENTION_MATERIALIZED)
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "--attention: expected auto, flash or materialized, got %s%s%s",
                              text ? "'" : "", text ? text : "a non-string", text ? "'" : "");
        else
            c->plan.attention = m;
    }
    json_t *key_bands = json_object_get(o, "attention_key_bands");
    if (status == IPU_OK && key_bands && !json_is_null(key_bands))
        status = count_option(ctx, o, "attention_key_bands", "--attention-key-bands", 1, 4096, &c->key_bands);
    if (status == IPU_OK && c->key_bands > 1 && c->plan.attention == IPU_ATTENTION_MATERIALIZED)
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "--attention-key-bands splits flash attention's keys; it does not apply with "
                          "--attention materialized");
    const char *name = json_string_value(json_object_get(o, "inject"));
    c->inject = IPU_INJECT_NONE;
    if (name && status == IPU_OK) {
        const ipu_mutation *m = ipu_mutation_named(name);
        if (m)
            c->inject = m->id;
        else
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "compile option 'inject': unknown '%s' (ipu_mutations_json lists them)", name);
    }
    json_decref(o);
    if (status != IPU_OK) {
        free(c->report_path);
        free(c->profile_directory);
        c->report_path = c->profile_directory = NULL;
    }
    return status;
}

/* Write one candidate's memory profile as DIR/memory-<scope>-<serial>.json
 * (serials count this compile's profiles from 1), atomically.  The scope is
 * the workload's name, which a graph description sets: in the file name it
 * keeps only [A-Za-z0-9_-] (ipu_file_name_part), so the file stays in DIR;
 * the profile itself records the name as it is. */
static ipu_status write_profile(ipu_ctx *ctx, profile_sink *sink, const ipu_low_program *prog,
                                const ipu_graph *g, const char *status_name,
                                json_t *rejection)
{
    if (!sink->directory)
        return IPU_OK;
    ipu_memory_profile_info info = {sink->scope, status_name, sink->budget, sink->memory_budget, rejection};
    json_t *profile = NULL;
    IPU_TRY(ipu_memory_profile(ctx, prog, g, &info, &profile));
    char scope[64], name[128], path[4096];
    ipu_file_name_part(sink->scope, scope, sizeof scope);
    snprintf(name, sizeof name, "memory-%s-%u.json", scope, ++sink->written);
    ipu_status status = ipu_path_in_folder(ctx, sink->directory, name, path, sizeof path);
    if (status == IPU_OK)
        status = ipu_write_json_atomic(ctx, path, profile);
    json_decref(profile);
    if (status == IPU_OK && json_array_append_new(sink->names, json_string(name)))
        status = IPU_NO_MEMORY(ctx);
    return status;
}

/* The search found nothing: plan its smallest candidate (every op at its
 * smallest choice, no budget), profile it, and describe the rejection: the
 * stage that turned the last candidate down, the search's error, what the
 * search cost, and the smallest candidate's estimated peak (the least any
 * candidate of this search needs on its fullest tile).  The search's error
 * stands; a profile or record that could not be made is said in it. */
static json_t *reject(ipu_ctx *ctx, profile_sink *sink, const ipu_profile *p, const ipu_graph *g,
                      const ipu_plan_options *options, const char *stage, uint32_t attempts, double plan_seconds,
                      double refine_seconds)
{
    char reason[1024];
    ipu_status failure = ctx->status;
    snprintf(reason, sizeof reason, "%s", ctx->errmsg);
    ipu_ctx_clear_error(ctx);
    ipu_plan plan;
    ipu_low_program prog;
    memset(&prog, 0, sizeof prog);
    ipu_plan_options smallest = *options;
    smallest.smallest = 1;
    smallest.caps = NULL;
    smallest.catalogue.budget = UINT32_MAX;
    uint64_t peak = 0;
    uint32_t peak_tile = 0, peak_step = 0;
    json_t *rejection = json_pack("{s:s, s:s, s:I, s:{s:I, s:f, s:f}}", "stage", stage, "reason", reason, "budget",
                                  (json_int_t)sink->budget, "search", "attempts", (json_int_t)attempts,
                                  "plan_seconds", plan_seconds, "refine_seconds", refine_seconds);
    ipu_status status = rejection ? ipu_plan_graph(ctx, p, g, &smallest, &plan) : IPU_NO_MEMORY(ctx);
    if (status == IPU_OK) {
        status = ipu_lower(ctx, &plan, IPU_INJECT_NONE, &prog);
        if (status == IPU_OK)
            status = ipu_low_peaks(ctx, &prog, &peak, &peak_tile, &peak_step, NULL);
        /* memory.c adds where the candidate peaks. */
        if (status == IPU_OK)
            status = write_profile(ctx, sink, &prog, g, "rejected", rejection);
        if (status == IPU_OK)
            json_object_set_new(rejection, "smallest_candidate",
                                json_pack("{s:I, s:I, s:I}", "peak_bytes", (json_int_t)peak, "peak_tile",
                                          (json_int_t)peak_tile, "peak_phase",
                                          (json_int_t)ipu_low_step_phase(&prog, peak_step)));
        ipu_low_free(&prog);
        ipu_plan_free(&plan);
    }
    char why[1024];
    snprintf(why, sizeof why, "%s", status != IPU_OK ? ctx->errmsg : "");
    char note[2200];
    snprintf(note, sizeof note, "%s%s%s%s", reason, status != IPU_OK ? " (no smallest candidate: " : "", why,
             status != IPU_OK ? ")" : "");
    size_t n = strlen(note) < sizeof ctx->errmsg ? strlen(note) : sizeof ctx->errmsg - 1;
    memcpy(ctx->errmsg, note, n);
    ctx->errmsg[n] = '\0';
    ctx->status = failure;
    return rejection;
}

/* Where a record's bytes come from: an input or parameter of the workload
 * at its device type; shifted (a mutation of the driver): its bytes one row
 * out of place, its first row last. */
typedef struct record_source {
    const ipu_workload *w;
    uint32_t tensor;
    int shifted;
} record_source;

static ipu_status fill_record(ipu_ctx *ctx, const void *source, void *dst)
{
    const record_source *r = source;
    const ipu_ir_tensor *x = &r->w->graph.tensors[r->tensor];
    IPU_TRY(ipu_workload_device_bytes_of(ctx, r->w, r->tensor, dst));
    if (!r->shifted)
        return IPU_OK;
    size_t row = (size_t)x->cols * ipu_dtype_size(x->dtype), size = ipu_ir_tensor_bytes(x) * x->sequence;
    uint8_t *first = ipu_malloc(ctx, row), *b = dst;
    if (!first)
        return IPU_NO_MEMORY(ctx);
    memcpy(first, b, row);
    memmove(b, b + row, size - row);
    memcpy(b + size - row, first, row);
    free(first);
    return IPU_OK;
}

/* Every input and parameter as a package record, made when the package is
 * assembled; shifted (a mutation): the first input of more than one row is
 * recorded one row out of place. */
static void make_records(const ipu_workload *w, ipu_assembly_record *records, record_source *sources, size_t *count,
                         int shifted)
{
    const ipu_graph *g = &w->graph;
    *count = 0;
    for (size_t t = 0; t < g->tensor_count; t++) {
        const ipu_ir_tensor *x = &g->tensors[t];
        if (x->role != IPU_ROLE_INPUT && x->role != IPU_ROLE_PARAM)
            continue;
        int shift = shifted && x->role == IPU_ROLE_INPUT && x->rows > 1;
        shifted = shifted && !shift;
        sources[*count] = (record_source){w, (uint32_t)t, shift};
        records[*count] = (ipu_assembly_record){x->name, IPU_RECORD_INPUT, ipu_ir_tensor_bytes(x) * x->sequence,
                                                fill_record, &sources[*count]};
        (*count)++;
    }
}

/* Per tile of the placed program: the live bytes at its fullest step and
 * how far up its SRAM placement went ({"peak_bytes": [...], "high_water":
 * [...]}, the second in bytes from the SRAM base, support included). */
static json_t *tile_peaks_json(ipu_ctx *ctx, const ipu_low_program *prog)
{
    uint64_t peak = 0, *per_tile = NULL;
    uint32_t peak_tile = 0, peak_step = 0, tiles = prog->profile.tiles;
    uint32_t *high = ipu_calloc(ctx, tiles ? tiles : 1, sizeof *high);
    if (!high || ipu_low_peaks(ctx, prog, &peak, &peak_tile, &peak_step, &per_tile) != IPU_OK) {
        free(high);
        return NULL;
    }
    for (size_t b = 0; b < prog->buffer_count; b++) {
        const ipu_low_buffer *buf = &prog->buffers[b];
        uint32_t end = buf->address + buf->size - prog->profile.sram_base;
        high[buf->tile] = end > high[buf->tile] ? end : high[buf->tile];
    }
    json_t *peaks = json_array(), *highs = json_array();
    for (uint32_t t = 0; t < tiles; t++) {
        json_array_append_new(peaks, json_integer((json_int_t)per_tile[t]));
        json_array_append_new(highs, json_integer(high[t]));
    }
    free(high);
    free(per_tile);
    return json_pack("{s:o, s:o}", "peak_bytes", peaks, "high_water", highs);
}

/* The search: candidate plans until one fits the search budget and places;
 * one that does not caps a matmul (shrink.h).  Each cap removes at least one
 * retained candidate, so the search ends; this bounds it further. */
#define ATTEMPTS 64
/* Placement failures of materialized attention operands after which auto
 * attention goes on in flash (capping matmuls usually frees a hole within
 * one or two). */
#define FALLBACK_MISSES 3

/* When support (code, descriptors, exchange tables) and the tensors live at
 * a tile's peak together exceed what the device gives that tile: the
 * search budget that leaves the fullest such tile's support its room, else
 * 0 (placement failed on fragmentation, not on room). */
static ipu_status support_cap(ipu_ctx *ctx, const ipu_profile *p, const ipu_support_map *support,
                              const ipu_low_program *prog, uint32_t *cap)
{
    uint64_t peak = 0, *per_tile = NULL, capacity = ipu_profile_access_end(p) - p->sram_base - p->runtime_state_bytes;
    uint32_t peak_tile = 0, peak_step = 0;
    IPU_TRY(ipu_low_peaks(ctx, prog, &peak, &peak_tile, &peak_step, &per_tile));
    uint64_t most = 0;
    for (uint32_t t = 0; t < p->tiles; t++) {
        uint64_t bytes = (uint64_t)(support->code_end[t] - support->code_base) +
                         (support->descriptor_end[t] - support->descriptor_base);
        if (bytes + per_tile[t] > capacity && bytes > most)
            most = bytes;
    }
    free(per_tile);
    *cap = most && most < capacity ? (uint32_t)((capacity - most) & ~1023ull) : 0;
    return IPU_OK;
}

/* How the search budget came to be lower than asked, for messages. */
static const char *support_note(uint32_t asked, uint32_t budget)
{
    return budget < asked ? " (the search budget, lowered for the package support)" : "";
}

/* The step and the limit of --probe-capacity: extra SRAM per tile. */
#define PROBE_STEP 4096u
#define PROBE_LIMIT (256u * 1024u)

/* --probe-capacity, when no candidate plan fits (why: the error): lay out
 * the last lowered candidate's support and place its buffers with 0,
 * PROBE_STEP, 2 PROBE_STEP, ... more bytes at the top of every tile's SRAM
 * (placement only: the addresses are discarded and no package is built);
 * fail with the error and the smallest extra that places it (or that none
 * up to PROBE_LIMIT does). */
static ipu_status probe_capacity(ipu_ctx *ctx, ipu_build *a, const ipu_xmode *mode, const char *why)
{
    uint32_t tiles = a->prog.profile.tiles, found = UINT32_MAX;
    ipu_support_map map;
    ipu_xprogram exchanges;
    ipu_package_layout layout;
    memset(&exchanges, 0, sizeof exchanges);
    memset(&layout, 0, sizeof layout);
    ipu_status status = ipu_support_map_alloc(ctx, tiles, &map);
    if (status == IPU_OK)
        status = ipu_exchange_program(ctx, &a->prog, mode, &exchanges);
    if (status == IPU_OK)
        status = ipu_package_lay_out(ctx, &a->prog, &exchanges, &layout, &map);
    const ipu_profile saved = a->prog.profile;
    ipu_place_support room = {map.code_end, map.descriptor_end, map.descriptor_base};
    for (uint32_t extra = 0; extra <= PROBE_LIMIT && found == UINT32_MAX && status == IPU_OK; extra += PROBE_STEP) {
        status = ipu_progress(ctx, "capacity probe", extra / PROBE_STEP, PROBE_LIMIT / PROBE_STEP);
        a->prog.profile.sram_end = saved.sram_end + extra;
        ipu_status placed = status == IPU_OK ? ipu_place_program(ctx, &a->prog, &room) : status;
        if (placed == IPU_OK)
            found = extra;
        else if (placed == IPU_ERR_NO_PLAN)
            ipu_ctx_clear_error(ctx);
        else
            status = placed; /* out of memory, cancelled */
    }
    a->prog.profile = saved;
    ipu_package_layout_free(&layout);
    ipu_xprogram_free(&exchanges);
    ipu_support_map_free(&map);
    if (status == IPU_ERR_NO_PLAN) { /* the support itself does not fit */
        char support[512];
        snprintf(support, sizeof support, "%s", ipu_ctx_errmsg(ctx));
        ipu_ctx_clear_error(ctx);
        return IPU_FAIL(ctx, IPU_ERR_NO_PLAN, "%s (--probe-capacity: the last candidate's %s)", why,
                        support);
    }
    if (status != IPU_OK)
        return status;
    ipu_ctx_clear_error(ctx);
    if (found == UINT32_MAX)
        return IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                        "%s (--probe-capacity: the last candidate does not place with up to %u more bytes per tile "
                        "either)",
                        why, PROBE_LIMIT);
    if (found == 0)
        return IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                        "%s (--probe-capacity: the last candidate places on the device as it is: the budget, "
                        "not the SRAM, turns it down)",
                        why);
    return IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                    "%s (--probe-capacity: the last candidate places with %u more bytes (%u KiB) of SRAM on every "
                    "tile, and not with %u)",
                    why, found, found / 1024, found - PROBE_STEP);
}

/* "auto" attention: the mode whose whole plan the planner estimates faster
 * (flash on a tie; a mode that cannot plan at all loses).  *cycles gets
 * each mode's estimate (0: it did not plan). */
static ipu_status choose_attention(ipu_ctx *ctx, const ipu_profile *p, const ipu_graph *g,
                                   const ipu_plan_options *options, int *mode, uint64_t cycles[3])
{
    cycles[IPU_ATTENTION_FLASH] = cycles[IPU_ATTENTION_MATERIALIZED] = 0;
    for (int m = IPU_ATTENTION_FLASH; m <= IPU_ATTENTION_MATERIALIZED; m++) {
        ipu_plan_options o = *options;
        o.attention = m;
        ipu_plan plan;
        ipu_status status = ipu_plan_graph(ctx, p, g, &o, &plan);
        if (status == IPU_ERR_NO_PLAN || status == IPU_ERR_INVALID_ARGUMENT) { /* this mode does not plan */
            ipu_ctx_clear_error(ctx);
            continue;
        }
        IPU_TRY(status);
        cycles[m] = plan.cycles;
        ipu_plan_free(&plan);
    }
    uint64_t flash = cycles[IPU_ATTENTION_FLASH], mat = cycles[IPU_ATTENTION_MATERIALIZED];
    *mode = mat && (!flash || mat < flash) ? IPU_ATTENTION_MATERIALIZED
            : flash                        ? IPU_ATTENTION_FLASH
                                           : IPU_ATTENTION_AUTO;
    return IPU_OK;
}

static int has_attention(const ipu_graph *g)
{
    for (size_t i = 0; i < g->op_count; i++)
        if (g->ops[i].kind == IPU_IR_ATTENTION || g->ops[i].kind == IPU_IR_MAP_POOL)
            return 1;
    return 0;
}

static json_t *try_json(const ipu_build *a, const char *outcome, long shrunk)
{
    json_t *t = json_pack("{s:I, s:I, s:I, s:s}", "peak_bytes", (json_int_t)a->peak, "peak_tile",
                          (json_int_t)a->peak_tile, "peak_phase",
                          (json_int_t)ipu_low_step_phase(&a->prog, a->peak_step), "outcome", outcome);
    json_object_set_new(t, "capped_op", shrunk >= 0 ? json_integer(shrunk) : json_null());
    return t;
}

/* The meta a compiled package starts from (the encoder adds the plan's). */
static json_t *package_meta(const ipu_workload *w)
{
    return json_pack("{s:s, s:s, s:s}", "workload", w->name, "check", "reference", "options", w->options_json);
}

/* The search's last resort, when shrinking at the peak found nothing that
 * fits: every matmul at its smallest candidate (the plan a rejection
 * measures; the shrinking steps, one op at the peak at a time, need not
 * reach it), under the catalogue budget only when the user gave one.  why
 * keeps what the search ran into, for the rejection should this fail too. */
static void take_last_resort(ipu_ctx *ctx, compile_options *c, char *why, size_t size, const char *found)
{
    snprintf(why, size, "%s", found);
    ipu_ctx_clear_error(ctx);
    c->plan.smallest = 1;
    if (!c->catalogue_given)
        c->plan.catalogue.budget = UINT32_MAX;
}

/* The plan search from the built candidate a (its package *out): when it
 * finds a faster candidate, a is rebuilt as that one and *out replaced by
 * its package (records included).  *record: the search's account. */
static ipu_status search_from(ipu_ctx *ctx, compile_options *c, const ipu_workload *w, int inject, ipu_build *a,
                              ipu_package **out, const ipu_assembly_record *records, size_t record_count,
                              ipu_support_map *support, ipu_build_times *t, json_t **record)
{
    json_t *timing = NULL;
    IPU_TRY(ipu_timing_package(ctx, *out, &timing));
    uint64_t first = (uint64_t)json_integer_value(json_object_get(timing, "cycles"));
    json_decref(timing);
    ipu_search_point start, best;
    IPU_TRY(ipu_search_point_init(ctx, &w->graph, &c->plan, &c->exchange, &start));
    ipu_status status = ipu_search_plans(ctx, &c->profile, &w->graph, inject, &start, first, &c->search, &best, record);
    ipu_search_point_free(&start);
    if (status != IPU_OK)
        return status;
    if ((uint64_t)json_integer_value(json_object_get(*record, "cycles")) < first) {
        double t0 = ipu_build_seconds();
        ipu_build_free(a);
        status = ipu_build_plan(ctx, &c->profile, &w->graph, &best.plan, inject, a, t);
        json_t *meta = package_meta(w);
        ipu_package *searched = NULL;
        if (status == IPU_OK)
            status = meta ? ipu_build_package(ctx, a, &best.xmode, meta, records, record_count, &searched, support)
                          : IPU_NO_MEMORY(ctx);
        else
            json_decref(meta);
        if (status == IPU_ERR_NO_PLAN) /* the search placed it: building it again must too */
            status = IPU_INCONSISTENT(ctx, "search", "rebuilding the searched candidate");
        if (status == IPU_OK) {
            ipu_package_free(*out);
            *out = searched;
            c->exchange = best.xmode;
        }
        t->package += ipu_build_seconds() - t0;
    }
    ipu_search_point_free(&best);
    return status;
}

ipu_status ipu_compile(ipu_ctx *ctx, const ipu_workload *w, const char *options_json,
                       ipu_package **out, char **report_json)
{
    if (!w || !options_json || !out)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_compile: NULL argument");
    compile_options c;
    IPU_TRY(parse_options(ctx, options_json, &c));
    const ipu_profile *p = &c.profile;
    const ipu_graph *g = &w->graph;
    profile_sink sink = {c.profile_directory, w->name, c.plan.budget, c.budget, 0, json_array()};
    ipu_support_map support;
    ipu_status status = ipu_support_map_alloc(ctx, p->tiles, &support);
    ipu_assembly_record *records = ipu_calloc(ctx, g->tensor_count ? g->tensor_count : 1, sizeof *records);
    record_source *sources = ipu_calloc(ctx, g->tensor_count ? g->tensor_count : 1, sizeof *sources);
    uint64_t *caps = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *caps);
    uint32_t *key_bands = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *key_bands);
    size_t record_count = 0;
    if (status == IPU_OK && (!records || !sources || !caps || !key_bands))
        status = IPU_NO_MEMORY(ctx);
    for (size_t i = 0; status == IPU_OK && c.key_bands && i < g->op_count; i++)
        key_bands[i] = g->ops[i].kind == IPU_IR_ATTENTION ? c.key_bands : 0;
    c.plan.key_bands = key_bands;
    ipu_build_times t = {0, 0, 0, 0};
    if (status == IPU_OK)
        make_records(w, records, sources, &record_count, c.inject == IPU_INJECT_INPUT_RECORD_SHIFTED);
    /* The driver's own mutation is applied; the stages see none. */
    int stage_inject = c.inject == IPU_INJECT_INPUT_RECORD_SHIFTED ? IPU_INJECT_NONE : c.inject;
    c.plan.inject = stage_inject;
    /* The planner's and the search's own: lowering has no place for them. */
    if (c.inject == IPU_INJECT_PLAN_FIT_TAKES_LAST || c.inject == IPU_INJECT_SEARCH_WORST_FIRST)
        stage_inject = IPU_INJECT_NONE;
    c.search.inject = c.inject;
    c.plan.caps = caps;
    ipu_build a, last; /* last: the candidate before, for --probe-capacity */
    memset(&a, 0, sizeof a);
    memset(&last, 0, sizeof last);
    uint32_t attempts = 0, first_peak_tile = 0;
    uint64_t first_peak = 0;
    json_t *tries = json_array();
    int exhausted = 0; /* the search ended without a plan that fits */
    char resort_why[1024] = ""; /* what the search ran into before its last resort */
    const char *stage = "plan"; /* the stage that turned the last candidate down */
    int requested = c.plan.attention, fell_back = 0; /* fell_back: auto left materialized for flash */
    uint32_t attention_misses = 0; /* materialized attention operands that did not place */
    uint32_t searched = c.plan.budget; /* the search budget asked for (support may lower it) */
    uint64_t mode_cycles[3] = {0, 0, 0};
    if (status == IPU_OK && requested == IPU_ATTENTION_AUTO && has_attention(g)) {
        double t0 = ipu_build_seconds();
        status = choose_attention(ctx, p, g, &c.plan, &c.plan.attention, mode_cycles);
        t.plan += ipu_build_seconds() - t0;
    }
    while (status == IPU_OK) {
        attempts++;
        if (c.probe_capacity && a.prog.step_count) { /* keep the last lowered candidate for the probe */
            ipu_build_free(&last);
            last = a;
            memset(&a, 0, sizeof a);
        }
        ipu_build_free(&a);
        stage = "plan";
        status = ipu_build_plan(ctx, p, g, &c.plan, stage_inject, &a, &t);
        exhausted = status == IPU_ERR_NO_PLAN;
        if (status == IPU_ERR_NO_PLAN && !c.plan.smallest) {
            char why[1024];
            if (first_peak)
                snprintf(why, sizeof why, "the first candidate needed %llu bytes on tile %u; after %u smaller "
                         "choices: %s", (unsigned long long)first_peak, first_peak_tile, attempts - 1,
                         ipu_ctx_errmsg(ctx));
            else
                snprintf(why, sizeof why, "%s", ipu_ctx_errmsg(ctx));
            take_last_resort(ctx, &c, resort_why, sizeof resort_why, why);
            status = IPU_OK;
            continue;
        }
        if (status == IPU_ERR_NO_PLAN) {
            /* The last resort did not plan either: say so in terms of the user's budget. */
            char why[1024];
            snprintf(why, sizeof why, "%s", ipu_ctx_errmsg(ctx));
            ipu_ctx_clear_error(ctx);
            status = IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                              "no plan fits the memory budget of %u bytes per tile%s: %s; and every matmul at "
                              "its smallest candidate: %s",
                              c.plan.budget, support_note(searched, c.plan.budget), resort_why, why);
        }
        if (status != IPU_OK)
            break;
        if (!first_peak)
            first_peak = a.peak, first_peak_tile = a.peak_tile;
        status = write_profile(ctx, &sink, &a.prog, g, "finalist", NULL);
        long shrunk = -1;
        if (status == IPU_OK && a.peak > c.plan.budget) {
            status = ipu_shrink_at_peak(ctx, &a.plan, &a.prog, a.peak_tile, a.peak_step, caps, &shrunk);
            json_array_append_new(tries, try_json(&a, "estimate over budget", shrunk));
        } else if (status == IPU_OK) {
            double t0 = ipu_build_seconds();
            status = ipu_progress(ctx, "package", 0, 0);
            json_t *meta = package_meta(w);
            if (status == IPU_OK)
                status = ipu_build_package(ctx, &a, &c.exchange, meta, records, record_count, out, &support);
            else
                json_decref(meta);
            if (status == IPU_ERR_MALFORMED) /* the validator refuses the compiler's own package */
                status = IPU_INCONSISTENT(ctx, "package", "the package of %s", w->name);
            t.package += ipu_build_seconds() - t0;
            if (status == IPU_OK && a.prog.inject != IPU_INJECT_NONE) {
                ipu_package_free(*out);
                *out = NULL;
                status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                  "compile option 'inject': this program has no place for '%s'",
                                  ipu_mutation_name(c.inject));
                break;
            }
            if (status != IPU_ERR_NO_PLAN)
                break; /* placed and packaged, or failed for another reason */
            stage = "place";
            char why[1024];
            snprintf(why, sizeof why, "%s", ipu_ctx_errmsg(ctx));
            /* Auto attention: a materialized attention operand (every key
             * of an image) keeps failing to place; flash brings keys a block
             * at a time, so after FALLBACK_MISSES such failures the search
             * goes on in that mode. */
            const ipu_low_buffer *stuck = a.prog.unplaced != IPU_LOW_LITERAL ? &a.prog.buffers[a.prog.unplaced] : NULL;
            if (stuck && requested == IPU_ATTENTION_AUTO && c.plan.attention == IPU_ATTENTION_MATERIALIZED &&
                mode_cycles[IPU_ATTENTION_FLASH] && stuck->op < g->op_count &&
                (g->ops[stuck->op].kind == IPU_IR_ATTENTION || g->ops[stuck->op].kind == IPU_IR_MAP_POOL) &&
                ++attention_misses >= FALLBACK_MISSES && attempts < ATTEMPTS) {
                json_array_append_new(tries, try_json(&a, why, -1));
                c.plan.attention = IPU_ATTENTION_FLASH;
                fell_back = 1;
                memset(caps, 0, (g->op_count ? g->op_count : 1) * sizeof *caps);
                ipu_ctx_clear_error(ctx);
                status = IPU_OK;
                continue;
            }
            /* Support (code, descriptors, exchange tables) larger than the
             * device leaves a tile beside its tensors: the search starts
             * again under a budget that leaves the support its room. */
            uint32_t cap = 0;
            ipu_status measured = support_cap(ctx, p, &support, &a.prog, &cap);
            if (measured != IPU_OK) {
                status = measured;
                break;
            }
            if (cap && cap < c.plan.budget && attempts < ATTEMPTS) {
                json_array_append_new(tries, try_json(&a, why, -1));
                c.plan.budget = cap;
                memset(caps, 0, (g->op_count ? g->op_count : 1) * sizeof *caps);
                ipu_ctx_clear_error(ctx);
                status = IPU_OK;
                continue;
            }
            /* Placement could not fit a buffer: shrink where it is, when it starts. */
            ipu_status shrink = ipu_shrink_at_peak(ctx, &a.plan, &a.prog, stuck ? stuck->tile : a.peak_tile,
                                                   stuck ? stuck->first : a.peak_step, caps, &shrunk);
            if (shrink != IPU_OK) { /* the placement error gives way to this one */
                ipu_ctx_clear_error(ctx);
                status = IPU_NO_MEMORY(ctx);
                break;
            }
            json_array_append_new(tries, try_json(&a, why, shrunk));
            if ((shrunk < 0 || attempts >= ATTEMPTS) && !c.plan.smallest) {
                take_last_resort(ctx, &c, resort_why, sizeof resort_why, why);
                status = IPU_OK;
                continue;
            }
            if (shrunk < 0 || attempts >= ATTEMPTS || c.plan.smallest) {
                exhausted = 1;
                break; /* the placement error stands */
            }
            ipu_ctx_clear_error(ctx);
            status = IPU_OK;
        }
        if (status != IPU_OK)
            break;
        if ((shrunk < 0 || attempts >= ATTEMPTS) && !c.plan.smallest) {
            char why[1024];
            snprintf(why, sizeof why, "after %u candidate plans the last needs %llu bytes on tile %u at phase %u, and "
                     "%s", attempts, (unsigned long long)a.peak, a.peak_tile, ipu_low_step_phase(&a.prog, a.peak_step),
                     shrunk < 0 ? "no matmul holding memory there has a smaller candidate"
                                : "the search stopped at its attempt limit");
            take_last_resort(ctx, &c, resort_why, sizeof resort_why, why);
            continue;
        }
        if (shrunk < 0 || attempts >= ATTEMPTS || c.plan.smallest) {
            exhausted = 1;
            status = IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                              "no plan fits the memory budget of %u bytes per tile%s: %s; and every matmul at its "
                              "smallest candidate needs %llu bytes on tile %u at phase %u",
                              c.plan.budget, support_note(searched, c.plan.budget), resort_why,
                              (unsigned long long)a.peak, a.peak_tile, ipu_low_step_phase(&a.prog, a.peak_step));
            break;
        }
    }
    json_t *search_record = NULL;
    if (status == IPU_OK && c.search.seconds > 0) {
        double t0 = ipu_build_seconds();
        status = search_from(ctx, &c, w, stage_inject, &a, out, records, record_count, &support, &t, &search_record);
        t.search = ipu_build_seconds() - t0;
        if (status != IPU_OK) {
            ipu_package_free(*out);
            *out = NULL;
        }
    }
    json_t *rejection = status == IPU_ERR_NO_PLAN && exhausted
                            ? reject(ctx, &sink, p, g, &c.plan, stage, attempts, t.plan, t.refine)
                            : NULL;
    /* The placement report, written atomically where the caller asked. */
    if (status == IPU_OK && c.report_path) {
        json_t *placement = ipu_placement_report(ctx, &a.prog, g, &support);
        status = placement ? ipu_write_json_atomic(ctx, c.report_path, placement) : IPU_CHECK_CANCEL(ctx);
        if (!placement && status == IPU_OK)
            status = IPU_NO_MEMORY(ctx);
        json_decref(placement);
        if (status != IPU_OK) {
            ipu_package_free(*out);
            *out = NULL;
        }
    }
    json_t *tile_peaks = status == IPU_OK && report_json ? tile_peaks_json(ctx, &a.prog) : NULL;
    if (status == IPU_OK && report_json && !tile_peaks) {
        ipu_package_free(*out);
        *out = NULL;
        status = IPU_NO_MEMORY(ctx);
    }
    if (status == IPU_OK && report_json) {
        json_t *report = json_pack(
            "{s:o, s:O, s:{s:I, s:I, s:I, s:I, s:I}, s:o, s:{s:f, s:f, s:f, s:f}, s:o, s:{s:s, s:s, s:I, s:I, s:b}}",
            "plan",
            ipu_plan_json(&a.plan), "package", a.assembly, "estimate", "peak_bytes", (json_int_t)a.peak,
            "peak_tile", (json_int_t)a.peak_tile, "peak_phase", (json_int_t)ipu_low_step_phase(&a.prog, a.peak_step),
            "budget",
            (json_int_t)c.budget, "search_budget", (json_int_t)c.plan.budget, "attempts", tries,
            "wall_seconds", "plan", t.plan, "lower", t.refine, "package", t.package, "search", t.search, "tiles",
            tile_peaks,
            "attention", "requested", ipu_attention_mode_name(requested), "searched",
            ipu_attention_mode_name(c.plan.attention), "flash_estimate", (json_int_t)mode_cycles[IPU_ATTENTION_FLASH],
            "materialized_estimate", (json_int_t)mode_cycles[IPU_ATTENTION_MATERIALIZED], "placement_fallback",
            fell_back);
        tries = NULL;
        if (report)
            json_object_set(report, "memory_profiles", sink.names);
        if (report)
            json_object_set(report, "plan_search", search_record ? search_record : json_null());
        *report_json = report ? json_dumps(report, JSON_COMPACT) : NULL;
        json_decref(report);
        if (!*report_json) {
            ipu_package_free(*out);
            *out = NULL;
            status = IPU_NO_MEMORY(ctx);
        }
    }
    json_decref(tries);
    if (status == IPU_ERR_NO_PLAN && exhausted && c.probe_capacity) {
        char why[1024];
        snprintf(why, sizeof why, "%s", ipu_ctx_errmsg(ctx));
        ipu_build *probed = a.prog.step_count ? &a : last.prog.step_count ? &last : NULL;
        if (probed) {
            ipu_ctx_clear_error(ctx);
            status = probe_capacity(ctx, probed, &c.exchange, why);
        }
    }
    /* A rejection is its own outcome: the record goes back as the report. */
    if (rejection && status == IPU_ERR_NO_PLAN) {
        json_object_set_new(rejection, "reason", json_string(ipu_ctx_errmsg(ctx)));
        json_object_set(rejection, "memory_profiles", sink.names);
        json_t *report = json_pack("{s:O}", "rejection", rejection);
        char *text = report && report_json ? json_dumps(report, JSON_COMPACT) : NULL;
        json_decref(report);
        if (report_json && !text) {
            ipu_ctx_clear_error(ctx);
            status = IPU_NO_MEMORY(ctx);
        } else {
            if (report_json)
                *report_json = text;
            status = ctx->status = IPU_ERR_NO_PLAN;
        }
    }
    json_decref(rejection);
    json_decref(search_record);
    json_decref(sink.names);
    ipu_build_free(&a);
    ipu_build_free(&last);
    free(c.report_path);
    free(c.profile_directory);
    free(caps);
    free(key_bands);
    ipu_support_map_free(&support);
    free(sources);
    free(records);
    return status;
}
