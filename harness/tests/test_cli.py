"""test_cli.py: ipu-e2e-test and ipu-e2e-bench as a user runs them: help,
exit codes and messages for bad input, every exchange-stress pattern on small
devices and the full 1472-tile run, result and profile artifacts, saving and
replaying packages, a corrupted expectation (exit 1) and a corrupted
descriptor (device fault, exit 3), a library that cannot load (exit 3, one
line).  Expected word counts and payloads are computed here from the
workload's rules, not read from the code under test.
"""
import json
import struct
import zlib

import pytest

from ipu_e2e import native, stress

HEADER = 64


def words_expected(tiles, iterations, case):
    receivers = {"unicast": 1, "multicast": 3, "paired": 2, "loopback": 3}[case]
    per_word = 2 if case == "paired" else 1
    return tiles * iterations * receivers * 16 * per_word


def rewrite_crc(data):
    data = bytearray(data)
    struct.pack_into("<I", data, 24, zlib.crc32(bytes(data[HEADER:])) & 0xFFFFFFFF)
    return bytes(data)


def test_help_lists_the_options(cli, repo):
    result = cli("--help")
    assert result.returncode == 0
    for flag in ("--workload", "--exchange-pattern", "--sources", "--iterations", "--tiles", "--device",
                 "--output", "--profile-directory", "--save-package", "--package", "--quiet", "--batch",
                 "--precision", "--blocks", "--memory-budget", "--reference-run", "--reference-fp32",
                 "--seed", "--dump-tensors"):
        assert flag in result.stdout


@pytest.mark.parametrize("args, words", [
    (["--exchange-pattern", "sideways"], "--exchange-pattern"),
    (["--workload", "mlp", "--batch", "3"], "--batch"),
    (["--workload", "mlp", "--memory-budget", "lots"], "--memory-budget"),
    (["--iterations", "0"], "--iterations"),
    (["--workload", "exchange-stress", "--iterations", "65"], "--iterations"),
    (["--iterations", "5"], "--workload exchange-stress"),
    (["--workload", "exchange-stress", "--batch", "2"], "--workload mlp"),
    (["--workload", "exchange-stress", "--tiles", "3"], "tiles"),
    (["--tiles", "x"], "--tiles"),
    (["--device", "no-such-profile"], "no-such-profile"),
    (["--package", "/nonexistent/file.pkg"], "/nonexistent/file.pkg"),
])
def test_bad_input_exits_2_naming_it(cli, args, words):
    result = cli("--quiet", *args)
    assert result.returncode == 2, result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.stderr


def test_a_workload_the_device_cannot_hold_is_rejected_with_exit_1(cli):
    """The full-size MLP on 4 tiles: no grid fits, which is a rejection (exit 1, REJECTED, the reason and the
    smallest candidate's peak on stdout), not bad input."""
    result = cli("--quiet", "--workload", "mlp", "--tiles", "4")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "no grid" in result.stdout and result.stdout.rstrip().endswith("REJECTED")
    assert "smallest candidate needs" in result.stdout and not result.stderr


def test_bad_profile_files_are_named(cli, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    result = cli("--quiet", "--device", broken)
    assert result.returncode == 2 and str(broken) in result.stderr
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"tiles": 4, "sram_bites": 5}))
    result = cli("--quiet", "--device", unknown)
    assert result.returncode == 2 and "sram_bites" in result.stderr


@pytest.mark.parametrize("pattern", ["unicast", "multicast", "paired", "loopback"])
@pytest.mark.parametrize("tiles", [4, 16])
def test_each_pattern_passes_with_both_sources(cli, pattern, tiles):
    result = cli("--quiet", "--workload", "exchange-stress", "--tiles", tiles, "--exchange-pattern", pattern, "--iterations", 4)
    assert result.returncode == 0, result.stdout + result.stderr
    for sources in ("standard", "interleaved"):
        line = next(l for l in result.stdout.splitlines() if f" {pattern}-{sources} " in l)
        assert line.split()[0] == "PASS"
        assert int(line.split()[2]) == words_expected(tiles, 4, pattern)


def test_base_pattern_and_reset_probe(cli):
    result = cli("--quiet", "--workload", "exchange-stress", "--tiles", 4, "--exchange-pattern", "base", "--sources", "interleaved")
    assert result.returncode == 0, result.stdout
    names = [l.split()[1] for l in result.stdout.splitlines() if l.startswith("  PASS")]
    assert names == [f"base-{p}-interleaved" for p in ("unicast", "multicast", "paired", "loopback")] + ["base-reset"]


def test_full_size_all_patterns(cli, tmp_path):
    result = cli("--quiet", "--workload", "exchange-stress", "--exchange-pattern", "all", "--output", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads((tmp_path / "result.json").read_text())
    assert data["tiles"] == 1472 and data["status"] == "PASS"
    assert len(data["cases"]) == 17
    expected = 2 * 2 * sum(words_expected(1472, 3, p) for p in ("unicast", "multicast", "paired", "loopback"))
    expected += 1472 * 16  # the reset probe
    assert data["words_checked"] == expected
    assert f"{expected} destination words checked" in result.stdout


def test_result_and_profile_artifacts(cli, tmp_path):
    result = cli("--quiet", "--workload", "exchange-stress", "--tiles", 16, "--output", tmp_path, "--profile-directory", tmp_path / "prof")
    assert result.returncode == 0
    data = json.loads((tmp_path / "result.json").read_text())
    profile = json.loads((tmp_path / "prof" / "run-profile.json").read_text())
    assert data["cycles"] == profile["cycles"]
    assert profile["cycles"] == sum(step["cycles"] for step in profile["steps"])
    for key in ("compute", "sync", "exchange", "host", "control"):
        assert profile["totals"][key] == sum(step[key] for step in profile["steps"])
    assert len(profile["tiles"]["compute"]) == 16
    # Exchange steps cost their horizon plus 100 cycles and a 150-cycle sync.
    exchange_steps = [s for s in profile["steps"] if s["kind"] == "step"]
    assert exchange_steps and all(s["exchange"] > 100 and s["sync"] == 150 for s in exchange_steps)
    assert abs(profile["ms"] - profile["cycles"] / 1.5e6) < 1e-9
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name or p.name.startswith(".")]


def test_unwritable_output_is_an_input_error(cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = cli("--quiet", "--workload", "exchange-stress", "--tiles", 4, "--output", blocker / "out")
    assert result.returncode == 2 and str(blocker / "out") in result.stderr
    assert "Traceback" not in result.stderr


def test_quiet_silences_progress(cli):
    quiet = cli("--quiet", "--workload", "exchange-stress", "--tiles", 4, "--exchange-pattern", "unicast")
    loud = cli("--workload", "exchange-stress", "--tiles", 4, "--exchange-pattern", "unicast")
    assert quiet.stderr == ""
    assert "running on the device" in loud.stderr
    assert quiet.returncode == loud.returncode == 0


def test_thread_count_does_not_change_results(cli, tmp_path):
    one = cli("--quiet", "--workload", "exchange-stress", "--tiles", 16, "--threads", 1, "--output", tmp_path / "one")
    two = cli("--quiet", "--workload", "exchange-stress", "--tiles", 16, "--threads", 2, "--output", tmp_path / "two")
    assert one.returncode == two.returncode == 0
    a = json.loads((tmp_path / "one" / "result.json").read_text())
    b = json.loads((tmp_path / "two" / "result.json").read_text())
    assert a["cycles"] == b["cycles"] and a["cases"] == b["cases"]


def test_recorded_expectations_match_an_independent_model():
    ctx = native.Context()
    profile = ctx.resolve_profile(json.dumps({"tiles": 6}))
    package = native.Package.build_stress(ctx, stress.options(profile, "all", "both", 2))
    meta = package.info()["meta"]
    assert len(meta["cases"]) == 17
    for case in meta["cases"]:
        assert package.record("expected", case["name"]) == stress.expected_stream(case, 6), case["name"]


def test_save_and_replay(cli, tmp_path):
    saved = tmp_path / "stress.pkg"
    first = cli("--quiet", "--workload", "exchange-stress", "--tiles", 4, "--save-package", saved)
    assert first.returncode == 0 and saved.exists()
    again = cli("--quiet", "--package", saved)
    assert again.returncode == 0, again.stderr
    assert first.stdout.splitlines()[-1] == again.stdout.splitlines()[-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stress.pkg"]
    mismatch = cli("--quiet", "--package", saved, "--tiles", 16)
    assert mismatch.returncode == 2 and "4 tiles" in mismatch.stderr


def test_corrupted_expectation_fails_the_check(cli, tmp_path):
    saved = tmp_path / "stress.pkg"
    assert cli("--quiet", "--workload", "exchange-stress", "--tiles", 4, "--exchange-pattern", "unicast", "--sources", "standard",
               "--iterations", 1, "--save-package", saved).returncode == 0
    ctx = native.Context()
    package = native.Package.load_file(ctx, saved)
    expected = package.record("expected", "unicast-standard")
    data = bytearray(saved.read_bytes())
    at = data.find(expected)
    assert at > 0
    data[at + 4 * 5] ^= 0x01  # word 5 of tile 0
    saved.write_bytes(rewrite_crc(data))
    result = cli("--quiet", "--package", saved)
    assert result.returncode == 1
    assert "FAIL unicast-standard" in result.stdout and "first at word 5" in result.stdout


def test_corrupted_descriptor_faults_with_exit_3(cli, tmp_path):
    saved = tmp_path / "stress.pkg"
    assert cli("--quiet", "--workload", "exchange-stress", "--tiles", 4, "--exchange-pattern", "unicast", "--sources", "standard",
               "--iterations", 1, "--save-package", saved).returncode == 0
    data = bytearray(saved.read_bytes())
    # The copy descriptor (entry 2, 3 arguments) stages 64 received bytes; make it read 4096.
    copy = struct.pack("<I", 2 | 3 << 16)
    at = data.find(copy)
    assert at > 0
    source, nbytes = struct.unpack_from("<II", data, at + 4)[0], struct.unpack_from("<I", data, at + 12)[0]
    assert nbytes == 64
    struct.pack_into("<I", data, at + 12, 4096)
    saved.write_bytes(rewrite_crc(data))
    result = cli("--quiet", "--package", saved, "--output", tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "FAULT uninitialized_read on tile 0" in result.stdout
    assert f"[0x{source + 64:X}," in result.stdout
    fault = json.loads((tmp_path / "result.json").read_text())["fault"]
    assert fault["kind"] == "uninitialized_read" and fault["tile"] == 0
    assert fault["address_lo"] == source + 64 and fault["kernel"] == "copy"
    assert fault["allocation"]["name"] == "stress/destinations"


def test_bench_help_and_bad_shape(repo):
    import subprocess
    bench = repo / "harness" / "bin" / "ipu-e2e-bench"
    assert subprocess.run([str(bench), "device", "--help"], capture_output=True).returncode == 0
    bad = subprocess.run([str(bench), "device", "--tiles", "4", "--gemm", "4x4", "--quiet"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--gemm" in bad.stderr


def test_bench_kernels_device_charges_each_formula(repo):
    import subprocess
    bench = repo / "harness" / "bin" / "ipu-e2e-bench"
    done = subprocess.run([str(bench), "kernels", "--tiles", "4", "--repeats", "1", "--quiet", "--output",
                           "/dev/null/x"], capture_output=True, text=True)
    assert done.returncode == 2  # an output folder that cannot exist is an input error
    done = subprocess.run([str(bench), "kernels", "--tiles", "4", "--repeats", "1", "--quiet", "--markdown"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = [l for l in done.stdout.splitlines() if l.startswith("| ") and not l.startswith("| kernel")]
    assert {"fill", "copy", "cast", "add", "gemm_f16", "gemm_f8", "gelu"} <= {l.split("|")[1].strip() for l in lines}
    import json
    from ipu_e2e import native
    ctx = native.Context()
    result = native.bench_kernels(ctx, {"profile": ctx.resolve_profile(json.dumps({"tiles": 4})), "repeats": 1})
    for k in result["kernels"]:
        # The cycles the device charged for the sample equal the formula's (one call per tile).
        assert k["device_cycles"] == k["sample_cycles"], k["kernel"]


def test_a_library_that_cannot_load_is_one_line(cli, tmp_path):
    broken = tmp_path / "libipu_e2e.so"
    broken.write_text("not a shared object")
    result = cli("--quiet", "--workload", "mlp", env={"IPU_E2E_LIBRARY": str(broken)})
    assert result.returncode == 3
    assert result.stderr.startswith(f"ipu-e2e-test: error: cannot load {broken}")
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
