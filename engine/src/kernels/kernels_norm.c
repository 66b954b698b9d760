/* kernels_norm.c: the normalization family: LayerNorm over the rows of a
 * row-major matrix with row strides, y = (x - mean) / sqrt(var + eps) * gamma
 * + beta, FP16 or FP32 rows and FP16 or FP32 affine parameters.  The
 * statistics are FP32 values: each row's sum and sum of squared deviations
 * are accumulated in FP64 in element order (better than FP32), then the mean
 * and the biased (divide-by-cols) variance are rounded to FP32; everything
 * after that is FP32 arithmetic, z = (x - mean) * (1 / sqrt(var + eps)),
 * y = z * gamma + beta, rounded to the row type at the end.  A call runs on
 * one tile and one thread in a fixed order, so its bits never depend on how
 * many threads the simulator uses.  dst may alias src (in place, no element
 * separation): rows go in order and each is read completely before it is
 * written, so dst == src with equal strides is safe (in general: writing row
 * r must not touch src rows after r).  Cycles: the vector kernel overhead,
 * then per row a fixed overhead and three FP32-wide passes (sum, squared
 * deviations, affine normalization) at the profile's vector rate.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernel_def.h"
#include "numerics/numerics.h"

/* Cycles per row besides its passes: pointer setup, the horizontal reduction
 * of the two vector accumulators, the divisions by cols and 1 / sqrt. */
#define LAYERNORM_ROW_OVERHEAD 16u
/* Vector passes per row, each over the row's elements at FP32 width. */
#define LAYERNORM_PASSES 3u

/* Arguments. */
enum { A_SRC, A_DST, A_GAMMA, A_BETA, A_ROWS, A_COLS, A_SSTRIDE, A_DSTRIDE, A_TYPE, A_PTYPE, A_EPS };

static int is_f16_or_f32(uint32_t t) { return t == IPU_DT_F16 || t == IPU_DT_F32; }

static float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static const char *describe_layernorm(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    uint64_t rows = a[A_ROWS], cols = a[A_COLS];
    if (rows == 0 || cols == 0 || rows > 65535 || cols > 65535)
        return "layernorm rows and cols must be in 1..65535";
    if (a[A_SSTRIDE] < cols || a[A_DSTRIDE] < cols || a[A_SSTRIDE] > 65535 || a[A_DSTRIDE] > 65535)
        return "layernorm row strides must be at least cols and at most 65535";
    if (!is_f16_or_f32(a[A_TYPE]))
        return "layernorm type must be f16 or f32";
    if (!is_f16_or_f32(a[A_PTYPE]))
        return "layernorm parameter type must be f16 or f32";
    float eps = bits_to_f32(a[A_EPS]);
    if (!(eps >= 0.0f) || isinf(eps))
        return "layernorm epsilon must be finite and non-negative";
    uint64_t size = ipu_dtype_size((int)a[A_TYPE]), psize = ipu_dtype_size((int)a[A_PTYPE]);
    ipu_kernel_operand(call, "src", a[A_SRC], ((rows - 1) * a[A_SSTRIDE] + cols) * size, 8,
                       IPU_ACCESS_READ);
    ipu_kernel_operand(call, "dst", a[A_DST], ((rows - 1) * a[A_DSTRIDE] + cols) * size, 8,
                       IPU_ACCESS_WRITE);
    ipu_kernel_operand(call, "gamma", a[A_GAMMA], cols * psize, 8, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "beta", a[A_BETA], cols * psize, 8, IPU_ACCESS_READ);
    return NULL;
}

static uint64_t cycles_layernorm(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    uint64_t pass = ipu_ceil_div((uint64_t)a[A_COLS] * 4, p->vector_bytes_per_cycle);
    return IPU_VERTEX_OVERHEAD + (uint64_t)a[A_ROWS] * (LAYERNORM_ROW_OVERHEAD + LAYERNORM_PASSES * pass);
}

/* One row of x, then gamma and beta, decoded to FP32. */
static size_t scratch_layernorm(const ipu_kernel_call *call) { return 3 * (size_t)call->args[A_COLS]; }

static void run_layernorm(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    const uint32_t *a = call->args;
    size_t rows = a[A_ROWS], cols = a[A_COLS];
    int type = (int)a[A_TYPE], ptype = (int)a[A_PTYPE];
    size_t size = ipu_dtype_size(type);
    float eps = bits_to_f32(a[A_EPS]);
    float *x = scratch, *gamma = x + cols, *beta = gamma + cols;
    ipu_num_decode(ptype, 0, ptr[2], gamma, cols);
    ipu_num_decode(ptype, 0, ptr[3], beta, cols);
    for (size_t r = 0; r < rows; r++) {
        ipu_num_decode(type, 0, ptr[0] + r * a[A_SSTRIDE] * size, x, cols);
        double sum = 0.0;
        for (size_t i = 0; i < cols; i++)
            sum += x[i];
        float mean = (float)(sum / (double)cols);
        double squares = 0.0;
        for (size_t i = 0; i < cols; i++) {
            float d = x[i] - mean;
            squares += (double)d * d;
        }
        float var = (float)(squares / (double)cols);
        float rstd = 1.0f / sqrtf(var + eps);
        for (size_t i = 0; i < cols; i++) {
            float z = (x[i] - mean) * rstd;
            float g = z * gamma[i];
            x[i] = g + beta[i];
        }
        ipu_num_encode(type, 0, x, ptr[1] + r * a[A_DSTRIDE] * size, cols);
    }
}

static const ipu_kernel_def DEFS[] = {
    {IPU_K_LAYERNORM, "layernorm", 11, 224, IPU_BODY_REDUCE, describe_layernorm, cycles_layernorm,
     scratch_layernorm, run_layernorm,
     "10 + rows * (16 + 3 * ceil(cols * 4 / vector_bytes_per_cycle))",
     {0x60000, 0x80000, 0x6A000, 0x6C000, 16, 1152, 1152, 1152, IPU_DT_F16, IPU_DT_F32,
      0x358637BDu /* 1e-6f */}},
};

const ipu_kernel_family ipu_kernels_norm = {DEFS, sizeof DEFS / sizeof *DEFS};
