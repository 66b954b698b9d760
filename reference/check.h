/* check.h: comparing a device output with its reference.  Three criteria,
 * all of which must hold:
 *   - cosine per row: a row is one token's embedding; its cosine similarity
 *     with the reference row (in double) must reach min_cosine.  A row fails
 *     when it holds a nonfinite value (in the reference or on the device),
 *     when one side's row has zero norm and the other's not (two rows of
 *     zeros are equal: cosine 1), or when its cosine is below;
 *   - elementwise: every element finite on both sides keeps
 *     |d - r| <= atol + rtol * |r|;
 *   - norm ratio: the device tensor's norm over the reference's stays within
 *     1 +- norm_tolerance (cosine alone is blind to scale).
 * The result (a JSON object) reports each criterion's figures: the minimum
 * cosine and its row, the mean cosine, the maximum absolute error and its
 * element, the elementwise failures with the first and the worst element
 * (expected, got, error, bound), the smallest atol that would pass at this
 * rtol (the margin a noise floor is measured with), the norm ratio, the
 * counts of failed, nonfinite and zero-norm rows, the first failed rows, the
 * criteria and whether the check passed.  Rows are checked in parallel and
 * reduced in row order, so the result does not depend on the thread count.
 */
#ifndef IPU_CHECK_H
#define IPU_CHECK_H

#include <jansson.h>

#include "core/core.h"

/* How many failed rows the result lists by index. */
#define IPU_CHECK_LISTED_ROWS 16

typedef struct ipu_check_criteria {
    double min_cosine;     /* in [-1, 1] */
    double atol, rtol;     /* >= 0 */
    double norm_tolerance; /* >= 0 */
} ipu_check_criteria;

/* Criteria from a JSON object {"min_cosine", atol_key, "rtol",
 * "norm_tolerance"}, every field a number (the message names a missing one). */
ipu_status ipu_check_parse_criteria(ipu_ctx *ctx, const char *text, const char *atol_key,
                                    ipu_check_criteria *c);

/* Check rows x cols device values (bytes of `dtype`, decoded with
 * ipu_num_decode at FP8 scale `scale`) against rows x cols reference floats.
 * *result is a new JSON object:
 *   rows, cols, dtype, min_cosine_threshold (also as threshold), atol, rtol,
 *   norm_tolerance, passed, cosine_passed, elementwise_passed, norm_passed,
 *   min_cosine, min_cosine_row (null when no row has a defined cosine),
 *   mean_cosine (over rows with a defined cosine; null when none),
 *   max_abs_error, max_abs_error_index, max_abs_error_row, max_abs_error_col
 *   (over elements finite on both sides; index null when there is none),
 *   elementwise_failures, first_failed_element and worst_element ({row, col,
 *   index, expected, got, abs_error, bound}; null when none fails / when no
 *   element is finite on both sides), atol_needed,
 *   norm_ratio (null when the reference norm is zero),
 *   failed_rows, below_threshold_rows, nonfinite_rows, zero_norm_rows,
 *   failed_row_list (the first IPU_CHECK_LISTED_ROWS failed rows). */
ipu_status ipu_check_rows(ipu_ctx *ctx, const float *reference, const void *device, int dtype,
                          int scale, size_t rows, size_t cols, const ipu_check_criteria *criteria,
                          json_t **result);

#endif
