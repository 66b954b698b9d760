/* test_kernels_norm.c: the normalization family (LAYERNORM) on the simulated
 * device.  Hand-built 16-tile packages (support_kernels.h) run one
 * LayerNorm call per tile in a single step, operands loaded as package data
 * and read back with ipu_device_read.  240 seeded random shapes: rows 1..40,
 * cols 1..300 covering every residue mod 8, row strides of cols plus 0..16,
 * f16 and f32 rows with f16 or f32 gamma/beta, every operand in region 0 or
 * region 1 (both regions for src and for dst, by construction), some calls in
 * place (dst == src), some rows constant (variance 0, where the output must
 * be beta rounded to the row type, exactly), gap elements of src holding NaN
 * codes a read would spread, and guard bytes around dst and in its row gaps
 * that must stay untouched.  The reference is computed here in double from
 * the decoded inputs: m = mean, v = mean of squared deviations (divide by
 * cols), z = (x - m) / sqrt(v + eps), y = z * gamma + beta.  Tolerances
 * (derived from the kernel's FP32 statistics: the FP32 mean alone moves every
 * z by up to 2^-24 |m| / sqrt(v + eps), the FP32 operations after it add a
 * few 2^-24 relative to |z gamma| and |y|; the bound below keeps a factor of
 * two or more over that): f32 rows |got - y| <= 2^-20 (|gamma| (|z| + |m| /
 * sqrt(v + eps)) + |y|) + 2^-126; f16 rows the same plus one f16 ulp of y.
 * The tile's compute cycles must equal the formula computed here from
 * DEVICE.md's vector rate (one 64-bit operation, two FP32 lanes, per cycle):
 * 10 + rows * (16 + 3 * ceil(cols / 2)).  One package runs again with
 * another thread count and must give identical bytes.  Malformed arguments
 * (cols 0, rows 0, a stride below cols, an FP8 row or parameter type, a
 * negative, NaN or infinite epsilon) fault as malformed_descriptor on the
 * descriptor; a misaligned gamma, src row gaps never written and a dst past
 * the accessible SRAM fault as misaligned, uninitialized_read, out_of_bounds.
 * The seed comes from IPU_TEST_SEED or the clock and is printed on failure.
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

#define PACKAGES 15 /* one case per tile: 240 cases */
#define PAD TK_PAD /* guard bytes on each side of every operand */

/* ---- running one call per tile --------------------------------------------- */
typedef struct ln_case {
    uint32_t rows, cols, sstride, dstride, type, ptype, eps_bits;
    int inplace, src_r1, dst_r1;
    uint32_t src, dst, gamma, beta; /* addresses */
    uint8_t *src_bytes, *gamma_bytes, *beta_bytes;
    /* [dst - PAD, dst + dst extent + PAD): what was there before and after. */
    uint8_t *before, *after;
    uint32_t window;
    uint8_t *constant; /* per row: 1 when the row is constant */
} ln_case;

static size_t tsize(uint32_t t) { return t == IPU_DT_F32 ? 4 : 2; }
static uint32_t extent(uint32_t rows, uint32_t cols, uint32_t stride, uint32_t t)
{
    return ((rows - 1) * stride + cols) * (uint32_t)tsize(t);
}

static tpkg_kernel ln_kernel(const ln_case *c)
{
    tpkg_kernel k;
    memset(&k, 0, sizeof k);
    uint32_t args[] = {c->src, c->dst, c->gamma, c->beta, c->rows, c->cols, c->sstride,
                       c->dstride, c->type, c->ptype, c->eps_bits};
    k.entry = IPU_K_LAYERNORM, k.argc = 11;
    memcpy(k.args, args, sizeof args);
    return k;
}

/* Run the cases (case i on tile i) in one step with the given thread count;
 * fills each case's after window and compute[i] with the tile's cycles. */
static void run_cases(ln_case *cases, uint32_t n, int threads, uint64_t *compute)
{
    tk_job jobs[TK_TILES];
    memset(jobs, 0, sizeof jobs);
    for (uint32_t t = 0; t < n; t++) {
        ln_case *c = &cases[t];
        tpkg_kernel k = ln_kernel(c);
        tk_kernel(&jobs[t], k.entry, k.argc, k.args);
        uint32_t pbytes = c->cols * (uint32_t)tsize(c->ptype);
        tk_data(&jobs[t], c->dst - PAD, c->before, c->window);
        if (!c->inplace)
            tk_data(&jobs[t], c->src, c->src_bytes, extent(c->rows, c->cols, c->sstride, c->type));
        tk_data(&jobs[t], c->gamma, c->gamma_bytes, pbytes);
        tk_data(&jobs[t], c->beta, c->beta_bytes, pbytes);
        tk_read(&jobs[t], c->dst - PAD, c->after, c->window);
    }
    tk_run_on(TK_TILES, threads, jobs, n, NULL);
    for (uint32_t t = 0; t < n; t++)
        compute[t] = jobs[t].compute;
}

/* ---- case generation --------------------------------------------------------- */
static double uniform(void) { return (double)tseed_below(1u << 24) / (1u << 24) * 2.0 - 1.0; }

static void put_value(uint32_t type, uint8_t *dst, double v)
{
    float f = (float)v;
    ipu_num_encode((int)type, 0, &f, dst, 1);
}

static double get_value(uint32_t type, const uint8_t *src)
{
    float f;
    ipu_num_decode((int)type, 0, src, &f, 1);
    return f;
}

/* The arena's bump allocation, 8-byte aligned with a random gap, in region
 * 1 when region 0 is full. */
static uint32_t place(tk_arena *a, int *r1, uint32_t bytes)
{
    uint32_t need = bytes + 2 * PAD + 8 * 16;
    if (!*r1 && a->next[0] + need > a->end[0])
        *r1 = 1;
    return tk_place(a, *r1, bytes, 8);
}

static void make_case(ln_case *c, uint32_t index, const ipu_profile *p)
{
    static const float eps[] = {1e-5f, 1e-6f, 1e-12f, 1e-3f};
    memset(c, 0, sizeof *c);
    uint32_t residue = index % 8;
    c->cols = residue + 8 * tseed_below(37);
    if (c->cols == 0 || c->cols > 300)
        c->cols = residue ? residue : 8;
    if (index == 8)
        c->cols = 300;
    if (index == 1 || index == 9) /* f16 and f32 */
        c->cols = 1;
    c->rows = tseed_below(4) ? 1 + tseed_below(40) : 1 + tseed_below(3);
    c->type = (index / 8) % 2 ? IPU_DT_F32 : IPU_DT_F16;
    c->ptype = tseed_below(2) ? IPU_DT_F32 : IPU_DT_F16;
    c->src_r1 = (index / 16) % 2, c->dst_r1 = (index / 32) % 2;
    c->sstride = c->cols + (tseed_below(3) ? tseed_below(17) : 0);
    c->dstride = c->cols + (tseed_below(3) ? tseed_below(17) : 0);
    c->inplace = tseed_below(6) == 0;
    if (c->inplace)
        c->dstride = c->sstride, c->dst_r1 = c->src_r1;
    memcpy(&c->eps_bits, &eps[tseed_below(4)], 4);
    tk_arena a = tk_arena_of(p);
    size_t sz = tsize(c->type), psz = tsize(c->ptype);
    uint32_t sbytes = extent(c->rows, c->cols, c->sstride, c->type);
    uint32_t dbytes = extent(c->rows, c->cols, c->dstride, c->type);
    c->src = place(&a, &c->src_r1, sbytes);
    c->dst = c->inplace ? c->src : place(&a, &c->dst_r1, dbytes);
    int gr = (int)tseed_below(2), br = (int)tseed_below(2);
    c->gamma = place(&a, &gr, c->cols * (uint32_t)psz);
    c->beta = place(&a, &br, c->cols * (uint32_t)psz);
    /* Rows: offset + scale * uniform, or constant. */
    c->src_bytes = malloc(sbytes);
    c->constant = calloc(c->rows, 1);
    assert_true(c->src_bytes && c->constant);
    memset(c->src_bytes, TK_NAN_BYTE, sbytes); /* NaN in f16 and f32 */
    for (uint32_t r = 0; r < c->rows; r++) {
        double offset = tseed_below(3) ? uniform() * (tseed_below(2) ? 100.0 : 2.0) : 0.0;
        double scale = ldexp(1.0, (int)tseed_below(15) - 8);
        c->constant[r] = tseed_below(10) == 0;
        for (uint32_t i = 0; i < c->cols; i++)
            put_value(c->type, c->src_bytes + ((size_t)r * c->sstride + i) * sz,
                      c->constant[r] ? offset : offset + scale * uniform());
    }
    c->gamma_bytes = malloc(c->cols * psz), c->beta_bytes = malloc(c->cols * psz);
    assert_true(c->gamma_bytes && c->beta_bytes);
    int unit = tseed_below(4) == 0; /* gamma 1, beta 0 */
    for (uint32_t i = 0; i < c->cols; i++) {
        put_value(c->ptype, c->gamma_bytes + i * psz, unit ? 1.0 : 2.0 * uniform());
        put_value(c->ptype, c->beta_bytes + i * psz, unit ? 0.0 : uniform());
    }
    /* The dst window: guards, with src's bytes in it when in place. */
    c->window = dbytes + 2 * PAD;
    c->before = malloc(c->window), c->after = malloc(c->window);
    assert_true(c->before && c->after);
    memset(c->before, TK_GUARD, c->window);
    if (c->inplace)
        memcpy(c->before + PAD, c->src_bytes, sbytes);
}

static void free_case(ln_case *c)
{
    free(c->src_bytes), free(c->gamma_bytes), free(c->beta_bytes);
    free(c->before), free(c->after), free(c->constant);
}

/* ---- the reference ------------------------------------------------------------- */
static uint64_t formula_cycles(const ln_case *c)
{
    /* 8 bytes per vector cycle: two FP32 lanes. */
    return 10 + (uint64_t)c->rows * (16 + 3 * (((uint64_t)c->cols * 4 + 7) / 8));
}

static const char *region(int r1) { return r1 ? "r1" : "r0"; }

static void check_case(const ln_case *c, uint32_t index, uint64_t compute)
{
    size_t sz = tsize(c->type), psz = tsize(c->ptype);
    float eps_f;
    memcpy(&eps_f, &c->eps_bits, 4);
    char what[200];
    snprintf(what, sizeof what,
             "case %u: %ux%u strides %u/%u %s params %s eps %g src %s 0x%X dst %s 0x%X%s", index,
             c->rows, c->cols, c->sstride, c->dstride, ipu_dtype_name((int)c->type),
             ipu_dtype_name((int)c->ptype), (double)eps_f, region(c->src_r1), c->src,
             region(c->dst_r1), c->dst, c->inplace ? " in place" : "");
    uint64_t want = formula_cycles(c);
    if (compute != want)
        TSEED_FAIL("%s: tile compute %llu cycles, formula %llu", what, (unsigned long long)compute,
                   (unsigned long long)want);
    /* Bytes outside the row elements are what they were. */
    for (uint32_t b = 0; b < c->window; b++) {
        int element = 0;
        if (b >= PAD && b < c->window - PAD) {
            uint32_t e = (b - PAD) / (uint32_t)sz;
            element = e % c->dstride < c->cols;
        }
        if (!element && c->after[b] != c->before[b])
            TSEED_FAIL("%s: byte %d from dst changed from 0x%02X to 0x%02X", what,
                       (int)b - (int)PAD, c->before[b], c->after[b]);
    }
    double *x = malloc(c->cols * sizeof *x);
    assert_non_null(x);
    for (uint32_t r = 0; r < c->rows; r++) {
        double m = 0, v = 0;
        for (uint32_t i = 0; i < c->cols; i++) {
            x[i] = get_value(c->type, c->src_bytes + ((size_t)r * c->sstride + i) * sz);
            m += x[i];
        }
        m /= c->cols;
        for (uint32_t i = 0; i < c->cols; i++)
            v += (x[i] - m) * (x[i] - m);
        v /= c->cols;
        double rs = 1.0 / sqrt(v + (double)eps_f);
        for (uint32_t i = 0; i < c->cols; i++) {
            double g = get_value(c->ptype, c->gamma_bytes + i * psz);
            double be = get_value(c->ptype, c->beta_bytes + i * psz);
            double z = (x[i] - m) * rs, y = z * g + be;
            double got = get_value(c->type, c->after + PAD + ((size_t)r * c->dstride + i) * sz);
            double tol = 0x1p-20 * (fabs(g) * (fabs(z) + fabs(m) * rs) + fabs(y)) + 0x1p-126;
            if (c->type == IPU_DT_F16)
                tol += tk_f16_ulp(y);
            if (!(fabs(got - y) <= tol))
                TSEED_FAIL("%s: y[%u][%u] = %.9g, reference %.9g (x %.9g mean %.9g var %.9g "
                           "gamma %.9g beta %.9g), tolerance %.3g",
                           what, r, i, got, y, x[i], m, v, g, be, tol);
            if (c->constant[r]) {
                uint8_t bits[4];
                put_value(c->type, bits, be);
                if (got != get_value(c->type, bits))
                    TSEED_FAIL("%s: constant row %u element %u gave %.9g, want beta %.9g", what,
                               r, i, got, get_value(c->type, bits));
            }
        }
    }
    free(x);
}

/* ---- the sweep ------------------------------------------------------------------ */
static void test_layernorm_sweep(void **state)
{
    (void)state;
    ipu_profile p;
    tk_profile(TK_TILES, &p);
    assert_int_equal(p.vector_bytes_per_cycle, 8); /* the formula below assumes DEVICE.md's rate */
    tseed_reset(1);
    /* Coverage by construction: residue, type, src region, dst region. */
    int seen[8][2][2][2] = {{{{0}}}};
    int constant_rows = 0, inplace = 0;
    for (uint32_t pk = 0; pk < PACKAGES; pk++) {
        ln_case cases[TK_TILES];
        uint64_t compute[TK_TILES];
        for (uint32_t t = 0; t < TK_TILES; t++)
            make_case(&cases[t], pk * TK_TILES + t, &p);
        run_cases(cases, TK_TILES, pk % 2 ? 1 : 3, compute);
        for (uint32_t t = 0; t < TK_TILES; t++) {
            ln_case *c = &cases[t];
            check_case(c, pk * TK_TILES + t, compute[t]);
            seen[c->cols % 8][c->type == IPU_DT_F32][c->src_r1][c->dst_r1]++;
            inplace += c->inplace;
            for (uint32_t r = 0; r < c->rows; r++)
                constant_rows += c->constant[r];
        }
        if (pk == 0) { /* the same package with another thread count: identical bytes */
            uint8_t *first[TK_TILES];
            for (uint32_t t = 0; t < TK_TILES; t++) {
                first[t] = malloc(cases[t].window);
                assert_non_null(first[t]);
                memcpy(first[t], cases[t].after, cases[t].window);
            }
            run_cases(cases, TK_TILES, 2, compute);
            for (uint32_t t = 0; t < TK_TILES; t++) {
                if (memcmp(first[t], cases[t].after, cases[t].window) != 0)
                    TSEED_FAIL("case %u: output bytes differ between 3 threads and 2", t);
                free(first[t]);
            }
        }
        for (uint32_t t = 0; t < TK_TILES; t++)
            free_case(&cases[t]);
    }
    /* Every residue with each type, every type with each src and dst region. */
    for (int f = 0; f < 2; f++) {
        int by_residue[8] = {0}, by_regions[2][2] = {{0}};
        for (int r = 0; r < 8; r++)
            for (int s = 0; s < 2; s++)
                for (int d = 0; d < 2; d++)
                    by_residue[r] += seen[r][f][s][d], by_regions[s][d] += seen[r][f][s][d];
        for (int r = 0; r < 8; r++)
            if (!by_residue[r])
                TSEED_FAIL("no %s case with cols %% 8 = %d", f ? "f32" : "f16", r);
        for (int s = 0; s < 2; s++)
            for (int d = 0; d < 2; d++)
                if (!by_regions[s][d])
                    TSEED_FAIL("no %s case with src in region %d and dst in region %d",
                               f ? "f32" : "f16", s, d);
    }
    if (!constant_rows || !inplace)
        TSEED_FAIL("the sweep had %d constant rows and %d in-place calls", constant_rows, inplace);
}

/* ---- malformed arguments ------------------------------------------------------- */
static void test_layernorm_malformed(void **state)
{
    (void)state;
    enum { T = 3 };
    /* Argument index and the bad value. */
    static const struct {
        uint32_t arg, value;
        const char *detail;
    } bad[] = {
        {5, 0, "rows and cols"},          /* cols 0 */
        {4, 0, "rows and cols"},          /* rows 0 */
        {6, 7, "stride"},                 /* src stride below cols */
        {7, 3, "stride"},                 /* dst stride below cols */
        {8, IPU_DT_F143, "type"},         /* FP8 rows */
        {8, 9, "type"},                   /* unknown type */
        {9, IPU_DT_F152, "parameter type"},
        {10, 0xBF800000u, "epsilon"},     /* -1.0f */
        {10, 0x7FC00000u, "epsilon"},     /* NaN */
        {10, 0x7F800000u, "epsilon"},     /* +inf */
    };
    ipu_profile p;
    tk_profile(TK_TILES, &p);
    uint32_t src = tpkg_data0(&p);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ln_case c = {.rows = 4, .cols = 8, .sstride = 8, .dstride = 8, .type = IPU_DT_F16,
                     .ptype = IPU_DT_F32, .eps_bits = 0x3727C5ACu /* 1e-5f */, .src = src,
                     .dst = 0x90000u, .gamma = src + 0x100, .beta = src + 0x200};
        tpkg_kernel k = ln_kernel(&c);
        k.args[bad[i].arg] = bad[i].value;
        tk_job jobs[T + 1]; /* the call on tile T alone */
        memset(jobs, 0, sizeof jobs);
        tk_pattern(&jobs[T], src, 0x300, 7);
        tk_kernel(&jobs[T], k.entry, k.argc, k.args);
        json_t *fault = NULL;
        ipu_status st = tk_run(jobs, T + 1, &fault);
        if (st != IPU_ERR_DEVICE_FAULT)
            TSEED_FAIL("layernorm with argument %u = 0x%X: run returned %s, want a fault",
                       bad[i].arg, bad[i].value, ipu_status_name(st));
        TK_EXPECT_MALFORMED(fault, T, &jobs[T], "layernorm", bad[i].detail);
        json_decref(fault);
    }
}

/* Operands are checked before the body runs, with extents from the strides:
 * gamma at 4 mod 8 is misaligned; src whose row gaps were never written is
 * an uninitialized read of the first gap; dst whose last row runs past the
 * accessible SRAM is out of bounds. */
static void test_layernorm_operands(void **state)
{
    (void)state;
    enum { T = 1, ROWS = 3, COLS = 5, STRIDE = 9 };
    ipu_profile p;
    tk_profile(TK_TILES, &p);
    uint32_t src = tpkg_data0(&p), end = ipu_profile_access_end(&p);
    for (int which = 0; which < 3; which++) {
        ln_case c = {.rows = ROWS, .cols = COLS, .sstride = STRIDE, .dstride = STRIDE,
                     .type = IPU_DT_F32, .ptype = IPU_DT_F32, .eps_bits = 0x3727C5ACu, .src = src,
                     .dst = 0x90000u, .gamma = src + 0x100, .beta = src + 0x200};
        const char *kind = "misaligned";
        uint32_t lo = src + 0x104, hi = lo + 4 * COLS;
        if (which == 0) {
            c.gamma = lo;
        } else if (which == 1) {
            kind = "uninitialized_read", lo = src + 4 * COLS, hi = src + 4 * STRIDE;
        } else {
            kind = "out_of_bounds", c.dst = (end - 4 * (2 * STRIDE + COLS) + 8) & ~7u;
            lo = c.dst, hi = c.dst + 4 * (2 * STRIDE + COLS);
        }
        tk_job jobs[T + 1]; /* the call on tile T alone */
        memset(jobs, 0, sizeof jobs);
        if (which == 1) {
            for (uint32_t r = 0; r < ROWS; r++) /* the rows, not their gaps */
                tk_pattern(&jobs[T], src + 4 * STRIDE * r, 4 * COLS, r);
            tk_pattern(&jobs[T], src + 0x100, 0x200, 5);
        } else {
            tk_pattern(&jobs[T], src, 0x300, 3);
        }
        tpkg_kernel k = ln_kernel(&c);
        tk_kernel(&jobs[T], k.entry, k.argc, k.args);
        json_t *fault = NULL;
        assert_int_equal(tk_run(jobs, T + 1, &fault), IPU_ERR_DEVICE_FAULT);
        TPKG_EXPECT_FAULT(fault, kind, T, lo, hi);
        json_decref(fault);
    }
}

int main(void)
{
    tseed_init("test_kernels_norm");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm_sweep),
        cmocka_unit_test(test_layernorm_malformed),
        cmocka_unit_test(test_layernorm_operands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
