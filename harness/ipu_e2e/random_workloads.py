"""Random workloads (`ipu-e2e-random`): a seeded generator of small valid
workloads over the compiler's option space, in the spirit of Csmith and
NNSmith, each run differentially.  A seed draws a workload family (mlp, vit,
vit-small), its geometry (odd sizes, heads, one wide head whose flash
attention takes several key chunks, layers, blocks, batch, precision, input
form, attention mode), a tile count, a memory budget (the default, or a
tight one: when no plan fits it, the case runs again at the least its
smallest candidate needs, which must fit), an exchange mode (stream words,
balancing, ranking), sometimes a bounded plan search, a resident run or a
run that records its memory events (whose timeline is checked against its
allocation table).  A case runs `ipu-e2e-test` with the per-op check
against the device-precision reference and saves its package, then replays
the package against the FP32 reference: both must pass, and the static
timing must equal the device.  A failure keeps its folder and reproduces
with `ipu-e2e-random --seeds S` (or the ipu-e2e-test command it prints).
Cases kept as regressions (fixtures/random/regressions.json) run with their
recorded arguments, so they survive a change of the generator.
"""
import argparse
import datetime
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import artifacts, child, fanout, files, run_reports
from .command import (EXIT_CHECK_FAILED, EXIT_OK, UsageError, guarded, output_folders, positive_int,
                      split_argv)
from .progress import Progress

REPO = Path(__file__).resolve().parents[2]
TEST = REPO / "harness" / "bin" / "ipu-e2e-test"
RANDOM = REPO / "harness" / "bin" / "ipu-e2e-random"
REGRESSIONS = REPO / "fixtures" / "random" / "regressions.json"
CASE_TIMEOUT = 600
TILES = (2, 3, 4, 5, 6, 8, 12, 13, 16, 24, 32, 48, 64, 96)
STREAM_WORDS = (1, 2, 3, 8, 16, 64, 256)
# Outputs at least this wide: a per-row cosine over a handful of FP8-rounded
# elements is noise.
MIN_WIDTH = 16
# The FP32 replay's criteria.  The defaults come from the full-size noise
# floor; these small, odd, FP8 geometries (a pooled output of 2 rows x 16, a
# reduction over 17 elements) sit further from FP32, and the device-precision
# check before the replay is the exact one.  Measured over 995 correct
# replays (seeds 1000-1999): worst min cosine 0.934738, norm ratio 1 +-
# 0.1028, atol needed 0.3953 at rtol 0.125; with the noise floor's margins
# (tolerances.MARGINS: twice the cosine gap, atol and norm deviation),
# rounded outwards.
FP32_CRITERIA = {"min_cosine": 0.86, "atol": 0.8, "rtol": 0.125, "norm_tolerance": 0.21}


def odd_size(rng, lo, hi):
    """A size in lo..hi, odd half the time (the paddings and remainders)."""
    value = rng.randint(lo, hi)
    return value | 1 if rng.random() < 0.5 and value | 1 <= hi else value


def generate(seed):
    """The ipu-e2e-test arguments of seed's workload (no check flags)."""
    rng = random.Random(seed)
    family = rng.choices(("mlp", "vit", "vit-small"), weights=(48, 48, 4))[0]
    args = ["--workload", family, "--seed", str(rng.randrange(2**31))]
    if family == "vit-small":
        args += ["--tiles", str(rng.choice((32, 48, 64, 96))), "--layers", "1"]
    batch = rng.choices((1, 2, 4), weights=(5, 3, 2))[0]
    if family == "mlp":
        args += ["--tiles", str(rng.choice(TILES)), "--batch", str(batch),
                 "--tokens", str(odd_size(rng, 1, 72)), "--channels", str(odd_size(rng, MIN_WIDTH, 96)),
                 "--hidden", str(odd_size(rng, MIN_WIDTH, 160)), "--blocks", str(rng.choice((1, 1, 2, 3))),
                 "--precision", rng.choice(("fp8", "fp16"))]
    elif family == "vit":
        # Attention runs a unit per (image, head): at least that many tiles.
        # Flash attention takes 64 KiB of keys and values at a time: with
        # 256-wide heads that is 64 keys, so more tokens run several key
        # chunks; more than 64 tokens run several key blocks.
        heads = rng.randint(1, 4)
        wide = rng.random() < 0.15  # one wide head, on enough tiles to hold its weights
        head_dim = rng.choice((128, 256)) if wide else max(4 * rng.randint(1, 4), 4 * -(-MIN_WIDTH // (4 * heads)))
        heads = 1 if wide else heads
        tokens = odd_size(rng, 2, 40) if rng.random() < 0.6 else odd_size(rng, 65, 160)
        fewest = 16 if wide else batch * heads
        args += ["--tiles", str(rng.choice([t for t in TILES if t >= fewest])), "--batch", str(batch),
                 "--tokens", str(tokens), "--heads", str(heads), "--head-dim", str(head_dim),
                 "--channels", str(heads * head_dim), "--hidden", str(odd_size(rng, MIN_WIDTH, 96)),
                 "--layers", str(rng.choice((1, 1, 2, 3))), "--input", rng.choice(("embeddings", "patches")),
                 "--attention", rng.choice(("auto", "flash", "materialized"))]
    if rng.random() < 0.3:
        args += ["--memory-budget", str(int(2 ** rng.uniform(11, 17)))]
    if rng.random() < 0.3:
        args += ["--exchange-stream-words", str(rng.choice(STREAM_WORDS))]
        if rng.random() < 0.5:
            args.append("--balance-streams")
        if rng.random() < 0.3:
            args += ["--exchange-rank", rng.choice(("tables", "horizon"))]
    if rng.random() < 0.1:
        args += ["--search-seconds", "60", "--search-steps", str(rng.randint(1, 4))]
    if rng.random() < 0.1:
        args += ["--reference-inferences", "2"]
    if rng.random() < 0.15:  # the run-time memory events, checked against the allocation table
        args += ["--profile-directory", "{case}/profile"]
    return args


def seed_list(text):
    """--seeds: 'A-B' (inclusive) and single seeds, separated by commas."""
    seeds = []
    for part in text.split(","):
        lo, dash, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected seeds such as 0-199 or 3,17, got '{text}'") from None
        if not 0 <= first <= last:
            raise argparse.ArgumentTypeError(f"expected ranges A-B with 0 <= A <= B, got '{part}'")
        seeds += range(first, last + 1)
    return seeds


def fresh_seeds(count, today=None):
    """count seeds no earlier night drew: they start at YYYYMMDD x 10^6."""
    day = today or datetime.datetime.now(datetime.timezone.utc).date()
    start = int(day.strftime("%Y%m%d")) * 10**6
    return list(range(start, start + count))


def parser():
    p = argparse.ArgumentParser(
        prog="ipu-e2e-random",
        description="Generate small random workloads from seeds and run each differentially: ipu-e2e-test "
                    "with the per-op check against the device-precision reference, then its saved package "
                    "against the FP32 reference. A failure reproduces with --seeds S. Exit codes: 0 every "
                    "case passed, 1 a case failed, 2 usage or input error, 3 internal error.",
        epilog="Flags after -- go to every ipu-e2e-test build (for example -- --inject NAME).")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=seed_list, metavar="SPEC",
                       help="the seeds to run: ranges and single seeds, e.g. 0-199 or 3,17")
    seeds.add_argument("--fresh", type=positive_int, metavar="N",
                       help="N seeds no earlier day drew (from today's date, UTC)")
    p.add_argument("--regressions", action="store_true",
                   help="also run every case kept in --cases (with its recorded arguments)")
    p.add_argument("--keep-failures", action="store_true",
                   help="add every failing generated case to --cases as a regression case")
    p.add_argument("--cases", type=Path, default=REGRESSIONS, metavar="FILE",
                   help=f"the kept regression cases (default: {REGRESSIONS.relative_to(REPO)})")
    p.add_argument("--list", action="store_true", help="print each case's ipu-e2e-test arguments; run nothing")
    p.add_argument("--output", type=Path, metavar="DIR",
                   help="write random.json and random.md here and keep each failed case's folder "
                        "(default: a temporary folder, removed)")
    p.add_argument("--one-case", metavar="NAME", help=argparse.SUPPRESS)
    fanout.add_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def load_regressions(path):
    """The kept cases: a list of {"name", "args"}."""
    if not path.exists():
        return []
    try:
        cases = files.read_json(path, "--cases")["cases"]
    except (ValueError, KeyError, TypeError) as error:
        raise UsageError(f"--cases {path}: expected {{\"cases\": [{{\"name\", \"args\"}}, ...]}}: {error}") from None
    bad = [c for c in cases if not isinstance(c, dict) or not isinstance(c.get("name"), str)
           or not isinstance(c.get("args"), list) or not all(isinstance(a, str) for a in c["args"])]
    if bad:
        raise UsageError(f"--cases {path}: a case needs a \"name\" and a list of string \"args\", got {bad[0]!r}")
    return cases


def planned(args, extra):
    """Every case to run: {"name", "args", "reproduce"}."""
    cases = [{"name": f"seed-{s}", "args": generate(s) + extra,
              "reproduce": ["ipu-e2e-random", "--seeds", str(s)] + (["--", *extra] if extra else [])}
             for s in (args.seeds if args.seeds is not None else fresh_seeds(args.fresh) if args.fresh else [])]
    if args.regressions:
        cases += [dict(c, args=c["args"] + extra, reproduce=["ipu-e2e-test", *c["args"], *extra])
                  for c in load_regressions(args.cases)]
    return cases


def one_run(args, folder, timeout):
    """(exit code, result.json or None, log) of one ipu-e2e-test run."""
    (folder / "result.json").unlink(missing_ok=True)
    code, log = child.execute([sys.executable, str(TEST), *args, "--output", str(folder), "--quiet",
                               "--threads", "1"], timeout)
    try:
        result = json.loads((folder / "result.json").read_text())
    except (OSError, ValueError):
        result = None
    return code, result, log.decode(errors="replace")


def outcome(code, result, log):
    """'pass', or what went wrong, in one line."""
    if code is None:
        return f"timed out after {CASE_TIMEOUT} s"
    if code < 0:
        return f"the process died of signal {-code}"
    if code == 0:
        return "pass"
    status = (result or {}).get("status", "no result.json")
    last = [l for l in log.splitlines() if l.strip()][-3:]
    return f"exit {code} ({status}): {' / '.join(last)}"


def run_case(case, folder):
    """Build with the per-op check against the device-precision reference,
    then replay the package against FP32.  Returns the case's entry."""
    folder.mkdir(parents=True, exist_ok=True)
    package = folder / "case.pkg"
    args = [*(a.replace("{case}", str(folder)) for a in case["args"]), "--reference-run", "--check-ops",
            "--save-package", str(package)]
    entry = {"name": case["name"], "args": case["args"], "reproduce": case["reproduce"], "runs": [],
             "problems": []}
    began = time.monotonic()
    code, result, log = one_run(args, folder / "device", CASE_TIMEOUT)
    entry["runs"].append({"command": ["ipu-e2e-test", *args], "outcome": outcome(code, result, log)})
    if code == 1 and result and result.get("status") == "REJECTED":
        # A tight budget no plan fits: the least its smallest candidate needs must fit.
        least = result["rejection"].get("lower_bound_bytes")
        if least is None:
            entry["problems"].append(f"rejected without a smallest candidate: {result['rejection']['reason']}")
        else:
            args = [*args, "--memory-budget", str(least)]
            code, result, log = one_run(args, folder / "device", CASE_TIMEOUT)
            entry["runs"].append({"command": ["ipu-e2e-test", *args], "outcome": outcome(code, result, log)})
            entry["budget_retried"] = least
    if code == 2 and "has no place for" in log:
        # A mutation given after -- that this workload has no place for: the case does not apply.
        entry["status"] = "not applicable"
        entry["seconds"] = round(time.monotonic() - began, 3)
        shutil.rmtree(folder, ignore_errors=True)
        return entry
    if code != 0:
        if not entry["problems"]:
            entry["problems"].append(f"device-precision run: {entry['runs'][-1]['outcome']}")
    else:
        entry["cycles"] = result["cycles"]
        entry["op_atol_rms_needed"] = max(o["atol_rms_needed"] for o in result["op_check"]["per_op"])
        replay = ["--package", str(package)] + [
            f"--{key.replace('_', '-')}={value}" for key, value in FP32_CRITERIA.items()]
        code, result, log = one_run(replay, folder / "fp32", CASE_TIMEOUT)
        entry["runs"].append({"command": ["ipu-e2e-test", *replay], "outcome": outcome(code, result, log)})
        if code != 0:
            entry["problems"].append(f"FP32 replay: {entry['runs'][-1]['outcome']}")
        checks = (result or {}).get("checks") or []
        if checks:
            entry["fp32"] = {"min_cosine": min(c["min_cosine"] for c in checks),
                             "norm_deviation": max(abs(c["norm_ratio"] - 1) for c in checks),
                             "atol_needed": max(c["atol_needed"] for c in checks)}
    entry["seconds"] = round(time.monotonic() - began, 3)
    entry["status"] = "failed" if entry["problems"] else "ok"
    if entry["status"] == "ok":
        shutil.rmtree(folder, ignore_errors=True)
    else:
        artifacts.write_bytes(folder / "log.txt", log.encode())
    return entry


def markdown(summary):
    failed = [e for e in summary["cases"] if e["status"] == "failed"]
    skipped = sum(e["status"] == "not applicable" for e in summary["cases"])
    lines = [f"# Random workloads: {summary['passed']} of {len(summary['cases'])} cases passed "
             f"({summary['retried']} tight budgets retried at their least"
             + (f"; {skipped} with no place for the mutation given" if skipped else "") + ")", ""]
    needed = [e["op_atol_rms_needed"] for e in summary["cases"] if "op_atol_rms_needed" in e]
    if needed:
        lines += [f"Per-op checks, worst over {len(needed)}: atol needed {max(needed):.3g} x the op output's RMS "
                  f"({sum(n == 0 for n in needed)} cases bit exact in every op)", ""]
    measured = [e["fp32"] for e in summary["cases"] if "fp32" in e]
    if measured:
        lines += [f"FP32 replays, worst over {len(measured)}: min cosine "
                  f"{min(f['min_cosine'] for f in measured):.6f}, norm ratio 1 +- "
                  f"{max(f['norm_deviation'] for f in measured):.4f}, atol needed "
                  f"{max(f['atol_needed'] for f in measured):.4f}", ""]
    for e in failed:
        lines += [f"- **{e['name']}** failed: {'; '.join(e['problems'])}",
                  f"  - reproduce: `{' '.join(e['reproduce'])}`",
                  f"  - last run: `{' '.join(e['runs'][-1]['command'])}`"]
    return "\n".join(lines) + "\n"


def write_summary(output, plan, entries):
    order = {c["name"]: i for i, c in enumerate(plan)}
    entries = sorted(entries, key=lambda e: order[e["name"]])
    summary = {**run_reports.record("random-workloads", ["ipu-e2e-random", *sys.argv[1:]]),
               "planned": len(plan), "complete": len(entries) == len(plan), "cases": entries,
               "passed": sum(e["status"] == "ok" for e in entries),
               "retried": sum("budget_retried" in e for e in entries)}
    if output:
        artifacts.write_json(output / "random.json", summary)
        artifacts.write_bytes(output / "random.md", markdown(summary).encode())
    return summary


def keep_failures(path, entries):
    """Add the failing generated cases to the regression file (once each)."""
    kept = load_regressions(path)
    names = {c["name"] for c in kept}
    added = [{"name": e["name"], "args": e["args"], "found": datetime.date.today().isoformat(),
              "problem": e["problems"][0]} for e in entries
             if e["status"] == "failed" and e["name"].startswith("seed-") and e["name"] not in names]
    if added:
        artifacts.write_json(path, {"cases": kept + added})
    return added


def one_case(args):
    """--one-case NAME (a fanned-out job): run the case of that name in the
    plan the runner wrote to --output, write its entry, print its name."""
    child.die_with_parent()
    plan = json.loads((args.output / "plan.json").read_text())["cases"]
    case = next((c for c in plan if c["name"] == args.one_case), None)
    if case is None:
        raise UsageError(f"--one-case: no case named {args.one_case} in {args.output / 'plan.json'}")
    folder = args.output / "cases" / case["name"]
    with fanout.case_lock(folder):
        entry = run_case(case, folder)
        artifacts.write_json(args.output / "entries" / f"{case['name']}.json", entry)
    print(case["name"], flush=True)
    return EXIT_OK


def work(args, extra, progress):
    if args.one_case is not None:
        return one_case(args)
    if args.seeds is None and not args.fresh and not args.regressions:
        raise UsageError("give the cases to run: --seeds SPEC, --fresh N or --regressions")
    if args.keep_failures and extra:
        raise UsageError(f"--keep-failures keeps generated cases as regressions; not with the flags after -- "
                         f"({' '.join(extra)}), which the kept case would not have")
    if args.cases != REGRESSIONS and not (args.regressions or args.keep_failures):
        raise UsageError(f"--cases {args.cases}: the kept cases are read by --regressions and written by "
                         f"--keep-failures; give one of them")
    if args.regressions and not args.cases.is_file():
        raise UsageError(f"--cases {args.cases}: no such file of kept cases (--regressions reads it)")
    plan = planned(args, extra)
    if args.list:
        for case in plan:
            print(f"{case['name']}: ipu-e2e-test {' '.join(case['args'])}")
        return EXIT_OK
    if fanout.requested(args):
        fanout.check(args)
    temporary = args.output is None
    if temporary:
        args.output = Path(tempfile.mkdtemp(prefix="ipu-e2e-random-"))
    output_folders(args, "output")
    entries = []
    try:
        if fanout.requested(args):
            def ended(name):
                entries.append(json.loads((args.output / "entries" / f"{name}.json").read_text()))
                write_summary(args.output, plan, entries)
                progress.update(f"{len(entries)} of {len(plan)} cases", len(entries), len(plan))
            artifacts.write_json(args.output / "plan.json", {"cases": plan})
            commands = [[sys.executable, str(RANDOM), "--one-case", c["name"], "--output",
                         str(args.output.resolve()), "--quiet"] for c in plan]
            fanout.run(args, args.jobs or 1, commands, ended)
        else:
            for index, case in enumerate(plan):
                progress.update(f"case {case['name']}", index + 1, len(plan))
                entries.append(run_case(case, args.output / "cases" / case["name"]))
                write_summary(args.output, plan, entries)
        summary = write_summary(None if temporary else args.output, plan, entries)
        progress.done()
        print(markdown(summary), end="")
        if args.keep_failures:
            for case in keep_failures(args.cases, entries):
                print(f"kept {case['name']} in {args.cases}")
    finally:
        if temporary:
            shutil.rmtree(args.output, ignore_errors=True)
    lost = len(plan) - len(entries)
    if lost:
        raise UsageError(f"{lost} case(s) ended without an entry (see the errors above)")
    return EXIT_CHECK_FAILED if any(e["status"] == "failed" for e in entries) else EXIT_OK


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    own, extra = split_argv(argv)
    args = parser().parse_args(own)
    progress = Progress(args.quiet)
    code, result = guarded("ipu-e2e-random", progress, lambda: work(args, extra, progress))
    return code if code is not None else result
