/* place.c: placement v1, per-tile best-fit allocation (the contract is
 * place.h).  Requests are bucketed by tile (a counting sort, so nothing is
 * quadratic across tiles) and each tile is placed on its own: in lifetime
 * order (first step, then larger size, then request index), each request
 * goes into the smallest free hole of its window ([lo, hi) clipped to the
 * accessible SRAM above the runtime state) that fits it at its alignment,
 * lowest address on ties, where "free" excludes the tile's reserved ranges,
 * every placed request whose inclusive lifetime overlaps its own, and the
 * whole memory elements of live placed conflict partners.  Placed requests
 * are kept sorted by address, so one request's holes come from a linear
 * merge of three sorted streams (placed, reserved, conflict elements):
 * O(n^2) per tile at worst, and in lifetime order requests that have ended
 * leave the list, so a scan walks only the live ones.  If lifetime order
 * fails on a tile, the tile is retried in size order (largest first); if
 * that fails too, the requests that failed are promoted: placed first
 * (largest first), the rest after them in lifetime order, each round
 * promoting the request the last one failed at, for up to PROMOTION_ROUNDS
 * rounds (a fragmented tile usually has room once its few large, short-lived
 * requests choose their holes before the long-lived ones split the space).
 * If every strategy fails, the error names the tile, the request, its free
 * bytes (in all and outside the host aperture) and largest hole, and each
 * strategy's outcome (tiles placed before it keep their addresses; the
 * failing tile's requests are left untouched).  Everything is deterministic:
 * every order has the request index as its last key.
 */
#include "place/place.h"

#include <stdlib.h>
#include <string.h>

typedef struct place_span {
    uint64_t lo, hi;
} place_span;

/* A placed request: bytes [lo, hi), lifetime [first, last]. */
typedef struct place_live {
    uint32_t lo, hi, first, last;
} place_live;

/* The free space one request sees, and its best-fit hole. */
typedef struct place_scan {
    uint64_t free_bytes, free_outside, largest;
    int fits;
    uint64_t best_address, best_len;
} place_scan;

/* Sort key: (k1, k2, index), all ascending. */
typedef struct place_key {
    uint64_t k1, k2;
    uint32_t index;
} place_key;

typedef struct place_state {
    const ipu_profile *p;
    ipu_place_request *req;
    const uint32_t *adj_start, *adj; /* conflict partners, CSR by request */
    uint32_t *local_of;              /* request index -> index in loc */
    uint64_t acc_lo, acc_hi, element, ap_lo, ap_hi;
    /* the current tile */
    const uint32_t *ids; /* its requests, ascending index */
    size_t n;
    const place_span *res; /* its non-empty reserved ranges, sorted */
    size_t nres;
    /* scratch */
    ipu_place_request *loc; /* the tile's requests, copied for locality */
    uint8_t *is_placed;     /* by local index */
    uint8_t *is_promoted;   /* by local index: placed first in a promotion round */
    place_key *keys;
    uint32_t *order;
    place_live *placed; /* placed requests sorted by address */
    size_t nplaced;
    place_span *cspan; /* live conflict-partner elements */
} place_state;

static int key_cmp(const void *a, const void *b)
{
    const place_key *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 < y->k2 ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int span_cmp(const void *a, const void *b)
{
    const place_span *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->hi < y->hi ? -1 : x->hi > y->hi;
}

static int lifetimes_overlap(const ipu_place_request *a, const ipu_place_request *b)
{
    return a->first <= b->last && b->first <= a->last;
}

static const char *req_name(const ipu_place_request *r)
{
    return r->name ? r->name : "(unnamed)";
}

static void scan_hole(const place_state *s, const ipu_place_request *r, uint64_t lo, uint64_t hi,
                      place_scan *out)
{
    uint64_t len = hi - lo;
    uint64_t olo = lo > s->ap_lo ? lo : s->ap_lo;
    uint64_t ohi = hi < s->ap_hi ? hi : s->ap_hi;
    out->free_bytes += len;
    out->free_outside += len - (olo < ohi ? ohi - olo : 0);
    if (len > out->largest)
        out->largest = len;
    uint64_t a = (lo + r->alignment - 1) & ~((uint64_t)r->alignment - 1);
    if (a + r->size <= hi && (!out->fits || len < out->best_len)) {
        out->fits = 1;
        out->best_address = a;
        out->best_len = len;
    }
}

/* Walk the holes request r sees inside its window, in address order. */
static void scan_request(place_state *s, uint32_t li, place_scan *out)
{
    const ipu_place_request *r = &s->loc[li];
    uint32_t ri = s->ids[li];
    memset(out, 0, sizeof *out);
    uint64_t wlo = r->lo > s->acc_lo ? r->lo : s->acc_lo;
    uint64_t whi = r->hi < s->acc_hi ? r->hi : s->acc_hi;
    if (wlo >= whi)
        return;

    /* Live placed conflict partners block whole elements. */
    size_t nc = 0;
    for (uint32_t j = s->adj_start[ri]; j < s->adj_start[ri + 1]; j++) {
        uint32_t lq = s->local_of[s->adj[j]];
        const ipu_place_request *q = &s->loc[lq];
        if (!s->is_placed[lq] || !lifetimes_overlap(r, q))
            continue;
        place_span sp = {(q->address / s->element) * s->element,
                         ((uint64_t)q->address + q->size - 1) / s->element * s->element +
                             s->element};
        s->cspan[nc++] = sp;
    }
    if (nc > 1)
        qsort(s->cspan, nc, sizeof *s->cspan, span_cmp);

    size_t ia = 0, ib = 0, ic = 0;
    uint64_t cur = wlo;
    for (;;) {
        while (ia < s->nplaced &&
               (s->placed[ia].first > r->last || r->first > s->placed[ia].last))
            ia++;
        uint64_t lo = UINT64_MAX, hi = 0;
        int which = -1;
        if (ia < s->nplaced) {
            lo = s->placed[ia].lo;
            hi = s->placed[ia].hi;
            which = 0;
        }
        if (ib < s->nres && s->res[ib].lo < lo) {
            lo = s->res[ib].lo;
            hi = s->res[ib].hi;
            which = 1;
        }
        if (ic < nc && s->cspan[ic].lo < lo) {
            lo = s->cspan[ic].lo;
            hi = s->cspan[ic].hi;
            which = 2;
        }
        if (which < 0 || lo >= whi)
            break;
        if (lo > cur)
            scan_hole(s, r, cur, lo, out);
        if (hi > cur)
            cur = hi;
        if (which == 0)
            ia++;
        else if (which == 1)
            ib++;
        else
            ic++;
        if (cur >= whi)
            break;
    }
    if (cur < whi)
        scan_hole(s, r, cur, whi, out);
}

static void insert_placed(place_state *s, uint32_t li)
{
    const ipu_place_request *r = &s->loc[li];
    place_live v = {r->address, r->address + r->size, r->first, r->last};
    size_t lo = 0, hi = s->nplaced;
    while (lo < hi) { /* first position whose address is greater */
        size_t mid = lo + (hi - lo) / 2;
        if (s->placed[mid].lo <= v.lo)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&s->placed[lo + 1], &s->placed[lo], (s->nplaced - lo) * sizeof *s->placed);
    s->placed[lo] = v;
    s->nplaced++;
}

/* Place the tile's requests in s->order; returns the position of the first
 * request that does not fit (with its scan in *fail), or s->n.  In lifetime
 * order (prune) no later request can overlap one that ended before the
 * current request's first step, so those leave the address-sorted list and
 * the scans only walk live requests. */
static size_t run_pass(place_state *s, int prune, place_scan *fail)
{
    uint32_t min_last = UINT32_MAX;
    s->nplaced = 0;
    for (size_t i = 0; i < s->n; i++)
        s->is_placed[i] = 0;
    for (size_t i = 0; i < s->n; i++) {
        uint32_t li = s->order[i];
        uint32_t first = s->loc[li].first;
        if (prune && s->nplaced && first > min_last) {
            size_t k = 0;
            min_last = UINT32_MAX;
            for (size_t j = 0; j < s->nplaced; j++) {
                if (s->placed[j].last >= first) {
                    s->placed[k++] = s->placed[j];
                    min_last = s->placed[j].last < min_last ? s->placed[j].last : min_last;
                }
            }
            s->nplaced = k;
        }
        if (s->loc[li].last < min_last)
            min_last = s->loc[li].last;
        place_scan sc;
        scan_request(s, li, &sc);
        if (!sc.fits) {
            *fail = sc;
            return i;
        }
        s->loc[li].address = (uint32_t)sc.best_address;
        s->is_placed[li] = 1;
        insert_placed(s, li);
    }
    return s->n;
}

typedef enum place_order { BY_LIFETIME, BY_SIZE, PROMOTED_FIRST } place_order;

/* Rounds of promotion after lifetime and size order fail on a tile. */
#define PROMOTION_ROUNDS 16

static void make_order(place_state *s, place_order how)
{
    for (size_t i = 0; i < s->n; i++) {
        const ipu_place_request *r = &s->loc[i];
        uint64_t size_key = UINT32_MAX - (uint64_t)r->size; /* larger first */
        s->keys[i].k1 = how == BY_SIZE          ? size_key
                        : how == BY_LIFETIME    ? r->first
                        : s->is_promoted[i] ? 0
                                                : 1 + (uint64_t)r->first;
        s->keys[i].k2 = how == BY_SIZE ? r->first : size_key;
        s->keys[i].index = (uint32_t)i; /* ids ascend: ties by request index */
    }
    qsort(s->keys, s->n, sizeof *s->keys, key_cmp);
    for (size_t i = 0; i < s->n; i++)
        s->order[i] = s->keys[i].index;
}

/* Promotion rounds after both orders failed at local requests first_fail
 * and second_fail: returns s->n when a round placed the tile, else the
 * position its last round failed at (scan in *fail); *rounds counts them. */
static size_t promote(place_state *s, uint32_t first_fail, uint32_t second_fail, place_scan *fail,
                      uint32_t *rounds)
{
    memset(s->is_promoted, 0, s->n);
    s->is_promoted[first_fail] = s->is_promoted[second_fail] = 1;
    size_t at = s->n;
    for (*rounds = 1; *rounds <= PROMOTION_ROUNDS; ++*rounds) {
        make_order(s, PROMOTED_FIRST);
        at = run_pass(s, 0, fail);
        if (at == s->n || s->is_promoted[s->order[at]])
            break; /* placed, or the promoted requests do not fit together */
        s->is_promoted[s->order[at]] = 1;
    }
    return at;
}

static ipu_status place_tile(ipu_ctx *ctx, place_state *s, uint32_t tile)
{
    place_scan f1 = {0}, f2 = {0}, f3 = {0};
    for (size_t i = 0; i < s->n; i++) {
        s->loc[i] = s->req[s->ids[i]];
        s->local_of[s->ids[i]] = (uint32_t)i;
    }
    make_order(s, BY_LIFETIME);
    size_t at1 = run_pass(s, 1, &f1), at2 = s->n, at3 = s->n;
    uint32_t l1 = at1 < s->n ? s->order[at1] : 0, l2 = 0, rounds = 0;
    if (at1 < s->n) {
        make_order(s, BY_SIZE);
        at2 = run_pass(s, 0, &f2);
        l2 = at2 < s->n ? s->order[at2] : 0;
    }
    if (at2 < s->n)
        at3 = promote(s, l1, l2, &f3, &rounds);
    if (at3 == s->n) {
        for (size_t i = 0; i < s->n; i++)
            s->req[s->ids[i]].address = s->loc[i].address;
    }
    if (at1 == s->n)
        return IPU_OK;
    ipu_place_request *a = &s->req[s->ids[l1]];
    if (at3 == s->n) {
        ipu_log(ctx, IPU_LOG_DEBUG,
                "place: tile %u: lifetime-order best fit failed at request %u '%.80s'; %s placed the tile",
                tile, s->ids[l1], req_name(a), at2 == s->n ? "size order" : "promoting the failed requests");
        return IPU_OK;
    }
    uint32_t r2 = s->ids[l2], r3 = s->ids[s->order[at3]];
    const ipu_place_request *b = &s->req[r2], *c = &s->req[r3];
    a->address = IPU_PLACE_UNPLACED;
    return IPU_FAIL(ctx, IPU_ERR_NO_PLAN,
                    "placement failed on tile %u: request %u '%.80s' (size %u, alignment %u, "
                    "lifetime [%u, %u], range [0x%X, 0x%X)) does not fit: "
                    "%llu bytes free during its lifetime (%llu outside the host aperture "
                    "[0x%X, 0x%X)), largest hole %llu; lifetime order: failed at this request; "
                    "size order: failed at request %u '%.80s' (size %u, %llu bytes free, "
                    "%llu outside the aperture, largest hole %llu); promoting failed requests "
                    "first (%u rounds): failed at request %u '%.80s' (size %u, %llu bytes free, "
                    "largest hole %llu)",
                    tile, s->ids[l1], req_name(a), a->size, a->alignment, a->first, a->last, a->lo,
                    a->hi, (unsigned long long)f1.free_bytes,
                    (unsigned long long)f1.free_outside, s->p->aperture_base,
                    s->p->aperture_end, (unsigned long long)f1.largest, r2, req_name(b),
                    b->size, (unsigned long long)f2.free_bytes,
                    (unsigned long long)f2.free_outside, (unsigned long long)f2.largest,
                    rounds > PROMOTION_ROUNDS ? PROMOTION_ROUNDS : rounds, r3, req_name(c), c->size,
                    (unsigned long long)f3.free_bytes, (unsigned long long)f3.largest);
}

static ipu_status validate(ipu_ctx *ctx, const ipu_profile *p, const ipu_place_request *req,
                           size_t count, const ipu_place_conflict *conflicts,
                           size_t conflict_count, const ipu_place_range *reserved,
                           size_t reserved_count)
{
    if (!p)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "place: no device profile");
    if (p->element_bytes == 0)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "place: profile element_bytes is 0");
    if ((count && !req) || (conflict_count && !conflicts) || (reserved_count && !reserved))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "place: NULL array with a nonzero count");
    if (count > UINT32_MAX - 1 || conflict_count > UINT32_MAX / 2 - 1)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "place: too many requests or conflicts");
    for (size_t i = 0; i < count; i++) {
        const ipu_place_request *r = &req[i];
        const char *what = NULL;
        if (r->tile >= p->tiles)
            what = "tile out of range";
        else if (r->size == 0)
            what = "size is 0";
        else if (r->access_tail > UINT32_MAX - r->size)
            what = "size plus access tail overflows";
        else if (r->alignment == 0 || (r->alignment & (r->alignment - 1)) != 0)
            what = "alignment is not a power of two";
        else if (r->first > r->last)
            what = "lifetime first > last";
        else if (r->lo >= r->hi)
            what = "empty allowed range (lo >= hi)";
        if (what)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "place: request %zu '%.80s': %s (tile %u of %u, size %u, "
                            "alignment %u, lifetime [%u, %u], range [0x%X, 0x%X))",
                            i, req_name(r), what, r->tile, p->tiles, r->size, r->alignment,
                            r->first, r->last, r->lo, r->hi);
    }
    for (size_t i = 0; i < conflict_count; i++) {
        uint32_t a = conflicts[i].a, b = conflicts[i].b;
        if (a >= count || b >= count)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "place: conflict %zu: request %u or %u out of range (%zu requests)",
                            i, a, b, count);
        if (a == b)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "place: conflict %zu: request %u conflicts with itself", i, a);
        if (req[a].tile != req[b].tile)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "place: conflict %zu: request %u '%.80s' (tile %u) and request %u "
                            "'%.80s' (tile %u) are on different tiles",
                            i, a, req_name(&req[a]), req[a].tile, b, req_name(&req[b]),
                            req[b].tile);
    }
    for (size_t i = 0; i < reserved_count; i++) {
        if (reserved[i].tile >= p->tiles || reserved[i].lo > reserved[i].hi)
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                            "place: reserved range %zu (tile %u, [0x%X, 0x%X)) is invalid "
                            "(%u tiles)",
                            i, reserved[i].tile, reserved[i].lo, reserved[i].hi, p->tiles);
    }
    return IPU_OK;
}

/* Non-empty reserved ranges sorted by (tile, lo, hi); rstart[t] indexes them. */
static size_t sort_reserved(const ipu_place_range *reserved, size_t reserved_count,
                            place_key *rkeys, place_span *rspan)
{
    size_t m = 0;
    for (size_t i = 0; i < reserved_count; i++) {
        if (reserved[i].lo == reserved[i].hi)
            continue;
        rkeys[m].k1 = ((uint64_t)reserved[i].tile << 32) | reserved[i].lo;
        rkeys[m].k2 = reserved[i].hi;
        rkeys[m].index = (uint32_t)i;
        m++;
    }
    qsort(rkeys, m, sizeof *rkeys, key_cmp);
    for (size_t i = 0; i < m; i++) {
        rspan[i].lo = reserved[rkeys[i].index].lo;
        rspan[i].hi = reserved[rkeys[i].index].hi;
    }
    return m;
}

ipu_status ipu_place(ipu_ctx *ctx, const ipu_profile *p, ipu_place_request *requests, size_t count,
                     const ipu_place_conflict *conflicts, size_t conflict_count,
                     const ipu_place_range *reserved, size_t reserved_count)
{
    IPU_TRY(validate(ctx, p, requests, count, conflicts, conflict_count, reserved,
                     reserved_count));
    if (count == 0)
        return IPU_OK;
    /* An access tail is placed as part of its request. */
    for (size_t i = 0; i < count; i++)
        requests[i].size += requests[i].access_tail;

    size_t tiles = p->tiles;
    size_t *tstart = ipu_calloc(ctx, tiles + 1, sizeof *tstart);
    size_t *rstart = ipu_calloc(ctx, tiles + 1, sizeof *rstart);
    uint32_t *ids = ipu_malloc(ctx, count * sizeof *ids);
    uint32_t *adj_start = ipu_calloc(ctx, (size_t)count + 1, sizeof *adj_start);
    uint32_t *adj = ipu_malloc(ctx, (2 * conflict_count + 1) * sizeof *adj);
    uint32_t *local_of = ipu_malloc(ctx, count * sizeof *local_of);
    place_key *rkeys = ipu_malloc(ctx, (reserved_count + 1) * sizeof *rkeys);
    place_span *rspan = ipu_malloc(ctx, (reserved_count + 1) * sizeof *rspan);
    place_key *keys = NULL;
    ipu_place_request *loc = NULL;
    uint8_t *is_placed = NULL, *is_promoted = NULL;
    uint32_t *order = NULL;
    place_live *placed = NULL;
    place_span *cspan = NULL;
    ipu_status st = IPU_OK;
    if (!tstart || !rstart || !ids || !adj_start || !adj || !local_of || !rkeys || !rspan) {
        st = IPU_NO_MEMORY(ctx);
        goto done;
    }

    /* Requests by tile (counting sort, ascending index within a tile). */
    for (size_t i = 0; i < count; i++)
        tstart[requests[i].tile + 1]++;
    size_t max_n = 0;
    for (size_t t = 0; t < tiles; t++) {
        if (tstart[t + 1] > max_n)
            max_n = tstart[t + 1];
        tstart[t + 1] += tstart[t];
    }
    for (size_t i = 0; i < count; i++)
        ids[tstart[requests[i].tile]++] = (uint32_t)i;
    for (size_t t = tiles; t > 0; t--)
        tstart[t] = tstart[t - 1];
    tstart[0] = 0;

    /* Conflict partners (CSR, by request; duplicates are harmless). */
    for (size_t i = 0; i < conflict_count; i++) {
        adj_start[conflicts[i].a + 1]++;
        adj_start[conflicts[i].b + 1]++;
    }
    uint32_t max_deg = 0;
    for (size_t i = 0; i < count; i++) {
        if (adj_start[i + 1] > max_deg)
            max_deg = adj_start[i + 1];
        adj_start[i + 1] += adj_start[i];
    }
    for (size_t i = 0; i < conflict_count; i++) {
        adj[adj_start[conflicts[i].a]++] = conflicts[i].b;
        adj[adj_start[conflicts[i].b]++] = conflicts[i].a;
    }
    for (size_t i = count; i > 0; i--)
        adj_start[i] = adj_start[i - 1];
    adj_start[0] = 0;

    /* Reserved ranges by tile. */
    size_t nres = sort_reserved(reserved, reserved_count, rkeys, rspan);
    for (size_t i = 0; i < nres; i++)
        rstart[reserved[rkeys[i].index].tile + 1]++;
    for (size_t t = 0; t < tiles; t++)
        rstart[t + 1] += rstart[t];

    keys = ipu_malloc(ctx, (max_n + 1) * sizeof *keys);
    order = ipu_malloc(ctx, (max_n + 1) * sizeof *order);
    placed = ipu_malloc(ctx, (max_n + 1) * sizeof *placed);
    cspan = ipu_malloc(ctx, ((size_t)max_deg + 1) * sizeof *cspan);
    loc = ipu_malloc(ctx, (max_n + 1) * sizeof *loc);
    is_placed = ipu_malloc(ctx, max_n + 1);
    is_promoted = ipu_malloc(ctx, max_n + 1);
    if (!keys || !order || !placed || !cspan || !loc || !is_placed || !is_promoted) {
        st = IPU_NO_MEMORY(ctx);
        goto done;
    }

    place_state s = {
        .p = p,
        .req = requests,
        .adj_start = adj_start,
        .adj = adj,
        .local_of = local_of,
        .acc_lo = (uint64_t)p->sram_base + p->runtime_state_bytes,
        .acc_hi = p->sram_end >= p->inaccessible_tail ? p->sram_end - p->inaccessible_tail : 0,
        .element = p->element_bytes,
        .ap_lo = p->aperture_base,
        .ap_hi = p->aperture_end,
        .loc = loc,
        .is_placed = is_placed,
        .is_promoted = is_promoted,
        .keys = keys,
        .order = order,
        .placed = placed,
        .cspan = cspan,
    };
    for (size_t t = 0; t < tiles && st == IPU_OK; t++) {
        s.ids = &ids[tstart[t]];
        s.n = tstart[t + 1] - tstart[t];
        if (s.n == 0)
            continue;
        s.res = &rspan[rstart[t]];
        s.nres = rstart[t + 1] - rstart[t];
        st = IPU_CHECK_CANCEL(ctx);
        if (st == IPU_OK)
            st = place_tile(ctx, &s, (uint32_t)t);
    }

done:
    for (size_t i = 0; i < count; i++)
        requests[i].size -= requests[i].access_tail;
    free(tstart);
    free(rstart);
    free(ids);
    free(adj_start);
    free(adj);
    free(local_of);
    free(loc);
    free(is_placed);
    free(is_promoted);
    free(rkeys);
    free(rspan);
    free(keys);
    free(order);
    free(placed);
    free(cspan);
    return st;
}
