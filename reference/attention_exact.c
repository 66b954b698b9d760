/* attention_exact.c: attention of one (image, head) computed the way the
 * device's kernels compute it (kernels_attention.c), for the
 * device-precision reference when it knows the plan's attention mode.  Both
 * modes take the scores S = Q K^T as chains of FP32 fused multiply-adds
 * over head_dim (ipu_fma_product), which do not depend on how the device
 * groups query rows, then:
 *   flash: key blocks of 64 from key 0 (the planner's key chunks are
 *     multiples of 64), each scaling its scores, taking the running maximum,
 *     exponentials summed in key order, probabilities rounded to FP16, P V
 *     as fused multiply-add chains over the block's keys, the state rescaled
 *     by exp(old max - new max); split over key bands, each band's blocks
 *     from its first key into a state of its own, and the bands' states
 *     merged into the first's in band order (ipu_flash_merge); the output is
 *     O / l;
 *   materialized: scores scaled, each row's softmax (max, exponentials
 *     summed in key order, divided by the sum) rounded to FP16, then P V
 *     with one sgemm per query band, of the band's rows as the device's
 *     FP16 GEMM takes them (it decodes to FP32; OpenBLAS's sums depend on
 *     the row count).
 * Inputs are the FP16 values of q, k and v; out is FP32 (the caller rounds
 * the op's output to its type).
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fma_product.h"
#include "numerics/numerics.h"
#include "reference/reference.h"

#define FLASH_KEYS 64

/* Rows of n floats at stride ld, packed. */
static void pack(const float *src, size_t ld, size_t rows, size_t n, float *dst)
{
    for (size_t r = 0; r < rows; r++)
        memcpy(dst + r * n, src + r * ld, n * sizeof *dst);
}

ipu_status ipu_reference_attend_exact(ipu_ctx *ctx, int mode, const float *q, size_t ldq, size_t nq,
                                      const float *k, const float *v, size_t ldkv, size_t nk, size_t d,
                                      float scale, const ipu_reference_bands *bands, float *out, size_t ldo)
{
    size_t block = mode == IPU_REF_ATTENTION_FLASH ? FLASH_KEYS : nk;
    block = block < nk ? block : nk;
    size_t floats = nq * d + 2 * nk * d + d * nq + block * nq + nq * block + nq * d + 4 * nq + nq * d +
                    2 * nq * (d + 2);
    float *qp = ipu_malloc(ctx, floats * sizeof *qp);
    if (!qp)
        return IPU_ERR_NO_MEMORY; /* the caller records it, outside its parallel loop */
    float *kp = qp + nq * d, *vp = kp + nk * d, *qt = vp + nk * d, *st = qt + d * nq;
    float *s = st + block * nq, *pv = s + nq * block, *m = pv + nq * d, *l = m + nq;
    float *alpha = l + nq, *rowsum = alpha + nq, *o = rowsum + nq, *states = o + nq * d;
    pack(q, ldq, nq, d, qp);
    pack(k, ldkv, nk, d, kp);
    pack(v, ldkv, nk, d, vp);
    if (mode == IPU_REF_ATTENTION_MATERIALIZED) {
        ipu_fma_scores(qp, kp, qt, s, nq, nk, d);
        for (size_t i = 0; i < nq * nk; i++)
            s[i] *= scale;
        for (size_t r = 0; r < nq; r++) {
            float *row = s + r * nk, mr = ipu_scale_max(row, nk, 1.0f), sum = 0.0f;
            for (size_t j = 0; j < nk; j++) {
                row[j] = expf(row[j] - mr);
                sum += row[j];
            }
            for (size_t j = 0; j < nk; j++)
                row[j] = row[j] / sum;
            ipu_num_round(IPU_DT_F16, 0, row, nk);
        }
        uint32_t count = bands && bands->count ? bands->count : 1;
        for (uint32_t b = 0; b < count; b++) {
            size_t lo = bands && bands->count ? bands->bounds[b] : 0;
            size_t hi = bands && bands->count ? bands->bounds[b + 1] : nq;
            if (hi > lo)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(hi - lo), (int)d, (int)nk, 1.0f,
                            s + lo * nk, (int)nk, vp, (int)d, 0.0f, pv + lo * d, (int)d);
        }
        for (size_t r = 0; r < nq; r++)
            memcpy(out + r * ldo, pv + r * d, d * sizeof *out);
        free(qp);
        return IPU_OK;
    }
    /* Each key band into its own state rows [m, l, O] (states), merged into the first's in order. */
    uint32_t count = bands && bands->count ? bands->count : 1;
    for (uint32_t band = 0; band < count; band++) {
        size_t lo = bands && bands->count ? bands->bounds[band] : 0;
        size_t hi = bands && bands->count ? bands->bounds[band + 1] : nk;
        for (size_t k0 = lo; k0 < hi; k0 += block) {
            size_t keys = hi - k0 < block ? hi - k0 : block;
            int accumulate = k0 > lo;
            ipu_fma_scores(qp, kp + k0 * d, qt, s, nq, keys, d);
            for (size_t r = 0; r < nq; r++)
                m[r] = ipu_flash_row(s + r * keys, keys, scale, accumulate, accumulate ? m[r] : 0.0f, &alpha[r],
                                     &rowsum[r]);
            ipu_fma_product(s, vp + k0 * d, pv, nq, keys, d);
            for (size_t r = 0; r < nq; r++) {
                float lr = 0.0f, *orow = o + r * d;
                const float *p = pv + r * d;
                if (accumulate) {
                    lr = alpha[r] * l[r];
                    for (size_t c = 0; c < d; c++)
                        orow[c] = alpha[r] * orow[c] + p[c];
                } else {
                    memcpy(orow, p, d * sizeof *orow);
                }
                l[r] = lr + rowsum[r];
            }
        }
        for (size_t r = 0; r < nq; r++) {
            float *row = states + (band ? nq * (d + 2) : 0) + r * (d + 2);
            row[0] = m[r], row[1] = l[r];
            memcpy(row + 2, o + r * d, d * sizeof *row);
            if (band)
                ipu_flash_merge(states + r * (d + 2), row, d);
        }
    }
    for (size_t r = 0; r < nq; r++) {
        l[r] = states[r * (d + 2) + 1];
        memcpy(o + r * d, states + r * (d + 2) + 2, d * sizeof *o);
    }
    for (size_t r = 0; r < nq; r++)
        for (size_t c = 0; c < d; c++)
            out[r * ldo + c] = o[r * d + c] / l[r];
    free(qp);
    return IPU_OK;
}

