/* kernels_attention.c: the attention family: row softmax, attention scores,
 * one FlashAttention key block, the merge of two flash states and the flash
 * finish.  Materialized attention
 * is ATTN_SCORES (S = scale * Q K^T, FP32) -> SOFTMAX (P, FP16) -> GEMM_F16
 * (P V); FlashAttention is ATTN_BLOCK per key block of up to 64 keys (first
 * block initializes, the rest accumulate; a short tail block such as 729 =
 * 11 x 64 + 25, or a padded block with a valid-key count) and ATTN_FINISH
 * (out = O / l).  A flash unit split over key bands runs the blocks of each
 * band on a tile of its own and ATTN_MERGE folds the bands' states into the
 * first's, in key order (ipu_flash_merge), before ATTN_FINISH.  MAP pooling is the same calls with one query row and a
 * padded key buffer (768 keys, 729 valid: the last block has valid 25).
 * All operands are row-major with row strides in elements (at least the row
 * width, at most 65535); bases are 8-byte aligned.  Q, K, V are FP16; scores,
 * statistics and the flash state are FP32; scale is an FP32 bit pattern and
 * must be finite.  The flash state is one FP32 operand, a row per query:
 * [m, l, O_0 .. O_{head_dim-1}] (running max of the scaled scores, running sum
 * of exp(s - m), unnormalized output), row stride ld_state >= head_dim + 2; it
 * must not share a memory element with Q, K or V (AMP operands), and the scores
 * must not share one with Q or K.  Numerics (defined, not hardware-exact): FP16
 * inputs decode exactly to FP32; each dot product is one chain of FP32 fused
 * multiply-adds over the head dimension in order (fma_product.c), then
 * multiplied by scale in FP32; softmax subtracts the row max, takes
 * expf, sums in FP32 in key order and divides each exp by the sum; the flash
 * merge is m' = max(m, max_j s_j), alpha = expf(m - m'), p_j = expf(s_j - m'),
 * l' = alpha l + sum_j p_j (FP32 p), O' = alpha O + P16 V where P16 is p rounded
 * to FP16 (the AMP's input type) and each element of P16 V is one chain of
 * FP32 fused multiply-adds over the keys in order; the initialize
 * mode (flags without IPU_GEMM_ACCUMULATE) starts from m = -inf, l = 0, O = 0
 * and does not read the state.  Masking: softmax reads only the first `valid`
 * columns of each source row and writes exact +0 to columns valid..cols-1;
 * ATTN_BLOCK reads all `keys` rows of K and V (the AMP runs on the padded
 * block, so padding must be written) but keys >= valid get probability exactly
 * 0 and never enter a product, so padding bits (NaN included) cannot reach the
 * result.  SOFTMAX and ATTN_FINISH decode all of their input before writing,
 * so they may run in place.  Non-finite inputs give NaN rows.  All five
 * entries share the attention worker body (softmax's max/exp/sum loop is
 * ATTN_BLOCK's).  Cycles, with v(n) = ceil(4 n / vector_bytes_per_cycle) (an
 * FP32 pass over n elements) and amp = amp_macs_fp16_fp32:
 *   softmax      10 + rows * (8 + 6 v(valid) + v(cols))
 *                 (per row: setup and the reciprocal; per valid element pair
 *                 scale, max, subtract, exp (2 ops), sum; a store pass over
 *                 all columns writing the normalized or zero values)
 *   attn_scores  amp_call_overhead + ceil(rows keys head_dim / amp) + 4 rows
 *                 + rows v(keys)   (the GEMM's row cost and a scale pass)
 *   attn_block   amp_call_overhead + 2 ceil(rows keys head_dim / amp)
 *                 + rows * (12 + 7 v(keys) + v(head_dim))
 *                 (two AMP products on the padded block; per row two AMP row
 *                 setups and the m/l/alpha merge; per key pair scale+mask,
 *                 max, subtract, exp (2), sum, cast to FP16; rescale of O)
 *   attn_finish  10 + rows * (8 + 2 v(head_dim))   (reciprocal; scale, cast)
 *   attn_merge   10 + rows * (16 + 3 v(head_dim))  (per row the maximum, two
 *                 exponentials and the sums' merge; per output pair two
 *                 products and their sum)
 * Both modes of ATTN_BLOCK cost the same (initialize writes O instead of
 * rescaling it).
 */
#include <math.h>
#include <string.h>

#include "kernels/fma_product.h"
#include "kernels/kernel_def.h"
#include "numerics/numerics.h"

#define ATTN_MAX_KEYS 64u
#define MAX_DIM 65535u
#define SOFTMAX_ROW 8u      /* per-row setup and reciprocal */
#define SOFTMAX_OPS 6u      /* FP32 vector ops per valid element pair */
#define SCORES_ROW 4u       /* the GEMM's per-row cost */
#define BLOCK_ROW 12u       /* two AMP row setups and the merge */
#define BLOCK_KEY_OPS 7u    /* FP32 vector ops per key pair */
#define FINISH_ROW 8u
#define FINISH_OPS 2u
#define MERGE_ROW 16u       /* the maximum, two exponentials and the sums' merge */
#define MERGE_OPS 3u        /* FP32 vector ops per output pair: two products and their sum */

enum { SM_SRC, SM_DST, SM_ROWS, SM_COLS, SM_VALID, SM_STYPE, SM_DTYPE, SM_LDS, SM_LDD, SM_SCALE };
enum { SC_Q, SC_K, SC_S, SC_ROWS, SC_KEYS, SC_DIM, SC_LDQ, SC_LDK, SC_LDS, SC_SCALE };
enum { BL_Q, BL_K, BL_V, BL_STATE, BL_ROWS, BL_KEYS, BL_VALID, BL_DIM, BL_LDQ, BL_LDK, BL_LDV,
       BL_LDSTATE, BL_SCALE, BL_FLAGS };
enum { FI_STATE, FI_OUT, FI_ROWS, FI_DIM, FI_LDSTATE, FI_LDOUT, FI_TYPE };
enum { MG_ACC, MG_OTHER, MG_ROWS, MG_DIM, MG_LDACC, MG_LDOTHER };

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int io_type(uint32_t t) { return t == IPU_DT_F32 || t == IPU_DT_F16; }
static int in_range(uint32_t v) { return v >= 1 && v <= MAX_DIM; }
/* Bytes of a strided operand: rows - 1 full strides and one row. */
static uint64_t extent(uint64_t rows, uint64_t ld, uint64_t width, uint64_t size)
{
    return ((rows - 1) * ld + width) * size;
}
/* An FP32 vector pass over n elements. */
static uint64_t vpass(uint64_t n, const ipu_profile *p)
{
    return ipu_ceil_div(4 * n, p->vector_bytes_per_cycle);
}

/* ---- describe --------------------------------------------------------------- */

static const char *describe_softmax(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    if (!in_range(a[SM_ROWS]) || !in_range(a[SM_COLS]))
        return "softmax rows and cols must be in 1..65535";
    if (a[SM_VALID] < 1 || a[SM_VALID] > a[SM_COLS])
        return "softmax valid count must be in 1..cols";
    if (!io_type(a[SM_STYPE]) || !io_type(a[SM_DTYPE]))
        return "softmax source and destination types must be f32 or f16";
    if (a[SM_LDS] < a[SM_VALID] || a[SM_LDD] < a[SM_COLS] || a[SM_LDS] > MAX_DIM ||
        a[SM_LDD] > MAX_DIM)
        return "softmax row strides must be at least valid (source) and cols (destination) "
               "and at most 65535";
    if (!isfinite(bits_f32(a[SM_SCALE])))
        return "softmax scale must be finite";
    ipu_kernel_operand(call, "src", a[SM_SRC],
                       extent(a[SM_ROWS], a[SM_LDS], a[SM_VALID], ipu_dtype_size((int)a[SM_STYPE])),
                       8, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "dst", a[SM_DST],
                       extent(a[SM_ROWS], a[SM_LDD], a[SM_COLS], ipu_dtype_size((int)a[SM_DTYPE])),
                       8, IPU_ACCESS_WRITE);
    return NULL;
}

static const char *describe_scores(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    if (!in_range(a[SC_ROWS]) || !in_range(a[SC_KEYS]) || !in_range(a[SC_DIM]))
        return "attn_scores rows, keys and head_dim must be in 1..65535";
    if (a[SC_LDQ] < a[SC_DIM] || a[SC_LDK] < a[SC_DIM] || a[SC_LDS] < a[SC_KEYS] ||
        a[SC_LDQ] > MAX_DIM || a[SC_LDK] > MAX_DIM || a[SC_LDS] > MAX_DIM)
        return "attn_scores row strides must be at least head_dim, head_dim, keys and at most "
               "65535";
    if (!isfinite(bits_f32(a[SC_SCALE])))
        return "attn_scores scale must be finite";
    ipu_kernel_operand(call, "q", a[SC_Q], extent(a[SC_ROWS], a[SC_LDQ], a[SC_DIM], 2), 8,
                       IPU_ACCESS_READ);
    ipu_kernel_operand(call, "k", a[SC_K], extent(a[SC_KEYS], a[SC_LDK], a[SC_DIM], 2), 8,
                       IPU_ACCESS_READ);
    ipu_kernel_operand(call, "scores", a[SC_S], extent(a[SC_ROWS], a[SC_LDS], a[SC_KEYS], 4), 8,
                       IPU_ACCESS_WRITE);
    ipu_kernel_separate(call, 0, 2);
    ipu_kernel_separate(call, 1, 2);
    return NULL;
}

static const char *describe_block(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    if (!in_range(a[BL_ROWS]) || !in_range(a[BL_DIM]) || a[BL_DIM] > MAX_DIM - 2)
        return "attn_block rows must be in 1..65535 and head_dim in 1..65533";
    if (a[BL_KEYS] < 1 || a[BL_KEYS] > ATTN_MAX_KEYS)
        return "attn_block keys must be in 1..64";
    if (a[BL_VALID] < 1 || a[BL_VALID] > a[BL_KEYS])
        return "attn_block valid count must be in 1..keys";
    if (a[BL_LDQ] < a[BL_DIM] || a[BL_LDK] < a[BL_DIM] || a[BL_LDV] < a[BL_DIM] ||
        a[BL_LDSTATE] < a[BL_DIM] + 2 || a[BL_LDQ] > MAX_DIM || a[BL_LDK] > MAX_DIM ||
        a[BL_LDV] > MAX_DIM || a[BL_LDSTATE] > MAX_DIM)
        return "attn_block row strides must be at least head_dim (q, k, v) and head_dim + 2 "
               "(state) and at most 65535";
    if (!isfinite(bits_f32(a[BL_SCALE])))
        return "attn_block scale must be finite";
    if (a[BL_FLAGS] & ~IPU_GEMM_ACCUMULATE)
        return "unknown attn_block flag bits";
    ipu_kernel_operand(call, "q", a[BL_Q], extent(a[BL_ROWS], a[BL_LDQ], a[BL_DIM], 2), 8,
                       IPU_ACCESS_READ);
    ipu_kernel_operand(call, "k", a[BL_K], extent(a[BL_KEYS], a[BL_LDK], a[BL_DIM], 2), 8,
                       IPU_ACCESS_READ);
    ipu_kernel_operand(call, "v", a[BL_V], extent(a[BL_KEYS], a[BL_LDV], a[BL_DIM], 2), 8,
                       IPU_ACCESS_READ);
    ipu_kernel_operand(call, "state", a[BL_STATE],
                       extent(a[BL_ROWS], a[BL_LDSTATE], a[BL_DIM] + 2, 4), 8,
                       (a[BL_FLAGS] & IPU_GEMM_ACCUMULATE) ? IPU_ACCESS_READ | IPU_ACCESS_WRITE
                                                           : IPU_ACCESS_WRITE);
    ipu_kernel_separate(call, 0, 3);
    ipu_kernel_separate(call, 1, 3);
    ipu_kernel_separate(call, 2, 3);
    return NULL;
}

static const char *describe_finish(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    if (!in_range(a[FI_ROWS]) || !in_range(a[FI_DIM]) || a[FI_DIM] > MAX_DIM - 2)
        return "attn_finish rows must be in 1..65535 and head_dim in 1..65533";
    if (a[FI_LDSTATE] < a[FI_DIM] + 2 || a[FI_LDOUT] < a[FI_DIM] || a[FI_LDSTATE] > MAX_DIM ||
        a[FI_LDOUT] > MAX_DIM)
        return "attn_finish row strides must be at least head_dim + 2 (state) and head_dim "
               "(out) and at most 65535";
    if (!io_type(a[FI_TYPE]))
        return "attn_finish output type must be f16 or f32";
    ipu_kernel_operand(call, "state", a[FI_STATE],
                       extent(a[FI_ROWS], a[FI_LDSTATE], a[FI_DIM] + 2, 4), 8, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "out", a[FI_OUT],
                       extent(a[FI_ROWS], a[FI_LDOUT], a[FI_DIM], ipu_dtype_size((int)a[FI_TYPE])),
                       8, IPU_ACCESS_WRITE);
    return NULL;
}

static const char *describe_merge(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    if (!in_range(a[MG_ROWS]) || !in_range(a[MG_DIM]) || a[MG_DIM] > MAX_DIM - 2)
        return "attn_merge rows must be in 1..65535 and head_dim in 1..65533";
    if (a[MG_LDACC] < a[MG_DIM] + 2 || a[MG_LDOTHER] < a[MG_DIM] + 2 || a[MG_LDACC] > MAX_DIM ||
        a[MG_LDOTHER] > MAX_DIM)
        return "attn_merge row strides must be at least head_dim + 2 and at most 65535";
    ipu_kernel_operand(call, "acc", a[MG_ACC], extent(a[MG_ROWS], a[MG_LDACC], a[MG_DIM] + 2, 4), 8,
                       IPU_ACCESS_READ | IPU_ACCESS_WRITE);
    ipu_kernel_operand(call, "other", a[MG_OTHER], extent(a[MG_ROWS], a[MG_LDOTHER], a[MG_DIM] + 2, 4), 8,
                       IPU_ACCESS_READ);
    return NULL;
}

/* ---- cycles ----------------------------------------------------------------- */

static uint64_t cycles_softmax(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    return IPU_VERTEX_OVERHEAD +
           (uint64_t)a[SM_ROWS] *
               (SOFTMAX_ROW + SOFTMAX_OPS * vpass(a[SM_VALID], p) + vpass(a[SM_COLS], p));
}

static uint64_t cycles_scores(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    uint64_t rows = a[SC_ROWS], macs = rows * a[SC_KEYS] * a[SC_DIM];
    return p->amp_call_overhead + ipu_ceil_div(macs, p->amp_macs_fp16_fp32) + SCORES_ROW * rows +
           rows * vpass(a[SC_KEYS], p);
}

static uint64_t cycles_block(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    uint64_t rows = a[BL_ROWS], macs = rows * a[BL_KEYS] * a[BL_DIM];
    return p->amp_call_overhead + 2 * ipu_ceil_div(macs, p->amp_macs_fp16_fp32) +
           rows * (BLOCK_ROW + BLOCK_KEY_OPS * vpass(a[BL_KEYS], p) + vpass(a[BL_DIM], p));
}

static uint64_t cycles_finish(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    return IPU_VERTEX_OVERHEAD +
           (uint64_t)a[FI_ROWS] * (FINISH_ROW + FINISH_OPS * vpass(a[FI_DIM], p));
}

static uint64_t cycles_merge(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    return IPU_VERTEX_OVERHEAD + (uint64_t)a[MG_ROWS] * (MERGE_ROW + MERGE_OPS * vpass(a[MG_DIM], p));
}

/* ---- scratch ---------------------------------------------------------------- */

static size_t scratch_softmax(const ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    return (size_t)a[SM_ROWS] * a[SM_VALID] + a[SM_COLS];
}

static size_t scratch_scores(const ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    size_t rows = a[SC_ROWS], keys = a[SC_KEYS], d = a[SC_DIM];
    return rows * d + keys * d + rows * keys + d * rows + keys * rows;
}

static size_t scratch_block(const ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    size_t rows = a[BL_ROWS], valid = a[BL_VALID], d = a[BL_DIM];
    return rows * d + 2 * valid * d + rows * valid + rows * d + rows * 2 + d * rows + valid * rows;
}

static size_t scratch_finish(const ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    return (size_t)a[FI_ROWS] * (a[FI_DIM] + 2);
}

static size_t scratch_merge(const ipu_kernel_call *call)
{
    return 2 * ((size_t)call->args[MG_DIM] + 2);
}

/* ---- bodies ----------------------------------------------------------------- */

/* Decode rows of a strided operand into a packed FP32 matrix. */
static void decode_rows(int type, const uint8_t *src, size_t ld, float *dst, size_t rows,
                        size_t cols)
{
    size_t size = ipu_dtype_size(type);
    if (ld == cols) {
        ipu_num_decode(type, 0, src, dst, rows * cols);
        return;
    }
    for (size_t r = 0; r < rows; r++)
        ipu_num_decode(type, 0, src + r * ld * size, dst + r * cols, cols);
}

/* Scale a row in place and return its max (NaNs are skipped here and spread
 * through the exps). */
static void run_softmax(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    const uint32_t *a = call->args;
    size_t rows = a[SM_ROWS], cols = a[SM_COLS], valid = a[SM_VALID];
    size_t dsize = ipu_dtype_size((int)a[SM_DTYPE]);
    float scale = bits_f32(a[SM_SCALE]), *x = scratch, *row = scratch + rows * valid;
    decode_rows((int)a[SM_STYPE], ptr[0], a[SM_LDS], x, rows, valid);
    for (size_t r = 0; r < rows; r++) {
        float *xr = x + r * valid, m = ipu_scale_max(xr, valid, scale), sum = 0.0f;
        for (size_t j = 0; j < valid; j++) {
            row[j] = expf(xr[j] - m);
            sum += row[j];
        }
        for (size_t j = 0; j < valid; j++)
            row[j] = row[j] / sum;
        for (size_t j = valid; j < cols; j++)
            row[j] = 0.0f;
        ipu_num_encode((int)a[SM_DTYPE], 0, row, ptr[1] + r * a[SM_LDD] * dsize, cols);
    }
}

static void run_scores(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    const uint32_t *a = call->args;
    size_t rows = a[SC_ROWS], keys = a[SC_KEYS], d = a[SC_DIM];
    float scale = bits_f32(a[SC_SCALE]);
    float *q = scratch, *k = q + rows * d, *s = k + keys * d, *t = s + rows * keys;
    decode_rows(IPU_DT_F16, ptr[0], a[SC_LDQ], q, rows, d);
    decode_rows(IPU_DT_F16, ptr[1], a[SC_LDK], k, keys, d);
    ipu_fma_scores(q, k, t, s, rows, keys, d);
    for (size_t i = 0; i < rows * keys; i++)
        s[i] *= scale;
    for (size_t r = 0; r < rows; r++)
        memcpy(ptr[2] + r * a[SC_LDS] * 4, s + r * keys, keys * 4);
}

static void run_block(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    const uint32_t *a = call->args;
    size_t rows = a[BL_ROWS], valid = a[BL_VALID], d = a[BL_DIM], ld_state = a[BL_LDSTATE];
    int accumulate = (a[BL_FLAGS] & IPU_GEMM_ACCUMULATE) != 0;
    float scale = bits_f32(a[BL_SCALE]);
    float *q = scratch, *k = q + rows * d, *v = k + valid * d, *s = v + valid * d;
    float *pv = s + rows * valid, *alpha = pv + rows * d, *rowsum = alpha + rows;
    float *t = rowsum + rows;
    /* Only the valid keys enter the products: padding rows are never decoded. */
    decode_rows(IPU_DT_F16, ptr[0], a[BL_LDQ], q, rows, d);
    decode_rows(IPU_DT_F16, ptr[1], a[BL_LDK], k, valid, d);
    decode_rows(IPU_DT_F16, ptr[2], a[BL_LDV], v, valid, d);
    ipu_fma_scores(q, k, t, s, rows, valid, d);
    for (size_t r = 0; r < rows; r++) {
        uint8_t *st = ptr[3] + r * ld_state * 4;
        float m_old = 0.0f;
        if (accumulate)
            memcpy(&m_old, st, 4);
        float m_new = ipu_flash_row(s + r * valid, valid, scale, accumulate, m_old, &alpha[r], &rowsum[r]);
        memcpy(st, &m_new, 4);
    }
    ipu_fma_product(s, v, pv, rows, valid, d);
    for (size_t r = 0; r < rows; r++) {
        uint8_t *st = ptr[3] + r * ld_state * 4;
        float l = 0.0f, *o = pv + r * d;
        if (accumulate) {
            memcpy(&l, st + 4, 4);
            l = alpha[r] * l;
            for (size_t c = 0; c < d; c++) {
                float oc;
                memcpy(&oc, st + 8 + 4 * c, 4);
                o[c] = alpha[r] * oc + o[c];
            }
        }
        l = l + rowsum[r];
        memcpy(st + 4, &l, 4);
        memcpy(st + 8, o, d * 4);
    }
}

static void run_merge(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    const uint32_t *a = call->args;
    size_t rows = a[MG_ROWS], d = a[MG_DIM], w = d + 2;
    float *acc = scratch, *other = scratch + w;
    for (size_t r = 0; r < rows; r++) {
        uint8_t *at = ptr[0] + r * a[MG_LDACC] * 4;
        memcpy(acc, at, w * 4);
        memcpy(other, ptr[1] + r * a[MG_LDOTHER] * 4, w * 4);
        ipu_flash_merge(acc, other, d);
        memcpy(at, acc, w * 4);
    }
}

static void run_finish(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    const uint32_t *a = call->args;
    size_t rows = a[FI_ROWS], d = a[FI_DIM], w = d + 2, size = ipu_dtype_size((int)a[FI_TYPE]);
    decode_rows(IPU_DT_F32, ptr[0], a[FI_LDSTATE], scratch, rows, w);
    for (size_t r = 0; r < rows; r++) {
        float *row = scratch + r * w, l = row[1];
        for (size_t c = 0; c < d; c++)
            row[2 + c] = row[2 + c] / l;
        ipu_num_encode((int)a[FI_TYPE], 0, row + 2, ptr[1] + r * a[FI_LDOUT] * size, d);
    }
}

static const ipu_kernel_def DEFS[] = {
    {IPU_K_SOFTMAX, "softmax", 10, 192, IPU_BODY_ATTENTION, describe_softmax, cycles_softmax,
     scratch_softmax, run_softmax,
     "10 + rows * (8 + 6 * ceil(4 * valid / vector_bytes_per_cycle) + "
     "ceil(4 * cols / vector_bytes_per_cycle))",
     {0x80000, 0x60000, 64, 768, 729, IPU_DT_F32, IPU_DT_F16, 768, 768, 0x3F800000u /* 1.0f */}},
    {IPU_K_ATTN_SCORES, "attn_scores", 10, 224, IPU_BODY_ATTENTION, describe_scores, cycles_scores,
     scratch_scores, run_scores,
     "amp_call_overhead + ceil(rows * keys * head_dim / amp_macs_fp16_fp32) + 4 * rows + "
     "rows * ceil(4 * keys / vector_bytes_per_cycle)",
     {0x80000, 0x90000, 0xB0000, 64, 729, 72, 72, 72, 729, 0x3DF15BEFu /* 1/sqrt(72) */}},
    {IPU_K_ATTN_BLOCK, "attn_block", 14, 320, IPU_BODY_ATTENTION, describe_block, cycles_block,
     scratch_block, run_block,
     "amp_call_overhead + 2 * ceil(rows * keys * head_dim / amp_macs_fp16_fp32) + rows * (12 + "
     "7 * ceil(4 * keys / vector_bytes_per_cycle) + ceil(4 * head_dim / vector_bytes_per_cycle))",
     {0x80000, 0x90000, 0x98000, 0x60000, 64, 64, 64, 72, 72, 72, 72, 74, 0x3DF15BEFu,
      IPU_GEMM_ACCUMULATE}},
    {IPU_K_ATTN_FINISH, "attn_finish", 7, 128, IPU_BODY_ATTENTION, describe_finish, cycles_finish,
     scratch_finish, run_finish,
     "10 + rows * (8 + 2 * ceil(4 * head_dim / vector_bytes_per_cycle))",
     {0x60000, 0x80000, 64, 72, 74, 72, IPU_DT_F16}},
    {IPU_K_ATTN_MERGE, "attn_merge", 6, 96, IPU_BODY_ATTENTION, describe_merge, cycles_merge, scratch_merge,
     run_merge, "10 + rows * (16 + 3 * ceil(4 * head_dim / vector_bytes_per_cycle))",
     {0x60000, 0x70000, 8, 72, 74, 74}},
};

const ipu_kernel_family ipu_kernels_attention = {DEFS, sizeof DEFS / sizeof *DEFS};
