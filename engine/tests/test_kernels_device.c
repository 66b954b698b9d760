/* test_kernels_device.c: runs every kernel entry (FILL, COPY, CAST, ADD,
 * GEMM_F16, GEMM_F8, GELU) on the simulated device through small hand-built
 * 4-tile packages (empty init program; operands uploaded through a host input
 * stream into the aperture and COPY-ed into place, or loaded as package data;
 * results read back through COPY + a host output stream, or with
 * ipu_device_read) and compares them with references computed here in double
 * precision from the test decoders of the formats (support_kernels.h,
 * DEVICE.md):
 * GEMMs over ~50 seeded random odd shapes per family (f16/f32 outputs,
 * accumulate and initialize, F143/F152 with scales -2/-4, WIDE operands in
 * region 1; the fixed shapes with packed rows, the random ones with row
 * strides lda, ldb, ldc of the minimum plus 0..9 elements, the gap elements
 * of A and B holding NaN codes a read would spread into the result and those
 * of C guard bytes that must stay untouched), CAST between every type pair
 * and scale bit-exactly, ADD f16/f32 bit-exactly, FILL and COPY byte-exactly
 * with guard bytes around every output, GELU over every FP16 code and an FP32
 * set with the specials (bit-identical to ipu_num_gelu per element, and
 * within ulp32 + |x| 2^-23 of the double formula before the final rounding:
 * see check_gelu), and the malformed_descriptor fault of a GEMM row stride
 * below its minimum.  Tolerances: f32 GEMM output within
 * 1e-5 * (sum |a||b| + |c|) of the exact value; f16 output within one f16 ulp
 * of the exact value plus that.  The cycle report of a lone GEMM step must
 * equal DEVICE.md's formula 50 + ceil(m*n*k / rate) + 4*m (rate 128 FP8,
 * 64 FP16->FP16, 32 FP16->FP32), whatever the strides, and the step total
 * compute + sync 150 + exchange; with four GEMMs on four tiles each tile's
 * compute is its formula, the step's the slowest tile's and each tile waits
 * the difference.  GELU costs 10 + 8 * ceil(count * size / 8) per tile.  The
 * seed comes from IPU_TEST_SEED or the clock and is printed on every failure.
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

#define PROFILE_JSON "{\"name\":\"c600-4\",\"tiles\":4}"
#define TILES 4u
/* c600 layout (DEVICE.md): code after the 1,760 B runtime state, the host
 * aperture, descriptors above it, operands in the rest of region 0 and in
 * region 1. */
#define CODE_BASE 0x4C700u
#define APERTURE_BASE 0x50000u
#define APERTURE_END 0x58000u
#define DESC_BASE 0x58000u
#define DESC_LIMIT 0x60000u
#define R0 0x60000u
#define R1 0x80000u
#define GEMM_CASES 50
#define GUARD TK_GUARD

/* Exact value of one element (FP8 times 2^scale); *is_nan set for NaN codes. */
static double decode(int dtype, int scale, const uint8_t *p, int *is_nan)
{
    double v = tk_decode(dtype, scale, p);
    *is_nan = isnan(v) != 0;
    return v;
}

/* Random finite codes of moderate range, one FP16 in 32 zero (full: the
 * whole finite range, FP8 only). */
static void gen_codes(int dtype, int full, uint8_t *dst, size_t count)
{
    tk_codes(dtype, TK_CODES_ZEROS | (full ? TK_CODES_FULL : 0), dst, count);
}

/* ---- running hand-built packages --------------------------------------- */
typedef struct span {
    uint32_t address, size;
    uint8_t *bytes;
    int direct; /* upload: package data (else stream + COPY); readback: ipu_device_read */
} span;

typedef struct kjob {
    uint32_t tile;
    uint32_t desc[1 + IPU_KERNEL_MAX_ARGS]; /* u16 entry | u16 argc << 16, then arguments */
    span in[6], out[4];
    int ins, outs;
} kjob;

static void add_in(kjob *j, uint32_t address, const void *bytes, uint32_t size, int direct)
{
    j->in[j->ins++] = (span){address, size, (uint8_t *)bytes, direct};
}
static void add_out(kjob *j, uint32_t address, void *bytes, uint32_t size, int direct)
{
    j->out[j->outs++] = (span){address, size, bytes, direct};
}
/* Guard bytes (GUARD) on both sides of [address, +size): package data, read
 * back directly into lo and hi. */
static void add_guards(kjob *j, uint32_t address, uint32_t size, uint8_t *lo, uint8_t *hi)
{
    static uint8_t pattern[32];
    memset(pattern, GUARD, sizeof pattern);
    add_in(j, address - 32, pattern, 32, 1);
    add_in(j, address + size, pattern, 32, 1);
    add_out(j, address - 32, lo, 32, 1);
    add_out(j, address + size, hi, 32, 1);
}

static void put_u32s(ipu_ctx *ctx, ipu_pkg_builder *b, uint32_t tile, uint32_t slot,
                     const uint32_t *words, uint32_t count)
{
    uint8_t bytes[4 * 64];
    assert_true(count <= 64);
    for (uint32_t i = 0; i < count; i++)
        ipu_store_u32(bytes + 4 * i, words[i]);
    TSEED_OK(ctx, ipu_pkg_put_slot(b, tile, slot, bytes, 4 * count, NULL));
}

/* Bytes the staged (not direct) spans take in their host stream. */
static uint32_t staged_bytes(const span *spans, int count)
{
    uint32_t total = 0;
    for (int i = 0; i < count; i++)
        total += spans[i].direct ? 0 : tk_align_up(spans[i].size, 8);
    return total;
}

#define STAGE_SPANS 6                       /* spans per staging record at most */
#define HOST_WORDS (IPU_HOST_ENTRY_SIZE / 4) /* words per host descriptor entry */
#define HOST_RECORD_WORDS (1 + HOST_WORDS * STAGE_SPANS)
#define COPY_RECORD_WORDS (1 + 4 * STAGE_SPANS)

/* The two records that move the staged spans through the host aperture, an
 * entry per span from APERTURE_BASE up: the host descriptor (stream, *offset,
 * aperture address, size as one row) and the COPY list, aperture -> span for inputs
 * (their bytes go into stream_bytes at *offset), span -> aperture for
 * outputs.  *offset advances past them; returns the entry count, which is
 * also each record's first word. */
static uint32_t stage(const span *spans, int count, int input, uint32_t stream, uint32_t *offset,
                      uint8_t *stream_bytes, uint32_t host[HOST_RECORD_WORDS],
                      uint32_t copy[COPY_RECORD_WORDS])
{
    uint32_t n = 0, ap = APERTURE_BASE;
    for (int i = 0; i < count; i++) {
        const span *s = &spans[i];
        if (s->direct)
            continue;
        assert_true(ap + s->size <= APERTURE_END);
        assert_true(n < STAGE_SPANS);
        if (input)
            memcpy(stream_bytes + *offset, s->bytes, s->size);
        uint32_t from = input ? ap : s->address, to = input ? s->address : ap;
        uint32_t h[HOST_WORDS] = {stream, *offset, ap, s->size, 1, s->size, s->size, 0};
        uint32_t c[4] = {IPU_K_COPY | 3u << 16, from, to, s->size};
        memcpy(host + 1 + HOST_WORDS * n, h, sizeof h);
        memcpy(copy + 1 + 4 * n, c, sizeof c);
        n++, ap += tk_align_up(s->size, 8), *offset += tk_align_up(s->size, 8);
    }
    host[0] = copy[0] = n;
    return n;
}

/* Build and run one package: per job, host input + COPY into place, the
 * kernel as its own step, COPY + host output back.  Returns the parsed cycle
 * report; *kernel_step points at the kernel's step inside it. */
static json_t *run_jobs(kjob *jobs, int njobs, json_t **kernel_step)
{
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_profile p;
    TSEED_OK(ctx, ipu_profile_parse(ctx, PROFILE_JSON, 0, &p));
    ipu_pkg_builder *b = NULL;
    TSEED_OK(ctx, ipu_pkg_builder_create(ctx, &p, CODE_BASE, DESC_BASE, DESC_LIMIT, &b));
    uint32_t s_hin = ipu_pkg_new_slot(b), s_cin = ipu_pkg_new_slot(b), s_k = ipu_pkg_new_slot(b);
    uint32_t s_cout = ipu_pkg_new_slot(b), s_hout = ipu_pkg_new_slot(b);
    uint32_t in_total = 0, out_total = 0, in_id = 0, out_id = 0;
    for (int j = 0; j < njobs; j++) {
        in_total += staged_bytes(jobs[j].in, jobs[j].ins);
        out_total += staged_bytes(jobs[j].out, jobs[j].outs);
    }
    if (in_total)
        TSEED_OK(ctx, ipu_pkg_add_stream(b, "in", IPU_STREAM_INPUT, in_total, &in_id));
    if (out_total)
        TSEED_OK(ctx, ipu_pkg_add_stream(b, "out", IPU_STREAM_OUTPUT, out_total, &out_id));
    uint8_t *in_bytes = calloc(1, in_total + 1);
    assert_non_null(in_bytes);
    uint32_t in_off = 0, out_off = 0;
    for (int j = 0; j < njobs; j++) {
        kjob *jb = &jobs[j];
        uint32_t t = jb->tile, host[HOST_RECORD_WORDS], copy[COPY_RECORD_WORDS];
        TSEED_OK(ctx, ipu_pkg_add_code(b, t, (int)(jb->desc[0] & 0xFFFF)));
        for (int i = 0; i < jb->ins; i++) {
            const span *s = &jb->in[i];
            if (s->direct)
                TSEED_OK(ctx, ipu_pkg_add_data(b, t, s->address, s->bytes, s->size));
        }
        uint32_t n = stage(jb->in, jb->ins, 1, in_id, &in_off, in_bytes, host, copy);
        if (n) {
            TSEED_OK(ctx, ipu_pkg_add_code(b, t, IPU_K_COPY));
            put_u32s(ctx, b, t, s_hin, host, 1 + HOST_WORDS * n);
            put_u32s(ctx, b, t, s_cin, copy, 1 + 4 * n);
        }
        uint32_t list[2 + IPU_KERNEL_MAX_ARGS] = {1};
        memcpy(list + 1, jb->desc, (1 + (jb->desc[0] >> 16)) * 4);
        put_u32s(ctx, b, t, s_k, list, 2 + (jb->desc[0] >> 16));
        n = stage(jb->out, jb->outs, 0, out_id, &out_off, NULL, host, copy);
        if (n) {
            TSEED_OK(ctx, ipu_pkg_add_code(b, t, IPU_K_COPY));
            put_u32s(ctx, b, t, s_cout, copy, 1 + 4 * n);
            put_u32s(ctx, b, t, s_hout, host, 1 + HOST_WORDS * n);
        }
    }
    if (in_total) {
        TSEED_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_IN, s_hin, 0, 0));
        TSEED_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, s_cin, IPU_NO_SLOT, 0));
    }
    size_t kernel_op = ipu_pkg_program_length(b, 0);
    TSEED_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, s_k, IPU_NO_SLOT, 0));
    if (out_total) {
        TSEED_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, s_cout, IPU_NO_SLOT, 0));
        TSEED_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_OUT, s_hout, 0, 0));
    }
    ipu_package *pkg = NULL;
    ipu_status st = ipu_pkg_build(b, &pkg);
    TSEED_OK(ctx, st);
    ipu_device *dev = NULL;
    TSEED_OK(ctx, ipu_device_create(ctx, PROFILE_JSON, &dev));
    TSEED_OK(ctx, ipu_device_initialize(ctx, dev, pkg));
    if (in_total)
        TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, "in", in_bytes, in_total));
    char *text = NULL;
    TSEED_OK(ctx, ipu_device_run(ctx, dev, &text));
    const uint8_t *out_data = NULL;
    size_t out_size = 0;
    if (out_total) {
        TSEED_OK(ctx, ipu_device_stream(ctx, dev, "out", (const void **)&out_data, &out_size));
        assert_int_equal(out_size, out_total);
    }
    out_off = 0;
    for (int j = 0; j < njobs; j++)
        for (int i = 0; i < jobs[j].outs; i++) {
            span *s = &jobs[j].out[i];
            if (s->direct) {
                TSEED_OK(ctx,
                         ipu_device_read(ctx, dev, jobs[j].tile, s->address, s->bytes, s->size));
            } else {
                memcpy(s->bytes, out_data + out_off, s->size);
                out_off += tk_align_up(s->size, 8);
            }
        }
    json_t *report = json_loads(text, 0, NULL);
    assert_non_null(report);
    *kernel_step = NULL;
    json_t *steps = json_object_get(report, "steps"), *step;
    size_t index;
    json_array_foreach(steps, index, step) {
        if ((size_t)json_integer_value(json_object_get(step, "op")) == kernel_op &&
            strcmp(json_string_value(json_object_get(step, "program")), "main") == 0)
            *kernel_step = step;
    }
    assert_non_null(*kernel_step);
    ipu_free(text);
    ipu_device_free(dev);
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
    free(in_bytes);
    return report;
}

static json_int_t field(json_t *step, const char *name)
{
    json_t *v = json_object_get(step, name);
    if (!json_is_integer(v))
        TSEED_FAIL("cycle report step has no integer '%s'", name);
    return json_integer_value(v);
}

/* A run that was the kernel step alone (operands as package data, outputs
 * read directly): one step, whose compute is the slowest tile's and whose
 * cycles add the 150-cycle sync; tile t's compute is want[t] and it waits the
 * difference at the sync. */
static void check_lone_step(json_t *report, json_t *step, const uint64_t *want, const char *what)
{
    uint64_t slowest = 0;
    for (uint32_t t = 0; t < TILES; t++)
        slowest = want[t] > slowest ? want[t] : slowest;
    assert_int_equal(json_array_size(json_object_get(report, "steps")), 1);
    assert_int_equal(field(step, "compute"), slowest);
    assert_int_equal(field(step, "cycles"), slowest + 150);
    json_t *tiles = json_object_get(report, "tiles");
    for (uint32_t t = 0; t < TILES; t++) {
        json_int_t c = json_integer_value(json_array_get(json_object_get(tiles, "compute"), t));
        json_int_t w = json_integer_value(json_array_get(json_object_get(tiles, "wait"), t));
        if ((uint64_t)c != want[t] || (uint64_t)w != slowest - want[t])
            TSEED_FAIL("%s, tile %u: compute %lld wait %lld cycles, formula %llu and %llu", what, t,
                       (long long)c, (long long)w, (unsigned long long)want[t],
                       (unsigned long long)(slowest - want[t]));
    }
}

static void check_guard(const uint8_t *bytes, const char *what, int tcase)
{
    tk_expect_guard(bytes, 32, "case %d: %s the output", tcase, what);
}

/* ---- GEMM ---------------------------------------------------------------- */
static uint32_t dim(void) { return tseed_below(6) ? 1 + tseed_below(60) : 1; }

/* Input staging budget: spans that would not fit the host aperture go in as
 * package data instead. */
static int staged_or_direct(uint32_t *staged, uint32_t size)
{
    if (!tseed_below(2) && *staged + tk_align_up(size, 8) <= APERTURE_END - APERTURE_BASE) {
        *staged += tk_align_up(size, 8);
        return 0;
    }
    return 1;
}

static void gemm_family(int f8, int out_type, uint64_t salt)
{
    static const uint32_t fixed[][3] = {{1, 1, 1}, {1, 7, 13}, {9, 1, 5}, {3, 11, 1}, {1, 1, 59}, {15, 17, 19}};
    uint8_t lo[32], hi[32];
    int nan_in[2] = {0, 0};
    tseed_reset(salt);
    for (int c = 0; c < GEMM_CASES; c++) {
        uint32_t m = c < 6 ? fixed[c][0] : dim(), n = c < 6 ? fixed[c][1] : dim(),
                 k = c < 6 ? fixed[c][2] : dim();
        /* Fixed shapes: packed rows; random shapes: each stride the minimum plus 0..9. */
        uint32_t lda = k, ldb = n, ldc = n;
        if (c >= 6)
            lda += tseed_below(10), ldb += tseed_below(10), ldc += tseed_below(10);
        uint32_t flags = (tseed_below(2) ? IPU_GEMM_ACCUMULATE : 0) |
                         (tseed_below(2) ? IPU_GEMM_WIDE : 0);
        int acc = (flags & IPU_GEMM_ACCUMULATE) != 0, wide = (flags & IPU_GEMM_WIDE) != 0;
        int ta = IPU_DT_F16, tb = IPU_DT_F16, sa = 0, sb = 0;
        if (f8) {
            ta = tseed_below(2) ? IPU_DT_F143 : IPU_DT_F152;
            tb = tseed_below(2) ? IPU_DT_F143 : IPU_DT_F152;
            sa = tseed_below(2) ? -2 : -4, sb = tseed_below(2) ? -2 : -4;
        }
        int full = f8 && out_type == IPU_DT_F32 && tseed_below(3) == 0;
        uint32_t in_size = f8 ? 1 : 2, out_size = (uint32_t)tk_size(out_type);
        /* Operand extents: (rows - 1) * ld + cols elements. */
        uint32_t a_bytes = ((m - 1) * lda + k) * in_size, b_bytes = ((k - 1) * ldb + n) * in_size;
        uint32_t c_bytes = ((m - 1) * ldc + n) * out_size;
        uint8_t *A = malloc(a_bytes), *B = malloc(b_bytes), *Cin = malloc(c_bytes), *C = malloc(c_bytes);
        assert_true(A && B && Cin && C);
        int codes = TK_CODES_ZEROS | (full ? TK_CODES_FULL : 0);
        tk_rows(ta, codes, A, m, k, lda); /* NaN codes in the row gaps */
        tk_rows(tb, codes, B, k, n, ldb);
        nan_in[0] |= lda > k && m > 1, nan_in[1] |= ldb > n && k > 1;
        /* C: guard bytes everywhere, then the accumulated elements. */
        memset(Cin, GUARD, c_bytes);
        for (uint32_t i = 0; acc && i < m; i++)
            for (uint32_t j = 0; j < n; j++) {
                uint8_t *e = Cin + ((size_t)i * ldc + j) * out_size;
                if (out_type == IPU_DT_F16) {
                    gen_codes(IPU_DT_F16, 0, e, 1);
                } else {
                    float v = (float)((int)tseed_below(65536) - 32768) / 8192.0f;
                    memcpy(e, &v, 4);
                }
            }
        /* A and B share elements; C sits in another element (separation rule). */
        uint32_t align = wide ? 16 : 8, ab_base = wide || tseed_below(2) ? R1 : R0;
        uint32_t a_addr = ab_base + align * tseed_below(64);
        uint32_t b_addr = tk_align_up(a_addr + a_bytes, align) + align * tseed_below(8);
        uint32_t c_addr = (tseed_below(2) ? 0x70000u : 0xA0000u) + 64 + 8 * tseed_below(64);
        kjob job = {.tile = tseed_below(TILES)};
        uint32_t *d = job.desc;
        if (f8) {
            uint32_t w[] = {IPU_K_GEMM_F8 | 13u << 16, a_addr, b_addr, c_addr, m, n, k,
                            (uint32_t)ta | (uint32_t)tb << 8,
                            (uint32_t)(uint8_t)(int8_t)sa | (uint32_t)(uint8_t)(int8_t)sb << 8,
                            (uint32_t)out_type, flags, lda, ldb, ldc};
            memcpy(d, w, sizeof w);
        } else {
            uint32_t w[] = {IPU_K_GEMM_F16 | 11u << 16, a_addr, b_addr, c_addr, m, n, k,
                            (uint32_t)out_type, flags, lda, ldb, ldc};
            memcpy(d, w, sizeof w);
        }
        uint32_t staged = 0;
        add_in(&job, a_addr, A, a_bytes, staged_or_direct(&staged, a_bytes));
        add_in(&job, b_addr, B, b_bytes, staged_or_direct(&staged, b_bytes));
        /* C is written first when accumulating, or to put guard bytes in its row gaps. */
        if (acc || (ldc > n && m > 1))
            add_in(&job, c_addr, Cin, c_bytes, staged_or_direct(&staged, c_bytes));
        add_out(&job, c_addr, C, c_bytes, tseed_below(2));
        add_guards(&job, c_addr, c_bytes, lo, hi);
        json_t *step;
        json_t *report = run_jobs(&job, 1, &step);
        check_guard(lo, "before", c);
        check_guard(hi, "after", c);
        tk_expect_row_gaps(C, m, n, ldc, out_size, "%s case %d: %ux%ux%u ldc %u: C",
                           f8 ? "gemm_f8" : "gemm_f16", c, m, n, k, ldc);
        tk_matrix am = {ta, sa, A, lda}, bm = {tb, sb, B, ldb};
        for (uint32_t i = 0; i < m; i++)
            for (uint32_t j = 0; j < n; j++) {
                double mag, s = tk_dot(am, bm, i, j, k, acc ? tk_decode_at(out_type, 0, Cin, i * ldc + j) : 0, &mag);
                double got = tk_decode_at(out_type, 0, C, i * ldc + j), tol = tk_gemm_tol(out_type, s, mag);
                if (!(fabs(got - s) <= tol))
                    TSEED_FAIL("%s case %d: %ux%ux%u strides %u/%u/%u flags %u types %d/%d "
                               "scales %d/%d out %s: C[%u][%u] = %.9g, exact %.9g, tolerance %.3g",
                               f8 ? "gemm_f8" : "gemm_f16", c, m, n, k, lda, ldb, ldc, flags, ta,
                               tb, sa, sb, ipu_dtype_name(out_type), i, j, got, s, tol);
            }
        /* DEVICE.md: 50 + ceil(m*n*k / rate) + 4 per output row, whatever the strides. */
        uint64_t want = tk_gemm_cycles(f8, m, n, k, out_type);
        json_int_t compute = field(step, "compute");
        if ((uint64_t)compute != want)
            TSEED_FAIL("%s case %d %ux%ux%u: step compute %lld cycles, formula %llu",
                       f8 ? "gemm_f8" : "gemm_f16", c, m, n, k, (long long)compute,
                       (unsigned long long)want);
        assert_int_equal(field(step, "sync"), 150);
        assert_int_equal(field(step, "exchange"), 0);
        assert_int_equal(field(step, "cycles"), compute + 150 + field(step, "exchange"));
        json_decref(report);
        free(A), free(B), free(Cin), free(C);
    }
    /* The family exercised NaN-filled gaps in both inputs at least once. */
    if (!nan_in[0] || !nan_in[1])
        TSEED_FAIL("%s: no case had row gaps in A (%d) and in B (%d)", f8 ? "gemm_f8" : "gemm_f16",
                   nan_in[0], nan_in[1]);
}

static void test_gemm_f16_out_f16(void **state) { (void)state; gemm_family(0, IPU_DT_F16, 1); }
static void test_gemm_f16_out_f32(void **state) { (void)state; gemm_family(0, IPU_DT_F32, 2); }
static void test_gemm_f8_out_f16(void **state) { (void)state; gemm_family(1, IPU_DT_F16, 3); }
static void test_gemm_f8_out_f32(void **state) { (void)state; gemm_family(1, IPU_DT_F32, 4); }

/* Four GEMMs on four tiles in one step (operands as package data, so the run
 * is that step alone): each tile's compute is its formula, the step's compute
 * the slowest tile's, and each tile waits the difference at the sync. */
static void test_gemm_cycles_per_tile(void **state)
{
    (void)state;
    static const uint32_t shape[TILES][3] = {{5, 7, 9}, {13, 1, 31}, {1, 60, 2}, {33, 17, 45}};
    static const int f8[TILES] = {0, 0, 1, 1}, out[TILES] = {IPU_DT_F16, IPU_DT_F32, IPU_DT_F16, IPU_DT_F32};
    kjob jobs[TILES];
    uint8_t *buf[TILES][3];
    uint64_t want[TILES];
    memset(jobs, 0, sizeof jobs);
    tseed_reset(10);
    for (uint32_t t = 0; t < TILES; t++) {
        uint32_t m = shape[t][0], n = shape[t][1], k = shape[t][2], in = f8[t] ? 1 : 2;
        uint32_t a_bytes = m * k * in, b_bytes = k * n * in, c_bytes = m * n * (uint32_t)tk_size(out[t]);
        int type = f8[t] ? IPU_DT_F143 : IPU_DT_F16;
        buf[t][0] = malloc(a_bytes), buf[t][1] = malloc(b_bytes), buf[t][2] = malloc(c_bytes);
        gen_codes(type, 0, buf[t][0], (size_t)m * k);
        gen_codes(type, 0, buf[t][1], (size_t)k * n);
        uint32_t b_addr = tk_align_up(R0 + a_bytes, 8), c_addr = 0x70000u;
        uint32_t w16[] = {IPU_K_GEMM_F16 | 11u << 16, R0, b_addr, c_addr, m, n, k, (uint32_t)out[t], 0,
                          k, n, n};
        uint32_t w8[] = {IPU_K_GEMM_F8 | 13u << 16, R0, b_addr, c_addr, m, n, k,
                         IPU_DT_F143 | IPU_DT_F143 << 8, 0xFEFEu, (uint32_t)out[t], 0, k, n, n};
        jobs[t].tile = t;
        if (f8[t])
            memcpy(jobs[t].desc, w8, sizeof w8);
        else
            memcpy(jobs[t].desc, w16, sizeof w16);
        add_in(&jobs[t], R0, buf[t][0], a_bytes, 1);
        add_in(&jobs[t], b_addr, buf[t][1], b_bytes, 1);
        add_out(&jobs[t], c_addr, buf[t][2], c_bytes, 1);
        want[t] = tk_gemm_cycles(f8[t], m, n, k, out[t]);
    }
    json_t *step;
    json_t *report = run_jobs(jobs, TILES, &step);
    check_lone_step(report, step, want, "gemm");
    for (uint32_t t = 0; t < TILES; t++)
        free(buf[t][0]), free(buf[t][1]), free(buf[t][2]);
    json_decref(report);
}

/* ---- CAST ---------------------------------------------------------------- */
/* F32 sources: specials, values on and between narrow grids (ties), random bits. */
static void gen_f32_sources(uint8_t *dst, uint32_t count)
{
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.4028235e38f,
                                    1e-45f, 65504.0f, 65519.99f, 65520.0f, -65536.0f, 448.0f,
                                    464.0f, 480.0f, -500.0f, 57344.0f, 61440.0f, 61441.0f,
                                    1.0f, 0.1f, 5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f};
    for (uint32_t i = 0; i < count; i++) {
        float v;
        uint32_t pick = tseed_below(3);
        if (i < sizeof special / sizeof special[0]) {
            v = special[i];
        } else if (pick == 0) {
            uint32_t u = (uint32_t)tseed_rnd();
            memcpy(&v, &u, 4);
        } else if (pick == 1) {
            v = (float)ldexp((double)(tseed_below(4096) | 1), (int)tseed_below(53) - 40);
        } else {
            v = (float)ldexp((double)tseed_below(1u << 24), (int)tseed_below(51) - 50);
        }
        if (tseed_below(2))
            v = -v;
        memcpy(dst + 4 * i, &v, 4);
    }
}

typedef struct cast_case {
    int st, dt, ss, ds;
    uint32_t count;
    uint8_t *src, *dst;
} cast_case;

static void run_casts(cast_case *cases, int count)
{
    kjob jobs[TILES];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < count; i++) {
        cast_case *c = &cases[i];
        uint32_t w[] = {IPU_K_CAST | 7u << 16, R0, R1, c->count, (uint32_t)c->st,
                        (uint32_t)c->ss, (uint32_t)c->dt, (uint32_t)c->ds};
        jobs[i].tile = (uint32_t)i;
        memcpy(jobs[i].desc, w, sizeof w);
        add_in(&jobs[i], R0, c->src, c->count * (uint32_t)tk_size(c->st), 1);
        add_out(&jobs[i], R1, c->dst, c->count * (uint32_t)tk_size(c->dt), 1);
    }
    json_t *step;
    json_decref(run_jobs(jobs, count, &step));
    for (int i = 0; i < count; i++) {
        cast_case *c = &cases[i];
        size_t ssz = tk_size(c->st), dsz = tk_size(c->dt);
        for (uint32_t e = 0; e < c->count; e++) {
            int snan, gnan;
            double v = decode(c->st, c->ss, c->src + e * ssz, &snan);
            double got = decode(c->dt, c->ds, c->dst + e * dsz, &gnan);
            double want = snan ? v : tk_round(c->dt, c->ds, v);
            int same = snan ? gnan && !signbit(got) == !signbit(v)
                            : !gnan && got == want && !signbit(got) == !signbit(want);
            if (!same)
                TSEED_FAIL("cast %s(scale %d) -> %s(scale %d) element %u (%.9g%s): got %.9g%s, "
                           "want %.9g",
                           ipu_dtype_name(c->st), c->ss, ipu_dtype_name(c->dt), c->ds, e, v,
                           snan ? " NaN" : "", got, gnan ? " NaN" : "", want);
        }
    }
}

static void test_cast_all_pairs(void **state)
{
    (void)state;
    static const int f8_scales[] = {-4, -2, 0, 3}, zero[] = {0};
    tseed_reset(5);
    cast_case cases[TILES];
    int pending = 0;
    for (int st = 0; st < IPU_DT_COUNT; st++)
        for (int dt = 0; dt < IPU_DT_COUNT; dt++) {
            int st8 = st >= IPU_DT_F143, dt8 = dt >= IPU_DT_F143;
            for (int si = 0; si < (st8 ? 4 : 1); si++)
                for (int di = 0; di < (dt8 ? 4 : 1); di++) {
                    cast_case *c = &cases[pending++];
                    c->st = st, c->dt = dt;
                    c->ss = (st8 ? f8_scales : zero)[si], c->ds = (dt8 ? f8_scales : zero)[di];
                    c->count = st == IPU_DT_F16 ? 65536 : st == IPU_DT_F32 ? 4096 : 256;
                    c->src = malloc(c->count * tk_size(st));
                    c->dst = malloc(c->count * tk_size(dt));
                    assert_true(c->src && c->dst);
                    if (st == IPU_DT_F32) {
                        gen_f32_sources(c->src, c->count);
                    } else {
                        for (uint32_t e = 0; e < c->count; e++) { /* every code */
                            c->src[e * tk_size(st)] = (uint8_t)e;
                            if (st == IPU_DT_F16)
                                c->src[2 * e + 1] = (uint8_t)(e >> 8);
                        }
                    }
                    int last = st == IPU_DT_COUNT - 1 && dt == IPU_DT_COUNT - 1 &&
                               si == (st8 ? 3 : 0) && di == (dt8 ? 3 : 0);
                    if (pending == (int)TILES || last) {
                        run_casts(cases, pending);
                        for (int i = 0; i < pending; i++)
                            free(cases[i].src), free(cases[i].dst);
                        pending = 0;
                    }
                }
        }
}

/* ---- ADD ----------------------------------------------------------------- */
/* Operand pairs with nearby exponents (cancellation, carries), plus specials. */
static void gen_add_pair(int dtype, uint8_t *a, uint8_t *b)
{
    int ebits = dtype == IPU_DT_F32 ? 8 : 5, mbits = dtype == IPU_DT_F32 ? 23 : 10;
    int emax = (1 << ebits) - 1;
    int ea = (int)tseed_below((uint32_t)emax + 1), eb = ea + (int)tseed_below(7) - 3;
    eb = eb < 0 ? 0 : eb > emax ? emax : eb;
    if (tseed_below(8) == 0)
        eb = (int)tseed_below((uint32_t)emax + 1);
    uint64_t mmask = (1ull << mbits) - 1;
    uint64_t va = (uint64_t)tseed_below(2) << (ebits + mbits) | (uint64_t)ea << mbits |
                  (tseed_rnd() & mmask);
    uint64_t vb = (uint64_t)tseed_below(2) << (ebits + mbits) | (uint64_t)eb << mbits |
                  (tseed_rnd() & mmask);
    if (tseed_below(4) == 0) /* exact cancellation or doubling */
        vb = va ^ ((uint64_t)tseed_below(2) << (ebits + mbits));
    for (size_t i = 0; i < tk_size(dtype); i++)
        a[i] = (uint8_t)(va >> (8 * i)), b[i] = (uint8_t)(vb >> (8 * i));
}

static void add_family(int dtype, uint64_t salt)
{
    static const uint32_t counts[] = {1, 2, 7, 511, 512, 513, 1500, 3000};
    tseed_reset(salt);
    size_t sz = tk_size(dtype);
    for (size_t c = 0; c < sizeof counts / sizeof counts[0] + 8; c++) {
        uint32_t count = c < 8 ? counts[c] : 1 + tseed_below(3000);
        uint32_t bytes = count * (uint32_t)sz;
        uint8_t *A = malloc(bytes), *B = malloc(bytes), *D = malloc(bytes);
        assert_true(A && B && D);
        for (uint32_t i = 0; i < count; i++)
            gen_add_pair(dtype, A + i * sz, B + i * sz);
        uint32_t a_addr = R0 + 8 * tseed_below(16), b_addr = 0x64000u + 8 * tseed_below(16);
        uint32_t d_addr = R1 + 8 * tseed_below(16);
        kjob job = {.tile = tseed_below(TILES)};
        uint32_t w[] = {IPU_K_ADD | 5u << 16, a_addr, b_addr, d_addr, count, (uint32_t)dtype};
        memcpy(job.desc, w, sizeof w);
        add_in(&job, a_addr, A, bytes, 0);
        add_in(&job, b_addr, B, bytes, 1);
        add_out(&job, d_addr, D, bytes, tseed_below(2));
        json_t *step;
        json_decref(run_jobs(&job, 1, &step));
        for (uint32_t i = 0; i < count; i++) {
            int na, nb, nd;
            double x = decode(dtype, 0, A + i * sz, &na), y = decode(dtype, 0, B + i * sz, &nb);
            double got = decode(dtype, 0, D + i * sz, &nd);
            double s = x + y; /* exact for f16 operands; f32 rounds once more below */
            int want_nan = na || nb || isnan(s);
            double want = want_nan ? NAN : tk_round(dtype, 0, (double)(float)s);
            if (want_nan ? !nd : nd || got != want || !signbit(got) != !signbit(want))
                TSEED_FAIL("add %s count %u element %u: %.9g + %.9g gave %.9g, want %.9g",
                           ipu_dtype_name(dtype), count, i, x, y, got, want);
        }
        free(A), free(B), free(D);
    }
}

static void test_add_f32(void **state) { (void)state; add_family(IPU_DT_F32, 6); }
static void test_add_f16(void **state) { (void)state; add_family(IPU_DT_F16, 7); }

/* ---- GELU ---------------------------------------------------------------- */
/* F32 GELU sources: zeros, infinities, NaNs (quiet, signalling, negative),
 * the largest and tiny (normal and subnormal) magnitudes, the region where
 * GELU bends and its negative tail underflows, then random values: any bits,
 * the interval [-12, 12], any exponent. */
static void gen_gelu_f32(uint8_t *dst, uint32_t count, int specials)
{
    static const uint32_t special_bits[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u,
                                            0x7FC00000u, 0xFFC00000u, 0x7FA00000u, 0xFFC00001u,
                                            0x7F7FFFFFu, 0xFF7FFFFFu, 0x00800000u, 0x80800000u,
                                            0x00000001u, 0x80000001u, 0x00012345u, 0x80012345u};
    static const float special[] = {1e38f, -1e38f, 1e20f, -1e20f, 1e5f, -1e5f, 65504.0f,
                                    -65504.0f, 100.0f, -100.0f, 20.0f, -20.0f, 10.0f, -10.0f,
                                    9.0f, -9.0f, 7.2f, -7.2f, 5.0f, -5.0f, 3.0f, -3.0f, 2.0f,
                                    -2.0f, 1.0f, -1.0f, 0.5f, -0.5f, 0.7260117f, -0.7260117f,
                                    1e-3f, -1e-3f, 1e-7f, -1e-7f, 1e-20f, -1e-20f, 1e-30f, -1e-30f};
    enum { NB = sizeof special_bits / sizeof special_bits[0], NS = sizeof special / sizeof special[0] };
    for (uint32_t i = 0; i < count; i++) {
        uint32_t u;
        float v;
        if (specials && i < NB) {
            u = special_bits[i];
        } else if (specials && i < NB + NS) {
            memcpy(&u, &special[i - NB], 4);
        } else {
            uint32_t pick = tseed_below(3);
            if (pick == 0) {
                u = (uint32_t)tseed_rnd();
            } else {
                v = pick == 1 ? (float)(((double)tseed_below(1u << 24) / (1u << 24) * 2 - 1) * 12)
                              : (float)ldexp((double)(tseed_below(1u << 24) | 1u << 23),
                                             (int)tseed_below(277) - 173);
                if (pick == 2 && tseed_below(2))
                    v = -v;
                memcpy(&u, &v, 4);
            }
        }
        ipu_store_u32(dst + 4 * i, u);
    }
}

typedef struct gelu_case {
    int type;
    uint32_t count;
} gelu_case;

/* Every element: (1) the output's bits are ipu_num_gelu applied to the
 * decoded source and encoded to the type (the library's decode/encode, which
 * the CAST test holds to the formats bit-exactly); (2) against the double
 * formula r = fp32(gelu(x)): NaN exactly where the formula gives NaN,
 * infinities exactly, otherwise the output lies in [type(r - tol),
 * type(r + tol)], tol = ulp32(r) + |x| * 2^-23, i.e. it is the type's
 * rounding of an FP32 value within tol of r.  One FP32 ulp alone is not
 * enough for the FP32 evaluation: its rounded cubic, tanhf and 1 + tanh carry
 * an absolute error of a few 2^-24 into the factor 0.5 x, which for negative
 * x (where 1 + tanh cancels) and near 0.7 (2 ulps) exceeds one ulp of the
 * result; the measured worst case over all FP32 inputs is
 * ulp32(r) + 1.38 |x| 2^-24.  Exact GELU (erf) differs from this formula by up
 * to ~4e-4 near x = -3, far outside tol. */
static void check_gelu(const gelu_case *g, const uint8_t *src, const uint8_t *dst)
{
    size_t sz = tk_size(g->type);
    for (uint32_t i = 0; i < g->count; i++) {
        const uint8_t *s = src + i * sz, *o = dst + i * sz;
        float xf, gf;
        uint8_t bits[4];
        ipu_num_decode(g->type, 0, s, &xf, 1);
        gf = ipu_num_gelu(xf);
        ipu_num_encode(g->type, 0, &gf, bits, 1);
        int xnan, onan;
        double x = decode(g->type, 0, s, &xnan), got = decode(g->type, 0, o, &onan);
        if (memcmp(bits, o, sz) != 0)
            TSEED_FAIL("gelu %s count %u element %u (x = %.9g): output bits differ from "
                       "ipu_num_gelu (%.9g, want %.9g)",
                       ipu_dtype_name(g->type), g->count, i, x, got, (double)gf);
        double exact = tk_gelu_formula(x);
        int ok;
        double lo = exact, hi = exact;
        if (isnan(exact)) {
            ok = onan;
        } else if (isinf(exact)) {
            ok = !onan && got == exact;
        } else {
            double r = (double)(float)exact, tol = tk_f32_ulp(r) + fabs(x) * 0x1p-23;
            lo = tk_round(g->type, 0, r - tol), hi = tk_round(g->type, 0, r + tol);
            ok = !onan && lo <= got && got <= hi;
        }
        if (!ok)
            TSEED_FAIL("gelu %s count %u element %u: gelu(%.9g) = %.9g%s, formula %.17g, "
                       "accepted [%.9g, %.9g]",
                       ipu_dtype_name(g->type), g->count, i, x, got, onan ? " (NaN)" : "", exact,
                       lo, hi);
    }
}

/* Every FP16 code, an F32 set with the specials, and short runs of both
 * types (the cycle formula's rounding up), four tiles per run with operands
 * as package data, so each run is the GELU step alone: each tile's compute is
 * 10 + 8 * ceil(count * size / 8) and the step's the slowest tile's. */
static void test_gelu(void **state)
{
    (void)state;
    static const gelu_case cases[] = {{IPU_DT_F16, 65536}, {IPU_DT_F32, 4099}, {IPU_DT_F16, 1},
                                      {IPU_DT_F32, 1},     {IPU_DT_F16, 3},     {IPU_DT_F16, 5},
                                      {IPU_DT_F32, 3},     {IPU_DT_F32, 2}};
    enum { N = sizeof cases / sizeof cases[0] };
    tseed_reset(11);
    for (uint32_t first = 0; first < N; first += TILES) {
        kjob jobs[TILES];
        uint8_t *src[TILES], *dst[TILES], lo[TILES][32], hi[TILES][32];
        uint64_t want[TILES];
        memset(jobs, 0, sizeof jobs);
        for (uint32_t t = 0; t < TILES; t++) {
            const gelu_case *g = &cases[first + t];
            uint32_t sz = (uint32_t)tk_size(g->type), bytes = g->count * sz;
            uint32_t s_addr = R0 + (bytes <= 0x10000u ? 8 * tseed_below(64) : 0);
            uint32_t d_addr = R1 + 64 + 8 * tseed_below(64);
            src[t] = malloc(bytes), dst[t] = malloc(bytes);
            assert_true(src[t] && dst[t]);
            if (g->type == IPU_DT_F32) {
                gen_gelu_f32(src[t], g->count, g->count > 100);
            } else {
                for (uint32_t e = 0; e < g->count; e++) { /* all codes, or random ones */
                    uint32_t h = g->count == 65536 ? e : (uint32_t)tseed_below(65536);
                    src[t][2 * e] = (uint8_t)h, src[t][2 * e + 1] = (uint8_t)(h >> 8);
                }
            }
            uint32_t w[] = {IPU_K_GELU | 4u << 16, s_addr, d_addr, g->count, (uint32_t)g->type};
            jobs[t].tile = t;
            memcpy(jobs[t].desc, w, sizeof w);
            add_in(&jobs[t], s_addr, src[t], bytes, 1);
            add_out(&jobs[t], d_addr, dst[t], bytes, 1);
            add_guards(&jobs[t], d_addr, bytes, lo[t], hi[t]);
            want[t] = 10 + 8 * (((uint64_t)bytes + 7) / 8);
        }
        json_t *step;
        json_t *report = run_jobs(jobs, TILES, &step);
        char what[64];
        snprintf(what, sizeof what, "gelu cases %u..%u", first, first + TILES - 1);
        check_lone_step(report, step, want, what);
        for (uint32_t t = 0; t < TILES; t++) {
            check_guard(lo[t], "before", (int)(first + t));
            check_guard(hi[t], "after", (int)(first + t));
            check_gelu(&cases[first + t], src[t], dst[t]);
            free(src[t]), free(dst[t]);
        }
        json_decref(report);
    }
}

/* ---- malformed arguments ----------------------------------------------------- */
/* A GEMM whose row stride is below its minimum (lda < k, ldb < n, ldc < n) is
 * a malformed descriptor: the device stops on the first step with the fault
 * on the whole descriptor, naming the GEMM and the strides. */
static void test_gemm_stride_malformed(void **state)
{
    (void)state;
    enum { T = 2, M = 3, N = 5, K = 7 };
    /* Which stride (0 lda, 1 ldb, 2 ldc) and its value. */
    static const uint32_t bad[][2] = {{0, K - 1}, {0, 0}, {1, N - 1}, {2, N - 1}, {2, 1}};
    ipu_profile p;
    tk_profile(TILES, &p);
    uint32_t a = tpkg_data0(&p), bb = a + 0x100, cc = 0x70000u;
    for (int f8 = 0; f8 < 2; f8++)
        for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
            uint32_t ld[3] = {K, N, N};
            ld[bad[c][0]] = bad[c][1];
            tk_job jobs[T + 1]; /* the call on tile T alone */
            memset(jobs, 0, sizeof jobs);
            if (f8) {
                uint32_t args[] = {a, bb, cc, M, N, K, IPU_DT_F143 | IPU_DT_F152 << 8, 0,
                                   IPU_DT_F32, 0, ld[0], ld[1], ld[2]};
                tk_kernel(&jobs[T], IPU_K_GEMM_F8, 13, args);
            } else {
                uint32_t args[] = {a, bb, cc, M, N, K, IPU_DT_F16, 0, ld[0], ld[1], ld[2]};
                tk_kernel(&jobs[T], IPU_K_GEMM_F16, 11, args);
            }
            json_t *fault = NULL;
            ipu_status st = tk_run_on(TILES, 0, jobs, T + 1, &fault);
            if (st != IPU_ERR_DEVICE_FAULT)
                TSEED_FAIL("%s with stride %u = %u: run returned %s, want a device fault",
                           f8 ? "gemm_f8" : "gemm_f16", bad[c][0], bad[c][1], ipu_status_name(st));
            TK_EXPECT_MALFORMED(fault, T, &jobs[T], f8 ? "gemm_f8" : "gemm_f16", "stride");
            assert_int_equal(tpkg_fault_int(fault, "descriptor"), 0);
            json_decref(fault);
        }
}

/* ---- FILL and COPY ------------------------------------------------------- */
static void test_fill(void **state)
{
    (void)state;
    static const uint32_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 63, 4097, 20000, 12};
    static const uint32_t offsets[] = {0, 4, 12, 100};
    enum { N = sizeof sizes / sizeof sizes[0] };
    uint8_t lo[N][32], hi[N][32];
    tseed_reset(8);
    for (uint32_t first = 0; first < N; first += TILES) {
        kjob jobs[TILES];
        uint8_t *out[TILES];
        uint32_t fill[TILES];
        memset(jobs, 0, sizeof jobs);
        uint32_t count = N - first < TILES ? N - first : TILES;
        for (uint32_t i = 0; i < count; i++) {
            uint32_t c = first + i, n = sizes[c];
            uint32_t dst = (c % 2 ? R1 : R0) + 64 + offsets[c % 4];
            fill[i] = (uint32_t)tseed_rnd();
            out[i] = malloc(n);
            jobs[i].tile = i;
            uint32_t w[] = {IPU_K_FILL | 3u << 16, dst, n, fill[i]};
            memcpy(jobs[i].desc, w, sizeof w);
            add_out(&jobs[i], dst, out[i], n, c % 3 == 0);
            add_guards(&jobs[i], dst, n, lo[c], hi[c]);
        }
        json_t *step;
        json_decref(run_jobs(jobs, (int)count, &step));
        for (uint32_t i = 0; i < count; i++) {
            uint32_t c = first + i;
            for (uint32_t b = 0; b < sizes[c]; b++)
                if (out[i][b] != (uint8_t)(fill[i] >> (8 * (b & 3))))
                    TSEED_FAIL("fill %u bytes with 0x%08X: byte %u is 0x%02X", sizes[c], fill[i], b,
                               out[i][b]);
            check_guard(lo[c], "before", (int)c);
            check_guard(hi[c], "after", (int)c);
            free(out[i]);
        }
    }
}

static void test_copy(void **state)
{
    (void)state;
    static const uint32_t sizes[] = {1, 3, 4, 5, 13, 64, 1000, 20000};
    enum { N = sizeof sizes / sizeof sizes[0] };
    uint8_t lo[N][32], hi[N][32];
    tseed_reset(9);
    for (uint32_t first = 0; first < N; first += TILES) {
        kjob jobs[TILES];
        uint8_t *src[TILES], *out[TILES];
        memset(jobs, 0, sizeof jobs);
        for (uint32_t i = 0; i < TILES; i++) {
            uint32_t c = first + i, n = sizes[c];
            uint32_t s_addr = (c % 2 ? R1 : R0) + 4 * (1 + 2 * tseed_below(8));
            uint32_t d_addr = (c % 3 ? 0xA0000u : 0x70000u) + 64 + 4 * tseed_below(8);
            src[i] = malloc(n), out[i] = malloc(n);
            for (uint32_t b = 0; b < n; b++)
                src[i][b] = (uint8_t)tseed_rnd();
            jobs[i].tile = i;
            uint32_t w[] = {IPU_K_COPY | 3u << 16, s_addr, d_addr, n};
            memcpy(jobs[i].desc, w, sizeof w);
            add_in(&jobs[i], s_addr, src[i], n, 1);
            add_out(&jobs[i], d_addr, out[i], n, c % 2);
            add_guards(&jobs[i], d_addr, n, lo[c], hi[c]);
        }
        json_t *step;
        json_decref(run_jobs(jobs, TILES, &step));
        for (uint32_t i = 0; i < TILES; i++) {
            uint32_t c = first + i;
            if (memcmp(src[i], out[i], sizes[c]) != 0)
                TSEED_FAIL("copy of %u bytes: destination differs from the source", sizes[c]);
            check_guard(lo[c], "before", (int)c);
            check_guard(hi[c], "after", (int)c);
            free(src[i]), free(out[i]);
        }
    }
}

int main(void)
{
    tseed_init("test_kernels_device");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_f16_out_f16), cmocka_unit_test(test_gemm_f16_out_f32),
        cmocka_unit_test(test_gemm_f8_out_f16),  cmocka_unit_test(test_gemm_f8_out_f32),
        cmocka_unit_test(test_gemm_cycles_per_tile),
        cmocka_unit_test(test_cast_all_pairs),   cmocka_unit_test(test_add_f32),
        cmocka_unit_test(test_add_f16),          cmocka_unit_test(test_fill),
        cmocka_unit_test(test_copy),             cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_gemm_stride_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
