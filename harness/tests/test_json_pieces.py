"""test_json_pieces.py: large JSON read, written and compressed in pieces
(json_pieces, so a signal's handler runs between them) gives exactly what
json.loads, json.dumps and gzip.compress give: random documents of every
shape, read with pieces of one to a few dozen characters so runs, cuts
inside strings and nested elements, and elements larger than a piece all
occur; broken documents are refused as json.loads refuses them; and the
full ViT-sized shapes (columns of hundreds of thousands of numbers and of
small lists) are read with no call longer than a piece's work.
"""
import gzip
import json
import random

from hypothesis import given, settings, strategies as st

from ipu_e2e import json_pieces

SCALARS = (st.none() | st.booleans() | st.integers(-10 ** 12, 10 ** 12)
           | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(alphabet=st.sampled_from('ab,]}[{"\\ \n:\u00e9\u20ac'), max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=12)
                      | st.dictionaries(st.text(alphabet='ab,"]}', max_size=4), inner, max_size=6), max_leaves=120)


@settings(max_examples=1500, deadline=None)
@given(VALUES, st.integers(1, 64), st.sampled_from([None, 2]))
def test_the_same_as_json(value, piece, indent):
    text = json.dumps(value, indent=indent)
    assert json_pieces.loads(text, piece=piece) == json.loads(text)
    compact = json.dumps(value, separators=(",", ":"), allow_nan=False)
    assert json_pieces.dumps(value, piece=piece) == compact
    assert json_pieces.gzip(compact, piece=piece) == gzip.compress(compact.encode(), 6, mtime=0)


def test_broken_documents_are_refused_as_json_refuses_them():
    shuffle = random.Random(20240)
    refused = 0
    for _ in range(3000):
        rows = [list(range(shuffle.randint(0, 20))) for _ in range(shuffle.randint(1, 20))]
        text = json.dumps({"a": rows, "b": "x,y]", "c": {"d": rows, "e": ["p,", "q"]}})
        at = shuffle.randrange(len(text))
        broken = text[:at] + shuffle.choice(["", ",", "]", "[", '"', "x", "}", "{"]) + text[at + 1:]
        try:
            expected = json.loads(broken)
        except ValueError:
            expected = ValueError
        try:
            got = json_pieces.loads(broken, piece=shuffle.randint(1, 40))
        except ValueError:
            got = ValueError
        assert got == expected, broken
        refused += expected is ValueError
    assert refused > 1000  # most mutations break the document


def test_nan_stays_refused():
    text = json.dumps({"a": [1.0] * 100 + [float("nan")]})

    def refuse(name):
        raise ValueError(f"{name} is not a JSON number")
    try:
        json_pieces.loads(text, parse_constant=refuse, piece=16)
    except ValueError as error:
        assert "NaN" in str(error)
    else:
        raise AssertionError("NaN was read")


def test_report_shapes_in_short_calls():
    """Columns as the placement report has them (about 16 MB of text): every call into the parser stays a
    piece's work, and the result is json.loads's."""
    shuffle = random.Random(7)
    report = {"kind": "placement", "allocations": {"tile": [shuffle.randrange(1472) for _ in range(300000)],
                                                   "name": [f"t{n}, op" for n in range(100000)]},
              "listing": {"buffers": [[shuffle.randrange(10 ** 6) for _ in range(shuffle.randint(0, 3))]
                                      for _ in range(300000)]},
              "footprint": [[shuffle.randrange(624 * 1024) for _ in range(700)] for _ in range(200)]}
    text = json.dumps(report)
    calls = []
    decoder = json.JSONDecoder

    class Counted(decoder):
        def raw_decode(self, s, idx=0):  # records the text each call read
            try:
                value, end = super().raw_decode(s, idx)
            except ValueError:
                calls.append(len(s) - idx)
                raise
            calls.append(end - idx)
            return value, end
    json.JSONDecoder = Counted
    try:
        assert json_pieces.loads(text) == report
    finally:
        json.JSONDecoder = decoder
    # Each call read at most about two pieces of text, so none held the interpreter for long.
    assert len(calls) > len(text) // (2 * json_pieces.PIECE) and max(calls) <= 2 * json_pieces.PIECE + 2, \
        (len(calls), max(calls))
