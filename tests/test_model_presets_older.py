"""Presets added so the validation sheet's older models run (issue 27): Yi-34B, Gemma 2B/7B,
TinyLlama 1.1B, GPT-J 6B, GPT-NeoX 20B, T0pp, StableLM-Alpha 3B, CodeLlama 34B, Qwen-7B (v1) and
DeepSeek-Coder 33B. Each total is checked against the published figure
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
    "qwen-7b": 7_721_324_544,  # calflops README's LLM table (Qwen-7B, the loaded model's parameters)
    "deepseek-coder-33b": 33_342_991_360,  # a safetensors census of deepseek-coder-33b-instruct
}

# The rounded totals the stacks sheet quotes (stacks.csv params_b: 7.72 for the QWEN1 rows, 33.3 for
# AutoAWQ's DeepSeek 33B rows; calflops' table also rounds Qwen-7B to 7.72B). Tolerance: half a
# unit of the last quoted digit (0.005B, 0.05B).
QUOTED_B = {"qwen-7b": (7.72, 0.005), "deepseek-coder-33b": (33.3, 0.05)}


@pytest.mark.parametrize(("name", "total"), sorted(PUBLISHED.items()))
def test_published_totals_exact(name: str, total: int) -> None:
    assert load_model(name).total_params == total
    assert presets()[name].published_params == total


@pytest.mark.parametrize(("name", "quoted"), sorted(QUOTED_B.items()))
def test_quoted_rounded_totals(name: str, quoted: tuple[float, float]) -> None:
    billions, tol = quoted
    assert load_model(name).total_params / 1e9 == pytest.approx(billions, abs=tol)


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
        ("Qwen/Qwen-7B", "qwen-7b"),
        ("Qwen/Qwen-7B-Chat", "qwen-7b"),
        ("deepseek-ai/deepseek-coder-33b-base", "deepseek-coder-33b"),
        ("deepseek-ai/deepseek-coder-33b-instruct", "deepseek-coder-33b"),
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


def test_qwen_7b_v1_preset_is_the_hub_family_reader() -> None:
    """Qwen-7B (v1) is read by the `qwen` hub family (its modeling code ships with the checkpoint and
    never runs): fused c_attn with a bias, w1/w2 of intermediate_size // 2, untied lm_head, MHA.
    The shape keys equal the test fixture's (tests/hub_configs/qwen-7b.json)."""
    import json
    from pathlib import Path

    from gpuplan.specs.models import preset_config

    cfg = preset_config(presets()["qwen-7b"])
    fixture = json.loads((Path(__file__).parent / "hub_configs" / "qwen-7b.json").read_text())
    assert {k: cfg[k] for k in fixture} == fixture
    assert "auto_map" not in cfg
    m = load_model("qwen-7b")
    d, v, n, ff = 4096, 151936, 32, 22016 // 2
    layer = (d * 3 * d + 3 * d) + d * d + 3 * d * ff + 2 * d
    assert m.total_params == 2 * v * d + n * layer + d
    assert m.kv_bytes_per_token() == n * 2 * 32 * 128 * 2


def test_deepseek_coder_33b_terms_match_the_census_buckets() -> None:
    """DeepSeek-Coder 33B: a Llama layer, 56 heads of 128 with 8 KV heads, SwiGLU 19200, 62 layers,
    untied 32256-token embedding and head. The safetensors census cited in index.toml gives bf16
    bytes per bucket; each term here is that byte count / 2."""
    m = load_model("deepseek-coder-33b")
    h, n, v, ff = 7168, 62, 32256, 19200
    emb, ffn = v * h, n * 3 * h * ff
    attn = n * (2 * h * h + 2 * h * 8 * 128)
    norms = 2 * n * h + h
    assert (emb, ffn, attn, norms) == (462_422_016 // 2, 51_196_723_200 // 2, 14_562_623_488 // 2, 1_792_000 // 2)
    assert m.total_params == 2 * emb + ffn + attn + norms
    assert m.kv_bytes_per_token() == n * 2 * 8 * 128 * 2
