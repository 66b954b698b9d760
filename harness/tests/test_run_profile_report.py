"""test_run_profile_report.py: the standalone run-profile page
(reports/run_profile, written by ipu_e2e.report.write_run_profile_html) in
headless Chromium, checked as a person would read it.  A real profile comes
from the CLI on 16 tiles; the page's totals, shares, step tooltips, pinned
step, tile tooltips and slowest-tile readout must show exactly the JSON's
numbers, zoom and pan must move the visible window, and the browser console
must stay free of errors.  A synthetic profile of 50,000 steps and 1472 tiles
checks that a large run renders and still answers a hover.  Expected values
are computed here from the JSON, never read back from the page's script.
Set IPU_E2E_SCREENSHOT_DIR to keep screenshots of the pages.
"""
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "harness") not in sys.path:
    sys.path.insert(0, str(REPO / "harness"))

from ipu_e2e import report  # noqa: E402

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.actions.wheel_input import ScrollOrigin  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CLASSES = ["compute", "sync", "exchange", "host", "control"]
WAIT = 20  # seconds: generous, the page must simply answer


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def real_profile(tmp_path_factory):
    """The run profile of the exchange-stress workload on 16 tiles, from the CLI."""
    out = tmp_path_factory.mktemp("run-profile")
    done = subprocess.run(["/usr/bin/python3", str(REPO / "harness" / "bin" / "ipu-e2e-test"), "--workload", "exchange-stress", "--tiles", "16",
                           "--quiet", "--profile-directory", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"ipu-e2e-test failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    profile = json.loads((out / "run-profile.json").read_text())
    assert profile["steps"] and len(profile["tiles"]["compute"]) == 16
    return profile


def synthetic_profile(steps=50_000, tiles=1472, seed=20240611):
    """A large, consistent profile: class totals are the steps' sums, each tile's
    compute + wait is the compute total, one step is by far the longest and one
    tile alone has the most compute."""
    rng = random.Random(seed)
    records, totals = [], dict.fromkeys(CLASSES, 0)
    kinds = ["step"] * 5 + ["compute"] * 3 + ["patch"] * 3 + ["host_in", "host_out"]
    for i in range(steps):
        kind = rng.choice(kinds)
        cost = dict.fromkeys(CLASSES, 0)
        tile = 0
        sent = received = 0
        if kind == "step":
            cost["sync"], cost["exchange"] = rng.randint(100, 200), rng.randint(40, 3000)
            sent = 4 * rng.randint(1, 100_000)
            received = sent * rng.randint(1, 4)
        elif kind == "compute":
            cost["compute"], tile = rng.randint(50, 6000), rng.randrange(tiles)
        elif kind == "patch":
            cost["control"] = 8 * rng.randint(1, 4)
        else:
            cost["host"] = rng.randint(500, 9000)
        records.append({"index": i, "kind": kind, "program": "init" if i < 64 else "main", "op": i // 3,
                        "compute_tile": tile, "cycles": sum(cost.values()), "sent_bytes": sent,
                        "received_bytes": received, **cost})
    longest = 31337
    records[longest].update(kind="compute", compute=250_000, sync=0, exchange=0, host=0, control=0,
                            compute_tile=977, cycles=250_000)
    for record in records:
        for c in CLASSES:
            totals[c] += record[c]
    cycles = sum(totals.values())
    compute = [rng.randint(0, totals["compute"] - 1) for _ in range(tiles)]
    compute[977] = totals["compute"]
    return {"cycles": cycles, "ms": cycles / 1.5e9 * 1e3, "clock_hz": 1.5e9, "totals": totals,
            "steps": records, "tiles": {"compute": compute, "wait": [totals["compute"] - c for c in compute]}}



def open_report(driver, profile, path):
    report.write_run_profile_html(path, profile)
    driver.get(path.as_uri())
    WebDriverWait(driver, WAIT).until(lambda d: d.execute_script("return document.body.dataset.ready === 'true'"))


def screenshot(driver, name):
    folder = os.environ.get("IPU_E2E_SCREENSHOT_DIR")
    if folder:
        driver.save_screenshot(str(Path(folder) / name))


def assert_no_console_errors(driver):
    severe = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not severe, f"console errors: {severe}"


# ---------------------------------------------------------------- helpers

def count(n):
    """A count as the reports print it (computed here, not by the page): 10,018,721."""
    return f"{n:,}"


def text(driver, selector):
    return driver.find_element(By.CSS_SELECTOR, selector).text


def point_at(driver, canvas, point):
    """Moves the mouse to a point given in CSS pixels from the canvas's top-left corner."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    dx = round(point["x"] - point["width"] / 2)
    dy = round(point["y"] - point["height"] / 2)
    ActionChains(driver).move_to_element_with_offset(canvas, dx, dy).perform()


def step_point(driver, index):
    point = driver.execute_script("return window.runProfile.stepPoint(arguments[0])", index)
    assert point is not None, f"step {index} is not in the visible window"
    return point


def hover_step(driver, index):
    """Hovers step `index`; returns the tooltip once it shows the step the page says that pixel shows."""
    point = step_point(driver, index)
    canvas = driver.find_element(By.ID, "steps-canvas")
    point_at(driver, canvas, point)
    expected = str(point["shows"])
    WebDriverWait(driver, WAIT).until(lambda d: d.execute_script(
        "const t = document.getElementById('tooltip');"
        "return !t.hidden && t.dataset.kind === 'step' && t.dataset.step === arguments[0]", expected))
    tooltip = driver.find_element(By.ID, "tooltip")
    assert tooltip.is_displayed()
    return point["shows"], tooltip


def assert_step_numbers(container, step):
    """The step's numbers as shown in a tooltip or the pinned panel equal the JSON's."""
    shown = {f: container.find_element(By.CSS_SELECTOR, f"[data-field='{f}']").text
             for f in ["index", "kind", "cycles", "compute_tile", "program", "op", "sent_bytes", "received_bytes",
                       *CLASSES]}
    expected = {f: count(step[f]) if f in ("cycles", "sent_bytes", "received_bytes", *CLASSES) else str(step[f])
                for f in shown}
    assert shown == expected


def hover_tile(driver, tile):
    point = driver.execute_script("return window.runProfile.tilePoint(arguments[0])", tile)
    assert point is not None
    point_at(driver, driver.find_element(By.ID, "tiles-canvas"), point)
    WebDriverWait(driver, WAIT).until(lambda d: d.execute_script(
        "const t = document.getElementById('tooltip');"
        "return !t.hidden && t.dataset.kind === 'tile' && t.dataset.tile === arguments[0]", str(tile)))
    return driver.find_element(By.ID, "tooltip")


def visible_steps(driver):
    canvas = driver.find_element(By.ID, "steps-canvas")
    return int(canvas.get_attribute("data-first-step")), int(canvas.get_attribute("data-last-step"))


def wait_for_range(driver, predicate):
    WebDriverWait(driver, WAIT).until(lambda d: predicate(*visible_steps(d)))
    return visible_steps(driver)


# ---------------------------------------------------------------- the real profile

def test_totals_match_the_json(browser, real_profile, tmp_path):
    open_report(browser, real_profile, tmp_path / "run-profile.html")
    cycles = real_profile["cycles"]
    assert text(browser, "#total-cards [data-field='cycles']") == count(cycles)
    assert text(browser, "#total-cards [data-field='ms']") == f"{real_profile['ms']:,.3f} ms"
    for c in CLASSES:
        value = real_profile["totals"][c]
        assert text(browser, f"#total-cards [data-field='{c}']") == count(value)
        share = text(browser, f"#total-cards [data-field='{c}-share']")
        match = re.fullmatch(r"(<)?(\d+\.\d)% of cycles", share)
        assert match, share
        exact = 100 * value / cycles
        if match.group(1):
            assert 0 < exact < 0.1
        else:
            assert abs(float(match.group(2)) - exact) <= 0.05 + 1e-9, (c, share, exact)
    meta = text(browser, "#meta")
    assert f"{len(real_profile['steps'])} steps" in meta and "16 tiles" in meta
    assert browser.title == f"Run profile \u2014 {count(cycles)} cycles"
    assert_no_console_errors(browser)


def test_step_hover_shows_the_steps_numbers(browser, real_profile, tmp_path):
    open_report(browser, real_profile, tmp_path / "run-profile.html")
    steps = real_profile["steps"]
    assert visible_steps(browser) == (0, len(steps) - 1)
    longest = max(range(len(steps)), key=lambda i: (steps[i]["cycles"], -i))
    patch = next(i for i, s in enumerate(steps) if s["kind"] == "patch")
    for index in (longest, patch, len(steps) - 1, 0):
        shown, tooltip = hover_step(browser, index)
        assert shown == index  # 16 tiles: one bar per step
        assert_step_numbers(tooltip, steps[index])
    assert text(browser, "#longest-step") == f"Longest step: {longest} ({steps[longest]['cycles']} cycles)"
    # leaving the chart hides the tooltip
    ActionChains(browser).move_to_element(browser.find_element(By.ID, "totals-title")).perform()
    WebDriverWait(browser, WAIT).until(lambda d: not d.find_element(By.ID, "tooltip").is_displayed())
    assert_no_console_errors(browser)


def test_click_pins_a_step_and_escape_unpins(browser, real_profile, tmp_path):
    open_report(browser, real_profile, tmp_path / "run-profile.html")
    steps = real_profile["steps"]
    pinned = browser.find_element(By.ID, "pinned")
    assert "No step pinned" in pinned.text
    index = max(range(len(steps)), key=lambda i: (steps[i]["host"], -i))
    hover_step(browser, index)
    ActionChains(browser).click().perform()
    WebDriverWait(browser, WAIT).until(lambda d: pinned.get_attribute("data-step") == str(index))
    assert "active" in pinned.get_attribute("class").split()
    assert_step_numbers(pinned, steps[index])
    assert browser.execute_script("return window.runProfile.pinned()") == index

    # the pin stays while another step is hovered
    other = 0 if index != 0 else 1
    _, tooltip = hover_step(browser, other)
    assert_step_numbers(tooltip, steps[other])
    assert_step_numbers(pinned, steps[index])
    screenshot(browser, "run_profile.png")

    # arrow keys walk the pin, Escape clears it
    ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()
    WebDriverWait(browser, WAIT).until(lambda d: pinned.get_attribute("data-step") == str(index + 1))
    assert_step_numbers(pinned, steps[index + 1])
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    WebDriverWait(browser, WAIT).until(lambda d: "No step pinned" in pinned.text)
    assert "active" not in pinned.get_attribute("class").split()
    assert browser.execute_script("return window.runProfile.pinned()") is None
    assert_no_console_errors(browser)


def test_zoom_and_pan_move_the_visible_window(browser, real_profile, tmp_path):
    open_report(browser, real_profile, tmp_path / "run-profile.html")
    n = len(real_profile["steps"])
    canvas = browser.find_element(By.ID, "steps-canvas")
    browser.find_element(By.ID, "zoom-in").click()
    first, last = wait_for_range(browser, lambda f, l: l - f + 1 < n)
    assert last - first + 1 <= n // 2 + 2
    # the wheel zooms in further, around the pointer
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    ActionChains(browser).scroll_from_origin(ScrollOrigin.from_element(canvas), 0, -400).perform()
    first2, last2 = wait_for_range(browser, lambda f, l: l - f < last - first)
    # dragging left shows later steps, and pins nothing
    ActionChains(browser).move_to_element(canvas).click_and_hold().move_by_offset(-300, 0).release().perform()
    first3, last3 = wait_for_range(browser, lambda f, l: f > first2)
    assert browser.execute_script("return window.runProfile.pinned()") is None
    # a step hovered in the zoomed window still shows its own numbers
    middle = (first3 + last3) // 2
    shown, tooltip = hover_step(browser, middle)
    assert shown == middle
    assert_step_numbers(tooltip, real_profile["steps"][middle])
    browser.find_element(By.ID, "zoom-fit").click()
    assert wait_for_range(browser, lambda f, l: (f, l) == (0, n - 1)) == (0, n - 1)
    assert text(browser, "#step-range") == f"Steps 0\u2013{n - 1} of {n}"
    assert_no_console_errors(browser)


def test_tile_hover_and_slowest_tile(browser, real_profile, tmp_path):
    open_report(browser, real_profile, tmp_path / "run-profile.html")
    compute, wait = real_profile["tiles"]["compute"], real_profile["tiles"]["wait"]
    for tile in (0, 5, 15):
        tooltip = hover_tile(browser, tile)
        assert tooltip.find_element(By.CSS_SELECTOR, "[data-field='tile']").text == str(tile)
        assert tooltip.find_element(By.CSS_SELECTOR, "[data-field='compute']").text == count(compute[tile])
        assert tooltip.find_element(By.CSS_SELECTOR, "[data-field='wait']").text == count(wait[tile])
    slowest = max(range(len(compute)), key=lambda t: (compute[t], -t))
    readout = browser.find_element(By.CSS_SELECTOR, "[data-readout='slowest']")
    assert readout.find_element(By.CSS_SELECTOR, "[data-field='tile']").text == str(slowest)
    assert readout.find_element(By.CSS_SELECTOR, "[data-field='compute']").text == count(compute[slowest])
    assert readout.find_element(By.CSS_SELECTOR, "[data-field='wait']").text == count(wait[slowest])
    assert_no_console_errors(browser)


# ---------------------------------------------------------------- a large profile

def test_large_profile_renders_and_answers(browser, tmp_path):
    profile = synthetic_profile()
    steps, compute = profile["steps"], profile["tiles"]["compute"]
    open_report(browser, profile, tmp_path / "large.html")
    assert text(browser, "#total-cards [data-field='cycles']") == count(profile["cycles"])
    assert visible_steps(browser) == (0, len(steps) - 1)
    assert browser.find_element(By.ID, "steps-canvas").get_attribute("data-mode") == "column"
    # many steps share a pixel: that pixel shows its longest step, so the run's longest is there
    shown, tooltip = hover_step(browser, 31337)
    assert shown == 31337
    assert_step_numbers(tooltip, steps[31337])
    assert text(browser, "#longest-step") == "Longest step: 31337 (250,000 cycles)"
    # any hovered pixel reports a real step with its own numbers
    shown, tooltip = hover_step(browser, 20_000)
    assert abs(shown - 20_000) < 200
    assert_step_numbers(tooltip, steps[shown])
    # zoomed in, every step has its own bar again
    browser.execute_script("window.runProfile.setView(arguments[0], 60)", 40_000)
    first, last = visible_steps(browser)
    assert first <= 40_010 <= last and last - first < 70
    shown, tooltip = hover_step(browser, 40_010)
    assert shown == 40_010
    assert_step_numbers(tooltip, steps[40_010])
    # tiles: 1472 of them, the slowest found and hoverable
    readout = browser.find_element(By.CSS_SELECTOR, "[data-readout='slowest']")
    assert readout.find_element(By.CSS_SELECTOR, "[data-field='tile']").text == "977"
    tooltip = hover_tile(browser, 977)
    assert tooltip.find_element(By.CSS_SELECTOR, "[data-field='compute']").text == count(compute[977])
    tooltip = hover_tile(browser, 1471)
    assert tooltip.find_element(By.CSS_SELECTOR, "[data-field='compute']").text == count(compute[1471])
    screenshot(browser, "run_profile_large.png")
    assert_no_console_errors(browser)


# ---------------------------------------------------------------- the writer

def test_embedded_json_cannot_end_the_script(browser, real_profile, tmp_path):
    profile = json.loads(json.dumps(real_profile))
    profile["steps"][0]["program"] = "</script><script>window.injected = 1</script><!--"
    path = tmp_path / "hostile.html"
    open_report(browser, profile, path)
    assert "</script><script>" not in path.read_text().split('id="run-profile-data">', 1)[1].split("</script>")[0]
    assert browser.execute_script("return window.injected === undefined")
    _, tooltip = hover_step(browser, 0)
    assert tooltip.find_element(By.CSS_SELECTOR, "[data-field='program']").text == profile["steps"][0]["program"]
    assert_no_console_errors(browser)


def test_writer_refuses_what_is_not_a_profile(tmp_path):
    with pytest.raises(ValueError, match="missing"):
        report.write_run_profile_html(tmp_path / "x.html", {"cycles": 1})
    with pytest.raises(ValueError):
        report.write_run_profile_html(tmp_path / "x.html", {"cycles": float("nan"), "totals": {}, "steps": [],
                                                            "tiles": {}})
    assert not list(tmp_path.iterdir())  # nothing written, not even a temporary file
