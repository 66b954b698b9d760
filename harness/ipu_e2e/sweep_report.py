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
import json
import re
from pathlib import Path

from . import artifacts, report
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


def read_json(path, what):
    try:
        value = json.loads(path.read_text())
    except OSError as error:
        raise UsageError(f"{path}: cannot read the {what}: {error.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: the {what} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path}: the {what}: expected a JSON object")
    return value


def optional(path, what):
    return read_json(path, what) if path.exists() else None


KIND_NAMES = {str: "a string", int: "an integer", float: "a number", dict: "an object", list: "a list"}


def field(value, path, where, kinds):
    """value[path...] checked to be of kinds (None when a key is missing)."""
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if value is not None and not isinstance(value, kinds) or isinstance(value, bool):
        names = " or ".join(KIND_NAMES[k] for k in (kinds if isinstance(kinds, tuple) else (kinds,)))
        raise UsageError(f"{where}: field '{'.'.join(path)}': expected {names}, got {value!r}")
    return value


def largest(values, where, name):
    if values is None:
        return None, None
    if not isinstance(values, list) or not values or not all(isinstance(v, int) for v in values):
        raise UsageError(f"{where}: field '{name}': expected a list of integers per tile")
    peak = max(values)
    return peak, values.index(peak)


# A case's files the reports link to, by label, relative to the case's folder.
CASE_FILES = (("build", "index.html"), ("run", "run/index.html"), ("package", "package.pkg"), ("log", "log.txt"),
              ("placement", "memory/placement.html"), ("run profile", "run/run-profile.html"))


def case_links(folder, sweep_folder):
    """The case's files that exist, as [label, path relative to the sweep's folder]."""
    return [[label, (folder / name).relative_to(sweep_folder).as_posix()] for label, name in CASE_FILES
            if (folder / name).is_file()]


def row_of(case, folder):
    """One case's figures, from its record and result files."""
    record = optional(folder / "case.json", "case record")
    build = optional(folder / "result.json", "build's result.json")
    run = optional(folder / "run" / "result.json", "run's result.json")
    where = folder / "result.json"
    row = {k: case.get(k) for k in ("name", "precision", "blocks", "batch", "budget")}
    row["outcome"] = record["outcome"] if record else "unfinished"
    for part in ("library", "cli") if record else ():  # the digests the case ran with (sweep_case.py)
        digest = record
        for key in ("sha256", part, "sha256"):
            digest = digest.get(key) if isinstance(digest, dict) else None
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise UsageError(f"{folder / 'case.json'}: field 'sha256.{part}.sha256': expected the 64 hex digits of "
                             f"a SHA-256, got {digest!r}")
    row["message"] = record.get("message") if record else None
    budget = case.get("budget")
    row["budget_bytes"] = budget if isinstance(budget, int) else field(build, ("estimate", "budget"), where, int)
    row["estimated_peak"] = field(build, ("estimate", "peak_bytes"), where, int)
    peaks = field(build, ("tile_peaks",), where, dict)
    row["placed_tensor_peak"], row["placed_tensor_tile"] = largest(
        peaks and peaks.get("peak_bytes"), where, "tile_peaks.peak_bytes")
    row["placed_total_peak"], row["placed_total_tile"] = largest(
        peaks and peaks.get("high_water"), where, "tile_peaks.high_water")
    stages = field(build, ("build", "stages"), where, dict) or {}
    row["build_stages"] = {k: v for k, v in stages.items() if isinstance(v, (int, float))}
    row["build_seconds"] = field(build, ("build", "seconds"), where, (int, float))
    row["peak_rss_bytes"] = field(build, ("build", "peak_rss_bytes"), where, int)
    process = record.get("build") if record else None
    row["build_process_seconds"] = process.get("seconds") if isinstance(process, dict) else None
    run_where = folder / "run" / "result.json"
    row["cycles"] = field(run, ("cycles",), run_where, int)
    checks = field(run, ("checks",), run_where, list) or []
    cosines = [c["min_cosine"] for c in checks if isinstance(c, dict) and isinstance(c.get("min_cosine"), float)]
    row["min_cosine"] = min(cosines) if cosines else None
    row["device_seconds"] = field(run, ("wall_seconds", "device"), run_where, (int, float))
    rejection = record.get("rejection") if record else None
    row["rejection"] = ({k: rejection.get(k) for k in ("stage", "seconds", "lower_bound_bytes", "reason")} if isinstance(rejection, dict) else None)
    return row


def collect(folder):
    sweep = read_json(folder / "sweep.json", "sweep record (sweep.json: is this an ipu-e2e-sweep --output?)")
    if sweep.get("schema") != "ipu-e2e/sweep" or sweep.get("version") != 1 or not isinstance(
            sweep.get("planned"), list):
        raise UsageError(f"{folder / 'sweep.json'}: expected \"schema\": \"ipu-e2e/sweep\", \"version\": 1 and "
                         f"a \"planned\" list")
    rows = []
    for case in sweep["planned"]:
        if not isinstance(case, dict) or not isinstance(case.get("name"), str):
            raise UsageError(f"{folder / 'sweep.json'}: field 'planned': expected objects with a 'name'")
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
