/* stress.h: the exchange-stress workload: hand-built device programs that
 * drive statically timed exchange without the planner (unicast, multicast,
 * paired 64-bit multicast, multicast loopback; standard or interleaved
 * sources; absolute or OUTGOING_BASE-relative sources) over Repeat
 * iterations, and record the exact bytes every destination must hold.
 */
#ifndef IPU_STRESS_H
#define IPU_STRESS_H

#include <stdint.h>

/* The payload word k of (case, tile, iteration): distinct exact u32 values.
 * harness/ipu_e2e/stress.py computes the same function independently. */
uint32_t ipu_stress_payload(uint32_t case_index, uint32_t tile, uint32_t iteration, uint32_t k);

#endif
