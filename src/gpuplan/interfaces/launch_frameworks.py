"""Launch files in a training framework's own format: a torchtitan job TOML, a NeMo 2 command
(`nemo llm pretrain --factory RECIPE key=value ...`), a torchtune `tune run RECIPE --config CONFIG`
line and Unsloth's one-GPU `python train.py`. The workload's framework names which one
`gpuplan launch` writes when no --format is given (specs/frameworks.py: `launch`).

Keys are the frameworks' own: torchtitan's JobConfig sections and fields
(pytorch/torchtitan:torchtitan/config/job_config.py@6404b932421f5ce382e7dac5ad381b2c17b1373c),
NeMo-Run's dotted overrides of an llm recipe's trainer, strategy, data and model config
(NVIDIA/NeMo:nemo/collections/llm/recipes/llama31_8b.py@8cfedd7203462cb251a914e700e5605444277561:
trainer(), MegatronStrategy arguments, the data module's seq_length / global_batch_size /
micro_batch_size; a factory's own arguments in `--factory "NAME(arg=value)"`, as the recipes'
docstrings write them: `performance_mode=True` for TP communication overlap, and for a full
fine-tune `peft_scheme='none'`, since finetune_recipe defaults to 'lora'),
torchtune's recipes and configs (pytorch/torchtune:docs/source/recipes/lora_finetune_single_device.rst:
`tune run lora_finetune_single_device --config llama3_1/8B_lora_single_device` with key=value overrides
such as model.lora_rank; recipes/configs/llama3_1/*.yaml: batch_size, gradient_accumulation_steps,
enable_activation_checkpointing, dtype, compile, tokenizer.max_seq_len).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces.launch import (
    _header,
    _shell_join,
    _torchrun_argv,
    adapter_args,
    refuse_adapter,
    trainer_args,
)
from gpuplan.interfaces.launch_torchtune import tune_config
from gpuplan.planner.launch_plan import LaunchPlan
from gpuplan.specs import frameworks
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload

# torchtitan's Llama 3 flavors (torchtitan/models/llama3/__init__.py: llama3_configs)
TORCHTITAN_LLAMA3_FLAVORS: Final = ("8B", "70B", "405B")
_AC: Final = {"none": "none", "selective": "selective", "selective-op": "selective", "full": "full"}


# torchtitan's virtual stages per rank for looped schedules without pipeline_parallel_layers_per_stage
# (pytorch/torchtitan:torchtitan/distributed/pipeline_parallel.py pipeline_llm: "default is 2 virtual
# stages per rank"); the layout search tries vp 1 or 2 for torchtitan (planner/layouts.py)
TORCHTITAN_STAGES_PER_RANK: Final = 2


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a TOML basic string: JSON's escapes are TOML's


def _toml(doc: dict[str, dict[str, Any]]) -> str:
    out: list[str] = []
    for section, table in doc.items():
        out.append(f"[{section}]")
        out += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
        out.append("")
    return "\n".join(out)


# gpuplan model_type -> torchtitan's train-spec name (torchtitan/models/__init__.py: llama3, llama4,
# deepseek_v3 registered); a Llama-architecture model of any generation is torchtitan's llama3 model
# (its TransformerModelArgs: dim, n_layers, n_heads, n_kv_heads, vocab_size, rope_theta, ffn size)
TORCHTITAN_MODELS: Final = {"llama": "llama3", "llama4": "llama4", "deepseek_v3": "deepseek_v3"}
LLAMA3_VOCAB: Final = 128_256  # Llama 3.x's tokenizer: torchtitan's llama3 flavors are built for it


def check_torchtitan_model(model: ModelSpec) -> str:
    """torchtitan's model name for `model`, or one line where it has none."""
    name = TORCHTITAN_MODELS.get(model.model_type)
    if name is None:
        raise InvalidSettingError(
            f"torchtitan has no model for {model.name} (architecture {model.model_type}; its train specs are "
            f"{', '.join(sorted(set(TORCHTITAN_MODELS.values())))}); use --format torchrun or accelerate."
        )
    return name


def _flavor(lp: LaunchPlan) -> tuple[str, str, str]:
    """torchtitan's model name and flavor for the model, and a note where it has no preset."""
    m = lp.model
    name = check_torchtitan_model(m)
    size = f"{round(m.total_params / 1e9)}B"
    if name == "llama3" and size in TORCHTITAN_LLAMA3_FLAVORS and m.vocab_size == LLAMA3_VOCAB:
        return name, size, ""
    if name != "llama3":
        return name, "custom", f"torchtitan has no {name} flavor for {m.name}: register its ModelArgs first"
    theta = m.config.get("rope_theta", 10_000.0)
    return (
        name,
        "custom",
        (
            f"torchtitan has no llama3 flavor for {m.name}: register one (TransformerModelArgs) with dim={m.hidden_size}, "
            f"n_layers={m.num_layers}, n_heads={m.num_heads}, n_kv_heads={m.num_kv_heads}, vocab_size={m.vocab_size}, "
            f"rope_theta={theta:g} and an FFN of {m.intermediate_size} (ffn_dim_multiplier, multiple_of)"
        ),
    )


def torchtitan(lp: LaunchPlan) -> str:
    """A torchtitan job config: the layout as [parallelism] degrees (FSDP2 over the rest), the
    batch, the checkpointing mode and compile as the estimate assumed."""
    w, cl = lp.w, lp.cluster
    refuse_adapter(lp, "torchtitan (full-weight pretraining)")
    if w.precision == "fp16":  # job_config.py: mixed_precision_param is "bfloat16" or "float32"
        raise InvalidSettingError(
            f"torchtitan's mixed precision is bfloat16 or float32 (mixed_precision_param); {cl.gpu.name} has no "
            "BF16 (compute capability < 8.0): use --format accelerate or deepspeed (fp16), or a GPU with BF16."
        )
    if w.zero in (1, 2) or w.offload == "optimizer":
        raise InvalidSettingError(
            f"torchtitan shards with FSDP2 (zero: 3, offload: optimizer+params) or replicates (zero: 0); "
            f"zero: {w.zero} with offload: {w.offload} is DeepSpeed's or Megatron's: set zero: 3 or 0, or use "
            "--format deepspeed or torchrun."
        )
    if w.ep > 1 and w.ep > w.dp * w.cp:
        raise InvalidSettingError(
            f"torchtitan's expert parallelism runs over data-parallel ranks; ep={w.ep} exceeds them."
        )
    if w.vp > TORCHTITAN_STAGES_PER_RANK:
        raise InvalidSettingError(
            f"torchtitan's looped pipeline schedules run {TORCHTITAN_STAGES_PER_RANK} virtual stages per rank "
            f"(pipeline_llm's default); vp={w.vp} is Megatron's: set vp: 1 or 2."
        )
    name, flavor, note = _flavor(lp)
    async_tp = w.tp_comm_overlap and w.tp > 1  # torchtitan's async TP (estimators/comm.ASYNC_TP_HIDDEN)
    steps = math.ceil(w.train_tokens / (w.batch_size * w.micro_batches * w.dp * w.seq_len)) if w.train_tokens else 1000
    doc: dict[str, dict[str, Any]] = {
        "job": {"dump_folder": "./outputs", "description": f"{lp.model.name} {w.task} (gpuplan)"},
        "model": {"name": name, "flavor": flavor, **({"converters": ["float8"]} if w.precision == "fp8" else {})},
        "optimizer": {"name": "AdamW", "implementation": "fused"},
        "training": {
            # under PP the local batch is split into pipeline micro-batches of pipeline_parallel_microbatch_size
            # (build_pipeline_schedule: n_microbatches = local_batch_size // microbatch size)
            "local_batch_size": w.batch_size * (w.micro_batches if w.pp > 1 else 1),
            "global_batch_size": w.batch_size * w.micro_batches * w.dp,
            "seq_len": w.seq_len,
            "steps": steps,
            "max_norm": 1.0,
            "mixed_precision_param": "float32" if w.precision in ("fp32", "tf32") else "bfloat16",
            "compile": w.compile,
            "enable_cpu_offload": w.offload != "none",
        },
        "parallelism": {
            # FSDP2 shards over the data-parallel ranks (ZeRO-3); zero < 3 replicates them (DDP)
            "data_parallel_replicate_degree": 1 if w.zero == 3 else w.dp,
            "data_parallel_shard_degree": -1 if w.zero == 3 else 1,
            "tensor_parallel_degree": w.tp,
            "pipeline_parallel_degree": w.pp,
            "context_parallel_degree": w.cp,
            "expert_parallel_degree": w.ep,
            **(_torchtitan_pipeline(w) if w.pp > 1 else {}),
            # tp_comm_overlap is torchtitan's async TP, which works under torch.compile only
            # (JobConfig.Parallelism.enable_async_tensor_parallel; estimators/comm.ASYNC_TP_HIDDEN)
            **({"enable_async_tensor_parallel": True} if async_tp and w.compile else {}),
        },
        "activation_checkpoint": {"mode": _AC[w.activation_checkpointing], "selective_ac_option": "op"},
    }
    if w.precision == "fp8":
        doc["float8"] = _torchtitan_float8(w)
    run = _shell_join([*_torchrun_argv(lp), "-m", "torchtitan.train", "--job.config_file", "job.toml"])
    head = ["# " + x for x in _header(lp)]
    head += [f"# {note}"] if note else []
    if async_tp and not w.compile:
        head.append(
            "# async TP (tp_comm_overlap) left off: torchtitan applies it under compile only; set compile: true"
        )
    one_line = " ".join(x.strip().removesuffix("\\").strip() for x in run.splitlines())
    head.append(f"# run (this file saved as job.toml): {one_line}")
    if cl.nodes > 1:
        head.append("# on every node, with MASTER_ADDR set to the first node's address")
    return "\n".join(head) + "\n" + _toml(doc)


def _torchtitan_pipeline(w: Workload) -> dict[str, Any]:
    """torchtitan's pipeline keys (JobConfig.Parallelism at the commit above): the schedule (1F1B, or
    Interleaved1F1B for vp 2), the micro-batch size, and under FSDP the reshard policy the estimate
    assumes ("default": no reshard after forward under PP, estimators/fsdp_pp.FSDP_PP_GATHER_ONCE)."""
    keys: dict[str, Any] = {
        "pipeline_parallel_schedule": "Interleaved1F1B" if w.vp > 1 else "1F1B",
        "pipeline_parallel_microbatch_size": w.batch_size,
    }
    if w.zero == 3:
        keys["fsdp_reshard_after_forward"] = "default"
    return keys


def _torchtitan_float8(w: Workload) -> dict[str, Any]:
    """torchtitan's [float8] section for the workload's fp8_recipe (JobConfig.Float8,
    pytorch/torchtitan:torchtitan/config/job_config.py@6404b932421f5ce382e7dac5ad381b2c17b1373c):
    a rowwise recipe by name; tensorwise, torchao's default (and the nearest to Transformer Engine's
    delayed scaling, which torchtitan lacks), with the float8 all-gather and precomputed scales under
    FSDP, as torchao's benchmark runs it (pytorch/ao:benchmarks/float8/training/llama3.sh)."""
    if w.fp8_recipe in ("rowwise", "rowwise_with_gw_hp"):
        return {"recipe_name": w.fp8_recipe}
    fsdp = w.zero == 3
    return {"enable_fsdp_float8_all_gather": fsdp, "precompute_float8_dynamic_scale_for_fsdp": fsdp}


# The LLM recipes in NVIDIA/NeMo:nemo/collections/llm/recipes/@8cfedd7203462cb251a914e700e5605444277561
# for the architectures gpuplan bundles: name -> (has a pretrain factory, pretrain_recipe takes
# performance_mode, finetune_recipe takes performance_mode). Every one has a finetune factory whose
# peft_scheme defaults to 'lora'; gpt_oss_* have no pretrain factory; mixtral_* take
# performance_mode for pretraining only (read from each file's factory signatures).
NEMO_RECIPES: Final[dict[str, tuple[bool, bool, bool]]] = {
    **dict.fromkeys(
        (
            "llama2_7b",
            "llama3_8b",
            "llama3_70b",
            "llama31_8b",
            "llama31_70b",
            "llama31_405b",
            "deepseek_v3",
            "llama4_e16",
            "llama4_e128",
            "phi3_mini_4k_instruct",
        ),
        (True, True, True),
    ),
    **dict.fromkeys(("mixtral_8x7b", "mixtral_8x22b"), (True, True, False)),
    **dict.fromkeys(
        (
            "gemma2_9b",
            "gemma2_27b",
            "gemma3_1b",
            "llama32_1b",
            "llama32_3b",
            "mistral_7b",
            "starcoder2_7b",
            "qwen25_500m",
            "qwen25_7b",
            "qwen25_14b",
            "qwen25_32b",
            "qwen25_72b",
            "qwen3_600m",
            "qwen3_1p7b",
            "qwen3_8b",
            "qwen3_14b",
            "qwen3_32b",
            "qwen3_30b_a3b",
            "qwen3_235b_a22b",
        ),
        (True, False, False),
    ),
    **dict.fromkeys(("gpt_oss_20b", "gpt_oss_120b"), (False, False, False)),
}
# gpuplan preset names the name rule below does not turn into the recipe's own name
_NEMO_ALIASES: Final = {
    "qwen2.5-0.5b": "qwen25_500m",
    "qwen3-0.6b": "qwen3_600m",
    "qwen3-1.7b": "qwen3_1p7b",
    "qwen3-30b-a3b": "qwen3_30b_a3b",
    "qwen3-235b-a22b": "qwen3_235b_a22b",
    "gpt-oss-20b": "gpt_oss_20b",
    "gpt-oss-120b": "gpt_oss_120b",
    "phi-3-mini": "phi3_mini_4k_instruct",
    "llama-4-scout": "llama4_e16",
    "llama-4-maverick": "llama4_e128",
}


def nemo_recipe(model_name: str) -> str:
    """A NeMo llm recipe name from a model name: llama-3.1-8b -> llama31_8b, mixtral-8x7b ->
    mixtral_8x7b (nemo/collections/llm/recipes/*.py are named so)."""
    base = model_name.lower().split("/")[-1]
    if base in _NEMO_ALIASES:
        return _NEMO_ALIASES[base]
    parts = [p for p in re.split(r"[-_/ ]+", base) if p]
    if len(parts) < 2:
        return re.sub(r"[^a-z0-9]", "", model_name.lower()) or "model"
    return re.sub(r"[^a-z0-9]", "", "".join(parts[:-1])) + "_" + re.sub(r"[^a-z0-9]", "", parts[-1])


def nemo_factory(lp: LaunchPlan) -> tuple[str, str, list[str]]:
    """(verb, `--factory` value, header notes): the recipe with its own arguments, or one clear
    error where NeMo has no such recipe or no pretrain factory for it."""
    w = lp.w
    recipe = nemo_recipe(lp.model.name)
    if recipe not in NEMO_RECIPES:
        raise InvalidSettingError(
            f"NeMo 2 has no llm recipe for {lp.model.name!r} (looked for {recipe!r} in "
            "nemo/collections/llm/recipes); use --format accelerate or --format torchrun."
        )
    has_pretrain, perf_pre, perf_ft = NEMO_RECIPES[recipe]
    verb = "pretrain" if w.task == "pretrain" else "finetune"
    if verb == "pretrain" and not has_pretrain:
        raise InvalidSettingError(
            f"NeMo's {recipe} recipe has a finetune factory only; set task: finetune or use --format torchrun."
        )
    scheme = '"lora"' if w.task == "lora" else '"none"'  # finetune_recipe(peft_scheme=...): LoRA or all weights
    args, notes = ([] if verb == "pretrain" else [f"peft_scheme={scheme}"]), []
    if w.tp_comm_overlap:
        if perf_pre if verb == "pretrain" else perf_ft:
            args.append("performance_mode=True")
        else:
            notes.append(f"{recipe}'s {verb} factory has no performance_mode: TP communication overlap stays off")
    return verb, recipe + (f"({', '.join(args)})" if args else ""), notes


def nemo_argv(lp: LaunchPlan) -> list[str]:
    """`nemo llm pretrain|finetune --factory RECIPE` with the layout and batch as overrides."""
    w, cl = lp.w, lp.cluster
    verb, factory, _ = nemo_factory(lp)
    verb = "pretrain" if w.task == "pretrain" else "finetune"
    s = "trainer.strategy."
    a = [
        f"trainer.num_nodes={cl.nodes}",
        f"trainer.devices={cl.gpus_per_node}",
        f"{s}tensor_model_parallel_size={w.tp}",
        f"{s}pipeline_model_parallel_size={w.pp}",
        f"{s}context_parallel_size={w.cp}",
        f"{s}expert_model_parallel_size={w.ep}",
        f"{s}sequence_parallel={w.sequence_parallel}",
        f"data.seq_length={w.seq_len}",
        f"data.micro_batch_size={w.batch_size}",
        f"data.global_batch_size={w.batch_size * w.micro_batches * w.dp}",
        f"optim.config.use_distributed_optimizer={w.zero >= 1}",
    ]
    if w.vp > 1:
        a.append(f"{s}virtual_pipeline_model_parallel_size={w.vp}")
    if w.activation_checkpointing != "none":
        a.append(f"model.config.recompute_granularity={w.activation_checkpointing}")
    if w.activation_checkpointing == "full":
        a += ["model.config.recompute_method=uniform", "model.config.recompute_num_layers=1"]
    if w.precision == "fp8":  # recipes/precision/mixed_precision.py: bf16 with Transformer Engine fp8
        a.append("trainer.plugins=bf16_with_fp8_mixed")
    elif w.precision == "fp16":  # the same file's fp16_mixed (the recipes default to bf16_mixed)
        a.append("trainer.plugins=fp16_mixed")
    if w.train_tokens:
        a.append(f"trainer.max_steps={math.ceil(w.train_tokens / (w.batch_size * w.micro_batches * w.dp * w.seq_len))}")
    if w.task == "lora":  # the recipe's peft (llm.peft.LoRA: dim, alpha, dropout, target_modules)
        a += [f"peft.dim={w.lora_rank}", f"peft.alpha={w.effective_lora_alpha}", f"peft.dropout={w.lora_dropout:g}",
              f"peft.target_modules=[{','.join(nemo_lora_modules(lp))}]"]  # fmt: skip
    return ["nemo", "llm", verb, "--factory", factory, *a, "-y"]


# Hugging Face module names -> Megatron-Core's (NeMo's LoRA target_modules: linear_qkv the fused q/k/v,
# linear_proj the output projection, linear_fc1 the fused gate/up, linear_fc2 the down projection;
# NVIDIA/NeMo:nemo/collections/llm/peft/lora.py@8cfedd7203462cb251a914e700e5605444277561)
_NEMO_LINEAR: Final = {"q_proj": "linear_qkv", "k_proj": "linear_qkv", "v_proj": "linear_qkv", "qkv_proj": "linear_qkv",
                       "o_proj": "linear_proj", "gate_proj": "linear_fc1", "up_proj": "linear_fc1",
                       "gate_up_proj": "linear_fc1", "down_proj": "linear_fc2"}  # fmt: skip
_NEMO_ORDER: Final = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")


def nemo_lora_modules(lp: LaunchPlan) -> list[str]:
    """NeMo's LoRA target_modules for the workload's lora_targets (as the estimate resolved them);
    one line for a module NeMo's LoRA has no name for."""
    from gpuplan.estimators.lora import lora_targets

    leaves = {g.name.rsplit(".", 1)[-1] for g in lora_targets(lp.model, lp.w.lora_targets)}
    other = sorted(leaves - set(_NEMO_LINEAR))
    if other:
        raise InvalidSettingError(
            f"NeMo's LoRA adapts linear_qkv, linear_proj, linear_fc1 and linear_fc2; lora_targets {', '.join(other)} "
            "has no such module: set lora_targets: all-linear, or use --format axolotl or accelerate."
        )
    return sorted({_NEMO_LINEAR[x] for x in leaves}, key=_NEMO_ORDER.index)


def nemo(lp: LaunchPlan) -> str:
    # a full fine-tune (peft_scheme='none') or LoRA (peft_scheme='lora' with the adapter as peft.*
    # overrides); QLoRA is refused when the workload is built (NeMo has no 4-bit base)
    if lp.w.zero >= 2:
        raise InvalidSettingError(
            "NeMo's Megatron strategy shards optimizer states only (distributed optimizer, zero 1); "
            f"zero={lp.w.zero} is FSDP/ZeRO-3: use --format accelerate or set zero: 1."
        )
    head = ["# " + x for x in _header(lp)]
    head.append("# NeMo 2 (NeMo-Run CLI): the recipe's defaults, with this layout and batch as overrides")
    head += ["# " + n for n in nemo_factory(lp)[2]]
    if lp.w.task == "lora" and lp.w.lora_targets != "all-linear":
        head.append("# NeMo's LoRA adapts fused layers: linear_qkv is q, k and v together, linear_fc1 gate and up")
    return "\n".join(head) + "\n" + _shell_join(nemo_argv(lp)) + "\n"


def torchtune(lp: LaunchPlan) -> str:
    """`tune run [torchrun args] RECIPE --config CONFIG key=value ...`: the LoRA/QLoRA or full
    fine-tuning recipe, on one device or distributed (FSDP2), with the batch, checkpointing and
    adapter as overrides."""
    w, cl = lp.w, lp.cluster
    if w.task == "pretrain":
        raise InvalidSettingError(
            "torchtune's recipes fine-tune (full, LoRA, QLoRA); for task: pretrain use --format torchtitan or torchrun."
        )
    if w.precision not in ("bf16", "fp32"):  # its recipes take dtype bf16 or fp32 (no fp16 training)
        raise InvalidSettingError(
            f"torchtune trains in bf16 or fp32 (dtype); precision {w.precision} on {cl.gpu.name} is not one: "
            "use --format accelerate or axolotl, or precision: fp32."
        )
    _check_single_node(lp, "torchtune")
    single = cl.num_gpus == 1
    adapter = w.task in ("lora", "qlora")
    recipe = ("lora" if adapter else "full") + "_finetune_" + ("single_device" if single else "distributed")
    launcher = [] if single else [f"--nproc_per_node={cl.gpus_per_node}"]
    o = [
        f"batch_size={w.batch_size}",
        f"gradient_accumulation_steps={w.micro_batches}",
        f"tokenizer.max_seq_len={w.seq_len}",
        f"enable_activation_checkpointing={w.activation_checkpointing != 'none'}",
        f"dtype={w.precision}",
        f"compile={w.compile}",
    ]
    if not adapter:  # the full recipes read optimizer_in_bwd (recipes/full_finetune_*.py)
        o += _tune_optimizer(w, single)
    if adapter:  # the lora_* model builders' arguments (torchtune/models/llama3_1/_model_builders.py)
        attn, mlp, head_out = tune_lora_modules(lp)
        o += [
            f"model.lora_attn_modules=[{','.join(attn)}]",
            f"model.apply_lora_to_mlp={mlp}",
            f"model.apply_lora_to_output={head_out}",
            f"model.lora_rank={w.lora_rank}",
            f"model.lora_alpha={w.effective_lora_alpha}",
            f"model.lora_dropout={w.lora_dropout:g}",
        ]
    config = tune_config(lp.model.name, w.task if adapter else "full", single)
    argv = ["tune", "run", *launcher, recipe, "--config", config, *o]
    head = ["# " + x for x in _header(lp)]
    head.append(f"# {config}: torchtune's config for this model and task (`tune ls` lists them; `tune cp` to edit)")
    return "\n".join(head) + "\n" + _shell_join(argv) + "\n"


# gpuplan optimizer -> the class torchtune's configs name as optimizer._component_ (torch.optim, or
# bitsandbytes.optim in the *_full_single_device configs at launch_torchtune.TORCHTUNE_COMMIT)
_TUNE_OPTIM: Final = {"adamw": "torch.optim.AdamW", "adam": "torch.optim.Adam", "sgd": "torch.optim.SGD",
                      "adamw-8bit": "bitsandbytes.optim.AdamW8bit", "paged-adamw": "bitsandbytes.optim.PagedAdamW",
                      "paged-adamw-8bit": "bitsandbytes.optim.PagedAdamW8bit", "adamw-foreach": "torch.optim.AdamW",
                      "lion": "bitsandbytes.optim.Lion", "lion-8bit": "bitsandbytes.optim.Lion8bit",
                      "paged-lion-8bit": "bitsandbytes.optim.PagedLion8bit"}  # fmt: skip


def _tune_optimizer(w: Workload, single: bool) -> list[str]:
    """The optimizer and optimizer_in_bwd the estimate assumed, as overrides of the shipped config (its
    single-device configs name PagedAdamW8bit or PagedAdamW stepped in backward, its distributed ones
    fused torch AdamW; `~optimizer.fused` drops the `fused: True` a bitsandbytes class does not take)."""
    component = _TUNE_OPTIM.get(w.optimizer)
    if component is None:
        raise InvalidSettingError(
            f"torchtune's configs name no optimizer {w.optimizer}; use optimizer: {', '.join(_TUNE_OPTIM)}, "
            "or --format accelerate."
        )
    drop = [] if single or component.startswith("torch.") else ["~optimizer.fused"]
    return [f"optimizer._component_={component}", *drop, f"optimizer_in_bwd={w.optimizer_in_backward}"]


# the workload's (Hugging Face) module names -> torchtune's lora_attn_modules (torchtune/modules/peft/
# _utils.py LORA_ATTN_MODULES: q_proj, k_proj, v_proj, output_proj), its MLP (w1, w2, w3, adapted
# together by apply_lora_to_mlp) and its output head (apply_lora_to_output); written as
# `model.lora_attn_modules=[q_proj,v_proj]` key=value overrides (docs/source/tutorials/
# memory_optimizations.rst at launch_torchtune.TORCHTUNE_COMMIT)
_TUNE_ATTN: Final = {"q_proj": ("q_proj",), "k_proj": ("k_proj",), "v_proj": ("v_proj",), "o_proj": ("output_proj",),
                     "qkv_proj": ("q_proj", "k_proj", "v_proj")}  # fmt: skip
_TUNE_MLP: Final = (("gate_proj", "up_proj", "down_proj"), ("gate_up_proj", "down_proj"))
_TUNE_ORDER: Final = ("q_proj", "k_proj", "v_proj", "output_proj")


def tune_lora_modules(lp: LaunchPlan) -> tuple[list[str], bool, bool]:
    """torchtune's (lora_attn_modules, apply_lora_to_mlp, apply_lora_to_output) for the workload's
    lora_targets, as the estimate resolved them (estimators/lora.py); one line where torchtune cannot
    adapt that set (it adapts the MLP's projections all together)."""
    from gpuplan.estimators.lora import lora_targets

    leaves = {g.name.rsplit(".", 1)[-1] for g in lora_targets(lp.model, lp.w.lora_targets)}
    attn = sorted({t for x in leaves & set(_TUNE_ATTN) for t in _TUNE_ATTN[x]}, key=_TUNE_ORDER.index)
    mlp = next((set(m) for m in _TUNE_MLP if set(m) & leaves), set())
    head_out = "lm_head" in leaves
    rest = leaves - set(_TUNE_ATTN) - mlp - {"lm_head"}
    if (mlp and not mlp <= leaves) or rest:
        raise InvalidSettingError(
            f"torchtune adapts q/k/v/output projections, the whole MLP ({'/'.join(sorted(mlp or _TUNE_MLP[0]))} "
            f"together) and the output head; lora_targets {','.join(sorted(leaves))} is not such a set: list all "
            "the MLP projections or none, or use --format axolotl or accelerate."
        )
    return attn, bool(mlp), head_out


def _check_single_node(lp: LaunchPlan, what: str) -> None:
    if lp.cluster.nodes > 1:
        raise InvalidSettingError(
            f"{what} as written here runs on one node; use --format slurm or torchrun for several."
        )


def unsloth(lp: LaunchPlan) -> str:
    """Unsloth: a Python script on one GPU (`python train.py`), the adapter as script arguments."""
    if lp.cluster.num_gpus > 1:
        raise InvalidSettingError(
            f"Unsloth trains on one GPU (`python train.py`); this plan has {lp.cluster.num_gpus}: set num_gpus: 1, "
            "or framework: axolotl or llama-factory for several GPUs."
        )
    head = ["# " + x for x in _header(lp)]
    # what the script is: its flags are TRL sft.py's; Unsloth's own calls are the script's to make
    # (unslothai/unsloth:unsloth/models/loader.py@015bdef0d94a241bcd94eec7a405b1700632180d from_pretrained's
    # max_seq_length, load_in_4bit, full_finetuning; models/llama.py get_peft_model's use_gradient_checkpointing)
    w = lp.w
    load = f"FastLanguageModel.from_pretrained(max_seq_length={w.seq_len}, load_in_4bit={w.task == 'qlora'}"
    calls = (
        f'{load}), get_peft_model(r={w.lora_rank}, lora_alpha={w.effective_lora_alpha}, use_gradient_checkpointing="unsloth")'
        if w.task in ("lora", "qlora")
        else f"{load}, full_finetuning=True)"
    )
    head += [
        f"# {lp.script}: flags in TRL sft.py's spelling (trl/scripts/sft.py: ModelConfig, SFTConfig); the estimate "
        "assumes Unsloth's kernels, which the script must load itself:",
        f"#   {calls}; plain sft.py runs without them and needs more memory",
    ]
    # the precision in transformers TrainingArguments' spelling (--bf16 / --fp16, booleans that
    # HfArgumentParser reads; TRL's SFTConfig turns bf16 on unless told): fp16 on a card without BF16
    prec = {"bf16": ["--bf16"], "fp16": ["--fp16", "--bf16=False"]}.get(w.precision, [])
    argv = ["python", lp.script, *adapter_args(w), *trainer_args(w), *prec, *lp.script_args]
    return "\n".join(head) + "\n" + _shell_join(argv) + "\n"


def precheck(fmt: str, w: Workload, model: ModelSpec) -> None:
    """What a framework's own file cannot hold, refused before anything is estimated (one line): a
    model torchtitan has no architecture for, or torchtune no config for."""
    if fmt == "torchtitan" and w.is_training:
        check_torchtitan_model(model)
    if fmt == "torchtune" and w.task in ("finetune", "lora", "qlora"):
        tune_config(model.name, w.task if w.task != "finetune" else "full", w.num_gpus == 1)


def render(lp: LaunchPlan, fmt: str) -> str:
    return {"torchtitan": torchtitan, "nemo": nemo, "torchtune": torchtune, "unsloth": unsloth}[fmt](lp)


def default_format(framework: str | None) -> str:
    """The launch format a framework's own launch uses (data/frameworks.toml `launch`), or a clear
    refusal where the workload names none or the framework launches itself."""
    if framework is None:
        from gpuplan.interfaces.launch import FORMATS

        raise InvalidSettingError(
            f"Pass --format ({', '.join(FORMATS)}), or set framework: in the workload to write that framework's own "
            "launch."
        )
    fw = frameworks.frameworks()[framework]
    if fw.launch == "none":
        raise InvalidSettingError(
            f"{fw.title} starts its own processes (no launch file of its own): pass --format torchrun or slurm."
        )
    return fw.launch
