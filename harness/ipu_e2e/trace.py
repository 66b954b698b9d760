"""The run as a trace (`ipu-e2e-test --trace FILE`): the device's cycle
report, with the run-time memory timeline beside it, written in the Chrome
trace event format (JSON object form), which Perfetto and chrome://tracing
open.  One process, the device, with these tracks:

- "steps": every executed step as one slice (its program op, phase, Repeat
  iteration and cycles by class in args);
- one track per phase kind (compute, sync, host, control, exchange): each
  step's cycles of that kind;
- one track per compiler op: the cycles the run charges to it (a step's
  compute, sync, host and control to the op its compute or host phase
  lowers, its exchange to the op its exchange phase lowers);
- the busiest tiles (by compute cycles), each its own track: a step's own
  compute on that tile and its wait for the slowest;
- counters: the device's live bytes by category and the host aperture's, at
  every executed phase of the run.

Time is in microseconds of device time (cycles / clock); every slice also
carries its exact cycles in args, so totals add up without rounding.
Within a step the kinds follow in this order: compute, sync, host, control,
exchange.
"""
from . import artifacts

KINDS = ("compute", "sync", "host", "control", "exchange")
PID = 1
STEPS_TID, KIND_TID, OP_TID, TILE_TID = 1, 10, 1000, 100000
BUSIEST = 8


def busiest_tiles(compute, count=BUSIEST):
    """The count tiles with the most compute cycles (ties: the lower tile), in that order."""
    return sorted(range(len(compute)), key=lambda t: (-compute[t], t))[:count]


def op_charges(step):
    """[(compiler op, cycles)] a step charges: all but its exchange to the op of
    its compute or host phase, its exchange to the op of its exchange phase."""
    charged = []
    if step.get("compiler_op") is not None:
        charged.append((step["compiler_op"], step["cycles"] - step["exchange"]))
    if step.get("exchange_compiler_op") is not None and step["exchange"]:
        charged.append((step["exchange_compiler_op"], step["exchange"]))
    return charged


def build(profile, timeline=None, traced_tiles=(), title="device"):
    """The trace (a dict) of one run's cycle report (run-profile.json's
    steps, with "tile_compute" per step for traced_tiles) and its memory
    timeline (or None)."""
    clock = profile["clock_hz"]
    labels = profile.get("ops") or []

    def us(cycles):
        return cycles * 1e6 / clock

    def label(op):
        return f"op {op} {labels[op]}" if op < len(labels) else f"op {op}"

    events = [{"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": title}}]

    def track(tid, name, order):
        events.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": tid, "args": {"sort_index": order}})

    def slice_(tid, name, start, cycles, args):
        events.append({"ph": "X", "name": name, "pid": PID, "tid": tid, "ts": us(start), "dur": us(cycles),
                       "args": dict(args, cycles=cycles)})

    track(STEPS_TID, "steps", 0)
    for k, kind in enumerate(KINDS):
        track(KIND_TID + k, kind, 1 + k)
    ops_seen, starts, clock_now = set(), [], 0
    for step in profile["steps"]:
        starts.append(clock_now)
        where = {"step": step["index"], "phase": step["phase"], "iteration": step["iteration"]}
        op = step.get("compiler_op")
        name = f"{step['kind']} {label(op)}" if op is not None else step["kind"]
        slice_(STEPS_TID, name, clock_now, step["cycles"], dict(where, **{k: step[k] for k in KINDS}))
        at = clock_now
        for k, kind in enumerate(KINDS):
            if step[kind]:
                slice_(KIND_TID + k, kind, at, step[kind], where)
                at += step[kind]
        at = clock_now
        for charged_op, cycles in op_charges(step):
            if cycles:
                if charged_op not in ops_seen:
                    ops_seen.add(charged_op)
                    track(OP_TID + charged_op, label(charged_op), 100 + charged_op)
                slice_(OP_TID + charged_op, label(charged_op), at, cycles, where)
            at += cycles
        for k, tile in enumerate(traced_tiles):
            own = step.get("tile_compute", [0] * len(traced_tiles))[k]
            if own:
                slice_(TILE_TID + tile, "compute", clock_now, own, dict(where, op=label(op) if op is not None else None))
            if step["compute"] > own:
                slice_(TILE_TID + tile, "wait", clock_now + own, step["compute"] - own, where)
        clock_now += step["cycles"]
    for k, tile in enumerate(traced_tiles):
        track(TILE_TID + tile, f"tile {tile} (busiest #{k + 1})", 100000 + k)
    if timeline:
        events += counters(profile["steps"], starts, timeline, us)
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"cycles": profile["cycles"], "clock_hz": clock, "traced_tiles": list(traced_tiles)}}


def counters(steps, starts, timeline, us):
    """Counter events of live bytes at each executed phase of the profiled
    run (the main program's last invocation): a phase 2g at its step's
    start, 2g + 1 (the exchange) where the step's exchange begins."""
    s, names = timeline["steps"], timeline["categories"]
    last = max((i for p, i in zip(s["program"], s["invocation"]) if p == "main"), default=None)
    at_step, seen = {}, {}
    for i, step in enumerate(steps):
        key = (step["phase"], step["iteration"])
        at_step[key + (seen.get(key, 0),)] = i
        seen[key] = seen.get(key, 0) + 1
    events, seen = [], {}
    for j, phase in enumerate(s["phase"]):
        if s["program"][j] != "main" or s["invocation"][j] != last:
            continue
        key = (phase - phase % 2, s["iteration"][j])
        occurrence = seen.get((phase, s["iteration"][j]), 0)
        seen[(phase, s["iteration"][j])] = occurrence + 1
        i = at_step.get(key + (occurrence,))
        if i is None:
            continue
        step = steps[i]
        start = starts[i] + (step["cycles"] - step["exchange"] if phase % 2 else 0)
        args = dict(zip(names, s["by_category"][j]))
        events.append({"ph": "C", "name": "live bytes", "pid": PID, "tid": 0, "ts": us(start), "args": args})
        events.append({"ph": "C", "name": "host aperture bytes", "pid": PID, "tid": 0, "ts": us(start),
                       "args": {"aperture": s["aperture"][j]}})
    return events


def write(path, profile, timeline=None, traced_tiles=(), title="device"):
    """Writes the trace to path (atomically)."""
    artifacts.write_json(path, build(profile, timeline, traced_tiles, title), compact=True)
