"""Launch files for the engines people run, written from a workload and its chosen layout.

Formats: a torchrun command line (Megatron-LM flags when the layout needs tensor, pipeline,
context or expert parallelism), an accelerate config (multi-GPU, DeepSpeed or FSDP), a DeepSpeed
JSON config, FSDP settings (as an accelerate FSDP config), a Slurm sbatch script, a SkyPilot task
and a `vllm serve` command. Keys and flags are the tools' own (accelerate's ClusterConfig,
DeepSpeed's config, SkyPilot's task schema, vLLM's EngineArgs, torch.distributed.run's parser,
Megatron-LM's arguments.py); the tests check them against the installed tools.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

import yaml

from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces.launch_megatron import megatron_args
from gpuplan.interfaces.quoting import ShellExpr, comment, sbatch_value, shell_join, shell_line
from gpuplan.planner.launch_plan import LaunchPlan
from gpuplan.safeio import clip
from gpuplan.specs.cluster import Cluster, gres_name
from gpuplan.specs.frameworks import OWN_FORMATS
from gpuplan.specs.gpu import bundled_catalog
from gpuplan.specs.model import family_of
from gpuplan.specs.precision import TORCHAO_INT4_GROUPS
from gpuplan.specs.request_lengths import tail_sequence_len
from gpuplan.specs.workload import Workload

FORMATS: Final = ("torchrun", "accelerate", "deepspeed", "fsdp", "slurm", "skypilot", "vllm", *OWN_FORMATS)
RDZV_PORT: Final = 29500
# Typical partition limit on university and cloud Slurm clusters (1-7 days); longer jobs get a note.
SITE_MAX_TIME_S: Final = 7 * 86400  # when there is nothing to estimate from (no tokens)

# vLLM --quantization for a weight format (vllm/model_executor/layers/quantization: fp8 quantises
# a 16-bit checkpoint on the fly; awq/gptq need such a checkpoint; bitsandbytes for nf4/int8;
# torchao loads a torchao-quantised checkpoint, TorchAOConfig).
VLLM_QUANT: Final = {
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "awq": "awq",
    "gptq": "gptq",
    "int4": "awq",
    "nf4": "bitsandbytes",
    "nvfp4": "modelopt_fp4",  # a ModelOpt NVFP4 checkpoint (nvidia/*-FP4 on the Hub)
    "mxfp4": "mxfp4",  # gpt-oss's MXFP4 MoE weights
    **{f"int4-g{g}": "torchao" for g in TORCHAO_INT4_GROUPS},
}
# Formats that write an adapter (LoRA/QLoRA) job: a PEFT script under torchrun/accelerate/FSDP/
# DeepSpeed, or a fine-tuning tool's own config (Megatron's pretrain_gpt.py and torchtitan train every
# weight; NeMo's finetune recipe writes LoRA, not QLoRA)
ADAPTER_FORMATS: Final = "torchrun, accelerate, fsdp, deepspeed, slurm or skypilot (with a PEFT script), axolotl, llama-factory, torchtune, unsloth or nemo (LoRA)"
VLLM_KV: Final = {"fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}


class _Dumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings (SkyPilot's setup/run scripts) as literal blocks."""


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def _yaml(obj: dict[str, Any]) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-")[:60] or "job"


def gres_type(cl: Cluster) -> str:
    """A Slurm GRES type name for the cluster's GPU (see gres_name); sites name their own, so
    `--gres-type` overrides it."""
    return gres_name(cl.gpu.name)


def fmt_time(seconds: float) -> str:
    """Slurm's D-HH:MM:SS."""
    s = math.ceil(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}"


def _uses_megatron(w: Workload) -> bool:
    return max(w.tp, w.pp, w.cp, w.ep, w.vp) > 1


def _torchrun_argv(lp: LaunchPlan, slurm: bool = False, sky: bool = False) -> list[str]:
    cl = lp.cluster
    argv = ["torchrun"]
    if sky:
        argv += [
            ShellExpr("--nnodes=$SKYPILOT_NUM_NODES"),
            ShellExpr("--nproc-per-node=$SKYPILOT_NUM_GPUS_PER_NODE"),
            ShellExpr("--node-rank=$SKYPILOT_NODE_RANK"),
            ShellExpr("--master-addr=$MASTER_ADDR"),
            f"--master-port={RDZV_PORT}",
        ]
    elif cl.nodes == 1:
        argv += ["--standalone", f"--nproc-per-node={cl.gpus_per_node}"]
    else:
        endpoint = "$HEAD_NODE" if slurm else "$MASTER_ADDR"
        argv += [
            f"--nnodes={cl.nodes}",
            f"--nproc-per-node={cl.gpus_per_node}",
            ShellExpr(f"--rdzv-id={'$SLURM_JOB_ID' if slurm else 'gpuplan'}"),
            "--rdzv-backend=c10d",
            ShellExpr(f"--rdzv-endpoint={endpoint}:{RDZV_PORT}"),
        ]
    return argv


def refuse_adapter(lp: LaunchPlan, what: str, why: str = "trains every weight") -> None:
    """An adapter job (LoRA/QLoRA) is never written as a full-weight launch."""
    if lp.w.task in ("lora", "qlora"):
        raise InvalidSettingError(
            f"{what} {why}, not a {lp.w.task} adapter; for task: {lp.w.task} use --format {ADAPTER_FORMATS}."
        )


def adapter_args(w: Workload, sharded: bool = False) -> list[str]:
    """The adapter as script arguments, in TRL's ModelConfig spelling (huggingface/trl
    trl/trainer/model_config.py@f2cd57710ae345ea6428ae95363267fcf38a3dc8: --use_peft, --lora_r,
    --lora_alpha, --lora_dropout, --lora_target_modules, --load_in_4bit, --bnb_4bit_quant_type,
    --bnb_4bit_quant_storage), which trl/scripts/sft.py and HfArgumentParser scripts read; lora_alpha
    is the workload's (unset: 2 r, Workload.effective_lora_alpha), which the estimate does not use. `sharded`: the 4-bit base is sharded (FSDP, or
    ZeRO-3), which shards float tensors only, so the packed NF4 weights are stored in the model's
    dtype (bitsandbytes-foundation/bitsandbytes:docs/source/fsdp_qlora.md@0.50.2, "Quantized data
    storage"; huggingface/peft:examples/sft/run_peft_qlora_fsdp.sh@5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40)."""
    if w.task not in ("lora", "qlora"):
        return []
    a = [
        "--use_peft",
        f"--lora_r={w.lora_rank}",
        f"--lora_alpha={w.effective_lora_alpha}",
        f"--lora_dropout={w.lora_dropout:g}",
    ]
    if w.lora_targets != "default":  # "default": PEFT's own targets for the model type
        a += ["--lora_target_modules", *(w.lora_targets if isinstance(w.lora_targets, list) else [w.lora_targets])]
    if w.task == "qlora":  # a 4-bit NF4 base (transformers BitsAndBytesConfig)
        a += ["--load_in_4bit", "--bnb_4bit_quant_type=nf4"]
        if sharded:
            a.append(f"--bnb_4bit_quant_storage={QUANT_STORAGE.get(w.precision, 'bfloat16')}")
    return a


# the 4-bit storage dtype a sharded QLoRA base uses: the model's own (torch dtype names)
QUANT_STORAGE: Final = {"fp16": "float16", "fp32": "float32", "tf32": "float32"}
# gpuplan optimizer -> transformers' OptimizerNames (training_args.py), which TrainingArguments,
# TRL's SFTConfig, Axolotl and LLaMA-Factory take
HF_OPTIM: Final = {
    "adamw": "adamw_torch_fused",
    "adamw-foreach": "adamw_torch",
    "adam": "adamw_torch",
    "adamw-8bit": "adamw_bnb_8bit",
    "paged-adamw": "paged_adamw_32bit",
    "paged-adamw-8bit": "paged_adamw_8bit",
    "sgd": "sgd",
    "sgd-momentum": "sgd",
    "adafactor": "adafactor",
    "lion": "lion_32bit",
    "lion-8bit": "lion_8bit",
    "paged-lion-8bit": "paged_lion_8bit",
}


def trainer_args(w: Workload) -> list[str]:
    """The batch, sequence length, checkpointing and optimizer the estimate assumed, as TRL sft.py's
    SFTConfig flags (transformers TrainingArguments: --per_device_train_batch_size,
    --gradient_accumulation_steps, --gradient_checkpointing, --optim; SFTConfig: --max_length, default
    1024, and gradient_checkpointing on by default: huggingface/trl trl/trainer/sft_config.py@
    f2cd57710ae345ea6428ae95363267fcf38a3dc8). Checkpointing in transformers is every layer or none."""
    return [
        f"--per_device_train_batch_size={w.batch_size}",
        f"--gradient_accumulation_steps={w.micro_batches}",
        f"--max_length={w.seq_len}",
        f"--gradient_checkpointing={w.activation_checkpointing != 'none'}",
        f"--optim={HF_OPTIM[w.optimizer]}",
    ]


def _sharded(lp: LaunchPlan) -> bool:
    """Whether the base weights are sharded over several GPUs (ZeRO-3 / FSDP FULL_SHARD)."""
    return lp.w.zero == 3 and lp.cluster.num_gpus > 1


def peft_script(lp: LaunchPlan, fsdp: bool = False) -> list[str]:
    """An adapter job's script and its TRL sft.py arguments: the adapter, then the training settings."""
    return [lp.script, *adapter_args(lp.w, fsdp or _sharded(lp)), *trainer_args(lp.w), *lp.script_args]


def _runs_megatron(lp: LaunchPlan) -> bool:
    """Whether the command runs Megatron-LM's pretrain_gpt.py."""
    megatron = _uses_megatron(lp.w) or lp.w.framework == "megatron"
    return lp.script.endswith("pretrain_gpt.py") or (megatron and lp.script == "train.py")


def _script(lp: LaunchPlan) -> list[str]:
    args = list(lp.script_args)
    if _runs_megatron(lp):
        refuse_adapter(lp, f"Megatron-LM's pretrain_gpt.py (layout {lp.layout_label})")
        # a fine-tune starts from the converted checkpoint: --load with --finetune (no optimizer or
        # iteration state from it), --no-load-optim/--no-load-rng (megatron/training/arguments.py)
        tune = ["--finetune", ShellExpr("--load=$CHECKPOINT_DIR"), "--no-load-optim", "--no-load-rng"]
        return ["pretrain_gpt.py", *megatron_args(lp), *(tune if lp.w.task == "finetune" else []), *args]
    if lp.w.task in ("lora", "qlora"):  # a PEFT script (TRL sft.py's flags)
        return peft_script(lp)
    return [lp.script, *args]


def _shell_join(parts: list[str]) -> str:
    """Words joined with line continuations: each one shell word (quoting.shell_word); only the
    $VARS gpuplan writes itself (ShellExpr) are left for the shell to expand."""
    return shell_join(parts)


def _header(lp: LaunchPlan) -> list[str]:
    """The header comment's lines, each one line whatever the names in it hold (quoting.comment)."""
    return [comment(line) for line in _header_text(lp)]


FIT_WARNING: Final = "WARNING: does not fit"


def fit_warning(lp: LaunchPlan) -> str | None:
    """The warning a file for a job that does not fit carries (only `launch --force` writes one), or
    None where it fits: the memory it needs against the GPU's usable memory, or the KV budget's lack."""
    m, cap = lp.memory, lp.memory.capacity_bytes
    if m.fits or cap is None:
        return None
    why = (
        f"{m.on_card_bytes / 2**30:.1f} GiB needed, {cap / 2**30:.1f} GiB usable per GPU"
        if m.on_card_bytes > cap or m.serving is None
        else f"{m.serving.limit} lacks {m.kv_short_bytes / 2**30:.2f} GiB for one sequence"
    )
    return f"{FIT_WARNING} ({why}); written because of --force, it would not run"


def _header_text(lp: LaunchPlan) -> list[str]:
    w = lp.w
    # only `launch --force` writes a job that does not fit: the file's first comment line says so
    warn = [x for x in (fit_warning(lp),) if x]
    lines = [
        *warn,
        f"gpuplan: {lp.model.name} {w.task} ({w.precision}) on {lp.cluster.nodes} x {lp.cluster.gpus_per_node} {lp.cluster.gpu.name}",
        f"layout: {lp.layout_label}",
    ]
    if lp.training:
        t = lp.training
        lines.append(
            f"estimate: step {t.step_time_s:.3g} s, {t.tokens_per_s:,.0f} tokens/s, MFU {t.mfu:.1%}, "
            f"{lp.memory.per_gpu_bytes / 2**30:.1f} GiB per GPU"
        )
    if lp.inference:
        i = lp.inference
        lines.append(
            f"estimate: TTFT {i.ttft_single_s * 1e3:.0f} ms (one request), {i.tpot_s * 1e3:.1f} ms/token, "
            f"{lp.memory.per_gpu_bytes / 2**30:.1f} GiB per GPU"
        )
    if w.task in ("lora", "qlora"):
        lines.append(adapter_line(w))
    if w.task == "finetune" and w.is_training and _runs_megatron(lp):
        lines.append("fine-tune: set CHECKPOINT_DIR to the model's checkpoint converted to Megatron's format (--load)")
    return lines + list(lp.notes) + [n for n in (lp.remote_code_note, lp.checkpoint_note) if n]


def adapter_line(w: Workload) -> str:
    """The adapter the script must build (PEFT LoraConfig; a 4-bit NF4 base for QLoRA)."""
    targets = ",".join(w.lora_targets) if isinstance(w.lora_targets, list) else str(w.lora_targets)
    # the 4-bit kernel the estimate assumed: bitsandbytes, or torchao's NF4Tensor (torchtune)
    base = (
        f"4-bit NF4 ({'torchao NF4Tensor' if w.qlora_kernel == 'torchao' else 'bitsandbytes'})"
        if w.task == "qlora"
        else w.precision
    )
    return (
        f"adapter: {w.task} r={w.lora_rank} alpha={w.effective_lora_alpha} dropout={w.lora_dropout:g} targets={targets} "
        f"on a frozen {base} base"
    )


def _peft_run(lp: LaunchPlan, launcher: str, fsdp: bool = False) -> str:
    """For an adapter job's config file: the command that runs the PEFT script with the adapter."""
    if lp.w.task not in ("lora", "qlora"):
        return ""
    return "# " + comment(f"run: {launcher} {shell_line(peft_script(lp, fsdp))}") + "\n"


def torchrun(lp: LaunchPlan) -> str:
    cmd = _torchrun_argv(lp) + _script(lp)
    head = "\n".join(f"# {x}" for x in _header(lp))
    env = "" if lp.cluster.nodes == 1 else "# run on every node with MASTER_ADDR set to the first node's address\n"
    return f"{head}\n{env}{_shell_join(cmd)}\n"


def deepspeed_config(lp: LaunchPlan) -> dict[str, Any]:
    """A DeepSpeed config (deepspeed/runtime/config.py and zero/config.py keys)."""
    w = lp.w
    zero: dict[str, Any] = {"stage": w.zero, "overlap_comm": True, "contiguous_gradients": True}
    if w.zero >= 1:
        zero["reduce_scatter"] = True
        zero["reduce_bucket_size"] = 5e8
    if w.zero >= 2:
        zero["allgather_partitions"] = True
        zero["allgather_bucket_size"] = 5e8
    if w.zero == 3:
        zero["stage3_prefetch_bucket_size"] = 5e8
        zero["stage3_param_persistence_threshold"] = 1e6
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    if w.offload in ("optimizer", "optimizer+params"):
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if w.offload == "optimizer+params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    cfg: dict[str, Any] = {
        "train_batch_size": w.batch_size * w.micro_batches * w.dp,
        "train_micro_batch_size_per_gpu": w.batch_size,
        "gradient_accumulation_steps": w.micro_batches,
        "gradient_clipping": 1.0,
        "zero_optimization": zero,
        "bf16": {"enabled": w.precision in ("bf16", "fp8")},
        "fp16": {"enabled": w.precision == "fp16", "loss_scale": 0, "initial_scale_power": 16},
        "steps_per_print": 100,
        "wall_clock_breakdown": False,
    }
    if w.activation_checkpointing != "none":
        cfg["activation_checkpointing"] = {"partition_activations": w.tp > 1, "contiguous_memory_optimization": False}
    return cfg


def deepspeed(lp: LaunchPlan) -> str:
    if lp.w.precision == "fp8":  # deepspeed/runtime/config.py (0.19.8) reads bf16 and fp16 sections, no fp8
        raise InvalidSettingError(
            "--format deepspeed writes DeepSpeed's own JSON, which has bf16 and fp16 sections but no fp8 one: "
            "the job would train in bf16, not the fp8 estimated; use --format accelerate (mixed_precision fp8), "
            "framework: megatron, nemo or torchtitan, or precision: bf16."
        )
    return json.dumps(deepspeed_config(lp), indent=2) + "\n"


def _accelerate_base(lp: LaunchPlan, distributed_type: str) -> dict[str, Any]:
    w, cl = lp.w, lp.cluster
    mp = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}.get(w.precision, "no")
    cfg: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": distributed_type,
        "mixed_precision": mp,
        "downcast_bf16": "no",
        "num_machines": cl.nodes,
        "num_processes": cl.num_gpus,
        "machine_rank": 0,
        "gpu_ids": "all",
        "rdzv_backend": "static" if cl.nodes == 1 else "c10d",
        "same_network": True,
        "main_training_function": "main",
        "use_cpu": False,
    }
    if cl.nodes > 1:
        cfg["main_process_ip"] = "MASTER_ADDR"
        cfg["main_process_port"] = RDZV_PORT
    return cfg


def _fsdp_section(lp: LaunchPlan) -> dict[str, Any]:
    w, m = lp.w, lp.model
    strategy = {3: "FULL_SHARD", 2: "SHARD_GRAD_OP", 1: "SHARD_GRAD_OP", 0: "NO_SHARD"}[w.zero]
    sec: dict[str, Any] = {
        "fsdp_version": 1,
        "fsdp_sharding_strategy": strategy,
        "fsdp_backward_prefetch": "BACKWARD_PRE",
        "fsdp_forward_prefetch": False,
        "fsdp_offload_params": w.offload == "optimizer+params",
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        "fsdp_sync_module_states": True,
        "fsdp_cpu_ram_efficient_loading": True,
        # QLoRA: False, as the FSDP-QLoRA configs run it (huggingface/peft:examples/sft/configs/
        # fsdp_config_qlora.yaml@5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40)
        "fsdp_use_orig_params": w.task != "qlora",
        "fsdp_activation_checkpointing": w.activation_checkpointing != "none",
    }
    fam = family_of(m.model_type)  # its transformers layer class: the family table (specs/model/families.py)
    layer = fam.fsdp_layer if fam is not None else None
    if layer:
        sec["fsdp_auto_wrap_policy"] = "TRANSFORMER_BASED_WRAP"
        sec["fsdp_transformer_layer_cls_to_wrap"] = layer
    else:
        sec["fsdp_auto_wrap_policy"] = "SIZE_BASED_WRAP"
        sec["fsdp_min_num_params"] = 100_000_000
    return sec


def _check_data_parallel_only(lp: LaunchPlan, fmt: str) -> None:
    if _uses_megatron(lp.w):
        raise InvalidSettingError(
            f"The layout {lp.layout_label} uses tensor/pipeline/context/expert parallelism, which {fmt} does not "
            "provide; use --format torchrun or slurm (Megatron-LM flags), or set tp/pp/cp/ep to 1."
        )


def accelerate(lp: LaunchPlan) -> str:
    """accelerate's config file: MULTI_GPU (DDP), DEEPSPEED (ZeRO-1/2, optimizer offload, or
    sharding: deepspeed) or FSDP (ZeRO-3, parameters and optimizer offloaded together)."""
    _check_data_parallel_only(lp, "accelerate")
    w = lp.w
    fsdp = w.zero == 3 and w.sharding == "fsdp" and w.offload != "optimizer"  # FSDP offloads params with optimizer
    if fsdp:
        cfg = _accelerate_base(lp, "FSDP")
        cfg["fsdp_config"] = _fsdp_section(lp)
    elif w.zero >= 1 or w.offload != "none":
        cfg = _accelerate_base(lp, "DEEPSPEED")
        ds: dict[str, Any] = {
            "zero_stage": w.zero,
            "gradient_accumulation_steps": w.micro_batches,
            "gradient_clipping": 1.0,
            "offload_optimizer_device": "cpu" if w.offload != "none" else "none",
            "offload_param_device": "cpu" if w.offload == "optimizer+params" else "none",
            "zero3_init_flag": w.zero == 3,
        }
        if w.zero == 3:
            ds["zero3_save_16bit_model"] = True
        if lp.cluster.nodes > 1:
            ds["deepspeed_multinode_launcher"] = "standard"
        cfg["deepspeed_config"] = ds
    else:
        cfg = _accelerate_base(lp, "MULTI_GPU" if lp.cluster.num_gpus > 1 else "NO")
    run = _peft_run(lp, "accelerate launch --config_file accelerate.yaml", fsdp)
    return "# " + "\n# ".join(_header(lp)) + "\n" + run + _yaml(cfg)


def fsdp(lp: LaunchPlan) -> str:
    """FSDP settings, as accelerate's FSDP config (the sharding strategy from the ZeRO stage)."""
    _check_data_parallel_only(lp, "FSDP")
    cfg = _accelerate_base(lp, "FSDP")
    cfg["fsdp_config"] = _fsdp_section(lp)
    run = _peft_run(lp, "accelerate launch --config_file fsdp.yaml", lp.cluster.num_gpus > 1)
    return "# " + "\n# ".join(_header(lp)) + "\n" + run + _yaml(cfg)


def slurm(lp: LaunchPlan, partition: str | None = None, gres: str | None = None, time_limit: str | None = None) -> str:
    cl = lp.cluster
    secs, why = lp.time_limit_s, lp.time_limit_note
    limit = sbatch_value(time_limit, "--time") if time_limit is not None else fmt_time(secs)
    if partition is not None:
        sbatch_value(partition, "--partition")
    if gres is not None:
        sbatch_value(gres, "--gres-type")
    cpus = 8 if cl.gpus_per_node <= 4 else 16
    lines = ["#!/bin/bash"]
    lines += [f"# {x}" for x in _header(lp)]
    lines.append(comment(f"# --time: {why}"))
    if time_limit is None and secs > SITE_MAX_TIME_S:
        lines.append(
            "# longer than most partitions allow (1-7 days): set --time to your limit and chain jobs that resume "
            "from checkpoints (sbatch --dependency=afterany:JOBID)"
        )
    lines += [
        f"#SBATCH --job-name=gpuplan-{_slug(lp.model.name)}",
        f"#SBATCH --nodes={cl.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gres=gpu:{gres or gres_type(cl)}:{cl.gpus_per_node}",
        f"#SBATCH --cpus-per-task={cpus}",
        f"#SBATCH --time={limit}",
        "#SBATCH --output=%x-%j.out",
    ]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    lines += [
        "",
        "set -euo pipefail",
        'HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export HEAD_NODE",
    ]
    if cl.nodes > 1 and cl.fabric.rdma:
        lines.append("export NCCL_IB_DISABLE=0  # RDMA fabric: " + cl.fabric.name)
    elif cl.nodes > 1:
        lines.append("export NCCL_IB_DISABLE=1  # no RDMA: NCCL over TCP sockets")
    lines.append("")
    lines.append("srun " + _shell_join(_torchrun_argv(lp, slurm=True) + _script(lp)))
    return "\n".join(lines) + "\n"


def skypilot(lp: LaunchPlan) -> str:
    cl = lp.cluster
    name = cl.gpu.skypilot_name  # the catalog row's (data/gpus/*.toml), sourced like its other values
    if name is None:
        raise InvalidSettingError(
            f"SkyPilot lists no accelerator for {clip(cl.gpu.name)}; pick one of "
            f"{', '.join(sorted({g.skypilot_name for g in bundled_catalog() if g.skypilot_name}))}, "
            "or give the GPU's catalog row a skypilot_name."
        )
    run = ['MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)']
    run.append(shell_line(_torchrun_argv(lp, sky=True) + _script(lp)))
    task: dict[str, Any] = {
        "name": f"gpuplan-{_slug(lp.model.name)}",
        "resources": {"accelerators": f"{name}:{cl.gpus_per_node}"},
        "num_nodes": cl.nodes,
        "workdir": ".",
        "setup": "pip install -r requirements.txt\n",
        "run": "\n".join(run) + "\n",
    }
    return "# " + "\n# ".join(_header(lp)) + "\n" + _yaml(task)


def vllm_argv(lp: LaunchPlan) -> list[str]:
    w = lp.w
    # a local folder named like an option ("--trust-remote-code") would reach vLLM's parser as one;
    # "./" keeps it the same folder (a hub id never starts with "-": huggingface_hub validate_repo_id)
    model = f"./{lp.model_id}" if lp.model_id.startswith("-") else lp.model_id
    argv = ["vllm", "serve", model, f"--tensor-parallel-size={w.tp}"]
    if w.pp > 1:
        argv.append(f"--pipeline-parallel-size={w.pp}")
    dp = w.dp
    if dp > 1:
        argv.append(f"--data-parallel-size={dp}")  # replicas; with experts spread, attention data parallel
    if w.ep > 1:
        # vLLM's expert parallelism spans every GPU of the tensor x data parallel group (EP = TP x DP)
        if w.ep != w.tp * dp:
            raise InvalidSettingError(
                f"vLLM spreads the experts over all tp x dp = {w.tp} x {dp} = {w.tp * dp} GPUs (--enable-expert-"
                f"parallel); ep={w.ep} is another split. Set ep: {w.tp * dp}, or leave ep at 1."
            )
        argv.append("--enable-expert-parallel")
    argv.append(f"--max-model-len={tail_sequence_len(w)}")  # the tail request, input_len_p90 + output_len_p90 if set
    argv.append(f"--gpu-memory-utilization={w.gpu_memory_utilization:g}")
    argv.append(f"--max-num-seqs={w.batch_size}")
    if w.enforce_eager:
        argv.append("--enforce-eager")
    # bf16 needs compute capability 8.0 (vllm/worker/worker.py _check_if_gpu_supports_dtype)
    half = w.precision == "fp16" or not lp.cluster.gpu.supports("bf16")
    argv.append(f"--dtype={'float16' if half else 'bfloat16'}")
    # a pre-quantised checkpoint (config.json's quantization_config) is detected by vLLM itself
    q = None if lp.weights_from_checkpoint else VLLM_QUANT.get(lp.weight_format)
    if q:
        argv.append(f"--quantization={q}")
    kv = VLLM_KV.get(w.effective_kv_dtype)
    if kv:
        argv.append(f"--kv-cache-dtype={kv}")
    return argv


def vllm(lp: LaunchPlan) -> str:
    if lp.w.is_training:
        raise InvalidSettingError("vllm serves models: --format vllm needs task: inference.")
    head = "\n".join(f"# {x}" for x in _header(lp))
    multi = (
        "# several nodes: start a Ray cluster across them first (vLLM's multi-node serving)\n"
        if lp.cluster.nodes > 1
        else ""
    )
    return f"{head}\n{multi}{_shell_join(vllm_argv(lp))}\n"


def render(lp: LaunchPlan, fmt: str, **slurm_opts: str | None) -> str:
    if fmt not in FORMATS:
        raise InvalidSettingError(f"Unknown launch format {fmt!r}. Known: {', '.join(FORMATS)}.")
    if fmt == "slurm":
        return slurm(lp, **slurm_opts)
    if fmt in OWN_FORMATS:  # a framework's own file (interfaces/launch_frameworks.py, launch_trainers.py)
        from gpuplan.interfaces import launch_frameworks, launch_trainers

        if fmt in launch_trainers.TRAINER_FORMATS:
            return launch_trainers.render(lp, fmt)
        return launch_frameworks.render(lp, fmt)
    return {
        "torchrun": torchrun,
        "accelerate": accelerate,
        "deepspeed": deepspeed,
        "fsdp": fsdp,
        "skypilot": skypilot,
        "vllm": vllm,
    }[fmt](lp)
