/* test_exchange_schedule.c: the exchange scheduler and table encoder
 * (exchange/exchange.h) against checks written here.  Random phases on 16
 * and 64 tiles (unicast, multicast, loopback, tied lengths) are scheduled and
 * then (a) an occupancy checker marks every send and receive cycle of every
 * port and fails on a port used twice in one cycle, and recomputes the
 * horizon; (b) a brute-force reference scheduler (cycle bitmaps, longest
 * first, ties by index, earliest free start) must give exactly the same
 * cycles; (c) every tile's encoded table must hold exactly the rows the phase
 * implies (sends then receives, each by cycle, receive = send + L, words =
 * bytes / 4), each entry full, a continuation, a repeat or a run as
 * format.h's rules give it from the keys, and the measured size must be the
 * encoded one; (d) the tables run on the simulated device in a package whose
 * data segments hold random source bytes: every destination must equal its
 * source and the step's exchange cost must be horizon + 100.  A 1472-tile
 * phase (every tile multicasting 1 KiB to 8 others) gets (a), (c) and (d).
 * The compact modes get (a), (c) and (d), keys set to the addresses in
 * half the rounds, and never a larger table than the latency order; an
 * all-to-all gather in stream waves receives in address order with runs;
 * advancing sources are relocated by OUTGOING_BASE or by patches and read
 * the right member in a Repeat, and tables that keep the base fault.
 * Hand-made phases pin tight schedules (a permutation takes words + L) and
 * gap filling; every invalid input must give IPU_ERR_INVALID_ARGUMENT naming
 * the transfer and value, leaving cycles untouched.  Seed: IPU_TEST_SEED or
 * the clock, printed on failure.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange.h"
#include "ipu/ipu.h"
#include "package/package.h"

#include "support_packages.h"
#include "support_seed.h"

#define OVERHEAD 100u

/* A phase with its arrays and every transfer's source bytes. */
typedef struct tphase {
    ipu_xphase ph;
    uint8_t *data;    /* source bytes of all transfers, back to back */
    size_t *data_at;  /* per transfer: offset into data */
} tphase;

static void tphase_free(tphase *t)
{
    free(t->ph.xfers);
    free(t->ph.dsts);
    free(t->data);
    free(t->data_at);
    memset(t, 0, sizeof *t);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    assert_non_null(p);
    return p;
}

/* Random transfers: unicast, unicast to itself, multicast with and without
 * the sender; half of the lengths come from {8, 16} words so ties occur.
 * Destination ranges are laid out in reverse transfer order. */
static void gen_phase(tphase *t, uint32_t tiles, size_t count, uint32_t max_dsts,
                      uint32_t max_words)
{
    memset(t, 0, sizeof *t);
    ipu_xfer *x = xcalloc(count, sizeof *x);
    uint32_t *list = xcalloc(count * max_dsts, sizeof *list), *perm = xcalloc(tiles, 4);
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t src = tseed_below(tiles), kind = tseed_below(100), n;
        uint32_t words = tseed_below(2) ? 8u << tseed_below(2) : 1 + tseed_below(max_words);
        /* kind: < 40 unicast, 40..54 to itself, 55..84 multicast, 85.. multicast
         * including the sender. */
        n = kind < 55 ? 1 : 2 + tseed_below(max_dsts - 1);
        /* n distinct tiles other than src: a partial shuffle with src last. */
        for (uint32_t k = 0; k < tiles; k++)
            perm[k] = k;
        perm[src] = tiles - 1;
        perm[tiles - 1] = src;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t j = k + tseed_below(tiles - 1 - k), v = perm[j];
            perm[j] = perm[k];
            perm[k] = v;
            list[i * max_dsts + k] = v;
        }
        if ((kind >= 40 && kind < 55) || kind >= 85) /* loopback */
            list[i * max_dsts + tseed_below(n)] = src;
        x[i] = (ipu_xfer){src, 0, 4 * words, 0, n, 0xDEADBEEFu, 0, 0};
        total += n;
    }
    ipu_xfer_dst *d = xcalloc(total, sizeof *d);
    size_t at = total;
    for (size_t i = 0; i < count; i++) {
        at -= x[i].dst_count;
        x[i].first_dst = (uint32_t)at;
        for (uint32_t k = 0; k < x[i].dst_count; k++)
            d[at + k].tile = list[i * max_dsts + k];
    }
    free(list);
    free(perm);
    t->ph = (ipu_xphase){x, count, d, total, 0, 0, 0};
}

/* Source windows in region 0, destination windows in region 1, per tile
 * back to back; random source bytes. */
static void assign_addresses(tphase *t, const ipu_profile *p)
{
    uint32_t *src_next = xcalloc(p->tiles, 4), *dst_next = xcalloc(p->tiles, 4);
    for (uint32_t k = 0; k < p->tiles; k++) {
        src_next[k] = tpkg_data0(p);
        dst_next[k] = p->region1_base;
    }
    size_t bytes = 0;
    t->data_at = xcalloc(t->ph.count, sizeof *t->data_at);
    for (size_t i = 0; i < t->ph.count; i++) {
        ipu_xfer *x = &t->ph.xfers[i];
        x->src_address = src_next[x->src_tile];
        src_next[x->src_tile] += x->bytes;
        assert_true(src_next[x->src_tile] <= p->region1_base);
        for (uint32_t k = 0; k < x->dst_count; k++) {
            ipu_xfer_dst *d = &t->ph.dsts[x->first_dst + k];
            d->address = dst_next[d->tile];
            dst_next[d->tile] += x->bytes;
            assert_true(dst_next[d->tile] <= ipu_profile_access_end(p));
        }
        t->data_at[i] = bytes;
        bytes += x->bytes;
    }
    t->data = xcalloc(bytes, 1);
    for (size_t i = 0; i < bytes; i++)
        t->data[i] = (uint8_t)tseed_rnd();
    free(src_next);
    free(dst_next);
}

static void key_by_address(ipu_xphase *ph)
{
    for (size_t i = 0; i < ph->count; i++)
        ph->xfers[i].src_key = ph->xfers[i].src_address;
    for (size_t d = 0; d < ph->dst_total; d++)
        ph->dsts[d].key = ph->dsts[d].address;
}

/* (a) No port used twice in a cycle (actual receive times), and the horizon. */
static void check_ports(const ipu_profile *p, const ipu_xphase *ph)
{
    uint64_t horizon = 0, L = p->exchange_latency;
    for (size_t i = 0; i < ph->count; i++) {
        uint64_t end = (uint64_t)ph->xfers[i].cycle + L + ph->xfers[i].bytes / 4;
        horizon = end > horizon ? end : horizon;
    }
    if (ph->horizon != horizon)
        TSEED_FAIL("horizon %llu, the transfers end at %llu", (unsigned long long)ph->horizon,
                   (unsigned long long)horizon);
    uint8_t *used = xcalloc(2 * (size_t)p->tiles * horizon, 1); /* [port][cycle] */
    for (size_t i = 0; i < ph->count; i++) {
        const ipu_xfer *x = &ph->xfers[i];
        for (uint32_t k = 0; k <= x->dst_count; k++) {
            int send = k == x->dst_count;
            uint32_t tile = send ? x->src_tile : ph->dsts[x->first_dst + k].tile;
            uint64_t first = x->cycle + (send ? 0 : L);
            uint8_t *row = used + ((size_t)tile * 2 + !send) * horizon;
            for (uint64_t c = first; c < first + x->bytes / 4; c++)
                if (row[c]++)
                    TSEED_FAIL("tile %u's %s port is used twice at cycle %llu (transfer %zu)",
                               tile, send ? "send" : "receive", (unsigned long long)c, i);
        }
    }
    free(used);
}

/* (b) Brute force: bitmaps of actual port cycles, longest first (a stable
 * insertion sort keeps index order among ties), earliest free start. */
static void check_reference(const ipu_profile *p, const ipu_xphase *ph)
{
    size_t n = ph->count, *order = xcalloc(n, sizeof *order);
    uint64_t total = 0, L = p->exchange_latency;
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        for (; j > 0 && ph->xfers[order[j - 1]].bytes < ph->xfers[i].bytes; j--)
            order[j] = order[j - 1];
        order[j] = i;
        total += ph->xfers[i].bytes / 4;
    }
    /* Earlier windows are at least as long, so gaps too short to use are
     * shorter than the windows around them: no start passes 2 * total. */
    size_t span = (size_t)(2 * total + L + 1);
    uint8_t *busy = xcalloc(2 * (size_t)p->tiles * span, 1);
    for (size_t o = 0; o < n; o++) {
        const ipu_xfer *x = &ph->xfers[order[o]];
        uint64_t w = x->bytes / 4, c = 0;
        for (uint32_t k = 0; k <= x->dst_count; k++) { /* restart at k = 0 on a clash */
            int send = k == x->dst_count;
            uint32_t tile = send ? x->src_tile : ph->dsts[x->first_dst + k].tile;
            const uint8_t *row = busy + ((size_t)tile * 2 + !send) * span + (send ? 0 : L);
            assert_true(c + w + L < span);
            for (uint64_t j = 0; j < w; j++)
                if (row[c + j]) {
                    c += j + 1;
                    k = (uint32_t)-1;
                    break;
                }
        }
        for (uint32_t k = 0; k <= x->dst_count; k++) {
            int send = k == x->dst_count;
            uint32_t tile = send ? x->src_tile : ph->dsts[x->first_dst + k].tile;
            memset(busy + ((size_t)tile * 2 + !send) * span + (send ? 0 : L) + c, 1, w);
        }
        if (x->cycle != c)
            TSEED_FAIL("transfer %zu (%u bytes, %u destinations): cycle %u, earliest fit is %llu",
                       order[o], x->bytes, x->dst_count, x->cycle, (unsigned long long)c);
    }
    free(busy);
    free(order);
}

typedef struct trow {
    uint32_t w0, cycle, words, address;
    uint64_t key;
} trow;

static int trow_order(const void *a, const void *b)
{
    const trow *x = a, *y = b;
    if ((x->w0 & 0xFF) != (y->w0 & 0xFF))
        return (x->w0 & 0xFF) < (y->w0 & 0xFF) ? -1 : 1;
    return (x->cycle > y->cycle) - (x->cycle < y->cycle);
}

/* The bytes row r takes after row r - 1 of the same op, from format.h's
 * definitions: 16 (full) unless it starts where r - 1 ends or ends where it
 * starts, by key, at or after its end by at most 65,535 cycles with at most
 * 65,535 words: then 4 when it has r - 1's words and a gap of at most 255,
 * else 8. */
static uint32_t expected_size(const trow *want, size_t r)
{
    if (r == 0 || (want[r].w0 & 0xFF) != (want[r - 1].w0 & 0xFF) ||
        (want[r].key != want[r - 1].key + 4ull * want[r - 1].words &&
         want[r].key + 4ull * want[r].words != want[r - 1].key))
        return 16;
    uint64_t end = (uint64_t)want[r - 1].cycle + want[r - 1].words;
    if (want[r].cycle < end || want[r].cycle - end > 0xFFFF || want[r].words > 0xFFFF)
        return 16;
    return want[r].words == want[r - 1].words && want[r].cycle - end <= 0xFF ? 4 : 8;
}

/* Rows r and r - 1 as format.h's run entry asks: r repeats r - 1 (4
 * bytes), its gap and order are gap and order, a receive's peer one on. */
static int runs_on(const trow *want, size_t r, uint32_t gap, int down)
{
    if (expected_size(want, r) != 4)
        return 0;
    int is_down = want[r].key + 4ull * want[r].words == want[r - 1].key;
    uint32_t peer_step = (want[r].w0 & 0xFF) == IPU_XROW_RECV ? 1u << 16 : 0;
    return want[r].cycle - (want[r - 1].cycle + want[r - 1].words) == gap && is_down == down &&
           want[r].w0 == want[r - 1].w0 + peer_step;
}

/* The rows of the entry starting at row r: a run (two or more rows that
 * each run on from the row before with row r's gap and order) or 1. */
static size_t entry_rows(const trow *want, size_t r, size_t n)
{
    if (r == 0 || expected_size(want, r) != 4)
        return 1;
    uint32_t gap = want[r].cycle - (want[r - 1].cycle + want[r - 1].words);
    int down = want[r].key + 4ull * want[r].words == want[r - 1].key;
    if (!runs_on(want, r, gap, down))
        return 1;
    size_t count = 1;
    while (r + count < n && count < 0xFFFF && runs_on(want, r + count, gap, down))
        count++;
    return count >= 2 ? count : 1;
}

/* Decode the entry at 'at' after got[r - 1] (format.h) into rows got[r ..];
 * returns its bytes and sets *rows. */
static uint32_t decode_entry(const uint8_t *at, trow *got, size_t r, size_t *rows)
{
    uint32_t w0 = ipu_load_u32(at), flags = (w0 >> 8) & 0xFF;
    uint32_t kind = flags & (IPU_XFLAG_CONTINUE | IPU_XFLAG_REPEAT | IPU_XFLAG_RUN);
    *rows = 1;
    if (!kind) {
        got[r] = (trow){w0, ipu_load_u32(at + 4), ipu_load_u32(at + 8), ipu_load_u32(at + 12), 0};
        return 16;
    }
    assert_true(r > 0 && (kind & (kind - 1)) == 0);
    size_t count = kind == IPU_XFLAG_RUN ? w0 >> 16 : 1;
    for (size_t k = 0; k < count; k++) {
        const trow *prev = &got[r + k - 1];
        uint32_t gap = kind == IPU_XFLAG_CONTINUE ? (ipu_load_u32(at + 4) & 0xFFFF) : (w0 & 0xFF);
        uint32_t words = kind == IPU_XFLAG_CONTINUE ? ipu_load_u32(at + 4) >> 16 : prev->words;
        uint32_t op = prev->w0 & 0xFF, peer = kind == IPU_XFLAG_RUN ? (prev->w0 >> 16) + (op == IPU_XROW_RECV)
                                                                     : w0 >> 16;
        uint32_t address = flags & IPU_XFLAG_DESCEND ? prev->address - 4 * words : prev->address + 4 * prev->words;
        got[r + k] = (trow){op | peer << 16, prev->cycle + prev->words + gap, words, address, 0};
    }
    *rows = count;
    return kind == IPU_XFLAG_CONTINUE ? 8 : 4;
}

/* (c) Each tile's table: the rows the phase implies, in order, each in the
 * size format.h gives it.  Returns the largest table's bytes. */
static size_t check_tables(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *ph)
{
    size_t most = ph->count + ph->dst_total, largest = 0; /* rows on any one tile, at most */
    trow *want = xcalloc(most, sizeof *want), *got = xcalloc(most, sizeof *got);
    ipu_xtables tables;
    TSEED_OK(ctx, ipu_exchange_encode(ctx, p, ph, &tables));
    uint64_t *measured = xcalloc(p->tiles, sizeof *measured);
    TSEED_OK(ctx, ipu_exchange_measure(ctx, p, ph, measured, NULL));
    for (uint32_t tile = 0; tile < p->tiles; tile++) {
        size_t n = 0;
        for (size_t i = 0; i < ph->count; i++) {
            const ipu_xfer *x = &ph->xfers[i];
            for (uint32_t k = 0; k <= x->dst_count; k++) {
                int send = k == x->dst_count;
                const ipu_xfer_dst *d = send ? NULL : &ph->dsts[x->first_dst + k];
                if ((send ? x->src_tile : d->tile) != tile)
                    continue;
                want[n++] = send ? (trow){IPU_XROW_SEND, x->cycle, x->bytes / 4, x->src_address, x->src_key}
                                 : (trow){IPU_XROW_RECV | x->src_tile << 16,
                                          x->cycle + p->exchange_latency, x->bytes / 4,
                                          d->address, d->key};
            }
        }
        qsort(want, n, sizeof *want, trow_order);
        size_t size = tables.offset[tile + 1] - tables.offset[tile], expected = n ? 4 : 0, entries = 0;
        for (size_t r = 0; r < n; entries++) {
            size_t rows = entry_rows(want, r, n);
            expected += rows > 1 ? 4 : expected_size(want, r);
            r += rows;
        }
        if (size != expected || measured[tile] != size)
            TSEED_FAIL("tile %u: a table of %zu bytes (measured %llu), its %zu rows take %zu", tile, size,
                       (unsigned long long)measured[tile], n, expected);
        largest = size > largest ? size : largest;
        if (!n)
            continue;
        const uint8_t *out = tables.data + tables.offset[tile];
        assert_int_equal(ipu_load_u32(out), entries);
        size_t at = 4;
        for (size_t r = 0; r < n;) {
            size_t rows, want_rows = entry_rows(want, r, n);
            uint32_t bytes = decode_entry(out + at, got, r, &rows);
            if (rows != want_rows || bytes != (rows > 1 ? 4 : expected_size(want, r)))
                TSEED_FAIL("tile %u row %zu: an entry of %u bytes and %zu rows, want %zu rows", tile, r, bytes,
                           rows, want_rows);
            at += bytes;
            for (size_t k = r; k < r + rows; k++) {
                got[k].key = want[k].key;
                if (memcmp(&got[k], &want[k], sizeof got[k]) != 0)
                    TSEED_FAIL("tile %u row %zu: got w0 0x%X cycle %u words %u address 0x%X, want w0 "
                               "0x%X cycle %u words %u address 0x%X",
                               tile, k, got[k].w0, got[k].cycle, got[k].words, got[k].address, want[k].w0,
                               want[k].cycle, want[k].words, want[k].address);
            }
            r += rows;
        }
    }
    free(want);
    free(got);
    free(measured);
    ipu_xtables_free(&tables);
    return largest;
}

static json_int_t report_int(json_t *object, const char *name)
{
    json_t *v = json_object_get(object, name);
    if (!json_is_integer(v))
        TSEED_FAIL("cycle report has no integer '%s'", name);
    return json_integer_value(v);
}

/* (d) Run the encoded tables on the device; every destination must equal its
 * source and the step must cost horizon + 100. */
static void check_device(ipu_ctx *ctx, const ipu_profile *p, const tphase *t)
{
    const ipu_xphase *ph = &t->ph;
    ipu_pkg_builder *b = tpkg_builder(ctx, p);
    uint32_t slot = ipu_pkg_new_slot(b);
    for (size_t i = 0; i < ph->count; i++) {
        const ipu_xfer *x = &ph->xfers[i];
        TSEED_OK(ctx, ipu_pkg_add_data(b, x->src_tile, x->src_address, t->data + t->data_at[i],
                                       x->bytes));
    }
    ipu_xtables tables;
    TSEED_OK(ctx, ipu_exchange_encode(ctx, p, ph, &tables));
    for (uint32_t tile = 0; tile < p->tiles; tile++) {
        uint32_t at;
        size_t size = tables.offset[tile + 1] - tables.offset[tile];
        if (size)
            TSEED_OK(ctx, ipu_pkg_put_slot(b, tile, slot, tables.data + tables.offset[tile], size, &at));
    }
    ipu_xtables_free(&tables);
    TSEED_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, slot, 0));
    ipu_package *pkg = tpkg_build(ctx, b);
    ipu_device *dev = tpkg_device(ctx, pkg);
    TSEED_OK(ctx, ipu_device_initialize(ctx, dev, pkg));
    char *text = NULL;
    if (ipu_device_run(ctx, dev, &text) != IPU_OK) {
        json_t *fault = tpkg_fault(ctx, dev);
        char *dump = json_dumps(fault, JSON_COMPACT);
        TSEED_FAIL("the device faulted: %s", dump ? dump : "?");
    }
    json_t *report = json_loads(text, 0, NULL);
    assert_non_null(report);
    json_t *steps = json_object_get(report, "steps");
    assert_int_equal(json_array_size(steps), 1);
    json_int_t exchange = report_int(json_array_get(steps, 0), "exchange");
    if ((uint64_t)exchange != ph->horizon + OVERHEAD)
        TSEED_FAIL("the device's exchange cost is %lld, want horizon %llu + %u",
                   (long long)exchange, (unsigned long long)ph->horizon, OVERHEAD);
    json_decref(report);
    ipu_free(text);
    uint8_t *got = NULL;
    for (size_t i = 0; i < ph->count; i++) {
        const ipu_xfer *x = &ph->xfers[i];
        got = realloc(got, x->bytes);
        assert_non_null(got);
        for (uint32_t k = 0; k < x->dst_count; k++) {
            const ipu_xfer_dst *d = &ph->dsts[x->first_dst + k];
            TSEED_OK(ctx, ipu_device_read(ctx, dev, d->tile, d->address, got, x->bytes));
            const uint8_t *want = t->data + t->data_at[i];
            for (uint32_t j = 0; j < x->bytes; j++)
                if (got[j] != want[j])
                    TSEED_FAIL("transfer %zu (tile %u -> tile %u at 0x%X): byte %u is 0x%02X, "
                               "its source is 0x%02X",
                               i, x->src_tile, d->tile, d->address, j, got[j], want[j]);
        }
    }
    free(got);
    ipu_device_free(dev);
    ipu_package_free(pkg);
}

/* Schedule twice (determinism), then checks (a) to (d); in the latency
 * order also (b).  Keys: none (every row full), or the addresses (windows
 * laid out back to back, so rows continue where the schedule keeps them in
 * address order). */
static void random_phases(uint32_t tiles, int rounds, size_t count, uint32_t max_dsts,
                          uint32_t max_words, const ipu_xmode *mode)
{
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_profile p;
    tpkg_profile(ctx, tiles, &p);
    for (int r = 0; r < rounds; r++) {
        tseed_reset((uint64_t)tiles * 1000 + (uint64_t)r);
        tphase t;
        gen_phase(&t, tiles, count, max_dsts, max_words);
        assign_addresses(&t, &p);
        if (r % 2)
            key_by_address(&t.ph);
        ipu_xfer *copy = xcalloc(count, sizeof *copy);
        memcpy(copy, t.ph.xfers, count * sizeof *copy);
        ipu_xphase again = t.ph;
        again.xfers = copy;
        TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &t.ph, mode));
        TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &again, mode));
        if (again.horizon != t.ph.horizon || memcmp(copy, t.ph.xfers, count * sizeof *copy))
            TSEED_FAIL("%u tiles, round %d: a second schedule differs", tiles, r);
        check_ports(&p, &t.ph);
        if (!mode)
            check_reference(&p, &t.ph);
        size_t largest = check_tables(ctx, &p, &t.ph);
        if (mode) {
            /* Compact mode keeps the latency order's schedule unless it has
             * no larger tables (ranked by horizon: unless it is no longer):
             * never worse than it on the figure it ranks first. */
            memcpy(copy, t.ph.xfers, count * sizeof *copy);
            TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &again, NULL));
            size_t latency = check_tables(ctx, &p, &again);
            if (!mode->by_horizon && largest > latency)
                TSEED_FAIL("%u tiles, round %d: compact tables up to %zu bytes, latency order's %zu", tiles, r,
                           largest, latency);
            if (mode->by_horizon && t.ph.horizon > again.horizon)
                TSEED_FAIL("%u tiles, round %d: horizon %llu ranked by horizon, latency order's %llu", tiles, r,
                           (unsigned long long)t.ph.horizon, (unsigned long long)again.horizon);
        }
        free(copy);
        check_device(ctx, &p, &t);
        tphase_free(&t);
    }
    ipu_ctx_free(ctx);
}

static void test_random_16(void **state)
{
    (void)state;
    random_phases(16, 6, 120, 6, 48, NULL);
}

static void test_random_64(void **state)
{
    (void)state;
    random_phases(64, 4, 400, 12, 64, NULL);
}

static void test_random_streams(void **state)
{
    (void)state;
    ipu_xmode waves = {16, 0, 0}, balanced = {8, 1, 0}, fastest = {8, 1, 1};
    random_phases(16, 6, 120, 6, 48, &waves);
    random_phases(64, 4, 400, 12, 64, &balanced);
    random_phases(64, 4, 400, 12, 64, &fastest);
}

/* Every tile multicasts 1 KiB to 8 other tiles. */
static void test_full_machine(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_profile p;
    tpkg_profile(ctx, 1472, &p);
    tseed_reset(1472);
    tphase t;
    memset(&t, 0, sizeof t);
    t.ph.count = p.tiles;
    t.ph.dst_total = 8 * (size_t)p.tiles;
    t.ph.xfers = xcalloc(t.ph.count, sizeof *t.ph.xfers);
    t.ph.dsts = xcalloc(t.ph.dst_total, sizeof *t.ph.dsts);
    uint32_t *load = xcalloc(p.tiles, 4), most = 0;
    for (uint32_t s = 0; s < p.tiles; s++) {
        t.ph.xfers[s] = (ipu_xfer){s, 0, 1024, 8 * s, 8, 0, 0, 0};
        for (uint32_t k = 0; k < 8; k++) {
            uint32_t d;
            int fresh;
            do { /* distinct, not s */
                d = tseed_below(p.tiles);
                fresh = d != s;
                for (uint32_t j = 0; j < k; j++)
                    fresh = fresh && t.ph.dsts[8 * s + j].tile != d;
            } while (!fresh);
            t.ph.dsts[8 * s + k].tile = d;
            most = ++load[d] > most ? load[d] : most;
        }
    }
    free(load);
    assign_addresses(&t, &p);
    TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &t.ph, NULL));
    check_ports(&p, &t.ph);
    /* The busiest receive port bounds it below; greedy stays close. */
    uint64_t bound = 256ull * most + p.exchange_latency;
    if (t.ph.horizon < bound || t.ph.horizon > 2 * bound)
        TSEED_FAIL("horizon %llu, the busiest receive port needs %llu",
                   (unsigned long long)t.ph.horizon, (unsigned long long)bound);
    check_tables(ctx, &p, &t.ph);
    check_device(ctx, &p, &t);
    tphase_free(&t);
    ipu_ctx_free(ctx);
}

/* All-to-all gather on 16 tiles: every tile sends 4 words to each other
 * tile, each receiver's windows laid out in sender order.  In stream waves
 * every tile receives in address order, starting anywhere and wrapping
 * around once at most (checked on the schedule itself), so its receive
 * rows after the first continue but one, in runs of consecutive senders;
 * the device gets every byte. */
static void test_gather_streams(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_profile p;
    tpkg_profile(ctx, 16, &p);
    tseed_reset(16016);
    tphase t;
    memset(&t, 0, sizeof t);
    t.ph.count = t.ph.dst_total = 16 * 15;
    t.ph.xfers = xcalloc(t.ph.count, sizeof *t.ph.xfers);
    t.ph.dsts = xcalloc(t.ph.dst_total, sizeof *t.ph.dsts);
    size_t n = 0;
    for (uint32_t src = 0; src < 16; src++)
        for (uint32_t dst = 0; dst < 16; dst++)
            if (dst != src) {
                t.ph.xfers[n] = (ipu_xfer){src, 0, 16, (uint32_t)n, 1, 0, 0, 0};
                t.ph.dsts[n++].tile = dst;
            }
    assign_addresses(&t, &p);
    key_by_address(&t.ph);
    ipu_xmode waves = {4, 0, 0};
    TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &t.ph, &waves));
    check_ports(&p, &t.ph);
    for (uint32_t tile = 0; tile < 16; tile++) {
        uint32_t last_cycle = 0, last_address = 0, wraps = 0;
        for (int first = 1;; first = 0) { /* the tile's receives in cycle order */
            size_t next = n;
            for (size_t i = 0; i < n; i++)
                if (t.ph.dsts[i].tile == tile && (first || t.ph.xfers[i].cycle > last_cycle) &&
                    (next == n || t.ph.xfers[i].cycle < t.ph.xfers[next].cycle))
                    next = i;
            if (next == n)
                break;
            if (!first && t.ph.dsts[next].address != last_address + 16 && wraps++)
                TSEED_FAIL("tile %u receives 0x%X after 0x%X: out of address order a second time", tile,
                           t.ph.dsts[next].address, last_address);
            last_cycle = t.ph.xfers[next].cycle, last_address = t.ph.dsts[next].address;
        }
    }
    /* Receives: a full row, a run up to the wrap, a full row and a run from
     * it (consecutive senders); sends: 15 rows of at most 16 bytes. */
    size_t largest = check_tables(ctx, &p, &t.ph);
    if (largest > 4 + 15 * 16 + 2 * 16 + 2 * 4)
        TSEED_FAIL("largest table %zu bytes", largest);
    check_device(ctx, &p, &t);
    tphase_free(&t);
    ipu_ctx_free(ctx);
}

/* Run a relocated phase (encoded from ph) in a Repeat of 'iterations',
 * its patches in a patch list; sources: 'members' blocks of member bytes on
 * each sending tile at tpkg_data0.  Returns the device (after the run) and
 * sets *status to the run's; *fault gets the fault JSON when it faulted. */
static ipu_device *run_relocated(ipu_ctx *ctx, const ipu_profile *p, const ipu_xphase *ph, const uint8_t *data,
                                 uint32_t data_bytes, uint32_t iterations, ipu_package **pkg, ipu_status *status)
{
    ipu_pkg_builder *b = tpkg_builder(ctx, p);
    uint32_t xslot = ipu_pkg_new_slot(b), pslot = ipu_pkg_new_slot(b);
    ipu_xtables tables;
    TSEED_OK(ctx, ipu_exchange_encode(ctx, p, ph, &tables));
    for (uint32_t tile = 0; tile < p->tiles; tile++) {
        size_t size = tables.offset[tile + 1] - tables.offset[tile];
        if (!size)
            continue;
        TSEED_OK(ctx, ipu_pkg_add_data(b, tile, tpkg_data0(p), data, data_bytes));
        uint32_t at;
        TSEED_OK(ctx, ipu_pkg_put_slot(b, tile, xslot, tables.data + tables.offset[tile], size, &at));
        size_t first = tables.patch_offset[tile], n = tables.patch_offset[tile + 1] - first;
        if (!n)
            continue;
        uint8_t *list = xcalloc(1, 4 + 16 * n);
        ipu_store_u32(list, (uint32_t)n);
        for (size_t k = 0; k < n; k++) {
            const ipu_xpatch *x = &tables.patches[first + k];
            ipu_store_u32(list + 4 + 16 * k, IPU_PATCH_PROGRESSION);
            ipu_store_u32(list + 8 + 16 * k, at + x->at);
            ipu_store_u32(list + 12 + 16 * k, x->a);
            ipu_store_u32(list + 16 + 16 * k, x->b);
        }
        TSEED_OK(ctx, ipu_pkg_put_slot(b, tile, pslot, list, 4 + 16 * n, NULL));
        free(list);
    }
    ipu_xtables_free(&tables);
    TSEED_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_REPEAT, iterations, 1, pslot));
    TSEED_OK(ctx, ipu_pkg_emit(b, 0, IPU_OP_STEP, IPU_NO_SLOT, xslot, 0));
    *pkg = tpkg_build(ctx, b);
    ipu_device *dev = tpkg_device(ctx, *pkg);
    TSEED_OK(ctx, ipu_device_initialize(ctx, dev, *pkg));
    char *text = NULL;
    *status = ipu_device_run(ctx, dev, &text);
    ipu_free(text);
    return dev;
}

/* Sources that advance per Repeat iteration.  Tile 0 sends two windows of
 * one sequence (64-byte members) to tiles 1 and 2: one displacement, so its
 * table sets OUTGOING_BASE first (one patch: 0 + i x 64), sends relative
 * and resets it last.  Tile 3 sends windows of two sequences (64- and
 * 128-byte members) to tile 4: its rows are patched one by one (a + i x
 * advance at each row's address word).  Tile 5's send does not advance.
 * After 3 iterations every destination holds its window of the last
 * member; measuring gives the bytes and patches encoding wrote; and
 * tables that keep the base set (the mutation) fault at the second
 * iteration. */
static void test_relocation(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_profile p;
    tpkg_profile(ctx, 16, &p);
    tseed_reset(5151);
    uint32_t base = tpkg_data0(&p), dst = p.region1_base;
    uint8_t data[1024];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)tseed_rnd();
    /* Sources: tile 0 [base, +64 x 3) members of 64; tile 3 members of 64 at
     * base and of 128 at base + 256; tile 5 at base + 768. */
    ipu_xfer x[5] = {{0, base, 32, 0, 1, 0, base, 64},       {0, base + 32, 32, 1, 1, 0, base + 32, 64},
                     {3, base + 16, 16, 2, 1, 0, base + 16, 64}, {3, base + 256, 32, 3, 1, 0, base + 256, 128},
                     {5, base + 768, 8, 4, 1, 0, base + 768, 0}};
    ipu_xfer_dst d[5] = {{1, dst, dst}, {2, dst, dst}, {4, dst, dst}, {4, dst + 64, dst + 64}, {6, dst, dst}};
    ipu_xphase ph = {x, 5, d, 5, 0, 0, 0};
    TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &ph, NULL));
    uint64_t bytes[16];
    uint32_t patches[16];
    TSEED_OK(ctx, ipu_exchange_measure(ctx, &p, &ph, bytes, patches));
    ipu_xtables tables;
    TSEED_OK(ctx, ipu_exchange_encode(ctx, &p, &ph, &tables));
    for (uint32_t t = 0; t < 16; t++) {
        assert_int_equal(bytes[t], tables.offset[t + 1] - tables.offset[t]);
        assert_int_equal(patches[t], tables.patch_offset[t + 1] - tables.patch_offset[t]);
        assert_int_equal(patches[t], t == 0 ? 1 : t == 3 ? 2 : 0);
        assert_int_equal(tables.based[t], t == 0);
    }
    const uint8_t *t0 = tables.data + tables.offset[0];
    size_t t0_bytes = tables.offset[1] - tables.offset[0];
    assert_int_equal(ipu_load_u32(t0), 4); /* SET_BASE, two sends, RESET_BASE */
    assert_int_equal(ipu_load_u32(t0 + 4) & 0xFF, IPU_XROW_SET_BASE);
    assert_int_equal(ipu_load_u32(t0 + t0_bytes - 16) & 0xFF, IPU_XROW_RESET_BASE);
    assert_true((ipu_load_u32(t0 + 20) >> 8) & IPU_XFLAG_RELATIVE);
    const ipu_xpatch *set = &tables.patches[tables.patch_offset[0]];
    assert_true(set->at == 16 && set->a == 0 && set->b == 64);
    for (size_t k = tables.patch_offset[3]; k < tables.patch_offset[4]; k++) {
        const ipu_xpatch *q = &tables.patches[k];
        /* The patched word is a send row's address: iteration 0's. */
        assert_int_equal(ipu_load_u32(tables.data + tables.offset[3] + q->at), q->a);
        assert_true((q->a == base + 16 && q->b == 64) || (q->a == base + 256 && q->b == 128));
    }
    ipu_xtables_free(&tables);

    ipu_package *pkg;
    ipu_status status;
    ipu_device *dev = run_relocated(ctx, &p, &ph, data, sizeof data, 3, &pkg, &status);
    TSEED_OK(ctx, status);
    struct {
        uint32_t tile, address, source, bytes;
    } want[] = {{1, dst, 128, 32}, {2, dst, 160, 32}, {4, dst, 16 + 128, 16}, {4, dst + 64, 256 + 256, 32},
                {6, dst, 768, 8}};
    for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
        uint8_t got[32];
        TSEED_OK(ctx, ipu_device_read(ctx, dev, want[w].tile, want[w].address, got, want[w].bytes));
        if (memcmp(got, data + want[w].source, want[w].bytes))
            TSEED_FAIL("tile %u at 0x%X: not the last member's bytes (source offset %u)", want[w].tile,
                       want[w].address, want[w].source);
    }
    ipu_device_free(dev);
    ipu_package_free(pkg);

    ph.keep_base = 1;
    dev = run_relocated(ctx, &p, &ph, data, sizeof data, 3, &pkg, &status);
    assert_int_equal(status, IPU_ERR_DEVICE_FAULT);
    json_t *fault = tpkg_fault(ctx, dev);
    assert_string_equal(tpkg_fault_str(fault, "kind"), "exchange_base_not_restored");
    assert_int_equal(tpkg_fault_int(fault, "tile"), 0);
    json_decref(fault);
    ipu_device_free(dev);
    ipu_package_free(pkg);
    ipu_ctx_free(ctx);
}

/* Hand-made phases with known schedules. */
static void test_tight(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_profile p;
    tpkg_profile(ctx, 16, &p);
    const uint32_t L = p.exchange_latency;
    ipu_xfer x[16];
    ipu_xfer_dst d[32];
    ipu_xphase ph = {x, 16, d, 16, 0, 0, 0};
    /* A permutation of equal unicasts (tiles 3, 7, 11 and 15 to themselves):
     * all at cycle 0. */
    for (uint32_t s = 0; s < 16; s++) {
        x[s] = (ipu_xfer){s, 0, 4 * 37, s, 1, 99, 0, 0};
        d[s].tile = (s * 5 + 4) % 16;
    }
    TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &ph, NULL));
    assert_int_equal(ph.horizon, 37 + L);
    for (uint32_t s = 0; s < 16; s++)
        assert_int_equal(x[s].cycle, 0);
    /* All to one tile: the receive port serializes them, by index. */
    for (uint32_t s = 0; s < 16; s++)
        d[s].tile = 7;
    TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &ph, NULL));
    assert_int_equal(ph.horizon, 16 * 37 + L);
    for (uint32_t s = 0; s < 16; s++)
        assert_int_equal(x[s].cycle, 37 * s);
    /* Earliest fit with gaps, longest first: A 0->1 (10 words), B 0->2 (8),
     * C 3->2 (6), D 3->1 (4), E 4->{2, 4} (2, with loopback), given in
     * shuffled order. */
    const uint32_t src[5] = {3, 4, 0, 3, 0}, words[5] = {4, 2, 8, 6, 10};
    const uint32_t dst[6] = {1, 2, 4, 2, 2, 1}, first[5] = {0, 1, 3, 4, 5}, n[5] = {1, 2, 1, 1, 1};
    const uint32_t cycle[5] = {10, 6, 10, 0, 0};
    for (uint32_t i = 0; i < 5; i++)
        x[i] = (ipu_xfer){src[i], 0, 4 * words[i], first[i], n[i], 0, 0, 0};
    for (uint32_t i = 0; i < 6; i++)
        d[i].tile = dst[i];
    ph = (ipu_xphase){x, 5, d, 6, 12345, 0, 0};
    TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &ph, NULL));
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(x[i].cycle, cycle[i]);
    assert_int_equal(ph.horizon, 18 + L);
    /* Empty. */
    ph = (ipu_xphase){NULL, 0, NULL, 0, 777, 0, 0};
    TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &ph, NULL));
    assert_int_equal(ph.horizon, 0);
    ipu_ctx_free(ctx);
}

/* One invalid phase: the status, a message naming what, cycles untouched. */
static void expect_invalid(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *ph, const char *what,
                           const char *value)
{
    ipu_ctx_clear_error(ctx);
    for (size_t i = 0; i < ph->count; i++)
        ph->xfers[i].cycle = 4242;
    ipu_status status = ipu_exchange_schedule(ctx, p, ph, NULL);
    if (status != IPU_ERR_INVALID_ARGUMENT)
        fail_msg("%s: status %s, want invalid_argument", what, ipu_status_name(status));
    const char *msg = ipu_ctx_errmsg(ctx);
    if (!strstr(msg, what) || !strstr(msg, value))
        fail_msg("message '%s' should name '%s' and '%s'", msg, what, value);
    for (size_t i = 0; i < ph->count; i++)
        assert_int_equal(ph->xfers[i].cycle, 4242);
}

/* Three valid transfers: 0 -> {1}, 1 -> {2, 3}, 2 -> {4, 5}. */
static void reset(ipu_xfer x[3], ipu_xfer_dst d[5])
{
    x[0] = (ipu_xfer){0, 0, 16, 0, 1, 0, 0, 0};
    x[1] = (ipu_xfer){1, 0, 8, 1, 2, 0, 0, 0};
    x[2] = (ipu_xfer){2, 0, 4, 3, 2, 0, 0, 0};
    for (uint32_t i = 0; i < 5; i++)
        d[i].tile = i + 1;
}

static void test_invalid(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    assert_non_null(ctx);
    ipu_profile p;
    tpkg_profile(ctx, 16, &p);
    ipu_xfer x[3];
    ipu_xfer_dst d[5] = {{1, 0, 0}, {2, 0, 0}, {3, 0, 0}, {4, 0, 0}, {5, 0, 0}};
    ipu_xphase ph = {x, 3, d, 5, 0, 0, 0};
    reset(x, d);
    TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &ph, NULL));
    reset(x, d);
    x[1].src_tile = 16;
    expect_invalid(ctx, &p, &ph, "transfer 1", "16");
    reset(x, d);
    x[2].src_tile = 0xFFFFFFFFu;
    expect_invalid(ctx, &p, &ph, "transfer 2", "4294967295");
    reset(x, d);
    x[1].bytes = 0;
    expect_invalid(ctx, &p, &ph, "transfer 1", "0 bytes");
    reset(x, d);
    x[2].bytes = 6;
    expect_invalid(ctx, &p, &ph, "transfer 2", "6 bytes");
    reset(x, d);
    x[0].dst_count = 0;
    expect_invalid(ctx, &p, &ph, "transfer 0", "count 0");
    reset(x, d);
    x[2].dst_count = 3; /* [3, 6) past 5 */
    expect_invalid(ctx, &p, &ph, "transfer 2", "6");
    reset(x, d);
    x[1].first_dst = 0xFFFFFFFFu; /* wraps in 32 bits */
    expect_invalid(ctx, &p, &ph, "transfer 1", "4294967295");
    reset(x, d);
    d[4].tile = 16;
    expect_invalid(ctx, &p, &ph, "transfer 2", "tile 16");
    reset(x, d);
    d[2].tile = 2; /* transfer 1 lists tile 2 twice */
    expect_invalid(ctx, &p, &ph, "transfer 1", "tile 2");
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_exchange_schedule(ctx, &p, NULL, NULL), IPU_ERR_INVALID_ARGUMENT);
    ipu_xphase missing = {NULL, 2, d, 5, 0, 0, 0};
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_exchange_schedule(ctx, &p, &missing, NULL), IPU_ERR_INVALID_ARGUMENT);
    /* Encoding: addresses must be 4-byte aligned, the tiles in range. */
    reset(x, d);
    ipu_ctx_clear_error(ctx);
    TSEED_OK(ctx, ipu_exchange_schedule(ctx, &p, &ph, NULL));
    for (int i = 0; i < 5; i++)
        d[i].address = 0x80000u + 64u * (uint32_t)i;
    ipu_xtables tables;
    x[1].src_address = 0x60002u;
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_exchange_encode(ctx, &p, &ph, &tables), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "0x60002"));
    assert_null(tables.data);
    x[1].src_address = 0x60000u;
    ipu_ctx_clear_error(ctx);
    TSEED_OK(ctx, ipu_exchange_encode(ctx, &p, &ph, &tables));
    ipu_xtables_free(&tables);
    d[3].address = 0x80001u; /* tile 4, from transfer 2 */
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_exchange_encode(ctx, &p, &ph, &tables), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "0x80001"));
    d[3].address = 0x80000u + 64u * 3;
    d[4].tile = 16;
    ipu_ctx_clear_error(ctx);
    assert_int_equal(ipu_exchange_encode(ctx, &p, &ph, &tables), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "tile 16"));
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_exchange_schedule");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tight),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_random_16),
        cmocka_unit_test(test_random_64),
        cmocka_unit_test(test_random_streams),
        cmocka_unit_test(test_gather_streams),
        cmocka_unit_test(test_relocation),
        cmocka_unit_test(test_full_machine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
