"""test_schema.py: the reader of JSON files read back (ipu_e2e/schema.py) names the first field that does
not have its shape, with the path a person would follow to it, and takes what has it: nested objects and
lists, optional keys (missing or null), maps of any keys, strings by pattern, numbers that are not
booleans; a file that cannot be read or is not JSON is named with the flag that gave it."""
import pytest

from ipu_e2e import schema
from ipu_e2e.command import UsageError

SHAPE = {"schema": schema.Text(r"demo/[0-9]+", "demo/N"), "cycles?": schema.NUMBER,
         "ops": [{"op": int, "name?": str}], "figures?": schema.Map(int), "flag?": bool}


@pytest.mark.parametrize("value, message", [
    ({"schema": "demo/1", "ops": []}, None),
    ({"schema": "demo/1", "ops": [{"op": 0, "name": None}], "cycles": 2.5, "figures": {"a": 1}, "flag": False},
     None),
    ([], "the file: expected an object with \"schema\", \"ops\", found []"),
    ({"ops": []}, "field 'schema': expected demo/N, missing"),
    ({"schema": "demo/x", "ops": []}, "field 'schema': expected demo/N, found \"demo/x\""),
    ({"schema": "demo/1", "ops": None}, "field 'ops': expected a list, each an object with \"op\", found null"),
    ({"schema": "demo/1", "ops": [{"op": 0}, {"op": True}]}, "field 'ops[1].op': expected an integer, found true"),
    ({"schema": "demo/1", "ops": [{"op": 0, "name": 7}]}, "field 'ops[0].name': expected a string, found 7"),
    ({"schema": "demo/1", "ops": [], "cycles": "many"}, "field 'cycles': expected a number, found \"many\""),
    ({"schema": "demo/1", "ops": [], "figures": {"a": 1, "b": "x" * 60}},
     "field 'figures.b': expected an integer, found \"" + "x" * 36 + "..."),
    ({"schema": "demo/1", "ops": [], "flag": 1}, "field 'flag': expected true or false, found 1"),
])
def test_first_wrong_field_is_named(value, message):
    assert schema.problem(value, SHAPE) == message


def test_files_are_named_with_their_flag(tmp_path):
    good, bad, broken = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "broken.json"
    good.write_text('{"schema": "demo/2", "ops": [{"op": 1}]}')
    bad.write_text('{"schema": "demo/2", "ops": [{"op": "one"}]}')
    broken.write_text('{"schema": ')
    assert schema.load(good, SHAPE, "--run") == {"schema": "demo/2", "ops": [{"op": 1}]}
    for path, message in ((bad, f"--run {bad}: field 'ops[0].op': expected an integer, found \"one\""),
                          (broken, f"--run {broken}: not JSON: Expecting value"),
                          (tmp_path / "none.json", f"--run {tmp_path / 'none.json'}: cannot read it: No such file")):
        with pytest.raises(UsageError) as error:
            schema.load(path, SHAPE, "--run")
        assert str(error.value).startswith(message), str(error.value)


def test_a_field_of_any_value_may_be_null_but_not_missing():
    shape = {"how": object}
    assert schema.problem({"how": None}, shape) is None and schema.problem({"how": [1]}, shape) is None
    assert schema.problem({}, shape) == "field 'how': expected anything, missing"
