"""Step time, throughput and latency from the model's operators: a roofline per operator.

Each operator (a linear layer's GEMM, attention, the elementwise work of a layer, the loss, the
optimizer step, a collective) gets a roofline time from FLOPs / (peak x eta) and bytes /
(bandwidth x eta) (Williams et al., "Roofline", CACM 2009; the corner smoothed, see ROOF_P), with
the etas of `efficiency.py`. A training step adds
forward, backward (dgrad + wgrad: 2x forward; no wgrad for frozen weights, so LoRA's backward is
about 1x), recompute under checkpointing, the optimizer step and the communication that compute
does not hide. Inference is a prefill (all prompt tokens at once: compute-bound) and a decode
step per output token (weights and KV cache read once per step: bandwidth-bound at small batch).

Sources of the operator accounting: Narayanan et al. 2021 (Megatron-LM, sec. 5: 2x backward,
recompute); Korthikanti et al. 2022 (selective recompute, TP/SP communication); Dao 2023
(FlashAttention-2 FLOPs); Pope et al. 2022 ("Efficiently Scaling Transformer Inference": decode
is weight- and KV-bandwidth bound, prefill compute-bound); PaLM appendix B (MFU).
"""

from gpuplan.estimators.perf.cnn import CNN_FEATURE_ELEMENTS_PER_FLOP, cnn_kernels
from gpuplan.estimators.perf.inference import estimate_inference_time, inference_rate
from gpuplan.estimators.perf.ops import InferenceTime, Op, TrainingTime, compute_roof, eager_score_bytes
from gpuplan.estimators.perf.training import MicroOps, estimate_training_time, training_ops, with_checkpointing

__all__ = [
    "CNN_FEATURE_ELEMENTS_PER_FLOP",
    "InferenceTime",
    "MicroOps",
    "Op",
    "TrainingTime",
    "cnn_kernels",
    "compute_roof",
    "eager_score_bytes",
    "estimate_inference_time",
    "estimate_training_time",
    "inference_rate",
    "training_ops",
    "with_checkpointing",
]
