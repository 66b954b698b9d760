"""test_placement_report.py: the compiler's placement report (JSON version 1,
engine/src/report/placement.c) and its HTML writer (ipu_e2e.placement_report),
without a browser.  Small MLPs are compiled in-process on 16 tiles with a
placement report; every allocation is then checked here, independently of
the compiler: no two allocations of one tile that are live at the same step
share a byte; each lies in accessible SRAM and outside its tile's package
support (runtime state, code, descriptors); host staging lies in the
aperture, parameters and inputs/outputs never do, and nothing else there is
live across a host phase; parameters live for the whole program; each
program-listing line names live buffers of its own tile.  The footprint
(estimate: live bytes without staging; placed: highest end minus lowest
start) and the largest gaps are recomputed from the allocations and must
equal the report's.  The package the report describes is run on the device
and must match the FP32 reference, and an allocation the compiler is told to
move onto a live one is caught by the same overlap check.  The writer must
embed the report so that it parses back unchanged and refuse what is not a
version 1 placement report, writing nothing.
"""
import base64
import gzip
import json
import re
from collections import defaultdict

import pytest

from ipu_e2e import native, placement_report, profiles, runner, tolerances

SMALL = {"workload": "mlp", "tokens": 21, "channels": 37, "hidden": 203}
CASES = {
    "fp8": SMALL,
    # three blocks through one Repeat: per-block weights are parameter sequences, the carried
    # value aliases the input
    "fp16-3-blocks": dict(SMALL, precision="fp16", blocks=3),
}
PARAMETER, ACTIVATION, STAGING, HOST_TENSOR = range(4)


class Compiled:
    """A compiled workload, its package and its placement report."""

    def __init__(self, options, path, inject=None):
        self.ctx = native.Context()
        self.workload = native.Workload(self.ctx, options)
        self.package, self.compiled = self.workload.compile(profiles.load(self.ctx, "c600", 16),
                                                            placement_report=path, inject=inject)
        self.path = path
        self.report = json.loads(path.read_text())


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    return Compiled(CASES[request.param], tmp_path_factory.mktemp("placement") / "placement.json")


def records(report):
    """The allocations as dicts (the report is columnar)."""
    a = report["allocations"]
    keys = ("tile", "address", "size", "first", "last", "name", "kind", "alias", "members")
    return [dict(zip(keys, row), id=i) for i, row in enumerate(zip(*(a[k] for k in keys)))]


def overlaps(report):
    """Pairs of allocations on one tile, live at a common step, that share a byte."""
    by_tile = defaultdict(list)
    for r in records(report):
        by_tile[r["tile"]].append(r)
    found = []
    for rs in by_tile.values():
        rs.sort(key=lambda r: r["address"])
        for i, r in enumerate(rs):
            for q in rs[i + 1:]:
                if q["address"] >= r["address"] + r["size"]:
                    break
                if r["first"] <= q["last"] and q["first"] <= r["last"]:
                    found.append((r["id"], q["id"]))
    return found


def live_footprint(report):
    """(estimate, placed)[tile][step] recomputed from the allocations: host staging excluded."""
    tiles, steps = report["tiles"], len(report["steps"]["label"])
    estimate = [[0] * steps for _ in range(tiles)]
    low = [[None] * steps for _ in range(tiles)]
    high = [[0] * steps for _ in range(tiles)]
    for r in records(report):
        if r["kind"] == STAGING:
            continue
        t = r["tile"]
        for s in range(r["first"], r["last"] + 1):
            estimate[t][s] += r["size"]
            low[t][s] = r["address"] if low[t][s] is None else min(low[t][s], r["address"])
            high[t][s] = max(high[t][s], r["address"] + r["size"])
    placed = [[high[t][s] - low[t][s] if low[t][s] is not None else 0 for s in range(steps)] for t in range(tiles)]
    return estimate, placed


# ---------------------------------------------------------------- the report's shape

def test_report_describes_the_package(case):
    report, info = case.report, case.package.info()
    assert report["version"] == 1 and report["kind"] == "placement"
    assert report["tiles"] == info["tiles"] == 16
    a = report["allocations"]
    lengths = {k: len(a[k]) for k in ("tile", "address", "size", "first", "last", "name", "kind", "alias", "members")}
    assert set(lengths.values()) == {info["allocations"]}, lengths
    assert a["kinds"] == ["parameter", "activation", "host staging", "input/output"]
    steps = len(report["steps"]["label"])
    assert len(report["steps"]["kind"]) == len(report["steps"]["init"]) == steps > 0
    profile = json.loads(info["profile"]) if isinstance(info["profile"], str) else info["profile"]
    device = report["device"]
    for key in ("sram_base", "element_bytes", "region1_base", "aperture_base", "aperture_end"):
        assert device[key] == profile[key], key
    assert device["access_end"] == profile["sram_end"] - profile["inaccessible_tail"]
    assert device["runtime_state_end"] == profile["sram_base"] + profile["runtime_state_bytes"]
    assert len(report["support"]["code_end"]) == len(report["support"]["descriptor_end"]) == 16
    assert len(report["footprint"]["estimate"]) == len(report["footprint"]["placed"]) == 16
    assert all(len(row) == steps for row in report["footprint"]["estimate"] + report["footprint"]["placed"])
    rep = report["repeat"]
    assert 0 <= rep["first"] and rep["first"] + rep["count"] <= steps and rep["iterations"] >= 1


def test_every_allocation_is_well_formed(case):
    report = case.report
    steps, names = len(report["steps"]["label"]), report["names"]
    for r in records(report):
        assert 0 <= r["tile"] < 16 and r["size"] > 0, r
        assert 0 <= r["first"] <= r["last"] < steps, r
        assert 0 <= r["name"] < len(names) and -1 <= r["alias"] < len(names), r
        assert r["kind"] in (PARAMETER, ACTIVATION, STAGING, HOST_TENSOR), r
        assert r["members"] >= 1 and r["size"] % r["members"] == 0, r
        if r["kind"] == PARAMETER:  # persistent: the whole program
            assert (r["first"], r["last"]) == (0, steps - 1), r


# ---------------------------------------------------------------- placement, checked independently

def test_no_two_live_allocations_share_a_byte(case):
    assert overlaps(case.report) == []


def test_allocations_avoid_package_support_and_respect_the_aperture(case):
    report = case.report
    device, support = report["device"], report["support"]
    base, end = device["sram_base"], device["access_end"]
    aperture = (device["aperture_base"], device["aperture_end"])
    host_steps = {s for s, kind in enumerate(report["steps"]["kind"]) if kind.startswith("host")}
    assert host_steps and len(set(report["steps"]["kind"])) == 4
    for r in records(report):
        lo, hi, t = r["address"], r["address"] + r["size"], r["tile"]
        assert base <= lo and hi <= end, r
        reserved = [(base, device["runtime_state_end"]), (support["code_base"], support["code_end"][t]),
                    (support["descriptor_base"], support["descriptor_end"][t])]
        for a, b in reserved:
            assert hi <= a or lo >= b, (r, (a, b))
        in_aperture = lo < aperture[1] and hi > aperture[0]
        if r["kind"] == STAGING:
            assert aperture[0] <= lo and hi <= aperture[1], r
        elif in_aperture:
            # only transient tensors borrow the aperture, and only between host phases
            assert r["kind"] == ACTIVATION, r
            assert not host_steps & set(range(r["first"], r["last"] + 1)), r


def test_footprint_equals_the_live_allocations(case):
    estimate, placed = live_footprint(case.report)
    assert case.report["footprint"]["estimate"] == estimate
    assert case.report["footprint"]["placed"] == placed
    # the estimate is what the planner promised: never more than the placed span
    assert all(e <= p for row_e, row_p in zip(estimate, placed) for e, p in zip(row_e, row_p))


def test_gaps_are_the_largest_differences(case):
    estimate, placed = live_footprint(case.report)
    every = sorted(((placed[t][s] - estimate[t][s], t, s) for t in range(16) for s in range(len(estimate[t]))
                    if placed[t][s] > estimate[t][s]), key=lambda g: (-g[0], g[1], g[2]))
    expected = [{"tile": t, "step": s, "estimate": estimate[t][s], "placed": placed[t][s], "gap": gap}
                for gap, t, s in every[:20]]
    assert expected, "a padded MLP wastes some space somewhere"
    assert case.report["gaps"] == expected


def test_listing_lines_use_live_buffers_of_their_tile(case):
    report = case.report
    listing, a = report["listing"], report["allocations"]
    assert len(listing["step"]) == len(listing["tile"]) == len(listing["text"]) == len(listing["buffers"]) > 0
    used = set()
    for step, tile, text, buffers in zip(listing["step"], listing["tile"], listing["text"], listing["buffers"]):
        assert buffers and text, (step, tile, text)
        for b in buffers:
            assert a["tile"][b] == tile and a["first"][b] <= step <= a["last"][b], (step, tile, text, b)
            used.add(b)
        for b in map(int, re.findall(r"@(\d+)\+", text)):  # kernel lines name their buffers
            assert b in buffers, (text, buffers)
    kinds = {a["kind"][b] for b in used}
    assert {PARAMETER, ACTIVATION, STAGING, HOST_TENSOR} <= kinds


def test_sequences_and_aliases_are_reported(case):
    rs = records(case.report)
    names = case.report["names"]
    if case.workload.info()["options"].get("blocks", 1) > 1:
        sequences = [r for r in rs if r["members"] > 1]
        assert sequences and all(r["kind"] == PARAMETER and r["members"] == 3 for r in sequences)
    aliased = [r for r in rs if r["alias"] >= 0]
    assert aliased and all(names[r["alias"]] != names[r["name"]] for r in aliased)


def test_the_placed_program_passes(case):
    _, outputs, _ = runner.run(case.ctx, case.package)
    case.workload.reference_run({"fp32": True})
    checked = 0
    for t in case.workload.info()["tensors"]:
        if t["role"] == "output":
            result = native.check_outputs(case.ctx, case.workload.reference_output(t["name"]), outputs[t["name"]],
                                          t["dtype"], t["rows"], t["cols"], tolerances.criteria("fp32", t["dtype"]))
            assert result["passed"] and result["nonfinite_rows"] == 0, result
            checked += 1
    assert checked == 1


def test_the_overlap_check_catches_an_allocation_moved_onto_a_live_one(tmp_path):
    moved = Compiled(SMALL, tmp_path / "moved.json", inject="overlap-allocation")
    found = overlaps(moved.report)
    assert found, "the injected overlap went unnoticed"
    a = moved.report["allocations"]
    for i, j in found:
        assert a["tile"][i] == a["tile"][j]


# ---------------------------------------------------------------- the HTML writer

def test_writer_embeds_the_report_unchanged(case, tmp_path):
    """The report in three compressed parts (the report, then after the script its listing and footprint), read
    back whole, with where the page opens (the largest estimate's tile and step, computed here); a hostile name
    stays inside its part."""
    report = json.loads(json.dumps(case.report))
    report["names"][0] = "</script><script>window.injected = 1</script><!-- <b>"
    source = tmp_path / "hostile.json"
    source.write_text(json.dumps(report))
    placement_report.write_placement_html(source, tmp_path / "out" / "placement.html")
    html = (tmp_path / "out" / "placement.html").read_text()
    parts = dict(placement_report.EMBEDDED.findall(html))
    assert list(parts) == ["placement-data", "placement-listing", "placement-footprint"]
    assert html.index('id="placement-listing"') > html.index("window.placementViewer")
    assert "window.injected" not in html
    assert placement_report.load(tmp_path / "out" / "placement.html") == report
    data = json.loads(gzip.decompress(base64.b64decode(parts["placement-data"])))
    footprint = report["footprint"]
    peak = max((v, -t, -s) for t, series in enumerate(footprint["estimate"]) for s, v in enumerate(series))
    assert data["opening"] == {"tile": -peak[1], "step": -peak[2]}
    assert "/*@@" not in html and "<canvas" in html
    assert not [p for p in (tmp_path / "out").iterdir() if p.name != "placement.html"]  # no temporary left


@pytest.mark.parametrize("change, message", [
    (lambda r: r.update(version=2), "version 1"),
    (lambda r: r.pop("listing"), "missing listing"),
    (lambda r: r["allocations"]["size"].pop(), "differ in length"),
    (lambda r: r["allocations"]["size"].__setitem__(0, float("nan")), "not a JSON number"),
])
def test_writer_refuses_what_is_not_a_placement_report(case, tmp_path, change, message):
    report = json.loads(json.dumps(case.report))
    change(report)
    source = tmp_path / "bad.json"
    source.write_text(json.dumps(report))
    with pytest.raises(ValueError, match=message):
        placement_report.write_placement_html(source, tmp_path / "out" / "placement.html")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
