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

#include "workloads/workload.h"

/* The thread count the reference uses (and reports as its BLAS threads). */
int ipu_reference_blas_threads(void);

/* Evaluate w's graph in FP32.  On success *outputs has graph.tensor_count
 * entries: a malloc'd rows * cols array for every tensor of role OUTPUT,
 * NULL for the others; release it with ipu_reference_free_outputs.  The
 * values must have been generated (IPU_ERR_STATE otherwise). */
ipu_status ipu_reference_fp32(ipu_ctx *ctx, const ipu_workload *w, float ***outputs);
/* The same graph at device precision: inputs and parameters take their
 * device-typed values, and every op's result is rounded to its tensor's
 * type and scale (GEMMs accumulate in FP32 and round once), with the shared
 * numerics library. */
ipu_status ipu_reference_device(ipu_ctx *ctx, const ipu_workload *w, float ***outputs);

/* One op of w's graph at device precision on given inputs (as many as the op
 * takes, each rows * cols of its tensor, apart from out): out (rows * cols of
 * the op's output) is rounded to the output's type and scale.  The per-op
 * check feeds it the device's own inputs, so each op is judged alone. */
ipu_status ipu_reference_device_op(ipu_ctx *ctx, const ipu_workload *w, size_t index,
                                   const float *const inputs[3], float *out);

/* Free an outputs array of count entries (NULL is a no-op). */
void ipu_reference_free_outputs(float **outputs, size_t count);

/* The transformer ops in FP32 on host arrays (reference_vit.c; shapes as ir.h
 * defines them, already validated), in OpenMP loops of `threads` threads
 * with OpenBLAS single-threaded; out must not alias an input. */
ipu_status ipu_reference_layernorm(ipu_ctx *ctx, const float *x, const float *gamma,
                                   const float *beta, float epsilon, uint32_t rows, uint32_t cols,
                                   int threads, float *out);
ipu_status ipu_reference_attention(ipu_ctx *ctx, const float *qkv, uint32_t rows, uint32_t seq,
                                   uint32_t heads, uint32_t head_dim, int threads, float *out);
/* rows: the rows of kv (out has rows / seq). */
ipu_status ipu_reference_map_pool(ipu_ctx *ctx, const float *q, const float *kv, uint32_t rows,
                                  uint32_t seq, uint32_t heads, uint32_t head_dim, int threads,
                                  float *out);

#endif
