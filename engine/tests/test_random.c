/* test_random.c: the workloads' normal values (ipu_random_normal) against
 * the standard normal distribution, judged by formulas written here (the
 * normal CDF from erfc): over 2^21 values of a seeded stream, the mean,
 * variance, skewness and kurtosis within 5 standard errors of 0, 1, 0 and 3;
 * the Kolmogorov-Smirnov distance below 2.3/sqrt(n) (a chance of about 1 in
 * 10^4 for a true normal); the share beyond the ziggurat's tail edge 3.4426
 * and beyond 2 within 5 standard errors of the normal's; values past 4
 * present (the tail is drawn, not cut).  Any slice generated alone equals the
 * same elements of the whole; two streams of one seed are uncorrelated; the
 * scale multiplies.  The seed comes from support_seed.h.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/workload.h"

#include "support_seed.h"

#define COUNT (1u << 21)

static double normal_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

static int by_value(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float *draw(uint64_t seed, uint64_t stream, uint64_t offset, size_t n, float scale)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    ipu_random_normal(seed, stream, offset, v, n, scale);
    return v;
}

/* |got - want| within 5 standard errors, or fail naming what. */
static void within(const char *what, double got, double want, double error)
{
    if (fabs(got - want) > 5.0 * error)
        TSEED_FAIL("%s: %.6f, expected %.6f within 5 x %.6f", what, got, want, error);
}

static void test_moments_and_tails_are_the_normal_distributions(void **state)
{
    (void)state;
    float *v = draw(tseed(), 3, 0, COUNT, 1.0f);
    const double n = COUNT;
    double sum = 0;
    for (size_t i = 0; i < COUNT; i++)
        sum += v[i];
    double mean = sum / n, m2 = 0, m3 = 0, m4 = 0, largest = 0;
    size_t beyond_tail = 0, beyond_two = 0;
    for (size_t i = 0; i < COUNT; i++) {
        double d = v[i] - mean, a = fabs(v[i]);
        m2 += d * d;
        m3 += d * d * d;
        m4 += d * d * d * d;
        beyond_tail += a > 3.442619855899;
        beyond_two += a > 2.0;
        largest = a > largest ? a : largest;
    }
    m2 /= n, m3 /= n, m4 /= n;
    within("mean", mean, 0.0, 1.0 / sqrt(n));
    within("variance", m2, 1.0, sqrt(2.0 / n));
    within("skewness", m3 / pow(m2, 1.5), 0.0, sqrt(6.0 / n));
    within("kurtosis", m4 / (m2 * m2), 3.0, sqrt(24.0 / n));
    double p_tail = 2.0 * (1.0 - normal_cdf(3.442619855899)), p_two = 2.0 * (1.0 - normal_cdf(2.0));
    within("share beyond 3.4426", beyond_tail / n, p_tail, sqrt(p_tail * (1 - p_tail) / n));
    within("share beyond 2", beyond_two / n, p_two, sqrt(p_two * (1 - p_two) / n));
    if (largest <= 4.0)
        TSEED_FAIL("largest |value| %.4f: the tail beyond 4 (expected about %.0f values) is missing", largest,
                   n * 2.0 * (1.0 - normal_cdf(4.0)));
    qsort(v, COUNT, sizeof *v, by_value);
    double distance = 0;
    for (size_t i = 0; i < COUNT; i++) {
        double f = normal_cdf(v[i]), below = i / n, above = (i + 1) / n;
        distance = fmax(distance, fmax(fabs(f - below), fabs(above - f)));
    }
    if (distance * sqrt(n) > 2.3)
        TSEED_FAIL("Kolmogorov-Smirnov distance %.6f (x sqrt(n) = %.3f, expected below 2.3)", distance,
                   distance * sqrt(n));
    free(v);
}

static void test_a_slice_made_alone_equals_the_whole(void **state)
{
    (void)state;
    const size_t n = 100000;
    float *whole = draw(tseed(), 7, 0, n, 0.5f);
    tseed_reset(1);
    for (int k = 0; k < 20; k++) {
        size_t offset = tseed_below((uint32_t)n - 1), len = 1 + tseed_below((uint32_t)(n - offset));
        float *part = draw(tseed(), 7, offset, len, 0.5f);
        if (memcmp(part, whole + offset, len * sizeof *part) != 0)
            TSEED_FAIL("the slice at %zu of %zu values differs from the whole", offset, len);
        free(part);
    }
    free(whole);
}

static void test_streams_are_uncorrelated_and_the_scale_multiplies(void **state)
{
    (void)state;
    const size_t n = 1u << 18;
    float *a = draw(tseed(), 0, 0, n, 1.0f), *b = draw(tseed(), 1, 0, n, 1.0f);
    float *scaled = draw(tseed(), 0, 0, n, 0.25f);
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
        if (scaled[i] != (float)((double)a[i] * 0.25))
            TSEED_FAIL("element %zu: scaled %.9g, expected 0.25 x %.9g", i, scaled[i], a[i]);
    }
    within("correlation of streams 0 and 1", ab / sqrt(aa * bb), 0.0, 1.0 / sqrt((double)n));
    free(a);
    free(b);
    free(scaled);
}

int main(void)
{
    tseed_init("test_random");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moments_and_tails_are_the_normal_distributions),
        cmocka_unit_test(test_a_slice_made_alone_equals_the_whole),
        cmocka_unit_test(test_streams_are_uncorrelated_and_the_scale_multiplies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
