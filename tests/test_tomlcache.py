"""The parsed-TOML cache: the same document as tomllib's, whichever way it is read."""

from __future__ import annotations

import datetime as dt
import tomllib
from pathlib import Path

import pytest

from gpuplan.specs import tomlcache
from gpuplan.specs.gpu import _bundled_texts, load_catalog

TEXT = """
[source.a]
title = "a datasheet"
read = 2026-12-02
when = 2026-12-02T10:30:00+01:00
at = 07:45:00
values = [1.5, 2, inf, "x"]
nested = { deep = [ { k = 1979-05-27 } ] }
"""


def test_cached_document_equals_tomllib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(tmp_path))
    first = tomlcache.loads(TEXT)  # parsed, then stored
    assert len(list(tmp_path.glob("*.json"))) == 1
    second = tomlcache.loads(TEXT)  # read back from the cache
    assert first == second == tomllib.loads(TEXT)
    assert isinstance(second["source"]["a"]["read"], dt.date)
    assert isinstance(second["source"]["a"]["when"], dt.datetime)
    assert second["source"]["a"]["when"].utcoffset() == dt.timedelta(hours=1)
    assert isinstance(second["source"]["a"]["at"], dt.time)
    assert second["source"]["a"]["nested"]["deep"][0]["k"] == dt.date(1979, 5, 27)


def test_bundled_catalog_is_the_same_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(tmp_path))
    for _, text in _bundled_texts():
        assert tomlcache.loads(text) == tomllib.loads(text)
        assert tomlcache.loads(text) == tomllib.loads(text)
    monkeypatch.setenv(tomlcache.CACHE_ENV, "")
    uncached = {g.name: g for g in load_catalog(use_env=False)}
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(tmp_path))
    cached = {g.name: g for g in load_catalog(use_env=False)}
    assert cached == uncached and len(cached) >= 71


def test_damaged_entry_and_unwritable_folder_fall_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(tmp_path))
    tomlcache.loads(TEXT)
    (entry,) = tmp_path.glob("*.json")
    entry.write_text('{"source": {"a": {"read": {"__gpuplan_toml__": "date", "v": "not a date"}}}}')
    assert tomlcache.loads(TEXT) == tomllib.loads(TEXT)  # unreadable value: parsed afresh
    entry.write_text("{truncated")
    assert tomlcache.loads(TEXT) == tomllib.loads(TEXT)
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(blocked / "sub"))
    assert tomlcache.loads(TEXT) == tomllib.loads(TEXT)


def test_off_switch_and_parse_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tomlcache.CACHE_ENV, "")
    assert tomlcache.cache_dir() is None
    assert tomlcache.loads(TEXT) == tomllib.loads(TEXT)
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(tmp_path))
    with pytest.raises(tomllib.TOMLDecodeError):
        tomlcache.loads("[unclosed")
    assert not list(tmp_path.glob("*.json"))  # nothing stored for text that does not parse
