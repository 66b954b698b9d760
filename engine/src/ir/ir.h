/* ir.h: the workload graph.  Tensors are 2-D (rows x cols, row-major on the
 * host) with an element type, an FP8 scale and a role; ops are matmul, GELU
 * (tanh approximation, ipu_num_gelu), add, cast and copy.  A graph may hold one Repeat
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
    IPU_IR_MATMUL = 0, /* out = in0 [M x K] . in1 [K x N] */
    IPU_IR_GELU = 1,   /* out = gelu(in0) */
    IPU_IR_ADD = 2,    /* out = in0 + in1 */
    IPU_IR_CAST = 3,   /* out = in0 converted to out's type and scale */
    IPU_IR_COPY = 4    /* out = in0 */
} ipu_op_kind;

#define IPU_IR_NAME 64

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
    uint32_t in[2];
    uint32_t out;
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
ipu_status ipu_graph_tensor(ipu_ctx *ctx, ipu_graph *g, const char *name, uint32_t rows,
                            uint32_t cols, int dtype, int scale, int role, uint32_t *id);
ipu_status ipu_graph_op(ipu_ctx *ctx, ipu_graph *g, int kind, uint32_t in0, uint32_t in1,
                        uint32_t out);
/* Check shapes, types and the Repeat region; messages name the op or tensor. */
ipu_status ipu_graph_validate(ipu_ctx *ctx, const ipu_graph *g);
/* Bytes of one member of a tensor on the host (rows * cols * element size). */
uint64_t ipu_ir_tensor_bytes(const ipu_ir_tensor *t);
const char *ipu_ir_op_name(int kind);

#endif
