"""Encoders (BERT, RoBERTa, ViT) and the encoder-decoder T5 / mT5."""

from __future__ import annotations

from gpuplan.specs.model.config import Cfg
from gpuplan.specs.model.groups import Built, Groups, Shape, lm_head, num_labels
from gpuplan.specs.model.record import Family
from gpuplan.specs.model.spec import AttentionLayer


def _encoder_layers(g: Groups, d: int, ff: int, layers: int, stack: str = "encoder") -> None:
    for n in ("query", "key", "value", "attention.output.dense"):
        g.linear(f"attention.{n}", d, d, layers, "attention", bias=True, stack=stack)
    g.linear("intermediate.dense", d, ff, layers, "mlp", bias=True, stack=stack)
    g.linear("output.dense", ff, d, layers, "mlp", bias=True, stack=stack)
    g.norm("layernorms", d, 2 * layers, bias=True, stack=stack)


def build_bert(c: Cfg, _: Family) -> Built:
    """BERT / RoBERTa as transformers' BertModel / RobertaModel (with the pooler, no task head)."""
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.positive(c.get_int("num_attention_heads"), "num_attention_heads")
    ff = c.positive(c.get_int("intermediate_size"), "intermediate_size")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    pos = c.get_int("max_position_embeddings")
    types = c.get_int("type_vocab_size", default=2)
    g = Groups()
    g.vector("embeddings.word_embeddings", vocab * d, 1, "embedding", stack="encoder")
    g.vector("embeddings.position_embeddings", pos * d, 1, "position", stack="encoder")
    g.vector("embeddings.token_type_embeddings", types * d, 1, "embedding", stack="encoder")
    g.norm("embeddings.LayerNorm", d, 1, bias=True, stack="encoder")
    _encoder_layers(g, d, ff, layers)
    # BertModel/RobertaModel's pooler: a dense layer on the first token only (per sequence)
    g.vector("pooler.dense", d * d + d, 1, "head", stack="encoder")
    g.attn = [AttentionLayer(0, d, d, stack="encoder") for _ in range(layers)]
    return Built(Shape(d, layers, heads, heads, d // heads, ff, vocab, pos, False), g)


def build_vit(c: Cfg, _: Family) -> Built:
    """ViT as transformers' ViTForImageClassification: patch embedding, [CLS] and positions,
    BERT's encoder layers, a classifier of id2label's size."""
    d = c.positive(c.get_int("hidden_size"), "hidden_size")
    layers = c.layers("num_hidden_layers")
    heads = c.positive(c.get_int("num_attention_heads"), "num_attention_heads")
    ff = c.positive(c.get_int("intermediate_size"), "intermediate_size")
    image = c.positive(c.get_int("image_size", default=224), "image_size")
    patch = c.positive(c.get_int("patch_size", default=16), "patch_size")
    channels = c.get_int("num_channels", default=3)
    patches = (image // patch) ** 2
    labels = num_labels(c)
    g = Groups()
    g.vector("embeddings.cls_token", d, 1, "position", stack="encoder")
    g.vector("embeddings.position_embeddings", (patches + 1) * d, 1, "position", stack="encoder")
    # the patch embedding is a stride-p convolution = a linear map of each patch's pixels
    g.linear("embeddings.patch_embeddings", channels * patch * patch, d, 1, "embedding", bias=True, stack="encoder")
    _encoder_layers(g, d, ff, layers)
    g.norm("layernorm", d, 1, bias=True, stack="encoder")
    # ViTForImageClassification: a linear classifier on the [CLS] token (per image)
    g.vector("classifier", d * labels + labels, 1, "head", stack="encoder")
    g.attn = [AttentionLayer(0, d, d, stack="encoder") for _ in range(layers)]
    return Built(Shape(d, layers, heads, heads, d // heads, ff, 0, patches + 1, False), g, image_size=image)


# --- T5 / mT5 (encoder-decoder) -------------------------------------------------------------------


def build_t5(c: Cfg, fam: Family) -> Built:
    """T5 / mT5 as transformers' T5ForConditionalGeneration / MT5ForConditionalGeneration: a shared
    embedding, encoder and decoder stacks (self- and cross-attention), relative position biases."""
    d = c.positive(c.get_int("d_model"), "d_model")
    dkv = c.positive(c.get_int("d_kv"), "d_kv")
    ff = c.positive(c.get_int("d_ff"), "d_ff")
    enc_layers = c.layers("num_layers")
    dec_layers = c.layers("num_decoder_layers", default=enc_layers, minimum=0)
    heads = c.positive(c.get_int("num_heads"), "num_heads")
    vocab = c.positive(c.get_int("vocab_size"), "vocab_size")
    buckets = c.get_int("relative_attention_num_buckets", default=32)
    gated = c.get_str("feed_forward_proj", "relu").startswith("gated")
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    inner = heads * dkv
    g = Groups()
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
    lm_head(g, d, vocab, tied)
    attn = [AttentionLayer(0, inner, inner, stack="encoder") for _ in range(enc_layers)]
    attn += [AttentionLayer(2 * inner, inner, inner) for _ in range(dec_layers)]
    attn += [AttentionLayer(2 * inner, inner, inner, cross=True) for _ in range(dec_layers)]
    g.attn = attn
    shape = Shape(d, enc_layers + dec_layers, heads, heads, dkv, ff, vocab, None, tied)
    return Built(shape, g)
