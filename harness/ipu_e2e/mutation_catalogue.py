"""The mutation catalogue run as a whole (`ipu-e2e-bench mutations`): every
seeded compiler bug the library lists (native.mutations) compiled into the
small workload it has a place in, run through ipu-e2e-test with the output
and per-op checks, and recorded with how it was caught (a device fault, the
per-op check, a resident run's parameter digest, the output check, or a
back-end stage finding the compiler's product inconsistent: exit 3), where
(tile and address, or the element) and the compiler op the diagnosis names.
A bug that only costs cycles is run through the cycle goldens
(ipu-e2e-goldens) instead: the op whose cycles moved furthest, and by how
much.  The nightly matrix prints the table.
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-test"
GOLDENS = Path(__file__).resolve().parents[1] / "bin" / "ipu-e2e-goldens"

MLP = ["--workload", "mlp", "--tiles", "16", "--tokens", "40", "--channels", "64", "--hidden", "96",
       "--blocks", "2", "--batch", "2"]
VIT = ["--workload", "vit", "--tiles", "16", "--tokens", "20", "--heads", "4", "--head-dim", "8",
       "--hidden", "40", "--layers", "2"]
VIT_FLASH = VIT + ["--attention", "flash"]
VIT_MATERIALIZED = VIT + ["--attention", "materialized"]
VIT_SMALL = ["--workload", "vit-small", "--tiles", "64", "--layers", "1"]  # K-split reductions
# 256-wide heads: 64 keys of keys and values fill a flash chunk, so 150 tokens take three.
VIT_KEY_CHUNKS = ["--workload", "vit", "--tiles", "16", "--tokens", "150", "--heads", "1", "--head-dim", "256",
                  "--channels", "256", "--hidden", "40", "--layers", "1", "--attention", "flash"]
# A budget whose plan computes the matmuls in serial pieces, one K band each.
MLP_SERIAL = MLP + ["--precision", "fp16", "--memory-budget", "8000"]
# The run records its memory events (and checks its timeline) into the output folder.
MLP_PROFILED = MLP + ["--profile-directory", "{output}"]
STRESS = ["--workload", "exchange-stress", "--tiles", "4", "--exchange-pattern", "base"]
# torchvision's ViT (erf GELU), imported from the committed fixture.
MODEL = ["--model", str(Path(__file__).resolve().parents[2] / "fixtures" / "models" / "vit-tiny.onnx"), "--tiles", "16"]
# Bugs that only cost cycles: the golden case each is run against.
GOLDEN = {"plan-fit-takes-last": ["--only", "mlp"], "search-worst-first": ["--only", "vit-small-search"],
          "stream-words-as-bytes": ["--only", "vit-small-streams"]}

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
    "outgoing-base-not-restored": VIT_FLASH, "descriptor-area-short": VIT_FLASH, "conflict-across-tiles": MLP, "capture-next-op": MLP, "norm-epsilon-wrong": VIT_FLASH,
    "memory-events-late": MLP_PROFILED, "flash-chunk-restarts": VIT_KEY_CHUNKS, "serial-piece-offset": MLP_SERIAL, "relative-base-ahead": VIT_FLASH,
    "gelu-form-lost": MODEL,
    **GOLDEN,
}


def command(name, output):
    """The command (ipu-e2e-test, or ipu-e2e-goldens for a bug that only
    costs cycles) and its arguments that run mutation `name` with every
    check, writing into folder `output`."""
    args = [a.replace("{output}", str(output)) for a in WORKLOADS[name]]
    if name in GOLDEN:
        return GOLDENS, [*args, "--", "--inject", name]
    checks = [] if WORKLOADS[name] is STRESS else ["--reference-run", "--check-ops"]
    return CLI, [*args, *checks, "--inject", name]


def golden_moved(stdout):
    """(how, where, op) from ipu-e2e-goldens' output: the op whose cycles moved furthest."""
    moved = re.search(r"^\S+: (op \d+ \w+ \w+): (device cycles .*)$", stdout, re.M)
    return ("cycle goldens", moved.group(2), moved.group(1)) if moved else (None, None, None)


def located(result, stderr=""):
    """(how, where, op) of a result.json (or, for an error the compiler found
    in its own product, of the message): how it was caught, the tile and
    address or the element, and the compiler op named (None: not caught)."""
    if result.get("status") == "INCONSISTENT":
        stderr = result["message"]
    inconsistency = re.search(r"compiler inconsistency in the (\w+) stage, (.*?\(op [^)]*\))(.*)", stderr)
    if result.get("status") == "INCONSISTENT" and not (inconsistency and re.search(r"op \d+ \w+ \w+",
                                                                                   inconsistency.group(2))):
        # A back-end stage refusing the compiler's own requests, areas or tables: the stage, the tile and
        # address, and the op or object named.
        stage = re.search(r"compiler inconsistency in the (\w+) stage, ([^:]*): (.*)", stderr)
        tile = re.search(r"tile \d+( at 0x[0-9A-F]+)?", stderr)
        op = re.search(r"op \d+ \w+ \w+", stderr)
        return (f"{stage.group(1)} self-check" if stage else None, tile.group(0) if tile else None,
                op.group(0) if op else stage.group(3).split(" [")[0] if stage else None)
    if (not result or result.get("status") == "INCONSISTENT") and inconsistency:
        tile = re.search(r"tile \d+( at 0x[0-9A-F]+)?", inconsistency.group(3))
        op = re.search(r"op \d+ \w+ \w+", inconsistency.group(2))
        return (f"{inconsistency.group(1)} self-check", tile.group(0) if tile else None,
                op.group(0) if op else None)
    fault = result.get("fault")
    if fault:
        return (f"fault {fault['kind']}", f"tile {fault['tile']} at 0x{fault['address_lo']:X}",
                (fault.get("op") or {}).get("label") or f"exchange row {fault.get('row')}")
    timeline = (result.get("memory_timeline_check") or {}).get("first_mismatch")
    if timeline:
        begun = timeline["latest_begun"] or {}
        return ("memory timeline check", f"tile {timeline['tile']} at 0x{begun.get('address', 0):X}",
                begun.get("op"))
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
            program, args = command(m["name"], folder)
            flags = ["--quiet", *args] if program == GOLDENS else [*args, "--quiet", "--output", folder]
            done = subprocess.run([sys.executable, str(program), *flags], capture_output=True, text=True,
                                  timeout=600)
            path = Path(folder) / "result.json"
            result = json.loads(path.read_text()) if path.exists() else {}
        how, where, op = golden_moved(done.stdout) if program == GOLDENS else located(result, done.stderr)
        flags_of = WORKLOADS[m["name"]]
        workload = Path(flags_of[1]).stem if flags_of[0] == "--model" else flags_of[1]
        rows.append({**m, "workload": workload, "exit": done.returncode,
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
