"""Models users bring (`ipu-e2e-test --model FILE.onnx`): the model imported
(onnx_import.py) into a graph description, the workload built from it with
the model's weights as given values, its inputs from `--inputs` (one .pb
TensorProto or .npy file per model input, in the model's order, or a folder
holding input_N.pb, as the ONNX test cases do) or, when none are given,
standard normal values in the model's own shapes (numpy, --seed), laid out
by the host as given ones are; its expected outputs from
`--expected` (one file per output) or the folder's output_N.pb; without
`--inputs`, FILE.input.npy and FILE.expected.npy beside FILE.onnx when they
are there (what ipu-e2e-export-model writes).  A model
input the importer lays out differently (a transposed or sliced read) is
rearranged on the host into the workload's input; a model output that is a
selection of a tensor's elements is read out of the device's output the
same way.  The check against expected outputs uses the output check's
criteria for an FP32 reference.  Errors name the file and exit 2.
"""
import math
import os
import re
import time

import numpy as np

from . import files, npy, tolerances
from .command import UsageError
from .native import INVALID_ARGUMENT, IpuError, Workload, check_outputs


def onnx_modules():
    """onnx_import and onnx, or a usage error saying what to install."""
    try:
        from . import onnx_import
    except ImportError:
        raise UsageError("--model needs Debian's python3-onnx (apt-get install python3-onnx)") from None
    return onnx_import


def beside(model, what):
    """FILE.<what>.npy beside FILE.onnx (ipu-e2e-export-model writes input and expected)."""
    return model.with_name(f"{model.stem}.{what}.npy")


# What an array a model reads may hold (.npy descrs and TensorProto types): real floats and integers.
NPY_DESCRS = {f"{order}{kind}{size}": f"{name}{8 * size}" for kind, name, sizes in
              (("f", "float", (2, 4, 8)), ("i", "int", (1, 2, 4, 8)), ("u", "uint", (1, 2, 4, 8)))
              for size in sizes for order in ("<", ">", "|")}
PB_TYPES = {1: "float32", 10: "float16", 11: "float64", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
            7: "int64", 12: "uint32", 13: "uint64"}
ARRAY_FILE = re.compile(r"(input|output)_(\d{1,6})\.pb")


def read_array(path, what, limit):
    """(array, the name a .pb TensorProto gives it or '') of a .npy file or a .pb TensorProto holding
    real floats or integers, at most `limit` bytes: sizes checked before the data is read."""
    if path.suffix == ".npy":
        dtype, shape, data = npy.read_npy(path, what, limit, NPY_DESCRS)
        return np.frombuffer(data, dtype=dtype).reshape(shape), ""
    if path.suffix != ".pb":
        raise UsageError(f"{what} {path}: expected a .npy array or a .pb TensorProto (by its suffix)")
    import onnx
    from onnx import numpy_helper
    data = files.read_bytes(path, what, 16 * limit + (1 << 20))  # an integer's varint takes up to 10 bytes
    tensor = onnx.TensorProto()
    try:
        tensor.ParseFromString(data)
    except Exception as error:  # protobuf's DecodeError
        raise UsageError(f"{what} {path}: not an ONNX TensorProto ({type(error).__name__})") from None
    where = f"{what} {path}: tensor '{tensor.name}'"
    dims = list(tensor.dims)
    if tensor.data_type not in PB_TYPES:
        raise UsageError(f"{where} has ONNX data type {tensor.data_type}; expected real floats or integers "
                         f"({', '.join(sorted(set(PB_TYPES.values())))})")
    count = math.prod(dims) if all(d >= 0 for d in dims) else -1
    if count < 0 or count * np.dtype(PB_TYPES[tensor.data_type]).itemsize > limit:
        raise UsageError(f"{where} has dims {dims}; expected non-negative dims of at most {limit:,} bytes")
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        raise UsageError(f"{where} keeps its data in an external file; an input file holds its own data")
    try:
        return numpy_helper.to_array(tensor), tensor.name
    except Exception as error:  # data that does not fill the dims
        raise UsageError(f"{where}: its data does not hold dims {dims} ({type(error).__name__})") from None


def arrays(paths, names, what, limit, shapes):
    """{name: array} from the paths given, in order, each of the shape `shapes` gives its name (a tuple of
    sizes, None where the model leaves one open, or None: any); a folder holds <what>_N.pb."""
    flag = f"--{what}s" if what == "input" else "--expected"
    if len(paths) == 1 and paths[0].is_dir():
        folder = paths[0]
        found = {int(m.group(2)): folder / m.group(0) for m in map(ARRAY_FILE.fullmatch, os.listdir(folder))
                 if m and m.group(1) == what}
        paths = [files.inside(folder, found[k].name, f"{flag} {folder}") for k in sorted(found)]
        if len(paths) != len(names) or sorted(found) != list(range(len(names))):
            raise UsageError(f"{flag} {folder}: {what}_N.pb files numbered {sorted(found)} for the model's "
                             f"{len(names)} {what}s ({', '.join(names)}); expected 0 to {len(names) - 1}")
    elif len(paths) != len(names):
        raise UsageError(f"{flag}: {len(paths)} files for the model's {len(names)} {what}s ({', '.join(names)})")
    given = {}
    for name, path in zip(names, paths):
        array, recorded = read_array(path, flag, limit)
        where = f"{flag} {path}"
        if recorded and recorded != name:
            raise UsageError(f"{where} holds tensor '{recorded}'; the model's {what} in its place is '{name}'")
        want = shapes.get(name)
        if want is not None and (len(want) != array.ndim or any(w not in (None, d) for w, d in zip(want, array.shape))):
            raise UsageError(f"{where}: an array of shape {array.shape}; the model's {what} '{name}' has shape "
                             f"{tuple('?' if w is None else w for w in want)}")
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
            raise UsageError(f"{where}: element {bad} is {array[bad]}; expected finite values")
        given[name] = array
    return given


def declared_shape(value_info):
    """The shape an ONNX graph input or output declares: sizes, None for an open one; None without a shape."""
    kind = value_info.type.tensor_type
    if not kind.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim)


class Model:
    """An imported model: its workload and what runs it (host inputs, readouts, expected outputs)."""

    def __init__(self, ctx, args):
        started = time.perf_counter()
        onnx_import = onnx_modules()
        limit = args.value_limit
        try:
            model = onnx_import.load_model(args.model, limit)
        except onnx_import.ModelError as error:
            raise UsageError(str(error)) from None
        initialized = {t.name for t in model.graph.initializer}
        graph_inputs = [i.name for i in model.graph.input if i.name not in initialized]
        outputs = [o.name for o in model.graph.output]
        shapes = {v.name: declared_shape(v) for v in list(model.graph.input) + list(model.graph.output)}
        inputs, expected_paths = args.inputs, args.expected
        if not inputs and beside(args.model, "input").is_file():  # as ipu-e2e-export-model writes them
            inputs = [beside(args.model, "input")]
            expected_paths = expected_paths or ([beside(args.model, "expected")]
                                                if beside(args.model, "expected").is_file() else None)
        self.files = {"inputs": [str(p) for p in inputs or []], "expected": [str(p) for p in expected_paths or []]}
        given = arrays(inputs, graph_inputs, "input", limit, shapes) if inputs else \
            self.generated(model, graph_inputs, args.seed, limit)
        folder = inputs[0] if inputs and inputs[0].is_dir() else None
        expected_paths = expected_paths or ([folder] if folder and any(folder.glob("output_*.pb")) else [])
        self.expected = arrays(expected_paths, outputs, "output", limit, shapes) if expected_paths else {}
        importer = onnx_import.Importer(model, args.precision, args.model.stem, given, limit)
        try:
            description = importer.run()
        except (onnx_import.Unsupported, onnx_import.ModelError) as error:
            raise UsageError(f"--model {args.model}: {error}") from None
        self.importer, self.given = importer, given
        self.import_seconds = time.perf_counter() - started
        try:
            self.workload = Workload(ctx, {"workload": "graph", "graph": description})
        except IpuError as error:
            if error.status != INVALID_ARGUMENT:
                raise
            raise UsageError(f"--model {args.model}: the imported graph: {error.message}") from None
        for name, values in importer.params.items():
            self.workload.set_values(name, values.astype(np.float32).tobytes())
        for name, (source, indices) in importer.host_inputs.items():
            if source in given:
                flat, picks = np.asarray(given[source], dtype=np.float32).reshape(-1), indices.reshape(-1)
                data = np.where(picks >= 0, flat[np.maximum(picks, 0)], np.float32(0))  # -1: a zero row
                self.workload.set_values(name, data.astype(np.float32).tobytes())

    def generated(self, model, names, seed, limit):
        """Standard normal values (numpy, seeded) for the model's float inputs, in the model's own
        shapes: the host lays them out as it would given ones (a class token's zero rows stay zero)."""
        from . import onnx_import
        rng = np.random.default_rng(seed)
        values = {}
        for given in (i for i in model.graph.input if i.name in names):
            if given.type.tensor_type.elem_type not in onnx_import.ONNX_FLOAT:
                continue  # an integer input is a constant the importer asks --inputs for
            try:
                shape = onnx_import.Importer.static_shape(given, limit)
            except onnx_import.ModelError as error:
                raise UsageError(f"--model {model.graph.name or 'the model'}: {error}") from None
            values[given.name] = rng.standard_normal(shape).astype(np.float32)
        self.files["inputs"] = f"seeded standard normal values (--seed {seed})"
        return values

    def compare(self, ctx, name, got, criteria):
        """got (the FP32 values of model output `name`, read out) against its expected values."""
        expected = np.asarray(self.expected[name], dtype=np.float32)
        cols = int(expected.shape[-1]) if expected.ndim else 1
        expected = expected.reshape(-1)
        if got.size != expected.size:
            raise UsageError(f"expected output '{name}' has {expected.size} values; the model gives {got.size}")
        return check_outputs(ctx, expected.tobytes(), got.astype(np.float32).tobytes(), "f32", expected.size // cols,
                             cols, criteria)

    def read_out(self, name, values):
        """Model output `name` from the FP32 values of its graph tensor."""
        view = self.importer.readouts[name][1]
        return values if view is None else values[view.element_indices().reshape(-1)]

    def check_expected(self, ctx, outputs, info, args, producing_op):
        """Each model output with an expected array: the device's output, read out as the model
        gives it, against the expected values with the FP32 reference's criteria."""
        checks = []
        tensors = {t["name"]: t for t in info["tensors"]}
        for name in self.expected:
            tensor = self.importer.readouts[name][0]
            t = tensors[tensor]
            got = self.read_out(name, decode(outputs[tensor], t["dtype"]))
            check = self.compare(ctx, name, got, tolerances.criteria("fp32", t["dtype"], args.min_cosine, args.atol,
                                                                     args.rtol, args.norm_tolerance))
            check.update(tensor=tensor, op=producing_op(info, tensor), model_output=name, against="expected")
            checks.append(check)
        return checks

    def check_reference(self, ctx, workload):
        """The project's FP32 reference against the expected outputs (two FP32 computations of one model:
        the device-precision criteria, which allow a few FP16 ulps, are loose enough)."""
        checks = []
        for name in self.expected:
            tensor = self.importer.readouts[name][0]
            got = self.read_out(name, np.frombuffer(workload.reference_output(tensor), dtype=np.float32))
            check = self.compare(ctx, name, got, tolerances.criteria("device", "f32"))
            check.update(tensor=tensor, model_output=name, against="expected", reference=True)
            checks.append(check)
        return checks


def export_onnx(workload, folder):
    """--export-onnx DIR (onnx_export.py, with Debian's python3-onnx)."""
    onnx_modules()
    from . import onnx_export
    onnx_export.export(workload, folder)


def decode(data, dtype):
    """Device bytes of an output as FP32 values (FP16 and FP32 outputs: the importer's types)."""
    return np.frombuffer(bytes(data), dtype={"f32": np.float32, "f16": np.float16}[dtype]).astype(np.float32)
