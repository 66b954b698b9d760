/* test_kernels_attention.c: the attention family (SOFTMAX, ATTN_SCORES,
 * ATTN_BLOCK, ATTN_FINISH; GEMM_F16 for P V) on the simulated device in
 * hand-built one-step packages (operands as package data, results read with
 * ipu_device_read), against double-precision references computed here from
 * this file's own FP16 codec, with the error bounds stated at each check:
 * (1) 208 random softmax shapes (cols of every residue mod 8, valid counts,
 * strides, f32/f16 in and out, both memory regions, in place, offsets that
 * overflow exp without the max subtraction; masked columns exactly +0, gaps
 * and guards untouched); (2) 64 random flash runs of 1..4 blocks of 1..64
 * keys with valid counts and NaN padding (m, l and the FINISH outputs), each
 * with ATTN_SCORES of its queries against the whole K buffer; (3) the
 * acceptance: 729 tokens, 16 heads x 72 on 64 tiles (4 query slices per
 * head), flash (11 blocks of 64 + a 25-key tail) and materialized (scores,
 * softmax to FP16, GEMM_F16 per 32 queries) against each other and a scalar
 * double attention: max abs error <= 2e-3 and cosine >= 0.99999 per row;
 * (4) MAP pooling: one probe per head over a padded 768-key K|V buffer (729
 * valid, NaN padding), flash and materialized, same bounds; (5) every tile's
 * charged compute equals the formulas computed here from DEVICE.md's rates,
 * the formula table's samples decode and cost the same, and malformed
 * arguments fault as malformed_descriptor.  The seed (IPU_TEST_SEED or the
 * clock) is printed on every failure.
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

#define R0 0x5C000u /* tpkg_data0 of the fixture profiles */
#define R1 0x80000u
#define R1_END 0xE7800u
#define ELEM 0x4000u
#define GUARD 0xA5u
#define F32 IPU_DT_F32
#define F16 IPU_DT_F16
#define SCALE72 0.11785113019775792 /* 1 / sqrt(72) */

static uint32_t align_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* ---- FP16 and FP32 from their definitions -------------------------------- */
static double h2d(uint16_t h)
{
    unsigned e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, (int)e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}
/* Round a finite |v| < 65504 to FP16, ties to even. */
static uint16_t d2h(double v)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    v = fabs(v);
    if (v == 0)
        return sign;
    int e;
    frexp(v, &e);
    int ex = e - 1 < -14 ? -14 : e - 1;
    double r = nearbyint(v / ldexp(1.0, ex - 10));
    if (ex == -14 && r < 1024)
        return sign | (uint16_t)r;
    if (r >= 2048)
        r /= 2, ex++;
    return sign | (uint16_t)((ex + 15) << 10) | (uint16_t)(r - 1024);
}
static double f16_ulp(double s)
{
    int e = 0;
    if (s != 0)
        frexp(fabs(s), &e);
    return ldexp(1.0, (s == 0 || e - 1 < -14 ? -14 : e - 1) - 10);
}
/* Element i of a buffer of type t, as a double. */
static double get(const uint8_t *b, int t, size_t i)
{
    if (t == F16)
        return h2d((uint16_t)(b[2 * i] | b[2 * i + 1] << 8));
    float f;
    memcpy(&f, b + 4 * i, 4);
    return f;
}
static void put(uint8_t *b, int t, size_t i, double v)
{
    uint16_t h = d2h(v);
    float f = (float)v;
    if (t == F16)
        b[2 * i] = (uint8_t)h, b[2 * i + 1] = (uint8_t)(h >> 8);
    else
        memcpy(b + 4 * i, &f, 4);
}
static size_t tsize(int t) { return t == F16 ? 2 : 4; }

static double urand(void) { return (double)(tseed_rnd() >> 11) * 0x1p-53; }
/* Roughly standard normal (sum of four uniforms). */
static double gauss(void)
{
    return (urand() + urand() + urand() + urand() - 2.0) * 1.7320508075688772;
}

/* A strided matrix buffer: NaN bytes (0xFF) everywhere, then rows x cols values. */
static uint8_t *matrix(int t, uint32_t rows, uint32_t cols, uint32_t ld, double amp, double off,
                       uint32_t *bytes)
{
    *bytes = (uint32_t)(((size_t)(rows - 1) * ld + cols) * tsize(t));
    uint8_t *m = malloc(*bytes);
    assert_non_null(m);
    memset(m, 0xFF, *bytes);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++)
            put(m, t, (size_t)r * ld + c, gauss() * amp + off);
    return m;
}

/* ---- cycle formulas from DEVICE.md (50-cycle AMP calls, 32 FP16->FP32 MACs,
 * 64 FP16->FP16 MACs, 8-byte vector ops: two FP32 lanes) ---------------------- */
static uint64_t v2(uint64_t n) { return (n + 1) / 2; }
static uint64_t amp(uint64_t macs, uint64_t rate) { return (macs + rate - 1) / rate; }
static uint64_t formula(const tpkg_kernel *k)
{
    const uint32_t *a = k->args;
    switch (k->entry) {
    case IPU_K_SOFTMAX: return 10 + (uint64_t)a[2] * (8 + 6 * v2(a[4]) + v2(a[3]));
    case IPU_K_ATTN_SCORES:
        return 50 + amp((uint64_t)a[3] * a[4] * a[5], 32) + 4ull * a[3] + (uint64_t)a[3] * v2(a[4]);
    case IPU_K_ATTN_BLOCK:
        return 50 + 2 * amp((uint64_t)a[4] * a[5] * a[7], 32) +
               (uint64_t)a[4] * (12 + 7 * v2(a[5]) + v2(a[7]));
    case IPU_K_ATTN_FINISH: return 10 + (uint64_t)a[2] * (8 + 2 * v2(a[3]));
    case IPU_K_GEMM_F16:
        return 50 + amp((uint64_t)a[3] * a[4] * a[5], a[6] == F16 ? 64 : 32) + 4ull * a[3];
    }
    fail_msg("no formula for entry %u", k->entry);
    return 0;
}

static tpkg_kernel make_kernel(uint32_t entry, const uint32_t *args, uint32_t argc)
{
    tpkg_kernel k = {.entry = entry, .argc = argc};
    memcpy(k.args, args, 4 * argc);
    return k;
}
#define KERNEL(entry, ...) \
    make_kernel((entry), (const uint32_t[]){__VA_ARGS__}, \
                (uint32_t)(sizeof((const uint32_t[]){__VA_ARGS__}) / 4))

/* ---- one-step packages ------------------------------------------------------ */
typedef struct bench {
    ipu_ctx *ctx;
    ipu_profile p;
    ipu_pkg_builder *b;
    uint32_t slot;
    ipu_package *pkg;
    ipu_device *dev;
    ipu_status run;
    json_t *report, *fault;
    uint64_t want[64]; /* per tile: the formulas of its list */
} bench;

static void bench_open(bench *B, uint32_t tiles)
{
    memset(B, 0, sizeof *B);
    B->ctx = ipu_ctx_create();
    assert_non_null(B->ctx);
    tpkg_profile(B->ctx, tiles, &B->p);
    assert_int_equal(tpkg_data0(&B->p), R0);
    B->b = tpkg_builder(B->ctx, &B->p);
    B->slot = ipu_pkg_new_slot(B->b);
}
static void bench_data(bench *B, uint32_t tile, uint32_t address, const void *bytes, uint32_t size)
{
    TPKG_OK(B->ctx, ipu_pkg_add_data(B->b, tile, address, bytes, size));
}
/* size bytes of one value at address. */
static void bench_fill(bench *B, uint32_t tile, uint32_t address, uint32_t size, uint8_t byte)
{
    uint8_t *bytes = malloc(size);
    assert_non_null(bytes);
    memset(bytes, byte, size);
    bench_data(B, tile, address, bytes, size);
    free(bytes);
}
static uint32_t bench_list(bench *B, uint32_t tile, const tpkg_kernel *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        B->want[tile] += formula(&k[i]);
    return tpkg_compute_list(B->b, tile, B->slot, k, n, 1);
}
static void bench_read(bench *B, uint32_t tile, uint32_t address, void *buf, uint32_t size)
{
    TSEED_OK(B->ctx, ipu_device_read(B->ctx, B->dev, tile, address, buf, size));
}
/* Build, initialize and run; the device stays open for reads.  With what
 * set, the run must succeed (else its fault is printed) and every tile's
 * charged compute must equal the formulas of its list. */
static ipu_status bench_run(bench *B, const char *what)
{
    TPKG_OK(B->ctx, ipu_pkg_emit(B->b, 0, IPU_OP_STEP, B->slot, IPU_NO_SLOT, 0));
    B->pkg = tpkg_build(B->ctx, B->b);
    B->b = NULL;
    B->dev = tpkg_device(B->ctx, B->pkg);
    TSEED_OK(B->ctx, ipu_device_initialize(B->ctx, B->dev, B->pkg));
    char *text = NULL;
    B->run = ipu_device_run(B->ctx, B->dev, &text);
    B->report = B->run == IPU_OK ? json_loads(text, 0, NULL) : NULL;
    ipu_free(text);
    B->fault = tpkg_fault(B->ctx, B->dev);
    if (!what)
        return B->run;
    if (B->run != IPU_OK) {
        char *f = json_dumps(B->fault, JSON_COMPACT);
        TSEED_FAIL("%s: run returned %s: %s", what, ipu_status_name(B->run), f ? f : "?");
    }
    json_t *compute = json_object_get(json_object_get(B->report, "tiles"), "compute");
    for (uint32_t t = 0; t < B->p.tiles; t++) {
        uint64_t got = (uint64_t)json_integer_value(json_array_get(compute, t));
        if (got != B->want[t])
            TSEED_FAIL("%s: tile %u charged %llu compute cycles, formulas give %llu", what, t,
                       (unsigned long long)got, (unsigned long long)B->want[t]);
    }
    return B->run;
}
/* An output's bytes (malloc'd), its guard bytes checked. */
static uint8_t *bench_output(bench *B, uint32_t tile, uint32_t address, uint32_t size,
                             const char *what)
{
    uint8_t *b = malloc(size + 64);
    assert_non_null(b);
    bench_read(B, tile, address - 32, b, size + 64);
    for (uint32_t i = 0; i < 64; i++) /* 32 bytes before the output, 32 after */
        if (b[i < 32 ? i : size + i] != GUARD)
            TSEED_FAIL("%s (tile %u): guard byte %u around the output was overwritten", what,
                       tile, i);
    memmove(b, b + 32, size);
    return b;
}
static void bench_close(bench *B)
{
    json_decref(B->report);
    json_decref(B->fault);
    ipu_device_free(B->dev);
    ipu_package_free(B->pkg);
    ipu_pkg_builder_free(B->b);
    ipu_ctx_free(B->ctx);
}

/* A bump allocator per region, 8-byte aligned with room for guards; elem
 * starts the buffer on a fresh memory element. */
typedef struct arena { uint32_t at[2]; } arena;
static uint32_t place(arena *A, int region, uint32_t size, int elem)
{
    static const uint32_t end[2] = {R1, R1_END};
    uint32_t a = A->at[region] + 32 + 8 * tseed_below(4);
    if (elem)
        a = align_up(a + 32, ELEM) + 32;
    a = align_up(a, 8);
    if (a + size + 32 > end[region])
        fail_msg("test layout: %u bytes do not fit region %d", size, region);
    A->at[region] = a + size + 32;
    return a;
}

/* ---- (1) softmax ------------------------------------------------------------- */
typedef struct sm_case {
    uint32_t rows, cols, valid, lds, ldd, src, dst, sbytes, dbytes;
    int st, dt, inplace;
    float scale;
    uint8_t *in, *init; /* source bytes; the destination's bytes before the run */
} sm_case;

static void sm_make(sm_case *c, int index, int *seen)
{
    static const float scales[] = {1.0f, 0.125f, (float)SCALE72, 2.5f, -1.5f, 0.0f};
    memset(c, 0, sizeof *c);
    c->cols = 8 * (tseed_below(4) ? tseed_below(12) : tseed_below(100)) + (uint32_t)(index % 8);
    c->cols = c->cols ? c->cols : 8;
    c->rows = 1 + tseed_below(tseed_below(4) ? 8 : 40);
    c->valid = tseed_below(2) ? c->cols : 1 + tseed_below(c->cols);
    c->st = tseed_below(2) ? F16 : F32, c->dt = tseed_below(2) ? F16 : F32;
    c->lds = c->valid + (tseed_below(3) ? tseed_below(10) : c->cols - c->valid + tseed_below(5));
    c->ldd = c->cols + (tseed_below(2) ? 0 : tseed_below(10));
    c->inplace = tseed_below(10) == 0;
    if (c->inplace)
        c->dt = c->st, c->lds = c->ldd = c->cols + tseed_below(4);
    while (c->rows > 1 && (size_t)c->rows * (c->ldd > c->lds ? c->ldd : c->lds) * 4 > 40000)
        c->rows /= 2;
    c->scale = scales[tseed_below(6)];
    uint32_t mode = tseed_below(4);
    double amp = mode == 0 ? 8.0 : 1.0, off = mode == 1 ? 150.0 * (tseed_below(2) ? 1 : -1) : 0.0;
    c->in = matrix(c->st, c->rows, c->valid, c->lds, amp, off, &c->sbytes);
    c->dbytes = (uint32_t)(((size_t)(c->rows - 1) * c->ldd + c->cols) * tsize(c->dt));
    c->init = malloc(c->dbytes);
    assert_non_null(c->init);
    memset(c->init, GUARD, c->dbytes);
    if (c->inplace)
        memcpy(c->init, c->in, c->sbytes);
    seen[c->st == F16] = seen[2 + (c->dt == F16)] = 1;
    seen[4 + c->inplace] = 1;
}

static void sm_check(const sm_case *c, const uint8_t *out, int index)
{
    double *x = malloc(c->valid * sizeof *x);
    assert_non_null(x);
    for (uint32_t r = 0; r < c->rows; r++) {
        double m = -INFINITY, xmax = 0, sum = 0;
        for (uint32_t j = 0; j < c->valid; j++) {
            x[j] = (double)c->scale * get(c->in, c->st, (size_t)r * c->lds + j);
            m = x[j] > m ? x[j] : m;
            xmax = fabs(x[j]) > xmax ? fabs(x[j]) : xmax;
        }
        for (uint32_t j = 0; j < c->valid; j++)
            sum += exp(x[j] - m);
        /* FP32 scaling, subtraction and expf move each exp by (2|x| + 2|m| + 2) 2^-24
         * relative, the sum adds valid 2^-24, the division 2^-24; FP16 adds an ulp. */
        double rel = (8 * (xmax + fabs(m)) + c->valid + 16) * 0x1p-24;
        for (uint32_t j = 0; j < c->cols; j++) {
            size_t e = (size_t)r * c->ldd + j;
            double got = get(out, c->dt, e);
            if (j >= c->valid) {
                if (!(got == 0 && !signbit(got)))
                    TSEED_FAIL("softmax case %d: masked [%u][%u] = %g, want +0", index, r, j, got);
                continue;
            }
            double p = exp(x[j] - m) / sum;
            double tol = p * rel + (c->dt == F16 ? f16_ulp(p) : 0x1p-126);
            if (!(fabs(got - p) <= tol))
                TSEED_FAIL("softmax case %d: %ux%u valid %u %s->%s lds %u ldd %u scale %g: "
                           "[%u][%u] = %.9g, exact %.9g, tolerance %.3g",
                           index, c->rows, c->cols, c->valid, ipu_dtype_name(c->st),
                           ipu_dtype_name(c->dt), c->lds, c->ldd, (double)c->scale, r, j, got, p,
                           tol);
        }
        /* The row gap keeps its bytes. */
        size_t sz = tsize(c->dt), lo = ((size_t)r * c->ldd + c->cols) * sz;
        size_t hi = r + 1 < c->rows ? (size_t)(r + 1) * c->ldd * sz : lo;
        for (size_t b = lo; b < hi; b++)
            if (out[b] != c->init[b])
                TSEED_FAIL("softmax case %d: gap byte %zu after row %u overwritten", index, b, r);
    }
    free(x);
}

static void test_softmax_random(void **state)
{
    (void)state;
    enum { TILES = 16, RUNS = 13 };
    int seen[6] = {0}, regions[4] = {0}, residues[8] = {0};
    tseed_reset(101);
    for (int run = 0; run < RUNS; run++) {
        bench B;
        bench_open(&B, TILES);
        sm_case cases[TILES];
        for (uint32_t t = 0; t < TILES; t++) {
            sm_case *c = &cases[t];
            int index = run * TILES + (int)t;
            sm_make(c, index, seen);
            residues[c->cols % 8]++;
            arena A = {{R0, R1}};
            int rs = (int)tseed_below(2), rd = (int)tseed_below(2);
            c->src = place(&A, rs, c->sbytes, 0);
            c->dst = c->inplace ? c->src : place(&A, rd, c->dbytes, 0);
            regions[rs]++, regions[2 + (c->inplace ? rs : rd)]++;
            bench_data(&B, t, c->src, c->in, c->sbytes); /* guard bytes around dst: */
            bench_fill(&B, t, c->dst - 32, c->inplace ? 32 : c->dbytes + 64, GUARD);
            if (c->inplace)
                bench_fill(&B, t, c->dst + c->dbytes, 32, GUARD);
            tpkg_kernel k = KERNEL(IPU_K_SOFTMAX, c->src, c->dst, c->rows, c->cols, c->valid,
                                   (uint32_t)c->st, (uint32_t)c->dt, c->lds, c->ldd,
                                   fbits(c->scale));
            bench_list(&B, t, &k, 1);
        }
        bench_run(&B, "softmax");
        for (uint32_t t = 0; t < TILES; t++) {
            sm_case *c = &cases[t];
            uint8_t *out = bench_output(&B, t, c->dst, c->dbytes, "softmax");
            sm_check(c, out, run * TILES + (int)t);
            free(out), free(c->in), free(c->init);
        }
        bench_close(&B);
    }
    for (int i = 0; i < 8; i++)
        if (!residues[i] || (i < 6 && !seen[i]) || (i < 4 && !regions[i]))
            TSEED_FAIL("softmax: variant %d (cols residue, type/in-place, region) never drawn", i);
}

/* ---- (2) flash blocks and scores ------------------------------------------------ */
static uint32_t head_dim(void)
{
    return tseed_below(2) ? 1 + tseed_below(100) : 64 + 8 * tseed_below(2);
}

/* Scalar double attention of one query row over the given keys: out[d],
 * W = sum_j w_j |v_j| and U = sum_j |v_j| / l per column (l = sum_j
 * exp(s_j - m)), the max score m, l, the largest |s| and the bound on the
 * kernel's FP32 error in any score. */
typedef struct ref_row {
    double out[128], w[128], u[128], m, l, smax, mbound;
} ref_row;
/* The reference on decoded values: q (d), K and V (n x d, packed). */
static void attend_core(const double *q, const double *K, const double *V, uint32_t n, uint32_t d,
                        double scale, ref_row *r)
{
    double *e = malloc(n * sizeof *e), sum = 0;
    assert_non_null(e);
    r->m = -INFINITY, r->smax = 0, r->mbound = 0;
    for (uint32_t j = 0; j < n; j++) {
        double dot = 0, mag = 0;
        for (uint32_t c = 0; c < d; c++) {
            double pr = q[c] * K[(size_t)j * d + c];
            dot += pr, mag += fabs(pr);
        }
        e[j] = scale * dot;
        r->m = e[j] > r->m ? e[j] : r->m;
        r->smax = fabs(e[j]) > r->smax ? fabs(e[j]) : r->smax;
        double b = fabs(scale) * mag * (d + 2) * 0x1p-24 + fabs(e[j]) * 0x1p-24;
        r->mbound = b > r->mbound ? b : r->mbound;
    }
    for (uint32_t j = 0; j < n; j++)
        e[j] = exp(e[j] - r->m), sum += e[j];
    r->l = sum;
    for (uint32_t c = 0; c < d; c++)
        r->out[c] = r->w[c] = r->u[c] = 0;
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t c = 0; c < d; c++) {
            double p = e[j] / sum, x = V[(size_t)j * d + c];
            r->out[c] += p * x, r->w[c] += p * fabs(x), r->u[c] += fabs(x) / sum;
        }
    free(e);
}

/* Decode rows of a strided FP16 buffer (the listed rows, or rows 0..n-1). */
static double *decode16(const uint8_t *b, uint32_t ld, const uint32_t *rows, uint32_t n, uint32_t d)
{
    double *m = malloc((size_t)n * d * sizeof *m);
    assert_non_null(m);
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t c = 0; c < d; c++)
            m[(size_t)j * d + c] = get(b, F16, (size_t)(rows ? rows[j] : j) * ld + c);
    return m;
}

static void attend(const uint8_t *q, const uint8_t *k, uint32_t ldk, const uint8_t *v, uint32_t ldv,
                   const uint32_t *keys, uint32_t nkeys, uint32_t d, double scale, ref_row *r)
{
    double *qd = decode16(q, d, NULL, 1, d), *K = decode16(k, ldk, keys, nkeys, d);
    double *V = decode16(v, ldv, keys, nkeys, d);
    attend_core(qd, K, V, nkeys, d, scale, r);
    free(qd), free(K), free(V);
}

typedef struct fl_case {
    uint32_t rows, d, ldq, ldk, ldv, ldst, ldo, lds, nb, keys[4], valid[4], first[4], total;
    uint32_t st, sb, out, ob, sa, ss; /* state, out and scores: addresses and bytes */
    int ot;
    float scale;
    uint8_t *q, *k, *v;
} fl_case;

/* Scores: FP32 dot products (any order) and the FP32 scale, within
 * (head_dim + 4) 2^-24 |scale| sum|q k| + |s| 2^-24; NaN for the NaN padding
 * rows; the row gaps keep their guard bytes. */
static void check_scores(const fl_case *c, const uint8_t *s, int run, uint32_t t)
{
    for (uint32_t i = 0; i < c->rows; i++)
        for (uint32_t j = 0; j < c->lds && (size_t)i * c->lds + j < c->ss / 4; j++) {
            size_t e = (size_t)i * c->lds + j;
            double want = 0, mag = 0, got = get(s, F32, e);
            if (j >= c->total) {
                if (memcmp(s + 4 * e, "\xA5\xA5\xA5\xA5", 4) != 0)
                    TSEED_FAIL("attn_scores %d/%u: gap [%u][%u] was overwritten", run, t, i, j);
                continue;
            }
            for (uint32_t d = 0; d < c->d; d++) {
                double pr = get(c->q, F16, (size_t)i * c->ldq + d) *
                            get(c->k, F16, (size_t)j * c->ldk + d);
                want += pr, mag += fabs(pr);
            }
            want *= c->scale;
            double tol = (c->d + 4) * 0x1p-24 * fabs(c->scale) * mag + fabs(want) * 0x1p-24 + 1e-30;
            if (isnan(want) ? !isnan(got) : !(fabs(got - want) <= tol))
                TSEED_FAIL("attn_scores %d/%u: %ux%ux%u scale %g: S[%u][%u] = %.9g, exact %.9g, "
                           "tolerance %.3g", run, t, c->rows, c->total, c->d, (double)c->scale, i,
                           j, got, want, tol);
        }
}

static void test_flash_random(void **state)
{
    (void)state;
    enum { TILES = 16, RUNS = 4, MAXB = 4 };
    static const float scales[] = {1.0f, (float)SCALE72, 0.5f, -1.0f};
    tseed_reset(103); /* flags 1u: IPU_GEMM_ACCUMULATE after the first block */
    int padded = 0;
    for (int run = 0; run < RUNS; run++) {
        bench B;
        bench_open(&B, TILES);
        fl_case cs[TILES];
        for (uint32_t t = 0; t < TILES; t++) {
            fl_case *c = &cs[t];
            c->rows = 1 + tseed_below(24), c->d = head_dim(), c->nb = 1 + tseed_below(MAXB);
            c->ldq = c->d + tseed_below(4), c->ldk = c->d + tseed_below(4);
            c->ldv = c->d + tseed_below(4);
            c->ldst = c->d + 2 + tseed_below(4), c->ldo = c->d + tseed_below(4);
            c->ot = tseed_below(2) ? F16 : F32, c->scale = scales[tseed_below(4)];
            uint32_t total = 0;
            for (uint32_t b = 0; b < c->nb; b++) {
                c->keys[b] = tseed_below(2) ? 64 : 1 + tseed_below(64);
                c->valid[b] = tseed_below(3) ? c->keys[b] : 1 + tseed_below(c->keys[b]);
                padded |= c->valid[b] < c->keys[b];
                /* Blocks start on rows that are multiples of 4: 8-byte aligned bases. */
                c->first[b] = total;
                total = (total + c->keys[b] + 3) / 4 * 4;
            }
            c->total = total, c->lds = total + tseed_below(4);
            uint32_t qb, kb, vb;
            c->q = matrix(F16, c->rows, c->d, c->ldq, 1.0, 0, &qb);
            c->k = matrix(F16, total, c->d, c->ldk, 1.0, 0, &kb);
            c->v = matrix(F16, total, c->d, c->ldv, 1.0, 0, &vb);
            for (uint32_t b = 0; b < c->nb; b++) /* NaN padding rows */
                for (uint32_t j = c->valid[b], at = c->first[b]; j < c->keys[b]; j++) {
                    memset(c->k + (size_t)(at + j) * c->ldk * 2, 0xFF, 2 * c->d);
                    memset(c->v + (size_t)(at + j) * c->ldv * 2, 0xFF, 2 * c->d);
                }
            arena A = {{R0, R1}};
            uint32_t qa = place(&A, (int)tseed_below(2), qb, 0);
            uint32_t ka = place(&A, (int)tseed_below(2), kb, 0);
            uint32_t va = place(&A, (int)tseed_below(2), vb, 0);
            c->sb = ((c->rows - 1) * c->ldst + c->d + 2) * 4;
            c->st = place(&A, A.at[0] + 3 * ELEM + c->sb < R1 ? (int)tseed_below(2) : 1, c->sb, 1);
            c->ob = (uint32_t)(((c->rows - 1) * c->ldo + c->d) * tsize(c->ot));
            c->out = place(&A, A.at[0] + c->ob + 64 < R1 ? (int)tseed_below(2) : 1, c->ob, 0);
            c->ss = ((c->rows - 1) * c->lds + total) * 4;
            c->sa = place(&A, A.at[0] + 3 * ELEM + c->ss < R1 ? (int)tseed_below(2) : 1, c->ss, 1);
            bench_fill(&B, t, c->sa - 32, c->ss + 64, GUARD);
            bench_data(&B, t, qa, c->q, qb);
            bench_data(&B, t, ka, c->k, kb);
            bench_data(&B, t, va, c->v, vb);
            bench_fill(&B, t, c->out - 32, c->ob + 64, GUARD);
            tpkg_kernel kern[MAXB + 2];
            for (uint32_t b = 0; b < c->nb; b++)
                kern[b] = KERNEL(IPU_K_ATTN_BLOCK, qa, ka + c->first[b] * c->ldk * 2,
                                 va + c->first[b] * c->ldv * 2, c->st, c->rows, c->keys[b],
                                 c->valid[b], c->d, c->ldq, c->ldk, c->ldv, c->ldst,
                                 fbits(c->scale), b ? 1u : 0u);
            kern[c->nb] = KERNEL(IPU_K_ATTN_FINISH, c->st, c->out, c->rows, c->d, c->ldst, c->ldo,
                                 (uint32_t)c->ot);
            /* Scores of the query rows against every K row (padding and the rows
             * skipped for alignment included). */
            kern[c->nb + 1] = KERNEL(IPU_K_ATTN_SCORES, qa, ka, c->sa, c->rows, total, c->d, c->ldq,
                                     c->ldk, c->lds, fbits(c->scale));
            bench_list(&B, t, kern, c->nb + 2);
        }
        bench_run(&B, "attn_block + attn_finish + attn_scores");
        for (uint32_t t = 0; t < TILES; t++) {
            fl_case *c = &cs[t];
            uint32_t keys[4 * 64], n = 0, N = 0;
            for (uint32_t b = 0; b < c->nb; b++)
                for (uint32_t j = 0; j < c->keys[b]; j++, N++)
                    if (j < c->valid[b])
                        keys[n++] = c->first[b] + j;
            uint8_t *st = malloc(c->sb), *out = bench_output(&B, t, c->out, c->ob, "attn_finish");
            uint8_t *s = bench_output(&B, t, c->sa, c->ss, "attn_scores");
            bench_read(&B, t, c->st, st, c->sb);
            check_scores(c, s, run, t);
            for (uint32_t i = 0; i < c->rows; i++) {
                ref_row r;
                attend(c->q + (size_t)i * c->ldq * 2, c->k, c->ldk, c->v, c->ldv, keys, n, c->d,
                       c->scale, &r);
                double m = get(st, F32, (size_t)i * c->ldst);
                double l = get(st, F32, (size_t)i * c->ldst + 1);
                if (!(fabs(m - r.m) <= r.mbound))
                    TSEED_FAIL("flash case %d/%u row %u: m = %.9g, exact %.9g (bound %.3g)", run, t,
                               i, m, r.m, r.mbound);
                /* l: the scores' error (mbound) in every exp, FP32 exps, sums and
                 * per-block rescales; out: P's FP16 rounding (2^-11 relative, 2^-25
                 * absolute where subnormal), FP32 work, the output rounding. */
                double lref = r.l * exp(r.m - m);
                double lrel = 2 * r.mbound + (8 * r.smax + 2 * N + 16 * c->nb + 16) * 0x1p-24;
                if (!(fabs(l - lref) <= lrel * lref))
                    TSEED_FAIL("flash case %d/%u row %u: l = %.9g, exact %.9g (rel. bound %.3g)",
                               run, t, i, l, lref, lrel);
                for (uint32_t cc = 0; cc < c->d; cc++) {
                    double got = get(out, c->ot, (size_t)i * c->ldo + cc), want = r.out[cc];
                    double tol = r.w[cc] * (0x1p-11 + (8 * r.smax + 2 * N + 32) * 0x1p-24) +
                                 r.u[cc] * 0x1p-25 +
                                 (c->ot == F16 ? f16_ulp(want) : fabs(want) * 0x1p-23);
                    if (!(fabs(got - want) <= tol))
                        TSEED_FAIL("flash case %d/%u (%u rows, d %u, %u blocks, %u valid keys, "
                                   "%s): out[%u][%u] = %.9g, exact %.9g, tolerance %.3g", run, t,
                                   c->rows,
                                   c->d, c->nb, n, ipu_dtype_name(c->ot), i, cc, got, want, tol);
                }
            }
            free(st), free(out), free(s), free(c->q), free(c->k), free(c->v);
        }
        bench_close(&B);
    }
    assert_true(padded);
}

/* ---- (3) acceptance: 729 tokens, 16 heads x 72 ---------------------------------- */
#define TOK 729u
#define HEADS 16u
#define HD 72u
#define QB 32u /* materialized query block */

/* Compare two outputs (FP16, rows x HD) with each other or a double reference:
 * max abs error and min cosine per row. */
static void compare_rows(const double *ref, const uint8_t *got, uint32_t rows, double *max_err,
                         double *min_cos)
{
    for (uint32_t i = 0; i < rows; i++) {
        double dot = 0, n1 = 0, n2 = 0;
        for (uint32_t c = 0; c < HD; c++) {
            double a = ref[(size_t)i * HD + c], b = get(got, F16, (size_t)i * HD + c);
            double e = fabs(a - b);
            if (!(e <= *max_err))
                *max_err = isnan(e) ? INFINITY : e;
            dot += a * b, n1 += a * a, n2 += b * b;
        }
        double cosv = dot / sqrt(n1 * n2);
        if (!(cosv >= *min_cos))
            *min_cos = isnan(cosv) ? -2 : cosv;
    }
}

/* Print and bound [flash vs reference, materialized vs reference, flash vs
 * materialized]: max abs error <= 2e-3, min row cosine >= 0.99999. */
static void check_errors(const char *what, const double *err, const double *cosv, int n)
{
    static const char *const names[] = {"flash", "materialized", "flash vs materialized"};
    for (int i = 0; i < n; i++) {
        printf("%s, %s: max abs error %.3g, min row cosine %.9f\n", what, names[i], err[i],
               cosv[i]);
        if (!(err[i] <= 2e-3 && cosv[i] >= 0.99999))
            TSEED_FAIL("%s, %s: max abs error %.3g (bound 2e-3), min row cosine %.9f (bound "
                       "0.99999)", what, names[i], err[i], cosv[i]);
    }
}

static void test_acceptance_729x16x72(void **state)
{
    (void)state;
    enum { TILES = 64 };
    tseed_reset(104);
    uint32_t hb, total = TOK * HD * 2;
    uint8_t *q[HEADS], *k[HEADS], *v[HEADS];
    for (uint32_t h = 0; h < HEADS; h++) {
        q[h] = matrix(F16, TOK, HD, HD, 1.0, 0, &hb);
        k[h] = matrix(F16, TOK, HD, HD, 1.0, 0, &hb);
        v[h] = matrix(F16, TOK, HD, HD, 1.0, 0, &hb);
    }
    /* Tile layout: region 0 state | flash out | materialized out; region 1
     * Q | K | V | P, then the scores on a fresh memory element. */
    const uint32_t LDST = HD + 2, ST = R0, SB = 183 * LDST * 4, OF = align_up(ST + SB, 64),
                   OB = 183 * HD * 2, OM = align_up(OF + OB, 64), QA = R1,
                   KA = align_up(QA + OB, 64),
                   VA = align_up(KA + total, 64), PA = align_up(VA + total, 64),
                   SA = align_up(PA + QB * TOK * 2, ELEM);
    assert_true(OM + OB <= R1 && SA + QB * TOK * 4 <= R1_END);
    bench B;
    bench_open(&B, TILES);
    uint32_t first[TILES], rows[TILES];
    for (uint32_t t = 0; t < TILES; t++) {
        uint32_t h = t / 4, part = t % 4;
        first[t] = part ? 183 + (part - 1) * 182 : 0, rows[t] = part ? 182 : 183;
        bench_data(&B, t, QA, q[h] + (size_t)first[t] * HD * 2, rows[t] * HD * 2);
        bench_data(&B, t, KA, k[h], total);
        bench_data(&B, t, VA, v[h], total);
        tpkg_kernel kern[12 + 1 + 3 * 6];
        size_t n = 0;
        for (uint32_t b = 0; b < 12; b++) {
            uint32_t keys = b < 11 ? 64 : TOK - 11 * 64;
            kern[n++] = KERNEL(IPU_K_ATTN_BLOCK, QA, KA + b * 64 * HD * 2, VA + b * 64 * HD * 2, ST,
                               rows[t], keys, keys, HD, HD, HD, HD, LDST, fbits((float)SCALE72),
                               b ? IPU_GEMM_ACCUMULATE : 0);
        }
        kern[n++] = KERNEL(IPU_K_ATTN_FINISH, ST, OF, rows[t], HD, LDST, HD, F16);
        for (uint32_t r0 = 0; r0 < rows[t]; r0 += QB) {
            uint32_t m = rows[t] - r0 < QB ? rows[t] - r0 : QB;
            kern[n++] = KERNEL(IPU_K_ATTN_SCORES, QA + r0 * HD * 2, KA, SA, m, TOK, HD, HD, HD, TOK,
                               fbits((float)SCALE72));
            kern[n++] = KERNEL(IPU_K_SOFTMAX, SA, PA, m, TOK, TOK, F32, F16, TOK, TOK, fbits(1.0f));
            kern[n++] = KERNEL(IPU_K_GEMM_F16, PA, VA, OM + r0 * HD * 2, m, HD, TOK, F16, 0, TOK,
                               HD, HD);
        }
        bench_list(&B, t, kern, n);
    }
    bench_run(&B, "attention 729 x 16 x 72");
    double err[3] = {0, 0, 0}, cosv[3] = {1, 1, 1};
    double *ref = malloc(183 * HD * sizeof *ref), *mat = malloc(183 * HD * sizeof *mat);
    uint8_t *outf = malloc(OB), *outm = malloc(OB);
    assert_true(ref && mat && outf && outm);
    double *qd = NULL, *kd = NULL, *vd = NULL;
    for (uint32_t t = 0; t < TILES; t++) {
        uint32_t h = t / 4;
        if (t % 4 == 0) {
            free(qd), free(kd), free(vd);
            qd = decode16(q[h], HD, NULL, TOK, HD), kd = decode16(k[h], HD, NULL, TOK, HD);
            vd = decode16(v[h], HD, NULL, TOK, HD);
        }
        bench_read(&B, t, OF, outf, rows[t] * HD * 2);
        bench_read(&B, t, OM, outm, rows[t] * HD * 2);
        for (uint32_t i = 0; i < rows[t]; i++) {
            ref_row r;
            attend_core(qd + (size_t)(first[t] + i) * HD, kd, vd, TOK, HD, SCALE72, &r);
            memcpy(ref + (size_t)i * HD, r.out, HD * sizeof(double));
            for (uint32_t c = 0; c < HD; c++)
                mat[(size_t)i * HD + c] = get(outm, F16, (size_t)i * HD + c);
        }
        compare_rows(ref, outf, rows[t], &err[0], &cosv[0]);
        compare_rows(ref, outm, rows[t], &err[1], &cosv[1]);
        compare_rows(mat, outf, rows[t], &err[2], &cosv[2]);
    }
    json_t *step = json_array_get(json_object_get(B.report, "steps"), 0);
    printf("attention step: %lld compute cycles (slowest of 64 tiles)\n",
           (long long)json_integer_value(json_object_get(step, "compute")));
    check_errors("attention 729 tokens x 16 heads x 72", err, cosv, 3);
    bench_close(&B);
    free(qd), free(kd), free(vd), free(ref), free(mat), free(outf), free(outm);
    for (uint32_t h = 0; h < HEADS; h++)
        free(q[h]), free(k[h]), free(v[h]);
}

/* ---- (4) MAP pooling: one probe over 768 padded keys (729 valid) ----------------- */
static void test_map_pooling(void **state)
{
    (void)state;
    enum { TILES = 16, PAD = 768, LDKV = 2 * HD };
    tseed_reset(105);
    /* Region 0: probe, state, scores, P and the outputs each on its own memory
     * element; region 1: the K|V buffer. */
    const uint32_t QA = R0, ST = R0 + ELEM, SA = R0 + 2 * ELEM, PA = R0 + 3 * ELEM,
                   OM = R0 + 4 * ELEM, OF = OM + 512, KV = R1;
    bench B;
    bench_open(&B, TILES);
    uint8_t *probe[TILES], *kv[TILES];
    for (uint32_t t = 0; t < TILES; t++) {
        uint32_t qb, kvb;
        probe[t] = matrix(F16, 1, HD, HD, 1.0, 0, &qb);
        kv[t] = matrix(F16, PAD, LDKV, LDKV, 1.0, 0, &kvb);
        memset(kv[t] + TOK * LDKV * 2, 0xFF, (PAD - TOK) * LDKV * 2); /* padding rows: NaN */
        bench_data(&B, t, QA, probe[t], qb);
        bench_data(&B, t, KV, kv[t], kvb);
        tpkg_kernel kern[12 + 4];
        for (uint32_t b = 0; b < 12; b++)
            kern[b] = KERNEL(IPU_K_ATTN_BLOCK, QA, KV + b * 64 * LDKV * 2,
                             KV + HD * 2 + b * 64 * LDKV * 2,
                             ST, 1, 64, b < 11 ? 64 : TOK - 11 * 64, HD, HD, LDKV, LDKV, HD + 2,
                             fbits((float)SCALE72), b ? IPU_GEMM_ACCUMULATE : 0);
        kern[12] = KERNEL(IPU_K_ATTN_FINISH, ST, OF, 1, HD, HD + 2, HD, F16);
        kern[13] = KERNEL(IPU_K_ATTN_SCORES, QA, KV, SA, 1, PAD, HD, HD, LDKV, PAD,
                          fbits((float)SCALE72));
        kern[14] = KERNEL(IPU_K_SOFTMAX, SA, PA, 1, PAD, TOK, F32, F16, PAD, PAD, fbits(1.0f));
        kern[15] = KERNEL(IPU_K_GEMM_F16, PA, KV + HD * 2, OM, 1, HD, TOK, F16, 0, PAD, LDKV, HD);
        bench_list(&B, t, kern, 16);
    }
    bench_run(&B, "MAP pooling");
    double err[2] = {0, 0}, cosv[2] = {1, 1};
    for (uint32_t t = 0; t < TILES; t++) {
        uint8_t outf[HD * 2], outm[HD * 2], s[PAD * 4], p[PAD * 2];
        bench_read(&B, t, OF, outf, sizeof outf);
        bench_read(&B, t, OM, outm, sizeof outm);
        bench_read(&B, t, SA, s, sizeof s);
        bench_read(&B, t, PA, p, sizeof p);
        /* The padding keys' scores are NaN, yet their probabilities are exact zeros. */
        for (uint32_t j = TOK; j < PAD; j++)
            if (!isnan(get(s, F32, j)) || p[2 * j] || p[2 * j + 1])
                TSEED_FAIL("MAP tile %u: padding key %u: score %g, probability bits %02X%02X", t, j,
                           get(s, F32, j), p[2 * j + 1], p[2 * j]);
        ref_row r;
        attend(probe[t], kv[t], LDKV, kv[t] + HD * 2, LDKV, NULL, TOK, HD, SCALE72, &r);
        compare_rows(r.out, outf, 1, &err[0], &cosv[0]);
        compare_rows(r.out, outm, 1, &err[1], &cosv[1]);
        free(probe[t]), free(kv[t]);
    }
    check_errors("MAP pooling, 16 heads x 72 over 768 keys (729 valid)", err, cosv, 2);
    bench_close(&B);
}

/* ---- (5) formula table and malformed arguments ------------------------------------ */
static void test_formula_samples(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_profile p;
    tpkg_profile(ctx, 1472, &p);
    static const int entries[] = {IPU_K_SOFTMAX, IPU_K_ATTN_SCORES, IPU_K_ATTN_BLOCK,
                                  IPU_K_ATTN_FINISH};
    static const uint32_t argc[] = {10, 10, 14, 7};
    for (int e = 0; e < 4; e++) {
        const uint32_t *sample = NULL;
        const char *text = ipu_kernel_formula(entries[e], &sample);
        assert_non_null(text);
        assert_int_equal(ipu_kernel_arg_count(entries[e]), argc[e]);
        assert_int_equal(ipu_kernel_body_of(entries[e]), IPU_BODY_ATTENTION);
        ipu_kernel_call call = {.entry = entries[e], .arg_count = argc[e]};
        memcpy(call.args, sample, 4 * argc[e]);
        assert_null(ipu_kernel_describe(&call));
        tpkg_kernel k = make_kernel((uint32_t)entries[e], sample, argc[e]);
        assert_int_equal(ipu_kernel_cycles(&call, &p), formula(&k));
        printf("%-12s %-8llu %s\n", ipu_kernel_name(entries[e]), (unsigned long long)formula(&k),
               text);
    }
    ipu_ctx_free(ctx);
}

/* Run one descriptor on tile 1 of a 4-tile package (region 1's first 32 KiB
 * zero-filled): kind NULL expects success at the formula's cycles, else that
 * fault, on the descriptor itself when it is malformed_descriptor. */
static void run_one(tpkg_kernel k, const char *kind, const char *what)
{
    bench B;
    bench_open(&B, 4);
    bench_fill(&B, 1, R1, 0x8000, 0);
    uint32_t list = bench_list(&B, 1, &k, 1);
    if (!kind) {
        bench_run(&B, what);
    } else {
        if (bench_run(&B, NULL) != IPU_ERR_DEVICE_FAULT)
            TSEED_FAIL("%s: run returned %s, want a device fault", what, ipu_status_name(B.run));
        const char *got = tpkg_fault_str(B.fault, "kind");
        const char *kernel = tpkg_fault_str(B.fault, "kernel");
        if (!got || strcmp(got, kind) || !kernel || strcmp(kernel, ipu_kernel_name((int)k.entry)))
            TSEED_FAIL("%s: fault %s in %s, want %s", what, got ? got : "(none)",
                       kernel ? kernel : "-", kind);
        if (!strcmp(kind, "malformed_descriptor"))
            TPKG_EXPECT_FAULT(B.fault, kind, 1, list + 4, list + 8 + 4 * k.argc);
    }
    bench_close(&B);
}

static void test_malformed(void **state)
{
    (void)state;
    const uint32_t one = fbits(1.0f), S = 0x60000u;
    const tpkg_kernel sm = KERNEL(IPU_K_SOFTMAX, R1, R1 + 0x4000, 4, 16, 16, F32, F16, 16, 16, one);
    const tpkg_kernel sc = KERNEL(IPU_K_ATTN_SCORES, R1, R1 + 0x1000, S, 4, 8, 16, 16, 16, 8, one);
    const tpkg_kernel bl = KERNEL(IPU_K_ATTN_BLOCK, R1, R1 + 0x1000, R1 + 0x3000, S, 4, 64, 64, 16,
                                  16, 16, 16, 18, one, 0);
    const tpkg_kernel fi = KERNEL(IPU_K_ATTN_FINISH, S, R1, 4, 16, 18, 16, F16);
    static const struct { int which; uint32_t arg, value; const char *what; } bad[] = {
        {0, 2, 0, "softmax rows 0"}, {0, 3, 0, "softmax cols 0"}, {0, 4, 0, "softmax valid 0"},
        {0, 4, 17, "softmax valid > cols"}, {0, 5, IPU_DT_F143, "softmax f143 source"},
        {0, 6, 9, "softmax unknown destination type"}, {0, 7, 15, "softmax ld_src < valid"},
        {0, 8, 15, "softmax ld_dst < cols"}, {0, 9, 0x7FC00000u, "softmax NaN scale"},
        {1, 5, 0, "scores head_dim 0"}, {1, 4, 0, "scores keys 0"}, {1, 6, 15, "scores ld_q < d"},
        {1, 7, 15, "scores ld_k < d"}, {1, 8, 7, "scores ld_s < keys"},
        {1, 9, 0x7F800000u, "scores inf scale"},
        {2, 5, 65, "block keys 65"}, {2, 6, 0, "block valid 0"}, {2, 5, 32, "block valid > keys"},
        {2, 11, 17, "block ld_state < d + 2"}, {2, 10, 15, "block ld_v < d"},
        {2, 13, 2, "block flags 2"},
        {2, 12, 0xFF800000u, "block -inf scale"}, {2, 4, 0, "block rows 0"},
        {3, 4, 17, "finish ld_state < d + 2"}, {3, 5, 15, "finish ld_out < d"},
        {3, 6, IPU_DT_F152, "finish f152 output"}, {3, 2, 0, "finish rows 0"},
    };
    const tpkg_kernel *base[] = {&sm, &sc, &bl, &fi};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tpkg_kernel k = *base[bad[i].which];
        k.args[bad[i].arg] = bad[i].value;
        run_one(k, "malformed_descriptor", bad[i].what);
    }
    /* The well-formed bases run (their inputs are written; finish's state is
     * not: an uninitialized read), and a state sharing the memory element of
     * q, k and v is an element conflict. */
    for (int i = 0; i < 3; i++)
        run_one(*base[i], NULL, "well-formed base");
    run_one(fi, "uninitialized_read", "finish of a state never written");
    tpkg_kernel k = bl;
    k.args[3] = R1 + 0x3800;
    run_one(k, "element_conflict", "block state in the memory element of q, k and v");
}

int main(void)
{
    tseed_init("test_kernels_attention");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_random),   
        cmocka_unit_test(test_flash_random),     cmocka_unit_test(test_acceptance_729x16x72),
        cmocka_unit_test(test_map_pooling),      cmocka_unit_test(test_formula_samples),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
