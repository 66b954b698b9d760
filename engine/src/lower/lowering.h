/* lowering.h: inside lowering, shared by lower.c (buffers, steps,
 * redistributions, host rounds and elementwise ops) and the op lowerings of
 * matmul.c, norm.c (LayerNorm) and attention.c (attention, MAP pooling).
 */
#ifndef IPU_LOWERING_H
#define IPU_LOWERING_H

#include "lower/lower.h"

typedef struct lowering {
    ipu_ctx *ctx;
    const ipu_plan *plan;
    const ipu_graph *g;
    ipu_low_program *prog;
    uint32_t **blocks;   /* per tensor: buffer per (replica, block) of its home */
    uint32_t *(*operands)[3]; /* per op: buffers of the operands on its layouts a, b, b */
    uint8_t *cleared;    /* per buffer: padding already cleared */
    uint8_t *padded;     /* per buffer: rows carry padding */
    int init;            /* emitting the init program */
    uint32_t op;         /* the op being lowered, IPU_LOW_LITERAL outside ops */
    uint32_t body_first, body_end; /* main-program steps of the Repeat body */
} lowering;

#define LIT(v) ((ipu_low_arg){IPU_LOW_LITERAL, (uint32_t)(v)})
#define BUF(b, o) ((ipu_low_arg){(b), (uint32_t)(o)})

ipu_low_step *low_current(lowering *L);
ipu_status low_begin_step(lowering *L, int kind, const char *label);
/* The current step touches the buffer (its lifetime grows to cover it). */
void low_use(lowering *L, uint32_t buffer);
ipu_status low_new_buffer(lowering *L, uint32_t tile, uint32_t size, uint32_t tensor, int padded,
                          int aperture, const char *name, uint32_t *id);
/* A kernel in the current compute step (a new one if the current step is not). */
ipu_status low_emit_kernel(lowering *L, uint32_t tile, int entry, uint32_t argc,
                           const ipu_low_arg *args, int32_t advance_arg, uint32_t advance);
/* Clear a padded buffer before the kernel or exchange that first writes it. */
ipu_status low_clear(lowering *L, uint32_t buffer);
/* A transfer in the current exchange step: bytes of buffer from at offset
 * from_at to buffer to at offset to_at (one destination). */
ipu_status low_transfer(lowering *L, uint32_t from, uint32_t from_at, uint32_t bytes, uint32_t to, uint32_t to_at);
/* A buffer per present block of every replica (absent ones get IPU_LOW_LITERAL),
 * recorded as one value of the given kind (ipu_low_buffer_kind). */
ipu_status low_layout_buffers(lowering *L, const ipu_layout *l, uint32_t tensor, uint32_t members,
                              int kind, const char *name, uint32_t **out);
/* One step moving src's blocks into dst's: local copies, then an exchange. */
ipu_status low_redistribute(lowering *L, const ipu_layout *s, const uint32_t *src,
                            const ipu_layout *d, const uint32_t *dst, const char *label);
/* The same from sequences when advancing: each source buffer that holds
 * several members is read at its current member (the move's sources advance
 * one member per Repeat iteration). */
ipu_status low_redistribute_from(lowering *L, const ipu_layout *s, const uint32_t *src, int advancing,
                                 const ipu_layout *d, const uint32_t *dst, const char *label);
const uint32_t *low_home_ids(lowering *L, uint32_t tensor);
/* Elements in one padded row of column band j. */
uint32_t low_elements_per_row(const ipu_layout *l, uint32_t j);
/* The buffers of `tensor` on operand layout l of op index: its home's when
 * l is empty, else buffers of their own (kept in the op's operand slot) that
 * one step brings over from the home. */
ipu_status low_operand(lowering *L, size_t index, int slot, uint32_t tensor, const ipu_layout *l,
                       const char *label, const uint32_t **ids);

/* The current member of parameter in[slot] of op index (a row parameter
 * homed thinly, ipu_plan_row_param_home) on operand layout l: one multicast
 * step delivers it from the home, its sources moving on one member per
 * Repeat iteration (exchange sends relative to OUTGOING_BASE, or patched). */
ipu_status low_current_member(lowering *L, size_t index, int slot, const ipu_layout *l, const char *label,
                              const uint32_t **ids);

ipu_status ipu_lower_matmul(lowering *L, size_t index);
ipu_status ipu_lower_layernorm(lowering *L, size_t index);
ipu_status ipu_lower_attention(lowering *L, size_t index);

#endif
