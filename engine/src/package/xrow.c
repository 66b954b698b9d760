/* xrow.c: exchange-table entries: full, continuation, repeat and run rows
 * (xrow.h). */
#include "package/xrow.h"

#include "core/core.h"
#include "package/format.h"

#define GAP_MAX 0xFFFFu
#define REPEAT_GAP_MAX 0xFFu
#define CONTINUED_WORDS_MAX 0xFFFFu
#define KIND_FLAGS (IPU_XFLAG_CONTINUE | IPU_XFLAG_REPEAT | IPU_XFLAG_RUN)
#define ENTRY_FLAGS (KIND_FLAGS | IPU_XFLAG_DESCEND)

uint32_t ipu_xrow_width(const ipu_xrow *row) { return (row->flags & IPU_XFLAG_PAIRED) ? 8u : 4u; }

static int is_transfer(uint32_t op) { return op == IPU_XROW_SEND || op == IPU_XROW_RECV; }

/* Bytes an entry takes, from its first word (one kind flag at most). */
static uint32_t size_of(uint32_t w0)
{
    uint32_t kind = (w0 >> 8) & KIND_FLAGS;
    return kind == IPU_XFLAG_CONTINUE ? IPU_XROW_CONTINUED_SIZE : kind ? IPU_XROW_REPEAT_SIZE : IPU_XROW_SIZE;
}

uint32_t ipu_xrow_gap(const ipu_xrow *prev, const ipu_xrow *row) { return row->cycle - (prev->cycle + prev->words); }

uint32_t ipu_xrow_size(const ipu_xrow *prev, const ipu_xrow *row, int adjacency)
{
    if (adjacency == IPU_XROW_APART || !prev || !is_transfer(row->op) || prev->op != row->op || prev->flags != row->flags)
        return IPU_XROW_SIZE;
    uint64_t end = (uint64_t)prev->cycle + prev->words;
    if (row->cycle < end || row->cycle - end > GAP_MAX || row->words == 0 || row->words > CONTINUED_WORDS_MAX)
        return IPU_XROW_SIZE;
    return row->words == prev->words && row->cycle - end <= REPEAT_GAP_MAX ? IPU_XROW_REPEAT_SIZE
                                                                          : IPU_XROW_CONTINUED_SIZE;
}

int ipu_xrow_runs_on(const ipu_xrow *prev, const ipu_xrow *row, int adjacency, int run_adjacency, uint32_t gap)
{
    return ipu_xrow_size(prev, row, adjacency) == IPU_XROW_REPEAT_SIZE && adjacency == run_adjacency &&
           ipu_xrow_gap(prev, row) == gap && row->peer == prev->peer + (row->op == IPU_XROW_RECV);
}

uint32_t ipu_xrow_put(uint8_t *at, const ipu_xrow *prev, const ipu_xrow *row, uint32_t size, int adjacency)
{
    uint32_t w0 = row->op | row->flags << 8 | row->peer << 16;
    uint32_t gap = size == IPU_XROW_SIZE ? 0 : ipu_xrow_gap(prev, row);
    uint32_t down = adjacency == IPU_XROW_BEFORE ? IPU_XFLAG_DESCEND : 0;
    if (size == IPU_XROW_REPEAT_SIZE) {
        ipu_store_u32(at, gap | (row->flags | IPU_XFLAG_REPEAT | down) << 8 | row->peer << 16);
    } else if (size == IPU_XROW_CONTINUED_SIZE) {
        ipu_store_u32(at, w0 | (IPU_XFLAG_CONTINUE | down) << 8);
        ipu_store_u32(at + 4, gap | row->words << 16);
    } else {
        ipu_store_u32(at, w0);
        ipu_store_u32(at + 4, row->cycle);
        ipu_store_u32(at + 8, row->words);
        ipu_store_u32(at + 12, row->address);
    }
    return size;
}

uint32_t ipu_xrow_put_run(uint8_t *at, uint32_t flags, uint32_t count, uint32_t gap, int adjacency)
{
    uint32_t down = adjacency == IPU_XROW_BEFORE ? IPU_XFLAG_DESCEND : 0;
    ipu_store_u32(at, gap | (flags | IPU_XFLAG_RUN | down) << 8 | count << 16);
    return IPU_XROW_REPEAT_SIZE;
}

int ipu_xrow_fits(const uint8_t *at, size_t avail)
{
    return avail >= IPU_XROW_REPEAT_SIZE && avail >= size_of(ipu_load_u32(at));
}

void ipu_xrow_reader_init(ipu_xrow_reader *r, const uint8_t *entries, size_t avail, uint32_t count)
{
    *r = (ipu_xrow_reader){.base = entries, .avail = avail, .entries = count};
}

/* The row after r->last, continuing it by 'gap' in 'down' order. */
static void follow(const ipu_xrow_reader *r, ipu_xrow *row, uint32_t peer, uint32_t gap, uint32_t words, int down)
{
    const ipu_xrow *prev = &r->last;
    *row = (ipu_xrow){prev->op, prev->flags, peer, prev->cycle + prev->words + gap, words, 0};
    row->address = down ? prev->address - words * ipu_xrow_width(row) : prev->address + prev->words * ipu_xrow_width(prev);
}

/* The entry at r->offset: 1 and its row, 0 for a run (r->run_* set), -1 malformed. */
static int read_entry(ipu_xrow_reader *r, ipu_xrow *row)
{
    const uint8_t *at = r->base + r->offset;
    if (!ipu_xrow_fits(at, r->avail - r->offset))
        return -1;
    uint32_t w0 = ipu_load_u32(at), kind = (w0 >> 8) & KIND_FLAGS, flags = (w0 >> 8) & 0xFF & ~ENTRY_FLAGS;
    int down = ((w0 >> 8) & IPU_XFLAG_DESCEND) != 0;
    r->entry_size = size_of(w0);
    if (!kind) {
        *row = (ipu_xrow){w0 & 0xFF, flags, w0 >> 16, ipu_load_u32(at + 4), ipu_load_u32(at + 8), ipu_load_u32(at + 12)};
        return down ? -1 : 1;
    }
    const ipu_xrow *prev = &r->last;
    if ((kind & (kind - 1)) || !r->any || !is_transfer(prev->op) || prev->flags != flags)
        return -1;
    if (kind == IPU_XFLAG_CONTINUE) {
        uint32_t w1 = ipu_load_u32(at + 4);
        follow(r, row, w0 >> 16, w1 & 0xFFFF, w1 >> 16, down);
        return (w0 & 0xFF) == prev->op ? 1 : -1;
    }
    if (kind == IPU_XFLAG_REPEAT) {
        follow(r, row, w0 >> 16, w0 & 0xFF, prev->words, down);
        return 1;
    }
    r->run_left = w0 >> 16, r->run_gap = w0 & 0xFF, r->run_down = down;
    return r->run_left ? 0 : -1; /* a run of no rows is malformed */
}

int ipu_xrow_next(ipu_xrow_reader *r, ipu_xrow *row)
{
    if (!r->run_left && r->read == r->entries)
        return 0;
    if (++r->rows > IPU_XTABLE_ROWS_MAX)
        return -1;
    if (!r->run_left) {
        r->entry = r->read++;
        r->offset = r->next;
        int got = read_entry(r, row);
        if (got < 0)
            return -1;
        r->next = r->offset + r->entry_size;
        if (got > 0) {
            r->last = *row, r->any = 1;
            return 1;
        }
    }
    const ipu_xrow *prev = &r->last;
    follow(r, row, prev->peer + (prev->op == IPU_XROW_RECV), r->run_gap, prev->words, (int)r->run_down);
    r->run_left--;
    r->last = *row;
    return 1;
}
