/* test_device_api_errors.c: the public device calls refuse bad input and
 * calls out of order with the documented status and a message naming what is
 * wrong: NULL arguments, a bad profile, streams of an unknown name, an output
 * or the wrong size (when set, or when initialize binds those set before it),
 * options JSON malformed or with unknown or ill-typed fields, run and stream
 * reads before initialize, after unload and after a fault in the init
 * program, a package for another profile, and out-of-memory.  After each
 * refusal the device still works: a host package on the 4-tile profile
 * (param "w" read by the init program, input "in" copied to output "out")
 * returns the input bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "device/device.h"
#include "support_packages.h"
#include "support_seed.h"

#define TILES 4u
#define INVALID IPU_ERR_INVALID_ARGUMENT
#define NULL_ARG(call) "ipu_device_" call ": NULL argument"
#define BYTES 16u /* each stream's size */

typedef struct fx {
    ipu_ctx *ctx;
    ipu_profile p;
    char *profile_json; /* fixtures/profiles/tiles4.json */
    ipu_package *pkg;   /* the host package */
    ipu_device *dev;
} fx;

/* The call must fail with `status` and a message on the local `ctx`
 * containing `words`; the error is cleared for the next expectation. */
#define EXPECT(expr, status, words) expect_fail_at(__LINE__, ctx, (expr), (status), (words), #expr)
static void expect_fail_at(int line, ipu_ctx *ctx, ipu_status got, ipu_status want, const char *words,
                           const char *what)
{
    const char *msg = ipu_ctx_errmsg(ctx);
    if (got != want || !strstr(msg, words))
        TSEED_FAIL("line %d: %s: expected %s naming \"%s\", got %s: \"%s\"", line, what,
                   ipu_status_name(want), words, ipu_status_name(got), msg);
    ipu_ctx_clear_error(ctx);
}

/* Stream "w" (param) to the aperture in the init program; "in" to the
 * aperture and back out to "out" in the main program (all on tile 0). */
static ipu_package *host_package(ipu_ctx *ctx, const ipu_profile *p)
{
    ipu_pkg_builder *b = tpkg_builder(ctx, p);
    uint32_t w, in, out;
    TPKG_OK(ctx, ipu_pkg_add_stream(b, "w", IPU_STREAM_PARAM, BYTES, &w));
    TPKG_OK(ctx, ipu_pkg_add_stream(b, "in", IPU_STREAM_INPUT, BYTES, &in));
    TPKG_OK(ctx, ipu_pkg_add_stream(b, "out", IPU_STREAM_OUTPUT, BYTES, &out));
    uint32_t s_w = ipu_pkg_new_slot(b), s_in = ipu_pkg_new_slot(b), s_out = ipu_pkg_new_slot(b);
    tpkg_host_entry e_w = tpkg_host_run(w, 0, p->aperture_base, BYTES);
    tpkg_host_entry e_in = tpkg_host_run(in, 0, p->aperture_base + BYTES, BYTES);
    tpkg_host_entry e_out = tpkg_host_run(out, 0, p->aperture_base + BYTES, BYTES);
    tpkg_host_descriptor(b, 0, s_w, &e_w, 1);
    tpkg_host_descriptor(b, 0, s_in, &e_in, 1);
    tpkg_host_descriptor(b, 0, s_out, &e_out, 1);
    TPKG_OK(ctx, ipu_pkg_emit(b, 1, IPU_OP_HOST_IN, s_w, 0, 0));
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_IN, s_in, 0, 0));
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_OUT, s_out, 0, 0));
    return tpkg_build(ctx, b);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->ctx = tpkg_context();
    tpkg_profile(f->ctx, TILES, &f->p);
    f->profile_json = tpkg_profile_text(TILES);
    f->pkg = host_package(f->ctx, &f->p);
    TSEED_OK(f->ctx, ipu_device_create(f->ctx, f->profile_json, &f->dev));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    ipu_device_free(f->dev);
    ipu_package_free(f->pkg);
    free(f->profile_json);
    ipu_ctx_free(f->ctx);
    free(f);
    return 0;
}

static void pattern(uint8_t *bytes, uint8_t seed)
{
    for (uint32_t i = 0; i < BYTES; i++)
        bytes[i] = (uint8_t)(seed + 13 * i);
}

/* Unload whatever the device holds, set w and in, initialize, run: "out"
 * must hold in's bytes.  (The unload matters: an input set while a package
 * is loaded is bound at once, and an initialize drops the bound buffers.) */
static void run_ok(fx *f, uint8_t seed)
{
    uint8_t w[BYTES], in[BYTES];
    pattern(w, 1), pattern(in, seed);
    ipu_device_unload(f->dev);
    TSEED_OK(f->ctx, ipu_device_set_stream(f->ctx, f->dev, "w", w, sizeof w));
    TSEED_OK(f->ctx, ipu_device_set_stream(f->ctx, f->dev, "in", in, sizeof in));
    TSEED_OK(f->ctx, ipu_device_initialize(f->ctx, f->dev, f->pkg));
    char *report = NULL;
    TSEED_OK(f->ctx, ipu_device_run(f->ctx, f->dev, &report));
    ipu_free(report);
    const void *out = NULL;
    size_t size = 0;
    TSEED_OK(f->ctx, ipu_device_stream(f->ctx, f->dev, "out", &out, &size));
    assert_int_equal(size, BYTES);
    assert_memory_equal(out, in, BYTES);
}

/* Allocation n from now (1: the next one) fails. */
static void fail_next(ipu_ctx *ctx, uint64_t n) { ipu_ctx_fail_allocation(ctx, ipu_ctx_allocations(ctx) + n); }

static void test_create_refuses_bad_profiles_and_arguments(void **state)
{
    fx *f = *state;
    ipu_ctx *ctx = f->ctx;
    ipu_device *made = NULL;
    EXPECT(ipu_device_create(ctx, NULL, &made), INVALID, NULL_ARG("create"));
    EXPECT(ipu_device_create(ctx, f->profile_json, NULL), INVALID, NULL_ARG("create"));
    EXPECT(ipu_device_create(ctx, "{\"tiles\": 0}", &made), IPU_ERR_MALFORMED,
           "profile field 'tiles': expected 1..65535, got 0");
    EXPECT(ipu_device_create(ctx, "{\"tiles\": 4,", &made), IPU_ERR_MALFORMED,
           "device profile: invalid JSON at line 1");
    EXPECT(ipu_device_create(ctx, "{\"colour\": 1}", &made), IPU_ERR_MALFORMED, "unknown field 'colour'");
    /* The device's own state, then the simulator's, out of memory. */
    for (uint64_t n = 1; n <= 2; n++) {
        fail_next(ctx, n);
        EXPECT(ipu_device_create(ctx, f->profile_json, &made), IPU_ERR_NO_MEMORY, "out of memory");
    }
    ipu_ctx_fail_allocation(ctx, 0);
    assert_null(made);
    /* Freeing or unloading no device does nothing. */
    ipu_device_free(NULL);
    ipu_device_unload(NULL);
    run_ok(f, 3);
}

static void test_set_stream_refuses_bad_streams(void **state)
{
    fx *f = *state;
    ipu_ctx *ctx = f->ctx;
    ipu_device *dev = f->dev;
    uint8_t bytes[BYTES + 1] = {0};
    EXPECT(ipu_device_set_stream(ctx, NULL, "in", bytes, BYTES), INVALID, NULL_ARG("set_stream"));
    EXPECT(ipu_device_set_stream(ctx, dev, NULL, bytes, BYTES), INVALID, NULL_ARG("set_stream"));
    EXPECT(ipu_device_set_stream(ctx, dev, "in", NULL, BYTES), INVALID, NULL_ARG("set_stream"));
    /* Out of memory for the copy, the pending list, the name. */
    for (uint64_t n = 1; n <= 3; n++) {
        fail_next(ctx, n);
        EXPECT(ipu_device_set_stream(ctx, dev, "in", bytes, BYTES), IPU_ERR_NO_MEMORY, "out of memory");
    }
    ipu_ctx_fail_allocation(ctx, 0);

    run_ok(f, 5);
    /* With a package loaded, each stream is checked as it is set. */
    EXPECT(ipu_device_set_stream(ctx, dev, "nope", bytes, BYTES),
           INVALID, "the package has no stream named 'nope'");
    EXPECT(ipu_device_set_stream(ctx, dev, "out", bytes, BYTES),
           INVALID, "stream 'out' is an output; the host cannot supply it");
    EXPECT(ipu_device_set_stream(ctx, dev, "in", bytes, BYTES + 1),
           INVALID, "stream 'in' got 17 bytes, the package expects 16");
    EXPECT(ipu_device_set_stream(ctx, dev, "in", NULL, 0), INVALID,
           "stream 'in' got 0 bytes, the package expects 16");
    /* The refused calls left the device as it was: the next run is clean. */
    run_ok(f, 9);
}

static void test_streams_set_before_initialize_are_checked_there(void **state)
{
    fx *f = *state;
    ipu_ctx *ctx = f->ctx;
    ipu_device *dev = f->dev;
    uint8_t bytes[BYTES] = {0};
    char *report = NULL;
    /* The first refused stream stops initialize; the others are dropped. */
    TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, "nope", bytes, BYTES));
    TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, "w", bytes, BYTES));
    EXPECT(ipu_device_initialize(ctx, dev, f->pkg), INVALID, "the package has no stream named 'nope'");
    /* The failed initialize loaded nothing. */
    EXPECT(ipu_device_run(ctx, dev, &report), IPU_ERR_STATE, "run before initialize");
    TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, "out", bytes, BYTES));
    EXPECT(ipu_device_initialize(ctx, dev, f->pkg), INVALID, "stream 'out' is an output");
    TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, "w", bytes, BYTES - 1));
    EXPECT(ipu_device_initialize(ctx, dev, f->pkg), INVALID, "stream 'w' got 15 bytes, the package expects 16");
    /* The refused streams are gone: the init program now misses "w". */
    EXPECT(ipu_device_initialize(ctx, dev, f->pkg), INVALID, "reads host stream 'w', but no data was set");
    /* A zero-byte stream is copied too (and refused by size when bound). */
    TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, "in", NULL, 0));
    EXPECT(ipu_device_initialize(ctx, dev, f->pkg), INVALID, "stream 'in' got 0 bytes, the package expects 16");
    run_ok(f, 11);
}

/* A parameter set while a package is loaded waits for the next initialize,
 * the only step that reads it, and is checked against the loaded package at
 * once: a run after initializing again finds it. */
static void test_parameter_set_while_loaded_is_read_by_the_next_initialize(void **state)
{
    fx *f = *state;
    ipu_ctx *ctx = f->ctx;
    run_ok(f, 5);
    uint8_t w[BYTES], in[BYTES];
    pattern(w, 1), pattern(in, 9);
    EXPECT(ipu_device_set_stream(f->ctx, f->dev, "w", w, BYTES - 1), IPU_ERR_INVALID_ARGUMENT,
           "stream 'w' got 15 bytes, the package expects 16");
    TSEED_OK(f->ctx, ipu_device_set_stream(f->ctx, f->dev, "w", w, BYTES));
    TSEED_OK(f->ctx, ipu_device_initialize(f->ctx, f->dev, f->pkg));
    TSEED_OK(f->ctx, ipu_device_set_stream(f->ctx, f->dev, "in", in, BYTES));
    char *report = NULL;
    TSEED_OK(f->ctx, ipu_device_run(f->ctx, f->dev, &report));
    ipu_free(report);
    const void *out = NULL;
    size_t size = 0;
    TSEED_OK(f->ctx, ipu_device_stream(f->ctx, f->dev, "out", &out, &size));
    assert_int_equal(size, BYTES);
    assert_memory_equal(out, in, BYTES);
}

static void test_configure_refuses_bad_options(void **state)
{
    fx *f = *state;
    ipu_ctx *ctx = f->ctx;
    ipu_device *dev = f->dev;
    EXPECT(ipu_device_configure(ctx, NULL, "{}"), INVALID, NULL_ARG("configure"));
    EXPECT(ipu_device_configure(ctx, dev, NULL), INVALID, NULL_ARG("configure"));
    static const struct {
        const char *options, *words;
    } bad[] = {
        {"[true]", "device options: expected a JSON object"},
        {"{\"allocation_checks\": ", "device options: expected a JSON object: "},
        {"{\"verbose\": true}", "unknown option 'verbose'"},
        {"{\"allocation_checks\": 1}", "'allocation_checks' must be true or false"},
        {"{\"memory_events\": \"yes\"}", "'memory_events' must be true or false"},
        {"{\"inject\": \"memory-events-late\"}", "'inject' takes a device mutation"},
        {"{\"inject\": \"memory-events-late\", \"memory_events\": false}", "needs memory_events true"},
        {"{\"inject\": \"stale\", \"memory_events\": true}", "'inject' takes a device mutation"},
        {"{\"inject\": 7, \"memory_events\": true}", "'inject' takes a device mutation"},
        /* The first refusal is the one reported, traced_tiles is not looked at. */
        {"{\"inject\": 7, \"traced_tiles\": 5}", "'inject' takes"},
        {"{\"traced_tiles\": 3}", "'traced_tiles' must list at most 64 of the device's 4 tiles"},
        {"{\"traced_tiles\": [0, -1]}", "'traced_tiles' must list at most 64 of the device's 4 tiles"},
        {"{\"traced_tiles\": [4]}", "'traced_tiles' must list at most 64 of the device's 4 tiles"},
        {"{\"traced_tiles\": [\"0\"]}", "'traced_tiles' must list at most 64"},
        {"{\"traced_tiles\": [1.0]}", "'traced_tiles' must list at most 64"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT(ipu_device_configure(ctx, dev, bad[i].options), INVALID, bad[i].words);
    /* 65 tiles: one more than the device traces. */
    char many[512] = "{\"traced_tiles\": [0";
    for (int i = 1; i < IPU_MAX_TRACED_TILES + 1; i++)
        strcat(many, i < IPU_MAX_TRACED_TILES ? ", 0" : ", 0]}");
    EXPECT(ipu_device_configure(ctx, dev, many), INVALID, "'traced_tiles' must list at most 64");
    run_ok(f, 13);
}

static void test_configure_options_take_effect(void **state)
{
    fx *f = *state;
    ipu_ctx *ctx = f->ctx;
    ipu_device *dev = f->dev;
    /* Memory events: none recorded before a package is loaded, recorded once
     * asked for (with the late-begin mutation too), none once turned off. */
    assert_null(ipu_device_memory_events(dev));
    TSEED_OK(ctx, ipu_device_configure(ctx, dev, "{\"inject\": \"memory-events-late\", "
                                                 "\"memory_events\": true}"));
    run_ok(f, 15);
    assert_non_null(ipu_device_memory_events(dev));
    TSEED_OK(ctx, ipu_device_configure(ctx, dev, "{\"memory_events\": true, \"allocation_checks\": false}"));
    run_ok(f, 16);
    assert_non_null(ipu_device_memory_events(dev));
    TSEED_OK(ctx, ipu_device_configure(ctx, dev, "{\"memory_events\": false, \"allocation_checks\": true}"));
    run_ok(f, 17);
    assert_null(ipu_device_memory_events(dev));

    /* Traced tiles 3 and 1: both steps (host in, host out) list two compute
     * figures, 0 for host steps. */
    TSEED_OK(ctx, ipu_device_configure(ctx, dev, "{\"traced_tiles\": [3, 1]}"));
    uint8_t w[BYTES], in[BYTES];
    pattern(w, 1), pattern(in, 21);
    ipu_device_unload(dev);
    TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, "w", w, BYTES));
    TSEED_OK(ctx, ipu_device_initialize(ctx, dev, f->pkg));
    TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, "in", in, BYTES));
    char *text = NULL;
    TSEED_OK(ctx, ipu_device_run(ctx, dev, &text));
    int lists = 0;
    for (const char *at = text; (at = strstr(at, "\"tile_compute\":[0,0]")) != NULL; at++)
        lists++;
    ipu_free(text);
    assert_int_equal(lists, 2);
}

static void test_calls_out_of_order_and_null_arguments(void **state)
{
    fx *f = *state;
    ipu_ctx *ctx = f->ctx;
    ipu_device *dev = f->dev;
    char *text = NULL;
    const void *data = NULL;
    size_t size = 0;
    uint8_t buffer[BYTES];
    const uint32_t ap = f->p.aperture_base;
    EXPECT(ipu_device_initialize(ctx, NULL, f->pkg), INVALID, NULL_ARG("initialize"));
    EXPECT(ipu_device_initialize(ctx, dev, NULL), INVALID, NULL_ARG("initialize"));
    EXPECT(ipu_device_run(ctx, NULL, &text), INVALID, NULL_ARG("run"));
    EXPECT(ipu_device_run(ctx, dev, NULL), INVALID, NULL_ARG("run"));
    EXPECT(ipu_device_stream(ctx, NULL, "out", &data, &size), INVALID, NULL_ARG("stream"));
    EXPECT(ipu_device_stream(ctx, dev, NULL, &data, &size), INVALID, NULL_ARG("stream"));
    EXPECT(ipu_device_stream(ctx, dev, "out", NULL, &size), INVALID, NULL_ARG("stream"));
    EXPECT(ipu_device_stream(ctx, dev, "out", &data, NULL), INVALID, NULL_ARG("stream"));
    EXPECT(ipu_device_fault_json(ctx, NULL, &text), INVALID, NULL_ARG("fault_json"));
    EXPECT(ipu_device_fault_json(ctx, dev, NULL), INVALID, NULL_ARG("fault_json"));
    EXPECT(ipu_device_fault_profile_json(ctx, NULL, &text), INVALID, NULL_ARG("fault_profile_json"));
    EXPECT(ipu_device_fault_profile_json(ctx, dev, NULL), INVALID, NULL_ARG("fault_profile_json"));
    EXPECT(ipu_device_read(ctx, NULL, 0, ap, buffer, 4), INVALID, NULL_ARG("read"));
    EXPECT(ipu_device_read(ctx, dev, 0, ap, NULL, 4), INVALID, NULL_ARG("read"));
    EXPECT(ipu_device_write(ctx, NULL, 0, ap, buffer, 4), INVALID, NULL_ARG("write"));
    EXPECT(ipu_device_write(ctx, dev, 0, ap, NULL, 4), INVALID, NULL_ARG("write"));
    /* No buffer for no bytes is fine: the range is still checked (tile 4 of 4). */
    EXPECT(ipu_device_read(ctx, dev, TILES, ap, NULL, 0), INVALID, "tile 4 ");
    EXPECT(ipu_device_write(ctx, dev, TILES, ap, NULL, 0), INVALID, "tile 4 ");

    /* Before initialize. */
    EXPECT(ipu_device_run(ctx, dev, &text), IPU_ERR_STATE, "run before initialize");
    EXPECT(ipu_device_stream(ctx, dev, "out", &data, &size), INVALID, "the package has no stream named 'out'");
    EXPECT(ipu_device_fault_profile_json(ctx, dev, &text), IPU_ERR_STATE,
           "no run stopped on a fault since the last initialize");
    TSEED_OK(ctx, ipu_device_fault_json(ctx, dev, &text));
    assert_string_equal(text, "{\"kind\":\"none\"}");
    ipu_free(text);

    /* Initialized without input: "in" holds nothing, the run needs it, and a
     * stream the package lacks is refused by name. */
    uint8_t w[BYTES];
    pattern(w, 2);
    TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, "w", w, BYTES));
    TSEED_OK(ctx, ipu_device_initialize(ctx, dev, f->pkg));
    EXPECT(ipu_device_stream(ctx, dev, "in", &data, &size), IPU_ERR_STATE, "stream 'in' holds no data yet");
    EXPECT(ipu_device_stream(ctx, dev, "missing", &data, &size), INVALID,
           "the package has no stream named 'missing'");
    EXPECT(ipu_device_run(ctx, dev, &text), INVALID, "reads host stream 'in', but no data was set for it");
    /* The init program put w's bytes in the aperture; a debug write reads back. */
    TSEED_OK(ctx, ipu_device_read(ctx, dev, 0, ap, buffer, BYTES));
    assert_memory_equal(buffer, w, BYTES);
    TSEED_OK(ctx, ipu_device_write(ctx, dev, 3, ap + 64, w + 4, 8));
    TSEED_OK(ctx, ipu_device_read(ctx, dev, 3, ap + 64, buffer, 8));
    assert_memory_equal(buffer, w + 4, 8);

    /* Unloaded: run and streams are refused as before initialize. */
    ipu_device_unload(dev);
    EXPECT(ipu_device_run(ctx, dev, &text), IPU_ERR_STATE, "run before initialize");
    EXPECT(ipu_device_stream(ctx, dev, "w", &data, &size), INVALID, "no stream named 'w'");

    /* A package for the 16-tile profile, on this 4-tile device. */
    ipu_profile p16;
    tpkg_profile(ctx, 16, &p16);
    ipu_package *other = host_package(ctx, &p16);
    EXPECT(ipu_device_initialize(ctx, dev, other), INVALID,
           "built for device profile 'c600-16' (16 tiles), this device is 'c600-4' (4 tiles)");
    ipu_package_free(other);

    /* Out of memory for the stream buffers: nothing is loaded. */
    fail_next(ctx, 1);
    EXPECT(ipu_device_initialize(ctx, dev, f->pkg), IPU_ERR_NO_MEMORY, "out of memory");
    ipu_ctx_fail_allocation(ctx, 0);
    EXPECT(ipu_device_run(ctx, dev, &text), IPU_ERR_STATE, "run before initialize");
    run_ok(f, 23);
}

static void test_fault_in_the_init_program(void **state)
{
    fx *f = *state;
    ipu_ctx *ctx = f->ctx;
    ipu_device *dev = f->dev;
    /* No streams; the init program copies 64 bytes no one wrote on tile 2. */
    uint32_t x, y, z;
    tpkg_elements(&f->p, &x, &y, &z);
    ipu_pkg_builder *b = tpkg_builder(ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    tpkg_kernel copy = tpkg_copy(x, y, 64);
    tpkg_compute_list(b, 2, slot, &copy, 1, 1);
    TPKG_OK(ctx, ipu_pkg_emit(b, 1, IPU_OP_STEP, slot, IPU_NO_SLOT, 0));
    ipu_package *pkg = tpkg_build(ctx, b);

    char *text = NULL;
    EXPECT(ipu_device_initialize(ctx, dev, pkg), IPU_ERR_DEVICE_FAULT,
           "device fault uninitialized_read on tile 2");
    json_t *fault = tpkg_fault(ctx, dev);
    TPKG_EXPECT_FAULT(fault, "uninitialized_read", 2, x, x + 64);
    assert_string_equal(tpkg_fault_str(fault, "program"), "init");
    json_decref(fault);
    EXPECT(ipu_device_run(ctx, dev, &text), IPU_ERR_STATE,
           "the device stopped on a fault; initialize it again");
    /* The fault stopped initialize, not a run: no run's cycle report. */
    EXPECT(ipu_device_fault_profile_json(ctx, dev, &text), IPU_ERR_STATE, "no run stopped on a fault");
    ipu_device_unload(dev);
    ipu_package_free(pkg);
    TSEED_OK(ctx, ipu_device_fault_json(ctx, dev, &text));
    assert_string_equal(text, "{\"kind\":\"none\"}");
    ipu_free(text);
    run_ok(f, 29);
}

static void test_fault_kind_names(void **state)
{
    (void)state;
    assert_string_equal(ipu_fault_kind_name(IPU_FAULT_NONE), "none");
    assert_string_equal(ipu_fault_kind_name(IPU_FAULT_UNINITIALIZED_READ), "uninitialized_read");
    assert_string_equal(ipu_fault_kind_name(IPU_FAULT_KIND_COUNT - 1), "exchange_base_not_restored");
    assert_string_equal(ipu_fault_kind_name(-1), "unknown");
    assert_string_equal(ipu_fault_kind_name(IPU_FAULT_KIND_COUNT), "unknown");
}

int main(void)
{
    tseed_init("test_device_api_errors");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_refuses_bad_profiles_and_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_stream_refuses_bad_streams, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streams_set_before_initialize_are_checked_there, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parameter_set_while_loaded_is_read_by_the_next_initialize, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_configure_refuses_bad_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_configure_options_take_effect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_calls_out_of_order_and_null_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_in_the_init_program, setup, teardown),
        cmocka_unit_test(test_fault_kind_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
