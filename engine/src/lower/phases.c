/* phases.c: how the low program's steps become the package's control ops
 * and program phases (format.h): each program (init, then main) emits a
 * control op per step, the Repeat op before its body's first step, and an
 * exchange step joins the compute step just before it when both are in the
 * same program and the same side of the Repeat body boundary (and the
 * exchange does not open the body).  Op g's phases are 2g (its compute or
 * host half) and 2g + 1 (its exchange half), init ops counted first.  The
 * package encoder emits by this rule, and every report numbers steps by
 * it, so a phase means the same thing in a fault, a lifetime and a report. */
#include <stdint.h>

#include "lower/program.h"

static int in_body(const ipu_low_program *prog, size_t s)
{
    return !prog->steps[s].init && prog->repeat_count && s >= prog->repeat_first &&
           s < (size_t)prog->repeat_first + prog->repeat_count;
}

/* Every step's phase into phase[] (when given); returns the phase of step
 * `wanted` (when in range). */
static uint32_t walk(const ipu_low_program *prog, uint32_t *phase, size_t wanted)
{
    uint32_t length[2] = {0, 0}; /* control ops so far: main, init */
    uint32_t found = 0;
    int found_init = 0;
    for (size_t s = 0; s < prog->step_count; s++) {
        const ipu_low_step *step = &prog->steps[s];
        int init = step->init != 0;
        if (!init && prog->repeat_count && s == prog->repeat_first)
            length[0]++; /* the Repeat op */
        const ipu_low_step *prev = s ? &prog->steps[s - 1] : NULL;
        int joins = step->kind == IPU_LOW_EXCHANGE && prev && prev->kind == IPU_LOW_COMPUTE &&
                    prev->init == step->init && in_body(prog, s - 1) == in_body(prog, s) &&
                    !(in_body(prog, s) && s == prog->repeat_first) && length[init];
        uint32_t op = joins ? length[init] - 1 : length[init]++;
        uint32_t at = 2 * op + (step->kind == IPU_LOW_EXCHANGE);
        if (phase)
            phase[s] = at;
        if (s == wanted)
            found = at, found_init = init;
    }
    /* Main ops follow the init ops. */
    for (size_t s = 0; phase && s < prog->step_count; s++)
        if (!prog->steps[s].init)
            phase[s] += 2 * length[1];
    return found + (found_init ? 0 : 2 * length[1]);
}

void ipu_low_step_phases(const ipu_low_program *prog, uint32_t *phase) { walk(prog, phase, SIZE_MAX); }

uint32_t ipu_low_step_phase(const ipu_low_program *prog, size_t step) { return walk(prog, NULL, step); }
