/* vit.c: the SigLIP (so400m patch14-384-sized) vision transformer
 * workload.  Its input (option "input") is either the patch embeddings
 * x [B*T x C] in FP16 ("embeddings", the default: the host did the patch
 * projection) or the pixel patches [B*T x 588] in FP16 ("patches": 14 x 14
 * x 3 values per token), which the patch projection x = patches . Wp + bp
 * and the learned position embedding (x += pos, pos [T x C] added to every
 * image) turn into x on the device; T = 729 tokens, C = 1152 = 16 heads x
 * 72.  Then `layers` (27) pre-LayerNorm blocks with SigLIP's biases,
 *     h  = x + attention(LN1(x) . Wqkv + bqkv) . Wo + bo
 *     x' = h + (gelu(LN2(h) . W1 + b1) . W2 + b2)      (MLP C -> 4304 -> C)
 * are one Repeat whose carried tensor is the residual stream and whose
 * parameters (LN1/LN2 gamma and beta, Wqkv [C x 3C] fused as [q | k | v]
 * with its bias, Wo, W1, W2 and their biases) are sequences of `layers`
 * members.  After it: the final LayerNorm and SigLIP's MAP head, written as
 * ordinary ops around the MAP_POOL op (one shared query attending over each
 * image's tokens): q = probe . Wq + bq, [k | v] = x . Wkv + bkv (Wkv
 * [C x 2C] fused), pooled = MAP_POOL(q, [k | v]), a = pooled . Wo + bo,
 * y = a + (gelu(LN(a) . W1 + b1) . W2 + b2): the output "embedding"
 * [B x C], one row per image.  Every bias is a biased matmul's [1 x N]
 * FP16 parameter, named after its weight ("wqkv_bias").  LayerNorm epsilon
 * is 1e-6.  Types: weights and the probe F143 with scale -4; activations,
 * biases and the position embedding FP16; LayerNorm parameters FP16.  FP8
 * GEMMs take both operands in FP8, so every activation feeding a GEMM is
 * cast first to F143 with scale -2 (the MLP workload's pattern and scale:
 * values up to 112, normal down to 2^-8; at full size, over the first 3
 * layers, LayerNorm and GELU outputs reach about 6 and attention outputs
 * about 1.4 with medians 0.08 to 0.3; under 3% fall below 2^-8).  Values:
 * inputs (embeddings or patches) and the probe N(0, 1); weights N(0,
 * 1/sqrt(fan-in)); LayerNorm gammas 1 + N(0, 0.1), betas and biases
 * N(0, 0.1); the position embedding N(0, 0.5); counter-based per tensor as
 * the MLP's, so they do not depend on the thread count.  "vit-small" is the
 * same network sized for a 64-tile device: 3 layers, width 256 (4 heads x
 * 64), MLP 1024, 729 tokens by default (the full width's weights, 46 MB
 * for 3 layers and the head, cannot fit in 64 tiles' 37.5 MB of budget).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/numerics.h"
#include "workloads/workload.h"

#define LN_EPSILON 1e-6f
#define WEIGHT_SCALE -4
#define ACT_SCALE -2
/* Pixel values per patch: 14 x 14 pixels x 3 channels. */
#define PATCH_PIXELS (14 * 14 * 3)

typedef struct vit_options {
    uint32_t batch, layers, tokens, channels, hidden, heads, head_dim;
    int patches; /* option "input": "patches" (else "embeddings") */
    uint64_t seed;
} vit_options;

static const char *const KNOWN[] = {"batch",  "layers", "seed",  "tokens", "channels",
                                    "hidden", "heads",  "head_dim", "input"};

static ipu_status parse(ipu_ctx *ctx, const char *name, const json_t *o, vit_options *m)
{
    if (!json_is_object(o))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "vit options: expected a JSON object");
    char what[32];
    snprintf(what, sizeof what, "%s options", name);
    IPU_TRY(ipu_options_known(ctx, o, what, KNOWN, sizeof KNOWN / sizeof *KNOWN));
    int small = strcmp(name, "vit-small") == 0;
    IPU_TRY(ipu_option_uint(ctx, o, "batch", 1, 1, 64, "vit option 'batch'", &m->batch));
    IPU_TRY(ipu_option_uint(ctx, o, "layers", small ? 3 : 27, 1, 64, "vit option 'layers'",
                            &m->layers));
    IPU_TRY(ipu_option_uint(ctx, o, "tokens", 729, 1, 100000, "vit option 'tokens'", &m->tokens));
    IPU_TRY(ipu_option_uint(ctx, o, "hidden", small ? 1024 : 4304, 1, 65535, "vit option 'hidden'",
                            &m->hidden));
    IPU_TRY(ipu_option_uint(ctx, o, "heads", small ? 4 : 16, 1, 1024, "vit option 'heads'", &m->heads));
    IPU_TRY(ipu_option_uint(ctx, o, "head_dim", small ? 64 : 72, 1, 1024, "vit option 'head_dim'",
                            &m->head_dim));
    uint32_t width = m->heads * m->head_dim;
    if (width > 21845)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "%s options: heads x head_dim = %u x %u = %u channels, expected at most 21845", name,
                        m->heads, m->head_dim, width);
    IPU_TRY(ipu_option_uint(ctx, o, "channels", width, 1, 21845, "vit option 'channels'",
                            &m->channels));
    if (m->channels != width)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "%s options: channels %u must equal heads x head_dim = %u x %u = %u", name,
                        m->channels, m->heads, m->head_dim, width);
    if ((uint64_t)m->batch * m->tokens > UINT32_MAX / 4)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "%s options: batch x tokens is too large",
                        name);
    json_t *seed = json_object_get(o, "seed");
    if (seed && (!json_is_integer(seed) || json_integer_value(seed) < 0))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "--seed: expected a non-negative integer");
    m->seed = seed ? (uint64_t)json_integer_value(seed) : 0;
    json_t *input = json_object_get(o, "input");
    const char *kind = json_string_value(input);
    if (input && (!kind || (strcmp(kind, "embeddings") && strcmp(kind, "patches"))))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "--input: expected embeddings or patches, got %s%s%s", kind ? "'" : "a non-string",
                        kind ? kind : "", kind ? "'" : "");
    m->patches = kind && strcmp(kind, "patches") == 0;
    return IPU_OK;
}

/* Shorthands for the builder: tensors by role and type. */
typedef struct builder {
    ipu_ctx *ctx;
    ipu_graph *g;
} builder;

static ipu_status param(builder *b, const char *name, uint32_t rows, uint32_t cols, int dtype,
                        uint32_t members, uint32_t *id)
{
    int scale = dtype == IPU_DT_F143 ? WEIGHT_SCALE : 0;
    IPU_TRY(ipu_graph_tensor(b->ctx, b->g, name, rows, cols, dtype, scale, IPU_ROLE_PARAM, id));
    b->g->tensors[*id].sequence = members;
    return IPU_OK;
}

static ipu_status act(builder *b, const char *name, uint32_t rows, uint32_t cols, uint32_t *id)
{
    return ipu_graph_tensor(b->ctx, b->g, name, rows, cols, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, id);
}

/* out = cast(x) to F143 (scale ACT_SCALE): a GEMM's activation operand. */
static ipu_status to_f8(builder *b, const char *name, uint32_t x, uint32_t *out)
{
    const ipu_ir_tensor *t = &b->g->tensors[x];
    IPU_TRY(ipu_graph_tensor(b->ctx, b->g, name, t->rows, t->cols, IPU_DT_F143, ACT_SCALE,
                             IPU_ROLE_ACTIVATION, out));
    return ipu_graph_op(b->ctx, b->g, IPU_IR_CAST, x, 0, *out);
}

/* The bias of weight w: [1 x N] FP16, "<w>_bias", with w's members. */
static ipu_status bias_of(builder *b, uint32_t w, uint32_t *id)
{
    char name[IPU_IR_NAME];
    const ipu_ir_tensor *t = &b->g->tensors[w];
    snprintf(name, sizeof name, "%.58s_bias", t->name);
    return param(b, name, 1, t->cols, IPU_DT_F16, t->sequence, id);
}

/* out = x . w + w's bias (a new parameter). */
static ipu_status biased(builder *b, uint32_t x, uint32_t w, uint32_t out)
{
    uint32_t bias;
    IPU_TRY(bias_of(b, w, &bias));
    return ipu_graph_matmul_bias(b->ctx, b->g, x, w, bias, out);
}

/* out = LN(x; gamma, beta) cast to F8, then . w + bias: the pre-norm GEMM
 * pattern (tensors <prefix>_ln, <prefix>_ln_f8 and out_name). */
static ipu_status norm_matmul(builder *b, const char *prefix, uint32_t x, uint32_t gamma,
                              uint32_t beta, uint32_t w, const char *out_name, uint32_t *ln,
                              uint32_t *out)
{
    char name[IPU_IR_NAME];
    const ipu_ir_tensor *t = &b->g->tensors[x];
    uint32_t rows = t->rows, cols = t->cols, out_cols = b->g->tensors[w].cols, ln8;
    snprintf(name, sizeof name, "%s_ln", prefix);
    IPU_TRY(act(b, name, rows, cols, ln));
    IPU_TRY(ipu_graph_layernorm(b->ctx, b->g, x, gamma, beta, LN_EPSILON, *ln));
    snprintf(name, sizeof name, "%s_ln_f8", prefix);
    IPU_TRY(to_f8(b, name, *ln, &ln8));
    IPU_TRY(act(b, out_name, rows, out_cols, out));
    return biased(b, ln8, w, *out);
}

/* out = x + (gelu(LN(x) . w1 + b1) . w2 + b2) (out may be an output tensor). */
static ipu_status mlp_block(builder *b, const char *prefix, uint32_t x, uint32_t gamma,
                            uint32_t beta, uint32_t w1, uint32_t w2, uint32_t out)
{
    char name[IPU_IR_NAME];
    const ipu_ir_tensor *t = &b->g->tensors[x];
    uint32_t rows = t->rows, cols = t->cols, ln, hidden, gl, gl8, mlp;
    snprintf(name, sizeof name, "%s_hidden", prefix);
    IPU_TRY(norm_matmul(b, prefix, x, gamma, beta, w1, name, &ln, &hidden));
    snprintf(name, sizeof name, "%s_gelu", prefix);
    IPU_TRY(act(b, name, rows, b->g->tensors[w1].cols, &gl));
    IPU_TRY(ipu_graph_op(b->ctx, b->g, IPU_IR_GELU, hidden, 0, gl));
    snprintf(name, sizeof name, "%s_gelu_f8", prefix);
    IPU_TRY(to_f8(b, name, gl, &gl8));
    snprintf(name, sizeof name, "%s_out", prefix);
    IPU_TRY(act(b, name, rows, cols, &mlp));
    IPU_TRY(biased(b, gl8, w2, mlp));
    return ipu_graph_op(b->ctx, b->g, IPU_IR_ADD, x, mlp, out);
}

static ipu_status build_graph(ipu_ctx *ctx, const vit_options *m, ipu_graph *g)
{
    builder bb = {ctx, g}, *b = &bb;
    uint32_t R = m->batch * m->tokens, C = m->channels, H = m->hidden, L = m->layers;
    uint32_t x_in, x, ln1_g, ln1_b, wqkv, wo, ln2_g, ln2_b, w1, w2;
    if (m->patches) {
        /* x = patches . Wp + bp + pos (pos added to every image's rows). */
        uint32_t patches, patches8, wp, embedded, pos;
        IPU_TRY(ipu_graph_tensor(ctx, g, "patches", R, PATCH_PIXELS, IPU_DT_F16, 0, IPU_ROLE_INPUT, &patches));
        IPU_TRY(to_f8(b, "patches_f8", patches, &patches8));
        IPU_TRY(param(b, "patch_w", PATCH_PIXELS, C, IPU_DT_F143, 1, &wp));
        IPU_TRY(act(b, "patch_embedded", R, C, &embedded));
        IPU_TRY(biased(b, patches8, wp, embedded));
        IPU_TRY(param(b, "pos_embedding", m->tokens, C, IPU_DT_F16, 1, &pos));
        IPU_TRY(act(b, "x", R, C, &x_in));
        IPU_TRY(ipu_graph_op(ctx, g, IPU_IR_ADD, embedded, pos, x_in));
    } else {
        IPU_TRY(ipu_graph_tensor(ctx, g, "x", R, C, IPU_DT_F16, 0, IPU_ROLE_INPUT, &x_in));
    }
    IPU_TRY(param(b, "ln1_gamma", 1, C, IPU_DT_F16, L, &ln1_g));
    IPU_TRY(param(b, "ln1_beta", 1, C, IPU_DT_F16, L, &ln1_b));
    IPU_TRY(param(b, "wqkv", C, 3 * C, IPU_DT_F143, L, &wqkv));
    IPU_TRY(param(b, "wo", C, C, IPU_DT_F143, L, &wo));
    IPU_TRY(param(b, "ln2_gamma", 1, C, IPU_DT_F16, L, &ln2_g));
    IPU_TRY(param(b, "ln2_beta", 1, C, IPU_DT_F16, L, &ln2_b));
    IPU_TRY(param(b, "w1", C, H, IPU_DT_F143, L, &w1));
    IPU_TRY(param(b, "w2", H, C, IPU_DT_F143, L, &w2));
    IPU_TRY(act(b, "residual", R, C, &x));

    /* The layer body: h = x + attention(LN1(x) . Wqkv + bqkv) . Wo + bo; x' = MLP block. */
    uint32_t first = (uint32_t)g->op_count, ln1, qkv, att, att8, proj, h, x_next;
    IPU_TRY(norm_matmul(b, "attn", x, ln1_g, ln1_b, wqkv, "attn_qkv", &ln1, &qkv));
    IPU_TRY(act(b, "attn_heads", R, C, &att));
    IPU_TRY(ipu_graph_attention(ctx, g, qkv, m->tokens, m->heads, m->head_dim, att));
    IPU_TRY(to_f8(b, "attn_heads_f8", att, &att8));
    IPU_TRY(act(b, "attn_out", R, C, &proj));
    IPU_TRY(biased(b, att8, wo, proj));
    IPU_TRY(act(b, "attn_residual", R, C, &h));
    IPU_TRY(ipu_graph_op(ctx, g, IPU_IR_ADD, x, proj, h));
    IPU_TRY(act(b, "block_out", R, C, &x_next));
    IPU_TRY(mlp_block(b, "mlp", h, ln2_g, ln2_b, w1, w2, x_next));
    g->repeat = (ipu_ir_repeat){first, (uint32_t)g->op_count - first, L, x, x_next, x_in};

    /* The final LayerNorm and the MAP head (the last block's result). */
    uint32_t post_g, post_b, probe, wq, wkv, map_wo, map_g, map_b, map_w1, map_w2;
    IPU_TRY(param(b, "post_gamma", 1, C, IPU_DT_F16, 1, &post_g));
    IPU_TRY(param(b, "post_beta", 1, C, IPU_DT_F16, 1, &post_b));
    IPU_TRY(param(b, "map_probe", 1, C, IPU_DT_F143, 1, &probe));
    IPU_TRY(param(b, "map_wq", C, C, IPU_DT_F143, 1, &wq));
    IPU_TRY(param(b, "map_wkv", C, 2 * C, IPU_DT_F143, 1, &wkv));
    IPU_TRY(param(b, "map_wo", C, C, IPU_DT_F143, 1, &map_wo));
    IPU_TRY(param(b, "map_ln_gamma", 1, C, IPU_DT_F16, 1, &map_g));
    IPU_TRY(param(b, "map_ln_beta", 1, C, IPU_DT_F16, 1, &map_b));
    IPU_TRY(param(b, "map_w1", C, H, IPU_DT_F143, 1, &map_w1));
    IPU_TRY(param(b, "map_w2", H, C, IPU_DT_F143, 1, &map_w2));
    uint32_t post, kv, q, pooled, pooled8, pooled_out, y;
    IPU_TRY(norm_matmul(b, "post", x_next, post_g, post_b, wkv, "map_kv", &post, &kv));
    IPU_TRY(act(b, "map_q", 1, C, &q));
    IPU_TRY(biased(b, probe, wq, q));
    IPU_TRY(act(b, "map_pooled", m->batch, C, &pooled));
    IPU_TRY(ipu_graph_map_pool(ctx, g, q, kv, m->tokens, m->heads, m->head_dim, pooled));
    IPU_TRY(to_f8(b, "map_pooled_f8", pooled, &pooled8));
    IPU_TRY(act(b, "map_attn", m->batch, C, &pooled_out));
    IPU_TRY(biased(b, pooled8, map_wo, pooled_out));
    IPU_TRY(ipu_graph_tensor(ctx, g, "embedding", m->batch, C, IPU_DT_F16, 0, IPU_ROLE_OUTPUT, &y));
    IPU_TRY(mlp_block(b, "map_mlp", pooled_out, map_g, map_b, map_w1, map_w2, y));
    return ipu_graph_validate(ctx, g);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Values per the file comment: LayerNorm gammas around 1, betas and biases
 * around 0, the probe standard normal, the position embedding N(0, 0.5),
 * weights 1/sqrt(fan-in), inputs standard normal. */
static void vit_values(const ipu_ir_tensor *t, float *scale, float *offset)
{
    ipu_default_values(t, scale, offset);
    if (ends_with(t->name, "_gamma"))
        *scale = 0.1f, *offset = 1.0f;
    else if (ends_with(t->name, "_beta") || ends_with(t->name, "_bias"))
        *scale = 0.1f;
    else if (strcmp(t->name, "pos_embedding") == 0)
        *scale = 0.5f;
    else if (strcmp(t->name, "map_probe") == 0)
        *scale = 1.0f;
}

ipu_status ipu_vit_build(ipu_ctx *ctx, const char *name, const json_t *options, ipu_workload **out)
{
    vit_options m = {0};
    IPU_TRY(parse(ctx, name, options, &m));
    ipu_workload *w = ipu_calloc(ctx, 1, sizeof *w);
    if (!w)
        return IPU_NO_MEMORY(ctx);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->seed = m.seed;
    w->value_rule = vit_values;
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
