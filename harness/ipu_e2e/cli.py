"""ipu-e2e-test: build a workload's package (or load a saved one), run it on
the device model and check it, writing result.json and the run's reports
(run_reports.py: stable names beside an index.html).  Exit codes: 0 pass, 1
check failed or plan rejected, 2 usage or input error (including a malformed
package), 3 device fault or internal error.
"""
import argparse
import sys
import time
from pathlib import Path

from . import failure, profiles, run_reports, stress, transformer
from .command import (EXIT_USAGE, UsageError, guarded, output_file, output_folders, positive_int, thread_count,
                      tile_count, write_result)
from . import native
from .native import Context, Package
from .progress import Progress


def parser():
    p = argparse.ArgumentParser(
        prog="ipu-e2e-test",
        description="Compile a workload for the simulated C600-class tile machine, run it and check "
                    "it. Exit codes: 0 pass, 1 check failed or plan rejected, 2 usage or input error, 3 device "
                    "fault or internal error.")
    p.add_argument("--workload", choices=("exchange-stress",) + transformer.WORKLOADS, default="mlp",
                   help="workload to build and run (default: mlp)")
    p.add_argument("--device", default="c600", metavar="PROFILE",
                   help="device profile: a name in fixtures/profiles (%s) or a JSON file (default: c600)"
                        % ", ".join(profiles.available()))
    p.add_argument("--tiles", type=tile_count, metavar="N", help="override the profile's tile count")
    p.add_argument("--exchange-pattern", choices=stress.PATTERNS, default=None,
                   help="exchange-stress pattern (default: all)")
    p.add_argument("--sources", choices=stress.SOURCES, default=None,
                   help="exchange-stress source memory: region 0, region 1 or both (default: both)")
    p.add_argument("--iterations", type=positive_int, default=None, metavar="N",
                   help="Repeat iterations per exchange-stress case (default: 3)")
    transformer.add_arguments(p)
    p.add_argument("--output", metavar="DIR", type=Path, help="write result.json to DIR")
    p.add_argument("--profile-directory", metavar="DIR", type=Path,
                   help="write the run's cycle profile to DIR (run-profile.json and a standalone "
                        "run-profile.html)")
    p.add_argument("--trace", metavar="FILE", type=Path,
                   help="write the run as a trace in the Chrome trace event format (opens in Perfetto and "
                        "chrome://tracing): a track per phase kind and per compiler op, the busiest tiles as "
                        "their own tracks, counters of live bytes")
    p.add_argument("--save-package", metavar="FILE", type=Path, help="keep the package the workload built")
    p.add_argument("--package", metavar="FILE", type=Path,
                   help="load a saved package and run it on the inputs recorded with it")
    p.add_argument("--threads", type=thread_count, metavar="N", help="device worker threads (default: all cores)")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


WORKLOAD_MODULES = {"exchange-stress": stress, "graph": transformer,
                    **{name: transformer for name in transformer.WORKLOADS}}


def peek_package(ctx, args, progress):
    """What the saved package's file says (Package.peek_file, its data not read) and the name of the
    workload its metadata records."""
    progress.update(f"reading {args.package}")
    peeked = Package.peek_file(ctx, args.package)
    if args.tiles and args.tiles != peeked["tiles"]:
        raise UsageError(f"--tiles {args.tiles}: the package {args.package} was built for {peeked['tiles']} tiles")
    recorded = peeked["meta"].get("workload")
    workload = "graph" if args.graph or args.model else recorded if isinstance(recorded, str) else None
    if workload not in WORKLOAD_MODULES or (workload == "graph" and not (args.graph or args.model)):
        raise UsageError(f"--package {args.package}: workload '{recorded}' in its metadata is not built in: "
                         f"give its description with --graph FILE or its model with --model FILE")
    return peeked, workload


def load_package(ctx, args, module, peeked, progress):
    """The saved package, loaded once the file's streams are checked against the recorded workload
    (transformer.replayed_workload, kept on args): a package whose streams its workload cannot hold is
    refused before its data is read."""
    if module is transformer:
        args.replayed = transformer.replayed_workload(ctx, args, args.workload, peeked, progress)
    progress.update(f"loading {args.package}")
    return Package.load_file(ctx, args.package)


def execute(args, progress, reports):
    """Returns (exit code, result dict, the workload module that reports it)."""
    ctx = Context(threads=args.threads or 0,
                  progress=lambda stage, done, total: progress.update(stage, done or None, total or None))
    started = time.perf_counter()
    profile = package = None
    given = [name for name in BUILD_FLAGS if getattr(args, name) != PARSER_DEFAULTS[name]]
    if args.package and given:
        raise UsageError(f"--{given[0].replace('_', '-')} applies when building a workload, not to --package "
                         f"(a saved package replays as it was built)")
    if args.package:
        # A replay runs the workload the package records, whatever --workload says.
        peeked, args.workload = peek_package(ctx, args, progress)
    else:
        source = f"--graph {args.graph}" if args.graph else f"--model {args.model}" if args.model else None
        if args.graph and args.model:
            raise UsageError(f"--graph {args.graph} and --model {args.model}: give one workload")
        if source and args.workload != PARSER_DEFAULTS["workload"]:
            raise UsageError(f"{source} is the workload: --workload {args.workload} does not apply")
        if source:
            args.workload = "graph"
        profile = profiles.load(ctx, args.device, args.tiles or 0)
        progress.update(f"building {args.graph or args.workload} for {profile['tiles']} tiles")
    # What a model's values and arrays may claim on the host: what the device holds.
    args.value_limit = profiles.device_bytes(profile)
    module = WORKLOAD_MODULES[args.workload]
    if args.inject is not None and args.inject not in {m["name"] for m in native.mutations(ctx)}:
        raise UsageError(f"--inject: no mutation is named '{args.inject}' (ipu-e2e-bench mutations --list lists "
                         "them)")
    module.check_flags(args, PARSER_DEFAULTS)
    if args.package:
        package = load_package(ctx, args, module, peeked, progress)
    code, result = module.execute(ctx, args, profile, package, progress, started, reports)
    return code, result, module


def report(result, module, out):
    if result.get("status") == "FAULT":
        print("\n".join(failure.fault_lines(result["fault"])), file=out)
        return
    module.report(result, out)


# Every flag's value when the user did not give it (None for workload flags).
PARSER_DEFAULTS = vars(parser().parse_args([]))
# The flags that shape what is built.
BUILD_FLAGS = ("workload", "device", "exchange_pattern", "sources", "iterations") + transformer.BUILD_FLAGS


def main(argv=None):
    args = parser().parse_args(argv)
    progress = Progress(quiet=args.quiet)
    reports = run_reports.from_args(args, argv)

    def work():
        output_folders(args, "output", "profile_directory", "dump_tensors", "memory_profile_directory", "export_onnx")
        output_file(args, "save_package")
        output_file(args, "trace")
        output_file(args, "export_graph")
        return execute(args, progress, reports)

    failed, outcome = guarded("ipu-e2e-test", progress, work)
    if failed is not None:
        return failed
    code, result, module = outcome
    report(result, module, sys.stdout)
    result = dict(run_reports.record("result", reports.command), reports=reports.paths(), **result)
    if args.output:
        failed = write_result("ipu-e2e-test", args.output / "result.json", result)
        if failed:
            return failed
    memory = args.memory_profile_directory
    try:
        reports.write_index(result, [memory / name for name in result.get("memory_profiles", [])] if memory else [])
    except OSError as error:
        print(f"ipu-e2e-test: error: cannot write {reports.index}: {error.strerror}", file=sys.stderr)
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())
