"""One updating progress line on stderr for long work; --quiet silences it.
On a terminal the line is rewritten in place; elsewhere each new stage is
printed once, so logs stay readable.
"""
import sys
import time


class Progress:
    def __init__(self, quiet=False, stream=None):
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.stage = None
        self.started = time.monotonic()
        self.width = 0

    def update(self, stage, done=None, total=None):
        if self.quiet:
            return
        if self.tty:
            text = f"[{time.monotonic() - self.started:7.1f}s] {stage}"
            if done is not None and total:
                text += f" {done}/{total}"
            elif done is not None:
                text += f" {done}"
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
            self.stream.flush()
        elif stage != self.stage:
            self.stream.write(f"[{time.monotonic() - self.started:7.1f}s] {stage}\n")
            self.stream.flush()
        self.stage = stage

    def done(self):
        if not self.quiet and self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
        self.width = 0
