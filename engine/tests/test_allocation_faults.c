/* test_allocation_faults.c: the device's allocation checks (DEVICE.md
 * "Allocations and lifetimes"), each provoked by a small hand-built package
 * on the 16-tile profile that declares an allocation table and a compiler op
 * per phase.  Tile T faults while tile 2 runs a clean program in the same
 * step.  Each test asserts the fault's kind, tile and address range computed
 * here from the addresses and lifetimes the test chose, the compiler op, and
 * the allocations the fault names (the operand's own and the one it reached,
 * or the two of an element conflict; the owner named is always one live at
 * the fault's phase, else none, with an ended one named apart as the nearest
 * in time):
 *   - operand_outside_allocation: a kernel operand running past its
 *     allocation into a neighbour, an exchange send doing the same, a write
 *     into an allocation whose life ended, an access in no allocation;
 *   - stale_read: bytes written during an earlier allocation's life read by
 *     the one that reuses them; a partial slot written in the first Repeat
 *     iteration only and read in the second (directly, and as the source of
 *     an exchange phase that the first iteration kept for replay);
 *   - uninitialized_read and element_conflict naming their allocations.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_packages.h"

#include "ipu/ipu.h"

#define TILES 16u
#define T 5u     /* the faulting tile */
#define CLEAN 2u /* a tile that runs a clean copy in every compute phase */

typedef struct fx {
    ipu_ctx *ctx;
    ipu_profile p;
    uint32_t X, Y, Z; /* region-0 addresses, each at the start of its own element */
    json_t *fault;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->ctx = tpkg_context();
    tpkg_profile(f->ctx, TILES, &f->p);
    tpkg_elements(&f->p, &f->X, &f->Y, &f->Z);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    json_decref(f->fault);
    ipu_ctx_free(f->ctx);
    free(f);
    return 0;
}

/* An allocation living from phase first to last (IPU_LIFE_FOREVER: for ever),
 * made by compiler op 0. */
static void alloc(fx *f, ipu_pkg_builder *b, uint32_t tile, uint32_t address, uint32_t size,
                  const char *name, uint32_t first, uint32_t last)
{
    ipu_pkg_alloc_def def = {tile, address, size, name, "tensor", first, last, 0, IPU_ALLOC_ACTIVATION, ""};
    TPKG_OK(f->ctx, ipu_pkg_define_alloc(b, &def));
}

/* A builder with compiler ops 0 "matmul block_out" and 1 "add residual",
 * and tile CLEAN's clean copy X -> Y in compute slot (its allocations for
 * ever). */
static ipu_pkg_builder *builder(fx *f, uint32_t slot_count, uint32_t *slots)
{
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    TPKG_OK(f->ctx, ipu_pkg_add_compiler_op(b, "matmul", "block_out"));
    TPKG_OK(f->ctx, ipu_pkg_add_compiler_op(b, "add", "residual"));
    for (uint32_t i = 0; i < slot_count; i++)
        slots[i] = ipu_pkg_new_slot(b);
    tpkg_data(b, CLEAN, f->X, 64, 1);
    tpkg_kernel copy = tpkg_copy(f->X, f->Y, 64);
    tpkg_compute_list(b, CLEAN, slots[0], &copy, 1, 1);
    alloc(f, b, CLEAN, f->X, 64, "clean/x", 0, IPU_LIFE_FOREVER);
    alloc(f, b, CLEAN, f->Y, 64, "clean/y", 0, IPU_LIFE_FOREVER);
    return b;
}

/* A main-program step whose phases lower compiler ops compute and exchange. */
static void step(fx *f, ipu_pkg_builder *b, uint32_t compute_slot, uint32_t exchange_slot,
                 uint32_t compute_op, uint32_t exchange_op)
{
    ipu_pkg_set_origin(b, compute_op, exchange_op);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, compute_slot, exchange_slot, 0));
}

static json_t *run_to_fault(fx *f, ipu_package *pkg)
{
    tpkg_outcome o = tpkg_execute(f->ctx, pkg);
    ipu_package_free(pkg);
    ipu_status init = o.init, run = o.run;
    json_decref(f->fault);
    f->fault = json_incref(o.fault);
    tpkg_outcome_free(&o);
    if (init != IPU_OK || run != IPU_ERR_DEVICE_FAULT)
        fail_msg("expected initialize ok and run device_fault, got %s and %s: %s",
                 ipu_status_name(init), ipu_status_name(run), ipu_ctx_errmsg(f->ctx));
    return f->fault;
}

/* The fault's allocation under key ("allocation" or "other_allocation"):
 * its name (NULL: none) and, when named, its tile, address and size. */
static void expect_allocation(const json_t *fault, const char *key, const char *name, uint32_t tile,
                              uint32_t address, uint32_t size)
{
    const json_t *a = json_object_get(fault, key);
    if (!name) {
        assert_true(json_is_null(a));
        return;
    }
    assert_true(json_is_object(a));
    assert_string_equal(json_string_value(json_object_get(a, "name")), name);
    assert_int_equal(json_integer_value(json_object_get(a, "tile")), tile);
    assert_int_equal(json_integer_value(json_object_get(a, "address")), address);
    assert_int_equal(json_integer_value(json_object_get(a, "size")), size);
}

static void expect_op(const json_t *fault, int index, const char *label)
{
    const json_t *op = json_object_get(fault, "op");
    assert_true(json_is_object(op));
    assert_int_equal(json_integer_value(json_object_get(op, "index")), index);
    assert_string_equal(json_string_value(json_object_get(op, "label")), label);
}

/* ---- operand_outside_allocation ------------------------------------------------ */

static void test_kernel_overrun_into_neighbour(void **state)
{
    fx *f = *state;
    uint32_t slot;
    ipu_pkg_builder *b = builder(f, 1, &slot);
    /* x is 64 bytes with neighbour y right after it; the copy reads 96 from x. */
    tpkg_data(b, T, f->X, 128, 7);
    alloc(f, b, T, f->X, 64, "act/x", 0, IPU_LIFE_FOREVER);
    alloc(f, b, T, f->X + 64, 64, "act/y", 0, IPU_LIFE_FOREVER);
    alloc(f, b, T, f->Z, 128, "act/z", 0, IPU_LIFE_FOREVER);
    tpkg_kernel list[] = {tpkg_copy(f->X, f->Z, 64), tpkg_copy(f->X, f->Z, 96)};
    tpkg_compute_list(b, T, slot, list, 2, 1);
    step(f, b, slot, IPU_NO_SLOT, 0, IPU_NO_OP);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "operand_outside_allocation", T, f->X + 64, f->X + 96);
    assert_string_equal(tpkg_fault_str(fault, "kernel"), "copy");
    assert_int_equal(tpkg_fault_int(fault, "descriptor"), 1);
    assert_int_equal(tpkg_fault_int(fault, "phase"), 0);
    expect_op(fault, 0, "op 0 matmul block_out");
    expect_allocation(fault, "allocation", "act/x", T, f->X, 64);
    expect_allocation(fault, "other_allocation", "act/y", T, f->X + 64, 64);
    assert_non_null(strstr(tpkg_fault_str(fault, "detail"), "'act/y'"));
}

static void test_write_into_ended_allocation(void **state)
{
    fx *f = *state;
    uint32_t slots[2];
    ipu_pkg_builder *b = builder(f, 2, slots);
    /* tmp lives in op 0's compute phase only; op 1 (phases 2, 3) fills it again. */
    alloc(f, b, T, f->Y, 256, "tmp", 0, 0);
    tpkg_kernel first = tpkg_fill(f->Y, 256, 1), again = tpkg_fill(f->Y + 64, 32, 2);
    tpkg_compute_list(b, T, slots[0], &first, 1, 1);
    tpkg_compute_list(b, T, slots[1], &again, 1, 1);
    tpkg_kernel copy = tpkg_copy(f->X, f->Y, 64);
    tpkg_compute_list(b, CLEAN, slots[1], &copy, 1, 1);
    step(f, b, slots[0], IPU_NO_SLOT, 0, IPU_NO_OP);
    step(f, b, slots[1], IPU_NO_SLOT, 1, IPU_NO_OP);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "operand_outside_allocation", T, f->Y + 64, f->Y + 96);
    assert_int_equal(tpkg_fault_int(fault, "phase"), 2);
    assert_int_equal(tpkg_fault_int(fault, "op_index"), 1);
    expect_op(fault, 1, "op 1 add residual");
    /* No allocation is live there at phase 2: none is named as the owner;
     * tmp, whose life ended, is the nearest in time. */
    expect_allocation(fault, "allocation", NULL, 0, 0, 0);
    expect_allocation(fault, "nearest_allocation", "tmp", T, f->Y, 256);
    expect_allocation(fault, "other_allocation", NULL, 0, 0, 0);
    assert_non_null(strstr(tpkg_fault_str(fault, "detail"), "not live"));
}

static void test_access_in_no_allocation(void **state)
{
    fx *f = *state;
    uint32_t slot;
    ipu_pkg_builder *b = builder(f, 1, &slot);
    alloc(f, b, T, f->X, 64, "act/x", 0, IPU_LIFE_FOREVER);
    tpkg_kernel fill = tpkg_fill(f->Z + 16, 16, 3);
    tpkg_compute_list(b, T, slot, &fill, 1, 1);
    step(f, b, slot, IPU_NO_SLOT, 0, IPU_NO_OP);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "operand_outside_allocation", T, f->Z + 16, f->Z + 32);
    expect_allocation(fault, "allocation", NULL, 0, 0, 0);
    expect_allocation(fault, "nearest_allocation", NULL, 0, 0, 0);
    expect_allocation(fault, "other_allocation", NULL, 0, 0, 0);
}

static void test_exchange_send_overrun(void **state)
{
    fx *f = *state;
    uint32_t slots[2];
    ipu_pkg_builder *b = builder(f, 2, slots);
    /* Tile T sends 8 words from x (16 bytes) and its neighbour to tile 9. */
    tpkg_data(b, T, f->X, 64, 5);
    alloc(f, b, T, f->X, 16, "kv/x", 0, IPU_LIFE_FOREVER);
    alloc(f, b, T, f->X + 16, 48, "kv/next", 0, IPU_LIFE_FOREVER);
    alloc(f, b, 9, f->Y, 64, "kv/in", 0, IPU_LIFE_FOREVER);
    tpkg_xrow send = tpkg_send(0, 8, f->X), recv = tpkg_recv(T, f->p.exchange_latency, 8, f->Y);
    tpkg_exchange_table(b, T, slots[1], &send, 1);
    tpkg_exchange_table(b, 9, slots[1], &recv, 1);
    step(f, b, slots[0], slots[1], 0, 1);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "operand_outside_allocation", T, f->X + 16, f->X + 32);
    assert_int_equal(tpkg_fault_int(fault, "phase"), 1);
    assert_int_equal(tpkg_fault_int(fault, "row"), 0);
    expect_op(fault, 1, "op 1 add residual");
    expect_allocation(fault, "allocation", "kv/x", T, f->X, 16);
    expect_allocation(fault, "other_allocation", "kv/next", T, f->X + 16, 48);
}

/* ---- stale_read ------------------------------------------------------------------ */

static void test_stale_read_after_reuse(void **state)
{
    fx *f = *state;
    uint32_t slots[2];
    ipu_pkg_builder *b = builder(f, 2, slots);
    /* a (op 0's compute phase) and b (op 1's) share bytes; b reads them unwritten. */
    alloc(f, b, T, f->Y, 64, "partials/a", 0, 0);
    alloc(f, b, T, f->Y, 64, "partials/b", 2, 2);
    alloc(f, b, T, f->Z, 64, "out", 0, IPU_LIFE_FOREVER);
    tpkg_kernel fill = tpkg_fill(f->Y, 64, 9), read = tpkg_copy(f->Y, f->Z, 64);
    tpkg_compute_list(b, T, slots[0], &fill, 1, 1);
    tpkg_compute_list(b, T, slots[1], &read, 1, 1);
    step(f, b, slots[0], IPU_NO_SLOT, 0, IPU_NO_OP);
    step(f, b, slots[1], IPU_NO_SLOT, 1, IPU_NO_OP);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "stale_read", T, f->Y, f->Y + 64);
    assert_int_equal(tpkg_fault_int(fault, "phase"), 2);
    expect_op(fault, 1, "op 1 add residual");
    expect_allocation(fault, "allocation", "partials/b", T, f->Y, 64);
    expect_allocation(fault, "other_allocation", "partials/a", T, f->Y, 64); /* the bytes' writer */
}

/* An allocation of whole and partial 512-byte chunks ends; its successor
 * rewrites all but a 100-byte run that starts inside one chunk and ends in
 * the next, then reads everything: the read faults on exactly that run, and
 * a read of the rewritten bytes alone passes (chunk summaries and per-byte
 * state agree). */
static void test_stale_run_across_chunks(void **state)
{
    fx *f = *state;
    uint32_t slots[2];
    ipu_pkg_builder *b = builder(f, 2, slots);
    uint32_t base = f->Y + 200, size = 3 * 512 + 300; /* starts and ends inside chunks */
    uint32_t hole = f->Y + 1000, hole_end = hole + 100;  /* crosses the chunk boundary at Y + 1024 */
    alloc(f, b, T, base, size, "old", 0, 0);
    alloc(f, b, T, base, size, "new", 2, 2);
    alloc(f, b, T, f->X, size, "out", 0, IPU_LIFE_FOREVER);
    tpkg_kernel first = tpkg_fill(base, size, 1);
    tpkg_compute_list(b, T, slots[0], &first, 1, 1);
    tpkg_kernel list[] = {tpkg_fill(base, hole - base, 2), tpkg_fill(hole_end, base + size - hole_end, 3),
                          tpkg_copy(base, f->X, hole - base), tpkg_copy(hole_end, f->X, base + size - hole_end),
                          tpkg_copy(base, f->X, size)};
    tpkg_compute_list(b, T, slots[1], list, 5, 1);
    step(f, b, slots[0], IPU_NO_SLOT, 0, IPU_NO_OP);
    step(f, b, slots[1], IPU_NO_SLOT, 1, IPU_NO_OP);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "stale_read", T, hole, hole_end);
    assert_int_equal(tpkg_fault_int(fault, "descriptor"), 4);
    expect_allocation(fault, "allocation", "new", T, base, size);
    expect_allocation(fault, "other_allocation", "old", T, base, size);
}

/* Repeat 2 { op 1: fill P (iteration 0) or Q (iteration 1), then use P },
 * where P and Q live in op 1's phases only; the use is a copy (exchange 0)
 * or an exchange send of P to tile 9 (exchange 1). */
static ipu_package *stale_partial_package(fx *f, int exchange)
{
    uint32_t slots[3];
    ipu_pkg_builder *b = builder(f, 3, slots);
    uint32_t compute = slots[0], xslot = slots[1], patch_slot = slots[2];
    uint32_t P = f->Y, Q = f->Y + 256;
    /* Phases: op 0 the Repeat (0, 1), op 1 the body step (2, 3). */
    alloc(f, b, T, P, 64, "partials/p", 2, 3);
    alloc(f, b, T, Q, 64, "partials/q", 2, 3);
    alloc(f, b, T, f->Z, 64, "out", 0, IPU_LIFE_FOREVER);
    alloc(f, b, 9, f->Z, 64, "gathered", 0, IPU_LIFE_FOREVER);
    tpkg_kernel list[] = {tpkg_fill(P, 64, 4), tpkg_copy(P, f->Z, 64)};
    uint32_t at = tpkg_compute_list(b, T, compute, list, exchange ? 1 : 2, 1);
    uint32_t targets[] = {P, Q};
    uint32_t table = tpkg_put_words(b, T, targets, 2);
    tpkg_patch patch = {IPU_PATCH_TABLE, at + 4 + 4, table, 2};
    tpkg_patch_list(b, T, patch_slot, &patch, 1);
    if (exchange) {
        tpkg_xrow send = tpkg_send(0, 16, P), recv = tpkg_recv(T, f->p.exchange_latency, 16, f->Z);
        tpkg_exchange_table(b, T, xslot, &send, 1);
        tpkg_exchange_table(b, 9, xslot, &recv, 1);
    }
    ipu_pkg_set_origin(b, IPU_NO_OP, IPU_NO_OP);
    TPKG_OK(f->ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, 2, 1, patch_slot));
    step(f, b, compute, exchange ? xslot : IPU_NO_SLOT, 0, 1);
    return tpkg_build(f->ctx, b);
}

static void test_stale_partial_slot_in_repeat(void **state)
{
    fx *f = *state;
    json_t *fault = run_to_fault(f, stale_partial_package(f, 0));
    TPKG_EXPECT_FAULT(fault, "stale_read", T, f->Y, f->Y + 64);
    /* Steps: patch, body (iteration 0), patch, then the faulting body. */
    assert_int_equal(tpkg_fault_int(fault, "step"), 3);
    assert_int_equal(tpkg_fault_int(fault, "descriptor"), 1);
    expect_op(fault, 0, "op 0 matmul block_out");
    expect_allocation(fault, "allocation", "partials/p", T, f->Y, 64);
    /* Written only in the first iteration, by the same allocation's earlier life. */
    expect_allocation(fault, "other_allocation", "partials/p", T, f->Y, 64);
}

static void test_stale_exchange_source_after_replay(void **state)
{
    fx *f = *state;
    /* Iteration 0's exchange passes and is kept; in iteration 1 its source
     * was never written in the allocation's life: the replay must not copy. */
    json_t *fault = run_to_fault(f, stale_partial_package(f, 1));
    TPKG_EXPECT_FAULT(fault, "stale_read", T, f->Y, f->Y + 64);
    assert_int_equal(tpkg_fault_int(fault, "step"), 3);
    assert_int_equal(tpkg_fault_int(fault, "phase"), 3);
    assert_int_equal(tpkg_fault_int(fault, "row"), 0);
    expect_op(fault, 1, "op 1 add residual");
    expect_allocation(fault, "allocation", "partials/p", T, f->Y, 64);
}

/* ---- other faults name their allocations -------------------------------------------- */

static void test_uninitialized_read_names_allocation(void **state)
{
    fx *f = *state;
    uint32_t slot;
    ipu_pkg_builder *b = builder(f, 1, &slot);
    tpkg_data(b, T, f->X, 16, 7);
    /* Tile 4 has an allocation at the same address: it does not own tile T's bytes. */
    alloc(f, b, 4, f->X, 0x100, "decoy/tile4", 0, IPU_LIFE_FOREVER);
    alloc(f, b, T, f->X, 0x100, "tensor/x", 0, IPU_LIFE_FOREVER);
    alloc(f, b, T, f->Z, 0x100, "tensor/z", 0, IPU_LIFE_FOREVER);
    tpkg_kernel copy = tpkg_copy(f->X, f->Z, 64);
    tpkg_compute_list(b, T, slot, &copy, 1, 1);
    step(f, b, slot, IPU_NO_SLOT, 0, IPU_NO_OP);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "uninitialized_read", T, f->X + 16, f->X + 64);
    expect_allocation(fault, "allocation", "tensor/x", T, f->X, 0x100);
    expect_op(fault, 0, "op 0 matmul block_out");
}

static void test_element_conflict_names_both(void **state)
{
    fx *f = *state;
    uint32_t slot;
    ipu_pkg_builder *b = builder(f, 1, &slot);
    uint32_t R1 = f->p.region1_base, e = f->p.element_bytes;
    /* A at the start of an element, C 256 bytes further in the same element. */
    tpkg_data(b, T, R1, 48, 3);
    tpkg_data(b, T, R1 + 2 * e, 32, 4);
    alloc(f, b, T, R1, 256, "gemm/a", 0, IPU_LIFE_FOREVER);
    alloc(f, b, T, R1 + 2 * e, 256, "gemm/b", 0, IPU_LIFE_FOREVER);
    alloc(f, b, T, R1 + 256, 256, "gemm/c", 0, IPU_LIFE_FOREVER);
    tpkg_kernel k = tpkg_gemm_f16(R1, R1 + 2 * e, R1 + 256, 4, 4, 4, 0 /* f32 */, 0);
    tpkg_compute_list(b, T, slot, &k, 1, 1);
    step(f, b, slot, IPU_NO_SLOT, 0, IPU_NO_OP);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "element_conflict", T, R1, R1 + e);
    expect_allocation(fault, "allocation", "gemm/a", T, R1, 256);
    expect_allocation(fault, "other_allocation", "gemm/c", T, R1 + 256, 256);
}

int main(void)
{
#define T_(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T_(test_kernel_overrun_into_neighbour),
        T_(test_write_into_ended_allocation),
        T_(test_access_in_no_allocation),
        T_(test_exchange_send_overrun),
        T_(test_stale_read_after_reuse),
        T_(test_stale_run_across_chunks),
        T_(test_stale_partial_slot_in_repeat),
        T_(test_stale_exchange_source_after_replay),
        T_(test_uninitialized_read_names_allocation),
        T_(test_element_conflict_names_both),
    };
#undef T_
    return cmocka_run_group_tests(tests, NULL, NULL);
}
