/* sim.h: the simulator's state: per-tile SRAM with shadow written-bits (and
 * the bits of bytes whose allocation's life ended), code entries present,
 * OUTGOING_BASE, a fault slot per tile, the program phase and the
 * allocations that end at each phase, and the cycle accounts of the current
 * run.  Shared by the memory, compute, exchange and
 * control files of the simulator.
 */
#ifndef IPU_SIM_H
#define IPU_SIM_H

#include "device/device.h"

/* One decoded send or receive row of an exchange phase. */
typedef struct sim_xfer {
    uint32_t cycle, words, address;
    uint32_t peer;  /* receive: sending tile */
    uint32_t width; /* 4 or 8 bytes per cycle */
    uint32_t row;
    uint32_t source; /* receive: matched source address on the peer */
} sim_xfer;

/* One copy of a kept exchange phase: bytes from the peer's source address to
 * the tile's address. */
typedef struct sim_copy {
    uint32_t address, source, bytes, peer;
} sim_copy;

/* An exchange phase that passed every check, kept so that running its slot
 * again only copies (sim_replay.c says when that is exact). */
/* Bytes [lo, hi). */
typedef struct sim_range {
    uint32_t lo, hi;
} sim_range;

/* What an exchange phase cost and moved: its cycles, and the bytes every
 * tile's send rows and receive rows cover (a multicast window counts once
 * sent, once per receiver). */
typedef struct sim_exchange_cost {
    uint64_t cycles, sent, received;
} sim_exchange_cost;

typedef struct sim_replay {
    uint32_t *first; /* per tile and one past the last: tile t's copies are [first[t], first[t + 1]) */
    sim_copy *copies;
    uint32_t *send_first; /* the same for each tile's send sources */
    sim_range *sends;
    uint32_t phase;  /* the program phase it ran at (allocations live then) */
    sim_exchange_cost cost;
} sim_replay;

/* Bytes per bit of a tile's summary of its written bits (8 shadow words, one
 * cache line): reads and writes of chunks known to be fully written skip the
 * per-byte bits, which are the simulator's coldest memory. */
#define SIM_CHUNK 512u

/* One executed step of a control op, as the cycle report lists it: the
 * program, op and compiler ops (IPU_NO_OP: none) it ran, the Repeat
 * iteration (IPU_NO_ITERATION outside one), its cycles by part, the
 * slowest computing tile, and the bytes its exchange sent and received and
 * its host transfer moved. */
typedef struct sim_step {
    const char *kind, *program;
    uint32_t op, compiler_op, exchange_compiler_op, phase, iteration, compute_tile;
    uint64_t compute, sync, exchange, host, control, sent, received, host_bytes;
} sim_step;

typedef struct sim_tile {
    uint8_t *mem;       /* SRAM bytes, index = address - sram_base */
    uint64_t *written;  /* one bit per byte: written since load, in the live allocation's life */
    uint64_t *ended;    /* one bit per byte: written once, then its allocation's life ended */
    uint64_t *full;     /* one bit per SIM_CHUNK bytes: every byte written (sim_written.c) */
    uint64_t *poisoned; /* one bit per SIM_CHUNK bytes: every byte's life ended (sim_written.c) */
    uint64_t code_entries; /* supervisor parts present, bit per entry */
    uint64_t code_bodies;  /* worker bodies present, bit per body */
    uint32_t outgoing_base;
    /* The allocation the tile's last checked access lay in (the next one mostly does), -1: none. */
    int64_t alloc_hint;
    /* The descriptor segment of the tile's last fetch: fetches mostly stay in it. */
    const ipu_pkg_segment *descriptors;
    /* An address range the tile's last checked write found free of protection. */
    uint32_t writable_lo, writable_hi;
    uint64_t step_cycles;   /* compute cycles in the current step */
    uint64_t compute_total; /* over the run */
    uint64_t wait_total;    /* waiting for slower tiles at syncs */
    int faulted;
    ipu_fault fault;
    /* Exchange rows of the current phase (reused between phases). */
    sim_xfer *sends, *recvs;
    uint32_t send_count, recv_count, send_capacity, recv_capacity;
    /* The current phase's table (0: none) and its bytes, and whether a row
     * reads or changes OUTGOING_BASE. */
    uint32_t table, table_bytes;
    int uses_base;
    /* Sorted, disjoint descriptor ranges the kept phases were read from. */
    sim_range *watched;
    uint32_t watched_count, watched_capacity;
} sim_tile;

/* A Repeat being run: the phase its body starts at and the iteration. */
typedef struct sim_loop {
    uint32_t body_phase, iteration, count;
} sim_loop;

typedef struct sim {
    ipu_profile p;
    /* The context of the initialize or run in progress: its allocator counts
     * the simulator's host allocations, and out_of_memory says one failed
     * (the tile that met it faults to stop the device; the call returns
     * IPU_ERR_NO_MEMORY). */
    ipu_ctx *ctx;
    atomic_int out_of_memory;
    const ipu_package *pkg;
    sim_tile *tiles;
    uint32_t sram_bytes;
    /* All tiles' SRAM and shadow bits, one allocation each (lazily zeroed pages). */
    uint8_t *sram;
    uint64_t *shadow;
    size_t shadow_words; /* per tile */
    uint64_t *ended;     /* all tiles' ended bits (lazily zeroed pages) */
    uint64_t *full;      /* all tiles' chunk summaries */
    uint64_t *poisoned;
    size_t full_words;   /* per tile */
    /* Allocation checks (a package with an allocation table): the
     * allocations whose life ends at each phase, [dying_start[p],
     * dying_start[p + 1]) of dying, by tile. */
    int check_allocs;
    int allocation_checks_off; /* ipu_device_configure: measuring what the checks cost */
    uint32_t phases;
    uint32_t *dying_start;
    uint32_t *dying;
    /* Memory events (sim_events.c): the allocations whose life begins at
     * each phase, [born_start[p], born_start[p + 1]) of born, which are
     * alive, the invocations of the main program so far. */
    int events_on, events_failed;
    ipu_memory_events events;
    uint32_t *born_start, *born;
    uint8_t *alive;
    uint32_t invocation;
    uint32_t entered; /* the phase entered last (UINT32_MAX: none yet) */
    /* Kept exchange phases by slot (NULL: none). */
    sim_replay **replays;
    uint32_t replay_slots;
    /* Kernel scratch per worker thread, kept between phases. */
    float **scratch;
    size_t *scratch_floats;
    int threads;
    /* Where the control interpreter is (copied into faults). */
    const char *program;
    uint32_t program_base; /* global index of the program's first op: 0 (init) or init_count */
    uint32_t op_index;
    uint32_t phase;  /* program phase (format.h) */
    uint32_t origin; /* its compiler op */
    sim_loop loops[64]; /* the Repeats being run, innermost last */
    int depth;
    ipu_phase_observer observer;
    void *observer_user;
    uint64_t step;
    /* Per main control op and tile, compute cycles over the run (op * tiles + tile): the run profile's
     * tile-by-step view. */
    uint64_t *op_compute;
    size_t op_compute_ops;
    ipu_fault fault; /* the fault that stopped the device */
    /* The current program's executed steps, made into the cycle report's
     * JSON only when a report is asked for (sim.c), and for each the traced
     * tiles' compute cycles (traced_count per step). */
    sim_step *steps;
    uint64_t *step_tiles;
    size_t step_capacity, step_traced; /* step_tiles holds step_traced per step */
    uint32_t traced[IPU_MAX_TRACED_TILES];
    size_t traced_count;
    uint64_t totals[5]; /* compute, sync, exchange, host, control */
} sim;

enum { SIM_COMPUTE, SIM_SYNC, SIM_EXCHANGE, SIM_HOST, SIM_CONTROL };

/* ---- memory (sim_memory.c) ---- */
/* Start a fault on a tile (first fault per tile wins); returns 1. */
int sim_fault(sim *s, uint32_t tile, int kind, uint32_t lo, uint32_t hi, const char *fmt, ...)
    IPU_PRINTF(6, 7);
/* A host allocation for tile failed: stop the device; the run returns
 * IPU_ERR_NO_MEMORY.  Returns 1. */
int sim_out_of_memory(sim *s, uint32_t tile);
/* Check an access of size bytes: bounds, alignment, region 1, protection
 * (writes), initialization (reads).  Returns 0 when allowed, else faults;
 * the fault names the accessor what, or "what operand 'operand'" when
 * operand is not NULL. */
int sim_check(sim *s, uint32_t tile, uint32_t address, uint32_t size, unsigned access,
              uint32_t alignment, int region1, const char *what, const char *operand);
/* Does [address, +size) lie inside one allocation live at the current phase
 * (when the package has an allocation table)?  Faults if not, naming the
 * allocation holding address and the one the access reached. */
int sim_check_allocation(sim *s, uint32_t tile, uint32_t address, uint32_t size, const char *what,
                         const char *operand);
/* Are all of [address, +size)'s bytes written (no fault)? */
int sim_is_written(sim *s, uint32_t tile, uint32_t address, uint32_t size);
/* End the lives of the allocations whose last phase is phase: their bytes
 * lose their written state.  An allocation that began before a Repeat body
 * it ends in lives through every iteration: it ends only in the last one.
 * Poisoning first touches shadow pages (a second or more of a loaded
 * machine's time for a phase ending thousands of allocations), so the
 * running program's cancel request is looked at between allocations:
 * IPU_ERR_CANCELLED (the rest of the phase's lives not ended), else IPU_OK. */
ipu_status sim_end_lives(sim *s, uint32_t phase);

/* Memory events (sim_events.c): reset at initialize (the lists of births
 * for pkg), a phase entered (its births), a life ended, and all freed. */
ipu_status sim_events_reset(sim *s, ipu_ctx *ctx, const ipu_package *pkg);
void sim_events_enter(sim *s);
void sim_events_end(sim *s, uint32_t alloc);
void sim_events_free(sim *s);
/* Is [address, +size) inside a descriptor segment?  Faults if not. */
int sim_check_descriptor(sim *s, uint32_t tile, uint32_t address, uint32_t size, const char *what);
/* The end of the descriptor segment holding address, which a
 * sim_check_descriptor call has just accepted. */
uint32_t sim_descriptor_end(sim *s, uint32_t tile, uint32_t address);
static inline uint8_t *sim_ptr(sim *s, uint32_t tile, uint32_t address)
{
    return s->tiles[tile].mem + (address - s->p.sram_base);
}

/* ---- written state (sim_written.c; offsets are from the SRAM base) ---- */
void sim_mark_written(sim *s, uint32_t tile, uint32_t address, uint32_t size);
/* Bytes [offset, end) lose their written state (their ended bits are set where they were written). */
void sim_poison(sim_tile *t, uint32_t offset, uint32_t end);
/* Is every chunk touching [offset, end) (offset < end) full? */
int sim_chunks_full(const sim_tile *t, uint32_t offset, uint32_t end);
/* The first unwritten byte of [offset, end), -1 when none. */
int64_t sim_first_unwritten(const sim_tile *t, uint32_t offset, uint32_t end);
int sim_byte_written(const sim_tile *t, uint32_t offset);
/* Was the byte written, then its allocation's life ended (and not written since)? */
int sim_byte_ended(const sim_tile *t, uint32_t offset);
/* In a bitmap of one bit per byte: the bits of word w that [offset, end)
 * covers (offset < end). */
static inline uint64_t sim_word_mask(uint32_t w, uint32_t offset, uint32_t end)
{
    uint64_t mask = ~0ull;
    if (w == offset >> 6)
        mask &= ~0ull << (offset & 63);
    if (w == (end - 1) >> 6)
        mask &= ~0ull >> (63 - ((end - 1) & 63));
    return mask;
}
/* Read a u32 the device fetches from its own SRAM (descriptors). */
int sim_fetch_u32(sim *s, uint32_t tile, uint32_t address, uint32_t *value, const char *what);
/* Fetch a record's u32 count and check that the count entries of entry_size
 * bytes after it lie inside one descriptor segment. */
int sim_fetch_record(sim *s, uint32_t tile, uint32_t address, uint32_t entry_size,
                     uint32_t *count, const char *what);
/* Start loading the next tile's slot entry (a thread mostly takes tiles in
 * order, and each tile's SRAM is far from the last one's). */
void sim_prefetch_next(sim *s, uint32_t tile, uint32_t slot);
/* After a parallel phase: copy the lowest faulting tile's fault to s->fault.
 * Returns 1 when some tile faulted. */
int sim_collect_fault(sim *s);
/* Tag a fault with the control position, phase and compiler op, and the
 * allocation holding its first byte when it names none. */
void sim_stamp(sim *s, ipu_fault *f);

/* ---- kept exchange phases (sim_replay.c) ---- */
/* The kept phase of an exchange slot run at the current program phase, or NULL. */
const sim_replay *sim_replay_find(const sim *s, uint32_t slot);
/* Keep the exchange phase of slot that just passed its checks: each tile's
 * receives with their matched sources, its send sources, the program phase
 * and its cost.  Not kept when a row uses OUTGOING_BASE.  Returns 1 when the
 * host is out of memory (sim_out_of_memory). */
int sim_replay_keep(sim *s, uint32_t slot, sim_exchange_cost cost);
/* Would writing [address, address + size) on tile change bytes that a kept
 * phase was read from? */
int sim_replay_watches(const sim *s, uint32_t tile, uint32_t address, uint32_t size);
/* Drop every kept phase. */
void sim_replay_forget(sim *s);

/* ---- compute and exchange phases ---- */
/* Runs one compute phase on every tile; nonzero on a fault.  A cancel
 * request (s->ctx) skips the tiles not begun: the caller checks for it. */
int sim_compute_phase(sim *s, uint32_t slot);
/* Runs one exchange phase; *cost receives its cycles and bytes. */
int sim_exchange_phase(sim *s, uint32_t slot, sim_exchange_cost *cost);

#endif
