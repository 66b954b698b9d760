"""The transformer workloads from the harness side: the SigLIP MLP (`mlp`)
and the SigLIP ViT (`vit`, and `vit-small` with 3 layers by default).  Their
flags (shared ones, MLP-only ones, ViT-only ones), compiling a workload (or
replaying a saved package, rebuilding the workload named and configured in
its metadata), running it on the device, the per-row reference check, the
compute roofline ratio (MACs of matmuls, attention and MAP pooling against
the AMP rate of each), tensor dumps and the report.  Geometry the user did
not give is left to the engine's defaults and read back from the workload.
"""
import argparse
import json
import resource
import time
from pathlib import Path

from . import (artifacts, failure, files, graphs, memory_report, models, native, npy, placement_report, runner,
               tolerances)
from .command import EXIT_CHECK_FAILED, EXIT_FAULT, EXIT_OK, UsageError, int_in, number_in, positive_int
from .native import Workload, check_outputs

WORKLOADS = ("mlp", "vit", "vit-small")
ATTENTION_MODES = ("auto", "flash", "materialized")
# Flags every transformer workload takes, a graph description's too (their defaults are the parser's).
SHARED = ("memory_budget", "search_budget", "catalogue_budget", "frontier_cap", "catalogue_group",
          "exchange_stream_words", "balance_streams", "exchange_rank", "search_seconds", "search_beam",
          "search_steps", "probe_capacity", "reference_run", "reference_fp32",
          "reference_inferences", "min_cosine", "atol", "rtol", "norm_tolerance",
          "check_ops", "inject", "dump_tensors", "compile_only", "memory_profile_directory", "placement_json",
          "export_graph", "export_onnx")
# The built-in workloads' shape and values (a description holds its own).
BUILT_IN = ("batch", "seed", "tokens", "channels", "hidden")
# Flags of one family, with the value they take when not given (None: the engine's default).
ONLY = {"mlp": {"precision": "fp8", "blocks": 1},
        "vit": {"layers": None, "heads": None, "head_dim": None, "input": None, "attention": "auto",
                "attention_key_bands": None},
        "graph": {"graph": None, "values": None, "model": None, "inputs": None, "expected": None, "precision": "fp8",
                  "seed": 0, "attention": "auto", "attention_key_bands": None}}
# The sources of a workload that is not built in (allowed with --package: the package's workload).
SOURCES = ("graph", "values", "model", "inputs", "expected")
FLAGS = SHARED + BUILT_IN + tuple(dict.fromkeys(name for flags in ONLY.values() for name in flags))
# The flags that shape the package (the rest check or report it).
BUILD_FLAGS = ("memory_budget", "search_budget", "catalogue_budget", "frontier_cap", "catalogue_group",
               "exchange_stream_words", "balance_streams", "exchange_rank", "search_seconds", "search_beam",
               "search_steps", "probe_capacity", "inject", "memory_profile_directory", "placement_json") + BUILT_IN + tuple(
    dict.fromkeys(name for flags in ONLY.values() for name in flags if name not in SOURCES))
# The output check's flags: they need the reference (--reference-run, or a --package replay).
CHECK_FLAGS = ("reference_fp32", "min_cosine", "atol", "rtol", "norm_tolerance")
# The flags that need a device run (refused with --compile-only).
RUN_FLAGS = ("reference_run", "check_ops", "reference_inferences", "dump_tensors", "profile_directory", "package",
             "trace")
AMP_RATES = {("f143", "f16"): "amp_macs_fp8", ("f143", "f32"): "amp_macs_fp8",
             ("f152", "f16"): "amp_macs_fp8", ("f152", "f32"): "amp_macs_fp8",
             ("f16", "f16"): "amp_macs_fp16_fp16", ("f16", "f32"): "amp_macs_fp16_fp32"}
# Attention and MAP pooling multiply FP16 operands into FP32.
ATTENTION_RATE = "amp_macs_fp16_fp32"


def family(workload):
    """'mlp', 'vit' (for vit and vit-small) or 'graph' (a graph description, --graph)."""
    return {"mlp": "mlp", "graph": "graph"}.get(workload, "vit")


def allowed(mine):
    """The flags a family takes."""
    return set(SHARED) | set(ONLY[mine]) | (set(BUILT_IN) if mine != "graph" else set())


def applies_to(name):
    """The workloads a transformer flag applies to, as the usage messages say it."""
    where = [what for mine, what in (("mlp", "--workload mlp"), ("vit", "--workload vit or vit-small"))
             if name in allowed(mine)]
    if name in allowed("graph"):
        where += [source for source, flags in (("--graph FILE", ("values",)),
                                               ("--model FILE", ("inputs", "expected", "precision", "seed")))
                  if name in flags] or ["--graph FILE or --model FILE"]
    return " and ".join(where)


MAX_BUDGET = 2**32 - 1  # budgets per tile are 32-bit byte counts
MAX_SEED = 2**63 - 1
MAX_STREAM_WORDS = 2**20  # the engine's limit on a stream wave


def budget(text):
    if text == "default":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of bytes or 'default', got '{text}'") from None
    if not 1 <= value <= MAX_BUDGET:
        raise argparse.ArgumentTypeError(f"expected a positive number of bytes at most {MAX_BUDGET}, got {value}")
    return value


cosine = number_in(-1.0, 1.0, "a number in [-1, 1]")
tolerance = number_in(0.0, float("1e308"), "a finite number >= 0")


def add_arguments(p):
    group = p.add_argument_group("mlp, vit and vit-small workloads")
    group.add_argument("--batch", type=int, choices=(1, 2, 4), default=1, help="images (default: 1)")
    group.add_argument("--memory-budget", type=budget, default=None, metavar="BYTES|default",
                       help="planner memory budget per tile (default: the profile's)")
    group.add_argument("--search-budget", type=budget, default=None, metavar="BYTES|default",
                       help="budget per tile the planner's search must fit (default: --memory-budget)")
    group.add_argument("--catalogue-budget", type=budget, default=None, metavar="BYTES|default",
                       help="budget per tile the candidate catalogue is built for: partitions with a larger "
                            "operand block are left out (default: --memory-budget)")
    group.add_argument("--frontier-cap", type=positive_int, default=None, metavar="N",
                       help="candidates kept per enumeration group and in each matmul's shortlist "
                            "(default: 32)")
    group.add_argument("--catalogue-group", type=positive_int, default=None, metavar="N",
                       help="partitions per enumeration group (default: 4096)")
    group.add_argument("--exchange-stream-words", type=int_in(1, MAX_STREAM_WORDS), default=None, metavar="N",
                       help="compact exchange scheduling: every tile receives in address order, its streams "
                            "taken in waves of N words, so its table rows shrink to 8-byte continuations; "
                            "per phase the schedule with the smallest largest table is kept (default: "
                            "latency-oriented scheduling)")
    group.add_argument("--balance-streams", action="store_true",
                       help="with --exchange-stream-words N: also try endpoint-balanced chunks of 4 N words, "
                            "kept where the phase gets shorter with no larger tables")
    group.add_argument("--exchange-rank", choices=("tables", "horizon"), default=None,
                       help="with --exchange-stream-words N: how each phase's schedules are ranked: the smallest "
                            "tables first (tables, the default) or the shortest horizon first (horizon: faster "
                            "packages, larger tables)")
    group.add_argument("--search-seconds", type=number_in(1e-3, 86400.0, "seconds in (0, 86400]"), default=None,
                       metavar="S",
                       help="after the first plan that fits, search whole candidate plans for S seconds (wall): "
                            "moves to each matmul's next fitting candidate, each attention op's other mode and "
                            "the other exchange modes, screened by the planner's estimate, the best few built "
                            "through the whole back end (in parallel, --threads) and judged by exact static "
                            "timing; result.json's plan_search says what it did (default: no search)")
    group.add_argument("--search-beam", type=int_in(1, 64), default=None, metavar="K",
                       help="with --search-seconds: candidates kept per step (default 1: greedy)")
    group.add_argument("--search-steps", type=int_in(1, 65536), default=None, metavar="N",
                       help="with --search-seconds: stop after N steps (then the search does not depend on "
                            "the machine's speed)")
    group.add_argument("--probe-capacity", action="store_true",
                       help="when no candidate plan places: place the last one again with 4 KiB, 8 KiB, ... "
                            "(up to 256 KiB) more SRAM per tile and say the smallest extra that places it "
                            "(placement only; no package is built)")
    group.add_argument("--seed", type=int_in(0, MAX_SEED), default=0, metavar="S",
                       help="seed of inputs and weights")
    group.add_argument("--compile-only", action="store_true",
                       help="plan, lower, schedule, place and package (with --save-package and "
                            "--memory-profile-directory) but do not run the device; result.json then holds the "
                            "estimate, the support sizes, the peaks per tile, the build's stage times and its "
                            "peak RSS")
    group.add_argument("--reference-run", action="store_true", help="check against the host reference")
    group.add_argument("--reference-fp32", action="store_true",
                       help="the reference computes in FP32 from the unquantized values; without it, at "
                            "device precision")
    group.add_argument("--min-cosine", type=cosine, default=None, metavar="C",
                       help="per-row cosine threshold of the output check (default: the reference mode's "
                            "and output type's; see --atol)")
    group.add_argument("--atol", type=tolerance, default=None, metavar="A",
                       help="elementwise bound |device - reference| <= A + R |reference| of the output "
                            "check, with the norm ratio bound beside it; defaults: "
                            + tolerances.help_text())
    group.add_argument("--rtol", type=tolerance, default=None, metavar="R",
                       help="the relative part R of the elementwise bound (default: see --atol)")
    group.add_argument("--norm-tolerance", type=tolerance, default=None, metavar="T",
                       help="the output check's bound on the norm ratio: |norm(device) / norm(reference) "
                            "- 1| <= T (default: see --atol)")
    group.add_argument("--inject", metavar="MUTATION", default=None,
                       help="tests only: one named mutation, a seeded bug of the compiler (or of the device's "
                            "memory events: memory-events-late, with --profile-directory), to see which check "
                            "catches it and what it names (`ipu-e2e-bench mutations --list` lists them)")
    group.add_argument("--check-ops", action="store_true",
                       help="run the package once more and check every op's output (each Repeat iteration "
                            "too) against the device-precision reference of that op from the device's own "
                            "inputs; names the first op that diverges, its element, tile and address ("
                            + tolerances.op_help_text() + ")")
    group.add_argument("--reference-inferences", type=positive_int, default=1, metavar="N",
                       help="serve N invocations after one initialize and one parameter upload: every "
                            "output must be bit identical and every parameter byte unchanged (digest)")
    group.add_argument("--dump-tensors", metavar="DIR", type=Path,
                       help="write inputs, parameters, outputs (and the reference) as .npy files")
    group.add_argument("--memory-profile-directory", metavar="DIR", type=Path,
                       help="write the planner's memory profiles (memory-<workload>-<serial>.json: "
                            "every finalist and, when no plan fits, the smallest rejected candidate) and "
                            "the final package's placement viewer (placement.html, which holds the whole "
                            "report)")
    group.add_argument("--placement-json", action="store_true",
                       help="keep the placement report as placement.json beside placement.html too (the "
                            "page holds the same report, compressed)")
    for name, what in (("tokens", "tokens per image (mlp, vit: 729)"),
                       ("channels", "width (mlp, vit: 1152; for vit it must equal heads x head-dim)"),
                       ("hidden", "MLP hidden width (mlp, vit: 4304)")):
        group.add_argument(f"--{name}", type=positive_int, default=None, metavar="N",
                           help=f"{what}; default: the workload's")
    graph = p.add_argument_group("graph descriptions")
    graph.add_argument("--graph", metavar="FILE", type=Path, default=None,
                       help="build the workload a graph description holds (JSON, as --export-graph writes it; "
                            "instead of --workload)")
    graph.add_argument("--values", metavar="DIR", type=Path, default=None,
                       help="with --graph: the folder of the .npy files of tensors whose values the description "
                            "marks given, one <tensor>.npy each (default: FILE's name with .values for .json)")
    graph.add_argument("--model", metavar="FILE", type=Path, default=None,
                       help="import an ONNX model (opsets 13-17) and build it (instead of --workload): its weights "
                            "take --precision (fp8: F143 weights and matmul inputs, as the built-in ViT; fp16); "
                            "an op the importer does not support exits 2 naming the node")
    graph.add_argument("--inputs", metavar="FILE", type=Path, nargs="+", default=None,
                       help="with --model: one .pb or .npy file per model input, in order, or an ONNX test case "
                            "folder (input_N.pb, with output_N.pb as the expected outputs); default: FILE.input.npy "
                            "beside the model (and FILE.expected.npy), else seeded normal values (--seed)")
    graph.add_argument("--expected", metavar="FILE", type=Path, nargs="+", default=None,
                       help="with --model: one .pb or .npy file per model output, checked against the device's "
                            "outputs with the FP32 reference's criteria")
    graph.add_argument("--export-onnx", metavar="DIR", type=Path, default=None,
                       help="write the workload as ONNX: DIR/model.onnx (opset 17, the Repeat as a Loop) and its "
                            "inputs as DIR/input_N.pb; --model DIR/model.onnx --inputs DIR builds the same package")
    graph.add_argument("--export-graph", metavar="FILE", type=Path, default=None,
                       help="write the workload's graph description to FILE (and given values beside it); "
                            "--graph FILE builds the same package")
    mlp = p.add_argument_group("mlp only")
    mlp.add_argument("--precision", choices=("fp8", "fp16"), default=None,
                     help="fp8: F143 inputs and weights (scale -2), FP16 results; fp16: all FP16 "
                          "(default: fp8)")
    mlp.add_argument("--blocks", type=positive_int, default=None, metavar="N",
                     help="MLP blocks chained through one Repeat (default: 1)")
    vit = p.add_argument_group("vit and vit-small only")
    vit.add_argument("--layers", type=positive_int, default=None, metavar="N",
                     help="encoder layers (default: the workload's, 27 for vit, 3 for vit-small)")
    vit.add_argument("--heads", type=positive_int, default=None, metavar="N",
                     help="attention heads (default: the workload's)")
    vit.add_argument("--head-dim", type=positive_int, default=None, metavar="N",
                     help="width of one head (default: the workload's)")
    vit.add_argument("--input", choices=("embeddings", "patches"), default=None,
                     help="what the host feeds: embeddings (x [tokens x channels], the default) or "
                          "patches (14x14x3 pixel values per token, [tokens x 588]: the patch projection "
                          "with its bias and the position embedding run on the device)")
    vit.add_argument("--attention", choices=ATTENTION_MODES, default=None,
                     help="attention implementation: flash (key blocks, running softmax), materialized "
                          "(whole score rows) or auto (the planner's choice; default)")
    vit.add_argument("--attention-key-bands", type=int_in(1, 4096), default=None, metavar="N",
                     help="flash attention split over N key bands (a unit per band, their states merged; "
                          "1: no split; default: the planner's choice)")


def check_flags(args, defaults):
    """Refuse the exchange-stress flags and the other family's flags; fill
    this family's defaults."""
    for name in ("exchange_pattern", "sources", "iterations"):
        if getattr(args, name) is not None:
            raise UsageError(f"--{name.replace('_', '-')} applies to --workload exchange-stress")
    ran = [name for name in RUN_FLAGS if getattr(args, name) != defaults[name]]
    if args.compile_only and ran:
        raise UsageError(f"--{ran[0].replace('_', '-')} needs a device run: it does not apply with --compile-only")
    given = [name for name in CHECK_FLAGS if getattr(args, name) != defaults[name]]
    if given and not args.reference_run and not args.package:
        raise UsageError(f"--{given[0].replace('_', '-')} sets the output check against the reference: it "
                         f"applies with --reference-run")
    mine = family(args.workload)
    given = [name for name in FLAGS if name not in allowed(mine) and getattr(args, name) != defaults[name]]
    if given:
        source = "--graph" if args.graph else "--model" if args.model else f"--workload {args.workload}"
        raise UsageError(f"--{given[0].replace('_', '-')} applies to {applies_to(given[0])}, not to {source}")
    if mine == "graph":
        for name, needs in (("precision", "model"), ("inputs", "model"), ("expected", "model"), ("seed", "model"),
                            ("values", "graph")):
            other = "model" if needs == "graph" else "graph"
            if getattr(args, name) != defaults[name] and getattr(args, needs) is None:
                raise UsageError(f"--{name} applies to {applies_to(name)}, not to --{other}")
    for name, value in ONLY[mine].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.placement_json and not args.memory_profile_directory:
        raise UsageError("--placement-json keeps the placement report that --memory-profile-directory DIR writes: "
                         "give that too")
    if args.balance_streams and args.exchange_stream_words is None:
        raise UsageError("--balance-streams needs --exchange-stream-words N (its chunks are 4 N words)")
    if (args.search_beam or args.search_steps) and not args.search_seconds:
        raise UsageError("--search-beam and --search-steps need --search-seconds S (the search's time budget)")
    if args.exchange_rank and args.exchange_stream_words is None:
        raise UsageError("--exchange-rank needs --exchange-stream-words N (it ranks the compact schedules)")


def options(args):
    """The workload options: the workload, batch and seed, and the geometry the user gave."""
    names = ("tokens", "channels", "hidden") + (
        ("precision", "blocks") if family(args.workload) == "mlp" else ("layers", "heads", "head_dim", "input"))
    given = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    return {"workload": args.workload, "batch": args.batch, "seed": args.seed, **given}


def geometry(info):
    """The workload's shape, read from its info JSON (so the engine's defaults show): the built-in
    workloads' figures, or for any other graph its inputs and outputs and the count of each op."""
    tensors = {t["name"]: t for t in info["tensors"]}
    if info["name"] not in WORKLOADS or "x" not in tensors or "w1" not in tensors:
        ops = {}
        for op in info["ops"]:
            ops[op["op"]] = ops.get(op["op"], 0) + 1
        shapes = {role: {t["name"]: [t["rows"], t["cols"]] for t in info["tensors"] if t["role"] == role}
                  for role in ("input", "output")}
        return {"inputs": shapes["input"], "outputs": shapes["output"], "ops": ops,
                "repeat": (info["repeat"] or {}).get("iterations", 1)}
    x, w1 = tensors["x"], tensors["w1"]
    shape = {"channels": x["cols"], "hidden": w1["cols"]}
    if info["name"] == "mlp":
        batch = info["options"].get("batch", 1)
        shape.update(batch=batch, tokens=x["rows"] // batch, blocks=w1["sequence"],
                     precision="fp8" if x["dtype"] == "f143" else "fp16")
    else:
        attention = next(op for op in info["ops"] if op["op"] == "attention")
        shape.update(batch=x["rows"] // attention["seq"], tokens=attention["seq"], layers=w1["sequence"],
                     heads=attention["heads"], head_dim=attention["head_dim"],
                     input="patches" if tensors.get("patches", {}).get("role") == "input" else "embeddings")
    return shape


def macs(info, profile):
    """(MACs, ideal cycles on one tile) summed over executions of matmuls,
    attention and MAP pooling, each at its AMP rate in the device profile."""
    tensors = {t["name"]: t for t in info["tensors"]}
    repeat = info.get("repeat") or {}
    total, cycles = 0, 0.0
    for index, op in enumerate(info["ops"]):
        if op["op"] == "matmul":
            a, b, c = tensors[op["inputs"][0]], tensors[op["inputs"][1]], tensors[op["output"]]
            count, rate = a["rows"] * a["cols"] * b["cols"], AMP_RATES[(a["dtype"], c["dtype"])]
        elif op["op"] in ("attention", "map_pool"):
            # Scores Q K^T and the weighted sum P V: per query, 2 x keys x width.
            keys = tensors[op["inputs"][-1]]["rows"]
            queries = keys if op["op"] == "attention" else \
                keys // op["seq"] * tensors[op["inputs"][0]]["rows"]
            count, rate = 2 * queries * op["seq"] * op["heads"] * op["head_dim"], ATTENTION_RATE
        else:
            continue
        in_body = repeat and repeat["first_op"] <= index < repeat["first_op"] + repeat["op_count"]
        count *= repeat["iterations"] if in_body else 1
        total += count
        cycles += count / profile[rate]
    return total, cycles


def dump(directory, workload, outputs):
    """--dump-tensors DIR: every input, parameter and output as DIR/<file stem>.npy, and tensors.json
    naming the tensor of each stem (files.file_name: a name never becomes a path)."""
    info = workload.info()
    dumped = [t for t in info["tensors"] if t["role"] in ("input", "parameter", "output")]
    for t in dumped:
        shape = (t["sequence"], t["rows"], t["cols"]) if t["sequence"] > 1 else (t["rows"], t["cols"])
        data = outputs[t["name"]] if t["role"] == "output" else workload.device_bytes(t["name"])
        npy.write_npy(directory / files.file_name(t["name"], ".npy"), data, t["dtype"], shape)
    artifacts.write_json(directory / files.MANIFEST, files.manifest([t["name"] for t in dumped]))


def search_options(args):
    """The planner's search and the exchange scheduling options the user gave (compile option names)."""
    return {"search_budget": args.search_budget, "catalogue_budget": args.catalogue_budget,
            "frontier_cap": args.frontier_cap, "catalogue_group": args.catalogue_group,
            "exchange_stream_words": args.exchange_stream_words,
            "balance_streams": args.balance_streams or None, "exchange_rank": args.exchange_rank,
            "search_seconds": args.search_seconds, "search_beam": args.search_beam,
            "attention_key_bands": getattr(args, "attention_key_bands", None),
            "search_steps": args.search_steps,
            "probe_capacity": args.probe_capacity or None}


def memory_pages(directory, names, progress, reports):
    """Pages beside the memory profiles a compile wrote, linked to the run's
    other reports; returns their JSON paths."""
    progress.update("writing the memory profile pages")
    reports.chosen_profile(directory, names)
    return memory_report.write_pages(directory, names, reports.links)


def device_mutation(ctx, name):
    """Whether mutation `name` is the device's own (stage "device"): it is
    configured on the device, not compiled."""
    return any(m["name"] == name and m["stage"] == "device" for m in native.mutations(ctx)) if name else False


def check_streams(info, winfo, path):
    """Before a replay runs: every stream of the package has the size of the workload tensor of its name
    (all members), so a package that does not hold its workload's streams is refused naming file and stream."""
    tensors = {t["name"]: t for t in winfo["tensors"]}
    for s in info["streams"]:
        t = tensors.get(s["name"])
        if t is None:
            raise UsageError(f"--package {path}: stream '{s['name']}' ({s['direction']}) is no tensor of the "
                             f"recorded workload {winfo['name']}")
        want = t["rows"] * t["cols"] * t["sequence"] * native.DTYPE_BYTES[t["dtype"]]
        if s["size"] != want:
            raise UsageError(f"--package {path}: {s['direction']} stream '{s['name']}' holds {s['size']:,} bytes; "
                             f"the recorded workload's {t['role']} '{t['name']}' is {t['rows']} x {t['cols']}"
                             f"{' x ' + str(t['sequence']) if t['sequence'] > 1 else ''} {t['dtype']}, "
                             f"{want:,} bytes")


def replayed_workload(ctx, args, name, peeked, progress):
    """The workload a saved package records (the one --graph or --model describes, which must be it), its
    streams checked against the file's (Package.peek_file) before the package is loaded."""
    meta, where = peeked["meta"], f"--package {args.package}"
    try:
        recorded = json.loads(meta["options"])
        if not isinstance(recorded, dict) or not isinstance(meta["workload"], str):
            raise ValueError
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{where}: its metadata's 'workload' must be a name and 'options' a JSON object "
                         f"as text") from None
    progress.update(f"rebuilding the recorded {meta['workload']} workload")
    if name == "graph":
        workload = source_workload(ctx, args)
        described, given = workload.info(), f"--graph {args.graph}" if args.graph else f"--model {args.model}"
        if (described["name"], described["options"]) != (meta["workload"], recorded):
            raise UsageError(f"{given} gives workload '{described['name']}' with options "
                             f"{json.dumps(described['options'])}; the package {args.package} was built from "
                             f"'{meta['workload']}' with {json.dumps(recorded)}")
    else:
        workload = Workload(ctx, dict(recorded, workload=meta["workload"]))
    check_streams(peeked, workload.info(), args.package)
    return workload


def source_workload(ctx, args):
    """The workload of --graph FILE or --model FILE (kept on args for the expected-output check)."""
    if args.model:
        args.imported = models.Model(ctx, args)
        return args.imported.workload
    return graphs.workload(ctx, args.graph, args.values, args.value_limit)


def execute(ctx, args, profile, package, progress, started, reports):
    wall, memory_profiles = {}, []
    device_inject = args.inject if device_mutation(ctx, args.inject) else None
    if device_inject and not reports.run_profile:
        raise UsageError(f"--inject {device_inject} mutates the device's memory events: it needs "
                         f"--profile-directory DIR (the run records them only then)")
    attention = args.attention if family(args.workload) != "mlp" else None
    if package is None:
        progress.update("generating inputs and weights")
        workload = source_workload(ctx, args) if family(args.workload) == "graph" else Workload(ctx, options(args))
        if args.export_graph:
            progress.update(f"writing {args.export_graph}")
            graphs.export(workload, args.export_graph)
        if args.export_onnx:
            progress.update(f"writing {args.export_onnx / 'model.onnx'}")
            models.export_onnx(workload, args.export_onnx)
        wall["workload"] = time.perf_counter() - started
        if getattr(args, "imported", None):
            wall["import"] = args.imported.import_seconds
        progress.update("compiling")
        placement = None
        if args.memory_profile_directory:
            placement = args.memory_profile_directory / "placement.json"
        try:
            package, compiled = workload.compile(profile, args.memory_budget,
                                                 inject=None if device_inject else args.inject,
                                                 placement_report=placement, attention=attention,
                                                 memory_profiles=args.memory_profile_directory,
                                                 search=search_options(args))
        except native.PlanRejected as error:
            # A search that found no plan still leaves its profiles and their pages.
            wall["compile"] = time.perf_counter() - started - wall["workload"]
            written = memory_pages(args.memory_profile_directory, error.rejection["memory_profiles"], progress,
                                   reports) if args.memory_profile_directory else []
            return EXIT_CHECK_FAILED, rejected(workload, profile, error, wall, written)
        except native.IpuError as error:
            if error.status != native.INTERNAL:
                raise
            # A stage found the compiler's own product inconsistent: a compiler bug, not a rejection.
            wall["compile"] = time.perf_counter() - started - wall["workload"]
            winfo = workload.info()
            return EXIT_FAULT, {"workload": winfo["name"], "device": profile["name"], "tiles": profile["tiles"],
                                "options": winfo["options"], "geometry": geometry(winfo), "wall_seconds": wall,
                                "status": "INCONSISTENT", "message": error.message}
        wall.update({f"compile_{k}": v for k, v in compiled["wall_seconds"].items()})
        if args.memory_profile_directory:
            memory_profiles = memory_pages(args.memory_profile_directory, compiled["memory_profiles"], progress,
                                           reports)
        if placement:
            progress.update("writing the placement viewer")
            placement_report.write_placement_html(placement, reports.placement, reports.links(reports.placement))
            if not args.placement_json:
                placement.unlink()  # the page holds the report (placement_report.load reads it)
    else:
        workload = args.replayed
        if args.export_graph:
            graphs.export(workload, args.export_graph)
        compiled = attention = None
        args.reference_run = args.reference_fp32 = True
    info = package.info()
    progress.update("static timing")
    begun = time.perf_counter()
    timing, untimed = static_timing(package)
    wall["static_timing"] = time.perf_counter() - begun
    if args.save_package:
        progress.update(f"saving {args.save_package}")
        package.save(args.save_package)
    winfo = workload.info()
    result = {"workload": winfo["name"], "device": info["profile"]["name"], "tiles": info["tiles"],
              "options": winfo["options"], "geometry": geometry(winfo), "wall_seconds": wall,
              "package": {k: info[k] for k in ("code_bytes", "descriptor_bytes", "data_bytes", "segments")}}
    if getattr(args, "imported", None):
        result["model_files"] = args.imported.files  # the inputs and expected outputs the model ran with
    if attention:
        result["attention"] = attention
    if memory_profiles:
        result["memory_profiles"] = [p.name for p in memory_profiles]
    total_macs, ideal = macs(winfo, info["profile"])
    if timing:
        result["static_timing"] = dict({k: timing[k] for k in ("cycles", "ms", "totals")},
                                       roofline_ratio=timing["cycles"] * info["tiles"] / ideal if ideal else None)
    else:
        result["static_timing"] = {"error": untimed}
    if compiled:
        result.update(estimate={"cycles": compiled["plan"]["cycles"], **compiled["estimate"]},
                      plan=compiled["plan"], support=compiled["package"], search=compiled["attempts"])
        if compiled.get("plan_search"):
            result["plan_search"] = compiled["plan_search"]
        if attention:
            result["attention_choice"] = compiled["attention"]
    if args.compile_only:
        if not timing:  # the compiler's own package has a record the device cannot run
            result.update(status="INCONSISTENT", message=f"the compiled package cannot run: {untimed}")
            return EXIT_FAULT, result
        if compiled:
            result["op_cycles"] = op_cycles(compiled["plan"], winfo.get("repeat"), timing["steps"], "static")
        return compile_only(result, compiled)
    outcome = runner.run_checked(ctx, package, progress, reports, result,
                                 args.reference_inferences, device_inject, timing)
    if outcome is None:
        return EXIT_FAULT, result
    run_result, outputs = outcome
    resident = result.get("resident")
    resident_ok = not resident or (resident["identical_outputs"] and resident["parameters_unchanged"])
    result.update(cycles=run_result["cycles"], ms=run_result["ms"], totals=run_result["totals"],
                  macs=total_macs, roofline_ratio=run_result["cycles"] * info["tiles"] / ideal if ideal else None)
    if compiled:
        result["op_cycles"] = op_cycles(compiled["plan"], winfo.get("repeat"), run_result["steps"])
    difference = timing_difference(timing, run_result) if timing else \
        {"field": "cycles", "static": untimed, "device": run_result["cycles"]}
    result["static_timing"].update(equals_device=difference is None, difference=difference)
    timing_ok = difference is None
    timeline_ok = result.get("memory_timeline_check", {}).get("passed", True)
    if args.dump_tensors:
        dump(args.dump_tensors, workload, outputs)
    expected = getattr(args, "imported", None)
    expected_checks = expected.check_expected(ctx, outputs, winfo, args, producing_op) if expected else []
    expected_ok = all(c["passed"] for c in expected_checks)
    if expected_checks:
        result["checks"] = expected_checks
    ops_ok = expected_ok
    if args.check_ops:
        progress.update("checking every op")
        begun = time.perf_counter()
        result["op_check"] = workload.check_ops(package, tolerances.op_criteria())
        wall["op_check"] = time.perf_counter() - begun
        ops_ok = result["op_check"]["passed"] and expected_ok
    if not args.reference_run:
        ok = resident_ok and ops_ok and timing_ok and timeline_ok
        result["status"] = ("PASS" if expected_checks else "RAN") if ok else "FAIL"
        return (EXIT_OK if ok else EXIT_CHECK_FAILED), result
    mode = "fp32" if args.reference_fp32 else "device"
    progress.update(f"{'FP32' if args.reference_fp32 else 'device-precision'} reference")
    begun = time.perf_counter()
    reference = workload.reference_run(reference_options(args.reference_fp32, info))
    wall["reference"] = time.perf_counter() - begun
    result["reference"] = reference
    checks = []
    for t in winfo["tensors"]:
        if t["role"] != "output":
            continue
        ref = workload.reference_output(t["name"])
        check = check_outputs(ctx, ref, outputs[t["name"]], t["dtype"], t["rows"], t["cols"],
                              tolerances.criteria(mode, t["dtype"], args.min_cosine, args.atol, args.rtol,
                                                  args.norm_tolerance))
        check["tensor"] = t["name"]
        check["op"] = producing_op(winfo, t["name"])
        checks.append(check)
        if args.dump_tensors:
            npy.write_npy(args.dump_tensors / files.file_name(t["name"], ".reference.npy"), ref, "f32", (t["rows"], t["cols"]))
    if expected and args.reference_fp32:
        checks += expected.check_reference(ctx, workload)
    result["checks"] = expected_checks + checks
    passed = all(c["passed"] for c in checks) and resident_ok and ops_ok and timing_ok and timeline_ok
    result["status"] = "PASS" if passed else "FAIL"
    return (EXIT_OK if passed else EXIT_CHECK_FAILED), result


def rejected(workload, profile, error, wall, memory_profiles):
    """The result of a build no candidate plan fits: the library's rejection
    record (the stage, the reason, the budget, the search, the smallest
    candidate's peak: the least any candidate needs) and the profiles that
    show it."""
    winfo = workload.info()
    smallest = error.rejection.get("smallest_candidate")
    rejection = dict(error.rejection, seconds=wall["compile"],
                     lower_bound_bytes=smallest["peak_bytes"] if smallest else None)
    result = {"workload": winfo["name"], "device": profile["name"], "tiles": profile["tiles"],
              "options": winfo["options"], "geometry": geometry(winfo), "wall_seconds": wall,
              "status": "REJECTED", "rejection": rejection}
    if memory_profiles:
        result["memory_profiles"] = [p.name for p in memory_profiles]
    return result


def rejection_lines(result, out):
    """Why no plan was built, where the smallest candidate peaks, and what shows it."""
    r = result["rejection"]
    print(f"  rejected by the {'planner' if r['stage'] == 'plan' else 'placement'} after "
          f"{r['search']['attempts']} candidate plan(s) in {r['seconds']:.2f} s, budget {r['budget']:,} bytes "
          f"per tile:", file=out)
    print(f"    {r['reason']}", file=out)
    smallest = r.get("smallest_candidate")
    if smallest:
        print(f"  the smallest candidate needs {smallest['peak_bytes']:,} bytes on tile {smallest['peak_tile']} "
              f"(at phase {smallest['peak_phase']}): no candidate of this search needs less", file=out)
    names = result.get("memory_profiles")
    if names:
        print(f"  memory profiles: {', '.join(names)} (each with a .html page)", file=out)


def static_timing(package):
    """(timing, None), or (None, why) when the package has a record the
    device could not run (the device's run then says where it faults)."""
    try:
        return package.timing(), None
    except native.IpuError as error:
        if error.status != native.MALFORMED:
            raise
        return None, error.message


def timing_difference(timing, run):
    """None when the static timing is the device run's, field for field
    (cycles, totals, every step, every tile's compute and wait); else where
    they first differ."""
    for key in ("cycles", "totals"):
        if timing[key] != run[key]:
            return {"field": key, "static": timing[key], "device": run[key]}
    if len(timing["steps"]) != len(run["steps"]):
        return {"field": "steps", "static": len(timing["steps"]), "device": len(run["steps"])}
    for ours, theirs in zip(timing["steps"], run["steps"]):
        # tile_compute: the traced tiles' cycles a trace asks the device for; static timing has no such record.
        for key in sorted((set(ours) | set(theirs)) - {"tile_compute"}):
            if ours.get(key) != theirs.get(key):
                return {"field": f"steps[{theirs['index']}].{key}", "static": ours.get(key),
                        "device": theirs.get(key)}
    for key in ("compute", "wait"):
        if timing["tiles"][key] != run["tiles"][key]:
            tile = next(t for t, (a, b) in enumerate(zip(timing["tiles"][key], run["tiles"][key])) if a != b)
            return {"field": f"tiles.{key}[{tile}]", "static": timing["tiles"][key][tile],
                    "device": run["tiles"][key][tile]}
    return None


def op_cycles(plan, repeat, steps, source="device"):
    """Per compiler op: the planner's estimate beside the cycles the device
    (source "device") or the static timing ("static", the same steps)
    charged to it (a step's compute, sync and control cycles to the op its
    compute phase lowers, its exchange cycles to the op its exchange
    lowers), over every execution (Repeat iterations included), and the
    bytes its exchange phases sent and received.  Host transfers are apart,
    as the planner's estimate keeps them: their cycles (with their sync)
    under "host", charged to the op that homes their tensor."""
    charged, host, sent, received = {}, {}, {}, {}
    for s in steps:
        op, exchange_op = s["compiler_op"], s["exchange_compiler_op"]
        if op is not None and s["kind"] in ("host_in", "host_out"):
            host[op] = host.get(op, 0) + s["cycles"]
        elif op is not None:
            charged[op] = charged.get(op, 0) + s["cycles"] - s["exchange"]
        if exchange_op is not None:
            charged[exchange_op] = charged.get(exchange_op, 0) + s["exchange"]
            sent[exchange_op] = sent.get(exchange_op, 0) + s["sent_bytes"]
            received[exchange_op] = received.get(exchange_op, 0) + s["received_bytes"]
    body = range(repeat["first_op"], repeat["first_op"] + repeat["op_count"]) if repeat else range(0)
    rows = []
    for op in plan["ops"]:
        i = op["op"]
        executions = repeat["iterations"] if i in body else 1
        rows.append({"op": i, "kind": op["kind"], "output": op["output"], "executions": executions,
                     "estimate": op["cycles"] * executions, source: charged.get(i, 0), "host": host.get(i, 0),
                     "sent_bytes": sent.get(i, 0), "received_bytes": received.get(i, 0)})
    return rows


def search_lines(result, out):
    """What the plan search did: its steps, candidates and the moves it took."""
    s = result.get("plan_search")
    if not s:
        return
    print(f"  plan search (beam {s['beam']}, {s['threads']} threads): {s['first_cycles']:,} -> {s['cycles']:,} cycles "
          f"(x{s['cycles'] / s['first_cycles']:.3f}) in {s['steps']} steps, {s['wall_seconds']:.1f} s; "
          f"{s['screened']:,} screened, {s['built']:,} built, {s['dropped']:,} dropped; stopped: {s['stopped']}",
          file=out)
    for m in s["accepted"]:
        print(f"    step {m['step']}: {m['move']}: {m['from_cycles']:,} -> {m['cycles']:,} cycles", file=out)


def timing_lines(result, out):
    """The static timing (against the device's when the package ran), the
    estimate per op against it, host transfers apart on both sides, and the
    bytes exchanged."""
    timing = result.get("static_timing")
    if not timing:
        return
    if "error" in timing:
        print(f"  static timing: none, the package has a record the device cannot run: {timing['error']}", file=out)
    elif "equals_device" not in timing:
        print(f"  static timing: {timing['cycles']:,} cycles ({timing['ms']:.4f} ms){roofline(timing)}", file=out)
    elif timing["equals_device"]:
        print(f"  static timing: {timing['cycles']:,} cycles, equal to the device's in every step", file=out)
    else:
        d = timing["difference"]
        print(f"  static timing DIFFERS from the device at {d['field']}: static {d['static']}, device {d['device']}",
              file=out)
    rows = result.get("op_cycles")
    if not rows:
        return
    source = "device" if "device" in rows[0] else "static"
    against = "the device" if source == "device" else "the static timing"
    worst = max(rows, key=lambda r: (abs(r[source] - r["estimate"]), -r["op"]))
    host = sum(r["host"] for r in rows)
    print(f"  estimate against {against}, per op: {sum(r['estimate'] for r in rows):,} against "
          f"{sum(r[source] for r in rows):,} cycles; host transfers {result['plan']['host_cycles']:,} against "
          f"{host:,}; furthest op {worst['op']} {worst['kind']} {worst['output']}: {worst['estimate']:,} against "
          f"{worst[source]:,}", file=out)
    sent, received = sum(r["sent_bytes"] for r in rows), sum(r["received_bytes"] for r in rows)
    if sent:
        print(f"  exchanged: {sent:,} bytes sent, {received:,} received (fan-out {received / sent:.2f})", file=out)


def compile_only(result, compiled):
    """A build without a run: its stage times, peak RSS and per-tile peaks."""
    result["build"] = {"seconds": sum(compiled["wall_seconds"].values()), "stages": compiled["wall_seconds"],
                       "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    result["tile_peaks"] = compiled["tiles"]
    result["status"] = "COMPILED"
    return EXIT_OK, result


def reference_options(fp32, package_info):
    """The reference's options: FP32, or device precision computing attention
    in the modes the package's plan chose (a materialized one's P V in its
    query bands) and matmuls in its blocks (the package's meta records
    them)."""
    if fp32:
        return {"fp32": True}
    meta = package_info["meta"]
    return {"fp32": False, **{key: meta.get(key, {}) for key in ("attention", "attention_bands", "matmuls")}}


def producing_op(winfo, tensor):
    """'op 5 copy y': the op whose output the tensor is, as packages name ops."""
    for i, op in enumerate(winfo["ops"]):
        if op["output"] == tensor:
            return f"op {i} {op['op']} {tensor}"
    return None


def attention_of(op):
    """(mode, details) of an attention or MAP pooling plan op: "flash" or
    "materialized", and the rest of its "attention" object (query bands,
    chunk rows)."""
    details = dict(op["attention"])
    return details.pop("mode"), details


def planned_attention(result):
    """The attention mode the plan chose per op kind (attention, map_pool)."""
    return {op["kind"]: attention_of(op)[0] for op in result.get("plan", {}).get("ops", []) if "attention" in op}


def summary(result):
    """The first report line: the workload, the device and the geometry."""
    g = result["geometry"]
    if "ops" in g:
        shapes = ", ".join(f"{name} {rows}x{cols}" for name, (rows, cols) in g["inputs"].items())
        ops = ", ".join(f"{count} {kind}" for kind, count in g["ops"].items())
        repeat = f", {g['repeat']} iterations of its Repeat" if g["repeat"] > 1 else ""
        return (f"{result['workload']} (graph description) on {result['device']} ({result['tiles']} tiles): "
                f"inputs {shapes or 'none'}; ops {ops}{repeat}")
    head = f"{result['workload']} on {result['device']} ({result['tiles']} tiles): batch {g['batch']}, "
    if "blocks" in g:
        return head + (f"{g['precision']}, {g['blocks']} block(s), {g['tokens']} tokens x {g['channels']} "
                       f"-> {g['hidden']}")
    line = head + (f"{g['layers']} layers, {g['heads']} heads x {g['head_dim']}, {g['tokens']} tokens x "
                   f"{g['channels']} -> {g['hidden']}")
    if g.get("input") == "patches":
        line += ", from pixel patches"
    if "attention" in result:
        planned = planned_attention(result)
        line += f", attention {result['attention']}"
        if set(planned.values()) - {result["attention"]}:
            line += " (planned: " + ", ".join(f"{kind} {mode}" for kind, mode in planned.items()) + ")"
    return line


def roofline(figures):
    """', compute roofline ratio R' (nothing for a graph without matmuls, attention or pooling)."""
    ratio = figures.get("roofline_ratio")
    return f", compute roofline ratio {ratio:.2f}" if ratio is not None else ""


def check_line(c):
    """One output check: each criterion's figure against its bound, and the
    element that broke the elementwise bound worst."""
    worst = c.get("worst_element")
    line = (f"min cosine {c['min_cosine']:.6f} (row {c['min_cosine_row']}; >= {c['min_cosine_threshold']:g}), "
            f"{c['failed_rows']} failed rows; max abs error {c['max_abs_error']:.6g}, "
            f"{c['elementwise_failures']} elements over {c['atol']:g} + {c['rtol']:g} |r|")
    if c["elementwise_failures"] and worst:
        line += (f" (worst: row {worst['row']}, column {worst['col']}: expected {worst['expected']:.6g}, got "
                 f"{worst['got']:.6g}, error {worst['abs_error']:.3g} > {worst['bound']:.3g})")
    ratio = c.get("norm_ratio")
    line += f"; norm ratio {ratio:.5f}" if ratio is not None else "; norm ratio undefined"
    return line + f" (1 +- {c['norm_tolerance']:g})"


def timeline_line(c):
    """The run-time memory timeline against its allocation table, in one line."""
    if c["passed"]:
        return f"  memory timeline: every tile's peak of {c['tiles']} equals its allocation table's"
    m = c["first_mismatch"]
    line = (f"  memory timeline: tile {m['tile']} peaks at {m['event_peak_bytes']:,} bytes in the device's memory "
            f"events but at {m['table_peak_bytes']:,} in its allocation table (phase {m['table_peak_phase']})")
    a = m.get("latest_begun")
    if a:
        made = f", made by {a['op']}" if a["op"] else ""
        line += (f"; the last life begun there: '{a['name']}'{made}, at 0x{a['address']:X} on tile {m['tile']}, "
                 f"{a['size']:,} bytes, phases {a['first_phase']}..{a['last_phase'] if a['last_phase'] >= 0 else 'end'}")
    return line


def report(result, out):
    print(summary(result), file=out)
    if result["status"] == "REJECTED":
        rejection_lines(result, out)
        print(result["status"], file=out)
        return
    if result["status"] == "INCONSISTENT" and "estimate" not in result:
        print(f"  {result['message']}", file=out)
        print(result["status"], file=out)
        return
    if "estimate" in result:
        e = result["estimate"]
        print(f"  estimate: {e['cycles']:,} cycles, peak {e['peak_bytes']:,} bytes on tile {e['peak_tile']} "
              f"(search budget {e['search_budget']:,}, {len(result['search']) + 1} candidate plan(s))", file=out)
        for op in result["plan"]["ops"]:
            grid = op.get("grid")
            cat = op.get("catalogue")
            serial = f" in {grid['serial']} serial pieces" if grid and grid.get("serial", 1) > 1 else ""
            where = f" grid {grid['rows']}x{grid['cols']}x{grid['reduction']}{serial} ({cat['retained']} retained " \
                    f"of {cat['enumerated']}, {cat['fit']} fit)" if grid else ""
            if "attention" in op:
                mode, details = attention_of(op)
                where += f", {mode} attention" + "".join(f", {k.replace('_', ' ')} {v}" for k, v in details.items())
            print(f"    op {op['op']:<3} {op['kind']:<9} {op['output']:<16} {op['cycles']:>11,} cycles "
                  f"{op['tile_bytes']:>9,} bytes{where}", file=out)
    names = result.get("memory_profiles")
    if names:
        shown = ", ".join(names) if len(names) <= 3 else f"{names[0]} .. {names[-1]}"
        print(f"  memory profiles: {len(names)} ({shown}, each with a .html page)", file=out)
    if "support" in result:
        s = result["support"]
        print(f"  support per tile at most: code {s['code_bytes']:,} bytes, generated programs {s['program_bytes']:,}, "
              f"exchange tables {s['exchange_table_bytes']:,}; tensor bytes available at least "
              f"{s['tensor_bytes_available']:,} per tile", file=out)
    if "build" in result:
        b, peaks = result["build"], result["tile_peaks"]
        fullest = max(range(len(peaks["peak_bytes"])), key=peaks["peak_bytes"].__getitem__)
        print(f"  compiled only: build {b['seconds']:.2f} s ("
              + ", ".join(f"{k} {v:.2f} s" for k, v in b["stages"].items())
              + f"), peak RSS {b['peak_rss_bytes'] / 2**20:.0f} MiB; "
                f"fullest tile {fullest}: {peaks['peak_bytes'][fullest]:,} bytes live at its peak, placed up to "
                f"{peaks['high_water'][fullest]:,} bytes", file=out)
    elif "cycles" in result:
        print(f"  simulated {result['cycles']:,} cycles ({result['ms']:.4f} ms){roofline(result)}", file=out)
    search_lines(result, out)
    timing_lines(result, out)
    print("  wall: " + ", ".join(f"{k} {v:.2f} s" for k, v in result["wall_seconds"].items()), file=out)
    resident = result.get("resident")
    if resident:
        print(f"  {resident['inferences']} inferences after one upload: outputs "
              f"{'bit identical' if resident['identical_outputs'] else 'DIFFER'}, parameters "
              f"{'unchanged' if resident['parameters_unchanged'] else 'CHANGED'} (digest "
              f"{resident['parameter_digest_at_end'][:16]})", file=out)
    if resident and resident.get("first_changed_parameter"):
        p = resident["first_changed_parameter"]
        print(f"  first changed parameter: {p.get('name')} (read by {p.get('op')}) on tile {p['tile']} at "
              f"[0x{p['address']:X}, 0x{p['address'] + p['size']:X})", file=out)
    for c in result.get("checks", []):
        against = f"the expected '{c['model_output']}'" if c.get("against") == "expected" else \
            f"the {result['reference']['mode']} reference"
        what = "the fp32 reference" if c.get("reference") else f"{c['tensor']} ({c.get('op')})"
        print(f"  {what} against {against}: {check_line(c)}", file=out)
    if "op_check" in result:
        print("\n".join(failure.divergence_lines(result["op_check"])), file=out)
    timeline = result.get("memory_timeline_check")
    if timeline:
        print(timeline_line(timeline), file=out)
    print(result["status"], file=out)
