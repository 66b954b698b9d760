"""test_mlp.py: the compiler end to end on small devices.  Random small MLP
geometries (4 to 64 tiles; token, channel and hidden counts that are not
multiples of 8) compile, run and match the FP32 BLAS reference row by row;
and a fault injected into one stage's product at a time (a dropped
transfer, an allocation moved onto a live tensor, a skipped padding clear, a
parameter overwritten after its last use) makes the device fault or the
check fail.  The reference itself is checked against numpy in
test_reference.py.
"""
import json
import os
import random
import time

import pytest

from ipu_e2e import native, runner, tolerances

SEED = int(os.environ.get("IPU_TEST_SEED", time.time_ns() % 2**32))


def not_multiple_of_8(rng, lo, hi):
    while True:
        n = rng.randint(lo, hi)
        if n % 8:
            return n


def geometries(count=20):
    rng = random.Random(SEED)
    out = []
    for _ in range(count):
        channels, hidden = not_multiple_of_8(rng, 9, 150), not_multiple_of_8(rng, 10, 220)
        # FP8 keeps 3 mantissa bits: its error shrinks with the length of the dot products.
        precision = "fp8" if channels >= 64 and hidden >= 64 and rng.random() < 0.5 else "fp16"
        out.append({"tiles": rng.choice((4, 16, 64)), "tokens": not_multiple_of_8(rng, 3, 70),
                    "channels": channels, "hidden": hidden, "batch": rng.choice((1, 2)),
                    "blocks": 1 if precision == "fp8" else rng.choice((1, 2)), "precision": precision,
                    "seed": rng.randrange(1000)})
    return out


def build(case, inject=None):
    ctx = native.Context()
    profile = ctx.resolve_profile(json.dumps({"tiles": case["tiles"]}))
    options = {k: v for k, v in case.items() if k != "tiles"}
    workload = native.Workload(ctx, dict(options, workload="mlp"))
    package, report = workload.compile(profile, inject=inject)
    workload.reference_run({"fp32": True})
    return ctx, workload, package, report


def check(ctx, workload, outputs):
    y = next(t for t in workload.info()["tensors"] if t["role"] == "output")
    return native.check_outputs(ctx, workload.reference_output(y["name"]), outputs[y["name"]], y["dtype"],
                                y["rows"], y["cols"], tolerances.criteria("fp32", y["dtype"]))


@pytest.mark.parametrize("case", geometries(), ids=lambda c: "x".join(str(c[k]) for k in
                                                                       ("tiles", "tokens", "channels", "hidden")))
def test_random_small_geometries_pass(case):
    ctx, workload, package, report = build(case)
    _, outputs, _ = runner.run(ctx, package)
    result = check(ctx, workload, outputs)
    assert result["passed"], f"seed {SEED} (IPU_TEST_SEED to repeat), case {case}: {result}"
    assert result["min_cosine"] >= 0.99 and result["nonfinite_rows"] == 0
    assert report["estimate"]["peak_bytes"] <= report["estimate"]["budget"]


PADDED = {"tiles": 16, "tokens": 21, "channels": 37, "hidden": 203, "batch": 1, "blocks": 1,
          "precision": "fp16", "seed": 3}


@pytest.mark.parametrize("inject", ["drop-transfer", "overlap-allocation", "skip-padding-clear"])
def test_injected_fault_is_caught(inject):
    ctx, workload, package, _ = build(PADDED, inject)
    try:
        _, outputs, _ = runner.run(ctx, package)
    except runner.DeviceFault as fault:
        assert fault.fault["kind"] in ("uninitialized_read", "element_conflict", "exchange_unmatched_receive")
        return
    assert not check(ctx, workload, outputs)["passed"], f"{inject} went unnoticed"


def test_clean_build_of_the_injection_case_passes():
    ctx, workload, package, _ = build(PADDED)
    _, outputs, _ = runner.run(ctx, package)
    assert check(ctx, workload, outputs)["passed"]


def test_parameter_overwritten_after_last_use_breaks_the_next_invocation():
    ctx, workload, package, _ = build(PADDED, "overwrite-parameter")
    device = native.Device(ctx, package.info()["profile"])
    info = package.info()
    for s in info["streams"]:
        if s["records"].get("input"):
            device.set_stream(s["name"], package.record("input", s["name"]))
    device.initialize(package)
    device.run()
    first = device.stream("y")
    device.run()
    second = device.stream("y")
    assert check(ctx, workload, {"y": first})["passed"]
    assert not check(ctx, workload, {"y": second})["passed"]


@pytest.mark.parametrize("precision", ["fp8", "fp16"])
def test_device_precision_reference_tracks_the_device(precision):
    case = dict(PADDED, precision=precision, channels=96, hidden=203, blocks=2 if precision == "fp16" else 1)
    ctx, workload, package, _ = build(case)
    _, outputs, _ = runner.run(ctx, package)
    fp32 = check(ctx, workload, outputs)
    workload.reference_run({"fp32": False})
    device = check(ctx, workload, outputs)
    # Rounded like the device, the reference agrees with it more closely than FP32 does.
    assert device["min_cosine"] >= 0.999 and device["passed"]
    assert device["mean_cosine"] >= fp32["mean_cosine"]
    assert device["max_abs_error"] <= fp32["max_abs_error"]


def test_resident_run_serves_identical_inferences(cli, tmp_path):
    result = cli("--quiet", "--workload", "mlp", "--tiles", 16, "--tokens", 21, "--channels", 44, "--hidden", 70,
                 "--precision", "fp16", "--blocks", 2, "--reference-run", "--reference-inferences", 3,
                 "--output", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    resident = json.loads((tmp_path / "result.json").read_text())["resident"]
    assert resident["inferences"] == 3 and len(resident["seconds_per_inference"]) == 3
    assert resident["identical_outputs"] and resident["parameters_unchanged"]
    assert resident["parameter_digest_after_upload"] == resident["parameter_digest_at_end"]


def test_parameter_corrupted_after_upload_fails_the_digest_check():
    ctx, workload, package, _ = build(PADDED, "overwrite-parameter")
    result = {"wall_seconds": {}}
    runner.run_checked(ctx, package, None, None, result, invocations=2)
    resident = result["resident"]
    assert not resident["parameters_unchanged"]
    assert resident["parameter_digest_after_upload"] != resident["parameter_digest_at_end"]
    assert not resident["identical_outputs"]
    # The same program without the overwrite keeps its parameters.
    ctx, workload, package, _ = build(PADDED)
    result = {"wall_seconds": {}}
    runner.run_checked(ctx, package, None, None, result, invocations=2)
    assert result["resident"]["parameters_unchanged"] and result["resident"]["identical_outputs"]


def test_cli_runs_a_small_mlp_and_replays_it(cli, tmp_path):
    args = ["--quiet", "--workload", "mlp", "--tiles", 16, "--tokens", 19, "--channels", 44, "--hidden", 70,
            "--precision", "fp16", "--blocks", 2, "--reference-run", "--reference-fp32"]
    result = cli(*args, "--output", tmp_path, "--save-package", tmp_path / "mlp.pkg",
                 "--dump-tensors", tmp_path / "tensors")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads((tmp_path / "result.json").read_text())
    assert data["status"] == "PASS" and data["checks"][0]["min_cosine"] >= 0.99
    for key in ("cycles", "ms", "roofline_ratio", "estimate", "wall_seconds", "macs"):
        assert key in data
    # MACs computed here: two matmuls per block, two blocks.
    assert data["macs"] == 2 * (19 * 44 * 70 + 19 * 70 * 44)
    assert "min cosine" in result.stdout and result.stdout.strip().endswith("PASS")
    import numpy
    y = numpy.load(tmp_path / "tensors" / "y.npy")
    reference = numpy.load(tmp_path / "tensors" / "y.reference.npy")
    assert y.shape == reference.shape == (19, 44)
    cosine = (y.astype("float64") * reference).sum(1) / numpy.linalg.norm(y.astype("float64"), axis=1) \
        / numpy.linalg.norm(reference, axis=1)
    assert abs(cosine.min() - data["checks"][0]["min_cosine"]) < 1e-6
    replay = cli("--quiet", "--package", tmp_path / "mlp.pkg")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert replay.stdout.strip().endswith("PASS")
