/* description.c: the graph description, a workload as a JSON document: what
 * a builder writes (ipu_workload_describe) and what anyone may hand to the
 * library instead of naming a builder ({"workload": "graph", "graph": ...}).
 *
 *   {"format": "ipu-e2e-graph", "version": 1, "name": N, "seed": S,
 *    "options": {...}, "tensors": [...], "ops": [...], "repeat": null | {...}}
 *
 * A tensor is {"name", "rows", "cols", "dtype" (f32, f16, f143, f152),
 * "scale" (the FP8 scale exponent, 0 otherwise), "role" (input, parameter,
 * activation, output), "sequence" (members of a Repeat body's parameter, 1
 * otherwise)}, and an input or parameter says how its values are made:
 * "values": {"normal": {"scale", "offset", "stream"}} (standard normal
 * values of (seed, stream) times scale plus offset, as the builders make
 * theirs) or "values": "given" (the caller gives them, ipu_workload_set_values).
 * An op is {"op" (matmul, gelu, add, cast, copy, layernorm, attention,
 * map_pool), "inputs": [names], "output": name} with "epsilon" for a
 * LayerNorm, "heads", "head_dim", "seq" for attention and MAP pooling, and
 * for a GELU in its erf form "form": "erf" (absent or "tanh": the tanh
 * approximation); a
 * matmul with three inputs adds its third as a bias.  The Repeat is
 * {"first_op", "op_count", "iterations", "carried", "carried_next",
 * "carried_init"} (tensors by name).  "name" and "options" are recorded in
 * the package as the workload's, so a builder's description gives the same
 * package as the builder.  Reading is strict: an unknown or missing field, a
 * value of the wrong type or range, or a name that is not a tensor fails
 * with IPU_ERR_INVALID_ARGUMENT naming the tensor or op and the field; then
 * ipu_graph_validate checks the graph as a whole.  A description may come
 * from anyone, so reading is linear in its size (names are found through a
 * hash table, jansson's own object: name -> index), the counts of tensors
 * and ops are checked against the graph's limits (IPU_IR_MAX_TENSORS,
 * IPU_IR_MAX_OPS) before anything is allocated for them, and a cancel
 * request is looked at every CANCEL_EVERY tensors or ops (with a progress
 * report, stage "graph description", on the same boundaries).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/numerics.h"
#include "workloads/workload.h"

#define FORMAT "ipu-e2e-graph"
#define VERSION 1
/* Bounds that keep every size computation in range: 2^24 rows or columns
 * and 4096 members (the graph validator checks the rest). */
#define MAX_DIM (1u << 24)
#define MAX_SEQUENCE 4096u
/* Tensors or ops read between looks at a cancel request (about 10 ms). */
#define CANCEL_EVERY 4096u

static const char *const ROLES[] = {"input", "parameter", "activation", "output"};

/* ---- writing ----------------------------------------------------------- */

static json_t *values_json(const ipu_workload *w, size_t id)
{
    const ipu_value_spec *s = &w->specs[id];
    if (s->given)
        return json_string("given");
    return json_pack("{s:{s:f, s:f, s:I}}", "normal", "scale", (double)s->scale, "offset", (double)s->offset,
                     "stream", (json_int_t)s->stream);
}

static json_t *tensor_json(const ipu_workload *w, size_t id)
{
    const ipu_ir_tensor *t = &w->graph.tensors[id];
    json_t *o = json_pack("{s:s, s:I, s:I, s:s, s:i, s:s, s:I}", "name", t->name, "rows", (json_int_t)t->rows,
                          "cols", (json_int_t)t->cols, "dtype",
                          ipu_dtype_name(t->dtype) ? ipu_dtype_name(t->dtype) : "unknown", "scale", t->scale,
                          "role", t->role >= 0 && t->role <= IPU_ROLE_OUTPUT ? ROLES[t->role] : "unknown",
                          "sequence", (json_int_t)t->sequence);
    if (o && w->specs && (t->role == IPU_ROLE_INPUT || t->role == IPU_ROLE_PARAM) &&
        json_object_set_new(o, "values", values_json(w, id))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *op_json(const ipu_graph *g, const ipu_ir_op *op)
{
    json_t *inputs = json_array();
    for (int k = 0; inputs && k < ipu_ir_op_inputs(op); k++)
        if (json_array_append_new(inputs, json_string(g->tensors[op->in[k]].name))) {
            json_decref(inputs);
            inputs = NULL;
        }
    json_t *o = json_pack("{s:s, s:o, s:s}", "op", ipu_ir_op_name(op->kind), "inputs", inputs, "output",
                          g->tensors[op->out].name);
    int bad = !o;
    if (!bad && op->kind == IPU_IR_LAYERNORM)
        bad = json_object_set_new(o, "epsilon", json_real(op->epsilon));
    if (!bad && op->kind == IPU_IR_GELU && op->form == IPU_GELU_ERF)
        bad = json_object_set_new(o, "form", json_string("erf"));
    if (!bad && (op->kind == IPU_IR_ATTENTION || op->kind == IPU_IR_MAP_POOL))
        bad = json_object_set_new(o, "heads", json_integer(op->heads)) ||
              json_object_set_new(o, "head_dim", json_integer(op->head_dim)) ||
              json_object_set_new(o, "seq", json_integer(op->seq));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *ipu_workload_describe(const ipu_workload *w)
{
    const ipu_graph *g = &w->graph;
    json_t *options = w->options_json ? json_loads(w->options_json, 0, NULL) : json_object();
    json_t *tensors = json_array(), *ops = json_array(), *repeat = json_null();
    int bad = !options || !tensors || !ops;
    for (size_t i = 0; !bad && i < g->tensor_count; i++)
        bad = json_array_append_new(tensors, tensor_json(w, i));
    for (size_t i = 0; !bad && i < g->op_count; i++)
        bad = json_array_append_new(ops, op_json(g, &g->ops[i]));
    const ipu_ir_repeat *r = &g->repeat;
    if (!bad && r->iterations) {
        repeat = json_pack("{s:I, s:I, s:I, s:s, s:s, s:s}", "first_op", (json_int_t)r->first_op, "op_count",
                           (json_int_t)r->op_count, "iterations", (json_int_t)r->iterations, "carried",
                           g->tensors[r->carried].name, "carried_next", g->tensors[r->carried_next].name,
                           "carried_init", g->tensors[r->carried_init].name);
        bad = !repeat;
    }
    if (bad) {
        json_decref(options);
        json_decref(tensors);
        json_decref(ops);
        json_decref(repeat);
        return NULL;
    }
    return json_pack("{s:s, s:i, s:s, s:I, s:o, s:o, s:o, s:o}", "format", FORMAT, "version", VERSION, "name",
                     w->name, "seed", (json_int_t)w->seed, "options", options, "tensors", tensors, "ops", ops,
                     "repeat", repeat);
}

/* ---- reading ----------------------------------------------------------- */

/* index maps each tensor's name read so far to its id (a JSON integer).
 * Where the reader is, for messages ("tensors[3] ('wqkv') values.normal",
 * "ops[7] (matmul)", "repeat"): a place ("tensors", "ops", or a whole one),
 * the item, its name or kind once known and a nested object; the text is
 * made only when a message needs it (where()), not for every item. */
typedef struct reader {
    ipu_ctx *ctx;
    ipu_workload *w;
    json_t *index;
    const char *place;
    size_t item;
    int listed;         /* place is a list: item counts */
    const char *label;  /* a tensor's name, an op's kind, or NULL */
    const char *nested; /* "values.normal" or NULL */
    char where[160];
} reader;

static void at(reader *r, const char *place, int listed, size_t item)
{
    r->place = place;
    r->listed = listed;
    r->item = item;
    r->label = r->nested = NULL;
}

static const char *where(reader *r)
{
    size_t n = sizeof r->where;
    int used = r->listed ? snprintf(r->where, n, "%s[%zu]", r->place, r->item) : snprintf(r->where, n, "%s", r->place);
    if (r->label && used >= 0 && (size_t)used < n)
        used += snprintf(r->where + used, n - (size_t)used, strcmp(r->place, "tensors") ? " (%s)" : " ('%s')",
                         r->label);
    if (r->nested && used >= 0 && (size_t)used < n)
        snprintf(r->where + used, n - (size_t)used, " %s", r->nested);
    return r->where;
}

#define BAD(r, ...) IPU_FAIL((r)->ctx, IPU_ERR_INVALID_ARGUMENT, "graph description: " __VA_ARGS__)

/* Every key of o is one of the NULL-terminated known list. */
static ipu_status known_keys(reader *r, const json_t *o, const char *const *known, const char *expected)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)o, key, value)
    {
        size_t k = 0;
        while (known[k] && strcmp(known[k], key))
            k++;
        if (!known[k])
            return BAD(r, "%s: unknown field '%s' (expected %s)", where(r), key, expected);
    }
    return IPU_OK;
}

static ipu_status get_uint(reader *r, const json_t *o, const char *key, uint64_t lo, uint64_t hi, uint64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return BAD(r, "%s: missing field '%s' (an integer in %llu..%llu)", where(r), key,
                   (unsigned long long)lo, (unsigned long long)hi);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < lo ||
        (uint64_t)json_integer_value(v) > hi)
        return BAD(r, "%s: field '%s' must be an integer in %llu..%llu", where(r), key, (unsigned long long)lo,
                   (unsigned long long)hi);
    *out = (uint64_t)json_integer_value(v);
    return IPU_OK;
}

static ipu_status get_u32(reader *r, const json_t *o, const char *key, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v;
    IPU_TRY(get_uint(r, o, key, lo, hi, &v));
    *out = (uint32_t)v;
    return IPU_OK;
}

static ipu_status get_string(reader *r, const json_t *o, const char *key, const char **out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v))
        return BAD(r, "%s: %s field '%s' (a string)", where(r), v ? "expected a string for" : "missing", key);
    *out = json_string_value(v);
    return IPU_OK;
}

/* A finite number (integer or real) as a float that holds it. */
static ipu_status get_float(reader *r, const json_t *o, const char *key, float *out)
{
    json_t *v = json_object_get(o, key);
    double d = json_number_value(v);
    if (!v)
        return BAD(r, "%s: missing field '%s' (a finite number)", where(r), key);
    if (!json_is_number(v) || !isfinite(d) || fabs(d) > 3.0e38)
        return BAD(r, "%s: field '%s' must be a finite number", where(r), key);
    *out = (float)d;
    return IPU_OK;
}

static ipu_status tensor_by_name(reader *r, const json_t *v, const char *what, uint32_t *id)
{
    const char *name = json_string_value(v);
    if (!name)
        return BAD(r, "%s: %s must be a tensor's name (a string)", where(r), what);
    json_t *found = json_object_get(r->index, name);
    if (!found)
        return BAD(r, "%s: %s '%s' is not a tensor of the description", where(r), what, name);
    *id = (uint32_t)json_integer_value(found);
    return IPU_OK;
}

static ipu_status read_values(reader *r, const json_t *t, ipu_value_spec *spec)
{
    json_t *v = json_object_get(t, "values");
    if (json_is_string(v) && strcmp(json_string_value(v), "given") == 0) {
        spec->given = 1;
        return IPU_OK;
    }
    json_t *normal = json_object_get(v, "normal");
    if (!json_is_object(v) || json_object_size(v) != 1 || !json_is_object(normal))
        return BAD(r, "%s: field 'values' must be \"given\" or {\"normal\": {\"scale\", \"offset\", \"stream\"}}",
                   where(r));
    static const char *const known[] = {"scale", "offset", "stream", NULL};
    r->nested = "values.normal";
    IPU_TRY(known_keys(r, normal, known, "scale, offset and stream"));
    IPU_TRY(get_float(r, normal, "scale", &spec->scale));
    IPU_TRY(get_float(r, normal, "offset", &spec->offset));
    return get_uint(r, normal, "stream", 0, (uint64_t)INT64_MAX, &spec->stream);
}

static ipu_status read_tensor(reader *r, size_t i, const json_t *t)
{
    at(r, "tensors", 1, i);
    if (!json_is_object(t))
        return BAD(r, "%s: expected an object", where(r));
    const char *name = "", *dtype_name = "", *role_name = "";
    IPU_TRY(get_string(r, t, "name", &name));
    if (!*name || strlen(name) >= IPU_IR_NAME)
        return BAD(r, "%s: field 'name' must have 1 to %d characters", where(r), IPU_IR_NAME - 1);
    r->label = name;
    static const char *const known[] = {"name", "rows", "cols", "dtype", "scale", "role", "sequence", "values", NULL};
    IPU_TRY(known_keys(r, t, known, "name, rows, cols, dtype, scale, role, sequence and values"));
    uint32_t rows, cols, sequence;
    IPU_TRY(get_u32(r, t, "rows", 1, MAX_DIM, &rows));
    IPU_TRY(get_u32(r, t, "cols", 1, MAX_DIM, &cols));
    IPU_TRY(get_u32(r, t, "sequence", 1, MAX_SEQUENCE, &sequence));
    IPU_TRY(get_string(r, t, "dtype", &dtype_name));
    int dtype = ipu_dtype_parse(dtype_name);
    if (dtype < 0)
        return BAD(r, "%s: field 'dtype' must be f32, f16, f143 or f152, not '%s'", where(r), dtype_name);
    json_t *scale = json_object_get(t, "scale");
    if (!json_is_integer(scale) || json_integer_value(scale) < -64 || json_integer_value(scale) > 64 ||
        (dtype != IPU_DT_F143 && dtype != IPU_DT_F152 && json_integer_value(scale) != 0))
        return BAD(r, "%s: field 'scale' must be an integer in -64..64 for an FP8 type and 0 otherwise", where(r));
    IPU_TRY(get_string(r, t, "role", &role_name));
    int role = 0;
    while (role <= IPU_ROLE_OUTPUT && strcmp(ROLES[role], role_name))
        role++;
    if (role > IPU_ROLE_OUTPUT)
        return BAD(r, "%s: field 'role' must be input, parameter, activation or output, not '%s'", where(r),
                   role_name);
    int valued = role == IPU_ROLE_INPUT || role == IPU_ROLE_PARAM;
    if (valued != (json_object_get(t, "values") != NULL))
        return BAD(r, "%s: field 'values' %s", where(r),
                   valued ? "is missing (an input or parameter says how its values are made)"
                          : "applies to inputs and parameters only");
    json_t *same = json_object_get(r->index, name);
    if (same)
        return BAD(r, "%s: the name is also tensors[%lld]'s", where(r), (long long)json_integer_value(same));
    uint32_t id;
    IPU_TRY(ipu_graph_tensor(r->ctx, &r->w->graph, name, rows, cols, dtype, (int)json_integer_value(scale), role,
                             &id));
    /* The name is valid UTF-8 when it came from JSON text; one made by a
     * caller need not be, and is looked up by its bytes all the same. */
    if (json_object_set_new_nocheck(r->index, name, json_integer(id)))
        return IPU_NO_MEMORY(r->ctx);
    r->w->graph.tensors[id].sequence = sequence;
    return valued ? read_values(r, t, &r->w->specs[id]) : IPU_OK;
}

static ipu_status read_op(reader *r, size_t i, const json_t *o)
{
    at(r, "ops", 1, i);
    if (!json_is_object(o))
        return BAD(r, "%s: expected an object", where(r));
    const char *kind_name = "";
    IPU_TRY(get_string(r, o, "op", &kind_name));
    int kind = 0;
    while (kind < IPU_IR_KIND_COUNT && strcmp(ipu_ir_op_name(kind), kind_name))
        kind++;
    if (kind == IPU_IR_KIND_COUNT)
        return BAD(r, "%s: field 'op' must be matmul, gelu, add, cast, copy, layernorm, attention or map_pool, "
                      "not '%s'",
                   where(r), kind_name);
    r->label = kind_name;
    static const char *const plain[] = {"op", "inputs", "output", NULL};
    static const char *const gelu[] = {"op", "inputs", "output", "form", NULL};
    static const char *const norm[] = {"op", "inputs", "output", "epsilon", NULL};
    static const char *const heads[] = {"op", "inputs", "output", "heads", "head_dim", "seq", NULL};
    int attention = kind == IPU_IR_ATTENTION || kind == IPU_IR_MAP_POOL;
    IPU_TRY(known_keys(r, o, kind == IPU_IR_LAYERNORM ? norm : attention ? heads : kind == IPU_IR_GELU ? gelu : plain,
                       kind == IPU_IR_LAYERNORM ? "op, inputs, output and epsilon"
                       : attention              ? "op, inputs, output, heads, head_dim and seq"
                       : kind == IPU_IR_GELU    ? "op, inputs, output and form"
                                                : "op, inputs and output"));
    ipu_ir_op op = {.kind = kind};
    json_t *inputs = json_object_get(o, "inputs");
    size_t arity = (size_t)ipu_ir_op_arity(kind), given = json_array_size(inputs);
    op.biased = kind == IPU_IR_MATMUL && given == 3;
    if (!json_is_array(inputs) || given != arity + (size_t)op.biased)
        return BAD(r, "%s: field 'inputs' must list %zu tensor names%s", where(r), arity,
                   kind == IPU_IR_MATMUL ? " (3 with a bias)" : "");
    for (size_t k = 0; k < given; k++)
        IPU_TRY(tensor_by_name(r, json_array_get(inputs, k), "an input", &op.in[k]));
    IPU_TRY(tensor_by_name(r, json_object_get(o, "output"), "field 'output'", &op.out));
    if (kind == IPU_IR_LAYERNORM)
        IPU_TRY(get_float(r, o, "epsilon", &op.epsilon));
    const char *form = json_string_value(json_object_get(o, "form"));
    if (json_object_get(o, "form") && (!form || (strcmp(form, "erf") && strcmp(form, "tanh"))))
        return BAD(r, "%s: field 'form' must be \"tanh\" or \"erf\"", where(r));
    op.form = form && !strcmp(form, "erf") ? IPU_GELU_ERF : IPU_GELU_TANH;
    if (attention) {
        IPU_TRY(get_u32(r, o, "heads", 1, 4096, &op.heads));
        IPU_TRY(get_u32(r, o, "head_dim", 1, 4096, &op.head_dim));
        IPU_TRY(get_u32(r, o, "seq", 1, MAX_DIM, &op.seq));
    }
    return ipu_graph_add_op(r->ctx, &r->w->graph, &op);
}

static ipu_status read_repeat(reader *r, const json_t *o)
{
    at(r, "repeat", 0, 0);
    if (json_is_null(o))
        return IPU_OK;
    if (!json_is_object(o))
        return BAD(r, "repeat: expected null or an object");
    static const char *const known[] = {"first_op", "op_count", "iterations", "carried", "carried_next",
                                        "carried_init", NULL};
    IPU_TRY(known_keys(r, o, known, "first_op, op_count, iterations, carried, carried_next and carried_init"));
    ipu_ir_repeat *rep = &r->w->graph.repeat;
    uint32_t ops = (uint32_t)r->w->graph.op_count;
    IPU_TRY(get_u32(r, o, "first_op", 0, ops ? ops - 1 : 0, &rep->first_op));
    IPU_TRY(get_u32(r, o, "op_count", 1, ops - rep->first_op, &rep->op_count));
    IPU_TRY(get_u32(r, o, "iterations", 1, MAX_SEQUENCE, &rep->iterations));
    IPU_TRY(tensor_by_name(r, json_object_get(o, "carried"), "field 'carried'", &rep->carried));
    IPU_TRY(tensor_by_name(r, json_object_get(o, "carried_next"), "field 'carried_next'", &rep->carried_next));
    return tensor_by_name(r, json_object_get(o, "carried_init"), "field 'carried_init'", &rep->carried_init);
}

static ipu_status read_description(reader *r, const json_t *d)
{
    static const char *const known[] = {"format", "version", "name", "seed", "options", "tensors", "ops",
                                        "repeat", NULL};
    at(r, "the document", 0, 0);
    if (!json_is_object(d))
        return BAD(r, "expected a JSON object");
    IPU_TRY(known_keys(r, d, known, "format, version, name, seed, options, tensors, ops and repeat"));
    const char *format = "", *name = "";
    uint64_t version;
    IPU_TRY(get_string(r, d, "format", &format));
    if (strcmp(format, FORMAT))
        return BAD(r, "field 'format' must be \"" FORMAT "\", not '%s'", format);
    IPU_TRY(get_uint(r, d, "version", VERSION, VERSION, &version));
    IPU_TRY(get_string(r, d, "name", &name));
    if (!*name || strlen(name) >= sizeof r->w->name)
        return BAD(r, "field 'name' must have 1 to %zu characters", sizeof r->w->name - 1);
    snprintf(r->w->name, sizeof r->w->name, "%s", name);
    IPU_TRY(get_uint(r, d, "seed", 0, (uint64_t)INT64_MAX, &r->w->seed));
    json_t *options = json_object_get(d, "options"), *tensors = json_object_get(d, "tensors"),
           *ops = json_object_get(d, "ops");
    if (!json_is_object(options))
        return BAD(r, "field 'options' must be an object (the options the package records)");
    if (!json_is_array(tensors) || !json_array_size(tensors) || !json_is_array(ops) || !json_array_size(ops))
        return BAD(r, "fields 'tensors' and 'ops' must be non-empty arrays");
    if (!json_object_get(d, "repeat"))
        return BAD(r, "missing field 'repeat' (null when the graph has none)");
    size_t tensor_count = json_array_size(tensors), op_count = json_array_size(ops), total = tensor_count + op_count;
    if (tensor_count > IPU_IR_MAX_TENSORS)
        return BAD(r, "field 'tensors' lists %zu tensors, more than the limit of %u", tensor_count,
                   IPU_IR_MAX_TENSORS);
    if (op_count > IPU_IR_MAX_OPS)
        return BAD(r, "field 'ops' lists %zu ops, more than the limit of %u", op_count, IPU_IR_MAX_OPS);
    IPU_TRY(IPU_CHECK_CANCEL(r->ctx));
    IPU_TRY(ipu_graph_reserve(r->ctx, &r->w->graph, tensor_count, op_count));
    r->w->options_json = json_dumps(options, JSON_COMPACT | JSON_SORT_KEYS);
    r->w->specs = ipu_calloc(r->ctx, tensor_count, sizeof *r->w->specs);
    r->index = json_object();
    if (!r->w->options_json || !r->w->specs || !r->index)
        return IPU_NO_MEMORY(r->ctx);
    size_t i, done = 0;
    json_t *item;
    json_array_foreach(tensors, i, item)
    {
        IPU_TRY(read_tensor(r, i, item));
        IPU_TRY(++done % CANCEL_EVERY ? IPU_OK : ipu_progress(r->ctx, "graph description", done, total));
    }
    json_array_foreach(ops, i, item)
    {
        IPU_TRY(read_op(r, i, item));
        IPU_TRY(++done % CANCEL_EVERY ? IPU_OK : ipu_progress(r->ctx, "graph description", done, total));
    }
    IPU_TRY(read_repeat(r, json_object_get(d, "repeat")));
    return ipu_graph_validate(r->ctx, &r->w->graph);
}

ipu_status ipu_workload_from_description(ipu_ctx *ctx, const json_t *description, ipu_workload **out)
{
    ipu_workload *w = ipu_calloc(ctx, 1, sizeof *w);
    if (!w)
        return IPU_NO_MEMORY(ctx);
    ipu_graph_init(&w->graph);
    reader r = {.ctx = ctx, .w = w};
    ipu_status status = read_description(&r, description);
    json_decref(r.index);
    if (status != IPU_OK) {
        ipu_workload_free(w);
        return status;
    }
    *out = w;
    return IPU_OK;
}
