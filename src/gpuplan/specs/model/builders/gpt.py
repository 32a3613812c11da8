"""GPT-2 and its kin: GPT-2, GPT-NeoX (Pythia), Falcon, MPT, BLOOM, OPT, GPT-J, GPT-BigCode."""

from __future__ import annotations

from gpuplan.specs.model.config import Cfg
from gpuplan.specs.model.groups import Built, Groups, Shape, check_heads, lm_head, split_heads
from gpuplan.specs.model.record import Family
from gpuplan.specs.model.spec import AttentionLayer


def build_gpt2(c: Cfg, fam: Family) -> Built:
    """GPT-2 (transformers models/gpt2/modeling_gpt2.py): learned positions, Conv1D c_attn/c_proj
    and c_fc/c_proj with biases, two LayerNorms a block, tied by default."""
    d = c.positive(c.get_int("n_embd", "hidden_size"), "n_embd")
    layers = c.layers("n_layer", "num_hidden_layers")
    heads = c.positive(c.get_int("n_head", "num_attention_heads"), "n_head")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    pos = c.get_int("n_positions", "max_position_embeddings")
    ff = c.get_int("n_inner", default=4 * d)
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    g = Groups()
    g.vector("wte", vocab * d, 1, "embedding")
    g.vector("wpe", pos * d, 1, "position")
    g.norm("ln_1/ln_2", d, 2 * layers, bias=True)
    g.linear("attn.c_attn", d, 3 * d, layers, "attention", bias=True)
    g.linear("attn.c_proj", d, d, layers, "attention", bias=True)
    g.linear("mlp.c_fc", d, ff, layers, "mlp", bias=True)
    g.linear("mlp.c_proj", ff, d, layers, "mlp", bias=True)
    g.norm("ln_f", d, 1, bias=True)
    lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * d, d, d) for _ in range(layers)]
    return Built(Shape(d, layers, heads, heads, d // heads, ff, vocab, pos, tied), g)


def build_gpt_neox(c: Cfg, fam: Family) -> Built:
    """GPT-NeoX / Pythia (transformers models/gpt_neox/modeling_gpt_neox.py): fused
    query_key_value, biased dense layers, two LayerNorms a block, an untied embed_out by default."""
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.positive(c.get_int("num_attention_heads"), "num_attention_heads")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    ff = c.positive(c.get_int("intermediate_size"), "intermediate_size")
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    bias = c.get_bool("attention_bias", True)
    g = Groups()
    g.vector("embed_in", vocab * d, 1, "embedding")
    g.norm("input/post_attention_layernorm", d, 2 * layers, bias=True)
    g.linear("attention.query_key_value", d, 3 * d, layers, "attention", bias=bias)
    g.linear("attention.dense", d, d, layers, "attention", bias=bias)
    g.linear("mlp.dense_h_to_4h", d, ff, layers, "mlp", bias=True)
    g.linear("mlp.dense_4h_to_h", ff, d, layers, "mlp", bias=True)
    g.norm("final_layer_norm", d, 1, bias=True)
    lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * d, d, d) for _ in range(layers)]
    shape = Shape(d, layers, heads, heads, d // heads, ff, vocab, c.opt_int("max_position_embeddings"), tied)
    return Built(shape, g)


def build_falcon(c: Cfg, fam: Family) -> Built:
    """Falcon (transformers models/falcon/modeling_falcon.py): multi-query or grouped KV heads
    (new_decoder_architecture), parallel or sequential attention and MLP, biases per `bias`."""
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
    check_heads(c, heads, kv_heads)
    bias = c.get_bool("bias", False)
    ff = c.get_int("ffn_hidden_size", default=4 * d)
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    parallel = c.get_bool("parallel_attn", True)
    g = Groups()
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
    lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * kv_heads * head_dim, d, d) for _ in range(layers)]
    shape = Shape(d, layers, heads, kv_heads, head_dim, ff, vocab, c.opt_int("max_position_embeddings"), tied)
    return Built(shape, g)


def build_mpt(c: Cfg, _: Family) -> Built:
    """MPT (llm-foundry; transformers models/mpt/modeling_mpt.py): fused Wqkv with optional grouped
    KV heads (attn_config.kv_n_heads), an expansion_ratio MLP, no biases with no_bias."""
    d = c.positive(c.get_int("d_model", "hidden_size"), "d_model")
    layers = c.layers("n_layers", "num_hidden_layers")
    heads = c.positive(c.get_int("n_heads", "num_attention_heads"), "n_heads")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    ff = c.get_int("expansion_ratio", default=4) * d
    no_bias = c.get_bool("no_bias", True)
    kv_heads = c.sub("attn_config").get_int("kv_n_heads", default=heads)
    check_heads(c, heads, kv_heads)
    hd = d // heads
    g = Groups()
    g.vector("wte", vocab * d, 1, "embedding")
    # MPT's LayerNorms carry no bias when no_bias is set (llm-foundry; 6,649,286,656 for MPT-7B)
    g.norm("norm_1/norm_2", d, 2 * layers, bias=not no_bias)
    g.linear("attn.Wqkv", d, (heads + 2 * kv_heads) * hd, layers, "attention", bias=not no_bias)
    g.linear("attn.out_proj", d, d, layers, "attention", bias=not no_bias)
    g.linear("ffn.up_proj", d, ff, layers, "mlp", bias=not no_bias)
    g.linear("ffn.down_proj", ff, d, layers, "mlp", bias=not no_bias)
    g.norm("norm_f", d, 1, bias=not no_bias)
    lm_head(g, d, vocab, True)  # MPT always ties the output to wte
    g.attn = [AttentionLayer(2 * kv_heads * hd, d, d) for _ in range(layers)]
    return Built(Shape(d, layers, heads, kv_heads, hd, ff, vocab, c.opt_int("max_seq_len"), True), g)


def build_bloom(c: Cfg, fam: Family) -> Built:
    """BLOOM (transformers models/bloom/modeling_bloom.py): ALiBi (no position weights), a
    LayerNorm after the embedding, biases everywhere, a 4 x hidden MLP."""
    d = c.positive(c.get_int("hidden_size", "n_embed"), "hidden_size")
    layers = c.layers("n_layer", "num_hidden_layers")
    heads = c.positive(c.get_int("n_head", "num_attention_heads"), "n_head")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    g = Groups()
    g.vector("word_embeddings", vocab * d, 1, "embedding")
    g.norm("word_embeddings_layernorm", d, 1, bias=True)
    g.norm("input/post_attention_layernorm", d, 2 * layers, bias=True)
    g.linear("self_attention.query_key_value", d, 3 * d, layers, "attention", bias=True)
    g.linear("self_attention.dense", d, d, layers, "attention", bias=True)
    g.linear("mlp.dense_h_to_4h", d, 4 * d, layers, "mlp", bias=True)
    g.linear("mlp.dense_4h_to_h", 4 * d, d, layers, "mlp", bias=True)
    g.norm("ln_f", d, 1, bias=True)
    lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * d, d, d) for _ in range(layers)]
    return Built(Shape(d, layers, heads, heads, d // heads, 4 * d, vocab, None, tied), g)


def build_opt(c: Cfg, fam: Family) -> Built:
    """OPT (transformers models/opt/modeling_opt.py): learned positions with 2 extra rows
    (OPTLearnedPositionalEmbedding's offset), biases everywhere, a ReLU MLP of ffn_dim; pre-LN
    (and a final LayerNorm) or post-LN (opt-350m); embeddings of word_embed_proj_dim projected
    in and out when it differs from hidden_size (opt-350m: 512 vs 1024)."""
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.get_int("num_attention_heads")
    hd = split_heads(c, d, heads, "num_attention_heads")
    ff = c.positive(c.get_int("ffn_dim"), "ffn_dim")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    pos = c.get_int("max_position_embeddings")
    proj = c.positive(c.get_int("word_embed_proj_dim", default=d), "word_embed_proj_dim")
    bias = c.get_bool("enable_bias", True)
    affine = c.get_bool("layer_norm_elementwise_affine", True)
    final_ln = c.get_bool("do_layer_norm_before", True) and not c.get_bool("_remove_final_layer_norm", False)
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    g = Groups()
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
    lm_head(g, proj, vocab, tied)
    g.attn = [AttentionLayer(2 * d, d, d) for _ in range(layers)]
    return Built(Shape(d, layers, heads, heads, hd, ff, vocab, pos, tied), g)


def build_gptj(c: Cfg, fam: Family) -> Built:
    """GPT-J (transformers models/gptj/modeling_gptj.py): attention and MLP in parallel after one
    LayerNorm, rotary on rotary_dim of each head (no weights), q/k/v/out without biases, a
    biased MLP, and an untied lm_head with a bias."""
    d = c.positive(c.get_int("n_embd", "hidden_size"), "n_embd")
    layers = c.layers("n_layer", "num_hidden_layers")
    heads = c.get_int("n_head", "num_attention_heads")
    hd = split_heads(c, d, heads, "n_head")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    ff = c.positive(c.get_int("n_inner", default=4 * d), "n_inner")
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    g = Groups()
    g.vector("wte", vocab * d, 1, "embedding")
    g.norm("ln_1", d, layers, bias=True)
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        g.linear(f"attn.{name}", d, d, layers, "attention")
    g.linear("mlp.fc_in", d, ff, layers, "mlp", bias=True)
    g.linear("mlp.fc_out", ff, d, layers, "mlp", bias=True)
    g.norm("ln_f", d, 1, bias=True)
    lm_head(g, d, vocab, tied, bias=True)
    g.attn = [AttentionLayer(2 * d, d, d) for _ in range(layers)]
    pos = c.opt_int("n_positions", "max_position_embeddings")
    return Built(Shape(d, layers, heads, heads, hd, ff, vocab, pos, tied), g)


def build_gpt_bigcode(c: Cfg, fam: Family) -> Built:
    """GPT-BigCode: SantaCoder, StarCoder(Base) (transformers models/gpt_bigcode/modeling_gpt_bigcode.py):
    GPT-2's block with multi-query attention (multi_query, the default: one K and V head, so c_attn
    projects to d + 2 x head_dim), learned positions, tied embeddings."""
    d = c.positive(c.get_int("n_embd", "hidden_size"), "n_embd")
    layers = c.layers("n_layer", "num_hidden_layers")
    heads = c.get_int("n_head", "num_attention_heads")
    hd = split_heads(c, d, heads, "n_head")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    pos = c.get_int("n_positions", "max_position_embeddings")
    ff = c.positive(c.get_int("n_inner", default=4 * d), "n_inner")
    kv_heads = 1 if c.get_bool("multi_query", True) else heads
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    g = Groups()
    g.vector("wte", vocab * d, 1, "embedding")
    g.vector("wpe", pos * d, 1, "position")
    g.norm("ln_1/ln_2", d, 2 * layers, bias=True)
    g.linear("attn.c_attn", d, d + 2 * kv_heads * hd, layers, "attention", bias=True)
    g.linear("attn.c_proj", d, d, layers, "attention", bias=True)
    g.linear("mlp.c_fc", d, ff, layers, "mlp", bias=True)
    g.linear("mlp.c_proj", ff, d, layers, "mlp", bias=True)
    g.norm("ln_f", d, 1, bias=True)
    lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * kv_heads * hd, d, d) for _ in range(layers)]
    return Built(Shape(d, layers, heads, kv_heads, hd, ff, vocab, pos, tied), g)
