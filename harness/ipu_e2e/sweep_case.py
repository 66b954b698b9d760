"""One case of a memory-budget sweep (ipu-e2e-sweep), in two stages that run
as jobs on any machine of the fan-out.  The build stage runs `ipu-e2e-test
--compile-only --save-package` into the case folder and classifies it: built,
rejected (the planner found no plan that fits the budget: exit 1 and
result.json's status REJECTED with its rejection record), timed out or
error (a compiler inconsistency, exit 3, is an error and never a rejection:
its message is the note).  The run stage
replays the saved package (`ipu-e2e-test --package`, the same checks) into
run/: passed, failed (a check), timed out or error; the build's index then
links the run's.  Each stage first removes
what an unfinished earlier attempt left, keeps the command lines
(command.txt, shell-quoted) and the full output (log.txt), and writes its
record atomically: build.json for a build that a run follows, and case.json,
written last, when the case is finished.  sha256.json holds the SHA-256 of the
library and the CLI script the case used; a run whose library or CLI changed
since its build is an error.
"""
import json
import shlex
import shutil
import signal
import time
from pathlib import Path

from . import artifacts, child, fanout, run_reports

CLI = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-test"
# What each stage writes in the case folder (removed before it starts).
BUILD_OUTPUTS = ("result.json", "package.pkg", "memory", "run", "build.json", "sha256.json", "log.txt",
                 "command.txt", "case.json")
RUN_OUTPUTS = ("run",)


def digests():
    """SHA-256 of the library the CLI loads and of the CLI script."""
    return {"library": run_reports.library(), "cli": {"path": str(CLI), "sha256": run_reports.sha256_of(CLI)}}


def clear(folder, names):
    for name in names:
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def read_result(path):
    """result.json as a dict, or None when it is missing or unreadable."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def error_line(log):
    """The CLI's last 'error:' line, or its last line."""
    lines = [l for l in log.decode(errors="replace").splitlines() if l.strip()]
    errors = [l for l in lines if ": error: " in l]
    return (errors or lines or [""])[-1].strip()


def classify_build(folder, code, log):
    """(outcome, message, rejection) of a build."""
    if code is None:
        return "timed out", "the build timed out", None
    if code < 0:
        return "error", f"the build died of {signal.Signals(-code).name}", None
    result = read_result(folder / "result.json")
    status = result.get("status") if result else None
    if code == 0 and status == "COMPILED" and (folder / "package.pkg").exists():
        return "built", None, None
    if code == 1 and status == "REJECTED" and isinstance(result.get("rejection"), dict):
        return "rejected", result["rejection"].get("reason"), result["rejection"]
    if code == 3 and status == "INCONSISTENT" and isinstance(result.get("message"), str):
        return "error", f"build exit 3: {result['message']}", None
    return "error", f"build exit {code}: {error_line(log)}", None


def classify_run(folder, code, log):
    """(outcome, message) of a device run."""
    if code is None:
        return "timed out", "the device run timed out"
    if code < 0:
        return "error", f"the device run died of {signal.Signals(-code).name}"
    result = read_result(folder / "run" / "result.json")
    if code == 0 and result and result.get("status") == "PASS":
        return "passed", None
    if code == 1 and result and result.get("checks"):
        failed = [c for c in result["checks"] if not c.get("passed")]
        if failed:
            return "failed", "; ".join(f"{c.get('tensor')}: min cosine {c.get('min_cosine')}, "
                                       f"{c.get('elementwise_failures')} elements over the bound" for c in failed)
    return "error", f"run exit {code}: {error_line(log)}"


def figures(folder):
    """Cycles and the lowest min cosine of the run's result.json."""
    result = read_result(folder / "run" / "result.json") or {}
    found = {}
    if isinstance(result.get("cycles"), int):
        found["cycles"] = result["cycles"]
    cosines = [c["min_cosine"] for c in result.get("checks", []) if "min_cosine" in c]
    if cosines:
        found["min_cosine"] = min(cosines)
    return found


def execute(command, timeout):
    began = time.monotonic()
    code, log = child.execute(command, timeout)
    return code, log, time.monotonic() - began


def logged(command, log):
    return f"$ {shlex.join(command)}\n".encode() + log


def finish(folder, record):
    artifacts.write_json(folder / "case.json", dict(record, finished_at=time.time()))


def build(case, folder, timeout):
    clear(folder, BUILD_OUTPUTS)
    (folder / "memory").mkdir(parents=True)
    sums = digests()
    artifacts.write_json(folder / "sha256.json", sums)
    artifacts.write_bytes(folder / "command.txt", (shlex.join(case["build"]) + "\n").encode())
    code, log, seconds = execute(case["build"], timeout)
    artifacts.write_bytes(folder / "log.txt", logged(case["build"], log))
    outcome, message, rejection = classify_build(folder, code, log)
    stage = {"command": case["build"], "exit": code, "seconds": seconds}
    if outcome == "built":
        artifacts.write_json(folder / "build.json", stage)
        return
    finish(folder, {"name": case["name"], "outcome": outcome, "stage": "build", "message": message,
                    "rejection": rejection, "build": stage, "run": None, "figures": {}, "sha256": sums})


def run(case, folder, timeout):
    stage = read_result(folder / "build.json")
    if not stage or stage.get("command", [None])[1:] != case["build"][1:]:
        raise RuntimeError(f"case {case['name']}: no finished build of this command in {folder}")
    clear(folder, RUN_OUTPUTS)
    built = json.loads((folder / "sha256.json").read_text())
    sums = digests()
    record = {"name": case["name"], "stage": "run", "rejection": None, "build": stage, "sha256": sums}
    if sums != built:
        changed = [k for k in sums if sums[k] != built.get(k)]
        finish(folder, dict(record, outcome="error", run=None, figures={},
                            message=f"the {' and the '.join(changed)} changed since the build"))
        return
    commands = shlex.join(case["build"]) + "\n" + shlex.join(case["run"]) + "\n"
    artifacts.write_bytes(folder / "command.txt", commands.encode())
    code, log, seconds = execute(case["run"], timeout)
    build_log = (folder / "log.txt").read_bytes()
    artifacts.write_bytes(folder / "log.txt", build_log + logged(case["run"], log))
    outcome, message = classify_run(folder, code, log)
    if (folder / "index.html").is_file() and (folder / "run" / "index.html").is_file():
        run_reports.add_index_link(folder / "index.html", "run", folder / "run" / "index.html")
    finish(folder, dict(record, outcome=outcome, message=message, figures=figures(folder),
                        run={"command": case["run"], "exit": code, "seconds": seconds}))


def work(stage, case, folder, timeout):
    """Run one stage of a case (unless the case is finished) and print its
    name, the fan-out's sign that the job ended."""
    child.die_with_parent()
    with fanout.case_lock(folder):
        if not (folder / "case.json").exists():
            (build if stage == "build" else run)(case, folder, timeout)
    print(case["name"], flush=True)
