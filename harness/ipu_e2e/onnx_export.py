"""A workload's graph written as ONNX (`ipu-e2e-test --export-onnx DIR`):
DIR/model.onnx (opset 17) and the workload's input values as DIR/input_N.pb,
so that `--model DIR/model.onnx --inputs DIR` builds the workload again.
Each graph op becomes the standard ONNX a framework would export for it:

- matmul: MatMul, and an Add of its bias; cast: nothing (the importer casts
  a matmul's activation itself at --precision fp8);
- layernorm: LayerNormalization; gelu: the tanh form spelled out
  (Pow/Mul/Add/Tanh) or the erf form (Div/Erf/Add/Mul); add: Add (of a
  [P x C] tensor repeating down [n P x C]: through a [n, P, C] Reshape);
- attention: the heads sliced from the fused projection, Reshape and
  Transpose, the queries scaled by 1/sqrt(d), MatMul, Softmax, MatMul, and
  back; map_pool: the same with the one query broadcast over the images;
- the Repeat: a Loop whose body reads each parameter sequence's member with
  a Gather by the iteration number from the sequence stacked as one
  initializer, and carries the carried tensor.

Tensor names stay the graph's, and the model's metadata carries the
workload's name and options (what a package records), so the import gives
the same graph and the same package.
"""
import json
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
NAME_KEY, OPTIONS_KEY = "ipu-e2e.workload", "ipu-e2e.options"


class Exporter:
    def __init__(self, info, values):
        self.info, self.values = info, values
        self.tensors = {t["name"]: t for t in info["tensors"]}
        self.aliases = {}   # a cast's output -> its input (the importer casts again)
        self.counter = 0

    def name(self, tensor):
        return self.aliases.get(tensor, tensor)

    def fresh(self, base):
        self.counter += 1
        return f"{base}/{self.counter}"

    def const(self, nodes, value, dtype=np.float32):
        out = self.fresh("const")
        nodes.append(helper.make_node("Constant", [], [out], value=numpy_helper.from_array(np.asarray(value, dtype))))
        return out

    def op(self, op, nodes):
        kind, inputs, out = op["op"], [self.name(i) for i in op["inputs"]], op["output"]
        if kind == "cast":
            self.aliases[out] = inputs[0]
        elif kind == "copy":
            nodes.append(helper.make_node("Identity", inputs, [out]))
        elif kind == "matmul":
            product = out if len(inputs) == 2 else self.fresh(f"{out}/product")
            nodes.append(helper.make_node("MatMul", inputs[:2], [product]))
            if len(inputs) == 3:
                nodes.append(helper.make_node("Add", [product, inputs[2]], [out]))
        elif kind == "add":
            a, b = (self.tensors[i] for i in op["inputs"])
            if b["rows"] == a["rows"]:
                nodes.append(helper.make_node("Add", inputs, [out]))
            else:  # b's rows repeat down a's (a position embedding for every image): broadcast as [n, P, C]
                grouped = self.fresh(f"{out}/grouped")
                nodes.append(helper.make_node("Reshape", [inputs[0], self.const(
                    nodes, [a["rows"] // b["rows"], b["rows"], a["cols"]], np.int64)], [grouped]))
                nodes.append(helper.make_node("Add", [grouped, inputs[1]], [out]))
                self.aliases[out] = self.fresh(f"{out}/rows")
                nodes.append(helper.make_node("Reshape", [out, self.const(nodes, [a["rows"], a["cols"]], np.int64)],
                                              [self.aliases[out]]))
        elif kind == "layernorm":
            nodes.append(helper.make_node("LayerNormalization", inputs, [out], axis=-1, epsilon=op["epsilon"]))
        elif kind == "gelu":
            self.gelu(nodes, inputs[0], out, op.get("form", "tanh"))
        elif kind == "attention":
            self.attention(nodes, inputs[0], None, out, op)
        elif kind == "map_pool":
            self.attention(nodes, inputs[1], inputs[0], out, op)
        else:
            raise ValueError(f"--export-onnx: op {kind} has no ONNX form here")

    def gelu(self, nodes, x, out, form):
        def node(kind, *inputs):
            made = self.fresh(f"{out}/{kind.lower()}")
            nodes.append(helper.make_node(kind, list(inputs), [made]))
            return made
        if form == "erf":
            inner = node("Erf", node("Div", x, self.const(nodes, math.sqrt(2.0))))
            whole = node("Mul", x, node("Add", inner, self.const(nodes, 1.0)))
        else:
            cube = node("Mul", node("Pow", x, self.const(nodes, 3.0)), self.const(nodes, 0.044715))
            inner = node("Mul", node("Add", x, cube), self.const(nodes, math.sqrt(2 / math.pi)))
            whole = node("Mul", x, node("Add", node("Tanh", inner), self.const(nodes, 1.0)))
        nodes.append(helper.make_node("Mul", [whole, self.const(nodes, 0.5)], [out]))

    def attention(self, nodes, fused, query, out, op):
        """Self-attention of fused [q | k | v] (query None) or MAP pooling of one query over fused [k | v]."""
        heads, d, seq = op["heads"], op["head_dim"], op["seq"]
        rows, width = self.tensors[op["inputs"][-1]]["rows"], heads * d
        images = rows // seq

        def node(kind, inputs, **attributes):
            made = self.fresh(f"{out}/{kind.lower()}")
            nodes.append(helper.make_node(kind, inputs, [made], **attributes))
            return made

        def heads_of(start, perm):
            part = node("Slice", [fused, self.const(nodes, [start], np.int64),
                                  self.const(nodes, [start + width], np.int64), self.const(nodes, [1], np.int64)])
            split = node("Reshape", [part, self.const(nodes, [images, seq, heads, d], np.int64)])
            return node("Transpose", [split], perm=perm)

        base = 0 if query is None else -width
        if query is None:
            q = heads_of(0, [0, 2, 1, 3])
        else:
            q = node("Transpose", [node("Reshape", [query, self.const(nodes, [1, 1, heads, d], np.int64)])],
                     perm=[0, 2, 1, 3])
        k, v = heads_of(base + width, [0, 2, 3, 1]), heads_of(base + 2 * width, [0, 2, 1, 3])
        scaled = node("Mul", [q, self.const(nodes, 1 / math.sqrt(d))])
        probs = node("Softmax", [node("MatMul", [scaled, k])], axis=-1)
        nodes.append(helper.make_node("MatMul", [probs, v], [out]))
        back = node("Transpose", [out], perm=[0, 2, 1, 3])
        shape = [rows, width] if query is None else [images, width]
        self.aliases[out] = node("Reshape", [back, self.const(nodes, shape, np.int64)])

    def model(self):
        info, repeat = self.info, self.info["repeat"]
        body_ops = range(repeat["first_op"], repeat["first_op"] + repeat["op_count"]) if repeat else range(0)
        made_inside = {info["ops"][i]["output"] for i in body_ops} - ({repeat["carried_next"]} if repeat else set())
        for index, op in enumerate(info["ops"][body_ops.stop:], body_ops.stop):
            for name in set(op["inputs"]) & made_inside:
                raise ValueError(f"--export-onnx: op {index} ({op['op']}) reads '{name}', made inside the Repeat "
                                 f"body; an ONNX Loop gives back only its carried value")
        nodes, initializers = [], []
        for t in info["tensors"]:
            if t["role"] != "parameter":
                continue
            values = np.frombuffer(self.values[t["name"]], dtype=np.float32)
            shape = (t["sequence"], t["rows"], t["cols"]) if t["sequence"] > 1 else (t["rows"], t["cols"])
            initializers.append(numpy_helper.from_array(values.reshape(shape).copy(), t["name"] if t["sequence"] == 1
                                                        else f"{t['name']}/stacked"))
        for index, op in enumerate(info["ops"]):
            if repeat and index == repeat["first_op"]:
                nodes += self.loop(repeat, [info["ops"][i] for i in body_ops])
            if index not in body_ops:
                self.op(op, nodes)
        value_info = lambda t: helper.make_tensor_value_info(t["name"], TensorProto.FLOAT, [t["rows"], t["cols"]])
        outputs = []
        for t in info["tensors"]:
            if t["role"] == "output":
                if self.name(t["name"]) != t["name"]:
                    nodes.append(helper.make_node("Identity", [self.name(t["name"])], [t["name"]]))
                outputs.append(value_info(t))
        graph = helper.make_graph(nodes, info["name"], [value_info(t) for t in info["tensors"] if t["role"] == "input"],
                                  outputs, initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ipu-e2e")
        helper.set_model_props(model, {NAME_KEY: info["name"], OPTIONS_KEY: json.dumps(info["options"])})
        onnx.checker.check_model(model)
        return model

    def loop(self, repeat, body):
        """The Repeat as a Loop: its trip count, the carried value in and out."""
        carried, nodes = repeat["carried"], []
        count = f"{carried}/iteration"
        sequences = sorted({i for op in body for i in op["inputs"] if self.tensors[i]["sequence"] > 1})
        for name in sequences:
            nodes.append(helper.make_node("Gather", [f"{name}/stacked", count], [name], axis=0))
        for op in body:
            self.op(op, nodes)
        nodes.append(helper.make_node("Identity", [f"{carried}/again"], [f"{carried}/continue"]))
        t = self.tensors[carried]
        shape = [t["rows"], t["cols"]]
        graph = helper.make_graph(
            nodes, f"{carried}/body",
            [helper.make_tensor_value_info(count, TensorProto.INT64, []),
             helper.make_tensor_value_info(f"{carried}/again", TensorProto.BOOL, []),
             helper.make_tensor_value_info(carried, TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info(f"{carried}/continue", TensorProto.BOOL, []),
             helper.make_tensor_value_info(self.name(repeat["carried_next"]), TensorProto.FLOAT, shape)])
        trips = self.fresh("trips")
        self.aliases[repeat["carried_next"]] = f"{repeat['carried_next']}/last"
        loop = helper.make_node("Loop", [trips, "", self.name(repeat["carried_init"])],
                                [self.aliases[repeat["carried_next"]]], body=graph)
        return [helper.make_node("Constant", [], [trips], value=numpy_helper.from_array(
            np.array(repeat["iterations"], np.int64))), loop]


def export(workload, folder):
    """Write the workload as folder/model.onnx and its inputs as folder/input_N.pb (atomically)."""
    from . import artifacts
    info = workload.info()
    values = {t["name"]: workload.values(t["name"]) for t in info["tensors"] if t["role"] == "parameter"}
    model = Exporter(info, values).model()
    inputs = [t for t in info["tensors"] if t["role"] == "input"]
    for k, t in enumerate(inputs):
        array = np.frombuffer(workload.values(t["name"]), dtype=np.float32).reshape(t["rows"], t["cols"])
        artifacts.write_bytes(folder / f"input_{k}.pb", numpy_helper.from_array(array, t["name"]).SerializeToString())
    artifacts.write_bytes(folder / "model.onnx", model.SerializeToString())
