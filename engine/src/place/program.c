/* program.c: a low program's buffers placed (program.h).  Staging for host
 * rounds goes in the aperture; inputs, outputs and parameters (pinned) above
 * it; every other buffer anywhere above its tile's code, around the
 * aperture; each tile's own descriptors are kept free.
 */
#include <stdlib.h>

#include "place/program.h"

/* Move the first activation buffer onto a parameter of its tile (a tensor
 * live for the whole program) at least as large. */
static void inject_overlap(ipu_low_program *prog)
{
    for (size_t a = 0; a < prog->buffer_count; a++) {
        ipu_low_buffer *x = &prog->buffers[a];
        if (x->persistent || x->aperture || x->pinned)
            continue;
        for (size_t b = 0; b < prog->buffer_count; b++) {
            const ipu_low_buffer *y = &prog->buffers[b];
            if (y->persistent && y->tile == x->tile && y->size >= x->size) {
                x->address = y->address;
                return;
            }
        }
    }
}

/* The op whose compute step holds kernel k (IPU_LOW_LITERAL: none). */
static uint32_t kernel_op(const ipu_low_program *prog, size_t k)
{
    for (size_t s = 0; s < prog->step_count; s++) {
        const ipu_low_step *step = &prog->steps[s];
        if (step->kind == IPU_LOW_COMPUTE && k >= step->first && k - step->first < step->count)
            return step->op;
    }
    return IPU_LOW_LITERAL;
}

/* Every separation conflict pairs two buffers of one tile (the kernel that
 * declares it runs on that tile): a pair across tiles is the compiler's own
 * inconsistency, named by its op, kernel, buffers and tiles. */
static ipu_status check_conflicts(ipu_ctx *ctx, const ipu_low_program *prog, const ipu_place_conflict *conf,
                                  const uint32_t *kernel, size_t count)
{
    for (size_t c = 0; c < count; c++) {
        const ipu_low_buffer *a = &prog->buffers[conf[c].a], *b = &prog->buffers[conf[c].b];
        if (a->tile == b->tile)
            continue;
        uint32_t op = kernel_op(prog, kernel[c]);
        const ipu_low_op *o = op < prog->op_count ? &prog->ops[op] : NULL;
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "place: separation conflict %zu, of op %u %s %s's %s kernel on tile %u, pairs buffer '%s' "
                        "(tile %u) with '%s' (tile %u)",
                        c, op, o ? o->kind : "?", o ? o->name : "?", ipu_kernel_name(prog->kernels[kernel[c]].entry),
                        prog->kernels[kernel[c]].tile, a->name, a->tile, b->name, b->tile);
    }
    return IPU_OK;
}

ipu_status ipu_place_program(ipu_ctx *ctx, ipu_low_program *prog, const ipu_place_support *support)
{
    const ipu_profile *p = &prog->profile;
    uint32_t tiles = p->tiles;
    size_t n = prog->buffer_count;
    ipu_place_request *req = ipu_calloc(ctx, n ? n : 1, sizeof *req);
    ipu_place_conflict *conf = NULL;
    uint32_t *conf_kernel = NULL; /* the kernel declaring each conflict */
    size_t conf_count = 0, conf_capacity = 0, kernel_capacity = 0;
    ipu_place_range *reserved = ipu_calloc(ctx, tiles, sizeof *reserved);
    ipu_status status = req && reserved ? IPU_OK : IPU_NO_MEMORY(ctx);
    for (size_t b = 0; b < n && status == IPU_OK; b++) {
        const ipu_low_buffer *buf = &prog->buffers[b];
        int staging = buf->aperture;
        /* Inputs, outputs and parameters never borrow the aperture. */
        req[b] = (ipu_place_request){buf->tile, buf->size, buf->alignment, buf->first, buf->last,
                                     staging ? p->aperture_base
                                             : (buf->pinned ? p->aperture_end : support->code_end[buf->tile]),
                                     staging ? p->aperture_end : ipu_profile_access_end(p), buf->name, 0,
                                     0};
    }
    for (uint32_t t = 0; t < tiles && status == IPU_OK; t++)
        reserved[t] = (ipu_place_range){t, support->desc_base, support->desc_end[t]};
    /* Operands a kernel declares separate (a GEMM's output and its inputs,
     * an attention state and Q, K, V...) must not share a memory element:
     * operand i of such an entry is its argument i (kernels.h). */
    for (size_t k = 0; k < prog->kernel_count && status == IPU_OK; k++) {
        const ipu_low_kernel *kn = &prog->kernels[k];
        ipu_kernel_call call = {.entry = kn->entry, .arg_count = kn->argc};
        for (uint32_t a = 0; a < kn->argc; a++)
            call.args[a] = kn->args[a].value;
        if (ipu_kernel_describe(&call))
            continue; /* malformed: the device reports it */
        for (uint32_t c = 0; c < call.separate_count && status == IPU_OK; c++) {
            uint32_t x = call.separate[c][0], y = call.separate[c][1];
            if (x >= kn->argc || y >= kn->argc || kn->args[x].buffer == IPU_LOW_LITERAL ||
                kn->args[y].buffer == IPU_LOW_LITERAL || kn->args[x].buffer == kn->args[y].buffer)
                continue;
            status = IPU_GROW(ctx, conf, conf_count, conf_capacity);
            if (status == IPU_OK)
                status = IPU_GROW(ctx, conf_kernel, conf_count, kernel_capacity);
            if (status == IPU_OK) {
                conf_kernel[conf_count] = (uint32_t)k;
                conf[conf_count++] = (ipu_place_conflict){kn->args[x].buffer, kn->args[y].buffer};
            }
        }
    }
    if (status == IPU_OK && conf_count && ipu_low_take_inject(&prog->inject, IPU_INJECT_SEPARATION_IGNORED))
        conf_count = 0;
    /* Injected: the first conflict's second buffer is the first buffer on another tile. */
    for (size_t b = 0; status == IPU_OK && conf_count && b < n; b++)
        if (req[b].tile != req[conf[0].a].tile && ipu_low_take_inject(&prog->inject, IPU_INJECT_CONFLICT_ACROSS_TILES))
            conf[0].b = (uint32_t)b;
    if (status == IPU_OK)
        status = check_conflicts(ctx, prog, conf, conf_kernel, conf_count);
    if (status == IPU_OK)
        status = ipu_place(ctx, p, req, n, conf, conf_count, reserved, tiles);
    for (size_t b = 0; b < n && status == IPU_OK; b++)
        prog->buffers[b].address = req[b].address;
    for (size_t b = 0; b < n && status == IPU_ERR_NO_PLAN; b++)
        if (req[b].address == IPU_PLACE_UNPLACED)
            prog->unplaced = (uint32_t)b;
    if (status == IPU_OK && ipu_low_take_inject(&prog->inject, IPU_INJECT_OVERLAP_ALLOCATION))
        inject_overlap(prog);
    free(req);
    free(conf);
    free(conf_kernel);
    free(reserved);
    return status;
}

