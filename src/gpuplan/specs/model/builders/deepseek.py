"""DeepSeek V2 / V3: MLA attention, fine-grained MoE with shared experts."""

from __future__ import annotations

from gpuplan.specs.model.config import Cfg
from gpuplan.specs.model.groups import Built, Groups, Shape, lm_head
from gpuplan.specs.model.record import Family
from gpuplan.specs.model.spec import AttentionLayer


def build_deepseek(c: Cfg, fam: Family) -> Built:
    """DeepSeek-V2 / V3 as transformers builds them (models/deepseek_v2, models/deepseek_v3):
    MLA attention, dense MLPs on the first first_k_dense_replace layers, then fine-grained routed
    experts with shared experts."""
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.positive(c.get_int("num_attention_heads"), "num_attention_heads")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    ff = c.get_int("intermediate_size")
    q_lora = c.opt_int("q_lora_rank")
    kv_lora = c.get_int("kv_lora_rank")
    nope, rope, v_dim = c.get_int("qk_nope_head_dim"), c.get_int("qk_rope_head_dim"), c.get_int("v_head_dim")
    qk_head = nope + rope
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    bias = c.get_bool("attention_bias", False)
    g = Groups()
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
    lm_head(g, d, vocab, tied)
    # cache: latent c^KV (kv_lora_rank) + decoupled rope key (qk_rope_head_dim) per layer
    g.attn = [AttentionLayer(kv_lora + rope, heads * qk_head, heads * v_dim) for _ in range(layers)]
    shape = Shape(d, layers, heads, heads, qk_head, ff, vocab, c.opt_int("max_position_embeddings"), tied)
    return Built(shape, g, {"experts": experts, "k": k, "shared": shared})
