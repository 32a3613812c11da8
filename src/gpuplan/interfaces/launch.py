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
from collections.abc import Mapping
from typing import Any, Final

import yaml

from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces.quoting import ShellExpr, ShellWords, comment, sbatch_value, shell_join, shell_line
from gpuplan.planner.launch_plan import LaunchPlan
from gpuplan.safeio import clip
from gpuplan.specs.cluster import Cluster, gres_name
from gpuplan.specs.frameworks import OWN_FORMATS
from gpuplan.specs.gpu import bundled_catalog
from gpuplan.specs.model import ModelSpec, family_of
from gpuplan.specs.precision import TORCHAO_INT4_GROUPS
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
MEGATRON_ATTENTION: Final = {"flash": "flash", "fa3": "fused", "eager": "unfused"}
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


def pipeline_layout(layers: int, stages: int) -> str:
    """Megatron-Core's --pipeline-model-parallel-layout for `layers` decoder layers over `stages`
    virtual stages (pp x vp, in model order): the embedding (E) opens the first, the loss (L) closes
    the last, and the layers spread as evenly as they go, the spare ones to the middle stages, then
    to the first (the embedding is a cheap lookup) before the last (the head and the loss)
    (megatron/core/transformer/pipeline_parallel_layer_layout.py: "t" a decoder layer, "|" a stage)."""
    base, extra = divmod(layers, stages)
    counts = [base] * stages
    order = [*range(1, stages - 1), 0, stages - 1] if stages > 2 else list(range(stages))
    for i in order[:extra]:
        counts[i] += 1
    parts = ["t" * c for c in counts]
    parts[0] = "E" + parts[0]
    parts[-1] = parts[-1] + "L"
    return "|".join(parts)


def _megatron_shape_args(m: ModelSpec) -> list[str]:
    """The model-shape flags Megatron cannot infer (megatron/core/transformer/transformer_config.py,
    exposed as arguments): head size where it is not hidden / heads, q/k norms, and a MoE model's
    expert, shared-expert and dense widths and which layers hold experts (Megatron's
    moe_ffn_hidden_size defaults to ffn_hidden_size, the dense width)."""
    a: list[str] = []
    dense, expert, shared = m.ffn_widths()
    ffn = dense or m.intermediate_size
    if ffn:
        a.append(f"--ffn-hidden-size {ffn}")
    if m.attention_type != "mla" and m.num_heads and m.head_dim != m.hidden_size // m.num_heads:
        a.append(f"--kv-channels {m.head_dim}")
    if m.num_kv_heads and m.num_kv_heads != m.num_heads:
        a += ["--group-query-attention", f"--num-query-groups {m.num_kv_heads}"]
    if m.attention_type == "mla":
        a += _mla_args(m.config)
    fam = family_of(m.model_type)  # its Megatron flags: the family table (specs/model/families.py)
    if fam is not None and fam.megatron.qk_layernorm:
        a.append("--qk-layernorm")  # Qwen3: RMSNorm over each head's q and k
    if fam is not None and fam.megatron.qk_l2_norm:
        text = m.config.get("text_config", m.config) if m.model_type == "llama4" else m.config
        if isinstance(text, dict) and text.get("use_qk_norm", True):
            a.append("--qk-l2-norm")  # Llama 4: weightless L2 norm of q and k on the RoPE layers
        # RoPE skipped on every 4th layer (transformers Llama4TextConfig no_rope_layer_interval 4)
        if m.num_layers % 4 == 0 and [a_.window is None for a_ in m.attention_layers] == [
            (i + 1) % 4 == 0 for i in range(m.num_layers)
        ]:
            a.append("--no-rope-freq 4")
    if m.is_moe:
        a += [f"--num-experts {m.num_experts}", f"--moe-router-topk {m.experts_per_token}"]
        if expert:
            a.append(f"--moe-ffn-hidden-size {expert}")
        if shared:
            a.append(f"--moe-shared-expert-intermediate-size {shared}")
        a += _router_args(m.config)
        ids = set(m.moe_layer_ids)
        if len(ids) != m.num_layers:
            # Megatron's --moe-layer-freq pattern: 1 an expert layer, 0 a dense one, in layer order
            a += ["--moe-layer-freq", moe_layer_pattern([i in ids for i in range(m.num_layers)])]  # quoted
    return a


def _mla_args(cfg: Mapping[str, Any]) -> list[str]:
    """DeepSeek-V2/V3 multi-latent attention (Megatron-Core MLATransformerConfig, as its DeepSeek-V3
    example sets it: low-rank q and kv, nope / rope / value head sizes, and the q_a / kv_a norms
    as --qk-layernorm)."""
    a = ["--multi-latent-attention"]
    if cfg.get("q_lora_rank"):
        a.append(f"--q-lora-rank {cfg['q_lora_rank']}")
    for key, flag in (("kv_lora_rank", "kv-lora-rank"), ("qk_nope_head_dim", "qk-head-dim"),
                      ("qk_rope_head_dim", "qk-pos-emb-head-dim"), ("v_head_dim", "v-head-dim")):  # fmt: skip
        if isinstance(cfg.get(key), int):
            a.append(f"--{flag} {cfg[key]}")
    if isinstance(cfg.get("v_head_dim"), int):
        a.append(f"--kv-channels {cfg['v_head_dim']}")
    return [*a, "--qk-layernorm"]


def _router_args(cfg: Mapping[str, Any]) -> list[str]:
    """The router as the config describes it (DeepSeek-V3: sigmoid scores, experts picked within the
    best 4 of 8 groups, weights scaled by 2.5, an expert bias for aux-loss-free balancing)."""
    a: list[str] = []
    if cfg.get("scoring_func") == "sigmoid":
        a.append("--moe-router-score-function sigmoid")
    if isinstance(cfg.get("n_group"), int) and isinstance(cfg.get("topk_group"), int) and cfg["n_group"] > 1:
        a += [f"--moe-router-num-groups {cfg['n_group']}", f"--moe-router-group-topk {cfg['topk_group']}"]
    factor = cfg.get("routed_scaling_factor")
    if isinstance(factor, int | float) and not isinstance(factor, bool) and factor != 1:
        a.append(f"--moe-router-topk-scaling-factor {factor:g}")
    if cfg.get("topk_method") == "noaux_tc":
        a.append("--moe-router-enable-expert-bias")
    return a


def moe_layer_pattern(is_moe: list[bool]) -> str:
    """A Python list expression of 1s (expert layers) and 0s (dense) that Megatron evaluates
    (megatron/training/arguments.py moe_freq_type): a repeated unit when the layers repeat one,
    else runs, e.g. "([0,1]*24)" or "([0]*3+[1]*58)"."""
    bits = [int(b) for b in is_moe]
    n = len(bits)
    for unit in range(1, n // 2 + 1):
        if n % unit == 0 and bits == bits[:unit] * (n // unit):
            return f"([{','.join(map(str, bits[:unit]))}]*{n // unit})"
    runs: list[str] = []
    i = 0
    while i < n:
        j = i
        while j < n and bits[j] == bits[i]:
            j += 1
        runs.append(f"[{bits[i]}]*{j - i}")
        i = j
    return f"({'+'.join(runs)})"


def _megatron_args(lp: LaunchPlan) -> list[str]:
    """Megatron-LM pretrain_gpt.py flags (megatron/training/arguments.py) for the model and layout."""
    w, m = lp.w, lp.model
    a = [
        f"--tensor-model-parallel-size {w.tp}",
        f"--pipeline-model-parallel-size {w.pp}",
    ]
    stages = w.pp * w.vp
    if w.pp > 1 and m.num_layers % stages == 0:
        if w.vp > 1:
            a.append(f"--num-layers-per-virtual-pipeline-stage {m.num_layers // stages}")
    elif w.pp > 1 and (m.num_layers + 2) % stages == 0:  # layers + embedding + loss split evenly
        a += [
            *([f"--num-virtual-stages-per-pipeline-rank {w.vp}"] if w.vp > 1 else []),
            "--account-for-embedding-in-pipeline-split",
            "--account-for-loss-in-pipeline-split",
        ]
    elif w.pp > 1:  # an uneven split, spelled out stage by stage
        a += ["--pipeline-model-parallel-layout", pipeline_layout(m.num_layers, stages)]  # quoted: "|"
    if w.cp > 1:
        a.append(f"--context-parallel-size {w.cp}")
    if w.ep > 1:
        a.append(f"--expert-model-parallel-size {w.ep}")
    if w.etp is not None:
        a.append(f"--expert-tensor-parallel-size {w.etp}")
    if w.sequence_parallel:
        a.append("--sequence-parallel")
    if w.tp_comm_overlap:  # Transformer Engine userbuffers (megatron/training/arguments.py)
        a.append("--tp-comm-overlap")
    if w.zero >= 1:
        a.append("--use-distributed-optimizer")
    a += [
        f"--num-layers {m.num_layers}",
        f"--hidden-size {m.hidden_size}",
        f"--num-attention-heads {m.num_heads}",
        f"--seq-length {w.seq_len}",
        f"--max-position-embeddings {max(w.seq_len, m.max_position_embeddings or 0)}",
        f"--micro-batch-size {w.batch_size}",
        f"--global-batch-size {w.batch_size * w.micro_batches * w.dp}",
    ]
    a += _megatron_shape_args(m)
    fam = family_of(m.model_type)
    if fam is not None and fam.megatron.llama:
        # Llama-style blocks: SwiGLU MLP, RMSNorm, rotary positions, no biases, untied head
        a += ["--swiglu", "--normalization RMSNorm", "--position-embedding-type rope", "--disable-bias-linear"]
        if not m.tie_word_embeddings:
            a.append("--untie-embeddings-and-output-weights")
    # the attention kernel the estimate assumed (megatron/core/transformer/enums.py AttnBackend):
    # flash-attn, Transformer Engine's cuDNN fused attention, or the unfused softmax
    a.append(f"--attention-backend {MEGATRON_ATTENTION[w.attention_impl]}")
    if w.activation_checkpointing == "selective":
        a.append("--recompute-granularity selective")
    elif w.activation_checkpointing == "full":
        a += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    a.append({"bf16": "--bf16", "fp16": "--fp16", "fp8": "--bf16 --fp8-format hybrid"}.get(w.precision, ""))
    if w.train_tokens:
        iters = math.ceil(w.train_tokens / (w.batch_size * w.micro_batches * w.dp * w.seq_len))
        a.append(f"--train-iters {iters}")
    return [ShellWords(x) for x in a if x]  # "--flag value" items: each word quoted on its own


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


def _script(lp: LaunchPlan) -> list[str]:
    args = list(lp.script_args)
    megatron = _uses_megatron(lp.w) or lp.w.framework == "megatron"
    if lp.script.endswith("pretrain_gpt.py") or (megatron and lp.script == "train.py"):
        return ["pretrain_gpt.py", *_megatron_args(lp), *args]
    return [lp.script, *args]


def _shell_join(parts: list[str]) -> str:
    """Words joined with line continuations: each one shell word (quoting.shell_word); only the
    $VARS gpuplan writes itself (ShellExpr) are left for the shell to expand."""
    return shell_join(parts)


def _header(lp: LaunchPlan) -> list[str]:
    """The header comment's lines, each one line whatever the names in it hold (quoting.comment)."""
    return [comment(line) for line in _header_text(lp)]


def _header_text(lp: LaunchPlan) -> list[str]:
    w = lp.w
    lines = [
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
    return lines + [n for n in (lp.remote_code_note, lp.checkpoint_note) if n]


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
        "fsdp_use_orig_params": True,
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
    if w.zero == 3 and w.sharding == "fsdp" and w.offload != "optimizer":  # FSDP offloads params with optimizer
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
    return "# " + "\n# ".join(_header(lp)) + "\n" + _yaml(cfg)


def fsdp(lp: LaunchPlan) -> str:
    """FSDP settings, as accelerate's FSDP config (the sharding strategy from the ZeRO stage)."""
    _check_data_parallel_only(lp, "FSDP")
    cfg = _accelerate_base(lp, "FSDP")
    cfg["fsdp_config"] = _fsdp_section(lp)
    return "# " + "\n# ".join(_header(lp)) + "\n" + _yaml(cfg)


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
    argv.append(f"--max-model-len={w.input_len + w.output_len}")
    argv.append(f"--gpu-memory-utilization={w.gpu_memory_utilization:g}")
    argv.append(f"--max-num-seqs={w.batch_size}")
    if w.enforce_eager:
        argv.append("--enforce-eager")
    argv.append(f"--dtype={'float16' if w.precision == 'fp16' else 'bfloat16'}")
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
