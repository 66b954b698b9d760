/* ipu.h: the public C API of libipu_e2e.
 *
 * Everything crosses the ABI as opaque handles, status codes, byte buffers and
 * JSON strings (released with ipu_free).  Every fallible call returns an
 * ipu_status and leaves a message (first error wins, with file:line) that
 * ipu_ctx_errmsg() returns.  The library never prints and never aborts on user
 * input.  Python binds this header through ctypes and refuses a library whose
 * ipu_abi_version() differs from the one it was written for.
 */
#ifndef IPU_IPU_H
#define IPU_IPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IPU_ABI_VERSION 10u

/* Status codes: explicit values, append-only. */
typedef enum ipu_status {
    IPU_OK = 0,
    IPU_ERR_INVALID_ARGUMENT = 1, /* a caller-supplied value is out of range */
    IPU_ERR_NO_MEMORY = 2,
    IPU_ERR_IO = 3,               /* a file could not be read or written */
    IPU_ERR_MALFORMED = 4,        /* a package or profile failed validation */
    IPU_ERR_DEVICE_FAULT = 5,     /* the device stopped on a fault */
    IPU_ERR_STATE = 6,            /* call out of order (run before initialize) */
    IPU_ERR_INTERNAL = 7,         /* an internal invariant failed */
    IPU_ERR_CANCELLED = 8,        /* ipu_ctx_cancel was called: the work stopped at a boundary */
    IPU_ERR_NO_PLAN = 9           /* ipu_compile: no candidate plan fits the memory budget */
} ipu_status;

typedef struct ipu_ctx ipu_ctx;
typedef struct ipu_package ipu_package;
typedef struct ipu_device ipu_device;

typedef enum ipu_log_level { IPU_LOG_DEBUG = 0, IPU_LOG_INFO = 1, IPU_LOG_WARN = 2 } ipu_log_level;
typedef void (*ipu_log_fn)(void *user, int level, const char *message);
/* Progress: stage name, units done, units total (total 0 = unknown). */
typedef void (*ipu_progress_fn)(void *user, const char *stage, uint64_t done, uint64_t total);

uint32_t ipu_abi_version(void);
const char *ipu_status_name(ipu_status status);
/* Release a string or buffer the library returned. ipu_free(NULL) is a no-op. */
void ipu_free(void *pointer);

/* ---- context ---------------------------------------------------------- */
ipu_ctx *ipu_ctx_create(void);
void ipu_ctx_free(ipu_ctx *ctx);
/* The first error since the last clear, "" when none. Owned by the context. */
const char *ipu_ctx_errmsg(const ipu_ctx *ctx);
void ipu_ctx_clear_error(ipu_ctx *ctx);
void ipu_ctx_set_log(ipu_ctx *ctx, ipu_log_fn fn, void *user);
void ipu_ctx_set_progress(ipu_ctx *ctx, ipu_progress_fn fn, void *user);
/* Worker threads for device tiles (0 = OpenMP default; more than
 * IPU_MAX_THREADS take that many). Results do not depend on it. */
#define IPU_MAX_THREADS 1024
void ipu_ctx_set_threads(ipu_ctx *ctx, int threads);
/* Ask the work running on this context to stop: safe from any thread and from
 * a signal handler. Compile stages, device steps, reference ops and checks
 * look at the request at their boundaries and return IPU_ERR_CANCELLED; the
 * request stays until the context is freed. */
void ipu_ctx_cancel(ipu_ctx *ctx);
/* Test hooks for out-of-memory paths.  The context counts every allocation
 * the library makes on its behalf; ipu_ctx_fail_allocation makes the nth one
 * from the context's creation (1-based) fail as if memory ran out, that one
 * only (0 = none, the default), so the call making it returns
 * IPU_ERR_NO_MEMORY.  ipu_ctx_allocations is the count so far.  The
 * libraries the engine calls (jansson, OpenBLAS, OpenMP) allocate on their
 * own and are not counted. */
void ipu_ctx_fail_allocation(ipu_ctx *ctx, uint64_t nth);
uint64_t ipu_ctx_allocations(const ipu_ctx *ctx);

/* ---- device profiles --------------------------------------------------- */
/* Validate a profile JSON (fields as fixtures/profiles/c600.json; missing
 * fields take the c600 defaults), optionally override the tile count
 * (tiles_override 0 = keep), and return the complete canonical JSON. */
ipu_status ipu_profile_resolve(ipu_ctx *ctx, const char *profile_json, uint32_t tiles_override,
                               char **out_json);

/* ---- packages ---------------------------------------------------------- */
ipu_status ipu_package_load(ipu_ctx *ctx, const void *bytes, size_t size, ipu_package **out);
ipu_status ipu_package_load_file(ipu_ctx *ctx, const char *path, ipu_package **out);
/* What a package file says without loading it: the header and section table
 * pass the loader's checks, the checksum is computed over the whole file a
 * chunk at a time, and only the streams, strings and meta sections are read.
 * *out_json: {"tiles", "streams": [{name, direction, size}], "meta"}.  A
 * replay checks the streams against its workload before it loads. */
ipu_status ipu_package_peek_file(ipu_ctx *ctx, const char *path, char **out_json);
/* Serialize; *out_bytes is released with ipu_free. */
ipu_status ipu_package_serialize(ipu_ctx *ctx, const ipu_package *pkg, void **out_bytes,
                                 size_t *out_size);
/* Write atomically (temporary file in the same folder, then rename). */
ipu_status ipu_package_save_file(ipu_ctx *ctx, const ipu_package *pkg, const char *path);
/* Summary: version, tiles, profile, digest, streams, records, metadata. */
ipu_status ipu_package_info_json(ipu_ctx *ctx, const ipu_package *pkg, char **out_json);
/* Reschedule the package's exchange phases (options {"phases": [program
 * phases]}, all when absent): per phase its recorded and rescheduled
 * horizon, largest and total table rows in words, first-activity spread and
 * whether the tables still fit (JSON, released with ipu_free). */
ipu_status ipu_package_exchange_replay(ipu_ctx *ctx, const ipu_package *pkg, const char *options_json,
                                       char **out_json);
/* The main program's exact static timing, computed from the package's
 * records without running it (the cycles ipu_device_run will charge, in
 * its shape: cycles, ms, totals, steps, tiles.compute and tiles.wait), and
 * the exchange bytes sent and received per exchange phase and per
 * compiler op ("exchange": {"phases": [...], "ops": [...]}).  A package
 * whose records the device could not read fails with IPU_ERR_MALFORMED. */
ipu_status ipu_package_timing_json(ipu_ctx *ctx, const ipu_package *pkg, char **out_json);
/* Recorded data (kind "input" or "expected") for a named stream; the pointer
 * stays owned by the package. Missing record: IPU_ERR_INVALID_ARGUMENT. */
ipu_status ipu_package_record(ipu_ctx *ctx, const ipu_package *pkg, const char *kind,
                              const char *stream, const void **out_data, size_t *out_size);
void ipu_package_free(ipu_package *pkg);

/* ---- device ------------------------------------------------------------ */
ipu_status ipu_device_create(ipu_ctx *ctx, const char *profile_json, ipu_device **out);
void ipu_device_free(ipu_device *dev);
/* Forget the package the device holds, before that package is freed: streams
 * set after it wait for the next initialize, which may load another package
 * built for the same profile.  The tiles' memory stays allocated, so a device
 * that runs many packages maps its SRAM once. */
void ipu_device_unload(ipu_device *dev);
/* Host data for a stream, consumed by the next initialize (parameter streams)
 * or run (input streams; one set before an initialize is dropped by it).
 * With a package loaded it is checked against that package at once.  The
 * bytes are copied. */
ipu_status ipu_device_set_stream(ipu_ctx *ctx, ipu_device *dev, const char *stream,
                                 const void *data, size_t size);
/* Device options, taking effect at the next initialize.  options_json:
 * {"allocation_checks": true|false} (default true: operands must lie in a
 * live allocation and ended lives poison their bytes; false only to measure
 * what the checks cost), {"memory_events": true|false} (default false:
 * record every allocation's life beginning and ending as the device runs,
 * for ipu_device_memory_timeline_json), {"traced_tiles": [tile, ...]} (at
 * most 64 tiles: every step of the cycle report lists their own compute
 * cycles in that order as "tile_compute"). */
ipu_status ipu_device_configure(ipu_ctx *ctx, ipu_device *dev, const char *options_json);
/* Load the package into SRAM and run its initialize program. */
ipu_status ipu_device_initialize(ipu_ctx *ctx, ipu_device *dev, const ipu_package *pkg);
/* Run one invocation of the main program. *out_json: cycles per step and per
 * tile. On IPU_ERR_DEVICE_FAULT, ipu_device_fault_json describes the fault. */
ipu_status ipu_device_run(ipu_ctx *ctx, ipu_device *dev, char **out_json);
/* Output stream bytes of the last run; the pointer stays owned by the device. */
ipu_status ipu_device_stream(ipu_ctx *ctx, ipu_device *dev, const char *stream,
                             const void **out_data, size_t *out_size);
ipu_status ipu_device_fault_json(ipu_ctx *ctx, const ipu_device *dev, char **out_json);
/* After a run that stopped on a device fault: its cycle report (as
 * ipu_device_run's) over the steps it completed before the fault.
 * IPU_ERR_STATE when no run stopped on a fault since the last initialize. */
ipu_status ipu_device_fault_profile_json(ipu_ctx *ctx, const ipu_device *dev, char **out_json);
/* The run-time memory timeline of the memory events recorded since the last
 * initialize (every run since): version 1, kind "memory-timeline"; per
 * executed phase (program, phase, iteration, invocation, compiler op) the
 * device's live bytes by category and the aperture's; per tile its peak
 * with its phase, breakdown by category, free bytes and largest hole; the
 * fullest tile's peak with its live allocations and that tile's live, free,
 * largest hole and fragmentation at every executed phase; per compiler op
 * its peak and residual bytes; the allocation table; support bytes per
 * tile.  IPU_ERR_STATE when the device was not recording. */
ipu_status ipu_device_memory_timeline_json(ipu_ctx *ctx, const ipu_device *dev, char **out_json);
/* Debug read of tile memory (does not count as a device access). */
ipu_status ipu_device_read(ipu_ctx *ctx, const ipu_device *dev, uint32_t tile, uint32_t address,
                           void *buffer, size_t size);
/* Debug write of tile memory: marks the bytes written (used by tests that
 * corrupt state between invocations). */
ipu_status ipu_device_write(ipu_ctx *ctx, ipu_device *dev, uint32_t tile, uint32_t address,
                            const void *buffer, size_t size);

/* ---- workloads --------------------------------------------------------- */
/* Build the exchange-stress package. options_json: {"profile": {...},
 * "pattern": "unicast|multicast|paired|loopback|base|all",
 * "sources": "standard|interleaved|both", "iterations": N, "words": W}. */
ipu_status ipu_stress_build(ipu_ctx *ctx, const char *options_json, ipu_package **out);

/* ---- benchmarks -------------------------------------------------------- */
/* Run the device GEMM benchmark: options {"profile":..,"m":..,"n":..,"k":..,
 * "precision":"fp16|fp8","repeats":R}; result JSON has device and direct
 * sgemm seconds and GFLOP/s. */
ipu_status ipu_bench_gemm(ipu_ctx *ctx, const char *options_json, char **out_json);
/* Run every kernel entry's sample call on every tile: options {"profile":..,
 * "repeats": R}; result JSON per kernel: formula, sample arguments and
 * cycles, the device's compute cycles, wall seconds per call and simulated
 * cycles per wall second. */
ipu_status ipu_bench_kernels(ipu_ctx *ctx, const char *options_json, char **out_json);

/* ---- workloads, references and checks ---------------------------------- */
typedef struct ipu_workload ipu_workload;

/* Build a workload graph and generate its input and parameter values.
 * options_json: {"workload": "mlp", ...the workload's options}; for "mlp":
 * "batch", "precision" ("fp8"|"fp16"), "blocks", "seed", and the geometry
 * "tokens", "channels", "hidden" (defaults 729, 1152, 4304).  Or
 * {"workload": "graph", "graph": description}: a workload from its graph
 * description (workloads/description.c: what ipu_workload_info_json
 * writes); a bad one fails with IPU_ERR_INVALID_ARGUMENT naming the tensor
 * or op and the field. */
ipu_status ipu_workload_create(ipu_ctx *ctx, const char *options_json, ipu_workload **out);
void ipu_workload_free(ipu_workload *w);
/* The workload's graph description: format, version, name, seed, options,
 * tensors (name, rows, cols, dtype, scale, role, sequence, and for inputs
 * and parameters how their values are made), ops (op, inputs, output by
 * name, and their fields) and repeat (null when none). */
ipu_status ipu_workload_info_json(ipu_ctx *ctx, const ipu_workload *w, char **out_json);
/* The values of an input or parameter whose description says "given":
 * rows * cols * sequence finite floats, copied; before anything reads them
 * (a compile, a reference, ipu_workload_values: IPU_ERR_STATE then, naming
 * the tensor). */
ipu_status ipu_workload_set_values(ipu_ctx *ctx, ipu_workload *w, const char *tensor, const float *data,
                                   size_t count);
/* Unquantized FP32 values of an input or parameter: rows * cols * sequence
 * floats (sequence members back to back), owned by the workload. */
ipu_status ipu_workload_values(ipu_ctx *ctx, const ipu_workload *w, const char *tensor,
                               const float **out_data, size_t *out_count);
/* The same values quantized to the tensor's device type and scale, all
 * members; *out_bytes is released with ipu_free. */
ipu_status ipu_workload_device_bytes(ipu_ctx *ctx, const ipu_workload *w, const char *tensor,
                                     void **out_bytes, size_t *out_size);
/* Run the host reference and keep its outputs in the workload.  options_json:
 * {"fp32": true}: FP32 from the unquantized values (BLAS); {"fp32": false}:
 * device precision (inputs, parameters and every op's result rounded to the
 * tensor's device type with the shared numerics library; the plan's
 * "attention", "attention_bands" and "matmuls", as a package's meta records
 * them, make attention and matmuls sum as the device does).  *out_json: mode
 * ("fp32" or "device"), wall_seconds, blas_threads, outputs. */
ipu_status ipu_reference_run(ipu_ctx *ctx, ipu_workload *w, const char *options_json,
                             char **out_json);
/* A reference output (rows * cols floats, owned by the workload); the
 * reference must have run (IPU_ERR_STATE otherwise). */
ipu_status ipu_reference_output(ipu_ctx *ctx, const ipu_workload *w, const char *tensor,
                                const float **out_data, size_t *out_count);
/* Check rows x cols device values of type dtype_name ("f32", "f16", "f143",
 * "f152"; FP8 decoded with scale 0) against reference floats.  criteria_json:
 * {"min_cosine": c, "atol": a, "rtol": r, "norm_tolerance": n}, every field
 * required: cosine per row in double (a row with a nonfinite value fails, and
 * one of zero norm unless both rows are all zeros) at least c, every element |d - r| <= a + r |ref|, and the
 * tensor's norm ratio within 1 +- n.  *out_json: each criterion's figures
 * with the worst element and the atol it needs, the criteria and passed
 * (see reference/check.h). */
ipu_status ipu_check_outputs(ipu_ctx *ctx, const float *reference, const void *device,
                             const char *dtype_name, size_t rows, size_t cols,
                             const char *criteria_json, char **out_json);

/* The per-op check: run pkg (compiled from w) once on a fresh simulator,
 * read every op's output where the package says it is complete (each Repeat
 * iteration too), compute the op with the device-precision reference from
 * the device's own inputs and compare.  criteria_json: {"min_cosine",
 * "atol_rms" (atol as a fraction of the reference output's RMS), "rtol",
 * "norm_tolerance"}.  *out_json: passed, compared (op outputs), failed_ops,
 * unchecked_ops, per_op (checks, failures, lowest cosine, atol needed over
 * the RMS) and first_divergence (op, kind, name, label, iteration, phase, the
 * check with its worst element, and the tile, address and allocation holding
 * that element; null when every op passed). */
ipu_status ipu_check_ops(ipu_ctx *ctx, const ipu_workload *w, const ipu_package *pkg,
                         const char *criteria_json, char **out_json);
/* The same on a device the caller keeps, made for the package's profile:
 * the package is loaded, run once and unloaded (ipu_device_unload), so one
 * device serves many checks without mapping its memory again. */
ipu_status ipu_check_ops_on(ipu_ctx *ctx, ipu_device *dev, const ipu_workload *w, const ipu_package *pkg,
                            const char *criteria_json, char **out_json);

/* ---- the compiler ------------------------------------------------------ */
/* Compile a workload for a device: plan, lower, schedule exchange, place and
 * package.  options_json: {"profile": {...}, "memory_budget": bytes|null
 * (null: the profile's default budget), "attention": "auto" (default),
 * "flash" or "materialized" (how attention and MAP pooling compute), "inject": for tests only, one
 * mutation (a seeded bug) in one stage's product, named as ipu_mutations_json lists}, and the
 * search, exchange and file options of ipu-e2e-test's flags of the same names (search_budget,
 * catalogue_budget, frontier_cap, catalogue_group, search_seconds, search_beam, search_steps,
 * probe_capacity, exchange_stream_words, exchange_rank, balance_streams, attention_key_bands,
 * placement_report, memory_profile_directory); any other key is refused (IPU_ERR_INVALID_ARGUMENT
 * naming it).  The package records the workload's
 * device-typed inputs and parameters.  *out_report: the plan (per op: grid,
 * candidates, cycles, footprint; total cycles), the estimate (liveness peak
 * per tile), the package support sizes and each stage's wall time.  When
 * no candidate plan fits (IPU_ERR_NO_PLAN) *out_report is {"rejection":
 * {stage ("plan": the estimate, "place": placement), reason, budget,
 * search {attempts, plan_seconds, refine_seconds}, smallest_candidate
 * {peak_bytes, peak_tile, peak_phase}}}. */
ipu_status ipu_compile(ipu_ctx *ctx, const ipu_workload *w, const char *options_json,
                       ipu_package **out, char **out_report);
/* The mutations "inject" takes: [{name, stage, models}], each a realistic
 * single-point compiler bug (tests only). */
ipu_status ipu_mutations_json(ipu_ctx *ctx, char **out_json);

#ifdef __cplusplus
}
#endif
#endif
