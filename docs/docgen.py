"""The one command line of the generated reference pages (api.md, workload.md, frameworks.md):
write the page, or with --check say whether the committed page is current (exit 1 when stale)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def main(out: Path, render: Callable[[], str], argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not out.exists() or out.read_text(encoding="utf-8") != text:
            script = Path(sys.argv[0]).name
            print(f"{out} is stale: run python docs/{script}", file=sys.stderr)
            return 1
        return 0
    out.write_text(text, encoding="utf-8")
    return 0
