/* program.c: a low program's exchange steps as scheduled phases
 * (program.h).  Steps are taken in order, so the mutations land on the
 * first main-program phase that can take them.
 */
#include <stdlib.h>
#include <string.h>

#include "exchange/program.h"

void ipu_xprogram_free(ipu_xprogram *x)
{
    for (size_t s = 0; x->phases && s < x->step_count; s++) {
        free(x->phases[s].xfers);
        free(x->phases[s].dsts);
    }
    free(x->phases);
    memset(x, 0, sizeof *x);
}

/* A window's key (exchange.h): its buffer and its offset in it. */
static uint64_t buffer_key(uint32_t buffer, uint32_t offset) { return (uint64_t)buffer << 32 | offset; }

/* Step s's transfers as a phase (tiles from their buffers), scheduled. */
static ipu_status build_phase(ipu_ctx *ctx, ipu_low_program *prog, const ipu_xmode *mode, size_t s,
                              ipu_xphase *ph)
{
    ipu_low_step *step = &prog->steps[s];
    for (uint32_t n = 0; n < step->count && !step->init; n++) {
        ipu_low_xfer *x = &prog->xfers[step->first + n];
        if (x->dst_count > 1 && ipu_low_take_inject(&prog->inject, IPU_INJECT_MULTICAST_DROP_DEST))
            x->dst_count--;
    }
    size_t dsts = 0;
    for (uint32_t n = 0; n < step->count; n++)
        dsts += prog->xfers[step->first + n].dst_count;
    ph->xfers = ipu_calloc(ctx, step->count ? step->count : 1, sizeof *ph->xfers);
    ph->dsts = ipu_calloc(ctx, dsts ? dsts : 1, sizeof *ph->dsts);
    if (!ph->xfers || !ph->dsts)
        return IPU_NO_MEMORY(ctx);
    ph->count = step->count;
    ph->dst_total = dsts;
    size_t d = 0;
    for (uint32_t n = 0; n < step->count; n++) {
        const ipu_low_xfer *x = &prog->xfers[step->first + n];
        ph->xfers[n] = (ipu_xfer){prog->buffers[x->src_buffer].tile, 0, x->bytes, (uint32_t)d, x->dst_count, 0,
                                  buffer_key(x->src_buffer, x->src_offset), x->src_advance};
        for (uint32_t k = 0; k < x->dst_count; k++, d++) {
            const ipu_low_xdst *q = &prog->xdsts[x->first_dst + k];
            ph->dsts[d] = (ipu_xfer_dst){prog->buffers[q->buffer].tile, 0, buffer_key(q->buffer, q->offset)};
        }
    }
    if (!step->init && ph->count && ipu_low_take_inject(&prog->inject, IPU_INJECT_DROP_TRANSFER)) {
        ph->count--; /* the first main-program phase loses one */
        step->count--;
    }
    for (size_t n = 0; n < ph->count && !step->init && !ph->keep_base; n++)
        if (ph->xfers[n].src_advance && ipu_low_take_inject(&prog->inject, IPU_INJECT_OUTGOING_BASE_KEPT))
            ph->keep_base = 1;
    for (size_t n = 0; n < ph->count && !step->init && !ph->base_ahead; n++)
        if (ph->xfers[n].src_advance && ipu_low_take_inject(&prog->inject, IPU_INJECT_RELATIVE_BASE_AHEAD))
            ph->base_ahead = 1;
    IPU_TRY(IPU_CHECK_CANCEL(ctx));
    if (ipu_exchange_schedule(ctx, &prog->profile, ph, mode) != IPU_OK)
        return IPU_INCONSISTENT(ctx, "exchange", "phase of step %zu (%s)", s, step->label);
    return IPU_OK;
}

ipu_status ipu_exchange_program(ipu_ctx *ctx, ipu_low_program *prog, const ipu_xmode *mode, ipu_xprogram *out)
{
    memset(out, 0, sizeof *out);
    out->phases = ipu_calloc(ctx, prog->step_count ? prog->step_count : 1, sizeof *out->phases);
    if (!out->phases)
        return IPU_NO_MEMORY(ctx);
    out->step_count = prog->step_count;
    /* Injected: compact waves of --exchange-stream-words taken as bytes (4 N words). */
    ipu_xmode in_bytes;
    if (mode && mode->stream_words && ipu_low_take_inject(&prog->inject, IPU_INJECT_STREAM_WORDS_AS_BYTES)) {
        in_bytes = *mode;
        in_bytes.stream_words *= 4;
        mode = &in_bytes;
    }
    ipu_status status = IPU_OK;
    for (size_t s = 0; s < prog->step_count && status == IPU_OK; s++)
        if (prog->steps[s].kind == IPU_LOW_EXCHANGE)
            status = build_phase(ctx, prog, mode, s, &out->phases[s]);
    if (status != IPU_OK)
        ipu_xprogram_free(out);
    return status;
}
