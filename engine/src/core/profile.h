/* profile.h: the device profile, every number of DEVICE.md as a field.
 * Profiles are JSON (fixtures/profiles/); a missing field takes the c600
 * default, an unknown field or an inconsistent value is an error naming it.
 * The compiler and the simulator read the same struct.
 */
#ifndef IPU_PROFILE_H
#define IPU_PROFILE_H

#include <jansson.h>
#include <stdint.h>

#include "core/core.h"

typedef struct ipu_profile {
    char name[64];
    uint32_t tiles;
    double clock_hz;
    uint32_t sram_base;          /* first SRAM byte address */
    uint32_t sram_end;           /* one past the last SRAM byte */
    uint32_t inaccessible_tail;  /* top bytes that no access may touch */
    uint32_t element_bytes;      /* memory element (bank) size, absolute boundaries */
    uint32_t region1_base;       /* interleaved region start; region 0 below */
    uint32_t runtime_state_bytes;/* protected, at sram_base */
    uint32_t aperture_base;      /* host exchange aperture [base, end) */
    uint32_t aperture_end;
    uint32_t support_reserve;    /* planner's reserve for package support */
    uint32_t sync_cycles;
    uint32_t exchange_latency;
    uint32_t exchange_overhead;
    double host_bytes_per_second;
    uint32_t amp_macs_fp8;
    uint32_t amp_macs_fp16_fp16;
    uint32_t amp_macs_fp16_fp32;
    uint32_t amp_macs_fp32;
    uint32_t amp_call_overhead;
    uint32_t vector_bytes_per_cycle;
    uint32_t copy_bytes_per_cycle;
    uint32_t workers;
} ipu_profile;

/* One past the last accessible byte. */
static inline uint32_t ipu_profile_access_end(const ipu_profile *p)
{
    return p->sram_end - p->inaccessible_tail;
}
/* The default planner budget: accessible - runtime state - support reserve. */
uint32_t ipu_profile_default_budget(const ipu_profile *p);

/* Cycles a host exchange of bytes (the whole device's) takes: the host
 * link's share per cycle, rounded up (at most UINT64_MAX). */
uint64_t ipu_profile_host_cycles(const ipu_profile *p, uint64_t bytes);

void ipu_profile_default(ipu_profile *p);
/* Parse JSON text; tiles_override (0 = keep) replaces the tile count. */
ipu_status ipu_profile_parse(ipu_ctx *ctx, const char *json_text, uint32_t tiles_override,
                             ipu_profile *out);
ipu_status ipu_profile_from_json(ipu_ctx *ctx, const json_t *object, uint32_t tiles_override,
                                 ipu_profile *out);
/* Canonical JSON (every field, fixed order); NULL on out-of-memory. */
json_t *ipu_profile_to_json(const ipu_profile *p);
/* Digest of the canonical JSON text. */
uint64_t ipu_profile_digest(const ipu_profile *p);

#endif
