"""Checks of one run's reports in headless Chromium, as a person would use
them, with every expected value computed from the reports' JSON (never
read back from the pages' scripts).  A run folder is laid out as
`ipu-e2e-test --output DIR --profile-directory DIR/run
--memory-profile-directory DIR/memory` writes it.  Each check returns a
short description of what held and raises CheckFailed saying what did not.
The tests (test_run_reports.py) run them on a small run, the `reports`
benchmark on the full-size MLP and ViT.

- links: a tile and a step of the main program (the run profile shows the
  main program's steps only) selected in the placement viewer land, through
  the report links, on the same tile and phase in the run profile (the step
  of that phase pinned, the run-time memory section at that tile and phase,
  its "live now" list adding up to the allocation table's live bytes), in
  the memory profile (the step group holding the phase) and back;
- heatmap: a click on the device heatmap's pixel of a tile and step opens
  the fullest tile and step that pixel shows (computed from the report),
  and its tooltip names them, the phase and the step's op;
- cycles: a click on the run profile's heatmap of compute cycles (tiles
  down, control ops across) selects the busiest tile and op its pixel
  shows (computed from the profile) and pins the op's first executed step;
  its tooltip names the tile, the phase and the compiler op;
- search: the device search lists exactly the tiles holding a named tensor,
  and a row opens its tile with a match pinned;
- run search: the run profile's device search lists exactly the tiles
  holding an allocation whose name or tensor contains the text, and a row
  selects its tile at the first executed phase a match is live at;
- free bytes: the run profile's free-bytes chart of the fullest tile is the
  timeline's own series (the page measures the holes itself), and its
  tooltip gives the device's fragmentation at the phase under the pointer;
- tooltips: the run profile's memory chart names the compiler op of the
  executed phase under the pointer;
- first paint: the placement viewer's first paint, cold and warm (ms);
- console: no console errors on any page.
"""
import json
import math
import time
from pathlib import Path

from . import placement_report

WAIT = 60


class CheckFailed(AssertionError):
    """A report did not do what it should: the message says what."""


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


def load(path):
    return json.loads(Path(path).read_text())


def open_page(driver, path, hash_=""):
    """Opens a report (a Path) and waits until its scripts say they are ready."""
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get(Path(path).as_uri() + (f"#{hash_}" if hash_ else ""))
    WebDriverWait(driver, WAIT).until(lambda d: d.execute_script("return document.body.dataset.ready") == "true")


def console_errors(driver):
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def dangling_links(driver):
    """The hrefs of the open page that name no file: every link of a
    report must resolve (its URL hash aside)."""
    from urllib.parse import unquote, urlparse
    from selenium.webdriver.common.by import By
    found = []
    for a in driver.find_elements(By.CSS_SELECTOR, "a[href]"):
        href = a.get_attribute("href")
        url = urlparse(href)
        if url.scheme != "file" or not Path(unquote(url.path)).is_file():
            found.append(href)
    return found


def follow(driver, kind):
    """Clicks the report link to `kind` and waits for that page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    link = driver.find_element(By.CSS_SELECTOR, f"#report-nav a[data-report='{kind}']")
    href = link.get_attribute("href")
    page = href.split("#")[0]
    link.click()
    WebDriverWait(driver, WAIT).until(lambda d: d.current_url.split("#")[0] == page and
                                      d.execute_script("return document.body.dataset.ready") == "true")
    return href


def live_bytes(timeline, tile, phase):
    """The tensor-area bytes the allocation table says are live on tile at phase."""
    a = timeline["allocations"]
    host = a["kinds"].index("host staging")
    return sum(a["size"][i] for i in range(len(a["tile"])) if a["tile"][i] == tile and a["kind"][i] != host
               and a["first"][i] <= phase and (a["last"][i] < 0 or phase <= a["last"][i]))


def body_step(placement, offset=1):
    """A step of the Repeat body (offset into it), else of the main program."""
    repeat = placement["repeat"]
    if repeat["count"]:
        return repeat["first"] + min(offset, repeat["count"] - 1)
    return next(s for s, init in enumerate(placement["steps"]["init"]) if not init)


def check_links(driver, folder, tile, step):
    folder = Path(folder)
    placement = placement_report.load(folder / "memory")
    run = load(folder / "run" / "run-profile.json")
    timeline = load(folder / "run" / "memory-timeline.json")
    phase = placement["steps"]["phase"][step]
    open_page(driver, folder / "memory" / "placement.html")
    driver.execute_script("placementViewer.setTile(arguments[0]); placementViewer.setStep(arguments[1])", tile, step)
    hash_ = driver.execute_script("return location.hash")
    expect(hash_ == f"#tile={tile}&phase={phase}", f"the placement viewer's hash is {hash_!r}")
    follow(driver, "run_profile")
    pinned = driver.execute_script("return runProfile.pinned()")
    # An executed step is its control op's run: it holds the op's phases 2g and 2g + 1.
    expect(pinned is not None and run["steps"][pinned]["phase"] == phase - phase % 2,
           f"the run profile pinned step {pinned}, not the one holding phase {phase}")
    hash_ = driver.execute_script("return location.hash")
    expect(f"tile={tile}&phase={phase}" in hash_, f"the run profile's hash is {hash_!r}")
    expect(driver.execute_script("return runProfile.selectedTile()") == tile, "the run profile's tile differs")
    state = driver.execute_script("return runMemory.state()")
    expect(state["tile"] == tile and state["phase"] == phase, f"the run-time memory section shows {state}")
    want = live_bytes(timeline, tile, phase)
    got = driver.execute_script("return runMemory.liveSum()")
    expect(got == want, f"'live now' adds up to {got} bytes; the allocation table says {want}")
    follow(driver, "memory")
    got = driver.execute_script("return memoryProfile.state()")
    expect(got["tile"] == tile and got["phase"] == phase, f"the memory profile shows {got}")
    follow(driver, "placement")
    expect(driver.execute_script("return placementViewer.tile()") == tile, "back in the placement viewer, another tile")
    expect(driver.execute_script("return placementViewer.step()") == step, "back in the placement viewer, another step")
    return f"tile {tile}, phase {phase}: placement -> run profile -> memory profile -> placement ({want:,} B live)"


def cells(i, n, pixels):
    """The cells [lo, hi) a heatmap of `pixels` pixels showing n cells puts under pixel i (at least one)."""
    lo = i * n // pixels
    return range(lo, min(n, max(lo + 1, (i + 1) * n // pixels)))


def hover_pixel(driver, canvas, point):
    """Puts the pointer on pixel point (CSS px from the canvas's corner); returns the pixel it is on."""
    from selenium.webdriver.common.action_chains import ActionChains
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    box = driver.execute_script("const b = arguments[0].getBoundingClientRect(); return [b.left, b.top]", canvas)
    x, y = int(box[0] + point["x"] + 0.5), int(box[1] + point["y"] + 0.5)
    actions = ActionChains(driver)
    actions.w3c_actions.pointer_action.move_to_location(x, y)
    actions.perform()
    return math.floor(x - box[0]), math.floor(y - box[1])


def check_heatmap(driver, folder, tile, step):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    placement = placement_report.load(Path(folder) / "memory")
    open_page(driver, Path(folder) / "memory" / "placement.html")
    WebDriverWait(driver, WAIT).until(lambda d: d.execute_script("return placementDevice.drawn()"))
    canvas = driver.find_element(By.ID, "device-canvas")
    point = driver.execute_script("return placementDevice.point(arguments[0], arguments[1])", tile, step)
    px, py = hover_pixel(driver, canvas, point)
    # The pixel under the pointer shows the fullest of the tiles and steps under it: which, from the report.
    estimate = placement["footprint"]["estimate"]
    tiles, steps = len(estimate), len(placement["steps"]["label"])
    under = [(estimate[t][s], -t, -s) for t in cells(py, tiles, point["h"])
             for s in cells(px - point["x0"], steps, point["w"])]
    tile, step = -max(under)[1], -max(under)[2]
    tooltip = driver.find_element(By.ID, "tooltip")
    shown = driver.execute_script("return [arguments[0].dataset.kind, arguments[0].innerText]", tooltip)
    want = f"Tile {tile} \u00b7 phase {placement['steps']['phase'][step]}"
    expect(shown[0] == "device" and want in shown[1] and placement["steps"]["label"][step] in shown[1],
           f"the heatmap's tooltip says {shown[1]!r}, expected {want!r} and {placement['steps']['label'][step]!r}")
    ActionChains(driver).click().perform()
    got = driver.execute_script("return [placementViewer.tile(), placementViewer.step()]")
    expect(got == [tile, step], f"the heatmap click opened tile and step {got}, not {[tile, step]}")
    return f"tile {tile}, step {step} opened; the tooltip names {placement['steps']['label'][step]!r}"


def check_cycles(driver, folder, tile, column):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    run = load(Path(folder) / "run" / "run-profile.json")
    by = run["tiles"]["compute_by_op"]
    open_page(driver, Path(folder) / "run" / "run-profile.html")
    canvas = driver.find_element(By.ID, "cycles-canvas")
    point = driver.execute_script("return runCycles.point(arguments[0], arguments[1])", tile, column)
    px, py = hover_pixel(driver, canvas, point)
    tiles, columns = len(by["cycles"][0]), len(by["op"])
    under = [(by["cycles"][c][t], -c, -t) for c in cells(px - point["x0"], columns, point["w"])
             for t in cells(py, tiles, point["h"])]
    column, tile = -max(under)[1], -max(under)[2]
    step = next(i for i, s in enumerate(run["steps"]) if s["op"] == by["op"][column] and s["program"] == "main")
    op = run["steps"][step]["compiler_op"]
    name = f"op {op} {run['ops'][op]}" if op is not None else "no compiler op"
    tooltip = driver.find_element(By.ID, "tooltip")
    shown = driver.execute_script("return [arguments[0].dataset.kind, arguments[0].innerText]", tooltip)
    want = f"Tile {tile} \u00b7 phase {run['steps'][step]['phase']}"
    expect(shown[0] == "cycles" and want in shown[1] and name in shown[1],
           f"the cycles heatmap's tooltip says {shown[1]!r}, expected {want!r} and {name!r}")
    ActionChains(driver).click().perform()
    got = driver.execute_script("return [runProfile.selectedTile(), runProfile.pinned()]")
    expect(got == [tile, step], f"the cycles heatmap's click selected tile and step {got}, not {[tile, step]}")
    return f"tile {tile}, {name} ({by['cycles'][column][tile]:,} compute cycles): selected and its step pinned"


def check_search(driver, folder, query):
    from selenium.webdriver.common.by import By
    placement = placement_report.load(Path(folder) / "memory")
    a, names = placement["allocations"], placement["names"]
    expected = sorted({a["tile"][i] for i in range(len(a["tile"])) if query in names[a["name"][i]] or
                       (a["alias"][i] >= 0 and query in names[a["alias"][i]])})
    open_page(driver, Path(folder) / "memory" / "placement.html")
    box = driver.find_element(By.ID, "device-search")
    box.send_keys(query)
    listed = driver.execute_script("return placementDevice.results().map(r => r.tile)")
    expect(listed == expected, f"the search for {query!r} lists {len(listed)} tiles, the report has {len(expected)}")
    rows = driver.find_elements(By.CSS_SELECTOR, "#device-results tr[data-tile]")
    expect(len(rows) == min(500, len(expected)), f"{len(rows)} result rows shown for {len(expected)} tiles")
    pick = len(rows) // 2
    rows[pick].find_element(By.TAG_NAME, "button").click()
    tile = driver.execute_script("return placementViewer.tile()")
    pinned = driver.execute_script("return placementViewer.pinned()")
    expect(tile == expected[pick], f"the result row of tile {expected[pick]} opened tile {tile}")
    expect(pinned is not None and query in names[a["name"][pinned]] or
           (pinned is not None and a["alias"][pinned] >= 0 and query in names[a["alias"][pinned]]),
           "the opened tile's pinned allocation is not a match")
    return f"{query!r}: every one of its {len(expected)} tiles listed; tile {tile} opened with a match pinned"


def matches(timeline, query):
    """The allocations whose name or tensor contains query (any case), by tile."""
    a, strings, q = timeline["allocations"], timeline["allocations"]["strings"], query.lower()
    found = {}
    for i, tile in enumerate(a["tile"]):
        if q in strings[a["name"][i]].lower() or q in strings[a["tensor"][i]].lower():
            found.setdefault(tile, []).append(i)
    return found


def check_run_search(driver, folder, query):
    from selenium.webdriver.common.by import By
    timeline = load(Path(folder) / "run" / "memory-timeline.json")
    a, phases = timeline["allocations"], timeline["steps"]["phase"]
    found = matches(timeline, query)
    expected = sorted(found)
    open_page(driver, Path(folder) / "run" / "run-profile.html")
    box = driver.find_element(By.ID, "memory-search")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
    box.send_keys(query)
    rows = driver.find_elements(By.CSS_SELECTOR, "#memory-found tr[data-tile]")
    listed = [int(r.get_attribute("data-tile")) for r in rows]
    summary = driver.find_element(By.ID, "memory-found-summary").get_attribute("data-tiles")
    expect(summary == str(len(expected)) and listed == expected[:200],
           f"the run profile's search for {query!r} lists {summary} tiles, the timeline has {len(expected)}")
    pick = len(rows) // 2
    tile = expected[pick]
    live = [e for e, p in enumerate(phases) if any(a["first"][i] <= p and (a["last"][i] < 0 or p <= a["last"][i])
                                                   for i in found[tile])]
    rows[pick].find_element(By.TAG_NAME, "button").click()
    state = driver.execute_script("return runMemory.state()")
    want = phases[live[0]] if live else state["phase"]
    expect(state["tile"] == tile and state["phase"] == want,
           f"the result row of tile {tile} opened {state}, expected phase {want}")
    return f"{query!r}: every one of its {len(expected)} tiles listed; tile {tile} opened at phase {state['phase']}"


def check_free_bytes(driver, folder):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    timeline = load(Path(folder) / "run" / "memory-timeline.json")
    fullest, steps = timeline["fullest_tile"], timeline["steps"]
    open_page(driver, Path(folder) / "run" / "run-profile.html")
    tile = driver.find_element(By.ID, "memory-tile")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", tile)
    tile.clear()
    tile.send_keys(str(fullest["tile"]), Keys.ENTER)
    shown = driver.execute_script("return runMemory.state().tile")
    expect(shown == fullest["tile"], f"tile {fullest['tile']} typed in, the memory section shows tile {shown}")
    holes = driver.execute_script("return runMemory.holes()")
    for key, name in (("free", "free"), ("largest", "largest_hole")):
        got, want = holes[key], fullest[name]
        wrong = next((e for e in range(len(want)) if got[e] != want[e]), None)
        expect(len(got) == len(want) and wrong is None,
               f"the page's {name} of tile {fullest['tile']} differs from the timeline's at executed phase {wrong}")
    hit = driver.find_element(By.CSS_SELECTOR, "#memory-free-chart rect.hit")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", hit)
    ActionChains(driver).move_to_element(hit).perform()
    tooltip = driver.find_element(By.ID, "tooltip")
    expect(tooltip.get_attribute("data-kind") == "memory", "the free-bytes chart showed no tooltip")
    view = driver.execute_script("return runMemory.view()")  # the chart's range: init collapsed by default
    middle = (view["lo"] + view["hi"] - 1) // 2
    near = {f"{steps['fragmentation'][e]:.3f}" for e in range(max(0, middle - 2), min(len(steps["phase"]), middle + 3))}
    text = tooltip.find_element(By.CSS_SELECTOR, "[data-field='device_fragmentation']").text
    expect(text in near, f"the free-bytes tooltip gives device fragmentation {text!r}, expected one of {sorted(near)}")
    return f"tile {fullest['tile']}: free and largest hole at all {len(fullest['free'])} executed phases as the " \
           f"timeline says; device fragmentation {text} halfway along"


def check_tooltips(driver, folder):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    timeline = load(Path(folder) / "run" / "memory-timeline.json")
    open_page(driver, Path(folder) / "run" / "run-profile.html")
    hit = driver.find_element(By.CSS_SELECTOR, "#memory-chart rect.hit")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", hit)
    ActionChains(driver).move_to_element(hit).perform()
    tooltip = driver.find_element(By.ID, "tooltip")
    expect(tooltip.get_attribute("data-kind") == "memory", "the memory chart showed no tooltip")
    steps, ops = timeline["steps"], timeline["ops"]
    view = driver.execute_script("return runMemory.view()")  # the chart's range: init collapsed by default
    middle = (view["lo"] + view["hi"] - 1) // 2

    def label(e):
        op = steps["op"][e]
        return "\u2014" if op is None else f"op {op} {ops['kind'][op]} {ops['name'][op]}"
    text = tooltip.find_element(By.CSS_SELECTOR, "[data-field='op']").text
    near = {label(e) for e in range(max(0, middle - 2), min(len(steps["phase"]), middle + 3))}
    expect(text in near, f"the memory chart's tooltip says {text!r}, expected one of {sorted(near)}")
    return f"the memory chart names {text!r} halfway along"


def first_paint(driver, folder):
    """The placement viewer's first paint (ms since navigation), cold then warm."""
    paints = []
    for _ in range(2):
        open_page(driver, Path(folder) / "memory" / "placement.html")
        paints.append(driver.execute_script("return placementViewer.stats().firstPaintMs"))
    return paints


def run_all(driver, folder, tile, step, query):
    """Every check on one run folder: (results by name: {"ok", "detail"}, first paints)."""
    results = {}
    for name, check in (("links", lambda: check_links(driver, folder, tile, step)),
                        ("heatmap", lambda: check_heatmap(driver, folder, tile, step)),
                        ("cycles", lambda: check_cycles(driver, folder, tile,
                                                        len(load(Path(folder) / "run" / "run-profile.json")["tiles"]
                                                            ["compute_by_op"]["op"]) // 2)),
                        ("search", lambda: check_search(driver, folder, query)),
                        ("run search", lambda: check_run_search(driver, folder, query)),
                        ("free bytes", lambda: check_free_bytes(driver, folder)),
                        ("tooltips", lambda: check_tooltips(driver, folder))):
        began = time.perf_counter()
        try:
            results[name] = {"ok": True, "detail": check()}
        except CheckFailed as failure:
            results[name] = {"ok": False, "detail": str(failure)}
        results[name]["seconds"] = time.perf_counter() - began
    paints = first_paint(driver, folder)
    errors = console_errors(driver)
    results["console"] = {"ok": not errors, "detail": "; ".join(errors[:3]) or "no console errors"}
    return results, paints
