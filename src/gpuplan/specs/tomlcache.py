"""TOML (and a user's YAML) parsed once per content: the catalog files take ~100 ms to parse with
tomllib (pure Python) on every start, their JSON form ~3 ms; a workload file's YAML needs PyYAML
loaded (~10-20 ms of a command's start) where its JSON form needs none (`plain_document`). The parsed document is kept as JSON under the
user's cache folder, named by the SHA-256 of the text, so an edited file is parsed afresh and a
stale entry is never read. Dates and times are tagged so the document comes back exactly as
tomllib gave it. Any problem with the cache (no home, read-only disk, a damaged entry) falls back
to parsing; parse errors are tomllib's own, whichever way the text is read.

GPUPLAN_CACHE_DIR names the folder; set to an empty string it turns the cache off.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from gpuplan.safeio import MAX_JSON_BYTES, read_capped, write_atomically

CACHE_ENV: Final = "GPUPLAN_CACHE_DIR"
_VERSION: Final = "1"  # bump when the stored form changes
_TAG: Final = "__gpuplan_toml__"


def cache_dir() -> Path | None:
    """The folder for parsed documents, or None when turned off or there is no home."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME")
    try:
        root = Path(base) if base else Path.home() / ".cache"
    except RuntimeError:  # no home directory to expand
        return None
    return root / "gpuplan" / "toml"


def _encode(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return {_TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {_TAG: "date", "v": value.isoformat()}
    if isinstance(value, dt.time):
        return {_TAG: "time", "v": value.isoformat()}
    raise TypeError(f"not a TOML value: {type(value).__name__}")


def _decode(obj: dict[str, Any]) -> Any:
    kind = obj.get(_TAG)
    if kind is None or set(obj) != {_TAG, "v"}:
        return obj
    parse = {"datetime": dt.datetime.fromisoformat, "date": dt.date.fromisoformat, "time": dt.time.fromisoformat}
    return parse[kind](obj["v"])


def loads(text: str) -> dict[str, Any]:
    """tomllib.loads(text), from the cache where this exact text was parsed before."""
    folder = cache_dir()
    path = None
    if folder is not None:
        key = hashlib.sha256(f"{_VERSION}\0{text}".encode()).hexdigest()
        path = folder / f"{key}.json"
        try:
            # read_capped: a regular file only (a FIFO put there would block a plain read), bounded
            doc = json.loads(read_capped(path, "TOML cache entry", MAX_JSON_BYTES), object_hook=_decode)
            if isinstance(doc, dict):
                return doc
        except (OSError, ValueError, KeyError, RecursionError):  # a damaged or hostile entry: parse afresh
            pass
    import tomllib  # a cached document needs no parser

    doc = tomllib.loads(text)  # TOMLDecodeError reaches the caller as before
    if path is not None:
        _store(path, doc)
    return doc


def _store(path: Path, doc: dict[str, Any]) -> None:
    """Write atomically (a reader never sees half a file); give up quietly where it cannot. A cache
    needs no fsync: a lost entry is parsed again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(doc, default=_encode, separators=(",", ":")), durable=False, mode=None)
    except (OSError, TypeError, ValueError, RecursionError):  # json.dumps recurses per nesting level
        pass


def _refuse(token: str) -> Any:
    raise ValueError(f"{token} in a cache entry")


def _plain(value: Any) -> bool:
    """Whether JSON gives `value` back exactly: text keys; text, numbers, booleans, null, lists and
    mappings of them (a YAML date, a number as a key or a set is not kept)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def plain_document(text: str, kind: str, parse: Callable[[str], Any]) -> Any:
    """parse(text) (a YAML reader: its errors reach the caller), from the cache's `kind` folder
    where this exact text was read before. Only a document JSON gives back exactly is kept; a
    damaged or hostile entry is read afresh, as `loads` does."""
    folder = cache_dir()
    path = None
    if folder is not None:
        key = hashlib.sha256(f"{_VERSION}\0{kind}\0{text}".encode()).hexdigest()
        path = folder / kind / f"{key}.json"
        try:  # NaN or Infinity in an entry: not what was stored, so read the text afresh
            return json.loads(read_capped(path, f"{kind} cache entry", MAX_JSON_BYTES), parse_constant=_refuse)
        except (OSError, ValueError, KeyError, RecursionError):
            pass
    doc = parse(text)
    if path is not None and _plain(doc):
        _store(path, doc)
    return doc
