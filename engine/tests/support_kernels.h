/* support_kernels.h: what the kernel tests (test_kernels_*.c) share.  A job
 * is one tile's part of a hand-built package (support_packages.h): a compute
 * list of up to TK_KERNELS calls, package data (operands, guard bytes, or the
 * tpkg_data byte pattern) and spans to read back with ipu_device_read.
 * tk_run puts job i on tile i of a fixture profile, runs the lists as one
 * step and fills each job's compute cycles and read-back buffers; tk_sweep
 * runs a random sweep a package of TK_TILES cases at a time through make and
 * check callbacks; tk_guards surrounds an output with TK_PAD guard bytes
 * (TK_GUARD) on each side and tk_check_guards fails when one was overwritten;
 * tk_arena places operands in a profile's free tensor space.
 *
 * The reference helpers follow the formats' definitions (DEVICE.md: IEEE
 * binary32 and binary16, OCP E4M3 (F143) and E5M2 (F152) times 2^scale), not
 * the engine's code: exact decoding, rounding of a double to a format, ulps,
 * random codes, the exact row-major dot product and the row-major GEMM's
 * tolerance and cycle formula, and GELU's tanh formula.  Random draws come
 * from support_seed.h, and every failure goes through TSEED_FAIL or
 * TSEED_OK, so it names the seed.
 */
#ifndef IPU_TESTS_SUPPORT_KERNELS_H
#define IPU_TESTS_SUPPORT_KERNELS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "support_packages.h"

#define TK_TILES 16u      /* tk_run's fixture profile */
#define TK_GUARD 0xA5u    /* guard byte */
#define TK_PAD 32u        /* guard bytes on each side of an output */
#define TK_NAN_BYTE 0xFFu /* 0xFF bytes are NaN in FP32, FP16, F143 and F152 */
/* Operand areas of a 16-tile fixture package: inputs in TK_IN0 (region 0,
 * memory elements 23..27) or TK_IN1 (region 1), outputs in TK_OUT0 (region
 * 0, elements 28..31) or TK_OUT1, so an output never shares an element with
 * an input. */
#define TK_IN0 0x5C000u
#define TK_OUT0 0x70000u
#define TK_IN1 0x80000u
#define TK_OUT1 0xA0000u

/* ---- jobs: one tile's calls, data and read-back ---------------------------- */
#define TK_KERNELS 4
#define TK_SPANS 8
#define TK_GUARDS 4

typedef struct tk_span {
    uint32_t address, size;
    uint8_t *bytes; /* data: NULL for the tpkg_data pattern of seed */
    uint32_t seed;
} tk_span;

typedef struct tk_job {
    tpkg_kernel k[TK_KERNELS];
    int nk, ndata, nread, nguard;
    tk_span data[TK_SPANS], read[TK_SPANS];
    uint8_t lo[TK_GUARDS][TK_PAD], hi[TK_GUARDS][TK_PAD]; /* guard bytes read back */
    uint32_t list;    /* tk_run: the compute list's address (descriptor 0 at list + 4) */
    uint64_t compute; /* tk_run: the tile's compute cycles */
} tk_job;

/* Append a call to the job's compute list. */
void tk_kernel(tk_job *j, uint32_t entry, uint32_t argc, const uint32_t *args);
/* Package data: size bytes at address (the bytes must outlive tk_run). */
void tk_data(tk_job *j, uint32_t address, const void *bytes, uint32_t size);
/* Package data: tpkg_data's pattern, byte i = (seed + 37 i) & 0xFF. */
void tk_pattern(tk_job *j, uint32_t address, uint32_t size, uint32_t seed);
/* Read [address, +size) back into bytes after a successful run. */
void tk_read(tk_job *j, uint32_t address, void *bytes, uint32_t size);
/* TK_PAD guard bytes on each side of [address, +size), read back into the
 * job's next lo and hi. */
void tk_guards(tk_job *j, uint32_t address, uint32_t size);
/* Fail when a guard byte of the job's tk_guards was overwritten. */
void tk_check_guards(const tk_job *j, const char *what, int tcase);

/* Build a package for the tiles-tile fixture profile with jobs[t] on tile t
 * (package data, then its compute list; a job without calls adds no list),
 * the lists run as the main program's one step, on a context with threads
 * threads (0: the default).  Initialize must succeed.  A successful run fills
 * each job's compute and read-back spans.  Without fault, a failing run fails
 * the test; with it, *fault is the parsed fault JSON of a failing run
 * (caller frees) or NULL.  Returns the run's status. */
ipu_status tk_run_on(uint32_t tiles, int threads, tk_job *jobs, uint32_t n, json_t **fault);
/* tk_run_on(TK_TILES, 0, ...). */
ipu_status tk_run(tk_job *jobs, uint32_t n, json_t **fault);

/* A sweep of random cases, TK_TILES per package: for each package,
 * make(sweep, job, index) for each case on its tile (the job zeroed), one
 * tk_run that must succeed, then check(sweep, job, index) for each case in
 * order; the last package may have fewer tiles.  The caller keeps its own
 * per-case state in sweep (case index on tile index % TK_TILES). */
typedef void (*tk_make_fn)(void *sweep, tk_job *job, uint32_t index);
typedef void (*tk_check_fn)(void *sweep, const tk_job *job, uint32_t index);
void tk_sweep(uint32_t cases, void *sweep, tk_make_fn make, tk_check_fn check);

/* The tiles-tile fixture profile (tpkg_profile). */
void tk_profile(uint32_t tiles, ipu_profile *out);

/* A bump allocator over a profile's free tensor space: region 0 from
 * tpkg_data0 to region1_base, region 1 up to the accessible end. */
typedef struct tk_arena {
    uint32_t next[2], end[2];
} tk_arena;

tk_arena tk_arena_of(const ipu_profile *p);
/* bytes in region r1 (0 or 1): align-aligned, TK_PAD free bytes or more
 * below (plus 0..15 random align steps) and TK_PAD above. */
uint32_t tk_place(tk_arena *a, int r1, uint32_t bytes, uint32_t align);

/* ---- assertions ------------------------------------------------------------- */
/* Fail unless bytes[0..count) all hold TK_GUARD; the printf-style context
 * leads the message. */
void tk_expect_guard(const uint8_t *bytes, uint32_t count, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Fail unless the gap bytes between the rows of a strided operand (rows of
 * cols elements of size bytes, row stride ld elements) all hold TK_GUARD. */
void tk_expect_row_gaps(const uint8_t *bytes, uint32_t rows, uint32_t cols, uint32_t ld,
                        size_t size, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Sweep coverage of flag bits: tk_count_flags counts each of the low bits
 * bits of a case's flags in on[] or off[]; tk_expect_flags fails unless each
 * was drawn both ways (what leads the message). */
void tk_count_flags(uint32_t flags, int bits, int *on, int *off);
void tk_expect_flags(const int *on, const int *off, int bits, const char *what);

/* A malformed_descriptor fault on tile over the job's first call (its head
 * word and arguments, as tk_run placed them), naming kernel, with a detail
 * that contains word; on a mismatch the fault JSON is printed. */
#define TK_EXPECT_MALFORMED(fault, tile, job, kernel, word) \
    tk_expect_malformed_at(__FILE__, __LINE__, (fault), (tile), (job), (kernel), (word))
void tk_expect_malformed_at(const char *file, int line, const json_t *fault, uint32_t tile,
                            const tk_job *job, const char *kernel, const char *word);

/* ---- the formats, from their definitions ------------------------------------ */
uint32_t tk_align_up(uint32_t v, uint32_t a);
/* Bytes per element: 4 FP32, 2 FP16, 1 FP8. */
size_t tk_size(int t);
/* The exact value of a code (FP8 times 2^scale); NaN (with the code's sign)
 * exactly for NaN codes. */
double tk_decode(int t, int scale, const uint8_t *p);
/* tk_decode of element i. */
double tk_decode_at(int t, int scale, const uint8_t *base, size_t i);
/* v rounded to type t (FP8 times 2^scale), nearest even: FP16 overflows to
 * infinity, FP8 saturates (infinities too); NaN stays NaN. */
double tk_round(int t, int scale, double v);
/* The spacing of FP16 and FP32 values at |v| (subnormal spacing below the
 * normal range). */
double tk_f16_ulp(double v);
double tk_f32_ulp(double v);

/* Random finite codes of moderate magnitude: FP16 below 4 (one in 16
 * subnormal), FP32 multiples of 2^-13 in [-4, 4), F143 below 32 and F152
 * below 16 before the scale.  TK_CODES_ZEROS: FP16 is zero one time in 32;
 * TK_CODES_FULL: the whole finite FP8 range. */
#define TK_CODES_ZEROS 1
#define TK_CODES_FULL 2
void tk_codes(int t, int flags, uint8_t *dst, size_t count);
/* A strided operand: tk_codes in the rows, TK_NAN_BYTE in the gaps. */
void tk_rows(int t, int flags, uint8_t *dst, uint32_t rows, uint32_t cols, uint32_t ld);

/* ---- references ----------------------------------------------------------------- */
/* A row-major operand: codes of type (times 2^scale), row stride ld elements. */
typedef struct tk_matrix {
    int type, scale;
    const uint8_t *codes;
    uint32_t ld;
} tk_matrix;

/* c + sum over l < k of A[i][l] B[l][j], in double, adding in order of l; with
 * mag, *mag = |c| + the sum of the products' magnitudes. */
double tk_dot(tk_matrix a, tk_matrix b, uint32_t i, uint32_t j, uint32_t k, double c, double *mag);
/* The GEMM tolerance of the kernel tests: 1e-5 mag (FP32 accumulation of up
 * to 72 terms errs by at most 73 * 2^-24 of mag, plus the final rounding),
 * plus one f16 ulp of the exact value for FP16 output. */
double tk_gemm_tol(int out_type, double exact, double mag);
/* DEVICE.md's row-major GEMM: 50 + ceil(m n k / rate) + 4 m, rate 128 FP8,
 * 64 FP16 -> FP16, 32 FP16 -> FP32. */
uint64_t tk_gemm_cycles(int f8, uint32_t m, uint32_t n, uint32_t k, int out_type);
/* GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))),
 * in double (NaN for NaN and for -inf, where it reads -inf * 0). */
double tk_gelu_formula(double x);

#endif
