"""Cycle goldens (`ipu-e2e-goldens`): simulated cycles are deterministic, so a
set of small workloads (fixtures/goldens/cycles.json) pins, per compiler op,
the cycles the device charged and the planner's estimate, beside each
run's total.  A check run builds and runs every case and fails (exit 1) on
any change, naming the case, the op and how far its cycles moved; an
intended change is recorded with `--update`, and the file's diff shows it
in review.  A golden run also checks its outputs against the
device-precision reference, so a change that breaks a case is a failure
too, never a new golden.
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path

from . import artifacts, child, schema
from .command import EXIT_CHECK_FAILED, EXIT_OK, UsageError, guarded, split_argv
from .progress import Progress

REPO = Path(__file__).resolve().parents[2]
TEST = REPO / "harness" / "bin" / "ipu-e2e-test"
GOLDENS = REPO / "fixtures" / "goldens" / "cycles.json"
CASE_TIMEOUT = 600
MLP = ["--workload", "mlp", "--tiles", "16", "--tokens", "40", "--channels", "64", "--hidden", "96",
       "--blocks", "2", "--batch", "2"]
VIT = ["--workload", "vit", "--tiles", "16", "--tokens", "20", "--heads", "4", "--head-dim", "8",
       "--hidden", "40", "--layers", "2"]
# The cases: each feature's path on a small device.
CASES = {
    "mlp": MLP,
    "mlp-fp16-serial": MLP + ["--precision", "fp16", "--memory-budget", "6000"],
    "mlp-streams": MLP + ["--exchange-stream-words", "16", "--balance-streams"],
    "mlp-search": MLP + ["--search-seconds", "600", "--search-steps", "3"],
    "vit-flash": VIT + ["--attention", "flash"],
    "vit-flash-key-blocks": VIT + ["--tokens", "150", "--attention", "flash", "--attention-key-bands", "2"],
    "vit-materialized": VIT + ["--attention", "materialized"],
    "vit-patches": VIT + ["--batch", "2", "--input", "patches"],
    "vit-small": ["--workload", "vit-small", "--tiles", "64", "--layers", "1"],
    "vit-small-search": ["--workload", "vit-small", "--tiles", "64", "--layers", "1", "--search-seconds", "600",
                         "--search-steps", "3"],
    "vit-small-streams": ["--workload", "vit-small", "--tiles", "64", "--layers", "1", "--exchange-stream-words",
                          "16"],
}


def parser():
    p = argparse.ArgumentParser(
        prog="ipu-e2e-goldens",
        description="Build and run the golden workloads and compare their cycles, per compiler op, with "
                    f"the recorded goldens ({GOLDENS.relative_to(REPO)}). Exit codes: 0 every figure "
                    "equal, 1 a figure changed or a run failed, 2 usage or input error, 3 internal error.",
        epilog="Flags after -- go to every ipu-e2e-test build (for example -- --inject NAME).")
    p.add_argument("--update", action="store_true",
                   help="record the figures of this run as the goldens (every run must pass its checks)")
    p.add_argument("--only", metavar="NAMES", help="these cases only (names separated by commas)")
    p.add_argument("--goldens", type=Path, default=GOLDENS, metavar="FILE",
                   help=f"the goldens file (default: {GOLDENS.relative_to(REPO)})")
    p.add_argument("--list", action="store_true", help="print each case's ipu-e2e-test arguments; run nothing")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def figures(result):
    """A run's golden figures: the total, the estimate and, per op, the
    device's cycles and the planner's estimate."""
    return {"cycles": result["cycles"], "estimate": result["estimate"]["cycles"],
            "ops": [{"op": f"op {o['op']} {o['kind']} {o['output']}", "device": o["device"],
                     "estimate": o["estimate"]} for o in result["op_cycles"]]}


def moved(before, after):
    """'from -> to (+d, xr)'."""
    ratio = f", x{after / before:.3f}" if before else ""
    return f"{before:,} -> {after:,} ({after - before:+,}{ratio})"


def differences(name, golden, now, most=6):
    """The changes between a case's golden and this run, one line each: the
    totals, then the ops whose cycles moved furthest (at most `most`)."""
    lines = [f"{name}: {what} {moved(golden[key], now[key])}"
             for key, what in (("cycles", "total cycles"), ("estimate", "estimated total")) if golden[key] != now[key]]
    old_ops = {o["op"]: o for o in golden["ops"]}
    new_ops = {o["op"]: o for o in now["ops"]}
    ops = []
    for label in sorted(old_ops.keys() | new_ops.keys(), key=lambda l: int(l.split()[1])):
        if label not in new_ops or label not in old_ops:
            ops.append((float("inf"), f"{name}: {label} {'is gone' if label not in new_ops else 'is new'}"))
            continue
        for key, what in (("device", "device cycles"), ("estimate", "estimated cycles")):
            before, after = old_ops[label][key], new_ops[label][key]
            if before != after:
                ops.append((abs(after - before), f"{name}: {label}: {what} {moved(before, after)}"))
    ops.sort(key=lambda o: -o[0])
    lines += [line for _, line in ops[:most]]
    if len(ops) > most:
        lines.append(f"{name}: and {len(ops) - most} more op figure(s) moved")
    return lines


def run(name, args, folder):
    """(figures or None, the problem) of one case's run."""
    code, log = child.execute([sys.executable, str(TEST), *args, "--reference-run", "--output", str(folder),
                               "--quiet", "--threads", "1"], CASE_TIMEOUT)
    if code != 0:
        tail = " / ".join(l for l in log.decode(errors="replace").splitlines() if l.strip())[-400:]
        return None, f"{name}: the run failed (exit {code}): {tail}"
    return figures(json.loads((folder / "result.json").read_text())), None


def load(path, update):
    """The recorded goldens; a missing file is an empty record only for --update, which writes it."""
    if update and not path.exists():
        return {}
    return schema.load(path, schema.GOLDENS, "--goldens")["cases"]


def work(args, extra, progress):
    names = list(CASES)
    if args.only is not None:
        names = [n for n in args.only.split(",") if n]
        unknown = [n for n in names if n not in CASES]
        if unknown or not names:
            raise UsageError(f"--only: no case named {', '.join(unknown) or repr(args.only)}; the cases are "
                             f"{', '.join(CASES)}")
    if args.list:
        for name in names:
            print(f"{name}: ipu-e2e-test {' '.join(CASES[name] + extra)}")
        return EXIT_OK
    if args.update and extra:
        raise UsageError("--update records the goldens of the cases as they are: it takes no flags after --")
    goldens = load(args.goldens, args.update)
    found, problems = {}, []
    with tempfile.TemporaryDirectory(prefix="ipu-e2e-goldens-") as scratch:
        for index, name in enumerate(names):
            progress.update(f"case {name}", index + 1, len(names))
            now, problem = run(name, CASES[name] + extra, Path(scratch) / name)
            if problem:
                problems.append(problem)
            elif args.update:
                found[name] = now
            elif name not in goldens:
                problems.append(f"{name}: no golden recorded (ipu-e2e-goldens --update records it)")
            else:
                problems += differences(name, goldens[name], now)
    progress.done()
    if args.update:
        if problems:
            print("\n".join(problems))
            print("ipu-e2e-goldens: nothing recorded: every run must pass its checks")
            return EXIT_CHECK_FAILED
        changed = [n for n in found if goldens.get(n) != found[n]]
        artifacts.write_json(args.goldens, {"cases": dict(goldens, **found)})
        print(f"recorded {len(found)} case(s) in {args.goldens}; changed: {', '.join(changed) or 'none'}")
        return EXIT_OK
    for line in problems:
        print(line)
    print(f"cycle goldens: {len(names)} case(s), {'all equal' if not problems else f'{len(problems)} change(s)'}")
    return EXIT_OK if not problems else EXIT_CHECK_FAILED


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    own, extra = split_argv(argv)
    args = parser().parse_args(own)
    progress = Progress(args.quiet)
    code, result = guarded("ipu-e2e-goldens", progress, lambda: work(args, extra, progress))
    return code if code is not None else result
