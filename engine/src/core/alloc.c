/* alloc.c: the context's allocator.  Every allocation the library makes on a
 * context's behalf goes through these, which count it and fail the one a test
 * named with ipu_ctx_fail_allocation (so a test can walk the failure over
 * every allocation of a whole compile and run); what they return is released
 * with plain free().
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

void ipu_ctx_fail_allocation(ipu_ctx *ctx, uint64_t nth)
{
    if (ctx)
        ctx->fail_allocation = nth;
}

uint64_t ipu_ctx_allocations(const ipu_ctx *ctx) { return ctx ? atomic_load(&ctx->allocations) : 0; }

bool ipu_allocation_allowed(ipu_ctx *ctx)
{
    if (!ctx)
        return true;
    uint64_t nth = atomic_fetch_add(&ctx->allocations, 1) + 1;
    return nth != ctx->fail_allocation;
}

void *ipu_malloc(ipu_ctx *ctx, size_t size) { return ipu_allocation_allowed(ctx) ? malloc(size) : NULL; }

void *ipu_calloc(ipu_ctx *ctx, size_t count, size_t size)
{
    return ipu_allocation_allowed(ctx) ? calloc(count, size) : NULL;
}

void *ipu_realloc(ipu_ctx *ctx, void *pointer, size_t size)
{
    return ipu_allocation_allowed(ctx) ? realloc(pointer, size) : NULL;
}

char *ipu_strdup(ipu_ctx *ctx, const char *text)
{
    size_t size = strlen(text) + 1;
    char *copy = ipu_malloc(ctx, size);
    if (copy)
        memcpy(copy, text, size);
    return copy;
}
