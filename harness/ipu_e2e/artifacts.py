"""Artifacts written atomically: a temporary file in the same folder, flushed
and synced, then renamed over the target, so an interrupted run never leaves a
half-written file.  The target must be a regular file or not yet exist
(files.replaceable): a device or a FIFO is never replaced.
"""
import json
import os
import tempfile
from pathlib import Path

from .files import replaceable


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(path, data):
    path = Path(path)
    replaceable(path, "output")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def write_json(path, value, compact=False):
    """value as JSON: indented with sorted keys, or compact (large reports)."""
    text = json.dumps(value, separators=(",", ":")) if compact else json.dumps(value, indent=2, sort_keys=True)
    write_bytes(path, (text + "\n").encode())
