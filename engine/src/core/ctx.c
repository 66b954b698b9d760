/* ctx.c: the context (first error with file:line, log and progress callbacks,
 * thread count, cancel request), status names, ipu_free and the ABI version.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

uint32_t ipu_abi_version(void) { return IPU_ABI_VERSION; }

const char *ipu_status_name(ipu_status status)
{
    switch (status) {
    case IPU_OK: return "ok";
    case IPU_ERR_INVALID_ARGUMENT: return "invalid_argument";
    case IPU_ERR_NO_MEMORY: return "no_memory";
    case IPU_ERR_IO: return "io";
    case IPU_ERR_MALFORMED: return "malformed";
    case IPU_ERR_DEVICE_FAULT: return "device_fault";
    case IPU_ERR_STATE: return "state";
    case IPU_ERR_INTERNAL: return "internal";
    case IPU_ERR_CANCELLED: return "cancelled";
    case IPU_ERR_NO_PLAN: return "no_plan";
    }
    return "unknown";
}

void ipu_free(void *pointer) { free(pointer); }

ipu_ctx *ipu_ctx_create(void) { return calloc(1, sizeof(ipu_ctx)); }

void ipu_ctx_free(ipu_ctx *ctx) { free(ctx); }

const char *ipu_ctx_errmsg(const ipu_ctx *ctx) { return ctx ? ctx->errmsg : ""; }

void ipu_ctx_clear_error(ipu_ctx *ctx)
{
    ctx->status = IPU_OK;
    ctx->errmsg[0] = '\0';
}

void ipu_ctx_set_log(ipu_ctx *ctx, ipu_log_fn fn, void *user)
{
    ctx->log_fn = fn;
    ctx->log_user = user;
}

void ipu_ctx_set_progress(ipu_ctx *ctx, ipu_progress_fn fn, void *user)
{
    ctx->progress_fn = fn;
    ctx->progress_user = user;
}

void ipu_ctx_set_threads(ipu_ctx *ctx, int threads)
{
    ctx->threads = threads < 0 ? 0 : threads > IPU_MAX_THREADS ? IPU_MAX_THREADS : threads;
}

void ipu_ctx_cancel(ipu_ctx *ctx)
{
    if (ctx)
        atomic_store(&ctx->cancelled, 1);
}

ipu_ctx *ipu_ctx_child(ipu_ctx *parent)
{
    ipu_ctx *child = ipu_allocation_allowed(parent) ? calloc(1, sizeof *child) : NULL;
    if (child) {
        child->threads = 1;
        child->parent = parent;
    }
    return child;
}

bool ipu_cancel_requested(const ipu_ctx *ctx)
{
    return ctx && (atomic_load(&ctx->cancelled) || (ctx->parent && atomic_load(&ctx->parent->cancelled)));
}

ipu_status ipu_check_cancel_at(ipu_ctx *ctx, const char *file, int line)
{
    if (!ipu_cancel_requested(ctx))
        return IPU_OK;
    return ipu_fail_at(ctx, IPU_ERR_CANCELLED, file, line, "cancelled");
}

ipu_status ipu_fail_at(ipu_ctx *ctx, ipu_status status, const char *file, int line,
                       const char *fmt, ...)
{
    if (ctx && ctx->status == IPU_OK) {
        const char *base = strrchr(file, '/');
        char message[900];
        va_list args;
        va_start(args, fmt);
        vsnprintf(message, sizeof message, fmt, args);
        va_end(args);
        /* Keep the source location short: the stage folder and file. */
        if (base) {
            const char *p = base;
            while (p > file && p[-1] != '/')
                p--;
            base = p;
        } else {
            base = file;
        }
        snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s [%s:%d]", message, base, line);
        ctx->status = status;
    }
    return status;
}

void ipu_log(ipu_ctx *ctx, ipu_log_level level, const char *fmt, ...)
{
    if (!ctx || !ctx->log_fn)
        return;
    char message[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    ctx->log_fn(ctx->log_user, (int)level, message);
}

ipu_status ipu_progress(ipu_ctx *ctx, const char *stage, uint64_t done, uint64_t total)
{
    if (ctx && ctx->progress_fn)
        ctx->progress_fn(ctx->progress_user, stage, done, total);
    return IPU_CHECK_CANCEL(ctx);
}

ipu_status ipu_inconsistent_at(ipu_ctx *ctx, const char *stage, const char *file, int line,
                               const char *fmt, ...)
{
    if (ctx && (ctx->status == IPU_ERR_NO_MEMORY || ctx->status == IPU_ERR_CANCELLED))
        return ctx->status; /* the check could not finish: no inconsistency found */
    char what[256], found[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(what, sizeof what, fmt, args);
    va_end(args);
    snprintf(found, sizeof found, "%s", ctx ? ctx->errmsg : "");
    if (ctx)
        ipu_ctx_clear_error(ctx);
    return ipu_fail_at(ctx, IPU_ERR_INTERNAL, file, line, "compiler inconsistency in the %s stage, %s: %s",
                       stage, what, found);
}
