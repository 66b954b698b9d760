"""The placement viewer's benchmark: a generated placement report of at
least 600,000 allocations (1472 tiles x 410: parameters, one of them a
4-member sequence, host staging in the aperture, activations reusing address
slots) opened in headless Chromium; time to first paint (as the page
reports it, cold and warm) and the hover response (the page's time from the
pointer event to the redraw) over allocations of a few tiles.  Needs Debian's
python3-selenium, chromium and chromium-driver.
"""
import json
import random
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

from . import placement_report
from .browser import chromium

KINDS = ["parameter", "activation", "host staging", "input/output"]


def synthetic_report(tiles=1472, per_tile=410, steps=60, seed=20240611):
    """A large, consistent report: per tile six parameters (one a 4-member sequence), host staging
    in the aperture and activations in address slots, each slot reused by allocations with disjoint
    lifetimes (so reuse rows form); footprint and gaps are computed from the allocations."""
    rng = random.Random(seed)
    device = {"sram_base": 311296, "access_end": 949168, "element_bytes": 16384, "region1_base": 524288,
              "aperture_base": 327680, "aperture_end": 360448, "runtime_state_end": 313056, "tiles": tiles}
    code_end = [319840 + 16 * rng.randrange(16) for _ in range(tiles)]
    descriptor_end = [362000 + 16 * rng.randrange(128) for _ in range(tiles)]
    cols = {k: [] for k in ("tile", "address", "size", "first", "last", "name", "kind", "alias", "members")}
    listing = {"step": [], "tile": [], "text": [], "buffers": []}
    names, index = [], {}

    def add(tile, address, size, first, last, name, kind, alias=-1, members=1):
        for key, value in (("tile", tile), ("address", address), ("size", size), ("first", first), ("last", last),
                           ("kind", kind), ("alias", alias), ("members", members)):
            cols[key].append(value)
        if name not in index:
            index[name] = len(names)
            names.append(name)
        cols["name"].append(index[name])
        return len(cols["tile"]) - 1

    estimate = [[0] * steps for _ in range(tiles)]
    low = [[None] * steps for _ in range(tiles)]
    high = [[0] * steps for _ in range(tiles)]
    for t in range(tiles):
        live = []
        address = (max(descriptor_end) + 63) // 64 * 64
        for p in range(6):
            size = 8192 * (1 + p % 3) * (4 if p == 0 else 1)
            live.append(add(t, address, size, 0, steps - 1, f"w{p}[{t % 8},{p}]", 0, members=4 if p == 0 else 1))
            address += size
        for slot in range(4):
            for j in range(10):
                add(t, 327680 + slot * 8192 + 64 * (j % 3), 8192 - 64 * (j % 3 + 1), j * 6, j * 6 + rng.randrange(1, 5),
                    f"staging{slot}.{j}", 2)
        slot_bytes = (949168 - address) // 37 // 64 * 64
        by_step, slot = defaultdict(list), 0
        while len(cols["tile"]) - (t * per_tile) < per_tile:
            for j in range(10):
                if len(cols["tile"]) - t * per_tile >= per_tile:
                    break
                size = rng.randrange(1, slot_bytes // 64) * 64
                kind = 3 if slot == 0 and j in (0, 9) else 1
                at = address + slot * slot_bytes + 64 * rng.randrange(0, (slot_bytes - size) // 64 + 1)
                i = add(t, at, size, j * 6, min(steps - 1, j * 6 + rng.randrange(6)), f"act{slot}_{j}[{t % 16}]", kind,
                        alias=index.get("x", -1) if kind == 3 and j == 0 else -1)
                live.append(i)
                by_step[j * 6].append(i)
            slot += 1
        for i in live:
            for s in range(cols["first"][i], cols["last"][i] + 1):
                estimate[t][s] += cols["size"][i]
                low[t][s] = cols["address"][i] if low[t][s] is None else min(low[t][s], cols["address"][i])
                high[t][s] = max(high[t][s], cols["address"][i] + cols["size"][i])
        for s in sorted(by_step):
            for part in (by_step[s][:2], by_step[s][2:4]):
                listing["step"].append(s)
                listing["tile"].append(t)
                listing["text"].append("gemm " + " ".join(f"@{i}+0" for i in part))
                listing["buffers"].append(part)
    placed = [[high[t][s] - low[t][s] if low[t][s] is not None else 0 for s in range(steps)] for t in range(tiles)]
    every = sorted(((placed[t][s] - estimate[t][s], t, s) for t in range(tiles) for s in range(steps)), reverse=True)
    gaps = [{"tile": t, "step": s, "estimate": estimate[t][s], "placed": placed[t][s], "gap": g} for g, t, s in every[:20]]
    return {"version": 1, "kind": "placement", "tiles": tiles, "device": device,
            "steps": {"label": [f"op{s // 3} step {s}" for s in range(steps)],
                      "kind": [("compute", "exchange", "host input")[s % 3] for s in range(steps)],
                      "init": [s < 3 for s in range(steps)]},
            "support": {"code_base": 313088, "code_end": code_end, "descriptor_base": 360448,
                        "descriptor_end": descriptor_end, "runtime_state_bytes": 1760},
            "allocations": dict(cols, kinds=KINDS), "footprint": {"estimate": estimate, "placed": placed},
            "gaps": gaps, "listing": listing, "repeat": {"first": 30, "count": 24, "iterations": 4}, "names": names}



def measure(tiles=1472, per_tile=410, hovers_per_tile=12, progress=None):
    """Generate the report, open it twice and hover; returns the figures."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait
    report = synthetic_report(tiles=tiles, per_tile=per_tile)
    count = len(report["allocations"]["tile"])
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        source = folder / "large.json"
        source.write_text(json.dumps(report, separators=(",", ":")))
        placement_report.write_placement_html(source, folder / "large.html")
        driver = chromium(folder / "profile")
        try:
            paints = []
            for load in ("cold", "warm"):
                if progress:
                    progress.update(f"loading the viewer ({load})")
                driver.get((folder / "large.html").as_uri())
                WebDriverWait(driver, 60).until(lambda d: d.execute_script("return document.body.dataset.ready === 'true'"))
                paints.append(driver.execute_script("return window.placementViewer.stats()"))
            driver.execute_script("document.querySelector('#map-scroller').scrollIntoView({block: 'center'})")
            canvas = driver.find_element("css selector", "#map-canvas")
            hover_ms = []
            for tile in (0, tiles // 2, tiles - 1):
                if progress:
                    progress.update(f"hovering allocations of tile {tile}")
                ids = driver.execute_script("const v = window.placementViewer; v.setTile(arguments[0]);"
                                            "return v.tileAllocations(arguments[0]).filter(i => v.rect('map', i))",
                                            tile)
                ids = sorted(ids, key=lambda i: -report["allocations"]["size"][i])[:hovers_per_tile]
                for ident in ids:
                    before = driver.execute_script("return window.placementViewer.stats().hoverCount")
                    r = driver.execute_script("return window.placementViewer.rect('map', arguments[0])", ident)
                    box = driver.execute_script("const b = arguments[0].getBoundingClientRect(); return [b.left, b.top]",
                                                canvas)
                    actions = ActionChains(driver)
                    actions.w3c_actions.pointer_action.move_to_location(round(box[0] + r["x"]), round(box[1] + r["y"]))
                    actions.perform()
                    WebDriverWait(driver, 10).until(lambda d: d.execute_script(
                        "return window.placementViewer.stats().hoverCount") > before)
                    hover_ms.append(driver.execute_script("return window.placementViewer.stats().hoverMs"))
        finally:
            driver.quit()
    return {"allocations": count, "first_paint_ms": [p["firstPaintMs"] for p in paints],
            "parse_ms": paints[-1].get("parseMs"), "index_ms": paints[-1].get("indexMs"),
            "hover_ms_median": statistics.median(hover_ms), "hover_ms_max": max(hover_ms),
            "hovers": len(hover_ms), "targets": {"first_paint_ms": 2000, "hover_ms": 50}}
