/* xrow.h: reading and writing exchange-table entries (format.h), shared by
 * the exchange encoder, the package validator, the replay tool and the
 * device.  A row continues the row before it when it has the same op (a
 * send or a receive) and flags, starts where that row's bytes end (or, with
 * IPU_XFLAG_DESCEND, ends where they start) and after its last cycle: then
 * its entry stores only what the previous row does not imply.
 *   full, 16 bytes: op, flags, peer, cycle, words, address;
 *   continuation (IPU_XFLAG_CONTINUE), 8 bytes: op, flags, peer, a 16-bit
 *     gap after the previous row's end and 16-bit words;
 *   repeat (IPU_XFLAG_REPEAT), 4 bytes: an 8-bit gap in place of the op,
 *     flags, peer; the op and the words are the previous row's;
 *   run (IPU_XFLAG_RUN), 4 bytes: an 8-bit gap, flags and a 16-bit count:
 *     that many repeats, each with that gap, a receive's peer one above the
 *     row before it.
 * So a stream of transfers that fill a buffer in address order (up or
 * down), one after the other, costs 8 bytes a transfer, 4 when they are of
 * one size, and 4 in all when they come from consecutive tiles in turn (a
 * gather).  A table's count word counts its entries.
 */
#ifndef IPU_PACKAGE_XROW_H
#define IPU_PACKAGE_XROW_H

#include <stddef.h>
#include <stdint.h>

typedef struct ipu_xrow {
    uint32_t op;    /* enum ipu_xrow_op */
    uint32_t flags; /* IPU_XFLAG_RELATIVE, IPU_XFLAG_PAIRED; never the entry's own flags */
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

/* The bytes row takes as its own entry right after prev (NULL: the table's
 * first row), its window 'adjacency' to prev's: 4 or 8 when it can
 * continue prev, else 16. */
uint32_t ipu_xrow_size(const ipu_xrow *prev, const ipu_xrow *row, int adjacency);

/* Whether row, a repeat of prev (ipu_xrow_size 4) with adjacency, can be
 * the next row of a run whose rows are 'gap' cycles apart in 'adjacency'
 * order: a receive's peer one above prev's. */
int ipu_xrow_runs_on(const ipu_xrow *prev, const ipu_xrow *row, int adjacency, int run_adjacency, uint32_t gap);

/* Write row's entry at 'at' in 'size' bytes (what ipu_xrow_size gave for
 * adjacency); returns size. */
uint32_t ipu_xrow_put(uint8_t *at, const ipu_xrow *prev, const ipu_xrow *row, uint32_t size, int adjacency);

/* Write a run entry of count rows (each a repeat of the one before, 'gap'
 * cycles after its end, in 'adjacency' order, flags those of the rows);
 * returns its size (4). */
uint32_t ipu_xrow_put_run(uint8_t *at, uint32_t flags, uint32_t count, uint32_t gap, int adjacency);

/* The gap of a row continuing prev (its cycle less prev's end). */
uint32_t ipu_xrow_gap(const ipu_xrow *prev, const ipu_xrow *row);

/* Reads a table's rows in order, a run entry giving several. */
typedef struct ipu_xrow_reader {
    const uint8_t *base; /* the table's first entry */
    size_t avail;        /* bytes from base to the end of its storage */
    uint32_t entries;    /* entries in the table, and those read so far */
    uint32_t read;
    uint32_t entry;      /* the entry the last row came from (or the malformed one) */
    size_t offset;       /* that entry's offset from base, and where the next one starts */
    size_t next;
    uint32_t entry_size; /* that entry's bytes */
    uint32_t run_left, run_gap, run_down; /* rows left of a run entry, their gap and order */
    uint32_t rows;                        /* rows read so far */
    ipu_xrow last; /* the last row read */
    int any;       /* whether a row was read */
} ipu_xrow_reader;

void ipu_xrow_reader_init(ipu_xrow_reader *r, const uint8_t *entries, size_t avail, uint32_t count);
/* 1: *row is the next row; 0: the table is done; -1: entry r->entry is
 * malformed: it runs past the storage (ipu_xrow_fits is false), takes the
 * table past IPU_XTABLE_ROWS_MAX rows (r->rows says), or continues nothing
 * it can (no row before it, another op or other flags, several entry kinds
 * at once, a full row marked descending, a run of 0). */
int ipu_xrow_next(ipu_xrow_reader *r, ipu_xrow *row);

/* Whether the entry at 'at' fits in avail bytes (its size read from its flags). */
int ipu_xrow_fits(const uint8_t *at, size_t avail);

#endif
