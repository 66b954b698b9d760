/* shrink.h: the search's feedback when a whole candidate plan does not fit.
 * At the tile and step where the lowered candidate peaks, each live buffer
 * is charged to the matmul whose choice put it there: its own op's (an
 * operand copy, partials, reduction staging), or for a tensor's home, the
 * op that chose its layout (its producer, through elementwise ops to the
 * matmul whose layout they follow; a graph input or parameter: its first
 * reader).  The matmul charged the most that still has a smaller candidate
 * in its catalogue is capped just below its current exact footprint, and
 * the search plans again.
 */
#ifndef IPU_DRIVER_SHRINK_H
#define IPU_DRIVER_SHRINK_H

#include "lower/program.h"
#include "plan/plan.h"

/* Caps one matmul in caps (per op); *capped receives its index, or -1 when
 * no matmul charged at (tile, step) can get smaller. */
ipu_status ipu_shrink_at_peak(ipu_ctx *ctx, const ipu_plan *plan, const ipu_low_program *prog, uint32_t tile,
                              uint32_t step, uint64_t *caps, long *capped);

#endif
