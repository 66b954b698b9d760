"""test_malformed_packages.py: the loader refuses every malformed package in
fixtures/packages (written by fixtures/packages/make_malformed.py) with exit
code 2 and a message naming the defect, replays the valid fixture, and
survives random corruption of a valid package: loading either succeeds or
raises IpuError with status MALFORMED, never another error or a crash, and
reading the file without loading it (Package.peek_file) refuses no package
the loader takes and says of every package it takes what the loaded one
says.  A replayed package whose streams its recorded workload cannot hold is
refused by their sizes before it is loaded.  The
random cases take their seed from IPU_TEST_SEED (default: the clock); the seed
is printed on failure and, in case of a crash, left in pytest's cache
(.pytest_cache/v/ipu_e2e/malformed-fuzz-seed).
"""
import os
import random
import struct
import time
import zlib
from pathlib import Path

import pytest

from ipu_e2e.native import MALFORMED, Context, IpuError, Package

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "packages"
VALID = FIXTURES / "valid-stress-4tiles.pkg"
MALFORMED_FIXTURES = sorted(FIXTURES.glob("*malformed*.pkg"))
HEADER_SIZE = 64

# Fixture -> words the loader's message must contain (independent of the
# generator's own table: this is what a user must be told).
EXPECTED = {
    "malformed-truncated.pkg": ["truncated"],
    "malformed-truncated-header.pkg": ["truncated", "header"],
    "malformed-padded.pkg": ["padded"],
    "malformed-bad-magic.pkg": ["magic"],
    "malformed-bad-version.pkg": ["version 99"],
    "malformed-bad-checksum.pkg": ["checksum"],
    "malformed-header-reserved.pkg": ["reserved"],
    "malformed-section-outside-file.pkg": ["'data'", "outside the file"],
    "malformed-duplicate-section.pkg": ["'profile'", "twice"],
    "malformed-overlapping-sections.pkg": ["'meta'", "overlaps"],
    "malformed-missing-section.pkg": ["'captures'", "missing"],
    "malformed-profile-digest.pkg": ["profile digest"],
    "malformed-meta-not-object.pkg": ["meta", "JSON object"],
    "malformed-segment-outside-sram.pkg": ["segment", "outside accessible SRAM"],
    "malformed-overlapping-segments.pkg": ["segments", "overlap", "tile 0"],
    "malformed-segment-in-runtime-state.pkg": ["code segment", "runtime state"],
    "malformed-descriptor-in-runtime-state.pkg": ["slot 2", "tile 0", "runtime state"],
    "malformed-descriptor-in-kernel-code.pkg": ["slot 2", "tile 0", "kernel code"],
    "malformed-slot-table-in-data.pkg": ["slot table of tile 0", "data segment"],
    "malformed-code-outside-region0.pkg": ["code segment", "outside region 0"],
    "malformed-unknown-kernel-entry.pkg": ["code segment", "unknown kernel entry 999"],
    "malformed-compute-unknown-kernel.pkg": ["compute list", "unknown kernel entry 999"],
    "malformed-exchange-continues-nothing.pkg": ["exchange table", "row 0 continues", "the first row"],
    "malformed-exchange-unknown-peer.pkg": ["exchange table", "from tile 9"],
    "malformed-host-outside-aperture.pkg": ["host output", "outside the host aperture"],
    "malformed-host-strided-past-aperture.pkg": ["host output", "2 rows", "outside the host aperture"],
    "malformed-host-rows-overlap.pkg": ["host output", "overlap on the tile"],
    "malformed-patch-target-in-data.pkg": ["patch list", "data segment"],
    "malformed-repeat-body.pkg": ["Repeat body", "runs past"],
    "malformed-slot-out-of-range.pkg": ["slot 7", "4 slots"],
    "malformed-repeat-for-ever.pkg": ["executes more than 16777216 control ops"],
    "malformed-record-outside-data.pkg": ["record 0", "data section"],
    "malformed-allocation-unknown-kind.pkg": ["allocation 0", "kind 9"],
    "malformed-allocation-shape-outside-strings.pkg": ["allocation 0", "shape offset", "outside the string table"],
    # A stream larger than the device (4 tiles of 637,872 accessible bytes).
    "malformed-output-stream-4gib.pkg": ["stream 'unicast-standard'", "size 4294967296", "expected 1..2551488"],
    "malformed-output-stream-6gib.pkg": ["stream 'unicast-standard'", "size 6442450944", "expected 1..2551488"],
    "malformed-output-stream-1tib.pkg": ["stream 'unicast-standard'", "size 1099511627776",
                                         "expected 1..2551488"],
}
SANITIZER_WORDS = ("Traceback", "AddressSanitizer", "LeakSanitizer", "runtime error:")


def test_enough_fixtures():
    assert len(MALFORMED_FIXTURES) >= 10, f"only {len(MALFORMED_FIXTURES)} malformed fixtures in {FIXTURES}"
    names = {p.name for p in MALFORMED_FIXTURES}
    missing = sorted(set(EXPECTED) - names)
    assert not missing, f"fixtures missing (run fixtures/packages/make_malformed.py): {missing}"


@pytest.mark.parametrize("path", MALFORMED_FIXTURES, ids=[p.name for p in MALFORMED_FIXTURES])
def test_malformed_fixture_refused(cli, path):
    assert path.name in EXPECTED, f"{path.name}: no expected message in this test's table"
    result = cli("--package", path, "--quiet")
    for word in SANITIZER_WORDS:
        assert word not in result.stderr, f"{path.name}: '{word}' in stderr:\n{result.stderr}"
    assert result.returncode == 2, (f"{path.name}: exit code {result.returncode}, expected 2\n"
                                    f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    assert "PASS" not in result.stdout
    message = result.stderr.strip()
    assert "malformed package" in message, message
    for word in EXPECTED[path.name]:
        assert word in message, f"{path.name}: the message does not contain '{word}': {message}"


def test_valid_fixture_replays(cli):
    result = cli("--package", VALID, "--quiet")
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "PASS" in result.stdout
    assert not result.stderr.strip(), result.stderr


# ---- random corruption, loaded in-process ---------------------------------

CASES = 300
INTERESTING = (0, 1, 2, 3, 4, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000,
               0xFFFFFFFE, 0xFFFFFFFF)


def recompute_header(data):
    """Total size and CRC-32 made consistent again (when the header is whole)."""
    if len(data) >= HEADER_SIZE:
        struct.pack_into("<Q", data, 16, len(data))
        struct.pack_into("<I", data, 24, zlib.crc32(bytes(data[HEADER_SIZE:])))


def corrupt(rng, base, fix):
    """Truncate and/or damage bytes or words; returns (bytes, description)."""
    data = bytearray(base)
    done = []
    mode = rng.choice(("truncate", "damage", "damage", "both"))
    if mode in ("truncate", "both"):
        cut = rng.randrange(len(data))
        del data[cut:]
        done.append(f"truncate@{cut}")
    if mode in ("damage", "both") and len(data) > 0:
        for _ in range(rng.randint(1, 6)):
            # After the header most of the time: the header's own checks are few.
            lo = HEADER_SIZE if fix and len(data) > HEADER_SIZE and rng.random() < 0.9 else 0
            at = rng.randrange(lo, len(data))
            if rng.random() < 0.5:
                mask = rng.randrange(1, 256)
                data[at] ^= mask
                done.append(f"xor@{at}^{mask:#x}")
            else:
                at &= ~3
                if at + 4 <= len(data):
                    value = rng.choice(INTERESTING) if rng.random() < 0.7 else rng.randrange(1 << 32)
                    struct.pack_into("<I", data, at, value)
                    done.append(f"u32@{at}={value:#x}")
    if fix:
        recompute_header(data)
        done.append("crc recomputed")
    return bytes(data), ", ".join(done)


def test_random_corruption_loads_or_is_malformed(request, tmp_path):
    env = os.environ.get("IPU_TEST_SEED")
    seed = int(env, 0) if env else (time.time_ns() ^ os.getpid()) & 0xFFFFFFFF
    cache = getattr(request.config, "cache", None)
    if cache is not None:  # survives a crash of the process
        cache.set("ipu_e2e/malformed-fuzz-seed", seed)
    rng = random.Random(seed)
    base = VALID.read_bytes()
    ctx = Context()
    Package.load_bytes(ctx, base).close()  # the base itself must load
    peek_path = tmp_path / "case.pkg"
    loaded = rejected = deep = 0
    shallow_words = ("truncated", "bad magic", "version", "checksum", "header size")
    for case in range(CASES):
        fix = case % 2 == 1
        data, what = corrupt(rng, base, fix)
        context = f"seed {seed} (IPU_TEST_SEED={seed}), case {case}: {what}"
        peek_path.write_bytes(data)
        try:
            peeked = Package.peek_file(ctx, peek_path)
        except IpuError as error:
            assert error.status == MALFORMED and str(peek_path) in error.message, f"{context}: {error}"
            peeked = None
        try:
            package = Package.load_bytes(ctx, data)
            info = package.info()
            package.close()
            loaded += 1
            assert peeked is not None, f"{context}: the loader takes a package peek_file refuses"
            assert peeked["tiles"] == info["tiles"] and peeked["meta"] == info["meta"], context
            assert peeked["streams"] == [{k: s[k] for k in ("name", "direction", "size")} for s in info["streams"]], \
                context
        except IpuError as error:
            assert error.status == MALFORMED, f"{context}: status {error.name}: {error.message}"
            assert error.message.strip(), f"{context}: empty message"
            rejected += 1
            if fix and not any(w in error.message for w in shallow_words):
                deep += 1
        except Exception as error:  # noqa: BLE001 - any other exception is the failure
            pytest.fail(f"{context}: {type(error).__name__}: {error}")
    # The recomputed-CRC half must reach the checks past the checksum.
    assert deep >= CASES // 10, (f"seed {seed}: only {deep} of {CASES // 2} recomputed cases reached "
                                 f"the structural checks ({loaded} loaded, {rejected} rejected)")


# ---- streams larger than the recorded workload's ---------------------------

def stream_sized(data, name, size):
    """The package with stream `name` declared `size` bytes (its records left as they were) and the CRC-32
    made consistent, read from the section table as the format documents it (package/format.h)."""
    data = bytearray(data)
    sections = {}
    for i in range(struct.unpack_from("<I", data, 28)[0]):
        kind, _, offset, length = struct.unpack_from("<IIQQ", data, HEADER_SIZE + 24 * i)
        sections[kind] = (offset, length)
    (streams, count), (strings, _) = sections[9], sections[6]  # IPU_SEC_STREAMS, IPU_SEC_STRINGS
    for at in range(streams, streams + count, 16):
        offset = struct.unpack_from("<I", data, at + 4)[0]
        if data[strings + offset:data.index(0, strings + offset)] == name.encode():
            struct.pack_into("<Q", data, at + 8, size)
    recompute_header(data)
    return bytes(data)


def test_replay_refuses_streams_larger_than_the_workload_before_loading(cli, tmp_path):
    """A saved MLP whose parameter stream is declared larger than the workload's w1: the loader would refuse
    the file for its record (the record's bytes no longer match the stream), but the replay refuses it first,
    by the stream's size against the recorded workload, naming the file and the stream; an output stream
    declared at the validator's cap (the device's 4 tiles of 637,872 bytes) likewise."""
    saved = tmp_path / "mlp.pkg"
    done = cli("--workload", "mlp", "--tiles", "4", "--tokens", "8", "--channels", "32", "--hidden", "48",
               "--compile-only", "--save-package", saved, "--quiet")
    assert done.returncode == 0, done.stderr
    ctx = Context()
    with pytest.raises(IpuError, match="record .* for stream 'w1'"):
        Package.load_bytes(ctx, stream_sized(saved.read_bytes(), "w1", 1 << 20))
    for name, size, what in (("w1", 1 << 20, "param stream 'w1' holds 1,048,576 bytes; the recorded workload's "
                                              "parameter 'w1' is 32 x 48 f143, 1,536 bytes"),
                             ("y", 4 * 637872, "output stream 'y' holds 2,551,488 bytes; the recorded workload's "
                                               "output 'y' is 8 x 32 f16, 512 bytes")):
        hostile = tmp_path / f"{name}.pkg"
        hostile.write_bytes(stream_sized(saved.read_bytes(), name, size))
        done = cli("--package", hostile, "--quiet")
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert f"--package {hostile}: {what}" in done.stderr, done.stderr


def test_a_stream_name_that_is_not_utf8_is_refused_read_or_loaded(tmp_path):
    """A stream's name is JSON text wherever it is reported: one that is not UTF-8 is malformed, to the
    loader and to peek_file alike (peek once said 'out of memory' for it)."""
    data = bytearray(VALID.read_bytes())
    sections = {}
    for i in range(struct.unpack_from("<I", data, 28)[0]):
        kind, _, offset, length = struct.unpack_from("<IIQQ", data, HEADER_SIZE + 24 * i)
        sections[kind] = offset
    name = struct.unpack_from("<I", data, sections[9] + 4)[0]  # the first stream's name offset
    data[sections[6] + name] = 0xFF  # IPU_SEC_STRINGS: its first byte
    recompute_header(data)
    path = tmp_path / "latin.pkg"
    path.write_bytes(bytes(data))
    ctx = Context()
    for read in (lambda: Package.load_bytes(ctx, bytes(data)), lambda: Package.peek_file(ctx, path)):
        with pytest.raises(IpuError, match="stream 0: its name is not UTF-8 text") as error:
            read()
        assert error.value.status == MALFORMED
