/* test_repeat_carry.c: the Repeat's carried tensor.  One whose initial value
 * is a parameter: the body (c = c . W_i over a 3-member weight sequence)
 * rewrites the carried storage every iteration, so the parameter must keep
 * storage of its own.  One that the body first reads with an elementwise op:
 * FP8's cast before the body's matmul (c = c + f8(c) . W_i), and one-input ops
 * whose results no op in the body homes (a cast read after the body, a GELU
 * as the next value).  Each compiles, and two invocations after one upload
 * give bit-identical outputs that match the device-precision reference.
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

/* An empty workload named `name`, its graph to be built. */
static ipu_workload *begin_workload(const char *name)
{
    ipu_workload *w = calloc(1, sizeof *w);
    assert_non_null(w);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->seed = tseed();
    w->options_json = strdup("{}");
    ipu_graph_init(&w->graph);
    return w;
}

/* The Repeat of the first `ops` ops with carried tensor c (next its value for
 * the next iteration, init its first), the graph checked, values made. */
static ipu_workload *finish_workload(ipu_ctx *ctx, ipu_workload *w, uint32_t ops, uint32_t c, uint32_t next,
                                     uint32_t init)
{
    w->graph.repeat = (ipu_ir_repeat){0, ops, LAYERS, c, next, init};
    TSEED_OK(ctx, ipu_graph_validate(ctx, &w->graph));
    TSEED_OK(ctx, ipu_workload_prepare_values(ctx, w));
    return w;
}

static ipu_workload *carry_workload(ipu_ctx *ctx)
{
    ipu_workload *w = begin_workload("carry-test");
    ipu_graph *g = &w->graph;
    uint32_t init, weights, c, next, y;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "init", ROWS, COLS, IPU_DT_F16, 0, IPU_ROLE_PARAM, &init));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "w", COLS, COLS, IPU_DT_F16, 0, IPU_ROLE_PARAM, &weights));
    g->tensors[weights].sequence = LAYERS;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "c", ROWS, COLS, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &c));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "c_next", ROWS, COLS, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &next));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "y", ROWS, COLS, IPU_DT_F16, 0, IPU_ROLE_OUTPUT, &y));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, c, weights, next));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_COPY, next, 0, y));
    return finish_workload(ctx, w, 1, c, next, init);
}

/* A graph input or parameter as the body's tensors read: FP8 (F143) or FP16. */
static uint32_t tensor(ipu_ctx *ctx, ipu_graph *g, const char *name, uint32_t rows, int dtype, int role)
{
    uint32_t id;
    int scale = dtype != IPU_DT_F143 ? 0 : role == IPU_ROLE_PARAM ? -4 : -2;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, name, rows, COLS, dtype, scale, role, &id));
    return id;
}

/* The carried tensor read first by a cast to F143: c = c + f8(c) . W_i, y = c. */
static ipu_workload *cast_first_workload(ipu_ctx *ctx)
{
    ipu_workload *w = begin_workload("carry-cast-first");
    ipu_graph *g = &w->graph;
    uint32_t x = tensor(ctx, g, "x", ROWS, IPU_DT_F16, IPU_ROLE_INPUT);
    uint32_t weights = tensor(ctx, g, "w", COLS, IPU_DT_F143, IPU_ROLE_PARAM);
    g->tensors[weights].sequence = LAYERS;
    uint32_t c = tensor(ctx, g, "c", ROWS, IPU_DT_F16, IPU_ROLE_ACTIVATION);
    uint32_t c8 = tensor(ctx, g, "c_f8", ROWS, IPU_DT_F143, IPU_ROLE_ACTIVATION);
    uint32_t product = tensor(ctx, g, "p", ROWS, IPU_DT_F16, IPU_ROLE_ACTIVATION);
    uint32_t next = tensor(ctx, g, "c_next", ROWS, IPU_DT_F16, IPU_ROLE_ACTIVATION);
    uint32_t y = tensor(ctx, g, "y", ROWS, IPU_DT_F16, IPU_ROLE_OUTPUT);
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_CAST, c, 0, c8));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, c8, weights, product));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_ADD, c, product, next));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_COPY, next, 0, y));
    return finish_workload(ctx, w, 3, c, next, x);
}

/* The carried tensor read only by one-input ops whose results no op in the
 * body homes: c8 = f8(c), c = gelu(c) in the body, then y = c8 . W. */
static ipu_workload *unhomed_readers_workload(ipu_ctx *ctx)
{
    ipu_workload *w = begin_workload("carry-unhomed-readers");
    ipu_graph *g = &w->graph;
    uint32_t x = tensor(ctx, g, "x", ROWS, IPU_DT_F16, IPU_ROLE_INPUT);
    uint32_t weights = tensor(ctx, g, "w", COLS, IPU_DT_F143, IPU_ROLE_PARAM);
    uint32_t c = tensor(ctx, g, "c", ROWS, IPU_DT_F16, IPU_ROLE_ACTIVATION);
    uint32_t c8 = tensor(ctx, g, "c_f8", ROWS, IPU_DT_F143, IPU_ROLE_ACTIVATION);
    uint32_t next = tensor(ctx, g, "c_next", ROWS, IPU_DT_F16, IPU_ROLE_ACTIVATION);
    uint32_t y = tensor(ctx, g, "y", ROWS, IPU_DT_F16, IPU_ROLE_OUTPUT);
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_CAST, c, 0, c8));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_GELU, c, 0, next));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, c8, weights, y));
    return finish_workload(ctx, w, 2, c, next, x);
}

/* Compile w for `tiles` tiles, upload its inputs and parameters once, run it
 * twice: both outputs y bit-identical and matching the device-precision
 * reference.  Frees w. */
static void run_twice_against_reference(ipu_ctx *ctx, ipu_workload *w, uint32_t tiles)
{
    char profile[64], options[96];
    snprintf(profile, sizeof profile, "{\"tiles\": %u}", tiles);
    snprintf(options, sizeof options, "{\"profile\": %s}", profile);
    ipu_package *pkg = NULL;
    char *report = NULL;
    TSEED_OK(ctx, ipu_compile(ctx, w, options, &pkg, &report));
    ipu_free(report);
    ipu_device *dev = NULL;
    TSEED_OK(ctx, ipu_device_create(ctx, profile, &dev));
    for (size_t t = 0; t < w->graph.tensor_count; t++) {
        const ipu_ir_tensor *x = &w->graph.tensors[t];
        if (x->role != IPU_ROLE_INPUT && x->role != IPU_ROLE_PARAM)
            continue;
        void *bytes = NULL;
        size_t size = 0;
        TSEED_OK(ctx, ipu_workload_device_bytes(ctx, w, x->name, &bytes, &size));
        TSEED_OK(ctx, ipu_device_set_stream(ctx, dev, x->name, bytes, size));
        ipu_free(bytes);
    }
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
    /* The second invocation starts from the initial value again. */
    if (memcmp(out[0], out[1], sizeof out[0]))
        TSEED_FAIL("%s on %u tiles: the second invocation's output differs from the first", w->name, tiles);
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
        TSEED_FAIL("%s on %u tiles: device output against the reference: %s", w->name, tiles, check);
    json_decref(verdict);
    ipu_free(check);
    ipu_device_free(dev);
    ipu_package_free(pkg);
    ipu_workload_free(w);
}

static void test_parameter_as_initial_carried_state(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    run_twice_against_reference(ctx, carry_workload(ctx), 4);
    ipu_ctx_free(ctx);
}

/* Before the planner homed a carried tensor its first reader is an
 * elementwise op, compiling refused both ("op 0 (cast) reads 'c' before any
 * op gives it a layout"). */
static void test_carried_read_first_by_a_cast(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    for (uint32_t tiles = 4; tiles <= 16; tiles *= 4)
        run_twice_against_reference(ctx, cast_first_workload(ctx), tiles);
    ipu_ctx_free(ctx);
}

static void test_carried_read_only_by_ops_waiting_for_a_home(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    for (uint32_t tiles = 4; tiles <= 16; tiles *= 4)
        run_twice_against_reference(ctx, unhomed_readers_workload(ctx), tiles);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_repeat_carry");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parameter_as_initial_carried_state),
        cmocka_unit_test(test_carried_read_first_by_a_cast),
        cmocka_unit_test(test_carried_read_only_by_ops_waiting_for_a_home),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
