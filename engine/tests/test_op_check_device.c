/* test_op_check_device.c: the per-op check on a device the caller keeps
 * (ipu_check_ops_on) judges as the check on a fresh device does
 * (ipu_check_ops), check after check: a correct tiny MLP passes with every
 * op output compared, the same package compiled with a seeded bug (the FP8
 * scale applied twice) fails at the same op and element on the kept device
 * as on a fresh one, and a correct package checked after the broken one
 * passes again, so nothing the broken run wrote, observed or faulted on
 * outlives its check.  A device made for another profile is refused.
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

#define WORKLOAD "{\"workload\": \"mlp\", \"tokens\": 8, \"channels\": 16, \"hidden\": 32}"
#define CRITERIA "{\"min_cosine\": 0.9999, \"atol_rms\": 0.002, \"rtol\": 0.0078125, \"norm_tolerance\": 0.002}"

static ipu_package *compile(ipu_ctx *ctx, const ipu_workload *w, const char *options)
{
    ipu_package *pkg = NULL;
    char *report = NULL;
    TSEED_OK(ctx, ipu_compile(ctx, w, options, &pkg, &report));
    ipu_free(report);
    return pkg;
}

/* The check's result, parsed. */
static json_t *check(ipu_ctx *ctx, ipu_device *dev, const ipu_workload *w, const ipu_package *pkg)
{
    char *text = NULL;
    if (dev)
        TSEED_OK(ctx, ipu_check_ops_on(ctx, dev, w, pkg, CRITERIA, &text));
    else
        TSEED_OK(ctx, ipu_check_ops(ctx, w, pkg, CRITERIA, &text));
    json_t *result = json_loads(text, 0, NULL);
    assert_non_null(result);
    ipu_free(text);
    return result;
}

static void expect_same(json_t *kept, json_t *fresh)
{
    if (!json_equal(kept, fresh)) {
        char *a = json_dumps(kept, JSON_COMPACT), *b = json_dumps(fresh, JSON_COMPACT);
        TSEED_FAIL("the kept device's check differs from a fresh device's:\n%s\n%s", a, b);
    }
}

static void test_kept_device_judges_as_a_fresh_one(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, WORKLOAD, &w));
    ipu_package *right = compile(ctx, w, "{\"profile\": {\"tiles\": 4}}");
    ipu_package *wrong = compile(ctx, w, "{\"profile\": {\"tiles\": 4}, \"inject\": \"fp8-scale-twice\"}");
    ipu_device *dev = NULL;
    TSEED_OK(ctx, ipu_device_create(ctx, "{\"tiles\": 4}", &dev));

    json_t *fresh_right = check(ctx, NULL, w, right), *fresh_wrong = check(ctx, NULL, w, wrong);
    assert_true(json_is_true(json_object_get(fresh_right, "passed")));
    assert_true(json_integer_value(json_object_get(fresh_right, "compared")) >=
                json_integer_value(json_object_get(fresh_right, "ops")));
    assert_true(json_is_false(json_object_get(fresh_wrong, "passed")));
    assert_true(json_is_object(json_object_get(fresh_wrong, "first_divergence")));

    const ipu_package *order[] = {right, right, wrong, right};
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        json_t *kept = check(ctx, dev, w, order[i]);
        expect_same(kept, order[i] == right ? fresh_right : fresh_wrong);
        json_decref(kept);
    }
    json_decref(fresh_right);
    json_decref(fresh_wrong);
    ipu_device_free(dev);
    ipu_package_free(wrong);
    ipu_package_free(right);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

static void test_device_of_another_profile_is_refused(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, WORKLOAD, &w));
    ipu_package *pkg = compile(ctx, w, "{\"profile\": {\"tiles\": 4}}");
    ipu_device *dev = NULL;
    TSEED_OK(ctx, ipu_device_create(ctx, "{\"tiles\": 8}", &dev));
    char *text = NULL;
    assert_int_equal(ipu_check_ops_on(ctx, dev, w, pkg, CRITERIA, &text), IPU_ERR_INVALID_ARGUMENT);
    assert_null(text);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "profile"));
    ipu_device_free(dev);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_op_check_device");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kept_device_judges_as_a_fresh_one),
        cmocka_unit_test(test_device_of_another_profile_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
