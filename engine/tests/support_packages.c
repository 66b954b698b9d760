/* support_packages.c: the hand-built package helpers of support_packages.h:
 * fixture profiles, the standard test layout, record encoders for compute
 * lists, exchange tables, patch lists and host descriptors (little-endian, as
 * package/format.h defines them), and a one-call device run that returns the
 * statuses, the cycle report and the parsed fault JSON.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_packages.h"

#include "ipu/ipu.h"

/* ---- profiles ----------------------------------------------------------- */

char *tpkg_profile_text(uint32_t tiles)
{
    const char *fixtures = getenv("IPU_FIXTURES");
    if (!fixtures)
        fail_msg("IPU_FIXTURES is not set (ctest sets it to the fixtures folder)");
    char path[4096];
    if (tiles == 1472)
        snprintf(path, sizeof path, "%s/profiles/c600.json", fixtures);
    else
        snprintf(path, sizeof path, "%s/profiles/tiles%u.json", fixtures, tiles);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open the fixture profile %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    assert_non_null(text);
    size_t got = fread(text, 1, (size_t)size, f);
    fclose(f);
    assert_int_equal(got, (size_t)size);
    text[size] = 0;
    return text;
}

void tpkg_profile(ipu_ctx *ctx, uint32_t tiles, ipu_profile *out)
{
    char *text = tpkg_profile_text(tiles);
    TPKG_OK(ctx, ipu_profile_parse(ctx, text, 0, out));
    free(text);
    assert_int_equal(out->tiles, tiles);
}

/* ---- layout and builder -------------------------------------------------- */

uint32_t tpkg_code_base(const ipu_profile *p)
{
    return (p->sram_base + p->runtime_state_bytes + 63) & ~63u;
}

uint32_t tpkg_desc_base(const ipu_profile *p) { return p->aperture_end; }

uint32_t tpkg_data0(const ipu_profile *p) { return tpkg_desc_base(p) + TPKG_DESC_BYTES; }

void tpkg_ok_at(const char *file, int line, ipu_ctx *ctx, ipu_status status, const char *what)
{
    if (status == IPU_OK)
        return;
    print_error("%s failed: %s: %s\n", what, ipu_status_name(status), ipu_ctx_errmsg(ctx));
    _fail(file, line);
}

ipu_ctx *tpkg_context(void)
{
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_ctx_set_threads(ctx, 2);
    return ctx;
}

void tpkg_elements(const ipu_profile *p, uint32_t *x, uint32_t *y, uint32_t *z)
{
    uint32_t e = p->element_bytes;
    *x = (tpkg_data0(p) + e) / e * e;
    *y = *x + e;
    *z = *y + e;
    assert_true(*z + e <= p->region1_base);
}

ipu_pkg_builder *tpkg_builder(ipu_ctx *ctx, const ipu_profile *p)
{
    ipu_pkg_builder *b = NULL;
    uint32_t desc = tpkg_desc_base(p);
    TPKG_OK(ctx, ipu_pkg_builder_create(ctx, p, tpkg_code_base(p), desc, desc + TPKG_DESC_BYTES, &b));
    return b;
}

ipu_package *tpkg_build(ipu_ctx *ctx, ipu_pkg_builder *b)
{
    ipu_package *pkg = NULL;
    TPKG_OK(ctx, ipu_pkg_build(b, &pkg));
    return pkg;
}

/* ---- kernel descriptors ---------------------------------------------------- */

static tpkg_kernel kernel(uint32_t entry, uint32_t argc, const uint32_t *args)
{
    tpkg_kernel k;
    memset(&k, 0, sizeof k);
    k.entry = entry;
    k.argc = argc;
    memcpy(k.args, args, argc * sizeof *args);
    return k;
}

tpkg_kernel tpkg_fill(uint32_t dst, uint32_t bytes, uint32_t pattern)
{
    uint32_t args[] = {dst, bytes, pattern};
    return kernel(IPU_K_FILL, 3, args);
}

tpkg_kernel tpkg_copy(uint32_t src, uint32_t dst, uint32_t bytes)
{
    uint32_t args[] = {src, dst, bytes};
    return kernel(IPU_K_COPY, 3, args);
}

tpkg_kernel tpkg_gemm_f16(uint32_t a, uint32_t b, uint32_t c, uint32_t m, uint32_t n, uint32_t k,
                          uint32_t out_type, uint32_t flags)
{
    uint32_t args[] = {a, b, c, m, n, k, out_type, flags, k, n, n};
    return kernel(IPU_K_GEMM_F16, 11, args);
}

uint32_t tpkg_kernel_bytes(const tpkg_kernel *k) { return 4 + 4 * k->argc; }

/* Append bytes as a record bound to a slot (slot IPU_NO_SLOT: unbound). */
static uint32_t put_record(ipu_pkg_builder *b, uint32_t tile, uint32_t slot, const uint8_t *bytes,
                           size_t size)
{
    /* The builder has no context accessor: errors are reported by status. */
    uint32_t address = 0;
    ipu_status status = slot == IPU_NO_SLOT ? ipu_pkg_put(b, tile, bytes, size, &address)
                                            : ipu_pkg_put_slot(b, tile, slot, bytes, size, &address);
    if (status != IPU_OK)
        fail_msg("appending %zu descriptor bytes to tile %u failed: %s", size, tile,
                 ipu_status_name(status));
    return address;
}

/* Exchange tables and patch lists share one layout: u32 count, then 16-byte
 * entries of four u32 words (host descriptors: 32-byte entries, below).  quads_record allocates one
 * for count entries (count word set), set_quad fills entry i, and
 * put_quads_record appends it to the tile (bound to slot) and frees it. */
static uint8_t *quads_record(size_t count)
{
    uint8_t *record = calloc(1, 4 + 16 * count);
    assert_non_null(record);
    ipu_store_u32(record, (uint32_t)count);
    return record;
}

static void set_quad(uint8_t *record, size_t i, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3)
{
    uint8_t *e = record + 4 + 16 * i;
    ipu_store_u32(e, w0);
    ipu_store_u32(e + 4, w1);
    ipu_store_u32(e + 8, w2);
    ipu_store_u32(e + 12, w3);
}

static uint32_t put_quads_record(ipu_pkg_builder *b, uint32_t tile, uint32_t slot, uint8_t *record,
                                 size_t count)
{
    uint32_t address = put_record(b, tile, slot, record, 4 + 16 * count);
    free(record);
    return address;
}

uint32_t tpkg_compute_list(ipu_pkg_builder *b, uint32_t tile, uint32_t slot,
                           const tpkg_kernel *kernels, size_t count, int with_code)
{
    size_t size = 4;
    for (size_t i = 0; i < count; i++)
        size += tpkg_kernel_bytes(&kernels[i]);
    uint8_t *bytes = calloc(1, size);
    assert_non_null(bytes);
    ipu_store_u32(bytes, (uint32_t)count);
    uint8_t *at = bytes + 4;
    for (size_t i = 0; i < count; i++) {
        const tpkg_kernel *k = &kernels[i];
        ipu_store_u32(at, (k->entry & 0xFFFFu) | k->argc << 16);
        for (uint32_t a = 0; a < k->argc; a++)
            ipu_store_u32(at + 4 + 4 * a, k->args[a]);
        at += tpkg_kernel_bytes(k);
        if (with_code && ipu_pkg_add_code(b, tile, (int)k->entry) != IPU_OK)
            fail_msg("adding the code of entry %u to tile %u failed", k->entry, tile);
    }
    uint32_t address = put_record(b, tile, slot, bytes, size);
    free(bytes);
    return address;
}

/* ---- exchange tables ------------------------------------------------------ */

static tpkg_xrow xrow(uint32_t op, uint32_t peer, uint32_t cycle, uint32_t words, uint32_t address)
{
    tpkg_xrow r = {op, 0, peer, cycle, words, address};
    return r;
}

tpkg_xrow tpkg_send(uint32_t cycle, uint32_t words, uint32_t address)
{
    return xrow(IPU_XROW_SEND, 0, cycle, words, address);
}

tpkg_xrow tpkg_recv(uint32_t from, uint32_t cycle, uint32_t words, uint32_t address)
{
    return xrow(IPU_XROW_RECV, from, cycle, words, address);
}

tpkg_xrow tpkg_set_base(uint32_t address) { return xrow(IPU_XROW_SET_BASE, 0, 0, 0, address); }

tpkg_xrow tpkg_reset_base(void) { return xrow(IPU_XROW_RESET_BASE, 0, 0, 0, 0); }

_Static_assert(IPU_XROW_SIZE == 16, "an exchange row is four u32 words");

uint32_t tpkg_exchange_table(ipu_pkg_builder *b, uint32_t tile, uint32_t slot,
                             const tpkg_xrow *rows, size_t count)
{
    uint8_t *record = quads_record(count);
    for (size_t i = 0; i < count; i++) {
        const tpkg_xrow *r = &rows[i];
        set_quad(record, i, r->op | r->flags << 8 | r->peer << 16, r->cycle, r->words, r->address);
    }
    return put_quads_record(b, tile, slot, record, count);
}

/* ---- patch lists, host descriptors, words ----------------------------------- */

uint32_t tpkg_patch_list(ipu_pkg_builder *b, uint32_t tile, uint32_t slot,
                         const tpkg_patch *patches, size_t count)
{
    uint8_t *record = quads_record(count);
    for (size_t i = 0; i < count; i++)
        set_quad(record, i, patches[i].kind, patches[i].target, patches[i].a, patches[i].b);
    return put_quads_record(b, tile, slot, record, count);
}

tpkg_host_entry tpkg_host_run(uint32_t stream, uint32_t offset, uint32_t address, uint32_t bytes)
{
    return (tpkg_host_entry){stream, offset, address, bytes, 1, bytes, bytes, 0};
}

uint32_t tpkg_host_descriptor(ipu_pkg_builder *b, uint32_t tile, uint32_t slot,
                              const tpkg_host_entry *entries, size_t count)
{
    uint8_t *record = calloc(1, 4 + (size_t)IPU_HOST_ENTRY_SIZE * count);
    assert_non_null(record);
    ipu_store_u32(record, (uint32_t)count);
    for (size_t i = 0; i < count; i++) {
        const tpkg_host_entry *e = &entries[i];
        const uint32_t words[IPU_HOST_ENTRY_SIZE / 4] = {
            e->stream, e->offset, e->address, e->bytes,
            e->rows, e->stream_stride, e->tile_stride, e->reserved};
        for (uint32_t w = 0; w < IPU_HOST_ENTRY_SIZE / 4; w++)
            ipu_store_u32(record + 4 + IPU_HOST_ENTRY_SIZE * i + 4 * w, words[w]);
    }
    uint32_t address = put_record(b, tile, slot, record, 4 + (size_t)IPU_HOST_ENTRY_SIZE * count);
    free(record);
    return address;
}

uint32_t tpkg_put_words(ipu_pkg_builder *b, uint32_t tile, const uint32_t *words, size_t count)
{
    uint8_t *bytes = calloc(count ? count : 1, 4);
    assert_non_null(bytes);
    for (size_t i = 0; i < count; i++)
        ipu_store_u32(bytes + 4 * i, words[i]);
    uint32_t address = put_record(b, tile, IPU_NO_SLOT, bytes, 4 * count);
    free(bytes);
    return address;
}

void tpkg_data(ipu_pkg_builder *b, uint32_t tile, uint32_t address, uint32_t count, uint32_t seed)
{
    uint8_t *bytes = malloc(count ? count : 1);
    assert_non_null(bytes);
    for (uint32_t i = 0; i < count; i++)
        bytes[i] = (uint8_t)(seed + i * 37u);
    if (ipu_pkg_add_data(b, tile, address, bytes, count) != IPU_OK)
        fail_msg("adding %u data bytes at 0x%X on tile %u failed", count, address, tile);
    free(bytes);
}

/* ---- running ------------------------------------------------------------------ */

ipu_device *tpkg_device(ipu_ctx *ctx, const ipu_package *pkg)
{
    json_t *profile = ipu_profile_to_json(&pkg->profile);
    assert_non_null(profile);
    char *text = json_dumps(profile, JSON_COMPACT);
    json_decref(profile);
    assert_non_null(text);
    ipu_device *dev = NULL;
    TPKG_OK(ctx, ipu_device_create(ctx, text, &dev));
    free(text);
    return dev;
}

json_t *tpkg_fault(ipu_ctx *ctx, const ipu_device *dev)
{
    char *text = NULL;
    TPKG_OK(ctx, ipu_device_fault_json(ctx, dev, &text));
    json_error_t error;
    json_t *fault = json_loads(text, 0, &error);
    if (!json_is_object(fault))
        fail_msg("ipu_device_fault_json returned invalid JSON (%s): %s", error.text, text);
    ipu_free(text);
    return fault;
}

tpkg_outcome tpkg_execute(ipu_ctx *ctx, const ipu_package *pkg)
{
    tpkg_outcome o;
    memset(&o, 0, sizeof o);
    ipu_device *dev = tpkg_device(ctx, pkg);
    o.init = ipu_device_initialize(ctx, dev, pkg);
    o.run = IPU_ERR_STATE;
    if (o.init == IPU_OK) {
        o.run = ipu_device_run(ctx, dev, &o.cycles_text);
        if (o.run == IPU_OK) {
            o.cycles = json_loads(o.cycles_text, 0, NULL);
            assert_non_null(o.cycles);
        }
    }
    o.fault = tpkg_fault(ctx, dev);
    ipu_device_free(dev);
    return o;
}

void tpkg_outcome_free(tpkg_outcome *o)
{
    json_decref(o->fault);
    json_decref(o->cycles);
    ipu_free(o->cycles_text);
    memset(o, 0, sizeof *o);
}

/* ---- fault assertions ------------------------------------------------------------- */

long long tpkg_fault_int(const json_t *fault, const char *key)
{
    const json_t *v = json_object_get(fault, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

const char *tpkg_fault_str(const json_t *fault, const char *key)
{
    return json_string_value(json_object_get(fault, key));
}

void tpkg_expect_fault_at(const char *file, int line, const json_t *fault, const char *kind,
                          uint32_t tile, uint32_t lo, uint32_t hi)
{
    assert_non_null(fault);
    const char *got_kind = tpkg_fault_str(fault, "kind");
    long long got_tile = tpkg_fault_int(fault, "tile"), got_lo = tpkg_fault_int(fault, "address_lo"),
              got_hi = tpkg_fault_int(fault, "address_hi");
    if (got_kind && strcmp(got_kind, kind) == 0 && got_tile == (long long)tile &&
        got_lo == (long long)lo && got_hi == (long long)hi)
        return;
    char *text = json_dumps(fault, JSON_COMPACT);
    print_error("expected fault %s on tile %u at [0x%X, 0x%X)\n"
                "got      fault %s on tile %lld at [0x%llX, 0x%llX)\n"
                "fault JSON: %s\n",
                kind, tile, lo, hi, got_kind ? got_kind : "(none)", got_tile,
                (unsigned long long)got_lo, (unsigned long long)got_hi, text ? text : "?");
    free(text);
    _fail(file, line);
}
