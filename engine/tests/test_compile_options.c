/* test_compile_options.c: ipu_compile's options document.  Every bad
 * option (wrong type, out of range, a combination that needs another option,
 * an unknown name) is refused with IPU_ERR_INVALID_ARGUMENT (a bad profile
 * with IPU_ERR_MALFORMED), no package, and a message naming the option; the
 * first bad option in the document is the one reported.  Unusual but valid
 * options (null for "default", the range limits) compile and show in the
 * report.  And the files a compile writes: a placement report or memory
 * profile that cannot be written fails the compile with IPU_ERR_IO and no
 * package; a rejection whose profile cannot be written keeps IPU_ERR_NO_PLAN
 * and says so.  A tiny MLP on 4 tiles: each compile takes milliseconds.
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
#define P4 "\"profile\": {\"tiles\": 4}"
/* The default budget of the c600 profile (DEVICE.md): SRAM 0x4C000..0xE8000
 * less the 1104-byte inaccessible tail, 1760 bytes of runtime state and the
 * 48 KiB support reserve. */
#define DEFAULT_BUDGET (0xE8000u - 0x4C000u - 1104u - 1760u - 48u * 1024u)

typedef struct bad_case {
    const char *options;
    ipu_status status;
    const char *names; /* the message must contain this */
} bad_case;

static const bad_case BAD[] = {
    {"not json", IPU_ERR_INVALID_ARGUMENT, "compile options: invalid JSON"},
    {"[4]", IPU_ERR_INVALID_ARGUMENT, "compile options: expected a JSON object"},
    {"{}", IPU_ERR_MALFORMED, "device profile"},
    {"{\"profile\": {\"tiles\": 0}}", IPU_ERR_MALFORMED, "'tiles'"},
    {"{" P4 ", \"memory_budjet\": 65536}", IPU_ERR_INVALID_ARGUMENT,
     "compile options: unknown option 'memory_budjet' (expected profile, memory_budget, search_budget"},
    {"{" P4 ", \"memory_budget\": 65536, \"memory_budget\": null}", IPU_ERR_INVALID_ARGUMENT,
     "compile options: invalid JSON: duplicate object key"},
    {"{\"profile\": {\"tiles\": 4}, \"Profile\": {}}", IPU_ERR_INVALID_ARGUMENT,
     "unknown option 'Profile' (expected profile, "},
    {"{" P4 ", \"memory_budget\": 0}", IPU_ERR_INVALID_ARGUMENT,
     "--memory-budget (compile option 'memory_budget'): expected a positive number of bytes below 2^32, or null"},
    {"{" P4 ", \"memory_budget\": -4096}", IPU_ERR_INVALID_ARGUMENT, "--memory-budget"},
    {"{" P4 ", \"memory_budget\": 4294967296}", IPU_ERR_INVALID_ARGUMENT, "--memory-budget"},
    {"{" P4 ", \"memory_budget\": 4096.5}", IPU_ERR_INVALID_ARGUMENT, "--memory-budget"},
    {"{" P4 ", \"memory_budget\": \"4096\"}", IPU_ERR_INVALID_ARGUMENT, "--memory-budget"},
    {"{" P4 ", \"search_budget\": 0}", IPU_ERR_INVALID_ARGUMENT, "--search-budget"},
    {"{" P4 ", \"catalogue_budget\": true}", IPU_ERR_INVALID_ARGUMENT, "--catalogue-budget"},
    {"{" P4 ", \"frontier_cap\": 0}", IPU_ERR_INVALID_ARGUMENT, "--frontier-cap: expected a whole number from 1 to 65536"},
    {"{" P4 ", \"frontier_cap\": 65537}", IPU_ERR_INVALID_ARGUMENT, "--frontier-cap"},
    {"{" P4 ", \"frontier_cap\": \"8\"}", IPU_ERR_INVALID_ARGUMENT, "--frontier-cap"},
    {"{" P4 ", \"catalogue_group\": 16777217}", IPU_ERR_INVALID_ARGUMENT, "--catalogue-group: expected a whole number from 1 to 16777216"},
    {"{" P4 ", \"exchange_stream_words\": 0}", IPU_ERR_INVALID_ARGUMENT, "--exchange-stream-words"},
    {"{" P4 ", \"exchange_stream_words\": 1048577}", IPU_ERR_INVALID_ARGUMENT, "--exchange-stream-words"},
    {"{" P4 ", \"search_seconds\": \"10\"}", IPU_ERR_INVALID_ARGUMENT, "--search-seconds"},
    {"{" P4 ", \"search_seconds\": 0}", IPU_ERR_INVALID_ARGUMENT, "--search-seconds"},
    {"{" P4 ", \"search_seconds\": -1}", IPU_ERR_INVALID_ARGUMENT, "--search-seconds"},
    {"{" P4 ", \"search_seconds\": 86400.5}", IPU_ERR_INVALID_ARGUMENT, "--search-seconds"},
    {"{" P4 ", \"search_seconds\": 5, \"search_beam\": 0}", IPU_ERR_INVALID_ARGUMENT, "--search-beam: expected a whole number from 1 to 64"},
    {"{" P4 ", \"search_seconds\": 5, \"search_beam\": 65}", IPU_ERR_INVALID_ARGUMENT, "--search-beam"},
    {"{" P4 ", \"search_seconds\": 5, \"search_steps\": 0}", IPU_ERR_INVALID_ARGUMENT, "--search-steps"},
    {"{" P4 ", \"search_seconds\": 5, \"search_steps\": 65537}", IPU_ERR_INVALID_ARGUMENT, "--search-steps"},
    {"{" P4 ", \"search_beam\": 2}", IPU_ERR_INVALID_ARGUMENT, "need --search-seconds"},
    {"{" P4 ", \"search_steps\": 2}", IPU_ERR_INVALID_ARGUMENT, "need --search-seconds"},
    {"{" P4 ", \"search_seconds\": null, \"search_steps\": 1}", IPU_ERR_INVALID_ARGUMENT, "need --search-seconds"},
    {"{" P4 ", \"probe_capacity\": 1}", IPU_ERR_INVALID_ARGUMENT, "--probe-capacity: expected true or false"},
    {"{" P4 ", \"probe_capacity\": \"true\"}", IPU_ERR_INVALID_ARGUMENT, "--probe-capacity"},
    {"{" P4 ", \"exchange_rank\": \"fastest\"}", IPU_ERR_INVALID_ARGUMENT, "--exchange-rank: expected tables or horizon"},
    {"{" P4 ", \"exchange_rank\": 2}", IPU_ERR_INVALID_ARGUMENT, "--exchange-rank"},
    {"{" P4 ", \"exchange_rank\": \"horizon\"}", IPU_ERR_INVALID_ARGUMENT, "--exchange-rank horizon needs --exchange-stream-words"},
    {"{" P4 ", \"balance_streams\": \"yes\"}", IPU_ERR_INVALID_ARGUMENT, "--balance-streams: expected true or false"},
    {"{" P4 ", \"balance_streams\": true}", IPU_ERR_INVALID_ARGUMENT, "--balance-streams needs --exchange-stream-words"},
    {"{" P4 ", \"attention\": \"fast\"}", IPU_ERR_INVALID_ARGUMENT, "--attention: expected auto, flash or materialized, got 'fast'"},
    {"{" P4 ", \"attention\": 1}", IPU_ERR_INVALID_ARGUMENT, "got a non-string"},
    {"{" P4 ", \"attention_key_bands\": 0}", IPU_ERR_INVALID_ARGUMENT, "--attention-key-bands: expected a whole number from 1 to 4096"},
    {"{" P4 ", \"attention_key_bands\": 4097}", IPU_ERR_INVALID_ARGUMENT, "--attention-key-bands"},
    {"{" P4 ", \"attention\": \"materialized\", \"attention_key_bands\": 2}", IPU_ERR_INVALID_ARGUMENT, "does not apply with --attention materialized"},
    {"{" P4 ", \"inject\": \"no-such-bug\"}", IPU_ERR_INVALID_ARGUMENT, "unknown 'no-such-bug'"},
    /* The first bad option wins: the budget comes before the rest. */
    {"{" P4 ", \"memory_budget\": 0, \"frontier_cap\": 0, \"inject\": \"no-such-bug\", \"attention\": 3}",
     IPU_ERR_INVALID_ARGUMENT, "--memory-budget"},
    {"{" P4 ", \"search_seconds\": -2, \"probe_capacity\": 3, \"inject\": \"no-such-bug\"}",
     IPU_ERR_INVALID_ARGUMENT, "--search-seconds"},
    {"{" P4 ", \"attention\": \"fast\", \"attention_key_bands\": 0, \"inject\": \"no-such-bug\"}",
     IPU_ERR_INVALID_ARGUMENT, "--attention:"},
};

static ipu_workload *mlp(ipu_ctx *ctx)
{
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, MLP, &w));
    return w;
}

static void test_bad_options_refused(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = mlp(ctx);
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        ipu_package *pkg = NULL;
        char *report = NULL;
        ipu_status status = ipu_compile(ctx, w, BAD[i].options, &pkg, &report);
        if (status != BAD[i].status || !strstr(ipu_ctx_errmsg(ctx), BAD[i].names))
            TSEED_FAIL("%s: expected %s naming \"%s\", got %s: %s", BAD[i].options,
                       ipu_status_name(BAD[i].status), BAD[i].names, ipu_status_name(status),
                       ipu_ctx_errmsg(ctx));
        if (pkg || report)
            TSEED_FAIL("%s: refused, yet a package or report came back", BAD[i].options);
        ipu_ctx_clear_error(ctx);
    }
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

static void test_null_arguments(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = mlp(ctx);
    ipu_package *pkg = NULL;
    char *report = NULL;
    assert_int_equal(ipu_compile(ctx, NULL, "{" P4 "}", &pkg, &report), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "NULL argument"));
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_compile(ctx, w, NULL, &pkg, &report), IPU_ERR_INVALID_ARGUMENT);
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_compile(ctx, w, "{" P4 "}", NULL, &report), IPU_ERR_INVALID_ARGUMENT);
    assert_null(pkg);
    assert_null(report);
    ipu_ctx_clear_error(ctx);
    /* The report is optional: without it the package still comes back. */
    TSEED_OK(ctx, ipu_compile(ctx, w, "{" P4 "}", &pkg, NULL));
    assert_non_null(pkg);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* Compile with options that must succeed; the report, parsed. */
static json_t *compile_report(ipu_ctx *ctx, ipu_workload *w, const char *options)
{
    ipu_package *pkg = NULL;
    char *text = NULL;
    TSEED_OK(ctx, ipu_compile(ctx, w, options, &pkg, &text));
    if (!pkg || !text)
        TSEED_FAIL("%s: compiled without a package or report", options);
    json_t *report = json_loads(text, 0, NULL);
    if (!json_is_object(report))
        TSEED_FAIL("%s: the report is not a JSON object: %s", options, text);
    ipu_free(text);
    ipu_package_free(pkg);
    return report;
}

static json_int_t estimate_field(const json_t *report, const char *field)
{
    json_t *v = json_object_get(json_object_get(report, "estimate"), field);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static void test_null_options_take_defaults(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = mlp(ctx);
    /* Every option null: as if absent; the search budget follows the memory
     * budget, which is the profile's default. */
    json_t *r = compile_report(ctx, w,
                               "{" P4 ", \"memory_budget\": null, \"search_budget\": null, \"catalogue_budget\": "
                               "null, \"frontier_cap\": null, \"catalogue_group\": null, \"exchange_stream_words\": "
                               "null, \"search_seconds\": null, \"search_beam\": null, \"search_steps\": null, "
                               "\"exchange_rank\": null, \"attention\": null, \"attention_key_bands\": null}");
    assert_int_equal(estimate_field(r, "budget"), DEFAULT_BUDGET);
    assert_int_equal(estimate_field(r, "search_budget"), DEFAULT_BUDGET);
    assert_true(json_is_null(json_object_get(r, "plan_search")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "attention"), "requested")), "auto");
    json_decref(r);
    /* A search budget of its own, below the memory budget: the estimate keeps to it. */
    r = compile_report(ctx, w, "{" P4 ", \"search_budget\": 1280}");
    assert_int_equal(estimate_field(r, "budget"), DEFAULT_BUDGET);
    assert_int_equal(estimate_field(r, "search_budget"), 1280);
    assert_true(estimate_field(r, "peak_bytes") <= 1280);
    json_decref(r);
    /* The largest memory budget there is. */
    r = compile_report(ctx, w, "{" P4 ", \"memory_budget\": 4294967295}");
    assert_int_equal(estimate_field(r, "budget"), 4294967295);
    json_decref(r);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

static void test_catalogue_limits(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = mlp(ctx);
    /* A frontier of one candidate, groups of one partition each and a
     * catalogue budget of its own. */
    json_t *r = compile_report(ctx, w, "{" P4 ", \"frontier_cap\": 1, \"catalogue_group\": 1, "
                                       "\"catalogue_budget\": 4096}");
    json_t *plan = json_object_get(r, "plan");
    json_t *search = json_object_get(plan, "search");
    assert_int_equal(json_integer_value(json_object_get(search, "frontier_cap")), 1);
    assert_int_equal(json_integer_value(json_object_get(search, "catalogue_group")), 1);
    assert_int_equal(json_integer_value(json_object_get(search, "catalogue_budget")), 4096);
    assert_int_equal(json_integer_value(json_object_get(search, "budget")), DEFAULT_BUDGET);
    json_t *ops = json_object_get(plan, "ops");
    size_t matmuls = 0;
    for (size_t i = 0; i < json_array_size(ops); i++) {
        json_t *cat = json_object_get(json_array_get(ops, i), "catalogue");
        if (!cat)
            continue;
        matmuls++;
        json_int_t enumerated = json_integer_value(json_object_get(cat, "enumerated"));
        json_int_t groups = json_integer_value(json_object_get(cat, "groups"));
        json_int_t shortlisted = json_integer_value(json_object_get(cat, "shortlisted"));
        if (shortlisted != 1 || groups != enumerated || enumerated < 2)
            TSEED_FAIL("op %zu: shortlisted %lld (cap 1), %lld groups of 1 for %lld partitions", i,
                       (long long)shortlisted, (long long)groups, (long long)enumerated);
    }
    assert_int_equal(matmuls, 2);
    json_decref(r);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

static void test_exchange_limits(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = mlp(ctx);
    static const char *const OK[] = {
        "{" P4 ", \"exchange_stream_words\": 1048576, \"exchange_rank\": \"horizon\", \"balance_streams\": true}",
        "{" P4 ", \"exchange_stream_words\": 1, \"exchange_rank\": \"tables\", \"balance_streams\": false, "
        "\"probe_capacity\": false}",
        "{" P4 ", \"exchange_rank\": \"tables\"}",
        "{" P4 ", \"attention\": \"flash\", \"attention_key_bands\": 4096, \"catalogue_budget\": 4096}",
    };
    for (size_t i = 0; i < sizeof OK / sizeof *OK; i++) {
        json_t *r = compile_report(ctx, w, OK[i]);
        if (!json_object_get(r, "package") || !json_object_get(r, "plan"))
            TSEED_FAIL("%s: the report has no package or plan", OK[i]);
        json_decref(r);
    }
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* A directory that does not exist, under one that does. */
static void missing_dir(char *buf, size_t size, const char *leaf)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(buf, size, "%s/ipu-test-compile-options-absent-%llu/%s", tmp, (unsigned long long)tseed(), leaf);
}

static void test_unwritable_outputs(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = mlp(ctx);
    char path[512], options[1024];
    ipu_package *pkg = NULL;
    char *report = NULL;
    /* The placement report. */
    missing_dir(path, sizeof path, "placement.json");
    snprintf(options, sizeof options, "{" P4 ", \"placement_report\": \"%s\"}", path);
    assert_int_equal(ipu_compile(ctx, w, options, &pkg, &report), IPU_ERR_IO);
    if (!strstr(ipu_ctx_errmsg(ctx), "ipu-test-compile-options-absent"))
        TSEED_FAIL("the message does not name the report's path: %s", ipu_ctx_errmsg(ctx));
    assert_null(pkg);
    assert_null(report);
    ipu_ctx_clear_error(ctx);
    /* A memory profile of a finalist. */
    missing_dir(path, sizeof path, "profiles");
    snprintf(options, sizeof options, "{" P4 ", \"memory_profile_directory\": \"%s\"}", path);
    assert_int_equal(ipu_compile(ctx, w, options, &pkg, &report), IPU_ERR_IO);
    if (!strstr(ipu_ctx_errmsg(ctx), "ipu-test-compile-options-absent"))
        TSEED_FAIL("the message does not name the profile's path: %s", ipu_ctx_errmsg(ctx));
    assert_null(pkg);
    assert_null(report);
    ipu_ctx_clear_error(ctx);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* A budget nothing fits: refused with IPU_ERR_NO_PLAN and no package,
 * with or without a report to take the rejection. */
static void test_rejection_without_report(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = mlp(ctx);
    const char *options = "{" P4 ", \"memory_budget\": 256}";
    ipu_package *pkg = NULL;
    assert_int_equal(ipu_compile(ctx, w, options, &pkg, NULL), IPU_ERR_NO_PLAN);
    assert_null(pkg);
    char first[1024];
    snprintf(first, sizeof first, "%s", ipu_ctx_errmsg(ctx));
    if (strncmp(first, "no plan fits the memory budget of 256 bytes per tile", 52))
        TSEED_FAIL("the refusal: %s", first);
    ipu_ctx_clear_error(ctx);
    char *text = NULL;
    assert_int_equal(ipu_compile(ctx, w, options, &pkg, &text), IPU_ERR_NO_PLAN);
    assert_null(pkg);
    json_t *report = json_loads(text, 0, NULL);
    json_t *rejection = json_object_get(report, "rejection");
    assert_int_equal(json_integer_value(json_object_get(rejection, "budget")), 256);
    /* The same refusal either way, and the report's reason is the message. */
    assert_string_equal(json_string_value(json_object_get(rejection, "reason")), first);
    assert_string_equal(ipu_ctx_errmsg(ctx), first);
    json_decref(report);
    ipu_free(text);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_compile_options");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_options_refused),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_null_options_take_defaults),
        cmocka_unit_test(test_catalogue_limits),
        cmocka_unit_test(test_exchange_limits),
        cmocka_unit_test(test_unwritable_outputs),
        cmocka_unit_test(test_rejection_without_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
