"""The standalone placement viewer: write_placement_html(json_path, html_path)
turns the compiler's placement report (placement.json, version 1,
written by engine/src/report/placement.c) into one self-contained page.  The
page's template, script and style sheet live in reports/placement/; they are
inlined, each after the shared reports/common/common.js and common.css,
together with the report, so the file opens offline from anywhere.
The report is checked (it parses, is version 1, its allocation columns agree
in length) and embedded in three parts, each JSON compressed with gzip and
written in base64 (which holds no '<', so nothing inside can end its
script element): the report with where the page opens, then, after the
script, its listing and its footprint, so the page paints before the
browser has read them.  The page decodes each with the browser's own
DecompressionStream.  The page is written atomically
(artifacts.write_bytes); nothing is written when the report is refused.

The page holds the whole report: load(path) reads it back from a page, a
placement.json, or the folder holding either, so the JSON need not be kept
beside the page (ipu-e2e-test keeps it with --placement-json).
"""
import base64
import gzip
import json
import re
from pathlib import Path

from . import artifacts
from .report import REPORTS, inline_page, parse_report

PLACEMENT = REPORTS / "placement"
COLUMNS = ("tile", "address", "size", "first", "last", "name", "kind", "alias", "members")
SECTIONS = ("tiles", "device", "steps", "support", "allocations", "names", "footprint", "gaps", "listing", "repeat")
PARTS = ("placement-data", "placement-listing", "placement-footprint")
EMBEDDED = re.compile(r'<script type="application/octet-stream" data-encoding="gzip-base64" id="([a-z-]+)">'
                      r'([A-Za-z0-9+/=]*)</script>')


def check_report(report):
    """Raises ValueError unless report (parsed by report.parse_report) has every section."""
    missing = [key for key in SECTIONS if key not in report]
    if missing:
        raise ValueError(f"placement report: missing {', '.join(missing)}")
    allocations = report["allocations"]
    lengths = {c: len(allocations.get(c) or []) for c in COLUMNS}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"placement report: allocation columns differ in length: {lengths}")
    listing = report["listing"]
    if len({len(listing.get(c) or []) for c in ("step", "tile", "text", "buffers")}) != 1:
        raise ValueError("placement report: listing columns differ in length")


def packed(value):
    """value as compact JSON, gzip-compressed (no timestamp: the same report
    gives the same page), in base64."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return base64.b64encode(gzip.compress(text, 6, mtime=0)).decode("ascii")


def render_placement_html(json_text, links=None):
    """The page for one placement report (its JSON text), as a str.  The
    largest estimate's tile and step (where the page opens) go with the
    report as "opening"."""
    report = parse_report(json_text, "placement report", "placement", 1)
    check_report(report)
    listing, footprint = report.pop("listing"), report.pop("footprint")
    best = (-1, 0, -1)
    for tile, series in enumerate((footprint or {}).get("estimate") or []):
        if series:
            peak = max(series)
            if peak > best[0]:
                best = (peak, tile, series.index(peak))
    report["opening"] = {"tile": best[1], "step": best[2]}
    return inline_page(PLACEMENT, "viewer.css", ("viewer.js", "device.js"), packed(report), links or {},
                       {"LISTING": packed(listing), "FOOTPRINT": packed(footprint)})


def write_placement_html(json_path, html_path, links=None):
    """Writes the standalone viewer for the placement report at json_path to html_path (atomically)."""
    text = Path(json_path).read_text(encoding="utf-8")
    artifacts.write_bytes(html_path, render_placement_html(text, links).encode("utf-8"))


def load(path):
    """The placement report (a dict, as placement.json holds it) from
    placement.json, from a viewer page, or from a folder holding either (the
    JSON when both are there).  ValueError when path holds neither."""
    path = Path(path)
    if path.is_dir():
        path = path / "placement.json" if (path / "placement.json").is_file() else path / "placement.html"
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    parts = {name: json.loads(gzip.decompress(base64.b64decode(data)))
             for name, data in EMBEDDED.findall(path.read_text(encoding="utf-8"))}
    if set(parts) != set(PARTS):
        raise ValueError(f"{path}: not a placement viewer page (expected its parts {', '.join(PARTS)})")
    report = parts["placement-data"]
    report.pop("opening")
    return dict(report, listing=parts["placement-listing"], footprint=parts["placement-footprint"])
