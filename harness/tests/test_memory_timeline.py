"""test_memory_timeline.py: the run-time memory timeline's free bytes and
fragmentation, and the run profile's views of them.

- Every tile's free bytes and largest hole at every executed phase are
  computed here from the timeline's allocation table and support ranges
  (sorted intervals, merged): their sums give the device's free bytes and
  fragmentation (1 - the tiles' largest holes / their free bytes) at every
  executed phase, the most fragmented tile, each tile's free bytes and hole
  at its peak and the fullest tile's series, all as the timeline says.
- In headless Chromium: the run profile measures any tile's holes itself;
  for a tile picked here they equal the computation above; its free-bytes
  chart's tooltip gives the device's figures; the device search lists every
  tile of a name and opens one where a match is live (report_checks).
"""
import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "harness" / "bin" / "ipu-e2e-test"
VIT = ["--workload", "vit-small", "--tiles", "16", "--layers", "2", "--tokens", "20", "--heads", "4", "--head-dim",
       "8", "--hidden", "40"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("timeline")
    done = subprocess.run(["/usr/bin/python3", str(CLI), *VIT, "--quiet", "--output", str(folder),
                           "--profile-directory", str(folder / "run")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder, json.loads((folder / "run" / "memory-timeline.json").read_text())


def holes(timeline, tile, phase):
    """(free bytes, largest hole) of tile at phase: the usable range less every held interval."""
    a, support = timeline["allocations"], timeline["support"]
    ranges = support["reserved"][tile]
    held = [(ranges[k], ranges[k] + ranges[k + 1]) for k in range(0, len(ranges), 2)]
    held += [(a["address"][i], a["address"][i] + a["size"][i]) for i in range(len(a["tile"]))
             if a["tile"][i] == tile and a["first"][i] <= phase and (a["last"][i] < 0 or phase <= a["last"][i])]
    gaps, cursor = [], support["usable"]["start"]
    for lo, hi in sorted(held) + [(support["usable"]["end"], support["usable"]["end"])]:
        if lo > cursor:
            gaps.append(lo - cursor)
        cursor = max(cursor, hi)
    return sum(gaps), max(gaps, default=0)


def fragmentation(free, hole):
    return 1 - hole / free if free else 0.0


def test_free_bytes_and_fragmentation_at_every_executed_phase(run):
    _, timeline = run
    steps, tiles = timeline["steps"], timeline["tiles"]
    measured = {(t, p): holes(timeline, t, p) for t in range(tiles) for p in set(steps["phase"])}
    for e, p in enumerate(steps["phase"]):
        free = sum(measured[t, p][0] for t in range(tiles))
        largest = sum(measured[t, p][1] for t in range(tiles))
        assert steps["free"][e] == free, e
        assert steps["fragmentation"][e] == pytest.approx(fragmentation(free, largest), abs=1e-12), e
        worst = [fragmentation(*measured[t, p]) for t in range(tiles)]
        tile = steps["most_fragmented"]["tile"][e]
        assert worst[tile] == max(worst) == pytest.approx(steps["most_fragmented"]["fragmentation"][e]), e
    peaks = timeline["tile_peaks"]
    for t in range(tiles):
        free, hole = measured[t, peaks["peak_phase"][t]]
        assert (peaks["free_at_peak"][t], peaks["largest_hole_at_peak"][t]) == (free, hole), t
    fullest = timeline["fullest_tile"]
    assert [measured[fullest["tile"], p] for p in steps["phase"]] == list(zip(fullest["free"],
                                                                             fullest["largest_hole"]))
    # The holes are not trivial here: some phase splits the free bytes of some tile.
    assert max(steps["fragmentation"]) > 0


def test_the_run_profile_measures_any_tiles_holes(run, browser):
    from ipu_e2e import report_checks
    folder, timeline = run
    steps = timeline["steps"]
    tile = (timeline["peak"]["tile"] + 5) % timeline["tiles"]
    report_checks.open_page(browser, folder / "run" / "run-profile.html", f"tile={tile}")
    assert browser.execute_script("return runMemory.state().tile") == tile
    got = browser.execute_script("return runMemory.holes()")
    want = [holes(timeline, tile, p) for p in steps["phase"]]
    assert list(zip(got["free"], got["largest"])) == want
    report_checks.check_free_bytes(browser, folder)
    assert not report_checks.console_errors(browser)


@pytest.mark.parametrize("query", ["ln", "QKV", "no-such-name"])
def test_the_run_profiles_device_search(run, browser, query):
    from ipu_e2e import report_checks
    folder, timeline = run
    if report_checks.matches(timeline, query):
        report_checks.check_run_search(browser, folder, query)
    else:
        report_checks.open_page(browser, folder / "run" / "run-profile.html")
        found = browser.execute_script("return runMemory.search(arguments[0])", query)
        assert found == []
    assert not report_checks.console_errors(browser)
