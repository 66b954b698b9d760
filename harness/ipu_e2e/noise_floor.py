"""The output check's noise floor: how far correct plans' outputs sit from
the reference.  Every case is a correct plan (no injected fault): the MLP in
FP8 and FP16, the ViT with flash and materialized attention, batches 1 and
2, on 16, 64, 96 and 1472 tiles, at the default budget and at tighter ones.
Each is compiled, run once and compared with both references ("device":
computing as the device does, "fp32": FP32 from the unquantized values),
and every op output is checked alone (ipu_check_ops).  Per reference mode and output dtype the floor is the worst figure over every
case: the lowest row cosine, the largest atol the elementwise bound needs at
the default rtol, the largest departure of the norm ratio from 1; for the
per-op check, the lowest op cosine and the largest atol over RMS an op
needed.  The thresholds that floor supports (the worst figure times a
factor, never tighter than an allowance: tolerances.MARGINS) are set beside
the defaults in use; a default looser than the floor's threshold
("covered") never fails a plan like these.  The per-op check is exact
(tolerances.OP_DEFAULTS): it is covered when no op of any plan needed any
tolerance.
"""
import time

from . import runner, tolerances, transformer
from .native import Workload, check_outputs

SMALL_VIT = {"workload": "vit", "tokens": 20, "heads": 4, "head_dim": 8, "hidden": 40, "layers": 2}
SMALL_MLP = {"workload": "mlp", "tokens": 40, "channels": 64, "hidden": 96}
WIDE_MLP = {"workload": "mlp", "tokens": 96, "channels": 128, "hidden": 256, "blocks": 2}


def cases(full=True):
    """The plans: (name, tiles, workload options, compile options)."""
    out = []
    for tiles in (16, 64, 96):
        for batch in (1, 2):
            for precision in ("fp8", "fp16"):
                for base in (SMALL_MLP, WIDE_MLP):
                    options = {**base, "batch": batch, "precision": precision, "seed": tiles + batch}
                    out.append((f"mlp-{base['tokens']}-{precision}-b{batch}-t{tiles}", tiles, options, {}))
            for attention in ("flash", "materialized"):
                options = {**SMALL_VIT, "batch": batch, "seed": tiles * 3 + batch}
                out.append((f"vit-tiny-{attention}-b{batch}-t{tiles}", tiles, options, {"attention": attention}))
    for budget in (131072, 65536):
        options = {**WIDE_MLP, "batch": 2, "precision": "fp8", "seed": 5}
        out.append((f"mlp-96-fp8-b2-t16-budget{budget // 1024}k", 16, options, {"memory_budget": budget}))
        options = {**SMALL_VIT, "batch": 2, "seed": 9}
        out.append((f"vit-tiny-auto-b2-t16-budget{budget // 1024}k", 16, options, {"memory_budget": budget}))
    for attention in ("flash", "materialized"):
        deeper = {**SMALL_VIT, "layers": 3, "batch": 2, "seed": 4}
        out.append((f"vit-tiny-3layers-{attention}-b2-t96", 96, deeper, {"attention": attention}))
        for tiles in (64, 96) + ((1472,) if full else ()):
            out.append((f"vit-small-{attention}-t{tiles}", tiles, {"workload": "vit-small"}, {"attention": attention}))
    if full:
        for batch in (1, 2):
            out.append((f"mlp-full-fp8-b{batch}-t1472", 1472, {"workload": "mlp", "batch": batch}, {}))
        out.append(("mlp-full-fp16-b1-t1472", 1472, {"workload": "mlp", "precision": "fp16"}, {}))
    return out


def measure(ctx, profile_for, case):
    """One plan: compile, run, check against both references; returns its record."""
    name, tiles, options, compile_options = case
    begun = time.perf_counter()
    workload = Workload(ctx, options)
    try:
        package, _ = workload.compile(profile_for(tiles), **compile_options)
        _, outputs, _ = runner.run(ctx, package)
        record = {"name": name, "tiles": tiles, "options": options, "compile": compile_options, "checks": []}
        info = package.info()
        for mode in ("device", "fp32"):
            workload.reference_run(transformer.reference_options(mode == "fp32", info))
            for t in workload.info()["tensors"]:
                if t["role"] != "output":
                    continue
                criteria = tolerances.criteria(mode, t["dtype"])
                c = check_outputs(ctx, workload.reference_output(t["name"]), outputs[t["name"]], t["dtype"],
                                  t["rows"], t["cols"], criteria)
                record["checks"].append({"mode": mode, "dtype": t["dtype"], "tensor": t["name"],
                                         "min_cosine": c["min_cosine"], "atol_needed": c["atol_needed"],
                                         "rtol": c["rtol"], "norm_deviation": abs(c["norm_ratio"] - 1),
                                         "passed": c["passed"]})
        ops = workload.check_ops(package, tolerances.op_criteria())
        record["op_check"] = {"passed": ops["passed"], "compared": ops["compared"],
                              "min_cosine": min(o["min_cosine"] for o in ops["per_op"] if o["checks"]),
                              "atol_rms_needed": max(o["atol_rms_needed"] for o in ops["per_op"])}
    finally:
        workload.close()
    record["seconds"] = time.perf_counter() - begun
    return record


def floor(records):
    """Per (mode, dtype): the worst figures over every record, the plans they
    came from, the thresholds they support and the defaults beside them."""
    out = {}
    for r in records:
        for c in r["checks"]:
            key = f"{c['mode']}/{c['dtype']}"
            f = out.setdefault(key, {"mode": c["mode"], "dtype": c["dtype"], "plans": 0, "min_cosine": 1.0,
                                     "atol_needed": 0.0, "norm_deviation": 0.0, "rtol": c["rtol"]})
            f["plans"] += 1
            for figure, worse in (("min_cosine", min), ("atol_needed", max), ("norm_deviation", max)):
                if worse(f[figure], c[figure]) != f[figure] or figure + "_plan" not in f:
                    f[figure + "_plan"] = r["name"]
                f[figure] = worse(f[figure], c[figure])
    m = tolerances.MARGINS
    ops = [r["op_check"] for r in records]
    worst_cosine = min(records, key=lambda r: r["op_check"]["min_cosine"])
    worst_atol = max(records, key=lambda r: r["op_check"]["atol_rms_needed"])
    default = tolerances.op_criteria()
    # The op check is exact by design (tolerances.OP_DEFAULTS): it is covered
    # when every op of every plan needed no tolerance at all.
    supported = {"min_cosine": worst_cosine["op_check"]["min_cosine"],
                 "atol_rms": worst_atol["op_check"]["atol_rms_needed"]}
    op_floor = {"mode": "device", "dtype": "op outputs", "plans": len(ops),
                "compared": sum(o["compared"] for o in ops),
                "min_cosine": worst_cosine["op_check"]["min_cosine"], "min_cosine_plan": worst_cosine["name"],
                "atol_rms_needed": worst_atol["op_check"]["atol_rms_needed"], "atol_rms_needed_plan": worst_atol["name"],
                "supported": supported, "defaults": default,
                "covered": default["min_cosine"] <= supported["min_cosine"] and default["atol_rms"] >= supported["atol_rms"]}
    for f in out.values():
        supported = {"min_cosine": 1 - max((1 - f["min_cosine"]) * m["cosine_gap_factor"], m["cosine_gap_allowance"]),
                     "atol": max(f["atol_needed"] * m["atol_factor"], m["atol_allowance"]),
                     "norm_tolerance": max(f["norm_deviation"] * m["norm_factor"], m["norm_allowance"])}
        default = tolerances.criteria(f["mode"], f["dtype"])
        f["supported"] = supported
        f["defaults"] = default
        f["covered"] = (default["min_cosine"] <= supported["min_cosine"] and default["atol"] >= supported["atol"]
                        and default["norm_tolerance"] >= supported["norm_tolerance"])
    out["ops"] = op_floor
    return out
