"""test_compare.py: ipu-e2e-compare on two real runs of a 16-tile MLP that
differ in memory budget (so their plans differ): its cycles per op, peaks per
tile and plan differences are checked against the two runs' own result.json
and memory-timeline.json, read here; bad arguments exit 2 naming them.
Replays of saved packages (a sweep's cases) compare the plans their packages
record and name the ops whose grids differ (as their builds planned them),
with per-op cycles from the replays' run profiles and the estimates of the
builds beside the packages, each estimate more than 10% off flagged; runs of
different workloads and devices are warned of; compare.html draws the same
figures and both runs' indexes link it.
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
    assert done.returncode == 2 and "field 'schema': expected \"ipu-e2e/result\" (an ipu-e2e-test result.json), " \
        "missing" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # A result.json whose objects are numbers is refused naming the field, not a traceback.
    result = json.loads((runs[1] / "result.json").read_text())
    for field, value, message in (("geometry", 3, "field 'geometry': expected an object, found 3"),
                                  ("cycles", "many", "field 'cycles': expected a number, found \"many\""),
                                  ("op_cycles", [1, 2], "field 'op_cycles[0]': expected an object with \"op\", \"kind\", "
                                                          "\"output\", found 1")):
        broken = dict(result, **{field: value})
        (tmp_path / "broken.json").write_text(json.dumps(broken))
        done = compare(runs[0], tmp_path / "broken.json")
        assert done.returncode == 2 and f"B {tmp_path / 'broken.json'}: {message}" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def replays(tmp_path_factory, cli):
    """Two builds at different budgets, each replayed from its saved package into run/ (as a sweep's cases)."""
    folders = []
    for name, budget in (("a", "default"), ("b", "40000")):
        folder = tmp_path_factory.mktemp(f"replay-{name}")
        built = cli("--quiet", *SMALL, "--memory-budget", budget, "--compile-only", "--save-package",
                    folder / "package.pkg", "--output", folder)
        assert built.returncode == 0, built.stdout + built.stderr
        ran = cli("--quiet", "--package", folder / "package.pkg", "--output", folder / "run", "--profile-directory",
                  folder / "run")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        folders.append(folder)
    return folders


def test_replays_compare_their_packages_plans_and_name_the_differing_ops(replays, tmp_path):
    a, b = replays
    done = compare(a / "run", b / "run", "--output", tmp_path, "--quiet")
    assert done.returncode == 0, done.stderr
    c = json.loads((tmp_path / "compare.json").read_text())
    assert c["plan_source"].startswith("the packages")
    builds = [json.loads((f / "result.json").read_text()) for f in replays]
    planned = [{o["op"]: "{rows}x{cols}x{reduction}".format(**o["grid"]) for o in r["plan"]["ops"] if o.get("grid")}
               for r in builds]
    differing = {op for op in planned[1] if planned[1][op] != planned[0][op]}
    assert differing and {o["op"] for o in c["plan_differences"]} == differing
    for o in c["plan_differences"]:
        assert o["differs"]["grid"] == [planned[0][o["op"]], planned[1][o["op"]]]
        assert f"| op {o['op']} {o['kind']} {o['output']} | grid |" in done.stdout
    # Per-op cycles from each replay's run profile, the estimates from the build beside its package.
    steps = [json.loads((f / "run" / "run-profile.json").read_text())["steps"] for f in replays]
    for o in c["ops"]:
        for side in (0, 1):
            assert o["device"][side] == sum(
                (s["cycles"] - s["exchange"]) * (s["compiler_op"] == o["op"]) +
                s["exchange"] * (s["exchange_compiler_op"] == o["op"]) for s in steps[side])
            estimate = next(r["estimate"] for r in builds[side]["op_cycles"] if r["op"] == o["op"])
            assert o["estimate"][side] == estimate
            off = abs(estimate - o["device"][side]) > 0.1 * o["device"][side]
            assert off == any(w.startswith(f"op {o['op']} {o['kind']} {o['output']}: the estimate in {'AB'[side]} ")
                              for w in c["warnings"])


def test_runs_of_different_workloads_are_warned_of(runs, cli, tmp_path):
    vit = tmp_path / "vit"
    done = cli("--quiet", "--workload", "vit-small", "--tiles", "64", "--layers", "1", "--output", vit)
    assert done.returncode == 0, done.stdout + done.stderr
    done = compare(runs[0], vit, "--quiet")
    assert done.returncode == 0, done.stderr
    assert "A and B are different workloads (mlp and vit-small)" in done.stdout
    assert "different devices (16 and 64 tiles)" in done.stdout


def test_the_page_draws_the_comparison_and_both_indexes_link_it(replays, tmp_path, browser):
    from selenium.webdriver.common.by import By
    from ipu_e2e import report_checks
    a, b = replays
    assert compare(a / "run", b / "run", "--output", tmp_path / "cmp", "--quiet").returncode == 0
    c = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    report_checks.open_page(browser, tmp_path / "cmp" / "compare.html")
    bars = browser.execute_script("return compareReport.bars()")
    assert [(x["op"], x["cycles"]) for x in bars] == [(o["op"], o["device"]) for o in c["ops"]]
    flagged = {o["op"] for o in c["ops"] if any(e is not None and abs(e - d) > 0.1 * d
                                                    for e, d in zip(o["estimate"], o["device"]))}
    assert {x["op"] for x in bars if x["flagged"]} == flagged
    pa, pb = c["peaks"]["a"], c["peaks"]["b"]
    assert browser.execute_script("return compareReport.tiles()") == [t for t in range(len(pa)) if pa[t] != pb[t]]
    assert not report_checks.console_errors(browser)
    for folder in (a / "run", b / "run"):
        report_checks.open_page(browser, folder / "index.html")
        hrefs = [x.get_attribute("href") for x in browser.find_elements(By.CSS_SELECTOR, "li[data-report='compare'] a")]
        assert sum(h.endswith("/cmp/compare.html") for h in hrefs) == 1  # (another test's comparison may be listed)
        assert not report_checks.dangling_links(browser)
