/* numerics.c: conversions between FP32 and the device's narrow number formats
 * (IEEE binary16, OCP FP8 E4M3 "F143" and E5M2 "F152" with a power-of-two
 * scale exponent), plus the dtype name/size helpers.  Every FP32 -> narrow
 * conversion goes through one routine (FP16 results in the normal range take
 * an equivalent shortcut, in blocks of 8 through F16C where the CPU has it)
 * that splits the FP32 bits into sign,
 * exponent and 24-bit significand, subtracts the scale from the exponent as an
 * integer (so scaling is exact and never rounds twice) and rounds the
 * significand once, to nearest with ties to even, into the target format's
 * normal or subnormal grid; overflow then becomes infinity (FP16) or the largest
 * finite value (FP8), NaN becomes the format's quiet NaN with the sign kept.
 * Decoding is exact: FP16 uses F16C where the CPU has it (up to the first
 * block of 8 holding an infinity or NaN) and branch-free bit manipulation
 * that vectorises,
 * FP8 runs use a 256-entry table per format and scale, built once for scales
 * -64..63 (the only global state, written once under pthread_once) and
 * element by element for others; with F16C, blocks of 8 table-scale codes
 * without specials convert through FP16 instead (the same values).  Where the
 * CPU has AVX-512, both decoders take blocks of 16 first.  GELU,
 * evaluated in FP32, is defined here too; FP16 GELU runs read a table of
 * every code's result (built once, like the FP8 tables).
 */
#include "numerics/numerics.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

/* A narrow binary format: mantissa bits, exponent bias, codes (without sign)
 * of the largest finite value, of the overflow result and of the quiet NaN,
 * the sign bit, and whether the all-ones exponent is reserved (IEEE style). */
typedef struct narrow_fmt {
    int mbits;
    int bias;
    uint32_t max_finite;
    uint32_t overflow;
    uint32_t nan;
    uint32_t sign;
    int ieee_specials;
} narrow_fmt;

static const narrow_fmt FMT_F16 = {10, 15, 0x7BFFu, 0x7C00u, 0x7E00u, 0x8000u, 1};
static const narrow_fmt FMT_F143 = {3, 7, 0x7Eu, 0x7Eu, 0x7Fu, 0x80u, 0};
static const narrow_fmt FMT_F152 = {2, 15, 0x7Bu, 0x7Bu, 0x7Eu, 0x80u, 1};

/* Scales beyond this magnitude give the same results as this magnitude (every
 * FP32 value then overflows or rounds to zero, and every FP8 value decodes to
 * infinity or zero); clamping keeps the exponent arithmetic in int range. */
#define SCALE_LIMIT 400

static const narrow_fmt *f8_format(int fmt) {
    if (fmt == IPU_DT_F143) {
        return &FMT_F143;
    }
    if (fmt == IPU_DT_F152) {
        return &FMT_F152;
    }
    return NULL;
}

static int clamp_scale(int scale) {
    if (scale > SCALE_LIMIT) {
        return SCALE_LIMIT;
    }
    if (scale < -SCALE_LIMIT) {
        return -SCALE_LIMIT;
    }
    return scale;
}

static inline uint32_t f32_bits(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static inline float bits_f32(uint32_t bits) {
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* Round value / 2^scale to the narrow format f (round to nearest, ties to
 * even), directly from the FP32 bits. */
static uint32_t encode_narrow(float value, int scale, const narrow_fmt *f) {
    uint32_t x = f32_bits(value);
    uint32_t sign = (x >> 31) ? f->sign : 0u;
    uint32_t efield = (x >> 23) & 0xFFu;
    uint32_t m = x & 0x7FFFFFu;
    if (efield == 0xFFu) {
        return sign | (m ? f->nan : f->overflow);
    }
    if (efield == 0 && m == 0) {
        return sign;
    }
    int e; /* value = m * 2^(e - 23), with 2^23 <= m < 2^24 */
    if (efield == 0) {
        e = -126;
        while (!(m & 0x800000u)) {
            m <<= 1;
            e--;
        }
    } else {
        e = (int)efield - 127;
        m |= 0x800000u;
    }
    int t = e - clamp_scale(scale); /* exponent after the exact division */
    if (t > f->bias + 1) {
        return sign | f->overflow; /* at least 2^(bias+2): above every max */
    }
    int emin = 1 - f->bias;
    int texp = t < emin ? emin : t;
    /* Bits of m below the target quantum 2^(texp - mbits). */
    int shift = 23 - f->mbits + (texp - t);
    if (shift > 25) {
        return sign; /* below a quarter of the smallest subnormal */
    }
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) {
        r++;
    }
    /* Subnormal: exponent field 0 and r < 2^mbits (or == 2^mbits, which is
     * the smallest normal).  Normal: r in [2^mbits, 2^(mbits+1)], the carry
     * of a round-up propagating into the exponent field. */
    uint32_t code = ((uint32_t)(texp + f->bias - 1) << f->mbits) + r;
    if (code > f->max_finite) {
        code = f->overflow;
    }
    return sign | code;
}

/* FP32 -> FP16: the common case (a normal FP16 result below the rounding
 * boundary to infinity) by rebiasing the exponent and rounding the mantissa
 * to nearest even in place; everything else through encode_narrow. */
static inline uint16_t f16_encode(float value) {
    uint32_t x = f32_bits(value), a = x & 0x7FFFFFFFu;
    if (a >= 0x38800000u && a < 0x477FF000u) { /* [2^-14, 65520) */
        uint32_t r = a - 0x38000000u;          /* exponent bias 127 -> 15 */
        return (uint16_t)(((x >> 16) & 0x8000u) | ((r + 0x0FFFu + ((r >> 13) & 1u)) >> 13));
    }
    return (uint16_t)encode_narrow(value, 0, &FMT_F16);
}

/* Exact FP16 -> FP32 with masks instead of branches, so loops vectorise. */
static inline float f16_decode(uint16_t h) {
    uint32_t em = h & 0x7FFFu;
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t is_sub = 0u - (uint32_t)(em < 0x400u);
    uint32_t is_special = 0u - (uint32_t)(em >= 0x7C00u);
    uint32_t is_nan = 0u - (uint32_t)(em > 0x7C00u);
    /* Normal: rebias the exponent.  Inf/NaN: all-ones exponent, NaN quieted.
     * Subnormal: em * 2^-24 is exact (em < 2^10, result a normal FP32). */
    uint32_t normal = (em << 13) + ((uint32_t)(127 - 15) << 23);
    uint32_t special = (em << 13) | 0x7F800000u | (is_nan & 0x400000u);
    uint32_t sub = f32_bits((float)(int32_t)em * 0x1p-24f);
    uint32_t bits = (normal & ~is_special) | (special & is_special);
    bits = (bits & ~is_sub) | (sub & is_sub);
    return bits_f32(bits | sign);
}

/* Decoding can never be done in place (the output is wider), so the run
 * helpers take restrict pointers.  Fixed blocks of 8 give loops whose trip
 * count is a multiple of the vector width, which gcc -O2 vectorises. */
#define RUN_BLOCK 8

#if defined(__x86_64__)
/* Blocks of 8 without infinities or NaNs convert with the F16C instruction
 * (exact, the same values as f16_decode); returns how many it converted. */
__attribute__((target("avx,f16c"))) static size_t decode_f16_f16c(const unsigned char *s,
                                                                    float *dst, size_t n) {
    const __m128i exponent = _mm_set1_epi16(0x7C00);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(s + 2 * i));
        __m128i special = _mm_cmpeq_epi16(_mm_and_si128(h, exponent), exponent);
        if (_mm_movemask_epi8(special)) {
            break;
        }
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    return i;
}

/* The same with AVX-512, 16 at a time (the F16C blocks take what is left). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static size_t decode_f16_avx512(
    const unsigned char *s, float *dst, size_t n) {
    const __m256i exponent = _mm256_set1_epi16(0x7C00);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(s + 2 * i));
        if (_mm256_cmpeq_epi16_mask(_mm256_and_si256(h, exponent), exponent)) {
            break;
        }
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
    }
    return i;
}

static int has_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}

/* F16C conversions with AVX (whose OS support __builtin_cpu_supports checks).
 * F16C is read from CPUID leaf 1 (ECX bit 29), since clang's builtin does not
 * know the "f16c" name, once: CPUID is slow (a virtual machine traps it), and
 * the answer is a fact of the host, the same for every thread. */
static int has_f16c(void) {
    static _Atomic int known = -1;
    int f16c = atomic_load_explicit(&known, memory_order_relaxed);
    if (f16c < 0) {
        unsigned a, b, c, d;
        f16c = __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        atomic_store_explicit(&known, f16c, memory_order_relaxed);
    }
    return f16c;
}
#endif

static void decode_f16_run(const unsigned char *restrict s, float *restrict dst,
                           size_t n) {
    size_t i = 0;
#if defined(__x86_64__)
    if (has_avx512()) {
        i = decode_f16_avx512(s, dst, n);
    }
    if (has_f16c()) {
        i += decode_f16_f16c(s + 2 * i, dst + i, n - i);
    }
#endif
    for (; i + RUN_BLOCK <= n; i += RUN_BLOCK) {
        for (size_t j = 0; j < RUN_BLOCK; j++) {
            uint16_t h;
            memcpy(&h, s + 2 * (i + j), sizeof h);
            dst[i + j] = f16_decode(h);
        }
    }
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, s + 2 * i, sizeof h);
        dst[i] = f16_decode(h);
    }
}

/* Elements [from, to) one by one. */
static void encode_f16_elements(const float *src, unsigned char *d, size_t from, size_t to) {
    for (size_t j = from; j < to; j++) {
        uint16_t h = f16_encode(src[j]);
        memcpy(d + 2 * j, &h, sizeof h);
    }
}

#if defined(__x86_64__)
/* Blocks of 8 whose every element takes the common path convert with the
 * F16C instruction (round to nearest even, the same bits as f16_fast); a
 * block with any other element goes element by element. */
__attribute__((target("avx,f16c"))) static size_t encode_f16_f16c(const float *src,
                                                                    unsigned char *d, size_t n) {
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i lo = _mm256_set1_epi32(0x38800000 - 1), hi = _mm256_set1_epi32(0x477FF000);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(src + i);
        __m256i a = _mm256_castps_si256(_mm256_and_ps(x, _mm256_castsi256_ps(abs_mask)));
        __m128i a0 = _mm256_castsi256_si128(a), a1 = _mm256_extractf128_si256(a, 1);
        __m128i in0 = _mm_and_si128(_mm_cmpgt_epi32(a0, _mm256_castsi256_si128(lo)),
                                    _mm_cmpgt_epi32(_mm256_castsi256_si128(hi), a0));
        __m128i in1 = _mm_and_si128(_mm_cmpgt_epi32(a1, _mm256_castsi256_si128(lo)),
                                    _mm_cmpgt_epi32(_mm256_castsi256_si128(hi), a1));
        if (_mm_movemask_epi8(_mm_and_si128(in0, in1)) == 0xFFFF) {
            _mm_storeu_si128((__m128i *)(void *)(d + 2 * i),
                             _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        } else {
            encode_f16_elements(src, d, i, i + 8);
        }
    }
    return i;
}
#endif

#if defined(__x86_64__)
/* The same with AVX-512, 16 at a time, up to the first block with an element
 * off the common path; returns how many it converted.  (Leaving the loop
 * there keeps its constants in registers.) */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static size_t encode_f16_avx512(
    const float *src, unsigned char *d, size_t n) {
    const __m512 lo = _mm512_castsi512_ps(_mm512_set1_epi32(0x38800000 - 1));
    const __m512 hi = _mm512_castsi512_ps(_mm512_set1_epi32(0x477FF000));
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(src + i), m = _mm512_abs_ps(x);
        if ((_mm512_cmp_ps_mask(m, lo, _CMP_GT_OQ) & _mm512_cmp_ps_mask(m, hi, _CMP_LT_OQ)) !=
            0xFFFF) {
            break;
        }
        _mm256_storeu_si256((__m256i *)(void *)(d + 2 * i),
                            _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}
#endif

static void encode_f16_run(const float *src, unsigned char *d, size_t n) {
    size_t i = 0;
#if defined(__x86_64__)
    while (has_avx512() && i + 16 <= n) {
        i += encode_f16_avx512(src + i, d + 2 * i, n - i);
        if (i + 16 <= n) {
            encode_f16_elements(src, d, i, i + 16);
            i += 16;
        }
    }
    if (has_f16c()) {
        i += encode_f16_f16c(src + i, d + 2 * i, n - i);
    }
#endif
    encode_f16_elements(src, d, i, n);
}

#if defined(__x86_64__)
/* FP8 blocks of 8 without NaNs or infinities through F16C: an F152 code
 * shifted left by 8 is the FP16 encoding of its value, an F143 code's
 * magnitude shifted left by 7 (sign to bit 15) that of its value * 2^-8, so one
 * exact multiply by 2^(8 + scale) (F152: 2^scale) gives the same value as the
 * table; blocks holding a special code read the table.  scale must be one of
 * the table scales. */
__attribute__((target("avx,f16c,sse4.1"))) static void decode_f8_f16c(
    const float *restrict table, int dtype, int scale, const unsigned char *restrict s,
    float *restrict dst, size_t n) {
    const int f143 = dtype == IPU_DT_F143;
    const __m128i special = _mm_set1_epi16(f143 ? 0x7F : 0x7C);
    const __m128i magnitude = _mm_set1_epi16(0x7F), sign = _mm_set1_epi16(0x80);
    const __m256 factor = _mm256_set1_ps(bits_f32((uint32_t)(127 + (f143 ? 8 : 0) + scale) << 23));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(s + i)));
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(b, special), special))) {
            for (size_t j = i; j < i + 8; j++) {
                dst[j] = table[s[j]];
            }
            continue;
        }
        __m128i h = f143 ? _mm_or_si128(_mm_slli_epi16(_mm_and_si128(b, magnitude), 7),
                                        _mm_slli_epi16(_mm_and_si128(b, sign), 8))
                         : _mm_slli_epi16(b, 8);
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(h), factor));
    }
    for (; i < n; i++) {
        dst[i] = table[s[i]];
    }
}

/* The same with AVX-512, 16 at a time; returns how many it decoded. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static size_t decode_f8_avx512(
    const float *restrict table, int dtype, int scale, const unsigned char *restrict s,
    float *restrict dst, size_t n) {
    const int f143 = dtype == IPU_DT_F143;
    const __m256i special = _mm256_set1_epi16(f143 ? 0x7F : 0x7C);
    const __m256i magnitude = _mm256_set1_epi16(0x7F), sign = _mm256_set1_epi16(0x80);
    const __m512 factor = _mm512_set1_ps(bits_f32((uint32_t)(127 + (f143 ? 8 : 0) + scale) << 23));
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));
        if (_mm256_cmpeq_epi16_mask(_mm256_and_si256(b, special), special)) {
            for (size_t j = i; j < i + 16; j++) {
                dst[j] = table[s[j]];
            }
            continue;
        }
        __m256i h = f143 ? _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(b, magnitude), 7),
                                           _mm256_slli_epi16(_mm256_and_si256(b, sign), 8))
                         : _mm256_slli_epi16(b, 8);
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_cvtph_ps(h), factor));
    }
    return i;
}
#endif

static void decode_table_run(const float *restrict table, int dtype, int scale,
                             const unsigned char *restrict s,
                             float *restrict dst, size_t n) {
#if defined(__x86_64__)
    size_t done = has_avx512() ? decode_f8_avx512(table, dtype, scale, s, dst, n) : 0;
    if (has_f16c() &&
        __builtin_cpu_supports("sse4.1")) {
        decode_f8_f16c(table, dtype, scale, s + done, dst + done, n - done);
        return;
    }
    s += done, dst += done, n -= done;
#else
    (void)dtype;
    (void)scale;
#endif
    for (size_t i = 0; i < n; i++) {
        dst[i] = table[s[i]];
    }
}

size_t ipu_dtype_size(int dtype) {
    switch (dtype) {
    case IPU_DT_F32:
        return 4;
    case IPU_DT_F16:
        return 2;
    case IPU_DT_F143:
    case IPU_DT_F152:
        return 1;
    default:
        return 0;
    }
}

const char *ipu_dtype_name(int dtype) {
    switch (dtype) {
    case IPU_DT_F32:
        return "f32";
    case IPU_DT_F16:
        return "f16";
    case IPU_DT_F143:
        return "f143";
    case IPU_DT_F152:
        return "f152";
    default:
        return NULL;
    }
}

int ipu_dtype_parse(const char *name) {
    if (name == NULL) {
        return -1;
    }
    for (int dt = 0; dt < IPU_DT_COUNT; dt++) {
        if (strcmp(name, ipu_dtype_name(dt)) == 0) {
            return dt;
        }
    }
    return -1;
}

float ipu_num_f16_to_f32(uint16_t bits) {
    return f16_decode(bits);
}

uint16_t ipu_num_f32_to_f16(float value) {
    return f16_encode(value);
}

float ipu_num_f8_to_f32(uint8_t bits, int fmt, int scale) {
    const narrow_fmt *f = f8_format(fmt);
    if (f == NULL) {
        return NAN;
    }
    int negative = (bits & 0x80u) != 0;
    uint32_t emask = (1u << (7 - f->mbits)) - 1u;
    uint32_t efield = ((uint32_t)bits >> f->mbits) & emask;
    uint32_t mfield = bits & ((1u << f->mbits) - 1u);
    int is_nan = f->ieee_specials ? (efield == emask && mfield != 0)
                                  : ((bits & 0x7Fu) == 0x7Fu);
    if (is_nan) {
        return bits_f32(0x7FC00000u | (negative ? 0x80000000u : 0u));
    }
    float result;
    if (f->ieee_specials && efield == emask) {
        result = INFINITY;
    } else {
        /* value = sig * 2^k: exact in FP32 when 2^k is a normal FP32 power
         * of two; otherwise computed exactly in double and rounded once to
         * FP32 (extreme scales). */
        uint32_t sig = efield ? ((1u << f->mbits) | mfield) : mfield;
        int k = (efield ? (int)efield : 1) - f->bias - f->mbits + clamp_scale(scale);
        if (k >= -126 && k <= 120) {
            /* sig < 16 times a normal power of two: exact in FP32. */
            result = (float)sig * bits_f32((uint32_t)(k + 127) << 23);
        } else {
            double d = ldexp((double)sig, k);
            result = d >= 0x1p128 ? INFINITY : (float)d;
        }
    }
    return negative ? -result : result;
}

uint8_t ipu_num_f32_to_f8(float value, int fmt, int scale) {
    const narrow_fmt *f = f8_format(fmt);
    if (f == NULL) {
        return 0xFFu; /* NaN in both FP8 formats */
    }
    return (uint8_t)encode_narrow(value, scale, f);
}

/* Decode tables of both FP8 formats for the common scales, built once. */
#define TABLE_SCALE_MIN (-64)
#define TABLE_SCALES 128
static float f8_tables[2][TABLE_SCALES][256];
static pthread_once_t f8_tables_once = PTHREAD_ONCE_INIT;

static void build_f8_tables(void) {
    for (int f = 0; f < 2; f++) {
        for (int k = 0; k < TABLE_SCALES; k++) {
            for (unsigned c = 0; c < 256; c++) {
                f8_tables[f][k][c] = ipu_num_f8_to_f32((uint8_t)c, f ? IPU_DT_F152 : IPU_DT_F143,
                                                       k + TABLE_SCALE_MIN);
            }
        }
    }
}

static const float *f8_table(int dtype, int scale) {
    if (scale < TABLE_SCALE_MIN || scale >= TABLE_SCALE_MIN + TABLE_SCALES) {
        return NULL;
    }
    pthread_once(&f8_tables_once, build_f8_tables);
    return f8_tables[dtype == IPU_DT_F152][scale - TABLE_SCALE_MIN];
}

void ipu_num_decode(int dtype, int scale, const void *src, float *dst, size_t n) {
    if (n == 0) {
        return;
    }
    const unsigned char *s = src;
    switch (dtype) {
    case IPU_DT_F32:
        memcpy(dst, src, n * sizeof(float));
        return;
    case IPU_DT_F16:
        decode_f16_run(s, dst, n);
        return;
    case IPU_DT_F143:
    case IPU_DT_F152: {
        const float *table = f8_table(dtype, scale);
        if (table) {
            decode_table_run(table, dtype, scale, s, dst, n);
        } else {
            for (size_t i = 0; i < n; i++) {
                dst[i] = ipu_num_f8_to_f32(s[i], dtype, scale);
            }
        }
        return;
    }
    default:
        /* Unknown type: fail loudly rather than leave stale data. */
        for (size_t i = 0; i < n; i++) {
            dst[i] = NAN;
        }
        return;
    }
}

/* FP32 -> FP8 for the table scales.  An element whose scaled magnitude is a
 * normal FP8 value below 2^(bias+2) takes the same shortcut as FP16 (rebias
 * the exponent, round the mantissa to nearest even in place, then saturate at
 * the largest finite code, which is also the overflow code of both formats);
 * every other element (subnormal or zero results, huge values, infinities,
 * NaNs) goes through encode_narrow.  Blocks of 8 vectorise. */
static void encode_f8_run(const float *src, unsigned char *d, size_t n, int scale,
                          const narrow_fmt *f) {
    size_t i = 0;
    if (scale >= TABLE_SCALE_MIN && scale < TABLE_SCALE_MIN + TABLE_SCALES) {
        const uint32_t lo = (uint32_t)(127 + 1 - f->bias + scale) << 23;
        const uint32_t hi = (uint32_t)(127 + f->bias + 2 + scale) << 23;
        const uint32_t rebias = (uint32_t)(127 + scale - f->bias) << 23;
        const int shift = 23 - f->mbits;
        const uint32_t below_half = (1u << (shift - 1)) - 1u;
        for (; i + RUN_BLOCK <= n; i += RUN_BLOCK) {
            uint32_t code[RUN_BLOCK], common[RUN_BLOCK];
            for (size_t j = 0; j < RUN_BLOCK; j++) {
                uint32_t x = f32_bits(src[i + j]), a = x & 0x7FFFFFFFu, r = a - rebias;
                uint32_t c = (r + below_half + ((r >> shift) & 1u)) >> shift;
                c = c < f->max_finite ? c : f->max_finite;
                code[j] = c | ((x >> 24) & 0x80u);
                common[j] = (a >= lo) & (a < hi);
            }
            for (size_t j = 0; j < RUN_BLOCK; j++) {
                d[i + j] = (unsigned char)(common[j] ? code[j]
                                                     : encode_narrow(src[i + j], scale, f));
            }
        }
    }
    for (; i < n; i++) {
        d[i] = (unsigned char)encode_narrow(src[i], scale, f);
    }
}

void ipu_num_encode(int dtype, int scale, const float *src, void *dst, size_t n) {
    if (n == 0) {
        return;
    }
    unsigned char *d = dst;
    switch (dtype) {
    case IPU_DT_F32:
        memcpy(dst, src, n * sizeof(float));
        return;
    case IPU_DT_F16:
        encode_f16_run(src, d, n);
        return;
    case IPU_DT_F143:
    case IPU_DT_F152:
        encode_f8_run(src, d, n, scale, f8_format(dtype));
        return;
    default:
        return; /* unknown type: element size unknown, nothing written */
    }
}

void ipu_num_round(int dtype, int scale, float *x, size_t n) {
    enum { CHUNK = 256 };
    unsigned char coded[CHUNK * sizeof(float)];
    for (size_t done = 0; done < n; done += CHUNK) {
        size_t count = n - done < CHUNK ? n - done : CHUNK;
        ipu_num_encode(dtype, scale, x + done, coded, count);
        ipu_num_decode(dtype, scale, coded, x + done, count);
    }
}

float ipu_num_gelu(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

float ipu_num_gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

#if defined(__x86_64__)
/* FP16 sums of elements [from, to) one by one. */
static void add_f16_elements(const unsigned char *a, const unsigned char *b, unsigned char *d,
                             size_t from, size_t to) {
    for (size_t j = from; j < to; j++) {
        uint16_t x, y;
        memcpy(&x, a + 2 * j, sizeof x);
        memcpy(&y, b + 2 * j, sizeof y);
        x = f16_encode(f16_decode(x) + f16_decode(y));
        memcpy(d + 2 * j, &x, sizeof x);
    }
}

/* FP16 sums in blocks of 8 through F16C: both operand blocks free of
 * infinities and NaNs, and every FP32 sum in FP16's common range (the
 * conditions of the F16C decode and encode blocks above); any other block
 * element by element.  Returns how many elements it summed. */
__attribute__((target("avx,f16c"))) static size_t add_f16_f16c(const unsigned char *a,
                                                                 const unsigned char *b,
                                                                 unsigned char *d, size_t n) {
    const __m128i exponent = _mm_set1_epi16(0x7C00);
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m128i lo = _mm_set1_epi32(0x38800000 - 1), hi = _mm_set1_epi32(0x477FF000);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i ha = _mm_loadu_si128((const __m128i *)(const void *)(a + 2 * i));
        __m128i hb = _mm_loadu_si128((const __m128i *)(const void *)(b + 2 * i));
        __m128i special = _mm_or_si128(_mm_cmpeq_epi16(_mm_and_si128(ha, exponent), exponent),
                                       _mm_cmpeq_epi16(_mm_and_si128(hb, exponent), exponent));
        __m256 sum = _mm256_add_ps(_mm256_cvtph_ps(ha), _mm256_cvtph_ps(hb));
        __m256i m = _mm256_castps_si256(_mm256_and_ps(sum, _mm256_castsi256_ps(abs_mask)));
        __m128i m0 = _mm256_castsi256_si128(m), m1 = _mm256_extractf128_si256(m, 1);
        __m128i in = _mm_and_si128(
            _mm_and_si128(_mm_cmpgt_epi32(m0, lo), _mm_cmpgt_epi32(hi, m0)),
            _mm_and_si128(_mm_cmpgt_epi32(m1, lo), _mm_cmpgt_epi32(hi, m1)));
        if (!_mm_movemask_epi8(special) && _mm_movemask_epi8(in) == 0xFFFF) {
            _mm_storeu_si128((__m128i *)(void *)(d + 2 * i),
                             _mm256_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            continue;
        }
        add_f16_elements(a, b, d, i, i + 8);
    }
    return i;
}
#endif

#if defined(__x86_64__)
/* The same with AVX-512, 16 at a time, up to the first block that needs the
 * element path; returns how many it summed. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static size_t add_f16_avx512(
    const unsigned char *a, const unsigned char *b, unsigned char *d, size_t n) {
    const __m256i exponent = _mm256_set1_epi16(0x7C00);
    const __m512 lo = _mm512_castsi512_ps(_mm512_set1_epi32(0x38800000 - 1));
    const __m512 hi = _mm512_castsi512_ps(_mm512_set1_epi32(0x477FF000));
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i ha = _mm256_loadu_si256((const __m256i *)(const void *)(a + 2 * i));
        __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)(b + 2 * i));
        __mmask16 special = _mm256_cmpeq_epi16_mask(_mm256_and_si256(ha, exponent), exponent) |
                            _mm256_cmpeq_epi16_mask(_mm256_and_si256(hb, exponent), exponent);
        __m512 sum = _mm512_add_ps(_mm512_cvtph_ps(ha), _mm512_cvtph_ps(hb));
        __m512 m = _mm512_abs_ps(sum);
        __mmask16 in = _mm512_cmp_ps_mask(m, lo, _CMP_GT_OQ) & _mm512_cmp_ps_mask(m, hi, _CMP_LT_OQ);
        if (special || in != 0xFFFF) {
            break;
        }
        _mm256_storeu_si256((__m256i *)(void *)(d + 2 * i),
                            _mm512_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}
#endif

void ipu_num_add_run(int dtype, const void *a, const void *b, void *dst, size_t n) {
    size_t i = 0;
    const unsigned char *pa = a, *pb = b;
    unsigned char *pd = dst;
#if defined(__x86_64__)
    while (dtype == IPU_DT_F16 && has_avx512() && i + 16 <= n) {
        i += add_f16_avx512(pa + 2 * i, pb + 2 * i, pd + 2 * i, n - i);
        if (i + 16 <= n) {
            add_f16_elements(pa, pb, pd, i, i + 16);
            i += 16;
        }
    }
    if (dtype == IPU_DT_F16 && has_f16c()) {
        i += add_f16_f16c(pa + 2 * i, pb + 2 * i, pd + 2 * i, n - i);
    }
#endif
    enum { CHUNK = 256 };
    float x[CHUNK], y[CHUNK];
    size_t size = ipu_dtype_size(dtype);
    for (; i < n; i += CHUNK) {
        size_t count = n - i < CHUNK ? n - i : CHUNK;
        ipu_num_decode(dtype, 0, pa + i * size, x, count);
        ipu_num_decode(dtype, 0, pb + i * size, y, count);
        for (size_t j = 0; j < count; j++) {
            x[j] += y[j];
        }
        ipu_num_encode(dtype, 0, x, pd + i * size, count);
    }
}

/* GELU (per form) of every FP16 code, rounded back to FP16, built once: FP16
 * GELU runs are then one lookup per element with the same bits as decode,
 * ipu_num_gelu or ipu_num_gelu_erf, and encode. */
static uint16_t gelu_f16_table[2][1u << 16];
static pthread_once_t gelu_f16_once[2] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};

static float gelu_of(int form, float x) { return form == IPU_GELU_ERF ? ipu_num_gelu_erf(x) : ipu_num_gelu(x); }

static void build_gelu_f16_table(int form) {
    for (uint32_t h = 0; h < (1u << 16); h++) {
        gelu_f16_table[form][h] = f16_encode(gelu_of(form, f16_decode((uint16_t)h)));
    }
}

static void build_gelu_tanh_table(void) { build_gelu_f16_table(IPU_GELU_TANH); }
static void build_gelu_erf_table(void) { build_gelu_f16_table(IPU_GELU_ERF); }

void ipu_num_gelu_run(int form, int dtype, const void *src, void *dst, size_t n) {
    form = form == IPU_GELU_ERF ? IPU_GELU_ERF : IPU_GELU_TANH;
    if (dtype == IPU_DT_F16) {
        pthread_once(&gelu_f16_once[form], form == IPU_GELU_ERF ? build_gelu_erf_table : build_gelu_tanh_table);
        const unsigned char *s = src;
        unsigned char *d = dst;
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, sizeof h);
            h = gelu_f16_table[form][h];
            memcpy(d + 2 * i, &h, sizeof h);
        }
        return;
    }
    enum { CHUNK = 256 };
    float x[CHUNK];
    size_t size = ipu_dtype_size(dtype);
    for (size_t done = 0; done < n; done += CHUNK) {
        size_t count = n - done < CHUNK ? n - done : CHUNK;
        ipu_num_decode(dtype, 0, (const unsigned char *)src + done * size, x, count);
        for (size_t i = 0; i < count; i++) {
            x[i] = gelu_of(form, x[i]);
        }
        ipu_num_encode(dtype, 0, x, (unsigned char *)dst + done * size, count);
    }
}
