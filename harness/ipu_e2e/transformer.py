"""The SigLIP MLP workload from the harness side: its flags, compiling it
(or replaying a saved package, rebuilding the same workload from the options
recorded with it), running it on the device, the FP32 reference check per
output row, the compute roofline ratio, tensor dumps and the report.
"""
import argparse
import json
import os
import time
from pathlib import Path

from . import npy, placement_report, runner
from .command import EXIT_CHECK_FAILED, EXIT_FAULT, EXIT_OK, UsageError, positive_int
from .native import Workload, check_outputs

# Per-row cosine thresholds: FP32 reference from unquantized values, and the
# device-precision reference that rounds like the device.
MIN_COSINE = {"fp32": 0.99, "device": 0.999}
# This workload's flags (their defaults are the parser's).
FLAGS = ("batch", "precision", "blocks", "memory_budget", "seed", "reference_run", "reference_fp32",
         "reference_inferences", "dump_tensors", "memory_profile_directory", "tokens", "channels", "hidden")
AMP_RATES = {("f143", "f16"): "amp_macs_fp8", ("f143", "f32"): "amp_macs_fp8",
             ("f152", "f16"): "amp_macs_fp8", ("f152", "f32"): "amp_macs_fp8",
             ("f16", "f16"): "amp_macs_fp16_fp16", ("f16", "f32"): "amp_macs_fp16_fp32"}


def budget(text):
    if text == "default":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of bytes or 'default', got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of bytes, got {value}")
    return value


def add_arguments(p):
    group = p.add_argument_group("mlp workload")
    group.add_argument("--batch", type=int, choices=(1, 2, 4), default=1, help="images (729 tokens each)")
    group.add_argument("--precision", choices=("fp8", "fp16"), default="fp8",
                       help="fp8: F143 inputs and weights (scale -2), FP16 results; fp16: all FP16")
    group.add_argument("--blocks", type=positive_int, default=1, metavar="N",
                       help="MLP blocks chained through one Repeat (default: 1)")
    group.add_argument("--memory-budget", type=budget, default=None, metavar="BYTES|default",
                       help="planner memory budget per tile (default: the profile's)")
    group.add_argument("--seed", type=int, default=0, metavar="S", help="seed of inputs and weights")
    group.add_argument("--reference-run", action="store_true", help="check against the host reference")
    group.add_argument("--reference-fp32", action="store_true",
                       help="the reference computes in FP32 from the unquantized values (cosine >= 0.99); "
                            "without it, at device precision (cosine >= 0.999)")
    group.add_argument("--reference-inferences", type=positive_int, default=1, metavar="N",
                       help="serve N invocations after one initialize and one parameter upload: every "
                            "output must be bit identical and every parameter byte unchanged (digest)")
    group.add_argument("--dump-tensors", metavar="DIR", type=Path,
                       help="write inputs, parameters, outputs (and the reference) as .npy files")
    group.add_argument("--memory-profile-directory", metavar="DIR", type=Path,
                       help="write the final package's placement report: placement-<pid>.json and a "
                            "standalone placement-<pid>.html viewer")
    for name, default in (("tokens", 729), ("channels", 1152), ("hidden", 4304)):
        group.add_argument(f"--{name}", type=positive_int, default=default, metavar="N",
                           help=f"geometry for small tests (default: {default})")


def check_flags(args, defaults):
    """Refuse the exchange-stress flags."""
    for name in ("exchange_pattern", "sources", "iterations"):
        if getattr(args, name) is not None:
            raise UsageError(f"--{name.replace('_', '-')} applies to --workload exchange-stress")


def options(args):
    return {"workload": "mlp", "batch": args.batch, "precision": args.precision, "blocks": args.blocks,
            "seed": args.seed, "tokens": args.tokens, "channels": args.channels, "hidden": args.hidden}


def macs(info):
    """(MACs, AMP rate field) summed over matmul executions."""
    tensors = {t["name"]: t for t in info["tensors"]}
    repeat = info.get("repeat") or {}
    total, rate = 0, None
    for index, op in enumerate(info["ops"]):
        if op["op"] != "matmul":
            continue
        a, b, c = tensors[op["inputs"][0]], tensors[op["inputs"][1]], tensors[op["output"]]
        in_body = repeat and repeat["first_op"] <= index < repeat["first_op"] + repeat["op_count"]
        total += a["rows"] * a["cols"] * b["cols"] * (repeat["iterations"] if in_body else 1)
        rate = AMP_RATES[(a["dtype"], c["dtype"])]
    return total, rate


def dump(directory, workload, outputs):
    info = workload.info()
    for t in info["tensors"]:
        shape = (t["sequence"], t["rows"], t["cols"]) if t["sequence"] > 1 else (t["rows"], t["cols"])
        if t["role"] in ("input", "parameter"):
            npy.write_npy(directory / f"{t['name']}.npy", workload.device_bytes(t["name"]), t["dtype"], shape)
        elif t["role"] == "output":
            npy.write_npy(directory / f"{t['name']}.npy", outputs[t["name"]], t["dtype"], shape)


def execute(ctx, args, profile, package, progress, started):
    wall = {}
    if package is None:
        progress.update("generating inputs and weights")
        workload = Workload(ctx, options(args))
        wall["workload"] = time.perf_counter() - started
        progress.update("compiling")
        placement = None
        if args.memory_profile_directory:
            placement = args.memory_profile_directory / f"placement-{os.getpid()}.json"
        package, compiled = workload.compile(profile, args.memory_budget, placement_report=placement)
        wall.update({f"compile_{k}": v for k, v in compiled["wall_seconds"].items()})
        if placement:
            progress.update("writing the placement viewer")
            placement_report.write_placement_html(placement, placement.with_suffix(".html"))
    else:
        meta = package.info()["meta"]
        recorded = json.loads(meta["options"])
        progress.update("rebuilding the recorded workload")
        workload = Workload(ctx, dict(recorded, workload="mlp"))
        compiled = None
        args.reference_run = args.reference_fp32 = True
    info = package.info()
    if args.save_package:
        progress.update(f"saving {args.save_package}")
        package.save(args.save_package)
    winfo = workload.info()
    result = {"workload": "mlp", "device": info["profile"]["name"], "tiles": info["tiles"],
              "options": winfo["options"], "wall_seconds": wall,
              "package": {k: info[k] for k in ("code_bytes", "descriptor_bytes", "data_bytes", "segments")}}
    if compiled:
        result.update(estimate={"cycles": compiled["plan"]["cycles"], **compiled["estimate"]},
                      plan=compiled["plan"], support=compiled["package"])
    outcome = runner.run_checked(ctx, package, progress, args.profile_directory, result,
                                 args.reference_inferences)
    if outcome is None:
        return EXIT_FAULT, result
    run_result, outputs = outcome
    resident = result.get("resident")
    resident_ok = not resident or (resident["identical_outputs"] and resident["parameters_unchanged"])
    total_macs, rate = macs(winfo)
    ideal = total_macs / (info["tiles"] * info["profile"][rate])
    result.update(cycles=run_result["cycles"], ms=run_result["ms"], totals=run_result["totals"],
                  macs=total_macs, roofline_ratio=run_result["cycles"] / ideal)
    if args.dump_tensors:
        dump(args.dump_tensors, workload, outputs)
    if not args.reference_run:
        result["status"] = "RAN" if resident_ok else "FAIL"
        return (EXIT_OK if resident_ok else EXIT_CHECK_FAILED), result
    mode = "fp32" if args.reference_fp32 else "device"
    progress.update(f"{'FP32' if args.reference_fp32 else 'device-precision'} reference")
    begun = time.perf_counter()
    reference = workload.reference_run({"fp32": args.reference_fp32})
    wall["reference"] = time.perf_counter() - begun
    result["reference"] = reference
    checks = []
    for t in winfo["tensors"]:
        if t["role"] != "output":
            continue
        ref = workload.reference_output(t["name"])
        check = check_outputs(ctx, ref, outputs[t["name"]], t["dtype"], t["rows"], t["cols"], MIN_COSINE[mode])
        check["tensor"] = t["name"]
        checks.append(check)
        if args.dump_tensors:
            npy.write_npy(args.dump_tensors / f"{t['name']}.reference.npy", ref, "f32", (t["rows"], t["cols"]))
    result["checks"] = checks
    passed = all(c["passed"] for c in checks) and resident_ok
    result["status"] = "PASS" if passed else "FAIL"
    return (EXIT_OK if passed else EXIT_CHECK_FAILED), result


def report(result, out):
    o = result["options"]
    print(f"mlp on {result['device']} ({result['tiles']} tiles): batch {o.get('batch', 1)}, "
          f"{o.get('precision', 'fp8')}, {o.get('blocks', 1)} block(s), {o.get('tokens', 729)} tokens x "
          f"{o.get('channels', 1152)} -> {o.get('hidden', 4304)}", file=out)
    if "estimate" in result:
        e = result["estimate"]
        print(f"  estimate: {e['cycles']} cycles, peak {e['peak_bytes']} bytes on tile {e['peak_tile']} "
              f"(budget {e['budget']})", file=out)
        for op in result["plan"]["ops"]:
            grid = op.get("grid")
            where = f" grid {grid['rows']}x{grid['cols']}x{grid['reduction']} ({grid['candidates']} fit)" if grid else ""
            print(f"    op {op['op']} {op['kind']:<7} {op['output']:<12} {op['cycles']:>9} cycles "
                  f"{op['tile_bytes']:>8} bytes{where}", file=out)
    print(f"  simulated {result['cycles']} cycles ({result['ms']:.4f} ms), compute roofline ratio "
          f"{result['roofline_ratio']:.2f}", file=out)
    print("  wall: " + ", ".join(f"{k} {v:.2f} s" for k, v in result["wall_seconds"].items()), file=out)
    resident = result.get("resident")
    if resident:
        print(f"  {resident['inferences']} inferences after one upload: outputs "
              f"{'bit identical' if resident['identical_outputs'] else 'DIFFER'}, parameters "
              f"{'unchanged' if resident['parameters_unchanged'] else 'CHANGED'} (digest "
              f"{resident['parameter_digest_at_end'][:16]})", file=out)
    for c in result.get("checks", []):
        print(f"  {c['tensor']} against the {result['reference']['mode']} reference: min cosine {c['min_cosine']:.6f} (row {c['min_cosine_row']}), max abs "
              f"error {c['max_abs_error']:.6g}, {c['failed_rows']} failed rows", file=out)
    print(result["status"], file=out)
