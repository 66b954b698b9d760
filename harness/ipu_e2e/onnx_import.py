"""ONNX models as graph descriptions (`ipu-e2e-test --model FILE.onnx`), read
with Debian's python3-onnx.  The importer walks the model's nodes in order
and keeps, per ONNX value, what it is:

- a constant (an initializer, a Constant node, or anything computed from
  constants and static shapes alone: Shape, Gather, Concat, Unsqueeze and the
  like fold away here, with numpy);
- a view of a tensor of the workload graph (onnx_views.py): Reshape,
  Transpose, Slice, Split, Gather of one index, Squeeze, Unsqueeze, Flatten,
  Identity and Dropout (inference) only change the view;
- a pointwise function of one such view, built up from Add, Sub, Mul, Div,
  Pow, Sqrt, Erf and Tanh with scalar constants: when an op that is not
  pointwise reads it, it must be the identity, a scale (folded into the
  matmul before it) or GELU (tanh or erf form), found by evaluating it at
  sample points;
- a LayerNorm under way, from its ReduceMean, Sub, Pow, Add, Sqrt and Div
  form (torch's export before opset 17);
- an attention under way: q k^T of two head views of one fused projection,
  then its Softmax over the keys (Scores), until the product with v;
- a tensor plus a constant not yet added (a class token's row, Shifted).

A graph op is written when a value must exist as a tensor: MatMul and Gemm
with a constant weight (the bias Add after it becomes the matmul's bias;
a MatMul of two constants runs on the device as written), Add of two
tensors (or of a tensor and a constant that repeats every P rows, such as a
position embedding), LayerNormalization, GELU, attention (one fused
projection) and MAP pooling (one query over [k | v]), a Conv whose stride
is its kernel (a matmul over patches the host cuts), and a Loop over
stacked per-iteration weights becomes the graph's Repeat.  Views of the
graph's inputs are laid out on the host: the input tensor of the workload is
the view's array, and the model's input array is rearranged into it when the
run feeds it (`host_inputs`); a model output that is a selection of a
tensor's rows is read out on the host (`readouts`).  Anything else exits 2
naming the node, its op type and why, with the list of what is supported.

Precision (`--precision`): fp8 gives the built-in ViT's types (weights F143
with scale -4, every activation that a matmul reads cast to F143 with scale
-2 first, as `<name>_f8`; FP16 elsewhere), fp16 all FP16.
"""
import math
import re

import numpy as np
import onnx
from onnx import numpy_helper

from . import files
from .onnx_files import load_model  # noqa: F401 (the importer's entry points: load, then Importer)
from .onnx_values import (Iteration, Mean, Members, ModelError, Normalized, Pointwise, Scores, Shifted, Tensor,
                          Unsupported, at, gelu_erf, gelu_tanh)
from .onnx_views import View, ViewError
from .profiles import C600_BYTES as DEVICE_BYTES

OPSETS = range(13, 18)
# What an unexpected error inside an op handler means: the node's inputs or attributes are not what its
# op takes (an index out of range, shapes that do not fit); reported naming the node, never a traceback.
NODE_ERRORS = (ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError, ViewError)
WEIGHT_SCALE, ACT_SCALE = -4, -2
# The library's name limits, in bytes of UTF-8: a workload's name (char[32]) and a tensor's (IPU_IR_NAME 64,
# engine/src/ir/ir.h), each with its terminating zero.
WORKLOAD_NAME_BYTES, TENSOR_NAME_BYTES = 31, 63
ONNX_FLOAT = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE)


def utf8_prefix(text, limit):
    """The longest prefix of text whose UTF-8 takes at most `limit` bytes, cut on a character boundary (the
    library counts a name's bytes, not its characters); a character UTF-8 cannot encode (a file name's
    undecodable byte) becomes '?'."""
    return text.encode("utf-8", "replace")[:limit].decode("utf-8", "ignore")


SAMPLES = np.linspace(-6, 6, 97)


class Importer:
    def __init__(self, model, precision="fp8", name=None, given_inputs=None, limit=DEVICE_BYTES):
        self.model, self.precision, self.limit = model, precision, limit
        self.given_inputs = given_inputs or {}
        self.name = name or model.graph.name or "model"
        self.values = {}                        # ONNX value name -> constant, Tensor, Pointwise, Mean, Normalized
        self.tensors, self.ops, self.params = [], [], {}
        self.entries, self.readers = {}, {}     # tensor name -> its entry; -> how many ops read it
        self.names, self.producer, self.casts = set(), {}, {}
        self.host_inputs, self.readouts = {}, {}
        self.ops_repeat, self.iterations = None, 0
        self.consumers = {}                     # ONNX value name -> nodes (and graph outputs) reading it
        self.count_consumers(model.graph)

    def count_consumers(self, graph):
        for node in graph.node:
            for name in node.input:
                self.consumers[name] = self.consumers.get(name, 0) + 1
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    self.count_consumers(a.g)
        for out in graph.output:
            self.consumers[out.name] = self.consumers.get(out.name, 0) + 1

    # ---- the graph being written ---------------------------------------

    def unique(self, name):
        # Every character kept is ASCII (one byte of UTF-8), so cutting characters keeps the library's byte limit.
        name = re.sub(r"[^A-Za-z0-9_.:/-]", "_", name)[-TENSOR_NAME_BYTES:] or "t"
        base, n = name, 1
        while name in self.names:
            n += 1
            name = base[:TENSOR_NAME_BYTES - len(str(n)) - 1] + f"~{n}"
        self.names.add(name)
        return name

    def tensor(self, name, rows, cols, role, dtype="f16", scale=0, values=None):
        name = self.unique(name)
        entry = {"name": name, "rows": int(rows), "cols": int(cols), "dtype": dtype, "scale": scale, "role": role,
                 "sequence": 1}
        if role in ("input", "parameter"):
            entry["values"] = "given"
        stacked = getattr(values, "stacked", None)
        if stacked is not None:  # a parameter sequence's member: all members, one after another
            if stacked[0].size != int(rows) * int(cols) or not np.array_equal(stacked[0].reshape(-1),
                                                                              np.asarray(values).reshape(-1)):
                raise ModelError(f"'{name}': a Loop body changes a per-iteration parameter before using it")
            entry["sequence"] = len(stacked)
            values = np.asarray(stacked).reshape(len(stacked) * int(rows), int(cols))
            rows = len(stacked) * int(rows)
        if values is not None:
            self.params[name] = np.ascontiguousarray(np.asarray(values, dtype=np.float32).reshape(int(rows), int(cols)))
        self.tensors.append(entry)
        self.entries[name] = entry
        return name

    def entry(self, name):
        return self.entries[name]

    def shape_of(self, name):
        t = self.entry(name)
        return t["rows"], t["cols"]

    def op(self, kind, inputs, output, **fields):
        self.ops.append({"op": kind, "inputs": [], "output": output, **fields})
        for name in inputs:
            self.add_input(self.ops[-1], name)
        self.producer[output] = len(self.ops) - 1

    def add_input(self, op, name):
        op["inputs"].append(name)
        self.readers[name] = self.readers.get(name, 0) + 1

    def read_by_ops(self, tensor):
        return self.readers.get(tensor, 0) > 0

    def rename(self, old, new):
        """Give a tensor no op reads yet its final name (a matmul's output once its bias is found)."""
        new = self.unique(new)
        self.names.discard(old)
        self.entries[new] = self.entries.pop(old)
        self.entries[new]["name"] = new
        self.ops[self.producer[old]]["output"] = new
        self.producer[new] = self.producer.pop(old)
        for value in self.values.values():
            if isinstance(value, Tensor) and value.view.tensor == old:
                value.view.tensor = new
        return new

    # ---- values ---------------------------------------------------------

    def value(self, node, k):
        if k >= len(node.input) or not node.input[k]:
            raise Unsupported(node, f"input {k} is missing")
        if node.input[k] not in self.values:
            raise ModelError(f"node '{node.name}' ({node.op_type}) reads '{node.input[k]}', which no node or input "
                             f"defines")
        return self.values[node.input[k]]

    def const(self, node, k):
        value = self.values.get(node.input[k]) if k < len(node.input) and node.input[k] else None
        return value if isinstance(value, np.ndarray) else None

    def shape(self, node, x):
        if isinstance(x, np.ndarray):
            return x.shape
        if isinstance(x, Tensor):
            return x.view.shape
        if isinstance(x, Scores):
            return self.shape(node, x.q)[:-1] + self.shape(node, x.k)[-1:]
        return self.shape(node, x.x)

    def materialize(self, node, value):
        """A Tensor for value, writing the op a pointwise value needs."""
        if isinstance(value, Tensor):
            return value
        if isinstance(value, Pointwise):
            x = self.materialize(node, value.x)
            found = value.f(SAMPLES)
            if np.allclose(found, SAMPLES, rtol=0, atol=1e-6):
                return x
            scale = float(value.f(np.float64(1.0)))
            if np.allclose(found, scale * SAMPLES, rtol=1e-6, atol=1e-9):
                return self.scale_matmul(node, x, np.float32(scale))
            if np.allclose(found, gelu_tanh(SAMPLES), rtol=0, atol=1e-5):
                return self.row_op(node, "gelu", x, [], value.name or f"{x.view.tensor}_gelu")
            if np.allclose(found, gelu_erf(SAMPLES), rtol=0, atol=1e-5):
                return self.row_op(node, "gelu", x, [], value.name or f"{x.view.tensor}_gelu", form="erf")
            raise Unsupported(node, f"the pointwise function {' '.join(value.steps)} of a tensor is neither the "
                                    f"identity nor GELU")
        if isinstance(value, Shifted):
            return self.add_constant(node, value.x, value.constant, f"{node.input[0]}_shift", fold=False)
        if isinstance(value, (Mean, Normalized)):
            raise Unsupported(node, "a LayerNorm's ReduceMean/Sub/Pow/Sqrt/Div form that stops part way")
        raise Unsupported(node, "this input is a constant where the importer needs a tensor")

    def on_view(self, node, x, change):
        x = self.materialize(node, x)
        try:
            return Tensor(change(x.view))
        except ViewError as error:
            raise Unsupported(node, str(error)) from None

    def rows_of(self, node, t):
        """(tensor, rows, cols) of a Tensor whose view covers whole rows of its tensor."""
        rows, cols = self.shape_of(t.view.tensor)
        if t.view.over_rows(cols) is None:
            raise Unsupported(node, f"its input is laid out as {t.view.shape} over a {rows}x{cols} tensor in an "
                                    f"order a row-wise op cannot read (not whole rows)")
        return t.view.tensor, rows, cols

    @staticmethod
    def result_view(t, cols_in, out, cols_out):
        """The view of a row-wise op's result: the same rows as t, cols_out columns."""
        leading = [tuple((size, stride // cols_in * cols_out if size != 1 else 0) for size, stride in axis)
                   for axis in t.view.axes[:-1]]
        return View(out, leading + [((cols_out, 1),)], t.view.offset // cols_in * cols_out)

    def row_op(self, node, kind, x, params, out_name, **fields):
        """A row-wise op (gelu, layernorm) on the whole tensor of view x."""
        x = self.readable(node, x)
        tensor, rows, cols = self.rows_of(node, x)
        out = self.tensor(out_name, rows, cols, "activation")
        self.op(kind, [tensor] + params, out, **fields)
        return Tensor(self.result_view(x, cols, out, cols))

    def gemm_operand(self, name):
        """The tensor a matmul reads: with FP8, an activation is cast first (once)."""
        if self.precision != "fp8" or self.entry(name)["role"] == "parameter":
            return name
        if name not in self.casts:
            rows, cols = self.shape_of(name)
            self.casts[name] = self.tensor(f"{name}_f8", rows, cols, "activation", "f143", ACT_SCALE)
            self.op("cast", [name], self.casts[name])
        return self.casts[name]

    def matmul(self, node, x, weight, weight_name, out_name, bias=None, bias_name=None):
        x = self.readable(node, x)
        tensor, rows, cols = self.rows_of(node, x)
        if weight.ndim != 2 or weight.shape[0] != cols:
            raise Unsupported(node, f"a weight of shape {weight.shape} for {cols} input columns")
        n = weight.shape[1]
        fp8 = self.precision == "fp8"
        w = self.tensor(weight_name, cols, n, "parameter", "f143" if fp8 else "f16", WEIGHT_SCALE if fp8 else 0,
                        weight)
        inputs = [self.gemm_operand(tensor), w]
        if bias is not None:
            inputs.append(self.tensor(bias_name or f"{w}_bias", 1, n, "parameter", values=bias))
        out = self.tensor(out_name, rows, n, "activation")
        self.op("matmul", inputs, out)
        return Tensor(self.result_view(x, cols, out, n))

    # ---- the walk -------------------------------------------------------

    def run(self):
        graph = self.model.graph
        opsets = {o.domain: o.version for o in self.model.opset_import}
        opset = opsets.get("", opsets.get("ai.onnx"))
        if opset not in OPSETS:
            raise ModelError(f"opset {opset}: the importer reads opsets 13 to 17")
        for init in graph.initializer:
            self.values[init.name] = self.initializer(init)
        weights = self.weight_inputs()
        for given in graph.input:
            if given.name in self.values:
                continue
            floating = given.type.tensor_type.elem_type in ONNX_FLOAT
            if given.name in weights or not floating:
                if given.name not in self.given_inputs:
                    why = weights.get(given.name, "an input that is not floating point, read as a constant")
                    raise ModelError(f"input '{given.name}' is read as a constant ({why}): the importer needs its "
                                     f"values (--inputs)")
                value = np.asarray(self.given_inputs[given.name])
                self.values[given.name] = value.astype(np.float32) if floating else value
                continue
            shape = self.static_shape(given, self.limit)
            rows, cols = (int(np.prod(shape[:-1])), shape[-1]) if shape else (1, 1)
            name = self.tensor(given.name, rows, cols, "input")
            self.host_inputs[name] = (given.name, np.arange(rows * cols, dtype=np.int64).reshape(rows, cols))
            self.values[given.name] = Tensor(View.whole(name, shape or (1,)))
        with np.errstate(all="ignore"):  # folding and sampling may overflow: the results are checked, not warned of
            for node in graph.node:
                self.visit(node)
            for out in graph.output:
                self.finish_output(out.name)
        kept = {self.ops_repeat["carried_init"]} if self.ops_repeat else set()
        for name in [n for n in self.host_inputs if not self.read_by_ops(n) and n not in kept]:
            del self.host_inputs[name]
            self.tensors.remove(self.entries.pop(name))
        # A model this project exported keeps the name and options its package records.
        props = {p.key: p.value for p in self.model.metadata_props}
        name = props.get("ipu-e2e.workload", self.name)
        options = files.parse_json(props["ipu-e2e.options"], "the model's metadata 'ipu-e2e.options'") \
            if "ipu-e2e.options" in props else {"model": self.name, "precision": self.precision}
        if not isinstance(options, dict) or not isinstance(name, str):
            raise ModelError("the model's metadata 'ipu-e2e.options' must be a JSON object")
        return {"format": "ipu-e2e-graph", "version": 1, "name": utf8_prefix(name, WORKLOAD_NAME_BYTES), "seed": 0,
                "options": options, "tensors": self.tensors, "ops": self.ops, "repeat": self.ops_repeat}

    def visit(self, node):
        if node.domain not in ("", "ai.onnx"):
            raise Unsupported(node, f"domain '{node.domain}' (the importer reads the default ONNX domain)")
        handler = getattr(self, f"op_{node.op_type}", None)
        if handler is None:
            raise Unsupported(node, "not an op the importer knows")
        try:
            outputs = handler(node)
        except (Unsupported, ModelError):
            raise
        except NODE_ERRORS as error:
            raise ModelError(f"{at(node)}: its inputs or attributes are not what {node.op_type} takes "
                             f"({type(error).__name__}: {str(error)[:200]})") from None
        for name, value in zip(node.output, outputs if isinstance(outputs, list) else [outputs]):
            if name:
                if isinstance(value, Pointwise):
                    value.name = name
                self.values[name] = value

    def initializer(self, init):
        """An initializer's values, its dims checked against its data and what the device holds."""
        if init.data_type not in onnx.mapping.TENSOR_TYPE_TO_NP_TYPE or init.data_type == onnx.TensorProto.STRING:
            raise ModelError(f"initializer '{init.name}': ONNX data type {init.data_type} is not numeric")
        dims = list(init.dims)
        if any(d < 0 for d in dims) or math.prod(dims) * 4 > self.limit:
            raise ModelError(f"initializer '{init.name}': dims {dims}; expected non-negative dims of at most "
                             f"{self.limit // 4:,} values (what the device holds)")
        try:
            return self.array(numpy_helper.to_array(init), init.data_type)
        except (TypeError, ValueError) as error:
            raise ModelError(f"initializer '{init.name}': its data does not hold dims {dims} "
                             f"({type(error).__name__})") from None

    @staticmethod
    def array(value, data_type):
        return value.astype(np.float32) if data_type in ONNX_FLOAT else value

    @staticmethod
    def static_shape(value_info, limit=DEVICE_BYTES):
        """The static shape of a model input of FP32 values, checked against what the device holds."""
        kind = value_info.type.tensor_type
        dims = []
        for d in kind.shape.dim:
            if not d.HasField("dim_value") or d.dim_value < 0:
                raise ModelError(f"input '{value_info.name}' has a dimension '{d.dim_param or '?'}' without a "
                                 f"static size")
            if d.dim_value == 0:
                raise ModelError(f"input '{value_info.name}' has a dimension of 0 (an empty input)")
            dims.append(d.dim_value)
        if math.prod(dims) * 4 > limit:
            raise ModelError(f"input '{value_info.name}' of shape {tuple(dims)} is {math.prod(dims) * 4:,} bytes of "
                             f"FP32 values; the device holds {limit:,}")
        return tuple(dims)

    def claim(self, node, shape, itemsize=8):
        """Refuse a constant of `shape` (items of `itemsize` bytes) the node would compute when it is larger
        than the device holds, before it is allocated."""
        dims = [int(d) for d in shape]
        if any(d < 0 for d in dims):
            raise ModelError(f"{at(node)}: a negative dimension in "
                             f"shape {tuple(dims)}")
        if math.prod(dims) * itemsize > self.limit:
            raise ModelError(f"{at(node)}: a constant of shape "
                             f"{tuple(dims)} ({math.prod(dims):,} values) is larger than the device holds "
                             f"({self.limit:,} bytes)")
        return tuple(dims)

    def axis(self, node, a, rank, what="axis"):
        """An axis attribute or input in -rank..rank-1, as a non-negative axis."""
        if not -rank <= int(a) < max(rank, 1):
            raise ModelError(f"{at(node)}: {what} {int(a)} is out of "
                             f"range for rank {rank} (expected {-rank}..{rank - 1})")
        return int(a) % max(rank, 1)

    def weight_inputs(self):
        """Graph inputs read where the importer needs a constant: a weight, a bias, a LayerNorm's scale or bias."""
        slots = {"MatMul": (1,), "Gemm": (1, 2), "LayerNormalization": (1, 2)}
        found = {}
        for node in self.model.graph.node:
            for k in slots.get(node.op_type, ()):
                if k < len(node.input) and node.input[k]:
                    found[node.input[k]] = f"input {k} of {at(node)}"
        return found

    def finish_output(self, name):
        """The model output `name` as an output tensor of the graph, read out on the host when it is a
        selection of that tensor's elements."""
        value = self.values.get(name)
        node = onnx.helper.make_node("Identity", [name], [name], name=f"output {name}")
        if value is None:
            raise ModelError(f"output '{name}' is not computed by any node")
        if isinstance(value, np.ndarray):
            raise Unsupported(node, "the output is a constant")
        t = self.materialize(node, value)
        if t.view.tensor in self.host_inputs:
            t = self.host_layout(t)
        entry = self.entry(t.view.tensor)
        if entry["role"] in ("input", "output"):
            copy = self.tensor(name, entry["rows"], entry["cols"], "activation")
            self.op("copy", [entry["name"]], copy)
            t, entry = Tensor(View(copy, t.view.axes, t.view.offset)), self.entry(copy)
        entry["role"] = "output"
        places = t.view.element_indices().reshape(-1)
        whole = np.array_equal(places, np.arange(entry["rows"] * entry["cols"]))
        self.readouts[name] = (entry["name"], None if whole else t.view)

    def host_layout(self, t):
        """A view of a model input as an input of its own, laid out as the view (rows of its last axis):
        the host rearranges the model's input into it."""
        source, indices = self.host_inputs[t.view.tensor]
        shape = t.view.shape or (1,)
        rows, cols = int(np.prod(shape[:-1])), shape[-1]
        name = self.tensor(f"{source}_as_{'x'.join(map(str, shape))}", rows, cols, "input")
        self.host_inputs[name] = (source, indices.reshape(-1)[t.view.element_indices()].reshape(rows, cols))
        return Tensor(View.whole(name, shape))

    def readable(self, node, t):
        """t, or when it is a view of a model input that a row-wise op cannot read, that view laid out on the host."""
        rows, cols = self.shape_of(t.view.tensor)
        if t.view.over_rows(cols) is None and t.view.tensor in self.host_inputs:
            return self.host_layout(t)
        return t

    # ---- constants, shapes and views ----------------------------------

    def attr(self, node, name, default=None):
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def folded(self, node, f, what):
        """f(*inputs) when every given input is a constant; else Unsupported (what: the reason)."""
        inputs = [self.const(node, k) if node.input[k] else None for k in range(len(node.input))]
        if any(x is None and node.input[k] for k, x in enumerate(inputs)):
            raise Unsupported(node, what)
        return f(*inputs)

    def op_Constant(self, node):
        if len(node.attribute) != 1:
            raise ModelError(f"{at(node)}: {len(node.attribute)} attributes; "
                             f"a Constant has one")
        a = node.attribute[0]
        if a.name == "value":
            self.claim(node, a.t.dims, 8)
            return self.array(numpy_helper.to_array(a.t), a.t.data_type)
        kinds = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64, "value_ints": np.int64}
        if a.name not in kinds:
            raise Unsupported(node, f"a Constant given by '{a.name}'")
        return np.array(onnx.helper.get_attribute_value(a), dtype=kinds[a.name])

    def op_Identity(self, node):
        return self.value(node, 0)

    def op_Dropout(self, node):
        if len(node.output) > 1 and node.output[1]:
            raise Unsupported(node, "its mask output is read (inference has no dropout mask)")
        training = self.const(node, 2)
        if training is not None and bool(training):
            raise Unsupported(node, "training_mode is true")
        return self.value(node, 0)

    def op_Shape(self, node):
        shape = self.shape(node, self.value(node, 0))
        return np.array(shape[self.attr(node, "start", 0):self.attr(node, "end", None)], dtype=np.int64)

    def op_ConstantOfShape(self, node):
        value = self.attr(node, "value")
        fill = numpy_helper.to_array(value).reshape(-1)[0] if value is not None else np.float32(0)
        return self.folded(node, lambda shape: np.full(self.claim(node, shape.reshape(-1)), fill), "a non-constant shape")

    def op_Cast(self, node):
        x, to = self.value(node, 0), self.attr(node, "to")
        if to not in onnx.mapping.TENSOR_TYPE_TO_NP_TYPE or to in (onnx.TensorProto.STRING,):
            raise ModelError(f"{at(node)}: 'to' {to} is not an ONNX numeric type")
        if isinstance(x, np.ndarray):
            return x.astype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[to])
        if to not in ONNX_FLOAT:
            raise Unsupported(node, "a cast of a tensor to a type that is not floating point")
        return x

    def broadcast(self, node, f):
        """f of constant inputs broadcast together, its size checked first."""
        def checked(*inputs):
            self.claim(node, np.broadcast_shapes(*(x.shape for x in inputs)))
            return f(*inputs)
        return checked

    def op_Equal(self, node):
        return self.folded(node, self.broadcast(node, np.equal), "a comparison of tensors (only of constants)")

    def op_Where(self, node):
        return self.folded(node, self.broadcast(node, np.where), "a selection between tensors (only between constants)")

    def op_Range(self, node):
        def arange(start, limit, delta):
            if any(v.size != 1 for v in (start, limit, delta)) or float(delta) == 0:
                raise ModelError(f"{at(node)}: start, limit and delta must be "
                                 f"scalars and delta not 0")
            self.claim(node, (max(math.ceil((float(limit) - float(start)) / float(delta)), 0),))
            return np.arange(start.reshape(()), limit.reshape(()), delta.reshape(()))
        return self.folded(node, arange, "a range with bounds that are not constants")

    def op_Concat(self, node):
        axis = self.attr(node, "axis")
        parts = [self.value(node, k) for k in range(len(node.input))]
        if all(isinstance(p, np.ndarray) for p in parts):
            self.claim(node, (sum(p.size for p in parts),))
            return np.concatenate(parts, axis=axis)
        if len(parts) == 2 and isinstance(parts[0], np.ndarray) and isinstance(parts[1], Tensor):
            return self.prepend_rows(node, parts[0], parts[1], axis)
        raise Unsupported(node, "a concatenation of tensors (only of constants and shapes, or constant rows put "
                                "before each image's tokens: a class token)")

    def prepend_rows(self, node, rows_before, t, axis):
        """[constant rows; t] along the token axis of t [images, tokens, width]: a class token.  t must be
        a matmul's whole result from an input the host lays out (a patch embedding): the input gets that
        many zero rows first in each image, so the matmul gives them its bias, and the constant less the
        bias is added later (Shifted, joined with the position embedding's add)."""
        shape = t.view.shape
        axis %= max(len(shape), 1)
        tensor = t.view.tensor
        made = self.ops[self.producer[tensor]] if tensor in self.producer else None
        rows, cols = self.shape_of(tensor)
        whole = np.array_equal(t.view.element_indices().reshape(-1), np.arange(rows * cols))
        source = made["inputs"][0] if made and made["op"] == "matmul" else None
        host = self.ops[self.producer[source]]["inputs"][0] if source in self.producer and \
            self.ops[self.producer[source]]["op"] == "cast" else source
        if len(shape) != 3 or axis != 1 or not whole or host not in self.host_inputs or self.read_by_ops(tensor) or \
                self.readers.get(host) != 1 or len(rows_before.shape) != 3:
            raise Unsupported(node, "a concatenation of constant rows with a tensor that is not a whole matmul "
                                    "result of a host-laid input (a patch embedding)")
        images, tokens, width = shape
        extra = rows_before.shape[1]
        if rows_before.shape[0] not in (1, images) or rows_before.shape[2] != width:
            raise Unsupported(node, f"a class token of shape {rows_before.shape} for {shape}")
        source_name, indices = self.host_inputs[host]
        per = indices.reshape(images, tokens, -1)
        zeros = np.full((images, extra, per.shape[2]), -1, dtype=np.int64)
        self.host_inputs[host] = (source_name, np.concatenate([zeros, per], axis=1).reshape(images * (tokens + extra), -1))
        for name in {host, source, tensor}:
            self.entry(name)["rows"] = images * (tokens + extra)
        bias = self.params[made["inputs"][2]].reshape(-1) if len(made["inputs"]) > 2 else np.zeros(width, np.float32)
        shift = np.zeros((images, tokens + extra, width), np.float32)
        shift[:, :extra] = np.broadcast_to(rows_before, (images, extra, width)) - bias
        grown = Tensor(View.whole(tensor, (images, tokens + extra, width)))
        return Shifted(grown, shift)

    def op_Expand(self, node):
        def expand(x, shape):
            shape = self.claim(node, np.broadcast_shapes(x.shape, self.claim(node, shape.reshape(-1))))
            return np.broadcast_to(x, shape).copy()
        return self.folded(node, expand, "an expansion of a tensor (only of constants)")

    def reshape(self, node, x, shape):
        if isinstance(x, np.ndarray):
            return x.reshape(shape)
        return self.on_view(node, x, lambda v: v.reshape(shape))

    def op_Reshape(self, node):
        x, shape = self.value(node, 0), self.const(node, 1)
        if shape is None:
            raise Unsupported(node, "its shape is not a constant")
        old, new = self.shape(node, x), [int(d) for d in shape]
        for i, d in enumerate(new):
            if d == 0 and not self.attr(node, "allowzero", 0):
                new[i] = old[i]
        known = math.prod(d for d in new if d != -1)
        if new.count(-1) > 1 or any(d < -1 for d in new) or (-1 in new and known == 0):
            raise ModelError(f"{at(node)}: shape {shape.tolist()} for an input "
                             f"of shape {tuple(old)}")
        if -1 in new:
            new[new.index(-1)] = math.prod(old) // known
        if math.prod(new) != math.prod(old):
            raise ModelError(f"{at(node)}: shape {shape.tolist()} does not hold "
                             f"the {math.prod(old):,} values of shape {tuple(old)}")
        return self.reshape(node, x, tuple(new))

    def op_Flatten(self, node):
        x = self.value(node, 0)
        shape = self.shape(node, x)
        axis = self.axis(node, self.attr(node, "axis", 1), len(shape) + 1)
        return self.reshape(node, x, (int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))))

    def op_Transpose(self, node):
        x = self.value(node, 0)
        rank = len(self.shape(node, x))
        perm = self.attr(node, "perm", list(reversed(range(rank))))
        if sorted(perm) != list(range(rank)):
            raise ModelError(f"{at(node)}: perm {list(perm)} is not a "
                             f"permutation of the {rank} axes")
        return x.transpose(perm) if isinstance(x, np.ndarray) else self.on_view(node, x, lambda v: v.transpose(perm))

    def axes_of(self, node, k):
        if k < len(node.input) and node.input[k]:
            axes = self.const(node, k)
            if axes is None:
                raise Unsupported(node, "its axes are not a constant")
            return [int(a) for a in axes]
        return [int(a) for a in self.attr(node, "axes", [])]

    def op_Unsqueeze(self, node):
        x = self.value(node, 0)
        axes = self.axes_of(node, 1)
        rank = len(self.shape(node, x)) + len(axes)
        axes = sorted(self.axis(node, a, rank, "axis") for a in axes)
        if len(set(axes)) != len(axes):
            raise ModelError(f"{at(node)}: axes {axes} repeat an axis")
        if isinstance(x, np.ndarray):
            return np.expand_dims(x, tuple(axes))
        for a in axes:
            x = self.on_view(node, x, lambda v, a=a: v.unsqueeze(a))
        return x

    def op_Squeeze(self, node):
        x = self.value(node, 0)
        shape = self.shape(node, x)
        axes = sorted({self.axis(node, a, len(shape)) for a in self.axes_of(node, 1) or
                       [i for i, d in enumerate(shape) if d == 1]}, reverse=True)
        if any(shape[a] != 1 for a in axes):
            raise ModelError(f"{at(node)}: axes {axes} of shape {tuple(shape)} "
                             f"are not all of size 1")
        if isinstance(x, np.ndarray):
            return np.squeeze(x, tuple(axes))
        for a in axes:
            x = self.on_view(node, x, lambda v, a=a: v.squeeze(a))
        return x

    def op_Slice(self, node):
        x = self.value(node, 0)
        shape = self.shape(node, x)
        starts, ends, axes, steps = (self.const(node, k) for k in range(1, 5))
        if starts is None or ends is None or (len(node.input) > 3 and node.input[3] and axes is None) or \
                (len(node.input) > 4 and node.input[4] and steps is None):
            raise Unsupported(node, "its starts, ends, axes or steps are not constants")
        axes = range(len(starts)) if axes is None else [self.axis(node, a, len(shape)) for a in axes]
        if len(ends) != len(starts) or len(axes) != len(starts) or (steps is not None and len(steps) != len(starts)):
            raise ModelError(f"{at(node)}: starts, ends, axes and steps of "
                             f"different lengths")
        steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
        if isinstance(x, np.ndarray):
            index = [slice(None)] * len(shape)
            for a, lo, hi, step in zip(axes, starts, ends, steps):
                index[a] = slice(int(lo), int(hi), step)
            return x[tuple(index)]
        for a, lo, hi, step in zip(axes, starts, ends, steps):
            if step != 1:
                raise Unsupported(node, f"step {step} on a tensor (step 1 only)")
            lo, hi, _ = slice(int(lo), int(hi)).indices(shape[a])
            x = self.on_view(node, x, lambda v, a=a, lo=lo, hi=hi: v.slice(a, lo, hi))
        return x

    def op_Split(self, node):
        x = self.value(node, 0)
        shape = self.shape(node, x)
        axis = self.axis(node, self.attr(node, "axis", 0), len(shape))
        split = self.const(node, 1)
        if split is None:
            split = self.attr(node, "split") or [shape[axis] // len(node.output)] * len(node.output)
        bounds = [int(b) for b in np.cumsum([0] + [int(s) for s in split])]
        if isinstance(x, np.ndarray):
            return [np.take(x, range(lo, hi), axis=axis) for lo, hi in zip(bounds[:-1], bounds[1:])]
        return [self.on_view(node, x, lambda v, lo=lo, hi=hi: v.slice(axis, lo, hi))
                for lo, hi in zip(bounds[:-1], bounds[1:])]

    def op_Gather(self, node):
        x, index = self.value(node, 0), self.const(node, 1)
        if isinstance(self.value(node, 1), Iteration):
            if not isinstance(x, np.ndarray) or x.ndim == 0 or self.attr(node, "axis", 0) != 0 or \
                    len(x) != self.iterations:
                raise Unsupported(node, f"a Gather by the Loop's iteration number of anything but a constant of "
                                        f"{self.iterations} members along axis 0")
            member = np.ascontiguousarray(x[0]).view(Members)
            member.stacked = x
            return member
        if index is None:
            raise Unsupported(node, "its indices are not a constant")
        shape = self.shape(node, x)
        axis = self.axis(node, self.attr(node, "axis", 0), len(shape))
        if index.dtype.kind not in "iu" or ((index < -shape[axis]) | (index >= shape[axis])).any():
            raise ModelError(f"{at(node)}: indices {index.reshape(-1)[:8].tolist()} "
                             f"outside -{shape[axis]}..{shape[axis] - 1} (axis {axis} of shape {tuple(shape)})")
        if isinstance(x, np.ndarray):
            self.claim(node, index.shape + x.shape[:axis] + x.shape[axis + 1:])
            return np.take(x, index, axis=axis)
        if index.ndim != 0:
            raise Unsupported(node, "indices that are not one scalar, on a tensor")
        return self.on_view(node, x, lambda v: v.index(axis, int(index) % shape[axis]))

    # ---- pointwise arithmetic and the LayerNorm pattern ---------------

    @staticmethod
    def extend(x, f, step):
        if isinstance(x, Pointwise):
            return Pointwise(x.x, lambda s, g=x.f: f(g(s)), x.steps + [step])
        return Pointwise(x, f, [step])

    def unary(self, node, f, step):
        x = self.value(node, 0)
        if isinstance(x, np.ndarray):
            return f(x).astype(x.dtype)
        if not isinstance(x, (Tensor, Pointwise)):
            raise Unsupported(node, "a step the LayerNorm pattern does not take")
        return self.extend(x, f, step)

    def op_Neg(self, node):
        return self.unary(node, np.negative, "neg")

    def op_Erf(self, node):
        return self.unary(node, np.vectorize(math.erf, otypes=[np.float64]), "erf")

    def op_Tanh(self, node):
        return self.unary(node, np.tanh, "tanh")

    def op_Sqrt(self, node):
        x = self.value(node, 0)
        if isinstance(x, Normalized) and x.stage == "variance+eps":
            return Normalized(x.x, "std", x.epsilon)
        return self.unary(node, np.sqrt, "sqrt")

    def op_ReduceMean(self, node):
        x = self.value(node, 0)
        axes, keep = self.axes_of(node, 1), self.attr(node, "keepdims", 1)
        if isinstance(x, np.ndarray):
            return np.mean(x, axis=tuple(axes) if axes else None, keepdims=bool(keep))
        rank = len(self.shape(node, x))
        if [self.axis(node, a, rank) for a in axes] != [rank - 1] or not keep:
            raise Unsupported(node, "a mean over other than the last axis (the importer reads it in a LayerNorm)")
        if isinstance(x, Normalized) and x.stage == "squared":
            return Normalized(x.x, "variance")
        if isinstance(x, Tensor):
            return Mean(x)
        raise Unsupported(node, "a mean of a value under way (the importer reads it in a LayerNorm)")

    def op_Pow(self, node):
        x, p = self.value(node, 0), self.const(node, 1)
        if p is None or p.size != 1:
            raise Unsupported(node, "a power by a non-constant")
        if isinstance(x, Normalized) and x.stage == "centered" and float(p) == 2.0:
            return Normalized(x.x, "squared")
        return self.unary(node, lambda s, e=float(p): np.power(s, e), f"^{float(p):g}")

    def op_Sub(self, node):
        a, b = self.value(node, 0), self.value(node, 1)
        if isinstance(b, Mean) and b.x is a:
            return Normalized(a, "centered")
        return self.arith(node, a, b, np.subtract, "-")

    def op_Div(self, node):
        a, b = self.value(node, 0), self.value(node, 1)
        if isinstance(a, Normalized) and a.stage == "centered" and isinstance(b, Normalized) and \
                b.stage == "std" and b.x is a.x:
            return Normalized(a.x, "normalized", b.epsilon)
        return self.arith(node, a, b, np.divide, "/")

    def op_Mul(self, node):
        a, b = self.value(node, 0), self.value(node, 1)
        k = 1
        if isinstance(b, Normalized):
            a, b, k = b, a, 0
        if isinstance(a, Normalized) and a.stage == "normalized" and isinstance(b, np.ndarray):
            return Normalized(a.x, "scaled", a.epsilon, gamma=(b, node.input[k]))
        return self.arith(node, a, b, np.multiply, "*")

    def op_Add(self, node):
        a, b = self.value(node, 0), self.value(node, 1)
        k = 1
        if isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
            a, b, k = b, a, 0
        if isinstance(a, Normalized) and isinstance(b, np.ndarray):
            if a.stage == "variance" and b.size == 1:
                return Normalized(a.x, "variance+eps", float(b.reshape(-1)[0]))
            if a.stage in ("normalized", "scaled"):
                return self.layernorm(node, a, (b, node.input[k]))
        if isinstance(a, Shifted) and isinstance(b, np.ndarray):
            return self.add_constant(node, a.x, a.constant + b, node.input[k])
        if isinstance(a, (Tensor, Pointwise)) and isinstance(b, np.ndarray) and b.size > 1:
            return self.add_constant(node, self.materialize(node, a), b, node.input[k])
        if isinstance(a, (Tensor, Pointwise)) and isinstance(b, (Tensor, Pointwise)) and \
                self.variable(a) is not self.variable(b):
            return self.add_tensors(node, self.materialize(node, a), self.materialize(node, b))
        return self.arith(node, a, b, np.add, "+")

    @staticmethod
    def variable(x):
        return x.x if isinstance(x, Pointwise) else x

    def arith(self, node, a, b, f, step):
        """f(a, b): of constants; of a tensor (or a pointwise function of one) and a scalar; or of two
        pointwise functions of one tensor."""
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            self.claim(node, np.broadcast_shapes(a.shape, b.shape))
            return f(a, b).astype(np.result_type(a, b))
        if isinstance(a, Scores) and not a.softmax and isinstance(b, np.ndarray) and b.size == 1 and step in "*/":
            c = float(b.reshape(-1)[0])  # (q c) k^T = c (q k^T): the scale moves to the queries
            return Scores(self.extend(a.q, lambda s, c=c: f(s, c), f"{step}{c:g}"), a.k)
        for x, c, swap in ((a, b, False), (b, a, True)):
            if isinstance(x, (Tensor, Pointwise)) and isinstance(c, np.ndarray) and c.size == 1:
                c = float(c.reshape(-1)[0])
                return self.extend(x, (lambda s, c=c: f(c, s)) if swap else (lambda s, c=c: f(s, c)),
                                   f"{c:g}{step}" if swap else f"{step}{c:g}")
        if step == "*" and isinstance(a, np.ndarray) and isinstance(b, Tensor):
            a, b = b, a
        if step == "*" and isinstance(a, Tensor) and isinstance(b, np.ndarray):
            return self.scale_matmul(node, a, b)
        if isinstance(a, (Tensor, Pointwise)) and isinstance(b, (Tensor, Pointwise)) and \
                self.variable(a) is self.variable(b):
            ga = a.f if isinstance(a, Pointwise) else (lambda s: s)
            gb = b.f if isinstance(b, Pointwise) else (lambda s: s)
            steps = (a.steps if isinstance(a, Pointwise) else ["x"]) + [step]
            return Pointwise(self.variable(a), lambda s: f(ga(s), gb(s)), steps)
        raise Unsupported(node, f"'{step}' of these operands (a tensor with a constant that is not a scalar, or "
                                f"two different tensors)")

    # ---- graph ops ------------------------------------------------------

    def scale_matmul(self, node, t, scale):
        """t * scale (a scalar, or one factor per column) folded into the matmul that made t: its weight's
        columns (and its bias) scaled, when t is all that matmul made and no op reads it yet."""
        tensor = t.view.tensor
        rows, cols = self.shape_of(tensor)
        made = self.ops[self.producer[tensor]] if tensor in self.producer else None
        try:
            factor = np.broadcast_to(np.asarray(scale, np.float32), t.view.shape)
        except ValueError:
            factor = None
        places = t.view.element_indices().reshape(-1)
        if made is None or made["op"] != "matmul" or self.read_by_ops(tensor) or factor is None or \
                len(places) != rows * cols or any(self.entry(i)["sequence"] > 1 for i in made["inputs"][1:]):
            raise Unsupported(node, "a multiplication by a constant of a tensor that is not a matmul's whole "
                                    "result read by nothing else (where it folds into the weights)")
        laid = np.zeros(rows * cols, np.float32)
        laid[places] = factor.reshape(-1)
        per_column = laid.reshape(rows, cols)
        if not np.array_equal(per_column, np.broadcast_to(per_column[:1], per_column.shape)):
            raise Unsupported(node, "a multiplication by a constant that differs along a tensor's rows")
        for name in made["inputs"][1:]:  # the weight [K x N] and the bias [1 x N]: scaled per output column
            self.params[name] = self.params[name] * per_column[0]
        return t
    def layernorm(self, node, n, beta):
        """The LayerNorm n, ended by its bias: (values, name)."""
        x = self.readable(node, self.materialize(node, n.x))
        _, _, cols = self.rows_of(node, x)
        gamma = n.gamma or (np.ones(cols, np.float32), None)
        if gamma[0].size != cols or beta[0].size != cols:
            raise Unsupported(node, f"a LayerNorm scale or bias of {gamma[0].size} and {beta[0].size} values for "
                                    f"{cols} columns")
        g = self.tensor(gamma[1] or f"{node.output[0]}_gamma", 1, cols, "parameter", values=gamma[0])
        b = self.tensor(beta[1] or f"{node.output[0]}_beta", 1, cols, "parameter", values=beta[0])
        return self.row_op(node, "layernorm", x, [g, b], node.output[0], epsilon=n.epsilon)

    def op_LayerNormalization(self, node):
        if any(node.output[1:]):
            raise Unsupported(node, "its Mean and InvStdDev outputs are read (the importer computes Y only)")
        x = self.value(node, 0)
        shape = self.shape(node, x)
        axis = self.axis(node, self.attr(node, "axis", -1), len(shape))
        gamma, beta = self.const(node, 1), self.const(node, 2)
        if gamma is None or (len(node.input) > 2 and node.input[2] and beta is None):
            raise Unsupported(node, "its scale or bias is not a constant")
        width = int(np.prod(shape[axis:]))
        def flat(c):
            try:
                return c.reshape(-1) if c.size == width else np.broadcast_to(c, shape[axis:]).reshape(-1)
            except ValueError:
                raise Unsupported(node, f"a scale or bias of shape {c.shape} for normalized shape "
                                        f"{shape[axis:]}") from None
        gamma, beta = flat(gamma), np.zeros(width, np.float32) if beta is None else flat(beta)
        x = self.reshape(node, x, tuple(shape[:axis]) + (width,)) if axis else self.reshape(node, x, (1, width))
        n = Normalized(x, "scaled", float(self.attr(node, "epsilon", 1e-5)), gamma=(gamma, node.input[1]))
        out = self.layernorm(node, n, (beta, node.input[2] if len(node.input) > 2 and node.input[2] else None))
        return self.reshape(node, out, shape)

    def op_Loop(self, node):
        """A Loop with a constant trip count and no condition, one carried value and no scan outputs:
        the graph's Repeat (its body ops run that many times), the carried value a tensor of its own
        (the body graph's input name), each parameter the body Gathers by the iteration number a
        sequence of one member per iteration."""
        body = self.attr(node, "body")
        trips = self.const(node, 0)
        if self.ops_repeat is not None:
            raise Unsupported(node, "a second Loop (the workload graph has one Repeat)")
        if trips is None or trips.size != 1 or (len(node.input) > 1 and node.input[1]) or len(node.input) != 3 or \
                len(node.output) != 1 or len(body.input) != 3 or len(body.output) != 2:
            raise Unsupported(node, "a Loop other than a constant trip count over one carried value (no "
                                    "condition, no scan outputs)")
        init = self.materialize(node, self.value(node, 2))
        tensor, rows, cols = self.rows_of(node, init)
        if not np.array_equal(init.view.element_indices().reshape(-1), np.arange(rows * cols)):
            raise Unsupported(node, "a Loop whose initial value is not a whole tensor")
        if trips.dtype.kind not in "iu" or int(trips.reshape(-1)[0]) < 1:
            raise ModelError(f"{at(node)}: trip count {trips.reshape(-1)[0]} is not "
                             f"a positive integer")
        self.iterations = int(trips.reshape(-1)[0])
        carried = self.tensor(body.input[2].name, rows, cols, "activation")
        self.values[body.input[0].name] = Iteration()
        self.values[body.input[1].name] = np.array(True)
        self.values[body.input[2].name] = Tensor(View(carried, init.view.axes, 0))
        first = len(self.ops)
        for inner in body.node:
            self.visit(inner)
        last = self.materialize(node, self.values[body.output[1].name])
        if not np.array_equal(last.view.element_indices(), init.view.element_indices()) or \
                self.shape_of(last.view.tensor) != (rows, cols):
            raise Unsupported(node, "a Loop whose carried value comes back in another layout")
        self.ops_repeat = {"first_op": first, "op_count": len(self.ops) - first, "iterations": self.iterations,
                           "carried": carried, "carried_next": last.view.tensor, "carried_init": tensor}
        return Tensor(View(last.view.tensor, init.view.axes, 0))

    def map_pool(self, node, q, k, v, scale):
        """softmax(q k^T) v with one query row shared by every image ([1, H, 1, d]) over the heads of one
        fused [B*S x 2C] [k | v] projection: one map_pool op, its [B x C] result viewed as [B, H, 1, d]."""
        kv = k.view.tensor
        rows, cols = self.shape_of(kv)
        q_rows, c = self.shape_of(q.view.tensor)
        shape = v.view.shape
        if len(shape) != 4 or q_rows != 1 or cols != 2 * c or q.view.shape[0] != 1 or q.view.shape[2] != 1:
            raise Unsupported(node, f"attention pooling of a query {q.view.shape} over {shape} (expected one query "
                                    f"row [1, heads, 1, head width] and [k | v] of twice its width)")
        images, heads, seq, d = shape
        if heads * d != c or images * seq != rows or not np.isclose(scale, 1 / math.sqrt(d), rtol=1e-5):
            raise Unsupported(node, f"attention pooling of {shape} with {c} query columns, scaled by {scale:g}")
        b, h, t, e = np.meshgrid(np.arange(images), np.arange(heads), np.arange(seq), np.arange(d), indexing="ij")
        place = (b * seq + t) * cols + h * d + e
        expect_q = (np.arange(heads)[:, None] * d + np.arange(d)).reshape(1, heads, 1, d)
        if not (np.array_equal(q.view.element_indices(), expect_q) and
                np.array_equal(k.view.element_indices(), np.swapaxes(place, -1, -2)) and
                np.array_equal(v.view.element_indices(), place + c)):
            raise Unsupported(node, "attention pooling whose query, keys and values are not the heads of the "
                                    "query row and of one [k | v] projection")
        out = self.tensor(node.output[0], images, c, "activation")
        self.op("map_pool", [q.view.tensor, kv], out, heads=heads, head_dim=d, seq=seq)
        return Tensor(View(out, [((images, c),), ((heads, d),), ((1, 0),), ((d, 1),)]))

    def op_Conv(self, node):
        """A convolution whose stride is its kernel (a patch embedding) of a model input: the host cuts
        the input into patches, one row each, and the convolution is a matmul over them."""
        x, w, b = self.value(node, 0), self.const(node, 1), self.const(node, 2)
        kernel = tuple(self.attr(node, "kernel_shape", w.shape[2:] if w is not None else ()))
        if w is None or (len(node.input) > 2 and node.input[2] and b is None):
            raise Unsupported(node, "a convolution whose weight or bias is not a constant")
        if not isinstance(x, Tensor) or x.view.tensor not in self.host_inputs or len(w.shape) != 4:
            raise Unsupported(node, "a convolution of anything but a model input (2-D, as a patch embedding)")
        strides, pads = tuple(self.attr(node, "strides", (1, 1))), tuple(self.attr(node, "pads", (0, 0, 0, 0)))
        if strides != kernel or any(pads) or self.attr(node, "group", 1) != 1 or \
                any(d != 1 for d in self.attr(node, "dilations", (1, 1))) or \
                self.attr(node, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
            raise Unsupported(node, f"a convolution with strides {strides}, kernel {kernel}, pads {pads}: only "
                                    f"one whose stride is its kernel, no padding, dilation or groups (a patch "
                                    f"embedding)")
        images, channels, height, width = x.view.shape
        kh, kw = kernel
        if height % kh or width % kw or w.shape[1] != channels:
            raise Unsupported(node, f"a {kh}x{kw} patch embedding of a {height}x{width} image with {channels} "
                                    f"channels (weight {w.shape})")
        p, q, out = height // kh, width // kw, w.shape[0]
        source, indices = self.host_inputs[x.view.tensor]
        picked = indices.reshape(-1)[x.view.element_indices()]
        patches = picked.reshape(images, channels, p, kh, q, kw).transpose(0, 2, 4, 1, 3, 5)
        name = self.tensor(f"{source}_patches", images * p * q, channels * kh * kw, "input")
        self.host_inputs[name] = (source, patches.reshape(images * p * q, channels * kh * kw))
        rows = Tensor(View.whole(name, (images * p * q, channels * kh * kw)))
        product = self.matmul(node, rows, w.reshape(out, -1).T.copy(), node.input[1], node.output[0],
                              None if b is None else b.reshape(-1), node.input[2] if b is not None else None)
        view = View(product.view.tensor, [((images, p * q * out),), ((out, 1),), ((p, q * out),), ((q, out),)])
        return Tensor(view)

    def op_MatMul(self, node):
        a, w = self.value(node, 0), self.const(node, 1)
        if isinstance(a, np.ndarray) and w is not None and a.ndim == 2:
            # Two constants (a learned query and its projection): computed on the device, as written.
            fp8 = self.precision == "fp8"
            param = self.tensor(node.input[0], a.shape[0], a.shape[1], "parameter", "f143" if fp8 else "f16",
                                WEIGHT_SCALE if fp8 else 0, a)
            return self.matmul(node, Tensor(View.whole(param, a.shape)), w, node.input[1], node.output[0])
        if w is None:
            b = self.value(node, 1)
            if isinstance(a, Scores) and a.softmax and isinstance(b, Tensor):
                return self.attention(node, a, b)
            if isinstance(a, (Tensor, Pointwise)) and isinstance(b, Tensor):
                return Scores(a, b)
            raise Unsupported(node, "a product of two tensors outside the attention pattern (q k^T, softmax, "
                                    "then . v)")
        return self.matmul(node, self.materialize(node, a), w, node.input[1], node.output[0])

    def op_Softmax(self, node):
        x = self.value(node, 0)
        rank = len(self.shape(node, x))
        if not isinstance(x, Scores) or x.softmax or self.attr(node, "axis", -1) % rank != rank - 1:
            raise Unsupported(node, "a softmax other than over the keys of an attention's scores (the "
                                    "importer reads Softmax inside attention)")
        return Scores(x.q, x.k, softmax=True)

    def attention(self, node, scores, v):
        """softmax(q k^T) v, q scaled by 1/sqrt(d), with q, k and v the head slices of one fused
        [B*S x 3C] tensor as the attention op reads it: one attention op, its [B*S x C] result
        viewed as the [B*H, S, d] (or [B, H, S, d]) product."""
        q = scores.q
        scale = 1.0
        if isinstance(q, Pointwise):
            scale = float(q.f(np.float64(1.0)))
            if not np.allclose(q.f(SAMPLES), scale * SAMPLES, rtol=1e-6, atol=1e-9):
                raise Unsupported(node, f"attention whose queries are transformed by {' '.join(q.steps)} "
                                        f"(a scale only)")
            q = q.x
        k = scores.k
        if q.view.tensor != k.view.tensor and k.view.tensor == v.view.tensor:
            return self.map_pool(node, q, k, v, scale)
        if not (q.view.tensor == k.view.tensor == v.view.tensor):
            raise Unsupported(node, "attention whose q, k and v are not slices of one fused projection")
        tensor = q.view.tensor
        rows, cols = self.shape_of(tensor)
        shape = q.view.shape
        if len(shape) < 3 or cols % 3 or k.view.shape[:-2] != shape[:-2] or v.view.shape != shape:
            raise Unsupported(node, f"attention of shapes {shape}, {k.view.shape}, {v.view.shape}")
        c = cols // 3
        seq, d = shape[-2], shape[-1]
        groups = int(np.prod(shape[:-2]))
        heads = c // d if d and c % d == 0 else 0
        if not heads or groups % heads or groups // heads * seq != rows:
            raise Unsupported(node, f"attention of {shape} over a {rows}x{cols} projection (expected [images x "
                                    f"heads, tokens, head width] with 3 x heads x head width columns)")
        if not np.isclose(scale, 1 / math.sqrt(d), rtol=1e-5):
            raise Unsupported(node, f"attention scaled by {scale:g}, not 1/sqrt({d})")
        images = groups // heads
        b, h, t, e = np.meshgrid(np.arange(images), np.arange(heads), np.arange(seq), np.arange(d), indexing="ij")
        place = (b * seq + t) * cols + h * d + e
        expect_q = place.reshape(shape)
        expect_k = np.swapaxes(place, -1, -2).reshape(k.view.shape) + c
        if not (np.array_equal(q.view.element_indices(), expect_q) and
                np.array_equal(k.view.element_indices(), expect_k) and
                np.array_equal(v.view.element_indices(), expect_q + 2 * c)):
            raise Unsupported(node, "attention whose q, k and v are not the heads of one [q | k | v] projection in "
                                    "the order the attention op reads")
        out = self.tensor(node.output[0], rows, c, "activation")
        self.op("attention", [tensor], out, heads=heads, head_dim=d, seq=seq)
        axes = [((images, seq * c), (heads, d)), ((seq, c),), ((d, 1),)]
        return Tensor(View(out, axes).reshape(shape))

    def op_Gemm(self, node):
        a, w, c = self.value(node, 0), self.const(node, 1), self.const(node, 2)
        if w is None or (len(node.input) > 2 and node.input[2] and c is None):
            raise Unsupported(node, "a product with a weight or bias that is not a constant")
        w = (w.T if self.attr(node, "transB", 0) else w) * np.float32(self.attr(node, "alpha", 1.0))
        c = None if c is None else np.float32(self.attr(node, "beta", 1.0)) * c
        if isinstance(a, np.ndarray):
            a = a.T if self.attr(node, "transA", 0) else a
            return a @ w + (0 if c is None else c)
        x = self.materialize(node, a)
        if self.attr(node, "transA", 0):
            x = self.on_view(node, x, lambda v: v.transpose((1, 0)))
        if c is not None and c.size in (1, w.shape[1]) and (c.ndim < 2 or c.shape[0] == 1):
            return self.matmul(node, x, w, node.input[1], node.output[0], np.broadcast_to(c.reshape(-1), w.shape[1:]),
                               node.input[2])
        out = self.matmul(node, x, w, node.input[1], node.output[0] if c is None else f"{node.output[0]}_product")
        return out if c is None else self.add_constant(node, out, c, node.input[2], fold=False)

    def add_constant(self, node, a, c, c_name, fold=True):
        """a + c for a tensor view a and a constant: the bias of the matmul that made a (when a is all it
        made and nothing else reads it), else an add of a parameter repeating every P rows of a's tensor."""
        a = self.readable(node, a)
        tensor, rows, cols = self.rows_of(node, a)
        try:
            full = np.broadcast_to(c, a.view.shape)
        except ValueError:
            raise Unsupported(node, f"a constant of shape {c.shape} that does not broadcast to "
                                    f"{a.view.shape}") from None
        places = a.view.element_indices().reshape(-1)
        if len(np.unique(places // cols)) != rows or len(places) != rows * cols:
            raise Unsupported(node, "an add to a selection of a tensor's elements")
        laid = np.zeros(rows * cols, np.float32)
        laid[places] = full.reshape(-1)
        laid = laid.reshape(rows, cols)
        period = next(p for p in range(1, rows + 1) if rows % p == 0 and
                      np.array_equal(laid, np.tile(laid[:p], (rows // p, 1))))
        made = self.ops[self.producer[tensor]] if tensor in self.producer else None
        source = node.input[0] if c_name == node.input[1] else node.input[1]
        if fold and period == 1 and made and made["op"] == "matmul" and len(made["inputs"]) == 2 and \
                self.consumers.get(source) == 1 and not self.read_by_ops(tensor):
            bias = c if getattr(c, "stacked", None) is not None and c.size == cols else laid[:1]
            self.add_input(made, self.tensor(c_name, 1, cols, "parameter", values=bias))
            self.rename(tensor, node.output[0])
            return a
        if getattr(c, "stacked", None) is not None:
            raise Unsupported(node, "a per-iteration constant added other than as a matmul's bias")
        param = self.tensor(c_name, period, cols, "parameter", values=laid[:period])
        out = self.tensor(node.output[0], rows, cols, "activation")
        self.op("add", [tensor, param], out)
        return Tensor(View(out, a.view.axes, a.view.offset))

    def add_tensors(self, node, a, b):
        """a + b: two tensors laid out alike, or one (b) a model input the host lays out as a's rows
        (broadcast, repeating every P rows)."""
        if a.view.tensor in self.host_inputs and b.view.tensor not in self.host_inputs:
            a, b = b, a
        a = self.readable(node, a)
        ta, rows, cols = self.rows_of(node, a)
        if b.view.tensor in self.host_inputs and not self.aligned(a, b):
            b = self.broadcast_input(node, a, b, rows, cols)
        b = self.readable(node, b)
        tb = self.rows_of(node, b)[0]
        if not self.aligned(a, b) and not (self.shape_of(tb)[0] < rows and b.view.tensor in self.host_inputs):
            raise Unsupported(node, "an add of two tensors laid out differently")
        out = self.tensor(node.output[0], rows, cols, "activation")
        self.op("add", [ta, tb], out)
        return Tensor(View(out, a.view.axes, a.view.offset))

    def aligned(self, a, b):
        return a.view.shape == b.view.shape and self.shape_of(a.view.tensor) == self.shape_of(b.view.tensor) and \
            np.array_equal(a.view.element_indices(), b.view.element_indices())

    def broadcast_input(self, node, a, b, rows, cols):
        """Model input b broadcast to a's shape, laid out as a's tensor rows hold it, as an input of P rows
        (the smallest period of the rows)."""
        source, indices = self.host_inputs[b.view.tensor]
        try:
            picked = np.broadcast_to(indices.reshape(-1)[b.view.element_indices()], a.view.shape)
        except ValueError:
            raise Unsupported(node, f"shapes {b.view.shape} and {a.view.shape} that do not broadcast") from None
        places = a.view.element_indices().reshape(-1)
        if len(places) != rows * cols or len(np.unique(places)) != rows * cols:
            raise Unsupported(node, "an add to a selection of a tensor's elements")
        laid = np.zeros(rows * cols, np.int64)
        laid[places] = picked.reshape(-1)
        laid = laid.reshape(rows, cols)
        period = next(p for p in range(1, rows + 1) if rows % p == 0 and
                      np.array_equal(laid, np.tile(laid[:p], (rows // p, 1))))
        name = self.tensor(f"{source}_rows", period, cols, "input")
        self.host_inputs[name] = (source, laid[:period])
        return Tensor(View.whole(name, (period, cols)))
