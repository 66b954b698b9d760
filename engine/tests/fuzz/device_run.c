/* device_run.c: the fuzz targets' shared device run (fuzz.h): the size
 * limits a package must keep to be run (tiles, SRAM, executed control ops
 * with every Repeat iteration counted, stream bytes), and a replay of the
 * package with its recorded inputs, as the harness replays a saved package,
 * on a simulator kept for its profile between executions, every call held to
 * fuzz_check: once with device tiles on one thread and, on devices large
 * enough to split, once on two: statuses, cycle reports, output bytes and
 * faults must be the same (DESIGN.md: results do not depend on the thread
 * count); a first run that does not fault must be what the static timing
 * (ipu_package_timing_json) says, step for step; and the entry point of the
 * targets that build a package around their input.
 */
#include <string.h>
#include <zlib.h>

#include "fuzz.h"
#include "package/package.h"
#include "timing/timing.h"

/* Control ops one pass of a program executes, Repeat iterations counted;
 * saturates just past limit. */
static uint64_t executed_ops(const ipu_pkg_op *ops, size_t count, uint64_t limit)
{
    /* The open Repeats: where each body ends and the iterations it multiplies by. */
    size_t ends[64];
    uint64_t factor[65] = {1};
    int depth = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++) {
        while (depth && ends[depth - 1] <= i)
            depth--;
        total += factor[depth];
        if (total > limit)
            return limit + 1;
        if (ops[i].op == IPU_OP_REPEAT && depth < 64) {
            ends[depth] = i + 1 + ops[i].b;
            factor[depth + 1] = factor[depth] * ops[i].a;
            if (factor[depth + 1] > limit)
                return limit + 1;
            depth++;
        }
    }
    return total;
}

int fuzz_package_small(const ipu_package *pkg)
{
    const ipu_profile *p = &pkg->profile;
    if (p->tiles > FUZZ_MAX_TILES || p->sram_end - p->sram_base > FUZZ_MAX_SRAM)
        return 0;
    uint64_t ops = executed_ops(pkg->init_ops, pkg->init_count, FUZZ_MAX_EXECUTED_OPS) +
                   2 * executed_ops(pkg->main_ops, pkg->main_count, FUZZ_MAX_EXECUTED_OPS);
    if (ops > FUZZ_MAX_EXECUTED_OPS)
        return 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < pkg->stream_count; i++)
        bytes += pkg->streams[i].size;
    return bytes <= FUZZ_MAX_STREAM_BYTES;
}

/* Upload the recorded inputs of invocation (parameters: invocation 0). */
static ipu_status upload(ipu_ctx *ctx, ipu_device *dev, const ipu_package *pkg, uint32_t invocation)
{
    for (size_t r = 0; r < pkg->record_count; r++) {
        const ipu_pkg_record *rec = &pkg->records[r];
        const ipu_pkg_stream *s = &pkg->streams[rec->stream];
        if (rec->kind != IPU_RECORD_INPUT || rec->invocation != invocation)
            continue;
        if (invocation && s->direction == IPU_STREAM_PARAM)
            continue;
        ipu_status status = fuzz_check(ctx,
                                       ipu_device_set_stream(ctx, dev, ipu_pkg_string(pkg, s->name_offset),
                                                             pkg->data + rec->data_offset,
                                                             (size_t)rec->size),
                                       "ipu_device_set_stream");
        if (status != IPU_OK)
            return status;
    }
    return IPU_OK;
}

/* What a replay did, call by call, to compare between thread counts: a JSON
 * array of [what, value] pairs (statuses, cycle reports, the CRC-32 of each
 * output stream, faults). */
typedef json_t transcript;

static void note(transcript *t, const char *what, const char *value)
{
    json_array_append_new(t, json_pack("[ss]", what, value));
}

/* After a run or a failed initialize: the outputs, or the fault. */
static void read_back(ipu_ctx *ctx, ipu_device *dev, const ipu_package *pkg, ipu_status status,
                      int must_not_fault, transcript *t)
{
    note(t, "status", ipu_status_name(status));
    if (status == IPU_ERR_DEVICE_FAULT) {
        char *fault = NULL;
        fuzz_check(ctx, ipu_device_fault_json(ctx, dev, &fault), "ipu_device_fault_json");
        if (must_not_fault) {
            fprintf(stderr, "the package must not fault, but: %s\n%s\n", ipu_ctx_errmsg(ctx),
                    fault ? fault : "");
            abort();
        }
        note(t, "fault", fault ? fault : "");
        ipu_free(fault);
        return;
    }
    for (size_t i = 0; status == IPU_OK && i < pkg->stream_count; i++) {
        if (pkg->streams[i].direction != IPU_STREAM_OUTPUT)
            continue;
        const void *data = NULL;
        size_t size = 0;
        ipu_status got = fuzz_check(ctx,
                                    ipu_device_stream(ctx, dev, ipu_pkg_string(pkg, pkg->streams[i].name_offset),
                                                      &data, &size),
                                    "ipu_device_stream");
        if (got == IPU_OK && size != pkg->streams[i].size) {
            fprintf(stderr, "output stream %zu: %zu bytes, the package declares %llu\n", i, size,
                    (unsigned long long)pkg->streams[i].size);
            abort();
        }
        char crc[16];
        snprintf(crc, sizeof crc, "%08lx", got == IPU_OK ? crc32(0L, data, (uInt)size) : 0ul);
        note(t, "output", crc);
    }
}

/* The static timing of a package whose first run gave the cycle report
 * `cycles`: it must exist and agree field for field (the device's report
 * adds per-op compute, which the timing leaves out).  The timing is taken
 * as the object ipu_package_timing_json writes out, not written and read
 * again. */
static void check_timing(const ipu_package *pkg, const char *cycles)
{
    ipu_ctx *ctx = ipu_ctx_create();
    json_t *timing = NULL;
    ipu_status status = ctx ? fuzz_check(ctx, ipu_timing_package(ctx, pkg, &timing), "ipu_timing_package")
                            : IPU_ERR_NO_MEMORY;
    if (status == IPU_ERR_NO_MEMORY || status == IPU_ERR_CANCELLED) {
        ipu_ctx_free(ctx);
        return;
    }
    json_t *run = json_loads(cycles, 0, NULL);
    const char *fields[] = {"cycles", "totals", "steps"};
    int same = timing && run;
    for (size_t i = 0; same && i < sizeof fields / sizeof *fields; i++)
        same = json_equal(json_object_get(timing, fields[i]), json_object_get(run, fields[i]));
    json_t *a = json_object_get(timing, "tiles"), *b = json_object_get(run, "tiles");
    same = same && json_equal(json_object_get(a, "compute"), json_object_get(b, "compute")) &&
           json_equal(json_object_get(a, "wait"), json_object_get(b, "wait"));
    if (!same && run) {
        char *text = timing ? json_dumps(timing, JSON_COMPACT) : NULL;
        fprintf(stderr, "the static timing differs from the device's first run (%s)\ntiming: %s\ndevice: %s\n",
                status == IPU_OK ? "both ran" : ipu_ctx_errmsg(ctx), text ? text : "none", cycles);
        abort();
    }
    json_decref(timing);
    json_decref(run);
    ipu_ctx_free(ctx);
}

/* A device maps its tiles' SRAM at its first initialize, so devices kept
 * between executions, per thread count, for the last few profiles of the
 * packages fuzzed map it once, not every execution (a corpus mixes a few
 * profiles; replacing a device also leaves more allocations than frees,
 * which sends libFuzzer to look for a leak).  A package of a profile not
 * kept replaces the oldest kept. */
#define KEPT_PROFILES 4
ipu_device *fuzz_kept_device(ipu_ctx *ctx, const ipu_package *pkg, int threads, ipu_status *status)
{
    static struct {
        ipu_device *dev;
        uint64_t digest;
    } kept[2][KEPT_PROFILES];
    static unsigned oldest[2];
    uint64_t digest = pkg->profile_digest;
    int i = threads - 1;
    for (unsigned k = 0; k < KEPT_PROFILES; k++)
        if (kept[i][k].dev && kept[i][k].digest == digest) {
            *status = IPU_OK;
            return kept[i][k].dev;
        }
    unsigned k = oldest[i];
    oldest[i] = (k + 1) % KEPT_PROFILES;
    ipu_device_free(kept[i][k].dev);
    kept[i][k].dev = NULL;
    json_t *profile = ipu_profile_to_json(&pkg->profile);
    char *text = profile ? json_dumps(profile, JSON_COMPACT) : NULL;
    json_decref(profile);
    *status = text ? fuzz_check(ctx, ipu_device_create(ctx, text, &kept[i][k].dev), "ipu_device_create")
                   : IPU_ERR_NO_MEMORY;
    free(text);
    kept[i][k].digest = digest;
    return kept[i][k].dev;
}

/* One replay on the kept device running tiles on threads threads. */
static void replay(ipu_ctx *ctx, const ipu_package *pkg, int must_not_fault, int threads, transcript *t)
{
    ipu_ctx_set_threads(ctx, threads);
    ipu_ctx_clear_error(ctx);
    ipu_status status;
    ipu_device *dev = fuzz_kept_device(ctx, pkg, threads, &status);
    if (status == IPU_OK)
        status = upload(ctx, dev, pkg, 0);
    if (status == IPU_OK) {
        status = fuzz_check(ctx, ipu_device_initialize(ctx, dev, pkg), "ipu_device_initialize");
        read_back(ctx, dev, pkg, status, must_not_fault, t);
    }
    uint32_t runs = pkg->invocations < 2 ? pkg->invocations : 2;
    for (uint32_t i = 0; status == IPU_OK && i < runs; i++) {
        if (i)
            status = upload(ctx, dev, pkg, i);
        char *cycles = NULL;
        if (status == IPU_OK)
            status = fuzz_check(ctx, ipu_device_run(ctx, dev, &cycles), "ipu_device_run");
        if (status == IPU_OK && !cycles) {
            fprintf(stderr, "ipu_device_run succeeded without a cycle report\n");
            abort();
        }
        note(t, "cycles", cycles ? cycles : "");
        if (status == IPU_OK && i == 0 && threads == 1)
            check_timing(pkg, cycles);
        ipu_free(cycles);
        read_back(ctx, dev, pkg, status, must_not_fault, t);
    }
    ipu_device_unload(dev);
    ipu_ctx_set_threads(ctx, 1);
}

void fuzz_run_package(ipu_ctx *ctx, const ipu_package *pkg, int must_not_fault)
{
    /* Up to FUZZ_ONE_CHUNK tiles, every parallel loop of the simulator hands
     * all tiles to one thread: a second thread would change nothing. */
    int split = pkg->profile.tiles > FUZZ_ONE_CHUNK;
    transcript *one = json_array(), *two = json_array();
    if (one && two) {
        replay(ctx, pkg, must_not_fault, 1, one);
        if (split)
            replay(ctx, pkg, must_not_fault, 2, two);
    }
    if (split && one && two && !json_equal(one, two)) {
        char *a = json_dumps(one, JSON_INDENT(1)), *b = json_dumps(two, JSON_INDENT(1));
        fprintf(stderr, "the device's results depend on the thread count:\n1 thread: %s\n2 threads: %s\n",
                a ? a : "?", b ? b : "?");
        abort();
    }
    json_decref(one);
    json_decref(two);
}

int fuzz_build_and_run(const uint8_t *data, size_t size, fuzz_build_fn build)
{
    ipu_ctx *ctx = fuzz_context();
    ipu_package *pkg = NULL;
    if (ctx && fuzz_check(ctx, build(ctx, data, size, &pkg), "ipu_pkg_build") == IPU_OK)
        fuzz_run_package(ctx, pkg, 0);
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
    return 0;
}

ipu_status fuzz_start_package(ipu_ctx *ctx, const char *profile_json, struct ipu_pkg_builder **out)
{
    /* The profile is the target's own constant: parsed at its first use. */
    static ipu_profile profile;
    static const char *parsed;
    if (parsed != profile_json) {
        IPU_TRY(ipu_profile_parse(ctx, profile_json, 0, &profile));
        parsed = profile_json;
    }
    IPU_TRY(ipu_pkg_builder_create(ctx, &profile, FUZZ_CODE, FUZZ_DESC, FUZZ_DESC_END, out));
    ipu_status status = ipu_pkg_reserve_data(*out, FUZZ_DATA_BYTES);
    if (status != IPU_OK) {
        ipu_pkg_builder_free(*out);
        *out = NULL;
    }
    return status;
}

ipu_status fuzz_finish_package(struct ipu_pkg_builder *b, ipu_status status, ipu_package **out)
{
    ipu_pkg_set_invocations(b, 2);
    if (status != IPU_OK) {
        ipu_pkg_builder_free(b);
        return status;
    }
    return ipu_pkg_build(b, out);
}

ipu_status fuzz_add_areas(struct ipu_pkg_builder *b, uint32_t t, uint32_t area, int allocations)
{
    /* Tile t's bytes are source[t % FUZZ_TILES], made once. */
    static uint8_t source[FUZZ_TILES][FUZZ_MAX_AREA];
    static int made;
    for (uint32_t k = 0; !made && k < FUZZ_TILES; k++)
        for (uint32_t i = 0; i < FUZZ_MAX_AREA; i++)
            source[k][i] = (uint8_t)(k * 64 + i * 37);
    made = 1;
    ipu_status status = ipu_pkg_add_data(b, t, FUZZ_SRC, source[t % FUZZ_TILES], area < FUZZ_MAX_AREA ? area : FUZZ_MAX_AREA);
    if (status == IPU_OK && allocations)
        status = ipu_pkg_add_alloc(b, t, FUZZ_SRC, area, "fuzz/source");
    if (status == IPU_OK && allocations)
        status = ipu_pkg_add_alloc(b, t, FUZZ_DST, area, "fuzz/destination");
    return status;
}
