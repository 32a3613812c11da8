"""How much of a GPU's datasheet peak real kernels reach: named constants with their sources.

The performance model is a roofline per operator: time = max(FLOPs / (peak x eta_compute),
bytes / (bandwidth x eta_memory)). The etas live here, but for the ones measured on one card,
which its catalog row states beside its peaks (mamf_bf16, mamf_fp8, mamf_fp4,
memory_bandwidth_share). Each is either a measurement (the best matmul a GPU was seen to run, a
device copy) or a derivation that the validation rows calibrate; each says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gpuplan.specs.gpu import GPU

# --- best achievable dense matmul, as a share of the datasheet peak -----------------------------
# Measured per card, these shares sit in the catalog rows beside the peaks they divide
# (data/gpus/*.toml: mamf_bf16, mamf_fp8, mamf_fp4, each with its source): "Maximum Achievable
# Matmul FLOPS" (MAMF: torch.mm swept over shapes, mean of 100 iterations of the best shape;
# stas00/ml-engineering compute/accelerator/README.md @744d01e1, MAMF table, MI250X from the v1
# table @f0cca2fa) for A100, H100 SXM, H200, B200, MI300X and MI250X, and TensorRT-LLM's GEMMs for
# the RTX PRO 6000 Server Edition (see below). A user's catalog row may state its own.
_MAMF_SRC: Final = "MAMF table, stas00/ml-engineering compute/accelerator/README.md@744d01e1"

# Cards whose row states no MAMF take their family's value: Hopper PCIe/NVL run lower clocks under
# their power cap (the A100 PCIe/SXM MAMF ratio 252.9/271.2 = 0.93 applied to H100 SXM); consumer
# and workstation cards are power- and clock-limited like a PCIe A100: its 0.81 less the same 7%
# (derived, 0.75); pre-Ampere tensor cores 0.70 (derived).
_MAMF_BY_ARCH: Final[dict[str, tuple[float, float | None, str]]] = {
    "Hopper": (794.5 / 989 * 0.93, 1402.6 / 1979 * 0.93, "H100 SXM MAMF x A100 PCIe/SXM ratio 0.93 (derived)"),
    "Blackwell": (0.75, 0.72, "B200 MAMF less the PCIe/GeForce clock-cap 7% (derived)"),
    "Ampere": (0.75, None, "A100 PCIe MAMF less a 7% clock-cap penalty (derived)"),
    "Ada Lovelace": (0.75, 0.66, "A100 PCIe MAMF less 7%; fp8 at H100's fp8/bf16 MAMF ratio (derived)"),
    "Turing": (0.70, None, "derived default for pre-Ampere tensor cores"),
    "Volta": (0.70, None, "derived default for pre-Ampere tensor cores"),
    "CDNA 3": (668.4 / 1300, None, f"MI300X bf16; {_MAMF_SRC}"),
    "CDNA 4": (668.4 / 1300, None, f"no MI355X MAMF published: MI300X's bf16 share (derived); {_MAMF_SRC}"),
    "CDNA 2": (147.0 / 191.5, None, "MI250X bf16 per GCD; MAMF v1 table @f0cca2fa"),
}
_MAMF_DEFAULT: Final = (0.70, None, "derived default")

# The RTX PRO 6000 Blackwell Server Edition (GB202, sm_120: warp-level mma.sync tensor cores, not
# B200's tcgen05) gets much nearer its peak than the B200-derived Blackwell value above, and its
# catalog row states it (mamf_bf16, mamf_fp8, mamf_fp4). NVIDIA's aiconfigurator measured
# TensorRT-LLM 1.3.0rc20's GEMMs on that card (ai-dynamo/aiconfigurator @095f58a5,
# systems/data/rtx_pro_6000_server/gemm/trtllm/1.3.0rc20/gemm_perf.parquet): the best of its
# m, n, k >= 4096 shapes runs bf16 at 436, fp8 at 828 and NVFP4 at 1,537 dense TFLOP/s, 0.93 /
# 0.89 / 0.82 of 467.8 / 935.6 / 1,871.2 (the same tables give B200 0.75 / 0.70 / 0.51 and H100
# 0.84 / 0.76, in line with MAMF above). torch.mm on the same card agrees for bf16: 417.3 TFLOP/s
# at 8192^3, 0.89 (zzc0721/torch-performance-test-data issue #162). Not taken for the other GB202
# cards: the Workstation Edition's peak is quoted at 2617 MHz and torch.mm reached 0.70 of it
# (issue #160), the Server Edition's at the 2430 MHz it holds.
# `python bench/aiconfigurator_kernels.py CHECKOUT` recomputes these shares for every system there.

# GeForce RTX cards (since Turing; not the TITANs) run 16-bit matmuls with FP32 accumulation, what
# mixed precision uses, at half their FP16-accumulate tensor rate: a product limit, not a power or
# data-feed one, so torch.mm holds it at or above the rated boost clock. Best of 8192^2 and
# 10240^2 in zzc0721/torch-performance-test-data, against the catalog's FP32-accumulate peak:
# RTX 3060 1.00 (issue #131), 3080 1.09 (#80), 3080 Ti 1.12 (#132), 4060 Ti 1.08 (#145), 4090 0.97
# (#78), 5070 1.09 (#159), 5080 0.91 (#104), 5090 1.12-1.15 (#96, #124, PR #15); median 1.08 (clocks
# above the rated boost). Taken as 1.0 of the rated peak; 8-bit (also FP32-accumulate, half rate):
# an RTX 5090's fp8 row-wise GEMM, 388.9 of 419 TFLOP/s at 4096^3 (pytorch/pytorch PR #155991).
_GEFORCE_HALF_RATE: Final = (
    1.0,
    388.9 / 419.0,
    "GeForce FP32-accumulate tensor rate held in full: torch.mm 0.91-1.15 of it on 8 cards "
    "(zzc0721/torch-performance-test-data)",
)


def _geforce_half_rate(gpu: GPU) -> bool:
    return gpu.geforce_eula and gpu.name.startswith("GeForce")


# An engine that ships its own GEMM kernels reaches its own shares of peak. TensorRT-LLM's, as NVIDIA's
# aiconfigurator measured them (TensorRT-LLM 1.3.0rc20, 1.0.0 on A100; the best of the m, n, k >=
# 4096 shapes; `bench/aiconfigurator_kernels.py` recomputes them): (bf16, fp8, NVFP4 or None).
_AIC_SRC: Final = "TensorRT-LLM GEMMs measured by aiconfigurator@095f58a5"
_ENGINE_GEMM: Final[dict[str, dict[str, tuple[float, float | None, float | None]]]] = {
    "tensorrt-llm": {
        "A100 SXM4 80GB": (280.3 / 312, None, None),
        "H100 SXM5 80GB": (834.2 / 989.5, 1502.8 / 1979, None),
        "H200 SXM 141GB": (846.5 / 989.5, 1522.9 / 1979, None),
        "B200": (1693.0 / 2250, 3151.0 / 4500, 4546.5 / 9000),
        "B300": (1836.1 / 2250, 3375.6 / 4500, 5982.6 / 14000),
        "GB200": (1908.0 / 2500, 3492.6 / 5000, 5195.9 / 10000),
        "L40S": (260.6 / 362.05, 431.8 / 733, None),
    },
}


# Sustained load: MAMF is the best shape over a short run (100 iterations); in a training step or
# a long serving run the GPU sits at its power cap and its clock drops below boost (H100 SXM:
# 1980 MHz boost, ~1.7-1.75 GHz under sustained tensor load at 700 W -> ~0.87). Calibrated per
# architecture on the training and prefill rows (Hopper/Blackwell run hottest against their cap).
SUSTAINED_SHARE: Final[dict[str, float]] = {"Hopper": 0.85, "Blackwell": 0.85, "default": 0.93}


def sustained_share(gpu: GPU) -> float:
    return SUSTAINED_SHARE.get(gpu.architecture, SUSTAINED_SHARE["default"])


# Tensor-core precisions that take the 8-bit matmul share (fp8, int8 and int4 runs)
EIGHT_BIT: Final = ("fp8", "int8", "int4")

# 8-bit matmuls where no fp8 MAMF is published: H100's fp8/bf16 MAMF ratio (0.709/0.803 = 0.88).
FP8_SHARE_OF_BF16_EFF: Final = (1402.6 / 1979) / (794.5 / 989)

# fp32 on CUDA cores (no tensor cores): SGEMM reaches about 0.9 of peak (cuBLAS SGEMM on large
# squares); used for fp32 compute and as the fallback.
FP32_CORE_EFF: Final = 0.9

# The roofline's corner: time = (t_compute^p + t_memory^p)^(1/p). Near the ridge a kernel reaches
# neither peak (loads and math overlap imperfectly), so the plain max is optimistic there; far from
# it the larger term dominates. p = 2, calibrated on the serving-throughput and prefill rows (their
# median error falls from 14.9% to 13.3%; compute-bound training moves < 1%). The same corner joins
# a training step's GPU time and the CPU time to issue its kernels (parallel.compose): the step is the
# sum over its ops of max(issue, run), more than the max of the sums where tiny elementwise kernels
# wait on the CPU and GEMMs on the GPU; far from the crossover the larger term is the step (Qwen v1's
# LoRA steps at 512 tokens, GPU and issue ~140 ms a micro-batch each: 187 ms published, 142 ms as
# the plain max).
ROOF_P: Final = 2.0

# --- GEMM size: half-saturation dimension -------------------------------------------------------
# A GEMM with a small dimension fills fewer tiles and waves: efficiency x = d / (d + D0) per
# dimension. D0 = 128 is one CUTLASS/cuBLAS thread-block tile edge (128x128 and 128x256 tiles);
# calibrated on the small-model llm-foundry rows (MPT-125m/350m, d = 768/1024).
GEMM_HALF_DIM: Final = 128.0
# The token (row) dimension of skinny GEMMs (decode, small batches) gets kernels with 16-row tiles
# (cuBLAS/CUTLASS skinny configurations; Marlin's 16-row blocks, Frantar et al. 2024), so it
# saturates sooner: half efficiency at 16 rows.
GEMM_HALF_ROWS: Final = 16.0
# Block-scaled FP4 GEMMs (NVFP4/MXFP4 on Blackwell's FP4 tensor cores): cuBLAS 13.3 runs
# 8192^3 at 5,239 of B200's 9,000 dense TFLOP/s (deepseek-ai/DeepGEMM PR #348's cuBLAS column;
# DeepGEMM's own kernel 5,702), the share taken as FP4's MAMF. Each launch also costs more fixed
# time than a 16-bit GEMM's: in vLLM's B200 GEMM benchmark (vllm-project/vllm PR #20646,
# N=6144 K=4096, 1,024-4,096 rows) time against rows has an intercept of 3.9-5.4 us for NVFP4
# and 1.8 us for bf16, so ~3 us more per launch.
_FP4_SRC: Final = "B200 FP4 8192^3 5239/9000 (cuBLAS 13.3, DeepGEMM PR #348)"
FP4_MAMF_SHARE: Final = 5239.0 / 9000.0
FP4_GEMM_LATENCY_S: Final = 3.0e-6

# --- attention kernels ----------------------------------------------------------------------------
# FlashAttention-2, forward + backward together (Dao-AILab/flash-attention@0251105a README benchmark
# figures): up to 203 TFLOP/s on A100 (65% of 312), which the A100 training rows bear out; FA2 is
# what PyTorch stacks run (SDPA, transformers, llm-foundry, torchtitan). Backward does 2.5x the
# forward's matmul FLOPs (5 matmuls against 2, recomputing P; Dao 2023, sec. 3.1).
# On Hopper FA2 runs without the wgmma/TMA instructions: 338 TFLOP/s at best in the same README,
# and FlashAttention-3 (Shah et al. 2024, abstract) puts FA2 at 35% of H100's peak and FA3 at 75%
# (740 TFLOP/s in FP16). Whole H100 training steps reach less of either (causal masks, the
# backward, head dims below 128): llm-foundry's and torchtitan's 8k-262k-token H100 rows fit 0.22
# for FA2, ATTN_STEP_SHARE = 0.63 of its best case; FA3-class kernels (FA3, Transformer Engine's
# cuDNN fused attention in NeMo, TensorRT-LLM's Hopper FMHA, vLLM's FA3 on SM90) take the same
# share of 75%.
ATTN_STEP_SHARE: Final = 0.22 / 0.35
# AMD CDNA parts run FA2 ports (composable kernels; PyTorch SDPA's AOTriton). MI300X's was measured:
# ROCm/flash-attention's benchmark (issue #142, ROCm 6.3.2, head dim 128, sequence 16384, not causal,
# batch 1-8) ran the forward at 309.6-355.5 TFLOP/s and the backward at 194.4-206.7, best 355.5 and
# 206.7 of 1,307.4. Like FA2 on H100 a whole step reaches ATTN_STEP_SHARE of that best case (the
# causal masks and the training shapes are the same work there). Other CDNA parts take FA2's
# best-case H100 share (derived) at the same step share. Blackwell runs FA2 (no FA3 build) at the
# Hopper best case until measured.
_MI300X_FA2: Final = (355.5 / 1307.4, 206.7 / 355.5)  # (forward share of peak, backward / forward)
ATTN_FWD_EFF: Final[dict[str, float]] = {
    "Hopper": 0.35 * ATTN_STEP_SHARE,
    "Blackwell": 0.34,
    "CDNA 3": _MI300X_FA2[0] * ATTN_STEP_SHARE,
    "CDNA 4": 0.34 * ATTN_STEP_SHARE,
    "CDNA 2": 0.34 * ATTN_STEP_SHARE,
    "default": 0.65,
}
# Hopper-native attention (FA3 / cuDNN / TensorRT-LLM FMHA); other architectures run their FA2 share
ATTN_FWD_EFF_FA3: Final[dict[str, float]] = {"Hopper": 0.75 * ATTN_STEP_SHARE}
# The backward kernel runs below the forward one: FA2 paper figs. 4-5 (A100, head dim 128,
# causal): backward ~150-190 TFLOP/s against forward ~190-225, a ratio of ~0.83.
ATTN_BWD_SHARE: Final = 0.83
ATTN_BWD_SHARE_BY_ARCH: Final[dict[str, float]] = {"CDNA 3": _MI300X_FA2[1]}  # measured: MI300X above
ATTN_BWD_FLOP_RATIO: Final = 2.5

# --- memory bandwidth ---------------------------------------------------------------------------
# STREAM-style copy / triad as a share of spec (Azure/AI-benchmarking-guide@8fd0c6e1, ND_*_results):
# A100-80GB 1.61/1.70 of 2.0 TB/s, H100 SXM 2.90/2.97 of 3.35, H200 4.01/4.15 of 4.8 -> 0.81-0.89;
# RTX 4090 867-921 of 1008 GB/s (clpeak issue #106). Streaming elementwise kernels: 0.85.
# Decode kernels (GEMV over weights, paged KV reads) sit a little below: 0.80 (calibrated on the
# MLC and TensorRT-LLM decode rows).
COPY_BW_EFF: Final = 0.85
KERNEL_BW_EFF: Final = 0.80
# A card whose memory-bound kernels were measured far from that states its own share in its
# catalog row (memory_bandwidth_share): the RTX PRO 6000 Blackwell Server Edition streams 0.93-0.94
# of its datasheet 1,597 GB/s in TensorRT-LLM's kernels
# (aiconfigurator@095f58a5, rtx_pro_6000_server: GEMVs of m <= 8 over >= 512 MB of bf16 weights,
# median 1,492 GB/s; decode attention over >= 1 GB of KV cache, median 1,506 GB/s). The same
# tables give H100 0.85, H200 0.85, B200 0.79 and L40S 0.84 for the GEMVs, near KERNEL_BW_EFF.
# (Their fastest GEMV, 1,603 GB/s, passes the datasheet: aiconfigurator's system file gives the
# card 1,792 GB/s, the Workstation Edition's figure. Either way this is what its kernels reach.)

# --- kernel launch --------------------------------------------------------------------------------
# Back-to-back kernels cost about 1.6-2.6 us each on L40/A100/H200 (te42kyfo/gpu-benches@1c36d509,
# gpu-small-kernels/repeated-stream.svg fit): the cost per kernel under CUDA graphs (vLLM,
# TensorRT-LLM, MLC, llama.cpp). An eager PyTorch op adds Python and dispatcher time, ~10 us per op
# (PyTorch performance tuning guide: small ops are CPU-bound), so an eager step takes at least the
# CPU time to issue its kernels.
LAUNCH_EAGER_S: Final = 10e-6
# Eager PyTorch issues about three ops per fused kernel's worth of math: a Llama decoder layer's
# forward in transformers runs ~35 ops (views, transposes, rotary halves, cache updates, casts)
# against the ~11 kernels a fused engine launches (counted from LlamaDecoderLayer.forward).
EAGER_OPS_PER_KERNEL: Final = 3.0
LAUNCH_GRAPH_S: Final = 2.0e-6

# --- bitsandbytes inference kernels (transformers' load_in_8bit / load_in_4bit) -----------------
# Host time per quantised linear call, on top of its GPU time. LLM.int8 (MatMul8bitLt) quantises
# the activations, finds the outlier columns (a device-to-host sync per call) and runs a second
# fp16 matmul for them: measured batch-1 decode overheads (int8 time less bf16 time, plus the
# halved weight reads, over the linear calls per token) of 0.48 ms (LitGPT quantize tutorial,
# falcon-7b, A100 40GB, old and new revisions: 10.59 vs 26.23 and 12.66 vs 47.66 tok/s) and
# 0.58 ms (bitsandbytes issue #347: llama-7b on an RTX 3090, 154.55 vs 32.89 ms/token): 0.5 ms.
BNB_INT8_CALL_S: Final = 0.5e-3
# 4-bit (NF4/FP4) at one token: bitsandbytes' gemv_4bit kernel (release 0.40.0) behind a Python
# path of a few ops. Per call, from the same differences: 105 us without double quantisation
# (LitGPT quantize tutorial, falcon-7b: nf4 37.62 vs bf16 47.66 tok/s; LitGPT resource tables,
# bitsandbytes 0.41.1, A100 40GB: llama-2-7b 19.98 vs 30.97 -> 114 us, llama-2-13b 16.73 vs 24.82
# -> 124 us; the tutorial's older revision gave 35-44 us for nf4/fp4), 125 us with it (that
# revision's nf4-dq and fp4-dq, and llama-2-70b nf4-dq at 7.97 tok/s in the resource tables):
# 105 us, and 20 us more to dequantise the absmax blocks.
BNB_4BIT_CALL_S: Final = 105e-6
BNB_4BIT_DQ_CALL_S: Final = 20e-6

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


def _cited(gpu: GPU, field: str) -> str:
    """A catalog row's value named with its source, for GemmEfficiency.source."""
    s = gpu.sources.get(field)
    return f"{gpu.name} {field} ({s.title}: {s.where})" if s else f"{gpu.name} {field} ({gpu.origin})"


def _mamf(gpu: GPU) -> tuple[float, float | None, str]:
    """(16-bit share, 8-bit share or None, source) of the best large matmul: what the catalog row
    states, else GeForce's half-rate rule, the architecture's value or the default. An 8-bit share the
    row leaves out comes from its own 16-bit one where it states that (gemm_efficiency scales it)."""
    default = (
        (_GEFORCE_HALF_RATE if _geforce_half_rate(gpu) else None)
        or _MAMF_BY_ARCH.get(gpu.architecture)
        or _MAMF_DEFAULT
    )
    if gpu.mamf_bf16 is not None:
        src = _cited(gpu, "mamf_bf16")
        return gpu.mamf_bf16, gpu.mamf_fp8, src if gpu.mamf_fp8 is None else f"{src}; {_cited(gpu, 'mamf_fp8')}"
    if gpu.mamf_fp8 is not None:
        return default[0], gpu.mamf_fp8, f"{default[2]}; {_cited(gpu, 'mamf_fp8')}"
    return default


def gemm_efficiency(gpu: GPU, runs_as: str, engine: str | None = None) -> GemmEfficiency:
    """Best large-matmul efficiency for `gpu` when the work runs as `runs_as`: measured on the card
    itself where a calibration file gives it (`gpuplan bench`), else the engine's own kernels where
    they were measured on this card, else the sourced tables below."""
    measured = gpu.measured_matmul_flop_per_s.get(runs_as)
    peak = gpu.peak_flop_per_s.get(runs_as)
    if measured and peak:
        return GemmEfficiency(min(measured / peak, 1.0), f"measured by gpuplan bench: {measured / 1e12:.0f} TFLOP/s")
    if runs_as in ("fp32",):
        return GemmEfficiency(FP32_CORE_EFF, "SGEMM on CUDA cores ~0.9 of peak (cuBLAS)")
    own = _ENGINE_GEMM.get(engine or "", {}).get(gpu.name)
    if own is not None:
        share = own[2] if runs_as == "fp4" else own[1] if runs_as in EIGHT_BIT else own[0]
        if share is not None:
            k = sustained_share(gpu)
            return GemmEfficiency(share * k, f"{_AIC_SRC} ({engine}, {gpu.name}); x {k:g} sustained")
    e16, e8, src = _mamf(gpu)
    k = sustained_share(gpu)
    src = f"{src}; x {k:g} sustained"
    if runs_as == "fp4":
        if gpu.mamf_fp4 is not None:
            return GemmEfficiency(gpu.mamf_fp4 * k, f"{_cited(gpu, 'mamf_fp4')}; x {k:g} sustained")
        return GemmEfficiency(FP4_MAMF_SHARE * k, f"{_FP4_SRC}; x {k:g} sustained")
    if runs_as in EIGHT_BIT:
        if e8 is not None:
            return GemmEfficiency(e8 * k, src)
        return GemmEfficiency(e16 * FP8_SHARE_OF_BF16_EFF * k, f"{src}; x {FP8_SHARE_OF_BF16_EFF:.2f} for 8-bit")
    return GemmEfficiency(e16 * k, src)


def bandwidth_efficiency(gpu: GPU) -> float:
    """Share of the datasheet memory bandwidth a streaming kernel reaches: measured on the card
    (`gpuplan bench`'s copy) where a calibration file gives it, else the card's measured kernels
    (its catalog row's memory_bandwidth_share), else KERNEL_BW_EFF."""
    if gpu.measured_bandwidth_bytes_per_s:
        return min(gpu.measured_bandwidth_bytes_per_s / gpu.memory_bandwidth_bytes_per_s, 1.0)
    return KERNEL_BW_EFF if gpu.memory_bandwidth_share is None else gpu.memory_bandwidth_share


def size_factor(dim: float, half: float = GEMM_HALF_DIM) -> float:
    """Share of the best efficiency a GEMM dimension of `dim` allows (tile/wave quantisation)."""
    return dim / (dim + half) if dim > 0 else 0.0


def gemm_size_factor(m: float, n: float, k: float) -> float:
    """Efficiency share of an (m x k) @ (k x n) GEMM: rows saturate at 16, columns and depth at 128."""
    # size_factor's three terms written out (a plan evaluates ~500,000 of these): the same arithmetic
    fm = m / (m + GEMM_HALF_ROWS) if m > 0 else 0.0
    fn = n / (n + GEMM_HALF_DIM) if n > 0 else 0.0
    return fm * fn * (k / (k + GEMM_HALF_DIM) if k > 0 else 0.0)


def attention_efficiency(gpu: GPU, backward: bool = False, kernel: str = "fa2") -> float:
    """Share of peak an attention kernel ("fa2", "fa3") reaches over a step on this GPU."""
    fwd = ATTN_FWD_EFF.get(gpu.architecture, ATTN_FWD_EFF["default"])
    if kernel == "fa3":
        fwd = ATTN_FWD_EFF_FA3.get(gpu.architecture, fwd)
    return fwd * (ATTN_BWD_SHARE_BY_ARCH.get(gpu.architecture, ATTN_BWD_SHARE) if backward else 1.0)
