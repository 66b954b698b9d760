"""test_bad_input.py: bad command lines and option files for ipu-e2e-test,
ipu-e2e-bench, ci/nightly, ipu-e2e-fuzz, ipu-e2e-sweep, ipu-e2e-sweep-report,
ipu-e2e-compare, ipu-e2e-random, ipu-e2e-goldens and ipu-e2e-onnx-tests
(wrong types; zero, negative and huge numbers;
missing, empty, non-UTF-8 and truncated files; directories for files;
unwritable outputs; conflicting flags) each end with exit code 2, a message on
stderr that names the flag, file or field and says what was expected, no
traceback, and nothing written to the run's output folder.  Every command
line runs on a small device, so a check that fails to refuse it still ends
quickly (and the test fails on its exit code).
"""
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

SMALL_MLP = ["--device", "tiles16", "--tokens", "64", "--channels", "64", "--hidden", "128"]
SMALL_VIT = ["--workload", "vit-small", "--tiles", "64", "--layers", "1"]
COMMANDS = {"test": "harness/bin/ipu-e2e-test", "bench": "harness/bin/ipu-e2e-bench", "nightly": "ci/nightly",
            "fuzz": "harness/bin/ipu-e2e-fuzz", "sweep": "harness/bin/ipu-e2e-sweep",
            "sweep-report": "harness/bin/ipu-e2e-sweep-report", "compare": "harness/bin/ipu-e2e-compare",
            "random": "harness/bin/ipu-e2e-random", "goldens": "harness/bin/ipu-e2e-goldens",
            "onnx-tests": "harness/bin/ipu-e2e-onnx-tests"}
TRACES = ("Traceback", "AddressSanitizer", "runtime error:", "Segmentation")


@pytest.fixture(scope="module")
def files(tmp_path_factory, repo):
    """Bad input files, by name: {name} in a case's arguments is replaced by its path."""
    folder = tmp_path_factory.mktemp("bad-input")
    valid = (repo / "fixtures" / "packages" / "valid-stress-4tiles.pkg").read_bytes()
    c600 = (repo / "fixtures" / "profiles" / "c600.json").read_text()
    contents = {
        "empty.json": b"",
        "latin1.json": '{"name": "caf\xe9"}'.encode("latin-1"),
        "truncated.json": c600[: len(c600) // 2].encode(),
        "array.json": b"[1, 2, 3]",
        "tiles-string.json": json.dumps({"tiles": "many"}).encode(),
        "unknown-field.json": json.dumps({"tilez": 4}).encode(),
        "empty.pkg": b"",
        "truncated.pkg": valid[: len(valid) // 2],
        "text.pkg": b"this is not a package\n",
        "latin1.pkg": "caf\xe9".encode("latin-1"),
        "a-file": b"x",
        "cases-empty.json": b"",
        "cases-latin1.json": b'{"version": 1, "cases": [{"name": "caf\xe9"}]}',
        "cases-truncated.json": b'{"version": 1, "cases": [',
        "cases-no-version.json": json.dumps({"cases": []}).encode(),
        "cases-bad-timeout.json": json.dumps({"version": 1, "cases": [
            {"name": "a", "command": "test", "args": [], "expect": "pass", "timeout_seconds": -5}]}).encode(),
        "baselines-list.json": b"[]",
        "baselines-latin1.json": b'{"caf\xe9": {}}',
    }
    # Runs and sweeps read back: result.json with its objects replaced by numbers, a list, bytes not
    # UTF-8; a sweep whose case record has a number for its SHA-256, one of another schema.
    numbers = {"schema": "ipu-e2e/result", "version": 1, "workload": "mlp", "device": 3, "geometry": 4,
               "per_op": 5, "cycles": 6}
    contents.update({"run-numbers/result.json": json.dumps(numbers).encode(), "run-list/result.json": b"[]",
                     "run-latin1/result.json": b'{"workload": "caf\xe9"}',
                     "sweep-digest/sweep.json": json.dumps({"schema": "ipu-e2e/sweep", "version": 1,
                                                            "planned": [{"name": "c1"}]}).encode(),
                     "sweep-digest/cases/c1/case.json": json.dumps(
                         {"outcome": "built", "sha256": {"library": {"sha256": 12345},
                                                         "cli": {"sha256": "0" * 64}}}).encode(),
                     "sweep-schema/sweep.json": json.dumps({"schema": "ipu-e2e/result", "version": 1}).encode(),
                     "sweep-planned/sweep.json": json.dumps({"schema": "ipu-e2e/sweep", "version": 1,
                                                             "planned": {"c1": 1}}).encode(),
                     "goldens-numbers.json": json.dumps({"cases": {"mlp": 5}}).encode()})
    for name, data in contents.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    (folder / "a-folder.json").mkdir()
    (folder / "a-folder.pkg").mkdir()
    (folder / "valid.pkg").write_bytes(valid)
    return folder


# (command, arguments, words the message must contain)
CASES = [
    # ipu-e2e-test: numbers
    ("test", ["--tiles", "abc"], ["--tiles", "expected an integer in 1..65535", "'abc'"]),
    ("test", ["--tiles", "0"], ["--tiles", "1..65535", "got 0"]),
    ("test", ["--tiles", "-5"], ["--tiles", "1..65535", "got -5"]),
    ("test", ["--tiles", "1000000"], ["--tiles", "1..65535", "got 1000000"]),
    ("test", ["--tiles", "99999999999999999999999"], ["--tiles", "1..65535"]),
    ("test", ["--batch", "3"], ["--batch", "choose from"]),
    ("test", ["--batch", "two"], ["--batch", "'two'"]),
    ("test", [*SMALL_MLP, "--memory-budget", "abc"], ["--memory-budget", "'abc'", "bytes"]),
    ("test", [*SMALL_MLP, "--memory-budget", "0"], ["--memory-budget", "positive"]),
    ("test", [*SMALL_MLP, "--memory-budget", "-1"], ["--memory-budget", "positive"]),
    ("test", [*SMALL_MLP, "--memory-budget", "99999999999999999999"], ["--memory-budget", "at most"]),
    ("test", [*SMALL_MLP, "--search-budget", "1e9"], ["--search-budget", "'1e9'"]),
    ("test", [*SMALL_MLP, "--catalogue-budget", "99999999999"], ["--catalogue-budget", "at most"]),
    ("test", [*SMALL_MLP, "--frontier-cap", "0"], ["--frontier-cap", "positive integer"]),
    ("test", [*SMALL_MLP, "--catalogue-group", "x"], ["--catalogue-group", "positive integer"]),
    ("test", [*SMALL_MLP, "--exchange-stream-words", "0"], ["--exchange-stream-words", "1..1048576", "got 0"]),
    ("test", [*SMALL_MLP, "--exchange-stream-words", "4x"], ["--exchange-stream-words", "'4x'"]),
    ("test", [*SMALL_MLP, "--balance-streams"], ["--balance-streams", "needs --exchange-stream-words"]),
    ("test", [*SMALL_MLP, "--seed", "abc"], ["--seed", "'abc'", "integer"]),
    ("test", [*SMALL_MLP, "--seed", "-1"], ["--seed", "0.."]),
    ("test", [*SMALL_MLP, "--seed", "999999999999999999999999"], ["--seed", "0.."]),
    ("test", [*SMALL_MLP, "--reference-run", "--min-cosine", "2"], ["--min-cosine", "[-1, 1]"]),
    ("test", [*SMALL_MLP, "--reference-run", "--min-cosine", "nan"], ["--min-cosine", "[-1, 1]"]),
    ("test", [*SMALL_MLP, "--reference-run", "--atol", "-1"], ["--atol", ">= 0"]),
    ("test", [*SMALL_MLP, "--reference-run", "--rtol", "inf"], ["--rtol", "finite"]),
    ("test", [*SMALL_MLP, "--threads", "0"], ["--threads", "1..1024", "got 0"]),
    ("test", [*SMALL_MLP, "--threads", "100000"], ["--threads", "1..1024"]),
    ("test", [*SMALL_MLP, "--reference-inferences", "0"], ["--reference-inferences", "positive integer"]),
    ("test", ["--device", "tiles16", "--tokens", "0"], ["--tokens", "positive integer"]),
    ("test", ["--device", "tiles16", "--tokens", "100000000"], ["tokens", "expected"]),
    ("test", ["--device", "tiles16", "--channels", "99999999", "--tokens", "8"], ["channels", "expected"]),
    ("test", [*SMALL_MLP, "--blocks", "0"], ["--blocks", "positive integer"]),
    ("test", [*SMALL_VIT, "--heads", "3", "--channels", "256"], ["channels 256", "heads x head_dim"]),
    ("test", [*SMALL_VIT, "--layers", "1000000"], ["layers", "expected"]),
    ("test", ["--workload", "exchange-stress", "--device", "tiles16", "--iterations", "0"],
     ["--iterations", "positive integer"]),
    # ipu-e2e-test: choices and unknown flags
    ("test", ["--workload", "resnet"], ["--workload", "invalid choice", "'resnet'"]),
    ("test", [*SMALL_MLP, "--precision", "fp4"], ["--precision", "'fp4'"]),
    ("test", [*SMALL_VIT, "--attention", "fast"], ["--attention", "'fast'"]),
    ("test", [*SMALL_MLP, "--inject", "no-such-bug"], ["inject", "no-such-bug"]),
    ("test", [*SMALL_MLP, "--inject", ""], ["--inject", "no mutation is named ''", "mutations --list"]),
    ("test", ["--exchange-pattern", "spiral"], ["--exchange-pattern", "'spiral'"]),
    ("test", ["--bogus"], ["unrecognized arguments", "--bogus"]),
    ("test", ["--tiles"], ["--tiles", "expected one argument"]),
    # ipu-e2e-test: device profiles
    ("test", ["--device", "nosuch"], ["--device", "nosuch", "c600"]),
    ("test", ["--device", "{empty.json}"], ["empty.json", "JSON"]),
    ("test", ["--device", "{latin1.json}"], ["latin1.json", "UTF-8"]),
    ("test", ["--device", "{truncated.json}"], ["truncated.json", "JSON"]),
    ("test", ["--device", "{array.json}"], ["array.json", "object"]),
    ("test", ["--device", "{tiles-string.json}"], ["tiles-string.json", "'tiles'"]),
    ("test", ["--device", "{unknown-field.json}"], ["unknown-field.json", "tilez"]),
    ("test", ["--device", "{a-folder.json}"], ["a-folder.json", "directory"]),
    # ipu-e2e-test: packages
    ("test", ["--package", "{missing.pkg}"], ["missing.pkg", "No such file"]),
    ("test", ["--package", "{empty.pkg}"], ["empty.pkg", "empty"]),
    ("test", ["--package", "{truncated.pkg}"], ["truncated.pkg", "truncated"]),
    ("test", ["--package", "{text.pkg}"], ["text.pkg", "magic"]),
    ("test", ["--package", "{latin1.pkg}"], ["latin1.pkg"]),
    ("test", ["--package", "{a-folder.pkg}"], ["a-folder.pkg", "directory"]),
    ("test", ["--package", "{valid.pkg}", "--tiles", "8"], ["--tiles 8", "4 tiles"]),
    ("test", ["--package", "{valid.pkg}", "--workload", "vit"], ["--workload", "--package"]),
    ("test", ["--package", "{valid.pkg}", "--device", "tiles16"], ["--device", "--package"]),
    ("test", ["--package", "{valid.pkg}", "--memory-budget", "4096"], ["--memory-budget", "--package"]),
    # ipu-e2e-test: conflicting flags
    ("test", [*SMALL_MLP, "--reference-fp32"], ["--reference-fp32", "--reference-run"]),
    ("test", [*SMALL_MLP, "--min-cosine", "0.9"], ["--min-cosine", "--reference-run"]),
    ("test", [*SMALL_MLP, "--atol", "0.1"], ["--atol", "--reference-run"]),
    ("test", [*SMALL_MLP, "--layers", "2"], ["--layers", "not to --workload mlp"]),
    ("test", [*SMALL_VIT, "--precision", "fp16"], ["--precision", "not to --workload vit-small"]),
    ("test", [*SMALL_MLP, "--iterations", "2"], ["--iterations", "exchange-stress"]),
    ("test", ["--workload", "exchange-stress", "--device", "tiles16", "--memory-budget", "4096"],
     ["--memory-budget", "exchange-stress"]),
    # ipu-e2e-test: outputs
    ("test", [*SMALL_MLP, "--output", "{a-file}"], ["a-file"]),
    ("test", [*SMALL_MLP, "--output", "/proc/ipu-e2e"], ["/proc/ipu-e2e"]),
    ("test", [*SMALL_MLP, "--save-package", "{a-folder.pkg}"], ["--save-package", "a-folder.pkg", "directory"]),
    ("test", [*SMALL_MLP, "--save-package", "/proc/ipu-e2e/x.pkg"], ["--save-package", "/proc/ipu-e2e"]),
    ("test", [*SMALL_MLP, "--dump-tensors", "{a-file}"], ["a-file"]),
    ("test", [*SMALL_MLP, "--profile-directory", "{a-file}"], ["a-file"]),
    ("test", [*SMALL_MLP, "--memory-profile-directory", "{a-file}"], ["a-file"]),
    # ipu-e2e-bench
    ("bench", [], ["BENCH", "required"]),
    ("bench", ["nosuch"], ["invalid choice", "'nosuch'"]),
    ("bench", ["plan", "--budgets", "abc"], ["--budgets", "'abc'"]),
    ("bench", ["plan", "--budgets", "0"], ["--budgets", "positive"]),
    ("bench", ["plan", "--budgets", ","], ["--budgets", "expected"]),
    ("bench", ["plan", "--batches", "3"], ["--batches", "1, 2 or 4"]),
    ("bench", ["plan", "--batches", "x"], ["--batches", "'x'"]),
    ("bench", ["device", "--gemm", "0x0x0"], ["--gemm", "0x0x0", "MxNxK"]),
    ("bench", ["device", "--gemm", "abc"], ["--gemm", "'abc'", "MxNxK"]),
    ("bench", ["device", "--gemm", "4x4"], ["--gemm", "MxNxK"]),
    ("bench", ["device", "--gemm", "99999x99999x99999"], ["--gemm", "expected"]),
    ("bench", ["device", "--repeats", "0"], ["--repeats", "positive integer"]),
    ("bench", ["device", "--tiles", "1000000"], ["--tiles", "1..65535", "got 1000000"]),
    ("bench", ["device", "--device", "{latin1.json}"], ["latin1.json", "UTF-8"]),
    ("bench", ["kernels", "--device", "nosuch"], ["--device", "nosuch"]),
    ("bench", ["vit", "--inferences", "0"], ["--inferences", "positive integer"]),
    ("bench", ["vit", "--layers", "-1"], ["--layers", "positive integer"]),
    ("bench", ["compile", "--batch", "3"], ["--batch", "choose from"]),
    ("bench", ["noise", "--output", "{a-file}"], ["a-file"]),
    ("bench", ["mutations", "--output", "/proc/ipu-e2e"], ["/proc/ipu-e2e"]),
    ("bench", ["exchange"], ["--package", "required"]),
    ("bench", ["exchange", "--package", "{truncated.pkg}"], ["truncated.pkg"]),
    ("bench", ["exchange", "--package", "{missing.pkg}"], ["missing.pkg"]),
    ("bench", ["exchange", "--package", "{valid.pkg}", "--phases", "3,x"], ["--phases", "'3,x'"]),
    ("bench", ["exchange", "--package", "{valid.pkg}", "--phases", "-1"], ["--phases", "non-negative"]),
    ("bench", ["exchange", "--package", "{valid.pkg}", "--stream-words", "0"], ["--stream-words", "got 0"]),
    ("bench", ["exchange", "--package", "{valid.pkg}", "--balance-streams"], ["--balance-streams", "--stream-words"]),
    # ci/nightly
    ("nightly", ["--cases", "{missing.json}"], ["missing.json", "No such file"]),
    ("nightly", ["--cases", "{cases-empty.json}"], ["cases-empty.json", "JSON"]),
    ("nightly", ["--cases", "{cases-latin1.json}"], ["cases-latin1.json", "UTF-8"]),
    ("nightly", ["--cases", "{cases-truncated.json}"], ["cases-truncated.json", "JSON"]),
    ("nightly", ["--cases", "{a-folder.json}"], ["a-folder.json", "directory"]),
    ("nightly", ["--cases", "{cases-no-version.json}"], ["cases-no-version.json", "\"version\": 1"]),
    ("nightly", ["--cases", "{cases-bad-timeout.json}"], ["cases-bad-timeout.json", "'timeout_seconds'",
                                                          "positive integer"]),
    ("nightly", ["--only", ","], ["--only", "case names"]),
    ("nightly", ["--only", ""], ["--only", "case names"]),
    ("nightly", ["--only", "no-such-case"], ["--only", "no-such-case"]),
    ("nightly", ["--baselines", "{baselines-list.json}"], ["baselines-list.json", "object"]),
    ("nightly", ["--baselines", "{baselines-latin1.json}"], ["baselines-latin1.json", "UTF-8"]),
    ("nightly", ["--baselines", "{a-folder.json}"], ["a-folder.json", "directory"]),
    ("nightly", ["--output", "{a-file}"], ["a-file"]),
    ("nightly", ["--resume"], ["--resume", "summary.json"]),
    ("nightly", ["--resume", "--only", "mlp-default"], ["--resume", "--only"]),
    # ipu-e2e-fuzz (each refused before it builds anything)
    ("fuzz", ["--seconds", "0"], ["--seconds", "positive integer"]),
    ("fuzz", ["--jobs", "many"], ["--jobs", "'many'"]),
    ("fuzz", ["--output", "{a-file}"], ["--output", "a-file"]),
    ("fuzz", ["--build-dir", "{a-file}"], ["--build-dir", "a-file"]),
    ("fuzz", ["--executions", "0"], ["--executions", "positive integer"]),
    ("fuzz", ["--corpus", "{a-file}"], ["--corpus", "a-file"]),
    # ipu-e2e-sweep (refused before a case folder is made)
    ("sweep", ["--output", "{OUT}", "--batches", "3"], ["--batches", "1, 2 and 4", "'3'"]),
    ("sweep", ["--output", "{OUT}", "--batches", "x"], ["--batches", "'x'"]),
    ("sweep", ["--output", "{OUT}", "--budgets", "abc"], ["--budgets", "'abc'"]),
    ("sweep", ["--output", "{OUT}", "--jobs", "0"], ["--jobs", "got 0"]),
    ("sweep", ["--output", "{OUT}", "--workload", "nope"], ["--workload", "'nope'"]),
    ("sweep", ["--output", "{a-file}"], ["--output", "a-file"]),
    # ipu-e2e-sweep-report
    ("sweep-report", ["{sweep-digest}"], ["case.json", "sha256.library.sha256", "64 hex digits", "12345"]),
    ("sweep-report", ["{sweep-schema}"], ["sweep.json", "ipu-e2e/sweep"]),
    ("sweep-report", ["{sweep-planned}"], ["sweep.json", "planned"]),
    ("sweep-report", ["{missing-folder}"], ["missing-folder", "sweep.json"]),
    ("sweep-report", ["{a-file}"], ["a-file", "sweep.json"]),
    # ipu-e2e-compare
    ("compare", ["{run-numbers}", "{run-numbers}"], ["run-numbers", "result.json", "'geometry'", "object"]),
    ("compare", ["{run-list}", "{run-numbers}"], ["run-list", "result.json"]),
    ("compare", ["{run-latin1}", "{run-numbers}"], ["run-latin1", "result.json"]),
    ("compare", ["{missing-folder}", "{run-numbers}"], ["missing-folder"]),
    ("compare", ["{run-numbers}"], ["B"]),
    # ipu-e2e-random
    ("random", ["--seeds", "abc"], ["--seeds", "'abc'"]),
    ("random", ["--seeds", "5-2"], ["--seeds", "'5-2'"]),
    ("random", ["--fresh", "0"], ["--fresh"]),
    ("random", ["--seeds", "0", "--jobs", "0"], ["--jobs", "got 0"]),
    ("random", [], ["--seeds SPEC", "--fresh N", "--regressions"]),
    ("random", ["--regressions", "--cases", "{missing.json}"], ["--cases", "missing.json", "no such file"]),
    ("random", ["--seeds", "0", "--cases", "{missing.json}"], ["--cases", "--regressions", "--keep-failures"]),
    ("random", ["--regressions", "--cases", "{array.json}"], ["--cases", "array.json"]),
    # ipu-e2e-goldens
    ("goldens", ["--only", "nope"], ["--only", "nope", "the cases are"]),
    ("goldens", ["--goldens", "{missing.json}"], ["--goldens", "missing.json", "No such file"]),
    ("goldens", ["--goldens", "{goldens-numbers.json}"], ["--goldens", "goldens-numbers.json", "'cases.mlp'"]),
    ("goldens", ["--goldens", "{truncated.json}"], ["--goldens", "truncated.json"]),
    # ipu-e2e-onnx-tests
    ("onnx-tests", ["--data", "{missing-folder}"], ["--data", "missing-folder", "no such folder"]),
    ("onnx-tests", ["--ops", "NoSuchOp"], ["--ops", "NoSuchOp"]),
    ("onnx-tests", ["--jobs", "-1"], ["--jobs", "got -1"]),
]


def case_id(case):
    return f"{case[0]}:{' '.join(case[1])}"[:80]


def run(repo, files, out, command, args):
    argv = [str(out) if a == "{OUT}" else a.replace("{", str(files) + "/").replace("}", "") if a.startswith("{")
            else a for a in args]
    if command != "bench" or argv:
        argv += ["--quiet"]
    if command == "nightly" and "--output" not in argv:
        argv += ["--output", str(out)]
    return subprocess.run([str(repo / COMMANDS[command]), *argv], capture_output=True, text=True, timeout=120,
                          cwd=out.parent)


def test_the_matrix_is_large_enough():
    assert len(CASES) >= 124
    assert {c[0] for c in CASES} == set(COMMANDS)


def test_every_bad_input_exits_2_naming_what_is_wrong(repo, files, tmp_path):
    def one(index):
        out = tmp_path / f"case-{index}" / "out"
        out.parent.mkdir()
        command, args, words = CASES[index]
        return run(repo, files, out, command, args), out

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        outcomes = list(pool.map(one, range(len(CASES))))
    failures = []
    for case, (done, out) in zip(CASES, outcomes):
        problems = []
        if done.returncode != 2:
            problems.append(f"exit {done.returncode}")
        missing = [w for w in case[2] if w not in done.stderr]
        if missing:
            problems.append(f"message lacks {missing}")
        if any(t in done.stderr + done.stdout for t in TRACES):
            problems.append("traceback")
        written = sorted(str(p.relative_to(out.parent)) for p in out.parent.rglob("*"))
        if written not in ([], ["out"]) or (out.exists() and any(out.iterdir())):
            problems.append(f"wrote {written}")
        if problems:
            failures.append(f"{case_id(case)}: {'; '.join(problems)}\n    {done.stderr.strip()[-400:]}")
    # Reports of the runs and sweeps read back are written beside them: none was.
    beside = sorted(str(p) for pattern in ("sweep-report.*", "compare.*") for p in files.rglob(pattern))
    assert not beside, f"reports written beside bad inputs: {beside}"
    assert not failures, f"{len(failures)} of {len(CASES)} bad inputs mishandled:\n" + "\n".join(failures)
