/* kernels.c: the first kernel entry points (fill, copy, cast, add, FP16 and
 * FP8 GEMM with row strides, GELU): their argument decoding into checked operands, their cycle
 * formulas and their bodies.  GEMM bodies decode operands exactly to FP32,
 * accumulate with single-threaded sgemm and round the result to the output
 * type, as DEVICE.md defines the numerics.
 */
#include <cblas.h>
#include <string.h>

#include "kernels/kernels.h"
#include "numerics/numerics.h"

typedef struct entry_info {
    const char *name;
    uint32_t args;
    uint32_t code_size;
} entry_info;

/* Fixed cycles per call of a non-AMP kernel (worker launch and loop setup). */
#define VERTEX_OVERHEAD 10u
/* Cycles per output row of a GEMM (row pointer setup and partial writeback). */
#define GEMM_ROW_OVERHEAD 4u
/* Vector operations per element of GELU (cube, multiply-adds, tanh, product). */
#define GELU_OPS 8u

static const entry_info ENTRIES[IPU_K_ENTRY_END] = {
    [IPU_K_FILL] = {"fill", 3, 256},
    [IPU_K_COPY] = {"copy", 3, 320},
    [IPU_K_CAST] = {"cast", 7, 1536},
    [IPU_K_ADD] = {"add", 5, 768},
    [IPU_K_GEMM_F16] = {"gemm_f16", 11, 4096},
    [IPU_K_GEMM_F8] = {"gemm_f8", 13, 4608},
    [IPU_K_GELU] = {"gelu", 4, 1280},
};

static const entry_info *info(int entry)
{
    if (entry <= 0 || entry >= IPU_K_ENTRY_END)
        return NULL;
    return &ENTRIES[entry];
}

const char *ipu_kernel_name(int entry) { return info(entry) ? info(entry)->name : NULL; }
uint32_t ipu_kernel_arg_count(int entry) { return info(entry) ? info(entry)->args : 0; }
uint32_t ipu_kernel_code_size(int entry) { return info(entry) ? info(entry)->code_size : 0; }

static void add_operand(ipu_kernel_call *call, const char *name, uint32_t address, uint64_t size,
                        uint32_t alignment, uint8_t access)
{
    ipu_operand *op = &call->operands[call->operand_count++];
    op->name = name;
    op->address = address;
    op->size = size > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)size;
    op->alignment = alignment;
    op->access = access;
    op->region1 = 0;
}

static void add_separation(ipu_kernel_call *call, uint8_t a, uint8_t b)
{
    call->separate[call->separate_count][0] = a;
    call->separate[call->separate_count][1] = b;
    call->separate_count++;
}

static int is_f8(uint32_t t) { return t == IPU_DT_F143 || t == IPU_DT_F152; }
static int is_gemm_out(uint32_t t) { return t == IPU_DT_F16 || t == IPU_DT_F32; }
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
    if (!is_gemm_out(out_type))
        return "GEMM output type must be f16 or f32";
    if (flags & ~(IPU_GEMM_ACCUMULATE | IPU_GEMM_WIDE))
        return "unknown GEMM flag bits";
    uint32_t align = (flags & IPU_GEMM_WIDE) ? 16 : 8;
    add_operand(call, "a", a[0], ((m - 1) * ld[0] + k) * in_a, align, IPU_ACCESS_READ);
    add_operand(call, "b", a[1], ((k - 1) * ld[1] + n) * in_b, align, IPU_ACCESS_READ);
    add_operand(call, "c", a[2], ((m - 1) * ld[2] + n) * ipu_dtype_size((int)out_type), 8,
                (flags & IPU_GEMM_ACCUMULATE) ? IPU_ACCESS_READ | IPU_ACCESS_WRITE : IPU_ACCESS_WRITE);
    if (flags & IPU_GEMM_WIDE)
        call->operands[0].region1 = call->operands[1].region1 = 1;
    add_separation(call, 0, 2);
    add_separation(call, 1, 2);
    return NULL;
}

const char *ipu_kernel_describe(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    call->operand_count = 0;
    call->separate_count = 0;
    if (!info(call->entry))
        return "unknown kernel entry";
    if (call->arg_count != info(call->entry)->args)
        return "wrong argument count for the entry";
    switch (call->entry) {
    case IPU_K_FILL:
        add_operand(call, "dst", a[0], a[1], 4, IPU_ACCESS_WRITE);
        return NULL;
    case IPU_K_COPY:
        add_operand(call, "src", a[0], a[2], 4, IPU_ACCESS_READ);
        add_operand(call, "dst", a[1], a[2], 4, IPU_ACCESS_WRITE);
        return NULL;
    case IPU_K_CAST: {
        size_t src = ipu_dtype_size((int)a[3]), dst = ipu_dtype_size((int)a[5]);
        if (!src || !dst)
            return "cast with an unknown element type";
        add_operand(call, "src", a[0], (uint64_t)a[2] * src, 8, IPU_ACCESS_READ);
        add_operand(call, "dst", a[1], (uint64_t)a[2] * dst, 8, IPU_ACCESS_WRITE);
        return NULL;
    }
    case IPU_K_ADD: {
        if (a[4] != IPU_DT_F32 && a[4] != IPU_DT_F16)
            return "add type must be f32 or f16";
        uint64_t bytes = (uint64_t)a[3] * ipu_dtype_size((int)a[4]);
        add_operand(call, "a", a[0], bytes, 8, IPU_ACCESS_READ);
        add_operand(call, "b", a[1], bytes, 8, IPU_ACCESS_READ);
        add_operand(call, "dst", a[2], bytes, 8, IPU_ACCESS_WRITE);
        return NULL;
    }
    case IPU_K_GEMM_F16:
        return describe_gemm(call, 2, 2, a[6], a[7], a + 8);
    case IPU_K_GEMM_F8:
        if (!is_f8(a[6] & 0xFF) || !is_f8((a[6] >> 8) & 0xFF) || (a[6] >> 16))
            return "gemm_f8 input types must be f143 or f152";
        return describe_gemm(call, 1, 1, a[8], a[9], a + 10);
    case IPU_K_GELU: {
        if (a[3] != IPU_DT_F32 && a[3] != IPU_DT_F16)
            return "gelu type must be f32 or f16";
        uint64_t bytes = (uint64_t)a[2] * ipu_dtype_size((int)a[3]);
        add_operand(call, "src", a[0], bytes, 8, IPU_ACCESS_READ);
        add_operand(call, "dst", a[1], bytes, 8, IPU_ACCESS_WRITE);
        return NULL;
    }
    }
    return "unknown kernel entry";
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

uint64_t ipu_kernel_cycles(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    switch (call->entry) {
    case IPU_K_FILL:
        return VERTEX_OVERHEAD + ceil_div(a[1], p->copy_bytes_per_cycle);
    case IPU_K_COPY:
        return VERTEX_OVERHEAD + ceil_div(a[2], p->copy_bytes_per_cycle);
    case IPU_K_CAST: {
        size_t wide = ipu_dtype_size((int)a[3]) > ipu_dtype_size((int)a[5]) ? ipu_dtype_size((int)a[3])
                                                                           : ipu_dtype_size((int)a[5]);
        return VERTEX_OVERHEAD + ceil_div((uint64_t)a[2] * wide, p->vector_bytes_per_cycle);
    }
    case IPU_K_ADD:
        return VERTEX_OVERHEAD +
               ceil_div((uint64_t)a[3] * ipu_dtype_size((int)a[4]), p->vector_bytes_per_cycle);
    case IPU_K_GELU:
        /* tanh, a cubic and the products: GELU_OPS vector operations per element group. */
        return VERTEX_OVERHEAD + GELU_OPS * ceil_div((uint64_t)a[2] * ipu_dtype_size((int)a[3]),
                                                     p->vector_bytes_per_cycle);
    case IPU_K_GEMM_F16:
    case IPU_K_GEMM_F8: {
        uint64_t m = a[3], n = a[4], k = a[5];
        uint32_t out_type = call->entry == IPU_K_GEMM_F16 ? a[6] : a[8];
        uint32_t rate = call->entry == IPU_K_GEMM_F8  ? p->amp_macs_fp8
                        : out_type == IPU_DT_F16      ? p->amp_macs_fp16_fp16
                                                      : p->amp_macs_fp16_fp32;
        return p->amp_call_overhead + ceil_div(m * n * k, rate) + GEMM_ROW_OVERHEAD * m;
    }
    }
    return 0;
}

size_t ipu_kernel_scratch_floats(const ipu_kernel_call *call)
{
    if (call->entry != IPU_K_GEMM_F16 && call->entry != IPU_K_GEMM_F8)
        return 0;
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

static void run_gemm(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch, int a_type,
                     int a_scale, int b_type, int b_scale, int out_type, uint32_t flags,
                     const uint32_t *ld)
{
    size_t m = call->args[3], n = call->args[4], k = call->args[5];
    float *fa = scratch, *fb = fa + m * k, *fc = fb + k * n;
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

void ipu_kernel_run(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    const uint32_t *a = call->args;
    switch (call->entry) {
    case IPU_K_FILL: {
        uint8_t pattern[4];
        memcpy(pattern, &a[2], 4);
        for (uint32_t i = 0; i < a[1]; i++)
            ptr[0][i] = pattern[i & 3];
        return;
    }
    case IPU_K_COPY:
        memmove(ptr[1], ptr[0], a[2]);
        return;
    case IPU_K_CAST: {
        enum { CHUNK = 1024 };
        float values[CHUNK];
        size_t src_size = ipu_dtype_size((int)a[3]), dst_size = ipu_dtype_size((int)a[5]);
        for (size_t done = 0; done < a[2]; done += CHUNK) {
            size_t count = a[2] - done < CHUNK ? a[2] - done : CHUNK;
            ipu_num_decode((int)a[3], (int32_t)a[4], ptr[0] + done * src_size, values, count);
            ipu_num_encode((int)a[5], (int32_t)a[6], values, ptr[1] + done * dst_size, count);
        }
        return;
    }
    case IPU_K_ADD: {
        enum { CHUNK = 512 };
        float x[CHUNK], y[CHUNK];
        size_t size = ipu_dtype_size((int)a[4]);
        for (size_t done = 0; done < a[3]; done += CHUNK) {
            size_t count = a[3] - done < CHUNK ? a[3] - done : CHUNK;
            ipu_num_decode((int)a[4], 0, ptr[0] + done * size, x, count);
            ipu_num_decode((int)a[4], 0, ptr[1] + done * size, y, count);
            for (size_t i = 0; i < count; i++)
                x[i] += y[i];
            ipu_num_encode((int)a[4], 0, x, ptr[2] + done * size, count);
        }
        return;
    }
    case IPU_K_GEMM_F16:
        run_gemm(call, ptr, scratch, IPU_DT_F16, 0, IPU_DT_F16, 0, (int)a[6], a[7], a + 8);
        return;
    case IPU_K_GEMM_F8:
        run_gemm(call, ptr, scratch, (int)(a[6] & 0xFF), sign_extend8(a[7] & 0xFF),
                 (int)((a[6] >> 8) & 0xFF), sign_extend8((a[7] >> 8) & 0xFF), (int)a[8], a[9],
                 a + 10);
        return;
    case IPU_K_GELU: {
        enum { CHUNK = 512 };
        float x[CHUNK];
        size_t size = ipu_dtype_size((int)a[3]);
        for (size_t done = 0; done < a[2]; done += CHUNK) {
            size_t count = a[2] - done < CHUNK ? a[2] - done : CHUNK;
            ipu_num_decode((int)a[3], 0, ptr[0] + done * size, x, count);
            for (size_t i = 0; i < count; i++)
                x[i] = ipu_num_gelu(x[i]);
            ipu_num_encode((int)a[3], 0, x, ptr[1] + done * size, count);
        }
        return;
    }
    }
}
