"""How much of a GPU's datasheet peak real kernels reach: named constants with their sources.

The performance model is a roofline per operator: time = max(FLOPs / (peak x eta_compute),
bytes / (bandwidth x eta_memory)). The etas live here. Each is either a measurement (the best
matmul a GPU was seen to run, a device copy) or a derivation that the validation rows calibrate;
each says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gpuplan.specs.gpu import GPU

# --- best achievable dense matmul, as a share of the datasheet peak -----------------------------
# "Maximum Achievable Matmul FLOPS" (MAMF) measured by a sweep over shapes with torch.mm
# (stas00/ml-engineering, compute/accelerator/README.md, MAMF table; bf16):
#   A100 SXM 271.2 of 312 TFLOP/s, A100 PCIe 252.9 of 312, H100 SXM 794.5 of 989,
#   GH200 821.0 of 989, MI300X 781.9 of 1307, MI250X 147.0 of 191.5 (one GCD pair as sold).
# H200: a bf16 8192^3 matmul ran at about 790 of 989 TFLOP/s (issue 4 of this project, measured).
_MAMF_BY_NAME: Final[dict[str, tuple[float, str]]] = {
    "A100 SXM4 40GB": (271.2 / 312, "MAMF A100 SXM 271.2/312 (stas00/ml-engineering)"),
    "A100 SXM4 80GB": (271.2 / 312, "MAMF A100 SXM 271.2/312 (stas00/ml-engineering)"),
    "A100 PCIe 40GB": (252.9 / 312, "MAMF A100 PCIe 252.9/312 (stas00/ml-engineering)"),
    "A100 PCIe 80GB": (252.9 / 312, "MAMF A100 PCIe 252.9/312 (stas00/ml-engineering)"),
    "H100 SXM5 80GB": (794.5 / 989, "MAMF H100 SXM 794.5/989 (stas00/ml-engineering)"),
    "H200 SXM 141GB": (790 / 989, "bf16 8192^3 matmul ~790/989 on an H200 (gpuplan issue 4)"),
    "AMD Instinct MI300X": (781.9 / 1307, "MAMF MI300X 781.9/1307 (stas00/ml-engineering)"),
    "AMD Instinct MI250X": (147.0 / 191.5, "MAMF MI250X 147.0/191.5 (stas00/ml-engineering)"),
}

# Cards with no published MAMF take their family's value: the measured sibling of the same
# architecture (Hopper PCIe/NVL run lower clocks under their power cap: the A100 PCIe/SXM ratio,
# 0.93, is applied to the H100 SXM figure). Consumer and workstation cards are power- and
# clock-limited: 0.75 is the derived default (A100 PCIe's 0.81 less the same 7% cap penalty).
_MAMF_BY_ARCH: Final[dict[str, tuple[float, str]]] = {
    "Hopper": (794.5 / 989 * 0.93, "H100 SXM MAMF x A100 PCIe/SXM ratio (derived)"),
    "Blackwell": (0.75, "no published MAMF; derived default"),
    "Ampere": (0.75, "A100 PCIe MAMF less a 7% clock-cap penalty (derived)"),
    "Ada Lovelace": (0.75, "A100 PCIe MAMF less a 7% clock-cap penalty (derived)"),
    "Turing": (0.70, "derived default for pre-Ampere tensor cores"),
    "Volta": (0.70, "derived default for pre-Ampere tensor cores"),
    "CDNA 3": (781.9 / 1307, "MAMF MI300X (stas00/ml-engineering)"),
    "CDNA 2": (147.0 / 191.5, "MAMF MI250X (stas00/ml-engineering)"),
}
_MAMF_DEFAULT: Final = (0.70, "derived default")

# FP8 matmuls reach a lower share of their doubled peak (the same memory system feeds twice
# the math): H100 SXM fp8 MAMF about 1,300 of 1,979 TFLOP/s -> 0.66 (derived from the bf16
# figure x 0.82; calibrated on the fp8 llm-foundry and TensorRT-LLM rows).
FP8_SHARE_OF_BF16_EFF: Final = 0.82

# fp32 on CUDA cores (no tensor cores): SGEMM reaches about 0.9 of peak (cuBLAS SGEMM on large
# squares); used for fp32 compute and as the fallback.
FP32_CORE_EFF: Final = 0.9

# --- GEMM size: half-saturation dimension -------------------------------------------------------
# A GEMM with a small dimension fills fewer tiles and waves: efficiency x = d / (d + D0) per
# dimension. D0 = 128 is one CUTLASS/cuBLAS thread-block tile edge (128x128 and 128x256 tiles);
# calibrated on the small-model llm-foundry rows (MPT-125m/350m, d = 768/1024).
GEMM_HALF_DIM: Final = 128.0
# The token (row) dimension of skinny GEMMs (decode, small batches) gets kernels with 16-row tiles
# (cuBLAS/CUTLASS skinny configurations; Marlin's 16-row blocks, Frantar et al. 2024), so it
# saturates sooner: half efficiency at 16 rows.
GEMM_HALF_ROWS: Final = 16.0

# --- attention kernels ----------------------------------------------------------------------------
# FlashAttention-2 paper (Dao 2023, sec. 4.1): forward reaches 50-73% of the A100's peak, backward
# 40-63% (we use 0.62 / 0.50); on H100 FA2 (what PyTorch stacks run) reaches about 35-40% forward
# and ~30% backward (FA3 paper, Shah et al. 2024, fig. 1-2: FA2 ~335-370 of 989 TFLOP/s);
# FA3 / cuDNN fused attention reach 60-75%. Backward does 2.5x the
# forward's matmul FLOPs (5 matmuls against 2, recomputing P).
ATTN_FWD_EFF: Final[dict[str, float]] = {"Hopper": 0.38, "Blackwell": 0.38, "default": 0.62}
ATTN_BWD_EFF: Final[dict[str, float]] = {"Hopper": 0.30, "Blackwell": 0.30, "default": 0.50}
ATTN_BWD_FLOP_RATIO: Final = 2.5

# --- memory bandwidth ---------------------------------------------------------------------------
# Device-to-device copy on an H200: about 4.3 of 4.8 TB/s (0.90, issue 4 of this project);
# STREAM-like copies on A100/H100 land at 0.85-0.92 of spec. Real decode kernels (GEMV over
# weights, paged KV reads) sit a little below a copy: calibrated 0.80 on the MLC/TensorRT decode rows.
COPY_BW_EFF: Final = 0.90
KERNEL_BW_EFF: Final = 0.80

# --- kernel launch --------------------------------------------------------------------------------
# A CUDA kernel launch costs the CPU about 2-5 us (NVIDIA CUDA Best Practices guide, "kernel launch
# overhead"); an eager PyTorch op adds Python and dispatcher time, ~10 us per op (PyTorch
# performance tuning guide: small ops are CPU-bound). With CUDA graphs (vLLM, TensorRT-LLM, MLC,
# llama.cpp) a kernel costs about 1.5 us of GPU-side launch latency. A step takes at least the CPU
# time to issue its kernels.
LAUNCH_EAGER_S: Final = 10e-6
LAUNCH_GRAPH_S: Final = 1.5e-6

# --- elementwise work: bytes per token per layer, as a multiple of the fused count -------------
# Eager PyTorch runs RMSNorm/LayerNorm, activations, rotary, residual adds and dropout as separate
# kernels with fp32 intermediates; compiled (torch.compile) or hand-fused stacks (Megatron/NeMo
# Transformer Engine, FlashAttention's fused MLP/LayerNorm) read and write each tensor about once.
# 2.5 is derived from counting an eager RMSNorm (upcast, square, mean, rsqrt, two muls, downcast:
# ~5 passes over fp32 data against 1 over bf16) averaged with cheaper ops; calibrated on rows.
EAGER_ELEMENTWISE_FACTOR: Final = 2.5


@dataclass(frozen=True)
class GemmEfficiency:
    """The best share of peak a large matmul reaches on one GPU at one precision."""

    value: float
    source: str


def gemm_efficiency(gpu: GPU, runs_as: str) -> GemmEfficiency:
    """Best large-matmul efficiency for `gpu` when the work runs as `runs_as`."""
    if runs_as in ("fp32",):
        return GemmEfficiency(FP32_CORE_EFF, "SGEMM on CUDA cores ~0.9 of peak (cuBLAS)")
    eff, src = _MAMF_BY_NAME.get(gpu.name) or _MAMF_BY_ARCH.get(gpu.architecture) or _MAMF_DEFAULT
    if runs_as in ("fp8", "int8", "int4"):
        return GemmEfficiency(eff * FP8_SHARE_OF_BF16_EFF, f"{src} x {FP8_SHARE_OF_BF16_EFF} for 8-bit")
    return GemmEfficiency(eff, src)


def size_factor(dim: float, half: float = GEMM_HALF_DIM) -> float:
    """Share of the best efficiency a GEMM dimension of `dim` allows (tile/wave quantisation)."""
    return dim / (dim + half) if dim > 0 else 0.0


def gemm_size_factor(m: float, n: float, k: float) -> float:
    """Efficiency share of an (m x k) @ (k x n) GEMM: rows saturate at 16, columns and depth at 128."""
    return size_factor(m, GEMM_HALF_ROWS) * size_factor(n) * size_factor(k)


def attention_efficiency(gpu: GPU, backward: bool = False) -> float:
    table = ATTN_BWD_EFF if backward else ATTN_FWD_EFF
    return table.get(gpu.architecture, table["default"])
