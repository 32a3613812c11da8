"""torchtitan's async TP (tp_comm_overlap under framework: torchtitan): it hides a fitted share of
the TP collectives (estimators/comm.ASYNC_TP_HIDDEN) under torch.compile only, far less than
Megatron-Core's overlap; the fit reads the async/vanilla ratios of the split=fit pairs of
torchtitan's async-TP benchmark (stacks.csv TTAT-*), and the job TOML switches it on."""

from __future__ import annotations

import tomllib

import pytest

from gpuplan.estimators import comm
from gpuplan.interfaces import api
from gpuplan.planner import stack_fits
from gpuplan.planner.validation import bundled_rows, run_rows, stack_rows
from gpuplan.results import TrainingSpeed
from gpuplan.specs.gpu import Catalog

ROWS = stack_rows()
# torchtitan's async-TP benchmark: Llama 3.1 8B, FSDP 8 x TP 8 on 64 H100s, per-op SAC, compile
# (pytorch/torchtitan:benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md@2887250b)
KEYS = {
    "task": "pretrain", "precision": "bf16", "num_gpus": 64, "seq_len": 8192, "batch_size": 12, "tp": 8,
    "sequence_parallel": True, "activation_checkpointing": "selective-op", "zero": 3, "sharding": "fsdp",
    "compile": True, "attention_impl": "sdpa", "gpu": "H100 SXM5 80GB",
}  # fmt: skip


def _tps(**extra: object) -> float:
    est = api.estimate(api.build_workload("llama-3.1-8b", {**KEYS, **extra}))
    assert isinstance(est.time, TrainingSpeed)
    return est.time.tokens_per_s


def test_async_tp_hides_a_fitted_share_under_compile_only() -> None:
    vanilla = _tps(framework="torchtitan")
    async_tp = _tps(framework="torchtitan", tp_comm_overlap=True)
    megatron = _tps(tp_comm_overlap=True)  # no framework: Megatron-Core's userbuffer overlap
    # published: 4,809.4 / 4,378 = 1.099x on this workload (a split=fit pair); 1.04-1.16x on all six
    assert async_tp / vanilla == pytest.approx(1.099, abs=0.02)
    assert megatron / vanilla > async_tp / vanilla + 0.08  # Megatron's overlap hides twice the share
    # without torch.compile torchtitan does not apply async TP: nothing hidden
    assert _tps(framework="torchtitan", tp_comm_overlap=True, compile=False) == _tps(
        framework="torchtitan", compile=False
    )
    assert comm.tp_overlap_share(False, "torchtitan", True) == 0.0
    assert comm.tp_overlap_share(True, None, False) == comm.OVERLAP_EFF


def test_the_committed_share_is_what_the_fit_finds(catalog: Catalog) -> None:
    assert stack_fits.fit_async_tp(ROWS, catalog) == comm.ASYNC_TP_HIDDEN["torchtitan"]
    pairs = stack_fits.async_tp_pairs(ROWS)
    assert [(v["id"], a["id"]) for v, a in pairs] == [("TTAT-001", "TTAT-002"), ("TTAT-007", "TTAT-008"),
                                                      ("TTAT-009", "TTAT-010")]  # fmt: skip
    assert all(v["split"] == a["split"] == "fit" for v, a in pairs)
    # a held-out row's figure cannot move the fit: scaled 10x, the share comes out the same
    scaled = [
        type(r)({**r.fields, "value": repr(float(r["value"]) * 10)}) if r["split"] == "heldout" else r for r in ROWS
    ]
    assert stack_fits.fit_async_tp(scaled, catalog) == comm.ASYNC_TP_HIDDEN["torchtitan"]


def test_the_share_moves_only_torchtitan_async_tp_rows(catalog: Catalog) -> None:
    rows = [*ROWS, *bundled_rows()]  # the vendor files too (their overlap rows are Megatron's)
    base, _ = run_rows(rows, catalog)
    with stack_fits.restored():
        comm.ASYNC_TP_HIDDEN["torchtitan"] = 0.0
        moved, _ = run_rows(rows, catalog)
    changed = {a.id for a, b in zip(base, moved, strict=True) if a.predicted != b.predicted}
    assert changed == {"TTAT-002", "TTAT-004", "TTAT-006", "TTAT-008", "TTAT-010", "TTAT-012"}
    assert comm.ASYNC_TP_HIDDEN["torchtitan"] == 0.41


def test_torchtitan_toml_turns_async_tp_on_with_compile() -> None:
    keys = {**KEYS, "framework": "torchtitan", "tp_comm_overlap": True}
    rec = api.launch("llama-3.1-8b", "torchtitan", keys)
    doc = tomllib.loads(rec.text)
    assert doc["parallelism"]["enable_async_tensor_parallel"] is True
    assert doc["training"]["compile"] is True
    off = api.launch("llama-3.1-8b", "torchtitan", {**keys, "compile": False})
    assert "enable_async_tensor_parallel" not in tomllib.loads(off.text)["parallelism"]
    assert "async TP (tp_comm_overlap) left off" in off.text
