/* workload.h: a workload is a graph plus the host values of its inputs and
 * parameters.  Values are deterministic functions of (seed, tensor, member,
 * index) — counter-based, so generating them in parallel gives the same bits
 * for any thread count — made on first use: kept unquantized in FP32 (what
 * an FP32 reference computes from), or quantized to each tensor's device type
 * without an FP32 copy (what a compile records).
 */
#ifndef IPU_WORKLOAD_H
#define IPU_WORKLOAD_H

#include <jansson.h>

#include "ir/ir.h"

/* How an input's or parameter's values are made: standard normal values of
 * (seed, stream) times scale plus offset, or given by the caller
 * (ipu_workload_set_values) before anything reads them. */
typedef struct ipu_value_spec {
    float scale, offset;
    uint64_t stream;
    int given;
    int read; /* read since made (random.c): ipu_workload_set_values refuses it then */
} ipu_value_spec;

struct ipu_workload {
    char name[32];
    uint64_t seed;
    ipu_graph graph;
    float **values; /* per tensor: rows * cols * sequence floats once made (ipu_workload_values_of) */
    char *options_json;
    float **reference; /* per tensor: the last reference run's outputs, NULL unless output */
    /* How the builder's values are distributed (NULL: ipu_default_values);
     * ipu_workload_prepare_values turns it into specs unless they are set. */
    void (*value_rule)(const ipu_ir_tensor *t, float *scale, float *offset);
    ipu_value_spec *specs; /* per tensor */
};
typedef struct ipu_workload ipu_workload;

/* Inputs standard normal; parameters with standard deviation 1/sqrt(rows),
 * as a trained layer's weights are scaled. */
void ipu_default_values(const ipu_ir_tensor *t, float *scale, float *offset);

/* A builder's options hold only the known keys (count of them); a message
 * names what (e.g. "mlp options") and lists them otherwise. */
ipu_status ipu_options_known(ipu_ctx *ctx, const json_t *o, const char *what, const char *const *known,
                             size_t count);
/* An unsigned integer option of a builder: fallback when absent, else an
 * integer in lo..hi (the message names flag and the value given). */
ipu_status ipu_option_uint(ipu_ctx *ctx, const json_t *o, const char *key, uint32_t fallback,
                           uint32_t lo, uint32_t hi, const char *flag, uint32_t *out);

/* Standard normal values for (seed, stream), element index offset..offset+n. */
void ipu_random_normal(uint64_t seed, uint64_t stream, uint64_t offset, float *out, size_t n,
                       float scale);

/* The SigLIP MLP: {"batch": 1|2|4, "precision": "fp8"|"fp16", "blocks": N,
 * "seed": S, "tokens": 729, "channels": 1152, "hidden": 4304} (the last three
 * exist for small test geometries). */
ipu_status ipu_mlp_build(ipu_ctx *ctx, const json_t *options, ipu_workload **out);

/* The SigLIP ViT (vit.c): {"batch": B, "layers": 27, "seed": S, "tokens":
 * 729, "channels": 1152, "hidden": 4304, "heads": 16, "head_dim": 72} with
 * channels = heads * head_dim; name is "vit" or "vit-small" (3 layers by
 * default).  Sets w->value_rule. */
ipu_status ipu_vit_build(ipu_ctx *ctx, const char *name, const json_t *options,
                         ipu_workload **out);

/* A workload read from a graph description (description.c): the JSON
 * object ipu_workload_describe writes. */
ipu_status ipu_workload_from_description(ipu_ctx *ctx, const json_t *description, ipu_workload **out);
/* The graph description of w: format and version, name, seed, the builder's
 * options, tensors (with how their values are made), ops and the Repeat.
 * NULL when out of memory. */
json_t *ipu_workload_describe(const ipu_workload *w);

/* Values are made on first use: normal values scaled and offset as each
 * tensor's spec says (from w->value_rule, with stream = tensor id, when the
 * specs are not set), generated in parallel.  Prepare the (empty) table of a
 * new workload. */
ipu_status ipu_workload_prepare_values(ipu_ctx *ctx, ipu_workload *w);
/* The FP32 values of input or parameter id, generated on first use and kept
 * (a cache inside the const workload). */
ipu_status ipu_workload_values_of(ipu_ctx *ctx, const ipu_workload *w, uint32_t id, const float **out);
/* Input or parameter id at its device type (rows * cols * sequence
 * elements) into out: from the kept values, or generated a chunk at a time
 * without keeping them. */
ipu_status ipu_workload_device_bytes_of(ipu_ctx *ctx, const ipu_workload *w, uint32_t id, void *out);
/* The same values as the device holds them, decoded to FP32 into out (what
 * the device-precision references compute from). */
ipu_status ipu_workload_typed_values_of(ipu_ctx *ctx, const ipu_workload *w, uint32_t id, float *out);

#endif
