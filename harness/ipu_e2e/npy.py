"""NumPy .npy files written and read with the standard library only (the
harness does not depend on numpy): format version 1.0, little-endian, C order,
for float32, float16 and uint8 arrays (uint8 holds raw FP8 codes: F143/F152 bytes as the
device stores them).  The data arrives as bytes in the host's byte order (as
the library returns them) and is written atomically through
artifacts.write_bytes.  The header is the magic string, the version, a 2-byte
little-endian header length and a Python-literal dict padded with spaces to a
multiple of 64 bytes and ended by a newline, as numpy.lib.format writes it.
"""
import ast
import sys

from .artifacts import write_bytes

MAGIC = b"\x93NUMPY"
ALIGN = 64

# dtype name -> (descr, item size); device type names map to their storage.
DTYPES = {
    "float32": ("<f4", 4), "f32": ("<f4", 4),
    "float16": ("<f2", 2), "f16": ("<f2", 2),
    "uint8": ("|u1", 1), "f143": ("|u1", 1), "f152": ("|u1", 1),
}


def _swap(data, size):
    swapped = bytearray(data)
    for k in range(size):
        swapped[k::size] = data[size - 1 - k::size]
    return bytes(swapped)


def _little_endian(data, size):
    return bytes(data) if sys.byteorder == "little" or size == 1 else _swap(data, size)


def npy_bytes(data, dtype, shape):
    """The bytes of a .npy file holding `data` (host-order bytes) as an array
    of `dtype` ("float32"/"f32", "float16"/"f16", "uint8"/"f143"/"f152") and
    `shape` (a tuple of non-negative ints)."""
    if dtype not in DTYPES:
        raise ValueError(f"npy: unsupported dtype {dtype!r} (expected one of {', '.join(DTYPES)})")
    descr, size = DTYPES[dtype]
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"npy: negative dimension in shape {shape}")
    count = 1
    for d in shape:
        count *= d
    data = bytes(data)
    if len(data) != count * size:
        raise ValueError(f"npy: {len(data)} bytes do not hold {shape} {dtype} "
                         f"({count * size} bytes)")
    shape_text = "(" + "".join(f"{d}, " for d in shape)[:-2] + ("," if len(shape) == 1 else "") + ")"
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}"
    # magic (6) + version (2) + length (2) + header + padding + newline
    total = len(MAGIC) + 4 + len(header) + 1
    header += " " * (-total % ALIGN) + "\n"
    encoded = header.encode("latin1")
    if len(encoded) > 0xFFFF:
        raise ValueError("npy: header too long for format version 1.0")
    prefix = MAGIC + bytes([1, 0]) + len(encoded).to_bytes(2, "little")
    return prefix + encoded + _little_endian(data, size)


def write_npy(path, data, dtype, shape):
    """Write `data` as a .npy file at `path` atomically (see npy_bytes)."""
    write_bytes(path, npy_bytes(data, dtype, shape))


def read_npy(path):
    """(dtype name, shape, host-order bytes) of the .npy file at `path`: format
    1.0 to 3.0, C order, a dtype of DTYPES (float32, float16 or uint8, either
    byte order); ValueError naming the file and what is wrong otherwise."""
    raw = path.read_bytes()
    if raw[:6] != MAGIC or len(raw) < 10 or raw[6] not in (1, 2, 3):
        raise ValueError(f"{path}: not a .npy file (format 1.0 to 3.0)")
    length, start = (int.from_bytes(raw[8:10], "little"), 10) if raw[6] == 1 else \
        (int.from_bytes(raw[8:12], "little"), 12)
    try:
        header = ast.literal_eval(raw[start:start + length].decode("latin1"))
        descr, fortran, shape = header["descr"], header["fortran_order"], tuple(header["shape"])
    except (ValueError, SyntaxError, KeyError, TypeError, MemoryError, RecursionError):
        raise ValueError(f"{path}: the .npy header is not a dict with descr, fortran_order and shape") from None
    names = {"<f4": "float32", ">f4": "float32", "<f2": "float16", ">f2": "float16", "|u1": "uint8"}
    if descr not in names or fortran is not False or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"{path}: an array of {descr!r} in {'Fortran' if fortran else 'C'} order with shape "
                         f"{shape}; expected C order and float32, float16 or uint8")
    size = DTYPES[names[descr]][1]
    count = 1
    for d in shape:
        count *= d
    data = raw[start + length:]
    if len(data) != count * size:
        raise ValueError(f"{path}: {len(data)} bytes of data for shape {shape} of {descr} ({count * size} "
                         f"expected)")
    if size > 1 and (descr[0] == ">") == (sys.byteorder == "little"):
        data = _swap(data, size)
    return names[descr], shape, data
