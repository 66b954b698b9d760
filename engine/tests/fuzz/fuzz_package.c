/* fuzz_package.c: libFuzzer target for the package loader and the device:
 * the input is a package file.  ipu_package_load must accept it or refuse it
 * with a status and a message; an accepted package is read back
 * (ipu_package_info_json, serialized and loaded again) and, when it is small
 * (fuzz.h: at most 16 tiles of at most 1 MiB SRAM, 512 executed control ops
 * over initialize and two invocations, 16 MiB of streams, so an execution
 * stays in milliseconds), run on a device of its own profile with its
 * recorded inputs.  The same bytes read as a file without loading
 * (ipu_package_peek_file) must not be refused when the loader takes them,
 * and must say what the loaded package says (tiles, streams, metadata).
 * Under libFuzzer, inputs come from the structure-aware
 * mutator (package_mutator.c), which keeps the header's size and CRC-32
 * right so that mutations reach the checks behind them; the counts printed
 * at exit show how many did.  Seeds: fixtures/packages/ and
 * fixtures/fuzz/package/.
 */
#define _GNU_SOURCE /* memfd_create */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "fuzz.h"
#include "package/package.h"

/* What the inputs reached, printed at exit in libFuzzer's stat:: form (the
 * harness reads it): inputs run, inputs whose header total size and CRC-32
 * are right (so the loader's later checks saw them: the section table, the
 * sections, the validator), inputs loaded and inputs peeked. */
static uint64_t inputs, checksum_right, loaded, peeks;

static void print_counts(void)
{
    fprintf(stderr,
            "stat::package_inputs: %llu\nstat::package_checksum_right: %llu\nstat::package_loaded: %llu\n"
            "stat::package_peeked: %llu\n",
            (unsigned long long)inputs, (unsigned long long)checksum_right, (unsigned long long)loaded,
            (unsigned long long)peeks);
}

/* The input as a file for ipu_package_peek_file: a memory file, rewritten
 * at every execution. */
static int input_file = -1;
static char input_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    atexit(print_counts);
    input_file = memfd_create("fuzz-package", 0);
    snprintf(input_path, sizeof input_path, "/proc/self/fd/%d", input_file);
    return 0;
}

/* The streams of an info or peek summary, without what only info has. */
static json_t *streams_of(json_t *summary)
{
    json_t *streams = json_array(), *s;
    size_t i;
    json_array_foreach(json_object_get(summary, "streams"), i, s)
        json_array_append_new(streams, json_pack("{s:O, s:O, s:O}", "name", json_object_get(s, "name"), "direction",
                                                 json_object_get(s, "direction"), "size", json_object_get(s, "size")));
    return streams;
}

/* What peek's result depends on (peek.c), as a digest.  When the header
 * and section table pass its checks: the tile count in the header and the
 * bytes of the streams, strings and meta sections (nothing else is read
 * after the table).  Otherwise: the input's size, whether its size and
 * CRC-32 fields are right (header_right) and its header and section table
 * (the bytes peek reads first) with the CRC-32 field left out. */
static uint64_t peek_key(ipu_ctx *ctx, const uint8_t *data, size_t size, int header_right)
{
    uint8_t head[IPU_PKG_HEADER_SIZE + 64 * IPU_PKG_SECTION_ENTRY_SIZE];
    size_t head_size = size < sizeof head ? size : sizeof head;
    ipu_pkg_section_entry sec[IPU_SEC_END];
    uint64_t parts[2 + 2 * 3];
    if (header_right && ipu_pkg_check_header(ctx, data, head_size, size) == IPU_OK &&
        ipu_pkg_read_table(ctx, data, head_size, size, ipu_load_u32(data + 24), sec) == IPU_OK) {
        const int read[] = {IPU_SEC_STREAMS, IPU_SEC_STRINGS, IPU_SEC_META};
        parts[0] = 1;
        parts[1] = ipu_load_u32(data + 40);
        for (int i = 0; i < 3; i++) {
            parts[2 + 2 * i] = sec[read[i]].size;
            parts[3 + 2 * i] = ipu_digest64(data + sec[read[i]].offset, (size_t)sec[read[i]].size);
        }
        return ipu_digest64(parts, sizeof parts);
    }
    if (head_size)
        memcpy(head, data, head_size);
    if (head_size >= 28)
        ipu_store_u32(head + 24, 0);
    uint64_t other[4] = {0, size, (uint64_t)header_right, ipu_digest64(head, head_size)};
    return ipu_digest64(other, sizeof other);
}

/* Peek agrees with the loader: refuses what it refuses, else says the same.
 * Peek is deterministic in the bytes it reads, and what it is compared with
 * (the loaded package's tiles, streams and metadata) comes from the same
 * bytes, so an input is not peeked when those bytes were peeked before in
 * the same case: loader refused, or loaded and compared (most mutations
 * edit records peek never reads). */
static void check_peek(ipu_ctx *ctx, const uint8_t *data, size_t size, int header_right, const char *info)
{
    uint64_t key[2] = {peek_key(ctx, data, size, header_right), info != NULL};
    if (fuzz_seen_before(ipu_digest64(key, sizeof key)))
        return;
    peeks++;
    if (input_file < 0 || ftruncate(input_file, 0) || pwrite(input_file, data, size, 0) != (ssize_t)size)
        return;
    char *text = NULL;
    ipu_ctx_clear_error(ctx); /* the loader's message: peek must leave its own */
    ipu_status status = fuzz_check(ctx, ipu_package_peek_file(ctx, input_path, &text), "ipu_package_peek_file");
    if (!info || status == IPU_ERR_NO_MEMORY) {
        ipu_free(text);
        return;
    }
    json_t *peeked = text ? json_loads(text, 0, NULL) : NULL, *loaded_info = json_loads(info, 0, NULL);
    json_t *a = streams_of(peeked), *b = streams_of(loaded_info);
    int same = peeked && json_equal(a, b) &&
               json_equal(json_object_get(peeked, "tiles"), json_object_get(loaded_info, "tiles")) &&
               json_equal(json_object_get(peeked, "meta"), json_object_get(loaded_info, "meta"));
    if (!same) {
        fprintf(stderr, "peek disagrees with the loaded package (%s)\npeek: %s\ninfo: %s\n",
                status == IPU_OK ? "both read it" : ipu_ctx_errmsg(ctx), text ? text : "refused", info);
        abort();
    }
    json_decref(a), json_decref(b), json_decref(peeked), json_decref(loaded_info);
    ipu_free(text);
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
    int header_right = frame_right(data, size);
    checksum_right += header_right;
    if (fuzz_check(ctx, ipu_package_load(ctx, data, size, &pkg), "ipu_package_load") == IPU_OK)
        loaded++;
    char *info = NULL;
    if (pkg)
        fuzz_check(ctx, ipu_package_info_json(ctx, pkg, &info), "ipu_package_info_json");
    check_peek(ctx, data, size, header_right, info);
    ipu_free(info);
    if (pkg) {
        round_trip(ctx, pkg);
        if (fuzz_package_small(pkg))
            fuzz_run_package(ctx, pkg, 0);
    }
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
    return 0;
}
