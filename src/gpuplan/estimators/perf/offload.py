"""llama.cpp / Ollama partial GPU offload (`gpu_layers`, llama.cpp's -ngl): a step's operators as
they run when only some layers sit on the GPU (estimators/engines.py says which).

Decode is a stream of weight and KV reads: the GPU's share of the layers (and the output layer,
which -ngl puts there first) runs as before, at the GPU's bandwidth; the host's layers and their KV
are read by the CPU at the host's memory bandwidth (`host_memory_bandwidth`), one after the other (llama.cpp evaluates the
graph's splits in order), so a token takes bytes_gpu / bw_gpu + bytes_cpu / bw_cpu. A prompt of at
least 32 tokens runs every layer on the GPU instead and copies the host layers' weights over PCIe
once per 512-token micro-batch (ggml-cuda's op offload; engines.LLAMA_CPP_UBATCH). CPU arithmetic
is not modelled: a decode step's CPU part is bandwidth-bound (~2 FLOPs per byte of 4-bit weights).
"""

from __future__ import annotations

import math

from gpuplan.estimators import comm, engines
from gpuplan.estimators.perf.ops import Ctx, Op

GB = 1e9


def host_weight_bytes(c: Ctx, off: engines.Offload) -> float:
    """Weights a prompt's matmuls copy to the GPU: the host's share of the layers and the output
    layer when it is there (the embeddings are a row lookup, GET_ROWS, which ggml-cuda does not
    offload)."""
    block, output, _ = engines.split_weight_bytes(c.model, c.w)
    return block * (1.0 - off.gpu_share) + (0.0 if off.head_on_gpu else output)


def _on_cpu(c: Ctx, ops: list[Op], phase: str, off: engines.Offload) -> list[Op]:
    """The GPU keeps its share of each layer's work; the host's share and the output layer become
    one memory-bound CPU operator at the host's bandwidth."""
    share = off.gpu_share
    out: list[Op] = []
    cpu_bytes = cpu_flops = 0.0
    for o in ops:
        if o.phase in ("launch", "communication"):
            out.append(o)
        elif o.name.startswith("linear lm_head"):  # the output layer: on the GPU from -ngl 1 on
            if off.head_on_gpu:
                out.append(o)
            else:
                cpu_bytes += o.bytes
                cpu_flops += o.flops
        else:
            out.append(Op(o.name, o.phase, o.flops * share, o.bytes * share, o.time_s * share, o.bound))
            cpu_bytes += o.bytes * (1.0 - share)
            cpu_flops += o.flops * (1.0 - share)
    host_bw = c.w.host_bandwidth_gbps * GB
    output = "" if off.head_on_gpu else " + output layer"
    name = f"CPU: {off.cpu_layers} host layers{output} at {c.w.host_bandwidth_gbps:g} GB/s host memory"
    out.append(Op(name, phase, cpu_flops, cpu_bytes, cpu_bytes / host_bw, "memory"))
    return out


def offload_step(c: Ctx, ops: list[Op], phase: str, tokens: float, off: engines.Offload) -> list[Op]:
    """A step's `ops` (computed as if every layer sat on the GPU) under the partial offload `off`;
    `tokens` is what the step processes (all sequences together)."""
    if phase == "prefill" and tokens >= engines.GGML_CUDA_OFFLOAD_MIN_BATCH:
        ubatches = math.ceil(tokens / engines.LLAMA_CPP_UBATCH)
        nbytes = host_weight_bytes(c, off) * ubatches
        link = comm.host_link_bandwidth(c.gpu)
        copy = Op(f"host layers' weights over PCIe ({ubatches} x 512-token micro-batches)", phase, 0.0, nbytes,
                  nbytes / link, "memory")  # fmt: skip
        return [*ops, copy]
    return _on_cpu(c, ops, phase, off)
