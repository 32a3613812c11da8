"""QLoRA's 4-bit linear (`qlora_kernel`): bitsandbytes' MatMul4Bit keeps each frozen linear's input
for backward, torchao's NF4 linear (torchtune) keeps none; only bitsandbytes QLoRA rows move."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.estimators.memory import base as mem_base
from gpuplan.estimators.memory import estimate_memory
from gpuplan.planner.validation import bundled_rows, run_rows, stack_rows
from gpuplan.specs import frameworks
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import make_workload

QLORA_7B: dict[str, Any] = {
    "model": "llama-2-7b",
    "task": "qlora",
    "precision": "bf16",
    "seq_len": 512,
    "batch_size": 2,
    "lora_rank": 32,
    "lora_targets": "q_proj,v_proj",
    "weight_dtype": "nf4",
    "gpu": "A10G",
}


def _acts(catalog: Catalog, **keys: Any) -> float:
    w = make_workload({**QLORA_7B, **keys})
    return estimate_memory(load_model(w.model), w, catalog.get("A10G")).breakdown()["activations"]


def test_bitsandbytes_keeps_the_mlp_and_down_inputs_by_hand(catalog: Catalog) -> None:
    # q,v adapters already keep the attention input; bitsandbytes adds the MLP input (d = 4096) and
    # the down projection's input (ffn = 11008) at 2 bytes: (4096 + 11008) x 2 x 32 layers x 1024 tokens
    bnb = _acts(catalog, qlora_kernel="bitsandbytes")
    tao = _acts(catalog, qlora_kernel="torchao")
    assert bnb - tao == pytest.approx((4096 + 11008) * 2 * 32 * 1024, rel=1e-9)
    assert make_workload(QLORA_7B).qlora_kernel == "bitsandbytes"  # PEFT / LitGPT / fsdp_qlora default


def test_lora_does_not_read_the_qlora_kernel(catalog: Catalog) -> None:
    assert _acts(catalog, task="lora", qlora_kernel="bitsandbytes") == _acts(
        catalog, task="lora", qlora_kernel="torchao"
    )


def test_torchtune_framework_sets_torchao() -> None:
    d = next(x for x in frameworks.frameworks()["torchtune"].defaults if x.key == "qlora_kernel")
    assert d.value == "torchao" and "nf4tensor.py@" in d.source


def test_only_bitsandbytes_qlora_rows_move(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the bitsandbytes mechanism switched off, every row but the bitsandbytes QLoRA ones (all
    other stacks, torchtune's torchao QLoRA rows, every LoRA/full/inference row) predicts the same."""
    rows = [*bundled_rows(), *stack_rows()]
    on, _ = run_rows(rows, catalog)
    monkeypatch.setattr(mem_base, "bnb_keeps_inputs", lambda w: False)
    off, _ = run_rows(rows, catalog)
    before = {r.id: r for r in on}
    moved = {r.id for r in off if r.predicted != before[r.id].predicted}
    assert moved, "some bitsandbytes QLoRA memory rows use the mechanism"
    for r in off:
        wl = before[r.id].workload
        bnb = wl.get("task") == "qlora" and wl.get("qlora_kernel", "bitsandbytes") == "bitsandbytes"
        if r.id in moved:
            assert bnb, r.id
        if not bnb:
            assert r.predicted == before[r.id].predicted, r.id
    torchtune = [r for r in on if r.workload.get("qlora_kernel") == "torchao"]
    assert torchtune and not {r.id for r in torchtune} & moved
