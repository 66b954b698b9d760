"""The mutation catalogue run as a whole (`ipu-e2e-bench mutations`): every
seeded compiler bug the library lists (native.mutations) compiled into the
small workload it has a place in, run through ipu-e2e-test with the output
and per-op checks, and recorded with how it was caught (a device fault, the
per-op check, a resident run's parameter digest or the output check), where
(tile and address, or the element) and the compiler op the diagnosis names.
The nightly matrix prints the table.
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-test"

MLP = ["--workload", "mlp", "--tiles", "16", "--tokens", "40", "--channels", "64", "--hidden", "96",
       "--blocks", "2", "--batch", "2"]
VIT = ["--workload", "vit", "--tiles", "16", "--tokens", "20", "--heads", "4", "--head-dim", "8",
       "--hidden", "40", "--layers", "2"]
VIT_FLASH = VIT + ["--attention", "flash"]
VIT_MATERIALIZED = VIT + ["--attention", "materialized"]
VIT_SMALL = ["--workload", "vit-small", "--tiles", "64", "--layers", "1"]  # K-split reductions
STRESS = ["--workload", "exchange-stress", "--tiles", "4", "--exchange-pattern", "base"]

# The workload each mutation has a place in (with any extra flags it needs).
WORKLOADS = {
    "plan-blocks-share-tile": MLP, "drop-transfer": VIT_FLASH, "receive-cycle-late": VIT_FLASH, "multicast-drop-destination": VIT_FLASH,
    "send-offset-word": VIT_FLASH, "overlap-allocation": MLP, "separation-ignored": MLP,
    "skip-padding-clear": VIT_FLASH, "overwrite-parameter": MLP + ["--reference-inferences", "2"],
    "fp8-scale-twice": MLP, "reduce-drop-partial": VIT_SMALL, "reduce-double-partial": VIT_SMALL,
    "reduce-stale-slot": VIT_SMALL, "gemm-rows-short": MLP, "gemm-k-overrun": MLP, "gelu-count-short": MLP,
    "add-wrong-input": VIT_FLASH, "cast-wrong-type": MLP, "norm-gamma-beta-swapped": VIT_FLASH,
    "bias-member-frozen": VIT_FLASH,
    "attention-tail-key-dropped": VIT_FLASH, "attention-mask-off-by-one": VIT_FLASH,
    "softmax-valid-short": VIT_MATERIALIZED, "attention-scale-missing": VIT_FLASH, "lifetime-end-early": MLP,
    "carry-dropped": MLP, "host-input-row-early": MLP, "host-output-row-early": MLP,
    "patch-stride-wrong": MLP, "missing-kernel-code": MLP, "allocation-size-short": MLP,
    "allocation-starts-late": MLP, "input-record-shifted": MLP, "outgoing-base-not-reset": STRESS,
    "outgoing-base-not-restored": VIT_FLASH,
}


def command(name):
    """The ipu-e2e-test arguments that run mutation `name` with every check."""
    args = WORKLOADS[name]
    checks = [] if args is STRESS else ["--reference-run", "--check-ops"]
    return [*args, *checks, "--inject", name]


def located(result, stderr=""):
    """(how, where, op) of a result.json (or, for an error the compiler found
    in its own product, of the message): how it was caught, the tile and
    address or the element, and the compiler op named (None: not caught)."""
    inconsistency = re.search(r"compiler inconsistency in the (\w+) stage, (.*?\(op [^)]*\))(.*)", stderr)
    if not result and inconsistency:
        tile = re.search(r"tile \d+", inconsistency.group(3))
        op = re.search(r"op \d+ \w+ \w+", inconsistency.group(2))
        return (f"{inconsistency.group(1)} self-check", tile.group(0) if tile else None,
                op.group(0) if op else None)
    fault = result.get("fault")
    if fault:
        return (f"fault {fault['kind']}", f"tile {fault['tile']} at 0x{fault['address_lo']:X}",
                (fault.get("op") or {}).get("label") or f"exchange row {fault.get('row')}")
    divergence = (result.get("op_check") or {}).get("first_divergence")
    if divergence:
        w = divergence["check"]["worst_element"]
        return ("op check", f"element ({w['row']}, {w['col']}) on tile {divergence['tile']} at "
                f"0x{divergence['address']:X}", divergence["label"])
    changed = (result.get("resident") or {}).get("first_changed_parameter")
    if changed:
        return "parameters changed", f"tile {changed['tile']} at 0x{changed['address']:X}", changed["op"]
    for check in result.get("checks", []):
        if not check["passed"] and check.get("worst_element"):
            w = check["worst_element"]
            return "output check", f"element ({w['row']}, {w['col']})", check.get("op")
    return None, None, None


def run(mutations, progress):
    rows = []
    for n, m in enumerate(mutations):
        progress.update(f"mutation {m['name']}", n + 1, len(mutations))
        with tempfile.TemporaryDirectory() as folder:
            done = subprocess.run([sys.executable, str(CLI), *command(m["name"]), "--quiet", "--output", folder],
                                  capture_output=True, text=True, timeout=600)
            path = Path(folder) / "result.json"
            result = json.loads(path.read_text()) if path.exists() else {}
        how, where, op = located(result, done.stderr)
        rows.append({**m, "workload": WORKLOADS[m["name"]][1], "exit": done.returncode,
                     "caught": done.returncode in (1, 3) and how is not None, "how": how, "where": where,
                     "op": op})
    return rows


def markdown(rows):
    lines = [f"## Mutations: {sum(r['caught'] for r in rows)} of {len(rows)} caught", "",
             "| mutation | stage | workload | exit | caught by | where | op |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['stage']} | {r['workload']} | {r['exit']} | "
                     f"{r['how'] or 'NOT CAUGHT'} | {r['where'] or ''} | {r['op'] or ''} |")
    return "\n".join(lines) + "\n"
