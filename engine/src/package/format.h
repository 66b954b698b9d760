/* format.h: the byte formats the compiler writes and the device reads: the
 * package file (header, section table, sections) and the records a tile reads
 * from its own SRAM at run time (slot tables, compute lists, exchange tables,
 * host descriptors, Repeat patch lists).  All integers are little-endian.
 *
 * Package file:
 *   header (64 B): magic "IPUPKG\r\n", u32 version, u32 header size,
 *     u64 total size, u32 CRC-32 of every byte after the header, u32 section
 *     count, u64 profile digest, u32 tiles, u32 invocations, u32 slots,
 *     zero padding to 64 bytes.
 *   section table: per section u32 type, u32 zero, u64 offset, u64 size;
 *     sections are 8-byte aligned, inside the file and disjoint.
 *
 * Tile SRAM records (addresses are byte addresses, 4-byte aligned):
 *   slot table: u32 address per slot (0 = this tile takes no part).
 *   compute list: u32 count, then descriptors (u16 entry, u16 argc, argc u32).
 *   exchange table: u32 entry count, then entries (xrow.h).  Full, 16 bytes:
 *     w0 = op | flags << 8 | tile << 16, w1 = cycle, w2 = words,
 *     w3 = address.  The others continue the row before them (same op
 *     and flags): address = that row's address + its words x width (with
 *     IPU_XFLAG_DESCEND: that row's address - this row's words x width),
 *     cycle = that row's cycle + its words + gap.  Continuation (flag
 *     IPU_XFLAG_CONTINUE), 8 bytes: w0 as a full row's, w1 = gap | words << 16.
 *     Repeat (flag IPU_XFLAG_REPEAT), 4 bytes: w0 = gap | flags << 8 |
 *     tile << 16, the op and the words those of the row before.  Run (flag
 *     IPU_XFLAG_RUN), 4 bytes: w0 = gap | flags << 8 | count << 16: count
 *     (>= 1) repeats, each gap cycles after the one before, a receive's
 *     tile one above the one before.  The count word counts entries; a
 *     table holds at most IPU_XTABLE_ROWS_MAX rows, runs expanded.
 *   host descriptor: u32 count, then 32-byte entries, each a strided run of
 *     rows: u32 stream, u32 stream offset, u32 tile address (inside the
 *     aperture), u32 row bytes, u32 rows (>= 1), u32 stream stride (bytes
 *     between row starts in the stream), u32 tile stride (bytes between row
 *     starts on the tile; >= row bytes when rows > 1: rows never overlap on
 *     the tile), u32 zero (reserved).  Row r moves row bytes between stream
 *     offset + r * stream stride and tile address + r * tile stride; every
 *     row lies inside the aperture and the stream.  An entry moves rows x
 *     row bytes.
 *   patch list: u32 count, then 16-byte entries:
 *     u32 kind, u32 target address, u32 a, u32 b.
 */
#ifndef IPU_PACKAGE_FORMAT_H
#define IPU_PACKAGE_FORMAT_H

#define IPU_PKG_MAGIC "IPUPKG\r\n"
#define IPU_PKG_VERSION 7u
#define IPU_PKG_HEADER_SIZE 64u
#define IPU_PKG_SECTION_ENTRY_SIZE 24u

/* Section types (append-only). */
enum ipu_pkg_section {
    IPU_SEC_PROFILE = 1,  /* canonical profile JSON text */
    IPU_SEC_META = 2,     /* workload metadata JSON text (checks, cases) */
    IPU_SEC_TILES = 3,    /* per tile: u32 slot table address */
    IPU_SEC_SEGMENTS = 4, /* u32 tile, kind, address, size, entry, zero, u64 data offset */
    IPU_SEC_ALLOCS = 5,   /* u32 tile, address, size, name offset (into STRINGS), tensor name
                             offset, first phase, last phase, compiler op (IPU_NO_OP: none),
                             kind (ipu_alloc_kind), shape offset (into STRINGS: what it holds,
                             "46x1152 f16", "27x46x1152 f16" or "4096 B", lower/shape.c; ""
                             when unknown) */
    IPU_SEC_STRINGS = 6,  /* NUL-terminated strings */
    IPU_SEC_INIT = 7,     /* control ops run once at initialize */
    IPU_SEC_MAIN = 8,     /* control ops run at every invocation */
    IPU_SEC_STREAMS = 9,  /* u32 direction, u32 name offset, u64 size */
    IPU_SEC_RECORDS = 10, /* u32 kind, u32 stream, u32 invocation, u32 zero, u64 data offset, u64 size */
    IPU_SEC_DATA = 11,    /* bytes of segments and records */
    IPU_SEC_COMPILER_OPS = 12, /* u32 kind offset, u32 name offset (into STRINGS) per compiler op */
    IPU_SEC_CAPTURES = 13,     /* u32 op, phase, tile, address, stride, row lo, row hi, col lo,
                                  col hi, zero: where an op's output block can be read after phase */
    IPU_SEC_END = 14
};
#define IPU_PKG_SEGMENT_SIZE 32u
#define IPU_PKG_ALLOC_SIZE 40u
#define IPU_PKG_OP_SIZE 24u
#define IPU_PKG_COMPILER_OP_SIZE 8u
#define IPU_PKG_CAPTURE_SIZE 40u
#define IPU_PKG_STREAM_SIZE 16u
#define IPU_PKG_RECORD_SIZE 32u

/* Segment kinds: code and descriptors are protected once loaded. */
enum ipu_seg_kind {
    IPU_SEG_CODE = 1,       /* kernel code (region 0; no bytes stored): an entry's supervisor
                               part (entry = the entry id) or a worker body shared by
                               entries (entry = IPU_CODE_BODY | body id) */
    IPU_SEG_DESCRIPTOR = 2, /* slot tables, compute lists, exchange/host/patch records */
    IPU_SEG_DATA = 3        /* initial tensor contents (writable) */
};

#define IPU_CODE_BODY 0x10000u

/* Control ops: u32 op, a, b, c, then the compiler op each of its two phases
 * lowers (origin a: the compute phase or the host transfer; origin b: the
 * exchange phase; IPU_NO_OP: none). */
enum ipu_op {
    IPU_OP_STEP = 1,     /* a = compute slot, b = exchange slot (IPU_NO_SLOT: none) */
    IPU_OP_HOST_IN = 2,  /* a = host descriptor slot: stream bytes into the aperture */
    IPU_OP_HOST_OUT = 3, /* a = host descriptor slot: aperture bytes out to the stream */
    IPU_OP_REPEAT = 4    /* a = count, b = body length (ops that follow), c = patch slot */
};
#define IPU_NO_SLOT 0xFFFFFFFFu
#define IPU_NO_OP 0xFFFFFFFFu

/* Allocation lifetimes count program phases: the control ops of the init
 * program, then those of the main program, numbered together (op g), each
 * with two phases: 2g, its compute phase (or its host transfer, or a
 * Repeat's patches), and 2g + 1, its exchange phase.  An allocation is live
 * from its first phase to its last, inclusive, every time they run (each
 * Repeat iteration, each invocation); after its last phase its bytes lose
 * their written state.  A last phase of IPU_LIFE_FOREVER never ends
 * (parameters, hand-built tensors). */
#define IPU_LIFE_FOREVER 0xFFFFFFFFu

/* What an allocation holds (append-only): a parameter, a block of a
 * tensor's home (inputs, outputs and activations), a copy of a tensor laid
 * out for one op's operand, a two-hop exchange's staging block, op-local
 * scratch (partials, attention state), host staging in the aperture. */
enum ipu_alloc_kind {
    IPU_ALLOC_PARAMETER = 0,
    IPU_ALLOC_ACTIVATION = 1,
    IPU_ALLOC_OPERAND_COPY = 2,
    IPU_ALLOC_STAGING = 3,
    IPU_ALLOC_SCRATCH = 4,
    IPU_ALLOC_HOST_STAGING = 5,
    IPU_ALLOC_KIND_COUNT
};

/* Stream directions. */
enum ipu_stream_dir { IPU_STREAM_PARAM = 0, IPU_STREAM_INPUT = 1, IPU_STREAM_OUTPUT = 2 };
/* Record kinds. */
enum ipu_record_kind { IPU_RECORD_INPUT = 0, IPU_RECORD_EXPECTED = 1 };

/* Exchange row ops and flags. */
enum ipu_xrow_op {
    IPU_XROW_SEND = 1,      /* at cycle send words from address (relative: + OUTGOING_BASE) */
    IPU_XROW_RECV = 2,      /* at cycle select sender tile, write words to address */
    IPU_XROW_SET_BASE = 3,  /* OUTGOING_BASE = address */
    IPU_XROW_RESET_BASE = 4 /* OUTGOING_BASE = 0 */
};
#define IPU_XFLAG_RELATIVE 1u /* send: source address is relative to OUTGOING_BASE */
#define IPU_XFLAG_PAIRED 2u   /* 64-bit words through both ports of a supertile pair */
#define IPU_XFLAG_CONTINUE 4u /* an 8-byte row continuing the row before it */
#define IPU_XFLAG_REPEAT 8u   /* a 4-byte row continuing the row before it, with its words */
#define IPU_XFLAG_DESCEND 16u /* a continuation, repeat or run row ending where the row before it starts */
#define IPU_XFLAG_RUN 32u     /* a 4-byte entry of several repeats, each a tile on (format.h) */
#define IPU_XROW_SIZE 16u
#define IPU_XROW_CONTINUED_SIZE 8u
#define IPU_XROW_REPEAT_SIZE 4u
#define IPU_XTABLE_ROWS_MAX 65536u /* rows of one exchange table, runs expanded */

/* Patch kinds. */
enum ipu_patch_kind {
    IPU_PATCH_TABLE = 1,      /* value = u32 table at a, with b entries: table[iteration] */
    IPU_PATCH_PROGRESSION = 2 /* value = a + iteration * b (mod 2^32) */
};
#define IPU_PATCH_SIZE 16u
/* Supervisor cycles to apply one patch entry at a Repeat iteration; the
 * tile with the longest list sets the patch phase's cost. */
#define IPU_PATCH_CYCLES 4u
#define IPU_HOST_ENTRY_SIZE 32u

#endif
