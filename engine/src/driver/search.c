/* search.c: the plan search (search.h).  Candidates live in one list in
 * the order they were made (their index breaks every tie, so the search
 * takes the same steps on any number of threads); the beam holds indices
 * into it.  Planning and building run one candidate per thread, each on a
 * worker context of its own (ipu_ctx_child), and write only their own
 * candidate.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/build.h"
#include "driver/search.h"
#include "timing/timing.h"

/* Builds per beam member and step: the best-estimated of its neighbours. */
#define BUILDS_PER_MEMBER 3u
/* Dropped candidates listed in the record (all are counted). */
#define DROPS_LISTED 24u

/* The exchange modes a move may switch to. */
static const ipu_xmode XMODES[] = {{0, 0, 0}, {256, 1, 0}, {256, 1, 1}};
#define XMODE_COUNT (sizeof XMODES / sizeof *XMODES)

enum { FRESH, PLANNED, BUILT, DROPPED };

typedef struct candidate {
    ipu_search_point point;
    uint32_t parent; /* UINT32_MAX: the start */
    char move[160];
    int state;
    uint64_t estimate, cycles;
    uint32_t *fits;  /* per op: the matmul's fitting candidates */
    int *mode;       /* per op: the attention mode the plan took */
    uint32_t *bands; /* per op: the key bands the plan took */
    char why[320];   /* a dropped candidate's reason */
} candidate;

typedef struct search {
    ipu_ctx *ctx;
    const ipu_profile *p;
    const ipu_graph *g;
    int inject, threads;
    int worst_first; /* injected: the estimates compared the wrong way round */
    candidate *all;
    size_t count, capacity;
    uint32_t *beam, beam_count;
    uint64_t screened, built, dropped;
    json_t *drops, *accepted;
} search;

/* An exchange mode in words, into buf. */
static const char *xmode_name(const ipu_xmode *x, char *buf, size_t size)
{
    if (!x->stream_words)
        snprintf(buf, size, "latency-oriented");
    else
        snprintf(buf, size, "stream waves of %u words%s, ranked by %s", x->stream_words,
                 x->balance ? " with balanced chunks" : "", x->by_horizon ? "horizon" : "tables");
    return buf;
}

static int same_point(const search *s, const ipu_search_point *a, const ipu_search_point *b)
{
    size_t n = s->g->op_count;
    return !memcmp(a->choices, b->choices, n * sizeof *a->choices) && !memcmp(a->modes, b->modes, n * sizeof *a->modes) &&
           !memcmp(a->key_bands, b->key_bands, n * sizeof *a->key_bands) && !memcmp(&a->xmode, &b->xmode, sizeof a->xmode);
}

ipu_status ipu_search_point_init(ipu_ctx *ctx, const ipu_graph *g, const ipu_plan_options *plan,
                                 const ipu_xmode *xmode, ipu_search_point *out)
{
    size_t n = g->op_count ? g->op_count : 1;
    out->plan = *plan;
    out->xmode = *xmode;
    out->choices = ipu_calloc(ctx, n, sizeof *out->choices);
    out->modes = ipu_calloc(ctx, n, sizeof *out->modes);
    out->key_bands = ipu_calloc(ctx, n, sizeof *out->key_bands);
    if (!out->choices || !out->modes || !out->key_bands) {
        ipu_search_point_free(out);
        return IPU_NO_MEMORY(ctx);
    }
    if (plan->key_bands)
        memcpy(out->key_bands, plan->key_bands, g->op_count * sizeof *out->key_bands);
    out->plan.choices = out->choices;
    out->plan.attention_modes = out->modes;
    out->plan.key_bands = out->key_bands;
    return IPU_OK;
}

void ipu_search_point_free(ipu_search_point *point)
{
    free(point->choices);
    free(point->modes);
    free(point->key_bands);
    point->choices = NULL;
    point->modes = NULL;
    point->key_bands = NULL;
}

/* A copy of a point (its arrays its own). */
static ipu_status copy_point(search *s, const ipu_search_point *from, ipu_search_point *to)
{
    IPU_TRY(ipu_search_point_init(s->ctx, s->g, &from->plan, &from->xmode, to));
    size_t n = s->g->op_count;
    memcpy(to->choices, from->choices, n * sizeof *to->choices);
    memcpy(to->modes, from->modes, n * sizeof *to->modes);
    memcpy(to->key_bands, from->key_bands, n * sizeof *to->key_bands);
    return IPU_OK;
}

/* Append a candidate: parent's point changed by the caller through *out. */
static ipu_status add_candidate(search *s, uint32_t parent, const ipu_search_point *point, candidate **out)
{
    IPU_TRY(IPU_GROW(s->ctx, s->all, s->count, s->capacity));
    candidate *c = &s->all[s->count];
    memset(c, 0, sizeof *c);
    c->parent = parent;
    size_t n = s->g->op_count ? s->g->op_count : 1;
    c->fits = ipu_calloc(s->ctx, n, sizeof *c->fits);
    c->mode = ipu_calloc(s->ctx, n, sizeof *c->mode);
    c->bands = ipu_calloc(s->ctx, n, sizeof *c->bands);
    ipu_status status = c->fits && c->mode && c->bands ? copy_point(s, point, &c->point) : IPU_NO_MEMORY(s->ctx);
    if (status != IPU_OK) {
        free(c->fits);
        free(c->mode);
        free(c->bands);
        return status;
    }
    s->count++;
    *out = c;
    return IPU_OK;
}

/* Whether a point was made before (any state). */
static int visited(const search *s, const ipu_search_point *point)
{
    for (size_t i = 0; i < s->count; i++)
        if (same_point(s, &s->all[i].point, point))
            return 1;
    return 0;
}

/* A neighbour of candidate from, if new: describe it by its move. */
static ipu_status offer(search *s, uint32_t from, const ipu_search_point *point, const char *move)
{
    if (visited(s, point))
        return IPU_OK;
    candidate *c;
    IPU_TRY(add_candidate(s, from, point, &c));
    snprintf(c->move, sizeof c->move, "%s", move);
    return IPU_OK;
}

/* Every move from candidate index from. */
static ipu_status neighbours(search *s, uint32_t from)
{
    const ipu_graph *g = s->g;
    ipu_search_point point;
    IPU_TRY(copy_point(s, &s->all[from].point, &point));
    ipu_status status = IPU_OK;
    char move[160];
    for (size_t i = 0; i < g->op_count && status == IPU_OK; i++) {
        const ipu_ir_op *op = &g->ops[i];
        const char *name = g->tensors[op->out].name;
        const candidate *c = &s->all[from];
        if (op->kind == IPU_IR_MATMUL) {
            for (int step = -1; step <= 1 && status == IPU_OK; step += 2) {
                uint32_t was = point.choices[i];
                if ((step < 0 && !was) || (step > 0 && was + 1 >= c->fits[i]))
                    continue;
                point.choices[i] = was + (uint32_t)step;
                snprintf(move, sizeof move, "op %zu matmul %s: fitting candidate %u", i, name,
                         point.choices[i] + 1);
                status = offer(s, from, &point, move);
                point.choices[i] = was;
            }
        } else if (op->kind == IPU_IR_ATTENTION || op->kind == IPU_IR_MAP_POOL) {
            int was = point.modes[i];
            point.modes[i] = c->mode[i] == IPU_ATTENTION_FLASH ? IPU_ATTENTION_MATERIALIZED : IPU_ATTENTION_FLASH;
            snprintf(move, sizeof move, "op %zu %s %s: %s", i, ipu_ir_op_name(op->kind), name,
                     ipu_attention_mode_name(point.modes[i]));
            status = offer(s, from, &point, move);
            point.modes[i] = was;
            /* A flash attention's key bands, one more or one fewer. */
            for (int step = -1; step <= 1 && status == IPU_OK && op->kind == IPU_IR_ATTENTION &&
                                c->mode[i] == IPU_ATTENTION_FLASH;
                 step += 2) {
                uint32_t bands = point.key_bands[i], now = c->bands[i];
                if (step < 0 && now <= 1)
                    continue;
                point.key_bands[i] = now + (uint32_t)step;
                point.modes[i] = IPU_ATTENTION_FLASH;
                snprintf(move, sizeof move, "op %zu attention %s: %u key bands", i, name, point.key_bands[i]);
                status = offer(s, from, &point, move);
                point.key_bands[i] = bands;
                point.modes[i] = was;
            }
        }
    }
    ipu_xmode was = point.xmode;
    for (size_t x = 0; x < XMODE_COUNT && status == IPU_OK; x++) {
        if (!memcmp(&XMODES[x], &was, sizeof was))
            continue;
        point.xmode = XMODES[x];
        char name[96];
        snprintf(move, sizeof move, "exchange: %s", xmode_name(&XMODES[x], name, sizeof name));
        status = offer(s, from, &point, move);
    }
    ipu_search_point_free(&point);
    return status;
}

/* A candidate that did not plan, build or fit: kept with its reason. */
static void drop(candidate *c, ipu_ctx *worker)
{
    c->state = DROPPED;
    snprintf(c->why, sizeof c->why, "%s", ipu_ctx_errmsg(worker));
}

/* Whether a worker's failure only drops its candidate: it does not fit
 * (NO_PLAN), or the planner refuses the move (a key band count that does
 * not apply: INVALID_ARGUMENT); anything else (an inconsistency, out of
 * memory, cancel) stops the search. */
static int droppable(ipu_status status) { return status == IPU_ERR_NO_PLAN || status == IPU_ERR_INVALID_ARGUMENT; }

/* Plan candidate c: its estimate and, per op, what the plan took. */
static ipu_status screen(search *s, ipu_ctx *worker, candidate *c)
{
    ipu_plan plan;
    ipu_status status = ipu_plan_graph(worker, s->p, s->g, &c->point.plan, &plan);
    if (status != IPU_OK)
        return status;
    c->estimate = plan.cycles;
    for (size_t i = 0; i < s->g->op_count; i++) {
        c->fits[i] = plan.ops[i].fits;
        c->mode[i] = plan.ops[i].attention;
        c->bands[i] = plan.ops[i].key_bands;
    }
    ipu_plan_free(&plan);
    c->state = PLANNED;
    return IPU_OK;
}

/* Build candidate c through the back end and time it. */
static ipu_status build(search *s, ipu_ctx *worker, candidate *c)
{
    ipu_build b;
    ipu_build_times times = {0, 0, 0, 0};
    ipu_support_map support;
    ipu_package *pkg = NULL;
    memset(&b, 0, sizeof b);
    ipu_status status = ipu_support_map_alloc(worker, s->p->tiles, &support);
    if (status == IPU_OK)
        status = ipu_build_plan(worker, s->p, s->g, &c->point.plan, s->inject, &b, &times);
    if (status == IPU_OK && b.peak > c->point.plan.budget)
        status = IPU_FAIL(worker, IPU_ERR_NO_PLAN,
                          "its lowered program needs %llu bytes on tile %u, over the search budget of %u",
                          (unsigned long long)b.peak, b.peak_tile, c->point.plan.budget);
    if (status == IPU_OK) {
        json_t *meta = json_pack("{s:s}", "check", "timing");
        status = meta ? ipu_build_package(worker, &b, &c->point.xmode, meta, NULL, 0, &pkg, &support)
                      : IPU_NO_MEMORY(worker);
    }
    json_t *timing = NULL;
    if (status == IPU_OK)
        status = ipu_timing_package(worker, pkg, &timing);
    if (status == IPU_ERR_MALFORMED) /* the compiler's own package: a defect, not a drop */
        status = IPU_INCONSISTENT(worker, "package", "a searched candidate's package");
    if (status == IPU_OK) {
        c->cycles = (uint64_t)json_integer_value(json_object_get(timing, "cycles"));
        c->state = BUILT;
    }
    json_decref(timing);
    ipu_package_free(pkg);
    ipu_build_free(&b);
    ipu_support_map_free(&support);
    return status;
}

typedef ipu_status (*work_fn)(search *s, ipu_ctx *worker, candidate *c);

/* Run work on candidates list[0..n) in parallel; a droppable failure drops
 * the candidate, any other stops the search with its message. */
static ipu_status run_parallel(search *s, work_fn work, const uint32_t *list, size_t n)
{
    ipu_status first = IPU_OK;
    char message[1024] = "";
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->threads)
    for (size_t i = 0; i < n; i++) {
        candidate *c = &s->all[list[i]];
        ipu_ctx *worker = ipu_ctx_child(s->ctx);
        ipu_status status = worker ? work(s, worker, c) : IPU_ERR_NO_MEMORY;
        if (status != IPU_OK && worker && droppable(status)) {
            drop(c, worker);
            status = IPU_OK;
        }
        if (status != IPU_OK) {
#pragma omp critical(ipu_search_failure)
            if (first == IPU_OK) {
                first = status;
                snprintf(message, sizeof message, "%s", worker ? ipu_ctx_errmsg(worker) : "out of memory");
            }
        }
        ipu_ctx_free(worker);
    }
    IPU_TRY(IPU_CHECK_CANCEL(s->ctx));
    if (first == IPU_ERR_INTERNAL)
        return IPU_FAIL(s->ctx, IPU_ERR_INTERNAL, "%s", message);
    if (first != IPU_OK)
        return IPU_FAIL(s->ctx, first, "plan search: %s", message);
    return IPU_OK;
}

static void note_drop(search *s, const candidate *c, const char *stage)
{
    s->dropped++;
    if (json_array_size(s->drops) < DROPS_LISTED)
        json_array_append_new(s->drops, json_pack("{s:s, s:s, s:s}", "move", c->move, "stage", stage, "reason",
                                                  c->why));
}

/* Whether candidate a ranks before b: by static cycles (by_cycles: both
 * built) or by estimate, then by the order they were made. */
static int before(const search *s, uint32_t a, uint32_t b, int by_cycles)
{
    const candidate *x = &s->all[a], *y = &s->all[b];
    uint64_t u = by_cycles ? x->cycles : x->estimate, v = by_cycles ? y->cycles : y->estimate;
    /* Injected: the estimates compared the wrong way round (the worst built first). */
    if (!by_cycles && s->worst_first)
        return u != v ? u > v : a < b;
    return u != v ? u < v : a < b;
}

/* Sort a short list of candidate indices (insertion sort: a step has tens). */
static void sort_candidates(const search *s, uint32_t *list, size_t n, int by_cycles)
{
    for (size_t i = 1; i < n; i++) {
        uint32_t x = list[i];
        size_t j = i;
        for (; j > 0 && before(s, x, list[j - 1], by_cycles); j--)
            list[j] = list[j - 1];
        list[j] = x;
    }
}

static int in_list(const uint32_t *list, size_t n, uint32_t x)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == x)
            return 1;
    return 0;
}

/* One step: neighbours of the beam planned, the best few built, the beam
 * renewed.  *changed: whether the beam took a new candidate. */
static ipu_status step(search *s, uint32_t number, uint32_t beam_size, int *changed)
{
    size_t first_new = s->count;
    for (uint32_t b = 0; b < s->beam_count; b++)
        IPU_TRY(neighbours(s, s->beam[b]));
    size_t fresh = s->count - first_new;
    uint32_t *list = ipu_calloc(s->ctx, fresh + s->beam_count + 1, sizeof *list);
    if (!list)
        return IPU_NO_MEMORY(s->ctx);
    for (size_t i = 0; i < fresh; i++)
        list[i] = (uint32_t)(first_new + i);
    ipu_status status = run_parallel(s, screen, list, fresh);
    s->screened += fresh;
    /* The planned ones, best estimate first; the first few are built. */
    size_t planned = 0;
    for (size_t i = 0; status == IPU_OK && i < fresh; i++) {
        candidate *c = &s->all[first_new + i];
        if (c->state == PLANNED)
            list[planned++] = (uint32_t)(first_new + i);
        else
            note_drop(s, c, "plan");
    }
    sort_candidates(s, list, planned, 0);
    size_t builds = planned < (size_t)BUILDS_PER_MEMBER * s->beam_count ? planned
                                                                       : (size_t)BUILDS_PER_MEMBER * s->beam_count;
    if (status == IPU_OK)
        status = run_parallel(s, build, list, builds);
    s->built += builds;
    /* The new beam: the fastest of the old one and the built. */
    size_t pool = 0;
    for (size_t i = 0; status == IPU_OK && i < builds; i++) {
        candidate *c = &s->all[list[i]];
        if (c->state == BUILT)
            list[pool++] = list[i];
        else
            note_drop(s, c, "back end");
    }
    for (uint32_t b = 0; status == IPU_OK && b < s->beam_count; b++)
        list[pool++] = s->beam[b];
    sort_candidates(s, list, pool, 1);
    *changed = 0;
    uint32_t kept = pool < beam_size ? (uint32_t)pool : beam_size;
    for (uint32_t b = 0; status == IPU_OK && b < kept; b++) {
        if (in_list(s->beam, s->beam_count, list[b]))
            continue;
        const candidate *c = &s->all[list[b]], *from = &s->all[c->parent];
        *changed = 1;
        json_array_append_new(s->accepted, json_pack("{s:I, s:s, s:I, s:I, s:I}", "step", (json_int_t)number, "move",
                                                     c->move, "from_cycles", (json_int_t)from->cycles, "cycles",
                                                     (json_int_t)c->cycles, "gain",
                                                     (json_int_t)from->cycles - (json_int_t)c->cycles));
    }
    if (status == IPU_OK) {
        memcpy(s->beam, list, kept * sizeof *list);
        s->beam_count = kept;
    }
    free(list);
    return status;
}

static void search_free(search *s)
{
    for (size_t i = 0; i < s->count; i++) {
        ipu_search_point_free(&s->all[i].point);
        free(s->all[i].fits);
        free(s->all[i].mode);
        free(s->all[i].bands);
    }
    free(s->all);
    free(s->beam);
    json_decref(s->drops);
    json_decref(s->accepted);
}

ipu_status ipu_search_plans(ipu_ctx *ctx, const ipu_profile *p, const ipu_graph *g, int inject,
                            const ipu_search_point *start, uint64_t first_cycles, const ipu_search_options *options,
                            ipu_search_point *best, json_t **record)
{
    double began = ipu_build_seconds();
    search s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx, s.p = p, s.g = g, s.inject = inject;
    s.worst_first = options->inject == IPU_INJECT_SEARCH_WORST_FIRST;
    s.threads = ctx->threads > 0 ? ctx->threads : omp_get_max_threads();
    uint32_t beam = options->beam ? options->beam : 1;
    s.beam = ipu_calloc(ctx, beam, sizeof *s.beam);
    s.drops = json_array();
    s.accepted = json_array();
    candidate *first = NULL;
    ipu_status status = s.beam && s.drops && s.accepted ? add_candidate(&s, UINT32_MAX, start, &first)
                                                        : IPU_NO_MEMORY(ctx);
    /* The start is built already (the compile's own package): plan it for its choices. */
    if (status == IPU_OK)
        status = run_parallel(&s, screen, (uint32_t[]){0}, 1);
    if (status == IPU_OK && s.all[0].state != PLANNED)
        status = IPU_INCONSISTENT(ctx, "plan", "the search's first plan no longer plans: %s", s.all[0].why);
    const char *stopped = "converged";
    uint32_t steps = 0;
    double last_step = 0;
    if (status == IPU_OK) {
        snprintf(s.all[0].move, sizeof s.all[0].move, "the first plan that fits");
        s.all[0].state = BUILT;
        s.all[0].cycles = first_cycles;
        s.beam[0] = 0;
        s.beam_count = 1;
    }
    while (status == IPU_OK) {
        double now = ipu_build_seconds() - began;
        if (options->steps && steps >= options->steps) {
            stopped = "step limit";
            break;
        }
        if (now + last_step > options->seconds) {
            stopped = "time budget";
            break;
        }
        status = ipu_progress(ctx, "plan search", steps, options->steps);
        int changed = 0;
        double t0 = ipu_build_seconds();
        if (status == IPU_OK)
            status = step(&s, steps + 1, beam, &changed);
        last_step = ipu_build_seconds() - t0;
        if (status != IPU_OK)
            break;
        steps++;
        if (!changed)
            break;
    }
    if (status == IPU_OK)
        status = copy_point(&s, &s.all[s.beam[0]].point, best);
    char exchange[96];
    if (status == IPU_OK) {
        *record = json_pack("{s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:O, s:O, s:I, s:I, s:s, s:s, s:f, s:I}", "beam",
                            (json_int_t)beam, "seconds_budget", options->seconds, "step_limit",
                            (json_int_t)options->steps, "steps", (json_int_t)steps, "screened",
                            (json_int_t)s.screened, "built", (json_int_t)s.built, "dropped", (json_int_t)s.dropped,
                            "drops", s.drops, "accepted", s.accepted, "first_cycles", (json_int_t)first_cycles,
                            "cycles", (json_int_t)s.all[s.beam[0]].cycles, "exchange",
                            xmode_name(&best->xmode, exchange, sizeof exchange), "stopped", stopped, "wall_seconds",
                            ipu_build_seconds() - began, "threads", (json_int_t)s.threads);
        if (!*record) {
            ipu_search_point_free(best);
            status = IPU_NO_MEMORY(ctx);
        }
    }
    search_free(&s);
    return status;
}
