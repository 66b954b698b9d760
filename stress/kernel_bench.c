/* kernel_bench.c: the kernel table and benchmark.  For every registered
 * entry point: its cycle formula, the cycles of its sample call, and the
 * simulator's own throughput running that sample on every tile of the
 * device (inputs filled in the init program), timed over repeated
 * invocations.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "package/package.h"
#include "stress/bench_support.h"

/* One tile-wide package: init fills every operand the sample reads, main
 * calls the sample once per tile. */
static ipu_status build(ipu_ctx *ctx, const ipu_profile *p, const ipu_kernel_call *call,
                        ipu_package **out)
{
    uint32_t code_base = (p->sram_base + p->runtime_state_bytes + 63u) & ~63u;
    ipu_pkg_builder *b;
    IPU_TRY(ipu_pkg_builder_create(ctx, p, code_base, p->aperture_end, p->aperture_end + 0x4000, &b));
    uint32_t fill_slot = ipu_pkg_new_slot(b), run_slot = ipu_pkg_new_slot(b);
    ipu_status status = IPU_OK;
    uint8_t fills[4 + IPU_KERNEL_MAX_OPERANDS * 16], list[4 + 4 + 4 * IPU_KERNEL_MAX_ARGS];
    uint32_t nfill = 0;
    for (uint32_t o = 0; o < call->operand_count; o++) {
        const ipu_operand *op = &call->operands[o];
        if (!(op->access & IPU_ACCESS_READ))
            continue;
        /* 0x38 bytes: 1.0 in F143, finite and small in every other type. */
        uint8_t *f = fills + 4 + 16 * nfill++;
        ipu_store_u32(f, IPU_K_FILL | 3u << 16);
        ipu_store_u32(f + 4, op->address & ~3u);
        ipu_store_u32(f + 8, (op->size + (op->address & 3u) + 3u) & ~3u);
        ipu_store_u32(f + 12, 0x38383838u);
    }
    ipu_store_u32(fills, nfill);
    ipu_store_u32(list, 1);
    ipu_store_u32(list + 4, (uint32_t)call->entry | call->arg_count << 16);
    for (uint32_t a = 0; a < call->arg_count; a++)
        ipu_store_u32(list + 8 + 4 * a, call->args[a]);
    for (uint32_t t = 0; t < p->tiles && status == IPU_OK; t++) {
        status = ipu_pkg_add_code(b, t, IPU_K_FILL);
        if (status == IPU_OK)
            status = ipu_pkg_add_code(b, t, call->entry);
        if (status == IPU_OK && nfill)
            status = ipu_pkg_put_slot(b, t, fill_slot, fills, 4 + 16 * nfill, NULL);
        if (status == IPU_OK)
            status = ipu_pkg_put_slot(b, t, run_slot, list, 8 + 4 * call->arg_count, NULL);
    }
    if (status == IPU_OK && nfill)
        status = ipu_pkg_emit(b, 1, IPU_OP_STEP, fill_slot, IPU_NO_SLOT, 0);
    if (status == IPU_OK)
        status = ipu_pkg_emit(b, 0, IPU_OP_STEP, run_slot, IPU_NO_SLOT, 0);
    if (status != IPU_OK) {
        ipu_pkg_builder_free(b);
        return status;
    }
    return ipu_pkg_build(b, out);
}

static ipu_status bench_entry(ipu_ctx *ctx, const ipu_profile *p, int entry, int repeats,
                              json_t *rows)
{
    const uint32_t *sample;
    const char *formula = ipu_kernel_formula(entry, &sample);
    ipu_kernel_call call = {0};
    call.entry = entry;
    call.arg_count = ipu_kernel_arg_count(entry);
    memcpy(call.args, sample, call.arg_count * sizeof *call.args);
    const char *bad = ipu_kernel_describe(&call);
    if (bad)
        return IPU_FAIL(ctx, IPU_ERR_INTERNAL, "kernel %s: its sample arguments are malformed: %s",
                        ipu_kernel_name(entry), bad);
    uint64_t cycles = ipu_kernel_cycles(&call, p);
    json_t *args = json_array();
    for (uint32_t a = 0; a < call.arg_count; a++)
        json_array_append_new(args, json_integer(call.args[a]));
    json_t *row = json_pack("{s:s, s:I, s:s, s:o, s:I, s:I, s:I}", "kernel", ipu_kernel_name(entry),
                            "entry", (json_int_t)entry, "formula", formula, "sample_args", args,
                            "sample_cycles", (json_int_t)cycles, "supervisor_bytes",
                            (json_int_t)ipu_kernel_supervisor_size(entry), "body",
                            (json_int_t)ipu_kernel_body_of(entry));
    ipu_package *pkg = NULL;
    json_t *report = NULL;
    double best = -1;
    ipu_status status = build(ctx, p, &call, &pkg);
    if (status == IPU_OK)
        status = ipu_bench_timed_runs(ctx, pkg, repeats, &best, &report);
    uint64_t device_cycles =
        (uint64_t)json_integer_value(json_object_get(json_object_get(report, "totals"), "compute"));
    json_decref(report);
    if (status == IPU_OK) {
        json_object_set_new(row, "device_cycles", json_integer((json_int_t)device_cycles));
        json_object_set_new(row, "seconds_per_call", json_real(best / p->tiles));
        json_object_set_new(row, "simulated_cycles_per_second", json_real((double)cycles * p->tiles / best));
        json_array_append_new(rows, row);
    } else {
        json_decref(row);
    }
    ipu_package_free(pkg);
    return status;
}

ipu_status ipu_bench_kernels(ipu_ctx *ctx, const char *options_json, char **out_json)
{
    if (!options_json || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_bench_kernels: NULL argument");
    json_error_t error;
    json_t *o = json_loads(options_json, 0, &error);
    ipu_profile p;
    ipu_status status = json_is_object(o) ? ipu_profile_from_json(ctx, json_object_get(o, "profile"), 0, &p)
                                          : IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                                     "bench options: invalid JSON: %s", error.text);
    json_int_t repeats = json_integer_value(json_object_get(o, "repeats"));
    if (status == IPU_OK && (repeats < 1 || repeats > 1000))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "bench options: repeats must be 1..1000");
    json_t *rows = json_array();
    for (int e = 1; e < IPU_K_ENTRY_END && status == IPU_OK; e++)
        if (ipu_kernel_name(e))
            status = bench_entry(ctx, &p, e, (int)repeats, rows);
    if (status == IPU_OK) {
        json_t *r = json_pack("{s:I, s:I, s:o}", "tiles", (json_int_t)p.tiles, "repeats", repeats,
                              "kernels", rows);
        rows = NULL;
        *out_json = r ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        if (!*out_json)
            status = IPU_NO_MEMORY(ctx);
    }
    json_decref(rows);
    json_decref(o);
    return status;
}
