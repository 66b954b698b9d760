/* kernels.c: the kernel registry.  Every family file (kernels_*.c) declares
 * its entry points as ipu_kernel_def arrays; this file finds an entry's
 * definition and answers for it: name, argument count, code sizes (a
 * supervisor part per entry, worker bodies shared between entries), operand
 * decoding, cycles, scratch and the body.
 */
#include <string.h>

#include "kernels/kernel_def.h"

static const ipu_kernel_family *const FAMILIES[] = {
    &ipu_kernels_basic,
    &ipu_kernels_gemm,
    &ipu_kernels_attention,
    &ipu_kernels_norm,
    &ipu_kernels_panels,
};

/* Worker body code bytes (shared by the entries that use the body). */
static const uint32_t BODY_BYTES[IPU_BODY_END] = {
    [IPU_BODY_MEMORY] = 256, [IPU_BODY_VECTOR] = 1536, [IPU_BODY_AMP] = 4096,
    [IPU_BODY_REDUCE] = 1792, [IPU_BODY_ATTENTION] = 3072, [IPU_BODY_PANELS] = 1024,
};

static const ipu_kernel_def *def(int entry)
{
    if (entry <= 0 || entry >= IPU_K_ENTRY_END)
        return NULL;
    for (size_t f = 0; f < sizeof FAMILIES / sizeof *FAMILIES; f++)
        for (size_t i = 0; i < FAMILIES[f]->count; i++)
            if (FAMILIES[f]->defs[i].entry == entry)
                return &FAMILIES[f]->defs[i];
    return NULL;
}

const char *ipu_kernel_name(int entry) { return def(entry) ? def(entry)->name : NULL; }
uint32_t ipu_kernel_arg_count(int entry) { return def(entry) ? def(entry)->args : 0; }
uint32_t ipu_kernel_supervisor_size(int entry) { return def(entry) ? def(entry)->supervisor_bytes : 0; }
int ipu_kernel_body_of(int entry) { return def(entry) ? def(entry)->body : IPU_BODY_NONE; }

int ipu_kernel_mode_arg(int entry)
{
    switch (entry) {
    case IPU_K_GEMM_F16:
    case IPU_K_GEMM_PANELS_F16:
        return 7;
    case IPU_K_GEMM_F8:
    case IPU_K_GEMM_PANELS_F8:
        return 9;
    case IPU_K_ATTN_BLOCK:
        return 13;
    default:
        return -1;
    }
}

uint32_t ipu_kernel_body_size(int body)
{
    return body > IPU_BODY_NONE && body < IPU_BODY_END ? BODY_BYTES[body] : 0;
}

uint32_t ipu_kernel_code_size(int entry)
{
    const ipu_kernel_def *d = def(entry);
    return d ? d->supervisor_bytes + ipu_kernel_body_size(d->body) : 0;
}

const char *ipu_kernel_formula(int entry, const uint32_t **sample)
{
    const ipu_kernel_def *d = def(entry);
    if (!d)
        return NULL;
    if (sample)
        *sample = d->sample;
    return d->formula;
}

void ipu_kernel_operand(ipu_kernel_call *call, const char *name, uint32_t address, uint64_t size,
                        uint32_t alignment, uint8_t access)
{
    ipu_operand *op = &call->operands[call->operand_count++];
    op->name = name;
    op->address = address;
    op->size = size > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)size;
    op->alignment = alignment;
    op->access = access;
    op->region1 = 0;
}

void ipu_kernel_separate(ipu_kernel_call *call, uint8_t a, uint8_t b)
{
    call->separate[call->separate_count][0] = a;
    call->separate[call->separate_count][1] = b;
    call->separate_count++;
}

const char *ipu_kernel_describe(ipu_kernel_call *call)
{
    const ipu_kernel_def *d = def(call->entry);
    call->operand_count = 0;
    call->separate_count = 0;
    if (!d)
        return "unknown kernel entry";
    if (call->arg_count != d->args)
        return "wrong argument count for the entry";
    return d->describe(call);
}

uint64_t ipu_kernel_cycles(const ipu_kernel_call *call, const ipu_profile *p)
{
    const ipu_kernel_def *d = def(call->entry);
    return d ? d->cycles(call, p) : 0;
}

size_t ipu_kernel_scratch_floats(const ipu_kernel_call *call)
{
    const ipu_kernel_def *d = def(call->entry);
    return d && d->scratch_floats ? d->scratch_floats(call) : 0;
}

void ipu_kernel_run(const ipu_kernel_call *call, uint8_t *const ptr[], float *scratch)
{
    const ipu_kernel_def *d = def(call->entry);
    if (d)
        d->run(call, ptr, scratch);
}
