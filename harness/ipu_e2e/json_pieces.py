"""Large JSON read, written and gzip-compressed in pieces of about 128 KiB.
json.loads, json.dumps and zlib are single C calls that hold the
interpreter for as long as the document takes (the full ViT's 68 MB
placement report: 1.6 s to read and 1.3 s to write and compress on a
loaded machine), and Python runs a signal's handler only between such
calls, so a Ctrl-C waited for them; in pieces, it waits for one piece (a
few milliseconds).  loads(text) returns what json.loads(text) returns;
dumps(value) is json.dumps(value, separators=(",", ":"), allow_nan=False)
and gzip(text) gzip.compress(text.encode(), 6, mtime=0) (zlib's gzip
stream), byte for byte.

Reading: an object too large for one piece is walked key by key; an array,
in runs of elements parsed in one call each, cut at a comma about a piece
on (a comma inside an element or a string leaves the run unparseable, and
the next is tried); a run that reaches past the array's end stops there.
"""
import gc
import json
import zlib

PIECE = 1 << 17  # characters parsed, written or compressed per call (a few milliseconds' work)
TRIES = 8  # commas tried to end a run of array elements before one element is read alone
_SPACE = " \t\n\r"
# What follows the last character of an array element, by its first: where a run may be cut.
_ENDS = {"[": "],", "{": "},", '"': '",'}
_ENCODERS = {allow: json.JSONEncoder(separators=(",", ":"), allow_nan=allow).encode for allow in (False, True)}


class _Reader:
    def __init__(self, text, piece, parse_constant):
        self.text, self.piece = text, piece
        self.decoder = json.JSONDecoder(parse_constant=parse_constant)

    def space(self, i):
        text = self.text
        while i < len(text) and text[i] in _SPACE:
            i += 1
        return i

    def error(self, message, i):
        raise json.JSONDecodeError(message, self.text, i)

    def window(self, i, size):
        """raw_decode of the value at i if it ends within size characters: (value, end) or None."""
        try:
            value, end = self.decoder.raw_decode(self.text[i:i + size])
        except json.JSONDecodeError:
            return None
        return value, i + end

    def value(self, i):
        """(the value starting at i, the index after it)."""
        first = self.text[i:i + 1]
        if first not in ("{", "["):
            try:
                return self.decoder.raw_decode(self.text, i)
            except json.JSONDecodeError as error:
                self.error(error.msg, error.pos)
        small = self.window(i, self.piece)
        if small is not None:
            return small
        return self.object(i) if first == "{" else self.array(i)

    def object(self, i):
        text, result = self.text, {}
        i = self.space(i + 1)
        if text[i:i + 1] == "}":
            return result, i + 1
        while True:
            if text[i:i + 1] != '"':
                self.error("Expecting property name enclosed in double quotes", i)
            key, i = self.value(i)
            i = self.space(i)
            if text[i:i + 1] != ":":
                self.error("Expecting ':' delimiter", i)
            result[key], i = self.value(self.space(i + 1))
            i = self.space(i)
            if text[i:i + 1] == ",":
                i = self.space(i + 1)
            elif text[i:i + 1] == "}":
                return result, i + 1
            else:
                self.error("Expecting ',' delimiter", i)

    def run(self, i):
        """Elements from i parsed in one call: (elements, the index after the run, whether the array ended
        in it: then after its "]", else after the comma that ended the run); None when no run parses."""
        text = self.text
        ends = _ENDS.get(text[i:i + 1], ",")
        limit = min(len(text), i + 2 * self.piece)
        found = text.find(ends, i + self.piece, limit)
        for _ in range(TRIES):
            if found == -1:  # no comma to cut at: the rest of the array, if it ends within the limit
                try:
                    elements, end = self.decoder.raw_decode("[" + text[i:limit])
                except json.JSONDecodeError:
                    return None
                return elements, i + end - 1, True
            cut = found + len(ends) - 1
            source = "[" + text[i:cut] + "]"
            try:
                elements, end = self.decoder.raw_decode(source)
            except json.JSONDecodeError:
                found = text.find(ends, found + 1, limit)
                continue
            if end < len(source):  # the array's own "]" came first
                return elements, i + end - 1, True
            return elements, cut + 1, False
        return None

    def array(self, i):
        text, result = self.text, []
        i = self.space(i + 1)
        if text[i:i + 1] == "]":
            return result, i + 1
        while True:  # at an element: the first, or one after a comma
            if text[i:i + 1] == "]":
                self.error("Expecting value", i)
            ran = self.run(i)
            if ran is not None:
                elements, i, closed = ran
                result.extend(elements)
                if closed:
                    return result, i
                i = self.space(i)
                continue
            item, i = self.value(i)  # an element larger than a piece: read alone, in pieces
            result.append(item)
            i = self.space(i)
            if text[i:i + 1] == ",":
                i = self.space(i + 1)
            elif text[i:i + 1] == "]":
                return result, i + 1
            else:
                self.error("Expecting ',' delimiter", i)


def loads(text, parse_constant=None, piece=PIECE):
    """json.loads(text, parse_constant=parse_constant), in pieces of about `piece` characters."""
    if len(text) <= piece:
        return json.loads(text, parse_constant=parse_constant)
    # Parsing makes no reference cycles: collections during it free nothing, and
    # walked the growing document again and again (json.loads of the ViT's
    # placement report: 2.3 s, 0.8 s without them).
    collecting = gc.isenabled()
    gc.disable()
    try:
        reader = _Reader(text, piece, parse_constant)
        value, end = reader.value(reader.space(0))
        end = reader.space(end)
        if end != len(text):
            reader.error("Extra data", end)
        return value
    finally:
        if collecting:
            gc.enable()


def pieces(value, allow_nan=False, piece=PIECE):
    """The text of dumps(value, allow_nan), in pieces of about `piece` characters (str)."""
    encode = _ENCODERS[allow_nan]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        yield "{"
        for n, (key, item) in enumerate(value.items()):
            yield ("," if n else "") + encode(key) + ":"
            yield from pieces(item, allow_nan, piece)
        yield "}"
    elif isinstance(value, (list, tuple)):
        yield "["
        i, step = 0, 16
        while i < len(value):
            if step == 1 and isinstance(value[i], (dict, list, tuple)):  # an element larger than a piece
                yield "," if i else ""
                yield from pieces(value[i], allow_nan, piece)
                i, step = i + 1, 2
                continue
            text = encode(value[i:i + step])[1:-1]
            yield ("," if i else "") + text
            i += step
            step = max(1, min(2 * step, step * piece // max(1, len(text))))
        yield "]"
    else:
        yield encode(value)


def dumps(value, allow_nan=False, piece=PIECE):
    """json.dumps(value, separators=(",", ":"), allow_nan=allow_nan), written in pieces."""
    return "".join(pieces(value, allow_nan, piece))


def gzip(text, level=6, piece=PIECE):
    """gzip.compress(text.encode(), level, mtime=0) for an ASCII str, compressed in pieces."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    out = [compressor.compress(text[i:i + piece].encode("ascii")) for i in range(0, len(text), piece)]
    out.append(compressor.flush())
    return b"".join(out)
