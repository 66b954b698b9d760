/* test_kernels_panels.c: the panel layouts and their kernels (to_panels,
 * from_panels, gemm_panels_f16, gemm_panels_f8) on the simulated device,
 * through hand-built 16-tile packages (operands as package data, one kernel
 * list per tile in a single step, results read back with ipu_device_read).
 * The layout is rebuilt here from its documented definition (kernels_panels.c:
 * panel width P = 8 / element bytes, element (r, kk) at byte
 * ((kk / P) rows + r) 8 + (kk % P) size, payload kp rows 8 with kp =
 * ceil(k / P), then an access tail up to round_up(payload, 16) + 16), never
 * from the kernels' code.  Rearrangements: 256 random shapes each way, every
 * dtype, every k residue mod P, row-major and K-major strided sides with
 * strides of the minimum plus 0..5, both regions; byte-exact against the
 * rebuilt layout (pads and tail zero), row gaps and guard bytes untouched, and
 * from_panels given only the payload (its tail is never read).  Panel GEMMs:
 * 256 random shapes per precision covering every residue of k and of n mod P,
 * f16/f32 partials, initialize and accumulate, packed and strided row-major
 * output, retained panels, 64-bit operands in region 0 or 1 and 128-bit (wide)
 * operands in region 1; references in double from the test decoders of the
 * formats (support_kernels.h, which also runs the jobs and checks the
 * guard bytes).  Tolerances: f32 output within 1e-5 (sum |a b| + |c|) of the
 * exact value (FP32 accumulation over kpad <= 72 terms errs by at most
 * 73 * 2^-24 < 5e-6 of that sum, plus the final rounding); f16 output within
 * one f16 ulp of the exact value plus that.  Every call's cycles (a tile's
 * step compute) must equal the documented formula computed here; retained
 * panels change only the cycles.  Faults: a layout whose access tail was never
 * written faults as uninitialized_read on exactly the tail; wide operands in
 * region 0 or 8 B aligned fault as misaligned; bad strides are malformed.
 * Acceptance: to_panels, a packed-output FP16 GEMM at R128/K64/C64 and
 * from_panels; inputs are multiples of 2^-13 below 1/8 in magnitude (exact in
 * FP16), so |out| < 64 / 64 = 1 where FP16's spacing is at most 2^-11, and the
 * maximum error against the double reference must be <= 0.001.  The seed comes
 * from IPU_TEST_SEED or the clock and is printed on every failure.
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

/* Descriptor values of kernels_panels.c. */
#define GEMM_PACKED 4u
#define GEMM_RETAINED 8u
#define PANELS_KMAJOR 1u

#define CASES 256

/* ---- the layout, from its definition ----------------------------------- */
static uint32_t lay_width(size_t size) { return (uint32_t)(8 / size); }
static uint32_t lay_panels(uint32_t k, size_t size) { return (k + lay_width(size) - 1) / lay_width(size); }
static uint32_t lay_payload(uint32_t rows, uint32_t k, size_t size) { return lay_panels(k, size) * rows * 8; }
static uint32_t lay_bytes(uint32_t rows, uint32_t k, size_t size)
{
    return tk_align_up(lay_payload(rows, k, size), 16) + 16;
}
static size_t lay_at(uint32_t rows, uint32_t r, uint32_t kk, size_t size)
{
    return ((size_t)(kk / lay_width(size)) * rows + r) * 8 + (kk % lay_width(size)) * size;
}

static void gen_bytes(uint8_t *dst, size_t count)
{
    for (size_t i = 0; i < count; i++)
        dst[i] = (uint8_t)tseed_rnd();
}

/* ---- cycle formulas, as documented ------------------------------------------ */
static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static uint64_t want_rearrange(int to, uint32_t rows, uint32_t k, size_t size, int kmajor)
{
    uint64_t kp = lay_panels(k, size);
    uint64_t c = 10 + 2 * kp + (uint64_t)rows * kp * (kmajor ? lay_width(size) : 1);
    return to ? c + (lay_bytes(rows, k, size) - lay_payload(rows, k, size)) / 8 : c;
}

static uint64_t want_gemm(int f8, uint32_t m, uint32_t n, uint32_t k, int out_type, uint32_t flags)
{
    uint64_t P = f8 ? 8 : 4, kp = cdiv(k, P), L = (flags & IPU_GEMM_WIDE) ? 16 : 8;
    uint64_t rate = f8 ? 128 : out_type == IPU_DT_F16 ? 64 : 32;
    uint64_t mac = cdiv((uint64_t)m * n * P, rate), stream = cdiv(8ull * m, L);
    uint64_t c = 50 + kp * (3 + (mac > stream ? mac : stream)) + 2ull * m;
    return (flags & GEMM_RETAINED) ? c : c + kp * cdiv(8ull * n, L);
}

/* ---- rearrangements ------------------------------------------------------------ */
typedef struct rcase {
    int to, dtype, kmajor;
    uint32_t rows, k, ld, src, dst, strided_bytes, panel_bytes;
    uint8_t *in, *out, *strided_init;
} rcase;

/* Byte offset of element (r, kk) on the strided side. */
static size_t strided_at(const rcase *c, uint32_t r, uint32_t kk)
{
    return (c->kmajor ? (size_t)kk * c->ld + r : (size_t)r * c->ld + kk) * tk_size(c->dtype);
}

static void rearrange_case(rcase *c, tk_job *j, int index)
{
    size_t size = tk_size(c->dtype);
    uint32_t P = lay_width(size), r = (uint32_t)(index / 8) % P;
    c->k = P * tseed_below(12) + r;
    c->k += c->k == 0 ? P : 0;
    c->rows = tseed_below(5) ? 1 + tseed_below(40) : 1;
    c->kmajor = (int)tseed_below(2);
    c->ld = (c->kmajor ? c->rows : c->k) + (tseed_below(2) ? tseed_below(6) : 0);
    uint32_t outer = c->kmajor ? c->k : c->rows, inner = c->kmajor ? c->rows : c->k;
    c->strided_bytes = (uint32_t)(((outer - 1) * c->ld + inner) * size);
    c->panel_bytes = lay_bytes(c->rows, c->k, size);
    uint32_t in_bytes = c->to ? c->strided_bytes : lay_payload(c->rows, c->k, size);
    uint32_t out_bytes = c->to ? c->panel_bytes : c->strided_bytes;
    c->src = (tseed_below(2) ? TK_IN1 : TK_IN0) + 8 * tseed_below(64);
    c->dst = (tseed_below(2) ? TK_OUT1 : TK_OUT0) + 64 + 8 * tseed_below(64);
    c->in = malloc(in_bytes), c->out = malloc(out_bytes), c->strided_init = NULL;
    assert_true(c->in && c->out);
    gen_bytes(c->in, in_bytes); /* pads and gaps too: they must not reach the output */
    uint32_t args[] = {c->src, c->dst, c->rows, c->k, (uint32_t)c->dtype, c->ld,
                       c->kmajor ? PANELS_KMAJOR : 0};
    tk_kernel(j, c->to ? IPU_K_TO_PANELS : IPU_K_FROM_PANELS, 7, args);
    tk_data(j, c->src, c->in, in_bytes); /* from_panels: the payload only, no tail */
    /* from_panels: the strided destination starts as guard bytes (gaps must
     * stay); to_panels: the layout starts as 0xEE bytes (pads and tail must
     * become zeros). */
    c->strided_init = malloc(out_bytes);
    assert_non_null(c->strided_init);
    memset(c->strided_init, c->to ? 0xEE : TK_GUARD, out_bytes);
    tk_data(j, c->dst, c->strided_init, out_bytes);
    tk_read(j, c->dst, c->out, out_bytes);
    tk_guards(j, c->dst, out_bytes);
}

static void rearrange_check(const rcase *c, const tk_job *j, int index)
{
    size_t size = tk_size(c->dtype);
    const char *name = c->to ? "to_panels" : "from_panels";
    tk_check_guards(j, name, index);
    uint8_t *want = malloc(c->to ? c->panel_bytes : c->strided_bytes);
    assert_non_null(want);
    if (c->to)
        memset(want, 0, c->panel_bytes); /* pads and the access tail are zeros */
    else
        memset(want, TK_GUARD, c->strided_bytes);
    for (uint32_t r = 0; r < c->rows; r++)
        for (uint32_t kk = 0; kk < c->k; kk++) {
            size_t p = lay_at(c->rows, r, kk, size), s = strided_at(c, r, kk);
            memcpy(c->to ? want + p : want + s, c->to ? c->in + s : c->in + p, size);
        }
    uint32_t bytes = c->to ? c->panel_bytes : c->strided_bytes;
    for (uint32_t b = 0; b < bytes; b++)
        if (c->out[b] != want[b])
            TSEED_FAIL("%s case %d: %s rows %u k %u ld %u %s: byte %u is 0x%02X, want 0x%02X", name,
                       index, ipu_dtype_name(c->dtype), c->rows, c->k, c->ld,
                       c->kmajor ? "K-major" : "row-major", b, c->out[b], want[b]);
    uint64_t cycles = want_rearrange(c->to, c->rows, c->k, size, c->kmajor);
    if (j->compute != cycles)
        TSEED_FAIL("%s case %d: rows %u k %u %s: %llu cycles, formula %llu", name, index, c->rows,
                   c->k, ipu_dtype_name(c->dtype), (unsigned long long)j->compute,
                   (unsigned long long)cycles);
    free(want);
}

/* The rearrangement sweep: the package's cases and, per dtype and k % P,
 * the directions drawn (bit 0 from_panels, bit 1 to_panels). */
typedef struct rsweep {
    rcase cases[TK_TILES];
    int seen[4][8];
} rsweep;

static void rearrange_make(void *sweep, tk_job *job, uint32_t index)
{
    rsweep *S = sweep;
    rcase *c = &S->cases[index % TK_TILES];
    memset(c, 0, sizeof *c);
    c->to = index % 2 == 0, c->dtype = (int)(index / 2) % 4;
    rearrange_case(c, job, (int)index);
    S->seen[c->dtype][c->k % lay_width(tk_size(c->dtype))] |= 1 << c->to;
}

static void rearrange_sweep_check(void *sweep, const tk_job *job, uint32_t index)
{
    rcase *c = &((rsweep *)sweep)->cases[index % TK_TILES];
    rearrange_check(c, job, (int)index);
    free(c->in), free(c->out), free(c->strided_init);
}

static void test_rearrange(void **state)
{
    (void)state;
    rsweep S;
    memset(&S, 0, sizeof S);
    tseed_reset(1);
    tk_sweep(2 * CASES, &S, rearrange_make, rearrange_sweep_check);
    for (int d = 0; d < 4; d++)
        for (uint32_t r = 0; r < lay_width(tk_size(d)); r++)
            if (S.seen[d][r] != 3)
                TSEED_FAIL("rearrangements: %s with k %% P = %u not covered both ways", ipu_dtype_name(d), r);
}

/* ---- panel GEMMs ------------------------------------------------------------------- */
typedef struct gcase {
    int f8, ta, tb, sa, sb, out_type;
    uint32_t m, n, k, flags, ldc, a, b, c, c_bytes;
    uint8_t *A, *B, *ai, *bi, *cin, *cout; /* A (m x k), B (k x n) row-major codes; panel images */
} gcase;

static uint32_t gemm_args(const gcase *g, uint32_t *args)
{
    uint32_t w16[] = {g->a, g->b, g->c, g->m, g->n, g->k, (uint32_t)g->out_type, g->flags, g->ldc};
    uint32_t w8[] = {g->a, g->b, g->c, g->m, g->n, g->k, (uint32_t)g->ta | (uint32_t)g->tb << 8,
                     (uint32_t)(uint8_t)(int8_t)g->sa | (uint32_t)(uint8_t)(int8_t)g->sb << 8,
                     (uint32_t)g->out_type, g->flags, g->ldc};
    memcpy(args, g->f8 ? w8 : w16, g->f8 ? sizeof w8 : sizeof w16);
    return g->f8 ? 11 : 9;
}

/* Panel images of A (rows m) and B^T (rows n) with zero pads and tails. */
static void gemm_images(gcase *g)
{
    size_t in = g->f8 ? 1 : 2;
    uint32_t ab = lay_bytes(g->m, g->k, in), bb = lay_bytes(g->n, g->k, in);
    g->ai = calloc(1, ab), g->bi = calloc(1, bb);
    assert_true(g->ai && g->bi);
    for (uint32_t i = 0; i < g->m; i++)
        for (uint32_t l = 0; l < g->k; l++)
            memcpy(g->ai + lay_at(g->m, i, l, in), g->A + ((size_t)i * g->k + l) * in, in);
    for (uint32_t l = 0; l < g->k; l++)
        for (uint32_t j = 0; j < g->n; j++)
            memcpy(g->bi + lay_at(g->n, j, l, in), g->B + ((size_t)l * g->n + j) * in, in);
}

static size_t c_at(const gcase *g, uint32_t i, uint32_t j)
{
    size_t os = tk_size(g->out_type);
    return (g->flags & GEMM_PACKED) ? lay_at(g->m, i, j, os) : ((size_t)i * g->ldc + j) * os;
}

static void gemm_case(gcase *g, tk_job *job, int index)
{
    uint32_t P = g->f8 ? 8 : 4, in = g->f8 ? 1 : 2;
    g->k = P * tseed_below(g->f8 ? 9 : 13) + (uint32_t)index % P;
    g->k += g->k == 0 ? P : 0;
    g->n = P * tseed_below(g->f8 ? 7 : 13) + (uint32_t)(index / (int)P) % P;
    g->n += g->n == 0 ? P : 0;
    g->m = tseed_below(6) ? 1 + tseed_below(40) : 1;
    g->out_type = tseed_below(2) ? IPU_DT_F16 : IPU_DT_F32;
    g->ta = g->tb = IPU_DT_F16, g->sa = g->sb = 0;
    if (g->f8) {
        g->ta = tseed_below(2) ? IPU_DT_F143 : IPU_DT_F152;
        g->tb = tseed_below(2) ? IPU_DT_F143 : IPU_DT_F152;
        g->sa = tseed_below(2) ? -2 : -4, g->sb = tseed_below(2) ? -2 : -4;
    }
    g->flags = (tseed_below(2) ? IPU_GEMM_ACCUMULATE : 0) | (tseed_below(2) ? IPU_GEMM_WIDE : 0) |
               (tseed_below(2) ? GEMM_PACKED : 0) | (tseed_below(2) ? GEMM_RETAINED : 0);
    size_t os = tk_size(g->out_type);
    int packed = (g->flags & GEMM_PACKED) != 0, acc = (g->flags & IPU_GEMM_ACCUMULATE) != 0;
    g->ldc = packed ? 0 : g->n + (tseed_below(2) ? tseed_below(8) : 0);
    g->c_bytes = packed ? lay_bytes(g->m, g->n, os) : (uint32_t)(((g->m - 1) * g->ldc + g->n) * os);
    g->A = malloc((size_t)g->m * g->k * in), g->B = malloc((size_t)g->k * g->n * in);
    g->cin = malloc(g->c_bytes), g->cout = malloc(g->c_bytes);
    assert_true(g->A && g->B && g->cin && g->cout);
    tk_codes(g->ta, 0, g->A, (size_t)g->m * g->k);
    tk_codes(g->tb, 0, g->B, (size_t)g->k * g->n);
    gemm_images(g);
    /* C before the call: packed and accumulating, codes everywhere (pads and
     * tail included: the call rewrites them as zeros); else guard bytes and,
     * when accumulating, codes in the elements. */
    memset(g->cin, TK_GUARD, g->c_bytes);
    if (packed && acc)
        tk_codes(g->out_type, 0, g->cin, g->c_bytes / os);
    for (uint32_t i = 0; acc && !packed && i < g->m; i++)
        tk_codes(g->out_type, 0, g->cin + c_at(g, i, 0), g->n);
    uint32_t align = (g->flags & IPU_GEMM_WIDE) ? 16 : 8;
    uint32_t ab = lay_bytes(g->m, g->k, in), bb = lay_bytes(g->n, g->k, in);
    g->a = ((g->flags & IPU_GEMM_WIDE) || tseed_below(2) ? TK_IN1 : TK_IN0) + align * tseed_below(64);
    g->b = tk_align_up(g->a + ab, align) + align * tseed_below(4);
    g->c = (tseed_below(2) ? TK_OUT1 : TK_OUT0) + 64 + 8 * tseed_below(64);
    uint32_t args[16];
    tk_kernel(job, g->f8 ? IPU_K_GEMM_PANELS_F8 : IPU_K_GEMM_PANELS_F16, gemm_args(g, args), args);
    tk_data(job, g->a, g->ai, ab);
    tk_data(job, g->b, g->bi, bb);
    if (acc || (!packed && g->m > 1 && g->ldc > g->n) || (packed && tseed_below(2)))
        tk_data(job, g->c, g->cin, g->c_bytes);
    tk_read(job, g->c, g->cout, g->c_bytes);
    tk_guards(job, g->c, g->c_bytes);
}

/* Check a call's output (and, with cycles, the tile's compute against its formula). */
static void gemm_check(const gcase *g, const tk_job *job, int index, int cycles_alone)
{
    const char *name = g->f8 ? "gemm_panels_f8" : "gemm_panels_f16";
    size_t os = tk_size(g->out_type);
    int packed = (g->flags & GEMM_PACKED) != 0, acc = (g->flags & IPU_GEMM_ACCUMULATE) != 0;
    tk_check_guards(job, name, index);
    /* Bytes that are not C elements: packed pads and tail zero; row gaps untouched. */
    uint8_t *is_elem = calloc(1, g->c_bytes);
    assert_non_null(is_elem);
    for (uint32_t i = 0; i < g->m; i++)
        for (uint32_t j = 0; j < g->n; j++)
            memset(is_elem + c_at(g, i, j), 1, os);
    for (uint32_t b = 0; b < g->c_bytes; b++)
        if (!is_elem[b] && g->cout[b] != (packed ? 0 : TK_GUARD))
            TSEED_FAIL("%s case %d: %ux%ux%u flags %u: non-element C byte %u is 0x%02X", name, index,
                       g->m, g->n, g->k, g->flags, b, g->cout[b]);
    free(is_elem);
    tk_matrix a = {g->ta, g->sa, g->A, g->k}, b = {g->tb, g->sb, g->B, g->n};
    for (uint32_t i = 0; i < g->m; i++)
        for (uint32_t j = 0; j < g->n; j++) {
            double c = acc ? tk_decode(g->out_type, 0, g->cin + c_at(g, i, j)) : 0, mag;
            double s = tk_dot(a, b, i, j, g->k, c, &mag);
            double got = tk_decode(g->out_type, 0, g->cout + c_at(g, i, j));
            double tol = tk_gemm_tol(g->out_type, s, mag);
            if (!(fabs(got - s) <= tol))
                TSEED_FAIL("%s case %d: %ux%ux%u flags %u ldc %u types %d/%d scales %d/%d out %s: "
                           "C[%u][%u] = %.9g, exact %.9g, tolerance %.3g",
                           name, index, g->m, g->n, g->k, g->flags, g->ldc, g->ta, g->tb, g->sa,
                           g->sb, ipu_dtype_name(g->out_type), i, j, got, s, tol);
        }
    uint64_t cycles = want_gemm(g->f8, g->m, g->n, g->k, g->out_type, g->flags);
    if (cycles_alone && job->compute != cycles)
        TSEED_FAIL("%s case %d: %ux%ux%u flags %u: %llu cycles, formula %llu", name, index, g->m,
                   g->n, g->k, g->flags, (unsigned long long)job->compute, (unsigned long long)cycles);
}

static void gemm_free(gcase *g)
{
    free(g->A), free(g->B), free(g->ai), free(g->bi), free(g->cin), free(g->cout);
}

/* A panel GEMM family's sweep: the package's cases and what the draw covered. */
typedef struct gsweep {
    int f8;
    gcase cases[TK_TILES];
    int k_res[8], n_res[8], flag_on[4], flag_off[4], region[2];
} gsweep;

static void gemm_make(void *sweep, tk_job *job, uint32_t index)
{
    gsweep *S = sweep;
    gcase *g = &S->cases[index % TK_TILES];
    uint32_t P = S->f8 ? 8 : 4;
    memset(g, 0, sizeof *g);
    g->f8 = S->f8;
    gemm_case(g, job, (int)index);
    S->k_res[g->k % P]++, S->n_res[g->n % P]++, S->region[g->a >= TK_IN1]++;
    tk_count_flags(g->flags, 4, S->flag_on, S->flag_off);
}

static void gemm_sweep_check(void *sweep, const tk_job *job, uint32_t index)
{
    gcase *g = &((gsweep *)sweep)->cases[index % TK_TILES];
    gemm_check(g, job, (int)index, 1);
    gemm_free(g);
}

static void gemm_family(int f8, uint64_t salt)
{
    uint32_t P = f8 ? 8 : 4;
    gsweep S;
    memset(&S, 0, sizeof S);
    S.f8 = f8;
    tseed_reset(salt);
    tk_sweep(CASES, &S, gemm_make, gemm_sweep_check);
    for (uint32_t r = 0; r < P; r++)
        if (!S.k_res[r] || !S.n_res[r])
            TSEED_FAIL("panel GEMM: residue %u mod %u of k (%d) or n (%d) never drawn", r, P,
                       S.k_res[r], S.n_res[r]);
    tk_expect_flags(S.flag_on, S.flag_off, 4, "panel GEMM: ");
    if (!S.region[0] || !S.region[1])
        TSEED_FAIL("panel GEMM: operands not placed in both regions");
}

static void test_gemm_panels_f16(void **state) { (void)state; gemm_family(0, 2); }
static void test_gemm_panels_f8(void **state) { (void)state; gemm_family(1, 3); }

/* A retained-panels call after a normal one with the same B, on one tile,
 * against the same two calls unretained on another: equal bytes, and the
 * cycle difference is exactly B's panel fetch kp * ceil(8 n / L). */
static void test_retained(void **state)
{
    (void)state;
    tseed_reset(4);
    for (int f8 = 0; f8 < 2; f8++) {
        tk_job jobs[2];
        gcase g[2][2];
        memset(jobs, 0, sizeof jobs);
        memset(g, 0, sizeof g);
        uint32_t m = 9, n = 13, k = f8 ? 21 : 11, in = f8 ? 1 : 2, P = f8 ? 8 : 4;
        for (int t = 0; t < 2; t++)
            for (int call = 0; call < 2; call++) {
                gcase *x = &g[t][call];
                x->f8 = f8, x->m = m, x->n = n, x->k = k, x->out_type = IPU_DT_F32;
                x->ta = x->tb = f8 ? IPU_DT_F143 : IPU_DT_F16, x->sa = x->sb = f8 ? -2 : 0;
                x->flags = IPU_GEMM_WIDE | GEMM_PACKED | (t && call ? GEMM_RETAINED : 0);
                x->A = malloc(m * k * in), x->B = malloc(k * n * in);
                x->c_bytes = lay_bytes(m, n, 4);
                x->cout = malloc(x->c_bytes);
                if (t == 0) {
                    tk_codes(x->ta, 0, x->A, (size_t)m * k);
                    if (call == 0)
                        tk_codes(x->tb, 0, x->B, (size_t)k * n);
                    else
                        memcpy(x->B, g[0][0].B, (size_t)k * n * in);
                } else {
                    memcpy(x->A, g[0][call].A, (size_t)m * k * in);
                    memcpy(x->B, g[0][call].B, (size_t)k * n * in);
                }
                gemm_images(x);
                x->a = TK_IN1 + 0x4000u * (uint32_t)call, x->b = TK_IN1 + 0x10000u;
                x->c = TK_OUT0 + 0x4000u * (uint32_t)call;
                uint32_t args[16];
                tk_kernel(&jobs[t], f8 ? IPU_K_GEMM_PANELS_F8 : IPU_K_GEMM_PANELS_F16, gemm_args(x, args), args);
                tk_data(&jobs[t], x->a, x->ai, lay_bytes(m, k, in));
                if (call == 0)
                    tk_data(&jobs[t], x->b, x->bi, lay_bytes(n, k, in));
                tk_read(&jobs[t], x->c, x->cout, x->c_bytes);
            }
        tk_run(jobs, 2, NULL);
        for (int call = 0; call < 2; call++) {
            if (memcmp(g[0][call].cout, g[1][call].cout, g[0][call].c_bytes) != 0)
                TSEED_FAIL("retained panels changed call %d's output (f8 %d)", call, f8);
            gemm_check(&g[1][call], &jobs[1], call, 0); /* the cycles are checked below */
        }
        uint64_t fetch = (uint64_t)((k + P - 1) / P) * ((8 * n + 15) / 16);
        uint64_t plain = want_gemm(f8, m, n, k, IPU_DT_F32, IPU_GEMM_WIDE | GEMM_PACKED);
        assert_int_equal(jobs[0].compute, 2 * plain);
        assert_int_equal(jobs[1].compute, 2 * plain - fetch);
        for (int t = 0; t < 2; t++)
            for (int call = 0; call < 2; call++)
                gemm_free(&g[t][call]);
    }
}

/* ---- faults and pads ------------------------------------------------------------- */
/* A single-tile GEMM whose A or B layout was written only up to (payload +
 * written) bytes: the call faults as uninitialized_read on exactly the rest of
 * the access tail, [payload + written, layout). */
static void test_uninitialized_tail(void **state)
{
    (void)state;
    tseed_reset(5);
    for (int f8 = 0; f8 < 2; f8++)
        for (int which = 0; which < 3; which++) { /* A unwritten tail, A half tail, B */
            uint32_t P = f8 ? 8 : 4, in = f8 ? 1 : 2;
            gcase g;
            memset(&g, 0, sizeof g);
            g.f8 = f8, g.m = 5, g.n = 6, g.k = P - 1, g.out_type = IPU_DT_F32;
            g.ta = g.tb = f8 ? IPU_DT_F152 : IPU_DT_F16, g.sa = g.sb = f8 ? -4 : 0;
            g.flags = IPU_GEMM_WIDE, g.ldc = g.n;
            g.A = malloc(g.m * g.k * in), g.B = malloc(g.k * g.n * in);
            tk_codes(g.ta, 0, g.A, (size_t)g.m * g.k);
            tk_codes(g.tb, 0, g.B, (size_t)g.k * g.n);
            gemm_images(&g);
            g.a = TK_IN1, g.b = TK_IN1 + 0x1000u, g.c = TK_OUT0;
            uint32_t ab = lay_bytes(g.m, g.k, in), bb = lay_bytes(g.n, g.k, in);
            uint32_t ap = lay_payload(g.m, g.k, in), bp = lay_payload(g.n, g.k, in);
            assert_int_equal(ab - ap, 24); /* 5 panel rows: the pair tail plus the pipeline */
            assert_int_equal(bb - bp, 16);
            uint32_t a_written = which == 0 ? ap : which == 1 ? ap + 8 : ab;
            uint32_t b_written = which == 2 ? bp : bb;
            tk_job job;
            memset(&job, 0, sizeof job);
            uint32_t args[16];
            tk_kernel(&job, f8 ? IPU_K_GEMM_PANELS_F8 : IPU_K_GEMM_PANELS_F16, gemm_args(&g, args), args);
            tk_data(&job, g.a, g.ai, a_written);
            tk_data(&job, g.b, g.bi, b_written);
            json_t *fault = NULL;
            ipu_status st = tk_run(&job, 1, &fault);
            if (st != IPU_ERR_DEVICE_FAULT)
                TSEED_FAIL("f8 %d case %d: an unwritten access tail did not fault (%s)", f8, which,
                           ipu_status_name(st));
            if (which < 2)
                TPKG_EXPECT_FAULT(fault, "uninitialized_read", 0, g.a + a_written, g.a + ab);
            else
                TPKG_EXPECT_FAULT(fault, "uninitialized_read", 0, g.b + bp, g.b + bb);
            json_decref(fault);
            free(g.A), free(g.B), free(g.ai), free(g.bi);
        }
}

/* The AMP multiplies the K pads: pads of 1.0 in both A and B add kpad - k to
 * every output; a NaN pad in A against zero pads in B makes every output NaN.
 * (Which is why to_panels and packed outputs write them as zeros.) */
static void test_pads_multiply(void **state)
{
    (void)state;
    tseed_reset(6);
    enum { M = 2, N = 3, K = 5, KPAD = 8 };
    tk_job jobs[2];
    gcase g[2];
    memset(jobs, 0, sizeof jobs);
    memset(g, 0, sizeof g);
    for (int t = 0; t < 2; t++) {
        gcase *x = &g[t];
        x->m = M, x->n = N, x->k = K, x->out_type = IPU_DT_F32, x->ldc = N;
        x->ta = x->tb = IPU_DT_F16;
        x->A = malloc(M * K * 2), x->B = malloc(K * N * 2), x->cout = malloc(M * N * 4);
        tk_codes(IPU_DT_F16, 0, x->A, M * K);
        tk_codes(IPU_DT_F16, 0, x->B, K * N);
        gemm_images(x);
        uint16_t apad = t ? 0x7E00 : 0x3C00, bpad = t ? 0 : 0x3C00; /* NaN or 1.0, 0 or 1.0 */
        for (uint32_t kk = K; kk < KPAD; kk++) {
            for (uint32_t i = 0; i < M; i++)
                memcpy(x->ai + lay_at(M, i, kk, 2), &apad, 2);
            for (uint32_t j = 0; j < N; j++)
                memcpy(x->bi + lay_at(N, j, kk, 2), &bpad, 2);
        }
        x->a = TK_IN0, x->b = TK_IN0 + 0x100u, x->c = TK_OUT0;
        uint32_t args[16];
        tk_kernel(&jobs[t], IPU_K_GEMM_PANELS_F16, gemm_args(x, args), args);
        tk_data(&jobs[t], x->a, x->ai, lay_bytes(M, K, 2));
        tk_data(&jobs[t], x->b, x->bi, lay_bytes(N, K, 2));
        tk_read(&jobs[t], x->c, x->cout, M * N * 4);
    }
    tk_run(jobs, 2, NULL);
    tk_matrix a = {IPU_DT_F16, 0, g[0].A, K}, b = {IPU_DT_F16, 0, g[0].B, N};
    for (uint32_t i = 0; i < M; i++)
        for (uint32_t j = 0; j < N; j++) {
            double s = tk_dot(a, b, i, j, K, 0, NULL);
            double got = tk_decode_at(IPU_DT_F32, 0, g[0].cout, i * N + j);
            if (!(fabs(got - (s + (KPAD - K))) <= 1e-5 * (fabs(s) + 64)))
                TSEED_FAIL("pads of 1.0: C[%u][%u] = %.9g, want %.9g", i, j, got, s + (KPAD - K));
            if (!isnan(tk_decode_at(IPU_DT_F32, 0, g[1].cout, i * N + j)))
                TSEED_FAIL("a NaN pad in A: C[%u][%u] is not NaN", i, j);
        }
    gemm_free(&g[0]), gemm_free(&g[1]);
}

/* Operand rules, one faulting call per run: wide operands need region 1 and
 * 16 B alignment (misaligned, on the operand), the output may not share a
 * memory element with either input, nor a rearrangement's destination with
 * its source (element_conflict, on the shared element), and strides below
 * their minimum, a packed output with ldc != 0 or unknown flag bits are
 * malformed descriptors (on the whole descriptor). */
static void test_operand_rules(void **state)
{
    (void)state;
    tseed_reset(7);
    enum { M = 6, N = 5, K = 7 };
    static const struct {
        uint32_t a, b, c, flags, ldc;
        const char *kind;
        int on; /* misaligned: 0 a, 1 b; element_conflict: the shared element's address */
    } cases[] = {
        {TK_IN0, TK_IN1 + 0x800, TK_OUT0, IPU_GEMM_WIDE, N, "misaligned", 0},
        {TK_IN1 + 8, TK_IN1 + 0x800, TK_OUT0, IPU_GEMM_WIDE, N, "misaligned", 0},
        {TK_IN1, TK_IN0 + 0x800, TK_OUT0, IPU_GEMM_WIDE, N, "misaligned", 1},
        {TK_IN1, TK_IN1 + 0x808, TK_OUT0, IPU_GEMM_WIDE, N, "misaligned", 1},
        {TK_IN1, TK_IN1 + 0x800, TK_IN1 + 0x1000, 0, N, "element_conflict", 0},
        {TK_IN0, TK_IN1 + 0x800, TK_IN1 + 0x1000, 0, N, "element_conflict", 0},
        {TK_IN1, TK_IN1 + 0x800, TK_OUT0, GEMM_PACKED, N, "malformed_descriptor", 0},
        {TK_IN1, TK_IN1 + 0x800, TK_OUT0, 0, N - 1, "malformed_descriptor", 0},
        {TK_IN1, TK_IN1 + 0x800, TK_OUT0, 16, N, "malformed_descriptor", 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gcase g;
        memset(&g, 0, sizeof g);
        g.m = M, g.n = N, g.k = K, g.out_type = IPU_DT_F16, g.ta = g.tb = IPU_DT_F16;
        g.flags = cases[c].flags, g.ldc = cases[c].ldc;
        g.a = cases[c].a, g.b = cases[c].b, g.c = cases[c].c;
        g.A = malloc(M * K * 2), g.B = malloc(K * N * 2);
        tk_codes(IPU_DT_F16, 0, g.A, M * K);
        tk_codes(IPU_DT_F16, 0, g.B, K * N);
        gemm_images(&g);
        uint32_t ab = lay_bytes(M, K, 2), bb = lay_bytes(N, K, 2), args[16];
        tk_job job;
        memset(&job, 0, sizeof job);
        tk_kernel(&job, IPU_K_GEMM_PANELS_F16, gemm_args(&g, args), args);
        tk_data(&job, g.a, g.ai, ab);
        tk_data(&job, g.b, g.bi, bb);
        json_t *fault = NULL;
        assert_int_equal(tk_run(&job, 1, &fault), IPU_ERR_DEVICE_FAULT);
        uint32_t lo = cases[c].on ? g.b : g.a, hi = cases[c].on ? g.b + bb : g.a + ab;
        if (strcmp(cases[c].kind, "element_conflict") == 0)
            lo = g.c / 0x4000u * 0x4000u, hi = lo + 0x4000u;
        else if (strcmp(cases[c].kind, "malformed_descriptor") == 0)
            lo = job.list + 4, hi = job.list + 8 + 4 * job.k[0].argc;
        TPKG_EXPECT_FAULT(fault, cases[c].kind, 0, lo, hi);
        assert_string_equal(tpkg_fault_str(fault, "kernel"), "gemm_panels_f16");
        json_decref(fault);
        free(g.A), free(g.B), free(g.ai), free(g.bi);
    }
    /* A rearrangement whose source and destination share element 32; then
     * one whose row-major stride is below k. */
    for (int bad = 0; bad < 2; bad++) {
        static uint8_t src[4096];
        tk_job job;
        memset(&job, 0, sizeof job);
        uint32_t args[] = {TK_IN1, bad ? TK_OUT0 : TK_IN1 + 0x1000u, 9, 10, IPU_DT_F16, bad ? 9u : 10u, 0};
        tk_kernel(&job, IPU_K_TO_PANELS, 7, args);
        tk_data(&job, TK_IN1, src, sizeof src);
        json_t *fault = NULL;
        assert_int_equal(tk_run(&job, 1, &fault), IPU_ERR_DEVICE_FAULT);
        if (bad)
            TPKG_EXPECT_FAULT(fault, "malformed_descriptor", 0, job.list + 4, job.list + 36);
        else
            TPKG_EXPECT_FAULT(fault, "element_conflict", 0, TK_IN1, TK_IN1 + 0x4000u);
        assert_string_equal(tpkg_fault_str(fault, "kernel"), "to_panels");
        json_decref(fault);
    }
}

/* ---- acceptance ------------------------------------------------------------------ */
/* Row-major A (128 x 64) and B (64 x 64) go through to_panels (B K-major),
 * the packed-output FP16 GEMM (f16 partials, 128-bit loads) and from_panels,
 * all in one compute list.  Inputs are unit-scale uniform values q / 1024
 * (|q| <= 1023) scaled by 1/8, exact in FP16, so |out| <= 64 (1023 / 8192)^2
 * < 1, where FP16's spacing is at most 2^-11 (rounding error <= 2^-12); A's
 * row 0 and B's column 0 are full-magnitude with matching signs, so C[0][0]
 * reaches 0.998.  The maximum error against the double reference must be
 * <= 0.001.  The packed C is the layout of its elements with a zero tail, and
 * the tile's compute is the sum of the four formulas. */
/* FP16 bits of q 2^-13, |q| <= 1023 (exact: a normal number, 10 bits). */
static void put_f16_q(uint8_t *dst, int q)
{
    unsigned h = 0, a = (unsigned)(q < 0 ? -q : q);
    if (a) {
        int e = 0;
        while ((a << e) < 1024) /* a 2^-13 = (a << e) 2^(-13 - e) = 1.m 2^(-3 - e) */
            e++;
        unsigned exp_field = (unsigned)(10 - e - 13 + 15), m = (a << e) & 1023;
        h = exp_field << 10 | m;
    }
    h |= q < 0 ? 0x8000u : 0;
    dst[0] = (uint8_t)h, dst[1] = (uint8_t)(h >> 8);
}

static void test_acceptance_r128_k64_c64(void **state)
{
    (void)state;
    enum { M = 128, K = 64, N = 64 };
    const uint32_t a_rm = TK_IN0, b_rm = TK_IN0 + M * K * 2, ap = TK_IN1, bp = TK_IN1 + 0x8000u, cp = TK_OUT0, c_rm = TK_OUT1;
    tseed_reset(8);
    uint8_t *A = malloc(M * K * 2), *B = malloc(K * N * 2);
    uint32_t cp_bytes = lay_bytes(M, N, 2);
    uint8_t *C = malloc(cp_bytes), *Crm = malloc(M * N * 2);
    assert_true(A && B && C && Crm);
    for (uint32_t i = 0; i < M * K; i++)
        put_f16_q(A + 2 * i, (int)tseed_below(2047) - 1023);
    for (uint32_t i = 0; i < K * N; i++)
        put_f16_q(B + 2 * i, (int)tseed_below(2047) - 1023);
    for (uint32_t l = 0; l < K; l++) { /* C[0][0] = sum |a||b| = 64 (1023 / 8192)^2 = 0.998 */
        int sign = (int)tseed_below(2) * 2 - 1;
        put_f16_q(A + 2 * l, sign * 1023);
        put_f16_q(B + 2 * l * N, sign * 1023);
    }
    tk_job job;
    memset(&job, 0, sizeof job);
    uint32_t to_a[] = {a_rm, ap, M, K, IPU_DT_F16, K, 0};
    uint32_t to_b[] = {b_rm, bp, N, K, IPU_DT_F16, N, PANELS_KMAJOR};
    uint32_t gemm[] = {ap, bp, cp, M, N, K, IPU_DT_F16, IPU_GEMM_WIDE | GEMM_PACKED, 0};
    uint32_t from[] = {cp, c_rm, M, N, IPU_DT_F16, N, 0};
    tk_kernel(&job, IPU_K_TO_PANELS, 7, to_a);
    tk_kernel(&job, IPU_K_TO_PANELS, 7, to_b);
    tk_kernel(&job, IPU_K_GEMM_PANELS_F16, 9, gemm);
    tk_kernel(&job, IPU_K_FROM_PANELS, 7, from);
    tk_data(&job, a_rm, A, M * K * 2);
    tk_data(&job, b_rm, B, K * N * 2);
    tk_read(&job, cp, C, cp_bytes);
    tk_read(&job, c_rm, Crm, M * N * 2);
    tk_run(&job, 1, NULL);
    double max_err = 0, max_out = 0;
    tk_matrix am = {IPU_DT_F16, 0, A, K}, bm = {IPU_DT_F16, 0, B, N};
    for (uint32_t i = 0; i < M; i++)
        for (uint32_t j = 0; j < N; j++) {
            double s = tk_dot(am, bm, i, j, K, 0, NULL);
            double got = tk_decode_at(IPU_DT_F16, 0, Crm, i * N + j);
            if (memcmp(Crm + (i * N + j) * 2, C + lay_at(M, i, j, 2), 2) != 0)
                TSEED_FAIL("acceptance: packed C[%u][%u] differs from its from_panels copy", i, j);
            double err = fabs(got - s);
            max_err = err > max_err || isnan(err) ? err : max_err;
            max_out = fabs(s) > max_out ? fabs(s) : max_out;
        }
    for (uint32_t b = lay_payload(M, N, 2); b < cp_bytes; b++)
        if (C[b] != 0)
            TSEED_FAIL("acceptance: packed C tail byte %u is 0x%02X", b, C[b]);
    print_message("acceptance R128/K64/C64 packed f16: max |out| %.6f, max error %.3g\n", max_out, max_err);
    if (!(max_out < 1.0) || !(max_err <= 0.001))
        TSEED_FAIL("acceptance: max error %.6g (max |out| %.6g), want <= 0.001", max_err, max_out);
    uint64_t want = want_rearrange(1, M, K, 2, 0) + want_rearrange(1, N, K, 2, 1) +
                    want_gemm(0, M, N, K, IPU_DT_F16, IPU_GEMM_WIDE | GEMM_PACKED) +
                    want_rearrange(0, M, N, 2, 0);
    assert_int_equal(job.compute, want);
    free(A), free(B), free(C), free(Crm);
}

int main(void)
{
    tseed_init("test_kernels_panels");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rearrange),          cmocka_unit_test(test_gemm_panels_f16),
        cmocka_unit_test(test_gemm_panels_f8),     cmocka_unit_test(test_retained),
        cmocka_unit_test(test_uninitialized_tail), cmocka_unit_test(test_pads_multiply),
        cmocka_unit_test(test_operand_rules),      cmocka_unit_test(test_acceptance_r128_k64_c64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
