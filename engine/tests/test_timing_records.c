/* test_timing_records.c: the static timer (ipu_package_timing_json) on
 * hand-built 4-tile packages whose records the validator accepts but the
 * device cannot run as written -- exchange rows of 0 or more than 2^20
 * words or a cycle past 2^30, and Repeat patches that at their second
 * iteration turn a row's op into an unknown one, its flags into an unknown
 * flag, a receive's peer into tile 4, a FILL into a call with 17 arguments,
 * a host descriptor's count past its storage, a compute or exchange slot
 * word into a data address, or read past a patch table's entries (in the
 * main program and in the init program).  Each has no timing:
 * IPU_ERR_MALFORMED naming the tile, slot and record, and the device
 * faults on it too, as on a TABLE patch whose table is a tensor's initial
 * bytes rather than a descriptor.  And on packages it does time: a TABLE patch,
 * OUTGOING_BASE rows, Repeats without patch slots (in the init and main
 * programs), two exchange phases of one compiler op and host transfers
 * give the figures worked out here and the device's steps.
 * NULL arguments, cancellation and each failed allocation give no result.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_packages.h"
#include "support_seed.h"

#include "ipu/ipu.h"
#include "kernels/kernel_def.h"
#include "kernels/kernels.h"
#include "package/package.h"

#define TILES 4u

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

static json_t *timing_of(fixture *f, const ipu_package *pkg)
{
    char *text = NULL;
    TSEED_OK(f->ctx, ipu_package_timing_json(f->ctx, pkg, &text));
    json_t *timing = json_loads(text, 0, NULL);
    ipu_free(text);
    assert_non_null(timing);
    return timing;
}

static json_int_t field(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        TSEED_FAIL("'%s' is not an integer", key);
    return json_integer_value(v);
}

/* Run the package once on a fresh device, its input stream "in" (when it
 * has one) filled with zeros; *steps receives the run's steps (NULL unless
 * it ran). */
static ipu_status device_run(fixture *f, const ipu_package *pkg, json_t **steps)
{
    ipu_device *dev = tpkg_device(f->ctx, pkg);
    int in = ipu_pkg_find_stream(pkg, "in");
    ipu_status st = IPU_OK;
    if (in >= 0) {
        uint8_t *zeros = calloc(1, (size_t)pkg->streams[in].size);
        assert_non_null(zeros);
        st = ipu_device_set_stream(f->ctx, dev, "in", zeros, (size_t)pkg->streams[in].size);
        free(zeros);
    }
    if (st == IPU_OK)
        st = ipu_device_initialize(f->ctx, dev, pkg);
    char *text = NULL;
    if (st == IPU_OK)
        st = ipu_device_run(f->ctx, dev, &text);
    *steps = NULL;
    if (st == IPU_OK) {
        json_t *cycles = json_loads(text, 0, NULL);
        assert_non_null(cycles);
        *steps = json_incref(json_object_get(cycles, "steps"));
        json_decref(cycles);
    }
    ipu_free(text);
    ipu_device_free(dev);
    return st;
}

/* No timing: IPU_ERR_MALFORMED with `what` in the message; and the device
 * faults on the package as well. */
static void expect_malformed(fixture *f, ipu_package *pkg, const char *what)
{
    char *text = NULL;
    ipu_status st = ipu_package_timing_json(f->ctx, pkg, &text);
    if (st != IPU_ERR_MALFORMED || !strstr(ipu_ctx_errmsg(f->ctx), what))
        TSEED_FAIL("expected malformed naming '%s', got %s: %s", what, ipu_status_name(st), ipu_ctx_errmsg(f->ctx));
    assert_null(text);
    ipu_ctx_clear_error(f->ctx);
    json_t *steps;
    st = device_run(f, pkg, &steps);
    if (st != IPU_ERR_DEVICE_FAULT)
        TSEED_FAIL("the timer refuses the package ('%s') but the device says %s: %s", what, ipu_status_name(st),
                   ipu_ctx_errmsg(f->ctx));
    ipu_ctx_clear_error(f->ctx);
    ipu_package_free(pkg);
}

/* One exchange step: tile 0's table is the row. */
static void test_rows_the_device_cannot_run(void **state)
{
    fixture *f = *state;
    tpkg_xrow rows[3] = {tpkg_send(0, 0, f->x), tpkg_send(0, (1u << 20) + 1, f->x),
                         tpkg_send((1u << 30) + 1, 4, f->x)};
    for (size_t i = 0; i < 3; i++) {
        ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
        uint32_t slot = ipu_pkg_new_slot(b);
        tpkg_data(b, 0, f->x, 64, 1);
        uint32_t table = tpkg_exchange_table(b, 0, slot, &rows[i], 1);
        TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, slot, 0));
        char what[128];
        snprintf(what, sizeof what, "tile 0, slot 0: exchange table at 0x%X, entry 0 is malformed", table);
        expect_malformed(f, tpkg_build(f->ctx, b), what);
    }
}

/* The step the Repeat packages below run (slots 0, 1 and 2: compute,
 * exchange, patches): tile 0 fills 64 bytes and sends 4 words at cycle 0,
 * tile 1 receives them.  *list, *sent, *received: where the compute list
 * and the two exchange tables went. */
static ipu_pkg_builder *step_builder(fixture *f, uint32_t *list, uint32_t *sent, uint32_t *received)
{
    uint32_t L = f->p.exchange_latency;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t compute = ipu_pkg_new_slot(b), exchange = ipu_pkg_new_slot(b);
    ipu_pkg_new_slot(b); /* patches */
    tpkg_data(b, 0, f->x, 64, 1);
    tpkg_kernel fill = tpkg_fill(f->z, 64, 0);
    *list = tpkg_compute_list(b, 0, compute, &fill, 1, 1);
    tpkg_xrow send = tpkg_send(0, 4, f->x), recv = tpkg_recv(0, L, 4, f->y);
    *sent = tpkg_exchange_table(b, 0, exchange, &send, 1);
    *received = tpkg_exchange_table(b, 1, exchange, &recv, 1);
    return b;
}

enum patched_case { BAD_OP, BAD_FLAGS, BAD_PEER, BAD_ARGS, CASES };

/* Repeat 2 (patch slot 2) { step(compute slot 0, exchange slot 1) }: tile
 * 0 fills and sends 4 words at cycle 0, tile 1 receives them; one patch
 * changes a word at iteration 1 only (a + 1 * b). */
static void test_patches_that_break_a_record(void **state)
{
    fixture *f = *state;
    for (int c = 0; c < CASES; c++) {
        uint32_t compute = 0, exchange = 1, patches = 2, list, sent, received;
        ipu_pkg_builder *b = step_builder(f, &list, &sent, &received);
        char what[160];
        tpkg_patch patch;
        uint32_t tile = c == BAD_PEER ? 1 : 0;
        if (c == BAD_OP) { /* a full row's first word: op | flags << 8 | peer << 16; op 1 + 8 = 9 */
            patch = (tpkg_patch){IPU_PATCH_PROGRESSION, sent + 4, IPU_XROW_SEND, 8};
            snprintf(what, sizeof what, "tile 0, slot 1: exchange table at 0x%X, entry 0 is malformed", sent);
        } else if (c == BAD_FLAGS) { /* flags 0, then 0x40 (no such flag) */
            patch = (tpkg_patch){IPU_PATCH_PROGRESSION, sent + 4, IPU_XROW_SEND, 0x40u << 8};
            snprintf(what, sizeof what, "tile 0, slot 1: exchange table at 0x%X, entry 0 is malformed", sent);
        } else if (c == BAD_PEER) { /* from tile 0, then from tile 4 of 4 */
            patch = (tpkg_patch){IPU_PATCH_PROGRESSION, received + 4, IPU_XROW_RECV, 4u << 16};
            snprintf(what, sizeof what, "tile 1, slot 1: exchange table at 0x%X, entry 0 is malformed", received);
        } else { /* 3 arguments, then 17 */
            patch = (tpkg_patch){IPU_PATCH_PROGRESSION, list + 4, IPU_K_FILL | 3u << 16, 14u << 16};
            snprintf(what, sizeof what, "tile 0, slot 0: descriptor 0 at 0x%X calls entry %d with 17 arguments",
                     list + 4, IPU_K_FILL);
        }
        tpkg_patch_list(b, tile, patches, &patch, 1);
        TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, 2, 1, patches));
        TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, compute, exchange, 0));
        expect_malformed(f, tpkg_build(f->ctx, b), what);
    }
}

/* HOST_IN of 64 bytes, then Repeat 2 (patches on tile 2) { HOST_OUT of 128
 * bytes }; with count_patch the descriptor's count goes from 1 to 1001 at
 * iteration 1. */
static ipu_package *host_package(fixture *f, int count_patch, uint32_t *out_table)
{
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t in_slot = ipu_pkg_new_slot(b), out_slot = ipu_pkg_new_slot(b), patches = ipu_pkg_new_slot(b);
    uint32_t in, out;
    TPKG_OK(f->ctx, ipu_pkg_add_stream(b, "in", IPU_STREAM_INPUT, 64, &in));
    TPKG_OK(f->ctx, ipu_pkg_add_stream(b, "out", IPU_STREAM_OUTPUT, 128, &out));
    tpkg_host_entry read = tpkg_host_run(in, 0, f->p.aperture_base, 64);
    tpkg_host_entry write = tpkg_host_run(out, 0, f->p.aperture_base, 128);
    tpkg_data(b, 2, f->p.aperture_base, 128, 2); /* what the output reads */
    tpkg_host_descriptor(b, 1, in_slot, &read, 1);
    *out_table = tpkg_host_descriptor(b, 2, out_slot, &write, 1);
    tpkg_patch grow = {IPU_PATCH_PROGRESSION, *out_table, 1, count_patch ? 1000 : 0};
    tpkg_patch_list(b, 2, patches, &grow, 1);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_IN, in_slot, 0, 0));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, 2, 1, patches));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_OUT, out_slot, 0, 0));
    return tpkg_build(f->ctx, b);
}

static void test_host_transfers(void **state)
{
    fixture *f = *state;
    uint32_t table;
    ipu_package *pkg = host_package(f, 0, &table);
    json_t *timing = timing_of(f, pkg), *ran = NULL;
    json_t *steps = json_object_get(timing, "steps");
    TSEED_OK(f->ctx, device_run(f, pkg, &ran));
    assert_true(json_equal(steps, ran));
    json_decref(ran);
    assert_int_equal(json_array_size(steps), 5); /* host_in, then (patch, host_out) twice */
    const char *kinds[5] = {"host_in", "patch", "host_out", "patch", "host_out"};
    const json_int_t bytes[5] = {64, 0, 128, 0, 128};
    double per_cycle = f->p.host_bytes_per_second / f->p.clock_hz;
    for (size_t i = 0; i < 5; i++) {
        json_t *s = json_array_get(steps, i);
        assert_string_equal(json_string_value(json_object_get(s, "kind")), kinds[i]);
        assert_int_equal(field(s, "host_bytes"), bytes[i]);
        assert_int_equal(field(s, "host"), (json_int_t)((bytes[i] + per_cycle - 1e-9) / per_cycle));
        assert_int_equal(field(s, "control"), bytes[i] ? 0 : IPU_PATCH_CYCLES);
    }
    assert_true(json_is_null(json_object_get(json_array_get(steps, 0), "iteration")));
    assert_int_equal(field(json_array_get(steps, 4), "iteration"), 1);
    json_decref(timing);
    ipu_package_free(pkg);

    pkg = host_package(f, 1, &table);
    char what[128];
    snprintf(what, sizeof what, "tile 2, slot 1: the host descriptor at 0x%X cannot be read", table);
    expect_malformed(f, pkg, what);
}

/* Repeat 2 { FILL on tile 0 } whose byte count a TABLE patch takes from
 * {64, 192} (entries words); the table holds `entries` of them, in
 * descriptor storage, or with in_data at the start of region 0's data as a
 * tensor's initial bytes.  With init the Repeat is the init program's and
 * the main program runs the FILL. */
static ipu_package *table_package(fixture *f, uint32_t entries, int init, int in_data, uint32_t *list)
{
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t compute = ipu_pkg_new_slot(b), patches = ipu_pkg_new_slot(b);
    tpkg_kernel fill = tpkg_fill(f->z, 64, 0);
    *list = tpkg_compute_list(b, 0, compute, &fill, 1, 1);
    const uint32_t values[2] = {64, 192};
    uint32_t table = tpkg_data0(&f->p);
    if (in_data) {
        uint8_t bytes[sizeof values];
        for (size_t i = 0; i < 2; i++)
            ipu_store_u32(bytes + 4 * i, values[i]);
        TPKG_OK(f->ctx, ipu_pkg_add_data(b, 0, table, bytes, sizeof bytes));
    } else {
        table = tpkg_put_words(b, 0, values, 2);
    }
    tpkg_patch bytes = {IPU_PATCH_TABLE, *list + 4 + 4 + 4, table, entries};
    tpkg_patch_list(b, 0, patches, &bytes, 1);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, init, IPU_OP_REPEAT, 2, 1, patches));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, init, IPU_OP_STEP, compute, IPU_NO_SLOT, 0));
    if (init)
        TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, compute, IPU_NO_SLOT, 0));
    return tpkg_build(f->ctx, b);
}

static void test_table_patches(void **state)
{
    fixture *f = *state;
    uint32_t list;
    ipu_package *pkg = table_package(f, 2, 0, 0, &list);
    tpkg_outcome run = tpkg_execute(f->ctx, pkg);
    assert_int_equal(run.run, IPU_OK);
    json_t *timing = timing_of(f, pkg);
    assert_true(json_equal(json_object_get(timing, "steps"), json_object_get(run.cycles, "steps")));
    json_t *steps = json_object_get(timing, "steps");
    assert_int_equal(json_array_size(steps), 4);
    assert_int_equal(field(json_array_get(steps, 1), "compute"), IPU_VERTEX_OVERHEAD + 64 / f->p.copy_bytes_per_cycle);
    assert_int_equal(field(json_array_get(steps, 3), "compute"), IPU_VERTEX_OVERHEAD + 192 / f->p.copy_bytes_per_cycle);
    json_decref(timing);
    tpkg_outcome_free(&run);
    ipu_package_free(pkg);

    /* One entry for two iterations: nothing to read at iteration 1, in the
     * main program and in the init program (applied before the main). */
    for (int init = 0; init < 2; init++) {
        pkg = table_package(f, 1, init, 0, &list);
        expect_malformed(f, pkg, "tile 0, slot 1: patch entry 0 (kind 1, table of 1 at 0x");
    }

    /* The same table as a tensor's initial bytes: a kernel could rewrite it,
     * so neither the timer nor the device reads a patch value there (the
     * device ran it once and the timer did not; the exchange fuzz target
     * found it). */
    pkg = table_package(f, 2, 0, 1, &list);
    char what[128];
    snprintf(what, sizeof what, "tile 0, slot 1: patch entry 0 (kind 1, table of 2 at 0x%X)", tpkg_data0(&f->p));
    tpkg_outcome run_data = tpkg_execute(f->ctx, pkg);
    assert_int_equal(run_data.run, IPU_ERR_DEVICE_FAULT);
    TPKG_EXPECT_FAULT(run_data.fault, "malformed_descriptor", 0, tpkg_data0(&f->p), tpkg_data0(&f->p) + 4);
    assert_non_null(strstr(tpkg_fault_str(run_data.fault, "detail"), "patch table"));
    tpkg_outcome_free(&run_data);
    ipu_ctx_clear_error(f->ctx);
    expect_malformed(f, pkg, what);
}

/* Repeat 2 (patch slot 2) { step(compute slot 0, exchange slot 1) } on
 * tiles 0 and 1; at iteration 1 a patch on tile 0 makes the word of slot
 * `which` (0 or 1) the data address x (the slot table's address is known once built:
 * built twice, same layout). */
static ipu_package *slot_package(fixture *f, uint32_t which, uint32_t target, uint32_t *slot_word)
{
    uint32_t compute = 0, exchange = 1, patches = 2, list, table, received;
    ipu_pkg_builder *b = step_builder(f, &list, &table, &received);
    uint32_t record = which == compute ? list : table;
    tpkg_patch move = {IPU_PATCH_PROGRESSION, target ? target : list, record, f->x - record};
    tpkg_patch_list(b, 0, patches, &move, 1);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, 2, 1, patches));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, compute, exchange, 0));
    ipu_package *pkg = tpkg_build(f->ctx, b);
    *slot_word = pkg->slot_tables[0] + 4 * which;
    return pkg;
}

static void test_slot_word_patched_to_data(void **state)
{
    fixture *f = *state;
    const char *records[2] = {"compute list", "exchange table"};
    for (uint32_t which = 0; which < 2; which++) {
        uint32_t word, again;
        ipu_package *probe = slot_package(f, which, 0, &word);
        ipu_package_free(probe);
        ipu_package *pkg = slot_package(f, which, word, &again);
        assert_int_equal(again, word);
        char what[128];
        snprintf(what, sizeof what, "tile 0, slot %u: the %s at 0x%X cannot be read", which, records[which], f->x);
        expect_malformed(f, pkg, what);
    }
}

/* Repeat 2 (patch slot 2) { step(compute slot 0, exchange slot 1) } on
 * tiles 0 and 1, tile 0's patch list shrinking itself: entry 0 sets the
 * list's count to 2 - iteration, entry 1 rewrites a word of its own.  The
 * list's address is known once built: built twice, same layout; *list gets
 * it. */
static ipu_package *shrinking_package(fixture *f, uint32_t *list)
{
    uint32_t compute = 0, exchange = 1, patches = 2, step_list, sent, received;
    ipu_pkg_builder *b = step_builder(f, &step_list, &sent, &received);
    uint32_t at = *list ? *list : tpkg_desc_base(&f->p); /* the first build only measures */
    tpkg_patch shrink[2] = {{IPU_PATCH_PROGRESSION, at, 2, 0xFFFFFFFFu},
                            {IPU_PATCH_PROGRESSION, at + 4 + IPU_PATCH_SIZE + 8, 5, 0}};
    *list = tpkg_patch_list(b, 0, patches, shrink, 2);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, 2, 1, patches));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, compute, exchange, 0));
    return tpkg_build(f->ctx, b);
}

/* The patch step is charged for the entries its list holds before they
 * apply: 2 at both iterations, though the second leaves 1 (the device reads
 * the count first; the timing did once read it after). */
static void test_patch_list_that_shrinks_itself(void **state)
{
    fixture *f = *state;
    uint32_t list = 0, again;
    ipu_package_free(shrinking_package(f, &list));
    again = list;
    ipu_package *pkg = shrinking_package(f, &again);
    assert_int_equal(again, list);
    json_t *timing = timing_of(f, pkg), *ran = NULL;
    TSEED_OK(f->ctx, device_run(f, pkg, &ran));
    json_t *steps = json_object_get(timing, "steps");
    assert_true(json_equal(steps, ran));
    size_t patch_steps = 0, i;
    json_t *s;
    json_array_foreach(steps, i, s)
        if (strcmp(json_string_value(json_object_get(s, "kind")), "patch") == 0) {
            assert_int_equal(field(s, "control"), 2 * IPU_PATCH_CYCLES);
            patch_steps++;
        }
    assert_int_equal(patch_steps, 2);
    json_decref(ran);
    json_decref(timing);
    ipu_package_free(pkg);
}

/* Repeats without patch slots: init Repeat 2 { compute }, main Repeat 3 {
 * compute; step with SET_BASE, a relative send and RESET_BASE on tile 0 }. */
static void test_repeats_without_patches_and_base_rows(void **state)
{
    fixture *f = *state;
    uint32_t L = f->p.exchange_latency;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t warm = ipu_pkg_new_slot(b), compute = ipu_pkg_new_slot(b), exchange = ipu_pkg_new_slot(b);
    tpkg_data(b, 0, f->x, 64, 1);
    tpkg_kernel small = tpkg_fill(f->y, 8, 0), fill = tpkg_fill(f->z, 128, 0);
    tpkg_compute_list(b, 3, warm, &small, 1, 1);
    tpkg_compute_list(b, 3, compute, &fill, 1, 1);
    tpkg_xrow rows[3] = {tpkg_set_base(f->x), tpkg_send(0, 4, 0), tpkg_reset_base()};
    rows[1].flags = IPU_XFLAG_RELATIVE;
    tpkg_xrow recv = tpkg_recv(0, L, 4, f->y);
    tpkg_exchange_table(b, 0, exchange, rows, 3);
    tpkg_exchange_table(b, 1, exchange, &recv, 1);
    TPKG_OK(f->ctx, ipu_pkg_add_compiler_op(b, "exchange", "gather"));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 1, IPU_OP_REPEAT, 2, 1, IPU_NO_SLOT));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 1, IPU_OP_STEP, warm, IPU_NO_SLOT, 0));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, 3, 2, IPU_NO_SLOT));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, compute, IPU_NO_SLOT, 0));
    ipu_pkg_set_origin(b, IPU_NO_OP, 0); /* both exchange steps lower compiler op 0 */
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, exchange, 0));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, exchange, 0));
    ipu_package *pkg = tpkg_build(f->ctx, b);
    tpkg_outcome run = tpkg_execute(f->ctx, pkg);
    assert_int_equal(run.run, IPU_OK);
    json_t *timing = timing_of(f, pkg);
    assert_true(json_equal(json_object_get(timing, "steps"), json_object_get(run.cycles, "steps")));
    json_t *steps = json_object_get(timing, "steps");
    assert_int_equal(json_array_size(steps), 7); /* no patch steps */
    assert_true(json_is_null(json_object_get(json_array_get(steps, 6), "iteration")));
    for (size_t i = 0; i < 7; i++) {
        json_t *s = json_array_get(steps, i);
        if (i < 6)
            assert_int_equal(field(s, "iteration"), i / 2);
        int exchanges = i % 2 || i == 6;
        assert_string_equal(json_string_value(json_object_get(s, "kind")), exchanges ? "step" : "compute");
        if (exchanges) {
            assert_int_equal(field(s, "exchange"), 4 + L + f->p.exchange_overhead);
            assert_int_equal(field(s, "sent_bytes"), 16);
            assert_int_equal(field(s, "received_bytes"), 16);
        } else {
            assert_int_equal(field(s, "compute"), IPU_VERTEX_OVERHEAD + 128 / f->p.copy_bytes_per_cycle);
            assert_int_equal(field(s, "compute_tile"), 3);
        }
    }
    json_t *phases = json_object_get(json_object_get(timing, "exchange"), "phases");
    assert_int_equal(json_array_size(phases), 2);
    /* Phases count the init ops first: main op 2's exchange half is 2 * (2 + 2) + 1. */
    assert_int_equal(field(json_array_get(phases, 0), "phase"), 9);
    assert_int_equal(field(json_array_get(phases, 0), "executions"), 3);
    assert_int_equal(field(json_array_get(phases, 0), "sent_bytes"), 48);
    assert_int_equal(field(json_array_get(phases, 1), "phase"), 11);
    assert_int_equal(field(json_array_get(phases, 1), "executions"), 1);
    /* Compiler op 0 sums both phases: 4 executions of 16 bytes each way. */
    json_t *ops = json_object_get(json_object_get(timing, "exchange"), "ops");
    assert_int_equal(json_array_size(ops), 1);
    json_t *op = json_array_get(ops, 0);
    assert_int_equal(field(op, "op"), 0);
    assert_int_equal(field(op, "phases"), 4);
    assert_int_equal(field(op, "sent_bytes"), 64);
    assert_int_equal(field(op, "received_bytes"), 64);
    assert_int_equal(field(op, "cycles"), 4 * (4 + L + f->p.exchange_overhead));
    json_decref(timing);
    tpkg_outcome_free(&run);
    ipu_package_free(pkg);
}

static void test_null_cancel_and_out_of_memory(void **state)
{
    fixture *f = *state;
    uint32_t list;
    ipu_package *pkg = table_package(f, 2, 0, 0, &list);
    char *text = NULL;
    assert_int_equal(ipu_package_timing_json(f->ctx, NULL, &text), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(f->ctx), "ipu_package_timing_json: NULL argument"));
    ipu_ctx_clear_error(f->ctx);
    assert_int_equal(ipu_package_timing_json(f->ctx, pkg, NULL), IPU_ERR_INVALID_ARGUMENT);
    ipu_ctx_clear_error(f->ctx);
    assert_null(text);

    ipu_ctx *ctx = ipu_ctx_create(); /* its own: allocations counted from 0, a cancel stays */
    uint64_t before = ipu_ctx_allocations(ctx);
    TSEED_OK(ctx, ipu_package_timing_json(ctx, pkg, &text));
    ipu_free(text);
    uint64_t made = ipu_ctx_allocations(ctx) - before;
    assert_true(made >= 6); /* five tables, the targets, a patched copy at least */
    for (uint64_t k = 1; k <= made; k++) {
        text = NULL;
        ipu_ctx_fail_allocation(ctx, ipu_ctx_allocations(ctx) + k);
        ipu_status st = ipu_package_timing_json(ctx, pkg, &text);
        if (st != IPU_ERR_NO_MEMORY || !strstr(ipu_ctx_errmsg(ctx), "out of memory"))
            TSEED_FAIL("allocation %llu of %llu failing: %s: %s", (unsigned long long)k, (unsigned long long)made,
                       ipu_status_name(st), ipu_ctx_errmsg(ctx));
        assert_null(text);
        ipu_ctx_clear_error(ctx);
    }
    ipu_ctx_fail_allocation(ctx, 0);
    ipu_ctx_cancel(ctx);
    assert_int_equal(ipu_package_timing_json(ctx, pkg, &text), IPU_ERR_CANCELLED);
    assert_null(text);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "cancelled"));
    ipu_ctx_free(ctx);
    ipu_package_free(pkg);
}

int main(void)
{
    tseed_init("test_timing_records");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rows_the_device_cannot_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_patches_that_break_a_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_transfers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_table_patches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slot_word_patched_to_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_patch_list_that_shrinks_itself, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repeats_without_patches_and_base_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_null_cancel_and_out_of_memory, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
