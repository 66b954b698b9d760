"""test_allocation_shapes.py: every allocation of a run says its shape
(package format 7), in the run-time memory timeline and in the placement
report.

A small run (vit-small on 64 tiles: parameters, activations, operand
copies, two-hop staging, scratch and host staging, FP8 rows that need
padding) writes memory-timeline.json and the placement viewer.  Each shape is read
here with this file's own parser and element sizes:
- "[M x]R x C type" for parameters, activations, operand copies and
  staging; M x R x C x element bytes is at most the allocation's size, and
  the size is M x R x (C x element bytes rounded up to 8: the row padding)
  rounded up to 8, so the shape is the payload the block really stores;
- "N B" for scratch and host staging, N at most the size (N rounded up to 8).
The placement report lists the same buffers in the same order with the same
shapes.
"""
import json
import re
import subprocess
from pathlib import Path

import pytest

from ipu_e2e import placement_report

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "harness" / "bin" / "ipu-e2e-test"
ELEMENT_BYTES = {"f32": 4, "f16": 2, "f143": 1, "f152": 1}  # DEVICE.md's types
BLOCK = re.compile(r"(?:(\d+)x)?(\d+)x(\d+) (\w+)")
BYTES = re.compile(r"(\d+) B")
BLOCK_KINDS = {"parameter", "activation", "operand copy", "staging"}


def round8(n):
    return (n + 7) // 8 * 8


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shapes")
    done = subprocess.run(["/usr/bin/python3", str(CLI), "--workload", "vit-small", "--tiles", "64", "--quiet",
                           "--output", str(folder), "--profile-directory", str(folder / "run"),
                           "--memory-profile-directory", str(folder / "memory")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    timeline = json.loads((folder / "run" / "memory-timeline.json").read_text())
    placement = placement_report.load(folder / "memory")
    return timeline, placement


def test_every_allocation_says_its_shape_within_its_size(run):
    timeline, _ = run
    a = timeline["allocations"]
    strings, kinds = a["strings"], a["kinds"]
    count = len(a["tile"])
    assert count > 0 and len(a["shape"]) == count
    seen = {"padded": 0, "sequence": 0, "bytes": 0, "blocks": 0}
    for i in range(count):
        shape, kind, size = strings[a["shape"][i]], kinds[a["kind"][i]], a["size"][i]
        where = f"allocation {i} {strings[a['name'][i]]!r} ({kind}, {size} bytes): shape {shape!r}"
        assert shape, where
        block, raw = BLOCK.fullmatch(shape), BYTES.fullmatch(shape)
        if kind in BLOCK_KINDS:
            assert block, where
            members, rows, cols = int(block[1] or 1), int(block[2]), int(block[3])
            assert block[1] is None or members > 1, where  # one member is written without its count
            elem = ELEMENT_BYTES[block[4]]
            payload = members * rows * cols * elem
            assert 0 < payload <= size, where
            assert size == round8(members * rows * round8(cols * elem)), where
            seen["blocks"] += 1
            seen["padded"] += payload < size
            seen["sequence"] += members > 1
        else:
            assert raw, where
            assert 0 < int(raw[1]) <= size == round8(int(raw[1])), where
            seen["bytes"] += 1
    assert all(seen.values()), seen


def test_the_placement_report_lists_the_same_shapes(run):
    timeline, placement = run
    a, p = timeline["allocations"], placement["allocations"]
    names = placement["names"]
    assert len(p["shape"]) == len(a["shape"]) == len(a["tile"])
    for i in range(len(a["tile"])):
        assert (p["tile"][i], p["address"][i], names[p["name"][i]]) == (
            a["tile"][i], a["address"][i], a["strings"][a["name"][i]]), i
        assert names[p["shape"][i]] == a["strings"][a["shape"][i]], i
