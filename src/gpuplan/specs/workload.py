"""A workload: what the user wants to run, read from a workload YAML file or from CLI flags.

Keys and defaults are documented in docs/workload.md (generated from this model); the extra keys (optimizer variants,
offload, LoRA targets, attention kernel, loss, serving) say what the estimators must know to be
exact. Values are validated here, once, with one clear message per bad key; the estimators can
then trust them. YAML is read with the bounded safe loader of gpuplan.safeio only.
The name tables (tasks, optimizer / attention / LoRA-target names) and the per-task key scopes
(check_keys_apply) live in specs/workload_keys.py; this module re-exports them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, field_validator, model_validator

from gpuplan._lazy import build_without_plugins
from gpuplan.errors import InvalidSettingError, did_you_mean
from gpuplan.safeio import MAX_TABLE_BYTES, MAX_YAML_BYTES, check_numbers, load_yaml, read_capped, whole_number
from gpuplan.specs import frameworks
from gpuplan.specs.durations import parse_duration_s
from gpuplan.specs.precision import storage_format
from gpuplan.specs.workload_keys import ADAPTER_ONLY as ADAPTER_ONLY
from gpuplan.specs.workload_keys import CHECKPOINTING as CHECKPOINTING
from gpuplan.specs.workload_keys import ENGINE_ONLY as ENGINE_ONLY
from gpuplan.specs.workload_keys import GRAPHICS_ONLY as GRAPHICS_ONLY
from gpuplan.specs.workload_keys import GRAPHICS_TASKS as GRAPHICS_TASKS
from gpuplan.specs.workload_keys import INFERENCE_ONLY as INFERENCE_ONLY
from gpuplan.specs.workload_keys import LLM_TASKS as LLM_TASKS
from gpuplan.specs.workload_keys import OPTIMIZERS as OPTIMIZERS
from gpuplan.specs.workload_keys import TRAINING_ONLY as TRAINING_ONLY
from gpuplan.specs.workload_keys import TRAINING_TASKS as TRAINING_TASKS
from gpuplan.specs.workload_keys import attention_name, lora_target_list, optimizer_name
from gpuplan.specs.workload_keys import check_keys_apply as check_keys_apply

# Host memory bandwidth a partial llama.cpp offload reads its CPU layers at, unless the workload says:
# dual-channel DDR5-5600, 2 channels x 8 bytes x 5600 MT/s = 89.6 GB/s (the JEDEC DDR5 data rate;
# a peak: sustained reads reach less, so set the figure STREAM or Intel MLC measure if you have it)
DEFAULT_HOST_MEMORY_BANDWIDTH_GBPS: Final = 89.6

# Default vLLM gpu_memory_utilization (vllm/engine/arg_utils.py: EngineArgs.gpu_memory_utilization = 0.9)
DEFAULT_GPU_MEMORY_UTILIZATION: Final = 0.9

Engine = Literal["vllm", "tensorrt-llm", "sglang", "transformers", "llama.cpp", "mlc", "tgi", "ollama", "autoawq"]


class Workload(BaseModel):
    """One workload (its keys: docs/workload.md). Sizes are per GPU: `batch_size` is the per-GPU micro-batch."""

    # built just below the class, with pydantic's plugins off (gpuplan._lazy.build_without_plugins)
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, defer_build=True)

    model: str = ""  # required except for streaming, vdi and render
    task: Literal["pretrain", "finetune", "lora", "qlora", "inference", "streaming", "vdi", "render", "ai-video"] = (
        "inference"
    )
    precision: Literal["fp32", "tf32", "fp16", "bf16", "fp8"] = "bf16"
    gpu: str | None = None
    num_gpus: int = Field(1, ge=1, le=100_000)
    batch_size: int = Field(1, ge=1, le=1_000_000)
    seq_len: int = Field(2048, ge=1, le=10_000_000)
    grad_accum: int = Field(1, ge=1, le=1_000_000)
    optimizer: str = "adamw"
    activation_checkpointing: Literal["none", "selective", "selective-op", "full"] = "none"
    zero: int = Field(0, ge=0, le=3)
    tp: int = Field(1, ge=1, le=1024)
    pp: int = Field(1, ge=1, le=1024)
    sequence_parallel: bool = False  # Megatron sequence parallelism alongside tp
    # --- parallelism beyond tp/pp ------------------------------------------------------------
    cp: int = Field(1, ge=1, le=1024)  # context parallelism: each sequence split over cp GPUs (ring attention)
    ep: int = Field(1, ge=1, le=1024)  # expert parallelism (MoE): experts split over ep data-parallel ranks
    # expert tensor parallelism (Megatron-Core --expert-tensor-parallel-size): each expert's GEMMs split
    # over etp ranks; unset, Megatron-Core's default (etp = tp), folded to 1 where ep spans TP ranks
    etp: int | None = Field(None, ge=1, le=1024)
    vp: int = Field(1, ge=1, le=128)  # interleaved pipeline: virtual stages (model chunks) per GPU
    # Megatron-Core --tp-comm-overlap (Transformer Engine userbuffers, with sequence parallelism):
    # tensor-parallel collectives split into chunks that overlap the GEMMs around them
    tp_comm_overlap: bool = False
    # sequences per optimizer step, all GPUs together; sets the micro-batches per step
    # (grad_accum = global_batch / (batch_size x data-parallel size))
    global_batch: int | None = Field(None, ge=1, le=100_000_000)
    # where it runs: NODESxGPUS:GPU[:INTERCONNECT], e.g. 16x8:H100 or 2x8:A100:roce (sets gpu, num_gpus)
    cluster: str | None = None
    lora_rank: int = Field(8, ge=1, le=65_536)
    lora_dropout: float = Field(0.0, ge=0, lt=1)  # PEFT LoraConfig default 0.0
    # LoRA's alpha (the adapter's update is scaled by alpha / r); unset: 2 x lora_rank, LLaMA-Factory's
    # default (hparams/finetuning_args.py: lora_alpha = lora_alpha or lora_rank * 2). An int, as PEFT's
    # LoraConfig, TRL, Axolotl, LLaMA-Factory and fsdp_qlora's train.py type it. The estimate does not read it.
    lora_alpha: int | None = Field(None, gt=0, le=1_000_000)
    input_len: int = Field(128, ge=0, le=10_000_000)
    output_len: int = Field(128, ge=0, le=10_000_000)
    weight_dtype: str | None = None  # inference weights; default: the compute precision
    # QLoRA's 4-bit linear: bitsandbytes keeps each frozen linear's input, torchao (torchtune) none
    qlora_kernel: Literal["bitsandbytes", "torchao"] = "bitsandbytes"
    # fp8 training's scaling: Transformer Engine's delayed scaling (casts fused into its kernels) or
    # torchao.float8's dynamic recipes, which cast in kernels of their own (estimators/perf/training.py)
    fp8_recipe: Literal["delayed", "tensorwise", "rowwise", "rowwise_with_gw_hp"] = "delayed"
    kv_dtype: str | None = None  # KV cache; default: the compute precision
    tokens: float | None = Field(None, ge=1, le=1e18)  # a count of tokens
    master_weights: Literal["fp32", "none"] = "fp32"
    objective: Literal["time", "cost", "energy"] = "time"
    # seconds (YAML may say '24h'): the schema says so, for the web API's OpenAPI document
    deadline: Annotated[
        float | None, WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}, {"type": "null"}]})
    ] = None
    budget: float | None = Field(None, gt=0, le=1e12)  # USD; a trillion is beyond any job

    # --- more keys, with defaults that match what people usually run ---------------------------
    # CPU offload of optimizer states (ZeRO-Offload) and of parameters too (ZeRO-Infinity / FSDP)
    offload: Literal["none", "optimizer", "optimizer+params"] = "none"
    # LoRA target modules: "default" (PEFT's per-family defaults), "all-linear", or a list of names
    lora_targets: str | list[str] = "default"
    # attention kernel: "flash" is the FlashAttention the stack ships (FA2 in PyTorch stacks: SDPA,
    # flash-attn 2; the serving engines' Hopper kernels under vllm, tensorrt-llm and sglang), "fa3"
    # a Hopper-native one in training too (FlashAttention-3, cuDNN fused attention in Transformer
    # Engine: NeMo, Megatron-LM), "eager" the materialised softmax; only eager keeps s^2 scores
    attention_impl: Literal["flash", "fa3", "eager"] = "flash"
    # how the loss sees the logits: upcast (transformers: logits.float()), chunked (torchtune's
    # CEWithChunkedOutputLoss), fused (Liger / compiled CE: no full-vocabulary tensors kept)
    loss_impl: Literal["upcast", "chunked", "fused"] = "upcast"
    activation_offloading: bool = False  # checkpointed activations moved to host (torchtune)
    compile: bool = False  # torch.compile: fuses the chunked loss's fp32 upcast (torchtune)
    # CNNs: activations in channels-last (NHWC) memory, as tensor-core convolutions read them
    # (model.to(memory_format=torch.channels_last), DeepLearningExamples' AMP configs, TensorFlow's
    # layout); false is PyTorch's default NCHW, for which cuDNN transposes around every fp16/bf16
    # convolution
    channels_last: bool = True
    # optimizer step fused into backward (torchtune optimizer_in_bwd): each gradient is applied
    # and freed as it arrives, so no full gradient buffer exists
    optimizer_in_backward: bool = False
    # PyTorch >= 2.0 frees gradients in zero_grad (set_to_none=True); older code zeroes them in place,
    # so they stay allocated through the next forward pass
    grads_set_to_none: bool = True
    # ZeRO-3 implementation: FSDP gathers one wrapped unit at a time (plus one prefetched);
    # DeepSpeed keeps up to stage3_max_live_parameters gathered
    sharding: Literal["fsdp", "deepspeed"] = "fsdp"
    # FSDP units under LoRA: one per block ("layer"), or PEFT's fsdp_auto_wrap_policy that makes each
    # adapter its own unit inside its block's ("adapters": accelerate + PEFT, fsdp_qlora)
    fsdp_wrap: Literal["layer", "adapters"] = "layer"
    fsdp_no_sync: bool = False  # accumulation under FSDP no_sync: full unsharded gradients (memory/training.py)
    nvlink: bool = True  # false: the cards' NVLink (bridge) is absent; they talk over PCIe
    # CUDA >= 11.7 loads kernels lazily (PyTorch's default since 1.13); false for older stacks
    cuda_lazy_loading: bool = True
    # ECC on the card's memory: None = as the card ships (on for datacenter GDDR cards, which then
    # show 1/16 less memory; specs/gpu.py GPU.visible_memory_bytes), false = switched off (full capacity)
    ecc: bool | None = None
    # serving view (vLLM): share of GPU memory the engine may use
    gpu_memory_utilization: float = Field(DEFAULT_GPU_MEMORY_UTILIZATION, gt=0, le=1)
    # graphics workloads: kept here so one file describes any job
    resolution: str | None = None  # 720p | 1080p | 1440p | 4k
    fps: float | None = Field(None, ge=1, le=1000)  # frames per second
    streams: int | None = Field(None, ge=1, le=1_000_000)  # streaming / ai-video: concurrent streams
    users: int | None = Field(None, ge=1, le=1_000_000)  # vdi: concurrent users
    # render: frames to render; a billion is a year of 30 fps video (9.5e8 frames)
    frames: int | None = Field(None, ge=1, le=1_000_000_000)
    scene: Literal["light", "medium", "heavy", "ultra"] = "medium"  # streaming: per-stream load class
    codec: Literal["h264", "hevc", "av1"] = "h264"
    persona: Literal["knowledge", "knowledge-multi", "light", "medium", "heavy"] = "knowledge"  # vdi
    spp: int = Field(128, ge=1, le=1_000_000)  # render: path-tracing samples per pixel
    encode_output: bool = False  # ai-video: re-encode the annotated video
    datacenter: bool = True  # deployed in a datacenter (the GeForce licence forbids it)
    # the GPUs the user owns ("4x RTX 3090, 1x A100 40GB", or {name: count}): `plan` ranks what runs on
    # them, then what renting would add (specs/cluster.parse_have reads it against the catalog)
    have: str | dict[str, int] | None = None
    # inference engine: CUDA graphs and fused kernels (vllm, tensorrt-llm, sglang, mlc, llama.cpp),
    engine: Engine = "vllm"  # eager PyTorch (transformers' generate) or AutoAWQ's fused modules
    # AutoAWQ's AWQ packing (quant_config "version"): its kernels, gemm (unset) or gemv (engines.py)
    awq_version: Literal["gemm", "gemv"] | None = None
    # the engine runs decode without CUDA graphs (vLLM --enforce-eager, SGLang --disable-cuda-graph;
    # vLLM before its CUDA-graph runner, PR #1926 of December 2023): each op issued by the host
    enforce_eager: bool = False
    # a service's latency targets (plan): the largest batch meeting them prices its output tokens;
    # an hour per token or per first token is beyond any service
    max_tpot_ms: float | None = Field(None, gt=0, le=3.6e6)  # mean time per output token, ms
    max_ttft_ms: float | None = Field(None, gt=0, le=3.6e6)  # one request's time to first token, ms
    epochs: float | None = Field(None, gt=0, le=1e6)
    dataset_tokens: float | None = Field(None, ge=1, le=1e18)

    # --- framework: a training stack's defaults (issue 27) --------------------------------------
    # `framework: nemo` fills the keys NeMo's recipes set (specs/frameworks.py, data/frameworks.toml,
    # docs/frameworks.md) wherever the workload leaves them unset; keys the user sets win. The
    # filled keys stay out of model_fields_set: they are the framework's, not the user's, so
    # check_keys_apply, layout searches and with_() treat them as defaults.
    framework: str | None = None

    @field_validator("framework", mode="before")
    @classmethod
    def _framework(cls, v: Any) -> Any:
        if v is None:
            return None
        key = frameworks.normalise(v)
        if key not in frameworks.names():
            hint = did_you_mean(str(key), frameworks.names())
            raise ValueError(f"must be one of {', '.join(frameworks.names())}. Got {v!r}.{hint}")
        return key

    @model_validator(mode="wrap")
    @classmethod
    def _framework_defaults(cls, data: Any, handler: Any) -> Workload:  # handler: pydantic's ModelWrapValidatorHandler
        name = frameworks.normalise(data.get("framework")) if isinstance(data, dict) else None
        filled = (
            frameworks.fill(name, data) if name in frameworks.names() and data.get("task") in TRAINING_TASKS else {}
        )
        w: Workload = handler({**data, **filled} if filled else data)  # no framework, an unknown one, not training
        w.model_fields_set.difference_update(filled)
        if w.framework is not None and w.is_training:  # Unsloth: one GPU; tasks, parallelism, fp8 recipes
            frameworks.check_gpus(w.framework, w.num_gpus)
            recipe = w.fp8_recipe if w.precision == "fp8" else None
            frameworks.check(w.framework, w.task, {"tp": w.tp, "pp": w.pp, "cp": w.cp}, recipe)
        return w

    # --- inference engines: transformers' cache, llama.cpp / Ollama offload (estimators/engines.py) ---
    # transformers generate's KV cache: "dynamic" grows per token (DynamicCache, transformers' default,
    # and what unset means); "static" preallocates input + output tokens (StaticCache), which
    # generate compiles for decode
    cache_implementation: Literal["dynamic", "static"] | None = None
    # llama.cpp -ngl / Ollama num_gpu: layers held and run on the GPU, counting the output layer (placed
    # there first), the rest in host memory on the CPU; unset: all of them (Ollama: as many as fit);
    # 0: CPU-only decode
    gpu_layers: int | None = Field(None, ge=0, le=100_000)
    # host memory bandwidth in GB/s, which the CPU layers of a partial offload read at; unset:
    # DEFAULT_HOST_MEMORY_BANDWIDTH_GBPS
    host_memory_bandwidth: float | None = Field(None, ge=0.1, le=100_000)
    # Ollama's context window (num_ctx, OLLAMA_CONTEXT_LENGTH): its KV cache holds this many tokens per
    # parallel request whatever the prompt; unset: Ollama's default by GPU memory. AutoAWQ: its window
    num_ctx: int | None = Field(None, ge=1, le=10_000_000)
    # serving benchmark with arrivals (vLLM benchmark_serving --request-rate, Poisson): requests per
    # second, all replicas together; batch_size, when set, caps the requests in flight
    # (--max-concurrency); input_len and output_len are the mean prompt and output lengths
    request_rate: float | None = Field(None, ge=1e-6, le=1_000_000)
    # variable-length requests: the 90th-percentile prompt and output lengths, input_len and output_len
    # staying the means; the KV fit check and max_model_len take them (estimators/memory/inference.py)
    input_len_p90: int | None = Field(None, ge=1, le=10_000_000)
    output_len_p90: int | None = Field(None, ge=1, le=10_000_000)
    # the tokens at the start of each request's prompt already in the serving engine's prefix cache
    # (a shared system prompt, a repeated prompt); what the engine reuses of them, and where, is
    # estimators/engines.py prefix_reused_tokens; unset (None) is 0, and leaves the workload's dumps as they were
    cached_prefix_tokens: int | None = Field(None, ge=0, le=10_000_000)
    # batch_size requests kept in flight, each finished one replaced by the next (a benchmark's
    # --max-concurrency over more prompts): time to first token is the steady state's, not the batch's
    # prefill (estimators/perf/inference.py); unset (None) is false, and leaves the dumps as they were
    closed_loop: bool | None = None
    # a finite open-loop run (--num-prompts N of vLLM benchmark_serving / SGLang bench_serving): N
    # prompts sent at request_rate; where their arrival window N / rate is short against a request's
    # latency they are all in flight together, each prefilled as it arrives (estimators/perf/inference.py);
    # unset (None): the steady state of an endless stream, and the dumps stay as they were
    num_prompts: int | None = Field(None, ge=1, le=100_000_000)

    @field_validator("gpu", mode="before")
    @classmethod
    def _numeric_gpu_alias(cls, v: Any) -> Any:
        """`gpu: 4090` (YAML reads a number) names the card its alias names: "4090"."""
        if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 10**6:
            return str(v)
        return v

    @field_validator("optimizer", mode="before")
    @classmethod
    def _optimizer(cls, v: Any) -> str:
        return optimizer_name(v)  # specs/workload_keys.py: the names torch, transformers, bitsandbytes use

    @field_validator("weight_dtype", "kv_dtype", mode="before")
    @classmethod
    def _storage(cls, v: Any) -> str | None:
        if v is None:
            return None
        try:
            return storage_format(str(v)).name
        except InvalidSettingError as exc:
            raise ValueError(str(exc).removeprefix("Unknown weight/KV dtype ")) from None

    @field_validator("deadline", mode="before")
    @classmethod
    def _deadline(cls, v: Any) -> float | None:
        return None if v is None else parse_duration_s(v)

    @field_validator("attention_impl", mode="before")
    @classmethod
    def _attention_names(cls, v: Any) -> Any:
        """transformers' attn_implementation names (and FA's) read as the kernel they run."""
        return attention_name(v)

    @field_validator("lora_targets", mode="before")
    @classmethod
    def _targets(cls, v: Any) -> str | list[str]:
        return lora_target_list(v)

    @model_validator(mode="before")
    @classmethod
    def _cluster_size(cls, data: Any) -> Any:
        """A cluster (NODESxGPUS:GPU) sets num_gpus when the workload does not give it."""
        if isinstance(data, dict) and isinstance(data.get("cluster"), str) and data.get("num_gpus") is None:
            m = re.match(r"^\s*(?:(\d+)\s*[x×*]\s*)?(\d+)\s*:", data["cluster"])
            if m:
                data = {**data, "num_gpus": int(m.group(1) or 1) * int(m.group(2))}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if not self.model and self.task not in ("streaming", "vdi", "render"):
            raise ValueError(f"task {self.task!r} needs 'model' (e.g. model: llama-3.1-8b).")
        if self.task in TRAINING_TASKS and self.seq_len < 1:
            raise ValueError("seq_len must be at least 1 for training.")
        if self.task == "inference" and self.input_len + self.output_len < 1:
            raise ValueError("input_len + output_len must be at least 1 token for inference.")
        if self.cached_prefix_tokens is not None and self.cached_prefix_tokens > self.input_len:
            raise ValueError(
                f"cached_prefix_tokens={self.cached_prefix_tokens} is more than the prompt (input_len={self.input_len}): "
                "the cached prefix is part of each prompt; set it to at most input_len."
            )
        if self.closed_loop and (self.request_rate is not None or self.tokens is not None):
            raise ValueError(
                "closed_loop keeps batch_size requests in flight; request_rate (an open loop) and tokens (a batch "
                "job) say otherwise: drop closed_loop or the other key."
            )
        if self.num_prompts is not None and self.request_rate is None:
            raise ValueError(
                f"num_prompts={self.num_prompts} counts the prompts sent at request_rate (a benchmark's --num-prompts "
                "with --request-rate); set request_rate too, or drop num_prompts (batch_size alone sends them at once)."
            )
        mp = self.tp * self.pp * self.cp
        if self.num_gpus % mp:
            raise ValueError(
                f"num_gpus={self.num_gpus} must be a multiple of tp x pp x cp = "
                f"{self.tp} x {self.pp} x {self.cp} = {mp}."
            )
        if self.ep > 1 and (self.num_gpus // self.pp) % self.ep:
            raise ValueError(
                f"ep={self.ep} must divide the GPUs of one pipeline stage ({self.num_gpus // self.pp}): experts are "
                "split across data-parallel ranks, folded over tensor/context-parallel ones (Megatron-Core)."
            )
        if self.etp is not None and self.task == "inference":
            raise ValueError(
                "etp is a training key (Megatron-Core); serving with ep > 1 splits each expert over "
                "tp x (num_gpus / (tp x pp)) / ep GPUs by itself: drop etp."
            )
        if self.etp is not None and (
            (self.ep == 1 and self.etp != self.tp) or (self.num_gpus // self.pp) % (self.ep * self.etp)
        ):
            raise ValueError(
                f"etp={self.etp} with ep={self.ep}: expert tensor parallelism needs ep > 1 (or etp = tp) and ep x etp "
                f"must divide the GPUs of one pipeline stage ({self.num_gpus // self.pp}) (Megatron-Core MoE parallel folding)."
            )
        if self.tp_comm_overlap and not (self.sequence_parallel and self.tp > 1):
            raise ValueError("tp_comm_overlap needs tp > 1 with sequence_parallel: true (Megatron-Core requires both).")
        if self.vp > 1 and self.pp == 1:
            raise ValueError("vp (interleaved virtual stages) needs pipeline parallelism: set pp >= 2.")
        if self.global_batch is not None and self.is_training:
            per_step = self.batch_size * (self.num_gpus // mp)
            if self.global_batch % per_step:
                raise ValueError(
                    f"global_batch={self.global_batch} must be a multiple of batch_size x data-parallel size "
                    f"= {self.batch_size} x {self.num_gpus // mp} = {per_step}."
                )
        if self.epochs and self.dataset_tokens and self.epochs * self.dataset_tokens < 1:
            raise ValueError(
                f"epochs x dataset_tokens = {self.epochs:g} x {self.dataset_tokens:g} is less than one token."
            )
        if self.offload != "none" and self.zero == 0 and self.task in TRAINING_TASKS:
            # ZeRO-Offload needs ZeRO (DeepSpeed: offload_optimizer requires stage >= 1; params stage 3)
            raise ValueError(
                f"offload={self.offload!r} needs ZeRO: set zero: 1-3 for optimizer offload, 3 for parameters."
            )
        if self.offload == "optimizer+params" and self.zero != 3 and self.task in TRAINING_TASKS:
            raise ValueError("offload='optimizer+params' needs zero: 3 (DeepSpeed offload_param is ZeRO-3 only).")
        return self

    # --- derived ------------------------------------------------------------------------------
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
        data = self.model_dump(exclude_unset=True)
        data.update(changes)
        return make_workload(data)


build_without_plugins(Workload)  # now, without pydantic's plugin scan (~15-25 ms of each start)

# integer keys: "1e4" and 1.0e+4 are read as 10000 there, "1.5e0" is refused (safeio.whole_number)
_INT_KEYS: Final = frozenset(k for k, f in Workload.model_fields.items() if f.annotation in (int, int | None))


def _pretty_error(exc: ValidationError) -> str:
    return describe_error(exc.errors()[0])


def describe_error(err: Mapping[str, Any], known_keys: Iterable[str] | None = None) -> str:
    """One line for one pydantic error (an entry of `ValidationError.errors()`), naming the key,
    what it must be and the value received; `known_keys` (default: the workload's) for the hint."""
    loc = ".".join(str(p) for p in err.get("loc", ())) or "workload"
    msg = str(err.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ")
    if err.get("type") == "extra_forbidden":
        keys = list(known_keys) if known_keys is not None else list(Workload.model_fields)
        hint = did_you_mean(loc, keys)
        return f"Unknown workload key {loc!r}.{hint} Known keys: {', '.join(keys)}."
    if err.get("type") == "missing":
        return f"The workload needs {loc!r} (e.g. model: llama-3.1-8b)."
    value = err.get("input")
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    got = "" if "Got" in msg or isinstance(value, dict) else f" Got {shown}."
    if loc == "workload":  # a rule across keys: its message names them
        return msg.rstrip(".") + "."
    return f"The {loc!r} key: {msg.rstrip('.')}{'' if msg.endswith(('?', '!')) else '.'}{got}"


def make_workload(data: Mapping[str, Any]) -> Workload:
    """Validate a mapping of workload keys; raise InvalidSettingError with one clear line."""
    if not isinstance(data, Mapping):
        raise InvalidSettingError(f"A workload must be a mapping of keys to values. Got {type(data).__name__}.")
    clean = {str(k).strip().replace("-", "_"): v for k, v in data.items() if v is not None}
    check_numbers(clean, "workload")  # NaN, infinity or a 300-digit integer: one line naming the key
    clean = {k: whole_number(v, f"The {k!r} key") if k in _INT_KEYS else v for k, v in clean.items()}
    try:
        return Workload.model_validate(clean)
    except ValidationError as exc:
        raise InvalidSettingError(_pretty_error(exc)) from None


def read_user_text(path: Path, what: str, hint: str = "", max_bytes: int = MAX_TABLE_BYTES) -> str:
    """A user's text file, or one InvalidSettingError line naming it (missing, not a regular file,
    over `max_bytes`, unreadable, not UTF-8): see gpuplan.safeio.read_capped."""
    return read_capped(path, what, max_bytes, hint)


def safe_yaml(text: str, name: str) -> Any:
    """YAML read with the bounded safe loader (gpuplan.safeio.load_yaml): a syntax error, an alias
    bomb, deep nesting or a non-finite number is one line naming the file."""
    return load_yaml(text, name)


def read_workload_file(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Workload:
    """Read a workload YAML file (safe loader only); CLI flags in `overrides` win."""
    p = Path(path)
    data = safe_yaml(read_user_text(p, "workload file", "Pass a YAML file or a model name.", MAX_YAML_BYTES), p.name)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidSettingError(f"{p.name} must hold a mapping of workload keys (model: ..., task: ...).")
    merged = dict(data)
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return make_workload(merged)
