"""LitGPT fine-tuning memory (`framework: litgpt`): LitGPT's GPT builds its own lm_head even where
the checkpoint ties it to the embedding, and Lightning's bitsandbytes plugin quantises that head and
dequantises it to fp16 then casts it to bf16 in every 4-bit matmul. Checked by hand against the
model shapes."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.estimators.memory import estimate_memory
from gpuplan.estimators.memory import training as mem_training
from gpuplan.planner.validation import bundled_rows, run_rows, stack_rows
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.precision import storage_format
from gpuplan.specs.workload import make_workload

NF4_NO_DQ = 0.5 + 4 / 64  # bytes per element: 4-bit codes + one fp32 absmax per 64-element block
GEMMA_2B_HEAD = 256000 * 2048  # vocab x d (google/gemma-2b config.json)
LLAMA2_7B_HEAD = 32000 * 4096
LLAMA2_7B_LARGEST_BLOCK = 11008 * 4096  # an MLP projection

QLORA: dict[str, Any] = {
    "task": "qlora",
    "precision": "bf16",
    "seq_len": 512,
    "batch_size": 1,
    "lora_rank": 16,
    "lora_targets": "q_proj,v_proj",
    "weight_dtype": "nf4-no-dq",
    "master_weights": "none",
    "gpu": "A10G",
}


def _lines(catalog: Catalog, **keys: Any) -> dict[str, float]:
    w = make_workload({**QLORA, **keys})
    return estimate_memory(load_model(w.model), w, catalog.get("A10G")).breakdown()


def test_nf4_no_dq_bytes_match_the_hand_figure() -> None:
    assert storage_format("nf4-no-dq").bytes_per_value == pytest.approx(NF4_NO_DQ, rel=1e-12)


def test_tied_gemma_gets_its_own_quantised_head_and_a_4_byte_dequant(catalog: Catalog) -> None:
    lit = _lines(catalog, model="google/gemma-2b", framework="litgpt")
    hf = _lines(catalog, model="google/gemma-2b")
    # one more vocab x d matrix, stored NF4 (no double quantisation)
    frozen = "frozen base weights (nf4-no-dq)"
    assert lit[frozen] - hf[frozen] == pytest.approx(GEMMA_2B_HEAD * NF4_NO_DQ, rel=1e-9)
    # the head is now the largest quantised matrix: an fp16 and a bf16 copy of it, 4 bytes per element
    assert lit["dequantisation buffer"] == pytest.approx(GEMMA_2B_HEAD * 4.0, rel=1e-9)


def test_untied_llama_head_moves_from_16_bits_to_nf4(catalog: Catalog) -> None:
    lit = _lines(catalog, model="llama-2-7b", framework="litgpt")
    hf = _lines(catalog, model="llama-2-7b")
    frozen = "frozen base weights (nf4-no-dq)"
    assert hf[frozen] - lit[frozen] == pytest.approx(LLAMA2_7B_HEAD * (2.0 - NF4_NO_DQ), rel=1e-9)
    assert lit["dequantisation buffer"] == pytest.approx(LLAMA2_7B_HEAD * 4.0, rel=1e-9)
    # outside LitGPT (PEFT + transformers: lm_head skipped, bf16 quant_state) it stays 2 bytes of a block matrix
    assert hf["dequantisation buffer"] == pytest.approx(LLAMA2_7B_LARGEST_BLOCK * 2.0, rel=1e-9)


def test_fp16_compute_keeps_one_dequantised_copy(catalog: Catalog) -> None:
    lit = _lines(catalog, model="llama-2-7b", framework="litgpt", precision="fp16")
    assert lit["dequantisation buffer"] == pytest.approx(LLAMA2_7B_HEAD * 2.0, rel=1e-9)


def test_litgpt_lora_on_a_tied_model_holds_a_bf16_head(catalog: Catalog) -> None:
    keys = {"model": "google/gemma-2b", "task": "lora", "weight_dtype": None}
    lit = _lines(catalog, framework="litgpt", **keys)
    hf = _lines(catalog, **keys)
    frozen = "frozen base weights (bf16)"
    assert lit[frozen] - hf[frozen] == pytest.approx(GEMMA_2B_HEAD * 2.0, rel=1e-9)
    assert "dequantisation buffer" not in lit


def test_only_litgpt_adapter_rows_move(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """With both LitGPT mechanisms switched off, only rows with framework litgpt and task lora/qlora
    change; every other stack's QLoRA rows (fsdp_qlora, HF Trainer, torchtune) predict the same."""
    rows = [r for r in [*bundled_rows(), *stack_rows()] if r["category"] == "memory"]
    on, _ = run_rows(rows, catalog)
    monkeypatch.setattr(mem_training, "lightning_bnb", lambda w: False)
    monkeypatch.setattr(mem_training, "litgpt_own_head", lambda model, w: 0)
    off, _ = run_rows(rows, catalog)
    before = {r.id: r for r in on}
    moved = {r.id for r in off if r.predicted != before[r.id].predicted}
    assert {"LGC-007", "LGC-013", "LGC-017", "LGC-005"} <= moved
    for rid in moved:
        wl = before[rid].workload
        assert wl.get("framework") == "litgpt" and wl.get("task") in ("lora", "qlora"), rid
