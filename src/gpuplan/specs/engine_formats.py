"""Which weight formats each inference engine loads (a workload naming another is refused in one line).

Sources:
- AutoAWQ loads AWQ-quantised checkpoints only (casper-hansen/AutoAWQ README: "AutoAWQ is an
  easy-to-use package for 4-bit quantized models"; AutoAWQForCausalLM.from_quantized reads an AWQ
  quant_config).
- llama.cpp loads GGUF files only (ggml-org/llama.cpp README "Obtaining and quantizing models":
  models must be in GGUF); GGUF tensor types include F32, F16, BF16, Q8_0, Q4_0 and the k-quants
  (ggml-org/llama.cpp tools/quantize/README.md).
- Ollama runs GGUF models through its llama.cpp-based runner (ollama/ollama docs/import.md:
  "Importing a GGUF based model"; quantize options q8_0, q4_K_M ...).
"""

from __future__ import annotations

from typing import Final

from gpuplan.errors import InvalidSettingError

# GGUF tensor types gpuplan has storage formats for (specs/precision.py STORAGE_FORMATS)
GGUF_FORMATS: Final = (
    "fp32", "fp16", "bf16", "q8_0", "q6_k", "q5_k_m", "q5_k_s", "q4_k_m", "q4_k_s", "q4_0",
    "q3_k_l", "q3_k_m", "q3_k_s", "q2_k",
)  # fmt: skip

ENGINE_WEIGHT_FORMATS: Final[dict[str, tuple[str, ...]]] = {
    "autoawq": ("awq",),
    "llama.cpp": GGUF_FORMATS,
    "ollama": GGUF_FORMATS,
}


def check_engine_weight_format(engine: str, weight_dtype: str | None) -> None:
    """Refuse a weight format the engine cannot load, naming the formats it does load."""
    allowed = ENGINE_WEIGHT_FORMATS.get(engine)
    if allowed is None or weight_dtype is None or weight_dtype in allowed:
        return
    what = "GGUF weights only (" if allowed is GGUF_FORMATS else "weights only ("
    raise InvalidSettingError(
        f"The {engine} engine loads {what}{', '.join(allowed)}); this workload's weight_dtype is {weight_dtype}. "
        f"Set weight_dtype to one of those or choose another engine (e.g. engine: vllm)."
    )
