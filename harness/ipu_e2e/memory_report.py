"""The standalone planner memory profile page: write_memory_html(json_path,
html_path) turns one of the compiler's memory profiles
(memory-<workload>-<serial>.json, version 3, written by
engine/src/report/memory.c) into one self-contained page beside it, and
write_pages(directory, names) does so for every profile a compile wrote.  The
page's template, script and style sheet live in reports/memory/; the
profile is embedded unchanged, and the file is written atomically.
"""
from pathlib import Path

from . import artifacts
from .report import REPORTS, inline_page, parse_report

MEMORY = REPORTS / "memory"


def check_profile(profile):
    """Raises ValueError unless profile (parsed by report.parse_report) has every section."""
    missing = [k for k in ("scope", "status", "budget", "tiles", "timeline", "peak") if k not in profile]
    timeline = profile.get("timeline")
    if isinstance(timeline, dict):
        missing += [f"timeline.{k}" for k in ("values", "steps") if not isinstance(timeline.get(k), list)]
    if missing:
        raise ValueError(f"memory profile: missing {', '.join(missing)}")


def render_memory_html(json_text, links=None):
    """The page for one memory profile (its JSON text), as a str."""
    check_profile(parse_report(json_text, "memory profile", "memory-profile", 3))
    # Outside strings, JSON has no '<': replacing it everywhere only touches string contents,
    # where \u003c parses back to '<'.
    return inline_page(MEMORY, "memory.css", "memory.js", json_text.strip().replace("<", "\\u003c"), links or {})


def write_memory_html(json_path, html_path, links=None):
    """Writes the standalone page for the memory profile at json_path to html_path (atomically)."""
    text = Path(json_path).read_text(encoding="utf-8")
    artifacts.write_bytes(html_path, render_memory_html(text, links).encode("utf-8"))


def write_pages(directory, names, links=None):
    """A page beside each memory profile named (in directory), each with
    links(page path) to the run's other reports; returns the JSON paths."""
    written = [Path(directory) / name for name in names]
    for path in written:
        page = path.with_suffix(".html")
        write_memory_html(path, page, links(page) if links else None)
    return written
