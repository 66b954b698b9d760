/* fma_product.h: a small FP32 matrix product whose every output is one
 * chain of fused multiply-adds in a fixed order (see the .c file). */
#ifndef IPU_FMA_PRODUCT_H
#define IPU_FMA_PRODUCT_H

#include <stddef.h>

/* out (rows x cols) = a (rows x inner) b (inner x cols), all packed
 * row-major: out[r][c] is acc = fma(a[r][i], b[i][c], acc) for i = 0 ..
 * inner-1 in order, from acc = +0. */
void ipu_fma_product(const float *a, const float *b, float *out, size_t rows, size_t inner,
                     size_t cols);

#endif
