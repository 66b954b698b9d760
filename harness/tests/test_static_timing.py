"""test_static_timing.py: the static timer (Package.timing, engine/src/timing)
gives exactly the cycles and exchange bytes the device charges, step by
step, on every plan here: MLPs and ViTs, both attention modes, batch 1, 2
and 4, tight budgets (serial pieces), every exchange mode, Repeats with
patches, hand-built exchange-stress packages, small devices and full size.
The device is the independent count: it measures its cycles and bytes as it
moves them; the timer reads the package's records and runs nothing.
"""
import pytest

from ipu_e2e import native, profiles, runner, stress

SMALL_MLP = {"workload": "mlp", "tokens": 128, "channels": 512, "hidden": 1024}
SMALL_VIT = {"workload": "vit", "tokens": 20, "heads": 4, "head_dim": 8, "hidden": 40, "layers": 2}
STREAMS = {"exchange_stream_words": 256}
BALANCED = {"exchange_stream_words": 256, "balance_streams": True}

# (name, workload options, tiles, memory budget, attention, search options);
# the tight budgets make serial pieces and K splits.
PLANS = [
    ("mlp-b1", SMALL_MLP, 16, None, None, None),
    ("mlp-b2", dict(SMALL_MLP, batch=2), 16, None, None, None),
    ("mlp-b4", dict(SMALL_MLP, batch=4), 64, None, None, None),
    ("mlp-fp16", dict(SMALL_MLP, precision="fp16"), 16, None, None, None),
    ("mlp-blocks3", dict(SMALL_MLP, blocks=3), 16, None, None, None),
    ("mlp-blocks3-fp16-b2", dict(SMALL_MLP, blocks=3, precision="fp16", batch=2), 64, None, None, None),
    ("mlp-tight", SMALL_MLP, 16, 131072, None, None),
    ("mlp-b2-tight", dict(SMALL_MLP, batch=2), 16, 196608, None, None),
    ("mlp-b4-tight", dict(SMALL_MLP, batch=4), 64, 65536, None, None),
    ("mlp-blocks3-tight", dict(SMALL_MLP, blocks=3), 64, 65536, None, None),
    ("mlp-tiles64-tight", SMALL_MLP, 64, 32768, None, None),
    ("mlp-streams", SMALL_MLP, 16, None, None, STREAMS),
    ("mlp-balanced", dict(SMALL_MLP, batch=2), 16, None, None, BALANCED),
    ("mlp-small-waves", dict(SMALL_MLP, blocks=3), 64, 65536, None,
     {"exchange_stream_words": 16, "balance_streams": True}),
    ("mlp-tiles4", SMALL_MLP, 4, None, None, None),
    ("vit-small", {"workload": "vit-small"}, 64, None, None, None),
    ("vit-small-flash", {"workload": "vit-small"}, 64, None, "flash", None),
    ("vit-small-materialized", {"workload": "vit-small"}, 64, None, "materialized", None),
    ("vit-small-b2", {"workload": "vit-small", "batch": 2}, 64, None, None, None),
    ("vit-small-b2-flash", {"workload": "vit-small", "batch": 2}, 64, None, "flash", None),
    ("vit-small-balanced", {"workload": "vit-small"}, 64, None, None, BALANCED),
    ("vit-small-patches", {"workload": "vit-small", "input": "patches"}, 64, None, None, None),
    ("vit-flash", SMALL_VIT, 16, None, "flash", None),
    ("vit-materialized", SMALL_VIT, 16, None, "materialized", None),
    ("vit-b4-flash", dict(SMALL_VIT, batch=4), 16, None, "flash", None),
    ("vit-b2-materialized", dict(SMALL_VIT, batch=2), 16, None, "materialized", None),
    ("vit-tight", SMALL_VIT, 16, 20000, None, None),
    ("vit-streams", SMALL_VIT, 16, None, "materialized", {"exchange_stream_words": 64}),
    ("vit-patches-balanced", dict(SMALL_VIT, input="patches"), 16, None, "flash", BALANCED),
    ("vit-tiles4", SMALL_VIT, 4, None, None, None),
]

FULL_SIZE = [
    ("full-mlp", {"workload": "mlp"}, 0, None, None, None),
    ("full-mlp-b4-balanced", {"workload": "mlp", "batch": 4}, 0, None, None, BALANCED),
    ("full-vit-2-layers-b2", {"workload": "vit", "layers": 2, "batch": 2}, 0, None, None, None),
]

@pytest.fixture(scope="module")
def ctx():
    return native.Context()


def device_run(ctx, package):
    result, _, _ = runner.run(ctx, package)
    return result


def assert_timing_equals_run(timing, run):
    """Cycles, totals, every step (cycles per class, bytes, ops, phase,
    iteration) and every tile's compute and wait: the same numbers."""
    assert timing["cycles"] == run["cycles"]
    assert timing["totals"] == run["totals"]
    assert len(timing["steps"]) == len(run["steps"])
    for ours, theirs in zip(timing["steps"], run["steps"]):
        assert ours == theirs, f"step {theirs['index']} differs"
    assert timing["tiles"]["compute"] == run["tiles"]["compute"]
    assert timing["tiles"]["wait"] == run["tiles"]["wait"]


def assert_volumes_add_up(timing):
    """Per phase and per op, the exchange bytes are the steps' own, summed."""
    by_phase = {}
    for s in timing["steps"]:
        if s["kind"] == "step":
            got = by_phase.setdefault(s["phase"] + 1, [0, 0, 0])
            got[0] += 1
            got[1] += s["sent_bytes"]
            got[2] += s["received_bytes"]
    listed = {p["phase"]: [p["executions"], p["sent_bytes"], p["received_bytes"]]
              for p in timing["exchange"]["phases"]}
    assert listed == by_phase
    per_op = {}
    for p in timing["exchange"]["phases"]:
        if p["compiler_op"] is not None:
            per_op[p["compiler_op"]] = per_op.get(p["compiler_op"], 0) + p["received_bytes"]
    assert {o["op"]: o["received_bytes"] for o in timing["exchange"]["ops"]} == per_op


def compile_plan(ctx, workload, tiles, budget, attention, search):
    profile = profiles.load(ctx, "c600", tiles)
    w = native.Workload(ctx, dict(workload, seed=7))
    package, _ = w.compile(profile, budget, attention=attention, search=search)
    return package


@pytest.mark.parametrize("name,workload,tiles,budget,attention,search", PLANS, ids=[p[0] for p in PLANS])
def test_static_timing_equals_the_device(ctx, name, workload, tiles, budget, attention, search):
    package = compile_plan(ctx, workload, tiles, budget, attention, search)
    timing = package.timing()
    assert_timing_equals_run(timing, device_run(ctx, package))
    assert_volumes_add_up(timing)
    # Every plan here exchanges something, and a receive is of bytes sent.
    assert timing["totals"]["exchange"] > 0
    assert sum(s["received_bytes"] for s in timing["steps"]) >= sum(s["sent_bytes"] for s in timing["steps"]) > 0


@pytest.mark.parametrize("name,workload,tiles,budget,attention,search", FULL_SIZE, ids=[p[0] for p in FULL_SIZE])
def test_static_timing_equals_the_device_at_full_size(ctx, name, workload, tiles, budget, attention, search):
    package = compile_plan(ctx, workload, tiles, budget, attention, search)
    assert package.info()["tiles"] == 1472
    timing = package.timing()
    assert_timing_equals_run(timing, device_run(ctx, package))
    assert_volumes_add_up(timing)


@pytest.mark.parametrize("pattern", ["unicast", "multicast", "paired", "base", "all"])
def test_static_timing_of_hand_built_exchange_stress(ctx, pattern):
    """Packages the compiler did not build: stress patterns, relative sends
    through OUTGOING_BASE and paired transfers among them."""
    profile = profiles.load(ctx, "c600", 16)
    package = native.Package.build_stress(ctx, stress.options(profile, pattern, "interleaved", 2))
    timing = package.timing()
    assert_timing_equals_run(timing, device_run(ctx, package))
    assert_volumes_add_up(timing)


def test_a_saved_package_times_as_built(ctx, tmp_path):
    """A package written and loaded again gives the same timing: the timer
    reads only the package."""
    package = compile_plan(ctx, dict(SMALL_MLP, blocks=3), 16, None, None, BALANCED)
    path = tmp_path / "mlp.pkg"
    package.save(path)
    assert native.Package.load_file(ctx, path).timing() == package.timing()
