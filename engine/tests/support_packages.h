/* support_packages.h: helpers for hand-building small device packages in the
 * engine tests, without the compiler.  A test loads a small fixture profile,
 * opens a builder with the standard test layout (kernel code after the
 * runtime state, descriptors right after the host aperture, free tensor space
 * in region 0 above them and all of region 1), appends records per tile
 * (compute lists of kernel descriptors, exchange tables, patch lists, host
 * descriptors) in the byte formats of package/format.h, builds the package,
 * and runs it on a fresh simulated device, getting back the status of
 * initialize and run, the cycle report and the parsed fault JSON.
 *
 * The helpers assert (cmocka) on anything that is the test's own mistake:
 * a missing fixture, a builder call that fails, a package that does not
 * validate.  Device outcomes are returned for the test to assert on.
 */
#ifndef IPU_TESTS_SUPPORT_PACKAGES_H
#define IPU_TESTS_SUPPORT_PACKAGES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "core/profile.h"
#include "kernels/kernels.h"
#include "package/package.h"

/* ---- profiles ----------------------------------------------------------- */
/* The fixture profile text: fixtures/profiles/tiles<N>.json, or c600.json for
 * 1472 tiles (IPU_FIXTURES names the fixtures folder).  Release with free(). */
char *tpkg_profile_text(uint32_t tiles);
/* The fixture profile, parsed with ipu_profile_parse. */
void tpkg_profile(ipu_ctx *ctx, uint32_t tiles, ipu_profile *out);

/* ---- the standard test layout ------------------------------------------ */
#define TPKG_DESC_BYTES 0x4000u /* descriptor area per tile */
/* Kernel code: the first 64-byte boundary after the runtime state.  The
 * builder places entries in the order a test adds them, each rounded up to
 * 8 bytes. */
uint32_t tpkg_code_base(const ipu_profile *p);
/* Descriptors: [aperture_end, aperture_end + TPKG_DESC_BYTES). */
uint32_t tpkg_desc_base(const ipu_profile *p);
/* Free region-0 tensor space: from the end of the descriptor area up to
 * region1_base.  Region 1 (from region1_base) is free as well. */
uint32_t tpkg_data0(const ipu_profile *p);

/* A context running device tiles on 2 threads (fails the test when out of memory). */
ipu_ctx *tpkg_context(void);
/* Three region-0 tensor addresses past the data area, each at the start of
 * its own memory element (and asserted below region 1). */
void tpkg_elements(const ipu_profile *p, uint32_t *x, uint32_t *y, uint32_t *z);

ipu_pkg_builder *tpkg_builder(ipu_ctx *ctx, const ipu_profile *p);
/* Finish and validate; the builder is consumed. */
ipu_package *tpkg_build(ipu_ctx *ctx, ipu_pkg_builder *b);

/* ---- kernel descriptors -------------------------------------------------- */
typedef struct tpkg_kernel {
    uint32_t entry, argc;
    uint32_t args[IPU_KERNEL_MAX_ARGS];
} tpkg_kernel;

tpkg_kernel tpkg_fill(uint32_t dst, uint32_t bytes, uint32_t pattern);
tpkg_kernel tpkg_copy(uint32_t src, uint32_t dst, uint32_t bytes);
tpkg_kernel tpkg_gemm_f16(uint32_t a, uint32_t b, uint32_t c, uint32_t m, uint32_t n, uint32_t k,
                          uint32_t out_type, uint32_t flags);
/* Bytes a descriptor occupies in a compute list (head word + arguments). */
uint32_t tpkg_kernel_bytes(const tpkg_kernel *k);

/* Append a compute list (u32 count, then the descriptors) to the tile and
 * point its slot at it; with_code adds each called entry's code to the tile.
 * Returns the list's address: descriptor 0 starts at list + 4. */
uint32_t tpkg_compute_list(ipu_pkg_builder *b, uint32_t tile, uint32_t slot,
                           const tpkg_kernel *kernels, size_t count, int with_code);

/* ---- exchange tables ---------------------------------------------------- */
typedef struct tpkg_xrow {
    uint32_t op, flags, peer, cycle, words, address;
} tpkg_xrow;

tpkg_xrow tpkg_send(uint32_t cycle, uint32_t words, uint32_t address);
tpkg_xrow tpkg_recv(uint32_t from, uint32_t cycle, uint32_t words, uint32_t address);
tpkg_xrow tpkg_set_base(uint32_t address);
tpkg_xrow tpkg_reset_base(void);

/* Append an exchange table (u32 row count, then 16-byte rows); returns its
 * address: row r starts at table + 4 + 16 r. */
uint32_t tpkg_exchange_table(ipu_pkg_builder *b, uint32_t tile, uint32_t slot,
                             const tpkg_xrow *rows, size_t count);

/* ---- patch lists and host descriptors ------------------------------------ */
typedef struct tpkg_patch {
    uint32_t kind, target, a, b;
} tpkg_patch;

uint32_t tpkg_patch_list(ipu_pkg_builder *b, uint32_t tile, uint32_t slot,
                         const tpkg_patch *patches, size_t count);

/* A host descriptor entry (format.h): rows of bytes each, from stream
 * offset and tile address on, stream_stride and tile_stride apart; reserved
 * must be 0 in a valid entry. */
typedef struct tpkg_host_entry {
    uint32_t stream, offset, address, bytes;
    uint32_t rows, stream_stride, tile_stride, reserved;
} tpkg_host_entry;

/* One contiguous run: one row of bytes. */
tpkg_host_entry tpkg_host_run(uint32_t stream, uint32_t offset, uint32_t address, uint32_t bytes);

uint32_t tpkg_host_descriptor(ipu_pkg_builder *b, uint32_t tile, uint32_t slot,
                              const tpkg_host_entry *entries, size_t count);

/* Little-endian u32 words as descriptor bytes (a patch table, say). */
uint32_t tpkg_put_words(ipu_pkg_builder *b, uint32_t tile, const uint32_t *words, size_t count);

/* Initial data: count bytes at address, byte i = (seed + i * 37) & 0xFF. */
void tpkg_data(ipu_pkg_builder *b, uint32_t tile, uint32_t address, uint32_t count, uint32_t seed);

/* A builder call that must succeed. */
#define TPKG_OK(ctx, expr) tpkg_ok_at(__FILE__, __LINE__, (ctx), (expr), #expr)
void tpkg_ok_at(const char *file, int line, ipu_ctx *ctx, ipu_status status, const char *what);

/* ---- running on the simulator --------------------------------------------- */
/* A device for the package's profile (created from its canonical JSON). */
ipu_device *tpkg_device(ipu_ctx *ctx, const ipu_package *pkg);
/* The device's fault, parsed. */
json_t *tpkg_fault(ipu_ctx *ctx, const ipu_device *dev);

typedef struct tpkg_outcome {
    ipu_status init;   /* ipu_device_initialize */
    ipu_status run;    /* ipu_device_run; IPU_ERR_STATE when initialize failed */
    json_t *fault;     /* ipu_device_fault_json after the last call, parsed */
    json_t *cycles;    /* the run's cycle report (NULL unless run succeeded) */
    char *cycles_text; /* the same, as the device returned it */
} tpkg_outcome;

/* Create a device, initialize it with the package, run the main program once
 * (when initialize succeeded) and collect the outcome. */
tpkg_outcome tpkg_execute(ipu_ctx *ctx, const ipu_package *pkg);
void tpkg_outcome_free(tpkg_outcome *o);

/* Assert a fault's kind, tile and [address_lo, address_hi); on a mismatch,
 * the whole fault JSON is printed. */
#define TPKG_EXPECT_FAULT(fault, kind, tile, lo, hi) \
    tpkg_expect_fault_at(__FILE__, __LINE__, (fault), (kind), (tile), (lo), (hi))
void tpkg_expect_fault_at(const char *file, int line, const json_t *fault, const char *kind,
                          uint32_t tile, uint32_t lo, uint32_t hi);
/* Integer member of a fault; -1 when it is null or missing. */
long long tpkg_fault_int(const json_t *fault, const char *key);
/* String member of a fault; NULL when it is null or missing. */
const char *tpkg_fault_str(const json_t *fault, const char *key);

#endif
