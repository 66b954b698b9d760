"""test_onnx_import.py: `ipu-e2e-test --model`.  An MLP block written in ONNX
the way torch exports it (MatMul then a bias Add, the tanh GELU spelled out in
Pow/Mul/Add/Tanh, a LayerNorm as ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add, a
residual Add) imports as the graph ops it means (biased matmuls, one GELU,
one LayerNorm, one add) and runs against expected outputs computed here with
numpy; with no inputs given, it runs from the seeded generator against the
project's own FP32 reference.  A transposed input is laid out on the host.
The ONNX backend node tests of every op type the importer claims pass or say
why they are not supported; one of them (Gemm with every attribute) is
checked here against numpy from its own inputs.  A model with an op the
importer does not take exits 2 naming the node and its op type.  A Loop whose
body starts with a MatMul of the carried value (at FP8, a cast of it) matches
numpy; names beyond the library's limits are cut within its bytes of UTF-8.
"""
import json
import math
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import REPO

NODE_TESTS = __import__("ipu_e2e.onnx_tests", fromlist=["DATA"]).DATA
C, H, ROWS = 32, 48, 12


def initializer(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.float32), name)


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value, np.float32)))


def mlp_model(rng):
    """x [1, ROWS, C] -> LN -> MatMul + b1 -> GELU (tanh, spelled out) -> MatMul + b2 -> + x."""
    w1 = (rng.standard_normal((C, H)) / math.sqrt(C)).astype(np.float32)
    w2 = (rng.standard_normal((H, C)) / math.sqrt(H)).astype(np.float32)
    b1, b2 = (rng.standard_normal(H) / 10).astype(np.float32), (rng.standard_normal(C) / 10).astype(np.float32)
    gamma, beta = (1 + rng.standard_normal(C) / 10).astype(np.float32), (rng.standard_normal(C) / 10).astype(np.float32)
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["centered"]),
        const("two", 2.0), helper.make_node("Pow", ["centered", "two"], ["squared"]),
        helper.make_node("ReduceMean", ["squared"], ["variance"], axes=[-1]),
        const("eps", 1e-6), helper.make_node("Add", ["variance", "eps"], ["variance_eps"]),
        helper.make_node("Sqrt", ["variance_eps"], ["std"]),
        helper.make_node("Div", ["centered", "std"], ["normalized"]),
        helper.make_node("Mul", ["normalized", "ln.weight"], ["scaled"]),
        helper.make_node("Add", ["scaled", "ln.bias"], ["ln_out"]),
        helper.make_node("MatMul", ["ln_out", "fc1.weight"], ["fc1_product"]),
        helper.make_node("Add", ["fc1.bias", "fc1_product"], ["hidden"]),
        const("three", 3.0), helper.make_node("Pow", ["hidden", "three"], ["cube"]),
        const("k", 0.044715), helper.make_node("Mul", ["cube", "k"], ["cube_k"]),
        helper.make_node("Add", ["hidden", "cube_k"], ["inner"]),
        const("s", math.sqrt(2 / math.pi)), helper.make_node("Mul", ["inner", "s"], ["inner_s"]),
        helper.make_node("Tanh", ["inner_s"], ["t"]),
        const("one", 1.0), helper.make_node("Add", ["t", "one"], ["t1"]),
        helper.make_node("Mul", ["hidden", "t1"], ["ht"]),
        const("half", 0.5), helper.make_node("Mul", ["ht", "half"], ["gelu"]),
        helper.make_node("MatMul", ["gelu", "fc2.weight"], ["fc2_product"]),
        helper.make_node("Add", ["fc2_product", "fc2.bias"], ["mlp_out"]),
        helper.make_node("Add", ["x", "mlp_out"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "mlp-block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ROWS, C])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, ROWS, C])],
        [initializer("ln.weight", gamma), initializer("ln.bias", beta), initializer("fc1.weight", w1),
         initializer("fc1.bias", b1), initializer("fc2.weight", w2), initializer("fc2.bias", b2)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(model)
    return model, (gamma, beta, w1, b1, w2, b2)


def numpy_mlp(x, gamma, beta, w1, b1, w2, b2):
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    ln = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-6) * gamma + beta
    h = ln @ w1 + b1
    g = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
    return x + g @ w2 + b2


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlp")
    rng = np.random.default_rng(11)
    model, weights = mlp_model(rng)
    onnx.save(model, folder / "mlp.onnx")
    x = rng.standard_normal((1, ROWS, C)).astype(np.float32)
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", numpy_mlp(x, *weights).astype(np.float32))
    return folder


@pytest.mark.parametrize("precision", ["fp16", "fp8"])
def test_mlp_block_imports_as_its_ops_and_matches_numpy(cli, mlp, tmp_path, precision):
    done = cli("--model", mlp / "mlp.onnx", "--inputs", mlp / "x.npy", "--expected", mlp / "y.npy",
               "--precision", precision, "--tiles", "8", "--reference-run", "--check-ops",
               "--export-graph", tmp_path / "g.json", "--output", tmp_path / "out", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    ops = [op["op"] for op in json.loads((tmp_path / "g.json").read_text())["ops"]]
    casts = ["cast"] if precision == "fp8" else []
    assert ops == ["layernorm"] + casts + ["matmul", "gelu"] + casts + ["matmul", "add"]
    described = {op["output"]: op for op in json.loads((tmp_path / "g.json").read_text())["ops"]}
    assert described["hidden"]["inputs"][1:] == ["fc1.weight", "fc1.bias"]
    assert described["ln_out"]["epsilon"] == pytest.approx(1e-6)
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    expected = next(c for c in result["checks"] if c.get("against") == "expected")
    assert expected["passed"] and expected["model_output"] == "y" and result["status"] == "PASS"
    assert "against the expected 'y'" in done.stdout


def test_seeded_inputs_check_against_the_fp32_reference(cli, mlp, tmp_path):
    done = cli("--model", mlp / "mlp.onnx", "--tiles", "8", "--reference-run", "--reference-fp32", "--seed", "4",
               "--output", tmp_path, "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert [c["tensor"] for c in result["checks"]] == ["y"] and result["status"] == "PASS"
    assert result["model_files"]["inputs"] == "seeded standard normal values (--seed 4)"


def test_transposed_input_is_laid_out_on_the_host(cli, tmp_path):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((5, 7)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["a"], ["at"], perm=[1, 0]), helper.make_node("MatMul", ["at", "w"], ["c"])],
        "t", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [5, 6])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [6, 7])], [initializer("w", w)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "t.onnx")
    a = rng.standard_normal((5, 6)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "c.npy", (a.T @ w).astype(np.float32))
    done = cli("--model", tmp_path / "t.onnx", "--inputs", tmp_path / "a.npy", "--expected", tmp_path / "c.npy",
               "--precision", "fp16", "--tiles", "4", "--dump-tensors", tmp_path / "dump", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    laid = [p.name for p in (tmp_path / "dump").glob("a*.npy")]
    assert laid == ["a_as_6x5.npy"]
    assert np.array_equal(np.load(tmp_path / "dump" / "a_as_6x5.npy"), a.T.astype(np.float16))


def test_unsupported_op_names_node_and_op(cli, tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["p"], name="activation")], "s",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [4, 8])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "s.onnx")
    done = cli("--model", tmp_path / "s.onnx", "--tiles", "4", "--quiet")
    assert done.returncode == 2
    assert "node 'activation' (Relu): not an op the importer knows. Supported: MatMul and Gemm" in done.stderr
    alone = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["p"], name="scores_softmax", axis=-1)], "s",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [4, 8])])
    onnx.save(helper.make_model(alone, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "alone.onnx")
    done = cli("--model", tmp_path / "alone.onnx", "--tiles", "4", "--quiet")
    assert done.returncode == 2 and "node 'scores_softmax' (Softmax): a softmax other than over the keys" in done.stderr
    old = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    onnx.save(old, tmp_path / "old.onnx")
    done = cli("--model", tmp_path / "old.onnx", "--tiles", "4", "--quiet")
    assert done.returncode == 2 and "opset 11: the importer reads opsets 13 to 17" in done.stderr
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x01garbage")
    done = cli("--model", tmp_path / "junk.onnx", "--tiles", "4", "--quiet")
    assert done.returncode == 2 and "junk.onnx: not" in done.stderr and "Traceback" not in done.stderr
    for args, message in ((("--inputs", tmp_path / "a.npy"), "--inputs applies to --model FILE, not to --workload mlp"),
                          (("--model", tmp_path / "s.onnx", "--graph", tmp_path / "g.json"), "give one workload")):
        done = cli(*args, "--tiles", "4", "--quiet")
        assert done.returncode == 2 and message in done.stderr, done.stderr


def test_gemm_node_test_matches_numpy(cli, tmp_path):
    case = NODE_TESTS / "test_gemm_all_attributes"
    done = cli("--model", case / "model.onnx", "--inputs", case / "test_data_set_0", "--precision", "fp16",
               "--tiles", "4", "--dump-tensors", tmp_path, "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    inputs = [numpy_helper.to_array(onnx.load_tensor(str(case / "test_data_set_0" / f"input_{k}.pb")))
              for k in range(3)]
    a, b, c = (x.astype(np.float64) for x in inputs)
    want = 0.25 * a.T @ b.T + 0.35 * c
    got = np.load(tmp_path / "y.npy").astype(np.float64)
    assert got.shape == want.shape and np.abs(got - want).max() < 2e-3 * max(1, np.abs(want).max())


def test_node_tests_pass_or_say_why(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "harness" / "bin" / "ipu-e2e-onnx-tests"), "--jobs", "2",
                           "--output", tmp_path, "--quiet"], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    summary = json.loads((tmp_path / "onnx-tests.json").read_text())
    assert summary["failed"] == 0 and summary["passed"] + summary["not_supported"] == summary["planned"]
    passed = {e["name"].split("/")[0] for e in summary["cases"] if e["status"] == "passed"}
    for name in ("test_matmul_2d", "test_add", "test_add_bcast", "test_gemm_default_vector_bias",
                 "test_gemm_transposeA", "test_layer_normalization_2d_axis1", "test_transpose_default",
                 "test_reshape_reordered_all_dims", "test_split_equal_parts_2d", "test_slice"):
        assert name in passed, name
    for entry in summary["cases"]:
        assert entry["status"] != "not supported" or entry["detail"], entry
        if entry["status"] == "passed":
            result = json.loads((tmp_path / "cases" / entry["name"].replace("/", "-") / "result.json").read_text())
            assert result["status"] == "PASS" and result["op_check"]["failed_ops"] == 0
            assert any(c.get("against") == "expected" and c["passed"] for c in result["checks"])


@pytest.mark.parametrize("tiles", [16, 64])
def test_torch_encoder_block_matches_torch(cli, repo, tmp_path, tiles):
    """The committed encoder block (ipu-e2e-export-model encoder-block ...: torch's nn.MultiheadAttention, batch
    2) imports as one attention op between biased matmuls and matches torch's own outputs on the device,
    and the project's FP32 reference matches them to FP32 rounding."""
    model = repo / "fixtures" / "models" / "encoder-block.onnx"  # its .input.npy and .expected.npy beside it
    done = cli("--model", model, "--tiles", tiles, "--reference-run", "--reference-fp32", "--check-ops",
               "--export-graph", tmp_path / "g.json", "--output", tmp_path, "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    ops = json.loads((tmp_path / "g.json").read_text())["ops"]
    attention = [op for op in ops if op["op"] == "attention"]
    assert len(attention) == 1 and (attention[0]["heads"], attention[0]["head_dim"], attention[0]["seq"]) == (2, 16, 10)
    assert [op["op"] for op in ops].count("matmul") == 4 and all(len(op["inputs"]) == 3 for op in ops
                                                                  if op["op"] == "matmul")
    result = json.loads((tmp_path / "result.json").read_text())
    against = [c for c in result["checks"] if c.get("against") == "expected"]
    assert len(against) == 2 and all(c["passed"] for c in against) and result["op_check"]["failed_ops"] == 0
    reference = next(c for c in against if c.get("reference"))
    assert reference["max_abs_error"] < 1e-5


@pytest.mark.parametrize("tiles", [16, 64])
def test_torchvision_vit_matches_torch(cli, repo, tmp_path, tiles):
    """The committed torchvision VisionTransformer (ipu-e2e-export-model vit --image 32 --patch 8 --layers 2
    --heads 3 --width 48 --mlp 96 --classes 16 --batch 2 --seed 5; FP8 by default) imports with its
    convolutional patch embedding as a matmul over host-cut patches, its class token before each image's
    patches, two attention ops, erf GELUs and the class token's read-out, and matches torch's logits."""
    model = repo / "fixtures" / "models" / "vit-tiny.onnx"  # its .input.npy and .expected.npy beside it
    done = cli("--model", model, "--tiles", tiles, "--reference-run", "--reference-fp32", "--check-ops",
               "--export-graph", tmp_path / "g.json", "--output", tmp_path, "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    described = json.loads((tmp_path / "g.json").read_text())
    tensors = {t["name"]: t for t in described["tensors"]}
    patches = [t for t in described["tensors"] if t["role"] == "input"]
    assert [(t["rows"], t["cols"]) for t in patches] == [(2 * 17, 3 * 8 * 8)]  # a zero row per image first
    ops = described["ops"]
    assert [op["op"] for op in ops].count("attention") == 2
    assert [op.get("form") for op in ops if op["op"] == "gelu"] == ["erf", "erf"]
    out = next(t for t in described["tensors"] if t["role"] == "output")
    assert (out["rows"], out["cols"]) == (2 * 17, 16)  # the head on every token; the host reads rows 0 and 17
    assert tensors["input_patches"]["values"] == "given"
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["model_files"] == {"inputs": [str(model.with_name("vit-tiny.input.npy"))],
                                     "expected": [str(model.with_name("vit-tiny.expected.npy"))]}
    against = [c for c in result["checks"] if c.get("against") == "expected"]
    assert all(c["passed"] for c in against) and result["op_check"]["failed_ops"] == 0
    device, reference = (next(c for c in against if bool(c.get("reference")) == r) for r in (False, True))
    assert device["rows"] == 2 and device["cols"] == 16 and reference["max_abs_error"] < 1e-4


@pytest.mark.parametrize("flags", [["--tiles", "64"],
                                   ["--tiles", "16", "--tokens", "16", "--layers", "2", "--batch", "2", "--input",
                                    "patches"]])
def test_vit_small_round_trips_byte_identical(cli, tmp_path, flags):
    """vit-small written as a graph description and as ONNX (the Repeat as a Loop, attention and MAP
    pooling spelled out in standard ops) and read back builds the built-in's package byte for byte."""
    built = cli("--workload", "vit-small", *flags, "--export-graph", tmp_path / "g.json", "--export-onnx",
                tmp_path / "onnx", "--save-package", tmp_path / "built-in.pkg", "--compile-only", "--quiet")
    assert built.returncode == 0, built.stderr
    model = onnx.load(str(tmp_path / "onnx" / "model.onnx"))
    kinds = [n.op_type for n in model.graph.node]
    assert kinds.count("Loop") == 1 and kinds.count("Softmax") == 1  # the layers in the Loop; MAP pooling after
    body = [n.op_type for n in next(n for n in model.graph.node if n.op_type == "Loop").attribute[0].g.node]
    assert body.count("Softmax") == 1 and body.count("LayerNormalization") == 2 and body.count("MatMul") == 6
    tiles = flags[:2]
    for source in (["--graph", tmp_path / "g.json"], ["--model", tmp_path / "onnx" / "model.onnx", "--inputs",
                                                       tmp_path / "onnx"]):
        again = cli(*source, *tiles, "--save-package", tmp_path / "again.pkg", "--compile-only", "--quiet")
        assert again.returncode == 0, again.stderr
        assert (tmp_path / "again.pkg").read_bytes() == (tmp_path / "built-in.pkg").read_bytes(), source[0]


def test_export_onnx_refuses_what_a_loop_cannot_give_back(cli, tmp_path):
    done = cli("--workload", "mlp", "--tiles", "4", "--tokens", "8", "--channels", "32", "--hidden", "48",
               "--export-onnx", tmp_path / "mlp", "--compile-only", "--quiet")
    assert done.returncode == 2 and "op 5 (copy) reads 'block_out', made inside the Repeat body" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "mlp" / "model.onnx").exists()


def test_model_sweep_replays_against_torch(repo, tmp_path):
    """ipu-e2e-sweep --model: one case per budget, each replayed with the model's expected outputs."""
    models = repo / "fixtures" / "models"
    done = subprocess.run([sys.executable, str(repo / "harness" / "bin" / "ipu-e2e-sweep"), "--output", tmp_path,
                           "--model", models / "vit-tiny.onnx", "--tiles", "16", "--budgets", "default,4000",
                           "--quiet", "--", "--inputs", models / "vit-tiny.input.npy", "--expected",
                           models / "vit-tiny.expected.npy"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    passed = json.loads((tmp_path / "cases" / "vit-tiny-default" / "run" / "result.json").read_text())
    assert passed["status"] == "PASS" and any(c.get("against") == "expected" and c["passed"]
                                              for c in passed["checks"])
    rejected = json.loads((tmp_path / "cases" / "vit-tiny-4000" / "case.json").read_text())
    assert rejected["outcome"] == "rejected"
    planned = {c["name"]: c for c in json.loads((tmp_path / "sweep.json").read_text())["planned"]}
    assert planned["vit-tiny-4000"]["batch"] == 2 and "--expected" in planned["vit-tiny-default"]["run"]


def test_mul_by_a_constant_folds_into_the_matmul(cli, tmp_path):
    """(x . w + b) * c * 0.5 (c one factor per column): the weights and bias are scaled, no op is added;
    a Mul of a graph input by a constant has no matmul to fold into and is refused."""
    rng = np.random.default_rng(8)
    w, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((6, 5), (5,), (5,)))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "b"], ["pb"]),
             helper.make_node("Mul", ["pb", "c"], ["pc"]), const("half", 0.5),
             helper.make_node("Mul", ["half", "pc"], ["y"])]
    graph = helper.make_graph(nodes, "scaled", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])],
                              [initializer("w", w), initializer("b", b), initializer("c", c)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), tmp_path / "m.onnx")
    x = rng.standard_normal((4, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", ((x @ w + b) * c * 0.5).astype(np.float32))
    done = cli("--model", tmp_path / "m.onnx", "--inputs", tmp_path / "x.npy", "--expected", tmp_path / "y.npy",
               "--precision", "fp16", "--tiles", "4", "--export-graph", tmp_path / "g.json", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [op["op"] for op in json.loads((tmp_path / "g.json").read_text())["ops"]] == ["matmul"]
    given = np.load(tmp_path / "g.values" / "w.npy")
    assert np.allclose(given, w * c * 0.5, rtol=1e-6)
    graph = helper.make_graph([helper.make_node("Mul", ["x", "c"], ["y"], name="scale_input")], "bad",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])], [initializer("c", c)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), tmp_path / "bad.onnx")
    done = cli("--model", tmp_path / "bad.onnx", "--tiles", "4", "--quiet")
    assert done.returncode == 2 and "node 'scale_input' (Mul): a multiplication by a constant" in done.stderr


def loop_model(rng, rows, cols, trips, name):
    """x [rows, cols] -> Loop (trips): h = h + (h . W_i + b_i), W_i and b_i Gathered by the iteration number
    from stacked initializers (as onnx_export writes the Repeat): the body starts with a MatMul of the carried
    value."""
    ws = (rng.standard_normal((trips, cols, cols)) / (2 * math.sqrt(cols))).astype(np.float32)
    bs = (rng.standard_normal((trips, cols)) / 10).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Gather", ["w/stacked", "i"], ["w"], axis=0),
         helper.make_node("Gather", ["b/stacked", "i"], ["b"], axis=0),
         helper.make_node("MatMul", ["h", "w"], ["p"]), helper.make_node("Add", ["p", "b"], ["pb"]),
         helper.make_node("Add", ["h", "pb"], ["h_next"]), helper.make_node("Identity", ["again"], ["continue"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("again", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("h", TensorProto.FLOAT, [rows, cols])],
        [helper.make_tensor_value_info("continue", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_next", TensorProto.FLOAT, [rows, cols])])
    trip_count = numpy_helper.from_array(np.array(trips, np.int64))
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["trips"], value=trip_count),
         helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, cols])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, cols])],
        [initializer("w/stacked", ws), initializer("b/stacked", bs)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(model)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    h = x.astype(np.float64)
    for w, b in zip(ws, bs):
        h = h + h @ w + b
    return model, x, h.astype(np.float32)


@pytest.mark.parametrize("precision", ["fp8", "fp16"])
def test_loop_whose_body_starts_with_a_matmul_of_the_carried_value(cli, tmp_path, precision):
    """At FP8 the body's first op is the cast of the carried value before its matmul; the planner homes the
    carried tensor where that matmul wants its operand (it refused the cast before: "op 0 (cast) reads 'h'
    before any op gives it a layout").  The device matches numpy and its own reference op by op."""
    model, x, y = loop_model(np.random.default_rng(21), 8, 16, 3, "loop")
    onnx.save(model, tmp_path / "loop.onnx")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    done = cli("--model", tmp_path / "loop.onnx", "--inputs", tmp_path / "x.npy", "--expected", tmp_path / "y.npy",
               "--precision", precision, "--tiles", "16", "--reference-run", "--check-ops",
               "--export-graph", tmp_path / "g.json", "--output", tmp_path / "out", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    described = json.loads((tmp_path / "g.json").read_text())
    repeat, ops = described["repeat"], described["ops"]
    assert (repeat["first_op"], repeat["op_count"], repeat["iterations"]) == (0, len(ops), 3)
    if precision == "fp8":
        assert ops[0] == {"op": "cast", "inputs": [repeat["carried"]], "output": ops[1]["inputs"][0]}
    assert [op["op"] for op in ops] == ["cast"] * (precision == "fp8") + ["matmul", "add"]
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    expected = next(c for c in result["checks"] if c.get("against") == "expected")
    assert expected["passed"] and result["status"] == "PASS" and result["op_check"]["failed_ops"] == 0


def test_names_beyond_the_library_limits_are_cut_within_its_bytes(cli, tmp_path):
    """A model whose name (its file's) is 12 CJK characters, 36 bytes of UTF-8, is recorded under its first 10
    (30 bytes: the workload name holds 31); two tensors named in 80 CJK characters (240 bytes) get ASCII names
    of at most 63 bytes, told apart."""
    name = "视觉变换器模型测试用例名称"[:12]
    assert len(name.encode()) == 36
    long_in, long_out = "输入" * 40, "输出" * 40
    rng = np.random.default_rng(4)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", [long_in, "w"], [long_out])], "g",
                              [helper.make_tensor_value_info(long_in, TensorProto.FLOAT, [4, 6])],
                              [helper.make_tensor_value_info(long_out, TensorProto.FLOAT, [4, 5])],
                              [initializer("w", w)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), tmp_path / f"{name}.onnx")
    x = rng.standard_normal((4, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", (x @ w).astype(np.float32))
    done = cli("--model", tmp_path / f"{name}.onnx", "--inputs", tmp_path / "x.npy", "--expected",
               tmp_path / "y.npy", "--precision", "fp16", "--tiles", "4", "--export-graph", tmp_path / "g.json",
               "--output", tmp_path / "out", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["workload"] == name[:10] and result["status"] == "PASS"
    described = json.loads((tmp_path / "g.json").read_text())
    assert described["name"] == name[:10]
    names = [t["name"] for t in described["tensors"]]
    assert len(set(names)) == len(names) and all(len(n.encode()) <= 63 for n in names)
    assert sorted(n for n in names if n != "w") == ["_" * 63, "_" * 61 + "~2"]
