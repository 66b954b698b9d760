/* fuzz_package.c: libFuzzer target for the package loader and the device:
 * the input is a package file.  ipu_package_load must accept it or refuse it
 * with a status and a message; an accepted package is read back
 * (ipu_package_info_json, serialized and loaded again) and, when it is small
 * (fuzz.h: at most 16 tiles of at most 1 MiB SRAM, 512 executed control ops
 * over initialize and two invocations, 16 MiB of streams, so an execution
 * stays in milliseconds), run on a device of its own profile with its
 * recorded inputs.  An input the loader refuses is loaded a second time with
 * its header's total size, profile digest, tile count and CRC-32 made right
 * (the digest and tiles from the profile section, when it parses), so that
 * mutations reach the checks behind them.  Seeds: fixtures/packages/ and fixtures/fuzz/package/.
 */
#include <string.h>
#include <zlib.h>

#include "fuzz.h"
#include "package/package.h"

/* Make the header's profile digest and tile count those of the profile
 * section, when the section table leads to a profile that parses. */
static void fix_profile(uint8_t *bytes, size_t size)
{
    uint32_t sections = ipu_load_u32(bytes + 28);
    for (uint32_t i = 0; i < sections && i < 64; i++) {
        uint64_t at = IPU_PKG_HEADER_SIZE + (uint64_t)i * IPU_PKG_SECTION_ENTRY_SIZE;
        if (at + IPU_PKG_SECTION_ENTRY_SIZE > size)
            return;
        uint64_t offset = ipu_load_u64(bytes + at + 8), length = ipu_load_u64(bytes + at + 16);
        if (ipu_load_u32(bytes + at) != IPU_SEC_PROFILE || offset > size || length > size - offset)
            continue;
        char *text = fuzz_text(bytes + offset, (size_t)length);
        ipu_ctx *ctx = ipu_ctx_create();
        ipu_profile p;
        if (text && ctx && ipu_profile_parse(ctx, text, 0, &p) == IPU_OK) {
            ipu_store_u64(bytes + 32, ipu_profile_digest(&p));
            ipu_store_u32(bytes + 40, p.tiles);
        }
        ipu_ctx_free(ctx);
        free(text);
        return;
    }
}

/* Load the input; when refused, load it again with the header it should
 * have (*pkg NULL when both are refused). */
static void load(ipu_ctx *ctx, const uint8_t *data, size_t size, ipu_package **pkg)
{
    if (fuzz_check(ctx, ipu_package_load(ctx, data, size, pkg), "ipu_package_load") == IPU_OK ||
        size < IPU_PKG_HEADER_SIZE)
        return;
    uint8_t *fixed = malloc(size);
    if (!fixed)
        return;
    memcpy(fixed, data, size);
    ipu_store_u64(fixed + 16, size);
    fix_profile(fixed, size);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, fixed + IPU_PKG_HEADER_SIZE, (uInt)(size - IPU_PKG_HEADER_SIZE));
    ipu_store_u32(fixed + 24, (uint32_t)crc);
    ipu_ctx_clear_error(ctx);
    fuzz_check(ctx, ipu_package_load(ctx, fixed, size, pkg), "ipu_package_load");
    free(fixed);
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
    load(ctx, data, size, &pkg);
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
