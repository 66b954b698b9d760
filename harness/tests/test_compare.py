"""test_compare.py: ipu-e2e-compare on two real runs of a 16-tile MLP that
differ in memory budget (so their plans differ): its cycles per op, peaks per
tile and plan differences are checked against the two runs' own result.json
and memory-timeline.json, read here; bad arguments exit 2 naming them.
"""
import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPARE = REPO / "harness" / "bin" / "ipu-e2e-compare"
SMALL = ["--workload", "mlp", "--tiles", "16", "--tokens", "64", "--channels", "128", "--hidden", "256"]


def compare(*args):
    return subprocess.run(["/usr/bin/python3", str(COMPARE), *map(str, args)], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cli):
    folders = []
    for name, budget in (("a", "default"), ("b", "40000")):
        folder = tmp_path_factory.mktemp(name)
        done = cli("--quiet", *SMALL, "--memory-budget", budget, "--output", folder, "--profile-directory",
                   folder / "run")
        assert done.returncode == 0, done.stdout + done.stderr
        folders.append(folder)
    return folders


def test_the_comparison_agrees_with_both_runs(runs, tmp_path):
    a, b = runs
    done = compare(a, b / "result.json", "--output", tmp_path, "--quiet")
    assert done.returncode == 0, done.stderr
    c = json.loads((tmp_path / "compare.json").read_text())
    assert (tmp_path / "compare.md").read_text() == done.stdout
    ra, rb = (json.loads((f / "result.json").read_text()) for f in runs)
    assert c["totals"]["cycles"] == [ra["cycles"], rb["cycles"]]
    by_op = {o["op"]: o for o in ra["op_cycles"]}
    assert [(o["op"], o["device"]) for o in c["ops"]] == [(o["op"], [by_op[o["op"]]["device"], o["device"]])
                                                         for o in rb["op_cycles"]]
    assert [o["received_bytes"] for o in c["ops"]] == [[by_op[o["op"]]["received_bytes"], o["received_bytes"]]
                                                       for o in rb["op_cycles"]]
    # Each op's bytes are its exchange steps' own, as the device recorded them.
    steps = json.loads((b / "run" / "run-profile.json").read_text())["steps"]
    assert any(o["received_bytes"] for o in rb["op_cycles"])
    for o in rb["op_cycles"]:
        assert o["received_bytes"] == sum(s["received_bytes"] for s in steps if s["exchange_compiler_op"] == o["op"])
    pa, pb = (json.loads((f / "run" / "memory-timeline.json").read_text())["tile_peaks"]["peak_bytes"] for f in runs)
    p = c["peaks"]
    assert p["source"] == "run-time memory timeline" and p["tiles"] == 16
    assert p["grew"] == sum(y > x for x, y in zip(pa, pb)) and p["shrank"] == sum(y < x for x, y in zip(pa, pb))
    assert p["fullest"] == [[pa.index(max(pa)), max(pa)], [pb.index(max(pb)), max(pb)]]
    assert all(m["a"] == pa[m["tile"]] and m["b"] == pb[m["tile"]] for m in p["most_changed"])
    grids = {o["op"]: o["grid"] for o in ra["plan"]["ops"] if o.get("grid")}
    changed = {o["op"] for o in rb["plan"]["ops"] if o.get("grid") and o["grid"] != grids[o["op"]]}
    assert changed and changed == {o["op"] for o in c["plan_differences"] if "grid" in o["differs"]}
    assert c["same_library"]


def test_bad_arguments_exit_2_naming_them(runs, tmp_path):
    done = compare(runs[0], tmp_path / "missing")
    assert done.returncode == 2 and "B " in done.stderr and "missing" in done.stderr
    (tmp_path / "other.json").write_text(json.dumps({"cases": []}))
    done = compare(tmp_path / "other.json", runs[1])
    assert done.returncode == 2 and "not an ipu-e2e-test result.json" in done.stderr
    assert "Traceback" not in done.stderr
    # A result.json whose objects are numbers is refused naming the field, not a traceback.
    result = json.loads((runs[1] / "result.json").read_text())
    for field, value in (("geometry", 3), ("cycles", "many"), ("op_cycles", [1, 2])):
        broken = dict(result, **{field: value})
        (tmp_path / "broken.json").write_text(json.dumps(broken))
        done = compare(runs[0], tmp_path / "broken.json")
        assert done.returncode == 2 and f"field '{field}' must be" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
