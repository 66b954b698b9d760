/* program.h: placing a low program's buffers (placement v1, place.h): one
 * request per buffer in the range its kind allows, the operand pairs its
 * kernels declare separate as conflicts, and each tile's own package
 * support (its code and its descriptors) kept free.
 */
#ifndef IPU_PLACE_PROGRAM_H
#define IPU_PLACE_PROGRAM_H

#include "lower/program.h"
#include "place/place.h"

/* Where the package support lies on each tile: kernel code below
 * code_end[t] (from the runtime state up), descriptors in [desc_base,
 * desc_end[t]). */
typedef struct ipu_place_support {
    const uint32_t *code_end; /* per tile: the end of its kernel code */
    const uint32_t *desc_end; /* per tile: the end of its descriptors, from desc_base */
    uint32_t desc_base;
} ipu_place_support;

/* Give every buffer its address; when one does not fit, the error names it
 * and prog->unplaced is its index.  The program's placement mutations (an
 * ignored separation, an activation overlapping a parameter) are taken here. */
ipu_status ipu_place_program(ipu_ctx *ctx, ipu_low_program *prog, const ipu_place_support *support);

#endif
