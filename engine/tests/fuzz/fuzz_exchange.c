/* fuzz_exchange.c: libFuzzer target for the exchange-table decoder: the
 * package validator's exchange rows (package/validate.c) and the simulator's
 * decode, port checks, window matching, copies and replay of kept phases
 * (device/sim_exchange.c, sim_replay.c).  The input becomes the exchange
 * tables of a package built around them on a 4-tile c600-class device, and
 * the package runs two invocations.  Input bytes:
 *   byte 0, flags: bit 0 gives every tile a source allocation [FUZZ_SRC, +4 KiB)
 *     (region 0, initial bytes) and a destination allocation [FUZZ_DST, +4 KiB)
 *     (region 1), so the allocation checks apply (without it the package
 *     has no allocation table); bit 1 adds a patch list on tile 0 (Repeat
 *     patches into the tables); bits 2-3 the Repeat count minus 1 around the
 *     exchange step (no Repeat when 0 and no patch list); bit 4 takes each
 *     table's row-count word from the input instead of counting the rows;
 *   then per tile 0..3: one byte whose low 4 bits are its row count (0: the
 *     tile takes no part), the count word when bit 4 is set, and 16 bytes per
 *     counted row (format.h: full rows, or the shorter continuation, repeat
 *     and run entries packed in those bytes, which the count word counts;
 *     missing bytes end the table early);
 *   then with bit 1: one byte whose low 3 bits count the patch entries, and
 *     their 16-byte entries.
 * Each tile's table is its first descriptor record: at FUZZ_DESC + 4 the first
 * row (the patch list follows tile 0's table).  Seeds: fixtures/fuzz/exchange/
 * (written by fixtures/fuzz/make_seeds.py).
 */
#include <string.h>

#include "fuzz.h"
#include "package/package.h"

#define AREA 0x1000u

/* Reads the input front to back; past its end, nothing. */
typedef struct reader {
    const uint8_t *at, *end;
} reader;

static uint32_t take(reader *r, uint8_t *out, uint32_t size)
{
    uint32_t n = (uint32_t)(r->end - r->at) < size ? (uint32_t)(r->end - r->at) : size;
    memcpy(out, r->at, n);
    r->at += n;
    return n;
}

static uint8_t take_byte(reader *r)
{
    uint8_t b = 0;
    take(r, &b, 1);
    return b;
}

/* A record of up to max_rows entries of entry bytes from the input: count
 * word (counted, or read when raw), then the entries.  Returns its size. */
static uint32_t record(reader *r, uint8_t *out, uint32_t max_rows, uint32_t entry, int raw)
{
    uint32_t rows = take_byte(r) & max_rows;
    if (!rows)
        return 0;
    if (raw && take(r, out, 4) < 4)
        return 0;
    uint32_t got = take(r, out + 4, rows * entry) / entry;
    if (!raw)
        ipu_store_u32(out, got);
    return 4 + got * entry;
}

static ipu_status build(ipu_ctx *ctx, const uint8_t *data, size_t size, ipu_package **out)
{
    reader r = {data, data + size};
    uint8_t flags = take_byte(&r);
    int allocations = flags & 1, patches = flags & 2, raw = flags & 16;
    uint32_t count = 1 + ((flags >> 2) & 3);
    ipu_pkg_builder *b = NULL;
    IPU_TRY(fuzz_start_package(ctx, "{\"name\":\"fuzz-exchange\",\"tiles\":4}", &b));
    uint32_t xslot = ipu_pkg_new_slot(b);
    uint32_t pslot = patches ? ipu_pkg_new_slot(b) : IPU_NO_SLOT;
    ipu_status status = IPU_OK;
    uint8_t bytes[4 + 15 * IPU_XROW_SIZE];
    for (uint32_t t = 0; status == IPU_OK && t < FUZZ_TILES; t++) {
        uint32_t n = record(&r, bytes, 15, IPU_XROW_SIZE, raw);
        if (n)
            status = ipu_pkg_put_slot(b, t, xslot, bytes, n, NULL);
        if (status == IPU_OK)
            status = fuzz_add_areas(b, t, AREA, allocations);
    }
    if (status == IPU_OK && patches) {
        uint32_t n = record(&r, bytes, 7, IPU_PATCH_SIZE, raw);
        if (n)
            status = ipu_pkg_put_slot(b, 0, pslot, bytes, n, NULL);
    }
    if (status == IPU_OK && (count > 1 || patches))
        status = ipu_pkg_emit(b, 0, IPU_OP_REPEAT, count, 1, pslot);
    if (status == IPU_OK)
        status = ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, xslot, 0);
    return fuzz_finish_package(b, status, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_build_and_run(data, size, build); }
