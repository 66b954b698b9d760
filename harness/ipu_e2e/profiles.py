"""Device profiles: a name from fixtures/profiles/ (c600, tiles4, tiles16,
tiles64) or a path to a profile JSON file, with an optional tile override,
resolved by the library into a complete canonical profile.
"""
import json
from pathlib import Path

from .native import REPO

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
        text = path.read_text()
        json.loads(text)
    except OSError as error:
        raise ProfileError(f"--device: cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ProfileError(f"--device: {path} is not UTF-8 text (byte 0x{error.object[error.start]:02x} at "
                           f"offset {error.start}): expected a profile JSON file") from None
    except json.JSONDecodeError as error:
        raise ProfileError(f"--device: {path} is not valid JSON: {error}") from None
    from .native import IpuError
    try:
        return ctx.resolve_profile(text, tiles)
    except IpuError as error:
        raise ProfileError(f"--device: {path}: {error.message}") from None
