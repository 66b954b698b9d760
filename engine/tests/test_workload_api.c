/* test_workload_api.c: the public workload calls used wrongly and rightly
 * (workloads/api.c): missing arguments, tensors named that do not exist or
 * have no values, values given to a tensor the workload generates, given
 * values of the wrong count or not finite, reference options of the wrong
 * kind, a reference output asked for before the reference ran or of a
 * tensor that is no output, a check of an unknown device type, and
 * allocations failing inside values, device bytes and set_values.  Each
 * asserts the status and a message naming the call, tensor or option.
 * The valid path runs on a hand-written graph, y = x . w + w_bias with x
 * and w given and the bias generated as exactly 0.5 (scale 0, offset 0.5):
 * the values, their FP16 bytes and both references' outputs are computed
 * here by hand.
 */
#include <math.h>
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

#define MLP "{\"workload\": \"mlp\", \"tokens\": 2, \"channels\": 3, \"hidden\": 4, \"blocks\": 2}"
#define CRITERIA "{\"min_cosine\": 0.999, \"atol\": 0.01, \"rtol\": 0.01, \"norm_tolerance\": 0.01}"

/* x [2 x 3] FP16 and w [3 x 2] FP16 given, w_bias [1 x 2] FP32 generated
 * as 0 x normal + 0.5, y [2 x 2] FP32 = x . w + w_bias. */
static const char GRAPH[] =
    "{\"workload\": \"graph\", \"graph\": {\"format\": \"ipu-e2e-graph\", \"version\": 1, \"name\": \"given\", "
    "\"seed\": 3, \"options\": {}, \"repeat\": null, \"tensors\": ["
    "{\"name\": \"x\", \"rows\": 2, \"cols\": 3, \"dtype\": \"f16\", \"scale\": 0, \"role\": \"input\", "
    "\"sequence\": 1, \"values\": \"given\"},"
    "{\"name\": \"w\", \"rows\": 3, \"cols\": 2, \"dtype\": \"f16\", \"scale\": 0, \"role\": \"parameter\", "
    "\"sequence\": 1, \"values\": \"given\"},"
    "{\"name\": \"w_bias\", \"rows\": 1, \"cols\": 2, \"dtype\": \"f32\", \"scale\": 0, \"role\": \"parameter\", "
    "\"sequence\": 1, \"values\": {\"normal\": {\"scale\": 0, \"offset\": 0.5, \"stream\": 1}}},"
    "{\"name\": \"y\", \"rows\": 2, \"cols\": 2, \"dtype\": \"f32\", \"scale\": 0, \"role\": \"output\", "
    "\"sequence\": 1}],"
    "\"ops\": [{\"op\": \"matmul\", \"inputs\": [\"x\", \"w\", \"w_bias\"], \"output\": \"y\"}]}}";

static const float X[6] = {1, 2, 3, 4, 5, 6};
static const float W[6] = {1, 0, 0, 1, 2, -1};
/* x . w + 0.5: [1+6, 2-3; 4+12, 5-6] + 0.5 */
static const float Y[4] = {7.5f, -0.5f, 16.5f, -0.5f};

/* status must be `want` and the message must hold each needle; then clear. */
static void expect_fail(ipu_ctx *ctx, ipu_status status, ipu_status want, const char *what, const char *n1,
                        const char *n2)
{
    const char *msg = ipu_ctx_errmsg(ctx);
    if (status != want)
        TSEED_FAIL("%s: status %s, expected %s (%s)", what, ipu_status_name(status), ipu_status_name(want), msg);
    if (!strstr(msg, n1) || (n2 && !strstr(msg, n2)))
        TSEED_FAIL("%s: message '%s' lacks '%s'%s%s", what, msg, n1, n2 ? " or " : "", n2 ? n2 : "");
    ipu_ctx_clear_error(ctx);
}

#define EXPECT_FAIL(ctx, call, want, n1, n2) expect_fail((ctx), (call), (want), #call, (n1), (n2))
#define INVALID IPU_ERR_INVALID_ARGUMENT

static void test_missing_arguments(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, MLP, &w));
    const float *data = NULL;
    size_t count = 99;
    void *bytes = NULL;
    char *json = NULL;
    EXPECT_FAIL(ctx, ipu_workload_create(ctx, MLP, NULL), INVALID, "ipu_workload_create: missing output", NULL);
    EXPECT_FAIL(ctx, ipu_workload_info_json(ctx, NULL, &json), INVALID, "ipu_workload_info_json: missing argument",
                NULL);
    EXPECT_FAIL(ctx, ipu_workload_info_json(ctx, w, NULL), INVALID, "ipu_workload_info_json: missing argument", NULL);
    EXPECT_FAIL(ctx, ipu_workload_values(ctx, NULL, "x", &data, &count), INVALID, "missing workload or tensor name",
                NULL);
    EXPECT_FAIL(ctx, ipu_workload_values(ctx, w, NULL, &data, &count), INVALID, "missing workload or tensor name",
                NULL);
    EXPECT_FAIL(ctx, ipu_workload_device_bytes(ctx, NULL, "x", &bytes, &count), INVALID,
                "missing workload or tensor name", NULL);
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, NULL, X, 6), INVALID, "missing workload or tensor name", NULL);
    EXPECT_FAIL(ctx, ipu_reference_run(ctx, NULL, "{}", &json), INVALID, "ipu_reference_run: missing argument", NULL);
    EXPECT_FAIL(ctx, ipu_reference_run(ctx, w, "{}", NULL), INVALID, "ipu_reference_run: missing argument", NULL);
    EXPECT_FAIL(ctx, ipu_reference_output(ctx, NULL, "y", &data, &count), INVALID, "missing workload or tensor name",
                NULL);
    EXPECT_FAIL(ctx, ipu_check_outputs(ctx, Y, Y, NULL, 2, 2, CRITERIA, &json), INVALID,
                "check: unknown device type '(null)'", NULL);
    EXPECT_FAIL(ctx, ipu_check_outputs(ctx, Y, Y, "f64", 2, 2, CRITERIA, &json), INVALID,
                "check: unknown device type 'f64'", "expected f32, f16, f143 or f152");
    EXPECT_FAIL(ctx, ipu_check_outputs(ctx, Y, Y, "f32", 2, 2, CRITERIA, NULL), INVALID,
                "ipu_check_outputs: missing output", NULL);
    EXPECT_FAIL(ctx, ipu_workload_values(ctx, w, "x", NULL, &count), INVALID, "ipu_workload_values: missing output",
                NULL);
    EXPECT_FAIL(ctx, ipu_workload_values(ctx, w, "x", &data, NULL), INVALID, "ipu_workload_values: missing output",
                NULL);
    EXPECT_FAIL(ctx, ipu_workload_device_bytes(ctx, w, "x", NULL, &count), INVALID,
                "ipu_workload_device_bytes: missing output", NULL);
    EXPECT_FAIL(ctx, ipu_reference_output(ctx, w, "y", &data, NULL), INVALID, "ipu_reference_output: missing output",
                NULL);
    /* Nothing was written through the output pointers. */
    assert_null(data);
    assert_null(bytes);
    assert_null(json);
    assert_int_equal(count, 99);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

static void test_tensors_by_name(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, MLP, &w));
    const float *data = NULL;
    size_t count = 0;
    void *bytes = NULL;
    EXPECT_FAIL(ctx, ipu_workload_values(ctx, w, "nope", &data, &count), INVALID, "workload 'mlp' has no tensor 'nope'",
                NULL);
    EXPECT_FAIL(ctx, ipu_workload_device_bytes(ctx, w, "W1", &bytes, &count), INVALID,
                "workload 'mlp' has no tensor 'W1'", NULL);
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, "", X, 6), INVALID, "workload 'mlp' has no tensor ''", NULL);
    EXPECT_FAIL(ctx, ipu_workload_values(ctx, w, "hidden", &data, &count), INVALID,
                "tensor 'hidden' is an activation: only inputs and parameters have values", NULL);
    EXPECT_FAIL(ctx, ipu_workload_device_bytes(ctx, w, "y", &bytes, &count), INVALID,
                "tensor 'y' is an output: only inputs and parameters have values", NULL);
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, "gelu_f8", X, 6), INVALID, "tensor 'gelu_f8' is an activation",
                NULL);
    /* The MLP's values are generated, never given. */
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, "x", X, 6), INVALID,
                "tensor 'x': its values are generated (normal, stream ", "not given");
    EXPECT_FAIL(ctx, ipu_reference_output(ctx, w, "y", &data, &count), IPU_ERR_STATE,
                "the reference has not run (ipu_reference_run)", NULL);
    EXPECT_FAIL(ctx, ipu_reference_output(ctx, w, "x", &data, &count), INVALID,
                "tensor 'x' is an input: the reference keeps only outputs", NULL);
    EXPECT_FAIL(ctx, ipu_reference_output(ctx, w, "w2", &data, &count), INVALID,
                "tensor 'w2' is a parameter: the reference keeps only outputs", NULL);
    EXPECT_FAIL(ctx, ipu_reference_output(ctx, w, "block_in", &data, &count), INVALID,
                "tensor 'block_in' is an activation", NULL);
    EXPECT_FAIL(ctx, ipu_reference_output(ctx, w, "z", &data, &count), INVALID, "workload 'mlp' has no tensor 'z'",
                NULL);
    /* Sizes: x is 2 x 3 and w1 3 x 4 with 2 members, both one-byte F143. */
    TSEED_OK(ctx, ipu_workload_values(ctx, w, "w1", &data, &count));
    assert_int_equal(count, 3 * 4 * 2);
    TSEED_OK(ctx, ipu_workload_device_bytes(ctx, w, "x", &bytes, &count));
    assert_int_equal(count, 2 * 3);
    ipu_free(bytes);
    TSEED_OK(ctx, ipu_workload_device_bytes(ctx, w, "w2", &bytes, &count));
    assert_int_equal(count, 4 * 3 * 2);
    ipu_free(bytes);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

static void test_given_values(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, GRAPH, &w));
    const float *data = NULL;
    size_t count = 0;
    void *bytes = NULL;
    EXPECT_FAIL(ctx, ipu_workload_values(ctx, w, "x", &data, &count), IPU_ERR_STATE,
                "input 'x' takes given values (ipu_workload_set_values) and none were given", NULL);
    EXPECT_FAIL(ctx, ipu_workload_device_bytes(ctx, w, "w", &bytes, &count), IPU_ERR_STATE,
                "parameter 'w' takes given values", NULL);
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, "w_bias", W, 2), INVALID,
                "tensor 'w_bias': its values are generated (normal, stream 1), not given", NULL);
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, "x", NULL, 6), INVALID, "tensor 'x': no values given (NULL data)",
                NULL);
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, "x", X, 5), INVALID,
                "tensor 'x' takes 6 values (2 x 3 x 1 members), not 5", NULL);
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, "w", W, 7), INVALID, "tensor 'w' takes 6 values", "not 7");
    float bad[6] = {1, 2, 3, 4, NAN, 6};
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, "x", bad, 6), INVALID, "tensor 'x': value 4 is",
                "(expected finite values)");
    bad[4] = 5;
    bad[0] = -INFINITY;
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, "x", bad, 6), INVALID, "tensor 'x': value 0 is -inf", NULL);
    /* A refused set leaves the values ungiven. */
    EXPECT_FAIL(ctx, ipu_workload_values(ctx, w, "x", &data, &count), IPU_ERR_STATE, "none were given", NULL);

    TSEED_OK(ctx, ipu_workload_set_values(ctx, w, "x", X, 6));
    TSEED_OK(ctx, ipu_workload_set_values(ctx, w, "w", W, 6));
    TSEED_OK(ctx, ipu_workload_values(ctx, w, "x", &data, &count));
    assert_int_equal(count, 6);
    assert_memory_equal(data, X, sizeof X);
    TSEED_OK(ctx, ipu_workload_values(ctx, w, "w_bias", &data, &count));
    assert_int_equal(count, 2);
    if (data[0] != 0.5f || data[1] != 0.5f)
        TSEED_FAIL("w_bias is %g %g, expected 0.5 0.5", (double)data[0], (double)data[1]);
    /* x in FP16: 1 = 0x3C00, 2 = 0x4000, 3 = 0x4200, 4 = 0x4400, 5 = 0x4500, 6 = 0x4600. */
    TSEED_OK(ctx, ipu_workload_device_bytes(ctx, w, "x", &bytes, &count));
    const uint8_t want_x[12] = {0x00, 0x3C, 0x00, 0x40, 0x00, 0x42, 0x00, 0x44, 0x00, 0x45, 0x00, 0x46};
    assert_int_equal(count, 12);
    assert_memory_equal(bytes, want_x, 12);
    ipu_free(bytes);
    /* The bias in FP32: 0.5 = 0x3F000000, little-endian. */
    TSEED_OK(ctx, ipu_workload_device_bytes(ctx, w, "w_bias", &bytes, &count));
    const uint8_t want_bias[8] = {0, 0, 0, 0x3F, 0, 0, 0, 0x3F};
    assert_int_equal(count, 8);
    assert_memory_equal(bytes, want_bias, 8);
    ipu_free(bytes);
    /* Read once, the values may no longer change: what was read stays what is used. */
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, "x", W, 6), IPU_ERR_STATE,
                "tensor 'x': its values were read already", NULL);
    TSEED_OK(ctx, ipu_workload_values(ctx, w, "x", &data, &count));
    assert_memory_equal(data, X, sizeof X);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* Run the reference with options, expecting mode and the output Y. */
static void expect_reference(ipu_ctx *ctx, ipu_workload *w, const char *options, const char *mode)
{
    char *text = NULL;
    TSEED_OK(ctx, ipu_reference_run(ctx, w, options, &text));
    json_t *o = json_loads(text, 0, NULL);
    assert_non_null(o);
    const char *got = json_string_value(json_object_get(o, "mode"));
    json_t *outputs = json_object_get(o, "outputs");
    if (!got || strcmp(got, mode) || json_array_size(outputs) != 1 ||
        strcmp(json_string_value(json_array_get(outputs, 0)), "y"))
        TSEED_FAIL("reference %s: %s, expected mode %s and outputs [\"y\"]", options ? options : "(null)", text, mode);
    json_decref(o);
    ipu_free(text);
    const float *y = NULL;
    size_t count = 0;
    TSEED_OK(ctx, ipu_reference_output(ctx, w, "y", &y, &count));
    assert_int_equal(count, 4);
    for (int i = 0; i < 4; i++)
        if (y[i] != Y[i])
            TSEED_FAIL("reference %s: y[%d] is %g, expected %g", mode, i, (double)y[i], (double)Y[i]);
}

static void test_reference_and_check(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    char *text = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, GRAPH, &w));
    TSEED_OK(ctx, ipu_workload_set_values(ctx, w, "x", X, 6));
    TSEED_OK(ctx, ipu_workload_set_values(ctx, w, "w", W, 6));
    EXPECT_FAIL(ctx, ipu_reference_run(ctx, w, "{\"fp32\": tru", &text), INVALID, "reference options: ", "line 1");
    EXPECT_FAIL(ctx, ipu_reference_run(ctx, w, "[true]", &text), INVALID, "reference options: expected a JSON object",
                NULL);
    EXPECT_FAIL(ctx, ipu_reference_run(ctx, w, "{\"fp64\": true}", &text), INVALID,
                "reference options: unknown option 'fp64'", "expected fp32, attention, attention_bands or matmuls");
    EXPECT_FAIL(ctx, ipu_reference_run(ctx, w, "{\"fp32\": 1}", &text), INVALID,
                "reference options: fp32 must be true or false", NULL);
    EXPECT_FAIL(ctx, ipu_reference_run(ctx, w, "{\"matmuls\": {}, \"fp32\": \"yes\"}", &text), INVALID,
                "fp32 must be true or false", NULL);
    /* The plan fields are the reference's (device_plan.c): op 0 is a matmul, not an attention. */
    EXPECT_FAIL(ctx, ipu_reference_run(ctx, w, "{\"attention\": {\"0\": \"flash\"}}", &text), INVALID,
                "attention '0': expected an attention or MAP pooling op", NULL);
    assert_null(text);
    const float *y = NULL;
    size_t count = 0;
    EXPECT_FAIL(ctx, ipu_reference_output(ctx, w, "y", &y, &count), IPU_ERR_STATE, "the reference has not run", NULL);
    expect_reference(ctx, w, "{\"fp32\": true}", "fp32");
    expect_reference(ctx, w, NULL, "device");
    expect_reference(ctx, w, "{\"fp32\": false}", "device");
    expect_reference(ctx, w, "{\"attention\": {}, \"attention_bands\": {}, \"matmuls\": {}}", "device");
    EXPECT_FAIL(ctx, ipu_check_outputs(ctx, Y, Y, "f32", 2, 2, "{\"min_cosine\": 0.9}", &text), INVALID,
                "check criteria: 'atol' must be a number", NULL);
    EXPECT_FAIL(ctx, ipu_check_outputs(ctx, Y, NULL, "f32", 2, 2, CRITERIA, &text), INVALID,
                "check: missing reference or device data", NULL);
    EXPECT_FAIL(ctx, ipu_check_outputs(ctx, Y, Y, "f32", 2, 2,
                                       "{\"min_cosine\": 2, \"atol\": 0, \"rtol\": 0, \"norm_tolerance\": 0}",
                                       &text),
                INVALID, "check: the cosine threshold 2 is outside [-1, 1]", NULL);
    assert_null(text);
    /* The check: the exact values pass; one wrong value fails. */
    float device[4];
    memcpy(device, Y, sizeof device);
    for (int wrong = 0; wrong < 2; wrong++) {
        device[3] = wrong ? 3.0f : Y[3];
        TSEED_OK(ctx, ipu_check_outputs(ctx, Y, device, "f32", 2, 2, CRITERIA, &text));
        json_t *o = json_loads(text, 0, NULL);
        assert_non_null(o);
        if (json_is_true(json_object_get(o, "passed")) == wrong)
            TSEED_FAIL("check with %s values: %s", wrong ? "a wrong" : "the exact", text);
        json_decref(o);
        ipu_free(text);
        text = NULL;
    }
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* The next allocation on ctx fails. */
static void fail_next(ipu_ctx *ctx)
{
    ipu_ctx_fail_allocation(ctx, ipu_ctx_allocations(ctx) + 1);
}

static void test_out_of_memory(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL, *m = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, GRAPH, &w));
    TSEED_OK(ctx, ipu_workload_create(ctx, MLP, &m));
    const float *data = NULL;
    size_t count = 7;
    void *bytes = NULL;
    TSEED_OK(ctx, ipu_workload_set_values(ctx, w, "x", X, 6));
    /* set_values' copy: the values kept are the earlier ones. */
    const float other[6] = {6, 5, 4, 3, 2, 1};
    fail_next(ctx);
    EXPECT_FAIL(ctx, ipu_workload_set_values(ctx, w, "x", other, 6), IPU_ERR_NO_MEMORY, "out of memory", NULL);
    TSEED_OK(ctx, ipu_workload_values(ctx, w, "x", &data, &count));
    assert_memory_equal(data, X, sizeof X);
    /* device bytes' buffer */
    fail_next(ctx);
    EXPECT_FAIL(ctx, ipu_workload_device_bytes(ctx, w, "x", &bytes, &count), IPU_ERR_NO_MEMORY, "out of memory",
                NULL);
    assert_null(bytes);
    /* generated values made on first use */
    data = NULL;
    fail_next(ctx);
    EXPECT_FAIL(ctx, ipu_workload_values(ctx, m, "w1", &data, &count), IPU_ERR_NO_MEMORY, "out of memory", NULL);
    assert_null(data);
    ipu_ctx_fail_allocation(ctx, 0);
    /* Nothing is left half made: the same calls now succeed. */
    TSEED_OK(ctx, ipu_workload_values(ctx, m, "w1", &data, &count));
    assert_int_equal(count, 24);
    TSEED_OK(ctx, ipu_workload_device_bytes(ctx, w, "x", &bytes, &count));
    assert_int_equal(count, 12);
    ipu_free(bytes);
    ipu_workload_free(w);
    ipu_workload_free(m);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_workload_api");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_arguments),
        cmocka_unit_test(test_tensors_by_name),
        cmocka_unit_test(test_given_values),
        cmocka_unit_test(test_reference_and_check),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
