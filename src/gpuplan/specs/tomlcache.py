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


def _cached(
    path: Path | None, what: str, parse: Callable[[], Any], kept: Callable[[Any], bool], **json_args: Any
) -> Any:
    """The document stored at `path` where it is one `kept` accepts, else parse() (its errors reach
    the caller), stored when `kept` accepts it. A damaged or hostile entry is parsed afresh."""
    if path is not None:
        try:
            # read_capped: a regular file only (a FIFO put there would block a plain read), bounded
            doc = json.loads(read_capped(path, what, MAX_JSON_BYTES), **json_args)
            if kept(doc):
                return doc
        except (OSError, ValueError, KeyError, RecursionError):  # a damaged or hostile entry: parse afresh
            pass
    doc = parse()
    if path is not None and kept(doc):
        _store(path, doc)
    return doc


def _entry(folder: Path | None, key: str) -> Path | None:
    """The cache file named by the SHA-256 of `key` (the format version, the kind, the text)."""
    return None if folder is None else folder / f"{hashlib.sha256(key.encode()).hexdigest()}.json"


def loads(text: str) -> dict[str, Any]:
    """tomllib.loads(text), from the cache where this exact text was parsed before."""

    def parse() -> dict[str, Any]:
        import tomllib  # a cached document needs no parser

        return tomllib.loads(text)  # TOMLDecodeError reaches the caller as before

    doc: dict[str, Any] = _cached(
        _entry(cache_dir(), f"{_VERSION}\0{text}"),
        "TOML cache entry",
        parse,
        lambda d: isinstance(d, dict),
        object_hook=_decode,
    )
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
    where this exact text was read before. Only a document JSON gives back exactly is kept; an entry
    holding NaN or Infinity is not what was stored, so the text is read afresh, as is a damaged one."""
    folder = cache_dir()
    path = _entry(None if folder is None else folder / kind, f"{_VERSION}\0{kind}\0{text}")
    return _cached(path, f"{kind} cache entry", lambda: parse(text), _plain, parse_constant=_refuse)
