/* xrow.h: reading and writing one exchange-table row (format.h), shared by
 * the exchange encoder, the package validator, the replay tool and the
 * device.  A row continues the row before it when it has the same op (a
 * send or a receive) and flags, starts where that row's bytes end and
 * after its last cycle (or ends where that row's bytes begin: descending,
 * IPU_XFLAG_DESCEND): then it stores only what the previous row does not
 * imply.
 *   full, 16 bytes: op, flags, peer, cycle, words, address;
 *   continuation (IPU_XFLAG_CONTINUE), 8 bytes: op, flags, peer, a 16-bit
 *     gap after the previous row's end and 16-bit words;
 *   repeat (IPU_XFLAG_REPEAT), 4 bytes: an 8-bit gap in place of the op,
 *     flags, peer; the op and the words are the previous row's.
 * So a stream of transfers that fill a buffer in address order (up or
 * down), one after the other, costs 8 bytes a transfer, and 4 when they are
 * of one size.
 */
#ifndef IPU_PACKAGE_XROW_H
#define IPU_PACKAGE_XROW_H

#include <stddef.h>
#include <stdint.h>

typedef struct ipu_xrow {
    uint32_t op;    /* enum ipu_xrow_op */
    uint32_t flags; /* IPU_XFLAG_RELATIVE, IPU_XFLAG_PAIRED; never the continuation flags */
    uint32_t peer;  /* a receive's sender */
    uint32_t cycle, words, address;
} ipu_xrow;

/* Where a row's window lies against the previous row's: the caller's to
 * say (the encoder decides by key, before addresses exist). */
enum ipu_xrow_adjacency {
    IPU_XROW_APART = 0, /* elsewhere */
    IPU_XROW_AFTER = 1, /* it starts where the previous window ends */
    IPU_XROW_BEFORE = 2 /* it ends where the previous window starts */
};

/* Bytes per word of a row: 8 for a paired transfer, else 4. */
uint32_t ipu_xrow_width(const ipu_xrow *row);

/* The bytes row takes written right after prev (NULL: the table's first
 * row), its window 'adjacency' to prev's: 4 or 8 when it can continue prev,
 * else 16. */
uint32_t ipu_xrow_size(const ipu_xrow *prev, const ipu_xrow *row, int adjacency);

/* Write row at 'at' in 'size' bytes (what ipu_xrow_size gave for
 * adjacency); returns size. */
uint32_t ipu_xrow_put(uint8_t *at, const ipu_xrow *prev, const ipu_xrow *row, uint32_t size, int adjacency);

/* Read the row at 'at', 'avail' bytes before the end of its storage, after
 * prev (NULL for the table's first row).  Returns the bytes it takes (16, 8
 * or 4), or 0 when it does not fit in avail (ipu_xrow_fits) or continues
 * nothing it can (no prev, another op or other flags, both continuation
 * flags, or a full row marked descending). */
uint32_t ipu_xrow_get(const uint8_t *at, size_t avail, const ipu_xrow *prev, ipu_xrow *row);

/* Whether the row at 'at' fits in avail bytes (its size read from its flags). */
int ipu_xrow_fits(const uint8_t *at, size_t avail);

#endif
