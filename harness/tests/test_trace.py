"""test_trace.py: `ipu-e2e-test --trace FILE`, the run in the Chrome trace
event format, on vit-small (64 tiles, 2 layers in a Repeat).

- The format's rules: an object with traceEvents; every event a phase type
  the file uses (X complete slices, M metadata, C counters) with pid, tid,
  name and, for slices and counters, a non-negative ts; slices a
  non-negative dur and never overlapping on their track; every track named.
- Its totals equal run-profile.json's: the steps track's cycles the run's;
  each phase kind's track that kind's total; each compiler op's track the
  cycles result.json's per-op table charges it (device and host columns,
  summed there from the steps by other code); each traced tile's compute
  and wait slices that tile's compute and wait; the traced tiles are the
  busiest by compute.
- The live-bytes counters are the memory timeline's, one per executed
  phase of the run.
- Without --profile-directory the trace is written all the same, and the
  index links it.
"""
import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "harness" / "bin" / "ipu-e2e-test"
VIT = ["--workload", "vit-small", "--tiles", "64", "--layers", "2"]
EPSILON_US = 1e-6


def load(path):
    return json.loads(Path(path).read_text())


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace")
    done = subprocess.run(["/usr/bin/python3", str(CLI), *VIT, "--quiet", "--trace", str(folder / "trace.json"),
                           "--output", str(folder), "--profile-directory", str(folder / "run")],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


def slices(trace):
    by_track = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            by_track[e["tid"]].append(e)
    return by_track


def track_names(trace):
    return {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}


def test_the_trace_keeps_the_formats_rules(traced):
    trace = load(traced / "trace.json")
    assert isinstance(trace["traceEvents"], list) and trace["displayTimeUnit"] in ("ms", "ns")
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "M", "C") and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["name"], str) and e["name"]
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index") and isinstance(e["args"], dict)
        else:
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        if e["ph"] == "C":
            assert e["args"] and all(isinstance(v, int) for v in e["args"].values())
    names = track_names(trace)
    for tid, events in slices(trace).items():
        assert tid in names
        events.sort(key=lambda e: e["ts"])
        for before, after in zip(events, events[1:]):
            assert after["ts"] >= before["ts"] + before["dur"] - EPSILON_US, (names[tid], before, after)


def test_the_traces_totals_equal_the_run_profiles(traced):
    trace, profile = load(traced / "trace.json"), load(traced / "run" / "run-profile.json")
    result = load(traced / "result.json")
    names, tracks = track_names(trace), slices(trace)
    by_name = {name: tid for tid, name in names.items()}

    def cycles(tid):
        return sum(e["args"]["cycles"] for e in tracks.get(tid, []))
    assert cycles(by_name["steps"]) == profile["cycles"] and len(tracks[by_name["steps"]]) == len(profile["steps"])
    for kind in ("compute", "sync", "exchange", "host", "control"):
        assert cycles(by_name[kind]) == profile["totals"][kind], kind
    # Per compiler op: result.json's table, summed from the steps by the CLI's own code.
    for row in result["op_cycles"]:
        tid = next((t for t, n in names.items() if n.startswith(f"op {row['op']} ")), None)
        assert (cycles(tid) if tid is not None else 0) == row["device"] + row["host"], row
    # The busiest tiles, each its own compute and wait.
    compute, wait = profile["tiles"]["compute"], profile["tiles"]["wait"]
    traced_tiles = trace["otherData"]["traced_tiles"]
    assert traced_tiles == sorted(range(len(compute)), key=lambda t: (-compute[t], t))[:8]
    for tile in traced_tiles:
        events = tracks[by_name[next(n for n in names.values() if n.startswith(f"tile {tile} "))]]
        assert sum(e["args"]["cycles"] for e in events if e["name"] == "compute") == compute[tile]
        assert sum(e["args"]["cycles"] for e in events if e["name"] == "wait") == wait[tile]


def test_the_live_bytes_counters_are_the_memory_timelines(traced):
    trace, timeline = load(traced / "trace.json"), load(traced / "run" / "memory-timeline.json")
    steps = timeline["steps"]
    main = [j for j, p in enumerate(steps["program"]) if p == "main"]
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "live bytes"]
    assert len(counters) == len(main)
    for e, j in zip(sorted(counters, key=lambda e: e["ts"]), main):
        assert list(e["args"].values()) == steps["by_category"][j]
        assert list(e["args"]) == timeline["categories"]


def test_a_trace_alone_is_written_and_linked(tmp_path):
    done = subprocess.run(["/usr/bin/python3", str(CLI), *VIT, "--layers", "1", "--quiet", "--trace",
                           str(tmp_path / "t" / "trace.json"), "--output", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    result = load(tmp_path / "result.json")
    assert result["reports"]["trace"] == "t/trace.json" and "run_profile" not in result["reports"]
    assert '"kind":"trace","href":"t/trace.json"' in (tmp_path / "index.html").read_text()
    assert load(tmp_path / "t" / "trace.json")["otherData"]["cycles"] == result["cycles"]
