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

/* Grow an array to exactly count elements (never shrinks it). */
static ipu_status reserve_exactly(ipu_ctx *ctx, void **items, size_t element_size, size_t count,
                                  size_t *capacity)
{
    if (count <= *capacity)
        return IPU_OK;
    void *data = ipu_realloc(ctx, *items, count * element_size);
    if (!data)
        return IPU_NO_MEMORY(ctx);
    *items = data;
    *capacity = count;
    return IPU_OK;
}

ipu_status ipu_graph_reserve(ipu_ctx *ctx, ipu_graph *g, size_t tensors, size_t ops)
{
    if (tensors > IPU_IR_MAX_TENSORS - g->tensor_count || ops > IPU_IR_MAX_OPS - g->op_count)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "graph: %zu tensors and %zu ops are more than a graph holds (%u tensors, %u ops)",
                        g->tensor_count + tensors, g->op_count + ops, IPU_IR_MAX_TENSORS, IPU_IR_MAX_OPS);
    IPU_TRY(reserve_exactly(ctx, (void **)&g->tensors, sizeof *g->tensors, g->tensor_count + tensors,
                            &g->tensor_capacity));
    return reserve_exactly(ctx, (void **)&g->ops, sizeof *g->ops, g->op_count + ops, &g->op_capacity);
}

ipu_status ipu_graph_tensor(ipu_ctx *ctx, ipu_graph *g, const char *name, uint32_t rows,
                            uint32_t cols, int dtype, int scale, int role, uint32_t *id)
{
    if (strlen(name) >= IPU_IR_NAME)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "tensor name '%s' is too long", name);
    if (g->tensor_count >= IPU_IR_MAX_TENSORS)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "graph: more than %u tensors", IPU_IR_MAX_TENSORS);
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
    if (g->op_count >= IPU_IR_MAX_OPS)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "graph: more than %u ops", IPU_IR_MAX_OPS);
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

#define BAD(...) IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "graph: " __VA_ARGS__)

/* Names are unique: sorted (name, index) pairs. */
typedef struct named {
    const char *name;
    uint32_t id;
} named;

static int by_name(const void *x, const void *y)
{
    return strcmp(((const named *)x)->name, ((const named *)y)->name);
}

static ipu_status check_names(ipu_ctx *ctx, const ipu_graph *g)
{
    named *names = ipu_malloc(ctx, (g->tensor_count ? g->tensor_count : 1) * sizeof *names);
    if (!names)
        return IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < g->tensor_count; i++)
        names[i] = (named){g->tensors[i].name, (uint32_t)i};
    qsort(names, g->tensor_count, sizeof *names, by_name);
    ipu_status status = IPU_OK;
    for (size_t i = 1; i < g->tensor_count && status == IPU_OK; i++)
        if (!strcmp(names[i].name, names[i - 1].name))
            status = BAD("two tensors are named '%s' (tensors %u and %u)", names[i].name,
                         names[i - 1].id < names[i].id ? names[i - 1].id : names[i].id,
                         names[i - 1].id < names[i].id ? names[i].id : names[i - 1].id);
    free(names);
    return status;
}

static int in_body(const ipu_graph *g, size_t op)
{
    return g->repeat.iterations && op >= g->repeat.first_op && op - g->repeat.first_op < g->repeat.op_count;
}

/* Data flows forward: every activation and output is written by exactly one
 * op (the carried tensor by none: the Repeat sets it) and read only after
 * that op; an op does not read its own output; sequences and the carried
 * tensor are read only in the Repeat body, whose carried_next is written in
 * the body and carried_init before it; every tensor is touched by an op. */
static ipu_status check_dataflow(ipu_ctx *ctx, const ipu_graph *g)
{
    size_t n = g->tensor_count;
    uint32_t *writer = ipu_malloc(ctx, (n ? n : 1) * sizeof *writer);
    unsigned char *read = ipu_calloc(ctx, n ? n : 1, 1);
    if (!writer || !read) {
        free(writer), free(read);
        return IPU_NO_MEMORY(ctx);
    }
    for (size_t t = 0; t < n; t++)
        writer[t] = UINT32_MAX;
    const ipu_ir_repeat *r = &g->repeat;
    uint32_t carried = r->iterations ? r->carried : UINT32_MAX;
    if (r->iterations)
        read[r->carried_init] = 1;
    ipu_status status = IPU_OK;
    for (size_t i = 0; i < g->op_count && status == IPU_OK; i++) {
        const ipu_ir_op *op = &g->ops[i];
        const char *kind = ipu_ir_op_name(op->kind);
        for (int k = 0; k < ipu_ir_op_inputs(op) && status == IPU_OK; k++) {
            const ipu_ir_tensor *t = &g->tensors[op->in[k]];
            int valued = t->role == IPU_ROLE_INPUT || t->role == IPU_ROLE_PARAM;
            read[op->in[k]] = 1;
            if (op->in[k] == op->out)
                status = BAD("op %zu (%s) reads its own output '%s'", i, kind, t->name);
            else if (op->in[k] == carried && !in_body(g, i))
                status = BAD("op %zu (%s) reads the Repeat's carried '%s' outside the Repeat body", i, kind,
                             t->name);
            else if (t->sequence > 1 && !in_body(g, i))
                status = BAD("op %zu (%s) reads '%s', a sequence of %u members, outside the Repeat body", i,
                             kind, t->name, t->sequence);
            else if (!valued && op->in[k] != carried && writer[op->in[k]] == UINT32_MAX)
                status = BAD("op %zu (%s) reads '%s' before any op writes it", i, kind, t->name);
        }
        if (status == IPU_OK && writer[op->out] != UINT32_MAX)
            status = BAD("op %zu (%s) writes '%s', which op %u writes too", i, kind, g->tensors[op->out].name,
                         writer[op->out]);
        else if (status == IPU_OK && op->out == carried)
            status = BAD("op %zu (%s) writes the Repeat's carried '%s' (the Repeat sets it from carried_init "
                         "and carried_next)",
                         i, kind, g->tensors[op->out].name);
        writer[op->out] = (uint32_t)i;
    }
    for (size_t t = 0; t < n && status == IPU_OK; t++) {
        const ipu_ir_tensor *x = &g->tensors[t];
        if (!read[t] && writer[t] == UINT32_MAX)
            status = BAD("no op reads or writes tensor '%s'", x->name);
        else if (t != carried && writer[t] == UINT32_MAX && (x->role == IPU_ROLE_ACTIVATION || x->role == IPU_ROLE_OUTPUT))
            status = BAD("no op writes %s '%s'", x->role == IPU_ROLE_OUTPUT ? "output" : "activation", x->name);
    }
    if (status == IPU_OK && r->iterations) {
        const ipu_ir_tensor *c = &g->tensors[r->carried];
        if (c->role != IPU_ROLE_ACTIVATION)
            status = BAD("the Repeat's carried '%s' must be an activation", c->name);
        else if (writer[r->carried_next] == UINT32_MAX || !in_body(g, writer[r->carried_next]))
            status = BAD("the Repeat's carried_next '%s' must be written in the Repeat body",
                         g->tensors[r->carried_next].name);
        else if (r->carried_init == r->carried ||
                 (writer[r->carried_init] != UINT32_MAX && writer[r->carried_init] >= r->first_op))
            status = BAD("the Repeat's carried_init '%s' must be a value from before the Repeat body",
                         g->tensors[r->carried_init].name);
    }
    free(writer), free(read);
    return status;
}

ipu_status ipu_graph_validate(ipu_ctx *ctx, const ipu_graph *g)
{
    for (size_t i = 0; i < g->tensor_count; i++) {
        const ipu_ir_tensor *t = &g->tensors[i];
        if (!t->rows || !t->cols || !ipu_dtype_size(t->dtype) || t->role < 0 ||
            t->role > IPU_ROLE_OUTPUT || !t->sequence || !t->name[0])
            return BAD("tensor %zu '%s' has shape %ux%u, type %d, role %d", i, t->name, t->rows, t->cols,
                       t->dtype, t->role);
        if (t->sequence > 1 && t->role != IPU_ROLE_PARAM)
            return BAD("tensor '%s' has %u members: only parameters may be sequences", t->name, t->sequence);
        if (ipu_ir_tensor_bytes(t) * t->sequence > IPU_IR_MAX_TENSOR_BYTES)
            return BAD("tensor '%s' (%ux%u %s, %u members) is larger than %llu bytes", t->name, t->rows, t->cols,
                       ipu_dtype_name(t->dtype), t->sequence, (unsigned long long)IPU_IR_MAX_TENSOR_BYTES);
    }
    IPU_TRY(check_names(ctx, g));
    for (size_t i = 0; i < g->op_count; i++) {
        const ipu_ir_op *op = &g->ops[i];
        if (op->kind < 0 || op->kind >= IPU_IR_KIND_COUNT)
            return BAD("op %zu has unknown kind %d", i, op->kind);
        if (op->form && (op->kind != IPU_IR_GELU || op->form != IPU_GELU_ERF))
            return BAD("op %zu (%s) has GELU form %d (only a GELU has a form: 0 tanh, 1 erf)", i,
                       ipu_ir_op_name(op->kind), op->form);
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
        /* The Repeat copies bytes: an FP8 value means the same only at the same scale. */
        int f8 = c->dtype == IPU_DT_F143 || c->dtype == IPU_DT_F152;
        if (f8 && (c->scale != n->scale || c->scale != i0->scale))
            return BAD("the Repeat carries '%s' (scale %d), but '%s' has scale %d and '%s' scale %d "
                       "(the Repeat copies FP8 bytes, so the scales must agree)",
                       c->name, c->scale, n->name, n->scale, i0->name, i0->scale);
        for (size_t i = 0; i < g->tensor_count; i++)
            if (g->tensors[i].sequence != 1 && g->tensors[i].sequence != r->iterations)
                return BAD("parameter sequence '%s' has %u members for %u iterations",
                           g->tensors[i].name, g->tensors[i].sequence, r->iterations);
    }
    return check_dataflow(ctx, g);
}
#undef BAD

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

ipu_status ipu_graph_canonical_order(ipu_ctx *ctx, ipu_graph *g, uint32_t *moved_to)
{
    size_t n = g->tensor_count, next = 0;
    uint32_t *order = ipu_malloc(ctx, (n ? n : 1) * sizeof *order);
    ipu_ir_tensor *tensors = ipu_malloc(ctx, (n ? n : 1) * sizeof *tensors);
    if (!order || !tensors) {
        free(order), free(tensors);
        return IPU_NO_MEMORY(ctx);
    }
    for (size_t t = 0; t < n; t++)
        moved_to[t] = UINT32_MAX;
    for (size_t i = 0; i < g->op_count; i++) {
        ipu_ir_op *op = &g->ops[i];
        int inputs = ipu_ir_op_inputs(op), body = g->repeat.iterations && i == g->repeat.first_op;
        /* The Repeat reads carried_init into carried before its body. */
        uint32_t touched[6] = {g->repeat.carried_init, g->repeat.carried, op->in[0], op->in[1], op->in[2], op->out};
        for (int k = body ? 0 : 2; k < 6; k++) {
            uint32_t t = touched[k < 2 + inputs ? k : 5];
            if (t < n && moved_to[t] == UINT32_MAX)
                moved_to[t] = (uint32_t)next, order[next++] = t;
        }
    }
    for (size_t t = 0; t < n; t++) /* untouched tensors keep their order, last */
        if (moved_to[t] == UINT32_MAX)
            moved_to[t] = (uint32_t)next, order[next++] = (uint32_t)t;
    for (size_t t = 0; t < n; t++)
        tensors[t] = g->tensors[order[t]];
    if (n) /* an empty graph has no tensor array */
        memcpy(g->tensors, tensors, n * sizeof *tensors);
#define MOVE(x) ((x) = (x) < n ? moved_to[x] : (x))
    for (size_t i = 0; i < g->op_count; i++) {
        ipu_ir_op *op = &g->ops[i];
        for (int k = 0; k < ipu_ir_op_inputs(op) && k < 3; k++)
            MOVE(op->in[k]);
        MOVE(op->out);
    }
    if (g->repeat.iterations) {
        MOVE(g->repeat.carried);
        MOVE(g->repeat.carried_next);
        MOVE(g->repeat.carried_init);
    }
#undef MOVE
    free(order), free(tensors);
    return IPU_OK;
}

