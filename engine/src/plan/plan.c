/* plan.c: planning a graph (see plan.h).  Ops are planned in order.  A
 * matmul takes the cheapest grid whose footprint plus the parameters already
 * resident fits the budget; its A input, when it has no home yet (a graph
 * input or the Repeat's carried tensor), is homed on replica 0 of the A
 * layout.  Elementwise ops and copies follow their first input's layout (a
 * graph input or the carried tensor they read first waits to be homed as
 * the op's result is, by the op that reads it, else spread over the
 * device); an add whose second input lives elsewhere brings it over first
 * (a broadcast one, with fewer rows, is homed spread over the device too).
 * The carried tensor's initial value shares its home.
 */
#include <stdlib.h>
#include <string.h>

#include "core/inject.h"
#include "kernels/kernels.h"
#include "numerics/numerics.h"
#include "plan/plan.h"

void ipu_plan_free(ipu_plan *plan)
{
    for (size_t i = 0; plan->home && i < plan->graph->tensor_count; i++)
        ipu_layout_free(&plan->home[i]);
    for (size_t i = 0; plan->ops && i < plan->graph->op_count; i++) {
        ipu_layout_free(&plan->ops[i].a);
        ipu_layout_free(&plan->ops[i].b);
        ipu_layout_free(&plan->ops[i].bias);
        free(plan->ops[i].catalogue.grids);
    }
    free(plan->home);
    free(plan->ops);
    free(plan->smallest_param);
    free(plan->smallest_transient);
    memset(plan, 0, sizeof *plan);
}

/* Column pieces of a row parameter's home: at least this many ... */
#define ROW_PARAM_PIECES 32u
/* ... and more when a piece's members would take more bytes than this. */
#define ROW_PARAM_PIECE_BYTES 1024u

ipu_status ipu_plan_row_param_home(ipu_ctx *ctx, ipu_plan *plan, uint32_t tensor)
{
    const ipu_ir_tensor *t = &plan->graph->tensors[tensor];
    uint32_t tiles = plan->profile.tiles, units = (t->cols + IPU_PLAN_COL_ALIGN - 1) / IPU_PLAN_COL_ALIGN;
    uint64_t bytes = ipu_ir_tensor_bytes(t) * t->sequence;
    uint64_t pieces = (bytes + ROW_PARAM_PIECE_BYTES - 1) / ROW_PARAM_PIECE_BYTES;
    pieces = pieces < ROW_PARAM_PIECES ? ROW_PARAM_PIECES : pieces;
    pieces = pieces < units ? pieces : units;
    pieces = pieces < tiles ? pieces : tiles;
    uint32_t step = tiles / (uint32_t)pieces;
    IPU_TRY(ipu_layout_grid(ctx, &plan->home[tensor], 1, t->cols, (uint32_t)ipu_dtype_size(t->dtype), 1,
                            (uint32_t)pieces, IPU_PLAN_COL_ALIGN, 1, tensor % step, 0, step, 0));
    plan->param_bytes += ipu_layout_largest_block(&plan->home[tensor], t->sequence);
    return IPU_OK;
}

/* A biased matmul's bias: homed thinly if nobody has, and its operand
 * layout, one replica per result row band with the result's column bands
 * (block (0, j) of replica i on the tile of result block (i, j)).  Its cost:
 * the member's copy step and delivery, then one in-place vector pass over
 * the largest result block. */
static ipu_status plan_bias(ipu_ctx *ctx, ipu_plan *plan, size_t index)
{
    const ipu_ir_op *op = &plan->graph->ops[index];
    const ipu_ir_tensor *bias = &plan->graph->tensors[op->in[2]];
    const ipu_layout *result = &plan->home[op->out];
    ipu_op_plan *o = &plan->ops[index];
    if (!plan->home[op->in[2]].tiles)
        IPU_TRY(ipu_plan_row_param_home(ctx, plan, op->in[2]));
    IPU_TRY(ipu_layout_alloc(ctx, &o->bias, 1, bias->cols, (uint32_t)ipu_dtype_size(bias->dtype), 1,
                             result->col_parts, result->row_parts));
    o->bias.row_bounds[1] = 1;
    memcpy(o->bias.col_bounds, result->col_bounds, (result->col_parts + 1) * sizeof *o->bias.col_bounds);
    uint32_t rows = 0, cols = 0;
    for (uint32_t i = 0; i < result->row_parts; i++)
        for (uint32_t j = 0; j < result->col_parts; j++) {
            o->bias.tiles[i * result->col_parts + j] = ipu_layout_tile(result, i, j, 0);
            uint32_t r = result->row_bounds[i + 1] - result->row_bounds[i];
            uint32_t c = result->col_bounds[j + 1] - result->col_bounds[j];
            rows = r > rows ? r : rows, cols = c > cols ? c : cols;
        }
    ipu_kernel_call call = {0};
    call.entry = IPU_K_BIAS;
    call.args[2] = rows, call.args[3] = cols, call.args[4] = cols, call.args[5] = (uint32_t)bias->dtype;
    uint64_t member = ipu_layout_largest_block(&o->bias, 1);
    const ipu_profile *p = &plan->profile;
    o->cycles += 2 * p->sync_cycles + ipu_plan_exchange_cycles(p, member) + ipu_kernel_cycles(&call, p);
    o->tile_bytes += member;
    return IPU_OK;
}

/* The smallest parameter block and the smallest transient footprint (all
 * but the parameter block) any grid of matmul op index can have (per tile),
 * serial ones included. */
static void smallest_grid(const ipu_plan *plan, size_t index, uint64_t *param, uint64_t *transient)
{
    const ipu_graph *g = plan->graph;
    const ipu_profile *p = &plan->profile;
    const ipu_ir_op *op = &g->ops[index];
    const ipu_ir_tensor *a = &g->tensors[op->in[0]], *b = &g->tensors[op->in[1]],
                        *c = &g->tensors[op->out];
    ipu_matmul_grid grid;
    int resident = b->role == IPU_ROLE_PARAM;
    *param = *transient = UINT64_MAX;
    for (uint32_t gm = 1; gm <= a->rows && gm <= p->tiles; gm++)
        for (uint32_t gn = 1; (uint64_t)gm * gn <= p->tiles; gn++)
            for (uint32_t gk = 1; (uint64_t)gm * gn * gk <= p->tiles; gk++) {
                uint32_t fitted = 0;
                for (uint32_t gather = 0; gather <= (resident && gm > 1); gather++)
                    for (uint32_t s = 0; s < IPU_MATMUL_SERIAL_COUNTS; s++, fitted++) {
                        if (!ipu_matmul_grid_cost(p, plan->budget, a->rows, b->cols, a->cols, a->dtype, c->dtype,
                                                  b->sequence, gm, gn, gk, ipu_matmul_serial_counts[s], gather,
                                                  &grid))
                            break;
                        uint64_t moving = grid.tile_bytes - (resident ? grid.b_bytes : 0);
                        *param = grid.b_bytes < *param ? grid.b_bytes : *param;
                        *transient = moving < *transient ? moving : *transient;
                    }
                if (!fitted && gk > 1)
                    break;
            }
    if (!resident)
        *param = 0;
}

/* What the matmuls after op index need at least: the parameters they keep
 * resident, and, while the largest of them runs, its transient footprint. */
static uint64_t later_needs(const ipu_plan *plan, size_t index, uint64_t *largest_transient)
{
    uint64_t params = 0;
    *largest_transient = 0;
    for (size_t i = index + 1; i < plan->graph->op_count; i++) {
        if (plan->graph->ops[i].kind != IPU_IR_MATMUL)
            continue;
        params += plan->smallest_param[i];
        if (plan->smallest_transient[i] > *largest_transient)
            *largest_transient = plan->smallest_transient[i];
    }
    return params;
}

/* Whether grid fits beside `reserved` bytes, leaving later matmuls room; bytes
 * is its coarse or its exact footprint. */
static int fits_budget(const ipu_plan *plan, size_t index, const ipu_matmul_grid *grid, uint64_t bytes,
                       uint64_t reserved, uint64_t later_transient, int resident)
{
    return bytes + reserved <= plan->budget && grid->b_bytes + reserved + later_transient <= plan->budget &&
           !(resident && (double)grid->b_bytes > plan->replication * (double)plan->smallest_param[index]);
}

/* The candidate with the smallest exact footprint (then the smallest resident block). */
static const ipu_matmul_grid *smallest_candidate(const ipu_catalogue *cat)
{
    const ipu_matmul_grid *best = NULL;
    for (uint32_t i = 0; i < cat->count; i++) {
        const ipu_matmul_grid *g = &cat->grids[i];
        if (!best || g->exact_bytes < best->exact_bytes ||
            (g->exact_bytes == best->exact_bytes && g->b_bytes < best->b_bytes))
            best = g;
    }
    return best;
}

static ipu_status plan_matmul(ipu_ctx *ctx, ipu_plan *plan, size_t index)
{
    const ipu_graph *g = plan->graph;
    const ipu_profile *p = &plan->profile;
    const ipu_ir_op *op = &g->ops[index];
    const ipu_ir_tensor *a = &g->tensors[op->in[0]], *b = &g->tensors[op->in[1]],
                        *c = &g->tensors[op->out];
    uint32_t m = a->rows, k = a->cols, n = b->cols, members = b->sequence;
    ipu_op_plan *o = &plan->ops[index];
    ipu_catalogue_options co = plan->options.catalogue;
    int resident = b->role == IPU_ROLE_PARAM;
    if (!plan->options.smallest && resident) /* what fits_budget allows a weight block */
        co.weight_limit = (uint64_t)(plan->replication * (double)plan->smallest_param[index]);
    IPU_TRY(ipu_catalogue_matmul(ctx, p, m, n, k, a->dtype, c->dtype, members, resident, &co, &o->catalogue));
    const ipu_catalogue *cat = &o->catalogue;
    uint64_t cap = plan->options.caps ? plan->options.caps[index] : 0;
    uint64_t later_transient, later_params = later_needs(plan, index, &later_transient);
    uint64_t reserved = plan->param_bytes + later_params;
    const ipu_matmul_grid *best = plan->options.smallest ? smallest_candidate(cat) : NULL;
    uint32_t skip = plan->options.choices ? plan->options.choices[index] : 0;
    /* Fastest first: the first that fits (after `skip` of them) is the choice;
     * the rest are counted.  Injected: every one that fits replaces it. */
    int take_last = plan->options.inject == IPU_INJECT_PLAN_FIT_TAKES_LAST;
    for (uint32_t i = 0; i < cat->count && !plan->options.smallest; i++) {
        const ipu_matmul_grid *grid = &cat->grids[i];
        if (cap && grid->exact_bytes > cap)
            continue;
        int ok = fits_budget(plan, index, grid, grid->tile_bytes, reserved, later_transient, resident);
        if (!ok) {
            o->refined++;
            ok = fits_budget(plan, index, grid, grid->exact_bytes, reserved, later_transient, resident);
        }
        if (ok && (o->fits++ == skip || take_last))
            best = grid;
    }
    if (!best && skip && o->fits)
        return IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                        "plan: op %zu (matmul %ux%ux%u) has %u candidates that fit; its choice skips %u", index, m,
                        k, n, o->fits, skip);
    if (!best) {
        const ipu_matmul_grid *smallest = smallest_candidate(cat);
        if (!smallest)
            return IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                            "plan: no grid for op %zu (matmul %ux%ux%u) fits the catalogue budget of %u bytes "
                            "per tile: all %llu partitions have an operand block larger than that",
                            index, m, k, n, co.budget, (unsigned long long)cat->enumerated);
        return IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                        "plan: no grid for op %zu (matmul %ux%ux%u) fits the memory budget of %u "
                        "bytes per tile: of %u retained candidates the smallest needs %llu bytes "
                        "(grid %ux%ux%u in %u serial pieces) on top of %llu bytes resident or needed by later "
                        "matmuls%s",
                        index, m, k, n, plan->budget, cat->count, (unsigned long long)smallest->exact_bytes,
                        smallest->gm, smallest->gn, smallest->gk, smallest->gs, (unsigned long long)reserved,
                        cap ? " (after a whole plan with a larger one did not fit)" : "");
    }
    o->grid = *best;
    o->cycles = best->cycles;
    o->tile_bytes = best->exact_bytes;
    ipu_layout result;
    IPU_TRY(ipu_matmul_layouts(ctx, m, n, k, a->dtype, c->dtype, best, &o->a, &o->b, &result));
    /* Grids smaller than the device start where the last small one ended,
     * so their blocks (weights above all) do not pile up on the first tiles. */
    uint32_t used = best->gm * best->gn * best->gk;
    if (used < p->tiles) {
        ipu_layout_rotate(&o->a, plan->next_tile, p->tiles);
        ipu_layout_rotate(&o->b, plan->next_tile, p->tiles);
        ipu_layout_rotate(&result, plan->next_tile, p->tiles);
        plan->next_tile = (plan->next_tile + used) % p->tiles;
    }
    plan->home[op->out] = result;
    /* A without a home: a graph input, the carried tensor, or an activation
     * whose producer (an elementwise op on a host input) waits for it. */
    if (!plan->home[op->in[0]].tiles)
        IPU_TRY(ipu_matmul_input_home(ctx, best, &o->a, ipu_ir_homing_op(g, op->in[0]) < index,
                                      &plan->home[op->in[0]]));
    if (!plan->home[op->in[1]].tiles && best->gather)
        IPU_TRY(ipu_matmul_weight_home(ctx, best, &o->b, &plan->home[op->in[1]]));
    else if (!plan->home[op->in[1]].tiles)
        IPU_TRY(ipu_layout_copy(ctx, &plan->home[op->in[1]], &o->b));
    if (b->role == IPU_ROLE_PARAM)
        plan->param_bytes += ipu_layout_largest_block(&plan->home[op->in[1]], members);
    return op->biased ? plan_bias(ctx, plan, index) : IPU_OK;
}

/* A home for a tensor spread over the whole device: min(rows, tiles) row
 * bands, each cut into as many column bands as the tiles allow. */
static ipu_status spread_home(ipu_ctx *ctx, ipu_plan *plan, uint32_t tensor)
{
    const ipu_ir_tensor *t = &plan->graph->tensors[tensor];
    uint32_t tiles = plan->profile.tiles, rows = t->rows < tiles ? t->rows : tiles;
    uint32_t units = (t->cols + IPU_PLAN_COL_ALIGN - 1) / IPU_PLAN_COL_ALIGN, cols = tiles / rows;
    cols = cols < units ? cols : units;
    IPU_TRY(ipu_layout_grid(ctx, &plan->home[tensor], t->rows, t->cols, (uint32_t)ipu_dtype_size(t->dtype), rows,
                            cols, IPU_PLAN_COL_ALIGN, 1, 0, cols, 1, 0));
    if (t->role == IPU_ROLE_PARAM)
        plan->param_bytes += ipu_layout_largest_block(&plan->home[tensor], t->sequence);
    return IPU_OK;
}

/* Whether tensor t, without a home yet, is one no op makes: a graph input,
 * or the Repeat's carried tensor (the Repeat sets it).  Its first reader
 * homes it, whatever its kind: a matmul or a LayerNorm where it wants it, an
 * elementwise op (FP8's cast of the carried value before the body's first
 * matmul) by waiting for the op that homes its result, else spread over the
 * device.  Decision: the planner, not the importer, takes this case, since
 * any description may begin a Repeat body with an elementwise op. */
static int unmade_without_home(const ipu_plan *plan, uint32_t t)
{
    const ipu_graph *g = plan->graph;
    return !plan->home[t].tiles &&
           (g->tensors[t].role == IPU_ROLE_INPUT || (g->repeat.iterations && t == g->repeat.carried));
}

static ipu_status plan_elementwise(ipu_ctx *ctx, ipu_plan *plan, size_t index)
{
    const ipu_graph *g = plan->graph;
    const ipu_ir_op *op = &g->ops[index];
    ipu_layout *in = &plan->home[op->in[0]];
    const ipu_ir_tensor *first = &g->tensors[op->in[0]];
    if (!in->tiles && !unmade_without_home(plan, op->in[0]))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "plan: op %zu (%s) reads '%s' before any op gives it a layout", index,
                        ipu_ir_op_name(op->kind), first->name);
    if (!in->tiles) /* a graph input or the carried tensor first read here */
        IPU_TRY(spread_home(ctx, plan, op->in[0]));
    const ipu_ir_tensor *out = &g->tensors[op->out];
    if (!plan->home[op->out].tiles)
        IPU_TRY(ipu_layout_follow(ctx, &plan->home[op->out], in, (uint32_t)ipu_dtype_size(out->dtype)));
    /* A result homed elsewhere first (the Repeat's initial value): the first
     * input comes to its layout. */
    uint64_t moved = 0;
    ipu_layout first_wanted;
    IPU_TRY(ipu_layout_follow(ctx, &first_wanted, &plan->home[op->out], (uint32_t)ipu_dtype_size(first->dtype)));
    if (ipu_layout_same(in, &first_wanted)) {
        ipu_layout_free(&first_wanted);
    } else {
        plan->ops[index].a = first_wanted;
        moved = ipu_layout_largest_block(&first_wanted, 1);
    }
    if (op->kind == IPU_IR_ADD) {
        /* The second input on the result's layout (a broadcast one, with
         * fewer rows, is homed spread over the device, as it stays resident
         * when it is a parameter; lowering stacks its home to the result's
         * rows). */
        ipu_layout *second = &plan->home[op->in[1]];
        const ipu_ir_tensor *t = &g->tensors[op->in[1]];
        uint32_t elem = (uint32_t)ipu_dtype_size(t->dtype);
        if (!second->tiles && t->rows < out->rows)
            IPU_TRY(spread_home(ctx, plan, op->in[1]));
        else if (!second->tiles)
            IPU_TRY(ipu_layout_follow(ctx, second, &plan->home[op->out], elem));
        ipu_layout wanted;
        IPU_TRY(ipu_layout_follow(ctx, &wanted, &plan->home[op->out], elem));
        if (ipu_layout_same(second, &wanted)) {
            ipu_layout_free(&wanted);
        } else {
            plan->ops[index].b = wanted;
            moved += ipu_layout_largest_block(&wanted, 1);
        }
    }
    /* One vector pass over the largest block (GELU: its own formula). */
    ipu_kernel_call call = {0};
    uint64_t elems = ipu_layout_largest_block(&plan->home[op->out], 1) / ipu_dtype_size(out->dtype);
    call.entry = op->kind == IPU_IR_GELU ? (op->form == IPU_GELU_ERF ? IPU_K_GELU_ERF : IPU_K_GELU)
                 : op->kind == IPU_IR_ADD ? IPU_K_ADD
                 : op->kind == IPU_IR_CAST ? IPU_K_CAST
                                           : IPU_K_COPY;
    if (call.entry == IPU_K_GELU || call.entry == IPU_K_GELU_ERF)
        call.args[2] = (uint32_t)elems, call.args[3] = (uint32_t)out->dtype;
    else if (call.entry == IPU_K_ADD)
        call.args[3] = (uint32_t)elems, call.args[4] = (uint32_t)out->dtype;
    else if (call.entry == IPU_K_CAST)
        call.args[2] = (uint32_t)elems, call.args[3] = (uint32_t)g->tensors[op->in[0]].dtype,
        call.args[5] = (uint32_t)out->dtype;
    else
        call.args[2] = (uint32_t)(elems * ipu_dtype_size(out->dtype));
    plan->ops[index].cycles = ipu_kernel_cycles(&call, &plan->profile) + plan->profile.sync_cycles;
    if (moved)
        plan->ops[index].cycles += ipu_plan_exchange_cycles(&plan->profile, moved);
    plan->ops[index].tile_bytes = ipu_layout_largest_block(in, 1) +
                                  ipu_layout_largest_block(&plan->home[op->out], 1) + moved;
    return IPU_OK;
}

/* How many times op i runs: the Repeat's iterations inside its body, else once. */
static uint32_t executions(const ipu_ir_repeat *r, size_t i)
{
    return r->iterations && i >= r->first_op && i < r->first_op + r->op_count ? r->iterations : 1;
}

/* A one-input elementwise op that first reads a host input or the Repeat's
 * carried tensor waits for the op that homes its result (the patches' cast
 * waits for the patch projection, FP8's cast of the carried value for the
 * body's matmul), so the input is homed where that consumer wants it rather
 * than gathered there from wherever it landed. */
static int waits_for_consumer(const ipu_plan *plan, size_t i)
{
    const ipu_graph *g = plan->graph;
    const ipu_ir_op *op = &g->ops[i];
    if (plan->home[op->out].tiles)
        return 0;
    /* The Repeat's initial value, computed before the body, waits for the
     * carried tensor's home: it is made directly in the carried storage. */
    if (g->repeat.iterations && op->out == g->repeat.carried_init && i < g->repeat.first_op)
        return 1;
    return (op->kind == IPU_IR_CAST || op->kind == IPU_IR_GELU || op->kind == IPU_IR_COPY) &&
           unmade_without_home(plan, op->in[0]);
}

/* Plan the waiting ops whose result now has a home (an unhomed input
 * follows it); with `all`, the rest as well, else those that read tensor
 * `reading` (their input spread over the device). */
static ipu_status plan_waiting(ipu_ctx *ctx, ipu_plan *plan, uint8_t *waiting, int all, uint32_t reading)
{
    const ipu_graph *g = plan->graph;
    const ipu_ir_repeat *r = &g->repeat;
    for (size_t d = 0; d < g->op_count; d++) {
        const ipu_ir_op *op = &g->ops[d];
        if (waiting[d] && op->out == r->carried_init && !plan->home[op->out].tiles && plan->home[r->carried].tiles)
            IPU_TRY(ipu_layout_copy(ctx, &plan->home[op->out], &plan->home[r->carried]));
        if (!waiting[d] || (!all && op->in[0] != reading && !plan->home[op->out].tiles))
            continue;
        if (plan->home[op->out].tiles && !plan->home[op->in[0]].tiles)
            IPU_TRY(ipu_layout_follow(ctx, &plan->home[op->in[0]], &plan->home[op->out],
                                      (uint32_t)ipu_dtype_size(g->tensors[op->in[0]].dtype)));
        IPU_TRY(plan_elementwise(ctx, plan, d));
        plan->cycles += plan->ops[d].cycles * executions(&g->repeat, d);
        waiting[d] = 0;
    }
    return IPU_OK;
}

const char *ipu_attention_mode_name(int mode)
{
    return mode == IPU_ATTENTION_FLASH          ? "flash"
           : mode == IPU_ATTENTION_MATERIALIZED ? "materialized"
                                                : "auto";
}

ipu_status ipu_plan_graph(ipu_ctx *ctx, const ipu_profile *p, const ipu_graph *g,
                          const ipu_plan_options *options, ipu_plan *out)
{
    memset(out, 0, sizeof *out);
    out->options = *options;
    uint32_t budget = options->smallest ? UINT32_MAX : options->budget;
    int attention = options->attention;
    out->profile = *p;
    out->graph = g;
    out->budget = budget;
    out->attention = attention;
    out->home = ipu_calloc(ctx, g->tensor_count, sizeof *out->home);
    out->ops = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *out->ops);
    out->smallest_param = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *out->smallest_param);
    out->smallest_transient = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *out->smallest_transient);
    if (!out->home || !out->ops || !out->smallest_param || !out->smallest_transient) {
        ipu_plan_free(out);
        return IPU_NO_MEMORY(ctx);
    }
    uint64_t params = 0, largest = 0;
    for (size_t i = 0; i < g->op_count; i++)
        if (g->ops[i].kind == IPU_IR_MATMUL) {
            smallest_grid(out, i, &out->smallest_param[i], &out->smallest_transient[i]);
            params += out->smallest_param[i];
            largest = out->smallest_transient[i] > largest ? out->smallest_transient[i] : largest;
        } else if (g->ops[i].kind == IPU_IR_ATTENTION || g->ops[i].kind == IPU_IR_MAP_POOL) {
            uint64_t unit = ipu_plan_attention_footprint(out, i);
            largest = unit > largest ? unit : largest;
        }
    /* Every parameter matmul may replicate its weights by the same factor:
     * what the budget leaves beside the largest transient footprint (of a
     * matmul or an attention unit), shared in
     * proportion to the smallest blocks (so early matmuls cannot take the
     * memory later ones need). */
    out->transient_room = largest;
    out->replication = params && budget > largest ? (double)(budget - largest) / (double)params : 1.0;
    out->replication = out->replication < 1.0 ? 1.0 : out->replication;
    uint8_t *waiting = ipu_calloc(ctx, g->op_count ? g->op_count : 1, 1);
    ipu_status status = waiting ? IPU_OK : IPU_NO_MEMORY(ctx);
    const ipu_ir_repeat *r = &g->repeat;
    for (size_t i = 0; i < g->op_count && status == IPU_OK; i++) {
        int kind = g->ops[i].kind;
        if (kind == IPU_IR_MATMUL)
            status = plan_matmul(ctx, out, i);
        else if (kind == IPU_IR_LAYERNORM)
            status = ipu_plan_layernorm(ctx, out, i);
        else if (kind == IPU_IR_ATTENTION || kind == IPU_IR_MAP_POOL)
            status = ipu_plan_attention(ctx, out, i);
        else if (waits_for_consumer(out, i))
            waiting[i] = 1;
        else
            status = plan_elementwise(ctx, out, i);
        if (status == IPU_OK && !waiting[i])
            out->cycles += out->ops[i].cycles * executions(r, i);
        if (status == IPU_OK)
            status = plan_waiting(ctx, out, waiting, 0, UINT32_MAX);
        /* The Repeat's carried tensor is homed by its first reader (one
         * still waiting at the body's end, its result homed by no op in the
         * body, spreads it); before the body starts, its initial value must
         * already have that home. */
        if (status == IPU_OK && r->iterations && i + 1 == r->first_op + r->op_count &&
            !out->home[r->carried].tiles)
            status = plan_waiting(ctx, out, waiting, 0, r->carried);
        if (status == IPU_OK && r->iterations && i + 1 == r->first_op + r->op_count &&
            !out->home[r->carried_init].tiles)
            status = ipu_layout_copy(ctx, &out->home[r->carried_init], &out->home[r->carried]);
        /* Every iteration ends moving the next value to the carried home
         * (when it lives elsewhere): the producing op's. */
        if (status == IPU_OK && r->iterations && i + 1 == r->first_op + r->op_count &&
            g->ops[i].out == r->carried_next && r->carried_next != r->carried &&
            !ipu_layout_same(&out->home[r->carried_next], &out->home[r->carried])) {
            uint64_t carry = ipu_plan_exchange_cycles(&out->profile,
                                                      ipu_layout_largest_block(&out->home[r->carried], 1));
            out->ops[i].cycles += carry;
            out->cycles += carry * executions(r, i);
        }
    }
    if (status == IPU_OK)
        status = plan_waiting(ctx, out, waiting, 1, UINT32_MAX);
    free(waiting);
    /* Host input and output move through the aperture at the device's host
     * bandwidth, whatever the plan (uploading parameters is initialization). */
    for (size_t t = 0; status == IPU_OK && t < g->tensor_count; t++) {
        const ipu_ir_tensor *x = &g->tensors[t];
        if (x->role != IPU_ROLE_INPUT && x->role != IPU_ROLE_OUTPUT)
            continue;
        double per_cycle = p->host_bytes_per_second / p->clock_hz;
        out->host_cycles += (uint64_t)((double)ipu_ir_tensor_bytes(x) / per_cycle + 0.999999) +
                            p->sync_cycles;
    }
    out->cycles += out->host_cycles;
    for (size_t t = 0; status == IPU_OK && t < g->tensor_count; t++)
        if (!out->home[t].tiles)
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "plan: tensor '%s' is never used by an op", g->tensors[t].name);
    /* Injected: the first home layout of two or more blocks puts its second on the first's tile. */
    for (size_t t = 0; status == IPU_OK && options->inject == IPU_INJECT_PLAN_BLOCKS_SHARE_TILE &&
                       t < g->tensor_count; t++) {
        ipu_layout *l = &out->home[t];
        if (l->row_parts * l->col_parts > 1 && ipu_ir_homing_op(g, (uint32_t)t) < g->op_count) {
            l->tiles[1] = l->tiles[0];
            break;
        }
    }
    for (size_t t = 0; status == IPU_OK && t < g->tensor_count; t++) {
        if (ipu_layout_check(ctx, &out->home[t], p->tiles) == IPU_OK)
            continue;
        uint32_t op = ipu_ir_homing_op(g, (uint32_t)t);
        if (op < g->op_count)
            status = IPU_INCONSISTENT(ctx, "plan", "home layout of tensor '%s' (op %u %s %s)", g->tensors[t].name,
                                      op, ipu_ir_op_name(g->ops[op].kind), g->tensors[g->ops[op].out].name);
        else
            status = IPU_INCONSISTENT(ctx, "plan", "home layout of tensor '%s'", g->tensors[t].name);
    }
    if (status != IPU_OK)
        ipu_plan_free(out);
    return status;
}

json_t *ipu_plan_json(const ipu_plan *plan)
{
    const ipu_graph *g = plan->graph;
    json_t *ops = json_array();
    for (size_t i = 0; i < g->op_count; i++) {
        const ipu_ir_op *op = &g->ops[i];
        const ipu_op_plan *o = &plan->ops[i];
        json_t *entry = json_pack("{s:I, s:s, s:s, s:I, s:I}", "op", (json_int_t)i, "kind",
                                  ipu_ir_op_name(op->kind), "output", g->tensors[op->out].name,
                                  "cycles", (json_int_t)o->cycles, "tile_bytes",
                                  (json_int_t)o->tile_bytes);
        if (op->kind == IPU_IR_MATMUL) {
            const ipu_catalogue *c = &o->catalogue;
            json_object_set_new(entry, "grid",
                                json_pack("{s:I, s:I, s:I, s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:I}", "rows",
                                          (json_int_t)o->grid.gm, "cols", (json_int_t)o->grid.gn,
                                          "reduction", (json_int_t)o->grid.gk, "serial",
                                          (json_int_t)o->grid.gs, "gather", (int)o->grid.gather, "compute",
                                          (json_int_t)o->grid.compute_cycles, "operands",
                                          (json_int_t)o->grid.operand_cycles, "reduce",
                                          (json_int_t)o->grid.reduce_cycles, "tiles",
                                          (json_int_t)o->grid.gm * o->grid.gn * o->grid.gk, "coarse_bytes",
                                          (json_int_t)o->grid.tile_bytes, "exact_bytes",
                                          (json_int_t)o->grid.exact_bytes));
            /* The retained candidates: grid, estimated cycles, coarse and exact footprints. */
            json_t *grids = json_array();
            for (uint32_t r = 0; r < c->count; r++) {
                const ipu_matmul_grid *x = &c->grids[r];
                json_array_append_new(grids, json_pack("[I, I, I, I, I, I, I, I, I, b]", (json_int_t)x->gm,
                                                       (json_int_t)x->gn, (json_int_t)x->gk, (json_int_t)x->cycles,
                                                       (json_int_t)x->tile_bytes, (json_int_t)x->exact_bytes,
                                                       (json_int_t)x->a_bytes, (json_int_t)x->b_bytes,
                                                       (json_int_t)x->gs, (int)x->gather));
            }
            json_object_set_new(entry, "catalogue",
                                json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:[s, s, s, s, s, s, s, s, s, s]}",
                                          "enumerated", (json_int_t)c->enumerated, "filtered",
                                          (json_int_t)c->filtered, "groups", (json_int_t)c->groups, "frontier",
                                          (json_int_t)c->frontier, "shortlisted", (json_int_t)c->shortlisted,
                                          "retained", (json_int_t)c->count, "fit", (json_int_t)o->fits,
                                          "refined", (json_int_t)o->refined, "candidates", grids, "columns",
                                          "rows", "cols", "reduction", "cycles", "coarse_bytes", "exact_bytes",
                                          "a_bytes", "b_bytes", "serial", "gather"));
        }
        if (op->kind == IPU_IR_ATTENTION || op->kind == IPU_IR_MAP_POOL)
            json_object_set_new(entry, "attention",
                                json_pack("{s:s, s:I, s:I, s:I, s:I}", "mode",
                                          ipu_attention_mode_name(o->attention), "query_bands",
                                          (json_int_t)o->query_bands, "chunk_rows",
                                          (json_int_t)o->chunk_rows, "chunk_keys",
                                          (json_int_t)o->chunk_keys, "key_bands", (json_int_t)o->key_bands));
        json_array_append_new(ops, entry);
    }
    const ipu_plan_options *po = &plan->options;
    return json_pack("{s:o, s:s, s:I, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I}}", "ops", ops, "attention",
                     ipu_attention_mode_name(plan->attention), "cycles", (json_int_t)plan->cycles,
                     "host_cycles", (json_int_t)plan->host_cycles, "budget", (json_int_t)plan->budget,
                     "param_bytes", (json_int_t)plan->param_bytes, "search", "budget",
                     (json_int_t)po->budget, "catalogue_budget", (json_int_t)po->catalogue.budget,
                     "catalogue_group", (json_int_t)po->catalogue.group_size, "frontier_cap",
                     (json_int_t)po->catalogue.frontier_cap);
}
