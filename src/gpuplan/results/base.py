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


# JSON scalars pass `plain` as they are: checked first, as most values of a result are numbers
_SCALARS = (float, int, str, bool)
# each result class's fields in order, with whether a None leaves the field out: read once per class
_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def plain(value: Any) -> Any:
    """`value` as JSON-ready data: results by their `to_dict()`, containers item by item."""
    if value is None or isinstance(value, _SCALARS):
        return value
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
        spec = _FIELDS.get(type(self))
        if spec is None:
            spec = _FIELDS[type(self)] = tuple((f.name, bool(f.metadata.get(_OMIT_NONE))) for f in fields(self))
        out: dict[str, Any] = {}
        for name, omit_none in spec:
            value = getattr(self, name)
            if value is None:
                if not omit_none:
                    out[name] = None
            else:
                out[name] = value if isinstance(value, _SCALARS) else plain(value)
        return out
