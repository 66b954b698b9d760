"""test_reference_vit.py: the SigLIP ViT workload (`vit`, `vit-small`) and its
FP32 reference, against a numpy float64 implementation of the network written
here from the workload's values (not from its op list): with input
"patches", x = patches Wp + bp + pos (pos added to every image); then
pre-LayerNorm blocks h = x + attention(LN1(x) Wqkv + bqkv) Wo + bo,
x' = h + gelu(LN2(h) W1 + b1) W2 + b2 with per-layer parameter members, a
final LayerNorm, then the MAP head (a probe query q = probe Wq + bq attends
per head over each image's tokens with [k | v] = x Wkv + bkv, out
projection Wo + bo, and y = a + gelu(LN(a) W1 + b1) W2 + b2), within 1e-4 of
the output's magnitude.  Also: the generated values follow the stated
distributions (inputs and probe N(0, 1), weights N(0, 1/sqrt(fan-in)), LN
gammas 1 + N(0, 0.1), betas and biases N(0, 0.1), the position embedding
N(0, 0.5)) and depend only on the seed, not on OMP_NUM_THREADS (subprocesses
with 1 and 2 threads, reference output included); the info JSON lists the
ops, their fields and the Repeat over the layers; bad options fail with a
message; and compiling a ViT with an unknown attention mode fails cleanly
with invalid_argument naming the option.
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ipu_e2e import native

HARNESS = Path(__file__).resolve().parents[1]
SMALL = {"workload": "vit", "tokens": 13, "channels": 24, "heads": 2, "head_dim": 12, "hidden": 40,
         "layers": 2, "batch": 2}
EPS = 1e-6
PATCH = 14 * 14 * 3  # pixel values per patch


@pytest.fixture
def ctx():
    context = native.Context()
    yield context
    context.close()


def floats(data, shape=None):
    array = np.frombuffer(data, dtype=np.float32)
    return array.reshape(shape) if shape is not None else array


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layernorm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * gamma + beta


def softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def split_heads(m, heads, d):
    """[..., T, heads * d] -> [..., heads, T, d]"""
    return np.moveaxis(m.reshape(*m.shape[:-1], heads, d), -2, -3)


def numpy_vit(w, o):
    """The network of the module comment in float64 from w.values()."""
    B, T, C, H = o["batch"], o["tokens"], o["channels"], o["hidden"]
    heads, d, L = o["heads"], o["head_dim"], o["layers"]

    def v(name, *shape):
        return floats(w.values(name), shape).astype(np.float64)

    if o.get("input") == "patches":
        x = v("patches", B, T, PATCH) @ v("patch_w", PATCH, C) + v("patch_w_bias", C)
        x = x + v("pos_embedding", T, C)[None]
    else:
        x = v("x", B, T, C)
    ln1_g, ln1_b = v("ln1_gamma", L, C), v("ln1_beta", L, C)
    ln2_g, ln2_b = v("ln2_gamma", L, C), v("ln2_beta", L, C)
    wqkv, wo = v("wqkv", L, C, 3 * C), v("wo", L, C, C)
    bqkv, bo = v("wqkv_bias", L, 3 * C), v("wo_bias", L, C)
    w1, w2 = v("w1", L, C, H), v("w2", L, H, C)
    b1, b2 = v("w1_bias", L, H), v("w2_bias", L, C)
    for i in range(L):
        qkv = layernorm(x, ln1_g[i], ln1_b[i]) @ wqkv[i] + bqkv[i]
        q, k, vv = (split_heads(qkv[..., j * C:(j + 1) * C], heads, d) for j in range(3))
        p = softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(d))        # [B, heads, T, T]
        att = np.moveaxis(p @ vv, -3, -2).reshape(B, T, C)
        h = x + att @ wo[i] + bo[i]
        x = h + gelu(layernorm(h, ln2_g[i], ln2_b[i]) @ w1[i] + b1[i]) @ w2[i] + b2[i]
    x = layernorm(x, v("post_gamma", C), v("post_beta", C))
    q = v("map_probe", 1, C) @ v("map_wq", C, C) + v("map_wq_bias", C)
    q = split_heads(q, heads, d)                                        # [heads, 1, d]
    kv = x @ v("map_wkv", C, 2 * C) + v("map_wkv_bias", 2 * C)
    k, vv = split_heads(kv[..., :C], heads, d), split_heads(kv[..., C:], heads, d)
    p = softmax(q[None] @ np.swapaxes(k, -1, -2) / math.sqrt(d))      # [B, heads, 1, T]
    pooled = (p @ vv).reshape(B, C)
    a = pooled @ v("map_wo", C, C) + v("map_wo_bias", C)
    y = layernorm(a, v("map_ln_gamma", C), v("map_ln_beta", C)) @ v("map_w1", C, H) + v("map_w1_bias", H)
    return a + gelu(y) @ v("map_w2", H, C) + v("map_w2_bias", C)


GEOMETRIES = [
    {},
    {"seed": 7, "layers": 1, "batch": 1},
    {"seed": 123, "layers": 3, "heads": 3, "head_dim": 8, "channels": 24, "tokens": 20, "hidden": 33},
    {"workload": "vit-small", "seed": 5},
    {"seed": 4, "input": "patches"},
    {"seed": 8, "layers": 1, "batch": 3, "tokens": 7, "input": "patches"},
]


@pytest.mark.parametrize("overrides", GEOMETRIES, ids=lambda o: "-".join(f"{k}{v}" for k, v in o.items())
                         or "default")
def test_reference_matches_numpy(ctx, overrides):
    options = {**SMALL, **overrides}
    if options["workload"] == "vit-small":
        del options["layers"]
    w = native.Workload(ctx, options)
    result = w.reference_run({"fp32": True})
    assert result["mode"] == "fp32" and result["outputs"] == ["embedding"]
    expect = numpy_vit(w, {**options, "layers": options.get("layers", 3)})
    got = floats(w.reference_output("embedding"), expect.shape)
    magnitude = np.abs(expect).max()
    assert magnitude > 0.1 and np.isfinite(got).all()
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-4 * magnitude)
    # Images are pooled separately and differ.
    if options["batch"] > 1:
        assert not np.allclose(got[0], got[1], rtol=1e-2)


def test_layers_and_images_matter(ctx):
    two = native.Workload(ctx, SMALL)
    one = native.Workload(ctx, {**SMALL, "layers": 1})
    # The same seed gives the same input and first-layer members.
    assert two.values("x") == one.values("x")
    two.reference_run()
    one.reference_run()
    assert not np.allclose(floats(one.reference_output("embedding")),
                           floats(two.reference_output("embedding")), rtol=1e-3)


def test_info_describes_the_vit(ctx):
    w = native.Workload(ctx, {**SMALL, "seed": 9})
    info = w.info()
    assert info["name"] == "vit" and info["seed"] == 9 and info["options"]["layers"] == 2
    tensors = {t["name"]: t for t in info["tensors"]}
    assert tensors["x"] == {"name": "x", "rows": 26, "cols": 24, "dtype": "f16", "scale": 0,
                            "role": "input", "sequence": 1,
                            "values": {"normal": {"scale": 1.0, "offset": 0.0, "stream": 0}}}
    made = tensors["wqkv"].pop("values")["normal"]
    assert tensors["wqkv"] == {"name": "wqkv", "rows": 24, "cols": 72, "dtype": "f143", "scale": -4,
                               "role": "parameter", "sequence": 2}
    assert made["scale"] == pytest.approx(1 / math.sqrt(24), rel=1e-7) and made["offset"] == 0
    assert tensors["ln1_gamma"]["values"]["normal"]["offset"] == 1.0
    for name in ("ln1_gamma", "ln1_beta", "ln2_gamma", "ln2_beta"):
        assert tensors[name]["sequence"] == 2 and tensors[name]["dtype"] == "f16"
    for name in ("wo", "w1", "w2"):
        assert tensors[name]["sequence"] == 2 and tensors[name]["scale"] == -4
    for name in ("map_probe", "map_wq", "map_wkv", "map_wo", "map_w1", "map_w2"):
        assert tensors[name]["sequence"] == 1 and tensors[name]["dtype"] == "f143"
    assert tensors["embedding"] == {"name": "embedding", "rows": 2, "cols": 24, "dtype": "f16",
                                    "scale": 0, "role": "output", "sequence": 1}
    ops = info["ops"]
    body = ["layernorm", "cast", "matmul", "attention", "cast", "matmul", "add",
            "layernorm", "cast", "matmul", "gelu", "cast", "matmul", "add"]
    head = ["layernorm", "cast", "matmul", "matmul", "map_pool", "cast", "matmul",
            "layernorm", "cast", "matmul", "gelu", "cast", "matmul", "add"]
    assert [op["op"] for op in ops] == body + head
    # Every matmul is biased: its third input is its weight's [1 x N] FP16 bias.
    for op in ops:
        if op["op"] == "matmul":
            weight, bias = tensors[op["inputs"][1]], tensors[op["inputs"][2]]
            assert bias["name"] == weight["name"] + "_bias"
            assert (bias["rows"], bias["cols"], bias["dtype"], bias["role"], bias["sequence"]) == \
                (1, weight["cols"], "f16", "parameter", weight["sequence"])
    assert info["repeat"] == {"first_op": 0, "op_count": len(body), "iterations": 2,
                              "carried": "residual", "carried_next": "block_out", "carried_init": "x"}
    assert ops[0]["inputs"] == ["residual", "ln1_gamma", "ln1_beta"]
    assert ops[0]["epsilon"] == pytest.approx(1e-6)
    assert ops[3] == {"op": "attention", "inputs": ["attn_qkv"], "output": "attn_heads", "heads": 2,
                      "head_dim": 12, "seq": 13}
    pool = ops[len(body) + 4]
    assert pool == {"op": "map_pool", "inputs": ["map_q", "map_kv"], "output": "map_pooled",
                    "heads": 2, "head_dim": 12, "seq": 13}
    assert ops[len(body)]["inputs"][0] == "block_out"  # the final LayerNorm reads the last layer
    for op in ops:
        if op["op"] == "matmul":
            a, b = (tensors[n] for n in op["inputs"][:2])
            assert a["dtype"] == b["dtype"] == "f143"


def test_info_describes_the_patch_input(ctx):
    info = native.Workload(ctx, {**SMALL, "input": "patches"}).info()
    tensors = {t["name"]: t for t in info["tensors"]}
    assert [t["name"] for t in info["tensors"] if t["role"] == "input"] == ["patches"]
    assert (tensors["patches"]["rows"], tensors["patches"]["cols"], tensors["patches"]["dtype"]) == (26, PATCH, "f16")
    assert (tensors["patch_w"]["rows"], tensors["patch_w"]["cols"]) == (PATCH, 24)
    assert (tensors["pos_embedding"]["rows"], tensors["pos_embedding"]["cols"]) == (13, 24)
    assert tensors["x"]["role"] == "activation"
    ops = info["ops"]
    assert [op["op"] for op in ops[:3]] == ["cast", "matmul", "add"]
    assert ops[1]["inputs"] == ["patches_f8", "patch_w", "patch_w_bias"]
    assert ops[2] == {"op": "add", "inputs": ["patch_embedded", "pos_embedding"], "output": "x"}
    assert info["repeat"]["first_op"] == 3 and info["repeat"]["carried_init"] == "x"


def test_vit_small_is_the_vit_with_three_layers(ctx):
    geometry = {k: v for k, v in SMALL.items() if k not in ("workload", "layers")}
    small = native.Workload(ctx, {"workload": "vit-small", **geometry})
    big = native.Workload(ctx, {"workload": "vit", "layers": 3, **geometry})
    assert small.info()["name"] == "vit-small" and small.info()["repeat"]["iterations"] == 3
    assert small.info()["ops"] == big.info()["ops"] and small.info()["tensors"] == big.info()["tensors"]
    assert small.values("wqkv") == big.values("wqkv")


@pytest.mark.parametrize("workload, layers, heads, head_dim, hidden", [
    ("vit", 1, 16, 72, 4304),       # the full width; one layer given to keep it light
    ("vit-small", None, 4, 64, 1024),  # sized for 64 tiles, 3 layers by default
])
def test_default_geometry(ctx, workload, layers, heads, head_dim, hidden):
    options = {"workload": workload, **({"layers": layers} if layers else {})}
    info = native.Workload(ctx, options).info()
    tensors = {t["name"]: t for t in info["tensors"]}
    width = heads * head_dim
    assert (tensors["x"]["rows"], tensors["x"]["cols"]) == (729, width)
    assert (tensors["wqkv"]["rows"], tensors["wqkv"]["cols"], tensors["wqkv"]["sequence"]) == \
        (width, 3 * width, layers or 3)
    assert (tensors["w1"]["rows"], tensors["w1"]["cols"]) == (width, hidden)
    assert (tensors["embedding"]["rows"], tensors["embedding"]["cols"]) == (1, width)
    attention = next(op for op in info["ops"] if op["op"] == "attention")
    assert (attention["heads"], attention["head_dim"], attention["seq"]) == (heads, head_dim, 729)


def test_value_distribution(ctx):
    L, C, H = 2, 256, 384
    w = native.Workload(ctx, {"workload": "vit", "tokens": 729, "channels": C, "heads": 4, "head_dim": 64,
                              "hidden": H, "layers": L, "seed": 3})

    def v(name):
        return floats(w.values(name)).astype(np.float64)

    samples = [(v("x"), 0.0, 1.0), (v("map_probe"), 0.0, 1.0)]
    samples += [(v(n), 0.0, 1 / math.sqrt(C)) for n in ("wqkv", "wo", "w1", "map_wq", "map_wkv",
                                                       "map_wo", "map_w1")]
    samples += [(v(n), 0.0, 1 / math.sqrt(H)) for n in ("w2", "map_w2")]
    samples += [(v(n), 1.0, 0.1) for n in ("ln1_gamma", "ln2_gamma", "post_gamma", "map_ln_gamma")]
    samples += [(v(n), 0.0, 0.1) for n in ("ln1_beta", "ln2_beta", "post_beta", "map_ln_beta")]
    samples += [(v(n + "_bias"), 0.0, 0.1) for n in ("wqkv", "wo", "w1", "w2", "map_wq", "map_wkv", "map_wo",
                                                     "map_w1", "map_w2")]
    patches = native.Workload(ctx, {"workload": "vit", "tokens": 729, "channels": C, "heads": 4,
                                    "head_dim": 64, "hidden": H, "layers": 1, "seed": 3, "input": "patches"})
    samples += [(floats(patches.values("patches")).astype(np.float64), 0.0, 1.0),
                (floats(patches.values("patch_w")).astype(np.float64), 0.0, 1 / math.sqrt(PATCH)),
                (floats(patches.values("pos_embedding")).astype(np.float64), 0.0, 0.5)]
    for values, mean, std in samples:
        n = values.size
        assert abs(values.mean() - mean) < 5 * std / math.sqrt(n)
        assert abs(values.std() / std - 1) < 6 / math.sqrt(2 * n) + 0.002
    wqkv = v("wqkv").reshape(L, -1)
    assert abs(np.corrcoef(wqkv[0], wqkv[1])[0, 1]) < 0.02


DIGEST_SCRIPT = """
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
from ipu_e2e import native
ctx = native.Context()
w = native.Workload(ctx, json.loads(sys.argv[2]))
digest = hashlib.sha256()
for t in w.info()["tensors"]:
    if t["role"] in ("input", "parameter"):
        digest.update(w.values(t["name"]))
        digest.update(w.device_bytes(t["name"]))
run = w.reference_run()
digest.update(w.reference_output("embedding"))
print(json.dumps({"digest": digest.hexdigest(), "blas_threads": run["blas_threads"]}))
"""


def run_digest(options, **env):
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    environment.update(env)
    done = subprocess.run([sys.executable, "-c", DIGEST_SCRIPT, str(HARNESS), json.dumps(options)],
                          capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_values_and_reference_do_not_depend_on_threads():
    # Parallel paths everywhere: 1200 x 64 LayerNorms, 8 (image, head) attention
    # tasks, tensors of several 64 Ki-element generation chunks.
    options = {"workload": "vit", "tokens": 600, "batch": 2, "channels": 64, "heads": 4, "head_dim": 16,
               "hidden": 96, "layers": 2, "seed": 11}
    one = run_digest(options, OMP_NUM_THREADS="1")
    two = run_digest(options, OMP_NUM_THREADS="2")
    assert one["blas_threads"] == 1 and two["blas_threads"] == 2
    assert one["digest"] == two["digest"]
    other = run_digest({**options, "seed": 12}, OMP_NUM_THREADS="2")
    assert other["digest"] != one["digest"]


@pytest.mark.parametrize("options, message", [
    ({"channels": 25}, "channels 25 must equal heads x head_dim"),
    ({"layerz": 2}, "unknown option 'layerz'"),
    ({"layers": 0}, "'layers': expected an integer in 1..64"),
    ({"heads": "2"}, "'heads': expected an integer"),
    ({"seed": -1}, "--seed"),
    ({"input": "pixels"}, "--input: expected embeddings or patches, got 'pixels'"),
    ({"input": 3}, "--input: expected embeddings or patches, got a non-string"),
])
def test_bad_options(ctx, options, message):
    with pytest.raises(native.IpuError, match=message) as error:
        native.Workload(ctx, {**SMALL, **options})
    assert error.value.name == "invalid_argument"


def test_compile_fails_cleanly(ctx):
    profile = ctx.resolve_profile(json.dumps({"tiles": 4}))
    w = native.Workload(ctx, SMALL)
    with pytest.raises(native.IpuError) as error:
        w.compile(profile, attention="sideways")
    assert error.value.name == "invalid_argument"
    assert "--attention: expected auto, flash or materialized, got 'sideways'" in error.value.message
    # The context stays usable: the reference still runs.
    assert w.reference_run()["outputs"] == ["embedding"]


def test_attention_bands_must_fit_their_attention(ctx):
    # The device-precision reference takes a materialized attention's P V in
    # the query bands the package records, and a split flash attention's key
    # bands in order; bands that do not cover an image's queries (or keys),
    # or bands of an op it computes in no mode, are refused naming the op and
    # the field.
    w = native.Workload(ctx, SMALL)
    attention = str(next(i for i, op in enumerate(w.info()["ops"]) if op["op"] == "attention"))
    modes = {attention: "materialized"}
    assert w.reference_run({"attention": modes, "attention_bands": {attention: [0, 5, 13]}})["mode"] == "device"
    with pytest.raises(native.IpuError, match=f"attention_bands '{attention}' must rise from 0 to 13"):
        w.reference_run({"attention": modes, "attention_bands": {attention: [0, 5, 12]}})
    flash = {attention: "flash"}
    assert w.reference_run({"attention": flash, "attention_bands": {attention: [0, 8, 13]}})["mode"] == "device"
    with pytest.raises(native.IpuError, match=f"attention_bands '{attention}' must rise from 0 to 13"):
        w.reference_run({"attention": flash, "attention_bands": {attention: [0, 8, 14]}})
    with pytest.raises(native.IpuError, match=f"attention_bands '{attention}': expected an attention or MAP pooling "
                                              "op with a mode"):
        w.reference_run({"attention_bands": {attention: [0, 13]}})
    with pytest.raises(native.IpuError, match="'attention_bands' must be an object"):
        w.reference_run({"attention_bands": [0, 13]})
