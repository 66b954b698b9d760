"""ipu-e2e-test: build a workload's package (or load a saved one), run it on
the device model and check it.  Exit codes: 0 pass, 1 check failed, 2 usage or
input error (including a malformed package), 3 device fault or internal error.
"""
import argparse
import sys
import time
from pathlib import Path

from . import artifacts, profiles, report as html_report, runner, stress
from .command import EXIT_CHECK_FAILED, EXIT_FAULT, EXIT_OK, UsageError, guarded, positive_int
from .native import Context, Package
from .progress import Progress

WORKLOADS = ("exchange-stress",)


def parser():
    p = argparse.ArgumentParser(
        prog="ipu-e2e-test",
        description="Compile a workload for the simulated C600-class tile machine, run it and check "
                    "it. Exit codes: 0 pass, 1 check failed, 2 usage or input error, 3 device fault "
                    "or internal error.")
    p.add_argument("--workload", choices=WORKLOADS, default="exchange-stress",
                   help="workload to build and run (default: exchange-stress)")
    p.add_argument("--device", default="c600", metavar="PROFILE",
                   help="device profile: a name in fixtures/profiles (%s) or a JSON file (default: c600)"
                        % ", ".join(profiles.available()))
    p.add_argument("--tiles", type=positive_int, metavar="N", help="override the profile's tile count")
    p.add_argument("--exchange-pattern", choices=stress.PATTERNS, default="all",
                   help="exchange-stress pattern (default: all)")
    p.add_argument("--sources", choices=stress.SOURCES, default="both",
                   help="exchange-stress source memory: region 0, region 1 or both (default: both)")
    p.add_argument("--iterations", type=positive_int, default=3, metavar="N",
                   help="Repeat iterations per exchange-stress case (default: 3)")
    p.add_argument("--output", metavar="DIR", type=Path, help="write result.json to DIR")
    p.add_argument("--profile-directory", metavar="DIR", type=Path,
                   help="write the run's cycle profile to DIR (run-profile.json and a standalone "
                        "run-profile.html)")
    p.add_argument("--save-package", metavar="FILE", type=Path, help="keep the package the workload built")
    p.add_argument("--package", metavar="FILE", type=Path,
                   help="load a saved package and run it on the inputs recorded with it")
    p.add_argument("--threads", type=positive_int, metavar="N", help="device worker threads (default: all cores)")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def build_package(ctx, args, progress):
    profile = profiles.load(ctx, args.device, args.tiles or 0)
    progress.update(f"building {args.workload} for {profile['tiles']} tiles")
    return Package.build_stress(ctx, stress.options(profile, args.exchange_pattern, args.sources,
                                                    args.iterations))


def load_package(ctx, args, progress):
    progress.update(f"loading {args.package}")
    package = Package.load_file(ctx, args.package)
    info = package.info()
    if args.tiles and args.tiles != info["tiles"]:
        raise UsageError(f"--tiles {args.tiles}: the package {args.package} was built for {info['tiles']} tiles")
    return package


def execute(args, progress):
    """Returns (exit code, result dict)."""
    ctx = Context(threads=args.threads or 0)
    wall = {}
    started = time.perf_counter()
    package = load_package(ctx, args, progress) if args.package else build_package(ctx, args, progress)
    wall["build"] = time.perf_counter() - started
    info = package.info()
    meta = info["meta"]
    if meta.get("workload") != "exchange-stress":
        raise UsageError(f"--package {args.package}: unknown workload '{meta.get('workload')}' in its metadata")
    if args.save_package:
        progress.update(f"saving {args.save_package}")
        package.save(args.save_package)
    result = {"workload": meta["workload"], "device": info["profile"]["name"], "tiles": info["tiles"],
              "package": {k: info[k] for k in ("code_bytes", "descriptor_bytes", "data_bytes", "segments",
                                               "profile_digest")},
              "options": {k: meta[k] for k in ("pattern", "sources", "iterations", "words")}}
    try:
        run_result, outputs, wall["device"] = runner.run(ctx, package, progress)
    except runner.DeviceFault as fault:
        result.update(status="FAULT", fault=fault.fault, message=str(fault), wall_seconds=wall)
        return EXIT_FAULT, result
    if args.profile_directory:
        artifacts.write_json(args.profile_directory / "run-profile.json", run_result)
        html_report.write_run_profile_html(args.profile_directory / "run-profile.html", run_result)
    progress.update("checking every destination word")
    started = time.perf_counter()
    cases = stress.check(meta, outputs, lambda name: package.record("expected", name))
    wall["check"] = time.perf_counter() - started
    passed = all(c["passed"] for c in cases)
    result.update(status="PASS" if passed else "FAIL", cases=cases,
                  words_checked=sum(c["words_checked"] for c in cases),
                  mismatches=sum(c["mismatches"] for c in cases),
                  cycles=run_result["cycles"], ms=run_result["ms"], totals=run_result["totals"],
                  wall_seconds=wall)
    return (EXIT_OK if passed else EXIT_CHECK_FAILED), result


def report(result, out):
    if result.get("status") == "FAULT":
        f = result["fault"]
        print(f"FAULT {f['kind']} on tile {f['tile']} at [0x{f['address_lo']:X}, 0x{f['address_hi']:X})"
              f" ({f['program']} op {f['op_index']}, step {f['step']}): {f['detail']}", file=out)
        if f.get("allocation"):
            print(f"  owning allocation: {f['allocation']}", file=out)
        return
    print(f"{result['workload']} on {result['device']} ({result['tiles']} tiles), pattern "
          f"{result['options']['pattern']}, sources {result['options']['sources']}, "
          f"{result['options']['iterations']} iterations", file=out)
    for case in result["cases"]:
        line = f"  {'PASS' if case['passed'] else 'FAIL'} {case['name']:<28} {case['words_checked']:>10} words"
        if case["first_mismatch"]:
            m = case["first_mismatch"]
            line += (f", {case['mismatches']} wrong (first at word {m['word']}: expected {m['expected']},"
                     f" got {m['actual']})")
        print(line, file=out)
    print(f"simulated {result['cycles']} cycles ({result['ms']:.4f} ms); device run "
          f"{result['wall_seconds']['device']:.2f} s", file=out)
    print(f"{result['status']}: {result['words_checked']} destination words checked, "
          f"{result['mismatches']} wrong", file=out)


def main(argv=None):
    args = parser().parse_args(argv)
    progress = Progress(quiet=args.quiet)
    failed, outcome = guarded("ipu-e2e-test", progress, lambda: execute(args, progress))
    if failed is not None:
        return failed
    code, result = outcome
    report(result, sys.stdout)
    if args.output:
        artifacts.write_json(args.output / "result.json", result)
    return code


if __name__ == "__main__":
    sys.exit(main())
