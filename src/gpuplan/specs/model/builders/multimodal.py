"""Multimodal wrappers: a Llama-lineage text decoder (the record's `text` family, read from
text_config) with a vision encoder beside it. The vision side runs once per image, not per text
token: it counts in the parameters (memory) but carries no per-token linear shapes (FLOPs, LoRA)
and no KV cache."""

from __future__ import annotations

from collections.abc import Mapping

from gpuplan.errors import ModelConfigError
from gpuplan.specs.model.builders.llama import build_llama_like
from gpuplan.specs.model.config import Cfg
from gpuplan.specs.model.groups import Built, Groups, split_heads
from gpuplan.specs.model.record import Family


def _text_decoder(c: Cfg, fam: Family) -> Built:
    """The text decoder from text_config; the outer config's tie_word_embeddings (the wrapper's
    default when absent) ties lm_head to the text embedding, text_config's own flag is not read."""
    if fam.text is None:
        raise TypeError(f"{fam.model_type}: a multimodal family needs its text family in the family table.")
    text = c.sub("text_config")
    tied = c.get_bool("tie_word_embeddings", fam.tied)
    return build_llama_like(Cfg({**text.raw, "tie_word_embeddings": tied}, text.name), fam.text)


# --- Gemma 3 with its vision tower (Gemma3ForConditionalGeneration) -----------------------------


def build_gemma3(c: Cfg, fam: Family) -> Built:
    """Gemma 3 4B/12B/27B as transformers' Gemma3ForConditionalGeneration builds them
    (models/gemma3/modeling_gemma3.py): the Gemma 3 text decoder from text_config, a SigLIP
    vision tower from vision_config, and the projector between them."""
    built = _text_decoder(c, fam)
    g = built.groups
    vision_d = _siglip_vision_tower(g, c.sub("vision_config"))
    # Gemma3MultiModalProjector: a (vision hidden x text hidden) weight and an RMSNorm
    g.vector("multi_modal_projector.mm_input_projection_weight", vision_d * built.shape.d, 1, "other", stack="encoder")
    g.vector("multi_modal_projector.mm_soft_emb_norm", vision_d, 1, "other", stack="encoder")
    return built


def _siglip_vision_tower(g: Groups, v: Cfg) -> int:
    """SigLIP's vision transformer as transformers' SiglipVisionModel (models/siglip/modeling_siglip.py);
    the defaults are SiglipVisionConfig's. Returns its hidden size."""
    d = v.positive(v.get_int("hidden_size", default=768), "hidden_size")
    ff = v.get_int("intermediate_size", default=3072)
    layers = v.layers("num_hidden_layers", default=12, minimum=0)
    split_heads(v, d, v.get_int("num_attention_heads", default=12), "num_attention_heads")
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


def build_llama4(c: Cfg, fam: Family) -> Built:
    """Llama 4 Scout / Maverick as transformers' Llama4ForConditionalGeneration builds them
    (models/llama4/modeling_llama4.py): the text decoder from text_config and, when the config has
    a vision_config, the vision encoder, its pixel-shuffle adapter and the projector."""
    built = _text_decoder(c, fam)
    if isinstance(c.raw.get("vision_config"), Mapping):
        _llama4_vision(built.groups, c.sub("vision_config"), built.shape.d)
    return built


def _llama4_vision(g: Groups, v: Cfg, text_d: int) -> None:
    vd = v.positive(v.get_int("hidden_size", default=768), "hidden_size")
    vff = v.positive(v.get_int("intermediate_size", default=5632), "intermediate_size")
    layers = v.layers("num_hidden_layers", default=34, minimum=0)
    split_heads(v, vd, v.get_int("num_attention_heads", default=16), "num_attention_heads")
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
    g.vector("multi_modal_projector.linear_1", out_dim * text_d, 1, "other", stack="encoder")
