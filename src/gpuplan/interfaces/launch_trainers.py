"""Training configs for the YAML-driven fine-tuning trainers: an Axolotl config and a LLaMA-Factory
`llamafactory-cli train` config, written from the workload and its layout (both run Hugging Face
Trainer underneath, so only data parallelism: DDP, DeepSpeed ZeRO or FSDP).

Keys are the tools' own: Axolotl's config as its Llama 3 examples spell it
(axolotl-ai-cloud/axolotl:examples/llama-3/lora-8b.yml and qlora-fsdp-70b.yaml@9f824ef76af48eff9f69f3a93ede03a6a2b4313a /
ba1be71d70582bc0abf67ad604abb6739567f504; deepspeed_configs/zero{1,2,3}*.json ship with it) and
LLaMA-Factory's argument dataclasses (hiyouga/LLaMA-Factory:src/llamafactory/hparams/model_args.py@
cc22c045a7ffef31a3da6a32f189fd100d7c38b2 and ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30 (0.9.6.dev0):
flash_attn, enable_liger_kernel, disable_gradient_checkpointing, quantization_bit, quantization_type;
finetuning_args.py: stage, finetuning_type, lora_rank, lora_alpha, lora_dropout, lora_target; the examples'
deepspeed: examples/deepspeed/ds_z{2,3}[_offload]_config.json, or the DeepSpeed config inline where none
matches) plus transformers' TrainingArguments.
"""

from __future__ import annotations

import math
from typing import Any, Final

import yaml

from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces.launch import HF_OPTIM, RDZV_PORT, _check_data_parallel_only, _header, deepspeed_config
from gpuplan.planner.launch_plan import LaunchPlan
from gpuplan.specs.model import family_of
from gpuplan.specs.workload import Workload

TRAINER_FORMATS: Final = ("axolotl", "llama-factory")


def _check(w: Workload, fmt: str) -> None:
    """FSDP offloads parameters and optimizer states together (CPUOffload(offload_params=True))."""
    if w.zero == 3 and w.sharding == "fsdp" and w.offload == "optimizer":
        raise InvalidSettingError(
            f"{fmt}: FSDP offloads parameters and optimizer states together: set offload: optimizer+params, "
            "or sharding: deepspeed for optimizer-only offload."
        )


# (zero, offload) -> the DeepSpeed config each tool ships whose zero_optimization is exactly that stage
# and offload; read at axolotl-ai-cloud/axolotl:deepspeed_configs/zero1.json, zero2.json@58b1d3a4f449cae41d0ef7828b64ea0ea1b27ce2
# (zero2.json offloads the optimizer to the CPU), zero3_bf16.json@b371df79dcca2612c1f83f85bef6eefeb4dc56a2 and
# zero3_bf16_cpuoffload_all.json@64cfd87f49a62ebcde63728b14073f50ce8d8d5b (both pin bf16: enabled: true), and
# hiyouga/LLaMA-Factory:examples/deepspeed/ds_z{2,3}[_offload]_config.json@ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30
# (no ZeRO-1; ds_z3_offload offloads parameters and optimizer). Any other pair is written inline: both
# take a dict for `deepspeed` (axolotl's schema `deepspeed: str | dict`, transformers' TrainingArguments
# `deepspeed: dict | str`, which LLaMA-Factory parses the YAML into).
_SHIPPED_DS: Final[dict[str, dict[tuple[int, str], str]]] = {
    "axolotl": {(1, "none"): "deepspeed_configs/zero1.json", (2, "optimizer"): "deepspeed_configs/zero2.json",
                (3, "none"): "deepspeed_configs/zero3_bf16.json",
                (3, "optimizer+params"): "deepspeed_configs/zero3_bf16_cpuoffload_all.json"},
    "llama-factory": {(2, "none"): "examples/deepspeed/ds_z2_config.json",
                      (2, "optimizer"): "examples/deepspeed/ds_z2_offload_config.json",
                      (3, "none"): "examples/deepspeed/ds_z3_config.json",
                      (3, "optimizer+params"): "examples/deepspeed/ds_z3_offload_config.json"},
}  # fmt: skip
_OFFLOADED: Final = {"none": "no offload", "optimizer": "optimizer offloaded to CPU",
                     "optimizer+params": "optimizer and parameters offloaded to CPU"}  # fmt: skip


def _deepspeed(lp: LaunchPlan, tool: str) -> tuple[str | dict[str, Any], str]:
    """The `deepspeed` value for the tool's config (a shipped file whose ZeRO stage and offload are the
    workload's, else gpuplan's own DeepSpeed config inline) and a header line saying which."""
    w = lp.w
    what = f"ZeRO-{w.zero}, {_OFFLOADED[w.offload]}"
    name = _SHIPPED_DS[tool].get((w.zero, w.offload))
    if name is not None and ("zero3_bf16" not in name or w.precision in ("bf16", "fp8")):
        return name, f"deepspeed: {name} ({tool} ships it: {what})"
    cfg = deepspeed_config(lp)  # --format deepspeed's config; the Trainer fills the "auto" values
    cfg.pop("activation_checkpointing", None)  # the Trainer's gradient_checkpointing checkpoints instead
    auto = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping")
    cfg |= {k: "auto" for k in auto} | {"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}}
    return cfg, f"deepspeed: inline below ({what}; no config {tool} ships has exactly that)"


def _steps(w: Workload) -> int | None:
    return math.ceil(w.train_tokens / (w.batch_size * w.micro_batches * w.dp * w.seq_len)) if w.train_tokens else None


def _dump(lp: LaunchPlan, cfg: dict[str, Any], run: str, notes: tuple[str, ...] = (), data: _Data | None = None) -> str:
    head = "".join(f"# {x}\n" for x in (*_header(lp), *notes)) + f"# run: {run}\n"
    tail = (
        "" if data is None else "\n" + "".join(f"# {x}\n" for x in data[0]) + yaml.safe_dump(data[1], sort_keys=False)
    )
    return head + yaml.safe_dump(cfg, sort_keys=False) + tail


# The data keys each tool needs to start, written with a runnable example the user replaces: comment
# lines, then the keys (written last, under their comment: YAML keys have no order the tools read)
_Data = tuple[tuple[str, ...], dict[str, Any]]
_EDIT: Final = "EDIT: the data to train on; the value below is a small public example that runs as written"
# Axolotl: `datasets` (each a path and a prompt format) and output_dir, as its Llama 3 example writes them
# (axolotl-ai-cloud/axolotl:examples/llama-3/lora-8b.yml@9f824ef76af48eff9f69f3a93ede03a6a2b4313a:
# path mhenrichsen/alpaca_2k_test, type alpaca; output_dir ./outputs/lora-out; the schema's default
# output_dir is ./model-out). Pre-training reads plain text: the `completion` format, whose `field` names
# the column (src/axolotl/prompt_strategies/completion.py: ds_cfg["field"], default "text";
# docs/dataset-formats/pretraining.qmd@5035f0f6a84887cd8f2d5007335d649950c41ef4).
AXOLOTL_EXAMPLE_DATASET: Final = "mhenrichsen/alpaca_2k_test"
# LLaMA-Factory: `dataset` names entries of dataset_dir's dataset_info.json (dataset_dir "data": a LLaMA-Factory
# checkout's data/, which bundles the demo sets its examples train on: alpaca_en_demo in
# examples/train_lora/llama3_lora_sft.yaml@e8e6af26514272e29a50649b38182beb4db4ebfa, c4_demo in
# llama3_lora_pretrain.yaml@13d252fa7856ecb14ba6907e5adb10070e5cdde4); src/llamafactory/hparams/parser.py@
# 003a2acb1a2eb374a862c86eff9b967889a26e34 get_train_args: "Please specify dataset for training.". `template`
# formats the prompts of every stage but pt (older get_train_args: "Please specify which `template` to use.");
# its README: base models take default, alpaca, vicuna ..., instruct/chat models their own template.
LLAMA_FACTORY_EXAMPLE_DATASET: Final = {"pt": "c4_demo", "sft": "alpaca_en_demo"}


def _axolotl_data(w: Workload) -> _Data:
    pretrain = w.task == "pretrain"
    ds: dict[str, Any] = {"path": AXOLOTL_EXAMPLE_DATASET}
    ds |= {"type": "completion", "field": "output"} if pretrain else {"type": "alpaca"}
    what = "its output column as plain text (type: completion)" if pretrain else "instruction/response pairs"
    return (
        (_EDIT, f"({AXOLOTL_EXAMPLE_DATASET}: the small Alpaca-format set Axolotl's Llama 3 examples train on; here {what}).",
         "Replace path and type with your data's (docs: dataset-formats); output_dir is where checkpoints go."),
        {"datasets": [ds], "output_dir": "./outputs/gpuplan"},
    )  # fmt: skip


def _llama_factory_data(lp: LaunchPlan, stage: str) -> _Data:
    name = LLAMA_FACTORY_EXAMPLE_DATASET[stage]
    lines: tuple[str, ...] = (
        _EDIT,
        f"({name}: the demo set LLaMA-Factory bundles in data/; run from a LLaMA-Factory checkout, or set",
        "dataset_dir). Replace it with your dataset's name in data/dataset_info.json.",
    )
    if stage == "pt":  # plain text: no prompt template
        return lines, {"dataset": name}
    chat = any(t in lp.model_id.lower() for t in ("instruct", "-chat", "-it"))
    lines += (
        "template: the prompt format. `default` suits a base model; "
        + (f"{lp.model_id} is an instruct/chat model: set its own (e.g. llama3 for Llama 3 Instruct)."
           if chat else "an instruct/chat model needs its own (e.g. llama3 for Llama 3 Instruct)."),
    )  # fmt: skip
    return lines, {"dataset": name, "template": "default"}


def axolotl(lp: LaunchPlan) -> str:
    """An Axolotl config: adapter, LoRA, batch, optimizer, checkpointing, attention and the
    sharding (fsdp: [full_shard, auto_wrap] with fsdp_config, or a DeepSpeed JSON it ships)."""
    _check_data_parallel_only(lp, "Axolotl")
    w = lp.w
    _check(w, "axolotl")
    cfg: dict[str, Any] = {"base_model": lp.model_id, "load_in_8bit": False, "load_in_4bit": w.task == "qlora"}
    if w.task in ("lora", "qlora"):
        targets = w.lora_targets
        # lora_alpha: the workload's, unset 2 r (Workload.effective_lora_alpha); the estimate does not depend on it
        alpha = w.effective_lora_alpha
        cfg |= {"adapter": w.task, "lora_r": w.lora_rank, "lora_alpha": alpha, "lora_dropout": w.lora_dropout}
        cfg |= {"lora_target_linear": True} if targets == "all-linear" else {}
        cfg |= {"lora_target_modules": targets} if isinstance(targets, list) else {}
    cfg |= {
        "sequence_len": w.seq_len,
        "micro_batch_size": w.batch_size,
        "gradient_accumulation_steps": w.micro_batches,
        "optimizer": HF_OPTIM[w.optimizer],
        "bf16": w.precision in ("bf16", "fp8"),
        "fp16": w.precision == "fp16",
        "tf32": w.precision == "tf32",
        # TorchAO float8 training, tensorwise scaling (axolotl-ai-cloud/axolotl:docs/mixed_precision.qmd@
        # 319e57f50550593ba6b35777a358bf43930dcab2; the schema's `fp8: bool`); the framework refuses other recipes
        **({"fp8": True} if w.precision == "fp8" else {}),
        "gradient_checkpointing": w.activation_checkpointing != "none",
        "flash_attention": w.attention_impl != "eager",
        "torch_compile": w.compile,
    }
    if w.loss_impl == "fused":  # Liger's fused linear cross-entropy, through Axolotl's plugin
        cfg |= {"plugins": ["axolotl.integrations.liger.LigerPlugin"], "liger_fused_linear_cross_entropy": True}
    if (steps := _steps(w)) is not None:
        cfg["max_steps"] = steps
    if w.zero == 3 and w.sharding == "fsdp":
        fam = family_of(lp.model.model_type)
        layer = fam.fsdp_layer if fam is not None else None
        cfg["fsdp"] = ["full_shard", "auto_wrap"]
        cfg["fsdp_config"] = {
            "fsdp_offload_params": w.offload == "optimizer+params",
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_sync_module_states": True,
            "fsdp_use_orig_params": False,
            "fsdp_state_dict_type": "FULL_STATE_DICT",
            "fsdp_sharding_strategy": "FULL_SHARD",
            **(
                {"fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "fsdp_transformer_layer_cls_to_wrap": layer}
                if layer
                else {"fsdp_auto_wrap_policy": "SIZE_BASED_WRAP"}
            ),
        }
    notes: tuple[str, ...] = ()
    if w.zero >= 1 and not (w.zero == 3 and w.sharding == "fsdp"):
        cfg["deepspeed"], note = _deepspeed(lp, "axolotl")
        notes = (note,)
    # accelerate's --num_processes counts every machine's processes; several nodes also need the machine
    # count, this node's rank and the rank-0 address (huggingface/accelerate:src/accelerate/commands/
    # launch.py@16cb6eb80dd9aa8b4df1a63ef57863e455d53b83 --num_machines, --machine_rank, --main_process_ip/port)
    nodes = lp.cluster.nodes
    multi = (
        f"--num_machines {nodes} --machine_rank $NODE_RANK --main_process_ip $MASTER_ADDR "
        f"--main_process_port {RDZV_PORT} "
        if nodes > 1
        else ""
    )
    run = f"accelerate launch {multi}--num_processes {lp.cluster.num_gpus} -m axolotl.cli.train config.yml"
    return _dump(lp, cfg, run, notes, _axolotl_data(w))


def _llama_factory_fp8(w: Workload) -> dict[str, Any]:
    """`fp8: true` with the fp8_backend whose scaling is the workload's fp8_recipe: te is Transformer
    Engine's delayed scaling, torchao its rowwise Float8LinearConfig (hiyouga/LLaMA-Factory:src/llamafactory/
    hparams/training_args.py Fp8Arguments and train/fp8_utils.py@ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30);
    other recipes are refused with the framework, and fp8 with quantization by LLaMA-Factory's parser."""
    if w.precision != "fp8":
        return {}
    if w.task == "qlora":
        raise InvalidSettingError(
            "LLaMA-Factory refuses fp8 training with a quantized base (hparams/parser.py: 'FP8 training is not "
            "compatible with quantization'): use task: lora, or precision: bf16 for QLoRA."
        )
    backend = {"delayed": "te", "rowwise": "torchao"}.get(w.fp8_recipe)
    if backend is None:
        raise InvalidSettingError(
            f"LLaMA-Factory's fp8 backends run delayed (te) or rowwise (torchao) scaling, not {w.fp8_recipe}: "
            "set fp8_recipe: delayed or rowwise."
        )
    return {"fp8": True, "fp8_backend": backend}


def llama_factory(lp: LaunchPlan) -> str:
    """A `llamafactory-cli train` config: stage and finetuning type, LoRA, batch, optimizer,
    checkpointing, attention, the Liger loss, and DeepSpeed ZeRO from the configs it ships."""
    _check_data_parallel_only(lp, "LLaMA-Factory")
    w = lp.w
    _check(w, "llama-factory")
    if w.zero == 3 and w.sharding == "fsdp":
        raise InvalidSettingError(
            "LLaMA-Factory's configs shard with DeepSpeed (examples/deepspeed); for FSDP use --format accelerate "
            "with `accelerate launch ... src/train.py config.yaml`, or set sharding: deepspeed."
        )
    cfg: dict[str, Any] = {
        "model_name_or_path": lp.model_id,
        "stage": "pt" if w.task == "pretrain" else "sft",
        "do_train": True,
        "finetuning_type": "lora" if w.task in ("lora", "qlora") else "full",
    }
    if w.task in ("lora", "qlora"):
        targets = w.lora_targets
        cfg |= {"lora_rank": w.lora_rank, "lora_alpha": w.effective_lora_alpha, "lora_dropout": w.lora_dropout}
        cfg["lora_target"] = ",".join(targets) if isinstance(targets, list) else "all"
    if w.task == "qlora":
        # bitsandbytes NF4 on the fly; quantization_method is left at its default, which is bitsandbytes
        # in every release but spelled "bitsandbytes" before and "bnb" since hiyouga/LLaMA-Factory@c3c0efba
        # (src/llamafactory/extras/constants.py QuantizationMethod.BNB; model/model_utils/quantization.py
        # quantises only when quantization_method == QuantizationMethod.BNB, and a YAML string is not coerced)
        cfg |= {"quantization_bit": 4, "quantization_type": "nf4"}
    notes: tuple[str, ...] = ()
    if w.zero >= 1:
        cfg["deepspeed"], note = _deepspeed(lp, "llama-factory")
        notes = (note,)
    cfg |= {
        "cutoff_len": w.seq_len,
        "per_device_train_batch_size": w.batch_size,
        "gradient_accumulation_steps": w.micro_batches,
        "optim": HF_OPTIM[w.optimizer],
        "bf16": w.precision in ("bf16", "fp8"),
        "fp16": w.precision == "fp16",
        **_llama_factory_fp8(w),
        "flash_attn": "disabled" if w.attention_impl == "eager" else "auto",
        "disable_gradient_checkpointing": w.activation_checkpointing == "none",
        "enable_liger_kernel": w.loss_impl == "fused",
        "output_dir": "saves/gpuplan",
    }
    if (steps := _steps(w)) is not None:
        cfg["max_steps"] = steps
    nodes = lp.cluster.nodes
    env = "FORCE_TORCHRUN=1 " + (f"NNODES={nodes} NODE_RANK=$NODE_RANK MASTER_ADDR=$MASTER_ADDR " if nodes > 1 else "")
    return _dump(lp, cfg, f"{env}llamafactory-cli train config.yaml", notes, _llama_factory_data(lp, cfg["stage"]))


def render(lp: LaunchPlan, fmt: str) -> str:
    return {"axolotl": axolotl, "llama-factory": llama_factory}[fmt](lp)
