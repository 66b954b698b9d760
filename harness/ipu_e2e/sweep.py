"""ipu-e2e-sweep: a planner memory-budget sweep.  The cases are the cross
product of --precision, --blocks (MLP only), --batches and --budgets; each
builds with `ipu-e2e-test --compile-only --save-package` (--jobs builds at a
time per machine) and, once built, replays its package on the device
(`ipu-e2e-test --package`, the same checks), one device run at a time per
machine.  Both go through GNU parallel (fanout.py), on this machine or on
those of --sshlogin / --sshloginfile (a shared filesystem: the repository and
--output at the same path everywhere).  Flags after `--` go to every build.

Each case has its own folder, DIR/cases/<name>/ (sweep_case.py says what it
holds); it is finished when its record case.json exists.  Running the same
command again skips finished cases and redoes the rest (a build that
finished keeps its package), so a sweep killed even by kill -9 loses nothing
finished.  DIR/sweep.json, rewritten as each case finishes, holds the
settings, the planned cases with their command lines, and every finished
case's outcome.  Exit codes: 0 every case passed or was rejected by the
planner, 1 a case failed a check, timed out or ended in an error, 2 usage or
input error, 3 internal error, 130 interrupted.
"""
import argparse
import shlex
import sys
from pathlib import Path

from . import artifacts, cli, fanout, files, sweep_case, transformer
from .command import (EXIT_CHECK_FAILED, EXIT_FAULT, EXIT_OK, UsageError, guarded, number_in, output_folders,
                      positive_int, split_argv, tile_count)
from .progress import Progress

SWEEP = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-sweep"
DEFAULT_BUDGETS = "default,393216,262144,131072,65536"
DEFAULT_TIMEOUT = 600
# The ipu-e2e-test flags the sweep sets itself (refused after --).
OWN_FLAGS = ("workload", "precision", "blocks", "batch", "memory_budget", "tiles", "output", "save_package",
             "package", "compile_only", "memory_profile_directory", "profile_directory", "quiet")
OUTCOMES = ("passed", "rejected", "failed", "timed out", "error")


def comma_list(kind, what):
    def parse(text):
        items = [i for i in text.split(",") if i]
        if not items:
            raise argparse.ArgumentTypeError(f"expected {what} separated by commas, got '{text}'")
        values = [kind(i) for i in items]
        if len(set(map(str, values))) != len(values):
            raise argparse.ArgumentTypeError(f"expected distinct {what}, got '{text}'")
        return values
    return parse


def batch(text):
    """A batch ipu-e2e-test takes (its --batch choices), refused here before any case is built."""
    if text not in ("1", "2", "4"):
        raise argparse.ArgumentTypeError(f"expected batches of 1, 2 and 4, got '{text}'")
    return int(text)


def precision(text):
    if text not in ("fp8", "fp16"):
        raise argparse.ArgumentTypeError(f"expected fp8 or fp16, got '{text}'")
    return text


def parser():
    p = argparse.ArgumentParser(prog="ipu-e2e-sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                usage="%(prog)s --output DIR [options] [-- IPU-E2E-TEST-FLAGS...]")
    p.add_argument("--output", type=Path, metavar="DIR",
                   help="the sweep's folder: sweep.json and cases/<name>/ (required)")
    p.add_argument("--workload", choices=transformer.WORKLOADS, default="mlp", help="(default: mlp)")
    p.add_argument("--model", type=Path, metavar="FILE.onnx", default=None,
                   help="sweep an ONNX model instead (its cases are the budgets, its batch the model input's "
                        "leading dimension; --inputs, --expected and --precision after -- go to its builds and "
                        "to its replays)")
    p.add_argument("--precision", type=comma_list(precision, "precisions"), default=None, metavar="LIST",
                   help="MLP precisions, of fp8 and fp16 (default: fp8)")
    p.add_argument("--blocks", type=comma_list(positive_int, "block counts"), default=None, metavar="LIST",
                   help="MLP blocks chained through one Repeat (default: 1)")
    p.add_argument("--batches", type=comma_list(batch, "batches"), default=[1, 2, 4], metavar="LIST",
                   help="images per inference, of 1, 2 and 4 (default: 1,2,4)")
    p.add_argument("--budgets", type=comma_list(transformer.budget, "budgets"), default=DEFAULT_BUDGETS,
                   metavar="LIST", help="planner memory budgets per tile in bytes, or default (the profile's) "
                                        f"(default: {DEFAULT_BUDGETS})")
    p.add_argument("--tiles", type=tile_count, metavar="N", help="override the profile's tile count")
    p.add_argument("--timeout", type=number_in(0.01, 86400, "seconds in 0.01..86400"), default=DEFAULT_TIMEOUT,
                   metavar="S", help=f"kill a build or device run after S seconds and record the case as timed "
                                     f"out (default: {DEFAULT_TIMEOUT})")
    fanout.add_arguments(p, "build N cases at a time on each machine, through GNU parallel (default: 1; the "
                            "device runs go one at a time on each machine)")
    p.add_argument("--stage", choices=("build", "run"),
                   help="with --case: run one stage of one planned case of the sweep in --output (the job "
                        "the fan-out runs on each machine)")
    p.add_argument("--case", metavar="NAME", help="the case of --stage")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


# The ipu-e2e-test flags after -- that a model's replay needs too (they say what the model is).
MODEL_FLAGS = ("--precision", "--inputs", "--expected")


def model_flags(extra):
    """The flags of MODEL_FLAGS in extra, with their values."""
    kept, take = [], False
    for arg in extra:
        if arg.startswith("--"):
            take = arg in MODEL_FLAGS
        if take:
            kept.append(arg)
    return kept


def model_batch(path):
    """The leading dimension of the model's first input (its images or sequences)."""
    from . import models
    onnx_import = models.onnx_modules()
    try:
        graph = onnx_import.load_model(path).graph
    except onnx_import.ModelError as error:
        raise UsageError(f"--model {error}") from None
    given = [i for i in graph.input if i.name not in {t.name for t in graph.initializer}]
    dims = given[0].type.tensor_type.shape.dim if given else []
    return dims[0].dim_value if dims and dims[0].dim_value > 0 else 1


def check_extra(extra, workload, model=None):
    """Refuse, before any build, flags after -- that ipu-e2e-test would
    refuse or that the sweep sets itself."""
    p = cli.parser()

    def refuse(message):
        raise UsageError(f"the ipu-e2e-test flags after --: {message}")
    p.error = refuse
    given = p.parse_args(extra)
    own = [name for name in OWN_FLAGS if getattr(given, name) != cli.PARSER_DEFAULTS[name]]
    if own:
        refuse(f"--{own[0].replace('_', '-')} is set by the sweep itself (give the sweep its own flag, or "
               f"leave it out)")
    given.workload, given.compile_only, given.model = workload, True, model
    try:
        transformer.check_flags(given, cli.PARSER_DEFAULTS)
    except UsageError as error:
        refuse(f"{error} (the sweep builds with --compile-only, and its device runs replay each package "
               f"against the FP32 reference)")


def case_name(workload, precision_, blocks, batch, budget):
    parts = [workload] + ([precision_, f"blocks{blocks}"] if workload == "mlp" else [])
    return "-".join(parts + [f"batch{batch}", str(budget if budget is not None else "default")])


def model_plan(args, extra):
    """A model's cases: one per budget."""
    if args.workload != "mlp" or args.precision or args.blocks or args.batches != [1, 2, 4]:
        raise UsageError("--model sweeps budgets only: --workload, --precision, --blocks and --batches do not "
                         "apply (give --precision after --)")
    cases_dir, batch = args.output.resolve() / "cases", model_batch(args.model)
    python, cli_path, model = sys.executable, str(sweep_case.CLI), str(args.model.resolve())
    cases = []
    for budget in args.budgets:
        name = f"{args.model.stem}-{budget if budget is not None else 'default'}"
        folder = cases_dir / name
        build = [python, cli_path, "--model", model] + (["--memory-budget", str(budget)] if budget is not None else [])
        build += (["--tiles", str(args.tiles)] if args.tiles else []) + [
            *extra, "--compile-only", "--save-package", str(folder / "package.pkg"), "--memory-profile-directory",
            str(folder / "memory"), "--output", str(folder), "--quiet"]
        run = [python, cli_path, "--package", str(folder / "package.pkg"), "--model", model, *model_flags(extra),
               "--output", str(folder / "run"), "--profile-directory", str(folder / "run"), "--quiet"]
        cases.append({"name": name, "workload": args.model.stem, "precision": None, "blocks": None, "batch": batch,
                      "budget": budget if budget is not None else "default", "build": build, "run": run})
    return cases


def plan(args, extra):
    """The planned cases, each with its build and run command lines."""
    if args.model:
        return model_plan(args, extra)
    mlp = args.workload == "mlp"
    if not mlp and (args.precision or args.blocks):
        raise UsageError(f"--{'precision' if args.precision else 'blocks'} applies to --workload mlp, not to "
                         f"--workload {args.workload}")
    cases_dir = args.output.resolve() / "cases"
    python, cli_path = sys.executable, str(sweep_case.CLI)
    cases = []
    for precision_ in (args.precision or ["fp8"]) if mlp else [None]:
        for blocks in (args.blocks or [1]) if mlp else [None]:
            for batch in args.batches:
                for budget in args.budgets:
                    name = case_name(args.workload, precision_, blocks, batch, budget)
                    folder = cases_dir / name
                    build = [python, cli_path, "--workload", args.workload]
                    if mlp:
                        build += ["--precision", precision_, "--blocks", str(blocks)]
                    build += ["--batch", str(batch)]
                    if budget is not None:
                        build += ["--memory-budget", str(budget)]
                    if args.tiles:
                        build += ["--tiles", str(args.tiles)]
                    build += [*extra, "--compile-only", "--save-package", str(folder / "package.pkg"),
                              "--memory-profile-directory", str(folder / "memory"), "--output", str(folder),
                              "--quiet"]
                    run = [python, cli_path, "--package", str(folder / "package.pkg"), "--output",
                           str(folder / "run"), "--profile-directory", str(folder / "run"), "--quiet"]
                    cases.append({"name": name, "workload": args.workload, "precision": precision_,
                                  "blocks": blocks, "batch": batch,
                                  "budget": budget if budget is not None else "default",
                                  "build": build, "run": run})
    return cases


def read_record(path):
    try:
        return files.read_json(path, "case record")
    except ValueError as error:
        raise UsageError(f"{path}: cannot read this case record: {error}") from None


class Sweep:
    """The planned cases, their finished records, and sweep.json."""

    def __init__(self, args, argv, extra, cases):
        self.args, self.cases = args, cases
        self.folder = args.output.resolve()
        self.settings = {"workload": args.model.stem if args.model else args.workload,
                         "model": str(args.model) if args.model else None, "tiles": args.tiles, "extra_flags": extra,
                         "timeout_seconds": args.timeout, "jobs": args.jobs or 1, "sshlogin": args.sshlogin,
                         "sshloginfile": str(args.sshloginfile) if args.sshloginfile else None}
        self.argv = ["ipu-e2e-sweep", *argv]
        self.records = {}
        for case in cases:
            path = self.case_folder(case) / "case.json"
            if not path.exists():
                continue
            record = read_record(path)
            if record.get("build", {}).get("command", [None])[1:] != case["build"][1:]:
                raise UsageError(f"--output {args.output}: case {case['name']} was finished by another build "
                                 f"command ({shlex.join(record.get('build', {}).get('command', []))}); rerun "
                                 f"with the same flags or use a new --output")
            self.records[case["name"]] = record

    def case_folder(self, case):
        return self.folder / "cases" / case["name"]

    def built(self, case):
        stage = sweep_case.read_result(self.case_folder(case) / "build.json")
        return bool(stage) and stage.get("command", [None])[1:] == case["build"][1:]

    def write(self):
        outcomes = [self.records[c["name"]] for c in self.cases if c["name"] in self.records]
        value = {"schema": "ipu-e2e/sweep", "version": 1, "command": self.argv, "settings": self.settings,
                 "planned": self.cases, "complete": len(outcomes) == len(self.cases),
                 "counts": {o: sum(r["outcome"] == o for r in outcomes) for o in OUTCOMES},
                 "cases": [{k: r.get(k) for k in ("name", "outcome", "stage", "message", "figures")}
                           for r in outcomes]}
        artifacts.write_json(self.folder / "sweep.json", value)

    def job(self, case, stage):
        return [sys.executable, str(SWEEP), "--stage", stage, "--case", case["name"], "--output",
                str(self.folder), "--quiet"]

    def stage(self, name, cases, jobs, progress):
        """Run one stage of cases through the fan-out; records are read as jobs end."""
        by_name = {c["name"]: c for c in cases}
        ended = []

        def finished(line):
            if line not in by_name or line in ended:
                return
            ended.append(line)
            path = self.case_folder(by_name[line]) / "case.json"
            if path.exists():
                self.records[line] = read_record(path)
                self.write()
            progress.update(f"{name}: {len(ended)} of {len(cases)} cases", len(ended), len(cases))

        progress.update(f"{name}: 0 of {len(cases)} cases", 0, len(cases))
        fanout.run(self.args, jobs, [self.job(c, "build" if name == "builds" else "run") for c in cases],
                   finished)


def table(sweep):
    lines = [f"{'case':<44} {'outcome':<10} {'cycles':>11} {'build s':>8}  note"]
    for case in sweep.cases:
        r = sweep.records.get(case["name"])
        if r is None:
            lines.append(f"{case['name']:<44} {'unfinished':<10}")
            continue
        cycles = r.get("figures", {}).get("cycles")
        lines.append(f"{case['name']:<44} {r['outcome']:<10} {f'{cycles:,}' if cycles is not None else '':>11} "
                     f"{r['build']['seconds']:8.2f}  {r.get('message') or ''}"[:200])
    return "\n".join(lines) + "\n"


def job(args):
    """--stage S --case NAME: one stage of one planned case."""
    if args.case is None or args.output is None:
        raise UsageError("--stage needs --case NAME and --output DIR")
    planned = read_record(args.output / "sweep.json")
    case = next((c for c in planned.get("planned", []) if c.get("name") == args.case), None)
    if case is None:
        raise UsageError(f"--case: no case named {args.case} in {args.output / 'sweep.json'}")
    try:
        sweep_case.work(args.stage, case, args.output.resolve() / "cases" / case["name"],
                        planned["settings"]["timeout_seconds"])
    except RuntimeError as error:
        print(f"ipu-e2e-sweep: error: {error}", file=sys.stderr)
        return EXIT_FAULT
    return EXIT_OK


def work(args, argv, extra, progress):
    if args.stage is not None:
        return job(args)
    if args.case is not None:
        raise UsageError("--case applies with --stage (the fan-out's job)")
    if args.output is None:
        raise UsageError("--output DIR is required: the folder the sweep writes (and resumes)")
    check_extra(extra, "graph" if args.model else args.workload, args.model)
    cases = plan(args, extra)
    fanout.check(args)
    output_folders(args, "output")
    sweep = Sweep(args, argv, extra, cases)
    sweep.write()
    to_build = [c for c in cases if c["name"] not in sweep.records and not sweep.built(c)]
    sweep.stage("builds", to_build, args.jobs or 1, progress)
    to_run = [c for c in cases if c["name"] not in sweep.records and sweep.built(c)]
    sweep.stage("device runs", to_run, 1, progress)
    sweep.write()
    progress.done()
    print(table(sweep), end="")
    unfinished = [c["name"] for c in cases if c["name"] not in sweep.records]
    if unfinished:
        print(f"ipu-e2e-sweep: error: case(s) {', '.join(unfinished)} did not finish (their jobs' errors are "
              f"above); running the same command again redoes them", file=sys.stderr)
        return EXIT_FAULT
    bad = [r for r in sweep.records.values() if r["outcome"] not in ("passed", "rejected")]
    return EXIT_CHECK_FAILED if bad else EXIT_OK


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    own, extra = split_argv(argv)
    args = parser().parse_args(own)
    progress = Progress(args.quiet)
    code, result = guarded("ipu-e2e-sweep", progress, lambda: work(args, argv, extra, progress))
    return code if code is not None else result
