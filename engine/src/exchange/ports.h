/* ports.h: every tile's send and receive port while a phase is scheduled
 * (ports.c).  A port is a sorted array of disjoint, coalesced busy spans in
 * send-time cycles (receive spans shifted back by the latency L), so a
 * transfer of w words sent at cycle c needs [c, c + w) free on its sender's
 * send port and on every destination's receive port.  The scheduling orders
 * (exchange.c, streams.c) decide which transfer goes next; the ports place
 * it at the earliest cycle all its ports accept.
 */
#ifndef IPU_EXCHANGE_PORTS_H
#define IPU_EXCHANGE_PORTS_H

#include "exchange/exchange.h"

typedef struct ipu_xspan {
    uint32_t start, end; /* [start, end), send-time cycles */
} ipu_xspan;

typedef struct ipu_xport {
    ipu_xspan *spans;
    uint32_t count, capacity;
} ipu_xport;

/* A port as seen by one transfer's search: spans before i end at or before
 * the current candidate, and span i starts at next (2^32 when i is past the
 * last span), so a candidate window ending by next is accepted without
 * reading the port. */
typedef struct ipu_xcursor {
    ipu_xport *port;
    uint32_t i;
    uint64_t next;
} ipu_xcursor;

typedef struct ipu_xports {
    ipu_xport *ports; /* tiles send ports, then tiles receive ports */
    ipu_xcursor *involved;
    uint32_t tiles;
} ipu_xports;

/* Empty ports for tiles, room for transfers of up to max_dsts destinations. */
ipu_status ipu_xports_init(ipu_ctx *ctx, ipu_xports *q, uint32_t tiles, uint32_t max_dsts);
void ipu_xports_free(ipu_xports *q);
/* Make every port free again (another order of the same phase). */
void ipu_xports_clear(ipu_xports *q);

/* Place transfer index of phase at the earliest cycle at or after floor that
 * its sender and all its destinations accept: sets its cycle and raises the
 * phase's horizon. */
ipu_status ipu_xports_place(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, ipu_xports *q,
                            size_t index, uint64_t floor);

/* The end of the last busy span of tile's send port (0 when idle). */
uint32_t ipu_xports_send_end(const ipu_xports *q, uint32_t tile);

#endif
