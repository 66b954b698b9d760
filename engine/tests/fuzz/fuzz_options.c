/* fuzz_options.c: libFuzzer target for the workload and compile options:
 * the input is two JSON documents, workload options then compile options,
 * separated by the first NUL byte (or, when there is none, the first
 * newline).  They go through ipu_workload_create, ipu_compile and a device
 * run of the package (device_run.c), every call held to fuzz_check;
 * a package compiled without a mutation ("inject") must run without a device
 * fault (a fault is a compiler bug) and pass the per-op check
 * (ipu_check_ops_on, on the device the replay keeps, with the harness's
 * default criteria, harness/ipu_e2e/tolerances.py: every op's output against
 * the device-precision reference of that op).
 * Executions stay in milliseconds by keeping models and devices tiny: a
 * geometry option the input leaves out takes a tiny value here (8 tokens, 16
 * channels, 32 hidden, 1 layer of 2 heads of 8), one it sets above a cap
 * (batch 2, blocks or layers 2, tokens 32, channels 64, hidden 128, heads 4,
 * head_dim 32) skips the input; the device is 4 tiles unless the compile
 * options' profile says otherwise, and a profile of more than 16 tiles or
 * 1 MiB of SRAM skips the input.  The options that write files
 * (placement_report, memory_profile_directory) are removed.  Many mutations
 * of a kept input compile to a package already run: the device and the
 * per-op check are deterministic, so a package whose bytes, workload options
 * and check were all seen before is not run again (the counts printed at
 * exit say how many were), and options seen before (once made tiny, in
 * compact form) are not compiled again.  Seeds: fixtures/fuzz/options/.
 */
#include <string.h>

#include "core/core.h"
#include "core/profile.h"
#include "fuzz.h"

#include <jansson.h>

/* Inputs whose options were compiled before (not compiled again), inputs
 * compiled to a package within the run limits, and of those the ones run
 * (the others compiled to a package run before); printed at exit in
 * libFuzzer's stat:: form. */
static uint64_t repeated, compiled, ran;

static void print_counts(void)
{
    fprintf(stderr, "stat::options_repeated: %llu\nstat::options_compiled: %llu\nstat::options_ran: %llu\n",
            (unsigned long long)repeated, (unsigned long long)compiled, (unsigned long long)ran);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    atexit(print_counts);
    return 0;
}

#define OP_CRITERIA "{\"min_cosine\": 0.9999, \"atol_rms\": 0.002, \"rtol\": 0.0078125, \"norm_tolerance\": 0.002}"

typedef struct geometry {
    const char *key;
    json_int_t tiny, cap;
} geometry;

static const geometry MLP[] = {{"batch", 1, 2},     {"blocks", 1, 2},    {"tokens", 8, 32},
                               {"channels", 16, 64}, {"hidden", 32, 128}, {NULL, 0, 0}};
/* channels is left to default to heads x head_dim (vit refuses another width). */
static const geometry VIT[] = {{"batch", 1, 2},   {"layers", 1, 2},    {"tokens", 8, 32},
                               {"heads", 2, 4},   {"head_dim", 8, 32}, {"hidden", 32, 128},
                               {"channels", 0, 64}, {NULL, 0, 0}};

/* Fill in tiny defaults; 0 when an option is over its cap. */
static int tiny_geometry(json_t *options, const geometry *g)
{
    for (; g->key; g++) {
        json_t *v = json_object_get(options, g->key);
        if (!v && g->tiny && json_object_set_new(options, g->key, json_integer(g->tiny)))
            return 0;
        if (json_is_integer(v) && json_integer_value(v) > g->cap)
            return 0;
    }
    return 1;
}

/* The workload options made tiny, as text; NULL to skip the input.  Text
 * that is not a JSON object goes through unchanged (the library refuses it). */
static char *workload_options(const char *text)
{
    json_t *o = json_loads(text, JSON_DECODE_ANY, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return strdup(text);
    }
    const char *name = json_string_value(json_object_get(o, "workload"));
    int ok = 1;
    if (name && strcmp(name, "mlp") == 0)
        ok = tiny_geometry(o, MLP);
    else if (name && (strcmp(name, "vit") == 0 || strcmp(name, "vit-small") == 0))
        ok = tiny_geometry(o, VIT);
    char *out = ok ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return out;
}

/* Is the profile small enough to compile for and run?  (One the library
 * refuses is: compiling refuses it too.) */
static int small_profile(const json_t *profile)
{
    ipu_ctx *ctx = fuzz_context();
    ipu_profile p;
    int small = 1;
    if (ctx && ipu_profile_from_json(ctx, profile, 0, &p) == IPU_OK)
        small = p.tiles <= FUZZ_MAX_TILES && (uint64_t)p.sram_end - p.sram_base <= FUZZ_MAX_SRAM;
    ipu_ctx_free(ctx);
    return small;
}

/* The compile options for a tiny device, without file outputs; NULL to skip.
 * *injects: do they name a mutation ("inject")? */
static char *compile_options(const char *text, int *injects)
{
    json_t *o = json_loads(text, JSON_DECODE_ANY, NULL);
    *injects = json_is_string(json_object_get(o, "inject"));
    if (!json_is_object(o)) {
        json_decref(o);
        return strdup(text);
    }
    json_object_del(o, "placement_report");
    json_object_del(o, "memory_profile_directory");
    json_t *profile = json_object_get(o, "profile");
    if (!profile) {
        profile = json_object();
        json_object_set_new(o, "profile", profile);
    }
    if (json_is_object(profile) && !json_object_get(profile, "tiles"))
        json_object_set_new(profile, "tiles", json_integer(4));
    char *out = small_profile(profile) ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return out;
}

/* A correct package's every op matches the device-precision reference. */
static void check_ops(ipu_ctx *ctx, const ipu_workload *w, const ipu_package *pkg)
{
    char *result = NULL;
    ipu_status status;
    ipu_device *dev = fuzz_kept_device(ctx, pkg, 1, &status);
    if (dev)
        status = fuzz_check(ctx, ipu_check_ops_on(ctx, dev, w, pkg, OP_CRITERIA, &result), "ipu_check_ops_on");
    json_t *r = status == IPU_OK ? json_loads(result, 0, NULL) : NULL;
    if ((status != IPU_OK && status != IPU_ERR_NO_MEMORY) || (r && !json_is_true(json_object_get(r, "passed")))) {
        fprintf(stderr, "a package compiled without a mutation fails the per-op check: %s\n%s\n",
                status == IPU_OK ? "" : ipu_ctx_errmsg(ctx), result ? result : "");
        abort();
    }
    json_decref(r);
    ipu_free(result);
}

/* The key of what a step depends on: a tag naming the step and the digests
 * of its inputs. */
static uint64_t key_of(uint64_t tag, const void *a, size_t a_size, const void *b, size_t b_size)
{
    uint64_t parts[3] = {tag, ipu_digest64(a, a_size), ipu_digest64(b, b_size)};
    return ipu_digest64(parts, sizeof parts);
}

/* Were these workload and compile options (as made tiny, so in jansson's
 * compact form) compiled before?  Creating the workload and compiling are
 * deterministic, so they would build what they built then. */
static int compiled_before(const char *workload_json, const char *compile_json)
{
    return fuzz_seen_before(key_of(1, workload_json, strlen(workload_json), compile_json, strlen(compile_json)));
}

/* Was this package run before, with the same extra bytes (what else the run
 * depends on)?  Keyed by the serialized package and extra. */
static int ran_before(ipu_ctx *ctx, const ipu_package *pkg, const void *extra, size_t extra_size)
{
    void *bytes = NULL;
    size_t size = 0;
    if (ipu_package_serialize(ctx, pkg, &bytes, &size) != IPU_OK) {
        ipu_ctx_clear_error(ctx);
        return 0;
    }
    uint64_t key = key_of(2, bytes, size, extra, extra_size);
    ipu_free(bytes);
    return fuzz_seen_before(key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (!text)
        return 0;
    /* The first document ends at the first NUL (fuzz_text's own NUL when there is none). */
    char *second = text + strlen(text);
    if (second == text + size) {
        second = strchr(text, '\n');
        second = second ? second : text + size;
    }
    char *rest = second < text + size ? second + 1 : second;
    *second = 0;
    char *workload_json = workload_options(text);
    int injects = 0;
    char *compile_json = workload_json ? compile_options(rest, &injects) : NULL;
    int repeat = compile_json && compiled_before(workload_json, compile_json);
    repeated += repeat;
    ipu_ctx *ctx = compile_json && !repeat ? fuzz_context() : NULL;
    ipu_workload *w = NULL;
    ipu_package *pkg = NULL;
    char *report = NULL;
    if (ctx &&
        fuzz_check(ctx, ipu_workload_create(ctx, workload_json, &w), "ipu_workload_create") == IPU_OK &&
        fuzz_check(ctx, ipu_compile(ctx, w, compile_json, &pkg, &report), "ipu_compile") == IPU_OK &&
        fuzz_package_small(pkg)) {
        int correct = !injects;
        compiled++;
        /* The run also depends on the workload options (the reference) and on whether it is checked. */
        uint64_t depends[2] = {ipu_digest64(workload_json, strlen(workload_json)), (uint64_t)correct};
        if (!ran_before(ctx, pkg, depends, sizeof depends)) {
            ran++;
            fuzz_run_package(ctx, pkg, correct);
            if (correct)
                check_ops(ctx, w, pkg);
        }
    }
    ipu_free(report);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
    free(compile_json);
    free(workload_json);
    free(text);
    return 0;
}
