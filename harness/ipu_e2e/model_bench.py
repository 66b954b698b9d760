"""`ipu-e2e-bench model FILE.onnx`: one imported model end to end, in a child
`ipu-e2e-test --model FILE --reference-run --reference-fp32` (so the peak
RSS is the run's own): the export (`--export KIND`, when FILE is not there
yet), import, build, device and FP32 reference wall times, the simulated
cycles, the compute roofline ratio, and the checks against the expected
outputs and the reference (its target: every check passes).
"""
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .command import EXIT_CHECK_FAILED, EXIT_OK, UsageError

CLI = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-test"
EXPORT = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-export-model"


def add_arguments(sub):
    model = sub.add_parser("model", help="an ONNX model: import, build, device and reference times, cycles")
    model.add_argument("model", type=Path, metavar="FILE.onnx", help="the model (ipu-e2e-export-model writes one)")
    model.add_argument("--inputs", type=Path, nargs="+", metavar="FILE",
                       help="its inputs (as ipu-e2e-test --inputs; default: FILE.input.npy beside it when there)")
    model.add_argument("--expected", type=Path, nargs="+", metavar="FILE",
                       help="its expected outputs (default: FILE.expected.npy beside it when there)")
    model.add_argument("--precision", choices=("fp8", "fp16"), default="fp8", help="weights' precision (default: fp8)")
    model.add_argument("--tiles", type=int, metavar="N", help="override the c600 profile's 1472 tiles")
    model.add_argument("--export", choices=("vit", "encoder-block"), default=None,
                       help="when FILE does not exist, export it first (ipu-e2e-export-model KIND with its "
                            "defaults: vit is ViT-B/16 at 224 x 224; needs python3-torch, make deps-models)")
    model.add_argument("--output", type=Path, metavar="DIR", help="write bench-model.json to DIR")
    model.add_argument("--quiet", action="store_true", help="no progress line on stderr")


def bench_model(args, progress):
    exported = None
    if args.export and not args.model.is_file():
        progress.update(f"exporting {args.export} to {args.model}")
        started = time.perf_counter()
        done = subprocess.run([sys.executable, str(EXPORT), args.export, str(args.model), "--quiet"],
                              capture_output=True, text=True)
        if done.returncode != EXIT_OK:
            raise UsageError(f"--export {args.export}: {done.stderr.strip().splitlines()[-1] if done.stderr else ''}")
        exported = time.perf_counter() - started
    inputs, expected = args.inputs or [], args.expected or []
    progress.update(f"running {args.model} (import, build, device, FP32 reference)")
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, str(CLI), "--quiet", "--model", str(args.model), "--precision", args.precision,
                   "--reference-run", "--reference-fp32", "--output", out]
        command += ["--inputs", *map(str, inputs)] if inputs else []
        command += ["--expected", *map(str, expected)] if expected else []
        command += ["--tiles", str(args.tiles)] if args.tiles else []
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode not in (EXIT_OK, EXIT_CHECK_FAILED) or not (Path(out) / "result.json").is_file():
            raise UsageError(f"{args.model}: {done.stderr.strip() or done.stdout.strip()}")
        result = json.loads((Path(out) / "result.json").read_text())
    wall = result["wall_seconds"]
    compile_seconds = sum(v for k, v in wall.items() if k.startswith("compile_"))
    return {"bench": "model", "model": str(args.model), "precision": args.precision, "tiles": result["tiles"],
            "geometry": result["geometry"], "status": result["status"],
            "seconds": {"export": exported, "import": wall.get("import"), "workload": wall["workload"],
                        "build": compile_seconds, "device": wall.get("device"), "reference": wall.get("reference")},
            "cycles": result.get("cycles"), "ms": result.get("ms"), "roofline_ratio": result.get("roofline_ratio"),
            "simulated_cycles_per_inference": result.get("cycles"),
            "min_cosine": min((c["min_cosine"] for c in result["checks"]), default=None),
            "targets_met": {"checks_pass": result["status"] == "PASS"},
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "checks": [{k: c.get(k) for k in ("tensor", "model_output", "against", "reference", "min_cosine",
                                              "max_abs_error", "norm_ratio", "passed")} for c in result["checks"]]}


def report_model(result, out):
    s = result["seconds"]
    times = ", ".join(f"{k} {v:.2f} s" for k, v in s.items() if v is not None)
    print(f"model {result['model']} ({result['precision']}) on {result['tiles']} tiles: {result['status']}", file=out)
    print(f"  {times}; peak RSS {result['peak_rss_mib']:.0f} MiB", file=out)
    if result["cycles"]:
        ratio = result["roofline_ratio"]
        print(f"  simulated {result['cycles']:,} cycles ({result['ms']:.3f} ms)"
              + (f", {ratio:.2f}x the compute roofline" if ratio else ""), file=out)
    for c in result["checks"]:
        what = "FP32 reference" if c.get("reference") else f"device {c['tensor']}"
        against = f"expected '{c['model_output']}'" if c.get("against") == "expected" else "FP32 reference"
        print(f"  {what} against {against}: min cosine {c['min_cosine']:.6f}, max abs error "
              f"{c['max_abs_error']:.3g}, norm ratio {c['norm_ratio']:.5f}: {'pass' if c['passed'] else 'FAIL'}",
              file=out)
