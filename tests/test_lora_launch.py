"""The LoRA adapters' kernels in eager PyTorch's launch floor (estimators/perf/training.py,
_adapter_kernels): PEFT's `result + lora_B(lora_A(dropout(x))) * scaling` launches two GEMMs, a
multiply, an add and a dropout per adapted linear (PEFT v0.10.0, lora/layer.py). At short sequences
the CPU issuing them binds: Qwen (v1) 7B's README measures 1.2 s per 8 x 256-token LoRA step on an
A100 (QWEN1-002 in the stacks file), 0.62 s predicted before they were counted."""

from __future__ import annotations

import pytest

from gpuplan.estimators import efficiency as eff
from gpuplan.estimators.perf import estimate_training_time
from gpuplan.estimators.perf.training import training_ops
from gpuplan.specs.gpu import bundled_catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import Workload

A100 = bundled_catalog().get("A100 SXM4 80GB")
QWEN = load_model("Qwen/Qwen-7B")
# Qwen v1 7B: 32 layers, each c_attn, attn.c_proj, w1, w2 and mlp.c_proj (5 linears) + 7 elementwise
# kernels (kernels_per_layer); all-linear adapts the 5 linears of every layer
LAYER_KERNELS = 32 * (5 + 7)
ADAPTED = 32 * 5
EAGER_KERNEL_S = eff.LAUNCH_EAGER_S * eff.EAGER_OPS_PER_KERNEL  # ~3 ops of ~10 us a kernel


def _qwen(**keys: object) -> Workload:
    base: dict[str, object] = {
        "model": "Qwen/Qwen-7B",
        "task": "lora",
        "seq_len": 256,
        "grad_accum": 8,
        "activation_checkpointing": "full",
        "lora_rank": 64,
        "lora_dropout": 0.05,
        "lora_targets": "all-linear",
        "framework": "hf-trainer",
        "gpu": "A100 SXM4 80GB",
    }
    return Workload.model_validate(base | keys)


@pytest.mark.parametrize(("dropout", "per_adapter"), [(0.05, 5), (0.0, 4)])
def test_the_floor_counts_each_adapters_kernels(dropout: float, per_adapter: int) -> None:
    # forward, backward (2x) and full checkpointing's recompute: 4 passes of each kernel
    floor = (LAYER_KERNELS + ADAPTED * per_adapter) * 4 * EAGER_KERNEL_S
    assert training_ops(QWEN, _qwen(lora_dropout=dropout), A100).profile.launch_floor_s == pytest.approx(
        floor, rel=1e-9
    )


def test_bitsandbytes_qlora_adds_peft_s_clone() -> None:
    floor = (LAYER_KERNELS + ADAPTED * 6) * 4 * EAGER_KERNEL_S
    w = _qwen(task="qlora", weight_dtype="nf4")
    assert training_ops(QWEN, w, A100).profile.launch_floor_s == pytest.approx(floor, rel=1e-9)


def test_a_full_fine_tune_counts_no_adapter() -> None:
    w = _qwen(task="finetune", lora_dropout=0.0)
    assert training_ops(QWEN, w, A100).profile.launch_floor_s == pytest.approx(LAYER_KERNELS * 4 * EAGER_KERNEL_S)


def test_at_256_tokens_the_step_is_set_by_the_launch_floor() -> None:
    """8 micro-batches each issuing 4,736 kernels from the CPU (142 ms), joined with their GPU time
    at the roofline's corner (sqrt(gpu^2 + floor^2): the issue, 1.14 s, exceeds the GPU time, ~0.65 s,
    which adds 14%), plus the optimizer: 1.29 s against the 1.2 s Qwen's README measured (within 10%:
    the published step is rounded)."""
    t = estimate_training_time(QWEN, _qwen(), A100)
    floor = 8 * (LAYER_KERNELS + ADAPTED * 5) * 4 * EAGER_KERNEL_S
    optimizer = sum(o.time_s for o in t.ops if o.phase == "optimizer")
    gpu = 8 * sum(o.time_s for o in t.ops if o.phase in ("forward", "backward", "recompute"))  # ops: per micro-batch
    assert eff.ROOF_P == 2.0 and gpu < floor
    assert t.step_time_s == pytest.approx((gpu**2 + floor**2) ** 0.5 + optimizer, rel=1e-6)
    assert floor + optimizer < t.step_time_s < 1.2 * (floor + optimizer)
    assert t.step_time_s == pytest.approx(1.2, rel=0.10)
