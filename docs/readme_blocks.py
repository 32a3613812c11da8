"""Regenerate the figures of README.md and docs/*.md that gpuplan's commands print.

A generated part of a document sits between two markers (OPTIONs are shell words):

    <!-- gpuplan:begin NAME [OPTION ...] -->...<!-- gpuplan:end -->

- NAME `console`: a ```console block with one `$ gpuplan ...` line; below it goes what that
  command prints now, without the tables' border lines, trimmed by the options:
      lines=1-12,20-   the output lines kept (1-based, border lines not counted)
      grep=REGEX       also the lines that match REGEX (matched with the table bars in place)
      cols=N           the first N cells of each table row (`…` for the rest)
      width=N          lines cut to N characters (`…` for the rest)
      plain            table rows without their bars, as the README shows them
      left             the same, every cell left-aligned (a column of wide right-aligned values)
  Each run of lines left out shows as one `…` line.
- NAME `doctest`: a ```python block of `>>>` examples; each output is what running it prints now
  (tests/test_library.py also runs the README's as doctests).
- NAME `GROUP.KEY`: a figure of docs/readme_figures.py, computed from a command's --json: inline
  (a number in a sentence) or, when the part starts on a line of its own, a block (a table).

Everything runs in-process, each distinct command once. From the repository root:

    python docs/readme_blocks.py            # check: list the stale parts (a diff), exit 1 if any
    python docs/readme_blocks.py --write    # rewrite them in place

tests/test_readme_blocks.py fails while any part is stale. After a merge, rerun with --write.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRIPT = "python docs/readme_blocks.py --write"

# a marker quoted in `backticks` (as the README's layout section names them) is text, not a marker
MARK = re.compile(
    r"(?<!`)<!-- gpuplan:begin (?P<name>[\w.-]+)(?P<opts>.*?) -->(?P<body>.*?)(?<!`)<!-- gpuplan:end -->", re.S
)
BORDER = re.compile(r"^[\s┏┓┗┛┡┩┢┪└┘┌┐├┤━─┳┻╇╈┼┬┴╋═╞╡╪]*$")
BAR = re.compile(r"[│┃]")
# the one figure that is wall-clock, not an estimate: "Searched ... layouts ... in 0.22 s."
ELAPSED = re.compile(r"\bin \d+(?:\.\d+)? s\b")
GAP = "…"
sys.path.insert(0, str(ROOT / "docs"))  # readme_figures


class DocsError(Exception):
    """A marker that cannot be generated: unknown name, bad option, a command that failed."""


class Runner:
    """Runs `gpuplan ARGS` in-process, each distinct command once; text or its --json document."""

    def __init__(self) -> None:
        self._out: dict[tuple[str, ...], str] = {}

    def text(self, *argv: str) -> str:
        if argv not in self._out:
            from gpuplan.interfaces.cli import main

            out, err = io.StringIO(), io.StringIO()
            with redirect_stdout(out), redirect_stderr(err):
                saved, sys.stdout = sys.stdout, out
                try:
                    code = main(list(argv))
                finally:
                    sys.stdout = saved
            if code != 0:
                raise DocsError(f"`gpuplan {shlex.join(argv)}` exited {code}: {err.getvalue().strip()}")
            self._out[argv] = out.getvalue()
        return self._out[argv]

    def json(self, *argv: str) -> Any:
        return json.loads(self.text(*argv, "--json"))


@contextmanager
def docs_environment() -> Iterator[None]:
    """What the documents assume: the repository as working folder, bundled data only, no wrapping."""
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    os.environ.update(COLUMNS="1000", NO_COLOR="1")
    for name in ("GPUPLAN_CATALOG", "GPUPLAN_PRICES"):
        os.environ.pop(name, None)
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


# --- console blocks --------------------------------------------------------------------------


def _line_set(spec: str, count: int) -> set[int]:
    """`1-12,20-,7` as 0-based indices below `count`."""
    keep: set[int] = set()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        m = re.fullmatch(r"(\d+)(?:-(\d*))?", part)
        if not m:
            raise DocsError(f"lines={spec!r}: write ranges such as 1-12,20-")
        first = int(m.group(1))
        last = first if m.group(2) is None else int(m.group(2) or count)
        keep.update(range(first - 1, min(last, count)))
    return keep


def _select(lines: list[str], opts: dict[str, str]) -> list[str]:
    """The lines the options keep, with one `…` line for each run of lines left out."""
    if "lines" not in opts and "grep" not in opts:
        return lines
    keep = _line_set(opts.get("lines", ""), len(lines))
    if "grep" in opts:
        pattern = re.compile(opts["grep"])
        keep.update(i for i, text in enumerate(lines) if pattern.search(text))
    shown: list[str] = []
    for i, text in enumerate(lines):
        if i in keep:
            shown.append(text)
        elif not shown or shown[-1] != GAP:
            shown.append(GAP)
    return shown


def _cut_cells(line: str, cols: int) -> str:
    """A table row's first `cols` cells; a table's title, centred over all of them, moves left."""
    if not BAR.search(line):
        return line.lstrip() if line.startswith(" " * 8) else line
    parts = BAR.split(line)
    if len(parts) - 2 <= cols:
        return line
    bar = BAR.search(line)
    assert bar is not None
    return bar.group().join(parts[: cols + 1]) + bar.group() + " " + GAP


def _plain(line: str) -> str:
    """A table row without its bars: `│ a │ b │` -> `a  b`."""
    if not BAR.search(line):
        return line
    body = re.sub(r"^(\s*)[│┃] ", r"\1", line)
    body = re.sub(r" [│┃]\s*$", "", body)
    return re.sub(r" [│┃] ", "  ", body)


def _left(lines: list[str]) -> list[str]:
    """Each table's rows without bars, their cells left-aligned in columns two spaces apart (a
    `…` line between rows stays in the table)."""
    out: list[str] = []
    rows: list[list[str] | None] = []
    for text in [*lines, ""]:
        if BAR.search(text) or (text == GAP and rows):
            rows.append([c.strip() for c in BAR.split(text)[1:-1]] if text != GAP else None)
            continue
        cells = [r for r in rows if r is not None]
        widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(max(map(len, cells), default=0))]
        out += [
            GAP if r is None else "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows
        ]
        rows = []
        out.append(text)
    return out[:-1]


def shape(output: str, opts: dict[str, str]) -> list[str]:
    """A command's output as the document shows it: borders dropped, then the options applied."""
    lines = [t.rstrip() for t in output.splitlines() if not t.strip() or not BORDER.match(t)]
    while lines and not lines[-1]:
        lines.pop()
    lines = _select(lines, opts)
    if "cols" in opts:
        lines = [_cut_cells(t, int(opts["cols"])) for t in lines]
    if "left" in opts:
        lines = _left(lines)
    if "plain" in opts:
        lines = [_plain(t).rstrip() for t in lines]
    if "width" in opts:
        width = int(opts["width"])
        lines = [t if len(t) <= width else t[:width].rstrip() + " " + GAP for t in lines]
    return lines


def console(body: str, opts: dict[str, str], run: Runner) -> str:
    commands = [t for t in body.splitlines() if t.startswith("$ ")]
    if len(commands) != 1:
        raise DocsError(f"a console block holds one `$ gpuplan ...` line, not {len(commands)}")
    argv = shlex.split(commands[0][2:], comments=True)
    if not argv or argv[0] != "gpuplan":
        raise DocsError(f"not a gpuplan command: {commands[0]}")
    lines = shape(run.text(*argv[1:]), opts)
    return "\n".join(["", "```console", commands[0], *lines, "```", ""])


# --- library sessions ------------------------------------------------------------------------


def session(body: str) -> str:
    """A ```python block of `>>>` examples with each output as running it prints now."""
    import doctest

    m = re.search(r"```python\n(.*?)```", body, re.S)
    if m is None:
        raise DocsError("a doctest part holds one ```python block of >>> examples")
    namespace: dict[str, Any] = {}
    lines = []
    for example in doctest.DocTestParser().get_examples(m.group(1)):
        source = example.source.rstrip("\n").split("\n")
        lines += [">>> " + source[0], *("... " + t for t in source[1:])]
        out = io.StringIO()
        with redirect_stdout(out):
            try:
                exec(compile(example.source, "<docs>", "single"), namespace)
            except Exception as exc:
                raise DocsError(f"`{source[0]}` raised {exc!r}") from exc
        lines += out.getvalue().rstrip("\n").split("\n") if out.getvalue() else []
    return "\n".join(["", "```python", *lines, "```", ""])


# --- documents -------------------------------------------------------------------------------


@dataclass
class Part:
    """One marked part of a document and what it should hold now."""

    doc: str
    line: int
    name: str
    old: str
    new: str

    @property
    def stale(self) -> bool:
        return ELAPSED.sub("in <elapsed> s", self.old) != ELAPSED.sub("in <elapsed> s", self.new)


def _options(text: str) -> dict[str, str]:
    opts: dict[str, str] = {}
    for word in shlex.split(text):
        key, _, value = word.partition("=")
        if key not in ("lines", "grep", "cols", "width", "plain", "left"):
            raise DocsError(f"unknown option {key!r} (lines, grep, cols, width, plain, left)")
        opts[key] = value
    return opts


def _figure(name: str, run: Runner) -> str:
    from readme_figures import FIGURES

    group, _, key = name.partition(".")
    if group not in FIGURES:
        raise DocsError(f"unknown figure group {group!r} in {name!r} (docs/readme_figures.py: {', '.join(FIGURES)})")
    values = FIGURES[group](run)
    if key not in values:
        raise DocsError(f"figure group {group!r} has no {key!r} ({', '.join(values)})")
    return values[key]


def generate(body: str, name: str, opts_text: str, run: Runner) -> str:
    """What a marked part holds now."""
    opts = _options(opts_text)
    if name == "console":
        return console(body, opts, run)
    if name == "doctest":
        return session(body)
    text = _figure(name, run)
    # a part on lines of its own (its body starts with a line break) or a table stays a block
    return f"\n{text}\n" if body.startswith("\n") or "\n" in text else text


def parts(path: Path, run: Runner, generator: Callable[..., str] = generate) -> list[Part]:
    text = path.read_text(encoding="utf-8")
    found = []
    for m in MARK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        where = f"{path.name}:{line}"
        try:
            new = generator(m.group("body"), m.group("name"), m.group("opts"), run)
        except DocsError as exc:
            raise DocsError(f"{where}: {exc}") from exc
        found.append(Part(path.name, line, m.group("name"), m.group("body"), new))
    return found


def rewrite(path: Path, fresh: list[Part]) -> None:
    text = path.read_text(encoding="utf-8")
    it = iter(fresh)

    def swap(m: re.Match[str]) -> str:
        part = next(it)
        body = part.new if part.stale else part.old
        return m.group(0)[: m.start("body") - m.start()] + body + "<!-- gpuplan:end -->"

    path.write_text(MARK.sub(swap, text), encoding="utf-8")


def stale_parts(docs: list[Path] = DOCS) -> list[Part]:
    """Every marked part of the documents whose text is not what the commands print now."""
    run = Runner()
    with docs_environment():
        return [p for path in docs for p in parts(path, run) if p.stale]


def diff(part: Part) -> str:
    lines = difflib.unified_diff(
        part.old.splitlines(), part.new.splitlines(), "in the document", "printed now", lineterm="", n=1
    )
    return "\n".join(lines) if "\n" in part.old + part.new else f"  {part.old!r} -> {part.new!r}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the stale parts in place")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    run, stale = Runner(), 0
    with docs_environment():
        for path in DOCS:
            try:
                found = parts(path, run)
            except DocsError as exc:
                print(f"readme_blocks: {exc}", file=sys.stderr)
                return 2
            for p in (p for p in found if p.stale):
                stale += 1
                print(f"{p.doc}:{p.line}: {p.name} is stale\n{diff(p)}")
            if args.write and any(p.stale for p in found):
                rewrite(path, found)
    verb = "rewritten" if args.write else f"stale (run: {SCRIPT})"
    print(f"{stale} generated part(s) {verb}" if stale else "every generated part is current")
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
