"""test_fuzz.py: ipu-e2e-fuzz's reading of a fuzz run and ci/nightly's reading
of ipu-e2e-fuzz, without building the targets (`make fuzz` does that): a
stand-in target executable prints what libFuzzer prints; a clean run gives its
executions and nothing found, a leak report with an artifact gives the finding
and the input's path; the nightly case of a run that found something fails
naming the target, and one that found nothing has no problem.  The
repository's nightly case list has a fuzz case running every target for
minutes.
"""
import json
import stat

from ipu_e2e import fuzz, nightly


def fake_target(build, name, output, code, artifact=None):
    """A stand-in fuzz_<name>: prints output, optionally writes an artifact, exits code."""
    lines = [f"cat <<'EOF'\n{output}\nEOF"]
    if artifact:
        lines.append(f"touch {build}/fuzz-artifacts/{name}-{artifact}")
    path = build / f"fuzz_{name}"
    path.write_text("#!/bin/sh\n" + "\n".join(lines) + f"\nexit {code}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_clean_run_reports_executions(tmp_path):
    fake_target(tmp_path, "profile", "INFO: ...\nDone 123 runs\nstat::number_of_executed_units: 123\n"
                "stat::average_exec_per_sec:     41\nstat::new_units_added:          7\n"
                "stat::peak_rss_mb:              50", 0)
    result = fuzz.run_target(tmp_path, "profile", [], 3)
    assert (result["executions"], result["executions_per_second"], result["new_inputs"]) == (123, 41, 7)
    assert result["found"] is None and result["artifacts"] == []
    assert (tmp_path / "fuzz-corpus" / "profile").is_dir()


def test_leak_is_a_finding_with_its_input(tmp_path):
    (tmp_path / "fuzz-artifacts").mkdir()
    fake_target(tmp_path, "package", "==1==ERROR: LeakSanitizer: detected memory leaks\n"
                "stat::number_of_executed_units: 9", 1, artifact="leak-abc")
    result = fuzz.run_target(tmp_path, "package", [], 3)
    assert result["found"] == "leak"
    assert result["executions"] == 9
    assert result["artifacts"] == [str(tmp_path / "fuzz-artifacts" / "package-leak-abc")]


def test_nightly_reads_fuzz_json(tmp_path):
    case = {"name": "fuzz-targets", "command": "fuzz", "expect": "pass"}
    figures, problems = nightly.figures_of(case, tmp_path)
    assert problems == ["the fuzz wrote no fuzz.json"]
    (tmp_path / "fuzz.json").write_text(json.dumps(
        {"targets": [], "targets_met": {"package_nothing_found": True, "exchange_nothing_found": False}}))
    figures, problems = nightly.figures_of(case, tmp_path)
    assert len(problems) == 1 and "exchange_nothing_found" in problems[0]
    assert "package_nothing_found" not in problems[0]


def test_repository_nightly_fuzzes_every_target(repo):
    cases = json.loads((repo / "ci" / "cases.json").read_text())["cases"]
    fuzz_cases = [c for c in cases if c["command"] == "fuzz"]
    assert len(fuzz_cases) == 1
    args = fuzz_cases[0]["args"]
    assert "--targets" not in args
    assert int(args[args.index("--seconds") + 1]) >= 120
