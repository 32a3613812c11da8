"""The family table: one record per Hugging Face model_type, all gpuplan knows about it in one place.

The reader (builder, kind, tie default, KV layout, Llama-lineage layer) and what other parts read
from it: estimators.lora (default LoRA targets), estimators.memory (norms that upcast),
interfaces.launch (FSDP wrap class, Megatron flags), interfaces.measure (LoRA targets). Adding a
family is adding one record here (and its builder, if no existing one reads it).

Where each column comes from:
- build, layer, tied, kv: transformers' modeling_*.py and configuration_*.py of the family
  (cited per record where it departs from Llama); the builders cite theirs;
- norm, norm_upcasts: the family's norm class in transformers (LlamaRMSNorm and kin compute in fp32
  and keep that copy in eager PyTorch; T5LayerNorm is an RMSNorm);
- lora_targets: PEFT 0.21's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
  (peft/utils/constants.py), marked "PEFT"; where PEFT has no entry (it then asks for
  target_modules) the layers that play q/v's part, with the reason;
- fsdp_layer: the decoder/encoder layer class in the model's _no_split_modules (transformers
  modeling_*.py class names), which FSDP's TRANSFORMER_BASED_WRAP wraps;
- megatron: Megatron-LM's arguments (megatron/training/arguments.py) for its block structure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from gpuplan.specs.model.builders.deepseek import build_deepseek
from gpuplan.specs.model.builders.encoders import build_bert, build_t5, build_vit
from gpuplan.specs.model.builders.gpt import (
    build_bloom,
    build_falcon,
    build_gpt2,
    build_gpt_bigcode,
    build_gpt_neox,
    build_gptj,
    build_mpt,
    build_opt,
)
from gpuplan.specs.model.builders.hub import build_baichuan, build_chatglm, build_internlm2, build_qwen
from gpuplan.specs.model.builders.llama import (
    build_llama_like,
    gpt_oss_experts,
    llama4_experts,
    mixtral_experts,
    qwen2_moe_experts,
    qwen3_moe_experts,
)
from gpuplan.specs.model.builders.multimodal import build_gemma3, build_llama4
from gpuplan.specs.model.builders.resnet import build_resnet
from gpuplan.specs.model.record import Family, LlamaLike, Megatron

# transformers Gemma3TextConfig (models/gemma3/configuration_gemma3.py) defaults, 5.22
_GEMMA3_TEXT_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131_072,
    "sliding_window": 4096,
}

# transformers Llama4TextConfig (models/llama4/configuration_llama4.py) defaults, 5.22: Scout's shape
_LLAMA4_TEXT_DEFAULTS: Final[dict[str, Any]] = {
    "vocab_size": 202_048,
    "hidden_size": 5120,
    "intermediate_size": 8192,
    "intermediate_size_mlp": 16384,
    "num_hidden_layers": 48,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 131_072,
    "num_local_experts": 16,
    "num_experts_per_tok": 1,
    "attention_chunk_size": 8192,
}

_LLAMA: Final = LlamaLike()  # models/llama/modeling_llama.py: the layer the others depart from
# Llama-style blocks (SwiGLU, RMSNorm, rotary, no biases); DeepSeek's MLA adds its own flags
_LLAMA_BLOCKS: Final = Megatron(llama=True)
_QV: Final = ("q_proj", "v_proj")

# The text decoders the multimodal wrappers build from their text_config
_GEMMA3_TEXT: Final = Family(
    # models/gemma3/modeling_gemma3.py: Gemma 2's four norms plus per-head q/k RMSNorm
    "gemma3_text", build_llama_like, "decoder", "rmsnorm", tied=True, kv="local-global",
    layer=LlamaLike(norms=4, qk_norm="head", defaults=_GEMMA3_TEXT_DEFAULTS),
    lora_targets=_QV,  # PEFT
    fsdp_layer="Gemma3DecoderLayer", norm_upcasts=True,
)  # fmt: skip
_LLAMA4_TEXT: Final = Family(
    # models/llama4/modeling_llama4.py: Llama's attention (its q/k L2 norm has no weights) with
    # chunked local attention on the RoPE layers; MoE or dense feed-forward per layer
    "llama4_text", build_llama_like, "decoder", "rmsnorm", kv="chunked",
    layer=LlamaLike(mlp_bias_key=None, moe=llama4_experts, defaults=_LLAMA4_TEXT_DEFAULTS),
    lora_targets=_QV,  # PEFT's llama4 entry; the text config alone has none
    fsdp_layer="Llama4TextDecoderLayer", megatron=Megatron(llama=True, qk_l2_norm=True), norm_upcasts=True,
)  # fmt: skip
_FALCON: Final = Family(
    "falcon", build_falcon, "decoder", "layernorm", tied=True,
    lora_targets=("query_key_value",),  # PEFT
    fsdp_layer="FalconDecoderLayer",
)  # fmt: skip

# fmt: off
_TABLE: Final[tuple[Family, ...]] = (
    # --- the Llama lineage (builders/llama.py) ---------------------------------------------------
    Family("llama", build_llama_like, "decoder", "rmsnorm", kv="sliding", layer=_LLAMA,
           lora_targets=_QV,  # PEFT
           fsdp_layer="LlamaDecoderLayer", megatron=_LLAMA_BLOCKS, norm_upcasts=True),
    Family("mistral", build_llama_like, "decoder", "rmsnorm", kv="sliding", layer=_LLAMA,
           lora_targets=_QV,  # PEFT
           fsdp_layer="MistralDecoderLayer", megatron=_LLAMA_BLOCKS, norm_upcasts=True),
    # models/mixtral/modeling_mixtral.py: Llama's attention, a sparse MoE in place of the MLP
    Family("mixtral", build_llama_like, "decoder", "rmsnorm", kv="sliding", layer=LlamaLike(moe=mixtral_experts),
           lora_targets=_QV,  # PEFT
           fsdp_layer="MixtralDecoderLayer", megatron=_LLAMA_BLOCKS, norm_upcasts=True),
    # models/qwen2/modeling_qwen2.py: q/k/v biased, o_proj not; a sliding window only with
    # use_sliding_window (Qwen2Config)
    Family("qwen2", build_llama_like, "decoder", "rmsnorm", kv="sliding-opt-in",
           layer=LlamaLike(bias=True, o_bias=False),
           lora_targets=_QV,  # PEFT
           fsdp_layer="Qwen2DecoderLayer", megatron=_LLAMA_BLOCKS, norm_upcasts=True),
    Family("qwen2_moe", build_llama_like, "decoder", "rmsnorm", kv="sliding-opt-in",
           layer=LlamaLike(bias=True, o_bias=False, moe=qwen2_moe_experts),
           lora_targets=_QV,  # no PEFT entry: q/v as for Qwen2
           fsdp_layer="Qwen2MoeDecoderLayer", megatron=_LLAMA_BLOCKS, norm_upcasts=True),
    # models/qwen3/modeling_qwen3.py: RMSNorm over each head's q and k (Megatron's --qk-layernorm)
    Family("qwen3", build_llama_like, "decoder", "rmsnorm", kv="sliding-opt-in", layer=LlamaLike(qk_norm="head"),
           lora_targets=_QV,  # PEFT
           fsdp_layer="Qwen3DecoderLayer", megatron=Megatron(llama=True, qk_layernorm=True), norm_upcasts=True),
    Family("qwen3_moe", build_llama_like, "decoder", "rmsnorm", kv="sliding-opt-in",
           layer=LlamaLike(qk_norm="head", moe=qwen3_moe_experts),
           lora_targets=_QV,  # no PEFT entry: q/v as for Qwen3
           fsdp_layer="Qwen3MoeDecoderLayer", megatron=Megatron(llama=True, qk_layernorm=True), norm_upcasts=True),
    # models/gemma/modeling_gemma.py: Llama's layer, tied by default
    Family("gemma", build_llama_like, "decoder", "rmsnorm", tied=True, kv="sliding", layer=_LLAMA,
           lora_targets=_QV,  # PEFT
           fsdp_layer="GemmaDecoderLayer", norm_upcasts=True),
    # models/gemma2/modeling_gemma2.py: pre- and post-norms around attention and MLP
    Family("gemma2", build_llama_like, "decoder", "rmsnorm", tied=True, kv="alternating", layer=LlamaLike(norms=4),
           lora_targets=_QV,  # PEFT
           fsdp_layer="Gemma2DecoderLayer", norm_upcasts=True),
    _GEMMA3_TEXT,
    # models/olmo2/modeling_olmo2.py: post-norms only (after attention, after the MLP) and RMSNorm
    # over the whole q and k projections
    Family("olmo2", build_llama_like, "decoder", "rmsnorm", layer=LlamaLike(norms=2, qk_norm="proj"),
           lora_targets=_QV,  # no PEFT entry: its q_proj/v_proj play the same part
           fsdp_layer="Olmo2DecoderLayer", norm_upcasts=True),
    # models/granite/modeling_granite.py: Llama's layer; its multipliers are scalars, not weights
    Family("granite", build_llama_like, "decoder", "rmsnorm", layer=_LLAMA,
           lora_targets=_QV,  # no PEFT entry: its q_proj/v_proj play the same part
           fsdp_layer="GraniteDecoderLayer", norm_upcasts=True),
    # models/cohere/modeling_cohere.py: parallel attention and MLP after one weight-only LayerNorm;
    # optional q/k LayerNorms of shape (heads, head_dim); tied by default
    Family("cohere", build_llama_like, "decoder", "layernorm", tied=True,
           layer=LlamaLike(norms=1, qk_norm="proj", qk_norm_key="use_qk_norm"),
           lora_targets=_QV,  # no PEFT entry: its q_proj/v_proj play the same part
           fsdp_layer="CohereDecoderLayer"),
    # models/nemotron/modeling_nemotron.py: squared-ReLU MLP without a gate, LayerNorm1P with bias
    Family("nemotron", build_llama_like, "decoder", "layernorm",
           layer=LlamaLike(mlp=("up_proj", "down_proj"), norm_bias=True),
           lora_targets=_QV,  # no PEFT entry: its q_proj/v_proj play the same part
           fsdp_layer="NemotronDecoderLayer"),
    # models/starcoder2/modeling_starcoder2.py: use_bias on every linear, LayerNorm, plain GELU MLP
    Family("starcoder2", build_llama_like, "decoder", "layernorm", tied=True, kv="sliding",
           layer=LlamaLike(bias_key="use_bias", bias=True, mlp=("c_fc", "c_proj"), mlp_bias_key="use_bias",
                           mlp_bias=True, norm_bias=True),
           lora_targets=_QV,  # no PEFT entry: its q_proj/v_proj play the same part
           fsdp_layer="Starcoder2DecoderLayer"),
    # models/phi/modeling_phi.py (phi-1, phi-1.5, phi-2): parallel attention and MLP after one
    # LayerNorm, biases everywhere (lm_head too), optional q/k LayerNorms sized hidden_size // heads
    # whatever head_dim says; rotary on part of each head
    Family("phi", build_llama_like, "decoder", "layernorm",
           layer=LlamaLike(bias_key=None, bias=True, o_name="dense", mlp=("fc1", "fc2"), mlp_bias_key=None,
                           mlp_bias=True, qk_norm="split", qk_norm_key="qk_layernorm", norms=1, norm_bias=True,
                           head_bias=True),
           lora_targets=("q_proj", "v_proj", "fc1", "fc2"),  # PEFT
           fsdp_layer="PhiDecoderLayer"),
    # models/phi3/modeling_phi3.py: Llama's layer (q/k/v fused in one qkv_proj, gate/up in gate_up_proj)
    Family("phi3", build_llama_like, "decoder", "rmsnorm", kv="sliding", layer=_LLAMA,
           # no PEFT entry in 0.21: Phi-3 fuses q/k/v in qkv_proj; gpuplan lists q/k/v separately
           # (the same weights)
           lora_targets=("q_proj", "k_proj", "v_proj"),
           fsdp_layer="Phi3DecoderLayer", norm_upcasts=True),
    # models/gpt_oss/modeling_gpt_oss.py (GptOssConfig: attention_bias=True): attention sinks, a
    # biased MoE; banded-window and dense layers alternate
    Family("gpt_oss", build_llama_like, "decoder", "rmsnorm", kv="alternating",
           layer=LlamaLike(bias=True, sinks=True, moe=gpt_oss_experts),
           lora_targets=_QV,  # no PEFT entry (PEFT asks for target_modules): q/v as for its Llama-style kin
           fsdp_layer="GptOssDecoderLayer",
           # GptOssRMSNorm upcasts as LlamaRMSNorm does, but the memory estimate has never counted
           # it as one that does; left so, predictions unchanged
           norm_upcasts=False),
    _LLAMA4_TEXT,
    # --- multimodal wrappers (builders/multimodal.py): the text decoder's facts, the vision side's
    # parameters
    # models/gemma3/modeling_gemma3.py Gemma3ForConditionalGeneration: tie_word_embeddings true by default
    Family("gemma3", build_gemma3, "decoder", "rmsnorm", tied=True, kv="local-global", text=_GEMMA3_TEXT,
           lora_targets=_QV,  # no PEFT entry (PEFT's is gemma3_text's): the text decoder's q/v
           fsdp_layer="Gemma3DecoderLayer", norm_upcasts=True),
    # models/llama4/modeling_llama4.py Llama4ForConditionalGeneration
    Family("llama4", build_llama4, "decoder", "rmsnorm", kv="chunked", text=_LLAMA4_TEXT,
           lora_targets=_QV,  # PEFT
           fsdp_layer="Llama4TextDecoderLayer",  # transformers' _no_split_modules
           megatron=Megatron(llama=True, qk_l2_norm=True), norm_upcasts=True),
    # --- hub families (builders/hub.py; InternLM v1 is Llama's layer): modeling code that ships with
    # the checkpoint (trust_remote_code); gpuplan reads their config.json only. None has a PEFT
    # entry but chatglm: the fused q/k/v layer plays q/v's part. Their RMSNorms compute in fp32 (an
    # fp32 variance times the 16-bit input promotes the product to fp32), so they upcast
    Family("qwen", build_qwen, "decoder", "rmsnorm",
           lora_targets=("c_attn",),  # no PEFT entry: the fused q/k/v (Qwen's own finetune.py targets it)
           fsdp_layer="QWenBlock", norm_upcasts=True, hub_code="Qwen/Qwen-7B modeling_qwen.py"),
    Family("baichuan", build_baichuan, "decoder", "rmsnorm",
           lora_targets=("W_pack",),  # no PEFT entry: the fused q/k/v
           fsdp_layer="DecoderLayer",  # Baichuan2-7B's _no_split_modules (13B: BaichuanLayer)
           norm_upcasts=True, hub_code="baichuan-inc/Baichuan2-7B-Base modeling_baichuan.py"),
    Family("chatglm", build_chatglm, "decoder", "rmsnorm",
           lora_targets=("query_key_value",),  # PEFT
           fsdp_layer="GLMBlock", norm_upcasts=True, fused_gate_up=True,
           hub_code="THUDM/chatglm3-6b modeling_chatglm.py"),
    # internlm/internlm-7b modeling_internlm.py: Llama's layer, q/k/v/o biased per `bias` (default true)
    Family("internlm", build_llama_like, "decoder", "rmsnorm",
           layer=LlamaLike(bias_key="bias", bias=True),
           lora_targets=_QV,  # no PEFT entry: its q_proj/v_proj play the same part
           fsdp_layer="InternLMDecoderLayer", norm_upcasts=True,
           hub_code="internlm/internlm-7b modeling_internlm.py"),
    Family("internlm2", build_internlm2, "decoder", "rmsnorm",
           lora_targets=("wqkv",),  # no PEFT entry: the fused q/k/v
           fsdp_layer="InternLM2DecoderLayer", norm_upcasts=True,
           hub_code="internlm/internlm2-7b modeling_internlm2.py"),
    # --- DeepSeek (builders/deepseek.py): MLA, fine-grained MoE --------------------------------
    Family("deepseek_v2", build_deepseek, "decoder", "rmsnorm", kv="mla",
           # no PEFT default for DeepSeek's MLA; its query and KV up-projections play q/v's part
           lora_targets=("q_proj", "q_b_proj", "kv_b_proj"),
           fsdp_layer="DeepseekV2DecoderLayer", megatron=_LLAMA_BLOCKS, norm_upcasts=True),
    Family("deepseek_v3", build_deepseek, "decoder", "rmsnorm", kv="mla",
           lora_targets=("q_proj", "q_b_proj", "kv_b_proj"),  # as deepseek_v2
           fsdp_layer="DeepseekV3DecoderLayer", megatron=_LLAMA_BLOCKS, norm_upcasts=True),
    # --- GPT-2 and kin (builders/gpt.py) -------------------------------------------------------
    Family("gpt2", build_gpt2, "decoder", "layernorm", tied=True,
           lora_targets=("c_attn",),  # PEFT
           fsdp_layer="GPT2Block"),
    Family("gpt_neox", build_gpt_neox, "decoder", "layernorm",
           lora_targets=("query_key_value",),  # PEFT
           fsdp_layer="GPTNeoXLayer"),
    _FALCON,
    # old Falcon configs (RefinedWeb, RefinedWebModel) load as transformers' Falcon; PEFT lists both
    replace(_FALCON, model_type="RefinedWeb", alias_of="falcon"),
    replace(_FALCON, model_type="RefinedWebModel", alias_of="falcon"),
    # llm-foundry's MPT (transformers models/mpt): the output always tied to wte
    Family("mpt", build_mpt, "decoder", "layernorm", tied=True,
           lora_targets=("Wqkv",),  # PEFT
           fsdp_layer="MptBlock"),
    Family("bloom", build_bloom, "decoder", "layernorm", tied=True,
           lora_targets=("query_key_value",),  # PEFT
           fsdp_layer="BloomBlock"),
    Family("opt", build_opt, "decoder", "layernorm", tied=True,
           lora_targets=_QV,  # PEFT
           fsdp_layer="OPTDecoderLayer"),
    Family("gptj", build_gptj, "decoder", "layernorm",
           lora_targets=_QV,  # PEFT
           fsdp_layer="GPTJBlock"),
    Family("gpt_bigcode", build_gpt_bigcode, "decoder", "layernorm", tied=True,
           lora_targets=("c_attn",),  # PEFT
           fsdp_layer="GPTBigCodeBlock"),
    # --- encoders and T5 (builders/encoders.py) --------------------------------------------------
    Family("bert", build_bert, "encoder", "layernorm", kv="none",
           lora_targets=("query", "value"),  # PEFT
           fsdp_layer="BertLayer"),
    Family("roberta", build_bert, "encoder", "layernorm", kv="none",
           lora_targets=("query", "value"),  # PEFT
           fsdp_layer="RobertaLayer"),
    Family("vit", build_vit, "vision-transformer", "layernorm", kv="none",
           lora_targets=("query", "value"),  # no PEFT entry: BERT's names, which ViT's attention shares
           fsdp_layer="ViTLayer"),
    # T5Config ties the head by default, MT5Config does not; T5LayerNorm is an RMSNorm
    Family("t5", build_t5, "encoder-decoder", "rmsnorm", tied=True,
           lora_targets=("q", "v"),  # PEFT
           fsdp_layer="T5Block", norm_upcasts=True),
    Family("mt5", build_t5, "encoder-decoder", "rmsnorm",
           lora_targets=("q", "v"),  # PEFT
           fsdp_layer="MT5Block", norm_upcasts=True),
    # --- the CNN (builders/resnet.py): no LoRA default, FSDP wraps it by size --------------------
    Family("resnet", build_resnet, "cnn", "batchnorm", kv="none"),
)
# fmt: on


def _index(records: tuple[Family, ...]) -> dict[str, Family]:
    out: dict[str, Family] = {}
    for f in records:
        if f.model_type in out:
            raise ValueError(f"the family table lists {f.model_type!r} twice")
        out[f.model_type] = f
    return out


FAMILIES: Final[dict[str, Family]] = _index(_TABLE)

# transformers first (sorted), then the CNN: the order messages list them in
SUPPORTED_MODEL_TYPES: Final = tuple(sorted(FAMILIES, key=lambda t: (FAMILIES[t].kind == "cnn", t)))


def family_of(model_type: str) -> Family | None:
    """The record of a config.json's model_type, None if gpuplan does not read it."""
    return FAMILIES.get(model_type)
