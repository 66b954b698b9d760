/* compile.c: the compiler's one-way pipeline for a workload: plan, lower,
 * (exchange scheduling, placement and packaging inside assemble), with each
 * stage's wall time, the planner's estimate, the liveness walker's per-tile
 * peak and the recorded inputs and parameters that let the package run
 * again on the same data.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lower/lower.h"
#include "numerics/numerics.h"
#include "package/assemble.h"
#include "plan/plan.h"
#include "workloads/workload.h"
#include "ipu/ipu.h"

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static ipu_status parse_options(ipu_ctx *ctx, const char *options_json, ipu_profile *p,
                                uint32_t *budget)
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
    json_decref(o);
    return status;
}

ipu_status ipu_compile(ipu_ctx *ctx, const ipu_workload *w, const char *options_json,
                       ipu_package **out, char **report_json)
{
    if (!w || !options_json || !out)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_compile: NULL argument");
    ipu_profile p;
    uint32_t budget = 0;
    IPU_TRY(parse_options(ctx, options_json, &p, &budget));
    const ipu_graph *g = &w->graph;
    ipu_plan plan;
    ipu_low_program prog;
    memset(&prog, 0, sizeof prog);
    double t0 = seconds();
    ipu_progress(ctx, "plan", 0, 0);
    IPU_TRY(ipu_plan_graph(ctx, &p, g, budget, &plan));
    double t1 = seconds();
    ipu_progress(ctx, "lower", 0, 0);
    ipu_status status = ipu_lower(ctx, &plan, &prog);
    double t2 = seconds();
    uint64_t peak = 0;
    uint32_t peak_tile = 0, peak_step = 0;
    if (status == IPU_OK)
        status = ipu_low_peaks(ctx, &prog, &peak, &peak_tile, &peak_step, NULL);
    /* Record the device-typed inputs and parameters. */
    ipu_assembly_record *records = calloc(g->tensor_count ? g->tensor_count : 1, sizeof *records);
    void **bytes = calloc(g->tensor_count ? g->tensor_count : 1, sizeof *bytes);
    size_t record_count = 0;
    if (status == IPU_OK && (!records || !bytes))
        status = IPU_NO_MEMORY(ctx);
    for (size_t t = 0; status == IPU_OK && t < g->tensor_count; t++) {
        const ipu_ir_tensor *x = &g->tensors[t];
        if ((x->role != IPU_ROLE_INPUT && x->role != IPU_ROLE_PARAM) || !w->values || !w->values[t])
            continue;
        uint64_t count = (uint64_t)x->rows * x->cols * x->sequence;
        bytes[t] = malloc(count * ipu_dtype_size(x->dtype));
        if (!bytes[t]) {
            status = IPU_NO_MEMORY(ctx);
            break;
        }
        ipu_num_encode(x->dtype, x->scale, w->values[t], bytes[t], count);
        records[record_count++] = (ipu_assembly_record){x->name, IPU_RECORD_INPUT, bytes[t],
                                                        count * ipu_dtype_size(x->dtype)};
    }
    ipu_progress(ctx, "package", 0, 0);
    json_t *assembly = NULL;
    if (status == IPU_OK) {
        json_t *meta = json_pack("{s:s, s:s, s:s}", "workload", w->name, "check", "reference",
                                 "options", w->options_json);
        status = ipu_assemble(ctx, &prog, meta, records, record_count, out, &assembly);
    }
    double t3 = seconds();
    if (status == IPU_OK && report_json) {
        json_t *report = json_pack("{s:o, s:o, s:{s:I, s:I, s:I, s:I}, s:{s:f, s:f, s:f}}", "plan",
                                   ipu_plan_json(&plan), "package", assembly, "estimate", "peak_bytes",
                                   (json_int_t)peak, "peak_tile", (json_int_t)peak_tile, "peak_step",
                                   (json_int_t)peak_step, "budget", (json_int_t)budget, "wall_seconds",
                                   "plan", t1 - t0, "lower", t2 - t1, "package", t3 - t2);
        assembly = NULL;
        *report_json = report ? json_dumps(report, JSON_COMPACT) : NULL;
        json_decref(report);
        if (!*report_json) {
            ipu_package_free(*out);
            *out = NULL;
            status = IPU_NO_MEMORY(ctx);
        }
    }
    json_decref(assembly);
    for (size_t t = 0; bytes && t < g->tensor_count; t++)
        free(bytes[t]);
    free(bytes);
    free(records);
    ipu_low_free(&prog);
    ipu_plan_free(&plan);
    return status;
}
