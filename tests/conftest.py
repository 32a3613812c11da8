"""Shared fixtures: the bundled catalog and a CLI runner that captures output and exit code."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from gpuplan.interfaces.cli import main
from gpuplan.specs.gpu import Catalog, bundled_catalog


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return bundled_catalog()


RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch) -> RunCli:
    """Run `gpuplan ARGS` in-process at a fixed terminal width; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("GPUPLAN_CATALOG", raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            monkeypatch.setattr(sys, "stdout", out)
            code = main(list(args))
        return code, out.getvalue(), err.getvalue()

    return run


@pytest.fixture(scope="session")
def accounting_conf() -> Iterator[Path]:
    """A Slurm with accounting (slurmdbd) for the session: SLURM_CONF's cluster if it has it, else
    one started and stopped for the session (helpers.slurm.accounting_cluster); shared by the
    harness tests and lab mode's."""
    from helpers.slurm import accounting_cluster

    with accounting_cluster() as conf:
        yield conf


# integration tests by module: what outside program each needs; every other test is a unit test
# (run the fast subset with `pytest -m unit`, one kind with e.g. `pytest -m slurm`)
INTEGRATION: dict[str, tuple[str, ...]] = {
    "test_lab_slurm.py": ("slurm",),
    "test_slurm_harness.py": ("slurm",),
    "test_web_browser.py": ("browser", "server"),
    "test_web_load.py": ("server",),
    "test_security_server.py": ("server",),
    "test_tool_schemas.py": ("launch_tools",),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        kinds = INTEGRATION.get(item.path.name)
        if kinds is None:  # a unit test, unless it is marked integration itself (test_launch's sbatch runs)
            if item.get_closest_marker("integration") is None:
                item.add_marker(pytest.mark.unit)
            continue
        item.add_marker(pytest.mark.integration)
        for kind in kinds:
            item.add_marker(getattr(pytest.mark, kind))
