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
/* Run a package as a user replays a saved one (device_run.c): a device for
 * its own profile, its recorded parameters and inputs, initialize, then up to
 * two invocations, reading every output stream and any fault; once with
 * device tiles on one thread, once on two, which must give the same results.
 * Every call is held to fuzz_check; with must_not_fault, a device fault
 * aborts (printing it). */
void fuzz_run_package(ipu_ctx *ctx, const ipu_package *pkg, int must_not_fault);

/* Abort unless status is one the API defines and a failure left a message. */
static inline ipu_status fuzz_check(const ipu_ctx *ctx, ipu_status status, const char *call)
{
    if ((unsigned)status > IPU_ERR_CANCELLED) {
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
