/* fma_product.c: the attention kernels' FP32 products (the scores as
 * S^T = K Q^T, and P V).  Every output is one chain of fused multiply-adds over
 * the inner dimension in order, so the AVX-512 path, which runs 16 such
 * chains per instruction, and the portable fmaf loop give the same bits on
 * every host.  The blocks are small (a few query rows, at most 64 keys in a
 * flash block), where a BLAS call costs more in setup than in arithmetic.
 * The scores built on it, the scaled maximum of a row, the flash row
 * update and the merge of two flash states live here too, so the kernels and
 * the device-precision reference share them.
 */
#include <math.h>

#include "kernels/fma_product.h"
#include "numerics/numerics.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* The first n (clamped to 0..16) lanes of a vector. */
static __mmask16 lanes(ptrdiff_t n)
{
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* Blocks of 8 rows by 16 columns: eight independent chains per column keep
 * the FMA units busy despite each chain's latency.  A block past the last
 * row repeats the last row and does not store it. */
__attribute__((target("avx512f"))) static void product_avx512(const float *a, const float *b,
                                                               float *out, size_t rows,
                                                               size_t inner, size_t cols)
{
    for (size_t c = 0; c < cols; c += 16) {
        __mmask16 m = lanes((ptrdiff_t)(cols - c));
        for (size_t r = 0; r < rows; r += 8) {
            const float *ar[8];
            __m512 acc[8];
            for (size_t k = 0; k < 8; k++) {
                ar[k] = a + (r + k < rows ? r + k : rows - 1) * inner;
                acc[k] = _mm512_setzero_ps();
            }
            for (size_t i = 0; i < inner; i++) {
                __m512 y = _mm512_maskz_loadu_ps(m, b + i * cols + c);
#pragma GCC unroll 8
                for (size_t k = 0; k < 8; k++)
                    acc[k] = _mm512_fmadd_ps(_mm512_set1_ps(ar[k][i]), y, acc[k]);
            }
            for (size_t k = 0; k < 8 && r + k < rows; k++)
                _mm512_mask_storeu_ps(out + (r + k) * cols + c, m, acc[k]);
        }
    }
}
#endif

void ipu_fma_product(const float *a, const float *b, float *out, size_t rows, size_t inner,
                     size_t cols)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) {
        product_avx512(a, b, out, rows, inner, cols);
        return;
    }
#endif
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < cols; c++) {
            float acc = 0.0f;
            for (size_t i = 0; i < inner; i++)
                acc = fmaf(a[r * inner + i], b[i * cols + c], acc);
            out[r * cols + c] = acc;
        }
    }
}

void ipu_fma_scores(const float *q, const float *k, float *t, float *s, size_t rows, size_t keys,
                    size_t d)
{
    float *qt = t, *st = t + d * rows;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < d; c++)
            qt[c * rows + r] = q[r * d + c];
    ipu_fma_product(k, qt, st, keys, d, rows);
    for (size_t j = 0; j < keys; j++)
        for (size_t r = 0; r < rows; r++)
            s[r * keys + j] = st[j * rows + r];
}

float ipu_scale_max(float *x, size_t n, float scale)
{
    float m = -INFINITY;
    for (size_t j = 0; j < n; j++) {
        x[j] *= scale;
        if (x[j] > m)
            m = x[j];
    }
    return m;
}

float ipu_flash_row(float *sr, size_t keys, float scale, int accumulate, float m_old, float *alpha,
                    float *sum)
{
    float m_new = ipu_scale_max(sr, keys, scale);
    if (!accumulate)
        m_old = -INFINITY;
    else if (m_old > m_new || isnan(m_old))
        m_new = m_old;
    float total = 0.0f;
    for (size_t j = 0; j < keys; j++) {
        sr[j] = expf(sr[j] - m_new);
        total += sr[j];
    }
    ipu_num_round(IPU_DT_F16, 0, sr, keys);
    *alpha = accumulate ? expf(m_old - m_new) : 0.0f;
    *sum = total;
    return m_new;
}

void ipu_flash_merge(float *acc, const float *other, size_t d)
{
    float m = acc[0] > other[0] || isnan(acc[0]) ? acc[0] : other[0];
    float a = expf(acc[0] - m), b = expf(other[0] - m);
    float l_acc = a * acc[1], l_other = b * other[1];
    acc[0] = m;
    acc[1] = l_acc + l_other;
    for (size_t c = 0; c < d; c++) {
        float o_acc = a * acc[2 + c], o_other = b * other[2 + c];
        acc[2 + c] = o_acc + o_other;
    }
}
