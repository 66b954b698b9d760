/* exchange.h: exchange v1, latency-oriented.  A phase is a set of transfers,
 * each one window of 32-bit words from one tile to one or more tiles
 * (multicast: every destination selects the same sender window).  Scheduling
 * assigns each transfer a send cycle so that no tile sends or receives two
 * words in one cycle; encoding turns the scheduled phase into each tile's
 * exchange table (format.h rows) once addresses are known.
 */
#ifndef IPU_EXCHANGE_H
#define IPU_EXCHANGE_H

#include "core/core.h"
#include "core/profile.h"

typedef struct ipu_xfer_dst {
    uint32_t tile;
    uint32_t address; /* filled before encoding */
} ipu_xfer_dst;

typedef struct ipu_xfer {
    uint32_t src_tile;
    uint32_t src_address; /* filled before encoding */
    uint32_t bytes;       /* a positive multiple of 4 */
    uint32_t first_dst;   /* index into the phase's dsts */
    uint32_t dst_count;   /* >= 1 */
    uint32_t cycle;       /* set by scheduling: the first send cycle */
} ipu_xfer;

typedef struct ipu_xphase {
    ipu_xfer *xfers;
    size_t count;
    ipu_xfer_dst *dsts;
    size_t dst_total;
    uint64_t horizon; /* set by scheduling: last arrival + 1 (0 when empty) */
} ipu_xphase;

/* Assign every transfer's cycle (earliest fit, longest transfers first) and
 * the phase horizon.  Checks tiles, sizes and destination counts. */
ipu_status ipu_exchange_schedule(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase);

/* Every tile's exchange table of a scheduled phase, encoded in one pass:
 * tile t's table (u32 row count, then 16-byte rows: its sends by cycle,
 * then its receives by cycle) is data[offset[t] .. offset[t + 1]), empty
 * when the tile takes no part. */
typedef struct ipu_xtables {
    uint8_t *data;
    size_t *offset; /* tiles + 1 */
} ipu_xtables;

/* Addresses must be filled and 4-byte aligned; tiles in the profile's range. */
ipu_status ipu_exchange_encode(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *phase, ipu_xtables *out);
void ipu_xtables_free(ipu_xtables *t);

#endif
