/* numerics.h: the device's number formats, shared by the device model and the
 * device-precision reference so the two agree bit for bit.
 *
 * FP16 is IEEE binary16.  FP8 follows the OCP 8-bit floating point
 * specification: F143 is E4M3 (bias 7, no infinities, NaN = S.1111.111, max
 * 448) and F152 is E5M2 (bias 15, IEEE-style infinities and NaNs, max 57344).
 * An FP8 value carries a scale exponent: value = decode(bits) * 2^scale.
 * Conversions from FP32 round to nearest, ties to even.  FP16 overflows to
 * infinity; FP8 saturates to the largest finite value (infinities included);
 * NaN stays NaN (sign kept).
 */
#ifndef IPU_NUMERICS_H
#define IPU_NUMERICS_H

#include <stddef.h>
#include <stdint.h>

/* Element types; the values appear in kernel descriptors (append-only). */
typedef enum ipu_dtype {
    IPU_DT_F32 = 0,
    IPU_DT_F16 = 1,
    IPU_DT_F143 = 2,
    IPU_DT_F152 = 3,
    IPU_DT_COUNT = 4
} ipu_dtype;

/* Bytes per element (4, 2, 1, 1); 0 for an unknown type. */
size_t ipu_dtype_size(int dtype);
/* "f32", "f16", "f143", "f152"; NULL for an unknown type. */
const char *ipu_dtype_name(int dtype);
/* Parse a name as above; -1 when unknown. */
int ipu_dtype_parse(const char *name);

float ipu_num_f16_to_f32(uint16_t bits);
uint16_t ipu_num_f32_to_f16(float value);
/* FP8 (fmt F143 or F152) with scale exponent. */
float ipu_num_f8_to_f32(uint8_t bits, int fmt, int scale);
uint8_t ipu_num_f32_to_f8(float value, int fmt, int scale);

/* Whole runs: decode n elements of dtype (with scale for FP8) to FP32, and
 * encode n FP32 values to dtype.  F32 runs are plain copies (scale ignored). */
void ipu_num_decode(int dtype, int scale, const void *src, float *dst, size_t n);
void ipu_num_encode(int dtype, int scale, const float *src, void *dst, size_t n);

/* Round n FP32 values in place to what dtype (with scale) represents: the
 * value ipu_num_decode gives for ipu_num_encode's code. */
void ipu_num_round(int dtype, int scale, float *x, size_t n);

/* Elementwise sum of n elements of dtype (scale 0): each pair decoded,
 * added in FP32 and encoded into dst (which may be a or b). */
void ipu_num_add_run(int dtype, const void *a, const void *b, void *dst, size_t n);

/* GELU's two forms (the IR's GELU op says which). */
enum ipu_gelu_form { IPU_GELU_TANH = 0, IPU_GELU_ERF = 1 };
/* GELU with the tanh approximation, evaluated in FP32: the one definition the
 * device's kernel and every reference use. */
float ipu_num_gelu(float x);
/* GELU exactly, x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, evaluated in FP32
 * (erff): the erf form's one definition. */
float ipu_num_gelu_erf(float x);
/* GELU (form: enum ipu_gelu_form) of n elements of dtype (scale 0) into dst:
 * each element decoded, taken through ipu_num_gelu or ipu_num_gelu_erf and
 * encoded (FP16 runs read a table of every code's result, built once per
 * form).  src and dst may be the same buffer. */
void ipu_num_gelu_run(int form, int dtype, const void *src, void *dst, size_t n);

#endif
