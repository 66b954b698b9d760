/* assemble.c: low program -> package (see assemble.h).
 *
 * Pass 1 sizes each tile's records (so the descriptor area is known before
 * any tensor is placed); placement then gives every buffer an address
 * outside the runtime state, the code and the descriptor area; pass 2
 * encodes the records with those addresses.
 * A compute step directly followed by an exchange step becomes one device
 * step.  Kernel arguments that advance per Repeat iteration become
 * progression patches of the descriptor words that hold them.
 */
#include <stdlib.h>
#include <string.h>

#include "package/assemble.h"
#include "package/xrow.h"

typedef struct assembly {
    ipu_ctx *ctx;
    ipu_low_program *prog;
    const ipu_xprogram *xprog;
    const ipu_profile *p;
    uint32_t tiles;
    const ipu_package_layout *layout;
    uint32_t *phase;        /* per step: the program phase it becomes (ipu_low_step_phases) */
    struct relocation *relocation; /* per step: how its advancing sources move on */
} assembly;

/* A Repeat body exchange's sources that advance per iteration: tiles that
 * move them by OUTGOING_BASE and tiles that patch them row by row, the
 * source words patched at each iteration (in all, and on the tile with
 * most), and the send rows that advance (what patching every one would
 * take). */
typedef struct relocation {
    uint32_t based_tiles, patched_tiles, patches, most, rows;
} relocation;

static uint64_t padded4(uint64_t n) { return (n + 3) & ~3ull; }

/* The tile of item i of a compute step (a kernel) or host step (an entry). */
static uint32_t item_tile(const assembly *A, const ipu_low_step *step, uint32_t i)
{
    return step->kind == IPU_LOW_COMPUTE ? A->prog->kernels[i].tile
                                         : A->prog->buffers[A->prog->hosts[i].buffer].tile;
}

/* Group a compute or host step's items by tile, keeping their order. */
static ipu_status group(assembly *A, ipu_package_layout *out, size_t s)
{
    const ipu_low_step *step = &A->prog->steps[s];
    uint32_t *start = ipu_calloc(A->ctx, (size_t)A->tiles + 1, sizeof *start);
    uint32_t *items = ipu_calloc(A->ctx, step->count ? step->count : 1, sizeof *items);
    if (!start || !items) {
        free(start), free(items);
        return IPU_NO_MEMORY(A->ctx);
    }
    for (uint32_t n = 0; n < step->count; n++)
        start[item_tile(A, step, step->first + n) + 1]++;
    for (uint32_t t = 0; t < A->tiles; t++)
        start[t + 1] += start[t];
    uint32_t *fill = ipu_calloc(A->ctx, A->tiles, sizeof *fill);
    if (!fill) {
        free(start), free(items);
        return IPU_NO_MEMORY(A->ctx);
    }
    for (uint32_t n = 0; n < step->count; n++) {
        uint32_t tile = item_tile(A, step, step->first + n);
        items[start[tile] + fill[tile]++] = step->first + n;
    }
    free(fill);
    out->by_tile[s] = items;
    out->tile_start[s] = start;
    return IPU_OK;
}

/* Pass 1: group items, size every tile's descriptors; table[tiles] and
 * patches[tiles] are scratch. */
static ipu_status size_records(assembly *A, ipu_package_layout *out, uint64_t *table, uint32_t *patches)
{
    ipu_low_program *prog = A->prog;
    for (size_t s = 0; s < prog->step_count; s++) {
        ipu_low_step *step = &prog->steps[s];
        int in_body = !step->init && s >= prog->repeat_first && s < prog->repeat_first + prog->repeat_count;
        IPU_TRY(IPU_CHECK_CANCEL(A->ctx));
        if (step->kind == IPU_LOW_EXCHANGE) {
            /* Exactly what encoding will write (by key), and a table header
             * on every tile (a bound, for tiles without rows); the patches of
             * advancing sources, which only a Repeat body has. */
            IPU_TRY(ipu_exchange_measure(A->ctx, A->p, &A->xprog->phases[s], table, patches));
            for (uint32_t t = 0; t < A->tiles; t++) {
                out->xtable_bytes[t] += table[t] ? table[t] : 4;
                if (patches[t] && !in_body)
                    return IPU_INCONSISTENT(A->ctx, "package",
                                            "step %zu (%s): a source advances per Repeat iteration outside the "
                                            "Repeat body",
                                            s, step->label);
                out->patch_count[t] += patches[t];
            }
            continue;
        }
        IPU_TRY(group(A, out, s));
        for (uint32_t t = 0; t < A->tiles; t++) {
            uint32_t lo = out->tile_start[s][t], hi = out->tile_start[s][t + 1];
            if (lo == hi)
                continue;
            uint64_t bytes = 4;
            for (uint32_t i = lo; i < hi; i++) {
                uint32_t item = out->by_tile[s][i];
                if (step->kind == IPU_LOW_COMPUTE) {
                    const ipu_low_kernel *k = &prog->kernels[item];
                    bytes += 4 + 4 * (uint64_t)k->argc;
                    out->code_entries[t] |= 1ull << k->entry;
                    if (in_body && k->advance_arg >= 0)
                        out->patch_count[t]++;
                } else {
                    bytes += IPU_HOST_ENTRY_SIZE;
                }
            }
            out->desc_bytes[t] += padded4(bytes);
        }
    }
    return IPU_OK;
}

/* Supervisor parts of the entries and each shared worker body once. */
static uint32_t code_bytes(uint64_t entries)
{
    uint32_t bytes = 0;
    uint64_t bodies = 0;
    for (int e = 1; e < IPU_K_ENTRY_END; e++) {
        if (!(entries & (1ull << e)))
            continue;
        bytes += (ipu_kernel_supervisor_size(e) + 7u) & ~7u;
        int body = ipu_kernel_body_of(e);
        if (body != IPU_BODY_NONE && !(bodies & (1ull << body))) {
            bodies |= 1ull << body;
            bytes += (ipu_kernel_body_size(body) + 7u) & ~7u;
        }
    }
    return bytes;
}

/* The exchange mutations, on an encoded table, each on the first entry
 * that can take it: a send row's source one word on (a full row: the
 * others' addresses follow from the row before), a receive's cycle one
 * later (a continuation's, repeat's or run's gap, which moves the rows
 * after it too). */
static ipu_status inject_rows(assembly *A, uint8_t *table, size_t size)
{
    ipu_xrow_reader reader;
    ipu_xrow_reader_init(&reader, table + 4, size - 4, ipu_load_u32(table));
    ipu_xrow row;
    uint32_t last = UINT32_MAX;
    for (int got; (got = ipu_xrow_next(&reader, &row)) != 0;) {
        IPU_ASSERT(A->ctx, got > 0);
        if (reader.entry == last)
            continue; /* a run's later rows */
        last = reader.entry;
        uint8_t *at = table + 4 + reader.offset;
        uint32_t n = reader.entry_size;
        /* Where the cycle or the gap is, and the largest it can hold. */
        size_t word = n == IPU_XROW_REPEAT_SIZE ? 0 : 4;
        uint32_t most = n == IPU_XROW_SIZE ? UINT32_MAX : n == IPU_XROW_CONTINUED_SIZE ? 0xFFFF : 0xFF;
        uint32_t field = ipu_load_u32(at + word) & most;
        if (row.op == IPU_XROW_SEND && n == IPU_XROW_SIZE &&
            ipu_low_take_inject(&A->prog->inject, IPU_INJECT_SEND_OFFSET_WORD))
            ipu_store_u32(at + 12, row.address + 4);
        if (row.op == IPU_XROW_RECV && field < most &&
            ipu_low_take_inject(&A->prog->inject, IPU_INJECT_RECEIVE_CYCLE_LATE))
            ipu_store_u32(at + word, ipu_load_u32(at + word) + 1);
    }
    return IPU_OK;
}

/* Append a progression patch (target word, a, b: format.h) to a patch list. */
static void add_progression(uint8_t *list, uint32_t target, uint32_t a, uint32_t b)
{
    uint8_t *e = list + 4 + (size_t)ipu_load_u32(list) * IPU_PATCH_SIZE;
    ipu_store_u32(e, IPU_PATCH_PROGRESSION);
    ipu_store_u32(e + 4, target);
    ipu_store_u32(e + 8, a);
    ipu_store_u32(e + 12, b);
    ipu_store_u32(list, ipu_load_u32(list) + 1);
}

static uint32_t resolve(const ipu_low_program *prog, const ipu_low_arg *a)
{
    return a->buffer == IPU_LOW_LITERAL ? a->value : prog->buffers[a->buffer].address + a->value;
}

/* Which entry points the program calls, how often, on how many tiles, and
 * (GEMMs) in which modes: the kernel inventory the package records. */
static json_t *kernel_inventory(const ipu_low_program *prog)
{
    json_t *out = json_object();
    uint64_t calls[IPU_K_ENTRY_END] = {0};
    int modes[IPU_K_ENTRY_END] = {0}; /* bit 0 initialize, bit 1 accumulate */
    for (size_t k = 0; k < prog->kernel_count; k++) {
        const ipu_low_kernel *kn = &prog->kernels[k];
        calls[kn->entry]++;
        int mode_arg = ipu_kernel_mode_arg(kn->entry);
        if (mode_arg >= 0)
            modes[kn->entry] |= (kn->args[mode_arg].value & IPU_GEMM_ACCUMULATE) ? 2 : 1;
    }
    for (int e = 1; e < IPU_K_ENTRY_END; e++) {
        if (!calls[e])
            continue;
        json_t *m = json_array();
        if (modes[e] & 1)
            json_array_append_new(m, json_string("initialize"));
        if (modes[e] & 2)
            json_array_append_new(m, json_string("accumulate"));
        json_object_set_new(out, ipu_kernel_name(e),
                            json_pack("{s:I, s:I, s:o}", "calls", (json_int_t)calls[e],
                                      "supervisor_bytes", (json_int_t)ipu_kernel_supervisor_size(e),
                                      "modes", m));
    }
    return out;
}

/* Where the parameters live (tile, address, size, buffer name and the op
 * that reads them, columnar): a resident run checks that these bytes never
 * change after the upload and names the first range that did. */
static json_t *parameter_ranges(const ipu_low_program *prog)
{
    json_t *tile = json_array(), *address = json_array(), *size = json_array(), *name = json_array(),
           *op = json_array();
    for (size_t b = 0; b < prog->buffer_count; b++) {
        const ipu_low_buffer *buf = &prog->buffers[b];
        if (!buf->persistent)
            continue;
        uint32_t reader = buf->tensor < prog->tensor_count ? prog->tensors[buf->tensor].homing_op : IPU_LOW_LITERAL;
        char label[160] = "";
        if (reader < prog->op_count)
            snprintf(label, sizeof label, "op %u %s %s", reader, prog->ops[reader].kind, prog->ops[reader].name);
        json_array_append_new(tile, json_integer(buf->tile));
        json_array_append_new(address, json_integer(buf->address));
        json_array_append_new(size, json_integer(buf->size));
        json_array_append_new(name, json_string(buf->name));
        json_array_append_new(op, json_string(label));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o}", "tile", tile, "address", address, "size", size, "name",
                     name, "op", op);
}

/* What a buffer holds, as the package's allocation table says it. */
static uint32_t alloc_kind(const ipu_low_buffer *b)
{
    if (b->aperture)
        return IPU_ALLOC_HOST_STAGING;
    if (b->persistent)
        return IPU_ALLOC_PARAMETER;
    switch (b->kind) {
    case IPU_LOW_OPERAND: return IPU_ALLOC_OPERAND_COPY;
    case IPU_LOW_STAGING: return IPU_ALLOC_STAGING;
    case IPU_LOW_SCRATCH: return IPU_ALLOC_SCRATCH;
    default: return IPU_ALLOC_ACTIVATION;
    }
}

/* Every buffer's allocation: its address, owner tensor, compiler op, kind,
 * shape (lower/shape.c: a layout block's rows x columns and element type,
 * else its payload bytes) and lifetime in program phases (parameters for
 * ever). */
static ipu_status add_allocations(assembly *A, ipu_pkg_builder *b)
{
    ipu_low_program *prog = A->prog;
    ipu_status status = IPU_OK;
    for (size_t i = 0; i < prog->buffer_count && status == IPU_OK; i++) {
        const ipu_low_buffer *buf = &prog->buffers[i];
        const char *tensor = buf->tensor < prog->tensor_count ? prog->tensors[buf->tensor].name : NULL;
        char shape[IPU_LOW_SHAPE_MAX];
        ipu_low_buffer_shape(prog, buf, shape, sizeof shape);
        ipu_pkg_alloc_def def = {buf->tile,
                                 buf->address,
                                 buf->size,
                                 buf->name,
                                 tensor,
                                 buf->persistent ? 0 : A->phase[buf->first],
                                 buf->persistent ? IPU_LIFE_FOREVER : A->phase[buf->last],
                                 buf->op,
                                 alloc_kind(buf),
                                 shape};
        if (!buf->persistent && !A->prog->steps[buf->first].init) {
            if (def.size > 8 && ipu_low_take_inject(&A->prog->inject, IPU_INJECT_ALLOCATION_SIZE_SHORT))
                def.size -= 8;
            if (def.first < def.last && ipu_low_take_inject(&A->prog->inject, IPU_INJECT_ALLOCATION_STARTS_LATE))
                def.first++;
        }
        status = ipu_pkg_define_alloc(b, &def);
    }
    return status;
}

/* Every op's output blocks, at their placed addresses, readable after the
 * phase of the op's last step. */
static ipu_status add_captures(assembly *A, ipu_pkg_builder *b)
{
    const ipu_low_program *prog = A->prog;
    ipu_status status = IPU_OK;
    for (size_t i = 0; i < prog->capture_count && status == IPU_OK; i++) {
        const ipu_low_capture *c = &prog->captures[i];
        const ipu_low_buffer *buf = &prog->buffers[c->buffer];
        uint32_t step = c->step;
        ipu_pkg_capture capture = {c->op,    A->phase[step], buf->tile, buf->address, c->stride,
                                   c->row_lo, c->row_hi,            c->col_lo, c->col_hi};
        /* Injected: a capture names the op after the one whose output it reads. */
        if (c->op + 1 < prog->op_count && ipu_low_take_inject(&A->prog->inject, IPU_INJECT_CAPTURE_NEXT_OP))
            capture.op++;
        status = ipu_pkg_add_capture(b, &capture);
    }
    return status;
}

/* The plan's attention mode per attention and MAP pooling op ({"3":
 * "flash"}): a device-precision reference of this package computes them the
 * same way. */
static json_t *attention_modes(const ipu_low_program *prog)
{
    json_t *out = json_object();
    for (size_t i = 0; out && i < prog->op_count; i++) {
        char key[24];
        snprintf(key, sizeof key, "%zu", i);
        if (prog->ops[i].attention[0])
            json_object_set_new(out, key, json_string(prog->ops[i].attention));
    }
    return out;
}

/* The bounds as a JSON array (bounds[0..parts]). */
static json_t *bounds_json(const uint32_t *bounds, uint32_t parts)
{
    json_t *out = json_array();
    for (uint32_t i = 0; out && i <= parts; i++)
        json_array_append_new(out, json_integer(bounds[i]));
    return out;
}

/* Each materialized attention's query bands and each split flash attention's
 * key bands: {"<op>": [bounds in an image]}. */
static json_t *attention_bands(const ipu_low_program *prog)
{
    json_t *out = json_object();
    for (size_t i = 0; out && i < prog->op_count; i++) {
        char key[24];
        snprintf(key, sizeof key, "%zu", i);
        if (prog->ops[i].attention_bands)
            json_object_set_new(out, key, bounds_json(prog->ops[i].attention_bounds, prog->ops[i].attention_bands));
    }
    return out;
}

/* Each matmul's blocks: {"<op>": {"row_blocks", "col_bounds", "k_bounds",
 * "row_bounds"}} (the device's GEMM shapes, reduction parts and the output's
 * row bands), for a reference that computes them as the device does. */
static json_t *matmul_blocks(const ipu_low_program *prog)
{
    json_t *out = json_object();
    for (size_t i = 0; out && i < prog->op_count; i++) {
        const ipu_low_op *op = &prog->ops[i];
        if (!op->row_block_count)
            continue;
        char key[24];
        snprintf(key, sizeof key, "%zu", i);
        json_object_set_new(out, key,
                            json_pack("{s:o, s:o, s:o, s:o}", "row_blocks",
                                      bounds_json(op->row_blocks, op->row_block_count), "col_bounds",
                                      bounds_json(op->col_bounds, op->col_block_count), "k_bounds",
                                      bounds_json(op->k_bounds, op->parts), "row_bounds",
                                      bounds_json(op->row_bounds, op->row_block_count * op->parts)));
    }
    return out;
}

/* Pass 2: encode every step's records and the control programs. */
static ipu_status encode(assembly *A, ipu_pkg_builder *b, uint32_t *stream_ids, uint8_t **patches,
                         uint32_t *patch_count)
{
    ipu_low_program *prog = A->prog;
    ipu_buf rec = {0};
    ipu_status status = IPU_OK;
    size_t repeat_op = 0;
    uint32_t patch_slot = IPU_NO_SLOT;
    int any_patch = 0;
    for (uint32_t t = 0; t < A->tiles; t++)
        any_patch |= patch_count[t] != 0;
    if (any_patch)
        patch_slot = ipu_pkg_new_slot(b);
    for (size_t s = 0; s < prog->step_count && status == IPU_OK; s++) {
        if ((status = IPU_CHECK_CANCEL(A->ctx)) != IPU_OK)
            break;
        ipu_low_step *step = &prog->steps[s];
        int init = step->init;
        int in_body = !init && s >= prog->repeat_first && s < prog->repeat_first + prog->repeat_count;
        if (!init && prog->repeat_count && s == prog->repeat_first) {
            repeat_op = ipu_pkg_program_length(b, 0);
            ipu_pkg_set_origin(b, IPU_NO_OP, IPU_NO_OP);
            status = ipu_pkg_emit(b, 0, IPU_OP_REPEAT, prog->repeat_iterations, 1, patch_slot);
        }
        uint32_t slot = ipu_pkg_new_slot(b);
        if (step->kind == IPU_LOW_EXCHANGE) {
            ipu_xphase *ph = &A->xprog->phases[s];
            size_t d = 0;
            for (uint32_t n = 0; n < ph->count; n++) {
                const ipu_low_xfer *x = &prog->xfers[step->first + n];
                ph->xfers[n].src_address = prog->buffers[x->src_buffer].address + x->src_offset;
                for (uint32_t k = 0; k < x->dst_count; k++, d++) {
                    const ipu_low_xdst *q = &prog->xdsts[x->first_dst + k];
                    ph->dsts[d].address = prog->buffers[q->buffer].address + q->offset;
                }
            }
            ipu_xtables tables = {0};
            if (status == IPU_OK)
                status = ipu_exchange_encode(A->ctx, A->p, ph, &tables);
            for (uint32_t t = 0; t < A->tiles && status == IPU_OK; t++) {
                uint8_t *table = tables.data + tables.offset[t];
                size_t size = tables.offset[t + 1] - tables.offset[t];
                if (!size)
                    continue;
                if (!init)
                    status = inject_rows(A, table, size);
                uint32_t where = 0;
                if (status == IPU_OK)
                    status = ipu_pkg_put_slot(b, t, slot, table, size, &where);
                relocation *r = &A->relocation[s];
                size_t first = tables.patch_offset[t], n = tables.patch_offset[t + 1] - first;
                for (size_t k = 0; k < n && status == IPU_OK; k++)
                    add_progression(patches[t], where + tables.patches[first + k].at, tables.patches[first + k].a,
                                    tables.patches[first + k].b);
                r->based_tiles += tables.based[t];
                r->patched_tiles += n && !tables.based[t];
                r->patches += (uint32_t)n;
                r->most = n > r->most ? (uint32_t)n : r->most;
            }
            for (uint32_t n = 0; n < ph->count; n++)
                A->relocation[s].rows += ph->xfers[n].src_advance != 0;
            ipu_xtables_free(&tables);
            /* The exchange half of the compute step just before it, where the phases say so. */
            size_t len = ipu_pkg_program_length(b, init);
            if (status == IPU_OK && s && A->phase[s] == A->phase[s - 1] + 1) {
                ipu_pkg_set_op_b(b, init, len - 1, slot);
                ipu_pkg_set_op_exchange_origin(b, init, len - 1, step->origin);
            } else if (status == IPU_OK) {
                ipu_pkg_set_origin(b, IPU_NO_OP, step->origin);
                status = ipu_pkg_emit(b, init, IPU_OP_STEP, IPU_NO_SLOT, slot, 0);
            }
        } else {
            uint32_t *start = A->layout->tile_start[s], *items = A->layout->by_tile[s];
            for (uint32_t t = 0; t < A->tiles && status == IPU_OK; t++) {
                if (start[t] == start[t + 1])
                    continue;
                rec.size = 0;
                status = ipu_buf_append_u32(A->ctx, &rec, start[t + 1] - start[t]);
                /* Word offsets of advancing arguments, patched after the put. */
                uint32_t marks[64][2], mark_count = 0;
                for (uint32_t i = start[t]; i < start[t + 1] && status == IPU_OK; i++) {
                    if (step->kind == IPU_LOW_COMPUTE) {
                        const ipu_low_kernel *k = &prog->kernels[items[i]];
                        status = ipu_buf_append_u32(A->ctx, &rec, (uint32_t)k->entry | k->argc << 16);
                        for (uint32_t a = 0; a < k->argc && status == IPU_OK; a++) {
                            if (in_body && k->advance_arg == (int32_t)a) {
                                if (mark_count == 64) {
                                    status = IPU_FAIL(A->ctx, IPU_ERR_INTERNAL,
                                                      "more than 64 advancing arguments in one "
                                                      "compute list of tile %u",
                                                      t);
                                    break;
                                }
                                marks[mark_count][0] = (uint32_t)rec.size;
                                marks[mark_count++][1] =
                                    k->advance + (ipu_low_take_inject(&prog->inject, IPU_INJECT_PATCH_STRIDE_WRONG) ? 4 : 0);
                            }
                            status = ipu_buf_append_u32(A->ctx, &rec, resolve(prog, &k->args[a]));
                        }
                    } else {
                        /* A strided entry (format.h): stream, stream offset, tile
                         * address, row bytes, rows, stream stride, tile stride, 0. */
                        const ipu_low_host *h = &prog->hosts[items[i]];
                        if (h->stream_offset > 0xFFFFFFFFull) {
                            status = IPU_FAIL(A->ctx, IPU_ERR_INVALID_ARGUMENT,
                                              "host stream '%s': offset %llu does not fit a host "
                                              "entry's 32-bit stream offset",
                                              prog->streams[h->stream].name,
                                              (unsigned long long)h->stream_offset);
                            break;
                        }
                        const uint32_t words[IPU_HOST_ENTRY_SIZE / 4] = {
                            stream_ids[h->stream],
                            (uint32_t)h->stream_offset,
                            prog->buffers[h->buffer].address + h->offset,
                            h->bytes,
                            h->rows,
                            h->stream_stride,
                            h->tile_stride,
                            0};
                        for (uint32_t w = 0; w < IPU_HOST_ENTRY_SIZE / 4 && status == IPU_OK; w++)
                            status = ipu_buf_append_u32(A->ctx, &rec, words[w]);
                    }
                }
                uint32_t where = 0;
                if (status == IPU_OK)
                    status = ipu_pkg_put_slot(b, t, slot, rec.data, rec.size, &where);
                for (uint32_t m = 0; m < mark_count && status == IPU_OK; m++)
                    add_progression(patches[t], where + marks[m][0], ipu_load_u32(rec.data + marks[m][0]),
                                    marks[m][1]);
            }
            ipu_pkg_set_origin(b, step->origin, IPU_NO_OP);
            if (status == IPU_OK && step->kind == IPU_LOW_COMPUTE)
                status = ipu_pkg_emit(b, init, IPU_OP_STEP, slot, IPU_NO_SLOT, 0);
            else if (status == IPU_OK)
                status = ipu_pkg_emit(b, init,
                                      step->kind == IPU_LOW_HOST_IN ? IPU_OP_HOST_IN : IPU_OP_HOST_OUT,
                                      slot, 0, 0);
        }
        if (status == IPU_OK && !init && prog->repeat_count && s + 1 == prog->repeat_first + prog->repeat_count)
            ipu_pkg_set_op_b(b, 0, repeat_op, (uint32_t)(ipu_pkg_program_length(b, 0) - repeat_op - 1));
        /* The builder refusing a record this step made (an area the layout sized too small): named by step and op. */
        if (status == IPU_ERR_INVALID_ARGUMENT && step->op < prog->op_count)
            status = IPU_INCONSISTENT(A->ctx, "package", "the records of step %zu (op %u %s %s)", s, step->op,
                                      prog->ops[step->op].kind, prog->ops[step->op].name);
    }
    for (uint32_t t = 0; t < A->tiles && status == IPU_OK && any_patch; t++)
        if (patch_count[t])
            status = ipu_pkg_put_slot(b, t, patch_slot, patches[t],
                                      4 + (size_t)patch_count[t] * IPU_PATCH_SIZE, NULL);
    ipu_buf_free(&rec);
    return status;
}

/* Tile t's accessible SRAM above the runtime state less its code and its
 * descriptors, which placement keeps free (the aperture counts: transient
 * tensors may borrow it). */
static uint32_t tile_tensor_bytes(const ipu_profile *p, const ipu_package_layout *layout, uint32_t t)
{
    uint64_t accessible = ipu_profile_access_end(p) - p->sram_base - p->runtime_state_bytes;
    uint64_t reserved = (layout->code_base - p->sram_base - p->runtime_state_bytes) +
                        code_bytes(layout->code_entries[t]) + layout->desc_sizes[t];
    return reserved < accessible ? (uint32_t)(accessible - reserved) : 0;
}

/* The device's tensor bytes: the fewest any tile has. */
static uint32_t tensor_bytes_available(const ipu_profile *p, const ipu_package_layout *layout)
{
    uint32_t least = UINT32_MAX;
    for (uint32_t t = 0; t < p->tiles; t++) {
        uint32_t bytes = tile_tensor_bytes(p, layout, t);
        least = bytes < least ? bytes : least;
    }
    return least;
}

void ipu_package_layout_free(ipu_package_layout *l)
{
    for (size_t s = 0; l->by_tile && s < l->step_count; s++)
        free(l->by_tile[s]);
    for (size_t s = 0; l->tile_start && s < l->step_count; s++)
        free(l->tile_start[s]);
    free(l->by_tile), free(l->tile_start);
    free(l->desc_bytes), free(l->xtable_bytes), free(l->code_entries), free(l->patch_count), free(l->desc_sizes);
    memset(l, 0, sizeof *l);
}

ipu_status ipu_package_lay_out(ipu_ctx *ctx, ipu_low_program *prog, const ipu_xprogram *xprog,
                               ipu_package_layout *out, ipu_support_map *support)
{
    const ipu_profile *p = &prog->profile;
    memset(out, 0, sizeof *out);
    size_t steps = prog->step_count ? prog->step_count : 1;
    uint32_t tiles = p->tiles;
    out->step_count = prog->step_count;
    out->desc_bytes = ipu_calloc(ctx, tiles, sizeof *out->desc_bytes);
    out->code_entries = ipu_calloc(ctx, tiles, sizeof *out->code_entries);
    out->by_tile = ipu_calloc(ctx, steps, sizeof *out->by_tile);
    out->tile_start = ipu_calloc(ctx, steps, sizeof *out->tile_start);
    out->patch_count = ipu_calloc(ctx, tiles, sizeof *out->patch_count);
    out->desc_sizes = ipu_calloc(ctx, tiles, sizeof *out->desc_sizes); /* descriptors, patches, slot table */
    out->xtable_bytes = ipu_calloc(ctx, tiles, sizeof *out->xtable_bytes);
    assembly A = {ctx, prog, xprog, p, tiles, out, NULL, NULL};
    ipu_status status = out->desc_bytes && out->code_entries && out->by_tile && out->tile_start &&
                                out->patch_count && out->desc_sizes && out->xtable_bytes
                            ? IPU_OK
                            : IPU_NO_MEMORY(ctx);
    uint64_t *bytes = ipu_malloc(ctx, tiles * sizeof *bytes);
    uint32_t *patches = ipu_malloc(ctx, tiles * sizeof *patches);
    if (status == IPU_OK && (!bytes || !patches))
        status = IPU_NO_MEMORY(ctx);
    if (status == IPU_OK)
        status = size_records(&A, out, bytes, patches);
    free(bytes), free(patches);
    /* Support first: code after the runtime state, descriptors after the aperture. */
    out->code_base = (p->sram_base + p->runtime_state_bytes + 63u) & ~63u;
    out->slots = (uint32_t)prog->step_count + 1;
    for (uint32_t t = 0; t < tiles && status == IPU_OK; t++) {
        uint32_t code = code_bytes(out->code_entries[t]);
        out->code_max = code > out->code_max ? code : out->code_max;
        /* Injected: the first tile with exchange tables leaves them out of its area. */
        uint64_t tables = out->xtable_bytes[t] && ipu_low_take_inject(&prog->inject, IPU_INJECT_DESCRIPTOR_AREA_SHORT)
                              ? 0 : out->xtable_bytes[t];
        uint64_t desc = out->desc_bytes[t] + tables + 4 + (uint64_t)out->patch_count[t] * IPU_PATCH_SIZE +
                        4ull * out->slots;
        out->desc_max = desc > out->desc_max ? desc : out->desc_max;
        out->desc_sizes[t] = desc < UINT32_MAX ? (uint32_t)desc : UINT32_MAX;
    }
    out->code_end = out->code_base + out->code_max;
    out->desc_base = p->aperture_end;
    uint64_t desc_limit = (out->desc_base + out->desc_max + 15) & ~15ull;
    out->desc_limit = desc_limit < UINT32_MAX ? (uint32_t)desc_limit : UINT32_MAX;
    if (support && status == IPU_OK) {
        support->code_base = out->code_base;
        support->descriptor_base = out->desc_base;
        for (uint32_t t = 0; t < tiles; t++) {
            support->code_end[t] = out->code_base + code_bytes(out->code_entries[t]);
            support->descriptor_end[t] = out->desc_base + out->desc_sizes[t];
            support->exchange_table_bytes[t] = (uint32_t)out->xtable_bytes[t];
        }
        support->tensor_bytes_available = tensor_bytes_available(p, out);
    }
    if (status == IPU_OK && (out->code_end > p->aperture_base || desc_limit > ipu_profile_access_end(p)))
        status = IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                          "package support does not fit: %u bytes of kernel code (room for %u) and "
                          "%llu bytes of descriptors per tile",
                          out->code_max, p->aperture_base - out->code_base, (unsigned long long)out->desc_max);
    if (status != IPU_OK)
        ipu_package_layout_free(out);
    return status;
}

/* What the support takes from each tile and what it leaves the tensors:
 * per tile its code span, generated program bytes (compute lists, host
 * descriptors, the Repeat's patches, the slot table) and exchange-table
 * bytes; the largest of each; and the tensor bytes available. */
static json_t *support_breakdown(const ipu_low_program *prog, const ipu_package_layout *layout)
{
    const ipu_profile *p = &prog->profile;
    json_t *code = json_array(), *program = json_array(), *tables = json_array(), *tensors = json_array();
    uint64_t program_max = 0, table_max = 0;
    for (uint32_t t = 0; t < p->tiles; t++) {
        uint64_t table = layout->xtable_bytes[t], generated = layout->desc_sizes[t] - table;
        program_max = generated > program_max ? generated : program_max;
        table_max = table > table_max ? table : table_max;
        json_array_append_new(code, json_integer(code_bytes(layout->code_entries[t])));
        json_array_append_new(program, json_integer((json_int_t)generated));
        json_array_append_new(tables, json_integer((json_int_t)table));
        json_array_append_new(tensors, json_integer(tile_tensor_bytes(p, layout, t)));
    }
    return json_pack("{s:I, s:I, s:I, s:{s:o, s:o, s:o, s:o}}", "program_bytes", (json_int_t)program_max,
                     "exchange_table_bytes", (json_int_t)table_max, "tensor_bytes_available",
                     (json_int_t)tensor_bytes_available(p, layout), "per_tile", "code_bytes", code, "program_bytes",
                     program, "exchange_table_bytes", tables, "tensor_bytes_available", tensors);
}

/* Per Repeat body exchange with advancing sources, its program phase (the
 * control op's exchange half: init ops first), op and relocation: eligible
 * when every sending tile moves them by OUTGOING_BASE. */
static json_t *relocation_audit(const assembly *A)
{
    json_t *phases = json_array();
    uint32_t most = 0, patches = 0, rows = 0;
    for (size_t s = 0; phases && s < A->prog->step_count; s++) {
        const relocation *r = &A->relocation[s];
        if (!r->rows)
            continue;
        uint64_t phase = A->phase[s];
        json_array_append_new(phases, json_pack("{s:I, s:s, s:b, s:I, s:I, s:I, s:I, s:I}", "phase",
                                                (json_int_t)phase, "op", A->prog->steps[s].label, "eligible",
                                                r->patched_tiles == 0, "based_tiles", (json_int_t)r->based_tiles,
                                                "patched_tiles", (json_int_t)r->patched_tiles,
                                                "source_word_patches", (json_int_t)r->patches,
                                                "max_per_tile", (json_int_t)r->most, "advancing_send_rows",
                                                (json_int_t)r->rows));
        most = r->most > most ? r->most : most;
        patches += r->patches, rows += r->rows;
    }
    return phases ? json_pack("{s:o, s:I, s:I, s:I}", "phases", phases, "source_word_patches", (json_int_t)patches,
                              "max_per_tile", (json_int_t)most, "advancing_send_rows", (json_int_t)rows)
                  : NULL;
}

ipu_status ipu_package_encode(ipu_ctx *ctx, ipu_low_program *prog, ipu_xprogram *xprog,
                              const ipu_package_layout *layout, json_t *meta, const ipu_assembly_record *records,
                              size_t record_count, ipu_package **out, json_t **report)
{
    const ipu_profile *p = &prog->profile;
    size_t steps = prog->step_count ? prog->step_count : 1;
    assembly A = {ctx, prog, xprog, p, p->tiles, layout, NULL, NULL};
    A.phase = ipu_calloc(ctx, steps, sizeof *A.phase);
    if (A.phase)
        ipu_low_step_phases(prog, A.phase);
    A.relocation = ipu_calloc(ctx, steps, sizeof *A.relocation);
    uint8_t **patches = ipu_calloc(ctx, A.tiles, sizeof *patches);
    uint32_t *stream_ids = ipu_calloc(ctx, prog->stream_count ? prog->stream_count : 1, sizeof *stream_ids);
    ipu_pkg_builder *b = NULL;
    ipu_status status =
        A.phase && A.relocation && patches && stream_ids ? IPU_OK : IPU_NO_MEMORY(ctx);
    for (uint32_t t = 0; t < A.tiles && status == IPU_OK; t++)
        if (!(patches[t] = ipu_calloc(ctx, 1, 4 + (size_t)layout->patch_count[t] * IPU_PATCH_SIZE)))
            status = IPU_NO_MEMORY(ctx);
    if (status == IPU_OK)
        status = ipu_pkg_builder_create(ctx, p, layout->code_base, layout->desc_base, layout->desc_limit, &b);
    if (status == IPU_OK)
        status = ipu_pkg_reserve_descriptors(b, layout->desc_sizes);
    for (uint32_t t = 0; t < A.tiles && status == IPU_OK; t++)
        for (int e = 1; e < IPU_K_ENTRY_END && status == IPU_OK; e++)
            if ((layout->code_entries[t] & (1ull << e)) &&
                !ipu_low_take_inject(&prog->inject, IPU_INJECT_MISSING_KERNEL_CODE))
                status = ipu_pkg_add_code(b, t, e);
    for (size_t i = 0; i < prog->stream_count && status == IPU_OK; i++)
        status = ipu_pkg_add_stream(b, prog->streams[i].name, prog->streams[i].direction,
                                    prog->streams[i].size, &stream_ids[i]);
    uint64_t record_bytes = 0;
    for (size_t r = 0; r < record_count; r++)
        record_bytes += records[r].size + 8;
    if (status == IPU_OK)
        status = ipu_pkg_reserve_data(b, record_bytes);
    for (size_t r = 0; r < record_count && status == IPU_OK; r++) {
        if ((status = IPU_CHECK_CANCEL(ctx)) != IPU_OK)
            break;
        size_t i = 0;
        while (i < prog->stream_count && strcmp(prog->streams[i].name, records[r].stream))
            i++;
        uint8_t *dst = NULL;
        status = i == prog->stream_count
                     ? IPU_FAIL(ctx, IPU_ERR_INTERNAL, "record for unknown stream '%s'", records[r].stream)
                     : ipu_pkg_add_record_space(b, records[r].kind, stream_ids[i], 0, records[r].size, &dst);
        if (status == IPU_OK)
            status = records[r].fill(ctx, records[r].source, dst);
    }
    for (size_t i = 0; i < prog->op_count && status == IPU_OK; i++)
        status = ipu_pkg_add_compiler_op(b, prog->ops[i].kind, prog->ops[i].name);
    if (status == IPU_OK)
        status = encode(&A, b, stream_ids, patches, layout->patch_count);
    json_t *audit = status == IPU_OK && report ? relocation_audit(&A) : NULL;
    if (status == IPU_OK)
        status = add_allocations(&A, b);
    if (status == IPU_OK)
        status = add_captures(&A, b);
    uint64_t horizon = 0;
    for (size_t s = 0; s < prog->step_count; s++)
        horizon += xprog->phases[s].horizon;
    json_t *inventory = status == IPU_OK ? kernel_inventory(prog) : NULL;
    if (status == IPU_OK && meta) {
        json_object_set(meta, "kernels", inventory);
        json_object_set_new(meta, "parameters", parameter_ranges(prog));
        json_object_set_new(meta, "attention", attention_modes(prog));
        json_object_set_new(meta, "attention_bands", attention_bands(prog));
        json_object_set_new(meta, "matmuls", matmul_blocks(prog));
        json_t *tables = json_array();
        for (uint32_t t = 0; t < A.tiles; t++)
            json_array_append_new(tables, json_integer((json_int_t)layout->xtable_bytes[t]));
        json_object_set_new(meta, "exchange_table_bytes", tables);
    }
    if (status == IPU_OK) {
        ipu_pkg_set_meta(b, meta);
        meta = NULL;
        status = ipu_pkg_build(b, out);
        b = NULL;
    }
    if (status == IPU_OK && report) {
        *report = json_pack("{s:I, s:I, s:I, s:I, s:I, s:O}", "code_bytes", (json_int_t)layout->code_max,
                            "descriptor_bytes", (json_int_t)layout->desc_max, "tensor_base",
                            (json_int_t)layout->desc_limit, "exchange_horizon_cycles", (json_int_t)horizon,
                            "slots", (json_int_t)layout->slots, "kernels", inventory);
        json_object_update_missing_new(*report, support_breakdown(prog, layout));
        json_object_set(*report, "repeat_exchange", audit);
    }
    json_decref(audit);
    json_decref(inventory);
    json_decref(meta);
    ipu_pkg_builder_free(b);
    for (uint32_t t = 0; patches && t < A.tiles; t++)
        free(patches[t]);
    free(A.phase), free(A.relocation), free(patches), free(stream_ids);
    return status;
}
