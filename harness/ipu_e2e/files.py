"""The file boundary: every file the tools read or write on a user's behalf
goes through here.  A file read must be a regular file (a FIFO, a device, a
socket or a folder is refused before anything blocks or is read: it is opened
without blocking and checked on its descriptor), no larger than the limit the
caller states (checked before a byte is read); a file named inside a folder by
someone else's data (an ONNX model's external data) must stay inside that
folder, with no `..` and no symbolic link leading out; a name taken from a
model or a description never becomes a path (file_name derives a safe one,
and the folder's manifest keeps the name); an output replaces only a regular
file, never a device or a FIFO.  Errors are InputError (a ValueError: the
commands exit 2 with its one line), naming the file and what was expected.
"""
import hashlib
import json
import os
import re
import stat
import sys
from pathlib import Path, PurePosixPath

# JSON the tools wrote themselves (result.json, sweeps, goldens, profiles) and JSON a user writes by hand.
JSON_BYTES = 256 << 20
MANIFEST = "tensors.json"
SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}")


class InputError(ValueError):
    """A file refused at the boundary: exit 2 with this message."""


def kind(mode):
    """What a file of this st_mode is, in words."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path, what, limit=None, follow=True):
    """A binary file object of the regular file at path, at most `limit` bytes (None: any).  `what`
    names the flag or the role of the file in messages ("--graph", "external data of tensor 'w'")."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(f"{what} {path}: cannot read it: No such file or directory") from None
    except OSError as error:
        if not follow and error.errno == 40:  # ELOOP: the last component is a symbolic link
            raise InputError(f"{what} {path}: a symbolic link; expected a regular file") from None
        raise InputError(f"{what} {path}: cannot read it: {error.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{what} {path}: {kind(info.st_mode)}; expected a regular file")
        if limit is not None and info.st_size > limit:
            raise InputError(f"{what} {path}: {info.st_size:,} bytes; at most {limit:,} are read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path, what, limit=None):
    """The bytes of the regular file at path (open_regular's checks); one that grows past the limit
    while it is read is refused too."""
    with open_regular(path, what, limit) as handle:
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise InputError(f"{what} {path}: more than {limit:,} bytes; at most {limit:,} are read")
    return data


def read_text(path, what, limit=JSON_BYTES):
    """The UTF-8 text of the regular file at path."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{what} {path}: not UTF-8 text (byte 0x{data[error.start]:02x} at offset "
                         f"{error.start})") from None


def parse_json(text, where):
    """text as JSON; InputError naming `where` when it is not JSON or nests deeper than the parser goes."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}: not JSON: {error.msg} (line {error.lineno}, column {error.colno})") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply (more than about {sys.getrecursionlimit()} levels of "
                         f"arrays and objects)") from None


def read_json(path, what, limit=JSON_BYTES):
    """The JSON document in the regular file at path, at most `limit` bytes."""
    return parse_json(read_text(path, what, limit), f"{what} {path}")


def inside(folder, location, what):
    """The regular file `location` names relative to `folder` (as a model names its external data): a
    relative path with no `..`, whose resolved path (symbolic links followed) is still inside the
    folder.  Returns the resolved path."""
    relative = PurePosixPath(location)
    if not location or "\0" in location or relative.is_absolute():
        raise InputError(f"{what}: location {location!r} is not a path relative to the folder {folder}")
    if ".." in relative.parts:
        raise InputError(f"{what}: location {location!r} names a parent folder ('..'); it must stay inside "
                         f"{folder}")
    base = os.path.realpath(folder)
    target = os.path.realpath(os.path.join(base, location))
    if os.path.commonpath([base, target]) != base:
        raise InputError(f"{what}: location {location!r} leads outside {folder} (to {target}) through a "
                         f"symbolic link")
    return Path(target)


def file_name(name, suffix):
    """A file name for the tensor or workload `name` with `suffix` (".npy"): the name itself when it is
    a plain file name (letters, digits, '_', '-', '.' not first, at most 100 characters), else its
    plain characters with '_' for the others and a digest of the whole name, so two names never share
    a file and no name becomes a path."""
    if SAFE_NAME.fullmatch(name):
        return name + suffix
    plain = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".")[:80]
    return f"{plain}~{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}{suffix}"


def manifest(names):
    """What a folder's tensors.json holds: {"tensors": {file stem: tensor name}}, the stem of every file
    file_name gives the name (`<stem>.npy`, `<stem>.reference.npy`)."""
    return {"tensors": {file_name(n, ""): n for n in names}}


def replaceable(path, what):
    """Refuse an output path that holds something other than a regular file (a device, a FIFO, a
    socket, a folder, a symbolic link): an output never replaces one."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as error:
        raise InputError(f"{what} {path}: cannot write it: {error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{what} {path}: {kind(info.st_mode)}; an output replaces only a regular file")
