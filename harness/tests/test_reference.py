"""test_reference.py: the workload values, the FP32 host reference, the
per-row output check and the .npy writer, each against numbers computed here
with numpy independently of the library.  The reference of small MLP
geometries (both precisions, 1 and 3 blocks, several seeds) must equal a
float64 numpy evaluation of the graph the workload describes (its info JSON:
ops in order, the Repeat with parameter-sequence members and the carried
tensor; GELU from the tanh formula) within 1e-5 of the output's magnitude.
Generated values must be standard normal for inputs and have standard
deviation 1/sqrt(fan-in) for weights, be bit-identical for one seed, differ
across seeds and not depend on OMP_NUM_THREADS (subprocesses with 1 and 2
threads).  Device bytes must decode (numpy float16; F143 from the OCP E4M3
definition written here) to the representable value nearest the unquantized
one.  The check must give cosine 1 for identical data, lower exactly a
perturbed row's cosine to numpy's value, and count NaN, infinite and
zero-norm rows as failures.  The .npy files must load with numpy.load.
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ipu_e2e import native, npy

HARNESS = Path(__file__).resolve().parents[1]
SMALL = {"workload": "mlp", "tokens": 7, "channels": 12, "hidden": 20}


@pytest.fixture
def ctx():
    context = native.Context()
    yield context
    context.close()


def workload(ctx, **options):
    return native.Workload(ctx, {**SMALL, **options})


def floats(data, shape=None):
    array = np.frombuffer(data, dtype=np.float32)
    return array.reshape(shape) if shape is not None else array


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def numpy_reference(w):
    """Evaluate the graph w.info() describes, in float64, from w.values()."""
    info = w.info()
    tensors = {t["name"]: t for t in info["tensors"]}
    values = {}
    for t in info["tensors"]:
        if t["role"] in ("input", "parameter"):
            shape = (t["sequence"], t["rows"], t["cols"])
            values[t["name"]] = floats(w.values(t["name"]), shape).astype(np.float64)
    env = {}

    def read(name, iteration):
        if name in values:
            members = values[name]
            assert members.shape[0] == 1 or iteration is not None
            return members[iteration if members.shape[0] > 1 else 0]
        return env[name]

    def run(op, iteration):
        args = [read(name, iteration) for name in op["inputs"]]
        kind = op["op"]
        if kind == "matmul":
            out = args[0] @ args[1]
        elif kind == "gelu":
            out = gelu(args[0])
        elif kind == "add":
            out = args[0] + args[1]
        else:
            assert kind in ("cast", "copy")
            out = args[0].copy()
        env[op["output"]] = out

    ops, repeat = info["ops"], info["repeat"]
    if repeat is None:
        for op in ops:
            run(op, None)
    else:
        first, end = repeat["first_op"], repeat["first_op"] + repeat["op_count"]
        for op in ops[:first]:
            run(op, None)
        env[repeat["carried"]] = read(repeat["carried_init"], None).copy()
        for iteration in range(repeat["iterations"]):
            for op in ops[first:end]:
                run(op, iteration)
            env[repeat["carried"]] = env[repeat["carried_next"]].copy()
        for op in ops[end:]:
            run(op, None)
    return {name: env[name] for name, t in tensors.items() if t["role"] == "output"}


GEOMETRIES = [
    dict(blocks=1, precision="fp8", seed=0),
    dict(blocks=3, precision="fp8", seed=1),
    dict(blocks=1, precision="fp16", seed=2),
    dict(blocks=3, precision="fp16", seed=12345),
    dict(blocks=3, precision="fp8", seed=99, batch=2),
    dict(blocks=2, precision="fp16", seed=7, tokens=13, channels=33, hidden=47),
]


@pytest.mark.parametrize("options", GEOMETRIES, ids=lambda o: "-".join(f"{k}{v}" for k, v in o.items()))
def test_reference_matches_numpy(ctx, options):
    w = workload(ctx, **options)
    result = w.reference_run()
    assert result["mode"] == "fp32" and result["outputs"] == ["y"]
    assert result["wall_seconds"] >= 0 and result["blas_threads"] >= 1
    expected = numpy_reference(w)
    assert set(expected) == {"y"}
    y = w.tensor("y")
    got = floats(w.reference_output("y"), (y["rows"], y["cols"]))
    want = expected["y"]
    assert got.shape == want.shape == (options.get("batch", 1) * options.get("tokens", 7),
                                       options.get("channels", 12))
    magnitude = np.abs(want).max()
    assert magnitude > 0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * magnitude)
    # The blocks matter: the output is not the first block's alone.
    if options["blocks"] > 1:
        one = workload(ctx, **{**options, "blocks": 1})
        one.reference_run()
        assert not np.allclose(floats(one.reference_output("y")), got.ravel(), rtol=1e-3)


def test_info_describes_the_mlp(ctx):
    info = workload(ctx, blocks=3, precision="fp8", seed=4).info()
    assert info["name"] == "mlp" and info["seed"] == 4
    assert info["options"]["blocks"] == 3 and "workload" not in info["options"]
    tensors = {t["name"]: t for t in info["tensors"]}
    assert tensors["x"] == {"name": "x", "rows": 7, "cols": 12, "dtype": "f143", "scale": -2,
                            "role": "input", "sequence": 1,
                            "values": {"normal": {"scale": 1.0, "offset": 0.0, "stream": 0}}}
    assert tensors["w1"]["values"]["normal"]["scale"] == pytest.approx(1 / math.sqrt(12), rel=1e-7)
    assert tensors["w1"]["sequence"] == 3 and tensors["w1"]["role"] == "parameter"
    assert tensors["y"]["role"] == "output" and tensors["y"]["dtype"] == "f16"
    assert [op["op"] for op in info["ops"]] == ["matmul", "gelu", "cast", "matmul", "cast", "copy"]
    assert info["repeat"] == {"first_op": 0, "op_count": 5, "iterations": 3, "carried": "block_in",
                              "carried_next": "block_next", "carried_init": "x"}


def test_errors(ctx):
    w = workload(ctx, seed=1)
    with pytest.raises(native.IpuError) as error:
        w.reference_output("y")
    assert error.value.name == "state"
    for options in ({}, {"fp32": False}):
        assert w.reference_run(options)["mode"] == "device"
    with pytest.raises(native.IpuError, match="fp32 must be true or false"):
        w.reference_run({"fp32": 1})
    with pytest.raises(native.IpuError, match="unknown option"):
        w.reference_run({"fp32": True, "fast": 1})
    with pytest.raises(native.IpuError, match="no tensor 'nope'"):
        w.values("nope")
    with pytest.raises(native.IpuError, match="only inputs and parameters"):
        w.values("hidden")
    w.reference_run()
    with pytest.raises(native.IpuError, match="keeps only outputs"):
        w.reference_output("x")
    with pytest.raises(native.IpuError, match="unknown workload 'vat'"):
        native.Workload(ctx, {"workload": "vat"})
    with pytest.raises(native.IpuError, match="must name a workload"):
        native.Workload(ctx, {"tokens": 3})
    with pytest.raises(native.IpuError, match="--precision"):
        native.Workload(ctx, {"workload": "mlp", "precision": "fp4"})


def test_value_distribution(ctx):
    blocks, channels, hidden = 2, 256, 512
    w = workload(ctx, tokens=729, channels=channels, hidden=hidden, blocks=blocks, seed=3)
    x = floats(w.values("x")).astype(np.float64)
    w1 = floats(w.values("w1"), (blocks, channels, hidden)).astype(np.float64)
    w2 = floats(w.values("w2"), (blocks, hidden, channels)).astype(np.float64)
    samples = [(x, 1.0)] + [(w1[b], 1 / math.sqrt(channels)) for b in range(blocks)] + \
              [(w2[b], 1 / math.sqrt(hidden)) for b in range(blocks)]
    for values, std in samples:
        n = values.size
        assert abs(values.mean()) < 5 * std / math.sqrt(n)
        assert abs(values.std() / std - 1) < 0.01
        # Normal: 68.27% within one standard deviation.
        assert abs(np.mean(np.abs(values) < std) - 0.6827) < 0.005
    assert not np.array_equal(w1[0], w1[1]) and not np.array_equal(w2[0], w2[1])
    assert np.corrcoef(w1[0].ravel(), w1[1].ravel())[0, 1] < 0.02


def test_values_depend_only_on_the_seed(ctx):
    names = ["x", "w1", "w2"]
    a = workload(ctx, seed=5, blocks=2)
    b = workload(ctx, seed=5, blocks=2)
    c = workload(ctx, seed=6, blocks=2)
    for name in names:
        assert a.values(name) == b.values(name)
        assert a.device_bytes(name) == b.device_bytes(name)
        assert not np.array_equal(floats(a.values(name)), floats(c.values(name)))


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
y = w.reference_output("y")
digest.update(y)
rows, cols = w.tensor("y")["rows"], w.tensor("y")["cols"]
check = native.check_outputs(ctx, y, y[4:] + y[:4], "f32", rows, cols,  # shifted by one
                             {"min_cosine": 0.99, "atol": 0.1, "rtol": 0.01, "norm_tolerance": 0.01})
print(json.dumps({"digest": digest.hexdigest(), "blas_threads": run["blas_threads"],
                  "check": check}))
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
    # Tensors of several 64 Ki-element generation chunks.
    options = {**SMALL, "tokens": 300, "channels": 256, "hidden": 384, "blocks": 2, "seed": 11}
    one = run_digest(options, OMP_NUM_THREADS="1")
    two = run_digest(options, OMP_NUM_THREADS="2")
    assert one["digest"] == two["digest"]
    assert one["check"] == two["check"]
    assert one["blas_threads"] == 1
    assert run_digest(options, OPENBLAS_NUM_THREADS="1")["blas_threads"] == 1
    assert 1 <= run_digest(options)["blas_threads"] <= 4


def e4m3_table():
    """All 256 OCP E4M3 codes: bias 7, no infinities, S.1111.111 is NaN."""
    table = np.empty(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exponent, mantissa = (code >> 3) & 0xF, code & 0x7
        if exponent == 0xF and mantissa == 0x7:
            table[code] = np.nan
        elif exponent == 0:
            table[code] = sign * mantissa / 8 * 2.0 ** (1 - 7)
        else:
            table[code] = sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)
    return table


@pytest.mark.parametrize("seed", [0, 21])
def test_device_bytes_fp8_are_nearest(ctx, seed):
    w = workload(ctx, blocks=3, precision="fp8", seed=seed)
    table = e4m3_table()
    assert table[0x7E] == 448.0 and table[0x01] == 2.0 ** -9
    for name in ("x", "w1", "w2"):
        t = w.tensor(name)
        assert t["dtype"] == "f143" and t["scale"] == -2
        values = floats(w.values(name)).astype(np.float64)
        codes = np.frombuffer(w.device_bytes(name), dtype=np.uint8)
        assert codes.size == values.size == t["rows"] * t["cols"] * t["sequence"]
        decoded = table[codes] * 2.0 ** t["scale"]
        assert np.all(np.isfinite(decoded))
        grid = np.unique(table[np.isfinite(table)]) * 2.0 ** t["scale"]
        at = np.clip(np.searchsorted(grid, values), 1, grid.size - 1)
        nearest = np.minimum(np.abs(grid[at - 1] - values), np.abs(grid[at] - values))
        np.testing.assert_array_equal(np.abs(decoded - values), nearest)
        assert np.mean(decoded != 0) > 0.9  # the scale keeps the values in range


@pytest.mark.parametrize("seed", [0, 21])
def test_device_bytes_fp16_are_nearest(ctx, seed):
    w = workload(ctx, blocks=3, precision="fp16", seed=seed)
    for name in ("x", "w1", "w2"):
        values = floats(w.values(name))
        device = np.frombuffer(w.device_bytes(name), dtype=np.uint16)
        np.testing.assert_array_equal(device, values.astype(np.float16).view(np.uint16))


# The cosine alone decides, unless a test says otherwise.
COSINE_ONLY = {"atol": 1e30, "rtol": 0.0, "norm_tolerance": 1e30}


def check(ctx, reference, device, dtype="f32", threshold=0.99, **criteria):
    rows, cols = reference.shape
    return native.check_outputs(ctx, reference.astype(np.float32).tobytes(), device.tobytes(), dtype,
                                rows, cols, {**COSINE_ONLY, "min_cosine": threshold, **criteria})


def row_cosine(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(a @ b / math.sqrt((a @ a) * (b @ b)))


@pytest.fixture
def data():
    return np.random.default_rng(17).standard_normal((9, 17)).astype(np.float32)


def test_check_identical_data_passes(ctx, data):
    result = check(ctx, data, data)
    assert result["passed"] and result["min_cosine"] == 1.0 and result["mean_cosine"] == 1.0
    assert result["max_abs_error"] == 0.0 and result["failed_rows"] == 0
    assert result["threshold"] == 0.99 and result["rows"] == 9 and result["cols"] == 17
    half = data.astype(np.float16)
    result = check(ctx, half.astype(np.float32), half, "f16")
    assert result["passed"] and result["min_cosine"] == 1.0
    codes = np.random.default_rng(3).integers(0, 0x7F, size=data.shape, dtype=np.uint8)
    result = check(ctx, e4m3_table()[codes], codes, "f143")
    assert result["passed"] and result["min_cosine"] == 1.0 and result["max_abs_error"] == 0.0


@pytest.mark.parametrize("delta", [0.3, 8.0])
def test_check_perturbed_row(ctx, data, delta):
    device = data.copy()
    device[4, 5] += np.float32(delta)
    result = check(ctx, data, device)
    expected = row_cosine(data[4], device[4])
    assert result["min_cosine_row"] == 4
    assert result["min_cosine"] == pytest.approx(expected, abs=1e-12)
    assert result["mean_cosine"] == pytest.approx((8 + expected) / 9, abs=1e-12)
    assert result["max_abs_error_index"] == 4 * 17 + 5
    assert (result["max_abs_error_row"], result["max_abs_error_col"]) == (4, 5)
    assert result["max_abs_error"] == float(abs(np.float64(device[4, 5]) - np.float64(data[4, 5])))
    failed = expected < 0.99
    assert failed == (delta > 1)  # the large perturbation fails, the small one passes
    assert result["passed"] is not failed
    assert result["failed_rows"] == result["below_threshold_rows"] == int(failed)
    assert result["failed_row_list"] == ([4] if failed else [])


def test_check_nonfinite_and_zero_rows(ctx, data):
    device, reference = data.copy(), data.copy()
    device[2, 3] = np.nan
    reference[6, 0] = np.inf
    device[1] = 0
    reference[8] = 0
    result = check(ctx, reference, device)
    assert not result["passed"]
    assert result["failed_rows"] == 4 and result["failed_row_list"] == [1, 2, 6, 8]
    assert result["nonfinite_rows"] == 2 and result["zero_norm_rows"] == 2
    assert result["below_threshold_rows"] == 0
    assert result["min_cosine"] == 1.0 and result["min_cosine_row"] not in (1, 2, 6, 8)
    # The error ignores nonfinite elements; zeroed rows count.
    want = max(np.abs(data[1]).max(), np.abs(data[8]).max())
    assert result["max_abs_error"] == float(want)
    nan_only = data.copy()
    nan_only[0, 0] = np.nan
    result = check(ctx, data, nan_only)
    assert (result["passed"], result["failed_rows"], result["nonfinite_rows"]) == (False, 1, 1)
    # A row of zeros on both sides is equal (a class token's zero patch row); on one side it fails.
    both = data.copy()
    both[3] = 0
    result = check(ctx, both, both.copy())
    assert result["passed"] and result["zero_norm_rows"] == 0 and result["min_cosine"] == 1.0
    result = check(ctx, both, data)
    assert not result["passed"] and result["failed_row_list"] == [3] and result["zero_norm_rows"] == 1


def test_check_rejects_bad_arguments(ctx, data):
    with pytest.raises(native.IpuError, match="unknown device type 'f8'"):
        check(ctx, data, data, "f8")
    with pytest.raises(native.IpuError, match="threshold"):
        check(ctx, data, data, "f32", 1.5)
    with pytest.raises(native.IpuError, match="atol -1"):
        check(ctx, data, data, atol=-1.0)
    rows, cols = data.shape
    with pytest.raises(native.IpuError, match="'rtol' must be a number"):
        native.check_outputs(ctx, data.tobytes(), data.tobytes(), "f32", rows, cols,
                             {"min_cosine": 0.9, "atol": 0.1, "norm_tolerance": 0.1})


@pytest.mark.parametrize("atol,rtol", [(0.05, 0.0), (0.01, 0.1), (0.0, 0.02)])
def test_check_elementwise_bound(ctx, data, atol, rtol):
    # Perturb elements by amounts around their bounds; count the failures in numpy.
    noise = np.random.default_rng(5).uniform(-0.2, 0.2, data.shape).astype(np.float32)
    device = (data + noise).astype(np.float32)
    result = check(ctx, data, device, "f32", -1.0, atol=atol, rtol=rtol)
    r, d = data.astype(np.float64), device.astype(np.float64)
    err, bound = np.abs(d - r), atol + rtol * np.abs(r)
    over = err > bound
    assert result["elementwise_failures"] == int(over.sum()) > 0
    assert result["passed"] is False and result["elementwise_passed"] is False
    assert result["cosine_passed"] is True
    first = int(np.flatnonzero(over)[0])
    assert result["first_failed_element"]["index"] == first
    assert (result["first_failed_element"]["row"], result["first_failed_element"]["col"]) == divmod(first, 17)
    ratio = np.where(bound > 0, err / np.where(bound > 0, bound, 1), err * 1e300)
    worst = int(np.argmax(ratio))
    w = result["worst_element"]
    assert w["index"] == worst and w["expected"] == pytest.approx(r.flat[worst])
    assert w["got"] == pytest.approx(d.flat[worst]) and w["abs_error"] == pytest.approx(err.flat[worst])
    assert w["bound"] == pytest.approx(bound.flat[worst])
    # The smallest atol that passes at this rtol, and that it does pass.
    needed = float(np.max(err - rtol * np.abs(r)))
    assert result["atol_needed"] == pytest.approx(needed, rel=1e-12)
    again = check(ctx, data, device, "f32", -1.0, atol=needed * (1 + 1e-9), rtol=rtol)
    assert again["elementwise_failures"] == 0 and again["passed"]


def test_check_norm_ratio_catches_a_scale_error(ctx, data):
    # Outputs 4x too small: every cosine is 1, the norm ratio is 1/4.
    device = (data / 4).astype(np.float32)
    result = check(ctx, data, device, "f32", 0.999, norm_tolerance=0.01)
    assert result["min_cosine"] == pytest.approx(1.0, abs=1e-12) and result["cosine_passed"]
    assert result["norm_ratio"] == pytest.approx(0.25, rel=1e-9)
    assert result["norm_passed"] is False and result["passed"] is False
    want = float(np.linalg.norm(data.astype(np.float64) * 1.01) / np.linalg.norm(data.astype(np.float64)))
    near = check(ctx, data, (data * np.float32(1.01)).astype(np.float32), "f32", 0.999, norm_tolerance=0.02)
    assert near["norm_ratio"] == pytest.approx(want, rel=1e-6) and near["passed"]


@pytest.mark.parametrize("dtype,array", [
    ("float32", np.arange(84, dtype=np.float32).reshape(7, 12) / 7),
    ("f16", np.linspace(-3, 3, 15).astype(np.float16).reshape(3, 5)),
    ("f143", np.arange(256, dtype=np.uint8)),
    ("uint8", np.arange(24, dtype=np.uint8).reshape(2, 3, 4)),
    ("float32", np.array(2.5, dtype=np.float32)),
    ("float16", np.zeros((0, 4), dtype=np.float16)),
])
def test_npy_loads_with_numpy(tmp_path, dtype, array):
    path = tmp_path / "sub" / "a.npy"
    npy.write_npy(path, array.tobytes(), dtype, array.shape)
    loaded = np.load(path)
    assert loaded.dtype == array.dtype and loaded.shape == array.shape
    np.testing.assert_array_equal(loaded, array)
    raw = path.read_bytes()
    assert raw[:8] == b"\x93NUMPY\x01\x00"
    assert (10 + int.from_bytes(raw[8:10], "little")) % 64 == 0
    assert [p.name for p in path.parent.iterdir()] == ["a.npy"]  # no temporary left


def test_npy_of_workload_tensors(ctx, tmp_path):
    w = workload(ctx, blocks=2, precision="fp8", seed=8)
    w.reference_run()
    t = w.tensor("w1")
    shape = (t["sequence"], t["rows"], t["cols"])
    npy.write_npy(tmp_path / "w1.npy", w.values("w1"), "float32", shape)
    npy.write_npy(tmp_path / "w1_f143.npy", w.device_bytes("w1"), "f143", shape)
    npy.write_npy(tmp_path / "y.npy", w.reference_output("y"), "float32", (7, 12))
    np.testing.assert_array_equal(np.load(tmp_path / "w1.npy"), floats(w.values("w1"), shape))
    codes = np.load(tmp_path / "w1_f143.npy")
    assert codes.dtype == np.uint8 and codes.shape == shape
    assert codes.tobytes() == w.device_bytes("w1")
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), floats(w.reference_output("y"), (7, 12)))
    with pytest.raises(ValueError, match="do not hold"):
        npy.write_npy(tmp_path / "bad.npy", b"\0" * 5, "float32", (2,))
    with pytest.raises(ValueError, match="unsupported dtype"):
        npy.write_npy(tmp_path / "bad.npy", b"", "int64", (0,))
    assert not (tmp_path / "bad.npy").exists()
