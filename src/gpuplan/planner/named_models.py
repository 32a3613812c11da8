"""Models a measurement row names the way papers and vendor tables do ("LLAMA3-70B", "GPT3-175B",
"Nemotron-4-340B", "Mixtral 8x22B", "Meta-Llama-3-8B-Instruct") rather than by a preset or a
config.json: the bundled preset the name means, or the published shape of a model family that has no
Hugging Face config.json of its own (NeMo's GPT-3 and Nemotron recipes, LLaMA-1).

Each shape cites where its hyperparameters are published; a shape is built through the same
config.json reader as everything else, so counts, KV cache and FLOPs follow the same rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from gpuplan.specs.model import ModelSpec, model_from_config
from gpuplan.specs.models import find_preset, load_model


@dataclass(frozen=True)
class NamedShape:
    pattern: str  # matched against the normalised name (lower case, '-' separated)
    config: dict[str, Any]
    source: str


def gpt3_config(
    layers: int, d: int, heads: int, ffn: int | None = None, vocab: int = 50304, positions: int = 2048
) -> dict[str, Any]:
    """NeMo GPTConfig: LayerNorm, GeLU MLP with biases, learned absolute positions, tied embeddings,
    seq 2048, the GPT-2 BPE vocabulary (50,257) padded to a multiple of 128 = 50,304."""
    cfg: dict[str, Any] = {"model_type": "gpt2", "n_embd": d, "n_layer": layers, "n_head": heads}
    cfg |= {"vocab_size": vocab, "n_positions": positions}
    if ffn:
        cfg["n_inner"] = ffn
    return cfg


def nemotron_config(
    layers: int, d: int, heads: int, ffn: int, kv: int | None = None, vocab: int = 256000, positions: int = 4096
) -> dict[str, Any]:
    """NeMo NemotronConfig: LayerNorm (zero-centred gamma) with bias, squared-ReLU non-gated MLP,
    no linear biases, rotary on half the head, untied embeddings, 256k vocabulary (Nemotron-4
    report, Parmar et al. 2024, sec. 2), seq 4096."""
    return {**_decoder("nemotron", layers, d, heads, ffn, kv, vocab, positions), "partial_rotary_factor": 0.5}


def llama1_config(
    layers: int, d: int, heads: int, ffn: int, kv: int | None = None, vocab: int = 32000, positions: int = 2048
) -> dict[str, Any]:
    """LLaMA (Touvron et al. 2023, table 2): SwiGLU FFN of 2/3 x 4d rounded up to 256, RMSNorm,
    rotary, 32k SentencePiece vocabulary, untied output, 2,048 positions."""
    return _decoder("llama", layers, d, heads, ffn, kv, vocab, positions)


def _decoder(
    model_type: str, layers: int, d: int, heads: int, ffn: int, kv: int | None, vocab: int, positions: int
) -> dict[str, Any]:
    """The config.json keys of a Llama-style decoder shape with untied embeddings."""
    return {
        "model_type": model_type,
        "hidden_size": d,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv or heads,
        "intermediate_size": ffn,
        "vocab_size": vocab,
        "max_position_embeddings": positions,
        "tie_word_embeddings": False,
    }


_NEMO_GPT: Final = "NVIDIA/NeMo:nemo/collections/llm/gpt/model/base.py@7ce2c555 (GPTConfig126M/5B/7B/20B/40B/175B)"
_NEMO_NEMOTRON: Final = "NVIDIA/NeMo:nemo/collections/llm/gpt/model/nemotron.py@0037ec8c (Nemotron3Config4B/8B/22B, Nemotron4Config15B/340B)"
_LLAMA1: Final = "Touvron et al. 2023, 'LLaMA: Open and Efficient Foundation Language Models', table 2"

NAMED_SHAPES: Final[tuple[NamedShape, ...]] = (
    NamedShape(r"gpt-?3-126m", gpt3_config(12, 768, 12), _NEMO_GPT),
    NamedShape(r"gpt-?3-5b", gpt3_config(24, 4096, 32), _NEMO_GPT),
    NamedShape(r"gpt-?3-7b", gpt3_config(32, 4096, 32, 10880), _NEMO_GPT),
    NamedShape(r"gpt-?3-20b", gpt3_config(44, 6144, 48), _NEMO_GPT),
    NamedShape(r"gpt-?3-40b", gpt3_config(48, 8192, 64), _NEMO_GPT),
    NamedShape(r"gpt-?3-175b", gpt3_config(96, 12288, 96), _NEMO_GPT),
    NamedShape(
        r"nemotron-?3-4b|nemotron-4b", nemotron_config(32, 3072, 24, 9216, kv=8) | {"head_dim": 128}, _NEMO_NEMOTRON
    ),
    NamedShape(r"nemotron-?3-8b|nemotron-8b", nemotron_config(32, 4096, 32, 16384), _NEMO_NEMOTRON),
    NamedShape(r"nemotron-?3-22b|nemotron-22b", nemotron_config(40, 6144, 48, 24576), _NEMO_NEMOTRON),
    NamedShape(r"nemotron-?4-15b|nemotron-15b", nemotron_config(32, 6144, 48, 24576, kv=8), _NEMO_NEMOTRON),
    NamedShape(r"nemotron-?4-340b|nemotron-340b", nemotron_config(96, 18432, 96, 73728, kv=8), _NEMO_NEMOTRON),
    NamedShape(r"llama-?1?-33b|llama-30b", llama1_config(60, 6656, 52, 17920), _LLAMA1),
    NamedShape(r"llama-?1?-65b", llama1_config(80, 8192, 64, 22016), _LLAMA1),
)

# Suffixes that name a fine-tune or a packaging of the same weights' shape.
_SUFFIX: Final = re.compile(
    r"-(instruct|chat|hf|base|it|pt|sft|dpo|v\d+(\.\d+)*|\d+k|awq|gptq|fp8|bf16|fp16|gguf|instruct-v\d+(\.\d+)*)$"
)


def candidate_names(text: str) -> list[str]:
    """Spellings of a model name to look up, most literal first: "Meta-Llama-3-8B-Instruct" ->
    ["meta-llama-3-8b-instruct", "llama-3-8b", "llama-3.1-8b", ...]."""
    base = re.sub(r"\(.*?\)", "", text).strip()
    out: list[str] = [base]
    n = base.lower().split("/")[-1]
    n = re.sub(r"[\s_]+", "-", n).strip("-")
    out.append(n)
    n = re.sub(r"^meta-", "", n)
    n = re.sub(r"\bllama(?=\d)", "llama-", n)  # LLAMA3-70B, Llama2-7B
    while True:
        stripped = _SUFFIX.sub("", n)
        if stripped == n:
            break
        n = stripped
    out.append(n)
    # Llama 3 and 3.1 share their 8B/70B shapes (3.1 only lengthens the rope range)
    out.append(re.sub(r"^llama-3-", "llama-3.1-", n))
    # LLaMA-1 7B/13B and Vicuna have the Llama 2 7B/13B shapes (same dims, vocabulary and counts)
    m = re.fullmatch(r"(?:llama-?1?|vicuna(?:-v?1\.\d)?)-(7b|13b)", n)
    if m:
        out.append(f"llama-2-{m.group(1)}")
    # Qwen2 and Qwen2.5 share their shapes at 0.5B, 7B, 14B (not released for Qwen2), 32B and 72B
    out.append(re.sub(r"^qwen-?2-", "qwen2.5-", n))
    # BLOOMZ is BLOOM fine-tuned: the same shapes
    out.append(re.sub(r"^bloom-", "bloomz-", n))
    return [c for c in dict.fromkeys(out) if c]


def named_model(text: str) -> ModelSpec | None:
    """The model a row's name means: a preset, or a published family shape; None if neither."""
    cands = candidate_names(text)
    for cand in cands:
        if find_preset(cand) is not None:
            return load_model(cand)
    for cand in cands[1:]:
        for shape in NAMED_SHAPES:
            if re.fullmatch(shape.pattern, cand):
                return model_from_config(dict(shape.config), cands[0])
    return None
