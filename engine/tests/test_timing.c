/* test_timing.c: the static timer (timing/timing.h) on hand-built packages
 * whose Repeat patches change what each iteration costs: a FILL whose byte
 * count and an exchange window whose word count grow at every iteration,
 * patch lists of different lengths, a host transfer after the loop.  The
 * timing must equal the device's run field for field, and each step's
 * figures must be the ones DEVICE.md's rates give.  A package the device
 * would fault on has no timing: the timer names the tile and slot.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "support_packages.h"

#include "ipu/ipu.h"
#include "kernels/kernel_def.h"
#include "kernels/kernels.h"
#include "package/package.h"

#define TILES 16u
#define ITERATIONS 4u

typedef struct fixture {
    ipu_ctx *ctx;
    ipu_profile p;
    uint32_t x, y, z; /* data addresses on every tile */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->ctx = tpkg_context();
    tpkg_profile(f->ctx, TILES, &f->p);
    f->x = tpkg_data0(&f->p);
    f->y = f->x + 4096;
    f->z = f->x + 8192;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ipu_ctx_free(f->ctx);
    free(f);
    return 0;
}

/* Main: Repeat(ITERATIONS, patches) { step(compute, exchange) }, then a host
 * output of 128 bytes from tile 2's aperture.  Tile 1 fills 64 + 64 i bytes
 * at iteration i; tile 0 sends 4 + 4 i words to tile 1 at cycle 0.  Tile 0's
 * patch list has one entry, tile 1's two. */
static ipu_package *growing_package(fixture *f)
{
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t compute = ipu_pkg_new_slot(b), exchange = ipu_pkg_new_slot(b), patches = ipu_pkg_new_slot(b),
             host = ipu_pkg_new_slot(b), stream;
    TPKG_OK(f->ctx, ipu_pkg_add_stream(b, "out", IPU_STREAM_OUTPUT, 128, &stream));
    tpkg_data(b, 0, f->x, 4 * (4 + 4 * ITERATIONS), 1);
    tpkg_data(b, 2, f->p.aperture_base, 128, 2);
    tpkg_kernel fill = tpkg_fill(f->z, 64, 0x5A5A5A5Au);
    uint32_t list = tpkg_compute_list(b, 1, compute, &fill, 1, 1);
    tpkg_xrow send = tpkg_send(0, 4, f->x), recv = tpkg_recv(0, f->p.exchange_latency, 4, f->y);
    uint32_t send_table = tpkg_exchange_table(b, 0, exchange, &send, 1);
    uint32_t recv_table = tpkg_exchange_table(b, 1, exchange, &recv, 1);
    /* A full row's third word is its word count; a FILL's second argument its bytes. */
    tpkg_patch on_sender = {IPU_PATCH_PROGRESSION, send_table + 4 + 8, 4, 4};
    tpkg_patch on_receiver[2] = {{IPU_PATCH_PROGRESSION, recv_table + 4 + 8, 4, 4},
                                 {IPU_PATCH_PROGRESSION, list + 4 + 4 + 4, 64, 64}};
    tpkg_patch_list(b, 0, patches, &on_sender, 1);
    tpkg_patch_list(b, 1, patches, on_receiver, 2);
    tpkg_host_entry out = tpkg_host_run(stream, 0, f->p.aperture_base, 128);
    tpkg_host_descriptor(b, 2, host, &out, 1);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, ITERATIONS, 1, patches));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, compute, exchange, 0));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_OUT, host, 0, 0));
    return tpkg_build(f->ctx, b);
}

static json_t *timing_of(fixture *f, const ipu_package *pkg)
{
    char *text = NULL;
    TPKG_OK(f->ctx, ipu_package_timing_json(f->ctx, pkg, &text));
    json_t *timing = json_loads(text, 0, NULL);
    ipu_free(text);
    assert_non_null(timing);
    return timing;
}

static json_int_t field(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static void timing_equals_the_device_as_patches_grow(void **state)
{
    fixture *f = *state;
    ipu_package *pkg = growing_package(f);
    tpkg_outcome run = tpkg_execute(f->ctx, pkg);
    assert_int_equal(run.run, IPU_OK);
    json_t *timing = timing_of(f, pkg);
    const char *fields[] = {"cycles", "totals", "steps"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        assert_true(json_equal(json_object_get(timing, fields[i]), json_object_get(run.cycles, fields[i])));
    json_t *tiles = json_object_get(timing, "tiles"), *device_tiles = json_object_get(run.cycles, "tiles");
    assert_true(json_equal(json_object_get(tiles, "compute"), json_object_get(device_tiles, "compute")));
    assert_true(json_equal(json_object_get(tiles, "wait"), json_object_get(device_tiles, "wait")));

    /* Each iteration: a patch step (the longest list, 2 entries), then the
     * step; DEVICE.md's rates give every figure. */
    json_t *steps = json_object_get(timing, "steps");
    assert_int_equal(json_array_size(steps), 2 * ITERATIONS + 1);
    uint64_t received = 0;
    for (uint32_t i = 0; i < ITERATIONS; i++) {
        json_t *patch = json_array_get(steps, 2 * i), *step = json_array_get(steps, 2 * i + 1);
        assert_string_equal(json_string_value(json_object_get(patch, "kind")), "patch");
        assert_int_equal(field(patch, "control"), 2 * IPU_PATCH_CYCLES);
        uint64_t bytes = 64 + 64 * i, words = 4 + 4 * i;
        assert_int_equal(field(step, "compute"), IPU_VERTEX_OVERHEAD + bytes / f->p.copy_bytes_per_cycle);
        assert_int_equal(field(step, "compute_tile"), 1);
        assert_int_equal(field(step, "exchange"), words + f->p.exchange_latency + f->p.exchange_overhead);
        assert_int_equal(field(step, "sent_bytes"), 4 * words);
        assert_int_equal(field(step, "received_bytes"), 4 * words);
        assert_int_equal(field(step, "iteration"), i);
        received += 4 * words;
    }
    json_t *host = json_array_get(steps, 2 * ITERATIONS);
    assert_int_equal(field(host, "host_bytes"), 128);
    double per_cycle = f->p.host_bytes_per_second / f->p.clock_hz;
    assert_int_equal(field(host, "host"), (json_int_t)((128 + per_cycle - 1e-9) / per_cycle));

    /* One exchange phase, executed ITERATIONS times: its bytes summed. */
    json_t *phases = json_object_get(json_object_get(timing, "exchange"), "phases");
    assert_int_equal(json_array_size(phases), 1);
    assert_int_equal(field(json_array_get(phases, 0), "executions"), ITERATIONS);
    assert_int_equal(field(json_array_get(phases, 0), "received_bytes"), received);
    json_decref(timing);
    tpkg_outcome_free(&run);
    ipu_package_free(pkg);
}

/* The init program's Repeat patches the main program's FILL from 64 bytes
 * to 64 + 64 * 2 at its last iteration: the first run times the patched
 * descriptor, as the device runs it. */
static void init_patches_come_first(void **state)
{
    fixture *f = *state;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t setup = ipu_pkg_new_slot(b), compute = ipu_pkg_new_slot(b), patches = ipu_pkg_new_slot(b);
    tpkg_kernel fill = tpkg_fill(f->z, 64, 0), warm = tpkg_fill(f->y, 8, 0);
    uint32_t list = tpkg_compute_list(b, 5, compute, &fill, 1, 1);
    tpkg_compute_list(b, 5, setup, &warm, 1, 1);
    tpkg_patch bytes = {IPU_PATCH_PROGRESSION, list + 4 + 4 + 4, 64, 64};
    tpkg_patch_list(b, 5, patches, &bytes, 1);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 1, IPU_OP_REPEAT, 3, 1, patches));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 1, IPU_OP_STEP, setup, IPU_NO_SLOT, 0));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, compute, IPU_NO_SLOT, 0));
    ipu_package *pkg = tpkg_build(f->ctx, b);
    tpkg_outcome run = tpkg_execute(f->ctx, pkg);
    assert_int_equal(run.run, IPU_OK);
    json_t *timing = timing_of(f, pkg);
    assert_true(json_equal(json_object_get(timing, "steps"), json_object_get(run.cycles, "steps")));
    json_t *step = json_array_get(json_object_get(timing, "steps"), 0);
    assert_int_equal(field(step, "compute"), IPU_VERTEX_OVERHEAD + (64 + 64 * 2) / f->p.copy_bytes_per_cycle);
    json_decref(timing);
    tpkg_outcome_free(&run);
    ipu_package_free(pkg);
}

/* A patch turns tile 3's FILL into a call of entry 99 at the second
 * iteration: the validator saw a valid list, the device faults there. */
static void a_package_the_device_faults_on_has_no_timing(void **state)
{
    fixture *f = *state;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t compute = ipu_pkg_new_slot(b), patches = ipu_pkg_new_slot(b);
    tpkg_kernel fill = tpkg_fill(f->z, 64, 0);
    uint32_t list = tpkg_compute_list(b, 3, compute, &fill, 1, 1);
    uint32_t head = IPU_K_FILL | 3u << 16;
    tpkg_patch entry = {IPU_PATCH_PROGRESSION, list + 4, head, 99 - IPU_K_FILL};
    tpkg_patch_list(b, 3, patches, &entry, 1);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, 2, 1, patches));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, compute, IPU_NO_SLOT, 0));
    ipu_package *pkg = tpkg_build(f->ctx, b);
    tpkg_outcome run = tpkg_execute(f->ctx, pkg);
    assert_int_equal(run.run, IPU_ERR_DEVICE_FAULT);
    ipu_ctx_clear_error(f->ctx); /* the device's message stands first otherwise */
    char *text = NULL;
    assert_int_equal(ipu_package_timing_json(f->ctx, pkg, &text), IPU_ERR_MALFORMED);
    assert_null(text);
    assert_non_null(strstr(ipu_ctx_errmsg(f->ctx), "tile 3, slot 0"));
    assert_non_null(strstr(ipu_ctx_errmsg(f->ctx), "entry 99"));
    ipu_ctx_clear_error(f->ctx);
    tpkg_outcome_free(&run);
    ipu_package_free(pkg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(timing_equals_the_device_as_patches_grow, setup, teardown),
        cmocka_unit_test_setup_teardown(init_patches_come_first, setup, teardown),
        cmocka_unit_test_setup_teardown(a_package_the_device_faults_on_has_no_timing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
