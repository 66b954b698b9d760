"""test_interrupts.py: SIGINT and SIGTERM end a command promptly (within
WITHIN_SECONDS, a bound generous enough for a loaded machine) with one
line on stderr, exit code 130 and no traceback, and leave no half-written
artifact.  The full-size ViT with both references (the README's longest
command) is interrupted while it generates its values, while it compiles and
while the device runs it; ipu-e2e-bench while it benchmarks; ci/nightly
forwards the signal to its running case, waits for it and leaves a summary
that says the run was interrupted.  Each wait for a stage reads the
command's progress lines, so the signal lands inside that stage.  A signal
raised inside a destructor during the work, or after main() returned (from
an exit callback, from a cycle the exit collects), still ends the process
with the one line and 130; a context cancelled before a device's
initialize stops it before it touches any tile memory.
"""
import json
import os
import signal
import subprocess
import sys
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


# A command of the test's own, started as harness/bin's are (interrupts.run), whose main() makes the
# signal arrive at a chosen point: no timing involved.  Late.__del__ raises it.
LATE_COMMAND = '''
import atexit, os, signal, sys, time


class Late:
    def __del__(self):
        signal.raise_signal(signal.SIGINT)


def main():
    print("result")
    WHEN
    return 0
'''
LAUNCHER = '''
import sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from ipu_e2e import interrupts
sys.exit(interrupts.run("late-command", "late_command"))
'''
WHEN = {
    # During the work, from a destructor: Python can only report an exception raised there, so the
    # handler's Interrupted was printed as ignored (a traceback) and the work went on to exit 0.
    "destructor": "late = Late()\n    del late\n    deadline = time.monotonic() + 60\n"
                  "    while time.monotonic() < deadline:\n        pass\n    print('finished')",
    # After main() returned: from an exit callback (the Interrupted was printed as ignored, exit 0) ...
    "exit callback": "atexit.register(signal.raise_signal, signal.SIGINT)",
    # ... and from the destructor of a reference cycle, collected by the interpreter's finalization
    # once it had restored the default disposition (the process died by the signal, exit -2).
    "collected cycle": "late = Late()\n    late.cycle = late",
}


@pytest.mark.parametrize("when", WHEN)
def test_a_signal_holds_until_the_process_exits(repo, tmp_path, when):
    (tmp_path / "late_command.py").write_text(LATE_COMMAND.replace("WHEN", WHEN[when]))
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    began = time.monotonic()
    done = subprocess.run([sys.executable, str(tmp_path / "launcher.py"), str(repo / "harness"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert_clean_stop("late-command", signal.SIGINT, time.monotonic() - began, done.returncode, done.stderr)
    # The output printed before the signal is kept; the work after it is not done.
    assert done.stdout.splitlines() == ["result"], done.stdout


def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def test_a_cancelled_initialize_loads_nothing(cli, tmp_path):
    """Loading a package first touches every tile's memory (seconds for the full device on a loaded
    machine, where a Ctrl-C waited for it): the load looks at the cancel request between segments, so a
    context cancelled before initialize returns IPU_ERR_CANCELLED without touching any (it grew by the
    whole load's pages, as the uncancelled control does)."""
    from ipu_e2e.native import CANCELLED, Context, Device, Package, lib
    package_file = tmp_path / "mlp.pkg"
    built = cli("--quiet", "--workload", "mlp", "--tiles", 16, "--tokens", 21, "--channels", 44, "--hidden", 70,
                "--save-package", package_file)
    assert built.returncode == 0, built.stderr

    def initialize(ctx, package):
        info = package.info()
        device = Device(ctx, info["profile"])
        try:
            for stream in info["streams"]:
                if stream["direction"] != "output" and stream["records"].get("input"):
                    device.set_stream(stream["name"], package.record("input", stream["name"]))
            before = rss()
            status = lib().ipu_device_initialize(ctx.handle, device.handle, package.handle)
            return status, rss() - before
        finally:
            device.close()

    ctx, cancelled = Context(), Context()
    try:
        package = Package.load_file(ctx, package_file)
        status, grown = initialize(ctx, package)
        assert status == 0 and grown > 4 << 20, (status, grown)  # 16 tiles of 624 KiB, in huge pages
        cancelled.cancel()
        status, grown_cancelled = initialize(cancelled, package)
        lib().ipu_ctx_clear_error(cancelled.handle)
        assert status == CANCELLED
        assert grown_cancelled < grown / 4, (grown_cancelled, grown)
        package.close()
    finally:
        cancelled.close()
        ctx.close()
