"""schema.py: the shapes of the JSON files the tools read back (a run's result.json and run profile, a
sweep's records, the goldens, the summaries of the nightly's cases) and one reader that checks a file
against its shape, naming the file and the field that is wrong ("field 'estimate.peak_bytes': expected an
integer, found \"ten\"").  Only what a reader relies on is described: other fields may be anything.

A shape is a type (str, int, float for any number, bool, dict, list, object for anything), a tuple of
shapes (any one of them), a list [shape] (a list of those), a dict {key: shape} (an object with those keys;
a key written "key?" may be missing or null), Map(shape) (an object whose every value has that shape) or
Text(pattern, description) (a string matching the regular expression).
"""
import json
import os
import re

from . import files
from .command import UsageError


class Map:
    """An object of any keys whose values all have one shape."""

    def __init__(self, shape):
        self.shape = shape


class Text:
    """A string matching a regular expression."""

    def __init__(self, pattern, description):
        self.pattern, self.description = re.compile(pattern), description


NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "an object",
         list: "a list", object: "anything"}


def describe(shape):
    if isinstance(shape, tuple):
        return " or ".join(describe(s) for s in shape)
    if isinstance(shape, list):
        return f"a list, each {describe(shape[0])}"
    if isinstance(shape, dict):
        required = [f'"{key}"' for key in shape if not key.endswith("?")]
        return f"an object with {', '.join(required)}" if required else "an object"
    if isinstance(shape, Map):
        return "an object"
    if isinstance(shape, Text):
        return shape.description
    return NAMES[shape]


def fits(value, shape):
    """Does value have the shape at its top level (a type or a choice of types)?"""
    if isinstance(shape, tuple):
        return any(fits(value, s) for s in shape)
    if isinstance(shape, list):
        return isinstance(value, list)
    if isinstance(shape, (dict, Map)):
        return isinstance(value, dict)
    if isinstance(shape, Text):
        return isinstance(value, str) and shape.pattern.fullmatch(value) is not None
    if shape is object:
        return True
    if shape is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if shape is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, shape)


def quoted(field):
    return f"field '{field}'" if field else "the file"


def problem(value, shape, where=""):
    """The first field of value that does not have its shape, as "field 'a.b[2]': expected ..., found ...",
    or None."""
    if not fits(value, shape):
        found = json.dumps(value)
        found = found if len(found) <= 40 else found[:37] + "..."
        return f"{quoted(where)}: expected {describe(shape)}, found {found}"
    if isinstance(shape, tuple):
        shape = next(s for s in shape if fits(value, s))
    if isinstance(shape, list):
        for index, item in enumerate(value):
            wrong = problem(item, shape[0], f"{where}[{index}]")
            if wrong:
                return wrong
    elif isinstance(shape, Map):
        for key, item in value.items():
            wrong = problem(item, shape.shape, f"{where}.{key}" if where else key)
            if wrong:
                return wrong
    elif isinstance(shape, dict):
        for key, inner in shape.items():
            name, optional = key.removesuffix("?"), key.endswith("?")
            field = f"{where}.{name}" if where else name
            if value.get(name) is None:
                if optional or (inner is object and name in value):  # anything, null too, but present
                    continue
                found = "missing" if name not in value else "found null"
                return f"{quoted(field)}: expected {describe(inner)}, {found}"
            wrong = problem(value[name], inner, field)
            if wrong:
                return wrong
    return None


def load(path, shape, flag=None):
    """The JSON of path, checked against shape; UsageError naming the flag (when given), the file and the
    field otherwise."""
    where = f"{flag} {path}" if flag else str(path)
    if not os.path.lexists(path):
        raise UsageError(f"{where}: cannot read it: No such file or directory")
    try:
        data = files.read_json(path, flag or "file")
    except files.InputError as error:
        raise UsageError(str(error)) from None
    wrong = problem(data, shape)
    if wrong:
        raise UsageError(f"{where}: {wrong}")
    return data


NUMBER = float
SHA256 = Text(r"[0-9a-f]{64}", "the 64 hex digits of a SHA-256")
OP_ROW = {"op": object, "kind": object, "output": object}

# What ipu-e2e-compare reads of a run's result.json.
RESULT = {"schema": Text(r"ipu-e2e/result", '"ipu-e2e/result" (an ipu-e2e-test result.json)'), "library?": dict, "geometry?": dict, "estimate?": dict, "tile_peaks?": dict,
          "plan?": {"ops?": [OP_ROW]}, "reports?": dict, "cycles?": NUMBER, "tiles?": NUMBER,
          "op_cycles?": [OP_ROW]}

# What ipu-e2e-compare reads of a run's run-profile.json (a replay's cycles per op).
RUN_PROFILE = {"ops": [str], "steps": [dict]}

# What ipu-e2e-sweep-report reads: the sweep's record, each case's record (case.json) and the results of its
# build and run.
SWEEP = {"schema": Text(r"ipu-e2e/sweep", '"ipu-e2e/sweep" (the record of an ipu-e2e-sweep --output)'),
         "version": int, "planned": [{"name": str}]}
CASE_RECORD = {"outcome": str, "sha256": {"library": {"sha256": SHA256}, "cli": {"sha256": SHA256}},
               "message?": str, "build?": {"seconds?": NUMBER}, "rejection?": dict}
BUILD_RESULT = {"estimate?": {"budget?": int, "peak_bytes?": int},
                "tile_peaks?": {"peak_bytes?": [int], "high_water?": [int]},
                "build?": {"stages?": dict, "seconds?": NUMBER, "peak_rss_bytes?": int}}
RUN_RESULT = {"cycles?": int, "checks?": [dict], "wall_seconds?": {"device?": NUMBER}}

# What the nightly reads of its cases' outputs (besides a test's result.json, RUN_RESULT): the ONNX node
# tests' and random workloads' summaries, the mutation table, a benchmark's or the fuzzer's figures.
ONNX_TESTS = {"passed": int, "failed": int, "not_supported": int,
              "cases": [{"name": str, "op_type": str, "status": str}]}
RANDOM = {"passed": int, "cases": [{"name": str, "status": str, "problems": [str], "reproduce": [str]}]}
MUTATIONS = {"mutations": [{"name": str, "stage": str, "workload": str, "exit": object, "caught": bool,
                            "how": object, "where": object, "op": object}]}
BENCH = {"simulated_cycles_per_inference?": NUMBER, "min_cosine?": NUMBER, "targets_met?": Map(bool)}

PROPERTIES = {"seed": int, "properties": [{"property": str, "inputs": int, "holds": bool}],
              "regressions_broken": [str]}

# The goldens file: figures per case.
GOLDENS = {"cases": Map(dict)}
