/* attention.c: lowering attention and MAP pooling (planned by
 * plan/attention.c; plan.h describes the work units and layouts).  Two steps
 * bring every unit its queries and its image's keys and values for its head
 * (multicast to every query band); then each unit computes on its own tile:
 *   flash         ATTN_BLOCK per 64 keys into an FP32 state [m, l, O] per
 *                 query, then ATTN_FINISH into the result block;
 *   materialized  per chunk of queries: ATTN_SCORES (scaled, FP32), SOFTMAX
 *                 (FP16 probabilities), GEMM_F16 P.V into the result block.
 * The scale is 1 / sqrt(head_dim), applied to the scores in FP32.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lower/lowering.h"
#include "numerics/numerics.h"

#define FLASH_KEYS 64u

typedef struct unit {
    uint32_t tile, rows;
    uint32_t q, k, v, out;          /* buffers */
    uint32_t ldq, ldk, ldv, ldout;  /* row strides in elements */
} unit;

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static ipu_status flash(lowering *L, const ipu_attention_shape *s, const unit *u, uint32_t scale,
                        const char *name)
{
    uint32_t d = s->head_dim, state;
    IPU_TRY(low_new_buffer(L, u->tile, u->rows * (d + 2) * 4, IPU_LOW_LITERAL, 0, 0, name, &state));
    for (uint32_t k0 = 0; k0 < s->seq; k0 += FLASH_KEYS) {
        uint32_t keys = s->seq - k0 < FLASH_KEYS ? s->seq - k0 : FLASH_KEYS;
        ipu_low_arg args[] = {BUF(u->q, 0),
                              BUF(u->k, k0 * u->ldk * 2),
                              BUF(u->v, k0 * u->ldv * 2),
                              BUF(state, 0),
                              LIT(u->rows),
                              LIT(keys),
                              LIT(keys),
                              LIT(d),
                              LIT(u->ldq),
                              LIT(u->ldk),
                              LIT(u->ldv),
                              LIT(d + 2),
                              LIT(scale),
                              LIT(k0 ? IPU_GEMM_ACCUMULATE : 0)};
        IPU_TRY(low_emit_kernel(L, u->tile, IPU_K_ATTN_BLOCK, 14, args, -1, 0));
    }
    ipu_low_arg args[] = {BUF(state, 0), BUF(u->out, 0), LIT(u->rows), LIT(d),
                          LIT(d + 2),    LIT(u->ldout),  LIT(IPU_DT_F16)};
    return low_emit_kernel(L, u->tile, IPU_K_ATTN_FINISH, 7, args, -1, 0);
}

static ipu_status materialized(lowering *L, const ipu_attention_shape *s, const unit *u,
                               uint32_t chunk, uint32_t scale, const char *name)
{
    uint32_t d = s->head_dim, seq = s->seq, scores, probs;
    chunk = chunk < u->rows ? chunk : u->rows;
    IPU_TRY(low_new_buffer(L, u->tile, chunk * seq * 4, IPU_LOW_LITERAL, 0, 0, name, &scores));
    IPU_TRY(low_new_buffer(L, u->tile, chunk * seq * 2, IPU_LOW_LITERAL, 0, 0, name, &probs));
    for (uint32_t r0 = 0; r0 < u->rows; r0 += chunk) {
        uint32_t n = u->rows - r0 < chunk ? u->rows - r0 : chunk;
        ipu_low_arg sc[] = {BUF(u->q, r0 * u->ldq * 2), BUF(u->k, 0), BUF(scores, 0), LIT(n), LIT(seq),
                            LIT(d), LIT(u->ldq), LIT(u->ldk), LIT(seq), LIT(scale)};
        IPU_TRY(low_emit_kernel(L, u->tile, IPU_K_ATTN_SCORES, 10, sc, -1, 0));
        ipu_low_arg sm[] = {BUF(scores, 0), BUF(probs, 0), LIT(n), LIT(seq), LIT(seq),
                            LIT(IPU_DT_F32), LIT(IPU_DT_F16), LIT(seq), LIT(seq), LIT(f32_bits(1.0f))};
        IPU_TRY(low_emit_kernel(L, u->tile, IPU_K_SOFTMAX, 10, sm, -1, 0));
        ipu_low_arg pv[] = {BUF(probs, 0), BUF(u->v, 0), BUF(u->out, r0 * u->ldout * 2), LIT(n),
                            LIT(d), LIT(seq), LIT(IPU_DT_F16), LIT(0), LIT(seq), LIT(u->ldv),
                            LIT(u->ldout)};
        IPU_TRY(low_emit_kernel(L, u->tile, IPU_K_GEMM_F16, 11, pv, -1, 0));
    }
    return IPU_OK;
}

ipu_status ipu_lower_attention(lowering *L, size_t index)
{
    const ipu_graph *g = L->g;
    const ipu_ir_op *op = &g->ops[index];
    const ipu_op_plan *o = &L->plan->ops[index];
    int map = op->kind == IPU_IR_MAP_POOL;
    ipu_attention_shape s;
    ipu_attention_shape_of(g, op, o->query_bands, &s);
    char label[64], name[64];
    snprintf(label, sizeof label, "op%zu %s %.40s", index, ipu_ir_op_name(op->kind),
             g->tensors[op->out].name);
    snprintf(name, sizeof name, "%.40s.%s", g->tensors[op->out].name,
             o->attention == IPU_ATTENTION_FLASH ? "state" : "scores");
    const uint32_t *q_ids, *kv_ids, *out_ids = low_home_ids(L, op->out);
    IPU_TRY(low_operand(L, index, 0, op->in[0], &o->a, label, &q_ids));
    IPU_TRY(low_operand(L, index, 1, op->in[map], &o->b, label, &kv_ids));
    const ipu_layout *out = &L->plan->home[op->out];
    uint32_t H = s.heads, parts = s.kv_parts * H, scale = f32_bits(1.0f / sqrtf((float)s.head_dim));
    IPU_TRY(low_begin_step(L, IPU_LOW_COMPUTE, label));
    for (uint32_t b = 0; b < s.images; b++)
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t q = 0; q < s.bands; q++) {
                uint32_t band = b * s.bands + q;
                size_t kv = ((size_t)q * s.images + b) * parts;
                unit u = {0};
                u.rows = out->row_bounds[band + 1] - out->row_bounds[band];
                u.q = map ? q_ids[b * H + h] : q_ids[(size_t)band * 3 * H + h];
                u.k = kv_ids[kv + s.k_part + h];
                u.v = kv_ids[kv + s.v_part + h];
                u.out = out_ids[(size_t)band * H + h];
                u.tile = L->prog->buffers[u.out].tile;
                u.ldq = low_elements_per_row(&o->a, h);
                u.ldk = low_elements_per_row(&o->b, s.k_part + h);
                u.ldv = low_elements_per_row(&o->b, s.v_part + h);
                u.ldout = low_elements_per_row(out, h);
                IPU_TRY(low_clear(L, u.out));
                if (o->attention == IPU_ATTENTION_FLASH)
                    IPU_TRY(flash(L, &s, &u, scale, name));
                else
                    IPU_TRY(materialized(L, &s, &u, o->chunk_rows, scale, name));
            }
    return IPU_OK;
}
