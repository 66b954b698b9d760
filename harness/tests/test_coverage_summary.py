"""test_coverage_summary.py: make coverage's summary counts a gcovr JSON report as gcovr does (code lines,
their branches, functions; non-code and excluded lines left out), per part of the library and in all, lists
the functions no test entered, and fails below the lines or branches asked, naming the figure."""
import json

from ipu_e2e import coverage_summary


def line(number, count, branches=(), noncode=False, excluded=False):
    return {"line_number": number, "count": count, "gcovr/noncode": noncode, "gcovr/excluded": excluded,
            "branches": [{"count": c} for c in branches]}


REPORT = {"files": [
    {"file": "engine/src/core/a.c", "functions": [{"name": "f", "lineno": 3, "execution_count": 2},
                                                  {"name": "g", "lineno": 9, "execution_count": 0}],
     "lines": [line(1, 0, noncode=True), line(3, 2, (2, 0)), line(4, 2), line(9, 0, (0, 0)),
               line(10, 0, excluded=True)]},
    {"file": "workloads/b.c", "functions": [{"name": "h", "lineno": 1, "execution_count": 1}],
     "lines": [line(1, 1, (1, 1, 1, 0)), line(2, 1)]},
]}


def test_parts_and_total_are_counted_as_gcovr_counts(tmp_path, capsys):
    path = tmp_path / "coverage.json"
    path.write_text(json.dumps(REPORT))
    assert coverage_summary.main([str(path), "--fail-under-line", "70", "--fail-under-branch", "50"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {row.split()[0]: row for row in out[1:4]}
    # engine: lines 3, 4, 9 (2 covered); branches 2, 0, 0, 0 (1 taken); functions f, g (1 entered)
    assert "66.7% (2 of 3)" in rows["engine"] and "50.0% (1 of 2)" in rows["engine"]
    assert "25.0% (1 of 4)" in rows["engine"]
    # workloads: 2 of 2 lines, 3 of 4 branches; total: 4 of 5 lines, 4 of 8 branches, 2 of 3 functions
    assert "100.0% (2 of 2)" in rows["workloads"] and "75.0% (3 of 4)" in rows["workloads"]
    assert "80.0% (4 of 5)" in rows["total"] and "50.0% (4 of 8)" in rows["total"]
    assert "66.7% (2 of 3)" in rows["total"]
    assert out[4] == "functions no test entered: engine/src/core/a.c:9 g"


def test_below_what_is_asked_fails_naming_the_figure(tmp_path, capsys):
    path = tmp_path / "coverage.json"
    path.write_text(json.dumps(REPORT))
    assert coverage_summary.main([str(path), "--fail-under-line", "95", "--fail-under-branch", "85"]) == 1
    assert capsys.readouterr().err.strip() == "coverage below what is asked: lines 80.0% < 95%; branches 50.0% < 85%"
    path.write_text("[1]")
    assert coverage_summary.main([str(path)]) == 2
