"""The answer first (QA F18): `plan`, `fit` without a GPU and `estimate` without one each print one
verdict line above their tables, and it agrees with the table and the library result."""

from __future__ import annotations

import gpuplan
from conftest import RunCli


def test_plan_names_the_winner_before_the_table(run_cli: RunCli) -> None:
    code, out, err = run_cli("plan", "examples/chat-7b.yaml")
    assert code == 0, err
    first = out.splitlines()[0]
    p = gpuplan.plan("examples/chat-7b.yaml")
    assert isinstance(p, gpuplan.Plan) and p.best is not None and p.best.serving is not None
    cost = p.best.serving.usd_per_million_tokens
    assert cost is not None
    assert (
        first == f"Best by cost: {p.best.num_gpus}× {p.best.gpu} at ${cost:.3g}/Mtok, limited by {p.best.bottleneck}."
    )
    assert first.startswith("Best by cost: 1× A40 at $0.46")  # mistral-7b, 8 x 512 + 256 tokens


def test_plan_says_when_no_card_can_run_the_precision(run_cli: RunCli) -> None:
    code, out, _ = run_cli("plan", "llama-3.1-8b", "--task", "pretrain", "--gpus", "A100", "--precision", "fp8")
    assert code == 0
    assert out.splitlines()[0] == "✗ Cannot run: fp8 training needs FP8 tensor cores; A100 SXM4 80GB has none."


def test_fit_without_a_gpu_answers_first_and_labels_its_count(run_cli: RunCli) -> None:
    code, out, err = run_cli("fit", "llama-3.1-70b", "--task", "finetune")
    assert code == 0, err
    first = out.splitlines()[0]
    t = gpuplan.fit("llama-3.1-70b", task="finetune")
    assert isinstance(t, gpuplan.FitTable) and not any(r.fits for r in t.gpus)
    r = next(r for r in t.gpus if r.min_gpus is not None)
    assert first.startswith(f"✗ Fits no single GPU type at 1; fewest by sharding alone: {r.min_gpus}× {r.gpu}")
    assert "checkpointing" in first and "GPUs needed (sharding alone)" in out
    code, out, _ = run_cli("fit", "llama-3.2-1b", "--set", "engine=transformers")
    assert code == 0 and out.splitlines()[0].startswith("✓ Fits on 1× ")


def test_estimate_without_a_gpu_says_so_first(run_cli: RunCli) -> None:
    code, out, err = run_cli("estimate", "examples/chat-7b.yaml")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("No GPU given: pass --gpu NAME")
    assert sum("No GPU given" in x for x in lines) == 1
