"""The workload's keys as a pydantic model: their types, bounds and defaults, the names people write
(the before-validators) and the rules across keys. It is the authority on input: the fast reader in
`specs/workload.py` takes the common, unambiguous input itself from a table derived from this model
(`data/workload_fields.json`, `python -m gpuplan.specs.workload_table --write`) and hands everything
else here, so every error message is pydantic's, worded once (`describe_error`). The web API's
request bodies (web_schemas.py), the OpenAPI schema and docs/workload.md read this model.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, WithJsonSchema, field_validator, model_validator

from gpuplan._lazy import build_without_plugins
from gpuplan.specs.workload_derived import (
    BEFORE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    WorkloadDerived,
    check_consistent,
    check_framework,
    cluster_gpus,
    framework_filled,
)

Engine = Literal["vllm", "tensorrt-llm", "sglang", "transformers", "llama.cpp", "mlc", "tgi", "ollama", "autoawq"]


class WorkloadSchema(BaseModel, WorkloadDerived):
    """One workload's keys as pydantic checks them (docs/workload.md). Sizes are per GPU: `batch_size` is the
    per-GPU micro-batch."""

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

    @model_validator(mode="wrap")
    @classmethod
    def _framework_defaults(cls, data: Any, handler: Any) -> WorkloadSchema:  # handler: ModelWrapValidatorHandler
        filled = framework_filled(data)  # none for no framework, an unknown one, a task that is not training
        w: WorkloadSchema = handler({**data, **filled} if filled else data)
        w.model_fields_set.difference_update(filled)
        check_framework(w)
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

    @field_validator(*BEFORE, mode="before")
    @classmethod
    def _names(cls, v: Any, info: ValidationInfo) -> Any:
        """The names people write, read by the same functions as the fast reader's (workload_derived.BEFORE:
        transformers' attention names, optimizer aliases, storage formats, '24h', LoRA targets, a numeric GPU
        alias, a framework's name)."""
        assert info.field_name is not None  # a field validator always names its field
        return BEFORE[info.field_name](v)

    @model_validator(mode="before")
    @classmethod
    def _cluster_size(cls, data: Any) -> Any:
        return cluster_gpus(data)

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSchema:
        check_consistent(self)
        return self


build_without_plugins(WorkloadSchema)  # now, without pydantic's plugin scan (~15-25 ms of each start)
