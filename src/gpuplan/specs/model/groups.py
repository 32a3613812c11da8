"""What a builder collects while it walks an architecture (parameter groups, attention layers,
the shape) and the small pieces several builders share."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuplan.errors import ModelConfigError
from gpuplan.specs.model.config import Cfg
from gpuplan.specs.model.spec import AttentionLayer, ParamGroup


class Groups:
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
class Shape:
    d: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ff: int
    vocab: int
    max_pos: int | None
    tied: bool


@dataclass
class Built:
    """What a builder read from a config: the shape, the parameter groups with the attention
    layers, the mixture of experts ({"experts", "k", "shared"}; empty for a dense model) and, for a
    CNN, its forward FLOPs per image (all, and those in Winograd-able convolutions); the image size
    for the vision models."""

    shape: Shape
    groups: Groups
    moe: dict[str, int] = field(default_factory=dict)
    conv_flops: tuple[float, float] = (0.0, 0.0)
    image_size: int | None = None


def attention_kind(heads: int, kv_heads: int) -> str:
    if kv_heads == heads:
        return "mha"
    return "mqa" if kv_heads == 1 else "gqa"


def check_heads(c: Cfg, heads: int, kv_heads: int) -> None:
    c.positive(heads, "num_attention_heads")
    c.positive(kv_heads, "num_key_value_heads")
    if heads % kv_heads:
        raise ModelConfigError(
            f"{c.name}: num_attention_heads={heads} must be a multiple of num_key_value_heads={kv_heads}."
        )


def split_heads(c: Cfg, d: int, heads: int, key: str) -> int:
    """The head dim of families that split hidden_size evenly (their attention raises otherwise)."""
    c.positive(heads, key)
    if d % heads:
        raise ModelConfigError(f"{c.name}: hidden size {d} must be a multiple of {key}={heads}.")
    return d // heads


def lm_head(g: Groups, d: int, vocab: int, tied: bool, *, bias: bool = False) -> None:
    """The output projection: a real d x V matmul every token; only an untied head adds
    weights (a tied one reuses the input embedding); a bias stays the head's own either way."""
    if tied:
        g.items.append(ParamGroup("lm_head (tied to the embedding)", 0, 1, "head", (d, vocab)))
        g.vector("lm_head.bias", vocab if bias else 0, 1, "head")
    else:
        g.linear("lm_head", d, vocab, 1, "head", bias=bias)


def num_labels(c: Cfg) -> int:
    """The classifier's classes: id2label's length, else num_labels (default 2, as transformers)."""
    id2label = c.raw.get("id2label")
    if isinstance(id2label, dict) and id2label:
        return len(id2label)
    return c.get_int("num_labels", default=2)
