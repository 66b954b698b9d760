/* paths.h: file names made from names a user gave (a workload's name from a
 * graph description, say) and paths of files inside a folder.  A name never
 * becomes a path as it is: it is reduced to the bytes a file name may safely
 * hold, so the file stays in the folder it was meant for. */
#ifndef IPU_CORE_PATHS_H
#define IPU_CORE_PATHS_H

#include <stddef.h>

#include "core/core.h"

/* name as one part of a file name, in out (size bytes, at least 2): each
 * byte of [A-Za-z0-9_-] kept, every other one ('/', '.', spaces, control
 * and non-ASCII bytes) replaced by '_', cut to size - 1 bytes; an empty name
 * gives "_".  The result holds no '/', no '.' and is never empty, so it
 * names no folder and no hidden file. */
void ipu_file_name_part(const char *name, char *out, size_t size);

/* directory/file into out (size bytes).  file must be one plain file name
 * (not empty, no '/', not starting with '.'), and the path must fit:
 * IPU_ERR_INVALID_ARGUMENT otherwise (a path cut short would name another
 * file). */
ipu_status ipu_path_in_folder(ipu_ctx *ctx, const char *directory, const char *file, char *out, size_t size);

#endif
