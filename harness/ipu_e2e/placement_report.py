"""The standalone placement viewer: write_placement_html(json_path, html_path)
turns the compiler's placement report (placement.json, version 1,
written by engine/src/report/placement.c) into one self-contained page.  The
page's template, script and style sheet live in reports/placement/; they are
inlined, each after the shared reports/common/common.js and common.css,
together with the report, so the file opens offline from anywhere.
The report is checked (it parses, is version 1, its allocation columns agree
in length) and embedded as JSON, with every '<' written as \\u003c so
nothing inside it can end a script element; its listing and footprint go
in elements after the script (render_placement_html).  The page is written
atomically (artifacts.write_bytes); nothing is written when the report is
refused.
"""
from pathlib import Path

from . import artifacts
from .report import REPORTS, embedded_json, inline_page, parse_report

PLACEMENT = REPORTS / "placement"
COLUMNS = ("tile", "address", "size", "first", "last", "name", "kind", "alias", "members")
SECTIONS = ("tiles", "device", "steps", "support", "allocations", "names", "footprint", "gaps", "listing", "repeat")


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


def render_placement_html(json_text, links=None):
    """The page for one placement report (its JSON text), as a str.  The
    listing and the footprint, the bulk of a large report, are embedded after
    the script so the page paints before the browser has read them; the
    largest estimate's tile and step (where the page opens) go with the rest
    as "opening"."""
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
    return inline_page(PLACEMENT, "viewer.css", ("viewer.js", "device.js"), embedded_json(report), links or {},
                       {"LISTING": embedded_json(listing), "FOOTPRINT": embedded_json(footprint)})


def write_placement_html(json_path, html_path, links=None):
    """Writes the standalone viewer for the placement report at json_path to html_path (atomically)."""
    text = Path(json_path).read_text(encoding="utf-8")
    artifacts.write_bytes(html_path, render_placement_html(text, links).encode("utf-8"))
