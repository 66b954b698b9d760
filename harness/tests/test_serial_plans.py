"""test_serial_plans.py: matmuls that no plan computing each tile's rows at
once can hold.  For random small MLP geometries the budget is set below the
smallest per-tile footprint of every at-once grid of the largest matmul
(counted here from the band arithmetic of test_planner_search.py, not by the
planner), so only serial grids (each tile's rows in pieces, one at a time)
can fit; each run must plan serially, stay within the budget, and match the
FP32 reference and the device-precision reference (which computes the
chunks exactly as the device does).  The 96-tile FP16 SigLIP MLP at batch 2,
which at-once grids cannot hold either, must pass the same way.
"""
import json
import random

import pytest

from test_planner_search import SIZES, exact_footprint, partitions


def smallest_at_once(m, n, k, insz, outsz, tiles):
    """The smallest exact per-tile footprint of any at-once grid (gs = 1),
    weights resident on every replica or gathered."""
    return min(exact_footprint(m, n, k, insz, outsz, 1, gm, gn, gk, 1, None, gather)
               for gm, gn, gk, gs, gather in partitions(m, n, k, tiles, insz, True) if gs == 1)


def floor_of(tiles, tokens, channels, hidden, batch, precision):
    """The largest matmul's smallest at-once footprint, and the bytes per tile
    of what the MLP holds at its fullest (input, both weights, hidden and its
    GELU in FP16) spread evenly."""
    insz, rows = SIZES["f143" if precision == "fp8" else "f16"], tokens * batch
    floor = max(smallest_at_once(rows, hidden, channels, insz, 2, tiles),
                smallest_at_once(rows, channels, hidden, insz, 2, tiles))
    spread = (rows * channels * insz + 2 * channels * hidden * insz + 2 * rows * hidden * 2) / tiles
    return floor, spread


def geometry(seed):
    """A random MLP whose at-once grids need at least twice what it holds
    spread evenly (so a serial plan has room), drawn again until one does."""
    rng = random.Random(seed)
    while True:
        tiles = rng.choice([16, 32, 64])
        tokens, channels, hidden = rng.randrange(24, 120), rng.randrange(16, 64), rng.randrange(32, 128)
        batch, precision = rng.choice([1, 2]), rng.choice(["fp8", "fp16"])
        floor, spread = floor_of(tiles, tokens, channels, hidden, batch, precision)
        if floor >= 2 * spread:
            return floor, (tiles, tokens, channels, hidden, batch, precision)


def check_serial_run(cli, tmp_path, args, budget):
    done = cli("--quiet", "--workload", "mlp", *args, "--memory-budget", budget, "--reference-run",
               "--output", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["estimate"]["peak_bytes"] <= budget
    grids = [op["grid"] for op in result["plan"]["ops"] if op["kind"] == "matmul"]
    assert any(g["serial"] > 1 for g in grids), grids
    # The same plan against the FP32 reference.
    fp32 = cli("--quiet", "--workload", "mlp", *args, "--memory-budget", budget, "--reference-run",
               "--reference-fp32")
    assert fp32.returncode == 0, fp32.stdout + fp32.stderr


@pytest.mark.parametrize("seed", range(20))
def test_a_budget_only_serial_grids_fit_plans_and_passes(cli, tmp_path, seed):
    floor, (tiles, tokens, channels, hidden, batch, precision) = geometry(seed)
    budget = floor - 1
    args = ["--tiles", tiles, "--tokens", tokens, "--channels", channels, "--hidden", hidden, "--batch", batch,
            "--precision", precision, "--seed", seed]
    check_serial_run(cli, tmp_path, args, budget)


def test_the_96_tile_fp16_mlp_at_batch_2_plans_serially(cli, tmp_path):
    # 1458 x 1152 x 4304: the smallest at-once grid needs more than the default budget.
    assert smallest_at_once(1458, 4304, 1152, 2, 2, 96) > 586960
    check_serial_run(cli, tmp_path, ["--tiles", 96, "--batch", 2, "--precision", "fp16"], 586960)
