"""The validated bundled catalog, cached: read back equal to a fresh parse, and parsed afresh
whenever the entry is damaged, of the wrong shape or made for other text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplan.specs import gpu_rows, tomlcache
from gpuplan.specs.gpu import GPU, _bundled_texts, load_catalog
from gpuplan.specs.gpu_cache import bundled_gpus


def _fresh() -> list[GPU]:
    return [g for origin, text in _bundled_texts() for g in gpu_rows.parse_catalog_text(text, origin)]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(tmp_path))
    return tmp_path


def _no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str, origin: str) -> list[GPU]:
        raise AssertionError(f"{origin} was parsed, not read from the cache")

    monkeypatch.setattr(gpu_rows, "parse_catalog_text", refuse)


def test_read_back_equals_a_fresh_parse(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = list(_bundled_texts())
    fresh = _fresh()
    assert bundled_gpus(texts) == fresh  # parsed, then stored
    assert len(list(cache.glob("gpus-*.json"))) == 1
    _no_parsing(monkeypatch)
    back = bundled_gpus(texts)
    assert back == fresh and len(back) >= 71  # every field, the sources (with their dates) too
    assert all(type(g.aliases) is tuple for g in back)
    h100 = next(g for g in back if g.name == "H100 SXM5 80GB")
    assert h100.sources["memory_bandwidth_GBps"].read.year >= 2020
    assert {g.name: g for g in load_catalog(use_env=False)} == {g.name: g for g in fresh}


@pytest.mark.parametrize(
    "damage",
    [
        lambda doc: "{truncated",
        lambda doc: json.dumps({**doc, "gpus": [{**doc["gpus"][0], "tdp_watts": "700"}]}),  # a string for a number
        lambda doc: json.dumps({**doc, "gpus": [{**doc["gpus"][0], "tdp_watts": float("nan")}]}),
        lambda doc: json.dumps({**doc, "gpus": [{**doc["gpus"][0], "nvlink_domain": True}]}),  # a bool for an int
        lambda doc: json.dumps({**doc, "gpus": [{k: v for k, v in doc["gpus"][0].items() if k != "vendor"}]}),
        lambda doc: json.dumps({**doc, "gpus": [{**doc["gpus"][0], "extra": 1}]}),
        lambda doc: json.dumps({**doc, "gpus": [{**doc["gpus"][0], "aliases": [1]}]}),
        lambda doc: json.dumps({**doc, "sources": {k: [*v[:4], "not a date"] for k, v in doc["sources"].items()}}),
        lambda doc: json.dumps([]),
    ],
)
def test_a_damaged_entry_is_parsed_afresh(cache: Path, damage: object) -> None:
    texts = list(_bundled_texts())
    bundled_gpus(texts)
    (entry,) = cache.glob("gpus-*.json")
    assert callable(damage)
    entry.write_text(damage(json.loads(entry.read_text())))
    assert bundled_gpus(texts) == _fresh()


def test_other_text_or_no_cache_is_parsed(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = list(_bundled_texts())
    bundled_gpus(texts)
    origin, text = texts[0]
    edited = [(origin, text + "\n# edited\n"), *texts[1:]]
    assert bundled_gpus(edited) == _fresh()  # another entry: the edited text is parsed
    assert len(list(cache.glob("gpus-*.json"))) == 2
    monkeypatch.setenv(tomlcache.CACHE_ENV, "")  # caching off: nothing read or written
    assert bundled_gpus(texts) == _fresh()
    blocked = cache / "a-file"
    blocked.write_text("")
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(blocked / "sub"))  # cannot be written: parsed each time
    assert bundled_gpus(texts) == _fresh()
