/* test_profile_errors.c: device profiles and contexts.  Profiles that are
 * not JSON objects, have unknown or ill-typed fields, or break a consistency
 * rule (one condition at a time) are refused with IPU_ERR_MALFORMED naming
 * the field; valid edge profiles resolve to the values written here, the
 * DEVICE.md c600 figures filling the rest, and the default planner budget is
 * DEVICE.md's 586,960 B (0 once the reserves use the accessible SRAM up); at
 * the slowest host link allowed, a host exchange takes 2^20 cycles a byte
 * and a count past 2^64 saturates.
 * jansson running out of memory while a profile is made canonical is
 * IPU_ERR_NO_MEMORY.  Contexts: status names, thread clamping, the first
 * error winning with its short source location, log and progress callbacks,
 * cancel seen through a worker's child and through progress, and the
 * compiler-inconsistency wrapper keeping out-of-memory and cancel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/core.h"
#include "core/profile.h"
#include "support_seed.h"

/* ---- profiles ------------------------------------------------------------ */

typedef struct expected_field {
    const char *name;
    double value;
} expected_field;

/* The c600 figures (DEVICE.md). */
static const expected_field C600[] = {
    {"tiles", 1472},          {"clock_hz", 1.5e9},        {"sram_base", 0x4C000},
    {"sram_end", 0xE8000},    {"inaccessible_tail", 1104}, {"element_bytes", 16384},
    {"region1_base", 0x80000}, {"runtime_state_bytes", 1760}, {"aperture_base", 0x50000},
    {"aperture_end", 0x58000}, {"support_reserve", 49152},  {"sync_cycles", 150},
    {"exchange_latency", 16}, {"exchange_overhead", 100},  {"host_bytes_per_second", 64e9},
    {"amp_macs_fp8", 128},    {"amp_macs_fp16_fp16", 64},  {"amp_macs_fp16_fp32", 32},
    {"amp_macs_fp32", 16},    {"amp_call_overhead", 50},   {"vector_bytes_per_cycle", 8},
    {"copy_bytes_per_cycle", 8}, {"workers", 6},
};
#define C600_COUNT (sizeof C600 / sizeof C600[0])

/* Resolve must refuse text with `status` and a message containing words. */
static void expect_refused(ipu_ctx *ctx, const char *text, uint32_t tiles, ipu_status status,
                           const char *words)
{
    char *out = NULL;
    ipu_ctx_clear_error(ctx);
    ipu_status got = ipu_profile_resolve(ctx, text, tiles, &out);
    if (got != status || !strstr(ipu_ctx_errmsg(ctx), words))
        TSEED_FAIL("profile %s: expected %s naming \"%s\", got %s: \"%s\"", text, ipu_status_name(status),
                   words, ipu_status_name(got), ipu_ctx_errmsg(ctx));
    assert_null(out);
}

/* Resolve text; every field must equal `fields` where listed, else the c600
 * figure, and the name must be `name`. */
static void expect_resolved(ipu_ctx *ctx, const char *text, uint32_t tiles, const char *name,
                            const expected_field *fields, size_t count)
{
    char *out = NULL;
    ipu_ctx_clear_error(ctx);
    TSEED_OK(ctx, ipu_profile_resolve(ctx, text, tiles, &out));
    json_t *o = json_loads(out, 0, NULL);
    ipu_free(out);
    assert_true(json_is_object(o));
    assert_int_equal(json_object_size(o), C600_COUNT + 1);
    assert_string_equal(json_string_value(json_object_get(o, "name")), name);
    for (size_t i = 0; i < C600_COUNT; i++) {
        double want = C600[i].value;
        for (size_t k = 0; k < count; k++)
            if (strcmp(fields[k].name, C600[i].name) == 0)
                want = fields[k].value;
        json_t *v = json_object_get(o, C600[i].name);
        if (!json_is_number(v) || json_number_value(v) != want)
            TSEED_FAIL("profile %s: field %s is %g, expected %g", text, C600[i].name,
                       json_number_value(v), want);
    }
    json_decref(o);
}

static void test_profile_documents_of_the_wrong_shape(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    char *out = NULL;
    assert_int_equal(ipu_profile_resolve(ctx, NULL, 0, &out), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "ipu_profile_resolve: NULL argument"));
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_profile_resolve(ctx, "{}", 0, NULL), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "ipu_profile_resolve: NULL argument"));
    ipu_ctx_clear_error(ctx);
    ipu_profile p;
    assert_int_equal(ipu_profile_from_json(ctx, NULL, 0, &p), IPU_ERR_MALFORMED);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "device profile: expected a JSON object"));
    const struct {
        const char *text, *words;
    } bad[] = {
        {"{\n  \"tiles\": 4,\n  oops\n}", "device profile: invalid JSON at line 3"},
        {"{\"tiles\": 4, \"tiles\": 8}", "device profile: invalid JSON at line 1: duplicate object key"},
        {"[{\"tiles\": 4}]", "device profile: expected a JSON object"},
        {"{\"tiles\": 4, \"colour\": \"red\"}", "device profile: unknown field 'colour'"},
        {"{\"name\": 600}", "profile field 'name': expected a string under 64 bytes"},
        {"{\"name\": \"0123456789012345678901234567890123456789012345678901234567890123\"}",
         "profile field 'name': expected a string under 64 bytes"},
        {"{\"clock_hz\": \"1.5 GHz\"}", "profile field 'clock_hz': expected a number"},
        {"{\"sync_cycles\": 1.5}", "profile field 'sync_cycles': expected an integer in 0..4294967295"},
        {"{\"workers\": true}", "profile field 'workers': expected an integer in 0..4294967295"},
        {"{\"sram_base\": -16}", "profile field 'sram_base': expected an integer in 0..4294967295"},
        {"{\"sram_end\": 4294967296}", "profile field 'sram_end': expected an integer in 0..4294967295"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_refused(ctx, bad[i].text, 0, IPU_ERR_MALFORMED, bad[i].words);
    ipu_ctx_free(ctx);
}

static void test_profile_values_out_of_range(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    const char *sram = "'sram_base'/'sram_end'", *aperture = "'aperture_base'/'aperture_end'",
               *macs = "'amp_macs_*': expected > 0", *rates = "'copy_bytes_per_cycle', 'workers': expected > 0";
#define TAIL "'inaccessible_tail': expected a multiple of 16 below the SRAM size, got "
#define REGION1 "'region1_base': expected an address inside SRAM on an element-pair boundary, got "
#define STATE "'runtime_state_bytes': expected a multiple of 8 ending at or below the aperture, got "
    /* Each breaks one condition of one rule, the c600 defaults holding the rest. */
    const struct {
        const char *text, *words;
    } bad[] = {
        {"{\"tiles\": 0}", "profile field 'tiles': expected 1..65535, got 0"},
        {"{\"tiles\": 65536}", "profile field 'tiles': expected 1..65535, got 65536"},
        {"{\"clock_hz\": 0}", "profile field 'clock_hz': expected > 0 and at most 1e12, got 0"},
        {"{\"clock_hz\": -1.5e9}", "profile field 'clock_hz': expected > 0 and at most 1e12, got -1.5e+09"},
        /* A clock of 1.5e42 Hz made a host transfer's cycles overflow their conversion to an integer
         * (undefined; found by the package fuzz target). */
        {"{\"clock_hz\": 1.5e42}", "profile field 'clock_hz': expected > 0 and at most 1e12, got 1.5e+42"},
        {"{\"element_bytes\": 32}", "'element_bytes': expected a power of two in 64..2^30, got 32"},
        {"{\"element_bytes\": 24576}", "'element_bytes': expected a power of two in 64..2^30, got 24576"},
        /* Twice 2^31 wraps to 0 in 32 bits (a division by zero once). */
        {"{\"element_bytes\": 2147483648, \"sram_base\": 0, \"sram_end\": 2147483648}",
         "'element_bytes': expected a power of two in 64..2^30, got 2147483648"},
        /* sram_base + runtime_state_bytes wraps past 2^32 (accepted once). */
        {"{\"runtime_state_bytes\": 4294967288}", STATE "4294967288"},
        {"{\"sram_base\": 311312}", sram},                       /* 0x4C010: not on an element */
        {"{\"sram_end\": 950288}", sram},                        /* 0xE8010 */
        {"{\"sram_base\": 950272}", sram},                       /* base == end */
        {"{\"inaccessible_tail\": 638976}", TAIL "638976"},
        {"{\"inaccessible_tail\": 1100}", TAIL "1100"},
        {"{\"region1_base\": 294912}", REGION1 "0x48000"},
        {"{\"region1_base\": 983040}", REGION1 "0xF0000"},
        {"{\"region1_base\": 540672}", REGION1 "0x84000"},
        {"{\"runtime_state_bytes\": 1761}", STATE "1761"},
        {"{\"runtime_state_bytes\": 16392}", STATE "16392"},
        {"{\"aperture_base\": 360448}", aperture},               /* base == end */
        {"{\"aperture_end\": 557056}", aperture},                /* 0x88000: past region1_base */
        {"{\"aperture_base\": 327688}", aperture},               /* 0x50008 */
        {"{\"aperture_end\": 360440}", aperture},                /* 0x57FF8 */
        {"{\"exchange_latency\": 0}", "profile field 'exchange_latency': expected >= 1"},
        {"{\"host_bytes_per_second\": 0}", "'host_bytes_per_second': expected at least clock_hz / 2^20 (1430.51), got 0"},
        /* 1.5e9 / 2^20 = 1430.51 bytes a second, a byte per 2^20 cycles of the 1.5 GHz clock. */
        {"{\"host_bytes_per_second\": 1430}", "'host_bytes_per_second': expected at least clock_hz / 2^20 (1430.51), got 1430"},
        {"{\"amp_macs_fp8\": 0}", macs},
        {"{\"amp_macs_fp16_fp16\": 0}", macs},
        {"{\"amp_macs_fp16_fp32\": 0}", macs},
        {"{\"amp_macs_fp32\": 0}", macs},
        {"{\"vector_bytes_per_cycle\": 0}", rates},
        {"{\"copy_bytes_per_cycle\": 0}", rates},
        {"{\"workers\": 0}", rates},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_refused(ctx, bad[i].text, 0, IPU_ERR_MALFORMED, bad[i].words);
    /* The override is checked as a field would be. */
    expect_refused(ctx, "{\"tiles\": 16}", 70000, IPU_ERR_MALFORMED, "'tiles': expected 1..65535, got 70000");
    ipu_ctx_free(ctx);
}

static void test_profile_edges_resolve(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    expect_resolved(ctx, "{}", 0, "c600", NULL, 0);
    const expected_field largest[] = {{"tiles", 65535}};
    expect_resolved(ctx, "{\"name\": \"big\", \"tiles\": 65535}", 0, "big", largest, 1);
    const expected_field one[] = {{"tiles", 1}};
    expect_resolved(ctx, "{\"tiles\": 16}", 1, "c600", one, 1);
    /* An integer where a real is expected is taken as that number. */
    const expected_field clock[] = {{"clock_hz", 1000}, {"host_bytes_per_second", 1}};
    expect_resolved(ctx, "{\"clock_hz\": 1000, \"host_bytes_per_second\": 1}", 0, "c600", clock, 2);
    /* The smallest element, with every region boundary where the rules
     * still allow it: region 1 starting at the SRAM end, the runtime state
     * ending at the aperture, the tail one element short of the SRAM. */
    const char *tight = "{\"name\": \"tight\", \"element_bytes\": 64, \"sram_base\": 0, \"sram_end\": 1024,"
                        " \"inaccessible_tail\": 1008, \"region1_base\": 1024, \"runtime_state_bytes\": 16,"
                        " \"aperture_base\": 16, \"aperture_end\": 1024, \"exchange_latency\": 1,"
                        " \"support_reserve\": 0, \"sync_cycles\": 0, \"exchange_overhead\": 0,"
                        " \"amp_call_overhead\": 0, \"amp_macs_fp8\": 1, \"workers\": 4294967295}";
    const expected_field tight_fields[] = {
        {"element_bytes", 64},      {"sram_base", 0},       {"sram_end", 1024},   {"inaccessible_tail", 1008},
        {"region1_base", 1024},     {"runtime_state_bytes", 16}, {"aperture_base", 16}, {"aperture_end", 1024},
        {"exchange_latency", 1},    {"support_reserve", 0}, {"sync_cycles", 0},   {"exchange_overhead", 0},
        {"amp_call_overhead", 0},   {"amp_macs_fp8", 1},    {"workers", 4294967295.0},
    };
    expect_resolved(ctx, tight, 0, "tight", tight_fields, sizeof tight_fields / sizeof tight_fields[0]);
    /* A name of 63 bytes is the longest kept. */
    char name[64], text[128];
    memset(name, 'n', 63);
    name[63] = '\0';
    snprintf(text, sizeof text, "{\"name\": \"%s\"}", name);
    expect_resolved(ctx, text, 0, name, NULL, 0);
    ipu_ctx_free(ctx);
}

static void test_profile_default_budget(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_profile p;
    TSEED_OK(ctx, ipu_profile_parse(ctx, "{}", 0, &p));
    /* DEVICE.md: 637,872 accessible - 1,760 runtime state - 49,152 reserve. */
    assert_int_equal(ipu_profile_default_budget(&p), 586960);
    /* A reserve leaving one byte, then none, then less than none. */
    TSEED_OK(ctx, ipu_profile_parse(ctx, "{\"support_reserve\": 636111}", 0, &p));
    assert_int_equal(ipu_profile_default_budget(&p), 1);
    TSEED_OK(ctx, ipu_profile_parse(ctx, "{\"support_reserve\": 636112}", 0, &p));
    assert_int_equal(ipu_profile_default_budget(&p), 0);
    TSEED_OK(ctx, ipu_profile_parse(ctx, "{\"support_reserve\": 700000}", 0, &p));
    assert_int_equal(ipu_profile_default_budget(&p), 0);
    ipu_ctx_free(ctx);
}

static void test_profile_host_link_at_its_slowest(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    /* The fastest clock with the slowest host link the rules allow: a byte
     * per 2^20 cycles (1e12 / 2^20 = 953,674.31640625 bytes a second). */
    const char *slowest = "{\"clock_hz\": 1e12, \"host_bytes_per_second\": 953674.31640625}";
    const expected_field fields[] = {{"clock_hz", 1e12}, {"host_bytes_per_second", 953674.31640625}};
    expect_resolved(ctx, slowest, 0, "c600", fields, 2);
    ipu_profile p;
    TSEED_OK(ctx, ipu_profile_parse(ctx, slowest, 0, &p));
    assert_true(ipu_profile_host_cycles(&p, 1) == 1u << 20);
    assert_true(ipu_profile_host_cycles(&p, 3) == 3u << 20);
    /* 2^44 bytes take 2^64 cycles, one past the largest count: it saturates. */
    assert_true(ipu_profile_host_cycles(&p, (uint64_t)1 << 43) == (uint64_t)1 << 63);
    assert_true(ipu_profile_host_cycles(&p, (uint64_t)1 << 44) == UINT64_MAX);
    assert_true(ipu_profile_host_cycles(&p, UINT64_MAX) == UINT64_MAX);
    ipu_ctx_free(ctx);
}

/* ---- contexts ------------------------------------------------------------ */

static void test_status_names_and_threads(void **state)
{
    (void)state;
    static const char *names[] = {"ok", "invalid_argument", "no_memory", "io", "malformed",
                                  "device_fault", "state", "internal", "cancelled", "no_plan"};
    for (int s = 0; s < 10; s++)
        assert_string_equal(ipu_status_name((ipu_status)s), names[s]);
    assert_string_equal(ipu_status_name((ipu_status)10), "unknown");
    assert_string_equal(ipu_status_name((ipu_status)-1), "unknown");
    assert_string_equal(ipu_ctx_errmsg(NULL), "");
    assert_int_equal(ipu_abi_version(), 10);
    ipu_ctx *ctx = ipu_ctx_create();
    const int asked[] = {-3, IPU_MAX_THREADS + 1, 7}, kept[] = {0, IPU_MAX_THREADS, 7};
    for (int i = 0; i < 3; i++) {
        ipu_ctx_set_threads(ctx, asked[i]);
        assert_int_equal(ctx->threads, kept[i]);
    }
    ipu_ctx_free(ctx);
}

static void test_first_error_wins_with_its_location(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_string_equal(ipu_ctx_errmsg(ctx), "");
    assert_int_equal(ipu_fail_at(NULL, IPU_ERR_IO, "a/b.c", 1, "no context"), IPU_ERR_IO);
    assert_int_equal(ipu_fail_at(ctx, IPU_ERR_IO, "engine/src/core/x.c", 12, "first %d", 1), IPU_ERR_IO);
    assert_int_equal(ipu_fail_at(ctx, IPU_ERR_STATE, "y.c", 3, "second"), IPU_ERR_STATE);
    assert_string_equal(ipu_ctx_errmsg(ctx), "first 1 [core/x.c:12]");
    assert_int_equal(ctx->status, IPU_ERR_IO);
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_fail_at(ctx, IPU_ERR_STATE, "y.c", 3, "no folder"), IPU_ERR_STATE);
    assert_string_equal(ipu_ctx_errmsg(ctx), "no folder [y.c:3]");
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_fail_at(ctx, IPU_ERR_MALFORMED, "core/z.c", 4, "one folder"), IPU_ERR_MALFORMED);
    assert_string_equal(ipu_ctx_errmsg(ctx), "one folder [core/z.c:4]");
    ipu_ctx_free(ctx);
}

typedef struct seen {
    int calls, level;
    char text[64];
    uint64_t done, total;
} seen;

static void on_log(void *user, int level, const char *message)
{
    seen *s = user;
    s->calls++, s->level = level;
    snprintf(s->text, sizeof s->text, "%s", message);
}

static void on_progress(void *user, const char *stage, uint64_t done, uint64_t total)
{
    seen *s = user;
    s->calls++, s->done = done, s->total = total;
    snprintf(s->text, sizeof s->text, "%s", stage);
}

static void test_callbacks_and_cancel(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    seen log = {0}, progress = {0};
    ipu_log(NULL, IPU_LOG_WARN, "nowhere");
    ipu_log(ctx, IPU_LOG_WARN, "no callback yet");
    ipu_ctx_set_log(ctx, on_log, &log);
    ipu_log(ctx, IPU_LOG_WARN, "tile %d", 5);
    assert_int_equal(log.calls, 1);
    assert_int_equal(log.level, IPU_LOG_WARN);
    assert_string_equal(log.text, "tile 5");

    assert_int_equal(ipu_progress(NULL, "none", 1, 2), IPU_OK);
    assert_int_equal(ipu_progress(ctx, "plan", 1, 2), IPU_OK); /* no callback yet */
    ipu_ctx_set_progress(ctx, on_progress, &progress);
    assert_int_equal(ipu_progress(ctx, "plan", 3, 9), IPU_OK);
    assert_int_equal(progress.calls, 1);
    assert_string_equal(progress.text, "plan");
    assert_true(progress.done == 3 && progress.total == 9);

    /* A worker's child: one thread, its own error, cancelled with its parent. */
    ipu_ctx *child = ipu_ctx_child(ctx);
    assert_non_null(child);
    assert_int_equal(child->threads, 1);
    assert_int_equal(IPU_CHECK_CANCEL(NULL), IPU_OK);
    assert_int_equal(IPU_CHECK_CANCEL(child), IPU_OK);
    ipu_ctx_cancel(NULL);
    ipu_ctx_cancel(ctx);
    assert_int_equal(IPU_CHECK_CANCEL(child), IPU_ERR_CANCELLED);
    assert_non_null(strstr(ipu_ctx_errmsg(child), "cancelled ["));
    assert_string_equal(ipu_ctx_errmsg(ctx), "");
    /* The cancel shows through the next progress report, after the callback. */
    assert_int_equal(ipu_progress(ctx, "lower", 4, 9), IPU_ERR_CANCELLED);
    assert_int_equal(progress.calls, 2);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "cancelled ["));
    ipu_ctx_free(child);
    /* No memory for a child. */
    ipu_ctx_fail_allocation(ctx, ipu_ctx_allocations(ctx) + 1);
    assert_null(ipu_ctx_child(ctx));
    ipu_ctx_free(ctx);
}

static void test_inconsistency_wraps_the_check_message(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_int_equal(ipu_fail_at(ctx, IPU_ERR_MALFORMED, "package/validate.c", 9, "tile 3 overlaps"),
                     IPU_ERR_MALFORMED);
    assert_int_equal(ipu_inconsistent_at(ctx, "place", "driver/compile.c", 77, "package of op %d", 2),
                     IPU_ERR_INTERNAL);
    assert_string_equal(ipu_ctx_errmsg(ctx), "compiler inconsistency in the place stage, package of op 2: "
                                             "tile 3 overlaps [package/validate.c:9] [driver/compile.c:77]");
    /* Out of memory and cancel mean the check did not finish: kept as they are. */
    const ipu_status kept[] = {IPU_ERR_NO_MEMORY, IPU_ERR_CANCELLED};
    for (int i = 0; i < 2; i++) {
        ipu_ctx_clear_error(ctx);
        assert_int_equal(ipu_fail_at(ctx, kept[i], "core/alloc.c", 1, "stopped"), kept[i]);
        assert_int_equal(ipu_inconsistent_at(ctx, "plan", "driver/compile.c", 5, "x"), kept[i]);
        assert_string_equal(ipu_ctx_errmsg(ctx), "stopped [core/alloc.c:1]");
    }
    assert_int_equal(ipu_inconsistent_at(NULL, "plan", "driver/compile.c", 5, "x"), IPU_ERR_INTERNAL);
    ipu_ctx_free(ctx);
}

/* ---- jansson out of memory ------------------------------------------------ */

/* jansson's allocations, counted from json_fail_nth; the nth fails (0: none). */
static _Atomic uint64_t json_count, json_fail;
static void *json_malloc(size_t size)
{
    uint64_t n = atomic_fetch_add(&json_count, 1) + 1;
    return n == atomic_load(&json_fail) ? NULL : malloc(size);
}
static void json_fail_nth(uint64_t nth) { atomic_store(&json_count, 0), atomic_store(&json_fail, nth); }
static int restore_json_alloc(void **state)
{
    (void)state;
    json_set_alloc_funcs(malloc, free);
    return 0;
}

#define PROFILE4 "{\"name\": \"c600-4\", \"tiles\": 4}"

/* jansson runs out of memory after the profile text is parsed: in the
 * canonical JSON of a resolve or of a device's profile digest (each of its
 * allocations in turn, then the first of the text it is dumped to), or in a
 * fault report's first allocation.  Each is IPU_ERR_NO_MEMORY. */
static void test_json_out_of_memory(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_profile p;
    TSEED_OK(ctx, ipu_profile_parse(ctx, PROFILE4, 0, &p));
    json_set_alloc_funcs(json_malloc, free);
    json_fail_nth(0);
    json_decref(json_loads(PROFILE4, 0, NULL));
    const uint64_t loads = json_count; /* parsing the text */
    json_fail_nth(0);
    json_t *canonical = ipu_profile_to_json(&p);
    const uint64_t object = json_count; /* building the canonical JSON */
    json_decref(canonical);
    assert_true(loads > 0 && object > C600_COUNT);
    for (int call = 0; call < 2; call++)
        for (uint64_t k = 1; k <= object + 1; k++) {
            char *out = NULL;
            ipu_device *made = NULL;
            ipu_ctx_clear_error(ctx);
            json_fail_nth(loads + k);
            ipu_status got =
                call ? ipu_device_create(ctx, PROFILE4, &made) : ipu_profile_resolve(ctx, PROFILE4, 0, &out);
            json_fail_nth(0);
            if (got != IPU_ERR_NO_MEMORY || !strstr(ipu_ctx_errmsg(ctx), "out of memory") || out || made)
                TSEED_FAIL("call %d, jansson allocation %llu of the canonical JSON failing: %s: %s", call,
                           (unsigned long long)k, ipu_status_name(got), ipu_ctx_errmsg(ctx));
        }
    ipu_device *dev = NULL;
    char *out = NULL;
    TSEED_OK(ctx, ipu_device_create(ctx, PROFILE4, &dev));
    json_fail_nth(1);
    ipu_status got = ipu_device_fault_json(ctx, dev, &out);
    json_fail_nth(0);
    assert_int_equal(got, IPU_ERR_NO_MEMORY);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "out of memory"));
    assert_null(out);
    ipu_device_free(dev);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_profile_errors");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_documents_of_the_wrong_shape),
        cmocka_unit_test(test_profile_values_out_of_range),
        cmocka_unit_test(test_profile_edges_resolve),
        cmocka_unit_test(test_profile_default_budget),
        cmocka_unit_test(test_profile_host_link_at_its_slowest),
        cmocka_unit_test(test_status_names_and_threads),
        cmocka_unit_test(test_first_error_wins_with_its_location),
        cmocka_unit_test(test_callbacks_and_cancel),
        cmocka_unit_test(test_inconsistency_wraps_the_check_message),
        cmocka_unit_test_teardown(test_json_out_of_memory, restore_json_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
