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
  per tile and estimated cycles where A and B chose differently;
- warnings: runs of different workloads, tile counts or geometries, and
  every op whose planner estimate is more than 10% off the cycles the run
  charged it.

A run without a plan in its result.json (a replay of a saved package) is
read from its package (the --package or --save-package its command line
names): its matmuls' GEMM blocks (rows x columns x reduction parts) and
attention modes, and then both runs' plans are read that way, so they
compare alike; its cycles per op come from its run-profile.json.  Runs of
different workloads compare what they share; an op is matched by its
index, kind and output.  With --output, compare.html beside compare.md
draws the per-op cycles and the per-tile peaks as bars, and each run's
index.html gains a link to it.  Exit codes: 0 compared, 2 usage or input
error.
"""
import argparse
import json
import sys
from pathlib import Path

from . import artifacts, native, report, run_reports, schema, trace
from .command import EXIT_OK, UsageError, guarded, output_folders
from .progress import Progress

SHOWN_TILES = 10
ESTIMATE_OFF = 0.10  # an estimate this far off the charged cycles (a fraction of them) is flagged
PAGE = report.REPORTS / "compare"


def parser():
    p = argparse.ArgumentParser(
        prog="ipu-e2e-compare",
        description="Compare two runs of ipu-e2e-test side by side: cycles per op, peaks per tile, plan "
                    "differences. A and B are run folders (with result.json) or result.json files. "
                    "Exit codes: 0 compared, 2 usage or input error.")
    p.add_argument("a", type=Path, metavar="A", help="the first run: a folder with result.json, or the file")
    p.add_argument("b", type=Path, metavar="B", help="the second run")
    p.add_argument("--output", type=Path, metavar="DIR",
                   help="write compare.json, compare.md and compare.html to DIR (and link the page from both "
                        "runs' index.html)")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def load_run(path, flag):
    """(result, folder) of a run folder or result.json; UsageError naming the argument otherwise."""
    result_path = path / "result.json" if path.is_dir() else path
    return schema.load(result_path, schema.RESULT, flag), result_path.parent


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


def beside(folder, where):
    """A path a result.json gives (relative to its folder, or absolute)."""
    return Path(where) if Path(where).is_absolute() else folder / where


def run_profile(result, folder):
    """The run's run-profile.json (beside the page result.json lists), or None."""
    page = result.get("reports", {}).get("run_profile")
    path = beside(folder, page).with_name("run-profile.json") if isinstance(page, str) else None
    return schema.load(path, schema.RUN_PROFILE) if path and path.is_file() else None


def op_rows(result, folder):
    """Per compiler op the cycles the run charged it: result.json's
    op_cycles, or for a replay (which has no plan) summed from its run
    profile's steps, with the estimates of the build that saved its package
    when its result.json is beside the package."""
    if result.get("op_cycles"):
        return result["op_cycles"]
    profile = run_profile(result, folder)
    if not profile:
        return []
    charged, received = {}, {}
    for step in profile["steps"]:
        for op, cycles in trace.op_charges(step):
            charged[op] = charged.get(op, 0) + cycles
        if step.get("exchange_compiler_op") is not None:
            op = step["exchange_compiler_op"]
            received[op] = received.get(op, 0) + step.get("received_bytes", 0)
    estimates = {}
    package = package_path(result, folder)
    try:  # the build that saved the package keeps the planner's estimates beside it
        build = json.loads((package.parent / "result.json").read_text()) if package else {}
        estimates = {op_key(o): o.get("estimate") for o in build.get("op_cycles", [])}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        estimates = {}
    rows = []
    for op in sorted(charged):
        kind, _, output = profile["ops"][op].partition(" ")
        row = {"op": op, "kind": kind, "output": output, "device": charged[op], "received_bytes": received.get(op, 0)}
        rows.append(dict(row, estimate=estimates.get(op_key(row))))
    return rows


def package_path(result, folder):
    """The package a run built (--save-package) or replayed (--package), when it exists."""
    command = result.get("command") or []
    for flag in ("--package", "--save-package"):
        if flag in command[:-1]:
            where = Path(command[command.index(flag) + 1])
            for path in (where, folder / where):
                if path.is_file():
                    return path
    return None


def package_plan(result, folder):
    """The plan as the run's package records it: per matmul its GEMM blocks
    (grid rows x columns x reduction parts), per attention op its mode; op
    kinds and outputs from the plan or the run profile.  None without a package."""
    path = package_path(result, folder)
    if not path:
        return None
    try:
        meta = native.Package.load_file(native.Context(), path).info()["meta"]
    except native.IpuError as error:
        raise UsageError(f"{path}: cannot read the package: {error.message}") from None
    names = {o["op"]: (o["kind"], o["output"]) for o in result.get("plan", {}).get("ops", [])}
    profile = run_profile(result, folder)
    for op, label in enumerate((profile or {}).get("ops") or []):
        kind, _, output = label.partition(" ")
        names.setdefault(op, (kind, output))
    ops = []
    for key in sorted(set(meta.get("matmuls", {})) | set(meta.get("attention", {})), key=int):
        op = int(key)
        kind, output = names.get(op, ("op", key))
        entry = {"op": op, "kind": kind, "output": output}
        blocks = meta.get("matmuls", {}).get(key)
        if blocks:
            entry["grid"] = {"rows": len(blocks["row_blocks"]) - 1, "cols": len(blocks["col_bounds"]) - 1,
                             "reduction": len(blocks["k_bounds"]) - 1}
        if key in meta.get("attention", {}):
            entry["attention"] = {"mode": meta["attention"][key]}
        ops.append(entry)
    return ops


def plans(ra, fa, rb, fb):
    """(source, plan ops of A, of B): both result.json's plans, or, when
    either run has none, both as their packages record them."""
    a, b = ra.get("plan", {}).get("ops"), rb.get("plan", {}).get("ops")
    if a and b:
        return "result.json plans", a, b
    a, b = package_plan(ra, fa), package_plan(rb, fb)
    if a is not None and b is not None:
        return "the packages (GEMM blocks: rows x columns x reduction parts; attention modes)", a, b
    return None, [], []


def warnings(ra, rb, shape, ops):
    """What a reader should know before trusting the comparison."""
    found = []
    if ra.get("workload") != rb.get("workload"):
        found.append(f"A and B are different workloads ({ra.get('workload')} and {rb.get('workload')}): "
                     f"only ops of the same index, kind and output are compared")
    if ra.get("tiles") != rb.get("tiles"):
        found.append(f"A and B ran on different devices ({ra.get('tiles')} and {rb.get('tiles')} tiles)")
    if shape:
        found.append("A and B differ in geometry (" + ", ".join(f"{k} {x} and {y}" for k, (x, y) in shape.items())
                     + ")")
    for o in ops:
        for side, (estimate, charged) in zip("AB", zip(o["estimate"], o["device"])):
            if estimate is not None and charged and abs(estimate - charged) > ESTIMATE_OFF * charged:
                found.append(f"op {o['op']} {o['kind']} {o['output']}: the estimate in {side} is "
                             f"{estimate:,} cycles against {charged:,} charged ({estimate / charged:.2f}x)")
    return found


def op_charged(row):
    """An op_cycles row's cycles: the device's, or a compile-only run's static timing (the same figure)."""
    return row["device"] if "device" in row else row.get("static")


def run_cycles(result):
    """The run's cycles: the device's, or a compile-only build's static timing (which equals them)."""
    if result.get("cycles") is not None:
        return result["cycles"]
    timing = result.get("static_timing")
    return timing.get("cycles") if isinstance(timing, dict) else None


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
    totals = {"cycles": [run_cycles(ra), run_cycles(rb)],
              "estimate_peak_bytes": [ra.get("estimate", {}).get("peak_bytes"), rb.get("estimate", {}).get("peak_bytes")],
              "estimate_cycles": [ra.get("estimate", {}).get("cycles"), rb.get("estimate", {}).get("cycles")]}
    ops_a = {op_key(o): o for o in op_rows(ra, fa)}
    ops = []
    for o in op_rows(rb, fb):
        a = ops_a.get(op_key(o))
        if a:
            x, y = op_charged(a), op_charged(o)
            ops.append({"op": o["op"], "kind": o["kind"], "output": o["output"], "device": [x, y],
                        "estimate": [a["estimate"], o["estimate"]], "ratio": ratio(y, x),
                        "received_bytes": [a.get("received_bytes"), o.get("received_bytes")]})
    plan_source, plan_a, plan_b = plans(ra, fa, rb, fb)
    plan_a = {op_key(o): o for o in plan_a}
    plan = []
    for o in plan_b:
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
                                                   if a[t] != b[t]], "a": a, "b": b}
    elif found:
        peaks = {"source": found[0], "note": f"the runs have {len(found[1])} and {len(found[2])} tiles"}
    return {"schema": "ipu-e2e/compare", "version": 1, "runs": runs, "geometry_differs": shape,
            "same_library": runs[0]["library_sha256"] == runs[1]["library_sha256"], "totals": totals, "ops": ops,
            "peaks": peaks, "plan_source": plan_source, "plan_differences": plan,
            "warnings": warnings(ra, rb, shape, ops)}


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
    if c["warnings"]:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in c["warnings"]]
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
        lines.append("The runs share no op with cycles (a replay without its run profile has no per-op cycles).")
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
    if not c["plan_source"]:
        lines.append("Not compared: a run has neither a plan in its result.json nor a package to read one from.")
    elif c["plan_differences"]:
        lines += [f"From {c['plan_source']}.", ""]
        lines += ["| op | what | A | B |", "|---|---|---|---|"]
        for o in c["plan_differences"]:
            for key, (x, y) in o["differs"].items():
                lines.append(f"| op {o['op']} {o['kind']} {o['output']} | {key} | {x} | {y} |")
    else:
        lines.append(f"From {c['plan_source']}: the plans choose the same for every op they share.")
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
        page = args.output / "compare.html"
        artifacts.write_bytes(page, report.inline_page(PAGE, "compare.css", "compare.js",
                                                       report.embedded_json(result)).encode())
        for run in result["runs"]:
            index = Path(run["folder"]) / "index.html"
            if index.is_file():
                run_reports.add_index_link(index, "compare", page)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
