"""test_hostile_inputs.py: models, arrays, descriptions and files from
strangers (hostile_inputs.py builds them).  Every case exits 2 with one line
on stderr that names the file, field or node and the words the case lists, no
traceback, within 10 s and a peak RSS under 256 MB (the process's own
ru_maxrss, from wait4); and nothing is read or written outside the folders the
case gives: a canary file beside the inputs keeps its access time (set older
than its modification time, so any read updates it under relatime), nothing
new appears outside each case's own folder, and no output holds the canary's
bytes.
"""
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import hostile_inputs

COMMANDS = {"test": "harness/bin/ipu-e2e-test", "bench": "harness/bin/ipu-e2e-bench", "nightly": "ci/nightly",
            "compare": "harness/bin/ipu-e2e-compare", "sweep-report": "harness/bin/ipu-e2e-sweep-report",
            "random": "harness/bin/ipu-e2e-random", "goldens": "harness/bin/ipu-e2e-goldens"}
TRACES = ("Traceback", "AddressSanitizer", "runtime error:", "Segmentation")
SECONDS, RSS_BYTES = 10, 256 << 20
KILL_AFTER = 120  # a hung case is killed here and fails; the 10 s bound is checked apart


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    cases = hostile_inputs.build(root)
    canary = root / "outside" / "canary.bin"
    os.utime(canary, (1, canary.stat().st_mtime))
    return root, cases


def listing(folder):
    """{path: (size, mtime)} of everything under folder, symbolic links not followed."""
    found = {}
    for base, folders, names in os.walk(folder):
        for name in folders + names:
            path = os.path.join(base, name)
            info = os.lstat(path)
            found[path] = (info.st_size, info.st_mtime_ns)
    return found


def run(repo, root, index, case):
    """(exit code, stderr, seconds, peak RSS bytes, the case's folder) of one case."""
    _, command, args, _ = case
    folder = root / "runs" / str(index)
    folder.mkdir(parents=True)
    argv = [a.replace("{", str(root / "inputs") + "/").replace("}", "") if a.startswith("{") else a for a in args]
    if command == "nightly":
        argv += ["--output", str(folder / "out")]
    argv.append("--quiet")
    with open(folder / "stderr", "w+") as err:
        began = time.monotonic()
        process = subprocess.Popen([str(repo / COMMANDS[command]), *argv], stdout=subprocess.DEVNULL, stderr=err,
                                   cwd=folder, start_new_session=True)
        timer = threading.Timer(KILL_AFTER, lambda: os.killpg(process.pid, signal.SIGKILL))
        timer.start()
        _, status, usage = os.wait4(process.pid, 0)
        timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - began
        err.seek(0)
        return process.returncode, err.read(), seconds, usage.ru_maxrss * 1024, folder


def test_there_are_at_least_200_cases(hostile):
    _, cases = hostile
    assert len(cases) >= 200
    assert len({c[0] for c in cases}) == len(cases)


def test_every_hostile_input_exits_2_in_one_line_within_bounds(repo, hostile):
    root, cases = hostile
    before = listing(root / "inputs") | listing(root / "outside")
    beside = set(os.listdir(root.parent))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        outcomes = list(pool.map(lambda k: run(repo, root, k, cases[k]), range(len(cases))))
    failures = []
    for (name, _, _, words), (code, stderr, seconds, rss, folder) in zip(cases, outcomes):
        problems = []
        lines = stderr.strip().splitlines()
        if code != 2:
            problems.append(f"exit {code}")
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr")
        missing = [w for w in words if w not in stderr]
        if missing:
            problems.append(f"message lacks {missing}")
        if any(t in stderr for t in TRACES):
            problems.append("traceback")
        if seconds > SECONDS:
            problems.append(f"{seconds:.1f} s")
        if rss > RSS_BYTES:
            problems.append(f"peak RSS {rss / 2 ** 20:.0f} MB")
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink() and b"CANARY-" in path.read_bytes():
                problems.append(f"{path} holds the canary's bytes")
        if problems:
            failures.append(f"{name}: {'; '.join(problems)}\n    {stderr.strip()[-300:]}")
    assert not failures, f"{len(failures)} of {len(cases)} hostile inputs mishandled:\n" + "\n".join(failures)
    canary = root / "outside" / "canary.bin"
    assert canary.stat().st_atime == 1, "a case read the canary outside the inputs' folders"
    assert listing(root / "inputs") | listing(root / "outside") == before, "a case changed the inputs"
    assert set(os.listdir(root.parent)) == beside, "a case wrote beside the test's folder"
    strays = [p for p in os.listdir(root) if p not in ("inputs", "outside", "runs")]
    assert not strays, f"files written outside the cases' folders: {strays}"
