/* json_file.h: writing a JSON document to a file atomically, cancellably. */
#ifndef IPU_CORE_JSON_FILE_H
#define IPU_CORE_JSON_FILE_H

#include <jansson.h>

#include "core/core.h"

/* Write value (jansson's compact form) to path atomically (a temporary file
 * beside it, then rename).  The text is built in pieces, and a cancel
 * request between pieces stops it with IPU_ERR_CANCELLED, leaving no file. */
ipu_status ipu_write_json_atomic(ipu_ctx *ctx, const char *path, const json_t *value);

#endif
