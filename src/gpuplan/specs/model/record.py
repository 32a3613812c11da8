"""What one family record holds: the shape of a row of the family table (families.py).

A record says everything gpuplan knows about one Hugging Face `model_type`: how its config.json
is read into parameter tensors (the builder and, for the Llama lineage, how its decoder layer
departs from Llama's), what kind of model it is, its norm, its KV-cache layout, PEFT's default
LoRA targets, the transformers layer class FSDP wraps, and the Megatron-LM flags its blocks need.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gpuplan.specs.model.config import Cfg
from gpuplan.specs.model.groups import Built, Groups

# What the model is, as ModelSpec.kind says it
KINDS: Final = ("decoder", "encoder", "encoder-decoder", "vision-transformer", "cnn")
# The normalisation its blocks use: RMSNorm (no mean, no bias; T5LayerNorm is one), LayerNorm
# (with a bias or weight-only), BatchNorm (the CNN)
NORMS: Final = ("rmsnorm", "layernorm", "batchnorm")
# How the self-attention layers cache tokens (what kv_bytes_per_token and kv_cache_bytes count):
#   full            every layer caches every token; sliding_window is not read
#   sliding         a sliding_window, when the config sets one, caps every layer (or those its
#                   layer_types mark "sliding_attention")
#   sliding-opt-in  as "sliding", only when the config also says use_sliding_window: true
#   alternating     sliding and full layers alternate, the first one sliding (unless layer_types)
#   local-global    every sliding_window_pattern-th layer full, the others sliding (unless layer_types)
#   chunked         chunked local attention on the RoPE layers, full on the NoPE ones
#   mla             multi-head latent attention: the compressed latent and the rope key
#   none            no KV cache (encoders, the CNN)
KV_LAYOUTS: Final = ("full", "sliding", "sliding-opt-in", "alternating", "local-global", "chunked", "mla", "none")

# builder(config, its family record) -> what it read
Builder = Callable[[Cfg, "Family"], Built]
# the feed-forward of a Llama-lineage MoE family: (config, groups, hidden, intermediate_size,
# layers) -> {"experts", "k", "shared"}, after adding its router, experts and dense layers
MoeBuilder = Callable[[Cfg, Groups, int, int, int], dict[str, int]]


@dataclass(frozen=True)
class LlamaLike:
    """How a Llama-lineage family's decoder layer departs from Llama's (the defaults), as
    transformers builds it: embed -> [norm, q/k/v/o attention, norm, MLP] x L -> norm -> lm_head."""

    bias_key: str | None = "attention_bias"  # the config flag for the q/k/v/o biases; None: fixed
    bias: bool = False  # those biases when the flag is absent (or always, without a flag)
    o_bias: bool = True  # False: o_proj never has one (Qwen2 biases q, k and v only)
    o_name: str = "o_proj"
    # gated MLP (gate, up, down: SwiGLU/GeGLU) or, with two names, a plain one (in, out)
    mlp: tuple[str, ...] = ("gate_proj", "up_proj", "down_proj")
    mlp_bias_key: str | None = "mlp_bias"
    mlp_bias: bool = False
    # q/k norms: "head" = one head_dim vector each, shared by the heads; "split" = the same, sized
    # hidden_size // heads whatever head_dim says; "proj" = over the whole q and k projections
    # (heads x head_dim, kv_heads x head_dim)
    qk_norm: str = ""
    qk_norm_key: str | None = None  # the config flag that switches them on; None: always there
    norms: int = 2  # norms per layer
    norm_bias: bool = False  # LayerNorm with a bias (else RMSNorm / weight-only LayerNorm)
    head_bias: bool = False  # lm_head has a bias (kept when the weight is tied)
    sinks: bool = False  # one learned attention-sink logit per query head and layer
    # a mixture of experts in place of the dense MLP (its router, experts, shared experts)
    moe: MoeBuilder | None = None
    # what transformers' config class fills in for keys a config leaves out, where real configs
    # rely on it (Gemma 3's config.json lists only what differs from the defaults)
    defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Megatron:
    """Megatron-LM flags (megatron/training/arguments.py) the family's blocks need in a launch file."""

    # Llama-style blocks: --swiglu --normalization RMSNorm --position-embedding-type rope
    # --disable-bias-linear (and --untie-embeddings-and-output-weights when untied)
    llama: bool = False
    qk_layernorm: bool = False  # --qk-layernorm: a norm over each head's q and k
    # --qk-l2-norm (a weightless L2 norm of q and k) and --no-rope-freq (RoPE skipped on some layers)
    qk_l2_norm: bool = False


@dataclass(frozen=True)
class Family:
    """One Hugging Face model_type: everything gpuplan knows about it. Adding a family is adding one."""

    model_type: str  # config.json's model_type
    build: Builder  # reads the config into parameter tensors (builders/)
    kind: str  # one of KINDS
    norm: str  # one of NORMS
    tied: bool = False  # tie_word_embeddings when the config leaves it out (its config class's default)
    kv: str = "full"  # one of KV_LAYOUTS
    layer: LlamaLike | None = None  # the decoder layer, for the Llama-lineage builder
    text: Family | None = None  # a multimodal wrapper's text decoder (its text_config)
    # PEFT's default LoRA target modules (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING), or
    # the layers that play their part where PEFT has no entry; () where LoRA has no default
    lora_targets: tuple[str, ...] = ()
    # the transformers class FSDP's transformer auto-wrap wraps (the model's _no_split_modules);
    # None: wrapped by size
    fsdp_layer: str | None = None
    megatron: Megatron = Megatron()
    # its eager norm keeps an fp32 copy of its input for backward (transformers LlamaRMSNorm and kin
    # upcast): the memory estimate counts 4 + b bytes per element for it
    norm_upcasts: bool = False
    alias_of: str | None = None  # an old model_type that transformers loads as this one
    # the family's modeling code is the checkpoint's own (trust_remote_code), not transformers':
    # the hub repository and file it was read from; "" for the families transformers ships. Only
    # config.json is ever read; the file is never run
    hub_code: str = ""
    # one MLP matrix holds the gate and the up projection together (ChatGLM's dense_h_to_4h of
    # 2 x ffn_hidden_size, chunked in two before SwiGLU): gated, though it is one layer
    fused_gate_up: bool = False
