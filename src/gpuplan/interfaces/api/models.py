"""Models: presets, local config.json files and their records (parameters, KV bytes, FLOPs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gpuplan.errors import InvalidSettingError, ModelConfigError
from gpuplan.safeio import clip
from gpuplan.specs.model import ModelSpec, model_from_config
from gpuplan.specs.models import find_preset, load_model, presets

DEFAULT_CONTEXT: Final = 2048  # tokens; the context at which `model` reports FLOPs per token


def get_model(name_or_path: str, files: bool = True) -> ModelSpec:
    """A preset, a local config.json (unless `files` is False) or a hub id."""
    return load_model(name_or_path, files)


def default_context(spec: ModelSpec) -> int:
    """The context for FLOPs per token when none is given: 2048 tokens, or the model's own
    maximum where it is shorter (BERT 512; ViT-B/16 at 224 px sees 197 tokens)."""
    if spec.max_position_embeddings:
        return min(DEFAULT_CONTEXT, spec.max_position_embeddings)
    return DEFAULT_CONTEXT


# the longest context `model --seq-len` takes: the workload's own seq_len bound (specs/workload_schema.py)
MAX_CONTEXT_LEN: Final = 10_000_000


def model_record(spec: ModelSpec, context_len: int | None = None) -> dict[str, Any]:
    """A model as JSON (the `model --json` keys): parameters, shapes, KV and FLOPs."""
    if context_len is None:
        context_len = default_context(spec)
    if not 0 < context_len <= MAX_CONTEXT_LEN:
        raise InvalidSettingError(
            f"The 'seq-len' parameter must be a positive number of tokens, at most {MAX_CONTEXT_LEN:,}. "
            f"Got {clip(context_len)}."
        )
    preset = find_preset(spec.name)
    windows = sorted({a.window for a in spec.attention_layers if a.window})
    return {
        "name": spec.name,
        "model_type": spec.model_type,
        "kind": spec.kind,
        "total_params": spec.total_params,
        "active_params": spec.active_params,
        "embedding_params": spec.embedding_params,
        "params_by_role": spec.params_by_role(),
        "num_layers": spec.num_layers,
        "hidden_size": spec.hidden_size,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "intermediate_size": spec.intermediate_size,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_position_embeddings,
        "tie_word_embeddings": spec.tie_word_embeddings,
        "attention_type": spec.attention_type,
        "sliding_windows": windows,
        "num_experts": spec.num_experts,
        "experts_per_token": spec.experts_per_token,
        "num_shared_experts": spec.num_shared_experts,
        "kv_bytes_per_token": spec.kv_bytes_per_token(2.0),
        "kv_bytes_per_token_beyond_windows": spec.kv_bytes_per_token(2.0, past_windows=True),
        "cross_kv_bytes_per_input_token": spec.cross_kv_bytes_per_input_token(2.0),
        "flops_per_token": spec.flops_per_token(context_len),
        "flops_per_token_context": context_len if spec.kind != "cnn" else None,
        "flops_per_token_unit": "image" if spec.kind == "cnn" else "token",
        "matmul_flops_per_token": spec.matmul_flops_per_token() if spec.kind != "cnn" else None,
        "linear_layers": [
            {"name": g.name, "in_features": g.linear[0], "out_features": g.linear[1], "count": g.count}
            for g in spec.linear_layers()
            if g.linear is not None
        ],
        "preset": None
        if preset is None
        else {
            "hf_id": preset.hf_id,
            "source": preset.source,
            "published_params": preset.published_params,
            "published_params_source": preset.published_params_source,
        },
    }


def model_from_json(config: Any, name: str | None = None) -> ModelSpec:
    """A model from a config.json's parsed content (pasted or uploaded, e.g. in the web app). It is
    read as data only, as `load_model` reads a file: no code from the model's repository runs."""
    if not isinstance(config, Mapping):
        raise ModelConfigError(f"A config.json must hold a JSON object. Got {type(config).__name__}.")
    label = (name or "").strip() or str(config.get("_name_or_path") or "") or "custom model"
    return model_from_config(config, label)


def list_models() -> list[dict[str, Any]]:
    """The bundled presets with their sizes."""
    out = []
    for p in presets().values():
        spec = load_model(p.name)
        out.append(
            {
                "name": p.name,
                "hf_id": p.hf_id,
                "model_type": spec.model_type,
                "total_params": spec.total_params,
                "active_params": spec.active_params,
            }
        )
    return out
