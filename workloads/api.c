/* api.c: the public workload, reference and check calls (ipu.h, section
 * "workloads, references and checks").  A workload is created from JSON
 * options naming the builder ({"workload": "mlp" | "vit" | "vit-small", ...})
 * and has its values generated at once (by the builder's own generator when
 * it sets one); info lists tensors, ops with their fields and the Repeat;
 * tensors are addressed by name; device bytes are the values quantized with
 * ipu_num_encode (in parallel over fixed chunks, so the bytes do not depend
 * on the thread count); the reference's outputs stay in
 * the workload until the next run or ipu_workload_free; check results and
 * descriptions cross the ABI as JSON strings released with ipu_free.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "numerics/numerics.h"
#include "reference/check.h"
#include "reference/reference.h"
#include "workloads/workload.h"

static const char *role_name(int role)
{
    static const char *names[] = {"input", "parameter", "activation", "output"};
    return role >= IPU_ROLE_INPUT && role <= IPU_ROLE_OUTPUT ? names[role] : "unknown";
}

static ipu_status parse_options(ipu_ctx *ctx, const char *text, const char *what, json_t **out)
{
    json_error_t error;
    json_t *o = json_loads(text && *text ? text : "{}", 0, &error);
    if (!o)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "%s: %s (line %d, column %d)", what,
                        error.text, error.line, error.column);
    if (!json_is_object(o)) {
        json_decref(o);
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "%s: expected a JSON object", what);
    }
    *out = o;
    return IPU_OK;
}

static ipu_status take_json(ipu_ctx *ctx, json_t *o, char **out_json)
{
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return IPU_NO_MEMORY(ctx);
    *out_json = text;
    return IPU_OK;
}

static ipu_status find_tensor(ipu_ctx *ctx, const ipu_workload *w, const char *name, uint32_t *id)
{
    if (!w || !name)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "missing workload or tensor name");
    for (size_t i = 0; i < w->graph.tensor_count; i++) {
        if (strcmp(w->graph.tensors[i].name, name) == 0) {
            *id = (uint32_t)i;
            return IPU_OK;
        }
    }
    return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "workload '%s' has no tensor '%s'", w->name,
                    name);
}

/* An input or parameter by name (the only tensors with values). */
static ipu_status find_value_tensor(ipu_ctx *ctx, const ipu_workload *w, const char *name, uint32_t *id)
{
    IPU_TRY(find_tensor(ctx, w, name, id));
    const ipu_ir_tensor *t = &w->graph.tensors[*id];
    if (t->role != IPU_ROLE_INPUT && t->role != IPU_ROLE_PARAM)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "tensor '%s' is an %s: only inputs and parameters have values", name,
                        role_name(t->role));
    return IPU_OK;
}

/* The values of an input or parameter, all members. */
static ipu_status find_values(ipu_ctx *ctx, const ipu_workload *w, const char *name,
                              uint32_t *id, const float **data, size_t *count)
{
    IPU_TRY(find_value_tensor(ctx, w, name, id));
    const ipu_ir_tensor *t = &w->graph.tensors[*id];
    IPU_TRY(ipu_workload_values_of(ctx, w, *id, data));
    *count = (size_t)((uint64_t)t->rows * t->cols * t->sequence);
    return IPU_OK;
}

void ipu_workload_free(ipu_workload *w)
{
    if (!w)
        return;
    for (size_t i = 0; w->values && i < w->graph.tensor_count; i++)
        free(w->values[i]);
    free(w->values);
    ipu_reference_free_outputs(w->reference, w->graph.tensor_count);
    free(w->options_json);
    ipu_graph_free(&w->graph);
    free(w);
}

ipu_status ipu_workload_create(ipu_ctx *ctx, const char *options_json, ipu_workload **out)
{
    if (!out)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_workload_create: missing output");
    json_t *o;
    IPU_TRY(parse_options(ctx, options_json, "workload options", &o));
    const char *name = json_string_value(json_object_get(o, "workload"));
    ipu_status status;
    ipu_workload *w = NULL;
    if (!name) {
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "workload options: \"workload\" must name a workload "
                          "(mlp, vit or vit-small)");
    } else if (strcmp(name, "mlp") == 0 || strcmp(name, "vit") == 0 ||
               strcmp(name, "vit-small") == 0) {
        json_t *builder = json_copy(o);
        if (!builder || json_object_del(builder, "workload")) {
            status = IPU_NO_MEMORY(ctx);
        } else {
            status = strcmp(name, "mlp") == 0 ? ipu_mlp_build(ctx, builder, &w)
                                              : ipu_vit_build(ctx, name, builder, &w);
        }
        json_decref(builder);
    } else {
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "--workload: unknown workload '%s' (expected mlp, vit or vit-small)",
                          name);
    }
    json_decref(o);
    if (status == IPU_OK)
        status = ipu_workload_prepare_values(ctx, w);
    if (status != IPU_OK) {
        ipu_workload_free(w);
        return status;
    }
    *out = w;
    return IPU_OK;
}

static json_t *tensor_json(const ipu_ir_tensor *t)
{
    return json_pack("{s:s, s:I, s:I, s:s, s:i, s:s, s:I}", "name", t->name, "rows",
                     (json_int_t)t->rows, "cols", (json_int_t)t->cols, "dtype",
                     ipu_dtype_name(t->dtype) ? ipu_dtype_name(t->dtype) : "unknown", "scale",
                     t->scale, "role", role_name(t->role), "sequence", (json_int_t)t->sequence);
}

/* {"op", "inputs": [names], "output"} and the op's fields: "epsilon" for a
 * LayerNorm; "heads", "head_dim" and "seq" (rows per image) for attention and
 * MAP pooling.  NULL when out of memory. */
static json_t *op_json(const ipu_graph *g, const ipu_ir_op *op)
{
    json_t *inputs = json_array();
    for (int k = 0; inputs && k < ipu_ir_op_inputs(op); k++)
        if (json_array_append_new(inputs, json_string(g->tensors[op->in[k]].name))) {
            json_decref(inputs);
            inputs = NULL;
        }
    json_t *o = json_pack("{s:s, s:o, s:s}", "op", ipu_ir_op_name(op->kind), "inputs", inputs,
                          "output", g->tensors[op->out].name);
    int bad = !o;
    if (!bad && op->kind == IPU_IR_LAYERNORM)
        bad = json_object_set_new(o, "epsilon", json_real(op->epsilon));
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

static json_t *info_json(const ipu_workload *w)
{
    const ipu_graph *g = &w->graph;
    json_t *options = w->options_json ? json_loads(w->options_json, 0, NULL) : json_object();
    json_t *tensors = json_array(), *ops = json_array(), *repeat = json_null();
    int bad = !options || !tensors || !ops;
    for (size_t i = 0; !bad && i < g->tensor_count; i++)
        bad = json_array_append_new(tensors, tensor_json(&g->tensors[i]));
    for (size_t i = 0; !bad && i < g->op_count; i++) {
        bad = json_array_append_new(ops, op_json(g, &g->ops[i]));
    }
    const ipu_ir_repeat *r = &g->repeat;
    if (!bad && r->iterations) {
        repeat = json_pack("{s:I, s:I, s:I, s:s, s:s, s:s}", "first_op", (json_int_t)r->first_op,
                           "op_count", (json_int_t)r->op_count, "iterations",
                           (json_int_t)r->iterations, "carried", g->tensors[r->carried].name,
                           "carried_next", g->tensors[r->carried_next].name, "carried_init",
                           g->tensors[r->carried_init].name);
        bad = !repeat;
    }
    if (bad) {
        json_decref(options);
        json_decref(tensors);
        json_decref(ops);
        json_decref(repeat);
        return NULL;
    }
    return json_pack("{s:s, s:I, s:o, s:o, s:o, s:o}", "name", w->name, "seed",
                     (json_int_t)w->seed, "options", options, "tensors", tensors, "ops", ops,
                     "repeat", repeat);
}

ipu_status ipu_workload_info_json(ipu_ctx *ctx, const ipu_workload *w, char **out_json)
{
    if (!w || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_workload_info_json: missing argument");
    return take_json(ctx, info_json(w), out_json);
}

ipu_status ipu_workload_values(ipu_ctx *ctx, const ipu_workload *w, const char *tensor,
                               const float **out_data, size_t *out_count)
{
    uint32_t id = 0;
    return find_values(ctx, w, tensor, &id, out_data, out_count);
}

ipu_status ipu_workload_device_bytes(ipu_ctx *ctx, const ipu_workload *w, const char *tensor,
                                     void **out_bytes, size_t *out_size)
{
    uint32_t id = 0;
    IPU_TRY(find_value_tensor(ctx, w, tensor, &id));
    const ipu_ir_tensor *t = &w->graph.tensors[id];
    uint64_t count = (uint64_t)t->rows * t->cols * t->sequence;
    size_t elem = ipu_dtype_size(t->dtype);
    if (count > SIZE_MAX / elem)
        return IPU_NO_MEMORY(ctx);
    unsigned char *bytes = ipu_malloc(ctx, count ? count * elem : 1);
    if (!bytes)
        return IPU_NO_MEMORY(ctx);
    ipu_status status = ipu_workload_device_bytes_of(ctx, w, id, bytes);
    if (status != IPU_OK) {
        free(bytes);
        return status;
    }
    *out_bytes = bytes;
    *out_size = count * elem;
    return IPU_OK;
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* {"fp32": true}: the FP32 reference; {"fp32": false} or {}: device
 * precision, with the plan's "attention" modes, "attention_bands" and
 * "matmuls" blocks (as the package's meta records them, reference.h)
 * computed as the device does.
 * *plan: freed by the caller. */
static ipu_status reference_mode(ipu_ctx *ctx, const ipu_workload *w, const char *options_json,
                                 int *fp32, ipu_reference_plan *plan)
{
    json_t *o;
    IPU_TRY(parse_options(ctx, options_json, "reference options", &o));
    const char *key;
    json_t *value;
    ipu_status status = IPU_OK;
    json_object_foreach(o, key, value)
    {
        if (strcmp(key, "fp32") != 0 && strcmp(key, "attention") != 0 && strcmp(key, "attention_bands") != 0 &&
            strcmp(key, "matmuls") != 0) {
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "reference options: unknown option '%s' (expected fp32, attention, attention_bands "
                              "or matmuls)",
                              key);
            break;
        }
        if (!strcmp(key, "fp32") && !json_is_boolean(value)) {
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "reference options: fp32 must be true or false");
            break;
        }
    }
    if (status == IPU_OK)
        status = ipu_reference_plan_parse(ctx, o, &w->graph, plan);
    if (status == IPU_OK)
        *fp32 = json_is_true(json_object_get(o, "fp32"));
    json_decref(o);
    return status;
}

ipu_status ipu_reference_run(ipu_ctx *ctx, ipu_workload *w, const char *options_json,
                             char **out_json)
{
    if (!w || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_reference_run: missing argument");
    int fp32 = 0;
    ipu_reference_plan plan = {0};
    ipu_status status = reference_mode(ctx, w, options_json, &fp32, &plan);
    int threads = ipu_reference_blas_threads();
    double start = seconds_now();
    float **outputs;
    if (status == IPU_OK)
        status = fp32 ? ipu_reference_fp32(ctx, w, &outputs) : ipu_reference_device(ctx, w, &plan, &outputs);
    ipu_reference_plan_free(&plan);
    IPU_TRY(status);
    double wall = seconds_now() - start;
    ipu_reference_free_outputs(w->reference, w->graph.tensor_count);
    w->reference = outputs;
    json_t *names = json_array();
    int bad = !names;
    for (size_t i = 0; !bad && i < w->graph.tensor_count; i++)
        if (outputs[i])
            bad = json_array_append_new(names, json_string(w->graph.tensors[i].name));
    if (bad) {
        json_decref(names);
        return IPU_NO_MEMORY(ctx);
    }
    return take_json(ctx,
                     json_pack("{s:s, s:f, s:i, s:o}", "mode", fp32 ? "fp32" : "device", "wall_seconds", wall,
                               "blas_threads", threads, "outputs", names),
                     out_json);
}

ipu_status ipu_reference_output(ipu_ctx *ctx, const ipu_workload *w, const char *tensor,
                                const float **out_data, size_t *out_count)
{
    uint32_t id = 0;
    IPU_TRY(find_tensor(ctx, w, tensor, &id));
    const ipu_ir_tensor *t = &w->graph.tensors[id];
    if (t->role != IPU_ROLE_OUTPUT)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "tensor '%s' is an %s: the reference keeps only outputs", tensor,
                        role_name(t->role));
    if (!w->reference || !w->reference[id])
        return IPU_FAIL(ctx, IPU_ERR_STATE, "the reference has not run (ipu_reference_run)");
    *out_data = w->reference[id];
    *out_count = (size_t)((uint64_t)t->rows * t->cols);
    return IPU_OK;
}

ipu_status ipu_check_outputs(ipu_ctx *ctx, const float *reference, const void *device,
                             const char *dtype_name, size_t rows, size_t cols,
                             const char *criteria_json, char **out_json)
{
    int dtype = dtype_name ? ipu_dtype_parse(dtype_name) : -1;
    if (dtype < 0)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "check: unknown device type '%s' (expected f32, f16, f143 or f152)",
                        dtype_name ? dtype_name : "(null)");
    if (!out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_check_outputs: missing output");
    ipu_check_criteria criteria;
    IPU_TRY(ipu_check_parse_criteria(ctx, criteria_json, "atol", &criteria));
    json_t *result;
    IPU_TRY(ipu_check_rows(ctx, reference, device, dtype, 0, rows, cols, &criteria, &result));
    return take_json(ctx, result, out_json);
}
