/* paths.c: file names made from names a user gave, and paths of files in a
 * folder (paths.h). */
#include <stdio.h>
#include <string.h>

#include "core/paths.h"

static int safe_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

void ipu_file_name_part(const char *name, char *out, size_t size)
{
    size_t n = 0;
    for (; name && name[n] && n + 1 < size; n++)
        out[n] = safe_byte((unsigned char)name[n]) ? name[n] : '_';
    if (n == 0 && size > 1)
        out[n++] = '_';
    if (size)
        out[n] = '\0';
}

ipu_status ipu_path_in_folder(ipu_ctx *ctx, const char *directory, const char *file, char *out, size_t size)
{
    if (!file || !*file || file[0] == '.' || strchr(file, '/'))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "'%s' is not a plain file name", file ? file : "(null)");
    int n = snprintf(out, size, "%s/%s", directory, file);
    if (n < 0 || (size_t)n >= size)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "the path of '%s' in folder '%.200s' is longer than %zu bytes",
                        file, directory, size - 1);
    return IPU_OK;
}
