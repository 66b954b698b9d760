"""ipu-e2e-bench: benchmarks reported as figures and as ratios against a
baseline measured in the same run (never asserted in tests).

  device   exchange-stress: simulated exchange words per second of wall time
           and the whole `--exchange-pattern all` run's wall time; tile GEMMs
           through the device versus one direct sgemm of the same total work.
  compile  the full-size MLP: wall time of generation, planning, lowering,
           packaging, the device run and the reference; peak RSS after each
           (the process high-water mark); simulated cycles.
  kernels  every kernel entry point: its cycle formula, the cycles of a sample
           call (the device's count beside the formula's) and the simulator's
           throughput running it on every tile; --markdown prints the table.
  viewer   the placement viewer on a generated report of 600k+ allocations in
           headless Chromium: time to first paint and hover response.
  reports  one real run's reports (the full-size ViT by default, or the MLP)
           in headless Chromium (report_checks.py): links land on the same
           tile and phase, the heatmap opens the tile clicked, the device
           search finds every tile of a tensor, the memory chart's tooltip
           names the op, no console errors; the placement viewer's first
           paint (target < 2 s); the run's wall time and the reports' sizes.
  plan     the planner on the full-size FP8 MLP, batches 1, 2 and 4 at budgets
           default, 384, 256, 128 and 64 KiB: per case the search's wall time
           (catalogue and search, plus refinement: lowering each candidate plan
           and walking its liveness), the share spent in refinement, the
           candidate plans tried and the outcome (planned with its peak, or
           rejected); planning time at each budget relative to the default's.
           Every planned package also runs once on the device, and per batch
           the estimates' ranking of the plans is judged against the device's
           cycles: the pairs in the device's order, and the worst inversion
           (the device cycles a choice by estimate would lose).
  vit      the full-size ViT (or vit-small): build time (plan to package) and
           peak RSS, the same of `ipu-e2e-test --compile-only` at batches 1
           and 2 (each in its own process), device wall time per resident
           inference, the FP32
           reference's wall time and the ratio of the two, the device time
           with and without the allocation checks (their cost: the fastest
           inference of each), simulated cycles per
           inference; the last output checked against the reference.
           With --exchange-modes, instead: the ViT built and run once in each
           exchange scheduling mode (latency-oriented, compact stream waves
           of 256 words, and with balanced chunks): cycles, exchange cycles,
           largest exchange table per tile, tensor bytes available per tile,
           build time, and the output checked against the FP32 reference.
  noise    the output check's noise floor over 50+ correct plans (MLP and ViT,
           16 to 1472 tiles, budgets, attention modes, batches 1 and 2, FP8
           and FP16): per reference mode and output type the worst cosine,
           elementwise atol and norm ratio, the thresholds they support with
           the stated margin, and whether the defaults in use cover them.
  mutations every seeded compiler bug of the catalogue on the small workload it
           has a place in: how it was caught, where, and the op named.
  search   the plan search on the full-size MLP (batch 1, 2, 4) and ViT
           (batch 1, 2): the first plan's cycles, a greedy and a beam search's
           cycles and ratio, candidates built, search wall time, peak RSS.
  interrupts SIGINT in every stage of the full MLP and ViT (both references,
           every report): the time from the signal to exit 130 per stage
           (target: within 1 s).
  exchange the exchange phases of a saved package (--package FILE) scheduled
           again (latency-oriented, or --stream-words N [--balance-streams]): per phase the recorded and the rescheduled horizon, the
           largest and total table rows in words, the spread of the active
           tiles' first transfers after the barrier, and whether the tables
           still fit the bytes the package gave them.
"""
import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import interrupt_bench, model_bench, mutation_catalogue, noise_floor, profiles, runner, stress, tolerances, transformer
from .command import (EXIT_OK, UsageError, guarded, int_in, number_in, output_folders, positive_int, tile_count,
                      write_result)
from .native import (INTERNAL, Context, IpuError, Package, PlanRejected, Workload, bench_gemm, bench_kernels, check_outputs,
                     mutations)
from .progress import Progress

# The ViT bench's targets: build under 60 s, peak RSS under 4 GiB, device time
# per inference at most twice the FP32 reference's.
VIT_TARGETS = {"build_seconds": 60, "peak_rss_mib": 4096, "device_reference_ratio": 2, "allocation_check_cost": 0.10}
# `ipu-e2e-test --compile-only` of the ViT at each batch, in a process of its own.
COMPILE_ONLY_TARGETS = {"build_seconds": 10, "peak_rss_mib": 1024}
COMPILE_ONLY_BATCHES = (1, 2)
# `ipu-e2e-bench vit --exchange-modes`: the modes (compile options) and targets.
MODE_STREAM_WORDS = 256
EXCHANGE_MODES = (("latency-oriented (default)", {}),
                  (f"--exchange-stream-words {MODE_STREAM_WORDS}", {"exchange_stream_words": MODE_STREAM_WORDS}),
                  (f"--exchange-stream-words {MODE_STREAM_WORDS} --balance-streams",
                   {"exchange_stream_words": MODE_STREAM_WORDS, "balance_streams": True}))
EXCHANGE_MODE_TARGETS = {"compact_table_ratio": 0.7}
CLI = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-test"

def parser():
    p = argparse.ArgumentParser(prog="ipu-e2e-bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    device = sub.add_parser("device", help="exchange and tile-GEMM throughput of the device model")
    device.add_argument("--device", default="c600", metavar="PROFILE", help="device profile (default: c600)")
    device.add_argument("--tiles", type=tile_count, metavar="N", help="override the profile's tile count")
    device.add_argument("--iterations", type=positive_int, default=3, metavar="N",
                        help="exchange-stress Repeat iterations (default: 3)")
    device.add_argument("--gemm", type=gemm_shape, default="46x47x1152", metavar="MxNxK",
                        help="tile GEMM shape (default: 46x47x1152)")
    device.add_argument("--repeats", type=positive_int, default=3, metavar="R",
                        help="timed repetitions; the best is reported (default: 3)")
    device.add_argument("--output", type=Path, metavar="DIR", help="write bench-device.json to DIR")
    device.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    kernels = sub.add_parser("kernels", help="per-kernel cycle formulas, sample cycles, simulator throughput")
    kernels.add_argument("--device", default="c600", metavar="PROFILE", help="device profile (default: c600)")
    kernels.add_argument("--tiles", type=tile_count, metavar="N", help="override the profile's tile count")
    kernels.add_argument("--repeats", type=positive_int, default=3, metavar="R",
                         help="timed repetitions; the best is reported (default: 3)")
    kernels.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    kernels.add_argument("--output", type=Path, metavar="DIR", help="write bench-kernels.json to DIR")
    kernels.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    viewer = sub.add_parser("viewer", help="placement viewer: first paint and hover with 600k allocations")
    viewer.add_argument("--output", type=Path, metavar="DIR", help="write bench-viewer.json to DIR")
    viewer.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    reports = sub.add_parser("reports", help="one run's reports in Chromium: links, heatmap, search, tooltips, "
                                             "first paint")
    reports.add_argument("--workload", choices=("vit", "mlp"), default="vit", help="(default: vit)")
    reports.add_argument("--tiles", type=tile_count, metavar="N", help="override the c600 profile's 1472 tiles")
    reports.add_argument("--search", metavar="NAME", default="residual",
                         help="the tensor the device search looks for (default: residual; for mlp: hidden)")
    reports.add_argument("--output", type=Path, metavar="DIR",
                         help="write bench-reports.json to DIR and keep the run's reports in DIR/run")
    reports.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    compile_ = sub.add_parser("compile", help="build and run the full-size MLP, stage by stage")
    compile_.add_argument("--device", default="c600", metavar="PROFILE", help="device profile (default: c600)")
    compile_.add_argument("--tiles", type=tile_count, metavar="N", help="override the profile's tile count")
    compile_.add_argument("--batch", type=int, choices=(1, 2, 4), default=1, help="images (default: 1)")
    compile_.add_argument("--precision", choices=("fp8", "fp16"), default="fp8", help="(default: fp8)")
    compile_.add_argument("--output", type=Path, metavar="DIR", help="write bench-compile.json to DIR")
    compile_.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    plan = sub.add_parser("plan", help="planning time of the full-size MLP across a memory-budget sweep")
    plan.add_argument("--device", default="c600", metavar="PROFILE", help="device profile (default: c600)")
    plan.add_argument("--tiles", type=tile_count, metavar="N", help="override the profile's tile count")
    plan.add_argument("--batches", type=comma_list(batch_size), default="1,2,4", metavar="LIST",
                      help="batches (default: 1,2,4)")
    plan.add_argument("--budgets", type=comma_list(transformer.budget), metavar="LIST",
                      default="default,393216,262144,131072,65536",
                      help="budgets per tile in bytes, or default (default: default,393216,262144,131072,65536)")
    plan.add_argument("--output", type=Path, metavar="DIR", help="write bench-plan.json to DIR")
    plan.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    vit = sub.add_parser("vit", help="build the ViT, run resident inferences, time the FP32 reference")
    vit.add_argument("--workload", choices=("vit", "vit-small"), default="vit", help="(default: vit)")
    vit.add_argument("--device", default="c600", metavar="PROFILE", help="device profile (default: c600)")
    vit.add_argument("--tiles", type=tile_count, metavar="N",
                     help="override the profile's tile count (default: the profile's, 1472 for c600)")
    vit.add_argument("--layers", type=positive_int, metavar="N",
                     help="encoder layers (default: the workload's, 27 for vit, 3 for vit-small)")
    vit.add_argument("--attention", choices=transformer.ATTENTION_MODES, default="auto",
                     help="attention implementation (default: auto, the planner's choice)")
    vit.add_argument("--inferences", type=positive_int, default=3, metavar="N",
                     help="resident inferences after one upload (default: 3)")
    vit.add_argument("--exchange-modes", action="store_true",
                     help="instead: the ViT built and run in each exchange scheduling mode (latency-oriented, "
                          f"--exchange-stream-words {MODE_STREAM_WORDS}, and with --balance-streams), with its "
                          "cycles, exchange cycles, largest exchange table, tensor bytes available per tile and "
                          "build time, each output checked against the FP32 reference")
    vit.add_argument("--output", type=Path, metavar="DIR", help="write bench-vit.json to DIR")
    vit.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    noise = sub.add_parser("noise", help="the output check's noise floor over correct plans")
    noise.add_argument("--small-only", action="store_true", help="leave out the 1472-tile plans")
    noise.add_argument("--output", type=Path, metavar="DIR", help="write bench-noise.json to DIR")
    noise.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    mutate = sub.add_parser("mutations", help="every seeded compiler bug: caught, where, which op")
    mutate.add_argument("--list", action="store_true",
                        help="only list the mutations (name, stage, the bug it models) without running them")
    mutate.add_argument("--output", type=Path, metavar="DIR", help="write bench-mutations.json to DIR")
    mutate.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    search = sub.add_parser("search", help="the plan search: first plan against greedy and beam searches")
    search.add_argument("--cases", type=case_list, default=list(search_cases()), metavar="NAMES",
                        help="comma-separated cases of " + ", ".join(search_cases()) + " (default: all)")
    search.add_argument("--seconds", type=number_in(1.0, 86400.0, "seconds in [1, 86400]"), default=180.0,
                        metavar="S", help="each search's time budget (default: 180)")
    search.add_argument("--beam", type=int_in(2, 64), default=3, metavar="K",
                        help="the beam search's width (default: 3; the greedy search has 1)")
    search.add_argument("--tiles", type=tile_count, metavar="N", help="override the c600 profile's 1472 tiles")
    search.add_argument("--output", type=Path, metavar="DIR", help="write bench-search.json to DIR")
    search.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    interrupts = sub.add_parser("interrupts", help="SIGINT in every stage of the full MLP and ViT: time to exit")
    interrupts.add_argument("--workloads", type=workload_list, default=list(interrupt_bench.WORKLOADS),
                            metavar="LIST", help="comma separated, of mlp and vit (default: mlp,vit)")
    interrupts.add_argument("--output", type=Path, metavar="DIR", help="write bench-interrupts.json to DIR")
    interrupts.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    exchange = sub.add_parser("exchange", help="reschedule the exchange phases of a saved package")
    exchange.add_argument("--package", type=Path, required=True, metavar="FILE",
                          help="the package (ipu-e2e-test --save-package FILE)")
    exchange.add_argument("--phases", type=phase_list, metavar="LIST",
                          help="program phases to replay, comma separated (default: every exchange phase)")
    exchange.add_argument("--stream-words", type=int_in(1, transformer.MAX_STREAM_WORDS), metavar="N",
                          help="reschedule in compact stream waves of N words (default: latency-oriented)")
    exchange.add_argument("--balance-streams", action="store_true",
                          help="with --stream-words N: also endpoint-balanced chunks of 4 N words")
    exchange.add_argument("--output", type=Path, metavar="DIR", help="write bench-exchange.json to DIR")
    exchange.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    model_bench.add_arguments(sub)
    return p


def search_cases():
    from .search_bench import CASES
    return CASES


def case_list(text):
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in search_cases()]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"expected names of {', '.join(search_cases())}, got '{text}'")
    return names


def bench_search(args, progress):
    from . import search_bench
    return search_bench.measure(args.cases, args.seconds, args.beam, args.tiles, progress)


def report_search(result, out):
    from . import search_bench
    search_bench.report(result, out)


def phase_list(text):
    """"3,17,41" as [3, 17, 41]: program phases, non-negative."""
    try:
        phases = [int(part) for part in text.split(",")]
    except ValueError:
        phases = None
    if not phases or any(p < 0 for p in phases):
        raise argparse.ArgumentTypeError(f"expected program phases as non-negative integers separated by commas, "
                                         f"got {text!r}")
    return phases


def workload_list(text):
    """"mlp,vit" as ["mlp", "vit"]: the interrupts benchmark's workloads."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names or any(n not in interrupt_bench.WORKLOADS for n in names):
        raise argparse.ArgumentTypeError(f"expected workloads of {', '.join(interrupt_bench.WORKLOADS)} separated "
                                         f"by commas, got '{text}'")
    return names


def bench_interrupts(args, progress):
    return dict(interrupt_bench.measure(args.workloads, progress), bench="interrupts")


def bench_exchange(args, progress):
    if args.balance_streams and args.stream_words is None:
        raise UsageError("--balance-streams needs --stream-words N (its chunks are 4 N words)")
    progress.update(f"loading {args.package}")
    ctx = Context()
    package = Package.load_file(ctx, args.package)
    progress.update("rescheduling the exchange phases")
    replay = package.exchange_replay(args.phases, args.stream_words, args.balance_streams)
    mode = (f"stream waves of {args.stream_words} words" + (", balanced chunks" if args.balance_streams else "")
            if args.stream_words else "latency-oriented")
    return {"bench": "exchange", "package": str(args.package), "mode": mode, **replay}


def report_exchange(result, out):
    phases = result["phases"]
    print(f"exchange replay of {result['package']}: {len(phases):,} exchange phases (latency {result['latency']} "
          f"cycles), rescheduled {result['mode']}; horizon, table rows in words and first-activity spread, "
          f"recorded -> rescheduled; \"fits\": every tile's rescheduled tables fit in the bytes the package "
          f"reserved for that tile's recorded tables", file=out)
    print("| phase | op | transfers | horizon | max row words | total row words | first-activity span | "
          "fits |", file=out)
    print("|---:|---|---:|---:|---:|---:|---:|---|", file=out)
    for p in phases:
        rec, again = p["recorded"], p.get("rescheduled")

        def pair(key):
            return f"{rec[key]:,} -> {again[key]:,}" if again else (
                f"{rec[key]:,} (not replayed)" if key in rec else "- (not replayed)")

        fits = ("yes" if again["within_row_budget"] else "no") if again else "not replayed"
        print(f"| {p['phase']} | {p['op'] or '-'} | {p['transfers']:,} | {pair('horizon_cycles')} | "
              f"{pair('max_row_words')} | {pair('total_row_words')} | {pair('first_activity_span_cycles')} | {fits} |",
              file=out)


def bench_mutations(args, progress):
    if args.list:
        return {"bench": "mutations", "listed": mutations(Context())}
    rows = mutation_catalogue.run(mutations(Context()), progress)
    return {"bench": "mutations", "mutations": rows, "caught": sum(r["caught"] for r in rows),
            "targets_met": {"every_mutation_caught": all(r["caught"] for r in rows)}}


def report_mutations(result, out):
    if "listed" in result:
        width = max(len(m["name"]) for m in result["listed"])
        for m in result["listed"]:
            print(f"{m['name']:<{width}}  {m['stage']:<8}  {m['models']}", file=out)
        return
    print(mutation_catalogue.markdown(result["mutations"]), end="", file=out)


def bench_noise(args, progress):
    ctx = Context()
    profiles_by_tiles = {}

    def profile_for(tiles):
        if tiles not in profiles_by_tiles:
            profiles_by_tiles[tiles] = profiles.load(ctx, "c600", tiles)
        return profiles_by_tiles[tiles]

    plans = noise_floor.cases(full=not args.small_only)
    records = []
    for n, case in enumerate(plans):
        progress.update(f"plan {case[0]}", n + 1, len(plans))
        records.append(noise_floor.measure(ctx, profile_for, case))
    return {"bench": "noise", "margins": tolerances.MARGINS, "plans": records,
            "floor": noise_floor.floor(records)}


def report_noise(result, out):
    print(f"noise bench: {len(result['plans'])} correct plans, each checked against both references", file=out)
    for key, f in result["floor"].items():
        s, d = f["supported"], f["defaults"]
        if key == "ops":
            print(f"  per-op check ({f['compared']} op outputs of {f['plans']} plans): worst cosine "
                  f"{f['min_cosine']:.8f} ({f['min_cosine_plan']}), atol needed {f['atol_rms_needed']:.4g} x RMS "
                  f"({f['atol_rms_needed_plan']})", file=out)
            print(f"    supported with the margins: cosine >= {s['min_cosine']:.8f}, atol {s['atol_rms']:.4g} x RMS; "
                  f"defaults: cosine >= {d['min_cosine']}, atol {d['atol_rms']:g} x RMS: "
                  f"{'covered' if f['covered'] else 'NOT covered'}", file=out)
            continue
        print(f"  {key} ({f['plans']} outputs): worst cosine {f['min_cosine']:.6f} ({f['min_cosine_plan']}), "
              f"atol needed {f['atol_needed']:.4g} at rtol {f['rtol']:g} ({f['atol_needed_plan']}), norm ratio "
              f"1 +- {f['norm_deviation']:.3g} ({f['norm_deviation_plan']})", file=out)
        print(f"    supported with the margins: cosine >= {s['min_cosine']:.6f}, atol {s['atol']:.4g}, norm 1 +- "
              f"{s['norm_tolerance']:.3g}; defaults: cosine >= {d['min_cosine']}, atol {d['atol']:g}, norm 1 +- "
              f"{d['norm_tolerance']:g}: {'covered' if f['covered'] else 'NOT covered'}", file=out)
    failed = [p["name"] for p in result["plans"]
              if not all(c["passed"] for c in p["checks"]) or not p["op_check"]["passed"]]
    print(f"  plans failing a default check: {', '.join(failed) if failed else 'none'}", file=out)


def run_kernels(args, progress):
    ctx = Context()
    profile = profiles.load(ctx, args.device, args.tiles or 0)
    progress.update(f"running every kernel's sample on {profile['tiles']} tiles")
    result = bench_kernels(ctx, {"profile": profile, "repeats": args.repeats})
    result.update(bench="kernels", device=profile["name"], markdown=args.markdown)
    return result


def report_kernels(result, out):
    rows = result["kernels"]
    if result["markdown"]:
        print("| kernel | cycle formula | sample arguments | sample cycles | simulated cycles/s |", file=out)
        print("|---|---|---|---:|---:|", file=out)
        for k in rows:
            args = ", ".join(str(a) for a in k["sample_args"])
            print(f"| {k['kernel']} | {k['formula']} | {args} | {k['sample_cycles']:,} | "
                  f"{k['simulated_cycles_per_second']:.3g} |", file=out)
        return
    print(f"kernel bench on {result['device']} ({result['tiles']} tiles, best of {result['repeats']})", file=out)
    for k in rows:
        agree = "" if k["device_cycles"] == k["sample_cycles"] else f" (device {k['device_cycles']:,})"
        print(f"  {k['kernel']:<16} {k['sample_cycles']:>11,} cycles{agree}  {k['seconds_per_call'] * 1e6:9.2f} us "
              f"per call  {k['simulated_cycles_per_second'] / 1e9:8.2f} G simulated cycles/s", file=out)


def run_viewer(args, progress):
    from . import viewer_bench
    if importlib.util.find_spec("selenium") is None:
        raise ValueError("the viewer benchmark needs python3-selenium, chromium and chromium-driver") from None
    progress.update("generating a report of 600k allocations")
    return dict(viewer_bench.measure(progress=progress), bench="viewer")


def run_reports(args, progress):
    from . import reports_bench
    if importlib.util.find_spec("selenium") is None:
        raise ValueError("the reports benchmark needs python3-selenium, chromium and chromium-driver") from None
    search = "hidden" if args.workload == "mlp" and args.search == "residual" else args.search
    return dict(reports_bench.measure(args.workload, args.tiles, search, args.output, progress), bench="reports")


def report_reports(result, out):
    print(f"reports of {result['workload']} on {result['tiles']} tiles (the run took {result['run_seconds']:.1f} s; "
          f"placement viewer {result['sizes']['placement.html']:,} bytes (target at most "
          f"{result['targets']['placement_page_bytes']:,}), run profile {result['sizes']['run-profile.html']:,} "
          f"bytes):", file=out)
    for name, check in result["checks"].items():
        print(f"  {name:<10} {'ok    ' if check['ok'] else 'FAILED'} {check['detail']}", file=out)
    paint = result["first_paint_ms"]
    print(f"  first paint of the placement viewer: {paint[0]:.0f} ms cold, {paint[1]:.0f} ms warm "
          f"(target < {result['targets']['first_paint_ms']} ms)", file=out)
    print("targets: " + "; ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in result["targets_met"].items()),
          file=out)


def report_viewer(result, out):
    paint, t = result["first_paint_ms"], result["targets"]
    print(f"placement viewer with {result['allocations']} allocations: first paint {paint[0]:.0f} ms cold, "
          f"{paint[1]:.0f} ms warm (target < {t['first_paint_ms']} ms); hover median "
          f"{result['hover_ms_median']:.1f} ms, max {result['hover_ms_max']:.1f} ms over {result['hovers']} "
          f"(target < {t['hover_ms']} ms)", file=out)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_compile(args, progress):
    ctx = Context(progress=lambda stage, done, total: progress.update(f"compile: {stage}"))
    profile = profiles.load(ctx, args.device, args.tiles or 0)
    stages = {}
    started = time.perf_counter()
    progress.update("generating inputs and weights")
    workload = Workload(ctx, {"workload": "mlp", "batch": args.batch, "precision": args.precision})
    stages["generate"] = {"seconds": time.perf_counter() - started, "peak_rss_mib": peak_rss_mib()}
    package, report = workload.compile(profile)
    for stage, seconds in report["wall_seconds"].items():
        stages[stage] = {"seconds": seconds}
    stages["package"]["peak_rss_mib"] = peak_rss_mib()
    build = sum(report["wall_seconds"].values())
    run_result, _, device_seconds = runner.run(ctx, package, progress)
    stages["device"] = {"seconds": device_seconds, "peak_rss_mib": peak_rss_mib()}
    progress.update("FP32 reference")
    begun = time.perf_counter()
    workload.reference_run({"fp32": True})
    stages["reference"] = {"seconds": time.perf_counter() - begun, "peak_rss_mib": peak_rss_mib()}
    return {"bench": "compile", "device": profile["name"], "tiles": profile["tiles"], "batch": args.batch,
            "precision": args.precision, "stages": stages, "build_seconds": build,
            "estimate_cycles": report["plan"]["cycles"], "simulated_cycles": run_result["cycles"],
            "simulated_ms": run_result["ms"], "peak_rss_mib": peak_rss_mib()}


def report_compile(result, out):
    print(f"compile bench: mlp batch {result['batch']} {result['precision']} on {result['device']} "
          f"({result['tiles']} tiles)", file=out)
    for stage, s in result["stages"].items():
        rss = f", peak RSS {s['peak_rss_mib']:.0f} MiB" if "peak_rss_mib" in s else ""
        print(f"  {stage:<10} {s['seconds']:7.2f} s{rss}", file=out)
    print(f"  build (plan to package) {result['build_seconds']:.2f} s (target < 10 s); peak RSS "
          f"{result['peak_rss_mib']:.0f} MiB (target < 2048); device run {result['stages']['device']['seconds']:.2f} s "
          f"(target < 10 s)", file=out)
    print(f"  simulated {result['simulated_cycles']:,} cycles ({result['simulated_ms']:.4f} ms); planner "
          f"estimate {result['estimate_cycles']:,} cycles", file=out)


def comma_list(convert):
    """An argparse type: a comma-separated list, each item an argparse type of its own."""
    def parse(text):
        values = [convert(v.strip()) for v in text.split(",") if v.strip()]
        if not values:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got '{text}'")
        return values
    return parse


def batch_size(text):
    if text not in ("1", "2", "4"):
        raise argparse.ArgumentTypeError(f"expected batches 1, 2 or 4, got '{text}'")
    return int(text)


def plan_case(ctx, profile, batch, budget, folder):
    """One compile of the full-size FP8 MLP; its search's figures (from the
    compile report, or for a rejection from the library's record of it)."""
    workload = Workload(ctx, {"workload": "mlp", "batch": batch})
    begun = time.perf_counter()
    try:
        package, report = workload.compile(profile, budget, memory_profiles=folder)
    except PlanRejected as error:
        wall = time.perf_counter() - begun
        search = error.rejection["search"]
        case = {"outcome": "rejected", "reason": error.message, "attempts": search["attempts"],
                "plan_seconds": search["plan_seconds"], "refine_seconds": search["refine_seconds"],
                "wall_seconds": wall}
    else:
        wall = time.perf_counter() - begun
        try:
            run_result = runner.run_resident(ctx, package, 1)[0]
        finally:
            package.close()
        w = report["wall_seconds"]
        case = {"outcome": "planned", "attempts": len(report["attempts"]) + 1, "plan_seconds": w["plan"],
                "refine_seconds": w["lower"], "peak_bytes": report["estimate"]["peak_bytes"],
                "estimate_cycles": report["plan"]["cycles"], "device_cycles": run_result["cycles"],
                "wall_seconds": wall}
    workload.close()
    case["search_seconds"] = case["plan_seconds"] + case["refine_seconds"]
    case["refinement_share"] = case["refine_seconds"] / case["search_seconds"] if case["search_seconds"] else 0.0
    return case


def bench_plan(args, progress):
    ctx = Context(progress=lambda stage, done, total: progress.update(f"compile: {stage}"))
    profile = profiles.load(ctx, args.device, args.tiles or 0)
    cases = []
    for batch in args.batches:
        for budget in args.budgets:
            progress.update(f"planning batch {batch} at {budget or 'the default budget'}")
            with tempfile.TemporaryDirectory() as folder:
                case = plan_case(ctx, profile, batch, budget, folder)
            cases.append(dict(case, batch=batch, budget=budget or "default"))
        base = next(c for c in cases if c["batch"] == batch and c["budget"] == (args.budgets[0] or "default"))
        for c in cases:
            if c["batch"] == batch:
                c["search_vs_first_budget"] = c["search_seconds"] / base["search_seconds"]
    ranking = [dict(ranking_of([c for c in cases if c["batch"] == batch]), batch=batch) for batch in args.batches]
    return {"bench": "plan", "device": profile["name"], "tiles": profile["tiles"], "cases": cases,
            "ranking": ranking}


def ranking_of(cases):
    """How the estimates order a batch's planned cases against the device:
    of the pairs whose device cycles differ, those the estimates put in the
    same order, and the worst inversion (its budgets, the device cycles the
    estimate's choice loses and the estimate difference behind it)."""
    planned = [c for c in cases if c["outcome"] == "planned"]
    pairs = ordered = 0
    worst = None
    for i, a in enumerate(planned):
        for b in planned[i + 1:]:
            device = a["device_cycles"] - b["device_cycles"]
            if not device:
                continue
            pairs += 1
            estimate = a["estimate_cycles"] - b["estimate_cycles"]
            if estimate * device > 0:
                ordered += 1
            elif not worst or abs(device) > worst["device_cycles_lost"]:
                worst = {"budgets": [a["budget"], b["budget"]], "device_cycles_lost": abs(device),
                         "estimate_difference": abs(estimate)}
    return {"plans": len(planned), "pairs": pairs, "in_device_order": ordered, "worst_inversion": worst}


def report_plan(result, out):
    print(f"plan bench: full-size FP8 MLP on {result['device']} ({result['tiles']} tiles); search = catalogue "
          f"and search + refinement (lowering and liveness of each candidate plan)", file=out)
    for c in result["cases"]:
        outcome = (f"planned, peak {c['peak_bytes']:,} B, estimate {c['estimate_cycles']:,} against "
                   f"{c['device_cycles']:,} device cycles" if c["outcome"] == "planned" else "rejected")
        print(f"  batch {c['batch']} budget {str(c['budget']):>7}: search {c['search_seconds']:6.2f} s "
              f"(x{c['search_vs_first_budget']:.2f} of the first budget's), refinement "
              f"{100 * c['refinement_share']:4.1f}%, {c['attempts']:>2} attempt(s), {outcome}", file=out)
    for r in result["ranking"]:
        worst = r["worst_inversion"]
        inversion = (f"worst inversion: budgets {worst['budgets'][0]} and {worst['budgets'][1]}, the device "
                     f"{worst['device_cycles_lost']:,} cycles apart against an estimate difference of "
                     f"{worst['estimate_difference']:,}" if worst else "no inversion")
        print(f"  ranking, batch {r['batch']}: {r['in_device_order']} of {r['pairs']} pairs of its {r['plans']} "
              f"plans in the device's order; {inversion}", file=out)


def bench_vit(args, progress):
    if args.exchange_modes:
        return exchange_modes(args, progress)
    # First, while this process is small: a child's peak RSS starts from its
    # parent's (Linux keeps the high-water mark across exec).
    compile_only_runs = [compile_only(args, batch, progress) for batch in COMPILE_ONLY_BATCHES]
    ctx = Context(progress=lambda stage, done, total: progress.update(f"compile: {stage}"))
    profile = profiles.load(ctx, args.device, args.tiles or 0)
    progress.update(f"generating the {args.workload} inputs and weights")
    options = {"workload": args.workload, **({"layers": args.layers} if args.layers else {})}
    workload = Workload(ctx, options)
    package, report = workload.compile(profile, attention=args.attention)
    build = sum(report["wall_seconds"].values())
    build_rss = peak_rss_mib()
    run_result, outputs, _, seconds = runner.run_resident(ctx, package, args.inferences, progress)
    per_inference = sum(seconds) / args.inferences
    progress.update("again without the allocation checks")
    _, unchecked_outputs, _, unchecked = runner.run_resident(ctx, package, args.inferences, progress,
                                                             {"allocation_checks": False})
    unchecked_per_inference = sum(unchecked) / args.inferences
    progress.update("FP32 reference")
    begun = time.perf_counter()
    workload.reference_run({"fp32": True})
    reference = time.perf_counter() - begun
    output = next(t for t in workload.info()["tensors"] if t["role"] == "output")
    check = check_outputs(ctx, workload.reference_output(output["name"]), outputs[-1][output["name"]],
                          output["dtype"], output["rows"], output["cols"],
                          tolerances.criteria("fp32", output["dtype"]))
    result = {"bench": "vit", "workload": args.workload, "device": profile["name"], "tiles": profile["tiles"],
              "geometry": transformer.geometry(workload.info()), "attention": args.attention,
              "planned_attention": transformer.planned_attention(report),
              "build_seconds": build, "build_stages": report["wall_seconds"], "build_peak_rss_mib": build_rss,
              "inferences": args.inferences, "device_seconds_per_inference": per_inference,
              "unchecked_device_seconds_per_inference": unchecked_per_inference,
              # The fastest inference of each: the least disturbed by the host's other work.
              "device_seconds_fastest": min(seconds), "unchecked_device_seconds_fastest": min(unchecked),
              "allocation_check_cost": min(seconds) / min(unchecked) - 1,
              "unchecked_outputs_identical": unchecked_outputs == outputs,
              "reference_seconds": reference, "device_reference_ratio": per_inference / reference,
              "simulated_cycles_per_inference": run_result["cycles"], "simulated_ms_per_inference": run_result["ms"],
              "identical_outputs": all(o == outputs[0] for o in outputs[1:]),
              "min_cosine": check["min_cosine"], "check_passed": check["passed"],
              "peak_rss_mib": peak_rss_mib(), "targets": VIT_TARGETS}
    result["compile_only"] = compile_only_runs
    result["compile_only_targets"] = COMPILE_ONLY_TARGETS
    result["targets_met"] = {
        "compile_only_build_seconds": all(c["build_seconds"] < COMPILE_ONLY_TARGETS["build_seconds"]
                                          for c in result["compile_only"]),
        "compile_only_peak_rss_mib": all(c["peak_rss_mib"] < COMPILE_ONLY_TARGETS["peak_rss_mib"]
                                         for c in result["compile_only"]),
        "build_seconds": build < VIT_TARGETS["build_seconds"],
        "peak_rss_mib": result["peak_rss_mib"] < VIT_TARGETS["peak_rss_mib"],
        "device_reference_ratio": result["device_reference_ratio"] <= VIT_TARGETS["device_reference_ratio"],
        "allocation_check_cost": result["allocation_check_cost"] <= VIT_TARGETS["allocation_check_cost"]}
    return result


def exchange_modes(args, progress):
    """The ViT in each exchange scheduling mode: built, run once, checked."""
    ctx = Context(progress=lambda stage, done, total: progress.update(f"compile: {stage}"))
    profile = profiles.load(ctx, args.device, args.tiles or 0)
    progress.update(f"generating the {args.workload} inputs and weights")
    options = {"workload": args.workload, **({"layers": args.layers} if args.layers else {})}
    workload = Workload(ctx, options)
    progress.update("FP32 reference")
    workload.reference_run({"fp32": True})
    output = next(t for t in workload.info()["tensors"] if t["role"] == "output")
    reference = workload.reference_output(output["name"])
    rows = []
    for name, mode in EXCHANGE_MODES:
        progress.update(f"{name}: building")
        package, report = workload.compile(profile, attention=args.attention, search=mode)
        support = report["package"]
        run_result, outputs, _ = runner.run(ctx, package, progress)
        package.close()
        check = check_outputs(ctx, reference, outputs[output["name"]], output["dtype"], output["rows"],
                              output["cols"], tolerances.criteria("fp32", output["dtype"]))
        rows.append({"mode": name, "options": mode, "cycles": run_result["cycles"],
                     "exchange_cycles": run_result["totals"]["exchange"],
                     "max_exchange_table_bytes": support["exchange_table_bytes"],
                     "tensor_bytes_available": support["tensor_bytes_available"],
                     "build_seconds": sum(report["wall_seconds"].values()), "min_cosine": check["min_cosine"],
                     "check_passed": check["passed"]})
    default = rows[0]
    for r in rows:
        r["table_ratio"] = r["max_exchange_table_bytes"] / default["max_exchange_table_bytes"]
        r["cycle_ratio"] = r["cycles"] / default["cycles"]
    return {"bench": "vit-exchange-modes", "workload": args.workload, "device": profile["name"],
            "tiles": profile["tiles"], "geometry": transformer.geometry(workload.info()), "attention": args.attention,
            "modes": rows, "targets": EXCHANGE_MODE_TARGETS,
            "targets_met": {"compact_table_ratio": rows[1]["table_ratio"] <= EXCHANGE_MODE_TARGETS["compact_table_ratio"],
                            "balanced_no_slower": rows[2]["cycles"] <= default["cycles"],
                            "all_checks_passed": all(r["check_passed"] for r in rows)}}


def report_exchange_modes(result, out):
    g, met = result["geometry"], result["targets_met"]
    print(f"vit exchange modes: {result['workload']} on {result['device']} ({result['tiles']} tiles), {g['layers']} "
          f"layers, attention {result['attention']}", file=out)
    print("| mode | cycles | exchange cycles | max exchange table bytes per tile | tensor bytes available per tile "
          "| build s | min cosine |", file=out)
    print("|---|---:|---:|---:|---:|---:|---:|", file=out)
    for r in result["modes"]:
        print(f"| {r['mode']} | {r['cycles']:,} ({r['cycle_ratio']:.3f}x) | {r['exchange_cycles']:,} | "
              f"{r['max_exchange_table_bytes']:,} ({r['table_ratio']:.3f}x) | {r['tensor_bytes_available']:,} | "
              f"{r['build_seconds']:.2f} | {r['min_cosine']:.6f} {'PASS' if r['check_passed'] else 'FAIL'} |",
              file=out)
    verdict = {True: "met", False: "NOT met"}
    print(f"  targets: compact table <= {EXCHANGE_MODE_TARGETS['compact_table_ratio']}x the default's: "
          f"{verdict[met['compact_table_ratio']]}; balanced no slower than the default: "
          f"{verdict[met['balanced_no_slower']]}; every output passes: {verdict[met['all_checks_passed']]}",
          file=out)


def compile_only(args, batch, progress):
    """ipu-e2e-test --compile-only of the bench's ViT at one batch, in its own
    process (so its peak RSS is the build's): build seconds by stage, peak RSS."""
    progress.update(f"compile only, batch {batch}")
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, str(CLI), "--quiet", "--workload", args.workload, "--device", args.device,
                   "--batch", str(batch), "--attention", args.attention, "--compile-only", "--output", out]
        command += ["--tiles", str(args.tiles)] if args.tiles else []
        command += ["--layers", str(args.layers)] if args.layers else []
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != EXIT_OK:
            raise IpuError(INTERNAL, f"compile only, batch {batch}: {done.stderr.strip() or done.stdout.strip()}")
        build = json.loads((Path(out) / "result.json").read_text())["build"]
    return {"batch": batch, "build_seconds": build["seconds"], "stages": build["stages"],
            "peak_rss_mib": build["peak_rss_bytes"] / 2**20}


def report_vit(result, out):
    if result["bench"] == "vit-exchange-modes":
        return report_exchange_modes(result, out)
    g, met = result["geometry"], result["targets_met"]
    planned = ", ".join(f"{kind} {mode}" for kind, mode in result["planned_attention"].items())

    def verdict(key):
        return "met" if met[key] else "NOT met"

    print(f"vit bench: {result['workload']} on {result['device']} ({result['tiles']} tiles): {g['layers']} "
          f"layers, {g['heads']} heads x {g['head_dim']}, {g['tokens']} tokens x {g['channels']} -> "
          f"{g['hidden']}, attention {result['attention']} (planned: {planned})", file=out)
    print("  build (plan to package) {:.2f} s ({}); target < {} s: {}".format(
        result["build_seconds"], ", ".join(f"{k} {v:.2f} s" for k, v in result["build_stages"].items()),
        VIT_TARGETS["build_seconds"], verdict("build_seconds")), file=out)
    for c in result["compile_only"]:
        print(f"  compile only, batch {c['batch']}: build {c['build_seconds']:.2f} s ("
              + ", ".join(f"{k} {v:.2f} s" for k, v in c["stages"].items())
              + f"), peak RSS {c['peak_rss_mib']:.0f} MiB", file=out)
    print(f"  compile-only targets: build < {COMPILE_ONLY_TARGETS['build_seconds']} s: "
          f"{verdict('compile_only_build_seconds')}; peak RSS < {COMPILE_ONLY_TARGETS['peak_rss_mib']} MiB: "
          f"{verdict('compile_only_peak_rss_mib')}", file=out)
    print(f"  peak RSS {result['peak_rss_mib']:.0f} MiB (after the build {result['build_peak_rss_mib']:.0f} MiB); "
          f"target < {VIT_TARGETS['peak_rss_mib']} MiB: {verdict('peak_rss_mib')}", file=out)
    print(f"  device {result['device_seconds_per_inference']:.2f} s per inference over {result['inferences']} "
          f"resident inferences (outputs {'bit identical' if result['identical_outputs'] else 'DIFFER'}); FP32 "
          f"reference {result['reference_seconds']:.2f} s; device/reference {result['device_reference_ratio']:.2f}, "
          f"target <= {VIT_TARGETS['device_reference_ratio']}: {verdict('device_reference_ratio')}", file=out)
    print(f"  allocation checks: fastest inference {result['device_seconds_fastest']:.2f} s against "
          f"{result['unchecked_device_seconds_fastest']:.2f} s without them (mean "
          f"{result['unchecked_device_seconds_per_inference']:.2f} s; same outputs: "
          f"{'yes' if result['unchecked_outputs_identical'] else 'NO'}), cost "
          f"{100 * result['allocation_check_cost']:+.1f}%, target <= "
          f"{100 * VIT_TARGETS['allocation_check_cost']:.0f}%: {verdict('allocation_check_cost')}", file=out)
    print(f"  simulated {result['simulated_cycles_per_inference']:,} cycles ({result['simulated_ms_per_inference']:.4f} "
          f"ms) per inference; against the FP32 reference: min cosine {result['min_cosine']:.6f} "
          f"({'PASS' if result['check_passed'] else 'FAIL'})", file=out)


def gemm_shape(text):
    """An argparse type: MxNxK with M and N in 1..4096 and K in 1..65535 (the bench's limits)."""
    expected = f"expected MxNxK such as 46x47x1152 (M, N 1..4096; K 1..65535), got '{text}'"
    try:
        m, n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(expected) from None
    if not (1 <= m <= 4096 and 1 <= n <= 4096 and 1 <= k <= 65535):
        raise argparse.ArgumentTypeError(expected)
    return m, n, k


def bench_device(args, progress):
    ctx = Context()
    profile = profiles.load(ctx, args.device, args.tiles or 0)
    m, n, k = args.gemm
    result = {"bench": "device", "device": profile["name"], "tiles": profile["tiles"]}
    progress.update("exchange-stress: building")
    started = time.perf_counter()
    package = Package.build_stress(ctx, stress.options(profile, "all", "both", args.iterations))
    built = time.perf_counter()
    _, outputs, device_seconds = runner.run(ctx, package, progress)
    progress.update("exchange-stress: checking")
    cases = stress.check(package.info()["meta"], outputs, lambda name: package.record("expected", name))
    finished = time.perf_counter()
    words = sum(c["words_checked"] for c in cases)
    result["exchange"] = {
        "words": words, "build_seconds": built - started, "device_seconds": device_seconds,
        "words_per_second": words / device_seconds, "total_seconds": finished - started,
        "passed": all(c["passed"] for c in cases),
    }
    result["gemm"] = {}
    for precision in ("fp16", "fp8"):
        progress.update(f"tile GEMM {precision} {m}x{n}x{k}")
        result["gemm"][precision] = bench_gemm(ctx, {"profile": profile, "m": m, "n": n, "k": k,
                                                     "precision": precision, "repeats": args.repeats})
    return result


def report(result, out):
    x = result["exchange"]
    print(f"device bench on {result['device']} ({result['tiles']} tiles)", file=out)
    print(f"  exchange-stress all: {x['words']} words, {x['words_per_second'] / 1e6:.1f} M words/s simulated; "
          f"whole run {x['total_seconds']:.2f} s (build {x['build_seconds']:.2f} s, device "
          f"{x['device_seconds']:.2f} s; target < 10 s), {'PASS' if x['passed'] else 'FAIL'}", file=out)
    for precision, g in result["gemm"].items():
        print(f"  tile GEMM {precision} {g['m']}x{g['n']}x{g['k']} x {g['tiles']} tiles: device "
              f"{g['device_gflops']:.1f} GFLOP/s ({g['device_seconds']:.3f} s), direct sgemm "
              f"{g['direct_gflops']:.1f} GFLOP/s ({g['direct_seconds']:.3f} s), device/direct "
              f"throughput {g['throughput_ratio']:.2f} (target >= 0.5)", file=out)


def main(argv=None):
    args = parser().parse_args(argv)
    progress = Progress(quiet=args.quiet)
    work, show = {"device": (bench_device, report), "compile": (bench_compile, report_compile),
                  "kernels": (run_kernels, report_kernels), "viewer": (run_viewer, report_viewer),
                  "reports": (run_reports, report_reports),
                  "plan": (bench_plan, report_plan), "vit": (bench_vit, report_vit),
                  "noise": (bench_noise, report_noise), "mutations": (bench_mutations, report_mutations),
                  "exchange": (bench_exchange, report_exchange), "search": (bench_search, report_search),
                  "interrupts": (bench_interrupts, interrupt_bench.report),
                  "model": (model_bench.bench_model, model_bench.report_model)}[args.bench]

    def run():
        output_folders(args, "output")
        return work(args, progress)

    failed, result = guarded("ipu-e2e-bench", progress, run)
    if failed is not None:
        return failed
    show(result, sys.stdout)
    if args.output:
        return write_result("ipu-e2e-bench", args.output / f"bench-{args.bench}.json", result) or EXIT_OK
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
