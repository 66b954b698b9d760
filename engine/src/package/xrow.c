/* xrow.c: one exchange-table row: full, continuation or repeat (xrow.h). */
#include "package/xrow.h"

#include "core/core.h"
#include "package/format.h"

#define GAP_MAX 0xFFFFu
#define REPEAT_GAP_MAX 0xFFu
#define CONTINUED_WORDS_MAX 0xFFFFu
#define LINK_FLAGS (IPU_XFLAG_CONTINUE | IPU_XFLAG_REPEAT)
#define ROW_FLAGS (LINK_FLAGS | IPU_XFLAG_DESCEND)

uint32_t ipu_xrow_width(const ipu_xrow *row) { return (row->flags & IPU_XFLAG_PAIRED) ? 8u : 4u; }

static int is_transfer(uint32_t op) { return op == IPU_XROW_SEND || op == IPU_XROW_RECV; }

/* Bytes a row takes, from its first word. */
static uint32_t size_of(uint32_t w0)
{
    uint32_t link = (w0 >> 8) & LINK_FLAGS;
    return link == IPU_XFLAG_REPEAT ? IPU_XROW_REPEAT_SIZE : link == IPU_XFLAG_CONTINUE ? IPU_XROW_CONTINUED_SIZE : IPU_XROW_SIZE;
}

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

uint32_t ipu_xrow_put(uint8_t *at, const ipu_xrow *prev, const ipu_xrow *row, uint32_t size, int adjacency)
{
    uint32_t w0 = row->op | row->flags << 8 | row->peer << 16;
    uint32_t gap = size == IPU_XROW_SIZE ? 0 : row->cycle - (prev->cycle + prev->words);
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

int ipu_xrow_fits(const uint8_t *at, size_t avail)
{
    return avail >= IPU_XROW_REPEAT_SIZE && avail >= size_of(ipu_load_u32(at));
}

uint32_t ipu_xrow_get(const uint8_t *at, size_t avail, const ipu_xrow *prev, ipu_xrow *row)
{
    if (!ipu_xrow_fits(at, avail))
        return 0;
    uint32_t w0 = ipu_load_u32(at), size = size_of(w0), link = (w0 >> 8) & ROW_FLAGS;
    row->op = w0 & 0xFF;
    row->flags = (w0 >> 8) & 0xFF & ~ROW_FLAGS;
    row->peer = w0 >> 16;
    if (size == IPU_XROW_SIZE) {
        if (link)
            return 0; /* both continuation flags, or descending */
        row->cycle = ipu_load_u32(at + 4);
        row->words = ipu_load_u32(at + 8);
        row->address = ipu_load_u32(at + 12);
        return size;
    }
    uint32_t gap;
    if (size == IPU_XROW_REPEAT_SIZE) {
        gap = w0 & 0xFF;
        row->op = prev ? prev->op : 0;
        row->words = prev ? prev->words : 0;
    } else {
        uint32_t w1 = ipu_load_u32(at + 4);
        gap = w1 & 0xFFFF;
        row->words = w1 >> 16;
    }
    if (!prev || !is_transfer(row->op) || prev->op != row->op || prev->flags != row->flags)
        return 0;
    row->cycle = prev->cycle + prev->words + gap;
    row->address = (link & IPU_XFLAG_DESCEND) ? prev->address - row->words * ipu_xrow_width(row)
                                              : prev->address + prev->words * ipu_xrow_width(prev);
    return size;
}
