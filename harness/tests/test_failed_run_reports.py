"""test_failed_run_reports.py: the reports of a run that went wrong.

- A device fault (a seeded lifetime bug, exit 3): result.json lists only
  reports that exist, and the run profile and the run-time memory timeline
  cover the run up to the fault (every step before the fault's phase, the
  fault recorded in the profile).
- In headless Chromium, the index leads with the text the CLI printed, and
  its links land on the fault's tile and phase: the placement viewer with
  the compiler's allocation holding the faulting byte pinned (the one live
  then, or nearest in time), the run profile on its last completed step with
  the fault stated above it.
- A failed per-op check (a seeded FP8 scale bug, exit 1): the index leads
  with the first divergent op, and its placement link lands on that op's
  tile and phase with its output's allocation pinned.
"""
import json
import subprocess
from pathlib import Path

import pytest

from ipu_e2e import placement_report

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "harness" / "bin" / "ipu-e2e-test"
SMALL = ["--workload", "mlp", "--tiles", "16", "--tokens", "64", "--channels", "128", "--hidden", "256", "--blocks",
         "2"]


def run_folder(folder, *args):
    return subprocess.run(["/usr/bin/python3", str(CLI), *SMALL, *args, "--quiet", "--output", str(folder),
                           "--profile-directory", str(folder / "run"), "--memory-profile-directory",
                           str(folder / "memory")], capture_output=True, text=True, timeout=900)


def load(path):
    return json.loads(Path(path).read_text())


def click_through(browser, link):
    """Clicks a link of the index and waits for the page it opens."""
    from selenium.webdriver.support.ui import WebDriverWait
    page = link.get_attribute("href").split("#")[0]
    link.click()
    WebDriverWait(browser, 60).until(lambda d: d.current_url.split("#")[0] == page and
                                     d.execute_script("return document.body.dataset.ready") == "true")


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fault-run")
    done = run_folder(folder, "--inject", "lifetime-end-early")
    assert done.returncode == 3, done.stdout + done.stderr
    return folder, done.stdout


@pytest.fixture(scope="module")
def divergent_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("divergent-run")
    done = run_folder(folder, "--inject", "fp8-scale-twice", "--reference-run", "--check-ops")
    assert done.returncode == 1, done.stdout + done.stderr
    return folder, done.stdout


def test_a_fault_runs_reports_cover_the_run_up_to_the_fault(fault_run):
    folder, _ = fault_run
    result = load(folder / "result.json")
    assert result["status"] == "FAULT"
    assert all((folder / path).exists() for path in result["reports"].values()), result["reports"]
    assert {"run_profile", "memory_timeline", "placement"} <= set(result["reports"])
    profile, fault = load(folder / "run" / "run-profile.json"), result["fault"]
    assert profile["fault"] == fault
    phases = [s["phase"] for s in profile["steps"]]
    assert phases and max(phases) < fault["phase"] and len(phases) == fault["step"]
    assert profile["cycles"] == sum(s["cycles"] for s in profile["steps"])
    timeline = load(folder / "run" / "memory-timeline.json")
    assert max(timeline["steps"]["phase"]) <= fault["phase"]


def test_a_fault_runs_index_leads_with_the_fault_and_lands_on_it(fault_run, browser):
    from selenium.webdriver.common.by import By
    from ipu_e2e import report_checks
    folder, printed = fault_run
    fault = load(folder / "result.json")["fault"]
    report_checks.open_page(browser, folder / "index.html")
    text = browser.find_element(By.ID, "failure-text").text
    assert text.splitlines()[0] == printed.splitlines()[0] and text.startswith("FAULT " + fault["kind"])
    links = {a.get_attribute("data-report"): a for a in browser.find_elements(By.CSS_SELECTOR, "#failure-links a")}
    assert set(links) == {"placement", "run_profile"}
    assert not report_checks.dangling_links(browser)

    click_through(browser, links["placement"])
    placement = placement_report.load(folder / "memory")
    tile, step, pinned = browser.execute_script(
        "return [placementViewer.tile(), placementViewer.step(), placementViewer.pinned()]")
    assert tile == fault["tile"]
    phases = placement["steps"]["phase"]
    assert step == min(s for s, p in enumerate(phases) if p >= fault["phase"])
    # Pinned: of the compiler's allocations holding the faulting byte on that tile, one whose life (in
    # steps) is nearest the fault's step.
    a, address = placement["allocations"], fault["address_lo"]
    holders = {i: 0 if a["first"][i] <= step <= a["last"][i] else min(abs(a["first"][i] - step),
                                                                      abs(step - a["last"][i]))
               for i in range(len(a["tile"]))
               if a["tile"][i] == tile and a["address"][i] <= address < a["address"][i] + a["size"][i]}
    assert holders and holders.get(pinned) == min(holders.values())

    report_checks.open_page(browser, folder / "index.html")
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#failure-links a[data-report='run_profile']"))
    profile = load(folder / "run" / "run-profile.json")
    assert browser.execute_script("return runProfile.pinned()") == len(profile["steps"]) - 1
    banner = browser.find_element(By.ID, "fault")
    assert banner.is_displayed() and f"{fault['kind']} on tile {fault['tile']} at phase {fault['phase']}" in banner.text
    assert not report_checks.console_errors(browser)


def test_a_failed_checks_index_leads_with_the_first_divergent_op(divergent_run, browser):
    from selenium.webdriver.common.by import By
    from ipu_e2e import report_checks
    folder, printed = divergent_run
    d = load(folder / "result.json")["op_check"]["first_divergence"]
    report_checks.open_page(browser, folder / "index.html")
    text = browser.find_element(By.ID, "failure-text").text
    assert f"first divergent op: {d['label']}" in text and text.splitlines()[1] in printed
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#failure-links a[data-report='placement']"))
    placement = placement_report.load(folder / "memory")
    tile, step, pinned = browser.execute_script(
        "return [placementViewer.tile(), placementViewer.step(), placementViewer.pinned()]")
    assert tile == d["tile"] and placement["steps"]["phase"][step] >= d["phase"]
    assert placement["names"][placement["allocations"]["name"][pinned]] == d["allocation"]
    assert not report_checks.console_errors(browser)
