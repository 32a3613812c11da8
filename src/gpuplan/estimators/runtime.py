"""Memory the framework and driver take beyond the tensors: named constants with their sources.

`torch.cuda.max_memory_allocated` counts tensors only; what `nvidia-smi` shows (and what must fit
in the card) adds the allocator's cached-but-unused blocks, the CUDA context with its loaded
kernels, cuBLAS workspaces and, with several GPUs, NCCL's buffers. Each is its own line in a
breakdown so a user can see and question it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from gpuplan.specs.gpu import GPU

MIB: Final = 2**20

# CUDA context + loaded kernels + library handles of a PyTorch process with lazy module loading
# (CUDA >= 11.7; PyTorch forces CUDA_MODULE_LOADING=LAZY since 1.13). Measured: "around 400MB
# if CUDA >= 11.7 is used and lazy module loading enabled" (ptrblck, pytorch/pytorch#109888);
# 426 MiB on an RTX 6000 Ada with PyTorch 2.10+cu130 (unslothai/unsloth-zoo#1053); 0.35 GiB
# non-torch memory on an RTX 3090 under vLLM (vllm-project/vllm#10517).
CUDA_CONTEXT_BYTES: Final = 400 * MIB
CUDA_CONTEXT_SOURCE: Final = (
    "CUDA context with lazy loading: ~400 MB (pytorch/pytorch#109888; 426 MiB in unsloth-zoo#1053)"
)

# Before lazy loading (CUDA < 11.7, or CUDA_MODULE_LOADING=EAGER) every kernel of the loaded
# libraries sits in the context: 1343 MiB measured on a V100 with CUDA 11.2 (transformers docs,
# model_memory_anatomy.md); 1035 MiB (RTX 2080 Ti, CUDA 10.1) and 1644 MiB (RTX 3090, CUDA 11.0)
# in pytorch/pytorch#49877. The middle value is used.
CUDA_CONTEXT_EAGER_BYTES: Final = 1343 * MIB


def cublas_workspace_bytes(compute_capability: tuple[int, int] | None) -> float:
    """cuBLAS workspace per handle and stream: 32 MiB on sm_90, else 4096 KiB x 2 + 16 KiB x 8
    = 8.125 MiB, plus 1 MiB for cuBLASLt (aten/src/ATen/cuda/CublasHandlePool.cpp)."""
    return (32 * MIB if compute_capability == (9, 0) else 8_519_680.0) + MIB


# The caching allocator's slack at the peak, reserved minus allocated. Measured from +0.6% (fixed
# shapes, torchtune PR #1348) to +12.5% (SkyRL PR #1470 OOM report); compressed-tensors PR #587
# reserves "5% of model memory for fragmentation". Variable shapes without expandable segments
# can reach 1.5-2x (torchtune #1185); torchtune and torchtitan turn expandable segments on.
ALLOCATOR_SLACK_FRACTION: Final = 0.05
ALLOCATOR_SLACK_SOURCE: Final = "reserved - allocated: +0.6% to +12.5% measured (torchtune #1348, SkyRL #1470)"

# NCCL communicator buffers per process: each connection takes NCCL_BUFFSIZE 4 MiB + 4.6875 MiB
# LL128 + 0.5 MiB LL per channel; measured 544-688 MB per communicator on 4 x A100
# (NVIDIA/nccl#986 thread), so one data-parallel communicator costs about 0.6 GiB.
NCCL_BYTES: Final = 600 * MIB
NCCL_SOURCE: Final = "NCCL channel buffers: 544-688 MB per communicator measured on 4 x A100 (NVIDIA/nccl#986)"

# What the driver lets a process use of a card's memory (cudaMemGetInfo total / physical):
# H100 80GB 79.18 of 80 GiB (llm-d benchmark log "Free memory on device: 78.57/79.18 GiB"),
# RTX 3090 23.58 of 24 GiB (vllm-project/vllm#10517 "total_gpu_memory=23.58GiB").
USABLE_MEMORY_FRACTION: Final = 0.985


def usable_memory_bytes(gpu: GPU, ecc: bool | None = None) -> float:
    """What a process can allocate: USABLE_MEMORY_FRACTION of what the driver shows with ECC as set
    (`ecc` None: the card's default; GDDR datacenter cards ship with ECC on and show 1/16 less,
    specs/gpu.py GPU.visible_memory_bytes)."""
    return gpu.visible_memory_bytes(ecc) * USABLE_MEMORY_FRACTION


# vLLM (vllm/worker/worker.py determine_num_available_blocks; v1 gpu_worker.determine_available_memory):
# KV budget = total x gpu_memory_utilization - weights - profile-run activation peak - non-torch
# memory. CUDA graphs are captured after sizing; their pool (a few hundred MiB) must fit in the
# remaining (1 - utilization) share, so it is not subtracted here.
# The profile run uses max_num_batched_tokens tokens (vLLM V1 default 8192 for chunked prefill).
VLLM_PROFILE_TOKENS: Final = 8192
VLLM_BLOCK_TOKENS: Final = 16  # CacheConfig.block_size default on CUDA
# The profile run also samples max_num_seqs dummy sequences: fp32 logits, the temperature-scaled
# copy, probabilities, sorted values (4 B each) and int64 sort indices and the gathered copy
# (8 B each) = 32 B per vocabulary entry and sequence. Checked on the llm-d benchmark's logged
# peak activations (H100, vllm serve defaults): Llama-3.1-8B 4.76 GiB, Qwen3-0.6B 5.56 GiB,
# Qwen3-32B 5.64 GiB, which this term plus the 8192-token forward reproduces within 15%.
VLLM_SAMPLER_BYTES_PER_LOGIT: Final = 32.0
# vLLM V1 defaults (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults): max_num_seqs 1024 on
# cards with >= 70 GiB whose name does not contain "a100" (PR #17885: the larger defaults cost an
# A100 throughput), else 256
VLLM_MAX_NUM_SEQS_LARGE: Final = 1024
VLLM_MAX_NUM_SEQS_SMALL: Final = 256
VLLM_LARGE_GPU_BYTES: Final = 70 * 2**30
# Engines that reserve gpu_memory_utilization of the card up front and size the KV cache from what
# is left (vLLM; SGLang's mem_fraction_static), by their display names. Such an engine refuses to
# start when that budget cannot hold one sequence of max_model_len tokens (which `gpuplan launch`
# sets to input_len + output_len): vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory
# raises "No available memory for the cache blocks" for a budget <= 0 and "To serve at least one
# request with the models's max seq len (...), (... GiB KV cache is needed, which is larger than
# the available KV cache memory" when one sequence's blocks exceed it (vllm-project/vllm @001cabc).
PREALLOCATING_ENGINES: Final[dict[str, str]] = {"vllm": "vLLM", "sglang": "SGLang"}


def vllm_max_num_seqs(gpu: GPU) -> int:
    """vLLM's default max_num_seqs on this card: the most sequences one engine step schedules."""
    large = gpu.memory_bytes >= VLLM_LARGE_GPU_BYTES and "a100" not in gpu.name.lower()
    return VLLM_MAX_NUM_SEQS_LARGE if large else VLLM_MAX_NUM_SEQS_SMALL
