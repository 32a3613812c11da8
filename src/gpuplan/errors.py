"""The error hierarchy: every error a user can cause is a GpuplanError with a one-line message.

The command line prints the message alone and exits with code 2; a library caller can catch the
kind it cares about. Parse and lookup errors also subclass ValueError / KeyError (pint's habit),
so generic handlers still work.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final


class GpuplanError(Exception):
    """Base class of every error caused by input."""

    def __str__(self) -> str:  # KeyError quotes its message; we never want that
        return str(self.args[0]) if self.args else self.__class__.__name__


class UnknownNameError(GpuplanError, KeyError):
    """A GPU, model or other name that is not in a catalog."""


class UnknownGPUError(UnknownNameError):
    """A GPU name that matches no catalog row or alias."""


class UnknownModelError(UnknownNameError):
    """A model that is neither a bundled preset, a readable config.json, nor a reachable hub id."""


class CatalogError(GpuplanError, ValueError):
    """A malformed catalog file (bundled or the user's own)."""


class ModelConfigError(GpuplanError, ValueError):
    """A config.json that cannot be read, or that describes an unsupported architecture."""


class InvalidSettingError(GpuplanError, ValueError):
    """A setting outside its allowed values."""


# difflib's ratio() is quadratic in the lengths compared; no GPU or model name is near this long
# (the longest bundled label has 55 characters), so a longer name or choice is not a typo of one
_MAX_COMPARED: Final = 100


def did_you_mean(name: str, choices: Iterable[str], n: int = 3) -> str:
    """' Did you mean: a, b?' for the closest choices, or '' when none is close (or the name is
    over _MAX_COMPARED characters: a 60 KB name is answered at once)."""
    if len(name) > _MAX_COMPARED:
        return ""
    pool = sorted({c for c in choices if len(c) <= _MAX_COMPARED})
    lowered = {c.lower(): c for c in pool}
    import difflib  # only when a name is wrong

    close = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    # substring matches catch abbreviations that difflib scores low ("a100" -> "a100 sxm4 80gb")
    if not close:
        close = [c for c in lowered if name.lower() in c][:n]
    return f" Did you mean: {', '.join(lowered[c] for c in close)}?" if close else ""
