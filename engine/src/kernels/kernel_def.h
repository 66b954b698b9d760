/* kernel_def.h: how a kernel family declares its entry points to the
 * registry (kernels.c): name, argument count, code (a supervisor part of its
 * own and a worker body that entry points may share), argument decoding into
 * checked operands, the cycle formula (as code and as text for the generated
 * table, with sample arguments) and the body.  Family files define arrays of
 * these; nothing else includes this header.
 */
#ifndef IPU_KERNEL_DEF_H
#define IPU_KERNEL_DEF_H

#include "kernels/kernels.h"

/* Fixed cycles per call of a non-AMP kernel (worker launch and loop setup). */
#define IPU_VERTEX_OVERHEAD 10u

typedef struct ipu_kernel_def {
    int entry;
    const char *name;
    uint32_t args;
    uint32_t supervisor_bytes; /* this entry's own code */
    int body;                  /* worker body id (ipu_kernel_body); entries may share one */
    const char *(*describe)(ipu_kernel_call *call);
    uint64_t (*cycles)(const ipu_kernel_call *call, const ipu_profile *p);
    size_t (*scratch_floats)(const ipu_kernel_call *call); /* NULL: none */
    void (*run)(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch);
    const char *formula; /* the cycle formula in words, for the generated table */
    uint32_t sample[IPU_KERNEL_MAX_ARGS]; /* arguments of the table's sample value */
} ipu_kernel_def;

typedef struct ipu_kernel_family {
    const ipu_kernel_def *defs;
    size_t count;
} ipu_kernel_family;

extern const ipu_kernel_family ipu_kernels_basic;
extern const ipu_kernel_family ipu_kernels_gemm;
extern const ipu_kernel_family ipu_kernels_attention;
extern const ipu_kernel_family ipu_kernels_norm;
extern const ipu_kernel_family ipu_kernels_panels;

/* Helpers for describe functions. */
void ipu_kernel_operand(ipu_kernel_call *call, const char *name, uint32_t address, uint64_t size,
                        uint32_t alignment, uint8_t access);
void ipu_kernel_separate(ipu_kernel_call *call, uint8_t a, uint8_t b);
static inline uint64_t ipu_ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

#endif
