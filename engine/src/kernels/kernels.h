/* kernels.h: the kernel library the device executes.  Each entry point has a
 * fixed argument count (u32 words in its descriptor), a code size (the kernel
 * inventory), a description of the memory it touches (operand ranges,
 * alignment, region and element-separation rules, which the device checks
 * before running it), a cycle formula built on the profile's rates, and a body
 * that computes on already-checked host pointers.
 *
 * Descriptor layout in tile SRAM: u16 entry, u16 argument count, then the
 * arguments as u32 words.  GEMM operands are row-major with row strides lda,
 * ldb, ldc in elements (at least k, n and n).
 */
#ifndef IPU_KERNELS_H
#define IPU_KERNELS_H

#include <stdint.h>

#include "core/profile.h"

/* Entry points; the values appear in packages (append-only). */
typedef enum ipu_kernel_entry {
    IPU_K_FILL = 1,     /* dst, nbytes, pattern (u32 repeated; 4 B aligned dst) */
    IPU_K_COPY = 2,     /* src, dst, nbytes */
    IPU_K_CAST = 3,     /* src, dst, count, src_type, src_scale, dst_type, dst_scale */
    IPU_K_ADD = 4,      /* a, b, dst, count, type (f32 or f16) */
    IPU_K_GEMM_F16 = 5, /* a, b, c, m, n, k, out_type (f16|f32), flags, lda, ldb, ldc */
    IPU_K_GEMM_F8 = 6,  /* a, b, c, m, n, k, in_types (a | b << 8), scales (a | b << 8, i8),
                           out_type (f16|f32), flags, lda, ldb, ldc */
    IPU_K_GELU = 7,     /* src, dst, count, type (f16|f32): tanh-approximation GELU */
    IPU_K_LAYERNORM = 8, /* src, dst, gamma, beta, rows, cols, src_stride, dst_stride, type,
                            param_type, epsilon (FP32 bits) */
    IPU_K_SOFTMAX = 9,      /* src, dst, rows, cols, valid, src_type, dst_type, ld_src, ld_dst,
                               scale (FP32 bits) */
    IPU_K_ATTN_SCORES = 10, /* q, k, s, rows, keys, head_dim, ld_q, ld_k, ld_s, scale */
    IPU_K_ATTN_BLOCK = 11,  /* q, k, v, state, rows, keys, valid, head_dim, ld_q, ld_k, ld_v,
                               ld_state, scale, flags: one FlashAttention key block */
    IPU_K_ATTN_FINISH = 12, /* state, out, rows, head_dim, ld_state, ld_out, out_type */
    IPU_K_TO_PANELS = 13,       /* src, dst, rows, k, dtype, ld, flags: row-major -> panels */
    IPU_K_FROM_PANELS = 14,     /* src, dst, rows, k, dtype, ld, flags: panels -> row-major */
    IPU_K_GEMM_PANELS_F16 = 15, /* a, b, c, m, n, k, out_type, flags, ldc (panel operands) */
    IPU_K_GEMM_PANELS_F8 = 16,  /* a, b, c, m, n, k, in_types, scales, out_type, flags, ldc */
    IPU_K_BIAS = 17,            /* x, bias, rows, cols, ld, type (f16|f32): x[r][c] += bias[c] in place */
    IPU_K_ATTN_MERGE = 18,      /* acc, other, rows, head_dim, ld_acc, ld_other: flash states of later keys
                                   merged into acc, row by row */
    IPU_K_GELU_ERF = 19,        /* src, dst, count, type (f16|f32): GELU in its erf form */
    IPU_K_ENTRY_END = 20
} ipu_kernel_entry;

/* Worker bodies, shared by the entry points built on them (append-only). */
typedef enum ipu_kernel_body {
    IPU_BODY_NONE = 0,
    IPU_BODY_MEMORY = 1,  /* fill, copy */
    IPU_BODY_VECTOR = 2,  /* cast, add, gelu (both forms), bias */
    IPU_BODY_AMP = 3,     /* the GEMMs */
    IPU_BODY_REDUCE = 4,  /* normalization */
    IPU_BODY_ATTENTION = 5,
    IPU_BODY_PANELS = 6,
    IPU_BODY_END = 7
} ipu_kernel_body;

/* GEMM flags. */
#define IPU_GEMM_ACCUMULATE 1u /* C += A x B (C read first), else C = A x B */
#define IPU_GEMM_WIDE 2u       /* 128-bit operand loads: A and B in region 1, 16 B aligned */
#define IPU_GEMM_PACKED 4u     /* panel GEMMs: C written in panel layout (the next GEMM's A) */
#define IPU_GEMM_RETAINED 8u   /* panel GEMMs: B's panels still resident from the previous call */
/* Panel rearrangement flag: the strided side is stored K-major (a row-major B). */
#define IPU_PANELS_KMAJOR 1u

/* Bytes of an operand of rows x k elements of elem_size bytes in AMP panel
 * layout: K-panels of one 64-bit load per row (8 FP8, 4 FP16, 2 FP32
 * values), zero-padded in K, plus the access tail the loads may read
 * (kernels_panels.c documents the layout). */
uint64_t ipu_panel_bytes(uint64_t rows, uint64_t k, uint64_t elem_size);

#define IPU_ACCESS_READ 1u
#define IPU_ACCESS_WRITE 2u

#define IPU_KERNEL_MAX_ARGS 16
#define IPU_KERNEL_MAX_OPERANDS 4

typedef struct ipu_operand {
    uint32_t address;
    uint32_t size;       /* bytes */
    uint32_t alignment;  /* required address alignment */
    uint8_t access;      /* IPU_ACCESS_READ | IPU_ACCESS_WRITE */
    uint8_t region1;     /* 1: must lie in region 1 */
    const char *name;
} ipu_operand;

typedef struct ipu_kernel_call {
    int entry;
    uint32_t args[IPU_KERNEL_MAX_ARGS];
    uint32_t arg_count;
    ipu_operand operands[IPU_KERNEL_MAX_OPERANDS];
    uint32_t operand_count;
    /* Operand index pairs that must not share a memory element (for every
     * entry that declares them, operand i is the address in argument i). */
    uint8_t separate[4][2];
    uint32_t separate_count;
} ipu_kernel_call;

/* Entry name ("gemm_f16"...), NULL when unknown. */
const char *ipu_kernel_name(int entry);
/* Number of u32 arguments, 0 when the entry is unknown. */
uint32_t ipu_kernel_arg_count(int entry);
/* The argument that holds an entry's mode flags (IPU_GEMM_ACCUMULATE:
 * accumulate, else initialize), -1 for entries without modes. */
int ipu_kernel_mode_arg(int entry);
/* Code bytes the entry occupies in region 0 (the inventory): its supervisor
 * part plus its worker body (ipu_kernel_body_size) when nothing else on the
 * tile already brought that body. */
uint32_t ipu_kernel_code_size(int entry);
uint32_t ipu_kernel_supervisor_size(int entry);
int ipu_kernel_body_of(int entry);
uint32_t ipu_kernel_body_size(int body);
/* The cycle formula in words and the arguments of its sample value (for the
 * generated kernel table); NULL when the entry is unknown. */
const char *ipu_kernel_formula(int entry, const uint32_t **sample);

/* Decode a call's operands from its arguments.  Returns 0 on success or a
 * static message describing why the arguments are malformed. */
const char *ipu_kernel_describe(ipu_kernel_call *call);

/* Cycles the call takes on one tile. */
uint64_t ipu_kernel_cycles(const ipu_kernel_call *call, const ipu_profile *p);

/* Scratch the body needs (floats), for the caller to provide per thread. */
size_t ipu_kernel_scratch_floats(const ipu_kernel_call *call);

/* Run the body.  ptr[i] points at operand i's bytes (already checked). */
void ipu_kernel_run(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch);

#endif
