/* test_kernels_gemm.c: the row-major GEMM family (gemm_f16, gemm_f8 of
 * kernels_gemm.c) on the simulated device over 256 random shapes per entry,
 * sixteen calls per run (one per tile of a 16-tile package, operands as
 * package data, results read back with ipu_device_read).  Each dimension is
 * 8 q + r with r cycling through every residue mod 8 (m with the case index,
 * n with its eighth, k with both), so every residue of m, n and k mod 8 is
 * drawn; strides lda, ldb, ldc are the minimum or the minimum plus 1..9
 * elements; initialize and accumulate; f16 and f32 outputs (the partial type);
 * FP8 inputs F143/F152 with scales -2/-4 per operand; 64-bit operands in
 * region 0 or 1 and 128-bit (IPU_GEMM_WIDE) operands 16 B aligned in region
 * 1; C in region 0 or 1 in another memory element.  The gap elements of A and
 * B hold NaN codes (0xFF bytes, NaN in FP16, F143 and F152), so a read of a
 * gap would spread NaN into the result; C's gaps and 32 bytes on each side of
 * C hold guard bytes that must stay untouched.  References are computed in
 * double from this file's own decoders of the formats (DEVICE.md).
 * Tolerances: f32 output within 1e-5 (sum |a b| + |c|) of the exact value
 * (FP32 accumulation over k <= 63 terms errs by at most 64 * 2^-24 < 4e-6 of
 * that sum, plus the final rounding); f16 output within one f16 ulp of the
 * exact value plus that.  Each tile's compute must be DEVICE.md's formula
 * 50 + ceil(m n k / rate) + 4 m (rate 128 FP8, 64 FP16 -> f16, 32 FP16 -> f32),
 * whatever the strides and regions.  128-bit operands in region 0 or only
 * 8 B aligned fault as misaligned on that operand.  This file stands alone (its helpers are
 * its own); test_kernels_device.c runs a smaller set through host streams.
 * The seed comes from IPU_TEST_SEED or the clock and is printed on every
 * failure.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipu/ipu.h"
#include "kernels/kernels.h"
#include "numerics/numerics.h"
#include "package/package.h"

#include "support_packages.h"
#include "support_seed.h"

#define TILES 16u
#define CASES 256
#define GUARD 0xA5u
#define NAN_BYTE 0xFFu
/* Per tile: A and B in IN0 (region 0, elements 23..27) or IN1 (region 1), C in
 * OUT0 (region 0, elements 28..31) or OUT1: C never shares an element with
 * an input. */
#define IN0 0x5C000u
#define OUT0 0x70000u
#define IN1 0x80000u
#define OUT1 0xA0000u

static uint32_t align_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }
static size_t type_size(int t) { return t == IPU_DT_F32 ? 4 : t == IPU_DT_F16 ? 2 : 1; }

/* ---- the formats, from their definitions -------------------------------- */
static double decode(int t, int scale, const uint8_t *p)
{
    double v;
    int neg;
    if (t == IPU_DT_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    if (t == IPU_DT_F16) {
        unsigned h = p[0] | (unsigned)p[1] << 8, e = (h >> 10) & 31, m = h & 1023;
        neg = (h & 0x8000) != 0;
        v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, (int)e - 25) : ldexp(m, -24);
    } else if (t == IPU_DT_F143) { /* E4M3, bias 7, S.1111.111 is NaN */
        unsigned c = p[0], e = (c >> 3) & 15, m = c & 7;
        neg = (c & 0x80) != 0;
        v = (c & 0x7F) == 0x7F ? NAN : ldexp(e ? ldexp(8 + m, (int)e - 10) : ldexp(m, -9), scale);
    } else { /* E5M2, bias 15 */
        unsigned c = p[0], e = (c >> 2) & 31, m = c & 3;
        neg = (c & 0x80) != 0;
        v = e == 31 ? (m ? NAN : INFINITY) : ldexp(e ? ldexp(4 + m, (int)e - 17) : ldexp(m, -16), scale);
    }
    return neg ? -v : v;
}

static double f16_ulp(double s)
{
    int e = 0;
    if (s != 0)
        frexp(fabs(s), &e);
    return ldexp(1.0, (s == 0 || e - 1 < -14 ? -14 : e - 1) - 10);
}

/* Random finite codes of moderate magnitude (FP16 up to 4, FP32 up to 4). */
static void gen_codes(int t, uint8_t *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        unsigned sign = tseed_below(2);
        if (t == IPU_DT_F16) {
            unsigned e = tseed_below(16) ? 1 + tseed_below(16) : 0, m = tseed_below(1024);
            unsigned h = sign << 15 | e << 10 | m;
            dst[2 * i] = (uint8_t)h, dst[2 * i + 1] = (uint8_t)(h >> 8);
        } else if (t == IPU_DT_F32) {
            float v = (float)((int)tseed_below(65536) - 32768) / 8192.0f;
            memcpy(dst + 4 * i, &v, 4);
        } else if (t == IPU_DT_F143) {
            dst[i] = (uint8_t)(sign << 7 | tseed_below(12) << 3 | tseed_below(8));
        } else {
            dst[i] = (uint8_t)(sign << 7 | tseed_below(19) << 2 | tseed_below(4));
        }
    }
}

/* ---- running jobs: job i on tile i, one step ------------------------------ */
typedef struct tspan {
    uint32_t address, size;
    uint8_t *bytes;
} tspan;

typedef struct tjob {
    tpkg_kernel k;
    int ndata, nread;
    tspan data[6], read[4];
    uint8_t lo[32], hi[32]; /* guard bytes around C, read back */
    uint64_t compute;       /* the tile's compute cycles */
} tjob;

static void job_data(tjob *j, uint32_t address, uint8_t *bytes, uint32_t size)
{
    j->data[j->ndata++] = (tspan){address, size, bytes};
}
static void job_read(tjob *j, uint32_t address, uint8_t *bytes, uint32_t size)
{
    j->read[j->nread++] = (tspan){address, size, bytes};
}

/* Run jobs[0..n) (job i on tile i) in one step.  Without fault, any fault
 * fails the test; with it, a faulting run returns its status and the parsed
 * fault JSON (caller frees). */
static ipu_status run_jobs(tjob *jobs, uint32_t n, json_t **fault)
{
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_profile p;
    tpkg_profile(ctx, TILES, &p);
    ipu_pkg_builder *b = tpkg_builder(ctx, &p);
    uint32_t slot = ipu_pkg_new_slot(b);
    for (uint32_t t = 0; t < n; t++) {
        for (int d = 0; d < jobs[t].ndata; d++)
            TPKG_OK(ctx, ipu_pkg_add_data(b, t, jobs[t].data[d].address, jobs[t].data[d].bytes,
                                          jobs[t].data[d].size));
        tpkg_compute_list(b, t, slot, &jobs[t].k, 1, 1);
    }
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0));
    ipu_package *pkg = tpkg_build(ctx, b);
    ipu_device *dev = tpkg_device(ctx, pkg);
    TSEED_OK(ctx, ipu_device_initialize(ctx, dev, pkg));
    char *text = NULL;
    ipu_status st = ipu_device_run(ctx, dev, &text);
    if (st != IPU_OK && fault) {
        *fault = tpkg_fault(ctx, dev);
        ipu_device_free(dev);
        ipu_package_free(pkg);
        ipu_ctx_free(ctx);
        return st;
    }
    TSEED_OK(ctx, st);
    json_t *report = json_loads(text, 0, NULL);
    assert_non_null(report);
    json_t *compute = json_object_get(json_object_get(report, "tiles"), "compute");
    for (uint32_t t = 0; t < n; t++) {
        jobs[t].compute = (uint64_t)json_integer_value(json_array_get(compute, t));
        for (int r = 0; r < jobs[t].nread; r++)
            TSEED_OK(ctx, ipu_device_read(ctx, dev, t, jobs[t].read[r].address, jobs[t].read[r].bytes,
                                          jobs[t].read[r].size));
    }
    json_decref(report);
    ipu_free(text);
    ipu_device_free(dev);
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
    return IPU_OK;
}

/* ---- the GEMM cases ------------------------------------------------------------ */
typedef struct gcase {
    int f8, ta, tb, sa, sb, out_type;
    uint32_t m, n, k, flags, lda, ldb, ldc, a, b, c, a_bytes, b_bytes, c_bytes;
    uint8_t *A, *B, *cin, *cout;
} gcase;

/* 8 q + r, at least 1. */
static uint32_t dim_with_residue(uint32_t r)
{
    uint32_t v = 8 * tseed_below(8) + r;
    return v ? v : 8;
}
static uint32_t stride(uint32_t min) { return min + (tseed_below(2) ? 1 + tseed_below(9) : 0); }

/* Random codes in the rows of a strided operand, NaN codes in its gaps. */
static void gen_rows(int t, uint8_t *dst, uint32_t rows, uint32_t cols, uint32_t ld)
{
    size_t sz = type_size(t);
    memset(dst, NAN_BYTE, ((size_t)(rows - 1) * ld + cols) * sz);
    for (uint32_t r = 0; r < rows; r++)
        gen_codes(t, dst + (size_t)r * ld * sz, cols);
}

static void gemm_case(gcase *g, tjob *job, int index)
{
    g->m = dim_with_residue((uint32_t)index % 8);
    g->n = dim_with_residue((uint32_t)(index / 8) % 8);
    g->k = dim_with_residue((uint32_t)(index + index / 64) % 8);
    g->out_type = tseed_below(2) ? IPU_DT_F16 : IPU_DT_F32;
    g->ta = g->tb = IPU_DT_F16, g->sa = g->sb = 0;
    if (g->f8) {
        g->ta = tseed_below(2) ? IPU_DT_F143 : IPU_DT_F152;
        g->tb = tseed_below(2) ? IPU_DT_F143 : IPU_DT_F152;
        g->sa = tseed_below(2) ? -2 : -4, g->sb = tseed_below(2) ? -2 : -4;
    }
    g->flags = (tseed_below(2) ? IPU_GEMM_ACCUMULATE : 0) | (tseed_below(2) ? IPU_GEMM_WIDE : 0);
    g->lda = stride(g->k), g->ldb = stride(g->n), g->ldc = stride(g->n);
    size_t in = g->f8 ? 1 : 2, os = type_size(g->out_type);
    g->a_bytes = (uint32_t)(((g->m - 1) * g->lda + g->k) * in);
    g->b_bytes = (uint32_t)(((g->k - 1) * g->ldb + g->n) * in);
    g->c_bytes = (uint32_t)(((g->m - 1) * g->ldc + g->n) * os);
    g->A = malloc(g->a_bytes), g->B = malloc(g->b_bytes);
    g->cin = malloc(g->c_bytes), g->cout = malloc(g->c_bytes);
    assert_true(g->A && g->B && g->cin && g->cout);
    gen_rows(g->ta, g->A, g->m, g->k, g->lda);
    gen_rows(g->tb, g->B, g->k, g->n, g->ldb);
    /* C: guard bytes, and codes in the elements when accumulating. */
    int acc = (g->flags & IPU_GEMM_ACCUMULATE) != 0, wide = (g->flags & IPU_GEMM_WIDE) != 0;
    memset(g->cin, GUARD, g->c_bytes);
    for (uint32_t i = 0; acc && i < g->m; i++)
        gen_codes(g->out_type, g->cin + (size_t)i * g->ldc * os, g->n);
    uint32_t align = wide ? 16 : 8;
    g->a = (wide || tseed_below(2) ? IN1 : IN0) + align * tseed_below(64);
    g->b = align_up(g->a + g->a_bytes, align) + align * tseed_below(4);
    g->c = (tseed_below(2) ? OUT1 : OUT0) + 64 + 8 * tseed_below(64);
    uint32_t w16[] = {g->a, g->b, g->c, g->m, g->n, g->k, (uint32_t)g->out_type, g->flags,
                      g->lda, g->ldb, g->ldc};
    uint32_t w8[] = {g->a, g->b, g->c, g->m, g->n, g->k, (uint32_t)g->ta | (uint32_t)g->tb << 8,
                     (uint32_t)(uint8_t)(int8_t)g->sa | (uint32_t)(uint8_t)(int8_t)g->sb << 8,
                     (uint32_t)g->out_type, g->flags, g->lda, g->ldb, g->ldc};
    job->k.entry = g->f8 ? IPU_K_GEMM_F8 : IPU_K_GEMM_F16;
    job->k.argc = g->f8 ? 13 : 11;
    memcpy(job->k.args, g->f8 ? w8 : w16, job->k.argc * 4);
    job_data(job, g->a, g->A, g->a_bytes);
    job_data(job, g->b, g->B, g->b_bytes);
    /* C is written first when accumulating, or to put guard bytes in its gaps;
     * otherwise it is never written before the call (no read is declared). */
    if (acc || (g->ldc > g->n && g->m > 1))
        job_data(job, g->c, g->cin, g->c_bytes);
    static uint8_t guard[32];
    memset(guard, GUARD, sizeof guard);
    job_data(job, g->c - 32, guard, 32);
    job_data(job, g->c + g->c_bytes, guard, 32);
    job_read(job, g->c, g->cout, g->c_bytes);
    job_read(job, g->c - 32, job->lo, 32);
    job_read(job, g->c + g->c_bytes, job->hi, 32);
}

static void gemm_check(const gcase *g, const tjob *job, int index)
{
    const char *name = g->f8 ? "gemm_f8" : "gemm_f16";
    size_t in = g->f8 ? 1 : 2, os = type_size(g->out_type);
    int acc = (g->flags & IPU_GEMM_ACCUMULATE) != 0;
    for (int i = 0; i < 32; i++)
        if (job->lo[i] != GUARD || job->hi[i] != GUARD)
            TSEED_FAIL("%s case %d: guard byte %d around C was overwritten", name, index, i);
    for (uint32_t i = 0; i + 1 < g->m; i++)
        for (size_t b = (i * g->ldc + g->n) * os; b < (i + 1) * g->ldc * os; b++)
            if (g->cout[b] != GUARD)
                TSEED_FAIL("%s case %d: %ux%ux%u ldc %u: gap byte %zu after C row %u is 0x%02X", name,
                           index, g->m, g->n, g->k, g->ldc, b, i, g->cout[b]);
    for (uint32_t i = 0; i < g->m; i++)
        for (uint32_t j = 0; j < g->n; j++) {
            size_t at = ((size_t)i * g->ldc + j) * os;
            double s = acc ? decode(g->out_type, 0, g->cin + at) : 0, mag = fabs(s);
            for (uint32_t l = 0; l < g->k; l++) {
                double pr = decode(g->ta, g->sa, g->A + ((size_t)i * g->lda + l) * in) *
                            decode(g->tb, g->sb, g->B + ((size_t)l * g->ldb + j) * in);
                s += pr, mag += fabs(pr);
            }
            double got = decode(g->out_type, 0, g->cout + at);
            double tol = 1e-5 * mag + (g->out_type == IPU_DT_F16 ? f16_ulp(s) : 0.0);
            if (!(fabs(got - s) <= tol))
                TSEED_FAIL("%s case %d: %ux%ux%u strides %u/%u/%u flags %u types %d/%d scales %d/%d "
                           "out %s: C[%u][%u] = %.9g, exact %.9g, tolerance %.3g",
                           name, index, g->m, g->n, g->k, g->lda, g->ldb, g->ldc, g->flags, g->ta,
                           g->tb, g->sa, g->sb, ipu_dtype_name(g->out_type), i, j, got, s, tol);
        }
    uint64_t rate = g->f8 ? 128 : g->out_type == IPU_DT_F16 ? 64 : 32;
    uint64_t want = 50 + ((uint64_t)g->m * g->n * g->k + rate - 1) / rate + 4ull * g->m;
    if (job->compute != want)
        TSEED_FAIL("%s case %d: %ux%ux%u out %s: %llu cycles, formula %llu", name, index, g->m, g->n,
                   g->k, ipu_dtype_name(g->out_type), (unsigned long long)job->compute,
                   (unsigned long long)want);
}

static void gemm_family(int f8, uint64_t salt)
{
    int res[3][8] = {{0}}, flag_on[2] = {0, 0}, flag_off[2] = {0, 0}, region[2] = {0, 0};
    int c_region[2] = {0, 0}, gaps[3] = {0, 0, 0}, out16 = 0;
    tseed_reset(salt);
    for (int first = 0; first < CASES; first += (int)TILES) {
        tjob jobs[TILES];
        gcase cases[TILES];
        memset(jobs, 0, sizeof jobs);
        memset(cases, 0, sizeof cases);
        for (uint32_t t = 0; t < TILES; t++) {
            gcase *g = &cases[t];
            g->f8 = f8;
            gemm_case(g, &jobs[t], first + (int)t);
            res[0][g->m % 8]++, res[1][g->n % 8]++, res[2][g->k % 8]++;
            for (int f = 0; f < 2; f++)
                (g->flags >> f & 1 ? flag_on : flag_off)[f]++;
            region[g->a >= IN1]++, c_region[g->c >= IN1]++, out16 += g->out_type == IPU_DT_F16;
            gaps[0] += g->lda > g->k && g->m > 1, gaps[1] += g->ldb > g->n && g->k > 1;
            gaps[2] += g->ldc > g->n && g->m > 1;
        }
        run_jobs(jobs, TILES, NULL);
        for (uint32_t t = 0; t < TILES; t++) {
            gemm_check(&cases[t], &jobs[t], first + (int)t);
            free(cases[t].A), free(cases[t].B), free(cases[t].cin), free(cases[t].cout);
        }
    }
    /* The draw covered what the file promises. */
    for (int d = 0; d < 3; d++)
        for (int r = 0; r < 8; r++)
            if (!res[d][r])
                TSEED_FAIL("residue %d mod 8 of %c never drawn", r, "mnk"[d]);
    for (int f = 0; f < 2; f++)
        if (!flag_on[f] || !flag_off[f])
            TSEED_FAIL("flag bit %d not drawn both ways", f);
    if (!region[0] || !region[1] || !c_region[0] || !c_region[1])
        TSEED_FAIL("operands not placed in both regions");
    if (!gaps[0] || !gaps[1] || !gaps[2] || !out16 || out16 == CASES)
        TSEED_FAIL("strided operands or both output types not drawn");
}

static void test_gemm_f16(void **state) { (void)state; gemm_family(0, 1); }
static void test_gemm_f8(void **state) { (void)state; gemm_family(1, 2); }

/* 128-bit operand loads: A or B in region 0, or only 8 B aligned in region 1,
 * fault as misaligned on that operand (the device stops at the first). */
static void test_gemm_wide_rules(void **state)
{
    (void)state;
    tseed_reset(3);
    static const struct {
        uint32_t a, b;
        int on_b;
    } cases[] = {{IN0, IN1 + 0x8000, 0}, {IN1 + 8, IN1 + 0x8000, 0}, {IN1, IN0, 1}, {IN1, IN1 + 0x8008, 1}};
    for (int f8 = 0; f8 < 2; f8++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            gcase g;
            tjob job;
            memset(&g, 0, sizeof g);
            memset(&job, 0, sizeof job);
            g.f8 = f8;
            gemm_case(&g, &job, (int)c);
            g.flags |= IPU_GEMM_WIDE;
            job.k.args[0] = cases[c].a, job.k.args[1] = cases[c].b;
            job.k.args[f8 ? 9 : 7] = g.flags;
            job.data[0].address = cases[c].a, job.data[1].address = cases[c].b;
            json_t *fault = NULL;
            assert_int_equal(run_jobs(&job, 1, &fault), IPU_ERR_DEVICE_FAULT);
            uint32_t lo = cases[c].on_b ? cases[c].b : cases[c].a;
            TPKG_EXPECT_FAULT(fault, "misaligned", 0, lo, lo + (cases[c].on_b ? g.b_bytes : g.a_bytes));
            assert_string_equal(tpkg_fault_str(fault, "kernel"), f8 ? "gemm_f8" : "gemm_f16");
            json_decref(fault);
            free(g.A), free(g.B), free(g.cin), free(g.cout);
        }
}

int main(void)
{
    tseed_init("test_kernels_gemm");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_f16),
        cmocka_unit_test(test_gemm_f8),
        cmocka_unit_test(test_gemm_wide_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
