"""What a workload's keys imply, shared by the workload every estimator reads (`specs/workload.py`,
no pydantic) and the pydantic schema that checks input the fast reader leaves to it
(`specs/workload_schema.py`): the derived figures (data-parallel size, micro-batches, effective
dtypes) and the rules across keys (`check_consistent`), written once for both."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal

from gpuplan.errors import InvalidSettingError, did_you_mean
from gpuplan.specs.durations import parse_duration_s
from gpuplan.specs.precision import storage_format
from gpuplan.specs.workload_keys import (
    GRAPHICS_TASKS,
    TRAINING_TASKS,
    attention_name,
    lora_target_list,
    optimizer_name,
)

if TYPE_CHECKING:
    from gpuplan.specs.workload import Workload

# Host memory bandwidth a partial llama.cpp offload reads its CPU layers at, unless the workload says:
# dual-channel DDR5-5600, 2 channels x 8 bytes x 5600 MT/s = 89.6 GB/s (the JEDEC DDR5 data rate;
# a peak: sustained reads reach less, so set the figure STREAM or Intel MLC measure if you have it)
DEFAULT_HOST_MEMORY_BANDWIDTH_GBPS: Final = 89.6

# Default vLLM gpu_memory_utilization (vllm/engine/arg_utils.py: EngineArgs.gpu_memory_utilization = 0.9)
DEFAULT_GPU_MEMORY_UTILIZATION: Final = 0.9

# a cluster's size, NODESxGPUS (or GPUS alone) before its ':GPU' (specs/cluster.py reads the rest)
CLUSTER_SIZE: Final = re.compile(r"^\s*(?:(\d+)\s*[x×*]\s*)?(\d+)\s*:")


def framework_key(v: Any) -> str | None:
    """`framework`: its canonical name, or ValueError naming the known ones."""
    if v is None:
        return None
    from gpuplan.specs import frameworks  # its table loads only for a workload that names one

    key = frameworks.normalise(v)
    if key not in frameworks.names():
        hint = did_you_mean(str(key), frameworks.names())
        raise ValueError(f"must be one of {', '.join(frameworks.names())}. Got {v!r}.{hint}")
    return str(key)


def framework_filled(data: Any) -> dict[str, Any]:
    """The keys a training workload's `framework` fills where the input leaves them unset
    (specs/frameworks.py); none for no framework, an unknown one or a task that is not training."""
    if not isinstance(data, dict) or data.get("framework") is None:
        return {}
    from gpuplan.specs import frameworks

    name = frameworks.normalise(data["framework"])
    if name in frameworks.names() and data.get("task") in TRAINING_TASKS:
        return dict(frameworks.fill(name, data))
    return {}


def check_framework(w: Any) -> None:
    """What a training framework cannot run (Unsloth: one GPU; tasks, parallelism, fp8 recipes)."""
    if w.framework is not None and w.is_training:
        from gpuplan.specs import frameworks

        frameworks.check_gpus(w.framework, w.num_gpus)
        recipe = w.fp8_recipe if w.precision == "fp8" else None
        frameworks.check(w.framework, w.task, {"tp": w.tp, "pp": w.pp, "cp": w.cp}, recipe)


def numeric_gpu_alias(v: Any) -> Any:
    """`gpu: 4090` (YAML reads a number) names the card its alias names: "4090"."""
    if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 10**6:
        return str(v)
    return v


def storage_name(v: Any) -> str | None:
    """`weight_dtype` / `kv_dtype`: the storage format's canonical name (specs/precision.py)."""
    if v is None:
        return None
    try:
        return storage_format(str(v)).name
    except InvalidSettingError as exc:
        raise ValueError(str(exc).removeprefix("Unknown weight/KV dtype ")) from None


def duration_s(v: Any) -> float | None:
    """`deadline`: seconds, from a number or a duration such as '24h'."""
    return None if v is None else parse_duration_s(v)


def cluster_gpus(data: Any) -> Any:
    """A cluster (NODESxGPUS:GPU) sets num_gpus when the workload does not give it."""
    if isinstance(data, dict) and isinstance(data.get("cluster"), str) and data.get("num_gpus") is None:
        m = CLUSTER_SIZE.match(data["cluster"])
        if m:
            data = {**data, "num_gpus": int(m.group(1) or 1) * int(m.group(2))}
    return data


# each key's before-validator, as the schema runs it ahead of its type check
BEFORE: Final[dict[str, Callable[[Any], Any]]] = {
    "framework": framework_key,
    "gpu": numeric_gpu_alias,
    "optimizer": optimizer_name,
    "weight_dtype": storage_name,
    "kv_dtype": storage_name,
    "deadline": duration_s,
    "attention_impl": attention_name,
    "lora_targets": lora_target_list,
}


def check_consistent(w: Any) -> None:
    """The rules across keys; a broken one raises ValueError naming the keys (the schema's
    after-validator reports it as pydantic's error, the fast reader hands the input to the schema)."""
    if not w.model and w.task not in ("streaming", "vdi", "render"):
        raise ValueError(f"task {w.task!r} needs 'model' (e.g. model: llama-3.1-8b).")
    if w.task in TRAINING_TASKS and w.seq_len < 1:
        raise ValueError("seq_len must be at least 1 for training.")
    if w.task == "inference" and w.input_len + w.output_len < 1:
        raise ValueError("input_len + output_len must be at least 1 token for inference.")
    if w.cached_prefix_tokens is not None and w.cached_prefix_tokens > w.input_len:
        raise ValueError(
            f"cached_prefix_tokens={w.cached_prefix_tokens} is more than the prompt (input_len={w.input_len}): "
            "the cached prefix is part of each prompt; set it to at most input_len."
        )
    if w.closed_loop and (w.request_rate is not None or w.tokens is not None):
        raise ValueError(
            "closed_loop keeps batch_size requests in flight; request_rate (an open loop) and tokens (a batch "
            "job) say otherwise: drop closed_loop or the other key."
        )
    if w.num_prompts is not None and w.request_rate is None:
        raise ValueError(
            f"num_prompts={w.num_prompts} counts the prompts sent at request_rate (a benchmark's --num-prompts "
            "with --request-rate); set request_rate too, or drop num_prompts (batch_size alone sends them at once)."
        )
    mp = w.tp * w.pp * w.cp
    if w.num_gpus % mp:
        raise ValueError(f"num_gpus={w.num_gpus} must be a multiple of tp x pp x cp = {w.tp} x {w.pp} x {w.cp} = {mp}.")
    if w.ep > 1 and (w.num_gpus // w.pp) % w.ep:
        raise ValueError(
            f"ep={w.ep} must divide the GPUs of one pipeline stage ({w.num_gpus // w.pp}): experts are "
            "split across data-parallel ranks, folded over tensor/context-parallel ones (Megatron-Core)."
        )
    if w.etp is not None and w.task == "inference":
        raise ValueError(
            "etp is a training key (Megatron-Core); serving with ep > 1 splits each expert over "
            "tp x (num_gpus / (tp x pp)) / ep GPUs by itself: drop etp."
        )
    if w.etp is not None and ((w.ep == 1 and w.etp != w.tp) or (w.num_gpus // w.pp) % (w.ep * w.etp)):
        raise ValueError(
            f"etp={w.etp} with ep={w.ep}: expert tensor parallelism needs ep > 1 (or etp = tp) and ep x etp "
            f"must divide the GPUs of one pipeline stage ({w.num_gpus // w.pp}) (Megatron-Core MoE parallel folding)."
        )
    if w.tp_comm_overlap and not (w.sequence_parallel and w.tp > 1):
        raise ValueError("tp_comm_overlap needs tp > 1 with sequence_parallel: true (Megatron-Core requires both).")
    if w.vp > 1 and w.pp == 1:
        raise ValueError("vp (interleaved virtual stages) needs pipeline parallelism: set pp >= 2.")
    if w.global_batch is not None and w.is_training:
        per_step = w.batch_size * (w.num_gpus // mp)
        if w.global_batch % per_step:
            raise ValueError(
                f"global_batch={w.global_batch} must be a multiple of batch_size x data-parallel size "
                f"= {w.batch_size} x {w.num_gpus // mp} = {per_step}."
            )
    if w.epochs and w.dataset_tokens and w.epochs * w.dataset_tokens < 1:
        raise ValueError(f"epochs x dataset_tokens = {w.epochs:g} x {w.dataset_tokens:g} is less than one token.")
    if w.offload != "none" and w.zero == 0 and w.task in TRAINING_TASKS:
        # ZeRO-Offload needs ZeRO (DeepSpeed: offload_optimizer requires stage >= 1; params stage 3)
        raise ValueError(f"offload={w.offload!r} needs ZeRO: set zero: 1-3 for optimizer offload, 3 for parameters.")
    if w.offload == "optimizer+params" and w.zero != 3 and w.task in TRAINING_TASKS:
        raise ValueError("offload='optimizer+params' needs zero: 3 (DeepSpeed offload_param is ZeRO-3 only).")


class WorkloadDerived:
    """The figures a workload's keys imply (mixed into both workload classes)."""

    if TYPE_CHECKING:  # the schema's keys and types (tests/test_workload_fast.py keeps them equal)
        model: str
        task: Literal["pretrain", "finetune", "lora", "qlora", "inference", "streaming", "vdi", "render", "ai-video"]
        precision: Literal["fp32", "tf32", "fp16", "bf16", "fp8"]
        gpu: str | None
        num_gpus: int
        batch_size: int
        seq_len: int
        grad_accum: int
        optimizer: str
        activation_checkpointing: Literal["none", "selective", "selective-op", "full"]
        zero: int
        tp: int
        pp: int
        sequence_parallel: bool
        cp: int
        ep: int
        etp: int | None
        vp: int
        tp_comm_overlap: bool
        global_batch: int | None
        cluster: str | None
        lora_rank: int
        lora_dropout: float
        lora_alpha: int | None
        input_len: int
        output_len: int
        weight_dtype: str | None
        qlora_kernel: Literal["bitsandbytes", "torchao"]
        fp8_recipe: Literal["delayed", "tensorwise", "rowwise", "rowwise_with_gw_hp"]
        kv_dtype: str | None
        tokens: float | None
        master_weights: Literal["fp32", "none"]
        objective: Literal["time", "cost", "energy"]
        deadline: float | None
        budget: float | None
        offload: Literal["none", "optimizer", "optimizer+params"]
        lora_targets: str | list[str]
        attention_impl: Literal["flash", "fa3", "eager"]
        loss_impl: Literal["upcast", "chunked", "fused"]
        activation_offloading: bool
        compile: bool
        channels_last: bool
        optimizer_in_backward: bool
        grads_set_to_none: bool
        sharding: Literal["fsdp", "deepspeed"]
        fsdp_wrap: Literal["layer", "adapters"]
        fsdp_no_sync: bool
        nvlink: bool
        cuda_lazy_loading: bool
        ecc: bool | None
        gpu_memory_utilization: float
        resolution: str | None
        fps: float | None
        streams: int | None
        users: int | None
        frames: int | None
        scene: Literal["light", "medium", "heavy", "ultra"]
        codec: Literal["h264", "hevc", "av1"]
        persona: Literal["knowledge", "knowledge-multi", "light", "medium", "heavy"]
        spp: int
        encode_output: bool
        datacenter: bool
        have: str | dict[str, int] | None
        engine: Literal[
            "vllm", "tensorrt-llm", "sglang", "transformers", "llama.cpp", "mlc", "tgi", "ollama", "autoawq"
        ]
        awq_version: Literal["gemm", "gemv"] | None
        enforce_eager: bool
        max_tpot_ms: float | None
        max_ttft_ms: float | None
        epochs: float | None
        dataset_tokens: float | None
        framework: str | None
        cache_implementation: Literal["dynamic", "static"] | None
        gpu_layers: int | None
        host_memory_bandwidth: float | None
        num_ctx: int | None
        request_rate: float | None
        input_len_p90: int | None
        output_len_p90: int | None
        cached_prefix_tokens: int | None
        closed_loop: bool | None
        num_prompts: int | None

    @property
    def is_training(self) -> bool:
        return self.task in TRAINING_TASKS

    @property
    def is_graphics(self) -> bool:
        return self.task in GRAPHICS_TASKS

    @property
    def dp(self) -> int:
        """Data-parallel degree: GPUs left after tensor, pipeline and context parallelism."""
        return self.num_gpus // (self.tp * self.pp * self.cp)

    @property
    def expert_tp(self) -> int:
        """GPUs each expert's GEMMs are split over in training: `etp` as set, else Megatron-Core's
        default (tp), and 1 where the expert group is folded over the tensor-parallel ranks because
        ep exceeds the data- x context-parallel ranks (MoE parallel folding: ep x etp must fit in
        the GPUs of a stage)."""
        if self.etp is not None:
            return self.etp
        return 1 if self.ep > self.dp * self.cp else self.tp

    @property
    def micro_batches(self) -> int:
        """Micro-batches per optimizer step on each data-parallel rank: from global_batch when set,
        else grad_accum."""
        if self.global_batch is not None:
            return max(self.global_batch // (self.batch_size * self.dp), 1)
        return self.grad_accum

    @property
    def train_tokens(self) -> float | None:
        """Tokens the training job runs over: `tokens`, or epochs x dataset_tokens (None if neither)."""
        if self.tokens:
            return self.tokens
        if self.epochs and self.dataset_tokens:
            return self.epochs * self.dataset_tokens
        return None

    @property
    def effective_weight_dtype(self) -> str:
        if self.weight_dtype is not None:
            return self.weight_dtype
        if self.task == "qlora":
            return "nf4"
        if self.task == "inference" and self.engine in ("ollama", "autoawq"):
            # Ollama's library tags default to Q4_K_M (estimators/engines.py); AutoAWQ runs AWQ only
            return "q4_k_m" if self.engine == "ollama" else "awq"
        return "fp32" if self.precision == "tf32" else self.precision

    @property
    def effective_lora_alpha(self) -> int:
        """The LoRA alpha the launch files write: `lora_alpha`, else 2 x lora_rank (LLaMA-Factory's default)."""
        return self.lora_alpha if self.lora_alpha is not None else 2 * self.lora_rank

    @property
    def host_bandwidth_gbps(self) -> float:
        """The host memory bandwidth (GB/s) a partial offload reads its CPU layers at."""
        return self.host_memory_bandwidth or DEFAULT_HOST_MEMORY_BANDWIDTH_GBPS

    @property
    def effective_kv_dtype(self) -> str:
        if self.kv_dtype is not None:
            return self.kv_dtype
        return "fp32" if self.precision == "tf32" else self.precision

    def with_(self, **changes: Any) -> Workload:
        """A copy with some keys changed, validated again; keys the user never set stay unset."""
        from gpuplan.specs.workload import make_workload

        data = self.model_dump(exclude_unset=True)  # type: ignore[attr-defined]
        data.update(changes)
        return make_workload(data)
