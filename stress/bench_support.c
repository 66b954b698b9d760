/* bench_support.c: the shared clock and timed package runs of the device
 * benchmarks (see bench_support.h). */
#include <stdlib.h>
#include <time.h>

#include "stress/bench_support.h"

double ipu_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

ipu_status ipu_bench_timed_runs(ipu_ctx *ctx, const ipu_package *pkg, int repeats, double *best,
                                json_t **report)
{
    json_t *pj = ipu_profile_to_json(&pkg->profile);
    char *profile_text = pj ? json_dumps(pj, JSON_COMPACT) : NULL;
    json_decref(pj);
    ipu_device *dev = NULL;
    ipu_status status = profile_text ? ipu_device_create(ctx, profile_text, &dev) : IPU_NO_MEMORY(ctx);
    if (status == IPU_OK)
        status = ipu_device_initialize(ctx, dev, pkg);
    *best = -1;
    json_t *last = NULL;
    for (int r = 0; r < repeats && status == IPU_OK; r++) {
        char *result = NULL;
        double start = ipu_bench_now();
        status = ipu_device_run(ctx, dev, &result);
        double took = ipu_bench_now() - start;
        if (status == IPU_OK) {
            json_decref(last);
            last = json_loads(result, 0, NULL);
        }
        free(result);
        if (*best < 0 || took < *best)
            *best = took;
    }
    if (status == IPU_OK && report)
        *report = last;
    else
        json_decref(last);
    free(profile_text);
    ipu_device_free(dev);
    return status;
}
