"""test_interrupts.py: SIGINT and SIGTERM end a command promptly (within
WITHIN_SECONDS, a bound generous enough for a loaded machine) with one
line on stderr, exit code 130 and no traceback, and leave no half-written
artifact.  The full-size ViT with both references (the README's longest
command) is interrupted while it generates its values, while it compiles and
while the device runs it; ipu-e2e-bench while it benchmarks; ci/nightly
forwards the signal to its running case, waits for it and leaves a summary
that says the run was interrupted.  Each wait for a stage reads the
command's progress lines, so the signal lands inside that stage.
"""
import json
import os
import signal
import subprocess
import time

import pytest

FULL_VIT = ["--workload", "vit", "--reference-run", "--reference-fp32"]
# About a second on an idle machine (README); a generous bound so the tests hold under load and in the
# coverage build, still far below the minutes the interrupted runs would take.
WITHIN_SECONDS = 10.0


def start(repo, command, *args):
    return subprocess.Popen([str(repo / command), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=repo)


def wait_for_line(process, words, limit=300):
    """Read stderr lines until one contains words; returns the lines read."""
    lines, began = [], time.monotonic()
    while time.monotonic() - began < limit:
        line = process.stderr.readline()
        if not line:
            break
        lines.append(line)
        if words in line:
            return lines
    process.kill()
    raise AssertionError(f"no progress line with {words!r}: {''.join(lines)}")


def interrupt(process, signum):
    """Send the signal; returns (seconds until exit, exit code, stdout, the rest of stderr)."""
    sent = time.monotonic()
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    return time.monotonic() - sent, process.returncode, out, err


def assert_clean_stop(prog, signum, took, code, err):
    assert code == 130, err
    assert took < WITHIN_SECONDS, f"took {took:.2f} s to stop"
    assert "Traceback" not in err and "Exception" not in err, err
    assert err.strip().splitlines()[-1] == f"{prog}: interrupted by {signal.Signals(signum).name}", err
    assert len([line for line in err.splitlines() if "interrupted" in line]) == 1, err


@pytest.mark.parametrize("stage, signum", [("generating inputs and weights", signal.SIGINT),
                                           ("] lower", signal.SIGTERM),
                                           ("running on the device", signal.SIGINT)])
def test_full_vit_stops_promptly(repo, tmp_path, stage, signum):
    out = tmp_path / "out"
    process = start(repo, "harness/bin/ipu-e2e-test", *FULL_VIT, "--output", out, "--save-package",
                    tmp_path / "vit.pkg")
    wait_for_line(process, stage)
    time.sleep(0.5)  # inside the stage, not at its first boundary
    took, code, _, err = interrupt(process, signum)
    assert_clean_stop("ipu-e2e-test", signum, took, code, err)
    # Nothing half-written: no result, no temporary files beside it.
    assert list(out.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir()] in (["out"], ["out", "vit.pkg"])


def test_bench_stops_promptly(repo, tmp_path):
    process = start(repo, "harness/bin/ipu-e2e-bench", "noise", "--output", tmp_path)
    time.sleep(3)
    took, code, _, err = interrupt(process, signal.SIGINT)
    assert_clean_stop("ipu-e2e-bench", signal.SIGINT, took, code, err)
    assert list(tmp_path.iterdir()) == []


def processes_mentioning(text):
    """Pids of live processes whose command line contains text."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if text.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def long_case(name):
    return {"name": name, "command": "test", "expect": "pass",
            "args": ["--workload", "vit-small", "--tiles", "64", "--reference-inferences", "200"]}


def test_nightly_forwards_the_signal_and_waits_for_its_case(repo, tmp_path):
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps({"version": 1, "cases": [long_case("first"), long_case("second")]}))
    out = tmp_path / "out"
    process = start(repo, "ci/nightly", "--cases", cases, "--baselines", tmp_path / "none.json", "--output", out)
    began = time.monotonic()
    while not processes_mentioning(str(out / "cases" / "first")):
        assert time.monotonic() - began < 60 and process.poll() is None, "the first case never started"
        time.sleep(0.1)
    time.sleep(1)
    took, code, _, err = interrupt(process, signal.SIGINT)
    assert_clean_stop("ci/nightly", signal.SIGINT, took, code, err)
    assert processes_mentioning(str(out)) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["planned"] == ["first", "second"] and not summary["complete"] and summary["cases"] == []
    assert (out / "summary.md").read_text().startswith("# Nightly matrix INTERRUPTED: 0 of 2 planned")
