/* test_exchange_device.c: positive exchange semantics on a 16-tile device
 * with exchange tables written by hand (DEVICE.md "Exchange"): unicast,
 * multicast (three receivers selecting one sender window), receives selecting
 * a prefix, a middle and a suffix of a longer send, paired 64-bit transfers by
 * both tiles of a supertile pair, OUTGOING_BASE relative sends around
 * SET_BASE and RESET_BASE (and a relative send on a tile whose base was never
 * set), and a Repeat whose TABLE patch moves a send's source, whose
 * PROGRESSION patches move receive destinations and a SET_BASE row per
 * iteration.  Every tile holds random source bytes (package data) and a guard
 * pattern over its destination area; after the run each destination area must
 * equal the guard with exactly the expected windows copied in, computed here
 * from the source bytes.  Each exchange step's cost must be DEVICE.md's
 * horizon (last send cycle + words + latency 16) + 100, computed here from the
 * rows, and its total compute + sync 150 + exchange.  A second invocation
 * must give the same report and bytes.  Seed: IPU_TEST_SEED or the clock.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipu/ipu.h"
#include "package/package.h"

#include "support_seed.h"

#define PROFILE_JSON "{\"name\":\"c600-16\",\"tiles\":16}"
#define TILES 16u
#define CODE_BASE 0x4C700u
#define DESC_BASE 0x58000u
#define DESC_LIMIT 0x60000u
#define SRC 0x60000u /* region 0: each tile's source bytes */
#define SRC_BYTES 2048u
#define DST 0x80000u /* region 1: each tile's destination area (guarded) */
#define DST_BYTES 4096u
#define CASE_DST(c) (DST + 512u * (c))
#define GUARD 0xEEu
#define LATENCY 16u
#define OVERHEAD 100u
#define ITERATIONS 4u
#define CASES 6
#define MAX_ROWS 8

static void store32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* One phase: a table per tile, its schedule horizon, what it must deliver. */
typedef struct xtable {
    uint32_t rows;
    uint8_t bytes[4 + MAX_ROWS * 16];
} xtable;

typedef struct xcase {
    xtable t[TILES];
    uint64_t horizon; /* max over sends of cycle + words + latency */
} xcase;

typedef struct expect {
    uint32_t tile, dst, from, src, bytes;
} expect;

static xcase g_cases[CASES];
static expect g_expect[64];
static int g_expects;
static uint8_t g_src[TILES][SRC_BYTES];

/* Append a row; returns its index in the tile's table. */
static uint32_t row(xcase *c, uint32_t tile, uint32_t op, uint32_t flags, uint32_t peer,
                    uint32_t cycle, uint32_t words, uint32_t address)
{
    xtable *t = &c->t[tile];
    assert_true(t->rows < MAX_ROWS);
    uint8_t *r = t->bytes + 4 + 16 * t->rows;
    store32(r, op | flags << 8 | peer << 16);
    store32(r + 4, cycle);
    store32(r + 8, words);
    store32(r + 12, address);
    if (op == IPU_XROW_SEND && (uint64_t)cycle + words + LATENCY > c->horizon)
        c->horizon = (uint64_t)cycle + words + LATENCY;
    return t->rows++;
}

static uint32_t send(xcase *c, uint32_t tile, uint32_t flags, uint32_t cycle, uint32_t words,
                     uint32_t address)
{
    return row(c, tile, IPU_XROW_SEND, flags, 0, cycle, words, address);
}

static uint32_t recv(xcase *c, uint32_t tile, uint32_t from, uint32_t flags, uint32_t cycle,
                     uint32_t words, uint32_t address)
{
    return row(c, tile, IPU_XROW_RECV, flags, from, cycle, words, address);
}

static void expect_bytes(uint32_t tile, uint32_t dst, uint32_t from, uint32_t src, uint32_t bytes)
{
    assert_true(g_expects < 64);
    g_expect[g_expects++] = (expect){tile, dst, from, src, bytes};
}

/* The five single-phase cases. */
static void define_phases(void)
{
    xcase *c = &g_cases[0]; /* unicast: two independent pairs */
    send(c, 0, 0, 0, 8, SRC);
    recv(c, 5, 0, 0, 0 + LATENCY, 8, CASE_DST(0));
    expect_bytes(5, CASE_DST(0), 0, SRC, 32);
    send(c, 3, 0, 10, 5, SRC + 64);
    recv(c, 1, 3, 0, 10 + LATENCY, 5, CASE_DST(0) + 64);
    expect_bytes(1, CASE_DST(0) + 64, 3, SRC + 64, 20);

    c = &g_cases[1]; /* multicast: three receivers select one window */
    send(c, 2, 0, 4, 12, SRC + 128);
    for (uint32_t r = 0; r < 3; r++) {
        recv(c, 7 + r, 2, 0, 4 + LATENCY, 12, CASE_DST(1) + 64 * r + 8);
        expect_bytes(7 + r, CASE_DST(1) + 64 * r + 8, 2, SRC + 128, 48);
    }

    c = &g_cases[2]; /* sub-windows of a 20-word send: middle, prefix, suffix */
    send(c, 4, 0, 0, 20, SRC + 256);
    recv(c, 6, 4, 0, LATENCY + 5, 7, CASE_DST(2));
    expect_bytes(6, CASE_DST(2), 4, SRC + 256 + 20, 28);
    recv(c, 10, 4, 0, LATENCY, 3, CASE_DST(2) + 64);
    expect_bytes(10, CASE_DST(2) + 64, 4, SRC + 256, 12);
    recv(c, 11, 4, 0, LATENCY + 17, 3, CASE_DST(2) + 128);
    expect_bytes(11, CASE_DST(2) + 128, 4, SRC + 256 + 68, 12);

    c = &g_cases[3]; /* paired 64-bit: both tiles of pairs (10,11) and (12,13) */
    send(c, 10, IPU_XFLAG_PAIRED, 0, 6, SRC + 512);
    recv(c, 12, 10, IPU_XFLAG_PAIRED, LATENCY, 6, CASE_DST(3));
    expect_bytes(12, CASE_DST(3), 10, SRC + 512, 48);
    send(c, 11, IPU_XFLAG_PAIRED, 6, 4, SRC + 600);
    recv(c, 13, 11, IPU_XFLAG_PAIRED, 6 + LATENCY, 4, CASE_DST(3) + 64);
    expect_bytes(13, CASE_DST(3) + 64, 11, SRC + 600, 32);

    c = &g_cases[4]; /* OUTGOING_BASE: set, relative and absolute sends, reset */
    row(c, 14, IPU_XROW_SET_BASE, 0, 0, 0, 0, SRC + 768);
    send(c, 14, IPU_XFLAG_RELATIVE, 0, 4, 16);
    send(c, 14, 0, 4, 2, SRC + 900);
    row(c, 14, IPU_XROW_RESET_BASE, 0, 0, 0, 0, 0);
    send(c, 14, IPU_XFLAG_RELATIVE, 6, 3, SRC + 960);
    recv(c, 15, 14, 0, LATENCY, 4, CASE_DST(4));
    recv(c, 15, 14, 0, 4 + LATENCY, 2, CASE_DST(4) + 32);
    recv(c, 15, 14, 0, 6 + LATENCY, 3, CASE_DST(4) + 64);
    expect_bytes(15, CASE_DST(4), 14, SRC + 784, 16);
    expect_bytes(15, CASE_DST(4) + 32, 14, SRC + 900, 8);
    expect_bytes(15, CASE_DST(4) + 64, 14, SRC + 960, 12);
    /* Tile 0 never set its base: a relative send is absolute. */
    send(c, 0, IPU_XFLAG_RELATIVE, 0, 2, SRC + 40);
    recv(c, 1, 0, 0, LATENCY, 2, CASE_DST(4) + 128);
    expect_bytes(1, CASE_DST(4) + 128, 0, SRC + 40, 8);
}

/* A patch list of one entry (kind, target, a, b) into the tile's slot. */
static void put_patch(ipu_ctx *ctx, ipu_pkg_builder *b, uint32_t tile, uint32_t slot, uint32_t kind,
                      uint32_t target, uint32_t a, uint32_t bb)
{
    const uint32_t words[] = {1, kind, target, a, bb};
    uint8_t list[sizeof words];
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        store32(list + 4 * i, words[i]);
    TSEED_OK(ctx, ipu_pkg_put_slot(b, tile, slot, list, sizeof list, NULL));
}

/* The case's tables (row count first) into slot on every tile that has rows;
 * table (unless NULL) gets each one's address. */
static void put_tables(ipu_ctx *ctx, ipu_pkg_builder *b, xcase *c, uint32_t slot, uint32_t *table)
{
    for (uint32_t t = 0; t < TILES; t++) {
        xtable *x = &c->t[t];
        if (!x->rows)
            continue;
        store32(x->bytes, x->rows);
        TSEED_OK(ctx, ipu_pkg_put_slot(b, t, slot, x->bytes, 4 + 16 * x->rows,
                                             table ? &table[t] : NULL));
    }
}

/* Address of word 3 (the address) of row r of a table placed at table. */
static uint32_t row_address_word(uint32_t table, uint32_t r) { return table + 4 + 16 * r + 12; }

/* The Repeat case: tables, patch lists, expectations. */
static void define_repeat(ipu_ctx *ctx, ipu_pkg_builder *b, uint32_t xslot, uint32_t pslot)
{
    static const uint32_t perm[ITERATIONS] = {2, 0, 3, 1};
    xcase *c = &g_cases[5];
    const uint32_t d = CASE_DST(5);
    uint32_t send_row = send(c, 1, 0, 0, 6, SRC + 1024 + perm[0] * 24);
    uint32_t r2 = recv(c, 2, 1, 0, LATENCY, 6, d);
    uint32_t r3 = recv(c, 3, 1, 0, LATENCY + 2, 4, d + 256);
    uint32_t base_row = row(c, 4, IPU_XROW_SET_BASE, 0, 0, 0, 0, SRC + 1200);
    send(c, 4, IPU_XFLAG_RELATIVE, 8, 3, 0);
    row(c, 4, IPU_XROW_RESET_BASE, 0, 0, 0, 0, 0);
    uint32_t r5 = recv(c, 5, 4, 0, 8 + LATENCY, 3, d + 384);
    for (uint32_t it = 0; it < ITERATIONS; it++) {
        uint32_t src = SRC + 1024 + perm[it] * 24;
        expect_bytes(2, d + 24 * it, 1, src, 24);
        expect_bytes(3, d + 256 + 16 * it, 1, src + 8, 16);
        expect_bytes(5, d + 384 + 12 * it, 4, SRC + 1200 + 12 * it, 12);
    }
    uint32_t table[TILES] = {0};
    put_tables(ctx, b, c, xslot, table);
    uint8_t sources[4 * ITERATIONS];
    for (uint32_t it = 0; it < ITERATIONS; it++)
        store32(sources + 4 * it, SRC + 1024 + perm[it] * 24);
    uint32_t sources_at;
    TSEED_OK(ctx, ipu_pkg_put(b, 1, sources, sizeof sources, &sources_at));
    put_patch(ctx, b, 1, pslot, IPU_PATCH_TABLE, row_address_word(table[1], send_row), sources_at,
              ITERATIONS);
    put_patch(ctx, b, 2, pslot, IPU_PATCH_PROGRESSION, row_address_word(table[2], r2), d, 24);
    put_patch(ctx, b, 3, pslot, IPU_PATCH_PROGRESSION, row_address_word(table[3], r3), d + 256, 16);
    put_patch(ctx, b, 4, pslot, IPU_PATCH_PROGRESSION, row_address_word(table[4], base_row),
              SRC + 1200, 12);
    put_patch(ctx, b, 5, pslot, IPU_PATCH_PROGRESSION, row_address_word(table[5], r5), d + 384, 12);
}

static ipu_package *build(ipu_ctx *ctx, uint32_t op_case[16])
{
    ipu_profile p;
    TSEED_OK(ctx, ipu_profile_parse(ctx, PROFILE_JSON, 0, &p));
    ipu_pkg_builder *b = NULL;
    TSEED_OK(ctx, ipu_pkg_builder_create(ctx, &p, CODE_BASE, DESC_BASE, DESC_LIMIT, &b));
    uint8_t guard[DST_BYTES];
    memset(guard, GUARD, sizeof guard);
    for (uint32_t t = 0; t < TILES; t++) {
        for (uint32_t i = 0; i < SRC_BYTES; i++)
            g_src[t][i] = (uint8_t)tseed_rnd();
        TSEED_OK(ctx, ipu_pkg_add_data(b, t, SRC, g_src[t], SRC_BYTES));
        TSEED_OK(ctx, ipu_pkg_add_data(b, t, DST, guard, DST_BYTES));
        TSEED_OK(ctx, ipu_pkg_add_alloc(b, t, SRC, SRC_BYTES, "sources"));
        TSEED_OK(ctx, ipu_pkg_add_alloc(b, t, DST, DST_BYTES, "destinations"));
    }
    define_phases();
    for (int k = 0; k < CASES - 1; k++) {
        uint32_t slot = ipu_pkg_new_slot(b);
        put_tables(ctx, b, &g_cases[k], slot, NULL);
        op_case[ipu_pkg_program_length(b, 0)] = (uint32_t)k;
        TSEED_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, slot, 0));
    }
    uint32_t xslot = ipu_pkg_new_slot(b), pslot = ipu_pkg_new_slot(b);
    define_repeat(ctx, b, xslot, pslot);
    TSEED_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, ITERATIONS, 1, pslot));
    op_case[ipu_pkg_program_length(b, 0)] = CASES - 1;
    TSEED_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, xslot, 0));
    ipu_package *pkg = NULL;
    TSEED_OK(ctx, ipu_pkg_build(b, &pkg));
    return pkg;
}

static json_int_t field(json_t *step, const char *name)
{
    json_t *v = json_object_get(step, name);
    if (!json_is_integer(v))
        TSEED_FAIL("cycle report step has no integer '%s'", name);
    return json_integer_value(v);
}

static void check_report(const char *text, const uint32_t op_case[16])
{
    json_t *report = json_loads(text, 0, NULL);
    assert_non_null(report);
    json_t *steps = json_object_get(report, "steps"), *step;
    size_t index;
    int exchanges = 0, patches = 0;
    json_int_t total = 0;
    json_array_foreach(steps, index, step) {
        const char *kind = json_string_value(json_object_get(step, "kind"));
        total += field(step, "cycles");
        if (kind && strcmp(kind, "patch") == 0) {
            patches++;
            continue;
        }
        if (!kind || strcmp(kind, "step") != 0)
            TSEED_FAIL("step %zu has kind '%s', expected an exchange step", index,
                       kind ? kind : "?");
        json_int_t op = field(step, "op");
        assert_true(op >= 0 && op < 16 && op_case[op] < CASES);
        const xcase *c = &g_cases[op_case[op]];
        json_int_t exchange = field(step, "exchange");
        if ((uint64_t)exchange != c->horizon + OVERHEAD)
            TSEED_FAIL("case %u (op %lld): exchange cost %lld, DEVICE.md says %llu + %u",
                       op_case[op], (long long)op, (long long)exchange,
                       (unsigned long long)c->horizon, OVERHEAD);
        assert_int_equal(field(step, "compute"), 0);
        assert_int_equal(field(step, "sync"), 150);
        assert_int_equal(field(step, "cycles"),
                         field(step, "compute") + field(step, "sync") + exchange);
        exchanges++;
    }
    assert_int_equal(exchanges, CASES - 1 + ITERATIONS);
    assert_int_equal(patches, ITERATIONS);
    assert_int_equal(field(report, "cycles"), total);
    json_decref(report);
}

static void check_memory(ipu_ctx *ctx, ipu_device *dev)
{
    static uint8_t want[DST_BYTES], got[DST_BYTES];
    for (uint32_t t = 0; t < TILES; t++) {
        memset(want, GUARD, sizeof want);
        for (int e = 0; e < g_expects; e++) {
            const expect *x = &g_expect[e];
            if (x->tile == t)
                memcpy(want + (x->dst - DST), &g_src[x->from][x->src - SRC], x->bytes);
        }
        TSEED_OK(ctx, ipu_device_read(ctx, dev, t, DST, got, DST_BYTES));
        for (uint32_t i = 0; i < DST_BYTES; i++)
            if (got[i] != want[i])
                TSEED_FAIL("tile %u destination byte 0x%X: got 0x%02X, want 0x%02X", t, DST + i,
                           got[i], want[i]);
        /* The sources must be untouched. */
        uint8_t src[SRC_BYTES];
        TSEED_OK(ctx, ipu_device_read(ctx, dev, t, SRC, src, SRC_BYTES));
        if (memcmp(src, g_src[t], SRC_BYTES) != 0)
            TSEED_FAIL("tile %u: source bytes changed", t);
    }
}

static void test_exchange_semantics(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    uint32_t op_case[16];
    memset(op_case, 0xFF, sizeof op_case);
    ipu_package *pkg = build(ctx, op_case);
    ipu_device *dev = NULL;
    TSEED_OK(ctx, ipu_device_create(ctx, PROFILE_JSON, &dev));
    TSEED_OK(ctx, ipu_device_initialize(ctx, dev, pkg));
    char *first = NULL, *second = NULL;
    TSEED_OK(ctx, ipu_device_run(ctx, dev, &first));
    check_report(first, op_case);
    check_memory(ctx, dev);
    /* A second invocation: the patches re-apply from iteration 0. */
    TSEED_OK(ctx, ipu_device_run(ctx, dev, &second));
    assert_string_equal(first, second);
    check_memory(ctx, dev);
    ipu_free(first);
    ipu_free(second);
    ipu_device_free(dev);
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_exchange_device");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exchange_semantics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
