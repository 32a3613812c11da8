"""QA round 3, launch findings F21, F22, F25, F26 and F11b: the launched file runs the job the
estimate describes (torchtune's single-device optimizer, DeepSpeed configs whose ZeRO stage and
offload match, fp8, multi-node accelerate flags, Megatron-LM's overlap and fusion flags)."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces import api
from gpuplan.specs import frameworks

GIB = 2**30


def _words(text: str) -> list[str]:
    """The shell words of a launch file's command lines (comments dropped)."""
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    return shlex.split(" ".join(ln.rstrip("\\") for ln in lines))


# --- F25: torchtune on one GPU --------------------------------------------------------------------


def test_torchtune_one_gpu_full_finetune_estimates_and_launches_its_single_device_optimizer() -> None:
    """llama3_1/8B_full_single_device.yaml (TORCHTUNE_COMMIT) steps PagedAdamW8bit in backward: the
    estimate takes it (on an L40S it fits, where torch AdamW needed 63.2 GiB) and the command writes it."""
    keys = {"task": "finetune", "gpu": "L40S", "framework": "torchtune"}
    w = api.build_workload("llama-3.1-8b", keys)
    assert (w.optimizer, w.optimizer_in_backward) == ("paged-adamw-8bit", True)
    mem = api.estimate(w).memory
    assert mem.fits and mem.per_gpu_bytes / GIB == pytest.approx(35.0, abs=1.5)
    words = _words(api.launch("llama-3.1-8b", "", keys).text)
    assert words[:5] == ["tune", "run", "full_finetune_single_device", "--config", "llama3_1/8B_full_single_device"]
    assert {"optimizer._component_=bitsandbytes.optim.PagedAdamW8bit", "optimizer_in_bwd=True"} <= set(words)
    # several GPUs, or LoRA on one: torch AdamW, no optimizer in backward (the user's choice is written)
    multi = api.build_workload("llama-3.1-8b", {**keys, "num_gpus": 4})
    lora = api.build_workload("llama-3.1-8b", {**keys, "task": "lora"})
    assert (multi.optimizer, multi.optimizer_in_backward, lora.optimizer, lora.optimizer_in_backward) == (
        "adamw", False, "adamw", False)  # fmt: skip
    words = _words(api.launch("llama-3.1-8b", "", {**keys, "gpu": "H100", "num_gpus": 8}).text)
    assert {"optimizer._component_=torch.optim.AdamW", "optimizer_in_bwd=False"} <= set(words)
    assert "~optimizer.fused" not in words
    paged = _words(api.launch("llama-3.1-8b", "", {**keys, "gpu": "H100", "num_gpus": 8,
                                                   "optimizer": "paged-adamw-8bit"}).text)  # fmt: skip
    assert "~optimizer.fused" in paged  # the distributed config's fused: True is torch-only
    # torchtune steps in backward only with gradient_accumulation_steps: 1: accumulating keeps PagedAdamW8bit
    acc = api.build_workload("llama-3.1-8b", {**keys, "grad_accum": 4})
    assert (acc.optimizer, acc.optimizer_in_backward) == ("paged-adamw-8bit", False)
    assert "optimizer_in_bwd=False" in _words(api.launch("llama-3.1-8b", "", {**keys, "grad_accum": 4}).text)
    with pytest.raises(InvalidSettingError, match=r"torchtune's configs name no optimizer adafactor"):
        api.launch("llama-3.1-8b", "", {**keys, "optimizer": "adafactor"})


def test_the_one_gpu_condition_follows_a_cluster_and_docs_list_both_optimizers() -> None:
    fill = frameworks.fill("torchtune", {"task": "finetune", "cluster": "1x1:A100"})
    assert (fill["optimizer"], fill["optimizer_in_backward"]) == ("paged-adamw-8bit", True)
    fill = frameworks.fill("torchtune", {"task": "finetune", "cluster": "2x8:H100"})
    assert fill["optimizer"] == "adamw" and "optimizer_in_backward" not in fill
    assert frameworks.fill("torchtune", {"task": "finetune", "optimizer": "sgd"}).get("optimizer") is None


# --- F21: DeepSpeed configs whose ZeRO stage and offload are the workload's ------------------------

_DS_KEYS = {
    "task": "finetune",
    "gpu": "H100",
    "num_gpus": 8,
    "activation_checkpointing": "full",
    "sharding": "deepspeed",
}


def _trainer_config(fw: str, zero: int, offload: str) -> tuple[dict[str, object], str]:
    text = api.launch("llama-3.1-8b", "", {**_DS_KEYS, "framework": fw, "zero": zero, "offload": offload}).text
    header = next(ln for ln in text.splitlines() if ln.startswith("# deepspeed: "))
    return yaml.safe_load(text), header


@pytest.mark.parametrize(
    ("fw", "zero", "offload", "shipped"),
    [
        ("axolotl", 1, "none", "deepspeed_configs/zero1.json"),
        ("axolotl", 2, "optimizer", "deepspeed_configs/zero2.json"),  # zero2.json offloads the optimizer
        ("axolotl", 3, "none", "deepspeed_configs/zero3_bf16.json"),
        ("axolotl", 3, "optimizer+params", "deepspeed_configs/zero3_bf16_cpuoffload_all.json"),
        ("llama-factory", 2, "none", "examples/deepspeed/ds_z2_config.json"),
        ("llama-factory", 2, "optimizer", "examples/deepspeed/ds_z2_offload_config.json"),
        ("llama-factory", 3, "optimizer+params", "examples/deepspeed/ds_z3_offload_config.json"),
    ],
)
def test_a_shipped_deepspeed_config_is_named_only_where_its_contents_match(
    fw: str, zero: int, offload: str, shipped: str
) -> None:
    cfg, header = _trainer_config(fw, zero, offload)
    assert cfg["deepspeed"] == shipped and header.startswith(f"# deepspeed: {shipped} ({fw} ships it: ZeRO-{zero}, ")


@pytest.mark.parametrize(
    ("fw", "zero", "offload"),
    [
        ("axolotl", 2, "none"),
        ("axolotl", 3, "optimizer"),
        ("llama-factory", 1, "none"),
        ("llama-factory", 3, "optimizer"),
    ],
)
def test_no_matching_shipped_config_writes_deepspeeds_own_inline(fw: str, zero: int, offload: str) -> None:
    """The inline dict passes transformers' DeepSpeed integration (its "auto" values filled from the
    TrainingArguments the Trainer builds) and then DeepSpeed's own config check."""
    from helpers.tool_schemas import check_deepspeed_json

    transformers = pytest.importorskip("transformers")
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    cfg, header = _trainer_config(fw, zero, offload)
    ds = cfg["deepspeed"]
    assert isinstance(ds, dict) and header.startswith(f"# deepspeed: inline below (ZeRO-{zero}, ")
    z = ds["zero_optimization"]
    assert z["stage"] == zero and "offload_param" not in z
    assert ("offload_optimizer" in z) == (offload == "optimizer")
    batch = cfg["micro_batch_size"] if fw == "axolotl" else cfg["per_device_train_batch_size"]
    args = transformers.TrainingArguments(output_dir="out", per_device_train_batch_size=batch, use_cpu=True,
                                          gradient_accumulation_steps=cfg["gradient_accumulation_steps"])  # fmt: skip
    hf = HfTrainerDeepSpeedConfig(ds)  # type: ignore[no-untyped-call]
    hf.trainer_config_process(args)  # type: ignore[no-untyped-call]
    check_deepspeed_json(json.dumps(hf.config), world_size=1)


# --- F22: fp8 training is written, in the tools' own keys -------------------------------------------


def test_fp8_is_written_as_each_tools_fp8_key_with_the_recipe_the_estimate_used() -> None:
    """LLaMA-Factory's Fp8Arguments (fp8, fp8_backend: te = Transformer Engine delayed scaling,
    torchao = rowwise) and Axolotl's `fp8: true` (TorchAO tensorwise), at the commits cited."""
    keys = {**_DS_KEYS, "precision": "fp8", "zero": 3}
    lf = yaml.safe_load(api.launch("llama-3.1-8b", "", {**keys, "framework": "llama-factory"}).text)
    assert (lf["fp8"], lf["fp8_backend"], lf["bf16"]) == (True, "te", True)
    lf = yaml.safe_load(api.launch("llama-3.1-8b", "", {**keys, "framework": "llama-factory",
                                                        "fp8_recipe": "rowwise"}).text)  # fmt: skip
    assert (lf["fp8"], lf["fp8_backend"]) == (True, "torchao")
    ax_w = api.build_workload("llama-3.1-8b", {**keys, "framework": "axolotl"})
    assert ax_w.fp8_recipe == "tensorwise"  # the framework's default: what `fp8: true` runs
    ax = yaml.safe_load(api.launch("llama-3.1-8b", "", {**keys, "framework": "axolotl"}).text)
    assert (ax["fp8"], ax["bf16"], ax["deepspeed"]) == (True, True, "deepspeed_configs/zero3_bf16.json")
    bf16 = yaml.safe_load(api.launch("llama-3.1-8b", "", {**_DS_KEYS, "zero": 3, "framework": "axolotl"}).text)
    assert "fp8" not in bf16
    # a recipe the tool has no backend for is refused where the workload is built, in one line
    with pytest.raises(ValueError, match=r"framework axolotl has no fp8_recipe delayed .* tensorwise"):
        api.build_workload("llama-3.1-8b", {**keys, "framework": "axolotl", "fp8_recipe": "delayed"})
    with pytest.raises(ValueError, match=r"framework llama-factory has no fp8_recipe tensorwise"):
        api.build_workload("llama-3.1-8b", {**keys, "framework": "llama-factory", "fp8_recipe": "tensorwise"})


def test_llama_factory_fp8_qlora_is_refused_in_one_line(run_cli: RunCli) -> None:
    code, out, err = run_cli("launch", "llama-3.1-8b", "--task", "qlora", "--gpu", "H100", "--precision", "fp8",
                             "--set", "framework=llama-factory")  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "LLaMA-Factory refuses fp8 training with a quantized base" in err and "precision: bf16" in err


# --- F26: multi-node Axolotl ------------------------------------------------------------------------


def test_multi_node_axolotl_run_line_passes_accelerates_parser_with_machines_and_rank() -> None:
    """accelerate's own launch parser reads the run line: 16 processes in all over 2 machines, this
    node's rank and the rank-0 address from the environment; one node gets none of those flags."""
    launch = pytest.importorskip("accelerate.commands.launch")
    keys = {"task": "finetune", "cluster": "2x8:H100", "framework": "axolotl", "zero": 3,
            "activation_checkpointing": "full"}  # fmt: skip
    text = api.launch("llama-3.1-8b", "", keys).text
    run = next(ln for ln in text.splitlines() if ln.startswith("# run: ")).removeprefix("# run: ")
    words = shlex.split(run.replace("$NODE_RANK", "1").replace("$MASTER_ADDR", "10.0.0.1"))
    assert words[:2] == ["accelerate", "launch"]
    args = launch.launch_command_parser().parse_args(words[2:])
    assert (args.num_processes, args.num_machines, args.machine_rank) == (16, 2, 1)
    assert (args.main_process_ip, args.main_process_port, args.module) == ("10.0.0.1", 29500, True)
    assert args.training_script == "axolotl.cli.train" and args.training_script_args == ["config.yml"]
    one = api.launch("llama-3.1-8b", "", {**keys, "cluster": "1x8:H100"}).text
    assert "# run: accelerate launch --num_processes 8 -m axolotl.cli.train config.yml" in one


# --- F11b: Megatron-LM gets the overlap and fusion flags its defaults stand for ------------------------


def _pretrain_gpt_flags(keys: dict[str, object]) -> list[str]:
    words = _words(api.launch("llama-3.1-8b", "", keys).text)
    return words[words.index("pretrain_gpt.py") + 1 :]


def test_megatron_launch_passes_the_overlaps_and_fusion_its_defaults_assume() -> None:
    """framework: megatron (distributed optimizer, compile, with tp 2 sequence parallelism) writes
    examples/llama/train_llama3_8b_h100_fp8.sh's --overlap-grad-reduce --overlap-param-gather
    --cross-entropy-loss-fusion (Megatron-LM@d98e8a64 arguments.py / model_parallel_config.py)."""
    keys = {
        "task": "pretrain",
        "gpu": "H100",
        "num_gpus": 8,
        "framework": "megatron",
        "activation_checkpointing": "full",
    }
    flags = _pretrain_gpt_flags(keys)
    i = flags.index("--use-distributed-optimizer")
    assert flags[i : i + 3] == ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
    assert "--cross-entropy-loss-fusion" in flags and "--sequence-parallel" not in flags
    tp = _pretrain_gpt_flags({**keys, "tp": 2, "tp_comm_overlap": True})
    assert {"--sequence-parallel", "--tp-comm-overlap", "--overlap-param-gather"} <= set(tp)
    # keys the user turns off are not written: no distributed optimizer, no param-gather overlap
    off = _pretrain_gpt_flags({**keys, "zero": 0, "compile": False, "tp": 4})
    assert not {"--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
                "--cross-entropy-loss-fusion"} & set(off)  # fmt: skip


def test_deepspeed_json_refuses_fp8() -> None:
    """DeepSpeed's config (deepspeed/runtime/config.py, 0.19.8) has bf16 and fp16 sections and no fp8
    one: a --format deepspeed file for an fp8 job would train in bf16, so it is refused in one line."""
    keys = {"task": "pretrain", "gpu": "H100", "num_gpus": 8, "zero": 3, "precision": "fp8"}
    with pytest.raises(InvalidSettingError, match=r"^--format deepspeed writes DeepSpeed's own JSON.*no fp8 one"):
        api.launch("llama-3.2-1b", "deepspeed", keys, force=True)
    text = api.launch("llama-3.2-1b", "deepspeed", {**keys, "precision": "bf16"}, force=True).text
    assert json.loads(text)["bf16"] == {"enabled": True}
