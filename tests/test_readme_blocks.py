"""The figures in README.md and docs/*.md that gpuplan's commands print are generated, not typed.

docs/readme_blocks.py rewrites every part between `<!-- gpuplan:begin NAME -->` and
`<!-- gpuplan:end -->` from what the commands print now (console blocks, tables, figures in
sentences: docs/readme_figures.py). This test fails while any part is stale; the fix is
`python docs/readme_blocks.py --write`. Every command runs in-process, once.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


blocks = _load("readme_blocks")

# a rich table as the CLI prints it at COLUMNS=1000 (borders, bars, padding)
TABLE = """\
            title over the table
┏━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━┓
┃ term     ┃   per GPU ┃ why                  ┃
┡━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━┩
│ weights  │  2.30 GiB │ 1.24B params x 2 B   │
│ grads    │  4.60 GiB │ fp32 gradients       │
│ total    │  6.90 GiB │ peak                 │
└──────────┴───────────┴──────────────────────┘
✓ fits on T4
"""


def test_every_generated_part_is_current() -> None:
    stale = blocks.stale_parts()
    report = "\n".join(f"{p.doc}:{p.line}: {p.name}\n{blocks.diff(p)}" for p in stale)
    assert not stale, f"{len(stale)} generated part(s) of the docs are stale; run `{blocks.SCRIPT}`:\n{report}"


def test_the_docs_generate_their_figures() -> None:
    """The README's command output and the figures issue 26 found stale are under markers."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    names = set(re.findall(r"<!-- gpuplan:begin ([\w.-]+)", readme))
    assert {"catalog.gpus", "validation.table", "lab.table", "lab.billing", "console"} <= names
    guide = (ROOT / "docs" / "course-planning.md").read_text(encoding="utf-8")
    assert {"course.bill", "console"} <= set(re.findall(r"<!-- gpuplan:begin ([\w.-]+)", guide))


@pytest.mark.parametrize("doc", blocks.DOCS, ids=[d.name for d in blocks.DOCS])
def test_every_console_example_is_generated(doc: Path) -> None:
    """A ```console block outside the markers would be typed output: wrap it in
    `<!-- gpuplan:begin console -->` ... `<!-- gpuplan:end -->` and run the script."""
    text = blocks.MARK.sub("", doc.read_text(encoding="utf-8"))
    loose = [line for line in text.splitlines() if line.strip() == "```console"]
    assert not loose, f"{doc.name}: {len(loose)} console block(s) outside gpuplan markers"


def test_shape_drops_borders_and_keeps_the_rest() -> None:
    assert blocks.shape(TABLE, {}) == [
        "            title over the table",
        "┃ term     ┃   per GPU ┃ why                  ┃",
        "│ weights  │  2.30 GiB │ 1.24B params x 2 B   │",
        "│ grads    │  4.60 GiB │ fp32 gradients       │",
        "│ total    │  6.90 GiB │ peak                 │",
        "✓ fits on T4",
    ]


def test_shape_options() -> None:
    plain = blocks.shape(TABLE, {"plain": ""})
    assert plain[1:4] == [
        "term        per GPU  why",
        "weights    2.30 GiB  1.24B params x 2 B",
        "grads      4.60 GiB  fp32 gradients",
    ]
    # lines kept by number and by pattern; each run left out is one `…`
    assert blocks.shape(TABLE, {"lines": "1-2", "grep": "total"}) == [
        "            title over the table",
        "┃ term     ┃   per GPU ┃ why                  ┃",
        "…",
        "│ total    │  6.90 GiB │ peak                 │",
        "…",
    ]
    assert blocks.shape(TABLE, {"lines": "5-"})[0] == "…"
    # the first two cells of each row; the title moves left over what is left
    cut = blocks.shape(TABLE, {"cols": "2", "plain": ""})
    assert cut[0] == "title over the table"
    assert cut[2] == "weights    2.30 GiB  …"
    # cells left-aligned, a `…` between rows kept in the table
    assert blocks.shape(TABLE, {"grep": "weights|total", "left": ""}) == [
        "…",
        "weights  2.30 GiB  1.24B params x 2 B",
        "…",
        "total    6.90 GiB  peak",
        "…",
    ]
    # long lines cut at a width, marked
    assert blocks.shape(TABLE, {"plain": "", "width": "25"})[2:5] == [
        "weights    2.30 GiB  1.24 …",
        "grads      4.60 GiB  fp32 …",
        "total      6.90 GiB  peak",  # short enough: whole
    ]


def test_a_library_session_is_rerun() -> None:
    """`>>>` examples keep their source and comments; each output is what running it prints now."""
    body = "\n```python\n>>> x = 20 + 1    # a comment\n>>> x * 2\n41\n>>> for i in range(2):\n...     print(i)\n```\n"
    assert blocks.session(body) == (
        "\n```python\n>>> x = 20 + 1    # a comment\n>>> x * 2\n42\n>>> for i in range(2):\n...     print(i)\n0\n1\n```\n"
    )
    with pytest.raises(blocks.DocsError, match=r"`1 / 0` raised ZeroDivisionError"):
        blocks.session("```python\n>>> 1 / 0\n```")


def test_bad_markers_are_named(tmp_path: Path) -> None:
    run = blocks.Runner()
    doc = tmp_path / "doc.md"
    doc.write_text("x <!-- gpuplan:begin console lines=1 colour=red -->\n<!-- gpuplan:end -->\n", encoding="utf-8")
    with pytest.raises(blocks.DocsError, match=r"doc.md:1: .*unknown option 'colour'"):
        blocks.parts(doc, run)
    doc.write_text("<!-- gpuplan:begin nosuch.key -->1<!-- gpuplan:end -->\n", encoding="utf-8")
    with pytest.raises(blocks.DocsError, match="unknown figure group 'nosuch'"):
        blocks.parts(doc, run)
    doc.write_text(
        "<!-- gpuplan:begin console -->\n```console\n$ gpuplan a\n$ gpuplan b\n```\n<!-- gpuplan:end -->",
        encoding="utf-8",
    )
    with pytest.raises(blocks.DocsError, match=r"one `\$ gpuplan \.\.\.` line, not 2"):
        blocks.parts(doc, run)


def test_a_failing_command_is_reported() -> None:
    with blocks.docs_environment(), pytest.raises(blocks.DocsError, match=r"`gpuplan gpus show nosuchgpu` exited 2"):
        blocks.Runner().text("gpus", "show", "nosuchgpu")


def test_write_replaces_only_what_moved(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "We have <!-- gpuplan:begin a.n -->3<!-- gpuplan:end --> cards and "
        "<!-- gpuplan:begin a.m -->in 0.20 s<!-- gpuplan:end -->.\n",
        encoding="utf-8",
    )
    fresh = {"a.n": "4", "a.m": "in 0.31 s"}  # the second differs only in a wall-clock time

    def generator(body: str, name: str, opts: str, run: Any) -> str:
        return fresh[name]

    found = blocks.parts(doc, None, generator)
    assert [p.stale for p in found] == [True, False]
    blocks.rewrite(doc, found)
    assert doc.read_text(encoding="utf-8") == (
        "We have <!-- gpuplan:begin a.n -->4<!-- gpuplan:end --> cards and "
        "<!-- gpuplan:begin a.m -->in 0.20 s<!-- gpuplan:end -->.\n"
    )
