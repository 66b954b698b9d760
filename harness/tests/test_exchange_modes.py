"""test_exchange_modes.py: the exchange scheduling modes end to end.  A
64-tile vit-small (1 layer) and a 16-tile MLP are built and run in each
mode (latency-oriented, --exchange-stream-words 64, and with
--balance-streams) and must pass the FP32 reference and every op's check
(--check-ops).  Compact mode ranks each phase's schedules by their largest
table first, and the latency order is one of them, so no phase's largest
table grows (test_exchange_replay.py checks that per phase); summed over
the phases a tile's tables could still grow, and these deterministic builds
check that they do not, per tile at most.  Balancing replaces a compact
schedule only with a shorter horizon, so its total horizon is never longer
than compact's.  `ipu-e2e-bench vit --exchange-modes` on the same vit-small
prints its table, every output passes, and each mode's table bytes and
tensor bytes per tile equal what `ipu-e2e-test --compile-only` in that mode
writes to result.json.  A small ViT's Repeat exchanges read the layers'
parameter members through OUTGOING_BASE: compiled with the mutation that
leaves it set, the device faults (exchange_base_not_restored) at the base
row of the first such phase, naming the op; without it the run passes.
"""
import json
import subprocess

import pytest

SMALL_VIT = ["--workload", "vit-small", "--tiles", "64", "--layers", "1"]
SMALL_MLP = ["--workload", "mlp", "--tiles", "16", "--tokens", "40", "--channels", "64", "--hidden", "96"]
MODES = {"default": [], "compact": ["--exchange-stream-words", "64"],
         "balanced": ["--exchange-stream-words", "64", "--balance-streams"]}


def support(tmp_path, name):
    return json.loads((tmp_path / name / "result.json").read_text())["support"]


@pytest.mark.parametrize("workload", [SMALL_VIT, SMALL_MLP], ids=["vit-small", "mlp"])
def test_every_mode_passes_its_checks(cli, tmp_path, workload):
    for name, flags in MODES.items():
        done = cli("--quiet", *workload, *flags, "--reference-run", "--reference-fp32", "--check-ops", "--output",
                   tmp_path / name)
        assert done.returncode == 0, f"{name}: {done.stdout}{done.stderr}"
        assert "PASS" in done.stdout
    default, compact, balanced = (support(tmp_path, name) for name in MODES)
    assert compact["exchange_table_bytes"] <= default["exchange_table_bytes"]
    assert balanced["exchange_table_bytes"] <= default["exchange_table_bytes"]
    assert balanced["exchange_horizon_cycles"] <= compact["exchange_horizon_cycles"]


def test_bench_exchange_modes_agrees_with_compile_only(cli, repo, tmp_path):
    done = subprocess.run([str(repo / "harness" / "bin" / "ipu-e2e-bench"), "vit", "--workload", "vit-small",
                           "--tiles", "64", "--layers", "1", "--exchange-modes", "--quiet", "--output", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| mode | cycles | exchange cycles |" in done.stdout
    rows = json.loads((tmp_path / "bench-vit.json").read_text())["modes"]
    assert len(rows) == 3 and all(r["check_passed"] for r in rows)
    flags = [[], ["--exchange-stream-words", "256"], ["--exchange-stream-words", "256", "--balance-streams"]]
    for row, extra in zip(rows, flags):
        out = tmp_path / f"compile-{len(extra)}"
        built = cli("--quiet", *SMALL_VIT, *extra, "--compile-only", "--output", out)
        assert built.returncode == 0, built.stdout + built.stderr
        s = json.loads((out / "result.json").read_text())["support"]
        assert (row["max_exchange_table_bytes"], row["tensor_bytes_available"]) == \
            (s["exchange_table_bytes"], s["tensor_bytes_available"])
        assert row["cycles"] > row["exchange_cycles"] > 0


def test_a_relative_phase_that_keeps_its_base_faults(cli, tmp_path):
    # The compiler's Repeat exchanges move parameter members by OUTGOING_BASE; with the mutation their tables
    # leave it set, and the device stops at the end of that phase (its second iteration: the first sets 0).
    small = ["--workload", "vit", "--tiles", "16", "--tokens", "20", "--heads", "4", "--head-dim", "8",
             "--hidden", "40", "--layers", "2"]
    done = cli("--quiet", *small, "--reference-run", "--inject", "outgoing-base-not-restored", "--output", tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    fault = json.loads((tmp_path / "result.json").read_text())["fault"]
    assert fault["kind"] == "exchange_base_not_restored" and "OUTGOING_BASE" in fault["detail"] and fault["row"] == 0
    assert fault["op"]["label"] and fault["address_hi"] - fault["address_lo"] == 16
    clean = cli("--quiet", *small, "--reference-run", "--output", tmp_path / "clean")
    assert clean.returncode == 0, clean.stdout + clean.stderr
