"""The base of every typed result: a frozen dataclass whose `to_dict()` is the JSON the CLI prints
with `--json` and the web API returns (one serialiser for every face).

Fields serialise in their declared order under their own names. A field declared with `band()`
or `optional()` is left out when it is None (a validation range that no residuals cover, a key
that only one kind of job has); every other field is always written, None as null.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

_OMIT_NONE = "omit_none"


def optional(default: Any = None) -> Any:
    """A field left out of `to_dict()` when it is None."""
    return field(default=default, metadata={_OMIT_NONE: True})


band = optional  # a validation range end (x_low / x_high): absent where no residuals cover the figure


def plain(value: Any) -> Any:
    """`value` as JSON-ready data: results by their `to_dict()`, containers item by item."""
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, kw_only=True)
class Result:
    """A typed answer: attributes to read (`r.memory.per_gpu_bytes`), `to_dict()` to print."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of this answer (the `--json` output and the web API's body)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get(_OMIT_NONE):
                continue
            out[f.name] = plain(value)
        return out
