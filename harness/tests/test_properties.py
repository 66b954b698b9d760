"""test_properties.py: the readers' properties (ipu_e2e/properties.py, with
Hypothesis) hold for 300 inputs of each kind from a fixed seed, and for every
input kept in fixtures/properties/ (what the properties and this issue's
hostile inputs found); a reader that breaks its property is caught and its
input shrunk; ipu-e2e-properties (the nightly's command, with a fresh seed)
writes what it ran.  The nightly runs the properties longer.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO
from ipu_e2e import npy, properties
from ipu_e2e.native import Context


@pytest.fixture(scope="module")
def ctx():
    return Context()


@pytest.mark.parametrize("kind", sorted(properties.PROPERTIES))
def test_property_holds_from_a_fixed_seed(ctx, kind):
    tried, data, finding = properties.run(kind, 300, 0, ctx)
    assert finding is None, f"{kind}: {finding} on input {data!r}"[:2000]
    assert tried >= 300


def test_kept_regression_inputs_hold(ctx):
    kept = sorted(properties.REGRESSIONS.glob("*/*"))
    assert {p.parent.name for p in kept} == set(properties.PROPERTIES)
    assert properties.replay(properties.REGRESSIONS, ctx) == []


def test_a_reader_that_breaks_its_property_is_found_and_shrunk(ctx, monkeypatch, tmp_path):
    """A read_npy that takes a shape's first dimension as the whole count (a real kind of slip) gives data
    that does not fill the shape: the property finds it and Hypothesis shrinks it to a small input."""
    honest = npy.read_npy

    def slipped(path, what=None, limit=None, descrs=None):
        dtype, shape, data = honest(path, what, limit, descrs)
        return dtype, shape, data[:shape[0] * np.dtype(dtype).itemsize] if len(shape) > 1 else data

    monkeypatch.setattr(npy, "read_npy", slipped)
    tried, data, finding = properties.run("npy", 300, 0, ctx)
    assert finding is not None and "read_npy gave" in str(finding), finding
    (tmp_path / "found.npy").write_bytes(data)
    dtype, shape, raw = honest(tmp_path / "found.npy", None, properties.LIMIT)
    assert len(shape) > 1 and shape[0] * int(np.prod(shape[1:])) != shape[0] and len(data) < 300


def test_the_command_writes_what_it_ran(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "harness" / "bin" / "ipu-e2e-properties"), "--examples", "20",
                           "--seed", "7", "--output", str(tmp_path), "--quiet"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    written = json.loads((tmp_path / "properties.json").read_text())
    assert written["seed"] == 7 and written["regressions_broken"] == []
    assert [(p["property"], p["holds"]) for p in written["properties"]] == \
        [(k, True) for k in sorted(properties.PROPERTIES)]
    assert all(p["inputs"] >= 20 for p in written["properties"])
