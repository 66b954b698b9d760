"""NumPy .npy files written with the standard library only (the harness does
not depend on numpy): format version 1.0, little-endian, C order, for float32,
float16 and uint8 arrays (uint8 holds raw FP8 codes: F143/F152 bytes as the
device stores them).  The data arrives as bytes in the host's byte order (as
the library returns them) and is written atomically through
artifacts.write_bytes.  The header is the magic string, the version, a 2-byte
little-endian header length and a Python-literal dict padded with spaces to a
multiple of 64 bytes and ended by a newline, as numpy.lib.format writes it.
"""
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


def _little_endian(data, size):
    if sys.byteorder == "little" or size == 1:
        return bytes(data)
    swapped = bytearray(data)
    for k in range(size):
        swapped[k::size] = data[size - 1 - k::size]
    return bytes(swapped)


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
