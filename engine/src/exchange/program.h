/* program.h: the exchange stage's product for a low program: every exchange
 * step's transfers as a scheduled phase (exchange.h), the tiles taken from
 * the buffers they move between.  Addresses are filled once placement has
 * given the buffers theirs (package encoding does it).
 */
#ifndef IPU_EXCHANGE_PROGRAM_H
#define IPU_EXCHANGE_PROGRAM_H

#include "exchange/exchange.h"
#include "lower/program.h"

typedef struct ipu_xprogram {
    ipu_xphase *phases; /* per step of the low program; empty for other kinds */
    size_t step_count;
} ipu_xprogram;

/* Build and schedule every exchange step's phase in mode (NULL:
 * latency-oriented), every window keyed by its buffer and offset.  The
 * program's own mutations of exchanges (a multicast destination dropped, a
 * transfer dropped from the first main-program phase, the first phase with
 * advancing sources keeping OUTGOING_BASE set) are taken here. */
ipu_status ipu_exchange_program(ipu_ctx *ctx, ipu_low_program *prog, const ipu_xmode *mode, ipu_xprogram *out);
void ipu_xprogram_free(ipu_xprogram *x);

#endif
