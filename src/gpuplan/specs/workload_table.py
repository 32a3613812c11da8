"""The workload schema's keys as the table the fast reader uses (specs/workload.py): one row per
key, in the schema's order, [name, kind, default, optional, choices, ge, gt, le, lt], derived from
the pydantic model (specs/workload_schema.py) and kept as package data (data/workload_fields.json),
so that reading a workload need not import pydantic. `python -m gpuplan.specs.workload_table
--write` rewrites it after a schema change; `--check` (and tests/test_workload_fast.py) fails while
it is stale.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from pathlib import Path
from typing import Any, Final, Literal, Union

from gpuplan.specs.workload_schema import WorkloadSchema

# the field metadata the fast reader understands: bounds, and the JSON schema's own annotation
_KNOWN_METADATA: Final = frozenset({"Ge", "Gt", "Le", "Lt", "WithJsonSchema"})
# the schema's configuration the fast reader mirrors (extra keys refused, frozen, text stripped)
CONFIG: Final = {"extra": "forbid", "frozen": True, "str_strip_whitespace": True}

PATH: Final = Path(__file__).resolve().parent.parent / "data" / "workload_fields.json"


def _kind(annotation: Any) -> tuple[str, bool, list[str] | None]:
    """(kind, optional, choices) of one field's annotation."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    optional = type(None) in args
    rest = [a for a in args if a is not type(None)]
    if len(rest) == 1 and typing.get_origin(rest[0]) is Literal:
        return "literal", optional, list(typing.get_args(rest[0]))
    names = {
        getattr(a, "__name__", str(a)) if typing.get_origin(a) is None else str(typing.get_origin(a).__name__)
        for a in rest
    }
    kinds = {frozenset({"int"}): "int", frozenset({"float"}): "float", frozenset({"bool"}): "bool",
             frozenset({"str"}): "str", frozenset({"str", "list"}): "targets", frozenset({"str", "dict"}): "have"}  # fmt: skip
    kind = kinds.get(frozenset(names))
    if kind is None:
        raise TypeError(f"no fast-reader kind for {annotation!r}: extend workload_table._kind and workload._check")
    return kind, optional, None


def rows() -> list[list[Any]]:
    """The table, from the schema."""
    out = []
    for name, field in WorkloadSchema.model_fields.items():
        kind, optional, choices = _kind(field.annotation)
        bounds = {b: None for b in ("ge", "gt", "le", "lt")}
        if field.default_factory is not None:
            raise TypeError(f"{name}: a default factory, which the fast reader does not run")
        for meta in field.metadata:
            if type(meta).__name__ not in _KNOWN_METADATA:  # a constraint the fast reader would not check
                raise TypeError(f"{name}: {meta!r} is no bound the fast reader checks: extend workload._check")
            for b in bounds:
                if getattr(meta, b, None) is not None:
                    bounds[b] = getattr(meta, b)
        out.append([name, kind, field.default, optional, choices, *bounds.values()])
    return out


def text() -> str:
    return "[\n" + ",\n".join(json.dumps(r) for r in rows()) + "\n]\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--write"]:
        PATH.write_text(text())
        return 0
    if PATH.read_text() != text():
        sys.stderr.write(f"{PATH.name} is stale: run python -m gpuplan.specs.workload_table --write\n")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
