/* test_compile_search.c: ipu_compile's plan search (search_seconds,
 * search_beam, search_steps), its attention and key band choices, the
 * capacity probe (probe_capacity) and cancelling a compile from its progress
 * callback.  The search stops where its options say ("step limit", "time
 * budget") and its record counts what it did; a searched package is the one
 * the record says (its timing is the record's cycles); a key band move the
 * planner refuses drops its candidate and does not stop the search; "auto"
 * attention takes the mode that plans when the other cannot; the probe
 * says whether the budget or the SRAM turned the last candidate down and by
 * how much (and a device with that much more SRAM takes the package); a
 * cancel at the search, packaging or probe stops the compile with
 * IPU_ERR_CANCELLED and no package.  Tiny workloads on 1 or 4 tiles: the
 * executable runs in about a second.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ipu/ipu.h"
#include "support_seed.h"

#define MLP "{\"workload\": \"mlp\", \"tokens\": 8, \"channels\": 16, \"hidden\": 32, \"seed\": 3}"
#define VIT                                                                                                    \
    "{\"workload\": \"vit-small\", \"layers\": 1, \"tokens\": 5, \"hidden\": 8, \"heads\": 2, \"head_dim\": 4, " \
    "\"seed\": 3}"
#define P4 "\"profile\": {\"tiles\": 4}"
/* A device with little SRAM: element size 64, region 1 from 0x58000, no
 * support reserve; "%u" is the SRAM's end. */
#define SMALL_PROFILE                                                                                        \
    "{\"tiles\": %u, \"element_bytes\": 64, \"sram_end\": %u, \"region1_base\": 360448, \"inaccessible_tail\": 0, " \
    "\"support_reserve\": 0}"
#define REGION1 0x58000u

static ipu_workload *workload(ipu_ctx *ctx, const char *options)
{
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, options, &w));
    return w;
}

/* Compile; on success the parsed report, else NULL with *status set. */
static json_t *compile(ipu_ctx *ctx, const ipu_workload *w, const char *options, ipu_package **pkg,
                       ipu_status *status)
{
    char *text = NULL;
    *pkg = NULL;
    *status = ipu_compile(ctx, w, options, pkg, &text);
    json_t *report = text ? json_loads(text, 0, NULL) : NULL;
    if (text && !report)
        TSEED_FAIL("%s: the report is not JSON: %s", options, text);
    ipu_free(text);
    return report;
}

static json_int_t int_at(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        TSEED_FAIL("field '%s' is not an integer", key);
    return json_integer_value(v);
}

static json_int_t package_cycles(ipu_ctx *ctx, const ipu_package *pkg)
{
    char *text = NULL;
    TSEED_OK(ctx, ipu_package_timing_json(ctx, pkg, &text));
    json_t *timing = json_loads(text, 0, NULL);
    json_int_t cycles = int_at(timing, "cycles");
    json_decref(timing);
    ipu_free(text);
    return cycles;
}

/* One step with a beam of two: the search takes a new candidate and stops
 * at its step limit; a budget of a nanosecond stops it before any step. */
static void test_search_limits(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = workload(ctx, MLP);
    ipu_package *pkg;
    ipu_status status;
    json_t *r = compile(ctx, w, "{" P4 ", \"search_seconds\": 86400, \"search_beam\": 2, \"search_steps\": 1}", &pkg,
                        &status);
    TSEED_OK(ctx, status);
    json_t *s = json_object_get(r, "plan_search");
    assert_int_equal(int_at(s, "beam"), 2);
    assert_int_equal(int_at(s, "step_limit"), 1);
    assert_int_equal(int_at(s, "steps"), 1);
    assert_string_equal(json_string_value(json_object_get(s, "stopped")), "step limit");
    assert_true(int_at(s, "screened") >= int_at(s, "built"));
    assert_true(int_at(s, "built") >= 1);
    assert_true(json_array_size(json_object_get(s, "accepted")) >= 1);
    assert_true(int_at(s, "cycles") <= int_at(s, "first_cycles"));
    assert_int_equal(package_cycles(ctx, pkg), int_at(s, "cycles"));
    json_decref(r);
    ipu_package_free(pkg);
    /* A beam wider than what a step builds: every candidate built joins it. */
    r = compile(ctx, w, "{" P4 ", \"search_seconds\": 600, \"search_beam\": 64, \"search_steps\": 1}", &pkg, &status);
    TSEED_OK(ctx, status);
    s = json_object_get(r, "plan_search");
    assert_int_equal(int_at(s, "steps"), 1);
    assert_int_equal(int_at(s, "dropped"), 0);
    assert_true(int_at(s, "built") >= 2);
    assert_int_equal(json_array_size(json_object_get(s, "accepted")), int_at(s, "built"));
    assert_int_equal(package_cycles(ctx, pkg), int_at(s, "cycles"));
    json_decref(r);
    ipu_package_free(pkg);
    r = compile(ctx, w, "{" P4 ", \"search_seconds\": 1e-9}", &pkg, &status);
    TSEED_OK(ctx, status);
    s = json_object_get(r, "plan_search");
    assert_string_equal(json_string_value(json_object_get(s, "stopped")), "time budget");
    assert_int_equal(int_at(s, "steps"), 0);
    assert_int_equal(int_at(s, "screened"), 0);
    assert_int_equal(int_at(s, "beam"), 1);
    assert_int_equal(int_at(s, "cycles"), int_at(s, "first_cycles"));
    assert_int_equal(package_cycles(ctx, pkg), int_at(s, "first_cycles"));
    json_decref(r);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* Flash attention over 130 keys in two key bands, searched one step under
 * a 12000-byte budget: materialized attention does not fit it and three
 * bands do not apply (both dropped with the planner's reason, the search
 * goes on); one band is faster, and the package returned is that plan. */
static void test_search_attention_moves(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = workload(ctx, "{\"workload\": \"vit-small\", \"layers\": 1, \"tokens\": 130, \"hidden\": 8, "
                                    "\"heads\": 2, \"head_dim\": 4, \"seed\": 3}");
    ipu_package *pkg;
    ipu_status status;
    json_t *r = compile(ctx, w,
                        "{" P4 ", \"attention\": \"flash\", \"attention_key_bands\": 2, \"memory_budget\": 12000, "
                        "\"search_seconds\": 600, \"search_steps\": 1}",
                        &pkg, &status);
    TSEED_OK(ctx, status);
    json_t *s = json_object_get(r, "plan_search");
    json_t *drops = json_object_get(s, "drops");
    assert_int_equal(int_at(s, "dropped"), json_array_size(drops));
    int over_budget = 0, bands_refused = 0;
    for (size_t i = 0; i < json_array_size(drops); i++) {
        json_t *d = json_array_get(drops, i);
        const char *move = json_string_value(json_object_get(d, "move"));
        const char *reason = json_string_value(json_object_get(d, "reason"));
        assert_string_equal(json_string_value(json_object_get(d, "stage")), "plan");
        over_budget += strstr(move, ": materialized") && strstr(reason, "the memory budget is 12000");
        bands_refused += strstr(move, ": 3 key bands") && strstr(reason, "3 key bands do not apply");
    }
    if (over_budget != 1 || bands_refused != 1)
        TSEED_FAIL("expected one materialized move over budget and one 3-band move refused: %d and %d of %zu drops",
                   over_budget, bands_refused, json_array_size(drops));
    json_t *accepted = json_object_get(s, "accepted");
    assert_int_equal(json_array_size(accepted), 1);
    json_t *move = json_array_get(accepted, 0);
    assert_non_null(strstr(json_string_value(json_object_get(move, "move")), ": 1 key bands"));
    assert_int_equal(int_at(move, "gain"), int_at(move, "from_cycles") - int_at(move, "cycles"));
    assert_true(int_at(move, "gain") > 0);
    assert_int_equal(int_at(move, "from_cycles"), int_at(s, "first_cycles"));
    /* The package and the report's plan are the searched candidate's. */
    assert_int_equal(package_cycles(ctx, pkg), int_at(s, "cycles"));
    assert_int_equal(int_at(s, "cycles"), int_at(move, "cycles"));
    json_t *ops = json_object_get(json_object_get(r, "plan"), "ops");
    size_t attention = 0;
    for (size_t i = 0; i < json_array_size(ops); i++) {
        json_t *op = json_array_get(ops, i);
        if (strcmp(json_string_value(json_object_get(op, "kind")), "attention"))
            continue;
        attention++;
        assert_int_equal(int_at(json_object_get(op, "attention"), "key_bands"), 1);
    }
    assert_int_equal(attention, 1);
    assert_true(int_at(json_object_get(r, "estimate"), "peak_bytes") <= 12000);
    json_decref(r);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* Two key bands do not apply to 5 keys: flash asked for is refused; "auto"
 * takes materialized, the mode that plans; without attention the option
 * changes nothing. */
static void test_key_bands_and_auto_attention(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = workload(ctx, VIT);
    ipu_package *pkg;
    ipu_status status;
    json_t *r = compile(ctx, w, "{" P4 ", \"attention\": \"flash\", \"attention_key_bands\": 2}", &pkg, &status);
    assert_int_equal(status, IPU_ERR_INVALID_ARGUMENT);
    assert_null(pkg);
    assert_null(r);
    if (!strstr(ipu_ctx_errmsg(ctx), "2 key bands do not apply"))
        TSEED_FAIL("the refusal: %s", ipu_ctx_errmsg(ctx));
    ipu_ctx_clear_error(ctx);
    r = compile(ctx, w, "{" P4 ", \"attention_key_bands\": 2}", &pkg, &status);
    TSEED_OK(ctx, status);
    json_t *a = json_object_get(r, "attention");
    assert_string_equal(json_string_value(json_object_get(a, "requested")), "auto");
    assert_string_equal(json_string_value(json_object_get(a, "searched")), "materialized");
    assert_int_equal(int_at(a, "flash_estimate"), 0);
    assert_true(int_at(a, "materialized_estimate") > 0);
    json_decref(r);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    /* The MLP has no attention: the same option compiles the same plan. */
    w = workload(ctx, MLP);
    r = compile(ctx, w, "{" P4 ", \"attention_key_bands\": 2}", &pkg, &status);
    TSEED_OK(ctx, status);
    ipu_package_free(pkg);
    json_t *plain = compile(ctx, w, "{" P4 "}", &pkg, &status);
    TSEED_OK(ctx, status);
    assert_int_equal(int_at(json_object_get(r, "plan"), "cycles"), int_at(json_object_get(plain, "plan"), "cycles"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "attention"), "searched")), "auto");
    json_decref(r);
    json_decref(plain);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* Whether the rejection's reason and the context's message say what. */
static void expect_refused(ipu_ctx *ctx, json_t *r, ipu_status status, const char *what)
{
    assert_int_equal(status, IPU_ERR_NO_PLAN);
    const char *reason = json_string_value(json_object_get(json_object_get(r, "rejection"), "reason"));
    if (!reason || !strstr(reason, what) || !strstr(ipu_ctx_errmsg(ctx), what))
        TSEED_FAIL("expected the refusal to say \"%s\": %s", what, ipu_ctx_errmsg(ctx));
    json_decref(r);
    ipu_ctx_clear_error(ctx);
}

static void test_probe_capacity(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = workload(ctx, MLP);
    ipu_package *pkg;
    ipu_status status;
    char options[512], profile[256];
    /* The budget refuses what the device would hold. */
    json_t *r = compile(ctx, w, "{" P4 ", \"memory_budget\": 256, \"probe_capacity\": true}", &pkg, &status);
    assert_null(pkg);
    expect_refused(ctx, r, status, "the budget, not the SRAM, turns it down");
    /* No candidate plans at all (the catalogue budget holds for the last
     * resort too): there is nothing to probe, and the refusal is the plan's. */
    r = compile(ctx, w, "{" P4 ", \"catalogue_budget\": 100, \"probe_capacity\": true}", &pkg, &status);
    assert_null(pkg);
    if (strstr(ipu_ctx_errmsg(ctx), "--probe-capacity"))
        TSEED_FAIL("a probe without a candidate: %s", ipu_ctx_errmsg(ctx));
    expect_refused(ctx, r, status, "and every matmul at its smallest candidate: plan: no grid for op 0");
    /* Too little SRAM for the package support itself. */
    snprintf(profile, sizeof profile, SMALL_PROFILE, 4u, REGION1 + 1024);
    snprintf(options, sizeof options, "{\"profile\": %s, \"probe_capacity\": true}", profile);
    r = compile(ctx, w, options, &pkg, &status);
    assert_null(pkg);
    expect_refused(ctx, r, status, "(--probe-capacity: the last candidate's package support does not fit");
    ipu_workload_free(w);
    /* A larger MLP whose buffers do not place in 16 KiB of region 1: the
     * probe names the SRAM that places it, and a device with that much
     * more takes the package under the same budget. */
    w = workload(ctx, "{\"workload\": \"mlp\", \"tokens\": 64, \"channels\": 128, \"hidden\": 256, \"seed\": 3}");
    snprintf(profile, sizeof profile, SMALL_PROFILE, 4u, REGION1 + 16384);
    snprintf(options, sizeof options, "{\"profile\": %s, \"memory_budget\": 63776, \"probe_capacity\": true}", profile);
    r = compile(ctx, w, options, &pkg, &status);
    assert_null(pkg);
    assert_int_equal(status, IPU_ERR_NO_PLAN);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "rejection"), "stage")), "place");
    const char *found = strstr(ipu_ctx_errmsg(ctx), "(--probe-capacity: the last candidate places with ");
    unsigned extra = 0, kib = 0, not_with = 0;
    if (!found || sscanf(found, "(--probe-capacity: the last candidate places with %u more bytes (%u KiB) of SRAM on "
                                "every tile, and not with %u)", &extra, &kib, &not_with) != 3)
        TSEED_FAIL("no probe result in: %s", ipu_ctx_errmsg(ctx));
    assert_true(extra > 0 && extra % 4096 == 0);
    assert_int_equal(kib, extra / 1024);
    assert_int_equal(not_with, extra - 4096);
    json_decref(r);
    ipu_ctx_clear_error(ctx);
    snprintf(profile, sizeof profile, SMALL_PROFILE, 4u, REGION1 + 16384 + extra);
    snprintf(options, sizeof options, "{\"profile\": %s, \"memory_budget\": 63776}", profile);
    r = compile(ctx, w, options, &pkg, &status);
    TSEED_OK(ctx, status);
    assert_non_null(pkg);
    json_decref(r);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    /* On one tile nothing up to 256 KiB more places it; the search budget
     * was lowered for the support on the way. */
    w = workload(ctx, "{\"workload\": \"mlp\", \"tokens\": 64, \"channels\": 256, \"hidden\": 512, \"seed\": 3}");
    snprintf(profile, sizeof profile, SMALL_PROFILE, 1u, REGION1 + 16384);
    snprintf(options, sizeof options, "{\"profile\": %s, \"memory_budget\": 4294967295, \"probe_capacity\": true}",
             profile);
    r = compile(ctx, w, options, &pkg, &status);
    assert_null(pkg);
    if (!strstr(ipu_ctx_errmsg(ctx), "(the search budget, lowered for the package support)") ||
        !strstr(ipu_ctx_errmsg(ctx), "the first candidate needed"))
        TSEED_FAIL("the refusal does not explain the lowered budget: %s", ipu_ctx_errmsg(ctx));
    expect_refused(ctx, r, status, "does not place with up to 262144 more bytes per tile either");
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* Cancel from the progress callback when a stage of that name reports. */
typedef struct canceller {
    ipu_ctx *ctx;
    const char *stage;
    int seen;
} canceller;

static void cancel_at(void *user, const char *stage, uint64_t done, uint64_t total)
{
    (void)done;
    (void)total;
    canceller *c = user;
    if (!strcmp(stage, c->stage)) {
        c->seen++;
        ipu_ctx_cancel(c->ctx);
    }
}

static void test_cancel(void **state)
{
    (void)state;
    static const struct {
        const char *stage, *options;
    } CASES[] = {
        {"plan search", "{" P4 ", \"search_seconds\": 600, \"search_steps\": 4}"},
        {"package", "{" P4 "}"},
        {"capacity probe", "{" P4 ", \"memory_budget\": 256, \"probe_capacity\": true}"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        ipu_ctx *ctx = ipu_ctx_create();
        ipu_workload *w = workload(ctx, MLP);
        canceller c = {ctx, CASES[i].stage, 0};
        ipu_ctx_set_progress(ctx, cancel_at, &c);
        ipu_package *pkg;
        ipu_status status;
        json_t *r = compile(ctx, w, CASES[i].options, &pkg, &status);
        if (status != IPU_ERR_CANCELLED || pkg || r || c.seen != 1)
            TSEED_FAIL("cancelled at '%s': %s (%s), package %s, report %s, stage seen %d times", CASES[i].stage,
                       ipu_status_name(status), ipu_ctx_errmsg(ctx), pkg ? "returned" : "none",
                       r ? "returned" : "none", c.seen);
        assert_non_null(strstr(ipu_ctx_errmsg(ctx), "cancelled"));
        ipu_workload_free(w);
        ipu_ctx_free(ctx);
    }
}

/* Every allocation of a compile may fail, the search's and a rejection's
 * included.  A compile with a search then returns IPU_ERR_NO_MEMORY with
 * "out of memory" and neither package nor report.  A budget nothing fits
 * (with the capacity probe) stays refused: IPU_ERR_NO_MEMORY, or
 * IPU_ERR_NO_PLAN whose message says what ran out of memory on the way.
 * One thread: the same allocations in the same order every run. */
static void walk(const char *options, int refused)
{
    uint64_t count = 0, failed = 0;
    for (uint64_t n = 1; n <= count + 1 || !count; n++) {
        ipu_ctx *ctx = ipu_ctx_create();
        ipu_ctx_set_threads(ctx, 1);
        ipu_workload *w = workload(ctx, MLP);
        uint64_t before = ipu_ctx_allocations(ctx);
        if (count)
            ipu_ctx_fail_allocation(ctx, before + n);
        ipu_package *pkg;
        ipu_status status;
        json_t *r = compile(ctx, w, options, &pkg, &status);
        const char *message = ipu_ctx_errmsg(ctx);
        if (!count || n > count) { /* the count, or past the last allocation: nothing failed */
            assert_int_equal(status, refused ? IPU_ERR_NO_PLAN : IPU_OK);
            assert_true(!!pkg != refused);
            count = ipu_ctx_allocations(ctx) - before;
            n = 0;
            if (failed)
                n = count + 1;
        } else if (pkg || !strstr(message, "out of memory") ||
                   !(status == IPU_ERR_NO_MEMORY ? !r : refused && status == IPU_ERR_NO_PLAN && r)) {
            TSEED_FAIL("%s: allocation %llu of %llu failed: %s (%s), package %s, report %s", options,
                       (unsigned long long)n, (unsigned long long)count, ipu_status_name(status), message,
                       pkg ? "returned" : "none", r ? "returned" : "none");
        } else {
            failed++;
        }
        json_decref(r);
        ipu_package_free(pkg);
        ipu_workload_free(w);
        ipu_ctx_free(ctx);
    }
    assert_true(count > 100);
    assert_int_equal(failed, count);
}

static void test_search_out_of_memory(void **state)
{
    (void)state;
    walk("{" P4 ", \"search_seconds\": 600, \"search_beam\": 2, \"search_steps\": 1}", 0);
}

static void test_rejection_out_of_memory(void **state)
{
    (void)state;
    walk("{" P4 ", \"memory_budget\": 256, \"probe_capacity\": true}", 1);
}

int main(void)
{
    tseed_init("test_compile_search");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_limits),
        cmocka_unit_test(test_search_attention_moves),
        cmocka_unit_test(test_key_bands_and_auto_attention),
        cmocka_unit_test(test_probe_capacity),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_search_out_of_memory),
        cmocka_unit_test(test_rejection_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
