"""The reports of one ipu-e2e-test run and how they lead to each other.

Names are stable (no process id), so two runs' folders pair file by file:
--output DIR: result.json and index.html; --profile-directory DIR:
run-profile.json, memory-timeline.json and run-profile.html;
--memory-profile-directory DIR: memory-<workload>-<serial>.json and .html,
placement.html (and with --placement-json placement.json).  index.html goes to --output, or else to
the first report folder given.  Every page carries relative links to the
others (the run index, the placement viewer, the memory profile of the plan
that was packaged, the run profile) and each link carries the place in view
(tile, phase, iteration) in its URL hash.  A replay's index links its
package and, when the package's folder has one, the index of the build that
saved it.

Every JSON the run writes carries its record (record()): the schema's name
and version (documented in the README), the command line, and the library's
path and SHA-256; result.json also says where each report is.
"""
import hashlib
import json
import os
import re
import sys
from pathlib import Path

from . import artifacts, failure, native
from .report import REPORTS, embedded_json, inline_page

INDEX = REPORTS / "index"
# Schema versions of the JSON the harness writes (the README documents each).
SCHEMAS = {"result": 1, "run-profile": 1, "nightly-summary": 1, "random-workloads": 1, "onnx-tests": 1}
_library_digest = {}


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def library():
    """The library's path and SHA-256 (computed once per process)."""
    path = native.library_path().resolve()
    if path not in _library_digest:
        _library_digest[path] = sha256_of(path)
    return {"path": str(path), "sha256": _library_digest[path]}


def record(schema, command):
    """The fields every written JSON of this schema starts with."""
    return {"schema": f"ipu-e2e/{schema}", "version": SCHEMAS[schema], "command": list(command),
            "library": library()}


class RunReports:
    """Where one run's reports go, and the links between them."""

    def __init__(self, prog, argv, output=None, profile_directory=None, memory_directory=None, package=None,
                 trace=None):
        self.command = [prog, *argv]
        self.trace = Path(trace) if trace else None  # --trace FILE
        self.package = Path(package) if package else None  # a replay's package
        self.output = output
        self.result = output / "result.json" if output else None
        self.run_profile = profile_directory / "run-profile.html" if profile_directory else None
        self.timeline = profile_directory / "memory-timeline.json" if profile_directory else None
        self.placement = memory_directory / "placement.html" if memory_directory else None
        self.memory = None  # the packaged plan's memory profile page, once known
        folder = output or memory_directory or profile_directory
        self.index = folder / "index.html" if folder else None

    def chosen_profile(self, directory, names):
        """The memory profile of the plan that was packaged: the last finalist written."""
        if names:
            self.memory = Path(directory) / Path(names[-1]).with_suffix(".html")

    def targets(self):
        return {"index": self.index, "placement": self.placement, "memory": self.memory,
                "run_profile": self.run_profile}

    def links(self, page):
        """The other reports, as paths relative to page's folder (the
        placement viewer only once the compile has written its placement
        report: a rejected build has none)."""
        targets = self.targets()
        if targets["placement"] is not None and not (targets["placement"].with_suffix(".json").exists()
                                                     or targets["placement"].exists()):
            del targets["placement"]
        return {kind: os.path.relpath(path, Path(page).parent) for kind, path in targets.items()
                if path is not None and Path(path) != Path(page)}

    def paths(self):
        """Where the reports are, relative to result.json's folder (absolute
        without --output): those written (a run stopped early writes fewer),
        and the index, which is written last."""
        def shown(path):
            return os.path.relpath(path, self.output) if self.output else str(Path(path).resolve())
        found = {kind: shown(path) for kind, path in self.targets().items()
                 if path is not None and (kind == "index" or Path(path).exists())}
        if self.timeline and self.timeline.exists():
            found["memory_timeline"] = shown(self.timeline)
        if self.trace and self.trace.exists():
            found["trace"] = shown(self.trace)
        return found

    def write_index(self, result, memory_profiles=()):
        """index.html: what ran, how it ended, and every report of the run."""
        if not self.index:
            return
        folder = self.index.parent
        entries = [{"kind": kind, "href": os.path.relpath(path, folder)}
                   for kind, path in self.targets().items() if path is not None and kind != "index" and
                   Path(path).exists()]
        if self.result and self.result.exists():
            entries.append({"kind": "result", "href": os.path.relpath(self.result, folder)})
        if self.timeline and self.timeline.exists():
            entries.append({"kind": "memory_timeline", "href": os.path.relpath(self.timeline, folder)})
        if self.trace and self.trace.exists():
            entries.append({"kind": "trace", "href": os.path.relpath(self.trace, folder)})
        if self.package and self.package.is_file():
            entries.append({"kind": "package", "href": os.path.relpath(self.package, folder)})
            build = self.package.parent / "index.html"
            if build.is_file() and build.resolve() != self.index.resolve():
                entries.append({"kind": "build", "href": os.path.relpath(build, folder)})
        pages = [Path(p).with_suffix(".html") for p in memory_profiles]
        profiles = [{"name": page.name, "href": os.path.relpath(page, folder), "json": os.path.relpath(p, folder)}
                    for p, page in zip(memory_profiles, pages)]
        summary = {k: result.get(k) for k in ("workload", "device", "tiles", "status", "cycles", "ms")}
        summary["command"] = self.command
        summary["estimate"] = result.get("estimate", {}).get("peak_bytes")
        summary["rejection"] = result.get("rejection", {}).get("reason") if result.get("rejection") else None
        data = {"run": summary, "reports": entries, "memory_profiles": profiles,
                "failure": {"lines": failure.lines(result), "place": failure.place(result)}}
        page = inline_page(INDEX, "index.css", "index.js", embedded_json(data))
        artifacts.write_bytes(self.index, page.encode("utf-8"))


INDEX_DATA = re.compile(r'<script type="application/json" id="index-data">(.*?)</script>', re.S)


def add_index_link(index, kind, target):
    """Adds a link to target (a path) to the run index at index (kept when
    its href is there already); the page is written again, atomically."""
    index = Path(index)
    found = INDEX_DATA.search(index.read_text(encoding="utf-8"))
    if not found:
        raise ValueError(f"{index}: not a run index (it has no index data)")
    data = json.loads(found.group(1))
    href = os.path.relpath(target, index.parent)
    if not any(entry["href"] == href for entry in data["reports"]):
        data["reports"].append({"kind": kind, "href": href})
        page = inline_page(INDEX, "index.css", "index.js", embedded_json(data))
        artifacts.write_bytes(index, page.encode("utf-8"))


def from_args(args, argv=None):
    """The RunReports of ipu-e2e-test's parsed flags."""
    return RunReports("ipu-e2e-test", sys.argv[1:] if argv is None else argv, args.output, args.profile_directory,
                      getattr(args, "memory_profile_directory", None), getattr(args, "package", None),
                      getattr(args, "trace", None))
