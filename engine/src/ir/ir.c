/* ir.c: building and validating workload graphs (see ir.h). */
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

ipu_status ipu_graph_op(ipu_ctx *ctx, ipu_graph *g, int kind, uint32_t in0, uint32_t in1,
                        uint32_t out)
{
    IPU_TRY(IPU_GROW(ctx, g->ops, g->op_count, g->op_capacity));
    g->ops[g->op_count++] = (ipu_ir_op){kind, {in0, in1}, out};
    return IPU_OK;
}

uint64_t ipu_ir_tensor_bytes(const ipu_ir_tensor *t)
{
    return (uint64_t)t->rows * t->cols * ipu_dtype_size(t->dtype);
}

const char *ipu_ir_op_name(int kind)
{
    static const char *names[] = {"matmul", "gelu", "add", "cast", "copy"};
    return kind >= 0 && kind <= IPU_IR_COPY ? names[kind] : "unknown";
}

static int arity(int kind) { return kind == IPU_IR_MATMUL || kind == IPU_IR_ADD ? 2 : 1; }

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
        if (op->kind < 0 || op->kind > IPU_IR_COPY)
            return BAD("op %zu has unknown kind %d", i, op->kind);
        for (int k = 0; k < arity(op->kind); k++)
            if (op->in[k] >= g->tensor_count)
                return BAD("op %zu (%s) reads tensor %u of %zu", i, ipu_ir_op_name(op->kind),
                           op->in[k], g->tensor_count);
        if (op->out >= g->tensor_count)
            return BAD("op %zu (%s) writes tensor %u of %zu", i, ipu_ir_op_name(op->kind), op->out,
                       g->tensor_count);
        const ipu_ir_tensor *a = &g->tensors[op->in[0]], *o = &g->tensors[op->out];
        const ipu_ir_tensor *b = arity(op->kind) == 2 ? &g->tensors[op->in[1]] : NULL;
        if (o->role == IPU_ROLE_INPUT || o->role == IPU_ROLE_PARAM)
            return BAD("op %zu (%s) writes %s '%s', which is read-only", i,
                       ipu_ir_op_name(op->kind), o->role == IPU_ROLE_INPUT ? "input" : "parameter",
                       o->name);
        int shape_ok;
        if (op->kind == IPU_IR_MATMUL)
            shape_ok = a->cols == b->rows && o->rows == a->rows && o->cols == b->cols;
        else
            shape_ok = o->rows == a->rows && o->cols == a->cols &&
                       (!b || (b->rows == a->rows && b->cols == a->cols));
        if (!shape_ok)
            return BAD("op %zu (%s): shapes %ux%u%s -> %ux%u do not agree", i,
                       ipu_ir_op_name(op->kind), a->rows, a->cols, b ? " and another" : "", o->rows,
                       o->cols);
        if (op->kind == IPU_IR_MATMUL) {
            int f8 = a->dtype == IPU_DT_F143 || a->dtype == IPU_DT_F152;
            int b8 = b->dtype == IPU_DT_F143 || b->dtype == IPU_DT_F152;
            if (f8 != b8 || (!f8 && (a->dtype != IPU_DT_F16 || b->dtype != IPU_DT_F16)) ||
                (o->dtype != IPU_DT_F16 && o->dtype != IPU_DT_F32))
                return BAD("op %zu (matmul): inputs %s x %s -> %s is not an AMP combination "
                           "(both FP8 or both FP16 in; FP16 or FP32 out)",
                           i, ipu_dtype_name(a->dtype), ipu_dtype_name(b->dtype),
                           ipu_dtype_name(o->dtype));
        } else if (op->kind != IPU_IR_CAST && (o->dtype != a->dtype || (b && b->dtype != a->dtype))) {
            return BAD("op %zu (%s) mixes element types", i, ipu_ir_op_name(op->kind));
        }
        if ((op->kind == IPU_IR_GELU || op->kind == IPU_IR_ADD) && a->dtype != IPU_DT_F16 &&
            a->dtype != IPU_DT_F32)
            return BAD("op %zu (%s) needs FP16 or FP32 operands", i, ipu_ir_op_name(op->kind));
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
