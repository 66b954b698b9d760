/* check.c: the per-row cosine check (see check.h).  The device values are
 * decoded to FP32 once (ipu_num_decode); then every row is measured on its
 * own (norms, dot product and largest absolute error, accumulated in double
 * in column order) into per-row records, and the records are reduced in row
 * order.  The parallel loop only fills independent records, so the result is
 * the same for any thread count.
 */
#include "reference/check.h"

#include <math.h>
#include <stdlib.h>

#include "numerics/numerics.h"

enum { ROW_NONFINITE = 1, ROW_ZERO_NORM = 2, ROW_BELOW = 4 };

typedef struct row_stat {
    double cosine;    /* defined unless nonfinite or zero-norm */
    double max_abs;   /* over elements finite on both sides, -1 when none */
    size_t max_col;
    int flags;
} row_stat;

static void measure_row(const float *ref, const float *dev, size_t cols, double threshold,
                        row_stat *s)
{
    double dot = 0, nr = 0, nd = 0;
    int nonfinite = 0;
    s->max_abs = -1;
    s->max_col = 0;
    for (size_t c = 0; c < cols; c++) {
        double r = ref[c], d = dev[c];
        if (!isfinite(r) || !isfinite(d)) {
            nonfinite = 1;
            continue;
        }
        dot += r * d;
        nr += r * r;
        nd += d * d;
        double err = fabs(r - d);
        if (err > s->max_abs) {
            s->max_abs = err;
            s->max_col = c;
        }
    }
    s->flags = 0;
    s->cosine = 0;
    if (nonfinite) {
        s->flags = ROW_NONFINITE;
        return;
    }
    if (nr == 0 || nd == 0) {
        s->flags = ROW_ZERO_NORM;
        return;
    }
    /* sqrt(nr * nd) rather than sqrt(nr) * sqrt(nd): identical rows give
     * exactly 1 (sqrt of a correctly rounded square is exact). */
    double cosine = dot / sqrt(nr * nd);
    s->cosine = cosine > 1 ? 1 : cosine < -1 ? -1 : cosine;
    if (!(s->cosine >= threshold))
        s->flags = ROW_BELOW;
}

static int set(json_t *o, const char *key, json_t *value)
{
    return value ? json_object_set_new(o, key, value) : -1;
}

static json_t *real_or_null(int defined, double v) { return defined ? json_real(v) : json_null(); }

static json_t *summarize(const row_stat *stats, size_t rows, size_t cols, int dtype,
                         double threshold)
{
    size_t failed = 0, below = 0, nonfinite = 0, zero = 0, defined = 0;
    size_t min_row = 0, err_row = 0, err_col = 0;
    double min_cos = 0, sum_cos = 0, max_err = -1;
    json_t *o = json_object(), *list = json_array();
    if (!o || !list)
        goto fail;
    for (size_t r = 0; r < rows; r++) {
        const row_stat *s = &stats[r];
        if (s->max_abs > max_err) {
            max_err = s->max_abs;
            err_row = r;
            err_col = s->max_col;
        }
        if (s->flags) {
            if (failed < IPU_CHECK_LISTED_ROWS && json_array_append_new(list, json_integer((json_int_t)r)))
                goto fail;
            failed++;
        }
        nonfinite += (s->flags & ROW_NONFINITE) != 0;
        zero += (s->flags & ROW_ZERO_NORM) != 0;
        below += (s->flags & ROW_BELOW) != 0;
        if (s->flags & (ROW_NONFINITE | ROW_ZERO_NORM))
            continue;
        if (!defined || s->cosine < min_cos) {
            min_cos = s->cosine;
            min_row = r;
        }
        sum_cos += s->cosine;
        defined++;
    }
    int has_err = max_err >= 0;
    if (set(o, "rows", json_integer((json_int_t)rows)) ||
        set(o, "cols", json_integer((json_int_t)cols)) ||
        set(o, "dtype", json_string(ipu_dtype_name(dtype))) ||
        set(o, "threshold", json_real(threshold)) ||
        set(o, "passed", json_boolean(rows > 0 && cols > 0 && failed == 0)) ||
        set(o, "min_cosine", real_or_null(defined > 0, min_cos)) ||
        set(o, "min_cosine_row", defined ? json_integer((json_int_t)min_row) : json_null()) ||
        set(o, "mean_cosine", real_or_null(defined > 0, defined ? sum_cos / (double)defined : 0)) ||
        set(o, "max_abs_error", json_real(has_err ? max_err : 0.0)) ||
        set(o, "max_abs_error_index",
            has_err ? json_integer((json_int_t)(err_row * cols + err_col)) : json_null()) ||
        set(o, "max_abs_error_row", has_err ? json_integer((json_int_t)err_row) : json_null()) ||
        set(o, "max_abs_error_col", has_err ? json_integer((json_int_t)err_col) : json_null()) ||
        set(o, "failed_rows", json_integer((json_int_t)failed)) ||
        set(o, "below_threshold_rows", json_integer((json_int_t)below)) ||
        set(o, "nonfinite_rows", json_integer((json_int_t)nonfinite)) ||
        set(o, "zero_norm_rows", json_integer((json_int_t)zero)))
        goto fail;
    int bad = set(o, "failed_row_list", list); /* steals the list, even on failure */
    list = NULL;
    if (bad)
        goto fail;
    return o;
fail:
    json_decref(list);
    json_decref(o);
    return NULL;
}

ipu_status ipu_check_rows(ipu_ctx *ctx, const float *reference, const void *device, int dtype,
                          int scale, size_t rows, size_t cols, double min_cosine,
                          json_t **result)
{
    if (!ipu_dtype_size(dtype))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "check: unknown device type %d", dtype);
    if (!isfinite(min_cosine) || min_cosine < -1 || min_cosine > 1)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "check: the cosine threshold %g is outside [-1, 1]", min_cosine);
    if (cols && rows > SIZE_MAX / sizeof(float) / cols)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "check: %zu x %zu values is too many",
                        rows, cols);
    if (rows && cols && (!reference || !device))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "check: missing reference or device data");
    size_t n = rows * cols;
    float *decoded = malloc(n ? n * sizeof(float) : 1);
    row_stat *stats = malloc(rows ? rows * sizeof *stats : 1);
    if (!decoded || !stats) {
        free(decoded);
        free(stats);
        return IPU_NO_MEMORY(ctx);
    }
    size_t elem = ipu_dtype_size(dtype);
    const unsigned char *bytes = device;
    int64_t count = (int64_t)rows;
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (int64_t r = 0; r < count; r++) {
        size_t at = (size_t)r * cols;
        ipu_num_decode(dtype, scale, bytes + at * elem, decoded + at, cols);
        measure_row(reference + at, decoded + at, cols, min_cosine, &stats[r]);
    }
    json_t *o = summarize(stats, rows, cols, dtype, min_cosine);
    free(decoded);
    free(stats);
    if (!o)
        return IPU_NO_MEMORY(ctx);
    *result = o;
    return IPU_OK;
}
