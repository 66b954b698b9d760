/* lower.h: lowering a plan into a low program (program.h): host input and
 * output through the aperture, parameter upload in the init program, operand
 * redistributions, tile GEMMs, reductions of partials, elementwise kernels,
 * padding clears, the Repeat over the body with per-iteration parameter
 * advances, and the carried value's hand-over between iterations.
 */
#ifndef IPU_LOWER_H
#define IPU_LOWER_H

#include "lower/program.h"
#include "plan/plan.h"

ipu_status ipu_lower(ipu_ctx *ctx, const ipu_plan *plan, int inject, ipu_low_program *out);

#endif
