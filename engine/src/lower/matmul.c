/* matmul.c: lowering one matmul on its grid (plan/matmul.c says how a grid
 * computes and what it costs).
 *
 * At once (gs = 1): one step brings A onto the grid's operand layout (unless
 * its home is that layout), one compute step runs every tile's GEMM on its
 * blocks, into the result's home block (gk = 1) or a partial; with gk > 1 a
 * reduce-scatter follows: tile (i, j, l) gathers sub-band l of the other
 * gk - 1 partials into one staging buffer, sums them by halves
 * (ipu_reduce_tree_half) and adds its own piece into its result block.
 *
 * Serial (gs > 1): the same for each piece t in turn (ipu_matmul_chunk):
 * piece t of A, chunk t of every sub-band, is read in place from A's home or
 * brought onto a layout of its own (from the home, or when the home cuts K
 * otherwise, from a copy of A spread over the grid on its K bands first, so
 * that every piece moves whole rows: exchange tables stay small), whose buffers live only while the piece
 * is computed, so placement gives the next piece the same bytes; each tile
 * runs one GEMM per chunk, into its result rows (gk = 1) or the piece's
 * partials; the piece's partials are reduced as above, chunk l to owner l.
 *
 * A gathering grid (plan/matmul.c) first brings the weight's current member
 * from its home, which holds each block once, onto every replica of the B
 * layout; the GEMMs read that copy.
 *
 * A biased matmul then adds the bias's current member to every result
 * block in place (plan.c's plan_bias).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/lowering.h"
#include "numerics/numerics.h"

/* The matmul's blocks, for a reference that computes them as the device
 * does (reference.h): its GEMMs' row blocks (gm bands, or with gs > 1 every
 * chunk), the column and reduction bands of its operand layouts, and the
 * output's row bands (band b of row block i owned by part b % gk: a chunk
 * wholly by its sub-band's owner, the others' bands empty). */
static ipu_status record_blocks(lowering *L, size_t index, uint32_t rows, const ipu_matmul_grid *g,
                                const ipu_layout *b, const ipu_layout *a, const ipu_layout *c)
{
    ipu_low_op *record = &L->prog->ops[index];
    uint32_t gm = g->gm, gn = b->col_parts, gk = a->col_parts, blocks = g->gs == 1 ? gm : gm * gk * g->gs;
    record->row_block_count = blocks, record->col_block_count = gn, record->parts = gk;
    record->row_blocks = ipu_malloc(L->ctx, (blocks + 1) * sizeof(uint32_t));
    record->col_bounds = ipu_malloc(L->ctx, (gn + 1) * sizeof(uint32_t));
    record->k_bounds = ipu_malloc(L->ctx, (gk + 1) * sizeof(uint32_t));
    record->row_bounds = ipu_malloc(L->ctx, ((size_t)blocks * gk + 1) * sizeof(uint32_t));
    if (!record->row_blocks || !record->col_bounds || !record->k_bounds || !record->row_bounds)
        return IPU_NO_MEMORY(L->ctx);
    memcpy(record->col_bounds, b->col_bounds, (gn + 1) * sizeof(uint32_t));
    memcpy(record->k_bounds, a->col_bounds, (gk + 1) * sizeof(uint32_t));
    if (g->gs == 1) {
        for (uint32_t i = 0; i < gm; i++)
            ipu_band(rows, gm, 1, i, &record->row_blocks[i], &record->row_blocks[i + 1]);
        memcpy(record->row_bounds, c->row_bounds, (c->row_parts + 1) * sizeof(uint32_t));
        return IPU_OK;
    }
    record->row_blocks[0] = record->row_bounds[0] = 0;
    for (uint32_t i = 0, n = 0; i < gm; i++)
        for (uint32_t l = 0; l < gk; l++)
            for (uint32_t t = 0; t < g->gs; t++, n++) {
                uint32_t lo, hi;
                ipu_matmul_chunk(rows, g, i, l, t, &lo, &hi);
                record->row_blocks[n + 1] = hi;
                for (uint32_t sub = 0; sub < gk; sub++)
                    record->row_bounds[(size_t)n * gk + sub + 1] = sub < l ? lo : hi;
            }
    return IPU_OK;
}

/* Piece t of A on its own layout: the grid's A layout with every chunk a row
 * band, only piece t's present. */
static ipu_status piece_layout(lowering *L, const ipu_layout *a, uint32_t m, const ipu_matmul_grid *g, uint32_t t,
                               ipu_layout *out)
{
    uint32_t gm = g->gm, gk = g->gk, gs = g->gs;
    IPU_TRY(ipu_layout_alloc(L->ctx, out, a->rows, a->cols, a->elem, gm * gk * gs, gk, a->replicas));
    memcpy(out->col_bounds, a->col_bounds, ((size_t)gk + 1) * sizeof *out->col_bounds);
    for (uint32_t i = 0, n = 0; i < gm; i++)
        for (uint32_t l = 0; l < gk; l++)
            for (uint32_t u = 0; u < gs; u++, n++) {
                uint32_t lo;
                ipu_matmul_chunk(m, g, i, l, u, &lo, &out->row_bounds[n + 1]);
                for (uint32_t r = 0; r < a->replicas; r++)
                    for (uint32_t q = 0; q < gk; q++)
                        out->tiles[((size_t)r * out->row_parts + n) * gk + q] =
                            u == t ? ipu_layout_tile(a, i, q, r) : IPU_LAYOUT_ABSENT;
            }
    return IPU_OK;
}

typedef struct matmul_lowering {
    lowering *L;
    size_t index;
    const ipu_ir_tensor *ta, *tb, *tc;
    const ipu_op_plan *o;
    const ipu_layout *home_c;
    const uint32_t *b_ids; /* B's buffers on the B layout: its home, or the gathered member */
    uint32_t gm, gn, gk, gs;
    int f8, a_scale;
} matmul_lowering;

/* One GEMM on tile: rows of A (a_buf + a_off) times B block (l, j) into out_buf + out_off. */
static ipu_status emit_gemm(matmul_lowering *M, uint32_t tile, uint32_t a_buf, uint32_t a_off, uint32_t lda,
                            uint32_t b_buf, uint32_t out_buf, uint32_t out_off, uint32_t ldc, uint32_t rows,
                            uint32_t j, uint32_t l)
{
    lowering *L = M->L;
    const ipu_op_plan *o = M->o;
    uint32_t k0 = o->a.col_bounds[l], k1 = o->a.col_bounds[l + 1], n0 = o->b.col_bounds[j],
             n1 = o->b.col_bounds[j + 1];
    uint32_t ldb = low_elements_per_row(&o->b, j), members_stride = ipu_layout_block_bytes(&o->b, l, j);
    int32_t advance_arg = M->tb->sequence > 1 && !o->grid.gather ? 1 : -1;
    uint32_t m = rows, kk = k1 - k0;
    if (m > 1 && ipu_low_take_inject(&L->prog->inject, IPU_INJECT_GEMM_ROWS_SHORT))
        m--;
    if (ipu_low_take_inject(&L->prog->inject, IPU_INJECT_GEMM_K_OVERRUN))
        kk++;
    if (M->f8) {
        ipu_low_arg args[] = {BUF(a_buf, a_off), BUF(b_buf, 0), BUF(out_buf, out_off), LIT(m), LIT(n1 - n0),
                              LIT(kk), LIT((uint32_t)M->ta->dtype | (uint32_t)M->tb->dtype << 8),
                              LIT((uint32_t)(uint8_t)(int8_t)M->a_scale |
                                  (uint32_t)(uint8_t)(int8_t)M->tb->scale << 8),
                              LIT(M->tc->dtype), LIT(0), LIT(lda), LIT(ldb), LIT(ldc)};
        return low_emit_kernel(L, tile, IPU_K_GEMM_F8, 13, args, advance_arg, members_stride);
    }
    ipu_low_arg args[] = {BUF(a_buf, a_off), BUF(b_buf, 0), BUF(out_buf, out_off), LIT(m), LIT(n1 - n0),
                          LIT(kk), LIT(M->tc->dtype), LIT(0), LIT(lda), LIT(ldb), LIT(ldc)};
    return low_emit_kernel(L, tile, IPU_K_GEMM_F16, 11, args, advance_arg, members_stride);
}

/* Piece t's GEMMs (all of them with gs = 1).  a_ids: A's buffers on the
 * grid's layout (gs = 1), piece t's layout, or A's home read in place
 * (in_place); partials (gk > 1): the piece's buffer per tile, made here. */
static ipu_status piece_gemms(matmul_lowering *M, uint32_t t, const ipu_layout *a_layout, const uint32_t *a_ids,
                              int in_place, uint32_t *partials, const char *label)
{
    lowering *L = M->L;
    uint32_t m = M->ta->rows, out = (uint32_t)ipu_dtype_size(M->tc->dtype);
    const ipu_matmul_grid *g = &M->o->grid;
    IPU_TRY(low_begin_step(L, IPU_LOW_COMPUTE, label));
    for (uint32_t i = 0; i < M->gm; i++)
        for (uint32_t j = 0; j < M->gn; j++)
            for (uint32_t l = 0; l < M->gk; l++) {
                uint32_t r0, r1, n0 = M->o->b.col_bounds[j], n1 = M->o->b.col_bounds[j + 1];
                ipu_band(m, M->gm, 1, i, &r0, &r1);
                uint32_t b_buf = M->b_ids[((size_t)i * M->gk + l) * M->gn + j];
                uint32_t tile = ipu_layout_tile(&M->o->a, i, l, j);
                uint32_t ldc_bytes = ipu_layout_stride(M->home_c, n1 - n0), c_buf, rows = r1 - r0;
                if (M->gs > 1)
                    rows = ipu_matmul_piece_rows(m, g, i, M->gk, t);
                if (M->gk == 1) {
                    c_buf = low_home_ids(L, L->g->ops[M->index].out)[(size_t)i * M->gn + j];
                } else {
                    size_t p = ((size_t)i * M->gn + j) * M->gk + l;
                    char name[96];
                    if (M->gs == 1)
                        snprintf(name, sizeof name, "%.30s.partial[%u,%u,%u]", M->tc->name, i, j, l);
                    else
                        snprintf(name, sizeof name, "%.30s.partial[%u,%u,%u]#%u", M->tc->name, i, j, l, t);
                    IPU_TRY(low_new_buffer(L, tile, rows * ldc_bytes, L->g->ops[M->index].out,
                                           ldc_bytes != (n1 - n0) * out, 0, name, &partials[p]));
                    c_buf = partials[p];
                }
                IPU_TRY(low_clear(L, c_buf));
                uint32_t lda = low_elements_per_row(a_layout, l), ldc = ldc_bytes / out;
                if (M->gs == 1) {
                    uint32_t a_buf = a_ids[((size_t)j * M->gm + i) * M->gk + l];
                    IPU_TRY(emit_gemm(M, tile, a_buf, 0, lda, b_buf, c_buf, 0, ldc, r1 - r0, j, l));
                    continue;
                }
                /* One GEMM per chunk of the piece. */
                uint32_t a_stride = ipu_layout_stride(a_layout, a_layout->col_bounds[l + 1] - a_layout->col_bounds[l]);
                for (uint32_t q = 0; q < M->gk; q++) {
                    uint32_t lo, hi, a_buf, a_off = 0;
                    ipu_matmul_chunk(m, g, i, q, t, &lo, &hi);
                    size_t n = ((size_t)i * M->gk + q) * M->gs + t;
                    if (in_place)
                        a_buf = a_ids[(size_t)i * M->gk + l], a_off = (lo - r0) * a_stride;
                    else
                        a_buf = a_ids[((size_t)j * a_layout->row_parts + n) * M->gk + l];
                    /* Injected: a result block's offset taken as a partial buffer's (the piece's own rows). */
                    int as_partial = M->gk == 1 && t > 0 &&
                                     ipu_low_take_inject(&L->prog->inject, IPU_INJECT_SERIAL_PIECE_OFFSET);
                    uint32_t out_off = M->gk == 1 && !as_partial ? (lo - r0) * ldc_bytes
                                                                 : ipu_matmul_piece_rows(m, g, i, q, t) * ldc_bytes;
                    IPU_TRY(emit_gemm(M, tile, a_buf, a_off, lda, b_buf, c_buf, out_off, ldc, hi - lo, j, l));
                }
            }
    return IPU_OK;
}

/* Chunk l of piece t of band i in a reduction: its first row in the piece's
 * partials, its rows, its first row in owner l's result block, and the
 * result's row stride in column band j. */
typedef struct chunk_rows {
    uint32_t row0, band, result_row, stride;
} chunk_rows;

static chunk_rows chunk_of(const matmul_lowering *M, uint32_t i, uint32_t j, uint32_t l, uint32_t t)
{
    uint32_t lo, hi, r0, r1, s0, s1, m = M->ta->rows;
    ipu_matmul_chunk(m, &M->o->grid, i, l, t, &lo, &hi);
    ipu_band(m, M->gm, 1, i, &r0, &r1);
    ipu_band(r1 - r0, M->gk, 1, l, &s0, &s1);
    const ipu_layout *c = M->home_c;
    return (chunk_rows){ipu_matmul_piece_rows(m, &M->o->grid, i, l, t), hi - lo, lo - (r0 + s0),
                        ipu_layout_stride(c, c->col_bounds[j + 1] - c->col_bounds[j])};
}

/* Reduce piece t's partials: owner (i, j, l) of chunk l gathers the other
 * gk - 1 partials' chunk l into staging (slot q, or q - 1 past its own),
 * sums them by halves and adds its own chunk into its result rows. */
static ipu_status reduce_piece(matmul_lowering *M, uint32_t t, const uint32_t *partials, const char *label)
{
    lowering *L = M->L;
    ipu_low_program *p = L->prog;
    uint32_t gm = M->gm, gn = M->gn, gk = M->gk, out = (uint32_t)ipu_dtype_size(M->tc->dtype);
    uint32_t c_tensor = L->g->ops[M->index].out;
    size_t tiles = (size_t)gm * gn * gk;
    uint32_t *staging = ipu_calloc(L->ctx, tiles, sizeof *staging);
    if (!staging)
        return IPU_NO_MEMORY(L->ctx);
    int spare = 0, stale_slot = 0;
    ipu_status status = low_begin_step(L, IPU_LOW_COMPUTE, label);
    for (uint32_t i = 0; i < gm && status == IPU_OK; i++)
        for (uint32_t j = 0; j < gn && status == IPU_OK; j++)
            for (uint32_t l = 0; l < gk && status == IPU_OK; l++) {
                chunk_rows c = chunk_of(M, i, j, l, t);
                size_t s = ((size_t)i * gn + j) * gk + l;
                uint32_t tile = M->home_c->tiles[(size_t)(i * gk + l) * gn + j];
                /* Injected (first tile): one spare slot, which the sum then reads. */
                spare = s == 0 && ipu_low_take_inject(&p->inject, IPU_INJECT_REDUCE_STALE_SLOT);
                status = low_new_buffer(L, tile, (gk - 1 + (uint32_t)spare) * c.band * c.stride, c_tensor, 0, 0,
                                        "reduce-staging", &staging[s]);
                if (status == IPU_OK) {
                    L->cleared[staging[s]] = 1; /* fully written by the exchange */
                    low_use(L, staging[s]);
                }
                stale_slot |= spare;
            }
    if (status == IPU_OK)
        status = low_begin_step(L, IPU_LOW_EXCHANGE, label);
    /* Round d: owner l takes chunk l of partial (l + d) mod gk, so every
     * round pairs each sender with one receiver (a shifted all-to-all): the
     * exchange schedule, which breaks ties in this order, then keeps every
     * port busy instead of having all owners ask the same sender first. */
    for (uint32_t d = 1; d < gk && status == IPU_OK; d++)
        for (uint32_t i = 0; i < gm && status == IPU_OK; i++)
            for (uint32_t j = 0; j < gn && status == IPU_OK; j++)
                for (uint32_t l = 0; l < gk && status == IPU_OK; l++) {
                    chunk_rows c = chunk_of(M, i, j, l, t);
                    uint32_t to = staging[((size_t)i * gn + j) * gk + l];
                    uint32_t q = (l + d) % gk;
                    uint32_t from = partials[((size_t)i * gn + j) * gk + q];
                    uint32_t slot = q < l ? q : q - 1;
                    status = low_transfer(L, from, c.row0 * c.stride, c.band * c.stride, to, slot * c.band * c.stride);
                }
    if (status == IPU_OK)
        status = low_begin_step(L, IPU_LOW_COMPUTE, label);
    for (uint32_t i = 0; i < gm && status == IPU_OK; i++)
        for (uint32_t j = 0; j < gn && status == IPU_OK; j++)
            for (uint32_t l = 0; l < gk && status == IPU_OK; l++) {
                chunk_rows c = chunk_of(M, i, j, l, t);
                uint32_t bytes = c.band * c.stride, count = bytes / out, at = c.result_row * c.stride;
                uint32_t result = low_home_ids(L, c_tensor)[(size_t)(i * gk + l) * gn + j];
                uint32_t own = partials[((size_t)i * gn + j) * gk + l];
                uint32_t s = staging[((size_t)i * gn + j) * gk + l];
                uint32_t tile = p->buffers[result].tile;
                status = low_clear(L, result);
                /* Injected (first tile): the sum reads the spare slot no transfer wrote. */
                uint32_t first_slot = stale_slot && i + j + l == 0 ? (gk - 1) * bytes : 0;
                for (uint32_t n = gk - 1; n > 1 && status == IPU_OK;) {
                    uint32_t half = ipu_reduce_tree_half(n);
                    ipu_low_arg args[] = {BUF(s, 0), BUF(s, (n - half) * bytes), BUF(s, 0), LIT(half * count),
                                          LIT(M->tc->dtype)};
                    status = low_emit_kernel(L, tile, IPU_K_ADD, 5, args, -1, 0);
                    n -= half;
                }
                ipu_low_arg args[] = {BUF(own, c.row0 * c.stride), BUF(s, first_slot), BUF(result, at), LIT(count),
                                      LIT(M->tc->dtype)};
                ipu_low_arg own_only[] = {BUF(own, c.row0 * c.stride), BUF(result, at), LIT(bytes)};
                ipu_low_arg again[] = {BUF(result, at), BUF(s, 0), BUF(result, at), LIT(count), LIT(M->tc->dtype)};
                if (status == IPU_OK && ipu_low_take_inject(&p->inject, IPU_INJECT_REDUCE_DROP_PARTIAL))
                    status = low_emit_kernel(L, tile, IPU_K_COPY, 3, own_only, -1, 0);
                else if (status == IPU_OK)
                    status = low_emit_kernel(L, tile, IPU_K_ADD, 5, args, -1, 0);
                if (status == IPU_OK && ipu_low_take_inject(&p->inject, IPU_INJECT_REDUCE_DOUBLE_PARTIAL))
                    status = low_emit_kernel(L, tile, IPU_K_ADD, 5, again, -1, 0);
            }
    free(staging);
    return status;
}

/* A biased matmul's epilogue: the bias's current member comes to every
 * result block's tile, then one in-place BIAS call per block. */
static ipu_status add_bias(matmul_lowering *M, const char *label)
{
    lowering *L = M->L;
    const ipu_layout *c = M->home_c;
    const uint32_t *bias_ids, *c_ids = low_home_ids(L, L->g->ops[M->index].out);
    IPU_TRY(low_current_member(L, M->index, 2, &M->o->bias, label, &bias_ids));
    IPU_TRY(low_begin_step(L, IPU_LOW_COMPUTE, label));
    for (uint32_t i = 0; i < c->row_parts; i++)
        for (uint32_t j = 0; j < c->col_parts; j++) {
            size_t b = (size_t)i * c->col_parts + j;
            ipu_low_arg args[] = {BUF(c_ids[b], 0), BUF(bias_ids[b], 0), LIT(c->row_bounds[i + 1] - c->row_bounds[i]),
                                  LIT(c->col_bounds[j + 1] - c->col_bounds[j]), LIT(low_elements_per_row(c, j)),
                                  LIT(M->tc->dtype)};
            IPU_TRY(low_emit_kernel(L, ipu_layout_tile(c, i, j, 0), IPU_K_BIAS, 6, args, -1, 0));
        }
    return IPU_OK;
}

ipu_status ipu_lower_matmul(lowering *L, size_t index)
{
    const ipu_graph *g = L->g;
    const ipu_ir_op *op = &g->ops[index];
    const ipu_op_plan *o = &L->plan->ops[index];
    matmul_lowering M = {L, index, &g->tensors[op->in[0]], &g->tensors[op->in[1]], &g->tensors[op->out], o,
                         &L->plan->home[op->out], low_home_ids(L, op->in[1]), o->grid.gm, o->grid.gn,
                         o->grid.gk, o->grid.gs, 0, 0};
    const ipu_layout *home_a = &L->plan->home[op->in[0]];
    M.f8 = M.ta->dtype == IPU_DT_F143 || M.ta->dtype == IPU_DT_F152;
    /* Injected: the weight's scale folded into the activation's as well (every tile of this GEMM). */
    int scale_twice = M.f8 && L->prog->inject == IPU_INJECT_FP8_SCALE_TWICE;
    M.a_scale = M.ta->scale + (scale_twice ? M.tb->scale : 0);
    char label[64];
    snprintf(label, sizeof label, "op%zu matmul %.40s", index, M.tc->name);
    int in_place = ipu_layout_same(home_a, &o->a);
    uint32_t *partials = NULL;
    if (M.gk > 1) {
        partials = ipu_calloc(L->ctx, (size_t)M.gm * M.gn * M.gk, sizeof *partials);
        if (!partials)
            return IPU_NO_MEMORY(L->ctx);
    }
    ipu_status status = IPU_OK;
    if (o->grid.gather)
        status = low_current_member(L, index, 1, &o->b, label, &M.b_ids);
    /* Serial: when A's home cuts K other than the grid, A is first spread
     * over the grid on its K bands, so every piece then moves whole rows. */
    const ipu_layout *source = home_a;
    const uint32_t *source_ids = low_home_ids(L, op->in[0]);
    ipu_layout spread = {0};
    uint32_t *spread_ids = NULL;
    if (status == IPU_OK && M.gs > 1 && !in_place && !ipu_layout_same_columns(home_a, &o->a)) {
        char name[64];
        snprintf(name, sizeof name, "%.36s@op%zu.spread", M.ta->name, index);
        status = ipu_matmul_input_home(L->ctx, &o->grid, &o->a, 1, &spread);
        if (status == IPU_OK)
            status = low_layout_buffers(L, &spread, op->in[0], 1, IPU_LOW_OPERAND, name, &spread_ids);
        if (status == IPU_OK)
            status = low_redistribute(L, home_a, source_ids, &spread, spread_ids, label);
        source = &spread, source_ids = spread_ids;
    }
    for (uint32_t t = 0; t < M.gs && status == IPU_OK; t++) {
        const uint32_t *a_ids = NULL;
        uint32_t *piece_ids = NULL;
        ipu_layout piece = {0};
        const ipu_layout *a_layout = &o->a;
        if (M.gs == 1) {
            status = low_operand(L, index, 0, op->in[0], in_place ? &(ipu_layout){0} : &o->a, label, &a_ids);
        } else if (in_place) {
            a_ids = low_home_ids(L, op->in[0]);
        } else {
            char name[64];
            snprintf(name, sizeof name, "%.36s@op%zu#%u", M.ta->name, index, t);
            status = piece_layout(L, &o->a, M.ta->rows, &o->grid, t, &piece);
            if (status == IPU_OK)
                status = low_layout_buffers(L, &piece, op->in[0], 1, IPU_LOW_OPERAND, name, &piece_ids);
            if (status == IPU_OK)
                status = low_redistribute(L, source, source_ids, &piece, piece_ids, label);
            a_ids = piece_ids, a_layout = &piece;
        }
        if (status == IPU_OK)
            status = piece_gemms(&M, t, a_layout, a_ids, in_place && M.gs > 1, partials, label);
        if (status == IPU_OK && M.gk > 1)
            status = reduce_piece(&M, t, partials, label);
        free(piece_ids);
        ipu_layout_free(&piece);
    }
    free(spread_ids);
    ipu_layout_free(&spread);
    if (scale_twice)
        L->prog->inject = IPU_INJECT_NONE;
    if (status == IPU_OK && op->biased)
        status = add_bias(&M, label);
    if (status == IPU_OK)
        status = record_blocks(L, index, M.ta->rows, &o->grid, &o->b, &o->a, M.home_c);
    free(partials);
    return status;
}
