/* sim_compute.c: a compute phase.  Every tile (in parallel) fetches its
 * compute list from its slot table in SRAM, checks each descriptor (entry
 * known, code present on the tile, arguments well-formed), checks every
 * operand (bounds, alignment, region, protection, initialization, its live
 * allocation, element separation) and runs the kernel body, charging the kernel's cycles.
 */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#include "device/sim.h"
#include "kernels/kernels.h"

/* Elements [first, last] touched by an operand. */
static void elements(const sim *s, const ipu_operand *op, uint32_t *first, uint32_t *last)
{
    *first = op->address / s->p.element_bytes;
    *last = (op->address + (op->size ? op->size : 1) - 1) / s->p.element_bytes;
}

/* Check the call's arguments and operands; at is its descriptor's address. */
static int check_call(sim *s, uint32_t tile, uint32_t at, ipu_kernel_call *call)
{
    const char *bad = ipu_kernel_describe(call);
    if (bad)
        return sim_fault(s, tile, IPU_FAULT_MALFORMED_DESCRIPTOR, at, at + 4 + 4 * call->arg_count,
                         "%s: %s",
                         ipu_kernel_name(call->entry) ? ipu_kernel_name(call->entry) : "kernel", bad);
    for (uint32_t i = 0; i < call->operand_count; i++) {
        const ipu_operand *op = &call->operands[i];
        if (sim_check(s, tile, op->address, op->size, op->access, op->alignment, op->region1,
                      ipu_kernel_name(call->entry), op->name) ||
            sim_check_allocation(s, tile, op->address, op->size, ipu_kernel_name(call->entry),
                                 op->name))
            return 1;
    }
    for (uint32_t i = 0; i < call->separate_count; i++) {
        const ipu_operand *a = &call->operands[call->separate[i][0]];
        const ipu_operand *b = &call->operands[call->separate[i][1]];
        uint32_t a0, a1, b0, b1;
        elements(s, a, &a0, &a1);
        elements(s, b, &b0, &b1);
        if (a0 <= b1 && b0 <= a1) {
            uint32_t shared = a0 > b0 ? a0 : b0;
            ipu_fault *f = &s->tiles[tile].fault;
            if (s->tiles[tile].faulted)
                return 1; /* the tile's first fault stands */
            sim_fault(s, tile, IPU_FAULT_ELEMENT_CONFLICT, shared * s->p.element_bytes,
                             (shared + 1) * s->p.element_bytes,
                             "%s operands '%s' [0x%X, 0x%X) and '%s' [0x%X, 0x%X) share memory "
                             "element %u",
                             ipu_kernel_name(call->entry), a->name, a->address,
                             a->address + a->size, b->name, b->address, b->address + b->size,
                             shared);
            /* Both operands' allocations (their own, when the table has them). */
            f->alloc = ipu_pkg_alloc_at(s->pkg, tile, a->address, s->phase);
            f->other = ipu_pkg_alloc_at(s->pkg, tile, b->address, s->phase);
            return 1;
        }
    }
    return 0;
}

/* Run one tile's compute list; returns 1 on a fault. */
static int run_tile(sim *s, uint32_t tile, uint32_t list, float **scratch, size_t *scratch_size)
{
    sim_tile *t = &s->tiles[tile];
    uint32_t count;
    if (sim_fetch_u32(s, tile, list, &count, "compute list"))
        return 1;
    uint32_t at = list + 4;
    for (uint32_t d = 0; d < count; d++) {
        ipu_kernel_call call = {0};
        uint32_t head;
        if (sim_fetch_u32(s, tile, at, &head, "kernel descriptor"))
            goto fault;
        call.entry = (int)(head & 0xFFFF);
        call.arg_count = head >> 16;
        if (!ipu_kernel_arg_count(call.entry) || call.arg_count > IPU_KERNEL_MAX_ARGS) {
            sim_fault(s, tile, IPU_FAULT_MALFORMED_DESCRIPTOR, at, at + 4,
                      "descriptor %u calls unknown entry %d with %u arguments", d, call.entry,
                      call.arg_count);
            goto fault;
        }
        if (sim_check_descriptor(s, tile, at, 4 + 4 * call.arg_count, "kernel descriptor"))
            goto fault;
        for (uint32_t i = 0; i < call.arg_count; i++)
            call.args[i] = ipu_load_u32(sim_ptr(s, tile, at + 4 + 4 * i));
        int body = ipu_kernel_body_of(call.entry);
        if (!(t->code_entries & (1ull << call.entry)) ||
            (body != IPU_BODY_NONE && !(t->code_bodies & (1ull << body)))) {
            sim_fault(s, tile, IPU_FAULT_MISSING_KERNEL, at, at + 4 + 4 * call.arg_count,
                      "descriptor %u calls %s, whose %s is not loaded on tile %u", d,
                      ipu_kernel_name(call.entry),
                      (t->code_entries & (1ull << call.entry)) ? "worker body" : "code", tile);
            goto fault;
        }
        if (check_call(s, tile, at, &call))
            goto fault;
        size_t need = ipu_kernel_scratch_floats(&call);
        if (need > *scratch_size) {
            float *grown = ipu_realloc(s->ctx, *scratch, need * sizeof(float));
            if (!grown) {
                sim_out_of_memory(s, tile);
                goto fault;
            }
            *scratch = grown;
            *scratch_size = need;
        }
        uint8_t *ptr[IPU_KERNEL_MAX_OPERANDS];
        for (uint32_t i = 0; i < call.operand_count; i++)
            ptr[i] = sim_ptr(s, tile, call.operands[i].address);
        ipu_kernel_run(&call, ptr, *scratch);
        for (uint32_t i = 0; i < call.operand_count; i++)
            if (call.operands[i].access & IPU_ACCESS_WRITE)
                sim_mark_written(s, tile, call.operands[i].address, call.operands[i].size);
        t->step_cycles += ipu_kernel_cycles(&call, &s->p);
        at += 4 + 4 * call.arg_count;
        continue;
    fault:
        t->fault.entry = call.entry;
        t->fault.descriptor = (int)d;
        return 1;
    }
    return 0;
}

int sim_compute_phase(sim *s, uint32_t slot)
{
    int64_t tiles = s->p.tiles;
    /* Tiles run in parallel; each tile's sgemm runs on one thread. */
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
#pragma omp parallel num_threads(s->threads)
    {
        int thread = omp_get_thread_num();
#pragma omp for schedule(dynamic, 8)
        for (int64_t i = 0; i < tiles; i++) {
            uint32_t tile = (uint32_t)i, list;
            /* One tile's kernels take milliseconds, a loaded machine's whole
             * phase up to a second: a cancel request skips the tiles left
             * (the caller stops the program after the phase). */
            if (ipu_cancel_requested(s->ctx))
                continue;
            sim_prefetch_next(s, tile, slot);
            s->tiles[tile].step_cycles = 0;
            if (sim_fetch_u32(s, tile, s->pkg->slot_tables[tile] + 4 * slot, &list, "slot table"))
                continue;
            if (list)
                run_tile(s, tile, list, &s->scratch[thread], &s->scratch_floats[thread]);
        }
    }
    openblas_set_num_threads(blas_threads);
    return sim_collect_fault(s);
}
