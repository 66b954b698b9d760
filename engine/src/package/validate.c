/* validate.c: the structural checks every package passes before a device
 * sees it: segments inside accessible SRAM, outside the runtime state, code in
 * region 0, no overlaps on a tile; strings, streams, records, compiler ops and
 * allocations (lifetimes inside the programs' phases) well-formed; control programs with valid slots and Repeat bodies; every slot
 * pointing at a descriptor segment holding a well-formed record of the kind
 * the programs use it for.  Messages name the defect, the tile and address.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "package/package.h"
#include "package/xrow.h"

#define BAD(...) IPU_FAIL(ctx, IPU_ERR_MALFORMED, "malformed package: " __VA_ARGS__)

enum slot_use { USE_NONE, USE_COMPUTE, USE_EXCHANGE, USE_HOST_IN, USE_HOST_OUT, USE_PATCH };
static const char *USE_NAMES[] = {"unused", "compute list", "exchange table",
                                  "host input descriptor", "host output descriptor", "patch list"};

const char *ipu_pkg_string(const ipu_package *pkg, uint32_t offset)
{
    return offset < pkg->strings_size ? (const char *)pkg->strings + offset : "";
}

int ipu_pkg_find_stream(const ipu_package *pkg, const char *name)
{
    for (size_t i = 0; i < pkg->stream_count; i++)
        if (strcmp(ipu_pkg_string(pkg, pkg->streams[i].name_offset), name) == 0)
            return (int)i;
    return -1;
}

const ipu_pkg_segment *ipu_pkg_segment_at(const ipu_package *pkg, uint32_t tile, uint32_t address,
                                          uint32_t size)
{
    if (!pkg->tile_segment_start || tile >= pkg->profile.tiles)
        return NULL;
    uint32_t lo = pkg->tile_segment_start[tile], hi = pkg->tile_segment_start[tile + 1];
    /* Last segment starting at or below address. */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (pkg->segments[pkg->tile_segments[mid]].address <= address)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == pkg->tile_segment_start[tile])
        return NULL;
    const ipu_pkg_segment *seg = &pkg->segments[pkg->tile_segments[lo - 1]];
    if ((uint64_t)address + size > (uint64_t)seg->address + seg->size)
        return NULL;
    return seg;
}

const uint8_t *ipu_pkg_segment_bytes(const ipu_package *pkg, const ipu_pkg_segment *seg)
{
    return pkg->data + seg->data_offset;
}

static int valid_string(const ipu_package *pkg, uint32_t offset)
{
    return offset < pkg->strings_size && memchr(pkg->strings + offset, 0, pkg->strings_size - offset);
}

static const char *kind_name(uint32_t kind)
{
    return kind == IPU_SEG_CODE ? "code" : kind == IPU_SEG_DESCRIPTOR ? "descriptor" : "data";
}

static ipu_status check_segments(ipu_ctx *ctx, ipu_package *pkg)
{
    const ipu_profile *p = &pkg->profile;
    uint32_t protected_end = p->sram_base + p->runtime_state_bytes;
    uint32_t access_end = ipu_profile_access_end(p);
    uint32_t *count = ipu_calloc(ctx, (size_t)p->tiles + 1, sizeof *count);
    uint32_t *index = ipu_calloc(ctx, pkg->segment_count ? pkg->segment_count : 1, sizeof *index);
    if (!count || !index) {
        free(count), free(index);
        return IPU_NO_MEMORY(ctx);
    }
    pkg->tile_segment_start = count;
    pkg->tile_segments = index;
    for (size_t i = 0; i < pkg->segment_count; i++) {
        const ipu_pkg_segment *s = &pkg->segments[i];
        if (s->tile >= p->tiles)
            return BAD("segment %zu is on tile %u, but the device has %u tiles", i, s->tile, p->tiles);
        if (s->kind < IPU_SEG_CODE || s->kind > IPU_SEG_DATA)
            return BAD("segment %zu has unknown kind %u", i, s->kind);
        if (s->size == 0)
            return BAD("segment %zu on tile %u is empty", i, s->tile);
        uint64_t end = (uint64_t)s->address + s->size;
        if (s->address < p->sram_base || end > access_end)
            return BAD("%s segment %zu on tile %u at [0x%X, 0x%llX) is outside accessible SRAM "
                       "[0x%X, 0x%X)",
                       kind_name(s->kind), i, s->tile, s->address, (unsigned long long)end,
                       p->sram_base, access_end);
        if (s->address < protected_end)
            return BAD("%s segment %zu on tile %u at 0x%X overlaps the runtime state [0x%X, 0x%X)",
                       kind_name(s->kind), i, s->tile, s->address, p->sram_base, protected_end);
        if (s->kind == IPU_SEG_CODE) {
            if (end > p->region1_base)
                return BAD("code segment %zu on tile %u at 0x%X is outside region 0 (code may "
                           "execute only below 0x%X)",
                           i, s->tile, s->address, p->region1_base);
            int body = s->entry & IPU_CODE_BODY;
            uint32_t id = s->entry & ~IPU_CODE_BODY;
            uint32_t need = body ? ipu_kernel_body_size((int)id) : ipu_kernel_supervisor_size((int)id);
            if (!need || (s->entry >> 17))
                return BAD("code segment %zu on tile %u names unknown kernel %s %u", i, s->tile,
                           body ? "body" : "entry", id);
            if (s->size != need)
                return BAD("code segment %zu on tile %u: %s %u needs %u bytes, segment has %u", i,
                           s->tile, body ? "body" : "entry", id, need, s->size);
        } else if (s->data_offset > pkg->data_size || s->size > pkg->data_size - s->data_offset) {
            return BAD("%s segment %zu on tile %u: its bytes [%llu, +%u) lie outside the data "
                       "section (%zu bytes)",
                       kind_name(s->kind), i, s->tile, (unsigned long long)s->data_offset, s->size,
                       pkg->data_size);
        }
        if (s->kind == IPU_SEG_DESCRIPTOR && s->address % 4)
            return BAD("descriptor segment %zu on tile %u at 0x%X is not 4-byte aligned", i, s->tile,
                       s->address);
        count[s->tile + 1]++;
    }
    for (uint32_t t = 0; t < p->tiles; t++)
        count[t + 1] += count[t];
    uint32_t *fill = ipu_calloc(ctx, p->tiles ? p->tiles : 1, sizeof *fill);
    if (!fill)
        return IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < pkg->segment_count; i++) {
        uint32_t t = pkg->segments[i].tile;
        index[count[t] + fill[t]++] = (uint32_t)i;
    }
    free(fill);
    /* Sort each tile's segments by address (insertion sort: few per tile). */
    for (uint32_t t = 0; t < p->tiles; t++) {
        for (uint32_t i = count[t] + 1; i < count[t + 1]; i++) {
            uint32_t v = index[i], j = i;
            while (j > count[t] && pkg->segments[index[j - 1]].address > pkg->segments[v].address) {
                index[j] = index[j - 1];
                j--;
            }
            index[j] = v;
        }
        for (uint32_t i = count[t] + 1; i < count[t + 1]; i++) {
            const ipu_pkg_segment *a = &pkg->segments[index[i - 1]], *b = &pkg->segments[index[i]];
            if ((uint64_t)a->address + a->size > b->address)
                return BAD("segments %u (%s, [0x%X, 0x%X)) and %u (%s, [0x%X, 0x%X)) overlap on "
                           "tile %u",
                           index[i - 1], kind_name(a->kind), a->address, a->address + a->size,
                           index[i], kind_name(b->kind), b->address, b->address + b->size, t);
        }
    }
    return IPU_OK;
}

static ipu_status check_tables(ipu_ctx *ctx, const ipu_package *pkg)
{
    const ipu_profile *p = &pkg->profile;
    if (pkg->strings_size && pkg->strings[pkg->strings_size - 1] != 0)
        return BAD("the string table does not end with a NUL byte");
    if (pkg->invocations == 0 || pkg->invocations > 1000000)
        return BAD("invocations is %u, expected 1..1000000", pkg->invocations);
    /* Streams are host buffers the device allocates at initialize: each holds
     * at most the device's memory, and all of them twice that (parameters live
     * on the device; inputs and outputs pass through it). */
    uint32_t tile_bytes = ipu_profile_access_end(p) - p->sram_base;
    uint64_t device_bytes = (uint64_t)p->tiles * tile_bytes, stream_bytes = 0;
    for (size_t i = 0; i < pkg->stream_count; i++) {
        const ipu_pkg_stream *s = &pkg->streams[i];
        if (!valid_string(pkg, s->name_offset) || !*ipu_pkg_string(pkg, s->name_offset))
            return BAD("stream %zu has no valid name", i);
        if (!ipu_pkg_utf8(ipu_pkg_string(pkg, s->name_offset)))
            return BAD("stream %zu: its name is not UTF-8 text", i);
        if (s->direction > IPU_STREAM_OUTPUT)
            return BAD("stream '%s' has unknown direction %u", ipu_pkg_string(pkg, s->name_offset),
                       s->direction);
        if (s->size == 0 || s->size > device_bytes)
            return BAD("stream '%s' has size %llu, expected 1..%llu (the device's %u tiles of %u "
                       "accessible bytes: no stream holds more than the device)",
                       ipu_pkg_string(pkg, s->name_offset), (unsigned long long)s->size,
                       (unsigned long long)device_bytes, p->tiles, tile_bytes);
        if (s->size > 2 * device_bytes - stream_bytes)
            return BAD("stream '%s' (%llu bytes) takes the streams to %llu bytes, expected at most "
                       "%llu in all (twice the device's memory)",
                       ipu_pkg_string(pkg, s->name_offset), (unsigned long long)s->size,
                       (unsigned long long)(stream_bytes + s->size), (unsigned long long)(2 * device_bytes));
        stream_bytes += s->size;
        for (size_t j = 0; j < i; j++)
            if (strcmp(ipu_pkg_string(pkg, s->name_offset),
                       ipu_pkg_string(pkg, pkg->streams[j].name_offset)) == 0)
                return BAD("stream name '%s' appears twice", ipu_pkg_string(pkg, s->name_offset));
    }
    for (size_t i = 0; i < pkg->record_count; i++) {
        const ipu_pkg_record *r = &pkg->records[i];
        if (r->kind > IPU_RECORD_EXPECTED)
            return BAD("record %zu has unknown kind %u", i, r->kind);
        if (r->stream >= pkg->stream_count)
            return BAD("record %zu names stream %u of %zu", i, r->stream, pkg->stream_count);
        const ipu_pkg_stream *s = &pkg->streams[r->stream];
        int output = s->direction == IPU_STREAM_OUTPUT;
        if ((r->kind == IPU_RECORD_EXPECTED) != output)
            return BAD("record %zu: %s record for %s stream '%s'", i,
                       r->kind == IPU_RECORD_EXPECTED ? "an expected" : "an input",
                       output ? "output" : "input", ipu_pkg_string(pkg, s->name_offset));
        if (r->invocation >= pkg->invocations)
            return BAD("record %zu is for invocation %u of %u", i, r->invocation, pkg->invocations);
        if (r->size != s->size || r->data_offset > pkg->data_size ||
            r->size > pkg->data_size - r->data_offset)
            return BAD("record %zu for stream '%s' has %llu bytes at offset %llu, which runs outside "
                       "the data section (%zu bytes) or differs from the stream's %llu bytes",
                       i, ipu_pkg_string(pkg, s->name_offset), (unsigned long long)r->size,
                       (unsigned long long)r->data_offset, pkg->data_size,
                       (unsigned long long)s->size);
    }
    for (size_t i = 0; i < pkg->compiler_op_count; i++)
        if (!valid_string(pkg, pkg->compiler_ops[i].kind_offset) ||
            !valid_string(pkg, pkg->compiler_ops[i].name_offset))
            return BAD("compiler op %zu has no valid kind or name", i);
    uint64_t phases = 2 * ((uint64_t)pkg->init_count + pkg->main_count);
    for (size_t i = 0; i < pkg->alloc_count; i++) {
        const ipu_pkg_alloc *a = &pkg->allocs[i];
        if (a->tile >= p->tiles || a->address < p->sram_base ||
            (uint64_t)a->address + a->size > p->sram_end)
            return BAD("allocation %zu (tile %u, 0x%X, %u bytes) is outside the device", i, a->tile,
                       a->address, a->size);
        const char *fields[] = {"name", "tensor", "shape"};
        const uint32_t offsets[] = {a->name_offset, a->tensor_offset, a->shape_offset};
        for (int f = 0; f < 3; f++)
            if (!valid_string(pkg, offsets[f]))
                return BAD("allocation %zu (tile %u, 0x%X, %u bytes) has its %s offset %u outside the "
                           "string table (%zu bytes)",
                           i, a->tile, a->address, a->size, fields[f], offsets[f], pkg->strings_size);
        if (a->first > a->last || (a->last != IPU_LIFE_FOREVER && a->last >= phases))
            return BAD("allocation %zu ('%s', tile %u) lives from phase %u to %u, expected first <= "
                       "last < %llu (2 phases per control op) or last = 0x%X (forever)",
                       i, ipu_pkg_string(pkg, a->name_offset), a->tile, a->first, a->last,
                       (unsigned long long)phases, IPU_LIFE_FOREVER);
        if (a->kind >= IPU_ALLOC_KIND_COUNT)
            return BAD("allocation %zu ('%s', tile %u) is of kind %u, expected 0..%d", i,
                       ipu_pkg_string(pkg, a->name_offset), a->tile, a->kind, IPU_ALLOC_KIND_COUNT - 1);
        if (a->op != IPU_NO_OP && a->op >= pkg->compiler_op_count)
            return BAD("allocation %zu ('%s', tile %u) names compiler op %u of %zu", i,
                       ipu_pkg_string(pkg, a->name_offset), a->tile, a->op, pkg->compiler_op_count);
    }
    for (size_t i = 0; i < pkg->capture_count; i++) {
        const ipu_pkg_capture *c = &pkg->captures[i];
        uint64_t rows = c->row_hi - (uint64_t)c->row_lo, cols = c->col_hi - (uint64_t)c->col_lo;
        if (c->op >= pkg->compiler_op_count || c->phase >= phases || c->tile >= p->tiles ||
            c->row_lo >= c->row_hi || c->col_lo >= c->col_hi || cols > c->stride ||
            c->address < p->sram_base ||
            c->address + (rows - 1) * c->stride + cols > p->sram_end)
            return BAD("capture %zu (op %u, phase %u, tile %u at 0x%X: rows %u..%u, columns %u..%u, "
                       "stride %u) names no op, phase or tile of the package, or leaves SRAM",
                       i, c->op, c->phase, c->tile, c->address, c->row_lo, c->row_hi, c->col_lo,
                       c->col_hi, c->stride);
    }
    return IPU_OK;
}

/* A run executes at most this many control ops (Repeat bodies counted once
 * per iteration): the 27-layer ViT executes about a thousand, and a package
 * of nested Repeats must not keep the device busy for ever. */
#define MAX_EXECUTED_OPS (1ull << 24)

/* Check one program's ops; mark each slot's use. */
static ipu_status check_program(ipu_ctx *ctx, const ipu_package *pkg, const ipu_pkg_op *ops,
                                size_t count, const char *which, uint8_t *use)
{
#define USE(slot, kind)                                                                        \
    do {                                                                                       \
        if ((slot) >= pkg->slots)                                                              \
            return BAD("%s op %zu uses slot %u, but the package has %u slots", which, i, (slot), \
                       pkg->slots);                                                            \
        if (use[slot] != USE_NONE && use[slot] != (kind))                                      \
            return BAD("slot %u is used as a %s and as a %s", (slot), USE_NAMES[use[slot]],     \
                       USE_NAMES[kind]);                                                       \
        use[slot] = (kind);                                                                    \
    } while (0)
    /* Ends of the open Repeat bodies, innermost last, and how many times an
     * op at each depth runs (saturating above the limit). */
    size_t ends[64];
    uint64_t runs[65] = {1}, executed = 0;
    int depth = 0;
    for (size_t i = 0; i < count; i++) {
        while (depth && ends[depth - 1] == i)
            depth--;
        const ipu_pkg_op *op = &ops[i];
        executed += runs[depth];
        if (executed > MAX_EXECUTED_OPS)
            return BAD("%s op %zu: the program executes more than %llu control ops (Repeat counts "
                       "multiply their bodies)", which, i, (unsigned long long)MAX_EXECUTED_OPS);
        for (int k = 0; k < 2; k++)
            if (op->origin[k] != IPU_NO_OP && op->origin[k] >= pkg->compiler_op_count)
                return BAD("%s op %zu names compiler op %u of %zu", which, i, op->origin[k],
                           pkg->compiler_op_count);
        switch (op->op) {
        case IPU_OP_STEP:
            if (op->a == IPU_NO_SLOT && op->b == IPU_NO_SLOT)
                return BAD("%s op %zu is a step with neither compute nor exchange", which, i);
            if (op->a != IPU_NO_SLOT)
                USE(op->a, USE_COMPUTE);
            if (op->b != IPU_NO_SLOT)
                USE(op->b, USE_EXCHANGE);
            break;
        case IPU_OP_HOST_IN:
            USE(op->a, USE_HOST_IN);
            break;
        case IPU_OP_HOST_OUT:
            USE(op->a, USE_HOST_OUT);
            break;
        case IPU_OP_REPEAT:
            if (op->a == 0) {
                char label[160];
                ipu_pkg_compiler_op_label(pkg, op->origin[0], label, sizeof label);
                return BAD("%s op %zu%s%s%s repeats 0 times (its body of %u ops would never run)", which, i,
                           *label ? " (" : "", label, *label ? ")" : "", op->b);
            }
            if (op->b == 0 || op->b > count - i - 1 || (depth && i + 1 + op->b > ends[depth - 1]))
                return BAD("%s op %zu: Repeat body of %u ops runs past its enclosing program or "
                           "body",
                           which, i, op->b);
            if (depth == 64)
                return BAD("%s op %zu: Repeat nested deeper than 64", which, i);
            if (op->c != IPU_NO_SLOT)
                USE(op->c, USE_PATCH);
            runs[depth + 1] = runs[depth] > MAX_EXECUTED_OPS / op->a ? MAX_EXECUTED_OPS + 1 : runs[depth] * op->a;
            ends[depth++] = i + 1 + op->b;
            break;
        default:
            return BAD("%s op %zu has unknown opcode %u", which, i, op->op);
        }
    }
    return IPU_OK;
#undef USE
}

/* A record on a tile: the descriptor segment containing [address, +size). */
static const uint8_t *record_bytes(const ipu_package *pkg, uint32_t tile, uint32_t address,
                                   uint32_t size)
{
    const ipu_pkg_segment *seg = ipu_pkg_segment_at(pkg, tile, address, size);
    if (!seg || seg->kind != IPU_SEG_DESCRIPTOR)
        return NULL;
    return ipu_pkg_segment_bytes(pkg, seg) + (address - seg->address);
}

static const char *where_is(const ipu_package *pkg, uint32_t tile, uint32_t address)
{
    const ipu_profile *p = &pkg->profile;
    if (address >= p->sram_base && address < p->sram_base + p->runtime_state_bytes)
        return "the protected runtime state";
    const ipu_pkg_segment *seg = ipu_pkg_segment_at(pkg, tile, address, 1);
    if (seg && seg->kind == IPU_SEG_CODE)
        return "protected kernel code";
    if (seg && seg->kind == IPU_SEG_DATA)
        return "a data segment";
    if (address < p->sram_base || address >= ipu_profile_access_end(p))
        return "outside accessible SRAM";
    return "no loaded segment";
}

/* An exchange table's count rows, each full or a continuation (xrow.h). */
static ipu_status check_exchange(ipu_ctx *ctx, const ipu_package *pkg, uint32_t tile, uint32_t address,
                                 uint32_t count)
{
    const ipu_profile *p = &pkg->profile;
    const ipu_pkg_segment *seg = ipu_pkg_segment_at(pkg, tile, address, 4);
    const uint8_t *head = record_bytes(pkg, tile, address, 4);
    ipu_xrow_reader reader;
    ipu_xrow_reader_init(&reader, head + 4, seg->address + seg->size - address - 4, count);
    ipu_xrow row;
    for (int got; (got = ipu_xrow_next(&reader, &row)) != 0;) {
        uint32_t i = reader.entry;
        if (got < 0 && reader.rows > IPU_XTABLE_ROWS_MAX)
            return BAD("exchange table at 0x%X on tile %u: entry %u takes it past %u rows", address, tile, i,
                       IPU_XTABLE_ROWS_MAX);
        if (got < 0 && !ipu_xrow_fits(head + 4 + reader.offset, reader.avail - reader.offset))
            return BAD("exchange table at 0x%X on tile %u: row %u of %u runs past its segment", address, tile, i,
                       count);
        if (got < 0)
            return BAD("exchange table at 0x%X on tile %u: row %u continues the row before it, but that row is "
                       "%s",
                       address, tile, i,
                       i ? "of another op or other flags (or the row is of several kinds, or a run of none)"
                         : "missing (it is the first row)");
        if (row.op < IPU_XROW_SEND || row.op > IPU_XROW_RESET_BASE)
            return BAD("exchange table at 0x%X on tile %u: row %u has unknown op %u", address, tile, i, row.op);
        if (row.flags & ~(IPU_XFLAG_RELATIVE | IPU_XFLAG_PAIRED))
            return BAD("exchange table at 0x%X on tile %u: row %u has unknown flags 0x%X", address, tile, i,
                       row.flags);
        if (row.op == IPU_XROW_RECV && row.peer >= p->tiles)
            return BAD("exchange table at 0x%X on tile %u: row %u receives from tile %u of %u", address, tile, i,
                       row.peer, p->tiles);
    }
    return IPU_OK;
}

static ipu_status check_record(ipu_ctx *ctx, const ipu_package *pkg, uint32_t tile, uint32_t slot,
                               int use, uint32_t address)
{
    const ipu_profile *p = &pkg->profile;
    const uint8_t *head = record_bytes(pkg, tile, address, 4);
    if (!head || address % 4)
        return BAD("slot %u (%s) of tile %u points to 0x%X, which is %s, not a descriptor segment",
                   slot, USE_NAMES[use], tile, address,
                   address % 4 ? "misaligned" : where_is(pkg, tile, address));
    uint32_t count = ipu_load_u32(head);
    if (use == USE_COMPUTE) {
        uint32_t at = address + 4;
        for (uint32_t i = 0; i < count; i++) {
            const uint8_t *d = record_bytes(pkg, tile, at, 4);
            if (!d)
                return BAD("compute list at 0x%X on tile %u: descriptor %u at 0x%X runs past its "
                           "segment",
                           address, tile, i, at);
            uint32_t entry = d[0] | (uint32_t)d[1] << 8, argc = d[2] | (uint32_t)d[3] << 8;
            if (!ipu_kernel_arg_count((int)entry))
                return BAD("compute list at 0x%X on tile %u: descriptor %u calls unknown kernel "
                           "entry %u",
                           address, tile, i, entry);
            if (argc != ipu_kernel_arg_count((int)entry))
                return BAD("compute list at 0x%X on tile %u: descriptor %u (%s) has %u arguments, "
                           "expected %u",
                           address, tile, i, ipu_kernel_name((int)entry), argc,
                           ipu_kernel_arg_count((int)entry));
            if (!record_bytes(pkg, tile, at, 4 + 4 * argc))
                return BAD("compute list at 0x%X on tile %u: descriptor %u runs past its segment",
                           address, tile, i);
            at += 4 + 4 * argc;
        }
        return IPU_OK;
    }
    if (use == USE_EXCHANGE)
        return check_exchange(ctx, pkg, tile, address, count);
    uint64_t entry_size = use == USE_PATCH ? IPU_PATCH_SIZE : IPU_HOST_ENTRY_SIZE;
    if ((uint64_t)count * entry_size > 0xFFFFFFFFull ||
        !record_bytes(pkg, tile, address, 4 + (uint32_t)(count * entry_size)))
        return BAD("%s at 0x%X on tile %u: %u entries run past its segment", USE_NAMES[use], address,
                   tile, count);
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = head + 4 + i * entry_size;
        uint32_t w0 = ipu_load_u32(e), w1 = ipu_load_u32(e + 4), w2 = ipu_load_u32(e + 8),
                 w3 = ipu_load_u32(e + 12);
        if (use == USE_PATCH) {
            if (w0 != IPU_PATCH_TABLE && w0 != IPU_PATCH_PROGRESSION)
                return BAD("patch list at 0x%X on tile %u: entry %u has unknown kind %u", address,
                           tile, i, w0);
            if (w1 % 4 || !record_bytes(pkg, tile, w1, 4))
                return BAD("patch list at 0x%X on tile %u: entry %u targets 0x%X, which is %s, not "
                           "a descriptor word",
                           address, tile, i, w1, w1 % 4 ? "misaligned" : where_is(pkg, tile, w1));
            if (w0 == IPU_PATCH_TABLE &&
                (w3 == 0 || w3 > 0x3FFFFFFF || w2 % 4 ||
                 !ipu_pkg_segment_at(pkg, tile, w2, w3 * 4)))
                return BAD("patch list at 0x%X on tile %u: entry %u's table at 0x%X (%u entries) is "
                           "not inside a loaded segment",
                           address, tile, i, w2, w3);
        } else {
            int in = use == USE_HOST_IN;
            if (w0 >= pkg->stream_count)
                return BAD("%s at 0x%X on tile %u: entry %u names stream %u of %zu", USE_NAMES[use],
                           address, tile, i, w0, pkg->stream_count);
            const ipu_pkg_stream *s = &pkg->streams[w0];
            if (in == (s->direction == IPU_STREAM_OUTPUT))
                return BAD("%s at 0x%X on tile %u: entry %u moves %s stream '%s' the wrong way",
                           USE_NAMES[use], address, tile, i,
                           s->direction == IPU_STREAM_OUTPUT ? "output" : "input",
                           ipu_pkg_string(pkg, s->name_offset));
            uint32_t rows = ipu_load_u32(e + 16), stream_stride = ipu_load_u32(e + 20),
                     tile_stride = ipu_load_u32(e + 24), reserved = ipu_load_u32(e + 28);
            if (reserved)
                return BAD("%s at 0x%X on tile %u: entry %u has reserved word 0x%X, not zero",
                           USE_NAMES[use], address, tile, i, reserved);
            if (rows == 0)
                return BAD("%s at 0x%X on tile %u: entry %u moves 0 rows", USE_NAMES[use], address,
                           tile, i);
            if (rows > 1 && tile_stride < w3)
                return BAD("%s at 0x%X on tile %u: entry %u's %u rows of %u bytes overlap on the "
                           "tile (tile stride %u)",
                           USE_NAMES[use], address, tile, i, rows, w3, tile_stride);
            /* Where the last row ends (no overflow: (2^32 - 1)^2 + 2 * (2^32 - 1) < 2^64). */
            uint64_t stream_end = w1 + (uint64_t)(rows - 1) * stream_stride + w3;
            uint64_t tile_end = w2 + (uint64_t)(rows - 1) * tile_stride + w3;
            if (stream_end > s->size)
                return BAD("%s at 0x%X on tile %u: entry %u %s bytes [%u, %llu) of stream '%s' "
                           "(%llu bytes; %u row%s of %u bytes, stride %u)",
                           USE_NAMES[use], address, tile, i, in ? "reads" : "writes", w1,
                           (unsigned long long)stream_end, ipu_pkg_string(pkg, s->name_offset),
                           (unsigned long long)s->size, rows, rows == 1 ? "" : "s", w3, stream_stride);
            if (w2 < p->aperture_base || tile_end > p->aperture_end)
                return BAD("%s at 0x%X on tile %u: entry %u addresses [0x%X, 0x%llX) (%u row%s of %u "
                           "bytes, stride %u), outside the host aperture [0x%X, 0x%X)",
                           USE_NAMES[use], address, tile, i, w2, (unsigned long long)tile_end, rows,
                           rows == 1 ? "" : "s", w3, tile_stride, p->aperture_base, p->aperture_end);
        }
    }
    return IPU_OK;
}

/* The capture table against the allocation table: each capture of op X's
 * output reads rows that lie whole in one allocation live at the capture's
 * phase, and that allocation holds X's output tensor (and was made by X,
 * where the table names its maker): a capture that names another op, or
 * bytes no live allocation holds, would have the per-op check judge the
 * wrong values. */
static ipu_status check_captures(ipu_ctx *ctx, const ipu_package *pkg)
{
    for (size_t i = 0; i < pkg->capture_count; i++) {
        const ipu_pkg_capture *c = &pkg->captures[i];
        char op[160];
        ipu_pkg_compiler_op_label(pkg, c->op, op, sizeof op);
        uint32_t span = (c->row_hi - c->row_lo - 1) * c->stride + 1;
        int64_t a = ipu_pkg_alloc_find(pkg, c->tile, c->address, span, c->phase, NULL);
        if (a < 0 && pkg->alloc_count)
            return BAD("capture %zu of %s (phase %u, tile %u at 0x%X, %u rows of stride %u) lies in no allocation "
                       "live at its phase",
                       i, op, c->phase, c->tile, c->address, c->row_hi - c->row_lo, c->stride);
        if (a >= 0 && pkg->allocs[a].op != IPU_NO_OP && pkg->allocs[a].op != c->op)
            return BAD("capture %zu of %s (phase %u, tile %u at 0x%X) reads allocation '%s', which op %u made", i, op,
                       c->phase, c->tile, c->address, ipu_pkg_string(pkg, pkg->allocs[a].name_offset),
                       pkg->allocs[a].op);
        /* The phase is one the op's own steps run: its control op lowers that op. */
        size_t g = c->phase / 2;
        const ipu_pkg_op *at = g < pkg->init_count ? &pkg->init_ops[g] : &pkg->main_ops[g - pkg->init_count];
        if (at->origin[0] != c->op && at->origin[1] != c->op)
            return BAD("capture %zu of %s (phase %u, tile %u at 0x%X) is at a phase of control op %zu, which lowers "
                       "ops %d and %d, not op %u",
                       i, op, c->phase, c->tile, c->address, g, (int)at->origin[0], (int)at->origin[1], c->op);
    }
    return IPU_OK;
}

ipu_status ipu_pkg_validate(ipu_ctx *ctx, ipu_package *pkg)
{
    free(pkg->tile_segment_start);
    free(pkg->tile_segments);
    pkg->tile_segment_start = NULL;
    pkg->tile_segments = NULL;
    IPU_TRY(check_segments(ctx, pkg));
    IPU_TRY(check_tables(ctx, pkg));
    IPU_TRY(ipu_pkg_index_allocs(ctx, pkg));
    IPU_TRY(check_captures(ctx, pkg));
    uint8_t *use = ipu_calloc(ctx, pkg->slots ? pkg->slots : 1, 1);
    if (!use)
        return IPU_NO_MEMORY(ctx);
    ipu_status status = check_program(ctx, pkg, pkg->init_ops, pkg->init_count, "init", use);
    if (status == IPU_OK)
        status = check_program(ctx, pkg, pkg->main_ops, pkg->main_count, "main", use);
    for (uint32_t t = 0; status == IPU_OK && pkg->slots && t < pkg->profile.tiles; t++) {
        const uint8_t *table = record_bytes(pkg, t, pkg->slot_tables[t], pkg->slots * 4);
        if (!table || pkg->slot_tables[t] % 4) {
            status = BAD("the slot table of tile %u at 0x%X (%u slots) is %s, not inside a "
                         "descriptor segment",
                         t, pkg->slot_tables[t], pkg->slots,
                         where_is(pkg, t, pkg->slot_tables[t]));
            break;
        }
        for (uint32_t s = 0; status == IPU_OK && s < pkg->slots; s++) {
            uint32_t address = ipu_load_u32(table + 4 * s);
            if (address == 0)
                continue;
            if (use[s] == USE_NONE)
                status = BAD("slot %u of tile %u points to 0x%X but no program uses the slot", s, t,
                             address);
            else
                status = check_record(ctx, pkg, t, s, use[s], address);
        }
    }
    free(use);
    return status;
}
