"""ipu-e2e-fuzz: builds the libFuzzer targets of engine/tests/fuzz/ with clang
(CMake, -DIPU_FUZZ=ON, ASan and UBSan, in their own build folder) and runs
each in turn for --seconds, or until --executions (`make fuzz
FUZZ_SECONDS=N` calls it).  A target starts from its kept corpus and its
input folders (seeds and reproducers, listed by CMake in
BUILD/fuzz-targets.txt).  The corpus is kept between runs, outside the
build folder and the repository (--corpus, default
~/.cache/ipu-e2e/fuzz-corpus/<target>): the inputs a run adds are merged
into it and the whole minimized (libFuzzer's -merge=1) when the target ends.
A crashing, leaking, timed-out or out-of-memory input is written to
BUILD/fuzz-artifacts/; with --keep-findings each is also copied into the
target's reproducer folder, fixtures/fuzz/<target>/, which `make test`
replays through the target (ctest's fuzz_replay_<target>).  Limits: 2 GiB
RSS, 10 s per input; ASan's quarantine of freed memory is sized to what one
execution frees (QUARANTINE_MB).  It prints each target's
executions, how long replaying its kept corpus and input folders took, and
its executions per second after that (fuzzing proper) beside the rate it
should reach on an idle core (PARSER_RATE for the targets that only read,
DEVICE_RATE for those that run a device), and how deep the package and
options targets' inputs went (checksum right, loaded, compiled, ran).
With --output, fuzz.json: per target those figures (and libFuzzer's own
average rate, replay included), what was found and where, the log; and targets_met,
one entry per target (nothing found; with --executions, that many done) for
ci/nightly.  Exit codes: 0 nothing found, 1 a target found something (or did
fewer than --executions), 2 usage error (no clang, unknown target), 3 the
build failed.
"""
import argparse
import datetime
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import artifacts
from .command import EXIT_CHECK_FAILED, EXIT_FAULT, EXIT_OK, EXIT_USAGE, UsageError, output_folders, \
    positive_int, write_result
from .progress import Progress

REPO = Path(__file__).resolve().parents[2]
RSS_LIMIT_MB, INPUT_TIMEOUT = 2048, 10
CORPUS = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ipu-e2e" / "fuzz-corpus"
# Executions per second a target reaches on one idle core: those that only
# read an input, and those that run a device (or compile and run).
PARSER_RATE, DEVICE_RATE = 20_000, 2_000
PARSERS = {"profile", "graph"}
# libFuzzer flags of one target: graph descriptions stay short (a parser's
# time grows with its input; 2 KiB holds a graph of every op kind).
TARGET_FLAGS = {"graph": ["-max_len=2048"]}
# libFuzzer flags of every run: no purge of ASan's allocator every second
# (libfuzzer_env), no rereading of the corpus folder every second (one
# process writes it).
LIBFUZZER_FLAGS = [f"-rss_limit_mb={RSS_LIMIT_MB}", f"-timeout={INPUT_TIMEOUT}", "-purge_allocator_interval=-1",
                   "-reload=0"]
# Targets whose ASan keeps the pages it frees (libfuzzer_env).
KEEP_FREED_PAGES = {"package"}
# ASan's quarantine of freed memory, MB, for device targets and parsers: as
# large as what one execution frees, so that a use after free within it is
# caught (ASan's default, 256 MB, costs the targets a third of their speed).
QUARANTINE_MB = {False: 16, True: 1}
# What the package and options targets print at exit (fuzz_package.c,
# fuzz_options.c): how deep their inputs went.
COUNTS = ("package_inputs", "package_checksum_right", "package_loaded", "package_peeked", "options_repeated",
          "options_compiled", "options_ran")
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
                   help="fuzzing time per target (default: 60; with --executions, the most it may take)")
    p.add_argument("--executions", type=positive_int, metavar="N",
                   help="fuzz each target for N executions (at most --seconds); fewer is a failure")
    p.add_argument("--corpus", type=Path, default=CORPUS, metavar="DIR",
                   help=f"the kept corpus, a folder per target (default: {CORPUS})")
    p.add_argument("--keep-findings", action="store_true",
                   help="copy every input that found something into fixtures/fuzz/<target>/ as a reproducer")
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


def libfuzzer_env(name, allocation_stacks=False):
    """The environment of a target's run.  Device tiles run on 1 and on 2
    threads (device_run.c); idle OpenMP threads sleep.  The package target's
    ASan keeps the pages it frees rather than giving them back to the system
    every few seconds: returning them cost it a seventh of its speed in
    madvise and the page faults after it (the options target, measured the
    same way, ran a quarter slower keeping them; libFuzzer's own purge is off
    for all: LIBFUZZER_FLAGS); the rss limit still holds.  Fuzzing records no
    stack for each allocation (a tenth of a device target's time); a finding
    is run again with them (rerun_with_allocation_stacks)."""
    quarantine = QUARANTINE_MB[name in PARSERS]
    asan = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), f"quarantine_size_mb={quarantine}",
                                  "allocator_release_to_os_interval_ms=-1" if name in KEEP_FREED_PAGES else None,
                                  None if allocation_stacks else "malloc_context_size=0"]))
    return dict(os.environ, OMP_WAIT_POLICY="passive", OPENBLAS_NUM_THREADS="1", ASAN_OPTIONS=asan)


def merge(build_dir, name, kept, log):
    """Minimize the kept corpus (its inputs and those a run added to it):
    libFuzzer keeps the fewest inputs that reach every feature; the folder
    is replaced only when the merge succeeds."""
    merged = kept.with_name(kept.name + ".merging")
    shutil.rmtree(merged, ignore_errors=True)
    merged.mkdir(parents=True)
    command = target_command(build_dir, name, "-merge=1", str(merged), str(kept))
    with open(log, "ab") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=libfuzzer_env(name))
    if done.returncode != 0:
        shutil.rmtree(merged, ignore_errors=True)
        return None
    old = kept.with_name(kept.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    kept.rename(old)
    merged.rename(kept)
    shutil.rmtree(old, ignore_errors=True)
    return sum(1 for _ in kept.iterdir())


def target_command(build_dir, name, *args):
    """A libFuzzer command line of target name: its binary, the flags of
    every run and of the target, then args."""
    return [str(build_dir / f"fuzz_{name}"), *LIBFUZZER_FLAGS, *TARGET_FLAGS.get(name, []), *args]


def rerun_with_allocation_stacks(build_dir, name, finding, log):
    """Run a target once more on a finding's input, with ASan's stacks of
    where each block was allocated and freed, its report added to log."""
    command = target_command(build_dir, name, finding)
    with open(log, "ab") as out:
        out.write(f"\n==== {finding} run again with allocation stacks ====\n".encode())
        out.flush()
        try:
            subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           env=libfuzzer_env(name, allocation_stacks=True), timeout=3 * INPUT_TIMEOUT)
        except subprocess.TimeoutExpired:
            out.write(f"\n==== stopped after {3 * INPUT_TIMEOUT} s ====\n".encode())


def run_libfuzzer(command, log, env):
    """Run a libFuzzer command, its output into log.  Returns its exit code,
    the seconds it took, and when it had replayed its corpus and input
    folders (its INITED line): (inputs replayed, seconds from the start), or
    None when it never got there."""
    began = time.monotonic()
    replayed = None
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env)
        try:
            for line in process.stdout:
                out.write(line)
                found = replayed is None and re.match(rb"#(\d+)\s+INITED ", line)
                if found:
                    replayed = (int(found.group(1)), time.monotonic() - began)
            code = process.wait()
        except BaseException:
            process.kill()
            process.wait()
            raise
        finally:
            process.stdout.close()
    return code, time.monotonic() - began, replayed


def fuzzing_rate(executions, seconds, replayed):
    """Executions per second after the corpus replay: the rate of fuzzing
    proper (replaying a kept corpus runs its deepest inputs, each in full)."""
    if executions is None or replayed is None or seconds - replayed[1] <= 0:
        return None
    return round((executions - replayed[0]) / (seconds - replayed[1]))


def run_target(build_dir, name, inputs, seconds, corpus=None, executions=None):
    kept = (corpus or build_dir / "fuzz-corpus") / name
    found_dir = build_dir / "fuzz-artifacts"
    kept.mkdir(parents=True, exist_ok=True)
    found_dir.mkdir(parents=True, exist_ok=True)
    log = build_dir / f"fuzz-{name}.log"
    before = set(found_dir.iterdir())
    command = target_command(build_dir, name, f"-max_total_time={seconds}", "-print_final_stats=1",
                             f"-artifact_prefix={found_dir}/{name}-",
                             *([f"-runs={executions}"] if executions else []), str(kept), *inputs)
    code, seconds_taken, replayed = run_libfuzzer(command, log, libfuzzer_env(name))
    text = log.read_text(errors="replace")
    finding = None
    if code != 0:
        finding = next((kind for kind, marker in FINDINGS if marker in text), f"exit {code}")
    written = sorted(str(p) for p in set(found_dir.iterdir()) - before)
    if finding is not None and written:
        rerun_with_allocation_stacks(build_dir, name, written[0], log)
    executed = stat(text, "number_of_executed_units")
    result = {"target": name, "executions": executed,
              "executions_per_second": fuzzing_rate(executed, seconds_taken, replayed),
              "average_executions_per_second": stat(text, "average_exec_per_sec"),
              "replayed": None if replayed is None else {"inputs": replayed[0], "seconds": round(replayed[1], 1)},
              "target_rate": PARSER_RATE if name in PARSERS else DEVICE_RATE,
              "new_inputs": stat(text, "new_units_added"), "peak_rss_mb": stat(text, "peak_rss_mb"),
              "seconds": round(seconds_taken, 1), "found": finding, "artifacts": written, "log": str(log),
              "corpus": str(kept), "corpus_inputs": None}
    for count in COUNTS:
        if stat(text, count) is not None:
            result[count] = stat(text, count)
    if finding is None:
        result["corpus_inputs"] = merge(build_dir, name, kept, log)
    return result


def keep_findings(result, reproducers=REPO / "fixtures" / "fuzz"):
    """Copy a target's finding inputs into its reproducer folder; the paths written."""
    folder = reproducers / result["target"]
    folder.mkdir(parents=True, exist_ok=True)
    kept = []
    for artifact in map(Path, result["artifacts"]):
        data = artifact.read_bytes()
        kind = re.sub(r"[^a-z]+", "-", result["found"] or "finding").strip("-")
        path = folder / f"found-{datetime.date.today().isoformat()}-{kind}-{hashlib.sha256(data).hexdigest()[:12]}"
        artifacts.write_bytes(path, data)
        kept.append(str(path))
    return kept


def report(result, out):
    for t in result["targets"]:
        executions = "?" if t["executions"] is None else f"{t['executions']:,}"
        rate = "?" if t["executions_per_second"] is None else f"{t['executions_per_second']:,}"
        replay = t.get("replayed")
        if t["found"] is None:
            replayed = "" if replay is None else \
                f"{replay['inputs']:,} kept and seed inputs replayed in {replay['seconds']} s, then "
            print(f"fuzz_{t['target']}: {executions} executions in {t['seconds']} s: {replayed}{rate}/s "
                  f"(an idle core: {t['target_rate']:,}/s), nothing found; {t['new_inputs']} new inputs, "
                  f"corpus {t['corpus_inputs']} inputs after merging; peak RSS {t['peak_rss_mb']} MB", file=out)
        else:
            where = ", ".join(t.get("kept") or t["artifacts"]) or "no input written"
            print(f"fuzz_{t['target']}: FOUND {t['found']} after {executions} executions: {where}; "
                  f"log {t['log']}", file=out)
        if "package_inputs" in t:
            print(f"  of {t['package_inputs']:,} inputs, {t['package_checksum_right']:,} had the header's size and "
                  f"checksum right (they reach the section, record and validator checks) and "
                  f"{t['package_loaded']:,} loaded; {t['package_peeked']:,} were read without loading "
                  f"(the rest were not: peek had read the same bytes before, from an input the loader "
                  f"loaded or refused as it did this one)", file=out)
        if "options_compiled" in t:
            print(f"  {t['options_repeated']:,} inputs repeated options compiled before; "
                  f"{t['options_compiled']:,} compiled to a package within the size limits; "
                  f"{t['options_ran']:,} of those packages were new and ran", file=out)


def main(argv=None):
    args = parser().parse_args(argv)
    progress = Progress(quiet=args.quiet)
    if not shutil.which("clang"):
        print("ipu-e2e-fuzz: error: clang with its libFuzzer runtime is needed (Debian: clang)", file=sys.stderr)
        return EXIT_USAGE
    try:
        output_folders(args, "output", "build_dir", "corpus")
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
    result = {"seconds": args.seconds, "executions": args.executions, "targets": []}
    for index, (name, inputs) in enumerate(targets):
        what = f"{args.executions:,} executions" if args.executions else f"{args.seconds} s"
        progress.update(f"fuzzing {name} for {what}", index + 1, len(targets))
        done = run_target(args.build_dir, name, inputs, args.seconds, args.corpus, args.executions)
        if args.keep_findings and done["artifacts"]:
            done["kept"] = keep_findings(done)
        result["targets"].append(done)
    progress.done()
    result["targets_met"] = {}
    for t in result["targets"]:
        result["targets_met"][f"{t['target']}_nothing_found"] = t["found"] is None
        if args.executions:
            result["targets_met"][f"{t['target']}_executions"] = (t["executions"] or 0) >= args.executions
    report(result, sys.stdout)
    if args.output:
        failed = write_result("ipu-e2e-fuzz", args.output / "fuzz.json", result)
        if failed is not None:
            return failed
    return EXIT_OK if all(result["targets_met"].values()) else EXIT_CHECK_FAILED


if __name__ == "__main__":
    sys.exit(main())
