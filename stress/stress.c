/* stress.c: builds the exchange-stress package.  For every case each tile
 * sends one window of W words (64-bit words for the paired pattern) per Repeat
 * iteration to its receivers; a greedy slot scheduler keeps every send and
 * receive port (both ports of a supertile pair for paired transfers) free of
 * overlaps.  Per iteration, sources move by a table-backed patch of the send
 * row (or by advancing OUTGOING_BASE with a progression patch of a SET_BASE
 * row) and destinations by progression patches of the receive rows.  After
 * the loop, copies stage the destinations in the aperture and a host output
 * phase reads them back; the expected bytes are recorded in the package.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "package/package.h"
#include "stress/stress.h"

#define MAX_RECEIVERS 3

typedef struct stress_case {
    const char *pattern; /* unicast, multicast, paired, loopback, reset */
    int interleaved;
    int base;
    uint32_t index;
    uint32_t offsets[MAX_RECEIVERS]; /* receiver r = (t + offset) mod T */
    uint32_t receivers;
    uint32_t width; /* bytes per word: 4, or 8 when paired */
    char name[64];
} stress_case;

typedef struct stress {
    ipu_ctx *ctx;
    ipu_pkg_builder *b;
    const ipu_profile *p;
    uint32_t tiles, iterations, words;
    uint32_t src_standard, src_interleaved, dst_base, stride_per_case;
    uint64_t *send_busy, *recv_busy; /* slot bitmasks per tile port */
    uint32_t *slot_of;               /* per sending tile */
    uint64_t words_checked;
    int skip_reset; /* injected: the loop leaves OUTGOING_BASE set after its phase */
    size_t cases_emitted; /* compiler ops added: one per case */
} stress;

uint32_t ipu_stress_payload(uint32_t case_index, uint32_t tile, uint32_t iteration, uint32_t k)
{
    uint32_t x = ((case_index * 1000003u + tile) * 1000003u + iteration) * 1000003u + k;
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

static uint32_t source_address(const stress *st, const stress_case *c, uint32_t iteration)
{
    uint32_t base = c->interleaved ? st->src_interleaved : st->src_standard;
    return base + c->index * st->stride_per_case + iteration * st->words * c->width;
}

static uint32_t window_bytes(const stress *st, const stress_case *c) { return st->words * c->width; }

/* The reset probe runs once; every other case loops over the iterations. */
static int is_looped(const stress_case *c) { return strcmp(c->pattern, "reset") != 0; }

static uint32_t case_iterations(const stress *st, const stress_case *c)
{
    return is_looped(c) ? st->iterations : 1;
}

/* Greedy slots: each sender gets the first slot free on all its ports. */
static ipu_status schedule(stress *st, const stress_case *c)
{
    uint32_t T = st->tiles;
    memset(st->send_busy, 0, T * sizeof *st->send_busy);
    memset(st->recv_busy, 0, T * sizeof *st->recv_busy);
    int paired = c->width == 8;
    for (uint32_t t = 0; t < T; t++) {
        uint64_t busy = st->send_busy[t] | (paired ? st->send_busy[t ^ 1u] : 0);
        for (uint32_t j = 0; j < c->receivers; j++) {
            uint32_t r = (t + c->offsets[j]) % T;
            busy |= st->recv_busy[r] | (paired ? st->recv_busy[r ^ 1u] : 0);
        }
        if (busy == ~0ull)
            return IPU_FAIL(st->ctx, IPU_ERR_INTERNAL, "stress scheduler ran out of slots");
        uint32_t slot = (uint32_t)__builtin_ctzll(~busy);
        st->slot_of[t] = slot;
        st->send_busy[t] |= 1ull << slot;
        if (paired)
            st->send_busy[t ^ 1u] |= 1ull << slot;
        for (uint32_t j = 0; j < c->receivers; j++) {
            uint32_t r = (t + c->offsets[j]) % T;
            st->recv_busy[r] |= 1ull << slot;
            if (paired)
                st->recv_busy[r ^ 1u] |= 1ull << slot;
        }
    }
    return IPU_OK;
}

static void put_row(uint8_t *row, uint32_t op, uint32_t flags, uint32_t peer, uint32_t cycle,
                    uint32_t words, uint32_t address)
{
    ipu_store_u32(row, op | flags << 8 | peer << 16);
    ipu_store_u32(row + 4, cycle);
    ipu_store_u32(row + 8, words);
    ipu_store_u32(row + 12, address);
}

static void put_patch(uint8_t *entry, uint32_t kind, uint32_t target, uint32_t a, uint32_t b)
{
    ipu_store_u32(entry, kind);
    ipu_store_u32(entry + 4, target);
    ipu_store_u32(entry + 8, a);
    ipu_store_u32(entry + 12, b);
}

/* Per tile: the exchange table and the patch list of the case's loop. */
static ipu_status emit_loop_tables(stress *st, const stress_case *c, uint32_t exchange_slot,
                                   uint32_t patch_slot, int looped)
{
    uint32_t T = st->tiles, L = st->p->exchange_latency, W = st->words;
    uint32_t flags = c->width == 8 ? IPU_XFLAG_PAIRED : 0;
    uint8_t table[4 + (3 + MAX_RECEIVERS) * IPU_XROW_SIZE];
    uint8_t patches[4 + (1 + MAX_RECEIVERS) * IPU_PATCH_SIZE];
    uint32_t *sources = ipu_malloc(st->ctx, st->iterations * sizeof *sources);
    if (!sources)
        return IPU_NO_MEMORY(st->ctx);
    ipu_status status = IPU_OK;
    for (uint32_t t = 0; t < T && status == IPU_OK; t++) {
        uint32_t rows = 0, send_row, base_row = 0;
        uint8_t *r = table + 4;
        if (c->base && looped) {
            /* The loop sets OUTGOING_BASE (patched per iteration) and resets it
             * at its end (a phase must); the probe after it reads absolute
             * sources through relative rows. */
            base_row = rows++;
            put_row(r + IPU_XROW_SIZE * base_row, IPU_XROW_SET_BASE, 0, 0, 0, 0, source_address(st, c, 0));
        }
        send_row = rows++;
        put_row(r + IPU_XROW_SIZE * send_row, IPU_XROW_SEND, flags | (c->base ? IPU_XFLAG_RELATIVE : 0),
                0, st->slot_of[t] * W, W,
                c->base && looped ? 0 : source_address(st, c, 0));
        uint32_t first_recv = rows;
        for (uint32_t j = 0; j < c->receivers; j++) {
            uint32_t sender = (t + T - c->offsets[j] % T) % T;
            put_row(r + IPU_XROW_SIZE * rows++, IPU_XROW_RECV, flags, sender,
                    st->slot_of[sender] * W + L, W, st->dst_base + j * W * c->width);
        }
        if (c->base && looped && !st->skip_reset)
            put_row(r + IPU_XROW_SIZE * rows++, IPU_XROW_RESET_BASE, 0, 0, 0, 0, 0);
        ipu_store_u32(table, rows);
        uint32_t table_address;
        status = ipu_pkg_put_slot(st->b, t, exchange_slot, table, 4 + rows * IPU_XROW_SIZE,
                                  &table_address);
        if (status != IPU_OK || !looped)
            continue;
        /* Patches: the source per iteration, then each receive's destination. */
        uint32_t count = 0;
        uint8_t *e = patches + 4;
        uint32_t row_word3 = table_address + 4 + 12;
        if (c->base) {
            put_patch(e + IPU_PATCH_SIZE * count++, IPU_PATCH_PROGRESSION,
                      row_word3 + base_row * IPU_XROW_SIZE, source_address(st, c, 0),
                      window_bytes(st, c));
        } else {
            for (uint32_t it = 0; it < st->iterations; it++)
                ipu_store_u32((uint8_t *)&sources[it], source_address(st, c, it));
            uint32_t sources_address;
            status = ipu_pkg_put(st->b, t, sources, st->iterations * 4, &sources_address);
            put_patch(e + IPU_PATCH_SIZE * count++, IPU_PATCH_TABLE,
                      row_word3 + send_row * IPU_XROW_SIZE, sources_address, st->iterations);
        }
        for (uint32_t j = 0; j < c->receivers; j++)
            put_patch(e + IPU_PATCH_SIZE * count++, IPU_PATCH_PROGRESSION,
                      row_word3 + (first_recv + j) * IPU_XROW_SIZE, st->dst_base + j * W * c->width,
                      c->receivers * window_bytes(st, c));
        ipu_store_u32(patches, count);
        if (status == IPU_OK)
            status = ipu_pkg_put_slot(st->b, t, patch_slot, patches, 4 + count * IPU_PATCH_SIZE, NULL);
    }
    free(sources);
    return status;
}

/* Per tile: source data, the copy to the aperture and the host output entry. */
static ipu_status emit_readback(stress *st, const stress_case *c, uint32_t copy_slot,
                                uint32_t host_slot, uint32_t stream, uint8_t *expected)
{
    uint32_t T = st->tiles, iterations = case_iterations(st, c);
    uint32_t window = window_bytes(st, c), bytes = iterations * c->receivers * window;
    uint32_t payload_words = window / 4;
    uint32_t *words = ipu_malloc(st->ctx, (size_t)iterations * window);
    if (!words)
        return IPU_NO_MEMORY(st->ctx);
    ipu_status status = IPU_OK;
    char name[96];
    for (uint32_t t = 0; t < T && status == IPU_OK; t++) {
        for (uint32_t it = 0; it < iterations; it++)
            for (uint32_t k = 0; k < payload_words; k++)
                ipu_store_u32((uint8_t *)&words[it * payload_words + k],
                              ipu_stress_payload(c->index, t, it, k));
        status = ipu_pkg_add_data(st->b, t, source_address(st, c, 0), words, iterations * window);
        snprintf(name, sizeof name, "stress/%s/sources", c->name);
        if (status == IPU_OK)
            status = ipu_pkg_add_alloc(st->b, t, source_address(st, c, 0), iterations * window, name);
        /* Expected: destination [iteration][receiver j][word] from sender t - offset_j. */
        uint8_t *out = expected + (size_t)t * bytes;
        for (uint32_t it = 0; it < iterations; it++)
            for (uint32_t j = 0; j < c->receivers; j++) {
                uint32_t sender = (t + T - c->offsets[j] % T) % T;
                for (uint32_t k = 0; k < payload_words; k++)
                    ipu_store_u32(out + (size_t)(it * c->receivers + j) * window + 4 * k,
                                  ipu_stress_payload(c->index, sender, it, k));
            }
        uint8_t list[4 + 4 + 12];
        ipu_store_u32(list, 1);
        ipu_store_u32(list + 4, IPU_K_COPY | 3u << 16);
        ipu_store_u32(list + 8, st->dst_base);
        ipu_store_u32(list + 12, st->p->aperture_base);
        ipu_store_u32(list + 16, bytes);
        if (status == IPU_OK)
            status = ipu_pkg_put_slot(st->b, t, copy_slot, list, sizeof list, NULL);
        /* One host entry of one row: stream, offset, address, row bytes, rows,
         * stream stride, tile stride, reserved. */
        uint8_t host[4 + IPU_HOST_ENTRY_SIZE];
        memset(host, 0, sizeof host);
        ipu_store_u32(host, 1);
        ipu_store_u32(host + 4, stream);
        ipu_store_u32(host + 8, t * bytes);
        ipu_store_u32(host + 12, st->p->aperture_base);
        ipu_store_u32(host + 16, bytes);
        ipu_store_u32(host + 20, 1);
        ipu_store_u32(host + 24, bytes);
        ipu_store_u32(host + 28, bytes);
        if (status == IPU_OK)
            status = ipu_pkg_put_slot(st->b, t, host_slot, host, sizeof host, NULL);
    }
    st->words_checked += (uint64_t)T * bytes / 4;
    free(words);
    return status;
}

static ipu_status emit_case(stress *st, const stress_case *c, json_t *cases)
{
    uint32_t T = st->tiles;
    int looped = is_looped(c);
    uint32_t iterations = case_iterations(st, c);
    uint64_t bytes = (uint64_t)T * iterations * c->receivers * window_bytes(st, c);
    uint32_t stream;
    IPU_TRY(schedule(st, c));
    IPU_TRY(ipu_pkg_add_stream(st->b, c->name, IPU_STREAM_OUTPUT, bytes, &stream));
    uint32_t exchange_slot = ipu_pkg_new_slot(st->b), patch_slot = ipu_pkg_new_slot(st->b);
    uint32_t copy_slot = ipu_pkg_new_slot(st->b), host_slot = ipu_pkg_new_slot(st->b);
    IPU_TRY(emit_loop_tables(st, c, exchange_slot, patch_slot, looped));
    uint8_t *expected = ipu_malloc(st->ctx, bytes);
    if (!expected)
        return IPU_NO_MEMORY(st->ctx);
    ipu_status status = emit_readback(st, c, copy_slot, host_slot, stream, expected);
    if (status == IPU_OK)
        status = ipu_pkg_add_record(st->b, IPU_RECORD_EXPECTED, stream, 0, expected, bytes);
    free(expected);
    IPU_TRY(status);
    /* Each case is one op of the program, so a fault names the case. */
    uint32_t op = (uint32_t)st->cases_emitted++;
    IPU_TRY(ipu_pkg_add_compiler_op(st->b, "exchange-stress", c->name));
    ipu_pkg_set_origin(st->b, op, op);
    if (looped)
        IPU_TRY(ipu_pkg_emit(st->b, 0, IPU_OP_REPEAT, st->iterations, 1, patch_slot));
    IPU_TRY(ipu_pkg_emit(st->b, 0, IPU_OP_STEP, IPU_NO_SLOT, exchange_slot, 0));
    IPU_TRY(ipu_pkg_emit(st->b, 0, IPU_OP_STEP, copy_slot, IPU_NO_SLOT, 0));
    IPU_TRY(ipu_pkg_emit(st->b, 0, IPU_OP_HOST_OUT, host_slot, 0, 0));
    json_t *offsets = json_array();
    for (uint32_t j = 0; j < c->receivers; j++)
        json_array_append_new(offsets, json_integer(c->offsets[j]));
    json_array_append_new(
        cases, json_pack("{s:s, s:s, s:s, s:b, s:I, s:o, s:I, s:I, s:I}", "name", c->name, "pattern",
                         c->pattern, "sources", c->interleaved ? "interleaved" : "standard", "base",
                         c->base, "case_index", (json_int_t)c->index, "offsets", offsets,
                         "word_bytes", (json_int_t)c->width, "iterations", (json_int_t)iterations,
                         "words", (json_int_t)st->words));
    return IPU_OK;
}

static void make_case(stress_case *c, const char *pattern, int interleaved, int base, uint32_t index,
                      uint32_t tiles)
{
    memset(c, 0, sizeof *c);
    c->pattern = pattern;
    c->interleaved = interleaved;
    c->base = base;
    c->index = index;
    c->width = 4;
    if (strcmp(pattern, "unicast") == 0 || strcmp(pattern, "reset") == 0) {
        uint32_t shift = (tiles / 2 + 1) % tiles;
        c->offsets[0] = shift ? shift : 1;
        c->receivers = 1;
    } else if (strcmp(pattern, "multicast") == 0) {
        c->offsets[0] = 1, c->offsets[1] = 2, c->offsets[2] = 3;
        c->receivers = 3;
    } else if (strcmp(pattern, "paired") == 0) {
        c->offsets[0] = 2, c->offsets[1] = 4; /* distinct supertile pairs */
        c->receivers = 2;
        c->width = 8;
    } else { /* loopback: the sender is one of its own receivers */
        c->offsets[0] = 0, c->offsets[1] = 1, c->offsets[2] = 2;
        c->receivers = 3;
    }
    if (strcmp(pattern, "reset") == 0)
        snprintf(c->name, sizeof c->name, "base-reset");
    else
        snprintf(c->name, sizeof c->name, "%s%s-%s", base ? "base-" : "", pattern,
                 interleaved ? "interleaved" : "standard");
}

static ipu_status parse_options(ipu_ctx *ctx, const char *options_json, ipu_profile *profile,
                                char *pattern, char *sources, uint32_t *iterations, uint32_t *words,
                                int *skip_reset)
{
    json_error_t error;
    json_t *o = json_loads(options_json, 0, &error);
    if (!json_is_object(o)) {
        json_decref(o);
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "stress options: invalid JSON: %s", error.text);
    }
    ipu_status status = IPU_OK;
    json_t *prof = json_object_get(o, "profile");
    const char *pat = json_string_value(json_object_get(o, "pattern"));
    const char *src = json_string_value(json_object_get(o, "sources"));
    json_t *it = json_object_get(o, "iterations"), *w = json_object_get(o, "words");
    if (!prof)
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "stress options: 'profile' is missing");
    else
        status = ipu_profile_from_json(ctx, prof, 0, profile);
    const char *patterns[] = {"unicast", "multicast", "paired", "loopback", "base", "all"};
    int known = 0;
    for (size_t i = 0; pat && i < 6; i++)
        known |= strcmp(pat, patterns[i]) == 0;
    if (status == IPU_OK && !known)
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "--exchange-pattern: expected unicast, multicast, paired, loopback, base "
                          "or all, got '%s'",
                          pat ? pat : "(none)");
    if (status == IPU_OK && (!src || (strcmp(src, "standard") && strcmp(src, "interleaved") &&
                                      strcmp(src, "both"))))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "--sources: expected standard, interleaved or both, got '%s'",
                          src ? src : "(none)");
    if (status == IPU_OK && (!json_is_integer(it) || json_integer_value(it) < 1 ||
                             json_integer_value(it) > 64))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "--iterations: expected 1..64");
    if (status == IPU_OK && w && (!json_is_integer(w) || json_integer_value(w) < 1 ||
                                  json_integer_value(w) > 64))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "stress option 'words': expected 1..64");
    if (status == IPU_OK && (profile->tiles < 4 || profile->tiles % 2))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "exchange-stress needs an even number of tiles, at least 4 (got %u)",
                          profile->tiles);
    const char *inject = json_string_value(json_object_get(o, "inject"));
    if (status == IPU_OK && inject && strcmp(inject, "outgoing-base-not-reset"))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "--inject: exchange-stress takes only outgoing-base-not-reset, got '%s'", inject);
    *skip_reset = inject != NULL;
    if (status == IPU_OK) {
        strcpy(pattern, pat);
        strcpy(sources, src);
        *iterations = (uint32_t)json_integer_value(it);
        *words = w ? (uint32_t)json_integer_value(w) : 16;
    }
    json_decref(o);
    return status;
}

static ipu_status build_cases(stress *st, const char *pattern, const char *sources, json_t *cases)
{
    const char *patterns[] = {"unicast", "multicast", "paired", "loopback"};
    int all = strcmp(pattern, "all") == 0, only_base = strcmp(pattern, "base") == 0;
    uint32_t index = 0;
    stress_case c;
    for (int base = 0; base < 2; base++) {
        if ((base && !all && !only_base) || (!base && only_base))
            continue;
        for (int p = 0; p < 4; p++) {
            if (!all && !only_base && strcmp(pattern, patterns[p]))
                continue;
            for (int interleaved = 0; interleaved < 2; interleaved++) {
                if ((interleaved && !strcmp(sources, "standard")) ||
                    (!interleaved && !strcmp(sources, "interleaved")))
                    continue;
                make_case(&c, patterns[p], interleaved, base, index++, st->tiles);
                IPU_TRY(emit_case(st, &c, cases));
            }
        }
        if (base) {
            make_case(&c, "reset", 0, 1, index++, st->tiles);
            IPU_TRY(emit_case(st, &c, cases));
        }
    }
    return IPU_OK;
}

ipu_status ipu_stress_build(ipu_ctx *ctx, const char *options_json, ipu_package **out)
{
    if (!options_json || !out)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_stress_build: NULL argument");
    ipu_profile profile;
    char pattern[16], sources[16];
    stress st = {0};
    IPU_TRY(parse_options(ctx, options_json, &profile, pattern, sources, &st.iterations, &st.words,
                          &st.skip_reset));
    st.ctx = ctx;
    st.p = &profile;
    st.tiles = profile.tiles;
    /* Layout: code after the runtime state, descriptors after the aperture,
     * standard sources in region 0 above them, interleaved sources and the
     * destinations in region 1. */
    uint32_t code_base = (profile.sram_base + profile.runtime_state_bytes + 63) & ~63u;
    uint32_t desc_base = profile.aperture_end, desc_limit = desc_base + 0x8000;
    st.stride_per_case = st.iterations * st.words * 8;
    st.src_standard = desc_limit;
    st.src_interleaved = profile.region1_base;
    st.dst_base = profile.region1_base + 17 * st.stride_per_case;
    st.dst_base = (st.dst_base + 15) & ~15u;
    if (st.src_standard + 17 * st.stride_per_case > profile.region1_base ||
        st.dst_base + st.iterations * MAX_RECEIVERS * st.words * 8 > ipu_profile_access_end(&profile) ||
        st.iterations * MAX_RECEIVERS * st.words * 8 > profile.aperture_end - profile.aperture_base)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "--iterations %u with %u words per window does not fit the tile's memory",
                        st.iterations, st.words);
    st.send_busy = ipu_calloc(ctx, st.tiles, sizeof *st.send_busy);
    st.recv_busy = ipu_calloc(ctx, st.tiles, sizeof *st.recv_busy);
    st.slot_of = ipu_calloc(ctx, st.tiles, sizeof *st.slot_of);
    json_t *cases = json_array();
    ipu_status status = st.send_busy && st.recv_busy && st.slot_of && cases ? IPU_OK : IPU_NO_MEMORY(ctx);
    if (status == IPU_OK)
        status = ipu_pkg_builder_create(ctx, &profile, code_base, desc_base, desc_limit, &st.b);
    for (uint32_t t = 0; status == IPU_OK && t < st.tiles; t++) {
        status = ipu_pkg_add_code(st.b, t, IPU_K_COPY);
        if (status == IPU_OK)
            status = ipu_pkg_add_alloc(st.b, t, st.dst_base,
                                       st.iterations * MAX_RECEIVERS * st.words * 8,
                                       "stress/destinations");
        if (status == IPU_OK)
            status = ipu_pkg_add_alloc(st.b, t, profile.aperture_base,
                                       profile.aperture_end - profile.aperture_base,
                                       "stress/aperture-staging");
    }
    if (status == IPU_OK)
        status = build_cases(&st, pattern, sources, cases);
    if (status == IPU_OK) {
        ipu_pkg_set_meta(st.b, json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:I, s:O}", "workload",
                                         "exchange-stress", "pattern", pattern, "sources", sources,
                                         "iterations", (json_int_t)st.iterations, "words",
                                         (json_int_t)st.words, "check", "exact", "words_checked",
                                         (json_int_t)st.words_checked, "cases", cases));
        status = ipu_pkg_build(st.b, out);
        st.b = NULL;
    }
    ipu_pkg_builder_free(st.b);
    json_decref(cases);
    free(st.send_busy);
    free(st.recv_busy);
    free(st.slot_of);
    return status;
}
