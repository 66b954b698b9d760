"""ipu-e2e-fuzz: builds the libFuzzer targets of engine/tests/fuzz/ with clang
(CMake, -DIPU_FUZZ=ON, ASan and UBSan, in their own build folder) and runs
each for a fixed time, one after the other (`make fuzz FUZZ_SECONDS=N` calls
it).  A target starts from its input folders (seeds and reproducers, listed
by CMake in BUILD/fuzz-targets.txt) and grows its corpus in
BUILD/fuzz-corpus/<target>, never in the repository; a crashing, leaking,
timed-out or out-of-memory input is written to BUILD/fuzz-artifacts/.
Limits: 2 GiB RSS, 10 s per input.  It prints the executions each target did
(libFuzzer's stat::number_of_executed_units) and, with --output, writes
fuzz.json (per target: executions, what was found and where, the log; and
targets_met, one entry per target, for ci/nightly).  Exit codes: 0 nothing
found, 1 a target found something, 2 usage error (no clang, unknown target),
3 the build failed.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .command import EXIT_CHECK_FAILED, EXIT_FAULT, EXIT_OK, EXIT_USAGE, UsageError, output_folders, \
    positive_int, write_result
from .progress import Progress

REPO = Path(__file__).resolve().parents[2]
RSS_LIMIT_MB, INPUT_TIMEOUT = 2048, 10
# What a libFuzzer log says it found, first match wins.
FINDINGS = (("leak", "ERROR: LeakSanitizer"), ("timeout", "ERROR: libFuzzer: timeout"),
            ("out of memory", "ERROR: libFuzzer: out-of-memory"), ("memory error", "ERROR: AddressSanitizer"),
            ("undefined behaviour", "runtime error:"), ("crash", "ERROR: libFuzzer: deadly signal"))


def parser():
    p = argparse.ArgumentParser(
        prog="ipu-e2e-fuzz",
        description="Build the libFuzzer targets (clang, ASan, UBSan) and run each for --seconds. Exit codes: "
                    "0 nothing found, 1 a target found something, 2 usage error, 3 the build failed.")
    p.add_argument("--seconds", type=positive_int, default=60, metavar="N",
                   help="fuzzing time per target (default: 60)")
    p.add_argument("--targets", metavar="NAME[,NAME...]", help="run only these targets (default: all)")
    p.add_argument("--build-dir", type=Path, default=REPO / "build-fuzz", metavar="DIR",
                   help="the fuzz build folder (default: build-fuzz)")
    p.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1, metavar="N",
                   help="parallel build jobs (default: all cores)")
    p.add_argument("--output", type=Path, metavar="DIR", help="write fuzz.json to DIR")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def build(build_dir, jobs, log):
    """Configure and build; False when a step fails (its output is in log)."""
    steps = [["cmake", "-S", str(REPO), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
              "-DCMAKE_C_COMPILER=clang", "-DIPU_FUZZ=ON"],
             ["cmake", "--build", str(build_dir), "-j", str(jobs)]]
    with open(log, "wb") as out:
        return all(subprocess.run(step, stdout=out, stderr=subprocess.STDOUT).returncode == 0 for step in steps)


def read_targets(build_dir):
    """(name, input folders) per target, as CMake listed them."""
    targets = []
    for line in (build_dir / "fuzz-targets.txt").read_text().splitlines():
        words = line.split()
        if words:
            targets.append((words[0], words[1:]))
    return targets


def stat(log_text, name):
    found = re.findall(rf"^stat::{name}:\s*(\d+)", log_text, re.M)
    return int(found[-1]) if found else None


def run_target(build_dir, name, inputs, seconds):
    corpus = build_dir / "fuzz-corpus" / name
    artifacts = build_dir / "fuzz-artifacts"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    log = build_dir / f"fuzz-{name}.log"
    before = set(artifacts.iterdir())
    command = [str(build_dir / f"fuzz_{name}"), f"-max_total_time={seconds}", f"-rss_limit_mb={RSS_LIMIT_MB}",
               f"-timeout={INPUT_TIMEOUT}", "-print_final_stats=1", f"-artifact_prefix={artifacts}/{name}-",
               str(corpus), *inputs]
    # Device tiles run on 1 and on 2 threads (device_run.c); idle OpenMP threads sleep.
    env = dict(os.environ, OMP_WAIT_POLICY="passive", OPENBLAS_NUM_THREADS="1")
    began = time.monotonic()
    with open(log, "wb") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=env).returncode
    text = log.read_text(errors="replace")
    finding = None
    if code != 0:
        finding = next((kind for kind, marker in FINDINGS if marker in text), f"exit {code}")
    written = sorted(str(p) for p in set(artifacts.iterdir()) - before)
    return {"target": name, "executions": stat(text, "number_of_executed_units"),
            "executions_per_second": stat(text, "average_exec_per_sec"),
            "new_inputs": stat(text, "new_units_added"), "peak_rss_mb": stat(text, "peak_rss_mb"),
            "seconds": round(time.monotonic() - began, 1), "found": finding, "artifacts": written,
            "log": str(log)}


def report(result, out):
    for t in result["targets"]:
        executions = "?" if t["executions"] is None else f"{t['executions']:,}"
        if t["found"] is None:
            print(f"fuzz_{t['target']}: {executions} executions in {result['seconds']} s, nothing found "
                  f"({t['new_inputs']} new corpus inputs, peak RSS {t['peak_rss_mb']} MB)", file=out)
        else:
            where = ", ".join(t["artifacts"]) or "no input written"
            print(f"fuzz_{t['target']}: FOUND {t['found']} after {executions} executions: {where}; "
                  f"log {t['log']}", file=out)


def main(argv=None):
    args = parser().parse_args(argv)
    progress = Progress(quiet=args.quiet)
    if not shutil.which("clang"):
        print("ipu-e2e-fuzz: error: clang with its libFuzzer runtime is needed (Debian: clang)", file=sys.stderr)
        return EXIT_USAGE
    try:
        output_folders(args, "output", "build_dir")
    except UsageError as error:
        print(f"ipu-e2e-fuzz: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    build_log = args.build_dir / "fuzz-build.log"
    progress.update("building the fuzz targets")
    if not build(args.build_dir, args.jobs, build_log):
        progress.done()
        print(f"ipu-e2e-fuzz: error: the fuzz build failed; see {build_log}", file=sys.stderr)
        return EXIT_FAULT
    targets = read_targets(args.build_dir)
    if args.targets is not None:
        wanted = args.targets.split(",")
        unknown = sorted(set(wanted) - {name for name, _ in targets})
        if unknown or not all(wanted):
            progress.done()
            print(f"ipu-e2e-fuzz: error: --targets: unknown target(s) {', '.join(unknown) or repr(args.targets)} "
                  f"(expected {', '.join(name for name, _ in targets)})", file=sys.stderr)
            return EXIT_USAGE
        targets = [t for t in targets if t[0] in wanted]
    result = {"seconds": args.seconds, "targets": []}
    for index, (name, inputs) in enumerate(targets):
        progress.update(f"fuzzing {name} for {args.seconds} s", index + 1, len(targets))
        result["targets"].append(run_target(args.build_dir, name, inputs, args.seconds))
    progress.done()
    result["targets_met"] = {f"{t['target']}_nothing_found": t["found"] is None for t in result["targets"]}
    report(result, sys.stdout)
    if args.output:
        failed = write_result("ipu-e2e-fuzz", args.output / "fuzz.json", result)
        if failed is not None:
            return failed
    return EXIT_OK if all(result["targets_met"].values()) else EXIT_CHECK_FAILED


if __name__ == "__main__":
    sys.exit(main())
