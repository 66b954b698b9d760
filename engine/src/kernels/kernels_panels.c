/* kernels_panels.c: the AMP panel layouts, the rearrangements between
 * row-major tensors and panels (to_panels, from_panels) and the GEMMs on
 * panel operands (gemm_panels_f16, gemm_panels_f8).
 *
 * Panel layout of a matrix of `rows` rows and `k` columns along the GEMM's
 * reduction dimension K, element size s (1, 2 or 4 bytes): a panel row is one
 * 64-bit AMP load, P = 8 / s consecutive K elements of one row (P = 8 for
 * FP8, 4 for FP16, 2 for FP32).  K is cut into kp = ceil(k / P) K-panels;
 * panel p holds the P-element slices [p P, p P + P) of every row, row after
 * row, so element (r, kk) sits at byte ((kk / P) * rows + r) * 8 + (kk % P) * s
 * and the payload is kp * rows * 8 bytes.  The K tail of the last panel (kk in
 * [k, kp P)) is padding that must hold zeros: the AMP has no K masking and
 * multiplies it (to_panels writes it as zero; a non-zero pad in both operands,
 * or a NaN or infinity in one, changes the result).  The layout ends with an
 * access tail of round_up(payload, 16) - payload + 16 bytes (16 or 24): in
 * 128-bit mode the AMP loads 16 B-aligned pairs of panel rows, and its load
 * pipeline runs one 128-bit load ahead of the data it uses, so a GEMM may read
 * up to that far past the payload.  A GEMM's operand covers the tail, so the
 * tail must have been written (to_panels and a packed GEMM output write it as
 * zeros); otherwise the read faults as uninitialized.  One layout serves the
 * 64-bit and the 128-bit mode.  Layout bytes: round_up(kp * rows * 8, 16) + 16.
 * A GEMM's A (m x k) is stored with rows = m; its B (k x n) is stored
 * transposed, with rows = n (output columns), so both stream along K.
 *
 * to_panels (src, dst, rows, k, dtype, ld, flags) gathers a strided
 * row-major source (element (r, kk) at src[r ld + kk], ld >= k) or, with
 * IPU_PANELS_KMAJOR, a K-major one (at src[kk ld + r], ld >= rows: a row-major
 * B) into the layout at dst, writing pads and tail as zeros; from_panels (src,
 * dst, ...) scatters a layout's payload (the tail is not read) back to the
 * strided form, leaving row gaps untouched.  Both copy element bytes exactly
 * (any dtype) and need src and dst in different memory elements (a load and a
 * store every cycle).  Cycles: 10 + 2 per K-panel (base pointers) + per panel
 * row ceil(8 / copy_bytes_per_cycle) (row-major: one 64-bit load and store) or
 * P (K-major: one element gathered per cycle), and to_panels adds
 * ceil(tail / copy_bytes_per_cycle) for the zeroed tail.
 *
 * gemm_panels_f16 (a, b, c, m, n, k, out_type, flags, ldc) and gemm_panels_f8
 * (a, b, c, m, n, k, in_types, scales, out_type, flags, ldc; types and i8
 * scales as gemm_f8: a | b << 8): C = A x B or, with IPU_GEMM_ACCUMULATE,
 * C += A x B.  out_type f16 or f32 is the partial type (it sets the FP16 MAC
 * rate).  Flags: IPU_GEMM_WIDE: 128-bit operand loads: A and B in region 1 and
 * 16 B aligned (else 8 B, either region); IPU_GEMM_PACKED: C in panel layout
 * (rows m, K n, out_type elements; with f16 partials exactly the A operand of
 * a following gemm_panels_f16, f32 panels (P = 2) serve as accumulation
 * buffers for from_panels), written with zero pads and tail (also when
 * accumulating), ldc must be 0; otherwise C is row-major
 * with stride ldc >= n (gaps untouched); IPU_GEMM_RETAINED: B's panels are
 * still resident in the AMP from the previous call on this tile (the caller's
 * promise: same B address, shape, type and flags; the device cannot check it
 * and computes from B's memory as always), so the call skips fetching them.
 * A, B are separate from C.  Numerics as DEVICE.md: operands (K pads
 * included) decoded exactly to FP32, sgemm with FP32 accumulation, one rounding
 * to out_type.
 *
 * GEMM cycles, with P the input panel width, kp = ceil(k / P), L = 16 bytes
 * per load in wide mode else 8, rate the profile's AMP MACs per cycle (FP8:
 * amp_macs_fp8; FP16: amp_macs_fp16_fp16 for f16 partials, amp_macs_fp16_fp32
 * for f32):
 *   call    amp_call_overhead + (retained ? 0 : kp * ceil(8 n / L))
 *           (the supervisor call, and B's panels fetched into the AMP weights)
 *   K-panel kp * (3 + max(ceil(m n P / rate), ceil(8 m / L)))
 *           (panel base advance and pipeline refill; the panel's MACs or, when
 *           n is small, the A stream of one load per panel row)
 *   row     2 m (partial write-back; rows are contiguous, no row pointers)
 * Every term is non-decreasing in m, n and k, and retained or wide never
 * costs more.
 */
#include <cblas.h>
#include <string.h>

#include "kernels/kernel_def.h"
#include "numerics/numerics.h"

#define PANEL_ROW_BYTES 8u       /* one 64-bit load */
#define ACCESS_PIPELINE 16u      /* one 128-bit load ahead */
#define REARRANGE_PANEL_OVERHEAD 2u
#define GEMM_PANEL_OVERHEAD 3u
#define GEMM_PANEL_ROW_OVERHEAD 2u

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static int32_t sign_extend8(uint32_t v) { return (int32_t)(int8_t)(uint8_t)v; }
static int is_f8(uint32_t t) { return t == IPU_DT_F143 || t == IPU_DT_F152; }

/* ---- the layout ------------------------------------------------------------ */
static uint64_t panel_width(uint64_t size) { return PANEL_ROW_BYTES / size; }
static uint64_t panel_count(uint64_t k, uint64_t size) { return ipu_ceil_div(k, panel_width(size)); }
static uint64_t panel_payload(uint64_t rows, uint64_t k, uint64_t size)
{
    return panel_count(k, size) * rows * PANEL_ROW_BYTES;
}
static uint64_t panel_bytes(uint64_t rows, uint64_t k, uint64_t size)
{
    return round_up(panel_payload(rows, k, size), 16) + ACCESS_PIPELINE;
}

uint64_t ipu_panel_bytes(uint64_t rows, uint64_t k, uint64_t elem_size)
{
    return panel_bytes(rows, k, elem_size);
}
/* ---- to_panels / from_panels ------------------------------------------------ */
/* Arguments: 0 src, 1 dst, 2 rows, 3 k, 4 dtype, 5 ld, 6 flags. */
static const char *describe_rearrange(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    uint64_t rows = a[2], k = a[3], ld = a[5];
    size_t size = ipu_dtype_size((int)a[4]);
    int kmajor = (a[6] & IPU_PANELS_KMAJOR) != 0;
    if (rows == 0 || k == 0 || rows > 65535 || k > 65535)
        return "panel rows and k must be in 1..65535";
    if (!size)
        return "panel rearrangement with an unknown element type";
    if (a[6] & ~IPU_PANELS_KMAJOR)
        return "unknown panel rearrangement flag bits";
    if (ld < (kmajor ? rows : k) || ld > 65535)
        return "panel rearrangement stride must be at least k (K-major: rows) and at most 65535";
    uint64_t strided = kmajor ? ((k - 1) * ld + rows) * size : ((rows - 1) * ld + k) * size;
    if (call->entry == IPU_K_TO_PANELS) {
        ipu_kernel_operand(call, "src", a[0], strided, 8, IPU_ACCESS_READ);
        ipu_kernel_operand(call, "dst", a[1], panel_bytes(rows, k, size), 8, IPU_ACCESS_WRITE);
    } else {
        ipu_kernel_operand(call, "src", a[0], panel_payload(rows, k, size), 8, IPU_ACCESS_READ);
        ipu_kernel_operand(call, "dst", a[1], strided, 8, IPU_ACCESS_WRITE);
    }
    ipu_kernel_separate(call, 0, 1);
    return NULL;
}

static uint64_t cycles_rearrange(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    uint64_t rows = a[2], k = a[3], size = ipu_dtype_size((int)a[4]);
    uint64_t kp = panel_count(k, size);
    uint64_t per_row = (a[6] & IPU_PANELS_KMAJOR) ? panel_width(size)
                                                  : ipu_ceil_div(PANEL_ROW_BYTES, p->copy_bytes_per_cycle);
    uint64_t c = IPU_VERTEX_OVERHEAD + REARRANGE_PANEL_OVERHEAD * kp + rows * kp * per_row;
    if (call->entry == IPU_K_TO_PANELS)
        c += ipu_ceil_div(panel_bytes(rows, k, size) - panel_payload(rows, k, size),
                          p->copy_bytes_per_cycle);
    return c;
}

static void run_rearrange(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    (void)scratch;
    const uint32_t *a = call->args;
    size_t rows = a[2], k = a[3], size = ipu_dtype_size((int)a[4]), ld = a[5];
    size_t width = PANEL_ROW_BYTES / size, kp = panel_count(k, size);
    int kmajor = (a[6] & IPU_PANELS_KMAJOR) != 0, to = call->entry == IPU_K_TO_PANELS;
    uint8_t *panels = to ? ptr[1] : ptr[0], *strided = to ? ptr[0] : ptr[1];
    for (size_t pi = 0; pi < kp; pi++) {
        size_t k0 = pi * width, used = k - k0 < width ? k - k0 : width;
        for (size_t r = 0; r < rows; r++) {
            uint8_t *slice = panels + (pi * rows + r) * PANEL_ROW_BYTES;
            if (!kmajor) {
                uint8_t *row = strided + (r * ld + k0) * size;
                if (to)
                    memcpy(slice, row, used * size);
                else
                    memcpy(row, slice, used * size);
            } else {
                for (size_t i = 0; i < used; i++) {
                    uint8_t *e = strided + ((k0 + i) * ld + r) * size;
                    if (to)
                        memcpy(slice + i * size, e, size);
                    else
                        memcpy(e, slice + i * size, size);
                }
            }
            if (to)
                memset(slice + used * size, 0, (width - used) * size);
        }
    }
    if (to) {
        size_t payload = panel_payload(rows, k, size);
        memset(panels + payload, 0, panel_bytes(rows, k, size) - payload);
    }
}

/* ---- the panel GEMMs ----------------------------------------------------------- */
typedef struct gemm_args {
    uint32_t a_type, b_type, out_type, flags, ldc;
    int32_t a_scale, b_scale;
} gemm_args;

static gemm_args gemm_decode(const ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    gemm_args g = {IPU_DT_F16, IPU_DT_F16, a[6], a[7], a[8], 0, 0};
    if (call->entry == IPU_K_GEMM_PANELS_F8) {
        g.a_type = a[6] & 0xFF, g.b_type = (a[6] >> 8) & 0xFF;
        g.a_scale = sign_extend8(a[7] & 0xFF), g.b_scale = sign_extend8((a[7] >> 8) & 0xFF);
        g.out_type = a[8], g.flags = a[9], g.ldc = a[10];
    }
    return g;
}

static const char *describe_gemm(ipu_kernel_call *call)
{
    const uint32_t *a = call->args;
    uint64_t m = a[3], n = a[4], k = a[5];
    gemm_args g = gemm_decode(call);
    if (call->entry == IPU_K_GEMM_PANELS_F8 &&
        (!is_f8(a[6] & 0xFF) || !is_f8((a[6] >> 8) & 0xFF) || (a[6] >> 16)))
        return "gemm_panels_f8 input types must be f143 or f152";
    if (m == 0 || n == 0 || k == 0 || m > 65535 || n > 65535 || k > 65535)
        return "GEMM dimensions must be in 1..65535";
    if (g.out_type != IPU_DT_F16 && g.out_type != IPU_DT_F32)
        return "GEMM output type must be f16 or f32";
    if (g.flags & ~(IPU_GEMM_ACCUMULATE | IPU_GEMM_WIDE | IPU_GEMM_PACKED | IPU_GEMM_RETAINED))
        return "unknown GEMM flag bits";
    int packed = (g.flags & IPU_GEMM_PACKED) != 0;
    if (packed ? g.ldc != 0 : (g.ldc < n || g.ldc > 65535))
        return "GEMM output row stride ldc must be 0 with packed output, else in n..65535";
    uint64_t in = ipu_dtype_size((int)g.a_type), out = ipu_dtype_size((int)g.out_type);
    uint32_t align = (g.flags & IPU_GEMM_WIDE) ? 16 : 8;
    ipu_kernel_operand(call, "a", a[0], panel_bytes(m, k, in), align, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "b", a[1], panel_bytes(n, k, in), align, IPU_ACCESS_READ);
    ipu_kernel_operand(call, "c", a[2], packed ? panel_bytes(m, n, out) : ((m - 1) * g.ldc + n) * out, 8,
                       (g.flags & IPU_GEMM_ACCUMULATE) ? IPU_ACCESS_READ | IPU_ACCESS_WRITE
                                                       : IPU_ACCESS_WRITE);
    if (g.flags & IPU_GEMM_WIDE)
        call->operands[0].region1 = call->operands[1].region1 = 1;
    ipu_kernel_separate(call, 0, 2);
    ipu_kernel_separate(call, 1, 2);
    return NULL;
}

static uint64_t cycles_gemm(const ipu_kernel_call *call, const ipu_profile *p)
{
    const uint32_t *a = call->args;
    uint64_t m = a[3], n = a[4], k = a[5];
    gemm_args g = gemm_decode(call);
    int f8 = call->entry == IPU_K_GEMM_PANELS_F8;
    uint64_t width = f8 ? 8 : 4, kp = ipu_ceil_div(k, width);
    uint64_t load = (g.flags & IPU_GEMM_WIDE) ? 16 : 8;
    uint64_t rate = f8 ? p->amp_macs_fp8
                    : g.out_type == IPU_DT_F16 ? p->amp_macs_fp16_fp16 : p->amp_macs_fp16_fp32;
    uint64_t c = p->amp_call_overhead;
    if (!(g.flags & IPU_GEMM_RETAINED))
        c += kp * ipu_ceil_div(PANEL_ROW_BYTES * n, load);
    c += kp * (GEMM_PANEL_OVERHEAD + max_u64(ipu_ceil_div(m * n * width, rate),
                                             ipu_ceil_div(PANEL_ROW_BYTES * m, load)));
    return c + GEMM_PANEL_ROW_OVERHEAD * m;
}

/* Scratch: A (m x kpad) and B^T (n x kpad) decoded, C (m x n), and a staging
 * area for whole payloads (the largest of A, B and a packed C). */
static size_t gemm_staging(size_t m, size_t n, size_t kpad, size_t npad)
{
    size_t s = m * kpad;
    if (n * kpad > s)
        s = n * kpad;
    return m * npad > s ? m * npad : s;
}

static size_t scratch_gemm(const ipu_kernel_call *call)
{
    size_t m = call->args[3], n = call->args[4], k = call->args[5];
    gemm_args g = gemm_decode(call);
    size_t width = panel_width(ipu_dtype_size((int)g.a_type));
    size_t kpad = round_up(k, width), npad = round_up(n, panel_width(ipu_dtype_size((int)g.out_type)));
    return (m + n) * kpad + m * n + gemm_staging(m, n, kpad, npad);
}

/* Decode a rows x k panel operand into a row-major rows x kpad matrix. */
static void decode_panels(int type, int scale, const uint8_t *src, size_t rows, size_t kpad,
                          float *stage, float *dst)
{
    size_t width = panel_width(ipu_dtype_size(type)), kp = kpad / width;
    ipu_num_decode(type, scale, src, stage, kp * rows * width);
    for (size_t pi = 0; pi < kp; pi++)
        for (size_t r = 0; r < rows; r++)
            memcpy(dst + r * kpad + pi * width, stage + (pi * rows + r) * width, width * sizeof(float));
}

static void run_gemm(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    size_t m = call->args[3], n = call->args[4], k = call->args[5];
    gemm_args g = gemm_decode(call);
    int out_type = (int)g.out_type, packed = (g.flags & IPU_GEMM_PACKED) != 0;
    size_t in = ipu_dtype_size((int)g.a_type), out = ipu_dtype_size(out_type);
    size_t kpad = round_up(k, panel_width(in)), ow = panel_width(out), npad = round_up(n, ow);
    float *fa = scratch, *fb = fa + m * kpad, *fc = fb + n * kpad, *stage = fc + m * n;
    decode_panels((int)g.a_type, g.a_scale, ptr[0], m, kpad, stage, fa);
    decode_panels((int)g.b_type, g.b_scale, ptr[1], n, kpad, stage, fb);
    float beta = 0.0f;
    if (g.flags & IPU_GEMM_ACCUMULATE) {
        beta = 1.0f;
        if (packed) {
            ipu_num_decode(out_type, 0, ptr[2], stage, m * npad);
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++)
                    fc[i * n + j] = stage[((j / ow) * m + i) * ow + j % ow];
        } else {
            for (size_t i = 0; i < m; i++)
                ipu_num_decode(out_type, 0, ptr[2] + i * g.ldc * out, fc + i * n, n);
        }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)kpad, 1.0f, fa,
                (int)kpad, fb, (int)kpad, beta, fc, (int)n);
    if (packed) {
        memset(stage, 0, m * npad * sizeof(float));
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++)
                stage[((j / ow) * m + i) * ow + j % ow] = fc[i * n + j];
        ipu_num_encode(out_type, 0, stage, ptr[2], m * npad);
        size_t payload = panel_payload(m, n, out);
        memset(ptr[2] + payload, 0, panel_bytes(m, n, out) - payload);
    } else {
        for (size_t i = 0; i < m; i++)
            ipu_num_encode(out_type, 0, fc + i * n, ptr[2] + i * g.ldc * out, n);
    }
}

#define GEMM_FORMULA_TERMS                                                                        \
    " + (retained ? 0 : kp*ceil(8*n / L)) + kp*(3 + max(ceil(m*n*P / rate), ceil(8*m / L)))" \
    " + 2*m; kp = ceil(k / P), L = 16 if wide else 8"

static const ipu_kernel_def DEFS[] = {
    {IPU_K_TO_PANELS, "to_panels", 7, 192, IPU_BODY_PANELS, describe_rearrange, cycles_rearrange,
     NULL, run_rearrange,
     "10 + 2*kp + rows*kp*(K-major ? P : ceil(8 / copy_bytes_per_cycle)) + "
     "ceil(tail / copy_bytes_per_cycle); P = 8 / element bytes, kp = ceil(k / P), tail = "
     "round_up(8*rows*kp, 16) + 16 - 8*rows*kp",
     {0x60000, 0x80000, 128, 64, IPU_DT_F16, 64, 0}},
    {IPU_K_FROM_PANELS, "from_panels", 7, 160, IPU_BODY_PANELS, describe_rearrange,
     cycles_rearrange, NULL, run_rearrange,
     "10 + 2*kp + rows*kp*(K-major ? P : ceil(8 / copy_bytes_per_cycle)); P = 8 / element "
     "bytes, kp = ceil(k / P)",
     {0x80000, 0x60000, 128, 64, IPU_DT_F16, 64, 0}},
    {IPU_K_GEMM_PANELS_F16, "gemm_panels_f16", 9, 288, IPU_BODY_AMP, describe_gemm, cycles_gemm,
     scratch_gemm, run_gemm,
     "amp_call_overhead" GEMM_FORMULA_TERMS
     ", P = 4, rate = out f16: amp_macs_fp16_fp16, f32: amp_macs_fp16_fp32",
     {0x80000, 0x90000, 0x60000, 128, 64, 64, IPU_DT_F16, IPU_GEMM_PACKED, 0}},
    {IPU_K_GEMM_PANELS_F8, "gemm_panels_f8", 11, 352, IPU_BODY_AMP, describe_gemm, cycles_gemm,
     scratch_gemm, run_gemm,
     "amp_call_overhead" GEMM_FORMULA_TERMS ", P = 8, rate = amp_macs_fp8",
     {0x80000, 0x90000, 0x60000, 46, 47, 1152, IPU_DT_F143 | IPU_DT_F143 << 8, 0xFEFE, IPU_DT_F16,
      IPU_GEMM_WIDE, 47}},
};

const ipu_kernel_family ipu_kernels_panels = {DEFS, sizeof DEFS / sizeof *DEFS};
