/* build.c: one candidate through the pipeline (build.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/build.h"
#include "lower/lower.h"
#include "place/program.h"

double ipu_build_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ipu_build_free(ipu_build *b)
{
    ipu_low_free(&b->prog);
    if (b->plan.graph)
        ipu_plan_free(&b->plan);
    json_decref(b->assembly);
    memset(b, 0, sizeof *b);
}

ipu_status ipu_build_plan(ipu_ctx *ctx, const ipu_profile *p, const ipu_graph *g, const ipu_plan_options *options,
                          int inject, ipu_build *b, ipu_build_times *t)
{
    double t0 = ipu_build_seconds();
    IPU_TRY(ipu_progress(ctx, "plan", 0, 0));
    ipu_status status = ipu_plan_graph(ctx, p, g, options, &b->plan);
    double t1 = ipu_build_seconds();
    t->plan += t1 - t0;
    if (status != IPU_OK)
        return status;
    status = ipu_progress(ctx, "lower", 0, 0);
    if (status == IPU_OK)
        status = ipu_lower(ctx, &b->plan, inject, &b->prog);
    if (status == IPU_OK)
        status = ipu_low_peaks(ctx, &b->prog, &b->peak, &b->peak_tile, &b->peak_step, NULL);
    t->refine += ipu_build_seconds() - t1;
    return status;
}

/* A back-end stage that refuses the compiler's own product (a request,
 * table or descriptor area the compiler itself made: INVALID_ARGUMENT) has
 * found a compiler inconsistency, named by stage and object; not fitting
 * the budget or the device (NO_PLAN) is the search's to handle. */
static ipu_status stage_outcome(ipu_ctx *ctx, ipu_status status, const char *stage, const char *what)
{
    return status == IPU_ERR_INVALID_ARGUMENT ? IPU_INCONSISTENT(ctx, stage, "%s", what) : status;
}

ipu_status ipu_build_package(ipu_ctx *ctx, ipu_build *b, const ipu_xmode *mode, json_t *meta,
                             const ipu_assembly_record *records, size_t record_count, ipu_package **out,
                             ipu_support_map *support)
{
    ipu_xprogram exchanges;
    ipu_package_layout layout;
    memset(&layout, 0, sizeof layout);
    ipu_status status = stage_outcome(ctx, ipu_exchange_program(ctx, &b->prog, mode, &exchanges), "exchange",
                                      "the exchange programs of the lowered program");
    if (status == IPU_OK)
        status = stage_outcome(ctx, ipu_package_lay_out(ctx, &b->prog, &exchanges, &layout, support), "package",
                               "the support storage layout");
    if (status == IPU_OK) {
        ipu_place_support room = {support->code_end, support->descriptor_end, layout.desc_base};
        status = stage_outcome(ctx, ipu_place_program(ctx, &b->prog, &room), "place",
                               "the placement requests of the lowered program");
    }
    if (status == IPU_OK)
        status = stage_outcome(ctx, ipu_package_encode(ctx, &b->prog, &exchanges, &layout, meta, records,
                                                       record_count, out, &b->assembly),
                               "package", "the encoding of the package");
    else
        json_decref(meta);
    ipu_package_layout_free(&layout);
    ipu_xprogram_free(&exchanges);
    return status;
}

ipu_status ipu_support_map_alloc(ipu_ctx *ctx, uint32_t tiles, ipu_support_map *map)
{
    memset(map, 0, sizeof *map);
    map->code_end = ipu_calloc(ctx, tiles ? tiles : 1, sizeof(uint32_t));
    map->descriptor_end = ipu_calloc(ctx, tiles ? tiles : 1, sizeof(uint32_t));
    map->exchange_table_bytes = ipu_calloc(ctx, tiles ? tiles : 1, sizeof(uint32_t));
    if (map->code_end && map->descriptor_end && map->exchange_table_bytes)
        return IPU_OK;
    ipu_support_map_free(map);
    return IPU_NO_MEMORY(ctx);
}

void ipu_support_map_free(ipu_support_map *map)
{
    free(map->code_end);
    free(map->descriptor_end);
    free(map->exchange_table_bytes);
    memset(map, 0, sizeof *map);
}
