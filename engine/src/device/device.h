/* device.h: the device interface.  A device is a struct of function pointers
 * plus its own state (as ggml's backends): the simulator is one
 * implementation.  The device knows nothing of the compiler; it reads only
 * packages, host stream buffers, and reports cycles and faults.
 */
#ifndef IPU_DEVICE_H
#define IPU_DEVICE_H

#include <jansson.h>

#include "core/core.h"
#include "package/package.h"

/* Fault kinds (DEVICE.md "Faults"). */
typedef enum ipu_fault_kind {
    IPU_FAULT_NONE = 0,
    IPU_FAULT_UNINITIALIZED_READ,
    IPU_FAULT_PROTECTED_WRITE,
    IPU_FAULT_OUT_OF_BOUNDS,
    IPU_FAULT_MISALIGNED,
    IPU_FAULT_ELEMENT_CONFLICT,
    IPU_FAULT_EXCHANGE_UNMATCHED_RECEIVE,
    IPU_FAULT_EXCHANGE_WINDOW_MISMATCH,
    IPU_FAULT_EXCHANGE_PORT_CONFLICT,
    IPU_FAULT_EXCHANGE_CONFLICTING_WRITERS,
    IPU_FAULT_EXCHANGE_READ_WRITE_CONFLICT,
    IPU_FAULT_MISSING_KERNEL,
    IPU_FAULT_MALFORMED_DESCRIPTOR,
    IPU_FAULT_OPERAND_OUTSIDE_ALLOCATION,
    IPU_FAULT_STALE_READ,
    IPU_FAULT_EXCHANGE_BASE_NOT_RESTORED,
    IPU_FAULT_KIND_COUNT
} ipu_fault_kind;

const char *ipu_fault_kind_name(int kind);

typedef struct ipu_fault {
    int kind;
    uint32_t tile;
    uint32_t address_lo, address_hi; /* [lo, hi); both 0 when no address applies */
    const char *program;             /* "init" or "main" */
    uint32_t op_index;               /* control op */
    uint64_t step;                   /* executed steps so far in this run */
    int entry;                       /* kernel entry, -1 when none */
    int descriptor;                  /* index in the compute list, -1 when none */
    int row;                         /* exchange/host/patch row, -1 when none */
    uint32_t phase;                  /* program phase (format.h) */
    uint32_t iteration;              /* of the innermost Repeat running, IPU_NO_ITERATION outside one */
    uint32_t origin;                 /* compiler op of the phase, IPU_NO_OP when none */
    int64_t alloc;                   /* the allocation live at phase holding the accessed bytes or operand, -1: none */
    int64_t nearest;                 /* when none is live: the one holding them whose life is nearest, -1 */
    int64_t other;                   /* the allocation it reached, or the other operand's, -1 */
    char detail[256];
} ipu_fault;

/* A host stream buffer, aligned with the package's streams. */
typedef struct ipu_host_buffer {
    uint8_t *data;
    size_t size;
    int present;
} ipu_host_buffer;

/* Called after every program phase the device runs (phase: format.h's
 * numbering; iteration: of the innermost Repeat running, IPU_NO_ITERATION
 * outside one).  A status other than IPU_OK stops the run with it. */
#define IPU_NO_ITERATION 0xFFFFFFFFu
typedef ipu_status (*ipu_phase_observer)(void *user, uint32_t phase, uint32_t iteration);

/* The memory events a device records (ipu_device_configure
 * {"memory_events": true}, from the next initialize): every program phase it
 * executes, in order (init program 0, main 1; its phase; the iteration of
 * the innermost Repeat, IPU_NO_ITERATION outside one; the invocation, 0 for
 * the init program), and the allocations whose lives begin as a phase
 * starts and end as it ends (allocation index, at: the executed phase). */
#define IPU_EVENT_FREE 0x80000000u /* in alloc: the life ends */
typedef struct ipu_memory_events {
    size_t phase_count, phase_capacity;
    uint8_t *program;
    uint32_t *phase, *iteration, *invocation;
    size_t count, capacity;
    uint32_t *at, *alloc;
} ipu_memory_events;

/* Memory event recording: off, on, or on with a test's mutation of the
 * recorder itself (a life's beginning recorded one phase late). */
enum { IPU_EVENTS_OFF = 0, IPU_EVENTS_ON = 1, IPU_EVENTS_BEGIN_LATE = 2 };

#define IPU_MAX_TRACED_TILES 64

typedef struct ipu_device_iface {
    const char *name;
    /* Load SRAM and run the init program; buffers[i] serves package stream i. */
    ipu_status (*initialize)(void *impl, ipu_ctx *ctx, const ipu_package *pkg,
                             ipu_host_buffer *buffers);
    /* Release what the device holds for the package it loaded (keeping the
     * tiles' memory for the next initialize). */
    void (*unload)(void *impl);
    /* Run the main program once; *result gets the cycle report. */
    ipu_status (*run)(void *impl, ipu_ctx *ctx, ipu_host_buffer *buffers, json_t **result);
    /* Check allocations and poison ended lives (on: the default) from the next initialize. */
    void (*set_allocation_checks)(void *impl, int on);
    /* Observe every phase's end (NULL: none). */
    void (*set_observer)(void *impl, ipu_phase_observer observer, void *user);
    /* Record memory events (IPU_EVENTS_OFF: the default) from the next initialize. */
    void (*set_memory_events)(void *impl, int mode);
    /* The events recorded since the last initialize (NULL when off). */
    const ipu_memory_events *(*memory_events)(const void *impl);
    /* Tiles whose compute cycles every step record lists ("tile_compute", in
     * this order), at most IPU_MAX_TRACED_TILES; count 0: none (the default). */
    void (*set_traced_tiles)(void *impl, const uint32_t *tiles, size_t count);
    const ipu_fault *(*fault)(const void *impl);
    ipu_status (*read)(const void *impl, ipu_ctx *ctx, uint32_t tile, uint32_t address, void *out,
                       size_t size);
    ipu_status (*write)(void *impl, ipu_ctx *ctx, uint32_t tile, uint32_t address, const void *in,
                        size_t size);
    void (*destroy)(void *impl);
} ipu_device_iface;

/* Observe the phases of the device's next runs (NULL: stop observing); the
 * per-op check reads each op's output through ipu_device_read as it
 * completes. */
void ipu_device_observe(ipu_device *dev, ipu_phase_observer observer, void *user);

/* The package the device was initialized with (NULL: none yet), and the
 * memory events recorded since (NULL when not recording). */
const ipu_package *ipu_device_package(const ipu_device *dev);
const ipu_memory_events *ipu_device_memory_events(const ipu_device *dev);

/* The simulator: create its state for a profile. */
ipu_status ipu_sim_create(ipu_ctx *ctx, const ipu_profile *profile, const ipu_device_iface **iface,
                          void **impl);

#endif
