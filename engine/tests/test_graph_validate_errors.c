/* test_graph_validate_errors.c: ipu_graph_validate on graphs built with the
 * ipu_graph_* calls.  A valid graph with every op kind, a Repeat over a
 * parameter sequence, FP8 and FP32 is changed in one place at a time (tensor
 * shape, type, role, size and name; op kind, GELU form, bias, tensor ids,
 * each shape and type rule of each op kind, epsilon; the Repeat region; the
 * data flow): IPU_ERR_INVALID_ARGUMENT naming the op or tensor.  Valid
 * variants pass; too long a tensor name, op names and arities, canonical
 * renumbering and the description writer on a hand-made workload behave as
 * documented.
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
#include "numerics/numerics.h"
#include "support_seed.h"
#include "workloads/workload.h"

enum { X, C, W, N, G, GAMMA, BETA, L, BIAS, S, W2, B2, M, ATT, Q, KV, P, Y, Y8, COUNT };

static void add(ipu_ctx *ctx, ipu_graph *g, const char *name, uint32_t rows, uint32_t cols, int dtype, int role,
                uint32_t want)
{
    uint32_t id = UINT32_MAX;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, name, rows, cols, dtype, dtype == IPU_DT_F143 ? -3 : 0, role, &id));
    assert_int_equal(id, want);
}

/* Ops: 0 n = c.w (the Repeat body, w a 2-member sequence, c from x),
 * 1 g = gelu_erf(n), 2 l = layernorm(g), 3 s = l + bias, 4 m = s.w2 + b2,
 * 5 att = attention(m), 6 p = map_pool(q, kv), 7 y = cast(att) to f32,
 * 8 y8 = cast(p) to f143. */
static void build(ipu_ctx *ctx, ipu_graph *g)
{
    const int F16 = IPU_DT_F16, IN = IPU_ROLE_INPUT, PAR = IPU_ROLE_PARAM, ACT = IPU_ROLE_ACTIVATION;
    ipu_graph_init(g);
    add(ctx, g, "x", 4, 8, F16, IN, X);
    add(ctx, g, "c", 4, 8, F16, ACT, C);
    add(ctx, g, "w", 8, 8, F16, PAR, W);
    add(ctx, g, "n", 4, 8, F16, ACT, N);
    add(ctx, g, "g", 4, 8, F16, ACT, G);
    add(ctx, g, "gamma", 1, 8, F16, PAR, GAMMA);
    add(ctx, g, "beta", 1, 8, F16, PAR, BETA);
    add(ctx, g, "l", 4, 8, F16, ACT, L);
    add(ctx, g, "bias", 1, 8, F16, PAR, BIAS);
    add(ctx, g, "s", 4, 8, F16, ACT, S);
    add(ctx, g, "w2", 8, 24, F16, PAR, W2);
    add(ctx, g, "b2", 1, 24, F16, PAR, B2);
    add(ctx, g, "m", 4, 24, F16, ACT, M);
    add(ctx, g, "att", 4, 8, F16, ACT, ATT);
    add(ctx, g, "q", 1, 8, F16, PAR, Q);
    add(ctx, g, "kv", 4, 16, F16, PAR, KV);
    add(ctx, g, "p", 2, 8, F16, ACT, P);
    add(ctx, g, "y", 4, 8, IPU_DT_F32, IPU_ROLE_OUTPUT, Y);
    add(ctx, g, "y8", 2, 8, IPU_DT_F143, IPU_ROLE_OUTPUT, Y8);
    g->tensors[W].sequence = 2;
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, C, W, N));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_GELU, N, 0, G));
    g->ops[1].form = IPU_GELU_ERF;
    TSEED_OK(ctx, ipu_graph_layernorm(ctx, g, G, GAMMA, BETA, 0.5f, L));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_ADD, L, BIAS, S));
    TSEED_OK(ctx, ipu_graph_matmul_bias(ctx, g, S, W2, B2, M));
    TSEED_OK(ctx, ipu_graph_attention(ctx, g, M, 2, 2, 4, ATT));
    TSEED_OK(ctx, ipu_graph_map_pool(ctx, g, Q, KV, 2, 2, 4, P));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_CAST, ATT, 0, Y));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_CAST, P, 0, Y8));
    g->repeat = (ipu_ir_repeat){0, 1, 2, C, N, X};
}

#define T(i) g->tensors[i]
#define O(i) g->ops[i]
#define R g->repeat
#define F32 IPU_DT_F32
#define SHAPES " (with heads x head_dim and seq rows per image)"
/* X(name, change, a substring of the message) */
#define CASES(X_)                                                                                           \
    X_(zero_rows, T(X).rows = 0, "tensor 0 'x' has shape 0x8, type 1, role 0")                              \
    X_(zero_cols, T(Y).cols = 0, "tensor 17 'y' has shape 4x0, type 0, role 3")                             \
    X_(bad_dtype, T(W).dtype = 9, "tensor 2 'w' has shape 8x8, type 9")                                     \
    X_(role_negative, T(C).role = -1, "tensor 1 'c' has shape 4x8, type 1, role -1")                        \
    X_(role_too_big, T(C).role = 4, "tensor 1 'c' has shape 4x8, type 1, role 4")                           \
    X_(no_members, T(W).sequence = 0, "tensor 2 'w' has shape 8x8")                                         \
    X_(no_name, T(N).name[0] = 0, "tensor 3 '' has shape 4x8")                                              \
    X_(input_sequence, T(X).sequence = 2, "tensor 'x' has 2 members: only parameters may be sequences")     \
    X_(too_large, T(W).rows = 1u << 15; T(W).cols = 1u << 16,                                              \
       "tensor 'w' (32768x65536 f16, 2 members) is larger than 4294967296 bytes")                           \
    X_(duplicate_name, strcpy(T(Y8).name, "x"), "two tensors are named 'x' (tensors 0 and 18)")             \
    X_(kind_negative, O(0).kind = -1, "op 0 has unknown kind -1")                                           \
    X_(kind_too_big, O(8).kind = IPU_IR_KIND_COUNT, "op 8 has unknown kind 8")                              \
    X_(form_on_matmul, O(0).form = IPU_GELU_ERF, "op 0 (matmul) has GELU form 1")                           \
    X_(gelu_form_2, O(1).form = 2, "op 1 (gelu) has GELU form 2")                                           \
    X_(biased_add, O(3).biased = 1, "op 3 (add) is marked biased, which only a matmul may be")              \
    X_(input_out_of_range, O(2).in[2] = COUNT, "op 2 (layernorm) reads tensor 19 of 19")                    \
    X_(output_out_of_range, O(7).out = 99, "op 7 (cast) writes tensor 99 of 19")                            \
    X_(writes_parameter, O(7).out = W, "op 7 (cast) writes parameter 'w', which is read-only")              \
    X_(writes_input, O(1).out = X, "op 1 (gelu) writes input 'x', which is read-only")                      \
    X_(matmul_inner, O(0).in[0] = M, "op 0 (matmul): shapes 4x24 and others -> 4x8 do not agree")           \
    X_(matmul_rows, O(0).out = P, "op 0 (matmul): shapes 4x8 and others -> 2x8 do not agree")               \
    X_(matmul_cols, O(0).in[1] = W2, "op 0 (matmul): shapes 4x8 and others -> 4x8 do not agree")            \
    X_(add_rows, O(3).out = P, "op 3 (add): shapes 4x8 and others -> 2x8 do not agree")                     \
    X_(add_cols, O(3).out = M, "op 3 (add): shapes 4x8 and others -> 4x24 do not agree")                    \
    X_(add_operand_cols, O(3).in[1] = B2, "op 3 (add): shapes 4x8 and others -> 4x8 do not agree")          \
    X_(add_operand_rows, T(BIAS).rows = 3, "op 3 (add): shapes 4x8 and others -> 4x8 do not agree")         \
    X_(gelu_rows, O(1).out = P, "op 1 (gelu): shapes 4x8 -> 2x8 do not agree")                              \
    X_(cast_cols, O(7).out = M, "op 7 (cast): shapes 4x8 -> 4x24 do not agree")                             \
    X_(norm_rows, O(2).out = P, "op 2 (layernorm): shapes 4x8 and others -> 2x8 do not agree")              \
    X_(norm_cols, O(2).out = M, "op 2 (layernorm): shapes 4x8 and others -> 4x24 do not agree")             \
    X_(gamma_rows, T(GAMMA).rows = 2, "op 2 (layernorm): shapes 4x8 and others -> 4x8 do not agree")        \
    X_(gamma_cols, T(GAMMA).cols = 4, "op 2 (layernorm): shapes 4x8 and others -> 4x8 do not agree")        \
    X_(beta_rows, T(BETA).rows = 4, "op 2 (layernorm): shapes 4x8 and others -> 4x8 do not agree")          \
    X_(beta_cols, T(BETA).cols = 16, "op 2 (layernorm): shapes 4x8 and others -> 4x8 do not agree")         \
    X_(attention_no_seq, O(5).seq = 0, "op 5 (attention): shapes 4x24 -> 4x8 do not agree" SHAPES)          \
    X_(attention_no_heads, O(5).heads = 0, "op 5 (attention): shapes 4x24 -> 4x8 do not agree" SHAPES)      \
    X_(attention_huge, O(5).heads = 65536; O(5).head_dim = 65536, "op 5 (attention): shapes 4x24 -> 4x8") \
    X_(attention_seq, O(5).seq = 3, "op 5 (attention): shapes 4x24 -> 4x8 do not agree" SHAPES)             \
    X_(attention_qkv, O(5).head_dim = 8, "op 5 (attention): shapes 4x24 -> 4x8 do not agree" SHAPES)        \
    X_(attention_rows, O(5).out = P, "op 5 (attention): shapes 4x24 -> 2x8 do not agree" SHAPES)            \
    X_(attention_cols, T(ATT).cols = 9, "op 5 (attention): shapes 4x24 -> 4x9 do not agree" SHAPES)         \
    X_(pool_q_rows, O(6).in[0] = ATT, "op 6 (map_pool): shapes 4x8 and others -> 2x8 do not agree" SHAPES) \
    X_(pool_q_cols, O(6).in[0] = B2, "op 6 (map_pool): shapes 1x24 and others -> 2x8 do not agree")         \
    X_(pool_seq, O(6).seq = 3, "op 6 (map_pool): shapes 1x8 and others -> 2x8 do not agree" SHAPES)         \
    X_(pool_kv_cols, O(6).in[1] = M, "op 6 (map_pool): shapes 1x8 and others -> 2x8 do not agree")          \
    X_(pool_rows, O(6).out = ATT, "op 6 (map_pool): shapes 1x8 and others -> 4x8 do not agree")             \
    X_(pool_cols, T(P).cols = 9, "op 6 (map_pool): shapes 1x8 and others -> 2x9 do not agree")              \
    X_(matmul_f8_f16, T(C).dtype = IPU_DT_F143, "op 0 (matmul): inputs f143 x f16 -> f16 is not an AMP")    \
    X_(matmul_f32_in, T(C).dtype = F32; T(W).dtype = F32, "op 0 (matmul): inputs f32 x f32 -> f16 is not")  \
    X_(matmul_f16_f32, T(W).dtype = F32, "op 0 (matmul): inputs f16 x f32 -> f16 is not an AMP")            \
    X_(matmul_f8_out, T(N).dtype = IPU_DT_F152, "op 0 (matmul): inputs f16 x f16 -> f152 is not an AMP")    \
    X_(bias_rows, T(B2).rows = 2, "op 4 (matmul): bias 'b2' is 2x24 f16; expected 1x24 f16")                \
    X_(bias_cols, O(4).in[2] = BIAS, "op 4 (matmul): bias 'bias' is 1x8 f16; expected 1x24 f16")            \
    X_(bias_type, T(B2).dtype = F32, "op 4 (matmul): bias 'b2' is 1x24 f32; expected 1x24 f16")             \
    X_(mixed_output, T(G).dtype = F32, "op 1 (gelu) mixes element types")                                   \
    X_(mixed_second, T(BIAS).dtype = F32, "op 3 (add) mixes element types")                                 \
    X_(mixed_third, T(BETA).dtype = F32, "op 2 (layernorm) mixes element types")                            \
    X_(fp8_pool, T(Q).dtype = T(KV).dtype = T(P).dtype = IPU_DT_F143,                                       \
       "op 6 (map_pool) needs FP16 or FP32 operands")                                                       \
    X_(epsilon_zero, O(2).epsilon = 0.0f, "op 2 (layernorm) has epsilon 0 (expected a positive finite")     \
    X_(epsilon_inf, O(2).epsilon = INFINITY, "op 2 (layernorm) has epsilon inf (expected a positive")       \
    X_(body_past_end, R.first_op = 8; R.op_count = 2, "the Repeat body [8, +2) is outside the 9 ops")       \
    X_(body_empty, R.op_count = 0, "the Repeat body [0, +0) is outside the 9 ops")                          \
    X_(carried_range, R.carried = COUNT, "the Repeat's carried tensors are out of range")                   \
    X_(next_range, R.carried_next = 99, "the Repeat's carried tensors are out of range")                    \
    X_(init_range, R.carried_init = COUNT, "the Repeat's carried tensors are out of range")                 \
    X_(next_rows, R.carried_next = P, "the Repeat carries 'c', but 'p' and 'x' differ in shape or type")    \
    X_(next_cols, R.carried_next = M, "the Repeat carries 'c', but 'm' and 'x' differ in shape or type")    \
    X_(next_type, R.carried_next = Y, "the Repeat carries 'c', but 'y' and 'x' differ in shape or type")    \
    X_(init_rows, R.carried_init = P, "the Repeat carries 'c', but 'n' and 'p' differ in shape or type")    \
    X_(init_cols, R.carried_init = M, "the Repeat carries 'c', but 'n' and 'm' differ in shape or type")    \
    X_(init_type, R.carried_init = Y, "the Repeat carries 'c', but 'n' and 'y' differ in shape or type")    \
    X_(fp8_carried, T(C).dtype = IPU_DT_F143; T(W).dtype = IPU_DT_F152,                                    \
       "the Repeat carries 'c', but 'n' and 'x' differ in shape or type")                                   \
    X_(fp8_carried_152, T(C).dtype = IPU_DT_F152; T(W).dtype = IPU_DT_F143,                                \
       "the Repeat carries 'c', but 'n' and 'x' differ in shape or type")                                   \
    X_(iterations, R.iterations = 3, "parameter sequence 'w' has 2 members for 3 iterations")               \
    X_(own_output, O(1).in[0] = G, "op 1 (gelu) reads its own output 'g'")                                  \
    X_(own_first_input, O(0).in[0] = N, "op 0 (matmul) reads its own output 'n'")                           \
    X_(carried_outside, O(1).in[0] = C, "op 1 (gelu) reads the Repeat's carried 'c' outside the Repeat")    \
    X_(sequence_outside, T(BIAS).sequence = 2, "op 3 (add) reads 'bias', a sequence of 2 members, outside") \
    X_(read_too_early, O(1).in[0] = L, "op 1 (gelu) reads 'l' before any op writes it")                     \
    X_(written_twice, O(7).out = G, "op 7 (cast) writes 'g', which op 1 writes too")                        \
    X_(writes_carried, O(7).out = C, "op 7 (cast) writes the Repeat's carried 'c' (the Repeat sets it")     \
    X_(untouched, extra(ctx, g, IPU_ROLE_PARAM, 0), "no op reads or writes tensor 'spare'")                 \
    X_(init_never_written, extra(ctx, g, IPU_ROLE_ACTIVATION, 1), "no op writes activation 'spare'")        \
    X_(init_output_unwritten, extra(ctx, g, IPU_ROLE_OUTPUT, 1), "no op writes output 'spare'")             \
    X_(carried_input, T(C).role = IPU_ROLE_INPUT, "the Repeat's carried 'c' must be an activation")         \
    X_(next_unwritten, R.carried_next = X, "the Repeat's carried_next 'x' must be written in the Repeat")   \
    X_(next_outside, R.carried_next = G, "the Repeat's carried_next 'g' must be written in the Repeat")     \
    X_(init_is_carried, R.carried_init = C; O(7).in[0] = X, "carried_init 'c' must be a value from before") \
    X_(init_from_body, R.carried_init = G; O(7).in[0] = X, "carried_init 'g' must be a value from before")

/* A 4x8 f16 tensor "spare"; as_init: it becomes carried_init, and the cast
 * to y reads x instead so that x stays in use. */
static void extra(ipu_ctx *ctx, ipu_graph *g, int role, int as_init)
{
    uint32_t id;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "spare", 4, 8, IPU_DT_F16, 0, role, &id));
    if (as_init) {
        R.carried_init = id;
        O(7).in[0] = X;
    }
}

#define FN(name, change, msg)                       \
    static void name(ipu_ctx *ctx, ipu_graph *g) \
    {                                               \
        (void)ctx;                                  \
        change;                                     \
    }
CASES(FN)
#define ROW(name, change, msg) {#name, name, msg},
static const struct {
    const char *name;
    void (*change)(ipu_ctx *, ipu_graph *);
    const char *expect;
} CASE_TABLE[] = {CASES(ROW)};

static void test_validation_refuses_bad_graphs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof CASE_TABLE / sizeof *CASE_TABLE; i++) {
        ipu_ctx *ctx = ipu_ctx_create();
        ipu_graph graph;
        build(ctx, &graph);
        CASE_TABLE[i].change(ctx, &graph);
        ipu_status status = ipu_graph_validate(ctx, &graph);
        const char *msg = ipu_ctx_errmsg(ctx);
        if (status != IPU_ERR_INVALID_ARGUMENT || !strstr(msg, "graph: ") || !strstr(msg, CASE_TABLE[i].expect))
            TSEED_FAIL("%s: %s, message '%s', expected '%s'", CASE_TABLE[i].name, ipu_status_name(status), msg,
                       CASE_TABLE[i].expect);
        ipu_graph_free(&graph);
        ipu_ctx_free(ctx);
    }
}

/* The graph as built; with an FP32 MAP pooling; with a Repeat body after a
 * first op that makes its carried_init; and the empty graph. */
static void test_valid_variants_are_accepted(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_graph g0, *g = &g0;
    build(ctx, g);
    TSEED_OK(ctx, ipu_graph_validate(ctx, g));
    T(Q).dtype = T(KV).dtype = T(P).dtype = F32;
    TSEED_OK(ctx, ipu_graph_validate(ctx, g));
    ipu_graph_free(g);
    uint32_t x, h, c, w, n, y;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "x", 2, 4, IPU_DT_F16, 0, IPU_ROLE_INPUT, &x));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "h", 2, 4, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &h));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "c", 2, 4, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &c));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "w", 4, 4, IPU_DT_F16, 0, IPU_ROLE_PARAM, &w));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "n", 2, 4, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &n));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "y", 2, 4, IPU_DT_F16, 0, IPU_ROLE_OUTPUT, &y));
    T(w).sequence = 3;
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_GELU, x, 0, h));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, c, w, n));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_COPY, n, 0, y));
    R = (ipu_ir_repeat){1, 1, 3, c, n, h};
    TSEED_OK(ctx, ipu_graph_validate(ctx, g));
    /* The same body reading the sequence before the Repeat starts is refused. */
    O(0) = (ipu_ir_op){.kind = IPU_IR_MATMUL, .in = {x, w, 0}, .out = h};
    assert_int_equal(ipu_graph_validate(ctx, g), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "op 0 (matmul) reads 'w', a sequence of 3 members, outside"));
    ipu_ctx_clear_error(ctx);
    /* ... and so is a sequence in a graph without a Repeat. */
    O(1) = (ipu_ir_op){.kind = IPU_IR_COPY, .in = {h, 0, 0}, .out = n};
    R.iterations = 0;
    assert_int_equal(ipu_graph_validate(ctx, g), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "op 0 (matmul) reads 'w', a sequence of 3 members, outside"));
    ipu_ctx_clear_error(ctx);
    ipu_graph_free(g);
    TSEED_OK(ctx, ipu_graph_validate(ctx, g));
    ipu_ctx_free(ctx);
}

/* An FP8 carried tensor: c = x before the body, n = c.w, c8 = cast(n) is
 * carried_next.  The Repeat copies bytes, so x, c and c8 must share their
 * scale: each one changed alone is refused, naming all three scales. */
static void test_fp8_carried_scales_agree(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_graph g0, *g = &g0;
    ipu_graph_init(g);
    const int F8 = IPU_DT_F143;
    uint32_t x, c, w, n, c8, y;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "x", 2, 4, F8, -2, IPU_ROLE_INPUT, &x));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "c", 2, 4, F8, -2, IPU_ROLE_ACTIVATION, &c));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "w", 4, 4, F8, -2, IPU_ROLE_PARAM, &w));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "n", 2, 4, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &n));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "c8", 2, 4, F8, -2, IPU_ROLE_ACTIVATION, &c8));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "y", 2, 4, IPU_DT_F16, 0, IPU_ROLE_OUTPUT, &y));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, c, w, n));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_CAST, n, 0, c8));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_COPY, n, 0, y));
    R = (ipu_ir_repeat){0, 2, 2, c, c8, x};
    TSEED_OK(ctx, ipu_graph_validate(ctx, g));
    const uint32_t changed[3] = {x, c, c8};
    const char *expect[3] = {"the Repeat carries 'c' (scale -2), but 'c8' has scale -2 and 'x' scale 0",
                             "the Repeat carries 'c' (scale 0), but 'c8' has scale -2 and 'x' scale -2",
                             "the Repeat carries 'c' (scale -2), but 'c8' has scale 0 and 'x' scale -2"};
    for (int i = 0; i < 3; i++) {
        T(changed[i]).scale = 0;
        assert_int_equal(ipu_graph_validate(ctx, g), IPU_ERR_INVALID_ARGUMENT);
        if (!strstr(ipu_ctx_errmsg(ctx), expect[i]))
            TSEED_FAIL("scale of tensor %u: message '%s', expected '%s'", changed[i], ipu_ctx_errmsg(ctx), expect[i]);
        ipu_ctx_clear_error(ctx);
        T(changed[i]).scale = -2;
    }
    /* FP16 ignores the scale field, so an FP16 carry may differ in it. */
    ipu_graph_free(g);
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "x", 2, 4, IPU_DT_F16, 3, IPU_ROLE_INPUT, &x));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "c", 2, 4, IPU_DT_F16, 0, IPU_ROLE_ACTIVATION, &c));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "w", 4, 4, IPU_DT_F16, 0, IPU_ROLE_PARAM, &w));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "y", 2, 4, IPU_DT_F16, 0, IPU_ROLE_OUTPUT, &y));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, c, w, y));
    R = (ipu_ir_repeat){0, 1, 2, c, y, x};
    TSEED_OK(ctx, ipu_graph_validate(ctx, g));
    ipu_graph_free(g);
    ipu_ctx_free(ctx);
}

static void test_names_kinds_and_arity(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_graph g;
    ipu_graph_init(&g);
    char name[IPU_IR_NAME + 1];
    memset(name, 'a', IPU_IR_NAME);
    name[IPU_IR_NAME] = 0;
    uint32_t id = 77;
    assert_int_equal(ipu_graph_tensor(ctx, &g, name, 1, 1, IPU_DT_F16, 0, IPU_ROLE_INPUT, &id),
                     IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "is too long"));
    assert_int_equal(g.tensor_count, 0);
    assert_int_equal(id, 77);
    name[IPU_IR_NAME - 1] = 0; /* 63 characters fit */
    TSEED_OK(ctx, ipu_graph_tensor(ctx, &g, name, 1, 1, IPU_DT_F16, 0, IPU_ROLE_INPUT, &id));
    assert_string_equal(g.tensors[id].name, name);
    ipu_graph_free(&g);
    const char *names[] = {"matmul", "gelu", "add", "cast", "copy", "layernorm", "attention", "map_pool"};
    const int arity[] = {2, 1, 2, 1, 1, 3, 1, 2};
    for (int k = 0; k < IPU_IR_KIND_COUNT; k++) {
        assert_string_equal(ipu_ir_op_name(k), names[k]);
        assert_int_equal(ipu_ir_op_arity(k), arity[k]);
    }
    assert_string_equal(ipu_ir_op_name(-1), "unknown");
    assert_string_equal(ipu_ir_op_name(IPU_IR_KIND_COUNT), "unknown");
    assert_int_equal(ipu_ir_op_arity(-1), 0);
    assert_int_equal(ipu_ir_op_arity(IPU_IR_KIND_COUNT), 0);
    ipu_ctx_free(ctx);
}

/* Declared y, spare, w, x with y = x.w: renumbered x, w, y, spare. */
static void test_canonical_order(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_graph g;
    ipu_graph_init(&g);
    TSEED_OK(ctx, ipu_graph_canonical_order(ctx, &g, NULL)); /* nothing to renumber */
    uint32_t y, spare, w, x, moved[4];
    TSEED_OK(ctx, ipu_graph_tensor(ctx, &g, "y", 2, 4, IPU_DT_F16, 0, IPU_ROLE_OUTPUT, &y));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, &g, "spare", 1, 1, IPU_DT_F16, 0, IPU_ROLE_PARAM, &spare));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, &g, "w", 4, 4, IPU_DT_F16, 0, IPU_ROLE_PARAM, &w));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, &g, "x", 2, 4, IPU_DT_F16, 0, IPU_ROLE_INPUT, &x));
    TSEED_OK(ctx, ipu_graph_op(ctx, &g, IPU_IR_MATMUL, x, w, y));
    TSEED_OK(ctx, ipu_graph_canonical_order(ctx, &g, moved));
    const uint32_t expect[4] = {2, 3, 1, 0};
    const char *order[4] = {"x", "w", "y", "spare"};
    for (int t = 0; t < 4; t++) {
        assert_int_equal(moved[t], expect[t]);
        assert_string_equal(g.tensors[t].name, order[t]);
    }
    assert_int_equal(g.ops[0].in[0], 0);
    assert_int_equal(g.ops[0].in[1], 1);
    assert_int_equal(g.ops[0].out, 2);
    ipu_graph_free(&g);
    /* Ids of tensors that do not exist stay as they are, so the validator
     * still names them after renumbering. */
    uint32_t a, b;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, &g, "a", 2, 2, IPU_DT_F16, 0, IPU_ROLE_INPUT, &a));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, &g, "b", 2, 2, IPU_DT_F16, 0, IPU_ROLE_OUTPUT, &b));
    TSEED_OK(ctx, ipu_graph_op(ctx, &g, IPU_IR_COPY, 9, 0, 8));
    g.repeat = (ipu_ir_repeat){0, 1, 2, 5, 6, 7};
    TSEED_OK(ctx, ipu_graph_canonical_order(ctx, &g, moved));
    assert_int_equal(moved[a], 0);
    assert_int_equal(moved[b], 1);
    assert_int_equal(g.ops[0].in[0], 9);
    assert_int_equal(g.ops[0].out, 8);
    assert_int_equal(g.repeat.carried, 5);
    assert_int_equal(g.repeat.carried_next, 6);
    assert_int_equal(g.repeat.carried_init, 7);
    assert_int_equal(ipu_graph_validate(ctx, &g), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "op 0 (copy) reads tensor 9 of 2"));
    ipu_graph_free(&g);
    ipu_ctx_free(ctx);
}

/* The writer on a hand-made workload: no value specs (no "values"), no
 * options ({}), no Repeat (null), a type and roles it cannot name
 * ("unknown"); a tensor name that is not UTF-8 and options that are not
 * JSON give no description. */
static void test_describe_hand_made_workload(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *wl = calloc(1, sizeof *wl);
    assert_non_null(wl);
    snprintf(wl->name, sizeof wl->name, "hand");
    ipu_graph *g = &wl->graph;
    ipu_graph_init(g);
    uint32_t x, w, y;
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "x", 2, 4, IPU_DT_F16, 0, IPU_ROLE_INPUT, &x));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "w", 4, 4, IPU_DT_F16, 0, IPU_ROLE_PARAM, &w));
    TSEED_OK(ctx, ipu_graph_tensor(ctx, g, "y", 2, 4, IPU_DT_F16, 0, IPU_ROLE_OUTPUT, &y));
    TSEED_OK(ctx, ipu_graph_op(ctx, g, IPU_IR_MATMUL, x, w, y));
    json_t *d = ipu_workload_describe(wl);
    assert_non_null(d);
    assert_int_equal(json_object_size(json_object_get(d, "options")), 0);
    assert_true(json_is_object(json_object_get(d, "options")));
    assert_true(json_is_null(json_object_get(d, "repeat")));
    json_t *tx = json_array_get(json_object_get(d, "tensors"), 0);
    assert_string_equal(json_string_value(json_object_get(tx, "role")), "input");
    assert_null(json_object_get(tx, "values"));
    json_decref(d);
    T(y).dtype = 9;
    T(y).role = 7;
    T(w).role = -1;
    d = ipu_workload_describe(wl);
    assert_non_null(d);
    json_t *ty = json_array_get(json_object_get(d, "tensors"), 2);
    assert_string_equal(json_string_value(json_object_get(ty, "dtype")), "unknown");
    assert_string_equal(json_string_value(json_object_get(ty, "role")), "unknown");
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(d, "tensors"), 1), "role")),
                        "unknown");
    json_decref(d);
    /* A name JSON cannot hold (not UTF-8): no description. */
    T(x).name[0] = (char)0xff;
    assert_null(ipu_workload_describe(wl));
    T(x).name[0] = 'x';
    wl->options_json = strdup("{not json");
    assert_null(ipu_workload_describe(wl));
    ipu_workload_free(wl);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_graph_validate_errors");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation_refuses_bad_graphs),
        cmocka_unit_test(test_valid_variants_are_accepted),
        cmocka_unit_test(test_fp8_carried_scales_agree),
        cmocka_unit_test(test_names_kinds_and_arity),
        cmocka_unit_test(test_canonical_order),
        cmocka_unit_test(test_describe_hand_made_workload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
