"""test_compile_only.py: `ipu-e2e-test --compile-only` builds the package
without running it.  Its result.json has no device figures but the build's
stage times and peak RSS, and per tile the live bytes at the peak and how far
up placement went; those are recomputed here from the placement report's
allocations (address, size, first and last step of every buffer).  The
support breakdown (per tile: code span, generated program bytes,
exchange-table bytes and the tensor bytes it leaves, each tile keeping
only its own support free; the device's fewest) is recomputed from the
placement report's support ranges and bounded by its listing (sends and
receives of every exchange step).  The saved package replays and passes,
and flags that need a device run are refused.  A 3-layer vit-small's Repeat
exchanges read the per-layer parameters in place (no member copies among
the placement report's allocations), every one of them moved by
OUTGOING_BASE: one patched word per sending tile, as the audit in
result.json says.
"""
import re
import json

import pytest

from ipu_e2e import placement_report

SMALL = ["--workload", "mlp", "--tiles", 16, "--tokens", 40, "--channels", 32, "--hidden", 64]


def test_compile_only_reports_the_build_and_the_placed_peaks(cli, tmp_path):
    package = tmp_path / "mlp.pkg"
    done = cli("--quiet", *SMALL, "--compile-only", "--memory-profile-directory", tmp_path, "--save-package",
               package, "--output", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("COMPILED") and "compiled only: build" in done.stdout
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "COMPILED" and "cycles" not in result and "checks" not in result
    build = result["build"]
    assert build["seconds"] == pytest.approx(sum(build["stages"].values()))
    assert set(build["stages"]) == {"plan", "lower", "package", "search"} and build["peak_rss_bytes"] > 0
    assert build["stages"]["search"] == 0  # no search without --search-seconds
    # Per tile, from the placement report: the most bytes live at one step, and the highest placed byte.
    report = placement_report.load(tmp_path)
    a, base = report["allocations"], report["device"]["sram_base"]
    steps = len(report["steps"]["label"])
    live = [[0] * steps for _ in range(16)]
    high = [0] * 16
    for tile, address, size, first, last in zip(a["tile"], a["address"], a["size"], a["first"], a["last"]):
        for step in range(first, last + 1):
            live[tile][step] += size
        high[tile] = max(high[tile], address + size - base)
    assert result["tile_peaks"]["peak_bytes"] == [max(row) for row in live]
    assert result["tile_peaks"]["high_water"] == high
    assert max(result["tile_peaks"]["peak_bytes"]) == result["estimate"]["peak_bytes"]
    # The support: a 4-byte table header per exchange step on every tile, 4 to 16 bytes per send or receive
    # row (a repeat, a continuation or a full row).
    support, ranges, device = result["support"], report["support"], report["device"]
    phases = report["steps"]["kind"].count("exchange")
    least, most = [4 * phases] * 16, [4 * phases] * 16
    for tile, text in zip(report["listing"]["tile"], report["listing"]["text"]):
        rows = re.match(r"exchange: (\d+) sends, (\d+) receives", text)
        if rows:
            least[tile] += 4 * (int(rows[1]) + int(rows[2]))
            most[tile] += 16 * (int(rows[1]) + int(rows[2]))
    per_tile = support["per_tile"]
    tables = per_tile["exchange_table_bytes"]
    assert all(lo <= t <= hi for lo, t, hi in zip(least, tables, most)) and support["exchange_table_bytes"] == max(tables)
    descriptors = [end - ranges["descriptor_base"] for end in ranges["descriptor_end"]]
    assert [p + t for p, t in zip(per_tile["program_bytes"], tables)] == descriptors
    assert per_tile["code_bytes"] == [end - ranges["code_base"] for end in ranges["code_end"]]
    assert support["program_bytes"] == max(per_tile["program_bytes"])
    # Each tile keeps its own code and descriptors free; the device's figure is the fewest bytes any tile has.
    tensors = [device["access_end"] - code - (descriptors - ranges["descriptor_base"])
               for code, descriptors in zip(ranges["code_end"], ranges["descriptor_end"])]
    assert per_tile["tensor_bytes_available"] == tensors and support["tensor_bytes_available"] == min(tensors)
    assert len(set(tensors)) > 1  # tiles differ in support
    # The package it saved runs and matches the reference.
    replay = cli("--quiet", "--package", package)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert replay.stdout.rstrip().endswith("PASS")


@pytest.mark.parametrize("flag", [["--reference-run"], ["--check-ops"], ["--reference-inferences", "2"],
                                  ["--profile-directory", "out"]])
def test_flags_that_need_a_run_are_refused(cli, tmp_path, flag):
    done = cli("--quiet", *SMALL, "--compile-only", *flag, cwd=tmp_path)
    assert done.returncode == 2
    assert f"{flag[0]} needs a device run: it does not apply with --compile-only" in done.stderr
    assert "Traceback" not in done.stderr


def test_repeat_exchanges_read_parameter_members_in_place(cli, tmp_path):
    done = cli("--quiet", "--workload", "vit-small", "--tiles", 64, "--compile-only", "--memory-profile-directory",
               tmp_path, "--output", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = placement_report.load(tmp_path)
    labels = [report["names"][n] for n in report["allocations"]["name"]]
    assert "ln1_gamma[0,0]" in labels and not [n for n in labels if n.endswith(".member")]
    audit = json.loads((tmp_path / "result.json").read_text())["support"]["repeat_exchange"]
    assert audit["phases"] and all(p["eligible"] and p["patched_tiles"] == 0 for p in audit["phases"])
    for p in audit["phases"]:
        assert p["source_word_patches"] == p["based_tiles"] > 0 and p["max_per_tile"] == 1
        assert p["advancing_send_rows"] >= p["based_tiles"]
    assert audit["source_word_patches"] == sum(p["source_word_patches"] for p in audit["phases"])
    assert audit["advancing_send_rows"] > audit["source_word_patches"]


def probed_extra(cli, hidden, probe=True):
    """--probe-capacity on an 8-tile MLP whose plans need more SRAM than a tile has: (exit code, message, the
    extra bytes it names or None)."""
    done = cli("--quiet", "--workload", "mlp", "--tiles", 8, "--tokens", 400, "--channels", 1152, "--hidden", hidden,
               "--memory-budget", 3000000, "--compile-only", *(["--probe-capacity"] if probe else []))
    found = re.search(r"places with (\d+) more bytes \((\d+) KiB\) of SRAM on every tile, and not with (\d+)\)",
                      done.stdout)
    return done.returncode, done.stdout, found


def test_probe_capacity_names_the_extra_sram_the_last_candidate_needs(cli):
    code, message, small = probed_extra(cli, 1200)
    assert code == 1 and small, message
    extra, kib, below = (int(g) for g in small.groups())
    assert extra % 4096 == 0 and 0 < extra <= 262144 and kib * 1024 == extra and below == extra - 4096
    # The probe only adds to the message: the same build without it fails the same way.
    code_without, without, _ = probed_extra(cli, 1200, probe=False)
    reason = re.search(r"^    (.*)$", without, re.M).group(1)
    assert code_without == 1 and reason.strip() in message
    # A wider hidden layer needs at least as much more.
    _, wider_message, wider = probed_extra(cli, 1400)
    assert wider and int(wider[1]) >= extra, wider_message
