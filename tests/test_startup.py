"""Start-up budget: a command imports only what it uses. Each case runs the real command in a fresh
interpreter and reads the modules it imported (`sys.modules` at exit: `python -X importtime`'s
report leaves out what `importlib.import_module` loads, which is how the lazy names load), so the
checks are on which modules load and how many (deterministic), never on a wall time (noisy on a
shared machine; bench/speed.py measures that, as a ratio to a bare Python start-up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

import gpuplan

SRC = Path(gpuplan.__file__).resolve().parent.parent
EXAMPLES = SRC.parent / "examples"

# Libraries no JSON answer needs: tables (rich), the web stack, the lab's solver, charts, torch.
HEAVY = ("rich", "scipy", "fastapi", "starlette", "uvicorn", "matplotlib", "plotly", "httpx", "torch", "pandas")
# gpuplan modules an estimate never needs: other commands' machinery
NOT_FOR_ESTIMATE = (
    "gpuplan.planner.layouts",
    "gpuplan.planner.lab",
    "gpuplan.planner.recommend",
    "gpuplan.interfaces.web",
    "gpuplan.interfaces.launch",
    "gpuplan.interfaces.api.charts",
    "gpuplan.interfaces.api.plan",
    "gpuplan.interfaces.api.launch",
    "gpuplan.interfaces.api.rent",
    "gpuplan.interfaces.api.validate",
    "gpuplan.results.lab",
    "gpuplan.results.ownership",
)
# The most modules (stdlib and third-party included) `estimate --json` may import: 233 when this
# budget was set, since the workload is read without pydantic (specs/workload.py), and 195 once the
# workload file's reading is cached (no PyYAML: specs/tomlcache.py plain_document);
# 294 with pydantic, 443 with Typer's parser, 503 before the lazy imports (every command's parser,
# rich, every result type, the charts and plan modules). A new eager import of a package shows here
# as tens of modules.
ESTIMATE_MODULE_BUDGET = 250
# The largest share of `estimate --json`'s import time (python -X importtime, self times) one module
# may take: the heaviest was 7% when this was set (gpuplan.interfaces.api.records, whose own time
# includes the result types it loads by name), numpy's heaviest module 8% before it left this path.
IMPORT_SHARE_MAX = 0.15


# the `gpuplan` entry point, then every module loaded, as one JSON line on stderr
RUN = (
    "import json, sys\n"
    "from gpuplan.interfaces.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)) + '\\n')\n"
    "raise SystemExit(code)\n"
)


@cache
def imported(*args: str) -> frozenset[str]:
    """The modules `gpuplan ARGS` imports in a fresh interpreter."""
    names = imported_with({}, *args)
    assert "gpuplan.interfaces.cli" in names  # the list was read
    return names


def imported_with(env: dict[str, str], *args: str) -> frozenset[str]:
    """The modules `gpuplan ARGS` imports in a fresh interpreter, with `env` added (not cached)."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1", **env}
    proc = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES "))
    return frozenset(json.loads(line.removeprefix("MODULES ")))


def import_times(*args: str) -> dict[str, int]:
    """Each module's own import time (us) as `python -X importtime` reports it for `gpuplan ARGS`."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-X", "importtime", "-c", RUN, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    times = {}
    for line in proc.stderr.splitlines():  # "import time: self [us] | cumulative | imported package"
        if line.startswith("import time:") and "self [us]" not in line:
            own, _, name = line.removeprefix("import time:").split("|")
            times[name.strip()] = int(own)
    assert "gpuplan.interfaces.cli" in times
    return times


def loaded(names: frozenset[str], packages: tuple[str, ...]) -> list[str]:
    """The packages of `packages` (or their submodules) among `names`."""
    return sorted(p for p in packages if any(n == p or n.startswith(p + ".") for n in names))


ESTIMATE_JSON = ("estimate", str(EXAMPLES / "lora-4090.yaml"), "--json")


def test_estimate_json_imports_no_tables_web_stack_or_solver() -> None:
    names = imported(*ESTIMATE_JSON)
    assert loaded(names, HEAVY) == []
    assert loaded(names, NOT_FOR_ESTIMATE) == []
    # and what it does need did load: the estimators and the workload reader, not its pydantic schema
    assert {"gpuplan.estimators.perf", "gpuplan.specs.workload", "gpuplan.results.estimate"} <= names
    assert loaded(names, ("pydantic", "pydantic_core", "annotated_types", "gpuplan.specs.workload_schema")) == []


def test_estimate_json_imports_no_numpy_nor_the_catalog_row_models(tmp_path: Path) -> None:
    """One estimate composes one layout on Python floats (estimators/comm.py), and, once the
    bundled catalog is cached, reads its GPUs back without building the pydantic row models
    (specs/gpu_cache.py) and a workload file it read before without PyYAML (specs/tomlcache.py
    plain_document); a model name as the workload reads no YAML either."""
    cache = {"GPUPLAN_CACHE_DIR": str(tmp_path)}
    cold = imported_with(cache, *ESTIMATE_JSON)  # this run fills the cache
    assert {"gpuplan.specs.gpu_rows", "yaml"} <= cold
    warm = imported_with(cache, *ESTIMATE_JSON)  # the workload file's reading comes from the cache too
    assert loaded(warm, ("numpy", "rich", "yaml", "gpuplan.specs.gpu_rows", "gpuplan.planner.layouts")) == []
    assert {"gpuplan.estimators.comm", "gpuplan.estimators.parallel"} <= warm
    by_name = imported_with(cache, "fit", "llama-3.1-8b", "--task", "lora", "--json")
    assert loaded(by_name, ("numpy", "rich", "yaml", "gpuplan.specs.gpu_rows")) == []


def test_estimate_json_import_time_has_no_single_heavy_module() -> None:
    """`python -X importtime` of `estimate --json`: no heavy library among the modules, and no
    single module's own import time above IMPORT_SHARE_MAX of the total. Shares of one run, each
    the median of three runs, not wall times: a busy machine slows every import alike. (The lazy
    names load through __import__, so each module's time is listed under its own name.)"""
    runs = [import_times(*ESTIMATE_JSON) for _ in range(3)]
    names = set().union(*runs)
    median = {n: sorted(r.get(n, 0) for r in runs)[1] for n in names}
    total = sum(median.values())
    assert loaded(frozenset(names), ("numpy", "rich", "scipy", "matplotlib", "fastapi", "torch", "pandas")) == []
    heaviest, most = max(median.items(), key=lambda kv: kv[1])
    assert most <= IMPORT_SHARE_MAX * total, f"{heaviest}: {most} us of {total} us"
    assert 150 < len(names) < ESTIMATE_MODULE_BUDGET


def test_estimate_json_stays_within_its_module_budget() -> None:
    n = len(imported(*ESTIMATE_JSON))
    assert 150 < n <= ESTIMATE_MODULE_BUDGET, f"{n} modules (budget {ESTIMATE_MODULE_BUDGET})"


def test_json_commands_build_no_tables() -> None:
    for args in (
        ("fit", "llama-3.1-8b", "--task", "lora", "--json"),
        ("plan", str(EXAMPLES / "pretrain-1b.yaml"), "--json"),
        ("estimate", "qwen2.5-7b", "--gpu", "L4", "--json"),
    ):
        names = imported(*args)
        assert loaded(names, HEAVY) == [], args
        assert loaded(names, ("typer", "click")) == [], args  # read by cli/fast.py, not Typer
        assert loaded(names, ("pydantic",)) == [], args  # the workload read from its table (specs/workload.py)
        assert loaded(names, ("gpuplan.interfaces.web", "gpuplan.planner.lab", "gpuplan.results.lab")) == [], args


def test_fit_over_every_gpu_imports_no_time_estimator() -> None:
    """A fit is memory only: the time estimators (and numpy, their array code) stay unloaded."""
    names = imported("fit", "llama-3.1-8b", "--task", "lora", "--json")
    assert loaded(names, ("numpy", "gpuplan.estimators.perf", "gpuplan.estimators.comm")) == []
    assert "gpuplan.estimators.memory" in names


def test_help_imports_no_estimator_numpy_or_pydantic() -> None:
    names = imported("--help")
    assert loaded(names, ("numpy", "pydantic", "scipy", "fastapi", "gpuplan.estimators", "gpuplan.planner")) == []
    assert "rich" in names  # the help is drawn with rich


@pytest.mark.parametrize("command", ["estimate", "plan", "gpus"])
def test_a_command_loads_its_own_module_not_every_command(command: str) -> None:
    names = imported(command, "--help")
    assert (
        loaded(names, ("gpuplan.interfaces.cli.lab", "gpuplan.interfaces.cli.rent", "gpuplan.interfaces.cli.tools"))
        == []
    )


def test_every_command_is_listed_whichever_module_loaded_first() -> None:
    """In one process (the tests' run_cli, a notebook) a command run before `--help` must not
    change what the help lists, nor its order."""
    code = (
        "import io, contextlib\n"
        "from gpuplan.interfaces.cli import main, app\n"
        "main(['version'])\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['--help'])\n"
        "print(' '.join(c.name or c.callback.__name__ for c in app.registered_commands))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    listed = out.stdout.split("\n")[1].split()
    assert listed[:4] == ["compare", "model", "models", "chart"]
    assert listed.index("plan") < listed.index("fit") < listed.index("estimate") < listed.index("validate")
    assert {"rent-vs-buy", "launch", "serve", "bench", "measure", "version"} <= set(listed)


def test_the_workload_model_is_built_without_scanning_for_pydantic_plugins() -> None:
    """Finding pydantic plugins scans every installed package's entry points: the workload schema is
    built with them off (specs/workload_schema.py), as typer builds its adapters, so reading a
    workload the fast reader leaves to it scans none; the setting is restored, and a subclass (the
    web API's bodies) still builds at once."""
    code = (
        "import io, os, contextlib\n"
        "from gpuplan.interfaces.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['estimate', 'qwen2.5-7b', '--gpu', 'L4', '--json'])\n"
        "from gpuplan.specs.workload_schema import WorkloadSchema\n"
        "import pydantic.plugin._loader as loader\n"
        "print(loader._plugins is None, 'PYDANTIC_DISABLE_PLUGINS' in os.environ)\n"
        "class Body(WorkloadSchema):\n"
        "    note: str = ''\n"
        "print(Body.__pydantic_complete__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env |= {"PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "False", "True"]


def test_an_estimate_loads_no_plugin_scan_machinery() -> None:
    """With pydantic's plugins off, its plugin loader (importlib.metadata and the email package it
    pulls in; an estimate 6-10 ms less CPU) is never imported: gpuplan._lazy's stand-in answers for it."""
    names = imported("estimate", "qwen2.5-7b", "--gpu", "L4", "--json")
    assert "gpuplan.specs.workload" in names
    assert loaded(names, ("importlib.metadata", "email", "pydantic.plugin._loader")) == []


def test_the_plugin_loader_stand_in_defers_to_the_real_module_and_leaves_no_trace() -> None:
    code = (
        "import os, sys\n"
        "from gpuplan._lazy import pydantic_plugins_off\n"
        "with pydantic_plugins_off():\n"
        "    from pydantic.plugin._loader import get_plugins, PYDANTIC_ENTRY_POINT_GROUP\n"
        "    print(tuple(get_plugins()), PYDANTIC_ENTRY_POINT_GROUP, os.environ['PYDANTIC_DISABLE_PLUGINS'])\n"
        "print('pydantic.plugin._loader' in sys.modules, 'PYDANTIC_DISABLE_PLUGINS' in os.environ)\n"
        "import pydantic.plugin._loader as real\n"
        "print(type(real).__name__, real.get_plugins is not None)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"} | {"PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:3] == ["() pydantic __all__", "False False", "module True"]
