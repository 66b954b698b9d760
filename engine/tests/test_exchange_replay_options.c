/* test_exchange_replay_options.c: ipu_package_exchange_replay's options and
 * what it reports, on a hand-built 4-tile package whose exchange phases are
 * known row by row, and on a compiled one-layer ViT.  Options that are not an
 * object, phases that are not non-negative integers, stream_words out of
 * 1..2^20 and balance_streams that is not a boolean (or comes without
 * stream_words) are refused; a phase that is even, past the programs, or
 * the exchange half of an op that does not exchange is refused naming the
 * phase.  Selected phases are reported alone and in program order (init
 * first); the recorded horizon, rows and first-activity spread are the ones
 * worked out here from the rows, tables of more than 64 rows included;
 * phases with OUTGOING_BASE rows, a receive without its send (none from
 * that tile, or none at that cycle) or a send nobody receives are reported
 * as recorded only.
 * Cancellation and each failed allocation stop the replay with no result.
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

#define TILES 4u
/* The tiny MLP keeps every op on its own tiles (no exchange phase at all);
 * a one-layer ViT exchanges around LayerNorm and attention. */
#define VIT "{\"workload\": \"vit-small\", \"layers\": 1, \"tokens\": 5, \"hidden\": 8, \"heads\": 2}"

typedef struct fixture {
    ipu_ctx *ctx;
    ipu_profile p;
    ipu_package *pkg;
} fixture;

/* Addresses far apart, so no two rows of a table are adjacent windows. */
static uint32_t at(const fixture *f, uint32_t k) { return tpkg_data0(&f->p) + 1024 * k; }

/* Init: op 0 = phase 1: tile 0 sends 4 words at cycle 0 to tile 1.
 * Main (ops numbered on from 1):
 *   op 1, phase 3: compute only (a FILL on tile 0);
 *   op 2, phase 5 (compiler op 0): tile 0 sends 2 words at 0 to tile 3,
 *     tile 2 sends 8 words at 5 to tiles 1 and 3;
 *   op 3, phase 7: Repeat 2 of op 4;
 *   op 4, phase 9: tile 0 sets OUTGOING_BASE and sends relative, tile 1 receives;
 *   op 5, phase 11: tile 0 sends to tile 3, and tile 1 receives from tile 2, which sends nothing;
 *   op 6, phase 13: tile 3 sends 4 words nobody receives;
 *   op 7, phase 15: tile 3 sends 4 words at 0, tile 2 receives from it as if sent at 2. */
static ipu_package *build(fixture *f)
{
    uint32_t L = f->p.exchange_latency;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    TPKG_OK(f->ctx, ipu_pkg_add_compiler_op(b, "exchange", "shuffle"));
    uint32_t x1 = ipu_pkg_new_slot(b), compute = ipu_pkg_new_slot(b), x5 = ipu_pkg_new_slot(b),
             x9 = ipu_pkg_new_slot(b), x11 = ipu_pkg_new_slot(b), x13 = ipu_pkg_new_slot(b),
             x15 = ipu_pkg_new_slot(b);

    tpkg_xrow s1 = tpkg_send(0, 4, at(f, 0)), r1 = tpkg_recv(0, L, 4, at(f, 1));
    tpkg_exchange_table(b, 0, x1, &s1, 1);
    tpkg_exchange_table(b, 1, x1, &r1, 1);

    tpkg_kernel fill = tpkg_fill(at(f, 2), 64, 0);
    tpkg_compute_list(b, 0, compute, &fill, 1, 1);

    tpkg_xrow s5a = tpkg_send(0, 2, at(f, 3)), s5b = tpkg_send(5, 8, at(f, 4));
    tpkg_xrow r5_1 = tpkg_recv(2, 5 + L, 8, at(f, 5));
    tpkg_xrow r5_3[2] = {tpkg_recv(0, L, 2, at(f, 6)), tpkg_recv(2, 5 + L, 8, at(f, 8))};
    tpkg_exchange_table(b, 0, x5, &s5a, 1);
    tpkg_exchange_table(b, 2, x5, &s5b, 1);
    tpkg_exchange_table(b, 1, x5, &r5_1, 1);
    tpkg_exchange_table(b, 3, x5, r5_3, 2);

    tpkg_xrow s9[2] = {tpkg_set_base(at(f, 9)), tpkg_send(0, 4, 0)}, r9 = tpkg_recv(0, L, 4, at(f, 10));
    s9[1].flags = IPU_XFLAG_RELATIVE;
    tpkg_exchange_table(b, 0, x9, s9, 2);
    tpkg_exchange_table(b, 1, x9, &r9, 1);

    tpkg_xrow s11 = tpkg_send(0, 4, at(f, 11)), r11_3 = tpkg_recv(0, L, 4, at(f, 12)),
              r11_1 = tpkg_recv(2, L, 4, at(f, 13));
    tpkg_exchange_table(b, 0, x11, &s11, 1);
    tpkg_exchange_table(b, 3, x11, &r11_3, 1);
    tpkg_exchange_table(b, 1, x11, &r11_1, 1);

    tpkg_xrow s13 = tpkg_send(0, 4, at(f, 14));
    tpkg_exchange_table(b, 3, x13, &s13, 1);

    tpkg_xrow s15 = tpkg_send(0, 4, at(f, 15)), r15 = tpkg_recv(3, 2 + L, 4, at(f, 16));
    tpkg_exchange_table(b, 3, x15, &s15, 1);
    tpkg_exchange_table(b, 2, x15, &r15, 1);

    TPKG_OK(f->ctx, ipu_pkg_emit(b, 1, IPU_OP_STEP, IPU_NO_SLOT, x1, 0));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, compute, IPU_NO_SLOT, 0));
    ipu_pkg_set_origin(b, IPU_NO_OP, 0);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, x5, 0));
    ipu_pkg_set_origin(b, IPU_NO_OP, IPU_NO_OP);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, 2, 1, IPU_NO_SLOT));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, x9, 0));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, x11, 0));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, x13, 0));
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, x15, 0));
    return tpkg_build(f->ctx, b);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->ctx = tpkg_context();
    tpkg_profile(f->ctx, TILES, &f->p);
    f->pkg = build(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ipu_package_free(f->pkg);
    ipu_ctx_free(f->ctx);
    free(f);
    return 0;
}

/* The replay's phases for options, parsed; it must succeed. */
static json_t *replay(ipu_ctx *ctx, const ipu_package *pkg, const char *options)
{
    char *text = NULL;
    TSEED_OK(ctx, ipu_package_exchange_replay(ctx, pkg, options, &text));
    json_t *o = json_loads(text, 0, NULL);
    ipu_free(text);
    assert_non_null(o);
    assert_true(json_is_array(json_object_get(o, "phases")));
    return o;
}

static json_int_t int_of(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        TSEED_FAIL("'%s' is not an integer", key);
    return json_integer_value(v);
}

/* The phase numbers reported, as a string "1 5 9". */
static void phase_list(const json_t *o, char *out, size_t size)
{
    size_t i, used = 0;
    json_t *v;
    out[0] = 0;
    json_array_foreach(json_object_get(o, "phases"), i, v) used +=
        (size_t)snprintf(out + used, size - used, "%s%lld", i ? " " : "", (long long)int_of(v, "phase"));
}

static void expect_refused(ipu_ctx *ctx, const ipu_package *pkg, const char *options, const char *what)
{
    char *text = NULL;
    ipu_status st = ipu_package_exchange_replay(ctx, pkg, options, options ? &text : NULL);
    if (st != IPU_ERR_INVALID_ARGUMENT || !strstr(ipu_ctx_errmsg(ctx), what))
        TSEED_FAIL("options %s: expected invalid-argument naming '%s', got %s: %s", options ? options : "NULL",
                   what, ipu_status_name(st), ipu_ctx_errmsg(ctx));
    assert_null(text);
    ipu_ctx_clear_error(ctx);
}

static void malformed_options_are_refused(void **state)
{
    fixture *f = *state;
    const char *bad[] = {"{\"phases\": ", "[1]", "\"phases\"", "{\"phases\": 5}", "{\"phases\": {\"5\": true}}",
                         "{\"phases\": [5, \"9\"]}", "{\"phases\": [5, 1.0]}", "{\"phases\": [-1]}",
                         "{\"stream_words\": 0}", "{\"stream_words\": 1048577}", "{\"stream_words\": \"8\"}",
                         "{\"stream_words\": 8.0}", "{\"balance_streams\": 1, \"stream_words\": 8}",
                         "{\"balance_streams\": true}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_refused(f->ctx, f->pkg, bad[i], "exchange replay options: expected {\"phases\"");
    expect_refused(f->ctx, f->pkg, NULL, "ipu_package_exchange_replay: NULL argument");
    expect_refused(f->ctx, NULL, "{}", "ipu_package_exchange_replay: NULL argument");
    char *text = NULL;
    assert_int_equal(ipu_package_exchange_replay(f->ctx, f->pkg, "{}", NULL), IPU_ERR_INVALID_ARGUMENT);
    ipu_ctx_clear_error(f->ctx);
    /* The bounds themselves are accepted. */
    const char *edges[] = {"{\"stream_words\": 1}", "{\"stream_words\": 1048576, \"balance_streams\": true}",
                           "{\"balance_streams\": false}"};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
        ipu_status st = ipu_package_exchange_replay(f->ctx, f->pkg, edges[i], &text);
        if (st != IPU_OK)
            TSEED_FAIL("options %s refused: %s", edges[i], ipu_ctx_errmsg(f->ctx));
        ipu_free(text);
    }
}

static void phases_that_do_not_exchange_are_refused(void **state)
{
    fixture *f = *state;
    /* 0 and 2 are compute halves, 3 a compute-only step's exchange half, 7
     * a Repeat's, 17 and beyond past the last op (7). */
    const char *cases[][2] = {{"{\"phases\": [0]}", "phase 0 is not an exchange phase"},
                              {"{\"phases\": [2]}", "phase 2 is not"},
                              {"{\"phases\": [1, 3]}", "phase 3 is not"},
                              {"{\"phases\": [7]}", "phase 7 is not"},
                              {"{\"phases\": [17]}", "phase 17 is not"},
                              {"{\"phases\": [4294967297]}", "phase 4294967297 is not"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_refused(f->ctx, f->pkg, cases[i][0], cases[i][1]);
}

static void selected_phases_are_reported_in_program_order(void **state)
{
    fixture *f = *state;
    const char *cases[][2] = {{"{}", "1 5 9 11 13 15"},
                              {"{\"phases\": []}", ""},        {"{\"phases\": [13, 1]}", "1 13"},
                              {"{\"phases\": [5, 5]}", "5"},   {"{\"phases\": [9], \"stream_words\": 4}", "9"}};
    char got[64];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *o = replay(f->ctx, f->pkg, cases[i][0]);
        assert_int_equal(int_of(o, "latency"), f->p.exchange_latency);
        phase_list(o, got, sizeof got);
        if (strcmp(got, cases[i][1]))
            TSEED_FAIL("options %s: phases '%s', expected '%s'", cases[i][0], got, cases[i][1]);
        json_decref(o);
    }
}

/* Phase 1 and 5's recorded figures, from the rows in build(). */
static void recorded_figures_match_the_rows(void **state)
{
    fixture *f = *state;
    uint32_t L = f->p.exchange_latency;
    json_t *o = replay(f->ctx, f->pkg, "{\"phases\": [1, 5]}");
    json_t *one = json_array_get(json_object_get(o, "phases"), 0), *five = json_array_get(json_object_get(o, "phases"), 1);

    assert_int_equal(int_of(one, "transfers"), 1);
    assert_true(json_is_true(json_object_get(one, "replayed")));
    assert_string_equal(json_string_value(json_object_get(one, "op")), "");
    json_t *rec = json_object_get(one, "recorded");
    assert_int_equal(int_of(rec, "horizon_cycles"), L + 4);
    assert_int_equal(int_of(rec, "max_row_words"), 4); /* one 16-byte row per table */
    assert_int_equal(int_of(rec, "total_row_words"), 8);
    assert_int_equal(int_of(rec, "first_activity_span_cycles"), L); /* tile 0 at 0, tile 1 at L */
    /* One transfer is sent at cycle 0 again: the same figures, and it fits. */
    json_t *again = json_object_get(one, "rescheduled");
    assert_int_equal(int_of(again, "horizon_cycles"), L + 4);
    assert_int_equal(int_of(again, "total_row_words"), 8);
    assert_true(json_is_true(json_object_get(again, "within_row_budget")));

    assert_int_equal(int_of(five, "transfers"), 2);
    assert_string_equal(json_string_value(json_object_get(five, "op")), "op 0 exchange shuffle");
    rec = json_object_get(five, "recorded");
    assert_int_equal(int_of(rec, "horizon_cycles"), 5 + L + 8);
    assert_int_equal(int_of(rec, "max_row_words"), 8); /* tile 3: two receive rows */
    assert_int_equal(int_of(rec, "total_row_words"), 20);
    /* First activity: tile 0 at 0, tile 2 at 5, tile 3 at L, tile 1 at 5 + L. */
    assert_int_equal(int_of(rec, "first_activity_span_cycles"), 5 + L);
    /* Rescheduled, the 8 words go first at cycle 0 and the 2 words after
     * them on tile 3 (cycle 8): horizon 8 + L + 2. */
    again = json_object_get(five, "rescheduled");
    assert_int_equal(int_of(again, "horizon_cycles"), 8 + L + 2);
    assert_true(json_is_true(json_object_get(again, "within_row_budget")));
    json_decref(o);
}

/* Phases 9 to 15 cannot be rescheduled: rows only, no horizon. */
static void unreplayable_phases_are_reported_as_recorded(void **state)
{
    fixture *f = *state;
    json_t *o = replay(f->ctx, f->pkg,
                       "{\"phases\": [9, 11, 13, 15], \"stream_words\": 16, \"balance_streams\": true}");
    json_t *phases = json_object_get(o, "phases");
    assert_int_equal(json_array_size(phases), 4);
    const json_int_t transfers[4] = {1, 1, 1, 1}, most[4] = {8, 4, 4, 4}, total[4] = {12, 12, 4, 8};
    for (size_t i = 0; i < 4; i++) {
        json_t *ph = json_array_get(phases, i), *rec = json_object_get(ph, "recorded");
        assert_true(json_is_false(json_object_get(ph, "replayed")));
        assert_null(json_object_get(ph, "rescheduled"));
        assert_null(json_object_get(rec, "horizon_cycles"));
        assert_null(json_object_get(rec, "first_activity_span_cycles"));
        assert_int_equal(int_of(ph, "transfers"), transfers[i]);
        assert_int_equal(int_of(rec, "max_row_words"), most[i]);
        assert_int_equal(int_of(rec, "total_row_words"), total[i]);
    }
    json_decref(o);
}

static void cancelled_and_out_of_memory_replays_give_nothing(void **state)
{
    fixture *f = *state;
    ipu_ctx *ctx = ipu_ctx_create(); /* its own: a cancel request stays */
    char *text = NULL;
    uint64_t before = ipu_ctx_allocations(ctx);
    TSEED_OK(ctx, ipu_package_exchange_replay(ctx, f->pkg, "{}", &text));
    ipu_free(text);
    uint64_t made = ipu_ctx_allocations(ctx) - before;
    assert_true(made >= 3); /* per replayed phase at least the table sizes and the destinations */
    for (uint64_t k = 1; k <= made; k++) {
        text = NULL;
        ipu_ctx_fail_allocation(ctx, ipu_ctx_allocations(ctx) + k);
        ipu_status st = ipu_package_exchange_replay(ctx, f->pkg, "{}", &text);
        if (st != IPU_ERR_NO_MEMORY || !strstr(ipu_ctx_errmsg(ctx), "out of memory"))
            TSEED_FAIL("allocation %llu of %llu failing: %s: %s", (unsigned long long)k, (unsigned long long)made,
                       ipu_status_name(st), ipu_ctx_errmsg(ctx));
        assert_null(text);
        ipu_ctx_clear_error(ctx);
    }
    ipu_ctx_fail_allocation(ctx, 0);
    ipu_ctx_cancel(ctx);
    text = NULL;
    assert_int_equal(ipu_package_exchange_replay(ctx, f->pkg, "{}", &text), IPU_ERR_CANCELLED);
    assert_null(text);
    /* Refused options win over the cancel: nothing runs to notice it. */
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_package_exchange_replay(ctx, f->pkg, "{\"phases\": [0]}", &text), IPU_ERR_INVALID_ARGUMENT);
    /* No phase selected: nothing to cancel, an empty list. */
    json_t *o = replay(ctx, f->pkg, "{\"phases\": []}");
    assert_int_equal(json_array_size(json_object_get(o, "phases")), 0);
    json_decref(o);
    ipu_ctx_free(ctx);
}

/* 70 one-word sends from tile 0 at cycles 0..69, received by tile 1, in
 * one table each (16-byte rows: 70 x 4 words): read back whole, sent one a
 * cycle again. */
static void long_tables_replay_whole(void **state)
{
    fixture *f = *state;
    enum { N = 70 };
    uint32_t L = f->p.exchange_latency;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    tpkg_xrow sends[N], recvs[N];
    for (uint32_t i = 0; i < N; i++) {
        sends[i] = tpkg_send(i, 1, at(f, 0) + 8 * i);
        recvs[i] = tpkg_recv(0, i + L, 1, at(f, 1) + 8 * i);
    }
    tpkg_exchange_table(b, 0, slot, sends, N);
    tpkg_exchange_table(b, 1, slot, recvs, N);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, slot, 0));
    ipu_package *pkg = tpkg_build(f->ctx, b);
    json_t *o = replay(f->ctx, pkg, "{}");
    json_t *ph = json_array_get(json_object_get(o, "phases"), 0);
    assert_int_equal(int_of(ph, "phase"), 1);
    assert_int_equal(int_of(ph, "transfers"), N);
    json_t *rec = json_object_get(ph, "recorded"), *again = json_object_get(ph, "rescheduled");
    assert_int_equal(int_of(rec, "horizon_cycles"), N + L);
    assert_int_equal(int_of(rec, "max_row_words"), 4 * N);
    assert_int_equal(int_of(rec, "total_row_words"), 8 * N);
    assert_int_equal(int_of(rec, "first_activity_span_cycles"), L);
    assert_int_equal(int_of(again, "horizon_cycles"), N + L);
    assert_true(int_of(again, "max_row_words") <= 4 * N);
    assert_true(json_is_true(json_object_get(again, "within_row_budget")));
    json_decref(o);
    ipu_package_free(pkg);
}

/* A compiled ViT: every exchange phase is odd, replays, and is reported
 * the same when selected alone. */
static void compiled_package_phases_replay_alone_as_in_the_whole(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    ipu_package *pkg = NULL;
    char *report = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, VIT, &w));
    TSEED_OK(ctx, ipu_compile(ctx, w, "{\"profile\": {\"tiles\": 4}}", &pkg, &report));
    ipu_free(report);
    json_t *all = replay(ctx, pkg, "{}");
    json_t *phases = json_object_get(all, "phases");
    assert_true(json_array_size(phases) > 0);
    size_t i;
    json_t *ph;
    json_array_foreach(phases, i, ph)
    {
        json_int_t phase = int_of(ph, "phase");
        assert_int_equal(phase % 2, 1);
        assert_true(int_of(ph, "transfers") > 0);
        if (i > 0)
            assert_true(phase > int_of(json_array_get(phases, i - 1), "phase"));
        char options[64];
        snprintf(options, sizeof options, "{\"phases\": [%lld]}", (long long)phase);
        json_t *alone = replay(ctx, pkg, options);
        assert_int_equal(json_array_size(json_object_get(alone, "phases")), 1);
        assert_true(json_equal(json_array_get(json_object_get(alone, "phases"), 0), ph));
        json_decref(alone);
        /* The compute half of the same op is no exchange phase. */
        snprintf(options, sizeof options, "{\"phases\": [%lld]}", (long long)phase - 1);
        expect_refused(ctx, pkg, options, "is not an exchange phase");
    }
    json_decref(all);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_exchange_replay_options");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(malformed_options_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(phases_that_do_not_exchange_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(selected_phases_are_reported_in_program_order, setup, teardown),
        cmocka_unit_test_setup_teardown(recorded_figures_match_the_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(unreplayable_phases_are_reported_as_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(cancelled_and_out_of_memory_replays_give_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(long_tables_replay_whole, setup, teardown),
        cmocka_unit_test(compiled_package_phases_replay_alone_as_in_the_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
