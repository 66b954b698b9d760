/* check.c: the output check (see check.h).  The device values are decoded to
 * FP32 once (ipu_num_decode); then every row is measured on its own (norms,
 * dot product, largest absolute error, elementwise bound failures and the
 * atol each element needs, accumulated in double in column order) into
 * per-row records, and the records are reduced in row order.  The parallel
 * loop only fills independent records, so the result is the same for any
 * thread count.
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
    double nr, nd;    /* squared norms of the reference and device rows (finite elements) */
    size_t fails;     /* elements over the elementwise bound */
    size_t first_fail_col;
    double worst;     /* largest error / bound, -1 when no element is finite on both sides */
    size_t worst_col;
    double needed;    /* largest |d - r| - rtol |r| */
    int flags;
} row_stat;

/* An element's error against its bound: e / bound, or e * 1e300 when the
 * bound is 0 (atol 0 and r 0), so any error there ranks first. */
static double score(double err, double bound) { return bound > 0 ? err / bound : err * 1e300; }

static void measure_row(const float *ref, const float *dev, size_t cols, const ipu_check_criteria *c,
                        row_stat *s)
{
    double dot = 0, nr = 0, nd = 0;
    int nonfinite = 0;
    s->max_abs = -1;
    s->max_col = 0;
    s->fails = 0;
    s->first_fail_col = 0;
    s->worst = -1;
    s->worst_col = 0;
    s->needed = 0;
    for (size_t col = 0; col < cols; col++) {
        double r = ref[col], d = dev[col];
        if (!isfinite(r) || !isfinite(d)) {
            nonfinite = 1;
            continue;
        }
        dot += r * d;
        nr += r * r;
        nd += d * d;
        double err = fabs(r - d), bound = c->atol + c->rtol * fabs(r);
        if (err > s->max_abs) {
            s->max_abs = err;
            s->max_col = col;
        }
        if (err > bound && s->fails++ == 0)
            s->first_fail_col = col;
        double sc = score(err, bound);
        if (sc > s->worst) {
            s->worst = sc;
            s->worst_col = col;
        }
        if (err - c->rtol * fabs(r) > s->needed)
            s->needed = err - c->rtol * fabs(r);
    }
    s->nr = nr;
    s->nd = nd;
    s->flags = 0;
    s->cosine = 0;
    if (nonfinite) {
        s->flags = ROW_NONFINITE;
        return;
    }
    if (nr == 0 && nd == 0) { /* both rows all zeros: equal (a class token's zero patch row) */
        s->cosine = 1;
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
    if (!(s->cosine >= c->min_cosine))
        s->flags = ROW_BELOW;
}

static int set(json_t *o, const char *key, json_t *value)
{
    return value ? json_object_set_new(o, key, value) : -1;
}

static json_t *real_or_null(int defined, double v) { return defined ? json_real(v) : json_null(); }

/* One element: where it is, both values, its error and its bound. */
static json_t *element(const float *ref, const float *dev, size_t cols, size_t row, size_t col,
                       const ipu_check_criteria *c)
{
    size_t i = row * cols + col;
    double r = ref[i], d = dev[i];
    return json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:f}", "row", (json_int_t)row, "col",
                     (json_int_t)col, "index", (json_int_t)i, "expected", r, "got", d, "abs_error",
                     fabs(r - d), "bound", c->atol + c->rtol * fabs(r));
}

static json_t *summarize(const row_stat *stats, const float *ref, const float *dev, size_t rows,
                         size_t cols, int dtype, const ipu_check_criteria *c)
{
    size_t failed = 0, below = 0, nonfinite = 0, zero = 0, defined = 0, fails = 0;
    size_t min_row = 0, err_row = 0, err_col = 0, fail_row = 0, worst_row = 0;
    double min_cos = 0, sum_cos = 0, max_err = -1, worst = -1, needed = 0, nr = 0, nd = 0;
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
        if (s->fails && fails == 0)
            fail_row = r;
        fails += s->fails;
        if (s->worst > worst) {
            worst = s->worst;
            worst_row = r;
        }
        needed = s->needed > needed ? s->needed : needed;
        nr += s->nr;
        nd += s->nd;
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
    double ratio = nr > 0 ? sqrt(nd / nr) : 0;
    int cosine_ok = rows > 0 && cols > 0 && failed == 0;
    int norm_ok = nr > 0 ? fabs(ratio - 1) <= c->norm_tolerance : nd == 0;
    int elementwise_ok = fails == 0;
    if (set(o, "rows", json_integer((json_int_t)rows)) ||
        set(o, "cols", json_integer((json_int_t)cols)) ||
        set(o, "dtype", json_string(ipu_dtype_name(dtype))) ||
        set(o, "threshold", json_real(c->min_cosine)) ||
        set(o, "min_cosine_threshold", json_real(c->min_cosine)) ||
        set(o, "atol", json_real(c->atol)) || set(o, "rtol", json_real(c->rtol)) ||
        set(o, "norm_tolerance", json_real(c->norm_tolerance)) ||
        set(o, "passed", json_boolean(cosine_ok && elementwise_ok && norm_ok)) ||
        set(o, "cosine_passed", json_boolean(cosine_ok)) ||
        set(o, "elementwise_passed", json_boolean(elementwise_ok)) ||
        set(o, "norm_passed", json_boolean(norm_ok)) ||
        set(o, "min_cosine", real_or_null(defined > 0, min_cos)) ||
        set(o, "min_cosine_row", defined ? json_integer((json_int_t)min_row) : json_null()) ||
        set(o, "mean_cosine", real_or_null(defined > 0, defined ? sum_cos / (double)defined : 0)) ||
        set(o, "max_abs_error", json_real(has_err ? max_err : 0.0)) ||
        set(o, "max_abs_error_index",
            has_err ? json_integer((json_int_t)(err_row * cols + err_col)) : json_null()) ||
        set(o, "max_abs_error_row", has_err ? json_integer((json_int_t)err_row) : json_null()) ||
        set(o, "max_abs_error_col", has_err ? json_integer((json_int_t)err_col) : json_null()) ||
        set(o, "elementwise_failures", json_integer((json_int_t)fails)) ||
        set(o, "first_failed_element",
            fails ? element(ref, dev, cols, fail_row, stats[fail_row].first_fail_col, c) : json_null()) ||
        set(o, "worst_element",
            worst >= 0 ? element(ref, dev, cols, worst_row, stats[worst_row].worst_col, c) : json_null()) ||
        set(o, "atol_needed", json_real(needed)) ||
        set(o, "norm_ratio", real_or_null(nr > 0, ratio)) ||
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
                          int scale, size_t rows, size_t cols, const ipu_check_criteria *criteria,
                          json_t **result)
{
    const ipu_check_criteria *c = criteria;
    if (!ipu_dtype_size(dtype))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "check: unknown device type %d", dtype);
    if (!isfinite(c->min_cosine) || c->min_cosine < -1 || c->min_cosine > 1)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "check: the cosine threshold %g is outside [-1, 1]", c->min_cosine);
    if (!(c->atol >= 0) || !(c->rtol >= 0) || !(c->norm_tolerance >= 0) || !isfinite(c->atol) ||
        !isfinite(c->rtol) || !isfinite(c->norm_tolerance))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "check: atol %g, rtol %g and norm tolerance %g must be finite and >= 0",
                        c->atol, c->rtol, c->norm_tolerance);
    if (cols && rows > SIZE_MAX / sizeof(float) / cols)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "check: %zu x %zu values is too many",
                        rows, cols);
    if (rows && cols && (!reference || !device))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "check: missing reference or device data");
    size_t n = rows * cols;
    float *decoded = ipu_malloc(ctx, n ? n * sizeof(float) : 1);
    row_stat *stats = ipu_malloc(ctx, rows ? rows * sizeof *stats : 1);
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
        measure_row(reference + at, decoded + at, cols, c, &stats[r]);
    }
    json_t *o = summarize(stats, reference, decoded, rows, cols, dtype, c);
    free(decoded);
    free(stats);
    if (!o)
        return IPU_NO_MEMORY(ctx);
    *result = o;
    return IPU_OK;
}

ipu_status ipu_check_parse_criteria(ipu_ctx *ctx, const char *text, const char *atol_key,
                                    ipu_check_criteria *c)
{
    json_error_t error;
    json_t *o = text ? json_loads(text, JSON_REJECT_DUPLICATES, &error) : NULL;
    if (!json_is_object(o)) {
        json_decref(o);
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "check criteria: expected a JSON object%s%s",
                        text && !o ? ": " : "", text && !o ? error.text : "");
    }
    const char *names[] = {"min_cosine", atol_key, "rtol", "norm_tolerance"};
    double *fields[] = {&c->min_cosine, &c->atol, &c->rtol, &c->norm_tolerance};
    for (int i = 0; i < 4; i++) {
        const json_t *v = json_object_get(o, names[i]);
        if (!json_is_number(v)) {
            json_decref(o);
            return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "check criteria: '%s' must be a number",
                            names[i]);
        }
        *fields[i] = json_number_value(v);
    }
    json_decref(o);
    return IPU_OK;
}
