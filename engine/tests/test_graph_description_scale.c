/* test_graph_description_scale.c: graph descriptions of hostile size.  A
 * chain of copies through 200,000 tensors, listed in a seeded random order,
 * is read (ipu_workload_from_description) with every op's input and output
 * resolved to the position the test put each name at (a million tensors
 * read the same way but take 2 GB and some 10 s here, most of it building
 * and freeing the JSON, so they are measured outside the tests); a smaller
 * one goes through the public ipu_workload_create and reads
 * back with all its tensors.  A description listing more tensors or ops than
 * a graph holds (IPU_IR_MAX_TENSORS, IPU_IR_MAX_OPS) is refused before any
 * of them is read, with a message naming the field, the count and the
 * limit.  A cancel request stops reading: set before the call (while the
 * options text is parsed, or when the reader starts) or from the progress
 * callback at the reader's first report, it gives IPU_ERR_CANCELLED and no
 * workload.  No wall time is asserted (benchmarks measure speed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ipu/ipu.h"
#include "support_seed.h"
#include "workloads/workload.h"

/* A chain t0 (input, given values) -> copy -> t1 -> ... -> t(n-1) (output),
 * the tensors listed in a random order: position[k] is where t<k> is listed. */
static json_t *chain(uint32_t n, uint32_t *position)
{
    uint32_t *listed = malloc(n * sizeof *listed); /* listed[p]: the k of the tensor at position p */
    assert_non_null(listed);
    for (uint32_t k = 0; k < n; k++)
        listed[k] = k;
    for (uint32_t p = n - 1; p > 0; p--) { /* Fisher-Yates */
        uint32_t q = tseed_below(p + 1), k = listed[p];
        listed[p] = listed[q];
        listed[q] = k;
    }
    json_t *tensors = json_array(), *ops = json_array();
    assert_true(tensors && ops);
    char name[32], input[32];
    for (uint32_t p = 0; p < n; p++) {
        uint32_t k = listed[p];
        position[k] = p;
        snprintf(name, sizeof name, "t%u", k);
        json_t *t = json_pack("{s:s, s:i, s:i, s:s, s:i, s:s, s:i}", "name", name, "rows", 2, "cols", 4, "dtype",
                              "f16", "scale", 0, "role",
                              k == 0 ? "input" : k == n - 1 ? "output" : "activation", "sequence", 1);
        assert_non_null(t);
        if (k == 0)
            assert_int_equal(json_object_set_new(t, "values", json_string("given")), 0);
        assert_int_equal(json_array_append_new(tensors, t), 0);
    }
    for (uint32_t k = 1; k < n; k++) {
        snprintf(input, sizeof input, "t%u", k - 1);
        snprintf(name, sizeof name, "t%u", k);
        json_t *op = json_pack("{s:s, s:[s], s:s}", "op", "copy", "inputs", input, "output", name);
        assert_non_null(op);
        assert_int_equal(json_array_append_new(ops, op), 0);
    }
    free(listed);
    json_t *d = json_pack("{s:s, s:i, s:s, s:i, s:{}, s:o, s:o, s:n}", "format", "ipu-e2e-graph", "version", 1,
                          "name", "chain", "seed", 1, "options", "tensors", tensors, "ops", ops, "repeat");
    assert_non_null(d);
    return d;
}

/* Read a chain of n tensors and check every op against where the test put
 * its tensors. */
static void read_chain(uint32_t n)
{
    tseed_reset(n);
    uint32_t *position = malloc(n * sizeof *position);
    assert_non_null(position);
    json_t *d = chain(n, position);
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_from_description(ctx, d, &w));
    const ipu_graph *g = &w->graph;
    if (g->tensor_count != n || g->op_count != n - 1)
        TSEED_FAIL("%u tensors read as %zu tensors and %zu ops", n, g->tensor_count, g->op_count);
    char name[32];
    for (uint32_t k = 0; k < n; k++) {
        snprintf(name, sizeof name, "t%u", k);
        if (strcmp(g->tensors[position[k]].name, name))
            TSEED_FAIL("tensor %u is '%s', expected '%s'", position[k], g->tensors[position[k]].name, name);
    }
    for (uint32_t i = 0; i < n - 1; i++) {
        const ipu_ir_op *op = &g->ops[i];
        if (op->kind != IPU_IR_COPY || op->in[0] != position[i] || op->out != position[i + 1])
            TSEED_FAIL("op %u: kind %d, %u -> %u; expected a copy %u -> %u", i, op->kind, op->in[0], op->out,
                       position[i], position[i + 1]);
    }
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
    json_decref(d);
    free(position);
}

static void test_reads_200000_tensors(void **state)
{
    (void)state;
    read_chain(200000);
}

/* Through the public call: the text parsed, the tensors numbered
 * canonically (the chain's order), every one in the description written
 * back. */
static void test_public_call_reads_all(void **state)
{
    (void)state;
    const uint32_t n = 30000;
    tseed_reset(1);
    uint32_t *position = malloc(n * sizeof *position);
    assert_non_null(position);
    json_t *o = json_pack("{s:s, s:o}", "workload", "graph", "graph", chain(n, position));
    char *text = json_dumps(o, JSON_COMPACT);
    assert_non_null(text);
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, text, &w));
    char *info = NULL;
    TSEED_OK(ctx, ipu_workload_info_json(ctx, w, &info));
    json_t *back = json_loads(info, 0, NULL);
    json_t *tensors = json_object_get(back, "tensors"), *ops = json_object_get(back, "ops");
    assert_int_equal(json_array_size(tensors), n);
    assert_int_equal(json_array_size(ops), n - 1);
    char name[32];
    for (uint32_t k = 0; k < n; k++) { /* canonical order: the order the ops touch them */
        snprintf(name, sizeof name, "t%u", k);
        if (strcmp(json_string_value(json_object_get(json_array_get(tensors, k), "name")), name))
            TSEED_FAIL("tensor %u written back as '%s', expected '%s'", k,
                       json_string_value(json_object_get(json_array_get(tensors, k), "name")), name);
    }
    json_decref(back);
    ipu_free(info);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
    free(text);
    json_decref(o);
    free(position);
}

/* A description whose "tensors" and "ops" arrays have the given lengths
 * (their items are nulls: a count over the limit is refused before any item
 * is looked at). */
static json_t *sized(size_t tensors, size_t ops)
{
    json_t *t = json_array(), *o = json_array();
    assert_true(t && o);
    for (size_t i = 0; i < tensors; i++)
        assert_int_equal(json_array_append_new(t, json_null()), 0);
    for (size_t i = 0; i < ops; i++)
        assert_int_equal(json_array_append_new(o, json_null()), 0);
    json_t *d = json_pack("{s:s, s:i, s:s, s:i, s:{}, s:o, s:o, s:n}", "format", "ipu-e2e-graph", "version", 1,
                          "name", "big", "seed", 1, "options", "tensors", t, "ops", o, "repeat");
    assert_non_null(d);
    return d;
}

static void expect_refused(json_t *d, const char *expected)
{
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    ipu_status status = ipu_workload_from_description(ctx, d, &w);
    if (status != IPU_ERR_INVALID_ARGUMENT || w || !strstr(ipu_ctx_errmsg(ctx), expected))
        TSEED_FAIL("%s, workload %p, message '%s' (expected one with '%s')", ipu_status_name(status), (void *)w,
                   ipu_ctx_errmsg(ctx), expected);
    /* Refused before anything per tensor or op was allocated: the workload
     * itself is the one allocation. */
    if (ipu_ctx_allocations(ctx) > 1)
        TSEED_FAIL("%llu allocations before the refusal", (unsigned long long)ipu_ctx_allocations(ctx));
    ipu_ctx_free(ctx);
    json_decref(d);
}

static void test_counts_over_the_limit_are_refused(void **state)
{
    (void)state;
    /* The limits are 2^20 each (ir.h). */
    assert_int_equal(IPU_IR_MAX_TENSORS, 1048576);
    assert_int_equal(IPU_IR_MAX_OPS, 1048576);
    expect_refused(sized(1048577, 1), "field 'tensors' lists 1048577 tensors, more than the limit of 1048576");
    expect_refused(sized(1, 1048577), "field 'ops' lists 1048577 ops, more than the limit of 1048576");
    /* The same through the public call, from text. */
    size_t n = 1048577;
    const char head[] = "{\"workload\": \"graph\", \"graph\": {\"format\": \"ipu-e2e-graph\", \"version\": 1, "
                        "\"name\": \"big\", \"seed\": 1, \"options\": {}, \"repeat\": null, \"ops\": [null], "
                        "\"tensors\": [";
    char *text = malloc(sizeof head + 5 * n + 8);
    assert_non_null(text);
    char *p = text + sizeof head - 1;
    memcpy(text, head, sizeof head - 1);
    for (size_t i = 0; i < n; i++, p += 5)
        memcpy(p, "null,", 5);
    strcpy(p - 1, "]}}"); /* over the last comma */
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    ipu_status status = ipu_workload_create(ctx, text, &w);
    if (status != IPU_ERR_INVALID_ARGUMENT || w ||
        !strstr(ipu_ctx_errmsg(ctx), "lists 1048577 tensors, more than the limit of 1048576"))
        TSEED_FAIL("%s, message '%s'", ipu_status_name(status), ipu_ctx_errmsg(ctx));
    ipu_ctx_free(ctx);
    free(text);
}

/* Cancel at the first progress report of the reader. */
typedef struct canceller {
    ipu_ctx *ctx;
    int seen;
    uint64_t done, total;
} canceller;

static void cancel_at_first(void *user, const char *stage, uint64_t done, uint64_t total)
{
    canceller *c = user;
    if (strcmp(stage, "graph description"))
        return;
    c->seen++;
    c->done = done;
    c->total = total;
    ipu_ctx_cancel(c->ctx);
}

static void expect_cancelled(ipu_ctx *ctx, ipu_status status, const ipu_workload *w, const char *when)
{
    if (status != IPU_ERR_CANCELLED || w || !strstr(ipu_ctx_errmsg(ctx), "cancelled"))
        TSEED_FAIL("cancelled %s: %s, workload %p, message '%s'", when, ipu_status_name(status), (const void *)w,
                   ipu_ctx_errmsg(ctx));
}

static void test_cancel_stops_reading(void **state)
{
    (void)state;
    const uint32_t n = 50000;
    uint32_t *position = malloc(n * sizeof *position);
    assert_non_null(position);
    tseed_reset(2);
    json_t *d = chain(n, position);
    /* Before the call: the reader does not start. */
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    ipu_ctx_cancel(ctx);
    expect_cancelled(ctx, ipu_workload_from_description(ctx, d, &w), w, "before reading");
    ipu_ctx_free(ctx);
    /* From the progress callback: reading stops at its first report, with
     * tensors and ops still to read. */
    ctx = ipu_ctx_create();
    canceller c = {ctx, 0, 0, 0};
    ipu_ctx_set_progress(ctx, cancel_at_first, &c);
    expect_cancelled(ctx, ipu_workload_from_description(ctx, d, &w), w, "from the progress callback");
    if (c.seen != 1 || c.total != 2 * (uint64_t)n - 1 || c.done == 0 || c.done >= c.total)
        TSEED_FAIL("progress reported %d times, last %llu of %llu (expected once, part of %u)", c.seen,
                   (unsigned long long)c.done, (unsigned long long)c.total, 2 * n - 1);
    ipu_ctx_free(ctx);
    /* Through the public call, cancelled before: the options text is not
     * parsed to its end (its end is not JSON; a finished parse would
     * refuse it as such). */
    json_t *o = json_pack("{s:s, s:o}", "workload", "graph", "graph", d);
    char *text = json_dumps(o, JSON_COMPACT);
    assert_non_null(text);
    size_t length = strlen(text);
    char *broken = malloc(length + 8);
    assert_non_null(broken);
    memcpy(broken, text, length);
    strcpy(broken + length, " trash");
    ctx = ipu_ctx_create();
    assert_int_equal(ipu_workload_create(ctx, broken, &w), IPU_ERR_INVALID_ARGUMENT); /* not cancelled: refused */
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "workload options:"));
    ipu_ctx_cancel(ctx);
    ipu_ctx_clear_error(ctx);
    expect_cancelled(ctx, ipu_workload_create(ctx, broken, &w), w, "before parsing");
    ipu_ctx_free(ctx);
    /* And a valid text cancelled from the reader's progress report. */
    ctx = ipu_ctx_create();
    c = (canceller){ctx, 0, 0, 0};
    ipu_ctx_set_progress(ctx, cancel_at_first, &c);
    expect_cancelled(ctx, ipu_workload_create(ctx, text, &w), w, "from the progress callback, public call");
    assert_int_equal(c.seen, 1);
    ipu_ctx_free(ctx);
    free(broken);
    free(text);
    json_decref(o);
    free(position);
}

int main(void)
{
    tseed_init("test_graph_description_scale");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_200000_tensors),
        cmocka_unit_test(test_public_call_reads_all),
        cmocka_unit_test(test_counts_over_the_limit_are_refused),
        cmocka_unit_test(test_cancel_stops_reading),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
