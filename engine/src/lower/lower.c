/* lower.c: plan -> low program (see lower.h and program.h); matmuls,
 * LayerNorm and attention are lowered by matmul.c, norm.c and attention.c
 * (lowering.h).
 *
 * Every tensor block of a home layout is a buffer on its tile; a matmul's A
 * operand (and an add's second input) gets buffers of its own when its
 * layout differs from the home.
 * Buffers whose rows carry padding are cleared (FILL 0) in the compute phase
 * of the step that first writes them, so whole padded rows can be moved and
 * swept by vector kernels.  Steps are emitted in execution order; buffers
 * record the first and last step that touch them (lower_program says how
 * the Repeat body stretches them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/lowering.h"
#include "numerics/numerics.h"
#include "package/format.h"

ipu_low_step *low_current(lowering *L) { return &L->prog->steps[L->prog->step_count - 1]; }

ipu_status low_begin_step(lowering *L, int kind, const char *label)
{
    ipu_low_program *p = L->prog;
    IPU_TRY(IPU_GROW(L->ctx, p->steps, p->step_count, p->step_capacity));
    ipu_low_step *s = &p->steps[p->step_count++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->init = (uint8_t)L->init;
    s->op = L->op;
    s->origin = L->op;
    s->first = (uint32_t)(kind == IPU_LOW_COMPUTE    ? p->kernel_count
                          : kind == IPU_LOW_EXCHANGE ? p->xfer_count
                                                     : p->host_count);
    snprintf(s->label, sizeof s->label, "%.47s", label);
    return IPU_OK;
}

void low_use(lowering *L, uint32_t buffer)
{
    ipu_low_buffer *b = &L->prog->buffers[buffer];
    uint32_t step = (uint32_t)L->prog->step_count - 1;
    if (b->first == IPU_LOW_LITERAL || step < b->first)
        b->first = step;
    if (b->last == IPU_LOW_LITERAL || step > b->last)
        b->last = step;
}

ipu_status low_new_buffer(lowering *L, uint32_t tile, uint32_t size, uint32_t tensor, int padded,
                             int aperture, const char *name, uint32_t *id)
{
    ipu_low_program *p = L->prog;
    size_t old_capacity = p->buffer_capacity;
    IPU_TRY(IPU_GROW(L->ctx, p->buffers, p->buffer_count, p->buffer_capacity));
    if (p->buffer_capacity != old_capacity) {
        uint8_t *c = ipu_realloc(L->ctx, L->cleared, p->buffer_capacity);
        uint8_t *d = ipu_realloc(L->ctx, L->padded, p->buffer_capacity);
        if (c)
            L->cleared = c;
        if (d)
            L->padded = d;
        if (!c || !d)
            return IPU_NO_MEMORY(L->ctx);
    }
    ipu_low_buffer *b = &p->buffers[p->buffer_count];
    memset(b, 0, sizeof *b);
    b->tile = tile;
    b->size = (size + 7u) & ~7u;
    b->alignment = 8;
    b->first = b->last = IPU_LOW_LITERAL;
    b->tensor = tensor;
    b->alias = IPU_LOW_LITERAL;
    b->members = 1;
    b->payload = size;
    b->op = L->op;
    b->value = IPU_LOW_LITERAL;
    b->block = IPU_LOW_LITERAL;
    b->kind = IPU_LOW_SCRATCH;
    b->aperture = (uint8_t)aperture;
    snprintf(b->name, sizeof b->name, "%.55s", name);
    L->cleared[p->buffer_count] = 0;
    L->padded[p->buffer_count] = (uint8_t)padded;
    *id = (uint32_t)p->buffer_count++;
    return IPU_OK;
}

ipu_status low_emit_kernel(lowering *L, uint32_t tile, int entry, uint32_t argc,
                              const ipu_low_arg *args, int32_t advance_arg, uint32_t advance)
{
    ipu_low_program *p = L->prog;
    if (low_current(L)->kind != IPU_LOW_COMPUTE)
        IPU_TRY(low_begin_step(L, IPU_LOW_COMPUTE, low_current(L)->label));
    IPU_TRY(IPU_GROW(L->ctx, p->kernels, p->kernel_count, p->kernel_capacity));
    ipu_low_kernel *k = &p->kernels[p->kernel_count++];
    memset(k, 0, sizeof *k);
    k->tile = tile, k->entry = entry, k->argc = argc;
    memcpy(k->args, args, argc * sizeof *args);
    k->advance_arg = advance_arg, k->advance = advance;
    for (uint32_t a = 0; a < argc; a++)
        if (args[a].buffer != IPU_LOW_LITERAL)
            low_use(L, args[a].buffer);
    low_current(L)->count++;
    return IPU_OK;
}

/* Clear a padded buffer before the kernel or exchange that first writes it. */
ipu_status low_clear(lowering *L, uint32_t buffer)
{
    if (!L->padded[buffer] || L->cleared[buffer])
        return IPU_OK;
    L->cleared[buffer] = 1;
    if (ipu_low_take_inject(&L->prog->inject, IPU_INJECT_SKIP_PADDING_CLEAR))
        return IPU_OK;
    const ipu_low_buffer *b = &L->prog->buffers[buffer];
    ipu_low_arg args[] = {BUF(buffer, 0), LIT(b->size), LIT(0)};
    return low_emit_kernel(L, b->tile, IPU_K_FILL, 3, args, -1, 0);
}

ipu_status low_transfer(lowering *L, uint32_t from, uint32_t from_at, uint32_t bytes, uint32_t to, uint32_t to_at)
{
    ipu_low_program *p = L->prog;
    IPU_TRY(IPU_GROW(L->ctx, p->xfers, p->xfer_count, p->xfer_capacity));
    IPU_TRY(IPU_GROW(L->ctx, p->xdsts, p->xdst_count, p->xdst_capacity));
    p->xfers[p->xfer_count++] = (ipu_low_xfer){from, from_at, bytes, (uint32_t)p->xdst_count, 1, 0};
    p->xdsts[p->xdst_count++] = (ipu_low_xdst){to, to_at};
    low_use(L, from), low_use(L, to);
    low_current(L)->count++;
    return IPU_OK;
}

/* ---- buffers of layouts ------------------------------------------------ */

static size_t block_count(const ipu_layout *l)
{
    return (size_t)l->replicas * l->row_parts * l->col_parts;
}

static int is_padded(const ipu_layout *l, uint32_t j)
{
    uint32_t cols = l->col_bounds[j + 1] - l->col_bounds[j];
    return ipu_layout_stride(l, cols) != cols * l->elem;
}

/* The value a layout instance's blocks belong to. */
static ipu_status new_value(lowering *L, const ipu_layout *l, uint32_t tensor, uint32_t members, int kind,
                            const char *name, uint32_t *id)
{
    ipu_low_program *p = L->prog;
    IPU_TRY(IPU_GROW(L->ctx, p->values, p->value_count, p->value_capacity));
    ipu_low_value *v = &p->values[p->value_count];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%.63s", name);
    v->tensor = tensor;
    v->op = kind == IPU_LOW_TENSOR ? IPU_LOW_LITERAL : L->op;
    v->kind = (uint8_t)kind;
    v->members = members;
    v->rows = l->rows, v->cols = l->cols, v->elem = l->elem;
    v->row_parts = l->row_parts, v->col_parts = l->col_parts, v->replicas = l->replicas;
    /* The layout's elements are the tensor's (operand copies and staging
     * move its bytes unchanged). */
    v->dtype = tensor < L->g->tensor_count && ipu_dtype_size(L->g->tensors[tensor].dtype) == l->elem
                   ? L->g->tensors[tensor].dtype
                   : -1;
    p->value_count++;
    size_t blocks = block_count(l);
    v->row_bounds = ipu_malloc(L->ctx, (l->row_parts + 1) * sizeof(uint32_t));
    v->col_bounds = ipu_malloc(L->ctx, (l->col_parts + 1) * sizeof(uint32_t));
    v->tiles = ipu_malloc(L->ctx, blocks * sizeof(uint32_t));
    if (!v->row_bounds || !v->col_bounds || !v->tiles)
        return IPU_NO_MEMORY(L->ctx);
    memcpy(v->row_bounds, l->row_bounds, (l->row_parts + 1) * sizeof(uint32_t));
    memcpy(v->col_bounds, l->col_bounds, (l->col_parts + 1) * sizeof(uint32_t));
    memcpy(v->tiles, l->tiles, blocks * sizeof(uint32_t));
    *id = (uint32_t)p->value_count - 1;
    return IPU_OK;
}

ipu_status low_layout_buffers(lowering *L, const ipu_layout *l, uint32_t tensor, uint32_t members,
                              int kind, const char *name, uint32_t **out)
{
    uint32_t value = 0;
    IPU_TRY(new_value(L, l, tensor, members, kind, name, &value));
    uint32_t *ids = ipu_calloc(L->ctx, block_count(l), sizeof *ids);
    if (!ids)
        return IPU_NO_MEMORY(L->ctx);
    char label[64];
    for (uint32_t r = 0; r < l->replicas; r++)
        for (uint32_t i = 0; i < l->row_parts; i++)
            for (uint32_t j = 0; j < l->col_parts; j++) {
                size_t b = ((size_t)r * l->row_parts + i) * l->col_parts + j;
                if (l->tiles[b] == IPU_LAYOUT_ABSENT) {
                    ids[b] = IPU_LOW_LITERAL;
                    continue;
                }
                snprintf(label, sizeof label, "%.30s[%u,%u]%s", name, i, j, r ? "'" : "");
                ipu_status status = low_new_buffer(L, ipu_layout_tile(l, i, j, r),
                                               ipu_layout_block_bytes(l, i, j) * members, tensor,
                                               is_padded(l, j), 0, label, &ids[b]);
                if (status == IPU_OK) {
                    ipu_low_buffer *buf = &L->prog->buffers[ids[b]];
                    uint32_t r0, r1, c0, c1;
                    ipu_layout_block(l, i, j, &r0, &r1, &c0, &c1);
                    buf->members = members;
                    buf->payload = (r1 - r0) * (c1 - c0) * l->elem;
                    buf->value = value;
                    buf->block = (uint32_t)b;
                    buf->kind = (uint8_t)kind;
                }
                if (status != IPU_OK) {
                    free(ids);
                    return status;
                }
            }
    *out = ids;
    return IPU_OK;
}

/* ---- redistribution ---------------------------------------------------- */

/* The buffer of destination q: its block of its replica. */
static uint32_t dst_buffer(const ipu_layout *d, const uint32_t *ids, const ipu_piece_dst *q)
{
    return ids[(size_t)q->replica * d->row_parts * d->col_parts + q->block];
}

/* One step: local copies in its compute phase, transfers in its exchange. */
/* The bytes a source buffer moves on per Repeat iteration when the move
 * reads the current member of a sequence (0 when it does not). */
static uint32_t member_advance(const lowering *L, uint32_t buffer, int advancing)
{
    const ipu_low_buffer *b = &L->prog->buffers[buffer];
    return advancing && b->members > 1 ? b->size / b->members : 0;
}

static ipu_status move_pieces(lowering *L, const uint32_t *src, const ipu_layout *d,
                              const uint32_t *dst, const ipu_redistribution *rd, int advancing, const char *label)
{
    ipu_low_program *p = L->prog;
    ipu_status status = low_begin_step(L, IPU_LOW_COMPUTE, label);
    for (size_t n = 0; n < rd->copy_count && status == IPU_OK; n++) {
        const ipu_piece *c = &rd->copies[n];
        uint32_t to = dst_buffer(d, dst, &rd->dsts[c->first_dst]);
        uint32_t advance = member_advance(L, src[c->src_block], advancing);
        status = low_clear(L, to);
        ipu_low_arg args[] = {BUF(src[c->src_block], c->src_offset),
                              BUF(to, rd->dsts[c->first_dst].offset), LIT(c->bytes)};
        if (status == IPU_OK)
            status = low_emit_kernel(L, c->src_tile, IPU_K_COPY, 3, args, advance ? 0 : -1, advance);
    }
    /* Receivers' padding is cleared in the compute phase before the exchange. */
    for (size_t n = 0; n < rd->piece_count && status == IPU_OK; n++)
        for (uint32_t k = 0; k < rd->pieces[n].dst_count && status == IPU_OK; k++)
            status = low_clear(L, dst_buffer(d, dst, &rd->dsts[rd->pieces[n].first_dst + k]));
    if (status == IPU_OK && rd->piece_count) {
        status = low_begin_step(L, IPU_LOW_EXCHANGE, label);
        for (size_t n = 0; n < rd->piece_count && status == IPU_OK; n++) {
            const ipu_piece *c = &rd->pieces[n];
            status = IPU_GROW(L->ctx, p->xfers, p->xfer_count, p->xfer_capacity);
            if (status != IPU_OK)
                break;
            p->xfers[p->xfer_count++] = (ipu_low_xfer){src[c->src_block], c->src_offset, c->bytes,
                                                        (uint32_t)p->xdst_count, c->dst_count,
                                                        member_advance(L, src[c->src_block], advancing)};
            low_use(L, src[c->src_block]);
            for (uint32_t k = 0; k < c->dst_count && status == IPU_OK; k++) {
                const ipu_piece_dst *q = &rd->dsts[c->first_dst + k];
                status = IPU_GROW(L->ctx, p->xdsts, p->xdst_count, p->xdst_capacity);
                if (status == IPU_OK) {
                    uint32_t to = dst_buffer(d, dst, q);
                    p->xdsts[p->xdst_count++] = (ipu_low_xdst){to, q->offset};
                    low_use(L, to);
                }
            }
            low_current(L)->count++;
        }
    }
    return status;
}

/* A row-by-row move that gives some tile more exchange rows than this goes
 * through a staging layout, when that at least halves the busiest tile's
 * rows (exchange tables are tile memory). */
#define STAGE_ROWS 256u

ipu_status low_redistribute(lowering *L, const ipu_layout *s, const uint32_t *src,
                            const ipu_layout *d, const uint32_t *dst, const char *label)
{
    return low_redistribute_from(L, s, src, 0, d, dst, label);
}

ipu_status low_redistribute_from(lowering *L, const ipu_layout *s, const uint32_t *src, int advancing,
                                 const ipu_layout *d, const uint32_t *dst, const char *label)
{
    ipu_redistribution rd, hop1 = {0}, hop2 = {0};
    IPU_TRY(ipu_redistribute(L->ctx, s, d, &rd));
    uint32_t tiles = L->plan->profile.tiles, busiest = 0, b1 = 0, b2 = 0;
    ipu_status status = ipu_redistribution_busiest(L->ctx, &rd, tiles, &busiest);
    int staged = 0;
    ipu_layout t = {0};
    if (status == IPU_OK && busiest > STAGE_ROWS) {
        status = ipu_staging_layout(L->ctx, d, tiles, &t);
        if (status == IPU_OK)
            status = ipu_redistribute(L->ctx, s, &t, &hop1);
        if (status == IPU_OK)
            status = ipu_redistribute(L->ctx, &t, d, &hop2);
        if (status == IPU_OK)
            status = ipu_redistribution_busiest(L->ctx, &hop1, tiles, &b1);
        if (status == IPU_OK)
            status = ipu_redistribution_busiest(L->ctx, &hop2, tiles, &b2);
        staged = status == IPU_OK && 2 * (uint64_t)(b1 > b2 ? b1 : b2) <= busiest;
    }
    if (status == IPU_OK && staged) {
        uint32_t *ids = NULL, tensor = IPU_LOW_LITERAL;
        for (size_t b = 0; b < block_count(d) && tensor == IPU_LOW_LITERAL; b++)
            if (d->tiles[b] != IPU_LAYOUT_ABSENT)
                tensor = L->prog->buffers[dst[b]].tensor;
        char name[64];
        snprintf(name, sizeof name, "%.40s.staging",
                 tensor != IPU_LOW_LITERAL ? L->g->tensors[tensor].name : "exchange");
        status = low_layout_buffers(L, &t, tensor, 1, IPU_LOW_STAGING, name, &ids);
        if (status == IPU_OK)
            status = move_pieces(L, src, &t, ids, &hop1, advancing, label);
        if (status == IPU_OK)
            status = move_pieces(L, ids, d, dst, &hop2, 0, label);
        free(ids);
    } else if (status == IPU_OK) {
        status = move_pieces(L, src, d, dst, &rd, advancing, label);
    }
    ipu_layout_free(&t);
    ipu_redistribution_free(&rd);
    ipu_redistribution_free(&hop1);
    ipu_redistribution_free(&hop2);
    return status;
}

/* Tensor's buffers on operand layout l of op index (kept in its operand
 * slot), brought over in one step from src's blocks (buffers src_ids). */
static ipu_status operand_from(lowering *L, size_t index, int slot, uint32_t tensor, const ipu_layout *src,
                               const uint32_t *src_ids, const ipu_layout *l, const char *label, const uint32_t **ids)
{
    uint32_t **own = &L->operands[index][slot];
    if (!*own) {
        char name[64];
        snprintf(name, sizeof name, "%.40s@op%zu", L->g->tensors[tensor].name, index);
        IPU_TRY(low_layout_buffers(L, l, tensor, 1, IPU_LOW_OPERAND, name, own));
    }
    IPU_TRY(low_redistribute(L, src, src_ids, l, *own, label));
    *ids = *own;
    return IPU_OK;
}

ipu_status low_operand(lowering *L, size_t index, int slot, uint32_t tensor, const ipu_layout *l,
                       const char *label, const uint32_t **ids)
{
    if (!l->tiles) {
        *ids = low_home_ids(L, tensor);
        return IPU_OK;
    }
    return operand_from(L, index, slot, tensor, &L->plan->home[tensor], low_home_ids(L, tensor), l, label, ids);
}

ipu_status low_current_member(lowering *L, size_t index, int slot, const ipu_layout *l, const char *label,
                              const uint32_t **ids)
{
    const ipu_ir_op *op = &L->g->ops[index];
    uint32_t tensor = op->in[slot];
    const ipu_ir_tensor *t = &L->g->tensors[tensor];
    uint32_t **own = &L->operands[index][slot];
    char name[64];
    snprintf(name, sizeof name, "%.40s@op%zu", t->name, index);
    IPU_TRY(low_layout_buffers(L, l, tensor, 1, IPU_LOW_OPERAND, name, own));
    /* The move reads the current member in place; injected: not a bias's. */
    int advancing = t->sequence > 1;
    if (advancing && op->kind == IPU_IR_MATMUL && slot == 2 &&
        ipu_low_take_inject(&L->prog->inject, IPU_INJECT_BIAS_MEMBER_FROZEN))
        advancing = 0;
    /* A home cutting the columns as l does moves whole padded rows, which
     * write the destinations' padding too: nothing to clear. */
    const ipu_layout *home = &L->plan->home[tensor];
    if (ipu_layout_same_columns(home, l))
        for (size_t b = 0; b < block_count(l); b++)
            if ((*own)[b] != IPU_LOW_LITERAL)
                L->cleared[(*own)[b]] = 1;
    IPU_TRY(low_redistribute_from(L, home, low_home_ids(L, tensor), advancing, l, *own, label));
    *ids = *own;
    return IPU_OK;
}

/* ---- host streams ------------------------------------------------------ */

static ipu_status add_stream(lowering *L, const char *name, uint32_t direction, uint64_t size,
                             uint32_t tensor, uint32_t *id)
{
    ipu_low_program *p = L->prog;
    IPU_TRY(IPU_GROW(L->ctx, p->streams, p->stream_count, p->stream_capacity));
    ipu_low_stream *s = &p->streams[p->stream_count];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%.63s", name);
    s->direction = direction, s->size = size, s->tensor = tensor;
    *id = (uint32_t)p->stream_count++;
    return IPU_OK;
}

/* One host entry: rows of bytes each, tile_stride apart in the buffer and
 * stream_stride apart in the stream. */
static ipu_status add_host(lowering *L, uint32_t buffer, uint32_t offset, uint32_t bytes,
                           uint32_t rows, uint32_t tile_stride, uint32_t stream,
                           uint64_t stream_offset, uint32_t stream_stride)
{
    ipu_low_program *p = L->prog;
    int input = p->streams[stream].direction == IPU_STREAM_INPUT;
    int output = p->streams[stream].direction == IPU_STREAM_OUTPUT;
    if (stream_offset >= stream_stride && stream_stride &&
        ((input && ipu_low_take_inject(&p->inject, IPU_INJECT_HOST_INPUT_SHIFTED)) ||
         (output && ipu_low_take_inject(&p->inject, IPU_INJECT_HOST_OUTPUT_SHIFTED))))
        stream_offset -= stream_stride;
    IPU_TRY(IPU_GROW(L->ctx, p->hosts, p->host_count, p->host_capacity));
    p->hosts[p->host_count++] = (ipu_low_host){.buffer = buffer,
                                               .offset = offset,
                                               .bytes = bytes,
                                               .rows = rows,
                                               .tile_stride = tile_stride,
                                               .stream = stream,
                                               .stream_stride = stream_stride,
                                               .stream_offset = stream_offset};
    low_use(L, buffer);
    low_current(L)->count++;
    return IPU_OK;
}

/* A chunk of one block's rows moving through the aperture. */
typedef struct chunk {
    uint32_t block, tile, buffer, member; /* buffer of the block (member: sequence member) */
    uint32_t row0, rows;                  /* rows of the block, relative to its first row */
    uint32_t r0, c0, c1, stride;          /* the block's first row and columns */
} chunk;

/* Move the blocks of a layout through the aperture in rounds: each round
 * takes at most one aperture-full of rows per tile.  in: host -> buffers. */
static ipu_status host_rounds(lowering *L, const ipu_layout *l, const uint32_t *ids, uint32_t members,
                              uint32_t stream, int in, const char *label)
{
    const ipu_profile *pf = &L->plan->profile;
    uint32_t aperture = pf->aperture_end - pf->aperture_base;
    size_t blocks = block_count(l);
    /* Per block: rows per round; the round count is the largest of any tile. */
    uint32_t rounds = 0;
    for (size_t b = 0; b < blocks; b++) {
        uint32_t i = (uint32_t)(b / l->col_parts % l->row_parts), j = (uint32_t)(b % l->col_parts);
        uint32_t stride = ipu_layout_stride(l, l->col_bounds[j + 1] - l->col_bounds[j]);
        uint32_t rows = l->row_bounds[i + 1] - l->row_bounds[i], per = aperture / stride;
        if (per == 0)
            return IPU_FAIL(L->ctx, IPU_ERR_INVALID_ARGUMENT,
                            "lower: a row of %u bytes does not fit the %u-byte aperture", stride,
                            aperture);
        uint32_t need = (rows + per - 1) / per * members;
        rounds = need > rounds ? need : rounds;
    }
    uint64_t row_bytes = (uint64_t)l->cols * l->elem, member_bytes = row_bytes * l->rows;
    for (uint32_t round = 0; round < rounds; round++) {
        /* Gather this round's chunk per block. */
        chunk *chunks = ipu_calloc(L->ctx, blocks, sizeof *chunks);
        size_t count = 0;
        if (!chunks)
            return IPU_NO_MEMORY(L->ctx);
        for (size_t b = 0; b < blocks; b++) {
            uint32_t r = (uint32_t)(b / ((size_t)l->col_parts * l->row_parts));
            uint32_t i = (uint32_t)(b / l->col_parts % l->row_parts), j = (uint32_t)(b % l->col_parts);
            uint32_t r0 = l->row_bounds[i], rows = l->row_bounds[i + 1] - r0;
            uint32_t c0 = l->col_bounds[j], c1 = l->col_bounds[j + 1];
            uint32_t stride = ipu_layout_stride(l, c1 - c0), per = aperture / stride;
            uint32_t per_member = (rows + per - 1) / per;
            if (round >= per_member * members)
                continue;
            uint32_t member = round / per_member, row0 = round % per_member * per;
            chunks[count++] = (chunk){(uint32_t)b, ipu_layout_tile(l, i, j, r), ids[b], member, row0,
                                      rows - row0 < per ? rows - row0 : per, r0, c0, c1, stride};
        }
        uint32_t *staging = ipu_calloc(L->ctx, count ? count : 1, sizeof *staging);
        ipu_status status = staging ? IPU_OK : IPU_NO_MEMORY(L->ctx);
        for (size_t n = 0; n < count && status == IPU_OK; n++) {
            const chunk *c = &chunks[n];
            status = low_new_buffer(L, c->tile, c->rows * c->stride, IPU_LOW_LITERAL,
                                c->stride != (c->c1 - c->c0) * l->elem, 1, "host-staging",
                                &staging[n]);
        }
        /* In: clear staging padding, host writes the payload, copy into place.
         * Out: copy the rows into staging, host reads the payload. */
        if (status == IPU_OK)
            status = low_begin_step(L, IPU_LOW_COMPUTE, label);
        for (size_t n = 0; n < count && status == IPU_OK; n++) {
            const chunk *c = &chunks[n];
            uint32_t block_bytes = ipu_layout_block_bytes(l, c->block / l->col_parts % l->row_parts,
                                                          c->block % l->col_parts);
            uint32_t at = c->member * block_bytes + c->row0 * c->stride;
            if (in) {
                status = low_clear(L, staging[n]);
            } else {
                ipu_low_arg args[] = {BUF(c->buffer, at), BUF(staging[n], 0), LIT(c->rows * c->stride)};
                status = low_emit_kernel(L, c->tile, IPU_K_COPY, 3, args, -1, 0);
            }
        }
        if (status == IPU_OK)
            status = low_begin_step(L, in ? IPU_LOW_HOST_IN : IPU_LOW_HOST_OUT, label);
        /* One strided entry per chunk: its rows, a block stride apart in
         * staging and a tensor row apart in the stream. */
        for (size_t n = 0; n < count && status == IPU_OK; n++) {
            const chunk *c = &chunks[n];
            status = add_host(L, staging[n], 0, (c->c1 - c->c0) * l->elem, c->rows, c->stride, stream,
                              c->member * member_bytes + (uint64_t)(c->r0 + c->row0) * row_bytes +
                                  (uint64_t)c->c0 * l->elem,
                              (uint32_t)row_bytes);
        }
        if (status == IPU_OK && in) {
            status = low_begin_step(L, IPU_LOW_COMPUTE, label);
            for (size_t n = 0; n < count && status == IPU_OK; n++) {
                const chunk *c = &chunks[n];
                uint32_t block_bytes = ipu_layout_block_bytes(l, c->block / l->col_parts % l->row_parts,
                                                              c->block % l->col_parts);
                status = low_clear(L, c->buffer);
                ipu_low_arg args[] = {BUF(staging[n], 0),
                                      BUF(c->buffer, c->member * block_bytes + c->row0 * c->stride),
                                      LIT(c->rows * c->stride)};
                if (status == IPU_OK)
                    status = low_emit_kernel(L, c->tile, IPU_K_COPY, 3, args, -1, 0);
            }
        }
        free(staging);
        free(chunks);
        IPU_TRY(status);
    }
    return IPU_OK;
}

/* ---- ops --------------------------------------------------------------- */

const uint32_t *low_home_ids(lowering *L, uint32_t tensor) { return L->blocks[tensor]; }

uint32_t low_elements_per_row(const ipu_layout *l, uint32_t j)
{
    return ipu_layout_stride(l, l->col_bounds[j + 1] - l->col_bounds[j]) / l->elem;
}

/* An add's broadcast second input (fewer rows than the result) on its b
 * layout: its home stacked to the result's rows, each copy read from the
 * same buffers, redistributed in one step. */
static ipu_status broadcast_operand(lowering *L, size_t index, const char *label, const uint32_t **ids)
{
    uint32_t tensor = L->g->ops[index].in[1];
    const ipu_layout *home = &L->plan->home[tensor], *wanted = &L->plan->ops[index].b;
    const uint32_t *home_ids = low_home_ids(L, tensor);
    uint32_t copies = wanted->rows / home->rows;
    size_t blocks = (size_t)home->row_parts * home->col_parts;
    ipu_layout stacked;
    IPU_TRY(ipu_layout_stack_rows(L->ctx, &stacked, home, copies));
    uint32_t *stacked_ids = ipu_malloc(L->ctx, blocks * copies * sizeof *stacked_ids);
    ipu_status status = stacked_ids ? IPU_OK : IPU_NO_MEMORY(L->ctx);
    for (size_t c = 0; status == IPU_OK && c < copies; c++)
        memcpy(stacked_ids + c * blocks, home_ids, blocks * sizeof *stacked_ids);
    if (status == IPU_OK)
        status = operand_from(L, index, 1, tensor, &stacked, stacked_ids, wanted, label, ids);
    free(stacked_ids);
    ipu_layout_free(&stacked);
    return status;
}

static ipu_status lower_elementwise(lowering *L, size_t index)
{
    const ipu_graph *g = L->g;
    const ipu_ir_op *op = &g->ops[index];
    const ipu_ir_tensor *ti = &g->tensors[op->in[0]], *to = &g->tensors[op->out];
    const ipu_op_plan *o = &L->plan->ops[index];
    const ipu_layout *li = o->a.tiles ? &o->a : &L->plan->home[op->in[0]], *lo = &L->plan->home[op->out];
    const uint32_t *in_ids, *out_ids = low_home_ids(L, op->out);
    const uint32_t *in2_ids = NULL;
    char label[64];
    snprintf(label, sizeof label, "op%zu %s %.40s", index, ipu_ir_op_name(op->kind), to->name);
    IPU_TRY(low_operand(L, index, 0, op->in[0], &o->a, label, &in_ids));
    if (op->kind == IPU_IR_ADD && g->tensors[op->in[1]].rows < to->rows)
        IPU_TRY(broadcast_operand(L, index, label, &in2_ids));
    else if (op->kind == IPU_IR_ADD)
        IPU_TRY(low_operand(L, index, 1, op->in[1], &L->plan->ops[index].b, label, &in2_ids));
    IPU_TRY(low_begin_step(L, IPU_LOW_COMPUTE, label));
    /* Injected: every block of this add reads its first input twice. */
    int wrong_input = op->kind == IPU_IR_ADD && ipu_low_take_inject(&L->prog->inject, IPU_INJECT_ADD_WRONG_INPUT);
    for (uint32_t i = 0; i < lo->row_parts; i++)
        for (uint32_t j = 0; j < lo->col_parts; j++) {
            size_t b = (size_t)i * lo->col_parts + j;
            uint32_t src = in_ids[b], dst = out_ids[b], tile = ipu_layout_tile(lo, i, j, 0);
            uint32_t rows = lo->row_bounds[i + 1] - lo->row_bounds[i];
            uint32_t in_row = low_elements_per_row(li, j), out_row = low_elements_per_row(lo, j);
            IPU_TRY(low_clear(L, dst));
            if (op->kind == IPU_IR_CAST) {
                /* One sweep when rows hold as many elements in both types. */
                uint32_t calls = in_row == out_row ? 1 : rows, count = in_row == out_row ? rows * in_row
                                                                                           : lo->col_bounds[j + 1] - lo->col_bounds[j];
                for (uint32_t c = 0; c < calls; c++) {
                    int type = to->dtype;
                    if (type == IPU_DT_F143 && ipu_low_take_inject(&L->prog->inject, IPU_INJECT_CAST_WRONG_TYPE))
                        type = IPU_DT_F152;
                    ipu_low_arg args[] = {BUF(src, c * in_row * li->elem), BUF(dst, c * out_row * lo->elem),
                                          LIT(count), LIT(ti->dtype), LIT((uint32_t)ti->scale),
                                          LIT(type), LIT((uint32_t)to->scale)};
                    IPU_TRY(low_emit_kernel(L, tile, IPU_K_CAST, 7, args, -1, 0));
                }
            } else if (op->kind == IPU_IR_GELU) {
                uint32_t count = rows * out_row;
                if (ipu_low_take_inject(&L->prog->inject, IPU_INJECT_GELU_COUNT_SHORT))
                    count--;
                ipu_low_arg args[] = {BUF(src, 0), BUF(dst, 0), LIT(count), LIT(to->dtype)};
                int erf = op->form == IPU_GELU_ERF && !ipu_low_take_inject(&L->prog->inject, IPU_INJECT_GELU_FORM_LOST);
                IPU_TRY(low_emit_kernel(L, tile, erf ? IPU_K_GELU_ERF : IPU_K_GELU, 4, args, -1, 0));
            } else if (op->kind == IPU_IR_ADD) {
                uint32_t second = wrong_input ? src : in2_ids[b];
                ipu_low_arg args[] = {BUF(src, 0), BUF(second, 0), BUF(dst, 0), LIT(rows * out_row),
                                      LIT(to->dtype)};
                IPU_TRY(low_emit_kernel(L, tile, IPU_K_ADD, 5, args, -1, 0));
            } else {
                ipu_low_arg args[] = {BUF(src, 0), BUF(dst, 0), LIT(rows * out_row * lo->elem)};
                IPU_TRY(low_emit_kernel(L, tile, IPU_K_COPY, 3, args, -1, 0));
            }
        }
    return IPU_OK;
}

/* ---- the program ------------------------------------------------------- */

void ipu_low_free(ipu_low_program *prog)
{
    for (size_t i = 0; prog->ops && i < prog->op_count; i++) {
        free(prog->ops[i].row_blocks);
        free(prog->ops[i].col_bounds);
        free(prog->ops[i].k_bounds);
        free(prog->ops[i].row_bounds);
        free(prog->ops[i].attention_bounds);
    }
    free(prog->ops);
    free(prog->tensors);
    free(prog->captures);
    free(prog->buffers);
    for (size_t v = 0; prog->values && v < prog->value_count; v++) {
        free(prog->values[v].row_bounds);
        free(prog->values[v].col_bounds);
        free(prog->values[v].tiles);
    }
    free(prog->values);
    free(prog->kernels);
    free(prog->xfers);
    free(prog->xdsts);
    free(prog->hosts);
    free(prog->steps);
    free(prog->streams);
    memset(prog, 0, sizeof *prog);
}

static ipu_status lower_ops(lowering *L, size_t first, size_t end)
{
    for (size_t i = first; i < end; i++) {
        IPU_TRY(IPU_CHECK_CANCEL(L->ctx));
        int kind = L->g->ops[i].kind;
        L->op = (uint32_t)i;
        if (kind == IPU_IR_LAYERNORM) {
            IPU_TRY(ipu_lower_layernorm(L, i));
        } else if (kind == IPU_IR_ATTENTION || kind == IPU_IR_MAP_POOL) {
            IPU_TRY(ipu_lower_attention(L, i));
        } else if (kind == IPU_IR_MATMUL) {
            IPU_TRY(ipu_lower_matmul(L, i));
        } else {
            IPU_TRY(lower_elementwise(L, i));
        }
    }
    L->op = IPU_LOW_LITERAL;
    return IPU_OK;
}

/* A value (a layout instance) lives as a whole: every block from the first
 * step any of them is used in to the last, so its storage is one
 * allocation root with one lifetime (host rounds, say, touch blocks in
 * different steps), its untouched blocks included. */
static ipu_status whole_values(lowering *L)
{
    ipu_low_program *prog = L->prog;
    size_t n = prog->value_count ? prog->value_count : 1;
    uint32_t *first = ipu_malloc(L->ctx, n * sizeof *first), *last = ipu_malloc(L->ctx, n * sizeof *last);
    if (!first || !last) {
        free(first), free(last);
        return IPU_NO_MEMORY(L->ctx);
    }
    memset(first, 0xFF, n * sizeof *first);
    memset(last, 0xFF, n * sizeof *last);
    for (size_t b = 0; b < prog->buffer_count; b++) {
        const ipu_low_buffer *buf = &prog->buffers[b];
        if (buf->value == IPU_LOW_LITERAL || buf->first == IPU_LOW_LITERAL)
            continue;
        if (first[buf->value] == IPU_LOW_LITERAL || buf->first < first[buf->value])
            first[buf->value] = buf->first;
        if (last[buf->value] == IPU_LOW_LITERAL || buf->last > last[buf->value])
            last[buf->value] = buf->last;
    }
    for (size_t b = 0; b < prog->buffer_count; b++) {
        ipu_low_buffer *buf = &prog->buffers[b];
        if (buf->value != IPU_LOW_LITERAL && first[buf->value] != IPU_LOW_LITERAL)
            buf->first = first[buf->value], buf->last = last[buf->value];
    }
    free(first), free(last);
    return IPU_OK;
}

/* Every op's output blocks (home layout, first replica), readable after the
 * op's last step. */
static ipu_status record_captures(lowering *L)
{
    ipu_low_program *prog = L->prog;
    uint32_t *last = ipu_malloc(L->ctx, (L->g->op_count ? L->g->op_count : 1) * sizeof *last);
    if (!last)
        return IPU_NO_MEMORY(L->ctx);
    for (size_t o = 0; o < L->g->op_count; o++)
        last[o] = IPU_LOW_LITERAL;
    for (size_t s = 0; s < prog->step_count; s++)
        if (prog->steps[s].op < L->g->op_count)
            last[prog->steps[s].op] = (uint32_t)s;
    ipu_status status = IPU_OK;
    for (size_t o = 0; o < L->g->op_count && status == IPU_OK; o++) {
        uint32_t t = L->g->ops[o].out;
        const ipu_layout *l = &L->plan->home[t];
        if (last[o] == IPU_LOW_LITERAL || !L->blocks[t])
            continue;
        for (uint32_t i = 0; i < l->row_parts && status == IPU_OK; i++)
            for (uint32_t j = 0; j < l->col_parts && status == IPU_OK; j++) {
                uint32_t buffer = L->blocks[t][(size_t)i * l->col_parts + j], r0, r1, c0, c1;
                if (buffer == IPU_LOW_LITERAL)
                    continue;
                ipu_layout_block(l, i, j, &r0, &r1, &c0, &c1);
                status = IPU_GROW(L->ctx, prog->captures, prog->capture_count, prog->capture_capacity);
                if (status == IPU_OK)
                    prog->captures[prog->capture_count++] = (ipu_low_capture){
                        (uint32_t)o, last[o], buffer, ipu_layout_stride(l, c1 - c0), r0, r1, c0, c1};
            }
    }
    free(last);
    return status;
}

/* Steps [from, now) without an op of their own (host rounds, carries) name
 * the op that homes tensor t in faults. */
static void name_origin(lowering *L, size_t from, uint32_t t)
{
    const ipu_ir_repeat *r = &L->g->repeat;
    uint32_t op = ipu_ir_homing_op(L->g, t);
    if (op == UINT32_MAX && r->iterations && t == r->carried_init)
        op = ipu_ir_homing_op(L->g, r->carried); /* stored in the carried tensor's storage */
    for (size_t s = from; s < L->prog->step_count; s++)
        if (L->prog->steps[s].op == IPU_LOW_LITERAL)
            L->prog->steps[s].origin = op == UINT32_MAX ? IPU_LOW_LITERAL : op;
}

static ipu_status lower_program(lowering *L)
{
    const ipu_graph *g = L->g;
    const ipu_ir_repeat *r = &g->repeat;
    ipu_low_program *prog = L->prog;
    /* Buffers of every home layout.  The carried value's initial tensor lands
     * directly in the carried tensor's storage when it has the carried
     * tensor's home, unless it is a parameter (the body rewrites that
     * storage, so a parameter keeps its own); otherwise it is copied in
     * before the body. */
    int alias = r->iterations && g->tensors[r->carried_init].role != IPU_ROLE_PARAM &&
                ipu_layout_same(&L->plan->home[r->carried_init], &L->plan->home[r->carried]);
    for (size_t t = 0; t < g->tensor_count; t++) {
        if (alias && t == r->carried_init)
            continue;
        IPU_TRY(low_layout_buffers(L, &L->plan->home[t], (uint32_t)t, g->tensors[t].sequence,
                                   IPU_LOW_TENSOR, g->tensors[t].name, &L->blocks[t]));
    }
    if (alias) {
        size_t n = block_count(&L->plan->home[r->carried]);
        L->blocks[r->carried_init] = ipu_malloc(L->ctx, n * sizeof(uint32_t));
        if (!L->blocks[r->carried_init])
            return IPU_NO_MEMORY(L->ctx);
        memcpy(L->blocks[r->carried_init], L->blocks[r->carried], n * sizeof(uint32_t));
        for (size_t b = 0; b < n; b++)
            prog->buffers[L->blocks[r->carried][b]].alias = r->carried_init;
    }
    for (size_t b = 0; b < prog->buffer_count; b++) {
        uint32_t t = prog->buffers[b].tensor;
        int role = t != IPU_LOW_LITERAL ? g->tensors[t].role : -1;
        prog->buffers[b].persistent = role == IPU_ROLE_PARAM;
        /* The carried tensor's storage receives the input. */
        prog->buffers[b].pinned = role == IPU_ROLE_PARAM || role == IPU_ROLE_INPUT ||
                                  role == IPU_ROLE_OUTPUT || (r->iterations && t == r->carried);
    }
    /* Streams, parameter upload (init), inputs. */
    uint32_t stream;
    L->init = 1;
    for (size_t t = 0; t < g->tensor_count; t++) {
        const ipu_ir_tensor *x = &g->tensors[t];
        if (x->role != IPU_ROLE_PARAM)
            continue;
        IPU_TRY(add_stream(L, x->name, IPU_STREAM_PARAM, ipu_ir_tensor_bytes(x) * x->sequence,
                           (uint32_t)t, &stream));
        size_t from = prog->step_count;
        IPU_TRY(host_rounds(L, &L->plan->home[t], L->blocks[t], x->sequence, stream, 1, x->name));
        name_origin(L, from, (uint32_t)t);
    }
    L->init = 0;
    for (size_t t = 0; t < g->tensor_count; t++) {
        const ipu_ir_tensor *x = &g->tensors[t];
        if (x->role != IPU_ROLE_INPUT)
            continue;
        IPU_TRY(add_stream(L, x->name, IPU_STREAM_INPUT, ipu_ir_tensor_bytes(x), (uint32_t)t, &stream));
        size_t from = prog->step_count;
        IPU_TRY(host_rounds(L, &L->plan->home[t], L->blocks[t], 1, stream, 1, x->name));
        name_origin(L, from, (uint32_t)t);
    }
    size_t body = r->iterations ? r->first_op : g->op_count, body_end = r->first_op + r->op_count;
    IPU_TRY(lower_ops(L, 0, body));
    if (r->iterations && !alias) {
        size_t from = prog->step_count;
        IPU_TRY(low_redistribute(L, &L->plan->home[r->carried_init], L->blocks[r->carried_init],
                                 &L->plan->home[r->carried], L->blocks[r->carried], "carry in"));
        name_origin(L, from, r->carried_init);
    }
    if (r->iterations) {
        L->body_first = (uint32_t)prog->step_count;
        IPU_TRY(lower_ops(L, body, body_end));
        size_t from = prog->step_count;
        if (r->carried_next != r->carried && !ipu_low_take_inject(&prog->inject, IPU_INJECT_CARRY_DROPPED))
            IPU_TRY(low_redistribute(L, &L->plan->home[r->carried_next], L->blocks[r->carried_next],
                                 &L->plan->home[r->carried], L->blocks[r->carried], "carry"));
        name_origin(L, from, r->carried_next);
        L->body_end = (uint32_t)prog->step_count;
        prog->repeat_first = L->body_first;
        prog->repeat_count = L->body_end - L->body_first;
        prog->repeat_iterations = r->iterations;
        IPU_TRY(lower_ops(L, body_end, g->op_count));
    }
    if (ipu_low_take_inject(&prog->inject, IPU_INJECT_OVERWRITE_PARAMETER)) {
        /* Zero the first parameter block after its last use: this invocation
         * is unharmed, the next one computes with zeros. */
        for (size_t b = 0; b < prog->buffer_count; b++) {
            if (!prog->buffers[b].persistent)
                continue;
            IPU_TRY(low_begin_step(L, IPU_LOW_COMPUTE, "injected overwrite"));
            ipu_low_arg args[] = {BUF((uint32_t)b, 0), LIT(prog->buffers[b].size), LIT(0)};
            IPU_TRY(low_emit_kernel(L, prog->buffers[b].tile, IPU_K_FILL, 3, args, -1, 0));
            break;
        }
    }
    for (size_t t = 0; t < g->tensor_count; t++) {
        const ipu_ir_tensor *x = &g->tensors[t];
        if (x->role != IPU_ROLE_OUTPUT)
            continue;
        IPU_TRY(add_stream(L, x->name, IPU_STREAM_OUTPUT, ipu_ir_tensor_bytes(x), (uint32_t)t, &stream));
        size_t from = prog->step_count;
        IPU_TRY(host_rounds(L, &L->plan->home[t], L->blocks[t], 1, stream, 0, x->name));
        name_origin(L, from, (uint32_t)t);
    }
    IPU_TRY(record_captures(L));
    /* Lifetimes: parameters for the whole program.  A value made before the
     * body and touched in it (the carried storage included) lives through
     * the whole body, every iteration; a buffer first touched inside the body
     * is written there before it is read in every iteration, so it keeps its
     * own steps and others may use its bytes in the rest of the body. */
    uint32_t last = (uint32_t)prog->step_count - 1;
    IPU_TRY(whole_values(L));
    for (size_t b = 0; b < prog->buffer_count; b++) {
        ipu_low_buffer *buf = &prog->buffers[b];
        if (buf->first == IPU_LOW_LITERAL)
            buf->first = buf->last = 0; /* never touched: placed but idle */
        if (buf->persistent)
            buf->first = 0, buf->last = last;
        if (r->iterations && buf->first < L->body_first && buf->last >= L->body_first)
            buf->last = buf->last > L->body_end - 1 ? buf->last : L->body_end - 1;
        if (!buf->persistent && !buf->aperture && buf->last > buf->first &&
            ipu_low_take_inject(&prog->inject, IPU_INJECT_LIFETIME_END_EARLY))
            buf->last--;
    }
    return IPU_OK;
}

ipu_status ipu_lower(ipu_ctx *ctx, const ipu_plan *plan, int inject, ipu_low_program *out)
{
    memset(out, 0, sizeof *out);
    out->profile = plan->profile;
    out->inject = inject;
    out->unplaced = IPU_LOW_LITERAL;
    const ipu_graph *g = plan->graph;
    lowering L = {ctx, plan, g, out, NULL, NULL, NULL, NULL, 0, IPU_LOW_LITERAL, 0, 0};
    L.blocks = ipu_calloc(ctx, g->tensor_count, sizeof *L.blocks);
    L.operands = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *L.operands);
    out->ops = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *out->ops);
    out->op_count = g->op_count;
    out->tensors = ipu_calloc(ctx, g->tensor_count ? g->tensor_count : 1, sizeof *out->tensors);
    out->tensor_count = g->tensor_count;
    ipu_status status =
        L.blocks && L.operands && out->ops && out->tensors ? IPU_OK : IPU_NO_MEMORY(ctx);
    for (size_t t = 0; status == IPU_OK && t < g->tensor_count; t++) {
        snprintf(out->tensors[t].name, sizeof out->tensors[t].name, "%s", g->tensors[t].name);
        uint32_t op = ipu_ir_homing_op(g, (uint32_t)t);
        out->tensors[t].homing_op = op == UINT32_MAX ? IPU_LOW_LITERAL : op;
    }
    for (size_t i = 0; status == IPU_OK && i < g->op_count; i++) {
        snprintf(out->ops[i].kind, sizeof out->ops[i].kind, "%s", ipu_ir_op_name(g->ops[i].kind));
        snprintf(out->ops[i].name, sizeof out->ops[i].name, "%s", g->tensors[g->ops[i].out].name);
        if (g->ops[i].kind == IPU_IR_ATTENTION || g->ops[i].kind == IPU_IR_MAP_POOL)
            snprintf(out->ops[i].attention, sizeof out->ops[i].attention, "%s",
                     ipu_attention_mode_name(plan->ops[i].attention));
    }
    if (status == IPU_OK)
        status = lower_program(&L);
    for (size_t t = 0; L.blocks && t < g->tensor_count; t++)
        free(L.blocks[t]);
    for (size_t i = 0; L.operands && i < g->op_count; i++)
        for (int k = 0; k < 3; k++)
            free(L.operands[i][k]);
    free(L.blocks);
    free(L.operands);
    free(L.cleared);
    free(L.padded);
    if (status != IPU_OK)
        ipu_low_free(out);
    return status;
}

ipu_status ipu_low_sweep(ipu_ctx *ctx, uint32_t tiles, uint32_t steps, uint32_t slots,
                         const ipu_low_live *items, size_t count, uint64_t **out)
{
    /* +bytes at first, -bytes after last, then a running sum per tile and slot. */
    for (size_t n = 0; n < count; n++)
        IPU_ASSERT(ctx, items[n].tile < tiles && items[n].first <= items[n].last &&
                            items[n].last < steps && items[n].slot < slots);
    size_t row = (size_t)(steps + 1) * slots;
    int64_t *delta = ipu_calloc(ctx, (size_t)tiles * row, sizeof *delta);
    size_t cells = (size_t)tiles * steps * slots;
    *out = ipu_calloc(ctx, cells ? cells : 1, sizeof **out);
    if (!delta || !*out) {
        free(delta), free(*out);
        *out = NULL;
        return IPU_NO_MEMORY(ctx);
    }
    for (size_t n = 0; n < count; n++) {
        const ipu_low_live *x = &items[n];
        delta[x->tile * row + (size_t)x->first * slots + x->slot] += (int64_t)x->bytes;
        delta[x->tile * row + (size_t)(x->last + 1) * slots + x->slot] -= (int64_t)x->bytes;
    }
    for (uint32_t t = 0; t < tiles; t++)
        for (uint32_t k = 0; k < slots; k++) {
            int64_t live = 0;
            for (uint32_t s = 0; s < steps; s++) {
                live += delta[t * row + (size_t)s * slots + k];
                (*out)[((size_t)t * steps + s) * slots + k] = (uint64_t)live;
            }
        }
    free(delta);
    return IPU_OK;
}

ipu_status ipu_low_peaks(ipu_ctx *ctx, const ipu_low_program *prog, uint64_t *peak,
                         uint32_t *peak_tile, uint32_t *peak_step, uint64_t **per_tile)
{
    uint32_t tiles = prog->profile.tiles, steps = prog->step_count ? (uint32_t)prog->step_count : 1;
    ipu_low_live *items = ipu_malloc(ctx, (prog->buffer_count ? prog->buffer_count : 1) * sizeof *items);
    uint64_t *best = ipu_calloc(ctx, tiles, sizeof *best), *live = NULL;
    uint32_t *best_step = ipu_calloc(ctx, tiles, sizeof *best_step);
    ipu_status status = items && best && best_step ? IPU_OK : IPU_NO_MEMORY(ctx);
    for (size_t b = 0; status == IPU_OK && b < prog->buffer_count; b++) {
        const ipu_low_buffer *buf = &prog->buffers[b];
        items[b] = (ipu_low_live){buf->tile, buf->first, buf->last, 0, buf->size};
    }
    if (status == IPU_OK)
        status = ipu_low_sweep(ctx, tiles, steps, 1, items, prog->buffer_count, &live);
    *peak = 0, *peak_tile = 0, *peak_step = 0;
    for (uint32_t t = 0; status == IPU_OK && t < tiles; t++) {
        for (uint32_t s = 0; s < steps; s++)
            if (live[(size_t)t * steps + s] > best[t])
                best[t] = live[(size_t)t * steps + s], best_step[t] = s;
        if (best[t] > *peak)
            *peak = best[t], *peak_tile = t, *peak_step = best_step[t];
    }
    free(items);
    free(live);
    free(best_step);
    if (status == IPU_OK && per_tile)
        *per_tile = best;
    else
        free(best);
    return status;
}
