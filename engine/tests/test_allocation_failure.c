/* test_allocation_failure.c: every allocation the library makes on a
 * context may fail, and each failure gives a clean IPU_ERR_NO_MEMORY.  A
 * pipeline runs once to count the context's allocations, then once for every
 * N from 1 on with allocation N failing (ipu_ctx_fail_allocation), until a
 * run no longer reaches N.  Every call must return IPU_OK or
 * IPU_ERR_NO_MEMORY with an "out of memory" message, the failure must stop
 * the pipeline (no run may succeed past an allocation it could not make),
 * and everything is freed after each run: the test counts the library's
 * live blocks itself (the link wraps malloc and free, below), and under
 * IPU_SANITIZE=ON LeakSanitizer checks too.  Three walks on 4 tiles (about
 * 450, 2,800 and 1,400 allocations): compile and run a 1-block MLP and a
 * 1-layer ViT (attention, LayerNorm, MAP pooling, a Repeat) -- workload
 * create and info, compile, serialize, load, device create, stream upload,
 * initialize, run, output read, device-precision reference, output check and
 * the per-op check -- and on the MLP the rest of the library: a budget the
 * search must shrink for, placement report and memory profiles, a budget
 * nothing fits (refused with a rejection profile), package save and load,
 * recorded inputs, two runs (kept exchange phases replayed), a debug read,
 * the FP32 reference, the exchange-stress package, profile resolution,
 * mutations and the GEMM benchmark.  And a device that ran out of memory in
 * initialize or run must work again.  jansson's, OpenBLAS's and OpenMP's own
 * allocations are not the context's and are not walked.
 * IPU_FAIL_ALLOCATION=N walks only N and IPU_TEST_FILTER=test_vit runs one
 * test (to debug one failure).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipu/ipu.h"

#define PROFILE "{\"tiles\": 4}"
#define MLP "{\"workload\": \"mlp\", \"tokens\": 8, \"channels\": 16, \"hidden\": 32, \"seed\": 3}"
#define COMPILE "{\"profile\": {\"tiles\": 4}}"
#define OUTPUT_CRITERIA "{\"min_cosine\": 0.9, \"atol\": 1, \"rtol\": 1, \"norm_tolerance\": 1}"
#define OP_CRITERIA "{\"min_cosine\": 0.9, \"atol_rms\": 1, \"rtol\": 1, \"norm_tolerance\": 1}"

/* ---- live blocks ---------------------------------------------------------
 * The link wraps malloc, calloc, realloc and free for the engine's objects
 * and this file (CMakeLists.txt), so every block the library allocates is
 * in this set until freed: a run that leaves one is a leak, found without a
 * sanitizer.  Blocks of the shared libraries (jansson, cmocka, OpenBLAS,
 * OpenMP) are not seen; freeing one passes through.  Open addressing, from
 * any thread. */
void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *pointer, size_t size);
void __real_free(void *pointer);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *pointer, size_t size);
void __wrap_free(void *pointer);

#define GONE ((void *)1) /* a removed entry */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static void **live;
static size_t live_capacity, live_count, live_used; /* used: live and removed entries */

static size_t live_slot(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull); }

static void live_insert(void *p);

static void live_rehash(void)
{
    void **old = live;
    size_t old_capacity = live_capacity;
    live_capacity = 1024; /* a power of two, at least 4 times the live blocks */
    while (live_capacity < live_count * 4)
        live_capacity *= 2;
    live = __real_calloc(live_capacity, sizeof *live);
    if (!live)
        abort(); /* the test's own bookkeeping */
    live_count = live_used = 0;
    for (size_t i = 0; i < old_capacity; i++)
        if (old[i] && old[i] != GONE)
            live_insert(old[i]);
    __real_free(old);
}

static void live_insert(void *p)
{
    if ((live_used + 1) * 2 > live_capacity)
        live_rehash();
    size_t i = live_slot(p) & (live_capacity - 1);
    while (live[i] && live[i] != GONE)
        i = (i + 1) & (live_capacity - 1);
    live_used += !live[i];
    live[i] = p;
    live_count++;
}

static void live_remove(void *p)
{
    if (!live_capacity)
        return;
    size_t i = live_slot(p) & (live_capacity - 1);
    while (live[i] && live[i] != p)
        i = (i + 1) & (live_capacity - 1);
    if (live[i]) {
        live[i] = GONE;
        live_count--;
    }
}

static void *live_add(void *p)
{
    if (p) {
        pthread_mutex_lock(&live_lock);
        live_insert(p);
        pthread_mutex_unlock(&live_lock);
    }
    return p;
}

void *__wrap_malloc(size_t size) { return live_add(__real_malloc(size)); }
void *__wrap_calloc(size_t count, size_t size) { return live_add(__real_calloc(count, size)); }

void *__wrap_realloc(void *pointer, size_t size)
{
    void *grown = __real_realloc(pointer, size);
    if (grown || !size) {
        pthread_mutex_lock(&live_lock);
        if (pointer)
            live_remove(pointer);
        if (grown)
            live_insert(grown);
        pthread_mutex_unlock(&live_lock);
    }
    return grown;
}

void __wrap_free(void *pointer)
{
    if (pointer) {
        pthread_mutex_lock(&live_lock);
        live_remove(pointer);
        pthread_mutex_unlock(&live_lock);
    }
    __real_free(pointer);
}

static size_t live_blocks(void)
{
    pthread_mutex_lock(&live_lock);
    size_t n = live_count;
    pthread_mutex_unlock(&live_lock);
    return n;
}

/* What a run of the pipeline did. */
typedef struct outcome {
    ipu_status status;  /* IPU_OK, or the first failing call's status */
    const char *failed; /* that call */
    char errmsg[1024];
    int noted; /* a refusal's message said memory ran out (REFUSED) */
} outcome;

/* Everything a run holds, freed whatever happened. */
typedef struct held {
    ipu_workload *w;
    ipu_package *pkg, *loaded;
    ipu_device *dev;
    void *bytes;
    json_t *info;
} held;

#define STEP(o, call)                                                                     \
    do {                                                                                  \
        ipu_status step_status_ = (call);                                                 \
        if (step_status_ != IPU_OK) {                                                     \
            (o)->status = step_status_;                                                   \
            (o)->failed = #call;                                                          \
            snprintf((o)->errmsg, sizeof (o)->errmsg, "%s", ipu_ctx_errmsg(ctx));         \
            return;                                                                       \
        }                                                                                 \
    } while (0)

/* A compile that must be refused with IPU_ERR_NO_PLAN: memory running
 * out on its way may only add "out of memory" to its message. */
#define REFUSED(o, call)                                                  \
    do {                                                                  \
        ipu_status refused_ = (call);                                     \
        if (refused_ == IPU_ERR_NO_PLAN) {                                \
            if (strstr(ipu_ctx_errmsg(ctx), "out of memory"))             \
                (o)->noted = 1;                                           \
            ipu_ctx_clear_error(ctx);                                     \
        } else {                                                          \
            STEP(o, refused_ == IPU_OK ? IPU_ERR_INTERNAL : refused_);    \
        }                                                                 \
    } while (0)

/* A JSON result: parsed to check it is whole, then released. */
static ipu_status take_json(ipu_status status, char **result)
{
    char *text = *result;
    *result = NULL;
    if (status == IPU_OK || (status == IPU_ERR_NO_PLAN && text)) {
        json_t *parsed = json_loads(text, 0, NULL);
        if (!parsed)
            fail_msg("a call returned %s with a result that is not JSON: %.200s", ipu_status_name(status),
                     text ? text : "(null)");
        json_decref(parsed);
    }
    ipu_free(text);
    return status;
}

static void compile_and_run(ipu_ctx *ctx, const char *workload, const char *folder, held *h, outcome *o)
{
    (void)folder;
    char *text = NULL;
    STEP(o, ipu_workload_create(ctx, workload, &h->w));
    STEP(o, ipu_workload_info_json(ctx, h->w, &text));
    h->info = json_loads(text, 0, NULL);
    ipu_free(text);
    text = NULL; /* a call that fails leaves its result alone */
    assert_non_null(h->info);
    STEP(o, take_json(ipu_compile(ctx, h->w, COMPILE, &h->pkg, &text), &text));
    size_t size = 0;
    STEP(o, ipu_package_serialize(ctx, h->pkg, &h->bytes, &size));
    STEP(o, ipu_package_load(ctx, h->bytes, size, &h->loaded));
    STEP(o, take_json(ipu_package_info_json(ctx, h->loaded, &text), &text));
    STEP(o, ipu_device_create(ctx, PROFILE, &h->dev));
    json_t *tensors = json_object_get(h->info, "tensors"), *t;
    size_t i;
    json_array_foreach(tensors, i, t) {
        const char *role = json_string_value(json_object_get(t, "role"));
        const char *name = json_string_value(json_object_get(t, "name"));
        if (strcmp(role, "input") && strcmp(role, "parameter"))
            continue;
        void *values = NULL;
        size_t value_size = 0;
        ipu_status status = ipu_workload_device_bytes(ctx, h->w, name, &values, &value_size);
        if (status == IPU_OK)
            status = ipu_device_set_stream(ctx, h->dev, name, values, value_size);
        ipu_free(values);
        STEP(o, status);
    }
    STEP(o, ipu_device_initialize(ctx, h->dev, h->loaded));
    STEP(o, take_json(ipu_device_run(ctx, h->dev, &text), &text));
    STEP(o, take_json(ipu_reference_run(ctx, h->w, "{\"fp32\": false}", &text), &text));
    json_array_foreach(tensors, i, t) {
        if (strcmp(json_string_value(json_object_get(t, "role")), "output"))
            continue;
        const char *name = json_string_value(json_object_get(t, "name"));
        const void *device = NULL;
        const float *reference = NULL;
        size_t device_size = 0, count = 0;
        STEP(o, ipu_device_stream(ctx, h->dev, name, &device, &device_size));
        STEP(o, ipu_reference_output(ctx, h->w, name, &reference, &count));
            STEP(o, take_json(ipu_check_outputs(ctx, reference, device,
                                            json_string_value(json_object_get(t, "dtype")),
                                            (size_t)json_integer_value(json_object_get(t, "rows")),
                                            (size_t)json_integer_value(json_object_get(t, "cols")),
                                            OUTPUT_CRITERIA, &text),
                          &text));
    }
    STEP(o, take_json(ipu_check_ops(ctx, h->w, h->loaded, OP_CRITERIA, &text), &text));
}

/* The rest of the library on the MLP: a budget the first plan overshoots
 * (the search shrinks a matmul), the placement report and memory profiles,
 * a package file saved and loaded, inputs from the package's records, two
 * runs (the second replays kept exchange phases), a debug read, the FP32
 * reference; the exchange-stress package; profiles, mutations and the GEMM
 * benchmark. */
static void files_reports_stress(ipu_ctx *ctx, const char *workload, const char *folder, held *h, outcome *o)
{
    char options[1024], path[600], *text = NULL;
    STEP(o, ipu_workload_create(ctx, workload, &h->w));
    snprintf(options, sizeof options,
             "{\"profile\": {\"tiles\": 4}, \"memory_budget\": 1280, \"placement_report\": "
             "\"%s/placement.json\", \"memory_profile_directory\": \"%s\"}",
             folder, folder);
    STEP(o, take_json(ipu_compile(ctx, h->w, options, &h->pkg, &text), &text));
    /* A budget nothing fits: refused, with the rejected candidate's profile. */
    snprintf(options, sizeof options,
             "{\"profile\": {\"tiles\": 4}, \"memory_budget\": 256, \"memory_profile_directory\": \"%s\"}",
             folder);
    ipu_package *none = NULL;
    REFUSED(o, take_json(ipu_compile(ctx, h->w, options, &none, &text), &text));
    assert_null(none);
    snprintf(path, sizeof path, "%s/saved.pkg", folder);
    STEP(o, ipu_package_save_file(ctx, h->pkg, path));
    STEP(o, ipu_package_load_file(ctx, path, &h->loaded));
    STEP(o, ipu_package_info_json(ctx, h->loaded, &text));
    h->info = json_loads(text, 0, NULL);
    ipu_free(text);
    text = NULL;
    assert_non_null(h->info);
    STEP(o, ipu_device_create(ctx, PROFILE, &h->dev));
    STEP(o, ipu_device_configure(ctx, h->dev, "{\"allocation_checks\": true}"));
    json_t *s;
    size_t i;
    json_array_foreach(json_object_get(h->info, "streams"), i, s) {
        const char *name = json_string_value(json_object_get(s, "name"));
        if (!json_is_true(json_object_get(json_object_get(s, "records"), "input")))
            continue;
        const void *data = NULL;
        size_t size = 0;
        STEP(o, ipu_package_record(ctx, h->loaded, "input", name, &data, &size));
        STEP(o, ipu_device_set_stream(ctx, h->dev, name, data, size));
    }
    STEP(o, ipu_device_initialize(ctx, h->dev, h->loaded));
    for (int run = 0; run < 2; run++) {
        json_array_foreach(json_object_get(h->info, "streams"), i, s) {
            const char *name = json_string_value(json_object_get(s, "name"));
            const void *data = NULL;
            size_t size = 0;
            if (!strcmp(json_string_value(json_object_get(s, "direction")), "input")) {
                STEP(o, ipu_package_record(ctx, h->loaded, "input", name, &data, &size));
                STEP(o, ipu_device_set_stream(ctx, h->dev, name, data, size));
            }
        }
        STEP(o, take_json(ipu_device_run(ctx, h->dev, &text), &text));
    }
    uint8_t word[4];
    STEP(o, ipu_device_read(ctx, h->dev, 0, (uint32_t)json_integer_value(json_object_get(
                                               json_object_get(h->info, "profile"), "sram_base")),
                            word, sizeof word));
    STEP(o, take_json(ipu_reference_run(ctx, h->w, "{\"fp32\": true}", &text), &text));
    ipu_package_free(h->pkg);
    h->pkg = NULL;
    STEP(o, ipu_stress_build(ctx,
                             "{\"profile\": {\"tiles\": 4}, \"pattern\": \"all\", \"sources\": "
                             "\"both\", \"iterations\": 2, \"words\": 4}",
                             &h->pkg));
    ipu_device_free(h->dev);
    h->dev = NULL;
    STEP(o, ipu_device_create(ctx, PROFILE, &h->dev));
    STEP(o, ipu_device_initialize(ctx, h->dev, h->pkg));
    STEP(o, take_json(ipu_device_run(ctx, h->dev, &text), &text));
    STEP(o, take_json(ipu_profile_resolve(ctx, PROFILE, 16, &text), &text));
    STEP(o, take_json(ipu_mutations_json(ctx, &text), &text));
    STEP(o, take_json(ipu_bench_gemm(ctx,
                                     "{\"profile\": {\"tiles\": 4}, \"m\": 8, \"n\": 8, \"k\": 8, "
                                     "\"precision\": \"fp16\", \"repeats\": 1}",
                                     &text),
                      &text));
}

typedef void (*pipeline_fn)(ipu_ctx *ctx, const char *workload, const char *folder, held *h, outcome *o);

/* Empty the folder a run wrote its files in. */
static void clear_folder(const char *folder)
{
    DIR *dir = opendir(folder);
    assert_non_null(dir);
    struct dirent *e;
    char path[1024];
    while ((e = readdir(dir)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
            assert_int_equal(unlink(path), 0);
        }
    closedir(dir);
}

/* Run the pipeline on a fresh context whose allocation nth fails (0: none);
 * returns the allocations it made. */
static uint64_t run(pipeline_fn pipeline, const char *workload, const char *folder, uint64_t nth,
                    outcome *o)
{
    size_t blocks = live_blocks();
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_ctx_set_threads(ctx, 2);
    ipu_ctx_fail_allocation(ctx, nth);
    held h = {0};
    memset(o, 0, sizeof *o);
    pipeline(ctx, workload, folder, &h, o);
    uint64_t made = ipu_ctx_allocations(ctx);
    clear_folder(folder);
    json_decref(h.info);
    ipu_free(h.bytes);
    ipu_device_free(h.dev);
    ipu_package_free(h.loaded);
    ipu_package_free(h.pkg);
    ipu_workload_free(h.w);
    ipu_ctx_free(ctx);
    if (live_blocks() != blocks)
        fail_msg("%s: with allocation %llu failing (0: none), %zu blocks the library allocated were not freed",
                 workload, (unsigned long long)nth, live_blocks() - blocks);
    return made;
}

static void walk(pipeline_fn pipeline, const char *workload)
{
    /* The run's files go in a folder of this process in ctest's working
     * folder (the build folder). */
    char folder[64];
    snprintf(folder, sizeof folder, "allocation-failure-%ld", (long)getpid());
    assert_int_equal(mkdir(folder, 0700), 0);
    outcome o;
    uint64_t total = run(pipeline, workload, folder, 0, &o);
    if (o.status != IPU_OK)
        fail_msg("%s: without a failure, %s returned %s: %s", workload, o.failed,
                 ipu_status_name(o.status), o.errmsg);
    assert_true(total > 0);
    /* The walk ends at the first N a run does not reach.  Counts vary by a
     * few from run to run: a device thread grows its kernel scratch for the
     * tiles it happens to take. */
    const char *only = getenv("IPU_FAIL_ALLOCATION");
    uint64_t n = only ? strtoull(only, NULL, 10) : 1, last = only ? n : UINT64_MAX;
    for (; n <= last; n++) {
        uint64_t made = run(pipeline, workload, folder, n, &o);
        if (made < n) {
            if (o.status != IPU_OK)
                fail_msg("%s: allocation %llu was never made, yet %s returned %s: %s", workload,
                         (unsigned long long)n, o.failed, ipu_status_name(o.status), o.errmsg);
            break;
        }
        if (o.status == IPU_OK && !o.noted)
            fail_msg("%s: allocation %llu of %llu failed, yet every call returned IPU_OK", workload,
                     (unsigned long long)n, (unsigned long long)total);
        if (o.status != IPU_OK && (o.status != IPU_ERR_NO_MEMORY || !strstr(o.errmsg, "out of memory")))
            fail_msg("%s: allocation %llu of %llu failed: %s returned %s: %s", workload,
                     (unsigned long long)n, (unsigned long long)total, o.failed,
                     ipu_status_name(o.status), o.errmsg);
    }
    if (!only && n + 64 < total)
        fail_msg("%s: the walk ended at allocation %llu of about %llu", workload, (unsigned long long)n,
                 (unsigned long long)total);
    assert_int_equal(rmdir(folder), 0);
    printf("%s: allocations 1 to %llu failed in turn, each a clean IPU_ERR_NO_MEMORY\n", workload,
           (unsigned long long)n - 1);
}

static void test_mlp(void **state)
{
    (void)state;
    walk(compile_and_run, MLP);
}

static void test_vit(void **state)
{
    (void)state;
    walk(compile_and_run, "{\"workload\": \"vit-small\", \"layers\": 1, \"tokens\": 5, \"hidden\": 8, "
                          "\"heads\": 2, \"head_dim\": 4, \"seed\": 3}");
}

static void test_files_reports_stress(void **state)
{
    (void)state;
    walk(files_reports_stress, MLP);
}

/* A device that ran out of memory in initialize or run works again: for each
 * allocation of initialize and two runs of the exchange-stress package on one
 * device, that allocation fails, then initialize and run once more without
 * failures must give the package's expected output. */
static void test_device_after_failure(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_package *pkg = NULL;
    assert_int_equal(ipu_stress_build(ctx,
                                      "{\"profile\": {\"tiles\": 4}, \"pattern\": \"all\", \"sources\": "
                                      "\"both\", \"iterations\": 2, \"words\": 4}",
                                      &pkg),
                     IPU_OK);
    char *text = NULL;
    assert_int_equal(ipu_package_info_json(ctx, pkg, &text), IPU_OK);
    json_t *info = json_loads(text, 0, NULL);
    ipu_free(text);
    const char *stream = NULL;
    json_t *s;
    size_t i;
    json_array_foreach(json_object_get(info, "streams"), i, s)
        if (json_is_true(json_object_get(json_object_get(s, "records"), "expected")))
            stream = json_string_value(json_object_get(s, "name"));
    assert_non_null(stream);
    const void *expected = NULL, *got = NULL;
    size_t expected_size = 0, got_size = 0;
    assert_int_equal(ipu_package_record(ctx, pkg, "expected", stream, &expected, &expected_size), IPU_OK);
    uint64_t made = 0; /* by initialize and two runs, counted without a failure (n = 0) */
    for (uint64_t n = 0; n == 0 || n <= made; n++) {
        ipu_device *dev = NULL;
        assert_int_equal(ipu_device_create(ctx, PROFILE, &dev), IPU_OK);
        uint64_t before = ipu_ctx_allocations(ctx);
        ipu_ctx_fail_allocation(ctx, n ? before + n : 0);
        ipu_status status = ipu_device_initialize(ctx, dev, pkg);
        for (int run = 0; run < 2 && status == IPU_OK; run++) {
            text = NULL;
            status = ipu_device_run(ctx, dev, &text);
            ipu_free(text);
        }
        if (n == 0)
            made = ipu_ctx_allocations(ctx) - before;
        if (n == 0 || ipu_ctx_allocations(ctx) < before + n) {
            assert_int_equal(status, IPU_OK);
        } else {
            if (status != IPU_ERR_NO_MEMORY)
                fail_msg("allocation %llu of the device's %llu: %s: %s", (unsigned long long)n,
                         (unsigned long long)made, ipu_status_name(status), ipu_ctx_errmsg(ctx));
            ipu_ctx_fail_allocation(ctx, 0);
            ipu_ctx_clear_error(ctx);
            assert_int_equal(ipu_device_initialize(ctx, dev, pkg), IPU_OK);
            text = NULL;
            assert_int_equal(ipu_device_run(ctx, dev, &text), IPU_OK);
            ipu_free(text);
        }
        assert_int_equal(ipu_device_stream(ctx, dev, stream, &got, &got_size), IPU_OK);
        assert_int_equal(got_size, expected_size);
        if (memcmp(got, expected, got_size))
            fail_msg("allocation %llu failed, then the device's output differs from the expected bytes",
                     (unsigned long long)n);
        ipu_device_free(dev);
        ipu_ctx_fail_allocation(ctx, 0);
    }
    assert_true(made > 1);
    json_decref(info);
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
}

/* The hooks themselves: the count grows, 0 fails nothing, and only the nth fails. */
static void test_hooks(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_int_equal(ipu_ctx_allocations(ctx), 0);
    char *json = NULL;
    assert_int_equal(ipu_profile_resolve(ctx, PROFILE, 0, &json), IPU_OK);
    ipu_free(json);
    ipu_device *dev = NULL;
    size_t blocks = live_blocks(); /* the live-block count sees the device's */
    assert_int_equal(ipu_device_create(ctx, PROFILE, &dev), IPU_OK);
    assert_true(live_blocks() > blocks);
    ipu_device_free(dev);
    assert_int_equal(live_blocks(), blocks);
    uint64_t made = ipu_ctx_allocations(ctx);
    assert_true(made > 0);
    ipu_ctx_fail_allocation(ctx, made + 1);
    dev = NULL;
    assert_int_equal(ipu_device_create(ctx, PROFILE, &dev), IPU_ERR_NO_MEMORY);
    assert_null(dev);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "out of memory"));
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_device_create(ctx, PROFILE, &dev), IPU_OK);
    ipu_device_free(dev);
    ipu_ctx_free(ctx);
    assert_int_equal(ipu_ctx_allocations(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hooks),
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_vit),
        cmocka_unit_test(test_files_reports_stress),
        cmocka_unit_test(test_device_after_failure),
    };
    if (getenv("IPU_TEST_FILTER")) /* one test, e.g. test_vit */
        cmocka_set_test_filter(getenv("IPU_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
