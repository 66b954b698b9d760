"""Workloads from graph descriptions, on the harness side (`ipu-e2e-test
--graph FILE`, `--export-graph FILE`).  A description is the JSON document
the library reads and writes (workloads/description.c); the tensors whose
values it marks "given" take them from .npy files, one per tensor (FP32 or
FP16, rows x cols, or members x rows x cols for a sequence), in the folder
--values names (default: the description's own name with `.values` for
`.json`, beside it).  A file is named after its tensor only when the name is a
plain file name (files.file_name: `<tensor>.npy`; any other name gets a safe
file name and the folder's tensors.json keeps the tensor's name), so no name
becomes a path, and a file whose symbolic link leads out of the folder is
refused.  A description is at most DESCRIPTION_BYTES, and each array
exactly its tensor's shape, both checked before they are read.  Every error
names the file and what is wrong, and exits 2.
"""
import array
import math
import os
import struct
from pathlib import Path

from . import artifacts, files, npy
from .command import UsageError
from .native import INVALID_ARGUMENT, IpuError, Workload
from .profiles import C600_BYTES


# A description holds names and shapes, not values (the 27-layer ViT's is one Repeat of a layer): 8 MiB
# is about 57,000 tensors, and a description that size the library refuses peaks at about 210 MB of
# RSS (a 25 MiB one took 575 MB), so a refused input stays under 256 MB.
DESCRIPTION_BYTES = 8 << 20


def values_folder(path, values=None):
    """The folder of a description's given values."""
    return Path(values) if values else path.with_name(path.stem + ".values")


def load(path):
    """The description at path, parsed (not yet checked by the library)."""
    return files.read_json(path, "--graph", DESCRIPTION_BYTES)


def given_values(workload, folder):
    """Set every "given" tensor's values from folder/<tensor>.npy."""
    for tensor in workload.info()["tensors"]:
        if tensor.get("values") != "given":
            continue
        name, members = tensor["name"], tensor["sequence"]
        path = folder / files.file_name(name, ".npy")
        if not os.path.lexists(path):
            raise UsageError(f"{path}: missing: tensor '{name}' takes given values ({members} x "
                             f"{tensor['rows']} x {tensor['cols']} floats)")
        path = files.inside(folder, path.name, f"--values {folder}: tensor '{name}'")
        rows, cols = tensor["rows"], tensor["cols"]
        expected = (members, rows, cols) if members > 1 else (rows, cols)
        dtype, shape, data = npy.read_npy(path, "--values", limit=members * rows * cols * 4)
        if shape not in ((rows, cols) if members == 1 else (), (members, rows, cols)) or dtype == "uint8":
            raise UsageError(f"{path}: a {dtype} array of shape {shape}; tensor '{name}' takes float32 or float16 "
                             f"values of shape {expected}")
        if dtype == "float16":
            data = array.array("f", struct.unpack(f"={len(data) // 2}e", data)).tobytes()
        try:
            workload.set_values(name, data)
        except IpuError as error:
            raise UsageError(f"{path}: {error.message}") from None


def check_sizes(description, limit, where):
    """Refuse a tensor whose FP32 values (what the host makes or reads for it) exceed `limit` bytes, before
    the library makes them; the fields' types and ranges are the library's to check."""
    tensors = description.get("tensors") if isinstance(description, dict) else None
    for k, t in enumerate(tensors if isinstance(tensors, list) else []):
        sizes = [t.get(f, 1) for f in ("rows", "cols", "sequence")] if isinstance(t, dict) else []
        if all(type(s) is int and s > 0 for s in sizes) and math.prod(sizes) * 4 > limit:
            raise UsageError(f"{where}: tensors[{k}] ('{str(t.get('name'))[:64]}'): {' x '.join(map(str, sizes))} "
                             f"FP32 values are {math.prod(sizes) * 4:,} bytes; the device holds {limit:,}")


def workload(ctx, path, values=None, limit=None):
    """The workload of the description at path, its given values set; no tensor larger than `limit`
    bytes of FP32 values (None: the c600's capacity)."""
    folder = values_folder(path, values)
    if values and not folder.is_dir():
        raise UsageError(f"--values {folder}: {'no such folder' if not folder.exists() else 'not a folder'}")
    description = load(path)
    check_sizes(description, limit or C600_BYTES, f"--graph {path}")
    try:
        built = Workload(ctx, {"workload": "graph", "graph": description})
    except IpuError as error:
        if error.status != INVALID_ARGUMENT:
            raise
        raise UsageError(f"--graph {path}: {error.message}") from None
    given_values(built, folder)
    return built


def export(workload, path):
    """Write the workload's description to path (atomically) and its given
    values beside it, as workload() reads them back."""
    info = workload.info()
    folder = values_folder(path)
    given = [t for t in info["tensors"] if t.get("values") == "given"]
    for tensor in given:
        members, shape = tensor["sequence"], (tensor["rows"], tensor["cols"])
        npy.write_npy(folder / files.file_name(tensor["name"], ".npy"), workload.values(tensor["name"]), "float32",
                      (members,) + shape if members > 1 else shape)
    if given:
        artifacts.write_json(folder / files.MANIFEST, files.manifest([t["name"] for t in given]))
    artifacts.write_json(path, info)
