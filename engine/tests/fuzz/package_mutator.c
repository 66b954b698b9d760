/* package_mutator.c: the package target's structure-aware mutator
 * (libFuzzer's LLVMFuzzerCustomMutator, built only with libFuzzer).  A
 * package is a header, a section table and sections of fixed-size records
 * (package/format.h); a byte mutation almost always breaks the header's
 * total size or CRC-32, so the loader refuses it before its later checks.
 * This mutator reads the section table and makes one edit where the
 * format's meaning is:
 *   - a record field (a u32 of one record of a record section) set to a
 *     value that tends to break a bound: 0, 1, -1, the field's own value
 *     plus or minus one, a power of two, the same field of another record;
 *   - a record duplicated, removed or moved over another;
 *   - bytes of one section mutated by libFuzzer (its text, strings or data;
 *     the section may grow or shrink);
 *   - a header field (tiles, invocations, slots) set likewise;
 * then writes the package again with each section 8-byte aligned, the
 * section table and total size updated, the CRC-32 recomputed and, when the
 * profile section was the one edited, the profile digest and tile count made
 * those of the profile section (when it parses; a header field edit is
 * kept).  One mutation in 16 is a plain libFuzzer byte mutation left
 * unrepaired, so the header's own checks keep being fuzzed; an input whose
 * section table cannot be read gets a byte mutation and, when that makes the
 * table readable, a repaired header.
 */
#include <string.h>
#include <zlib.h>

#include "fuzz.h"
#include "package/package.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

#define MAX_SECTIONS 64u
/* Room a section mutated by libFuzzer may grow by. */
#define GROWTH 256u

typedef struct section {
    uint32_t type;
    uint64_t offset, length;
} section;

/* A small deterministic generator seeded by libFuzzer. */
static uint32_t next(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*state >> 33);
}

/* The record size of a section of fixed-size records (0: text or bytes). */
static uint32_t record_size(uint32_t type)
{
    switch (type) {
    case IPU_SEC_TILES: return 4;
    case IPU_SEC_SEGMENTS: return IPU_PKG_SEGMENT_SIZE;
    case IPU_SEC_ALLOCS: return IPU_PKG_ALLOC_SIZE;
    case IPU_SEC_INIT:
    case IPU_SEC_MAIN: return IPU_PKG_OP_SIZE;
    case IPU_SEC_STREAMS: return IPU_PKG_STREAM_SIZE;
    case IPU_SEC_RECORDS: return IPU_PKG_RECORD_SIZE;
    case IPU_SEC_COMPILER_OPS: return IPU_PKG_COMPILER_OP_SIZE;
    case IPU_SEC_CAPTURES: return IPU_PKG_CAPTURE_SIZE;
    default: return 0;
    }
}

/* The section table, when it lies inside the input; its entry count or 0. */
static uint32_t read_table(const uint8_t *data, size_t size, section *out)
{
    if (size < IPU_PKG_HEADER_SIZE || memcmp(data, IPU_PKG_MAGIC, 8))
        return 0;
    uint32_t count = ipu_load_u32(data + 28);
    if (count == 0 || count > MAX_SECTIONS || IPU_PKG_HEADER_SIZE + (uint64_t)count * IPU_PKG_SECTION_ENTRY_SIZE > size)
        return 0;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = data + IPU_PKG_HEADER_SIZE + i * IPU_PKG_SECTION_ENTRY_SIZE;
        out[i] = (section){ipu_load_u32(e), ipu_load_u64(e + 8), ipu_load_u64(e + 16)};
        if (out[i].offset > size || out[i].length > size - out[i].offset)
            return 0;
    }
    return count;
}

/* A value that tends to break a bound, for a field now holding value. */
static uint32_t breaking_value(uint64_t *rng, uint32_t value, uint32_t other)
{
    switch (next(rng) % 8) {
    case 0: return 0;
    case 1: return 1;
    case 2: return UINT32_MAX;
    case 3: return value + 1;
    case 4: return value - 1;
    case 5: return 1u << (next(rng) % 32);
    case 6: return other;
    default: return next(rng);
    }
}

/* Make the header's profile digest and tile count those of a profile
 * section, when it parses. */
static void fix_profile(uint8_t *data, const section *profile)
{
    char *text = fuzz_text(data + profile->offset, (size_t)profile->length);
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_profile p;
    if (text && ctx && ipu_profile_parse(ctx, text, 0, &p) == IPU_OK) {
        ipu_store_u64(data + 32, ipu_profile_digest(&p));
        ipu_store_u32(data + 40, p.tiles);
    }
    ipu_ctx_free(ctx);
    free(text);
}

/* The first profile section of a table of count entries, or NULL. */
static const section *profile_section(const section *sec, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        if (sec[i].type == IPU_SEC_PROFILE)
            return &sec[i];
    return NULL;
}

/* The header's total size and CRC-32 made right for size bytes. */
static void fix_frame(uint8_t *data, size_t size)
{
    if (size < IPU_PKG_HEADER_SIZE)
        return;
    ipu_store_u64(data + 16, size);
    uLong crc = crc32(0L, Z_NULL, 0);
    ipu_store_u32(data + 24, (uint32_t)crc32(crc, data + IPU_PKG_HEADER_SIZE, (uInt)(size - IPU_PKG_HEADER_SIZE)));
}

/* Edit a record section's bytes (of length *length, room for one more
 * record after them); returns 0 when there is no record to edit. */
static int edit_records(uint64_t *rng, uint8_t *bytes, uint64_t *length, uint32_t record)
{
    uint64_t records = *length / record;
    if (!records)
        return 0;
    uint64_t r = next(rng) % records, other = next(rng) % records;
    uint32_t field = (next(rng) % (record / 4)) * 4;
    switch (next(rng) % 8) {
    case 0: /* duplicate */
        memmove(bytes + (r + 1) * record, bytes + r * record, *length - r * record);
        *length += record;
        break;
    case 1: /* remove */
        memmove(bytes + r * record, bytes + (r + 1) * record, *length - (r + 1) * record);
        *length -= record;
        break;
    case 2: /* one record over another */
        memcpy(bytes + other * record, bytes + r * record, record);
        break;
    default: {
        uint8_t *at = bytes + r * record + field;
        ipu_store_u32(at, breaking_value(rng, ipu_load_u32(at), ipu_load_u32(bytes + other * record + field)));
    }
    }
    return 1;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    uint64_t rng = seed;
    section sec[MAX_SECTIONS];
    uint32_t count = read_table(data, size, sec);
    if (next(&rng) % 16 == 0)
        return LLVMFuzzerMutate(data, size, max_size);
    if (!count) {
        size = LLVMFuzzerMutate(data, size, max_size);
        if ((count = read_table(data, size, sec))) {
            const section *profile = profile_section(sec, count);
            if (profile)
                fix_profile(data, profile);
            fix_frame(data, size);
        }
        return size;
    }
    /* The package written again into out, with one section edited. */
    /* Sections may overlap in a mutated table: room for each, padded, plus
     * a grown section or one more record. */
    uint64_t table_end = IPU_PKG_HEADER_SIZE + (uint64_t)count * IPU_PKG_SECTION_ENTRY_SIZE, room = table_end + 8;
    for (uint32_t i = 0; i < count; i++)
        room += sec[i].length + 8;
    if (room > max_size + GROWTH)
        return LLVMFuzzerMutate(data, size, max_size);
    uint8_t *out = calloc(1, (size_t)room + GROWTH + IPU_PKG_ALLOC_SIZE);
    if (!out)
        return size;
    memcpy(out, data, table_end);
    uint32_t chosen = next(&rng) % count, action = next(&rng) % 8;
    uint64_t at = (table_end + 7) & ~7ull;
    for (uint32_t i = 0; i < count; i++) {
        uint8_t *bytes = out + at;
        uint64_t length = sec[i].length;
        memcpy(bytes, data + sec[i].offset, length);
        uint32_t record = record_size(sec[i].type);
        if (i == chosen && action == 0) {
            uint32_t fields[] = {40, 44, 48};
            uint8_t *field = out + fields[next(&rng) % 3];
            ipu_store_u32(field, breaking_value(&rng, ipu_load_u32(field), ipu_load_u32(field)));
        } else if (i == chosen && !(record && edit_records(&rng, bytes, &length, record))) {
            length = LLVMFuzzerMutate(bytes, (size_t)length, (size_t)length + GROWTH);
        }
        uint8_t *entry = out + IPU_PKG_HEADER_SIZE + i * IPU_PKG_SECTION_ENTRY_SIZE;
        ipu_store_u64(entry + 8, at);
        ipu_store_u64(entry + 16, length);
        sec[i].offset = at;
        sec[i].length = length;
        at = (at + length + 7) & ~7ull;
    }
    if (at > max_size) {
        free(out);
        return size;
    }
    if (action != 0 && sec[chosen].type == IPU_SEC_PROFILE && profile_section(sec, count) == &sec[chosen])
        fix_profile(out, &sec[chosen]);
    fix_frame(out, (size_t)at);
    memcpy(data, out, (size_t)at);
    free(out);
    return (size_t)at;
}
