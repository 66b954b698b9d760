/* gemm_bench.c: the device GEMM benchmark.  A hand-built package fills every
 * tile's operands (init program) and runs one tile GEMM per tile per
 * invocation; the same total work is then done by one direct sgemm in the
 * same process, and both throughputs are reported with their ratio.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "numerics/numerics.h"
#include "package/package.h"
#include "stress/bench_support.h"

static ipu_status put_list(ipu_pkg_builder *b, uint32_t tile, uint32_t slot, const uint32_t *calls,
                           uint32_t count, uint32_t words)
{
    uint8_t bytes[256];
    ipu_store_u32(bytes, count);
    for (uint32_t i = 0; i < words; i++)
        ipu_store_u32(bytes + 4 + 4 * i, calls[i]);
    return ipu_pkg_put_slot(b, tile, slot, bytes, 4 + 4 * words, NULL);
}

static ipu_status build(ipu_ctx *ctx, const ipu_profile *p, uint32_t m, uint32_t n, uint32_t k,
                        int fp8, ipu_package **out)
{
    uint32_t in_size = fp8 ? 1 : 2, elem = p->element_bytes;
    uint32_t a_bytes = m * k * in_size, b_bytes = k * n * in_size, c_bytes = m * n * 4;
    uint32_t desc_base = p->aperture_end, desc_limit = desc_base + 4096;
    uint32_t c_addr = (desc_limit + elem - 1) / elem * elem;
    uint32_t a_addr = p->region1_base, b_addr = (a_addr + a_bytes + elem - 1) / elem * elem;
    if (c_addr + c_bytes > p->region1_base || b_addr + b_bytes > ipu_profile_access_end(p))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "bench GEMM %ux%ux%u does not fit a tile", m, n, k);
    ipu_pkg_builder *b;
    uint32_t code_base = (p->sram_base + p->runtime_state_bytes + 63) & ~63u;
    IPU_TRY(ipu_pkg_builder_create(ctx, p, code_base, desc_base, desc_limit, &b));
    uint32_t fill_slot = ipu_pkg_new_slot(b), gemm_slot = ipu_pkg_new_slot(b);
    uint32_t one = fp8 ? 0x38383838u : 0x3C003C00u; /* 1.0 in F143 / FP16 */
    ipu_status status = IPU_OK;
    for (uint32_t t = 0; t < p->tiles && status == IPU_OK; t++) {
        uint32_t fill[] = {IPU_K_FILL | 3u << 16, a_addr, a_bytes, one,
                           IPU_K_FILL | 3u << 16, b_addr, b_bytes, one};
        uint32_t gemm16[] = {IPU_K_GEMM_F16 | 11u << 16, a_addr, b_addr, c_addr, m, n, k, IPU_DT_F32, 0,
                             k, n, n};
        uint32_t gemm8[] = {IPU_K_GEMM_F8 | 13u << 16, a_addr, b_addr, c_addr, m, n, k,
                            IPU_DT_F143 | IPU_DT_F143 << 8, 0, IPU_DT_F32, 0, k, n, n};
        status = ipu_pkg_add_code(b, t, IPU_K_FILL);
        if (status == IPU_OK)
            status = ipu_pkg_add_code(b, t, fp8 ? IPU_K_GEMM_F8 : IPU_K_GEMM_F16);
        if (status == IPU_OK)
            status = put_list(b, t, fill_slot, fill, 2, 8);
        if (status == IPU_OK)
            status = fp8 ? put_list(b, t, gemm_slot, gemm8, 1, 14)
                         : put_list(b, t, gemm_slot, gemm16, 1, 12);
    }
    if (status == IPU_OK)
        status = ipu_pkg_emit(b, 1, IPU_OP_STEP, fill_slot, IPU_NO_SLOT, 0);
    if (status == IPU_OK)
        status = ipu_pkg_emit(b, 0, IPU_OP_STEP, gemm_slot, IPU_NO_SLOT, 0);
    if (status != IPU_OK) {
        ipu_pkg_builder_free(b);
        return status;
    }
    return ipu_pkg_build(b, out);
}

/* The fastest of repeats direct sgemm calls of the same shape; -1 when out of memory. */
static double direct_sgemm_seconds(ipu_ctx *ctx, uint64_t rows, uint32_t n, uint32_t k, int repeats)
{
    float *a = ipu_malloc(ctx, rows * k * sizeof *a), *b = ipu_malloc(ctx, (size_t)k * n * sizeof *b);
    float *c = ipu_malloc(ctx, rows * n * sizeof *c);
    double best = -1;
    if (a && b && c) {
        for (uint64_t i = 0; i < rows * k; i++)
            a[i] = 1.0f;
        for (uint64_t i = 0; i < (uint64_t)k * n; i++)
            b[i] = 1.0f;
        memset(c, 0, rows * n * sizeof *c);
        for (int r = 0; r < repeats; r++) {
            double start = ipu_bench_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0f, a,
                        (int)k, b, (int)n, 0.0f, c, (int)n);
            double took = ipu_bench_now() - start;
            if (best < 0 || took < best)
                best = took;
        }
    }
    free(a), free(b), free(c);
    return best;
}

ipu_status ipu_bench_gemm(ipu_ctx *ctx, const char *options_json, char **out_json)
{
    if (!options_json || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_bench_gemm: NULL argument");
    json_error_t error;
    json_t *o = json_loads(options_json, 0, &error);
    ipu_profile p;
    ipu_status status = json_is_object(o) ? IPU_OK
                                          : IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                                     "bench options: invalid JSON: %s", error.text);
    if (status == IPU_OK)
        status = ipu_profile_from_json(ctx, json_object_get(o, "profile"), 0, &p);
    json_int_t m = json_integer_value(json_object_get(o, "m")), n = json_integer_value(json_object_get(o, "n")),
               k = json_integer_value(json_object_get(o, "k")),
               repeats = json_integer_value(json_object_get(o, "repeats"));
    const char *precision = json_string_value(json_object_get(o, "precision"));
    int fp8 = precision && strcmp(precision, "fp8") == 0;
    if (status == IPU_OK && (m < 1 || n < 1 || k < 1 || m > 4096 || n > 4096 || k > 65535 ||
                             repeats < 1 || repeats > 1000 ||
                             !precision || (!fp8 && strcmp(precision, "fp16"))))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "bench options: expected m, n, k >= 1, repeats 1..1000, precision fp16|fp8");
    ipu_package *pkg = NULL;
    json_t *report = NULL;
    double device_best = -1;
    if (status == IPU_OK)
        status = build(ctx, &p, (uint32_t)m, (uint32_t)n, (uint32_t)k, fp8, &pkg);
    if (status == IPU_OK)
        status = ipu_bench_timed_runs(ctx, pkg, (int)repeats, &device_best, &report);
    uint64_t cycles = (uint64_t)json_integer_value(json_object_get(report, "cycles"));
    json_decref(report);
    if (status == IPU_OK) {
        double flops = 2.0 * (double)m * (double)n * (double)k * p.tiles;
        double direct =
            direct_sgemm_seconds(ctx, (uint64_t)m * p.tiles, (uint32_t)n, (uint32_t)k, (int)repeats);
        json_t *r = NULL; /* direct < 0: out of memory */
        if (direct >= 0)
            r = json_pack("{s:I, s:I, s:I, s:I, s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:I}", "tiles",
                          (json_int_t)p.tiles, "m", m, "n", n, "k", k, "precision", precision, "repeats",
                          repeats, "device_seconds", device_best, "device_gflops", flops / device_best * 1e-9,
                          "direct_seconds", direct, "direct_gflops", flops / direct * 1e-9,
                          "throughput_ratio", direct / device_best, "simulated_cycles", (json_int_t)cycles);
        *out_json = r ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        if (!*out_json)
            status = IPU_NO_MEMORY(ctx);
    }
    ipu_package_free(pkg);
    json_decref(o);
    return status;
}
