"""SIGINT and SIGTERM end a command within about a second, with one line and
exit code 130.  While the main thread is inside a library call, Python cannot
run its own signal handler, so the signal also wakes a watcher thread (through
signal.set_wakeup_fd) that asks every live library context to stop
(ipu_ctx_cancel); the call returns IPU_ERR_CANCELLED at its next step or stage
boundary, and Context.check raises.  Elsewhere the handler raises Interrupted, a
BaseException, so no `except Exception` swallows it; artifacts are written
atomically, so an interrupted command leaves no half-written file.
"""
import importlib
import os
import signal
import sys
import threading
import weakref

EXIT_INTERRUPTED = 130
_contexts = weakref.WeakSet()  # the library contexts to cancel on a signal
# Re-entrant: the handler and garbage collection (a context's close) may run
# in the main thread while it holds the lock.
_lock = threading.RLock()
_received = []  # signals received so far (the first names the interruption)
_callbacks = set()  # code of functions the library calls back (see callback())


class Interrupted(BaseException):
    """A signal (SIGINT or SIGTERM) asked the command to stop."""

    def __init__(self, signum):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def interrupted():
    """The Interrupted for the first signal received, or None."""
    return Interrupted(_received[0]) if _received else None


def register(context):
    """Cancel this context (an object with cancel()) on a signal; returns it."""
    with _lock:
        _contexts.add(context)
        if _received:
            context.cancel()
    return context


def unregister(context):
    """Stop watching a context; after this returns no signal touches it."""
    with _lock:
        _contexts.discard(context)


def _cancel_all():
    with _lock:
        for context in list(_contexts):
            context.cancel()


def _watch(fd):
    while os.read(fd, 64):
        _cancel_all()


def callback(function):
    """Mark a function the library calls back: ctypes cannot carry an
    exception back through C, so a signal arriving inside it does not raise
    there; the cancelled library call returns, and Context.check raises."""
    _callbacks.add(function.__code__)
    return function


def _handler(signum, frame):
    _received.append(signum)
    _cancel_all()
    while frame is not None:
        if frame.f_code in _callbacks:
            return
        frame = frame.f_back
    raise Interrupted(signum)


def install():
    """Take SIGINT and SIGTERM for this process (a command's entry point calls it once)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(read_end,), name="interrupt-watcher", daemon=True).start()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _handler)


def run(prog, module):
    """A command's entry point: install the handlers, import the module (by
    name) and return the exit code of its main(); an interruption, even
    during the import, prints one line and returns 130."""
    install()
    try:
        return importlib.import_module(module).main()
    except Interrupted as stop:
        # Further signals while the message is printed change nothing.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
        print(f"{prog}: interrupted by {stop}", file=sys.stderr)
        return EXIT_INTERRUPTED
