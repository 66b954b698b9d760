/* placement.h: the placement report of a packaged program: every buffer on
 * every tile with its placed address, size, lifetime, kind, aliases and
 * sequence members; the package support each tile reserves (its exchange
 * tables counted apart) and the tensor bytes left beside it; per tile and
 * step the estimate (the liveness walker's sum of live bytes) beside the
 * placed footprint (the span of live address ranges), the largest gaps
 * between the two; and each tile's program listing with the buffers every
 * line uses.  Columnar JSON, version 1 (harness/ipu_e2e/placement.py and
 * reports/placement/ read it).
 */
#ifndef IPU_REPORT_PLACEMENT_H
#define IPU_REPORT_PLACEMENT_H

#include <jansson.h>

#include "ir/ir.h"
#include "lower/program.h"
#include "package/assemble.h"

/* NULL when out of memory or cancelled (then ctx says so). */
json_t *ipu_placement_report(ipu_ctx *ctx, const ipu_low_program *prog, const ipu_graph *g,
                             const ipu_support_map *support);

#endif
