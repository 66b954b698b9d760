/* test_place.c: checks placement v1 (place/place.h) with a checker written
 * here, independently of place.c: every pair of same-tile requests whose
 * inclusive lifetimes overlap is byte-disjoint, live conflict pairs share no
 * memory element, every address is aligned, inside [lo, hi) and inside the
 * accessible SRAM above the runtime state, and no request touches a reserved
 * range of its tile.  Randomized request sets on 4 tiles (sizes, alignments,
 * lifetimes, ranges, conflicts and reserved ranges; shuffled across tiles)
 * use the seed of support_seed.h (IPU_TEST_SEED or the clock, printed on
 * failure).  Fixed cases check reuse across disjoint lifetimes (the only way
 * to fit), best fit (smallest hole, lowest on ties), the size-order retry,
 * the promotion retry (a case both orders fragment, found by a search),
 * the failure message (tile, name, and free / outside-aperture /
 * largest-hole figures computed here from a byte map), input validation,
 * determinism and a 1472-tile x 300-request program.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "place/place.h"
#include "support_seed.h"

typedef struct pcase {
    ipu_place_request *req;
    size_t n, cap;
    ipu_place_conflict *conf;
    size_t nconf, confcap;
    ipu_place_range *res;
    size_t nres, rescap;
    char (*names)[24];
} pcase;

typedef struct gen_params {
    uint32_t n_min, n_span; /* requests per tile */
    uint32_t size_scale;    /* 1 = light */
    uint32_t horizon, life; /* first < horizon, last - first < life */
} gen_params;

static void *xrealloc(void *p, size_t size)
{
    void *q = realloc(p, size);
    assert_non_null(q);
    return q;
}

static void case_free(pcase *c)
{
    free(c->req);
    free(c->conf);
    free(c->res);
    free(c->names);
    memset(c, 0, sizeof *c);
}

static void add_req(pcase *c, uint32_t tile, uint32_t size, uint32_t align, uint32_t first,
                    uint32_t last, uint32_t lo, uint32_t hi, const char *name)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->req = xrealloc(c->req, c->cap * sizeof *c->req);
        c->names = xrealloc(c->names, c->cap * sizeof *c->names);
    }
    if (name)
        snprintf(c->names[c->n], sizeof c->names[0], "%s", name);
    else
        snprintf(c->names[c->n], sizeof c->names[0], "t%u.r%zu", tile, c->n);
    c->req[c->n] = (ipu_place_request){tile, size, align, first, last, lo, hi, NULL, 0xFFFFFFFFu, 0};
    c->n++;
}

static void add_conf(pcase *c, uint32_t a, uint32_t b)
{
    if (c->nconf == c->confcap) {
        c->confcap = c->confcap ? 2 * c->confcap : 64;
        c->conf = xrealloc(c->conf, c->confcap * sizeof *c->conf);
    }
    c->conf[c->nconf++] = (ipu_place_conflict){a, b};
}

static void add_res(pcase *c, uint32_t tile, uint32_t lo, uint32_t hi)
{
    if (c->nres == c->rescap) {
        c->rescap = c->rescap ? 2 * c->rescap : 64;
        c->res = xrealloc(c->res, c->rescap * sizeof *c->res);
    }
    c->res[c->nres++] = (ipu_place_range){tile, lo, hi};
}

/* Names are pointed to only once the arrays stop moving. */
static void fix_names(pcase *c)
{
    for (size_t i = 0; i < c->n; i++)
        c->req[i].name = c->names[i];
}

static uint32_t acc_lo(const ipu_profile *p) { return p->sram_base + p->runtime_state_bytes; }
static uint32_t acc_hi(const ipu_profile *p) { return p->sram_end - p->inaccessible_tail; }

static int live_overlap(const ipu_place_request *a, const ipu_place_request *b)
{
    return !(a->last < b->first || b->last < a->first);
}

/* The independent checker; fails the test with the seed and a reason. */
static void check(const ipu_profile *p, const pcase *c)
{
    const uint32_t E = p->element_bytes;
    size_t *start = calloc(p->tiles + 1, sizeof *start);
    size_t *rstart = calloc(p->tiles + 1, sizeof *rstart);
    size_t *byt = malloc((c->n + 1) * sizeof *byt);
    size_t *rbyt = malloc((c->nres + 1) * sizeof *rbyt);
    assert_true(start && rstart && byt && rbyt);
    for (size_t i = 0; i < c->n; i++)
        start[c->req[i].tile + 1]++;
    for (size_t i = 0; i < c->nres; i++)
        rstart[c->res[i].tile + 1]++;
    for (uint32_t t = 0; t < p->tiles; t++) {
        start[t + 1] += start[t];
        rstart[t + 1] += rstart[t];
    }
    for (size_t i = 0, k; i < c->n; i++) {
        k = start[c->req[i].tile]++;
        byt[k] = i;
    }
    for (size_t i = 0, k; i < c->nres; i++) {
        k = rstart[c->res[i].tile]++;
        rbyt[k] = i;
    }
    for (uint32_t t = p->tiles; t > 0; t--) {
        start[t] = start[t - 1];
        rstart[t] = rstart[t - 1];
    }
    start[0] = rstart[0] = 0;

    for (size_t i = 0; i < c->n; i++) {
        const ipu_place_request *r = &c->req[i];
        uint64_t a = r->address, e = a + r->size;
        if (a % r->alignment)
            TSEED_FAIL("%s at 0x%llX is not %u-aligned", r->name, (unsigned long long)a,
                       r->alignment);
        if (a < r->lo || e > r->hi)
            TSEED_FAIL("%s [0x%llX, 0x%llX) outside its range [0x%X, 0x%X)", r->name,
                       (unsigned long long)a, (unsigned long long)e, r->lo, r->hi);
        if (a < acc_lo(p) || e > acc_hi(p))
            TSEED_FAIL("%s [0x%llX, 0x%llX) outside accessible SRAM", r->name,
                       (unsigned long long)a, (unsigned long long)e);
        for (size_t k = rstart[r->tile]; k < rstart[r->tile + 1]; k++) {
            const ipu_place_range *g = &c->res[rbyt[k]];
            if (g->lo < g->hi && a < g->hi && g->lo < e)
                TSEED_FAIL("%s [0x%llX, 0x%llX) uses reserved [0x%X, 0x%X) on tile %u",
                           r->name, (unsigned long long)a, (unsigned long long)e, g->lo,
                           g->hi, r->tile);
        }
    }
    for (uint32_t t = 0; t < p->tiles; t++) {
        for (size_t x = start[t]; x < start[t + 1]; x++) {
            const ipu_place_request *a = &c->req[byt[x]];
            for (size_t y = x + 1; y < start[t + 1]; y++) {
                const ipu_place_request *b = &c->req[byt[y]];
                if (live_overlap(a, b) && (uint64_t)a->address < (uint64_t)b->address + b->size &&
                    (uint64_t)b->address < (uint64_t)a->address + a->size)
                    TSEED_FAIL("live %s at 0x%X+%u and %s at 0x%X+%u overlap on tile %u",
                               a->name, a->address, a->size, b->name, b->address, b->size, t);
            }
        }
    }
    for (size_t i = 0; i < c->nconf; i++) {
        const ipu_place_request *a = &c->req[c->conf[i].a], *b = &c->req[c->conf[i].b];
        if (!live_overlap(a, b))
            continue;
        uint64_t a0 = a->address / E, a1 = ((uint64_t)a->address + a->size - 1) / E;
        uint64_t b0 = b->address / E, b1 = ((uint64_t)b->address + b->size - 1) / E;
        if (a0 <= b1 && b0 <= a1)
            TSEED_FAIL("conflicting %s (elements %llu..%llu) and %s (%llu..%llu) share an element",
                       a->name, (unsigned long long)a0, (unsigned long long)a1, b->name,
                       (unsigned long long)b0, (unsigned long long)b1);
    }
    free(start);
    free(rstart);
    free(byt);
    free(rbyt);
}

static uint32_t rand_size(uint32_t scale)
{
    uint32_t k = tseed_below(100);
    if (k < 70)
        return 1 + tseed_below(2048 * scale);
    if (k < 95)
        return 2048 + tseed_below(14336 * scale);
    return 16384 + tseed_below(32768 * scale);
}

/* A random request set over the profile's tiles, shuffled across tiles. */
static void gen_case(const ipu_profile *p, const gen_params *g, pcase *c)
{
    memset(c, 0, sizeof *c);
    uint32_t lo0 = acc_lo(p), hi0 = acc_hi(p);
    for (uint32_t t = 0; t < p->tiles; t++) {
        size_t base = c->n;
        uint32_t n = g->n_min + tseed_below(g->n_span);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t size = rand_size(g->size_scale);
            uint32_t align = tseed_below(20) == 0 ? 4096u : 1u << tseed_below(9);
            uint32_t first = tseed_below(g->horizon);
            uint32_t last = first + tseed_below(g->life);
            uint32_t lo = 0, hi = 0xFFFFFFFFu, k = tseed_below(100);
            if (k < 15) { /* region 1, wide loads */
                lo = p->region1_base;
                hi = p->sram_end;
                align = align < 16 ? 16 : align;
            } else if (k < 30) { /* a 256-320 KiB window */
                uint32_t len = 262144 + tseed_below(65536);
                lo = lo0 - 512 + tseed_below(hi0 - lo0 - len + 1024);
                hi = lo + len;
            } else if (k < 35) {
                lo = lo0;
                hi = hi0;
            }
            add_req(c, t, size, align, first, last, lo, hi, NULL);
        }
        for (uint32_t i = 0; i < n / 5; i++) {
            uint32_t a = tseed_below(n), b = tseed_below(n);
            if (a != b)
                add_conf(c, (uint32_t)base + a, (uint32_t)base + b);
        }
        for (uint32_t i = tseed_below(4); i > 0; i--) {
            uint32_t lo = lo0 - 4096 + tseed_below(hi0 - lo0);
            add_res(c, t, lo, lo + tseed_below(16384));
        }
        if (tseed_below(5) == 0)
            add_res(c, t, p->aperture_base, p->aperture_end);
    }
    /* Shuffle the requests (and remap the conflicts). */
    uint32_t *perm = malloc((c->n + 1) * sizeof *perm), *inv = malloc((c->n + 1) * sizeof *inv);
    assert_true(perm && inv);
    for (size_t i = 0; i < c->n; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = c->n; i > 1; i--) {
        size_t j = tseed_below((uint32_t)i);
        uint32_t tmp = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = tmp;
    }
    ipu_place_request *req = malloc((c->n + 1) * sizeof *req);
    char(*names)[24] = malloc((c->n + 1) * sizeof *names);
    assert_true(req && names);
    for (size_t i = 0; i < c->n; i++) {
        req[i] = c->req[perm[i]];
        memcpy(names[i], c->names[perm[i]], sizeof names[i]);
        inv[perm[i]] = (uint32_t)i;
    }
    for (size_t i = 0; i < c->nconf; i++)
        c->conf[i] = (ipu_place_conflict){inv[c->conf[i].a], inv[c->conf[i].b]};
    free(c->req);
    free(c->names);
    c->req = req;
    c->names = names;
    c->cap = c->n + 1;
    free(perm);
    free(inv);
    fix_names(c);
}

static ipu_status run(ipu_ctx *ctx, const ipu_profile *p, pcase *c)
{
    fix_names(c);
    return ipu_place(ctx, p, c->req, c->n, c->conf, c->nconf, c->res, c->nres);
}

static void profile4(ipu_profile *p)
{
    ipu_profile_default(p);
    p->tiles = 4;
}

static void test_random_light(void **state)
{
    (void)state;
    ipu_profile p;
    profile4(&p);
    const gen_params g = {10, 50, 1, 30, 10};
    tseed_reset(1);
    for (int round = 0; round < 200; round++) {
        ipu_ctx *ctx = ipu_ctx_create();
        pcase c;
        gen_case(&p, &g, &c);
        TSEED_OK(ctx, run(ctx, &p, &c));
        check(&p, &c);
        case_free(&c);
        ipu_ctx_free(ctx);
    }
}

/* Heavy sets may not fit; a result must still be valid, a failure explained. */
static void test_random_heavy(void **state)
{
    (void)state;
    ipu_profile p;
    profile4(&p);
    const gen_params g = {60, 80, 2, 20, 10};
    tseed_reset(2);
    int ok = 0, failed = 0;
    for (int round = 0; round < 60; round++) {
        ipu_ctx *ctx = ipu_ctx_create();
        pcase c;
        gen_case(&p, &g, &c);
        ipu_status st = run(ctx, &p, &c);
        if (st == IPU_OK) {
            check(&p, &c);
            ok++;
        } else {
            failed++;
            const char *msg = ipu_ctx_errmsg(ctx);
            if (st != IPU_ERR_NO_PLAN || !strstr(msg, "placement failed on tile ") ||
                !strstr(msg, "largest hole"))
                TSEED_FAIL("unexpected failure %s: %s", ipu_status_name(st), ipu_ctx_errmsg(ctx));
        }
        case_free(&c);
        ipu_ctx_free(ctx);
    }
    print_message("heavy rounds: %d placed, %d failed\n", ok, failed);
}

/* Two 400,000-byte requests with disjoint lifetimes beside a 200,000-byte
 * one live throughout: 1,000,000 bytes in 636,112 fit only by reuse. */
static void test_reuse(void **state)
{
    (void)state;
    ipu_profile p;
    profile4(&p);
    pcase c = {0};
    add_req(&c, 0, 400000, 64, 0, 1, 0, 0xFFFFFFFFu, "a");
    add_req(&c, 0, 200000, 16, 0, 3, 0, 0xFFFFFFFFu, "c");
    add_req(&c, 0, 400000, 64, 2, 3, 0, 0xFFFFFFFFu, "b");
    assert_true(400000 + 200000 + 400000 > acc_hi(&p) - acc_lo(&p));
    ipu_ctx *ctx = ipu_ctx_create();
    TSEED_OK(ctx, run(ctx, &p, &c));
    check(&p, &c);
    const ipu_place_request *a = &c.req[0], *b = &c.req[2];
    assert_true(a->address < b->address + b->size && b->address < a->address + a->size);
    ipu_ctx_free(ctx);
    case_free(&c);
}

/* A declared access tail belongs to its request: nothing live at the same
 * time may start inside it, while the request's size is reported as given. */
static void test_access_tail(void **state)
{
    (void)state;
    ipu_profile p;
    profile4(&p);
    pcase c = {0};
    uint32_t room = (uint32_t)(acc_hi(&p) - acc_lo(&p));
    /* Two requests that fit exactly when the tail is ignored, not with it. */
    add_req(&c, 1, room / 2, 8, 0, 5, 0, 0xFFFFFFFFu, "with-tail");
    add_req(&c, 1, room / 2, 8, 0, 5, 0, 0xFFFFFFFFu, "neighbour");
    c.req[0].access_tail = 64;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_int_equal(run(ctx, &p, &c), IPU_ERR_NO_PLAN);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "placement failed on tile 1"));
    ipu_ctx_clear_error(ctx);
    /* With room for the tail, the neighbour stays clear of it. */
    c.req[1].size = room / 2 - 64;
    TSEED_OK(ctx, run(ctx, &p, &c));
    assert_int_equal(c.req[0].size, room / 2);
    const ipu_place_request *a = &c.req[0], *b = &c.req[1];
    uint64_t a_end = (uint64_t)a->address + a->size + a->access_tail;
    assert_true(b->address >= a_end || (uint64_t)b->address + b->size <= a->address);
    ipu_ctx_free(ctx);
    case_free(&c);
}

/* Best fit: the smallest hole that fits at the alignment, lowest on ties. */
static void test_best_fit(void **state)
{
    (void)state;
    ipu_profile p;
    profile4(&p);
    uint32_t w = p.region1_base; /* holes [w, w+1000) and [w+1100, w+1300) */
    pcase c = {0};
    add_req(&c, 0, 150, 1, 0, 0, w, w + 2000, "small");
    add_req(&c, 0, 150, 64, 1, 1, w, w + 2000, "aligned"); /* w+1152+150 > w+1300 */
    add_req(&c, 0, 1000, 1, 2, 2, w, w + 2000, "exact");
    add_req(&c, 3, 50, 1, 0, 0, w, w + 300, "tie"); /* holes [w, w+100), [w+200, w+300) */
    add_res(&c, 0, w + 1000, w + 1100);
    add_res(&c, 0, w + 1300, w + 2000);
    add_res(&c, 3, w + 100, w + 200);
    ipu_ctx *ctx = ipu_ctx_create();
    TSEED_OK(ctx, run(ctx, &p, &c));
    check(&p, &c);
    assert_int_equal(c.req[0].address, w + 1100);
    assert_int_equal(c.req[1].address, w);
    assert_int_equal(c.req[2].address, w);
    assert_int_equal(c.req[3].address, w);
    ipu_ctx_free(ctx);
    case_free(&c);
}

static void log_capture(void *user, int level, const char *message)
{
    (void)level;
    char *buf = user;
    snprintf(buf, 1024, "%s", message);
}

/* Place case c (then free it): it must place, and the debug log must name
 * the strategy that placed the tile and the request lifetime order failed at. */
static void expect_retry(const ipu_profile *p, pcase *c, const char *strategy, const char *failed)
{
    char logged[1024] = "";
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_ctx_set_log(ctx, log_capture, logged);
    TSEED_OK(ctx, run(ctx, p, c));
    check(p, c);
    assert_non_null(strstr(logged, strategy));
    assert_non_null(strstr(logged, failed));
    ipu_ctx_free(ctx);
    case_free(c);
}

/* Lifetime order fragments a 100-byte window (a at 0, b at 40, then c needs
 * 60 contiguous bytes beside b); size order places c first and succeeds. */
static void test_size_order_retry(void **state)
{
    (void)state;
    ipu_profile p;
    profile4(&p);
    uint32_t w = p.region1_base;
    pcase c = {0};
    add_req(&c, 1, 40, 1, 0, 0, w, w + 100, "a");
    add_req(&c, 1, 20, 1, 0, 5, w, w + 100, "b");
    add_req(&c, 1, 60, 1, 1, 5, w, w + 100, "c");
    expect_retry(&p, &c, "size order placed the tile", "'c'");
}

/* A 100-byte window both orders fragment: lifetime order and size order
 * each leave no 20 contiguous bytes for "tail" at step 4 (beside "wide" and
 * "late", 100 bytes in all); promoting "tail", then "wide" (the request the
 * next round fails at), places the tile. */
static void test_promotion_retry(void **state)
{
    (void)state;
    ipu_profile p;
    profile4(&p);
    uint32_t w = p.region1_base;
    pcase c = {0};
    add_req(&c, 1, 20, 1, 4, 5, w, w + 100, "tail");
    add_req(&c, 1, 40, 1, 4, 4, w, w + 100, "late");
    add_req(&c, 1, 30, 1, 2, 3, w, w + 100, "middle");
    add_req(&c, 1, 50, 1, 1, 1, w, w + 100, "early");
    add_req(&c, 1, 40, 1, 1, 4, w, w + 100, "wide");
    expect_retry(&p, &c, "promoting the failed requests placed the tile", "'tail'");
}

/* Free bytes, free bytes outside the aperture and the largest hole, from a
 * byte map of accessible SRAM clipped to [lo, hi). */
static void figures(const ipu_profile *p, const uint8_t *used, uint32_t lo, uint32_t hi,
                    unsigned long long *free_bytes, unsigned long long *outside,
                    unsigned long long *largest)
{
    unsigned long long run_len = 0;
    *free_bytes = *outside = *largest = 0;
    for (uint32_t a = acc_lo(p); a < acc_hi(p); a++) {
        if (a >= lo && a < hi && !used[a]) {
            (*free_bytes)++;
            *outside += a < p->aperture_base || a >= p->aperture_end;
            if (++run_len > *largest)
                *largest = run_len;
        } else {
            run_len = 0;
        }
    }
}

static void test_failure_message(void **state)
{
    (void)state;
    ipu_profile p;
    profile4(&p);
    pcase c = {0};
    add_req(&c, 2, 4096, 4096, 0, 2, 0x90000, 0x91000, "pin");   /* live, pinned */
    add_req(&c, 2, 16, 16, 0, 3, 0xD0000, 0xD0010, "pinc");      /* live conflict */
    add_req(&c, 2, 100000, 8, 10, 12, 0, 0xFFFFFFFFu, "later");  /* not live */
    add_req(&c, 1, 200000, 8, 0, 12, 0, 0xFFFFFFFFu, "other");   /* other tile */
    add_req(&c, 2, 300000, 64, 1, 5, 0, 0xFFFFFFFFu, "big");
    add_conf(&c, 4, 1);
    add_res(&c, 2, 0x60000, 0x64000);
    add_res(&c, 2, 0xA0000, 0xA8000);
    add_res(&c, 2, 0xC0000, 0xC0100);
    add_res(&c, 3, 0x64000, 0xA0000);

    uint8_t *used = calloc(p.sram_end, 1);
    assert_non_null(used);
    for (size_t i = 0; i < c.nres; i++)
        if (c.res[i].tile == 2)
            memset(used + c.res[i].lo, 1, c.res[i].hi - c.res[i].lo);
    memset(used + 0x90000, 1, 4096);
    memset(used + 0xD0000, 1, p.element_bytes); /* pinc's whole element */
    unsigned long long fb, out, big;
    figures(&p, used, 0, 0xFFFFFFFFu, &fb, &out, &big);
    assert_true(big < 300000 && fb > 300000);
    free(used);

    ipu_ctx *ctx = ipu_ctx_create();
    for (size_t i = 0; i < c.n; i++)
        c.req[i].address = 0;
    assert_int_equal(run(ctx, &p, &c), IPU_ERR_NO_PLAN);
    const char *msg = ipu_ctx_errmsg(ctx);
    char want[5][128];
    snprintf(want[0], sizeof want[0], "%llu bytes free", fb);
    snprintf(want[1], sizeof want[1], "(%llu outside the host aperture", out);
    snprintf(want[2], sizeof want[2], "largest hole %llu;", big);
    snprintf(want[3], sizeof want[3], "size order: failed at request 4 'big'");
    snprintf(want[4], sizeof want[4], "promoting failed requests first (1 rounds): failed at request 4 'big'");
    if (!strstr(msg, "tile 2:") || !strstr(msg, "request 4 'big' (size 300000, alignment 64, "
                                                "lifetime [1, 5]"))
        TSEED_FAIL("message lacks the tile or request: %s", msg);
    for (int i = 0; i < 5; i++)
        if (!strstr(msg, want[i]))
            TSEED_FAIL("message lacks \"%s\": %s", want[i], msg);
    /* The request that did not fit is marked, and only it. */
    for (size_t i = 0; i < c.n; i++)
        assert_true((c.req[i].address == IPU_PLACE_UNPLACED) == (i == 4));
    ipu_ctx_free(ctx);
    case_free(&c);
}

static void expect_invalid(const ipu_profile *p, pcase *c, const char *needle)
{
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_status st = run(ctx, p, c);
    if (st != IPU_ERR_INVALID_ARGUMENT || !strstr(ipu_ctx_errmsg(ctx), needle))
        fail_msg("expected invalid argument naming \"%s\", got %s: %s", needle,
                 ipu_status_name(st), ipu_ctx_errmsg(ctx));
    ipu_ctx_free(ctx);
}

static void test_validation(void **state)
{
    (void)state;
    ipu_profile p;
    profile4(&p);
    pcase c = {0};
    add_req(&c, 0, 64, 8, 0, 1, 0, 0xFFFFFFFFu, "x");
    add_req(&c, 0, 64, 8, 0, 1, 0, 0xFFFFFFFFu, "y");
    add_req(&c, 1, 64, 8, 0, 1, 0, 0xFFFFFFFFu, "z");
    ipu_ctx *ctx = ipu_ctx_create();
    TSEED_OK(ctx, run(ctx, &p, &c));
    ipu_ctx_free(ctx);
    ipu_place_request good = c.req[1];
    c.req[1].tile = 4;
    expect_invalid(&p, &c, "request 1 'y': tile out of range");
    c.req[1] = good;
    c.req[1].size = 0;
    expect_invalid(&p, &c, "request 1 'y': size is 0");
    c.req[1] = good;
    c.req[1].alignment = 12;
    expect_invalid(&p, &c, "request 1 'y': alignment");
    c.req[1].alignment = 0;
    expect_invalid(&p, &c, "request 1 'y': alignment");
    c.req[1] = good;
    c.req[1].first = 2;
    expect_invalid(&p, &c, "request 1 'y': lifetime");
    c.req[1] = good;
    c.req[1].lo = c.req[1].hi;
    expect_invalid(&p, &c, "request 1 'y': empty allowed range");
    c.req[1] = good;
    add_conf(&c, 0, 2);
    expect_invalid(&p, &c, "conflict 0: request 0 'x' (tile 0) and request 2 'z'");
    c.conf[0] = (ipu_place_conflict){1, 7};
    expect_invalid(&p, &c, "conflict 0: request 1 or 7 out of range");
    c.conf[0] = (ipu_place_conflict){1, 1};
    expect_invalid(&p, &c, "conflict 0: request 1 conflicts with itself");
    c.nconf = 0;
    add_res(&c, 4, 0x80000, 0x80010);
    expect_invalid(&p, &c, "reserved range 0");
    case_free(&c);
}

static void test_determinism(void **state)
{
    (void)state;
    ipu_profile p;
    profile4(&p);
    const gen_params g = {40, 80, 2, 25, 10};
    tseed_reset(3);
    for (int round = 0; round < 10; round++) {
        pcase c;
        gen_case(&p, &g, &c);
        ipu_ctx *ctx1 = ipu_ctx_create(), *ctx2 = ipu_ctx_create();
        ipu_status s1 = run(ctx1, &p, &c);
        uint32_t *first = malloc(c.n * sizeof *first);
        assert_non_null(first);
        for (size_t i = 0; i < c.n; i++) {
            first[i] = c.req[i].address;
            c.req[i].address = 0;
        }
        ipu_status s2 = run(ctx2, &p, &c);
        assert_int_equal(s1, s2);
        if (s1 == IPU_OK) {
            for (size_t i = 0; i < c.n; i++)
                if (first[i] != c.req[i].address)
                    TSEED_FAIL("%s: 0x%X then 0x%X", c.req[i].name, first[i], c.req[i].address);
        } else {
            assert_string_equal(ipu_ctx_errmsg(ctx1), ipu_ctx_errmsg(ctx2));
        }
        free(first);
        ipu_ctx_free(ctx1);
        ipu_ctx_free(ctx2);
        case_free(&c);
    }
}

static void test_full_device(void **state)
{
    (void)state;
    ipu_profile p;
    ipu_profile_default(&p);
    const gen_params g = {300, 1, 1, 200, 8};
    tseed_reset(4);
    pcase c;
    gen_case(&p, &g, &c);
    assert_int_equal(c.n, (size_t)p.tiles * 300);
    ipu_ctx *ctx = ipu_ctx_create();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    TSEED_OK(ctx, run(ctx, &p, &c));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print_message("placed %zu requests (%zu conflicts) on %u tiles in %.3f s\n", c.n, c.nconf,
                  p.tiles,
                  (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    check(&p, &c);
    ipu_ctx_free(ctx);
    case_free(&c);
}

int main(void)
{
    tseed_init("test_place");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_light),    cmocka_unit_test(test_random_heavy),
        cmocka_unit_test(test_reuse),           cmocka_unit_test(test_best_fit),
        cmocka_unit_test(test_access_tail),
        cmocka_unit_test(test_size_order_retry),
        cmocka_unit_test(test_promotion_retry),
        cmocka_unit_test(test_failure_message), cmocka_unit_test(test_validation),
        cmocka_unit_test(test_determinism),     cmocka_unit_test(test_full_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
