/* fma_product.h: a small FP32 matrix product whose every output is one
 * chain of fused multiply-adds in a fixed order (see the .c file), and the
 * attention scores built on it, shared by the kernels and the reference. */
#ifndef IPU_FMA_PRODUCT_H
#define IPU_FMA_PRODUCT_H

#include <stddef.h>

/* out (rows x cols) = a (rows x inner) b (inner x cols), all packed
 * row-major: out[r][c] is acc = fma(a[r][i], b[i][c], acc) for i = 0 ..
 * inner-1 in order, from acc = +0. */
void ipu_fma_product(const float *a, const float *b, float *out, size_t rows, size_t inner,
                     size_t cols);

/* Attention scores s (rows x keys) = q (rows x d) k^T (keys x d), packed, as
 * the attention kernels compute them: S^T = K Q^T by ipu_fma_product (the
 * few query rows are cheaper to transpose than the keys); t has room for
 * d x rows + keys x rows floats.  The device-precision reference calls the
 * same function, so both agree bit for bit. */
void ipu_fma_scores(const float *q, const float *k, float *t, float *s, size_t rows, size_t keys,
                    size_t d);

/* Scale x[0..n) in place; returns the largest scaled value (-inf when n is 0). */
float ipu_scale_max(float *x, size_t n, float scale);

/* One query row of a flash-attention key block, as the flash kernel updates
 * it: the scores sr[0..keys) scaled, exponentiated against the running
 * maximum (m_old, taken when accumulate) and rounded to FP16; returns the new
 * maximum, with *alpha the factor that rescales the old accumulator (0 on the
 * first block) and *sum the row's sum of the exponentials. */
float ipu_flash_row(float *sr, size_t keys, float scale, int accumulate, float m_old, float *alpha,
                    float *sum);

/* Merge one query row's flash state of later keys, other = [m, l, O_0 ..
 * O_{d-1}], into acc (the state of the keys before them), as ATTN_MERGE
 * does: m = max(m_acc, m_other), a = expf(m_acc - m), b = expf(m_other - m),
 * l = a l_acc + b l_other and O = a O_acc + b O_other, each product rounded
 * to FP32 before the sum. */
void ipu_flash_merge(float *acc, const float *other, size_t d);

#endif
