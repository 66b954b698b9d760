"""Cycle goldens (ipu-e2e-goldens): every golden workload's cycles, per op
and in total, and the planner's estimates equal the recorded ones; a seeded
bug that only costs cycles (plan-fit-takes-last: outputs still within
tolerance) fails them, naming the op whose cycles moved and by how much;
--update records a run's figures, and the file is what a later check reads.
"""
import json
import re
import subprocess
import sys

from ipu_e2e import goldens

GOLDENS = goldens.GOLDENS


def goldens_run(*args):
    return subprocess.run([sys.executable, str(goldens.REPO / "harness" / "bin" / "ipu-e2e-goldens"),
                           *map(str, args)], capture_output=True, text=True, timeout=1800)


def test_every_golden_holds():
    recorded = json.loads(GOLDENS.read_text())["cases"]
    assert set(recorded) == set(goldens.CASES)
    done = goldens_run("--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(goldens.CASES)} case(s), all equal" in done.stdout


def test_a_bug_that_only_costs_cycles_fails_naming_the_op(cli, tmp_path):
    # The outputs stay within tolerance: only the goldens see it.
    done = cli("--quiet", *goldens.CASES["mlp"], "--reference-run", "--check-ops", "--inject", "plan-fit-takes-last",
               "--output", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    slower = json.loads((tmp_path / "result.json").read_text())
    golden = json.loads(GOLDENS.read_text())["cases"]["mlp"]
    assert slower["cycles"] > golden["cycles"]
    done = goldens_run("--quiet", "--only", "mlp", "--", "--inject", "plan-fit-takes-last")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"mlp: total cycles {golden['cycles']:,} -> {slower['cycles']:,}" in done.stdout
    # The op that moved furthest, with its golden and its new cycles, computed here from the two runs.
    now = {f"op {o['op']} {o['kind']} {o['output']}": o["device"] for o in slower["op_cycles"]}
    before = {o["op"]: o["device"] for o in golden["ops"]}
    furthest = max(now, key=lambda label: abs(now[label] - before[label]))
    line = re.search(r"^mlp: (op \d+ \w+ \w+): device cycles ([\d,]+) -> ([\d,]+)", done.stdout, re.M)
    assert line and line.group(1) == furthest, done.stdout
    assert (int(line.group(2).replace(",", "")), int(line.group(3).replace(",", ""))) == (before[furthest],
                                                                                          now[furthest])


def test_update_records_what_a_check_reads(tmp_path):
    path = tmp_path / "cycles.json"
    done = goldens_run("--quiet", "--only", "mlp", "--update", "--goldens", path)
    assert done.returncode == 0 and "recorded 1 case(s)" in done.stdout, done.stdout + done.stderr
    assert json.loads(path.read_text())["cases"]["mlp"] == json.loads(GOLDENS.read_text())["cases"]["mlp"]
    # A changed figure in the file is a failure naming it.
    data = json.loads(path.read_text())
    data["cases"]["mlp"]["ops"][0]["device"] += 7
    path.write_text(json.dumps(data))
    done = goldens_run("--quiet", "--only", "mlp", "--goldens", path)
    label = data["cases"]["mlp"]["ops"][0]["op"]
    assert done.returncode == 1 and f"mlp: {label}: device cycles" in done.stdout and "(-7," in done.stdout


def test_bad_input_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    for args, words in ((["--only", "nope"], "no case named nope"),
                        (["--goldens", bad], "the file: expected an object with \"cases\""),
                        (["--update", "--", "--inject", "gemm-rows-short"], "takes no flags after --")):
        done = goldens_run("--quiet", *args)
        assert done.returncode == 2 and words in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
