"""The exchange-stress workload from the harness side: build options, the
per-case exact check of every destination word, and an independent
re-implementation of the payload and routing rules (used by the tests to
check the expectations the library records).
"""
from array import array

from .runner import compare_exact

PATTERNS = ("unicast", "multicast", "paired", "loopback", "base", "all")
SOURCES = ("standard", "interleaved", "both")


def options(profile, pattern, sources, iterations):
    return {"profile": profile, "pattern": pattern, "sources": sources, "iterations": iterations}


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
