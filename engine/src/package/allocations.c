/* allocations.c: a package's allocation table as the device and its fault
 * reports use it: a per-tile index sorted by address, the search for the
 * allocation live at a phase that holds an access whole (or, for a fault,
 * the one holding its first byte), and compiler op labels.  Allocations of
 * one tile may share addresses when their lifetimes are disjoint, so the
 * index keeps, per position, the largest end reached so far: a search walks
 * down from the last allocation starting at or below the address and stops
 * where nothing below reaches past it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "package/package.h"

typedef struct sort_key {
    uint32_t tile, address, first, index;
} sort_key;

static int by_tile_address(const void *x, const void *y)
{
    const sort_key *a = x, *b = y;
    if (a->tile != b->tile)
        return a->tile < b->tile ? -1 : 1;
    if (a->address != b->address)
        return a->address < b->address ? -1 : 1;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

ipu_status ipu_pkg_index_allocs(ipu_ctx *ctx, ipu_package *pkg)
{
    free(pkg->tile_alloc_start);
    free(pkg->tile_allocs);
    free(pkg->tile_alloc_reach);
    uint32_t tiles = pkg->profile.tiles;
    size_t n = pkg->alloc_count;
    pkg->tile_alloc_start = ipu_calloc(ctx, (size_t)tiles + 1, sizeof *pkg->tile_alloc_start);
    pkg->tile_allocs = ipu_malloc(ctx, (n ? n : 1) * sizeof *pkg->tile_allocs);
    pkg->tile_alloc_reach = ipu_malloc(ctx, (n ? n : 1) * sizeof *pkg->tile_alloc_reach);
    sort_key *keys = ipu_malloc(ctx, (n ? n : 1) * sizeof *keys);
    if (!pkg->tile_alloc_start || !pkg->tile_allocs || !pkg->tile_alloc_reach || !keys) {
        free(keys);
        return IPU_NO_MEMORY(ctx);
    }
    for (size_t i = 0; i < n; i++) {
        const ipu_pkg_alloc *a = &pkg->allocs[i];
        keys[i] = (sort_key){a->tile, a->address, a->first, (uint32_t)i};
        pkg->tile_alloc_start[a->tile + 1]++;
    }
    qsort(keys, n, sizeof *keys, by_tile_address);
    for (uint32_t t = 0; t < tiles; t++)
        pkg->tile_alloc_start[t + 1] += pkg->tile_alloc_start[t];
    for (size_t i = 0; i < n; i++) {
        const ipu_pkg_alloc *a = &pkg->allocs[keys[i].index];
        uint32_t end = a->address + a->size;
        int first_of_tile = i == pkg->tile_alloc_start[a->tile];
        pkg->tile_allocs[i] = keys[i].index;
        pkg->tile_alloc_reach[i] =
            first_of_tile || pkg->tile_alloc_reach[i - 1] < end ? end : pkg->tile_alloc_reach[i - 1];
    }
    free(keys);
    return IPU_OK;
}

int64_t ipu_pkg_alloc_find(const ipu_package *pkg, uint32_t tile, uint32_t address, uint32_t size,
                           uint32_t phase, int64_t *holder)
{
    if (holder)
        *holder = -1;
    if (!pkg->tile_alloc_start || tile >= pkg->profile.tiles)
        return -1;
    uint32_t lo = pkg->tile_alloc_start[tile], hi = pkg->tile_alloc_start[tile + 1], begin = lo;
    /* One past the last allocation starting at or below address. */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (pkg->allocs[pkg->tile_allocs[mid]].address <= address)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t end = (uint64_t)address + (size ? size : 1);
    int64_t live_holder = -1, any_holder = -1;
    uint64_t nearest = UINT64_MAX; /* of the holders not live: phases between it and phase */
    for (uint32_t i = lo; i-- > begin && pkg->tile_alloc_reach[i] > address;) {
        const ipu_pkg_alloc *a = &pkg->allocs[pkg->tile_allocs[i]];
        if ((uint64_t)a->address + a->size <= address)
            continue;
        int live = ipu_pkg_alloc_live(a, phase);
        if (live && (uint64_t)a->address + a->size >= end)
            return pkg->tile_allocs[i];
        if (live && live_holder < 0)
            live_holder = pkg->tile_allocs[i];
        uint64_t distance = live ? 0 : phase < a->first ? a->first - phase : (uint64_t)phase - a->last;
        if (distance < nearest) {
            nearest = distance;
            any_holder = pkg->tile_allocs[i];
        }
    }
    if (holder)
        *holder = live_holder >= 0 ? live_holder : any_holder;
    return -1;
}

int64_t ipu_pkg_alloc_at(const ipu_package *pkg, uint32_t tile, uint32_t address, uint32_t phase)
{
    return ipu_pkg_alloc_find(pkg, tile, address, 1, phase, NULL);
}

int64_t ipu_pkg_alloc_nearest(const ipu_package *pkg, uint32_t tile, uint32_t address, uint32_t phase)
{
    int64_t holder, live = ipu_pkg_alloc_find(pkg, tile, address, 1, phase, &holder);
    return live >= 0 ? -1 : holder;
}

int64_t ipu_pkg_alloc_before(const ipu_package *pkg, uint32_t tile, uint32_t address, uint32_t phase)
{
    int64_t live = ipu_pkg_alloc_find(pkg, tile, address, 1, phase, NULL);
    if (live < 0 || tile >= pkg->profile.tiles)
        return -1;
    int64_t before = -1, latest = -1;
    for (uint32_t i = pkg->tile_alloc_start[tile]; i < pkg->tile_alloc_start[tile + 1]; i++) {
        const ipu_pkg_alloc *a = &pkg->allocs[pkg->tile_allocs[i]];
        if (pkg->tile_allocs[i] == live || address < a->address || address - a->address >= a->size)
            continue;
        if (a->last < phase && (before < 0 || a->last > pkg->allocs[before].last))
            before = pkg->tile_allocs[i];
        if (latest < 0 || a->last > pkg->allocs[latest].last)
            latest = pkg->tile_allocs[i];
    }
    return before >= 0 ? before : latest >= 0 ? latest : live;
}

void ipu_pkg_compiler_op_label(const ipu_package *pkg, uint32_t op, char *out, size_t size)
{
    if (op == IPU_NO_OP || op >= pkg->compiler_op_count) {
        snprintf(out, size, "%s", "");
        return;
    }
    const ipu_pkg_compiler_op *c = &pkg->compiler_ops[op];
    snprintf(out, size, "op %u %s %s", op, ipu_pkg_string(pkg, c->kind_offset),
             ipu_pkg_string(pkg, c->name_offset));
}
