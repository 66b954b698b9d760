"""Standalone HTML reports: write_run_profile_html(path, profile, timeline,
links) turns a run profile (the device's cycle report, the dict the CLI
writes as run-profile.json), with the run-time memory timeline beside it
(memory-timeline.json, or None) and the links to the run's other reports,
into one self-contained page.  The page's template, script
and style sheet live in reports/run_profile/; they are inlined, each after the
shared reports/common/common.js and common.css, together with the profile as
JSON, so the file opens offline from anywhere, and it is written atomically
(artifacts.write_bytes).
"""
import json
import re
from pathlib import Path

from . import artifacts

REPORTS = Path(__file__).resolve().parents[2] / "reports"
RUN_PROFILE = REPORTS / "run_profile"
COMMON = REPORTS / "common"

PLACEHOLDER = re.compile(r"/\*@@([A-Z]+)@@\*/")


def embedded_json(value):
    """JSON safe inside <script type="application/json">: every '<' (so '</' and
    '<!--' too) becomes \\u003c, which can only occur inside JSON strings, where
    it parses back to '<'.  NaN and infinities are refused: JSON.parse rejects them."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def parse_report(json_text, what, kind, version):
    """A report's JSON text parsed (NaN and infinities refused) and checked to
    be an object of this kind and version; ValueError names `what` otherwise."""
    def refuse(name):
        raise ValueError(f"{what}: {name} is not a JSON number")
    report = json.loads(json_text, parse_constant=refuse)
    if not isinstance(report, dict):
        raise ValueError(f"{what}: expected a JSON object, got {type(report).__name__}")
    if report.get("version") != version or report.get("kind") != kind:
        raise ValueError(f"{what}: expected kind '{kind}' version {version}, got "
                         f"{report.get('kind')!r} version {report.get('version')!r}")
    return report


def _asset(path, *forbidden):
    """A file inlined into a page, checked for text that would end (or
    confuse) the element it goes into."""
    text = path.read_text(encoding="utf-8")
    for bad in forbidden:
        if bad in text.lower():
            raise ValueError(f"{path} contains '{bad}', which would break its inline element")
    return text


def inline_page(folder, css_name, js_names, data, links=None, extra=None):
    """folder/template.html with common.css then folder/css_name, common.js
    then folder/js_names (a name or a tuple of names, in order), data (already safe inside a script element), the
    links to the run's other reports (a dict of relative paths by kind:
    index, placement, memory, run_profile) and any extra parts (name ->
    text safe inside a script element) put in its placeholders, each exactly
    once, in one pass (so text inside the inlined parts is never taken for a
    placeholder)."""
    template = (folder / "template.html").read_text(encoding="utf-8")
    css = [_asset(COMMON / "common.css", "</style"), _asset(folder / css_name, "</style")]
    js = [_asset(COMMON / "common.js", "</script", "<!--")] + [
        _asset(folder / name, "</script", "<!--") for name in ((js_names,) if isinstance(js_names, str) else js_names)]
    parts = {"CSS": "\n".join(css), "JS": "\n".join(js), "DATA": data, **(extra or {})}
    if links is not None:
        parts["LINKS"] = embedded_json(links)
    found = PLACEHOLDER.findall(template)
    if sorted(found) != sorted(parts):
        raise ValueError(f"{folder / 'template.html'}: expected each placeholder once, found {found}")
    return PLACEHOLDER.sub(lambda match: parts[match.group(1)], template)


def render_run_profile_html(profile, timeline=None, links=None):
    """The page for one run profile (and its memory timeline), as a str."""
    if not isinstance(profile, dict):
        raise ValueError(f"run profile: expected a JSON object, got {type(profile).__name__}")
    missing = [key for key in ("cycles", "totals", "steps", "tiles") if key not in profile]
    if missing:
        raise ValueError(f"run profile: missing {', '.join(missing)}")
    return inline_page(RUN_PROFILE, "report.css", ("report.js", "cycles.js", "memory.js"), embedded_json(profile), links or {},
                       {"TIMELINE": embedded_json(timeline)})


def write_run_profile_html(path, profile_dict, timeline=None, links=None):
    """Writes the standalone run-profile page for profile_dict to path (atomically)."""
    artifacts.write_bytes(path, render_run_profile_html(profile_dict, timeline, links).encode("utf-8"))
