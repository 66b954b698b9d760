"""NumPy .npy files written and read with the standard library only (the
harness does not depend on numpy): format version 1.0, little-endian, C order,
for float32, float16 and uint8 arrays (uint8 holds raw FP8 codes: F143/F152 bytes as the
device stores them); read_npy takes other plain numeric descrs when asked.  A file
read is checked (its header bounded, its data size against its shape) before its
data is read.  The data arrives as bytes in the host's byte order (as
the library returns them) and is written atomically through
artifacts.write_bytes.  The header is the magic string, the version, a 2-byte
little-endian header length and a Python-literal dict padded with spaces to a
multiple of 64 bytes and ended by a newline, as numpy.lib.format writes it.
"""
import ast
import os
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


# A header of format 2.0 or 3.0 may claim 4 GiB; numpy writes about 128 bytes.
HEADER_BYTES = 1 << 16
# The descr of each dtype read_npy returns by default, and its name.
FLOAT_DESCRS = {"<f4": "float32", ">f4": "float32", "<f2": "float16", ">f2": "float16", "|u1": "uint8"}


def _either(names):
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def read_header(handle, where):
    """(descr, fortran_order, shape, offset of the data) of the .npy file open as `handle`: format 1.0
    to 3.0, the header a dict of exactly descr, fortran_order and shape, shape a tuple of non-negative
    ints; ValueError naming `where` otherwise."""
    prefix = handle.read(12)
    if prefix[:6] != MAGIC or len(prefix) < 10 or prefix[6] not in (1, 2, 3):
        raise ValueError(f"{where}: not a .npy file (format 1.0 to 3.0)")
    length, start = (int.from_bytes(prefix[8:10], "little"), 10) if prefix[6] == 1 else \
        (int.from_bytes(prefix[8:12], "little"), 12)
    if length > HEADER_BYTES:
        raise ValueError(f"{where}: a .npy header of {length:,} bytes (at most {HEADER_BYTES:,} are read)")
    handle.seek(start)
    text = handle.read(length)
    try:
        header = ast.literal_eval(text.decode("latin1"))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        header = None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise ValueError(f"{where}: the .npy header is not a dict with descr, fortran_order and shape")
    descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    if not isinstance(descr, str):
        raise ValueError(f"{where}: an array of a structured dtype ({str(descr)[:80]}); expected plain numbers")
    if not isinstance(shape, tuple) or not all(type(d) is int and d >= 0 for d in shape):
        raise ValueError(f"{where}: the .npy shape {str(shape)[:80]} is not a tuple of non-negative integers")
    return descr, fortran, shape, start + length


def read_npy(path, what=None, limit=None, descrs=None):
    """(dtype name, shape, host-order bytes) of the .npy file at `path`: format 1.0 to 3.0, C order, a
    descr of `descrs` ({descr: name}, default FLOAT_DESCRS: float32, float16 or uint8, either byte
    order).  The file is a regular file (files.open_regular) whose data is exactly what its header's
    shape needs, at most `limit` bytes: checked before the data is read.  ValueError naming the file
    (after `what`, a flag) and what is wrong otherwise."""
    from .files import open_regular
    where = f"{what} {path}" if what else str(path)
    descrs = descrs or FLOAT_DESCRS
    with open_regular(path, what or "file") as handle:
        descr, fortran, shape, offset = read_header(handle, where)
        if descr not in descrs or fortran is not False:
            raise ValueError(f"{where}: an array of {descr!r} in {'Fortran' if fortran else 'C'} order with "
                             f"shape {shape}; expected C order and {_either(list(dict.fromkeys(descrs.values())))}")
        size = int(descr[2:])
        count = spread = 1
        for d in shape:
            count *= d
            spread *= max(d, 1)
        bound = limit if limit is not None else 1 << 62  # numpy cannot make a shape past 2^63 even when empty
        if spread * size > bound:
            zeros = f" ({spread * size:,} with its zero dimensions as 1)" if spread != count else ""
            raise ValueError(f"{where}: shape {shape} of {descr} is {count * size:,} bytes{zeros}; at most "
                             f"{bound:,} are read")
        stored = os.fstat(handle.fileno()).st_size - offset
        if stored != count * size:
            raise ValueError(f"{where}: {stored:,} bytes of data for shape {shape} of {descr} ({count * size:,} "
                             f"expected)")
        data = handle.read(count * size)
    if size > 1 and (descr[0] == ">") == (sys.byteorder == "little"):
        data = _swap(data, size)
    return descrs[descr], shape, data
