/* package.h: the loadable image in memory, its builder (used by the compiler
 * and by the hand-built stress and fault programs), serializer and loader.
 * Every package, built or loaded, passes one validator before a device sees
 * it, so the device may rely on the structure (bounds, kinds, disjoint
 * segments, well-formed records) and checks only what depends on run time.
 */
#ifndef IPU_PACKAGE_H
#define IPU_PACKAGE_H

#include <jansson.h>

#include "core/core.h"
#include "core/profile.h"
#include "package/format.h"

typedef struct ipu_pkg_segment {
    uint32_t tile, kind, address, size, entry;
    uint64_t data_offset; /* into data (DESCRIPTOR and DATA kinds) */
} ipu_pkg_segment;

typedef struct ipu_pkg_alloc {
    uint32_t tile, address, size;
    uint32_t name_offset;   /* into strings */
    uint32_t tensor_offset; /* into strings: the owner tensor ("" when none) */
    uint32_t first, last;   /* program phases, inclusive (format.h) */
    uint32_t op;            /* the compiler op that made it, IPU_NO_OP when none */
    uint32_t kind;          /* ipu_alloc_kind */
    uint32_t shape_offset;  /* into strings: what it holds ("46x1152 f16", "4096 B"; "" when unknown) */
} ipu_pkg_alloc;

typedef struct ipu_pkg_op {
    uint32_t op, a, b, c;
    uint32_t origin[2]; /* compiler op of the compute (or host) and exchange phases */
} ipu_pkg_op;

/* Rows [row_lo, row_hi) x columns [col_lo, col_hi) of compiler op op's
 * output, row-major at address on tile, stride bytes per row, complete once
 * phase has run (the per-op check reads them; the device does not). */
typedef struct ipu_pkg_capture {
    uint32_t op, phase, tile, address, stride;
    uint32_t row_lo, row_hi, col_lo, col_hi;
} ipu_pkg_capture;

typedef struct ipu_pkg_compiler_op {
    uint32_t kind_offset, name_offset; /* into strings */
} ipu_pkg_compiler_op;

typedef struct ipu_pkg_stream {
    uint32_t direction;
    uint32_t name_offset;
    uint64_t size;
} ipu_pkg_stream;

typedef struct ipu_pkg_record {
    uint32_t kind, stream, invocation;
    uint64_t data_offset, size;
} ipu_pkg_record;

struct ipu_package {
    ipu_profile profile;
    uint64_t profile_digest;
    uint32_t invocations;
    uint32_t slots;
    uint32_t *slot_tables; /* per tile */
    char *meta_json;       /* NUL-terminated */
    ipu_pkg_segment *segments;
    size_t segment_count;
    ipu_pkg_alloc *allocs;
    size_t alloc_count;
    ipu_pkg_compiler_op *compiler_ops;
    size_t compiler_op_count;
    ipu_pkg_capture *captures;
    size_t capture_count;
    ipu_pkg_op *init_ops;
    size_t init_count;
    ipu_pkg_op *main_ops;
    size_t main_count;
    ipu_pkg_stream *streams;
    size_t stream_count;
    ipu_pkg_record *records;
    size_t record_count;
    uint8_t *strings;
    size_t strings_size;
    uint8_t *data;
    size_t data_size;
    /* Per tile, indices of its segments sorted by address (built by validation). */
    uint32_t *tile_segment_start; /* tiles + 1 entries */
    uint32_t *tile_segments;
    /* Per tile, indices of its allocations sorted by address (built by
     * validation), and per position the largest end of the allocations up
     * to it (a search walking down stops where nothing reaches further). */
    uint32_t *tile_alloc_start; /* tiles + 1 entries */
    uint32_t *tile_allocs;
    uint32_t *tile_alloc_reach;
};

const char *ipu_pkg_string(const ipu_package *pkg, uint32_t offset);
/* Index of the named stream, -1 when absent. */
int ipu_pkg_find_stream(const ipu_package *pkg, const char *name);
/* The segment on tile containing [address, address + size), NULL when none. */
const ipu_pkg_segment *ipu_pkg_segment_at(const ipu_package *pkg, uint32_t tile, uint32_t address,
                                          uint32_t size);
/* Bytes of a DESCRIPTOR or DATA segment. */
const uint8_t *ipu_pkg_segment_bytes(const ipu_package *pkg, const ipu_pkg_segment *seg);
/* The allocation on tile holding [address, address + size) whole and live at
 * phase, -1 when none; with *holder (may be NULL) the live allocation holding
 * address, else the one holding it whose life is nearest phase (-1: none). */
int64_t ipu_pkg_alloc_find(const ipu_package *pkg, uint32_t tile, uint32_t address, uint32_t size,
                           uint32_t phase, int64_t *holder);
/* The allocation on tile holding byte address live at phase; -1 when none. */
int64_t ipu_pkg_alloc_at(const ipu_package *pkg, uint32_t tile, uint32_t address, uint32_t phase);
/* Of the allocations on tile holding byte address, none live at phase, the
 * one whose life is nearest phase; -1 when one is live or none holds it. */
int64_t ipu_pkg_alloc_nearest(const ipu_package *pkg, uint32_t tile, uint32_t address, uint32_t phase);
/* The allocation that held byte address on tile before the one live at
 * phase (-1: none live there): of the others holding it, the one whose life
 * ended last before phase, else (a Repeat body's earlier iteration) the
 * one ending last of all, else the live one itself. */
int64_t ipu_pkg_alloc_before(const ipu_package *pkg, uint32_t tile, uint32_t address, uint32_t phase);
/* Is allocation a live at phase? */
static inline int ipu_pkg_alloc_live(const ipu_pkg_alloc *a, uint32_t phase)
{
    return a->first <= phase && phase <= a->last;
}
/* "op 3 matmul block_out" for a compiler op index; "" for IPU_NO_OP. */
void ipu_pkg_compiler_op_label(const ipu_package *pkg, uint32_t op, char *out, size_t size);

/* Build the per-tile allocation index (allocations.c; validation calls it). */
ipu_status ipu_pkg_index_allocs(ipu_ctx *ctx, ipu_package *pkg);
/* Structural validation; builds the per-tile segment and allocation indexes. */
ipu_status ipu_pkg_validate(ipu_ctx *ctx, ipu_package *pkg);

/* A section's place in a package file (file.c). */
typedef struct ipu_pkg_section_entry {
    uint64_t offset, size;
    int present;
} ipu_pkg_section_entry;
/* The header's magic, version, size and the file's length (file_size bytes,
 * head: its first head_size of them); IPU_ERR_MALFORMED when wrong. */
ipu_status ipu_pkg_check_header(ipu_ctx *ctx, const uint8_t *head, size_t head_size, uint64_t file_size);
/* Then the checksum (crc: the CRC-32 of every byte after the header), the
 * reserved tail and the section table, which head must hold: every section
 * present once, inside the file, aligned, none overlapping another. */
ipu_status ipu_pkg_read_table(ipu_ctx *ctx, const uint8_t *head, size_t head_size, uint64_t file_size,
                              uint32_t crc, ipu_pkg_section_entry sec[IPU_SEC_END]);
/* Is text valid UTF-8 (what a JSON string holds: stream names are)? */
int ipu_pkg_utf8(const char *text);
/* A section type's name ("streams"). */
const char *ipu_pkg_section_name(int type);
/* A malformed package's message prefixed with the file it came from. */
ipu_status ipu_pkg_name_file(ipu_ctx *ctx, ipu_status status, const char *path);

/* ---- builder ---------------------------------------------------------- */
/* A builder lays out each tile's descriptor area from desc_base (growing up to
 * desc_limit) and its kernel code from code_base (region 0).  Slot tables are
 * placed at the end of each tile's descriptor area when the package is built. */
typedef struct ipu_pkg_builder ipu_pkg_builder;

ipu_status ipu_pkg_builder_create(ipu_ctx *ctx, const ipu_profile *profile, uint32_t code_base,
                                  uint32_t desc_base, uint32_t desc_limit, ipu_pkg_builder **out);
void ipu_pkg_builder_free(ipu_pkg_builder *b);
/* A new slot id (shared by all tiles). */
uint32_t ipu_pkg_new_slot(ipu_pkg_builder *b);
/* Append bytes to the tile's descriptor area; *address receives their address. */
ipu_status ipu_pkg_put(ipu_pkg_builder *b, uint32_t tile, const void *bytes, size_t size,
                       uint32_t *address);
/* Lay every tile's descriptor area (bytes[t], at most) in the package
 * storage up front, before any put: puts then write there, and building the
 * package copies nothing (a compiler that knows its descriptor sizes keeps
 * one copy of them, not two). */
ipu_status ipu_pkg_reserve_descriptors(ipu_pkg_builder *b, const uint32_t *bytes);
/* Append a record and point the tile's slot at it. */
ipu_status ipu_pkg_put_slot(ipu_pkg_builder *b, uint32_t tile, uint32_t slot, const void *bytes,
                            size_t size, uint32_t *address);
/* Ensure the kernel entry's code is on the tile. */
ipu_status ipu_pkg_add_code(ipu_pkg_builder *b, uint32_t tile, int entry);
/* Initial contents of writable memory (copied). */
ipu_status ipu_pkg_add_data(ipu_pkg_builder *b, uint32_t tile, uint32_t address, const void *bytes,
                            uint32_t size);
/* An allocation that lives for the whole program (hand-built packages); its
 * shape is its size in bytes ("4096 B"). */
ipu_status ipu_pkg_add_alloc(ipu_pkg_builder *b, uint32_t tile, uint32_t address, uint32_t size,
                             const char *name);
/* An allocation with its owner tensor (NULL: none), lifetime in program
 * phases, compiler op (IPU_NO_OP: none), kind and shape (NULL: "",
 * unknown; the notation of lower/shape.c). */
typedef struct ipu_pkg_alloc_def {
    uint32_t tile, address, size;
    const char *name, *tensor;
    uint32_t first, last, op, kind;
    const char *shape;
} ipu_pkg_alloc_def;
ipu_status ipu_pkg_define_alloc(ipu_pkg_builder *b, const ipu_pkg_alloc_def *def);
/* A compiler op (kind as "matmul", name as "block_out"): ops are numbered in
 * the order they are added. */
ipu_status ipu_pkg_add_compiler_op(ipu_pkg_builder *b, const char *kind, const char *name);
ipu_status ipu_pkg_add_capture(ipu_pkg_builder *b, const ipu_pkg_capture *capture);
/* The compiler ops the next control ops' two phases lower (IPU_NO_OP: none). */
void ipu_pkg_set_origin(ipu_pkg_builder *b, uint32_t compute, uint32_t exchange);
/* Set the exchange-phase origin of op index (a compute op that takes an exchange). */
void ipu_pkg_set_op_exchange_origin(ipu_pkg_builder *b, int init, size_t index, uint32_t origin);
/* Append a control op to the init (init != 0) or main program. */
ipu_status ipu_pkg_emit(ipu_pkg_builder *b, int init, uint32_t op, uint32_t a, uint32_t bb,
                        uint32_t c);
/* Current length of the init or main program (for Repeat body lengths). */
size_t ipu_pkg_program_length(const ipu_pkg_builder *b, int init);
/* Set op index's b field (a Repeat's body length once the body is emitted). */
void ipu_pkg_set_op_b(ipu_pkg_builder *b, int init, size_t index, uint32_t value);
ipu_status ipu_pkg_add_stream(ipu_pkg_builder *b, const char *name, uint32_t direction,
                              uint64_t size, uint32_t *id);
ipu_status ipu_pkg_add_record(ipu_pkg_builder *b, uint32_t kind, uint32_t stream,
                              uint32_t invocation, const void *bytes, uint64_t size);
/* A record of size zeroed bytes the caller fills at *dst (valid until the
 * builder's next addition). */
ipu_status ipu_pkg_add_record_space(ipu_pkg_builder *b, uint32_t kind, uint32_t stream, uint32_t invocation,
                                    uint64_t size, uint8_t **dst);
/* Room for `bytes` more of data (records and segment bytes) up front, so the
 * storage is allocated once, not moved as it grows. */
ipu_status ipu_pkg_reserve_data(ipu_pkg_builder *b, uint64_t bytes);
/* Metadata (the builder takes the reference). */
void ipu_pkg_set_meta(ipu_pkg_builder *b, json_t *meta);
void ipu_pkg_set_invocations(ipu_pkg_builder *b, uint32_t invocations);
/* Finish, validate and hand over the package; the builder is freed. */
ipu_status ipu_pkg_build(ipu_pkg_builder *b, ipu_package **out);

#endif
