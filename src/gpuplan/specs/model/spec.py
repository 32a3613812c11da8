"""What gpuplan knows of a model once its config.json is read: the parameter tensors (ParamGroup),
the attention layers' cache and FLOP sizes (AttentionLayer) and the whole (ModelSpec), with what
follows from them: active parameters (MoE), per-layer linear shapes (for LoRA), KV-cache bytes per
token and forward FLOPs per token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

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
        cache at the window (what vLLM and transformers' sliding caches keep).

        An encoder-decoder (T5) counts `context_len` as input + output like a decoder does, but its
        prompt goes to the encoder: each decoder layer caches self-attention K/V for the
        context_len - input_len decoder tokens and cross-attention K/V for the input_len encoder
        tokens (transformers' EncoderDecoderCache: a self_attention_cache and a
        cross_attention_cache per layer)."""
        self_len = max(context_len - input_len, 0) if self.kind == "encoder-decoder" else context_len
        total = 0.0
        for a in self.attention_layers:
            if a.cross:
                total += a.kv_elements * input_len
            else:
                n = self_len if a.window is None else min(self_len, a.window)
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
