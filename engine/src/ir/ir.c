/* ir.c: building and validating workload graphs (see ir.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "numerics/numerics.h"

void ipu_graph_init(ipu_graph *g) { memset(g, 0, sizeof *g); }

void ipu_graph_free(ipu_graph *g)
{
    free(g->tensors);
    free(g->ops);
    memset(g, 0, sizeof *g);
}

ipu_status ipu_graph_tensor(ipu_ctx *ctx, ipu_graph *g, const char *name, uint32_t rows,
                            uint32_t cols, int dtype, int scale, int role, uint32_t *id)
{
    if (strlen(name) >= IPU_IR_NAME)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "tensor name '%s' is too long", name);
    IPU_TRY(IPU_GROW(ctx, g->tensors, g->tensor_count, g->tensor_capacity));
    ipu_ir_tensor *t = &g->tensors[g->tensor_count];
    memset(t, 0, sizeof *t);
    strcpy(t->name, name);
    t->rows = rows;
    t->cols = cols;
    t->dtype = dtype;
    t->scale = scale;
    t->role = role;
    t->sequence = 1;
    *id = (uint32_t)g->tensor_count++;
    return IPU_OK;
}

ipu_status ipu_graph_add_op(ipu_ctx *ctx, ipu_graph *g, const ipu_ir_op *op)
{
    IPU_TRY(IPU_GROW(ctx, g->ops, g->op_count, g->op_capacity));
    g->ops[g->op_count++] = *op;
    return IPU_OK;
}

ipu_status ipu_graph_op(ipu_ctx *ctx, ipu_graph *g, int kind, uint32_t in0, uint32_t in1,
                        uint32_t out)
{
    ipu_ir_op op = {.kind = kind, .in = {in0, in1, 0}, .out = out};
    return ipu_graph_add_op(ctx, g, &op);
}

ipu_status ipu_graph_matmul_bias(ipu_ctx *ctx, ipu_graph *g, uint32_t a, uint32_t w, uint32_t bias,
                                 uint32_t out)
{
    ipu_ir_op op = {.kind = IPU_IR_MATMUL, .in = {a, w, bias}, .out = out, .biased = 1};
    return ipu_graph_add_op(ctx, g, &op);
}

ipu_status ipu_graph_layernorm(ipu_ctx *ctx, ipu_graph *g, uint32_t x, uint32_t gamma,
                               uint32_t beta, float epsilon, uint32_t out)
{
    ipu_ir_op op = {.kind = IPU_IR_LAYERNORM, .in = {x, gamma, beta}, .out = out,
                    .epsilon = epsilon};
    return ipu_graph_add_op(ctx, g, &op);
}

ipu_status ipu_graph_attention(ipu_ctx *ctx, ipu_graph *g, uint32_t qkv, uint32_t seq,
                               uint32_t heads, uint32_t head_dim, uint32_t out)
{
    ipu_ir_op op = {.kind = IPU_IR_ATTENTION, .in = {qkv, 0, 0}, .out = out, .heads = heads,
                    .head_dim = head_dim, .seq = seq};
    return ipu_graph_add_op(ctx, g, &op);
}

ipu_status ipu_graph_map_pool(ipu_ctx *ctx, ipu_graph *g, uint32_t q, uint32_t kv, uint32_t seq,
                              uint32_t heads, uint32_t head_dim, uint32_t out)
{
    ipu_ir_op op = {.kind = IPU_IR_MAP_POOL, .in = {q, kv, 0}, .out = out, .heads = heads,
                    .head_dim = head_dim, .seq = seq};
    return ipu_graph_add_op(ctx, g, &op);
}

uint64_t ipu_ir_tensor_bytes(const ipu_ir_tensor *t)
{
    return (uint64_t)t->rows * t->cols * ipu_dtype_size(t->dtype);
}

const char *ipu_ir_op_name(int kind)
{
    static const char *names[IPU_IR_KIND_COUNT] = {"matmul", "gelu",      "add",       "cast",
                                                   "copy",   "layernorm", "attention", "map_pool"};
    return kind >= 0 && kind < IPU_IR_KIND_COUNT ? names[kind] : "unknown";
}

int ipu_ir_op_arity(int kind)
{
    static const int inputs[IPU_IR_KIND_COUNT] = {2, 1, 2, 1, 1, 3, 1, 2};
    return kind >= 0 && kind < IPU_IR_KIND_COUNT ? inputs[kind] : 0;
}

int ipu_ir_op_inputs(const ipu_ir_op *op)
{
    return ipu_ir_op_arity(op->kind) + (op->kind == IPU_IR_MATMUL && op->biased);
}

static int f16_or_f32(int dtype) { return dtype == IPU_DT_F16 || dtype == IPU_DT_F32; }

/* The shapes of a LayerNorm, attention or MAP pooling op (in[] in range). */
static int transformer_shapes_ok(const ipu_graph *g, const ipu_ir_op *op)
{
    const ipu_ir_tensor *a = &g->tensors[op->in[0]], *o = &g->tensors[op->out];
    if (op->kind == IPU_IR_LAYERNORM) {
        const ipu_ir_tensor *gamma = &g->tensors[op->in[1]], *beta = &g->tensors[op->in[2]];
        return o->rows == a->rows && o->cols == a->cols && gamma->rows == 1 &&
               gamma->cols == a->cols && beta->rows == 1 && beta->cols == a->cols;
    }
    uint64_t c = (uint64_t)op->heads * op->head_dim;
    if (!op->seq || !c || c > UINT32_MAX / 3)
        return 0;
    if (op->kind == IPU_IR_ATTENTION)
        return a->rows % op->seq == 0 && a->cols == 3 * c && o->rows == a->rows && o->cols == c;
    const ipu_ir_tensor *kv = &g->tensors[op->in[1]];
    return a->rows == 1 && a->cols == c && kv->rows % op->seq == 0 && kv->cols == 2 * c &&
           o->rows == kv->rows / op->seq && o->cols == c;
}

ipu_status ipu_graph_validate(ipu_ctx *ctx, const ipu_graph *g)
{
#define BAD(...) IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "graph: " __VA_ARGS__)
    for (size_t i = 0; i < g->tensor_count; i++) {
        const ipu_ir_tensor *t = &g->tensors[i];
        if (!t->rows || !t->cols || !ipu_dtype_size(t->dtype) || t->role < 0 ||
            t->role > IPU_ROLE_OUTPUT || !t->sequence)
            return BAD("tensor '%s' has shape %ux%u, type %d, role %d", t->name, t->rows, t->cols,
                       t->dtype, t->role);
    }
    for (size_t i = 0; i < g->op_count; i++) {
        const ipu_ir_op *op = &g->ops[i];
        if (op->kind < 0 || op->kind >= IPU_IR_KIND_COUNT)
            return BAD("op %zu has unknown kind %d", i, op->kind);
        if (op->biased && op->kind != IPU_IR_MATMUL)
            return BAD("op %zu (%s) is marked biased, which only a matmul may be", i,
                       ipu_ir_op_name(op->kind));
        int inputs = ipu_ir_op_inputs(op);
        for (int k = 0; k < inputs; k++)
            if (op->in[k] >= g->tensor_count)
                return BAD("op %zu (%s) reads tensor %u of %zu", i, ipu_ir_op_name(op->kind),
                           op->in[k], g->tensor_count);
        if (op->out >= g->tensor_count)
            return BAD("op %zu (%s) writes tensor %u of %zu", i, ipu_ir_op_name(op->kind), op->out,
                       g->tensor_count);
        const ipu_ir_tensor *a = &g->tensors[op->in[0]], *o = &g->tensors[op->out];
        const ipu_ir_tensor *b = inputs >= 2 ? &g->tensors[op->in[1]] : NULL;
        const ipu_ir_tensor *c = inputs >= 3 && op->kind != IPU_IR_MATMUL ? &g->tensors[op->in[2]] : NULL;
        if (o->role == IPU_ROLE_INPUT || o->role == IPU_ROLE_PARAM)
            return BAD("op %zu (%s) writes %s '%s', which is read-only", i,
                       ipu_ir_op_name(op->kind), o->role == IPU_ROLE_INPUT ? "input" : "parameter",
                       o->name);
        int shape_ok;
        if (op->kind == IPU_IR_MATMUL)
            shape_ok = a->cols == b->rows && o->rows == a->rows && o->cols == b->cols;
        else if (op->kind >= IPU_IR_LAYERNORM)
            shape_ok = transformer_shapes_ok(g, op);
        else if (op->kind == IPU_IR_ADD)
            shape_ok = o->rows == a->rows && o->cols == a->cols && b->cols == a->cols &&
                       a->rows % b->rows == 0;
        else
            shape_ok = o->rows == a->rows && o->cols == a->cols;
        if (!shape_ok)
            return BAD("op %zu (%s): shapes %ux%u%s -> %ux%u do not agree%s", i,
                       ipu_ir_op_name(op->kind), a->rows, a->cols, b ? " and others" : "", o->rows,
                       o->cols,
                       op->kind == IPU_IR_ATTENTION || op->kind == IPU_IR_MAP_POOL
                           ? " (with heads x head_dim and seq rows per image)"
                           : "");
        if (op->kind == IPU_IR_MATMUL) {
            int f8 = a->dtype == IPU_DT_F143 || a->dtype == IPU_DT_F152;
            int b8 = b->dtype == IPU_DT_F143 || b->dtype == IPU_DT_F152;
            if (f8 != b8 || (!f8 && (a->dtype != IPU_DT_F16 || b->dtype != IPU_DT_F16)) ||
                (o->dtype != IPU_DT_F16 && o->dtype != IPU_DT_F32))
                return BAD("op %zu (matmul): inputs %s x %s -> %s is not an AMP combination "
                           "(both FP8 or both FP16 in; FP16 or FP32 out)",
                           i, ipu_dtype_name(a->dtype), ipu_dtype_name(b->dtype),
                           ipu_dtype_name(o->dtype));
            const ipu_ir_tensor *bias = op->biased ? &g->tensors[op->in[2]] : NULL;
            if (bias && (bias->rows != 1 || bias->cols != o->cols || bias->dtype != o->dtype))
                return BAD("op %zu (matmul): bias '%s' is %ux%u %s; expected 1x%u %s (the output's "
                           "columns and type)",
                           i, bias->name, bias->rows, bias->cols, ipu_dtype_name(bias->dtype), o->cols,
                           ipu_dtype_name(o->dtype));
        } else if (op->kind != IPU_IR_CAST &&
                   (o->dtype != a->dtype || (b && b->dtype != a->dtype) ||
                    (c && c->dtype != a->dtype))) {
            return BAD("op %zu (%s) mixes element types", i, ipu_ir_op_name(op->kind));
        }
        if ((op->kind == IPU_IR_GELU || op->kind == IPU_IR_ADD || op->kind >= IPU_IR_LAYERNORM) &&
            !f16_or_f32(a->dtype))
            return BAD("op %zu (%s) needs FP16 or FP32 operands", i, ipu_ir_op_name(op->kind));
        if (op->kind == IPU_IR_LAYERNORM && !(op->epsilon > 0.0f && isfinite(op->epsilon)))
            return BAD("op %zu (layernorm) has epsilon %g (expected a positive finite value)", i,
                       (double)op->epsilon);
    }
    const ipu_ir_repeat *r = &g->repeat;
    if (r->iterations) {
        if (r->first_op + (uint64_t)r->op_count > g->op_count || !r->op_count)
            return BAD("the Repeat body [%u, +%u) is outside the %zu ops", r->first_op, r->op_count,
                       g->op_count);
        if (r->carried >= g->tensor_count || r->carried_next >= g->tensor_count ||
            r->carried_init >= g->tensor_count)
            return BAD("the Repeat's carried tensors are out of range");
        const ipu_ir_tensor *c = &g->tensors[r->carried], *n = &g->tensors[r->carried_next],
                            *i0 = &g->tensors[r->carried_init];
        if (c->rows != n->rows || c->cols != n->cols || c->dtype != n->dtype ||
            c->rows != i0->rows || c->cols != i0->cols || c->dtype != i0->dtype)
            return BAD("the Repeat carries '%s', but '%s' and '%s' differ in shape or type",
                       c->name, n->name, i0->name);
        for (size_t i = 0; i < g->tensor_count; i++)
            if (g->tensors[i].sequence != 1 && g->tensors[i].sequence != r->iterations)
                return BAD("parameter sequence '%s' has %u members for %u iterations",
                           g->tensors[i].name, g->tensors[i].sequence, r->iterations);
    }
    return IPU_OK;
#undef BAD
}

uint32_t ipu_ir_homing_op(const ipu_graph *g, uint32_t t)
{
    for (size_t i = 0; i < g->op_count; i++)
        if (g->ops[i].out == t)
            return (uint32_t)i;
    for (size_t i = 0; i < g->op_count; i++)
        for (int k = 0; k < ipu_ir_op_inputs(&g->ops[i]); k++)
            if (g->ops[i].in[k] == t)
                return (uint32_t)i;
    return UINT32_MAX;
}
