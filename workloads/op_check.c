/* op_check.c: the per-op check (ipu_check_ops, ipu_check_ops_on).  The
 * package runs once on a fresh simulator (or one the caller keeps) that
 * calls back at the end of every program phase; at the phase where the
 * package's capture table says an op's output is complete (every iteration,
 * for an op of the Repeat body) its blocks are read from tile memory and
 * decoded into the tensor.  The device-precision reference
 * computes the same op from the device's own inputs (the values the device
 * computed for them; inputs and parameters at their device types; attention
 * modes and matmul blocks as the package's meta records the plan's), so
 * each op is judged alone rather than through its predecessors' rounding, and
 * the two are compared by ipu_check_rows (atol = atol_rms x the RMS of the
 * reference op's output: op outputs differ in scale).  The first op in
 * execution order that fails is reported with its iteration, the element
 * that broke the bound worst, and the tile, address and allocation holding
 * it.  Only the latest value of each tensor is kept.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "numerics/numerics.h"
#include "reference/check.h"
#include "reference/reference.h"
#include "workloads/workload.h"

typedef struct op_stats {
    uint32_t checks, failures;
    double min_cosine, worst_atol_rms; /* the atol the op needed, over its output's RMS */
} op_stats;

typedef struct capture_key {
    uint32_t phase, op, index;
} capture_key;

typedef struct checker {
    ipu_ctx *ctx;
    const ipu_workload *w;
    const ipu_package *pkg;
    ipu_device *dev;
    ipu_check_criteria c; /* atol: a fraction of the reference output's RMS */
    float **latest;       /* per tensor: the device's latest value of an activation */
    float **typed;        /* per tensor: an input or parameter at its device values */
    ipu_reference_plan plan; /* attention modes and matmul blocks, as the package's meta records them */
    capture_key *keys;    /* captures by phase, then op */
    op_stats *stats;
    float *expected;
    uint8_t *block;
    size_t block_size;
    json_t *first; /* the first divergence, NULL while none */
    uint64_t compared;
} checker;

static int by_phase(const void *x, const void *y)
{
    const capture_key *a = x, *b = y;
    if (a->phase != b->phase)
        return a->phase < b->phase ? -1 : 1;
    if (a->op != b->op)
        return a->op < b->op ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static size_t elements(const ipu_ir_tensor *t) { return (size_t)t->rows * t->cols; }

static int is_value(const ipu_ir_tensor *t)
{
    return t->role == IPU_ROLE_INPUT || t->role == IPU_ROLE_PARAM;
}

/* The value op `op` reads for tensor id at iteration (IPU_NO_ITERATION
 * outside the body); NULL when the device has not produced it. */
static const float *input_value(const checker *k, size_t op, uint32_t id, uint32_t iteration)
{
    const ipu_graph *g = &k->w->graph;
    const ipu_ir_repeat *r = &g->repeat;
    const ipu_ir_tensor *t = &g->tensors[id];
    if (r->iterations && id == r->carried) {
        /* Before the first iteration's value exists it is carried_init's;
         * after it, the last value of carried_next. */
        int in_body = op >= r->first_op && op < (size_t)r->first_op + r->op_count;
        if (in_body && iteration == 0)
            id = r->carried_init;
        else if (r->carried_next != r->carried)
            id = r->carried_next;
        t = &g->tensors[id];
    }
    if (is_value(t)) {
        uint32_t member = t->sequence > 1 && iteration != IPU_NO_ITERATION ? iteration : 0;
        return k->typed[id] + (size_t)member * elements(t);
    }
    return k->latest[id];
}

/* Read capture i's block into out (the op's output tensor, decoded). */
static ipu_status read_block(checker *k, const ipu_pkg_capture *cap, const ipu_ir_tensor *t,
                             float *out)
{
    size_t elem = ipu_dtype_size(t->dtype), width = cap->col_hi - cap->col_lo;
    size_t bytes = (size_t)(cap->row_hi - cap->row_lo - 1) * cap->stride + width * elem;
    if (bytes > k->block_size) {
        uint8_t *grown = ipu_realloc(k->ctx, k->block, bytes);
        if (!grown)
            return IPU_NO_MEMORY(k->ctx);
        k->block = grown;
        k->block_size = bytes;
    }
    if (cap->row_hi > t->rows || cap->col_hi > t->cols)
        return IPU_FAIL(k->ctx, IPU_ERR_INTERNAL,
                        "op check: capture of op %u on tile %u (rows %u..%u, columns %u..%u) lies "
                        "outside tensor '%s' (%u x %u)",
                        cap->op, cap->tile, cap->row_lo, cap->row_hi, cap->col_lo, cap->col_hi,
                        t->name, t->rows, t->cols);
    IPU_TRY(ipu_device_read(k->ctx, k->dev, cap->tile, cap->address, k->block, bytes));
    for (uint32_t r = cap->row_lo; r < cap->row_hi; r++)
        ipu_num_decode(t->dtype, t->scale, k->block + (size_t)(r - cap->row_lo) * cap->stride,
                       out + (size_t)r * t->cols + cap->col_lo, width);
    return IPU_OK;
}

/* Where element (row, col) of op's output lies: its capture, or NULL. */
static const ipu_pkg_capture *holder(const checker *k, uint32_t op, uint32_t phase, uint32_t row,
                                     uint32_t col)
{
    for (size_t i = 0; i < k->pkg->capture_count; i++) {
        const ipu_pkg_capture *c = &k->pkg->captures[i];
        if (c->op == op && c->phase == phase && row >= c->row_lo && row < c->row_hi &&
            col >= c->col_lo && col < c->col_hi)
            return c;
    }
    return NULL;
}

/* The first divergence: the op, its iteration, the check and the tile,
 * address and allocation of the element that broke the bound worst. */
static json_t *divergence(const checker *k, uint32_t op, uint32_t phase, uint32_t iteration,
                          json_t *check)
{
    const ipu_graph *g = &k->w->graph;
    const ipu_ir_tensor *t = &g->tensors[g->ops[op].out];
    char label[160];
    ipu_pkg_compiler_op_label(k->pkg, op, label, sizeof label);
    json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:s, s:o, s:I, s:O}", "op", (json_int_t)op, "kind",
                          ipu_ir_op_name(g->ops[op].kind), "name", t->name, "label", label, "tensor",
                          t->name, "iteration",
                          iteration == IPU_NO_ITERATION ? json_null() : json_integer(iteration),
                          "phase", (json_int_t)phase, "check", check);
    json_t *worst = json_object_get(check, "worst_element");
    if (!o || !json_is_object(worst))
        return o;
    uint32_t row = (uint32_t)json_integer_value(json_object_get(worst, "row"));
    uint32_t col = (uint32_t)json_integer_value(json_object_get(worst, "col"));
    const ipu_pkg_capture *c = holder(k, op, phase, row, col);
    if (c) {
        uint32_t address = c->address + (row - c->row_lo) * c->stride +
                           (col - c->col_lo) * (uint32_t)ipu_dtype_size(t->dtype);
        int64_t a = ipu_pkg_alloc_at(k->pkg, c->tile, address, phase);
        json_object_set_new(o, "tile", json_integer(c->tile));
        json_object_set_new(o, "address", json_integer(address));
        json_object_set_new(o, "allocation",
                            a >= 0 ? json_string(ipu_pkg_string(k->pkg, k->pkg->allocs[a].name_offset))
                                   : json_null());
    }
    return o;
}

/* Compare op's device output (complete at phase) with the reference's. */
static ipu_status compare(checker *k, uint32_t op, uint32_t phase, uint32_t iteration,
                          const capture_key *first, const capture_key *end)
{
    const ipu_graph *g = &k->w->graph;
    const ipu_ir_op *o = &g->ops[op];
    const ipu_ir_tensor *t = &g->tensors[o->out];
    size_t n = elements(t);
    if (!k->latest[o->out] && !(k->latest[o->out] = ipu_calloc(k->ctx, n ? n : 1, sizeof(float))))
        return IPU_NO_MEMORY(k->ctx);
    float *got = k->latest[o->out];
    const float *inputs[3] = {NULL, NULL, NULL};
    int ready = 1;
    for (int i = 0; i < ipu_ir_op_inputs(o); i++)
        ready &= (inputs[i] = input_value(k, op, o->in[i], iteration)) != NULL;
    if (ready)
        IPU_TRY(ipu_reference_device_op(k->ctx, k->w, op, &k->plan, inputs, k->expected));
    for (const capture_key *c = first; c < end; c++)
        IPU_TRY(read_block(k, &k->pkg->captures[c->index], t, got));
    if (!ready)
        return IPU_OK; /* an input the device never showed: this op cannot be judged alone */
    double squares = 0;
    for (size_t i = 0; i < n; i++)
        squares += (double)k->expected[i] * k->expected[i];
    double rms = n ? sqrt(squares / (double)n) : 0;
    ipu_check_criteria c = k->c;
    c.atol = k->c.atol * rms;
    json_t *check = NULL;
    IPU_TRY(ipu_check_rows(k->ctx, k->expected, got, IPU_DT_F32, 0, t->rows, t->cols, &c, &check));
    op_stats *s = &k->stats[op];
    double cosine = json_real_value(json_object_get(check, "min_cosine"));
    double needed = json_real_value(json_object_get(check, "atol_needed"));
    int passed = json_is_true(json_object_get(check, "passed"));
    if (s->checks == 0 || cosine < s->min_cosine)
        s->min_cosine = cosine;
    if (rms > 0 && needed / rms > s->worst_atol_rms)
        s->worst_atol_rms = needed / rms;
    s->checks++;
    s->failures += !passed;
    k->compared++;
    if (!passed && !k->first)
        k->first = divergence(k, op, phase, iteration, check);
    json_decref(check);
    return IPU_OK;
}

static ipu_status observe(void *user, uint32_t phase, uint32_t iteration)
{
    checker *k = user;
    size_t count = k->pkg->capture_count, lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (k->keys[mid].phase < phase)
            lo = mid + 1;
        else
            hi = mid;
    }
    while (lo < count && k->keys[lo].phase == phase) {
        size_t end = lo;
        while (end < count && k->keys[end].phase == phase && k->keys[end].op == k->keys[lo].op)
            end++;
        IPU_TRY(compare(k, k->keys[lo].op, phase, iteration, &k->keys[lo], &k->keys[end]));
        lo = end;
    }
    return IPU_OK;
}

/* Inputs and parameters at their device values (encoded, then decoded). */
static ipu_status type_values(checker *k)
{
    const ipu_graph *g = &k->w->graph;
    for (size_t i = 0; i < g->tensor_count; i++) {
        const ipu_ir_tensor *t = &g->tensors[i];
        if (!is_value(t))
            continue;
        size_t n = elements(t) * t->sequence;
        k->typed[i] = ipu_malloc(k->ctx, (n ? n : 1) * sizeof(float));
        if (!k->typed[i])
            return IPU_NO_MEMORY(k->ctx);
        IPU_TRY(ipu_workload_typed_values_of(k->ctx, k->w, (uint32_t)i, k->typed[i]));
    }
    return IPU_OK;
}

/* The device, its profile made from the package's. */
static ipu_status create_device(ipu_ctx *ctx, const ipu_package *pkg, ipu_device **out)
{
    json_t *profile = ipu_profile_to_json(&pkg->profile);
    char *text = profile ? json_dumps(profile, JSON_COMPACT) : NULL;
    json_decref(profile);
    if (!text)
        return IPU_NO_MEMORY(ctx);
    ipu_status status = ipu_device_create(ctx, text, out);
    free(text);
    return status;
}

/* The package's recorded inputs and parameters, given to the device. */
static ipu_status upload_inputs(checker *k)
{
    ipu_status status = IPU_OK;
    for (size_t i = 0; i < k->pkg->record_count && status == IPU_OK; i++) {
        const ipu_pkg_record *r = &k->pkg->records[i];
        if (r->kind == IPU_RECORD_INPUT && r->invocation == 0)
            status = ipu_device_set_stream(k->ctx, k->dev,
                                           ipu_pkg_string(k->pkg, k->pkg->streams[r->stream].name_offset),
                                           k->pkg->data + r->data_offset, r->size);
    }
    return status;
}

/* The result: counts, per op its checks, failures, lowest cosine and the
 * atol it needed (over its RMS), and the first divergence. */
static json_t *summary(const checker *k)
{
    const ipu_graph *g = &k->w->graph;
    json_t *ops = json_array();
    size_t failed = 0, unchecked = 0;
    for (size_t i = 0; i < g->op_count; i++) {
        const op_stats *s = &k->stats[i];
        failed += s->failures > 0;
        unchecked += s->checks == 0;
        char label[160];
        ipu_pkg_compiler_op_label(k->pkg, (uint32_t)i, label, sizeof label);
        json_array_append_new(ops, json_pack("{s:I, s:s, s:I, s:I, s:o, s:f}", "op", (json_int_t)i, "label",
                                             label, "checks", (json_int_t)s->checks, "failures",
                                             (json_int_t)s->failures,
                                             "min_cosine", s->checks ? json_real(s->min_cosine) : json_null(),
                                             "atol_rms_needed", s->worst_atol_rms));
    }
    return json_pack("{s:b, s:I, s:I, s:I, s:I, s:{s:f, s:f, s:f, s:f}, s:o, s:O}", "passed",
                     k->first == NULL && k->compared > 0, "ops", (json_int_t)g->op_count,
                     "compared", (json_int_t)k->compared, "failed_ops", (json_int_t)failed,
                     "unchecked_ops", (json_int_t)unchecked, "criteria", "min_cosine",
                     k->c.min_cosine, "atol_rms", k->c.atol, "rtol", k->c.rtol, "norm_tolerance",
                     k->c.norm_tolerance, "per_op", ops, "first_divergence",
                     k->first ? k->first : json_null());
}

ipu_status ipu_check_ops_on(ipu_ctx *ctx, ipu_device *dev, const ipu_workload *w, const ipu_package *pkg,
                            const char *criteria_json, char **out_json)
{
    if (!dev || !w || !pkg || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_check_ops: NULL argument");
    const ipu_graph *g = &w->graph;
    if (pkg->compiler_op_count != g->op_count)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "op check: the package names %zu compiler ops, the workload has %zu: it was "
                        "not compiled from this workload",
                        pkg->compiler_op_count, g->op_count);
    checker k = {ctx, w, pkg, dev, {0, 0, 0, 0}, NULL, NULL, {0}, NULL, NULL, NULL, NULL, 0, NULL, 0};
    IPU_TRY(ipu_check_parse_criteria(ctx, criteria_json, "atol_rms", &k.c));
    size_t largest = 1, slots = g->tensor_count ? g->tensor_count : 1;
    for (size_t i = 0; i < g->op_count; i++)
        if (elements(&g->tensors[g->ops[i].out]) > largest)
            largest = elements(&g->tensors[g->ops[i].out]);
    k.latest = ipu_calloc(ctx, slots, sizeof *k.latest);
    k.typed = ipu_calloc(ctx, slots, sizeof *k.typed);
    k.keys = ipu_malloc(ctx, (pkg->capture_count ? pkg->capture_count : 1) * sizeof *k.keys);
    k.stats = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *k.stats);
    k.expected = ipu_malloc(ctx, largest * sizeof(float));
    ipu_status status = k.latest && k.typed && k.keys && k.stats && k.expected ? IPU_OK : IPU_NO_MEMORY(ctx);
    json_t *meta = status == IPU_OK ? json_loads(pkg->meta_json, 0, NULL) : NULL;
    if (status == IPU_OK)
        status = ipu_reference_plan_parse(ctx, meta, g, &k.plan);
    json_decref(meta);
    for (size_t i = 0; status == IPU_OK && i < pkg->capture_count; i++)
        k.keys[i] = (capture_key){pkg->captures[i].phase, pkg->captures[i].op, (uint32_t)i};
    if (status == IPU_OK)
        qsort(k.keys, pkg->capture_count, sizeof *k.keys, by_phase);
    if (status == IPU_OK)
        status = type_values(&k);
    if (status == IPU_OK)
        status = upload_inputs(&k);
    if (status == IPU_OK) {
        ipu_device_observe(dev, observe, &k);
        status = ipu_device_initialize(ctx, dev, pkg);
    }
    char *cycles = NULL;
    if (status == IPU_OK)
        status = ipu_device_run(ctx, dev, &cycles);
    ipu_free(cycles);
    ipu_device_observe(dev, NULL, NULL);
    ipu_device_unload(dev);
    json_t *result = status == IPU_OK ? summary(&k) : NULL;
    if (status == IPU_OK && !result)
        status = IPU_NO_MEMORY(ctx);
    if (status == IPU_OK) {
        *out_json = json_dumps(result, JSON_COMPACT);
        if (!*out_json)
            status = IPU_NO_MEMORY(ctx);
    }
    json_decref(result);
    json_decref(k.first);
    for (size_t i = 0; i < g->tensor_count; i++) {
        if (k.latest)
            free(k.latest[i]);
        if (k.typed)
            free(k.typed[i]);
    }
    free(k.latest), free(k.typed), free(k.keys), free(k.stats), free(k.expected), free(k.block);
    ipu_reference_plan_free(&k.plan);
    return status;
}

ipu_status ipu_check_ops(ipu_ctx *ctx, const ipu_workload *w, const ipu_package *pkg,
                         const char *criteria_json, char **out_json)
{
    if (!pkg)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_check_ops: NULL argument");
    ipu_device *dev = NULL;
    ipu_status status = create_device(ctx, pkg, &dev);
    if (status == IPU_OK)
        status = ipu_check_ops_on(ctx, dev, w, pkg, criteria_json, out_json);
    ipu_device_free(dev);
    return status;
}
