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


# the faces that render what the planner decided: no estimate, no layout search of their own
RENDERERS = ["interfaces/launch.py", "interfaces/lab.py", "interfaces/charts.py", "interfaces/web.py"]
RENDERERS += [str(p.relative_to(ROOT)) for p in (ROOT / "interfaces" / "cli").glob("*.py")]
FORBIDDEN_IN_RENDERERS = ("gpuplan.estimators", "gpuplan.planner.layouts", "gpuplan.planner.recommend")


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
            names.extend(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
    return names


def test_renderers_import_no_estimator_or_search() -> None:
    assert len(RENDERERS) > 8
    for rel in RENDERERS:
        for name in _imports(ROOT / rel):
            assert not name.startswith(FORBIDDEN_IN_RENDERERS), f"{rel} imports {name}: renderers only render"


# a house you can read: the limits the code keeps (ast line spans, decorators excluded)
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100


def test_no_module_or_function_over_the_limits() -> None:
    too_long: list[str] = []
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        if (n := len(text.splitlines())) > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(ROOT)}: {n} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                span = (node.end_lineno or node.lineno) - node.lineno + 1
                if span > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {span} lines")
    assert not too_long, "over the limits (600 lines a module, 100 a function): " + "; ".join(too_long)
