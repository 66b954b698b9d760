/* builder.c: assembles a package from per-tile descriptor records, kernel
 * code, initial data, named allocations, control programs, host streams and
 * recorded inputs/expectations, then validates it like a loaded one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "package/package.h"

typedef struct slot_binding {
    uint32_t tile, slot, address;
} slot_binding;

typedef struct tile_build {
    ipu_buf desc;            /* the descriptor area, unless reserved in the package storage: */
    uint64_t area;           /* its offset there (ipu_pkg_reserve_descriptors) */
    uint32_t area_bytes;     /* its size, 0 when not reserved */
    uint32_t area_used;
    uint32_t code_cursor;
    uint64_t code_entries; /* bit per entry already placed */
    uint64_t code_bodies;  /* bit per worker body already placed */
} tile_build;

struct ipu_pkg_builder {
    ipu_ctx *ctx;
    ipu_package *pkg;
    tile_build *tiles;
    uint32_t desc_base, desc_limit, code_base;
    slot_binding *bindings;
    size_t binding_count, binding_capacity;
    ipu_buf data, strings;
    size_t segment_capacity, alloc_capacity, init_capacity, main_capacity, stream_capacity,
        record_capacity, compiler_op_capacity, capture_capacity;
    uint32_t origin[2];          /* of the next control ops */
    uint32_t last_tensor_offset, last_shape_offset; /* of the last allocation (add_alloc_string) */
    json_t *meta;
};

ipu_status ipu_pkg_builder_create(ipu_ctx *ctx, const ipu_profile *profile, uint32_t code_base,
                                  uint32_t desc_base, uint32_t desc_limit, ipu_pkg_builder **out)
{
    if (desc_base % 8 || desc_base >= desc_limit || desc_limit > ipu_profile_access_end(profile) ||
        code_base % 8 || code_base < profile->sram_base + profile->runtime_state_bytes)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "package builder: bad layout (code 0x%X, descriptors 0x%X..0x%X)", code_base,
                        desc_base, desc_limit);
    ipu_pkg_builder *b = ipu_calloc(ctx, 1, sizeof *b);
    ipu_package *pkg = ipu_calloc(ctx, 1, sizeof *pkg);
    tile_build *tiles = ipu_calloc(ctx, profile->tiles, sizeof *tiles);
    uint32_t *slot_tables = ipu_calloc(ctx, profile->tiles, sizeof *slot_tables);
    if (!b || !pkg || !tiles || !slot_tables) {
        free(b), free(pkg), free(tiles), free(slot_tables);
        return IPU_NO_MEMORY(ctx);
    }
    pkg->profile = *profile;
    pkg->profile_digest = ipu_profile_digest(profile);
    pkg->invocations = 1;
    pkg->slot_tables = slot_tables;
    for (uint32_t t = 0; t < profile->tiles; t++)
        tiles[t].code_cursor = code_base;
    b->ctx = ctx;
    b->pkg = pkg;
    b->origin[0] = b->origin[1] = IPU_NO_OP;
    b->tiles = tiles;
    b->code_base = code_base;
    b->desc_base = desc_base;
    b->desc_limit = desc_limit;
    /* Offset 0 of the string table is the empty string. */
    ipu_status status = ipu_buf_append(ctx, &b->strings, "", 1);
    if (status != IPU_OK) {
        ipu_pkg_builder_free(b);
        return status;
    }
    *out = b;
    return IPU_OK;
}

void ipu_pkg_builder_free(ipu_pkg_builder *b)
{
    if (!b)
        return;
    if (b->pkg) {
        for (uint32_t t = 0; t < b->pkg->profile.tiles; t++)
            ipu_buf_free(&b->tiles[t].desc);
        ipu_package_free(b->pkg);
    }
    free(b->tiles);
    free(b->bindings);
    ipu_buf_free(&b->data);
    ipu_buf_free(&b->strings);
    json_decref(b->meta);
    free(b);
}

uint32_t ipu_pkg_new_slot(ipu_pkg_builder *b) { return b->pkg->slots++; }

static ipu_status check_tile(ipu_pkg_builder *b, uint32_t tile)
{
    if (tile >= b->pkg->profile.tiles)
        return IPU_FAIL(b->ctx, IPU_ERR_INVALID_ARGUMENT, "package builder: tile %u of %u", tile,
                        b->pkg->profile.tiles);
    return IPU_OK;
}

ipu_status ipu_pkg_put(ipu_pkg_builder *b, uint32_t tile, const void *bytes, size_t size,
                       uint32_t *address)
{
    IPU_TRY(check_tile(b, tile));
    tile_build *t = &b->tiles[tile];
    size_t padded = (size + 3) & ~(size_t)3, used = t->area_bytes ? t->area_used : t->desc.size;
    if (b->desc_base + used + padded > b->desc_limit || (t->area_bytes && used + padded > t->area_bytes))
        return IPU_FAIL(b->ctx, IPU_ERR_INVALID_ARGUMENT,
                        "package builder: descriptor area of tile %u at 0x%X is full: a record of %zu bytes "
                        "at 0x%zX would need %zu of its %u bytes",
                        tile, b->desc_base, size, b->desc_base + used, used + padded,
                        t->area_bytes ? t->area_bytes : b->desc_limit - b->desc_base);
    *address = b->desc_base + (uint32_t)used;
    if (t->area_bytes) { /* the reserved storage is zeroed: the padding is there */
        if (size)
            memcpy(b->data.data + t->area + used, bytes, size);
        t->area_used += (uint32_t)padded;
        return IPU_OK;
    }
    IPU_TRY(ipu_buf_append(b->ctx, &t->desc, bytes, size));
    return ipu_buf_append_zeros(b->ctx, &t->desc, padded - size);
}

ipu_status ipu_pkg_reserve_descriptors(ipu_pkg_builder *b, const uint32_t *bytes)
{
    uint32_t tiles = b->pkg->profile.tiles;
    uint64_t total = 0;
    for (uint32_t t = 0; t < tiles; t++) {
        if (b->tiles[t].desc.size || b->tiles[t].area_bytes)
            return IPU_FAIL(b->ctx, IPU_ERR_STATE,
                            "package builder: tile %u's descriptor area is already in use", t);
        total += ((uint64_t)bytes[t] + 7) & ~7ull;
    }
    IPU_TRY(ipu_buf_reserve(b->ctx, &b->data, b->data.size + 8 + total));
    for (uint32_t t = 0; t < tiles; t++) {
        IPU_TRY(ipu_buf_append_zeros(b->ctx, &b->data, (8 - b->data.size % 8) % 8));
        b->tiles[t].area = b->data.size;
        b->tiles[t].area_bytes = bytes[t];
        IPU_TRY(ipu_buf_append_zeros(b->ctx, &b->data, bytes[t]));
    }
    return IPU_OK;
}

ipu_status ipu_pkg_put_slot(ipu_pkg_builder *b, uint32_t tile, uint32_t slot, const void *bytes,
                            size_t size, uint32_t *address)
{
    if (slot >= b->pkg->slots)
        return IPU_FAIL(b->ctx, IPU_ERR_INVALID_ARGUMENT, "package builder: slot %u of %u", slot,
                        b->pkg->slots);
    uint32_t where;
    IPU_TRY(ipu_pkg_put(b, tile, bytes, size, &where));
    IPU_TRY(IPU_GROW(b->ctx, b->bindings, b->binding_count, b->binding_capacity));
    b->bindings[b->binding_count++] = (slot_binding){tile, slot, where};
    if (address)
        *address = where;
    return IPU_OK;
}

static ipu_status add_segment(ipu_pkg_builder *b, uint32_t tile, uint32_t kind, uint32_t address,
                              const void *bytes, uint32_t size, uint32_t entry)
{
    ipu_package *pkg = b->pkg;
    IPU_TRY(IPU_GROW(b->ctx, pkg->segments, pkg->segment_count, b->segment_capacity));
    ipu_pkg_segment *seg = &pkg->segments[pkg->segment_count++];
    *seg = (ipu_pkg_segment){tile, kind, address, size, entry, 0};
    if (bytes) {
        IPU_TRY(ipu_buf_append_zeros(b->ctx, &b->data, (8 - b->data.size % 8) % 8));
        seg->data_offset = b->data.size;
        IPU_TRY(ipu_buf_append(b->ctx, &b->data, bytes, size));
    }
    return IPU_OK;
}

static ipu_status add_code_segment(ipu_pkg_builder *b, uint32_t tile, uint32_t size, uint32_t entry)
{
    tile_build *t = &b->tiles[tile];
    uint32_t address = t->code_cursor;
    t->code_cursor += (size + 7) & ~7u;
    return add_segment(b, tile, IPU_SEG_CODE, address, NULL, size, entry);
}

ipu_status ipu_pkg_add_code(ipu_pkg_builder *b, uint32_t tile, int entry)
{
    IPU_TRY(check_tile(b, tile));
    uint32_t size = ipu_kernel_supervisor_size(entry);
    if (!size)
        return IPU_FAIL(b->ctx, IPU_ERR_INVALID_ARGUMENT, "package builder: unknown kernel entry %d",
                        entry);
    tile_build *t = &b->tiles[tile];
    if (t->code_entries & (1ull << entry))
        return IPU_OK;
    t->code_entries |= 1ull << entry;
    IPU_TRY(add_code_segment(b, tile, size, (uint32_t)entry));
    /* The worker body once per tile, whichever entries share it. */
    int body = ipu_kernel_body_of(entry);
    if (body == IPU_BODY_NONE || (t->code_bodies & (1ull << body)))
        return IPU_OK;
    t->code_bodies |= 1ull << body;
    return add_code_segment(b, tile, ipu_kernel_body_size(body), IPU_CODE_BODY | (uint32_t)body);
}

ipu_status ipu_pkg_add_data(ipu_pkg_builder *b, uint32_t tile, uint32_t address, const void *bytes,
                            uint32_t size)
{
    IPU_TRY(check_tile(b, tile));
    return add_segment(b, tile, IPU_SEG_DATA, address, bytes, size, 0);
}

static ipu_status add_string(ipu_pkg_builder *b, const char *text, uint32_t *offset)
{
    *offset = (uint32_t)b->strings.size;
    return ipu_buf_append(b->ctx, &b->strings, text, strlen(text) + 1);
}

/* A string of the allocation being added ("" for NULL), sharing the previous
 * allocation's same field (*last) when the text is the same: the allocations
 * of one tensor, or of one shape, come one after another. */
static ipu_status add_alloc_string(ipu_pkg_builder *b, const char *text, uint32_t *last, uint32_t *offset)
{
    text = text ? text : "";
    if (b->pkg->alloc_count && strcmp((const char *)b->strings.data + *last, text) == 0)
        *offset = *last;
    else
        IPU_TRY(add_string(b, text, offset));
    *last = *offset;
    return IPU_OK;
}

ipu_status ipu_pkg_add_alloc(ipu_pkg_builder *b, uint32_t tile, uint32_t address, uint32_t size,
                             const char *name)
{
    char shape[16];
    snprintf(shape, sizeof shape, "%u B", size);
    ipu_pkg_alloc_def def = {tile, address, size, name, NULL, 0, IPU_LIFE_FOREVER, IPU_NO_OP, IPU_ALLOC_ACTIVATION,
                             shape};
    return ipu_pkg_define_alloc(b, &def);
}

ipu_status ipu_pkg_define_alloc(ipu_pkg_builder *b, const ipu_pkg_alloc_def *def)
{
    IPU_TRY(check_tile(b, def->tile));
    ipu_package *pkg = b->pkg;
    IPU_TRY(IPU_GROW(b->ctx, pkg->allocs, pkg->alloc_count, b->alloc_capacity));
    ipu_pkg_alloc *alloc = &pkg->allocs[pkg->alloc_count];
    *alloc = (ipu_pkg_alloc){def->tile, def->address, def->size, 0, 0, def->first, def->last, def->op, def->kind, 0};
    IPU_TRY(add_string(b, def->name, &alloc->name_offset));
    IPU_TRY(add_alloc_string(b, def->tensor, &b->last_tensor_offset, &alloc->tensor_offset));
    IPU_TRY(add_alloc_string(b, def->shape, &b->last_shape_offset, &alloc->shape_offset));
    pkg->alloc_count++;
    return IPU_OK;
}

ipu_status ipu_pkg_add_compiler_op(ipu_pkg_builder *b, const char *kind, const char *name)
{
    ipu_package *pkg = b->pkg;
    IPU_TRY(IPU_GROW(b->ctx, pkg->compiler_ops, pkg->compiler_op_count, b->compiler_op_capacity));
    ipu_pkg_compiler_op *op = &pkg->compiler_ops[pkg->compiler_op_count];
    IPU_TRY(add_string(b, kind, &op->kind_offset));
    IPU_TRY(add_string(b, name, &op->name_offset));
    pkg->compiler_op_count++;
    return IPU_OK;
}

ipu_status ipu_pkg_add_capture(ipu_pkg_builder *b, const ipu_pkg_capture *capture)
{
    ipu_package *pkg = b->pkg;
    IPU_TRY(IPU_GROW(b->ctx, pkg->captures, pkg->capture_count, b->capture_capacity));
    pkg->captures[pkg->capture_count++] = *capture;
    return IPU_OK;
}

void ipu_pkg_set_origin(ipu_pkg_builder *b, uint32_t compute, uint32_t exchange)
{
    b->origin[0] = compute;
    b->origin[1] = exchange;
}

void ipu_pkg_set_op_exchange_origin(ipu_pkg_builder *b, int init, size_t index, uint32_t origin)
{
    ipu_pkg_op *ops = init ? b->pkg->init_ops : b->pkg->main_ops;
    ops[index].origin[1] = origin;
}

ipu_status ipu_pkg_emit(ipu_pkg_builder *b, int init, uint32_t op, uint32_t a, uint32_t bb,
                        uint32_t c)
{
    ipu_package *pkg = b->pkg;
    if (init) {
        IPU_TRY(IPU_GROW(b->ctx, pkg->init_ops, pkg->init_count, b->init_capacity));
        pkg->init_ops[pkg->init_count++] = (ipu_pkg_op){op, a, bb, c, {b->origin[0], b->origin[1]}};
    } else {
        IPU_TRY(IPU_GROW(b->ctx, pkg->main_ops, pkg->main_count, b->main_capacity));
        pkg->main_ops[pkg->main_count++] = (ipu_pkg_op){op, a, bb, c, {b->origin[0], b->origin[1]}};
    }
    return IPU_OK;
}

size_t ipu_pkg_program_length(const ipu_pkg_builder *b, int init)
{
    return init ? b->pkg->init_count : b->pkg->main_count;
}

void ipu_pkg_set_op_b(ipu_pkg_builder *b, int init, size_t index, uint32_t value)
{
    ipu_pkg_op *ops = init ? b->pkg->init_ops : b->pkg->main_ops;
    ops[index].b = value;
}

ipu_status ipu_pkg_add_stream(ipu_pkg_builder *b, const char *name, uint32_t direction,
                              uint64_t size, uint32_t *id)
{
    ipu_package *pkg = b->pkg;
    IPU_TRY(IPU_GROW(b->ctx, pkg->streams, pkg->stream_count, b->stream_capacity));
    ipu_pkg_stream *stream = &pkg->streams[pkg->stream_count];
    *stream = (ipu_pkg_stream){direction, 0, size};
    IPU_TRY(add_string(b, name, &stream->name_offset));
    *id = (uint32_t)pkg->stream_count++;
    return IPU_OK;
}

#define RECORD_PIECE ((uint64_t)16 << 20)

ipu_status ipu_pkg_add_record_space(ipu_pkg_builder *b, uint32_t kind, uint32_t stream, uint32_t invocation,
                                    uint64_t size, uint8_t **dst)
{
    ipu_package *pkg = b->pkg;
    IPU_TRY(IPU_GROW(b->ctx, pkg->records, pkg->record_count, b->record_capacity));
    IPU_TRY(ipu_buf_append_zeros(b->ctx, &b->data, (8 - b->data.size % 8) % 8));
    pkg->records[pkg->record_count++] = (ipu_pkg_record){kind, stream, invocation, b->data.size, size};
    size_t at = b->data.size;
    /* A record may run to hundreds of megabytes: zeroed in pieces, looking at a cancel request between them. */
    for (uint64_t done = 0; done < size; done += RECORD_PIECE) {
        IPU_TRY(IPU_CHECK_CANCEL(b->ctx));
        IPU_TRY(ipu_buf_append_zeros(b->ctx, &b->data, size - done < RECORD_PIECE ? size - done : RECORD_PIECE));
    }
    *dst = b->data.data + at;
    return IPU_OK;
}

ipu_status ipu_pkg_add_record(ipu_pkg_builder *b, uint32_t kind, uint32_t stream,
                              uint32_t invocation, const void *bytes, uint64_t size)
{
    uint8_t *dst;
    IPU_TRY(ipu_pkg_add_record_space(b, kind, stream, invocation, size, &dst));
    if (size)
        memcpy(dst, bytes, size);
    return IPU_OK;
}

ipu_status ipu_pkg_reserve_data(ipu_pkg_builder *b, uint64_t bytes)
{
    return ipu_buf_reserve(b->ctx, &b->data, b->data.size + bytes);
}

void ipu_pkg_set_meta(ipu_pkg_builder *b, json_t *meta)
{
    json_decref(b->meta);
    b->meta = meta;
}

void ipu_pkg_set_invocations(ipu_pkg_builder *b, uint32_t invocations)
{
    b->pkg->invocations = invocations;
}

/* Append each tile's slot table, turn descriptor areas into segments. */
static ipu_status close_descriptor_areas(ipu_pkg_builder *b)
{
    ipu_package *pkg = b->pkg;
    uint32_t tiles = pkg->profile.tiles, slots = pkg->slots;
    uint8_t *table = ipu_calloc(b->ctx, slots ? slots : 1, 4);
    size_t *first = ipu_calloc(b->ctx, tiles + 1, sizeof *first);
    size_t *order = ipu_calloc(b->ctx, b->binding_count ? b->binding_count : 1, sizeof *order);
    ipu_status status = IPU_OK;
    if (!table || !first || !order)
        status = IPU_NO_MEMORY(b->ctx);
    /* Bucket the slot bindings by tile (counting sort). */
    for (size_t i = 0; status == IPU_OK && i < b->binding_count; i++)
        first[b->bindings[i].tile + 1]++;
    for (uint32_t t = 0; status == IPU_OK && t < tiles; t++)
        first[t + 1] += first[t];
    for (size_t i = 0; status == IPU_OK && i < b->binding_count; i++)
        order[first[b->bindings[i].tile]++] = i;
    for (uint32_t t = tiles; status == IPU_OK && t > 0; t--)
        first[t] = first[t - 1];
    if (status == IPU_OK)
        first[0] = 0;
    for (uint32_t t = 0; t < tiles && status == IPU_OK; t++) {
        if (slots) {
            memset(table, 0, (size_t)slots * 4);
            for (size_t i = first[t]; i < first[t + 1]; i++)
                ipu_store_u32(table + 4 * (size_t)b->bindings[order[i]].slot,
                              b->bindings[order[i]].address);
            status = ipu_pkg_put(b, t, table, (size_t)slots * 4, &pkg->slot_tables[t]);
        }
        tile_build *tb = &b->tiles[t];
        if (status == IPU_OK && tb->area_used) { /* in place */
            status = add_segment(b, t, IPU_SEG_DESCRIPTOR, b->desc_base, NULL, tb->area_used, 0);
            if (status == IPU_OK)
                pkg->segments[pkg->segment_count - 1].data_offset = tb->area;
        } else if (status == IPU_OK && tb->desc.size) {
            status = add_segment(b, t, IPU_SEG_DESCRIPTOR, b->desc_base, tb->desc.data,
                                 (uint32_t)tb->desc.size, 0);
        }
        ipu_buf_free(&tb->desc);
    }
    free(table);
    free(first);
    free(order);
    return status;
}

ipu_status ipu_pkg_build(ipu_pkg_builder *b, ipu_package **out)
{
    ipu_ctx *ctx = b->ctx;
    ipu_package *pkg = b->pkg;
    ipu_status status = close_descriptor_areas(b);
    if (status == IPU_OK) {
        char *meta = b->meta ? json_dumps(b->meta, JSON_COMPACT | JSON_SORT_KEYS) : ipu_strdup(ctx, "{}");
        if (!meta)
            status = IPU_NO_MEMORY(ctx);
        pkg->meta_json = meta;
    }
    if (status == IPU_OK) {
        pkg->data = b->data.data;
        pkg->data_size = b->data.size;
        pkg->strings = b->strings.data;
        pkg->strings_size = b->strings.size;
        memset(&b->data, 0, sizeof b->data);
        memset(&b->strings, 0, sizeof b->strings);
        status = ipu_pkg_validate(ctx, pkg);
    }
    if (status == IPU_OK) {
        *out = pkg;
        b->pkg = NULL;
    }
    ipu_pkg_builder_free(b);
    return status;
}
