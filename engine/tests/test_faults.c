/* test_faults.c: every device fault kind (DEVICE.md "Faults"), each provoked
 * by a small hand-built package on the 16-tile profile.  The fault is put on
 * tile 5 while every other tile runs a clean program in the same step (so the
 * reported tile means something: lower tiles run and do not fault), and each
 * test asserts the reported kind, tile and address range [address_lo,
 * address_hi) computed here from the addresses the test chose, plus the
 * kernel, descriptor, exchange/patch row and program position where they
 * apply.  These packages declare no allocation table, so the allocation
 * checks are off (test_allocation_faults.c has those).  Further tests check
 * that a faulted device refuses to run (IPU_ERR_STATE) until it is
 * initialized again, and that a device unloaded and loaded with another
 * package keeps nothing of the first one's written bytes.
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
#define T 5u /* the faulting tile */

typedef struct fx {
    ipu_ctx *ctx;
    ipu_profile p;
    uint32_t X, Y, Z; /* region-0 tensor addresses, each at the start of its own element */
    uint32_t R1;      /* region 1 start */
    uint32_t L;       /* exchange wire latency */
    json_t *fault;    /* the last fault report, released by teardown (even after a failure) */
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->ctx = tpkg_context();
    tpkg_profile(f->ctx, TILES, &f->p);
    tpkg_elements(&f->p, &f->X, &f->Y, &f->Z);
    f->R1 = f->p.region1_base;
    f->L = f->p.exchange_latency;
    /* The tests' addresses assume the c600 geometry. */
    assert_int_equal(f->R1 % f->p.element_bytes, 0);
    assert_true(f->L > 4);
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

/* ---- common pieces -------------------------------------------------------- */

/* Every tile except `except` copies 64 written bytes from X to Y. */
static void background_compute(fx *f, ipu_pkg_builder *b, uint32_t slot, uint32_t except)
{
    tpkg_kernel copy = tpkg_copy(f->X, f->Y, 64);
    for (uint32_t t = 0; t < TILES; t++) {
        if (t == except)
            continue;
        tpkg_data(b, t, f->X, 64, t);
        tpkg_compute_list(b, t, slot, &copy, 1, 1);
    }
}

/* A clean transfer in the same phase: tile 2 sends 4 words to tile 3. */
static void background_exchange(fx *f, ipu_pkg_builder *b, uint32_t slot)
{
    tpkg_xrow send = tpkg_send(0, 4, f->X), recv = tpkg_recv(2, f->L, 4, f->Y);
    tpkg_data(b, 2, f->X, 16, 2);
    tpkg_exchange_table(b, 2, slot, &send, 1);
    tpkg_exchange_table(b, 3, slot, &recv, 1);
}

static void emit(fx *f, ipu_pkg_builder *b, int init, uint32_t op, uint32_t a, uint32_t bb,
                 uint32_t c)
{
    TPKG_OK(f->ctx, ipu_pkg_emit(b, init, op, a, bb, c));
}

/* Keep a fault report in the fixture (teardown releases it); returns it. */
static json_t *keep(fx *f, json_t *fault)
{
    json_decref(f->fault);
    f->fault = fault;
    return fault;
}

/* Initialize must succeed and the run must stop on a fault; frees pkg.  The
 * fault report stays owned by the fixture. */
static json_t *run_to_fault(fx *f, ipu_package *pkg)
{
    tpkg_outcome o = tpkg_execute(f->ctx, pkg);
    ipu_package_free(pkg);
    ipu_status init = o.init, run = o.run;
    keep(f, json_incref(o.fault));
    tpkg_outcome_free(&o);
    if (init != IPU_OK || run != IPU_ERR_DEVICE_FAULT)
        fail_msg("expected initialize ok and run device_fault, got %s and %s: %s",
                 ipu_status_name(init), ipu_status_name(run), ipu_ctx_errmsg(f->ctx));
    return f->fault;
}

/* Kernel name (NULL: none), compute-list descriptor and row (-1: none). */
static void expect_where(const json_t *fault, const char *kernel, long long descriptor,
                         long long row)
{
    const char *got = tpkg_fault_str(fault, "kernel");
    if (kernel)
        assert_non_null(got), assert_string_equal(got, kernel);
    else
        assert_null(got);
    assert_int_equal(tpkg_fault_int(fault, "descriptor"), descriptor);
    assert_int_equal(tpkg_fault_int(fault, "row"), row);
}

static void expect_position(const json_t *fault, const char *program, long long op_index,
                            long long step)
{
    assert_string_equal(tpkg_fault_str(fault, "program"), program);
    assert_int_equal(tpkg_fault_int(fault, "op_index"), op_index);
    assert_int_equal(tpkg_fault_int(fault, "step"), step);
}

static uint32_t head_word(const tpkg_kernel *k) { return k->entry | k->argc << 16; }

/* Tile T's compute list for the uninitialized-read tests: 16 of the 64 bytes
 * copy reads were written. */
static ipu_package *uninitialized_copy_package(fx *f)
{
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    background_compute(f, b, slot, T);
    tpkg_data(b, T, f->X, 16, 7);
    tpkg_kernel list[] = {tpkg_fill(f->Y, 64, 0x01020304u), tpkg_copy(f->X, f->Z, 64)};
    tpkg_compute_list(b, T, slot, list, 2, 1);
    emit(f, b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0);
    return tpkg_build(f->ctx, b);
}

/* ---- uninitialized_read ---------------------------------------------------- */

static void test_uninitialized_read_kernel(void **state)
{
    fx *f = *state;
    json_t *fault = run_to_fault(f, uninitialized_copy_package(f));
    TPKG_EXPECT_FAULT(fault, "uninitialized_read", T, f->X + 16, f->X + 64);
    expect_where(fault, "copy", 1, -1);
    expect_position(fault, "main", 0, 0);
    assert_true(json_is_null(json_object_get(fault, "allocation")));
}

/* A read that begins in memory already read in full (whose written-bit
 * summary is set) and runs into bytes never written still faults, on exactly
 * the unwritten bytes. */
static void test_uninitialized_read_after_full_chunks(void **state)
{
    fx *f = *state;
    assert_true(f->p.element_bytes >= 1536);
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    background_compute(f, b, slot, T);
    tpkg_data(b, T, f->X, 1024, 7);
    tpkg_kernel list[] = {tpkg_copy(f->X, f->Y, 1024), tpkg_copy(f->X + 512, f->Z, 1024)};
    tpkg_compute_list(b, T, slot, list, 2, 1);
    emit(f, b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "uninitialized_read", T, f->X + 1024, f->X + 1536);
    expect_where(fault, "copy", 1, -1);
}

static void test_uninitialized_read_exchange_send(void **state)
{
    fx *f = *state;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    background_exchange(f, b, slot);
    /* Tile T sends 4 words from OUTGOING_BASE + 0 = X; only 8 bytes were written. */
    tpkg_data(b, T, f->X, 8, 5);
    tpkg_xrow send = tpkg_send(0, 4, 0);
    send.flags = IPU_XFLAG_RELATIVE;
    tpkg_xrow rows[] = {tpkg_set_base(f->X), send};
    tpkg_exchange_table(b, T, slot, rows, 2);
    tpkg_xrow recv = tpkg_recv(T, f->L, 4, f->Y);
    tpkg_exchange_table(b, 9, slot, &recv, 1);
    emit(f, b, 0, IPU_OP_STEP, IPU_NO_SLOT, slot, 0);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "uninitialized_read", T, f->X + 8, f->X + 16);
    expect_where(fault, NULL, -1, 1);
    expect_position(fault, "main", 0, 0);
}

/* ---- protected_write ---------------------------------------------------------- */

/* Tile T runs one kernel (data X: 64 written bytes); the rest run the background. */
static json_t *run_one_kernel(fx *f, tpkg_kernel k)
{
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    background_compute(f, b, slot, T);
    tpkg_data(b, T, f->X, 64, 9);
    tpkg_compute_list(b, T, slot, &k, 1, 1);
    emit(f, b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0);
    return run_to_fault(f, tpkg_build(f->ctx, b));
}

static void test_protected_write_runtime_state(void **state)
{
    fx *f = *state;
    uint32_t state_end = f->p.sram_base + f->p.runtime_state_bytes;
    /* [state_end - 32, state_end + 32): the first half is runtime state, the
     * rest is free memory below the kernel code. */
    assert_true(state_end + 32 <= tpkg_code_base(&f->p));
    json_t *fault = run_one_kernel(f, tpkg_fill(state_end - 32, 64, 0));
    TPKG_EXPECT_FAULT(fault, "protected_write", T, state_end - 32, state_end);
    expect_where(fault, "fill", 0, -1);
}

static void test_protected_write_kernel_code(void **state)
{
    fx *f = *state;
    /* Tile T's code: fill's supervisor part, the memory body fill and copy
     * share, then copy's supervisor part (the order the list calls them). */
    uint32_t fill_code = tpkg_code_base(&f->p);
    uint32_t body = fill_code + ((ipu_kernel_supervisor_size(IPU_K_FILL) + 7) & ~7u);
    uint32_t copy_code = body + ((ipu_kernel_body_size(IPU_BODY_MEMORY) + 7) & ~7u);
    uint32_t copy_end = copy_code + ipu_kernel_supervisor_size(IPU_K_COPY);
    assert_true(copy_end + 32 <= f->p.aperture_base);
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    background_compute(f, b, slot, T);
    tpkg_data(b, T, f->X, 64, 9);
    /* The copy's destination straddles the end of copy's own code. */
    tpkg_kernel list[] = {tpkg_fill(f->Y, 16, 0), tpkg_copy(f->X, copy_end - 32, 64)};
    tpkg_compute_list(b, T, slot, list, 2, 1);
    emit(f, b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0);
    ipu_package *pkg = tpkg_build(f->ctx, b);
    /* The layout the test computed is the one the package holds. */
    const ipu_pkg_segment *seg = ipu_pkg_segment_at(pkg, T, copy_code, 1);
    assert_non_null(seg);
    assert_int_equal(seg->kind, IPU_SEG_CODE);
    assert_int_equal(seg->entry, IPU_K_COPY);
    assert_int_equal(seg->address + seg->size, copy_end);
    json_t *fault = run_to_fault(f, pkg);
    TPKG_EXPECT_FAULT(fault, "protected_write", T, copy_end - 32, copy_end);
    expect_where(fault, "copy", 1, -1);
}

static void test_protected_write_descriptors(void **state)
{
    fx *f = *state;
    /* Tile T's first record is its compute list, at the descriptor base: the
     * fill overwrites the list's own descriptor. */
    uint32_t desc = tpkg_desc_base(&f->p);
    json_t *fault = run_one_kernel(f, tpkg_fill(desc + 4, 8, 0));
    TPKG_EXPECT_FAULT(fault, "protected_write", T, desc + 4, desc + 12);
    expect_where(fault, "fill", 0, -1);
}

static void test_protected_write_exchange_receive(void **state)
{
    fx *f = *state;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    background_exchange(f, b, slot);
    tpkg_data(b, 9, f->X, 16, 9);
    tpkg_xrow send = tpkg_send(0, 4, f->X);
    tpkg_exchange_table(b, 9, slot, &send, 1);
    /* Tile T's table is its first record (at the descriptor base); row 1
     * receives over the table's own rows. */
    uint32_t desc = tpkg_desc_base(&f->p);
    tpkg_xrow rows[] = {tpkg_reset_base(), tpkg_recv(9, f->L, 4, desc + 16)};
    assert_int_equal(tpkg_exchange_table(b, T, slot, rows, 2), desc);
    emit(f, b, 0, IPU_OP_STEP, IPU_NO_SLOT, slot, 0);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "protected_write", T, desc + 16, desc + 32);
    expect_where(fault, NULL, -1, 1);
}

/* ---- out_of_bounds ------------------------------------------------------------- */

static void test_out_of_bounds_crossing_end(void **state)
{
    fx *f = *state;
    uint32_t end = ipu_profile_access_end(&f->p);
    assert_int_equal(end, 0xE7BB0u);
    /* 64 bytes from end - 32: the second half is the inaccessible tail. */
    json_t *fault = run_one_kernel(f, tpkg_copy(f->X, end - 32, 64));
    TPKG_EXPECT_FAULT(fault, "out_of_bounds", T, end - 32, end + 32);
    expect_where(fault, "copy", 0, -1);
}

static void test_out_of_bounds_read_in_tail(void **state)
{
    fx *f = *state;
    uint32_t end = ipu_profile_access_end(&f->p);
    json_t *fault = run_one_kernel(f, tpkg_copy(end + 16, f->Y, 16));
    TPKG_EXPECT_FAULT(fault, "out_of_bounds", T, end + 16, end + 32);
    expect_where(fault, "copy", 0, -1);
}

/* ---- misaligned and element_conflict ------------------------------------------- */

/* Tile T: a 4x4x4 FP16 GEMM (A, B 32 bytes written, C f32 64 bytes). */
static json_t *run_gemm(fx *f, uint32_t a, uint32_t bm, uint32_t c, uint32_t flags)
{
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    background_compute(f, b, slot, T);
    tpkg_data(b, T, a & ~7u, 48, 3);
    tpkg_data(b, T, bm, 32, 4);
    tpkg_kernel k = tpkg_gemm_f16(a, bm, c, 4, 4, 4, 0 /* f32 */, flags);
    tpkg_compute_list(b, T, slot, &k, 1, 1);
    emit(f, b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0);
    return run_to_fault(f, tpkg_build(f->ctx, b));
}

static void test_misaligned_gemm_operand(void **state)
{
    fx *f = *state;
    json_t *fault = run_gemm(f, f->X + 4, f->R1, f->Y, 0);
    TPKG_EXPECT_FAULT(fault, "misaligned", T, f->X + 4, f->X + 4 + 32);
    expect_where(fault, "gemm_f16", 0, -1);
}

static void test_misaligned_wide_operand_in_region0(void **state)
{
    fx *f = *state;
    /* A is 16-byte aligned but in region 0: 128-bit loads need region 1. */
    json_t *fault = run_gemm(f, f->X, f->R1, f->R1 + 2 * f->p.element_bytes, IPU_GEMM_WIDE);
    TPKG_EXPECT_FAULT(fault, "misaligned", T, f->X, f->X + 32);
    expect_where(fault, "gemm_f16", 0, -1);
}

static void test_element_conflict_a_and_c(void **state)
{
    fx *f = *state;
    uint32_t e = f->p.element_bytes;
    /* A at the start of element R1 / e, C 256 bytes further in the same element. */
    json_t *fault = run_gemm(f, f->R1, f->R1 + 2 * e, f->R1 + 256, 0);
    TPKG_EXPECT_FAULT(fault, "element_conflict", T, f->R1, f->R1 + e);
    expect_where(fault, "gemm_f16", 0, -1);
}

static void test_element_conflict_b_and_c(void **state)
{
    fx *f = *state;
    uint32_t e = f->p.element_bytes;
    json_t *fault = run_gemm(f, f->R1, f->R1 + 2 * e, f->R1 + 2 * e + 0x1000, 0);
    TPKG_EXPECT_FAULT(fault, "element_conflict", T, f->R1 + 2 * e, f->R1 + 3 * e);
    expect_where(fault, "gemm_f16", 0, -1);
}

/* ---- exchange faults ------------------------------------------------------------ */

/* An exchange-only package: the background transfer, tile 9 sending 4 words
 * from X at send_cycle (tile 10 receives them), then the test's rows for
 * tile T (and optionally tile 4). */
typedef struct xcase {
    tpkg_xrow t_rows[4];
    size_t t_count;
    tpkg_xrow partner_rows[4]; /* tile T ^ 1 */
    size_t partner_count;
    uint32_t send_cycle; /* tile 9's send */
    int no_tile9;        /* tile 9 and 10 take no part */
} xcase;

static json_t *run_exchange(fx *f, const xcase *c)
{
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    background_exchange(f, b, slot);
    if (!c->no_tile9) {
        tpkg_data(b, 9, f->X, 16, 9);
        tpkg_xrow send = tpkg_send(c->send_cycle, 4, f->X);
        tpkg_xrow recv = tpkg_recv(9, c->send_cycle + f->L, 4, f->Y);
        tpkg_exchange_table(b, 9, slot, &send, 1);
        tpkg_exchange_table(b, 10, slot, &recv, 1);
    }
    tpkg_data(b, T, f->X, 32, 5);
    tpkg_exchange_table(b, T, slot, c->t_rows, c->t_count);
    if (c->partner_count) {
        tpkg_data(b, T ^ 1u, f->X, 32, 4);
        tpkg_exchange_table(b, T ^ 1u, slot, c->partner_rows, c->partner_count);
    }
    emit(f, b, 0, IPU_OP_STEP, IPU_NO_SLOT, slot, 0);
    return run_to_fault(f, tpkg_build(f->ctx, b));
}

static void test_exchange_unmatched_receive(void **state)
{
    fx *f = *state;
    /* Tile 9 sends at cycle 40 only; tile T selects it at cycle L (send cycle 0). */
    xcase c = {.t_rows = {tpkg_recv(9, f->L, 4, f->Y)}, .t_count = 1, .send_cycle = 40};
    json_t *fault = run_exchange(f, &c);
    TPKG_EXPECT_FAULT(fault, "exchange_unmatched_receive", T, f->Y, f->Y + 16);
    expect_where(fault, NULL, -1, 0);
}

static void test_exchange_unmatched_receive_before_latency(void **state)
{
    fx *f = *state;
    /* A receive at cycle 4 < L would take a word sent at cycle 4 - L < 0:
     * nothing can match it, and tile 9's only send (cycle 40) is far away. */
    xcase c = {.t_rows = {tpkg_recv(9, 4, 4, f->Y)}, .t_count = 1, .send_cycle = 40};
    json_t *fault = run_exchange(f, &c);
    TPKG_EXPECT_FAULT(fault, "exchange_unmatched_receive", T, f->Y, f->Y + 16);
    expect_where(fault, NULL, -1, 0);
}

static void test_exchange_window_partially_outside(void **state)
{
    fx *f = *state;
    /* Tile 9 sends cycles [0, 4); tile T takes cycles [2, 6) of it. */
    xcase c = {.t_rows = {tpkg_recv(9, f->L + 2, 4, f->Y)}, .t_count = 1, .send_cycle = 0};
    json_t *fault = run_exchange(f, &c);
    TPKG_EXPECT_FAULT(fault, "exchange_window_mismatch", T, f->Y, f->Y + 16);
    expect_where(fault, NULL, -1, 0);
}

static void test_exchange_window_paired_receive_of_unpaired_send(void **state)
{
    fx *f = *state;
    /* Tile 9 sends four 32-bit words; tile T takes two 64-bit words. */
    tpkg_xrow recv = tpkg_recv(9, f->L, 2, f->Y);
    recv.flags = IPU_XFLAG_PAIRED;
    xcase c = {.t_rows = {tpkg_reset_base(), recv}, .t_count = 2, .send_cycle = 0};
    json_t *fault = run_exchange(f, &c);
    TPKG_EXPECT_FAULT(fault, "exchange_window_mismatch", T, f->Y, f->Y + 16);
    expect_where(fault, NULL, -1, 1);
}

static void test_exchange_port_conflict_two_sends(void **state)
{
    fx *f = *state;
    /* Tile T sends cycles [0, 4) and [2, 6): its send port is busy twice.
     * Nobody receives; the port check comes first. */
    xcase c = {.t_rows = {tpkg_send(0, 4, f->X), tpkg_send(2, 4, f->X + 16)},
               .t_count = 2,
               .no_tile9 = 1};
    json_t *fault = run_exchange(f, &c);
    /* The later row is the conflicting one; its window is [X + 16, X + 32). */
    TPKG_EXPECT_FAULT(fault, "exchange_port_conflict", T, f->X + 16, f->X + 32);
    expect_where(fault, NULL, -1, 1);
}

static void test_exchange_port_conflict_paired_partner(void **state)
{
    fx *f = *state;
    /* Tile T ^ 1 sends two paired 64-bit words at cycles [0, 2), which takes
     * tile T's send port too; tile T sends its own word at cycle 1. */
    tpkg_xrow paired = tpkg_send(0, 2, f->X);
    paired.flags = IPU_XFLAG_PAIRED;
    xcase c = {.t_rows = {tpkg_send(1, 4, f->X)},
               .t_count = 1,
               .partner_rows = {paired},
               .partner_count = 1,
               .no_tile9 = 1};
    json_t *fault = run_exchange(f, &c);
    TPKG_EXPECT_FAULT(fault, "exchange_port_conflict", T, f->X, f->X + 16);
    expect_where(fault, NULL, -1, 0);
}

static void test_exchange_conflicting_writers(void **state)
{
    fx *f = *state;
    /* Tile 9 sends at cycle 0 and tile 4 at cycle 10; tile T writes the first
     * to [Y, Y + 16) and the second to [Y + 8, Y + 24). */
    xcase c = {.t_rows = {tpkg_recv(9, f->L, 4, f->Y), tpkg_recv(T ^ 1u, f->L + 10, 4, f->Y + 8)},
               .t_count = 2,
               .partner_rows = {tpkg_send(10, 4, f->X)},
               .partner_count = 1,
               .send_cycle = 0};
    json_t *fault = run_exchange(f, &c);
    TPKG_EXPECT_FAULT(fault, "exchange_conflicting_writers", T, f->Y + 8, f->Y + 16);
    expect_where(fault, NULL, -1, 1);
}

static void test_exchange_read_write_conflict(void **state)
{
    fx *f = *state;
    /* Tile T sends [X, X + 16) at cycle 0 and, in the same phase, receives
     * tile 9's words into [X + 8, X + 24). */
    xcase c = {.t_rows = {tpkg_send(0, 4, f->X), tpkg_recv(9, f->L, 4, f->X + 8)},
               .t_count = 2,
               .partner_rows = {tpkg_recv(T, f->L, 4, f->Y)},
               .partner_count = 1,
               .send_cycle = 0};
    json_t *fault = run_exchange(f, &c);
    TPKG_EXPECT_FAULT(fault, "exchange_read_write_conflict", T, f->X + 8, f->X + 16);
    expect_where(fault, NULL, -1, 1);
}

/* ---- missing_kernel ---------------------------------------------------------------- */

static void test_missing_kernel(void **state)
{
    fx *f = *state;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    background_compute(f, b, slot, T); /* copy's code is on every other tile */
    tpkg_data(b, T, f->X, 64, 1);
    tpkg_kernel list[] = {tpkg_fill(f->Y, 64, 0), tpkg_copy(f->X, f->Z, 64)};
    uint32_t at = tpkg_compute_list(b, T, slot, list, 2, 0);
    TPKG_OK(f->ctx, ipu_pkg_add_code(b, T, IPU_K_FILL));
    emit(f, b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    uint32_t d1 = at + 4 + tpkg_kernel_bytes(&list[0]);
    TPKG_EXPECT_FAULT(fault, "missing_kernel", T, d1, d1 + tpkg_kernel_bytes(&list[1]));
    expect_where(fault, "copy", 1, -1);
}

/* ---- malformed_descriptor ------------------------------------------------------------ */

/* Tile T: compute list [fill(Y, 64, pattern)] and a patch list built by the
 * caller; main: Repeat(count, body 1, patches) { step(compute) }. */
typedef struct patched {
    ipu_pkg_builder *b;
    uint32_t compute_slot, patch_slot;
    uint32_t list; /* tile T's compute list */
    tpkg_kernel fill;
} patched;

static patched patched_begin(fx *f)
{
    patched p;
    p.b = tpkg_builder(f->ctx, &f->p);
    p.compute_slot = ipu_pkg_new_slot(p.b);
    p.patch_slot = ipu_pkg_new_slot(p.b);
    background_compute(f, p.b, p.compute_slot, T);
    p.fill = tpkg_fill(f->Y, 64, 0x11111111u);
    p.list = tpkg_compute_list(p.b, T, p.compute_slot, &p.fill, 1, 1);
    return p;
}

static ipu_package *patched_end(fx *f, patched *p, uint32_t repeats)
{
    emit(f, p->b, 0, IPU_OP_REPEAT, repeats, 1, p->patch_slot);
    emit(f, p->b, 0, IPU_OP_STEP, p->compute_slot, IPU_NO_SLOT, 0);
    return tpkg_build(f->ctx, p->b);
}

static void test_malformed_descriptor_progression_garbage(void **state)
{
    fx *f = *state;
    patched p = patched_begin(f);
    /* The head word is a + iteration * b: the fill at iteration 0, at
     * iteration 1 entry IPU_K_ENTRY_END (no such entry) with 0x5A5D arguments. */
    uint32_t head = p.list + 4, delta = 0x5A5A0000u + (IPU_K_ENTRY_END - IPU_K_FILL);
    assert_int_equal((head_word(&p.fill) + delta) & 0xFFFF, IPU_K_ENTRY_END);
    tpkg_patch patch = {IPU_PATCH_PROGRESSION, head, head_word(&p.fill), delta};
    tpkg_patch_list(p.b, T, p.patch_slot, &patch, 1);
    ipu_package *pkg = patched_end(f, &p, 2);
    json_t *fault = run_to_fault(f, pkg);
    TPKG_EXPECT_FAULT(fault, "malformed_descriptor", T, head, head + 4);
    expect_where(fault, NULL, 0, -1);
    /* Steps: patch, compute (iteration 0), patch, then the faulting compute. */
    expect_position(fault, "main", 1, 3);
}

static void test_malformed_descriptor_progression_wrong_arg_count(void **state)
{
    fx *f = *state;
    patched p = patched_begin(f);
    /* At iteration 1 the fill claims 4 arguments instead of 3; the next
     * record (the patch list) keeps the longer descriptor inside the
     * descriptor segment, so only the argument count is wrong. */
    uint32_t head = p.list + 4;
    tpkg_patch patch = {IPU_PATCH_PROGRESSION, head, head_word(&p.fill), 1u << 16};
    tpkg_patch_list(p.b, T, p.patch_slot, &patch, 1);
    json_t *fault = run_to_fault(f, patched_end(f, &p, 2));
    /* The whole descriptor as it now reads: head word and 4 arguments. */
    TPKG_EXPECT_FAULT(fault, "malformed_descriptor", T, head, head + 4 + 4 * 4);
    expect_where(fault, "fill", 0, -1);
    expect_position(fault, "main", 1, 3);
}

static void test_malformed_descriptor_patch_table_past_end(void **state)
{
    fx *f = *state;
    patched p = patched_begin(f);
    /* Entry 0 walks the fill pattern; entry 1 takes the destination from a
     * 2-entry table, and the Repeat runs 3 times. */
    uint32_t table[] = {f->Y, f->Y + 64};
    uint32_t table_at = tpkg_put_words(p.b, T, table, 2);
    tpkg_patch patches[] = {
        {IPU_PATCH_PROGRESSION, p.list + 4 + 12, 0x11111111u, 1},
        {IPU_PATCH_TABLE, p.list + 4 + 4, table_at, 2},
    };
    uint32_t list = tpkg_patch_list(p.b, T, p.patch_slot, patches, 2);
    json_t *fault = run_to_fault(f, patched_end(f, &p, 3));
    TPKG_EXPECT_FAULT(fault, "malformed_descriptor", T, list, list + 4 + 2 * IPU_PATCH_SIZE);
    expect_where(fault, NULL, -1, 1);
    /* Steps 0..3 are two patch+compute iterations; the third patch faults. */
    expect_position(fault, "main", 0, 4);
}

static void test_malformed_descriptor_patch_count_overflow(void **state)
{
    fx *f = *state;
    patched p = patched_begin(f);
    /* The patch list rewrites its own count: 1, 1, then 1 + 0x0FFFFFFF =
     * 2^28 at iteration 2, so 2^28 16-byte entries (4 GiB) are claimed.
     * Right after the list sit bytes that look like a patch entry: they are
     * not part of any list and must never be applied. */
    uint32_t list_at = p.list + 4 + tpkg_kernel_bytes(&p.fill);
    tpkg_patch self = {IPU_PATCH_PROGRESSION, list_at, 1, 0x0FFFFFFFu};
    assert_int_equal(tpkg_patch_list(p.b, T, p.patch_slot, &self, 1), list_at);
    uint32_t pattern_word = p.list + 4 + 12;
    uint32_t ghost[] = {IPU_PATCH_PROGRESSION, pattern_word, 0xDEADBEEFu, 0};
    tpkg_put_words(p.b, T, ghost, 4);
    ipu_package *pkg = patched_end(f, &p, 3);
    ipu_device *dev = tpkg_device(f->ctx, pkg);
    assert_int_equal(ipu_device_initialize(f->ctx, dev, pkg), IPU_OK);
    char *cycles = NULL;
    assert_int_equal(ipu_device_run(f->ctx, dev, &cycles), IPU_ERR_DEVICE_FAULT);
    /* The bytes after the list were not applied as a patch. */
    uint8_t word[4];
    assert_int_equal(ipu_device_read(f->ctx, dev, T, pattern_word, word, 4), IPU_OK);
    assert_int_equal(ipu_load_u32(word), 0x11111111u);
    /* The count word claims more than the descriptor segment holds: the list
     * as a whole is malformed, not one of its entries. */
    json_t *fault = keep(f, tpkg_fault(f->ctx, dev));
    TPKG_EXPECT_FAULT(fault, "malformed_descriptor", T, list_at, list_at + 4);
    expect_where(fault, NULL, -1, -1);
    expect_position(fault, "main", 0, 4);
    ipu_device_free(dev);
    ipu_package_free(pkg);
}

/* Host output of 4 strided rows of 64 bytes on every tile, stream offset
 * t * 256, rows 64 bytes apart in the stream and stride0 apart on the tile,
 * from address on tile T (the aperture base elsewhere).  Main:
 * Repeat(2, body 1, patches) { host output }; tile T's patch list adds
 * delta to its entry's tile stride at every iteration, so iteration 0 is
 * valid and iteration 1 moves rows stride0 + delta apart. */
static ipu_package *strided_host_package(fx *f, uint32_t address, uint32_t stride0, uint32_t delta)
{
    const uint32_t rows = 4, row = 64;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t stream;
    TPKG_OK(f->ctx, ipu_pkg_add_stream(b, "out", IPU_STREAM_OUTPUT, TILES * rows * row, &stream));
    uint32_t host_slot = ipu_pkg_new_slot(b), patch_slot = ipu_pkg_new_slot(b);
    for (uint32_t t = 0; t < TILES; t++) {
        uint32_t at = t == T ? address : f->p.aperture_base, stride = t == T ? stride0 : row;
        tpkg_data(b, t, at, (rows - 1) * stride + row, t);
        tpkg_host_entry e = {stream, t * rows * row, at, row, rows, row, stride, 0};
        uint32_t list = tpkg_host_descriptor(b, t, host_slot, &e, 1);
        if (t == T) {
            /* Word 6 of the entry is its tile stride. */
            tpkg_patch patch = {IPU_PATCH_PROGRESSION, list + 4 + 24, stride0, delta};
            tpkg_patch_list(b, T, patch_slot, &patch, 1);
        }
    }
    emit(f, b, 0, IPU_OP_REPEAT, 2, 1, patch_slot);
    emit(f, b, 0, IPU_OP_HOST_OUT, host_slot, 0, 0);
    return tpkg_build(f->ctx, b);
}

static void test_malformed_descriptor_host_rows_overlap(void **state)
{
    fx *f = *state;
    uint32_t ap = f->p.aperture_base;
    /* Iteration 1: 4 rows of 64 bytes 48 bytes apart overlap on the tile. */
    json_t *fault = run_to_fault(f, strided_host_package(f, ap, 64, (uint32_t)-16));
    TPKG_EXPECT_FAULT(fault, "malformed_descriptor", T, ap, ap + 3 * 48 + 64);
    expect_where(fault, NULL, -1, 0);
    /* Steps: patch, host output (iteration 0), patch, then the faulting host output. */
    expect_position(fault, "main", 1, 3);
    assert_non_null(strstr(tpkg_fault_str(fault, "detail"), "overlap"));
}

static void test_malformed_descriptor_host_rows_past_aperture(void **state)
{
    fx *f = *state;
    uint32_t end = f->p.aperture_end, at = end - 4 * 64;
    /* Iteration 0 fills the aperture's last 256 bytes; at iteration 1 the
     * rows are 128 bytes apart and the last two leave the aperture. */
    json_t *fault = run_to_fault(f, strided_host_package(f, at, 64, 64));
    TPKG_EXPECT_FAULT(fault, "malformed_descriptor", T, at, at + 3 * 128 + 64);
    assert_true(at + 3 * 128 + 64 > end);
    expect_where(fault, NULL, -1, 0);
    expect_position(fault, "main", 1, 3);
    assert_non_null(strstr(tpkg_fault_str(fault, "detail"), "aperture"));
}

/* ---- allocation names and the state after a fault -------------------------------- */

static ipu_status run_status(fx *f, ipu_device *dev)
{
    char *cycles = NULL;
    ipu_status status = ipu_device_run(f->ctx, dev, &cycles);
    assert_true(status == IPU_OK ? cycles != NULL : cycles == NULL);
    ipu_free(cycles);
    return status;
}

static void test_fault_requires_initialize_again(void **state)
{
    fx *f = *state;
    ipu_package *bad = uninitialized_copy_package(f);
    /* The same program with all 64 source bytes written. */
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    background_compute(f, b, slot, T);
    tpkg_data(b, T, f->X, 64, 7);
    tpkg_kernel list[] = {tpkg_fill(f->Y, 64, 0x01020304u), tpkg_copy(f->X, f->Z, 64)};
    tpkg_compute_list(b, T, slot, list, 2, 1);
    emit(f, b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0);
    ipu_package *good = tpkg_build(f->ctx, b);

    ipu_device *dev = tpkg_device(f->ctx, bad);
    assert_int_equal(ipu_device_initialize(f->ctx, dev, bad), IPU_OK);
    assert_int_equal(run_status(f, dev), IPU_ERR_DEVICE_FAULT);
    for (int i = 0; i < 2; i++) {
        ipu_ctx_clear_error(f->ctx);
        assert_int_equal(run_status(f, dev), IPU_ERR_STATE);
        assert_non_null(strstr(ipu_ctx_errmsg(f->ctx), "fault"));
        /* The refused run leaves the fault report as it was. */
        json_t *fault = keep(f, tpkg_fault(f->ctx, dev));
        TPKG_EXPECT_FAULT(fault, "uninitialized_read", T, f->X + 16, f->X + 64);
    }
    /* Initialized again (with a clean package), the device runs, repeatedly. */
    assert_int_equal(ipu_device_initialize(f->ctx, dev, good), IPU_OK);
    assert_int_equal(run_status(f, dev), IPU_OK);
    assert_int_equal(run_status(f, dev), IPU_OK);
    json_t *none = keep(f, tpkg_fault(f->ctx, dev));
    assert_string_equal(tpkg_fault_str(none, "kind"), "none");
    uint8_t copied[64];
    assert_int_equal(ipu_device_read(f->ctx, dev, T, f->Z, copied, 64), IPU_OK);
    for (uint32_t i = 0; i < 64; i++)
        assert_int_equal(copied[i], (uint8_t)(7 + i * 37u));
    /* Initialized again with the faulting package, it faults the same way. */
    assert_int_equal(ipu_device_initialize(f->ctx, dev, bad), IPU_OK);
    assert_int_equal(run_status(f, dev), IPU_ERR_DEVICE_FAULT);
    json_t *fault = keep(f, tpkg_fault(f->ctx, dev));
    TPKG_EXPECT_FAULT(fault, "uninitialized_read", T, f->X + 16, f->X + 64);
    assert_int_equal(run_status(f, dev), IPU_ERR_STATE);
    ipu_device_free(dev);
    ipu_package_free(bad);
    ipu_package_free(good);
}

/* ---- an exchange phase whose table changes after it ran ------------------------ */

/* Tile 9 sends 4 words from X at cycle 0 and tile T receives them into Y
 * (with the background transfer); returns tile T's table address. */
static uint32_t clean_exchange(fx *f, ipu_pkg_builder *b, uint32_t slot)
{
    background_exchange(f, b, slot);
    tpkg_data(b, 9, f->X, 16, 9);
    tpkg_xrow send = tpkg_send(0, 4, f->X), recv = tpkg_recv(9, f->L, 4, f->Y);
    tpkg_exchange_table(b, 9, slot, &send, 1);
    return tpkg_exchange_table(b, T, slot, &recv, 1);
}

static void test_exchange_fault_after_patch(void **state)
{
    fx *f = *state;
    /* Repeat 3 { step(exchange) }: a table patch sets the cycle of tile T's
     * receive to L, L, then L + 40, where tile 9 sends nothing.  The first
     * two iterations pass; the third must be checked again and fault. */
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b), patch_slot = ipu_pkg_new_slot(b);
    uint32_t table = clean_exchange(f, b, slot);
    uint32_t cycles[] = {f->L, f->L, f->L + 40};
    uint32_t cycles_at = tpkg_put_words(b, T, cycles, 3);
    tpkg_patch patch = {IPU_PATCH_TABLE, table + 4 + 4, cycles_at, 3};
    tpkg_patch_list(b, T, patch_slot, &patch, 1);
    emit(f, b, 0, IPU_OP_REPEAT, 3, 1, patch_slot);
    emit(f, b, 0, IPU_OP_STEP, IPU_NO_SLOT, slot, 0);
    json_t *fault = run_to_fault(f, tpkg_build(f->ctx, b));
    TPKG_EXPECT_FAULT(fault, "exchange_unmatched_receive", T, f->Y, f->Y + 16);
    expect_where(fault, NULL, -1, 0);
    /* Steps: patch, exchange, patch, exchange, patch, then the faulting exchange. */
    expect_position(fault, "main", 1, 5);
}

static void test_exchange_fault_after_debug_write(void **state)
{
    fx *f = *state;
    /* The clean exchange runs twice; then a debug write moves tile T's
     * receive to cycle L + 40, and the next run must fault. */
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    uint32_t table = clean_exchange(f, b, slot);
    emit(f, b, 0, IPU_OP_STEP, IPU_NO_SLOT, slot, 0);
    ipu_package *pkg = tpkg_build(f->ctx, b);
    ipu_device *dev = tpkg_device(f->ctx, pkg);
    assert_int_equal(ipu_device_initialize(f->ctx, dev, pkg), IPU_OK);
    assert_int_equal(run_status(f, dev), IPU_OK);
    assert_int_equal(run_status(f, dev), IPU_OK);
    uint8_t cycle[4] = {(uint8_t)(f->L + 40), 0, 0, 0};
    assert_int_equal(ipu_device_write(f->ctx, dev, T, table + 4 + 4, cycle, 4), IPU_OK);
    assert_int_equal(run_status(f, dev), IPU_ERR_DEVICE_FAULT);
    json_t *fault = keep(f, tpkg_fault(f->ctx, dev));
    TPKG_EXPECT_FAULT(fault, "exchange_unmatched_receive", T, f->Y, f->Y + 16);
    expect_where(fault, NULL, -1, 0);
    ipu_device_free(dev);
    ipu_package_free(pkg);
}

static void test_fault_in_init_program(void **state)
{
    fx *f = *state;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t init_slot = ipu_pkg_new_slot(b), main_slot = ipu_pkg_new_slot(b);
    background_compute(f, b, main_slot, TILES); /* every tile: a clean main step */
    tpkg_kernel bad = tpkg_fill(f->p.sram_base, 16, 0);
    tpkg_compute_list(b, T, init_slot, &bad, 1, 1);
    emit(f, b, 1, IPU_OP_STEP, init_slot, IPU_NO_SLOT, 0);
    emit(f, b, 0, IPU_OP_STEP, main_slot, IPU_NO_SLOT, 0);
    ipu_package *pkg = tpkg_build(f->ctx, b);
    tpkg_outcome o = tpkg_execute(f->ctx, pkg);
    ipu_status init = o.init, run = o.run;
    json_t *fault = keep(f, json_incref(o.fault));
    tpkg_outcome_free(&o);
    assert_int_equal(init, IPU_ERR_DEVICE_FAULT);
    assert_int_equal(run, IPU_ERR_STATE);
    TPKG_EXPECT_FAULT(fault, "protected_write", T, f->p.sram_base, f->p.sram_base + 16);
    expect_where(fault, "fill", 0, -1);
    expect_position(fault, "init", 0, 0);
    /* And on a device we keep: run is refused after the failed initialize. */
    ipu_device *dev = tpkg_device(f->ctx, pkg);
    assert_int_equal(ipu_device_initialize(f->ctx, dev, pkg), IPU_ERR_DEVICE_FAULT);
    assert_int_equal(run_status(f, dev), IPU_ERR_STATE);
    ipu_device_free(dev);
    ipu_package_free(pkg);
}

/* A device unloaded and given another package keeps no written state of the
 * first: tile T's bytes at X, all written by the first package, are
 * unwritten for the second (which writes 16 of them), and the report of the
 * unloaded device names no fault. */
static void test_unloaded_device_forgets_written_bytes(void **state)
{
    fx *f = *state;
    ipu_pkg_builder *b = tpkg_builder(f->ctx, &f->p);
    uint32_t slot = ipu_pkg_new_slot(b);
    tpkg_kernel fill = tpkg_fill(f->X, 64, 0x05060708u);
    tpkg_compute_list(b, T, slot, &fill, 1, 1);
    emit(f, b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0);
    ipu_package *first = tpkg_build(f->ctx, b), *second = uninitialized_copy_package(f);
    ipu_device *dev = tpkg_device(f->ctx, first);
    assert_int_equal(ipu_device_initialize(f->ctx, dev, first), IPU_OK);
    assert_int_equal(run_status(f, dev), IPU_OK);
    ipu_device_unload(dev);
    ipu_package_free(first);
    char *text = NULL;
    assert_int_equal(ipu_device_fault_json(f->ctx, dev, &text), IPU_OK);
    json_t *none = keep(f, json_loads(text, 0, NULL));
    ipu_free(text);
    assert_string_equal(tpkg_fault_str(none, "kind"), "none");
    assert_int_equal(ipu_device_initialize(f->ctx, dev, second), IPU_OK);
    assert_int_equal(run_status(f, dev), IPU_ERR_DEVICE_FAULT);
    assert_int_equal(ipu_device_fault_json(f->ctx, dev, &text), IPU_OK);
    json_t *fault = keep(f, json_loads(text, 0, NULL));
    ipu_free(text);
    TPKG_EXPECT_FAULT(fault, "uninitialized_read", T, f->X + 16, f->X + 64);
    ipu_device_free(dev);
    ipu_package_free(second);
}

int main(void)
{
#define T_(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T_(test_uninitialized_read_kernel),
        T_(test_unloaded_device_forgets_written_bytes),
        T_(test_uninitialized_read_after_full_chunks),
        T_(test_uninitialized_read_exchange_send),
        T_(test_protected_write_runtime_state),
        T_(test_protected_write_kernel_code),
        T_(test_protected_write_descriptors),
        T_(test_protected_write_exchange_receive),
        T_(test_out_of_bounds_crossing_end),
        T_(test_out_of_bounds_read_in_tail),
        T_(test_misaligned_gemm_operand),
        T_(test_misaligned_wide_operand_in_region0),
        T_(test_element_conflict_a_and_c),
        T_(test_element_conflict_b_and_c),
        T_(test_exchange_unmatched_receive),
        T_(test_exchange_unmatched_receive_before_latency),
        T_(test_exchange_window_partially_outside),
        T_(test_exchange_window_paired_receive_of_unpaired_send),
        T_(test_exchange_port_conflict_two_sends),
        T_(test_exchange_port_conflict_paired_partner),
        T_(test_exchange_conflicting_writers),
        T_(test_exchange_read_write_conflict),
        T_(test_exchange_fault_after_patch),
        T_(test_exchange_fault_after_debug_write),
        T_(test_missing_kernel),
        T_(test_malformed_descriptor_progression_garbage),
        T_(test_malformed_descriptor_progression_wrong_arg_count),
        T_(test_malformed_descriptor_patch_table_past_end),
        T_(test_malformed_descriptor_patch_count_overflow),
        T_(test_malformed_descriptor_host_rows_overlap),
        T_(test_malformed_descriptor_host_rows_past_aperture),
        T_(test_fault_requires_initialize_again),
        T_(test_fault_in_init_program),
    };
#undef T_
    return cmocka_run_group_tests(tests, NULL, NULL);
}
