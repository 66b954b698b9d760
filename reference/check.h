/* check.h: comparing a device output with its reference, row by row.  A row
 * is one token's embedding; its cosine similarity with the reference row is
 * computed in double.  A row fails when it holds a nonfinite value (in the
 * reference or on the device), when either side's row has zero norm, or when
 * its cosine is below the threshold.  The result (a JSON object) reports the
 * minimum cosine and its row, the mean cosine, the maximum absolute error and
 * its element, the counts of failed, nonfinite and zero-norm rows, the first
 * failed rows, the threshold and whether the check passed.  Rows are checked
 * in parallel and reduced in row order, so the result does not depend on the
 * thread count.
 */
#ifndef IPU_CHECK_H
#define IPU_CHECK_H

#include <jansson.h>

#include "core/core.h"

/* How many failed rows the result lists by index. */
#define IPU_CHECK_LISTED_ROWS 16

/* Check rows x cols device values (bytes of `dtype`, decoded with
 * ipu_num_decode at FP8 scale `scale`) against rows x cols reference floats.
 * *result is a new JSON object:
 *   rows, cols, dtype, threshold, passed,
 *   min_cosine, min_cosine_row (null when no row has a defined cosine),
 *   mean_cosine (over rows with a defined cosine; null when none),
 *   max_abs_error, max_abs_error_index, max_abs_error_row, max_abs_error_col
 *   (over elements finite on both sides; index null when there is none),
 *   failed_rows, below_threshold_rows, nonfinite_rows, zero_norm_rows,
 *   failed_row_list (the first IPU_CHECK_LISTED_ROWS failed rows). */
ipu_status ipu_check_rows(ipu_ctx *ctx, const float *reference, const void *device, int dtype,
                          int scale, size_t rows, size_t cols, double min_cosine,
                          json_t **result);

#endif
