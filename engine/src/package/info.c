/* info.c: what a package says about itself, for the harness: the summary
 * JSON (version, tiles, profile, digest, streams, records, metadata, sizes by
 * segment kind) and access to recorded inputs and expectations.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "package/package.h"

static const char *DIRECTIONS[] = {"param", "input", "output"};

ipu_status ipu_package_info_json(ipu_ctx *ctx, const ipu_package *pkg, char **out_json)
{
    if (!pkg || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_package_info_json: NULL argument");
    json_t *info = json_object();
    json_t *streams = json_array();
    json_t *meta = json_loads(pkg->meta_json, 0, NULL);
    char digest[32];
    snprintf(digest, sizeof digest, "%016" PRIx64, pkg->profile_digest);
    uint64_t bytes[4] = {0};
    for (size_t i = 0; i < pkg->segment_count; i++)
        bytes[pkg->segments[i].kind] += pkg->segments[i].size;
    for (size_t i = 0; i < pkg->stream_count; i++) {
        const ipu_pkg_stream *s = &pkg->streams[i];
        json_t *records = json_object();
        for (size_t r = 0; r < pkg->record_count; r++)
            if (pkg->records[r].stream == i)
                json_object_set_new(records,
                                    pkg->records[r].kind == IPU_RECORD_INPUT ? "input" : "expected",
                                    json_true());
        json_array_append_new(streams, json_pack("{s:s, s:s, s:I, s:o}", "name",
                                                 ipu_pkg_string(pkg, s->name_offset), "direction",
                                                 DIRECTIONS[s->direction], "size",
                                                 (json_int_t)s->size, "records", records));
    }
    json_object_set_new(info, "version", json_integer(IPU_PKG_VERSION));
    json_object_set_new(info, "tiles", json_integer(pkg->profile.tiles));
    json_object_set_new(info, "invocations", json_integer(pkg->invocations));
    json_object_set_new(info, "slots", json_integer(pkg->slots));
    json_object_set_new(info, "profile", ipu_profile_to_json(&pkg->profile));
    json_object_set_new(info, "profile_digest", json_string(digest));
    json_object_set_new(info, "streams", streams);
    json_object_set_new(info, "meta", meta ? meta : json_object());
    json_object_set_new(info, "segments", json_integer((json_int_t)pkg->segment_count));
    json_object_set_new(info, "allocations", json_integer((json_int_t)pkg->alloc_count));
    json_object_set_new(info, "code_bytes", json_integer((json_int_t)bytes[IPU_SEG_CODE]));
    json_object_set_new(info, "descriptor_bytes", json_integer((json_int_t)bytes[IPU_SEG_DESCRIPTOR]));
    json_object_set_new(info, "data_bytes", json_integer((json_int_t)bytes[IPU_SEG_DATA]));
    json_object_set_new(info, "init_ops", json_integer((json_int_t)pkg->init_count));
    json_object_set_new(info, "main_ops", json_integer((json_int_t)pkg->main_count));
    char *text = json_dumps(info, JSON_COMPACT);
    json_decref(info);
    if (!text)
        return IPU_NO_MEMORY(ctx);
    *out_json = text;
    return IPU_OK;
}

ipu_status ipu_package_record(ipu_ctx *ctx, const ipu_package *pkg, const char *kind,
                              const char *stream, const void **out_data, size_t *out_size)
{
    if (!pkg || !kind || !stream || !out_data || !out_size)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_package_record: NULL argument");
    uint32_t want;
    if (strcmp(kind, "input") == 0)
        want = IPU_RECORD_INPUT;
    else if (strcmp(kind, "expected") == 0)
        want = IPU_RECORD_EXPECTED;
    else
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "record kind '%s': expected 'input' or 'expected'", kind);
    int index = ipu_pkg_find_stream(pkg, stream);
    for (size_t r = 0; index >= 0 && r < pkg->record_count; r++) {
        const ipu_pkg_record *rec = &pkg->records[r];
        if (rec->kind == want && rec->stream == (uint32_t)index) {
            *out_data = pkg->data + rec->data_offset;
            *out_size = rec->size;
            return IPU_OK;
        }
    }
    return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "the package has no %s record for stream '%s'",
                    kind, stream);
}
