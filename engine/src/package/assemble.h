/* assemble.h: packaging a low program, in two calls around placement.
 * ipu_package_lay_out sizes the package support from the program and its
 * scheduled exchange phases (runtime state, kernel code sized per entry,
 * then every tile's descriptors: compute lists, exchange tables, host
 * descriptors, the Repeat's patch list and the slot table); placement then
 * puts the buffers in the rest (place/program.h); ipu_package_encode writes
 * the records with the placed addresses.
 */
#ifndef IPU_PACKAGE_ASSEMBLE_H
#define IPU_PACKAGE_ASSEMBLE_H

#include "exchange/program.h"
#include "lower/program.h"
#include "package/package.h"

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

/* Each tile's reserved support ranges: kernel code [code_base,
 * code_end[t]), descriptors [descriptor_base, descriptor_end[t]), of which
 * exchange_table_bytes[t] are exchange tables; and the tensor bytes
 * placement has on every tile beside the support. */
typedef struct ipu_support_map {
    uint32_t code_base, descriptor_base;
    uint32_t *code_end;             /* per tile */
    uint32_t *descriptor_end;       /* per tile */
    uint32_t *exchange_table_bytes; /* per tile */
    uint32_t tensor_bytes_available;
} ipu_support_map;

/* The package support of a program: per tile, its kernel entries and
 * descriptor bytes (and each compute or host step's items grouped by tile);
 * kernel code from code_base to code_end (the fullest tile's), descriptors
 * in [desc_base, desc_limit). */
typedef struct ipu_package_layout {
    size_t step_count;
    uint64_t *desc_bytes;   /* per tile: compute lists and host descriptors */
    uint64_t *xtable_bytes; /* per tile: exchange tables (a header in every phase) */
    uint64_t *code_entries; /* per tile: bit per kernel entry */
    uint32_t **by_tile;     /* per step: kernels or host entries grouped by tile (counting sort) */
    uint32_t **tile_start;  /* per step: tiles + 1 offsets into by_tile */
    uint32_t *patch_count;  /* per tile: the Repeat's patches */
    uint32_t *desc_sizes;   /* per tile: its whole descriptor area */
    uint32_t code_base, code_end, code_max, desc_base, desc_limit, slots;
    uint64_t desc_max;
} ipu_package_layout;

/* Lay out the support; support (optional, arrays of tiles entries) receives
 * each tile's reserved code and descriptor ranges.  Fails (invalid argument)
 * when the support does not fit beside the aperture. */
ipu_status ipu_package_lay_out(ipu_ctx *ctx, ipu_low_program *prog, const ipu_xprogram *xprog,
                               ipu_package_layout *out, ipu_support_map *support);
void ipu_package_layout_free(ipu_package_layout *l);

/* The package of a placed program: meta is taken (decref'd by the call);
 * *report receives support sizes, exchange horizons and the kernel
 * inventory. */
ipu_status ipu_package_encode(ipu_ctx *ctx, ipu_low_program *prog, ipu_xprogram *xprog,
                              const ipu_package_layout *layout, json_t *meta, const ipu_assembly_record *records,
                              size_t record_count, ipu_package **out, json_t **report);

#endif
