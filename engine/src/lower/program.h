/* program.h: the low program, lowering's product.  Steps in execution order
 * (the init program's first, then the main program's); each step is a
 * compute phase (kernel calls per tile), an exchange phase (transfers), or a
 * host phase (stream bytes through the aperture).  Kernels, transfers and
 * host entries name buffers (a tensor block, a staging area) and offsets
 * inside them, never addresses: placement gives every buffer its address.
 * The main program may hold one Repeat over a range of its steps; a kernel
 * argument may advance by a fixed number of bytes per iteration (parameter
 * sequences), which packaging turns into a progression patch.
 */
#ifndef IPU_LOWER_PROGRAM_H
#define IPU_LOWER_PROGRAM_H

#include <jansson.h>

#include "core/inject.h"
#include "core/profile.h"
#include "kernels/kernels.h"

#define IPU_LOW_LITERAL 0xFFFFFFFFu

/* What a buffer holds (memory profiles group and classify by it). */
enum ipu_low_buffer_kind {
    IPU_LOW_TENSOR = 0,    /* a block of a tensor's home layout */
    IPU_LOW_OPERAND = 1,   /* a block of a tensor on an op's operand layout */
    IPU_LOW_STAGING = 2,   /* a block of a two-hop exchange's staging layout */
    IPU_LOW_SCRATCH = 3    /* op-local: partials, reduce and host staging, attention state... */
};

typedef struct ipu_low_buffer {
    uint32_t tile, size, alignment;
    uint32_t payload;     /* bytes of data per member, before row padding and rounding */
    uint32_t first, last; /* inclusive lifetime in steps */
    uint8_t aperture;     /* host staging: must lie in the aperture */
    uint8_t persistent;   /* parameters: the whole program */
    uint8_t pinned;       /* inputs, outputs, parameters: never in the aperture */
    uint32_t tensor;      /* owning tensor, IPU_LOW_LITERAL for staging */
    uint32_t alias;       /* another tensor stored here (the carried value's initial one) */
    uint32_t members;     /* parameter sequences: members stored back to back (1 otherwise) */
    uint32_t op;          /* the op being lowered when it was made, IPU_LOW_LITERAL outside ops */
    uint32_t value;       /* layout blocks: index into the program's values; else IPU_LOW_LITERAL */
    uint32_t block;       /* layout blocks: the value's block, (replica * row_parts + i) * col_parts + j */
    uint8_t kind;         /* ipu_low_buffer_kind */
    char name[56];
    uint32_t address;     /* set by placement */
} ipu_low_buffer;

/* One layout instance's blocks (an allocation root of memory profiles):
 * a tensor's home, an operand copy or a staging layout. */
typedef struct ipu_low_value {
    char name[64];
    uint32_t tensor, op;   /* op: IPU_LOW_LITERAL for homes */
    uint8_t kind;          /* ipu_low_buffer_kind */
    uint32_t members;
    uint32_t rows, cols, elem, row_parts, col_parts, replicas;
    int dtype;             /* the tensor's ipu_dtype (numerics.h), -1 when unknown */
    uint32_t *row_bounds, *col_bounds, *tiles; /* copies of the layout's (layout.h) */
} ipu_low_value;

typedef struct ipu_low_arg {
    uint32_t buffer; /* IPU_LOW_LITERAL: value is the argument itself */
    uint32_t value;  /* literal, or offset into the buffer */
} ipu_low_arg;

typedef struct ipu_low_kernel {
    uint32_t tile;
    int entry;
    uint32_t argc;
    ipu_low_arg args[IPU_KERNEL_MAX_ARGS];
    int32_t advance_arg;  /* argument that advances per Repeat iteration, -1 none */
    uint32_t advance;     /* bytes per iteration */
} ipu_low_kernel;

typedef struct ipu_low_xdst {
    uint32_t buffer, offset;
} ipu_low_xdst;

typedef struct ipu_low_xfer {
    uint32_t src_buffer, src_offset, bytes;
    uint32_t first_dst, dst_count;
    uint32_t src_advance; /* bytes the source moves on per Repeat iteration (0: none) */
} ipu_low_xfer;

/* A host entry: rows runs of bytes each, the first at buffer + offset and
 * stream_offset, the next ones tile_stride and stream_stride further. */
typedef struct ipu_low_host {
    uint32_t buffer, offset, bytes; /* bytes: per row */
    uint32_t rows, tile_stride;
    uint32_t stream, stream_stride;
    uint64_t stream_offset;
} ipu_low_host;

enum ipu_low_step_kind { IPU_LOW_COMPUTE = 1, IPU_LOW_EXCHANGE = 2, IPU_LOW_HOST_IN = 3, IPU_LOW_HOST_OUT = 4 };

typedef struct ipu_low_step {
    int kind;
    uint8_t init;              /* part of the init program */
    uint32_t first, count;     /* kernels, transfers or host entries */
    char label[48];
    uint32_t op;               /* the op it lowers, IPU_LOW_LITERAL for host rounds and carries */
    uint32_t origin;           /* the compiler op a fault here names: op, or for a host round or a
                                  carry the op that homes its tensor (IPU_LOW_LITERAL: none) */
} ipu_low_step;

typedef struct ipu_low_stream {
    char name[64];
    uint32_t direction; /* format.h ipu_stream_dir */
    uint64_t size;
    uint32_t tensor;
} ipu_low_stream;

/* A compiler op as packages and faults name it: kind ("matmul") and name
 * (its output tensor's). */
typedef struct ipu_low_op {
    char kind[16];
    char name[64];
    char attention[16]; /* attention and MAP pooling: the plan's mode ("flash", "materialized"); else "" */
    /* A matmul's blocks (a reference computes them as the device does):
     * row blocks, column blocks and reduction parts (count + 1 bounds each),
     * and its output's row bands (row_blocks x parts; band b is summed by
     * part b % parts). */
    uint32_t row_block_count, col_block_count, parts;
    uint32_t *row_blocks, *col_bounds, *k_bounds, *row_bounds;
    /* An attention's bands within an image, for a reference that computes
     * as the device does (attention_bands + 1 bounds; 0: none recorded): a
     * materialized attention's P V GEMMs, the query rows of each; a flash
     * attention split over key bands, the keys of each band. */
    uint32_t attention_bands;
    uint32_t *attention_bounds;
} ipu_low_op;

/* Where an op's output can be read once the op is complete (a per-op check
 * reads it there): one block of its home layout's first replica, rows
 * [row_lo, row_hi) and columns [col_lo, col_hi) of the tensor stored
 * row-major in buffer at stride bytes per row, complete after step. */
typedef struct ipu_low_capture {
    uint32_t op, step, buffer, stride;
    uint32_t row_lo, row_hi, col_lo, col_hi;
} ipu_low_capture;

/* A graph tensor's name (buffers' tensor indexes these). */
typedef struct ipu_low_tensor {
    char name[64];
    uint32_t homing_op; /* the op that makes it or first reads it, IPU_LOW_LITERAL: none */
} ipu_low_tensor;

typedef struct ipu_low_program {
    ipu_profile profile;
    ipu_low_op *ops; /* by graph op index (steps' and buffers' op) */
    size_t op_count;
    ipu_low_tensor *tensors;
    size_t tensor_count;
    ipu_low_capture *captures; /* by op, then block */
    size_t capture_count, capture_capacity;
    ipu_low_buffer *buffers;
    size_t buffer_count, buffer_capacity;
    ipu_low_value *values;
    size_t value_count, value_capacity;
    ipu_low_kernel *kernels;
    size_t kernel_count, kernel_capacity;
    ipu_low_xfer *xfers;
    size_t xfer_count, xfer_capacity;
    ipu_low_xdst *xdsts;
    size_t xdst_count, xdst_capacity;
    ipu_low_host *hosts;
    size_t host_count, host_capacity;
    ipu_low_step *steps;
    size_t step_count, step_capacity;
    ipu_low_stream *streams;
    size_t stream_count, stream_capacity;
    uint32_t repeat_first, repeat_count, repeat_iterations; /* main-program steps */
    uint32_t unplaced;  /* the buffer placement could not fit (set by packaging), else IPU_LOW_LITERAL */
    int inject; /* ipu_inject */
} ipu_low_program;

void ipu_low_free(ipu_low_program *prog);

/* An interval of live bytes: on tile, from step first to last (inclusive),
 * counted in one of the walker's slots (a class of storage). */
typedef struct ipu_low_live {
    uint32_t tile, first, last, slot;
    uint64_t bytes;
} ipu_low_live;

/* The liveness walker, which the compile's estimate, placement's retry and
 * the memory profiles share: per tile, step and slot, the sum of the bytes
 * of the intervals live there, in *out[(tile * steps + step) * slots + slot]
 * (freed by the caller). */
ipu_status ipu_low_sweep(ipu_ctx *ctx, uint32_t tiles, uint32_t steps, uint32_t slots,
                         const ipu_low_live *items, size_t count, uint64_t **out);

/* Per tile, the largest sum of live buffer bytes over the program's steps
 * (the walker over every buffer's lifetime); *peak_tile and *peak_step say
 * where the largest one is. */
ipu_status ipu_low_peaks(ipu_ctx *ctx, const ipu_low_program *prog, uint64_t *peak,
                         uint32_t *peak_tile, uint32_t *peak_step, uint64_t **per_tile);

/* What a buffer holds, as text (shape.c; the package's allocation shapes):
 * a block of a layout, its rows x columns and element type ("46x1152 f16"),
 * members first for a parameter sequence ("27x46x1152 f16"); any other
 * buffer, its payload bytes ("4096 B").  Writes at most size bytes, NUL
 * included (IPU_LOW_SHAPE_MAX is always enough). */
#define IPU_LOW_SHAPE_MAX 48
void ipu_low_buffer_shape(const ipu_low_program *prog, const ipu_low_buffer *b, char *out, size_t size);

/* Per step, the package program phase it becomes (phases.c): phase[s]
 * for every one of the program's steps. */
void ipu_low_step_phases(const ipu_low_program *prog, uint32_t *phase);
/* The phase of one step. */
uint32_t ipu_low_step_phase(const ipu_low_program *prog, size_t step);

#endif
