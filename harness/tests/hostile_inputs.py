"""hostile_inputs.py: the hostile and careless inputs test_hostile_inputs.py
runs, built as files in a folder: ONNX models (external data pointing out of
the model's folder, through '..', a symbolic link, a FIFO or a device; sizes
claimed far beyond the device; attributes, axes, perms and indices out of
range), arrays (.npy headers and .pb tensors that lie about their size, the
wrong shape, dtype or name, values that are not finite), graph descriptions
and value folders, the JSON files every command reads (nested too deep,
too large, not a regular file) and outputs that are not regular files.

build(root) writes them under root/inputs and returns the cases: (name,
command, arguments, words the one-line message must contain).  "{X}" in an
argument is the path root/inputs/X.  Every case must exit 2.
"""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

R, C = 4, 8  # the base model: x [R, C] @ w [C, C] -> y [R, C]
FLOAT = TensorProto.FLOAT
SMALL = ["--tiles", "4"]


def vi(name, shape, kind=FLOAT):
    return helper.make_tensor_value_info(name, kind, shape)


def weight(name="w", shape=(C, C)):
    return numpy_helper.from_array(np.full(shape, 0.125, np.float32), name)


def make(nodes, inputs=None, outputs=None, inits=None, opset=14, name="hostile", meta=None):
    graph = helper.make_graph(nodes, name, [vi("x", [R, C])] if inputs is None else inputs,
                              [vi("y", [R, C])] if outputs is None else outputs,
                              [weight()] if inits is None else inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    for key, value in (meta or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    return model


def base():
    """The valid model the array cases feed: y = x @ w."""
    return make([helper.make_node("MatMul", ["x", "w"], ["y"])])


def after(nodes, last, opset=14):
    """x @ w -> t, then `nodes`, the last of which gives `last`; y = t + last."""
    return make([helper.make_node("MatMul", ["x", "w"], ["t"]), *nodes, helper.make_node("Add", ["t", last], ["y"])],
                opset=opset)


def loop(trips, stacked):
    """x @ w, then a Loop of `trips` (a Constant node) whose body multiplies by the member of `stacked` (a
    Constant node, Gathered by the iteration number)."""
    body = helper.make_graph([helper.make_node("Gather", ["ws", "i"], ["wi"]),
                              helper.make_node("MatMul", ["h", "wi"], ["h2"]),
                              helper.make_node("Identity", ["c"], ["c2"])],
                             "body", [vi("i", [], TensorProto.INT64), vi("c", [], TensorProto.BOOL), vi("h", [R, C])],
                             [vi("c2", [], TensorProto.BOOL), vi("h2", [R, C])])
    return make([helper.make_node("MatMul", ["x", "w"], ["t"]), trips, stacked,
                 helper.make_node("Loop", [trips.output[0], "", "t"], ["y"], body=body)])


def ints(name, values):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(values, np.int64)))


def floats(name, values):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(values, np.float32)))


def external(location, dims=(C, C), offset=None, length=None, kind=FLOAT):
    """The weight w with its data in an external file."""
    tensor = TensorProto()
    tensor.name, tensor.data_type = "w", kind
    tensor.dims.extend(dims)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
    return make([helper.make_node("MatMul", ["x", "w"], ["y"])], inits=[tensor])


def raw_tensor(name, dims, data=b""):
    """A FP32 TensorProto claiming `dims` over `data` (whatever their sizes)."""
    tensor = TensorProto()
    tensor.name, tensor.data_type, tensor.raw_data = name, FLOAT, data
    tensor.dims.extend(dims)
    return tensor


def npy_header(descr, shape, fortran=False, version=1):
    header = repr({"descr": descr, "fortran_order": fortran, "shape": tuple(shape)}).encode("latin1")
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    size = len(header).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + size + header


def pb(array, name="x", kind=None):
    tensor = numpy_helper.from_array(np.asarray(array), name)
    if kind is not None:
        tensor.data_type = kind
    return tensor.SerializeToString()


def nested(depth):
    return ("[" * depth + "]" * depth).encode()


def model_cases(inputs, outside):
    """ONNX models, each model.onnx in a folder of its own (its external data beside it)."""
    canary = outside / "canary.bin"
    models = {
        # External data out of the model's folder, or not a regular file.
        "ext-dotdot": (external("sub/../../../outside/canary.bin"), ["location", "'..'"]),
        "ext-dotdot-inside": (external("sub/../w.bin"), ["location", "'..'"]),
        "ext-absolute": (external(str(canary)), ["location", "not a path relative"]),
        "ext-etc-passwd": (external("/etc/passwd"), ["location", "not a path relative"]),
        "ext-dev-zero": (external("/dev/zero"), ["location", "not a path relative"]),
        "ext-symlink-out": (external("link.bin"), ["leads outside", "symbolic link"]),
        "ext-symlink-dev-zero": (external("zero.bin"), ["leads outside"]),
        "ext-symlink-proc": (external("environ.bin"), ["leads outside"]),
        "ext-subdir-symlink": (external("sub/w.bin"), ["leads outside"]),
        "ext-fifo": (external("fifo.bin"), ["fifo.bin", "a FIFO"]),
        "ext-folder": (external("folder.bin"), ["folder.bin", "a directory"]),
        "ext-missing": (external("missing.bin"), ["missing.bin", "No such file"]),
        "ext-empty-location": (external(""), ["location", "not a path relative"]),
        "ext-no-location": (external(None), ["location", "not a path relative"]),
        "ext-short-file": (external("short.bin"), ["short.bin", "which holds 16"]),
        "ext-offset-past-end": (external("w.bin", offset=1 << 40), ["w.bin", "which holds 256"]),
        "ext-negative-offset": (external("w.bin", offset=-8), ["tensor 'w'", "offset -8"]),
        "ext-offset-text": (external("w.bin", offset="eight"), ["tensor 'w'", "must be integers"]),
        "ext-length-wrong": (external("w.bin", length=128), ["tensor 'w'", "need 256"]),
        "ext-huge-dims": (external("w.bin", dims=(1 << 20, 1 << 20)), ["tensor 'w'", "what the device holds"]),
        "ext-negative-dims": (external("w.bin", dims=(-1, 8)), ["tensor 'w'", "dims [-1, 8]"]),
        "ext-string": (external("w.bin", kind=TensorProto.STRING), ["tensor 'w'", "not numeric"]),
        "ext-nul": (external("w\0.bin"), ["location", "not a path relative"]),
        # Sizes claimed far beyond the device, before anything is allocated.
        "input-1e12": (make([helper.make_node("MatMul", ["x", "w"], ["y"])], inputs=[vi("x", [10 ** 6, 10 ** 6])]),
                       ["input 'x'", "the device holds"]),
        "input-zero-dim": (make([helper.make_node("MatMul", ["x", "w"], ["y"])], inputs=[vi("x", [0, C])]),
                           ["input 'x'", "dimension of 0"]),
        "input-dynamic": (make([helper.make_node("MatMul", ["x", "w"], ["y"])], inputs=[vi("x", ["n", C])]),
                          ["input 'x'", "'n' without a static size"]),
        "constantofshape-1e10": (after([ints("s", [10 ** 5, 10 ** 5]),
                                        helper.make_node("ConstantOfShape", ["s"], ["big"])], "big"),
                                 ["ConstantOfShape", "larger than the device holds"]),
        "constantofshape-negative": (after([ints("s", [-4, C]), helper.make_node("ConstantOfShape", ["s"], ["big"])],
                                           "big"), ["ConstantOfShape", "negative dimension"]),
        "range-1e12": (after([floats("a", 0), floats("b", 1e12), floats("d", 1),
                              helper.make_node("Range", ["a", "b", "d"], ["big"])], "big"),
                       ["Range", "larger than the device holds"]),
        "range-zero-delta": (after([floats("a", 0), floats("b", 8), floats("d", 0),
                                    helper.make_node("Range", ["a", "b", "d"], ["big"])], "big"),
                             ["Range", "delta not 0"]),
        "expand-40000": (after([floats("one", [[1.0]]), ints("s", [40000, 40000]),
                                helper.make_node("Expand", ["one", "s"], ["big"])], "big"),
                         ["Expand", "larger than the device holds"]),
        "mul-broadcast-1e10": (after([floats("a", np.ones((10 ** 5, 1))), floats("b", np.ones((1, 10 ** 5))),
                                      helper.make_node("Mul", ["a", "b"], ["big"])], "big"),
                               ["Mul", "larger than the device holds"]),
        "concat-huge": (after([ints("s", [30000, 30000]), helper.make_node("ConstantOfShape", ["s"], ["c1"])], "c1"),
                        ["ConstantOfShape", "larger than the device holds"]),
        "initializer-huge-dims": (make([helper.make_node("MatMul", ["x", "w"], ["y"])],
                                       inits=[raw_tensor("w", [10 ** 6, 10 ** 6], bytes(4))]),
                                  ["initializer 'w'", "dims [1000000, 1000000]"]),
        # Attributes, axes, perms and indices out of range.
        "transpose-perm-range": (after([helper.make_node("Transpose", ["t"], ["u"], perm=[0, 5])], "u"),
                                 ["Transpose", "perm [0, 5]"]),
        "transpose-perm-repeat": (after([helper.make_node("Transpose", ["t"], ["u"], perm=[1, 1])], "u"),
                                  ["Transpose", "perm [1, 1]"]),
        "gather-index-tensor": (after([ints("i", 9), helper.make_node("Gather", ["t", "i"], ["u"], axis=0)], "u"),
                                ["Gather", "outside"]),
        "gather-index-const": (after([floats("c", np.ones((3, C))), ints("i", [7]),
                                      helper.make_node("Gather", ["c", "i"], ["u"])], "u"), ["Gather", "outside"]),
        "gather-axis": (after([ints("i", 0), helper.make_node("Gather", ["t", "i"], ["u"], axis=7)], "u"),
                        ["Gather", "axis 7"]),
        "cast-999": (after([helper.make_node("Cast", ["t"], ["u"], to=999)], "u"), ["Cast", "999"]),
        "unsqueeze-axis-100": (after([ints("a", [100]), helper.make_node("Unsqueeze", ["t", "a"], ["u"])], "u"),
                               ["Unsqueeze", "axis 100"]),
        "unsqueeze-repeat": (after([ints("a", [0, 0]), helper.make_node("Unsqueeze", ["t", "a"], ["u"])], "u"),
                             ["Unsqueeze", "repeat"]),
        "squeeze-not-one": (after([ints("a", [1]), helper.make_node("Squeeze", ["t", "a"], ["u"])], "u"),
                            ["Squeeze", "size 1"]),
        "flatten-axis": (after([helper.make_node("Flatten", ["t"], ["u"], axis=9)], "u"), ["Flatten", "axis 9"]),
        "split-axis": (after([helper.make_node("Split", ["t"], ["u", "v"], axis=5)], "u"), ["Split", "axis 5"]),
        "slice-axis": (after([ints("s", [0]), ints("e", [2]), ints("a", [9]),
                              helper.make_node("Slice", ["t", "s", "e", "a"], ["u"])], "u"), ["Slice", "axis 9"]),
        "reshape-two-minus-one": (after([ints("s", [-1, -1]), helper.make_node("Reshape", ["t", "s"], ["u"])], "u"),
                                  ["Reshape", "[-1, -1]"]),
        "reshape-count": (after([ints("s", [5, 7]), helper.make_node("Reshape", ["t", "s"], ["u"])], "u"),
                          ["Reshape", "does not hold"]),
        "reshape-zero": (after([ints("s", [0, -1, 0]), helper.make_node("Reshape", ["t", "s"], ["u"],
                                                                         allowzero=1)], "u"), ["Reshape"]),
        "layernorm-axis": (after([floats("g", np.ones(C)), helper.make_node("LayerNormalization", ["t", "g"], ["u"],
                                                                            axis=7)], "u", 17),
                           ["LayerNormalization", "axis 7"]),
        "reducemean-axis": (after([helper.make_node("ReduceMean", ["t"], ["u"], axes=[5])], "u"),
                            ["ReduceMean", "axis 5"]),
        "loop-0d": (loop(ints("n", 2), floats("ws", 1.0)), ["Gather", "iteration"]),
        "loop-trip-zero": (loop(ints("n", 0), floats("ws", np.ones((2, C, C)))), ["Loop", "trip count 0"]),
        "loop-trip-negative": (loop(ints("n", -3), floats("ws", np.ones((2, C, C)))), ["Loop", "trip count -3"]),
        "loop-trip-float": (loop(floats("n", 2.5), floats("ws", np.ones((2, C, C)))), ["Loop", "trip count 2.5"]),
        "undefined-value": (make([helper.make_node("MatMul", ["x", "nowhere"], ["y"])]), ["nowhere"]),
        "matmul-weight-shape": (make([helper.make_node("MatMul", ["x", "w"], ["y"])], inits=[weight("w", (3, 5))]),
                                ["MatMul", "(3, 5)"]),
        "unknown-op": (after([helper.make_node("Frobnicate", ["t"], ["u"])], "u"), ["Frobnicate"]),
        "custom-domain": (make([helper.make_node("MatMul", ["x", "w"], ["y"], domain="evil.example")]),
                          ["evil.example"]),
        "opset-11": (make([helper.make_node("MatMul", ["x", "w"], ["y"])], opset=11), ["opset 11"]),
        "metadata-nested": (make([helper.make_node("MatMul", ["x", "w"], ["y"])],
                                 meta={"ipu-e2e.options": "[" * 3000 + "]" * 3000}), ["ipu-e2e.options", "nested"]),
        "metadata-not-object": (make([helper.make_node("MatMul", ["x", "w"], ["y"])],
                                     meta={"ipu-e2e.options": "[1, 2]"}), ["ipu-e2e.options", "JSON object"]),
        "metadata-not-json": (make([helper.make_node("MatMul", ["x", "w"], ["y"])],
                                   meta={"ipu-e2e.options": "{nope"}), ["ipu-e2e.options", "not JSON"]),
        "constant-two-values": (after([helper.make_node("Constant", [], ["u"], value_float=1.0, value_int=2)], "u"),
                                ["Constant"]),
        "cast-to-string": (after([floats("c", np.ones((R, C))), helper.make_node("Cast", ["c"], ["u"], to=8)], "u"),
                           ["Cast", "'to' 8"]),
        "where-broadcast-1e10": (after([helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(
            np.ones((10 ** 5, 1), bool))), floats("a", np.ones((1, 10 ** 5))), floats("b", 0.0),
            helper.make_node("Where", ["k", "a", "b"], ["u"])], "u"), ["Where", "larger than the device holds"]),
        "equal-broadcast-1e10": (after([floats("a", np.ones((10 ** 5, 1))), floats("b", np.ones((1, 10 ** 5))),
                                        helper.make_node("Equal", ["a", "b"], ["u"])], "u"),
                                 ["Equal", "larger than the device holds"]),
        "add-broadcast-1e10": (after([floats("a", np.ones((10 ** 5, 1))), floats("b", np.ones((1, 10 ** 5))),
                                      helper.make_node("Add", ["a", "b"], ["u"])], "u"),
                               ["Add", "larger than the device holds"]),
        "range-vector": (after([floats("a", [0, 1]), floats("b", 8), floats("d", 1),
                                helper.make_node("Range", ["a", "b", "d"], ["u"])], "u"), ["Range", "scalars"]),
        "output-constant": (make([floats("y", np.ones((R, C)))], inits=[]), ["constant"]),
        "output-missing": (make([helper.make_node("MatMul", ["x", "w"], ["t"])]), ["'y'"]),
    }
    for name, (model, _) in models.items():
        folder = inputs / name
        folder.mkdir(parents=True)
        onnx.save(model, folder / "model.onnx")
        (folder / "w.bin").write_bytes(np.full((C, C), 0.125, np.float32).tobytes())
        (folder / "short.bin").write_bytes(bytes(16))
    for name, target in (("ext-symlink-out", canary), ("ext-symlink-dev-zero", "/dev/zero"),
                         ("ext-symlink-proc", "/proc/self/environ")):
        os.symlink(target, inputs / name / ("link.bin" if name == "ext-symlink-out" else
                                            "zero.bin" if "zero" in name else "environ.bin"))
    os.symlink(outside, inputs / "ext-subdir-symlink" / "sub")
    (inputs / "ext-subdir-symlink" / "sub.txt").write_text("sub/ is a link to a folder outside")
    os.mkfifo(inputs / "ext-fifo" / "fifo.bin")
    (inputs / "ext-folder" / "folder.bin").mkdir()
    (inputs / "ext-dotdot-inside" / "sub").mkdir()
    cases = [(f"model:{name}", "test", ["--model", f"{{{name}/model.onnx}}", *SMALL], words)
             for name, (_, words) in models.items()]
    # The model file itself: not a regular file, empty, not a model.
    (inputs / "model-folder.onnx").mkdir()
    os.mkfifo(inputs / "model-fifo.onnx")
    (inputs / "model-empty.onnx").write_bytes(b"")
    (inputs / "model-junk.onnx").write_bytes(b"\x08\x01garbage\xff\xff")
    (inputs / "model-truncated.onnx").write_bytes(base().SerializeToString()[:40])
    (inputs / "model-text.onnx").write_text("this is not a model\n")
    os.symlink("/dev/zero", inputs / "model-dev-zero.onnx")
    cases += [
        ("model:folder", "test", ["--model", "{model-folder.onnx}", *SMALL], ["model-folder.onnx", "a directory"]),
        ("model:fifo", "test", ["--model", "{model-fifo.onnx}", *SMALL], ["model-fifo.onnx", "a FIFO"]),
        ("model:dev-zero", "test", ["--model", "{model-dev-zero.onnx}", *SMALL],
         ["model-dev-zero.onnx", "a character device"]),
        ("model:empty", "test", ["--model", "{model-empty.onnx}", *SMALL], ["model-empty.onnx"]),
        ("model:junk", "test", ["--model", "{model-junk.onnx}", *SMALL], ["model-junk.onnx", "not"]),
        ("model:truncated", "test", ["--model", "{model-truncated.onnx}", *SMALL], ["model-truncated.onnx", "not"]),
        ("model:text", "test", ["--model", "{model-text.onnx}", *SMALL], ["model-text.onnx", "not"]),
        ("model:missing", "test", ["--model", "{model-missing.onnx}", *SMALL], ["model-missing.onnx",
                                                                               "No such file"]),
    ]
    return cases


def array_cases(inputs, outside):
    """Inputs and expected outputs of the base model: arrays that lie about their size, or are of the
    wrong shape, dtype or name, or hold values that are not finite; folders of .pb files."""
    folder = inputs / "arrays"
    folder.mkdir()
    onnx.save(base(), folder / "model.onnx")
    good = np.ones((R, C), np.float32)
    np.save(folder / "good.npy", good)
    files = {
        "claims-4e15.npy": npy_header("<f4", (10 ** 8, 4 * 10 ** 7)) + bytes(64),
        "claims-more.npy": npy_header("<f4", (R, C + 1)) + good.tobytes(),
        "truncated.npy": npy_header("<f4", (R, C)) + good.tobytes()[:50],
        "extra.npy": npy_header("<f4", (R, C)) + good.tobytes() + bytes(4),
        "fortran.npy": npy_header("<f4", (R, C), fortran=True) + good.tobytes(),
        "structured.npy": npy_header([("a", "<f4"), ("b", "<f4")], (R, C // 2)) + good.tobytes(),
        "header-4gb.npy": b"\x93NUMPY\x02\x00" + (0xFFFFFFF0).to_bytes(4, "little") + b"{",
        "header-nested.npy": b"\x93NUMPY\x01\x00" + (6000).to_bytes(2, "little") + nested(3000),
        "header-list.npy": b"\x93NUMPY\x01\x00" + (10).to_bytes(2, "little") + b"[1, 2, 3]\n",
        "header-extra-key.npy": b"\x93NUMPY\x01\x00" + (80).to_bytes(2, "little") +
        b"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 8), 'x': 1}".ljust(79) + b"\n",
        "header-negative.npy": npy_header("<f4", (-4, C)) + good.tobytes(),
        "bad-magic.npy": b"\x93NUMPZ\x01\x00" + good.tobytes(),
        "empty.npy": b"",
        "version-9.npy": b"\x93NUMPY\x09\x00" + good.tobytes(),
        "not-pb.pb": b"\xff\xff\xff\xff not a tensor",
        "not-x.pb": pb(good, "not_x"),
        "complex.pb": pb(good.astype(np.complex64), "x"),
        "string.pb": pb(np.array(["a"] * 32, dtype=object).reshape(R, C), "x"),
        "bool.pb": pb(good.astype(bool), "x"),
        "pb-dims-1e12.pb": raw_tensor("x", [10 ** 6, 10 ** 6]).SerializeToString(),
        "pb-short.pb": raw_tensor("x", [R, C], bytes(40)).SerializeToString(),
        "pb-negative.pb": raw_tensor("x", [-4, C]).SerializeToString(),
        "input.txt": b"1 2 3\n",
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    external_pb = raw_tensor("x", [R, C])
    external_pb.data_location = TensorProto.EXTERNAL
    entry = external_pb.external_data.add()
    entry.key, entry.value = "location", "/etc/passwd"
    (folder / "external.pb").write_bytes(external_pb.SerializeToString())
    arrays = {
        "more-elements.npy": np.ones((R + 1, C), np.float32), "fewer-elements.npy": np.ones((R - 1, C), np.float32),
        "transposed.npy": np.ones((C, R), np.float32), "flat.npy": np.ones(R * C, np.float32),
        "rank3.npy": np.ones((1, R, C), np.float32), "complex.npy": good.astype(np.complex64),
        "datetime.npy": np.zeros((R, C), "datetime64[s]"), "bool.npy": good.astype(bool),
        "object.npy": np.array([[None] * C] * R, dtype=object), "unicode.npy": np.full((R, C), "a"),
        "float128.npy": good.astype(np.longdouble), "nan.npy": np.where(np.eye(R, C) > 0, np.nan, good),
        "inf.npy": np.where(np.eye(R, C) > 0, np.inf, good), "neg-inf.npy": np.full((R, C), -np.inf, np.float32),
        "nan-f16.npy": np.full((R, C), np.nan, np.float16), "empty-shape.npy": np.ones((0, C), np.float32),
        "scalar.npy": np.float32(1),
    }
    for name, array in arrays.items():
        np.save(folder / name, array, allow_pickle=True)
    os.mkfifo(folder / "fifo.npy")
    os.symlink("/dev/zero", folder / "dev-zero.npy")
    (folder / "dir.npy").mkdir()
    # A sparse 12 GB file whose header claims its size: refused for the tensor's size, never read.
    with open(folder / "sparse-12gb.npy", "wb") as handle:
        handle.write(npy_header("<f4", (3 * 10 ** 9,)))
        handle.truncate(12 * 10 ** 9 + 128)
    # Folders of .pb files as the ONNX test cases hold them.
    for name, contents in (("set-none", {}), ("set-gap", {"input_1.pb": pb(good)}),
                           ("set-two", {"input_0.pb": pb(good), "input_1.pb": pb(good)}),
                           ("set-named-wrong", {"input_0.pb": pb(good, "y")}),
                           ("set-bad-output", {"input_0.pb": pb(good), "output_0.pb": pb(np.ones((2, 2),
                                                                                               np.float32), "y")}),
                           ("set-nan-output", {"input_0.pb": pb(good), "output_0.pb": pb(np.full((R, C), np.nan,
                                                                                                 np.float32), "y")})):
        (folder / name).mkdir()
        for file, data in contents.items():
            (folder / name / file).write_bytes(data)
    (folder / "set-link-out").mkdir()
    os.symlink(outside / "canary.bin", folder / "set-link-out" / "input_0.pb")
    model = ["--model", "{arrays/model.onnx}", *SMALL]
    cases = []
    for name, words in (
            ("claims-4e15.npy", ["(100000000, 40000000)", "16,000,000,000,000,000 bytes; at most 2,551,488"]), ("claims-more.npy", ["(4, 9)"]),
            ("truncated.npy", ["bytes of data"]), ("extra.npy", ["bytes of data"]), ("fortran.npy", ["Fortran"]),
            ("structured.npy", ["structured"]), ("header-4gb.npy", ["header of"]),
            ("header-nested.npy", ["not a dict"]), ("header-list.npy", ["not a dict"]),
            ("header-extra-key.npy", ["not a dict"]), ("header-negative.npy", ["non-negative"]),
            ("bad-magic.npy", ["not a .npy"]), ("empty.npy", ["not a .npy"]), ("version-9.npy", ["not a .npy"]),
            ("not-pb.pb", ["not an ONNX TensorProto"]), ("not-x.pb", ["'not_x'", "'x'"]),
            ("complex.pb", ["data type 14"]), ("string.pb", ["data type 8"]), ("bool.pb", ["data type 9"]),
            ("pb-dims-1e12.pb", ["dims [1000000, 1000000]"]), ("pb-short.pb", ["does not hold"]),
            ("pb-negative.pb", ["dims [-4, 8]"]), ("external.pb", ["external file"]),
            ("input.txt", ["expected a .npy array or a .pb"]),
            ("more-elements.npy", ["shape (5, 8)", "(4, 8)"]), ("fewer-elements.npy", ["shape (3, 8)"]),
            ("transposed.npy", ["shape (8, 4)"]), ("flat.npy", ["shape (32,)"]), ("rank3.npy", ["(1, 4, 8)"]),
            ("complex.npy", ["'<c8'"]), ("datetime.npy", ["'<M8[s]'"]), ("bool.npy", ["'|b1'"]),
            ("object.npy", ["'|O'"]), ("unicode.npy", ["'<U1'"]), ("float128.npy", ["'<f16'"]),
            ("nan.npy", ["element (0, 0)", "nan", "finite"]), ("inf.npy", ["element (0, 0)", "inf"]),
            ("neg-inf.npy", ["-inf"]), ("nan-f16.npy", ["finite"]), ("empty-shape.npy", ["shape (0, 8)"]),
            ("scalar.npy", ["shape ()"]), ("fifo.npy", ["a FIFO"]), ("dev-zero.npy", ["a character device"]),
            ("dir.npy", ["expected"]), ("sparse-12gb.npy", ["at most"]), ("missing.npy", ["No such file"])):
        cases.append((f"inputs:{name}", "test", [*model, "--inputs", f"{{arrays/{name}}}"], ["--inputs", name, *words]))
    for name in ("nan.npy", "inf.npy", "transposed.npy", "more-elements.npy", "complex.npy", "claims-4e15.npy",
                 "fifo.npy", "sparse-12gb.npy", "not-pb.pb", "structured.npy"):
        cases.append((f"expected:{name}", "test", [*model, "--inputs", "{arrays/good.npy}", "--expected",
                                                  f"{{arrays/{name}}}"], ["--expected", name]))
    for name, words in (("set-none", ["input_N.pb", "[]"]), ("set-gap", ["[1]", "expected 0 to 0"]),
                        ("set-two", ["[0, 1]"]), ("set-named-wrong", ["'y'", "'x'"]),
                        ("set-bad-output", ["output_0.pb", "(2, 2)"]), ("set-nan-output", ["output_0.pb", "finite"]),
                        ("set-link-out", ["input_0.pb", "leads outside"])):
        cases.append((f"inputs-folder:{name}", "test", [*model, "--inputs", f"{{arrays/{name}}}"], [name, *words]))
    cases.append(("inputs:count", "test", [*model, "--inputs", "{arrays/good.npy}", "{arrays/good.npy}"],
                  ["--inputs", "2 files", "1 inputs"]))
    return cases


def description(tensors, ops, name="hostile"):
    return {"format": "ipu-e2e-graph", "version": 1, "name": name, "seed": 0, "options": {}, "tensors": tensors,
            "ops": ops, "repeat": None}


def tensor(name, rows=R, cols=C, role="activation", dtype="f16", values=None):
    entry = {"name": name, "rows": rows, "cols": cols, "dtype": dtype, "scale": 0, "role": role, "sequence": 1}
    if values:
        entry["values"] = values
    return entry


def graph_cases(inputs, outside):
    """Graph descriptions and their value folders."""
    folder = inputs / "graphs"
    folder.mkdir()
    valid = description([tensor("x", role="input", values="given"), tensor("w", C, C, "parameter", values="given"),
                         tensor("y", role="output")], [{"op": "matmul", "inputs": ["x", "w"], "output": "y"}])
    evil = json.loads(json.dumps(valid).replace('"w"', '"../../../evil"'))
    texts = {
        "nested.json": nested(3000), "nested-object.json": b'{"a":' * 3000 + b"1" + b"}" * 3000,
        "latin1.json": b'{"name": "caf\xe9"}', "empty.json": b"", "array.json": b"[1, 2]",
        "evil.json": json.dumps(evil).encode(), "valid.json": json.dumps(valid).encode(),
        "rows-huge.json": json.dumps(description([tensor("x", 10 ** 12, 10 ** 6, "input", values="given"),
                                                  tensor("y", role="output")],
                                                 [{"op": "copy", "inputs": ["x"], "output": "y"}])).encode(),
        "rows-zero.json": json.dumps(description([tensor("x", 0, C, "input"), tensor("y", role="output")],
                                                 [{"op": "copy", "inputs": ["x"], "output": "y"}])).encode(),
        "name-nested.json": json.dumps(dict(valid, name={"a": [1]})).encode(),
        "name-long.json": json.dumps(dict(valid, name="n" * 5000)).encode(),
        "tensors-number.json": json.dumps(dict(valid, tensors=5)).encode(),
    }
    for name, data in texts.items():
        (folder / name).write_bytes(data)
    for stem in ("valid", "evil"):
        (folder / f"{stem}.values").mkdir()
    np.save(folder / "valid.values" / "x.npy", np.ones((R, C), np.float32))
    np.save(folder / "evil.values" / "x.npy", np.ones((R, C), np.float32))
    with open(folder / "valid.values" / "w.npy", "wb") as handle:  # 12 GB, sparse, its header honest
        handle.write(npy_header("<f4", (3 * 10 ** 9,)))
        handle.truncate(12 * 10 ** 9 + 128)
    for name, content in (("values-fifo", "fifo"), ("values-zero", "zero"), ("values-dir", "dir"), ("values-out", "out"),
                          ("values-transposed", np.ones((C, C + 1), np.float32))):
        (folder / name).mkdir()
        np.save(folder / name / "x.npy", np.ones((R, C), np.float32))
        target = folder / name / "w.npy"
        if isinstance(content, np.ndarray):
            np.save(target, content)
        elif content == "fifo":
            os.mkfifo(target)
        elif content == "zero":
            os.symlink("/dev/zero", target)
        elif content == "out":
            os.symlink(outside / "canary.bin", target)
        else:
            target.mkdir()
    # Larger than a description may be: refused for its size before a byte is read (a sparse file).
    with open(folder / "huge.json", "wb") as handle:
        handle.truncate(40 << 20)
    os.mkfifo(folder / "fifo.json")
    os.symlink("/dev/zero", folder / "zero.json")
    graph = lambda name: ["--graph", f"{{graphs/{name}}}", *SMALL]  # noqa: E731
    cases = [(f"graph:{name}", "test", graph(name), words) for name, words in (
        ("nested.json", ["nested.json", "nested too deeply"]), ("nested-object.json", ["nested too deeply"]),
        ("latin1.json", ["latin1.json", "UTF-8"]), ("empty.json", ["empty.json", "not JSON"]),
        ("array.json", ["array.json"]), ("rows-huge.json", ["rows-huge.json", "tensors[0]", "the device holds"]),
        ("rows-zero.json", ["rows-zero.json", "rows"]), ("name-nested.json", ["name-nested.json", "name"]),
        ("name-long.json", ["name-long.json", "name"]), ("tensors-number.json", ["tensors-number.json", "tensors"]),
        ("huge.json", ["huge.json", "at most"]), ("fifo.json", ["fifo.json", "a FIFO"]),
        ("zero.json", ["zero.json", "a character device"]), ("missing.json", ["missing.json", "No such file"]),
        ("evil.values", ["evil.values", "a directory"]),
        ("evil.json", ["evil.values", "~", "missing", "'../../../evil'"]),
        ("valid.json", ["w.npy", "at most"]))]
    for name, words in (("values-fifo", ["a FIFO"]), ("values-zero", ["leads outside"]),
                        ("values-dir", ["a directory"]), ("values-transposed", ["shape (8, 9)"]),
                        ("values-out", ["tensor 'w'", "leads outside"]),
                        ("values-missing", ["--values", "no such folder"])):
        cases.append((f"graph:{name}", "test", [*graph("valid.json"), "--values", f"{{graphs/{name}}}"],
                      [name, *words]))
    return cases


def json_cases(inputs):
    """The JSON every other command reads: nested too deep, too large, not a regular file."""
    folder = inputs / "json"
    folder.mkdir()
    (folder / "nested.json").write_bytes(nested(3000))
    os.mkfifo(folder / "fifo.json")
    os.symlink("/dev/zero", folder / "zero.json")
    with open(folder / "huge.json", "wb") as handle:
        handle.truncate(300 << 20)
    for run in ("run-nested", "run-fifo", "run-zero"):
        (folder / run).mkdir()
    (folder / "run-nested" / "result.json").write_bytes(nested(3000))
    os.mkfifo(folder / "run-fifo" / "result.json")
    os.symlink("/dev/zero", folder / "run-zero" / "result.json")
    for sweep in ("sweep-nested", "sweep-fifo"):
        (folder / sweep).mkdir()
    (folder / "sweep-nested" / "sweep.json").write_bytes(nested(3000))
    os.mkfifo(folder / "sweep-fifo" / "sweep.json")
    kinds = (("nested.json", "nested too deeply"), ("fifo.json", "a FIFO"), ("zero.json", "a character device"),
             ("huge.json", "at most"))
    cases = []
    for name, words in kinds:
        cases += [
            (f"device:{name}", "test", ["--device", f"{{json/{name}}}"], ["--device", name, words]),
            (f"nightly-cases:{name}", "nightly", ["--cases", f"{{json/{name}}}"], [name, words]),
            (f"nightly-baselines:{name}", "nightly", ["--baselines", f"{{json/{name}}}"], [name, words]),
            (f"goldens:{name}", "goldens", ["--goldens", f"{{json/{name}}}"], ["--goldens", name, words]),
            (f"random-cases:{name}", "random", ["--regressions", "--cases", f"{{json/{name}}}"], ["--cases", name]),
            (f"bench-device:{name}", "bench", ["device", "--device", f"{{json/{name}}}"], ["--device", name, words]),
        ]
        if name != "nested.json":
            cases.append((f"sweep-sshloginfile:{name}", "sweep", ["--jobs", "2", "--sshloginfile", f"{{json/{name}}}"],
                          ["--sshloginfile", name, words]))
    for run, words in (("run-nested", "nested too deeply"), ("run-fifo", "a FIFO"), ("run-zero", "a character device")):
        cases.append((f"compare:{run}", "compare", [f"{{json/{run}}}", f"{{json/{run}}}"], ["result.json", words]))
    for sweep, words in (("sweep-nested", "nested too deeply"), ("sweep-fifo", "a FIFO")):
        cases.append((f"sweep-report:{sweep}", "sweep-report", [f"{{json/{sweep}}}"], ["sweep.json", words]))
    return cases


def output_cases(inputs):
    """Outputs that are not regular files: never replaced."""
    folder = inputs / "outputs"
    folder.mkdir()
    os.mkfifo(folder / "fifo")
    os.symlink(inputs / "outputs" / "elsewhere.json", folder / "link")
    (folder / "a-folder").mkdir()
    small = ["--device", "tiles4", "--tokens", "8", "--channels", "32", "--hidden", "48"]
    cases = []
    for flag in ("--trace", "--save-package", "--export-graph"):
        for target, words in (("/dev/null", "a character device"), ("{outputs/fifo}", "a FIFO"),
                              ("{outputs/link}", "a symbolic link")):
            cases.append((f"output:{flag}:{target}", "test", [*small, flag, target], [flag, words]))
    for flag in ("--output", "--dump-tensors", "--profile-directory", "--memory-profile-directory"):
        cases.append((f"output:{flag}:fifo", "test", [*small, flag, "{outputs/fifo}"], [flag, "fifo"]))
    cases.append(("output:--export-onnx:fifo", "test", [*small, "--export-onnx", "{outputs/fifo}"],
                  ["--export-onnx", "fifo"]))
    return cases


def build(root):
    """Write every hostile input under root/inputs (root/outside/canary.bin is the file nothing may read);
    returns the cases."""
    inputs, outside = root / "inputs", root / "outside"
    inputs.mkdir()
    outside.mkdir()
    (outside / "canary.bin").write_bytes(b"CANARY-" * 36 + b"CANA")  # 256 bytes: a whole 8 x 8 FP32 weight
    return model_cases(inputs, outside) + array_cases(inputs, outside) + graph_cases(inputs, outside) + \
        json_cases(inputs) + output_cases(inputs)
