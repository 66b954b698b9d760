/* util.c: growable buffers and arrays, whole-file reads, atomic file writes
 * (temporary file beside the target, fsync, rename) and the FNV-1a digest.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

ipu_status ipu_buf_reserve(ipu_ctx *ctx, ipu_buf *buf, size_t capacity)
{
    if (capacity <= buf->capacity)
        return IPU_OK;
    size_t grown = buf->capacity ? buf->capacity * 2 : 256;
    if (grown < capacity)
        grown = capacity;
    uint8_t *data = ipu_realloc(ctx, buf->data, grown);
    if (!data)
        return IPU_NO_MEMORY(ctx);
    buf->data = data;
    buf->capacity = grown;
    return IPU_OK;
}

ipu_status ipu_buf_append(ipu_ctx *ctx, ipu_buf *buf, const void *data, size_t size)
{
    IPU_TRY(ipu_buf_reserve(ctx, buf, buf->size + size));
    if (size)
        memcpy(buf->data + buf->size, data, size);
    buf->size += size;
    return IPU_OK;
}

ipu_status ipu_buf_append_u32(ipu_ctx *ctx, ipu_buf *buf, uint32_t value)
{
    uint8_t bytes[4];
    ipu_store_u32(bytes, value);
    return ipu_buf_append(ctx, buf, bytes, 4);
}

ipu_status ipu_buf_append_zeros(ipu_ctx *ctx, ipu_buf *buf, size_t size)
{
    if (size == 0)
        return IPU_OK;
    IPU_TRY(ipu_buf_reserve(ctx, buf, buf->size + size));
    memset(buf->data + buf->size, 0, size);
    buf->size += size;
    return IPU_OK;
}

void ipu_buf_free(ipu_buf *buf)
{
    free(buf->data);
    memset(buf, 0, sizeof *buf);
}

ipu_status ipu_grow(ipu_ctx *ctx, void **items, size_t element_size, size_t count,
                    size_t *capacity)
{
    if (count < *capacity)
        return IPU_OK;
    size_t grown = *capacity ? *capacity * 2 : 16;
    void *data = ipu_realloc(ctx, *items, grown * element_size);
    if (!data)
        return IPU_NO_MEMORY(ctx);
    *items = data;
    *capacity = grown;
    return IPU_OK;
}

ipu_status ipu_read_file(ipu_ctx *ctx, const char *path, uint8_t **out, size_t *out_size)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return IPU_FAIL(ctx, IPU_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    ipu_buf buf = {0};
    uint8_t chunk[65536];
    size_t got;
    ipu_status status = IPU_OK;
    while ((got = fread(chunk, 1, sizeof chunk, file)) > 0) {
        status = ipu_buf_append(ctx, &buf, chunk, got);
        if (status != IPU_OK)
            break;
    }
    if (status == IPU_OK && ferror(file))
        status = IPU_FAIL(ctx, IPU_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    fclose(file);
    if (status != IPU_OK) {
        ipu_buf_free(&buf);
        return status;
    }
    *out = buf.data;
    *out_size = buf.size;
    return IPU_OK;
}

ipu_status ipu_write_file_atomic(ipu_ctx *ctx, const char *path, const void *data, size_t size)
{
    size_t length = strlen(path);
    char *temporary = ipu_malloc(ctx, length + 32);
    if (!temporary)
        return IPU_NO_MEMORY(ctx);
    snprintf(temporary, length + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *file = fopen(temporary, "wb");
    if (!file) {
        ipu_status status =
            IPU_FAIL(ctx, IPU_ERR_IO, "cannot create '%s': %s", temporary, strerror(errno));
        free(temporary);
        return status;
    }
    int ok = fwrite(data, 1, size, file) == size;
    ok = fflush(file) == 0 && ok;
    ok = fsync(fileno(file)) == 0 && ok;
    ok = fclose(file) == 0 && ok;
    if (!ok || rename(temporary, path) != 0) {
        ipu_status status = IPU_FAIL(ctx, IPU_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        remove(temporary);
        free(temporary);
        return status;
    }
    free(temporary);
    return IPU_OK;
}

uint64_t ipu_digest64(const void *data, size_t size)
{
    const uint8_t *bytes = data;
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size; i++) {
        hash ^= bytes[i];
        hash *= 0x100000001b3ull;
    }
    return hash;
}
