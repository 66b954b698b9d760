/* fuzz_compute.c: libFuzzer target for kernel descriptors: the package
 * validator's compute lists (package/validate.c), the simulator's operand
 * checks (bounds, alignment, region 1, protection, written bytes, live
 * allocations: device/sim_compute.c, sim_memory.c) and the kernels
 * themselves (engine/src/kernels/), with arguments from the input.  The input
 * becomes the compute lists of a package built around them on a 4-tile
 * c600-class device with every kernel's code loaded on every tile; the
 * package runs two invocations.  Input bytes:
 *   byte 0, flags: bit 0 gives every tile an allocation over its source and
 *     destination areas, so the allocation checks apply (without it the
 *     package has no allocation table);
 *   then per tile 0..3: one byte whose low 3 bits count its descriptors (0:
 *     the tile computes nothing), and per descriptor one byte choosing the
 *     kernel entry (1 + byte % 16, kernels.h) followed by that entry's
 *     argument words (u32 little-endian; missing bytes read as 0).
 * Each tile holds 16 KiB of initial bytes at FUZZ_SRC (region 0) and 16 KiB of
 * unwritten destination at FUZZ_DST (region 1).  Seeds: fixtures/fuzz/compute/
 * (written by fixtures/fuzz/make_seeds.py).
 */
#include <string.h>

#include "fuzz.h"
#include "kernels/kernels.h"
#include "package/package.h"

#define AREA 0x4000u
#define MAX_DESCRIPTORS 7u

typedef struct reader {
    const uint8_t *at, *end;
} reader;

static uint8_t take_byte(reader *r)
{
    return r->at < r->end ? *r->at++ : 0;
}

static uint32_t take_word(reader *r)
{
    uint32_t w = 0;
    for (int i = 0; i < 4; i++)
        w |= (uint32_t)take_byte(r) << (8 * i);
    return w;
}

/* A tile's compute list from the input; returns its size (0: none). */
static uint32_t compute_list(reader *r, uint8_t *out)
{
    uint32_t count = take_byte(r) & MAX_DESCRIPTORS, at = 4;
    if (!count)
        return 0;
    ipu_store_u32(out, count);
    for (uint32_t d = 0; d < count; d++) {
        uint32_t entry = 1 + take_byte(r) % (IPU_K_ENTRY_END - 1), argc = ipu_kernel_arg_count((int)entry);
        ipu_store_u32(out + at, entry | argc << 16);
        at += 4;
        for (uint32_t i = 0; i < argc; i++, at += 4)
            ipu_store_u32(out + at, take_word(r));
    }
    return at;
}

static ipu_status build(ipu_ctx *ctx, const uint8_t *data, size_t size, ipu_package **out)
{
    reader r = {data, data + size};
    int allocations = take_byte(&r) & 1;
    ipu_pkg_builder *b = NULL;
    IPU_TRY(fuzz_start_package(ctx, "{\"name\":\"fuzz-compute\",\"tiles\":4}", &b));
    uint32_t slot = ipu_pkg_new_slot(b);
    ipu_status status = IPU_OK;
    static uint8_t list[4 + MAX_DESCRIPTORS * 4 * (1 + IPU_KERNEL_MAX_ARGS)];
    for (uint32_t t = 0; status == IPU_OK && t < FUZZ_TILES; t++) {
        for (int entry = 1; status == IPU_OK && entry < IPU_K_ENTRY_END; entry++)
            status = ipu_pkg_add_code(b, t, entry);
        uint32_t n = status == IPU_OK ? compute_list(&r, list) : 0;
        if (n)
            status = ipu_pkg_put_slot(b, t, slot, list, n, NULL);
        if (status == IPU_OK)
            status = fuzz_add_areas(b, t, AREA, allocations);
    }
    if (status == IPU_OK)
        status = ipu_pkg_emit(b, 0, IPU_OP_STEP, slot, IPU_NO_SLOT, 0);
    return fuzz_finish_package(b, status, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_build_and_run(data, size, build); }
