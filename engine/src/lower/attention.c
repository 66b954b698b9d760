/* attention.c: lowering attention and MAP pooling (planned by
 * plan/attention.c; plan.h describes the work units and layouts).  One step
 * brings every unit its queries; the keys and values of its image and head
 * arrive a part at a time (multicast to every query band), each part on
 * buffers of its own so only one is resident:
 *   flash         per key chunk: its keys and values, then ATTN_BLOCK per 64
 *                 keys into an FP32 state [m, l, O] per query; ATTN_FINISH
 *                 writes the result block;
 *   flash split   over key bands: every band's chunk in one step, each unit
 *                 runs ATTN_BLOCK over its band into its state; then the
 *                 units of a query band trade their states (round d: unit kk
 *                 sends sub-band (kk + d) mod key_bands of its rows), and
 *                 the owner of each sub-band merges the bands' states in key
 *                 order (ATTN_MERGE) and finishes it;
 *   materialized  all keys, then per chunk of queries ATTN_SCORES (scaled,
 *                 FP32) and SOFTMAX into the unit's FP16 probabilities; then
 *                 all values and one GEMM_F16 P.V into the result block.
 * The scale is 1 / sqrt(head_dim), applied to the scores in FP32.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/lowering.h"
#include "numerics/numerics.h"

#define FLASH_KEYS 64u

typedef struct unit {
    uint32_t tile, rows;           /* rows: its queries */
    uint32_t out_row, out_rows;    /* its result rows: from row out_row of its queries (a sub-band when split) */
    uint32_t q, out, scratch;      /* buffers (scratch: flash state or probabilities) */
    uint32_t ldq, ldk, ldv, ldout; /* row strides in elements */
} unit;

typedef struct attention {
    lowering *L;
    size_t index;
    const ipu_op_plan *o;
    ipu_attention_shape s;
    uint32_t kv_tensor, scale;
    unit *units; /* ((b * heads + h) * bands + q) * key_bands + kk */
    char label[64];
} attention;

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Key chunk `chunk` (keys, values or both; ALL_CHUNKS: every chunk, each on
 * its own key band's units) on buffers of its own, brought over from the
 * home: ids per block of the b layout, absent ones literal. */
#define ALL_CHUNKS UINT32_MAX
static ipu_status bring_part(attention *A, uint32_t chunk, int keys, int values, uint32_t **ids)
{
    const ipu_attention_shape *s = &A->s;
    ipu_layout part;
    IPU_TRY(ipu_layout_copy(A->L->ctx, &part, &A->o->b));
    uint32_t parts = s->kv_parts * s->heads, bands = s->images * s->key_chunks;
    for (size_t b = 0; b < (size_t)s->bands * bands * parts; b++) {
        uint32_t band = (uint32_t)(b / parts % bands), j = (uint32_t)(b % parts);
        int is_key = j >= s->k_part && j < s->k_part + s->heads;
        if ((chunk != ALL_CHUNKS && band % s->key_chunks != chunk) || (is_key ? !keys : !values))
            part.tiles[b] = IPU_LAYOUT_ABSENT;
    }
    char name[64];
    snprintf(name, sizeof name, "%.32s@op%zu.%s", A->L->g->tensors[A->kv_tensor].name, A->index,
             keys && values ? "kv" : keys ? "k" : "v");
    ipu_status status = low_layout_buffers(A->L, &part, A->kv_tensor, 1, IPU_LOW_OPERAND, name, ids);
    if (status == IPU_OK)
        status = low_redistribute(A->L, &A->L->plan->home[A->kv_tensor], low_home_ids(A->L, A->kv_tensor),
                                  &part, *ids, A->label);
    if (status != IPU_OK) {
        free(*ids);
        *ids = NULL;
    }
    ipu_layout_free(&part);
    return status;
}

/* The key (or value) buffer of unit (b, h, q) for chunk c. */
static uint32_t kv_buffer(const attention *A, const uint32_t *ids, uint32_t b, uint32_t h, uint32_t q,
                          uint32_t c, int value)
{
    const ipu_attention_shape *s = &A->s;
    uint32_t parts = s->kv_parts * s->heads, bands = s->images * s->key_chunks;
    return ids[((size_t)q * bands + b * s->key_chunks + c) * parts + (value ? s->v_part : s->k_part) + h];
}

static ipu_status flash(attention *A)
{
    lowering *L = A->L;
    const ipu_attention_shape *s = &A->s;
    uint32_t d = s->head_dim, H = s->heads;
    char name[64];
    snprintf(name, sizeof name, "%.40s.state", L->g->tensors[L->g->ops[A->index].out].name);
    /* Injected: every unit's tail block drops its last key, or takes one more. */
    int drop_tail = ipu_low_take_inject(&L->prog->inject, IPU_INJECT_ATTN_TAIL_KEY_DROPPED);
    int extra_key = !drop_tail && s->seq % FLASH_KEYS &&
                    ipu_low_take_inject(&L->prog->inject, IPU_INJECT_ATTN_MASK_OFF_BY_ONE);
    /* Injected: a key chunk after the first starts the running state afresh
     * (its first block's key offset taken within the chunk, not the image). */
    int chunk_restarts = s->key_chunks > 1 && ipu_low_take_inject(&L->prog->inject, IPU_INJECT_FLASH_CHUNK_RESTARTS);
    for (uint32_t c = 0; c < s->key_chunks; c++) {
        uint32_t *ids = NULL, k_first = c * s->chunk_keys;
        uint32_t k_end = k_first + s->chunk_keys < s->seq ? k_first + s->chunk_keys : s->seq;
        IPU_TRY(bring_part(A, c, 1, 1, &ids));
        ipu_status status = low_begin_step(L, IPU_LOW_COMPUTE, A->label);
        for (uint32_t b = 0; b < s->images && status == IPU_OK; b++)
            for (uint32_t h = 0; h < H && status == IPU_OK; h++)
                for (uint32_t q = 0; q < s->bands && status == IPU_OK; q++) {
                    unit *u = &A->units[(b * H + h) * s->bands + q];
                    uint32_t k = kv_buffer(A, ids, b, h, q, c, 0), v = kv_buffer(A, ids, b, h, q, c, 1);
                    if (c == 0)
                        status = low_new_buffer(L, u->tile, u->rows * (d + 2) * 4, IPU_LOW_LITERAL, 0, 0,
                                                name, &u->scratch);
                    for (uint32_t k0 = k_first; k0 < k_end && status == IPU_OK; k0 += FLASH_KEYS) {
                        uint32_t keys = k_end - k0 < FLASH_KEYS ? k_end - k0 : FLASH_KEYS, valid = keys;
                        int tail = k0 + keys == s->seq;
                        if (tail && drop_tail && keys > 1)
                            valid = keys - 1;
                        if (tail && extra_key)
                            keys = valid = keys + 1;
                        ipu_low_arg args[] = {BUF(u->q, 0),
                                              BUF(k, (k0 - k_first) * u->ldk * 2),
                                              BUF(v, (k0 - k_first) * u->ldv * 2),
                                              BUF(u->scratch, 0),
                                              LIT(u->rows),
                                              LIT(keys),
                                              LIT(valid),
                                              LIT(d),
                                              LIT(u->ldq),
                                              LIT(u->ldk),
                                              LIT(u->ldv),
                                              LIT(d + 2),
                                              LIT(A->scale),
                                              LIT((chunk_restarts ? k0 - k_first : k0) ? IPU_GEMM_ACCUMULATE : 0)};
                        status = low_emit_kernel(L, u->tile, IPU_K_ATTN_BLOCK, 14, args, -1, 0);
                    }
                    if (status == IPU_OK && c + 1 == s->key_chunks) {
                        status = low_clear(L, u->out);
                        ipu_low_arg args[] = {BUF(u->scratch, 0), BUF(u->out, 0), LIT(u->rows), LIT(d),
                                              LIT(d + 2),         LIT(u->ldout),  LIT(IPU_DT_F16)};
                        if (status == IPU_OK)
                            status = low_emit_kernel(L, u->tile, IPU_K_ATTN_FINISH, 7, args, -1, 0);
                    }
                }
        free(ids);
        IPU_TRY(status);
    }
    return IPU_OK;
}

/* The bands a reference needs to compute as the device does, bounds[0..n]
 * within an image (materialized: the query rows of each unit's P V GEMM;
 * split flash: the keys of each band): band i is [i * size, (i + 1) * size)
 * of total, or ipu_band's of `parts` when size is 0. */
static ipu_status record_bands(attention *A, uint32_t n, uint32_t total, uint32_t size)
{
    ipu_low_op *record = &A->L->prog->ops[A->index];
    free(record->attention_bounds);
    record->attention_bands = 0;
    record->attention_bounds = ipu_malloc(A->L->ctx, ((size_t)n + 1) * sizeof *record->attention_bounds);
    if (!record->attention_bounds)
        return IPU_NO_MEMORY(A->L->ctx);
    record->attention_bands = n;
    record->attention_bounds[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t lo, hi = (i + 1) * size < total ? (i + 1) * size : total;
        if (!size)
            ipu_band(total, n, 1, i, &lo, &hi);
        record->attention_bounds[i + 1] = hi;
    }
    return IPU_OK;
}

/* Flash over key bands (see the top): units (b, h, q, kk) of one query band
 * each take its band's keys, then trade and merge their states. */
static ipu_status flash_split(attention *A)
{
    lowering *L = A->L;
    const ipu_attention_shape *s = &A->s;
    uint32_t d = s->head_dim, H = s->heads, kb = s->key_bands, w = (d + 2) * 4;
    size_t units = (size_t)s->images * H * s->bands * kb;
    const char *out_name = L->g->tensors[L->g->ops[A->index].out].name;
    char name[64];
    uint32_t *ids = NULL;
    IPU_TRY(record_bands(A, kb, s->seq, s->chunk_keys));
    IPU_TRY(bring_part(A, ALL_CHUNKS, 1, 1, &ids));
    snprintf(name, sizeof name, "%.40s.state", out_name);
    ipu_status status = low_begin_step(L, IPU_LOW_COMPUTE, A->label);
    for (size_t n = 0; n < units && status == IPU_OK; n++) {
        unit *u = &A->units[n];
        uint32_t kk = (uint32_t)(n % kb), q = (uint32_t)(n / kb % s->bands), h = (uint32_t)(n / kb / s->bands % H),
                 b = (uint32_t)(n / kb / s->bands / H);
        uint32_t k0 = kk * s->chunk_keys, k1 = k0 + s->chunk_keys < s->seq ? k0 + s->chunk_keys : s->seq;
        uint32_t k = kv_buffer(A, ids, b, h, q, kk, 0), v = kv_buffer(A, ids, b, h, q, kk, 1);
        status = low_new_buffer(L, u->tile, u->rows * w, IPU_LOW_LITERAL, 0, 0, name, &u->scratch);
        for (uint32_t at = k0; at < k1 && status == IPU_OK; at += FLASH_KEYS) {
            uint32_t keys = k1 - at < FLASH_KEYS ? k1 - at : FLASH_KEYS;
            ipu_low_arg args[] = {BUF(u->q, 0),     BUF(k, (at - k0) * u->ldk * 2),
                                  BUF(v, (at - k0) * u->ldv * 2), BUF(u->scratch, 0),
                                  LIT(u->rows),     LIT(keys),
                                  LIT(keys),        LIT(d),
                                  LIT(u->ldq),      LIT(u->ldk),
                                  LIT(u->ldv),      LIT(d + 2),
                                  LIT(A->scale),    LIT(at > k0 ? IPU_GEMM_ACCUMULATE : 0)};
            status = low_emit_kernel(L, u->tile, IPU_K_ATTN_BLOCK, 14, args, -1, 0);
        }
    }
    free(ids);
    /* Every owner gathers the other bands' states of its sub-band: band j in slot j (j < kk) or j - 1. */
    uint32_t *staging = ipu_calloc(L->ctx, units, sizeof *staging);
    if (!staging)
        return IPU_NO_MEMORY(L->ctx);
    snprintf(name, sizeof name, "%.40s.states", out_name);
    for (size_t n = 0; n < units && status == IPU_OK; n++) {
        unit *u = &A->units[n];
        status = low_new_buffer(L, u->tile, (kb - 1) * u->out_rows * w, IPU_LOW_LITERAL, 0, 0, name, &staging[n]);
        if (status == IPU_OK) {
            L->cleared[staging[n]] = 1; /* fully written by the exchange */
            low_use(L, staging[n]);
        }
    }
    if (status == IPU_OK)
        status = low_begin_step(L, IPU_LOW_EXCHANGE, A->label);
    for (uint32_t round = 1; round < kb && status == IPU_OK; round++)
        for (size_t n = 0; n < units && status == IPU_OK; n++) {
            uint32_t kk = (uint32_t)(n % kb), to = (kk + round) % kb;
            size_t owner = n - kk + to;
            const unit *u = &A->units[n], *o = &A->units[owner];
            uint32_t slot = kk < to ? kk : kk - 1;
            status = low_transfer(L, u->scratch, o->out_row * w, o->out_rows * w, staging[owner], slot * o->out_rows * w);
        }
    /* The owner folds bands 1, 2, ... into band 0's state, then finishes. */
    if (status == IPU_OK)
        status = low_begin_step(L, IPU_LOW_COMPUTE, A->label);
    for (size_t n = 0; n < units && status == IPU_OK; n++) {
        unit *u = &A->units[n];
        uint32_t kk = (uint32_t)(n % kb), acc = kk ? staging[n] : u->scratch;
        uint32_t acc_at = kk ? 0 : u->out_row * w, rows = u->out_rows;
        for (uint32_t band = 1; band < kb && status == IPU_OK; band++) {
            uint32_t other = band == kk ? u->scratch : staging[n];
            uint32_t other_at = band == kk ? u->out_row * w : (band < kk ? band : band - 1) * rows * w;
            ipu_low_arg args[] = {BUF(acc, acc_at), BUF(other, other_at), LIT(rows), LIT(d), LIT(d + 2), LIT(d + 2)};
            status = low_emit_kernel(L, u->tile, IPU_K_ATTN_MERGE, 6, args, -1, 0);
        }
        if (status == IPU_OK)
            status = low_clear(L, u->out);
        ipu_low_arg finish[] = {BUF(acc, acc_at), BUF(u->out, 0), LIT(rows), LIT(d), LIT(d + 2), LIT(u->ldout),
                                LIT(IPU_DT_F16)};
        if (status == IPU_OK)
            status = low_emit_kernel(L, u->tile, IPU_K_ATTN_FINISH, 7, finish, -1, 0);
    }
    free(staging);
    return status;
}

static ipu_status materialized(attention *A)
{
    lowering *L = A->L;
    const ipu_attention_shape *s = &A->s;
    uint32_t d = s->head_dim, seq = s->seq, H = s->heads, units = s->images * H * s->bands;
    /* Probability rows start on 8 bytes; softmax zeroes their padding. */
    uint32_t ldp = (seq + 3u) & ~3u;
    char name[64];
    const char *out_name = L->g->tensors[L->g->ops[A->index].out].name;
    uint32_t *ids = NULL;
    IPU_TRY(record_bands(A, s->bands, s->queries, 0));
    IPU_TRY(bring_part(A, 0, 1, 0, &ids));
    /* Injected: every softmax masks the last valid key. */
    uint32_t valid = seq > 1 && ipu_low_take_inject(&L->prog->inject, IPU_INJECT_SOFTMAX_VALID_SHORT) ? seq - 1 : seq;
    ipu_status status = low_begin_step(L, IPU_LOW_COMPUTE, A->label);
    for (uint32_t n = 0; n < units && status == IPU_OK; n++) {
        unit *u = &A->units[n];
        uint32_t b = n / s->bands / H, h = n / s->bands % H, q = n % s->bands, scores;
        uint32_t k = kv_buffer(A, ids, b, h, q, 0, 0), chunk = A->o->chunk_rows;
        chunk = chunk < u->rows ? chunk : u->rows;
        snprintf(name, sizeof name, "%.40s.probabilities", out_name);
        status = low_new_buffer(L, u->tile, u->rows * ldp * 2, IPU_LOW_LITERAL, 0, 0, name, &u->scratch);
        snprintf(name, sizeof name, "%.40s.scores", out_name);
        if (status == IPU_OK)
            status = low_new_buffer(L, u->tile, chunk * seq * 4, IPU_LOW_LITERAL, 0, 0, name, &scores);
        for (uint32_t r0 = 0; r0 < u->rows && status == IPU_OK; r0 += chunk) {
            uint32_t rows = u->rows - r0 < chunk ? u->rows - r0 : chunk;
            ipu_low_arg sc[] = {BUF(u->q, r0 * u->ldq * 2), BUF(k, 0), BUF(scores, 0), LIT(rows), LIT(seq),
                                LIT(d), LIT(u->ldq), LIT(u->ldk), LIT(seq), LIT(A->scale)};
            ipu_low_arg sm[] = {BUF(scores, 0), BUF(u->scratch, r0 * ldp * 2), LIT(rows), LIT(ldp), LIT(valid),
                                LIT(IPU_DT_F32), LIT(IPU_DT_F16), LIT(seq), LIT(ldp), LIT(f32_bits(1.0f))};
            status = low_emit_kernel(L, u->tile, IPU_K_ATTN_SCORES, 10, sc, -1, 0);
            if (status == IPU_OK)
                status = low_emit_kernel(L, u->tile, IPU_K_SOFTMAX, 10, sm, -1, 0);
        }
    }
    free(ids);
    ids = NULL;
    IPU_TRY(status);
    IPU_TRY(bring_part(A, 0, 0, 1, &ids));
    status = low_begin_step(L, IPU_LOW_COMPUTE, A->label);
    for (uint32_t n = 0; n < units && status == IPU_OK; n++) {
        unit *u = &A->units[n];
        uint32_t b = n / s->bands / H, h = n / s->bands % H, q = n % s->bands;
        status = low_clear(L, u->out);
        ipu_low_arg pv[] = {BUF(u->scratch, 0), BUF(kv_buffer(A, ids, b, h, q, 0, 1), 0), BUF(u->out, 0),
                            LIT(u->rows), LIT(d), LIT(seq), LIT(IPU_DT_F16), LIT(0), LIT(ldp),
                            LIT(u->ldv), LIT(u->ldout)};
        if (status == IPU_OK)
            status = low_emit_kernel(L, u->tile, IPU_K_GEMM_F16, 11, pv, -1, 0);
    }
    free(ids);
    return status;
}

ipu_status ipu_lower_attention(lowering *L, size_t index)
{
    const ipu_graph *g = L->g;
    const ipu_ir_op *op = &g->ops[index];
    int map = op->kind == IPU_IR_MAP_POOL;
    attention A = {L, index, &L->plan->ops[index], {0}, op->in[map], 0, NULL, {0}};
    const ipu_op_plan *o = A.o;
    ipu_attention_shape *s = &A.s;
    ipu_attention_shape_of(g, op, o->query_bands, o->chunk_keys, o->key_bands, s);
    A.scale = f32_bits(1.0f / sqrtf((float)s->head_dim));
    if (ipu_low_take_inject(&L->prog->inject, IPU_INJECT_ATTN_SCALE_MISSING))
        A.scale = f32_bits(1.0f);
    snprintf(A.label, sizeof A.label, "op%zu %s %.40s", index, ipu_ir_op_name(op->kind),
             g->tensors[op->out].name);
    const uint32_t *q_ids, *out_ids = low_home_ids(L, op->out);
    IPU_TRY(low_operand(L, index, 0, op->in[0], &o->a, A.label, &q_ids));
    const ipu_layout *out = &L->plan->home[op->out];
    uint32_t H = s->heads, kb = s->key_bands, units = s->images * H * s->bands * kb;
    size_t query_blocks = (size_t)s->images * s->bands * 3 * H; /* one replica of the queries' layout */
    A.units = ipu_calloc(L->ctx, units, sizeof *A.units);
    if (!A.units)
        return IPU_NO_MEMORY(L->ctx);
    for (uint32_t b = 0; b < s->images; b++)
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t q = 0; q < s->bands; q++)
                for (uint32_t kk = 0; kk < kb; kk++) {
                    uint32_t band = b * s->bands + q, sub = band * kb + kk;
                    unit *u = &A.units[((b * H + h) * s->bands + q) * kb + kk];
                    u->rows = out->row_bounds[(band + 1) * kb] - out->row_bounds[band * kb];
                    u->out_row = out->row_bounds[sub] - out->row_bounds[band * kb];
                    u->out_rows = out->row_bounds[sub + 1] - out->row_bounds[sub];
                    u->q = map ? q_ids[b * H + h] : q_ids[kk * query_blocks + (size_t)band * 3 * H + h];
                    u->out = out_ids[(size_t)sub * H + h];
                    u->tile = L->prog->buffers[u->out].tile;
                    u->ldq = low_elements_per_row(&o->a, h);
                    u->ldk = low_elements_per_row(&o->b, s->k_part + h);
                    u->ldv = low_elements_per_row(&o->b, s->v_part + h);
                    u->ldout = low_elements_per_row(out, h);
                }
    ipu_status status = o->attention != IPU_ATTENTION_FLASH ? materialized(&A) : kb > 1 ? flash_split(&A) : flash(&A);
    free(A.units);
    return status;
}
