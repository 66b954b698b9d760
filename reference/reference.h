/* reference.h: the host reference of a workload.  The FP32 mode evaluates
 * the workload's graph in FP32 from the unquantized values (w->values):
 * matmuls with cblas_sgemm, GELU with ipu_num_gelu (the device's own
 * definition), adds and copies as written, and casts as the identity (no
 * rounding to the target type).  The Repeat body runs `iterations` times,
 * iteration i reading member i of every parameter sequence; the carried
 * tensor starts as carried_init's value and takes carried_next's value after
 * every iteration.  The work runs on OpenBLAS's thread count capped at 4
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

/* Free an outputs array of count entries (NULL is a no-op). */
void ipu_reference_free_outputs(float **outputs, size_t count);

#endif
