/* fuzz_package.c: libFuzzer target for the package loader and the device:
 * the input is a package file.  ipu_package_load must accept it or refuse it
 * with a status and a message; an accepted package is read back
 * (ipu_package_info_json, serialized and loaded again) and, when it is small
 * (fuzz.h: at most 16 tiles of at most 1 MiB SRAM, 512 executed control ops
 * over initialize and two invocations, 16 MiB of streams, so an execution
 * stays in milliseconds), run on a device of its own profile with its
 * recorded inputs.  Under libFuzzer, inputs come from the structure-aware
 * mutator (package_mutator.c), which keeps the header's size and CRC-32
 * right so that mutations reach the checks behind them; the counts printed
 * at exit show how many did.  Seeds: fixtures/packages/ and
 * fixtures/fuzz/package/.
 */
#include <string.h>
#include <zlib.h>

#include "fuzz.h"
#include "package/package.h"

/* What the inputs reached, printed at exit in libFuzzer's stat:: form (the
 * harness reads it): inputs run, inputs whose header total size and CRC-32
 * are right (so the loader's later checks saw them: the section table, the
 * sections, the validator) and inputs loaded. */
static uint64_t inputs, checksum_right, loaded;

static void print_counts(void)
{
    fprintf(stderr, "stat::package_inputs: %llu\nstat::package_checksum_right: %llu\nstat::package_loaded: %llu\n",
            (unsigned long long)inputs, (unsigned long long)checksum_right, (unsigned long long)loaded);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    atexit(print_counts);
    return 0;
}

/* Are the header's total size and CRC-32 those of the input? */
static int frame_right(const uint8_t *data, size_t size)
{
    if (size < IPU_PKG_HEADER_SIZE || ipu_load_u64(data + 16) != size)
        return 0;
    uLong crc = crc32(0L, Z_NULL, 0);
    return (uint32_t)crc32(crc, data + IPU_PKG_HEADER_SIZE, (uInt)(size - IPU_PKG_HEADER_SIZE)) ==
           ipu_load_u32(data + 24);
}

/* A loaded package serializes to bytes that load again into the same bytes. */
static void round_trip(ipu_ctx *ctx, const ipu_package *pkg)
{
    void *bytes = NULL;
    size_t size = 0;
    if (fuzz_check(ctx, ipu_package_serialize(ctx, pkg, &bytes, &size), "ipu_package_serialize"))
        return;
    ipu_package *again = NULL;
    if (fuzz_check(ctx, ipu_package_load(ctx, bytes, size, &again), "ipu_package_load") != IPU_OK) {
        fprintf(stderr, "a serialized package does not load again: %s\n", ipu_ctx_errmsg(ctx));
        abort();
    }
    void *bytes2 = NULL;
    size_t size2 = 0;
    if (fuzz_check(ctx, ipu_package_serialize(ctx, again, &bytes2, &size2), "ipu_package_serialize") ==
            IPU_OK &&
        (size2 != size || memcmp(bytes, bytes2, size))) {
        fprintf(stderr, "serialize(load(serialize(p))) differs from serialize(p)\n");
        abort();
    }
    ipu_free(bytes2);
    ipu_package_free(again);
    ipu_free(bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ipu_ctx *ctx = fuzz_context();
    if (!ctx)
        return 0;
    ipu_package *pkg = NULL;
    inputs++;
    checksum_right += frame_right(data, size);
    if (fuzz_check(ctx, ipu_package_load(ctx, data, size, &pkg), "ipu_package_load") == IPU_OK)
        loaded++;
    if (pkg) {
        char *info = NULL;
        fuzz_check(ctx, ipu_package_info_json(ctx, pkg, &info), "ipu_package_info_json");
        ipu_free(info);
        round_trip(ctx, pkg);
        if (fuzz_package_small(pkg))
            fuzz_run_package(ctx, pkg, 0);
    }
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
    return 0;
}
