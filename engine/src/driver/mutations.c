/* mutations.c: the catalogue of mutations the tests inject (program.h's
 * ipu_inject): each one's name, the stage whose product it changes and the
 * bug it models, looked up by name for the compile option and listed for
 * tests and reports (ipu_mutations_json).  The stress mutation is taken by the
 * exchange-stress builder's own "inject" option; compiled programs have no
 * place for it.
 */
#include <string.h>

#include "driver/mutations.h"

static const ipu_mutation MUTATIONS[] = {
    {IPU_INJECT_PLAN_BLOCKS_SHARE_TILE, "plan-blocks-share-tile", "plan", "a home layout puts two blocks on one tile"},
    {IPU_INJECT_DROP_TRANSFER, "drop-transfer", "exchange", "the last transfer of a phase is lost"},
    {IPU_INJECT_RECEIVE_CYCLE_LATE, "receive-cycle-late", "exchange", "one receive row selects its sender a cycle late"},
    {IPU_INJECT_MULTICAST_DROP_DEST, "multicast-drop-destination", "exchange", "a multicast loses its last destination"},
    {IPU_INJECT_SEND_OFFSET_WORD, "send-offset-word", "exchange", "a transfer sends from one word past its source"},
    {IPU_INJECT_OVERLAP_ALLOCATION, "overlap-allocation", "place", "a buffer moved onto a live one"},
    {IPU_INJECT_SEPARATION_IGNORED, "separation-ignored", "place", "a GEMM output placed in its A operand's memory element"},
    {IPU_INJECT_SKIP_PADDING_CLEAR, "skip-padding-clear", "lower", "the first padding clear is left out"},
    {IPU_INJECT_OVERWRITE_PARAMETER, "overwrite-parameter", "lower", "a parameter is zeroed after its last use"},
    {IPU_INJECT_FP8_SCALE_TWICE, "fp8-scale-twice", "lower", "the first FP8 GEMM applies the weight scale twice"},
    {IPU_INJECT_REDUCE_DROP_PARTIAL, "reduce-drop-partial", "lower", "a reduction leaves out the other partials"},
    {IPU_INJECT_REDUCE_DOUBLE_PARTIAL, "reduce-double-partial", "lower", "a reduction adds the gathered partials twice"},
    {IPU_INJECT_REDUCE_STALE_SLOT, "reduce-stale-slot", "lower", "a reduction reads a staging slot no transfer wrote"},
    {IPU_INJECT_GEMM_ROWS_SHORT, "gemm-rows-short", "lower", "a GEMM block computes one row too few"},
    {IPU_INJECT_GEMM_K_OVERRUN, "gemm-k-overrun", "lower", "a GEMM block reads one reduction element too many"},
    {IPU_INJECT_GELU_COUNT_SHORT, "gelu-count-short", "lower", "a GELU block leaves its last element"},
    {IPU_INJECT_ADD_WRONG_INPUT, "add-wrong-input", "lower", "an add reads its first input twice"},
    {IPU_INJECT_CAST_WRONG_TYPE, "cast-wrong-type", "lower", "a cast to E4M3 writes E5M2"},
    {IPU_INJECT_NORM_GAMMA_BETA_SWAPPED, "norm-gamma-beta-swapped", "lower", "a LayerNorm takes beta for gamma and gamma for beta"},
    {IPU_INJECT_BIAS_MEMBER_FROZEN, "bias-member-frozen", "lower", "a biased matmul in the Repeat adds the first member's bias every iteration"},
    {IPU_INJECT_ATTN_TAIL_KEY_DROPPED, "attention-tail-key-dropped", "lower", "flash attention leaves out the last key of the tail block"},
    {IPU_INJECT_ATTN_MASK_OFF_BY_ONE, "attention-mask-off-by-one", "lower", "flash attention's tail block takes one key more than valid"},
    {IPU_INJECT_SOFTMAX_VALID_SHORT, "softmax-valid-short", "lower", "materialized attention's softmax masks the last valid key"},
    {IPU_INJECT_ATTN_SCALE_MISSING, "attention-scale-missing", "lower", "attention scores are not scaled by 1/sqrt(head_dim)"},
    {IPU_INJECT_LIFETIME_END_EARLY, "lifetime-end-early", "lower", "a buffer's lifetime ends one step before its last use"},
    {IPU_INJECT_CARRY_DROPPED, "carry-dropped", "lower", "the Repeat's carry into the carried storage is left out"},
    {IPU_INJECT_HOST_INPUT_SHIFTED, "host-input-row-early", "lower", "an input host entry reads its stream one row early"},
    {IPU_INJECT_HOST_OUTPUT_SHIFTED, "host-output-row-early", "lower", "an output host entry writes its stream one row early"},
    {IPU_INJECT_PATCH_STRIDE_WRONG, "patch-stride-wrong", "package", "a Repeat progression patch advances 4 bytes too far"},
    {IPU_INJECT_MISSING_KERNEL_CODE, "missing-kernel-code", "package", "a tile's code for a kernel it calls is left out"},
    {IPU_INJECT_ALLOCATION_SIZE_SHORT, "allocation-size-short", "package", "the allocation table records a buffer 8 bytes short"},
    {IPU_INJECT_ALLOCATION_STARTS_LATE, "allocation-starts-late", "package", "the allocation table starts a buffer's life a phase late"},
    {IPU_INJECT_OUTGOING_BASE_NOT_RESET, "outgoing-base-not-reset", "stress", "the loop leaves OUTGOING_BASE set after its phase"},
    {IPU_INJECT_OUTGOING_BASE_KEPT, "outgoing-base-not-restored", "exchange", "a Repeat exchange sets OUTGOING_BASE and leaves it set"},
    {IPU_INJECT_INPUT_RECORD_SHIFTED, "input-record-shifted", "driver", "the recorded input bytes are one row out of place"},
    {IPU_INJECT_DESCRIPTOR_AREA_SHORT, "descriptor-area-short", "package", "a tile's descriptor area is sized without its exchange tables"},
    {IPU_INJECT_CONFLICT_ACROSS_TILES, "conflict-across-tiles", "place", "a separation conflict pairs a GEMM operand with a buffer on another tile"},
    {IPU_INJECT_CAPTURE_NEXT_OP, "capture-next-op", "package", "a capture table entry names the op after the one whose output it reads (the per-op check would blame an innocent op)"},
    {IPU_INJECT_NORM_EPSILON_WRONG, "norm-epsilon-wrong", "lower", "a LayerNorm takes another framework's default epsilon (1e-3 for the model's 1e-6)"},
    {IPU_INJECT_FLASH_CHUNK_RESTARTS, "flash-chunk-restarts", "lower", "flash attention restarts its running softmax at every key chunk after the first (the chunk's offset taken within the chunk)"},
    {IPU_INJECT_SERIAL_PIECE_OFFSET, "serial-piece-offset", "lower", "a later serial piece writes its result rows at the offset a partial buffer would take (the piece's own rows, not the band's)"},
    {IPU_INJECT_RELATIVE_BASE_AHEAD, "relative-base-ahead", "exchange", "a Repeat exchange's SET_BASE row starts OUTGOING_BASE one displacement ahead (every iteration sends the next iteration's source)"},
    {IPU_INJECT_SEARCH_WORST_FIRST, "search-worst-first", "driver", "the plan search compares estimates the wrong way round and builds its worst-estimated neighbours (outputs still right: only the cycles show it)"},
    {IPU_INJECT_STREAM_WORDS_AS_BYTES, "stream-words-as-bytes", "exchange", "compact exchange takes its wave size in the wrong unit (4 N words for N) and schedules every phase otherwise than asked (only the cycles show it)"},
    {IPU_INJECT_MEMORY_EVENTS_LATE, "memory-events-late", "device", "the device's memory events record a life's beginning one phase late (the run-time memory timeline misreports what is live)"},
    {IPU_INJECT_PLAN_FIT_TAKES_LAST, "plan-fit-takes-last", "plan", "the fitting step keeps the last matmul candidate that fits (the slowest), not the first"},
    {IPU_INJECT_GELU_FORM_LOST, "gelu-form-lost", "lower", "a GELU in its erf form is lowered to the tanh approximation's kernel (within 3e-4 of each other)"},
};

const ipu_mutation *ipu_mutation_named(const char *name)
{
    for (size_t i = 0; i < sizeof MUTATIONS / sizeof *MUTATIONS; i++)
        if (strcmp(MUTATIONS[i].name, name) == 0)
            return &MUTATIONS[i];
    return NULL;
}

const char *ipu_mutation_name(int id)
{
    for (size_t i = 0; i < sizeof MUTATIONS / sizeof *MUTATIONS; i++)
        if (MUTATIONS[i].id == id)
            return MUTATIONS[i].name;
    return "none";
}

ipu_status ipu_mutations_json(ipu_ctx *ctx, char **out_json)
{
    if (!out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_mutations_json: NULL argument");
    json_t *list = json_array();
    for (size_t i = 0; list && i < sizeof MUTATIONS / sizeof *MUTATIONS; i++)
        if (json_array_append_new(list, json_pack("{s:s, s:s, s:s}", "name", MUTATIONS[i].name, "stage",
                                                  MUTATIONS[i].stage, "models", MUTATIONS[i].models)))
            break;
    char *text = list ? json_dumps(list, JSON_COMPACT) : NULL;
    json_decref(list);
    if (!text)
        return IPU_NO_MEMORY(ctx);
    *out_json = text;
    return IPU_OK;
}
