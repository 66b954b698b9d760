/* memory.h: planner memory profiles, version 3: what holds memory on which
 * tile at which step of a lowered candidate, before placement.
 *
 * Steps are the program's steps grouped by what they lower (an op, a host
 * round of one tensor, a carry): a group's usage counts everything live at
 * any of its steps.  Values are allocation roots (a tensor's home, an
 * operand copy, a staging layout) with their layouts; per value tile_shards
 * is the payload on each tile before sequence multiplicity, tile_bytes the
 * aligned bytes with it.  An alias (the Repeat's initial carried value) is a
 * value of its own whose root is the storage it shares.  Scratch (partials,
 * reduction and host staging, attention state) is charged per step on the
 * tiles that own it and is never multiplied by Repeat iterations.  Per step
 * and tile, usage is [standard, interleaved] (interleaved: storage some
 * kernel needs in region 1); for every live root and tile, the largest
 * tile_bytes[tile] among the root and its aliases, summed, plus
 * tile_scratch[tile] gives tile_usage[tile].  coarse_usage is the old sum
 * of maxima bound.  peak.standard and peak.total count tensor storage only;
 * peak.exchange_rows (exchange table bytes of the busiest tile) and reserve
 * (the package-support reserve the budget already excludes) stand apart.
 */
#ifndef IPU_REPORT_MEMORY_H
#define IPU_REPORT_MEMORY_H

#include <jansson.h>

#include "ir/ir.h"
#include "lower/program.h"

typedef struct ipu_memory_profile_info {
    const char *scope;  /* the workload */
    const char *status; /* "finalist" or "rejected" */
    uint32_t budget;    /* the search budget per tile the candidate is judged against */
    uint32_t memory_budget; /* --memory-budget (the search and catalogue budgets' default) */
    json_t *rejection;  /* borrowed, may be NULL: why the search stopped */
} ipu_memory_profile_info;

/* The profile's JSON, or NULL on failure (the context says why). */
ipu_status ipu_memory_profile(ipu_ctx *ctx, const ipu_low_program *prog, const ipu_graph *g,
                              const ipu_memory_profile_info *info, json_t **out);

#endif
