"""The launch-file checkers in tool_schemas accept a known-good minimal file and reject a bad key or
flag, so that a test that relies on them cannot pass by checking nothing. Each is skipped where its
tool is not installed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from helpers.tool_schemas import (
    check_accelerate_yaml,
    check_deepspeed_json,
    check_skypilot_yaml,
    check_torchrun,
    check_vllm_serve,
)


def _rejects(check: Callable[..., Any], arg: Any, *needles: str, **kwargs: Any) -> None:
    """check(arg) raises AssertionError whose message names every needle."""
    with pytest.raises(AssertionError) as info:
        check(arg, **kwargs)
    for needle in needles:
        assert needle in str(info.value), f"{needle!r} not in {info.value}"


# --- torchrun -------------------------------------------------------------------------------------

TORCHRUN = [
    "torchrun",
    "--nnodes=2",
    "--nproc-per-node=8",
    "--rdzv-backend=c10d",
    "--rdzv-endpoint=10.0.0.1:29500",
    "--rdzv-id=gpuplan",
    "train.py",
    "--lr",
    "1e-4",
]


def test_torchrun_accepts() -> None:
    ns = check_torchrun(TORCHRUN)
    assert (ns.nnodes, ns.nproc_per_node, ns.training_script) == ("2", "8", "train.py")
    assert ns.training_script_args == ["--lr", "1e-4"]
    assert check_torchrun(["python", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=gpu", "t.py"])


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["torchrun", "--nodes=2", "train.py"], "--nodes=2"),  # unknown flag
        (["torchrun", "--nproc-per-nod=8", "train.py"], "--nproc-per-nod"),  # an abbreviation argparse would take
        (["torchrun", "--nproc-per-node=eight", "train.py"], "eight"),  # a value config_from_args refuses
        (["torchrun", "--nnodes=2"], "training_script"),  # no script
    ],
)
def test_torchrun_rejects(argv: list[str], needle: str) -> None:
    _rejects(check_torchrun, argv, needle)


# --- accelerate -----------------------------------------------------------------------------------

ACCELERATE_FSDP = """\
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
mixed_precision: bf16
num_machines: 1
num_processes: 8
machine_rank: 0
main_training_function: main
rdzv_backend: static
same_network: true
use_cpu: false
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
  fsdp_reshard_after_forward: true
  fsdp_offload_params: false
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_cpu_ram_efficient_loading: true
  fsdp_sync_module_states: true
  fsdp_activation_checkpointing: true
"""

ACCELERATE_FSDP1 = """\
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
mixed_precision: fp16
num_machines: 2
machine_rank: 0
main_process_ip: 10.0.0.1
main_process_port: 29500
num_processes: 16
fsdp_config:
  fsdp_version: 1
  fsdp_sharding_strategy: HYBRID_SHARD
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_offload_params: true
  fsdp_state_dict_type: FULL_STATE_DICT
  fsdp_use_orig_params: true
  fsdp_sync_module_states: true
"""

ACCELERATE_DEEPSPEED = """\
compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
mixed_precision: bf16
num_machines: 2
num_processes: 16
machine_rank: 0
main_process_ip: 10.0.0.1
main_process_port: 29500
deepspeed_config:
  deepspeed_multinode_launcher: standard
  zero_stage: 3
  offload_optimizer_device: cpu
  offload_param_device: none
  gradient_accumulation_steps: 4
  gradient_clipping: 1.0
  zero3_init_flag: true
  zero3_save_16bit_model: true
"""

ACCELERATE_MULTI_GPU = """\
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
mixed_precision: bf16
num_machines: 1
num_processes: 8
gpu_ids: all
"""


def _edit(text: str, edit: Callable[[dict[str, Any]], None]) -> str:
    data = yaml.safe_load(text)
    edit(data)
    return yaml.safe_dump(data)


@pytest.mark.parametrize("text", [ACCELERATE_FSDP, ACCELERATE_FSDP1, ACCELERATE_DEEPSPEED, ACCELERATE_MULTI_GPU])
def test_accelerate_accepts(text: str) -> None:
    config = check_accelerate_yaml(text)
    assert config.num_processes == yaml.safe_load(text)["num_processes"]


def test_accelerate_accepts_a_deepspeed_file() -> None:
    text = "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n  zero3_init_flag: true\n"
    check_accelerate_yaml(text, deepspeed_json=json.dumps(DEEPSPEED))


def test_accelerate_rejects_unknown_top_level_key() -> None:
    _rejects(check_accelerate_yaml, _edit(ACCELERATE_FSDP, lambda d: d.update(num_gpus=8)), "num_gpus")


def test_accelerate_rejects_unknown_section_keys() -> None:
    bad_fsdp = _edit(ACCELERATE_FSDP, lambda d: d["fsdp_config"].update(fsdp_shard_strategy="FULL_SHARD"))
    _rejects(check_accelerate_yaml, bad_fsdp, "fsdp_config.fsdp_shard_strategy")
    bad_ds = _edit(ACCELERATE_DEEPSPEED, lambda d: d["deepspeed_config"].update(stage=3))
    _rejects(check_accelerate_yaml, bad_ds, "deepspeed_config.stage")


def test_accelerate_rejects_bad_values() -> None:
    bad_state_dict = _edit(ACCELERATE_FSDP, lambda d: d["fsdp_config"].update(fsdp_state_dict_type="SHARDED"))
    _rejects(check_accelerate_yaml, bad_state_dict, "SHARDED")
    no_sync = _edit(ACCELERATE_FSDP, lambda d: d["fsdp_config"].update(fsdp_sync_module_states=False))
    _rejects(check_accelerate_yaml, no_sync, "fsdp_sync_module_states")
    bad_strategy = _edit(ACCELERATE_FSDP1, lambda d: d["fsdp_config"].update(fsdp_sharding_strategy="HYBRID"))
    _rejects(check_accelerate_yaml, bad_strategy, "HYBRID")


def test_accelerate_rejects_keys_that_clash_with_the_deepspeed_file() -> None:
    text = "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n  zero_stage: 3\n"
    _rejects(check_accelerate_yaml, text, "zero_stage", deepspeed_json=json.dumps(DEEPSPEED))


# --- DeepSpeed ------------------------------------------------------------------------------------

DEEPSPEED: dict[str, Any] = {
    "train_batch_size": 64,
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 4,
    "gradient_clipping": 1.0,
    "steps_per_print": 100,
    "bf16": {"enabled": True},
    "zero_optimization": {
        "stage": 3,
        "offload_optimizer": {"device": "cpu", "pin_memory": True},
        "offload_param": {"device": "none"},
        "overlap_comm": True,
        "contiguous_gradients": True,
        "stage3_gather_16bit_weights_on_model_save": True,
    },
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.1}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 100}},
    "activation_checkpointing": {"partition_activations": True},
}


def _ds(**changes: Any) -> str:
    config = json.loads(json.dumps(DEEPSPEED))
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = config
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return json.dumps(config)


def test_deepspeed_accepts() -> None:
    config = check_deepspeed_json(json.dumps(DEEPSPEED), world_size=8)
    assert (config.zero_optimization_stage, config.train_batch_size, config.bfloat16_config.enabled) == (3, 64, True)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (_ds(train_batch_sise=64), "train_batch_sise"),  # top level: DeepSpeed itself ignores it
        (_ds(zero_optimization__stages=3), "stages"),  # pydantic section
        (_ds(zero_optimization__offload_optimizer__pin=True), "pin"),  # pydantic sub-section
        (_ds(bf16__enable=True), "enable"),
        (_ds(optimizer__param={"lr": 1}), "optimizer.param"),  # dict-read section: DeepSpeed ignores it
        (_ds(activation_checkpointing__partition=True), "activation_checkpointing.partition"),
        (_ds(zero_optimization__stage=4), "stage"),  # bad value
        (_ds(zero_optimization__offload_optimizer__device="gpu"), "device"),
        (_ds(fp16={"enabled": True}), "simultaneously"),  # bf16 and fp16
        (_ds(train_batch_size=32), "train_batch_size"),  # 32 != 2 x 4 x 8
        ('{"train_batch_size": 8, "train_batch_size": 16}', "Duplicate"),
    ],
)
def test_deepspeed_rejects(text: str, needle: str) -> None:
    _rejects(check_deepspeed_json, text, needle, world_size=8)


# --- SkyPilot -------------------------------------------------------------------------------------

SKYPILOT = """\
name: gpuplan-train
resources:
  accelerators: H100:8
  disk_size: 512
num_nodes: 2
envs:
  MODEL: meta-llama/Llama-3.1-8B
setup: |
  pip install -r requirements.txt
run: |
  torchrun --nnodes=$SKYPILOT_NUM_NODES --nproc-per-node=$SKYPILOT_NUM_GPUS_PER_NODE train.py
"""


def test_skypilot_accepts() -> None:
    task = check_skypilot_yaml(SKYPILOT)
    assert task.num_nodes == 2
    assert [r.accelerators for r in task.resources] == [{"H100": 8}]


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d.update(nodes=2), "nodes"),
        (lambda d: d["resources"].update(acelerators="H100:8"), "acelerators"),
        (lambda d: d.update(num_nodes="two"), "two"),
        (lambda d: d["envs"].update({"BAD-NAME": "x"}), "BAD-NAME"),
    ],
)
def test_skypilot_rejects(edit: Callable[[dict[str, Any]], None], needle: str) -> None:
    _rejects(check_skypilot_yaml, _edit(SKYPILOT, edit), needle)


# --- vLLM -----------------------------------------------------------------------------------------

VLLM = [
    "vllm",
    "serve",
    "meta-llama/Llama-3.1-70B-Instruct",
    "--tensor-parallel-size",
    "4",
    "--pipeline-parallel-size",
    "2",
    "--max-model-len",
    "8192",
    "--gpu-memory-utilization",
    "0.9",
    "--quantization",
    "awq",
    "--kv-cache-dtype",
    "fp8",
]


def test_vllm_accepts() -> None:
    ns = check_vllm_serve(VLLM)
    assert ns.model_tag == "meta-llama/Llama-3.1-70B-Instruct"
    assert (ns.tensor_parallel_size, ns.pipeline_parallel_size, ns.max_model_len) == (4, 2, 8192)
    assert (ns.gpu_memory_utilization, ns.quantization, ns.kv_cache_dtype) == (0.9, "awq", "fp8")


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (["--tensor-paralel-size", "4"], "--tensor-paralel-size"),  # unknown flag
        (["--tensor_parallel_size", "4"], "--tensor_parallel_size"),  # vllm takes it, but it is not the flag's name
        (["--tensor-parallel", "4"], "--tensor-parallel"),  # an abbreviation
        (["--max-model-len", "lots"], "lots"),  # parser type error
        (["--quantization", "awq5"], "awq5"),
        (["--kv-cache-dtype", "fp9"], "fp9"),
        (["--gpu-memory-utilization", "1.5"], "gpu_memory_utilization"),
        (["--tensor-parallel-size", "0"], "tensor_parallel_size"),
    ],
)
def test_vllm_rejects(change: list[str], needle: str) -> None:
    _rejects(check_vllm_serve, VLLM + change, needle)
