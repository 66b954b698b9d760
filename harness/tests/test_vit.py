"""test_vit.py: the ViT workloads (`vit`, `vit-small`) through ipu-e2e-test
and ipu-e2e-bench.  vit-small on 64 tiles matches the FP32 and the
device-precision references over resident inferences; small geometries on
16 tiles pass in every --attention mode, and from pixel patches (bit exact,
every op checked), the compile report records the mode
asked for, and a saved package replays as the workload it recorded; a
parameter corrupted after upload fails the digest check; flags of the other
workload family are usage errors naming the flag.  The geometry the harness
reports and the MACs behind its roofline ratio are checked against formulas
written here from the options.
"""
import json
import subprocess

import pytest

from ipu_e2e import native, runner, transformer

SMALL = ["--tiles", 16, "--tokens", 20, "--heads", 4, "--head-dim", 8, "--hidden", 40, "--layers", 2]
SMALL_OPTIONS = {"workload": "vit", "tokens": 20, "heads": 4, "head_dim": 8, "hidden": 40, "layers": 2,
                 "batch": 2, "seed": 3}


def result_of(completed, folder):
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return json.loads((folder / "result.json").read_text())


@pytest.mark.parametrize("fp32", [True, False], ids=["fp32", "device"])
def test_vit_small_on_64_tiles_matches_the_reference(cli, tmp_path, fp32):
    result = result_of(cli("--quiet", "--workload", "vit-small", "--tiles", 64, "--reference-run",
                           *(["--reference-fp32"] if fp32 else []), "--reference-inferences", 2,
                           "--output", tmp_path), tmp_path)
    assert result["status"] == "PASS" and result["workload"] == "vit-small" and result["tiles"] == 64
    assert result["reference"]["mode"] == ("fp32" if fp32 else "device")
    check = result["checks"][0]
    assert check["tensor"] == "embedding" and check["min_cosine"] >= (0.99 if fp32 else 0.999)
    resident = result["resident"]
    assert resident["inferences"] == 2 and resident["identical_outputs"] and resident["parameters_unchanged"]
    g = result["geometry"]
    assert g["layers"] == 3 and g["channels"] == g["heads"] * g["head_dim"]


@pytest.mark.parametrize("attention", transformer.ATTENTION_MODES)
@pytest.mark.parametrize("batch", [1, 2])
def test_small_geometries_pass_in_every_attention_mode(cli, tmp_path, attention, batch):
    done = cli("--quiet", "--workload", "vit", *SMALL, "--batch", batch, "--attention", attention,
               "--reference-run", "--reference-fp32", "--output", tmp_path)
    result = result_of(done, tmp_path)
    assert result["status"] == "PASS", done.stdout
    assert result["checks"][0]["min_cosine"] >= 0.99 and result["attention"] == attention
    assert done.stdout.startswith(f"vit on c600 (16 tiles): batch {batch}, 2 layers, 4 heads x 8, "
                                  f"20 tokens x 32 -> 40, attention {attention}")
    planned = {op["kind"]: transformer.attention_of(op)[0] for op in result["plan"]["ops"]
               if op["kind"] in ("attention", "map_pool")}
    assert set(planned) == {"attention", "map_pool"}
    assert set(planned.values()) <= {"flash", "materialized"}, planned
    if attention != "auto":
        assert planned["attention"] == attention
        assert f"{attention} attention" in done.stdout


def test_odd_geometry_passes(cli, tmp_path):
    result = result_of(cli("--quiet", "--workload", "vit", "--tiles", 16, "--tokens", 13, "--heads", 3,
                           "--head-dim", 12, "--hidden", 50, "--layers", 1, "--seed", 5, "--reference-run",
                           "--reference-fp32", "--output", tmp_path), tmp_path)
    assert result["status"] == "PASS"
    assert result["geometry"] == {"batch": 1, "tokens": 13, "channels": 36, "hidden": 50, "layers": 1,
                                  "heads": 3, "head_dim": 12, "input": "embeddings"}


@pytest.mark.parametrize("batch", [1, 2])
def test_pixel_patches_pass_bit_exact_and_against_fp32(cli, tmp_path, batch):
    # The patch projection (588 -> width, biased), the position embedding added
    # to each image's rows, then the biased layers: bit exact against the
    # device-precision reference with every op checked, and within the FP32
    # reference's tolerances.
    args = ["--workload", "vit", *SMALL, "--batch", batch, "--input", "patches"]
    device = result_of(cli("--quiet", *args, "--reference-run", "--check-ops", "--output", tmp_path / "d"),
                       tmp_path / "d")
    assert device["status"] == "PASS" and device["geometry"]["input"] == "patches"
    assert device["checks"][0]["max_abs_error"] == 0
    assert device["op_check"]["passed"] and device["op_check"]["ops"] == 31
    fp32 = result_of(cli("--quiet", *args, "--reference-run", "--reference-fp32", "--output", tmp_path / "f"),
                     tmp_path / "f")
    assert fp32["status"] == "PASS" and fp32["checks"][0]["min_cosine"] >= 0.99


def test_materialized_attention_in_narrow_query_bands_is_bit_exact(cli, tmp_path):
    # 729 keys, one head on 96 tiles: 96 query bands of 7 or 8 rows, each band's
    # P V one GEMM on the device.  OpenBLAS's sums depend on a GEMM's row count
    # on some hosts, so the device-precision reference multiplies band by band
    # (the package's meta records the bands); every op's output is then the
    # reference's to the bit (cosine 1, no error at all), not merely within
    # tolerance.
    result = result_of(cli("--quiet", "--workload", "vit", "--tiles", 96, "--layers", 1, "--heads", 1,
                           "--head-dim", 72, "--hidden", 144, "--attention", "materialized", "--reference-run",
                           "--check-ops", "--output", tmp_path), tmp_path)
    attention = next(op for op in result["plan"]["ops"] if op["kind"] == "attention")
    assert attention["attention"]["query_bands"] == 96 and attention["attention"]["mode"] == "materialized"
    inexact = [(op["label"], op["min_cosine"], op["atol_rms_needed"]) for op in result["op_check"]["per_op"]
               if op["min_cosine"] != 1.0 or op["atol_rms_needed"] != 0]
    assert not inexact
    assert result["checks"][0]["max_abs_error"] == 0


def test_flash_attention_over_key_bands_is_bit_exact(cli, tmp_path):
    # 729 keys in 4 bands of 192 (whole 64-key blocks): each band's unit runs
    # its blocks into a state of its own and the owner of each sub-band of
    # the query rows merges the four states in key order.  The reference
    # merges them in the same order (the package's meta records the key
    # bands), so every op is the device's to the bit.
    result = result_of(cli("--quiet", "--workload", "vit", "--tiles", 64, "--layers", 1, "--heads", 4, "--head-dim", 16,
                           "--hidden", 64, "--batch", 2, "--attention", "flash", "--attention-key-bands", 4,
                           "--reference-run", "--check-ops", "--output", tmp_path), tmp_path)
    attention = next(op for op in result["plan"]["ops"] if op["kind"] == "attention")
    assert attention["attention"]["key_bands"] == 4 and attention["attention"]["chunk_keys"] == 192
    inexact = [(op["label"], op["min_cosine"], op["atol_rms_needed"]) for op in result["op_check"]["per_op"]
               if op["min_cosine"] != 1.0 or op["atol_rms_needed"] != 0]
    assert not inexact
    assert result["checks"][0]["max_abs_error"] == 0
    # Merged in another order (no bands recorded: one run of blocks), the
    # reference is not the device's to the bit: the bands are what makes it exact.
    ctx = native.Context()
    workload = native.Workload(ctx, {"workload": "vit", "layers": 1, "heads": 4, "head_dim": 16, "hidden": 64,
                                     "batch": 2})
    package, _ = workload.compile(ctx.resolve_profile(json.dumps({"tiles": 64})), attention="flash",
                                  search={"attention_key_bands": 4})
    meta = package.info()["meta"]
    assert meta["attention_bands"]["3"] == [0, 192, 384, 576, 729]
    banded = reference_output(workload, meta, keep_bands=True)
    unbanded = reference_output(workload, meta, keep_bands=False)
    assert banded != unbanded


def reference_output(workload, meta, keep_bands):
    options = {"fp32": False, "attention": meta["attention"], "matmuls": meta["matmuls"],
               "attention_bands": meta["attention_bands"] if keep_bands else {}}
    workload.reference_run(options)
    return workload.reference_output("embedding")


def test_a_saved_vit_package_replays_as_the_vit(cli, tmp_path):
    saved = tmp_path / "vit.pkg"
    first = cli("--quiet", "--workload", "vit", *SMALL, "--batch", 2, "--save-package", saved)
    assert first.returncode == 0, first.stdout + first.stderr
    replay = cli("--quiet", "--package", saved, "--output", tmp_path)
    result = result_of(replay, tmp_path)
    assert result["workload"] == "vit" and result["status"] == "PASS"
    assert result["reference"]["mode"] == "fp32"
    assert replay.stdout.startswith("vit on c600 (16 tiles): batch 2, 2 layers, 4 heads x 8, 20 tokens x 32 -> 40")


def build(inject=None):
    ctx = native.Context()
    profile = ctx.resolve_profile(json.dumps({"tiles": 16}))
    workload = native.Workload(ctx, SMALL_OPTIONS)
    package, _ = workload.compile(profile, inject=inject)
    return ctx, package


def test_parameter_corrupted_after_upload_fails_the_digest_check():
    ctx, package = build("overwrite-parameter")
    result = {"wall_seconds": {}}
    runner.run_checked(ctx, package, None, None, result, invocations=2)
    resident = result["resident"]
    assert not resident["parameters_unchanged"]
    assert resident["parameter_digest_after_upload"] != resident["parameter_digest_at_end"]
    # The same program without the overwrite keeps its parameters.
    ctx, package = build()
    result = {"wall_seconds": {}}
    runner.run_checked(ctx, package, None, None, result, invocations=2)
    assert result["resident"]["parameters_unchanged"] and result["resident"]["identical_outputs"]


@pytest.mark.parametrize("args, flag", [
    (["--workload", "vit", "--precision", "fp16"], "--precision"),
    (["--workload", "vit-small", "--precision", "fp8"], "--precision"),
    (["--workload", "vit-small", "--blocks", "2"], "--blocks"),
    (["--workload", "mlp", "--layers", "2"], "--layers"),
    (["--workload", "mlp", "--heads", "2"], "--heads"),
    (["--workload", "mlp", "--head-dim", "8"], "--head-dim"),
    (["--workload", "mlp", "--attention", "auto"], "--attention"),
    (["--workload", "vit", "--attention", "bogus"], "--attention"),
    (["--workload", "vit", "--layers", "0"], "--layers"),
    (["--workload", "exchange-stress", "--heads", "2"], "--heads"),
    (["--workload", "vit", "--iterations", "2"], "--iterations"),
])
def test_flags_of_the_other_workload_exit_2_naming_them(cli, args, flag):
    done = cli("--quiet", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert flag in done.stderr and "Traceback" not in done.stderr


def test_channels_must_equal_heads_times_head_dim(cli):
    done = cli("--quiet", "--workload", "vit", "--tiles", 16, "--heads", 4, "--head-dim", 8, "--channels", 30)
    assert done.returncode == 2
    assert "channels 30 must equal heads x head_dim" in done.stderr


def test_help_lists_the_vit_flags(cli):
    done = cli("--help")
    assert done.returncode == 0
    for text in ("vit-small", "--layers", "--heads", "--head-dim", "--attention", "materialized", "--input",
                 "patches"):
        assert text in done.stdout


def test_geometry_and_macs_follow_the_options():
    ctx = native.Context()
    info = native.Workload(ctx, SMALL_OPTIONS).info()
    B, T, C, H, L = 2, 20, 32, 40, 2
    assert transformer.geometry(info) == {"batch": B, "tokens": T, "channels": C, "hidden": H, "layers": L,
                                          "heads": 4, "head_dim": 8, "input": "embeddings"}
    # Per layer: Wqkv, Q K^T and P V, Wo, W1, W2; the head: Wkv, the probe's
    # Wq, MAP pooling, Wo, W1, W2.
    layer = B * T * C * (3 * C) + 2 * B * T * T * C + B * T * C * C + 2 * B * T * C * H
    head = B * T * C * (2 * C) + C * C + 2 * B * T * C + B * C * C + 2 * B * C * H
    profile = ctx.resolve_profile(json.dumps({"tiles": 16}))
    total, cycles = transformer.macs(info, profile)
    assert total == L * layer + head
    attention = L * 2 * B * T * T * C + 2 * B * T * C
    assert cycles == pytest.approx((total - attention) / profile["amp_macs_fp8"]
                                   + attention / profile["amp_macs_fp16_fp32"])
    # From pixel patches: the patch projection (588 values per token) as well.
    patches = native.Workload(ctx, {**SMALL_OPTIONS, "input": "patches"}).info()
    assert transformer.geometry(patches)["input"] == "patches"
    assert transformer.macs(patches, profile)[0] == total + B * T * 588 * C


def test_summary_names_the_geometry_and_the_planned_mode():
    result = {"workload": "vit-small", "device": "c600", "tiles": 64, "attention": "auto",
              "geometry": {"batch": 1, "tokens": 729, "channels": 384, "hidden": 1536, "layers": 3,
                           "heads": 6, "head_dim": 64},
              "plan": {"ops": [{"kind": "attention", "attention": {"mode": "flash", "query_bands": 2}},
                               {"kind": "map_pool", "attention": {"mode": "materialized"}}]}}
    assert transformer.summary(result) == ("vit-small on c600 (64 tiles): batch 1, 3 layers, 6 heads x 64, "
                                           "729 tokens x 384 -> 1536, attention auto (planned: attention "
                                           "flash, map_pool materialized)")
    result["attention"] = "flash"
    result["plan"]["ops"][1]["attention"]["mode"] = "flash"
    assert transformer.summary(result).endswith("attention flash")


def test_bench_vit_reports_the_targets(repo, tmp_path):
    bench = repo / "harness" / "bin" / "ipu-e2e-bench"
    done = subprocess.run([str(bench), "vit", "--workload", "vit-small", "--tiles", "64", "--layers", "1",
                           "--inferences", "2", "--quiet", "--output", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "bench-vit.json").read_text())
    assert result["geometry"]["layers"] == 1 and result["inferences"] == 2
    assert result["identical_outputs"] and result["check_passed"]
    assert result["device_reference_ratio"] == pytest.approx(
        result["device_seconds_per_inference"] / result["reference_seconds"])
    assert set(result["targets_met"]) == {"build_seconds", "peak_rss_mib", "device_reference_ratio",
                                          "allocation_check_cost", "compile_only_build_seconds",
                                          "compile_only_peak_rss_mib"}
    # Compile-only builds at batches 1 and 2, each measured in its own process.
    assert [c["batch"] for c in result["compile_only"]] == [1, 2]
    for c in result["compile_only"]:
        assert c["build_seconds"] == pytest.approx(sum(c["stages"].values()))
        assert c["peak_rss_mib"] > 0
    assert "compile only, batch 2: build" in done.stdout
    # The same package without the allocation checks computes the same outputs.
    assert result["unchecked_outputs_identical"]
    assert result["allocation_check_cost"] == pytest.approx(
        result["device_seconds_fastest"] / result["unchecked_device_seconds_fastest"] - 1)
    assert result["device_seconds_fastest"] <= result["device_seconds_per_inference"]
    for target in ("target < 60 s", "target < 4096 MiB", "target <= 2", "target <= 10%"):
        assert target in done.stdout


def test_device_options_are_checked():
    # What the bench switches off to measure the allocation checks; anything else is refused.
    ctx = native.Context()
    device = native.Device(ctx, ctx.resolve_profile(json.dumps({"tiles": 4})))
    device.configure(allocation_checks=False)
    with pytest.raises(native.IpuError, match="unknown option 'checks'"):
        device.configure(checks=True)
    with pytest.raises(native.IpuError, match="must be true or false"):
        device.configure(allocation_checks=1)
    device.close()


# Geometries where the two attention modes cost differently: short and long
# sequences, few and many tiles per (image, head), batch 1 and 2.
AUTO_GEOMETRIES = [
    ["--tiles", 16, "--tokens", 20, "--heads", 4, "--head-dim", 8, "--hidden", 40, "--layers", 2],
    ["--tiles", 64, "--tokens", 97, "--heads", 4, "--head-dim", 16, "--hidden", 96, "--layers", 2],
    ["--tiles", 64, "--tokens", 300, "--heads", 2, "--head-dim", 32, "--hidden", 128, "--layers", 1,
     "--batch", 2],
    ["--tiles", 32, "--tokens", 180, "--heads", 8, "--head-dim", 8, "--hidden", 80, "--layers", 2],
    ["--workload", "vit-small", "--tiles", 64],
]


@pytest.mark.parametrize("geometry", AUTO_GEOMETRIES, ids=range(len(AUTO_GEOMETRIES)))
def test_auto_attention_runs_no_slower_than_the_faster_mode(cli, tmp_path, geometry):
    cycles = {}
    for mode in transformer.ATTENTION_MODES:
        out = tmp_path / mode
        args = geometry if geometry[0] == "--workload" else ["--workload", "vit", *geometry]
        done = cli("--quiet", *args, "--attention", mode, "--output", out)
        assert done.returncode == 0, done.stdout + done.stderr
        cycles[mode] = json.loads((out / "result.json").read_text())["cycles"]
    assert cycles["auto"] <= min(cycles["flash"], cycles["materialized"]) * 1.005, cycles
