/* test_kernels_basic.c: the basic kernel family (FILL, COPY, CAST, ADD,
 * GELU) over random shapes on the simulated device: at least 208 seeded
 * random cases per kernel (256 for CAST), run one per tile on hand-built
 * 16-tile packages (support_kernels.h; operands as package data, outputs
 * read back with ipu_device_read from a window with 32 guard bytes on each
 * side that must stay untouched).  Counts cover every residue mod 8 with
 * inputs and outputs in region 0 and region 1 in every combination (checked
 * at the end of each sweep), at random aligned offsets (4 B for FILL and
 * COPY, 8 B for the vector kernels).  CAST covers all 16 type pairs, each
 * with every combination of the FP8 scales -4, -2, 0 and 3 on its FP8 sides.
 * References are computed here, from the test decoding and rounding of the
 * formats (support_kernels.h; DEVICE.md: IEEE binary16, OCP E4M3 and E5M2
 * times 2^scale) and arithmetic in double: FILL and COPY byte-exact; CAST exact (the source's
 * exact value rounded to nearest-even on the destination grid, FP16
 * overflowing to infinity, FP8 saturating, NaN kept with its sign: equal
 * value and sign is the same code); ADD exact (the exact sum rounded once to
 * the type, which equals the kernel's FP32 sum rounded to FP16, double
 * rounding being innocuous with 24 >= 2 * 11 + 2 bits); GELU, which the
 * device evaluates in FP32, within tol = tk_f32_ulp(r) + |x| 2^-23 of
 * r = fp32(the tanh formula in double) before the final rounding to the
 * type, the output lying in [type(r - tol), type(r + tol)] (the FP32
 * evaluation's cubic, tanh and 1 + tanh cost a few 2^-24 |x|; see
 * test_kernels_device.c, which checks every FP16 code exhaustively).  Each
 * tile's compute cycles must equal the kernel's formula computed here from
 * DEVICE.md's rates (8 bytes per copy cycle and per vector cycle).  The seed
 * comes from IPU_TEST_SEED or the clock and is printed on every failure.
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

#define PAD TK_PAD

/* ---- one call per tile --------------------------------------------------------- */
typedef struct job {
    tk_job *run; /* the call, its package data and the read-back window */
    uint32_t in_addr[2], in_size[2];
    uint8_t *in[2];
    int ins, in_r1, out_r1;
    uint32_t out_addr, out_size;
    uint8_t *before, *after; /* [out - PAD, out + out_size + PAD) */
    uint64_t cycles;         /* the formula, computed here */
} job;

static const tpkg_kernel *kernel_of(const job *j) { return &j->run->k[0]; }

static uint8_t *add_input(job *j, uint32_t address, uint32_t size)
{
    uint8_t *bytes = malloc(size ? size : 1);
    assert_non_null(bytes);
    j->in_addr[j->ins] = address, j->in_size[j->ins] = size, j->in[j->ins++] = bytes;
    tk_data(j->run, address, bytes, size);
    return bytes;
}

/* The output window: guard bytes before the call, read back after it. */
static void set_output(job *j, uint32_t address, uint32_t size)
{
    j->out_addr = address, j->out_size = size;
    j->before = malloc(size + 2 * PAD), j->after = malloc(size + 2 * PAD);
    assert_true(j->before && j->after);
    memset(j->before, TK_GUARD, size + 2 * PAD);
    tk_data(j->run, address - PAD, j->before, size + 2 * PAD);
    tk_read(j->run, address - PAD, j->after, size + 2 * PAD);
}

static void free_job(job *j)
{
    for (int i = 0; i < j->ins; i++)
        free(j->in[i]);
    free(j->before), free(j->after);
}

/* The output bytes (after PAD); the guards are checked by the sweep. */
static const uint8_t *output(const job *j) { return j->after + PAD; }

typedef void (*make_fn)(job *j, uint32_t index, tk_arena *a);
typedef void (*check_fn)(const job *j, uint32_t index);

/* A kernel's sweep: how to make and check its cases, the package's jobs and
 * which (count residue, input region, output region) occurred. */
typedef struct bsweep {
    const char *name;
    uint32_t residue_arg; /* which argument is the count */
    make_fn make;
    check_fn check;
    ipu_profile p;
    job jobs[TK_TILES];
    int seen[8][2][2], inputs;
} bsweep;

static void sweep_make(void *sweep, tk_job *run, uint32_t index)
{
    bsweep *S = sweep;
    job *j = &S->jobs[index % TK_TILES];
    memset(j, 0, sizeof *j);
    j->run = run;
    tk_arena a = tk_arena_of(&S->p);
    S->make(j, index, &a);
}

/* Cycles and guards, then the kernel's check. */
static void sweep_check(void *sweep, const tk_job *run, uint32_t index)
{
    bsweep *S = sweep;
    job *j = &S->jobs[index % TK_TILES];
    const uint32_t *args = kernel_of(j)->args;
    if (run->compute != j->cycles)
        TSEED_FAIL("%s case %u (args %u %u %u %u): tile compute %llu cycles, formula %llu", S->name,
                   index, args[0], args[1], args[2], args[3], (unsigned long long)run->compute,
                   (unsigned long long)j->cycles);
    tk_expect_guard(j->after, PAD, "%s case %u: below the %u-byte output at 0x%X", S->name, index,
                    j->out_size, j->out_addr);
    tk_expect_guard(j->after + PAD + j->out_size, PAD, "%s case %u: above the %u-byte output at 0x%X",
                    S->name, index, j->out_size, j->out_addr);
    S->check(j, index);
    S->seen[args[S->residue_arg] % 8][j->in_r1][j->out_r1]++;
    S->inputs |= j->ins > 0;
    free_job(j);
}

/* cases random cases, TK_TILES per package (tk_sweep); every (count residue,
 * input region, output region) must occur. */
static void sweep(const char *name, uint64_t salt, uint32_t cases, uint32_t residue_arg,
                  make_fn make, check_fn check)
{
    bsweep S;
    memset(&S, 0, sizeof S);
    S.name = name, S.residue_arg = residue_arg, S.make = make, S.check = check;
    tk_profile(TK_TILES, &S.p);
    /* The formulas here use DEVICE.md's rates. */
    assert_int_equal(S.p.vector_bytes_per_cycle, 8);
    assert_int_equal(S.p.copy_bytes_per_cycle, 8);
    tseed_reset(salt);
    tk_sweep(cases, &S, sweep_make, sweep_check);
    for (int r = 0; r < 8; r++)
        for (int i = 0; i < (S.inputs ? 2 : 1); i++) /* FILL reads nothing */
            for (int o = 0; o < 2; o++)
                if (!S.seen[r][i][o])
                    TSEED_FAIL("%s: no case with count %% 8 = %d, input in region %d, output in "
                               "region %d",
                               name, r, i, o);
}

/* ---- the formats (support_kernels.h decodes and rounds) --------------------------- */
/* Same value, same sign, or both NaN with the same sign. */
static int same(double got, double want)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got) && !signbit(got) == !signbit(want);
    return got == want && !signbit(got) == !signbit(want);
}

/* Random element codes: any bits for narrow types; FP32 mixes any bits,
 * specials, values on fine grids (ties for the narrow types) and [-12, 12]. */
static void gen(int t, uint8_t *dst, uint32_t count)
{
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f,
                                    65520.0f, 65519.99f, 448.0f, 464.0f, 57344.0f, 61440.0f,
                                    3.4028235e38f, 1e-45f, 5.9604645e-8f, 2.9802322e-8f};
    size_t sz = tk_size(t);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t u = (uint32_t)tseed_rnd();
        if (t == IPU_DT_F32) {
            float v;
            uint32_t pick = tseed_below(8);
            if (pick == 0) {
                v = special[tseed_below(sizeof special / sizeof special[0])];
            } else if (pick <= 3) {
                v = (float)ldexp((double)(tseed_below(4096) | 1), (int)tseed_below(60) - 44);
            } else if (pick <= 5) {
                v = (float)(((double)tseed_below(1u << 24) / (1u << 24) * 2 - 1) * 12);
            } else {
                memcpy(&v, &u, 4);
            }
            if (tseed_below(2))
                v = -v;
            memcpy(&u, &v, 4);
        }
        for (size_t b = 0; b < sz; b++)
            dst[i * sz + b] = (uint8_t)(u >> (8 * b));
    }
}

static uint64_t ceil8(uint64_t bytes) { return (bytes + 7) / 8; }

/* Case index's count, random with residue index % 8 (8 rather than 0), and
 * its regions: input index / 8 % 2 (with_input; else 0), output index / 16 % 2,
 * so 32 consecutive indices hold every combination. */
static uint32_t count_of(job *j, uint32_t index, uint32_t max_eighths, int with_input)
{
    uint32_t n = index % 8 + 8 * tseed_below(max_eighths);
    j->in_r1 = with_input ? (int)((index / 8) % 2) : 0, j->out_r1 = (int)((index / 16) % 2);
    return n ? n : 8;
}

/* ---- FILL and COPY ----------------------------------------------------------------- */
static void make_fill(job *j, uint32_t index, tk_arena *a)
{
    uint32_t n = count_of(j, index, 1024, 0);
    uint32_t dst = tk_place(a, j->out_r1, n, 4), pattern = (uint32_t)tseed_rnd();
    uint32_t args[] = {dst, n, pattern};
    tk_kernel(j->run, IPU_K_FILL, 3, args);
    set_output(j, dst, n);
    j->cycles = 10 + ceil8(n);
}

static void check_fill(const job *j, uint32_t index)
{
    uint32_t pattern = kernel_of(j)->args[2];
    for (uint32_t b = 0; b < j->out_size; b++)
        if (output(j)[b] != (uint8_t)(pattern >> (8 * (b % 4))))
            TSEED_FAIL("fill case %u: %u bytes at 0x%X with 0x%08X: byte %u is 0x%02X", index,
                       j->out_size, j->out_addr, pattern, b, output(j)[b]);
}

static void make_copy(job *j, uint32_t index, tk_arena *a)
{
    uint32_t n = count_of(j, index, 1024, 1);
    uint32_t src = tk_place(a, j->in_r1, n, 4), dst = tk_place(a, j->out_r1, n, 4);
    uint8_t *s = add_input(j, src, n);
    for (uint32_t b = 0; b < n; b++)
        s[b] = (uint8_t)tseed_rnd();
    uint32_t args[] = {src, dst, n};
    tk_kernel(j->run, IPU_K_COPY, 3, args);
    set_output(j, dst, n);
    j->cycles = 10 + ceil8(n);
}

static void check_copy(const job *j, uint32_t index)
{
    for (uint32_t b = 0; b < j->out_size; b++)
        if (output(j)[b] != j->in[0][b])
            TSEED_FAIL("copy case %u: %u bytes 0x%X -> 0x%X: byte %u is 0x%02X, source 0x%02X",
                       index, j->out_size, j->in_addr[0], j->out_addr, b, output(j)[b], j->in[0][b]);
}

/* ---- CAST ---------------------------------------------------------------------------- */
static int is_f8(int t) { return t == IPU_DT_F143 || t == IPU_DT_F152; }

/* Case i: type pair i % 16; q = i / 16 picks the FP8 scales (q % 4 for the
 * source, q / 4 for the destination, where FP8), the regions (q % 2 and
 * q / 2 % 2) and the residue (i + q) % 8, so 256 cases hold every pair with
 * every scale combination and every residue with every region pair. */
static void make_cast(job *j, uint32_t index, tk_arena *a)
{
    static const int scales[] = {-4, -2, 0, 3};
    uint32_t q = (index / 16) % 16;
    int st = (int)(index % 16 / 4), dt = (int)(index % 4);
    int ss = is_f8(st) ? scales[q % 4] : 0, ds = is_f8(dt) ? scales[q / 4] : 0;
    uint32_t n = (index + q) % 8 + 8 * tseed_below(300);
    if (n == 0)
        n = 8;
    j->in_r1 = (int)(q % 2), j->out_r1 = (int)(q / 2 % 2);
    uint32_t sbytes = n * (uint32_t)tk_size(st), dbytes = n * (uint32_t)tk_size(dt);
    uint32_t src = tk_place(a, j->in_r1, sbytes, 8), dst = tk_place(a, j->out_r1, dbytes, 8);
    gen(st, add_input(j, src, sbytes), n);
    uint32_t args[] = {src, dst, n, (uint32_t)st, (uint32_t)ss, (uint32_t)dt, (uint32_t)ds};
    tk_kernel(j->run, IPU_K_CAST, 7, args);
    set_output(j, dst, dbytes);
    size_t wide = tk_size(st) > tk_size(dt) ? tk_size(st) : tk_size(dt);
    j->cycles = 10 + ceil8((uint64_t)n * wide);
}

static void check_cast(const job *j, uint32_t index)
{
    const uint32_t *a = kernel_of(j)->args;
    int st = (int)a[3], ss = (int)a[4], dt = (int)a[5], ds = (int)a[6];
    for (uint32_t i = 0; i < a[2]; i++) {
        double v = tk_decode_at(st, ss, j->in[0], i), got = tk_decode_at(dt, ds, output(j), i);
        double want = tk_round(dt, ds, v);
        int ok = same(got, want);
        if (ok && st == IPU_DT_F32 && dt == IPU_DT_F32) /* a plain copy, NaN payloads too */
            ok = memcmp(output(j) + 4 * i, j->in[0] + 4 * i, 4) == 0;
        if (!ok)
            TSEED_FAIL("cast case %u: %s (scale %d) -> %s (scale %d), count %u, element %u: "
                       "%.9g gave %.9g, want %.9g",
                       index, ipu_dtype_name(st), ss, ipu_dtype_name(dt), ds, a[2], i, v, got, want);
    }
}

/* ---- ADD ------------------------------------------------------------------------------- */
/* Pairs with nearby exponents (cancellation, carries) a third of the time. */
static void gen_pair(int t, uint8_t *x, uint8_t *y, uint32_t count)
{
    gen(t, x, count);
    gen(t, y, count);
    size_t sz = tk_size(t);
    int mbits = t == IPU_DT_F32 ? 23 : 10;
    for (uint32_t i = 0; i < count; i++) {
        if (tseed_below(3))
            continue;
        uint32_t u = 0;
        for (size_t b = 0; b < sz; b++)
            u |= (uint32_t)x[i * sz + b] << (8 * b);
        /* Same exponent, another mantissa, either sign; or the exact negation. */
        uint32_t sign = 1u << (8 * sz - 1), mmask = (1u << mbits) - 1;
        uint32_t w = tseed_below(4) ? (u & ~mmask & ~sign) | ((uint32_t)tseed_rnd() & mmask) |
                                          (tseed_below(2) ? sign : 0)
                                    : u ^ sign;
        for (size_t b = 0; b < sz; b++)
            y[i * sz + b] = (uint8_t)(w >> (8 * b));
    }
}

static void make_add(job *j, uint32_t index, tk_arena *a)
{
    int t = (index / 32) % 2 ? IPU_DT_F32 : IPU_DT_F16;
    uint32_t n = count_of(j, index, 300, 1), bytes = n * (uint32_t)tk_size(t);
    uint32_t x = tk_place(a, j->in_r1, bytes, 8), y = tk_place(a, (int)tseed_below(2), bytes, 8);
    uint32_t dst = tk_place(a, j->out_r1, bytes, 8);
    uint8_t *xb = add_input(j, x, bytes), *yb = add_input(j, y, bytes);
    gen_pair(t, xb, yb, n);
    uint32_t args[] = {x, y, dst, n, (uint32_t)t};
    tk_kernel(j->run, IPU_K_ADD, 5, args);
    set_output(j, dst, bytes);
    j->cycles = 10 + ceil8(bytes);
}

static void check_add(const job *j, uint32_t index)
{
    int t = (int)kernel_of(j)->args[4];
    for (uint32_t i = 0; i < kernel_of(j)->args[3]; i++) {
        double x = tk_decode_at(t, 0, j->in[0], i), y = tk_decode_at(t, 0, j->in[1], i);
        double got = tk_decode_at(t, 0, output(j), i);
        /* f16 + f16 is exact in double; f32 + f32 rounds once in double and
         * again to f32, which is innocuous (53 >= 2 * 24 + 2). */
        double want = tk_round(t, 0, x + y);
        int ok = isnan(want) ? isnan(got) : same(got, want);
        if (!ok)
            TSEED_FAIL("add case %u: %s count %u element %u: %.9g + %.9g gave %.9g, want %.9g",
                       index, ipu_dtype_name(t), kernel_of(j)->args[3], i, x, y, got, want);
    }
}

/* ---- GELU, both forms ------------------------------------------------------------------- */
static void make_gelu_entry(job *j, uint32_t index, tk_arena *a, uint32_t entry)
{
    int t = (index / 32) % 2 ? IPU_DT_F32 : IPU_DT_F16;
    uint32_t n = count_of(j, index, 300, 1), bytes = n * (uint32_t)tk_size(t);
    uint32_t src = tk_place(a, j->in_r1, bytes, 8), dst = tk_place(a, j->out_r1, bytes, 8);
    gen(t, add_input(j, src, bytes), n);
    uint32_t args[] = {src, dst, n, (uint32_t)t};
    tk_kernel(j->run, entry, 4, args);
    set_output(j, dst, bytes);
    j->cycles = 10 + 8 * ceil8(bytes);
}

static void make_gelu(job *j, uint32_t index, tk_arena *a) { make_gelu_entry(j, index, a, IPU_K_GELU); }
static void make_gelu_erf(job *j, uint32_t index, tk_arena *a) { make_gelu_entry(j, index, a, IPU_K_GELU_ERF); }

/* The erf form in double: x Phi(x). */
static double gelu_erf_formula(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

/* Each element within an FP32 rounding (and erff's or tanhf's own error, a few ulps) of the
 * form's formula in double, then rounded to the type. */
static void check_gelu(const job *j, uint32_t index)
{
    int t = (int)kernel_of(j)->args[3], erf_form = kernel_of(j)->entry == IPU_K_GELU_ERF;
    for (uint32_t i = 0; i < kernel_of(j)->args[2]; i++) {
        double x = tk_decode_at(t, 0, j->in[0], i), got = tk_decode_at(t, 0, output(j), i);
        double exact = erf_form ? gelu_erf_formula(x) : tk_gelu_formula(x), lo = exact, hi = exact;
        int ok;
        if (isnan(exact)) {
            ok = isnan(got);
        } else if (isinf(exact)) {
            ok = got == exact;
        } else {
            double r = (double)(float)exact, tol = tk_f32_ulp(r) + fabs(x) * (erf_form ? 0x1p-21 : 0x1p-23);
            lo = tk_round(t, 0, r - tol), hi = tk_round(t, 0, r + tol);
            ok = lo <= got && got <= hi; /* false for NaN */
        }
        if (!ok)
            TSEED_FAIL("%s case %u: %s count %u element %u: gelu(%.9g) = %.9g, formula %.17g, "
                       "accepted [%.9g, %.9g]",
                       erf_form ? "gelu_erf" : "gelu", index, ipu_dtype_name(t), kernel_of(j)->args[2], i, x, got, exact, lo, hi);
    }
}

/* ---- tests ---------------------------------------------------------------------------- */
static void test_fill_sweep(void **state) { (void)state; sweep("fill", 1, 208, 1, make_fill, check_fill); }
static void test_copy_sweep(void **state) { (void)state; sweep("copy", 2, 208, 2, make_copy, check_copy); }
static void test_cast_sweep(void **state) { (void)state; sweep("cast", 3, 256, 2, make_cast, check_cast); }
static void test_add_sweep(void **state) { (void)state; sweep("add", 4, 208, 3, make_add, check_add); }
static void test_gelu_sweep(void **state) { (void)state; sweep("gelu", 5, 208, 2, make_gelu, check_gelu); }
static void test_gelu_erf_sweep(void **state)
{
    (void)state;
    sweep("gelu_erf", 6, 208, 2, make_gelu_erf, check_gelu);
}

int main(void)
{
    tseed_init("test_kernels_basic");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_sweep), cmocka_unit_test(test_copy_sweep),
        cmocka_unit_test(test_cast_sweep), cmocka_unit_test(test_add_sweep),
        cmocka_unit_test(test_gelu_sweep),
        cmocka_unit_test(test_gelu_erf_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
