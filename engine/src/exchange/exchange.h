/* exchange.h: exchange scheduling and table encoding.  A phase is a set of
 * transfers, each one window of 32-bit words from one tile to one or more
 * tiles (multicast: every destination selects the same sender window).
 * Scheduling assigns each transfer a send cycle so that no tile sends or
 * receives two words in one cycle; encoding turns the scheduled phase into
 * each tile's exchange table (format.h rows, xrow.h) once addresses are
 * known.
 *
 * Every source and destination also carries a key that orders and joins
 * them before placement has given addresses: (buffer << 32) + offset in the
 * compiler, the address itself where addresses are all there is (stress,
 * replay).  Two windows whose keys are adjacent (one's key plus its bytes is
 * the other's) are adjacent in SRAM, whatever the addresses turn out to be,
 * so a table's size (which rows can be 8-byte continuations) is known before
 * placement and equals what encoding writes.
 */
#ifndef IPU_EXCHANGE_H
#define IPU_EXCHANGE_H

#include "core/core.h"
#include "core/profile.h"

typedef struct ipu_xfer_dst {
    uint32_t tile;
    uint32_t address; /* filled before encoding */
    uint64_t key;
} ipu_xfer_dst;

typedef struct ipu_xfer {
    uint32_t src_tile;
    uint32_t src_address; /* filled before encoding */
    uint32_t bytes;       /* a positive multiple of 4 */
    uint32_t first_dst;   /* index into the phase's dsts */
    uint32_t dst_count;   /* >= 1 */
    uint32_t cycle;       /* set by scheduling: the first send cycle */
    uint64_t src_key;
    uint32_t src_advance; /* bytes the source moves on per Repeat iteration (0: none) */
} ipu_xfer;

typedef struct ipu_xphase {
    ipu_xfer *xfers;
    size_t count;
    ipu_xfer_dst *dsts;
    size_t dst_total;
    uint64_t horizon; /* set by scheduling: last arrival + 1 (0 when empty) */
    int keep_base;    /* injected: tables that set OUTGOING_BASE leave it set */
    int base_ahead;   /* injected: SET_BASE starts one displacement ahead (iteration 0 reads iteration 1's) */
} ipu_xphase;

/* How a phase is scheduled.  stream_words 0 is latency-oriented: greedy
 * earliest fit, longest transfers first.  stream_words N > 0 is compact:
 * each tile's receives form an address-ordered stream (started at its first
 * window from a tile above its own and wrapped round), and the streams are
 * taken in waves of N words, so a tile receives in address order and its
 * rows become continuations; the latency-oriented and the stream schedule
 * are ranked by their largest table, then total table bytes, then horizon.
 * balance adds endpoint-balanced chunks of 4N words (address order inside a
 * chunk, the chunk whose receiver and sender are free first goes next),
 * taken only with a shorter horizon and no larger or more table bytes. */
typedef struct ipu_xmode {
    uint32_t stream_words;
    int balance;
    int by_horizon; /* compact mode: keep the shortest horizon (then the smaller tables), not the smallest tables */
} ipu_xmode;

/* Assign every transfer's cycle and the phase horizon in mode (NULL:
 * latency-oriented).  Checks tiles, sizes and destination counts. */
ipu_status ipu_exchange_schedule(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, const ipu_xmode *mode);

/* Every tile's exchange table of a scheduled phase, encoded in one pass:
 * tile t's table (u32 row count, then its sends by cycle, then its
 * receives by cycle, each a full row or a continuation of the row before
 * it) is data[offset[t] .. offset[t + 1]), empty when the tile takes no
 * part.
 *
 * Sends whose source advances per Repeat iteration are relocated: on a
 * tile where they all advance by one displacement, the table starts by
 * setting OUTGOING_BASE (to 0, and a patch makes it iteration x
 * displacement), those sends are relative to it, and the table ends by
 * resetting it; on another tile each of their full rows has its address
 * patched (an arithmetic progression).  Tile t's patches are
 * patches[patch_offset[t] .. patch_offset[t + 1]). */
typedef struct ipu_xpatch {
    uint32_t at;   /* byte offset in the tile's table of the word to patch */
    uint32_t a, b; /* its value at iteration i: a + i x b */
} ipu_xpatch;

typedef struct ipu_xtables {
    uint8_t *data;
    size_t *offset; /* tiles + 1 */
    ipu_xpatch *patches;
    size_t *patch_offset; /* tiles + 1 */
    uint8_t *based;       /* per tile: 1 where its table sets OUTGOING_BASE */
} ipu_xtables;

/* Addresses must be filled and 4-byte aligned; tiles in the profile's range. */
ipu_status ipu_exchange_encode(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *phase, ipu_xtables *out);
void ipu_xtables_free(ipu_xtables *t);

/* What encoding will write per tile, from the keys and cycles alone
 * (addresses need not be filled): bytes[t] of table (0 for a tile that
 * takes no part) and patches[t] (NULL: not wanted). */
ipu_status ipu_exchange_measure(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *phase, uint64_t *bytes,
                                uint32_t *patches);

#endif
