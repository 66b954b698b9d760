/* random.c: counter-based random values: element i of stream s under seed S
 * is a pure function of (S, s, i) (splitmix64 of the counter, a ziggurat), so
 * any slice can be generated independently and in parallel; and a
 * workload's inputs and parameters made from them on first use (stream and
 * scale as each tensor's spec says; a builder's stream is the tensor index),
 * or given by the caller: as FP32 values, kept for the references, or straight to
 * device-typed bytes, a chunk at a time, for a compile that needs no FP32
 * copy; with the option helper the builders share.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/numerics.h"
#include "workloads/workload.h"

/* splitmix64's increment and finalizer. */
#define GOLDEN 0x9E3779B97F4A7C15ull

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A uniform double in (0, 1) from 53 random bits. */
static double uniform(uint64_t bits) { return ((double)(bits >> 11) + 0.5) * 0x1.0p-53; }

/* The ziggurat of Marsaglia and Tsang (2000): the normal density's right
 * half covered by LAYERS boxes of equal area, the bottom one carrying the
 * tail beyond R.  A draw takes a box (7 bits) and a signed 32-bit position
 * in it from separate bits of one 64-bit word (not the same bits, Doornik
 * 2005); inside the box's core it is the value at once, else the box's
 * wedge or the tail is tested with further words. */
#define LAYERS 128
#define R 3.442619855899
#define BOX_AREA 9.91256303526217e-3

typedef struct ziggurat {
    uint32_t core[LAYERS];  /* |position| below this (of 2^31): inside the core */
    double width[LAYERS];   /* position to value */
    double density[LAYERS]; /* exp(-x^2/2) at the box's outer edge */
} ziggurat;

static void ziggurat_init(ziggurat *z)
{
    const double m = 0x1.0p31;
    double edge = R, previous = R, q = BOX_AREA / exp(-0.5 * R * R);
    z->core[0] = (uint32_t)(R / q * m);
    z->core[1] = 0;
    z->width[0] = q / m;
    z->width[LAYERS - 1] = R / m;
    z->density[0] = 1.0;
    z->density[LAYERS - 1] = exp(-0.5 * R * R);
    for (int i = LAYERS - 2; i >= 1; i--) {
        edge = sqrt(-2.0 * log(BOX_AREA / edge + exp(-0.5 * edge * edge)));
        z->core[i + 1] = (uint32_t)(edge / previous * m);
        previous = edge;
        z->density[i] = exp(-0.5 * edge * edge);
        z->width[i] = edge / m;
    }
}

/* The draw for element word `bits`; `bits` steps on (a new word from the
 * element's own sequence) whenever the draw needs more. */
static double ziggurat_draw(const ziggurat *z, uint64_t bits)
{
    for (uint64_t step = 1;; step++) {
        int32_t position = (int32_t)(uint32_t)(bits >> 32);
        uint32_t box = (uint32_t)bits & (LAYERS - 1);
        uint32_t magnitude = position < 0 ? 0u - (uint32_t)position : (uint32_t)position;
        double x = position * z->width[box];
        if (magnitude < z->core[box])
            return x;
        uint64_t next = mix(bits + step * GOLDEN);
        if (box == 0) { /* the tail beyond R (Marsaglia 1964) */
            for (;; step++) {
                double tx = -log(uniform(next)) / R;
                next = mix(next + step * GOLDEN);
                double ty = -log(uniform(next));
                if (ty + ty >= tx * tx)
                    return position > 0 ? R + tx : -R - tx;
                next = mix(next + step * GOLDEN);
            }
        }
        if (z->density[box] + uniform(next) * (z->density[box - 1] - z->density[box]) < exp(-0.5 * x * x))
            return x;
        bits = mix(next + step * GOLDEN);
    }
}

void ipu_random_normal(uint64_t seed, uint64_t stream, uint64_t offset, float *out, size_t n,
                       float scale)
{
    ziggurat z;
    ziggurat_init(&z);
    uint64_t key = mix(seed ^ mix(stream + GOLDEN));
    for (size_t i = 0; i < n; i++)
        out[i] = (float)(ziggurat_draw(&z, mix(key + (offset + i) * GOLDEN)) * scale);
}

void ipu_default_values(const ipu_ir_tensor *t, float *scale, float *offset)
{
    *scale = t->role == IPU_ROLE_PARAM ? (float)(1.0 / sqrt((double)t->rows)) : 1.0f;
    *offset = 0.0f;
}

ipu_status ipu_workload_prepare_values(ipu_ctx *ctx, ipu_workload *w)
{
    size_t n = w->graph.tensor_count ? w->graph.tensor_count : 1;
    w->values = ipu_calloc(ctx, n, sizeof *w->values);
    if (!w->values)
        return IPU_NO_MEMORY(ctx);
    if (w->specs)
        return IPU_OK;
    w->specs = ipu_calloc(ctx, n, sizeof *w->specs);
    if (!w->specs)
        return IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < w->graph.tensor_count; i++) {
        ipu_value_spec *s = &w->specs[i];
        (w->value_rule ? w->value_rule : ipu_default_values)(&w->graph.tensors[i], &s->scale, &s->offset);
        s->stream = i;
    }
    return IPU_OK;
}

static ipu_status check_value_tensor(ipu_ctx *ctx, const ipu_workload *w, uint32_t id)
{
    if (!w->values || id >= w->graph.tensor_count)
        return IPU_FAIL(ctx, IPU_ERR_STATE, "workload values: tensor %u of %zu%s", id, w->graph.tensor_count,
                        w->values ? "" : " (no value table)");
    const ipu_ir_tensor *t = &w->graph.tensors[id];
    if (t->role != IPU_ROLE_INPUT && t->role != IPU_ROLE_PARAM)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "workload values: '%s' is not an input or parameter",
                        t->name);
    if (!w->values[id] && (!w->specs || w->specs[id].given))
        return IPU_FAIL(ctx, IPU_ERR_STATE,
                        "workload values: %s '%s' takes given values (ipu_workload_set_values) and none "
                        "were given",
                        t->role == IPU_ROLE_INPUT ? "input" : "parameter", t->name);
    if (w->specs) /* the values are read from here on: they may no longer change */
        w->specs[id].read = 1;
    return IPU_OK;
}

/* Values per generation chunk, and chunks (a fraction of a second) between
 * cancel checks. */
#define CHUNK 65536
#define SLICE 256

/* Chunk c of tensor id's values (n of them) into out. */
static void chunk_values(const ipu_workload *w, uint32_t id, int64_t c, size_t n, float *out)
{
    const ipu_value_spec *s = &w->specs[id];
    ipu_random_normal(w->seed, s->stream, (uint64_t)c * CHUNK, out, n, s->scale);
    for (size_t e = 0; s->offset != 0.0f && e < n; e++)
        out[e] += s->offset;
}

/* Tensor id's values, a slice of chunks at a time between cancel checks:
 * made into `values` (all of them), or encoded at the tensor's type into
 * `bytes`, from the kept values or, when none are kept, from chunks made
 * into a slice-sized scratch. */
static ipu_status make_chunks(ipu_ctx *ctx, const ipu_workload *w, uint32_t id, float *values, uint8_t *bytes)
{
    const ipu_ir_tensor *t = &w->graph.tensors[id];
    uint64_t count = (uint64_t)t->rows * t->cols * t->sequence;
    size_t elem = ipu_dtype_size(t->dtype);
    const int64_t chunks = (int64_t)((count + CHUNK - 1) / CHUNK);
    const float *kept = w->values[id];
    uint64_t slice = count < (uint64_t)SLICE * CHUNK ? count : (uint64_t)SLICE * CHUNK;
    float *scratch = values || kept ? NULL : ipu_malloc(ctx, (slice ? slice : 1) * sizeof *scratch);
    ipu_status status = values || kept || scratch ? IPU_OK : IPU_NO_MEMORY(ctx);
    for (int64_t first = 0; first < chunks && status == IPU_OK; first += SLICE) {
        status = IPU_CHECK_CANCEL(ctx);
        int64_t last = first + SLICE < chunks ? first + SLICE : chunks;
#pragma omp parallel for schedule(static) if (status == IPU_OK && last - first > 1)
        for (int64_t c = first; c < last; c++) {
            uint64_t start = (uint64_t)c * CHUNK;
            size_t n = count - start < CHUNK ? (size_t)(count - start) : CHUNK;
            float *made = values ? values + start : scratch ? scratch + (size_t)(c - first) * CHUNK : NULL;
            if (made)
                chunk_values(w, id, c, n, made);
            if (bytes)
                ipu_num_encode(t->dtype, t->scale, made ? made : kept + start, bytes + start * elem, n);
        }
    }
    free(scratch);
    return status;
}

ipu_status ipu_workload_values_of(ipu_ctx *ctx, const ipu_workload *w, uint32_t id, const float **out)
{
    IPU_TRY(check_value_tensor(ctx, w, id));
    if (!w->values[id]) {
        const ipu_ir_tensor *t = &w->graph.tensors[id];
        float *v = ipu_malloc(ctx, (uint64_t)t->rows * t->cols * t->sequence * sizeof *v);
        ipu_status status = v ? make_chunks(ctx, w, id, v, NULL) : IPU_NO_MEMORY(ctx);
        if (status != IPU_OK) {
            free(v);
            return status;
        }
        w->values[id] = v;
    }
    *out = w->values[id];
    return IPU_OK;
}

ipu_status ipu_workload_device_bytes_of(ipu_ctx *ctx, const ipu_workload *w, uint32_t id, void *out)
{
    IPU_TRY(check_value_tensor(ctx, w, id));
    return make_chunks(ctx, w, id, NULL, out);
}

ipu_status ipu_workload_typed_values_of(ipu_ctx *ctx, const ipu_workload *w, uint32_t id, float *out)
{
    IPU_TRY(check_value_tensor(ctx, w, id));
    const ipu_ir_tensor *t = &w->graph.tensors[id];
    uint64_t count = (uint64_t)t->rows * t->cols * t->sequence;
    uint8_t *bytes = ipu_malloc(ctx, count * ipu_dtype_size(t->dtype) + 1);
    ipu_status status = bytes ? make_chunks(ctx, w, id, NULL, bytes) : IPU_NO_MEMORY(ctx);
    if (status == IPU_OK)
        ipu_num_decode(t->dtype, t->scale, bytes, out, count);
    free(bytes);
    return status;
}

ipu_status ipu_options_known(ipu_ctx *ctx, const json_t *o, const char *what, const char *const *known,
                             size_t count)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)o, key, value)
    {
        size_t k = 0;
        while (k < count && strcmp(key, known[k]))
            k++;
        if (k < count)
            continue;
        char list[512] = "";
        for (size_t i = 0; i < count; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? (i + 1 < count ? ", " : " or ") : "",
                     known[i]);
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "%s: unknown option '%s' (expected %s)", what, key, list);
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
    {
        char *given = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        ipu_status status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "%s: expected an integer in %u..%u, got %.40s",
                                     flag, lo, hi, given ? given : "?");
        free(given);
        return status;
    }
    *out = (uint32_t)json_integer_value(v);
    return IPU_OK;
}
