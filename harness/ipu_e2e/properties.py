"""Property-based tests of the readers of files from strangers, with
Hypothesis (Debian's python3-hypothesis): strategies build .npy arrays, .pb
TensorProtos, graph descriptions and ONNX models from the importer's own op
set, valid ones and then structurally mutated (fields dropped, retyped or made
huge, axes, perms and indices out of range, shapes that lie about their data).
The property of every reader: it returns what it read, consistent with the
file (an array of the shape its header or dims say), or refuses it with the
error type the commands turn into exit 2 and a message naming the file, node,
tensor or field; never another exception.

`ipu-e2e-properties` runs each property for --examples inputs from --seed
(or a fresh seed), writes properties.json to --output and, with
--keep-findings, keeps each failing input (the one Hypothesis shrank it to)
as a regression case in fixtures/properties/<kind>/, which make test replays
(test_properties.py runs the same properties with a fixed seed).
"""
import argparse
import datetime
import hashlib
import json
import random
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, seed as seeded, settings, strategies as st
from onnx import TensorProto, helper, numpy_helper

from . import artifacts, graphs, models, npy, onnx_import
from .command import EXIT_CHECK_FAILED, EXIT_OK, UsageError, guarded, output_folders, positive_int
from .files import InputError
from .native import INVALID_ARGUMENT, Context, IpuError, Workload
from .progress import Progress

REGRESSIONS = Path(__file__).resolve().parents[2] / "fixtures" / "properties"
LIMIT = 64 << 20  # what the readers may claim here: refusals of huge sizes come cheap
R, C = 4, 8
SIZES = st.one_of(st.integers(0, 9), st.sampled_from([-1, 2 ** 20, 10 ** 12, 2 ** 63 - 1]))


class Finding(Exception):
    """A reader broke its property: the input and what happened."""


# ---- arrays ------------------------------------------------------------

@st.composite
def npy_files(draw):
    """A .npy file of a dtype the readers take, then up to two mutations: another descr, order, header,
    version or data length."""
    descr = draw(st.sampled_from(["<f4", ">f4", "<f2", "|u1", "<f8", "<i8", ">i4", "|i1", "<u2"]))
    shape = tuple(draw(st.lists(st.integers(0, 9), max_size=4)))
    fortran, version, text, dropped = False, 1, None, None
    size = int(descr[2:])
    length = int(np.prod(shape, dtype=np.int64)) * size
    for mutation in draw(st.lists(st.sampled_from(["descr", "order", "shape", "key", "text", "version", "data"]),
                                  max_size=2)):
        if mutation == "descr":
            descr = draw(st.sampled_from(["|b1", "<c8", "<M8[s]", "|O", "<U3", "<f16", "[('a', '<f4')]", "", "f4"]))
        elif mutation == "order":
            fortran = draw(st.sampled_from([True, 0, None]))
        elif mutation == "shape":
            shape = tuple(draw(st.lists(SIZES, max_size=4)))
        elif mutation == "key":
            dropped = draw(st.sampled_from(["descr", "fortran_order", "shape"]))
        elif mutation == "text":
            text = draw(st.sampled_from(["[" * 3000, "{", "1", "(1,)", "{'descr': '<f4'}"]))
        elif mutation == "version":
            version = draw(st.sampled_from([0, 2, 3, 9]))
        elif mutation == "data":
            length = max(length + draw(st.integers(-9, 9)), 0)
    header = {"descr": descr, "fortran_order": fortran, "shape": shape}
    header.pop(dropped, None)
    body = (text or repr(header)).encode("latin1") + b"\n"
    prefix = b"\x93NUMPY" + bytes([version, 0]) + len(body).to_bytes(2 if version == 1 else 4, "little")
    return prefix + body + bytes(length)


def check_npy(data, folder):
    """read_npy returns data of its header's size, or refuses naming the file."""
    path = folder / "array.npy"
    path.write_bytes(data)
    try:
        dtype, shape, raw = npy.read_npy(path, "--values", LIMIT)
    except ValueError as error:
        named(error, str(path))
        return
    if len(raw) != int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize:
        raise Finding(f"read_npy gave {len(raw)} bytes for shape {shape} of {dtype}")
    try:
        array, _ = models.read_array(path, "--inputs", LIMIT)
    except (UsageError, ValueError) as error:
        named(error, str(path))
        return
    if array.shape != shape:
        raise Finding(f"read_array gave shape {array.shape} for {shape}")


@st.composite
def pb_files(draw):
    values = np.arange(R * C, dtype=np.float32).reshape(R, C)
    tensor = numpy_helper.from_array(values.astype(draw(st.sampled_from([np.float32, np.float16, np.int64]))), "x")
    mutation = draw(st.sampled_from(["none", "type", "dims", "raw", "name", "external", "fields"]))
    if mutation == "type":
        tensor.data_type = draw(st.integers(0, 20))
    elif mutation == "dims":
        del tensor.dims[:]
        tensor.dims.extend(draw(st.lists(SIZES.filter(lambda d: d < 2 ** 62), max_size=4)))
    elif mutation == "raw":
        tensor.raw_data = tensor.raw_data[:draw(st.integers(0, len(tensor.raw_data)))] + bytes(draw(st.integers(0, 9)))
    elif mutation == "name":
        tensor.name = draw(st.text(max_size=8))
    elif mutation == "external":
        tensor.data_location = TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", draw(st.sampled_from(["/etc/passwd", "../x", "x.bin"]))
    elif mutation == "fields":
        tensor.ClearField("raw_data")
        tensor.float_data.extend(draw(st.lists(st.floats(width=32), max_size=40)))
    data = tensor.SerializeToString()
    cut = draw(st.integers(0, len(data)))
    return data if draw(st.integers(0, 4)) else data[:cut]


def check_pb(data, folder):
    """read_array returns an array of its dims, or refuses naming the file."""
    path = folder / "input_0.pb"
    path.write_bytes(data)
    try:
        array, _ = models.read_array(path, "--inputs", LIMIT)
    except (UsageError, ValueError) as error:
        named(error, str(path))
        return
    tensor = TensorProto()
    tensor.ParseFromString(data)
    if array.shape != tuple(tensor.dims):
        raise Finding(f"read_array gave shape {array.shape} for dims {list(tensor.dims)}")


# ---- descriptions --------------------------------------------------------

def valid_description():
    """x [R x C] -> matmul w -> gelu -> layernorm -> + x -> y."""
    def tensor(name, rows, cols, role, values=None):
        t = {"name": name, "rows": rows, "cols": cols, "dtype": "f16", "scale": 0, "role": role, "sequence": 1}
        return dict(t, values=values) if values else t
    normal = {"normal": {"scale": 1, "offset": 0, "stream": 0}}
    return {"format": "ipu-e2e-graph", "version": 1, "name": "p", "seed": 0, "options": {},
            "tensors": [tensor("x", R, C, "input", normal), tensor("w", C, C, "parameter", normal),
                        tensor("g", 1, C, "parameter", normal), tensor("b", 1, C, "parameter", normal),
                        tensor("h", R, C, "activation"), tensor("u", R, C, "activation"),
                        tensor("n", R, C, "activation"), tensor("y", R, C, "output")],
            "ops": [{"op": "matmul", "inputs": ["x", "w"], "output": "h"},
                    {"op": "gelu", "inputs": ["h"], "output": "u"},
                    {"op": "layernorm", "inputs": ["u", "g", "b"], "output": "n", "epsilon": 1e-5},
                    {"op": "add", "inputs": ["n", "x"], "output": "y"}],
            "repeat": None}


JSON_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2 ** 64, 2 ** 64), SIZES,
                                     st.floats(allow_nan=False), st.text(max_size=6)),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                       max_size=3), max_leaves=6)


@st.composite
def descriptions(draw):
    """A valid description, then up to four structural mutations of its fields."""
    described = valid_description()
    for _ in range(draw(st.integers(0, 4))):
        lists = [described[w] for w in ("tensors", "ops") if isinstance(described.get(w), list)]
        places = [(None, described)] + [(owner, item) for owner in lists for item in owner if isinstance(item, dict)]
        owner, target = draw(st.sampled_from(places))
        if not target:
            continue
        key = draw(st.sampled_from(sorted(target)))
        action = draw(st.sampled_from(["drop", "value", "name", "size", "duplicate"]))
        if action == "drop":
            del target[key]
        elif action == "value":
            target[key] = draw(JSON_VALUES)
        elif action == "name":
            target[key] = draw(st.sampled_from(["x", "w", "y", "nowhere", "../../x", "", "n" * 70]))
        elif action == "size" and owner is not None:
            target[draw(st.sampled_from(["rows", "cols", "sequence"]))] = draw(SIZES)
        elif action == "duplicate" and owner is not None:
            owner.append(json.loads(json.dumps(target)))
    return json.dumps(described).encode()


def check_description(data, folder, ctx):
    """A description builds its workload or is refused (exit 2) naming the file or the field."""
    path = folder / "g.json"
    path.write_bytes(data)
    try:
        graphs.workload(ctx, path, None, LIMIT)
    except (UsageError, ValueError) as error:
        named(error, str(path))
    except IpuError as error:
        raise Finding(f"status {error.status}, not {INVALID_ARGUMENT}: {error.message}") from None


# ---- ONNX models -----------------------------------------------------------

def attribute_values():
    return st.one_of(st.integers(-9, 9), st.lists(st.integers(-9, 9), max_size=4), SIZES)


@st.composite
def onnx_models(draw):
    """x [R, C] through a chain of nodes of the importer's op types (with constants for their
    other inputs and random attributes) to y, sometimes with a Loop around a MatMul."""
    nodes, inits, last, k = [], [], "x", 0

    def const(values, dtype=np.int64):
        nonlocal k
        k += 1
        nodes.append(helper.make_node("Constant", [], [f"c{k}"], value=numpy_helper.from_array(
            np.asarray(values, dtype))))
        return f"c{k}"

    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["MatMul", "Gemm", "Add", "Mul", "Transpose", "Reshape", "Unsqueeze", "Squeeze",
                                   "Slice", "Gather", "Cast", "Softmax", "Flatten", "Split", "Concat",
                                   "ConstantOfShape", "Range", "Expand", "LayerNormalization", "Erf", "Tanh",
                                   "Identity", "ReduceMean", "Pow", "Sqrt", "Div", "Sub", "Shape"]))
        k += 1
        out = f"v{k}"
        ints = st.lists(SIZES.filter(lambda d: d < 2 ** 40), max_size=3)
        if op in ("MatMul", "Gemm"):
            shape = draw(st.sampled_from([(C, C), (C, 3), (5, C), (C,)]))
            inits.append(numpy_helper.from_array(np.full(shape, 0.1, np.float32), f"w{k}"))
            nodes.append(helper.make_node(op, [last, f"w{k}"], [out]))
        elif op in ("Add", "Mul", "Div", "Sub", "Pow"):
            other = const(np.ones(draw(st.sampled_from([(), (C,), (R, C), (3,), (1, 10 ** 5)])), np.float32),
                          np.float32)
            nodes.append(helper.make_node(op, [last, other] if draw(st.booleans()) else [other, last], [out]))
        elif op in ("Reshape", "Expand", "ConstantOfShape", "Unsqueeze", "Squeeze"):
            inputs = [const(draw(ints))] if op == "ConstantOfShape" else [last, const(draw(ints))]
            nodes.append(helper.make_node(op, inputs, [out]))
        elif op == "Slice":
            nodes.append(helper.make_node(op, [last] + [const(draw(ints)) for _ in range(draw(st.integers(2, 4)))],
                                          [out]))
        elif op == "Gather":
            nodes.append(helper.make_node(op, [last, const(draw(st.integers(-9, 9)))], [out],
                                          axis=draw(st.integers(-3, 3))))
        elif op == "Range":
            nodes.append(helper.make_node(op, [const(v, np.float32) for v in draw(st.lists(
                st.sampled_from([0, 1, -1, 8, 1e12]), min_size=3, max_size=3))], [out]))
        elif op == "Concat":
            nodes.append(helper.make_node(op, [const(np.ones((1, C), np.float32), np.float32), last], [out],
                                          axis=draw(st.integers(-3, 3))))
        else:
            names = {"Transpose": "perm", "Cast": "to", "Softmax": "axis", "Flatten": "axis", "Split": "axis",
                     "LayerNormalization": "axis", "ReduceMean": "axes"}
            attributes = {names[op]: draw(attribute_values())} if op in names and draw(st.booleans()) else {}
            inputs = [last, const(np.ones(C, np.float32), np.float32)] if op == "LayerNormalization" else [last]
            nodes.append(helper.make_node(op, inputs, [out] if op != "Split" else [out, f"{out}b"], **attributes))
        last = out
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    graph = helper.make_graph(nodes, draw(st.sampled_from(["p", "../../p", "p" * 40])),
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, draw(st.sampled_from(
                                  [[R, C]] * 4 + [[1, R, C]] * 2 + [[0, C], [10 ** 6, 10 ** 6], ["n", C]])))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["out"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", draw(st.sampled_from([17] * 6 + [14, 13, 11])))])
    return model.SerializeToString()


def check_model(data, folder, ctx):
    """A model imports to a description the library builds, or is refused naming the file, the node, the
    input, output or initializer; the library refuses a description the importer wrote only as invalid."""
    path = folder / "model.onnx"
    path.write_bytes(data)
    try:
        model = onnx_import.load_model(path, LIMIT)
        importer = onnx_import.Importer(model, random.Random(data).choice(["fp8", "fp16"]), "p", {}, LIMIT)
        description = importer.run()
    except (onnx_import.Unsupported, onnx_import.ModelError, InputError) as error:
        named(error, str(path), "node '", "input '", "output '", "initializer '", "opset", "metadata")
        return
    try:
        Workload(ctx, {"workload": "graph", "graph": description})
    except IpuError as error:
        if error.status != INVALID_ARGUMENT:
            raise Finding(f"the imported description: status {error.status}: {error.message}") from None


def named(error, *names):
    """An error that names none of `names` (the file, a node, a field) is itself a finding."""
    if not any(n in str(error) for n in names):
        raise Finding(f"{type(error).__name__} naming none of {names}: {error}")


# ---- running -------------------------------------------------------------

PROPERTIES = {"npy": (npy_files, check_npy), "pb": (pb_files, check_pb), "description": (descriptions,
                                                                                       check_description),
              "model": (onnx_models, check_model)}


def check(kind, data, folder, ctx):
    """The property of `kind` on one input: None when it holds, else the Finding (any exception a reader
    raised that is not a refusal it documents is one, and so is any warning)."""
    function = PROPERTIES[kind][1]
    try:
        with warnings.catch_warnings():  # a warning is a line on a user's stderr: a finding too
            warnings.simplefilter("error")
            function(data, folder, ctx) if kind in ("description", "model") else function(data, folder)
    except Finding as finding:
        return finding
    except Exception as error:  # a traceback a user would have seen
        return Finding(f"{type(error).__name__}: {str(error)[:300]}")
    return None


def run(kind, examples, seed, ctx):
    """Run the property of `kind` on `examples` inputs from `seed`: (inputs tried, the smallest failing input
    or None, its Finding)."""
    found, tried = {}, [0]
    with tempfile.TemporaryDirectory(prefix="ipu-e2e-properties-") as scratch:
        def body(data):
            tried[0] += 1
            finding = check(kind, data, Path(scratch), ctx)
            if finding is not None:
                found.update(data=data, finding=finding)  # the last failure is the shrunk one
                raise finding

        test = settings(max_examples=examples, deadline=None, database=None, print_blob=False,
                        suppress_health_check=list(HealthCheck))(given(PROPERTIES[kind][0]())(body))
        try:
            seeded(seed)(test)()
        except Finding:
            pass
    return tried[0], found.get("data"), found.get("finding")


def replay(folder, ctx):
    """[(path, Finding)] of the kept regression inputs under folder/<kind>/ that break their property."""
    broken = []
    with tempfile.TemporaryDirectory(prefix="ipu-e2e-properties-") as scratch:
        for path in sorted(folder.glob("*/*")):
            finding = check(path.parent.name, path.read_bytes(), Path(scratch), ctx)
            if finding is not None:
                broken.append((path, finding))
    return broken


def keep(kind, data):
    """A failing input kept as a regression case; its path."""
    path = REGRESSIONS / kind / f"found-{datetime.date.today().isoformat()}-{hashlib.sha256(data).hexdigest()[:12]}"
    artifacts.write_bytes(path, data)
    return path


def parser():
    p = argparse.ArgumentParser(prog="ipu-e2e-properties", description=(
        "Property-based tests (Hypothesis) of the readers of models, arrays and descriptions: each reader "
        "returns what the file holds or refuses it naming the file, node or field. Exit codes: 0 every "
        "property holds, 1 one failed (its smallest input is printed and, with --keep-findings, kept), 2 "
        "usage error."))
    p.add_argument("--examples", type=positive_int, default=200, metavar="N", help="inputs per property "
                   "(default: 200)")
    p.add_argument("--seed", type=int, default=None, metavar="N", help="Hypothesis seed (default: a fresh one, "
                   "printed)")
    p.add_argument("--only", choices=sorted(PROPERTIES), action="append", help="run this property (repeatable)")
    p.add_argument("--keep-findings", action="store_true",
                   help=f"keep each failing input as a regression case in {REGRESSIONS}/<kind>/")
    p.add_argument("--output", type=Path, metavar="DIR", help="write properties.json to DIR")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def work(args, progress):
    output_folders(args, "output")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 32)
    ctx, results, failed = Context(), [], False
    broken = replay(REGRESSIONS, ctx)
    for path, finding in broken:
        print(f"regression {path}: {finding}")
    for kind in args.only or sorted(PROPERTIES):
        progress.update(f"property {kind}: {args.examples} inputs from seed {seed}")
        tried, data, finding = run(kind, args.examples, seed, ctx)
        entry = {"property": kind, "seed": seed, "inputs": tried, "holds": finding is None}
        if finding is not None:
            failed = True
            entry["finding"] = str(finding)
            entry["input_hex"] = data.hex()
            if args.keep_findings:
                entry["kept"] = str(keep(kind, data))
        print(f"{kind}: {tried} inputs, seed {seed}: " + ("holds" if finding is None else f"FAILS: {finding}"
                                                         + (f" (kept as {entry['kept']})" if 'kept' in entry else "")))
        results.append(entry)
    if args.output:
        artifacts.write_json(args.output / "properties.json", {"seed": seed, "properties": results,
                                                               "regressions_broken": [str(p) for p, _ in broken]})
    return EXIT_CHECK_FAILED if failed or broken else EXIT_OK


def main(argv=None):
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    progress = Progress(args.quiet)
    code, result = guarded("ipu-e2e-properties", progress, lambda: work(args, progress))
    return code if code is not None else result
