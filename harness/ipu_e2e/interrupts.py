"""SIGINT and SIGTERM end a command within about a second, with one line and
exit code 130.  While the main thread is inside a library call, Python cannot
run its own signal handler, so the signal also wakes a watcher thread (through
signal.set_wakeup_fd) that asks every live library context to stop
(ipu_ctx_cancel); the call returns IPU_ERR_CANCELLED at its next step or stage
boundary, and Context.check raises.  Elsewhere the handler raises Interrupted, a
BaseException, so no `except Exception` swallows it; artifacts are written
atomically, so an interrupted command leaves no half-written file.

A signal holds until the process exits: raised where Python can only report
it (a destructor, a garbage collector's callback) it is delivered again, and
once the command's main() has returned, the handler itself prints the line
and ends the process with 130.  The process leaves through C's exit() (its
own and its libraries' exit handlers, such as coverage counters, still run)
rather than the interpreter's finalization, which restores the default
dispositions (a signal in it killed the process, exit -2) and runs no handler
late in it (a signal was swallowed, exit 0).
"""
import _thread
import atexit
import ctypes
import gc
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
_leaving = None  # the command's name once its main() has returned (see run())
_stopping = False  # the one line is being printed and the process ended
_exit_callbacks_run = False
_deferred = None  # a signal whose Interrupted a destructor swallowed, until one is raised
AGAIN_SECONDS = 0.05  # when a swallowed Interrupted is delivered again
# C's exit(), called holding the interpreter lock (PyDLL): no Python code runs after it.
_c_exit = ctypes.PyDLL(None).exit
_c_exit.argtypes, _c_exit.restype = [ctypes.c_int], None


class Interrupted(BaseException):
    """A signal (SIGINT or SIGTERM) asked the command to stop."""

    def __init__(self, signum):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def interrupted():
    """The Interrupted for the first signal received, or None; the caller raises it."""
    global _deferred
    if not _received:
        return None
    _deferred = None
    return Interrupted(_received[0])


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
    if _stopping:  # further signals while the line is printed change nothing
        return
    if _leaving is not None:
        _stop(_leaving, signum)
    while frame is not None:
        if frame.f_code in _callbacks:
            return
        frame = frame.f_back
    global _deferred
    _deferred = None
    raise Interrupted(signum)


def _deliver_again():
    """Trip the handler again (from a timer's thread) unless an Interrupted
    was raised since: it runs in the main thread at its next instruction,
    outside the destructor that swallowed the last one (inside another, this
    repeats)."""
    if _deferred is not None:
        _thread.interrupt_main(_deferred)


def _unraisable(default):
    """sys.unraisablehook: an Interrupted raised inside a destructor or a
    garbage collector's callback cannot propagate, and Python would print it
    with a traceback and go on.  It is recorded (_received, the contexts
    cancelled, so the next library call raises it): say nothing, and deliver
    it again shortly, once this hook has returned, for work that makes no
    library call."""
    def hook(unraisable):
        global _deferred
        if isinstance(unraisable.exc_value, Interrupted):
            _deferred = unraisable.exc_value.signum
            again = threading.Timer(AGAIN_SECONDS, _deliver_again)
            again.daemon = True
            try:
                again.start()
            except RuntimeError:  # no new thread at interpreter shutdown: the exit path looks at _received
                pass
            return
        default(unraisable)
    return hook


def install():
    """Take SIGINT and SIGTERM for this process (a command's entry point calls it once)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(read_end,), name="interrupt-watcher", daemon=True).start()
    sys.unraisablehook = _unraisable(sys.unraisablehook)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _handler)


def _flush(stream):
    """Flush a standard stream; False when it cannot be written (as Python's own exit, which then says 120)."""
    try:
        stream.flush()
        return True
    except (OSError, ValueError):
        return False


def _exit_callbacks():
    """Python's exit callbacks (temporary folders not yet removed, ...), once."""
    global _exit_callbacks_run
    if not _exit_callbacks_run:
        _exit_callbacks_run = True
        atexit._run_exitfuncs()


def _exit(code):
    """End the process now with code, through C's exit() (see the module's comment)."""
    _flush(sys.stderr)
    _c_exit(code)


def _stop(prog, signum):
    """The one line, then exit code 130; never returns."""
    global _stopping
    _stopping = True
    _flush(sys.stdout)  # what the command printed before the signal, then the line after it
    _exit_callbacks()
    print(f"{prog}: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
    _exit(EXIT_INTERRUPTED)


def run(prog, module):
    """A command's entry point: install the handlers, import the module (by
    name), run its main() and end the process with its exit code (the code of
    a SystemExit it raises, as Python's own exit); an interruption, even
    during the import or after main() returned, prints one line and ends it
    with 130.  Never returns."""
    global _leaving
    install()
    try:
        try:
            code = importlib.import_module(module).main()
        except SystemExit as leaving:  # argparse's usage errors and --help
            code = leaving.code
        # The command's result is final, but the process has not exited: a
        # user's Ctrl-C now still gets what the README promises (one line,
        # 130), not a lost signal or a death by it.  From here on the handler
        # ends the process itself, wherever the main thread is.
        _leaving = prog
    except Interrupted as stop:
        _leaving = prog  # a second signal before _stop marks itself ends the process as this one would
        _stop(prog, stop.signum)
    if _received:  # a signal whose Interrupted a destructor swallowed
        _stop(prog, _received[0])
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    # What the interpreter's finalization would do that matters: the native
    # objects in reference cycles freed (their close), Python's exit callbacks
    # (temporary folders) run, the standard streams flushed.
    gc.collect()
    _exit_callbacks()
    if not _flush(sys.stdout) and code == 0:
        code = 120
    _exit(code)
