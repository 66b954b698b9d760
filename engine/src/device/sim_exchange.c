/* sim_exchange.c: a statically timed exchange phase read from the encoded
 * tables in tile SRAM.  Decode (entries in order, each kind of xrow.h,
 * OUTGOING_BASE applied to relative sends), port checks (one word per cycle
 * per port; paired 64-bit transfers take both ports of the supertile pair;
 * every row inside an allocation live at the phase), matching every receive
 * window to the sender's window L cycles earlier, conflicting writers, a
 * receive overwriting bytes its own tile sends, then the copy.  The phase
 * costs its horizon (the cycle after the last word arrives: a receive's end,
 * or a send's end + L for a window nobody selects) plus the fixed overhead;
 * DEVICE.md's "last receive + L" reads receive times as send times.
 * OUTGOING_BASE is set before the barrier and restored after, as on the
 * real machine, where the supervisor's other code reads source addresses
 * as absolute: DEVICE.md is silent, so this model decides that a table
 * that leaves the base nonzero at the end of its phase faults
 * (exchange_base_not_restored, at the row that last set it).  Every pass
 * runs tiles in parallel and writes only its own tile's state, so results do
 * not depend on the thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "device/sim.h"
#include "package/xrow.h"

static int push(sim *s, sim_xfer **items, uint32_t *count, uint32_t *capacity, sim_xfer x)
{
    if (*count == *capacity) {
        uint32_t grown = *capacity ? *capacity * 2 : 16;
        sim_xfer *p = ipu_realloc(s->ctx, *items, grown * sizeof *p);
        if (!p)
            return 1;
        *items = p;
        *capacity = grown;
    }
    (*items)[(*count)++] = x;
    return 0;
}

static int by_cycle(const void *a, const void *b)
{
    const sim_xfer *x = a, *y = b;
    return x->cycle < y->cycle ? -1 : x->cycle > y->cycle ? 1 : (x->row > y->row) - (x->row < y->row);
}

static int by_address(const void *a, const void *b)
{
    const sim_xfer *x = a, *y = b;
    return x->address < y->address ? -1 : x->address > y->address ? 1 : (x->row > y->row) - (x->row < y->row);
}

/* Sort rows by cmp unless they already are in order (the usual case: tables
 * list rows by cycle). */
static void sort_rows(sim_xfer *rows, uint32_t count, int (*cmp)(const void *, const void *))
{
    for (uint32_t i = 1; i < count; i++) {
        if (cmp(&rows[i - 1], &rows[i]) > 0) {
            qsort(rows, count, sizeof *rows, cmp);
            return;
        }
    }
}

static int row_fault(sim *s, uint32_t tile, uint32_t row)
{
    s->tiles[tile].fault.row = (int)row;
    return 1;
}

/* Decode a tile's table into its send and receive lists. */
static int decode(sim *s, uint32_t tile, uint32_t table)
{
    sim_tile *t = &s->tiles[tile];
    uint32_t entries;
    /* Every entry takes at least 4 bytes; the walk stays inside the segment. */
    if (sim_fetch_record(s, tile, table, IPU_XROW_REPEAT_SIZE, &entries, "exchange table"))
        return 1;
    uint32_t end = sim_descriptor_end(s, tile, table);
    t->table = table;
    uint32_t set_row = 0, set_address = 0;
    ipu_xrow_reader reader;
    ipu_xrow_reader_init(&reader, sim_ptr(s, tile, table + 4), end - (table + 4), entries);
    ipu_xrow row;
    for (int got; (got = ipu_xrow_next(&reader, &row)) != 0;) {
        uint32_t r = reader.entry, row_address = table + 4 + (uint32_t)reader.offset;
        if (got < 0)
            return sim_fault(s, tile, IPU_FAULT_MALFORMED_DESCRIPTOR, row_address,
                             row_address + IPU_XROW_REPEAT_SIZE, "exchange row %u: %s", r,
                             reader.rows > IPU_XTABLE_ROWS_MAX ? "the table has more rows than a table holds"
                             : ipu_xrow_fits(sim_ptr(s, tile, row_address), end - row_address)
                                 ? "it continues no row of its op and flags before it (or is of several "
                                   "kinds, or a run of no rows)"
                                 : "runs past its descriptor segment") &&
                   row_fault(s, tile, r);
        uint32_t n = reader.entry_size;
        uint32_t op = row.op, flags = row.flags, peer = row.peer, cycle = row.cycle, words = row.words,
                 address = row.address;
        uint32_t width = ipu_xrow_width(&row);
        if (op == IPU_XROW_SET_BASE || op == IPU_XROW_RESET_BASE) {
            t->outgoing_base = op == IPU_XROW_SET_BASE ? address : 0;
            t->uses_base = 1;
            set_row = r, set_address = row_address;
            continue;
        }
        if ((op != IPU_XROW_SEND && op != IPU_XROW_RECV) ||
            (flags & ~(IPU_XFLAG_RELATIVE | IPU_XFLAG_PAIRED)) || words == 0 || words > (1u << 20) ||
            cycle > (1u << 30) || (op == IPU_XROW_RECV && peer >= s->p.tiles))
            return sim_fault(s, tile, IPU_FAULT_MALFORMED_DESCRIPTOR, row_address, row_address + n,
                             "exchange row %u: op %u, flags 0x%X, %u words at cycle %u, tile %u", r,
                             op, flags, words, cycle, peer) &&
                   row_fault(s, tile, r);
        if ((flags & IPU_XFLAG_PAIRED) && (tile ^ 1u) >= s->p.tiles)
            return sim_fault(s, tile, IPU_FAULT_EXCHANGE_PORT_CONFLICT, row_address, row_address + n,
                             "exchange row %u: paired transfer, but tile %u has no supertile partner",
                             r, tile) &&
                   row_fault(s, tile, r);
        sim_xfer x = {cycle, words, address, peer, width, r, 0};
        if (op == IPU_XROW_SEND) {
            if (flags & IPU_XFLAG_RELATIVE) {
                x.address = address + t->outgoing_base;
                t->uses_base = 1;
            }
            if (sim_check(s, tile, x.address, words * width, 1u, width, 0, "exchange send", NULL) ||
                sim_check_allocation(s, tile, x.address, words * width, "exchange send", NULL))
                return row_fault(s, tile, r);
            if (push(s, &t->sends, &t->send_count, &t->send_capacity, x))
                return sim_out_of_memory(s, tile);
        } else {
            if (sim_check(s, tile, address, words * width, 2u, width, 0, "exchange receive", NULL) ||
                sim_check_allocation(s, tile, address, words * width, "exchange receive", NULL))
                return row_fault(s, tile, r);
            if (push(s, &t->recvs, &t->recv_count, &t->recv_capacity, x))
                return sim_out_of_memory(s, tile);
        }
    }
    t->table_bytes = 4 + (uint32_t)reader.next;
    if (t->outgoing_base)
        return sim_fault(s, tile, IPU_FAULT_EXCHANGE_BASE_NOT_RESTORED, set_address, set_address + IPU_XROW_SIZE,
                         "exchange table at 0x%X leaves OUTGOING_BASE at 0x%X (row %u sets it): a table that sets "
                         "it resets it before its phase ends",
                         table, t->outgoing_base, set_row) &&
               row_fault(s, tile, set_row);
    sort_rows(t->sends, t->send_count, by_cycle);
    sort_rows(t->recvs, t->recv_count, by_cycle);
    return 0;
}

/* Fault for two windows of one port that overlap in time: a (a row of tile
 * a_owner) and the later b (of b_owner).  Reports this tile's own row. */
static int port_clash(sim *s, uint32_t tile, int receive, const sim_xfer *a, uint32_t a_owner,
                      const sim_xfer *b, uint32_t b_owner)
{
    const sim_xfer *own = b_owner == tile ? b : a;
    uint32_t bytes = own->words * own->width;
    return sim_fault(s, tile, IPU_FAULT_EXCHANGE_PORT_CONFLICT, own->address, own->address + bytes,
                     "tile %u's %s port is busy twice at cycle %u: row %u of tile %u "
                     "(cycles %u..%u) and row %u of tile %u (from cycle %u)",
                     tile, receive ? "receive" : "send", b->cycle, a->row, a_owner, a->cycle,
                     a->cycle + a->words - 1, b->row, b_owner, b->cycle) &&
           row_fault(s, tile, own->row);
}

/* A port's busy windows: the tile's own transfers and its partner's paired
 * ones, merged by cycle (both lists are sorted; the own row first on a tie).
 * Without paired partner rows the own sorted list is checked where it is. */
static int check_port(sim *s, uint32_t tile, int receive, sim_xfer **scratch, uint32_t *capacity)
{
    sim_tile *t = &s->tiles[tile];
    uint32_t count = 0;
    uint32_t partner = tile ^ 1u;
    const sim_xfer *mine = receive ? t->recvs : t->sends;
    uint32_t mine_count = receive ? t->recv_count : t->send_count;
    const sim_xfer *paired = NULL;
    uint32_t paired_count = 0, j = 0;
    if (partner < s->p.tiles) {
        const sim_tile *pt = &s->tiles[partner];
        paired = receive ? pt->recvs : pt->sends;
        paired_count = receive ? pt->recv_count : pt->send_count;
    }
    while (j < paired_count && paired[j].width != 8)
        j++;
    if (j == paired_count) {
        for (uint32_t i = 1; i < mine_count; i++)
            if ((uint64_t)mine[i - 1].cycle + mine[i - 1].words > mine[i].cycle)
                return port_clash(s, tile, receive, &mine[i - 1], tile, &mine[i], tile);
        return 0;
    }
    uint32_t m = 0;
    for (;;) {
        while (j < paired_count && paired[j].width != 8)
            j++;
        int take_own = m < mine_count && (j == paired_count || by_cycle(&mine[m], &paired[j]) <= 0);
        if (!take_own && j == paired_count)
            break;
        sim_xfer x = take_own ? mine[m++] : paired[j++];
        x.peer = take_own ? tile : partner; /* whose row it is */
        if (push(s, scratch, &count, capacity, x))
            return sim_out_of_memory(s, tile);
    }
    for (uint32_t i = 1; i < count; i++) {
        const sim_xfer *a = &(*scratch)[i - 1], *b = &(*scratch)[i];
        if ((uint64_t)a->cycle + a->words > b->cycle)
            return port_clash(s, tile, receive, a, a->peer, b, b->peer);
    }
    return 0;
}

/* Per-thread memory of where each sender's last match ended (entries are
 * valid for the tile whose stamp they carry). */
typedef struct match_hints {
    uint32_t *next;  /* by sender: index of the first send after the last match */
    uint32_t *stamp; /* by sender: the stamp of the tile that wrote next */
    uint32_t current;
} match_hints;

/* Match each receive to its sender's window L cycles earlier. */
static int match(sim *s, uint32_t tile, match_hints *hints)
{
    sim_tile *t = &s->tiles[tile];
    uint32_t latency = s->p.exchange_latency;
    /* Receives go by cycle, so a sender's matches advance through its sends:
     * the search starts where the previous receive from that sender ended. */
    uint32_t stamp = ++hints->current;
    for (uint32_t i = 0; i < t->recv_count; i++) {
        sim_xfer *x = &t->recvs[i];
        const sim_tile *sender = &s->tiles[x->peer];
        int64_t start = (int64_t)x->cycle - latency, end = start + x->words;
        /* Last send starting at or before start: lo is the first after it. */
        uint32_t lo = 0, hi = sender->send_count;
        uint32_t hint = hints->next[x->peer];
        if (hints->stamp[x->peer] == stamp &&
            (hint == 0 || (int64_t)sender->sends[hint - 1].cycle <= start)) {
            lo = hint;
            for (uint32_t step = 0; step < 4 && lo < hi && (int64_t)sender->sends[lo].cycle <= start;
                 step++)
                lo++;
        }
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if ((int64_t)sender->sends[mid].cycle <= start)
                lo = mid + 1;
            else
                hi = mid;
        }
        hints->stamp[x->peer] = stamp;
        hints->next[x->peer] = lo;
        const sim_xfer *cover = lo ? &sender->sends[lo - 1] : NULL;
        if (start >= 0 && cover && end <= (int64_t)cover->cycle + cover->words &&
            cover->width == x->width) {
            x->source = cover->address + (uint32_t)(start - cover->cycle) * x->width;
            continue;
        }
        int overlaps = (cover && (int64_t)cover->cycle + cover->words > start) ||
                       (lo < sender->send_count && (int64_t)sender->sends[lo].cycle < start + x->words);
        if (overlaps)
            return sim_fault(s, tile, IPU_FAULT_EXCHANGE_WINDOW_MISMATCH, x->address,
                             x->address + x->words * x->width,
                             "receive row %u selects tile %u for %u %s-bit words at cycle %u, but "
                             "that sender's window near cycle %lld does not match it",
                             x->row, x->peer, x->words, x->width == 8 ? "64" : "32", x->cycle,
                             (long long)start) &&
                   row_fault(s, tile, x->row);
        return sim_fault(s, tile, IPU_FAULT_EXCHANGE_UNMATCHED_RECEIVE, x->address,
                         x->address + x->words * x->width,
                         "receive row %u selects tile %u at cycle %u, but it sends nothing at "
                         "cycle %lld",
                         x->row, x->peer, x->cycle, (long long)start) &&
               row_fault(s, tile, x->row);
    }
    return 0;
}

/* The ordered check of a tile's writes, which finds the clash to report:
 * receives go in address order; the sends, copied to scratch in address
 * order, are swept once (receives do not overlap, so their ends only grow):
 * a receive clashes when some send starting below its end ends above its
 * start.  The clash is then reported with the first such send in cycle order. */
static int report_clash(sim *s, uint32_t tile, sim_xfer **scratch, uint32_t *capacity)
{
    sim_tile *t = &s->tiles[tile];
    sort_rows(t->recvs, t->recv_count, by_address);
    for (uint32_t i = 1; i < t->recv_count; i++) {
        const sim_xfer *a = &t->recvs[i - 1], *b = &t->recvs[i];
        uint32_t a_end = a->address + a->words * a->width;
        if (a_end > b->address) {
            uint32_t b_end = b->address + b->words * b->width;
            return sim_fault(s, tile, IPU_FAULT_EXCHANGE_CONFLICTING_WRITERS, b->address,
                             a_end < b_end ? a_end : b_end,
                             "receive rows %u (from tile %u) and %u (from tile %u) both write "
                             "[0x%X, 0x%X) in one phase",
                             a->row, a->peer, b->row, b->peer, b->address,
                             a_end < b_end ? a_end : b_end) &&
                   row_fault(s, tile, b->row);
        }
    }
    if (!t->recv_count || !t->send_count)
        return 0;
    uint32_t count = 0;
    for (uint32_t j = 0; j < t->send_count; j++)
        if (push(s, scratch, &count, capacity, t->sends[j]))
            return sim_out_of_memory(s, tile);
    sort_rows(*scratch, count, by_address);
    uint64_t reach = 0; /* largest end of the sends starting below the receive's end */
    uint32_t next = 0;
    for (uint32_t i = 0; i < t->recv_count; i++) {
        const sim_xfer *x = &t->recvs[i];
        uint32_t x_end = x->address + x->words * x->width;
        for (; next < count && (*scratch)[next].address < x_end; next++) {
            uint64_t end = (uint64_t)(*scratch)[next].address +
                           (uint64_t)(*scratch)[next].words * (*scratch)[next].width;
            if (end > reach)
                reach = end;
        }
        if (reach <= x->address)
            continue;
        for (uint32_t j = 0; j < t->send_count; j++) {
            const sim_xfer *y = &t->sends[j];
            uint32_t y_end = y->address + y->words * y->width;
            if (x->address < y_end && y->address < x_end)
                return sim_fault(s, tile, IPU_FAULT_EXCHANGE_READ_WRITE_CONFLICT,
                                 x->address > y->address ? x->address : y->address,
                                 x_end < y_end ? x_end : y_end,
                                 "receive row %u overwrites bytes that send row %u of the same tile "
                                 "reads in this phase",
                                 x->row, y->row) &&
                       row_fault(s, tile, x->row);
        }
    }
    return 0;
}

/* Bits of [offset, offset + size) (size > 0) in a byte bitmap: returns
 * whether any was set; with take, sets them all. */
static int claim(uint64_t *bits, uint32_t offset, uint32_t size, int take)
{
    uint32_t end = offset + size;
    uint64_t before = 0;
    for (uint32_t w = offset >> 6; w <= (end - 1) >> 6; w++) {
        uint64_t mask = sim_word_mask(w, offset, end);
        before |= bits[w] & mask;
        if (take)
            bits[w] |= mask;
    }
    return before != 0;
}

/* Clear the words of [offset, offset + size) (size > 0). */
static void release(uint64_t *bits, uint32_t offset, uint32_t size)
{
    for (uint32_t w = offset >> 6, last = (offset + size - 1) >> 6; w <= last; w++)
        bits[w] = 0;
}

/* Receives must not overlap each other nor the tile's own send sources.  The
 * receives claim their bytes in a bitmap of the tile's SRAM (all clear between
 * calls); only when a receive or a send meets a claimed byte does the ordered
 * check run, to report the clash. */
static int check_writes(sim *s, uint32_t tile, uint64_t *bits, sim_xfer **scratch,
                        uint32_t *capacity)
{
    sim_tile *t = &s->tiles[tile];
    uint32_t base = s->p.sram_base;
    int clash = 0;
    for (uint32_t i = 0; i < t->recv_count; i++)
        clash |= claim(bits, t->recvs[i].address - base, t->recvs[i].words * t->recvs[i].width, 1);
    for (uint32_t j = 0; j < t->send_count && !clash; j++)
        clash = claim(bits, t->sends[j].address - base, t->sends[j].words * t->sends[j].width, 0);
    for (uint32_t i = 0; i < t->recv_count; i++)
        release(bits, t->recvs[i].address - base, t->recvs[i].words * t->recvs[i].width);
    return clash ? report_clash(s, tile, scratch, capacity) : 0;
}

/* Run a kept phase again: its copies (sim_replay.c says why that is exact),
 * once every send source is still written (an ended allocation's life may
 * have cleared it since).  Returns 0, copying nothing, when one is not: the
 * full phase then finds and reports the fault. */
static int replay(sim *s, const sim_replay *r, sim_exchange_cost *cost)
{
    int64_t tiles = s->p.tiles;
    int unwritten = 0;
#pragma omp parallel for schedule(static, 16) num_threads(s->threads) reduction(| : unwritten)
    for (int64_t i = 0; i < tiles; i++) {
        uint32_t tile = (uint32_t)i;
        for (uint32_t c = r->send_first[tile]; c < r->send_first[tile + 1] && !unwritten; c++)
            unwritten = !sim_is_written(s, tile, r->sends[c].lo, r->sends[c].hi - r->sends[c].lo);
    }
    if (unwritten)
        return 0;
#pragma omp parallel for schedule(static, 16) num_threads(s->threads)
    for (int64_t i = 0; i < tiles; i++) {
        uint32_t tile = (uint32_t)i;
        for (uint32_t c = r->first[tile]; c < r->first[tile + 1]; c++) {
            const sim_copy *x = &r->copies[c];
            memcpy(sim_ptr(s, tile, x->address), sim_ptr(s, x->peer, x->source), x->bytes);
            sim_mark_written(s, tile, x->address, x->bytes);
        }
    }
    *cost = r->cost;
    return 1;
}

int sim_exchange_phase(sim *s, uint32_t slot, sim_exchange_cost *cost)
{
    const sim_replay *kept = sim_replay_find(s, slot);
    if (kept && replay(s, kept, cost))
        return 0;
    int64_t tiles = s->p.tiles;
    uint64_t horizon = 0, sent = 0, received = 0;
#pragma omp parallel for schedule(static, 16) num_threads(s->threads)
    for (int64_t i = 0; i < tiles; i++) {
        uint32_t tile = (uint32_t)i, table;
        sim_tile *t = &s->tiles[tile];
        sim_prefetch_next(s, tile, slot);
        t->send_count = t->recv_count = t->table = t->table_bytes = 0;
        t->uses_base = 0;
        if (sim_fetch_u32(s, tile, s->pkg->slot_tables[tile] + 4 * slot, &table, "slot table"))
            continue;
        if (table)
            decode(s, tile, table);
    }
    if (sim_collect_fault(s))
        return 1;
#pragma omp parallel num_threads(s->threads)
    {
        sim_xfer *scratch = NULL;
        uint32_t capacity = 0;
#pragma omp for schedule(static, 16)
        for (int64_t i = 0; i < tiles; i++) {
            uint32_t tile = (uint32_t)i;
            if (!check_port(s, tile, 0, &scratch, &capacity))
                check_port(s, tile, 1, &scratch, &capacity);
        }
        free(scratch);
    }
    if (sim_collect_fault(s))
        return 1;
#pragma omp parallel num_threads(s->threads)
    {
        sim_xfer *scratch = NULL;
        uint32_t capacity = 0;
        uint64_t *bits = ipu_calloc(s->ctx, s->shadow_words, sizeof *bits);
        match_hints hints = {ipu_calloc(s->ctx, (size_t)tiles, sizeof(uint32_t)),
                             ipu_calloc(s->ctx, (size_t)tiles, sizeof(uint32_t)), 0};
        /* A thread may get no tile: its failure stops the device all the same. */
        int ready = bits && hints.next && hints.stamp;
        if (!ready)
            atomic_store(&s->out_of_memory, 1);
#pragma omp for schedule(static, 16)
        for (int64_t i = 0; i < tiles; i++)
            if (ready && !match(s, (uint32_t)i, &hints))
                check_writes(s, (uint32_t)i, bits, &scratch, &capacity);
        free(hints.next);
        free(hints.stamp);
        free(bits);
        free(scratch);
    }
    if (atomic_load(&s->out_of_memory) || sim_collect_fault(s))
        return 1;
#pragma omp parallel for schedule(static, 16) num_threads(s->threads) reduction(max : horizon) \
    reduction(+ : sent, received)
    for (int64_t i = 0; i < tiles; i++) {
        uint32_t tile = (uint32_t)i;
        sim_tile *t = &s->tiles[tile];
        for (uint32_t r = 0; r < t->recv_count; r++) {
            const sim_xfer *x = &t->recvs[r];
            uint32_t bytes = x->words * x->width;
            memcpy(sim_ptr(s, tile, x->address), sim_ptr(s, x->peer, x->source), bytes);
            sim_mark_written(s, tile, x->address, bytes);
            received += bytes;
            if ((uint64_t)x->cycle + x->words > horizon)
                horizon = (uint64_t)x->cycle + x->words;
        }
        for (uint32_t r = 0; r < t->send_count; r++) {
            uint64_t end = (uint64_t)t->sends[r].cycle + t->sends[r].words + s->p.exchange_latency;
            sent += (uint64_t)t->sends[r].words * t->sends[r].width;
            if (end > horizon)
                horizon = end;
        }
    }
    *cost = (sim_exchange_cost){horizon + s->p.exchange_overhead, sent, received};
    return sim_replay_keep(s, slot, *cost);
}
