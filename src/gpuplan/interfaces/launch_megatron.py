"""Megatron-LM pretrain_gpt.py flags for a launch plan: the layout, the model's shape (GQA, MLA,
MoE routers and layer patterns, Llama-style blocks), checkpointing and precision
(megatron/training/arguments.py). interfaces/launch.py writes them after torchrun."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from gpuplan.interfaces.quoting import ShellWords
from gpuplan.planner.launch_plan import LaunchPlan
from gpuplan.specs.model import ModelSpec, family_of

MEGATRON_ATTENTION: Final = {"flash": "flash", "fa3": "fused", "eager": "unfused"}


def pipeline_layout(layers: int, stages: int) -> str:
    """Megatron-Core's --pipeline-model-parallel-layout for `layers` decoder layers over `stages`
    virtual stages (pp x vp, in model order): the embedding (E) opens the first, the loss (L) closes
    the last, and the layers spread as evenly as they go, the spare ones to the middle stages, then
    to the first (the embedding is a cheap lookup) before the last (the head and the loss)
    (megatron/core/transformer/pipeline_parallel_layer_layout.py: "t" a decoder layer, "|" a stage)."""
    base, extra = divmod(layers, stages)
    counts = [base] * stages
    order = [*range(1, stages - 1), 0, stages - 1] if stages > 2 else list(range(stages))
    for i in order[:extra]:
        counts[i] += 1
    parts = ["t" * c for c in counts]
    parts[0] = "E" + parts[0]
    parts[-1] = parts[-1] + "L"
    return "|".join(parts)


def _megatron_shape_args(m: ModelSpec) -> list[str]:
    """The model-shape flags Megatron cannot infer (megatron/core/transformer/transformer_config.py,
    exposed as arguments): head size where it is not hidden / heads, q/k norms, and a MoE model's
    expert, shared-expert and dense widths and which layers hold experts (Megatron's
    moe_ffn_hidden_size defaults to ffn_hidden_size, the dense width)."""
    a: list[str] = []
    dense, expert, shared = m.ffn_widths()
    ffn = dense or m.intermediate_size
    if ffn:
        a.append(f"--ffn-hidden-size {ffn}")
    if m.attention_type != "mla" and m.num_heads and m.head_dim != m.hidden_size // m.num_heads:
        a.append(f"--kv-channels {m.head_dim}")
    if m.num_kv_heads and m.num_kv_heads != m.num_heads:
        a += ["--group-query-attention", f"--num-query-groups {m.num_kv_heads}"]
    if m.attention_type == "mla":
        a += _mla_args(m.config)
    fam = family_of(m.model_type)  # its Megatron flags: the family table (specs/model/families.py)
    if fam is not None and fam.megatron.qk_layernorm:
        a.append("--qk-layernorm")  # Qwen3: RMSNorm over each head's q and k
    if fam is not None and fam.megatron.qk_l2_norm:
        text = m.config.get("text_config", m.config) if m.model_type == "llama4" else m.config
        if isinstance(text, dict) and text.get("use_qk_norm", True):
            a.append("--qk-l2-norm")  # Llama 4: weightless L2 norm of q and k on the RoPE layers
        # RoPE skipped on every 4th layer (transformers Llama4TextConfig no_rope_layer_interval 4)
        if m.num_layers % 4 == 0 and [a_.window is None for a_ in m.attention_layers] == [
            (i + 1) % 4 == 0 for i in range(m.num_layers)
        ]:
            a.append("--no-rope-freq 4")
    if m.is_moe:
        a += [f"--num-experts {m.num_experts}", f"--moe-router-topk {m.experts_per_token}"]
        if expert:
            a.append(f"--moe-ffn-hidden-size {expert}")
        if shared:
            a.append(f"--moe-shared-expert-intermediate-size {shared}")
        a += _router_args(m.config)
        ids = set(m.moe_layer_ids)
        if len(ids) != m.num_layers:
            # Megatron's --moe-layer-freq pattern: 1 an expert layer, 0 a dense one, in layer order
            a += ["--moe-layer-freq", moe_layer_pattern([i in ids for i in range(m.num_layers)])]  # quoted
    return a


# Megatron-LM's own defaults for what a Llama-style config sets (megatron/training/arguments.py:
# --rotary-base 10000, --norm-epsilon 1e-5, no QKV bias under --disable-bias-linear, no RoPE scaling)
MEGATRON_ROTARY_BASE: Final = 10_000
MEGATRON_NORM_EPS: Final = 1e-5


def _rope_norm_bias_args(m: ModelSpec) -> list[str]:
    """The RoPE base, norm epsilon, q/k/v biases and Llama 3's RoPE scaling from the model's config
    (rope_theta, rms_norm_eps, the q/k/v bias tensors, rope_scaling.rope_type "llama3"), as
    Megatron-LM spells them (--rotary-base, --norm-epsilon, --add-qkv-bias, --use-rope-scaling with
    --rope-scaling-factor; megatron/training/arguments.py); its defaults would build another model."""
    cfg, a = m.config, []
    theta = cfg.get("rope_theta", MEGATRON_ROTARY_BASE)
    if isinstance(theta, int | float) and not isinstance(theta, bool) and theta != MEGATRON_ROTARY_BASE:
        a.append(f"--rotary-base {round(theta)}")  # an int argument
    eps = cfg.get("rms_norm_eps", MEGATRON_NORM_EPS)
    if isinstance(eps, float) and eps != MEGATRON_NORM_EPS:
        a.append(f"--norm-epsilon {eps:g}")
    if any(g.name.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias")) for g in m.groups):
        a.append("--add-qkv-bias")  # Qwen2: biases on q, k and v only (the rest stay off)
    scaling = cfg.get("rope_scaling")
    if isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type")) == "llama3":
        a += ["--use-rope-scaling", f"--rope-scaling-factor {float(scaling.get('factor', 8.0)):g}"]
    return a


def _mla_args(cfg: Mapping[str, Any]) -> list[str]:
    """DeepSeek-V2/V3 multi-latent attention (Megatron-Core MLATransformerConfig, as its DeepSeek-V3
    example sets it: low-rank q and kv, nope / rope / value head sizes, and the q_a / kv_a norms
    as --qk-layernorm)."""
    a = ["--multi-latent-attention"]
    if cfg.get("q_lora_rank"):
        a.append(f"--q-lora-rank {cfg['q_lora_rank']}")
    for key, flag in (("kv_lora_rank", "kv-lora-rank"), ("qk_nope_head_dim", "qk-head-dim"),
                      ("qk_rope_head_dim", "qk-pos-emb-head-dim"), ("v_head_dim", "v-head-dim")):  # fmt: skip
        if isinstance(cfg.get(key), int):
            a.append(f"--{flag} {cfg[key]}")
    if isinstance(cfg.get("v_head_dim"), int):
        a.append(f"--kv-channels {cfg['v_head_dim']}")
    return [*a, "--qk-layernorm"]


def _router_args(cfg: Mapping[str, Any]) -> list[str]:
    """The router as the config describes it (DeepSeek-V3: sigmoid scores, experts picked within the
    best 4 of 8 groups, weights scaled by 2.5, an expert bias for aux-loss-free balancing)."""
    a: list[str] = []
    if cfg.get("scoring_func") == "sigmoid":
        a.append("--moe-router-score-function sigmoid")
    if isinstance(cfg.get("n_group"), int) and isinstance(cfg.get("topk_group"), int) and cfg["n_group"] > 1:
        a += [f"--moe-router-num-groups {cfg['n_group']}", f"--moe-router-group-topk {cfg['topk_group']}"]
    factor = cfg.get("routed_scaling_factor")
    if isinstance(factor, int | float) and not isinstance(factor, bool) and factor != 1:
        a.append(f"--moe-router-topk-scaling-factor {factor:g}")
    if cfg.get("topk_method") == "noaux_tc":
        a.append("--moe-router-enable-expert-bias")
    return a


def moe_layer_pattern(is_moe: list[bool]) -> str:
    """A Python list expression of 1s (expert layers) and 0s (dense) that Megatron evaluates
    (megatron/training/arguments.py moe_freq_type): a repeated unit when the layers repeat one,
    else runs, e.g. "([0,1]*24)" or "([0]*3+[1]*58)"."""
    bits = [int(b) for b in is_moe]
    n = len(bits)
    for unit in range(1, n // 2 + 1):
        if n % unit == 0 and bits == bits[:unit] * (n // unit):
            return f"([{','.join(map(str, bits[:unit]))}]*{n // unit})"
    runs: list[str] = []
    i = 0
    while i < n:
        j = i
        while j < n and bits[j] == bits[i]:
            j += 1
        runs.append(f"[{bits[i]}]*{j - i}")
        i = j
    return f"({'+'.join(runs)})"


def megatron_args(lp: LaunchPlan) -> list[str]:
    """Megatron-LM pretrain_gpt.py flags (megatron/training/arguments.py) for the model and layout."""
    w, m = lp.w, lp.model
    a = [
        f"--tensor-model-parallel-size {w.tp}",
        f"--pipeline-model-parallel-size {w.pp}",
    ]
    stages = w.pp * w.vp
    if w.pp > 1 and m.num_layers % stages == 0:
        if w.vp > 1:
            a.append(f"--num-layers-per-virtual-pipeline-stage {m.num_layers // stages}")
    elif w.pp > 1 and (m.num_layers + 2) % stages == 0:  # layers + embedding + loss split evenly
        a += [
            *([f"--num-virtual-stages-per-pipeline-rank {w.vp}"] if w.vp > 1 else []),
            "--account-for-embedding-in-pipeline-split",
            "--account-for-loss-in-pipeline-split",
        ]
    elif w.pp > 1:  # an uneven split, spelled out stage by stage
        a += ["--pipeline-model-parallel-layout", pipeline_layout(m.num_layers, stages)]  # quoted: "|"
    if w.cp > 1:
        a.append(f"--context-parallel-size {w.cp}")
    if w.ep > 1:
        a.append(f"--expert-model-parallel-size {w.ep}")
    if w.etp is not None:
        a.append(f"--expert-tensor-parallel-size {w.etp}")
    # the overlaps and fusions the estimate assumed, which Megatron-LM's bare defaults leave off
    # (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553: megatron/training/arguments.py
    # --overlap-grad-reduce, --overlap-param-gather (distributed optimizer only, with the grad-reduce
    # overlap); --sequence-parallel, --tp-comm-overlap (Transformer Engine userbuffers, needs sequence
    # parallelism) and --cross-entropy-loss-fusion are megatron/core/model_parallel_config.py fields,
    # made flags by training/argument_utils.py; examples/llama/train_llama3_8b_h100_fp8.sh passes them)
    if w.sequence_parallel:
        a.append("--sequence-parallel")
    if w.tp_comm_overlap:
        a.append("--tp-comm-overlap")
    if w.zero >= 1:
        a += ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
    if w.compile:  # frameworks.toml megatron compile: the fused kernels and the fused cross-entropy
        a.append("--cross-entropy-loss-fusion")
    a += [
        f"--num-layers {m.num_layers}",
        f"--hidden-size {m.hidden_size}",
        f"--num-attention-heads {m.num_heads}",
        f"--seq-length {w.seq_len}",
        f"--max-position-embeddings {max(w.seq_len, m.max_position_embeddings or 0)}",
        f"--micro-batch-size {w.batch_size}",
        f"--global-batch-size {w.batch_size * w.micro_batches * w.dp}",
    ]
    a += _megatron_shape_args(m)
    fam = family_of(m.model_type)
    if fam is not None and fam.megatron.llama:
        # Llama-style blocks: SwiGLU MLP, RMSNorm, rotary positions, no biases, untied head
        a += ["--swiglu", "--normalization RMSNorm", "--position-embedding-type rope", "--disable-bias-linear"]
        if not m.tie_word_embeddings:
            a.append("--untie-embeddings-and-output-weights")
        a += _rope_norm_bias_args(m)
    # the attention kernel the estimate assumed (megatron/core/transformer/enums.py AttnBackend):
    # flash-attn, Transformer Engine's cuDNN fused attention, or the unfused softmax
    a.append(f"--attention-backend {MEGATRON_ATTENTION[w.attention_impl]}")
    if w.activation_checkpointing == "selective":
        a.append("--recompute-granularity selective")
    elif w.activation_checkpointing == "full":
        a += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    a.append({"bf16": "--bf16", "fp16": "--fp16", "fp8": "--bf16 --fp8-format hybrid"}.get(w.precision, ""))
    if w.train_tokens:
        iters = math.ceil(w.train_tokens / (w.batch_size * w.micro_batches * w.dp * w.seq_len))
        a.append(f"--train-iters {iters}")
    return [ShellWords(x) for x in a if x]  # "--flag value" items: each word quoted on its own
