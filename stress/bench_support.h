/* bench_support.h: what the device benchmarks share: a monotonic clock and
 * timed runs of a package (create a device for its profile, initialize,
 * run repeatedly; the best wall time and the last run's cycle report).
 */
#ifndef IPU_BENCH_SUPPORT_H
#define IPU_BENCH_SUPPORT_H

#include <jansson.h>

#include "package/package.h"

double ipu_bench_now(void);

/* *best receives the fastest run's seconds; *report (optional) the last
 * run's cycle report (released with json_decref). */
ipu_status ipu_bench_timed_runs(ipu_ctx *ctx, const ipu_package *pkg, int repeats, double *best,
                                json_t **report);

#endif
