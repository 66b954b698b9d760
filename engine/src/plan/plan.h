/* plan.h: planner v1.  For every matmul it enumerates tile grids (row,
 * column and reduction splits with uneven tails), costs each with the cost
 * model of matmul.c and keeps the cheapest whose per-tile footprint, with the
 * parameters already resident, fits the memory budget.  Elementwise ops follow
 * their first input's layout (an add brings its second input to it).
 * LayerNorm works on row-complete layouts (norm.c); attention and MAP
 * pooling on (image, head, query band) work units (attention.c).  Every
 * tensor gets a home layout; operands get the layouts the tiles need
 * (a matmul's A replicated over the column split, B over the row split).
 * The plan reports each op's estimate and the total.
 */
#ifndef IPU_PLAN_H
#define IPU_PLAN_H

#include <jansson.h>

#include "core/profile.h"
#include "ir/ir.h"
#include "layout/layout.h"

/* Column boundaries of every layout fall on multiples of this many elements,
 * so a cast to any element type keeps them on 32-bit words. */
#define IPU_PLAN_COL_ALIGN 4u

/* A matmul's reduction bands (its K split) fall on multiples of this many
 * elements of its input type: whole 8-byte words (and never fewer than
 * IPU_PLAN_COL_ALIGN), so the rows of its operand blocks need no padding,
 * and a padded block would be cleared whole before every move into it. */
static inline uint32_t ipu_plan_k_align(size_t elem)
{
    uint32_t words = elem ? (uint32_t)(8 / elem) : 0;
    return words > IPU_PLAN_COL_ALIGN ? words : IPU_PLAN_COL_ALIGN;
}

typedef struct ipu_matmul_grid {
    uint32_t gm, gn, gk;
    uint32_t gs; /* serial pieces: each tile computes its rows in gs pieces in turn (1: at once) */
    uint32_t gather; /* a parameter's current member is gathered onto the gm replicas of its block from a
                      * home holding each block once (ipu_matmul_weight_home); 0: every replica resident */
    uint64_t compute_cycles, operand_cycles, reduce_cycles, cycles;
    uint64_t tile_bytes; /* op-local footprint: the sum of the largest blocks (coarse bound) */
    uint64_t a_bytes;    /* of which A's largest block */
    uint64_t b_bytes;    /* of which B's largest resident block (every member of a sequence) */
    uint64_t gathered_bytes; /* of which, gathering, B's largest block of one member (0: none) */
    uint64_t exact_bytes; /* op-local footprint of the fullest tile (catalogue: detailed model) */
    uint64_t support_bytes; /* serial grids: support counted with the footprint (ipu_matmul_grid_cost) */
} ipu_matmul_grid;

/* How a matmul's catalogue is built (catalogue.c). */
typedef struct ipu_catalogue_options {
    uint32_t budget;       /* catalogue budget: partitions whose A or B block exceeds it are filtered */
    uint32_t group_size;   /* partitions per enumeration group */
    uint32_t frontier_cap; /* largest frontier kept per group and in the shortlist */
    uint64_t weight_limit; /* parameter matmuls: partitions whose B block exceeds it are filtered
                            * (the search's replication bound; 0: none) */
} ipu_catalogue_options;

/* A matmul's retained candidates, fastest first, and how many each stage kept. */
typedef struct ipu_catalogue {
    ipu_matmul_grid *grids;
    uint32_t count;
    uint64_t enumerated, filtered;
    uint32_t groups, frontier, shortlisted;
} ipu_catalogue;

/* resident: B is a parameter (its block stays for the whole program). */
ipu_status ipu_catalogue_matmul(ipu_ctx *ctx, const ipu_profile *p, uint32_t m, uint32_t n, uint32_t k,
                                int in_dtype, int out_dtype, uint32_t members, int resident,
                                const ipu_catalogue_options *o, ipu_catalogue *out);
/* The exact op-local footprint of a grid's fullest tile (uneven bands included). */
uint64_t ipu_matmul_tile_footprint(uint32_t m, uint32_t n, uint32_t k, int in_dtype, int out_dtype,
                                   uint32_t members, const ipu_matmul_grid *g);

/* How attention and MAP pooling compute (compile option "attention"). */
typedef enum ipu_attention_mode {
    IPU_ATTENTION_AUTO = 0,        /* the cheaper of the two that fits */
    IPU_ATTENTION_FLASH = 1,       /* ATTN_BLOCK per 64 keys, then ATTN_FINISH */
    IPU_ATTENTION_MATERIALIZED = 2 /* scores, softmax, P V per chunk of queries */
} ipu_attention_mode;

typedef struct ipu_op_plan {
    ipu_matmul_grid grid; /* matmuls only */
    uint64_t cycles;      /* estimate for one execution */
    uint64_t tile_bytes;
    ipu_catalogue catalogue; /* matmuls: the candidates (grids freed with the plan) */
    uint32_t fits;        /* matmuls: retained candidates that fit the budget */
    uint32_t refined;     /* matmuls: candidates over the coarse bound judged on their exact footprint */
    /* Operand layouts (empty when an operand is read where it lives):
     * matmul: a = A, b = B with its replicas; elementwise: a = the first
     * input on a result homed elsewhere first (the Repeat's initial value),
     * and for an add b = the second input on the result's layout; LayerNorm: a = the input by rows, b = gamma and
     * beta on every row band's tile; attention and MAP pooling: a = the
     * queries, b = the keys and values. */
    ipu_layout a, b;
    ipu_layout bias; /* biased matmuls: the current bias member on every result block's tile */
    int attention;        /* attention and MAP pooling: ipu_attention_mode chosen */
    uint32_t query_bands; /* attention and MAP pooling: bands per (image, head) */
    uint32_t chunk_rows;  /* materialized attention: queries per scores chunk */
    uint32_t chunk_keys;  /* attention and MAP pooling: keys resident at once */
    uint32_t key_bands;   /* flash attention: units per query band, each over one key chunk */
} ipu_op_plan;

/* What the planner searches under (compile options of the same names). */
typedef struct ipu_plan_options {
    uint32_t budget;        /* search budget per tile */
    ipu_catalogue_options catalogue;
    int attention;          /* ipu_attention_mode */
    int smallest;           /* every matmul takes its smallest candidate, whatever the budget */
    const uint64_t *caps;   /* per op, may be NULL: the largest exact footprint a matmul may take
                             * (0: any), set when a whole candidate plan did not fit */
    const uint32_t *choices; /* per op, may be NULL: a matmul takes the fitting candidate after the
                              * first choices[op] (fastest first; 0: the fastest that fits) */
    const int *attention_modes; /* per op, may be NULL: an attention or MAP pooling op's
                                 * ipu_attention_mode (IPU_ATTENTION_AUTO: the plan's) */
    const uint32_t *key_bands;  /* per op, may be NULL: a flash attention's key bands (0: the
                                 * planner's choice, 1: none) */
    int inject;             /* a test's mutation (lower/program.h); the planner applies its own */
} ipu_plan_options;

typedef struct ipu_plan {
    ipu_profile profile;
    const ipu_graph *graph;
    ipu_plan_options options;
    uint32_t budget;
    int attention;    /* ipu_attention_mode requested */
    ipu_layout *home; /* per tensor */
    ipu_op_plan *ops; /* per op */
    uint64_t cycles;  /* estimate for the whole program, Repeat iterations included */
    uint64_t host_cycles; /* of which host input and output */
    uint64_t param_bytes; /* resident parameter bytes on the fullest tile */
    uint64_t *smallest_param, *smallest_transient; /* per matmul op: lower bounds */
    double replication; /* how many times its smallest block a parameter may take */
    uint32_t next_tile; /* where the next grid smaller than the device starts */
    uint64_t transient_room; /* the largest transient matmul footprint the budget allows for */
} ipu_plan;

/* The serial piece counts a grid may take (1 first: all rows at once). */
#define IPU_MATMUL_SERIAL_COUNTS 12
extern const uint32_t ipu_matmul_serial_counts[IPU_MATMUL_SERIAL_COUNTS];

/* Cost and footprint of one grid under a per-tile budget (what the device
 * leaves beside it holds package support); 0 when the grid does not suit
 * the shape. */
int ipu_matmul_grid_cost(const ipu_profile *p, uint32_t budget, uint32_t m, uint32_t n, uint32_t k,
                         int in_dtype, int out_dtype, uint32_t members, uint32_t gm, uint32_t gn, uint32_t gk,
                         uint32_t gs, uint32_t gather, ipu_matmul_grid *out);
/* B's home under a gathering grid: block (l, j) of the B layout b cut into
 * gm row bands, band i on the tile of replica i, so each block is held once
 * and every tile of the grid holds a share of it. */
ipu_status ipu_matmul_weight_home(ipu_ctx *ctx, const ipu_matmul_grid *g, const ipu_layout *b, ipu_layout *out);
/* A home for A when the matmul is its first reader (a graph input, the
 * Repeat's carried tensor): at once, replica 0 of the A layout a (read in
 * place); serial or `spread`, each A block cut into row bands over the
 * tiles of its replicas, so the input is spread over the grid and no tile
 * holds a whole block (the serial loop brings it a piece at a time; a host
 * input cast on its way to A keeps its own storage thin). */
ipu_status ipu_matmul_input_home(ipu_ctx *ctx, const ipu_matmul_grid *g, const ipu_layout *a, int spread,
                                 ipu_layout *out);
/* Serial pieces of a grid: row band i of m rows over gm is cut into gk
 * sub-bands (reduction owners) and each sub-band l into gs chunks; piece t
 * is chunk t of every sub-band.  Rows [*lo, *hi) of chunk (i, l, t). */
void ipu_matmul_chunk(uint32_t m, const ipu_matmul_grid *g, uint32_t i, uint32_t l, uint32_t t, uint32_t *lo,
                      uint32_t *hi);
/* Rows of piece t of band i in its chunks before chunk l (l = gk: the whole
 * piece); where chunk l starts in the piece's partials. */
uint32_t ipu_matmul_piece_rows(uint32_t m, const ipu_matmul_grid *g, uint32_t i, uint32_t l, uint32_t t);
/* The A, B and result layouts of a grid (tiles from 0; tile (i, j, l) is
 * (i * gn + j) * gk + l).  With gk > 1 the result is reduced by row bands:
 * each row band i is split gk ways and sub-band l lives on tile (i, j, l). */
ipu_status ipu_matmul_layouts(ipu_ctx *ctx, uint32_t m, uint32_t n, uint32_t k, int in_dtype,
                              int out_dtype, const ipu_matmul_grid *g, ipu_layout *a, ipu_layout *b,
                              ipu_layout *c);

/* A reduction of n > 1 staged pieces adds its last half (n / 2 pieces) onto
 * its first, one vector add, until one piece is left; returns that half.
 * Lowering emits these adds and the cost model charges them. */
static inline uint32_t ipu_reduce_tree_half(uint32_t n) { return n / 2; }

/* Plan every op in order: a matmul takes the fastest of its catalogue's
 * candidates that fits beside what is resident and what later matmuls
 * need, judged first on the coarse bound, and only when that fails, on its
 * exact footprint.  With options->smallest, every matmul takes its smallest
 * candidate and the budget is ignored (a rejected search's profile). */
ipu_status ipu_plan_graph(ipu_ctx *ctx, const ipu_profile *p, const ipu_graph *g,
                          const ipu_plan_options *options, ipu_plan *out);
/* The work units of an attention or MAP pooling op: one per (image b,
 * head h, query band q, key band kk), on tile ((b * heads + h) * bands + q)
 * * key_bands + kk.  Flash attention may split the keys into key bands (one
 * key chunk each): every unit of a query band then takes all of its queries
 * over its own keys, and the bands' flash states are merged on the unit
 * that owns each sub-band kk of the query rows (key_bands 1: no split).
 * Its layouts:
 *   queries (op plan a): attention: over [q | k | v], row band b * bands + q,
 *     column band h of 3 * heads, replica kk; MAP pooling: over the query
 *     [1 x C], column band h, replica b;
 *   keys and values (op plan b): row band b * key_chunks + c (chunk c of
 *     the image's keys), column bands k_part + h and v_part + h of
 *     kv_parts * heads, replica q (split: chunk c on key band c's unit);
 *   result (its home): row band (b * bands + q) * key_bands + kk (sub-band
 *     kk of the query band's rows), column band h.
 * Parts nobody needs are absent; lowering brings the keys and values over
 * a part at a time (flash: one key chunk of both, or every band's chunk at
 * once when split; materialized, with one chunk: all keys, then all
 * values), so only one part is resident. */
typedef struct ipu_attention_shape {
    uint32_t images, heads, head_dim, seq;
    uint32_t queries; /* query rows per image: seq, or 1 for MAP pooling */
    uint32_t bands;   /* query bands per (image, head) */
    uint32_t chunk_keys, key_chunks; /* keys per chunk and chunks per image */
    uint32_t key_bands;              /* flash units per query band, one key chunk each (1: no split) */
    uint32_t kv_parts, k_part, v_part;
} ipu_attention_shape;

void ipu_attention_shape_of(const ipu_graph *g, const ipu_ir_op *op, uint32_t bands,
                            uint32_t chunk_keys, uint32_t key_bands, ipu_attention_shape *s);

/* "auto", "flash", "materialized". */
const char *ipu_attention_mode_name(int mode);

/* Inside the planner: one exchange step moving at most `bytes` into any
 * tile; the op planners of norm.c and attention.c. */
uint64_t ipu_plan_exchange_cycles(const ipu_profile *p, uint64_t bytes);
/* Home a [1 x C] parameter (a LayerNorm's gamma or beta, a bias; a sequence
 * inside the Repeat) thinly: column pieces on tiles spaced evenly, offset by
 * the tensor's index so parameters spread out; at least 32 pieces (fewer
 * when C is narrow), more when a piece's members would pass 1 KiB.  Every
 * execution brings the current member to the tiles that need it. */
ipu_status ipu_plan_row_param_home(ipu_ctx *ctx, ipu_plan *plan, uint32_t tensor);
ipu_status ipu_plan_layernorm(ipu_ctx *ctx, ipu_plan *plan, size_t index);
ipu_status ipu_plan_attention(ipu_ctx *ctx, ipu_plan *plan, size_t index);
/* An attention op's unit footprint in the requested mode (auto: the smaller). */
uint64_t ipu_plan_attention_footprint(const ipu_plan *plan, size_t index);
void ipu_plan_free(ipu_plan *plan);
/* Per op: kind, grid, candidates, cycles, footprint; and the totals. */
json_t *ipu_plan_json(const ipu_plan *plan);

#endif
