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
 * double from the test decoders of the formats (support_kernels.h, DEVICE.md).
 * Tolerances: f32 output within 1e-5 (sum |a b| + |c|) of the exact value
 * (FP32 accumulation over k <= 63 terms errs by at most 64 * 2^-24 < 4e-6 of
 * that sum, plus the final rounding); f16 output within one f16 ulp of the
 * exact value plus that.  Each tile's compute must be DEVICE.md's formula
 * 50 + ceil(m n k / rate) + 4 m (rate 128 FP8, 64 FP16 -> f16, 32 FP16 -> f32),
 * whatever the strides and regions.  128-bit operands in region 0 or only
 * 8 B aligned fault as misaligned on that operand.  The runs, guard bytes and
 * format helpers are support_kernels.h's; test_kernels_device.c runs a
 * smaller set through host streams.
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

#include "support_kernels.h"
#include "support_packages.h"
#include "support_seed.h"

#define CASES 256

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

static void gemm_case(gcase *g, tk_job *job, int index)
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
    size_t in = g->f8 ? 1 : 2, os = tk_size(g->out_type);
    g->a_bytes = (uint32_t)(((g->m - 1) * g->lda + g->k) * in);
    g->b_bytes = (uint32_t)(((g->k - 1) * g->ldb + g->n) * in);
    g->c_bytes = (uint32_t)(((g->m - 1) * g->ldc + g->n) * os);
    g->A = malloc(g->a_bytes), g->B = malloc(g->b_bytes);
    g->cin = malloc(g->c_bytes), g->cout = malloc(g->c_bytes);
    assert_true(g->A && g->B && g->cin && g->cout);
    tk_rows(g->ta, 0, g->A, g->m, g->k, g->lda); /* NaN codes in the gaps */
    tk_rows(g->tb, 0, g->B, g->k, g->n, g->ldb);
    /* C: guard bytes, and codes in the elements when accumulating. */
    int acc = (g->flags & IPU_GEMM_ACCUMULATE) != 0, wide = (g->flags & IPU_GEMM_WIDE) != 0;
    memset(g->cin, TK_GUARD, g->c_bytes);
    for (uint32_t i = 0; acc && i < g->m; i++)
        tk_codes(g->out_type, 0, g->cin + (size_t)i * g->ldc * os, g->n);
    uint32_t align = wide ? 16 : 8;
    g->a = (wide || tseed_below(2) ? TK_IN1 : TK_IN0) + align * tseed_below(64);
    g->b = tk_align_up(g->a + g->a_bytes, align) + align * tseed_below(4);
    g->c = (tseed_below(2) ? TK_OUT1 : TK_OUT0) + 64 + 8 * tseed_below(64);
    uint32_t w16[] = {g->a, g->b, g->c, g->m, g->n, g->k, (uint32_t)g->out_type, g->flags,
                      g->lda, g->ldb, g->ldc};
    uint32_t w8[] = {g->a, g->b, g->c, g->m, g->n, g->k, (uint32_t)g->ta | (uint32_t)g->tb << 8,
                     (uint32_t)(uint8_t)(int8_t)g->sa | (uint32_t)(uint8_t)(int8_t)g->sb << 8,
                     (uint32_t)g->out_type, g->flags, g->lda, g->ldb, g->ldc};
    tk_kernel(job, g->f8 ? IPU_K_GEMM_F8 : IPU_K_GEMM_F16, g->f8 ? 13 : 11, g->f8 ? w8 : w16);
    tk_data(job, g->a, g->A, g->a_bytes);
    tk_data(job, g->b, g->B, g->b_bytes);
    /* C is written first when accumulating, or to put guard bytes in its gaps;
     * otherwise it is never written before the call (no read is declared). */
    if (acc || (g->ldc > g->n && g->m > 1))
        tk_data(job, g->c, g->cin, g->c_bytes);
    tk_read(job, g->c, g->cout, g->c_bytes);
    tk_guards(job, g->c, g->c_bytes);
}

static void gemm_check(const gcase *g, const tk_job *job, int index)
{
    const char *name = g->f8 ? "gemm_f8" : "gemm_f16";
    size_t os = tk_size(g->out_type);
    int acc = (g->flags & IPU_GEMM_ACCUMULATE) != 0;
    tk_check_guards(job, name, index);
    tk_expect_row_gaps(g->cout, g->m, g->n, g->ldc, os, "%s case %d: %ux%ux%u ldc %u: C", name,
                       index, g->m, g->n, g->k, g->ldc);
    tk_matrix a = {g->ta, g->sa, g->A, g->lda}, b = {g->tb, g->sb, g->B, g->ldb};
    for (uint32_t i = 0; i < g->m; i++)
        for (uint32_t j = 0; j < g->n; j++) {
            size_t at = (size_t)i * g->ldc + j;
            double mag, s = tk_dot(a, b, i, j, g->k, acc ? tk_decode_at(g->out_type, 0, g->cin, at) : 0, &mag);
            double got = tk_decode_at(g->out_type, 0, g->cout, at), tol = tk_gemm_tol(g->out_type, s, mag);
            if (!(fabs(got - s) <= tol))
                TSEED_FAIL("%s case %d: %ux%ux%u strides %u/%u/%u flags %u types %d/%d scales %d/%d "
                           "out %s: C[%u][%u] = %.9g, exact %.9g, tolerance %.3g",
                           name, index, g->m, g->n, g->k, g->lda, g->ldb, g->ldc, g->flags, g->ta,
                           g->tb, g->sa, g->sb, ipu_dtype_name(g->out_type), i, j, got, s, tol);
        }
    uint64_t want = tk_gemm_cycles(g->f8, g->m, g->n, g->k, g->out_type);
    if (job->compute != want)
        TSEED_FAIL("%s case %d: %ux%ux%u out %s: %llu cycles, formula %llu", name, index, g->m, g->n,
                   g->k, ipu_dtype_name(g->out_type), (unsigned long long)job->compute,
                   (unsigned long long)want);
}

/* A family's sweep: the cases of the package being run and what the draw covered. */
typedef struct gsweep {
    int f8;
    gcase cases[TK_TILES];
    int res[3][8], flag_on[2], flag_off[2], region[2], c_region[2], gaps[3], out16;
} gsweep;

static void gemm_make(void *sweep, tk_job *job, uint32_t index)
{
    gsweep *S = sweep;
    gcase *g = &S->cases[index % TK_TILES];
    memset(g, 0, sizeof *g);
    g->f8 = S->f8;
    gemm_case(g, job, (int)index);
    S->res[0][g->m % 8]++, S->res[1][g->n % 8]++, S->res[2][g->k % 8]++;
    tk_count_flags(g->flags, 2, S->flag_on, S->flag_off);
    S->region[g->a >= TK_IN1]++, S->c_region[g->c >= TK_IN1]++;
    S->out16 += g->out_type == IPU_DT_F16;
    S->gaps[0] += g->lda > g->k && g->m > 1, S->gaps[1] += g->ldb > g->n && g->k > 1;
    S->gaps[2] += g->ldc > g->n && g->m > 1;
}

static void gemm_sweep_check(void *sweep, const tk_job *job, uint32_t index)
{
    gcase *g = &((gsweep *)sweep)->cases[index % TK_TILES];
    gemm_check(g, job, (int)index);
    free(g->A), free(g->B), free(g->cin), free(g->cout);
}

static void gemm_family(int f8, uint64_t salt)
{
    gsweep S;
    memset(&S, 0, sizeof S);
    S.f8 = f8;
    tseed_reset(salt);
    tk_sweep(CASES, &S, gemm_make, gemm_sweep_check);
    /* The draw covered what the file promises. */
    for (int d = 0; d < 3; d++)
        for (int r = 0; r < 8; r++)
            if (!S.res[d][r])
                TSEED_FAIL("residue %d mod 8 of %c never drawn", r, "mnk"[d]);
    tk_expect_flags(S.flag_on, S.flag_off, 2, "");
    if (!S.region[0] || !S.region[1] || !S.c_region[0] || !S.c_region[1])
        TSEED_FAIL("operands not placed in both regions");
    if (!S.gaps[0] || !S.gaps[1] || !S.gaps[2] || !S.out16 || S.out16 == CASES)
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
    } cases[] = {{TK_IN0, TK_IN1 + 0x8000, 0},
                 {TK_IN1 + 8, TK_IN1 + 0x8000, 0},
                 {TK_IN1, TK_IN0, 1},
                 {TK_IN1, TK_IN1 + 0x8008, 1}};
    for (int f8 = 0; f8 < 2; f8++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            gcase g;
            tk_job job;
            memset(&g, 0, sizeof g);
            memset(&job, 0, sizeof job);
            g.f8 = f8;
            gemm_case(&g, &job, (int)c);
            g.flags |= IPU_GEMM_WIDE;
            job.k[0].args[0] = cases[c].a, job.k[0].args[1] = cases[c].b;
            job.k[0].args[f8 ? 9 : 7] = g.flags;
            job.data[0].address = cases[c].a, job.data[1].address = cases[c].b;
            json_t *fault = NULL;
            assert_int_equal(tk_run(&job, 1, &fault), IPU_ERR_DEVICE_FAULT);
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
