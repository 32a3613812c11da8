"""Rewrite the validation ranges in the docs' console examples to what the commands print now.

tests/test_docs_examples.py fails when an example no longer matches its command's output. When
only the ranges moved (a "(lo–hi)" after a figure: the residuals changed, the figure did not),
this script puts the new ranges in, keeping the example's layout; a line whose figures moved too
is left alone and printed, for a person to regenerate. Run from the repository root:
    .venv/bin/python docs/refresh_ranges.py [--check]
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shlex
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

RANGE = re.compile(r"\(([^()]*?)–([^()]*?)\)")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _run(argv: list[str]) -> str:
    from gpuplan.interfaces.cli import main

    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        sys.stdout = out
        try:
            main(argv)
        finally:
            sys.stdout = sys.__stdout__
    return out.getvalue()


def _key(text: str) -> str:
    """A line without its ranges, borders and spacing: what must stay equal for a range swap."""
    return " ".join(re.sub(r"[│┃]", " ", RANGE.sub("", text)).split())


def _swap_ranges(text: str, ranges: list[tuple[str, str]]) -> str:
    """`text` with its ranges replaced, in order, by `ranges` (extra ones in `text` kept)."""
    it = iter(ranges)
    return RANGE.sub(lambda m: "({}–{})".format(*next(it, m.groups())), text)


def refresh(path: Path, check: bool) -> tuple[int, list[str]]:
    lines = path.read_text(encoding="utf-8").split("\n")
    changed, stuck = 0, []
    output: list[str] = []
    in_block = False
    for i, text in enumerate(lines):
        if text.startswith("```"):
            in_block = text.strip() == "```console"
        elif in_block and text.startswith("$ gpuplan"):
            output = _run(shlex.split(text[2:], comments=True)[1:]).splitlines()
        elif in_block and output and RANGE.search(text):
            key = _key(text).rstrip(" …").strip()
            match = next((o for o in output if key and key in _key(o) and RANGE.search(o)), None)
            if match is None:
                stuck.append(f"{path.name}:{i + 1}: {text.strip()}")
                continue
            new = _swap_ranges(text, RANGE.findall(match))
            if new != text:
                lines[i] = new
                changed += 1
    if changed and not check:
        path.write_text("\n".join(lines), encoding="utf-8")
    return changed, stuck


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="report, do not write")
    args = ap.parse_args()
    os.environ["COLUMNS"] = "1000"
    os.chdir(ROOT)
    total = 0
    for path in DOCS:
        n, stuck = refresh(path, args.check)
        total += n
        for s in stuck:
            print(f"figures moved, regenerate by hand: {s}")
    print(f"{total} line(s) with new ranges" + (" (not written: --check)" if args.check else ""))


if __name__ == "__main__":
    main()
