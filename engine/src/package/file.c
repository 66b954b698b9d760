/* file.c: the package file: serialization (header, section table, sections,
 * CRC-32 of everything after the header), the loader that checks every
 * length and offset before reading it, and the public package calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "package/package.h"

#define BAD(...) IPU_FAIL(ctx, IPU_ERR_MALFORMED, "malformed package: " __VA_ARGS__)

static const char *SECTION_NAMES[IPU_SEC_END] = {
    [IPU_SEC_PROFILE] = "profile", [IPU_SEC_META] = "meta",       [IPU_SEC_TILES] = "tiles",
    [IPU_SEC_SEGMENTS] = "segments", [IPU_SEC_ALLOCS] = "allocations",
    [IPU_SEC_STRINGS] = "strings", [IPU_SEC_INIT] = "init program", [IPU_SEC_MAIN] = "main program",
    [IPU_SEC_STREAMS] = "streams", [IPU_SEC_RECORDS] = "records",   [IPU_SEC_DATA] = "data",
    [IPU_SEC_COMPILER_OPS] = "compiler ops", [IPU_SEC_CAPTURES] = "captures",
};

void ipu_package_free(ipu_package *pkg)
{
    if (!pkg)
        return;
    free(pkg->slot_tables);
    free(pkg->meta_json);
    free(pkg->segments);
    free(pkg->allocs);
    free(pkg->compiler_ops);
    free(pkg->captures);
    free(pkg->init_ops);
    free(pkg->main_ops);
    free(pkg->streams);
    free(pkg->records);
    free(pkg->strings);
    free(pkg->data);
    free(pkg->tile_segment_start);
    free(pkg->tile_segments);
    free(pkg->tile_alloc_start);
    free(pkg->tile_allocs);
    free(pkg->tile_alloc_reach);
    free(pkg);
}

/* ---- serialization ----------------------------------------------------- */

static ipu_status put_u32(ipu_ctx *ctx, ipu_buf *b, uint32_t v) { return ipu_buf_append_u32(ctx, b, v); }
static ipu_status put_u64(ipu_ctx *ctx, ipu_buf *b, uint64_t v)
{
    IPU_TRY(put_u32(ctx, b, (uint32_t)v));
    return put_u32(ctx, b, (uint32_t)(v >> 32));
}

static ipu_status encode_section(ipu_ctx *ctx, const ipu_package *pkg, int type, ipu_buf *out)
{
    switch (type) {
    case IPU_SEC_PROFILE: {
        json_t *object = ipu_profile_to_json(&pkg->profile);
        char *text = object ? json_dumps(object, JSON_COMPACT) : NULL;
        json_decref(object);
        if (!text)
            return IPU_NO_MEMORY(ctx);
        ipu_status status = ipu_buf_append(ctx, out, text, strlen(text));
        free(text);
        return status;
    }
    case IPU_SEC_META:
        return ipu_buf_append(ctx, out, pkg->meta_json, strlen(pkg->meta_json));
    case IPU_SEC_TILES:
        for (uint32_t t = 0; t < pkg->profile.tiles; t++)
            IPU_TRY(put_u32(ctx, out, pkg->slot_tables[t]));
        return IPU_OK;
    case IPU_SEC_SEGMENTS:
        for (size_t i = 0; i < pkg->segment_count; i++) {
            const ipu_pkg_segment *s = &pkg->segments[i];
            IPU_TRY(put_u32(ctx, out, s->tile));
            IPU_TRY(put_u32(ctx, out, s->kind));
            IPU_TRY(put_u32(ctx, out, s->address));
            IPU_TRY(put_u32(ctx, out, s->size));
            IPU_TRY(put_u32(ctx, out, s->entry));
            IPU_TRY(put_u32(ctx, out, 0));
            IPU_TRY(put_u64(ctx, out, s->data_offset));
        }
        return IPU_OK;
    case IPU_SEC_ALLOCS:
        for (size_t i = 0; i < pkg->alloc_count; i++) {
            const ipu_pkg_alloc *a = &pkg->allocs[i];
            IPU_TRY(put_u32(ctx, out, a->tile));
            IPU_TRY(put_u32(ctx, out, a->address));
            IPU_TRY(put_u32(ctx, out, a->size));
            IPU_TRY(put_u32(ctx, out, a->name_offset));
            IPU_TRY(put_u32(ctx, out, a->tensor_offset));
            IPU_TRY(put_u32(ctx, out, a->first));
            IPU_TRY(put_u32(ctx, out, a->last));
            IPU_TRY(put_u32(ctx, out, a->op));
            IPU_TRY(put_u32(ctx, out, a->kind));
            IPU_TRY(put_u32(ctx, out, a->shape_offset));
        }
        return IPU_OK;
    case IPU_SEC_COMPILER_OPS:
        for (size_t i = 0; i < pkg->compiler_op_count; i++) {
            IPU_TRY(put_u32(ctx, out, pkg->compiler_ops[i].kind_offset));
            IPU_TRY(put_u32(ctx, out, pkg->compiler_ops[i].name_offset));
        }
        return IPU_OK;
    case IPU_SEC_CAPTURES:
        for (size_t i = 0; i < pkg->capture_count; i++) {
            const ipu_pkg_capture *c = &pkg->captures[i];
            const uint32_t words[IPU_PKG_CAPTURE_SIZE / 4] = {
                c->op, c->phase, c->tile, c->address, c->stride, c->row_lo, c->row_hi, c->col_lo, c->col_hi, 0};
            for (size_t w = 0; w < IPU_PKG_CAPTURE_SIZE / 4; w++)
                IPU_TRY(put_u32(ctx, out, words[w]));
        }
        return IPU_OK;
    case IPU_SEC_STRINGS:
        return ipu_buf_append(ctx, out, pkg->strings, pkg->strings_size);
    case IPU_SEC_INIT:
    case IPU_SEC_MAIN: {
        const ipu_pkg_op *ops = type == IPU_SEC_INIT ? pkg->init_ops : pkg->main_ops;
        size_t count = type == IPU_SEC_INIT ? pkg->init_count : pkg->main_count;
        for (size_t i = 0; i < count; i++) {
            IPU_TRY(put_u32(ctx, out, ops[i].op));
            IPU_TRY(put_u32(ctx, out, ops[i].a));
            IPU_TRY(put_u32(ctx, out, ops[i].b));
            IPU_TRY(put_u32(ctx, out, ops[i].c));
            IPU_TRY(put_u32(ctx, out, ops[i].origin[0]));
            IPU_TRY(put_u32(ctx, out, ops[i].origin[1]));
        }
        return IPU_OK;
    }
    case IPU_SEC_STREAMS:
        for (size_t i = 0; i < pkg->stream_count; i++) {
            IPU_TRY(put_u32(ctx, out, pkg->streams[i].direction));
            IPU_TRY(put_u32(ctx, out, pkg->streams[i].name_offset));
            IPU_TRY(put_u64(ctx, out, pkg->streams[i].size));
        }
        return IPU_OK;
    case IPU_SEC_RECORDS:
        for (size_t i = 0; i < pkg->record_count; i++) {
            const ipu_pkg_record *r = &pkg->records[i];
            IPU_TRY(put_u32(ctx, out, r->kind));
            IPU_TRY(put_u32(ctx, out, r->stream));
            IPU_TRY(put_u32(ctx, out, r->invocation));
            IPU_TRY(put_u32(ctx, out, 0));
            IPU_TRY(put_u64(ctx, out, r->data_offset));
            IPU_TRY(put_u64(ctx, out, r->size));
        }
        return IPU_OK;
    case IPU_SEC_DATA:
        return ipu_buf_append(ctx, out, pkg->data, pkg->data_size);
    }
    return IPU_FAIL(ctx, IPU_ERR_INTERNAL, "unknown section %d", type);
}

static ipu_status serialize(ipu_ctx *ctx, const ipu_package *pkg, ipu_buf *out)
{
    const uint32_t sections = IPU_SEC_END - 1;
    IPU_TRY(ipu_buf_append_zeros(ctx, out, IPU_PKG_HEADER_SIZE + sections * IPU_PKG_SECTION_ENTRY_SIZE));
    for (uint32_t type = 1; type < IPU_SEC_END; type++) {
        IPU_TRY(ipu_buf_append_zeros(ctx, out, (8 - out->size % 8) % 8));
        size_t start = out->size;
        IPU_TRY(encode_section(ctx, pkg, (int)type, out));
        uint8_t *entry = out->data + IPU_PKG_HEADER_SIZE + (type - 1) * IPU_PKG_SECTION_ENTRY_SIZE;
        ipu_store_u32(entry, type);
        ipu_store_u32(entry + 4, 0);
        ipu_store_u64(entry + 8, start);
        ipu_store_u64(entry + 16, out->size - start);
    }
    uint8_t *h = out->data;
    memcpy(h, IPU_PKG_MAGIC, 8);
    ipu_store_u32(h + 8, IPU_PKG_VERSION);
    ipu_store_u32(h + 12, IPU_PKG_HEADER_SIZE);
    ipu_store_u64(h + 16, out->size);
    ipu_store_u32(h + 28, sections);
    ipu_store_u64(h + 32, pkg->profile_digest);
    ipu_store_u32(h + 40, pkg->profile.tiles);
    ipu_store_u32(h + 44, pkg->invocations);
    ipu_store_u32(h + 48, pkg->slots);
    uLong crc = crc32(0L, Z_NULL, 0);
    size_t done = IPU_PKG_HEADER_SIZE;
    while (done < out->size) {
        size_t chunk = out->size - done > (1u << 30) ? (1u << 30) : out->size - done;
        crc = crc32(crc, out->data + done, (uInt)chunk);
        done += chunk;
    }
    ipu_store_u32(h + 24, (uint32_t)crc);
    return IPU_OK;
}

ipu_status ipu_package_serialize(ipu_ctx *ctx, const ipu_package *pkg, void **out_bytes,
                                 size_t *out_size)
{
    if (!pkg || !out_bytes || !out_size)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_package_serialize: NULL argument");
    ipu_buf out = {0};
    ipu_status status = serialize(ctx, pkg, &out);
    if (status != IPU_OK) {
        ipu_buf_free(&out);
        return status;
    }
    *out_bytes = out.data;
    *out_size = out.size;
    return IPU_OK;
}

ipu_status ipu_package_save_file(ipu_ctx *ctx, const ipu_package *pkg, const char *path)
{
    void *bytes;
    size_t size;
    IPU_TRY(ipu_package_serialize(ctx, pkg, &bytes, &size));
    ipu_status status = ipu_write_file_atomic(ctx, path, bytes, size);
    free(bytes);
    return status;
}

/* ---- loading ----------------------------------------------------------- */

typedef struct section_view {
    const uint8_t *data;
    uint64_t size;
} section_view;

static ipu_status copy_out(ipu_ctx *ctx, const section_view *s, void **out, size_t *out_size)
{
    *out = ipu_malloc(ctx, s->size ? s->size : 1);
    if (!*out)
        return IPU_NO_MEMORY(ctx);
    if (s->size)
        memcpy(*out, s->data, s->size);
    *out_size = s->size;
    return IPU_OK;
}

/* Count a section's fixed-size records and allocate their decoded array. */
static ipu_status records_count(ipu_ctx *ctx, const section_view *s, int type, uint32_t size,
                                size_t element_size, size_t *count, void **items)
{
    if (s->size % size)
        return BAD("the %s section has %llu bytes, not a multiple of its %u-byte records",
                   SECTION_NAMES[type], (unsigned long long)s->size, size);
    *count = s->size / size;
    *items = ipu_calloc(ctx, *count ? *count : 1, element_size);
    return *items ? IPU_OK : IPU_NO_MEMORY(ctx);
}

static ipu_status parse_sections(ipu_ctx *ctx, const section_view *sec, ipu_package *pkg,
                                 uint32_t tiles, uint64_t digest)
{
    /* Profile. */
    char *text = ipu_malloc(ctx, sec[IPU_SEC_PROFILE].size + 1);
    if (!text)
        return IPU_NO_MEMORY(ctx);
    memcpy(text, sec[IPU_SEC_PROFILE].data, sec[IPU_SEC_PROFILE].size);
    text[sec[IPU_SEC_PROFILE].size] = 0;
    ipu_ctx local = {0};
    ipu_status status = ipu_profile_parse(&local, text, 0, &pkg->profile);
    free(text);
    if (status != IPU_OK)
        return BAD("the profile section is not a valid device profile: %s", local.errmsg);
    pkg->profile_digest = ipu_profile_digest(&pkg->profile);
    if (pkg->profile_digest != digest)
        return BAD("profile digest 0x%016llX in the header does not match the profile section's "
                   "0x%016llX",
                   (unsigned long long)digest, (unsigned long long)pkg->profile_digest);
    if (pkg->profile.tiles != tiles)
        return BAD("header says %u tiles, the profile section %u", tiles, pkg->profile.tiles);
    /* Metadata (check_meta reads it). */
    pkg->meta_json = ipu_malloc(ctx, sec[IPU_SEC_META].size + 1);
    if (!pkg->meta_json)
        return IPU_NO_MEMORY(ctx);
    memcpy(pkg->meta_json, sec[IPU_SEC_META].data, sec[IPU_SEC_META].size);
    pkg->meta_json[sec[IPU_SEC_META].size] = 0;
    /* Tiles. */
    if (sec[IPU_SEC_TILES].size != (uint64_t)tiles * 4)
        return BAD("the tiles section has %llu bytes, expected %u (4 per tile)",
                   (unsigned long long)sec[IPU_SEC_TILES].size, tiles * 4);
    pkg->slot_tables = ipu_calloc(ctx, tiles, 4);
    if (!pkg->slot_tables)
        return IPU_NO_MEMORY(ctx);
    for (uint32_t t = 0; t < tiles; t++)
        pkg->slot_tables[t] = ipu_load_u32(sec[IPU_SEC_TILES].data + 4 * t);
    /* Fixed-size records. */
    const uint8_t *d;
    IPU_TRY(records_count(ctx, &sec[IPU_SEC_SEGMENTS], IPU_SEC_SEGMENTS, IPU_PKG_SEGMENT_SIZE,
                          sizeof *pkg->segments, &pkg->segment_count, (void **)&pkg->segments));
    d = sec[IPU_SEC_SEGMENTS].data;
    for (size_t i = 0; i < pkg->segment_count; i++, d += IPU_PKG_SEGMENT_SIZE)
        pkg->segments[i] = (ipu_pkg_segment){ipu_load_u32(d), ipu_load_u32(d + 4), ipu_load_u32(d + 8),
                                             ipu_load_u32(d + 12), ipu_load_u32(d + 16),
                                             ipu_load_u64(d + 24)};
    IPU_TRY(records_count(ctx, &sec[IPU_SEC_ALLOCS], IPU_SEC_ALLOCS, IPU_PKG_ALLOC_SIZE,
                          sizeof *pkg->allocs, &pkg->alloc_count, (void **)&pkg->allocs));
    d = sec[IPU_SEC_ALLOCS].data;
    for (size_t i = 0; i < pkg->alloc_count; i++, d += IPU_PKG_ALLOC_SIZE)
        pkg->allocs[i] = (ipu_pkg_alloc){ipu_load_u32(d),      ipu_load_u32(d + 4),
                                         ipu_load_u32(d + 8),  ipu_load_u32(d + 12),
                                         ipu_load_u32(d + 16), ipu_load_u32(d + 20),
                                         ipu_load_u32(d + 24), ipu_load_u32(d + 28),
                                         ipu_load_u32(d + 32), ipu_load_u32(d + 36)};
    IPU_TRY(records_count(ctx, &sec[IPU_SEC_COMPILER_OPS], IPU_SEC_COMPILER_OPS,
                          IPU_PKG_COMPILER_OP_SIZE, sizeof *pkg->compiler_ops, &pkg->compiler_op_count,
                          (void **)&pkg->compiler_ops));
    d = sec[IPU_SEC_COMPILER_OPS].data;
    for (size_t i = 0; i < pkg->compiler_op_count; i++, d += IPU_PKG_COMPILER_OP_SIZE)
        pkg->compiler_ops[i] = (ipu_pkg_compiler_op){ipu_load_u32(d), ipu_load_u32(d + 4)};
    IPU_TRY(records_count(ctx, &sec[IPU_SEC_CAPTURES], IPU_SEC_CAPTURES, IPU_PKG_CAPTURE_SIZE,
                          sizeof *pkg->captures, &pkg->capture_count, (void **)&pkg->captures));
    d = sec[IPU_SEC_CAPTURES].data;
    for (size_t i = 0; i < pkg->capture_count; i++, d += IPU_PKG_CAPTURE_SIZE) {
        if (ipu_load_u32(d + 36))
            return BAD("capture %zu has a nonzero reserved word", i);
        pkg->captures[i] = (ipu_pkg_capture){ipu_load_u32(d),      ipu_load_u32(d + 4),
                                             ipu_load_u32(d + 8),  ipu_load_u32(d + 12),
                                             ipu_load_u32(d + 16), ipu_load_u32(d + 20),
                                             ipu_load_u32(d + 24), ipu_load_u32(d + 28),
                                             ipu_load_u32(d + 32)};
    }
    for (int which = 0; which < 2; which++) {
        int type = which ? IPU_SEC_MAIN : IPU_SEC_INIT;
        ipu_pkg_op **ops = which ? &pkg->main_ops : &pkg->init_ops;
        size_t *count = which ? &pkg->main_count : &pkg->init_count;
        IPU_TRY(records_count(ctx, &sec[type], type, IPU_PKG_OP_SIZE, sizeof **ops, count,
                              (void **)ops));
        d = sec[type].data;
        for (size_t i = 0; i < *count; i++, d += IPU_PKG_OP_SIZE)
            (*ops)[i] = (ipu_pkg_op){ipu_load_u32(d),
                                     ipu_load_u32(d + 4),
                                     ipu_load_u32(d + 8),
                                     ipu_load_u32(d + 12),
                                     {ipu_load_u32(d + 16), ipu_load_u32(d + 20)}};
    }
    IPU_TRY(records_count(ctx, &sec[IPU_SEC_STREAMS], IPU_SEC_STREAMS, IPU_PKG_STREAM_SIZE,
                          sizeof *pkg->streams, &pkg->stream_count, (void **)&pkg->streams));
    d = sec[IPU_SEC_STREAMS].data;
    for (size_t i = 0; i < pkg->stream_count; i++, d += IPU_PKG_STREAM_SIZE)
        pkg->streams[i] = (ipu_pkg_stream){ipu_load_u32(d), ipu_load_u32(d + 4), ipu_load_u64(d + 8)};
    IPU_TRY(records_count(ctx, &sec[IPU_SEC_RECORDS], IPU_SEC_RECORDS, IPU_PKG_RECORD_SIZE,
                          sizeof *pkg->records, &pkg->record_count, (void **)&pkg->records));
    d = sec[IPU_SEC_RECORDS].data;
    for (size_t i = 0; i < pkg->record_count; i++, d += IPU_PKG_RECORD_SIZE)
        pkg->records[i] = (ipu_pkg_record){ipu_load_u32(d), ipu_load_u32(d + 4), ipu_load_u32(d + 8),
                                           ipu_load_u64(d + 16), ipu_load_u64(d + 24)};
    IPU_TRY(copy_out(ctx, &sec[IPU_SEC_STRINGS], (void **)&pkg->strings, &pkg->strings_size));
    return copy_out(ctx, &sec[IPU_SEC_DATA], (void **)&pkg->data, &pkg->data_size);
}

ipu_status ipu_pkg_check_header(ipu_ctx *ctx, const uint8_t *head, size_t head_size, uint64_t file_size)
{
    if (file_size == 0)
        return BAD("truncated: the file is empty (a package starts with a %u-byte header)", IPU_PKG_HEADER_SIZE);
    if (memcmp(head, IPU_PKG_MAGIC, head_size < 8 ? head_size : 8) != 0)
        return BAD("bad magic: this is not an ipu-e2e package");
    if (file_size < IPU_PKG_HEADER_SIZE || head_size < IPU_PKG_HEADER_SIZE)
        return BAD("truncated: %llu bytes, shorter than the %u-byte header", (unsigned long long)file_size,
                   IPU_PKG_HEADER_SIZE);
    uint32_t version = ipu_load_u32(head + 8);
    if (version != IPU_PKG_VERSION)
        return BAD("unsupported version %u (this library reads version %u)", version,
                   IPU_PKG_VERSION);
    if (ipu_load_u32(head + 12) != IPU_PKG_HEADER_SIZE)
        return BAD("header size %u, expected %u", ipu_load_u32(head + 12), IPU_PKG_HEADER_SIZE);
    uint64_t total = ipu_load_u64(head + 16);
    if (total != file_size)
        return BAD("truncated or padded: the header says %llu bytes, the file has %llu",
                   (unsigned long long)total, (unsigned long long)file_size);
    return IPU_OK;
}

ipu_status ipu_pkg_read_table(ipu_ctx *ctx, const uint8_t *head, size_t head_size, uint64_t file_size,
                              uint32_t crc, ipu_pkg_section_entry sec[IPU_SEC_END])
{
    if (crc != ipu_load_u32(head + 24))
        return BAD("bad checksum: CRC-32 0x%08X in the header, 0x%08X computed", ipu_load_u32(head + 24), crc);
    for (size_t i = 52; i < IPU_PKG_HEADER_SIZE; i++)
        if (head[i])
            return BAD("nonzero byte %zu in the header's reserved tail", i);
    uint32_t sections = ipu_load_u32(head + 28);
    uint64_t table_end = IPU_PKG_HEADER_SIZE + (uint64_t)sections * IPU_PKG_SECTION_ENTRY_SIZE;
    if (sections == 0 || sections > 64 || table_end > file_size || table_end > head_size)
        return BAD("section table of %u entries does not fit the file", sections);
    memset(sec, 0, IPU_SEC_END * sizeof *sec);
    uint64_t starts[64], ends[64];
    for (uint32_t i = 0; i < sections; i++) {
        const uint8_t *e = head + IPU_PKG_HEADER_SIZE + i * IPU_PKG_SECTION_ENTRY_SIZE;
        uint32_t type = ipu_load_u32(e);
        uint64_t offset = ipu_load_u64(e + 8), length = ipu_load_u64(e + 16);
        if (type == 0 || type >= IPU_SEC_END || ipu_load_u32(e + 4) != 0)
            return BAD("section %u has unknown type %u", i, type);
        if (sec[type].present)
            return BAD("section '%s' appears twice", SECTION_NAMES[type]);
        if (offset % 8 || offset < table_end || offset > file_size || length > file_size - offset)
            return BAD("section '%s' at [%llu, +%llu) lies outside the file (%llu bytes) or is "
                       "misaligned",
                       SECTION_NAMES[type], (unsigned long long)offset, (unsigned long long)length,
                       (unsigned long long)file_size);
        for (uint32_t j = 0; j < i; j++)
            if (offset < ends[j] && starts[j] < offset + length)
                return BAD("section '%s' overlaps another section", SECTION_NAMES[type]);
        starts[i] = offset;
        ends[i] = offset + length;
        sec[type] = (ipu_pkg_section_entry){offset, length, 1};
    }
    for (int type = 1; type < IPU_SEC_END; type++)
        if (!sec[type].present)
            return BAD("the '%s' section is missing", SECTION_NAMES[type]);
    return IPU_OK;
}

const char *ipu_pkg_section_name(int type) { return SECTION_NAMES[type]; }

int ipu_pkg_utf8(const char *text)
{
    json_t *probe = json_string(text); /* jansson refuses text that is not UTF-8 */
    int valid = probe != NULL;
    json_decref(probe);
    return valid;
}

/* The metadata must be a JSON object.  Checked after the records: parsing
 * it is the dearest check of a package with few records, so a package its
 * records refuse does not pay for it. */
static ipu_status check_meta(ipu_ctx *ctx, const ipu_package *pkg)
{
    json_error_t error;
    json_t *meta = json_loads(pkg->meta_json, 0, &error);
    int is_object = json_is_object(meta);
    json_decref(meta);
    if (!is_object)
        return BAD("the meta section is not a JSON object%s%s", meta ? "" : ": ", meta ? "" : error.text);
    return IPU_OK;
}

static ipu_status load(ipu_ctx *ctx, const uint8_t *bytes, size_t size, ipu_package *pkg)
{
    IPU_TRY(ipu_pkg_check_header(ctx, bytes, size, size));
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t done = IPU_PKG_HEADER_SIZE; done < size;) {
        size_t chunk = size - done > (1u << 30) ? (1u << 30) : size - done;
        crc = crc32(crc, bytes + done, (uInt)chunk);
        done += chunk;
    }
    ipu_pkg_section_entry table[IPU_SEC_END];
    IPU_TRY(ipu_pkg_read_table(ctx, bytes, size, size, (uint32_t)crc, table));
    section_view sec[IPU_SEC_END] = {{NULL, 0}};
    for (int type = 1; type < IPU_SEC_END; type++)
        sec[type] = (section_view){bytes + table[type].offset, table[type].size};
    pkg->invocations = ipu_load_u32(bytes + 44);
    pkg->slots = ipu_load_u32(bytes + 48);
    if (pkg->slots > (1u << 24))
        return BAD("%u slots, more than 2^24", pkg->slots);
    IPU_TRY(parse_sections(ctx, sec, pkg, ipu_load_u32(bytes + 40), ipu_load_u64(bytes + 32)));
    IPU_TRY(ipu_pkg_validate(ctx, pkg));
    return check_meta(ctx, pkg);
}

ipu_status ipu_package_load(ipu_ctx *ctx, const void *bytes, size_t size, ipu_package **out)
{
    if ((!bytes && size) || !out)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_package_load: NULL argument");
    ipu_package *pkg = ipu_calloc(ctx, 1, sizeof *pkg);
    if (!pkg)
        return IPU_NO_MEMORY(ctx);
    ipu_status status = load(ctx, bytes, size, pkg);
    if (status != IPU_OK) {
        ipu_package_free(pkg);
        return status;
    }
    *out = pkg;
    return IPU_OK;
}

ipu_status ipu_package_load_file(ipu_ctx *ctx, const char *path, ipu_package **out)
{
    uint8_t *bytes;
    size_t size;
    IPU_TRY(ipu_read_file(ctx, path, &bytes, &size));
    ipu_status status = ipu_package_load(ctx, bytes, size, out);
    free(bytes);
    return ipu_pkg_name_file(ctx, status, path);
}

ipu_status ipu_pkg_name_file(ipu_ctx *ctx, ipu_status status, const char *path)
{
    if (status != IPU_ERR_MALFORMED)
        return status;
    char found[sizeof ctx->errmsg];
    snprintf(found, sizeof found, "%s", ipu_ctx_errmsg(ctx));
    ipu_ctx_clear_error(ctx);
    return IPU_FAIL(ctx, status, "%s: %s", path, found);
}
