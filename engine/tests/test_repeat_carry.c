/* test_repeat_carry.c: a Repeat whose carried tensor starts from a
 * parameter.  The body (c = c . W_i over a 3-member weight sequence) rewrites
 * the carried storage every iteration, so the parameter must keep storage of
 * its own: two invocations after one upload give bit-identical outputs that
 * match the device-precision reference.
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
#include "numerics/numerics.h"
#include "support_seed.h"
#include "workloads/workload.h"

#define ROWS 6
#define COLS 12
#define LAYERS 3

static ipu_workload *carry_workload(ipu_ctx *ctx)
{
    ipu_workload *w = calloc(1, sizeof *w);
    assert_non_null(w);
    snprintf(w->name, sizeof w->name, "carry-test");
    w->seed = tseed();
    w->options_json = strdup("{}");
    ipu_graph *g = &w->graph;
    ipu_graph_init(g);
    uint32_t init, weights, c, next, y;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "init", ROWS, COLS, IPU_DT_F16, 0, IPU_ROLE_PARAM, &init));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "w", COLS, COLS, IPU_DT_F16, 0, IPU_ROLE_PARAM, &weights));
    g->tensors[weights].sequence = LAYERS;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "c", ROWS, COLS, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &c));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "c_next", ROWS, COLS, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &next));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "y", ROWS, COLS, IPU_DT_F16, 0, IPU_ROLE_OUTPUT, &y));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, c, weights, next));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_COPY, next, 0, y));
    g->repeat = (ipu_ir_repeat){0, 1, LAYERS, c, next, init};
    TSEED_OK(ctx, ipu_graph_validate(ctx, g));
    TSEED_OK(ctx, ipu_workload_prepare_values(ctx, w));
    return w;
}

static void test_parameter_as_initial_carried_state(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = carry_workload(ctx);
    ipu_package *pkg = NULL;
    char *report = NULL;
    const char *profile = "{\"tiles\": 4}";
    TSEED_OK(ctx, ipu_compile(ctx, w, "{\"profile\": {\"tiles\": 4}}", &pkg, &report));
    ipu_free(report);
    ipu_device *dev = NULL;
    TSEED_OK(ctx, ipu_device_create(ctx, profile, &dev));
    void *init_bytes = NULL, *w_bytes = NULL;
    size_t init_size = 0, w_size = 0;
    TSEED_OK(ctx, ipu_workload_device_bytes(ctx, w, "init", &init_bytes, &init_size));
    TSEED_OK(ctx, ipu_workload_device_bytes(ctx, w, "w", &w_bytes, &w_size));
    TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, "init", init_bytes, init_size));
    TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, "w", w_bytes, w_size));
    TSEED_OK(ctx, ipu_device_initialize(ctx, dev, pkg));
    uint16_t out[2][ROWS * COLS];
    for (int run = 0; run < 2; run++) {
        char *cycles = NULL;
        TSEED_OK(ctx, ipu_device_run(ctx, dev, &cycles));
        ipu_free(cycles);
        const void *data = NULL;
        size_t size = 0;
        TSEED_OK(ctx, ipu_device_stream(ctx, dev, "y", &data, &size));
        assert_int_equal(size, sizeof out[run]);
        memcpy(out[run], data, size);
    }
    /* The second invocation starts from the parameter again. */
    if (memcmp(out[0], out[1], sizeof out[0]))
        TSEED_FAIL("the second invocation's output differs from the first");
    /* Both match the device-precision reference. */
    char *ref = NULL, *check = NULL;
    TSEED_OK(ctx, ipu_reference_run(ctx, w, "{\"fp32\": false}", &ref));
    ipu_free(ref);
    const float *expect = NULL;
    size_t count = 0;
    TSEED_OK(ctx, ipu_reference_output(ctx, w, "y", &expect, &count));
    assert_int_equal(count, ROWS * COLS);
    TSEED_OK(ctx, ipu_check_outputs(ctx, expect, out[1], "f16", ROWS, COLS,
                                    "{\"min_cosine\": 0.999, \"atol\": 0.01, \"rtol\": 0.01, "
                                    "\"norm_tolerance\": 0.01}",
                                    &check));
    json_t *verdict = json_loads(check, 0, NULL);
    if (!json_is_true(json_object_get(verdict, "passed")))
        TSEED_FAIL("device output against the reference: %s", check);
    json_decref(verdict);
    ipu_free(check);
    ipu_free(init_bytes);
    ipu_free(w_bytes);
    ipu_device_free(dev);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_repeat_carry");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parameter_as_initial_carried_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
