/* plan.h: planner v1.  For every matmul it enumerates tile grids (row,
 * column and reduction splits with uneven tails), costs each with the cost
 * model of matmul.c and keeps the cheapest whose per-tile footprint, with the
 * parameters already resident, fits the memory budget.  Elementwise ops follow
 * their producer's layout.  Every tensor gets a home layout; matmul operands
 * get the layouts the tiles need (A replicated over the column split, B over
 * the row split).  The plan reports each op's estimate and the total.
 */
#ifndef IPU_PLAN_H
#define IPU_PLAN_H

#include <jansson.h>

#include "core/profile.h"
#include "ir/ir.h"
#include "plan/layout.h"

/* Column boundaries of every layout fall on multiples of this many elements,
 * so a cast to any element type keeps them on 32-bit words. */
#define IPU_PLAN_COL_ALIGN 4u

typedef struct ipu_matmul_grid {
    uint32_t gm, gn, gk;
    uint64_t compute_cycles, operand_cycles, reduce_cycles, cycles;
    uint64_t tile_bytes; /* op-local footprint on the fullest tile */
    uint64_t b_bytes;    /* of which B's block (every member of a sequence) */
} ipu_matmul_grid;

typedef struct ipu_op_plan {
    ipu_matmul_grid grid; /* matmuls only */
    uint64_t cycles;      /* estimate for one execution */
    uint64_t tile_bytes;
    uint32_t candidates;  /* grids that fit the budget (matmuls) */
    ipu_layout a, b;      /* matmul operand layouts (b includes its replicas) */
} ipu_op_plan;

typedef struct ipu_plan {
    ipu_profile profile;
    const ipu_graph *graph;
    uint32_t budget;
    ipu_layout *home; /* per tensor */
    ipu_op_plan *ops; /* per op */
    uint64_t cycles;  /* estimate for the whole program, Repeat iterations included */
    uint64_t host_cycles; /* of which host input and output */
    uint64_t param_bytes; /* resident parameter bytes on the fullest tile */
    uint64_t *smallest_param, *smallest_total; /* per matmul op: lower bounds */
} ipu_plan;

/* Cost and footprint of one grid; 0 when the grid does not suit the shape. */
int ipu_matmul_grid_cost(const ipu_profile *p, uint32_t m, uint32_t n, uint32_t k, int in_dtype,
                         int out_dtype, uint32_t members, uint32_t gm, uint32_t gn, uint32_t gk,
                         ipu_matmul_grid *out);
/* The A, B and result layouts of a grid (tiles from 0; tile (i, j, l) is
 * (i * gn + j) * gk + l).  With gk > 1 the result is reduced by row bands:
 * each row band i is split gk ways and sub-band l lives on tile (i, j, l). */
ipu_status ipu_matmul_layouts(ipu_ctx *ctx, uint32_t m, uint32_t n, uint32_t k, int in_dtype,
                              int out_dtype, const ipu_matmul_grid *g, ipu_layout *a, ipu_layout *b,
                              ipu_layout *c);

ipu_status ipu_plan_graph(ipu_ctx *ctx, const ipu_profile *p, const ipu_graph *g, uint32_t budget,
                          ipu_plan *out);
void ipu_plan_free(ipu_plan *plan);
/* Per op: kind, grid, candidates, cycles, footprint; and the totals. */
json_t *ipu_plan_json(const ipu_plan *plan);

#endif
