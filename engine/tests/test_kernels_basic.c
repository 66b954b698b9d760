/* test_kernels_basic.c: the basic kernel family (FILL, COPY, CAST, ADD,
 * GELU) over random shapes on the simulated device: at least 208 seeded
 * random cases per kernel (256 for CAST), run one per tile on hand-built
 * 16-tile packages (support_packages.h; operands as package data, outputs
 * read back with ipu_device_read from a window with 32 guard bytes on each
 * side that must stay untouched).  Counts cover every residue mod 8 with
 * inputs and outputs in region 0 and region 1 in every combination (checked
 * at the end of each sweep), at random aligned offsets (4 B for FILL and
 * COPY, 8 B for the vector kernels).  CAST covers all 16 type pairs, each
 * with every combination of the FP8 scales -4, -2, 0 and 3 on its FP8 sides.
 * References are computed here, from this file's own decoding of the
 * formats (DEVICE.md: IEEE binary16, OCP E4M3 and E5M2 times 2^scale) and
 * arithmetic in double: FILL and COPY byte-exact; CAST exact (the source's
 * exact value rounded to nearest-even on the destination grid, FP16
 * overflowing to infinity, FP8 saturating, NaN kept with its sign: equal
 * value and sign is the same code); ADD exact (the exact sum rounded once to
 * the type, which equals the kernel's FP32 sum rounded to FP16, double
 * rounding being innocuous with 24 >= 2 * 11 + 2 bits); GELU, which the
 * device evaluates in FP32, within tol = ulp32(r) + |x| 2^-23 of
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

#include "support_packages.h"
#include "support_seed.h"

#define TILES 16u
#define GUARD 0xA5u
#define PAD 32u

/* ---- one call per tile --------------------------------------------------------- */
typedef struct arena {
    uint32_t next[2], end[2];
} arena;

typedef struct job {
    tpkg_kernel k;
    uint32_t in_addr[2], in_size[2];
    uint8_t *in[2];
    int ins, in_r1, out_r1;
    uint32_t out_addr, out_size;
    uint8_t *before, *after; /* [out - PAD, out + out_size + PAD) */
    uint64_t cycles;         /* the formula, computed here */
    uint64_t compute;        /* the tile's compute cycles on the device */
} job;

static uint32_t place(arena *a, int r1, uint32_t bytes, uint32_t align)
{
    uint32_t address = (a->next[r1] + PAD + align - 1) / align * align + align * tseed_below(16);
    a->next[r1] = (address + bytes + PAD + 7) & ~7u;
    assert_true(a->next[r1] <= a->end[r1]);
    return address;
}

static void set_kernel(job *j, uint32_t entry, const uint32_t *args, uint32_t argc)
{
    memset(&j->k, 0, sizeof j->k);
    j->k.entry = entry, j->k.argc = argc;
    memcpy(j->k.args, args, argc * sizeof *args);
}

static uint8_t *add_input(job *j, uint32_t address, uint32_t size)
{
    uint8_t *bytes = malloc(size ? size : 1);
    assert_non_null(bytes);
    j->in_addr[j->ins] = address, j->in_size[j->ins] = size, j->in[j->ins++] = bytes;
    return bytes;
}

static void set_output(job *j, uint32_t address, uint32_t size)
{
    j->out_addr = address, j->out_size = size;
    j->before = malloc(size + 2 * PAD), j->after = malloc(size + 2 * PAD);
    assert_true(j->before && j->after);
    memset(j->before, GUARD, size + 2 * PAD);
}

static void free_job(job *j)
{
    for (int i = 0; i < j->ins; i++)
        free(j->in[i]);
    free(j->before), free(j->after);
}

/* Job t on tile t, one step; fills after and compute. */
static void run_jobs(job *jobs, uint32_t n)
{
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_profile p;
    tpkg_profile(ctx, TILES, &p);
    ipu_pkg_builder *b = tpkg_builder(ctx, &p);
    uint32_t slot = ipu_pkg_new_slot(b);
    for (uint32_t t = 0; t < n; t++) {
        job *j = &jobs[t];
        tpkg_compute_list(b, t, slot, &j->k, 1, 1);
        for (int i = 0; i < j->ins; i++)
            TPKG_OK(ctx, ipu_pkg_add_data(b, t, j->in_addr[i], j->in[i], j->in_size[i]));
        TPKG_OK(ctx, ipu_pkg_add_data(b, t, j->out_addr - PAD, j->before, j->out_size + 2 * PAD));
    }
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0));
    ipu_package *pkg = tpkg_build(ctx, b);
    ipu_device *dev = tpkg_device(ctx, pkg);
    TSEED_OK(ctx, ipu_device_initialize(ctx, dev, pkg));
    char *text = NULL;
    TSEED_OK(ctx, ipu_device_run(ctx, dev, &text));
    json_t *report = json_loads(text, 0, NULL);
    assert_non_null(report);
    json_t *compute = json_object_get(json_object_get(report, "tiles"), "compute");
    for (uint32_t t = 0; t < n; t++) {
        jobs[t].compute = (uint64_t)json_integer_value(json_array_get(compute, t));
        TSEED_OK(ctx, ipu_device_read(ctx, dev, t, jobs[t].out_addr - PAD, jobs[t].after,
                                      jobs[t].out_size + 2 * PAD));
    }
    json_decref(report);
    ipu_free(text);
    ipu_device_free(dev);
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
}

/* The output bytes (after PAD); the guards are checked by the sweep. */
static const uint8_t *output(const job *j) { return j->after + PAD; }

typedef void (*make_fn)(job *j, uint32_t index, arena *a);
typedef void (*check_fn)(const job *j, uint32_t index);

/* cases random cases, TILES per package: make, run, check guards and cycles,
 * check values; every (count residue, input region, output region) must
 * occur (residue_arg: which argument is the count). */
static void sweep(const char *name, uint64_t salt, uint32_t cases, uint32_t residue_arg,
                  make_fn make, check_fn check)
{
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_profile p;
    tpkg_profile(ctx, TILES, &p);
    ipu_ctx_free(ctx);
    /* The formulas here use DEVICE.md's rates. */
    assert_int_equal(p.vector_bytes_per_cycle, 8);
    assert_int_equal(p.copy_bytes_per_cycle, 8);
    tseed_reset(salt);
    int seen[8][2][2] = {{{0}}}, inputs = 0;
    for (uint32_t first = 0; first < cases; first += TILES) {
        job jobs[TILES];
        uint32_t n = cases - first < TILES ? cases - first : TILES;
        for (uint32_t t = 0; t < n; t++) {
            memset(&jobs[t], 0, sizeof jobs[t]);
            arena a = {{tpkg_data0(&p), p.region1_base},
                       {p.region1_base, ipu_profile_access_end(&p)}};
            make(&jobs[t], first + t, &a);
        }
        run_jobs(jobs, n);
        for (uint32_t t = 0; t < n; t++) {
            job *j = &jobs[t];
            uint32_t index = first + t;
            if (j->compute != j->cycles)
                TSEED_FAIL("%s case %u (args %u %u %u %u): tile compute %llu cycles, formula %llu",
                           name, index, j->k.args[0], j->k.args[1], j->k.args[2], j->k.args[3],
                           (unsigned long long)j->compute, (unsigned long long)j->cycles);
            for (uint32_t b = 0; b < PAD; b++)
                if (j->after[b] != GUARD || j->after[PAD + j->out_size + b] != GUARD)
                    TSEED_FAIL("%s case %u: a guard byte around the %u-byte output at 0x%X was "
                               "overwritten",
                               name, index, j->out_size, j->out_addr);
            check(j, index);
            seen[j->k.args[residue_arg] % 8][j->in_r1][j->out_r1]++;
            inputs |= j->ins > 0;
            free_job(j);
        }
    }
    for (int r = 0; r < 8; r++)
        for (int i = 0; i < (inputs ? 2 : 1); i++) /* FILL reads nothing */
            for (int o = 0; o < 2; o++)
                if (!seen[r][i][o])
                    TSEED_FAIL("%s: no case with count %% 8 = %d, input in region %d, output in "
                               "region %d",
                               name, r, i, o);
}

/* ---- the formats, from their definitions ------------------------------------------ */
static size_t tsize(int t) { return t == IPU_DT_F32 ? 4 : t == IPU_DT_F16 ? 2 : 1; }

typedef struct fmt {
    int ebits, mbits, bias, ieee; /* ieee: top exponent is inf/NaN (else only S.1111.111 is NaN) */
    double max;
    int saturate;
} fmt;
static const fmt F16 = {5, 10, 15, 1, 65504.0, 0}, F143 = {4, 3, 7, 0, 448.0, 1},
                 F152 = {5, 2, 15, 1, 57344.0, 1};
static const fmt *narrow(int t) { return t == IPU_DT_F16 ? &F16 : t == IPU_DT_F143 ? &F143 : &F152; }

/* The exact value of element i (times 2^scale for FP8); NaN for NaN codes. */
static double decode(int t, int scale, const uint8_t *base, size_t i)
{
    const uint8_t *e = base + i * tsize(t);
    if (t == IPU_DT_F32) {
        uint32_t u = (uint32_t)e[0] | (uint32_t)e[1] << 8 | (uint32_t)e[2] << 16 | (uint32_t)e[3] << 24;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    const fmt *f = narrow(t);
    unsigned code = t == IPU_DT_F16 ? (unsigned)e[0] | (unsigned)e[1] << 8 : e[0];
    unsigned top = f->ebits + f->mbits, m = code & ((1u << f->mbits) - 1);
    unsigned ex = (code >> f->mbits) & ((1u << f->ebits) - 1), emax = (1u << f->ebits) - 1;
    double sign = (code >> top) & 1 ? -1.0 : 1.0, v;
    if (f->ieee && ex == emax)
        v = m ? NAN : INFINITY;
    else if (!f->ieee && ex == emax && m == (1u << f->mbits) - 1)
        v = NAN;
    else if (ex)
        v = ldexp((double)((1u << f->mbits) | m), (int)ex - f->bias - f->mbits);
    else
        v = ldexp((double)m, 1 - f->bias - f->mbits);
    return copysign(t == IPU_DT_F16 ? v : ldexp(v, scale), sign);
}

/* Round a value to type t (times 2^scale), nearest even; NaN stays NaN. */
static double round_to(int t, int scale, double v)
{
    if (isnan(v))
        return v;
    if (t == IPU_DT_F32)
        return (double)(float)v;
    const fmt *f = narrow(t);
    if (t == IPU_DT_F16)
        scale = 0;
    if (isinf(v))
        return f->saturate ? copysign(ldexp(f->max, scale), v) : v;
    double x = fabs(ldexp(v, -scale)), r = 0;
    if (x > 0) {
        int e;
        frexp(x, &e);
        int ex = e - 1 < 1 - f->bias ? 1 - f->bias : e - 1;
        double q = ldexp(1.0, ex - f->mbits);
        r = nearbyint(x / q) * q;
        if (r > f->max)
            r = f->saturate ? f->max : INFINITY;
    }
    return copysign(ldexp(r, scale), v);
}

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
    size_t sz = tsize(t);
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

/* Residue, input region and output region of case index (every combination
 * within 32 consecutive indices), and a random count with that residue. */
static uint32_t count_of(uint32_t index, uint32_t max_eighths)
{
    return index % 8 + 8 * tseed_below(max_eighths);
}

/* ---- FILL and COPY ----------------------------------------------------------------- */
static void make_fill(job *j, uint32_t index, arena *a)
{
    uint32_t n = count_of(index, 1024);
    if (n == 0)
        n = 8;
    j->out_r1 = (int)((index / 16) % 2); /* no input: in_r1 stays 0 */
    uint32_t dst = place(a, j->out_r1, n, 4), pattern = (uint32_t)tseed_rnd();
    uint32_t args[] = {dst, n, pattern};
    set_kernel(j, IPU_K_FILL, args, 3);
    set_output(j, dst, n);
    j->cycles = 10 + ceil8(n);
}

static void check_fill(const job *j, uint32_t index)
{
    uint32_t pattern = j->k.args[2];
    for (uint32_t b = 0; b < j->out_size; b++)
        if (output(j)[b] != (uint8_t)(pattern >> (8 * (b % 4))))
            TSEED_FAIL("fill case %u: %u bytes at 0x%X with 0x%08X: byte %u is 0x%02X", index,
                       j->out_size, j->out_addr, pattern, b, output(j)[b]);
}

static void make_copy(job *j, uint32_t index, arena *a)
{
    uint32_t n = count_of(index, 1024);
    if (n == 0)
        n = 8;
    j->in_r1 = (int)((index / 8) % 2), j->out_r1 = (int)((index / 16) % 2);
    uint32_t src = place(a, j->in_r1, n, 4), dst = place(a, j->out_r1, n, 4);
    uint8_t *s = add_input(j, src, n);
    for (uint32_t b = 0; b < n; b++)
        s[b] = (uint8_t)tseed_rnd();
    uint32_t args[] = {src, dst, n};
    set_kernel(j, IPU_K_COPY, args, 3);
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
static void make_cast(job *j, uint32_t index, arena *a)
{
    static const int scales[] = {-4, -2, 0, 3};
    uint32_t q = (index / 16) % 16;
    int st = (int)(index % 16 / 4), dt = (int)(index % 4);
    int ss = is_f8(st) ? scales[q % 4] : 0, ds = is_f8(dt) ? scales[q / 4] : 0;
    uint32_t n = (index + q) % 8 + 8 * tseed_below(300);
    if (n == 0)
        n = 8;
    j->in_r1 = (int)(q % 2), j->out_r1 = (int)(q / 2 % 2);
    uint32_t sbytes = n * (uint32_t)tsize(st), dbytes = n * (uint32_t)tsize(dt);
    uint32_t src = place(a, j->in_r1, sbytes, 8), dst = place(a, j->out_r1, dbytes, 8);
    gen(st, add_input(j, src, sbytes), n);
    uint32_t args[] = {src, dst, n, (uint32_t)st, (uint32_t)ss, (uint32_t)dt, (uint32_t)ds};
    set_kernel(j, IPU_K_CAST, args, 7);
    set_output(j, dst, dbytes);
    size_t wide = tsize(st) > tsize(dt) ? tsize(st) : tsize(dt);
    j->cycles = 10 + ceil8((uint64_t)n * wide);
}

static void check_cast(const job *j, uint32_t index)
{
    const uint32_t *a = j->k.args;
    int st = (int)a[3], ss = (int)a[4], dt = (int)a[5], ds = (int)a[6];
    for (uint32_t i = 0; i < a[2]; i++) {
        double v = decode(st, ss, j->in[0], i), got = decode(dt, ds, output(j), i);
        double want = round_to(dt, ds, v);
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
    size_t sz = tsize(t);
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

static void make_add(job *j, uint32_t index, arena *a)
{
    int t = (index / 32) % 2 ? IPU_DT_F32 : IPU_DT_F16;
    uint32_t n = count_of(index, 300);
    if (n == 0)
        n = 8;
    j->in_r1 = (int)((index / 8) % 2), j->out_r1 = (int)((index / 16) % 2);
    uint32_t bytes = n * (uint32_t)tsize(t);
    uint32_t x = place(a, j->in_r1, bytes, 8), y = place(a, (int)tseed_below(2), bytes, 8);
    uint32_t dst = place(a, j->out_r1, bytes, 8);
    uint8_t *xb = add_input(j, x, bytes), *yb = add_input(j, y, bytes);
    gen_pair(t, xb, yb, n);
    uint32_t args[] = {x, y, dst, n, (uint32_t)t};
    set_kernel(j, IPU_K_ADD, args, 5);
    set_output(j, dst, bytes);
    j->cycles = 10 + ceil8(bytes);
}

static void check_add(const job *j, uint32_t index)
{
    int t = (int)j->k.args[4];
    for (uint32_t i = 0; i < j->k.args[3]; i++) {
        double x = decode(t, 0, j->in[0], i), y = decode(t, 0, j->in[1], i);
        double got = decode(t, 0, output(j), i);
        /* f16 + f16 is exact in double; f32 + f32 rounds once in double and
         * again to f32, which is innocuous (53 >= 2 * 24 + 2). */
        double want = round_to(t, 0, x + y);
        int ok = isnan(want) ? isnan(got) : same(got, want);
        if (!ok)
            TSEED_FAIL("add case %u: %s count %u element %u: %.9g + %.9g gave %.9g, want %.9g",
                       index, ipu_dtype_name(t), j->k.args[3], i, x, y, got, want);
    }
}

/* ---- GELU ------------------------------------------------------------------------------ */
static double gelu_formula(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

static double ulp32(double v)
{
    int e = 0;
    if (v != 0)
        frexp(fabs(v), &e);
    return ldexp(1.0, (v == 0 || e - 1 < -126 ? -126 : e - 1) - 23);
}

static void make_gelu(job *j, uint32_t index, arena *a)
{
    int t = (index / 32) % 2 ? IPU_DT_F32 : IPU_DT_F16;
    uint32_t n = count_of(index, 300);
    if (n == 0)
        n = 8;
    j->in_r1 = (int)((index / 8) % 2), j->out_r1 = (int)((index / 16) % 2);
    uint32_t bytes = n * (uint32_t)tsize(t);
    uint32_t src = place(a, j->in_r1, bytes, 8), dst = place(a, j->out_r1, bytes, 8);
    gen(t, add_input(j, src, bytes), n);
    uint32_t args[] = {src, dst, n, (uint32_t)t};
    set_kernel(j, IPU_K_GELU, args, 4);
    set_output(j, dst, bytes);
    j->cycles = 10 + 8 * ceil8(bytes);
}

static void check_gelu(const job *j, uint32_t index)
{
    int t = (int)j->k.args[3];
    for (uint32_t i = 0; i < j->k.args[2]; i++) {
        double x = decode(t, 0, j->in[0], i), got = decode(t, 0, output(j), i);
        double exact = gelu_formula(x), lo = exact, hi = exact;
        int ok;
        if (isnan(exact)) {
            ok = isnan(got);
        } else if (isinf(exact)) {
            ok = got == exact;
        } else {
            double r = (double)(float)exact, tol = ulp32(r) + fabs(x) * 0x1p-23;
            lo = round_to(t, 0, r - tol), hi = round_to(t, 0, r + tol);
            ok = lo <= got && got <= hi; /* false for NaN */
        }
        if (!ok)
            TSEED_FAIL("gelu case %u: %s count %u element %u: gelu(%.9g) = %.9g, formula %.17g, "
                       "accepted [%.9g, %.9g]",
                       index, ipu_dtype_name(t), j->k.args[2], i, x, got, exact, lo, hi);
    }
}

/* ---- tests ---------------------------------------------------------------------------- */
static void test_fill_sweep(void **state)
{
    (void)state;
    sweep("fill", 1, 208, 1, make_fill, check_fill);
}
static void test_copy_sweep(void **state)
{
    (void)state;
    sweep("copy", 2, 208, 2, make_copy, check_copy);
}
static void test_cast_sweep(void **state)
{
    (void)state;
    sweep("cast", 3, 256, 2, make_cast, check_cast);
}
static void test_add_sweep(void **state)
{
    (void)state;
    sweep("add", 4, 208, 3, make_add, check_add);
}
static void test_gelu_sweep(void **state)
{
    (void)state;
    sweep("gelu", 5, 208, 2, make_gelu, check_gelu);
}

int main(void)
{
    tseed_init("test_kernels_basic");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_sweep), cmocka_unit_test(test_copy_sweep),
        cmocka_unit_test(test_cast_sweep), cmocka_unit_test(test_add_sweep),
        cmocka_unit_test(test_gelu_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
