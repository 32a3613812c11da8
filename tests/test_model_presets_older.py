"""Presets added so the validation sheet's older models run (issue 27): Yi-34B, Gemma 2B/7B,
TinyLlama 1.1B, GPT-J 6B, GPT-NeoX 20B, T0pp, StableLM-Alpha 3B, CodeLlama 34B. Each total is checked against the published figure
cited in data/models/index.toml, and the architecture facts that make the count exact are checked
term by term (embedding, per-layer shapes, head)."""

from __future__ import annotations

import pytest

from gpuplan.specs.models import load_model, presets

# Exact published totals (sources in index.toml: published_params_source).
PUBLISHED = {
    "yi-34b": 34_388_917_248,  # model registry record of Yi-34B-Chat (same shapes)
    "gemma-2b": 2_506_172_416,  # keras-hub gemma_presets.py gemma_2b_en
    "gemma-7b": 8_537_680_896,  # keras-hub gemma_presets.py gemma_7b_en
    "tinyllama-1.1b": 1_100_048_384,  # safetensors metadata of the 1431k-3T checkpoint
    "gpt-neox-20b": 20_554_567_680,  # EleutherAI/gpt-neox-20b model card
    "stablelm-base-alpha-3b": 3_637_321_728,  # the HF checkpoint's count, as a port's test asserts
    "codellama-34b": 33_743_970_304,  # catalogue record of a same-shape CodeLlama-34B fine-tune
}


@pytest.mark.parametrize(("name", "total"), sorted(PUBLISHED.items()))
def test_published_totals_exact(name: str, total: int) -> None:
    assert load_model(name).total_params == total
    assert presets()[name].published_params == total


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("01-ai/Yi-34B", "yi-34b"),
        ("google/gemma-2b", "gemma-2b"),
        ("google/gemma-7b", "gemma-7b"),
        ("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "tinyllama-1.1b"),
        ("EleutherAI/gpt-j-6b", "gpt-j-6b"),
        ("EleutherAI/gpt-neox-20b", "gpt-neox-20b"),
        ("bigscience/T0pp", "t0pp"),
        ("stabilityai/stablelm-base-alpha-3b", "stablelm-base-alpha-3b"),
        ("codellama/CodeLlama-34b-hf", "codellama-34b"),
    ],
)
def test_validation_sheet_ids_resolve(alias: str, name: str) -> None:
    """The hub ids stacks.csv's workloads name resolve to the bundled presets (no network)."""
    assert load_model(alias).total_params == load_model(name).total_params


def test_gemma_tied_head_dim_256_geglu() -> None:
    """Gemma (models/gemma/modeling_gemma.py): q is heads x 256, k/v kv_heads x 256 (not
    hidden/heads), a gated (GeGLU) MLP of three matrices, two RMSNorms a layer, and the output
    head tied to the 256000 x hidden embedding (counted once)."""
    for name, hidden, layers, heads, kv, inter in (
        ("gemma-2b", 2048, 18, 8, 1, 16384),
        ("gemma-7b", 3072, 28, 16, 16, 24576),
    ):
        m = load_model(name)
        assert m.tie_word_embeddings
        layer = hidden * heads * 256 * 2 + hidden * kv * 256 * 2 + 3 * hidden * inter + 2 * hidden
        assert m.total_params == 256000 * hidden + layers * layer + hidden
        assert m.kv_bytes_per_token() == layers * 2 * kv * 256 * 2  # bf16 K and V


def test_gpt_j_parallel_block_and_biased_head() -> None:
    """GPT-J (models/gptj/modeling_gptj.py): one LayerNorm per block (attention and MLP in parallel),
    unbiased q/k/v/out, biased fc_in/fc_out (4 x hidden), a biased untied lm_head; rotary_dim 64 of
    each 256-dim head adds no weights."""
    m = load_model("gpt-j-6b")
    h, v, n = 4096, 50400, 28
    layer = 2 * h + 4 * h * h + (h * 4 * h + 4 * h) + (4 * h * h + h)
    assert m.total_params == v * h + n * layer + 2 * h + (v * h + v) == 6_050_882_784
    # the source sheet's 6.05B (stacks.csv params_b for ABMI-001/002)
    assert round(m.total_params / 1e9, 2) == 6.05


def test_gpt_neox_parallel_residual_untied() -> None:
    """GPT-NeoX (models/gpt_neox/modeling_gpt_neox.py): two LayerNorms a block (use_parallel_residual:
    both branches read the block input), biased fused qkv, dense and MLP, untied embed_out."""
    m = load_model("gpt-neox-20b")
    h, v, n = 6144, 50432, 44
    layer = 4 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * 4 * h + 4 * h) + (4 * h * h + h)
    assert m.total_params == v * h + n * layer + 2 * h + v * h


def test_t0pp_is_t5_v1_1_xxl() -> None:
    """T0pp: T5 v1.1 XXL (gated-GELU MLP of three matrices, no biases, relative position buckets in
    the first layer of each stack, untied lm_head); the T0 model card says 11B."""
    m = load_model("t0pp")
    assert m.kind == "encoder-decoder"
    d, ff, inner, v = 4096, 10240, 64 * 64, 32128
    enc_layer = 4 * d * inner + 3 * d * ff + 2 * d
    dec_layer = 8 * d * inner + 3 * d * ff + 3 * d
    buckets = 2 * 32 * 64
    assert m.total_params == v * d + 24 * enc_layer + 24 * dec_layer + buckets + 2 * d + v * d
    assert round(m.total_params / 1e9) == 11


def test_stablelm_alpha_is_gpt_neox_with_a_padded_vocab() -> None:
    """StableLM-Alpha 3B loads as GPTNeoXForCausalLM: LitGPT's 50254-token vocab padded to a multiple
    of 512 (50688) in both the embedding and the untied head; 16 parallel-residual blocks."""
    m = load_model("stablelm-base-alpha-3b")
    h, v, n = 4096, 50688, 16
    layer = 4 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * 4 * h + 4 * h) + (4 * h * h + h)
    assert m.total_params == v * h + n * layer + 2 * h + v * h


def test_codellama_34b_gqa() -> None:
    """CodeLlama 34B: Llama 2's layer with 8 KV heads of 128 (GQA), SwiGLU 22016, untied head."""
    m = load_model("codellama-34b")
    h, n = 8192, 48
    layer = 2 * h * h + 2 * h * 8 * 128 + 3 * h * 22016 + 2 * h
    assert m.total_params == 2 * 32000 * h + n * layer + h
    assert m.kv_bytes_per_token() == n * 2 * 8 * 128 * 2
