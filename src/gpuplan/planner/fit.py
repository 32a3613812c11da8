"""Will it fit, and if not, what makes it fit: GPU counts, inverse questions and suggestions.

All answers come from re-running the memory estimator on changed workloads; nothing is
tabulated. Per-GPU memory is monotone in batch size and context length (more tokens keep more
activations and KV cache), so the largest batch and the longest context are found by bisection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import runtime
from gpuplan.estimators.engines import LAYER_SPLIT_ENGINES
from gpuplan.estimators.memory import MemoryEstimate
from gpuplan.planner.screening import NOT_SHARED, Candidates, first_fit, memory, with_changes
from gpuplan.specs.cluster import GPUS_PER_NODE
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload

# GPU counts tried when looking for the smallest that fits: one node's worth in powers of two,
# then whole 8-GPU nodes (what clusters and clouds rent)
GPU_COUNTS: Final = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

# Weight formats from least to most quality loss (llama.cpp perplexity tables and the GPTQ/AWQ
# papers rank 8-bit as near-lossless, 4-bit grouped formats next, 3- and 2-bit last).
WEIGHT_LADDER: Final = ("bf16", "fp8", "int8", "q8_0", "awq", "gptq", "q5_k_m", "q4_k_m", "nf4", "q3_k_m", "q2_k")
KV_LADDER: Final = ("bf16", "fp8")


def _estimate(model: ModelSpec, w: Workload, gpu: GPU) -> MemoryEstimate | None:
    try:
        return memory(model, w, gpu)  # shared across GPU types within screening.shared_estimates()
    except InvalidSettingError:
        return None


def _fits(e: MemoryEstimate | None) -> bool:
    return e is not None and bool(e.fits)


@dataclass(frozen=True)
class GpuCount:
    gpu: GPU
    num_gpus: int | None  # None: no count up to the largest tried fits
    layout: dict[str, Any]  # the keys changed to make N GPUs help (zero / tp)
    estimate: MemoryEstimate | None  # at that count


def tp_limit(gpu: GPU) -> int | None:
    """The widest tensor parallelism offered on `gpu`: a card meant for one host (catalog
    `multi_node: no`, no scale-out fabric) keeps it inside one node (GPUS_PER_NODE), as vLLM's
    distributed-serving guide sets tensor parallelism to the GPUs per node and pipelines across
    nodes; None: no limit (a scale-out card)."""
    return None if gpu.multi_node else max(GPUS_PER_NODE, gpu.nvlink_domain)


# Accelerate's big-model dispatch places whole decoder layers on each GPU and runs them in turn
# (naive pipeline: one GPU busy at a time): transformers' from_pretrained(device_map="auto") and
# AutoAWQ's from_quantized, whose device_map defaults to "balanced" (casper-hansen/AutoAWQ@93d7e8e0
# awq/models/base.py: load_checkpoint_and_dispatch with no_split_module_classes=[its layer type]).
# AutoAWQ has no tensor parallelism; transformers' tp_plan="auto" needs a torchrun launch, which is
# not how generate() is run day to day. Modelled as llama.cpp's split is: stages run in turn.
DEVICE_MAP_ENGINES: Final = ("transformers", "autoawq")
SPLIT_ENGINES: Final = LAYER_SPLIT_ENGINES + DEVICE_MAP_ENGINES


def serving_layout(model: ModelSpec, w: Workload, n: int, gpu: GPU | None = None) -> dict[str, Any] | None:
    """How the workload's engine spreads the model over n GPUs: whole layers run in turn where it
    splits by layer (SPLIT_ENGINES), else tensor parallelism (inference_layout)."""
    if w.engine in SPLIT_ENGINES:
        if n == 1:
            return {"num_gpus": 1, "tp": 1, "pp": 1}
        return {"num_gpus": n, "tp": 1, "pp": n} if model.num_layers >= n else None
    return inference_layout(model, n, gpu)


def inference_layout(model: ModelSpec, n: int, gpu: GPU | None) -> dict[str, Any] | None:
    """Tensor parallelism over n GPUs (pipeline stages where the heads do not split), with the
    tensor-parallel group kept inside one node on one-host cards (pipeline stages across nodes)."""
    cap = tp_limit(gpu) if gpu is not None else None
    if cap is None or n <= cap:
        if model.tp_splits_heads(n):
            return {"num_gpus": n, "tp": n, "pp": 1}
        return {"num_gpus": n, "tp": 1, "pp": n} if model.num_layers >= n else None
    tp = next((t for t in range(cap, 0, -1) if n % t == 0 and model.tp_splits_heads(t)), 1)
    return {"num_gpus": n, "tp": tp, "pp": n // tp} if model.num_layers >= n // tp else None


def _layouts(model: ModelSpec, w: Workload, n: int, gpu: GPU | None = None) -> Iterable[dict[str, Any]]:
    """Ways of spreading the workload over n GPUs that reduce per-GPU memory."""
    if n == w.num_gpus:
        yield {}
    if w.is_training:
        yield {"num_gpus": n, "zero": 3 if n > 1 else w.zero, "tp": 1, "pp": 1}
        if n > 1 and w.zero < 3:
            yield {"num_gpus": n, "tp": 1, "pp": 1}
    elif w.engine in SPLIT_ENGINES:  # whole layers over the GPUs (llama.cpp -sm layer, Accelerate's device_map)
        if n > 1 and model.num_layers >= n:
            yield {"num_gpus": n, "tp": 1, "pp": n}
    else:
        layout = inference_layout(model, n, gpu)
        if layout is not None:
            yield layout


def smallest_gpu_count(
    model: ModelSpec, w: Workload, gpu: GPU, counts: Iterable[int] = GPU_COUNTS, candidates: Candidates | None = None
) -> GpuCount:
    """The fewest GPUs of type `gpu` on which the workload fits (ZeRO-3 for training, tensor
    parallelism for inference), with the estimate at that count. `candidates`: the layouts'
    workloads validated once for every GPU of a fit table (planner/screening.py)."""

    def changed(change: Mapping[str, Any]) -> Workload:
        return candidates.changed(w, dict(change)) if candidates else with_changes(w, change)

    tries = [(n, change) for n in counts for change in _layouts(model, w, n, gpu)]
    # a training job: every GPU type's walk compares the same shared estimates (screening.first_fit)
    first = first_fit(model, w, gpu, [c for _, c in tries], changed)
    if first != NOT_SHARED:
        if first is None:
            return GpuCount(gpu, None, {}, None)
        tries = tries[first:]  # the walk below then finds it at once, as the full walk would
    for n, change in tries:
        try:
            cand = changed(change) if change else w
        except InvalidSettingError:
            continue
        e = _estimate(model, cand, gpu)
        if _fits(e):
            return GpuCount(gpu, n, change, e)
    return GpuCount(gpu, None, {}, None)


def _bisect(lo_ok: int, hi: int, ok: Any) -> int:
    """Largest x in [lo_ok, hi] with ok(x), given ok(lo_ok)."""
    lo = lo_ok
    if ok(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def largest_batch(model: ModelSpec, w: Workload, gpu: GPU, limit: int = 1 << 16) -> int:
    """The largest per-GPU batch that fits (0 if not even 1 does); a paged-KV engine's (vLLM,
    SGLang): the sequences its pool holds at once, since more queue rather than miss."""

    def ok(b: int) -> bool:
        return _fits(_estimate(model, w.with_(batch_size=b), gpu))

    if not ok(1):
        return 0
    one = _estimate(model, w.with_(batch_size=1), gpu)
    if one is not None and one.serving is not None and one.serving.engine is not None:
        return one.serving.max_sequences
    return _bisect(1, limit, ok)


def longest_context(model: ModelSpec, w: Workload, gpu: GPU) -> int:
    """The longest sequence (training) or input + output (inference) that fits, in tokens."""
    cap = model.max_position_embeddings or 131072
    cap = max(cap, 1)

    if w.is_training:

        def ok(n: int) -> bool:
            return _fits(_estimate(model, w.with_(seq_len=n), gpu))
    else:
        share = w.input_len / max(w.input_len + w.output_len, 1)

        def ok(n: int) -> bool:
            i = max(int(n * share), 1 if share else 0)
            return _fits(_estimate(model, w.with_(input_len=i, output_len=max(n - i, 0)), gpu))

    if not ok(1):
        return 0
    return _bisect(1, cap, ok)


def best_precision(model: ModelSpec, w: Workload, gpu: GPU) -> tuple[str, str] | None:
    """Inference: the (weight, KV) formats with least quality loss that fit, or None."""
    for wf in WEIGHT_LADDER:
        for kf in KV_LADDER:
            e = _estimate(model, w.with_(weight_dtype=wf, kv_dtype=kf), gpu)
            if _fits(e):
                return wf, kf
    return None


@dataclass(frozen=True)
class Suggestion:
    label: str
    change: dict[str, Any]
    per_gpu_bytes: float
    fits: bool
    cost: str  # what it costs in speed or quality


def training_candidates(w: Workload) -> list[tuple[str, dict[str, Any], str]]:
    c: list[tuple[str, dict[str, Any], str]] = []
    if w.activation_checkpointing != "full":
        c.append(("full activation checkpointing", {"activation_checkpointing": "full"}, "about +33% compute"))
    if w.loss_impl != "fused":
        c.append(("fused linear cross-entropy (Liger)", {"loss_impl": "fused"}, "none"))
    if w.batch_size > 1:
        c.append(
            (
                f"batch 1 x grad_accum {w.batch_size * w.grad_accum}",
                {"batch_size": 1, "grad_accum": w.batch_size * w.grad_accum},
                "lower GPU utilisation",
            )
        )
    if w.optimizer in ("adamw", "adam", "adamw-foreach", "paged-adamw"):
        c.append(("8-bit AdamW", {"optimizer": "adamw-8bit"}, "none measurable (Dettmers et al. 2022)"))
    full = w.task in ("pretrain", "finetune")
    if full and w.num_gpus == 1 and w.optimizer in ("adamw", "adam", "adamw-foreach", "adamw-8bit", "paged-adamw"):
        # torchtune's single-GPU full fine-tune recipes: the states the card cannot hold wait in
        # host RAM (bitsandbytes PagedAdamW8bit)
        c.append(
            ("paged 8-bit AdamW", {"optimizer": "paged-adamw-8bit"}, "states beyond the card cross PCIe each step")
        )
    c += _sharded_candidates(w)
    if w.task == "finetune":  # adapters train other weights: never a fix for pretraining (QA #3)
        c.append(("LoRA", {"task": "lora"}, "adapts fewer weights"))
        c.append(("QLoRA (NF4 base)", {"task": "qlora", "activation_checkpointing": "full"}, "slower matmuls"))
    elif w.task == "lora":
        c.append(("QLoRA (NF4 base)", {"task": "qlora"}, "slower matmuls"))
    if w.zero < 3:
        for n in (2, 4, 8):
            if n > w.num_gpus:
                c.append((f"ZeRO-3 / FSDP on {n} GPUs", {"num_gpus": n, "zero": 3, "tp": 1, "pp": 1}, f"{n} GPUs"))
    if w.offload == "none":
        zero = max(w.zero, 1)
        c.append(("CPU offload of optimizer states", {"offload": "optimizer", "zero": zero}, "slower steps"))
    return c


def _sharded_candidates(w: Workload) -> list[tuple[str, dict[str, Any], str]]:
    """On the job's own GPUs (more than one): ZeRO-3 / FSDP, then with full activation checkpointing,
    then with the optimizer states offloaded to host RAM (DeepSpeed ZeRO-Offload), cumulatively."""
    if w.num_gpus < 2 or w.zero >= 3:
        return []
    out: list[tuple[str, dict[str, Any], str]] = []
    change: dict[str, Any] = {"zero": 3}
    label = f"ZeRO-3 / FSDP over the {w.num_gpus} GPUs"
    out.append((label, dict(change), "more communication per step"))
    if w.activation_checkpointing != "full":
        change["activation_checkpointing"] = "full"
        label += " + full activation checkpointing"
        out.append((label, dict(change), "more communication, about +33% compute"))
    if w.offload == "none":
        change["offload"] = "optimizer"
        label += " + CPU offload of optimizer states"
        out.append((label, dict(change), "slower steps: the optimizer runs on the CPU"))
    return out


# A preallocating engine (vLLM, SGLang) may take more of the card for its KV cache: vLLM's docs
# (configuration/conserving_memory) suggest raising gpu_memory_utilization when the cache is short;
# 0.95 still leaves 5% for CUDA graphs (captured after sizing) and other processes.
RAISED_GPU_MEMORY_UTILIZATION: Final = 0.95


def _split_how(w: Workload) -> str:
    if w.engine in DEVICE_MAP_ENGINES:
        return "Accelerate's device_map, layers run in turn"
    return "-sm layer" if w.engine == "llama.cpp" else "Ollama's layer split"


def inference_candidates(w: Workload) -> list[tuple[str, dict[str, Any], str]]:
    c: list[tuple[str, dict[str, Any], str]] = []
    if w.num_gpus > 1 and w.tp * w.pp < w.num_gpus and w.engine in SPLIT_ENGINES:
        c.append(
            (f"layers split over the {w.num_gpus} GPUs ({_split_how(w)})", {"tp": 1, "pp": w.num_gpus}, "same GPUs")
        )
    elif w.num_gpus > 1 and w.tp * w.pp < w.num_gpus:  # replicas that each hold the whole model: shard it instead
        c.append((f"tensor parallel over the {w.num_gpus} GPUs", {"tp": w.num_gpus, "pp": 1}, "same GPUs"))
    if w.engine in runtime.PREALLOCATING_ENGINES and w.gpu_memory_utilization < RAISED_GPU_MEMORY_UTILIZATION:
        u = RAISED_GPU_MEMORY_UTILIZATION
        c.append((f"gpu_memory_utilization {u:g}", {"gpu_memory_utilization": u}, "less room for CUDA graphs"))
    if w.engine == "autoawq":
        # AutoAWQ's fused WindowedCache is fp16 (no fp8 KV); its size is from_quantized's max_seq_len (num_ctx)
        need = w.input_len + w.output_len
        if w.num_ctx is None or w.num_ctx > need:
            c.append((f"a {need:,}-token fused cache", {"num_ctx": need}, "max_seq_len set to the job's length"))
    elif w.effective_kv_dtype not in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        c.append(("fp8 KV cache", {"kv_dtype": "fp8"}, "small quality loss"))
    for wf, cost in (("int8", "near-lossless"), ("awq", "4-bit: small quality loss"), ("q4_k_m", "4-bit GGUF")):
        if wf != w.effective_weight_dtype:
            c.append((f"{wf} weights", {"weight_dtype": wf}, cost))
    if w.batch_size > 1:
        c.append((f"batch {max(w.batch_size // 2, 1)}", {"batch_size": max(w.batch_size // 2, 1)}, "lower throughput"))
    for n in (2, 4, 8):
        if n > w.num_gpus and w.engine in SPLIT_ENGINES:
            c.append((f"layers split over {n} GPUs ({_split_how(w)})", {"num_gpus": n, "tp": 1, "pp": n}, f"{n} GPUs"))
        elif n > w.num_gpus:
            c.append((f"tensor parallel on {n} GPUs", {"num_gpus": n, "tp": n, "pp": 1}, f"{n} GPUs"))
    return c


def suggestions(model: ModelSpec, w: Workload, gpu: GPU, limit: int = 6) -> list[Suggestion]:
    """Changes that lower per-GPU memory, with their effect, fitting ones first (then by size)."""
    base = _estimate(model, w, gpu)
    base_bytes = base.on_card_bytes if base else float("inf")
    out: list[Suggestion] = []
    cands = training_candidates(w) if w.is_training else inference_candidates(w)
    for label, change, cost in cands:
        try:
            cand = w.with_(**change)
        except InvalidSettingError:
            continue
        e = _estimate(model, cand, gpu)
        if e is None or e.on_card_bytes >= base_bytes * 0.999:
            continue
        out.append(Suggestion(label, change, e.on_card_bytes, bool(e.fits), cost))
    order = {id(s): i for i, s in enumerate(out)}
    out.sort(key=lambda s: (not s.fits, order[id(s)] if s.fits else s.per_gpu_bytes))
    return out[:limit]
