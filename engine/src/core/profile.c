/* profile.c: device profile defaults (the c600 figures of DEVICE.md), strict
 * JSON parsing with messages naming the field, consistency checks, canonical
 * JSON and its digest.
 */
#include <stdlib.h>
#include <string.h>

#include "core/profile.h"

typedef struct field {
    const char *name;
    size_t offset;
    int is_double;
} field;

#define U32_FIELD(n) {#n, offsetof(ipu_profile, n), 0}
#define F64_FIELD(n) {#n, offsetof(ipu_profile, n), 1}
static const field FIELDS[] = {
    U32_FIELD(tiles),
    F64_FIELD(clock_hz),
    U32_FIELD(sram_base),
    U32_FIELD(sram_end),
    U32_FIELD(inaccessible_tail),
    U32_FIELD(element_bytes),
    U32_FIELD(region1_base),
    U32_FIELD(runtime_state_bytes),
    U32_FIELD(aperture_base),
    U32_FIELD(aperture_end),
    U32_FIELD(support_reserve),
    U32_FIELD(sync_cycles),
    U32_FIELD(exchange_latency),
    U32_FIELD(exchange_overhead),
    F64_FIELD(host_bytes_per_second),
    U32_FIELD(amp_macs_fp8),
    U32_FIELD(amp_macs_fp16_fp16),
    U32_FIELD(amp_macs_fp16_fp32),
    U32_FIELD(amp_macs_fp32),
    U32_FIELD(amp_call_overhead),
    U32_FIELD(vector_bytes_per_cycle),
    U32_FIELD(copy_bytes_per_cycle),
    U32_FIELD(workers),
};
#define FIELD_COUNT (sizeof FIELDS / sizeof FIELDS[0])

void ipu_profile_default(ipu_profile *p)
{
    memset(p, 0, sizeof *p);
    strcpy(p->name, "c600");
    p->tiles = 1472;
    p->clock_hz = 1.5e9;
    p->sram_base = 0x4C000;
    p->sram_end = 0xE8000;
    p->inaccessible_tail = 1104;
    p->element_bytes = 16384;
    p->region1_base = 0x80000;
    p->runtime_state_bytes = 1760;
    p->aperture_base = 0x50000;
    p->aperture_end = 0x58000;
    p->support_reserve = 48 * 1024;
    p->sync_cycles = 150;
    p->exchange_latency = 16;
    p->exchange_overhead = 100;
    p->host_bytes_per_second = 64e9;
    p->amp_macs_fp8 = 128;
    p->amp_macs_fp16_fp16 = 64;
    p->amp_macs_fp16_fp32 = 32;
    p->amp_macs_fp32 = 16;
    p->amp_call_overhead = 50;
    p->vector_bytes_per_cycle = 8;
    p->copy_bytes_per_cycle = 8;
    p->workers = 6;
}

uint32_t ipu_profile_default_budget(const ipu_profile *p)
{
    uint32_t accessible = ipu_profile_access_end(p) - p->sram_base;
    uint64_t used = (uint64_t)p->runtime_state_bytes + p->support_reserve;
    return accessible > used ? (uint32_t)(accessible - used) : 0;
}

uint64_t ipu_profile_host_cycles(const ipu_profile *p, uint64_t bytes)
{
    double per_cycle = p->host_bytes_per_second / p->clock_hz;
    double cycles = (double)bytes / per_cycle + 0.999999;
    return cycles < 0x1p64 ? (uint64_t)cycles : UINT64_MAX;
}

static ipu_status check_consistent(ipu_ctx *ctx, const ipu_profile *p)
{
#define REQUIRE(cond, ...)                                   \
    do {                                                     \
        if (!(cond))                                         \
            return IPU_FAIL(ctx, IPU_ERR_MALFORMED, __VA_ARGS__); \
    } while (0)
    REQUIRE(p->tiles >= 1 && p->tiles <= 65535, "profile field 'tiles': expected 1..65535, got %u",
            p->tiles);
    REQUIRE(p->clock_hz > 0 && p->clock_hz <= 1e12, "profile field 'clock_hz': expected > 0 and at most 1e12, got %g",
            p->clock_hz);
    /* Sums are taken in 64 bits: no field may wrap another past the SRAM. */
    REQUIRE(p->element_bytes >= 64 && p->element_bytes <= (1u << 30) &&
                (p->element_bytes & (p->element_bytes - 1)) == 0,
            "profile field 'element_bytes': expected a power of two in 64..2^30, got %u",
            p->element_bytes);
    REQUIRE(p->sram_base % p->element_bytes == 0 && p->sram_end % p->element_bytes == 0 &&
                p->sram_base < p->sram_end,
            "profile fields 'sram_base'/'sram_end': expected element-aligned base < end");
    REQUIRE(p->inaccessible_tail < p->sram_end - p->sram_base && p->inaccessible_tail % 16 == 0,
            "profile field 'inaccessible_tail': expected a multiple of 16 below the SRAM size, got %u",
            p->inaccessible_tail);
    REQUIRE(p->region1_base >= p->sram_base && p->region1_base <= p->sram_end &&
                p->region1_base % (2 * (uint64_t)p->element_bytes) == 0,
            "profile field 'region1_base': expected an address inside SRAM on an element-pair "
            "boundary, got 0x%X",
            p->region1_base);
    REQUIRE(p->runtime_state_bytes % 8 == 0 &&
                (uint64_t)p->sram_base + p->runtime_state_bytes <= p->aperture_base,
            "profile field 'runtime_state_bytes': expected a multiple of 8 ending at or below the "
            "aperture, got %u",
            p->runtime_state_bytes);
    REQUIRE(p->aperture_base < p->aperture_end && p->aperture_end <= p->region1_base &&
                p->aperture_base % 16 == 0 && p->aperture_end % 16 == 0,
            "profile fields 'aperture_base'/'aperture_end': expected a 16-byte aligned range in "
            "region 0");
    REQUIRE(p->exchange_latency >= 1, "profile field 'exchange_latency': expected >= 1");
    /* At least a byte per 2^20 cycles: a host exchange of every stream's bytes stays far below 2^64 cycles. */
    REQUIRE(p->host_bytes_per_second > 0 && p->host_bytes_per_second / p->clock_hz >= 0x1p-20,
            "profile field 'host_bytes_per_second': expected at least clock_hz / 2^20 (%g), got %g",
            p->clock_hz * 0x1p-20, p->host_bytes_per_second);
    REQUIRE(p->amp_macs_fp8 && p->amp_macs_fp16_fp16 && p->amp_macs_fp16_fp32 && p->amp_macs_fp32,
            "profile fields 'amp_macs_*': expected > 0");
    REQUIRE(p->vector_bytes_per_cycle && p->copy_bytes_per_cycle && p->workers,
            "profile fields 'vector_bytes_per_cycle', 'copy_bytes_per_cycle', 'workers': expected > 0");
#undef REQUIRE
    return IPU_OK;
}

ipu_status ipu_profile_from_json(ipu_ctx *ctx, const json_t *object, uint32_t tiles_override,
                                 ipu_profile *out)
{
    ipu_profile p;
    ipu_profile_default(&p);
    if (!json_is_object(object))
        return IPU_FAIL(ctx, IPU_ERR_MALFORMED, "device profile: expected a JSON object");
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)object, key, value) {
        if (strcmp(key, "name") == 0) {
            if (!json_is_string(value) || strlen(json_string_value(value)) >= sizeof p.name)
                return IPU_FAIL(ctx, IPU_ERR_MALFORMED,
                                "profile field 'name': expected a string under 64 bytes");
            strcpy(p.name, json_string_value(value));
            continue;
        }
        const field *f = NULL;
        for (size_t i = 0; i < FIELD_COUNT; i++)
            if (strcmp(FIELDS[i].name, key) == 0)
                f = &FIELDS[i];
        if (!f)
            return IPU_FAIL(ctx, IPU_ERR_MALFORMED, "device profile: unknown field '%s'", key);
        if (f->is_double) {
            if (!json_is_number(value))
                return IPU_FAIL(ctx, IPU_ERR_MALFORMED, "profile field '%s': expected a number",
                                key);
            *(double *)((char *)&p + f->offset) = json_number_value(value);
        } else {
            if (!json_is_integer(value) || json_integer_value(value) < 0 ||
                json_integer_value(value) > 0xFFFFFFFF)
                return IPU_FAIL(ctx, IPU_ERR_MALFORMED,
                                "profile field '%s': expected an integer in 0..4294967295", key);
            *(uint32_t *)((char *)&p + f->offset) = (uint32_t)json_integer_value(value);
        }
    }
    if (tiles_override)
        p.tiles = tiles_override;
    IPU_TRY(check_consistent(ctx, &p));
    *out = p;
    return IPU_OK;
}

ipu_status ipu_profile_parse(ipu_ctx *ctx, const char *json_text, uint32_t tiles_override,
                             ipu_profile *out)
{
    json_error_t error;
    json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &error);
    if (!root)
        return IPU_FAIL(ctx, IPU_ERR_MALFORMED, "device profile: invalid JSON at line %d: %s",
                        error.line, error.text);
    ipu_status status = ipu_profile_from_json(ctx, root, tiles_override, out);
    json_decref(root);
    return status;
}

json_t *ipu_profile_to_json(const ipu_profile *p)
{
    json_t *object = json_object();
    if (!object)
        return NULL;
    int failed = json_object_set_new(object, "name", json_string(p->name));
    for (size_t i = 0; i < FIELD_COUNT; i++) {
        const char *base = (const char *)p + FIELDS[i].offset;
        json_t *value = FIELDS[i].is_double ? json_real(*(const double *)base)
                                            : json_integer(*(const uint32_t *)base);
        failed |= json_object_set_new(object, FIELDS[i].name, value);
    }
    if (failed) {
        json_decref(object);
        return NULL;
    }
    return object;
}

uint64_t ipu_profile_digest(const ipu_profile *p)
{
    json_t *object = ipu_profile_to_json(p);
    char *text = object ? json_dumps(object, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    uint64_t digest = text ? ipu_digest64(text, strlen(text)) : 0;
    free(text);
    json_decref(object);
    return digest;
}

ipu_status ipu_profile_resolve(ipu_ctx *ctx, const char *profile_json, uint32_t tiles_override,
                               char **out_json)
{
    if (!profile_json || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_profile_resolve: NULL argument");
    ipu_profile p;
    IPU_TRY(ipu_profile_parse(ctx, profile_json, tiles_override, &p));
    json_t *object = ipu_profile_to_json(&p);
    char *text = object ? json_dumps(object, JSON_INDENT(2)) : NULL;
    json_decref(object);
    if (!text)
        return IPU_NO_MEMORY(ctx);
    *out_json = text;
    return IPU_OK;
}
