"""vLLM's and SGLang's fused MoE kernel (Triton fused_moe) streams the routed experts' weights at
engines.FUSED_MOE_BW_SHARE of a plain streaming kernel's bandwidth. Checked against the kernel
times its tuning script printed (benchmark/kernels/fused_moe_triton/tuning_fused_moe_triton.py):
Qwen3-235B-A22B FP8 at TP8 on an H200 (sgl-project/sglang#11730, default configs) and
DeepSeek-R1 w8a8 at TP8 on a B200 (sgl-project/sglang#11816, the Triton backend's "Before")."""

from __future__ import annotations

import pytest

from gpuplan.estimators import engines
from gpuplan.estimators.perf import estimate_inference_time
from gpuplan.interfaces import api
from gpuplan.specs.models import load_model


def _expert_us_per_layer(model: str, gpu: str, batch: int, engine: str) -> float:
    """The routed experts' GEMM time of one MoE layer in a decode step, microseconds."""
    w = api.build_workload(
        None,
        {"model": model, "task": "inference", "precision": "fp8", "num_gpus": 8, "tp": 8, "batch_size": batch,
         "input_len": 1, "output_len": 2, "engine": engine, "gpu": gpu},
    )  # fmt: skip
    m = load_model(w.model)
    it = estimate_inference_time(m, w, api.catalog().get(gpu), max_batch=batch)
    experts = sum(o.time_s for o in it.decode_ops if o.name.startswith("linear mlp.experts."))
    return experts / m.moe_layers * 1e6


@pytest.mark.parametrize(
    ("model", "gpu", "batch", "measured_us", "rel"),
    [
        # the kernel times hold a fixed ~20 us (its routing and alignment kernels, the pipeline's fill)
        # that the bandwidth term leaves out: at 8 sequences it is a third of the time, at 24-32 a fifth
        ("qwen3-235b-a22b", "H200 SXM 141GB", 8, 66.87, 0.35),
        ("qwen3-235b-a22b", "H200 SXM 141GB", 32, 124.99, 0.22),
        ("deepseek-r1", "B200", 8, 95.47, 0.26),
        ("deepseek-r1", "B200", 24, 175.80, 0.05),
    ],
)
def test_fused_moe_decode_time_against_the_kernels_measured_times(
    model: str, gpu: str, batch: int, measured_us: float, rel: float
) -> None:
    got = _expert_us_per_layer(model, gpu, batch, "sglang")
    assert got == pytest.approx(measured_us, rel=rel)
    assert got <= measured_us * 1.02  # never faster than the kernel measured, fixed part and all


def test_only_the_fused_moe_engines_read_experts_at_the_lower_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """vllm and sglang read routed experts at FUSED_MOE_BW_SHARE; an engine without that kernel
    (transformers' expert loop) at a streaming kernel's bandwidth, and a dense model is untouched."""
    assert engines.expert_bw_share("vllm") == engines.expert_bw_share("sglang") == engines.FUSED_MOE_BW_SHARE
    assert engines.expert_bw_share("transformers") == engines.expert_bw_share("llama.cpp") == 1.0
    fused = _expert_us_per_layer("qwen3-235b-a22b", "H200 SXM 141GB", 32, "vllm")
    plain = _expert_us_per_layer("qwen3-235b-a22b", "H200 SXM 141GB", 32, "transformers")
    # memory-bound: the time grows by the inverse share, less what the compute term adds under the smoothed roof
    assert plain / fused == pytest.approx(engines.FUSED_MOE_BW_SHARE, rel=0.03)
    m = load_model("llama-3.1-8b")
    w = api.build_workload(None, {"model": "llama-3.1-8b", "task": "inference", "batch_size": 16, "gpu": "H100"})
    before = estimate_inference_time(m, w, api.catalog().get("H100"))
    monkeypatch.setattr(engines, "FUSED_MOE_BW_SHARE", 0.5)
    assert estimate_inference_time(m, w, api.catalog().get("H100")) == before
    assert _expert_us_per_layer("qwen3-235b-a22b", "H200 SXM 141GB", 32, "vllm") > fused * 1.3
