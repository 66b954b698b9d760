"""Random workloads (ipu-e2e-random): a fixed range of seeds, every one
compiled, run with the per-op check against the device-precision reference
and replayed against FP32, plus every kept regression case, all pass; the
generator reaches the whole option space (counted here from the arguments
it draws); a failure names its seed and the one command that reproduces it;
and a seeded compiler bug fails the cases it reaches with a diagnosis, not
a usage error.
"""
import json
import subprocess
import sys
from collections import Counter

from ipu_e2e import random_workloads

RANDOM = random_workloads.RANDOM
SEEDS = range(200)


def random_run(*args, timeout=1800):
    return subprocess.run([sys.executable, str(RANDOM), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def value(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


def test_the_generator_reaches_the_option_space():
    drawn = [random_workloads.generate(s) for s in SEEDS]
    assert drawn == [random_workloads.generate(s) for s in SEEDS]  # a seed is its workload
    seen = Counter()
    for args in drawn:
        family = value(args, "--workload")
        seen[family] += 1
        seen[f"batch {value(args, '--batch')}"] += 1
        seen[f"tiles odd {int(value(args, '--tiles')) % 2}"] += 1
        if family == "mlp":
            seen[value(args, "--precision")] += 1
            seen["blocks > 1"] += int(value(args, "--blocks")) > 1
        if family == "vit":
            seen[f"attention {value(args, '--attention')}"] += 1
            seen[f"input {value(args, '--input')}"] += 1
            seen["layers > 1"] += int(value(args, "--layers")) > 1
            seen["heads > 1"] += int(value(args, "--heads")) > 1
            # More than 64 keys: flash attention runs several key blocks; with 256-wide heads (64 keys of
            # 64 KiB), several key chunks.
            flash, tokens = value(args, "--attention") != "materialized", int(value(args, "--tokens"))
            seen["flash over key blocks"] += flash and tokens > 64
            seen["flash over key chunks"] += flash and tokens * int(value(args, "--head-dim")) * 4 > 65536
        seen["odd width"] += int(value(args, "--channels") or 1) % 2
        seen["tight budget"] += "--memory-budget" in args
        seen["stream words"] += "--exchange-stream-words" in args
        seen["balanced streams"] += "--balance-streams" in args
        seen["exchange rank"] += "--exchange-rank" in args
        seen["search"] += "--search-seconds" in args
        seen["resident"] += "--reference-inferences" in args
        seen["memory events"] += "--profile-directory" in args
    wanted = ["mlp", "vit", "vit-small", "batch 1", "batch 2", "batch 4", "tiles odd 0", "tiles odd 1", "fp8", "fp16",
              "blocks > 1", "attention auto", "attention flash", "attention materialized", "input embeddings",
              "input patches", "layers > 1", "heads > 1", "flash over key blocks", "flash over key chunks", "odd width", "tight budget",
              "stream words", "balanced streams", "exchange rank", "search", "resident", "memory events"]
    assert all(seen[w] >= 3 for w in wanted), {w: seen[w] for w in wanted}


def test_every_seed_and_kept_regression_passes(tmp_path):
    kept = json.loads(random_workloads.REGRESSIONS.read_text())["cases"]
    done = random_run("--seeds", f"{SEEDS[0]}-{SEEDS[-1]}", "--regressions", "--jobs", 2, "--output", tmp_path,
                      "--quiet")
    summary = json.loads((tmp_path / "random.json").read_text())
    failed = [e for e in summary["cases"] if e["status"] != "ok"]
    assert done.returncode == 0 and not failed, done.stdout[-4000:] + done.stderr[-2000:]
    assert summary["complete"] and len(summary["cases"]) == len(SEEDS) + len(kept) >= 200
    # Each case ran the device-precision build with the per-op check, then the FP32 replay of its package.
    for entry in summary["cases"]:
        assert entry["runs"][-1]["command"][1] == "--package", entry
        assert "--check-ops" in entry["runs"][0]["command"], entry
    # Tight budgets that no plan fitted ran again at the least their smallest candidate needs, and fitted.
    assert summary["retried"] >= 5


def test_a_seeded_bug_fails_with_its_seed_and_a_diagnosis(tmp_path):
    done = random_run("--seeds", "0-5", "--output", tmp_path, "--quiet", "--", "--inject", "gemm-rows-short")
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads((tmp_path / "random.json").read_text())
    # A workload whose GEMM blocks are all one row long has no place for the bug: it does not apply.
    failed = [e for e in summary["cases"] if e["status"] != "not applicable"]
    assert len(failed) >= 4, summary["cases"]
    for entry in failed:
        assert entry["status"] == "failed", entry
        assert entry["reproduce"] == ["ipu-e2e-random", "--seeds", entry["name"].split("-")[1], "--",
                                      "--inject", "gemm-rows-short"]
        # Caught by a check (the op check or a device fault), never refused as input.
        problem = entry["problems"][0]
        assert "exit 1 (FAIL)" in problem or "exit 3 (FAULT)" in problem, problem
        assert (tmp_path / "cases" / entry["name"] / "log.txt").exists()
        assert f"ipu-e2e-random --seeds {entry['name'].split('-')[1]}" in done.stdout


def test_bad_flags_are_usage_errors(tmp_path):
    for args, words in ((["--seeds", "9-3"], "expected ranges A-B"), ([], "give the cases to run"),
                        (["--seeds", "1", "--keep-failures", "--", "--inject", "gemm-rows-short"],
                         "--keep-failures keeps generated cases")):
        done = random_run(*args)
        assert done.returncode == 2 and words in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
