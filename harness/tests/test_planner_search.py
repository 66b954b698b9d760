"""test_planner_search.py: the planner's catalogue and search
(engine/src/plan/catalogue.c, plan.c, engine/src/driver/shrink.c), checked
from the compile report against computations made here:

- the catalogue: how many partitions a matmul has (grids with no empty
  band, computed at once or in serial pieces with no empty chunk) is counted
  here; the groups follow from it and the group size; the retained
  candidates are fastest first, none beaten on cycles, exact footprint and
  (for weights) resident block by another, no more than the cap per
  frontier (three for a parameter matmul), within the catalogue budget, and
  each one's exact per-tile footprint is recomputed here from the band
  arithmetic (uneven tails, 8-byte rows, reduction staging, one serial piece
  at a time);
- the search: with a budget the fastest candidates do not fit, it tries
  smaller ones, capping a matmul each time, until a plan fits; the package
  then runs and matches the reference, and every candidate plan left a
  memory profile, only the last one fitting;
- the budgets: a catalogue built at one budget is searched at another, and a
  catalogue budget nothing passes is refused, naming it; bad flag values
  exit 2 naming the flag;
- `ipu-e2e-bench plan`'s ranking of plans: the pairs its estimates order as
  the device does and its worst inversion, against a count over every pair
  of random cases made here.
"""
import json
import random

import pytest

from ipu_e2e import bench, native, profiles

SIZES = {"f143": 1, "f152": 1, "f16": 2, "f32": 4}


def max_band(total, parts, align):
    units = -(-total // align)
    if parts > units:
        return 0
    return min(-(-units // parts) * align, total)


def band(total, parts, align, index):
    units = -(-total // align)
    lo, hi = index * units // parts * align, (index + 1) * units // parts * align
    return min(lo, total), min(hi, total)


def pad8(n):
    return (n + 7) // 8 * 8


def k_align(insz):
    """Reduction bands on whole 8-byte words of the input type, never under 4 elements (plan.h)."""
    return max(4, 8 // insz)


# The serial piece counts a grid may take (plan.h).
SERIAL = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]


def partitions(m, n, k, tiles, insz, resident=False):
    """Every grid the catalogue enumerates: (gm, gn, gk, gs, gather).  A
    weighted grid with several row bands also gathers its weights when every
    K band cuts into gm non-empty home bands."""
    out = []
    for gm in range(1, min(m, tiles) + 1):
        for gn in range(1, tiles // gm + 1):
            for gk in range(1, tiles // (gm * gn) + 1):
                if max_band(k, gk, k_align(insz)) and max_band(n, gn, 4) and (gk == 1 or m // gm >= gk):
                    serial = [gs for gs in SERIAL if gs == 1 or m // gm // gk >= gs]
                    out += [(gm, gn, gk, gs, 0) for gs in serial]
                    widths = [hi - lo for lo, hi in (band(k, gk, k_align(insz), l) for l in range(gk))]
                    if resident and gm > 1 and min(widths) >= gm:
                        out += [(gm, gn, gk, gs, 1) for gs in serial]
    return out


def chunk(m, gm, gk, gs, i, l, t):
    """Rows of chunk t of sub-band l of row band i."""
    r0, r1 = band(m, gm, 1, i)
    s0, s1 = band(r1 - r0, gk, 1, l)
    c0, c1 = band(s1 - s0, gs, 1, t)
    return r0 + s0 + c0, r0 + s0 + c1


def tiles_of(m, n, k, gm, gn, gk, insz):
    """Every tile (i, j, l) of a grid with its bands: rows, reduction, sub-band and columns."""
    for i in range(gm):
        r0, r1 = band(m, gm, 1, i)
        for l in range(gk):
            k0, k1 = band(k, gk, k_align(insz), l)
            s0, s1 = band(r1 - r0, gk, 1, l)
            for j in range(gn):
                yield i, l, (r0, r1), (k0, k1), (s0, s1), band(n, gn, 4, j)


# A c600 tile's accessible bytes less its runtime state: what budget and package support share.
CAPACITY = 637872 - 1760


def weights(k0, k1, row, members, gm, i, gather):
    """B on tile (i, j, l): every member of its block, or gathering, every
    member of its home band i and one member's whole block."""
    if not gather:
        return (k1 - k0) * row * members
    lo, hi = band(k1 - k0, gm, 1, i)
    return (hi - lo) * row * members + (k1 - k0) * row


def serial_footprint(m, n, k, insz, outsz, members, gm, gn, gk, gs, budget, gather=0):
    """Per tile: B and the result rows for the whole op; per piece its A
    rows, and with gk > 1 its partials, then beside them the staged chunks
    of the other partials."""
    best = 0
    for i, l, (r0, r1), (k0, k1), (s0, s1), (n0, n1) in tiles_of(m, n, k, gm, gn, gk, insz):
        c_row = pad8((n1 - n0) * outsz)
        whole = weights(k0, k1, pad8((n1 - n0) * insz), members, gm, i, gather) \
            + (r1 - r0 if gk == 1 else s1 - s0) * c_row
        peak = 0
        for t in range(gs):
            rows = sum(hi - lo for lo, hi in (chunk(m, gm, gk, gs, i, q, t) for q in range(gk)))
            lo, hi = chunk(m, gm, gk, gs, i, l, t)
            a, partial = rows * pad8((k1 - k0) * insz), rows * c_row if gk > 1 else 0
            peak = max(peak, a + partial, partial + (gk - 1) * (hi - lo) * c_row)
        best = max(best, whole + peak)
    # The serial loop's descriptors and exchange rows (112 bytes a chunk, 64 a piece) beyond an
    # eighth of what the device leaves beside the budget (plan/matmul.c).
    return best + max(0, gs * (112 * gk + 64) - max(0, CAPACITY - budget) // 8)


def exact_footprint(m, n, k, insz, outsz, members, gm, gn, gk, gs, budget, gather=0):
    if gs > 1:
        return serial_footprint(m, n, k, insz, outsz, members, gm, gn, gk, gs, budget, gather)
    best = 0
    for i, _, (r0, r1), (k0, k1), (s0, s1), (n0, n1) in tiles_of(m, n, k, gm, gn, gk, insz):
        c_row = pad8((n1 - n0) * outsz)
        size = (r1 - r0) * pad8((k1 - k0) * insz) + weights(k0, k1, pad8((n1 - n0) * insz), members, gm, i, gather) \
            + (r1 - r0) * c_row
        if gk > 1:
            size += gk * (s1 - s0) * c_row
        best = max(best, size)
    return best


def compile_mlp(options, tiles, budget=None, **search):
    ctx = native.Context()
    workload = native.Workload(ctx, options)
    _, report = workload.compile(profiles.load(ctx, "c600", tiles), budget, search=search)
    return workload.info(), report


def check_catalogues(info, report, tiles, catalogue_budget, cap, group):
    tensors = {t["name"]: t for t in info["tensors"]}
    for op in report["plan"]["ops"]:
        if op["kind"] != "matmul":
            continue
        spec = info["ops"][op["op"]]
        a, b, c = (tensors[name] for name in (*spec["inputs"][:2], spec["output"]))
        m, k, n = a["rows"], a["cols"], b["cols"]
        cat = op["catalogue"]
        resident = b["role"] == "parameter"
        assert cat["enumerated"] == len(partitions(m, n, k, tiles, SIZES[a["dtype"]], resident))
        assert cat["groups"] == -(-(cat["enumerated"] - cat["filtered"]) // group)
        assert 1 <= cat["retained"] <= cat["shortlisted"] <= (3 if resident else 1) * cap
        rows = [dict(zip(cat["columns"], r)) for r in cat["candidates"]]
        assert len(rows) == cat["retained"]
        assert all(x["cycles"] <= y["cycles"] for x, y in zip(rows, rows[1:]))

        def key(r):
            return (r["cycles"], r["exact_bytes"], r["b_bytes"] if resident else 0)
        for i, x in enumerate(rows):
            for j, y in enumerate(rows):
                if i != j:
                    assert not all(u <= v for u, v in zip(key(y), key(x))), (x, y)
        for r in rows:
            assert r["a_bytes"] <= catalogue_budget and r["b_bytes"] <= catalogue_budget
            assert r["exact_bytes"] == exact_footprint(m, n, k, SIZES[a["dtype"]], SIZES[c["dtype"]],
                                                       b["sequence"], r["rows"], r["cols"], r["reduction"],
                                                       r["serial"], catalogue_budget, r["gather"])
            assert r["coarse_bytes"] >= r["exact_bytes"]
        g = op["grid"]
        assert (g["rows"], g["cols"], g["reduction"], g["serial"], g["gather"]) in {
            (r["rows"], r["cols"], r["reduction"], r["serial"], r["gather"]) for r in rows}
        assert cat["fit"] >= 1


@pytest.mark.parametrize("seed", range(8))
def test_catalogue_is_a_capped_frontier_of_every_partition(seed):
    rng = random.Random(seed)
    tiles = rng.choice([4, 16, 64])
    options = {"workload": "mlp", "tokens": rng.randrange(3, 90), "channels": rng.randrange(4, 120),
               "hidden": rng.randrange(4, 200), "batch": rng.choice([1, 2]),
               "precision": rng.choice(["fp8", "fp16"]), "blocks": rng.choice([1, 2])}
    cap, group = rng.choice([2, 5, 32]), rng.choice([7, 64, 4096])
    info, report = compile_mlp(options, tiles, frontier_cap=cap, catalogue_group=group)
    budget = report["estimate"]["budget"]
    assert report["plan"]["search"] == {"budget": budget, "catalogue_budget": budget,
                                        "catalogue_group": group, "frontier_cap": cap}
    check_catalogues(info, report, tiles, budget, cap, group)


# The fastest candidates of this MLP do not fit 37,632 bytes per tile on 16 tiles.
TIGHT = ["--workload", "mlp", "--tiles", 16, "--tokens", 92, "--channels", 48, "--hidden", 162,
         "--precision", "fp16", "--memory-budget", 37632]


def test_search_caps_matmuls_until_a_plan_fits_and_runs(cli, tmp_path):
    done = cli("--quiet", *TIGHT, "--reference-run", "--output", tmp_path, "--memory-profile-directory", tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    tries, estimate = result["search"], result["estimate"]
    assert len(tries) >= 1 and estimate["peak_bytes"] <= 37632 < min(t["peak_bytes"] for t in tries)
    matmuls = {op["op"] for op in result["plan"]["ops"] if op["kind"] == "matmul"}
    assert all(t["capped_op"] in matmuls and t["outcome"] == "estimate over budget" for t in tries)
    assert result["status"] == "PASS"
    found = sorted(tmp_path.glob("memory-*.json"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    profiles_ = [json.loads(p.read_text()) for p in found]
    assert len(profiles_) == len(tries) + 1
    assert [p["fits"] for p in profiles_] == [False] * len(tries) + [True]
    assert [p["peak"]["total"] for p in profiles_] == [t["peak_bytes"] for t in tries] + [estimate["peak_bytes"]]


def test_a_catalogue_built_at_one_budget_is_searched_at_another(cli, tmp_path):
    done = cli("--quiet", *TIGHT, "--catalogue-budget", 586960, "--search-budget", 40000, "--output", tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    search = result["plan"]["search"]
    assert search["budget"] == 40000 and search["catalogue_budget"] == 586960
    assert result["estimate"]["peak_bytes"] <= 40000
    refused = cli("--quiet", *TIGHT, "--catalogue-budget", 1000)
    assert refused.returncode == 1 and "catalogue budget of 1000 bytes" in refused.stdout


@pytest.mark.parametrize("flag, value", [("--frontier-cap", 0), ("--catalogue-group", "x"),
                                         ("--search-budget", "lots"), ("--catalogue-budget", -3)])
def test_bad_search_flags_exit_2_naming_them(cli, flag, value):
    done = cli("--quiet", "--workload", "mlp", "--tiles", 16, flag, value)
    assert done.returncode == 2 and flag in done.stderr


@pytest.mark.parametrize("seed", range(5))
def test_bench_plan_ranking_counts_pairs_in_the_device_order(seed):
    rng = random.Random(seed)
    cases = [{"outcome": "planned", "budget": b, "estimate_cycles": rng.randrange(100, 120),
              "device_cycles": rng.randrange(100, 130)} for b in range(8)]
    cases.append({"outcome": "rejected", "budget": 99})
    ranking = bench.ranking_of(cases)
    planned = cases[:8]
    pairs = [(a, b) for a in planned for b in planned if a["budget"] < b["budget"]
             and a["device_cycles"] != b["device_cycles"]]
    agree = [(a, b) for a, b in pairs
             if (a["estimate_cycles"] < b["estimate_cycles"]) == (a["device_cycles"] < b["device_cycles"])
             and a["estimate_cycles"] != b["estimate_cycles"]]
    assert ranking["plans"] == 8 and ranking["pairs"] == len(pairs) and ranking["in_device_order"] == len(agree)
    lost = [abs(a["device_cycles"] - b["device_cycles"]) for a, b in pairs if (a, b) not in agree]
    if lost:
        assert ranking["worst_inversion"]["device_cycles_lost"] == max(lost)
    else:
        assert ranking["worst_inversion"] is None
