/* assemble.h: packaging a low program.  Exchange phases are scheduled, the
 * package support (runtime state, kernel code sized per entry, then every
 * tile's descriptors: compute lists, exchange tables, host descriptors, the
 * Repeat's patch list and the slot table) is reserved first, buffers are
 * placed in the rest, and the records are encoded with the placed addresses.
 */
#ifndef IPU_PACKAGE_ASSEMBLE_H
#define IPU_PACKAGE_ASSEMBLE_H

#include "lower/program.h"
#include "package/package.h"
#include "report/placement.h"

/* A record the package carries: `size` bytes that fill() writes straight
 * into the package's storage (from source), so no copy of them is kept
 * beside it. */
typedef struct ipu_assembly_record {
    const char *stream;
    uint32_t kind; /* format.h ipu_record_kind */
    uint64_t size;
    ipu_status (*fill)(ipu_ctx *ctx, const void *source, void *dst);
    const void *source;
} ipu_assembly_record;

/* meta is taken (decref'd by the call); *report receives support sizes,
 * exchange horizons and the kernel inventory; support (optional, arrays of
 * tiles entries) receives each tile's reserved code and descriptor ranges. */
ipu_status ipu_assemble(ipu_ctx *ctx, ipu_low_program *prog, json_t *meta,
                        const ipu_assembly_record *records, size_t record_count, ipu_package **out,
                        json_t **report, ipu_support_map *support);

#endif
