"""test_memory_profile.py: the planner's memory profiles (JSON version 3,
engine/src/report/memory.c), checked from the JSON alone against two
computations that do not use the estimator:

- the layout arithmetic: every value's per-tile payload (tile_shards: rows x
  columns x element bytes of the blocks on that tile) and aligned bytes
  (tile_bytes: rows padded to 8 bytes, times the sequence's copies, rounded
  to 8) are recomputed here from the layout's bounds and tiles;
- concrete shard storage: the placement report of the same compile lists
  every buffer the package holds, with its tile, size and lifetime in program
  steps; per step group and tile, the sizes of the buffers live in the group
  must add up to the profile's tile_usage.

Every tile at every step is first reconstructed from the profile itself: for
each live root, the largest tile_bytes among the root and its aliases, plus
tile_scratch, per class.  Geometries are drawn at random (seeded: the seed is
in the test id), with uneven shards, padded rows, FP8 and FP16, parameter
sequences through a Repeat (the carried value's alias), batches, tight budgets
(several finalists) and the ViT's attention and LayerNorm; two fixed tiny
geometries on 64 tiles put the two matmuls' values on disjoint tiles.  One
test asserts that the cases keep covering wrapped tile offsets, uneven
shards, padded rows, sequence copies, the alias, replicated operands, and
values sharing tiles as well as values on disjoint ones.  A budget no plan
fits must still leave a rejected profile of its smallest candidate.
"""
import json
import random
from collections import defaultdict

import pytest

from ipu_e2e import native, profiles


def compile_with_profiles(tmp_path, options, tiles, budget=None):
    """Compile in-process; returns (profiles by serial, placement report or None, error or None,
    the compile's report or None)."""
    ctx = native.Context()
    workload = native.Workload(ctx, options)
    error, report, placement = None, None, tmp_path / "placement.json"
    try:
        _, report = workload.compile(profiles.load(ctx, "c600", tiles), budget, placement_report=placement,
                                     memory_profiles=tmp_path)
    except native.IpuError as e:
        error = str(e)
    found = sorted(tmp_path.glob("memory-*.json"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    return ([json.loads(p.read_text()) for p in found],
            json.loads(placement.read_text()) if placement.exists() else None, error, report)


def pad8(n):
    return (n + 7) // 8 * 8


def layout_sizes(value, tiles):
    """(payload, aligned) per tile from the value's layout alone."""
    lay = value["layout"]
    payload, aligned = [0] * tiles, [0] * tiles
    rp, cp = lay["row_parts"], lay["col_parts"]
    for r in range(lay["replicas"]):
        for i in range(rp):
            for j in range(cp):
                tile = lay["tiles"][(r * rp + i) * cp + j]
                if tile < 0:
                    continue
                rows = lay["row_bounds"][i + 1] - lay["row_bounds"][i]
                cols = lay["col_bounds"][j + 1] - lay["col_bounds"][j]
                payload[tile] += rows * cols * lay["elem"]
                aligned[tile] += pad8(rows * pad8(cols * lay["elem"]) * value["copies"])
    return payload, aligned


def reconstruct(profile):
    """Per step, per tile, [standard, interleaved] from live roots, aliases and scratch."""
    values = profile["timeline"]["values"]
    by_root = defaultdict(list)
    for v in values:
        by_root[v["root"]].append(v)
    out = []
    for step in profile["timeline"]["steps"]:
        usage = [list(pair) for pair in step["tile_scratch"]]
        for root in step["live"]:
            klass = 1 if values[root]["class"] == "interleaved" else 0
            for t in range(profile["tiles"]):
                usage[t][klass] += max(v["tile_bytes"][t] for v in by_root[root])
        out.append(usage)
    return out


def concrete_usage(profile, placement):
    """Per step group and tile, the live bytes of the placed buffers."""
    a = placement["allocations"]
    usage = []
    for step in profile["timeline"]["steps"]:
        s0, s1 = step["program_steps"]
        per_tile = [0] * profile["tiles"]
        for tile, size, first, last in zip(a["tile"], a["size"], a["first"], a["last"]):
            if first <= s1 and last >= s0:
                per_tile[tile] += size
        usage.append(per_tile)
    return usage


def check_profile(profile):
    """Everything the profile must say about itself."""
    assert profile["version"] == 3 and profile["kind"] == "memory-profile"
    tiles, values, steps = profile["tiles"], profile["timeline"]["values"], profile["timeline"]["steps"]
    for v in values:
        payload, aligned = layout_sizes(v, tiles)
        assert v["tile_shards"] == payload, v["name"]
        assert v["tile_bytes"] == aligned, v["name"]
        assert v["shard_size"] == max(payload) and v["aligned_size"] == max(aligned)
        assert values[v["root"]]["root"] == v["root"]
        if v["kind"] == "alias":
            assert values[v["root"]]["tile_bytes"] == v["tile_bytes"]
    rebuilt = reconstruct(profile)
    best = (-1, None, None)
    for step, usage in zip(steps, rebuilt):
        assert [list(p) for p in step["tile_usage"]] == usage, step["label"]
        totals = [s + i for s, i in usage]
        assert list(step["usage"]) == usage[step["peak_tile"]]
        assert sum(step["usage"]) == max(totals)
        coarse = sum(values[r]["aligned_size"] for r in step["live"]) + max(sum(p) for p in step["tile_scratch"])
        assert step["coarse_usage"] == coarse >= max(totals)
        for t, total in enumerate(totals):
            if total > best[0]:
                best = (total, t, step["index"])
        assert step["executions"] >= 1
    peak = profile["peak"]
    assert (peak["total"], peak["tile"], peak["step"]) == best
    assert peak["standard"] == max(u[0] for usage in rebuilt for u in usage)
    assert profile["fits"] == (peak["total"] <= profile["budget"])


def random_mlp(rng):
    tiles = rng.choice([4, 8, 16, 64])
    return tiles, {"workload": "mlp", "batch": rng.choice([1, 2]), "seed": rng.randrange(100),
                   "tokens": rng.randrange(3, 40), "channels": rng.randrange(4, 80),
                   "hidden": rng.randrange(4, 160), "precision": rng.choice(["fp8", "fp16"]),
                   "blocks": rng.choice([1, 1, 2, 3])}


# Tiny matmuls on 64 tiles: their grids use a few tiles each, placed one after the
# other, so the weights and activations of the two matmuls own disjoint tiles.
FIXED = {"disjoint": (64, {"workload": "mlp", "tokens": 3, "channels": 8, "hidden": 8}),
         "disjoint-repeat": (64, {"workload": "mlp", "tokens": 5, "channels": 12, "hidden": 20, "blocks": 2})}
CASES = list(range(12)) + sorted(FIXED)


def case(name):
    """(tiles, options): a seeded random geometry, or a fixed one."""
    if name in FIXED:
        return FIXED[name][0], dict(FIXED[name][1])
    return random_mlp(random.Random(name))


@pytest.mark.parametrize("seed", CASES)
def test_random_mlp_profiles_match_layouts_and_placed_storage(tmp_path, seed):
    tiles, options = case(seed)
    options.setdefault("blocks", 1)
    found, placement, error, report = compile_with_profiles(tmp_path, options, tiles)
    assert error is None, f"seed {seed}: {options} on {tiles} tiles: {error}"
    assert found and all(p["status"] == "finalist" for p in found)
    for profile in found:
        check_profile(profile)
    final = found[-1]
    assert final["fits"]
    # The profile's peak is the compile's own liveness estimate (per program step).
    assert final["peak"]["total"] == report["estimate"]["peak_bytes"]
    steps = final["timeline"]["steps"]
    assert concrete_usage(final, placement) == [[s + i for s, i in step["tile_usage"]] for step in steps]
    # A Repeat body's steps say how often they run; its parameters hold every member.
    body = [s for s in steps if s["executions"] > 1]
    assert len(body) > 0 if options["blocks"] > 1 else not body
    assert all(s["executions"] == options["blocks"] for s in body)
    params = [v for v in final["timeline"]["values"] if v["role"] == "parameter" and v["kind"] == "tensor"]
    assert params and all(v["copies"] == options["blocks"] for v in params)


def test_vit_profile_matches_placed_storage(tmp_path):
    options = {"workload": "vit", "tokens": 20, "heads": 4, "head_dim": 8, "hidden": 40, "layers": 2}
    found, placement, error, report = compile_with_profiles(tmp_path, options, 16)
    assert error is None and found
    assert found[-1]["peak"]["total"] == report["estimate"]["peak_bytes"]
    final = found[-1]
    check_profile(final)
    kinds = {s["kind"] for s in final["timeline"]["steps"]}
    assert {"attention", "layernorm", "matmul", "host input", "host output"} <= kinds
    # Parameters of the layer body hold a member per layer; the pooling head's hold one.
    info = native.Workload(native.Context(), options).info()
    sequence = {t["name"]: t["sequence"] for t in info["tensors"] if t["role"] == "parameter"}
    params = [v for v in final["timeline"]["values"] if v["role"] == "parameter" and v["kind"] == "tensor"]
    assert {v["copies"] for v in params} == {1, 2}
    assert all(v["copies"] == sequence[v["tensor"]] for v in params)
    assert concrete_usage(final, placement) == [[s + i for s, i in step["tile_usage"]]
                                                for step in final["timeline"]["steps"]]


def test_a_budget_nothing_fits_leaves_a_rejected_profile(tmp_path):
    # The two FP8 weights (64 x 96 bytes each) need 768 bytes per tile on 16
    # tiles however they are cut: 512 bytes cannot hold them.
    options = {"workload": "mlp", "tokens": 33, "channels": 64, "hidden": 96}
    budget = 512
    assert 2 * 64 * 96 / 16 > budget
    found, placement, error, _ = compile_with_profiles(tmp_path, options, 16, budget=budget)
    assert error is not None and str(budget) in error and placement is None
    rejected = [p for p in found if p["status"] == "rejected"]
    assert len(rejected) == 1 and rejected[0] is found[-1]
    profile = rejected[0]
    check_profile(profile)
    assert not profile["fits"] and profile["peak"]["total"] > budget
    r = profile["rejection"]
    assert r["budget"] == budget and r["reason"] in error
    steps = profile["timeline"]["steps"]
    over = [s["index"] for s in steps if sum(s["usage"]) > budget]
    assert [o["step"] for o in r["over_budget"]] == over
    peak = profile["peak"]
    assert (r["peak"]["step"], r["peak"]["tile"], r["peak"]["usage"]) == (peak["step"], peak["tile"], peak["total"])
    # The largest values on the peak tile, and the ops whose layout choice comes after the peak.
    live = steps[peak["step"]]["live"]
    sizes = sorted(((profile["timeline"]["values"][v]["tile_bytes"][peak["tile"]], v) for v in live),
                   key=lambda e: (-e[0], live.index(e[1])))
    assert [(x["bytes"], x["value"]) for x in r["peak"]["largest"]] == [e for e in sizes if e[0]][:5]
    first_step = {}
    for s in steps:
        if s["op"] is not None:
            first_step.setdefault(s["op"], s["index"])
    later = []
    for x in r["peak"]["largest"]:
        op = x["layout_op"]
        if op is not None and first_step.get(op, -1) > peak["step"] and op not in later:
            later.append(op)
    assert r["raised_by"] == later


def layout_features(value, tiles):
    """Which ownership cases a value's layout shows."""
    lay = value["layout"]
    present = [t for t in lay["tiles"] if t >= 0]
    rows = {b - a for a, b in zip(lay["row_bounds"], lay["row_bounds"][1:])}
    cols = {b - a for a, b in zip(lay["col_bounds"], lay["col_bounds"][1:])}
    features = set()
    if any(b < a for a, b in zip(present, present[1:])) and len(set(present)) == len(present):
        features.add("wrapped tile offsets")
    if len(present) > len(set(present)):
        features.add("overlapping ownership")  # replicas: several blocks of one value per tile
    if lay["replicas"] > 1:
        features.add("replicated")
    if len(rows) > 1 or len(cols) > 1:
        features.add("uneven shards")
    if value["aligned_size"] > value["shard_size"] * value["copies"]:
        features.add("padded rows")
    if value["copies"] > 1:
        features.add("sequence copies")
    if value["kind"] == "alias":
        features.add("alias")
    return features


def test_the_random_geometries_cover_every_ownership_case(tmp_path):
    """The randomized cases above must keep exercising what the issue lists:
    wrapped tile offsets, uneven shards, padded rows, sequence copies, the
    Repeat alias, replicated operands, and tiles holding several values at
    once (and values on disjoint tiles)."""
    seen, shared_tile, disjoint = set(), False, False
    for seed in CASES:
        tiles, options = case(seed)
        folder = tmp_path / str(seed)
        folder.mkdir()
        found, _, error, _ = compile_with_profiles(folder, options, tiles)
        assert error is None
        final = found[-1]
        values = final["timeline"]["values"]
        for v in values:
            seen |= layout_features(v, tiles)
        for step in final["timeline"]["steps"]:
            owners = [{t for t, b in enumerate(values[r]["tile_bytes"]) if b} for r in step["live"]]
            shared_tile |= any(a & b for i, a in enumerate(owners) for b in owners[i + 1:])
            disjoint |= any(not (a & b) for i, a in enumerate(owners) for b in owners[i + 1:])
    expected = {"wrapped tile offsets", "replicated", "uneven shards", "padded rows", "sequence copies", "alias"}
    assert expected <= seen, expected - seen
    assert shared_tile and disjoint
