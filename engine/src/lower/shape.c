/* shape.c: what a buffer holds, as the text the package's allocation table
 * (format 7), the memory timeline and the placement report show beside its
 * name.  One notation everywhere:
 *   - a block of a layout (a tensor's home, an operand copy, a staging
 *     layout): the block's rows x columns on its tile and the tensor's
 *     element type by its numerics name, "46x1152 f16"; a parameter
 *     sequence stores its members back to back, written first:
 *     "27x46x1152 f16" is 27 members of 46x1152 f16.  The element type is
 *     "<n>-byte" when the tensor's type is not known ("46x1152 2-byte").
 *   - any other buffer (partials, reduce and host staging, attention state):
 *     the payload bytes it was asked for, "4096 B".
 * The shape is the payload: a block's rows are padded to 8 bytes
 * (layout.c ipu_layout_stride) and every buffer's size rounded up to 8, so
 * members x rows x cols x element bytes (or the bytes) is at most the
 * allocation's size, and equal when the rows need no padding.
 */
#include <stdio.h>

#include "lower/program.h"
#include "numerics/numerics.h"

void ipu_low_buffer_shape(const ipu_low_program *prog, const ipu_low_buffer *b, char *out, size_t size)
{
    if (!size)
        return;
    const ipu_low_value *v = b->value < prog->value_count ? &prog->values[b->value] : NULL;
    size_t blocks = v ? (size_t)v->replicas * v->row_parts * v->col_parts : 0;
    if (!v || b->block >= blocks) {
        snprintf(out, size, "%u B", b->payload);
        return;
    }
    uint32_t j = b->block % v->col_parts, i = b->block / v->col_parts % v->row_parts;
    uint32_t rows = v->row_bounds[i + 1] - v->row_bounds[i], cols = v->col_bounds[j + 1] - v->col_bounds[j];
    char members[16] = "", elem[16];
    if (b->members > 1)
        snprintf(members, sizeof members, "%ux", b->members);
    const char *name = ipu_dtype_name(v->dtype);
    if (name)
        snprintf(elem, sizeof elem, "%s", name);
    else
        snprintf(elem, sizeof elem, "%u-byte", v->elem);
    snprintf(out, size, "%s%ux%u %s", members, rows, cols, elem);
}
