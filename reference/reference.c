/* reference.c: the FP32 host reference (see reference.h).  Every tensor that
 * is not an input or parameter gets one host buffer (allocated zeroed on
 * first use); inputs and parameters are read from the workload's values
 * (made on first use, ipu_workload_values_of), a parameter sequence at member
 * `iteration` inside the Repeat body.  The ops
 * before the body run once, the body `iterations` times (the carried tensor
 * loaded from carried_init before the first iteration and from carried_next
 * after each one), then the ops after it.  Elementwise loops are OpenMP
 * loops over independent elements; a matmul is an OpenMP loop over fixed
 * 256 x 256 output tiles, each one cblas_sgemm call with OpenBLAS set to one
 * thread (as the simulator's tile GEMMs), so every output element comes from
 * the same call for any thread count and the results are bit-identical
 * (OpenBLAS's own threading splits the work by thread count, which changes
 * the last bits).  LayerNorm, attention and MAP pooling are reference_vit.c's.
 * The loops use ipu_reference_blas_threads() threads.
 */
#include "reference/reference.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/numerics.h"

/* OpenMP runs an elementwise loop in parallel from this many elements. */
#define PARALLEL_MIN 32768
/* Matmul outputs are computed in tiles of at most this many rows and columns. */
#define GEMM_TILE 256

int ipu_reference_blas_threads(void)
{
    int threads = openblas_get_num_threads() > 0 ? openblas_get_num_threads() : 1;
    const char *blas = getenv("OPENBLAS_NUM_THREADS"), *omp = getenv("OMP_NUM_THREADS");
    if ((blas && *blas) || (omp && *omp))
        return threads;
    return threads > 4 ? 4 : threads;
}

void ipu_reference_free_outputs(float **outputs, size_t count)
{
    for (size_t i = 0; outputs && i < count; i++)
        free(outputs[i]);
    free(outputs);
}

typedef struct eval {
    ipu_ctx *ctx;
    const ipu_workload *w;
    float **buf; /* per tensor: the host buffer of an activation or output */
    uint64_t done, total;
    int threads; /* OpenMP threads of the parallel loops */
    float **rounded; /* device precision: inputs and parameters at their device values; else NULL */
    const ipu_reference_plan *plan; /* device precision: what it knows of the plan (NULL: nothing) */
} eval;

static uint64_t elements(const ipu_ir_tensor *t) { return (uint64_t)t->rows * t->cols; }

static int is_value(const ipu_ir_tensor *t)
{
    return t->role == IPU_ROLE_INPUT || t->role == IPU_ROLE_PARAM;
}

/* The buffer of an activation or output (allocated zeroed on first use). */
static ipu_status buffer(eval *e, uint32_t id, float **out)
{
    const ipu_ir_tensor *t = &e->w->graph.tensors[id];
    if (is_value(t))
        return IPU_FAIL(e->ctx, IPU_ERR_INVALID_ARGUMENT,
                        "reference: tensor '%s' is an %s and cannot be written", t->name,
                        t->role == IPU_ROLE_INPUT ? "input" : "parameter");
    if (!e->buf[id]) {
        uint64_t n = elements(t);
        if (n > SIZE_MAX / sizeof(float))
            return IPU_NO_MEMORY(e->ctx);
        e->buf[id] = ipu_calloc(e->ctx, (size_t)n, sizeof(float));
        if (!e->buf[id])
            return IPU_NO_MEMORY(e->ctx);
    }
    *out = e->buf[id];
    return IPU_OK;
}

/* The current value of a tensor; iteration < 0 outside the Repeat body. */
static ipu_status value(eval *e, uint32_t id, int64_t iteration, const float **out)
{
    const ipu_ir_tensor *t = &e->w->graph.tensors[id];
    if (!is_value(t)) {
        float *b = NULL;
        IPU_TRY(buffer(e, id, &b));
        *out = b;
        return IPU_OK;
    }
    const float *base = NULL;
    if (e->rounded)
        base = e->rounded[id];
    else
        IPU_TRY(ipu_workload_values_of(e->ctx, e->w, id, &base));
    if (!base)
        return IPU_FAIL(e->ctx, IPU_ERR_STATE, "reference: tensor '%s' has no values", t->name);
    uint64_t member = 0;
    if (t->sequence > 1) {
        if (iteration < 0)
            return IPU_FAIL(e->ctx, IPU_ERR_INVALID_ARGUMENT,
                            "reference: parameter sequence '%s' is read outside the Repeat body",
                            t->name);
        member = (uint64_t)iteration;
    }
    *out = base + member * elements(t);
    return IPU_OK;
}

static ipu_status matmul(eval *e, const ipu_ir_op *op, const float *a, const float *b, float *c)
{
    const ipu_ir_tensor *ta = &e->w->graph.tensors[op->in[0]];
    const ipu_ir_tensor *tb = &e->w->graph.tensors[op->in[1]];
    if (ta->rows > INT_MAX || ta->cols > INT_MAX || tb->cols > INT_MAX)
        return IPU_FAIL(e->ctx, IPU_ERR_INVALID_ARGUMENT,
                        "reference: matmul '%s' is too large for BLAS", ta->name);
    if (op->out == op->in[0] || op->out == op->in[1])
        return IPU_FAIL(e->ctx, IPU_ERR_INVALID_ARGUMENT,
                        "reference: matmul writes its own operand '%s'",
                        e->w->graph.tensors[op->out].name);
    int m = (int)ta->rows, k = (int)ta->cols, n = (int)tb->cols;
    int64_t across = ((int64_t)n + GEMM_TILE - 1) / GEMM_TILE;
    int64_t tiles = ((int64_t)m + GEMM_TILE - 1) / GEMM_TILE * across;
    /* Fixed output tiles, each one single-threaded sgemm: every element is
     * computed by the same call whatever the thread count. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->threads) if (tiles > 1)
    for (int64_t t = 0; t < tiles; t++) {
        int i = (int)(t / across) * GEMM_TILE, j = (int)(t % across) * GEMM_TILE;
        int rows = m - i < GEMM_TILE ? m - i : GEMM_TILE, cols = n - j < GEMM_TILE ? n - j : GEMM_TILE;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, cols, k, 1.0f,
                    a + (size_t)i * k, k, b + j, n, 0.0f, c + (size_t)i * n + j, n);
    }
    return IPU_OK;
}

static void round_to_type(const ipu_ir_tensor *t, float *values, size_t n);

/* A matmul in the plan's blocks (reference.h says how the device computes
 * and sums them): per block and reduction part one single-threaded sgemm of
 * the device's shape; with several parts each partial is rounded to the
 * output type and every output row band sums them as its owner does (the
 * others in part order, by halves, every add rounded, then the owner's plus
 * that sum).  The last rounding is the op's own. */
static ipu_status blocked_matmul(eval *e, const ipu_ir_op *op, const ipu_reference_blocks *m,
                                 const float *a, const float *b, float *c)
{
    const ipu_ir_tensor *ta = &e->w->graph.tensors[op->in[0]], *tc = &e->w->graph.tensors[op->out];
    int k = (int)ta->cols, n = (int)tc->cols;
    uint32_t parts = m->parts, gm = m->row_block_count, gn = m->col_block_count;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->threads) if ((uint64_t)gm * gn > 1)
    for (int64_t block = 0; block < (int64_t)gm * gn; block++) {
        uint32_t i = (uint32_t)(block / gn), j = (uint32_t)(block % gn);
        uint32_t r0 = m->row_blocks[i], rows = m->row_blocks[i + 1] - r0;
        uint32_t n0 = m->col_bounds[j], cols = m->col_bounds[j + 1] - n0;
        size_t size = (size_t)rows * cols;
        float *partial = ipu_malloc(e->ctx, parts * size * sizeof *partial + 1);
        float **slot = ipu_malloc(e->ctx, parts * sizeof *slot);
        if (!partial || !slot) {
            free(partial), free(slot);
#pragma omp atomic write
            failed = 1;
            continue;
        }
        for (uint32_t q = 0; q < parts && size; q++) {
            uint32_t k0 = m->k_bounds[q], depth = m->k_bounds[q + 1] - k0;
            float *p = partial + q * size;
            if (depth)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)cols, (int)depth, 1.0f,
                            a + (size_t)r0 * k + k0, k, b + (size_t)k0 * n + n0, n, 0.0f, p, (int)cols);
            else
                memset(p, 0, size * sizeof *p);
            if (parts > 1)
                round_to_type(tc, p, size);
        }
        for (uint32_t sub = 0; sub < parts; sub++) {
            /* Output band i * parts + sub, owned by part sub. */
            uint32_t b0 = m->row_bounds[i * parts + sub] - r0, band = m->row_bounds[i * parts + sub + 1] - r0 - b0;
            size_t offset = (size_t)b0 * cols, count = (size_t)band * cols;
            for (uint32_t q = 0, s = 0; q < parts; q++)
                if (q != sub || parts == 1)
                    slot[s++] = partial + q * size + offset;
            for (uint32_t left = parts - 1; left > 1;) {
                uint32_t half = left / 2; /* ipu_reduce_tree_half */
                for (uint32_t s = 0; s < half; s++) {
                    float *x = slot[s];
                    const float *y = slot[s + left - half];
                    for (size_t t = 0; t < count; t++)
                        x[t] = x[t] + y[t];
                    round_to_type(tc, x, count);
                }
                left -= half;
            }
            const float *own = partial + sub * size + offset;
            for (uint32_t r = 0; r < band; r++)
                for (uint32_t col = 0; col < cols; col++) {
                    size_t t = (size_t)r * cols + col;
                    c[(size_t)(r0 + b0 + r) * n + n0 + col] = parts > 1 ? own[t] + slot[0][t] : own[t];
                }
        }
        free(slot);
        free(partial);
    }
    return failed ? IPU_NO_MEMORY(e->ctx) : IPU_OK;
}

/* Round values to what the tensor's device type and scale hold. */
static void round_to_type(const ipu_ir_tensor *t, float *values, size_t n)
{
    enum { CHUNK = 4096 };
    uint8_t bytes[CHUNK * 4];
    for (size_t done = 0; done < n; done += CHUNK) {
        size_t count = n - done < CHUNK ? n - done : CHUNK;
        ipu_num_encode(t->dtype, t->scale, values + done, bytes, count);
        ipu_num_decode(t->dtype, t->scale, bytes, values + done, count);
    }
}

/* A biased matmul's bias added to every row of its product: at device
 * precision the product is rounded to the output's type first, as the
 * device's GEMM writes it before the BIAS kernel reads it. */
static void add_bias(const eval *e, const ipu_ir_tensor *t, const float *bias, float *out)
{
    if (e->rounded)
        round_to_type(t, out, (size_t)elements(t));
#pragma omp parallel for schedule(static) num_threads(e->threads) if (elements(t) >= PARALLEL_MIN)
    for (int64_t r = 0; r < (int64_t)t->rows; r++)
        for (uint32_t col = 0; col < t->cols; col++)
            out[(size_t)r * t->cols + col] += bias[col];
}

/* One op on its input arrays a, b, c (as many as it takes) into out, rounded
 * to the output's type at device precision (e->rounded set). */
static ipu_status compute(eval *e, const ipu_ir_op *op, const float *a, const float *b,
                          const float *c, float *out)
{
    const ipu_graph *g = &e->w->graph;
    int64_t n = (int64_t)elements(&g->tensors[op->out]);
    size_t index = (size_t)(op - g->ops);
    int mode = e->plan && e->rounded ? e->plan->attention[index] : IPU_REF_ATTENTION_FP32;
    const ipu_reference_bands *bands = e->plan && e->rounded ? &e->plan->bands[index] : NULL;
    const ipu_reference_blocks *blocks = e->plan && e->rounded ? &e->plan->matmuls[index] : NULL;
    const ipu_ir_tensor *ta = &g->tensors[op->in[0]];
    int64_t second = op->kind == IPU_IR_ADD ? (int64_t)elements(&g->tensors[op->in[1]]) : 1;
    if (op->kind >= IPU_IR_LAYERNORM && (out == a || out == b || out == c))
        return IPU_FAIL(e->ctx, IPU_ERR_INVALID_ARGUMENT,
                        "reference: %s writes its own operand '%s'", ipu_ir_op_name(op->kind),
                        g->tensors[op->out].name);
    switch (op->kind) {
    case IPU_IR_MATMUL:
        if (blocks && blocks->row_block_count)
            IPU_TRY(blocked_matmul(e, op, blocks, a, b, out));
        else
            IPU_TRY(matmul(e, op, a, b, out));
        if (op->biased)
            add_bias(e, &g->tensors[op->out], c, out);
        break;
    case IPU_IR_GELU:
#pragma omp parallel for schedule(static) num_threads(e->threads) if (n >= PARALLEL_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = op->form == IPU_GELU_ERF ? ipu_num_gelu_erf(a[i]) : ipu_num_gelu(a[i]);
        break;
    case IPU_IR_ADD:
#pragma omp parallel for schedule(static) num_threads(e->threads) if (n >= PARALLEL_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = a[i] + b[i % second];
        break;
    case IPU_IR_LAYERNORM:
        IPU_TRY(ipu_reference_layernorm(e->ctx, a, b, c, op->epsilon, ta->rows, ta->cols,
                                        e->threads, out));
        break;
    case IPU_IR_ATTENTION:
        IPU_TRY(ipu_reference_attention(e->ctx, a, ta->rows, op->seq, op->heads, op->head_dim,
                                        e->threads, mode, bands, out));
        break;
    case IPU_IR_MAP_POOL:
        IPU_TRY(ipu_reference_map_pool(e->ctx, a, b, g->tensors[op->in[1]].rows, op->seq, op->heads,
                                       op->head_dim, e->threads, mode, bands, out));
        break;
    case IPU_IR_CAST: /* FP32 mode: casts do not round */
    case IPU_IR_COPY:
        if (out != a)
            memmove(out, a, (size_t)n * sizeof *out);
        break;
    default:
        return IPU_FAIL(e->ctx, IPU_ERR_INVALID_ARGUMENT, "reference: unknown op kind %d",
                        op->kind);
    }
    if (e->rounded)
        round_to_type(&g->tensors[op->out], out, (size_t)n);
    return IPU_OK;
}

static ipu_status run_op(eval *e, const ipu_ir_op *op, int64_t iteration)
{
    const float *a = NULL, *b = NULL, *c = NULL;
    float *out = NULL;
    int inputs = ipu_ir_op_inputs(op);
    IPU_TRY(value(e, op->in[0], iteration, &a));
    if (inputs >= 2)
        IPU_TRY(value(e, op->in[1], iteration, &b));
    if (inputs >= 3)
        IPU_TRY(value(e, op->in[2], iteration, &c));
    IPU_TRY(buffer(e, op->out, &out));
    IPU_TRY(compute(e, op, a, b, c, out));
    return ipu_progress(e->ctx, "reference", ++e->done, e->total);
}

static ipu_status run_ops(eval *e, size_t first, size_t end, int64_t iteration)
{
    for (size_t i = first; i < end; i++)
        IPU_TRY(run_op(e, &e->w->graph.ops[i], iteration));
    return IPU_OK;
}

/* carried <- source (same shape, checked by ipu_graph_validate). */
static ipu_status load_carried(eval *e, uint32_t source)
{
    const ipu_ir_repeat *r = &e->w->graph.repeat;
    if (source == r->carried)
        return IPU_OK;
    float *dst = NULL;
    const float *src = NULL;
    IPU_TRY(buffer(e, r->carried, &dst));
    IPU_TRY(value(e, source, -1, &src));
    memmove(dst, src, (size_t)elements(&e->w->graph.tensors[r->carried]) * sizeof *dst);
    return IPU_OK;
}

static ipu_status evaluate(eval *e)
{
    const ipu_graph *g = &e->w->graph;
    const ipu_ir_repeat *r = &g->repeat;
    if (!r->iterations) {
        e->total = g->op_count;
        return run_ops(e, 0, g->op_count, -1);
    }
    e->total = g->op_count - r->op_count + (uint64_t)r->op_count * r->iterations;
    IPU_TRY(run_ops(e, 0, r->first_op, -1));
    IPU_TRY(load_carried(e, r->carried_init));
    for (uint32_t it = 0; it < r->iterations; it++) {
        IPU_TRY(run_ops(e, r->first_op, (size_t)r->first_op + r->op_count, it));
        IPU_TRY(load_carried(e, r->carried_next));
    }
    return run_ops(e, (size_t)r->first_op + r->op_count, g->op_count, -1);
}

/* Device precision: every input and parameter value rounded to its type. */
static ipu_status round_values(ipu_ctx *ctx, const ipu_workload *w, float **rounded)
{
    const ipu_graph *g = &w->graph;
    for (size_t i = 0; i < g->tensor_count; i++) {
        const ipu_ir_tensor *t = &g->tensors[i];
        if (!is_value(t))
            continue;
        size_t n = (size_t)(elements(t) * t->sequence);
        rounded[i] = ipu_malloc(ctx, n * sizeof(float) + 1);
        if (!rounded[i])
            return IPU_NO_MEMORY(ctx);
        IPU_TRY(ipu_workload_typed_values_of(ctx, w, (uint32_t)i, rounded[i]));
    }
    return IPU_OK;
}

static ipu_status reference(ipu_ctx *ctx, const ipu_workload *w, int device,
                            const ipu_reference_plan *plan, float ***outputs)
{
    const ipu_graph *g = &w->graph;
    IPU_TRY(ipu_graph_validate(ctx, g));
    int previous = openblas_get_num_threads();
    size_t slots = g->tensor_count ? g->tensor_count : 1;
    eval e = {ctx, w, ipu_calloc(ctx, slots, sizeof(float *)), 0, 0, ipu_reference_blas_threads(),
              device ? ipu_calloc(ctx, slots, sizeof(float *)) : NULL, plan};
    ipu_status prepared = e.buf && (!device || e.rounded) ? IPU_OK : IPU_NO_MEMORY(ctx);
    if (prepared == IPU_OK && device)
        prepared = round_values(ctx, w, e.rounded);
    if (prepared != IPU_OK) {
        ipu_reference_free_outputs(e.rounded, g->tensor_count);
        free(e.buf);
        return prepared;
    }
    /* The threads run single-threaded sgemm calls side by side. */
    if (previous != 1)
        openblas_set_num_threads(1);
    ipu_status status = evaluate(&e);
    if (previous != 1)
        openblas_set_num_threads(previous);
    /* Outputs keep their buffers (zeros if no op wrote them); the rest go. */
    for (size_t i = 0; status == IPU_OK && i < g->tensor_count; i++) {
        float *unused = NULL;
        if (g->tensors[i].role == IPU_ROLE_OUTPUT)
            status = buffer(&e, (uint32_t)i, &unused);
    }
    for (size_t i = 0; i < g->tensor_count; i++) {
        if (status != IPU_OK || g->tensors[i].role != IPU_ROLE_OUTPUT) {
            free(e.buf[i]);
            e.buf[i] = NULL;
        }
    }
    ipu_reference_free_outputs(e.rounded, g->tensor_count);
    if (status != IPU_OK) {
        free(e.buf);
        return status;
    }
    *outputs = e.buf;
    return IPU_OK;
}

ipu_status ipu_reference_fp32(ipu_ctx *ctx, const ipu_workload *w, float ***outputs)
{
    return reference(ctx, w, 0, NULL, outputs);
}

ipu_status ipu_reference_device(ipu_ctx *ctx, const ipu_workload *w, const ipu_reference_plan *plan,
                                float ***outputs)
{
    return reference(ctx, w, 1, plan, outputs);
}

ipu_status ipu_reference_device_op(ipu_ctx *ctx, const ipu_workload *w, size_t index,
                                   const ipu_reference_plan *plan, const float *const inputs[3], float *out)
{
    const ipu_graph *g = &w->graph;
    if (index >= g->op_count)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "reference: op %zu of %zu", index, g->op_count);
    const ipu_ir_op *op = &g->ops[index];
    for (int k = 0; k < ipu_ir_op_inputs(op); k++)
        if (!inputs[k] || inputs[k] == out)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "reference: op %zu (%s) needs input %d apart from its output", index,
                            ipu_ir_op_name(op->kind), k);
    float *device_precision = NULL; /* compute rounds when e.rounded is set; it reads no values */
    eval e = {ctx, w, NULL, 0, 0, ipu_reference_blas_threads(), &device_precision, plan};
    int previous = openblas_get_num_threads();
    if (previous != 1)
        openblas_set_num_threads(1);
    ipu_status status = compute(&e, op, inputs[0], inputs[1], inputs[2], out);
    if (previous != 1)
        openblas_set_num_threads(previous);
    return status;
}
