/* kernels_gemm.c: the AMP GEMMs on row-major operands with row strides:
 * FP16 inputs with FP16 or FP32 partials, FP8 (F143/F152, with scales)
 * inputs; initialize or accumulate mode.  Bodies decode operands exactly to
 * FP32, accumulate with single-threaded sgemm and round to the output type,
 * as DEVICE.md defines the numerics.  Cycles: the supervisor call overhead,
 * MACs at the profile's AMP rate for the input and partial types, and a fixed
 * cost per output row.
 */
#include <cblas.h>

#include "kernels/kernel_def.h"
#include "numerics/numerics.h"

/* Cycles per output row of a GEMM (row pointer setup and partial writeback). */
#define GEMM_ROW_OVERHEAD 4u

static int is_f8(uint32_t t) { return t == IPU_DT_F143 || t == IPU_DT_F152; }
static int32_t sign_extend8(uint32_t v) { return (int32_t)(int8_t)(uint8_t)v; }

static const char *describe_gemm(ipu_kernel_call *call, size_t in_a, size_t in_b, uint32_t out_type,
                                 uint32_t flags, const uint32_t *ld)
{
    const uint32_t *a = call->args;
    uint64_t m = a[3], n = a[4], k = a[5];
    if (m == 0 || n == 0 || k == 0 || m > 65535 || n > 65535 || k > 65535)
        return "GEMM dimensions must be in 1..65535";
    if (ld[0] < k || ld[1] < n || ld[2] < n || ld[0] > 65535 || ld[1] > 65535 || ld[2] > 65535)
        return "GEMM row strides must be at least k, n, n and at most 65535";
    if (out_type != IPU_DT_F16 && out_type != IPU_DT_F32)
        return "GEMM output type must be f16 or f32";
    if (flags & ~(IPU_GEMM_ACCUMULATE | IPU_GEMM_WIDE))
        return "unknown GEMM flag bits";
    uint32_t align = (flags & IPU_GEMM_WIDE) ? 16 : 8;
    ipu_kernel_operand(call, "a", a[0], ((m - 1) * ld[0] + k) * in_a, align, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "b", a[1], ((k - 1) * ld[1] + n) * in_b, align, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "c", a[2], ((m - 1) * ld[2] + n) * ipu_dtype_size((int)out_type), 8,
                       (flags & IPU_GEMM_ACCUMULATE) ? IPU_ACCESS_READ | IPU_ACCESS_WRITE
                                                     : IPU_ACCESS_WRITE);
    if (flags & IPU_GEMM_WIDE)
        call->operands[0].region1 = call->operands[1].region1 = 1;
    ipu_kernel_separate(call, 0, 2);
    ipu_kernel_separate(call, 1, 2);
    return NULL;
}

static const char *describe_f16(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    return describe_gemm(call, 2, 2, a[6], a[7], a + 8);
}

static const char *describe_f8(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    if (!is_f8(a[6] & 0xFF) || !is_f8((a[6] >> 8) & 0xFF) || (a[6] >> 16))
        return "gemm_f8 input types must be f143 or f152";
    return describe_gemm(call, 1, 1, a[8], a[9], a + 10);
}

static uint64_t cycles(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    uint64_t m = a[3], n = a[4], k = a[5];
    uint32_t out_type = call->entry == IPU_K_GEMM_F16 ? a[6] : a[8];
    uint32_t rate = call->entry == IPU_K_GEMM_F8 ? p->amp_macs_fp8
                    : out_type == IPU_DT_F16     ? p->amp_macs_fp16_fp16
                                                 : p->amp_macs_fp16_fp32;
    return p->amp_call_overhead + ipu_ceil_div(m * n * k, rate) + GEMM_ROW_OVERHEAD * m;
}

static size_t scratch(const ipu_kernel_call *call)
{
    size_t m = call->args[3], n = call->args[4], k = call->args[5];
    return m * k + k * n + m * n;
}

/* Decode rows of a strided operand into a packed FP32 matrix. */
static void decode_rows(int type, int scale, const uint8_t *src, size_t ld, float *dst, size_t rows,
                        size_t cols)
{
    size_t size = ipu_dtype_size(type);
    if (ld == cols) {
        ipu_num_decode(type, scale, src, dst, rows * cols);
        return;
    }
    for (size_t r = 0; r < rows; r++)
        ipu_num_decode(type, scale, src + r * ld * size, dst + r * cols, cols);
}

static void run_gemm(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch_floats,
                     int a_type, int a_scale, int b_type, int b_scale, int out_type, uint32_t flags,
                     const uint32_t *ld)
{
    size_t m = call->args[3], n = call->args[4], k = call->args[5];
    float *fa = scratch_floats, *fb = fa + m * k, *fc = fb + k * n;
    decode_rows(a_type, a_scale, ptr[0], ld[0], fa, m, k);
    decode_rows(b_type, b_scale, ptr[1], ld[1], fb, k, n);
    float beta = 0.0f;
    if (flags & IPU_GEMM_ACCUMULATE) {
        decode_rows(out_type, 0, ptr[2], ld[2], fc, m, n);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, fa, (int)k,
                fb, (int)n, beta, fc, (int)n);
    size_t out_size = ipu_dtype_size(out_type);
    if (ld[2] == n)
        ipu_num_encode(out_type, 0, fc, ptr[2], m * n);
    else
        for (size_t r = 0; r < m; r++)
            ipu_num_encode(out_type, 0, fc + r * n, ptr[2] + r * ld[2] * out_size, n);
}

static void run_f16(const ipu_kernel_call *call, uint8_t *const ptr[], float *s)
{
    const uint32_t *a = call->args;
    run_gemm(call, ptr, s, IPU_DT_F16, 0, IPU_DT_F16, 0, (int)a[6], a[7], a + 8);
}

static void run_f8(const ipu_kernel_call *call, uint8_t *const ptr[], float *s)
{
    const uint32_t *a = call->args;
    run_gemm(call, ptr, s, (int)(a[6] & 0xFF), sign_extend8(a[7] & 0xFF), (int)((a[6] >> 8) & 0xFF),
             sign_extend8((a[7] >> 8) & 0xFF), (int)a[8], a[9], a + 10);
}

static const ipu_kernel_def DEFS[] = {
    {IPU_K_GEMM_F16, "gemm_f16", 11, 256, IPU_BODY_AMP, describe_f16, cycles, scratch, run_f16,
     "amp_call_overhead + ceil(m*n*k / (out f16: amp_macs_fp16_fp16, f32: amp_macs_fp16_fp32)) + 4*m",
     {0x80000, 0x90000, 0x60000, 46, 47, 1152, IPU_DT_F32, 0, 1152, 47, 47}},
    {IPU_K_GEMM_F8, "gemm_f8", 13, 320, IPU_BODY_AMP, describe_f8, cycles, scratch, run_f8,
     "amp_call_overhead + ceil(m*n*k / amp_macs_fp8) + 4*m",
     {0x80000, 0x90000, 0x60000, 46, 47, 1152, IPU_DT_F143 | IPU_DT_F143 << 8, 0xFEFE, IPU_DT_F16, 0,
      1152, 47, 47}},
};

const ipu_kernel_family ipu_kernels_gemm = {DEFS, sizeof DEFS / sizeof *DEFS};
