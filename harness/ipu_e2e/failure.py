"""What a failed run leads with: lines(result) are the text the CLI prints
for a device fault (the fault, the allocation live there, the nearest in
time holding the bytes, the other allocation involved) or for the first op
whose output diverged; place(result) is where it happened, as the reports'
URL hash addresses it (tile, phase, iteration, address).  The run index
shows both, with links that open the placement viewer and the run profile
there.
"""


def describe_allocation(a):
    """'name' of tensor, made by op, [address, end) on tile, phases first..last."""
    made = f", made by {a['op']['label']}" if a.get("op") else ""
    tensor = f" of tensor '{a['tensor']}'" if a.get("tensor") else ""
    last = "end" if a["last_phase"] is None else a["last_phase"]
    return (f"'{a['name']}'{tensor}{made}, [0x{a['address']:X}, 0x{a['address'] + a['size']:X}) on tile "
            f"{a['tile']}, phases {a['first_phase']}..{last}")


def fault_lines(f):
    """A device fault (ipu_device_fault_json's object) as the CLI prints it."""
    op = f"{f['op']['label']}, " if f.get("op") else ""
    iteration = f", iteration {f['iteration']}" if f.get("iteration") is not None else ""
    lines = [f"FAULT {f['kind']} on tile {f['tile']} at [0x{f['address_lo']:X}, 0x{f['address_hi']:X})"
             f" ({op}{f['program']} op {f['op_index']}, step {f['step']}, phase {f['phase']}{iteration}): "
             f"{f['detail']}"]
    other = {"stale_read": "bytes written by", "element_conflict": "other operand's allocation"}.get(
        f["kind"], "reached allocation")
    if not f.get("allocation") and f["address_hi"] > f["address_lo"]:
        lines.append(f"  allocation: none live at phase {f['phase']}")
    for key, what in (("allocation", "allocation"), ("nearest_allocation", "the nearest in time holding it"),
                      ("other_allocation", other)):
        if f.get(key):
            lines.append(f"  {what}: {describe_allocation(f[key])}")
    return lines


def divergence_lines(o):
    """The per-op check (result["op_check"]): how many op outputs were
    compared and the first one that diverged, as the CLI prints it."""
    lines = [f"  op check: {o['compared']} op outputs compared ({o['ops']} ops, {o['unchecked_ops']} not "
             f"captured), {o['failed_ops']} failed"]
    d = o["first_divergence"]
    if not d:
        return lines
    w = d["check"].get("worst_element") or {}
    iteration = f", iteration {d['iteration']}" if d["iteration"] is not None else ""
    where = (f" on tile {d['tile']} at 0x{d['address']:X} (allocation {d['allocation']})"
             if "tile" in d else "")
    lines.append(f"  first divergent op: {d['label']}{iteration}: element (row {w.get('row')}, column "
                 f"{w.get('col')}){where}: expected {w.get('expected', 0):.6g}, got {w.get('got', 0):.6g}, error "
                 f"{w.get('abs_error', 0):.3g} > bound {w.get('bound', 0):.3g}; "
                 f"{d['check']['elementwise_failures']} elements over the bound, min cosine "
                 f"{d['check']['min_cosine']:.6f}, norm ratio {d['check']['norm_ratio']:.5f}")
    return lines


def lines(result):
    """What a failed run's report leads with (empty for a run that passed or
    failed without a fault or a divergent op)."""
    if result.get("status") == "FAULT" and result.get("fault"):
        return fault_lines(result["fault"])
    check = result.get("op_check")
    if result.get("status") == "FAIL" and check and check.get("first_divergence"):
        return [line.strip() for line in divergence_lines(check)]
    return []


def place(result):
    """Where the failure happened, in the reports' URL hash keys (tile,
    phase, iteration, address), or None."""
    if result.get("status") == "FAULT" and result.get("fault"):
        f = result["fault"]
        where = {"tile": f["tile"], "phase": f["phase"], "iteration": f.get("iteration")}
        if f["address_hi"] > f["address_lo"]:
            where["address"] = f["address_lo"]
    else:
        d = (result.get("op_check") or {}).get("first_divergence")
        if result.get("status") != "FAIL" or not d:
            return None
        where = {"phase": d.get("phase"), "iteration": d.get("iteration"), "tile": d.get("tile"),
                 "address": d.get("address")}
    return {key: value for key, value in where.items() if isinstance(value, int)}
