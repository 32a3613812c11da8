"""Peak GPU memory of one workload on one GPU of a type (of N), as a breakdown in bytes.

Model states follow the ZeRO paper (Rajbhandari et al. 2020, sec. 3.1 and 5): with mixed-precision
Adam, 2 bytes of 16-bit weights, 2 of 16-bit gradients and 12 of fp32 master weights and moments
per parameter (16 in all), sharded across the data-parallel group by stage (1: optimizer states,
2: + gradients, 3: + weights; FSDP FULL_SHARD = 3). Without ZeRO, PyTorch AMP and Megatron keep
fp32 gradients (main_grad), so plain data parallelism holds 2 + 4 + 4 + 8 = 18 bytes per
parameter. Activations come from `activations.py`, the framework's own overheads from
`runtime.py`. Peak memory is the largest of three moments of a training step: the end of the
forward pass (all activations and the loss live), and the optimizer step (all gradients live,
activations freed); for inference, the prefill and the end of decoding.
"""

from __future__ import annotations

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators.memory.base import (
    ATTN_OUT_LEAVES,
    MLP_DOWN_LEAVES,
    InferenceWeights,
    MemoryEstimate,
    MemoryLine,
    ServingCapacity,
    activation_lines,
    inference_weights,
    is_quantised,
    kv_shards,
    pipeline_ranks,
)
from gpuplan.estimators.memory.inference import inference_memory
from gpuplan.estimators.memory.training import cnn_training_memory, training_memory
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.precision import training_precision_gap
from gpuplan.specs.workload import Workload

__all__ = [
    "ATTN_OUT_LEAVES",
    "MLP_DOWN_LEAVES",
    "InferenceWeights",
    "MemoryEstimate",
    "MemoryLine",
    "ServingCapacity",
    "activation_lines",
    "check_precision_runs",
    "estimate_memory",
    "inference_weights",
    "is_quantised",
    "kv_shards",
    "pipeline_ranks",
]


def check_precision_runs(w: Workload, gpu: GPU) -> None:
    """Refuse, in one line, a training precision the card has no units for: checked before memory,
    so no memory verdict (or fix) is given for a job the card cannot run at all."""
    gap = training_precision_gap(w.precision, gpu) if w.is_training else None
    if gap:
        raise InvalidSettingError(gap)


def estimate_memory(model: ModelSpec, w: Workload, gpu: GPU | None = None) -> MemoryEstimate:
    """Per-GPU peak memory of workload `w` with model `model` on `gpu` (N = w.num_gpus)."""
    if w.is_graphics:
        raise InvalidSettingError(
            f"task {w.task!r} is a graphics workload; its memory is per stream or user (see `gpuplan plan`)."
        )
    if gpu is not None:
        check_precision_runs(w, gpu)
    if w.is_training:
        if model.kind == "cnn":
            return cnn_training_memory(model, w, gpu)
        return training_memory(model, w, gpu)
    return inference_memory(model, w, gpu)
