"""test_gathered_weights.py: matmul grids that gather their weights
(plan/matmul.c, lower/matmul.c).

vit-small on 64 tiles plans attn_out on a gathering grid (16 row bands):
each weight block is kept once, cut over the tiles of its row bands, and
every layer brings each tile the current layer's whole block before the
GEMMs.  The run must pass against the device-precision reference op by op,
and the package's allocations (the run's memory timeline) must show what
gathering means, counted here from the weight's shape and the grid alone:
- the weight's parameter storage is every block once: its allocations, one
  on each tile of the grid, add up to K rows x the padded column bands x
  the layers, and none holds more than its share of a K band's rows;
- each of those tiles holds an operand copy of one layer's whole block
  (no layer count in its shape), not every layer's.
"""
import json
import re
import subprocess
from pathlib import Path

import pytest

from ipu_e2e import native
from test_planner_search import band, k_align, pad8

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "harness" / "bin" / "ipu-e2e-test"
ELEMENT_BYTES = {"f32": 4, "f16": 2, "f143": 1, "f152": 1}
SHAPE = re.compile(r"(?:(\d+)x)?(\d+)x(\d+) (\w+)")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gather")
    done = subprocess.run(["/usr/bin/python3", str(CLI), "--workload", "vit-small", "--tiles", "64", "--quiet",
                           "--reference-run", "--check-ops", "--output", str(folder),
                           "--profile-directory", str(folder / "run")],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((folder / "result.json").read_text())
    timeline = json.loads((folder / "run" / "memory-timeline.json").read_text())
    info = native.Workload(native.Context(), {"workload": "vit-small"}).info()
    return result, timeline, info


def gathering(result):
    return [op for op in result["plan"]["ops"] if op["kind"] == "matmul" and op["grid"]["gather"]]


def test_a_gathering_plan_passes_op_by_op(run):
    result, _, _ = run
    assert gathering(result), "vit-small on 64 tiles no longer plans a gathering grid"
    assert result["status"] == "PASS"
    checked = result["op_check"]
    assert checked["passed"] and checked["failed_ops"] == 0 and checked["compared"] > 0


def allocations_of(timeline, name):
    a = timeline["allocations"]
    strings, kinds = a["strings"], a["kinds"]
    return [(a["tile"][i], a["size"][i], strings[a["shape"][i]], kinds[a["kind"][i]])
            for i in range(len(a["tile"])) if strings[a["name"][i]].split("[")[0] == name]


def test_each_weight_block_is_held_once_and_gathered_per_layer(run):
    result, timeline, info = run
    tensors = {t["name"]: t for t in info["tensors"]}
    for op in gathering(result):
        grid = op["grid"]
        gm, gn, gk = grid["rows"], grid["cols"], grid["reduction"]
        weight = tensors[info["ops"][op["op"]]["inputs"][1]]
        k, n, layers, elem = weight["rows"], weight["cols"], weight["sequence"], ELEMENT_BYTES[weight["dtype"]]
        row_bytes = sum(pad8((hi - lo) * elem) for lo, hi in (band(n, gn, 4, j) for j in range(gn)))
        widest = max(hi - lo for lo, hi in (band(k, gk, k_align(elem), l) for l in range(gk)))
        stored = allocations_of(timeline, weight["name"])
        assert {kind for *_, kind in stored} == {"parameter"}
        assert len(stored) == len({tile for tile, *_ in stored}) == gm * gn * gk
        assert sum(size for _, size, _, _ in stored) == k * row_bytes * layers
        for tile, size, shape, _ in stored:
            members, rows, cols, _ = SHAPE.fullmatch(shape).groups()
            assert int(members or 1) == layers and int(rows) <= -(-widest // gm), (tile, shape)
        copies = allocations_of(timeline, f"{weight['name']}@op{op['op']}")
        assert len(copies) == gm * gn * gk
        for tile, size, shape, kind in copies:
            members, rows, cols, _ = SHAPE.fullmatch(shape).groups()
            assert kind == "operand copy" and members is None, (tile, shape)
            assert size == int(rows) * pad8(int(cols) * elem) and int(rows) <= widest
