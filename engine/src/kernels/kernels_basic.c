/* kernels_basic.c: memory and vector kernels: fill, copy, cast between all
 * element types (with FP8 scales), add, GELU (tanh approximation, the
 * shared numerics' definition) and a bias row added in place to every row
 * of a block (a biased matmul's epilogue).  Vector kernels move one 64-bit operation
 * per cycle; memory kernels 8 bytes per cycle (profile rates).
 */
#include <string.h>

#include "kernels/kernel_def.h"
#include "numerics/numerics.h"

/* Vector operations per element of GELU (cube, multiply-adds, tanh, product). */
#define GELU_OPS 8u

static const char *describe_fill(ipu_kernel_call *call)
{
    ipu_kernel_operand(call, "dst", call->args[0], call->args[1], 4, IPU_ACCESS_WRITE);
    return NULL;
}

static const char *describe_copy(ipu_kernel_call *call)
{
    ipu_kernel_operand(call, "src", call->args[0], call->args[2], 4, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "dst", call->args[1], call->args[2], 4, IPU_ACCESS_WRITE);
    return NULL;
}

static const char *describe_cast(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    size_t src = ipu_dtype_size((int)a[3]), dst = ipu_dtype_size((int)a[5]);
    if (!src || !dst)
        return "cast with an unknown element type";
    ipu_kernel_operand(call, "src", a[0], (uint64_t)a[2] * src, 8, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "dst", a[1], (uint64_t)a[2] * dst, 8, IPU_ACCESS_WRITE);
    return NULL;
}

static const char *describe_add(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    if (a[4] != IPU_DT_F32 && a[4] != IPU_DT_F16)
        return "add type must be f32 or f16";
    uint64_t bytes = (uint64_t)a[3] * ipu_dtype_size((int)a[4]);
    ipu_kernel_operand(call, "a", a[0], bytes, 8, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "b", a[1], bytes, 8, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "dst", a[2], bytes, 8, IPU_ACCESS_WRITE);
    return NULL;
}

static const char *describe_bias(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    if (a[5] != IPU_DT_F32 && a[5] != IPU_DT_F16)
        return "bias type must be f32 or f16";
    /* Bounded as the other row kernels are: an empty row would let a huge
     * row count cost the simulator a loop of nothing per row. */
    if (a[2] < 1 || a[2] > 65535 || a[3] < 1 || a[3] > 65535)
        return "bias rows and cols must be in 1..65535";
    if (a[4] < a[3] || a[4] > 65535)
        return "bias row stride must be at least cols and at most 65535";
    size_t elem = ipu_dtype_size((int)a[5]);
    uint64_t rows = (uint64_t)(a[2] - 1) * a[4] + a[3];
    ipu_kernel_operand(call, "x", a[0], rows * elem, 8, IPU_ACCESS_READ | IPU_ACCESS_WRITE);
    ipu_kernel_operand(call, "bias", a[1], (uint64_t)a[3] * elem, 8, IPU_ACCESS_READ);
    return NULL;
}

static const char *describe_gelu(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    if (a[3] != IPU_DT_F32 && a[3] != IPU_DT_F16)
        return "gelu type must be f32 or f16";
    uint64_t bytes = (uint64_t)a[2] * ipu_dtype_size((int)a[3]);
    ipu_kernel_operand(call, "src", a[0], bytes, 8, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "dst", a[1], bytes, 8, IPU_ACCESS_WRITE);
    return NULL;
}

static uint64_t cycles_fill(const ipu_kernel_call *call, const ipu_profile *p)
{
    return IPU_VERTEX_OVERHEAD + ipu_ceil_div(call->args[1], p->copy_bytes_per_cycle);
}

static uint64_t cycles_copy(const ipu_kernel_call *call, const ipu_profile *p)
{
    return IPU_VERTEX_OVERHEAD + ipu_ceil_div(call->args[2], p->copy_bytes_per_cycle);
}

static uint64_t cycles_cast(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    size_t src = ipu_dtype_size((int)a[3]), dst = ipu_dtype_size((int)a[5]);
    return IPU_VERTEX_OVERHEAD +
           ipu_ceil_div((uint64_t)a[2] * (src > dst ? src : dst), p->vector_bytes_per_cycle);
}

static uint64_t cycles_add(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    return IPU_VERTEX_OVERHEAD +
           ipu_ceil_div((uint64_t)a[3] * ipu_dtype_size((int)a[4]), p->vector_bytes_per_cycle);
}

/* One vector pass over the rows, the bias row reloaded for each. */
static uint64_t cycles_bias(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    return IPU_VERTEX_OVERHEAD +
           (uint64_t)a[2] * ipu_ceil_div((uint64_t)a[3] * ipu_dtype_size((int)a[5]), p->vector_bytes_per_cycle);
}

static uint64_t cycles_gelu(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    return IPU_VERTEX_OVERHEAD +
           GELU_OPS * ipu_ceil_div((uint64_t)a[2] * ipu_dtype_size((int)a[3]), p->vector_bytes_per_cycle);
}

static void run_fill(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    (void)scratch;
    uint8_t pattern[4];
    memcpy(pattern, &call->args[2], 4);
    uint32_t bytes = call->args[1], i = 0;
    if (pattern[0] == pattern[1] && pattern[0] == pattern[2] && pattern[0] == pattern[3]) {
        memset(ptr[0], pattern[0], bytes);
        return;
    }
    for (; i + 4 <= bytes; i += 4)
        memcpy(ptr[0] + i, pattern, 4);
    for (; i < bytes; i++)
        ptr[0][i] = pattern[i & 3];
}

static void run_copy(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    (void)scratch;
    memmove(ptr[1], ptr[0], call->args[2]);
}

/* Convert count elements between types (with their scales) through FP32 chunks. */
static void run_cast(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    (void)scratch;
    const uint32_t *a = call->args;
    enum { CHUNK = 1024 };
    float values[CHUNK];
    size_t src_size = ipu_dtype_size((int)a[3]), dst_size = ipu_dtype_size((int)a[5]);
    for (size_t done = 0; done < a[2]; done += CHUNK) {
        size_t count = a[2] - done < CHUNK ? a[2] - done : CHUNK;
        ipu_num_decode((int)a[3], (int32_t)a[4], ptr[0] + done * src_size, values, count);
        ipu_num_encode((int)a[5], (int32_t)a[6], values, ptr[1] + done * dst_size, count);
    }
}

static void run_add(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    (void)scratch;
    ipu_num_add_run((int)call->args[4], ptr[0], ptr[1], ptr[2], call->args[3]);
}

static void run_bias(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    (void)scratch;
    const uint32_t *a = call->args;
    size_t row = (size_t)a[4] * ipu_dtype_size((int)a[5]);
    for (uint32_t r = 0; r < a[2]; r++)
        ipu_num_add_run((int)a[5], ptr[0] + r * row, ptr[1], ptr[0] + r * row, a[3]);
}

static void run_gelu(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    (void)scratch;
    ipu_num_gelu_run(IPU_GELU_TANH, (int)call->args[3], ptr[0], ptr[1], call->args[2]);
}

static void run_gelu_erf(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    (void)scratch;
    ipu_num_gelu_run(IPU_GELU_ERF, (int)call->args[3], ptr[0], ptr[1], call->args[2]);
}

static const ipu_kernel_def DEFS[] = {
    {IPU_K_FILL, "fill", 3, 96, IPU_BODY_MEMORY, describe_fill, cycles_fill, NULL, run_fill,
     "10 + ceil(bytes / copy_bytes_per_cycle)", {0x60000, 4096, 0}},
    {IPU_K_COPY, "copy", 3, 96, IPU_BODY_MEMORY, describe_copy, cycles_copy, NULL, run_copy,
     "10 + ceil(bytes / copy_bytes_per_cycle)", {0x60000, 0x62000, 4096}},
    {IPU_K_CAST, "cast", 7, 160, IPU_BODY_VECTOR, describe_cast, cycles_cast, NULL, run_cast,
     "10 + ceil(count * max(src, dst element bytes) / vector_bytes_per_cycle)",
     {0x60000, 0x62000, 2048, IPU_DT_F16, 0, IPU_DT_F143, (uint32_t)-2}},
    {IPU_K_ADD, "add", 5, 128, IPU_BODY_VECTOR, describe_add, cycles_add, NULL, run_add,
     "10 + ceil(count * element bytes / vector_bytes_per_cycle)",
     {0x60000, 0x61000, 0x62000, 2048, IPU_DT_F16}},
    {IPU_K_GELU, "gelu", 4, 192, IPU_BODY_VECTOR, describe_gelu, cycles_gelu, NULL, run_gelu,
     "10 + 8 * ceil(count * element bytes / vector_bytes_per_cycle)",
     {0x60000, 0x62000, 2048, IPU_DT_F16}},
    {IPU_K_GELU_ERF, "gelu_erf", 4, 192, IPU_BODY_VECTOR, describe_gelu, cycles_gelu, NULL, run_gelu_erf,
     "10 + 8 * ceil(count * element bytes / vector_bytes_per_cycle)",
     {0x60000, 0x62000, 2048, IPU_DT_F16}},
    {IPU_K_BIAS, "bias", 6, 128, IPU_BODY_VECTOR, describe_bias, cycles_bias, NULL, run_bias,
     "10 + rows * ceil(cols * element bytes / vector_bytes_per_cycle)",
     {0x60000, 0x62000, 16, 128, 128, IPU_DT_F16}},
};

const ipu_kernel_family ipu_kernels_basic = {DEFS, sizeof DEFS / sizeof *DEFS};
