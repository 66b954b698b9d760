/* inject.h: the mutations tests inject, shared by the stages that apply
 * them (planning, lowering, exchange, placement, packaging, the driver) and
 * named by driver/mutations.c. */
#ifndef IPU_INJECT_H
#define IPU_INJECT_H

/* Mutations the tests inject, each a realistic single-point compiler bug in
 * one stage's product, to prove that the device or a check catches it and
 * names where it is (never used otherwise).  Each is applied at its first
 * opportunity; a program with none is refused ("no place for it"). */
typedef enum ipu_inject {
    IPU_INJECT_NONE = 0,
    /* planning */
    IPU_INJECT_PLAN_BLOCKS_SHARE_TILE, /* a home layout puts two blocks on one tile */
    /* exchange: scheduled phases and their encoding */
    IPU_INJECT_DROP_TRANSFER,          /* the last transfer of a phase is lost */
    IPU_INJECT_RECEIVE_CYCLE_LATE,     /* one receive row selects its sender a cycle late */
    IPU_INJECT_MULTICAST_DROP_DEST,    /* a multicast loses its last destination */
    IPU_INJECT_SEND_OFFSET_WORD,       /* a transfer sends from one word past its source */
    /* placement */
    IPU_INJECT_OVERLAP_ALLOCATION,     /* a buffer moved onto a live one */
    IPU_INJECT_SEPARATION_IGNORED,     /* a GEMM output placed in its A operand's memory element */
    /* lowering */
    IPU_INJECT_SKIP_PADDING_CLEAR,     /* the first padding clear is left out */
    IPU_INJECT_OVERWRITE_PARAMETER,    /* a parameter is zeroed after its last use */
    IPU_INJECT_FP8_SCALE_TWICE,        /* the first FP8 GEMM applies the weight scale twice */
    IPU_INJECT_REDUCE_DROP_PARTIAL,    /* a reduction leaves out the other partials */
    IPU_INJECT_REDUCE_DOUBLE_PARTIAL,  /* a reduction adds the gathered partials twice */
    IPU_INJECT_REDUCE_STALE_SLOT,      /* a reduction reads a staging slot no transfer wrote */
    IPU_INJECT_GEMM_ROWS_SHORT,        /* a GEMM block computes one row too few */
    IPU_INJECT_GEMM_K_OVERRUN,         /* a GEMM block reads one reduction element too many */
    IPU_INJECT_GELU_COUNT_SHORT,       /* a GELU block leaves its last element */
    IPU_INJECT_ADD_WRONG_INPUT,        /* an add reads its first input twice */
    IPU_INJECT_CAST_WRONG_TYPE,        /* a cast to E4M3 writes E5M2 */
    IPU_INJECT_NORM_GAMMA_BETA_SWAPPED, /* a LayerNorm takes beta for gamma and gamma for beta */
    IPU_INJECT_BIAS_MEMBER_FROZEN,     /* a biased matmul in the Repeat adds the first member's bias every iteration */
    IPU_INJECT_ATTN_TAIL_KEY_DROPPED,  /* flash attention leaves out the last key of the tail block */
    IPU_INJECT_ATTN_MASK_OFF_BY_ONE,   /* flash attention's tail block takes one key more than valid */
    IPU_INJECT_SOFTMAX_VALID_SHORT,    /* materialized attention's softmax masks the last valid key */
    IPU_INJECT_ATTN_SCALE_MISSING,     /* attention scores are not scaled by 1/sqrt(head_dim) */
    IPU_INJECT_LIFETIME_END_EARLY,     /* a buffer's lifetime ends one step before its last use */
    IPU_INJECT_CARRY_DROPPED,          /* the Repeat's carry into the carried storage is left out */
    IPU_INJECT_HOST_INPUT_SHIFTED,     /* an input host entry reads its stream one row early */
    IPU_INJECT_HOST_OUTPUT_SHIFTED,    /* an output host entry writes its stream one row early */
    /* packaging */
    IPU_INJECT_PATCH_STRIDE_WRONG,     /* a Repeat progression patch advances 4 bytes too far */
    IPU_INJECT_MISSING_KERNEL_CODE,    /* a tile's code for a kernel it calls is left out */
    IPU_INJECT_ALLOCATION_SIZE_SHORT,  /* the allocation table records a buffer 8 bytes short */
    IPU_INJECT_ALLOCATION_STARTS_LATE, /* the allocation table starts a buffer's life a phase late */
    /* driver */
    IPU_INJECT_INPUT_RECORD_SHIFTED,   /* the recorded input bytes are one row out of place */
    /* the hand-built exchange-stress programs (stress.c) */
    IPU_INJECT_OUTGOING_BASE_NOT_RESET, /* the loop leaves OUTGOING_BASE set after its phase */
    /* exchange (appended) */
    IPU_INJECT_OUTGOING_BASE_KEPT,      /* a Repeat exchange's tables leave OUTGOING_BASE set */
    /* planning (appended): a bug that only costs cycles */
    IPU_INJECT_PLAN_FIT_TAKES_LAST,     /* the fitting step keeps the last candidate that fits, not the first */
    /* back-end inconsistencies (appended): the next stage must say so, not reject */
    IPU_INJECT_DESCRIPTOR_AREA_SHORT,   /* a tile's descriptor area is sized without its exchange tables */
    IPU_INJECT_CONFLICT_ACROSS_TILES,   /* a separation conflict pairs buffers on two tiles */
    IPU_INJECT_CAPTURE_NEXT_OP,         /* a capture table entry names the op after the one it reads */
    IPU_INJECT_NORM_EPSILON_WRONG,      /* a LayerNorm takes another framework's default epsilon */
    IPU_INJECT_FLASH_CHUNK_RESTARTS,    /* flash attention restarts its running state at every key chunk */
    IPU_INJECT_SERIAL_PIECE_OFFSET,     /* a serial piece writes its result rows at a partial buffer's offset */
    IPU_INJECT_RELATIVE_BASE_AHEAD,     /* a Repeat's relative sends start one iteration ahead */
    IPU_INJECT_SEARCH_WORST_FIRST,      /* the plan search builds its worst-estimated neighbours first */
    IPU_INJECT_STREAM_WORDS_AS_BYTES,   /* compact exchange waves of N words taken as N bytes' worth, 4 N words */
    /* the device (appended): a bug of the simulator, configured on the device (device.c) */
    IPU_INJECT_MEMORY_EVENTS_LATE,      /* the memory events record a life's beginning a phase late */
    IPU_INJECT_GELU_FORM_LOST,          /* an erf GELU lowered to the tanh approximation's kernel */
    IPU_INJECT_COUNT
} ipu_inject;

/* Is mutation `kind` pending?  Taking it clears it (applied once). */
static inline int ipu_low_take_inject(int *pending, int kind)
{
    if (*pending != kind)
        return 0;
    *pending = IPU_INJECT_NONE;
    return 1;
}

#endif
