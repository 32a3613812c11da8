"""The `--json` answers of `estimate`, `fit` and `plan` without loading the command-line framework.

A planner is used like a calculator, from shell loops and scripts that read its JSON; importing
Typer (and the vendored click under it) and building a command's parser takes about as long as the
estimate itself on a 2-core machine. A command line made only of a workload argument, the options
below and `--json` is read here by hand and answered by the same functions the Typer commands call
(cli/answers.py), so the output is byte for byte the same (tests/test_cli_fast.py runs both).

Anything else (`--help`, an option this table lacks, a value the option's type refuses, `--`, a
second argument) returns None and the Typer command reads the line, so every usage error keeps
Typer's own message and exit code 2. The table is held equal to the Typer commands' options by a
test (names, repeatable, flag or value, type).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from gpuplan.interfaces.cli.answers import (
    TOP_MAX,
    TOP_MIN,
    WORKLOAD_FLAGS,
    carbon_ok,
    emit_json,
    estimate_answer,
    fit_answer,
    plan_answer,
)

if TYPE_CHECKING:
    from gpuplan.results.base import Result

_STR: Final = "str"
_INT: Final = "int"
_FLOAT: Final = "float"
_PATH: Final = "path"
_FLAG: Final = "flag"  # takes no value

# option -> (parameter, kind, repeatable), each command's as its Typer signature declares them
Options = Mapping[str, tuple[str, str, bool]]
_KIND: Final = {str: _STR, int: _INT, float: _FLOAT}
_WORKLOAD: Final[dict[str, tuple[str, str, bool]]] = {f.flag: (f.param, _KIND[f.kind], False) for f in WORKLOAD_FLAGS}
_COMMON: Final[dict[str, tuple[str, str, bool]]] = {
    **_WORKLOAD,
    "--set": ("set_", _STR, True),
    "--catalog": ("catalog", _PATH, True),
    "--calibration": ("calibration", _PATH, True),
    "--json": ("as_json", _FLAG, False),
}
OPTIONS: Final[dict[str, Options]] = {
    "estimate": {**_COMMON, "--prices": ("prices", _PATH, False), "--carbon": ("carbon", _FLOAT, False)},
    "fit": _COMMON,
    "plan": {
        **_COMMON,
        "--objective": ("objective", _STR, False),
        "--deadline": ("deadline", _STR, False),
        "--budget": ("budget", _FLOAT, False),
        "--gpus": ("gpus", _STR, False),
        "--top": ("top", _INT, False),
        "--prices": ("prices", _PATH, False),
        "--spot": ("spot", _FLAG, False),
        "--carbon": ("carbon", _FLOAT, False),
        "--cluster": ("cluster", _STR, False),
        "--allow-cross-node-tp": ("cross_node_tp", _FLAG, False),
        "--have": ("have", _STR, False),
    },
}


def _accepts(param: str, value: Any) -> bool:
    """The checks the Typer options make beyond their type (their callbacks and ranges): a value
    they would refuse is left to them, so the error is theirs. --budget: finite (common.finite);
    --carbon: carbon_ok (common.carbon_intensity); --top: TOP_MIN to TOP_MAX (its IntRange)."""
    if param == "budget":
        return math.isfinite(value)
    if param == "carbon":
        return carbon_ok(value)
    if param == "top":
        return bool(TOP_MIN <= value <= TOP_MAX)
    return True


def _convert(kind: str, raw: str) -> Any:
    """A value as the option's type reads it (click's INT, FLOAT, Path); ValueError if refused."""
    if kind == _INT:
        return int(raw)
    if kind == _FLOAT:
        return float(raw)
    return Path(raw) if kind == _PATH else raw


def parse(command: str, args: Sequence[str]) -> dict[str, Any] | None:
    """The parameters of `command ARGS` as its Typer command would receive them, or None where this
    reader leaves the line to Typer (anything but a workload argument, known options and --json)."""
    table = OPTIONS[command]
    values: dict[str, Any] = {}
    workload: str | None = None
    i = 0
    while i < len(args):
        token = args[i]
        if not token.startswith("-") or token == "-":
            if workload is not None:
                return None  # a second argument: Typer's error
            workload, i = token, i + 1
            continue
        name, eq, inline = token.partition("=")
        spec = table.get(name)
        if spec is None:
            return None  # --help, --, an unknown or misspelt option: Typer's answer
        param, kind, repeatable = spec
        if kind == _FLAG:
            if eq:
                return None  # a flag given a value
            values[param], i = True, i + 1
            continue
        if eq:
            raw, i = inline, i + 1
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            raw, i = args[i + 1], i + 2
        else:
            return None  # the value is missing, or looks like an option: Typer decides
        try:
            value = _convert(kind, raw)
        except ValueError:
            return None
        if not _accepts(param, value):
            return None
        if repeatable:
            values.setdefault(param, []).append(value)
        else:
            values[param] = value  # given twice, the last wins (click)
    if not values.get("as_json"):
        return None  # tables: the Typer command draws them
    values["workload"] = workload
    return values


def _estimate(v: dict[str, Any], flags: dict[str, Any]) -> Result:
    return estimate_answer(
        v["workload"], flags, v.get("prices"), v.get("carbon"), v.get("set_"), v.get("catalog"), v.get("calibration")
    )


def _fit(v: dict[str, Any], flags: dict[str, Any]) -> Result:
    return fit_answer(v["workload"], flags, v.get("set_"), v.get("catalog"), v.get("calibration"))


def _plan(v: dict[str, Any], flags: dict[str, Any]) -> Result:
    shared = {"workload", "set_", "as_json", *(f.param for f in WORKLOAD_FLAGS)}
    own = {k: value for k, value in v.items() if k not in shared}  # plan's own options, by parameter name
    return plan_answer(v["workload"], flags, v.get("set_"), **own)


_RUN: Final[dict[str, Callable[[dict[str, Any], dict[str, Any]], Result]]] = {
    "estimate": _estimate,
    "fit": _fit,
    "plan": _plan,
}


def answer(args: Sequence[str]) -> bool:
    """Print the JSON answer of `gpuplan ARGS` and return True, or return False (nothing printed)
    where the Typer command must read the line. Errors (GpuplanError) propagate to cli.main."""
    if not args or args[0] not in _RUN:
        return False
    values = parse(args[0], args[1:])
    if values is None:
        return False
    flags = {f.key: values.get(f.param) for f in WORKLOAD_FLAGS}
    emit_json(_RUN[args[0]](values, flags))
    return True
