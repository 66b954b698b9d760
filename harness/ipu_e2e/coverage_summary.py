"""coverage_summary.py: what `make coverage` prints after the tests ran: from gcovr's JSON report, the
lines, functions and branches covered in each part of the library (engine/src, workloads, reference,
stress) and in all, the functions no test entered (file:line name), and whether the whole reaches the
lines and branches asked for (exit 1 when it does not, naming the figure).  Counted as gcovr counts them:
code lines not excluded, every branch of them, every function.

    python3 -m ipu_e2e.coverage_summary build-coverage/coverage.json --fail-under-line 95 --fail-under-branch 85
"""
import argparse
import json
import sys

AREAS = (("engine", "engine/src/"), ("workloads", "workloads/"), ("reference", "reference/"), ("stress", "stress/"))


def area_of(path):
    return next((name for name, prefix in AREAS if path.startswith(prefix)), "other")


def tally(report):
    """Per area [lines, covered, functions, entered, branches, taken], and the functions never entered."""
    totals, unentered = {}, []
    for f in report["files"]:
        t = totals.setdefault(area_of(f["file"]), [0] * 6)
        for line in f["lines"]:
            if line["gcovr/noncode"] or line.get("gcovr/excluded"):
                continue
            t[0] += 1
            t[1] += line["count"] > 0
            t[4] += len(line["branches"])
            t[5] += sum(b["count"] > 0 for b in line["branches"])
        for fn in f["functions"]:
            t[2] += 1
            t[3] += fn["execution_count"] > 0
            if not fn["execution_count"]:
                unentered.append(f"{f['file']}:{fn['lineno']} {fn['name']}")
    return totals, unentered


def percent(done, of):
    return 100.0 * done / of if of else 100.0


def cell(done, of):
    return f"{percent(done, of):5.1f}% ({done:,} of {of:,})"


def main(argv=None):
    p = argparse.ArgumentParser(prog="coverage_summary", description=__doc__.split("\n\n")[0])
    p.add_argument("report", help="gcovr's --json report")
    p.add_argument("--fail-under-line", type=float, default=0.0, metavar="PERCENT")
    p.add_argument("--fail-under-branch", type=float, default=0.0, metavar="PERCENT")
    args = p.parse_args(argv)
    try:
        with open(args.report, encoding="utf-8") as file:
            totals, unentered = tally(json.load(file))
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"coverage_summary: {args.report}: not a gcovr JSON report: {error}", file=sys.stderr)
        return 2
    whole = [sum(t[i] for t in totals.values()) for i in range(6)]
    print(f"{'':10} {'lines':>26} {'functions':>22} {'branches':>26}")
    for name in [a for a, _ in AREAS if a in totals] + (["other"] if "other" in totals else []) + ["total"]:
        t = whole if name == "total" else totals[name]
        print(f"{name:10} {cell(t[1], t[0]):>26} {cell(t[3], t[2]):>22} {cell(t[5], t[4]):>26}")
    print("functions no test entered: " + (", ".join(unentered) if unentered else "none"))
    short = [f"{what} {percent(done, of):.1f}% < {want:g}%"
             for what, done, of, want in (("lines", whole[1], whole[0], args.fail_under_line),
                                          ("branches", whole[5], whole[4], args.fail_under_branch))
             if percent(done, of) < want]
    if short:
        print("coverage below what is asked: " + "; ".join(short), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
