"""The reports benchmark (ipu-e2e-bench reports): one real run of the
full-size ViT (or MLP) with every report written (ipu-e2e-test --output
DIR --profile-directory DIR/run --memory-profile-directory DIR/memory, in
its own process), then report_checks' checks in headless Chromium at the
run-time memory peak's tile, at a step of the Repeat body: links, heatmap,
device search, tooltips, console; the placement viewer's first paint, cold
and warm (target under 1 s); the pages' sizes (the placement viewer's
target at most 25 MB).  A check that fails is reported, not raised:
targets_met says which held.
"""
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import placement_report, report_checks
from .browser import chromium

CLI = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-test"
FIRST_PAINT_MS = 1000
PLACEMENT_PAGE_BYTES = 25_000_000  # the full ViT's placement viewer at most 25 MB


def measure(workload, tiles, search, output, progress):
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(output) / "run" if output else Path(scratch) / "run"
        command = [sys.executable, str(CLI), "--workload", workload, *(["--tiles", str(tiles)] if tiles else []),
                   "--quiet", "--output", str(folder), "--profile-directory", str(folder / "run"),
                   "--memory-profile-directory", str(folder / "memory")]
        progress.update(f"running {workload} with every report")
        began = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - began
        if done.returncode != 0:
            raise RuntimeError(f"ipu-e2e-test exited {done.returncode}: {done.stderr.strip() or done.stdout[-400:]}")
        placement = placement_report.load(folder / "memory")
        timeline = report_checks.load(folder / "run" / "memory-timeline.json")
        tile = timeline["peak"]["tile"]
        step = report_checks.body_step(placement, offset=3)
        progress.update("checking the reports in Chromium")
        driver = chromium(Path(scratch) / "chromium")
        try:
            checks, paints = report_checks.run_all(driver, folder, tile, step, search)
        finally:
            driver.quit()
        sizes = {name: (folder / sub / name).stat().st_size for sub, name in
                 (("memory", "placement.html"), ("run", "run-profile.html"), ("run", "memory-timeline.json"))}
    met = {name: check["ok"] for name, check in checks.items()}
    met["first_paint"] = max(paints) < FIRST_PAINT_MS
    met["placement_page_size"] = sizes["placement.html"] <= PLACEMENT_PAGE_BYTES
    return {"workload": workload, "tiles": placement["tiles"], "command": command[1:], "run_seconds": seconds,
            "checks": checks, "first_paint_ms": paints, "sizes": sizes, "allocations": len(placement["allocations"]["tile"]),
            "targets": {"first_paint_ms": FIRST_PAINT_MS, "placement_page_bytes": PLACEMENT_PAGE_BYTES},
            "targets_met": met}
