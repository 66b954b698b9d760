/* replay.c: rescheduling a saved package's exchange phases (ipu.h,
 * ipu_package_exchange_replay).  Each exchange phase of the control
 * programs (a step's exchange slot) is read back from every tile's table:
 * a send row is a transfer from its tile at its cycle, and the receive rows
 * naming that tile as peer at that cycle plus the latency are its
 * destinations.  The phase is scheduled again (exchange.h, in the mode the
 * options give) and reported beside its recorded schedule: horizon (last
 * arrival + 1), the largest and the total table rows in words (a table's
 * bytes after its count word, over 4), the spread of the
 * active tiles' first transfers after the barrier, and whether every tile's
 * table still fits the bytes the package gave it.  A Repeat body's phase is
 * one table, replayed once.  Phases that use OUTGOING_BASE or paired
 * transfers are reported as recorded and not rescheduled.  The scheduler
 * breaks ties in list order, so a phase is rescheduled from its transfers
 * in the order its recorded schedule placed them (by cycle, then tile).
 */
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange.h"
#include "ipu/ipu.h"
#include "package/package.h"
#include "package/xrow.h"

/* A phase's rows read back: transfers with their destinations. */
typedef struct read_phase {
    ipu_xphase phase;
    uint64_t *table_bytes; /* per tile: bytes of its recorded table */
    int replayable;        /* no OUTGOING_BASE, no paired transfers, every receive matched */
} read_phase;

static void read_phase_free(read_phase *r)
{
    free(r->phase.xfers);
    free(r->phase.dsts);
    free(r->table_bytes);
}

/* Tile t's table of slot decoded into *rows (malloc'd, NULL when the tile
 * takes no part or the table cannot be read); returns the row count (a run
 * entry gives several) and sets *bytes to the table's size. */
static uint32_t table_of(const ipu_package *pkg, uint32_t t, uint32_t slot, ipu_xrow **rows, uint64_t *bytes)
{
    *rows = NULL, *bytes = 0;
    const ipu_pkg_segment *seg = ipu_pkg_segment_at(pkg, t, pkg->slot_tables[t] + 4 * slot, 4);
    if (!seg || seg->kind != IPU_SEG_DESCRIPTOR)
        return 0;
    uint32_t table = ipu_load_u32(ipu_pkg_segment_bytes(pkg, seg) + (pkg->slot_tables[t] + 4 * slot - seg->address));
    const ipu_pkg_segment *at = table ? ipu_pkg_segment_at(pkg, t, table, 4) : NULL;
    if (!at || at->kind != IPU_SEG_DESCRIPTOR)
        return 0;
    const uint8_t *head = ipu_pkg_segment_bytes(pkg, at) + (table - at->address);
    ipu_xrow_reader reader;
    ipu_xrow_reader_init(&reader, head + 4, at->address + at->size - table - 4, ipu_load_u32(head));
    ipu_xrow *list = NULL, row;
    size_t count = 0, capacity = 0;
    int got;
    while ((got = ipu_xrow_next(&reader, &row)) > 0) {
        if (count == capacity) {
            size_t grown = capacity ? 2 * capacity : 64;
            ipu_xrow *more = count < UINT32_MAX / 2 ? realloc(list, grown * sizeof *list) : NULL;
            if (!more)
                break;
            list = more, capacity = grown;
        }
        list[count++] = row;
    }
    if (got || !count) {
        free(list);
        return 0;
    }
    *rows = list, *bytes = 4 + reader.next;
    return (uint32_t)count;
}

/* The send of tile at cycle among n sends in (tile, cycle) order; n when none. */
static size_t find_send(const ipu_xfer *x, size_t n, uint32_t tile, uint32_t cycle)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x[mid].src_tile < tile || (x[mid].src_tile == tile && x[mid].cycle < cycle))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && x[lo].src_tile == tile && x[lo].cycle == cycle ? lo : n;
}

static int by_tile_and_cycle(const void *a, const void *b)
{
    const ipu_xfer *x = a, *y = b;
    if (x->src_tile != y->src_tile)
        return x->src_tile < y->src_tile ? -1 : 1;
    return (x->cycle > y->cycle) - (x->cycle < y->cycle);
}

/* The order the recorded schedule took them in: by cycle, then sending tile. */
static int by_cycle_and_tile(const void *a, const void *b)
{
    const ipu_xfer *x = a, *y = b;
    if (x->cycle != y->cycle)
        return x->cycle < y->cycle ? -1 : 1;
    return (x->src_tile > y->src_tile) - (x->src_tile < y->src_tile);
}

/* Read slot's phase from every tile (keys are the addresses). */
static ipu_status read_back(ipu_ctx *ctx, const ipu_package *pkg, uint32_t slot, read_phase *out)
{
    const ipu_profile *p = &pkg->profile;
    memset(out, 0, sizeof *out);
    out->replayable = 1;
    out->table_bytes = ipu_calloc(ctx, p->tiles, sizeof *out->table_bytes);
    /* Sends index by (tile, cycle): a port sends one word a cycle. */
    size_t sends = 0, recvs = 0, cap_x = 0, cap_d = 0, cap_o = 0;
    IPU_TRY(out->table_bytes ? IPU_OK : IPU_NO_MEMORY(ctx));
    for (uint32_t t = 0; t < p->tiles; t++) {
        ipu_xrow *rows;
        uint32_t count = table_of(pkg, t, slot, &rows, &out->table_bytes[t]);
        ipu_status st = IPU_OK;
        for (uint32_t r = 0; r < count && st == IPU_OK; r++) {
            const ipu_xrow *row = &rows[r];
            if (row->op == IPU_XROW_SET_BASE || row->op == IPU_XROW_RESET_BASE || row->flags)
                out->replayable = 0;
            if (row->op != IPU_XROW_SEND)
                continue;
            st = ipu_grow(ctx, (void **)&out->phase.xfers, sizeof *out->phase.xfers, sends, &cap_x);
            if (st == IPU_OK)
                out->phase.xfers[sends++] =
                    (ipu_xfer){t, row->address, 4 * row->words, 0, 0, row->cycle, row->address, 0};
        }
        free(rows);
        IPU_TRY(st);
    }
    out->phase.count = sends;
    if (sends > 1)
        qsort(out->phase.xfers, sends, sizeof *out->phase.xfers, by_tile_and_cycle);
    /* Destinations: each receive row joins the send of its peer at its cycle less the latency. */
    ipu_xfer_dst *dsts = NULL;
    uint32_t *owner = NULL;
    for (uint32_t t = 0; t < p->tiles && out->replayable; t++) {
        ipu_xrow *rows;
        uint64_t bytes;
        uint32_t count = table_of(pkg, t, slot, &rows, &bytes);
        ipu_status st = IPU_OK;
        for (uint32_t r = 0; r < count && st == IPU_OK && out->replayable; r++) {
            const ipu_xrow *row = &rows[r];
            if (row->op != IPU_XROW_RECV)
                continue;
            size_t x = find_send(out->phase.xfers, sends, row->peer, row->cycle - p->exchange_latency);
            if (x == sends) {
                out->replayable = 0; /* a receive without its send: the device would fault */
                break;
            }
            st = ipu_grow(ctx, (void **)&dsts, sizeof *dsts, recvs, &cap_d);
            if (st == IPU_OK)
                st = ipu_grow(ctx, (void **)&owner, sizeof *owner, recvs, &cap_o);
            if (st == IPU_OK) {
                dsts[recvs] = (ipu_xfer_dst){t, row->address, row->address};
                owner[recvs++] = (uint32_t)x;
            }
        }
        free(rows);
        if (st != IPU_OK) {
            free(dsts), free(owner);
            return st;
        }
    }
    /* Group the destinations by transfer (counting sort). */
    out->phase.dsts = ipu_calloc(ctx, recvs ? recvs : 1, sizeof *out->phase.dsts);
    ipu_status status = out->phase.dsts ? IPU_OK : IPU_NO_MEMORY(ctx);
    for (size_t d = 0; d < recvs && status == IPU_OK; d++)
        out->phase.xfers[owner[d]].dst_count++;
    uint32_t next = 0;
    for (size_t x = 0; x < sends && status == IPU_OK; x++) {
        out->phase.xfers[x].first_dst = next;
        next += out->phase.xfers[x].dst_count;
        if (!out->phase.xfers[x].dst_count)
            out->replayable = 0; /* a send nobody receives */
        out->phase.xfers[x].dst_count = 0;
    }
    for (size_t d = 0; d < recvs && status == IPU_OK; d++) {
        ipu_xfer *x = &out->phase.xfers[owner[d]];
        out->phase.dsts[x->first_dst + x->dst_count++] = dsts[d];
    }
    out->phase.dst_total = recvs;
    free(dsts);
    free(owner);
    return status;
}

/* Words of rows, less the tables' count words, of per-tile table bytes. */
static void row_words(const ipu_profile *p, const uint64_t *bytes, uint64_t *most, uint64_t *total)
{
    *most = *total = 0;
    for (uint32_t t = 0; t < p->tiles; t++) {
        uint64_t words = bytes[t] ? (bytes[t] - 4) / 4 : 0;
        *most = words > *most ? words : *most;
        *total += words;
    }
}

/* Horizon, rows (table bytes[t] per tile) and first-activity spread of a
 * scheduled phase. */
static json_t *figures(const ipu_profile *p, const ipu_xphase *ph, const uint64_t *bytes)
{
    uint64_t horizon = 0, total, most;
    uint32_t *first = malloc((size_t)p->tiles * sizeof *first);
    if (!first)
        return NULL;
    for (uint32_t t = 0; t < p->tiles; t++)
        first[t] = UINT32_MAX;
    for (size_t i = 0; i < ph->count; i++) {
        const ipu_xfer *x = &ph->xfers[i];
        uint64_t arrival = (uint64_t)x->cycle + p->exchange_latency + x->bytes / 4;
        horizon = arrival > horizon ? arrival : horizon;
        first[x->src_tile] = x->cycle < first[x->src_tile] ? x->cycle : first[x->src_tile];
        for (uint32_t k = 0; k < x->dst_count; k++) {
            uint32_t t = ph->dsts[x->first_dst + k].tile, at = x->cycle + p->exchange_latency;
            first[t] = at < first[t] ? at : first[t];
        }
    }
    uint32_t earliest = UINT32_MAX, latest = 0;
    for (uint32_t t = 0; t < p->tiles; t++) {
        if (first[t] != UINT32_MAX) {
            earliest = first[t] < earliest ? first[t] : earliest;
            latest = first[t] > latest ? first[t] : latest;
        }
    }
    free(first);
    row_words(p, bytes, &most, &total);
    return json_pack("{s:I, s:I, s:I, s:I}", "horizon_cycles", (json_int_t)horizon, "max_row_words",
                     (json_int_t)most, "total_row_words", (json_int_t)total, "first_activity_span_cycles",
                     (json_int_t)(earliest == UINT32_MAX ? 0 : latest - earliest));
}

/* The recorded schedule's figures: rows as the tables hold them (base rows
 * too); horizon and first-activity spread only when every row was read as a
 * transfer. */
static json_t *recorded_figures(const ipu_profile *p, const read_phase *r)
{
    json_t *out = figures(p, &r->phase, r->table_bytes);
    if (out && !r->replayable) {
        json_object_del(out, "horizon_cycles");
        json_object_del(out, "first_activity_span_cycles");
    }
    return out;
}

/* Is program phase `phase` asked for (phases: NULL for all, else an array of integers)? */
static int wanted(const json_t *phases, uint32_t phase)
{
    if (!phases)
        return 1;
    size_t i;
    json_t *v;
    json_array_foreach(phases, i, v) if (json_integer_value(v) == (json_int_t)phase) return 1;
    return 0;
}

/* The control op whose exchange half is program phase `phase`, NULL when
 * that phase is not an exchange phase of pkg (phases number init ops first,
 * each op a compute (2k) and an exchange (2k + 1) half). */
static const ipu_pkg_op *exchange_op(const ipu_package *pkg, json_int_t phase)
{
    if (phase < 0 || phase % 2 == 0)
        return NULL;
    size_t k = (size_t)(phase - 1) / 2;
    const ipu_pkg_op *op = k < pkg->init_count                     ? &pkg->init_ops[k]
                           : k - pkg->init_count < pkg->main_count ? &pkg->main_ops[k - pkg->init_count]
                                                                   : NULL;
    return op && op->op == IPU_OP_STEP && op->b != IPU_NO_SLOT ? op : NULL;
}

/* Replay one exchange phase into a JSON entry, scheduled in mode. */
static ipu_status replay_phase(ipu_ctx *ctx, const ipu_package *pkg, const ipu_xmode *mode, uint32_t phase,
                               const ipu_pkg_op *op, json_t *list)
{
    read_phase r;
    ipu_status status = read_back(ctx, pkg, op->b, &r);
    uint64_t *bytes = ipu_calloc(ctx, pkg->profile.tiles, sizeof *bytes);
    char label[160] = "";
    ipu_pkg_compiler_op_label(pkg, op->origin[1], label, sizeof label);
    json_t *recorded = status == IPU_OK && bytes ? recorded_figures(&pkg->profile, &r) : NULL;
    json_t *entry = recorded ? json_pack("{s:I, s:s, s:I, s:b, s:o}", "phase", (json_int_t)phase, "op", label,
                                         "transfers", (json_int_t)r.phase.count, "replayed", r.replayable,
                                         "recorded", recorded)
                             : NULL;
    if (status == IPU_OK && !entry)
        status = IPU_NO_MEMORY(ctx);
    if (status == IPU_OK && r.replayable) {
        /* The scheduler breaks ties in list order: give it the transfers in
         * the order the recorded schedule placed them. */
        qsort(r.phase.xfers, r.phase.count, sizeof *r.phase.xfers, by_cycle_and_tile);
        status = ipu_exchange_schedule(ctx, &pkg->profile, &r.phase, mode);
        if (status == IPU_OK)
            status = ipu_exchange_measure(ctx, &pkg->profile, &r.phase, bytes, NULL);
        json_t *again = status == IPU_OK ? figures(&pkg->profile, &r.phase, bytes) : NULL;
        int fits = 1;
        for (uint32_t t = 0; t < pkg->profile.tiles; t++)
            fits &= bytes[t] <= r.table_bytes[t];
        if (again) {
            json_object_set_new(again, "within_row_budget", json_boolean(fits));
            json_object_set_new(entry, "rescheduled", again);
        } else if (status == IPU_OK) {
            status = IPU_NO_MEMORY(ctx);
        }
    }
    if (status == IPU_OK)
        json_array_append_new(list, entry);
    else
        json_decref(entry);
    free(bytes);
    read_phase_free(&r);
    return status;
}

ipu_status ipu_package_exchange_replay(ipu_ctx *ctx, const ipu_package *pkg, const char *options_json,
                                       char **out_json)
{
    if (!pkg || !options_json || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_package_exchange_replay: NULL argument");
    json_error_t error;
    json_t *options = json_loads(options_json, JSON_REJECT_DUPLICATES, &error);
    json_t *phases = options ? json_object_get(options, "phases") : NULL;
    size_t i;
    json_t *v;
    json_t *words = options ? json_object_get(options, "stream_words") : NULL;
    json_t *balance = options ? json_object_get(options, "balance_streams") : NULL;
    int bad = !json_is_object(options) || (phases && !json_is_array(phases)) ||
              (words && (!json_is_integer(words) || json_integer_value(words) < 1 ||
                         json_integer_value(words) > (1 << 20))) ||
              (balance && !json_is_boolean(balance)) || (json_is_true(balance) && !words);
    json_array_foreach(phases, i, v) bad |= !json_is_integer(v) || json_integer_value(v) < 0;
    if (bad) {
        json_decref(options);
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "exchange replay options: expected {\"phases\": [non-negative integers], "
                        "\"stream_words\": 1 to 1048576, \"balance_streams\": true or false (needs "
                        "stream_words)}, each optional");
    }
    json_array_foreach(phases, i, v)
    {
        json_int_t phase = json_integer_value(v);
        if (exchange_op(pkg, phase))
            continue;
        json_decref(options);
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "phase %lld is not an exchange phase of this package: an exchange phase is the "
                        "odd phase 2k + 1 of a control op k that exchanges (bench exchange without phases "
                        "lists them all)",
                        (long long)phase);
    }
    ipu_xmode mode = {words ? (uint32_t)json_integer_value(words) : 0, json_is_true(balance), 0};
    json_t *list = json_array();
    ipu_status status = IPU_OK;
    /* Program phases: init ops first, each op a compute (2k) and an exchange (2k + 1) half. */
    for (int program = 0; program < 2 && status == IPU_OK; program++) {
        const ipu_pkg_op *ops = program ? pkg->main_ops : pkg->init_ops;
        size_t count = program ? pkg->main_count : pkg->init_count, base = program ? pkg->init_count : 0;
        for (size_t k = 0; k < count && status == IPU_OK; k++) {
            uint32_t phase = (uint32_t)(2 * (base + k) + 1);
            if (exchange_op(pkg, phase) && wanted(phases, phase)) {
                status = IPU_CHECK_CANCEL(ctx);
                if (status == IPU_OK)
                    status = replay_phase(ctx, pkg, &mode, phase, &ops[k], list);
            }
        }
    }
    json_t *result = status == IPU_OK ? json_pack("{s:I, s:o}", "latency", (json_int_t)pkg->profile.exchange_latency,
                                                  "phases", list)
                                      : NULL;
    if (status != IPU_OK)
        json_decref(list);
    *out_json = result ? json_dumps(result, JSON_COMPACT) : NULL;
    if (status == IPU_OK && !*out_json)
        status = IPU_NO_MEMORY(ctx);
    json_decref(result);
    json_decref(options);
    return status;
}
