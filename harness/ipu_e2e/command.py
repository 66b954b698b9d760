"""Shared command-line plumbing: the exit codes every command uses, argument
types, and the mapping of errors to a one-line message and an exit code
(usage and input errors 2, device faults and internal errors 3).
"""
import argparse
import os
import sys

from . import files, profiles
from .runner import DeviceFault
from .native import INVALID_ARGUMENT, IO, MALFORMED, IpuError

EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_FAULT = 0, 1, 2, 3


class UsageError(Exception):
    """Bad input: exit code 2 with the message."""


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def number_in(lo, hi, expected, kind=float):
    """An argparse type: a number of kind (float or int) with lo <= value <=
    hi (so not NaN), else the message says `expected`."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got '{text}'") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
        return value
    return parse


def int_in(lo, hi):
    """An argparse type: an integer in lo..hi."""
    return number_in(lo, hi, f"an integer in {lo}..{hi}", int)


# A device has at most 65,535 tiles (exchange rows name a peer in 16 bits);
# worker threads are capped like the library's.
tile_count = int_in(1, 65535)
thread_count = int_in(1, 1024)


def split_argv(argv):
    """(a command's own arguments, the ipu-e2e-test flags after --)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def output_folders(args, *names):
    """Create the output folders the flags `names` give (argparse dests)
    before any work, so a bad path fails at once, naming its flag."""
    for name in names:
        path = getattr(args, name)
        if path is None:
            continue
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(f"--{name.replace('_', '-')} {path}: cannot create this output folder: "
                             f"{error.strerror}") from None


def output_file(args, name):
    """Check before any work that the flag `name` gives a file path that can
    be written: not a folder, in a folder that exists (or is created here) and
    is writable."""
    path = getattr(args, name)
    if path is None:
        return
    flag = f"--{name.replace('_', '-')} {path}"
    if path.is_dir():
        raise UsageError(f"{flag}: is a directory; expected a file path")
    files.replaceable(path, f"--{name.replace('_', '-')}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{flag}: cannot create its folder: {error.strerror}") from None
    if not os.access(path.parent, os.W_OK):
        raise UsageError(f"{flag}: the folder {path.parent} is not writable")


def write_result(prog, path, value):
    """Write a JSON artifact; exit code 2 with a message when it cannot be written."""
    from . import artifacts
    try:
        artifacts.write_json(path, value)
    except OSError as error:
        print(f"{prog}: error: cannot write {path}: {error.strerror}", file=sys.stderr)
        return EXIT_USAGE
    return None


def guarded(prog, progress, work):
    """Run work(); returns (exit code or None, its result).  Errors become one
    line on stderr and exit code 2 (input) or 3 (device or internal)."""
    try:
        return None, work()
    except (UsageError, profiles.ProfileError, ValueError) as error:
        message, code = str(error), EXIT_USAGE
    except IpuError as error:
        message = error.message
        code = EXIT_USAGE if error.status in (INVALID_ARGUMENT, MALFORMED, IO) else EXIT_FAULT
    except OSError as error:
        message, code = f"{error.filename}: {error.strerror}", EXIT_USAGE
    except DeviceFault as fault:
        message, code = f"device fault: {fault}", EXIT_FAULT
    finally:
        progress.done()
    print(f"{prog}: error: {message}", file=sys.stderr)
    return code, None
