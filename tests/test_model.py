"""Models from config.json: exact parameter counts, KV-cache bytes, FLOPs, and clear errors."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.errors import GpuplanError, ModelConfigError, UnknownModelError
from gpuplan.specs.model import SUPPORTED_MODEL_TYPES, family_of, model_from_config
from gpuplan.specs.models import load_model, preset_config, presets, resolve_model_config

# Published exact totals (model cards / safetensors metadata; the list).
PUBLISHED = {
    "llama-2-7b": 6_738_415_616,
    "llama-3.1-8b": 8_030_261_248,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "gpt2": 124_439_808,
}


def _reference_counts() -> dict[str, Any]:
    text = (resources.files("gpuplan") / "data" / "models" / "transformers_counts.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


@pytest.mark.parametrize(("name", "total"), sorted(PUBLISHED.items()))
def test_published_totals_exact(name: str, total: int) -> None:
    assert load_model(name).total_params == total


def test_at_least_25_presets() -> None:
    assert len(presets()) >= 25


def _hub_code_preset(name: str) -> bool:
    """A preset whose modeling code ships with the checkpoint (Qwen v1): transformers cannot build
    it, so its count is checked against the modeling file's tensors and a published total instead
    (test_hub_families.py, test_model_presets_older.py)."""
    fam = family_of(str(preset_config(presets()[name]).get("model_type")))
    return fam is not None and bool(fam.hub_code)


@pytest.mark.parametrize("name", sorted(n for n in presets() if not _hub_code_preset(n)))
def test_every_preset_matches_transformers_count(name: str) -> None:
    """Counts recorded from transformers on the meta device (test_reference.py re-derives them)."""
    ref = _reference_counts()
    assert name in ref, f"{name}: no transformers reference count recorded"
    assert load_model(name).total_params == ref[name]["params"]


@pytest.mark.parametrize("name", sorted(presets()))
def test_every_preset_is_consistent(name: str) -> None:
    m = load_model(name)
    p = presets()[name]
    assert m.total_params > 0
    assert 0 < m.active_params <= m.total_params
    assert sum(m.params_by_role().values()) == m.total_params
    if p.published_params is not None:
        assert m.total_params == p.published_params
    if m.kind == "decoder":
        assert m.kv_bytes_per_token() > 0
        # forward FLOPs/token at short context are about 2 x active params (PaLM App. B), lm_head incl.
        assert m.flops_per_token(1) == pytest.approx(2 * m.active_params, rel=0.15)
    if m.kind in ("encoder", "vision-transformer", "cnn"):
        assert m.kv_bytes_per_token() == 0
    if not m.is_moe:
        assert m.active_params == m.total_params


def test_kv_cache_respects_gqa_mqa_and_mla() -> None:
    # Llama 3.1 8B: 32 layers x 2 (K,V) x 8 KV heads x 128 dims x 2 bytes = 131,072 B/token
    assert load_model("llama-3.1-8b").kv_bytes_per_token() == 32 * 2 * 8 * 128 * 2
    # Llama 2 7B (MHA): 4x that; GQA-blind calculators report this for Llama 3 too
    assert load_model("llama-2-7b").kv_bytes_per_token() == 32 * 2 * 32 * 128 * 2
    # Llama 3.1 70B: 80 layers x 2 x 8 x 128 x 2 = 327,680 B (8x less than MHA)
    assert load_model("llama-3.1-70b").kv_bytes_per_token() == 80 * 2 * 8 * 128 * 2
    # DeepSeek-V3 MLA: (kv_lora_rank 512 + rope 64) x 61 layers x 2 B (DeepSeek-V2 paper sec. 2.1.2)
    ds = load_model("deepseek-v3")
    assert ds.attention_type == "mla"
    assert ds.kv_bytes_per_token() == (512 + 64) * 61 * 2
    assert load_model("deepseek-v3").kv_bytes_per_token(1.0) == (512 + 64) * 61


def test_mqa_from_config() -> None:
    falcon_like = {
        "model_type": "falcon",
        "hidden_size": 4544,
        "num_hidden_layers": 32,
        "num_attention_heads": 71,
        "vocab_size": 65024,
        "multi_query": True,
        "parallel_attn": True,
        "bias": False,
    }
    m = model_from_config(falcon_like, "falcon-7b")
    assert m.attention_type == "mqa"
    assert m.kv_bytes_per_token() == 32 * 2 * 1 * 64 * 2
    # falcon-7b: 6,921,720,704 parameters (transformers FalconForCausalLM, tied head)
    assert m.total_params == 6_921_720_704


def test_sliding_window_caps_the_cache() -> None:
    mistral = load_model("mistral-7b")  # sliding_window 4096 on every layer (Mistral 7B paper)
    per_tok = mistral.kv_bytes_per_token()
    assert mistral.kv_cache_bytes(2048) == 2048 * per_tok
    assert mistral.kv_cache_bytes(32768) == 4096 * per_tok
    gemma = load_model("gemma-2-9b")  # local/global layers alternate; local window 4096
    full, local = 21, 21
    per_layer = 2 * 8 * 256 * 2
    assert gemma.kv_cache_bytes(8192) == (full * 8192 + local * 4096) * per_layer


def test_moe_active_parameters() -> None:
    mixtral = load_model("mixtral-8x7b")
    assert (mixtral.num_experts, mixtral.experts_per_token) == (8, 2)
    # Mixtral paper: 13B active of 47B; exact: 12,879,925,248 with 2 of 8 experts
    assert mixtral.active_params == 12_879_925_248
    ds = load_model("deepseek-v3")
    # DeepSeek-V3 report: 671B total, 37B activated per token (transformers builds no MTP layer)
    assert ds.total_params == 671_026_404_352
    assert ds.active_params == pytest.approx(37e9, rel=0.02)
    qwen = load_model("qwen3-30b-a3b")
    assert qwen.active_params == pytest.approx(3.3e9, rel=0.03)  # "A3B": 3.3B activated (model card)


def test_gpt_oss_counts_match_transformers() -> None:
    """gpt-oss totals equal transformers 5.22.2 GptOssForCausalLM built on the meta device from the
    bundled configs (quantization_config dropped: MXFP4 changes storage, not the parameter count)."""
    small, big = load_model("gpt-oss-20b"), load_model("gpt-oss-120b")
    assert small.total_params == 20_914_757_184
    assert big.total_params == 116_829_156_672
    # model card (arXiv 2508.10925) Table 1, rounded: 20.91B / 116.83B total; attention 0.64B /
    # 0.96B (q/k/v/o with biases + sinks); MLP 19.12B / 114.71B (experts + router)
    assert round(small.total_params / 1e9, 2) == 20.91 and round(big.total_params / 1e9, 2) == 116.83
    for m, attn, mlp in ((small, 0.64, 19.12), (big, 0.96, 114.71)):
        roles = m.params_by_role()
        assert round(roles["attention"] / 1e9, 2) == attn
        assert round((roles["expert"] + roles["router"]) / 1e9, 2) == mlp
        assert not m.tie_word_embeddings and roles["head"] == roles["embedding"] == 201088 * 2880


def test_gpt_oss_layer_shapes() -> None:
    m = load_model("gpt-oss-120b")
    assert (m.num_experts, m.experts_per_token, m.head_dim) == (128, 4, 64)
    by_name = {g.name: g for g in m.groups}
    # head_dim 64 x 64 heads: q projects 2880 -> 4096 (not hidden_size), k/v to 8 x 64
    assert by_name["self_attn.q_proj"].linear == (2880, 4096)
    assert by_name["self_attn.k_proj"].linear == (2880, 512)
    assert by_name["self_attn.o_proj"].linear == (4096, 2880)
    assert all(f"self_attn.{p}_proj.bias" in by_name for p in "qkvo")
    assert by_name["self_attn.sinks"].total == 36 * 64
    # per expert: fused gate_up [H, 2I] and down [I, H], each with a bias; biased router
    assert by_name["mlp.experts.gate_up_proj"].linear == (2880, 5760)
    assert by_name["mlp.experts.gate_up_proj.bias"].total == 36 * 128 * 5760
    assert by_name["mlp.experts.down_proj.bias"].total == 36 * 128 * 2880
    assert by_name["mlp.router"].linear == (2880, 128) and by_name["mlp.router.bias"].total == 36 * 128


def test_gpt_oss_active_parameters() -> None:
    """4 of the experts per token; the model card's active counts leave out the input embedding
    (Table 1: "Unembedding parameters are counted towards active, but not embeddings")."""
    small, big = load_model("gpt-oss-20b"), load_model("gpt-oss-120b")
    assert small.active_params == 4_187_440_704
    assert big.active_params == 5_711_982_912
    assert small.active_params - small.embedding_params == 3_608_307_264  # card: 3.61B
    assert big.active_params - big.embedding_params == 5_132_849_472  # card: 5.13B


def test_gpt_oss_sliding_layers_cap_the_kv_cache() -> None:
    per_layer = 2 * 8 * 64 * 2  # K and V, 8 KV heads x head_dim 64, 16-bit
    for name, layers in (("gpt-oss-20b", 24), ("gpt-oss-120b", 36)):
        m = load_model(name)
        windows = [a.window for a in m.attention_layers]
        assert windows == [128, None] * (layers // 2)  # layer_types: sliding, full, ...
        assert m.kv_bytes_per_token() == layers * per_layer
        # half the layers keep at most the 128-token window
        assert m.kv_cache_bytes(100) == 100 * layers * per_layer
        assert m.kv_cache_bytes(8192) == (layers // 2) * (8192 + 128) * per_layer


def test_gpt_oss_without_layer_types_alternates_like_transformers() -> None:
    """transformers GptOssConfig defaults layer_types to sliding on even layers, full on odd."""
    cfg = {
        "model_type": "gpt_oss", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32, "vocab_size": 100,
        "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 8,
    }  # fmt: skip
    m = model_from_config(cfg, "tiny-gpt-oss")
    assert [a.window for a in m.attention_layers] == [8, None, 8, None]
    with pytest.raises(ModelConfigError, match="exceeds num_local_experts"):
        model_from_config({**cfg, "num_experts_per_tok": 5}, "tiny-gpt-oss")


def test_llama4_counts_layers_and_chunked_cache() -> None:
    """Llama 4 Scout / Maverick equal transformers 5.22.2 Llama4ForConditionalGeneration built on the
    meta device from the bundled configs (vision encoder included; Meta: 109B / 400B total, 17B
    active). Scout: 16 experts + a shared expert on all 48 layers; Maverick: 128 experts + a shared
    one on the odd layers (interleave_moe_layer_step 2), a 16384-wide dense MLP on the even ones."""
    scout, mav = load_model("llama-4-scout"), load_model("llama-4-maverick")
    assert scout.total_params == 108_641_793_536 and mav.total_params == 401_583_781_376
    assert (scout.num_experts, scout.experts_per_token, mav.num_experts) == (16, 1, 128)
    d, vocab = 5120, 202048
    # text decoder, active per token: attention + shared expert + one routed expert (+ dense MLPs)
    attn = 48 * (d * 40 * 128 * 2 + d * 8 * 128 * 2)
    swiglu = 3 * d * 8192
    vision = scout.params_by_role()["other"]
    assert vision == mav.params_by_role()["other"] == 871_932_416  # 0.87B: encoder, adapter, projector
    norms = 2 * 48 * d + d
    assert scout.active_params == 2 * vocab * d + attn + 48 * (2 * swiglu + d * 16) + norms + vision
    assert mav.active_params == 2 * vocab * d + attn + 24 * (2 * swiglu + d * 128) + 24 * 3 * d * 16384 + norms + vision
    assert round((scout.active_params - vision) / 1e9) == 17  # "17B active": the text model's
    by_name = {g.name: g for g in mav.groups}
    assert by_name["feed_forward.experts.gate_up_proj"].count == 24 * 128
    assert by_name["feed_forward.gate_proj"].linear == (d, 16384) and by_name["feed_forward.gate_proj"].count == 24
    # the RoPE layers attend within 8192-token chunks, every 4th (NoPE) layer to everything
    assert [a.window for a in scout.attention_layers][:8] == [8192, 8192, 8192, None] * 2
    per_layer = 2 * 8 * 128 * 2  # K and V, 8 KV heads x 128, 16-bit
    assert scout.kv_bytes_per_token() == 48 * per_layer
    assert scout.kv_cache_bytes(32768) == (12 * 32768 + 36 * 8192) * per_layer
    # a text-only llama4_text config with class defaults (head_dim 128, not hidden / heads)
    tiny = model_from_config({"model_type": "llama4_text", "hidden_size": 64, "num_hidden_layers": 4,
                              "num_attention_heads": 4, "num_key_value_heads": 1, "intermediate_size": 48,
                              "intermediate_size_mlp": 80, "vocab_size": 300, "num_local_experts": 3,
                              "moe_layers": [0, 3], "no_rope_layers": [1, 0, 1, 0]}, "tiny")  # fmt: skip
    assert tiny.head_dim == 128 and [a.window for a in tiny.attention_layers] == [8192, None, 8192, None]
    with pytest.raises(ModelConfigError, match="no_rope_layers has 3 entries for 4 layers"):
        model_from_config({**tiny.config, "no_rope_layers": [1, 0, 1]}, "tiny")


def test_flops_per_token_includes_attention() -> None:
    m = load_model("llama-2-7b")
    # PaLM App. B: forward = 2N + 4 L H Q T, N = matmul weights (the lm_head counts, the input embedding not)
    n_matmul = m.total_params - 32000 * 4096 - (2 * 32 + 1) * 4096
    assert m.matmul_flops_per_token() == 2 * n_matmul
    assert m.flops_per_token(4096) == 2 * n_matmul + 4 * 32 * 4096 * 4096


def test_tied_embeddings_counted_once() -> None:
    small = load_model("llama-3.2-1b")
    assert small.tie_word_embeddings
    assert small.total_params == 1_235_814_400  # transformers LlamaForCausalLM on meta
    # the tied head still costs 2 d V FLOPs per token
    assert small.matmul_flops_per_token() > 2 * (small.total_params - small.embedding_params)


def test_encoder_decoder_t5() -> None:
    t5 = load_model("t5-base")
    assert t5.kind == "encoder-decoder"
    assert t5.total_params == 222_903_552  # T5ForConditionalGeneration, tied head
    # decoder self-attention cache: 12 layers x 2 x 768 x 2 B; cross-attention per input token
    assert t5.kv_bytes_per_token() == 12 * 2 * 768 * 2
    assert t5.cross_kv_bytes_per_input_token() == 12 * 2 * 768 * 2
    # 512 input + 64 output tokens: 64 decoder tokens in self-attention + 512 encoder tokens in
    # cross-attention (not 576 + 512: the prompt goes to the encoder, not the decoder's cache)
    assert t5.kv_cache_bytes(512 + 64, 2.0, input_len=512) == (64 + 512) * 36_864
    t0 = load_model("t0-3b")  # 24 decoder layers x 2 x 2048 x 2 B = 192 KiB per token, both caches
    assert t0.kv_cache_bytes(1000 + 10, 2.0, input_len=1000) == (10 + 1000) * 196_608


def test_resnet50_cnn_path() -> None:
    cfg = {
        "model_type": "resnet",
        "embedding_size": 64,
        "hidden_sizes": [256, 512, 1024, 2048],
        "depths": [3, 4, 6, 3],
        "layer_type": "bottleneck",
        "num_labels": 1000,
    }
    r = model_from_config(cfg, "resnet-50")
    assert r.kind == "cnn"
    assert r.total_params == 25_557_032  # torchvision resnet50 / transformers ResNetForImageClassification
    # He et al. 2016 Table 1 quotes 3.8e9 multiply-adds (v1); v1.5 with the strided 3x3 is 4.09e9 MACs
    assert r.flops_per_token() == pytest.approx(2 * 4.09e9, rel=0.01)
    # stride-1 3x3 convolutions (Winograd-eligible): 115.6M MACs per bottleneck 3x3 (56^2*64*64*9 and
    # the same at every stage), 16 blocks less the 3 whose 3x3 carries the stride: 13 x 115.6M = 1502.9M
    assert r.winograd_flops_per_sample == pytest.approx(2 * 13 * 56 * 56 * 64 * 64 * 9, rel=1e-12)
    # a basic-block ResNet (ResNet-18: [2, 2, 2, 2]) is nearly all 3x3 convolutions
    r18 = model_from_config({**cfg, "hidden_sizes": [64, 128, 256, 512], "depths": [2, 2, 2, 2],
                             "layer_type": "basic"}, "resnet-18")  # fmt: skip
    assert 0.8 < r18.winograd_flops_per_sample / r18.conv_flops_per_sample < 0.9


def test_local_config_file_and_folder(tmp_path: Path) -> None:
    cfg = (resources.files("gpuplan") / "data" / "models" / "gpt2.json").read_text()
    (tmp_path / "mymodel").mkdir()
    (tmp_path / "mymodel" / "config.json").write_text(cfg)
    assert load_model(str(tmp_path / "mymodel")).total_params == 124_439_808
    assert load_model(str(tmp_path / "mymodel" / "config.json")).total_params == 124_439_808


def test_preset_lookup_is_case_insensitive_and_takes_hub_ids() -> None:
    assert load_model("Llama-3.1-8B").total_params == 8_030_261_248
    assert load_model("meta-llama/Llama-3.1-8B").total_params == 8_030_261_248


def test_hub_id_offline_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(UnknownModelError, match="not in the local Hugging Face cache and HF_HUB_OFFLINE"):
        resolve_model_config("some-org/some-model-not-cached")


def test_hub_id_from_local_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A config already in the huggingface_hub cache is used offline."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    snap = tmp_path / "models--org--tiny" / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    (tmp_path / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "models--org--tiny" / "refs" / "main").write_text("a" * 40)
    (snap / "config.json").write_text((resources.files("gpuplan") / "data" / "models" / "gpt2.json").read_text())
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    name, cfg = resolve_model_config("org/tiny")
    assert name == "org/tiny" and cfg["n_embd"] == 768


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", r"not valid JSON \(line 1\)"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"hidden_size": 8}', "no 'model_type'"),
        ('{"model_type": "rwkv"}', "model_type 'rwkv' is not supported"),
        ('{"model_type": "llama", "hidden_size": 64}', "lacks 'num_hidden_layers'"),
        (
            '{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 6,'
            ' "num_key_value_heads": 4, "intermediate_size": 128, "vocab_size": 100}',
            "must be a multiple of num_key_value_heads=4",
        ),
        ('{"model_type": "gpt2", "n_embd": -3, "n_layer": 2, "n_head": 2}', "non-negative integer"),
        ('{"model_type": "gpt2", "n_embd": "big", "n_layer": 2, "n_head": 2}', "non-negative integer"),
        ('{"model_type": "gpt2", "n_embd": NaN, "n_layer": 2, "n_head": 2}', "NaN is not a JSON number"),
        ('{"model_type": "resnet", "hidden_sizes": ["a", 2], "depths": [1, 1]}', "list of non-negative integers"),
        (
            '{"model_type": "mpt", "d_model": 64, "n_heads": 4, "n_layers": 2, "vocab_size": 10,'
            ' "attn_config": {"kv_n_heads": "x"}}',
            "attn_config: config key 'kv_n_heads'",
        ),
    ],
)
def test_bad_configs_give_one_clear_line(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "config.json"
    f.write_text(text)
    with pytest.raises(ModelConfigError, match=message) as info:
        load_model(str(f))
    assert "\n" not in str(info.value)


def test_unknown_model_name_suggests() -> None:
    with pytest.raises(UnknownModelError, match=r"Did you mean: .*llama-3\.1-8b"):
        load_model("llama-3.1-8")


_values = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True), st.text(max_size=5))
_keys = st.sampled_from(
    [
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
        "vocab_size", "head_dim", "n_embd", "n_layer", "n_head", "d_model", "d_kv", "d_ff", "num_layers",
        "num_heads", "num_local_experts", "num_experts_per_tok", "num_experts", "moe_intermediate_size",
        "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "sliding_window",
        "tie_word_embeddings", "hidden_sizes", "depths", "n_routed_experts", "image_size", "patch_size",
        "n_inner", "n_positions", "ffn_dim", "word_embed_proj_dim", "max_position_embeddings",
        "sliding_window_pattern", "enable_bias", "do_layer_norm_before", "_remove_final_layer_norm",
        "layer_norm_elementwise_affine", "multi_query", "use_bias", "attention_bias", "mlp_bias", "use_qk_norm",
        "qk_layernorm", "num_channels", "vision_use_head",
    ]
)  # fmt: skip


_list_keys = st.sampled_from(
    ["hidden_sizes", "depths", "mlp_only_layers", "attn_config", "layer_types", "text_config", "vision_config"]
)
_odd_values = st.one_of(
    _values,
    st.lists(st.one_of(st.integers(-3, 3000), st.text(max_size=3), st.none()), max_size=5),
    st.lists(st.one_of(st.sampled_from(["sliding_attention", "full_attention"]), st.integers(-3, 9)), max_size=6),
    st.dictionaries(st.sampled_from(["kv_n_heads", "alibi"]), _values, max_size=2),
    st.dictionaries(_keys, _values, max_size=6),
)


@settings(max_examples=400, deadline=None)
@given(
    model_type=st.sampled_from(sorted(SUPPORTED_MODEL_TYPES)),
    extra=st.dictionaries(_keys, _values, max_size=12),
    odd=st.dictionaries(_list_keys, _odd_values, max_size=3),
)
def test_fuzzed_configs_never_crash(model_type: str, extra: dict[str, Any], odd: dict[str, Any]) -> None:
    """Any config of any supported family either builds a model or raises one GpuplanError line;
    never another exception."""
    try:
        m = model_from_config({"model_type": model_type, **extra, **odd}, "fuzz")
    except GpuplanError as exc:
        assert "\n" not in str(exc)
        return
    assert m.total_params >= 0
    assert m.kv_bytes_per_token() >= 0
    assert m.flops_per_token(128) >= 0


def test_hub_unreachable_fails_fast(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without a network (and not in the cache) a hub id gets one clear error, not retries."""
    import socket

    def refuse(*args: object, **kwargs: object) -> socket.socket:
        raise OSError("network is unreachable")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(socket, "create_connection", refuse)
    with pytest.raises(UnknownModelError, match=r"cannot be reached \(offline\?\)"):
        resolve_model_config("someorg/somemodel")


def test_llama_3_3_and_qwen3_dense_counts_match_transformers() -> None:
    """Totals equal transformers 5.22.2 (Llama|Qwen3)ForCausalLM built on the meta device from the
    bundled configs. Llama 3.3 70B has Llama 3.1 70B's shape; the Qwen3 model cards round to 8.2B
    (6.95B non-embedding) and 32.8B (31.2B non-embedding); both are untied."""
    assert load_model("llama-3.3-70b").total_params == 70_553_706_496
    assert load_model("llama-3.3-70b").total_params == load_model("llama-3.1-70b").total_params
    assert load_model("meta-llama/Llama-3.3-70B-Instruct").total_params == 70_553_706_496
    q8, q32 = load_model("qwen3-8b"), load_model("qwen3-32b")
    assert q8.total_params == 8_190_735_360
    assert q32.total_params == 32_762_123_264
    for m, hidden, total, non_emb, digits in ((q8, 4096, 8.2, 6.95, 2), (q32, 5120, 32.8, 31.2, 1)):
        assert not m.tie_word_embeddings
        roles = m.params_by_role()
        assert roles["embedding"] == roles["head"] == 151936 * hidden
        assert round(m.total_params / 1e9, 1) == total
        assert round((m.total_params - 2 * 151936 * hidden) / 1e9, digits) == non_emb
    # GQA with 8 KV heads x 128: 36 and 64 layers x 2 (K, V) x 8 x 128 x 2 bytes
    assert q8.kv_bytes_per_token() == 36 * 2 * 8 * 128 * 2
    assert q32.kv_bytes_per_token() == 64 * 2 * 8 * 128 * 2


def test_qwen3_235b_a22b_total_and_active() -> None:
    """Total equals transformers 5.22.2 Qwen3MoeForCausalLM on the meta device; 8 of 128 experts
    (moe_intermediate 1536, SwiGLU) in each of the 94 layers. Model card: 235B total, 22B activated,
    234B non-embedding."""
    m = load_model("qwen3-235b-a22b")
    assert (m.num_experts, m.experts_per_token) == (128, 8)
    assert m.total_params == 235_093_634_560
    per_expert = 3 * 4096 * 1536
    assert m.params_by_role()["expert"] == 94 * 128 * per_expert
    assert m.active_params == m.total_params - 94 * (128 - 8) * per_expert == 22_190_763_520
    assert round(m.total_params / 1e9) == 235 and round(m.active_params / 1e9) == 22
    assert round((m.total_params - 2 * 151936 * 4096) / 1e9) == 234
    assert m.kv_bytes_per_token() == 94 * 2 * 4 * 128 * 2  # 4 KV heads
