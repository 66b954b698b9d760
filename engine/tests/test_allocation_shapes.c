/* test_allocation_shapes.c: every allocation of a compiled package says its
 * shape (package format 7).  Two workloads are compiled: vit-small on 64
 * tiles (parameters, activations, operand copies, two-hop staging, scratch
 * and host staging; FP8 weights whose rows need padding) and an FP16 MLP of
 * 3 blocks on 4 tiles with 10 channels (a 3-member weight sequence, rows of
 * 20 bytes padded to 24).  Each allocation's shape string is read here, by
 * this file's own parser and element sizes, not the compiler's helper:
 *   - "[M x]R x C <type>" (a layout block): only parameters, activations,
 *     operand copies and staging; the type is the owner tensor's; R and C at
 *     most the tensor's; M the tensor's sequence length for a parameter (1,
 *     unwritten, otherwise); M x R x C x element bytes is at most the size,
 *     and the size is exactly M x R x (C x element bytes rounded up to 8,
 *     the row padding) rounded up to 8.
 *   - "<N> B" (any other buffer): scratch and host staging; N is at most the
 *     size, which is N rounded up to 8.
 * The shapes survive serializing and loading the package.  Each workload
 * must show a padded block, and the MLP a sequence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipu/ipu.h"
#include "numerics/numerics.h"
#include "package/package.h"
#include "support_seed.h"
#include "workloads/workload.h"

/* Element bytes by type name, as DEVICE.md defines the types. */
static uint64_t element_bytes(const char *type)
{
    static const struct {
        const char *name;
        uint64_t bytes;
    } types[] = {{"f32", 4}, {"f16", 2}, {"f143", 1}, {"f152", 1}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strcmp(type, types[i].name) == 0)
            return types[i].bytes;
    return 0;
}

static uint64_t round8(uint64_t n)
{
    return (n + 7) / 8 * 8;
}

/* A shape string read back: bytes (N B) or a block (M x R x C type). */
typedef struct shape {
    int block;
    uint64_t bytes;          /* bytes: N */
    uint64_t members, rows, cols;
    char type[16];
} shape;

static int parse_shape(const char *text, shape *s)
{
    memset(s, 0, sizeof *s);
    unsigned long long m, r, c;
    int end = -1;
    if (sscanf(text, "%llu B%n", &m, &end) == 1 && end > 0 && text[end] == 0) {
        s->bytes = m;
        return 1;
    }
    end = -1;
    if (sscanf(text, "%llux%llux%llu %15s%n", &m, &r, &c, s->type, &end) == 4 && end > 0 && text[end] == 0) {
        s->block = 1, s->members = m, s->rows = r, s->cols = c;
        return m > 1; /* one member is written without its count */
    }
    end = -1;
    if (sscanf(text, "%llux%llu %15s%n", &r, &c, s->type, &end) == 3 && end > 0 && text[end] == 0) {
        s->block = 1, s->members = 1, s->rows = r, s->cols = c;
        return 1;
    }
    return 0;
}

static const ipu_ir_tensor *tensor_named(const ipu_workload *w, const char *name)
{
    for (size_t i = 0; i < w->graph.tensor_count; i++)
        if (strcmp(w->graph.tensors[i].name, name) == 0)
            return &w->graph.tensors[i];
    return NULL;
}

typedef struct seen {
    size_t blocks, bytes, padded, sequences;
} seen;

static seen check_shapes(const ipu_workload *w, const ipu_package *pkg)
{
    seen n = {0};
    assert_true(pkg->alloc_count > 0);
    for (size_t i = 0; i < pkg->alloc_count; i++) {
        const ipu_pkg_alloc *a = &pkg->allocs[i];
        const char *text = ipu_pkg_string(pkg, a->shape_offset);
        const char *name = ipu_pkg_string(pkg, a->name_offset);
        shape s;
        if (!parse_shape(text, &s))
            TSEED_FAIL("allocation %zu '%s': shape '%s' is neither 'N B' nor '[M x]R x C type'", i, name, text);
        if (!s.block) {
            if (a->kind != IPU_ALLOC_SCRATCH && a->kind != IPU_ALLOC_HOST_STAGING)
                TSEED_FAIL("allocation %zu '%s' of kind %u says only its bytes ('%s')", i, name, a->kind, text);
            if (s.bytes == 0 || s.bytes > a->size || round8(s.bytes) != a->size)
                TSEED_FAIL("allocation %zu '%s': '%s' in %u bytes", i, name, text, a->size);
            n.bytes++;
            continue;
        }
        n.blocks++;
        if (a->kind == IPU_ALLOC_SCRATCH || a->kind == IPU_ALLOC_HOST_STAGING)
            TSEED_FAIL("allocation %zu '%s' of kind %u says a block shape '%s'", i, name, a->kind, text);
        uint64_t elem = element_bytes(s.type);
        if (!elem)
            TSEED_FAIL("allocation %zu '%s': unknown element type in '%s'", i, name, text);
        uint64_t payload = s.members * s.rows * s.cols * elem;
        uint64_t padded = round8(s.members * s.rows * round8(s.cols * elem));
        if (payload == 0 || payload > a->size || padded != a->size)
            TSEED_FAIL("allocation %zu '%s': '%s' is %llu payload bytes, %llu with row padding, in %u bytes", i,
                       name, text, (unsigned long long)payload, (unsigned long long)padded, a->size);
        n.padded += payload < a->size;
        n.sequences += s.members > 1;
        const ipu_ir_tensor *t = tensor_named(w, ipu_pkg_string(pkg, a->tensor_offset));
        if (!t)
            TSEED_FAIL("allocation %zu '%s' holds a block of no tensor ('%s')", i, name,
                       ipu_pkg_string(pkg, a->tensor_offset));
        if (strcmp(s.type, ipu_dtype_name(t->dtype)) != 0 || s.rows > t->rows || s.cols > t->cols)
            TSEED_FAIL("allocation %zu '%s': '%s' for tensor '%s' of %ux%u %s", i, name, text, t->name, t->rows,
                       t->cols, ipu_dtype_name(t->dtype));
        if (a->kind == IPU_ALLOC_PARAMETER && s.members != t->sequence)
            TSEED_FAIL("allocation %zu '%s': '%s' for parameter '%s', a sequence of %u", i, name, text, t->name,
                       t->sequence);
        if (a->kind != IPU_ALLOC_PARAMETER && s.members != 1)
            TSEED_FAIL("allocation %zu '%s' of kind %u: '%s' has members", i, name, a->kind, text);
    }
    return n;
}

/* The package again, serialized and loaded: the same shape strings. */
static void check_round_trip(ipu_ctx *ctx, const ipu_package *pkg)
{
    void *bytes = NULL;
    size_t size = 0;
    TSEED_OK(ctx, ipu_package_serialize(ctx, pkg, &bytes, &size));
    ipu_package *again = NULL;
    TSEED_OK(ctx, ipu_package_load(ctx, bytes, size, &again));
    ipu_free(bytes);
    assert_int_equal(again->alloc_count, pkg->alloc_count);
    for (size_t i = 0; i < pkg->alloc_count; i++)
        assert_string_equal(ipu_pkg_string(again, again->allocs[i].shape_offset),
                            ipu_pkg_string(pkg, pkg->allocs[i].shape_offset));
    ipu_package_free(again);
}

static seen compile_and_check(const char *workload, const char *options)
{
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_workload *w = NULL;
    TSEED_OK(ctx, ipu_workload_create(ctx, workload, &w));
    ipu_package *pkg = NULL;
    char *report = NULL;
    TSEED_OK(ctx, ipu_compile(ctx, w, options, &pkg, &report));
    ipu_free(report);
    seen n = check_shapes(w, pkg);
    check_round_trip(ctx, pkg);
    ipu_package_free(pkg);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
    return n;
}

static void test_vit_small_allocations_say_their_shapes(void **state)
{
    (void)state;
    seen n = compile_and_check("{\"workload\": \"vit-small\"}", "{\"profile\": {\"tiles\": 64}}");
    assert_true(n.blocks > 0 && n.bytes > 0);
    assert_true(n.padded > 0);
}

static void test_mlp_sequence_and_padded_rows(void **state)
{
    (void)state;
    seen n = compile_and_check("{\"workload\": \"mlp\", \"precision\": \"fp16\", \"blocks\": 3, \"tokens\": 6, "
                               "\"channels\": 10, \"hidden\": 12}",
                               "{\"profile\": {\"tiles\": 4}}");
    assert_true(n.blocks > 0 && n.bytes > 0);
    assert_true(n.padded > 0);
    assert_true(n.sequences > 0);
}

int main(void)
{
    tseed_init("test_allocation_shapes");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vit_small_allocations_say_their_shapes),
        cmocka_unit_test(test_mlp_sequence_and_padded_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
