"""ipu-e2e-sweep-report DIR: the tables and charts of a sweep's folder (what
ipu-e2e-sweep wrote).  Reads DIR/sweep.json and each case's case.json, its
build's result.json and its device run's run/result.json, and writes
DIR/sweep-report.md and a standalone DIR/sweep-report.html (the page's
template, script and style sheet are reports/sweep/, inlined with the rows as
JSON; its charts are SVG drawn by the page's script; it needs no network).
Both show the same rows: cycles per budget and batch; the estimated, placed
tensor and placed total peak per case; the stage and time of each rejection;
the build's time by stage; links to each case's files (its build's and its
run's index, package, log, placement viewer and run profile, those
written).  A sweep still running, or cut short, is reported
as far as it got.  Exit codes: 0 written, 2 DIR is not a sweep's folder (or a
record in it is malformed), 3 internal error.
"""
import argparse
from pathlib import Path

from . import artifacts, report, schema
from .command import EXIT_OK, UsageError, guarded
from .progress import Progress

PAGE = report.REPORTS / "sweep"
STAGES = ("plan", "lower", "package")  # the build's stages, in pipeline order
# What each figure is, as both reports state it.
DEFINITIONS = [
    ("cycles", "the simulated device cycles of one inference of the case's saved package, replayed with "
               "`ipu-e2e-test --package` (run/result.json `cycles`)"),
    ("estimated peak", "result.json `estimate.peak_bytes` of the build: the most bytes the compile's liveness "
                       "walk finds live at once on one tile at one step of the chosen plan's lowered program "
                       "(host staging in the aperture included)"),
    ("placed tensors", "the largest of result.json `tile_peaks.peak_bytes`: per tile, the bytes live at its "
                       "fullest step in the placed program (buffers summed by size, not address ranges); it "
                       "equals the estimate when placement keeps the buffers as lowered"),
    ("placed total", "the largest of result.json `tile_peaks.high_water`: per tile, the highest end of any "
                     "placed buffer in bytes from the SRAM base, so the runtime state, code and descriptors laid "
                     "out below the tensors, and any gaps placement left, count too; the two placed figures have "
                     "different scopes and must not be added"),
    ("budget", "the planner memory budget per tile the case gave (--memory-budget), or for `default` the "
               "profile's, as result.json `estimate.budget` records it"),
    ("rejection", "result.json `rejection`: its stage (plan: the estimate; place: placement), the seconds the "
                  "compile took, the lower bound (the estimated peak of the smallest candidate the planner can "
                  "make, every op at its smallest choice) and the reason"),
    ("build time", "result.json `build.stages` of the compile-only build (plan: catalogue and search; lower: "
                   "lowering and refinement; package: exchange, placement and encoding), `build.seconds` and "
                   "`build.peak_rss_bytes`; process: the wall time of the whole build process as the sweep "
                   "measured it (inputs, the compile, writing the package and the memory profiles); builds ran "
                   "concurrently, so these are not isolated timings"),
]


def parser():
    p = argparse.ArgumentParser(prog="ipu-e2e-sweep-report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, metavar="DIR", help="the sweep's folder (ipu-e2e-sweep --output)")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def optional(path, shape):
    return schema.load(path, shape) if path.exists() else None


def largest(values):
    """(the largest value, its tile) of a per-tile list, (None, None) for none."""
    if not values:
        return None, None
    peak = max(values)
    return peak, values.index(peak)


def inner(value, *path):
    """value[path...], None where a key is missing."""
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


# A case's files the reports link to, by label, relative to the case's folder.
CASE_FILES = (("build", "index.html"), ("run", "run/index.html"), ("package", "package.pkg"), ("log", "log.txt"),
              ("placement", "memory/placement.html"), ("run profile", "run/run-profile.html"))


def case_links(folder, sweep_folder):
    """The case's files that exist, as [label, path relative to the sweep's folder]."""
    return [[label, (folder / name).relative_to(sweep_folder).as_posix()] for label, name in CASE_FILES
            if (folder / name).is_file()]


def row_of(case, folder):
    """One case's figures, from its record and result files."""
    record = optional(folder / "case.json", schema.CASE_RECORD)
    build = optional(folder / "result.json", schema.BUILD_RESULT)
    run = optional(folder / "run" / "result.json", schema.RUN_RESULT)
    row = {k: case.get(k) for k in ("name", "precision", "blocks", "batch", "budget")}
    row["outcome"] = record["outcome"] if record else "unfinished"
    row["message"] = record.get("message") if record else None
    budget = case.get("budget")
    row["budget_bytes"] = budget if isinstance(budget, int) else inner(build, "estimate", "budget")
    row["estimated_peak"] = inner(build, "estimate", "peak_bytes")
    row["placed_tensor_peak"], row["placed_tensor_tile"] = largest(inner(build, "tile_peaks", "peak_bytes"))
    row["placed_total_peak"], row["placed_total_tile"] = largest(inner(build, "tile_peaks", "high_water"))
    stages = inner(build, "build", "stages") or {}
    row["build_stages"] = {k: v for k, v in stages.items() if isinstance(v, (int, float))}
    row["build_seconds"] = inner(build, "build", "seconds")
    row["peak_rss_bytes"] = inner(build, "build", "peak_rss_bytes")
    row["build_process_seconds"] = inner(record, "build", "seconds")
    row["cycles"] = inner(run, "cycles")
    cosines = [c["min_cosine"] for c in inner(run, "checks") or [] if isinstance(c.get("min_cosine"), float)]
    row["min_cosine"] = min(cosines) if cosines else None
    row["device_seconds"] = inner(run, "wall_seconds", "device")
    rejection = inner(record, "rejection")
    row["rejection"] = {k: rejection.get(k) for k in ("stage", "seconds", "lower_bound_bytes", "reason")} \
        if rejection else None
    return row


def collect(folder):
    sweep = schema.load(folder / "sweep.json", schema.SWEEP)
    if sweep["version"] != 1:
        raise UsageError(f"{folder / 'sweep.json'}: field 'version': expected 1, found {sweep['version']}")
    rows = []
    for case in sweep["planned"]:
        row = row_of(case, folder / "cases" / case["name"])
        row["links"] = case_links(folder / "cases" / case["name"], folder)
        rows.append(row)
    found = {k for r in rows for k in r["build_stages"]}
    stages = [k for k in STAGES if k in found] + sorted(found - set(STAGES))
    return {"kind": "sweep-report", "version": 1, "folder": str(folder.resolve()), "settings": sweep.get("settings"),
            "command": sweep.get("command"), "rows": rows, "definitions": DEFINITIONS, "stages": stages,
            "finished": sum(r["outcome"] != "unfinished" for r in rows)}


def number(value):
    return "" if value is None else f"{value:,}"


def seconds(value, places=2):
    return "" if value is None else f"{value:.{places}f}"


def series_key(row):
    return (row["precision"], row["blocks"])


def series_label(key):
    precision, blocks = key
    return f"{precision}, {blocks} block(s)" if precision else "all"


def cell(row):
    if row["cycles"] is not None and row["outcome"] == "passed":
        return f"{row['cycles']:,}"
    if row["outcome"] == "rejected" and row["rejection"]:
        return f"rejected ({row['rejection']['stage']})"
    return {"unfinished": "—"}.get(row["outcome"], row["outcome"])


def markdown(data):
    rows = data["rows"]
    s = data["settings"] or {}
    lines = [f"# Memory-budget sweep: {s.get('workload', '?')}, {data['finished']} of {len(rows)} cases finished",
             "", f"Folder `{data['folder']}`; command `{' '.join(data['command'] or [])}`.", "",
             "Outcomes: " + ", ".join(f"{o} {sum(r['outcome'] == o for r in rows)}" for o in
                                      ("passed", "rejected", "failed", "timed out", "error", "unfinished")
                                      if any(r['outcome'] == o for r in rows)) + ".", "",
             "## Definitions", ""]
    lines += [f"- **{name}**: {text}." for name, text in data["definitions"]]
    for key in dict.fromkeys(series_key(r) for r in rows):
        group = [r for r in rows if series_key(r) == key]
        batches = list(dict.fromkeys(r["batch"] for r in group))
        budgets = list(dict.fromkeys(str(r["budget"]) for r in group))
        lines += ["", f"## Cycles per budget and batch ({series_label(key)})", "",
                  "| budget per tile | " + " | ".join(f"batch {b} cycles" for b in batches) + " |",
                  "|---|" + "---:|" * len(batches)]
        for budget in budgets:
            cells = [next((cell(r) for r in group if str(r["budget"]) == budget and r["batch"] == b), "")
                     for b in batches]
            lines.append(f"| {budget} | " + " | ".join(cells) + " |")
    lines += ["", "## Peaks per case", "",
              "| case | batch | budget (bytes) | outcome | estimated peak | placed tensors (tile) | "
              "placed total (tile) | min cosine |", "|---|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        tensors = f"{number(r['placed_tensor_peak'])} ({r['placed_tensor_tile']})" \
            if r["placed_tensor_peak"] is not None else ""
        total = f"{number(r['placed_total_peak'])} ({r['placed_total_tile']})" \
            if r["placed_total_peak"] is not None else ""
        cosine = "" if r["min_cosine"] is None else f"{r['min_cosine']:.6f}"
        lines.append(f"| {r['name']} | {r['batch']} | {r['budget']} ({number(r['budget_bytes'])}) | {r['outcome']} "
                     f"| {number(r['estimated_peak'])} | {tensors} | {total} | {cosine} |")
    rejected = [r for r in rows if r["rejection"]]
    lines += ["", "## Rejections", ""]
    if rejected:
        lines += ["| case | stage | seconds | lower bound (bytes) | reason |", "|---|---|---:|---:|---|"]
        for r in rejected:
            j = r["rejection"]
            lines.append(f"| {r['name']} | {j['stage']} | {seconds(j['seconds'])} | "
                         f"{number(j['lower_bound_bytes'])} | {(j['reason'] or '').replace('|', '/')} |")
    else:
        lines.append("No case was rejected.")
    stage_names = data["stages"]
    lines += ["", "## Build time by stage", "",
              "| case | " + " | ".join(f"{k} s" for k in stage_names) + " | build s | process s | peak RSS MiB |",
              "|---|" + "---:|" * (len(stage_names) + 3)]
    for r in rows:
        if r["build_seconds"] is None:
            continue
        rss = "" if r["peak_rss_bytes"] is None else f"{r['peak_rss_bytes'] / 2**20:.0f}"
        lines.append(f"| {r['name']} | " + " | ".join(seconds(r["build_stages"].get(k), 3) for k in stage_names)
                     + f" | {seconds(r['build_seconds'], 3)} | {seconds(r['build_process_seconds'])} | {rss} |")
    lines += ["", "## Case files", ""]
    lines += [f"- {r['name']}: " + (", ".join(f"[{label}]({href})" for label, href in r["links"]) or "none yet")
              for r in rows]
    problems = [r for r in rows if r["outcome"] in ("failed", "timed out", "error")]
    if problems:
        lines += ["", "## Failures", ""] + [f"- {r['name']}: {r['outcome']}: {r['message']}" for r in problems]
    return "\n".join(lines) + "\n"


def work(args, progress):
    progress.update(f"reading {args.folder}")
    data = collect(args.folder)
    progress.update("writing the report")
    artifacts.write_bytes(args.folder / "sweep-report.md", markdown(data).encode())
    page = report.inline_page(PAGE, "sweep.css", "sweep.js", report.embedded_json(data))
    artifacts.write_bytes(args.folder / "sweep-report.html", page.encode())
    print(f"{args.folder / 'sweep-report.md'}\n{args.folder / 'sweep-report.html'}")
    return EXIT_OK


def main(argv=None):
    args = parser().parse_args(argv)
    progress = Progress(args.quiet)
    code, result = guarded("ipu-e2e-sweep-report", progress, lambda: work(args, progress))
    return code if code is not None else result
