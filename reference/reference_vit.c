/* reference_vit.c: the FP32 reference of the transformer ops (ir.h):
 * LayerNorm, self-attention of fused QKV and MAP pooling, following the
 * device kernels' definitions (kernels_norm.c, kernels_attention.c) in FP32.
 * LayerNorm: each row's sum and sum of squared deviations (each deviation
 * in FP32, squared in FP64) accumulate in FP64 in element order, the mean
 * and the biased variance are rounded to FP32, then z = (x - mean) * (1 /
 * sqrtf(var + eps)), g = z * gamma, y = g + beta in FP32.
 * Attention, per image and head (FP32 mode; the device-precision reference
 * of a plan whose attention mode it knows takes attention_exact.c's device
 * algorithms instead): S = Q K^T with one single-threaded cblas_sgemm,
 * multiplied by 1/sqrtf(head_dim) in FP32; each row's softmax
 * subtracts its max, takes expf, sums in FP32 in key order and divides; then
 * O = P V with one sgemm into the head's columns.  MAP pooling is the same
 * with one query row (shared by every image) per head.  The work is an
 * OpenMP loop over rows (LayerNorm) or over (image, head) pairs, each
 * computed by one thread in a fixed order, so the results are bit-identical
 * for any thread count; OpenBLAS must be single-threaded (reference.c sets
 * it).
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "reference/reference.h"

ipu_status ipu_reference_layernorm(ipu_ctx *ctx, const float *x, const float *gamma,
                                   const float *beta, float epsilon, uint32_t rows, uint32_t cols,
                                   int threads, float *out)
{
    (void)ctx;
    threads = threads > 0 ? threads : 1;
#pragma omp parallel for schedule(static) num_threads(threads) if ((uint64_t)rows * cols >= 32768)
    for (int64_t r = 0; r < (int64_t)rows; r++) {
        const float *row = x + (size_t)r * cols;
        double sum = 0, squares = 0;
        for (uint32_t c = 0; c < cols; c++)
            sum += row[c];
        float mean = (float)(sum / cols);
        for (uint32_t c = 0; c < cols; c++) {
            float d = row[c] - mean; /* as the kernel: the deviation in FP32, its square in FP64 */
            squares += (double)d * d;
        }
        float var = (float)(squares / cols), inv = 1.0f / sqrtf(var + epsilon);
        float *y = out + (size_t)r * cols;
        for (uint32_t c = 0; c < cols; c++) {
            float z = (row[c] - mean) * inv;
            float g = z * gamma[c];
            y[c] = g + beta[c];
        }
    }
    return IPU_OK;
}

/* out [nq x d] (stride ldo) = softmax(scale * q k^T) v for q [nq x d]
 * (stride ldq), k and v [nk x d] (stride ldkv); s holds nq * nk floats. */
static void attend(const float *q, int ldq, int nq, const float *k, const float *v, int ldkv,
                   int nk, int d, float scale, float *s, float *out, int ldo)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, d, 1.0f, q, ldq, k, ldkv, 0.0f, s,
                nk);
    for (int i = 0; i < nq; i++) {
        float *row = s + (size_t)i * nk, max = -INFINITY, sum = 0.0f;
        for (int j = 0; j < nk; j++) {
            row[j] *= scale;
            max = row[j] > max ? row[j] : max;
        }
        for (int j = 0; j < nk; j++) {
            row[j] = expf(row[j] - max);
            sum += row[j];
        }
        for (int j = 0; j < nk; j++)
            row[j] /= sum;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, d, nk, 1.0f, s, nk, v, ldkv, 0.0f,
                out, ldo);
}

/* One (image, head) in mode: FP32 math (attend, with its scores buffer) or
 * the device's algorithm (attention_exact.c), allocating with ctx's
 * allocator (from a parallel loop).  Returns 0 when out of memory. */
static int attend_in(ipu_ctx *ctx, int mode, const float *q, int ldq, int nq, const float *k,
                     const float *v, int ldkv, int nk, int d, float scale, const ipu_reference_bands *bands,
                     float *out, int ldo)
{
    if (mode != IPU_REF_ATTENTION_FP32)
        return ipu_reference_attend_exact(ctx, mode, q, (size_t)ldq, (size_t)nq, k, v, (size_t)ldkv,
                                          (size_t)nk, (size_t)d, scale, bands, out, (size_t)ldo) == IPU_OK;
    float *s = ipu_malloc(ctx, (size_t)nq * nk * sizeof *s);
    if (s)
        attend(q, ldq, nq, k, v, ldkv, nk, d, scale, s, out, ldo);
    free(s);
    return s != NULL;
}

static ipu_status too_large(ipu_ctx *ctx, uint32_t rows, uint32_t seq, uint32_t heads,
                            uint32_t head_dim)
{
    uint64_t c = (uint64_t)heads * head_dim;
    if (!seq || !c || rows % seq || 3 * c > INT_MAX || (uint64_t)seq * seq > INT_MAX ||
        rows > INT_MAX)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "reference: attention of %u rows in images of %u with %u heads of %u is "
                        "not supported",
                        rows, seq, heads, head_dim);
    return IPU_OK;
}

ipu_status ipu_reference_attention(ipu_ctx *ctx, const float *qkv, uint32_t rows, uint32_t seq,
                                   uint32_t heads, uint32_t head_dim, int threads, int mode,
                                   const ipu_reference_bands *bands, float *out)
{
    IPU_TRY(too_large(ctx, rows, seq, heads, head_dim));
    threads = threads > 0 ? threads : 1;
    int d = (int)head_dim, c = (int)(heads * head_dim), n = (int)seq;
    int64_t tasks = (int64_t)(rows / seq) * heads;
    float scale = 1.0f / sqrtf((float)head_dim);
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (tasks > 1)
    for (int64_t t = 0; t < tasks; t++) {
        size_t image = (size_t)(t / heads), h = (size_t)(t % heads);
        const float *base = qkv + image * n * 3 * (size_t)c + h * d;
        if (!attend_in(ctx, mode, base, 3 * c, n, base + c, base + 2 * (size_t)c, 3 * c, n, d, scale, bands,
                       out + image * n * (size_t)c + h * d, c)) {
#pragma omp atomic write
            failed = 1;
        }
    }
    return failed ? IPU_NO_MEMORY(ctx) : IPU_OK;
}

ipu_status ipu_reference_map_pool(ipu_ctx *ctx, const float *q, const float *kv, uint32_t rows,
                                  uint32_t seq, uint32_t heads, uint32_t head_dim, int threads, int mode,
                                  const ipu_reference_bands *bands, float *out)
{
    IPU_TRY(too_large(ctx, rows, seq, heads, head_dim));
    threads = threads > 0 ? threads : 1;
    int d = (int)head_dim, c = (int)(heads * head_dim), n = (int)seq;
    int64_t tasks = (int64_t)(rows / seq) * heads;
    float scale = 1.0f / sqrtf((float)head_dim);
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (tasks > 1)
    for (int64_t t = 0; t < tasks; t++) {
        size_t image = (size_t)(t / heads), h = (size_t)(t % heads);
        const float *base = kv + image * n * 2 * (size_t)c + h * d;
        if (!attend_in(ctx, mode, q + h * d, c, 1, base, base + c, 2 * c, n, d, scale, bands,
                       out + image * (size_t)c + h * d, c)) {
#pragma omp atomic write
            failed = 1;
        }
    }
    return failed ? IPU_NO_MEMORY(ctx) : IPU_OK;
}
