/* peek.c: what a package file says of its streams and its workload, read
 * without loading it (ipu_package_peek_file).  The header and section table
 * pass the loader's own checks (file.c), the checksum is computed over the
 * file a chunk at a time, and only the streams, strings and meta sections are
 * read: a replay refuses a package whose streams its workload cannot hold
 * before it allocates the package's data.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "package/package.h"

#define BAD(...) IPU_FAIL(ctx, IPU_ERR_MALFORMED, "malformed package: " __VA_ARGS__)

static const char *DIRECTIONS[] = {"param", "input", "output"};

typedef struct peeked {
    FILE *file;
    const char *path;
    uint64_t size;
} peeked;

static ipu_status read_at(ipu_ctx *ctx, const peeked *f, uint64_t offset, void *out, size_t size)
{
    if (fseeko(f->file, (off_t)offset, SEEK_SET) != 0 || fread(out, 1, size, f->file) != size)
        return IPU_FAIL(ctx, IPU_ERR_IO, "cannot read '%s': %s", f->path,
                        ferror(f->file) ? strerror(errno) : "the file ended early");
    return IPU_OK;
}

/* The CRC-32 of every byte after the header, read 64 KiB at a time (a
 * size malloc recycles rather than maps afresh). */
static ipu_status checksum(ipu_ctx *ctx, const peeked *f, uint32_t *out)
{
    static const size_t CHUNK = 1u << 16;
    uint8_t *chunk = ipu_malloc(ctx, CHUNK);
    if (!chunk)
        return IPU_NO_MEMORY(ctx);
    uLong crc = crc32(0L, Z_NULL, 0);
    ipu_status status = IPU_OK;
    for (uint64_t done = IPU_PKG_HEADER_SIZE; done < f->size && status == IPU_OK;) {
        size_t n = f->size - done < CHUNK ? (size_t)(f->size - done) : CHUNK;
        status = read_at(ctx, f, done, chunk, n);
        crc = crc32(crc, chunk, (uInt)n);
        done += n;
    }
    free(chunk);
    *out = (uint32_t)crc;
    return status;
}

/* A section's bytes, NUL-terminated. */
static ipu_status read_section(ipu_ctx *ctx, const peeked *f, const ipu_pkg_section_entry *e, char **out)
{
    *out = ipu_malloc(ctx, (size_t)e->size + 1);
    if (!*out)
        return IPU_NO_MEMORY(ctx);
    (*out)[e->size] = 0;
    return read_at(ctx, f, e->offset, *out, (size_t)e->size);
}

/* The summary of the streams, names and metadata read. */
static ipu_status summarize(ipu_ctx *ctx, const uint8_t *head, const ipu_pkg_section_entry *sec,
                            const char *streams, const char *strings, const char *meta_text, json_t **out)
{
    uint64_t stream_bytes = sec[IPU_SEC_STREAMS].size, strings_size = sec[IPU_SEC_STRINGS].size;
    if (stream_bytes % IPU_PKG_STREAM_SIZE)
        return BAD("the %s section has %llu bytes, not a multiple of its %u-byte records",
                   ipu_pkg_section_name(IPU_SEC_STREAMS), (unsigned long long)stream_bytes, IPU_PKG_STREAM_SIZE);
    json_error_t error;
    json_t *meta = json_loads(meta_text, 0, &error);
    if (!json_is_object(meta)) {
        json_decref(meta);
        return BAD("the meta section is not a JSON object%s%s", meta ? "" : ": ", meta ? "" : error.text);
    }
    json_t *list = json_array(), *summary = json_pack("{s:I, s:o, s:o}", "tiles", (json_int_t)ipu_load_u32(head + 40),
                                                      "streams", list, "meta", meta);
    if (!summary)
        return IPU_NO_MEMORY(ctx);
    for (uint64_t i = 0; i < stream_bytes / IPU_PKG_STREAM_SIZE; i++) {
        const uint8_t *d = (const uint8_t *)streams + i * IPU_PKG_STREAM_SIZE;
        uint32_t direction = ipu_load_u32(d), name = ipu_load_u32(d + 4);
        if (direction > IPU_STREAM_OUTPUT || name >= strings_size || !memchr(strings + name, 0, strings_size - name)) {
            json_decref(summary);
            return BAD("stream %llu has an unknown direction %u or a name offset %u outside the strings (%llu "
                       "bytes)", (unsigned long long)i, direction, name, (unsigned long long)strings_size);
        }
        if (!ipu_pkg_utf8(strings + name)) {
            json_decref(summary);
            return BAD("stream %llu: its name is not UTF-8 text", (unsigned long long)i);
        }
        if (json_array_append_new(list, json_pack("{s:s, s:s, s:I}", "name", strings + name, "direction",
                                                  DIRECTIONS[direction], "size", (json_int_t)ipu_load_u64(d + 8)))) {
            json_decref(summary);
            return IPU_NO_MEMORY(ctx);
        }
    }
    *out = summary;
    return IPU_OK;
}

static ipu_status peek(ipu_ctx *ctx, const peeked *f, json_t **out)
{
    uint8_t head[IPU_PKG_HEADER_SIZE + 64 * IPU_PKG_SECTION_ENTRY_SIZE];
    size_t head_size = f->size < sizeof head ? (size_t)f->size : sizeof head;
    IPU_TRY(read_at(ctx, f, 0, head, head_size));
    IPU_TRY(ipu_pkg_check_header(ctx, head, head_size, f->size));
    uint32_t crc = 0;
    IPU_TRY(checksum(ctx, f, &crc));
    ipu_pkg_section_entry sec[IPU_SEC_END];
    IPU_TRY(ipu_pkg_read_table(ctx, head, head_size, f->size, crc, sec));
    char *streams = NULL, *strings = NULL, *meta = NULL;
    ipu_status status = read_section(ctx, f, &sec[IPU_SEC_STREAMS], &streams);
    if (status == IPU_OK)
        status = read_section(ctx, f, &sec[IPU_SEC_STRINGS], &strings);
    if (status == IPU_OK)
        status = read_section(ctx, f, &sec[IPU_SEC_META], &meta);
    if (status == IPU_OK)
        status = summarize(ctx, head, sec, streams, strings, meta, out);
    free(streams), free(strings), free(meta);
    return status;
}

ipu_status ipu_package_peek_file(ipu_ctx *ctx, const char *path, char **out_json)
{
    if (!path || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_package_peek_file: NULL argument");
    peeked f = {fopen(path, "rb"), path, 0};
    if (!f.file)
        return IPU_FAIL(ctx, IPU_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    ipu_status status = IPU_OK;
    off_t end = fseeko(f.file, 0, SEEK_END) == 0 ? ftello(f.file) : -1;
    if (end < 0)
        status = IPU_FAIL(ctx, IPU_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    f.size = end < 0 ? 0 : (uint64_t)end;
    json_t *summary = NULL;
    if (status == IPU_OK)
        status = peek(ctx, &f, &summary);
    fclose(f.file);
    status = ipu_pkg_name_file(ctx, status, path);
    if (status == IPU_OK && !(*out_json = json_dumps(summary, JSON_COMPACT)))
        status = IPU_NO_MEMORY(ctx);
    json_decref(summary);
    return status;
}
