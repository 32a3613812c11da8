"""Our parameter counts against what transformers builds on the meta device (no download, no
remote code). Needs the `reference` extra (torch CPU + transformers), which `make test` installs;
skips with the reason where they are absent."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.specs.models import load_model, preset_config, presets

torch = pytest.importorskip("torch", reason="torch not installed (pip install 'gpuplan[reference]')")
transformers = pytest.importorskip("transformers", reason="transformers not installed")

# which transformers head class matches our count convention, per model_type
_CLASS = {
    "bert": "BertModel",  # with pooler
    "roberta": "RobertaModel",
    "t5": "T5ForConditionalGeneration",
    "mt5": "MT5ForConditionalGeneration",
    "vit": "ViTForImageClassification",
    "resnet": "ResNetForImageClassification",
}


def _transformers_count(config: dict[str, Any]) -> int:
    cfg = dict(config)
    cfg.pop("auto_map", None)
    cfg.pop("quantization_config", None)  # fp8 checkpoint metadata; the module shapes do not change
    model_type = cfg.pop("model_type")
    hf_config = transformers.AutoConfig.for_model(model_type, **cfg)
    cls_name = _CLASS.get(model_type)
    with torch.device("meta"):
        if cls_name is None:
            model = transformers.AutoModelForCausalLM.from_config(hf_config)
        else:
            model = getattr(transformers, cls_name)(hf_config)
    count = int(sum(p.numel() for p in model.parameters()))
    # transformers 5.x ties T5/mT5 output heads to `shared` even where the config says
    # tie_word_embeddings=false (T5 v1.1 / T0 / mT0 ship a separate lm_head: the T0_3B fp32
    # checkpoint is 11.4 GB = 2.85B parameters). Count the checkpoint's real tensors.
    if config.get("tie_word_embeddings") is False:
        out, inp = model.get_output_embeddings(), model.get_input_embeddings()
        if out is not None and out.weight is inp.weight:
            count += int(out.weight.numel())
    return count


@pytest.mark.parametrize("name", sorted(presets()))
def test_preset_count_equals_transformers(name: str) -> None:
    expected = _transformers_count(preset_config(presets()[name]))
    assert load_model(name).total_params == expected
