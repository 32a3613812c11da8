"""The console examples in README.md and docs/*.md are what the commands print today.

Each ```console block is a list of `$ gpuplan ...` commands, each followed by lines of its output.
The test runs every command in-process and checks that the shown lines appear in its output, in
order, cell by cell. Examples may leave things out: whole lines (`…` or `...` on a line of its
own, or simply skipped), trailing cells (columns trimmed), and the end of a cell (`…` stands
for the rest of it). Table borders are not compared (the README shows tables without them), nor
the wall-clock time a search took. Anything shown must be current: an estimator change that moves
a figure in the docs fails here until the example is regenerated.

Every console block sits between `<!-- gpuplan:begin console ... -->` markers: docs/readme_blocks.py
regenerates it (`--write`) and tests/test_readme_blocks.py compares it whole, line for line; this
test reads the same blocks more leniently, cell by cell.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import RunCli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_BORDER = re.compile(r"^[\s┏┓┗┛┡┩┢┪└┘┌┐├┤━─┳┻╇╈┼┬┴╋═╞╡╪]*$")
_CELL_BAR = re.compile(r"[│┃]")
_WIDE_GAP = re.compile(r"\s{2,}")
# the one figure that is wall-clock, not an estimate: "Searched ... layouts ... in 0.22 s."
_ELAPSED = re.compile(r"\bin \d+(?:\.\d+)? s\b")
_ELLIPSIS = ("…", "...")


@dataclass
class Example:
    doc: str
    line: int
    argv: list[str]
    shown: list[str]


def _examples() -> list[Example]:
    found: list[Example] = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        in_block = False
        for number, text in enumerate(lines, start=1):
            if text.startswith("```"):
                in_block = text.strip() == "```console"
                continue
            if not in_block:
                continue
            if text.startswith("$ "):
                argv = shlex.split(text[2:], comments=True)
                if not argv or argv[0] != "gpuplan":
                    continue
                found.append(Example(path.name, number, argv[1:], []))
            elif found and found[-1].doc == path.name:
                found[-1].shown.append(text)
    return found


def _normalise(text: str) -> str:
    return " ".join(_ELAPSED.sub("in <elapsed> s", text).split())


def _cells(line: str, *, shown: bool) -> list[str] | None:
    """A line as its table cells (None for a border or an empty line).

    Output rows are split at the box-drawing bars; a borderless row of the README at runs of two
    or more spaces. A line that is not a table row is one cell.
    """
    if _BORDER.match(line):
        return None
    if _CELL_BAR.search(line):
        parts = _CELL_BAR.split(line)
    elif shown:
        parts = _WIDE_GAP.split(line.strip())
    else:
        parts = [line]
    cells = [_normalise(p) for p in parts]
    return [c for c in cells if c]


def _cell_matches(shown: str, actual: str) -> bool:
    for mark in _ELLIPSIS:
        if mark in shown:
            head = shown.split(mark, 1)[0].rstrip()
            return actual.startswith(head)
    return shown == actual


def _row_matches(shown: list[str], actual: list[str]) -> bool:
    """The shown cells are the actual row's first cells, each equal or a `…` prefix (columns to
    the right may be trimmed). A shown line whose text holds a wide gap is also compared whole."""
    if len(shown) <= len(actual) and all(_cell_matches(s, a) for s, a in zip(shown, actual, strict=False)):
        return True
    return _cell_matches(" ".join(shown), " ".join(actual))


EXAMPLES = _examples()


def test_the_docs_have_examples() -> None:
    # README: fit, estimate, two plans, launch, graphics plan, rent-vs-buy; the course guide more
    docs = {e.doc for e in EXAMPLES}
    assert {"README.md", "course-planning.md"} <= docs
    assert len([e for e in EXAMPLES if e.doc == "README.md"]) >= 7
    assert all(e.shown for e in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"{e.doc}:{e.line}" for e in EXAMPLES])
def test_console_example_is_current(example: Example, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # no wrapping: each row on one line
    monkeypatch.chdir(ROOT)
    code, out, err = run_cli(*example.argv)
    assert code == 0, err
    actual = [c for c in (_cells(line, shown=False) for line in out.splitlines()) if c]
    at = 0
    for offset, text in enumerate(example.shown, start=1):
        shown = _cells(text, shown=True)
        if not shown or all(c in _ELLIPSIS for c in shown):
            continue  # a border, an empty line, or lines left out
        shown = [c for c in shown if c not in _ELLIPSIS] or shown
        while at < len(actual) and not _row_matches(shown, actual[at]):
            at += 1
        assert at < len(actual), (
            f"{example.doc} line {example.line + offset}: `gpuplan {' '.join(example.argv)}` "
            f"no longer prints (in this order):\n  {text.strip()}\n(regenerate: python docs/readme_blocks.py --write)"
            f"\nIt prints:\n{out}"
        )
        at += 1
