/* fuzz.h: what the fuzz targets of engine/tests/fuzz/ share: the libFuzzer
 * entry point they each define, the limits that keep one execution in
 * milliseconds (inputs past them are skipped, not failed: they are slow, not
 * wrong), and the contract every library call is held to beyond not
 * crashing: a status the API defines and, on failure, a message.  A broken
 * contract aborts, which libFuzzer and the replay driver (replay.c) report
 * as a crash.
 */
#ifndef IPU_FUZZ_H
#define IPU_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ipu/ipu.h"

/* Device size a run may have: tiles and SRAM bytes per tile (the c600's
 * 624 KiB fits; a profile may declare up to 4 GiB a tile). */
#define FUZZ_MAX_TILES 16u
#define FUZZ_MAX_SRAM (1u << 20)
/* Control ops a run may execute, init and main program together, every
 * Repeat iteration counted. */
#define FUZZ_MAX_EXECUTED_OPS 512u
/* Bytes of all streams of a package together (the device allocates each
 * output stream at initialize; the validator's own stream limit is larger). */
#define FUZZ_MAX_STREAM_BYTES (16u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Is the package within the limits above (device_run.c)? */
int fuzz_package_small(const ipu_package *pkg);
/* Tiles the simulator's parallel loops hand out at a time, at least
 * (device/sim_compute.c: dynamic chunks of 8; the exchange: static of 16). */
#define FUZZ_ONE_CHUNK 8u
/* Run a package as a user replays a saved one (device_run.c): a device for
 * its own profile, its recorded parameters and inputs, initialize, then up to
 * two invocations, reading every output stream and any fault; once with
 * device tiles on one thread and, for more than FUZZ_ONE_CHUNK tiles, once on
 * two, which must give the same results.
 * Every call is held to fuzz_check; with must_not_fault, a device fault
 * aborts (printing it). */
void fuzz_run_package(ipu_ctx *ctx, const ipu_package *pkg, int must_not_fault);
/* The device kept between executions for the package's profile, its tiles
 * run on threads threads (1 or 2); NULL with a status when none can be made.
 * The caller unloads what it loads (ipu_device_unload). */
ipu_device *fuzz_kept_device(ipu_ctx *ctx, const ipu_package *pkg, int threads, ipu_status *status);

/* The 4-tile c600 layout of the packages the exchange and compute targets
 * build around their input. */
#define FUZZ_TILES 4u
#define FUZZ_CODE 0x4C700u     /* kernel code: after the c600 runtime state */
#define FUZZ_DESC 0x58000u     /* descriptors: after the host aperture */
#define FUZZ_DESC_END 0x5C000u
#define FUZZ_SRC 0x60000u      /* region 0: the initial bytes */
#define FUZZ_DST 0x90000u      /* region 1: destinations */
#define FUZZ_MAX_AREA 0x4000u  /* bytes at each */

/* The targets that build a package around their input (exchange, compute):
 * build(ctx, data, size, &pkg), then fuzz_run_package; always returns 0. */
typedef ipu_status (*fuzz_build_fn)(ipu_ctx *ctx, const uint8_t *data, size_t size, ipu_package **out);
int fuzz_build_and_run(const uint8_t *data, size_t size, fuzz_build_fn build);
/* Bytes of data such a package usually holds: every tile's area at
 * FUZZ_SRC and a few descriptors (kept under 128 KiB, the largest block
 * ASan's allocator recycles rather than maps afresh). */
#define FUZZ_DATA_BYTES (FUZZ_TILES * (FUZZ_MAX_AREA + 1024))
/* The start of such a build: a builder for the profile profile_json (a
 * constant of the target, parsed once) with the c600 layout above and room
 * for FUZZ_DATA_BYTES, so its storage is allocated once. */
struct ipu_pkg_builder;
ipu_status fuzz_start_package(ipu_ctx *ctx, const char *profile_json, struct ipu_pkg_builder **out);
/* The end of such a build: two invocations, then the package, or the
 * builder freed when status already failed. */
ipu_status fuzz_finish_package(struct ipu_pkg_builder *b, ipu_status status, ipu_package **out);
/* Tile t's initial bytes at FUZZ_SRC (area bytes, at most FUZZ_MAX_AREA: FP16 and FP8 values of every
 * size and sign, a few infinite or NaN) and, with allocations, allocations
 * over them and over as many destination bytes at FUZZ_DST. */
ipu_status fuzz_add_areas(struct ipu_pkg_builder *b, uint32_t t, uint32_t area, int allocations);

/* Was key (a digest of what a deterministic step reads) seen before in
 * this process (seen.c)?  Remembers it if not. */
int fuzz_seen_before(uint64_t key);

/* Abort unless status is one the API defines and a failure left a message. */
static inline ipu_status fuzz_check(const ipu_ctx *ctx, ipu_status status, const char *call)
{
    if ((unsigned)status > IPU_ERR_NO_PLAN) { /* the last status ipu.h defines */
        fprintf(stderr, "%s returned status %d, which ipu.h does not define\n", call, (int)status);
        abort();
    }
    if (status != IPU_OK && !*ipu_ctx_errmsg(ctx)) {
        fprintf(stderr, "%s failed with %s but left no message\n", call, ipu_status_name(status));
        abort();
    }
    return status;
}

/* A context for one execution: device tiles on one thread (fuzz_run_package
 * also runs them on two).  NULL when out of memory. */
static inline ipu_ctx *fuzz_context(void)
{
    ipu_ctx *ctx = ipu_ctx_create();
    if (ctx)
        ipu_ctx_set_threads(ctx, 1);
    return ctx;
}

/* A NUL-terminated copy of the input (the JSON targets read text). */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text) {
        for (size_t i = 0; i < size; i++)
            text[i] = (char)data[i];
        text[size] = 0;
    }
    return text;
}

#endif
