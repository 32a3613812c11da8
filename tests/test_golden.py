"""Golden files: every `--json` face and launch format on the bundled examples, byte for byte.

A refactor must leave these unchanged; a change that means to alter an answer regenerates them with
`GPUPLAN_UPDATE_GOLDEN=1 pytest tests/test_golden.py` and shows the diff in review.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from conftest import RunCli
from helpers.golden_cases import GOLDEN, ROOT, cases

UPDATE = os.environ.get("GPUPLAN_UPDATE_GOLDEN") == "1"
# the one value that is not a prediction: how long the layout search took on this machine
WALL_TIME = [
    (re.compile(r'("search": \{[^{}]*?"seconds": )[0-9.e+-]+'), r"\1<seconds>"),
    (re.compile(r"(layouts\)?[^.]*?\) in )[0-9.]+ s\."), r"\1<t> s."),
]


def _stable(text: str) -> str:
    for pattern, repl in WALL_TIME:
        text = pattern.sub(repl, text)
    return text


INDEX = GOLDEN / "index.json"


def _index() -> dict[str, dict[str, object]]:
    if INDEX.exists():
        return dict(json.loads(INDEX.read_text()))
    return {}


@pytest.fixture(scope="module")
def index() -> dict[str, dict[str, object]]:
    return _index()


def test_every_case_has_a_golden_file(index: dict[str, dict[str, object]]) -> None:
    names = [n for n, _ in cases()]
    assert len(names) == len(set(names)), "case names must be unique"
    if not UPDATE:
        assert sorted(index) == sorted(names), "tests/golden/index.json and the cases differ: regenerate"
        stored = sorted(p.name for p in GOLDEN.iterdir() if p.name != "index.json")
        assert stored == sorted(names), "stray or missing golden files"


@pytest.mark.parametrize(("name", "argv"), cases(), ids=[n for n, _ in cases()])
def test_golden(
    name: str, argv: list[str], run_cli: RunCli, index: dict[str, dict[str, object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GPUPLAN_PRICES", raising=False)
    code, out, err = run_cli(*argv)
    out = _stable(out)
    record: dict[str, object] = {"argv": argv, "exit": code, "stderr": err}
    path = GOLDEN / name
    if UPDATE:
        path.write_text(out)
        full = _index()
        full[name] = record
        INDEX.write_text(json.dumps(dict(sorted(full.items())), indent=1) + "\n")
        return
    assert name in index, f"no golden record for {name}: regenerate"
    assert record == index[name]
    assert out == path.read_text(), f"{name} changed: diff against tests/golden/{name}"
