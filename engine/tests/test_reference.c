/* test_reference.c: the FP32 host reference and the row check against values
 * computed here with plain loops.  A tiny hand-built graph uses every op kind
 * and a 3-iteration Repeat: before the body a = copy(x) and init = a . v;
 * the body (carried c) computes h = c . w1[i], g = gelu(h), g8 = cast(g),
 * m = g8 . w2[i], n = m + c (the next c); after it y = copy(n) and
 * z = cast(n) are the outputs.  The test evaluates the same graph in double
 * with its own loops and its own tanh GELU, and the reference must agree
 * within 1e-5 of the output's magnitude, return NULL for non-outputs and give
 * y == z exactly.  Error cases: no values (state), a sequence read outside the
 * body (invalid argument).  The row check: identical rows give cosine 1, a
 * NaN row and a zero row fail with their counts, and the JSON is the same
 * with 1 and 2 OpenMP threads.  Values are seeded (support_seed.h: the seed
 * comes from IPU_TEST_SEED or the clock and is printed on failure).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/numerics.h"
#include "reference/check.h"
#include "reference/reference.h"
#include "workloads/workload.h"

#include "support_seed.h"

#define R 5
#define C 6
#define H 7
#define ITER 3

enum { T_X, T_A, T_V, T_INIT, T_C, T_W1, T_H, T_G, T_G8, T_W2, T_M, T_N, T_Y, T_Z, T_COUNT };

static double uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(tseed_rnd() >> 11) * 0x1.0p-53;
}

static float *fill(size_t n, double scale)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)uniform(-scale, scale);
    return v;
}

/* The graph of the file comment, with seeded values. */
static ipu_workload *tiny_workload(ipu_ctx *ctx)
{
    ipu_workload *w = calloc(1, sizeof *w);
    assert_non_null(w);
    strcpy(w->name, "tiny");
    ipu_graph *g = &w->graph;
    ipu_graph_init(g);
    static const struct {
        const char *name;
        uint32_t rows, cols;
        int dtype, scale, role;
    } t[T_COUNT] = {
        {"x", R, C, IPU_DT_F16, 0, IPU_ROLE_INPUT},
        {"a", R, C, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION},
        {"v", C, C, IPU_DT_F16, 0, IPU_ROLE_PARAM},
        {"init", R, C, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION},
        {"c", R, C, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION},
        {"w1", C, H, IPU_DT_F16, 0, IPU_ROLE_PARAM},
        {"h", R, H, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION},
        {"g", R, H, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION},
        {"g8", R, H, IPU_DT_F143, -2, IPU_ROLE_ACTIVATION},
        {"w2", H, C, IPU_DT_F143, -2, IPU_ROLE_PARAM},
        {"m", R, C, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION},
        {"n", R, C, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION},
        {"y", R, C, IPU_DT_F16, 0, IPU_ROLE_OUTPUT},
        {"z", R, C, IPU_DT_F32, 0, IPU_ROLE_OUTPUT},
    };
    for (uint32_t i = 0; i < T_COUNT; i++) {
        uint32_t id;
        TSEED_OK(ctx, ipu_graph_tensor(ctx, g, t[i].name, t[i].rows, t[i].cols, t[i].dtype,
                                       t[i].scale, t[i].role, &id));
        assert_int_equal(id, i);
    }
    g->tensors[T_W1].sequence = g->tensors[T_W2].sequence = ITER;
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_COPY, T_X, 0, T_A));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, T_A, T_V, T_INIT));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, T_C, T_W1, T_H));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_GELU, T_H, 0, T_G));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_CAST, T_G, 0, T_G8));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, T_G8, T_W2, T_M));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_ADD, T_M, T_C, T_N));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_COPY, T_N, 0, T_Y));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_CAST, T_N, 0, T_Z));
    g->repeat = (ipu_ir_repeat){2, 5, ITER, T_C, T_N, T_INIT};
    TSEED_OK(ctx, ipu_graph_validate(ctx, g));
    w->values = calloc(T_COUNT, sizeof *w->values);
    assert_non_null(w->values);
    w->values[T_X] = fill((size_t)R * C, 2.0);
    w->values[T_V] = fill((size_t)C * C, 1.0);
    w->values[T_W1] = fill((size_t)C * H * ITER, 1.5);
    w->values[T_W2] = fill((size_t)H * C * ITER, 1.0);
    return w;
}

static double gelu_def(double x)
{
    return 0.5 * x * (1.0 + tanh(0.79788456080286535588 /* sqrt(2 / pi) */ * (x + 0.044715 * x * x * x)));
}

/* out[m x n] = a[m x k] . b[k x n] */
static void mm(const double *a, const float *b, double *out, int m, int k, int n)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int l = 0; l < k; l++)
                s += a[i * k + l] * (double)b[l * n + j];
            out[i * n + j] = s;
        }
}

static void expected_output(const ipu_workload *w, double *y)
{
    double a[R * C], c[R * C], h[R * H], m[R * C];
    for (int i = 0; i < R * C; i++)
        a[i] = w->values[T_X][i];
    mm(a, w->values[T_V], c, R, C, C);
    for (int it = 0; it < ITER; it++) {
        mm(c, w->values[T_W1] + it * C * H, h, R, C, H);
        for (int i = 0; i < R * H; i++)
            h[i] = gelu_def(h[i]);
        mm(h, w->values[T_W2] + it * H * C, m, R, H, C);
        for (int i = 0; i < R * C; i++)
            c[i] = m[i] + c[i];
    }
    memcpy(y, c, sizeof c);
}

static void test_tiny_graph(void **state)
{
    (void)state;
    tseed_reset(1);
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = tiny_workload(ctx);
    float **out = NULL;
    TSEED_OK(ctx, ipu_reference_fp32(ctx, w, &out));
    double want[R * C], magnitude = 0;
    expected_output(w, want);
    for (int i = 0; i < R * C; i++)
        magnitude = fmax(magnitude, fabs(want[i]));
    assert_true(magnitude > 0.1);
    for (int t = 0; t < T_COUNT; t++)
        if (t != T_Y && t != T_Z && out[t])
            TSEED_FAIL("tensor %d is not an output but has reference values", t);
    assert_non_null(out[T_Y]);
    assert_non_null(out[T_Z]);
    for (int i = 0; i < R * C; i++) {
        if (fabs(out[T_Y][i] - want[i]) > 1e-5 * magnitude)
            TSEED_FAIL("y[%d] = %.9g, expected %.9g", i, (double)out[T_Y][i], want[i]);
        if (memcmp(&out[T_Y][i], &out[T_Z][i], sizeof(float)) != 0)
            TSEED_FAIL("y[%d] and z[%d] differ", i, i);
    }
    /* The Repeat matters: one iteration less gives a different answer. */
    ipu_reference_free_outputs(out, w->graph.tensor_count);
    w->graph.repeat.iterations = ITER - 1;
    w->graph.tensors[T_W1].sequence = w->graph.tensors[T_W2].sequence = ITER - 1;
    TSEED_OK(ctx, ipu_reference_fp32(ctx, w, &out));
    double differ = 0;
    for (int i = 0; i < R * C; i++)
        differ = fmax(differ, fabs(out[T_Y][i] - want[i]));
    assert_true(differ > 1e-3 * magnitude);
    ipu_reference_free_outputs(out, w->graph.tensor_count);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

static void test_errors(void **state)
{
    (void)state;
    tseed_reset(2);
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = tiny_workload(ctx);
    float **out = NULL;
    /* A sequence read before the body. */
    w->graph.ops[1].in[1] = T_W1;
    w->graph.ops[1].out = T_H; /* a . w1 has h's shape */
    w->graph.repeat.carried_init = T_X;
    assert_int_equal(ipu_reference_fp32(ctx, w, &out), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "outside the Repeat body"));
    ipu_ctx_clear_error(ctx);
    ipu_workload_free(w);

    w = tiny_workload(ctx);
    for (int i = 0; i < T_COUNT; i++)
        free(w->values[i]);
    free(w->values);
    w->values = NULL;
    assert_int_equal(ipu_reference_fp32(ctx, w, &out), IPU_ERR_STATE);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

static json_t *check(ipu_ctx *ctx, const float *ref, const float *dev, size_t rows, size_t cols)
{
    json_t *result = NULL;
    const ipu_check_criteria loose = {0.99, 1e30, 0, 1e30}; /* the cosine alone decides */
    TSEED_OK(ctx, ipu_check_rows(ctx, ref, dev, IPU_DT_F32, 0, rows, cols, &loose, &result));
    return result;
}

static json_int_t get_int(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        TSEED_FAIL("result has no integer '%s'", key);
    return json_integer_value(v);
}

static void test_check_rows(void **state)
{
    (void)state;
    tseed_reset(3);
    ipu_ctx *ctx = ipu_ctx_create();
    enum { ROWS = 300, COLS = 130 };
    float *ref = fill((size_t)ROWS * COLS, 1.0), *dev = malloc(sizeof(float) * ROWS * COLS);
    assert_non_null(dev);
    memcpy(dev, ref, sizeof(float) * ROWS * COLS);
    json_t *r = check(ctx, ref, dev, ROWS, COLS);
    assert_true(json_is_true(json_object_get(r, "passed")));
    assert_true(json_real_value(json_object_get(r, "min_cosine")) == 1.0);
    assert_true(json_real_value(json_object_get(r, "max_abs_error")) == 0.0);
    json_decref(r);

    dev[7 * COLS + 3] = NAN;
    memset(dev + 11 * COLS, 0, sizeof(float) * COLS);
    ref[12 * COLS] = INFINITY;
    memset(ref + 13 * COLS, 0, sizeof(float) * COLS);
    r = check(ctx, ref, dev, ROWS, COLS);
    assert_false(json_is_true(json_object_get(r, "passed")));
    assert_int_equal(get_int(r, "failed_rows"), 4);
    assert_int_equal(get_int(r, "nonfinite_rows"), 2);
    assert_int_equal(get_int(r, "zero_norm_rows"), 2);
    assert_int_equal(get_int(r, "below_threshold_rows"), 0);
    json_t *list = json_object_get(r, "failed_row_list");
    assert_int_equal(json_array_size(list), 4);
    static const int rows_failed[] = {7, 11, 12, 13};
    for (int i = 0; i < 4; i++)
        assert_int_equal(json_integer_value(json_array_get(list, (size_t)i)), rows_failed[i]);
    char *text = json_dumps(r, JSON_COMPACT);
    json_decref(r);

    /* The same result with one thread and with two. */
    int threads = omp_get_max_threads();
    omp_set_num_threads(threads == 1 ? 2 : 1);
    r = check(ctx, ref, dev, ROWS, COLS);
    omp_set_num_threads(threads);
    char *again = json_dumps(r, JSON_COMPACT);
    assert_string_equal(text, again);
    free(text);
    free(again);
    json_decref(r);
    free(ref);
    free(dev);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_reference");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_graph),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_check_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
