"""A workload: what the user wants to run, read from a workload YAML file or from CLI flags.

Keys and defaults are documented in docs/workload.md (generated from the schema); the extra keys
(optimizer variants, offload, LoRA targets, attention kernel, loss, serving) say what the estimators
must know to be exact. Values are validated once, with one clear message per bad key; the
estimators then trust them. YAML is read with the bounded safe loader of gpuplan.safeio only.

`Workload` holds a validated workload without importing pydantic (~100 ms of a command's start on
this project's 2-core machine). The pydantic model in specs/workload_schema.py is the authority on
input: the reader here takes the common, unambiguous input (the right Python types within the
bounds; the names people write through the same before-validators) from a table derived from that
model (data/workload_fields.json, `python -m gpuplan.specs.workload_table --write`, checked by
tests/test_workload_fast.py) and hands anything else to the model, which accepts it or words the
error. The name tables (tasks, optimizer / attention / LoRA-target names) and the per-task key
scopes (check_keys_apply) live in specs/workload_keys.py; this module re-exports them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from gpuplan.errors import InvalidSettingError, did_you_mean
from gpuplan.safeio import (
    MAX_TABLE_BYTES,
    MAX_YAML_BYTES,
    NUMBER_TEXT,
    check_numbers,
    load_yaml,
    read_capped,
    whole_number,
)
from gpuplan.specs.workload_derived import (
    BEFORE,
    WorkloadDerived,
    check_consistent,
    check_framework,
    cluster_gpus,
    framework_filled,
)
from gpuplan.specs.workload_derived import (
    DEFAULT_HOST_MEMORY_BANDWIDTH_GBPS as DEFAULT_HOST_MEMORY_BANDWIDTH_GBPS,
)
from gpuplan.specs.workload_keys import ADAPTER_ONLY as ADAPTER_ONLY
from gpuplan.specs.workload_keys import CHECKPOINTING as CHECKPOINTING
from gpuplan.specs.workload_keys import ENGINE_ONLY as ENGINE_ONLY
from gpuplan.specs.workload_keys import GRAPHICS_ONLY as GRAPHICS_ONLY
from gpuplan.specs.workload_keys import GRAPHICS_TASKS as GRAPHICS_TASKS
from gpuplan.specs.workload_keys import INFERENCE_ONLY as INFERENCE_ONLY
from gpuplan.specs.workload_keys import LLM_TASKS as LLM_TASKS
from gpuplan.specs.workload_keys import OPTIMIZERS as OPTIMIZERS
from gpuplan.specs.workload_keys import TRAINING_ONLY as TRAINING_ONLY
from gpuplan.specs.workload_keys import TRAINING_TASKS as TRAINING_TASKS
from gpuplan.specs.workload_keys import check_keys_apply as check_keys_apply

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

# one row per key, in the schema's order: [name, kind, default, optional, choices, ge, gt, le, lt]
# (kinds: int, float, bool, str, literal, targets (str or list of str), have (str or {name: count}))
FIELD_TABLE: Final[list[list[Any]]] = json.loads(files("gpuplan.data").joinpath("workload_fields.json").read_text())
FIELD_NAMES: Final = tuple(row[0] for row in FIELD_TABLE)
DEFAULTS: Final = {row[0]: row[2] for row in FIELD_TABLE}
_ROWS: Final = {row[0]: row for row in FIELD_TABLE}

# integer keys: "1e4" and 1.0e+4 are read as 10000 there, "1.5e0" is refused (safeio.whole_number)
_INT_KEYS: Final = frozenset(row[0] for row in FIELD_TABLE if row[1] == "int")


class _SchemaFields:
    """`Workload.model_fields`: the schema's fields (pydantic FieldInfo), loaded on first use."""

    def __get__(self, obj: object, owner: type) -> dict[str, FieldInfo]:
        from gpuplan.specs.workload_schema import WorkloadSchema

        return dict(WorkloadSchema.model_fields)


class Workload(WorkloadDerived):
    """One validated workload (its keys: docs/workload.md), immutable. Sizes are per GPU:
    `batch_size` is the per-GPU micro-batch. `Workload(**keys)` validates as the schema does (a
    pydantic ValidationError for bad keys); `make_workload` gives one InvalidSettingError line."""

    if TYPE_CHECKING:
        _set: set[str]

    __slots__ = ("_set",)  # the keys the input gave; the values live in __dict__, in the schema's order

    model_fields = _SchemaFields()

    def __init__(self, **data: Any) -> None:
        w = _fast(data) or _from_schema(data)
        object.__setattr__(self, "__dict__", dict(w.__dict__))
        object.__setattr__(self, "_set", w._set)

    @classmethod
    def model_validate(cls, data: Mapping[str, Any]) -> Workload:
        return _fast(dict(data)) or _from_schema(dict(data))

    @classmethod
    def model_json_schema(cls, **kwargs: Any) -> dict[str, Any]:
        from gpuplan.specs.workload_schema import WorkloadSchema

        return WorkloadSchema.model_json_schema(**kwargs)

    @classmethod
    def _of(cls, values: dict[str, Any], fields_set: set[str]) -> Workload:
        w = object.__new__(cls)
        object.__setattr__(w, "__dict__", values)
        object.__setattr__(w, "_set", fields_set)
        return w

    @property
    def model_fields_set(self) -> set[str]:
        """The keys the input gave (not those a framework or a default filled)."""
        return self._set

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Workload is immutable: use with_({name}=...) for a changed copy")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Workload is immutable: {name} stays")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workload) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__.values()))

    def __repr__(self) -> str:
        return f"Workload({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Workload._of, (dict(self.__dict__), set(self._set)))

    def _items(self, exclude_unset: bool, exclude_none: bool, exclude: Iterable[str]) -> Iterator[tuple[str, Any]]:
        skip = set(exclude)
        for k, v in self.__dict__.items():
            if k in skip or (exclude_unset and k not in self._set) or (exclude_none and v is None):
                continue
            yield k, list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v

    def model_dump(
        self, *, exclude_unset: bool = False, exclude_none: bool = False, exclude: Iterable[str] = ()
    ) -> dict[str, Any]:
        """The keys and values (pydantic's model_dump: declaration order; lists and mappings copied)."""
        return dict(self._items(exclude_unset, exclude_none, exclude))

    def model_dump_json(self, *, exclude: Iterable[str] = ()) -> str:
        """The keys and values as compact JSON (pydantic's model_dump_json form)."""
        return json.dumps(self.model_dump(exclude=exclude), separators=(",", ":"), ensure_ascii=False)

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Workload:
        """A copy with `update` applied unvalidated (the caller vouches for it), its keys counted as set."""
        values = dict(self.__dict__)
        values.update(update or {})
        return Workload._of(values, self._set | set(update or ()))


def _from_schema(data: Mapping[str, Any]) -> Workload:
    """Validate with the pydantic schema (raises its ValidationError or a framework's InvalidSettingError)."""
    from gpuplan.specs.workload_schema import WorkloadSchema

    v = WorkloadSchema.model_validate(data)
    return Workload._of({k: getattr(v, k) for k in FIELD_NAMES}, set(v.model_fields_set))


def _check(row: list[Any], v: Any) -> tuple[bool, Any]:
    """(accepted, value) for one key's input after its before-validator: only what the schema takes
    as it is (or an int into a float key, which it widens); anything else is left to the schema."""
    _, kind, _, optional, choices, ge, gt, le, lt = row
    if v is None:
        return optional, None
    if kind == "float" and isinstance(v, str) and NUMBER_TEXT.fullmatch(v):  # a plain decimal, no spaces
        v = float(v)  # YAML 1.1 reads 2.0e10 as a string, which the schema's float reads as a number
    if kind == "int" or kind == "float":
        if isinstance(v, bool) or not isinstance(v, int if kind == "int" else (int, float)):
            return False, None
        v = float(v) if kind == "float" else v
        ok = (
            math.isfinite(v)
            and (ge is None or v >= ge)
            and (gt is None or v > gt)
            and (le is None or v <= le)
            and (lt is None or v < lt)
        )
        return ok, v
    if kind == "bool":
        return isinstance(v, bool), v
    if kind == "literal":
        return isinstance(v, str) and v in choices, v
    if kind == "str" or kind == "have":
        return isinstance(v, str) and v == v.strip(), v
    if kind == "targets":
        if isinstance(v, str):
            return v == v.strip(), v
        return isinstance(v, list) and all(isinstance(x, str) and x == x.strip() for x in v), v
    return False, None


def _fast(data: Mapping[str, Any]) -> Workload | None:
    """The workload `data` validates to, read from the field table, or None where the schema must
    decide (a key it does not know, a type it would convert or refuse, a bound or rule broken, a
    framework's defaults that a cluster's GPU count could change)."""
    if not isinstance(data, dict) or any(k not in _ROWS for k in data):
        return None
    if "cluster" in data and "framework" in data:
        return None
    try:
        data = cluster_gpus(data)
        filled = framework_filled(data)
        given = {**data, **filled} if filled else data
        values = dict(DEFAULTS)
        for k, raw in given.items():
            before = BEFORE.get(k)
            ok, v = _check(_ROWS[k], before(raw) if before is not None else raw)
            if not ok:
                return None
            values[k] = v
        w = Workload._of(values, set(given) - set(filled))
        check_consistent(w)
        check_framework(w)
    except Exception:  # whatever it is, the schema decides, and words the error
        return None
    return w


def describe_error(err: Mapping[str, Any], known_keys: Iterable[str] | None = None) -> str:
    """One line for one pydantic error (an entry of `ValidationError.errors()`), naming the key,
    what it must be and the value received; `known_keys` (default: the workload's) for the hint."""
    loc = ".".join(str(p) for p in err.get("loc", ())) or "workload"
    msg = str(err.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ")
    if err.get("type") == "extra_forbidden":
        keys = list(known_keys) if known_keys is not None else list(FIELD_NAMES)
        hint = did_you_mean(loc, keys)
        return f"Unknown workload key {loc!r}.{hint} Known keys: {', '.join(keys)}."
    if err.get("type") == "missing":
        return f"The workload needs {loc!r} (e.g. model: llama-3.1-8b)."
    value = err.get("input")
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    got = "" if "Got" in msg or isinstance(value, dict) else f" Got {shown}."
    if loc == "workload":  # a rule across keys: its message names them
        return msg.rstrip(".") + "."
    return f"The {loc!r} key: {msg.rstrip('.')}{'' if msg.endswith(('?', '!')) else '.'}{got}"


def make_workload(data: Mapping[str, Any]) -> Workload:
    """Validate a mapping of workload keys; raise InvalidSettingError with one clear line."""
    if not isinstance(data, Mapping):
        raise InvalidSettingError(f"A workload must be a mapping of keys to values. Got {type(data).__name__}.")
    clean = {str(k).strip().replace("-", "_"): v for k, v in data.items() if v is not None}
    check_numbers(clean, "workload")  # NaN, infinity or a 300-digit integer: one line naming the key
    clean = {k: whole_number(v, f"The {k!r} key") if k in _INT_KEYS else v for k, v in clean.items()}
    fast = _fast(clean)
    if fast is not None:
        return fast
    from pydantic import ValidationError

    try:
        return _from_schema(clean)
    except ValidationError as exc:
        raise InvalidSettingError(describe_error(exc.errors()[0])) from None


def read_user_text(path: Path, what: str, hint: str = "", max_bytes: int = MAX_TABLE_BYTES) -> str:
    """A user's text file, or one InvalidSettingError line naming it (missing, not a regular file,
    over `max_bytes`, unreadable, not UTF-8): see gpuplan.safeio.read_capped."""
    return read_capped(path, what, max_bytes, hint)


def safe_yaml(text: str, name: str) -> Any:
    """YAML read with the bounded safe loader (gpuplan.safeio.load_yaml): a syntax error, an alias
    bomb, deep nesting or a non-finite number is one line naming the file."""
    from gpuplan.specs.tomlcache import plain_document

    # the text's reading from the cache where it was read before: PyYAML loads only for new text
    data = plain_document(text, "yaml", lambda t: load_yaml(t, name))
    check_numbers(data, name)  # as load_yaml does: an entry is read back as it was stored
    return data


def read_workload_file(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Workload:
    """Read a workload YAML file (safe loader only); CLI flags in `overrides` win."""
    p = Path(path)
    data = safe_yaml(read_user_text(p, "workload file", "Pass a YAML file or a model name.", MAX_YAML_BYTES), p.name)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidSettingError(f"{p.name} must hold a mapping of workload keys (model: ..., task: ...).")
    merged = dict(data)
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return make_workload(merged)
