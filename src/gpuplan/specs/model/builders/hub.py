"""Families whose modeling code ships with the checkpoint on the Hugging Face hub
(`trust_remote_code=True` in transformers): Qwen (v1), Baichuan / Baichuan 2, ChatGLM 2/3 and
GLM-4 (`chatglm`), InternLM 2. gpuplan reads only their config.json, plain JSON; the hub's Python
is never imported or run. Each builder lists the tensors that family's modeling file creates (the
file is named in its docstring, with the repository it was read from); InternLM (v1) is Llama's
layer with biased attention and is built by builders/llama.py."""

from __future__ import annotations

from gpuplan.specs.model.config import Cfg
from gpuplan.specs.model.groups import Built, Groups, Shape, check_heads, lm_head, split_heads
from gpuplan.specs.model.record import Family
from gpuplan.specs.model.spec import AttentionLayer


def build_qwen(c: Cfg, fam: Family) -> Built:
    """Qwen v1 (Qwen/Qwen-7B modeling_qwen.py, QWenLMHeadModel): c_attn projects hidden to 3 x
    heads x kv_channels with a bias; c_proj back without one (no_bias, default true); QWenMLP's
    w1 and w2 are intermediate_size // 2 wide (`ff_dim_in = config.intermediate_size // 2`: the
    config counts the gate and the up projection together) and c_proj maps that width back; RMSNorm
    ln_1, ln_2 and ln_f; an untied lm_head."""
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.positive(c.get_int("num_attention_heads"), "num_attention_heads")
    head_dim = c.positive(c.get_int("kv_channels", default=d // heads), "kv_channels")
    ff = c.positive(c.get_int("intermediate_size") // 2, "intermediate_size")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    bias = not c.get_bool("no_bias", True)
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    proj = heads * head_dim
    g = Groups()
    g.vector("wte", vocab * d, 1, "embedding")
    g.norm("ln_1/ln_2", d, 2 * layers, bias=False)
    g.linear("attn.c_attn", d, 3 * proj, layers, "attention", bias=True)
    g.linear("attn.c_proj", proj, d, layers, "attention", bias=bias)
    g.linear("mlp.w1", d, ff, layers, "mlp", bias=bias)
    g.linear("mlp.w2", d, ff, layers, "mlp", bias=bias)
    g.linear("mlp.c_proj", ff, d, layers, "mlp", bias=bias)
    g.norm("ln_f", d, 1, bias=False)
    lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * proj, proj, proj) for _ in range(layers)]
    pos = c.opt_int("max_position_embeddings", "seq_length")
    return Built(Shape(d, layers, heads, heads, head_dim, ff, vocab, pos, tied), g)


def build_baichuan(c: Cfg, fam: Family) -> Built:
    """Baichuan and Baichuan 2 (baichuan-inc/Baichuan2-7B-Base modeling_baichuan.py): q, k and v
    fused in W_pack (hidden -> 3 x hidden, no bias), o_proj, a SwiGLU MLP (gate/up/down_proj, no
    biases), RMSNorm; Baichuan 2's NormHead holds a vocab x hidden weight like a plain lm_head.
    The 13B models use ALiBi instead of rotary: no weights either way."""
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.get_int("num_attention_heads")
    hd = split_heads(c, d, heads, "num_attention_heads")
    ff = c.positive(c.get_int("intermediate_size"), "intermediate_size")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    g = Groups()
    g.vector("embed_tokens", vocab * d, 1, "embedding")
    g.norm("input/post_attention_layernorm", d, 2 * layers, bias=False)
    g.linear("self_attn.W_pack", d, 3 * d, layers, "attention")
    g.linear("self_attn.o_proj", d, d, layers, "attention")
    for name in ("gate_proj", "up_proj"):
        g.linear(f"mlp.{name}", d, ff, layers, "mlp")
    g.linear("mlp.down_proj", ff, d, layers, "mlp")
    g.norm("norm", d, 1, bias=False)
    lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * d, d, d) for _ in range(layers)]
    pos = c.opt_int("max_position_embeddings", "model_max_length")
    return Built(Shape(d, layers, heads, heads, hd, ff, vocab, pos, tied), g)


def build_chatglm(c: Cfg, fam: Family) -> Built:
    """ChatGLM 2/3 and GLM-4 (THUDM/chatglm3-6b modeling_chatglm.py, ChatGLMForConditionalGeneration):
    word embeddings of padded_vocab_size; per GLMBlock a fused query_key_value of heads x
    kv_channels queries plus 2 x multi_query_group_num x kv_channels keys and values (biased with
    add_bias_linear or add_qkv_bias), dense back to hidden, a SwiGLU MLP whose dense_h_to_4h holds
    the gate and the up projection together (hidden -> 2 x ffn_hidden_size), dense_4h_to_h;
    RMSNorm (rmsnorm, default true), a final norm (post_layer_norm) and an untied output_layer.
    ChatGLM-6B (v1) has none of these keys and is refused by name (ffn_hidden_size)."""
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_layers", "num_hidden_layers")
    heads = c.positive(c.get_int("num_attention_heads"), "num_attention_heads")
    hd = c.positive(c.get_int("kv_channels", default=d // heads), "kv_channels")
    multi_query = c.get_bool("multi_query_attention", False)
    kv_heads = c.get_int("multi_query_group_num", default=1) if multi_query else heads
    check_heads(c, heads, kv_heads)
    ff = c.positive(c.get_int("ffn_hidden_size"), "ffn_hidden_size")
    vocab = c.positive(c.get_int("padded_vocab_size", "vocab_size"), "padded_vocab_size")
    bias = c.get_bool("add_bias_linear", False)
    qkv_bias = bias or c.get_bool("add_qkv_bias", False)
    norm_bias = not c.get_bool("rmsnorm", True)  # LayerNorm (with a bias) when rmsnorm is false
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    proj = heads * hd
    g = Groups()
    g.vector("embedding.word_embeddings", vocab * d, 1, "embedding")
    g.norm("input/post_attention_layernorm", d, 2 * layers, bias=norm_bias)
    g.linear("self_attention.query_key_value", d, proj + 2 * kv_heads * hd, layers, "attention", bias=qkv_bias)
    g.linear("self_attention.dense", proj, d, layers, "attention", bias=bias)
    g.linear("mlp.dense_h_to_4h", d, 2 * ff, layers, "mlp", bias=bias)
    g.linear("mlp.dense_4h_to_h", ff, d, layers, "mlp", bias=bias)
    g.norm("final_layernorm", d, 1 if c.get_bool("post_layer_norm", True) else 0, bias=norm_bias)
    lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * kv_heads * hd, proj, proj) for _ in range(layers)]
    return Built(Shape(d, layers, heads, kv_heads, hd, ff, vocab, c.opt_int("seq_length"), tied), g)


def build_internlm2(c: Cfg, fam: Family) -> Built:
    """InternLM 2 / 2.5 (internlm/internlm2-7b modeling_internlm2.py, InternLM2ForCausalLM):
    tok_embeddings, a fused wqkv of (heads + 2 x kv heads) x head_dim and wo (biased with `bias`,
    InternLM2Config's default true; the checkpoints say false), a SwiGLU feed_forward (w1 gate,
    w3 up, w2 down, no biases), RMSNorm attention_norm/ffn_norm/norm and an untied output."""
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.get_int("num_attention_heads")
    hd = split_heads(c, d, heads, "num_attention_heads")
    kv_heads = c.get_int("num_key_value_heads", default=heads)
    check_heads(c, heads, kv_heads)
    ff = c.positive(c.get_int("intermediate_size"), "intermediate_size")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    bias = c.get_bool("bias", True)
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    g = Groups()
    g.vector("tok_embeddings", vocab * d, 1, "embedding")
    g.norm("attention_norm/ffn_norm", d, 2 * layers, bias=False)
    g.linear("attention.wqkv", d, (heads + 2 * kv_heads) * hd, layers, "attention", bias=bias)
    g.linear("attention.wo", heads * hd, d, layers, "attention", bias=bias)
    g.linear("feed_forward.w1", d, ff, layers, "mlp")
    g.linear("feed_forward.w3", d, ff, layers, "mlp")
    g.linear("feed_forward.w2", ff, d, layers, "mlp")
    g.norm("norm", d, 1, bias=False)
    lm_head(g, d, vocab, tied)
    g.attn = [AttentionLayer(2 * kv_heads * hd, heads * hd, heads * hd) for _ in range(layers)]
    shape = Shape(d, layers, heads, kv_heads, hd, ff, vocab, c.opt_int("max_position_embeddings"), tied)
    return Built(shape, g)
