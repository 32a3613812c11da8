"""A model as gpuplan sees it: its parameter tensors, read from a Hugging Face config.json.

Each family's builder lists the parameter tensors the reference implementation (transformers)
creates, so totals are exact; from that list follow active parameters (MoE), per-layer linear
shapes (for LoRA), KV-cache bytes per token and forward FLOPs per token. Nothing from a model
repository is executed: the config is plain JSON.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gpuplan.errors import InvalidSettingError, ModelConfigError
from gpuplan.safeio import check_numbers, escape_controls

# Sanity bounds on what a config may ask for: integers past 2**53 are not exact as floats (FLOPs
# and bytes are floats), and the model is built layer by layer.
_MAX_CONFIG_INT: Final = 2**53
_MAX_LAYERS: Final = 100_000

# Roles of parameter groups, for breakdowns.
ROLES: Final = ("embedding", "position", "attention", "mlp", "expert", "router", "norm", "head", "conv", "other")


@dataclass(frozen=True)
class ParamGroup:
    """`count` copies of one parameter tensor of `numel` elements."""

    name: str
    numel: int
    count: int
    role: str
    # (in_features, out_features) where the tensor is the weight of a linear layer applied to
    # every token; None for embeddings, norms, biases and per-sequence heads
    linear: tuple[int, int] | None = None
    active_fraction: float = 1.0  # share of tokens that use it (top-k / num_experts for experts)
    stack: str = "decoder"  # "decoder", "encoder" or "shared"

    @property
    def total(self) -> int:
        return self.numel * self.count


@dataclass(frozen=True)
class AttentionLayer:
    """What one attention layer keeps per cached token and computes per attended token."""

    kv_elements: int  # cached elements per token (K and V, or MLA's latent + rope key)
    qk_dim: int  # heads x query/key head dim (score FLOPs per attended token / 2)
    v_dim: int  # heads x value head dim (AV FLOPs per attended token / 2)
    window: int | None = None  # sliding-window length, None for full attention
    cross: bool = False  # encoder-decoder cross-attention: attends to the input, caches per input token
    stack: str = "decoder"


@dataclass(frozen=True)
class ModelSpec:
    """A model's shape and parameters, in plain numbers."""

    name: str
    model_type: str
    kind: str  # "decoder", "encoder", "encoder-decoder", "vision-transformer", "cnn"
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int | None
    tie_word_embeddings: bool
    attention_type: str  # "mha", "gqa", "mqa", "mla", "none"
    groups: tuple[ParamGroup, ...]
    attention_layers: tuple[AttentionLayer, ...]
    num_experts: int = 0
    experts_per_token: int = 0
    num_shared_experts: int = 0
    # indices of the layers that hold experts (a MoE model's other layers are dense)
    moe_layer_ids: tuple[int, ...] = ()
    # CNN: forward FLOPs per image at its native resolution (no tokens), and those of them in
    # stride-1 3x3 convolutions (the ones cuDNN can run with Winograd's algorithm)
    conv_flops_per_sample: float = 0.0
    winograd_flops_per_sample: float = 0.0
    image_size: int | None = None
    config: Mapping[str, Any] = field(default_factory=dict, repr=False)

    # --- parameters -------------------------------------------------------------------------
    @property
    def total_params(self) -> int:
        return sum(g.total for g in self.groups)

    @property
    def active_params(self) -> int:
        """Parameters one token uses: all of them for dense models, top-k experts for MoE."""
        return round(sum(g.total * g.active_fraction for g in self.groups))

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def ffn_widths(self) -> tuple[int, int, int]:
        """(dense MLP, routed expert, shared experts) intermediate widths, 0 where there is none:
        read off the down projections (fan_out = hidden size) of the decoder's groups."""
        dense = expert = shared = 0
        for g in self.groups:
            if g.linear is None or g.stack != "decoder" or g.linear[1] != self.hidden_size:
                continue
            if g.role == "expert":
                expert = g.linear[0]
            elif g.role == "mlp" and "shared" in g.name:
                shared = g.linear[0]
            elif g.role == "mlp":
                dense = g.linear[0]
        return dense, expert, shared

    def tp_splits_heads(self, tp: int) -> bool:
        """Whether `tp` tensor-parallel ranks can split the attention: the query heads evenly and the
        KV heads evenly or replicated, tp a multiple of them (vLLM's and TensorRT-LLM's rule: each KV
        head is copied to tp / num_kv_heads ranks)."""
        kv = max(self.num_kv_heads, 1)
        return self.num_heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)

    def tp_heads_rule(self, tp: int) -> str:
        """The reason `tp` cannot split this model's attention, for an error message."""
        if self.num_heads % tp:
            return f"tp={tp} must divide the {self.num_heads} attention heads."
        return (
            f"tp={tp} must divide the {self.num_kv_heads} KV heads or be a multiple of them "
            "(each KV head is then copied to tp / KV heads ranks)."
        )

    @property
    def moe_layers(self) -> int:
        """Layers with a mixture of experts: one router each."""
        return max((g.count for g in self.groups if g.role == "router"), default=0)

    def params_by_role(self) -> dict[str, int]:
        out = dict.fromkeys(ROLES, 0)
        for g in self.groups:
            out[g.role] += g.total
        return {k: v for k, v in out.items() if v}

    @property
    def embedding_params(self) -> int:
        return sum(g.total for g in self.groups if g.role in ("embedding", "position"))

    def linear_layers(self) -> list[ParamGroup]:
        """Every per-token linear layer (name, (in, out), count): the targets LoRA can adapt."""
        return [g for g in self.groups if g.linear is not None]

    # --- KV cache ---------------------------------------------------------------------------
    def kv_bytes_per_token(self, bytes_per_element: float = 2.0, past_windows: bool = False) -> float:
        """KV-cache bytes one generated/cached token adds across all layers (16-bit by default);
        with `past_windows`, once the context is longer than every sliding window (only the
        full-attention layers still grow).

        GQA/MQA cache num_kv_heads heads; MLA caches the compressed latent plus the rope key
        (DeepSeek-V2 paper, sec. 2.1.2: (d_c + d_h^R) * l elements per token). Cross-attention
        caches are per input token (see `cross_kv_bytes_per_input_token`).
        """
        layers = (a for a in self.attention_layers if not a.cross and not (past_windows and a.window is not None))
        return sum(a.kv_elements for a in layers) * bytes_per_element

    def cross_kv_bytes_per_input_token(self, bytes_per_element: float = 2.0) -> float:
        return sum(a.kv_elements for a in self.attention_layers if a.cross) * bytes_per_element

    def kv_cache_bytes(self, context_len: int, bytes_per_element: float = 2.0, input_len: int = 0) -> float:
        """KV-cache bytes for one sequence of `context_len` tokens; sliding windows cap a layer's
        cache at the window (what vLLM and transformers' sliding caches keep)."""
        total = 0.0
        for a in self.attention_layers:
            if a.cross:
                total += a.kv_elements * input_len
            else:
                n = context_len if a.window is None else min(context_len, a.window)
                total += a.kv_elements * n
        return total * bytes_per_element

    # --- FLOPs ------------------------------------------------------------------------------
    def matmul_flops_per_token(self) -> float:
        """2 x active linear weights (PaLM, Appendix B: the 2N term), lm_head included."""
        return 2.0 * sum(
            g.linear[0] * g.linear[1] * g.count * g.active_fraction for g in self.groups if g.linear is not None
        )

    def attention_flops_per_token(self, context_len: int) -> float:
        """Score and value FLOPs of one token attending to `context_len` tokens, all layers.

        2*T*d_qk for Q.K^T plus 2*T*d_v for A.V per layer (PaLM, Appendix B: 12*L*H*Q*T for a
        training step is 3 x this forward term with d_qk = d_v = H*Q); windows cap T.
        """
        total = 0.0
        for a in self.attention_layers:
            t = context_len if a.window is None else min(context_len, a.window)
            total += 2.0 * t * (a.qk_dim + a.v_dim)
        return total

    def flops_per_token(self, context_len: int = 2048) -> float:
        """Forward FLOPs per token at a context of `context_len` (per image for a CNN)."""
        if self.kind == "cnn":
            return self.conv_flops_per_sample
        return self.matmul_flops_per_token() + self.attention_flops_per_token(context_len)


# ---------------------------------------------------------------------------------------------
# Reading a config
# ---------------------------------------------------------------------------------------------


class _Cfg:
    """Typed access to a config dict, with one clear error per missing or bad key."""

    def __init__(self, raw: Mapping[str, Any], name: str) -> None:
        self.raw = raw
        self.name = name

    def has(self, *keys: str) -> bool:
        return any(k in self.raw and self.raw[k] is not None for k in keys)

    def get_int(self, *keys: str, default: int | None = None) -> int:
        for k in keys:
            v = self.raw.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v != int(v) or v < 0:
                raise ModelConfigError(f"{self.name}: config key {k!r} must be a non-negative integer. Got {v!r}.")
            if v > _MAX_CONFIG_INT:
                raise ModelConfigError(f"{self.name}: config key {k!r} = {v!r} is too large for a model size.")
            return int(v)
        if default is not None:
            return default
        raise ModelConfigError(
            f"{self.name}: config.json lacks {' / '.join(repr(k) for k in keys)}, needed for a "
            f"{self.raw.get('model_type')!r} model."
        )

    def int_list(self, key: str, default: list[int] | None = None) -> list[int]:
        """A list of non-negative integers (resnet depths, mlp_only_layers, ...)."""
        v = self.raw.get(key)
        if v is None:
            if default is not None:
                return default
            raise ModelConfigError(f"{self.name}: config.json lacks {key!r}, a list of integers.")
        if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in v):
            raise ModelConfigError(
                f"{self.name}: config key {key!r} must be a list of non-negative integers. Got {v!r}."
            )
        return list(v)

    def sub(self, key: str) -> _Cfg:
        """A nested object (e.g. MPT's attn_config) with the same typed access."""
        v = self.raw.get(key) or {}
        if not isinstance(v, Mapping):
            raise ModelConfigError(f"{self.name}: config key {key!r} must be an object. Got {v!r}.")
        return _Cfg(v, f"{self.name}: {key}")

    def layers(self, *keys: str, default: int | None = None, minimum: int = 1) -> int:
        """A layer count (named by the first key): at least `minimum`, at most _MAX_LAYERS."""
        n = self.get_int(*keys, default=default)
        if minimum > 0:
            self.positive(n, keys[0])
        if n > _MAX_LAYERS:
            raise ModelConfigError(
                f"{self.name}: config key {keys[0]!r} = {n} layers is more than gpuplan models ({_MAX_LAYERS:,})."
            )
        return n

    def opt_int(self, *keys: str) -> int | None:
        return self.get_int(*keys) if self.has(*keys) else None

    def get_bool(self, key: str, default: bool) -> bool:
        v = self.raw.get(key, default)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise ModelConfigError(f"{self.name}: config key {key!r} must be true or false. Got {v!r}.")
        return v

    def get_str(self, key: str, default: str) -> str:
        v = self.raw.get(key, default)
        return default if v is None else str(v)

    def positive(self, value: int, key: str) -> int:
        if value <= 0:
            raise ModelConfigError(f"{self.name}: config key {key!r} must be positive. Got {value}.")
        return value


class _Groups:
    """Collects parameter groups while a builder walks the architecture."""

    def __init__(self) -> None:
        self.items: list[ParamGroup] = []
        self.attn: list[AttentionLayer] = []
        self.moe_layers: list[int] | None = None  # indices of the MoE layers (None: all, if any)

    def linear(
        self,
        name: str,
        fan_in: int,
        fan_out: int,
        count: int,
        role: str,
        *,
        bias: bool = False,
        frac: float = 1.0,
        stack: str = "decoder",
    ) -> None:
        if count <= 0 or fan_in <= 0 or fan_out <= 0:
            return
        self.items.append(ParamGroup(name, fan_in * fan_out, count, role, (fan_in, fan_out), frac, stack))
        if bias:
            self.items.append(ParamGroup(f"{name}.bias", fan_out, count, role, None, frac, stack))

    def vector(
        self, name: str, numel: int, count: int, role: str, *, frac: float = 1.0, stack: str = "decoder"
    ) -> None:
        if count > 0 and numel > 0:
            self.items.append(ParamGroup(name, numel, count, role, None, frac, stack))

    def norm(self, name: str, dim: int, count: int, *, bias: bool, stack: str = "decoder") -> None:
        self.vector(name, dim * (2 if bias else 1), count, "norm", stack=stack)


@dataclass
class _Shape:
    d: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ff: int
    vocab: int
    max_pos: int | None
    tied: bool


def _attention_kind(heads: int, kv_heads: int) -> str:
    if kv_heads == heads:
        return "mha"
    return "mqa" if kv_heads == 1 else "gqa"


def _check_heads(c: _Cfg, heads: int, kv_heads: int) -> None:
    c.positive(heads, "num_attention_heads")
    c.positive(kv_heads, "num_key_value_heads")
    if heads % kv_heads:
        raise ModelConfigError(
            f"{c.name}: num_attention_heads={heads} must be a multiple of num_key_value_heads={kv_heads}."
        )


def _split_heads(c: _Cfg, d: int, heads: int, key: str) -> int:
    """The head dim of families that split hidden_size evenly (their attention raises otherwise)."""
    c.positive(heads, key)
    if d % heads:
        raise ModelConfigError(f"{c.name}: hidden size {d} must be a multiple of {key}={heads}.")
    return d // heads


def _window_layers(c: _Cfg, layers: int, model_type: str) -> list[int | None]:
    """Per-layer sliding window (None = full attention)."""
    if not _FAMILIES.get(model_type, _LLAMA).windowed:
        return [None] * layers
    if model_type == "llama4_text":
        return _llama4_chunked_layers(c, layers)
    window = c.opt_int("sliding_window")
    if window is None or window <= 0:
        return [None] * layers
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and not c.get_bool("use_sliding_window", False):
        return [None] * layers
    types = c.raw.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return [window if t == "sliding_attention" else None for t in types]
    if model_type in ("gemma2", "gpt_oss"):
        # Gemma 2: local (sliding) and global attention alternate, the first layer local
        # (Gemma 2 report, sec. 2; transformers Gemma2: layer_idx % 2 == 0 is sliding);
        # gpt-oss likewise (model card sec. 2.1: banded-window and dense layers alternate;
        # transformers GptOssConfig's default layer_types start with "sliding_attention")
        return [window if i % 2 == 0 else None for i in range(layers)]
    if model_type == "gemma3_text":
        # Gemma 3: five local layers, then one global (Gemma 3 report, sec. 2.2); transformers
        # Gemma3TextConfig: layer i is global when (i + 1) % sliding_window_pattern == 0 (default 6)
        pattern = c.positive(c.get_int("sliding_window_pattern", default=6), "sliding_window_pattern")
        return [None if (i + 1) % pattern == 0 else window for i in range(layers)]
    return [window] * layers


def _llama4_chunked_layers(c: _Cfg, layers: int) -> list[int | None]:
    """Llama 4: the RoPE layers attend within chunks of attention_chunk_size tokens (so at most
    that many cached tokens matter to them), every no_rope_layer_interval-th layer (NoPE) attends to
    everything (transformers Llama4TextConfig: no_rope_layers[i] = 1 for the chunked RoPE layers,
    default (i + 1) % 4 != 0; vLLM keeps a chunk-sized cache for those layers)."""
    chunk = c.opt_int("attention_chunk_size")  # Llama4TextConfig's default 8192 via the family defaults
    if chunk is None or chunk <= 0:
        return [None] * layers
    types = c.raw.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return [chunk if t == "chunked_attention" else None for t in types]
    rope = c.int_list("no_rope_layers", default=[])
    if not rope:
        interval = c.positive(c.get_int("no_rope_layer_interval", default=4), "no_rope_layer_interval")
        rope = [int((i + 1) % interval != 0) for i in range(layers)]
    if len(rope) != layers:
        raise ModelConfigError(f"{c.name}: no_rope_layers has {len(rope)} entries for {layers} layers.")
    return [chunk if r else None for r in rope]


# --- decoder LMs of the Llama lineage ------------------------------------------------------------
# llama, mistral, mixtral, qwen2/3(+moe), gemma/2/3, phi3, gpt-oss, and the families whose layer is
# the same embed -> [norm, q/k/v/o attention, norm, MLP] x L -> norm -> lm_head with other knobs:
# OLMo 2, Granite, Cohere, Nemotron, StarCoder2, Phi (1.5/2).


@dataclass(frozen=True)
class _Family:
    """How a family's decoder layer departs from Llama's (the defaults), as transformers builds it."""

    tied: bool = False  # tie_word_embeddings when the config leaves it out
    bias_key: str | None = "attention_bias"  # the config flag for the q/k/v/o biases; None: fixed
    bias: bool = False  # those biases when the flag is absent (or always, without a flag)
    o_bias: bool = True  # False: o_proj never has one (Qwen2 biases q, k and v only)
    o_name: str = "o_proj"
    # gated MLP (gate, up, down: SwiGLU/GeGLU) or, with two names, a plain one (in, out)
    mlp: tuple[str, ...] = ("gate_proj", "up_proj", "down_proj")
    mlp_bias_key: str | None = "mlp_bias"
    mlp_bias: bool = False
    # q/k norms: "head" = one head_dim vector each, shared by the heads; "proj" = over the whole
    # q and k projections (heads x head_dim, kv_heads x head_dim)
    qk_norm: str = ""
    qk_norm_key: str | None = None  # the config flag that switches them on; None: always there
    norms: int = 2  # norms per layer
    norm_bias: bool = False  # LayerNorm with a bias (else RMSNorm / weight-only LayerNorm)
    head_bias: bool = False  # lm_head has a bias (kept when the weight is tied)
    windowed: bool = True  # honours sliding_window
    # what transformers' config class fills in for keys a config leaves out, where real configs
    # rely on it (Gemma 3's config.json lists only what differs from the defaults)
    defaults: Mapping[str, Any] = field(default_factory=dict)


_LLAMA: Final = _Family()

# transformers Gemma3TextConfig (models/gemma3/configuration_gemma3.py) defaults, 5.22
_GEMMA3_TEXT_DEFAULTS: Final = {
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
_LLAMA4_TEXT_DEFAULTS: Final = {
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

_FAMILIES: Final[dict[str, _Family]] = {
    # models/qwen2/modeling_qwen2.py: q/k/v biased, o_proj not
    "qwen2": _Family(bias=True, o_bias=False),
    "qwen2_moe": _Family(bias=True, o_bias=False),
    # models/qwen3/modeling_qwen3.py: RMSNorm over each head's q and k
    "qwen3": _Family(qk_norm="head"),
    "qwen3_moe": _Family(qk_norm="head"),
    "gemma": _Family(tied=True),
    # models/gemma2/modeling_gemma2.py: pre- and post-norms around attention and MLP
    "gemma2": _Family(tied=True, norms=4),
    # models/gemma3/modeling_gemma3.py: Gemma 2's four norms plus per-head q/k RMSNorm
    "gemma3_text": _Family(tied=True, norms=4, qk_norm="head", defaults=_GEMMA3_TEXT_DEFAULTS),
    # models/gpt_oss/modeling_gpt_oss.py (GptOssConfig: attention_bias=True)
    "gpt_oss": _Family(bias=True),
    # models/llama4/modeling_llama4.py: Llama's attention (its q/k L2 norm has no weights) with
    # chunked local attention on the RoPE layers; MoE or dense feed-forward per layer (below)
    "llama4_text": _Family(mlp_bias_key=None, defaults=_LLAMA4_TEXT_DEFAULTS),
    # models/olmo2/modeling_olmo2.py: post-norms only (after attention, after the MLP) and RMSNorm
    # over the whole q and k projections
    "olmo2": _Family(norms=2, qk_norm="proj", windowed=False),
    # models/granite/modeling_granite.py: Llama's layer; its multipliers are scalars, not weights
    "granite": _Family(windowed=False),
    # models/cohere/modeling_cohere.py: parallel attention and MLP after one weight-only LayerNorm;
    # optional q/k LayerNorms of shape (heads, head_dim); tied by default
    "cohere": _Family(tied=True, norms=1, qk_norm="proj", qk_norm_key="use_qk_norm", windowed=False),
    # models/nemotron/modeling_nemotron.py: squared-ReLU MLP without a gate, LayerNorm1P with bias
    "nemotron": _Family(mlp=("up_proj", "down_proj"), norm_bias=True, windowed=False),
    # models/starcoder2/modeling_starcoder2.py: use_bias on every linear, LayerNorm, plain GELU MLP
    "starcoder2": _Family(
        tied=True, bias_key="use_bias", bias=True, mlp=("c_fc", "c_proj"), mlp_bias_key="use_bias", mlp_bias=True,
        norm_bias=True,
    ),
    # models/phi/modeling_phi.py (phi-1, phi-1.5, phi-2): parallel attention and MLP after one
    # LayerNorm, biases everywhere (lm_head too), optional q/k LayerNorms; rotary on part of each head
    "phi": _Family(
        bias_key=None, bias=True, o_name="dense", mlp=("fc1", "fc2"), mlp_bias_key=None, mlp_bias=True,
        qk_norm="head", qk_norm_key="qk_layernorm", norms=1, norm_bias=True, head_bias=True, windowed=False,
    ),
}  # fmt: skip


def _build_llama_like(c: _Cfg, model_type: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    f = _FAMILIES.get(model_type, _LLAMA)
    if f.defaults:
        c = _Cfg({**f.defaults, **c.raw}, c.name)
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.get_int("num_attention_heads")
    kv_heads = c.get_int("num_key_value_heads", default=heads)
    _check_heads(c, heads, kv_heads)
    head_dim = c.get_int("head_dim", default=d // heads)
    ff = c.get_int("intermediate_size")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    tied = c.get_bool("tie_word_embeddings", f.tied)
    g = _Groups()
    g.vector("embed_tokens", vocab * d, 1, "embedding")

    qkv_bias = c.get_bool(f.bias_key, f.bias) if f.bias_key else f.bias
    o_bias = qkv_bias and f.o_bias
    mlp_bias = c.get_bool(f.mlp_bias_key, f.mlp_bias) if f.mlp_bias_key else f.mlp_bias
    q_out, kv_out = heads * head_dim, kv_heads * head_dim
    g.linear("self_attn.q_proj", d, q_out, layers, "attention", bias=qkv_bias)
    g.linear("self_attn.k_proj", d, kv_out, layers, "attention", bias=qkv_bias)
    g.linear("self_attn.v_proj", d, kv_out, layers, "attention", bias=qkv_bias)
    g.linear(f"self_attn.{f.o_name}", q_out, d, layers, "attention", bias=o_bias)
    if f.qk_norm and (f.qk_norm_key is None or c.get_bool(f.qk_norm_key, False)):
        # Phi's q/k LayerNorms are sized hidden_size // heads whatever head_dim says
        per_head = d // heads if model_type == "phi" else head_dim
        q_dim, k_dim = (per_head, per_head) if f.qk_norm == "head" else (q_out, kv_out)
        g.norm("self_attn.q_norm", q_dim, layers, bias=f.norm_bias)
        g.norm("self_attn.k_norm", k_dim, layers, bias=f.norm_bias)
    if model_type == "gpt_oss":
        # one learned attention-sink logit per query head (model card sec. 2.1; transformers
        # GptOssAttention.sinks [num_attention_heads])
        g.vector("self_attn.sinks", heads, layers, "attention")
    g.norm("layernorms", d, layers * f.norms, bias=f.norm_bias)
    g.norm("norm", d, 1, bias=f.norm_bias)

    moe: dict[str, int] = {}
    if model_type == "mixtral":
        experts = c.positive(c.get_int("num_local_experts"), "num_local_experts")
        k = c.get_int("num_experts_per_tok")
        moe = {"experts": experts, "k": k, "shared": 0}
        g.linear("block_sparse_moe.gate", d, experts, layers, "router")
        for w in ("w1", "w3"):
            g.linear(f"experts.{w}", d, ff, layers * experts, "expert", frac=k / experts)
        g.linear("experts.w2", ff, d, layers * experts, "expert", frac=k / experts)
    elif model_type == "gpt_oss":
        # gpt-oss (transformers GptOssTopKRouter / GptOssExperts): a biased linear router, and per
        # expert a fused gate_up projection [H, 2I] and a down projection [I, H], both biased
        experts = c.positive(c.get_int("num_local_experts"), "num_local_experts")
        k = c.positive(c.get_int("num_experts_per_tok", "experts_per_token"), "num_experts_per_tok")
        if k > experts:
            raise ModelConfigError(f"{c.name}: num_experts_per_tok={k} exceeds num_local_experts={experts}.")
        c.positive(ff, "intermediate_size")
        moe = {"experts": experts, "k": k, "shared": 0}
        g.linear("mlp.router", d, experts, layers, "router", bias=True)
        g.linear("mlp.experts.gate_up_proj", d, 2 * ff, layers * experts, "expert", bias=True, frac=k / experts)
        g.linear("mlp.experts.down_proj", ff, d, layers * experts, "expert", bias=True, frac=k / experts)
    elif model_type == "llama4_text":
        # Llama 4 (transformers Llama4TextMoe): on the MoE layers a router, the routed experts as
        # fused gate_up [E, H, 2I] and down [E, I, H] tensors, and a shared expert of width I that
        # every token runs; the other layers a dense SwiGLU MLP of width intermediate_size_mlp.
        # MoE layers: config.moe_layers, else every interleave_moe_layer_step-th from step - 1.
        experts = c.positive(c.get_int("num_local_experts"), "num_local_experts")
        k = c.positive(c.get_int("num_experts_per_tok", default=1), "num_experts_per_tok")
        if k > experts:
            raise ModelConfigError(f"{c.name}: num_experts_per_tok={k} exceeds num_local_experts={experts}.")
        c.positive(ff, "intermediate_size")
        dense_ff = c.positive(c.get_int("intermediate_size_mlp", default=16384), "intermediate_size_mlp")
        step = c.positive(c.get_int("interleave_moe_layer_step", default=1), "interleave_moe_layer_step")
        listed = c.int_list("moe_layers", default=list(range(step - 1, layers, step)))
        g.moe_layers = sorted({i for i in listed if 0 <= i < layers})
        n_sparse = len(g.moe_layers)
        n_dense = layers - n_sparse
        moe = {"experts": experts, "k": k, "shared": 1}
        g.linear("feed_forward.router", d, experts, n_sparse, "router")
        g.linear("feed_forward.experts.gate_up_proj", d, 2 * ff, n_sparse * experts, "expert", frac=k / experts)
        g.linear("feed_forward.experts.down_proj", ff, d, n_sparse * experts, "expert", frac=k / experts)
        for w in ("gate_proj", "up_proj"):
            g.linear(f"feed_forward.shared_expert.{w}", d, ff, n_sparse, "mlp")
        g.linear("feed_forward.shared_expert.down_proj", ff, d, n_sparse, "mlp")
        for w in ("gate_proj", "up_proj"):
            g.linear(f"feed_forward.{w}", d, dense_ff, n_dense, "mlp")
        g.linear("feed_forward.down_proj", dense_ff, d, n_dense, "mlp")
    elif model_type in ("qwen2_moe", "qwen3_moe"):
        experts = c.positive(c.get_int("num_experts"), "num_experts")
        k = c.get_int("num_experts_per_tok")
        moe_ff = c.positive(c.get_int("moe_intermediate_size"), "moe_intermediate_size")
        step = c.get_int("decoder_sparse_step", default=1)
        only_dense = set(c.int_list("mlp_only_layers", default=[]))
        sparse = [i for i in range(layers) if i not in only_dense and experts > 0 and step > 0 and (i + 1) % step == 0]
        g.moe_layers = sparse
        n_sparse, n_dense = len(sparse), layers - len(sparse)
        shared_ff = c.get_int("shared_expert_intermediate_size", default=0) if model_type == "qwen2_moe" else 0
        moe = {"experts": experts, "k": k, "shared": 1 if shared_ff else 0}
        g.linear("mlp.gate", d, experts, n_sparse, "router")
        for w in ("gate_proj", "up_proj"):
            g.linear(f"mlp.experts.{w}", d, moe_ff, n_sparse * experts, "expert", frac=k / experts)
        g.linear("mlp.experts.down_proj", moe_ff, d, n_sparse * experts, "expert", frac=k / experts)
        if shared_ff:
            for w in ("gate_proj", "up_proj"):
                g.linear(f"mlp.shared_expert.{w}", d, shared_ff, n_sparse, "mlp")
            g.linear("mlp.shared_expert.down_proj", shared_ff, d, n_sparse, "mlp")
            g.linear("mlp.shared_expert_gate", d, 1, n_sparse, "router")
        for w in ("gate_proj", "up_proj"):
            g.linear(f"mlp.{w}", d, ff, n_dense, "mlp")
        g.linear("mlp.down_proj", ff, d, n_dense, "mlp")
    else:
        c.positive(ff, "intermediate_size")
        *ins, out = f.mlp
        for name in ins:
            g.linear(f"mlp.{name}", d, ff, layers, "mlp", bias=mlp_bias)
        g.linear(f"mlp.{out}", ff, d, layers, "mlp", bias=mlp_bias)

    _lm_head(g, d, vocab, tied, bias=f.head_bias)
    windows = _window_layers(c, layers, model_type)
    g.attn = [AttentionLayer(2 * kv_out, q_out, q_out, w) for w in windows]
    shape = _Shape(d, layers, heads, kv_heads, head_dim, ff, vocab, c.opt_int("max_position_embeddings"), tied)
    return shape, g, moe


def _lm_head(g: _Groups, d: int, vocab: int, tied: bool, *, bias: bool = False) -> None:
    """The output projection: a real d x V matmul every token; only an untied head adds
    weights (a tied one reuses the input embedding); a bias stays the head's own either way."""
    if tied:
        g.items.append(ParamGroup("lm_head (tied to the embedding)", 0, 1, "head", (d, vocab)))
        g.vector("lm_head.bias", vocab if bias else 0, 1, "head")
    else:
        g.linear("lm_head", d, vocab, 1, "head", bias=bias)


# --- Gemma 3 with its vision tower (Gemma3ForConditionalGeneration) -----------------------------


def _build_gemma3(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    """Gemma 3 4B/12B/27B as transformers' Gemma3ForConditionalGeneration builds them
    (models/gemma3/modeling_gemma3.py): the Gemma 3 text decoder from text_config, a SigLIP
    vision tower from vision_config, and the projector between them.

    The vision tower and projector run once per image, not per text token: they count in the
    parameters (memory) but carry no per-token linear shapes (FLOPs, LoRA) and no KV cache.
    """
    text = c.sub("text_config")
    # the outer config's tie_word_embeddings (default true) ties lm_head to the text embedding;
    # text_config's own flag is not read
    tied = c.get_bool("tie_word_embeddings", True)
    shape, g, moe = _build_llama_like(_Cfg({**text.raw, "tie_word_embeddings": tied}, text.name), "gemma3_text")
    vision_d = _siglip_vision_tower(g, c.sub("vision_config"))
    # Gemma3MultiModalProjector: a (vision hidden x text hidden) weight and an RMSNorm
    g.vector("multi_modal_projector.mm_input_projection_weight", vision_d * shape.d, 1, "other", stack="encoder")
    g.vector("multi_modal_projector.mm_soft_emb_norm", vision_d, 1, "other", stack="encoder")
    return shape, g, moe


def _siglip_vision_tower(g: _Groups, v: _Cfg) -> int:
    """SigLIP's vision transformer as transformers' SiglipVisionModel (models/siglip/modeling_siglip.py);
    the defaults are SiglipVisionConfig's. Returns its hidden size."""
    d = v.positive(v.get_int("hidden_size", default=768), "hidden_size")
    ff = v.get_int("intermediate_size", default=3072)
    layers = v.layers("num_hidden_layers", default=12, minimum=0)
    _split_heads(v, d, v.get_int("num_attention_heads", default=12), "num_attention_heads")
    channels = v.get_int("num_channels", default=3)
    patch = v.positive(v.get_int("patch_size", default=16), "patch_size")
    patches = (v.positive(v.get_int("image_size", default=224), "image_size") // patch) ** 2
    block = 4 * (d * d + d) + 2 * d * ff + ff + d + 2 * (2 * d)  # q/k/v/out, fc1/fc2, 2 LayerNorms
    tower = "vision_tower"
    g.vector(f"{tower}.embeddings.patch_embedding", channels * patch * patch * d + d, 1, "other", stack="encoder")
    g.vector(f"{tower}.embeddings.position_embedding", patches * d, 1, "other", stack="encoder")
    g.vector(f"{tower}.encoder.layers", block, layers, "other", stack="encoder")
    g.vector(f"{tower}.post_layernorm", 2 * d, 1, "other", stack="encoder")
    # the attention-pooling head, unless the config says vision_use_head (false in Gemma 3)
    use_head = v.raw.get("vision_use_head", True)
    if use_head is not None and not isinstance(use_head, bool):
        raise ModelConfigError(f"{v.name}: config key 'vision_use_head' must be true or false. Got {use_head!r}.")
    if use_head:
        # probe, nn.MultiheadAttention (in_proj 3d x d + 3d, out_proj d x d + d), LayerNorm, MLP
        g.vector(f"{tower}.head", d + 4 * (d * d + d) + 2 * d + 2 * d * ff + ff + d, 1, "other", stack="encoder")
    return d


# --- Llama 4 with its vision encoder (Llama4ForConditionalGeneration) ---------------------------


def _build_llama4(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    """Llama 4 Scout / Maverick as transformers' Llama4ForConditionalGeneration builds them
    (models/llama4/modeling_llama4.py): the text decoder from text_config and, when the config has
    a vision_config, the vision encoder, its pixel-shuffle adapter and the projector. As for Gemma 3
    the vision side counts in the parameters only (it runs once per image)."""
    text = c.sub("text_config")
    tied = c.get_bool("tie_word_embeddings", False)
    shape, g, moe = _build_llama_like(_Cfg({**text.raw, "tie_word_embeddings": tied}, text.name), "llama4_text")
    if isinstance(c.raw.get("vision_config"), Mapping):
        v = c.sub("vision_config")
        vd = v.positive(v.get_int("hidden_size", default=768), "hidden_size")
        vff = v.positive(v.get_int("intermediate_size", default=5632), "intermediate_size")
        layers = v.layers("num_hidden_layers", default=34, minimum=0)
        _split_heads(v, vd, v.get_int("num_attention_heads", default=16), "num_attention_heads")
        patch = v.positive(v.get_int("patch_size", default=14), "patch_size")
        patches = (v.positive(v.get_int("image_size", default=448), "image_size") // patch) ** 2 + 1  # + class
        channels = v.positive(v.get_int("num_channels", default=3), "num_channels")
        proj_in = v.positive(v.get_int("projector_input_dim", default=4096), "projector_input_dim")
        proj_out = v.positive(v.get_int("projector_output_dim", default=4096), "projector_output_dim")
        out_dim = v.positive(v.get_int("vision_output_dim", default=7680), "vision_output_dim")
        enc = "vision_model"
        # Llama4VisionModel: unfold-conv patch embedding (no bias), class and position embeddings,
        # pre/post LayerNorms; encoder layers of biased q/k/v/o, fc1/fc2 and two LayerNorms
        g.vector(f"{enc}.patch_embedding", channels * patch * patch * vd, 1, "other", stack="encoder")
        g.vector(f"{enc}.class_and_positional_embedding", vd + patches * vd, 1, "other", stack="encoder")
        g.vector(f"{enc}.layernorm_pre/post", 4 * vd, 1, "other", stack="encoder")
        block = 4 * (vd * vd + vd) + 2 * vd * vff + vff + vd + 2 * (2 * vd)
        g.vector(f"{enc}.model.layers", block, layers, "other", stack="encoder")
        # Llama4VisionPixelShuffleMLP -> Llama4VisionMLP2: fc1 (intermediate -> projector_input),
        # fc2 (projector_output -> projector_output), no biases; Llama4MultiModalProjector linear_1
        g.vector(f"{enc}.vision_adapter", vff * proj_in + proj_out * proj_out, 1, "other", stack="encoder")
        g.vector("multi_modal_projector.linear_1", out_dim * shape.d, 1, "other", stack="encoder")
    return shape, g, moe


# --- DeepSeek V2 / V3: MLA attention, fine-grained MoE with shared experts ---------------------


def _build_deepseek(c: _Cfg, model_type: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.positive(c.get_int("num_attention_heads"), "num_attention_heads")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    ff = c.get_int("intermediate_size")
    q_lora = c.opt_int("q_lora_rank")
    kv_lora = c.get_int("kv_lora_rank")
    nope, rope, v_dim = c.get_int("qk_nope_head_dim"), c.get_int("qk_rope_head_dim"), c.get_int("v_head_dim")
    qk_head = nope + rope
    tied = c.get_bool("tie_word_embeddings", False)
    bias = c.get_bool("attention_bias", False)
    g = _Groups()
    g.vector("embed_tokens", vocab * d, 1, "embedding")
    # MLA (DeepSeek-V2 paper, sec. 2.1): low-rank query (optional) and joint KV compression
    if q_lora:
        g.linear("self_attn.q_a_proj", d, q_lora, layers, "attention", bias=bias)
        g.norm("self_attn.q_a_layernorm", q_lora, layers, bias=False)
        g.linear("self_attn.q_b_proj", q_lora, heads * qk_head, layers, "attention")
    else:
        g.linear("self_attn.q_proj", d, heads * qk_head, layers, "attention")
    g.linear("self_attn.kv_a_proj_with_mqa", d, kv_lora + rope, layers, "attention", bias=bias)
    g.norm("self_attn.kv_a_layernorm", kv_lora, layers, bias=False)
    g.linear("self_attn.kv_b_proj", kv_lora, heads * (nope + v_dim), layers, "attention")
    g.linear("self_attn.o_proj", heads * v_dim, d, layers, "attention", bias=bias)
    g.norm("layernorms", d, layers * 2, bias=False)
    g.norm("norm", d, 1, bias=False)

    experts = c.get_int("n_routed_experts", default=0)
    k = c.get_int("num_experts_per_tok", default=0)
    first_dense = c.get_int("first_k_dense_replace", default=0)
    freq = c.get_int("moe_layer_freq", default=1)
    moe_layers = [i for i in range(layers) if experts and i >= first_dense and i % max(freq, 1) == 0]
    g.moe_layers = moe_layers
    n_moe, n_dense = len(moe_layers), layers - len(moe_layers)
    moe_ff = c.get_int("moe_intermediate_size", default=0)
    shared = c.get_int("n_shared_experts", default=0)
    for w in ("gate_proj", "up_proj"):
        g.linear(f"mlp.{w}", d, ff, n_dense, "mlp")
    g.linear("mlp.down_proj", ff, d, n_dense, "mlp")
    if n_moe:
        c.positive(moe_ff, "moe_intermediate_size")  # zero-width experts would vanish from the count
        g.linear("mlp.gate", d, experts, n_moe, "router")
        for w in ("gate_proj", "up_proj"):
            g.linear(f"mlp.experts.{w}", d, moe_ff, n_moe * experts, "expert", frac=k / experts)
        g.linear("mlp.experts.down_proj", moe_ff, d, n_moe * experts, "expert", frac=k / experts)
        if shared:
            for w in ("gate_proj", "up_proj"):
                g.linear(f"mlp.shared_experts.{w}", d, moe_ff * shared, n_moe, "mlp")
            g.linear("mlp.shared_experts.down_proj", moe_ff * shared, d, n_moe, "mlp")
    _lm_head(g, d, vocab, tied)
    # cache: latent c^KV (kv_lora_rank) + decoupled rope key (qk_rope_head_dim) per layer
    g.attn = [AttentionLayer(kv_lora + rope, heads * qk_head, heads * v_dim) for _ in range(layers)]
    shape = _Shape(d, layers, heads, heads, qk_head, ff, vocab, c.opt_int("max_position_embeddings"), tied)
    return shape, g, {"experts": experts, "k": k, "shared": shared}


# --- GPT-2, GPT-NeoX (Pythia), Falcon, MPT, BLOOM, OPT, GPT-J, GPT-BigCode ----------------------


def _build_gpt2(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    d = c.positive(c.get_int("n_embd", "hidden_size"), "n_embd")
    layers = c.layers("n_layer", "num_hidden_layers")
    heads = c.positive(c.get_int("n_head", "num_attention_heads"), "n_head")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    pos = c.get_int("n_positions", "max_position_embeddings")
    ff = c.get_int("n_inner", default=4 * d)
    tied = c.get_bool("tie_word_embeddings", True)
    g = _Groups()
    g.vector("wte", vocab * d, 1, "embedding")
    g.vector("wpe", pos * d, 1, "position")
    g.norm("ln_1/ln_2", d, 2 * layers, bias=True)
    g.linear("attn.c_attn", d, 3 * d, layers, "attention", bias=True)
    g.linear("attn.c_proj", d, d, layers, "attention", bias=True)
    g.linear("mlp.c_fc", d, ff, layers, "mlp", bias=True)
    g.linear("mlp.c_proj", ff, d, layers, "mlp", bias=True)
    g.norm("ln_f", d, 1, bias=True)
    _lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * d, d, d) for _ in range(layers)]
    return _Shape(d, layers, heads, heads, d // heads, ff, vocab, pos, tied), g, {}


def _build_gpt_neox(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.positive(c.get_int("num_attention_heads"), "num_attention_heads")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    ff = c.positive(c.get_int("intermediate_size"), "intermediate_size")
    tied = c.get_bool("tie_word_embeddings", False)
    bias = c.get_bool("attention_bias", True)
    g = _Groups()
    g.vector("embed_in", vocab * d, 1, "embedding")
    g.norm("input/post_attention_layernorm", d, 2 * layers, bias=True)
    g.linear("attention.query_key_value", d, 3 * d, layers, "attention", bias=bias)
    g.linear("attention.dense", d, d, layers, "attention", bias=bias)
    g.linear("mlp.dense_h_to_4h", d, ff, layers, "mlp", bias=True)
    g.linear("mlp.dense_4h_to_h", ff, d, layers, "mlp", bias=True)
    g.norm("final_layer_norm", d, 1, bias=True)
    _lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * d, d, d) for _ in range(layers)]
    shape = _Shape(d, layers, heads, heads, d // heads, ff, vocab, c.opt_int("max_position_embeddings"), tied)
    return shape, g, {}


def _build_falcon(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    d = c.positive(c.get_int("hidden_size", "n_embed"), "hidden_size")
    layers = c.layers("num_hidden_layers", "n_layer")
    heads = c.positive(c.get_int("num_attention_heads", "n_head"), "num_attention_heads")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    head_dim = d // heads
    new_arch = c.get_bool("new_decoder_architecture", False)
    if new_arch:
        kv_heads = c.get_int("num_kv_heads", "n_head_kv", default=heads)
    elif c.get_bool("multi_query", True):
        kv_heads = 1
    else:
        kv_heads = heads
    _check_heads(c, heads, kv_heads)
    bias = c.get_bool("bias", False)
    ff = c.get_int("ffn_hidden_size", default=4 * d)
    tied = c.get_bool("tie_word_embeddings", True)
    parallel = c.get_bool("parallel_attn", True)
    g = _Groups()
    g.vector("word_embeddings", vocab * d, 1, "embedding")
    # Falcon: one shared LayerNorm in parallel-attention blocks; ln_attn + ln_mlp in the new
    # decoder architecture (num_ln_in_parallel_attn=2); two in sequential blocks
    n_ln = 2 if (new_arch and c.get_int("num_ln_in_parallel_attn", default=2) == 2) or not parallel else 1
    g.norm("layernorms", d, n_ln * layers, bias=True)
    g.linear("self_attention.query_key_value", d, (heads + 2 * kv_heads) * head_dim, layers, "attention", bias=bias)
    g.linear("self_attention.dense", d, d, layers, "attention", bias=bias)
    g.linear("mlp.dense_h_to_4h", d, ff, layers, "mlp", bias=bias)
    g.linear("mlp.dense_4h_to_h", ff, d, layers, "mlp", bias=bias)
    g.norm("ln_f", d, 1, bias=True)
    _lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * kv_heads * head_dim, d, d) for _ in range(layers)]
    shape = _Shape(d, layers, heads, kv_heads, head_dim, ff, vocab, c.opt_int("max_position_embeddings"), tied)
    return shape, g, {}


def _build_mpt(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    d = c.positive(c.get_int("d_model", "hidden_size"), "d_model")
    layers = c.layers("n_layers", "num_hidden_layers")
    heads = c.positive(c.get_int("n_heads", "num_attention_heads"), "n_heads")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    ff = c.get_int("expansion_ratio", default=4) * d
    no_bias = c.get_bool("no_bias", True)
    kv_heads = c.sub("attn_config").get_int("kv_n_heads", default=heads)
    _check_heads(c, heads, kv_heads)
    hd = d // heads
    g = _Groups()
    g.vector("wte", vocab * d, 1, "embedding")
    # MPT's LayerNorms carry no bias when no_bias is set (llm-foundry; 6,649,286,656 for MPT-7B)
    g.norm("norm_1/norm_2", d, 2 * layers, bias=not no_bias)
    g.linear("attn.Wqkv", d, (heads + 2 * kv_heads) * hd, layers, "attention", bias=not no_bias)
    g.linear("attn.out_proj", d, d, layers, "attention", bias=not no_bias)
    g.linear("ffn.up_proj", d, ff, layers, "mlp", bias=not no_bias)
    g.linear("ffn.down_proj", ff, d, layers, "mlp", bias=not no_bias)
    g.norm("norm_f", d, 1, bias=not no_bias)
    _lm_head(g, d, vocab, True)  # MPT always ties the output to wte
    g.attn = [AttentionLayer(2 * kv_heads * hd, d, d) for _ in range(layers)]
    return _Shape(d, layers, heads, kv_heads, hd, ff, vocab, c.opt_int("max_seq_len"), True), g, {}


def _build_bloom(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    d = c.positive(c.get_int("hidden_size", "n_embed"), "hidden_size")
    layers = c.layers("n_layer", "num_hidden_layers")
    heads = c.positive(c.get_int("n_head", "num_attention_heads"), "n_head")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    tied = c.get_bool("tie_word_embeddings", True)
    g = _Groups()
    g.vector("word_embeddings", vocab * d, 1, "embedding")
    g.norm("word_embeddings_layernorm", d, 1, bias=True)
    g.norm("input/post_attention_layernorm", d, 2 * layers, bias=True)
    g.linear("self_attention.query_key_value", d, 3 * d, layers, "attention", bias=True)
    g.linear("self_attention.dense", d, d, layers, "attention", bias=True)
    g.linear("mlp.dense_h_to_4h", d, 4 * d, layers, "mlp", bias=True)
    g.linear("mlp.dense_4h_to_h", 4 * d, d, layers, "mlp", bias=True)
    g.norm("ln_f", d, 1, bias=True)
    _lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * d, d, d) for _ in range(layers)]
    return _Shape(d, layers, heads, heads, d // heads, 4 * d, vocab, None, tied), g, {}


def _build_opt(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    """OPT (transformers models/opt/modeling_opt.py): learned positions with 2 extra rows
    (OPTLearnedPositionalEmbedding's offset), biases everywhere, a ReLU MLP of ffn_dim; pre-LN
    (and a final LayerNorm) or post-LN (opt-350m); embeddings of word_embed_proj_dim projected
    in and out when it differs from hidden_size (opt-350m: 512 vs 1024)."""
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.get_int("num_attention_heads")
    hd = _split_heads(c, d, heads, "num_attention_heads")
    ff = c.positive(c.get_int("ffn_dim"), "ffn_dim")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    pos = c.get_int("max_position_embeddings")
    proj = c.positive(c.get_int("word_embed_proj_dim", default=d), "word_embed_proj_dim")
    bias = c.get_bool("enable_bias", True)
    affine = c.get_bool("layer_norm_elementwise_affine", True)
    final_ln = c.get_bool("do_layer_norm_before", True) and not c.get_bool("_remove_final_layer_norm", False)
    tied = c.get_bool("tie_word_embeddings", True)
    g = _Groups()
    g.vector("embed_tokens", vocab * proj, 1, "embedding")
    g.vector("embed_positions", (pos + 2) * d, 1, "position")
    if proj != d:
        g.linear("project_in", proj, d, 1, "other")
        g.linear("project_out", d, proj, 1, "other")
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        g.linear(f"self_attn.{name}", d, d, layers, "attention", bias=bias)
    g.linear("fc1", d, ff, layers, "mlp", bias=bias)
    g.linear("fc2", ff, d, layers, "mlp", bias=bias)
    if affine:
        g.norm("self_attn_layer_norm/final_layer_norm", d, 2 * layers, bias=True)
        g.norm("decoder.final_layer_norm", d, 1 if final_ln else 0, bias=True)
    _lm_head(g, proj, vocab, tied)
    g.attn = [AttentionLayer(2 * d, d, d) for _ in range(layers)]
    return _Shape(d, layers, heads, heads, hd, ff, vocab, pos, tied), g, {}


def _build_gptj(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    """GPT-J (transformers models/gptj/modeling_gptj.py): attention and MLP in parallel after one
    LayerNorm, rotary on rotary_dim of each head (no weights), q/k/v/out without biases, a
    biased MLP, and an untied lm_head with a bias."""
    d = c.positive(c.get_int("n_embd", "hidden_size"), "n_embd")
    layers = c.layers("n_layer", "num_hidden_layers")
    heads = c.get_int("n_head", "num_attention_heads")
    hd = _split_heads(c, d, heads, "n_head")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    ff = c.positive(c.get_int("n_inner", default=4 * d), "n_inner")
    tied = c.get_bool("tie_word_embeddings", False)
    g = _Groups()
    g.vector("wte", vocab * d, 1, "embedding")
    g.norm("ln_1", d, layers, bias=True)
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        g.linear(f"attn.{name}", d, d, layers, "attention")
    g.linear("mlp.fc_in", d, ff, layers, "mlp", bias=True)
    g.linear("mlp.fc_out", ff, d, layers, "mlp", bias=True)
    g.norm("ln_f", d, 1, bias=True)
    _lm_head(g, d, vocab, tied, bias=True)
    g.attn = [AttentionLayer(2 * d, d, d) for _ in range(layers)]
    return (
        _Shape(d, layers, heads, heads, hd, ff, vocab, c.opt_int("n_positions", "max_position_embeddings"), tied),
        g,
        {},
    )


def _build_gpt_bigcode(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    """GPT-BigCode: SantaCoder, StarCoder(Base) (transformers models/gpt_bigcode/modeling_gpt_bigcode.py):
    GPT-2's block with multi-query attention (multi_query, the default: one K and V head, so c_attn
    projects to d + 2 x head_dim), learned positions, tied embeddings."""
    d = c.positive(c.get_int("n_embd", "hidden_size"), "n_embd")
    layers = c.layers("n_layer", "num_hidden_layers")
    heads = c.get_int("n_head", "num_attention_heads")
    hd = _split_heads(c, d, heads, "n_head")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    pos = c.get_int("n_positions", "max_position_embeddings")
    ff = c.positive(c.get_int("n_inner", default=4 * d), "n_inner")
    kv_heads = 1 if c.get_bool("multi_query", True) else heads
    tied = c.get_bool("tie_word_embeddings", True)
    g = _Groups()
    g.vector("wte", vocab * d, 1, "embedding")
    g.vector("wpe", pos * d, 1, "position")
    g.norm("ln_1/ln_2", d, 2 * layers, bias=True)
    g.linear("attn.c_attn", d, d + 2 * kv_heads * hd, layers, "attention", bias=True)
    g.linear("attn.c_proj", d, d, layers, "attention", bias=True)
    g.linear("mlp.c_fc", d, ff, layers, "mlp", bias=True)
    g.linear("mlp.c_proj", ff, d, layers, "mlp", bias=True)
    g.norm("ln_f", d, 1, bias=True)
    _lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * kv_heads * hd, d, d) for _ in range(layers)]
    return _Shape(d, layers, heads, kv_heads, hd, ff, vocab, pos, tied), g, {}


# --- encoders: BERT, RoBERTa; ViT ---------------------------------------------------------------


def _encoder_layers(g: _Groups, d: int, ff: int, layers: int, stack: str = "encoder") -> None:
    for n in ("query", "key", "value", "attention.output.dense"):
        g.linear(f"attention.{n}", d, d, layers, "attention", bias=True, stack=stack)
    g.linear("intermediate.dense", d, ff, layers, "mlp", bias=True, stack=stack)
    g.linear("output.dense", ff, d, layers, "mlp", bias=True, stack=stack)
    g.norm("layernorms", d, 2 * layers, bias=True, stack=stack)


def _build_bert(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.positive(c.get_int("num_attention_heads"), "num_attention_heads")
    ff = c.positive(c.get_int("intermediate_size"), "intermediate_size")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    pos = c.get_int("max_position_embeddings")
    types = c.get_int("type_vocab_size", default=2)
    g = _Groups()
    g.vector("embeddings.word_embeddings", vocab * d, 1, "embedding", stack="encoder")
    g.vector("embeddings.position_embeddings", pos * d, 1, "position", stack="encoder")
    g.vector("embeddings.token_type_embeddings", types * d, 1, "embedding", stack="encoder")
    g.norm("embeddings.LayerNorm", d, 1, bias=True, stack="encoder")
    _encoder_layers(g, d, ff, layers)
    # BertModel/RobertaModel's pooler: a dense layer on the first token only (per sequence)
    g.vector("pooler.dense", d * d + d, 1, "head", stack="encoder")
    g.attn = [AttentionLayer(0, d, d, stack="encoder") for _ in range(layers)]
    return _Shape(d, layers, heads, heads, d // heads, ff, vocab, pos, False), g, {}


def _build_vit(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.positive(c.get_int("num_attention_heads"), "num_attention_heads")
    ff = c.positive(c.get_int("intermediate_size"), "intermediate_size")
    image = c.positive(c.get_int("image_size", default=224), "image_size")
    patch = c.positive(c.get_int("patch_size", default=16), "patch_size")
    channels = c.get_int("num_channels", default=3)
    patches = (image // patch) ** 2
    labels = _num_labels(c)
    g = _Groups()
    g.vector("embeddings.cls_token", d, 1, "position", stack="encoder")
    g.vector("embeddings.position_embeddings", (patches + 1) * d, 1, "position", stack="encoder")
    # the patch embedding is a stride-p convolution = a linear map of each patch's pixels
    g.linear("embeddings.patch_embeddings", channels * patch * patch, d, 1, "embedding", bias=True, stack="encoder")
    _encoder_layers(g, d, ff, layers)
    g.norm("layernorm", d, 1, bias=True, stack="encoder")
    # ViTForImageClassification: a linear classifier on the [CLS] token (per image)
    g.vector("classifier", d * labels + labels, 1, "head", stack="encoder")
    g.attn = [AttentionLayer(0, d, d, stack="encoder") for _ in range(layers)]
    return _Shape(d, layers, heads, heads, d // heads, ff, 0, patches + 1, False), g, {}


def _num_labels(c: _Cfg) -> int:
    id2label = c.raw.get("id2label")
    if isinstance(id2label, dict) and id2label:
        return len(id2label)
    return c.get_int("num_labels", default=2)


# --- T5 / mT5 (encoder-decoder) -------------------------------------------------------------------


def _build_t5(c: _Cfg, model_type: str) -> tuple[_Shape, _Groups, dict[str, int]]:
    d = c.positive(c.get_int("d_model"), "d_model")
    dkv = c.positive(c.get_int("d_kv"), "d_kv")
    ff = c.positive(c.get_int("d_ff"), "d_ff")
    enc_layers = c.layers("num_layers")
    dec_layers = c.layers("num_decoder_layers", default=enc_layers, minimum=0)
    heads = c.positive(c.get_int("num_heads"), "num_heads")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    buckets = c.get_int("relative_attention_num_buckets", default=32)
    gated = c.get_str("feed_forward_proj", "relu").startswith("gated")
    tied = c.get_bool("tie_word_embeddings", model_type == "t5")
    inner = heads * dkv
    g = _Groups()
    g.vector("shared", vocab * d, 1, "embedding", stack="shared")
    for stack, n, blocks in (("encoder", enc_layers, 1), ("decoder", dec_layers, 2)):
        # self-attention (+ cross-attention in the decoder): q, k, v, o without biases
        for name in ("q", "k", "v"):
            g.linear(f"{stack}.attention.{name}", d, inner, n * blocks, "attention", stack=stack)
        g.linear(f"{stack}.attention.o", inner, d, n * blocks, "attention", stack=stack)
        # relative position bias: only the first layer's self-attention owns one (T5 paper sec. 2.1)
        g.vector(f"{stack}.relative_attention_bias", buckets * heads, 1, "position", stack=stack)
        for w in ("wi_0", "wi_1") if gated else ("wi",):
            g.linear(f"{stack}.DenseReluDense.{w}", d, ff, n, "mlp", stack=stack)
        g.linear(f"{stack}.DenseReluDense.wo", ff, d, n, "mlp", stack=stack)
        g.norm(f"{stack}.layer_norms", d, n * (blocks + 1) + 1, bias=False, stack=stack)
    _lm_head(g, d, vocab, tied)
    attn = [AttentionLayer(0, inner, inner, stack="encoder") for _ in range(enc_layers)]
    attn += [AttentionLayer(2 * inner, inner, inner) for _ in range(dec_layers)]
    attn += [AttentionLayer(2 * inner, inner, inner, cross=True) for _ in range(dec_layers)]
    g.attn = attn
    shape = _Shape(d, enc_layers + dec_layers, heads, heads, dkv, ff, vocab, None, tied)
    return shape, g, {}


# --- ResNet (the CNN path) --------------------------------------------------------------------


def _build_resnet(c: _Cfg, _: str) -> tuple[_Shape, _Groups, dict[str, int], float, float]:
    """ResNet v1.5 as transformers' ResNetForImageClassification (He et al. 2016, Table 1).

    Returns also the forward FLOPs per 224x224 image: 2 x multiply-adds of every convolution
    and the classifier (BatchNorm, ReLU and pooling are not counted, as in the paper's 3.8e9
    multiply-adds for ResNet-50), and those of its stride-1 3x3 convolutions alone.
    """
    emb = c.positive(c.get_int("embedding_size", default=64), "embedding_size")
    hidden = c.int_list("hidden_sizes")
    depths = c.int_list("depths")
    if not hidden or len(hidden) != len(depths) or min(hidden) < 1:
        raise ModelConfigError(
            f"{c.name}: a resnet config needs non-empty lists 'hidden_sizes' (positive) and 'depths' of equal length."
        )
    # the blocks are listed one by one: ResNet-152 has 50 and the 1001-layer ResNet of He et al.
    # (2016, "Identity Mappings") 333, so 10,000 refuses only nonsense (10**8 blocks hung the reader)
    if sum(depths) > _MAX_BLOCKS:
        raise ModelConfigError(
            f"{c.name}: config key 'depths' sums to {sum(depths):,} blocks; at most {_MAX_BLOCKS:,}."
        )
    for key, value in (("hidden_sizes", max(hidden)), ("embedding_size", emb)):
        if value > _MAX_HIDDEN:
            raise ModelConfigError(f"{c.name}: config key {key!r} holds {value:,}; at most {_MAX_HIDDEN:,}.")
    bottleneck = c.get_str("layer_type", "bottleneck") == "bottleneck"
    reduction = 4
    channels = c.get_int("num_channels", default=3)
    labels = _num_labels(c)
    image = 224
    g = _Groups()
    macs = wino = 0.0
    size = image // 2  # 7x7 stride-2 stem conv
    g.vector("embedder.convolution", channels * 7 * 7 * emb, 1, "conv")
    macs += channels * 49 * emb * size * size
    g.vector("embedder.normalization", 2 * emb, 1, "norm")
    size //= 2  # 3x3 stride-2 max pool
    cin = emb
    first_stride = 2 if c.get_bool("downsample_in_first_stage", False) else 1
    for stage, (cout, depth) in enumerate(zip(hidden, depths, strict=True)):
        for block in range(depth):
            stride = (first_stride if stage == 0 else 2) if block == 0 else 1
            out_size = size // stride
            if cin != cout or stride != 1:
                g.vector("shortcut.convolution", cin * cout, 1, "conv")
                g.vector("shortcut.normalization", 2 * cout, 1, "norm")
                macs += cin * cout * out_size * out_size
            if bottleneck:
                mid = cout // reduction
                # ResNet v1.5 (torchvision, transformers): the stride sits on the 3x3 conv
                convs = [(cin, mid, 1, size, 1), (mid, mid, 3, out_size, stride), (mid, cout, 1, out_size, 1)]
            else:
                convs = [(cin, cout, 3, out_size, stride), (cout, cout, 3, out_size, 1)]
            for ci, co, k, s, st in convs:
                g.vector("layer.convolution", ci * co * k * k, 1, "conv")
                g.vector("layer.normalization", 2 * co, 1, "norm")
                macs += ci * co * k * k * s * s
                wino += ci * co * k * k * s * s if (k, st) == (3, 1) else 0.0
            cin, size = cout, out_size
    g.vector("classifier", cin * labels + labels, 1, "head")
    macs += cin * labels
    shape = _Shape(cin, sum(depths), 0, 0, 0, 0, 0, None, False)
    return shape, g, {}, 2.0 * macs, 2.0 * wino


# ---------------------------------------------------------------------------------------------

_Builder = Callable[[_Cfg, str], tuple[_Shape, _Groups, dict[str, int]]]

_BUILDERS: Final[dict[str, tuple[_Builder, str]]] = {
    "llama": (_build_llama_like, "decoder"),
    "mistral": (_build_llama_like, "decoder"),
    "mixtral": (_build_llama_like, "decoder"),
    "qwen2": (_build_llama_like, "decoder"),
    "qwen3": (_build_llama_like, "decoder"),
    "qwen2_moe": (_build_llama_like, "decoder"),
    "qwen3_moe": (_build_llama_like, "decoder"),
    "gemma": (_build_llama_like, "decoder"),
    "gemma2": (_build_llama_like, "decoder"),
    "gemma3_text": (_build_llama_like, "decoder"),
    "gemma3": (_build_gemma3, "decoder"),
    "olmo2": (_build_llama_like, "decoder"),
    "granite": (_build_llama_like, "decoder"),
    "cohere": (_build_llama_like, "decoder"),
    "nemotron": (_build_llama_like, "decoder"),
    "starcoder2": (_build_llama_like, "decoder"),
    "phi": (_build_llama_like, "decoder"),
    "phi3": (_build_llama_like, "decoder"),
    "gpt_oss": (_build_llama_like, "decoder"),
    "llama4_text": (_build_llama_like, "decoder"),
    "llama4": (_build_llama4, "decoder"),
    "deepseek_v2": (_build_deepseek, "decoder"),
    "deepseek_v3": (_build_deepseek, "decoder"),
    "gpt2": (_build_gpt2, "decoder"),
    "gpt_neox": (_build_gpt_neox, "decoder"),
    "falcon": (_build_falcon, "decoder"),
    "RefinedWebModel": (_build_falcon, "decoder"),
    "RefinedWeb": (_build_falcon, "decoder"),
    "mpt": (_build_mpt, "decoder"),
    "bloom": (_build_bloom, "decoder"),
    "opt": (_build_opt, "decoder"),
    "gptj": (_build_gptj, "decoder"),
    "gpt_bigcode": (_build_gpt_bigcode, "decoder"),
    "bert": (_build_bert, "encoder"),
    "roberta": (_build_bert, "encoder"),
    "t5": (_build_t5, "encoder-decoder"),
    "mt5": (_build_t5, "encoder-decoder"),
    "vit": (_build_vit, "vision-transformer"),
}

SUPPORTED_MODEL_TYPES: Final = (*sorted(_BUILDERS), "resnet")


def model_from_config(config: Mapping[str, Any], name: str = "model") -> ModelSpec:
    """A ModelSpec from a parsed config.json (a dict). Raises ModelConfigError on bad input."""
    # the name comes from a folder, a hub id or a request: escape control characters once, here,
    # so no table, header or message prints a raw ESC sequence (a normal name is unchanged)
    name = escape_controls(name)
    if not isinstance(config, Mapping):
        raise ModelConfigError(f"{name}: config.json must hold a JSON object, not {type(config).__name__}.")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelConfigError(f"{name}: config.json has no 'model_type'; is this a Hugging Face model config?")
    try:  # NaN, infinity or a 300-digit integer anywhere (a pasted config can hold them): one line naming the key
        check_numbers(config, name)
    except InvalidSettingError as exc:
        raise ModelConfigError(str(exc)) from None
    c = _Cfg(config, name)
    if model_type == "resnet":
        shape, g, moe, conv_flops, wino = _build_resnet(c, model_type)
        return _spec(name, model_type, "cnn", shape, g, moe, config, conv_flops=(conv_flops, wino), image_size=224)
    if model_type not in _BUILDERS:
        raise ModelConfigError(
            f"{name}: model_type {model_type!r} is not supported. Supported: {', '.join(SUPPORTED_MODEL_TYPES)}."
        )
    builder, kind = _BUILDERS[model_type]
    shape, g, moe = builder(c, model_type)
    image = c.get_int("image_size", default=224) if kind == "vision-transformer" else None
    return _spec(name, model_type, kind, shape, g, moe, config, image_size=image)


# Bounds on a transformer's shape, far above every real model (the widest published, Megatron's 1T
# GPT, has hidden 25,600 and 128 heads of 200; vocabularies reach ~260k; DeepSeek-V3 has 256 routed
# experts), so only nonsense is refused: a 1e12 hidden size would otherwise price a 6e17-parameter
# model without a word.
_MAX_HIDDEN: Final = 1_000_000
_MAX_HEAD_DIM: Final = 65_536
_MAX_FFN: Final = 10_000_000
_MAX_VOCAB: Final = 100_000_000
_MAX_EXPERTS: Final = 100_000
# the longest context a config may claim: 100x Llama 4 Scout's 10,485,760 tokens
_MAX_CONTEXT: Final = 1_000_000_000
_MAX_BLOCKS: Final = 10_000  # ResNet blocks, listed one by one (see _build_resnet)
# Whatever the keys, the whole model: 10**15 parameters is ~500x the largest published (~2e12), and
# keeps every byte and FLOP count far from float overflow (1e15 x 1e18 tokens x 6 = 6e33).
_MAX_PARAMS: Final = 10**15


def _key_of(config: Mapping[str, Any], *keys: str) -> str:
    """The first of `keys` the config gives (the one a message names), else the first."""
    return next((k for k in keys if config.get(k) is not None), keys[0])


def _check_shape(name: str, s: _Shape, moe: Mapping[str, int], config: Mapping[str, Any]) -> None:
    """One ModelConfigError line for a shape no model has (zero head_dim or context, top-k experts
    out of range, sizes beyond the bounds above), naming the key the config used."""

    def bad(key: str, value: object, rule: str) -> ModelConfigError:
        return ModelConfigError(f"{name}: config key {key!r} = {value!r} {rule}.")

    if not 1 <= s.d <= _MAX_HIDDEN:
        raise bad(_key_of(config, "hidden_size", "n_embd", "d_model"), s.d, f"must be 1-{_MAX_HIDDEN:,}")
    if not 1 <= s.head_dim <= _MAX_HEAD_DIM:
        key = _key_of(config, "head_dim", "d_kv")
        raise bad(
            key if key in config else "head_dim (hidden size / heads)", s.head_dim, f"must be 1-{_MAX_HEAD_DIM:,}"
        )
    if s.ff > _MAX_FFN:
        raise bad(
            _key_of(config, "intermediate_size", "n_inner", "ffn_dim", "d_ff"), s.ff, f"must be at most {_MAX_FFN:,}"
        )
    if s.vocab > _MAX_VOCAB:
        raise bad("vocab_size", s.vocab, f"must be at most {_MAX_VOCAB:,}")
    if s.max_pos is not None and not 1 <= s.max_pos <= _MAX_CONTEXT:
        key = _key_of(config, "max_position_embeddings", "n_positions", "max_seq_len")
        if key not in config and "image_size" in config:  # a ViT's context is its patches (+ the class token)
            raise bad("image_size", config["image_size"], f"gives {s.max_pos:,} tokens; at most {_MAX_CONTEXT:,}")
        raise bad(key, s.max_pos, f"must be 1-{_MAX_CONTEXT:,} (the longest context the model takes)")
    experts, k = moe.get("experts", 0), moe.get("k", 0)
    if experts:
        if experts > _MAX_EXPERTS:
            key = _key_of(config, "num_local_experts", "num_experts", "n_routed_experts")
            raise bad(key, experts, f"must be at most {_MAX_EXPERTS:,}")
        if not 1 <= k <= experts:
            key = _key_of(config, "num_experts_per_tok", "experts_per_token")
            raise bad(key, k, f"must be 1 to the number of experts ({experts})")


def _spec(
    name: str,
    model_type: str,
    kind: str,
    s: _Shape,
    g: _Groups,
    moe: Mapping[str, int],
    config: Mapping[str, Any],
    *,
    conv_flops: tuple[float, float] = (0.0, 0.0),
    image_size: int | None = None,
) -> ModelSpec:
    if model_type in ("deepseek_v2", "deepseek_v3"):
        attention_type = "mla"
    elif kind == "cnn":
        attention_type = "none"
    else:
        attention_type = _attention_kind(s.heads, s.kv_heads)
    if any(p.numel < 0 for p in g.items):
        raise ModelConfigError(f"{name}: the config gives negative or non-finite tensor sizes.")
    if kind != "cnn":
        _check_shape(name, s, moe, config)
    total = sum(p.total for p in g.items)
    if total > _MAX_PARAMS or not all(math.isfinite(f) for f in conv_flops):
        raise ModelConfigError(
            f"{name}: the config describes {total:.3g} parameters, beyond any model (at most {_MAX_PARAMS:.0e}); "
            "check its sizes (hidden, layers, intermediate, experts, vocabulary)."
        )
    return ModelSpec(
        name=name,
        model_type=model_type,
        kind=kind,
        hidden_size=s.d,
        num_layers=s.layers,
        num_heads=s.heads,
        num_kv_heads=s.kv_heads,
        head_dim=s.head_dim,
        intermediate_size=s.ff,
        vocab_size=s.vocab,
        max_position_embeddings=s.max_pos,
        tie_word_embeddings=s.tied,
        attention_type=attention_type,
        groups=tuple(g.items),
        attention_layers=tuple(g.attn),
        num_experts=moe.get("experts", 0),
        experts_per_token=moe.get("k", 0),
        num_shared_experts=moe.get("shared", 0),
        moe_layer_ids=tuple(range(s.layers) if g.moe_layers is None else g.moe_layers) if moe.get("experts") else (),
        conv_flops_per_sample=conv_flops[0],
        winograd_flops_per_sample=conv_flops[1],
        image_size=image_size,
        config=dict(config),
    )
