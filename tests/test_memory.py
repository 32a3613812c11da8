"""The memory estimator: each term against a hand computation, and the properties it must keep.

Hand-computed values follow the formulas cited in the estimator (ZeRO paper sec. 3.1 for model
states, Korthikanti et al. 2022 sec. 4.1 for activations, Hu et al. 2021 for LoRA).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan.errors import GpuplanError
from gpuplan.estimators.lora import lora_param_count
from gpuplan.estimators.memory import MemoryEstimate, estimate_memory
from gpuplan.specs.gpu import GIB, Catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import make_workload


def est(catalog: Catalog, **keys: Any) -> MemoryEstimate:
    w = make_workload(keys)
    return estimate_memory(load_model(w.model), w, catalog.get(w.gpu) if w.gpu else None)


def phase_line(e: MemoryEstimate, name: str) -> float:
    return e.breakdown()[name]


# --- model states ---------------------------------------------------------------------------


def test_fp32_full_finetune_is_16_bytes_per_param(catalog: Catalog) -> None:
    # PEFT README: T0_3B full fine-tuning in fp32 took 47.14 GB on an A100 80GB; Adam in fp32 is
    # 4 (weights) + 4 (grads) + 8 (moments) = 16 bytes/param (ZeRO paper sec. 3.1)
    e = est(catalog, model="t0-3b", task="finetune", precision="fp32", gpu="A100 80GB", batch_size=8, seq_len=64)
    p = load_model("t0-3b").total_params
    b = e.breakdown()
    assert b["weights (fp32)"] == pytest.approx(4 * p)
    assert b["gradients"] == pytest.approx(4 * p)
    assert b["optimizer states"] == pytest.approx(8 * p)
    assert 16.0 <= e.allocated_bytes / p <= 16.6
    assert e.fits


def test_mixed_precision_states_follow_zero_paper(catalog: Catalog) -> None:
    p = load_model("llama-3.2-1b").total_params
    base = dict(model="llama-3.2-1b", task="finetune", precision="bf16", gpu="H100", seq_len=512)
    e0 = est(catalog, **base)
    b0 = e0.breakdown()
    assert b0["weights (bf16)"] == pytest.approx(2 * p)
    assert b0["master weights (fp32)"] == pytest.approx(4 * p)
    assert e0.breakdown().get("gradients", 4 * p) == pytest.approx(4 * p)  # AMP keeps fp32 grads
    # ZeRO-3 over 8 GPUs: (2 + 2 + 12) / 8 bytes per parameter
    e3 = est(catalog, **base, num_gpus=8, zero=3)
    b3 = e3.breakdown()
    assert b3["weights (bf16)"] == pytest.approx(2 * p / 8)
    assert b3["master weights (fp32)"] == pytest.approx(4 * p / 8)
    assert b3["optimizer states"] == pytest.approx(8 * p / 8)
    assert b3["gradients"] == pytest.approx(2 * p / 8)


def test_pure_bf16_and_optimizer_variants(catalog: Catalog) -> None:
    p = load_model("llama-3.2-1b").total_params
    base = dict(model="llama-3.2-1b", task="finetune", gpu="H100", seq_len=256, master_weights="none")
    assert est(catalog, **base).breakdown()["optimizer states"] == pytest.approx(4 * p)  # two bf16 moments
    eight = est(catalog, **base, optimizer="adamw-8bit").breakdown()["optimizer states"]
    assert 2.0 * p <= eight <= 2.05 * p  # 1 byte per moment + fp32 absmax per 256 (bitsandbytes)
    assert est(catalog, **base, optimizer="sgd").breakdown()["optimizer states"] == 0
    assert est(catalog, **base, optimizer="lion").breakdown()["optimizer states"] == pytest.approx(2 * p)
    ada = est(catalog, **base, optimizer="adafactor").breakdown()["optimizer states"]
    assert ada < 0.01 * p  # factored second moment: rows + columns per matrix


def test_paged_optimizer_is_outside_torch_allocated(catalog: Catalog) -> None:
    base = dict(model="llama-3.2-1b", task="finetune", gpu="H100", seq_len=256, master_weights="none")
    plain = est(catalog, **base, optimizer="adamw-8bit")
    paged = est(catalog, **base, optimizer="paged-adamw-8bit")
    states = paged.breakdown()["optimizer states"]
    assert paged.allocated_bytes == pytest.approx(plain.allocated_bytes - states, rel=1e-6)
    assert paged.per_gpu_bytes == pytest.approx(plain.per_gpu_bytes - 0.05 * states, rel=1e-3)


def test_offload_moves_states_to_host(catalog: Catalog) -> None:
    base = dict(model="llama-2-7b", task="finetune", gpu="A100 80GB", seq_len=512, zero=2)
    on_gpu = est(catalog, **base)
    off = est(catalog, **base, offload="optimizer")
    assert off.breakdown()["optimizer states"] == 0
    assert off.host_bytes >= on_gpu.breakdown()["optimizer states"]
    assert off.per_gpu_bytes < on_gpu.per_gpu_bytes


# --- LoRA / QLoRA -----------------------------------------------------------------------------


def test_lora_param_count_by_hand() -> None:
    # Llama 3.1 8B, rank 8 on q_proj (4096 -> 4096) and v_proj (4096 -> 1024), 32 layers
    assert lora_param_count(load_model("llama-3.1-8b"), "default", 8) == 32 * 8 * ((4096 + 4096) + (4096 + 1024))


def test_qlora_base_is_nf4_with_16_bit_embeddings(catalog: Catalog) -> None:
    m = load_model("llama-3.1-8b")
    e = est(catalog, model="llama-3.1-8b", task="qlora", gpu="4090", seq_len=512, master_weights="none")
    linear = sum(g.total for g in m.groups if g.linear is not None and g.role in ("attention", "mlp"))
    rest = m.total_params - linear
    expected = linear * (4 + 8 / 64 + 32 / (64 * 256)) / 8 + rest * 2  # QLoRA sec. 3 double quantisation
    assert e.breakdown()["frozen base weights (nf4)"] == pytest.approx(expected)


def test_lora_targets_all_linear_and_unknown(catalog: Catalog) -> None:
    m = load_model("llama-3.1-8b")
    assert lora_param_count(m, "all-linear", 8) > lora_param_count(m, "default", 8)
    with pytest.raises(GpuplanError, match="match no linear layer"):
        lora_param_count(m, ["nonexistent"], 8)


def test_lora_targets_torchtune_names_and_partial_unknown() -> None:
    m = load_model("llama-3.1-8b")  # 32 layers, d 4096, 8 KV heads of 128, ff 14336
    q = o = 8 * (4096 + 4096) * 32  # rank 8: r x (in + out) per matrix (Hu et al. 2021)
    v = 8 * (4096 + 1024) * 32
    # torchtune's output_proj is o_proj: 2,097,152 + 1,310,720 + 2,097,152 = 5,505,024
    assert lora_param_count(m, ["q_proj", "v_proj", "output_proj"], 8) == q + v + o == 5_505_024
    mlp = 3 * 8 * (4096 + 14336) * 32  # w1/w2/w3 = gate/down/up
    assert lora_param_count(m, ["w1", "w2", "w3"], 8) == mlp == 14_155_776
    # one unknown name beside known ones is refused (not dropped), naming it and the model's linears
    with pytest.raises(GpuplanError, match=r"\['proj_out'\] match no linear layer.*o_proj, q_proj, up_proj, v_proj"):
        lora_param_count(m, ["q_proj", "v_proj", "proj_out"], 8)
    # a tied head (Gemma's lm_head is the embedding) is a known name with no weight of its own:
    # accepted, adding nothing; q_proj alone is 8 x (2048 + 2048) x 18 layers = 589,824
    gemma = load_model("gemma-2b")
    assert lora_param_count(gemma, ["q_proj", "lm_head"], 8) == 8 * (2048 + 2048) * 18 == 589_824


# --- activations ------------------------------------------------------------------------------


def test_activations_match_korthikanti_for_gpt(catalog: Catalog) -> None:
    # GPT-2 (ff = 4d, MHA, dropout 0.1, LayerNorm) at 16 bits with FlashAttention and fused norms:
    # 34 bytes x d per token and layer (Korthikanti et al. 2022, eq. 1 without the 5as/h term),
    # plus FlashAttention's fp32 log-sum-exp per head
    m = load_model("gpt2")
    e = est(catalog, model="gpt2", task="finetune", gpu="H100", batch_size=4, seq_len=1024, compile=True)
    per_token_layer = 34 * m.hidden_size + 4 * m.num_heads
    assert e.breakdown()["activations"] == pytest.approx(m.num_layers * 4 * 1024 * per_token_layer)


def test_full_checkpointing_keeps_layer_inputs(catalog: Catalog) -> None:
    m = load_model("llama-3.1-8b")
    e = est(catalog, model="llama-3.1-8b", task="lora", gpu="H100", batch_size=2, seq_len=2048,
            activation_checkpointing="full")  # fmt: skip
    assert e.breakdown()["activations"] == pytest.approx(32 * 2 * 2048 * 4096 * 2)  # 2sbh per layer
    assert m.num_layers == 32


def test_logits_term_by_hand(catalog: Catalog) -> None:
    # transformers upcasts logits: 16-bit logits + fp32 log-softmax + one fp32 transient = 10 B
    e = est(catalog, model="llama-3.1-8b", task="lora", gpu="H100", batch_size=1, seq_len=1024)
    assert e.breakdown()["logits and loss"] == pytest.approx(1024 * 128256 * 10)
    fused = est(catalog, model="llama-3.1-8b", task="lora", gpu="H100", batch_size=1, seq_len=1024, loss_impl="fused")
    assert fused.breakdown()["logits and loss"] < e.breakdown()["logits and loss"] / 5


# --- inference and serving --------------------------------------------------------------------


def test_inference_kv_cache_by_hand(catalog: Catalog) -> None:
    # Llama 3.1 8B: 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes = 131072 B per token
    # the per-sequence cache of an engine that grows it (transformers; vLLM shows its preallocated pool)
    e = est(catalog, model="llama-3.1-8b", task="inference", gpu="H100", batch_size=8, input_len=1024, output_len=512,
            engine="transformers")  # fmt: skip
    assert e.peak_phase in ("prefill", "decode")
    kv = 8 * 1536 * 131072
    assert (
        e.phases["decode"] - e.phases["prefill"]
        == pytest.approx(kv - 8 * 1024 * 131072 - e.breakdown().get("prefill activations", 0), rel=1e-6, abs=1)
        or e.peak_phase == "decode"
    )


def test_weight_formats_order(catalog: Catalog) -> None:
    def weights(fmt: str) -> float:
        e = est(catalog, model="llama-2-7b", task="inference", gpu="H100", weight_dtype=fmt)
        return next(v for k, v in e.breakdown().items() if k.startswith("weights"))

    assert weights("int4") < weights("awq") < weights("int8") < weights("bf16")
    assert weights("q4_k_m") == pytest.approx(load_model("llama-2-7b").total_params * 4.84 / 8)


def test_mistral_sliding_window_caps_kv(catalog: Catalog) -> None:
    short = est(catalog, model="mistral-7b", task="inference", gpu="H100", input_len=4096, output_len=0, engine="tgi")
    long = est(catalog, model="mistral-7b", task="inference", gpu="H100", input_len=16384, output_len=0, engine="tgi")
    assert long.breakdown()["KV cache"] == pytest.approx(short.breakdown()["KV cache"])  # window 4096


def test_serving_capacity_matches_vllm_log(catalog: Catalog) -> None:
    # llm-d benchmark (config_explorer/empirical-vllm-memory-results.md): Llama-3.1-8B on H100 80GB,
    # gpu_memory_utilization 0.9 -> "KV cache 51.38 GiB"
    e = est(catalog, model="llama-3.1-8b", task="inference", gpu="H100", input_len=1000, output_len=1000)
    assert e.serving is not None
    assert e.serving.kv_budget_bytes / GIB == pytest.approx(51.38, rel=0.03)
    assert e.serving.max_tokens == pytest.approx(e.serving.kv_budget_bytes / 131072, rel=0.001)
    assert e.serving.max_sequences == e.serving.max_tokens // 2000


def test_runtime_lines_are_their_own(catalog: Catalog) -> None:
    one = est(catalog, model="llama-3.2-1b", task="finetune", gpu="H100", seq_len=256)
    two = est(catalog, model="llama-3.2-1b", task="finetune", gpu="H100", seq_len=256, num_gpus=2, zero=3)
    assert "CUDA context and kernels" in one.breakdown() and "allocator slack" in one.breakdown()
    assert "NCCL buffers" not in one.breakdown() and "NCCL buffers" in two.breakdown()
    assert one.per_gpu_bytes == pytest.approx(sum(one.breakdown().values()))


# --- properties -------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["finetune", "lora"])
def test_zero3_over_more_gpus_never_raises_per_gpu_memory(catalog: Catalog, task: str) -> None:
    prev = float("inf")
    for n in (1, 2, 4, 8, 16, 64):
        e = est(catalog, model="llama-2-13b", task=task, gpu="A100 80GB", num_gpus=n, zero=3, seq_len=1024)
        assert e.per_gpu_bytes <= prev + 1
        prev = e.per_gpu_bytes


def test_checkpointing_never_raises_memory(catalog: Catalog) -> None:
    for model in ("llama-3.1-8b", "gpt2", "t5-base", "bert-base", "mixtral-8x7b", "deepseek-v3"):
        vals = [
            est(
                catalog, model=model, task="finetune", gpu="H100", seq_len=512, activation_checkpointing=c
            ).per_gpu_bytes
            for c in ("none", "selective", "full")
        ]
        assert vals[0] >= vals[1] >= vals[2], model


@given(batch=st.integers(1, 64), ctx=st.integers(1, 32768))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_kv_cache_linear_in_batch_and_context(catalog: Catalog, batch: int, ctx: int) -> None:
    one = est(catalog, model="llama-3.1-8b", task="inference", gpu="H200", input_len=ctx, output_len=0, engine="tgi")
    many = est(catalog, model="llama-3.1-8b", task="inference", gpu="H200", batch_size=batch, input_len=ctx,
               output_len=0, engine="tgi")  # fmt: skip
    kv1, kvb = one.breakdown()["KV cache"], many.breakdown()["KV cache"]
    assert kv1 == pytest.approx(ctx * 131072)
    assert kvb == pytest.approx(batch * kv1)


_keys = st.fixed_dictionaries(
    {
        "model": st.sampled_from(
            ["llama-3.1-8b", "gpt2", "t5-base", "mixtral-8x7b", "bert-base", "resnet-50", "vit-b-16"]
        ),
        "task": st.sampled_from(["pretrain", "finetune", "lora", "qlora", "inference"]),
        "precision": st.sampled_from(["fp32", "tf32", "fp16", "bf16", "fp8"]),
        "num_gpus": st.integers(1, 16),
        "batch_size": st.integers(1, 64),
        "seq_len": st.integers(1, 65536),
        "zero": st.integers(0, 3),
        "tp": st.sampled_from([1, 2, 3, 8]),
        "optimizer": st.sampled_from(["adamw", "adamw-8bit", "paged-adamw-8bit", "sgd", "adafactor", "lion"]),
        "activation_checkpointing": st.sampled_from(["none", "selective", "full"]),
        "offload": st.sampled_from(["none", "optimizer", "optimizer+params"]),
        "weight_dtype": st.sampled_from(["bf16", "int8", "int4", "nf4", "q4_k_m", "gptq"]),
        "grad_accum": st.integers(1, 8),
        "attention_impl": st.sampled_from(["flash", "eager"]),
    }
)


@given(keys=_keys)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzzed_workloads_give_a_breakdown_or_one_clear_error(catalog: Catalog, keys: dict[str, Any]) -> None:
    try:
        e = est(catalog, gpu="H100", **keys)
    except GpuplanError as exc:
        msg = str(exc)
        assert msg and "\n" not in msg and "Traceback" not in msg
        return
    assert e.per_gpu_bytes > 0
    assert all(x.bytes >= 0 for x in e.lines)
    assert e.per_gpu_bytes == pytest.approx(sum(x.bytes for x in e.lines))


def test_a_prequantised_checkpoint_keeps_its_own_format(catalog: Catalog) -> None:
    """gpt-oss ships MXFP4 experts and leaves attention, router, embeddings and head in bf16
    (config.json quantization_config.modules_to_not_convert): its weights come to the checkpoint's
    size, 12.8 GiB for gpt-oss-20b and 60.8 GiB for gpt-oss-120b (model card, arXiv 2508.10925,
    sec. 2.1), to 0.5%. Asking for bf16 dequantises everything; DeepSeek-V3 ships block FP8."""
    gpu = catalog.get("H100 SXM5 80GB")

    def weights(model: str, **kw: Any) -> float:
        w = make_workload({"model": model, "task": "inference", "input_len": 128, "output_len": 16, **kw})
        est = estimate_memory(load_model(model), w, gpu)
        return next(line.bytes for line in est.lines if line.name.startswith("weights"))

    assert weights("gpt-oss-20b") / GIB == pytest.approx(12.8, rel=0.005)
    assert weights("gpt-oss-120b") / GIB == pytest.approx(60.8, rel=0.005)
    assert weights("gpt-oss-20b", weight_dtype="mxfp4") == weights("gpt-oss-20b")
    assert weights("gpt-oss-20b", weight_dtype="bf16") == pytest.approx(2 * load_model("gpt-oss-20b").total_params)
    ds = load_model("deepseek-v3")
    assert weights("deepseek-v3") < 0.55 * weights("deepseek-v3", weight_dtype="bf16")
    assert weights("deepseek-v3") > ds.total_params  # fp8 block linears, 16-bit embeddings and head


TORCHTUNE_8B_FULL = dict(  # recipes/configs/llama3_1/8B_full_single_device.yaml (torchtune README table)
    model="llama-3.1-8b", task="finetune", batch_size=2, seq_len=2048, activation_checkpointing="full",
    optimizer="paged-adamw-8bit", master_weights="none", optimizer_in_backward=True, compile=True,
    loss_impl="chunked",
)  # fmt: skip


def test_paged_optimizer_states_spill_to_host_and_the_job_fits(catalog: Catalog) -> None:
    """torchtune runs Llama 3.1 8B full fine-tuning on one 24 GB RTX 4090 with bitsandbytes'
    PagedAdamW8bit (README: 18.9 GiB peak allocated, 1,650 tokens/s): the 8-bit states (2 B a
    parameter) do not fit beside the bf16 weights, and the driver keeps the rest in host RAM."""
    e = est(catalog, gpu="RTX 4090", **TORCHTUNE_8B_FULL)
    cap = e.capacity_bytes
    assert cap is not None
    assert e.allocated_bytes / GIB == pytest.approx(18.9, rel=0.02)  # the README's torch peak
    assert e.paged_bytes == pytest.approx(8.03e9 * 2, rel=0.02)  # two 8-bit states, with block scales
    assert e.per_gpu_bytes > cap  # all of it would not fit ...
    assert e.fits  # ... but the paged part need not
    assert e.paged_spill_bytes == pytest.approx(e.per_gpu_bytes - cap, rel=1e-12)
    assert e.headroom_bytes == pytest.approx(0.0, abs=1.0)
    # the same states unpaged (bitsandbytes AdamW8bit) must sit on the card: 11+ GiB short
    plain = est(catalog, gpu="RTX 4090", **{**TORCHTUNE_8B_FULL, "optimizer": "adamw-8bit"})
    assert plain.paged_spill_bytes == 0.0 and not plain.fits
    assert plain.headroom_bytes is not None and plain.headroom_bytes < -11 * GIB
    # a 48 GB card holds everything: nothing spills
    roomy = est(catalog, gpu="RTX A6000", **TORCHTUNE_8B_FULL)
    assert roomy.fits and roomy.paged_spill_bytes == 0.0


# --- ECC: what the card shows -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "ecc_mib", "full_gib"),
    [("L40S", 46068, 48), ("L40", 46068, 48), ("L20", 46068, 48), ("A40", 46068, 48), ("T4", 15360, 16),
     ("L4", 23034, 24), ("A10", 23028, 24), ("A10G", 23028, 24)],
)  # fmt: skip
def test_datacenter_gddr_cards_ship_with_ecc_and_show_less(
    catalog: Catalog, gpu: str, ecc_mib: int, full_gib: int
) -> None:
    # nvidia-smi with ECC on, as shipped (catalog sources): 15/16 of the GDDR, less up to 12 MiB
    g = catalog.get(gpu)
    assert g.memory_ecc_bytes == ecc_mib * 2**20
    assert 0.9370 <= ecc_mib / (full_gib * 1024) <= 0.9375
    default = est(catalog, model="llama-3.2-1b", task="inference", gpu=gpu)
    off = est(catalog, model="llama-3.2-1b", task="inference", gpu=gpu, ecc=False)
    on = est(catalog, model="llama-3.2-1b", task="inference", gpu=gpu, ecc=True)
    assert default.capacity_bytes == pytest.approx(ecc_mib * 2**20 * 0.985, rel=1e-12)
    assert on.capacity_bytes == default.capacity_bytes
    assert off.capacity_bytes == pytest.approx(full_gib * GIB * 0.985, rel=1e-12)
    # vLLM's pool fills gpu_memory_utilization 0.9 of what the card shows, so ECC moves its bytes too
    assert default.capacity_bytes is not None and off.capacity_bytes is not None
    assert default.per_gpu_bytes == pytest.approx(0.9 * default.capacity_bytes, rel=1e-9)
    assert off.per_gpu_bytes == pytest.approx(0.9 * off.capacity_bytes, rel=1e-9)
    grown = est(catalog, model="llama-3.2-1b", task="inference", gpu=gpu, engine="transformers")
    grown_off = est(catalog, model="llama-3.2-1b", task="inference", gpu=gpu, engine="transformers", ecc=False)
    assert grown.per_gpu_bytes == grown_off.per_gpu_bytes  # a cache that grows: ECC moves the capacity only


def test_l40s_usable_memory_is_what_nvidia_smi_shows(catalog: Catalog) -> None:
    # QA finding: "47.28 GiB usable" on an L40S, which shows 46068 MiB with ECC on (ECC off: 49140)
    e = est(catalog, model="llama-3.2-1b", task="inference", gpu="L40S")
    assert e.capacity_bytes is not None and e.capacity_bytes / GIB == pytest.approx(44.31, abs=0.005)
    assert est(catalog, model="llama-3.2-1b", task="inference", gpu="L40S", ecc=False).capacity_bytes == (
        pytest.approx(47.28 * GIB, rel=1e-12)
    )


@pytest.mark.parametrize("gpu", ["H100", "A100 80GB", "MI300X", "V100 SXM2 32GB", "4090", "RTX A6000", "RTX 6000 Ada"])
def test_hbm_and_workstation_cards_keep_their_capacity_by_default(catalog: Catalog, gpu: str) -> None:
    # HBM: sideband ECC, no capacity cost (V100 whitepaper); GeForce and RTX workstation cards ship
    # with ECC off (nvidia-smi 49140 MiB on an RTX A6000 and an RTX 6000 Ada)
    g = catalog.get(gpu)
    assert g.memory_ecc_bytes is None
    e = est(catalog, model="llama-3.2-1b", task="inference", gpu=gpu)
    assert e.capacity_bytes == pytest.approx(g.memory_bytes * 0.985, rel=1e-12)
    switched_on = est(catalog, model="llama-3.2-1b", task="inference", gpu=gpu, ecc=True).capacity_bytes
    expected = g.memory_bytes * 0.985 * (15 / 16 if g.memory_type.startswith("GDDR") else 1.0)
    assert switched_on == pytest.approx(expected, rel=1e-12)


def test_ecc_off_can_turn_a_miss_into_a_fit(catalog: Catalog) -> None:
    # a T4 that shows 15360 MiB (ECC on) against 16384 MiB (off): a job between the two fits only with ECC off
    keys: dict[str, Any] = {"model": "llama-3.2-3b", "task": "inference", "gpu": "T4", "precision": "fp16"}
    lens = [n for n in range(4096, 131072, 2048) if
            not est(catalog, **keys, input_len=n).fits and est(catalog, **keys, input_len=n, ecc=False).fits]  # fmt: skip
    assert lens, "no prompt length between the two capacities"


def test_peft_fsdp_keeps_the_root_unit_gathered(catalog: Catalog) -> None:
    # PEFT's fsdp_auto_wrap_policy wraps the decoder layers and the adapters; embed_tokens and lm_head
    # stay in the root unit, which FSDP1 does not free after forward (torch/distributed/fsdp/
    # _runtime_utils.py _post_forward_reshard). Llama-2 7B, bf16 base, 2 GPUs: 2 x 32000 x 4096
    # params x 2 B gathered, of which this GPU's half is already counted with the weights.
    keys = dict(
        model="llama-2-7b",
        task="qlora",
        precision="bf16",
        master_weights="none",
        gpu="RTX 3090",
        num_gpus=2,
        zero=3,
        sharding="fsdp",
        seq_len=512,
        batch_size=1,
        activation_checkpointing="full",
    )
    adapters = est(catalog, **keys, fsdp_wrap="adapters")
    layer = est(catalog, **keys, fsdp_wrap="layer")
    extra = 2 * 32000 * 4096 * 2 / 2
    assert phase_line(adapters, "gathered root unit") == pytest.approx(extra)
    assert "gathered root unit" not in layer.breakdown()
    assert adapters.allocated_bytes - layer.allocated_bytes == pytest.approx(extra, rel=1e-9)
    # with the parameters offloaded to the host nothing of the root is resident: all of it is gathered
    off = est(catalog, **keys, fsdp_wrap="adapters", offload="optimizer+params")
    assert phase_line(off, "gathered root unit") == pytest.approx(2 * extra)


def test_sharded_qlora_keeps_embeddings_in_16_bits(catalog: Catalog) -> None:
    # PEFT's prepare_model_for_kbit_training casts embeddings, norms and head to fp32, but TRL skips it
    # for QLoRA under FSDP / DeepSpeed ZeRO-3 (trl/trainer/sft_trainer.py: is_sharded_qlora)
    keys = dict(model="llama-2-7b", task="qlora", precision="bf16", gpu="A100 80GB", seq_len=512, batch_size=1)
    one = est(catalog, **keys)
    sharded = est(catalog, **keys, num_gpus=2, zero=3, sharding="fsdp")
    rest = 2 * 32000 * 4096 + 4096 * (2 * 32 + 1)  # embed_tokens, lm_head and the RMSNorm weights
    nf4 = phase_line(one, "frozen base weights (nf4)") - rest * 4.0  # one GPU: fp32 after the cast
    assert phase_line(sharded, "frozen base weights (nf4)") == pytest.approx((nf4 + rest * 2.0) / 2, rel=1e-9)


# --- encoder-decoder KV cache (T5): decoder self-attention + cross-attention -----------------


def test_t5_kv_cache_counts_output_self_and_input_cross(catalog: Catalog) -> None:
    # t5-base: 12 decoder layers x 2 (K, V) x 768 x 2 B = 36 KiB per decoder token in self-attention
    # and 36 KiB per encoder token in cross-attention; the prompt is not in the self-attention cache
    e = est(catalog, model="t5-base", task="inference", gpu="A100 80GB", engine="transformers",
            batch_size=8, input_len=100, output_len=1000)  # fmt: skip
    assert e.breakdown()["KV cache"] == 8 * (1000 + 100) * 36_864  # 324,403,200 B (the decode peak)
    note = next(x.note for x in e.lines if x.name == "KV cache")
    assert "1000 decoder tokens x 36.0 KiB self-attention + 100 encoder tokens x 36.0 KiB cross-attention" in note


def test_t0_3b_kv_cache_after_prefill_is_cross_attention_only(catalog: Catalog) -> None:
    # t0-3b: 24 decoder layers x 2 x 2048 x 2 B = 192 KiB per token; after the encoder pass only the
    # cross-attention K/V of the 512 input tokens are cached: 8 x 512 x 196,608 B = 768 MiB
    e = est(catalog, model="t0-3b", task="inference", gpu="A100 80GB", engine="transformers",
            batch_size=8, input_len=512, output_len=64)  # fmt: skip
    assert e.breakdown()["KV cache"] == 8 * 512 * 196_608
    assert "after the prefill: 8 x 512 encoder tokens x 192.0 KiB cross-attention" in next(
        x.note for x in e.lines if x.name == "KV cache"
    )
