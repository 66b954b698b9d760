"""test_graph_description.py: workloads as graph descriptions.  A built-in
workload's description (--export-graph, or the library's info JSON) builds
a package byte-identical to the built-in's, also with its tensors listed in
another order (the library numbers them by first use).  Given values come
from .npy files, and the FP32 reference of a small graph built from them
equals numpy's own computation.  A bad description, or bad values, exits 2
with a message naming the file, the tensor or op and the field.  A package
built from a description replays with --graph, and not without it.
"""
import copy
import json
import math
import random

import numpy as np
import pytest

from ipu_e2e import native, profiles

SMALL_VIT = ("--workload", "vit-small", "--tokens", "16", "--layers", "2", "--batch", "2", "--input", "patches")


def package_bytes(ctx, options, tiles=16):
    package, _ = native.Workload(ctx, options).compile(profiles.load(ctx, "c600", tiles))
    return package.serialize()


@pytest.mark.parametrize("options", [
    {"workload": "mlp", "tokens": 24, "channels": 64, "hidden": 96, "blocks": 3},
    {"workload": "mlp", "tokens": 8, "channels": 32, "hidden": 48, "precision": "fp16", "batch": 2},
    {"workload": "vit-small", "tokens": 16, "layers": 2, "batch": 2, "input": "patches"},
    {"workload": "vit", "tokens": 9, "layers": 1, "heads": 2, "head_dim": 16, "hidden": 40, "seed": 7},
])
def test_description_builds_the_built_in_package(options):
    ctx = native.Context()
    built_in = native.Workload(ctx, options)
    description = built_in.info()
    assert description["format"] == "ipu-e2e-graph" and description["version"] == 1
    expected = package_bytes(ctx, options)
    assert package_bytes(ctx, {"workload": "graph", "graph": description}) == expected
    shuffled = copy.deepcopy(description)
    random.Random(len(expected)).shuffle(shuffled["tensors"])
    assert [t["name"] for t in shuffled["tensors"]] != [t["name"] for t in description["tensors"]]
    again = native.Workload(ctx, {"workload": "graph", "graph": shuffled})
    assert again.info() == description
    assert package_bytes(ctx, {"workload": "graph", "graph": shuffled}) == expected


def test_exported_graph_runs_as_the_built_in(cli, tmp_path):
    done = cli(*SMALL_VIT, "--tiles", "16", "--export-graph", tmp_path / "g.json", "--save-package",
               tmp_path / "a.pkg", "--compile-only", "--quiet")
    assert done.returncode == 0, done.stderr
    described = json.loads((tmp_path / "g.json").read_text())
    assert described["name"] == "vit-small" and described["options"]["input"] == "patches"
    done = cli("--graph", tmp_path / "g.json", "--tiles", "16", "--save-package", tmp_path / "b.pkg",
               "--reference-run", "--check-ops", "--output", tmp_path / "out", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "a.pkg").read_bytes() == (tmp_path / "b.pkg").read_bytes()
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["workload"] == "vit-small" and result["status"] == "PASS"
    assert result["op_check"]["failed_ops"] == 0


def tiny(values_given=("x", "w")):
    """A 2-op graph: y = gelu(x . w), FP16, with x and w given (or generated)."""
    def valued(name, rows, cols, role, stream):
        values = "given" if name in values_given else {"normal": {"scale": 0.5, "offset": 0.25, "stream": stream}}
        return {"name": name, "rows": rows, "cols": cols, "dtype": "f16", "scale": 0, "role": role,
                "sequence": 1, "values": values}
    return {"format": "ipu-e2e-graph", "version": 1, "name": "tiny", "seed": 3, "options": {"source": "test"},
            "tensors": [valued("x", 8, 16, "input", 0), valued("w", 16, 8, "parameter", 1),
                        {"name": "h", "rows": 8, "cols": 8, "dtype": "f16", "scale": 0, "role": "activation",
                         "sequence": 1},
                        {"name": "y", "rows": 8, "cols": 8, "dtype": "f16", "scale": 0, "role": "output",
                         "sequence": 1}],
            "ops": [{"op": "matmul", "inputs": ["x", "w"], "output": "h"},
                    {"op": "gelu", "inputs": ["h"], "output": "y"}],
            "repeat": None}


def write_tiny(folder, description=None, x=None, w=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.json").write_text(json.dumps(description or tiny()))
    rng = np.random.default_rng(5)
    values = folder / "tiny.values"
    values.mkdir(exist_ok=True)
    np.save(values / "x.npy", rng.standard_normal((8, 16)).astype(np.float32) if x is None else x)
    np.save(values / "w.npy", (rng.standard_normal((16, 8)) / 4).astype(np.float32) if w is None else w)
    return folder / "tiny.json"


def gelu(h):
    return 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))


def test_given_values_feed_the_reference(cli, tmp_path):
    path = write_tiny(tmp_path)
    done = cli("--graph", path, "--tiles", "4", "--reference-run", "--reference-fp32", "--dump-tensors",
               tmp_path / "dump", "--output", tmp_path / "out", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    x, w = np.load(tmp_path / "tiny.values" / "x.npy"), np.load(tmp_path / "tiny.values" / "w.npy")
    reference = np.load(tmp_path / "dump" / "y.reference.npy")
    assert np.allclose(reference, gelu(x.astype(np.float64) @ w), rtol=1e-5, atol=1e-5)
    assert np.array_equal(np.load(tmp_path / "dump" / "w.npy"), w.astype(np.float16))
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["geometry"] == {"inputs": {"x": [8, 16]}, "outputs": {"y": [8, 8]},
                                  "ops": {"matmul": 1, "gelu": 1}, "repeat": 1}
    assert done.stdout.startswith("tiny (graph description) on c600 (4 tiles): inputs x 8x16; ops 1 matmul, 1 gelu")
    # FP16 values give the same package as their FP32 widening; the exported description reads back.
    np.save(tmp_path / "tiny.values" / "w.npy", w.astype(np.float16))
    again = cli("--graph", path, "--tiles", "4", "--export-graph", tmp_path / "copy" / "t.json", "--save-package",
                tmp_path / "half.pkg", "--compile-only", "--quiet")
    assert again.returncode == 0, again.stderr
    exported = np.load(tmp_path / "copy" / "t.values" / "w.npy")
    assert np.array_equal(exported, w.astype(np.float16).astype(np.float32))
    copied = cli("--graph", tmp_path / "copy" / "t.json", "--tiles", "4", "--save-package", tmp_path / "copy.pkg",
                 "--compile-only", "--quiet")
    assert copied.returncode == 0 and (tmp_path / "half.pkg").read_bytes() == (tmp_path / "copy.pkg").read_bytes()


def test_replay_needs_the_description(cli, tmp_path):
    path = write_tiny(tmp_path)
    assert cli("--graph", path, "--tiles", "4", "--save-package", tmp_path / "p.pkg", "--compile-only",
               "--quiet").returncode == 0
    replay = cli("--package", tmp_path / "p.pkg", "--graph", path, "--quiet")
    assert replay.returncode == 0 and replay.stdout.rstrip().endswith("PASS"), replay.stdout + replay.stderr
    alone = cli("--package", tmp_path / "p.pkg", "--quiet")
    assert alone.returncode == 2 and "workload 'tiny'" in alone.stderr and "--graph FILE" in alone.stderr
    other = tiny()
    other["options"] = {"source": "elsewhere"}
    wrong = cli("--package", tmp_path / "p.pkg", "--graph", write_tiny(tmp_path / "other", other), "--quiet")
    assert wrong.returncode == 2 and "was built from 'tiny'" in wrong.stderr


BAD_DESCRIPTIONS = [
    (lambda d: d.update(format="onnx"), "field 'format' must be \"ipu-e2e-graph\", not 'onnx'"),
    (lambda d: d.update(version=2), "field 'version' must be an integer in 1..1"),
    (lambda d: d.update(extra=1), "the document: unknown field 'extra'"),
    (lambda d: d.pop("repeat"), "missing field 'repeat'"),
    (lambda d: d["tensors"][1].update(dtype="bf16"), "tensors[1] ('w'): field 'dtype' must be f32, f16, f143 or "
                                                     "f152, not 'bf16'"),
    (lambda d: d["tensors"][2].update(rows=0), "tensors[2] ('h'): field 'rows' must be an integer in 1..16777216"),
    (lambda d: d["tensors"][0].update(scale=-2), "tensors[0] ('x'): field 'scale' must be an integer in -64..64 "
                                                 "for an FP8 type and 0 otherwise"),
    (lambda d: d["tensors"][2].update(values="given"), "tensors[2] ('h'): field 'values' applies to inputs and "
                                                       "parameters only"),
    (lambda d: d["tensors"][3].update(name="h"), "tensors[3] ('h'): the name is also tensors[2]'s"),
    (lambda d: d["tensors"][0].update(values={"normal": {"scale": 1}}), "tensors[0] ('x') values.normal: missing "
                                                                        "field 'offset'"),
    (lambda d: d["tensors"][1].update(role="weight"), "tensors[1] ('w'): field 'role' must be input, parameter, "
                                                      "activation or output, not 'weight'"),
    (lambda d: d["tensors"][1].update(rows=8192, cols=8192, sequence=64),
     f"tensors[1] ('w'): 8192 x 8192 x 64 FP32 values are {8192 * 8192 * 64 * 4:,} bytes; the device holds "
     f"{4 * (0xE8000 - 0x4C000 - 1104):,}"),  # the host's values before the library's 4 GiB limit; 4 tiles
    (lambda d: d["ops"][1].update(op="softmax"), "ops[1]: field 'op' must be matmul, gelu, add, cast, copy, "
                                                 "layernorm, attention or map_pool, not 'softmax'"),
    (lambda d: d["ops"][0].update(inputs=["x"]), "ops[0] (matmul): field 'inputs' must list 2 tensor names (3 with "
                                                 "a bias)"),
    (lambda d: d["ops"][0].update(inputs=["x", "v"]), "ops[0] (matmul): an input 'v' is not a tensor of the "
                                                      "description"),
    (lambda d: d["ops"][1].update(epsilon=1e-6), "ops[1] (gelu): unknown field 'epsilon'"),
    (lambda d: d["ops"].reverse(), "op 0 (gelu) reads 'h' before any op writes it"),
    (lambda d: d["ops"].append({"op": "copy", "inputs": ["h"], "output": "y"}), "op 2 (copy) writes 'y', which op 1 "
                                                                                "writes too"),
    (lambda d: d["ops"].__setitem__(1, {"op": "copy", "inputs": ["h"], "output": "h"}), "op 1 (copy) reads its own "
                                                                                        "output 'h'"),
    (lambda d: d["tensors"][3].update(cols=9), "op 1 (gelu): shapes 8x8 -> 8x9 do not agree"),
    (lambda d: d.update(repeat={"first_op": 0, "op_count": 5, "iterations": 2, "carried": "h", "carried_next": "y",
                                "carried_init": "x"}), "repeat: field 'op_count' must be an integer in 1..2"),
    (lambda d: d["tensors"][2].update(sequence=2), "graph: tensor 'h' has 2 members: only parameters may be "
                                                   "sequences"),
    (lambda d: d["tensors"].append({"name": "spare", "rows": 1, "cols": 1, "dtype": "f16", "scale": 0,
                                    "role": "activation", "sequence": 1}), "no op reads or writes tensor 'spare'"),
]


@pytest.mark.parametrize("change, message", BAD_DESCRIPTIONS)
def test_bad_description_exits_2_naming_the_field(cli, tmp_path, change, message):
    description = tiny()
    change(description)
    path = write_tiny(tmp_path, description)
    done = cli("--graph", path, "--tiles", "4", "--quiet")
    assert done.returncode == 2, done.stdout + done.stderr
    line = done.stderr.strip()
    assert line.startswith(f"ipu-e2e-test: error: --graph {path}: ") and message in line, line
    assert "Traceback" not in done.stderr


BAD_VALUES = [
    (lambda folder: (folder / "w.npy").unlink(), "w.npy: missing: tensor 'w' takes given values (1 x 16 x 8 floats)"),
    (lambda folder: np.save(folder / "w.npy", np.zeros((8, 16), np.float32)),
     "w.npy: a float32 array of shape (8, 16); tensor 'w' takes float32 or float16 values of shape (16, 8)"),
    (lambda folder: np.save(folder / "w.npy", np.zeros((16, 8), np.uint8)),
     "w.npy: a uint8 array of shape (16, 8)"),
    (lambda folder: np.save(folder / "w.npy", np.full((16, 8), np.nan, np.float32)),
     "w.npy: tensor 'w': value 0 is nan (expected finite values)"),
    (lambda folder: (folder / "w.npy").write_bytes(b"\x93NUMPY\x01\x00garbage"),
     "w.npy: the .npy header is not a dict with descr, fortran_order and shape"),
    (lambda folder: np.save(folder / "w.npy", np.zeros((16, 8), np.float64)),
     "w.npy: an array of '<f8' in C order with shape (16, 8); expected C order and float32, float16 or uint8"),
]


@pytest.mark.parametrize("change, message", BAD_VALUES)
def test_bad_values_exit_2_naming_the_file(cli, tmp_path, change, message):
    path = write_tiny(tmp_path)
    change(tmp_path / "tiny.values")
    done = cli("--graph", path, "--tiles", "4", "--quiet")
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_graph_flags(cli, tmp_path):
    path = write_tiny(tmp_path)
    (tmp_path / "bad.json").write_text("{\"format\": ")
    for args, message in (
            (("--graph", path, "--batch", "2"), "--batch applies to --workload mlp and --workload vit or vit-small, "
                                                "not to --graph"),
            (("--graph", path, "--workload", "vit"), f"--graph {path} is the workload: --workload vit does not "
                                                     f"apply"),
            (("--values", tmp_path), "--values applies to --graph FILE, not to --workload mlp"),
            (("--graph", tmp_path / "bad.json"), f"--graph {tmp_path / 'bad.json'}: not JSON: Expecting value "
                                                 f"(line 1, column 12)"),
            (("--graph", tmp_path / "none.json"), "none.json: cannot read it: No such file or directory")):
        done = cli(*args, "--tiles", "4", "--quiet")
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)


def test_replay_refuses_a_package_whose_streams_are_not_its_workloads(cli, tmp_path):
    """A package built from a description that calls itself mlp with the built-in's default options, but
    small: replayed without the description, the built-in MLP is rebuilt and its streams do not match the
    package's; the replay is refused before it runs, naming the file and the stream."""
    done = cli("--workload", "mlp", "--tiles", "4", "--tokens", "8", "--channels", "32", "--hidden", "48",
               "--export-graph", tmp_path / "g.json", "--compile-only", "--quiet")
    assert done.returncode == 0, done.stderr
    described = json.loads((tmp_path / "g.json").read_text())
    described["options"] = {}
    (tmp_path / "g.json").write_text(json.dumps(described))
    done = cli("--graph", tmp_path / "g.json", "--tiles", "4", "--save-package", tmp_path / "p.pkg",
               "--compile-only", "--quiet")
    assert done.returncode == 0, done.stderr
    done = cli("--package", tmp_path / "p.pkg", "--quiet")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    small, full = 32 * 48, 1152 * 4304  # w1's FP8 bytes here and in the built-in MLP
    assert f"--package {tmp_path / 'p.pkg'}: param stream 'w1' holds {small:,} bytes; the recorded workload's " \
           f"parameter 'w1' is 1152 x 4304 f143, {full:,} bytes" in done.stderr, done.stderr
