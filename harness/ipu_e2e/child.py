"""A command run as a child process: its stdout and stderr captured together,
killed past a timeout, given SIGTERM if this process dies (even by kill -9),
and on SIGINT or SIGTERM here sent the same signal and waited for before the
interruption goes on (interrupts.Interrupted).  ci/nightly's cases and the
sweep's builds and device runs each run this way.
"""
import ctypes
import os
import signal
import subprocess

from . import interrupts

_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before any fork


def die_with(parent):
    """A preexec_fn: in the forked child, before exec, SIGTERM when `parent`
    (the pid of the process forking) dies."""
    def arm():
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(1)
    return arm


def die_with_parent():
    """This process gets SIGTERM when the process that started it dies."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def execute(command, timeout):
    """(exit code or None on timeout, output bytes).  On SIGINT or SIGTERM the
    signal goes to the command, which is waited for, and Interrupted is raised."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True, preexec_fn=die_with(os.getpid()))
    try:
        log, _ = process.communicate(timeout=timeout)
        return process.returncode, log
    except subprocess.TimeoutExpired:
        process.kill()
        return None, process.communicate()[0]
    except interrupts.Interrupted as stop:
        process.send_signal(stop.signum)
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise
