/* test_fma_product.c: ipu_fma_product (the attention kernels' FP32
 * products) against this file's own chain of fmaf calls, bit for bit: 300
 * random shapes (rows 1..20 across the 8-row blocks, inner 1..80, cols
 * 1..80 across the 16-column vectors), values spread over many binades with
 * signed zeros, and a shape whose products cancel exactly to zero (the sign
 * of the zero must be the chain's).  Seed: IPU_TEST_SEED or the clock.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fma_product.h"

#include "support_seed.h"

#define MAX 80u

/* A random value: sign, a mantissa and an exponent in [-20, 20], or a zero. */
static float value(void)
{
    uint32_t pick = tseed_below(16);
    if (pick == 0)
        return tseed_below(2) ? -0.0f : 0.0f;
    float m = 1.0f + (float)tseed_below(1u << 23) * 0x1p-23f;
    float v = ldexpf(m, (int)tseed_below(41) - 20);
    return tseed_below(2) ? -v : v;
}

/* The chain the header defines, written out. */
static void expected(const float *a, const float *b, float *out, size_t rows, size_t inner,
                     size_t cols)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            float acc = 0.0f;
            for (size_t i = 0; i < inner; i++)
                acc = fmaf(a[r * inner + i], b[i * cols + c], acc);
            out[r * cols + c] = acc;
        }
}

static void check(const float *a, const float *b, size_t rows, size_t inner, size_t cols, int run)
{
    static float got[MAX * MAX + 16], want[MAX * MAX];
    /* A guard after the output: the product must write exactly rows x cols. */
    for (size_t i = 0; i < rows * cols + 16; i++)
        got[i] = 12345.0f;
    ipu_fma_product(a, b, got, rows, inner, cols);
    expected(a, b, want, rows, inner, cols);
    for (size_t i = 0; i < rows * cols; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            TSEED_FAIL("run %d, %zux%zux%zu: out[%zu][%zu] = %a, the chain gives %a", run, rows,
                       inner, cols, i / cols, i % cols, (double)got[i], (double)want[i]);
    for (size_t i = rows * cols; i < rows * cols + 16; i++)
        if (got[i] != 12345.0f)
            TSEED_FAIL("run %d, %zux%zux%zu: wrote past the output at %zu", run, rows, inner,
                       cols, i);
}

static void test_random_shapes(void **state)
{
    (void)state;
    tseed_reset(1);
    static float a[20 * MAX], b[MAX * MAX];
    for (int run = 0; run < 300; run++) {
        size_t rows = 1 + tseed_below(20), inner = 1 + tseed_below(MAX),
               cols = 1 + tseed_below(MAX);
        for (size_t i = 0; i < rows * inner; i++)
            a[i] = value();
        for (size_t i = 0; i < inner * cols; i++)
            b[i] = value();
        check(a, b, rows, inner, cols, run);
    }
}

static void test_exact_cancellation(void **state)
{
    (void)state;
    /* Each output is x*y - x*y + (-0 * 1): the chain ends on +0 + -0 = +0
     * only if the order is kept; values that round differently in another
     * order (1 + 2^-24 - 1) show reordering too. */
    float a[3 * 4] = {1.0f, -1.0f, -0.0f, 0x1p-24f, 3.0f, -3.0f, -0.0f, 1.0f,
                      0x1p-24f, 1.0f, -1.0f, 0.0f};
    float b[4 * 17];
    for (size_t c = 0; c < 17; c++) {
        b[0 * 17 + c] = 1.0f + (float)c;
        b[1 * 17 + c] = 1.0f + (float)c;
        b[2 * 17 + c] = 1.0f;
        b[3 * 17 + c] = 1.0f;
    }
    check(a, b, 3, 4, 17, 0);
}

int main(void)
{
    tseed_init("test_fma_product");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_exact_cancellation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
