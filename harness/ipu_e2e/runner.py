"""Running a package on the device model and checking its outputs against the
expectations recorded in it: recorded inputs are uploaded, the device is
initialized and run, and every output stream is compared word by word.
Faults are captured with the device's structured description.
"""
import time
from array import array

from . import artifacts, report as html_report
from .native import DEVICE_FAULT, Device, IpuError


class DeviceFault(Exception):
    """The device stopped on a fault; .fault is its structured description."""

    def __init__(self, message, fault):
        super().__init__(message)
        self.fault = fault


def run(ctx, package, progress=None, invocations=1):
    """Upload recorded inputs, initialize, run; returns (profile, outputs, seconds)."""
    info = package.info()
    device = Device(ctx, info["profile"])
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
    except IpuError as error:
        if error.status == DEVICE_FAULT:
            raise DeviceFault(error.message, device.fault()) from None
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


def run_checked(ctx, package, progress, profile_directory, result):
    """Run the package, write the cycle profile (before any check, so a
    failed comparison still leaves something to inspect) and return
    (run result, outputs); on a device fault, record it in result and return None."""
    try:
        run_result, outputs, result["wall_seconds"]["device"] = run(ctx, package, progress)
    except DeviceFault as fault:
        result.update(status="FAULT", fault=fault.fault, message=str(fault))
        return None
    if profile_directory:
        artifacts.write_json(profile_directory / "run-profile.json", run_result)
        html_report.write_run_profile_html(profile_directory / "run-profile.html", run_result)
    return run_result, outputs
