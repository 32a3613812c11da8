"""The pipeline shows in the folders: a module imports only from stages to its left
(data -> specs -> estimators -> planner -> interfaces; errors is shared by all)."""

from __future__ import annotations

import ast
from pathlib import Path

import gpuplan

STAGES = ["specs", "estimators", "planner", "interfaces"]
ROOT = Path(gpuplan.__file__).parent


def _stage(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) > 1 and parts[0] == "gpuplan" and parts[1] in STAGES:
        return STAGES.index(parts[1])
    return None


def test_imports_flow_left_to_right() -> None:
    checked = 0
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in STAGES:
            continue
        own = STAGES.index(rel.parts[0])
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                stage = _stage(name)
                assert stage is None or stage <= own, f"{rel} imports {name} (a later stage)"
                checked += 1
    assert checked > 10
