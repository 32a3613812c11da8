"""torchtitan's per-op selective activation checkpointing (`activation_checkpointing: selective-op`):
what it keeps (the block input, every other matmul output, attention's output and log-sum-exp), what
it runs again (every other matmul and the elementwise work, not attention), and that no row of any
other stack or of the bundled files reaches the new code."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.estimators import activations
from gpuplan.estimators.activations import ActivationSettings, op_selective_bytes_per_token, stack_shapes
from gpuplan.estimators.memory import estimate_memory
from gpuplan.estimators.perf import estimate_training_time
from gpuplan.estimators.perf import training as perf_training
from gpuplan.planner.validation import bundled_rows, run_rows, stack_rows
from gpuplan.specs import frameworks
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import make_workload

LLAMA3_8B: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "task": "pretrain",
    "precision": "bf16",
    "num_gpus": 8,
    "seq_len": 8192,
    "batch_size": 1,
    "zero": 3,
    "sharding": "fsdp",
    "compile": True,
    "attention_impl": "sdpa",
    "gpu": "H100 SXM5 80GB",
}


def test_op_selective_keeps_half_the_matmul_outputs_by_hand() -> None:
    # Llama 3 8B: d 4096, Q 4096, K = V 1024 (8 KV heads), SwiGLU up 14336, 32 heads. Per token and
    # layer at 2 bytes: input 4096 x 2; half of the matmul outputs (Q+K+V+wo 4096+2x14336+w2 4096 =
    # 43008 elements) x 2; attention output 4096 x 2 + 32 fp32 log-sum-exps = 8192 + 21504 x 2 + 8320
    s = stack_shapes(load_model("llama-3.1-8b"))[0]
    cfg = ActivationSettings(bytes_per_value=2.0, checkpointing="selective-op", flash=True)
    assert op_selective_bytes_per_token(s, cfg) == pytest.approx(8192 + 43008 + 8320, rel=1e-9)
    # tensor parallelism splits the head-sized terms; the d-sized ones only with sequence parallelism
    tp2 = ActivationSettings(bytes_per_value=2.0, checkpointing="selective-op", flash=True, tp=2)
    assert op_selective_bytes_per_token(s, tp2) == pytest.approx(8192 + (34816 / 2 + 8192) + 8320 / 2, rel=1e-9)


def test_op_selective_memory_sits_between_full_and_attention_only(catalog: Catalog) -> None:
    def acts(mode: str) -> float:
        w = make_workload({**LLAMA3_8B, "activation_checkpointing": mode})
        return estimate_memory(load_model(w.model), w, catalog.get("H100 SXM5 80GB")).breakdown()["activations"]

    full, op, sel = acts("full"), acts("selective-op"), acts("selective")
    assert full < op < sel
    # 32 layers x 8192 tokens x 59,520 B = 14.5 GiB kept
    assert op == pytest.approx(32 * 8192 * 59520, rel=1e-6)


def test_op_selective_recomputes_half_the_matmuls_and_no_attention(catalog: Catalog) -> None:
    w = make_workload({**LLAMA3_8B, "activation_checkpointing": "selective-op"})
    mo = perf_training.training_ops(load_model(w.model), w, catalog.get("H100 SXM5 80GB"))
    rec = {o.name: o for o in mo.recompute}
    fwd = {o.name: o for o in mo.fwd}
    assert not any(n.startswith("attention") for n in rec)
    assert not any(n.startswith(("loss", "linear lm_head")) for n in rec)
    lin = [n for n in fwd if n.startswith("linear") and n in rec]
    assert lin, "the layers' matmuls run again"
    for n in lin:
        assert rec[n].flops == pytest.approx(0.5 * fwd[n].flops, rel=1e-12)
    ew = "norms, activations, residuals"
    assert rec[ew].bytes == pytest.approx(fwd[ew].bytes, rel=1e-12)
    # a step costs more than with no recompute and less than full recompute
    steps = {}
    for mode in ("none", "selective-op", "full"):
        wm = make_workload({**LLAMA3_8B, "activation_checkpointing": mode})
        steps[mode] = estimate_training_time(load_model(wm.model), wm, catalog.get("H100 SXM5 80GB")).step_time_s
    assert steps["none"] < steps["selective-op"] < steps["full"]


def test_torchtitan_framework_default_is_the_op_policy() -> None:
    fw = frameworks.frameworks()["torchtitan"]
    d = next(x for x in fw.defaults if x.key == "activation_checkpointing")
    assert d.value == "selective-op" and 'selective_ac_option = \\"op\\"' in d.source.replace('"', '\\"')


def _uses_op(workload: dict[str, Any]) -> bool:
    return workload.get("activation_checkpointing") == "selective-op" or workload.get("framework") == "torchtitan"


def test_no_other_stack_or_bundled_row_reaches_the_op_policy(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the op policy's memory and recompute made to fail, every row that does not declare it
    (all bundled rows but torchtitan's op-SAC one, every stack but torchtitan/torchao-float8) is
    predicted as before: the new mechanism moves no other stack's prediction."""
    before, _ = run_rows([*bundled_rows(), *stack_rows()], catalog)
    others = {r.id: r.predicted for r in before if not _uses_op(r.workload)}
    mine = {r.id for r in before if _uses_op(r.workload)}
    assert mine and len(others) > 500

    def boom(*_: Any, **__: Any) -> Any:
        raise AssertionError("the op policy was reached")

    monkeypatch.setattr(perf_training, "_op_recompute", boom)
    monkeypatch.setattr(activations, "op_selective_bytes_per_token", boom)
    import gpuplan.estimators.memory.base as mem_base

    monkeypatch.setattr(mem_base, "op_selective_bytes_per_token", boom)
    rows = [r for r in (*bundled_rows(), *stack_rows()) if r["id"] not in mine]
    after, _ = run_rows(rows, catalog)
    got = {r.id: r.predicted for r in after}
    assert got == pytest.approx(others, rel=0, abs=0)
