"""The run-time memory timeline checked against the allocation table it
carries: the peak the device's memory events give each tile must equal the
peak the table's lifetimes give it over the phases the run executed (every
allocation but host staging, live from its first phase to its last, every
time that phase runs).  A difference is a bug in how the device records its
memory events or in the timeline built from them; the first tile that
differs is named with both peaks, the phase where the table peaks and the
allocation live there whose life began last (its name, op, address and
size).
"""
from collections import defaultdict


def table_peaks(timeline):
    """Per tile, (peak live bytes, the executed phase of the peak) from the
    allocation table's lifetimes."""
    table = timeline["allocations"]
    staging = table["kinds"].index("host staging")
    phases = sorted(set(timeline["steps"]["phase"]))
    deltas = defaultdict(lambda: defaultdict(int))
    for tile, size, kind, first, last in zip(table["tile"], table["size"], table["kind"], table["first"],
                                             table["last"]):
        if kind == staging:
            continue
        deltas[tile][first] += size
        if last >= 0:
            deltas[tile][last + 1] -= size
    peaks = [(0, None)] * timeline["tiles"]
    for tile, changes in deltas.items():
        points = sorted(changes)
        live, at, peak = 0, 0, (0, None)
        for phase in phases:
            while at < len(points) and points[at] <= phase:
                live += changes[points[at]]
                at += 1
            if live > peak[0]:
                peak = (live, phase)
        peaks[tile] = peak
    return peaks


def latest_begun(timeline, tile, phase):
    """Of tile's allocations live at phase (not host staging), the one whose
    life began last (the largest of those): where events that record lives
    at the wrong phase show first.  A dict with its op's label."""
    table, ops = timeline["allocations"], timeline["ops"]
    strings, staging = table["strings"], table["kinds"].index("host staging")
    best = None
    for i, t in enumerate(table["tile"]):
        last = table["last"][i]
        if t != tile or table["kind"][i] == staging or table["first"][i] > phase or (0 <= last < phase):
            continue
        if best is None or (table["first"][i], table["size"][i]) > (table["first"][best], table["size"][best]):
            best = i
    if best is None:
        return None
    op = table["op"][best]
    return {"name": strings[table["name"][best]], "address": table["address"][best], "size": table["size"][best],
            "first_phase": table["first"][best], "last_phase": table["last"][best],
            "op": f"op {op} {ops['kind'][op]} {ops['name'][op]}" if 0 <= op < len(ops["kind"]) else None}


def check(timeline):
    """{"passed", "tiles", "first_mismatch"}: the event peaks against the table's."""
    events = timeline["tile_peaks"]["peak_bytes"]
    first = None
    for tile, (peak, phase) in enumerate(table_peaks(timeline)):
        if events[tile] != peak:
            first = {"tile": tile, "event_peak_bytes": events[tile], "table_peak_bytes": peak,
                     "table_peak_phase": phase, "latest_begun": latest_begun(timeline, tile, phase)}
            break
    return {"passed": first is None, "tiles": timeline["tiles"], "first_mismatch": first}
