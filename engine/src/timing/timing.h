/* timing.h: exact static timing of a built package.  Exchange is statically
 * timed and every kernel's cycles follow from its descriptor, so the cycles
 * the device charges a run are known once the package is built: this module
 * reads the package's own records (slot tables, compute lists, exchange
 * tables, host descriptors, Repeat patch lists, with the patches applied at
 * each iteration as the device applies them) and walks the main program as
 * the device does, without any tensor values.  It knows nothing of the
 * compiler that built the package.
 *
 * The result has the device run's own shape (ipu_device_run): cycles, ms,
 * totals, one record per executed step, per-tile compute and wait, so a run
 * and its static timing compare field for field; beside them, per exchange
 * phase of the program and per compiler op, the bytes sent and received.
 * A package whose run would fault (a record the device cannot read) has no
 * timing: the call fails naming the tile, slot and record.
 */
#ifndef IPU_TIMING_H
#define IPU_TIMING_H

#include <jansson.h>

#include "core/core.h"
#include "package/package.h"

/* The main program's static timing as JSON (see above); *out is new. */
ipu_status ipu_timing_package(ipu_ctx *ctx, const ipu_package *pkg, json_t **out);

#endif
