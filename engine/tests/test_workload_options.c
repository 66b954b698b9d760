/* test_workload_options.c: the options of ipu_workload_create and its two
 * builders (workloads/api.c, mlp.c, vit.c).
 *   - A table of bad option documents (not JSON, not an object, no or an
 *     unknown workload, a graph workload with the wrong fields, an unknown
 *     ViT option, a geometry option of the wrong type or outside its range,
 *     channels that are not heads x head_dim, a bad seed, precision or
 *     input kind, a geometry whose tensors exceed the graph's 4 GiB limit):
 *     each fails with IPU_ERR_INVALID_ARGUMENT, leaves the output NULL and
 *     leaves a message naming the option (and the value, where the message
 *     carries one).
 *   - Valid edge geometries (both MLP precisions, the options' upper
 *     bounds, a ViT fed pixel patches, vit-small's and vit's defaults): the
 *     info JSON reports the tensors' shapes, types, roles and members, the
 *     op count, the Repeat and the value distributions computed here by
 *     hand from the geometry.
 *   - Out of memory while building: every allocation of a ViT-with-patches
 *     and an FP16 MLP create, failed in turn, gives IPU_ERR_NO_MEMORY.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ipu/ipu.h"
#include "support_seed.h"

/* A bad document and up to three substrings its message must contain. */
typedef struct bad_case {
    const char *doc;
    const char *needle[3];
} bad_case;

static const bad_case BAD_CASES[] = {
    /* ipu_workload_create itself */
    {NULL, {"\"workload\" must name a workload", "mlp, vit, vit-small or graph"}},
    {"", {"\"workload\" must name a workload"}},
    {"{\"workload\": ", {"workload options: ", "line 1"}},
    {"[\"mlp\"]", {"workload options: expected a JSON object"}},
    {"{\"workload\": \"mlp\", \"tokens\": 8, \"tokens\": 16}", {"workload options: duplicate object key"}},
    {"{}", {"\"workload\" must name a workload"}},
    {"{\"workload\": 3}", {"\"workload\" must name a workload"}},
    {"{\"workload\": \"resnet\"}", {"unknown workload 'resnet'", "expected mlp, vit, vit-small or graph"}},
    {"{\"workload\": \"graph\"}", {"a graph workload takes one more field, \"graph\""}},
    {"{\"workload\": \"graph\", \"desc\": {}}", {"a graph workload takes one more field, \"graph\""}},
    {"{\"workload\": \"graph\", \"graph\": {}, \"seed\": 1}", {"a graph workload takes one more field"}},
    /* mlp */
    {"{\"workload\": \"mlp\", \"batch\": 0}", {"--batch: expected an integer in 1..64"}},
    {"{\"workload\": \"mlp\", \"batch\": 65}", {"--batch: expected an integer in 1..64"}},
    {"{\"workload\": \"mlp\", \"batch\": \"2\"}", {"--batch: expected an integer in 1..64"}},
    {"{\"workload\": \"mlp\", \"blocks\": 0}", {"--blocks: expected an integer in 1..64"}},
    {"{\"workload\": \"mlp\", \"blocks\": 65}", {"--blocks: expected an integer in 1..64"}},
    {"{\"workload\": \"mlp\", \"tokens\": 0}", {"tokens: expected an integer in 1..100000"}},
    {"{\"workload\": \"mlp\", \"tokens\": 100001}", {"tokens: expected an integer in 1..100000"}},
    {"{\"workload\": \"mlp\", \"channels\": 65536}", {"channels: expected an integer in 1..65535"}},
    {"{\"workload\": \"mlp\", \"hidden\": -1}", {"hidden: expected an integer in 1..65535"}},
    {"{\"workload\": \"mlp\", \"hidden\": 2.5}", {"hidden: expected an integer in 1..65535"}},
    {"{\"workload\": \"mlp\", \"seed\": -1}", {"--seed: expected a non-negative integer"}},
    {"{\"workload\": \"mlp\", \"seed\": \"7\"}", {"--seed: expected a non-negative integer"}},
    {"{\"workload\": \"mlp\", \"seed\": 1.5}", {"--seed: expected a non-negative integer"}},
    {"{\"workload\": \"mlp\", \"precision\": \"fp32\"}", {"--precision: expected fp8 or fp16, got 'fp32'"}},
    {"{\"workload\": \"mlp\", \"precision\": 16}", {"--precision: expected fp8 or fp16 as a string"}},
    {"{\"workload\": \"mlp\", \"layers\": 3}",
     {"mlp options: unknown option 'layers'", "(expected batch, blocks, tokens, channels, hidden, seed or precision)"}},
    {"{\"workload\": \"mlp\", \"hidden\": 70000}", {"hidden: expected an integer in 1..65535, got 70000"}},
    {"{\"workload\": \"vit\", \"heads\": 32, \"head_dim\": 700, \"layers\": 1, \"tokens\": 1, \"hidden\": 1}",
     {"vit options: heads x head_dim = 32 x 700 = 22400 channels, expected at most 21845"}},
    /* w1 is 65535 x 65535 FP16: 8.6 GB, over the graph's 2^32-byte limit */
    {"{\"workload\": \"mlp\", \"precision\": \"fp16\", \"tokens\": 1, \"channels\": 65535, \"hidden\": 65535}",
     {"tensor 'w1'", "65535x65535 f16", "larger than 4294967296 bytes"}},
    /* vit and vit-small */
    {"{\"workload\": \"vit\", \"layer\": 2}", {"vit options: unknown option 'layer'", "head_dim or input"}},
    {"{\"workload\": \"vit-small\", \"precision\": \"fp8\"}", {"vit-small options: unknown option 'precision'"}},
    {"{\"workload\": \"vit\", \"batch\": 0}", {"vit option 'batch': expected an integer in 1..64"}},
    {"{\"workload\": \"vit\", \"batch\": 65}", {"vit option 'batch': expected an integer in 1..64"}},
    {"{\"workload\": \"vit\", \"layers\": 0}", {"vit option 'layers': expected an integer in 1..64"}},
    {"{\"workload\": \"vit-small\", \"layers\": true}", {"vit option 'layers': expected an integer in 1..64"}},
    {"{\"workload\": \"vit\", \"tokens\": 100001}", {"vit option 'tokens': expected an integer in 1..100000"}},
    {"{\"workload\": \"vit\", \"hidden\": 0}", {"vit option 'hidden': expected an integer in 1..65535"}},
    {"{\"workload\": \"vit\", \"heads\": 1025}", {"vit option 'heads': expected an integer in 1..1024"}},
    {"{\"workload\": \"vit\", \"heads\": -2}", {"vit option 'heads': expected an integer in 1..1024"}},
    {"{\"workload\": \"vit\", \"head_dim\": 0}", {"vit option 'head_dim': expected an integer in 1..1024"}},
    {"{\"workload\": \"vit\", \"channels\": 21846}", {"vit option 'channels': expected an integer in 1..21845"}},
    {"{\"workload\": \"vit\", \"channels\": \"1152\"}", {"vit option 'channels': expected an integer"}},
    {"{\"workload\": \"vit\", \"heads\": 2, \"head_dim\": 4, \"channels\": 12}",
     {"vit options: channels 12 must equal heads x head_dim = 2 x 4 = 8"}},
    {"{\"workload\": \"vit-small\", \"channels\": 1152}",
     {"vit-small options: channels 1152 must equal heads x head_dim = 4 x 64 = 256"}},
    {"{\"workload\": \"vit\", \"seed\": -3}", {"--seed: expected a non-negative integer"}},
    {"{\"workload\": \"vit-small\", \"seed\": [1]}", {"--seed: expected a non-negative integer"}},
    {"{\"workload\": \"vit\", \"input\": \"pixels\"}", {"--input: expected embeddings or patches, got 'pixels'"}},
    {"{\"workload\": \"vit\", \"input\": 5}", {"--input: expected embeddings or patches, got a non-string"}},
    {"{\"workload\": \"vit\", \"input\": null}", {"got a non-string"}},
    /* wqkv is 16384 x 49152 F143 (805 MB) with 8 members: 6.4 GB */
    {"{\"workload\": \"vit\", \"layers\": 8, \"tokens\": 1, \"hidden\": 1, \"heads\": 16, \"head_dim\": 1024}",
     {"tensor 'wqkv'", "16384x49152 f143, 8 members", "larger than 4294967296 bytes"}},
};

static void test_bad_options_are_refused(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    for (size_t i = 0; i < sizeof BAD_CASES / sizeof *BAD_CASES; i++) {
        const bad_case *c = &BAD_CASES[i];
        ipu_workload *w = NULL;
        ipu_status status = ipu_workload_create(ctx, c->doc, &w);
        const char *msg = ipu_ctx_errmsg(ctx);
        if (status != IPU_ERR_INVALID_ARGUMENT)
            TSEED_FAIL("options %s: status %s, expected IPU_ERR_INVALID_ARGUMENT (%s)",
                       c->doc ? c->doc : "(null)", ipu_status_name(status), msg);
        if (w)
            TSEED_FAIL("options %s: a refused create set its output", c->doc ? c->doc : "(null)");
        for (int k = 0; k < 3 && c->needle[k]; k++)
            if (!strstr(msg, c->needle[k]))
                TSEED_FAIL("options %s: message '%s' lacks '%s'", c->doc ? c->doc : "(null)", msg, c->needle[k]);
        ipu_ctx_clear_error(ctx);
    }
    ipu_ctx_free(ctx);
}

/* ---- valid geometries ---------------------------------------------------- */

static json_t *info_of(ipu_ctx *ctx, const char *doc, ipu_workload **keep)
{
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, doc, &w));
    assert_non_null(w);
    char *text = NULL;
    TSEED_OK(ctx, ipu_workload_info_json(ctx, w, &text));
    json_error_t error;
    json_t *info = json_loads(text, 0, &error);
    if (!info)
        TSEED_FAIL("info JSON does not parse: %s", error.text);
    ipu_free(text);
    if (keep)
        *keep = w;
    else
        ipu_workload_free(w);
    return info;
}

static json_t *tensor_named(const json_t *info, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(info, "tensors"), i, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
            return t;
    }
    TSEED_FAIL("the info JSON has no tensor '%s'", name);
    return NULL;
}

static void expect_int(const json_t *o, const char *what, const char *key, long long want)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) != want)
        TSEED_FAIL("%s: %s is %lld, expected %lld", what, key, json_is_integer(v) ? (long long)json_integer_value(v) : -1LL,
                   want);
}

static void expect_str(const json_t *o, const char *what, const char *key, const char *want)
{
    const char *v = json_string_value(json_object_get(o, key));
    if (!v || strcmp(v, want))
        TSEED_FAIL("%s: %s is '%s', expected '%s'", what, key, v ? v : "(none)", want);
}

/* Tensor `name`: rows x cols of dtype (scale), role, members. */
static void expect_tensor(const json_t *info, const char *name, long long rows, long long cols, const char *dtype,
                          int scale, const char *role, long long sequence)
{
    json_t *t = tensor_named(info, name);
    expect_int(t, name, "rows", rows);
    expect_int(t, name, "cols", cols);
    expect_str(t, name, "dtype", dtype);
    expect_int(t, name, "scale", scale);
    expect_str(t, name, "role", role);
    expect_int(t, name, "sequence", sequence);
}

/* Tensor `name`'s values: normal times scale plus offset. */
static void expect_normal(const json_t *info, const char *name, double scale, double offset)
{
    json_t *n = json_object_get(json_object_get(tensor_named(info, name), "values"), "normal");
    double s = json_number_value(json_object_get(n, "scale")), o = json_number_value(json_object_get(n, "offset"));
    if (!n || fabs(s - scale) > 1e-6 || fabs(o - offset) > 1e-6)
        TSEED_FAIL("tensor '%s': values scale %g offset %g, expected %g and %g", name, s, o, scale, offset);
}

/* The info's name, seed, tensor and op counts and Repeat. */
static void expect_graph(const json_t *info, const char *name, long long seed, size_t tensors, size_t ops,
                         long long first_op, long long op_count, long long iterations, const char *carried,
                         const char *next, const char *init)
{
    expect_str(info, "info", "name", name);
    expect_int(info, "info", "seed", seed);
    size_t nt = json_array_size(json_object_get(info, "tensors")), no = json_array_size(json_object_get(info, "ops"));
    if (nt != tensors || no != ops)
        TSEED_FAIL("%s: %zu tensors and %zu ops, expected %zu and %zu", name, nt, no, tensors, ops);
    json_t *r = json_object_get(info, "repeat");
    expect_int(r, "repeat", "first_op", first_op);
    expect_int(r, "repeat", "op_count", op_count);
    expect_int(r, "repeat", "iterations", iterations);
    expect_str(r, "repeat", "carried", carried);
    expect_str(r, "repeat", "carried_next", next);
    expect_str(r, "repeat", "carried_init", init);
}

static void expect_options(const json_t *info, const char *want_text)
{
    json_t *want = json_loads(want_text, 0, NULL);
    assert_non_null(want);
    if (!json_equal(json_object_get(info, "options"), want))
        TSEED_FAIL("options recorded differ from %s", want_text);
    json_decref(want);
}

static void test_mlp_fp16_geometry(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    /* rows = batch x tokens = 6; C = 4, H = 5; 2 blocks; FP16: no casts. */
    json_t *info = info_of(ctx, "{\"workload\": \"mlp\", \"precision\": \"fp16\", \"batch\": 2, \"tokens\": 3, "
                                "\"channels\": 4, \"hidden\": 5, \"blocks\": 2, \"seed\": 9}", NULL);
    expect_graph(info, "mlp", 9, 8, 4, 0, 3, 2, "block_in", "block_out", "x");
    expect_options(info, "{\"precision\": \"fp16\", \"batch\": 2, \"tokens\": 3, \"channels\": 4, \"hidden\": 5, "
                         "\"blocks\": 2, \"seed\": 9}");
    expect_tensor(info, "x", 6, 4, "f16", 0, "input", 1);
    expect_tensor(info, "w1", 4, 5, "f16", 0, "parameter", 2);
    expect_tensor(info, "w2", 5, 4, "f16", 0, "parameter", 2);
    expect_tensor(info, "hidden", 6, 5, "f16", 0, "activation", 1);
    expect_tensor(info, "gelu", 6, 5, "f16", 0, "activation", 1);
    expect_tensor(info, "block_out", 6, 4, "f16", 0, "activation", 1);
    expect_tensor(info, "y", 6, 4, "f16", 0, "output", 1);
    expect_normal(info, "x", 1.0, 0.0);
    expect_normal(info, "w1", 0.5, 0.0);            /* 1/sqrt(4) */
    expect_normal(info, "w2", 1.0 / sqrt(5.0), 0.0); /* 1/sqrt(5) */
    json_decref(info);
    ipu_ctx_free(ctx);
}

static void test_mlp_fp8_edges(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    /* The smallest geometry, default precision fp8: two casts, 10 tensors. */
    json_t *info = info_of(ctx, "{\"workload\": \"mlp\", \"tokens\": 1, \"channels\": 1, \"hidden\": 1}", NULL);
    expect_graph(info, "mlp", 0, 10, 6, 0, 5, 1, "block_in", "block_next", "x");
    expect_tensor(info, "x", 1, 1, "f143", -2, "input", 1);
    expect_tensor(info, "gelu_f8", 1, 1, "f143", -2, "activation", 1);
    expect_tensor(info, "block_next", 1, 1, "f143", -2, "activation", 1);
    expect_tensor(info, "block_out", 1, 1, "f16", 0, "activation", 1);
    json_decref(info);
    /* The upper bounds of batch, blocks and the seed, fp8 named. */
    info = info_of(ctx, "{\"workload\": \"mlp\", \"precision\": \"fp8\", \"batch\": 64, \"blocks\": 64, "
                        "\"tokens\": 2, \"channels\": 3, \"hidden\": 65535, \"seed\": 4611686018427387904}", NULL);
    expect_graph(info, "mlp", 4611686018427387904LL, 10, 6, 0, 5, 64, "block_in", "block_next", "x");
    expect_tensor(info, "x", 128, 3, "f143", -2, "input", 1);
    expect_tensor(info, "w1", 3, 65535, "f143", -2, "parameter", 64);
    expect_tensor(info, "w2", 65535, 3, "f143", -2, "parameter", 64);
    expect_tensor(info, "y", 128, 3, "f16", 0, "output", 1);
    json_decref(info);
    ipu_ctx_free(ctx);
}

static void test_vit_patches_geometry(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    /* B = 2 images of T = 3 tokens: R = 6 rows; C = 2 heads x 4 = 8; H = 6; 2 layers.
     * Tensors: 7 for the patch embedding, 8 layer parameters, the residual,
     * 10 in the body besides them, 10 head parameters, 19 in the head: 63.
     * Ops: 3 for the embedding, a body of 14 (two norm-matmuls of 3, the
     * attention, a cast, a matmul, an add, a GELU, a cast, a matmul, an
     * add), 14 in the head: 31. */
    json_t *info = info_of(ctx, "{\"workload\": \"vit\", \"input\": \"patches\", \"batch\": 2, \"tokens\": 3, "
                                "\"heads\": 2, \"head_dim\": 4, \"channels\": 8, \"hidden\": 6, \"layers\": 2, "
                                "\"seed\": 0}", NULL);
    expect_graph(info, "vit", 0, 63, 31, 3, 14, 2, "residual", "block_out", "x");
    expect_tensor(info, "patches", 6, 588, "f16", 0, "input", 1);
    expect_tensor(info, "patches_f8", 6, 588, "f143", -2, "activation", 1);
    expect_tensor(info, "patch_w", 588, 8, "f143", -4, "parameter", 1);
    expect_tensor(info, "patch_w_bias", 1, 8, "f16", 0, "parameter", 1);
    expect_tensor(info, "pos_embedding", 3, 8, "f16", 0, "parameter", 1);
    expect_tensor(info, "x", 6, 8, "f16", 0, "activation", 1);
    expect_tensor(info, "wqkv", 8, 24, "f143", -4, "parameter", 2);
    expect_tensor(info, "wqkv_bias", 1, 24, "f16", 0, "parameter", 2);
    expect_tensor(info, "w1", 8, 6, "f143", -4, "parameter", 2);
    expect_tensor(info, "w2", 6, 8, "f143", -4, "parameter", 2);
    expect_tensor(info, "attn_qkv", 6, 24, "f16", 0, "activation", 1);
    expect_tensor(info, "map_wkv", 8, 16, "f143", -4, "parameter", 1);
    expect_tensor(info, "map_kv", 6, 16, "f16", 0, "activation", 1);
    expect_tensor(info, "map_probe", 1, 8, "f143", -4, "parameter", 1);
    expect_tensor(info, "map_pooled", 2, 8, "f16", 0, "activation", 1);
    expect_tensor(info, "embedding", 2, 8, "f16", 0, "output", 1);
    expect_normal(info, "patches", 1.0, 0.0);
    expect_normal(info, "patch_w", 1.0 / sqrt(588.0), 0.0);
    expect_normal(info, "wqkv", 1.0 / sqrt(8.0), 0.0);
    expect_normal(info, "w2", 1.0 / sqrt(6.0), 0.0);
    expect_normal(info, "ln1_gamma", 0.1, 1.0);
    expect_normal(info, "map_ln_beta", 0.1, 0.0);
    expect_normal(info, "wqkv_bias", 0.1, 0.0);
    expect_normal(info, "pos_embedding", 0.5, 0.0);
    expect_normal(info, "map_probe", 1.0, 0.0);
    /* The attention and MAP pooling ops carry the head geometry and tokens per image. */
    size_t i, seen = 0;
    json_t *op;
    json_array_foreach(json_object_get(info, "ops"), i, op)
    {
        const char *kind = json_string_value(json_object_get(op, "op"));
        if (strcmp(kind, "attention") && strcmp(kind, "map_pool"))
            continue;
        expect_int(op, kind, "heads", 2);
        expect_int(op, kind, "head_dim", 4);
        expect_int(op, kind, "seq", 3);
        seen++;
    }
    if (seen != 2)
        TSEED_FAIL("%zu attention and map_pool ops, expected 2", seen);
    json_decref(info);
    ipu_ctx_free(ctx);
}

static void test_vit_defaults(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    /* vit-small: 3 layers, 729 tokens, 4 heads x 64 = 256, MLP 1024; embeddings in. */
    json_t *info = info_of(ctx, "{\"workload\": \"vit-small\", \"input\": \"embeddings\"}", NULL);
    expect_graph(info, "vit-small", 0, 57, 28, 0, 14, 3, "residual", "block_out", "x");
    expect_options(info, "{\"input\": \"embeddings\"}");
    expect_tensor(info, "x", 729, 256, "f16", 0, "input", 1);
    expect_tensor(info, "wqkv", 256, 768, "f143", -4, "parameter", 3);
    expect_tensor(info, "w1", 256, 1024, "f143", -4, "parameter", 3);
    expect_tensor(info, "map_w2", 1024, 256, "f143", -4, "parameter", 1);
    expect_tensor(info, "embedding", 1, 256, "f16", 0, "output", 1);
    json_decref(info);
    /* vit: 27 layers, 16 heads x 72 = 1152, MLP 4304; channels given equal to the width. */
    info = info_of(ctx, "{\"workload\": \"vit\", \"channels\": 1152, \"batch\": 64, \"seed\": 5}", NULL);
    expect_graph(info, "vit", 5, 57, 28, 0, 14, 27, "residual", "block_out", "x");
    expect_tensor(info, "x", 64 * 729, 1152, "f16", 0, "input", 1);
    expect_tensor(info, "wqkv", 1152, 3456, "f143", -4, "parameter", 27);
    expect_tensor(info, "w2", 4304, 1152, "f143", -4, "parameter", 27);
    expect_tensor(info, "map_pooled", 64, 1152, "f16", 0, "activation", 1);
    expect_tensor(info, "embedding", 64, 1152, "f16", 0, "output", 1);
    json_decref(info);
    ipu_ctx_free(ctx);
}

/* Every allocation of a create, failed in turn: IPU_ERR_NO_MEMORY, "out of
 * memory", no workload; until a create no longer reaches the failed one. */
static void walk_create(const char *doc)
{
    ipu_ctx *ctx = ipu_ctx_create();
    int done = 0;
    for (uint64_t n = 1; !done && n < 1000; n++) {
        uint64_t before = ipu_ctx_allocations(ctx);
        ipu_ctx_fail_allocation(ctx, before + n);
        ipu_workload *w = NULL;
        ipu_status status = ipu_workload_create(ctx, doc, &w);
        uint64_t made = ipu_ctx_allocations(ctx) - before;
        if (status == IPU_OK) {
            if (made >= n)
                TSEED_FAIL("%s: the create succeeded past its failed allocation %llu", doc, (unsigned long long)n);
            if (n < 3)
                TSEED_FAIL("%s: only %llu allocations", doc, (unsigned long long)made);
            assert_non_null(w);
            ipu_workload_free(w);
            done = 1;
        } else {
            if (status != IPU_ERR_NO_MEMORY || strncmp(ipu_ctx_errmsg(ctx), "out of memory", 13))
                TSEED_FAIL("%s, allocation %llu failing: %s (%s)", doc, (unsigned long long)n,
                           ipu_status_name(status), ipu_ctx_errmsg(ctx));
            if (w)
                TSEED_FAIL("%s: a failed create set its output", doc);
        }
        ipu_ctx_clear_error(ctx);
    }
    ipu_ctx_fail_allocation(ctx, 0);
    if (!done)
        TSEED_FAIL("%s: no create succeeded", doc);
    ipu_ctx_free(ctx);
}

static void test_out_of_memory_while_building(void **state)
{
    (void)state;
    walk_create("{\"workload\": \"vit\", \"input\": \"patches\", \"layers\": 1, \"tokens\": 2, \"heads\": 1, "
                "\"head_dim\": 4, \"hidden\": 4}");
    walk_create("{\"workload\": \"mlp\", \"precision\": \"fp16\", \"tokens\": 2, \"channels\": 4, \"hidden\": 4}");
}

int main(void)
{
    tseed_init("test_workload_options");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_options_are_refused),
        cmocka_unit_test(test_mlp_fp16_geometry),
        cmocka_unit_test(test_mlp_fp8_edges),
        cmocka_unit_test(test_vit_patches_geometry),
        cmocka_unit_test(test_vit_defaults),
        cmocka_unit_test(test_out_of_memory_while_building),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
