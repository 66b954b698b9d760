/* compile.c: the compiler's one-way pipeline for a workload: plan, lower,
 * (exchange scheduling, placement and packaging inside assemble), with each
 * stage's wall time, the planner's estimate, the liveness walker's per-tile
 * peak and the recorded inputs and parameters that let the package run
 * again on the same data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lower/lower.h"
#include "numerics/numerics.h"
#include "package/assemble.h"
#include "plan/plan.h"
#include "report/memory.h"
#include "report/placement.h"
#include "workloads/workload.h"
#include "ipu/ipu.h"

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *INJECT_NAMES[] = {"none", "drop-transfer", "overlap-allocation",
                                      "skip-padding-clear", "overwrite-parameter"};

/* Where and under what name memory profiles go (no directory: none). */
typedef struct profile_sink {
    char *directory;
    const char *scope;
    uint32_t budget;
    uint32_t written;
} profile_sink;

static ipu_status parse_options(ipu_ctx *ctx, const char *options_json, ipu_profile *p,
                                uint32_t *budget, int *inject, int *attention, char **report_path,
                                char **profile_directory)
{
    json_error_t error;
    json_t *o = json_loads(options_json, 0, &error);
    if (!json_is_object(o)) {
        json_decref(o);
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "compile options: invalid JSON: %s", error.text);
    }
    ipu_status status = ipu_profile_from_json(ctx, json_object_get(o, "profile"), 0, p);
    json_t *b = json_object_get(o, "memory_budget");
    if (status == IPU_OK) {
        if (!b || json_is_null(b))
            *budget = ipu_profile_default_budget(p);
        else if (json_is_integer(b) && json_integer_value(b) > 0 && json_integer_value(b) <= 0xFFFFFFFF)
            *budget = (uint32_t)json_integer_value(b);
        else
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "--memory-budget: expected a positive number of bytes or 'default'");
    }
    const char *path = json_string_value(json_object_get(o, "placement_report"));
    *report_path = path ? strdup(path) : NULL;
    if (path && !*report_path)
        status = IPU_NO_MEMORY(ctx);
    const char *dir = json_string_value(json_object_get(o, "memory_profile_directory"));
    *profile_directory = dir ? strdup(dir) : NULL;
    if (dir && !*profile_directory)
        status = IPU_NO_MEMORY(ctx);
    json_t *mode = json_object_get(o, "attention");
    *attention = IPU_ATTENTION_AUTO;
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
            *attention = m;
    }
    const char *name = json_string_value(json_object_get(o, "inject"));
    *inject = IPU_INJECT_NONE;
    for (int i = 0; name && status == IPU_OK; i++) {
        if (i == (int)(sizeof INJECT_NAMES / sizeof *INJECT_NAMES)) {
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "compile option 'inject': unknown '%s'",
                              name);
            break;
        }
        if (strcmp(name, INJECT_NAMES[i]) == 0) {
            *inject = i;
            break;
        }
    }
    json_decref(o);
    if (status != IPU_OK) {
        free(*report_path);
        free(*profile_directory);
        *report_path = *profile_directory = NULL;
    }
    return status;
}

/* Write one candidate's memory profile as DIR/memory-<scope>-<pid>-<serial>.json
 * (the first serial not taken), atomically. */
static ipu_status write_profile(ipu_ctx *ctx, profile_sink *sink, const ipu_low_program *prog,
                                const ipu_graph *g, const char *status_name, uint32_t plan_budget,
                                json_t *rejection)
{
    if (!sink->directory)
        return IPU_OK;
    ipu_memory_profile_info info = {sink->scope, status_name, sink->budget, plan_budget, rejection};
    json_t *profile = NULL;
    IPU_TRY(ipu_memory_profile(ctx, prog, g, &info, &profile));
    char path[4096];
    do
        snprintf(path, sizeof path, "%s/memory-%s-%ld-%u.json", sink->directory, sink->scope,
                 (long)getpid(), ++sink->written);
    while (access(path, F_OK) == 0);
    char *text = json_dumps(profile, JSON_COMPACT);
    json_decref(profile);
    ipu_status status = text ? ipu_write_file_atomic(ctx, path, text, strlen(text)) : IPU_NO_MEMORY(ctx);
    free(text);
    return status;
}

/* Why the search stopped, and where the rejected candidate's storage peaks. */
static json_t *rejection_json(const char *reason, uint32_t budget)
{
    return json_pack("{s:s, s:I}", "reason", reason, "budget", (json_int_t)budget);
}

/* The search found nothing: profile its smallest candidate (planned without a
 * budget), keeping the search's error. */
static void profile_rejection(ipu_ctx *ctx, profile_sink *sink, const ipu_profile *p, const ipu_graph *g,
                              int attention)
{
    if (!sink->directory)
        return;
    char reason[1024];
    ipu_status failure = ctx->status;
    snprintf(reason, sizeof reason, "%s", ctx->errmsg);
    ipu_ctx_clear_error(ctx);
    ipu_plan plan;
    ipu_low_program prog;
    memset(&prog, 0, sizeof prog);
    ipu_status status = ipu_plan_smallest(ctx, p, g, attention, &plan);
    if (status == IPU_OK) {
        status = ipu_lower(ctx, &plan, IPU_INJECT_NONE, &prog);
        json_t *rejection = rejection_json(reason, sink->budget);
        if (status == IPU_OK)
            status = write_profile(ctx, sink, &prog, g, "rejected", UINT32_MAX, rejection);
        json_decref(rejection);
        ipu_low_free(&prog);
        ipu_plan_free(&plan);
    }
    /* The search's error stands; a profile that could not be made is said in it. */
    char why[1024];
    snprintf(why, sizeof why, "%s", status != IPU_OK ? ctx->errmsg : "");
    char note[2200];
    snprintf(note, sizeof note, "%s%s%s%s", reason, status != IPU_OK ? " (no rejection profile: " : "", why,
             status != IPU_OK ? ")" : "");
    size_t n = strlen(note) < sizeof ctx->errmsg ? strlen(note) : sizeof ctx->errmsg - 1;
    memcpy(ctx->errmsg, note, n);
    ctx->errmsg[n] = '\0';
    ctx->status = failure;
}

/* Device-typed inputs and parameters, recorded so the package can run again. */
static ipu_status make_records(ipu_ctx *ctx, const ipu_workload *w, ipu_assembly_record *records,
                               void **bytes, size_t *count)
{
    const ipu_graph *g = &w->graph;
    *count = 0;
    for (size_t t = 0; t < g->tensor_count; t++) {
        const ipu_ir_tensor *x = &g->tensors[t];
        if ((x->role != IPU_ROLE_INPUT && x->role != IPU_ROLE_PARAM) || !w->values || !w->values[t])
            continue;
        uint64_t n = (uint64_t)x->rows * x->cols * x->sequence;
        bytes[t] = malloc(n * ipu_dtype_size(x->dtype));
        if (!bytes[t])
            return IPU_NO_MEMORY(ctx);
        ipu_num_encode(x->dtype, x->scale, w->values[t], bytes[t], n);
        records[(*count)++] =
            (ipu_assembly_record){x->name, IPU_RECORD_INPUT, bytes[t], n * ipu_dtype_size(x->dtype)};
    }
    return IPU_OK;
}

typedef struct attempt {
    ipu_plan plan;
    ipu_low_program prog;
    uint64_t peak;
    uint32_t peak_tile, peak_step;
    double plan_seconds, lower_seconds, package_seconds;
    json_t *assembly;
} attempt;

static void attempt_free(attempt *a)
{
    ipu_low_free(&a->prog);
    if (a->plan.graph)
        ipu_plan_free(&a->plan);
    json_decref(a->assembly);
    memset(a, 0, sizeof *a);
}

/* Plan at plan_budget and lower; stop before packaging when the liveness
 * peak exceeds the real budget. */
static ipu_status plan_and_lower(ipu_ctx *ctx, const ipu_profile *p, const ipu_graph *g,
                                 uint32_t plan_budget, int inject, int attention, attempt *a)
{
    double t0 = seconds();
    ipu_progress(ctx, "plan", 0, 0);
    IPU_TRY(ipu_plan_graph(ctx, p, g, plan_budget, attention, &a->plan));
    double t1 = seconds();
    ipu_progress(ctx, "lower", 0, 0);
    IPU_TRY(ipu_lower(ctx, &a->plan, inject, &a->prog));
    a->plan_seconds += t1 - t0;
    a->lower_seconds += seconds() - t1;
    return ipu_low_peaks(ctx, &a->prog, &a->peak, &a->peak_tile, &a->peak_step, NULL);
}

/* Planning searches under the budget: when the liveness walker's peak (or
 * placement) says a plan does not fit, plan again with a tighter budget. */
#define ATTEMPTS 8

ipu_status ipu_compile(ipu_ctx *ctx, const ipu_workload *w, const char *options_json,
                       ipu_package **out, char **report_json)
{
    if (!w || !options_json || !out)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_compile: NULL argument");
    ipu_profile p;
    uint32_t budget = 0;
    int inject = IPU_INJECT_NONE, attention = IPU_ATTENTION_AUTO;
    char *report_path = NULL;
    profile_sink sink = {NULL, w->name, 0, 0};
    IPU_TRY(parse_options(ctx, options_json, &p, &budget, &inject, &attention, &report_path,
                          &sink.directory));
    sink.budget = budget;
    ipu_support_map support = {0, 0, calloc(p.tiles, sizeof(uint32_t)), calloc(p.tiles, sizeof(uint32_t))};
    const ipu_graph *g = &w->graph;
    ipu_assembly_record *records = calloc(g->tensor_count ? g->tensor_count : 1, sizeof *records);
    void **bytes = calloc(g->tensor_count ? g->tensor_count : 1, sizeof *bytes);
    size_t record_count = 0;
    ipu_status status = records && bytes && support.code_end && support.descriptor_end
                            ? IPU_OK
                            : IPU_NO_MEMORY(ctx);
    if (status == IPU_OK)
        status = make_records(ctx, w, records, bytes, &record_count);
    attempt a;
    memset(&a, 0, sizeof a);
    uint32_t plan_budget = budget, attempts = 0, first_peak_tile = 0;
    uint64_t first_peak = 0;
    json_t *tries = json_array();
    int exhausted = 0; /* the search ended without a plan that fits */
    while (status == IPU_OK) {
        attempts++;
        double plan_s = a.plan_seconds, lower_s = a.lower_seconds, package_s = a.package_seconds;
        attempt_free(&a);
        a.plan_seconds = plan_s, a.lower_seconds = lower_s, a.package_seconds = package_s;
        status = plan_and_lower(ctx, &p, g, plan_budget, inject, attention, &a);
        exhausted = status == IPU_ERR_INVALID_ARGUMENT;
        if (status == IPU_ERR_INVALID_ARGUMENT && attempts > 1) {
            /* A tighter re-plan found nothing: say so in terms of the user's budget. */
            char why[1024];
            snprintf(why, sizeof why, "%s", ipu_ctx_errmsg(ctx));
            ipu_ctx_clear_error(ctx);
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "no plan fits the memory budget of %u bytes per tile: the first plan's "
                              "estimate needed %llu bytes on tile %u; planning again at %u bytes: %s",
                              budget, (unsigned long long)first_peak, first_peak_tile, plan_budget, why);
        }
        if (attempts == 1)
            first_peak = a.peak, first_peak_tile = a.peak_tile;
        if (status == IPU_OK)
            status = write_profile(ctx, &sink, &a.prog, g, "finalist", plan_budget, NULL);
        int retry = 0;
        if (status == IPU_OK && a.peak > budget) {
            json_array_append_new(tries, json_pack("{s:I, s:I, s:s}", "plan_budget", (json_int_t)plan_budget,
                                                   "peak_bytes", (json_int_t)a.peak, "outcome",
                                                   "estimate over budget"));
            retry = 1;
        } else if (status == IPU_OK) {
            double t = seconds();
            ipu_progress(ctx, "package", 0, 0);
            json_t *meta = json_pack("{s:s, s:s, s:s}", "workload", w->name, "check", "reference",
                                     "options", w->options_json);
            status = ipu_assemble(ctx, &a.prog, meta, records, record_count, out, &a.assembly,
                                  report_path ? &support : NULL);
            a.package_seconds += seconds() - t;
            if (status == IPU_OK && a.prog.inject != IPU_INJECT_NONE) {
                ipu_package_free(*out);
                *out = NULL;
                status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                  "compile option 'inject': this program has no place for '%s'",
                                  INJECT_NAMES[inject]);
                break;
            }
            exhausted = status == IPU_ERR_INVALID_ARGUMENT;
            if (status == IPU_ERR_INVALID_ARGUMENT && attempts < ATTEMPTS) {
                json_array_append_new(tries, json_pack("{s:I, s:I, s:s}", "plan_budget",
                                                       (json_int_t)plan_budget, "peak_bytes",
                                                       (json_int_t)a.peak, "outcome", ipu_ctx_errmsg(ctx)));
                ipu_ctx_clear_error(ctx);
                status = IPU_OK;
                retry = 1;
            }
        }
        if (status != IPU_OK || !retry)
            break;
        if (attempts == ATTEMPTS) {
            exhausted = 1;
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "no plan fits the memory budget of %u bytes per tile after %u attempts: "
                              "the last estimate needs %llu bytes on tile %u",
                              budget, attempts, (unsigned long long)a.peak, a.peak_tile);
            break;
        }
        /* Tighten by half the excess and a margin for fragmentation: the
         * plans' own footprints are only part of the peak. */
        uint64_t excess = a.peak > budget ? a.peak - budget : 0;
        uint64_t cut = excess / 2 + plan_budget / 32;
        plan_budget = cut < plan_budget ? (uint32_t)(plan_budget - cut) : 0;
    }
    if (status == IPU_ERR_INVALID_ARGUMENT && exhausted)
        profile_rejection(ctx, &sink, &p, g, attention);
    /* The placement report, written atomically where the caller asked. */
    if (status == IPU_OK && report_path) {
        json_t *placement = ipu_placement_report(&a.prog, g, &support);
        char *text = placement ? json_dumps(placement, JSON_COMPACT) : NULL;
        json_decref(placement);
        status = text ? ipu_write_file_atomic(ctx, report_path, text, strlen(text)) : IPU_NO_MEMORY(ctx);
        free(text);
        if (status != IPU_OK) {
            ipu_package_free(*out);
            *out = NULL;
        }
    }
    if (status == IPU_OK && report_json) {
        json_t *report = json_pack(
            "{s:o, s:O, s:{s:I, s:I, s:I, s:I, s:I}, s:o, s:{s:f, s:f, s:f}}", "plan",
            ipu_plan_json(&a.plan), "package", a.assembly, "estimate", "peak_bytes", (json_int_t)a.peak,
            "peak_tile", (json_int_t)a.peak_tile, "peak_step", (json_int_t)a.peak_step, "budget",
            (json_int_t)budget, "plan_budget", (json_int_t)plan_budget, "attempts", tries,
            "wall_seconds", "plan", a.plan_seconds, "lower", a.lower_seconds, "package",
            a.package_seconds);
        tries = NULL;
        *report_json = report ? json_dumps(report, JSON_COMPACT) : NULL;
        json_decref(report);
        if (!*report_json) {
            ipu_package_free(*out);
            *out = NULL;
            status = IPU_NO_MEMORY(ctx);
        }
    }
    json_decref(tries);
    attempt_free(&a);
    free(report_path);
    free(sink.directory);
    free(support.code_end);
    free(support.descriptor_end);
    for (size_t t = 0; bytes && t < g->tensor_count; t++)
        free(bytes[t]);
    free(bytes);
    free(records);
    return status;
}
