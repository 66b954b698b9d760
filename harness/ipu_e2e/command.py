"""Shared command-line plumbing: the exit codes every command uses, argument
types, and the mapping of errors to a one-line message and an exit code
(usage and input errors 2, device faults and internal errors 3).
"""
import argparse
import sys

from . import profiles
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


def output_folders(*paths):
    """Create the output folders before any work, so a bad path fails at once."""
    for path in paths:
        if path is None:
            continue
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(f"cannot create the output folder {path}: {error.strerror}") from None


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
