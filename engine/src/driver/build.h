/* build.h: one candidate plan built through the pipeline, for the compile
 * loop and the plan search alike: plan under the options, lower, the
 * liveness walker's peak (ipu_build_plan), then the back end in pipeline
 * order (exchange schedules, package support, placement, encoding:
 * ipu_build_package).  Nothing here chooses between candidates.
 */
#ifndef IPU_DRIVER_BUILD_H
#define IPU_DRIVER_BUILD_H

#include <jansson.h>

#include "exchange/exchange.h"
#include "lower/program.h"
#include "package/assemble.h"
#include "plan/plan.h"

typedef struct ipu_build {
    ipu_plan plan;
    ipu_low_program prog;
    uint64_t peak;
    uint32_t peak_tile, peak_step;
    json_t *assembly; /* the encoder's account of the package support */
} ipu_build;

/* Wall seconds spent per stage, added to. */
typedef struct ipu_build_times {
    double plan, refine, package; /* refine: lowering and the liveness walker; package: the back end */
    double search;                /* the plan search (its candidates' stages not counted above) */
} ipu_build_times;

double ipu_build_seconds(void);

/* Plan under the options, lower, and take the liveness walker's peak. */
ipu_status ipu_build_plan(ipu_ctx *ctx, const ipu_profile *p, const ipu_graph *g, const ipu_plan_options *options,
                          int inject, ipu_build *b, ipu_build_times *t);
/* The back end of a planned build: exchange phases scheduled in mode, the
 * package support laid out (support receives its map), buffers placed
 * beside it, the package encoded with the records (meta is taken). */
ipu_status ipu_build_package(ipu_ctx *ctx, ipu_build *b, const ipu_xmode *mode, json_t *meta,
                             const ipu_assembly_record *records, size_t record_count, ipu_package **out,
                             ipu_support_map *support);
/* Per-tile support arrays for a profile's tiles (all or none). */
ipu_status ipu_support_map_alloc(ipu_ctx *ctx, uint32_t tiles, ipu_support_map *map);
void ipu_support_map_free(ipu_support_map *map);
void ipu_build_free(ipu_build *b);

#endif
