"""The interrupts benchmark (ipu-e2e-bench interrupts): how long SIGINT takes
to end ipu-e2e-test in every stage of a full-size run.  For each workload
(the full MLP and ViT, with both references and every report), one run
without a signal lists its stages from its progress lines (each stage's
start and length); then, for every stage that lasts long enough to be hit,
a fresh run gets SIGINT halfway into it (at most a few seconds in), and the
benchmark measures the time from the signal to the process's exit and checks
the exit: code 130, one line naming the signal, no traceback.  The target:
every stage stops within 1 s (the README's figure, on an idle machine).

A stage's length varies from run to run (on a loaded machine, initializing
the device took 1 s in one run and 10 s in the next), so the signal is sent
only while the stage is still the run's latest progress line and its
process has not begun to exit: a shot that would land after the stage (or
once the process is exiting, where a signal can be neither lost nor
honoured) is not fired, and the stage is tried again with a run of its own,
aiming halfway into the length that run showed.  Every signal sent, in its
stage or not, must end the run cleanly within the target.
"""
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-test"
STOP_SECONDS = 1.0
SHORTEST_STAGE = 0.2  # stages shorter than this end before a signal can be aimed inside them
LATEST = 3.0  # the signal goes halfway into a stage, but at most this far in
ATTEMPTS = 3  # runs per stage to land the signal inside it
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


class Lines:
    """A run's stderr read by a thread of its own, each line with the time it
    arrived; changed is set by every progress line and at the end."""

    def __init__(self, stream):
        self.lines, self.ended, self.changed = [], None, threading.Event()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            self.lines.append((time.monotonic(), line.rstrip("\n")))
            if LINE.match(line.strip()):
                self.changed.set()
        self.ended = time.monotonic()
        self.changed.set()

    def stages(self):
        """[(arrival time, stage)] of the progress lines so far."""
        return [(at, found.group(2)) for at, found in ((at, LINE.match(line.strip())) for at, line in self.lines)
                if found]

    def wait_for(self, stage):
        """The arrival time of stage's progress line; None if the run ended without it."""
        while True:
            self.changed.clear()
            for at, name in self.stages():
                if name == stage:
                    return at
            if self.ended is not None:
                return None
            self.changed.wait()

    def next_after(self, began):
        """The arrival time of the first progress line after `began` (or of the end), None while there is none."""
        later = [at for at, _ in self.stages() if at > began]
        return later[0] if later else self.ended


def exiting(pid):
    """Has the process begun to exit?  Its exit code is then set, though the
    kernel may take tens of milliseconds more to release a large run's memory
    (its stderr closes after that): a signal then can neither be lost nor
    honoured.  Linux: PF_EXITING in the flags of /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return bool(int(fields[6]) & 0x4)
    except (OSError, IndexError, ValueError):
        return True


def interrupt(workload, folder, stage, delay):
    """Start a run and SIGINT it `delay` seconds into `stage` if the stage is
    still running then.  Returns {"sent": False, "stage_seconds": its length
    in this run} when the stage (or the process) ended first (the run is
    killed), else the
    outcome: seconds to exit, exit code, last stderr line, traceback, whether
    the signal landed in the stage (by the progress lines that came before it)
    and the stage it landed in."""
    process = subprocess.Popen(command(workload, folder), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    lines = Lines(process.stderr)
    try:
        began = lines.wait_for(stage)
        if began is None:
            process.wait()
            return {"sent": False, "stage_seconds": 0.0}
        deadline = began + delay
        while time.monotonic() < deadline and lines.next_after(began) is None:
            lines.changed.clear()
            if lines.next_after(began) is None:
                lines.changed.wait(max(0.0, deadline - time.monotonic()))
        ended = lines.next_after(began)
        if ended is not None or process.poll() is not None or exiting(process.pid):
            return {"sent": False, "stage_seconds": (ended or time.monotonic()) - began}
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        lines.thread.join(timeout=10)
    took = time.monotonic() - sent
    stages = [name for at, name in lines.stages() if at <= sent]
    text = [line for _, line in lines.lines if line.strip()]
    return {"sent": True, "stop_seconds": took, "exit": process.returncode, "last": text[-1] if text else "",
            "traceback": any("Traceback" in line or "Exception ignored" in line for _, line in lines.lines),
            "landed_in": stages[-1] if stages else None, "hit": bool(stages) and stages[-1] == stage,
            "stage_seconds": (lines.next_after(began) or time.monotonic()) - began}


def clean(outcome):
    """A signal's outcome as the README promises: exit 130, the one line, no traceback."""
    return (outcome["exit"] == 130 and outcome["last"].endswith("interrupted by SIGINT")
            and not outcome["traceback"])


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
                aim = min(length / 2, LATEST)
                strays, outcome = [], None
                for attempt in range(1, ATTEMPTS + 1):
                    progress.update(f"{workload}: SIGINT in '{name}'" + (f" (try {attempt})" if attempt > 1 else ""))
                    delay = aim
                    outcome = interrupt(workload, folder, name, delay)
                    if outcome["sent"] and outcome["hit"]:
                        break
                    if outcome["sent"]:  # it landed after the stage: it must still end the run cleanly
                        strays.append({k: outcome[k] for k in ("landed_in", "stop_seconds", "exit", "last")}
                                      | {"clean": clean(outcome), "signal_after": delay})
                    # Halfway into the stage as long as this run showed it.
                    aim = min(aim, outcome["stage_seconds"] / 2)
                row = {"workload": workload, "stage": name, "stage_seconds": length, "signal_after": delay,
                       "attempts": attempt, "hit": bool(outcome["sent"] and outcome["hit"]), "strays": strays}
                if outcome["sent"]:
                    row.update(stop_seconds=outcome["stop_seconds"], exit=outcome["exit"], clean=clean(outcome))
                else:
                    row.update(stop_seconds=None, exit=None, clean=False)
                row["within_target"] = (row["hit"] and row["clean"] and row["stop_seconds"] < STOP_SECONDS
                                        and all(s["clean"] and s["stop_seconds"] < STOP_SECONDS for s in strays))
                rows.append(row)
    return {"rows": rows, "targets": {"stop_seconds": STOP_SECONDS},
            "targets_met": {"every_stage_stops_in_time": bool(rows) and all(r["within_target"] for r in rows)}}


def report(result, out):
    print(f"SIGINT in every stage of a full-size ipu-e2e-test (both references, every report); target: exit 130 "
          f"within {result['targets']['stop_seconds']:.1f} s", file=out)
    print("| workload | stage | stage s | signal after s | stopped in s | exit | tries | |", file=out)
    print("|---|---|---:|---:|---:|---:|---:|---|", file=out)
    for r in result["rows"]:
        stopped = "-" if r["stop_seconds"] is None else f"{r['stop_seconds']:.2f}"
        verdict = "ok" if r["within_target"] else "NOT met" if r["hit"] else "NOT met (never hit)"
        print(f"| {r['workload']} | {r['stage']} | {r['stage_seconds']:.2f} | {r['signal_after']:.2f} | "
              f"{stopped} | {'-' if r['exit'] is None else r['exit']} | {r['attempts']} | {verdict} |", file=out)
        for stray in r["strays"]:
            print(f"|  | (landed in '{stray['landed_in']}') |  | {stray['signal_after']:.2f} | "
                  f"{stray['stop_seconds']:.2f} | {stray['exit']} |  | {'ok' if stray['clean'] else 'NOT clean'} |",
                  file=out)
    print("targets: " + "; ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in result["targets_met"].items()),
          file=out)
