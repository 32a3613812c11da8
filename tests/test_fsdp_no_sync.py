"""Gradient accumulation under FSDP's no_sync (`fsdp_no_sync`): each GPU holds the full unsharded
gradients until the last micro-batch (PyTorch FullyShardedDataParallel.no_sync docstring), as
LitGPT's finetune/full.py does with fabric.no_backward_sync; the optimizer step reads the shard."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.estimators.memory import estimate_memory
from gpuplan.planner.validation import run_rows, stack_rows
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import make_workload

# LitGPT's config_hub/finetune/gemma-2b/full.yaml: 4 devices, global batch 16, micro-batch 1
GEMMA_FULL: dict[str, Any] = {
    "model": "google/gemma-2b",
    "task": "finetune",
    "precision": "bf16",
    "num_gpus": 4,
    "seq_len": 512,
    "batch_size": 1,
    "grad_accum": 4,
    "activation_checkpointing": "full",
    "zero": 3,
    "sharding": "fsdp",
    "master_weights": "none",
    "optimizer": "adamw-foreach",
    "gpu": "A10G",
}


def _phases(catalog: Catalog, **keys: Any) -> dict[str, float]:
    w = make_workload({**GEMMA_FULL, **keys})
    return estimate_memory(load_model(w.model), w, catalog.get("A10G")).phases


def test_no_sync_holds_the_unsharded_gradients_through_backward(catalog: Catalog) -> None:
    model = load_model("google/gemma-2b")
    sharded = _phases(catalog, fsdp_no_sync=False)
    no_sync = _phases(catalog, fsdp_no_sync=True)
    # bf16 gradients of every parameter: 4 GPUs hold the whole 2 B x params instead of a quarter,
    # plus the allocator's 5% slack on it (the phase totals are device figures)
    extra = model.total_params * 2.0 * (1 - 1 / 4)
    assert no_sync["forward/backward"] - sharded["forward/backward"] == pytest.approx(extra * 1.05, rel=1e-9)
    assert extra / 2**30 == pytest.approx(3.51, abs=0.01)  # 2.51B params
    # the sync's reduce-scatter leaves the shard for the optimizer step: only the slack, taken on
    # the step's peak allocation, grows with it
    assert no_sync["optimizer step"] - sharded["optimizer step"] == pytest.approx(extra * 0.05, rel=1e-9)


def test_no_sync_needs_accumulation_and_sharding(catalog: Catalog) -> None:
    # one micro-batch a step: nothing is accumulated, every backward syncs
    assert _phases(catalog, fsdp_no_sync=True, grad_accum=1) == _phases(catalog, grad_accum=1)
    # DeepSpeed ZeRO-3 has no no_sync: its gradients stay partitioned
    assert _phases(catalog, fsdp_no_sync=True, sharding="deepspeed") == _phases(catalog, sharding="deepspeed")


def test_litgpt_gemma_2b_fsdp_full_fine_tune_row(catalog: Catalog) -> None:
    # LGC-004: 17.43 GB measured; 7.9 GB predicted before (no checkpointing, sharded gradients), 55% low;
    # now 10.2 GB, 41.5% low: the rest is not explained (README, Everyday stacks)
    rows = [r for r in stack_rows() if r["id"] in ("LGC-004", "LGC-014", "LGC-018")]
    results = {r.id: r for r in run_rows(rows, catalog)[0]}
    assert results["LGC-004"].error == pytest.approx(-0.415, abs=0.005)
    # Llama 2 7B and Llama 3 8B on 4 A10Gs: out of memory, as the table says
    assert results["LGC-014"].error == 0.0 and results["LGC-018"].error == 0.0
