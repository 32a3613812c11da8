"""The public library (`import gpuplan`): its functions take a Workload, a dict or a YAML path,
return typed results with attributes, and `to_dict()` is exactly the CLI's `--json` document."""

from __future__ import annotations

import dataclasses
import doctest
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gpuplan
import gpuplan.library
from conftest import RunCli
from helpers.golden_cases import EXAMPLES, ROOT

LORA = EXAMPLES / "lora-4090.yaml"


def test_the_documented_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every docstring example of gpuplan/library.py, as written (paths relative to the repo)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GPUPLAN_CATALOG", raising=False)
    monkeypatch.delenv("GPUPLAN_PRICES", raising=False)
    failed, tried = doctest.testmod(gpuplan.library, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried >= 20 and failed == 0


def test_the_readme_library_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's "As a library" session, run as a doctest: its outputs are what gpuplan gives."""
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GPUPLAN_CATALOG", raising=False)
    monkeypatch.delenv("GPUPLAN_PRICES", raising=False)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## As a library", 1)[1].split("\n## ", 1)[0]
    sessions = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if ">>> " in b]
    assert sessions
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for text in sessions:
        runner.run(parser.get_doctest(text, {}, "README", "README.md", 0))
    assert runner.failures == 0 and runner.tries >= 10


def test_public_names() -> None:
    for name in ("Workload", "estimate", "fit", "plan", "launch", "validate", "catalog", "model", "lab", "Context"):
        assert name in gpuplan.__all__
        assert getattr(gpuplan, name) is not None
    with pytest.raises(AttributeError):
        _ = gpuplan.no_such_name


def test_import_is_cheap() -> None:
    """`import gpuplan` loads none of the library until a name is used (the CLI's start-up)."""
    code = "import sys, gpuplan; print(sorted(m for m in ('numpy', 'pydantic', 'gpuplan.library') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_estimate_from_a_dict_a_workload_and_a_path_agree() -> None:
    keys: dict[str, Any] = {
        "model": "llama-3.1-8b",
        "task": "lora",
        "gpu": "RTX 4090",
        "batch_size": 2,
        "seq_len": 2048,
    }
    a = gpuplan.estimate(keys, lora_rank=8, activation_checkpointing="full", optimizer="adamw")
    b = gpuplan.estimate(gpuplan.Workload(**keys, lora_rank=8, activation_checkpointing="full"))
    c = gpuplan.estimate(LORA)
    assert a.to_dict() == b.to_dict() == c.to_dict()
    # the attributes the README documents
    assert a.memory.per_gpu_bytes == a.to_dict()["memory"]["per_gpu_bytes"]
    assert isinstance(a.time, gpuplan.TrainingSpeed)
    assert a.time.tokens_per_s > 0 and a.cost is not None and a.energy is not None
    assert a.verdict.fits is True and a.verdict.short_by_bytes is None
    assert a.memory.capacity_bytes is not None
    assert a.verdict.headroom_bytes == pytest.approx(a.memory.capacity_bytes - a.memory.per_gpu_bytes)


def test_a_verdict_that_does_not_fit() -> None:
    r = gpuplan.estimate("llama-3.1-70b", gpu="RTX 4090", task="inference", batch_size=1)
    v = r.verdict
    assert v.fits is False and v.headroom_bytes is None
    assert v.short_by_bytes is not None and r.memory.capacity_bytes is not None
    assert v.short_by_bytes == pytest.approx(r.memory.per_gpu_bytes - r.memory.capacity_bytes)
    assert v.short_by_bytes > 100 * 2**30  # 70B of bf16 weights on 24 GB


def test_results_are_frozen() -> None:
    r = gpuplan.estimate(LORA)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.memory.per_gpu_bytes = 0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("call", "argv"),
    [
        (lambda: gpuplan.estimate(LORA), ["estimate", str(LORA)]),
        (lambda: gpuplan.estimate(EXAMPLES / "serve-70b.yaml"), ["estimate", str(EXAMPLES / "serve-70b.yaml")]),
        (lambda: gpuplan.estimate("llama-3.2-1b"), ["estimate", "llama-3.2-1b"]),
        (lambda: gpuplan.fit(LORA), ["fit", str(LORA)]),
        (lambda: gpuplan.fit("llama-3.2-1b", task="lora"), ["fit", "llama-3.2-1b", "--set", "task=lora"]),
        (lambda: gpuplan.plan(EXAMPLES / "chat-7b.yaml"), ["plan", str(EXAMPLES / "chat-7b.yaml")]),
        (lambda: gpuplan.plan(EXAMPLES / "stream-4k.yaml"), ["plan", str(EXAMPLES / "stream-4k.yaml")]),
        (
            lambda: gpuplan.plan(EXAMPLES / "pretrain-1b.yaml", cluster="2x8:A100", top=5),
            ["plan", str(EXAMPLES / "pretrain-1b.yaml"), "--cluster", "2x8:A100", "--top", "5"],
        ),
        (
            lambda: gpuplan.launch(LORA, "slurm", partition="gpu"),
            ["launch", str(LORA), "--format", "slurm", "--partition", "gpu"],
        ),
    ],
)
def test_to_dict_is_the_cli_json(call: object, argv: list[str], run_cli: RunCli) -> None:
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    result = call()  # type: ignore[operator]
    cli = json.loads(out)
    if "search" in cli:  # the layout search's wall time differs run to run
        cli["search"]["seconds"] = result.search.seconds
    assert result.to_dict() == cli


def test_validate_and_lab_and_model(run_cli: RunCli) -> None:
    v = gpuplan.validate(category="memory")
    code, out, _ = run_cli("validate", "--category", "memory", "--json")
    assert code == 0 and v.to_dict() == json.loads(out)
    assert all(isinstance(r, gpuplan.ValidationRow) for r in v.rows)
    m = gpuplan.model("llama-3.1-8b")
    assert m.total_params == 8_030_261_248  # Meta's 8.03B; equals transformers on the meta device
    a = gpuplan.lab(EXAMPLES / "lab.yaml", "makespan")
    code, out, _ = run_cli("lab", "allocate", str(EXAMPLES / "lab.yaml"), "--policy", "makespan", "--json")
    assert code == 0 and a.to_dict() == json.loads(out)


def test_a_bad_workload_is_one_clear_error() -> None:
    with pytest.raises(gpuplan.InvalidSettingError, match="batch_size"):
        gpuplan.estimate({"model": "llama-3.1-8b", "batch_size": -1})
    with pytest.raises(gpuplan.InvalidSettingError, match="Workload"):
        gpuplan.workload(42)  # type: ignore[arg-type]
    with pytest.raises(gpuplan.InvalidSettingError, match="not both"):
        gpuplan.catalog("x.toml", context=gpuplan.context())


def test_a_context_is_reused(tmp_path: Path) -> None:
    ctx = gpuplan.context(prices=tmp_path / "p.csv")
    (tmp_path / "p.csv").write_text("gpu,provider,price_per_hour_usd,date_or_version,source\nT4,lab,0.05,2026,own\n")
    r = gpuplan.estimate("llama-3.2-1b", gpu="T4", tokens=1e6, task="inference", context=ctx)
    assert r.cost is not None and r.cost.usd_per_gpu_hour == pytest.approx(0.05)


def test_the_api_reference_is_current() -> None:
    """docs/api.md is generated from the docstrings: a changed docstring regenerates it."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "api_reference.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
