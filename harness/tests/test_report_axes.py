"""test_report_axes.py: the reports' one time axis and their scales, in
headless Chromium, on vit-small (16 tiles, 3 layers in a Repeat) with every
report written.

- Tick labels: the run profile's step timeline, its run-time memory chart
  and the planner's memory profile chart each tick positions in execution
  order, label each "phase P" (with " · it I" inside a Repeat, computed here
  from the JSON), show the Repeat's iterations when a range spans several,
  and two charts showing one (phase, iteration) label it alike.  The
  run-time memory chart opens with init collapsed (its first position is
  the main program's first executed phase).
- The placement heatmap's colour scale: its ends are the least and largest
  of the footprint's estimate in placement.json, and in the mode that
  subtracts resident parameters, those of the estimate less the parameter
  allocations live at each step (summed here from the allocation table);
  the cycles heatmap's, the least and largest of run-profile.json's
  compute cycles per tile and op.
- The fullest tiles' table: the 20 fullest tiles at their peaks with the
  bytes of each kind live there, from the report; it sorts by a column.
- Drag-to-zoom: a drag across the run-time memory chart, the memory
  profile chart, the run profile's overview strip and the placement
  footprint chart narrows the visible range to the part dragged over; Reset
  zoom restores it.
"""
import json
import subprocess
from pathlib import Path

import pytest

from ipu_e2e import placement_report, report_checks

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "harness" / "bin" / "ipu-e2e-test"
VIT = ["--workload", "vit-small", "--tiles", "16", "--layers", "3", "--tokens", "20", "--heads", "4", "--head-dim",
       "8", "--hidden", "40"]


def load(path):
    return json.loads(Path(path).read_text())


def label(phase, iteration):
    return f"phase {phase}" + (f" \u00b7 it {iteration}" if iteration is not None else "")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("axes")
    done = subprocess.run(["/usr/bin/python3", str(CLI), *VIT, "--quiet", "--output", str(folder),
                           "--profile-directory", str(folder / "run"), "--memory-profile-directory",
                           str(folder / "memory")], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


def drag(browser, element, start, end):
    """A real pointer drag across element from fraction start to fraction end of its width."""
    from selenium.webdriver.common.action_chains import ActionChains
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    width = element.rect["width"]
    ActionChains(browser).move_to_element_with_offset(element, int((start - 0.5) * width), 0).click_and_hold() \
        .move_by_offset(int((end - start) * width / 2), 0).move_by_offset(int((end - start) * width / 2), 0) \
        .release().perform()


def test_tick_labels_follow_execution_and_agree_across_the_time_charts(run, browser):
    timeline, profile = load(run / "run" / "memory-timeline.json"), load(run / "run" / "run-profile.json")
    memory = load(run / "memory" / "memory-vit-small-1.json")
    report_checks.open_page(browser, run / "run" / "run-profile.html")
    charts = {"steps": browser.execute_script("return runProfile.ticks()"),
              "memory": browser.execute_script("return runMemory.ticks()")}
    positions = {"steps": [(s["phase"], s["iteration"]) for s in profile["steps"]],
                 "memory": list(zip(timeline["steps"]["phase"], timeline["steps"]["iteration"]))}
    report_checks.open_page(browser, run / "memory" / "memory-vit-small-1.html")
    charts["profile"] = browser.execute_script("return memoryProfile.ticks()")
    positions["profile"] = [(s["phases"][0], None) for s in memory["timeline"]["steps"]]
    for name, ticks in charts.items():
        assert len(ticks) >= 2, name
        indices = [t["index"] for t in ticks]
        assert indices == sorted(set(indices)), name  # in execution order, each once
        for t in ticks:
            assert (t["phase"], t["iteration"]) == positions[name][t["index"]], (name, t)
            assert t["label"] == label(t["phase"], t["iteration"]), (name, t)
    for name in ("steps", "memory"):  # the Repeat's iterations shown, in order
        iterations = [t["iteration"] for t in charts[name]]
        assert len(set(iterations)) >= 2 and iterations == sorted(iterations), (name, iterations)
    labels = {}
    for name, ticks in charts.items():
        for t in ticks:
            assert labels.setdefault((t["phase"], t["iteration"]), t["label"]) == t["label"]
    # Init collapsed: the memory chart's first tick is at the main program's first executed phase.
    assert charts["memory"][0]["index"] >= timeline["steps"]["program"].index("main")
    assert not report_checks.console_errors(browser)


def test_the_heatmaps_scale_spans_the_values_it_shows(run, browser):
    from selenium.webdriver.support.ui import WebDriverWait
    placement = placement_report.load(run / "memory")
    estimate = placement["footprint"]["estimate"]
    report_checks.open_page(browser, run / "memory" / "placement.html")
    WebDriverWait(browser, 60).until(lambda d: d.execute_script("return placementDevice.drawn()"))
    legend = browser.execute_script("return placementDevice.legend()")
    assert (legend["min"], legend["max"]) == (min(map(min, estimate)), max(map(max, estimate)))
    assert legend["mode"] == "live"
    shown = browser.execute_script("return [document.getElementById('device-legend-min').textContent,"
                                   "document.getElementById('device-legend-max').textContent]")
    assert shown[0].startswith(f"{legend['min']:,} B") and shown[1].startswith(f"{legend['max']:,} B")
    # Less the resident parameters: the parameter allocations live at each step, summed from the table.
    a, steps = placement["allocations"], len(placement["steps"]["label"])
    kind = a["kinds"].index("parameter")
    params = [[0] * steps for _ in estimate]
    for i, t in enumerate(a["tile"]):
        if a["kind"][i] == kind:
            for s in range(max(0, a["first"][i]), min(steps - 1, a["last"][i]) + 1):
                params[t][s] += a["size"][i]
    rest = [max(0, v - params[t][s]) for t, series in enumerate(estimate) for s, v in enumerate(series)]
    browser.execute_script("placementDevice.setMode('activations')")
    legend = browser.execute_script("return placementDevice.legend()")
    assert (legend["min"], legend["max"], legend["mode"]) == (min(rest), max(rest), "activations")
    assert max(rest) < max(map(max, estimate))  # parameters fill part of every tile
    # The run profile's cycles heatmap: its scale's ends are the least and largest compute cycles per tile and op.
    cycles = load(run / "run" / "run-profile.json")["tiles"]["compute_by_op"]["cycles"]
    report_checks.open_page(browser, run / "run" / "run-profile.html")
    legend = browser.execute_script("return runCycles.legend()")
    assert (legend["min"], legend["max"]) == (min(map(min, cycles)), max(map(max, cycles)))
    assert browser.execute_script("return document.getElementById('cycles-legend-max').textContent") == \
        f"{legend['max']:,} cycles"
    assert not report_checks.console_errors(browser)


def drag_zooms_and_resets(browser, chart, view, reset, start, end):
    """Drags across the chart (a CSS selector) from start to end (fractions of its width): the range the page's
    view (a script's expression, {lo, hi}) shows narrows inside the one before; the reset button (an id) restores
    it.  Returns (before, after)."""
    from selenium.webdriver.common.by import By
    before = browser.execute_script(f"return {view}")
    drag(browser, browser.find_element(By.CSS_SELECTOR, chart), start, end)
    after = browser.execute_script(f"return {view}")
    assert before["lo"] < after["lo"] < after["hi"] < before["hi"], (chart, before, after)
    browser.find_element(By.ID, reset).click()
    assert browser.execute_script(f"return {view}") == before, chart
    return before, after


def test_drag_zoom_narrows_and_reset_restores(run, browser):
    from selenium.webdriver.common.by import By
    report_checks.open_page(browser, run / "run" / "run-profile.html")
    before, after = drag_zooms_and_resets(browser, "#memory-chart rect.hit", "runMemory.view()", "memory-reset-zoom",
                                          0.3, 0.6)
    width = before["hi"] - before["lo"]
    assert abs(after["lo"] - (before["lo"] + 0.3 * width)) <= 0.05 * width
    assert abs(after["hi"] - (before["lo"] + 0.6 * width)) <= 0.05 * width

    n = len(load(run / "run" / "run-profile.json")["steps"])
    assert browser.execute_script("return runProfile.view()")["span"] == n
    drag(browser, browser.find_element(By.ID, "overview-canvas"), 0.4, 0.7)
    view = browser.execute_script("return runProfile.view()")
    assert view["span"] < n and view["start"] > 0
    browser.find_element(By.ID, "zoom-fit").click()
    assert browser.execute_script("return runProfile.view()")["span"] == n

    report_checks.open_page(browser, run / "memory" / "memory-vit-small-1.html")
    drag_zooms_and_resets(browser, "#chart .chart-hit", "memoryProfile.view()", "reset-zoom", 0.2, 0.5)
    report_checks.open_page(browser, run / "memory" / "placement.html")
    drag_zooms_and_resets(browser, "#footprint-canvas", "placementViewer.footprintView()", "footprint-reset-zoom",
                          0.4, 0.8)
    assert not report_checks.console_errors(browser)


def test_the_fullest_tiles_table_lists_the_peaks_and_sorts(run, browser):
    """The 20 fullest tiles by their largest estimate, each at its first step at that peak, with the bytes of each
    kind of allocation live there (summed here from the allocation table); a click on a column's head sorts by it
    (largest first), a second click reverses."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    placement = placement_report.load(run / "memory")
    estimate, a = placement["footprint"]["estimate"], placement["allocations"]
    peaks = [max(series) for series in estimate]
    top = sorted(range(len(peaks)), key=lambda t: (-peaks[t], t))[:20]
    report_checks.open_page(browser, run / "memory" / "placement.html")
    WebDriverWait(browser, 60).until(lambda d: d.execute_script("return placementDevice.drawn()"))
    rows = browser.execute_script("return placementDevice.fullest()")
    assert [r["tile"] for r in rows] == top
    for r in rows:
        step = estimate[r["tile"]].index(peaks[r["tile"]])
        kinds = [0] * len(a["kinds"])
        for i, t in enumerate(a["tile"]):
            if t == r["tile"] and a["first"][i] <= step <= a["last"][i]:
                kinds[a["kind"][i]] += a["size"][i]
        assert (r["peak"], r["step"], r["kinds"]) == (peaks[r["tile"]], step, kinds)
    browser.find_element(By.CSS_SELECTOR, "#fullest-box summary").click()
    head = browser.find_element(By.CSS_SELECTOR, "#fullest-tiles button[data-sort='tile']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", head)
    head.click()
    assert [r["tile"] for r in browser.execute_script("return placementDevice.fullest()")] == sorted(top, reverse=True)
    browser.find_element(By.CSS_SELECTOR, "#fullest-tiles button[data-sort='tile']").click()
    assert [r["tile"] for r in browser.execute_script("return placementDevice.fullest()")] == sorted(top)
    assert not report_checks.console_errors(browser)
