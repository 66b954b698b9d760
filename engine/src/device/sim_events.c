/* sim_events.c: the memory events the simulator records when asked
 * (device.h ipu_memory_events): every program phase it executes, and the
 * allocations of the package's table whose lives begin and end as it runs.
 * An allocation is live at an executed phase when the phase lies in its
 * lifetime, first..last (format.h), as the allocation checks say: its life
 * begins as its first phase starts and ends as its last ends.  Where the
 * control flow goes back (a Repeat's next iteration, the main program's
 * next invocation) the lives that do not hold at the phase it goes back to
 * end there (a body allocation still live at the body's end), and those
 * that hold again begin (an allocation carried into the body).  The
 * run-time memory timeline (report/timeline.c) is built from these events.
 */
#include <stdlib.h>
#include <string.h>

#include "device/sim.h"

void sim_events_free(sim *s)
{
    ipu_memory_events *e = &s->events;
    free(e->program), free(e->phase), free(e->iteration), free(e->invocation);
    free(e->at), free(e->alloc);
    free(s->born_start), free(s->born), free(s->alive);
    memset(e, 0, sizeof *e);
    s->born_start = s->born = NULL;
    s->alive = NULL;
}

ipu_status sim_events_reset(sim *s, ipu_ctx *ctx, const ipu_package *pkg)
{
    sim_events_free(s);
    s->events_failed = 0;
    s->invocation = 0;
    s->entered = UINT32_MAX;
    if (!s->events_on)
        return IPU_OK;
    /* The allocations whose life begins at each phase (counting sort). */
    s->born_start = ipu_calloc(ctx, (size_t)s->phases + 2, sizeof *s->born_start);
    s->born = ipu_malloc(ctx, (pkg->alloc_count ? pkg->alloc_count : 1) * sizeof *s->born);
    s->alive = ipu_calloc(ctx, pkg->alloc_count ? pkg->alloc_count : 1, 1);
    if (!s->born_start || !s->born || !s->alive)
        return IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < pkg->alloc_count; i++)
        s->born_start[pkg->allocs[i].first + 1]++;
    for (uint32_t p = 0; p <= s->phases; p++)
        s->born_start[p + 1] += s->born_start[p];
    uint32_t *fill = ipu_calloc(ctx, (size_t)s->phases + 1, sizeof *fill);
    if (!fill)
        return IPU_NO_MEMORY(ctx);
    for (size_t i = 0; i < pkg->alloc_count; i++) {
        uint32_t first = pkg->allocs[i].first;
        s->born[s->born_start[first] + fill[first]++] = (uint32_t)i;
    }
    free(fill);
    return IPU_OK;
}

/* Grow an array of n elements of size bytes to hold one more (with the
 * running program's allocator). */
static int grow(sim *s, void **array, size_t n, size_t *capacity, size_t size)
{
    if (n < *capacity)
        return 1;
    size_t more = *capacity ? 2 * *capacity : 4096;
    void *bigger = ipu_realloc(s->ctx, *array, more * size);
    if (!bigger)
        return 0;
    *array = bigger;
    *capacity = more;
    return 1;
}

/* An event at the executed phase recorded last. */
static void add_event(sim *s, uint32_t alloc)
{
    ipu_memory_events *e = &s->events;
    size_t capacity = e->capacity;
    if (!grow(s, (void **)&e->at, e->count, &capacity, sizeof *e->at) ||
        !grow(s, (void **)&e->alloc, e->count, &e->capacity, sizeof *e->alloc)) {
        s->events_failed = 1;
        return;
    }
    e->at[e->count] = (uint32_t)(e->phase_count - 1);
    e->alloc[e->count++] = alloc;
}

static int record_phase(sim *s)
{
    ipu_memory_events *e = &s->events;
    size_t capacity = e->phase_capacity;
    int ok = grow(s, (void **)&e->program, e->phase_count, &capacity, sizeof *e->program);
    capacity = e->phase_capacity;
    ok = ok && grow(s, (void **)&e->phase, e->phase_count, &capacity, sizeof *e->phase);
    capacity = e->phase_capacity;
    ok = ok && grow(s, (void **)&e->iteration, e->phase_count, &capacity, sizeof *e->iteration);
    ok = ok && grow(s, (void **)&e->invocation, e->phase_count, &e->phase_capacity, sizeof *e->invocation);
    if (!ok) {
        s->events_failed = 1;
        return 0;
    }
    int in_main = strcmp(s->program, "main") == 0;
    e->program[e->phase_count] = (uint8_t)in_main;
    e->phase[e->phase_count] = s->phase;
    e->iteration[e->phase_count] = s->depth ? s->loops[s->depth - 1].iteration : IPU_NO_ITERATION;
    e->invocation[e->phase_count++] = in_main ? s->invocation : 0;
    return 1;
}

/* Entering a phase: where the control flow went back, the lives that no
 * longer hold end (at the phase before, after its own ends) and those that
 * hold again begin; then the lives whose first phase this is begin.  Every
 * phase's events are its beginnings, then its ends. */
void sim_events_enter(sim *s)
{
    if (!s->events_on || s->events_failed)
        return;
    const ipu_package *pkg = s->pkg;
    int back = s->entered != UINT32_MAX && s->phase < s->entered && s->phase < s->phases;
    for (size_t a = 0; back && a < pkg->alloc_count; a++) {
        const ipu_pkg_alloc *al = &pkg->allocs[a];
        if (s->alive[a] && !(al->first <= s->phase && s->phase <= al->last)) {
            s->alive[a] = 0;
            add_event(s, (uint32_t)a | IPU_EVENT_FREE);
        }
    }
    if (!record_phase(s) || s->phase >= s->phases)
        return;
    for (size_t a = 0; back && a < pkg->alloc_count; a++) {
        const ipu_pkg_alloc *al = &pkg->allocs[a];
        if (!s->alive[a] && al->first < s->phase && s->phase <= al->last) {
            s->alive[a] = 1;
            add_event(s, (uint32_t)a);
        }
    }
    s->entered = s->phase;
    /* Injected: the lives beginning at a phase are recorded at the next (phase 0's: none). */
    uint32_t born = s->events_on == IPU_EVENTS_BEGIN_LATE ? s->phase - 1 : s->phase;
    for (uint32_t i = born < s->phases ? s->born_start[born] : 0; born < s->phases && i < s->born_start[born + 1];
         i++) {
        uint32_t a = s->born[i];
        if (!s->alive[a]) {
            s->alive[a] = 1;
            add_event(s, a);
        }
    }
}

void sim_events_end(sim *s, uint32_t alloc)
{
    if (!s->events_on || s->events_failed || !s->alive[alloc])
        return;
    s->alive[alloc] = 0;
    add_event(s, alloc | IPU_EVENT_FREE);
}
