/* device_plan.c: what the device-precision reference knows of a plan (see
 * reference.h ipu_reference_plan), read from the JSON a package's meta
 * records: the attention mode of each attention and MAP pooling op, the
 * query bands of a materialized one's P V products, and the blocks (and
 * reduction split) of each matmul.
 */
#include <stdlib.h>
#include <string.h>

#include "reference/reference.h"

#define BAD(...) IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "reference plan: " __VA_ARGS__)

/* The op a key names ("3"), or -1. */
static long op_of(const char *key, size_t op_count)
{
    char *end = NULL;
    unsigned long op = strtoul(key, &end, 10);
    return *key && !*end && op < op_count ? (long)op : -1;
}

/* An array of n + 1 ascending unsigned bounds from 0 to total (what: the
 * section and field, for the message). */
static ipu_status bounds(ipu_ctx *ctx, const json_t *array, const char *what, const char *key,
                         uint32_t total, uint32_t **out, uint32_t *n)
{
    size_t count = json_array_size(array);
    if (!json_is_array(array) || count < 2)
        return BAD("%s '%s' must hold at least two bounds", what, key);
    *out = ipu_malloc(ctx, count * sizeof **out);
    if (!*out)
        return IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < count; i++) {
        json_t *v = json_array_get(array, i);
        json_int_t b = json_is_integer(v) ? json_integer_value(v) : -1;
        if (b < 0 || b > total || (i && b < (*out)[i - 1]) || (i == 0 && b) ||
            (i + 1 == count && b != total))
            return BAD("%s '%s' must rise from 0 to %u", what, key, total);
        (*out)[i] = (uint32_t)b;
    }
    *n = (uint32_t)(count - 1);
    return IPU_OK;
}

ipu_status ipu_reference_plan_parse(ipu_ctx *ctx, const json_t *meta, const ipu_graph *g,
                                    ipu_reference_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->op_count = g->op_count;
    plan->attention = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *plan->attention);
    plan->matmuls = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *plan->matmuls);
    plan->bands = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *plan->bands);
    if (!plan->attention || !plan->matmuls || !plan->bands)
        return IPU_NO_MEMORY(ctx);
    const json_t *attention = json_object_get(meta, "attention"), *bands = json_object_get(meta, "attention_bands");
    const json_t *matmuls = json_object_get(meta, "matmuls");
    const char *key;
    json_t *value;
    if (attention && !json_is_object(attention))
        return BAD("'attention' must be an object of op index -> mode");
    json_object_foreach((json_t *)attention, key, value) {
        long op = op_of(key, g->op_count);
        const char *mode = json_string_value(value);
        if (op < 0 || !mode || (strcmp(mode, "flash") && strcmp(mode, "materialized")) ||
            (g->ops[op].kind != IPU_IR_ATTENTION && g->ops[op].kind != IPU_IR_MAP_POOL))
            return BAD("attention '%s': expected an attention or MAP pooling op and \"flash\" or "
                       "\"materialized\"",
                       key);
        plan->attention[op] = !strcmp(mode, "flash") ? IPU_REF_ATTENTION_FLASH : IPU_REF_ATTENTION_MATERIALIZED;
    }
    if (bands && !json_is_object(bands))
        return BAD("'attention_bands' must be an object of op index -> query or key bounds");
    json_object_foreach((json_t *)bands, key, value) {
        long op = op_of(key, g->op_count);
        if (op < 0 || !plan->attention[op])
            return BAD("attention_bands '%s': expected an attention or MAP pooling op with a mode", key);
        /* Materialized: bounds of the queries; flash: of the keys. */
        uint32_t total = g->ops[op].kind == IPU_IR_MAP_POOL && plan->attention[op] == IPU_REF_ATTENTION_MATERIALIZED
                             ? 1
                             : g->ops[op].seq;
        IPU_TRY(bounds(ctx, value, "attention_bands", key, total, &plan->bands[op].bounds, &plan->bands[op].count));
    }
    if (matmuls && !json_is_object(matmuls))
        return BAD("'matmuls' must be an object of op index -> blocks");
    json_object_foreach((json_t *)matmuls, key, value) {
        long op = op_of(key, g->op_count);
        if (op < 0 || g->ops[op].kind != IPU_IR_MATMUL || !json_is_object(value))
            return BAD("matmuls '%s': expected a matmul op and its blocks", key);
        ipu_reference_blocks *m = &plan->matmuls[op];
        const ipu_ir_tensor *a = &g->tensors[g->ops[op].in[0]], *b = &g->tensors[g->ops[op].in[1]];
        IPU_TRY(bounds(ctx, json_object_get(value, "row_blocks"), "matmuls: 'row_blocks' of", key, a->rows,
                       &m->row_blocks, &m->row_block_count));
        IPU_TRY(bounds(ctx, json_object_get(value, "col_bounds"), "matmuls: 'col_bounds' of", key, b->cols,
                       &m->col_bounds, &m->col_block_count));
        IPU_TRY(bounds(ctx, json_object_get(value, "k_bounds"), "matmuls: 'k_bounds' of", key, a->cols,
                       &m->k_bounds, &m->parts));
        IPU_TRY(bounds(ctx, json_object_get(value, "row_bounds"), "matmuls: 'row_bounds' of", key, a->rows,
                       &m->row_bounds, &m->row_bands));
        if (m->row_bands != m->row_block_count * m->parts)
            return BAD("matmuls '%s': %u row bands for %u row blocks of %u parts", key, m->row_bands,
                       m->row_block_count, m->parts);
    }
    return IPU_OK;
}

void ipu_reference_plan_free(ipu_reference_plan *plan)
{
    for (size_t i = 0; plan->matmuls && i < plan->op_count; i++) {
        free(plan->matmuls[i].row_blocks);
        free(plan->matmuls[i].col_bounds);
        free(plan->matmuls[i].k_bounds);
        free(plan->matmuls[i].row_bounds);
    }
    for (size_t i = 0; plan->bands && i < plan->op_count; i++)
        free(plan->bands[i].bounds);
    free(plan->attention);
    free(plan->bands);
    free(plan->matmuls);
    memset(plan, 0, sizeof *plan);
}
