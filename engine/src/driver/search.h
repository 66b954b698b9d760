/* search.h: the plan search.  From the first candidate plan that fits, a
 * local search over whole candidates: a candidate is the planner's options
 * with, per matmul, how many of its fitting catalogue candidates to skip
 * (fastest first), per attention or MAP pooling op its mode and a flash
 * attention's key bands, and the exchange scheduling mode.  A move changes one of these.  Each step
 * plans every unvisited neighbour of the beam (the planner's estimate
 * screens them; a plan that fails is dropped with its reason), builds the
 * best-estimated few through the whole back end, in parallel, and judges
 * them by exact static timing (timing.h); the beam keeps the K fastest
 * built candidates (K = 1: greedy).  The search stops when a step changes
 * nothing, after the step limit, or when the next step would pass the time
 * budget.  Candidates are built without records (timing needs none) and
 * the steps do not depend on the thread count: only the time budget can.
 */
#ifndef IPU_DRIVER_SEARCH_H
#define IPU_DRIVER_SEARCH_H

#include <jansson.h>

#include "exchange/exchange.h"
#include "plan/plan.h"

typedef struct ipu_search_options {
    double seconds; /* time budget for the search (wall) */
    uint32_t beam;  /* candidates kept per step (1: greedy) */
    uint32_t steps; /* step limit (0: none) */
    int inject;     /* a test's mutation the search applies itself (ipu_inject), else IPU_INJECT_NONE */
} ipu_search_options;

/* What a search starts from and ends with: the planner's options (caps and
 * budget as the compile loop left them; choices and attention_modes point
 * at the arrays here) and the exchange mode. */
typedef struct ipu_search_point {
    ipu_plan_options plan;
    uint32_t *choices;   /* per op */
    int *modes;          /* per op */
    uint32_t *key_bands; /* per op */
    ipu_xmode xmode;
} ipu_search_point;

/* Search from start (its package's static cycles: first_cycles); on
 * success *best holds the fastest candidate found (the caller frees its
 * arrays with ipu_search_point_free) and *record the search's account:
 * steps, candidates screened, built and dropped (with reasons), each
 * accepted move with its gain, why it stopped and its wall time. */
ipu_status ipu_search_plans(ipu_ctx *ctx, const ipu_profile *p, const ipu_graph *g, int inject,
                            const ipu_search_point *start, uint64_t first_cycles, const ipu_search_options *options,
                            ipu_search_point *best, json_t **record);
/* A point with zeroed arrays for g's ops (its plan options copied from plan). */
ipu_status ipu_search_point_init(ipu_ctx *ctx, const ipu_graph *g, const ipu_plan_options *plan,
                                 const ipu_xmode *xmode, ipu_search_point *out);
void ipu_search_point_free(ipu_search_point *point);

#endif
