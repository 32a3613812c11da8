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


WORKLOAD_YAML = "model: llama-3.1-8b\ntask: lora\nbatch_size: 4\nlora_targets: [q_proj, v_proj]\ntokens: 2.0e10\n"


def test_a_workload_file_read_before_needs_no_yaml_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """safe_yaml reads a text it read before from the cache (specs/tomlcache.py plain_document):
    the same document as the YAML reader's, without running it; a new text is read afresh."""
    from gpuplan.safeio import load_yaml
    from gpuplan.specs.workload import safe_yaml

    monkeypatch.setenv(tomlcache.CACHE_ENV, str(tmp_path))
    calls: list[str] = []

    def reader(text: str) -> object:
        calls.append(text)
        return load_yaml(text, "w.yaml")

    first = tomlcache.plain_document(WORKLOAD_YAML, "yaml", reader)
    second = tomlcache.plain_document(WORKLOAD_YAML, "yaml", reader)
    assert first == second == load_yaml(WORKLOAD_YAML, "w.yaml") and len(calls) == 1
    assert len(list((tmp_path / "yaml").glob("*.json"))) == 1
    assert safe_yaml(WORKLOAD_YAML, "w.yaml") == first  # the workload reader's own path
    tomlcache.plain_document(WORKLOAD_YAML + "seq_len: 512\n", "yaml", reader)
    assert len(calls) == 2


def test_only_what_json_gives_back_exactly_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A YAML date, a number as a key or a set would come back as text or a list: such a document
    is read afresh each time, never stored; nor is an error."""
    from gpuplan.errors import InvalidSettingError
    from gpuplan.safeio import load_yaml

    monkeypatch.setenv(tomlcache.CACHE_ENV, str(tmp_path))
    for text in ("read: 2026-12-04\n", "have: {4090: 2}\n", "x: !!set {a: null}\n"):
        doc = tomlcache.plain_document(text, "yaml", lambda t: load_yaml(t, "w.yaml"))
        assert doc == load_yaml(text, "w.yaml")
    assert not list(tmp_path.rglob("*.json"))
    with pytest.raises(InvalidSettingError):
        tomlcache.plain_document("a: 1\na: 2\n", "yaml", lambda t: load_yaml(t, "w.yaml"))
    assert not list(tmp_path.rglob("*.json"))


def test_a_tampered_yaml_entry_is_read_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry holding NaN (never stored: the reader refuses non-finite numbers) or broken JSON is
    not trusted: the text is read again and the entry replaced."""
    from gpuplan.safeio import load_yaml

    monkeypatch.setenv(tomlcache.CACHE_ENV, str(tmp_path))
    good = tomlcache.plain_document(WORKLOAD_YAML, "yaml", lambda t: load_yaml(t, "w.yaml"))
    (entry,) = (tmp_path / "yaml").glob("*.json")
    for bad in ('{"model": NaN}', '{"model": '):
        entry.write_text(bad)
        assert tomlcache.plain_document(WORKLOAD_YAML, "yaml", lambda t: load_yaml(t, "w.yaml")) == good
