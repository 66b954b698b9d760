"""The plan search benchmark (ipu-e2e-bench search): per case (the full-size
MLP at batch 1, 2 and 4 and the 27-layer ViT at batch 1 and 2 by default)
one build without a search, then one greedy (beam 1) and one beam search
(beam K), each `ipu-e2e-test --compile-only` in its own process so its peak
RSS is its own: the first plan's cycles (static timing, which equals the
device's), the searched cycles and their ratio, candidates built, the
search's wall time and the build's peak RSS.  Beam against greedy is the
ratio of their cycles.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from .native import INTERNAL, IpuError

CLI = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-test"
CASES = {"mlp-b1": ("mlp", 1), "mlp-b2": ("mlp", 2), "mlp-b4": ("mlp", 4), "vit-b1": ("vit", 1),
         "vit-b2": ("vit", 2)}


def build(workload, batch, tiles, extra, progress, label):
    """One compile-only build in its own process: its result.json."""
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, str(CLI), "--quiet", "--workload", workload, "--batch", str(batch),
                   "--compile-only", "--output", out, *(["--tiles", str(tiles)] if tiles else []), *extra]
        progress.update(label)
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise IpuError(INTERNAL, f"{label}: ipu-e2e-test exited {done.returncode}: "
                                     f"{done.stderr.strip() or done.stdout[-400:]}")
        return json.loads((Path(out) / "result.json").read_text())


def searched(result):
    s = result["plan_search"]
    return {"cycles": s["cycles"], "ratio": s["cycles"] / s["first_cycles"], "steps": s["steps"],
            "built": s["built"], "screened": s["screened"], "dropped": s["dropped"], "stopped": s["stopped"],
            "search_seconds": s["wall_seconds"], "accepted": [m["move"] for m in s["accepted"]],
            "peak_rss_mib": result["build"]["peak_rss_bytes"] / 2**20}


def measure(cases, seconds, beam, tiles, progress):
    rows = []
    for name in cases:
        workload, batch = CASES[name]
        first = build(workload, batch, tiles, [], progress, f"{name}: the first plan")
        greedy = build(workload, batch, tiles, ["--search-seconds", str(seconds)], progress,
                       f"{name}: greedy search, {seconds} s")
        wide = build(workload, batch, tiles, ["--search-seconds", str(seconds), "--search-beam", str(beam)], progress,
                     f"{name}: beam {beam}, {seconds} s")
        row = {"case": name, "workload": workload, "batch": batch, "first_cycles": first["static_timing"]["cycles"],
               "first_build_seconds": first["build"]["seconds"],
               "first_peak_rss_mib": first["build"]["peak_rss_bytes"] / 2**20,
               "roofline_ratio": first["static_timing"]["roofline_ratio"], "greedy": searched(greedy),
               "beam": searched(wide)}
        row["beam_over_greedy"] = row["beam"]["cycles"] / row["greedy"]["cycles"]
        rows.append(row)
    return {"bench": "search", "seconds": seconds, "beam": beam, "tiles": tiles, "cases": rows}


def report(result, out):
    print(f"plan search: {result['seconds']} s per search, greedy against beam {result['beam']}", file=out)
    print("| case | first plan cycles | greedy cycles | ratio | built | search s | beam cycles | ratio | built | "
          "search s | beam/greedy | peak RSS MiB |", file=out)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", file=out)
    for r in result["cases"]:
        g, b = r["greedy"], r["beam"]
        print(f"| {r['case']} | {r['first_cycles']:,} | {g['cycles']:,} | {g['ratio']:.3f} | {g['built']} | "
              f"{g['search_seconds']:.1f} | {b['cycles']:,} | {b['ratio']:.3f} | {b['built']} | "
              f"{b['search_seconds']:.1f} | {r['beam_over_greedy']:.3f} | "
              f"{max(g['peak_rss_mib'], b['peak_rss_mib']):.0f} |", file=out)
    for r in result["cases"]:
        for kind in ("greedy", "beam"):
            moves = r[kind]["accepted"]
            if moves:
                print(f"  {r['case']} {kind}: " + "; ".join(moves), file=out)
