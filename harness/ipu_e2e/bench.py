"""ipu-e2e-bench: benchmarks reported as figures and as ratios against a
baseline measured in the same run (never asserted in tests).

  device   exchange-stress: simulated exchange words per second of wall time
           and the whole `--exchange-pattern all` run's wall time; tile GEMMs
           through the device versus one direct sgemm of the same total work.
"""
import argparse
import sys
import time
from pathlib import Path

from . import artifacts, profiles, runner, stress
from .command import EXIT_OK, guarded, positive_int
from .native import Context, Package, bench_gemm
from .progress import Progress

def parser():
    p = argparse.ArgumentParser(prog="ipu-e2e-bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    device = sub.add_parser("device", help="exchange and tile-GEMM throughput of the device model")
    device.add_argument("--device", default="c600", metavar="PROFILE", help="device profile (default: c600)")
    device.add_argument("--tiles", type=positive_int, metavar="N", help="override the profile's tile count")
    device.add_argument("--iterations", type=positive_int, default=3, metavar="N",
                        help="exchange-stress Repeat iterations (default: 3)")
    device.add_argument("--gemm", default="46x47x1152", metavar="MxNxK",
                        help="tile GEMM shape (default: 46x47x1152)")
    device.add_argument("--repeats", type=positive_int, default=3, metavar="R",
                        help="timed repetitions; the best is reported (default: 3)")
    device.add_argument("--output", type=Path, metavar="DIR", help="write bench-device.json to DIR")
    device.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def gemm_shape(text):
    try:
        m, n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--gemm: expected MxNxK such as 46x47x1152, got '{text}'") from None
    return m, n, k


def bench_device(args, progress):
    ctx = Context()
    profile = profiles.load(ctx, args.device, args.tiles or 0)
    m, n, k = gemm_shape(args.gemm)
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
    failed, result = guarded("ipu-e2e-bench", progress, lambda: bench_device(args, progress))
    if failed is not None:
        return failed
    report(result, sys.stdout)
    if args.output:
        artifacts.write_json(args.output / "bench-device.json", result)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
