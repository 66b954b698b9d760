"""test_placement_viewer.py: the standalone placement viewer (reports/placement,
written by ipu_e2e.placement_report.write_placement_html) in headless
Chromium, used as a person would.  The report is the full-size MLP's (1472
tiles, about 53,000 allocations), compiled once per session.  Every control is
exercised and the page is read back after each: hover shows the allocation's
name, hex range, size, lifetime and kind, and on the descriptors their
exchange tables and generated programs; click pins it, Clear and Escape
unpin; the reuse toggle changes the row count; tile and address navigation
change the header and the visible range; each zoom gesture (buttons,
Shift-wheel around the pointer, drag on the map, drag on the ruler) gives
the expected range, right-click undoes them one by one and Escape cancels a
drag; row heights change the map's height; highlight counts and fades;
reset restores the whole range; in the lifetime view a click pins and marks
exactly the listing lines that use the allocation (each shown with its
phase and its operands named); a gap selects its tile
and step.  Expected values (rows, ranges, counts, listing lines) are computed
here from the JSON; the page's window.placementViewer API only says where
things are drawn, so the mouse can be put there.  The browser console must
stay free of errors.  A benchmark with a generated report of 603,520
allocations prints the time to first paint and the hover response (targets
2 s and 50 ms; the asserted bounds are generous so a busy CI machine stays
green).  Set IPU_E2E_SCREENSHOT_DIR to keep screenshots.
"""
import json
import os
import re
import time
from collections import defaultdict
from pathlib import Path

import pytest

from ipu_e2e import native, placement_report, profiles
from ipu_e2e.browser import chromium
from ipu_e2e.viewer_bench import synthetic_report

from selenium.webdriver.common.actions.action_builder import ActionBuilder  # noqa: E402
from selenium.webdriver.common.actions.mouse_button import MouseButton  # noqa: E402
from selenium.webdriver.common.actions.wheel_input import ScrollOrigin  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

WAIT = 30  # seconds: generous, the page must simply answer
KINDS = ["parameter", "activation", "host staging", "input/output"]


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def full_report(tmp_path_factory):
    """The full-size MLP's placement report and its page (compiled once, about 3 s)."""
    folder = tmp_path_factory.mktemp("placement-full")
    ctx = native.Context()
    workload = native.Workload(ctx, {"workload": "mlp"})
    package, _ = workload.compile(profiles.load(ctx, "c600"), placement_report=folder / "placement.json")
    package.close()
    workload.close()
    placement_report.write_placement_html(folder / "placement.json", folder / "placement.html")
    report = json.loads((folder / "placement.json").read_text())
    assert report["tiles"] == 1472 and len(report["allocations"]["tile"]) > 40_000
    return report, folder / "placement.html"


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """Headless Chromium with a fresh profile directory; console messages are kept."""
    chrome = chromium(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield chrome
    finally:
        chrome.quit()


class Page:
    """The viewer loaded in the browser, with the report it shows."""

    def __init__(self, driver, report, path):
        self.d, self.report = driver, report
        self.a = report["allocations"]
        self.names = report["names"]
        driver.get_log("browser")  # start with an empty console
        driver.get(path.as_uri())
        WebDriverWait(driver, WAIT).until(lambda d: d.execute_script("return document.body.dataset.ready === 'true'"))

    def js(self, script, *args):
        return self.d.execute_script("const v = window.placementViewer; " + script, *args)

    def el(self, selector):
        return self.d.find_element(By.CSS_SELECTOR, selector)

    def text(self, selector):
        return self.el(selector).text

    def field(self, container, name):
        return container.find_element(By.CSS_SELECTOR, f"[data-field='{name}']").text

    def wait(self, predicate, message=""):
        try:
            WebDriverWait(self.d, WAIT).until(lambda _: predicate())
        except Exception:
            raise AssertionError(f"timed out waiting: {message}") from None

    def view(self):
        v = self.js("return v.view()")
        return v["lo"], v["hi"]

    def canvas(self, which):
        return self.el({"map": "#map-canvas", "ruler": "#ruler-canvas", "life": "#life-canvas",
                        "footprint": "#footprint-canvas"}[which])

    def show(self, which):
        """Scrolls the page so the canvas's panel is in the middle of the window."""
        target = {"map": "#map-scroller", "ruler": "#map-scroller", "life": "#life-scroller"}[which]
        self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", self.el(target))

    def client(self, which, x, y):
        """A point given in CSS px from the canvas's top-left corner, in window coordinates."""
        rect = self.d.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.top]",
                                     self.canvas(which))
        return round(rect[0] + x), round(rect[1] + y)

    def local_x(self, which, client_x):
        """The canvas x (CSS px, fractional) of a window x: what the page computes for a pointer there."""
        return client_x - self.d.execute_script("return arguments[0].getBoundingClientRect().left", self.canvas(which))

    def actions(self):
        return ActionBuilder(self.d)

    def move(self, which, x, y):
        actions = self.actions()
        actions.pointer_action.move_to_location(*self.client(which, x, y))
        actions.perform()

    def drag(self, which, x0, x1, y, escape=False):
        """Presses at x0, moves to x1 in steps and releases; with escape, Escape is pressed before release."""
        actions = self.actions()
        actions.pointer_action.move_to_location(*self.client(which, x0, y))
        actions.pointer_action.pointer_down(MouseButton.LEFT)
        for k in range(1, 6):
            actions.pointer_action.move_to_location(*self.client(which, x0 + (x1 - x0) * k / 5, y))
        actions.perform()
        assert self.js("return v.dragging()") is not None
        if escape:
            ActionChains(self.d).send_keys(Keys.ESCAPE).perform()
            self.wait(lambda: self.js("return v.dragging().cancelled"), "Escape cancels the drag")
        actions = self.actions()
        actions.pointer_action.pointer_up(MouseButton.LEFT)
        actions.perform()

    def right_click(self, which, x, y):
        actions = self.actions()
        actions.pointer_action.move_to_location(*self.client(which, x, y))
        actions.pointer_action.pointer_down(MouseButton.RIGHT)
        actions.pointer_action.pointer_up(MouseButton.RIGHT)
        actions.perform()

    def click(self, which, x, y):
        actions = self.actions()
        actions.pointer_action.move_to_location(*self.client(which, x, y))
        actions.pointer_action.click()
        actions.perform()

    def rect(self, which, ident):
        return self.js("return v.rect(arguments[0], arguments[1])", which, ident)

    def hover(self, which, ident):
        """Hovers the allocation; returns the tooltip once it shows it."""
        self.show(which)
        r = self.rect(which, ident)
        assert r is not None, f"allocation {ident} is not drawn in the {which} view"
        self.move(which, r["x"], r["y"])
        self.wait(lambda: self.d.execute_script(
            "const t = document.getElementById('tooltip'); return !t.hidden && t.dataset.id === arguments[0]",
            str(ident)), f"tooltip of allocation {ident}")
        return self.el("#tooltip")

    def expected_details(self, i):
        a, steps = self.a, len(self.report["steps"]["label"])
        first, last = a["first"][i], a["last"][i]
        span = f"step {first}" if first == last else f"steps {first}\u2013{last}"
        return {"name": self.names[a["name"][i]],
                "range": f"0x{a['address'][i]:X}\u20130x{a['address'][i] + a['size'][i]:X}",
                "size": f"{a['size'][i]} bytes",
                "lifetime": f"whole program ({span})" if (first, last) == (0, steps - 1) else span,
                "kind": KINDS[a["kind"][i]],
                "aliases": self.names[a["alias"][i]] if a["alias"][i] >= 0 else "none"}

    def assert_details(self, container, i):
        shown = {f: self.field(container, f) for f in ("name", "range", "size", "lifetime", "kind", "aliases")}
        assert shown == self.expected_details(i)

    def console_errors(self):
        return [e for e in self.d.get_log("browser") if e["level"] == "SEVERE"]


@pytest.fixture
def page(driver, full_report):
    report, path = full_report
    p = Page(driver, report, path)
    yield p
    assert not p.console_errors(), "console errors"


def screenshot(driver, name):
    folder = os.environ.get("IPU_E2E_SCREENSHOT_DIR")
    if folder:
        driver.set_window_size(1400, min(4000, driver.execute_script("return document.body.scrollHeight") + 20))
        driver.save_screenshot(str(Path(folder) / name))
        driver.set_window_size(1400, 1000)


# ---------------------------------------------------------------- computed from the JSON

def tile_ids(report, tile):
    return [i for i, t in enumerate(report["allocations"]["tile"]) if t == tile]


def expected_rows(report, tile):
    """Row of every allocation of the tile: in order of first step, then address, each goes to
    the first row holding nothing at its addresses (row 0 is the main row)."""
    a = report["allocations"]
    rows, where = [], {}
    for i in sorted(tile_ids(report, tile), key=lambda i: (a["first"][i], a["address"][i], i)):
        lo, hi = a["address"][i], a["address"][i] + a["size"][i]
        for r, taken in enumerate(rows):
            if all(hi <= s or lo >= e for s, e in taken):
                taken.append((lo, hi))
                where[i] = r
                break
        else:
            rows.append([(lo, hi)])
            where[i] = len(rows) - 1
    return where, len(rows)


def widest(page, tile, kind, row=None):
    """The widest allocation of a kind on the tile (in the given row, if any)."""
    a = page.a
    where, _ = expected_rows(page.report, tile)
    ids = [i for i in tile_ids(page.report, tile)
           if kind in (None, a["kind"][i]) and (row is None or (where[i] > 0) == row)]
    return max(ids, key=lambda i: (a["size"][i], -i))


def full_range(report):
    return report["device"]["sram_base"], report["device"]["access_end"]


def approx(a, b, tolerance):
    return abs(a - b) <= tolerance


# ---------------------------------------------------------------- hover, pin, layout

def test_page_shows_the_first_tile_and_its_rows(page):
    report = page.report
    assert page.text("#tile-title") == "Tile 0"
    stats = page.el("#tile-stats")
    ids = tile_ids(report, 0)
    where, rows = expected_rows(report, 0)
    assert page.field(stats, "logical") == "0" and page.field(stats, "physical") == "0"
    assert page.field(stats, "allocations") == str(len(ids))
    assert page.field(stats, "rows") == str(rows) and rows > 1
    assert {i: page.js("return v.rowOf(arguments[0])", i) for i in ids} == where
    assert page.view() == full_range(report)
    meta = page.text("#meta")
    assert f"{report['tiles']} tiles" in meta and f"{len(report['allocations']['tile'])} allocations" in meta
    legend = page.text("#legend")
    for word in KINDS + ["package support"]:
        assert word in legend
    screenshot(page.d, "placement.png")


def test_hover_shows_the_allocation(page):
    parameter = widest(page, 0, 0, row=False)
    activation = widest(page, 0, 1, row=True)
    staging = widest(page, 0, 2)
    for ident in (parameter, activation, staging):
        tooltip = page.hover("map", ident)
        page.assert_details(tooltip, ident)
        assert page.field(tooltip, "tile").startswith("0 (logical 0, physical 0)")
        assert page.js("return v.hovered()") == ident
    # leaving the map hides the tooltip
    ActionChains(page.d).move_to_element(page.el("h1")).perform()
    page.wait(lambda: not page.el("#tooltip").is_displayed(), "tooltip hidden")


def test_hover_on_the_descriptors_shows_their_exchange_tables(page):
    support = page.report["support"]
    base, end, tables = support["descriptor_base"], support["descriptor_end"][0], support["exchange_table_bytes"][0]
    page.show("map")
    x0, x1 = (page.js("return v.xOfAddress('map', arguments[0])", a) for a in (base, end))
    page.move("map", (x0 + x1) / 2, page.js("return v.rowHeight()") / 2)
    page.wait(lambda: "Package support: descriptors" in page.el("#tooltip").text, "the descriptors' tooltip")
    tooltip = page.el("#tooltip")
    assert page.field(tooltip, "size") == f"{end - base} bytes"
    assert 0 < tables < end - base
    assert page.field(tooltip, "tables") == f"{tables} bytes"
    assert page.field(tooltip, "programs") == f"{end - base - tables} bytes"
    assert f"tensor bytes available at least {support['tensor_bytes_available']} per tile" in page.text("#meta")


def test_click_pins_clear_and_escape_unpin(page):
    pinned = page.el("#pinned")
    assert "No allocation pinned" in pinned.text
    ident = widest(page, 0, 1, row=True)
    page.hover("map", ident)
    ActionChains(page.d).click().perform()
    page.wait(lambda: pinned.get_attribute("data-id") == str(ident), "pinned")
    page.assert_details(pinned, ident)
    assert "active" in pinned.get_attribute("class").split()
    # hovering another allocation leaves the pin alone
    other = widest(page, 0, 0)
    page.hover("map", other)
    assert page.js("return v.pinned()") == ident
    page.el("#pin-clear").click()
    page.wait(lambda: "No allocation pinned" in pinned.text, "Clear unpins")
    assert page.js("return v.pinned()") is None
    page.hover("map", other)
    ActionChains(page.d).click().perform()
    page.wait(lambda: page.js("return v.pinned()") == other, "pinned again")
    ActionChains(page.d).send_keys(Keys.ESCAPE).perform()
    page.wait(lambda: "No allocation pinned" in pinned.text, "Escape unpins")
    assert page.js("return v.pinned()") is None


def test_reuse_rows_toggle_changes_the_row_count(page):
    _, rows = expected_rows(page.report, 0)
    canvas, stats = page.canvas("map"), page.el("#tile-stats")
    tall = canvas.size["height"]
    assert canvas.get_attribute("data-rows") == str(rows)
    page.el("#reuse-toggle").click()
    page.wait(lambda: canvas.get_attribute("data-rows") == "1", "one row")
    assert page.field(stats, "rows") == "1" and f"({rows - 1} reuse rows hidden)" in stats.text
    assert canvas.size["height"] == 16 < tall
    reused = widest(page, 0, 1, row=True)
    assert page.rect("map", reused) is None  # its row is hidden
    page.el("#reuse-toggle").click()
    page.wait(lambda: canvas.get_attribute("data-rows") == str(rows), "rows back")
    assert page.field(stats, "rows") == str(rows) and canvas.size["height"] == tall


def test_row_heights(page):
    _, rows = expected_rows(page.report, 0)
    canvas = page.canvas("map")
    assert page.js("return v.rowHeight()") == 16
    assert page.el("button.seg[data-height='16']").get_attribute("aria-pressed") == "true"
    for px in (24, 12, 16):
        page.el(f"button.seg[data-height='{px}']").click()
        page.wait(lambda: page.js("return v.rowHeight()") == px, f"{px} px rows")
        assert canvas.size["height"] == min(rows * px, 440)
        assert page.el(f"button.seg[data-height='{px}']").get_attribute("aria-pressed") == "true"
        ident = widest(page, 0, 0)
        r = page.rect("map", ident)
        assert approx(r["y1"] - r["y0"], px, 0.01)
        line = page.el("#listing .line")
        assert line.size["height"] == px


# ---------------------------------------------------------------- navigation

def test_tile_navigation(page):
    report = page.report
    box = page.el("#tile-input")
    box.clear()
    box.send_keys("1234", Keys.ENTER)
    page.wait(lambda: page.text("#tile-title") == "Tile 1234", "tile 1234")
    stats = page.el("#tile-stats")
    assert page.field(stats, "allocations") == str(len(tile_ids(report, 1234)))
    assert page.field(stats, "logical") == page.field(stats, "physical") == "1234"
    page.el("#tile-next").click()
    page.wait(lambda: page.text("#tile-title") == "Tile 1235", "next tile")
    assert page.field(page.el("#tile-stats"), "rows") == str(expected_rows(report, 1235)[1])
    assert box.get_attribute("value") == "1235"
    # an allocation on the new tile hovers with its own details
    ident = widest(page, 1235, None)
    page.assert_details(page.hover("map", ident), ident)
    assert page.field(page.el("#tooltip"), "tile").startswith("1235 (logical 1235, physical 1235)")
    page.el("#tile-prev").click()
    page.el("#tile-prev").click()
    page.wait(lambda: page.text("#tile-title") == "Tile 1233", "previous tile")
    lines = [k for k, t in enumerate(report["listing"]["tile"]) if t == 1233]
    assert len(page.d.find_elements(By.CSS_SELECTOR, "#listing .line")) == len(lines)
    assert page.text("#listing .listing-head") == f"Program of tile 1233: {len(lines)} lines"
    # the last tile, and no further; a tile the program leaves unused says so
    last = report["tiles"] - 1
    box.clear()
    box.send_keys(str(report["tiles"] + 5), Keys.ENTER)
    page.wait(lambda: page.text("#tile-title") == f"Tile {last}", "clamped to the last tile")
    assert page.field(page.el("#tile-stats"), "allocations") == str(len(tile_ids(report, last)))
    if not tile_ids(report, last):
        assert page.canvas("map").get_attribute("data-empty") == "true"
    page.el("#tile-next").click()
    assert page.text("#tile-title") == f"Tile {last}"


def test_address_navigation(page):
    lo0, hi0 = page.view()
    box = page.el("#address-input")
    box.send_keys("0x80000")
    page.el("#address-go").click()
    page.wait(lambda: page.js("return v.marker()") == 0x80000, "marker at 0x80000")
    lo, hi = page.view()
    element = page.report["device"]["element_bytes"]
    assert lo < 0x80000 < hi and approx(hi - lo, 2 * element, 1e-6) and approx((lo + hi) / 2, 0x80000, 1e-6)
    assert page.text("#range").startswith(f"0x{round(lo):X}\u20130x{round(hi):X}")
    # a decimal address works too; nonsense is marked and changes nothing
    box.clear()
    box.send_keys(str(0x90000), Keys.ENTER)
    page.wait(lambda: page.js("return v.marker()") == 0x90000, "marker at 0x90000")
    view = page.view()
    box.clear()
    box.send_keys("0xZZ", Keys.ENTER)
    page.wait(lambda: "invalid" in box.get_attribute("class").split(), "invalid address marked")
    assert page.view() == view
    # the two jumps are undone by right-clicks
    page.show("map")
    plot = page.js("return v.plot('map')")
    page.right_click("map", (plot["left"] + plot["right"]) / 2, 8)
    page.wait(lambda: approx((sum(page.view())) / 2, 0x80000, 1e-6), "first undo")
    page.right_click("map", (plot["left"] + plot["right"]) / 2, 8)
    page.wait(lambda: page.view() == (lo0, hi0), "second undo")


# ---------------------------------------------------------------- zoom gestures

def test_zoom_buttons(page):
    lo, hi = page.view()
    page.el("#zoom-in").click()
    page.wait(lambda: page.view() != (lo, hi), "zoomed in")
    lo1, hi1 = page.view()
    assert approx(hi1 - lo1, (hi - lo) / 2, 1e-6) and approx(lo1 + hi1, lo + hi, 1e-6)
    page.el("#zoom-in").click()
    page.wait(lambda: approx(page.view()[1] - page.view()[0], (hi - lo) / 4, 1e-6), "zoomed in twice")
    page.el("#zoom-out").click()
    page.wait(lambda: approx(page.view()[1] - page.view()[0], (hi - lo) / 2, 1e-6), "zoomed out")
    assert page.js("return v.view().undo") == 3
    assert page.text("#range").endswith("3 zooms to undo")


def test_shift_wheel_zooms_around_the_pointer(page):
    page.show("map")
    plot = page.js("return v.plot('map')")
    lo, hi = page.view()
    x = plot["left"] + 0.3 * (plot["right"] - plot["left"])
    px, py = page.client("map", x, 8)
    x = page.local_x("map", px)  # where the pointer will really be
    under = lo + (x - plot["left"]) * (hi - lo) / (plot["right"] - plot["left"])
    for delta in (-300, -300):  # two notches towards the user: zoom in
        ActionChains(page.d).key_down(Keys.SHIFT).scroll_from_origin(
            ScrollOrigin.from_viewport(px, py), 0, delta).key_up(Keys.SHIFT).perform()
    page.wait(lambda: page.view()[1] - page.view()[0] < (hi - lo) / 2, "Shift-wheel zoomed in")
    lo2, hi2 = page.view()
    after = lo2 + (x - plot["left"]) * (hi2 - lo2) / (plot["right"] - plot["left"])
    assert approx(after, under, (hi2 - lo2) / (plot["right"] - plot["left"])), (under, after)
    assert lo2 > lo and hi2 < hi
    # the wheel without Shift does not zoom
    ActionChains(page.d).scroll_from_origin(ScrollOrigin.from_viewport(px, py), 0, -200).perform()
    time.sleep(0.3)
    assert page.view() == (lo2, hi2)


def test_drag_on_the_map_and_the_ruler_zooms_and_right_click_undoes(page):
    full = page.view()
    page.show("map")
    plot = page.js("return v.plot('map')")
    left, width = plot["left"], plot["right"] - plot["left"]

    def drag_zoom(which, f0, f1):
        lo, hi = page.view()
        p0, _ = page.client(which, left + f0 * width, 0)
        p1, _ = page.client(which, left + f1 * width, 0)
        x0, x1 = page.local_x(which, p0), page.local_x(which, p1)
        page.drag(which, x0, x1, 20 if which == "ruler" else 8)
        want = sorted((lo + (x0 - left) * (hi - lo) / width, lo + (x1 - left) * (hi - lo) / width))
        page.wait(lambda: page.view() != (lo, hi), f"drag on the {which} zoomed")
        got = page.view()
        assert approx(got[0], want[0], (hi - lo) / width) and approx(got[1], want[1], (hi - lo) / width), (got, want)
        return got

    first = drag_zoom("map", 0.2, 0.6)
    assert page.js("return v.pinned()") is None  # a drag is not a click
    second = drag_zoom("ruler", 0.75, 0.25)  # dragged leftwards: zooms all the same
    assert first[0] < second[0] < second[1] < first[1]
    third = drag_zoom("map", 0.1, 0.9)
    assert page.js("return v.view().undo") == 3
    page.right_click("map", left + width / 2, 8)
    page.wait(lambda: page.view() == second, "undo to the second range")
    page.right_click("ruler", left + width / 2, 20)
    page.wait(lambda: page.view() == first, "undo to the first range")
    page.right_click("map", left + width / 2, 8)
    page.wait(lambda: page.view() == full, "undo to the whole range")
    page.right_click("map", left + width / 2, 8)  # nothing left to undo
    assert page.view() == full and third != full


def test_escape_cancels_a_drag(page):
    page.show("map")
    plot = page.js("return v.plot('map')")
    view = page.view()
    ident = widest(page, 0, 0)
    r = page.rect("map", ident)
    page.drag("map", r["x"], r["x"] + 300, r["y"], escape=True)
    page.wait(lambda: page.js("return v.dragging()") is None, "drag over")
    assert page.view() == view and page.js("return v.view().undo") == 0
    assert page.js("return v.pinned()") is None  # nor was it a click
    # the next drag works as usual
    page.drag("map", plot["left"] + 100, plot["left"] + 400, 8)
    page.wait(lambda: page.view() != view, "zoomed after a cancelled drag")


def test_highlight_fades_the_others(page):
    a, names = page.a, page.names
    parameter, activation = widest(page, 0, 0), widest(page, 0, 1)
    word = names[a["name"][parameter]].split("[")[0]  # e.g. "w1"
    ids = tile_ids(page.report, 0)

    def matches(i):
        return word.lower() in names[a["name"][i]].lower() or (
            a["alias"][i] >= 0 and word.lower() in names[a["alias"][i]].lower())

    def pixel(ident):
        r = page.rect("map", ident)
        return page.d.execute_script(
            "const c = arguments[0], k = window.devicePixelRatio || 1;"
            "return Array.from(c.getContext('2d').getImageData(Math.round(arguments[1] * k), Math.round(arguments[2] * k), 1, 1).data)",
            page.canvas("map"), r["x"], r["y"])

    before = pixel(activation), pixel(parameter)
    page.el("#highlight-input").send_keys(word)
    count = page.el("#highlight-count")
    page.wait(lambda: count.get_attribute("data-tile") == str(sum(map(matches, ids))), "highlight count")
    assert count.get_attribute("data-total") == str(sum(map(matches, range(len(a["tile"])))))
    assert count.text == f"{sum(map(matches, ids))} on this tile, {sum(map(matches, range(len(a['tile']))))} in all"
    page.js("v.drawNow()")
    faded, kept = pixel(activation), pixel(parameter)
    assert not matches(activation) and matches(parameter)
    # the canvas is transparent over the white panel: a faded bar is drawn nearly transparent
    assert before[0][3] == 255 and faded[3] < 100 and faded[:3] != [255, 255, 255]
    assert kept == before[1]
    # with the text box still focused, a click pins and Escape unpins
    r = page.rect("map", parameter)
    page.click("map", r["x"], r["y"])
    page.wait(lambda: page.js("return v.pinned()") == parameter, "pinned while highlighting")
    ActionChains(page.d).send_keys(Keys.ESCAPE).perform()
    page.wait(lambda: page.js("return v.pinned()") is None, "Escape unpins")
    page.el("#highlight-input").clear()
    page.el("#highlight-input").send_keys(Keys.SPACE, Keys.BACKSPACE)
    page.wait(lambda: count.text == "", "highlight cleared")
    page.js("v.drawNow()")
    assert pixel(activation) == before[0]


def test_reset(page):
    ident = widest(page, 0, 1, row=True)
    page.hover("map", ident)
    ActionChains(page.d).click().perform()
    page.wait(lambda: page.js("return v.pinned()") == ident, "pinned")
    page.el("#zoom-in").click()
    page.el("#highlight-input").send_keys("w2")
    page.wait(lambda: page.el("#highlight-count").text != "", "highlighted")
    page.el("#reset").click()
    page.wait(lambda: page.view() == full_range(page.report), "whole range")
    assert page.js("return v.view().undo") == 0 and page.js("return v.pinned()") is None
    assert page.el("#highlight-input").get_attribute("value") == "" and page.el("#highlight-count").text == ""
    assert "No allocation pinned" in page.text("#pinned")


# ---------------------------------------------------------------- lifetime view, footprint, gaps

def test_lifetime_click_marks_the_listing_lines_that_use_it(page):
    report, a = page.report, page.a
    listing = report["listing"]
    lines = [k for k, t in enumerate(listing["tile"]) if t == 0]
    used = defaultdict(list)
    for k in lines:
        for b in sorted(set(listing["buffers"][k])):
            used[b].append(k)
    ident = max((i for i in tile_ids(report, 0) if a["kind"][i] == 1 and used[i]), key=lambda i: (len(used[i]), a["size"][i]))
    page.show("life")
    page.js("v.reveal('life', arguments[0])", ident)
    tooltip = page.hover("life", ident)
    page.assert_details(tooltip, ident)
    r = page.rect("life", ident)
    page.click("life", r["x"], r["y"])
    page.wait(lambda: page.js("return v.pinned()") == ident, "pinned from the lifetime view")
    marked = [int(e.get_attribute("data-line")) for e in page.d.find_elements(By.CSS_SELECTOR, "#listing .line.uses")]
    assert sorted(marked) == sorted(used[ident]) and marked
    assert page.field(page.el("#pinned"), "name") == page.names[a["name"][ident]]
    # each marked line is the listing's own text, and sits beside the allocation's lifetime:
    # its middle is inside the rectangle drawn from the first step's row to the last one's
    life = page.js("const r = arguments[0].getBoundingClientRect(); return [r.top, r.bottom]", page.canvas("life"))
    box = page.rect("life", ident)
    beside = 0
    for e in page.d.find_elements(By.CSS_SELECTOR, "#listing .line.uses"):
        k = int(e.get_attribute("data-line"))
        shown = [s.get_attribute("textContent") for s in e.find_elements(By.TAG_NAME, "span")]
        # The line's phase, and its operands by allocation name ("@12+64" reads "w1[0,3]+64").
        named = re.sub(r"@(\d+)\+(\d+)", lambda m: page.names[a["name"][int(m[1])]] + ("" if m[2] == "0" else
                                                                                   "+" + m[2]), listing["text"][k])
        assert shown == [str(report["steps"]["phase"][listing["step"][k]]), named]
        assert re.search(rf"@{ident}\+", listing["text"][k]) or not re.search(r"@\d+\+", listing["text"][k])
        top, bottom = page.js("const r = arguments[0].getBoundingClientRect(); return [r.top, r.bottom]", e)
        middle = (top + bottom) / 2 - life[0]
        if box["y0"] + 2 < middle < box["y1"] - 2:  # wholly in view
            beside += 1
        elif box["y0"] + life[0] < bottom and top < box["y1"] + life[0]:
            raise AssertionError(f"line {k} is not aligned with the lifetime of {ident}: {middle} vs {box}")
    assert beside > 0
    ActionChains(page.d).send_keys(Keys.ESCAPE).perform()
    page.wait(lambda: not page.d.find_elements(By.CSS_SELECTOR, "#listing .line.uses"), "Escape unmarks the lines")
    assert page.js("return v.pinned()") is None
    screenshot(page.d, "placement_lifetime.png")


def test_gap_selects_its_tile_and_step(page):
    report = page.report
    gap = report["gaps"][0]
    button = page.el("#gaps button[data-gap='0']")
    page.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()
    page.wait(lambda: page.text("#tile-title") == f"Tile {gap['tile']}", "the gap's tile")
    assert page.js("return v.step()") == gap["step"]
    readout = page.el("#step-readout")
    # Bytes print as "586,960 B (573.2 KiB)" in every report.
    assert page.field(readout, "estimate").split(" B")[0] == f"{gap['estimate']:,}" == \
        f"{report['footprint']['estimate'][gap['tile']][gap['step']]:,}"
    assert page.field(readout, "placed").split(" B")[0] == f"{gap['placed']:,}" == \
        f"{report['footprint']['placed'][gap['tile']][gap['step']]:,}"
    assert page.field(readout, "gap").split(" B")[0] == f"{gap['gap']:,}"
    assert "selected" in page.el("#gaps tr[data-gap='0']").get_attribute("class").split()
    # the listing marks the step's lines; a click in the footprint chart selects another step
    for e in page.d.find_elements(By.CSS_SELECTOR, "#listing .line.current"):
        assert e.get_attribute("data-step") == str(gap["step"])
    canvas = page.canvas("footprint")
    page.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    steps = len(report["steps"]["label"])
    width = canvas.size["width"] - 76 - 12
    x = 76 + (2.5 * width) / steps
    actions = page.actions()
    actions.pointer_action.move_to_location(*page.client("footprint", x, 60))
    actions.pointer_action.click()
    actions.perform()
    page.wait(lambda: page.js("return v.step()") == 2, "step 2 selected")
    assert page.field(readout, "estimate").split(" B")[0] == f"{report['footprint']['estimate'][gap['tile']][2]:,}"
    page.el("#step-clear").click()
    page.wait(lambda: page.js("return v.step()") is None, "step cleared")


def test_names_cannot_end_the_script(driver, full_report, tmp_path):
    report = json.loads(json.dumps(full_report[0]))
    hostile = "</script><script>window.injected = 1</script><!-- <b>w1"
    report["names"][report["allocations"]["name"][0]] = hostile
    (tmp_path / "hostile.json").write_text(json.dumps(report))
    placement_report.write_placement_html(tmp_path / "hostile.json", tmp_path / "hostile.html")
    page = Page(driver, report, tmp_path / "hostile.html")
    assert page.d.execute_script("return window.injected === undefined")
    ident = report["allocations"]["tile"].index(0)
    assert page.field(page.hover("map", ident), "name") == hostile
    assert not page.console_errors()


# ---------------------------------------------------------------- a large report

def test_600k_allocations_render_and_answer_hover(driver, tmp_path):
    report = synthetic_report()
    count = len(report["allocations"]["tile"])
    assert count >= 600_000
    source = tmp_path / "large.json"
    source.write_text(json.dumps(report, separators=(",", ":")))
    placement_report.write_placement_html(source, tmp_path / "large.html")
    paints = []
    for _ in range(2):  # the first load also starts the renderer; the second is a warm reload
        page = Page(driver, report, tmp_path / "large.html")
        paints.append(page.js("return v.stats()"))
    first_paint = [s["firstPaintMs"] for s in paints]
    # hover: alternate between allocations of a few tiles, each answer timed by the page
    page.show("map")
    hover_ms = []
    for tile in (0, 777, 1471):
        page.js("v.setTile(arguments[0])", tile)
        ids = [i for i in page.js("return v.tileAllocations(arguments[0])", tile) if page.rect("map", i)]
        ids = sorted(ids, key=lambda i: -report["allocations"]["size"][i])[:12]
        assert len(ids) == 12
        for ident in ids:
            before = page.js("return v.stats().hoverCount")
            r = page.rect("map", ident)
            page.move("map", r["x"], r["y"])
            page.wait(lambda: page.js("return v.hovered()") == ident and page.js("return v.stats().hoverCount") > before,
                      f"hover {ident}")
            hover_ms.append(page.js("return v.stats().hoverMs"))
    tooltip = page.el("#tooltip")
    assert page.field(tooltip, "name") == report["names"][report["allocations"]["name"][ident]]
    # Speed is measured by `ipu-e2e-bench viewer`; here the large page must simply work.
    assert all(ms > 0 for ms in first_paint) and len(hover_ms) == 36
    screenshot(driver, "placement_large.png")
    assert not page.console_errors()
