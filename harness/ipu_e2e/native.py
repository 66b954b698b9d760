"""ctypes bindings of libipu_e2e.so: the library is located, its ABI version
checked, and every failing call raised as IpuError carrying the status and the
library's own message.  Handles are wrapped in small classes that free them.
"""
import ctypes
import json
import os
from pathlib import Path

from . import interrupts

ABI_VERSION = 10
# Bytes per element of each device type.
DTYPE_BYTES = {"f32": 4, "f16": 2, "f143": 1, "f152": 1}

STATUS_NAMES = {
    0: "ok", 1: "invalid_argument", 2: "no_memory", 3: "io", 4: "malformed",
    5: "device_fault", 6: "state", 7: "internal", 8: "cancelled", 9: "no_plan",
}
INVALID_ARGUMENT, NO_MEMORY, IO, MALFORMED, DEVICE_FAULT, STATE, INTERNAL, CANCELLED, NO_PLAN = range(1, 10)

REPO = Path(__file__).resolve().parents[2]


class IpuError(Exception):
    """A failing library call: status code, its name and the library's message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.name = STATUS_NAMES.get(status, "unknown")
        self.message = message


class PlanRejected(IpuError):
    """ipu_compile found no candidate plan that fits: .rejection is the
    library's record of it (stage, reason, budget, search, smallest_candidate)."""

    def __init__(self, message, rejection):
        super().__init__(NO_PLAN, message)
        self.rejection = rejection


def library_path():
    explicit = os.environ.get("IPU_E2E_LIBRARY")
    if explicit:
        return Path(explicit)
    return REPO / "build" / "libipu_e2e.so"


_lib = None
_c_char_pp = ctypes.POINTER(ctypes.c_char_p)
_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64)


def _bytes_at(address, size):
    """A copy of size bytes at address.  ctypes.string_at takes its size as a
    C int (it fails from 2 GiB and wraps at 4 GiB): this takes any 64-bit size."""
    if size == 0:
        return b""
    return bytes((ctypes.c_char * size).from_address(address))


def _declare(lib):
    vp, cp, sz, u32, st = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_int
    out_str = ctypes.POINTER(ctypes.c_void_p)
    signatures = {
        "ipu_abi_version": (u32, []),
        "ipu_free": (None, [vp]),
        "ipu_ctx_create": (vp, []),
        "ipu_ctx_free": (None, [vp]),
        "ipu_ctx_errmsg": (cp, [vp]),
        "ipu_ctx_clear_error": (None, [vp]),
        "ipu_ctx_set_progress": (None, [vp, _PROGRESS, vp]),
        "ipu_ctx_set_threads": (None, [vp, ctypes.c_int]),
        "ipu_ctx_cancel": (None, [vp]),
        "ipu_profile_resolve": (st, [vp, cp, u32, out_str]),
        "ipu_package_load": (st, [vp, vp, sz, ctypes.POINTER(vp)]),
        "ipu_package_load_file": (st, [vp, cp, ctypes.POINTER(vp)]),
        "ipu_package_peek_file": (st, [vp, cp, out_str]),
        "ipu_package_serialize": (st, [vp, vp, ctypes.POINTER(vp), ctypes.POINTER(sz)]),
        "ipu_package_save_file": (st, [vp, vp, cp]),
        "ipu_package_info_json": (st, [vp, vp, out_str]),
        "ipu_package_exchange_replay": (st, [vp, vp, cp, out_str]),
        "ipu_package_timing_json": (st, [vp, vp, out_str]),
        "ipu_package_record": (st, [vp, vp, cp, cp, ctypes.POINTER(vp), ctypes.POINTER(sz)]),
        "ipu_package_free": (None, [vp]),
        "ipu_device_create": (st, [vp, cp, ctypes.POINTER(vp)]),
        "ipu_device_free": (None, [vp]),
        "ipu_device_set_stream": (st, [vp, vp, cp, vp, sz]),
        "ipu_device_initialize": (st, [vp, vp, vp]),
        "ipu_device_configure": (st, [vp, vp, cp]),
        "ipu_device_run": (st, [vp, vp, out_str]),
        "ipu_device_stream": (st, [vp, vp, cp, ctypes.POINTER(vp), ctypes.POINTER(sz)]),
        "ipu_device_fault_json": (st, [vp, vp, out_str]),
        "ipu_device_fault_profile_json": (st, [vp, vp, out_str]),
        "ipu_device_memory_timeline_json": (st, [vp, vp, out_str]),
        "ipu_device_read": (st, [vp, vp, u32, u32, vp, sz]),
        "ipu_device_write": (st, [vp, vp, u32, u32, vp, sz]),
        "ipu_stress_build": (st, [vp, cp, ctypes.POINTER(vp)]),
        "ipu_bench_gemm": (st, [vp, cp, out_str]),
        "ipu_bench_kernels": (st, [vp, cp, out_str]),
        "ipu_compile": (st, [vp, vp, cp, ctypes.POINTER(vp), out_str]),
        "ipu_workload_create": (st, [vp, cp, ctypes.POINTER(vp)]),
        "ipu_workload_free": (None, [vp]),
        "ipu_workload_info_json": (st, [vp, vp, out_str]),
        "ipu_workload_values": (st, [vp, vp, cp, ctypes.POINTER(vp), ctypes.POINTER(sz)]),
        "ipu_workload_device_bytes": (st, [vp, vp, cp, ctypes.POINTER(vp), ctypes.POINTER(sz)]),
        "ipu_workload_set_values": (st, [vp, vp, cp, vp, sz]),
        "ipu_reference_run": (st, [vp, vp, cp, out_str]),
        "ipu_reference_output": (st, [vp, vp, cp, ctypes.POINTER(vp), ctypes.POINTER(sz)]),
        "ipu_check_outputs": (st, [vp, vp, vp, cp, sz, sz, cp, out_str]),
        "ipu_check_ops": (st, [vp, vp, vp, cp, out_str]),
        "ipu_mutations_json": (st, [vp, out_str]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


def lib():
    """The loaded library (loaded once); IpuError if missing or mismatched."""
    global _lib
    if _lib is None:
        path = library_path()
        if not path.exists():
            raise IpuError(INTERNAL, f"library not found at {path}: build it first (make build)")
        # Device phases are short parallel loops: spinning OpenMP workers would
        # starve other processes on a busy machine (and themselves). libgomp
        # reads this when the library loads it.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        try:
            loaded = ctypes.CDLL(str(path))
        except OSError as error:
            raise IpuError(INTERNAL, f"cannot load {path}: {error}") from None
        try:
            version = loaded.ipu_abi_version()
        except AttributeError:
            raise IpuError(INTERNAL, f"{path} is not the ipu-e2e library (it has no ipu_abi_version)") from None
        if version != ABI_VERSION:
            raise IpuError(INTERNAL, f"{path} has ABI version {version}, this harness needs {ABI_VERSION}")
        _declare(loaded)
        _lib = loaded
    return _lib


class Context:
    """A library context: errors raise IpuError; progress goes to a callback."""

    def __init__(self, threads=0, progress=None):
        self.handle = None  # close() runs even when the library cannot be loaded
        self.handle = lib().ipu_ctx_create()
        if not self.handle:
            raise IpuError(NO_MEMORY, "ipu_ctx_create failed")
        if threads:
            lib().ipu_ctx_set_threads(self.handle, threads)
        self._progress = None
        self._stopped = None  # an exception raised inside the progress callback
        if progress is not None:
            @interrupts.callback
            def report(user, stage, done, total):
                # ctypes cannot pass an exception back through C: keep it
                # (an interrupt's, usually), stop the work, raise it on return.
                try:
                    progress(stage.decode(), done, total)
                except BaseException as error:  # noqa: B036 (re-raised by check)
                    self._stopped = error
                    self.cancel()
            self._progress = _PROGRESS(report)
            lib().ipu_ctx_set_progress(self.handle, self._progress, None)
        interrupts.register(self)

    def cancel(self):
        """Ask the running library call to stop at its next boundary (any thread)."""
        if self.handle:
            lib().ipu_ctx_cancel(self.handle)

    def check(self, status):
        if self._stopped is not None:
            stopped, self._stopped = self._stopped, None
            raise stopped
        stop = interrupts.interrupted()
        if status == CANCELLED or stop:
            lib().ipu_ctx_clear_error(self.handle)
            raise stop or IpuError(status, "cancelled")
        if status != 0:
            message = lib().ipu_ctx_errmsg(self.handle).decode(errors="replace")
            lib().ipu_ctx_clear_error(self.handle)
            raise IpuError(status, message)

    def take_string(self, pointer):
        try:
            return ctypes.string_at(pointer.value).decode()
        finally:
            lib().ipu_free(pointer)

    def close(self):
        interrupts.unregister(self)
        # The handle is forgotten before it is freed: a signal's Interrupted
        # raised between the two would otherwise leave it for __del__ to free
        # again (a double free at exit; no call runs between load and store).
        handle, self.handle = self.handle, None
        if handle:
            lib().ipu_ctx_free(handle)

    def __del__(self):
        self.close()

    def resolve_profile(self, profile_json, tiles=0):
        out = ctypes.c_void_p()
        self.check(lib().ipu_profile_resolve(self.handle, profile_json.encode(), tiles, ctypes.byref(out)))
        return json.loads(self.take_string(out))


class Package:
    """A loaded or built package."""

    def __init__(self, ctx, handle):
        self.ctx = ctx
        self.handle = handle
        self._info = None

    @classmethod
    def load_file(cls, ctx, path):
        handle = ctypes.c_void_p()
        ctx.check(lib().ipu_package_load_file(ctx.handle, str(path).encode(), ctypes.byref(handle)))
        return cls(ctx, handle)

    @staticmethod
    def peek_file(ctx, path):
        """What the file says of its tiles, streams and metadata, read without loading its data
        (ipu_package_peek_file): a replay checks the streams before it loads."""
        out = ctypes.c_void_p()
        ctx.check(lib().ipu_package_peek_file(ctx.handle, str(path).encode(), ctypes.byref(out)))
        return json.loads(ctx.take_string(out))

    @classmethod
    def load_bytes(cls, ctx, data):
        handle = ctypes.c_void_p()
        buffer = ctypes.create_string_buffer(bytes(data), len(data))
        ctx.check(lib().ipu_package_load(ctx.handle, buffer, len(data), ctypes.byref(handle)))
        return cls(ctx, handle)

    @classmethod
    def build_stress(cls, ctx, options):
        handle = ctypes.c_void_p()
        ctx.check(lib().ipu_stress_build(ctx.handle, json.dumps(options).encode(), ctypes.byref(handle)))
        return cls(ctx, handle)

    def info(self):
        if self._info is None:
            out = ctypes.c_void_p()
            self.ctx.check(lib().ipu_package_info_json(self.ctx.handle, self.handle, ctypes.byref(out)))
            self._info = json.loads(self.ctx.take_string(out))
        return self._info

    def timing(self):
        """The main program's exact static timing, computed from the package without running it: the
        device run's cycles, totals, steps and per-tile compute and wait, and the exchange bytes per
        phase and per compiler op."""
        out = ctypes.c_void_p()
        self.ctx.check(lib().ipu_package_timing_json(self.ctx.handle, self.handle, ctypes.byref(out)))
        return json.loads(self.ctx.take_string(out))

    def exchange_replay(self, phases=None, stream_words=None, balance_streams=False):
        """Every exchange phase (or the program phases listed) rescheduled beside its recorded schedule:
        latency-oriented, or in stream waves of stream_words words (balanced chunks too with
        balance_streams)."""
        options = {} if phases is None else {"phases": list(phases)}
        if stream_words:
            options["stream_words"] = stream_words
        if balance_streams:
            options["balance_streams"] = True
        out = ctypes.c_void_p()
        self.ctx.check(lib().ipu_package_exchange_replay(self.ctx.handle, self.handle, json.dumps(options).encode(),
                                                          ctypes.byref(out)))
        return json.loads(self.ctx.take_string(out))

    def serialize(self):
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        self.ctx.check(lib().ipu_package_serialize(self.ctx.handle, self.handle, ctypes.byref(data),
                                                   ctypes.byref(size)))
        try:
            return _bytes_at(data.value, size.value)
        finally:
            lib().ipu_free(data)

    def save(self, path):
        self.ctx.check(lib().ipu_package_save_file(self.ctx.handle, self.handle, str(path).encode()))

    def record(self, kind, stream):
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        self.ctx.check(lib().ipu_package_record(self.ctx.handle, self.handle, kind.encode(),
                                                stream.encode(), ctypes.byref(data), ctypes.byref(size)))
        return _bytes_at(data.value, size.value)

    def close(self):
        handle, self.handle = self.handle, None  # see Context.close
        if handle:
            lib().ipu_package_free(handle)

    def __del__(self):
        self.close()


class Device:
    """A simulated device for one profile."""

    def __init__(self, ctx, profile):
        self.ctx = ctx
        self.handle = ctypes.c_void_p()
        ctx.check(lib().ipu_device_create(ctx.handle, json.dumps(profile).encode(), ctypes.byref(self.handle)))
        self.package = None

    def set_stream(self, name, data):
        data = bytes(data)
        self.ctx.check(lib().ipu_device_set_stream(self.ctx.handle, self.handle, name.encode(), data, len(data)))

    def configure(self, **options):
        """Device options from the next initialize (allocation_checks=False: only to measure what the
        checks cost; memory_events=True: record lives beginning and ending, for memory_timeline)."""
        self.ctx.check(lib().ipu_device_configure(self.ctx.handle, self.handle, json.dumps(options).encode()))

    def initialize(self, package):
        self.package = package  # keep it alive while the device uses it
        self.ctx.check(lib().ipu_device_initialize(self.ctx.handle, self.handle, package.handle))

    def run(self):
        out = ctypes.c_void_p()
        self.ctx.check(lib().ipu_device_run(self.ctx.handle, self.handle, ctypes.byref(out)))
        return json.loads(self.ctx.take_string(out))

    def stream(self, name):
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        self.ctx.check(lib().ipu_device_stream(self.ctx.handle, self.handle, name.encode(),
                                               ctypes.byref(data), ctypes.byref(size)))
        return _bytes_at(data.value, size.value)

    def memory_timeline(self):
        """The run-time memory timeline of the events recorded since initialize (ipu.h)."""
        out = ctypes.c_void_p()
        self.ctx.check(lib().ipu_device_memory_timeline_json(self.ctx.handle, self.handle, ctypes.byref(out)))
        return json.loads(self.ctx.take_string(out))

    def fault(self):
        out = ctypes.c_void_p()
        self.ctx.check(lib().ipu_device_fault_json(self.ctx.handle, self.handle, ctypes.byref(out)))
        return json.loads(self.ctx.take_string(out))

    def fault_profile(self):
        """The cycle report of the run a fault stopped, over the steps it completed (ipu.h)."""
        out = ctypes.c_void_p()
        self.ctx.check(lib().ipu_device_fault_profile_json(self.ctx.handle, self.handle, ctypes.byref(out)))
        return json.loads(self.ctx.take_string(out))

    def read(self, tile, address, size):
        buffer = ctypes.create_string_buffer(size)
        self.ctx.check(lib().ipu_device_read(self.ctx.handle, self.handle, tile, address, buffer, size))
        return buffer.raw

    def write(self, tile, address, data):
        data = bytes(data)
        self.ctx.check(lib().ipu_device_write(self.ctx.handle, self.handle, tile, address, data, len(data)))

    def close(self):
        handle, self.handle = self.handle, None  # see Context.close
        if handle:
            lib().ipu_device_free(handle)

    def __del__(self):
        self.close()


class Workload:
    """A workload graph with its generated values and, once run, its reference
    outputs.  Arrays cross as bytes: FP32 values in host byte order, device
    bytes in the tensor's device type."""

    def __init__(self, ctx, options):
        self.ctx = ctx
        self.handle = ctypes.c_void_p()
        ctx.check(lib().ipu_workload_create(ctx.handle, json.dumps(options).encode(),
                                            ctypes.byref(self.handle)))
        self._info = None

    def info(self):
        if self._info is None:
            out = ctypes.c_void_p()
            self.ctx.check(lib().ipu_workload_info_json(self.ctx.handle, self.handle, ctypes.byref(out)))
            self._info = json.loads(self.ctx.take_string(out))
        return self._info

    def tensor(self, name):
        """The info entry of a tensor (KeyError if there is none)."""
        for entry in self.info()["tensors"]:
            if entry["name"] == name:
                return entry
        raise KeyError(name)

    def _floats(self, function, name):
        data, count = ctypes.c_void_p(), ctypes.c_size_t()
        self.ctx.check(function(self.ctx.handle, self.handle, name.encode(), ctypes.byref(data),
                                ctypes.byref(count)))
        return _bytes_at(data.value, 4 * count.value)

    def values(self, name):
        """Unquantized FP32 values of an input or parameter (all sequence members)."""
        return self._floats(lib().ipu_workload_values, name)

    def set_values(self, name, data):
        """Give the FP32 values (bytes in host order: rows x cols x members) of
        an input or parameter whose description says "given"."""
        buffer = ctypes.create_string_buffer(bytes(data), len(data))
        self.ctx.check(lib().ipu_workload_set_values(self.ctx.handle, self.handle, name.encode(), buffer,
                                                     len(data) // 4))

    def device_bytes(self, name):
        """The values quantized to the tensor's device type and scale."""
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        self.ctx.check(lib().ipu_workload_device_bytes(self.ctx.handle, self.handle, name.encode(),
                                                       ctypes.byref(data), ctypes.byref(size)))
        try:
            return _bytes_at(data.value, size.value)
        finally:
            lib().ipu_free(data)

    def reference_run(self, options=None):
        """Run the host reference ({"fp32": True}); returns its timing JSON."""
        out = ctypes.c_void_p()
        text = json.dumps({"fp32": True} if options is None else options).encode()
        self.ctx.check(lib().ipu_reference_run(self.ctx.handle, self.handle, text, ctypes.byref(out)))
        return json.loads(self.ctx.take_string(out))

    def reference_output(self, name):
        """FP32 reference values of an output tensor (after reference_run)."""
        return self._floats(lib().ipu_reference_output, name)

    def compile(self, profile, memory_budget=None, inject=None, placement_report=None, attention=None,
                memory_profiles=None, search=None):
        """Plan, lower, schedule, place and package for a device profile;
        returns (Package, report dict).  inject: a test's fault in one stage;
        placement_report: a path for the placement report JSON; attention:
        "auto", "flash" or "materialized" for workloads with attention;
        memory_profiles: a directory for the planner's memory profiles
        (memory-<workload>-<serial>.json), written even when no plan fits;
        search: the planner's search options (search_budget, catalogue_budget,
        frontier_cap, catalogue_group) and the exchange scheduling options
        (exchange_stream_words, balance_streams); None or absent: their
        defaults.  No plan that fits: PlanRejected."""
        handle, report = ctypes.c_void_p(), ctypes.c_void_p()
        options = {"profile": profile, "memory_budget": memory_budget}
        if inject:
            options["inject"] = inject
        if placement_report:
            options["placement_report"] = str(placement_report)
        if memory_profiles:
            options["memory_profile_directory"] = str(memory_profiles)
        options.update({k: v for k, v in (search or {}).items() if v is not None})
        if attention:
            options["attention"] = attention
        options = json.dumps(options).encode()
        status = lib().ipu_compile(self.ctx.handle, self.handle, options, ctypes.byref(handle), ctypes.byref(report))
        if status == NO_PLAN and report.value:
            rejection = json.loads(self.ctx.take_string(report))["rejection"]
            try:
                self.ctx.check(status)
            except IpuError as error:
                raise PlanRejected(error.message, rejection) from None
        self.ctx.check(status)
        return Package(self.ctx, handle), json.loads(self.ctx.take_string(report))

    def check_ops(self, package, criteria):
        """The per-op check of a package compiled from this workload (ipu_check_ops)."""
        out = ctypes.c_void_p()
        self.ctx.check(lib().ipu_check_ops(self.ctx.handle, self.handle, package.handle,
                                           json.dumps(criteria).encode(), ctypes.byref(out)))
        return json.loads(self.ctx.take_string(out))

    def close(self):
        handle, self.handle = self.handle, None  # see Context.close
        if handle:
            lib().ipu_workload_free(handle)

    def __del__(self):
        self.close()


def check_outputs(ctx, reference, device, dtype, rows, cols, criteria):
    """Check device bytes (dtype "f32", "f16", "f143" or "f152") against FP32
    reference bytes: cosine per row, elementwise |d - r| <= atol + rtol |r|
    and the norm ratio (criteria: min_cosine, atol, rtol, norm_tolerance);
    returns the result dict."""
    reference, device = bytes(reference), bytes(device)
    if len(reference) != 4 * rows * cols:
        raise ValueError(f"reference has {len(reference)} bytes, expected {4 * rows * cols}")
    size = DTYPE_BYTES.get(dtype)
    if size is not None and len(device) != size * rows * cols:
        raise ValueError(f"device data has {len(device)} bytes, expected {size * rows * cols}")
    out = ctypes.c_void_p()
    ctx.check(lib().ipu_check_outputs(ctx.handle, reference, device, dtype.encode(), rows, cols,
                                      json.dumps(criteria).encode(), ctypes.byref(out)))
    return json.loads(ctx.take_string(out))


def mutations(ctx):
    """The mutations the compile option "inject" takes: [{name, stage, models}]."""
    out = ctypes.c_void_p()
    ctx.check(lib().ipu_mutations_json(ctx.handle, ctypes.byref(out)))
    return json.loads(ctx.take_string(out))


def bench_kernels(ctx, options):
    out = ctypes.c_void_p()
    ctx.check(lib().ipu_bench_kernels(ctx.handle, json.dumps(options).encode(), ctypes.byref(out)))
    return json.loads(ctx.take_string(out))


def bench_gemm(ctx, options):
    out = ctypes.c_void_p()
    ctx.check(lib().ipu_bench_gemm(ctx.handle, json.dumps(options).encode(), ctypes.byref(out)))
    return json.loads(ctx.take_string(out))
