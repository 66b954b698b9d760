"""test_memory_report.py: the standalone planner memory profile page
(reports/memory, written by ipu_e2e.memory_report) in headless Chromium, on
a full-size profile: the FP8 MLP on 1472 tiles with two blocks through a
Repeat (so its weights are parameter sequences of two members), compiled
once.  Each control is used as a person would and the page is read back:
it opens on the tile and step of the total peak; the standard and total
peak buttons select their step and tile; a tile typed into the selector
stays selected while the step moves (arrow button, chart click); "Step's
peak tile" selects the fullest tile of the step; the filter keeps only
matching names; a row expands to its layout and aliases; the grouping
toggle splits a sequence into its members.  Every expected number (peaks,
usage, rows) is computed here from the JSON.  The console must stay free of
errors.  The writer refuses what is not a version 3 memory profile.
"""
import json

import pytest

from ipu_e2e import memory_report, native, profiles
from ipu_e2e.browser import chromium

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

WAIT = 30


@pytest.fixture(scope="module")
def full_profile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("memory-full")
    ctx = native.Context()
    workload = native.Workload(ctx, {"workload": "mlp", "blocks": 2})
    package, report = workload.compile(profiles.load(ctx, "c600"), memory_profiles=folder)
    package.close()
    written = memory_report.write_pages(folder, report["memory_profiles"])
    assert len(written) == 1
    profile = json.loads(written[0].read_text())
    assert profile["tiles"] == 1472 and profile["status"] == "finalist"
    return profile, written[0].with_suffix(".html")


@pytest.fixture(scope="module")
def page(full_profile, tmp_path_factory):
    profile, html = full_profile
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"))
    try:
        driver.get(html.as_uri())
        WebDriverWait(driver, WAIT).until(lambda d: d.execute_script("return !!window.memoryProfile"))
        yield Page(driver, profile)
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        driver.quit()


def fmt(n):
    return f"{n:,}"


class Page:
    def __init__(self, driver, profile):
        self.d, self.p = driver, profile
        self.steps, self.values = profile["timeline"]["steps"], profile["timeline"]["values"]

    def state(self):
        s = self.d.execute_script("return window.memoryProfile.state()")
        return s["step"], s["tile"]

    def click(self, element_id):
        self.d.find_element(By.ID, element_id).click()

    def click_step(self, step):
        """A click on the chart's column of step group `step`, every group shown (init too, unzoomed)."""
        if not self.d.find_element(By.ID, "show-init").is_selected():
            self.click("show-init")
        hit = self.d.find_element(By.CSS_SELECTOR, "#chart .chart-hit")
        self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", hit)
        width = hit.rect["width"]
        ActionChains(self.d).move_to_element_with_offset(
            hit, int((step + 0.5) * width / len(self.steps) - width / 2), 0).click().perform()

    def set_tile(self, tile):
        """Select the box's text, type the tile and press Enter, as a person would."""
        box = self.d.find_element(By.ID, "tile")
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(str(tile), Keys.ENTER)

    def rows(self):
        """(name, copies, bytes) of the value rows shown."""
        out = []
        for tr in self.d.find_elements(By.CSS_SELECTOR, "#values-body tr.value-row"):
            cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            out.append((cells[1], int(cells[4]), int(cells[7].replace(",", ""))))
        return out

    def expected_rows(self, step, tile, contains=""):
        """Live roots with bytes on the tile, largest first (ties by id)."""
        out = []
        for root in self.steps[step]["live"]:
            group = [v for v in self.values if v["root"] == root]
            size = max(v["tile_bytes"][tile] for v in group)
            if size and any(contains in v["name"].lower() for v in group):
                out.append((size, root))
        return [(self.values[r]["name"], self.values[r]["copies"], size)
                for size, r in sorted(out, key=lambda e: (-e[0], e[1]))]

    def usage(self, step, tile):
        return sum(self.steps[step]["tile_usage"][tile])


def peak_of(steps, which):
    best = (-1, 0, 0)
    for si, s in enumerate(steps):
        for t, u in enumerate(s["tile_usage"]):
            v = u[0] + u[1] if which == 2 else u[which]
            if v > best[0]:
                best = (v, si, t)
    return best


def test_opens_on_the_total_peak_with_the_table_adding_up(page):
    pk = page.p["peak"]
    assert page.state() == (pk["step"], pk["tile"])
    info = page.d.find_element(By.ID, "step-info").text
    assert fmt(pk["total"]) in info and page.steps[pk["step"]]["label"] in info
    assert page.rows() == page.expected_rows(pk["step"], pk["tile"])
    listed = sum(size for _, _, size in page.rows())
    scratch = int(page.d.find_element(By.ID, "scratch-bytes").text.replace(",", ""))
    usage = int(page.d.find_element(By.ID, "usage-bytes").text.replace(",", ""))
    assert usage == pk["total"] == listed + scratch
    assert sum(page.steps[pk["step"]]["tile_scratch"][pk["tile"]]) == scratch


def test_peak_buttons_select_step_and_tile(page):
    page.set_tile(3)
    page.click("peak-standard")
    _, step, tile = peak_of(page.steps, 0)
    assert page.state() == (step, tile)
    page.set_tile(5)
    page.click("peak-total")
    assert page.state() == (page.p["peak"]["step"], page.p["peak"]["tile"])
    interleaved = page.d.find_element(By.ID, "peak-interleaved")
    assert interleaved.get_attribute("disabled") == ("true" if page.p["peak"]["interleaved"] == 0 else None)


def test_tile_selector_keeps_its_tile_while_steps_move(page):
    page.click("peak-total")
    page.set_tile(1000)
    step, tile = page.state()
    assert tile == 1000
    target = 0 if step + 1 >= len(page.steps) else step + 1
    if target == step + 1:
        page.click("next-step")
    else:
        page.click_step(0)
    assert page.state() == (target, 1000)
    assert page.d.find_element(By.ID, "usage-bytes").text == fmt(page.usage(target, 1000))
    # A click on the chart moves the step, not the tile.
    page.click_step(2)
    assert page.state() == (2, 1000)
    assert page.rows() == page.expected_rows(2, 1000)


def test_steps_peak_tile(page):
    page.set_tile(0)
    page.click_step(4)
    page.click("step-peak-tile")
    expected = page.steps[4]["peak_tile"]
    usage = [sum(u) for u in page.steps[4]["tile_usage"]]
    assert page.state() == (4, expected) and usage[expected] == max(usage)


def test_filter_expand_and_grouping(page):
    page.click("peak-total")
    step, tile = page.state()
    box = page.d.find_element(By.ID, "filter")
    box.send_keys("w2")
    assert page.rows() == page.expected_rows(step, tile, "w2") and page.rows()
    box.clear()
    box.send_keys(" ")
    box.clear()
    page.d.execute_script("arguments[0].dispatchEvent(new Event('input'))", box)
    rows = page.rows()
    assert rows == page.expected_rows(step, tile)
    # Expand the largest row: its layout and aliases.
    first = page.d.find_element(By.CSS_SELECTOR, "#values-body tr.value-row")
    first.click()
    detail = page.d.find_element(By.CSS_SELECTOR, "#values-body tr.detail-row").text
    value = next(v for v in page.values if v["name"] == rows[0][0])
    lay = value["layout"]
    assert f"{lay['rows']:,} x {lay['cols']:,} of {lay['elem']} B" in detail and "aliases:" in detail
    # The weights are two-member sequences: grouped by default, split into members on request.
    sequences = [r for r in rows if r[1] == 2]
    assert sequences, rows
    page.click("group-sequences")
    split = page.rows()
    for name, _, size in sequences:
        assert (f"{name}[0]", 1, size // 2) in split and (f"{name}[1]", 1, size // 2) in split
    assert sum(size for _, _, size in split) == sum(size for _, _, size in rows)
    page.click("group-sequences")
    assert page.rows() == rows


def test_writer_refuses_what_is_not_a_memory_profile(tmp_path):
    bad = tmp_path / "memory-x-1-1.json"
    bad.write_text(json.dumps({"version": 2, "kind": "memory-profile"}))
    with pytest.raises(ValueError, match="version 3"):
        memory_report.write_memory_html(bad, tmp_path / "out.html")
    assert not (tmp_path / "out.html").exists()
