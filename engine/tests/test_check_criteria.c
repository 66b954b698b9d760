/* test_check_criteria.c: the output check (reference/check.h) on small
 * hand-made arrays, through ipu_check_outputs and ipu_check_rows.  Criteria
 * that are not an object, lack a field or hold a non-number are refused
 * naming the field; thresholds out of range, unknown device types, missing
 * data and sizes that overflow are refused before anything is read.  The
 * figures of each result are worked out by hand here: a row scaled by 2
 * keeps cosine 1 but fails the norm ratio and every element; a NaN fails
 * its row without spoiling the others' figures; zero rows, an all-zero
 * reference, an all-NaN tensor and an empty tensor give the nulls check.h
 * documents; the failed-row list stops at IPU_CHECK_LISTED_ROWS; a cosine
 * that rounds past +-1 is reported as +-1; an error where the bound is 0
 * ranks worst; and each allocation the check makes on the context, and each of
 * jansson's while it builds the result, may fail with IPU_ERR_NO_MEMORY.
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
#include <math.h>

#include "ipu/ipu.h"
#include "numerics/numerics.h"
#include "reference/check.h"
#include "support_seed.h"

/* atol 0.01, rtol 0, cosine 0.99, norm ratio within 1 +- 0.1. */
#define CRITERIA "{\"min_cosine\": 0.99, \"atol\": 0.01, \"rtol\": 0, \"norm_tolerance\": 0.1}"

/* The check of rows x cols f32 device values, parsed; it must succeed. */
static json_t *check_f32(ipu_ctx *ctx, const float *ref, const float *dev, size_t rows, size_t cols,
                         const char *criteria)
{
    char *text = NULL;
    TSEED_OK(ctx, ipu_check_outputs(ctx, ref, dev, "f32", rows, cols, criteria, &text));
    assert_non_null(text);
    json_t *result = json_loads(text, 0, NULL);
    ipu_free(text);
    assert_non_null(result);
    return result;
}

/* A member of the result that must exist with the right type. */
static const json_t *member(const json_t *o, const char *key, int ok)
{
    if (!ok)
        TSEED_FAIL("'%s' is missing or not of the expected type", key);
    return json_object_get(o, key);
}
#define MEMBER(o, key, is) member((o), (key), is(json_object_get((o), (key))))
static json_int_t int_of(const json_t *o, const char *key) { return json_integer_value(MEMBER(o, key, json_is_integer)); }
static double real_of(const json_t *o, const char *key) { return json_number_value(MEMBER(o, key, json_is_number)); }
static int true_of(const json_t *o, const char *key) { return json_is_true(MEMBER(o, key, json_is_boolean)); }
static void expect_null(const json_t *o, const char *key) { MEMBER(o, key, json_is_null); }

static int setup(void **state)
{
    *state = ipu_ctx_create();
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    ipu_ctx_free(*state);
    return 0;
}

/* A call that must fail with status and a message containing what. */
static void expect_refused(ipu_ctx *ctx, ipu_status got, ipu_status status, const char *what)
{
    if (got != status || !strstr(ipu_ctx_errmsg(ctx), what))
        TSEED_FAIL("expected %s naming '%s', got %s: %s", ipu_status_name(status), what, ipu_status_name(got),
                   ipu_ctx_errmsg(ctx));
    ipu_ctx_clear_error(ctx);
}

static void refused_criteria(ipu_ctx *ctx, const char *criteria, const char *what)
{
    const float one = 1;
    char *text = NULL;
    expect_refused(ctx, ipu_check_outputs(ctx, &one, &one, "f32", 1, 1, criteria, &text),
                   IPU_ERR_INVALID_ARGUMENT, what);
    assert_null(text);
}

static void test_malformed_criteria_name_the_field(void **state)
{
    ipu_ctx *ctx = *state;
#define C4(m, a, r, n) "{\"min_cosine\": " m ", \"atol\": " a ", \"rtol\": " r ", \"norm_tolerance\": " n "}"
    const char *cases[][2] = {
        {"{\"min_cosine\": ", "check criteria: expected a JSON object: "},
        {"[0.99, 0.01, 0, 0.1]", "check criteria: expected a JSON object"},
        {"{}", "'min_cosine' must be a number"},
        {C4("\"0.99\"", "0", "0", "0"), "'min_cosine' must be a number"},
        {C4("0.9", "null", "0", "0"), "'atol' must be a number"},
        /* the per-op check's key does not stand in for atol here */
        {"{\"min_cosine\": 0.9, \"atol_rms\": 0.1, \"rtol\": 0, \"norm_tolerance\": 0}", "'atol' must be a number"},
        {C4("0.9", "0", "[0]", "0"), "'rtol' must be a number"},
        {C4("0.9", "0", "0", "true"), "'norm_tolerance' must be a number"},
        /* out of range: the message gives the value */
        {C4("1.5", "0", "0", "0"), "cosine threshold 1.5 is outside [-1, 1]"},
        {C4("-2", "0", "0", "0"), "cosine threshold -2 is outside [-1, 1]"},
        {C4("0.9", "-1", "0", "0"), "atol -1, rtol 0 and norm tolerance 0 must be finite and >= 0"},
        {C4("0.9", "0", "-0.5", "0"), "atol 0, rtol -0.5 and norm tolerance 0 must be"},
        {C4("0.9", "0", "0", "-3"), "norm tolerance -3 must be"},
    };
#undef C4
    refused_criteria(ctx, NULL, "check criteria: expected a JSON object");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        refused_criteria(ctx, cases[i][0], cases[i][1]);
}

/* ipu_check_rows directly: values JSON cannot carry (NaN, infinity) and a
 * device type no name maps to. */
static void test_nonfinite_criteria_and_unknown_types(void **state)
{
    ipu_ctx *ctx = *state;
    const float one = 1;
    json_t *result = NULL;
    const ipu_check_criteria good = {0.9, 0, 0, 0};
    ipu_check_criteria bad[] = {{NAN, 0, 0, 0}, {0.9, INFINITY, 0, 0}, {0.9, 0, INFINITY, 0},
                                {0.9, 0, 0, INFINITY}, {0.9, NAN, 0, 0}, {0.9, 0, NAN, 0}, {0.9, 0, 0, NAN}};
    const char *what[] = {"cosine threshold nan", "atol inf", "rtol inf", "norm tolerance inf",
                          "atol nan", "rtol nan", "norm tolerance nan"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_refused(ctx, ipu_check_rows(ctx, &one, &one, IPU_DT_F32, 0, 1, 1, &bad[i], &result),
                       IPU_ERR_INVALID_ARGUMENT, what[i]);
    expect_refused(ctx, ipu_check_rows(ctx, &one, &one, 99, 0, 1, 1, &good, &result), IPU_ERR_INVALID_ARGUMENT,
                   "check: unknown device type 99");
    assert_null(result);

    char *text = NULL;
    expect_refused(ctx, ipu_check_outputs(ctx, &one, &one, "bf16", 1, 1, CRITERIA, &text),
                   IPU_ERR_INVALID_ARGUMENT, "unknown device type 'bf16' (expected f32, f16, f143 or f152)");
    expect_refused(ctx, ipu_check_outputs(ctx, &one, &one, NULL, 1, 1, CRITERIA, &text),
                   IPU_ERR_INVALID_ARGUMENT, "unknown device type '(null)'");
    expect_refused(ctx, ipu_check_outputs(ctx, &one, &one, "f32", 1, 1, CRITERIA, NULL),
                   IPU_ERR_INVALID_ARGUMENT, "ipu_check_outputs: missing output");
    /* rows * cols * 4 bytes would overflow size_t: refused before any data is read. */
    expect_refused(ctx, ipu_check_outputs(ctx, NULL, NULL, "f32", SIZE_MAX / 8, 4, CRITERIA, &text),
                   IPU_ERR_INVALID_ARGUMENT, "values is too many");
    expect_refused(ctx, ipu_check_outputs(ctx, NULL, &one, "f32", 1, 1, CRITERIA, &text),
                   IPU_ERR_INVALID_ARGUMENT, "missing reference or device data");
    expect_refused(ctx, ipu_check_outputs(ctx, &one, NULL, "f32", 1, 1, CRITERIA, &text),
                   IPU_ERR_INVALID_ARGUMENT, "missing reference or device data");
    assert_null(text);
}

/* A row scaled by 2: cosine exactly 1 (30 * 2 / sqrt(30 * 120)), norm ratio
 * sqrt(120 / 30) = 2, every element over atol 0.01 (errors 1, 2, 3, 4). */
static void test_scaled_row_fails_norm_and_elements(void **state)
{
    ipu_ctx *ctx = *state;
    const float ref[4] = {1, 2, 3, 4}, dev[4] = {2, 4, 6, 8};
    json_t *r = check_f32(ctx, ref, dev, 1, 4, CRITERIA);
    assert_false(true_of(r, "passed"));
    assert_true(true_of(r, "cosine_passed"));
    assert_false(true_of(r, "norm_passed"));
    assert_false(true_of(r, "elementwise_passed"));
    assert_true(real_of(r, "min_cosine") == 1.0);
    assert_true(real_of(r, "norm_ratio") == 2.0);
    assert_int_equal(int_of(r, "elementwise_failures"), 4);
    assert_true(real_of(r, "max_abs_error") == 4.0);
    assert_int_equal(int_of(r, "max_abs_error_index"), 3);
    assert_true(real_of(r, "atol_needed") == 4.0);
    json_t *first = json_object_get(r, "first_failed_element"), *worst = json_object_get(r, "worst_element");
    assert_int_equal(int_of(first, "col"), 0);
    assert_true(real_of(first, "got") == 2.0);
    assert_int_equal(int_of(worst, "index"), 3);
    assert_true(real_of(worst, "abs_error") == 4.0);
    assert_true(fabs(real_of(worst, "bound") - 0.01) < 1e-15);
    json_decref(r);

    /* rtol 1 admits an error of |r|: the doubled row passes elementwise, and
     * needs no atol at all (|d - r| - |r| = 0). */
    r = check_f32(ctx, ref, dev, 1, 4,
                  "{\"min_cosine\": 0.99, \"atol\": 0, \"rtol\": 1, \"norm_tolerance\": 1}");
    assert_true(true_of(r, "passed"));
    assert_int_equal(int_of(r, "elementwise_failures"), 0);
    expect_null(r, "first_failed_element");
    assert_true(real_of(r, "atol_needed") == 0.0);
    json_decref(r);
}

/* Row 0 has a NaN on the device: that row fails as nonfinite, its finite
 * elements still count; row 1 (cosine of {1, 0} and {1, 1}: 1/sqrt(2)) is
 * below 0.99 but has the only defined cosine. */
static void test_nan_fails_only_its_row(void **state)
{
    ipu_ctx *ctx = *state;
    const float ref[4] = {3, 4, 1, 0}, dev[4] = {3, NAN, 1, 1};
    json_t *r = check_f32(ctx, ref, dev, 2, 2, CRITERIA);
    assert_false(true_of(r, "cosine_passed"));
    assert_int_equal(int_of(r, "nonfinite_rows"), 1);
    assert_int_equal(int_of(r, "below_threshold_rows"), 1);
    assert_int_equal(int_of(r, "failed_rows"), 2);
    assert_int_equal(int_of(r, "min_cosine_row"), 1);
    assert_true(fabs(real_of(r, "min_cosine") - 1 / sqrt(2.0)) < 1e-12);
    assert_true(fabs(real_of(r, "mean_cosine") - 1 / sqrt(2.0)) < 1e-12);
    /* The largest finite error: element (1, 1), |0 - 1|. */
    assert_true(real_of(r, "max_abs_error") == 1.0);
    assert_int_equal(int_of(r, "max_abs_error_row"), 1);
    assert_int_equal(int_of(r, "max_abs_error_col"), 1);
    assert_int_equal(int_of(r, "elementwise_failures"), 1);
    /* Norms over finite elements: reference 9 + 1 + 0, device 9 + 1 + 1. */
    assert_true(fabs(real_of(r, "norm_ratio") - sqrt(11.0 / 10.0)) < 1e-12);
    json_t *list = json_object_get(r, "failed_row_list");
    assert_int_equal(json_array_size(list), 2);
    assert_int_equal(json_integer_value(json_array_get(list, 0)), 0);
    assert_int_equal(json_integer_value(json_array_get(list, 1)), 1);
    json_decref(r);
}

/* Zero rows: two zero rows agree (cosine 1); one zero side fails the row. */
static void test_zero_rows_and_zero_reference(void **state)
{
    ipu_ctx *ctx = *state;
    const float ref[6] = {0, 0, 0, 0, 1, 2}, dev[6] = {0, 0, 0, 0.5f, 1, 2};
    json_t *r = check_f32(ctx, ref, dev, 3, 2, "{\"min_cosine\": 0.99, \"atol\": 1, \"rtol\": 0, "
                                               "\"norm_tolerance\": 1}");
    assert_int_equal(int_of(r, "zero_norm_rows"), 1);
    assert_int_equal(int_of(r, "failed_rows"), 1);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(r, "failed_row_list"), 0)), 1);
    assert_true(real_of(r, "min_cosine") == 1.0);
    assert_true(real_of(r, "mean_cosine") == 1.0);
    assert_true(true_of(r, "elementwise_passed"));
    assert_false(true_of(r, "passed"));
    json_decref(r);

    /* An all-zero reference: no norm ratio; the norm passes only when the
     * device is all zeros too. */
    const float zeros[2] = {0, 0}, some[2] = {0, 0.001f};
    r = check_f32(ctx, zeros, zeros, 1, 2, CRITERIA);
    expect_null(r, "norm_ratio");
    assert_true(true_of(r, "norm_passed"));
    assert_true(true_of(r, "passed"));
    json_decref(r);
    r = check_f32(ctx, zeros, some, 1, 2, CRITERIA);
    expect_null(r, "norm_ratio");
    assert_false(true_of(r, "norm_passed"));
    assert_int_equal(int_of(r, "zero_norm_rows"), 1);
    expect_null(r, "min_cosine");
    expect_null(r, "min_cosine_row");
    assert_true(true_of(r, "elementwise_passed"));
    json_decref(r);
}

/* Nothing finite, nothing at all: the figures check.h makes null. */
static void test_all_nan_and_empty_tensors(void **state)
{
    ipu_ctx *ctx = *state;
    const float nan2[2] = {NAN, NAN}, one2[2] = {1, 1};
    json_t *r = check_f32(ctx, one2, nan2, 1, 2, CRITERIA);
    assert_int_equal(int_of(r, "nonfinite_rows"), 1);
    expect_null(r, "min_cosine");
    expect_null(r, "mean_cosine");
    expect_null(r, "max_abs_error_index");
    expect_null(r, "worst_element");
    expect_null(r, "first_failed_element");
    expect_null(r, "norm_ratio");
    assert_true(real_of(r, "max_abs_error") == 0.0);
    assert_false(true_of(r, "passed"));
    json_decref(r);

    /* No elements: nothing compared, so the cosine criterion is not met
     * (and no data is needed when there are no rows). */
    const size_t shapes[3][2] = {{0, 0}, {0, 3}, {2, 0}};
    for (size_t i = 0; i < 3; i++) {
        const float *data = shapes[i][0] ? one2 : NULL;
        r = check_f32(ctx, data, data, shapes[i][0], shapes[i][1], CRITERIA);
        assert_int_equal(int_of(r, "rows"), shapes[i][0]);
        assert_int_equal(int_of(r, "cols"), shapes[i][1]);
        assert_false(true_of(r, "cosine_passed"));
        assert_false(true_of(r, "passed"));
        assert_true(true_of(r, "norm_passed"));
        assert_true(true_of(r, "elementwise_passed"));
        expect_null(r, "norm_ratio");
        expect_null(r, "max_abs_error_index");
        assert_int_equal(int_of(r, "failed_rows"), 0);
        json_decref(r);
    }
}

/* 20 negated rows: each has cosine -1; only the first 16 are listed. */
static void test_failed_row_list_is_capped(void **state)
{
    ipu_ctx *ctx = *state;
    enum { ROWS = 20, COLS = 3 };
    float ref[ROWS * COLS], dev[ROWS * COLS];
    for (size_t i = 0; i < ROWS * COLS; i++) {
        ref[i] = (float)(i % 7) + 1;
        dev[i] = -ref[i];
    }
    json_t *r = check_f32(ctx, ref, dev, ROWS, COLS, CRITERIA);
    assert_int_equal(int_of(r, "failed_rows"), ROWS);
    assert_int_equal(int_of(r, "below_threshold_rows"), ROWS);
    assert_true(real_of(r, "min_cosine") == -1.0);
    assert_int_equal(int_of(r, "min_cosine_row"), 0);
    assert_true(real_of(r, "norm_ratio") == 1.0);
    json_t *list = json_object_get(r, "failed_row_list");
    assert_int_equal(json_array_size(list), IPU_CHECK_LISTED_ROWS);
    for (size_t i = 0; i < IPU_CHECK_LISTED_ROWS; i++)
        assert_int_equal(json_integer_value(json_array_get(list, i)), i);
    json_decref(r);
}

/* Rows whose cosine in double rounds to 1 + 2^-52 (d = 7 r, rounded to
 * float) and to -1 - 2^-52 (d = -3 r): reported as exactly 1 and -1. */
static void test_cosine_is_clamped_to_plus_minus_one(void **state)
{
    ipu_ctx *ctx = *state;
    const float ref[6] = {5, 1, 0.3f, 7, 0.7f, 0.1f};
    const float dev[6] = {35, 7, 2.1000001430511475f, -21, -2.0999999046325684f, -0.30000001192092896f};
    json_t *r = check_f32(ctx, ref, dev, 1, 3, "{\"min_cosine\": 1, \"atol\": 100, \"rtol\": 0, "
                                               "\"norm_tolerance\": 10}");
    assert_true(real_of(r, "min_cosine") == 1.0);
    assert_true(true_of(r, "cosine_passed")); /* a threshold of exactly 1 is met */
    json_decref(r);
    r = check_f32(ctx, ref + 3, dev + 3, 1, 3, "{\"min_cosine\": -1, \"atol\": 100, \"rtol\": 0, "
                                                "\"norm_tolerance\": 10}");
    assert_true(real_of(r, "min_cosine") == -1.0);
    assert_true(true_of(r, "cosine_passed")); /* -1 meets a threshold of -1 */
    json_decref(r);
}

/* Where atol is 0 and the reference is 0, the bound is 0: any error there
 * ranks first, ahead of a larger error within a wider bound. */
static void test_error_on_a_zero_bound_is_the_worst(void **state)
{
    ipu_ctx *ctx = *state;
    const float ref[2] = {0, 10}, dev[2] = {0.001f, 12};
    json_t *r = check_f32(ctx, ref, dev, 1, 2, "{\"min_cosine\": 0.9, \"atol\": 0, \"rtol\": 0.5, "
                                               "\"norm_tolerance\": 1}");
    json_t *worst = json_object_get(r, "worst_element"), *first = json_object_get(r, "first_failed_element");
    assert_int_equal(int_of(worst, "col"), 0);
    assert_true(real_of(worst, "bound") == 0.0);
    assert_int_equal(int_of(first, "col"), 0);
    assert_int_equal(int_of(r, "elementwise_failures"), 1); /* 2 <= 0.5 * 10 at col 1 */
    assert_int_equal(int_of(r, "max_abs_error_col"), 1);
    /* atol needed: max(0.001 - 0, 2 - 5) = 0.001 (as float) */
    assert_true(fabs(real_of(r, "atol_needed") - 0.001) < 1e-9);
    json_decref(r);
}

/* A nonfinite reference fails its row as a nonfinite device value does; a
 * device row of zeros against a nonzero reference is a zero-norm row; and
 * the lowest cosine is the first row that has it. */
static void test_reference_side_failures_and_lowest_row(void **state)
{
    ipu_ctx *ctx = *state;
    /* rows: {inf, 1} vs {1, 1}; {2, 0} vs {0, 0}; {1, 0} vs {1, 1} (cos
     * 1/sqrt 2); {1, 1} vs {1, 1} (cos 1); {0, 1} vs {1, 1} (cos 1/sqrt 2). */
    const float ref[10] = {INFINITY, 1, 2, 0, 1, 0, 1, 1, 0, 1};
    const float dev[10] = {1, 1, 0, 0, 1, 1, 1, 1, 1, 1};
    json_t *r = check_f32(ctx, ref, dev, 5, 2, "{\"min_cosine\": 0.5, \"atol\": 10, \"rtol\": 0, "
                                               "\"norm_tolerance\": 10}");
    assert_int_equal(int_of(r, "nonfinite_rows"), 1);
    assert_int_equal(int_of(r, "zero_norm_rows"), 1);
    assert_int_equal(int_of(r, "below_threshold_rows"), 0);
    assert_int_equal(int_of(r, "failed_rows"), 2);
    assert_int_equal(int_of(r, "min_cosine_row"), 2);
    assert_true(fabs(real_of(r, "min_cosine") - 1 / sqrt(2.0)) < 1e-12);
    assert_true(fabs(real_of(r, "mean_cosine") - (2 / sqrt(2.0) + 1) / 3) < 1e-12);
    /* Largest finite error: |0 - 2| at (1, 0). */
    assert_int_equal(int_of(r, "max_abs_error_index"), 2);
    json_decref(r);
}

/* jansson's allocator fails at call n (n = 1, 2, ... until the check
 * succeeds): ipu_check_rows then returns IPU_ERR_NO_MEMORY and no result;
 * a check that succeeds gives the full result. */
static size_t jansson_calls, jansson_fail_at;

static void *failing_malloc(size_t size)
{
    return ++jansson_calls == jansson_fail_at ? NULL : malloc(size);
}

static void test_jansson_out_of_memory(void **state)
{
    ipu_ctx *ctx = *state;
    const float ref[4] = {1, 2, 3, 4}, dev[4] = {1, 2, 3, 5};
    const ipu_check_criteria c = {0.99, 0.01, 0, 0.1};
    json_t *full = NULL;
    TSEED_OK(ctx, ipu_check_rows(ctx, ref, dev, IPU_DT_F32, 0, 2, 2, &c, &full));
    size_t failures = 0;
    for (size_t n = 1; n < 1000; n++) {
        json_t *result = NULL;
        jansson_calls = 0;
        jansson_fail_at = n;
        json_set_alloc_funcs(failing_malloc, free);
        ipu_status st = ipu_check_rows(ctx, ref, dev, IPU_DT_F32, 0, 2, 2, &c, &result);
        json_set_alloc_funcs(malloc, free);
        if (st == IPU_OK) {
            assert_true(jansson_calls < n); /* succeeded: no allocation failed */
            assert_true(json_equal(result, full));
            json_decref(result);
            break;
        }
        if (st != IPU_ERR_NO_MEMORY || !strstr(ipu_ctx_errmsg(ctx), "out of memory"))
            TSEED_FAIL("jansson allocation %zu failing: %s: %s", n, ipu_status_name(st), ipu_ctx_errmsg(ctx));
        assert_null(result);
        ipu_ctx_clear_error(ctx);
        failures++;
    }
    assert_true(failures > 30); /* one object, one list, 30-odd members and two elements */
    json_decref(full);
}

/* Each allocation the check makes on the context may fail: the call then
 * returns IPU_ERR_NO_MEMORY, "out of memory", and no result. */
static void test_each_allocation_may_fail(void **state)
{
    ipu_ctx *ctx = *state;
    const float ref[4] = {1, 2, 3, 4};
    char *text = NULL;
    uint64_t before = ipu_ctx_allocations(ctx);
    TSEED_OK(ctx, ipu_check_outputs(ctx, ref, ref, "f32", 2, 2, CRITERIA, &text));
    ipu_free(text);
    uint64_t made = ipu_ctx_allocations(ctx) - before;
    assert_true(made >= 2); /* the decoded values and the row records at least */
    for (uint64_t k = 1; k <= made; k++) {
        text = NULL;
        ipu_ctx_fail_allocation(ctx, ipu_ctx_allocations(ctx) + k);
        expect_refused(ctx, ipu_check_outputs(ctx, ref, ref, "f32", 2, 2, CRITERIA, &text), IPU_ERR_NO_MEMORY,
                       "out of memory");
        assert_null(text);
    }
    ipu_ctx_fail_allocation(ctx, 0);
    json_t *r = check_f32(ctx, ref, ref, 2, 2, CRITERIA);
    assert_true(true_of(r, "passed"));
    json_decref(r);
}

int main(void)
{
    tseed_init("test_check_criteria");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_malformed_criteria_name_the_field, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nonfinite_criteria_and_unknown_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scaled_row_fails_norm_and_elements, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nan_fails_only_its_row, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_rows_and_zero_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_all_nan_and_empty_tensors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_row_list_is_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cosine_is_clamped_to_plus_minus_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_on_a_zero_bound_is_the_worst, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reference_side_failures_and_lowest_row, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jansson_out_of_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_each_allocation_may_fail, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
