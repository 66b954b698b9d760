"""Running a package on the device model and checking its outputs against the
expectations recorded in it: recorded inputs are uploaded, the device is
initialized and run, and every output stream is compared word by word.
Faults are captured with the device's structured description.  A checked
run with a profile folder also records the device's memory events and
writes the run profile, the run-time memory timeline and their page, and
checks the timeline's peaks against its allocation table (timeline_check).
"""
import hashlib
import time
from array import array

from . import artifacts, report as html_report, run_reports, timeline_check, trace
from .native import DEVICE_FAULT, Device, IpuError


class DeviceFault(Exception):
    """The device stopped on a fault; .fault is its structured description,
    .profile the cycle report of the steps run before it and .timeline the
    run-time memory timeline up to it (None when not recorded)."""

    def __init__(self, message, fault, profile=None, timeline=None):
        super().__init__(message)
        self.fault, self.profile, self.timeline = fault, profile, timeline


def fault_of(device, error, recording):
    """The DeviceFault of a device that stopped on one (error: its IpuError),
    with what the device ran before it: the steps' cycle report (none when
    initialization faulted) and, when recording, the memory timeline."""
    try:
        profile = device.fault_profile()
    except IpuError:
        profile = None
    return DeviceFault(error.message, device.fault(), profile, device.memory_timeline() if recording else None)


def parameter_digest(device, package):
    """SHA-256 of every parameter byte on the device, where the package says
    they live, and a short digest per range (to name the first that changed)."""
    ranges = package.info()["meta"].get("parameters", {"tile": [], "address": [], "size": []})
    digest, each = hashlib.sha256(), []
    for tile, address, size in zip(ranges["tile"], ranges["address"], ranges["size"]):
        data = device.read(tile, address, size)
        digest.update(data)
        each.append(hashlib.blake2b(data, digest_size=8).hexdigest())
    return digest.hexdigest(), each


def first_changed_parameter(package, uploaded, final):
    """The first parameter range whose bytes differ between two digests: tile,
    address, size, buffer name and the op that reads it; None when none did."""
    ranges = package.info()["meta"].get("parameters", {})
    for i, (a, b) in enumerate(zip(uploaded[1], final[1])):
        if a != b:
            return {key: ranges[key][i] for key in ("tile", "address", "size", "name", "op") if key in ranges}
    return None


def run_resident(ctx, package, invocations, progress=None, device_options=None, on_timeline=None):
    """Initialize once, upload parameters once, serve several invocations.
    Returns (last cycle report, outputs of every invocation, the parameter
    digests after the upload and after the last invocation, seconds per
    invocation).  device_options: Device.configure's; on_timeline: called
    with the run-time memory timeline (device_options memory_events)."""
    info = package.info()
    device = Device(ctx, info["profile"])
    if device_options:
        device.configure(**device_options)
    for stream in info["streams"]:
        if stream["direction"] != "output" and stream["records"].get("input"):
            device.set_stream(stream["name"], package.record("input", stream["name"]))
    try:
        device.initialize(package)
        uploaded = parameter_digest(device, package)
        outputs, seconds, result = [], [], None
        for invocation in range(invocations):
            if progress:
                progress.update("running on the device", invocation + 1, invocations)
            started = time.perf_counter()
            result = device.run()
            seconds.append(time.perf_counter() - started)
            outputs.append({s["name"]: device.stream(s["name"]) for s in info["streams"]
                            if s["direction"] == "output"})
        final = parameter_digest(device, package)
        if on_timeline:
            on_timeline(device.memory_timeline())
    except IpuError as error:
        if error.status == DEVICE_FAULT:
            raise fault_of(device, error, on_timeline is not None) from None
        raise
    finally:
        device.close()
    return result, outputs, (uploaded, final), seconds


def run(ctx, package, progress=None, invocations=1, on_timeline=None, device_options=None):
    """Upload recorded inputs, initialize, run; returns (profile, outputs,
    seconds).  on_timeline: record memory events and call it with the
    run-time memory timeline; device_options: Device.configure's."""
    info = package.info()
    device = Device(ctx, info["profile"])
    if on_timeline or device_options:
        device.configure(**dict({"memory_events": True} if on_timeline else {}, **(device_options or {})))
    for stream in info["streams"]:
        if stream["direction"] != "output" and stream["records"].get("input"):
            device.set_stream(stream["name"], package.record("input", stream["name"]))
    started = time.perf_counter()
    try:
        if progress:
            progress.update("initializing the device")
        device.initialize(package)
        result = None
        for invocation in range(invocations):
            if progress:
                progress.update("running on the device", invocation + 1, invocations)
            result = device.run()
        if on_timeline:
            on_timeline(device.memory_timeline())
    except IpuError as error:
        if error.status == DEVICE_FAULT:
            raise fault_of(device, error, on_timeline is not None) from None
        raise
    seconds = time.perf_counter() - started
    outputs = {s["name"]: device.stream(s["name"]) for s in info["streams"] if s["direction"] == "output"}
    device.close()
    return result, outputs, seconds


def compare_exact(name, actual, expected, word_bytes=4):
    """Word-by-word comparison; returns a check dict with the first mismatch."""
    check = {"stream": name, "words_checked": len(expected) // 4, "mismatches": 0, "first_mismatch": None}
    if actual == expected:
        return check
    got, want = array("I", actual), array("I", expected)
    bad = [i for i in range(len(want)) if i >= len(got) or got[i] != want[i]]
    check["mismatches"] = len(bad)
    if bad:
        i = bad[0]
        check["first_mismatch"] = {"word": i, "byte_offset": 4 * i, "expected": f"0x{want[i]:08X}",
                                   "actual": f"0x{got[i]:08X}" if i < len(got) else None}
    return check


def run_checked(ctx, package, progress, reports, result, invocations=1, device_inject=None, timing=None):
    """Run the package, write the cycle profile and the memory timeline
    where reports (run_reports.RunReports, or None) say, before any check, so
    a failed comparison still leaves something to inspect, and return (run
    result, outputs); on a device fault, record it in result and return None.
    With several invocations (a resident run) result["resident"] says whether
    every invocation's outputs were identical and the parameters unchanged.
    timing: the package's static timing when the caller has it (a trace's
    busiest tiles come from it)."""
    timeline = []
    keep = timeline.append if reports and (reports.run_profile or reports.trace) else None
    # A device mutation (a test's) is configured on the device, beside the memory events it needs.
    injected = {"inject": device_inject} if device_inject else {}
    traced = traced_tiles(package, timing) if reports and reports.trace else []
    if traced:
        injected["traced_tiles"] = traced
    try:
        if invocations > 1:
            run_result, every, (uploaded, final), seconds = run_resident(
                ctx, package, invocations, progress, dict(memory_events=True, **injected) if keep else None, keep)
            outputs = every[-1]
            result["wall_seconds"]["device"] = sum(seconds)
            result["resident"] = {
                "inferences": invocations, "seconds_per_inference": seconds,
                "identical_outputs": all(o == every[0] for o in every[1:]),
                "parameter_digest_after_upload": uploaded[0], "parameter_digest_at_end": final[0],
                "parameters_unchanged": uploaded[0] == final[0],
                "first_changed_parameter": first_changed_parameter(package, uploaded, final)}
        else:
            run_result, outputs, result["wall_seconds"]["device"] = run(ctx, package, progress, on_timeline=keep,
                                                                        device_options=injected)
    except DeviceFault as fault:
        result.update(status="FAULT", fault=fault.fault, message=str(fault))
        if keep and fault.profile and fault.timeline:
            write_run_reports(reports, result, dict(fault.profile, fault=fault.fault), fault.timeline, traced,
                              progress)
        return None
    if keep:
        write_run_reports(reports, result, run_result, timeline[0], traced, progress)
        result["memory_timeline_check"] = timeline_check.check(timeline[0])
    return run_result, outputs


def traced_tiles(package, timing=None):
    """The tiles a trace gives tracks of their own: the busiest by compute
    cycles in the package's exact static timing (timing, or computed here;
    none when the package has a record the timing cannot read: the device
    will say what)."""
    try:
        return trace.busiest_tiles((timing or package.timing())["tiles"]["compute"])
    except IpuError:
        return []


def write_run_reports(reports, result, run_result, timeline, traced, progress):
    """The run's cycle reports where reports say: the run profile
    (run-profile.json and .html) and the memory timeline, and the trace."""
    ops = timeline["ops"]
    run_result["ops"] = [f"{kind} {name}" for kind, name in zip(ops["kind"], ops["name"])]
    if reports.run_profile:
        write_run_profile(reports, result, run_result, timeline, progress)
    if reports.trace:
        if progress:
            progress.update("writing the trace")
        trace.write(reports.trace, run_result, timeline, traced,
                    f"{result.get('workload', 'run')} on {result.get('tiles', '?')} tiles")


def write_run_profile(reports, result, run_result, timeline, progress):
    """run-profile.json and .html and memory-timeline.json where reports say
    (of a whole run, or of one a fault stopped: then run_result["fault"] is
    the fault and both cover the run up to it)."""
    if progress:
        progress.update("writing the run profile and memory timeline")
    page = reports.run_profile
    timeline["budget"] = result.get("estimate", {}).get("budget")
    artifacts.write_json(page.with_name("run-profile.json"),
                         dict(run_reports.record("run-profile", reports.command), **run_result))
    artifacts.write_json(reports.timeline, timeline, compact=True)
    html_report.write_run_profile_html(page, run_result, timeline, reports.links(page))
