/* mlp.c: the SigLIP MLP workload: x [B*729 x 1152] -> matmul W1 [1152 x 4304]
 * -> GELU -> matmul W2 [4304 x 1152], no bias, chained over --blocks N with
 * per-block weights through one Repeat.  FP8: inputs and weights F143 with
 * scale -2; GEMM results, GELU and the carried activation in FP16 (the FP8
 * GEMM's activation operands are cast to F143 first).  FP16: everything FP16.
 * Inputs are standard normal; weights are normal with standard deviation
 * 1/sqrt(fan-in), as a trained layer's are scaled.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/numerics.h"
#include "workloads/workload.h"

typedef struct mlp_options {
    uint32_t batch, blocks, tokens, channels, hidden;
    int fp8;
    uint64_t seed;
} mlp_options;

static const char *const KNOWN[] = {"batch", "blocks", "tokens", "channels", "hidden", "seed", "precision"};

static ipu_status parse(ipu_ctx *ctx, const json_t *o, mlp_options *m)
{
    if (!json_is_object(o))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "mlp options: expected a JSON object");
    IPU_TRY(ipu_options_known(ctx, o, "mlp options", KNOWN, sizeof KNOWN / sizeof *KNOWN));
    IPU_TRY(ipu_option_uint(ctx, o, "batch", 1, 1, 64, "--batch", &m->batch));
    IPU_TRY(ipu_option_uint(ctx, o, "blocks", 1, 1, 64, "--blocks", &m->blocks));
    IPU_TRY(ipu_option_uint(ctx, o, "tokens", 729, 1, 100000, "tokens", &m->tokens));
    IPU_TRY(ipu_option_uint(ctx, o, "channels", 1152, 1, 65535, "channels", &m->channels));
    IPU_TRY(ipu_option_uint(ctx, o, "hidden", 4304, 1, 65535, "hidden", &m->hidden));
    json_t *seed = json_object_get(o, "seed");
    if (seed && (!json_is_integer(seed) || json_integer_value(seed) < 0))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "--seed: expected a non-negative integer");
    m->seed = seed ? (uint64_t)json_integer_value(seed) : 0;
    json_t *given = json_object_get(o, "precision");
    const char *precision = json_string_value(given);
    if (given && !precision)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "--precision: expected fp8 or fp16 as a string");
    if (precision && strcmp(precision, "fp8") && strcmp(precision, "fp16"))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "--precision: expected fp8 or fp16, got '%s'",
                        precision);
    m->fp8 = !precision || strcmp(precision, "fp8") == 0;
    return IPU_OK;
}

static ipu_status build_graph(ipu_ctx *ctx, const mlp_options *m, ipu_graph *g)
{
    uint32_t rows = m->batch * m->tokens, C = m->channels, H = m->hidden;
    int w8 = m->fp8 ? IPU_DT_F143 : IPU_DT_F16, wscale = m->fp8 ? -2 : 0;
    uint32_t x_in, x, w1, h, gl, g8, w2, y, x_next, out;
    IPU_TRY(ipu_graph_tensor(ctx, g, "x", rows, C, w8, wscale, IPU_ROLE_INPUT, &x_in));
    IPU_TRY(ipu_graph_tensor(ctx, g, "w1", C, H, w8, wscale, IPU_ROLE_PARAM, &w1));
    IPU_TRY(ipu_graph_tensor(ctx, g, "w2", H, C, w8, wscale, IPU_ROLE_PARAM, &w2));
    IPU_TRY(ipu_graph_tensor(ctx, g, "block_in", rows, C, w8, wscale, IPU_ROLE_ACTIVATION, &x));
    IPU_TRY(ipu_graph_tensor(ctx, g, "hidden", rows, H, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &h));
    IPU_TRY(ipu_graph_tensor(ctx, g, "gelu", rows, H, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &gl));
    IPU_TRY(ipu_graph_tensor(ctx, g, "block_out", rows, C, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &y));
    IPU_TRY(ipu_graph_tensor(ctx, g, "y", rows, C, IPU_DT_F16, 0, IPU_ROLE_OUTPUT, &out));
    g->tensors[w1].sequence = g->tensors[w2].sequence = m->blocks;
    uint32_t first = (uint32_t)g->op_count;
    IPU_TRY(ipu_graph_op(ctx, g, IPU_IR_MATMUL, x, w1, h));
    IPU_TRY(ipu_graph_op(ctx, g, IPU_IR_GELU, h, 0, gl));
    if (m->fp8) {
        IPU_TRY(ipu_graph_tensor(ctx, g, "gelu_f8", rows, H, w8, wscale, IPU_ROLE_ACTIVATION, &g8));
        IPU_TRY(ipu_graph_op(ctx, g, IPU_IR_CAST, gl, 0, g8));
    } else {
        g8 = gl;
    }
    IPU_TRY(ipu_graph_op(ctx, g, IPU_IR_MATMUL, g8, w2, y));
    if (m->fp8) {
        IPU_TRY(ipu_graph_tensor(ctx, g, "block_next", rows, C, w8, wscale, IPU_ROLE_ACTIVATION,
                                 &x_next));
        IPU_TRY(ipu_graph_op(ctx, g, IPU_IR_CAST, y, 0, x_next));
    } else {
        x_next = y;
    }
    g->repeat = (ipu_ir_repeat){first, (uint32_t)g->op_count - first, m->blocks, x, x_next, x_in};
    /* The output is the last block's result. */
    IPU_TRY(ipu_graph_op(ctx, g, IPU_IR_COPY, y, 0, out));
    return ipu_graph_validate(ctx, g);
}

ipu_status ipu_mlp_build(ipu_ctx *ctx, const json_t *options, ipu_workload **out)
{
    mlp_options m = {0};
    IPU_TRY(parse(ctx, options, &m));
    ipu_workload *w = ipu_calloc(ctx, 1, sizeof *w);
    if (!w)
        return IPU_NO_MEMORY(ctx);
    strcpy(w->name, "mlp");
    w->seed = m.seed;
    ipu_graph_init(&w->graph);
    ipu_status status = build_graph(ctx, &m, &w->graph);
    w->options_json = status == IPU_OK ? json_dumps(options, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (status == IPU_OK && !w->options_json)
        status = IPU_NO_MEMORY(ctx);
    if (status != IPU_OK) {
        ipu_workload_free(w);
        return status;
    }
    *out = w;
    return IPU_OK;
}
