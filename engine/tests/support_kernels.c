/* support_kernels.c: the shared kernel-test machinery of support_kernels.h:
 * jobs (calls, package data, read-back spans, guard bytes) run one per tile
 * of a fixture package in a single step, the arena that places operands, the
 * guard and row-gap assertions, and the reference helpers (decoding and
 * rounding from the formats' definitions, ulps, random codes, the exact dot
 * product, the GEMM tolerance and cycle formula, GELU's tanh formula).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_kernels.h"
#include "support_seed.h"

#include "ipu/ipu.h"
#include "numerics/numerics.h"

/* ---- jobs ------------------------------------------------------------------ */

void tk_kernel(tk_job *j, uint32_t entry, uint32_t argc, const uint32_t *args)
{
    assert_true(j->nk < TK_KERNELS && argc <= IPU_KERNEL_MAX_ARGS);
    tpkg_kernel *k = &j->k[j->nk++];
    memset(k, 0, sizeof *k);
    k->entry = entry, k->argc = argc;
    memcpy(k->args, args, argc * sizeof *args);
}

void tk_data(tk_job *j, uint32_t address, const void *bytes, uint32_t size)
{
    assert_true(j->ndata < TK_SPANS);
    assert_non_null(bytes);
    /* Package data is only read: the span type serves read-back too. */
    j->data[j->ndata++] = (tk_span){address, size, (uint8_t *)(uintptr_t)bytes, 0};
}

void tk_pattern(tk_job *j, uint32_t address, uint32_t size, uint32_t seed)
{
    assert_true(j->ndata < TK_SPANS);
    j->data[j->ndata++] = (tk_span){address, size, NULL, seed};
}

void tk_read(tk_job *j, uint32_t address, void *bytes, uint32_t size)
{
    assert_true(j->nread < TK_SPANS);
    j->read[j->nread++] = (tk_span){address, size, bytes, 0};
}

static const uint8_t *guard_pattern(void)
{
    static uint8_t pattern[TK_PAD];
    memset(pattern, TK_GUARD, sizeof pattern);
    return pattern;
}

void tk_guards(tk_job *j, uint32_t address, uint32_t size)
{
    assert_true(j->nguard < TK_GUARDS);
    int g = j->nguard++;
    tk_data(j, address - TK_PAD, guard_pattern(), TK_PAD);
    tk_data(j, address + size, guard_pattern(), TK_PAD);
    tk_read(j, address - TK_PAD, j->lo[g], TK_PAD);
    tk_read(j, address + size, j->hi[g], TK_PAD);
}

void tk_check_guards(const tk_job *j, const char *what, int tcase)
{
    for (int g = 0; g < j->nguard; g++) {
        tk_expect_guard(j->lo[g], TK_PAD, "%s case %d: below output %d", what, tcase, g);
        tk_expect_guard(j->hi[g], TK_PAD, "%s case %d: above output %d", what, tcase, g);
    }
}

ipu_status tk_run_on(uint32_t tiles, int threads, tk_job *jobs, uint32_t n, json_t **fault)
{
    assert_true(n <= tiles);
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    if (threads > 0)
        ipu_ctx_set_threads(ctx, threads);
    ipu_profile p;
    tpkg_profile(ctx, tiles, &p);
    ipu_pkg_builder *b = tpkg_builder(ctx, &p);
    uint32_t slot = ipu_pkg_new_slot(b);
    for (uint32_t t = 0; t < n; t++) {
        tk_job *j = &jobs[t];
        for (int d = 0; d < j->ndata; d++) {
            const tk_span *s = &j->data[d];
            if (s->bytes)
                TPKG_OK(ctx, ipu_pkg_add_data(b, t, s->address, s->bytes, s->size));
            else
                tpkg_data(b, t, s->address, s->size, s->seed);
        }
        if (j->nk)
            j->list = tpkg_compute_list(b, t, slot, j->k, (size_t)j->nk, 1);
    }
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0));
    ipu_package *pkg = tpkg_build(ctx, b);
    ipu_device *dev = tpkg_device(ctx, pkg);
    TSEED_OK(ctx, ipu_device_initialize(ctx, dev, pkg));
    char *text = NULL;
    ipu_status st = ipu_device_run(ctx, dev, &text);
    if (fault)
        *fault = st == IPU_OK ? NULL : tpkg_fault(ctx, dev);
    else
        TSEED_OK(ctx, st);
    if (st == IPU_OK) {
        json_t *report = json_loads(text, 0, NULL);
        assert_non_null(report);
        json_t *compute = json_object_get(json_object_get(report, "tiles"), "compute");
        for (uint32_t t = 0; t < n; t++) {
            tk_job *j = &jobs[t];
            j->compute = (uint64_t)json_integer_value(json_array_get(compute, t));
            for (int r = 0; r < j->nread; r++)
                TSEED_OK(ctx, ipu_device_read(ctx, dev, t, j->read[r].address, j->read[r].bytes,
                                              j->read[r].size));
        }
        json_decref(report);
    }
    ipu_free(text);
    ipu_device_free(dev);
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
    return st;
}

ipu_status tk_run(tk_job *jobs, uint32_t n, json_t **fault)
{
    return tk_run_on(TK_TILES, 0, jobs, n, fault);
}

void tk_sweep(uint32_t cases, void *sweep, tk_make_fn make, tk_check_fn check)
{
    for (uint32_t first = 0; first < cases; first += TK_TILES) {
        tk_job jobs[TK_TILES];
        uint32_t n = cases - first < TK_TILES ? cases - first : TK_TILES;
        memset(jobs, 0, sizeof jobs);
        for (uint32_t t = 0; t < n; t++)
            make(sweep, &jobs[t], first + t);
        tk_run(jobs, n, NULL);
        for (uint32_t t = 0; t < n; t++)
            check(sweep, &jobs[t], first + t);
    }
}

void tk_profile(uint32_t tiles, ipu_profile *out)
{
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    tpkg_profile(ctx, tiles, out);
    ipu_ctx_free(ctx);
}

tk_arena tk_arena_of(const ipu_profile *p)
{
    tk_arena a = {{tpkg_data0(p), p->region1_base}, {p->region1_base, ipu_profile_access_end(p)}};
    return a;
}

uint32_t tk_place(tk_arena *a, int r1, uint32_t bytes, uint32_t align)
{
    uint32_t address = tk_align_up(a->next[r1] + TK_PAD, align) + align * tseed_below(16);
    a->next[r1] = (address + bytes + TK_PAD + 7) & ~7u;
    assert_true(a->next[r1] <= a->end[r1]);
    return address;
}

/* ---- assertions ---------------------------------------------------------------- */

static void fail_in_context(const char *fmt, va_list ap, const char *detail)
{
    char what[256];
    vsnprintf(what, sizeof what, fmt, ap);
    TSEED_FAIL("%s: %s", what, detail);
}

void tk_expect_guard(const uint8_t *bytes, uint32_t count, const char *fmt, ...)
{
    for (uint32_t i = 0; i < count; i++)
        if (bytes[i] != TK_GUARD) {
            char detail[96];
            snprintf(detail, sizeof detail, "guard byte %u was overwritten (0x%02X)", i, bytes[i]);
            va_list ap;
            va_start(ap, fmt);
            fail_in_context(fmt, ap, detail);
            va_end(ap);
        }
}

void tk_expect_row_gaps(const uint8_t *bytes, uint32_t rows, uint32_t cols, uint32_t ld,
                        size_t size, const char *fmt, ...)
{
    for (uint32_t i = 0; i + 1 < rows; i++)
        for (size_t b = ((size_t)i * ld + cols) * size; b < (size_t)(i + 1) * ld * size; b++)
            if (bytes[b] != TK_GUARD) {
                char detail[96];
                snprintf(detail, sizeof detail, "gap byte %zu after row %u was overwritten (0x%02X)",
                         b, i, bytes[b]);
                va_list ap;
                va_start(ap, fmt);
                fail_in_context(fmt, ap, detail);
                va_end(ap);
            }
}

void tk_count_flags(uint32_t flags, int bits, int *on, int *off)
{
    for (int f = 0; f < bits; f++)
        (flags >> f & 1 ? on : off)[f]++;
}

void tk_expect_flags(const int *on, const int *off, int bits, const char *what)
{
    for (int f = 0; f < bits; f++)
        if (!on[f] || !off[f])
            TSEED_FAIL("%sflag bit %d not drawn both ways (set %d, clear %d times)", what, f, on[f],
                       off[f]);
}

void tk_expect_malformed_at(const char *file, int line, const json_t *fault, uint32_t tile,
                            const tk_job *job, const char *kernel, const char *word)
{
    uint32_t head = job->list + 4;
    tpkg_expect_fault_at(file, line, fault, "malformed_descriptor", tile, head,
                         head + tpkg_kernel_bytes(&job->k[0]));
    const char *got = tpkg_fault_str(fault, "kernel"), *detail = tpkg_fault_str(fault, "detail");
    if (got && strcmp(got, kernel) == 0 && detail && strstr(detail, word))
        return;
    char *text = json_dumps(fault, JSON_COMPACT);
    tseed_print_error();
    print_error("expected the fault of a malformed %s descriptor with a detail naming '%s'\n"
                "fault JSON: %s\n",
                kernel, word, text ? text : "?");
    free(text);
    _fail(file, line);
}

/* ---- the formats ------------------------------------------------------------------ */

uint32_t tk_align_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

size_t tk_size(int t) { return t == IPU_DT_F32 ? 4 : t == IPU_DT_F16 ? 2 : 1; }

double tk_decode(int t, int scale, const uint8_t *p)
{
    double v;
    int negative;
    if (t == IPU_DT_F32) {
        uint32_t u = ipu_load_u32(p);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (t == IPU_DT_F16) { /* bias 15, IEEE specials */
        unsigned h = p[0] | (unsigned)p[1] << 8, e = (h >> 10) & 31, m = h & 1023;
        negative = (h & 0x8000) != 0;
        v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, (int)e - 25) : ldexp(m, -24);
    } else if (t == IPU_DT_F143) { /* E4M3, bias 7, only S.1111.111 is NaN */
        unsigned c = p[0], e = (c >> 3) & 15, m = c & 7;
        negative = (c & 0x80) != 0;
        v = (c & 0x7F) == 0x7F ? NAN : ldexp(e ? ldexp(8 + m, (int)e - 10) : ldexp(m, -9), scale);
    } else { /* F152: E5M2, bias 15, IEEE specials */
        unsigned c = p[0], e = (c >> 2) & 31, m = c & 3;
        negative = (c & 0x80) != 0;
        v = e == 31 ? (m ? NAN : INFINITY)
                    : ldexp(e ? ldexp(4 + m, (int)e - 17) : ldexp(m, -16), scale);
    }
    return copysign(v, negative ? -1.0 : 1.0);
}

double tk_decode_at(int t, int scale, const uint8_t *base, size_t i)
{
    return tk_decode(t, scale, base + i * tk_size(t));
}

typedef struct narrow_fmt {
    int mbits, bias;
    double max;
    int saturate; /* FP8: saturate (infinities too); FP16: overflow to infinity */
} narrow_fmt;

double tk_round(int t, int scale, double v)
{
    static const narrow_fmt f16 = {10, 15, 65504.0, 0}, f143 = {3, 7, 448.0, 1},
                            f152 = {2, 15, 57344.0, 1};
    if (isnan(v))
        return v;
    if (t == IPU_DT_F32)
        return (double)(float)v;
    const narrow_fmt *f = t == IPU_DT_F16 ? &f16 : t == IPU_DT_F143 ? &f143 : &f152;
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

/* 2^(exponent of |v|, at least min_exp) / 2^mbits. */
static double spacing(double v, int min_exp, int mbits)
{
    int e = 0;
    if (v != 0)
        frexp(fabs(v), &e);
    int ex = v == 0 || e - 1 < min_exp ? min_exp : e - 1;
    return ldexp(1.0, ex - mbits);
}

double tk_f16_ulp(double v) { return spacing(v, -14, 10); }
double tk_f32_ulp(double v) { return spacing(v, -126, 23); }

void tk_codes(int t, int flags, uint8_t *dst, size_t count)
{
    int full = (flags & TK_CODES_FULL) != 0;
    for (size_t i = 0; i < count; i++) {
        unsigned sign = tseed_below(2);
        if (t == IPU_DT_F16) {
            unsigned e = tseed_below(16) ? 1 + tseed_below(16) : 0, m = tseed_below(1024);
            if ((flags & TK_CODES_ZEROS) && !tseed_below(32))
                e = m = 0;
            unsigned h = sign << 15 | e << 10 | m;
            dst[2 * i] = (uint8_t)h, dst[2 * i + 1] = (uint8_t)(h >> 8);
        } else if (t == IPU_DT_F32) {
            float v = (float)((int)tseed_below(65536) - 32768) / 8192.0f;
            memcpy(dst + 4 * i, &v, 4);
        } else if (t == IPU_DT_F143) {
            unsigned e = tseed_below(full ? 16 : 12), m = tseed_below(8);
            if (e == 15 && m == 7) /* S.1111.111 is NaN */
                m = 6;
            dst[i] = (uint8_t)(sign << 7 | e << 3 | m);
        } else {
            unsigned e = tseed_below(full ? 31 : 19), m = tseed_below(4);
            dst[i] = (uint8_t)(sign << 7 | e << 2 | m);
        }
    }
}

void tk_rows(int t, int flags, uint8_t *dst, uint32_t rows, uint32_t cols, uint32_t ld)
{
    size_t sz = tk_size(t);
    memset(dst, TK_NAN_BYTE, ((size_t)(rows - 1) * ld + cols) * sz);
    for (uint32_t r = 0; r < rows; r++)
        tk_codes(t, flags, dst + (size_t)r * ld * sz, cols);
}

/* ---- references ---------------------------------------------------------------------- */

double tk_dot(tk_matrix a, tk_matrix b, uint32_t i, uint32_t j, uint32_t k, double c, double *mag)
{
    double s = c, sum_mag = fabs(c);
    for (uint32_t l = 0; l < k; l++) {
        double pr = tk_decode_at(a.type, a.scale, a.codes, (size_t)i * a.ld + l) *
                    tk_decode_at(b.type, b.scale, b.codes, (size_t)l * b.ld + j);
        s += pr, sum_mag += fabs(pr);
    }
    if (mag)
        *mag = sum_mag;
    return s;
}

double tk_gemm_tol(int out_type, double exact, double mag)
{
    return 1e-5 * mag + (out_type == IPU_DT_F16 ? tk_f16_ulp(exact) : 0.0);
}

uint64_t tk_gemm_cycles(int f8, uint32_t m, uint32_t n, uint32_t k, int out_type)
{
    uint64_t rate = f8 ? 128 : out_type == IPU_DT_F16 ? 64 : 32;
    return 50 + ((uint64_t)m * n * k + rate - 1) / rate + 4ull * m;
}

double tk_gelu_formula(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}
