"""Device profiles: a name from fixtures/profiles/ (c600, tiles4, tiles16,
tiles64) or a path to a profile JSON file, with an optional tile override,
resolved by the library into a complete canonical profile.
"""
from pathlib import Path

from . import files
from .native import REPO

# The c600 profile's figure for device_bytes, for a replay whose profile the package holds.
C600_BYTES = 1472 * (0xE8000 - 0x4C000 - 1104)
PROFILE_BYTES = 1 << 20

PROFILE_DIR = REPO / "fixtures" / "profiles"


class ProfileError(Exception):
    """A profile that cannot be read; the message names the file or name."""


def available():
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


def load(ctx, spec="c600", tiles=0):
    path = Path(spec)
    if not path.suffix and not path.exists():
        path = PROFILE_DIR / f"{spec}.json"
        if not path.exists():
            raise ProfileError(f"--device: unknown profile '{spec}'; expected one of "
                               f"{', '.join(available())} or a path to a profile JSON file")
    try:
        text = files.read_text(path, "--device", PROFILE_BYTES)
        files.parse_json(text, f"--device {path}")
    except files.InputError as error:
        raise ProfileError(f"{error} (expected a profile JSON file)") from None
    from .native import IpuError
    try:
        return ctx.resolve_profile(text, tiles)
    except IpuError as error:
        raise ProfileError(f"--device: {path}: {error.message}") from None


def device_bytes(profile):
    """What the device of a resolved profile holds: its tiles times each tile's accessible SRAM.  No
    value a model or an array gives may be larger on the host (profile None: the c600's figure)."""
    if profile is None:
        return C600_BYTES
    return profile["tiles"] * (profile["sram_end"] - profile["inaccessible_tail"] - profile["sram_base"])
