/* shrink.c: charging a candidate plan's peak to matmuls (see shrink.h). */
#include <stdlib.h>

#include "driver/shrink.h"

static int elementwise(int kind)
{
    return kind == IPU_IR_ADD || kind == IPU_IR_GELU || kind == IPU_IR_CAST || kind == IPU_IR_COPY;
}

/* The op that chose tensor t's home layout: the op that homes it
 * (ipu_ir_homing_op), followed back through elementwise producers (which
 * keep their input's layout).  IPU_LOW_LITERAL when nothing did. */
static uint32_t layout_chooser(const ipu_graph *g, uint32_t t)
{
    for (size_t hops = 0; hops <= g->op_count; hops++) {
        uint32_t op = ipu_ir_homing_op(g, t);
        if (op == UINT32_MAX)
            return IPU_LOW_LITERAL;
        if (g->ops[op].out != t || !elementwise(g->ops[op].kind))
            return op;
        t = g->ops[op].in[0];
    }
    return IPU_LOW_LITERAL;
}

/* The exact footprint of the matmul's next smaller candidate under its cap, 0 if none. */
static uint64_t smaller_candidate(const ipu_op_plan *o)
{
    for (uint32_t i = 0; i < o->catalogue.count; i++)
        if (o->catalogue.grids[i].exact_bytes < o->grid.exact_bytes)
            return o->catalogue.grids[i].exact_bytes;
    return 0;
}

ipu_status ipu_shrink_at_peak(ipu_ctx *ctx, const ipu_plan *plan, const ipu_low_program *prog, uint32_t tile,
                              uint32_t step, uint64_t *caps, long *capped)
{
    const ipu_graph *g = plan->graph;
    *capped = -1;
    uint64_t *charged = ipu_calloc(ctx, g->op_count ? g->op_count : 1, sizeof *charged);
    if (!charged)
        return IPU_NO_MEMORY(ctx);
    for (size_t b = 0; b < prog->buffer_count; b++) {
        const ipu_low_buffer *buf = &prog->buffers[b];
        if (buf->tile != tile || buf->first > step || buf->last < step)
            continue;
        uint32_t op = buf->op != IPU_LOW_LITERAL ? buf->op
                      : buf->tensor != IPU_LOW_LITERAL ? layout_chooser(g, buf->tensor)
                                                       : IPU_LOW_LITERAL;
        if (op != IPU_LOW_LITERAL && g->ops[op].kind == IPU_IR_MATMUL)
            charged[op] += buf->size;
    }
    long chosen = -1;
    for (size_t i = 0; i < g->op_count; i++)
        if (charged[i] && smaller_candidate(&plan->ops[i]) &&
            (chosen < 0 || charged[i] > charged[chosen]))
            chosen = (long)i;
    if (chosen >= 0)
        caps[chosen] = plan->ops[chosen].grid.exact_bytes - 1;
    free(charged);
    *capped = chosen;
    return IPU_OK;
}
