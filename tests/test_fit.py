"""Verdicts and inverse questions: GPU counts, the largest batch, the longest context, suggestions."""

from __future__ import annotations

import json

import pytest

from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.estimators.memory import estimate_memory
from gpuplan.estimators.perf import estimate_inference_time
from gpuplan.interfaces import api
from gpuplan.planner.fit import best_precision, largest_batch, longest_context, smallest_gpu_count, suggestions
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.model import model_from_config
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import make_workload


def test_smallest_gpu_count_is_tight(catalog: Catalog) -> None:
    m = load_model("llama-2-70b")
    w = make_workload({"model": "llama-2-70b", "task": "finetune", "seq_len": 1024, "activation_checkpointing": "full"})
    a100 = catalog.get("A100 80GB")
    c = smallest_gpu_count(m, w, a100)
    assert c.num_gpus is not None and c.num_gpus > 8  # 70B x 16 B/param = 1.1 TB of states
    assert c.estimate is not None and c.estimate.fits
    fewer = w.with_(num_gpus=c.num_gpus // 2, zero=3)
    assert not estimate_memory(m, fewer, a100).fits


def test_inference_count_uses_tensor_parallelism(catalog: Catalog) -> None:
    m = load_model("llama-2-70b")
    w = make_workload({"model": "llama-2-70b", "task": "inference"})
    c = smallest_gpu_count(m, w, catalog.get("L40S"))
    assert c.num_gpus == 4 and c.layout["tp"] == 4  # 138 GB of bf16 weights over 48 GB cards


def test_gpu_count_splits_kv_heads_as_the_engines_do(catalog: Catalog) -> None:
    """Phi-3-medium (microsoft/Phi-3-medium-4k-instruct config.json): 40 query heads, 10 KV heads.
    Four ranks divide the query heads but neither divide the KV heads nor are a multiple of them,
    which vLLM refuses; fit, plan and the estimators share one rule and fall back to layers."""
    cfg = {"model_type": "phi3", "hidden_size": 5120, "num_hidden_layers": 40, "num_attention_heads": 40,
           "num_key_value_heads": 10, "intermediate_size": 17920, "vocab_size": 32064,
           "max_position_embeddings": 4096}  # fmt: skip
    m = model_from_config(cfg, "phi-3-medium")
    assert m.total_params == 13_960_238_080  # "14B"
    assert [t for t in (1, 2, 4, 5, 8, 10, 20, 40) if m.tp_splits_heads(t)] == [1, 2, 5, 10, 20, 40]
    w = make_workload({"model": "phi-3-medium", "task": "inference", "input_len": 2048, "output_len": 256,
                       "batch_size": 4})  # fmt: skip
    c = smallest_gpu_count(m, w, catalog.get("T4"))  # 28 GB of bf16 weights over 16 GB cards
    assert c.num_gpus == 4 and c.layout == {"num_gpus": 4, "tp": 1, "pp": 4}
    assert smallest_gpu_count(m, w, catalog.get("L4")).layout["tp"] == 2
    for estimate in (estimate_memory, estimate_inference_time):
        with pytest.raises(InvalidSettingError, match="tp=4 must divide the 10 KV heads or be a multiple"):
            estimate(m, w.with_(num_gpus=4, tp=4), catalog.get("L4"))


def test_largest_batch_and_longest_context_are_boundaries(catalog: Catalog) -> None:
    m = load_model("llama-3.1-8b")
    gpu = catalog.get("4090")
    w = make_workload({"model": "llama-3.1-8b", "task": "qlora", "seq_len": 2048, "activation_checkpointing": "full"})
    b = largest_batch(m, w, gpu)
    assert b >= 1
    assert estimate_memory(m, w.with_(batch_size=b), gpu).fits
    assert not estimate_memory(m, w.with_(batch_size=b + 1), gpu).fits
    n = longest_context(m, w, gpu)
    assert estimate_memory(m, w.with_(seq_len=n), gpu).fits
    assert not estimate_memory(m, w.with_(seq_len=n + 1), gpu).fits


def test_best_precision_for_a_big_model_on_one_card(catalog: Catalog) -> None:
    m = load_model("llama-2-70b")
    w = make_workload({"model": "llama-2-70b", "task": "inference", "input_len": 1024, "output_len": 256})
    assert best_precision(m, w, catalog.get("H100")) == ("fp8", "bf16")  # 70 GB of fp8 weights fit 80 GB
    assert best_precision(m, w, catalog.get("4090")) is None  # even 2-bit is 18 GB + cache


def test_suggestions_fit_first_with_effects(catalog: Catalog) -> None:
    m = load_model("llama-3.1-8b")
    w = make_workload({"model": "llama-3.1-8b", "task": "lora", "batch_size": 2, "seq_len": 2048})
    gpu = catalog.get("4090")
    base = estimate_memory(m, w, gpu)
    assert not base.fits
    s = suggestions(m, w, gpu)
    assert s and s[0].fits and s[0].label == "full activation checkpointing"
    assert all(x.per_gpu_bytes < base.per_gpu_bytes for x in s)
    fits_flags = [x.fits for x in s]
    assert fits_flags == sorted(fits_flags, reverse=True)


def test_paged_8bit_adamw_is_offered_and_counted_on_the_card(catalog: Catalog) -> None:
    """Full fine-tuning of an 8B model on one 24 GB card: fused AdamW needs ~52 GiB; torchtune's
    recipe swaps in bitsandbytes' PagedAdamW8bit, whose states beyond the card wait in host RAM.
    The suggestion reports what stays on the card (the usable memory, here), and fits."""
    m = load_model("llama-3.1-8b")
    w = make_workload({"model": "llama-3.1-8b", "task": "finetune", "batch_size": 2, "seq_len": 2048,
                       "activation_checkpointing": "full", "master_weights": "none",
                       "optimizer_in_backward": True, "loss_impl": "chunked"})  # fmt: skip
    gpu = catalog.get("4090")
    assert not estimate_memory(m, w, gpu).fits
    paged = next(x for x in suggestions(m, w, gpu) if x.label == "paged 8-bit AdamW")
    e = estimate_memory(m, w.with_(optimizer="paged-adamw-8bit"), gpu)
    assert paged.fits and e.fits and e.paged_spill_bytes > 0
    assert paged.per_gpu_bytes == pytest.approx(e.on_card_bytes) == pytest.approx(e.capacity_bytes)
    # on several GPUs ZeRO shards the states instead: no paged suggestion
    assert all(x.label != "paged 8-bit AdamW" for x in suggestions(m, w.with_(num_gpus=2, zero=3), gpu))


def test_fit_table_shows_paged_states_in_host_ram(run_cli: RunCli) -> None:
    """Over all GPUs, a card that holds the job only with paged states in host RAM says so."""
    # torchtune's 8B_full_single_device: PagedAdamW8bit, pure bf16, optimizer in backward, chunked loss
    sets = ("optimizer=paged-adamw-8bit", "master_weights=none", "optimizer_in_backward=true", "loss_impl=chunked")
    keys = [arg for kv in sets for arg in ("--set", kv)]
    code, out, err = run_cli("fit", "llama-3.1-8b", "--task", "finetune", "--batch-size", "2", "--seq-len", "2048",
                             "--checkpointing", "full", *keys, "--json")  # fmt: skip
    assert code == 0, err
    rows = {r["gpu"]: r for r in json.loads(out)["gpus"]}
    g4090, a100 = rows["GeForce RTX 4090"], rows["A100 SXM4 80GB"]
    assert g4090["fits"] and g4090["paged_spill_bytes"] > 10 * 2**30 and g4090["min_gpus"] == 1
    assert a100["fits"] and a100["paged_spill_bytes"] == 0.0
    code, out, _ = run_cli("fit", "llama-3.1-8b", "--task", "finetune", "--batch-size", "2", "--seq-len", "2048",
                           "--checkpointing", "full", *keys)  # fmt: skip
    line = next(x for x in out.splitlines() if "GeForce RTX 4090 " in x)
    assert "of paged states in host RAM" in line
    # a card too small even with every paged state in host RAM says what must stay on it
    code, out, _ = run_cli("fit", "llama-3.1-8b", "--task", "finetune", "--batch-size", "2", "--seq-len", "2048",
                           "--checkpointing", "full", *keys, "--gpu", "T4")  # fmt: skip
    assert "does not fit on T4" in out and "must stay on the card" in out and "paged optimizer states" in out


@pytest.mark.parametrize("engine", ["autoawq", "transformers"])
def test_accelerate_device_map_engines_spread_whole_layers_not_tensor_parallel(engine: str) -> None:
    """AutoAWQ (from_quantized's device_map="balanced") and transformers' generate (device_map="auto")
    place whole layers on each GPU and run them in turn: the fixes, the fewest GPUs and a plan's
    multi-GPU options split layers (pp = n, tp = 1) and are no faster than one card would be, where
    tensor parallelism (what the fixes offered before) would have divided the weight reads."""
    from gpuplan.planner.fit import serving_layout, smallest_gpu_count
    from gpuplan.planner.recommend import evaluate

    w = api.build_workload(None, {"model": "llama-3.1-70b", "task": "inference", "engine": engine,
                                   "gpu": "RTX 4090"})  # fmt: skip
    model, gpu = api.get_model(w.model), api.catalog().get("RTX 4090")
    assert serving_layout(model, w, 4, gpu) == {"num_gpus": 4, "tp": 1, "pp": 4}
    fixes = api.estimate(w).verdict.fixes
    multi = [f for f in fixes if (f.changes.get("num_gpus") or 1) > 1]
    assert multi and all(f.changes.get("tp", 1) == 1 and f.changes.get("pp") == f.changes["num_gpus"] for f in multi)
    assert all("tensor parallel" not in f.label for f in fixes)
    count = smallest_gpu_count(model, w, gpu)
    assert count.num_gpus is not None and count.layout.get("pp") == count.num_gpus and count.layout.get("tp") == 1
    small = w.with_(model="llama-3.1-8b")
    m8 = api.get_model("llama-3.1-8b")
    two, four = evaluate(m8, small, gpu, 2, None), evaluate(m8, small, gpu, 4, None)
    assert two.fits and four.fits
    assert two.layout == {"num_gpus": 2, "tp": 1, "pp": 2} and four.layout == {"num_gpus": 4, "tp": 1, "pp": 4}
    # in turn: more GPUs hold it, none makes a request faster (only the hops between stages add)
    assert two.time_s is not None and four.time_s is not None and four.time_s >= two.time_s
    # vLLM keeps tensor parallelism
    assert serving_layout(model, w.with_(engine="vllm", weight_dtype="awq"), 4, gpu) == {
        "num_gpus": 4,
        "tp": 4,
        "pp": 1,
    }
