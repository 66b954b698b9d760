"""The exchange-stress workload from the harness side: build options, the
per-case exact check of every destination word, and an independent
re-implementation of the payload and routing rules (used by the tests to
check the expectations the library records).
"""
import time
from array import array

from . import runner
from .command import EXIT_CHECK_FAILED, EXIT_FAULT, EXIT_OK, UsageError
from .native import Package
from .runner import compare_exact

PATTERNS = ("unicast", "multicast", "paired", "loopback", "base", "all")
SOURCES = ("standard", "interleaved", "both")
FLAGS = {"exchange_pattern": "all", "sources": "both", "iterations": 3}


def options(profile, pattern, sources, iterations, inject=None):
    chosen = {"profile": profile, "pattern": pattern, "sources": sources, "iterations": iterations}
    if inject:
        chosen["inject"] = inject
    return chosen


def check(meta, outputs, expected_of):
    """Per case: compare the output stream with its recorded expectation."""
    cases = []
    for case in meta["cases"]:
        result = compare_exact(case["name"], outputs[case["name"]], expected_of(case["name"]))
        result.update(name=case["name"], iterations=case["iterations"], passed=result["mismatches"] == 0)
        cases.append(result)
    return cases


def payload(case_index, tile, iteration, k):
    """The payload word the device must move (same rule as stress/stress.c)."""
    m = 0xFFFFFFFF
    x = (((case_index * 1000003 + tile) * 1000003 + iteration) * 1000003 + k) & m
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & m
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & m
    x ^= x >> 16
    return x


def expected_stream(case, tiles):
    """Destination bytes of one case on every tile: [tile][iteration][receiver][word]."""
    words = case["words"] * case["word_bytes"] // 4
    out = array("I")
    for tile in range(tiles):
        for iteration in range(case["iterations"]):
            for offset in case["offsets"]:
                sender = (tile - offset) % tiles
                out.extend(payload(case["case_index"], sender, iteration, k) for k in range(words))
    return out.tobytes()


def check_flags(args, defaults):
    """Refuse the transformer workloads' flags; fill this one's defaults."""
    from . import transformer
    given = [name for name in transformer.FLAGS if getattr(args, name) != defaults[name] and name != "inject"]
    if given:
        raise UsageError(f"--{given[0].replace('_', '-')} applies to {transformer.applies_to(given[0])}, not to "
                         f"--workload exchange-stress")
    for name, value in FLAGS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def execute(ctx, args, profile, package, progress, started, reports):
    """Build (or take) the package, run it, check every destination word."""
    if package is None:
        package = Package.build_stress(ctx, options(profile, args.exchange_pattern, args.sources,
                                                    args.iterations, args.inject))
    wall = {"build": time.perf_counter() - started}
    info = package.info()
    meta = info["meta"]
    if args.save_package:
        progress.update(f"saving {args.save_package}")
        package.save(args.save_package)
    result = {"workload": meta["workload"], "device": info["profile"]["name"], "tiles": info["tiles"],
              "package": {k: info[k] for k in ("code_bytes", "descriptor_bytes", "data_bytes", "segments",
                                               "profile_digest")},
              "options": {k: meta[k] for k in ("pattern", "sources", "iterations", "words")},
              "wall_seconds": wall}
    outcome = runner.run_checked(ctx, package, progress, reports, result)
    if outcome is None:
        return EXIT_FAULT, result
    run_result, outputs = outcome
    progress.update("checking every destination word")
    begun = time.perf_counter()
    cases = check(meta, outputs, lambda name: package.record("expected", name))
    wall["check"] = time.perf_counter() - begun
    passed = all(c["passed"] for c in cases)
    result.update(status="PASS" if passed else "FAIL", cases=cases,
                  words_checked=sum(c["words_checked"] for c in cases),
                  mismatches=sum(c["mismatches"] for c in cases),
                  cycles=run_result["cycles"], ms=run_result["ms"], totals=run_result["totals"])
    return (EXIT_OK if passed else EXIT_CHECK_FAILED), result


def report(result, out):
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
    print(f"simulated {result['cycles']:,} cycles ({result['ms']:.4f} ms); device run "
          f"{result['wall_seconds']['device']:.2f} s", file=out)
    print(f"{result['status']}: {result['words_checked']} destination words checked, "
          f"{result['mismatches']} wrong", file=out)
