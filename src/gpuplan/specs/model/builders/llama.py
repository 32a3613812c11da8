"""Decoder LMs of the Llama lineage: llama, mistral, mixtral, qwen2/3(+moe), gemma/2/3, phi3,
gpt-oss, Llama 4's text decoder, and the families whose layer is the same embed -> [norm, q/k/v/o
attention, norm, MLP] x L -> norm -> lm_head with other knobs: OLMo 2, Granite, Cohere, Nemotron,
StarCoder2, Phi (1.5/2). How each departs from Llama is its record's LlamaLike (families.py); the
mixtures of experts are the functions below, named there."""

from __future__ import annotations

from gpuplan.errors import ModelConfigError
from gpuplan.specs.model.config import Cfg
from gpuplan.specs.model.groups import Built, Groups, Shape, check_heads, lm_head
from gpuplan.specs.model.record import Family, LlamaLike
from gpuplan.specs.model.spec import AttentionLayer


def build_llama_like(c: Cfg, fam: Family) -> Built:
    f = fam.layer
    if f is None:
        raise TypeError(f"{fam.model_type}: a Llama-lineage family needs its LlamaLike layer in the family table.")
    if f.defaults:
        c = Cfg({**f.defaults, **c.raw}, c.name)
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.get_int("num_attention_heads")
    kv_heads = c.get_int("num_key_value_heads", default=heads)
    check_heads(c, heads, kv_heads)
    head_dim = c.get_int("head_dim", default=d // heads)
    ff = c.get_int("intermediate_size")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    g = Groups()
    g.vector("embed_tokens", vocab * d, 1, "embedding")
    mlp_bias = _attention(c, f, g, d, heads, kv_heads, head_dim, layers)
    g.norm("layernorms", d, layers * f.norms, bias=f.norm_bias)
    g.norm("norm", d, 1, bias=f.norm_bias)

    moe: dict[str, int] = {}
    if f.moe is not None:
        moe = f.moe(c, g, d, ff, layers)
    else:
        c.positive(ff, "intermediate_size")
        *ins, out = f.mlp
        for name in ins:
            g.linear(f"mlp.{name}", d, ff, layers, "mlp", bias=mlp_bias)
        g.linear(f"mlp.{out}", ff, d, layers, "mlp", bias=mlp_bias)

    lm_head(g, d, vocab, tied, bias=f.head_bias)
    windows = window_layers(c, layers, fam.kv)
    q_out, kv_out = heads * head_dim, kv_heads * head_dim
    g.attn = [AttentionLayer(2 * kv_out, q_out, q_out, w) for w in windows]
    shape = Shape(d, layers, heads, kv_heads, head_dim, ff, vocab, c.opt_int("max_position_embeddings"), tied)
    return Built(shape, g, moe)


def _attention(c: Cfg, f: LlamaLike, g: Groups, d: int, heads: int, kv_heads: int, head_dim: int, layers: int) -> bool:
    """q/k/v/o with their biases, the q/k norms and the sinks; returns whether the MLP has biases
    (read here, where transformers' config reads it, so a bad key is named in the same order)."""
    qkv_bias = c.get_bool(f.bias_key, f.bias) if f.bias_key else f.bias
    o_bias = qkv_bias and f.o_bias
    mlp_bias = c.get_bool(f.mlp_bias_key, f.mlp_bias) if f.mlp_bias_key else f.mlp_bias
    q_out, kv_out = heads * head_dim, kv_heads * head_dim
    g.linear("self_attn.q_proj", d, q_out, layers, "attention", bias=qkv_bias)
    g.linear("self_attn.k_proj", d, kv_out, layers, "attention", bias=qkv_bias)
    g.linear("self_attn.v_proj", d, kv_out, layers, "attention", bias=qkv_bias)
    g.linear(f"self_attn.{f.o_name}", q_out, d, layers, "attention", bias=o_bias)
    if f.qk_norm and (f.qk_norm_key is None or c.get_bool(f.qk_norm_key, False)):
        per_head = d // heads if f.qk_norm == "split" else head_dim
        q_dim, k_dim = (q_out, kv_out) if f.qk_norm == "proj" else (per_head, per_head)
        g.norm("self_attn.q_norm", q_dim, layers, bias=f.norm_bias)
        g.norm("self_attn.k_norm", k_dim, layers, bias=f.norm_bias)
    if f.sinks:
        # one learned attention-sink logit per query head (gpt-oss model card sec. 2.1; transformers
        # GptOssAttention.sinks [num_attention_heads])
        g.vector("self_attn.sinks", heads, layers, "attention")
    return mlp_bias


def window_layers(c: Cfg, layers: int, kv: str) -> list[int | None]:
    """Per-layer sliding window (None = full attention), by the family's KV layout."""
    if kv == "chunked":
        return _llama4_chunked_layers(c, layers)
    if kv not in ("sliding", "sliding-opt-in", "alternating", "local-global"):
        return [None] * layers
    window = c.opt_int("sliding_window")
    if window is None or window <= 0:
        return [None] * layers
    if kv == "sliding-opt-in" and not c.get_bool("use_sliding_window", False):
        return [None] * layers
    types = c.raw.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return [window if t == "sliding_attention" else None for t in types]
    if kv == "alternating":
        # Gemma 2: local (sliding) and global attention alternate, the first layer local
        # (Gemma 2 report, sec. 2; transformers Gemma2: layer_idx % 2 == 0 is sliding);
        # gpt-oss likewise (model card sec. 2.1: banded-window and dense layers alternate;
        # transformers GptOssConfig's default layer_types start with "sliding_attention")
        return [window if i % 2 == 0 else None for i in range(layers)]
    if kv == "local-global":
        # Gemma 3: five local layers, then one global (Gemma 3 report, sec. 2.2); transformers
        # Gemma3TextConfig: layer i is global when (i + 1) % sliding_window_pattern == 0 (default 6)
        pattern = c.positive(c.get_int("sliding_window_pattern", default=6), "sliding_window_pattern")
        return [None if (i + 1) % pattern == 0 else window for i in range(layers)]
    return [window] * layers


def _llama4_chunked_layers(c: Cfg, layers: int) -> list[int | None]:
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


# --- the mixtures of experts -------------------------------------------------------------------


def mixtral_experts(c: Cfg, g: Groups, d: int, ff: int, layers: int) -> dict[str, int]:
    """Mixtral (transformers MixtralSparseMoeBlock): a router and num_local_experts SwiGLU experts
    (w1, w3, w2) of width intermediate_size on every layer."""
    experts = c.positive(c.get_int("num_local_experts"), "num_local_experts")
    k = c.get_int("num_experts_per_tok")
    g.linear("block_sparse_moe.gate", d, experts, layers, "router")
    for w in ("w1", "w3"):
        g.linear(f"experts.{w}", d, ff, layers * experts, "expert", frac=k / experts)
    g.linear("experts.w2", ff, d, layers * experts, "expert", frac=k / experts)
    return {"experts": experts, "k": k, "shared": 0}


def gpt_oss_experts(c: Cfg, g: Groups, d: int, ff: int, layers: int) -> dict[str, int]:
    """gpt-oss (transformers GptOssTopKRouter / GptOssExperts): a biased linear router, and per
    expert a fused gate_up projection [H, 2I] and a down projection [I, H], both biased."""
    experts = c.positive(c.get_int("num_local_experts"), "num_local_experts")
    k = c.positive(c.get_int("num_experts_per_tok", "experts_per_token"), "num_experts_per_tok")
    if k > experts:
        raise ModelConfigError(f"{c.name}: num_experts_per_tok={k} exceeds num_local_experts={experts}.")
    c.positive(ff, "intermediate_size")
    g.linear("mlp.router", d, experts, layers, "router", bias=True)
    g.linear("mlp.experts.gate_up_proj", d, 2 * ff, layers * experts, "expert", bias=True, frac=k / experts)
    g.linear("mlp.experts.down_proj", ff, d, layers * experts, "expert", bias=True, frac=k / experts)
    return {"experts": experts, "k": k, "shared": 0}


def llama4_experts(c: Cfg, g: Groups, d: int, ff: int, layers: int) -> dict[str, int]:
    """Llama 4 (transformers Llama4TextMoe): on the MoE layers a router, the routed experts as
    fused gate_up [E, H, 2I] and down [E, I, H] tensors, and a shared expert of width I that
    every token runs; the other layers a dense SwiGLU MLP of width intermediate_size_mlp.
    MoE layers: config.moe_layers, else every interleave_moe_layer_step-th from step - 1."""
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
    g.linear("feed_forward.router", d, experts, n_sparse, "router")
    g.linear("feed_forward.experts.gate_up_proj", d, 2 * ff, n_sparse * experts, "expert", frac=k / experts)
    g.linear("feed_forward.experts.down_proj", ff, d, n_sparse * experts, "expert", frac=k / experts)
    for w in ("gate_proj", "up_proj"):
        g.linear(f"feed_forward.shared_expert.{w}", d, ff, n_sparse, "mlp")
    g.linear("feed_forward.shared_expert.down_proj", ff, d, n_sparse, "mlp")
    for w in ("gate_proj", "up_proj"):
        g.linear(f"feed_forward.{w}", d, dense_ff, n_dense, "mlp")
    g.linear("feed_forward.down_proj", dense_ff, d, n_dense, "mlp")
    return {"experts": experts, "k": k, "shared": 1}


def qwen2_moe_experts(c: Cfg, g: Groups, d: int, ff: int, layers: int) -> dict[str, int]:
    """Qwen2-MoE (transformers Qwen2MoeSparseMoeBlock): Qwen3-MoE's experts plus a gated shared
    expert of width shared_expert_intermediate_size."""
    return _qwen_experts(c, g, d, ff, layers, shared_expert=True)


def qwen3_moe_experts(c: Cfg, g: Groups, d: int, ff: int, layers: int) -> dict[str, int]:
    """Qwen3-MoE (transformers Qwen3MoeSparseMoeBlock): a router and num_experts SwiGLU experts of
    width moe_intermediate_size on every decoder_sparse_step-th layer not in mlp_only_layers; a
    dense MLP of width intermediate_size on the others."""
    return _qwen_experts(c, g, d, ff, layers, shared_expert=False)


def _qwen_experts(c: Cfg, g: Groups, d: int, ff: int, layers: int, *, shared_expert: bool) -> dict[str, int]:
    experts = c.positive(c.get_int("num_experts"), "num_experts")
    k = c.get_int("num_experts_per_tok")
    moe_ff = c.positive(c.get_int("moe_intermediate_size"), "moe_intermediate_size")
    step = c.get_int("decoder_sparse_step", default=1)
    only_dense = set(c.int_list("mlp_only_layers", default=[]))
    sparse = [i for i in range(layers) if i not in only_dense and experts > 0 and step > 0 and (i + 1) % step == 0]
    g.moe_layers = sparse
    n_sparse, n_dense = len(sparse), layers - len(sparse)
    shared_ff = c.get_int("shared_expert_intermediate_size", default=0) if shared_expert else 0
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
    return {"experts": experts, "k": k, "shared": 1 if shared_ff else 0}
