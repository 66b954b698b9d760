/* json_file.c: a JSON document written to a file atomically, its text built
 * through jansson's dump callback so that a cancel request stops the dump of
 * a large report (a placement report runs to tens of megabytes) within a
 * piece, not after the whole text.
 */
#include "core/json_file.h"

typedef struct dump {
    ipu_ctx *ctx;
    ipu_buf text;
    ipu_status status;
} dump;

/* jansson hands over the text in small pieces: append each, stop on a cancel.
 * jansson does not stop at every piece refused, so a failure stays failed. */
static int append_piece(const char *piece, size_t size, void *data)
{
    dump *d = data;
    if (d->status != IPU_OK)
        return -1;
    d->status = IPU_CHECK_CANCEL(d->ctx);
    if (d->status == IPU_OK)
        d->status = ipu_buf_append(d->ctx, &d->text, piece, size);
    return d->status == IPU_OK ? 0 : -1;
}

ipu_status ipu_write_json_atomic(ipu_ctx *ctx, const char *path, const json_t *value)
{
    dump d = {ctx, {0}, IPU_OK};
    if (json_dump_callback(value, append_piece, &d, JSON_COMPACT) != 0 && d.status == IPU_OK)
        d.status = IPU_NO_MEMORY(ctx);
    if (d.status == IPU_OK)
        d.status = ipu_write_file_atomic(ctx, path, d.text.data, d.text.size);
    ipu_buf_free(&d.text);
    return d.status;
}
