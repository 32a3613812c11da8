"""Activation memory: what autograd keeps for the backward pass, and the prefill's working set.

The accounting is Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", sec. 4.1), generalised from GPT's shapes to any layer the model lists:
per token and layer a transformer block keeps
  attention: the norm input (d), the QKV input (d), Q, K and V, the attention output (the
             output projection's input), and without FlashAttention the softmax scores
             (heads x s) plus, with attention dropout, their mask (1 byte) and dropped copy;
  MLP:       the norm input (d), the MLP input (d), and 2x the up-projection outputs (GeLU: its
             input and output; SwiGLU: gate, up, silu(gate), and their product);
  dropout:   one 1-byte mask of d per residual dropout site when hidden dropout > 0.
For GPT (ff = 4d, MHA, dropout) this is exactly the paper's 34sbh + 5as^2b bytes at 16 bits.
FlashAttention keeps Q, K, V, O and the fp32 log-sum-exp per head (Dao et al. 2022, Alg. 2),
so the s^2 term vanishes; selective recomputation (the paper's sec. 4.2) drops it too. Full
checkpointing keeps each layer's input (d per token, sec. 4.3) and rebuilds one layer at a time.
Tensor parallelism divides the head and MLP terms by t; the d-sized terms too with sequence
parallelism (sec. 4.2.2, Table 2). Frozen linear layers (LoRA's base) keep no input for weight
gradients, but the element-wise work between them does, so LoRA keeps nearly the same set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gpuplan.specs.model import ModelSpec, family_of

# FlashAttention-2 keeps the softmax log-sum-exp in fp32, one value per head and query token.
_LSE_BYTES: Final = 4.0
_MASK_BYTES: Final = 1.0  # torch dropout masks are bool tensors: 1 byte per element

_HIDDEN_DROPOUT_KEYS: Final = ("hidden_dropout_prob", "resid_pdrop", "hidden_dropout", "dropout_rate", "dropout")
_ATTN_DROPOUT_KEYS: Final = ("attention_probs_dropout_prob", "attn_pdrop", "attention_dropout", "attn_dropout")


def _dropout(model: ModelSpec, keys: tuple[str, ...]) -> float:
    for k in keys:
        v = model.config.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
    sub = model.config.get("attn_config")  # MPT keeps attn_pdrop in a nested dict
    if isinstance(sub, dict):
        for k in keys:
            v = sub.get(k)
            if isinstance(v, int | float) and not isinstance(v, bool):
                return float(v)
    return 0.0


def attention_dropout(model: ModelSpec) -> float:
    """The attention-probability dropout rate the model's config trains with (0 when it has none)."""
    return _dropout(model, _ATTN_DROPOUT_KEYS)


@dataclass(frozen=True)
class StackShape:
    """Per-token, per-layer sizes of one stack (decoder or encoder), averaged over its layers."""

    stack: str
    layers: int
    d: int
    heads: int
    q: float  # query elements (heads x qk head dim)
    k: float
    v: float
    attn_out: float
    latent: float  # MLA's compressed KV latent kept for the up-projections
    mlp_up: float  # outputs of the MLP's up/gate projections a token uses (top-k experts for MoE)
    gated: bool  # SwiGLU/GeGLU: gate and up projections (saves gate, act(gate), up, product)
    cross_layers: int  # encoder-decoder cross-attention blocks in this stack
    window: float | None  # mean sliding window (None: full attention)


_SHAPES: dict[int, tuple[ModelSpec, list[StackShape]]] = {}


def stack_shapes(model: ModelSpec) -> list[StackShape]:
    """The decoder and/or encoder stack of a transformer, from its parameter groups (cached per
    model object: ModelSpec is frozen, and the planner asks for the same model many times)."""
    hit = _SHAPES.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    shapes = _stack_shapes(model)
    if len(_SHAPES) > 64:
        _SHAPES.clear()
    _SHAPES[id(model)] = (model, shapes)
    return shapes


def _stack_shapes(model: ModelSpec) -> list[StackShape]:
    out: list[StackShape] = []
    d = model.hidden_size
    for stack in ("encoder", "decoder"):
        self_layers = [a for a in model.attention_layers if a.stack == stack and not a.cross]
        if not self_layers:
            continue
        n = len(self_layers)
        cross = sum(1 for a in model.attention_layers if a.stack == stack and a.cross)
        q = sum(a.qk_dim for a in self_layers) / n
        v_out = sum(a.v_dim for a in self_layers) / n
        if model.attention_type == "mla":
            k, v = q, v_out
            latent = sum(a.kv_elements for a in self_layers) / n
        else:
            kv = sum(a.kv_elements for a in self_layers) / n
            k, v = (kv / 2, kv / 2) if kv else (q, v_out)
            latent = 0.0
        up = 0.0
        up_names = set()
        for g in model.groups:
            if g.stack == stack and g.linear is not None and g.role in ("mlp", "expert") and g.linear[0] == d:
                up += g.linear[1] * g.count * g.active_fraction
                up_names.add(g.name.rsplit(".", 1)[-1])
        windows = [a.window for a in self_layers]
        window = None if any(w is None for w in windows) else sum(w for w in windows if w is not None) / n
        fam = family_of(model.model_type)
        gated = len(up_names) >= 2 or (fam is not None and fam.fused_gate_up)
        out.append(StackShape(stack, n, d, model.num_heads, q, k, v, v_out, latent, up / n, gated, cross, window))
    return out


@dataclass(frozen=True)
class ActivationSettings:
    bytes_per_value: float  # activation dtype: 2 for fp16/bf16 (fp8 training keeps bf16 activations), 4 for fp32
    checkpointing: str  # none | selective | selective-op | full
    flash: bool
    tp: int = 1
    sequence_parallel: bool = False
    # bytes a norm keeps per element of its input: the activation size when fused (Megatron,
    # torch.compile); 4 + b for an unfused RMSNorm that upcasts (transformers LlamaRMSNorm and
    # torchtune RMSNorm keep the fp32 copy and the normalised 16-bit result); 4 for LayerNorm
    # under autocast, which runs layer_norm in fp32 (torch.amp autocast op reference)
    norm_bytes: float | None = None
    # which linear inputs autograd keeps: a frozen linear keeps none for its weight gradient
    # (LoRA's base), so the QKV input, the MLP input and the down projection's input are kept
    # only where a trainable weight or a LoRA adapter reads them (torch saves an input of mm
    # only when the other operand requires grad: tools/autograd/derivatives.yaml)
    attn_input_kept: bool = True
    mlp_input_kept: bool = True
    down_input_kept: bool = True
    # LoRA dropout before each adapter keeps a 1-byte mask and the dropped input (PEFT LoraLayer)
    lora_dropout_elements: float = 0.0  # input elements of adapted matrices per layer


def layer_bytes_per_token(model: ModelSpec, s: StackShape, seq: int, cfg: ActivationSettings) -> float:
    """Bytes one layer of stack `s` keeps per token for backward, without checkpointing."""
    b = cfg.bytes_per_value
    t = cfg.tp
    rep = 1 if cfg.sequence_parallel else t  # d-sized terms are split only with sequence parallelism
    hidden_drop = _dropout(model, _HIDDEN_DROPOUT_KEYS) > 0
    attn_drop = attention_dropout(model) > 0
    ctx = seq if s.window is None else min(seq, s.window)

    norm = b if cfg.norm_bytes is None else cfg.norm_bytes

    def attention_block() -> float:
        boundary = s.d * (norm + (b if cfg.attn_input_kept else 0.0)) + (s.d * _MASK_BYTES if hidden_drop else 0.0)
        split = (s.q + s.k + s.v + s.attn_out + s.latent) * b
        if cfg.flash:
            split += s.heads * _LSE_BYTES
        elif cfg.checkpointing != "selective":
            # eager attention keeps the softmax output (fp32: transformers' softmax(dtype=float32)
            # and autocast both run it in fp32), the attention-dropout mask, and the 16-bit copy the
            # value matmul saves; Megatron's fused fp16 softmax gives the paper's 5as^2b instead
            soft = 4.0 if b < 4 else b
            split += s.heads * ctx * (soft + (_MASK_BYTES if attn_drop else 0.0) + (b if (b < 4 or attn_drop) else 0.0))
        return boundary / rep + split / t

    mlp_boundary = s.d * (norm + (b if cfg.mlp_input_kept else 0.0)) + (s.d * _MASK_BYTES if hidden_drop else 0.0)
    # gated: gate, act(gate), up (= mlp_up x 1.5) + the product for the down projection (0.5);
    # GeLU: the activation's input (1) + its output for the down projection (1)
    kept_up = (1.5 if s.gated else 1.0) + ((0.5 if s.gated else 1.0) if cfg.down_input_kept else 0.0)
    mlp = mlp_boundary / rep + kept_up * s.mlp_up * b / t
    lora_drop = cfg.lora_dropout_elements * (_MASK_BYTES + b)
    return attention_block() * (1 + s.cross_layers / s.layers) + mlp + lora_drop


def op_selective_bytes_per_token(s: StackShape, cfg: ActivationSettings) -> float:
    """torchtitan's per-op selective checkpointing (selective_ac_option "op"): each block keeps its
    input, the output of every other matmul (the policy saves aten.mm outputs except every second
    one, counting along the forward) and the attention kernel's output and log-sum-exp; the norms,
    activations and the other matmuls run again in backward (pytorch/torchtitan:
    torchtitan/models/llama3/parallelize_llama.py@01c79fdf6ce3ca7ed1f6808ba8a395a155bbdc40
    _apply_ac_to_transformer_block: _save_list, "except every second mm")."""
    b, t = cfg.bytes_per_value, cfg.tp
    rep = t if cfg.sequence_parallel else 1  # d-sized terms are split only with sequence parallelism
    # matmul outputs per token: Q, K, V (and MLA's latent), the output projection (d), the MLP's
    # up projections (mlp_up: gate and up together when gated) and the down projection (d)
    split = s.q + s.k + s.v + s.latent + s.mlp_up
    mm = split / t + 2.0 * s.d / rep
    attn = (s.attn_out * b + s.heads * _LSE_BYTES) / t
    return s.d * b / rep + 0.5 * mm * b + attn * (1 + s.cross_layers / s.layers)


def checkpoint_bytes_per_token(s: StackShape, cfg: ActivationSettings) -> float:
    """Full checkpointing: each layer keeps only its input (Korthikanti sec. 4.3: 2sbh)."""
    return s.d * cfg.bytes_per_value / (cfg.tp if cfg.sequence_parallel else 1)


def prefill_working_bytes_per_token(s: StackShape, bytes_per_value: float, tp: int = 1) -> float:
    """Inference keeps nothing for backward; the prefill's peak is one layer's working set:
    the residual stream, the normalised input and the MLP's up/gate outputs with their product
    (vLLM's profile run measures the same peak, vllm/worker/worker.py determine_num_available_blocks)."""
    return (2 * s.d + 1.5 * s.mlp_up) * bytes_per_value / tp + s.d * bytes_per_value
