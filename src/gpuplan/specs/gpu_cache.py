"""The bundled catalog's `GPU`s, kept once validated: every command reads the bundled catalog, and
building the pydantic row models then validating ~70 rows took ~60 ms of CPU at each start on the
project's machine (44 ms to import specs/gpu.py with its models, pydantic's plugin scan included,
then 15 ms to load); reading the converted rows back takes 5-13 ms (the first read in a process
loads hashlib and json too).

The entry is named by the SHA-256 of the bundled files' text and of the code that converts them
(specs/gpu.py and specs/gpu_rows.py), so an edited catalog file or a change to the conversion is
parsed afresh and a stale entry is never read. An entry is read only when every row has exactly
the `GPU` fields with values of their types (finite numbers); anything else (a damaged entry, a
read-only disk, no home) falls back to parsing, whose errors are the parser's own. The folder is
tomlcache's (GPUPLAN_CACHE_DIR; an empty value turns caching off).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from gpuplan.errors import GpuplanError
from gpuplan.safeio import MAX_JSON_BYTES, read_capped, write_atomically
from gpuplan.specs import tomlcache
from gpuplan.specs.gpu import GPU, Source

_VERSION: Final = "1"  # bump when the stored form changes
_CODE: Final = ("gpu.py", "gpu_rows.py")  # the modules whose code decides what a row converts to
_FIELDS: Final = {f.name: str(f.type) for f in dataclasses.fields(GPU)}


def bundled_gpus(texts: Sequence[tuple[str, str]]) -> list[GPU]:
    """The GPUs of the bundled catalog files `texts` ((origin, text) pairs), from the cache where
    these texts were converted by this code before."""
    path = _entry(texts)
    if path is not None:
        try:
            return _decode(json.loads(read_capped(path, "catalog cache entry", MAX_JSON_BYTES)))
        except (OSError, ValueError, KeyError, TypeError, RecursionError, GpuplanError):
            pass  # absent, damaged or hostile: parse afresh
    from gpuplan.specs.gpu_rows import parse_catalog_text

    gpus = [g for origin, text in texts for g in parse_catalog_text(text, origin)]
    if path is not None:
        _store(path, gpus)
    return gpus


def _entry(texts: Iterable[tuple[str, str]]) -> Path | None:
    folder = tomlcache.cache_dir()
    if folder is None:
        return None
    h = hashlib.sha256(f"gpus {_VERSION}\0".encode())
    try:
        for name in _CODE:
            h.update(Path(__file__).with_name(name).read_bytes())
    except OSError:  # the code is not plain files (a zip): nothing to name the entry by
        return None
    for origin, text in texts:
        h.update(f"\0{origin}\0{text}".encode())
    return folder / f"gpus-{h.hexdigest()}.json"


def _store(path: Path, gpus: list[GPU]) -> None:
    sources: dict[str, list[str]] = {}
    rows = []
    for g in gpus:
        row: dict[str, Any] = {name: getattr(g, name) for name in _FIELDS}
        row["aliases"] = list(g.aliases)
        row["sources"] = {}
        for field, s in g.sources.items():
            sid = f"{g.origin}\0{s.key}"  # a key is unique within its file
            sources[sid] = [s.key, s.title, s.url, s.where, s.read.isoformat()]
            row["sources"][field] = sid
        rows.append(row)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"sources": sources, "gpus": rows}, separators=(",", ":"), allow_nan=False)
        write_atomically(path, text, durable=False, mode=None)
    except (OSError, TypeError, ValueError):  # a cache gives up quietly: the next start parses again
        pass


def _number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _strings(v: Any) -> bool:
    return type(v) is list and all(type(x) is str for x in v)


def _table(v: Any) -> bool:  # field -> source id; each id is looked up in the entry's source table
    return type(v) is dict


_BASE: Final[dict[str, Callable[[Any], bool]]] = {
    "str": lambda v: type(v) is str,
    "int": lambda v: type(v) is int,
    "bool": lambda v: type(v) is bool,
    "float": _number,
    "tuple[str, ...]": _strings,
    "Mapping[str, Source]": _table,
    "Mapping[str, float]": lambda v: type(v) is dict and all(_number(x) for x in v.values()),
    "Mapping[str, float | None]": lambda v: type(v) is dict and all(x is None or _number(x) for x in v.values()),
}


def _check(kind: str) -> Callable[[Any], bool]:
    """Whether a value read back has the type of a `GPU` field annotated `kind` (a JSON object's
    keys are always strings). A field of another type stops the import: this table must learn it."""
    base = _BASE[kind.removesuffix(" | None")]
    if kind.endswith(" | None"):
        return lambda v: v is None or base(v)
    return base


_CHECKS: Final = {name: _check(kind) for name, kind in _FIELDS.items()}


def _decode(doc: Any) -> list[GPU]:
    """The GPUs of a cache entry, or ValueError where it is not exactly what `_store` writes."""
    table = {}
    for sid, entry in doc["sources"].items():
        key, title, url, where, read = entry
        if not all(type(x) is str for x in entry):
            raise ValueError("not a source")
        table[sid] = Source(key, title, url, where, dt.date.fromisoformat(read))
    gpus = []
    for row in doc["gpus"]:
        if type(row) is not dict or row.keys() != _FIELDS.keys():
            raise ValueError("not a GPU row")
        if not all(check(row[name]) for name, check in _CHECKS.items()):
            raise ValueError("a value of the wrong type")
        sources = {field: table[sid] for field, sid in row["sources"].items()}
        gpus.append(GPU(**{**row, "aliases": tuple(row["aliases"]), "sources": sources}))
    return gpus
