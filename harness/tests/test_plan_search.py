"""test_plan_search.py: the plan search (--search-seconds) on small devices.
It never hands back a package slower than the first plan that fits, every
move it accepts gains what it says (the device's cycles are the judge), the
package it keeps passes its checks, the same steps give byte-identical
packages on one thread and on two, and its flags are refused without a time
budget.
"""
import json

import pytest

VIT_SMALL = ["--workload", "vit-small", "--tiles", "64"]
SMALL_MLP = ["--workload", "mlp", "--tiles", "16", "--tokens", "128", "--channels", "512", "--hidden", "1024"]


@pytest.fixture(scope="module")
def searched(cli, tmp_path_factory):
    out = tmp_path_factory.mktemp("searched")
    done = cli("--quiet", *VIT_SMALL, "--search-seconds", 600, "--search-steps", 4, "--reference-run", "--check-ops",
               "--output", out)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((out / "result.json").read_text()), done.stdout


def test_the_search_keeps_a_faster_package_that_passes(cli, searched, tmp_path):
    result, stdout = searched
    s = result["plan_search"]
    assert result["status"] == "PASS" and result["op_check"]["passed"]
    # The device's cycles are the search's own figure, and no worse than the first plan's.
    assert result["cycles"] == s["cycles"] <= s["first_cycles"]
    unsearched = cli("--quiet", *VIT_SMALL, "--compile-only", "--output", tmp_path)
    assert unsearched.returncode == 0, unsearched.stderr
    assert json.loads((tmp_path / "result.json").read_text())["static_timing"]["cycles"] == s["first_cycles"]
    # Each accepted move starts where the one before ended and gains what it says.
    at = s["first_cycles"]
    for move in s["accepted"]:
        assert move["from_cycles"] == at and move["gain"] == at - move["cycles"] > 0
        at = move["cycles"]
    assert at == s["cycles"]
    assert s["steps"] <= 4 and s["built"] <= s["screened"] and s["dropped"] >= len(s["drops"])
    assert f"{s['first_cycles']:,} -> {s['cycles']:,} cycles" in stdout


def test_the_search_gives_the_same_package_on_one_and_two_threads(cli, tmp_path):
    packages = []
    for threads in (1, 2):
        path = tmp_path / f"threads{threads}.pkg"
        done = cli("--quiet", *SMALL_MLP, "--blocks", 3, "--search-seconds", 600, "--search-steps", 3,
                   "--threads", threads, "--compile-only", "--save-package", path, "--output", tmp_path / str(threads))
        assert done.returncode == 0, done.stderr
        record = json.loads((tmp_path / str(threads) / "result.json").read_text())["plan_search"]
        assert record["threads"] == threads and record["built"] > 0
        packages.append(path.read_bytes())
    assert packages[0] == packages[1]


@pytest.mark.parametrize("flags,named", [
    (["--search-beam", "2"], "--search-seconds"),
    (["--search-steps", "2"], "--search-seconds"),
    (["--search-seconds", "0"], "--search-seconds"),
    (["--search-seconds", "10", "--search-beam", "0"], "--search-beam"),
])
def test_search_flags_are_checked(cli, flags, named):
    done = cli("--quiet", *SMALL_MLP, "--compile-only", *flags)
    assert done.returncode == 2 and named in done.stderr and "Traceback" not in done.stderr
