/* test_reference_vit.c: the transformer ops of the graph (LayerNorm,
 * attention over fused QKV, MAP pooling) in the FP32 host reference, each in
 * a tiny hand-built graph whose result is compared with plain double loops
 * written here (within 1e-5 of the output's magnitude): LayerNorm of rows with
 * a large common offset; attention of 3 images x 2 heads (no row attends
 * across images); MAP pooling of one shared query over 3 images; and a
 * 3-iteration Repeat whose body (LN with per-iteration gamma and beta, QKV
 * matmul, attention, residual add) reads parameter-sequence members.  The op
 * functions give bit-identical results with 1 and 3 OpenMP threads.
 * Validation rejects bad shapes, mixed types and a non-positive epsilon with
 * messages naming the op; names and arities of the new kinds; and
 * ipu_compile of a ViT whose images x heads need more tiles than the
 * device has is rejected (IPU_ERR_NO_PLAN) saying so.  Values are seeded (support_seed.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ipu/ipu.h"
#include "numerics/numerics.h"
#include "reference/reference.h"
#include "workloads/workload.h"

#include "support_seed.h"

#define IMAGES 3
#define SEQ 5
#define HEADS 2
#define HD 4
#define CH (HEADS * HD)
#define ROWS (IMAGES * SEQ)
#define EPS 1e-6f

static double uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(tseed_rnd() >> 11) * 0x1.0p-53;
}

static float *fill(size_t n, double lo, double hi)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)uniform(lo, hi);
    return v;
}

static ipu_workload *new_workload(void)
{
    ipu_workload *w = calloc(1, sizeof *w);
    assert_non_null(w);
    strcpy(w->name, "tiny-vit");
    ipu_graph_init(&w->graph);
    return w;
}

static uint32_t tensor(ipu_ctx *ctx, ipu_workload *w, const char *name, uint32_t rows,
                       uint32_t cols, int role)
{
    uint32_t id;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, &w->graph, name, rows, cols, IPU_DT_F16, 0, role, &id));
    return id;
}

/* Allocate w->values for the graph's tensors (once they all exist). */
static void values(ipu_workload *w)
{
    w->values = calloc(w->graph.tensor_count, sizeof *w->values);
    assert_non_null(w->values);
}

/* Run the reference and compare output `out` with want (n doubles). */
static void expect(ipu_ctx *ctx, ipu_workload *w, uint32_t out, const double *want, size_t n)
{
    float **got = NULL;
    TSEED_OK(ctx, ipu_graph_validate(ctx, &w->graph));
    TSEED_OK(ctx, ipu_reference_fp32(ctx, w, &got));
    double magnitude = 0;
    for (size_t i = 0; i < n; i++)
        magnitude = fmax(magnitude, fabs(want[i]));
    assert_true(magnitude > 0.1);
    assert_non_null(got[out]);
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[out][i] - want[i]) <= 1e-5 * magnitude))
            TSEED_FAIL("%s[%zu] = %.9g, expected %.9g", w->graph.tensors[out].name, i,
                       (double)got[out][i], want[i]);
    ipu_reference_free_outputs(got, w->graph.tensor_count);
}

static void ln_rows(const double *x, const float *gamma, const float *beta, int rows, int cols,
                    double *out)
{
    for (int r = 0; r < rows; r++) {
        double mean = 0, var = 0;
        for (int c = 0; c < cols; c++)
            mean += x[r * cols + c] / cols;
        for (int c = 0; c < cols; c++)
            var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean) / cols;
        for (int c = 0; c < cols; c++)
            out[r * cols + c] = (x[r * cols + c] - mean) / sqrt(var + EPS) * gamma[c] + beta[c];
    }
}

/* One head: out[i] (stride ldo) = sum_j softmax_j(q_i . k_j / sqrt(HD)) v_j
 * for nq queries (stride ldq) over SEQ keys and values (stride ldkv). */
static void head(const double *q, int ldq, int nq, const double *k, const double *v, int ldkv,
                 double *out, int ldo)
{
    for (int i = 0; i < nq; i++) {
        double s[SEQ], max = -INFINITY, sum = 0;
        for (int j = 0; j < SEQ; j++) {
            s[j] = 0;
            for (int e = 0; e < HD; e++)
                s[j] += q[i * ldq + e] * k[j * ldkv + e];
            s[j] /= sqrt((double)HD);
            max = fmax(max, s[j]);
        }
        for (int j = 0; j < SEQ; j++)
            sum += s[j] = exp(s[j] - max);
        for (int e = 0; e < HD; e++) {
            double o = 0;
            for (int j = 0; j < SEQ; j++)
                o += s[j] / sum * v[j * ldkv + e];
            out[i * ldo + e] = o;
        }
    }
}

static void attention_rows(const double *qkv, double *out)
{
    for (int b = 0; b < IMAGES; b++)
        for (int h = 0; h < HEADS; h++) {
            const double *base = qkv + b * SEQ * 3 * CH + h * HD;
            head(base, 3 * CH, SEQ, base + CH, base + 2 * CH, 3 * CH,
                 out + b * SEQ * CH + h * HD, CH);
        }
}

static void widen(const float *src, double *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

static void test_layernorm(void **state)
{
    (void)state;
    tseed_reset(1);
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = new_workload();
    uint32_t x = tensor(ctx, w, "x", ROWS, 11, IPU_ROLE_INPUT);
    uint32_t g = tensor(ctx, w, "gamma", 1, 11, IPU_ROLE_PARAM);
    uint32_t b = tensor(ctx, w, "beta", 1, 11, IPU_ROLE_PARAM);
    uint32_t y = tensor(ctx, w, "y", ROWS, 11, IPU_ROLE_OUTPUT);
    TSEED_OK(ctx, ipu_graph_layernorm(ctx, &w->graph, x, g, b, EPS, y));
    values(w);
    /* A large common offset: the variance must come from deviations. */
    w->values[x] = fill(ROWS * 11, 97.0, 103.0);
    w->values[g] = fill(11, 0.5, 1.5);
    w->values[b] = fill(11, -0.5, 0.5);
    double xs[ROWS * 11], want[ROWS * 11];
    widen(w->values[x], xs, ROWS * 11);
    ln_rows(xs, w->values[g], w->values[b], ROWS, 11, want);
    expect(ctx, w, y, want, ROWS * 11);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

static void test_attention(void **state)
{
    (void)state;
    tseed_reset(2);
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = new_workload();
    uint32_t qkv = tensor(ctx, w, "qkv", ROWS, 3 * CH, IPU_ROLE_INPUT);
    uint32_t y = tensor(ctx, w, "y", ROWS, CH, IPU_ROLE_OUTPUT);
    TSEED_OK(ctx, ipu_graph_attention(ctx, &w->graph, qkv, SEQ, HEADS, HD, y));
    values(w);
    w->values[qkv] = fill(ROWS * 3 * CH, -2.5, 2.5); /* scores of a few units: a peaked softmax */
    double in[ROWS * 3 * CH], want[ROWS * CH];
    widen(w->values[qkv], in, ROWS * 3 * CH);
    attention_rows(in, want);
    expect(ctx, w, y, want, ROWS * CH);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

static void test_map_pool(void **state)
{
    (void)state;
    tseed_reset(3);
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = new_workload();
    uint32_t q = tensor(ctx, w, "q", 1, CH, IPU_ROLE_INPUT);
    uint32_t kv = tensor(ctx, w, "kv", ROWS, 2 * CH, IPU_ROLE_INPUT);
    uint32_t y = tensor(ctx, w, "y", IMAGES, CH, IPU_ROLE_OUTPUT);
    TSEED_OK(ctx, ipu_graph_map_pool(ctx, &w->graph, q, kv, SEQ, HEADS, HD, y));
    values(w);
    w->values[q] = fill(CH, -2.5, 2.5);
    w->values[kv] = fill(ROWS * 2 * CH, -2.5, 2.5);
    double qd[CH], kvd[ROWS * 2 * CH], want[IMAGES * CH];
    widen(w->values[q], qd, CH);
    widen(w->values[kv], kvd, ROWS * 2 * CH);
    for (int b = 0; b < IMAGES; b++)
        for (int h = 0; h < HEADS; h++) {
            const double *base = kvd + b * SEQ * 2 * CH + h * HD;
            head(qd + h * HD, CH, 1, base, base + CH, 2 * CH, want + b * CH + h * HD, CH);
        }
    expect(ctx, w, y, want, IMAGES * CH);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* carried c: ln = LN(c; g[i], b[i]); qkv = ln . wqkv[i]; a = attention(qkv);
 * n = a + c (the next c); after the body y = copy(n). */
#define ITER 3
static void test_repeat_block(void **state)
{
    (void)state;
    tseed_reset(4);
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = new_workload();
    ipu_graph *gr = &w->graph;
    uint32_t x = tensor(ctx, w, "x", ROWS, CH, IPU_ROLE_INPUT);
    uint32_t c = tensor(ctx, w, "c", ROWS, CH, IPU_ROLE_ACTIVATION);
    uint32_t g = tensor(ctx, w, "gamma", 1, CH, IPU_ROLE_PARAM);
    uint32_t b = tensor(ctx, w, "beta", 1, CH, IPU_ROLE_PARAM);
    uint32_t wqkv = tensor(ctx, w, "wqkv", CH, 3 * CH, IPU_ROLE_PARAM);
    uint32_t ln = tensor(ctx, w, "ln", ROWS, CH, IPU_ROLE_ACTIVATION);
    uint32_t qkv = tensor(ctx, w, "qkv", ROWS, 3 * CH, IPU_ROLE_ACTIVATION);
    uint32_t a = tensor(ctx, w, "a", ROWS, CH, IPU_ROLE_ACTIVATION);
    uint32_t n = tensor(ctx, w, "n", ROWS, CH, IPU_ROLE_ACTIVATION);
    uint32_t y = tensor(ctx, w, "y", ROWS, CH, IPU_ROLE_OUTPUT);
    gr->tensors[g].sequence = gr->tensors[b].sequence = gr->tensors[wqkv].sequence = ITER;
    TSEED_OK(ctx, ipu_graph_layernorm(ctx, gr, c, g, b, EPS, ln));
    TSEED_OK(ctx, ipu_graph_op(ctx, gr, IPU_IR_MATMUL, ln, wqkv, qkv));
    TSEED_OK(ctx, ipu_graph_attention(ctx, gr, qkv, SEQ, HEADS, HD, a));
    TSEED_OK(ctx, ipu_graph_op(ctx, gr, IPU_IR_ADD, a, c, n));
    TSEED_OK(ctx, ipu_graph_op(ctx, gr, IPU_IR_COPY, n, 0, y));
    gr->repeat = (ipu_ir_repeat){0, 4, ITER, c, n, x};
    values(w);
    w->values[x] = fill(ROWS * CH, -2, 2);
    w->values[g] = fill(ITER * CH, 0.5, 1.5);
    w->values[b] = fill(ITER * CH, -0.5, 0.5);
    w->values[wqkv] = fill(ITER * CH * 3 * CH, -1, 1);
    double cur[ROWS * CH], lnd[ROWS * CH], q[ROWS * 3 * CH], att[ROWS * CH];
    widen(w->values[x], cur, ROWS * CH);
    for (int it = 0; it < ITER; it++) {
        ln_rows(cur, w->values[g] + it * CH, w->values[b] + it * CH, ROWS, CH, lnd);
        const float *wm = w->values[wqkv] + it * CH * 3 * CH;
        for (int r = 0; r < ROWS; r++)
            for (int j = 0; j < 3 * CH; j++) {
                double s = 0;
                for (int k = 0; k < CH; k++)
                    s += lnd[r * CH + k] * wm[k * 3 * CH + j];
                q[r * 3 * CH + j] = s;
            }
        attention_rows(q, att);
        for (int i = 0; i < ROWS * CH; i++)
            cur[i] += att[i];
    }
    expect(ctx, w, y, cur, ROWS * CH);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* The op functions directly, on larger data: 1 and 3 threads, same bits. */
static void test_thread_independence(void **state)
{
    (void)state;
    tseed_reset(5);
    ipu_ctx *ctx = ipu_ctx_create();
    /* The map pooling reads qkv's floats as kv [KV x 2C]: KV / T = 6 images. */
    enum { B = 4, T = 50, NH = 3, D = 8, C = NH * D, R = B * T, KV = R * 3 / 2 };
    float *qkv = fill((size_t)R * 3 * C, -3, 3), *g = fill(6 * C, 0.5, 1.5);
    float *out[2], *pool[2], *norm[2];
    int previous = openblas_get_num_threads();
    openblas_set_num_threads(1);
    for (int k = 0; k < 2; k++) {
        int threads = k ? 3 : 1;
        out[k] = malloc(sizeof(float) * R * C);
        pool[k] = malloc(sizeof(float) * (KV / T) * C);
        norm[k] = malloc(sizeof(float) * R * 3 * C);
        assert_true(out[k] && pool[k] && norm[k]);
        TSEED_OK(ctx, ipu_reference_attention(ctx, qkv, R, T, NH, D, threads, IPU_REF_ATTENTION_FP32, NULL, out[k]));
        TSEED_OK(ctx, ipu_reference_map_pool(ctx, qkv, qkv, KV, T, NH, D, threads, IPU_REF_ATTENTION_FP32,
                                             NULL, pool[k]));
        TSEED_OK(ctx, ipu_reference_layernorm(ctx, qkv, g, g + 3 * C, EPS, R, 3 * C, threads,
                                              norm[k]));
    }
    openblas_set_num_threads(previous);
    assert_memory_equal(out[0], out[1], sizeof(float) * R * C);
    assert_memory_equal(pool[0], pool[1], sizeof(float) * (KV / T) * C);
    assert_memory_equal(norm[0], norm[1], sizeof(float) * R * 3 * C);
    for (int k = 0; k < 2; k++) {
        free(out[k]);
        free(pool[k]);
        free(norm[k]);
    }
    free(qkv);
    free(g);
    ipu_ctx_free(ctx);
}

/* A graph of one op on fresh tensors; validation must fail mentioning msg. */
static void expect_invalid(ipu_ctx *ctx, ipu_workload *w, const char *msg)
{
    assert_int_equal(ipu_graph_validate(ctx, &w->graph), IPU_ERR_INVALID_ARGUMENT);
    if (!strstr(ipu_ctx_errmsg(ctx), msg))
        TSEED_FAIL("message '%s' does not mention '%s'", ipu_ctx_errmsg(ctx), msg);
    ipu_ctx_clear_error(ctx);
    ipu_workload_free(w);
}

static void test_validation(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_string_equal(ipu_ir_op_name(IPU_IR_LAYERNORM), "layernorm");
    assert_string_equal(ipu_ir_op_name(IPU_IR_ATTENTION), "attention");
    assert_string_equal(ipu_ir_op_name(IPU_IR_MAP_POOL), "map_pool");
    assert_string_equal(ipu_ir_op_name(IPU_IR_KIND_COUNT), "unknown");
    assert_int_equal(ipu_ir_op_arity(IPU_IR_LAYERNORM), 3);
    assert_int_equal(ipu_ir_op_arity(IPU_IR_ATTENTION), 1);
    assert_int_equal(ipu_ir_op_arity(IPU_IR_MAP_POOL), 2);
    assert_int_equal(ipu_ir_op_arity(IPU_IR_MATMUL), 2);
    assert_int_equal(ipu_ir_op_arity(-1), 0);

    /* LayerNorm: gamma of the wrong width, epsilon 0, mixed types. */
    for (int k = 0; k < 3; k++) {
        ipu_workload *w = new_workload();
        uint32_t x = tensor(ctx, w, "x", 4, 6, IPU_ROLE_INPUT);
        uint32_t g = tensor(ctx, w, "g", 1, k == 0 ? 5 : 6, IPU_ROLE_PARAM);
        uint32_t b = tensor(ctx, w, "b", 1, 6, IPU_ROLE_PARAM);
        uint32_t y = tensor(ctx, w, "y", 4, 6, IPU_ROLE_OUTPUT);
        if (k == 2)
            w->graph.tensors[b].dtype = IPU_DT_F32;
        TSEED_OK(ctx, ipu_graph_layernorm(ctx, &w->graph, x, g, b, k == 1 ? 0.0f : EPS, y));
        expect_invalid(ctx, w, k == 0 ? "op 0 (layernorm): shapes" : k == 1 ? "epsilon" : "mixes");
    }
    /* Attention: rows not a multiple of seq; columns not 3 x heads x head_dim;
     * FP8 operands. */
    for (int k = 0; k < 3; k++) {
        ipu_workload *w = new_workload();
        uint32_t qkv = tensor(ctx, w, "qkv", k == 0 ? 14 : 15, k == 1 ? 23 : 24, IPU_ROLE_INPUT);
        uint32_t y = tensor(ctx, w, "y", k == 0 ? 14 : 15, 8, IPU_ROLE_OUTPUT);
        if (k == 2)
            w->graph.tensors[qkv].dtype = w->graph.tensors[y].dtype = IPU_DT_F143;
        TSEED_OK(ctx, ipu_graph_attention(ctx, &w->graph, qkv, 5, 2, 4, y));
        expect_invalid(ctx, w, k < 2 ? "op 0 (attention): shapes" : "FP16 or FP32");
    }
    /* MAP pooling: out rows not the image count; a query of two rows. */
    for (int k = 0; k < 2; k++) {
        ipu_workload *w = new_workload();
        uint32_t q = tensor(ctx, w, "q", k == 1 ? 2 : 1, 8, IPU_ROLE_INPUT);
        uint32_t kv = tensor(ctx, w, "kv", 15, 16, IPU_ROLE_INPUT);
        uint32_t y = tensor(ctx, w, "y", k == 0 ? 15 : 3, 8, IPU_ROLE_OUTPUT);
        TSEED_OK(ctx, ipu_graph_map_pool(ctx, &w->graph, q, kv, 5, 2, 4, y));
        expect_invalid(ctx, w, "op 0 (map_pool): shapes");
    }
    /* A third input out of range. */
    ipu_workload *w = new_workload();
    uint32_t x = tensor(ctx, w, "x", 4, 6, IPU_ROLE_INPUT);
    uint32_t g = tensor(ctx, w, "g", 1, 6, IPU_ROLE_PARAM);
    uint32_t y = tensor(ctx, w, "y", 4, 6, IPU_ROLE_OUTPUT);
    TSEED_OK(ctx, ipu_graph_layernorm(ctx, &w->graph, x, g, 99, EPS, y));
    expect_invalid(ctx, w, "reads tensor 99");
    ipu_ctx_free(ctx);
}

/* Compile a vit geometry for a small device; NULL package and the message
 * when the compiler refuses. */
static ipu_status compile_vit(ipu_ctx *ctx, const char *geometry, const char *options,
                              ipu_package **package)
{
    ipu_workload *w = NULL;
    char text[256];
    ipu_ctx_clear_error(ctx); /* a context keeps its first error */
    snprintf(text, sizeof text, "{\"workload\": \"vit-small\", \"tokens\": 5, \"hidden\": 8, %s}", geometry);
    TSEED_OK(ctx, ipu_workload_create(ctx, text, &w));
    char *report = NULL;
    *package = NULL;
    ipu_status status = ipu_compile(ctx, w, options, package, &report);
    ipu_free(report);
    ipu_workload_free(w);
    return status;
}

static void test_compile_limits_of_attention(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_package *package = NULL;
    /* 2 images x 2 heads fit 4 tiles; 3 images do not. */
    TSEED_OK(ctx, compile_vit(ctx, "\"heads\": 2, \"head_dim\": 4, \"batch\": 2",
                              "{\"profile\": {\"tiles\": 4}}", &package));
    assert_non_null(package);
    ipu_package_free(package);
    assert_int_equal(compile_vit(ctx, "\"heads\": 2, \"head_dim\": 4, \"batch\": 3",
                                 "{\"profile\": {\"tiles\": 4}}", &package),
                     IPU_ERR_NO_PLAN);
    assert_null(package);
    if (!strstr(ipu_ctx_errmsg(ctx), "3 images x 2 heads need at least 6 tiles; the device has 4"))
        TSEED_FAIL("unexpected message: %s", ipu_ctx_errmsg(ctx));
    /* Head columns must stay on words when cast to FP8: a workload the
     * compiler does not take is an invalid argument, not a rejection. */
    assert_int_equal(compile_vit(ctx, "\"heads\": 2, \"head_dim\": 6",
                                 "{\"profile\": {\"tiles\": 4}}", &package),
                     IPU_ERR_INVALID_ARGUMENT);
    if (!strstr(ipu_ctx_errmsg(ctx), "head_dim 6 is not a multiple of 4"))
        TSEED_FAIL("unexpected message: %s", ipu_ctx_errmsg(ctx));
    assert_int_equal(compile_vit(ctx, "\"heads\": 2, \"head_dim\": 4",
                                 "{\"profile\": {\"tiles\": 4}, \"attention\": \"fast\"}", &package),
                     IPU_ERR_INVALID_ARGUMENT);
    if (!strstr(ipu_ctx_errmsg(ctx), "--attention: expected auto, flash or materialized, got 'fast'"))
        TSEED_FAIL("unexpected message: %s", ipu_ctx_errmsg(ctx));
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_reference_vit");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm),        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_map_pool),         cmocka_unit_test(test_repeat_block),
        cmocka_unit_test(test_thread_independence), cmocka_unit_test(test_validation),
        cmocka_unit_test(test_compile_limits_of_attention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
