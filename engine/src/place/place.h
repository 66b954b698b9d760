/* place.h: placement v1: per-tile best-fit allocation.  Every request has a
 * tile, a size, an alignment, an inclusive lifetime [first, last] in program
 * step indices and an allowed address range; requests whose lifetimes
 * overlap never overlap in bytes, and declared conflict pairs (operands a
 * kernel must keep in different memory elements) never share an element
 * while both are live.  A declared access tail (bytes a kernel may read past
 * the payload) belongs to its request.  Reserved ranges (package support)
 * are never used.
 */
#ifndef IPU_PLACE_H
#define IPU_PLACE_H

#include "core/core.h"
#include "core/profile.h"

typedef struct ipu_place_request {
    uint32_t tile;
    uint32_t size;      /* bytes, > 0 */
    uint32_t alignment; /* a power of two */
    uint32_t first, last;
    uint32_t lo, hi;    /* allowed [lo, hi): e.g. the region for wide loads */
    const char *name;   /* for messages */
    uint32_t address;   /* the result */
    uint32_t access_tail; /* bytes a kernel may read past size: reserved with it */
} ipu_place_request;

typedef struct ipu_place_conflict {
    uint32_t a, b; /* request indices (same tile) */
} ipu_place_conflict;

typedef struct ipu_place_range {
    uint32_t tile, lo, hi;
} ipu_place_range;

#define IPU_PLACE_UNPLACED 0xFFFFFFFFu

/* Place every request; on failure the message names the tile, the request,
 * the total free bytes in its lifetime and the largest hole, and that
 * request's address is IPU_PLACE_UNPLACED. */
ipu_status ipu_place(ipu_ctx *ctx, const ipu_profile *p, ipu_place_request *requests, size_t count,
                     const ipu_place_conflict *conflicts, size_t conflict_count,
                     const ipu_place_range *reserved, size_t reserved_count);

#endif
