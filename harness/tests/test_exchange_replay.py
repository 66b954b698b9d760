"""test_exchange_replay.py: `ipu-e2e-bench exchange --package FILE` on a saved
vit-small package (64 tiles, 1 layer).  Its phases are checked against the
placement report and result.json of the same build, read independently: the
k-th exchange step of the report is the k-th replayed phase, its transfers
are the report's sends in that step, its rows (sends plus receives on every
tile) take at most 4 words each (full rows; continuations, repeats and runs
of repeats take less), and over
all phases the tables' words plus one count word per tile and phase are
the exchange-table bytes result.json gives per tile (the package layout's
sizes, measured before placement); rescheduling with the same scheduler
keeps every table within the bytes the package gave it, and the horizon is
at least the longest transfer plus the latency.  Compact rescheduling
(--stream-words, --balance-streams) keeps the transfers and never needs
more of the largest table than the latency order.  --phases keeps only the
phases asked for.  The exchange-stress `base` package's phases
(OUTGOING_BASE) are shown as recorded, rows only.
"""
import json
import re
import subprocess
from collections import defaultdict

from ipu_e2e import placement_report

SMALL_VIT = ["--workload", "vit-small", "--tiles", "64", "--layers", "1"]


def bench(repo, *args):
    return subprocess.run([str(repo / "harness" / "bin" / "ipu-e2e-bench"), *(str(a) for a in args)],
                          capture_output=True, text=True, timeout=600)


def test_replay_agrees_with_the_placement_report(cli, repo, tmp_path):
    package = tmp_path / "vit.pkg"
    done = cli("--quiet", *SMALL_VIT, "--compile-only", "--save-package", package, "--memory-profile-directory",
               tmp_path, "--output", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = placement_report.load(tmp_path)
    exchange_steps = [s for s, kind in enumerate(report["steps"]["kind"]) if kind == "exchange"]
    rows, sends = defaultdict(lambda: defaultdict(int)), defaultdict(int)
    for step, tile, text in zip(report["listing"]["step"], report["listing"]["tile"], report["listing"]["text"]):
        m = re.match(r"exchange: (\d+) sends, (\d+) receives", text)
        if m:
            rows[step][tile] += int(m[1]) + int(m[2])
            sends[step] += int(m[1])

    replay = bench(repo, "exchange", "--package", package, "--output", tmp_path, "--quiet")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    result = json.loads((tmp_path / "bench-exchange.json").read_text())
    phases = result["phases"]
    assert len(phases) == len(exchange_steps) and "| phase |" in replay.stdout
    tiles = json.loads((tmp_path / "result.json").read_text())["support"]["per_tile"]["exchange_table_bytes"]
    words = 0
    for phase, step in zip(phases, exchange_steps):
        recorded, again = phase["recorded"], phase["rescheduled"]
        assert phase["replayed"] and phase["transfers"] == sends[step]
        assert 0 < recorded["total_row_words"] <= 4 * sum(rows[step].values())
        assert recorded["max_row_words"] <= 4 * max(rows[step].values())
        assert again["within_row_budget"] and again["total_row_words"] == recorded["total_row_words"]
        assert again["horizon_cycles"] > result["latency"] and recorded["horizon_cycles"] > result["latency"]
        words += recorded["total_row_words"] + len(tiles)
    assert 4 * words == sum(tiles)

    for extra in (["--stream-words", "64"], ["--stream-words", "64", "--balance-streams"]):
        compact = bench(repo, "exchange", "--package", package, *extra, "--output", tmp_path, "--quiet")
        assert compact.returncode == 0, compact.stdout + compact.stderr
        assert "stream waves of 64 words" in compact.stdout
        for before, after in zip(phases, json.loads((tmp_path / "bench-exchange.json").read_text())["phases"]):
            assert after["transfers"] == before["transfers"]
            assert after["rescheduled"]["max_row_words"] <= before["rescheduled"]["max_row_words"]

    chosen = [phases[0]["phase"], phases[-1]["phase"]]
    some = bench(repo, "exchange", "--package", package, "--phases", ",".join(map(str, chosen)), "--output",
                 tmp_path, "--quiet")
    assert some.returncode == 0, some.stdout + some.stderr
    kept = json.loads((tmp_path / "bench-exchange.json").read_text())["phases"]
    assert [p["phase"] for p in kept] == chosen

    # A compute phase (even), and an odd phase whose op does not exchange, are refused by name.
    exchanging = {p["phase"] for p in phases}
    quiet_odd = next(p for p in range(1, max(exchanging), 2) if p not in exchanging)
    (tmp_path / "bench-exchange.json").unlink()
    for wrong in (chosen[0] - 1, quiet_odd):
        refused = bench(repo, "exchange", "--package", package, "--phases", f"{chosen[0]},{wrong}", "--output",
                        tmp_path, "--quiet")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"phase {wrong} is not an exchange phase" in refused.stderr and len(refused.stderr.splitlines()) == 1
        assert not (tmp_path / "bench-exchange.json").exists()


def test_phases_using_outgoing_base_are_shown_as_recorded(cli, repo, tmp_path):
    package = tmp_path / "base.pkg"
    done = cli("--quiet", "--workload", "exchange-stress", "--exchange-pattern", "base", "--device", "tiles16",
               "--save-package", package, "--output", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    replay = bench(repo, "exchange", "--package", package, "--output", tmp_path, "--quiet")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    phases = json.loads((tmp_path / "bench-exchange.json").read_text())["phases"]
    assert phases and all(not p["replayed"] and "rescheduled" not in p for p in phases)
    assert all("horizon_cycles" not in p["recorded"] and p["recorded"]["total_row_words"] > 0 for p in phases)
    assert "not replayed" in replay.stdout
