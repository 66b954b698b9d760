/* test_determinism.c: device results must not depend on the thread count.
 * Two packages on the 64-tile profile -- the exchange-stress package (every
 * pattern, both source kinds, 3 Repeat iterations) and a hand-built GEMM
 * package (per-tile A streamed in through the aperture, per-tile B in SRAM,
 * C = A x B copied out through the aperture) -- each run twice on a device
 * with 1 worker thread and twice on one with 2; every output stream byte and
 * the cycle report JSON must be identical.  Each run is also checked against
 * values computed independently: the stress package's recorded expected
 * bytes, and for the GEMM an exact product of small FP16 values (sums of
 * integers and halves, exact in FP32) computed here.
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

#include "support_packages.h"

#include "ipu/ipu.h"
#include "numerics/numerics.h"

#define TILES 64u
#define RUNS 2 /* invocations per device */

/* Everything a run produced: the cycle JSON and every output stream. */
typedef struct snapshot {
    char *cycles[RUNS];
    ipu_buf outputs[RUNS]; /* per stream: name, NUL, u64 size, bytes */
} snapshot;

static void snapshot_free(snapshot *s)
{
    for (int r = 0; r < RUNS; r++) {
        ipu_free(s->cycles[r]);
        ipu_buf_free(&s->outputs[r]);
    }
}

typedef void (*check_fn)(ipu_ctx *ctx, const ipu_package *pkg, const char *stream,
                         const uint8_t *bytes, size_t size, void *user);

/* Run the package RUNS times on a device with `threads` workers; inputs
 * (stream name -> bytes) are set before every run. */
static void run_package(const ipu_package *pkg, int threads, const char *input_name,
                        const uint8_t *input, size_t input_size, check_fn check, void *user,
                        snapshot *out)
{
    memset(out, 0, sizeof *out);
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_ctx_set_threads(ctx, threads);
    ipu_device *dev = tpkg_device(ctx, pkg);
    TPKG_OK(ctx, ipu_device_initialize(ctx, dev, pkg));
    for (int r = 0; r < RUNS; r++) {
        if (input_name)
            TPKG_OK(ctx, ipu_device_set_stream(ctx, dev, input_name, input, input_size));
        TPKG_OK(ctx, ipu_device_run(ctx, dev, &out->cycles[r]));
        size_t outputs = 0;
        for (size_t i = 0; i < pkg->stream_count; i++) {
            if (pkg->streams[i].direction != IPU_STREAM_OUTPUT)
                continue;
            const char *name = ipu_pkg_string(pkg, pkg->streams[i].name_offset);
            const void *data = NULL;
            size_t size = 0;
            TPKG_OK(ctx, ipu_device_stream(ctx, dev, name, &data, &size));
            assert_int_equal(size, pkg->streams[i].size);
            check(ctx, pkg, name, data, size, user);
            uint8_t size_bytes[8];
            ipu_store_u64(size_bytes, size);
            TPKG_OK(ctx, ipu_buf_append(ctx, &out->outputs[r], name, strlen(name) + 1));
            TPKG_OK(ctx, ipu_buf_append(ctx, &out->outputs[r], size_bytes, 8));
            TPKG_OK(ctx, ipu_buf_append(ctx, &out->outputs[r], data, size));
            outputs++;
        }
        assert_true(outputs > 0);
    }
    ipu_device_free(dev);
    ipu_ctx_free(ctx);
}

static void expect_identical(const snapshot *a, const snapshot *b)
{
    for (int r = 0; r < RUNS; r++) {
        assert_non_null(a->cycles[r]);
        assert_non_null(b->cycles[r]);
        assert_string_equal(a->cycles[r], b->cycles[r]);
        assert_int_equal(a->outputs[r].size, b->outputs[r].size);
        assert_memory_equal(a->outputs[r].data, b->outputs[r].data, a->outputs[r].size);
    }
    /* A second invocation repeats the first exactly as well. */
    assert_string_equal(a->cycles[0], a->cycles[RUNS - 1]);
}

/* ---- exchange stress ------------------------------------------------------- */

static void check_stress(ipu_ctx *ctx, const ipu_package *pkg, const char *stream,
                         const uint8_t *bytes, size_t size, void *user)
{
    (void)user;
    const void *expected = NULL;
    size_t expected_size = 0;
    TPKG_OK(ctx, ipu_package_record(ctx, pkg, "expected", stream, &expected, &expected_size));
    assert_int_equal(expected_size, size);
    if (memcmp(expected, bytes, size) != 0)
        fail_msg("stress stream '%s' differs from its recorded expected bytes", stream);
}

static void test_stress_threads(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    char *profile = tpkg_profile_text(TILES);
    size_t cap = strlen(profile) + 256;
    char *options = malloc(cap);
    assert_non_null(options);
    snprintf(options, cap,
             "{\"profile\": %s, \"pattern\": \"all\", \"sources\": \"both\", \"iterations\": 3}",
             profile);
    ipu_package *pkg = NULL;
    TPKG_OK(ctx, ipu_stress_build(ctx, options, &pkg));
    assert_int_equal(pkg->profile.tiles, TILES);
    /* all patterns x both sources, their OUTGOING_BASE variants, and the reset probe */
    assert_int_equal(pkg->stream_count, 17);

    snapshot one, two;
    run_package(pkg, 1, NULL, NULL, 0, check_stress, NULL, &one);
    run_package(pkg, 2, NULL, NULL, 0, check_stress, NULL, &two);
    expect_identical(&one, &two);
    json_t *cycles = json_loads(one.cycles[0], 0, NULL);
    assert_non_null(cycles);
    assert_true(json_integer_value(json_object_get(cycles, "cycles")) > 0);
    assert_int_equal(json_array_size(json_object_get(json_object_get(cycles, "tiles"), "compute")),
                     TILES);
    json_decref(cycles);

    snapshot_free(&one);
    snapshot_free(&two);
    ipu_package_free(pkg);
    free(options);
    free(profile);
    ipu_ctx_free(ctx);
}

/* ---- GEMM ------------------------------------------------------------------- */

enum { GM = 24, GN = 40, GK = 64 };

/* Small FP16 values whose products and sums are exact in FP32. */
static const double VALUES[] = {-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 1.5};
static const uint16_t VALUE_BITS[] = {0xC000, 0xBC00, 0xB800, 0x0000,
                                      0x3800, 0x3C00, 0x4000, 0x3E00};

static uint32_t pick(uint32_t tile, uint32_t which, uint32_t i)
{
    uint32_t x = (tile * 2654435761u) ^ (which * 40503u) ^ (i * 2246822519u);
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    return x % 8;
}

typedef struct gemm_case {
    uint32_t a_bytes, c_bytes;
    uint8_t *a_stream; /* all tiles' A, FP16 */
    double *expected;  /* all tiles' C */
} gemm_case;

static ipu_package *build_gemm(ipu_ctx *ctx, gemm_case *g)
{
    ipu_profile p;
    tpkg_profile(ctx, TILES, &p);
    uint32_t e = p.element_bytes;
    uint32_t a_addr = p.aperture_base, out_addr = p.aperture_base + e;
    uint32_t b_addr = p.region1_base, c_addr = (tpkg_data0(&p) + e - 1) / e * e;
    g->a_bytes = GM * GK * 2;
    g->c_bytes = GM * GN * 4;
    assert_true(out_addr + g->c_bytes <= p.aperture_end);
    g->a_stream = malloc((size_t)TILES * g->a_bytes);
    g->expected = calloc((size_t)TILES * GM * GN, sizeof *g->expected);
    assert_non_null(g->a_stream);
    assert_non_null(g->expected);

    ipu_pkg_builder *b = tpkg_builder(ctx, &p);
    uint32_t a_stream, c_stream;
    TPKG_OK(ctx, ipu_pkg_add_stream(b, "a", IPU_STREAM_INPUT, (uint64_t)TILES * g->a_bytes, &a_stream));
    TPKG_OK(ctx, ipu_pkg_add_stream(b, "c", IPU_STREAM_OUTPUT, (uint64_t)TILES * g->c_bytes, &c_stream));
    uint32_t in_slot = ipu_pkg_new_slot(b), compute_slot = ipu_pkg_new_slot(b),
             out_slot = ipu_pkg_new_slot(b);
    uint8_t bmat[GK * GN * 2];
    for (uint32_t t = 0; t < TILES; t++) {
        double a[GM * GK], bv[GK * GN];
        for (uint32_t i = 0; i < GM * GK; i++) {
            uint32_t v = pick(t, 0, i);
            a[i] = VALUES[v];
            g->a_stream[(size_t)t * g->a_bytes + 2 * i] = (uint8_t)VALUE_BITS[v];
            g->a_stream[(size_t)t * g->a_bytes + 2 * i + 1] = (uint8_t)(VALUE_BITS[v] >> 8);
        }
        for (uint32_t i = 0; i < GK * GN; i++) {
            uint32_t v = pick(t, 1, i);
            bv[i] = VALUES[v];
            bmat[2 * i] = (uint8_t)VALUE_BITS[v];
            bmat[2 * i + 1] = (uint8_t)(VALUE_BITS[v] >> 8);
        }
        for (uint32_t r = 0; r < GM; r++)
            for (uint32_t c = 0; c < GN; c++) {
                double sum = 0;
                for (uint32_t k = 0; k < GK; k++)
                    sum += a[r * GK + k] * bv[k * GN + c];
                g->expected[((size_t)t * GM + r) * GN + c] = sum;
            }
        TPKG_OK(ctx, ipu_pkg_add_data(b, t, b_addr, bmat, sizeof bmat));
        tpkg_host_entry in = tpkg_host_run(a_stream, t * g->a_bytes, a_addr, g->a_bytes);
        tpkg_host_entry out = tpkg_host_run(c_stream, t * g->c_bytes, out_addr, g->c_bytes);
        tpkg_host_descriptor(b, t, in_slot, &in, 1);
        tpkg_host_descriptor(b, t, out_slot, &out, 1);
        tpkg_kernel list[] = {
            tpkg_gemm_f16(a_addr, b_addr, c_addr, GM, GN, GK, IPU_DT_F32, 0),
            tpkg_copy(c_addr, out_addr, g->c_bytes),
        };
        tpkg_compute_list(b, t, compute_slot, list, 2, 1);
    }
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_IN, in_slot, 0, 0));
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, compute_slot, IPU_NO_SLOT, 0));
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_OUT, out_slot, 0, 0));
    return tpkg_build(ctx, b);
}

static void check_gemm(ipu_ctx *ctx, const ipu_package *pkg, const char *stream,
                       const uint8_t *bytes, size_t size, void *user)
{
    (void)ctx, (void)pkg;
    const gemm_case *g = user;
    assert_string_equal(stream, "c");
    assert_int_equal(size, (size_t)TILES * g->c_bytes);
    for (size_t i = 0; i < size / 4; i++) {
        uint32_t bits = ipu_load_u32(bytes + 4 * i);
        float v;
        memcpy(&v, &bits, 4);
        if ((double)v != g->expected[i])
            fail_msg("GEMM output %zu (tile %zu) is %.9g, expected %.9g", i,
                     i / (GM * GN), (double)v, g->expected[i]);
    }
}

static void test_gemm_threads(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    gemm_case g;
    ipu_package *pkg = build_gemm(ctx, &g);
    snapshot one, two;
    size_t input_size = (size_t)TILES * g.a_bytes;
    run_package(pkg, 1, "a", g.a_stream, input_size, check_gemm, &g, &one);
    run_package(pkg, 2, "a", g.a_stream, input_size, check_gemm, &g, &two);
    expect_identical(&one, &two);
    snapshot_free(&one);
    snapshot_free(&two);
    ipu_package_free(pkg);
    free(g.a_stream);
    free(g.expected);
    ipu_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_threads),
        cmocka_unit_test(test_gemm_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
