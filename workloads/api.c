/* api.c: the public workload, reference and check calls (ipu.h, section
 * "workloads, references and checks").  A workload is created from JSON
 * options naming the builder ({"workload": "mlp" | "vit" | "vit-small", ...})
 * or holding a graph description ({"workload": "graph", "graph": ...}); its
 * values are generated on first use (as its specs say) or given by the
 * caller; info is the graph description (description.c);
 * tensors are addressed by name; device bytes are the values quantized with
 * ipu_num_encode (in parallel over fixed chunks, so the bytes do not depend
 * on the thread count); the reference's outputs stay in
 * the workload until the next run or ipu_workload_free; check results and
 * descriptions cross the ABI as JSON strings released with ipu_free.
 * Options text is parsed a piece at a time, so a cancel request stops the
 * parse of a long one (a large graph description) between pieces.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "numerics/numerics.h"
#include "reference/check.h"
#include "reference/reference.h"
#include "workloads/workload.h"

/* "a parameter", "an output". */
static const char *role_with_article(int role)
{
    static const char *names[] = {"an input", "a parameter", "an activation", "an output"};
    return role >= IPU_ROLE_INPUT && role <= IPU_ROLE_OUTPUT ? names[role] : "of an unknown role";
}

/* The options text as jansson asks for it (json_load_callback, a buffer at
 * a time), looking at a cancel request before each piece: a graph
 * description of a million tensors takes seconds to parse. */
typedef struct text_reader {
    ipu_ctx *ctx;
    const char *text;
    size_t left;
    ipu_status status;
} text_reader;

static size_t read_text(void *buffer, size_t size, void *data)
{
    text_reader *t = data;
    t->status = IPU_CHECK_CANCEL(t->ctx);
    if (t->status != IPU_OK)
        return (size_t)-1; /* jansson stops: the parse fails */
    size_t n = t->left < size ? t->left : size;
    memcpy(buffer, t->text, n);
    t->text += n;
    t->left -= n;
    return n;
}

static ipu_status parse_options(ipu_ctx *ctx, const char *text, const char *what, json_t **out)
{
    json_error_t error;
    text = text && *text ? text : "{}";
    text_reader reader = {ctx, text, strlen(text), IPU_OK};
    json_t *o = json_load_callback(read_text, &reader, JSON_REJECT_DUPLICATES, &error);
    if (!o && reader.status != IPU_OK)
        return reader.status;
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
                        "tensor '%s' is %s: only inputs and parameters have values", name,
                        role_with_article(t->role));
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
    free(w->specs);
    ipu_reference_free_outputs(w->reference, w->graph.tensor_count);
    free(w->options_json);
    ipu_graph_free(&w->graph);
    free(w);
}

/* The graph's tensors in canonical order (ir.h), each value spec (and so
 * each tensor's values) moving with its tensor. */
static ipu_status number_canonically(ipu_ctx *ctx, ipu_workload *w)
{
    size_t n = w->graph.tensor_count;
    uint32_t *moved_to = ipu_malloc(ctx, (n ? n : 1) * sizeof *moved_to);
    ipu_value_spec *specs = ipu_malloc(ctx, (n ? n : 1) * sizeof *specs);
    ipu_status status = moved_to && specs ? ipu_graph_canonical_order(ctx, &w->graph, moved_to) : IPU_NO_MEMORY(ctx);
    for (size_t t = 0; status == IPU_OK && t < n; t++)
        specs[moved_to[t]] = w->specs[t];
    if (status == IPU_OK)
        memcpy(w->specs, specs, n * sizeof *specs);
    free(moved_to), free(specs);
    return status;
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
                          "(mlp, vit, vit-small or graph)");
    } else if (strcmp(name, "graph") == 0) {
        status = json_object_size(o) == 2 && json_object_get(o, "graph")
                     ? ipu_workload_from_description(ctx, json_object_get(o, "graph"), &w)
                     : IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                                "workload options: a graph workload takes one more field, \"graph\" (the "
                                "description)");
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
                          "--workload: unknown workload '%s' (expected mlp, vit, vit-small or graph)",
                          name);
    }
    json_decref(o);
    if (status == IPU_OK)
        status = ipu_workload_prepare_values(ctx, w);
    if (status == IPU_OK)
        status = number_canonically(ctx, w);
    if (status != IPU_OK) {
        ipu_workload_free(w);
        return status;
    }
    *out = w;
    return IPU_OK;
}

ipu_status ipu_workload_info_json(ipu_ctx *ctx, const ipu_workload *w, char **out_json)
{
    if (!w || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_workload_info_json: missing argument");
    return take_json(ctx, ipu_workload_describe(w), out_json);
}

ipu_status ipu_workload_values(ipu_ctx *ctx, const ipu_workload *w, const char *tensor,
                               const float **out_data, size_t *out_count)
{
    if (!out_data || !out_count)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_workload_values: missing output");
    uint32_t id = 0;
    return find_values(ctx, w, tensor, &id, out_data, out_count);
}

ipu_status ipu_workload_device_bytes(ipu_ctx *ctx, const ipu_workload *w, const char *tensor,
                                     void **out_bytes, size_t *out_size)
{
    if (!out_bytes || !out_size)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_workload_device_bytes: missing output");
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

ipu_status ipu_workload_set_values(ipu_ctx *ctx, ipu_workload *w, const char *tensor, const float *data,
                                   size_t count)
{
    uint32_t id = 0;
    IPU_TRY(find_value_tensor(ctx, w, tensor, &id));
    const ipu_ir_tensor *t = &w->graph.tensors[id];
    uint64_t expected = (uint64_t)t->rows * t->cols * t->sequence;
    if (!w->specs[id].given)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "tensor '%s': its values are generated (normal, stream %llu), not given", tensor,
                        (unsigned long long)w->specs[id].stream);
    if (w->specs[id].read)
        return IPU_FAIL(ctx, IPU_ERR_STATE,
                        "tensor '%s': its values were read already (by a compile, a reference or "
                        "ipu_workload_values): give them before anything reads them", tensor);
    if (!data)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "tensor '%s': no values given (NULL data)", tensor);
    if (count != expected)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "tensor '%s' takes %llu values (%u x %u x %u members), not %zu", tensor,
                        (unsigned long long)expected, t->rows, t->cols, t->sequence, count);
    for (size_t i = 0; i < count; i++)
        if (!isfinite(data[i]))
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "tensor '%s': value %zu is %g (expected finite values)",
                            tensor, i, (double)data[i]);
    float *copy = ipu_malloc(ctx, count * sizeof *copy);
    if (!copy)
        return IPU_NO_MEMORY(ctx);
    memcpy(copy, data, count * sizeof *copy);
    free(w->values[id]);
    w->values[id] = copy;
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
    if (!out_data || !out_count)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_reference_output: missing output");
    uint32_t id = 0;
    IPU_TRY(find_tensor(ctx, w, tensor, &id));
    const ipu_ir_tensor *t = &w->graph.tensors[id];
    if (t->role != IPU_ROLE_OUTPUT)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "tensor '%s' is %s: the reference keeps only outputs", tensor,
                        role_with_article(t->role));
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
