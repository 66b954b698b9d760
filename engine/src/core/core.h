/* core.h: the context every call hangs off (first error with file:line, log
 * and progress callbacks, thread count, allocation count), status helpers and
 * small utilities shared by all stages: the context's allocator (alloc.c),
 * growable byte buffers, atomic file writes and 64-bit digests.
 */
#ifndef IPU_CORE_H
#define IPU_CORE_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipu/ipu.h"

struct ipu_ctx {
    ipu_status status; /* first error since the last clear */
    char errmsg[1024];
    ipu_log_fn log_fn;
    void *log_user;
    ipu_progress_fn progress_fn;
    void *progress_user;
    int threads;
    atomic_int cancelled; /* set by ipu_ctx_cancel, from any thread */
    _Atomic uint64_t allocations; /* made through ipu_malloc and friends */
    uint64_t fail_allocation;     /* the one that fails (0 = none): a test hook */
    ipu_ctx *parent;              /* a worker's context (ipu_ctx_child): cancelled with its parent */
};

/* A context for work done on another thread on behalf of parent: its own
 * error and allocation count, one thread, no log or progress callbacks,
 * cancelled when parent is.  NULL when out of memory; ipu_ctx_free. */
ipu_ctx *ipu_ctx_child(ipu_ctx *parent);

#if defined(__GNUC__)
#define IPU_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define IPU_PRINTF(a, b)
#endif

/* Record an error (the first one wins) and return its status. */
ipu_status ipu_fail_at(ipu_ctx *ctx, ipu_status status, const char *file, int line,
                       const char *fmt, ...) IPU_PRINTF(5, 6);
#define IPU_FAIL(ctx, status, ...) ipu_fail_at((ctx), (status), __FILE__, __LINE__, __VA_ARGS__)
#define IPU_NO_MEMORY(ctx) IPU_FAIL((ctx), IPU_ERR_NO_MEMORY, "out of memory")
/* A check of the compiler's own product failed in `stage` (what: the object
 * it was checking): the context's error becomes IPU_ERR_INTERNAL, "compiler
 * inconsistency in the <stage> stage, <what>: <the check's message>". */
#define IPU_INCONSISTENT(ctx, stage, ...) ipu_inconsistent_at((ctx), (stage), __FILE__, __LINE__, __VA_ARGS__)
ipu_status ipu_inconsistent_at(ipu_ctx *ctx, const char *stage, const char *file, int line,
                               const char *fmt, ...) IPU_PRINTF(5, 6);

/* Internal invariants only: never for user input. */
#define IPU_ASSERT(ctx, cond)                                                         \
    do {                                                                              \
        if (!(cond))                                                                  \
            return IPU_FAIL((ctx), IPU_ERR_INTERNAL, "internal invariant failed: %s", \
                            #cond);                                                   \
    } while (0)
#define IPU_TRY(expr)                        \
    do {                                     \
        ipu_status ipu_try_status_ = (expr); \
        if (ipu_try_status_ != IPU_OK)       \
            return ipu_try_status_;          \
    } while (0)

/* IPU_ERR_CANCELLED (recorded as the context's error) once ipu_ctx_cancel was
 * called, else IPU_OK: long work calls it at its step and stage boundaries. */
ipu_status ipu_check_cancel_at(ipu_ctx *ctx, const char *file, int line);
#define IPU_CHECK_CANCEL(ctx) ipu_check_cancel_at((ctx), __FILE__, __LINE__)
/* Was ipu_ctx_cancel called (on ctx or its parent)?  Records nothing, so a
 * parallel loop's iterations may ask it; the loop's caller then reports
 * IPU_CHECK_CANCEL once the loop is over. */
bool ipu_cancel_requested(const ipu_ctx *ctx);

void ipu_log(ipu_ctx *ctx, ipu_log_level level, const char *fmt, ...) IPU_PRINTF(3, 4);
/* Report progress at a boundary of long work; returns IPU_CHECK_CANCEL's status. */
ipu_status ipu_progress(ipu_ctx *ctx, const char *stage, uint64_t done, uint64_t total);

/* The context's allocator: malloc, calloc, realloc and strdup that count
 * each call on the context (from any thread) and return NULL for the one
 * ipu_ctx_fail_allocation names.  The caller reports NULL with
 * IPU_NO_MEMORY; what they return is released with plain free(). */
void *ipu_malloc(ipu_ctx *ctx, size_t size);
void *ipu_calloc(ipu_ctx *ctx, size_t count, size_t size);
void *ipu_realloc(ipu_ctx *ctx, void *pointer, size_t size);
char *ipu_strdup(ipu_ctx *ctx, const char *text);
/* Count an allocation made another way (mmap); false when it must fail. */
bool ipu_allocation_allowed(ipu_ctx *ctx);

/* A growable byte buffer. */
typedef struct ipu_buf {
    uint8_t *data;
    size_t size;
    size_t capacity;
} ipu_buf;

ipu_status ipu_buf_reserve(ipu_ctx *ctx, ipu_buf *buf, size_t capacity);
ipu_status ipu_buf_append(ipu_ctx *ctx, ipu_buf *buf, const void *data, size_t size);
ipu_status ipu_buf_append_u32(ipu_ctx *ctx, ipu_buf *buf, uint32_t value);
ipu_status ipu_buf_append_zeros(ipu_ctx *ctx, ipu_buf *buf, size_t size);
void ipu_buf_free(ipu_buf *buf);

/* Grow a typed array (*items, *count, *capacity) to hold one more element. */
ipu_status ipu_grow(ipu_ctx *ctx, void **items, size_t element_size, size_t count,
                    size_t *capacity);
#define IPU_GROW(ctx, items, count, capacity) \
    ipu_grow((ctx), (void **)&(items), sizeof(*(items)), (count), &(capacity))

/* Write a whole file atomically: a temporary file beside it, then rename. */
ipu_status ipu_write_file_atomic(ipu_ctx *ctx, const char *path, const void *data, size_t size);
/* Read a whole file; *out is released with free(). */
ipu_status ipu_read_file(ipu_ctx *ctx, const char *path, uint8_t **out, size_t *out_size);

/* FNV-1a 64-bit digest. */
uint64_t ipu_digest64(const void *data, size_t size);

static inline uint32_t ipu_load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline void ipu_store_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline uint64_t ipu_load_u64(const uint8_t *p)
{
    return (uint64_t)ipu_load_u32(p) | ((uint64_t)ipu_load_u32(p + 4) << 32);
}
static inline void ipu_store_u64(uint8_t *p, uint64_t v)
{
    ipu_store_u32(p, (uint32_t)v);
    ipu_store_u32(p + 4, (uint32_t)(v >> 32));
}

#endif
