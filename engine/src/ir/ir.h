/* ir.h: the workload graph.  Tensors are 2-D (rows x cols, row-major on the
 * host) with an element type, an FP8 scale and a role; ops are matmul, GELU
 * (tanh approximation, ipu_num_gelu), add, cast, copy, and the transformer
 * ops LayerNorm, attention and MAP pooling (defined at ipu_op_kind: every
 * `seq` consecutive rows are one image, so a batch is B * seq rows and
 * attention never crosses images).  An op reads up to three inputs (in[0],
 * in[1], in[2]; ipu_ir_op_inputs says how many: a biased matmul reads its
 * bias as the third).  A graph may hold one Repeat
 * region: its body ops run `iterations` times; parameters used in the body
 * are sequences with one member per iteration; a carried tensor is read by
 * the body and rewritten at the end of every iteration (its initial value is
 * copied from a tensor outside the body).
 */
#ifndef IPU_IR_H
#define IPU_IR_H

#include <stdint.h>

#include "core/core.h"

typedef enum ipu_role {
    IPU_ROLE_INPUT = 0,
    IPU_ROLE_PARAM = 1,
    IPU_ROLE_ACTIVATION = 2,
    IPU_ROLE_OUTPUT = 3
} ipu_role;

typedef enum ipu_op_kind {
    /* out = in0 [M x K] . in1 [K x N]; a biased matmul then adds in2 [1 x N]
     * (out's type) to every row: out = round(round(in0 . in1) + in2). */
    IPU_IR_MATMUL = 0,
    IPU_IR_GELU = 1, /* out = gelu(in0), in the op's form (enum ipu_gelu_form: tanh or erf) */
    /* out = in0 + in1; in1 may have fewer rows P (R a multiple of P): row r
     * of in0 adds row r mod P (a position embedding added to every image). */
    IPU_IR_ADD = 2,
    IPU_IR_CAST = 3,   /* out = in0 converted to out's type and scale */
    IPU_IR_COPY = 4,   /* out = in0 */
    /* out [R x C] = LayerNorm of each row of in0 [R x C] with gamma in1 [1 x C]
     * and beta in2 [1 x C]: (x - mean) / sqrt(var + epsilon) * gamma + beta,
     * biased variance. */
    IPU_IR_LAYERNORM = 5,
    /* Self-attention of fused projections: in0 [R x 3C] holds [q | k | v]
     * (C = heads * head_dim; head h's q at columns h*d .. h*d+d-1, its k at
     * C + h*d, its v at 2C + h*d); out [R x C], head h at columns h*d.. of
     * softmax(q k^T / sqrt(d)) v over the `seq` rows of the same image (R is a
     * multiple of seq; no mask). */
    IPU_IR_ATTENTION = 6,
    /* Multihead attention pooling (the core of SigLIP's MAP head): one query
     * in0 [1 x C], shared by every image, attends per head over the seq rows
     * of each image of in1 [R x 2C] = [k | v] (head layout as ATTENTION);
     * out [R / seq x C], one row per image.  The projections, out projection,
     * LayerNorm and MLP of the head are ordinary ops around it. */
    IPU_IR_MAP_POOL = 7
} ipu_op_kind;

#define IPU_IR_KIND_COUNT 8

#define IPU_IR_NAME 64
/* The largest tensor (all members): no device holds more. */
#define IPU_IR_MAX_TENSOR_BYTES (1ull << 32)
/* The most tensors and ops a graph holds: 2^20, far above any real model
 * (a 27-layer ViT has a few hundred tensors; exported ONNX graphs of the
 * largest models stay near 10^5 nodes) and far below the uint32 ids and the
 * UINT32_MAX the stages use for "none".  At the limit the graph's arrays
 * take about 140 MB (88 bytes a tensor, 44 an op). */
#define IPU_IR_MAX_TENSORS (1u << 20)
#define IPU_IR_MAX_OPS (1u << 20)

typedef struct ipu_ir_tensor {
    char name[IPU_IR_NAME];
    uint32_t rows, cols;
    int dtype;         /* ipu_dtype */
    int scale;         /* FP8 scale exponent (0 for other types) */
    int role;          /* ipu_role */
    uint32_t sequence; /* parameters in a Repeat body: members (1 otherwise) */
} ipu_ir_tensor;

typedef struct ipu_ir_op {
    int kind;
    uint32_t in[3]; /* ipu_ir_op_inputs(op) inputs; unused ones are 0 */
    uint32_t out;
    int biased;               /* MATMUL: in[2] is a bias */
    int form;                 /* GELU: enum ipu_gelu_form (0: the tanh approximation) */
    float epsilon;            /* LAYERNORM */
    uint32_t heads, head_dim; /* ATTENTION, MAP_POOL */
    uint32_t seq;             /* ATTENTION, MAP_POOL: rows of one image */
} ipu_ir_op;

typedef struct ipu_ir_repeat {
    uint32_t first_op, op_count; /* the body: ops [first_op, first_op + op_count) */
    uint32_t iterations;         /* 0: the graph has no Repeat */
    uint32_t carried;            /* tensor the body reads ... */
    uint32_t carried_next;       /* ... and the body's value for the next iteration */
    uint32_t carried_init;       /* value of carried before the first iteration */
} ipu_ir_repeat;

typedef struct ipu_graph {
    ipu_ir_tensor *tensors;
    size_t tensor_count, tensor_capacity;
    ipu_ir_op *ops;
    size_t op_count, op_capacity;
    ipu_ir_repeat repeat;
} ipu_graph;

void ipu_graph_init(ipu_graph *g);
void ipu_graph_free(ipu_graph *g);
/* Room for tensors and ops more of each (a reader that knows its counts
 * allocates once); more than IPU_IR_MAX_TENSORS or IPU_IR_MAX_OPS in all
 * fails with IPU_ERR_INVALID_ARGUMENT, as ipu_graph_tensor and
 * ipu_graph_add_op do past them. */
ipu_status ipu_graph_reserve(ipu_ctx *ctx, ipu_graph *g, size_t tensors, size_t ops);
ipu_status ipu_graph_tensor(ipu_ctx *ctx, ipu_graph *g, const char *name, uint32_t rows,
                            uint32_t cols, int dtype, int scale, int role, uint32_t *id);
/* A matmul, GELU, add, cast or copy (in1 is ignored by one-input kinds). */
ipu_status ipu_graph_op(ipu_ctx *ctx, ipu_graph *g, int kind, uint32_t in0, uint32_t in1,
                        uint32_t out);
/* out = a . w + bias (bias [1 x N] in out's type). */
ipu_status ipu_graph_matmul_bias(ipu_ctx *ctx, ipu_graph *g, uint32_t a, uint32_t w, uint32_t bias,
                                 uint32_t out);
/* Any op, its fields as given (checked by ipu_graph_validate). */
ipu_status ipu_graph_add_op(ipu_ctx *ctx, ipu_graph *g, const ipu_ir_op *op);
ipu_status ipu_graph_layernorm(ipu_ctx *ctx, ipu_graph *g, uint32_t x, uint32_t gamma,
                               uint32_t beta, float epsilon, uint32_t out);
ipu_status ipu_graph_attention(ipu_ctx *ctx, ipu_graph *g, uint32_t qkv, uint32_t seq,
                               uint32_t heads, uint32_t head_dim, uint32_t out);
ipu_status ipu_graph_map_pool(ipu_ctx *ctx, ipu_graph *g, uint32_t q, uint32_t kv, uint32_t seq,
                              uint32_t heads, uint32_t head_dim, uint32_t out);
/* Renumber the tensors in the order the ops first touch them (each op's
 * inputs in order, then its output; tensors no op touches last, as they
 * were), so that a graph's numbering follows from its ops alone: a builder's
 * graph and the same graph read from elsewhere number alike.  moved_to
 * (tensor_count entries) receives each old id's new one. */
ipu_status ipu_graph_canonical_order(ipu_ctx *ctx, ipu_graph *g, uint32_t *moved_to);
/* Check shapes, types, names, the data flow (ir.c: check_dataflow) and the
 * Repeat region; messages name the op or tensor. */
ipu_status ipu_graph_validate(ipu_ctx *ctx, const ipu_graph *g);
/* Bytes of one member of a tensor on the host (rows * cols * element size). */
uint64_t ipu_ir_tensor_bytes(const ipu_ir_tensor *t);
const char *ipu_ir_op_name(int kind);
/* The number of inputs an op kind reads (0 for an unknown kind), and the
 * number this op reads (its kind's, plus a matmul's bias). */
int ipu_ir_op_arity(int kind);
int ipu_ir_op_inputs(const ipu_ir_op *op);
/* The op that gives tensor t its home: its producer, else its first reader
 * (graph inputs, parameters and the carried value are homed where they are
 * first needed); UINT32_MAX when no op touches it. */
uint32_t ipu_ir_homing_op(const ipu_graph *g, uint32_t t);

#endif
