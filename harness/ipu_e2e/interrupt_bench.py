"""The interrupts benchmark (ipu-e2e-bench interrupts): how long SIGINT takes
to end ipu-e2e-test in every stage of a full-size run.  For each workload
(the full MLP and ViT, with both references and every report), one run
without a signal lists its stages from its progress lines (each stage's
start and length); then, for every stage that lasts long enough to be hit,
a fresh run gets SIGINT halfway into it (at most a few seconds in), and the
benchmark measures the time from the signal to the process's exit and checks
the exit: code 130, one line naming the signal, no traceback.  The target:
every stage stops within 1 s (the README's figure, on an idle machine).
"""
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-test"
STOP_SECONDS = 1.0
SHORTEST_STAGE = 0.2  # stages shorter than this end before a signal can be aimed inside them
LATEST = 3.0  # the signal goes halfway into a stage, but at most this far in
LINE = re.compile(r"^\[\s*([0-9.]+)s\] (.*)$")
WORKLOADS = ("mlp", "vit")


def command(workload, folder):
    return [sys.executable, str(CLI), "--workload", workload, "--reference-run", "--reference-fp32", "--output",
            str(folder / "out"), "--profile-directory", str(folder / "out" / "run"), "--memory-profile-directory",
            str(folder / "out" / "memory")]


def survey(workload, folder):
    """[(stage, start seconds, length seconds)] of one uninterrupted run, from its progress lines."""
    began = time.monotonic()
    process = subprocess.Popen(command(workload, folder), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    stages = []
    for line in process.stderr:
        found = LINE.match(line.strip())
        if found:
            stages.append([found.group(2), time.monotonic() - began])
    process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"ipu-e2e-test --workload {workload} exited {process.returncode} without a signal")
    ended = time.monotonic() - began
    return [(name, start, (stages[i + 1][1] if i + 1 < len(stages) else ended) - start)
            for i, (name, start) in enumerate(stages)]


def interrupt(workload, folder, stage, delay):
    """Start a run, SIGINT it `delay` seconds into `stage`; (seconds to exit, exit code, last stderr line)."""
    process = subprocess.Popen(command(workload, folder), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    for line in process.stderr:
        if line.strip().endswith("] " + stage):
            break
    time.sleep(delay)
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    rest = process.communicate(timeout=120)[1]
    took = time.monotonic() - sent
    lines = [line for line in rest.splitlines() if line.strip()]
    return took, process.returncode, lines[-1] if lines else "", "Traceback" in rest


def measure(workloads, progress):
    rows = []
    for workload in workloads:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            progress.update(f"{workload}: a run without a signal, for its stages")
            stages = survey(workload, folder)
            for name, start, length in stages:
                if length < SHORTEST_STAGE:
                    continue
                progress.update(f"{workload}: SIGINT in '{name}'")
                delay = min(length / 2, LATEST)
                took, code, last, traceback = interrupt(workload, folder, name, delay)
                clean = code == 130 and last.endswith("interrupted by SIGINT") and not traceback
                rows.append({"workload": workload, "stage": name, "stage_seconds": length, "signal_after": delay,
                             "stop_seconds": took, "exit": code, "clean": clean,
                             "within_target": clean and took < STOP_SECONDS})
    return {"rows": rows, "targets": {"stop_seconds": STOP_SECONDS},
            "targets_met": {"every_stage_stops_in_time": bool(rows) and all(r["within_target"] for r in rows)}}


def report(result, out):
    print(f"SIGINT in every stage of a full-size ipu-e2e-test (both references, every report); target: exit 130 "
          f"within {result['targets']['stop_seconds']:.1f} s", file=out)
    print("| workload | stage | stage s | signal after s | stopped in s | exit | |", file=out)
    print("|---|---|---:|---:|---:|---:|---|", file=out)
    for r in result["rows"]:
        print(f"| {r['workload']} | {r['stage']} | {r['stage_seconds']:.2f} | {r['signal_after']:.2f} | "
              f"{r['stop_seconds']:.2f} | {r['exit']} | {'ok' if r['within_target'] else 'NOT met'} |", file=out)
    print("targets: " + "; ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in result["targets_met"].items()),
          file=out)
