/* test_numerics.c: checks the number-format library against the formats'
 * definitions.  Expected values are computed here, independently of
 * numerics.c, from the sign/exponent/mantissa fields with ldexp in double:
 * every FP8 (F143, F152, several scales) and FP16 code decodes to its defined
 * value and round-trips; FP32 -> FP8/FP16 rounding is checked at every
 * midpoint between adjacent representable values (ties to even, neighbours on
 * either side to the nearer value); saturation, overflow and NaN handling; and
 * the run functions (decode, encode, round, add, GELU) agree with the scalar
 * ones on random data, and encoding on every rounding case above (support_seed.h:
 * the seed comes from IPU_TEST_SEED or the clock and is printed at the start
 * and on failure).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "numerics/numerics.h"

#include "support_seed.h"

static const int SCALES_ROUNDTRIP[] = {-4, -2, 0, 3};
/* The extra scales put FP8 values into the FP32 subnormal range (-135) and
 * far above FP8's own range (60), exercising the exact scale arithmetic. */
static const int SCALES_ROUNDING[] = {-4, -2, 0, 3, -135, 60};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static uint32_t bits_of(float v) {
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

static float float_of(uint32_t b) {
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* Format definitions, written out independently of numerics.c. */
typedef struct fmt_def {
    int dtype;
    int ebits, mbits, bias;
    int ieee; /* all-ones exponent is inf/NaN (else only S.1111.111 is NaN) */
    unsigned sign;
    unsigned max_code;
    double max_value;
    double next_above_max; /* the value the grid would continue with */
} fmt_def;

static const fmt_def DEF_F143 = {IPU_DT_F143, 4, 3, 7, 0, 0x80u, 0x7Eu, 448.0, 480.0};
static const fmt_def DEF_F152 = {IPU_DT_F152, 5, 2, 15, 1, 0x80u, 0x7Bu, 57344.0, 65536.0};
static const fmt_def DEF_F16 = {IPU_DT_F16, 5, 10, 15, 1, 0x8000u, 0x7BFFu, 65504.0, 65536.0};

static unsigned field_e(const fmt_def *f, unsigned code) {
    return (code >> f->mbits) & ((1u << f->ebits) - 1u);
}

static unsigned field_m(const fmt_def *f, unsigned code) {
    return code & ((1u << f->mbits) - 1u);
}

static int def_is_nan(const fmt_def *f, unsigned code) {
    unsigned emax = (1u << f->ebits) - 1u;
    if (f->ieee) {
        return field_e(f, code) == emax && field_m(f, code) != 0;
    }
    return field_e(f, code) == emax && field_m(f, code) == (1u << f->mbits) - 1u;
}

static int def_is_inf(const fmt_def *f, unsigned code) {
    return f->ieee && field_e(f, code) == (1u << f->ebits) - 1u && field_m(f, code) == 0;
}

/* (-1)^s * 2^(E-bias) * (1 + M/2^mbits), or subnormal 2^(1-bias) * M/2^mbits,
 * times 2^scale.  Not for NaN codes. */
static double def_value(const fmt_def *f, unsigned code, int scale) {
    unsigned e = field_e(f, code), m = field_m(f, code);
    int neg = (code & f->sign) != 0;
    double v;
    if (def_is_inf(f, code)) {
        v = INFINITY;
    } else if (e == 0) {
        v = ldexp((double)m / (double)(1u << f->mbits), 1 - f->bias + scale);
    } else {
        v = ldexp(1.0 + (double)m / (double)(1u << f->mbits), (int)e - f->bias + scale);
    }
    return neg ? -v : v;
}

static float dec(const fmt_def *f, unsigned code, int scale) {
    if (f->dtype == IPU_DT_F16) {
        return ipu_num_f16_to_f32((uint16_t)code);
    }
    return ipu_num_f8_to_f32((uint8_t)code, f->dtype, scale);
}

/* The scalar encoding; the run function's block path (a block of 8 equal
 * values) must give the same code. */
static unsigned enc(const fmt_def *f, float v, int scale) {
    unsigned scalar = f->dtype == IPU_DT_F16 ? ipu_num_f32_to_f16(v)
                                             : ipu_num_f32_to_f8(v, f->dtype, scale);
    float block[8];
    unsigned char out[16];
    for (size_t i = 0; i < 8; i++) {
        block[i] = v;
    }
    ipu_num_encode(f->dtype, scale, block, out, 8);
    for (size_t i = 0; i < 8; i++) {
        unsigned code = f->dtype == IPU_DT_F16 ? (unsigned)(out[2 * i] | out[2 * i + 1] << 8)
                                               : out[i];
        if (code != scalar) {
            fail_msg("dtype %d scale %d: encode(%a): run gives 0x%x, scalar 0x%x", f->dtype,
                     scale, (double)v, code, scalar);
        }
    }
    return scalar;
}

static void check_all_codes(const fmt_def *f, int scale) {
    unsigned ncodes = 1u << (1 + f->ebits + f->mbits);
    for (unsigned code = 0; code < ncodes; code++) {
        float got = dec(f, code, scale);
        unsigned neg = code & f->sign;
        if (def_is_nan(f, code)) {
            if (!isnan(got) || (signbit(got) != 0) != (neg != 0)) {
                fail_msg("dtype %d scale %d code 0x%x: want NaN with sign, got %a",
                         f->dtype, scale, code, (double)got);
            }
            unsigned back = enc(f, got, scale);
            if (!def_is_nan(f, back) || (back & f->sign) != neg) {
                fail_msg("dtype %d code 0x%x: NaN re-encoded to 0x%x", f->dtype, code, back);
            }
            continue;
        }
        float want = (float)def_value(f, code, scale); /* exact for these scales */
        if (bits_of(got) != bits_of(want)) {
            fail_msg("dtype %d scale %d code 0x%x: decoded %a, want %a",
                     f->dtype, scale, code, (double)got, (double)want);
        }
        unsigned back = enc(f, got, scale);
        /* FP8 saturates infinities; everything else round-trips exactly. */
        unsigned want_back = (def_is_inf(f, code) && f->dtype != IPU_DT_F16)
                                 ? (neg | f->max_code) : code;
        if (back != want_back) {
            fail_msg("dtype %d scale %d code 0x%x: round trip gave 0x%x, want 0x%x",
                     f->dtype, scale, code, back, want_back);
        }
    }
}

static void test_f8_all_codes(void **state) {
    (void)state;
    for (size_t i = 0; i < COUNT(SCALES_ROUNDTRIP); i++) {
        check_all_codes(&DEF_F143, SCALES_ROUNDTRIP[i]);
        check_all_codes(&DEF_F152, SCALES_ROUNDTRIP[i]);
    }
}

static void test_f16_all_codes(void **state) {
    (void)state;
    check_all_codes(&DEF_F16, 0);
}

static void expect_enc(const fmt_def *f, float v, int scale, unsigned want, const char *what) {
    unsigned got = enc(f, v, scale);
    if (got != want) {
        fail_msg("dtype %d scale %d: %s: encode(%a) = 0x%x, want 0x%x",
                 f->dtype, scale, what, (double)v, got, want);
    }
}

/* Largest float strictly below x and smallest strictly above x (x > 0). */
static float float_below(double x) {
    float v = (float)x;
    return (double)v >= x ? nextafterf(v, 0.0f) : v;
}

static float float_above(double x) {
    float v = (float)x;
    return (double)v <= x ? nextafterf(v, INFINITY) : v;
}

/* Every adjacent pair of non-negative finite values (0 and the smallest
 * subnormal first), both signs: the midpoint goes to the even code, the
 * floats on either side of it go to the nearer value. */
static void check_rounding(const fmt_def *f, int scale) {
    unsigned checked = 0;
    for (unsigned lo = 0; lo < f->max_code; lo++) {
        unsigned hi = lo + 1;
        double a = def_value(f, lo, scale), b = def_value(f, hi, scale);
        assert_true(a < b);
        double mid = (a + b) / 2; /* exact in double */
        if (mid > FLT_MAX) {
            continue;
        }
        unsigned even = (lo & 1u) ? hi : lo;
        for (int neg = 0; neg < 2; neg++) {
            unsigned sgn = neg ? f->sign : 0u;
            float s = neg ? -1.0f : 1.0f;
            if ((double)(float)mid == mid) {
                expect_enc(f, s * (float)mid, scale, sgn | even, "tie to even");
                checked++;
            }
            float below = float_below(mid), above = float_above(mid);
            if ((double)below >= a) {
                expect_enc(f, s * below, scale, sgn | lo, "below midpoint");
                checked++;
            }
            if ((double)above <= b) {
                expect_enc(f, s * above, scale, sgn | hi, "above midpoint");
                checked++;
            }
        }
    }
    assert_true(checked > 0);
}

static void test_f8_rounding(void **state) {
    (void)state;
    for (size_t i = 0; i < COUNT(SCALES_ROUNDING); i++) {
        check_rounding(&DEF_F143, SCALES_ROUNDING[i]);
        check_rounding(&DEF_F152, SCALES_ROUNDING[i]);
    }
}

static void test_f16_rounding(void **state) {
    (void)state;
    check_rounding(&DEF_F16, 0);
}

static void test_f8_saturation(void **state) {
    (void)state;
    const fmt_def *defs[] = {&DEF_F143, &DEF_F152};
    for (size_t d = 0; d < COUNT(defs); d++) {
        const fmt_def *f = defs[d];
        for (size_t i = 0; i < COUNT(SCALES_ROUNDING); i++) {
            int sc = SCALES_ROUNDING[i];
            double max = ldexp(f->max_value, sc);
            double next = ldexp(f->next_above_max, sc);
            const float over[] = {
                nextafterf((float)max, INFINITY), (float)((max + next) / 2),
                nextafterf((float)((max + next) / 2), INFINITY), (float)next,
                (float)(2 * next), 1e38f, FLT_MAX, INFINITY,
            };
            expect_enc(f, (float)max, sc, f->max_code, "max finite");
            expect_enc(f, -(float)max, sc, f->sign | f->max_code, "-max finite");
            for (size_t k = 0; k < COUNT(over); k++) {
                expect_enc(f, over[k], sc, f->max_code, "saturate");
                expect_enc(f, -over[k], sc, f->sign | f->max_code, "saturate negative");
            }
        }
    }
}

static void test_f16_overflow(void **state) {
    (void)state;
    expect_enc(&DEF_F16, 65504.0f, 0, 0x7BFFu, "max finite");
    expect_enc(&DEF_F16, nextafterf(65520.0f, 0.0f), 0, 0x7BFFu, "just below threshold");
    expect_enc(&DEF_F16, -nextafterf(65520.0f, 0.0f), 0, 0xFBFFu, "just below threshold");
    const float over[] = {65520.0f, nextafterf(65520.0f, INFINITY), 65536.0f, 1e10f,
                          FLT_MAX, INFINITY};
    for (size_t k = 0; k < COUNT(over); k++) {
        expect_enc(&DEF_F16, over[k], 0, 0x7C00u, "overflow to inf");
        expect_enc(&DEF_F16, -over[k], 0, 0xFC00u, "overflow to -inf");
    }
    /* Smallest subnormal 2^-24: half of it ties to +-0, a bit more rounds up. */
    expect_enc(&DEF_F16, ldexpf(1.0f, -25), 0, 0x0000u, "tie to zero");
    expect_enc(&DEF_F16, -ldexpf(1.0f, -25), 0, 0x8000u, "tie to -zero");
    expect_enc(&DEF_F16, nextafterf(ldexpf(1.0f, -25), 1.0f), 0, 0x0001u, "min subnormal");
    expect_enc(&DEF_F16, ldexpf(1.0f, -140), 0, 0x0000u, "underflow");
    expect_enc(&DEF_F16, -ldexpf(1.0f, -149), 0, 0x8000u, "underflow negative");
}

static void test_nan_in_nan_out(void **state) {
    (void)state;
    const uint32_t nans[] = {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0x7FA00000u};
    for (size_t k = 0; k < COUNT(nans); k++) {
        for (int neg = 0; neg < 2; neg++) {
            float v = float_of(nans[k] | (neg ? 0x80000000u : 0u));
            unsigned s8 = neg ? 0x80u : 0u;
            assert_int_equal(ipu_num_f32_to_f16(v), (neg ? 0x8000u : 0u) | 0x7E00u);
            for (size_t i = 0; i < COUNT(SCALES_ROUNDING); i++) {
                int sc = SCALES_ROUNDING[i];
                unsigned c143 = ipu_num_f32_to_f8(v, IPU_DT_F143, sc);
                unsigned c152 = ipu_num_f32_to_f8(v, IPU_DT_F152, sc);
                assert_true(def_is_nan(&DEF_F143, c143));
                assert_true(def_is_nan(&DEF_F152, c152));
                assert_int_equal(c143, s8 | 0x7Fu);
                assert_int_equal(c152, s8 | 0x7Eu);
            }
        }
    }
    /* Signed zeros are kept. */
    assert_int_equal(ipu_num_f32_to_f16(-0.0f), 0x8000u);
    assert_int_equal(ipu_num_f32_to_f8(-0.0f, IPU_DT_F143, -2), 0x80u);
    assert_int_equal(ipu_num_f32_to_f8(-0.0f, IPU_DT_F152, 3), 0x80u);
    assert_int_equal(ipu_num_f32_to_f8(0.0f, IPU_DT_F152, 3), 0x00u);
}

static void test_dtype_helpers(void **state) {
    (void)state;
    const char *names[] = {"f32", "f16", "f143", "f152"};
    const size_t sizes[] = {4, 2, 1, 1};
    for (int dt = 0; dt < IPU_DT_COUNT; dt++) {
        assert_string_equal(ipu_dtype_name(dt), names[dt]);
        assert_int_equal(ipu_dtype_size(dt), sizes[dt]);
        assert_int_equal(ipu_dtype_parse(names[dt]), dt);
    }
    assert_null(ipu_dtype_name(IPU_DT_COUNT));
    assert_null(ipu_dtype_name(-1));
    assert_int_equal(ipu_dtype_size(IPU_DT_COUNT), 0);
    assert_int_equal(ipu_dtype_size(-1), 0);
    assert_int_equal(ipu_dtype_parse("f8"), -1);
    assert_int_equal(ipu_dtype_parse("F32"), -1);
    assert_int_equal(ipu_dtype_parse(""), -1);
    assert_int_equal(ipu_dtype_parse(NULL), -1);
    /* Unknown FP8 format: NaN both ways. */
    assert_true(isnan(ipu_num_f8_to_f32(0x10, IPU_DT_F16, 0)));
    assert_true(def_is_nan(&DEF_F143, ipu_num_f32_to_f8(1.0f, IPU_DT_F32, 0)));
}

static float random_float(int dtype, int scale) {
    uint64_t r = tseed_rnd();
    if ((r & 3u) == 0) {
        return float_of((uint32_t)(r >> 32)); /* any bits: NaN, inf, subnormal */
    }
    /* Mostly values around the format's range (scaled), subnormals included. */
    int lo = dtype == IPU_DT_F143 ? -12 : (dtype == IPU_DT_F16 ? -27 : -19);
    int span = dtype == IPU_DT_F143 ? 24 : 46;
    int e = lo + (int)((r >> 8) % (uint64_t)span) + (dtype == IPU_DT_F16 ? 0 : scale);
    float m = (float)((r >> 32) & 0xFFFFFFu) / (float)0x1000000;
    float v = ldexpf(1.0f + m, e);
    return (r & 4u) ? -v : v;
}

static int same_float(float a, float b) {
    return bits_of(a) == bits_of(b) || (isnan(a) && isnan(b));
}

static void test_runs_match_scalar(void **state) {
    (void)state;
    tseed_reset(1);
    enum { MAXN = 700 };
    unsigned char raw[MAXN * 4 + 8];
    float fl[MAXN];
    for (int iter = 0; iter < 400; iter++) {
        int dtype = (int)tseed_below(IPU_DT_COUNT);
        int scale = (int)tseed_below(21) - 10;
        size_t n = tseed_below(MAXN + 1);
        size_t off = tseed_below(4); /* unaligned narrow buffers */
        size_t sz = ipu_dtype_size(dtype);
        unsigned char *buf = raw + off;

        /* decode */
        for (size_t i = 0; i < n * sz; i++) {
            buf[i] = (unsigned char)tseed_rnd();
        }
        ipu_num_decode(dtype, scale, buf, fl, n);
        for (size_t i = 0; i < n; i++) {
            float want;
            if (dtype == IPU_DT_F32) {
                memcpy(&want, buf + 4 * i, 4);
            } else if (dtype == IPU_DT_F16) {
                uint16_t h;
                memcpy(&h, buf + 2 * i, 2);
                want = ipu_num_f16_to_f32(h);
            } else {
                want = ipu_num_f8_to_f32(buf[i], dtype, scale);
            }
            if (!same_float(fl[i], want)) {
                TSEED_FAIL("decode dtype %d scale %d n %zu element %zu: run %a, scalar %a",
                           dtype, scale, n, i, (double)fl[i], (double)want);
            }
        }

        /* encode */
        for (size_t i = 0; i < n; i++) {
            fl[i] = random_float(dtype, scale);
        }
        memset(raw, 0xA5, sizeof raw);
        ipu_num_encode(dtype, scale, fl, buf, n);
        for (size_t i = 0; i < n; i++) {
            unsigned char want[4];
            if (dtype == IPU_DT_F32) {
                memcpy(want, &fl[i], 4);
            } else if (dtype == IPU_DT_F16) {
                uint16_t h = ipu_num_f32_to_f16(fl[i]);
                memcpy(want, &h, 2);
            } else {
                want[0] = ipu_num_f32_to_f8(fl[i], dtype, scale);
            }
            if (memcmp(buf + sz * i, want, sz) != 0) {
                TSEED_FAIL("encode dtype %d scale %d n %zu element %zu (%a) differs from scalar",
                           dtype, scale, n, i, (double)fl[i]);
            }
        }
        /* round: each value becomes its scalar encoding's decoded value. */
        float rounded[MAXN];
        memcpy(rounded, fl, n * sizeof *fl);
        ipu_num_round(dtype, scale, rounded, n);
        for (size_t i = 0; i < n; i++) {
            float want = fl[i];
            if (dtype == IPU_DT_F16) {
                want = ipu_num_f16_to_f32(ipu_num_f32_to_f16(fl[i]));
            } else if (dtype != IPU_DT_F32) {
                want = ipu_num_f8_to_f32(ipu_num_f32_to_f8(fl[i], dtype, scale), dtype, scale);
            }
            if (!same_float(rounded[i], want)) {
                TSEED_FAIL("round dtype %d scale %d n %zu element %zu (%a): run %a, scalar %a",
                           dtype, scale, n, i, (double)fl[i], (double)rounded[i], (double)want);
            }
        }
        /* add and gelu (FP16 and FP32 only): each element as the scalar
         * decode, FP32 operation and encode give it. */
        if (dtype == IPU_DT_F16 || dtype == IPU_DT_F32) {
            unsigned char other[MAXN * 4], sum[MAXN * 4], gelu[MAXN * 4], gelu_erf[MAXN * 4];
            for (size_t i = 0; i < n * sz; i++) {
                other[i] = (unsigned char)tseed_rnd();
            }
            ipu_num_add_run(dtype, buf, other, sum, n);
            ipu_num_gelu_run(IPU_GELU_TANH, dtype, buf, gelu, n);
            ipu_num_gelu_run(IPU_GELU_ERF, dtype, buf, gelu_erf, n);
            for (size_t i = 0; i < n; i++) {
                float x, y;
                ipu_num_decode(dtype, 0, buf + sz * i, &x, 1);
                ipu_num_decode(dtype, 0, other + sz * i, &y, 1);
                unsigned char want_sum[4], want_gelu[4], want_erf[4];
                if (dtype == IPU_DT_F16) {
                    uint16_t hs = ipu_num_f32_to_f16(x + y), hg = ipu_num_f32_to_f16(ipu_num_gelu(x)),
                             he = ipu_num_f32_to_f16(ipu_num_gelu_erf(x));
                    memcpy(want_sum, &hs, 2);
                    memcpy(want_gelu, &hg, 2);
                    memcpy(want_erf, &he, 2);
                } else {
                    float fs = x + y, fg = ipu_num_gelu(x), fe = ipu_num_gelu_erf(x);
                    memcpy(want_sum, &fs, 4);
                    memcpy(want_gelu, &fg, 4);
                    memcpy(want_erf, &fe, 4);
                }
                /* The sign of NaN + NaN depends on the operand order the
                 * compiler picks, so NaN sums only need to be NaN. */
                float got_value, want_value;
                ipu_num_decode(dtype, 0, sum + sz * i, &got_value, 1);
                ipu_num_decode(dtype, 0, want_sum, &want_value, 1);
                int both_nan = isnan(got_value) && isnan(want_value);
                if (!both_nan && memcmp(sum + sz * i, want_sum, sz) != 0) {
                    TSEED_FAIL("add dtype %d n %zu element %zu (%a + %a) differs from scalar", dtype,
                               n, i, (double)x, (double)y);
                }
                if (memcmp(gelu + sz * i, want_gelu, sz) != 0) {
                    TSEED_FAIL("gelu dtype %d n %zu element %zu (%a) differs from scalar", dtype, n,
                               i, (double)x);
                }
                if (memcmp(gelu_erf + sz * i, want_erf, sz) != 0) {
                    TSEED_FAIL("gelu_erf dtype %d n %zu element %zu (%a) differs from scalar", dtype, n,
                               i, (double)x);
                }
            }
        }
        /* Nothing written outside the run. */
        for (size_t i = 0; i < off; i++) {
            assert_int_equal(raw[i], 0xA5);
        }
        assert_int_equal(buf[n * sz], 0xA5);
    }
}

int main(void) {
    tseed_init("test_numerics");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_helpers),
        cmocka_unit_test(test_f8_all_codes),
        cmocka_unit_test(test_f16_all_codes),
        cmocka_unit_test(test_f8_rounding),
        cmocka_unit_test(test_f16_rounding),
        cmocka_unit_test(test_f8_saturation),
        cmocka_unit_test(test_f16_overflow),
        cmocka_unit_test(test_nan_in_nan_out),
        cmocka_unit_test(test_runs_match_scalar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
