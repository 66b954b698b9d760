/* test_package_format.c: the package file and its builder.  A 4-tile package
 * is built with the builder (code, descriptor and data segments, named
 * allocations, param/input/output streams, input and expected records for two
 * invocations, an init program and a main program whose Repeat patches a
 * kernel argument); it must serialize, load and serialize again to identical
 * bytes, report the counts this file knows it put in through
 * ipu_package_info_json, and run on the device (original and loaded copy) to
 * the outputs computed here.  ipu_package_save_file must leave exactly the
 * complete file in its folder (no temporary files, also when overwriting or
 * failing).  Every truncated prefix of the file (lengths 0 .. size-1), and a
 * flipped byte, must fail to load with IPU_ERR_MALFORMED and a message.
 * Builder misuse (tile out of range, unknown slot or entry, a full descriptor
 * area, a bad layout) must return IPU_ERR_INVALID_ARGUMENT with a message.
 * Strided host entries gather and scatter rows on the device, and malformed
 * ones (no rows, reserved word, overlapping rows, past the stream or the
 * aperture) are refused with IPU_ERR_MALFORMED.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipu/ipu.h"
#include "kernels/kernels.h"
#include "numerics/numerics.h"
#include "package/package.h"

#include "support_packages.h"

#define PROFILE_JSON "{\"name\":\"c600-4\",\"tiles\":4}"
#define TILES 4u
#define CODE_BASE 0x4C700u
#define APERTURE 0x50000u
#define DESC_BASE 0x58000u
#define DESC_LIMIT 0x60000u
#define W_AT 0x80000u
#define X_AT 0x81000u
#define Y_AT 0x82000u
#define EXTRA_AT 0x60000u
#define N 16u          /* floats per tile */
#define REPEATS 3u     /* Repeat count: Y holds REPEATS copies of X + W */
#define INVOCATIONS 2u

/* What the test put in, to compare with the info report. */
typedef struct built {
    uint64_t descriptor_bytes, data_bytes, code_bytes;
    uint32_t segments, allocations, slots;
    float w[TILES][N], x[INVOCATIONS][TILES][N], y[INVOCATIONS][TILES][REPEATS][N];
} built;

static void store32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static ipu_profile profile(ipu_ctx *ctx)
{
    ipu_profile p;
    TPKG_OK(ctx, ipu_profile_parse(ctx, PROFILE_JSON, 0, &p));
    return p;
}

/* A record of u32 words into the tile's slot; counts the descriptor bytes. */
static uint32_t put(ipu_ctx *ctx, ipu_pkg_builder *b, built *info, uint32_t tile, uint32_t slot,
                    const uint32_t *words, uint32_t count)
{
    uint8_t bytes[64];
    uint32_t at;
    for (uint32_t i = 0; i < count; i++)
        store32(bytes + 4 * i, words[i]);
    TPKG_OK(ctx, ipu_pkg_put_slot(b, tile, slot, bytes, 4 * count, &at));
    info->descriptor_bytes += 4 * count;
    return at;
}

static ipu_package *build_package(ipu_ctx *ctx, built *info, const char *tag)
{
    memset(info, 0, sizeof *info);
    ipu_profile p = profile(ctx);
    ipu_pkg_builder *b = NULL;
    TPKG_OK(ctx, ipu_pkg_builder_create(ctx, &p, CODE_BASE, DESC_BASE, DESC_LIMIT, &b));
    uint32_t w_id, x_id, y_id;
    TPKG_OK(ctx, ipu_pkg_add_stream(b, "weights", IPU_STREAM_PARAM, TILES * N * 4, &w_id));
    TPKG_OK(ctx, ipu_pkg_add_stream(b, "x", IPU_STREAM_INPUT, TILES * N * 4, &x_id));
    TPKG_OK(ctx, ipu_pkg_add_stream(b, "y", IPU_STREAM_OUTPUT, TILES * REPEATS * N * 4, &y_id));
    uint32_t s_pin = ipu_pkg_new_slot(b), s_pcopy = ipu_pkg_new_slot(b), s_xin = ipu_pkg_new_slot(b);
    uint32_t s_xcopy = ipu_pkg_new_slot(b), s_add = ipu_pkg_new_slot(b), s_patch = ipu_pkg_new_slot(b);
    uint32_t s_ycopy = ipu_pkg_new_slot(b), s_yout = ipu_pkg_new_slot(b);
    info->slots = 8;
    const uint32_t copy = IPU_K_COPY | 3u << 16, bytes = N * 4;
    for (uint32_t t = 0; t < TILES; t++) {
        TPKG_OK(ctx, ipu_pkg_add_code(b, t, IPU_K_COPY));
        TPKG_OK(ctx, ipu_pkg_add_code(b, t, IPU_K_ADD));
        TPKG_OK(ctx, ipu_pkg_add_code(b, t, IPU_K_COPY)); /* already there: no second segment */
        /* Copy and add each bring their supervisor part and their own worker
         * body (memory, vector): four code segments, and the descriptor area. */
        info->code_bytes += ipu_kernel_code_size(IPU_K_COPY) + ipu_kernel_code_size(IPU_K_ADD);
        info->segments += 5;
        /* Host entries: stream, offset, address, row bytes, rows, stream
         * stride, tile stride, 0; y leaves as one row per Repeat iteration. */
        put(ctx, b, info, t, s_pin, (uint32_t[]){1, w_id, t * bytes, APERTURE, bytes, 1, bytes, bytes, 0}, 9);
        put(ctx, b, info, t, s_pcopy, (uint32_t[]){1, copy, APERTURE, W_AT, bytes}, 5);
        put(ctx, b, info, t, s_xin, (uint32_t[]){1, x_id, t * bytes, APERTURE, bytes, 1, bytes, bytes, 0}, 9);
        put(ctx, b, info, t, s_xcopy, (uint32_t[]){1, copy, APERTURE, X_AT, bytes}, 5);
        uint32_t add = put(ctx, b, info, t, s_add,
                           (uint32_t[]){1, IPU_K_ADD | 5u << 16, X_AT, W_AT, Y_AT, N, IPU_DT_F32}, 7);
        /* Iteration i writes X + W to Y + i * bytes: patch the ADD's dst argument. */
        put(ctx, b, info, t, s_patch,
            (uint32_t[]){1, IPU_PATCH_PROGRESSION, add + 16, Y_AT, bytes}, 5);
        put(ctx, b, info, t, s_ycopy, (uint32_t[]){1, copy, Y_AT, APERTURE, REPEATS * bytes}, 5);
        put(ctx, b, info, t, s_yout,
            (uint32_t[]){1, y_id, t * REPEATS * bytes, APERTURE, bytes, REPEATS, bytes, bytes, 0}, 9);
        info->descriptor_bytes += 4 * info->slots; /* the slot table */
        const char *names[] = {"w", "x", "y", "aperture"};
        const uint32_t at[] = {W_AT, X_AT, Y_AT, APERTURE}, size[] = {bytes, bytes, REPEATS * bytes, 0x8000};
        for (int i = 0; i < 4; i++)
            TPKG_OK(ctx, ipu_pkg_add_alloc(b, t, at[i], size[i], names[i]));
        info->allocations += 4;
        if (t % 2 == 0) {
            uint8_t extra[40];
            memset(extra, (int)t + 1, sizeof extra);
            TPKG_OK(ctx, ipu_pkg_add_data(b, t, EXTRA_AT, extra, sizeof extra));
            info->data_bytes += sizeof extra;
            info->segments++;
        }
        for (uint32_t i = 0; i < N; i++) {
            info->w[t][i] = (float)((int)(t * N + i) - 20);
            for (uint32_t v = 0; v < INVOCATIONS; v++) {
                info->x[v][t][i] = (float)(3 * i + 100 * v) - (float)t * 0.5f;
                for (uint32_t r = 0; r < REPEATS; r++)
                    info->y[v][t][r][i] = info->x[v][t][i] + info->w[t][i];
            }
        }
    }
    TPKG_OK(ctx, ipu_pkg_emit(b, 1, IPU_OP_HOST_IN, s_pin, 0, 0));
    TPKG_OK(ctx, ipu_pkg_emit(b, 1, IPU_OP_STEP, s_pcopy, IPU_NO_SLOT, 0));
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_IN, s_xin, 0, 0));
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, s_xcopy, IPU_NO_SLOT, 0));
    size_t repeat = ipu_pkg_program_length(b, 0);
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, REPEATS, 0, s_patch));
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, s_add, IPU_NO_SLOT, 0));
    ipu_pkg_set_op_b(b, 0, repeat, (uint32_t)(ipu_pkg_program_length(b, 0) - repeat - 1));
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, s_ycopy, IPU_NO_SLOT, 0));
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_OUT, s_yout, 0, 0));
    TPKG_OK(ctx, ipu_pkg_add_record(b, IPU_RECORD_INPUT, w_id, 0, info->w, sizeof info->w));
    for (uint32_t v = 0; v < INVOCATIONS; v++) {
        TPKG_OK(ctx, ipu_pkg_add_record(b, IPU_RECORD_INPUT, x_id, v, info->x[v], sizeof info->x[v]));
        TPKG_OK(ctx, ipu_pkg_add_record(b, IPU_RECORD_EXPECTED, y_id, v, info->y[v], sizeof info->y[v]));
    }
    ipu_pkg_set_invocations(b, INVOCATIONS);
    ipu_pkg_set_meta(b, json_pack("{s:s, s:i}", "workload", tag, "n", (int)N));
    ipu_package *pkg = NULL;
    TPKG_OK(ctx, ipu_pkg_build(b, &pkg));
    return pkg;
}

static void serialize(ipu_ctx *ctx, const ipu_package *pkg, uint8_t **bytes, size_t *size)
{
    void *out = NULL;
    TPKG_OK(ctx, ipu_package_serialize(ctx, pkg, &out, size));
    *bytes = out;
}

/* build_package, and the package's serialized bytes (release with ipu_free). */
static ipu_package *build_serialized(ipu_ctx *ctx, built *info, const char *tag, uint8_t **bytes,
                                     size_t *size)
{
    ipu_package *pkg = build_package(ctx, info, tag);
    serialize(ctx, pkg, bytes, size);
    return pkg;
}

/* The bytes of the record (kind, stream, invocation), found by scanning the package. */
static const void *record(const ipu_package *pkg, uint32_t kind, const char *stream,
                          uint32_t invocation, size_t size)
{
    int s = ipu_pkg_find_stream(pkg, stream);
    assert_true(s >= 0);
    for (size_t i = 0; i < pkg->record_count; i++) {
        const ipu_pkg_record *r = &pkg->records[i];
        if (r->kind == kind && r->stream == (uint32_t)s && r->invocation == invocation) {
            assert_int_equal(r->size, size);
            return pkg->data + r->data_offset;
        }
    }
    fail_msg("no record for stream %s invocation %u", stream, invocation);
    return NULL;
}

/* Run both invocations; outputs must equal what this test computed. */
static void run_package(ipu_ctx *ctx, const ipu_package *pkg, const built *info)
{
    ipu_device *dev = NULL;
    TPKG_OK(ctx, ipu_device_create(ctx, PROFILE_JSON, &dev));
    TPKG_OK(ctx, ipu_device_set_stream(ctx, dev, "weights",
                                  record(pkg, IPU_RECORD_INPUT, "weights", 0, sizeof info->w),
                                  sizeof info->w));
    TPKG_OK(ctx, ipu_device_initialize(ctx, dev, pkg));
    for (uint32_t v = 0; v < INVOCATIONS; v++) {
        const void *x = record(pkg, IPU_RECORD_INPUT, "x", v, sizeof info->x[v]);
        assert_memory_equal(x, info->x[v], sizeof info->x[v]);
        TPKG_OK(ctx, ipu_device_set_stream(ctx, dev, "x", x, sizeof info->x[v]));
        char *report = NULL;
        TPKG_OK(ctx, ipu_device_run(ctx, dev, &report));
        ipu_free(report);
        const void *y;
        size_t size;
        TPKG_OK(ctx, ipu_device_stream(ctx, dev, "y", &y, &size));
        assert_int_equal(size, sizeof info->y[v]);
        assert_memory_equal(y, info->y[v], size);
        assert_memory_equal(y, record(pkg, IPU_RECORD_EXPECTED, "y", v, size), size);
    }
    ipu_device_free(dev);
}

static json_int_t jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        fail_msg("info has no integer '%s'", key);
    return json_integer_value(v);
}

static void check_info(ipu_ctx *ctx, const ipu_package *pkg, const built *info)
{
    char *text = NULL;
    TPKG_OK(ctx, ipu_package_info_json(ctx, pkg, &text));
    json_t *o = json_loads(text, 0, NULL);
    assert_non_null(o);
    assert_int_equal(jint(o, "tiles"), TILES);
    assert_int_equal(jint(o, "invocations"), INVOCATIONS);
    assert_int_equal(jint(o, "slots"), info->slots);
    assert_int_equal(jint(o, "segments"), info->segments);
    assert_int_equal(jint(o, "allocations"), info->allocations);
    assert_int_equal(jint(o, "init_ops"), 2);
    assert_int_equal(jint(o, "main_ops"), 6);
    assert_int_equal(jint(o, "code_bytes"), info->code_bytes);
    assert_int_equal(jint(o, "data_bytes"), info->data_bytes);
    assert_int_equal(jint(o, "descriptor_bytes"), info->descriptor_bytes);
    json_t *streams = json_object_get(o, "streams");
    assert_int_equal(json_array_size(streams), 3);
    static const char *names[] = {"weights", "x", "y"}, *dirs[] = {"param", "input", "output"};
    static const json_int_t sizes[] = {TILES * N * 4, TILES * N * 4, TILES * REPEATS * N * 4};
    for (size_t i = 0; i < 3; i++) {
        json_t *s = json_array_get(streams, i), *records = json_object_get(s, "records");
        assert_string_equal(json_string_value(json_object_get(s, "name")), names[i]);
        assert_string_equal(json_string_value(json_object_get(s, "direction")), dirs[i]);
        assert_int_equal(jint(s, "size"), sizes[i]);
        assert_int_equal(json_is_true(json_object_get(records, "input")), i < 2);
        assert_int_equal(json_is_true(json_object_get(records, "expected")), i == 2);
    }
    assert_int_equal(jint(json_object_get(o, "meta"), "n"), N);
    json_decref(o);
    ipu_free(text);
}

static void test_round_trip(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    built info;
    uint8_t *first, *second;
    size_t first_size, second_size;
    ipu_package *pkg = build_serialized(ctx, &info, "format-test", &first, &first_size);
    ipu_package *loaded = NULL;
    TPKG_OK(ctx, ipu_package_load(ctx, first, first_size, &loaded));
    serialize(ctx, loaded, &second, &second_size);
    assert_int_equal(first_size, second_size);
    assert_memory_equal(first, second, first_size);
    check_info(ctx, pkg, &info);
    check_info(ctx, loaded, &info);
    run_package(ctx, pkg, &info);
    run_package(ctx, loaded, &info);
    ipu_free(first);
    ipu_free(second);
    ipu_package_free(loaded);
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
}

static void expect_malformed(ipu_ctx *ctx, const uint8_t *bytes, size_t size, const char *what)
{
    ipu_package *pkg = NULL;
    ipu_ctx_clear_error(ctx);
    ipu_status status = ipu_package_load(ctx, bytes, size, &pkg);
    if (status != IPU_ERR_MALFORMED || pkg != NULL || !ipu_ctx_errmsg(ctx)[0])
        fail_msg("%s (%zu bytes): status %s, message '%s'", what, size, ipu_status_name(status),
                 ipu_ctx_errmsg(ctx));
}

static void test_truncated_and_corrupt(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    built info;
    uint8_t *bytes;
    size_t size;
    ipu_package *pkg = build_serialized(ctx, &info, "format-test", &bytes, &size);
    /* Each prefix in its own exact-size buffer, so over-reads are caught. */
    for (size_t len = 0; len < size; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        assert_non_null(copy);
        memcpy(copy, bytes, len);
        expect_malformed(ctx, copy, len, "truncated package");
        free(copy);
    }
    /* One flipped byte in the header, the section table and the body. */
    const size_t at[] = {0, 9, 70, size / 2, size - 1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        bytes[at[i]] ^= 0x40;
        expect_malformed(ctx, bytes, size, "corrupted package");
        bytes[at[i]] ^= 0x40;
    }
    ipu_package *again = NULL;
    TPKG_OK(ctx, ipu_package_load(ctx, bytes, size, &again));
    ipu_package_free(again);
    ipu_free(bytes);
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
}

/* Names in dir other than . and .. (up to 8), returns their count. */
static int list_dir(const char *dir, char names[8][256])
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (count < 8)
            snprintf(names[count], 256, "%s", e->d_name);
        count++;
    }
    closedir(d);
    return count;
}

static void expect_file(ipu_ctx *ctx, const char *dir, const char *path, const uint8_t *bytes,
                        size_t size)
{
    char names[8][256];
    int count = list_dir(dir, names);
    if (count != 1 || strcmp(names[0], "package.ipu") != 0)
        fail_msg("folder %s holds %d entries (first '%s'), expected only package.ipu", dir, count,
                 count ? names[0] : "");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *got = malloc(size + 1);
    size_t n = fread(got, 1, size + 1, f);
    fclose(f);
    assert_int_equal(n, size);
    assert_memory_equal(got, bytes, size);
    free(got);
    ipu_package *pkg = NULL;
    TPKG_OK(ctx, ipu_package_load_file(ctx, path, &pkg));
    ipu_package_free(pkg);
}

static void test_save_file_atomic(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    built info;
    uint8_t *one_bytes, *two_bytes;
    size_t one_size, two_size;
    ipu_package *one = build_serialized(ctx, &info, "first", &one_bytes, &one_size);
    ipu_package *two =
        build_serialized(ctx, &info, "second, a longer workload tag", &two_bytes, &two_size);
    const char *tmp = getenv("TMPDIR");
    char dir[512], path[600], bad[700];
    /* A fresh folder of this process's own. */
    snprintf(dir, sizeof dir, "%s/ipu_package_format_%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/package.ipu", dir);
    TPKG_OK(ctx, ipu_package_save_file(ctx, one, path));
    expect_file(ctx, dir, path, one_bytes, one_size);
    /* Overwriting replaces the whole file and leaves nothing else behind. */
    TPKG_OK(ctx, ipu_package_save_file(ctx, two, path));
    expect_file(ctx, dir, path, two_bytes, two_size);
    TPKG_OK(ctx, ipu_package_save_file(ctx, one, path));
    expect_file(ctx, dir, path, one_bytes, one_size);
    /* A folder that does not exist: an I/O error, nothing written. */
    snprintf(bad, sizeof bad, "%s/missing/package.ipu", dir);
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_package_save_file(ctx, two, bad), IPU_ERR_IO);
    assert_true(ipu_ctx_errmsg(ctx)[0] != 0);
    expect_file(ctx, dir, path, one_bytes, one_size);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
    ipu_free(one_bytes);
    ipu_free(two_bytes);
    ipu_package_free(one);
    ipu_package_free(two);
    ipu_ctx_free(ctx);
}

static void expect_invalid(ipu_ctx *ctx, ipu_status status, const char *what)
{
    if (status != IPU_ERR_INVALID_ARGUMENT || !ipu_ctx_errmsg(ctx)[0])
        fail_msg("%s: status %s, message '%s'", what, ipu_status_name(status), ipu_ctx_errmsg(ctx));
    ipu_ctx_clear_error(ctx);
}

static void test_builder_misuse(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_profile p = profile(ctx);
    ipu_pkg_builder *b = NULL;
    uint8_t bytes[64] = {0};
    uint32_t at;
    expect_invalid(ctx, ipu_pkg_builder_create(ctx, &p, CODE_BASE, DESC_BASE + 2, DESC_LIMIT, &b),
                   "misaligned descriptor base");
    expect_invalid(ctx, ipu_pkg_builder_create(ctx, &p, 0x4C000u, DESC_BASE, DESC_LIMIT, &b),
                   "code over the runtime state");
    expect_invalid(ctx, ipu_pkg_builder_create(ctx, &p, CODE_BASE, DESC_BASE, DESC_BASE, &b),
                   "empty descriptor area");
    TPKG_OK(ctx, ipu_pkg_builder_create(ctx, &p, CODE_BASE, DESC_BASE, DESC_BASE + 64, &b));
    uint32_t slot = ipu_pkg_new_slot(b);
    expect_invalid(ctx, ipu_pkg_add_code(b, TILES, IPU_K_COPY), "code on tile 4 of 4");
    expect_invalid(ctx, ipu_pkg_add_code(b, 0, IPU_K_ENTRY_END), "unknown kernel entry");
    expect_invalid(ctx, ipu_pkg_add_code(b, 0, 0), "kernel entry 0");
    expect_invalid(ctx, ipu_pkg_add_data(b, 1000, 0x60000u, bytes, 8), "data on tile 1000");
    expect_invalid(ctx, ipu_pkg_add_alloc(b, TILES, 0x60000u, 8, "a"), "allocation on tile 4");
    expect_invalid(ctx, ipu_pkg_put(b, TILES + 3, bytes, 8, &at), "descriptor on tile 7");
    expect_invalid(ctx, ipu_pkg_put_slot(b, 0, slot + 1, bytes, 8, &at), "unknown slot");
    expect_invalid(ctx, ipu_pkg_put_slot(b, TILES, slot, bytes, 8, &at), "slot record on tile 4");
    /* 64 bytes of descriptor area; the slot table takes 4 of them at build time. */
    TPKG_OK(ctx, ipu_pkg_put(b, 0, bytes, 58, &at)); /* padded to 60 */
    assert_int_equal(at, DESC_BASE);
    expect_invalid(ctx, ipu_pkg_put(b, 0, bytes, 8, &at), "descriptor area full");
    expect_invalid(ctx, ipu_pkg_put(b, 0, bytes, 5, &at), "descriptor area full (padding)");
    TPKG_OK(ctx, ipu_pkg_put(b, 1, bytes, 60, &at)); /* other tiles have their own area */
    ipu_package *pkg = NULL;
    TPKG_OK(ctx, ipu_pkg_build(b, &pkg)); /* 60 + 4 bytes: exactly full */
    ipu_package_free(pkg);
    /* The slot tables no longer fit: build fails and frees the builder. */
    TPKG_OK(ctx, ipu_pkg_builder_create(ctx, &p, CODE_BASE, DESC_BASE, DESC_BASE + 64, &b));
    ipu_pkg_new_slot(b);
    TPKG_OK(ctx, ipu_pkg_put(b, 2, bytes, 64, &at));
    pkg = NULL;
    expect_invalid(ctx, ipu_pkg_build(b, &pkg), "slot table does not fit");
    assert_null(pkg);
    ipu_ctx_free(ctx);
}

/* Strided host entries (format.h): a package on tile 0 with input stream
 * "in" (4 rows of 32 bytes) and output stream "out" (4 rows of 16 bytes);
 * host_in and host_out are the single entries of its host input and output
 * descriptors, run in that order.  Returns the build status; *out gets the
 * package on success. */
#define HOST_ROWS 4u
static ipu_status build_host_package(ipu_ctx *ctx, const uint32_t host_in[8],
                                     const uint32_t host_out[8], ipu_package **out)
{
    ipu_profile p = profile(ctx);
    ipu_pkg_builder *b = NULL;
    TPKG_OK(ctx, ipu_pkg_builder_create(ctx, &p, CODE_BASE, DESC_BASE, DESC_LIMIT, &b));
    uint32_t in_id, out_id;
    TPKG_OK(ctx, ipu_pkg_add_stream(b, "in", IPU_STREAM_INPUT, HOST_ROWS * 32, &in_id));
    TPKG_OK(ctx, ipu_pkg_add_stream(b, "out", IPU_STREAM_OUTPUT, HOST_ROWS * 16, &out_id));
    assert_int_equal(in_id, 0);
    assert_int_equal(out_id, 1);
    uint32_t s_in = ipu_pkg_new_slot(b), s_out = ipu_pkg_new_slot(b);
    uint8_t record[4 + IPU_HOST_ENTRY_SIZE];
    store32(record, 1);
    for (uint32_t w = 0; w < 8; w++)
        store32(record + 4 + 4 * w, host_in[w]);
    TPKG_OK(ctx, ipu_pkg_put_slot(b, 0, s_in, record, sizeof record, NULL));
    for (uint32_t w = 0; w < 8; w++)
        store32(record + 4 + 4 * w, host_out[w]);
    TPKG_OK(ctx, ipu_pkg_put_slot(b, 0, s_out, record, sizeof record, NULL));
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_IN, s_in, 0, 0));
    TPKG_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_HOST_OUT, s_out, 0, 0));
    *out = NULL;
    return ipu_pkg_build(b, out);
}

static void test_host_entries_strided(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_profile p = profile(ctx);
    assert_int_equal(p.aperture_base, APERTURE);
    /* In: columns [8, 24) of each 32-byte stream row to rows 24 bytes apart
     * in the aperture; out: those rows packed 16 bytes apart in the stream. */
    const uint32_t in[8] = {0, 8, APERTURE, 16, HOST_ROWS, 32, 24, 0};
    const uint32_t out[8] = {1, 0, APERTURE, 16, HOST_ROWS, 16, 24, 0};
    ipu_package *pkg = NULL;
    TPKG_OK(ctx, build_host_package(ctx, in, out, &pkg));
    uint8_t stream[HOST_ROWS * 32];
    for (uint32_t i = 0; i < sizeof stream; i++)
        stream[i] = (uint8_t)(i * 7 + 1);
    ipu_device *dev = NULL;
    TPKG_OK(ctx, ipu_device_create(ctx, PROFILE_JSON, &dev));
    TPKG_OK(ctx, ipu_device_set_stream(ctx, dev, "in", stream, sizeof stream));
    TPKG_OK(ctx, ipu_device_initialize(ctx, dev, pkg));
    char *report = NULL;
    TPKG_OK(ctx, ipu_device_run(ctx, dev, &report));
    ipu_free(report);
    for (uint32_t r = 0; r < HOST_ROWS; r++) {
        uint8_t row[16];
        TPKG_OK(ctx, ipu_device_read(ctx, dev, 0, APERTURE + 24 * r, row, sizeof row));
        assert_memory_equal(row, stream + 32 * r + 8, sizeof row);
    }
    const uint8_t *got;
    size_t size;
    TPKG_OK(ctx, ipu_device_stream(ctx, dev, "out", (const void **)&got, &size));
    assert_int_equal(size, HOST_ROWS * 16);
    for (uint32_t r = 0; r < HOST_ROWS; r++)
        assert_memory_equal(got + 16 * r, stream + 32 * r + 8, 16);
    ipu_device_free(dev);
    ipu_package_free(pkg);

    /* Malformed entries are refused when the package is built (and loaded),
     * each with a message naming the defect. */
    const uint32_t end = p.aperture_end;
    const struct {
        uint32_t entry[8];
        const char *words;
    } bad[] = {
        {{0, 8, APERTURE, 16, 0, 32, 24, 0}, "entry 0 moves 0 rows"},
        {{0, 8, APERTURE, 16, HOST_ROWS, 32, 24, 5}, "entry 0 has reserved word 0x5"},
        {{0, 8, APERTURE, 16, HOST_ROWS, 32, 8, 0}, "overlap on the tile (tile stride 8)"},
        /* The last row starts at 8 + 3 * 40 = 128: past the 128-byte stream. */
        {{0, 8, APERTURE, 16, HOST_ROWS, 40, 24, 0}, "reads bytes [8, 144) of stream 'in'"},
        /* The first row ends at the aperture's end, the others lie beyond it. */
        {{0, 8, end - 16, 16, HOST_ROWS, 32, 24, 0}, "outside the host aperture"},
        /* 2^32 - 1 rows 2^32 - 1 bytes apart: the extent does not wrap around. */
        {{0, 0, APERTURE, 1, 0xFFFFFFFFu, 0, 0xFFFFFFFFu, 0}, "outside the host aperture"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ipu_ctx_clear_error(ctx);
        pkg = NULL;
        ipu_status status = build_host_package(ctx, bad[i].entry, out, &pkg);
        if (status != IPU_ERR_MALFORMED || pkg || !strstr(ipu_ctx_errmsg(ctx), bad[i].words) ||
            !strstr(ipu_ctx_errmsg(ctx), "host input descriptor"))
            fail_msg("bad host entry %zu: status %s, message '%s', expected '%s'", i,
                     ipu_status_name(status), ipu_ctx_errmsg(ctx), bad[i].words);
    }
    /* An output entry's stream extent is checked the same way. */
    const uint32_t long_out[8] = {1, 16, APERTURE, 16, HOST_ROWS, 16, 24, 0};
    ipu_ctx_clear_error(ctx);
    assert_int_equal(build_host_package(ctx, in, long_out, &pkg), IPU_ERR_MALFORMED);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "host output descriptor"));
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "writes bytes [16, 80) of stream 'out'"));
    ipu_ctx_free(ctx);
}

/* Entry points that share a worker body bring it to a tile once: fill and
 * copy share the memory body, gemm_f16 and gemm_f8 the AMP body. */
static void test_code_shares_worker_bodies(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_profile p;
    tpkg_profile(ctx, 4, &p);
    ipu_pkg_builder *b = tpkg_builder(ctx, &p);
    int entries[] = {IPU_K_FILL, IPU_K_COPY, IPU_K_GEMM_F16, IPU_K_GEMM_F8, IPU_K_FILL};
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++)
        TPKG_OK(ctx, ipu_pkg_add_code(b, 1, entries[i]));
    TPKG_OK(ctx, ipu_pkg_add_code(b, 2, IPU_K_COPY));
    ipu_package *pkg = NULL;
    TPKG_OK(ctx, ipu_pkg_build(b, &pkg));
    uint64_t code[4] = {0};
    uint32_t bodies[4] = {0}, supervisors[4] = {0};
    for (size_t i = 0; i < pkg->segment_count; i++) {
        const ipu_pkg_segment *s = &pkg->segments[i];
        if (s->kind != IPU_SEG_CODE)
            continue;
        code[s->tile] += s->size;
        if (s->entry & IPU_CODE_BODY)
            bodies[s->tile]++;
        else
            supervisors[s->tile]++;
    }
    /* Sizes from the inventory's parts, added up here. */
    uint64_t tile1 = ipu_kernel_supervisor_size(IPU_K_FILL) + ipu_kernel_supervisor_size(IPU_K_COPY) +
                     ipu_kernel_supervisor_size(IPU_K_GEMM_F16) + ipu_kernel_supervisor_size(IPU_K_GEMM_F8) +
                     ipu_kernel_body_size(IPU_BODY_MEMORY) + ipu_kernel_body_size(IPU_BODY_AMP);
    assert_int_equal(supervisors[1], 4);
    assert_int_equal(bodies[1], 2);
    assert_int_equal(code[1], tile1);
    assert_int_equal(code[2], ipu_kernel_code_size(IPU_K_COPY));
    assert_true(code[1] < ipu_kernel_code_size(IPU_K_FILL) + ipu_kernel_code_size(IPU_K_COPY) +
                              ipu_kernel_code_size(IPU_K_GEMM_F16) + ipu_kernel_code_size(IPU_K_GEMM_F8));
    assert_int_equal(code[0] + code[3], 0);
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_code_shares_worker_bodies),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_truncated_and_corrupt),
        cmocka_unit_test(test_save_file_atomic),
        cmocka_unit_test(test_builder_misuse),
        cmocka_unit_test(test_host_entries_strided),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
