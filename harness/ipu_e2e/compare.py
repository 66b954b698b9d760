"""ipu-e2e-compare A B: two runs side by side.  A and B are run folders
(holding result.json, as `ipu-e2e-test --output DIR` writes it) or
result.json files.  It prints, and with --output DIR writes as
compare.json and compare.md:

- the runs: command lines, status, library SHA-256 (same or not), the
  workload's geometry and options where they differ;
- totals: simulated cycles, the estimate's peak, the build's stage times;
- cycles per compiler op: the device's cycles of each (every execution;
  a compile-only run's static timing, which equals them) in A and in B,
  their ratio, the planner's estimates, and the bytes each op's exchange
  phases received;
- peaks per tile: from the run-time memory timelines when both runs wrote
  one (memory-timeline.json), else the compile's per-tile peaks
  (result.json tile_peaks): the fullest tile of each, how many tiles grew or
  shrank, and the tiles that changed most;
- plan differences: per op, the grid, serial pieces, attention mode, bytes
  per tile and estimated cycles where A and B chose differently.

Runs of different workloads compare what they share; an op is matched by
its index, kind and output.  Exit codes: 0 compared, 2 usage or input error.
"""
import argparse
import json
import sys
from pathlib import Path

from . import artifacts
from .command import EXIT_OK, UsageError, guarded, output_folders
from .progress import Progress

SHOWN_TILES = 10


def parser():
    p = argparse.ArgumentParser(
        prog="ipu-e2e-compare",
        description="Compare two runs of ipu-e2e-test side by side: cycles per op, peaks per tile, plan "
                    "differences. A and B are run folders (with result.json) or result.json files. "
                    "Exit codes: 0 compared, 2 usage or input error.")
    p.add_argument("a", type=Path, metavar="A", help="the first run: a folder with result.json, or the file")
    p.add_argument("b", type=Path, metavar="B", help="the second run")
    p.add_argument("--output", type=Path, metavar="DIR", help="write compare.json and compare.md to DIR")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def load_run(path, flag):
    """(result, folder) of a run folder or result.json; UsageError naming the argument otherwise."""
    result_path = path / "result.json" if path.is_dir() else path
    try:
        result = json.loads(result_path.read_text())
    except OSError as error:
        raise UsageError(f"{flag} {path}: cannot read {result_path}: {error.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{flag} {path}: {result_path} is not JSON: {error}") from None
    if not isinstance(result, dict) or result.get("schema") != "ipu-e2e/result":
        raise UsageError(f"{flag} {path}: {result_path} is not an ipu-e2e-test result.json (expected "
                         f"\"schema\": \"ipu-e2e/result\")")
    wrong = shape_error(result)
    if wrong:
        raise UsageError(f"{flag} {path}: {result_path}: {wrong}")
    return result, result_path.parent


# The fields a comparison reads, and what each must be when present.
OBJECT_FIELDS = ("library", "geometry", "estimate", "tile_peaks", "plan", "reports")
NUMBER_FIELDS = ("cycles", "tiles")
OP_FIELDS = ("op", "kind", "output")


def shape_error(result):
    """What is wrong with the fields a comparison reads, or None."""
    for key in OBJECT_FIELDS:
        if key in result and not isinstance(result[key], dict):
            return f"field '{key}' must be an object, not {type(result[key]).__name__}"
    for key in NUMBER_FIELDS:
        if result.get(key) is not None and (not isinstance(result[key], (int, float)) or
                                            isinstance(result[key], bool)):
            return f"field '{key}' must be a number, not {type(result[key]).__name__}"
    for where, rows in (("op_cycles", result.get("op_cycles", [])),
                        ("plan.ops", result.get("plan", {}).get("ops", []))):
        if not isinstance(rows, list) or not all(isinstance(r, dict) and all(k in r for k in OP_FIELDS)
                                                 for r in rows):
            return f"field '{where}' must be a list of objects with {', '.join(OP_FIELDS)}"
    return None


def timeline_peaks(result, folder):
    """Per-tile run-time peaks from the run's memory timeline, or None."""
    where = result.get("reports", {}).get("memory_timeline")
    if not where:
        return None
    path = Path(where) if Path(where).is_absolute() else folder / where
    try:
        return json.loads(path.read_text())["tile_peaks"]["peak_bytes"]
    except (OSError, ValueError, KeyError):
        return None


def tile_peaks(ra, fa, rb, fb):
    """(source, peaks of A, peaks of B), or None when the runs share none."""
    a, b = timeline_peaks(ra, fa), timeline_peaks(rb, fb)
    if a is not None and b is not None:
        return "run-time memory timeline", a, b
    a, b = ra.get("tile_peaks", {}).get("peak_bytes"), rb.get("tile_peaks", {}).get("peak_bytes")
    if a is not None and b is not None:
        return "compile's per-tile peaks", a, b
    return None


def op_charged(row):
    """An op_cycles row's cycles: the device's, or a compile-only run's static timing (the same figure)."""
    return row["device"] if "device" in row else row.get("static")


def ratio(b, a):
    return b / a if a else None


def op_key(op):
    return (op["op"], op["kind"], op["output"])


def compare(ra, fa, rb, fb):
    """The comparison as a dict."""
    runs = [{"command": r.get("command"), "status": r.get("status"), "workload": r.get("workload"),
             "tiles": r.get("tiles"), "library_sha256": r.get("library", {}).get("sha256"), "folder": str(f)}
            for r, f in ((ra, fa), (rb, fb))]
    shape = {k: [ra.get("geometry", {}).get(k), rb.get("geometry", {}).get(k)]
             for k in sorted(set(ra.get("geometry", {})) | set(rb.get("geometry", {})))
             if ra.get("geometry", {}).get(k) != rb.get("geometry", {}).get(k)}
    totals = {"cycles": [ra.get("cycles"), rb.get("cycles")],
              "estimate_peak_bytes": [ra.get("estimate", {}).get("peak_bytes"), rb.get("estimate", {}).get("peak_bytes")],
              "estimate_cycles": [ra.get("estimate", {}).get("cycles"), rb.get("estimate", {}).get("cycles")]}
    ops_a = {op_key(o): o for o in ra.get("op_cycles", [])}
    ops = []
    for o in rb.get("op_cycles", []):
        a = ops_a.get(op_key(o))
        if a:
            x, y = op_charged(a), op_charged(o)
            ops.append({"op": o["op"], "kind": o["kind"], "output": o["output"], "device": [x, y],
                        "estimate": [a["estimate"], o["estimate"]], "ratio": ratio(y, x),
                        "received_bytes": [a.get("received_bytes"), o.get("received_bytes")]})
    plan_a = {op_key(o): o for o in ra.get("plan", {}).get("ops", [])}
    plan = []
    for o in rb.get("plan", {}).get("ops", []):
        a = plan_a.get(op_key(o))
        if not a:
            continue
        fields = {}
        for name, of in (("grid", lambda x: x.get("grid") and "{rows}x{cols}x{reduction}".format(**x["grid"])),
                         ("serial", lambda x: (x.get("grid") or {}).get("serial")),
                         ("attention", lambda x: (x.get("attention") or {}).get("mode")),
                         ("tile_bytes", lambda x: x.get("tile_bytes")), ("cycles", lambda x: x.get("cycles"))):
            if of(a) != of(o):
                fields[name] = [of(a), of(o)]
        if fields:
            plan.append({"op": o["op"], "kind": o["kind"], "output": o["output"], "differs": fields})
    found = tile_peaks(ra, fa, rb, fb)
    peaks = None
    if found and len(found[1]) == len(found[2]):
        source, a, b = found
        change = sorted(range(len(a)), key=lambda t: (-abs(b[t] - a[t]), t))
        peaks = {"source": source, "fullest": [[max(range(len(a)), key=a.__getitem__), max(a)],
                                               [max(range(len(b)), key=b.__getitem__), max(b)]],
                 "grew": sum(y > x for x, y in zip(a, b)), "shrank": sum(y < x for x, y in zip(a, b)),
                 "tiles": len(a), "most_changed": [{"tile": t, "a": a[t], "b": b[t]} for t in change[:SHOWN_TILES]
                                                   if a[t] != b[t]]}
    elif found:
        peaks = {"source": found[0], "note": f"the runs have {len(found[1])} and {len(found[2])} tiles"}
    return {"schema": "ipu-e2e/compare", "version": 1, "runs": runs, "geometry_differs": shape,
            "same_library": runs[0]["library_sha256"] == runs[1]["library_sha256"], "totals": totals, "ops": ops,
            "peaks": peaks, "plan_differences": plan}


def number(v):
    return "\u2014" if v is None else f"{v:,}" if isinstance(v, int) else f"{v:.3f}"


def markdown(c):
    a, b = c["runs"]
    lines = ["# Two runs compared", "", "| | A | B |", "|---|---|---|"]
    for label, key in (("status", "status"), ("workload", "workload"), ("tiles", "tiles")):
        lines.append(f"| {label} | {a[key]} | {b[key]} |")
    lines.append(f"| command | `{' '.join(a['command'] or [])}` | `{' '.join(b['command'] or [])}` |")
    lines.append(f"| library SHA-256 | {(a['library_sha256'] or '')[:16]} | {(b['library_sha256'] or '')[:16]}"
                 f"{'' if c['same_library'] else ' (differs)'} |")
    for key, (x, y) in c["geometry_differs"].items():
        lines.append(f"| {key} | {x} | {y} |")
    for key, (x, y) in c["totals"].items():
        r = ratio(y, x) if isinstance(x, int) and isinstance(y, int) else None
        lines.append(f"| {key.replace('_', ' ')} | {number(x)} | {number(y)}" + (f" ({r:.3f}x)" if r else "") + " |")
    lines += ["", "## Cycles per compiler op (device or static timing, every execution)", ""]
    if c["ops"]:
        lines += ["| op | A | B | B/A | estimate A | estimate B | received bytes A | received bytes B |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for o in c["ops"]:
            lines.append(f"| op {o['op']} {o['kind']} {o['output']} | {number(o['device'][0])} | "
                         f"{number(o['device'][1])} | {number(o['ratio'])} | {number(o['estimate'][0])} | "
                         f"{number(o['estimate'][1])} | {number(o['received_bytes'][0])} | "
                         f"{number(o['received_bytes'][1])} |")
    else:
        lines.append("The runs share no op with cycles (a replayed package has no plan).")
    lines += ["", "## Peaks per tile", ""]
    p = c["peaks"]
    if not p:
        lines.append("Neither a memory timeline nor per-tile peaks in both runs.")
    elif "note" in p:
        lines.append(f"From the {p['source']}: not compared, {p['note']}.")
    else:
        (ta, va), (tb, vb) = p["fullest"]
        lines.append(f"From the {p['source']}: the fullest tile is {ta} with {va:,} bytes in A and {tb} with "
                     f"{vb:,} in B; {p['grew']} of {p['tiles']} tiles grew, {p['shrank']} shrank.")
        if p["most_changed"]:
            lines += ["", "| tile | A | B | B - A |", "|---:|---:|---:|---:|"]
            lines += [f"| {m['tile']} | {m['a']:,} | {m['b']:,} | {m['b'] - m['a']:+,} |" for m in p["most_changed"]]
    lines += ["", "## Plan differences", ""]
    if c["plan_differences"]:
        lines += ["| op | what | A | B |", "|---|---|---|---|"]
        for o in c["plan_differences"]:
            for key, (x, y) in o["differs"].items():
                lines.append(f"| op {o['op']} {o['kind']} {o['output']} | {key} | {x} | {y} |")
    else:
        lines.append("The plans choose the same for every op they share.")
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parser().parse_args(argv)
    progress = Progress(quiet=args.quiet)

    def work():
        output_folders(args, "output")
        ra, fa = load_run(args.a, "A")
        rb, fb = load_run(args.b, "B")
        return compare(ra, fa, rb, fb)

    failed, result = guarded("ipu-e2e-compare", progress, work)
    if failed is not None:
        return failed
    text = markdown(result)
    sys.stdout.write(text)
    if args.output:
        artifacts.write_json(args.output / "compare.json", result)
        artifacts.write_bytes(args.output / "compare.md", text.encode())
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
