"""ci/nightly: the nightly regression matrix.  Runs every case of a case list
(ci/cases.json) as its own process, `ipu-e2e-test`, `ipu-e2e-bench`,
`ipu-e2e-fuzz`, `ipu-e2e-random` (random workloads over a fresh seed range,
failures kept as regression cases) or `ipu-e2e-onnx-tests` (the ONNX backend
node tests: passed, failed, not supported), and checks that its exit code is the one expected (pass: 0;
reject, the planner refusing a budget: 1 with result.json's status
REJECTED).  Each case gets its own output folder (given to
the command as --output; `{output}` in an argument names it too).  It reads the figures the command wrote to its
output folder: simulated cycles and the lowest min cosine of result.json, or
a bench's JSON (a fuzz run's fuzz.json) with its targets (a random run's
random.json: each failed case with the command that reproduces it).  These are compared with the case's
baseline (ci/baselines.json).  A case regresses when its cycles exceed the
baseline by more than 1%, when its min cosine falls more than 0.001 below
the baseline's, or when its wall time is over 1.5x the baseline and more than
half a second longer (shorter differences are process start and scheduling)
measured as many jobs to a machine (figures record jobs_per_machine; a case
sharing the cores runs longer for that alone).  A case whose process dies
(killed by a signal) fails, naming the signal.

The summary (summary.json, summary.md and summary.html, a standalone page
whose rows link to each case's reports, JSON and log) lists the planned cases and is
rewritten atomically after every case; until every planned case has
finished it says the run is interrupted, so a run cut short (even by
kill -9) shows it, and `--resume` runs only the planned cases it has not
finished.  SIGINT or SIGTERM is forwarded to the running case, which is
waited for (a case left unfinished is run again by --resume); each case is
started so that it receives SIGTERM if this process dies.

With --jobs N, --sshlogin or --sshloginfile the cases go through GNU parallel
(fanout.py): N at a time per machine, each as a `ci/nightly --one-case NAME`
job that runs the case into the same --output tree and writes its entry
there; the summary is rewritten as each job ends, in whatever order, and
--resume works the same way.  A remote machine needs the repository and
--output at the same paths (a shared filesystem).
"""
import argparse
import json
import re
import signal
import sys
import time
from pathlib import Path

from . import artifacts, child, fanout, files, mutation_catalogue, onnx_tests, report, run_reports, schema
from .command import EXIT_CHECK_FAILED, EXIT_FAULT, EXIT_OK, UsageError, guarded, output_folders
from .progress import Progress

REPO = Path(__file__).resolve().parents[2]
COMMANDS = {"test": REPO / "harness" / "bin" / "ipu-e2e-test",
            "bench": REPO / "harness" / "bin" / "ipu-e2e-bench",
            "fuzz": REPO / "harness" / "bin" / "ipu-e2e-fuzz",
            "random": REPO / "harness" / "bin" / "ipu-e2e-random",
            "onnx-tests": REPO / "harness" / "bin" / "ipu-e2e-onnx-tests",
            "properties": REPO / "harness" / "bin" / "ipu-e2e-properties"}
# A rejection (no candidate plan fits the budget) exits 1 with result.json's
# status REJECTED (its rejection record).
EXPECTED = {"pass": "0", "reject": "1 with a REJECTED result.json"}
DEFAULT_TIMEOUT = 1800
# A regression: cycles above baseline x 1.01, min cosine below baseline -
# 0.001, wall time above baseline x 1.5 (this host's timing noise is +-20%)
# and more than WALL_MARGIN seconds above it.
CYCLES_RATIO, COSINE_DROP, WALL_RATIO, WALL_MARGIN = 1.01, 0.001, 1.5, 0.5
PAGE = report.REPORTS / "nightly"
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def parser():
    p = argparse.ArgumentParser(
        prog="ci/nightly",
        description="Run the nightly regression matrix: each case's exit code against its expectation and "
                    "its figures (simulated cycles, min cosine, wall time, bench targets) against the "
                    "baselines. Exit codes: 0 every case as expected, 1 a case failed or regressed, "
                    "2 usage or input error, 3 internal error.")
    p.add_argument("--cases", type=Path, default=REPO / "ci" / "cases.json", metavar="FILE",
                   help="case list (default: ci/cases.json)")
    p.add_argument("--baselines", type=Path, default=REPO / "ci" / "baselines.json", metavar="FILE",
                   help="baselines to compare with (default: ci/baselines.json; missing: nothing to compare)")
    p.add_argument("--only", metavar="NAME[,NAME...]", help="run only these cases")
    p.add_argument("--list", action="store_true", help="print the cases and exit")
    p.add_argument("--output", type=Path, default=Path("nightly"), metavar="DIR",
                   help="write summary.json, summary.md and each case's output and log to DIR "
                        "(default: ./nightly)")
    p.add_argument("--resume", action="store_true",
                   help="keep the cases the summary in --output has finished and run the rest of its plan")
    p.add_argument("--update-baselines", action="store_true",
                   help="after the run, record the figures of every case that ran as expected as its baseline")
    fanout.add_arguments(p)
    p.add_argument("--one-case", metavar="NAME",
                   help="run the one case NAME into --output and write its entry (cases/NAME/entry.json) "
                        "without touching the summary: the job --jobs and --sshlogin run on each machine")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def read_json(path, what):
    """The JSON of the case list or baselines at path (files.read_json: a regular file, bounded)."""
    try:
        return files.read_json(path, f"the {what}")
    except files.InputError as error:
        raise UsageError(f"{error} (expected JSON)") from None


def load_cases(path):
    """The case list, checked: every error names the file, the case and the field."""
    data = read_json(path, "case list")
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("cases"), list):
        raise UsageError(f"{path}: expected an object with \"version\": 1 and a \"cases\" list")
    cases, names = [], set()
    for index, case in enumerate(data["cases"]):
        where = f"{path}: case {index}"
        if not isinstance(case, dict):
            raise UsageError(f"{where}: expected an object")
        name = case.get("name")
        if not isinstance(name, str) or not NAME.match(name) or name in names:
            raise UsageError(f"{where}: field 'name': expected a new name of lowercase letters, digits and "
                             f"dashes, got {name!r}")
        where = f"{path}: case '{name}'"
        if case.get("command") not in COMMANDS:
            raise UsageError(f"{where}: field 'command': expected one of {', '.join(COMMANDS)}, got "
                             f"{case.get('command')!r}")
        args = case.get("args")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise UsageError(f"{where}: field 'args': expected a list of strings")
        if case.get("expect") not in EXPECTED:
            raise UsageError(f"{where}: field 'expect': expected 'pass' or 'reject', got {case.get('expect')!r}")
        timeout = case.get("timeout_seconds", DEFAULT_TIMEOUT)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
            raise UsageError(f"{where}: field 'timeout_seconds': expected a positive integer, got {timeout!r}")
        unknown = set(case) - {"name", "command", "args", "expect", "timeout_seconds"}
        if unknown:
            raise UsageError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        names.add(name)
        cases.append(dict(case, timeout_seconds=timeout))
    return cases


def load_baselines(path):
    if not path.exists():
        return {}
    data = read_json(path, "baselines")
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise UsageError(f"{path}: expected an object of case name -> figures")
    return data


def figures_of(case, folder):
    """The figures a case's command wrote, and the problems found reading them (a file that is missing or
    not of its shape is the case's problem, named with its field)."""
    try:
        return read_figures(case, folder)
    except UsageError as error:
        return {}, [str(error)]


def read_figures(case, folder):
    if case["command"] == "test":
        path = folder / "result.json"
        if not path.exists():
            return {}, ["no result.json was written"]
        result = schema.load(path, schema.RUN_RESULT)
        figures = {"cycles": result["cycles"]} if result.get("cycles") is not None else {}
        cosines = [c["min_cosine"] for c in result.get("checks") or [] if "min_cosine" in c]
        if cosines:
            figures["min_cosine"] = min(cosines)
        return figures, []
    if case["command"] == "onnx-tests":
        path = folder / "onnx-tests.json"
        if not path.exists():
            return {}, ["no onnx-tests.json was written"]
        result = schema.load(path, schema.ONNX_TESTS)
        return {k: result[k] for k in ("passed", "failed", "not_supported")}, [
            f"ONNX node test {e['name']} ({e['op_type']}) failed: {e.get('detail')}" for e in result["cases"]
            if e["status"] == "failed"]
    if case["command"] == "random":
        path = folder / "random.json"
        if not path.exists():
            return {}, ["no random.json was written"]
        result = schema.load(path, schema.RANDOM)
        failed = [e for e in result["cases"] if e["status"] == "failed"]
        return {"cases": len(result["cases"]), "passed": result["passed"]}, [
            f"{e['name']} failed ({'; '.join(e['problems'])}); reproduce: {' '.join(e['reproduce'])}" for e in failed]
    if case["command"] == "properties":
        path = folder / "properties.json"
        if not path.exists():
            return {}, ["no properties.json was written"]
        result = schema.load(path, schema.PROPERTIES)
        return {"inputs": sum(p["inputs"] for p in result["properties"])}, [
            f"property {p['property']} fails from seed {result['seed']}: {p.get('finding')} (kept as "
            f"{p.get('kept', 'nothing: no --keep-findings')})" for p in result["properties"] if not p["holds"]] + [
            f"kept regression input {path} fails its property" for path in result["regressions_broken"]]
    pattern = "fuzz.json" if case["command"] == "fuzz" else "bench-*.json"
    found = sorted(folder.glob(pattern))
    if not found:
        return {}, [f"the {case['command']} wrote no {pattern}"]
    result = schema.load(found[0], schema.BENCH)
    figures = {}
    for key, name in (("simulated_cycles_per_inference", "cycles"), ("min_cosine", "min_cosine")):
        if result.get(key) is not None:
            figures[name] = result[key]
    missed = [k for k, met in (result.get("targets_met") or {}).items() if not met]
    return figures, [f"bench target not met: {', '.join(missed)}"] if missed else []


def compare(figures, baseline):
    """Regressions of figures against a baseline, as messages.  Wall times
    compare only between runs of as many jobs per machine (a case sharing
    the cores with another takes longer for that alone)."""
    found = []
    if "cycles" in figures and "cycles" in baseline and figures["cycles"] > baseline["cycles"] * CYCLES_RATIO:
        found.append(f"cycles {figures['cycles']:,} > baseline {baseline['cycles']:,} x {CYCLES_RATIO}")
    if ("min_cosine" in figures and "min_cosine" in baseline
            and figures["min_cosine"] < baseline["min_cosine"] - COSINE_DROP):
        found.append(f"min cosine {figures['min_cosine']:.6f} < baseline {baseline['min_cosine']:.6f} - "
                     f"{COSINE_DROP}")
    if ("wall_seconds" in figures and "wall_seconds" in baseline
            and figures.get("jobs_per_machine", 1) == baseline.get("jobs_per_machine", 1)
            and figures["wall_seconds"] > baseline["wall_seconds"] * WALL_RATIO
            and figures["wall_seconds"] - baseline["wall_seconds"] > WALL_MARGIN):
        found.append(f"wall {figures['wall_seconds']:.1f} s > baseline {baseline['wall_seconds']:.1f} s x "
                     f"{WALL_RATIO}")
    return found


def as_expected(case, code, folder):
    """Whether a case's exit code (and for exit 1 its result.json) is what it expects."""
    if case["expect"] == "pass":
        return code == 0
    if code != 1:
        return False
    try:
        return json.loads((folder / "result.json").read_text()).get("status") == "REJECTED"
    except (OSError, ValueError, AttributeError):
        return False


def error_of(code, folder):
    """For exit 3, what result.json says went wrong: a compiler inconsistency
    (never a rejection) or a device fault."""
    if code != EXIT_FAULT:
        return ""
    try:
        result = json.loads((folder / "result.json").read_text())
    except (OSError, ValueError):
        return ""
    if not isinstance(result, dict):
        return ""
    if result.get("status") == "INCONSISTENT":
        return f": compiler inconsistency: {result.get('message')}"
    if result.get("status") == "FAULT":
        return f": device fault: {result.get('message')}"
    return ""


def case_links(folder, output, log_path):
    """The files a case wrote that a reader opens, as [label, path relative
    to output]: its pages and JSON, the reports its result.json lists, and
    its log."""
    found = sorted(folder.glob("*.html")) + sorted(folder.glob("*.json"))
    try:
        listed = json.loads((folder / "result.json").read_text()).get("reports", {})
    except (OSError, ValueError, AttributeError):
        listed = {}
    for path in (listed.values() if isinstance(listed, dict) else []):
        if isinstance(path, str) and (folder / path).is_file() and (folder / path).resolve() not in (
                f.resolve() for f in found):
            found.append(folder / path)
    links = [[f.stem if f.suffix == ".html" else f.name, f.relative_to(output).as_posix()] for f in found]
    return links + [["log", log_path.relative_to(output).as_posix()]]


def run_case(case, output, baseline):
    folder = output / "cases" / case["name"]
    folder.mkdir(parents=True, exist_ok=True)
    args = [a.replace("{output}", str(folder)) for a in case["args"]]
    # The output flags go before any `--` (after it, ipu-e2e-random passes flags on to its builds).
    cut = args.index("--") if "--" in args else len(args)
    command = [sys.executable, str(COMMANDS[case["command"]]), *args[:cut], "--output", str(folder), "--quiet",
               *args[cut:]]
    (folder / "result.json").unlink(missing_ok=True)  # an earlier attempt's
    began = time.monotonic()
    code, log = child.execute(command, case["timeout_seconds"])
    wall = time.monotonic() - began
    log_path = output / "logs" / f"{case['name']}.log"
    artifacts.write_bytes(log_path, log)
    entry = {"name": case["name"], "command": ["ipu-e2e-" + case["command"], *args], "expect": case["expect"],
             "exit": code, "log": str(log_path.relative_to(output)), "baseline": baseline, "problems": []}
    if code is None:
        entry["problems"].append(f"timed out after {case['timeout_seconds']} s")
    elif code < 0:
        entry["problems"].append(f"the process died of {signal.Signals(-code).name}")
    elif not as_expected(case, code, folder):
        entry["problems"].append(f"exit {code}, expected {EXPECTED[case['expect']]} ({case['expect']})"
                                 + error_of(code, folder))
    figures, problems = {}, []
    if code is not None and code >= 0:
        try:
            figures, problems = figures_of(case, folder)
        except (OSError, ValueError, KeyError, TypeError) as error:
            problems = [f"cannot read the figures the command wrote: {error}"]
    figures["wall_seconds"] = wall
    entry["figures"] = figures
    table, node_tests = folder / "bench-mutations.json", folder / "onnx-tests.json"
    try:
        if table.exists():
            entry["mutations"] = schema.load(table, schema.MUTATIONS)["mutations"]
        if node_tests.exists():
            entry["onnx_tests"] = onnx_tests.op_type_table(schema.load(node_tests, schema.ONNX_TESTS))
    except UsageError as error:
        problems.append(str(error))
    entry["problems"] += problems
    entry["links"] = case_links(folder, output, log_path)
    entry["regressions"] = compare(figures, baseline or {}) if not entry["problems"] else []
    entry["status"] = ("error" if code == EXIT_FAULT else "failed") if entry["problems"] else \
        "regressed" if entry["regressions"] else "ok"
    return entry


def delta(figures, baseline, key, form):
    if key not in figures:
        return ""
    text = form(figures[key])
    if key in baseline:
        if key == "min_cosine":
            text += f" ({figures[key] - baseline[key]:+.6f})"
        elif baseline[key]:
            text += f" (x{figures[key] / baseline[key]:.3f})"
    return text


def headline(summary):
    errors = f"; {summary['errors']} error(s): exit 3, a compiler inconsistency or a device fault" \
        if summary.get("errors") else ""
    if summary["complete"]:
        return f"# Nightly matrix: {summary['passed']} of {len(summary['cases'])} cases as expected{errors}"
    finished = {e["name"] for e in summary["cases"]}
    missing = [n for n in summary["planned"] if n not in finished]
    return (f"# Nightly matrix INTERRUPTED: {len(finished)} of {len(summary['planned'])} planned cases finished "
            f"({summary['passed']} as expected); not finished: {', '.join(missing)} (ci/nightly --resume runs them)")


def markdown(summary):
    lines = [headline(summary), "",
             "| case | expect | exit | status | cycles (x baseline) | min cosine (change) | wall s (x baseline) "
             "| notes |", "|---|---|---|---|---|---|---|---|"]
    for e in summary["cases"]:
        f, b = e["figures"], e["baseline"] or {}
        notes = "; ".join(e["problems"] + e["regressions"])
        lines.append(f"| {e['name']} | {e['expect']} | {e['exit']} | {e['status']} | "
                     f"{delta(f, b, 'cycles', lambda v: f'{v:,}')} | {delta(f, b, 'min_cosine', lambda v: f'{v:.6f}')} | "
                     f"{delta(f, b, 'wall_seconds', lambda v: f'{v:.1f}')} | {notes} |")
    for e in summary["cases"]:
        if e.get("mutations"):
            lines += ["", mutation_catalogue.markdown(e["mutations"]).rstrip("\n")]
        if e.get("onnx_tests"):
            lines += ["", "ONNX backend node tests per op type:", "", *e["onnx_tests"]]
    return "\n".join(lines) + "\n"


def page(summary):
    """summary.html: the summary with each case's tables as text."""
    cases = []
    for e in summary["cases"]:
        tables = [mutation_catalogue.markdown(e["mutations"])] if e.get("mutations") else []
        if e.get("onnx_tests"):
            tables.append("ONNX backend node tests per op type:\n\n" + "\n".join(e["onnx_tests"]))
        cases.append(dict(e, tables=tables))
    return report.inline_page(PAGE, "nightly.css", "nightly.js", report.embedded_json(dict(summary, cases=cases)))


def write_summary(output, plan, entries):
    """Write summary.json, summary.md and summary.html for the planned cases
    and the entries of those finished (in plan order); returns the summary."""
    order = {c["name"]: i for i, c in enumerate(plan)}
    entries = sorted(entries, key=lambda e: order[e["name"]])
    summary = {**run_reports.record("nightly-summary", ["ci/nightly", *sys.argv[1:]]),
               "planned": [c["name"] for c in plan], "complete": len(entries) == len(plan),
               "cases": entries, "passed": sum(e["status"] == "ok" for e in entries),
               "errors": sum(e["status"] == "error" for e in entries),
               "limits": {"cycles_ratio": CYCLES_RATIO, "cosine_drop": COSINE_DROP, "wall_ratio": WALL_RATIO,
                          "wall_margin_seconds": WALL_MARGIN}}
    artifacts.write_json(output / "summary.json", summary)
    artifacts.write_bytes(output / "summary.md", markdown(summary).encode())
    artifacts.write_bytes(output / "summary.html", page(summary).encode())
    return summary


def resume(output, cases):
    """The plan and finished entries of the summary in output, the plan's
    cases taken from the case list."""
    path = output / "summary.json"
    if not path.exists():
        raise UsageError(f"--resume: {path} does not exist: there is no run to resume in --output {output}")
    summary = read_json(path, "summary to resume")
    if not isinstance(summary, dict) or not isinstance(summary.get("planned"), list) or not isinstance(
            summary.get("cases"), list):
        raise UsageError(f"--resume: {path}: expected a summary with \"planned\" and \"cases\" lists")
    by_name = {c["name"]: c for c in cases}
    gone = [n for n in summary["planned"] if n not in by_name]
    if gone:
        raise UsageError(f"--resume: {path} plans case(s) {', '.join(map(str, gone))} that the case list "
                         f"no longer has")
    plan = [by_name[n] for n in summary["planned"]]
    return plan, [e for e in summary["cases"] if isinstance(e, dict) and e.get("name") in by_name]


def select(cases, only):
    if only is None:
        return cases
    wanted = [n for n in only.split(",") if n]
    if not wanted:
        raise UsageError(f"--only: expected case names separated by commas, got '{only}'")
    unknown = [n for n in wanted if n not in {c["name"] for c in cases}]
    if unknown:
        raise UsageError(f"--only: no case named {', '.join(unknown)}; the cases are "
                         f"{', '.join(c['name'] for c in cases)}")
    return [c for c in cases if c["name"] in wanted]


def one_case(args):
    """--one-case NAME: run it and write its entry (atomically), then print
    its name, which tells the runner that fanned it out that it finished."""
    child.die_with_parent()
    given = [flag for flag, on in (("--resume", args.resume), ("--only", args.only is not None),
                                   ("--list", args.list), ("--update-baselines", args.update_baselines),
                                   ("--jobs/--sshlogin", fanout.requested(args))) if on]
    if given:
        raise UsageError(f"--one-case runs one case for a fanned-out run; it takes no {given[0]}")
    case = next((c for c in load_cases(args.cases) if c["name"] == args.one_case), None)
    if case is None:
        raise UsageError(f"--one-case: no case named {args.one_case} in {args.cases}")
    folder = args.output / "cases" / case["name"]
    with fanout.case_lock(folder):
        (folder / "entry.json").unlink(missing_ok=True)
        entry = run_case(case, args.output, load_baselines(args.baselines).get(case["name"]))
        artifacts.write_json(folder / "entry.json", entry)
    print(case["name"], flush=True)
    return EXIT_OK


def fan_out(args, plan, entries, progress):
    """Run the planned cases not in entries through GNU parallel, one
    `--one-case` job each; the summary is rewritten as each job ends, in
    whatever order.  Returns the names of the cases whose job ended without
    an entry."""
    finished = {e["name"] for e in entries}
    pending = [c["name"] for c in plan if c["name"] not in finished]
    output = args.output.resolve()
    commands = [[sys.executable, str(REPO / "ci" / "nightly"), "--one-case", name, "--cases",
                 str(args.cases.resolve()), "--baselines", str(args.baselines.resolve()), "--output",
                 str(output), "--quiet"] for name in pending]

    baselines = load_baselines(args.baselines)

    def ended(name):
        if name not in pending or name in finished:
            return
        entry = read_json(output / "cases" / name / "entry.json", f"entry of case '{name}'")
        # Its figures were measured N jobs to a machine: compared again knowing that.
        entry["figures"]["jobs_per_machine"] = args.jobs or 1
        if not entry["problems"]:
            entry["regressions"] = compare(entry["figures"], baselines.get(name) or {})
            entry["status"] = "regressed" if entry["regressions"] else "ok"
        entries.append(entry)
        finished.add(name)
        write_summary(args.output, plan, entries)
        progress.update(f"{len(finished)} of {len(plan)} cases finished", len(finished), len(plan))

    progress.update(f"{len(finished)} of {len(plan)} cases finished", len(finished), len(plan))
    fanout.run(args, args.jobs or 1, commands, ended)
    return [n for n in pending if n not in finished]


def work(args, progress):
    if args.one_case is not None:
        return one_case(args)
    if args.resume and (args.only is not None or args.list):
        raise UsageError(f"--resume runs the plan of the summary in --output; it takes no "
                         f"{'--only' if args.only is not None else '--list'}")
    cases = load_cases(args.cases)
    plan = select(cases, args.only)
    if args.list:
        for c in plan:
            print(f"{c['name']}: ipu-e2e-{c['command']} {' '.join(c['args'])} (expect {c['expect']})")
        return EXIT_OK
    baselines = load_baselines(args.baselines)
    if fanout.requested(args):
        fanout.check(args)
    output_folders(args, "output")
    plan, entries = resume(args.output, cases) if args.resume else (plan, [])
    finished = {e["name"] for e in entries}
    summary = write_summary(args.output, plan, entries)
    if fanout.requested(args):
        lost = fan_out(args, plan, entries, progress)
        summary = write_summary(args.output, plan, entries)
        if lost:
            progress.done()
            print(markdown(summary), end="")
            print(f"ci/nightly: error: the job of case(s) {', '.join(lost)} ended without an entry (its error "
                  f"is above); ci/nightly --resume runs them again", file=sys.stderr)
            return EXIT_FAULT
    else:
        for index, case in enumerate(plan):
            if case["name"] in finished:
                continue
            progress.update(f"case {case['name']}", index + 1, len(plan))
            entries.append(run_case(case, args.output, baselines.get(case["name"])))
            summary = write_summary(args.output, plan, entries)
    progress.done()
    if args.update_baselines:
        for e in entries:
            if not e["problems"]:
                baselines[e["name"]] = e["figures"]
        artifacts.write_json(args.baselines, baselines)
    print(markdown(summary), end="")
    return EXIT_OK if all(e["status"] == "ok" for e in entries) else EXIT_CHECK_FAILED


def main(argv=None):
    args = parser().parse_args(argv)
    progress = Progress(args.quiet)
    code, result = guarded("ci/nightly", progress, lambda: work(args, progress))
    return code if code is not None else result
