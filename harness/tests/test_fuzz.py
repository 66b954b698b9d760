"""test_fuzz.py: ipu-e2e-fuzz's reading of a fuzz run and ci/nightly's reading
of ipu-e2e-fuzz, without building the targets (`make fuzz` does that): a
stand-in target executable prints what libFuzzer prints; a clean run gives its
executions, rate and (for the package target) its input counts, and its kept
corpus is replaced by the merged one; a leak report with an artifact gives
the finding and the input's path, and --keep-findings copies that input into
the target's reproducer folder; the nightly case of a run that found
something fails naming the target, and one that found nothing has no
problem.  The repository's nightly case list fuzzes every target for a
million executions into a kept corpus.
"""
import json
import stat
from pathlib import Path

from ipu_e2e import fuzz, nightly


def fake_target(build, name, output, code, artifact=None, after_a_second=None):
    """A stand-in fuzz_<name>: prints output (then, a second later, after_a_second),
    optionally writes an artifact, exits code.
    Called with -merge=1 among its flags, then OUT KEPT, it writes one input into OUT and exits 0."""
    lines = ['case " $* " in *" -merge=1 "*) for a; do case $a in -*) ;; *) echo merged > "$a/merged-input"; exit 0;; '
             'esac; done;; esac',
             f"cat <<'EOF'\n{output}\nEOF"]
    if after_a_second:
        lines.append(f"sleep 1\ncat <<'EOF'\n{after_a_second}\nEOF")
    if artifact:
        lines.append(f"touch {build}/fuzz-artifacts/{name}-{artifact}")
    path = build / f"fuzz_{name}"
    path.write_text("#!/bin/sh\n" + "\n".join(lines) + f"\nexit {code}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_clean_run_reports_executions_and_merges_the_kept_corpus(tmp_path):
    fake_target(tmp_path, "package", "INFO: ...\n#23\tINITED cov: 5 ft: 9 corp: 20/1Kb exec/s: 0 rss: 40Mb",
                0, after_a_second="Done 123 runs\nstat::number_of_executed_units: 123\n"
                "stat::average_exec_per_sec:     41\nstat::new_units_added:          7\n"
                "stat::peak_rss_mb:              50\nstat::package_inputs: 123\n"
                "stat::package_checksum_right: 120\nstat::package_loaded: 30\nstat::package_peeked: 77")
    kept = tmp_path / "kept"
    (kept / "package").mkdir(parents=True)
    for i in range(3):
        (kept / "package" / f"old-{i}").write_text("x")
    result = fuzz.run_target(tmp_path, "package", [], 3, corpus=kept)
    assert (result["executions"], result["average_executions_per_second"], result["new_inputs"]) == (123, 41, 7)
    assert (result["package_inputs"], result["package_checksum_right"], result["package_loaded"]) == (123, 120, 30)
    # The rate of fuzzing proper leaves out the 23 replayed inputs and the time
    # they took: 100 executions after them, over at least the second slept.
    assert result["replayed"]["inputs"] == 23 and result["replayed"]["seconds"] < result["seconds"] - 0.9
    assert 0 < result["executions_per_second"] <= 100
    assert result["target_rate"] == fuzz.DEVICE_RATE
    assert result["found"] is None and result["artifacts"] == []
    # The merge's output replaced the kept inputs, and nothing of the merge is left beside it.
    assert sorted(p.name for p in (kept / "package").iterdir()) == ["merged-input"]
    assert result["corpus_inputs"] == 1
    assert sorted(p.name for p in kept.iterdir()) == ["package"]
    lines = []
    fuzz.report({"targets": [result]}, type("Out", (), {"write": lambda self, t: lines.append(t)})())
    text = "".join(lines)
    assert f"23 kept and seed inputs replayed in {result['replayed']['seconds']} s, then " \
           f"{result['executions_per_second']}/s (an idle core: 2,000/s)" in text
    assert "120 had the header's size and checksum right" in text and "and 30 loaded; 77 were read without " \
        "loading" in text


def test_options_run_reports_how_many_compiled_and_ran(tmp_path):
    fake_target(tmp_path, "options", "#4\tINITED cov: 5 ft: 9 corp: 4/1Kb exec/s: 0 rss: 40Mb\n"
                "stat::number_of_executed_units: 50\nstat::options_repeated: 11\nstat::options_compiled: 20\n"
                "stat::options_ran: 8", 0)
    result = fuzz.run_target(tmp_path, "options", [], 3, corpus=tmp_path / "kept")
    assert (result["options_repeated"], result["options_compiled"], result["options_ran"],
            result["replayed"]["inputs"]) == (11, 20, 8, 4)
    assert "package_inputs" not in result
    lines = []
    fuzz.report({"targets": [result]}, type("Out", (), {"write": lambda self, t: lines.append(t)})())
    assert "11 inputs repeated options compiled before; 20 compiled to a package within the size limits; " \
        "8 of those packages were new and ran" in "".join(lines)


def test_leak_is_a_finding_with_its_input(tmp_path):
    (tmp_path / "fuzz-artifacts").mkdir()
    fake_target(tmp_path, "package", "==1==ERROR: LeakSanitizer: detected memory leaks\n"
                "stat::number_of_executed_units: 9", 1, artifact="leak-abc")
    (tmp_path / "fuzz-corpus" / "package").mkdir(parents=True)
    (tmp_path / "fuzz-corpus" / "package" / "kept-input").write_text("x")
    result = fuzz.run_target(tmp_path, "package", [], 3)
    assert result["found"] == "leak"
    assert result["executions"] == 9
    assert result["artifacts"] == [str(tmp_path / "fuzz-artifacts" / "package-leak-abc")]
    # A run that found something leaves the kept corpus as it was (no merge).
    assert [p.name for p in (tmp_path / "fuzz-corpus" / "package").iterdir()] == ["kept-input"]
    (tmp_path / "fuzz-artifacts" / "package-leak-abc").write_bytes(b"the input")
    kept = fuzz.keep_findings(result, tmp_path / "reproducers")
    assert len(kept) == 1 and kept[0].startswith(str(tmp_path / "reproducers" / "package" / "found-"))
    assert "-leak-" in kept[0]
    assert (tmp_path / "reproducers" / "package" / kept[0].rsplit("/", 1)[1]).read_bytes() == b"the input"


def test_a_finding_runs_again_with_allocation_stacks(tmp_path):
    (tmp_path / "fuzz-artifacts").mkdir()
    # The stand-in prints ASan's options each time it runs: the fuzzing run's,
    # then the rerun's on the finding (its last argument).
    fake_target(tmp_path, "exchange", "==1==ERROR: AddressSanitizer: heap-use-after-free\n"
                "options: $ASAN_OPTIONS\nlast argument: ${@: -1}", 1, artifact="crash-abc")
    path = tmp_path / "fuzz_exchange"
    path.write_text(path.read_text().replace("#!/bin/sh", "#!/bin/bash").replace("<<'EOF'", "<<EOF"))
    result = fuzz.run_target(tmp_path, "exchange", [], 3)
    assert result["found"] == "memory error"
    log = Path(result["log"]).read_text()
    first, rerun = log.split(f"==== {result['artifacts'][0]} run again with allocation stacks ====")
    assert "malloc_context_size=0" in first and "quarantine_size_mb=16" in first
    assert "malloc_context_size" not in rerun and "quarantine_size_mb=16" in rerun
    assert f"last argument: {result['artifacts'][0]}" in rerun


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
    assert "--targets" not in args and "--corpus" not in args  # the default corpus is kept between nights
    assert int(args[args.index("--executions") + 1]) >= 10 ** 6
    assert "--keep-findings" in args
    # A million executions at the slowest targets' idle rate (package and options, about 1,000/s after
    # replaying their corpus) take 1,000 s: more than twice that, for a loaded machine; every target in
    # turn, and their merges.
    seconds = int(args[args.index("--seconds") + 1])
    assert seconds >= 2400
    targets = (repo / "CMakeLists.txt").read_text().count("set(IPU_FUZZ_INPUTS_")
    assert fuzz_cases[0]["timeout_seconds"] >= targets * seconds + 1800
