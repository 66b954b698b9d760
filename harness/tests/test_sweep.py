"""test_sweep.py: ipu-e2e-sweep and ipu-e2e-sweep-report on a 16-tile MLP
with small shapes (flags after --), at budgets the planner accepts and one it
rejects.  A sweep with --jobs 2 finishes every case with its folder's files;
outcomes, cycles and peaks are checked against each case's own result.json
files and the SHA-256s against the files themselves.  A sweep killed with
kill -9 mid-run and run again finishes the rest and leaves the cases it had
finished untouched (same inode and mtime of every record and log).  A case
past --timeout is recorded as timed out.  The report's Markdown tables and
its page (headless Chromium, no console errors, hovering a point shows its
case) hold the numbers of the result.json files.  The same sweep runs through
GNU parallel over real ssh (an sshd of the test's own).  Bad flags are input
errors naming the flag.
"""
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import time

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from ipu_e2e import native, report_checks
from ipu_e2e.browser import chromium
from local_sshd import sshd
from test_interrupts import processes_mentioning

SMALL = ["--tiles", "16", "--batches", "1,2", "--budgets", "default,40000,2048"]
SHAPE = ["--", "--tokens", "64", "--channels", "128", "--hidden", "256"]
REJECTED_BUDGET = "2048"  # below one matmul block: the planner finds no grid


def sweep(repo, *args, timeout=300):
    return subprocess.run([str(repo / "harness" / "bin" / "ipu-e2e-sweep"), "--quiet", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=repo)


def sweep_report(repo, folder):
    return subprocess.run([str(repo / "harness" / "bin" / "ipu-e2e-sweep-report"), "--quiet", str(folder)],
                          capture_output=True, text=True, timeout=120, cwd=repo)


def cases(out):
    return sorted(p for p in (out / "cases").iterdir() if p.is_dir())


def load(path):
    return json.loads(path.read_text())


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def small_sweep(repo, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "out"
    done = sweep(repo, "--output", out, *SMALL, "--jobs", "2", *SHAPE)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_every_case_finishes_with_its_files(repo, small_sweep):
    folders = cases(small_sweep)
    assert len(folders) == 2 * 3
    library = native.library_path()
    for folder in folders:
        record = load(folder / "case.json")
        budget = folder.name.rsplit("-", 1)[1]
        command = shlex.split((folder / "command.txt").read_text().splitlines()[0])
        assert command[command.index("--batch") + 1] == folder.name.split("batch")[1].split("-")[0]
        assert ("--memory-budget" in command) == (budget != "default")
        assert shlex.join(SHAPE[1:]) in shlex.join(command) and command == record["build"]["command"]
        sums = load(folder / "sha256.json")
        assert sums["library"]["sha256"] == sha256(library)
        assert sums["cli"]["sha256"] == sha256(repo / "harness" / "bin" / "ipu-e2e-test")
        log = (folder / "log.txt").read_text()
        assert log.startswith("$ " + shlex.join(command))
        if budget == REJECTED_BUDGET:
            assert record["outcome"] == "rejected" and record["rejection"]["stage"] == "plan"
            assert "no grid" in record["rejection"]["reason"] and "no grid" in log
            assert not (folder / "run").exists()
            result = load(folder / "result.json")
            assert result["status"] == "REJECTED" and record["build"]["exit"] == 1
            assert record["rejection"]["lower_bound_bytes"] == result["rejection"]["smallest_candidate"]["peak_bytes"]
            continue
        build, run = load(folder / "result.json"), load(folder / "run" / "result.json")
        assert build["status"] == "COMPILED" and run["status"] == "PASS"
        assert record["outcome"] == "passed" and record["figures"]["cycles"] == run["cycles"]
        assert (folder / "package.pkg").stat().st_size > 0
        assert (folder / "run" / "run-profile.json").exists() and (folder / "run" / "run-profile.html").exists()
        assert list((folder / "memory").glob("placement.html")) and list((folder / "memory").glob("memory-*.json"))
        assert len((folder / "command.txt").read_text().splitlines()) == 2
        assert "--package" in log and "PASS" in log
    summary = load(small_sweep / "sweep.json")
    assert summary["complete"] and len(summary["planned"]) == 6
    assert summary["counts"]["passed"] == 4 and summary["counts"]["rejected"] == 2


def markdown_table(text, heading):
    """The rows (lists of cells) of the table after a '## heading' line."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("## " + heading))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows[0], rows[1:]


def figure(text):
    return int(text.split(" ")[0].replace(",", ""))


def test_report_tables_hold_the_result_files_numbers(repo, small_sweep):
    done = sweep_report(repo, small_sweep)
    assert done.returncode == 0, done.stderr
    text = (small_sweep / "sweep-report.md").read_text()
    assert "6 of 6 cases finished" in text
    head, rows = markdown_table(text, "Cycles per budget and batch")
    assert head == ["budget per tile", "batch 1 cycles", "batch 2 cycles"]
    for budget, *cells in rows:
        for batch, cell in zip((1, 2), cells):
            folder = small_sweep / "cases" / f"mlp-fp8-blocks1-batch{batch}-{budget}"
            if budget == REJECTED_BUDGET:
                assert cell == "rejected (plan)"
            else:
                assert figure(cell) == load(folder / "run" / "result.json")["cycles"]
    _, rows = markdown_table(text, "Peaks per case")
    assert len(rows) == 6
    for name, batch, budget, outcome, estimate, tensors, total, cosine in rows:
        folder = small_sweep / "cases" / name
        if outcome == "rejected":
            assert estimate == tensors == total == ""
            continue
        build = load(folder / "result.json")
        assert figure(estimate) == build["estimate"]["peak_bytes"]
        assert figure(tensors) == max(build["tile_peaks"]["peak_bytes"])
        assert figure(total) == max(build["tile_peaks"]["high_water"])
        checks = load(folder / "run" / "result.json")["checks"]
        assert float(cosine) == pytest.approx(min(c["min_cosine"] for c in checks), abs=1e-6)
    _, rows = markdown_table(text, "Rejections")
    assert sorted(r[0] for r in rows) == [f"mlp-fp8-blocks1-batch{b}-{REJECTED_BUDGET}" for b in (1, 2)]
    for name, stage, seconds, _, message in rows:
        record = load(small_sweep / "cases" / name / "case.json")
        assert stage == record["rejection"]["stage"] and float(seconds) == round(record["rejection"]["seconds"], 2)
    head, rows = markdown_table(text, "Build time by stage")
    assert head[1:5] == ["plan s", "lower s", "package s", "search s"] and len(rows) == 4
    for name, plan, lower, package, search, total, process, rss in rows:
        build = load(small_sweep / "cases" / name / "result.json")["build"]
        assert float(plan) == round(build["stages"]["plan"], 3) and float(total) == round(build["seconds"], 3)
        assert float(search) == round(build["stages"]["search"], 3) == 0  # the sweep searches only when asked
        assert float(process) == round(load(small_sweep / "cases" / name / "case.json")["build"]["seconds"], 2)
        assert int(rss) == round(build["peak_rss_bytes"] / 2**20)


def test_report_page_loads_without_console_errors_and_hovers(repo, small_sweep, tmp_path):
    assert sweep_report(repo, small_sweep).returncode == 0
    page = (small_sweep / "sweep-report.html").read_text()
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page
    driver = chromium(tmp_path / "chromium-profile")
    try:
        driver.get((small_sweep / "sweep-report.html").as_uri())
        WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === 'true'"))
        name = "mlp-fp8-blocks1-batch2-40000"
        cycles = load(small_sweep / "cases" / name / "run" / "result.json")["cycles"]
        point = driver.find_element(By.CSS_SELECTOR, f"#cycles-chart circle[data-case='{name}']")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", point)
        ActionChains(driver).move_to_element(point).perform()
        tooltip = driver.find_element(By.ID, "tooltip")
        WebDriverWait(driver, 10).until(lambda d: tooltip.is_displayed())
        assert name in tooltip.text and f"{cycles:,} cycles" in tooltip.text
        rejected = driver.find_elements(By.CSS_SELECTOR, "#cycles-chart g.reject")
        assert len(rejected) == 2
        ActionChains(driver).move_to_element(rejected[0]).perform()
        assert "rejected at plan" in tooltip.text
        # A peak chart per batch, each with its three series of a point per passing case.
        for chart in ("peak-chart-0", "peak-chart-1"):
            assert len(driver.find_elements(By.CSS_SELECTOR, f"#{chart} circle.point")) == 2 * 3
        cells = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#peak-table tbody tr:first-child td")]
        build = load(small_sweep / "cases" / "mlp-fp8-blocks1-batch1-default" / "result.json")
        assert cells[0] == "mlp-fp8-blocks1-batch1-default"
        assert figure(cells[4]) == build["estimate"]["peak_bytes"]
        assert figure(cells[7]) == max(build["tile_peaks"]["high_water"])
        # Every case lists its files, each link resolving: a passed case its build's and its run's index,
        # package and log; a rejected one its build's index and log.
        links = {li.get_attribute("data-case"): {a.text for a in li.find_elements(By.TAG_NAME, "a")}
                 for li in driver.find_elements(By.CSS_SELECTOR, "#case-files li")}
        assert set(links) == {p.name for p in cases(small_sweep)}
        for case, labels in links.items():
            outcome = load(small_sweep / "cases" / case / "case.json")["outcome"]
            assert {"build", "log"} <= labels and ("run" in labels and "package" in labels) == (outcome == "passed")
        assert not report_checks.dangling_links(driver)
        # A replay's index leads back to its package and the build that saved it.
        report_checks.open_page(driver, small_sweep / "cases" / name / "run" / "index.html")
        listed = {li.get_attribute("data-report") for li in driver.find_elements(By.CSS_SELECTOR, "#reports li")}
        assert {"package", "build", "run_profile"} <= listed
        assert not report_checks.dangling_links(driver)
        # and the build's index leads on to that run.
        report_checks.open_page(driver, small_sweep / "cases" / name / "index.html")
        assert browser_reports(driver) >= {"run", "placement", "memory"}
        assert not report_checks.dangling_links(driver)
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, f"console errors: {severe}"
    finally:
        driver.quit()


def browser_reports(driver):
    return {li.get_attribute("data-report") for li in driver.find_elements(By.CSS_SELECTOR, "#reports li")}


def wait_until(condition, what, limit=120):
    began = time.monotonic()
    while not condition():
        assert time.monotonic() - began < limit, f"waited {limit} s for {what}"
        time.sleep(0.02)


def test_kill_9_then_rerun_keeps_finished_cases(repo, tmp_path):
    out = tmp_path / "out"
    args = ["--output", out, "--tiles", "16", "--batches", "1,2", "--budgets",
            "default,60000,50000,40000,30000,2048", "--jobs", "1", *SHAPE]
    command = [str(repo / "harness" / "bin" / "ipu-e2e-sweep"), "--quiet", *map(str, args)]
    process = subprocess.Popen(command, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: (out / "cases").exists() and list((out / "cases").glob("*/case.json")), "a finished case")
    process.send_signal(signal.SIGKILL)
    process.wait()
    wait_until(lambda: not processes_mentioning(str(out)), "the sweep's jobs to end", limit=60)
    finished = {p.parent.name: (os.stat(p).st_ino, os.stat(p).st_mtime_ns,
                                os.stat(p.parent / "log.txt").st_mtime_ns) for p in out.glob("cases/*/case.json")}
    assert 1 <= len(finished) < 12
    assert not load(out / "sweep.json")["complete"]
    done = sweep(repo, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = load(out / "sweep.json")
    assert summary["complete"] and len(summary["cases"]) == 12
    for name, (inode, mtime, log_mtime) in finished.items():
        record = out / "cases" / name / "case.json"
        assert (os.stat(record).st_ino, os.stat(record).st_mtime_ns) == (inode, mtime), f"{name} was redone"
        assert os.stat(out / "cases" / name / "log.txt").st_mtime_ns == log_mtime
    # Every case ended as it does in one uninterrupted run.
    for p in out.glob("cases/*/case.json"):
        expected = "rejected" if p.parent.name.endswith("-" + REJECTED_BUDGET) else "passed"
        assert load(p)["outcome"] == expected, p.parent.name
    # Run once more: nothing left to do, nothing touched.
    stamps = {p: os.stat(p).st_mtime_ns for p in out.glob("cases/*/case.json")}
    assert sweep(repo, *args).returncode == 0
    assert stamps == {p: os.stat(p).st_mtime_ns for p in out.glob("cases/*/case.json")}


def test_a_case_past_the_timeout_is_recorded_as_timed_out(repo, tmp_path):
    out = tmp_path / "out"
    done = sweep(repo, "--output", out, "--tiles", "16", "--batches", "1", "--budgets", "default",
                 "--timeout", "0.05", *SHAPE)
    assert done.returncode == 1, done.stdout + done.stderr
    record = load(out / "cases" / "mlp-fp8-blocks1-batch1-default" / "case.json")
    assert record["outcome"] == "timed out" and record["stage"] == "build" and record["build"]["exit"] is None
    assert load(out / "sweep.json")["counts"]["timed out"] == 1


def test_sweep_through_ssh(repo, tmp_path):
    out = tmp_path / "out"
    with sshd(tmp_path / "sshd") as (logins, log):
        done = sweep(repo, "--output", out, "--tiles", "16", "--batches", "1", "--budgets",
                     f"default,{REJECTED_BUDGET}", "--jobs", "2", "--sshloginfile", logins, *SHAPE)
        assert done.returncode == 0, done.stdout + done.stderr
        accepted = log.read_text().count("Accepted publickey")
    # Two builds and one device run, each a job over ssh.
    assert accepted >= 3
    outcomes = {p.parent.name: load(p)["outcome"] for p in out.glob("cases/*/case.json")}
    assert outcomes == {"mlp-fp8-blocks1-batch1-default": "passed",
                        f"mlp-fp8-blocks1-batch1-{REJECTED_BUDGET}": "rejected"}


@pytest.mark.parametrize("args, message", [
    (["--budgets", "1,x"], "argument --budgets: expected a number of bytes or 'default', got 'x'"),
    (["--batches", "1,1"], "argument --batches: expected distinct batches"),
    (["--batches", "3"], "argument --batches: expected batches of 1, 2 and 4, got '3'"),
    (["--precision", "fp4"], "argument --precision: expected fp8 or fp16, got 'fp4'"),
    (["--workload", "vit", "--blocks", "2"], "--blocks applies to --workload mlp, not to --workload vit"),
    (["--jobs", "0"], "argument --jobs: expected an integer in 1..1024, got 0"),
    (["--sshloginfile", "{missing}"], "cannot read it: No such file or directory"),
    (["--", "--output", "x"], "--output is set by the sweep itself"),
    (["--", "--check-ops"], "--check-ops needs a device run"),
    (["--", "--tokens", "0"], "argument --tokens: expected a positive integer, got 0"),
])
def test_bad_flags_are_input_errors(repo, tmp_path, args, message):
    args = [a.replace("{missing}", str(tmp_path / "missing")) for a in args]
    done = sweep(repo, "--output", tmp_path / "out", *args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2
    assert not (tmp_path / "out" / "cases").exists()  # refused before any case was planned or built


def test_report_of_a_folder_that_is_not_a_sweep_is_an_input_error(repo, tmp_path):
    done = sweep_report(repo, tmp_path)
    assert done.returncode == 2 and "sweep.json" in done.stderr and "Traceback" not in done.stderr


def test_sigint_stops_the_sweep_with_one_line_and_a_rerun_finishes(repo, tmp_path):
    out = tmp_path / "out"
    args = ["--output", out, "--tiles", "16", "--batches", "1,2", "--budgets", "default,60000,50000,40000,2048",
            "--jobs", "1", *SHAPE]
    process = subprocess.Popen([str(repo / "harness" / "bin" / "ipu-e2e-sweep"), "--quiet", *map(str, args)],
                               cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: (out / "cases").exists() and list((out / "cases").glob("*/build.json")), "a finished build")
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130 and err.strip() == "ipu-e2e-sweep: interrupted by SIGINT", err
    wait_until(lambda: not processes_mentioning(str(out)), "the sweep's jobs to end", limit=30)
    done = sweep(repo, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert load(out / "sweep.json")["complete"]


def test_a_build_that_is_neither_built_nor_rejected_is_an_error(tmp_path):
    from ipu_e2e import sweep_case
    # Exit 1 with a status other than REJECTED, or exit 2 (bad input), is an error naming the CLI's message.
    (tmp_path / "result.json").write_text(json.dumps({"status": "FAIL"}))
    assert sweep_case.classify_build(tmp_path, 1, b"x: error: bad\n")[0] == "error"
    (tmp_path / "result.json").unlink()
    outcome, message, _ = sweep_case.classify_build(tmp_path, 2, b"ipu-e2e-test: error: --tokens: bad\n")
    assert outcome == "error" and "--tokens: bad" in message


def test_report_refuses_a_record_with_a_bad_digest(repo, small_sweep, tmp_path):
    """A case record whose SHA-256 is not one (a number) is an input error naming file and field."""
    copy = tmp_path / "sweep"
    shutil.copytree(small_sweep, copy)
    for written in copy.glob("sweep-report.*"):  # an earlier test's report
        written.unlink()
    record = next(copy.glob("cases/*/case.json"))
    data = load(record)
    data["sha256"]["library"]["sha256"] = 12345
    record.write_text(json.dumps(data))
    done = sweep_report(repo, copy)
    assert done.returncode == 2 and str(record) in done.stderr and "sha256.library.sha256" in done.stderr
    assert "Traceback" not in done.stderr and not (copy / "sweep-report.md").exists()
