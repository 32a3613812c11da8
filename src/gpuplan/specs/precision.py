"""Number formats: bytes per stored value, and which compute precision a GPU really runs.

Two different questions live here:
- storage: how many bits one weight (or KV entry) takes, block scales included;
- compute: the peak a matmul at a given precision gets on a GPU, and what it falls back to where
  the chip lacks that precision (fp8 on an A100 runs at the bf16 rate; V100 has no bf16).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from gpuplan.errors import InvalidSettingError, did_you_mean

if TYPE_CHECKING:
    from gpuplan.specs.gpu import GPU


@dataclass(frozen=True)
class StorageFormat:
    """A way of storing weights or cache entries."""

    name: str
    bits_per_value: float  # average over a tensor, block scales and zero points included
    source: str

    @property
    def bytes_per_value(self) -> float:
        return self.bits_per_value / 8.0


# QLoRA (Dettmers et al. 2023), section 3 "Double Quantization": NF4 with blocksize 64 and fp8
# block constants, themselves quantised in blocks of 256 with fp32 constants, costs
# 8/64 + 32/(64*256) = 0.127 bits per parameter of overhead (0.5 without double quantisation).
_NF4_DQ_OVERHEAD_BITS: Final = 8 / 64 + 32 / (64 * 256)
_NF4_OVERHEAD_BITS: Final = 32 / 64
# GPTQ / AWQ 4-bit, group size 128 (the common export): per group and output column one fp16
# scale and one packed 4-bit zero point -> 4 + (16 + 4)/128 bits (AutoGPTQ / AutoAWQ packing).
_GPTQ_G128_BITS: Final = 4 + (16 + 4) / 128
# torchao / gpt-fast int4 weight-only (tinygemm, aten._weight_int4pack_mm): per group of g input
# values and output column one bf16 scale and one bf16 zero (gpt-fast quantize.py
# WeightOnlyInt4Linear.scales_and_zeros, [K/groupsize, N, 2] bf16) -> 4 + 32/g bits
_TORCHAO_INT4: Final = "torchao Int4WeightOnlyConfig / gpt-fast int4, group {g}: bf16 scale + bf16 zero per group"
TORCHAO_INT4_GROUPS: Final = (32, 64, 128, 256)

# 4-bit floats (E2M1) with block scales. NVFP4 (NVIDIA, Blackwell): one FP8 E4M3 scale per 16
# values plus a per-tensor fp32 scale -> 4 + 8/16 bits (TensorRT Model Optimizer NVFP4_DEFAULT_CFG:
# block_sizes 16, scale_bits (4, 3)). MXFP4 (OCP Microscaling Formats v1.0, 2023): one E8M0 scale
# per 32 values -> 4 + 8/32 bits (gpt-oss ships its MoE weights so).
_NVFP4_BITS: Final = 4 + 8 / 16
_MXFP4_BITS: Final = 4 + 8 / 32
# Formats whose matmuls run on FP4 tensor cores where the GPU has them (W4A4: ModelOpt's NVFP4
# quantises activations as well); elsewhere, and for MXFP4 here, weight-only (dequantised to 16 bits)
FP4_TENSOR_FORMATS: Final = frozenset({"nvfp4"})

_LLAMA_CPP_QUANT_README: Final = "ggml-org/llama.cpp tools/quantize/README.md, 'Llama 2 7B' bits-per-weight table"
_GGML_BLOCK_FORMATS: Final = "ggml k-quants PR description (ggml-org/llama.cpp #1684): block layouts and bpw"

STORAGE_FORMATS: Final[dict[str, StorageFormat]] = {
    f.name: f
    for f in (
        StorageFormat("fp32", 32, "IEEE 754 binary32"),
        StorageFormat("tf32", 32, "TF32 is a compute mode; values are stored as fp32 (NVIDIA A100 whitepaper)"),
        StorageFormat("fp16", 16, "IEEE 754 binary16"),
        StorageFormat("bf16", 16, "bfloat16: 1 sign, 8 exponent, 7 mantissa bits"),
        StorageFormat("fp8", 8, "OCP 8-bit floating point (E4M3/E5M2), per-tensor scales negligible"),
        StorageFormat("fp8_e4m3", 8, "OCP 8-bit floating point, E4M3"),
        StorageFormat("fp8_e5m2", 8, "OCP 8-bit floating point, E5M2"),
        StorageFormat("int8", 8, "LLM.int8 / SmoothQuant int8 weights; per-channel scales negligible"),
        StorageFormat("int4", 4, "plain 4-bit integers; scales not counted (see gptq/awq for grouped)"),
        StorageFormat("nf4", 4 + _NF4_DQ_OVERHEAD_BITS, "QLoRA sec. 3: NF4, blocksize 64, double quantisation"),
        StorageFormat("nf4-no-dq", 4 + _NF4_OVERHEAD_BITS, "QLoRA sec. 3: NF4, blocksize 64, fp32 absmax"),
        StorageFormat("fp4", 4 + _NF4_DQ_OVERHEAD_BITS, "bitsandbytes FP4: same block layout as NF4"),
        StorageFormat("nvfp4", _NVFP4_BITS, "NVFP4: E2M1 values, FP8 E4M3 scale per 16 (+ fp32 per tensor)"),
        StorageFormat("mxfp4", _MXFP4_BITS, "OCP MXFP4: E2M1 values, E8M0 scale per 32"),
        StorageFormat("gptq", _GPTQ_G128_BITS, "GPTQ 4-bit, group 128: fp16 scale + 4-bit zero per group"),
        StorageFormat("awq", _GPTQ_G128_BITS, "AWQ 4-bit, group 128: fp16 scale + 4-bit zero per group"),
        *(StorageFormat(f"int4-g{g}", 4 + 32 / g, _TORCHAO_INT4.format(g=g)) for g in TORCHAO_INT4_GROUPS),
        # ggml block formats: q8_0 = 32 int8 + one fp16 scale = 34 bytes per 32 weights
        StorageFormat("q8_0", 34 * 8 / 32, _GGML_BLOCK_FORMATS),
        # q4_0 = 32 4-bit + one fp16 scale = 18 bytes per 32 weights
        StorageFormat("q4_0", 18 * 8 / 32, _GGML_BLOCK_FORMATS),
        # k-quant mixes: measured whole-file averages for Llama 2 7B
        StorageFormat("q6_k", 6.56, _LLAMA_CPP_QUANT_README),
        StorageFormat("q5_k_m", 5.68, _LLAMA_CPP_QUANT_README),
        StorageFormat("q5_k_s", 5.52, _LLAMA_CPP_QUANT_README),
        StorageFormat("q4_k_m", 4.84, _LLAMA_CPP_QUANT_README),
        StorageFormat("q4_k_s", 4.58, _LLAMA_CPP_QUANT_README),
        StorageFormat("q3_k_m", 3.91, _LLAMA_CPP_QUANT_README),
        StorageFormat("q3_k_l", 4.27, _LLAMA_CPP_QUANT_README),
        StorageFormat("q3_k_s", 3.50, _LLAMA_CPP_QUANT_README),
        StorageFormat("q2_k", 3.35, _LLAMA_CPP_QUANT_README),
    )
}

_STORAGE_ALIASES: Final = {
    "float32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "float8": "fp8",
    "awq-int4": "awq",
    "gptq-int4": "gptq",
    "qlora": "nf4",
    "modelopt_fp4": "nvfp4",
    "nv-fp4": "nvfp4",
    "mx-fp4": "mxfp4",
}


def storage_format(name: str) -> StorageFormat:
    """The storage format called `name` (case-insensitive)."""
    exact = STORAGE_FORMATS.get(name)  # a canonical name as the estimators pass it (~8,000 a plan)
    if exact is not None:  # no canonical name is also an alias, nor changes when normalised (tested)
        return exact
    key = name.strip().lower().replace(" ", "")
    key = _STORAGE_ALIASES.get(key, key)
    if key not in STORAGE_FORMATS:
        raise InvalidSettingError(
            f"Unknown weight/KV dtype {name!r}; allowed: {', '.join(STORAGE_FORMATS)}."
            + did_you_mean(name, STORAGE_FORMATS)
        )
    return STORAGE_FORMATS[key]


def bytes_per_value(name: str) -> float:
    """Bytes per stored value for a dtype name, e.g. 2.0 for bf16, 0.5159 for nf4."""
    return storage_format(name).bytes_per_value


# --- pre-quantised checkpoints: config.json's quantization_config -------------------------------


@dataclass(frozen=True)
class CheckpointFormat:
    """How a checkpoint stores its weights, read from its config.json."""

    fmt: str  # the storage format its block linears ship in
    method: str  # the config's quant_method
    keep: tuple[str, ...]  # module names or patterns it leaves unquantised


# quant_method -> storage format, where the config alone decides it (transformers'
# quantizers/auto.py names the methods; bitsandbytes, GPTQ and AWQ by their bit width)
_CHECKPOINT_METHODS: Final = {"mxfp4": "mxfp4", "fp8": "fp8", "fbgemm_fp8": "fp8"}
_MODELOPT_ALGOS: Final = {"nvfp4": "nvfp4", "fp8": "fp8"}
# the keys transformers and the serving engines read the unquantised modules from
_KEEP_KEYS: Final = ("modules_to_not_convert", "ignored_layers", "exclude_modules", "llm_int8_skip_modules")


def checkpoint_format(config: Mapping[str, Any]) -> CheckpointFormat | None:
    """The storage format a checkpoint's config.json declares (`quantization_config`), or None for
    an unquantised checkpoint or a method gpuplan does not map (compressed-tensors' schemes)."""
    q = config.get("quantization_config")
    if not isinstance(q, Mapping):
        return None
    method = str(q.get("quant_method", "")).lower()
    bits = q.get("bits", q.get("w_bit"))
    fmt: str | None = _CHECKPOINT_METHODS.get(method)
    if method in ("awq", "gptq") and bits == 4:
        fmt = method
    elif method == "bitsandbytes":
        if q.get("load_in_4bit"):
            fmt = str(q.get("bnb_4bit_quant_type", "nf4")).lower()
            if fmt == "nf4" and not q.get("bnb_4bit_use_double_quant"):
                fmt = "nf4-no-dq"
        elif q.get("load_in_8bit"):
            fmt = "int8"
    elif method == "modelopt":
        fmt = _MODELOPT_ALGOS.get(str(q.get("quant_algo", "")).lower())
    if fmt is None:
        return None
    keep: list[str] = []
    for key in _KEEP_KEYS:
        value = q.get(key)
        if isinstance(value, list):
            keep += [str(v) for v in value]
    return CheckpointFormat(fmt, method, tuple(keep))


def kept_unquantised(group_name: str, patterns: tuple[str, ...]) -> bool:
    """Whether a parameter group ("self_attn.q_proj", "mlp.router", ...) falls under one of a
    checkpoint's unquantised module names: "model.layers.*.self_attn" keeps every attention
    projection, "lm_head" the head (full names, prefixes or fnmatch patterns)."""
    for pattern in patterns:
        tail = re.sub(r"^(?:model\.)?(?:layers\.(?:\*|\d+)\.)?", "", pattern.strip())
        if not tail:
            continue
        if (
            fnmatch.fnmatchcase(group_name, tail)
            or group_name.startswith(tail + ".")
            or group_name.endswith("." + tail)
        ):
            return True
    return False


# Compute precisions a workload may ask for, in catalog column order.
COMPUTE_PRECISIONS: Final = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4")


@dataclass(frozen=True)
class ComputePeak:
    """The dense peak a GPU gives a matmul at a requested precision."""

    requested: str
    runs_as: str  # the precision whose units actually do the work
    flop_per_s: float
    reason: str  # empty when the GPU has the requested precision natively


# Where a chip lacks a precision, what runs instead. Sources: Transformer Engine support matrix
# (bf16 needs CC >= 8.0, fp8 CC >= 8.9); on Ampere fp8 weights are dequantised to 16-bit for the
# matmul (vLLM's fp8 Marlin path); with no bf16/tf32 units the work falls to the fp32 CUDA cores.
_FALLBACK: Final[dict[str, tuple[str, ...]]] = {
    "fp8": ("bf16", "fp16", "fp32"),
    "int8": ("fp16", "bf16", "fp32"),
    "int4": ("int8", "fp16", "bf16", "fp32"),
    "bf16": ("fp32",),
    "fp16": ("fp32",),
    "tf32": ("fp32",),
    "fp64": ("fp32",),
    "fp32": (),
}

_WHY_MISSING: Final = {
    "fp8": "has no FP8 tensor cores (FP8 needs compute capability 8.9 or newer)",
    "bf16": "has no BF16 tensor cores (BF16 needs compute capability 8.0 or newer)",
    "tf32": "has no TF32 tensor cores (TF32 came with Ampere, compute capability 8.0)",
    "int8": "has no INT8 tensor cores",
    "int4": "has no INT4 tensor cores",
    "fp16": "has no FP16 tensor cores",
    "fp64": "lists no FP64 rate",
}


def training_precision_gap(precision: str, gpu: GPU) -> str | None:
    """Why `gpu` cannot train at `precision` (one line with the fix), None when it can. FP8 training
    needs FP8 tensor cores (Transformer Engine / torchao float8: compute capability 8.9+); every
    other precision falls back to a unit the card has (compute_peak)."""
    if precision != "fp8" or gpu.supports("fp8"):
        return None
    return (
        f"fp8 training needs FP8 tensor cores; {gpu.name} has none (FP8 needs compute capability 8.9+). "
        "Use precision: bf16 (or fp16 where there is no bf16), or a GPU with FP8 (H100, H200, L40S, B200)."
    )


def fp4_peak(gpu: GPU) -> ComputePeak | None:
    """The dense FP4 tensor-core peak (Blackwell: NVIDIA's B200 and RTX 50 tables), None without one.
    Not a `precision` a workload asks for: what an NVFP4 checkpoint's matmuls run at."""
    if gpu.fp4_flop_per_s is None:
        return None
    return ComputePeak("fp4", "fp4", gpu.fp4_flop_per_s, "")


def compute_peak(gpu: GPU, precision: str) -> ComputePeak:
    """Dense peak FLOP/s for `precision` on `gpu`, falling back (with the reason) where absent."""
    p = precision.strip().lower()
    if p not in COMPUTE_PRECISIONS:
        raise InvalidSettingError(
            f"The 'precision' parameter must be one of {', '.join(COMPUTE_PRECISIONS)}. Got {precision!r} instead."
        )
    native = gpu.peak_flop_per_s.get(p)
    if native is not None:
        return ComputePeak(p, p, native, "")
    for alt in _FALLBACK[p]:
        rate = gpu.peak_flop_per_s.get(alt)
        if rate is not None:
            extra = ""
            if p == "bf16" and alt == "fp32":
                extra = "; use fp16 with loss scaling for tensor-core speed"
            return ComputePeak(p, alt, rate, f"{gpu.name} {_WHY_MISSING[p]}: {p} work runs at the {alt} rate{extra}.")
    raise InvalidSettingError(f"{gpu.name} lists no usable peak for {p}.")
