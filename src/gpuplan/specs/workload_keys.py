"""The workload's names: its tasks, the optimizer, attention and LoRA-target names users write and
what they read as, and which keys only some tasks read (check_keys_apply).

Split out of specs/workload.py, which validates the keys with these tables (its field validators
call the normalisers here); gpuplan.specs.workload re-exports every public name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from gpuplan.errors import InvalidSettingError, did_you_mean
from gpuplan.specs.engine_formats import check_engine_weight_format

if TYPE_CHECKING:
    from gpuplan.specs.workload import Workload

TRAINING_TASKS: Final = ("pretrain", "finetune", "lora", "qlora")
LLM_TASKS: Final = (*TRAINING_TASKS, "inference")
GRAPHICS_TASKS: Final = ("streaming", "vdi", "render", "ai-video")

# Optimizers and the bitsandbytes / torch variants users name; see estimators/optimizer.py.
OPTIMIZERS: Final = (
    "adamw", "adamw-foreach", "adam", "adamw-8bit", "paged-adamw", "paged-adamw-8bit", "sgd", "sgd-momentum",
    "adafactor", "lion", "lion-8bit", "paged-lion-8bit",
)  # fmt: skip
_OPTIMIZER_ALIASES: Final = {
    "adamw_torch": "adamw-foreach",
    "adamw-torch": "adamw-foreach",
    "adamw_torch_fused": "adamw",
    "adamw-fused": "adamw",
    "fused-adamw": "adamw",
    "adamw_hf": "adamw",
    "adamw_8bit": "adamw-8bit",
    "adamw_bnb_8bit": "adamw-8bit",
    "adam8bit": "adamw-8bit",
    "adamw8bit": "adamw-8bit",
    "8bit-adamw": "adamw-8bit",
    "paged_adamw_32bit": "paged-adamw",
    "paged-adamw-32bit": "paged-adamw",
    "paged_adamw": "paged-adamw",
    "paged_adamw_8bit": "paged-adamw-8bit",
    "sgd_momentum": "sgd-momentum",
    "lion_8bit": "lion-8bit",
    "lion8bit": "lion-8bit",
    "paged_lion_8bit": "paged-lion-8bit",
}

CHECKPOINTING: Final = ("none", "selective", "selective-op", "full")

# attn_implementation names as transformers spells them (PreTrainedModel: "eager", "sdpa",
# "flash_attention_2", "flash_attention_3") and the kernels they run here. "sdpa" is
# torch.nn.functional.scaled_dot_product_attention, which on CUDA dispatches to FlashAttention-2 or
# the memory-efficient kernel when the inputs allow (PyTorch docs, scaled_dot_product_attention:
# "three supported implementations ... FlashAttention-2, Memory-Efficient Attention, a PyTorch
# implementation defined in C++"), neither of which materialises the scores: "flash". Only its C++
# math fallback would, and transformers' SDPA path takes the fused kernels on Ampere and later
# (fp32 inputs take the memory-efficient kernel, slower than FlashAttention-2; the speed estimate
# does not tell the two apart).
_ATTENTION_ALIASES: Final = {
    "sdpa": "flash",
    "flash_attention_2": "flash",
    "flash_attn_2": "flash",
    "fa2": "flash",
    "flash_attention": "flash",
    "flash_attention_3": "fa3",
    "flash_attn_3": "fa3",
    "eager": "eager",
}


def optimizer_name(v: Any) -> str:
    """The optimizer a name reads as (torch / transformers / bitsandbytes spellings), or ValueError."""
    if not isinstance(v, str):
        raise ValueError(f"must be one of {', '.join(OPTIMIZERS)}. Got {v!r}.")
    key = v.strip().lower()
    key = _OPTIMIZER_ALIASES.get(key, _OPTIMIZER_ALIASES.get(key.replace("-", "_"), key.replace("_", "-")))
    if key not in OPTIMIZERS:
        hint = did_you_mean(key, OPTIMIZERS)
        raise ValueError(f"must be one of {', '.join(OPTIMIZERS)}. Got {v!r}.{hint}")
    return key


def attention_name(v: Any) -> Any:
    """transformers' attn_implementation names (and FA's) read as the kernel they run."""
    if isinstance(v, str):
        return _ATTENTION_ALIASES.get(v.strip().lower().replace("-", "_"), v)
    return v


def lora_target_list(v: Any) -> str | list[str]:
    """`lora_targets` as written: "default", "all-linear", or a list (or comma-separated string) of names."""
    if isinstance(v, str):
        items = [s.strip() for s in v.split(",") if s.strip()]
        if len(items) == 1 and items[0].lower() in ("default", "all-linear", "all_linear", "all"):
            return "all-linear" if items[0].lower() != "default" else "default"
        if not items:
            raise ValueError("needs at least one module name, 'default' or 'all-linear'.")
        return items
    if isinstance(v, list) and v and all(isinstance(s, str) and s.strip() for s in v):
        return [s.strip() for s in v]
    raise ValueError(f"must be 'default', 'all-linear' or a list of module names. Got {v!r}.")


# Keys that only some tasks read. A user who sets one for a task that ignores it gets one line
# naming the task it needs, not an answer that silently left it out.
TRAINING_ONLY: Final = frozenset(
    {
        "seq_len", "grad_accum", "optimizer", "activation_checkpointing", "zero", "global_batch", "master_weights",
        "offload", "loss_impl", "activation_offloading", "optimizer_in_backward", "grads_set_to_none", "sharding",
        "epochs", "dataset_tokens", "sequence_parallel", "tp_comm_overlap", "vp", "cp", "framework", "fp8_recipe",
        "fsdp_wrap", "fsdp_no_sync",
    }
)  # fmt: skip
ADAPTER_ONLY: Final = frozenset({"lora_rank", "lora_alpha", "lora_dropout", "lora_targets"})
INFERENCE_ONLY: Final = frozenset(
    {
        "input_len", "output_len", "kv_dtype", "engine", "gpu_memory_utilization", "enforce_eager",
        "cache_implementation", "gpu_layers", "host_memory_bandwidth", "num_ctx", "request_rate",
        "max_tpot_ms", "max_ttft_ms", "awq_version", "input_len_p90", "output_len_p90", "cached_prefix_tokens",
        "closed_loop", "num_prompts",
    }
)  # fmt: skip
# Inference keys that only some engines read (the same one-line refusal names the engines)
ENGINE_ONLY: Final = {
    "cache_implementation": ("transformers",),
    "gpu_layers": ("llama.cpp", "ollama"),
    "host_memory_bandwidth": ("llama.cpp", "ollama"),
    "num_ctx": ("ollama", "autoawq"),
    "awq_version": ("autoawq",),
    # the engines whose prefix cache is on by default (estimators/engines.py PREFIX_CACHE_BLOCK_TOKENS)
    "cached_prefix_tokens": ("vllm", "sglang", "tgi", "tensorrt-llm", "llama.cpp"),
    # the engines whose step loop a successor's wait is known for (estimators/engines.py ARRIVAL_EXTRA_STEPS)
    "closed_loop": ("vllm", "sglang"),
    # the continuous-batching servers a benchmark's arrivals are prefilled on as they come
    # (estimators/perf/inference.py BURST_ENGINES)
    "num_prompts": ("vllm", "sglang", "tgi", "tensorrt-llm"),
}
GRAPHICS_ONLY: Final = frozenset(
    {"resolution", "fps", "streams", "users", "frames", "scene", "codec", "persona", "spp", "encode_output"}
)


def check_keys_apply(w: Workload) -> None:
    """Refuse a key the workload's task ignores (set by the user, not a default), in one line that
    names the task that reads it. The task defaults to inference when none is given."""
    given = w.model_fields_set
    task = w.task + ("" if "task" in given else " (the default: no task was given)")
    if w.task == "inference":
        check_engine_weight_format(w.engine, w.weight_dtype)
    if "fp8_recipe" in given and w.is_training and w.precision != "fp8":
        raise InvalidSettingError(
            f"The 'fp8_recipe' key is read only by fp8 training; this workload's precision is {w.precision}. "
            "Set precision: fp8 or drop fp8_recipe."
        )
    for key in sorted(given):
        if key in TRAINING_ONLY and not w.is_training:
            need = "training (pretrain, finetune, lora, qlora)"
        elif key in ADAPTER_ONLY and w.task not in ("lora", "qlora"):
            need = "adapter (lora, qlora)"
        elif key in INFERENCE_ONLY and w.task != "inference":
            need = "inference"
        elif key in GRAPHICS_ONLY and not w.is_graphics:
            need = f"graphics ({', '.join(GRAPHICS_TASKS)})"
        elif key == "model" and w.task in ("streaming", "vdi", "render"):
            need = "language-model and ai-video"
        elif key in ENGINE_ONLY and w.task == "inference" and w.engine not in ENGINE_ONLY[key]:
            names = ENGINE_ONLY[key]
            engines = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            raise InvalidSettingError(
                f"The '{key}' key is read only by the {engines} engine{'s' if len(ENGINE_ONLY[key]) > 1 else ''}; "
                f"this workload's engine is {w.engine}. Set engine: {ENGINE_ONLY[key][0]} or drop {key}."
            )
        else:
            continue
        raise InvalidSettingError(
            f"The '{key}' key is read only by {need} jobs; this workload's task is {task}. Set the task "
            f"(task: ... or --task) or drop {key}."
        )
