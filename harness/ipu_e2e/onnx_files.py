"""ONNX model files read for the importer through the file boundary
(files.py): the model a regular file of at most protobuf's 2 GiB, parsed
without following its external data; each tensor's external data then read
only from a regular file inside the model's folder, sized against the
tensor first; the model checked by onnx.checker.  Errors are ModelError or
files.InputError, naming the file.
"""
import math
import os
import warnings

import numpy as np
import onnx

from . import files
from .onnx_values import ModelError
from .profiles import C600_BYTES as DEVICE_BYTES

MODEL_BYTES = (2 << 30) - 1  # protobuf's own limit on a message


def load_model(path, limit=DEVICE_BYTES):
    """The model at path (a regular file), its external data read through the file boundary, checked;
    ModelError or files.InputError naming the file otherwise."""
    data = files.read_bytes(path, "--model", MODEL_BYTES)
    try:
        with warnings.catch_warnings():  # protobuf warns of a bad tag before it raises
            warnings.simplefilter("ignore")
            model = onnx.load_model_from_string(data)
    except Exception as error:  # protobuf's DecodeError and friends
        raise ModelError(f"{path}: not an ONNX model ({type(error).__name__})") from None
    del data
    load_external_data(model, path, limit)
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, onnx.onnx_cpp2py_export.checker.ValidationError) as error:
        raise ModelError(f"{path}: not a valid ONNX model: {str(error).splitlines()[0]}") from None
    except Exception as error:  # a model the checker cannot serialize (over 2 GB with its data)
        raise ModelError(f"{path}: not a valid ONNX model ({type(error).__name__})") from None
    return model


def tensors_of(graph):
    """Every TensorProto of a graph and its subgraphs (initializers and attributes)."""
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("g"):
                yield from tensors_of(a.g)
            for g in a.graphs:
                yield from tensors_of(g)


def load_external_data(model, path, limit):
    """Read each tensor's external data into the tensor: its location a regular file inside the model's
    folder (files.inside: no '..', no symbolic link out), its length what the tensor's dims need (each at
    most `limit` bytes, all together at most twice that), its range inside the file, checked before a
    byte is read."""
    total = 0
    for tensor in tensors_of(model.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        what = f"--model {path}: external data of tensor '{tensor.name}'"
        fields = {entry.key: entry.value for entry in tensor.external_data}
        dtype = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE.get(tensor.data_type)
        if dtype is None or tensor.data_type == onnx.TensorProto.STRING:
            raise ModelError(f"{what}: ONNX data type {tensor.data_type} is not numeric")
        dims = list(tensor.dims)
        size = math.prod(dims) * np.dtype(dtype).itemsize if all(d >= 0 for d in dims) else -1
        if size < 0 or size > limit or total + size > 2 * limit:
            raise ModelError(f"{what}: dims {dims} need {size:,} bytes; at most {limit:,} a tensor and "
                             f"{2 * limit:,} in all (what the device holds)")
        try:
            offset, length = int(fields.get("offset", "0")), int(fields.get("length", str(size)))
        except ValueError:
            raise ModelError(f"{what}: offset {fields.get('offset')!r} and length {fields.get('length')!r} must be "
                             f"integers") from None
        if length != size or offset < 0:
            raise ModelError(f"{what}: {length:,} bytes at offset {offset:,}; dims {dims} need {size:,}")
        source = files.inside(path.parent, fields.get("location", ""), what)
        with files.open_regular(source, what) as handle:
            stored = os.fstat(handle.fileno()).st_size
            if offset + length > stored:
                raise ModelError(f"{what}: bytes {offset:,} to {offset + length:,} of {source}, which holds "
                                 f"{stored:,}")
            handle.seek(offset)
            tensor.raw_data = handle.read(length)
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT
        total += size
