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
import json
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import hostile_inputs

COMMANDS = {"test": "harness/bin/ipu-e2e-test", "bench": "harness/bin/ipu-e2e-bench", "nightly": "ci/nightly",
            "compare": "harness/bin/ipu-e2e-compare", "sweep-report": "harness/bin/ipu-e2e-sweep-report",
            "random": "harness/bin/ipu-e2e-random", "goldens": "harness/bin/ipu-e2e-goldens",
            "sweep": "harness/bin/ipu-e2e-sweep"}
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


# Runs a command and writes its exit code and peak RSS (KiB) to the file argv[1]: the command is forked
# from this small process, not from pytest, whose pages a child's ru_maxrss would count until its exec
# (measured: 372 MB for a command that refused its input at 35 MB).
MEASURE = ("import os, subprocess, sys\n"
           "child = subprocess.Popen(sys.argv[2:])\n"
           "_, status, usage = os.wait4(child.pid, 0)\n"
           "open(sys.argv[1], 'w').write(f'{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}')\n")


def run(repo, root, index, case):
    """(exit code, stderr, seconds, peak RSS bytes, the case's folder) of one case."""
    _, command, args, _ = case
    folder = root / "runs" / str(index)
    folder.mkdir(parents=True)
    argv = [a.replace("{", str(root / "inputs") + "/").replace("}", "") if a.startswith("{") else a for a in args]
    if command in ("nightly", "sweep"):
        argv += ["--output", str(folder / "out")]
    argv.append("--quiet")
    measured = folder.parent / f"{index}.measured"
    with open(folder / "stderr", "w+") as err:
        began = time.monotonic()
        process = subprocess.Popen(["/usr/bin/python3", "-c", MEASURE, str(measured), str(repo / COMMANDS[command]),
                                    *argv], stdout=subprocess.DEVNULL, stderr=err, cwd=folder,
                                   start_new_session=True)
        try:
            process.wait(timeout=KILL_AFTER)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the measuring process and the command, its child
            process.wait()
        seconds = time.monotonic() - began
        code, rss = (int(v) for v in measured.read_text().split()) if measured.exists() else (None, 0)
        err.seek(0)
        return code, err.read(), seconds, rss * 1024, folder


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


def chain(count):
    """The text of a valid description of `count` tensors: an input of normal values copied along a
    chain of activations to the output (the JSON written directly: a million tensors in seconds)."""
    kinds = ["input"] + ["activation"] * (count - 2) + ["output"]
    values = ',"values":{"normal":{"scale":1,"offset":0,"stream":0}}'
    tensors = ",".join(f'{{"name":"t{i}","rows":4,"cols":8,"dtype":"f16","scale":0,"role":"{kind}","sequence":1'
                       f'{values if i == 0 else ""}}}' for i, kind in enumerate(kinds))
    ops = ",".join(f'{{"op":"copy","inputs":["t{i}"],"output":"t{i + 1}"}}' for i in range(count - 1))
    return (f'{{"format":"ipu-e2e-graph","version":1,"name":"chain","seed":0,"options":{{}},"tensors":[{tensors}],'
            f'"ops":[{ops}],"repeat":null}}')


def test_a_description_of_a_million_tensors_is_refused_for_its_size(repo, tmp_path):
    path = tmp_path / "million.json"
    path.write_text(chain(1_000_000))
    size = path.stat().st_size
    assert size > 8 << 20
    code, stderr, seconds, rss, _ = run(repo, tmp_path, 0, ("million", "test", ["--graph", str(path), "--tiles", "4"],
                                                           []))
    assert code == 2 and stderr.strip() == f"ipu-e2e-test: error: --graph {path}: {size:,} bytes; at most " \
                                           f"{8 << 20:,} are read", stderr
    assert seconds < SECONDS and rss < RSS_BYTES, (seconds, rss)


def test_sigterm_while_a_description_is_read_exits_130_in_one_line(repo, tmp_path):
    """A description just under the size limit takes about a second to read (Python's parse, then the
    library's); SIGTERM a tenth of a second into reading ends the run with 130 and one line.  The 1 s
    figure is the interrupts benchmark's to measure; here the bound is generous."""
    path = tmp_path / "large.json"
    count = 40_000
    path.write_text(chain(count))
    assert path.stat().st_size < 8 << 20
    process = subprocess.Popen([str(repo / COMMANDS["test"]), "--graph", str(path), "--tiles", "4", "--compile-only"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in process.stderr:
        lines.append(line)
        if line.rstrip().endswith("generating inputs and weights"):
            break
    time.sleep(0.1)
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    rest = process.stderr.read()
    code = process.wait(timeout=60)
    seconds = time.monotonic() - sent
    assert code == 130 and rest.strip().splitlines()[-1] == "ipu-e2e-test: interrupted by SIGTERM", lines + [rest]
    assert "Traceback" not in rest and seconds < SECONDS, seconds


def test_names_that_look_like_paths_stay_names(cli, tmp_path):
    """A valid model named '../../evil' whose tensors are named '../../../x', 'a/b' and '..': every
    file it makes (dumps, the exported description and its values, memory profiles, the result) lands
    in the folders given, under safe names that tensors.json maps back to the tensors' names, and the
    exported description builds the same workload again from those files."""
    nodes = [hostile_inputs.helper.make_node("MatMul", ["../../../x", "a/b"], [".."]),
             hostile_inputs.helper.make_node("Identity", [".."], ["y"])]
    model = hostile_inputs.make(nodes, inputs=[hostile_inputs.vi("../../../x", [4, 8])],
                                inits=[hostile_inputs.weight("a/b")], name="../../evil")
    work = tmp_path / "deep" / "er" / "work"
    work.mkdir(parents=True)
    hostile_inputs.onnx.save(model, work / "model.onnx")
    done = cli("--model", work / "model.onnx", "--tiles", "4", "--precision", "fp16", "--reference-run",
               "--dump-tensors", work / "dump", "--export-graph", work / "g.json", "--output", work / "out",
               "--memory-profile-directory", work / "memory", "--quiet", cwd=work)
    assert done.returncode == 0, done.stderr
    outside = [str(p) for p in tmp_path.rglob("*") if work not in p.parents and p != work and p not in work.parents]
    assert not outside, outside
    manifest = json.loads((work / "dump" / "tensors.json").read_text())["tensors"]
    assert set(manifest.values()) >= {"../../../x", "a/b"}
    for stem in manifest:
        assert "/" not in stem and not stem.startswith(".") and (work / "dump" / f"{stem}.npy").is_file()
    values = json.loads((work / "g.values" / "tensors.json").read_text())["tensors"]
    assert set(values.values()) == {"../../../x", "a/b"}
    weight = np.load(work / "g.values" / f"{next(s for s, n in values.items() if n == 'a/b')}.npy")
    assert np.array_equal(weight, np.full((8, 8), 0.125, np.float32))
    described = json.loads((work / "g.json").read_text())
    (work / "g.json").write_text(json.dumps(dict(described, name="../../evil")))
    again = cli("--graph", work / "g.json", "--tiles", "4", "--reference-run", "--memory-profile-directory",
                work / "memory2", "--quiet", cwd=work)
    assert again.returncode == 0, again.stderr
    profiles = sorted(p.name for p in (work / "memory2").iterdir() if p.suffix == ".json")
    assert profiles and all("/" not in p and ".." not in p for p in profiles), profiles
    outside = [str(p) for p in tmp_path.rglob("*") if work not in p.parents and p != work and p not in work.parents]
    assert not outside, outside
