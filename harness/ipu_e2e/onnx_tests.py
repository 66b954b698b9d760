"""ipu-e2e-onnx-tests: the ONNX project's backend node tests (Debian's
libonnx-testdata) for every op type the importer claims, each run as
`ipu-e2e-test --model model.onnx --inputs test_data_set_N --precision fp16
--tiles 4 --reference-run --check-ops` (the device's outputs against the
expected outputs the test case carries, and against the project's own
device-precision reference, every op checked), fanned out through GNU
parallel.  The table says per case: passed, failed (with the first line
that says why) or not supported (the importer's reason: an attribute, a
type, a rank, an op outside the patterns it reads).  A LayerNormalization
case whose model also returns Mean and InvStdDev runs with Y alone (the
importer computes Y; the other two are optional outputs of the op) and says
so.  Exit codes: 0 every supported case passed, 1 a supported case failed,
2 usage error, 3 internal error.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import artifacts, fanout, run_reports
from .command import EXIT_CHECK_FAILED, EXIT_OK, UsageError, guarded, output_folders
from .progress import Progress

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "harness" / "bin" / "ipu-e2e-test"
RUNNER = REPO / "harness" / "bin" / "ipu-e2e-onnx-tests"
DATA = Path("/usr/share/libonnx-testdata/data/node")
# The op types the importer reads (onnx_import.py), alone or in the patterns it recognizes.
OP_TYPES = ("MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Erf", "Tanh", "ReduceMean",
            "LayerNormalization", "Identity", "Dropout", "Reshape", "Transpose", "Slice", "Split", "Gather",
            "Squeeze", "Unsqueeze", "Flatten", "Concat", "Expand", "Shape", "Cast", "ConstantOfShape")


def parser():
    p = argparse.ArgumentParser(prog="ipu-e2e-onnx-tests", description=__doc__.split("\n\n")[0].replace("\n", " "))
    p.add_argument("--data", type=Path, default=DATA, metavar="DIR",
                   help=f"the node tests' folder (default: {DATA}, from Debian's libonnx-testdata)")
    p.add_argument("--ops", metavar="LIST", default=None,
                   help="only these op types, comma-separated (default: every one the importer claims)")
    p.add_argument("--output", type=Path, metavar="DIR", default=None,
                   help="write onnx-tests.json and onnx-tests.md here (default: nowhere)")
    p.add_argument("--list", action="store_true", help="print the cases and their op types; run nothing")
    p.add_argument("--one-case", metavar="NAME", default=None, help=argparse.SUPPRESS)
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    fanout.add_arguments(p)
    return p


def op_type(folder):
    """The op type a node test is about: its model's first node that is not a Constant, or for an
    _expanded case (the op written as its function body) the op of the case it expands."""
    import onnx
    if folder.name.endswith("_expanded"):
        base = folder.with_name(folder.name[:-len("_expanded")])
        if (base / "model.onnx").is_file():
            return op_type(base)
    nodes = [n.op_type for n in onnx.load(str(folder / "model.onnx")).graph.node if n.op_type != "Constant"]
    return nodes[0] if nodes else "Constant"


def cases(data, wanted):
    """[{name, op_type, model, data_set}] for every test case of the wanted op types."""
    if not data.is_dir():
        raise UsageError(f"--data {data}: no such folder (install Debian's libonnx-testdata)")
    found = []
    for folder in sorted(p for p in data.iterdir() if (p / "model.onnx").is_file()):
        kind = op_type(folder)
        if kind not in wanted:
            continue
        for data_set in sorted(folder.glob("test_data_set_*")):
            found.append({"name": f"{folder.name}/{data_set.name}", "op_type": kind,
                          "model": str(folder / "model.onnx"), "data_set": str(data_set)})
    return found


def y_only(case, folder):
    """For a LayerNormalization model that returns Mean and InvStdDev too: a copy returning Y
    alone, with Y's expected output (paths, and the note); else None."""
    import onnx
    model = onnx.load(case["model"])
    node = next((n for n in model.graph.node if n.op_type == "LayerNormalization"), None)
    if node is None or len(model.graph.output) < 2 or len(node.output) < 2:
        return None
    del node.output[1:]
    kept = [o for o in model.graph.output if o.name == node.output[0]]
    del model.graph.output[:]
    model.graph.output.extend(kept)
    path = folder / "model-y.onnx"
    artifacts.write_bytes(path, model.SerializeToString())
    return path, [Path(case["data_set"]) / "output_0.pb"], "Y only (Mean and InvStdDev not computed)"


def run_case(case, folder):
    """Run one case; its entry: name, op_type, status (passed, failed, not supported), detail."""
    model, expected, note = Path(case["model"]), None, None
    reduced = y_only(case, folder)
    if reduced:
        model, expected, note = reduced
    command = [sys.executable, str(CLI), "--model", str(model), "--inputs", case["data_set"], "--precision", "fp16",
               "--tiles", "4", "--reference-run", "--check-ops", "--output", str(folder), "--quiet"]
    if expected:
        command += ["--expected", *map(str, expected)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    entry = {"name": case["name"], "op_type": case["op_type"], "command": command, "exit": done.returncode}
    error = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    if done.returncode == 0:
        result = json.loads((folder / "result.json").read_text())
        checked = [c for c in result.get("checks", []) if c.get("against") == "expected"]
        entry.update(status="passed" if checked else "failed",
                     detail=note or ("" if checked else "no expected output was checked"),
                     worst_cosine=min(c["min_cosine"] for c in checked) if checked else None)
    elif done.returncode == 2:
        # The importer's refusal (an op, attribute, type or shape it does not take), or an input file
        # that is not a tensor (optional and sequence values).
        entry.update(status="not supported", detail=error.removeprefix("ipu-e2e-test: error: ").split(". Supported:")[0])
    else:
        lines = [line for line in done.stdout.splitlines() if "FAIL" in line or "over" in line]
        entry.update(status="failed", detail=error or (lines[0].strip() if lines else f"exit {done.returncode}"))
    return entry


def op_type_table(summary):
    """The Markdown lines of the per-op-type counts (the nightly summary shows them too)."""
    lines = ["| op type | passed | failed | not supported |", "|---|---|---|---|"]
    for kind in sorted({e["op_type"] for e in summary["cases"]}):
        mine = [e for e in summary["cases"] if e["op_type"] == kind]
        lines.append(f"| {kind} | " + " | ".join(str(sum(e["status"] == s for e in mine))
                                              for s in ("passed", "failed", "not supported")) + " |")
    return lines


def markdown(summary):
    counts = {s: sum(e["status"] == s for e in summary["cases"]) for s in ("passed", "failed", "not supported")}
    lines = [f"# ONNX backend node tests: {counts['passed']} passed, {counts['failed']} failed, "
             f"{counts['not supported']} not supported", "", *op_type_table(summary)]
    lines += ["", "| case | op type | status | detail |", "|---|---|---|---|"]
    for e in summary["cases"]:
        detail = e.get("detail", "").replace("|", "\\|")
        lines.append(f"| {e['name']} | {e['op_type']} | {e['status']} | {detail} |")
    return "\n".join(lines) + "\n"


def summarize(output, plan, entries):
    order = {c["name"]: i for i, c in enumerate(plan)}
    entries = sorted(entries, key=lambda e: order[e["name"]])
    summary = {**run_reports.record("onnx-tests", ["ipu-e2e-onnx-tests", *sys.argv[1:]]), "planned": len(plan),
               "cases": entries, "passed": sum(e["status"] == "passed" for e in entries),
               "failed": sum(e["status"] == "failed" for e in entries),
               "not_supported": sum(e["status"] == "not supported" for e in entries)}
    if output:
        artifacts.write_json(output / "onnx-tests.json", summary)
        artifacts.write_bytes(output / "onnx-tests.md", markdown(summary).encode())
    return summary


def work(args, progress):
    wanted = OP_TYPES if args.ops is None else tuple(args.ops.split(","))
    unknown = [k for k in wanted if k not in OP_TYPES]
    if unknown:
        raise UsageError(f"--ops: {', '.join(unknown)} is not an op type the importer claims "
                         f"({', '.join(OP_TYPES)})")
    if args.one_case:
        plan = json.loads((args.output / "plan.json").read_text())["cases"]
        case = next(c for c in plan if c["name"] == args.one_case)
        folder = args.output / "cases" / case["name"].replace("/", "-")
        with fanout.case_lock(folder):
            artifacts.write_json(folder / "entry.json", run_case(case, folder))
        print(case["name"], flush=True)
        return EXIT_OK
    progress.update("finding the node tests")
    plan = cases(args.data, wanted)
    if args.list:
        for case in plan:
            print(f"{case['name']}: {case['op_type']}")
        return EXIT_OK
    if fanout.requested(args):
        fanout.check(args)
    keep = args.output is not None
    args.output = args.output or Path(tempfile.mkdtemp(prefix="ipu-e2e-onnx-tests-"))
    output_folders(args, "output")
    artifacts.write_json(args.output / "plan.json", {"cases": plan})
    entries = []

    def ended(name):
        folder = args.output / "cases" / name.replace("/", "-")
        entries.append(json.loads((folder / "entry.json").read_text()))
        progress.update(f"{len(entries)} of {len(plan)} node tests", len(entries), len(plan))
        summarize(args.output if keep else None, plan, entries)

    commands = [[sys.executable, str(RUNNER), "--one-case", c["name"], "--output", str(args.output.resolve()),
                 "--quiet"] for c in plan]
    try:
        fanout.run(args, args.jobs or 1, commands, ended)
    finally:
        if not keep:
            shutil.rmtree(args.output, ignore_errors=True)
    summary = summarize(args.output if keep else None, plan, entries)
    progress.done()
    print(markdown(summary), end="")
    if len(entries) != len(plan):
        raise UsageError(f"{len(plan) - len(entries)} case(s) ended without an entry (see the errors above)")
    return EXIT_CHECK_FAILED if summary["failed"] else EXIT_OK


def main(argv=None):
    args = parser().parse_args(argv)
    progress = Progress(args.quiet)
    code, result = guarded("ipu-e2e-onnx-tests", progress, lambda: work(args, progress))
    return code if code is not None else result
