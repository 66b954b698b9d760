"""Workloads from graph descriptions, on the harness side (`ipu-e2e-test
--graph FILE`, `--export-graph FILE`).  A description is the JSON document
the library reads and writes (workloads/description.c); the tensors whose
values it marks "given" take them from .npy files, one per tensor named
after it (`<tensor>.npy`, FP32 or FP16, rows x cols, or members x rows x
cols for a sequence), in the folder --values names (default: the
description's own name with `.values` for `.json`, beside it).  Every error
names the file and what is wrong, and exits 2.
"""
import array
import json
import struct
from pathlib import Path

from . import artifacts, npy
from .command import UsageError
from .native import INVALID_ARGUMENT, IpuError, Workload


def values_folder(path, values=None):
    """The folder of a description's given values."""
    return Path(values) if values else path.with_name(path.stem + ".values")


def load(path):
    """The description at path, parsed (not yet checked by the library)."""
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise UsageError(f"--graph {path}: not a text file (a graph description is JSON)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"--graph {path}: not JSON: {error.msg} (line {error.lineno}, column {error.colno})") \
            from None


def given_values(workload, folder):
    """Set every "given" tensor's values from folder/<tensor>.npy."""
    for tensor in workload.info()["tensors"]:
        if tensor.get("values") != "given":
            continue
        name, members = tensor["name"], tensor["sequence"]
        path = folder / f"{name}.npy"
        if not path.is_file():
            raise UsageError(f"{path}: missing: tensor '{name}' takes given values ({members} x "
                             f"{tensor['rows']} x {tensor['cols']} floats)")
        dtype, shape, data = npy.read_npy(path)
        rows, cols = tensor["rows"], tensor["cols"]
        expected = (members, rows, cols) if members > 1 else (rows, cols)
        if shape not in ((rows, cols) if members == 1 else (), (members, rows, cols)) or dtype == "uint8":
            raise UsageError(f"{path}: a {dtype} array of shape {shape}; tensor '{name}' takes float32 or float16 "
                             f"values of shape {expected}")
        if dtype == "float16":
            data = array.array("f", struct.unpack(f"={len(data) // 2}e", data)).tobytes()
        try:
            workload.set_values(name, data)
        except IpuError as error:
            raise UsageError(f"{path}: {error.message}") from None


def workload(ctx, path, values=None):
    """The workload of the description at path, its given values set."""
    try:
        built = Workload(ctx, {"workload": "graph", "graph": load(path)})
    except IpuError as error:
        if error.status != INVALID_ARGUMENT:
            raise
        raise UsageError(f"--graph {path}: {error.message}") from None
    given_values(built, values_folder(path, values))
    return built


def export(workload, path):
    """Write the workload's description to path (atomically) and its given
    values beside it, as workload() reads them back."""
    info = workload.info()
    folder = values_folder(path)
    for tensor in info["tensors"]:
        if tensor.get("values") == "given":
            members, shape = tensor["sequence"], (tensor["rows"], tensor["cols"])
            npy.write_npy(folder / f"{tensor['name']}.npy", workload.values(tensor["name"]), "float32",
                          (members,) + shape if members > 1 else shape)
    artifacts.write_json(path, info)
