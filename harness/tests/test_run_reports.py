"""test_run_reports.py: the reports of one run as a set, and the run-time
memory timeline.

- The timeline's per-tile peaks (built from the device's allocation events)
  equal the placement report's (the compiler's liveness walker over the
  placed buffers) on every tile, for the full-size MLP and vit-small, and a
  third reading computed here from the timeline's own allocation table (live
  when the phase lies in first..last) agrees on every tile; each peak's
  category breakdown adds up to it.
- One numbering: every report names steps by the package phase; the phases
  of the placement report's steps, the memory profile's step groups and the
  run profile's executed steps are the same set.
- result.json and run-profile.json carry their schema, version, the command
  line and the library's SHA-256 (computed here), and say where the reports
  are; a rejected plan exits 1 with result.json REJECTED.
- In headless Chromium: the index lists every report; from the placement
  viewer, a tile and step selected there land on the same tile and phase in
  the run profile and in the memory profile (through the links, whose hash
  carries the place); the run profile's "live now" list adds up to the live
  bytes computed here; the memory chart's tooltip names the compiler op; no
  console errors; a place written into an open page's URL hash moves the
  page there.
"""
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from ipu_e2e import placement_report

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "harness" / "bin" / "ipu-e2e-test"
SMALL = ["--workload", "mlp", "--tiles", "16", "--tokens", "64", "--channels", "128", "--hidden", "256", "--blocks",
         "2"]
WAIT = 30


def run_folder(folder, *args):
    done = subprocess.run(["/usr/bin/python3", str(CLI), *args, "--quiet", "--output", str(folder),
                           "--profile-directory", str(folder / "run"), "--memory-profile-directory",
                           str(folder / "memory")], capture_output=True, text=True, timeout=900)
    return done


def load(path):
    return json.loads(Path(path).read_text())


def peaks_from_table(timeline):
    """Per tile, the largest sum of live tensor-area bytes over the executed phases, from the allocation table."""
    a, steps = timeline["allocations"], timeline["steps"]
    host = a["kinds"].index("host staging")
    phases = sorted(set(steps["phase"]))
    best = [0] * timeline["tiles"]
    by_tile = {}
    for i, t in enumerate(a["tile"]):
        if a["kind"][i] != host:
            by_tile.setdefault(t, []).append(i)
    for t, ids in by_tile.items():
        for p in phases:
            live = sum(a["size"][i] for i in ids if a["first"][i] <= p and (a["last"][i] < 0 or p <= a["last"][i]))
            best[t] = max(best[t], live)
    return best


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run-reports")
    done = run_folder(folder, *SMALL, "--reference-run")
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


@pytest.mark.parametrize("workload", [["--workload", "mlp"], ["--workload", "vit-small", "--tiles", "64"]],
                         ids=["mlp-full", "vit-small"])
def test_run_time_peaks_equal_the_placement_reports_on_every_tile(tmp_path, workload):
    done = run_folder(tmp_path, *workload)
    assert done.returncode == 0, done.stdout + done.stderr
    timeline = load(tmp_path / "run" / "memory-timeline.json")
    placement = placement_report.load(tmp_path / "memory")
    placed = [max(series) for series in placement["footprint"]["estimate"]]
    run_time = timeline["tile_peaks"]["peak_bytes"]
    assert len(run_time) == placement["tiles"] == timeline["tiles"]
    assert run_time == placed
    if workload[1] == "vit-small":  # the table's own reading (at full size it would take minutes here)
        assert peaks_from_table(timeline) == run_time
        # Every executed phase's device-wide live bytes, Repeat back edges included, and their categories.
        a, steps = timeline["allocations"], timeline["steps"]
        host = a["kinds"].index("host staging")
        ids = [i for i in range(len(a["tile"])) if a["kind"][i] != host]
        for e, p in enumerate(steps["phase"]):
            live = sum(a["size"][i] for i in ids if a["first"][i] <= p and (a["last"][i] < 0 or p <= a["last"][i]))
            assert steps["live"][e] == live == sum(steps["by_category"][e]), (e, p)
    for total, by_category in zip(run_time, timeline["tile_peaks"]["peak_by_category"]):
        assert sum(by_category) == total
    peak = timeline["peak"]
    assert peak["bytes"] == max(run_time) and sum(peak["by_category"]) == peak["bytes"]
    a = timeline["allocations"]
    assert sum(a["size"][i] for i in peak["live"]) == peak["bytes"]
    assert all(a["tile"][i] == peak["tile"] for i in peak["live"])


def test_every_report_numbers_steps_by_the_package_phase(small_run):
    placement = placement_report.load(small_run / "memory")
    profile = load(small_run / "memory" / "memory-mlp-1.json")
    run = load(small_run / "run" / "run-profile.json")
    placed_phases = placement["steps"]["phase"]
    assert placed_phases == sorted(placed_phases) and len(set(placed_phases)) == len(placed_phases)
    # Every memory-profile group spans the phases of its program steps.
    for group in profile["timeline"]["steps"]:
        first, last = group["program_steps"]
        assert group["phases"] == [placed_phases[first], placed_phases[last]]
    # Executed steps name the phases of compute and host steps; Repeat body steps carry their iteration.
    executed = {(s["phase"], s["iteration"]) for s in run["steps"] if s["kind"] != "patch"}
    repeat = placement["repeat"]
    body = set(placed_phases[repeat["first"]:repeat["first"] + repeat["count"]])
    main = {p for p, init in zip(placed_phases, placement["steps"]["init"]) if not init and p % 2 == 0}
    assert {p for p, _ in executed} == main
    assert {i for p, i in executed if p in body} == set(range(repeat["iterations"]))
    assert all(i is None for p, i in executed if p not in body)


def test_records_say_what_ran_and_where_the_reports_are(small_run):
    result, run = load(small_run / "result.json"), load(small_run / "run" / "run-profile.json")
    library = Path(result["library"]["path"])
    digest = hashlib.sha256(library.read_bytes()).hexdigest()
    for record, schema in ((result, "ipu-e2e/result"), (run, "ipu-e2e/run-profile")):
        assert record["schema"] == schema and record["version"] == 1
        assert record["library"]["sha256"] == digest
        assert record["command"][0] == "ipu-e2e-test" and "--reference-run" in record["command"]
    for kind, path in result["reports"].items():
        assert (small_run / path).exists(), kind
    assert set(result["reports"]) == {"index", "placement", "memory", "run_profile", "memory_timeline"}


def test_a_rejected_plan_exits_1_with_its_record(tmp_path):
    done = run_folder(tmp_path, *SMALL, "--memory-budget", "512")
    assert done.returncode == 1, done.stdout + done.stderr
    result = load(tmp_path / "result.json")
    assert result["status"] == "REJECTED" and result["schema"] == "ipu-e2e/result"
    r = result["rejection"]
    assert r["stage"] == "plan" and "catalogue budget of 512 bytes" in r["reason"]
    profiles = [load(tmp_path / "memory" / name) for name in r["memory_profiles"]]
    rejected = [p for p in profiles if p["status"] == "rejected"]
    assert len(rejected) == 1 and rejected[0]["peak"]["total"] == r["lower_bound_bytes"]
    assert "REJECTED" in done.stdout and "smallest candidate needs" in done.stdout
    assert (tmp_path / "index.html").exists()


# ---------------------------------------------------------------- in the browser


def test_the_index_lists_every_report(small_run, browser):
    from selenium.webdriver.common.by import By
    from ipu_e2e import report_checks
    report_checks.open_page(browser, small_run / "index.html")
    listed = {li.get_attribute("data-report") for li in browser.find_elements(By.CSS_SELECTOR, "#reports li")}
    assert listed == {"placement", "memory", "run_profile", "result", "memory_timeline"}
    assert not report_checks.dangling_links(browser)
    assert not report_checks.console_errors(browser)


def test_the_placement_viewer_opens_on_the_largest_estimate(small_run, browser):
    from ipu_e2e import report_checks
    placement = placement_report.load(small_run / "memory")
    report_checks.open_page(browser, small_run / "memory" / "placement.html")
    best = max((v, -t, -s) for t, series in enumerate(placement["footprint"]["estimate"]) for s, v in enumerate(series))
    assert browser.execute_script("return [placementViewer.tile(), placementViewer.step()]") == [-best[1], -best[2]]


def test_links_heatmap_search_and_tooltips(small_run, browser):
    """report_checks' checks (the `reports` benchmark runs them at full size)."""
    from ipu_e2e import report_checks
    placement = placement_report.load(small_run / "memory")
    first_main = placement["steps"]["init"].index(False)
    for tile, step in ((3, report_checks.body_step(placement)), (11, first_main)):
        report_checks.check_links(browser, small_run, tile, step)
        report_checks.check_heatmap(browser, small_run, tile, step)
    report_checks.check_search(browser, small_run, "hidden")
    report_checks.check_tooltips(browser, small_run)
    for tile, column in ((4, 0), (13, 3)):
        report_checks.check_cycles(browser, small_run, tile, column)
    assert not report_checks.console_errors(browser)


def test_pages_follow_a_changed_url_hash(small_run, browser):
    """A place typed into the address bar (or linked from elsewhere) moves an open page there."""
    from selenium.webdriver.support.ui import WebDriverWait
    from ipu_e2e import report_checks
    placement = placement_report.load(small_run / "memory")
    step = report_checks.body_step(placement)
    phase = placement["steps"]["phase"][step]
    reads = {"placement": "return [placementViewer.tile(), placementViewer.step()]",
             "run_profile": "return [runProfile.selectedTile(), runProfile.phase()]",
             "memory": "return [memoryProfile.state().tile, memoryProfile.state().phase]"}
    wanted = {"placement": [7, step], "run_profile": [7, phase], "memory": [7, phase]}
    pages = {"placement": small_run / "memory" / "placement.html", "run_profile": small_run / "run" / "run-profile.html",
             "memory": small_run / "memory" / "memory-mlp-1.html"}
    for kind, page in pages.items():
        report_checks.open_page(browser, page)
        assert browser.execute_script(reads[kind]) != wanted[kind]
        browser.execute_script(f"window.location.hash = 'tile=7&phase={phase}'")
        # hashchange is dispatched as a task of its own: wait for it.
        WebDriverWait(browser, WAIT).until(lambda d: d.execute_script(reads[kind]) == wanted[kind])
    assert not report_checks.console_errors(browser)


@pytest.fixture(scope="module")
def vit_small_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vit-small-reports")
    done = run_folder(folder, "--workload", "vit-small", "--tiles", "16", "--layers", "2", "--tokens", "20",
                      "--heads", "4", "--head-dim", "8", "--hidden", "40")
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


def test_an_exchange_phase_in_a_repeat_lands_on_its_step_in_every_report(vit_small_run, browser):
    """An exchange joins its compute step's control op: the run profile pins that op's step, and the place keeps
    the exchange's own phase (and the run-time memory section shows it)."""
    from ipu_e2e import report_checks
    placement = placement_report.load(vit_small_run / "memory")
    repeat, phases = placement["repeat"], placement["steps"]["phase"]
    body = range(repeat["first"], repeat["first"] + repeat["count"])
    exchange = next(s for s in body if phases[s] % 2 and s > repeat["first"] and phases[s - 1] == phases[s] - 1)
    report_checks.check_links(browser, vit_small_run, 5, exchange)
    report_checks.check_heatmap(browser, vit_small_run, 9, exchange)
    report_checks.check_search(browser, vit_small_run, "residual")
    assert not report_checks.console_errors(browser)


def test_the_memory_profile_stacks_categories_that_add_up_to_the_usage(small_run, browser):
    """The chart's categories come from the live values and the step's scratch; their sum in each step group's
    tooltip is the profile's own per-tile usage (standard + interleaved), and the tooltip names the step."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from ipu_e2e import report_checks
    profile = load(small_run / "memory" / "memory-mlp-1.json")
    report_checks.open_page(browser, small_run / "memory" / "memory-mlp-1.html", "tile=5")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#chart path.category")) == 5
    browser.find_element(By.ID, "show-init").click()  # every step group, init too
    hit = browser.find_element(By.CSS_SELECTOR, "#chart .chart-hit")
    width, steps = hit.rect["width"], profile["timeline"]["steps"]
    for i, step in enumerate(steps):
        ActionChains(browser).move_to_element_with_offset(hit, int((i + 0.5) * width / len(steps) - width / 2),
                                                          0).perform()
        tooltip = browser.find_element(By.ID, "tooltip")
        total = tooltip.find_element(By.CSS_SELECTOR, "[data-field='total']").text
        usage = sum(step["tile_usage"][5])
        assert total.split(" B")[0] == f"{usage:,}", (i, total, usage)
        assert step["label"] in tooltip.find_element(By.CSS_SELECTOR, "[data-field='op']").text
    assert not report_checks.console_errors(browser)


def test_the_full_size_mlp_reports_in_the_browser(tmp_path, browser):
    """report_checks' checks on the full-size MLP (1472 tiles), at the run-time memory peak's tile; the
    `reports` benchmark runs the same on the full ViT (a nightly case)."""
    from ipu_e2e import report_checks
    done = run_folder(tmp_path, "--workload", "mlp")
    assert done.returncode == 0, done.stdout + done.stderr
    placement = placement_report.load(tmp_path / "memory")
    tile = load(tmp_path / "run" / "memory-timeline.json")["peak"]["tile"]
    results, paints = report_checks.run_all(browser, tmp_path, tile, report_checks.body_step(placement, 3), "hidden")
    assert all(r["ok"] for r in results.values()), results
    assert len(paints) == 2
