"""conftest.py: setup shared by every test under harness/tests: puts harness/
on sys.path so tests import the ipu_e2e package, and provides three fixtures:
`repo`, the repository root (a Path), `cli`, a function running
harness/bin/ipu-e2e-test with the given arguments that returns the
CompletedProcess with text stdout and stderr, and `browser`, a headless
Chromium (ipu_e2e.browser) with a fresh profile folder, console messages
kept.  The library the harness loads
is the one IPU_E2E_LIBRARY names (build/libipu_e2e.so by default); the
environment, LD_PRELOAD included, passes on to the CLI's process.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"
CLI = HARNESS / "bin" / "ipu-e2e-test"

if str(HARNESS) not in sys.path:
    sys.path.insert(0, str(HARNESS))


@pytest.fixture(scope="session")
def repo():
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def cli():
    """run(*args, timeout=600, env=None): ipu-e2e-test's CompletedProcess (text output)."""

    def run(*args, timeout=600, env=None, cwd=None):
        environment = dict(os.environ)
        if env:
            environment.update(env)
        return subprocess.run([str(CLI), *(str(a) for a in args)], capture_output=True, text=True,
                              timeout=timeout, env=environment, cwd=cwd or REPO)

    return run


@pytest.fixture
def browser(tmp_path):
    """Headless Chromium with a fresh profile directory; console messages are kept."""
    from ipu_e2e.browser import chromium
    driver = chromium(tmp_path / "chromium-profile")
    try:
        yield driver
    finally:
        driver.quit()
