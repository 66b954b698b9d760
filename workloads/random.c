/* random.c: counter-based random values: element i of stream s under seed S
 * is a pure function of (S, s, i) (splitmix64 of the counter, Box-Muller), so
 * any slice can be generated independently and in parallel; and generating
 * a workload's inputs and parameters from them (stream = tensor index), with
 * the option helper the builders share.
 */
#include <math.h>
#include <stdlib.h>

#include "workloads/workload.h"

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A uniform double in (0, 1) from 53 random bits. */
static double uniform(uint64_t bits) { return ((double)(bits >> 11) + 0.5) * 0x1.0p-53; }

void ipu_random_normal(uint64_t seed, uint64_t stream, uint64_t offset, float *out, size_t n,
                       float scale)
{
    uint64_t key = mix(seed ^ mix(stream + 0x9E3779B97F4A7C15ull));
    for (size_t i = 0; i < n; i++) {
        uint64_t index = offset + i;
        /* Each pair of elements shares one Box-Muller draw. */
        uint64_t pair = index >> 1;
        double u1 = uniform(mix(key + 2 * pair)), u2 = uniform(mix(key + 2 * pair + 1));
        double radius = sqrt(-2.0 * log(u1)), angle = 6.283185307179586 * u2;
        double z = (index & 1) ? radius * sin(angle) : radius * cos(angle);
        out[i] = (float)(z * scale);
    }
}

void ipu_default_values(const ipu_ir_tensor *t, float *scale, float *offset)
{
    *scale = t->role == IPU_ROLE_PARAM ? (float)(1.0 / sqrt((double)t->rows)) : 1.0f;
    *offset = 0.0f;
}

ipu_status ipu_workload_generate(ipu_ctx *ctx, ipu_workload *w)
{
    ipu_graph *g = &w->graph;
    w->values = ipu_calloc(ctx, g->tensor_count, sizeof *w->values);
    if (!w->values)
        return IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < g->tensor_count; i++) {
        const ipu_ir_tensor *t = &g->tensors[i];
        if (t->role != IPU_ROLE_INPUT && t->role != IPU_ROLE_PARAM)
            continue;
        uint64_t count = (uint64_t)t->rows * t->cols * t->sequence;
        float *v = ipu_malloc(ctx, count * sizeof *v);
        if (!v)
            return IPU_NO_MEMORY(ctx);
        w->values[i] = v;
        float scale, offset;
        (w->value_rule ? w->value_rule : ipu_default_values)(t, &scale, &offset);
        /* Chunks of 64Ki values in parallel, 256 chunks (a fraction of a
         * second) between cancel checks. */
        const int64_t chunk = 65536, chunks = (int64_t)((count + chunk - 1) / chunk), slice = 256;
        for (int64_t first = 0; first < chunks; first += slice) {
            IPU_TRY(IPU_CHECK_CANCEL(ctx));
            int64_t last = first + slice < chunks ? first + slice : chunks;
#pragma omp parallel for schedule(static)
            for (int64_t c = first; c < last; c++) {
                uint64_t start = (uint64_t)c * chunk;
                size_t n = count - start < (uint64_t)chunk ? (size_t)(count - start) : (size_t)chunk;
                ipu_random_normal(w->seed, i, start, v + start, n, scale);
                for (size_t e = 0; offset != 0.0f && e < n; e++)
                    v[start + e] += offset;
            }
        }
    }
    return IPU_OK;
}

ipu_status ipu_option_uint(ipu_ctx *ctx, const json_t *o, const char *key, uint32_t fallback,
                           uint32_t lo, uint32_t hi, const char *flag, uint32_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!v) {
        *out = fallback;
        return IPU_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)lo ||
        json_integer_value(v) > (json_int_t)hi)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "%s: expected an integer in %u..%u", flag, lo,
                        hi);
    *out = (uint32_t)json_integer_value(v);
    return IPU_OK;
}
