/* reference.h: the host reference of a workload.  The FP32 mode evaluates
 * the workload's graph in FP32 from the unquantized values (w->values):
 * matmuls with cblas_sgemm, GELU with ipu_num_gelu (the device's own
 * definition), adds and copies as written, casts as the identity (no
 * rounding to the target type), and LayerNorm, attention and MAP pooling as
 * reference_vit.c defines them (attention with sgemm per image and head).
 * The Repeat body runs `iterations` times, iteration i reading member i of
 * every parameter sequence; the carried tensor starts as carried_init's
 * value and takes carried_next's value after every iteration.  The work runs on OpenBLAS's thread count capped at 4
 * unless OPENBLAS_NUM_THREADS or OMP_NUM_THREADS is set (then OpenBLAS's own
 * count stands): that many OpenMP threads each run single-threaded sgemm on
 * fixed output tiles, so the outputs are bit-identical for any thread count;
 * OpenBLAS's setting is restored afterwards.
 */
#ifndef IPU_REFERENCE_H
#define IPU_REFERENCE_H

#include <jansson.h>

#include "workloads/workload.h"

/* The thread count the reference uses (and reports as its BLAS threads). */
int ipu_reference_blas_threads(void);

/* Evaluate w's graph in FP32.  On success *outputs has graph.tensor_count
 * entries: a malloc'd rows * cols array for every tensor of role OUTPUT,
 * NULL for the others; release it with ipu_reference_free_outputs.  The
 * values must have been generated (IPU_ERR_STATE otherwise). */
ipu_status ipu_reference_fp32(ipu_ctx *ctx, const ipu_workload *w, float ***outputs);
/* How attention and MAP pooling are computed: as FP32 math (sgemm per image
 * and head), or exactly as the device's flash or materialized kernels do
 * (attention_exact.c), for the device-precision reference of a plan whose
 * mode it knows. */
enum ipu_reference_attention {
    IPU_REF_ATTENTION_FP32 = 0,
    IPU_REF_ATTENTION_FLASH = 1,
    IPU_REF_ATTENTION_MATERIALIZED = 2
};

/* How the plan blocks a matmul: the device computes block (i, j, l) with one
 * GEMM over rows [row_blocks[i], row_blocks[i + 1]), columns [col_bounds[j],
 * col_bounds[j + 1]) and reduction band [k_bounds[l], k_bounds[l + 1]) (the
 * sums a BLAS GEMM gives depend on the block's shape).  With parts > 1 the
 * partials are rounded to the output type, and the rows of output band b
 * (rows [row_bounds[b], row_bounds[b + 1])) are owned by part b % parts,
 * which adds its own partial to the others' summed by halves, every add
 * rounded (as lowering's reduce-scatter does). */
typedef struct ipu_reference_blocks {
    uint32_t row_block_count, col_block_count, parts, row_bands; /* 0 blocks: not known */
    uint32_t *row_blocks, *col_bounds, *k_bounds, *row_bounds;
} ipu_reference_blocks;

/* An attention's bands within an image.  Materialized: the query rows of
 * each P V product (the device multiplies the probabilities of query rows
 * [bounds[i], bounds[i + 1]) by V with one GEMM; the sums a BLAS GEMM gives
 * depend on its row count).  Flash split over key bands: the keys of each
 * band, whose states the device merges in band order.  0 bands: one
 * product over every query, or every key in one run of blocks. */
typedef struct ipu_reference_bands {
    uint32_t count;
    uint32_t *bounds;
} ipu_reference_bands;

/* What the device-precision reference knows of a plan, per op: attention
 * modes (ipu_reference_attention), their bands and matmul blocks. */
typedef struct ipu_reference_plan {
    int *attention;
    ipu_reference_bands *bands;
    ipu_reference_blocks *matmuls;
    size_t op_count;
} ipu_reference_plan;

/* A plan from {"attention": {"<op>": "flash" | "materialized"},
 * "attention_bands": {"<op>": [bounds of the query bands (materialized) or
 * of the key bands (flash) in an image]}, "matmuls":
 * {"<op>": {"row_blocks": [...], "col_bounds": [...], "k_bounds": [...],
 * "row_bounds": [...]}}} (as a package's meta records them; absent: FP32
 * math, matmuls in fixed tiles); the message names a bad key or value.
 * Release with ipu_reference_plan_free. */
ipu_status ipu_reference_plan_parse(ipu_ctx *ctx, const json_t *meta, const ipu_graph *g,
                                    ipu_reference_plan *plan);
void ipu_reference_plan_free(ipu_reference_plan *plan);

/* The same graph at device precision: inputs and parameters take their
 * device-typed values, and every op's result is rounded to its tensor's
 * type and scale (GEMMs accumulate in FP32 in the plan's blocks and round
 * once, or per part as the plan splits them), with the shared numerics library; attention and
 * MAP pooling as the plan's modes compute them.  plan may be NULL (FP32
 * math, matmuls in fixed tiles). */
ipu_status ipu_reference_device(ipu_ctx *ctx, const ipu_workload *w, const ipu_reference_plan *plan,
                                float ***outputs);

/* Attention of nq query rows (stride ldq) over nk keys and values (stride
 * ldkv) of one (image, head), as the device's kernels compute it in mode
 * (flash or materialized; a materialized P V takes one product per query
 * band, a flash attention's key bands are merged in order; NULL: one band);
 * out: nq rows of d floats at stride ldo.  It
 * runs inside parallel loops: ctx serves only its allocator, and out of
 * memory returns IPU_ERR_NO_MEMORY without recording it on ctx. */
ipu_status ipu_reference_attend_exact(ipu_ctx *ctx, int mode, const float *q, size_t ldq, size_t nq,
                                      const float *k, const float *v, size_t ldkv, size_t nk, size_t d,
                                      float scale, const ipu_reference_bands *bands, float *out, size_t ldo);

/* One op of w's graph at device precision on given inputs (as many as the op
 * takes, each rows * cols of its tensor, apart from out): out (rows * cols of
 * the op's output) is rounded to the output's type and scale, computed as the
 * plan (NULL: none) says.  The per-op
 * check feeds it the device's own inputs, so each op is judged alone. */
ipu_status ipu_reference_device_op(ipu_ctx *ctx, const ipu_workload *w, size_t index,
                                   const ipu_reference_plan *plan, const float *const inputs[3], float *out);

/* Free an outputs array of count entries (NULL is a no-op). */
void ipu_reference_free_outputs(float **outputs, size_t count);

/* The transformer ops in FP32 on host arrays (reference_vit.c; shapes as ir.h
 * defines them, already validated), in OpenMP loops of `threads` threads
 * with OpenBLAS single-threaded; out must not alias an input. */
ipu_status ipu_reference_layernorm(ipu_ctx *ctx, const float *x, const float *gamma,
                                   const float *beta, float epsilon, uint32_t rows, uint32_t cols,
                                   int threads, float *out);
ipu_status ipu_reference_attention(ipu_ctx *ctx, const float *qkv, uint32_t rows, uint32_t seq,
                                   uint32_t heads, uint32_t head_dim, int threads, int mode,
                                   const ipu_reference_bands *bands, float *out);
/* rows: the rows of kv (out has rows / seq). */
ipu_status ipu_reference_map_pool(ipu_ctx *ctx, const float *q, const float *kv, uint32_t rows,
                                  uint32_t seq, uint32_t heads, uint32_t head_dim, int threads, int mode,
                                  const ipu_reference_bands *bands, float *out);

#endif
