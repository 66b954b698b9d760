/* attention.c: planning attention and MAP pooling (plan.h describes the
 * work units and their layouts).  Every (image, head) pair gets an equal
 * share of the device, cut into query bands (MAP pooling has one query, so
 * one band); each unit receives its queries and its image's keys and values
 * for its head.  Flash attention receives the keys and values in chunks of
 * whole 64-key blocks (both of one chunk within KV_CHUNK_BYTES), runs
 * ATTN_BLOCK over each block and ATTN_FINISH at the end; materialized
 * attention receives all keys, runs ATTN_SCORES and SOFTMAX per chunk of
 * queries whose scores fit in CHUNK_BYTES (keeping every query's FP16
 * probabilities), then receives all values for one P.V GEMM.  "auto" takes
 * the cheaper mode (flash on ties) when both fit in the room the planner
 * keeps for the largest matmul's moving data, else the smaller one.
 */
#include <string.h>

#include "kernels/kernels.h"
#include "numerics/numerics.h"
#include "plan/plan.h"

#define FLASH_KEYS 64u
/* Keys and values of one flash chunk. */
#define KV_CHUNK_BYTES (64u * 1024u)
/* FP32 scores of one materialized chunk of queries. */
#define CHUNK_BYTES (32u * 1024u)

void ipu_attention_shape_of(const ipu_graph *g, const ipu_ir_op *op, uint32_t bands,
                            uint32_t chunk_keys, uint32_t key_bands, ipu_attention_shape *s)
{
    int map = op->kind == IPU_IR_MAP_POOL;
    const ipu_ir_tensor *kv = &g->tensors[op->in[map ? 1 : 0]];
    memset(s, 0, sizeof *s);
    s->heads = op->heads, s->head_dim = op->head_dim, s->seq = op->seq;
    s->images = kv->rows / op->seq;
    s->queries = map ? 1 : op->seq;
    s->bands = bands;
    s->chunk_keys = chunk_keys < op->seq ? chunk_keys : op->seq;
    s->key_chunks = (op->seq + s->chunk_keys - 1) / s->chunk_keys;
    s->key_bands = key_bands > 1 ? key_bands : 1;
    s->kv_parts = map ? 2 : 3;
    s->k_part = map ? 0 : op->heads;
    s->v_part = s->k_part + op->heads;
}

static uint32_t unit_tile(const ipu_attention_shape *s, uint32_t b, uint32_t h, uint32_t q, uint32_t kk)
{
    return ((b * s->heads + h) * s->bands + q) * s->key_bands + kk;
}

/* Column bands of head_dim columns each (every head of q, k or v). */
static void head_columns(ipu_layout *l, const ipu_attention_shape *s)
{
    for (uint32_t j = 0; j <= l->col_parts; j++)
        l->col_bounds[j] = j * s->head_dim;
}

/* Row bands of the query bands, each cut into `cuts` sub-bands. */
static void query_rows(ipu_layout *l, const ipu_attention_shape *s, uint32_t cuts)
{
    for (uint32_t b = 0; b < s->images; b++)
        for (uint32_t q = 0; q < s->bands; q++) {
            uint32_t lo, hi;
            ipu_band(s->queries, s->bands, 1, q, &lo, &hi);
            for (uint32_t kk = 0; kk < cuts; kk++) {
                uint32_t s0, s1;
                ipu_band(hi - lo, cuts, 1, kk, &s0, &s1);
                l->row_bounds[(b * s->bands + q) * cuts + kk + 1] = b * s->queries + lo + s1;
            }
        }
}

static ipu_status layouts(ipu_ctx *ctx, ipu_plan *plan, size_t index, const ipu_attention_shape *s)
{
    const ipu_graph *g = plan->graph;
    const ipu_ir_op *op = &g->ops[index];
    ipu_op_plan *o = &plan->ops[index];
    const ipu_ir_tensor *tq = &g->tensors[op->in[0]], *tkv = &g->tensors[op->in[op->kind == IPU_IR_MAP_POOL]];
    uint32_t H = s->heads, units = s->images * s->bands, kb = s->key_bands;
    if (op->kind == IPU_IR_MAP_POOL) {
        IPU_TRY(ipu_layout_alloc(ctx, &o->a, 1, tq->cols, 2, 1, H, s->images));
        o->a.row_bounds[1] = 1;
        for (uint32_t b = 0; b < s->images; b++)
            for (uint32_t h = 0; h < H; h++)
                o->a.tiles[b * H + h] = unit_tile(s, b, h, 0, 0);
    } else {
        /* Replica kk: the queries of key band kk's units. */
        IPU_TRY(ipu_layout_alloc(ctx, &o->a, tq->rows, tq->cols, 2, units, 3 * H, kb));
        query_rows(&o->a, s, 1);
        for (uint32_t kk = 0; kk < kb; kk++)
            for (uint32_t b = 0; b < s->images; b++)
                for (uint32_t q = 0; q < s->bands; q++)
                    for (uint32_t j = 0; j < 3 * H; j++)
                        o->a.tiles[((size_t)kk * units + b * s->bands + q) * 3 * H + j] =
                            j < H ? unit_tile(s, b, j, q, kk) : IPU_LAYOUT_ABSENT;
    }
    head_columns(&o->a, s);
    uint32_t parts = s->kv_parts * H;
    uint32_t nk = s->key_chunks;
    IPU_TRY(ipu_layout_alloc(ctx, &o->b, tkv->rows, tkv->cols, 2, s->images * nk, parts, s->bands));
    head_columns(&o->b, s);
    for (uint32_t b = 0; b < s->images; b++)
        for (uint32_t c = 0; c < nk; c++) {
            uint32_t end = (c + 1) * s->chunk_keys;
            o->b.row_bounds[b * nk + c + 1] = b * s->seq + (end < s->seq ? end : s->seq);
        }
    for (uint32_t q = 0; q < s->bands; q++)
        for (uint32_t band = 0; band < s->images * nk; band++)
            for (uint32_t j = 0; j < parts; j++) {
                /* Split keys: chunk c is key band c's. */
                uint32_t tile = IPU_LAYOUT_ABSENT, b = band / nk, kk = kb > 1 ? band % nk : 0;
                if (j >= s->k_part && j < s->k_part + H)
                    tile = unit_tile(s, b, j - s->k_part, q, kk);
                else if (j >= s->v_part && j < s->v_part + H)
                    tile = unit_tile(s, b, j - s->v_part, q, kk);
                o->b.tiles[((size_t)q * s->images * nk + band) * parts + j] = tile;
            }
    ipu_layout *out = &plan->home[op->out];
    IPU_TRY(ipu_layout_alloc(ctx, out, s->images * s->queries, H * s->head_dim,
                             (uint32_t)ipu_dtype_size(g->tensors[op->out].dtype), units * kb, H, 1));
    query_rows(out, s, kb);
    head_columns(out, s);
    for (uint32_t b = 0; b < s->images; b++)
        for (uint32_t q = 0; q < s->bands; q++)
            for (uint32_t kk = 0; kk < kb; kk++)
                for (uint32_t h = 0; h < H; h++)
                    out->tiles[((size_t)(b * s->bands + q) * kb + kk) * H + h] = unit_tile(s, b, h, q, kk);
    return IPU_OK;
}

static uint64_t cycles_of(const ipu_profile *p, int entry, const uint32_t *args, uint32_t argc)
{
    ipu_kernel_call call = {0};
    call.entry = entry;
    memcpy(call.args, args, argc * sizeof *args);
    return ipu_kernel_cycles(&call, p);
}

/* Compute cycles of one unit of `rows` queries in each mode (flash: over
 * `keys` keys, its key band, then with key_bands > 1 the merges and finish
 * of its sub-band of the rows). */
static uint64_t flash_cycles(const ipu_profile *p, const ipu_attention_shape *s, uint32_t rows, uint32_t keys,
                             uint32_t key_bands)
{
    uint64_t total = 0;
    for (uint32_t k0 = 0; k0 < keys; k0 += FLASH_KEYS) {
        uint32_t n = keys - k0 < FLASH_KEYS ? keys - k0 : FLASH_KEYS;
        uint32_t block[8] = {0, 0, 0, 0, rows, n, n, s->head_dim};
        total += cycles_of(p, IPU_K_ATTN_BLOCK, block, 8);
    }
    uint32_t sub = (rows + key_bands - 1) / key_bands;
    uint32_t merge[4] = {0, 0, sub, s->head_dim}, finish[4] = {0, 0, sub, s->head_dim};
    return total + (key_bands - 1) * cycles_of(p, IPU_K_ATTN_MERGE, merge, 4) +
           cycles_of(p, IPU_K_ATTN_FINISH, finish, 4);
}

static uint64_t materialized_cycles(const ipu_profile *p, const ipu_attention_shape *s, uint32_t rows,
                                    uint32_t chunk)
{
    uint64_t total = 0;
    for (uint32_t r0 = 0; r0 < rows; r0 += chunk) {
        uint32_t n = rows - r0 < chunk ? rows - r0 : chunk;
        uint32_t scores[6] = {0, 0, 0, n, s->seq, s->head_dim};
        uint32_t softmax[5] = {0, 0, n, s->seq, s->seq};
        total += cycles_of(p, IPU_K_ATTN_SCORES, scores, 6) + cycles_of(p, IPU_K_SOFTMAX, softmax, 5);
    }
    uint32_t gemm[7] = {0, 0, 0, rows, s->head_dim, s->seq, IPU_DT_F16};
    return total + cycles_of(p, IPU_K_GEMM_F16, gemm, 7);
}

/* One op's units in each mode: the query bands and the largest unit's
 * rows, its footprint, compute cycles and whole estimate (its exchanges and
 * syncs included), the flash key chunk and the materialized query chunk.
 * Flash takes the key-band split (key_bands > 1, one chunk per band) with
 * the smallest estimate, or none. */
typedef struct sizing {
    ipu_attention_shape s; /* one key chunk */
    uint32_t bands, rows, flash_keys, chunk;
    uint32_t flash_bands, flash_rows, key_bands, band_keys; /* flash's units (key_bands 1: keys not split) */
    uint64_t bytes[3], cycles[3], total[3];
} sizing;

/* A flash split over kb key bands of `band_keys` keys each: its estimate
 * (0: it does not apply), with its query bands and rows. */
static uint64_t split_estimate(const ipu_profile *p, const ipu_attention_shape *s, uint64_t pairs, uint32_t kb,
                               uint32_t band_keys, uint64_t head_row, uint32_t *bands, uint32_t *rows,
                               uint64_t *bytes)
{
    uint64_t fit = p->tiles / (pairs * kb);
    if (!fit)
        return 0;
    *bands = fit < s->queries ? (uint32_t)fit : s->queries;
    *rows = (s->queries + *bands - 1) / *bands;
    if (*rows < kb)
        return 0;
    uint64_t sub = (*rows + kb - 1) / kb, state = (uint64_t)(s->head_dim + 2) * 4;
    /* Queries, its result rows, its band of keys and values, the state and the other bands' states. */
    *bytes = (*rows + sub) * head_row + 2ull * band_keys * head_row + *rows * state + (kb - 1) * sub * state;
    uint64_t received = (*rows + 2ull * band_keys) * head_row + (kb - 1) * sub * state;
    return 2 * p->sync_cycles + ipu_plan_exchange_cycles(p, received) + 2 * ipu_plan_exchange_cycles(p, 0) +
           flash_cycles(p, s, *rows, band_keys, kb);
}

static void size_units(const ipu_plan *plan, size_t index, sizing *z)
{
    const ipu_graph *g = plan->graph;
    const ipu_ir_op *op = &g->ops[index];
    const ipu_profile *p = &plan->profile;
    ipu_attention_shape *s = &z->s;
    ipu_attention_shape_of(g, op, 1, op->seq, 1, s);
    uint64_t pairs = (uint64_t)s->images * s->heads;
    z->bands = pairs > p->tiles ? 1 : (uint32_t)(p->tiles / pairs);
    z->bands = z->bands < s->queries ? z->bands : s->queries;
    z->rows = (s->queries + z->bands - 1) / z->bands;
    uint64_t head_row = ((uint64_t)s->head_dim * 2 + 7) & ~7ull;
    uint64_t fixed = 2 * z->rows * head_row; /* queries and result */
    uint32_t keys = (uint32_t)(KV_CHUNK_BYTES / (2 * head_row)) / FLASH_KEYS * FLASH_KEYS;
    keys = keys < FLASH_KEYS ? FLASH_KEYS : keys;
    z->flash_keys = keys < s->seq ? keys : s->seq;
    uint32_t chunk = CHUNK_BYTES / (s->seq * 4u);
    z->chunk = chunk < 1 ? 1 : chunk > z->rows ? z->rows : chunk;
    uint64_t received = (z->rows + 2ull * s->seq) * head_row;
    uint32_t chunks = (s->seq + z->flash_keys - 1) / z->flash_keys;
    z->bytes[IPU_ATTENTION_FLASH] =
        fixed + 2 * z->flash_keys * head_row + (uint64_t)z->rows * (s->head_dim + 2) * 4;
    z->bytes[IPU_ATTENTION_MATERIALIZED] = fixed + s->seq * head_row + (uint64_t)z->rows * (s->seq + 3) * 2 +
                                           (uint64_t)z->chunk * s->seq * 4;
    z->cycles[IPU_ATTENTION_FLASH] = flash_cycles(p, s, z->rows, s->seq, 1);
    z->cycles[IPU_ATTENTION_MATERIALIZED] = materialized_cycles(p, s, z->rows, z->chunk);
    /* The queries and every part arrive in steps of their own. */
    z->total[IPU_ATTENTION_FLASH] = p->sync_cycles + ipu_plan_exchange_cycles(p, received) +
                                    chunks * ipu_plan_exchange_cycles(p, 0) + z->cycles[IPU_ATTENTION_FLASH];
    z->total[IPU_ATTENTION_MATERIALIZED] = p->sync_cycles + ipu_plan_exchange_cycles(p, received) +
                                           2 * ipu_plan_exchange_cycles(p, 0) + z->cycles[IPU_ATTENTION_MATERIALIZED];
    z->flash_bands = z->bands, z->flash_rows = z->rows, z->key_bands = 1;
    /* Key bands of whole 64-key blocks, each one chunk; MAP pooling keeps its
     * keys whole.  The cheapest split, or the one asked for. */
    uint32_t blocks = (s->seq + FLASH_KEYS - 1) / FLASH_KEYS;
    uint32_t asked = plan->options.key_bands ? plan->options.key_bands[index] : 0;
    for (uint32_t kb = 2; op->kind == IPU_IR_ATTENTION && asked != 1 && kb <= blocks; kb++) {
        uint32_t band_keys = (blocks + kb - 1) / kb * FLASH_KEYS, bands, rows;
        uint64_t bytes;
        if ((asked && kb != asked) || band_keys > z->flash_keys || (s->seq + band_keys - 1) / band_keys != kb)
            continue;
        uint64_t total = split_estimate(p, s, pairs, kb, band_keys, head_row, &bands, &rows, &bytes);
        if (total && (asked || total < z->total[IPU_ATTENTION_FLASH])) {
            z->total[IPU_ATTENTION_FLASH] = total;
            z->bytes[IPU_ATTENTION_FLASH] = bytes;
            z->cycles[IPU_ATTENTION_FLASH] = flash_cycles(p, s, rows, band_keys, kb);
            z->flash_bands = bands, z->flash_rows = rows, z->key_bands = kb, z->band_keys = band_keys;
        }
    }
}

/* The mode op index is asked for: its own (a plan search's choice), else the plan's. */
static int asked_mode(const ipu_plan *plan, size_t index)
{
    const int *modes = plan->options.attention_modes;
    return modes && modes[index] != IPU_ATTENTION_AUTO ? modes[index] : plan->attention;
}

uint64_t ipu_plan_attention_footprint(const ipu_plan *plan, size_t index)
{
    sizing z;
    size_units(plan, index, &z);
    int mode = asked_mode(plan, index);
    if (mode != IPU_ATTENTION_AUTO)
        return z.bytes[mode];
    return z.bytes[1] < z.bytes[2] ? z.bytes[1] : z.bytes[2];
}

ipu_status ipu_plan_attention(ipu_ctx *ctx, ipu_plan *plan, size_t index)
{
    const ipu_graph *g = plan->graph;
    const ipu_ir_op *op = &g->ops[index];
    const ipu_profile *p = &plan->profile;
    ipu_op_plan *o = &plan->ops[index];
    const char *name = ipu_ir_op_name(op->kind);
    int map = op->kind == IPU_IR_MAP_POOL;
    sizing z;
    size_units(plan, index, &z);
    ipu_attention_shape s = z.s;
    uint64_t pairs = (uint64_t)s.images * s.heads;
    if (pairs > p->tiles) /* the device is too small for the workload: it does not fit */
        return IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                        "plan: op %zu (%s): %u images x %u heads need at least %llu tiles; the device "
                        "has %u",
                        index, name, s.images, s.heads, (unsigned long long)pairs, p->tiles);
    if (s.head_dim % IPU_PLAN_COL_ALIGN)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "plan: op %zu (%s): head_dim %u is not a multiple of %u (head columns must "
                        "stay on 32-bit words in every element type)",
                        index, name, s.head_dim, IPU_PLAN_COL_ALIGN);
    for (int k = 0; k <= map; k++)
        if (!plan->home[op->in[k]].tiles)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "plan: op %zu (%s) reads '%s' before any op gives it a layout", index, name,
                            g->tensors[op->in[k]].name);
    const uint64_t *bytes = z.bytes, *total = z.total;
    int mode = asked_mode(plan, index);
    if (mode == IPU_ATTENTION_AUTO) {
        /* Within the room the planner keeps for moving data the cheaper
         * mode (its exchanges included), else the smaller one. */
        int flash_fits = bytes[IPU_ATTENTION_FLASH] <= plan->transient_room;
        int mat_fits = bytes[IPU_ATTENTION_MATERIALIZED] <= plan->transient_room;
        if (flash_fits && mat_fits)
            mode = total[IPU_ATTENTION_MATERIALIZED] < total[IPU_ATTENTION_FLASH] ? IPU_ATTENTION_MATERIALIZED
                                                                               : IPU_ATTENTION_FLASH;
        else
            mode = bytes[IPU_ATTENTION_MATERIALIZED] < bytes[IPU_ATTENTION_FLASH] ? IPU_ATTENTION_MATERIALIZED
                                                                               : IPU_ATTENTION_FLASH;
    }
    if (bytes[mode] + plan->param_bytes > plan->budget)
        return IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                        "plan: op %zu (%s, %s): a unit of %u queries over %u keys needs %llu bytes per "
                        "tile on top of %llu bytes of resident parameters; the memory budget is %u",
                        index, name, ipu_attention_mode_name(mode),
                        mode == IPU_ATTENTION_FLASH ? z.flash_rows : z.rows, s.seq,
                        (unsigned long long)bytes[mode], (unsigned long long)plan->param_bytes,
                        plan->budget);
    int flash = mode == IPU_ATTENTION_FLASH, split = flash && z.key_bands > 1;
    uint32_t asked = plan->options.key_bands ? plan->options.key_bands[index] : 0;
    if (flash && asked > 1 && z.key_bands != asked)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "plan: op %zu (%s): %u key bands do not apply: a band must be whole 64-key blocks of at "
                        "most %u keys (%u keys), every band non-empty, and every unit of %u tiles must have at "
                        "least as many query rows",
                        index, name, asked, z.flash_keys, s.seq, p->tiles);
    uint32_t bands = flash ? z.flash_bands : z.bands;
    uint32_t chunk_keys = split ? z.band_keys : flash ? z.flash_keys : s.seq;
    ipu_attention_shape_of(g, op, bands, chunk_keys, flash ? z.key_bands : 1, &s);
    IPU_TRY(layouts(ctx, plan, index, &s));
    o->query_bands = bands;
    o->key_bands = s.key_bands;
    o->chunk_rows = mode == IPU_ATTENTION_MATERIALIZED ? z.chunk : 0;
    o->chunk_keys = s.chunk_keys;
    o->attention = mode;
    o->tile_bytes = bytes[mode];
    o->cycles = total[mode];
    return IPU_OK;
}
