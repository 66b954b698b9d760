"""The mutation catalogue: every seeded compiler bug the compile option
"inject" takes is caught on the small workload mutation_catalogue gives it,
and the diagnosis (read here from result.json) says where:
a device fault with its tile, address and compiler op; a per-op check
divergence with its op, element, tile and address; an output check with the
producing op and the worst element; or a resident run naming the parameter
range that changed and the op that reads it.  The test also asserts the
catalogue's breadth (at least 30 mutations across exchange, placement,
lowering, packaging and the driver, plus the hand-built stress programs).
"""
import json
import re
import subprocess
import sys

import pytest

from ipu_e2e import mutation_catalogue, native

MLP, VIT_FLASH, VIT_MATERIALIZED = (mutation_catalogue.MLP, mutation_catalogue.VIT_FLASH,
                                   mutation_catalogue.VIT_MATERIALIZED)
WORKLOADS = mutation_catalogue.WORKLOADS


def catalogue():
    return native.mutations(native.Context())


def test_the_catalogue_is_broad():
    mutations = catalogue()
    names = [m["name"] for m in mutations]
    assert len(names) >= 30 and len(set(names)) == len(names)
    assert {m["stage"] for m in mutations} == {"plan", "exchange", "place", "lower", "package", "driver",
                                               "stress", "device"}
    assert all(m["models"] for m in mutations)
    # Every mutation has a workload here, and nothing here is not a mutation.
    assert set(WORKLOADS) == set(names)


def diagnosis(result):
    """(how it was caught, where: tile and address or the element, the op named) from result.json."""
    fault = result.get("fault")
    if fault:
        op = (fault.get("op") or {}).get("label")
        return f"fault {fault['kind']}", (fault["tile"], fault["address_lo"]), op
    timeline = (result.get("memory_timeline_check") or {}).get("first_mismatch")
    if timeline:
        return "memory timeline", (timeline["tile"], timeline["latest_begun"]["address"]), timeline["latest_begun"]["op"]
    divergence = (result.get("op_check") or {}).get("first_divergence")
    if divergence:
        worst = divergence["check"]["worst_element"]
        return "op check", (divergence["tile"], divergence["address"], worst["row"], worst["col"]), divergence["label"]
    changed = (result.get("resident") or {}).get("first_changed_parameter")
    if changed:
        return "parameters changed", (changed["tile"], changed["address"]), changed["op"]
    for check in result.get("checks", []):
        if not check["passed"]:
            worst = check["worst_element"] or {}
            return "output check", (worst.get("row"), worst.get("col")), check.get("op")
    return None, None, None


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_mutation_is_caught_and_located(cli, tmp_path, name):
    stress = WORKLOADS[name] is mutation_catalogue.STRESS
    program, args = mutation_catalogue.command(name, tmp_path)
    if program == mutation_catalogue.GOLDENS:
        # A bug that only costs cycles: the goldens fail, naming the op whose cycles moved.
        done = subprocess.run([sys.executable, str(program), "--quiet", *args], capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 1, done.stdout + done.stderr
        how, where, op = mutation_catalogue.golden_moved(done.stdout)
        assert how and re.match(r"op \d+ \w+ \w+", op) and "->" in where, done.stdout
        return
    done = cli("--quiet", *args, "--output", tmp_path)
    assert done.returncode in (1, 3), f"{name}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    assert "Traceback" not in done.stderr
    result = json.loads((tmp_path / "result.json").read_text()) if (tmp_path / "result.json").exists() else {}
    if not result or result["status"] == "INCONSISTENT":
        # Found by the compiler's own check of its product: exit 3 (never a rejection), the stage, object and
        # tile named (and the op, where the object is one op's).
        message = result.get("message") or done.stderr
        assert done.returncode == 3 and "compiler inconsistency in the" in message, message
        assert re.search(r"tile \d+", message), message
        return
    result = json.loads((tmp_path / "result.json").read_text())
    how, where, op = diagnosis(result)
    assert how is not None, f"{name}: caught (exit {done.returncode}) but nothing names where:\n{done.stdout}"
    assert all(v is not None for v in where), (name, how, where)
    if stress:
        # A hand-built program has no compiler ops: the fault names its exchange row instead.
        assert result["fault"]["row"] is not None
    else:
        assert op and op.startswith("op "), (name, how, op)
        assert op in done.stdout


def test_a_clean_program_passes_every_check(cli, tmp_path):
    # The same workloads without a mutation pass, so a detection above is the mutation's.
    for args in (MLP, VIT_FLASH, VIT_MATERIALIZED):
        done = cli("--quiet", *args, "--reference-run", "--check-ops", "--reference-inferences", 2)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "0 failed" in done.stdout and "PASS" in done.stdout


def test_an_unknown_mutation_is_a_usage_error(cli):
    done = cli("--quiet", *MLP, "--inject", "no-such-bug")
    assert done.returncode == 2 and "no mutation is named 'no-such-bug'" in done.stderr and "--list" in done.stderr
    done = cli("--quiet", *MLP, "--inject", "attention-scale-missing")
    assert done.returncode == 2 and "no place for 'attention-scale-missing'" in done.stderr


def test_inject_with_a_saved_package_is_a_usage_error(cli, tmp_path):
    saved = tmp_path / "mlp.pkg"
    assert cli("--quiet", *MLP, "--save-package", saved).returncode == 0
    done = cli("--quiet", "--package", saved, "--inject", "fp8-scale-twice")
    assert done.returncode == 2 and "--inject applies when building a workload, not to --package" in done.stderr
