"""Launch files (issue 5): every format parses, carries the layout, and exits cleanly on bad input."""

from __future__ import annotations

import itertools
import json
import os
import shlex
from pathlib import Path

import pytest
import yaml

from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces import api

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CLUSTER = str(EXAMPLES / "pretrain-70b-cluster.yaml")


def _write(tmp_path: Path, name: str, keys: dict[str, object]) -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(keys), encoding="utf-8")
    return str(p)


@pytest.fixture
def fsdp_job(tmp_path: Path) -> str:
    """Llama 3.1 8B on 2 nodes of 8 A100s with FSDP (ZeRO-3), 16k global batch tokens per GPU."""
    return _write(
        tmp_path,
        "fsdp.yaml",
        {
            "model": "llama-3.1-8b",
            "task": "pretrain",
            "seq_len": 4096,
            "cluster": "2x8:A100",
            "zero": 3,
            "batch_size": 2,
            "global_batch": 128,
            "activation_checkpointing": "full",
            "tokens": 1e9,
        },
    )


def test_deepspeed_json(fsdp_job: str) -> None:
    cfg = json.loads(api.launch(fsdp_job, "deepspeed").text)
    assert cfg["zero_optimization"]["stage"] == 3
    assert cfg["train_micro_batch_size_per_gpu"] == 2
    # 128 sequences = 2 per GPU x 16 GPUs x 4 micro-batches
    assert cfg["gradient_accumulation_steps"] == 4
    assert cfg["train_batch_size"] == 128
    assert cfg["bf16"]["enabled"] is True and cfg["fp16"]["enabled"] is False


def test_accelerate_and_fsdp_yaml(fsdp_job: str) -> None:
    acc = yaml.safe_load(api.launch(fsdp_job, "accelerate").text)
    assert acc["distributed_type"] == "FSDP"
    assert acc["num_machines"] == 2 and acc["num_processes"] == 16
    assert acc["fsdp_config"]["fsdp_sharding_strategy"] == "FULL_SHARD"
    assert acc["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"] == "LlamaDecoderLayer"
    assert acc["fsdp_config"]["fsdp_activation_checkpointing"] is True
    fs = yaml.safe_load(api.launch(fsdp_job, "fsdp", {"zero": 2}).text)
    assert fs["fsdp_config"]["fsdp_sharding_strategy"] == "SHARD_GRAD_OP"


def test_accelerate_deepspeed_for_zero2_offload(tmp_path: Path) -> None:
    job = _write(
        tmp_path,
        "ds.yaml",
        {"model": "llama-3.1-8b", "task": "finetune", "gpu": "A100", "num_gpus": 4, "zero": 2, "offload": "optimizer"},
    )
    acc = yaml.safe_load(api.launch(job, "accelerate").text)
    assert acc["distributed_type"] == "DEEPSPEED"
    assert acc["deepspeed_config"]["zero_stage"] == 2
    assert acc["deepspeed_config"]["offload_optimizer_device"] == "cpu"
    ds = json.loads(api.launch(job, "deepspeed").text)
    assert ds["zero_optimization"]["offload_optimizer"]["device"] == "cpu"


def test_torchrun_single_and_multi_node(fsdp_job: str, tmp_path: Path) -> None:
    multi = api.launch(fsdp_job, "torchrun", script="train.py").text
    argv = shlex.split(multi.replace("\\\n", " "), comments=True)
    assert argv[:3] == ["torchrun", "--nnodes=2", "--nproc-per-node=8"]
    assert "--rdzv-backend=c10d" in argv and argv[-1] == "train.py"
    one = _write(
        tmp_path, "one.yaml", {"model": "llama-3.2-1b", "task": "pretrain", "gpu": "L4", "num_gpus": 4, "zero": 3}
    )
    argv1 = shlex.split(api.launch(one, "torchrun").text.replace("\\\n", " "), comments=True)
    assert argv1[:3] == ["torchrun", "--standalone", "--nproc-per-node=4"]


def test_megatron_flags_for_model_parallel_layouts() -> None:
    rec = api.launch(CLUSTER, "torchrun")
    text = rec.text.replace("\\\n", " ")
    argv = shlex.split(text, comments=True)
    assert "pretrain_gpt.py" in argv
    flags = dict(itertools.pairwise(argv))
    lay = rec.workload
    assert flags["--tensor-model-parallel-size"] == str(lay.get("tp", 1))
    assert flags["--pipeline-model-parallel-size"] == str(lay.get("pp", 1))
    assert flags["--num-layers"] == "80" and flags["--hidden-size"] == "8192"
    assert flags["--global-batch-size"] == "1024"
    assert "--swiglu" in argv and "--group-query-attention" in argv
    assert (
        flags["--attention-backend"]
        == {"flash": "flash", "fa3": "fused", "eager": "unfused"}[lay.get("attention_impl", "flash")]
    )


def test_megatron_pipeline_splits(tmp_path: Path) -> None:
    """Even splits name the layers per virtual stage; layers + embedding + loss that divide use
    Megatron's account-for flags; anything else is spelled out as a --pipeline-model-parallel-layout
    (megatron/training/arguments.py accepts only one of the three)."""
    from gpuplan.interfaces.launch_megatron import pipeline_layout

    def flags(keys: dict[str, object]) -> list[str]:
        job = _write(tmp_path, "pp.yaml", {"task": "pretrain", "gpu": "H100", "seq_len": 4096, **keys})
        return shlex.split(api.launch(job, "torchrun", force=True).text.replace("\\\n", " "), comments=True)

    even = flags({"model": "llama-3.1-70b", "num_gpus": 64, "tp": 8, "pp": 4, "vp": 5, "global_batch": 64})
    assert even[even.index("--num-layers-per-virtual-pipeline-stage") + 1] == "4"  # 80 / (4 x 5)
    plus2 = flags({"model": "llama-3.1-405b", "num_gpus": 128, "tp": 8, "pp": 16, "global_batch": 64})
    assert "--account-for-embedding-in-pipeline-split" in plus2 and "--account-for-loss-in-pipeline-split" in plus2
    assert "--num-virtual-stages-per-pipeline-rank" not in plus2  # 126 + 2 = 8 x 16, no interleaving
    uneven = flags({"model": "llama-3.1-70b", "num_gpus": 24, "tp": 8, "pp": 3, "global_batch": 48})
    layout = uneven[uneven.index("--pipeline-model-parallel-layout") + 1]
    # 80 = 27 + 27 + 26: the spare layers go to the middle, then to the first stage (the embedding is
    # cheap), the last keeping the fewest (it also runs the head and the loss)
    assert layout == pipeline_layout(80, 3) == "E" + "t" * 27 + "|" + "t" * 27 + "|" + "t" * 26 + "L"
    assert "--account-for-embedding-in-pipeline-split" not in uneven
    # DeepSeek-V3's 61 layers over pp 8 x vp 4: 32 stages, 1 or 2 layers each, E first, L last
    stages = pipeline_layout(61, 32).split("|")
    assert len(stages) == 32 and stages[0].startswith("E") and stages[-1].endswith("L")
    counts = [s.count("t") for s in stages]
    assert sum(counts) == 61 and max(counts) - min(counts) == 1 and counts[0] == counts[-1] == 1


def test_megatron_gets_the_moe_and_attention_shapes(tmp_path: Path) -> None:
    """Megatron's moe_ffn_hidden_size defaults to ffn_hidden_size (megatron/training/arguments.py),
    its kv_channels to hidden / heads: a MoE or wide-head model needs them spelled out, with the
    shared-expert width, the q/k norms and which layers hold experts (--moe-layer-freq, a Python
    list expression Megatron evaluates)."""
    from gpuplan.interfaces.launch_megatron import moe_layer_pattern

    def flags(model: str, ep: int = 8) -> tuple[dict[str, str], list[str]]:
        job = _write(tmp_path, f"{model}.yaml", {"model": model, "task": "pretrain", "gpu": "H100", "num_gpus": 32,
                                                 "tp": 2, "pp": 2, "ep": ep, "seq_len": 4096, "global_batch": 256})  # fmt: skip
        argv = shlex.split(api.launch(job, "torchrun", force=True).text.replace("\\\n", " "), comments=True)
        return dict(itertools.pairwise(argv)), argv

    # Qwen3-30B-A3B (config.json): 128 experts of width 768, top 8; head_dim 128 with hidden 2048 / 32 heads
    f, argv = flags("qwen3-30b-a3b")
    assert (f["--num-experts"], f["--moe-router-topk"], f["--moe-ffn-hidden-size"]) == ("128", "8", "768")
    assert f["--kv-channels"] == "128" and "--qk-layernorm" in argv and "--moe-layer-freq" not in argv
    # DeepSeek-V3: 3 dense layers (width 18432), then 58 MoE layers of 256 x 2048 plus one shared expert
    f, argv = flags("deepseek-v3")
    assert (f["--ffn-hidden-size"], f["--moe-ffn-hidden-size"], f["--moe-shared-expert-intermediate-size"]) == (
        "18432", "2048", "2048")  # fmt: skip
    assert eval(f["--moe-layer-freq"]) == [0] * 3 + [1] * 58  # as Megatron evaluates it
    # its MLA and router as its config.json gives them (Megatron's DeepSeek-V3 example sets the same)
    assert "--multi-latent-attention" in argv and "--qk-layernorm" in argv and "--swiglu" in argv
    assert (f["--q-lora-rank"], f["--kv-lora-rank"], f["--qk-head-dim"], f["--qk-pos-emb-head-dim"]) == (
        "1536", "512", "128", "64")  # fmt: skip
    assert (f["--v-head-dim"], f["--kv-channels"], f["--moe-router-score-function"]) == ("128", "128", "sigmoid")
    assert (f["--moe-router-num-groups"], f["--moe-router-group-topk"], f["--moe-router-topk-scaling-factor"]) == (
        "8", "4", "2.5")  # fmt: skip
    assert "--moe-router-enable-expert-bias" in argv
    # Llama 4 Maverick: MoE on the odd layers (128 x 8192 + a shared 8192), dense 16384 on the even ones
    f, argv = flags("llama-4-maverick")
    assert f["--moe-layer-freq"] == "([0,1]*24)" and eval(f["--moe-layer-freq"]) == [0, 1] * 24
    assert (f["--ffn-hidden-size"], f["--moe-ffn-hidden-size"], f["--moe-shared-expert-intermediate-size"]) == (
        "16384", "8192", "8192")  # fmt: skip
    assert f["--no-rope-freq"] == "4" and "--qk-l2-norm" not in argv  # Maverick: use_qk_norm false
    f, argv = flags("llama-4-scout")
    assert "--qk-l2-norm" in argv and "--moe-layer-freq" not in argv
    # dense Llama: none of it
    f, argv = flags("llama-3.1-70b", ep=1)
    assert not {"--kv-channels", "--num-experts", "--qk-layernorm", "--moe-layer-freq"} & set(argv)
    assert moe_layer_pattern([True, True, False] * 3) == "([1,1,0]*3)"
    assert moe_layer_pattern([False, True, True, True, False]) == "([0]*1+[1]*3+[0]*1)"


def test_megatron_runs_the_attention_kernel_the_estimate_assumed(tmp_path: Path) -> None:
    keys = yaml.safe_load(Path(CLUSTER).read_text(encoding="utf-8"))
    for impl, backend in (("fa3", "fused"), ("eager", "unfused"), ("flash", "flash")):
        job = _write(tmp_path, f"{impl}.yaml", keys | {"attention_impl": impl})
        argv = shlex.split(api.launch(job, "torchrun").text.replace("\\\n", " "), comments=True)
        assert dict(itertools.pairwise(argv))["--attention-backend"] == backend


def test_slurm_script_header() -> None:
    text = api.launch(CLUSTER, "slurm", partition="gpu", gres="h100").text
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    directives = {x.split("=", 1)[0]: x.split("=", 1)[1] for x in lines if x.startswith("#SBATCH")}
    assert directives["#SBATCH --nodes"] == "64"
    assert directives["#SBATCH --gres"] == "gpu:h100:8"
    assert directives["#SBATCH --partition"] == "gpu"
    days, _ = directives["#SBATCH --time"].split("-")
    assert int(days) > 30  # 2T tokens on 512 H100s: weeks, with the margin
    assert "srun torchrun" in text


def test_skypilot_task() -> None:
    task = yaml.safe_load(api.launch(CLUSTER, "skypilot").text)
    assert task["resources"]["accelerators"] == "H100:8"
    assert task["num_nodes"] == 64
    assert "torchrun" in task["run"] and "$SKYPILOT_NODE_RANK" in task["run"]


def test_vllm_serve(tmp_path: Path) -> None:
    job = _write(
        tmp_path,
        "serve.yaml",
        {
            "model": "llama-3.1-70b",
            "task": "inference",
            "gpu": "H100",
            "num_gpus": 4,
            "tp": 4,
            "weight_dtype": "fp8",
            "kv_dtype": "fp8",
            "input_len": 2048,
            "output_len": 512,
            "batch_size": 32,
        },
    )
    argv = shlex.split(api.launch(job, "vllm").text.replace("\\\n", " "), comments=True)
    assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B"] or argv[2].startswith("meta-llama/")
    assert "--tensor-parallel-size=4" in argv
    assert "--max-model-len=2560" in argv
    assert "--quantization=fp8" in argv and "--kv-cache-dtype=fp8" in argv
    # a torchao int4 checkpoint loads through vLLM's torchao method
    keys = yaml.safe_load(Path(job).read_text(encoding="utf-8")) | {"weight_dtype": "int4-g128", "kv_dtype": "bf16"}
    argv = shlex.split(api.launch(_write(tmp_path, "int4.yaml", keys), "vllm").text.replace("\\\n", " "), comments=True)
    assert "--quantization=torchao" in argv and not any(a.startswith("--kv-cache-dtype") for a in argv)
    # NVFP4 and MXFP4 checkpoints load through vLLM's modelopt_fp4 and mxfp4 methods
    for fmt, method in (("nvfp4", "modelopt_fp4"), ("mxfp4", "mxfp4")):
        path = _write(tmp_path, f"{fmt}.yaml", keys | {"weight_dtype": fmt})
        argv = shlex.split(api.launch(path, "vllm").text.replace("\\\n", " "), comments=True)
        assert f"--quantization={method}" in argv
    # a pre-quantised checkpoint (gpt-oss's MXFP4) is detected by vLLM from its config.json
    path = _write(tmp_path, "oss.yaml", keys | {"model": "gpt-oss-120b", "weight_dtype": None, "kv_dtype": None})
    argv = shlex.split(api.launch(path, "vllm").text.replace("\\\n", " "), comments=True)
    assert not any(a.startswith("--quantization") for a in argv)


def test_launch_from_plan_json(tmp_path: Path, run_cli: RunCli) -> None:
    code, out, _ = run_cli("plan", CLUSTER, "--top", "2", "--json")
    assert code == 0
    plan = json.loads(out)
    assert plan["mode"] == "cluster" and plan["search"]["evaluated"] > 10_000
    p = tmp_path / "plan.json"
    p.write_text(out, encoding="utf-8")
    code, text, err = run_cli("launch", str(p), "--format", "slurm")
    assert code == 0 and "#SBATCH --nodes=64" in text, err
    # the best layout uses pipeline/context parallelism, which DeepSpeed's ZeRO engine does not run
    # (QA3 F1): one line, rather than a ds_config whose batch DeepSpeed's own check rejects
    code, text, err = run_cli("launch", str(p), "--format", "deepspeed")
    assert code == 2 and "framework deepspeed splits no tensors, pipelines or sequences" in err
    assert err.count("\n") == 1 and "set them to 1" in err


def test_bad_launch_input(run_cli: RunCli, tmp_path: Path) -> None:
    code, _, err = run_cli("launch", CLUSTER, "--format", "kubernetes")
    assert code == 2 and "Unknown launch format 'kubernetes'" in err and err[-1] == "\n" and err.count("\n") == 1
    code, _, err = run_cli("launch", CLUSTER, "--format", "vllm")
    assert code == 2 and "task: inference" in err
    code, _, err = run_cli("launch", CLUSTER, "--format", "accelerate", "--set", "pp=4", "--force")
    assert code == 2 and "tensor/pipeline/context/expert" in err
    bad = tmp_path / "plan.json"
    bad.write_text("{not json", encoding="utf-8")
    code, _, err = run_cli("launch", str(bad), "--format", "slurm")
    assert code == 2 and "not valid JSON" in err
    code, _, err = run_cli("plan", CLUSTER, "--cluster", "8x8:H1OO")
    assert code == 2 and "Unknown GPU 'H1OO'" in err


def test_cluster_contradictions() -> None:
    cat = api.catalog()
    w = api.build_workload("llama-3.1-8b", {"task": "pretrain", "gpu": "A100", "cluster": "2x8:H100"})
    with pytest.raises(InvalidSettingError, match="contradicts the cluster"):
        api.resolve_cluster(w, cat)


# --- a real Slurm (tests/slurm/cluster-up.sh; CI starts it) -------------------------------------


@pytest.mark.integration
@pytest.mark.slurm
def test_sbatch_scripts_are_accepted_by_slurm() -> None:
    """gpuplan's sbatch scripts pass a real slurmctld's checks: 64 nodes of 8 H100s, and a
    single-node A100 job; a script asking for a GPU type the site lacks is rejected."""
    from helpers.slurm import require_slurm, sbatch_accepts

    require_slurm()
    text = api.launch(CLUSTER, "slurm", time_limit="2-00:00:00").text
    assert sbatch_accepts(text)
    one = api.launch("llama-3.2-1b", "slurm", {"task": "pretrain", "cluster": "1x8:A100", "zero": 3, "tokens": 1e8})
    assert sbatch_accepts(one.text)
    with pytest.raises(AssertionError, match="sbatch rejected"):
        sbatch_accepts(api.launch(CLUSTER, "slurm", gres="nosuchgpu").text)


@pytest.mark.integration
@pytest.mark.slurm
def test_single_node_sbatch_runs_torchrun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated single-node script runs to completion under Slurm: srun starts torchrun, which
    starts one process per GPU of the node."""
    import sys

    from helpers.slurm import require_slurm, sbatch_run

    require_slurm()
    script = tmp_path / "hello.py"
    # one write() per line: four processes share the output file, and print() may split a line
    # into several writes that interleave ("rankrank 0 of 4")
    script.write_text(
        "import os\nos.write(1, f\"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}\\n\".encode())\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    rec = api.launch(
        "llama-3.2-1b",
        "slurm",
        {"task": "pretrain", "cluster": "1x4:L4", "zero": 3, "batch_size": 1, "seq_len": 1024},
        script=str(script),
        time_limit="0-00:10:00",
    )
    state, output = sbatch_run(rec.text, timeout=120)
    assert state == "COMPLETED", output
    assert sorted(line for line in output.splitlines() if line.startswith("rank")) == [
        f"rank {r} of 4" for r in range(4)
    ]


# --- the tools' own parsers and config classes (tests/helpers/tool_schemas.py) -----------------------------

_SHELL_VARS = {
    "$MASTER_ADDR": "10.0.0.1",
    "$HEAD_NODE": "node-001",
    "$SLURM_JOB_ID": "42",
    "$SKYPILOT_NUM_NODES": "64",
    "$SKYPILOT_NUM_GPUS_PER_NODE": "8",
    "$SKYPILOT_NODE_RANK": "0",
}


def _argv(text: str, start: str) -> list[str]:
    """The command line beginning with `start` in a launch file, shell variables filled in as the
    launcher would."""
    for k, v in _SHELL_VARS.items():
        text = text.replace(k, v)
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    return words[words.index(start) :]


def test_files_pass_the_tools_own_checks(fsdp_job: str, tmp_path: Path) -> None:
    from helpers.tool_schemas import (
        check_accelerate_yaml,
        check_deepspeed_json,
        check_skypilot_yaml,
        check_torchrun,
        check_vllm_serve,
    )

    # FSDP on 2 x 8 A100
    check_accelerate_yaml(api.launch(fsdp_job, "accelerate").text)
    check_accelerate_yaml(api.launch(fsdp_job, "fsdp").text)
    check_deepspeed_json(api.launch(fsdp_job, "deepspeed").text, world_size=16)
    check_torchrun(_argv(api.launch(fsdp_job, "torchrun").text, "torchrun"))
    # ZeRO-2 with optimizer offload on 4 GPUs: accelerate's DeepSpeed plugin and DeepSpeed's config
    ds = _write(
        tmp_path,
        "ds.yaml",
        {"model": "llama-3.1-8b", "task": "finetune", "gpu": "A100", "num_gpus": 4, "zero": 2, "offload": "optimizer"},
    )
    check_accelerate_yaml(api.launch(ds, "accelerate").text)
    check_deepspeed_json(api.launch(ds, "deepspeed").text, world_size=4)
    # plain DDP on one node
    ddp = _write(tmp_path, "ddp.yaml", {"model": "llama-3.2-1b", "task": "pretrain", "gpu": "H100", "num_gpus": 8})
    assert check_accelerate_yaml(api.launch(ddp, "accelerate", {"zero": 0}).text).distributed_type == "MULTI_GPU"
    # the 64-node Megatron layout: torchrun's own flags, in the plain, Slurm and SkyPilot forms
    check_torchrun(_argv(api.launch(CLUSTER, "torchrun").text, "torchrun"))
    check_torchrun(_argv(api.launch(CLUSTER, "slurm").text, "torchrun"))
    task = api.launch(CLUSTER, "skypilot").text
    check_skypilot_yaml(task)
    check_torchrun(_argv(yaml.safe_load(task)["run"], "torchrun"))
    # vllm serve, fp8 weights and KV cache, 4-way tensor parallel
    serve = _write(
        tmp_path,
        "serve.yaml",
        {"model": "llama-3.1-70b", "task": "inference", "gpu": "H100", "num_gpus": 4, "tp": 4,
         "weight_dtype": "fp8", "kv_dtype": "fp8", "input_len": 2048, "output_len": 512},
    )  # fmt: skip
    ns = check_vllm_serve(_argv(api.launch(serve, "vllm").text, "vllm"))
    assert ns.tensor_parallel_size == 4 and ns.kv_cache_dtype == "fp8"
    # vllm serve, DeepSeek-V3 with attention data parallelism and the experts over all 8 GPUs
    dpep = _write(
        tmp_path,
        "dpep.yaml",
        {"model": "deepseek-v3", "task": "inference", "gpu": "H200", "num_gpus": 8, "tp": 1, "ep": 8,
         "input_len": 2048, "output_len": 512},
    )  # fmt: skip
    ns = check_vllm_serve(_argv(api.launch(dpep, "vllm", {"enforce_eager": True}).text, "vllm"))
    assert ns.data_parallel_size == 8 and ns.enable_expert_parallel and ns.tensor_parallel_size == 1
    assert ns.enforce_eager


def _script_args(argv: list[str], script: str = "train.py") -> dict[str, list[str]]:
    """The script's `--name[=value] [values...]` arguments after `script`, by name."""
    out: dict[str, list[str]] = {}
    name = ""
    for word in argv[argv.index(script) + 1 :]:
        if word.startswith("--"):
            name, _, value = word[2:].partition("=")
            out[name] = [value] if value else []
        else:
            out[name].append(word)
    return out


def test_adapter_jobs_are_never_written_as_full_weight_training(tmp_path: Path) -> None:
    """QA finding 1: LoRA on 2 x 4090 searched as CP2 + pretrain_gpt.py --bf16, checkpointing dropped."""
    from helpers.tool_schemas import check_accelerate_yaml, check_torchrun

    lora = str(EXAMPLES / "lora-4090.yaml")  # batch 2 x 2048, activation_checkpointing: full, lora_rank 8
    rec = api.launch(lora, "torchrun", {"num_gpus": 2})
    # data parallel only (no CP/TP/PP), the workload's full checkpointing kept
    assert rec.layout.startswith("TP1 PP1 DP2") and "CP" not in rec.layout and rec.layout.endswith("full ckpt")
    assert (rec.workload["cp"], rec.workload["tp"], rec.workload["activation_checkpointing"]) == (1, 1, "full")
    argv = _argv(rec.text, "torchrun")
    ns = check_torchrun(argv)
    assert ns.training_script == "train.py" and "pretrain_gpt.py" not in rec.text and "--bf16" not in rec.text
    args = _script_args(argv)
    assert args["use_peft"] == [] and args["lora_r"] == ["8"] and args["lora_alpha"] == ["16"]
    peft = pytest.importorskip("peft")  # the arguments build a valid PEFT adapter
    cfg = peft.LoraConfig(r=int(args["lora_r"][0]), lora_alpha=int(args["lora_alpha"][0]),
                          lora_dropout=float(args["lora_dropout"][0]))  # fmt: skip
    assert (cfg.r, cfg.lora_alpha) == (8, 16)
    # QLoRA on all linear layers: the 4-bit base and the targets travel too
    q = api.launch(lora, "torchrun", {"num_gpus": 2, "task": "qlora", "lora_targets": "all-linear"})
    qa = _script_args(_argv(q.text, "torchrun"))
    assert (
        qa["load_in_4bit"] == []
        and qa["bnb_4bit_quant_type"] == ["nf4"]
        and qa["lora_target_modules"] == ["all-linear"]
    )
    # accelerate: the config plus the command that runs the PEFT script with the adapter
    acc = api.launch(lora, "accelerate", {"num_gpus": 2})
    # the workload's micro-batch 2 is kept (QA2 10a): the fastest layout that runs it is ZeRO-3 (FSDP)
    assert "mb2x1" in acc.layout and check_accelerate_yaml(acc.text).distributed_type == "FSDP"
    one = api.launch(lora, "accelerate", {"num_gpus": 2, "batch_size": 1})
    assert "mb1x" in one.layout and check_accelerate_yaml(one.text).distributed_type == "MULTI_GPU"
    assert "# run: accelerate launch --config_file accelerate.yaml train.py --use_peft --lora_r=8" in acc.text
    # formats that train every weight refuse, in one line naming those that do adapters
    for fmt, keys in (("torchrun", {"framework": "megatron"}), ("torchtitan", {})):
        with pytest.raises(InvalidSettingError, match=r"does not run task lora .*axolotl"):
            api.launch(lora, fmt, {"num_gpus": 2, **keys})
    # a layout the user pins with tensor parallelism needs Megatron: refused for an adapter job too
    with pytest.raises(InvalidSettingError, match=r"pretrain_gpt\.py.*TP2"):
        api.launch(lora, "torchrun", {"num_gpus": 2, "tp": 2})
    # torchtitan QLoRA (the finding's exact case): refused rather than a TOML with no 4-bit setting
    with pytest.raises(InvalidSettingError, match="framework torchtitan does not run task qlora"):
        api.launch("llama-3.1-8b", "", {"task": "qlora", "gpu": "RTX 4090", "framework": "torchtitan"})


def test_cards_without_bf16_get_fp16_launch_files(tmp_path: Path) -> None:
    """QA finding 2: vLLM refuses bf16 below compute capability 8.0; T4 is 7.5, V100 7.0."""
    from helpers.tool_schemas import check_accelerate_yaml, check_deepspeed_json, check_vllm_serve

    serve = api.launch("llama-3.2-1b", "vllm", {"gpu": "T4"})
    ns = check_vllm_serve(_argv(serve.text, "vllm"))
    assert ns.dtype == "float16" and serve.workload["precision"] == "fp16"
    assert "T4 has no BF16 (compute capability < 8.0): written as fp16" in serve.text
    assert check_vllm_serve(_argv(api.launch("llama-3.2-1b", "vllm", {"gpu": "H100"}).text, "vllm")).dtype == "bfloat16"
    acc = api.launch("llama-3.2-1b", "accelerate", {"gpu": "T4", "task": "lora"})
    assert check_accelerate_yaml(acc.text).mixed_precision == "fp16"
    ds = json.loads(api.launch("llama-3.2-1b", "deepspeed", {"gpu": "V100", "num_gpus": 2, "task": "finetune"}).text)
    assert ds["fp16"]["enabled"] is True and ds["bf16"]["enabled"] is False
    check_deepspeed_json(json.dumps(ds), world_size=2)
    # Megatron flags on 2 x V100 with tensor parallelism: --fp16, never --bf16
    mega = api.launch("llama-3.2-1b", "torchrun", {"gpu": "V100", "num_gpus": 2, "tp": 2, "task": "pretrain"}).text
    assert "--fp16" in mega and "--bf16" not in mega
    ax = yaml.safe_load(api.launch("llama-3.2-1b", "axolotl", {"gpu": "T4", "task": "lora"}).text)
    assert (ax["bf16"], ax["fp16"]) == (False, True)
    # torchtitan's mixed_precision_param is bfloat16 or float32: refused, naming the formats that run fp16
    with pytest.raises(InvalidSettingError, match="torchtitan's mixed precision is bfloat16 or float32"):
        api.launch("llama-3.2-1b", "torchtitan", {"gpu": "T4", "task": "pretrain"}, force=True)


def test_no_layout_fits_refusal_has_the_shortfall_and_best_fix(run_cli: RunCli) -> None:
    """QA finding 11: the training refusal carries the verdict and best fix, as the serving one does."""
    code, _, err = run_cli(
        "launch", "llama-3.1-8b", "--task", "pretrain", "--gpu", "3090", "--num-gpus", "4", "--format", "torchrun"
    )
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "no layout of llama-3.1-8b fits on 4 x GeForce RTX 3090" in err and "ethernet" not in err
    short = float(err.split(" GiB short per GPU")[0].rsplit(" ", 1)[1])
    assert 100 < short < 200  # 8B full training with AdamW unsharded, no checkpointing: ~174 GiB a GPU
    assert "Best fix: " in err and "--force writes the file anyway" in err
    # --force writes the workload's own layout, saying no searched one fits
    code, out, _ = run_cli(
        "launch", "llama-3.1-8b", "--task", "pretrain", "--gpu", "3090", "--num-gpus", "4", "--format", "torchrun",
        "--force",
    )  # fmt: skip
    assert code == 0 and "# no layout the search tried fits on 4 x GeForce RTX 3090" in out


# Llama 3.2 1B's config.json shape (meta-llama/Llama-3.2-1B config.json)
_LLAMA_1B = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
             "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
             "vocab_size": 128256, "max_position_embeddings": 131072, "tie_word_embeddings": True,
             "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5, "rope_theta": 500000.0}  # fmt: skip


def test_a_local_config_json_launches_with_its_folder_as_the_model(run_cli: RunCli, tmp_path: Path) -> None:
    """QA2 finding 7: from_pretrained takes the folder holding config.json; launch takes a config.json
    as estimate and plan do (not as a `plan --json` document)."""
    folder = tmp_path / "my-llama"
    folder.mkdir()
    cfg = folder / "config.json"
    cfg.write_text(json.dumps(_LLAMA_1B), encoding="utf-8")
    keys = {"task": "lora", "gpu": "A100"}
    ax = yaml.safe_load(api.launch(str(cfg), "axolotl", keys).text)
    assert ax["base_model"] == str(folder)
    lf = yaml.safe_load(api.launch(str(cfg), "llama-factory", keys).text)
    assert lf["model_name_or_path"] == str(folder)
    code, out, err = run_cli("launch", str(cfg), "--task", "lora", "--gpu", "A100", "--format", "axolotl")
    assert code == 0 and f"base_model: {folder}" in out, err
    # a JSON that is neither: still the plan reader's one line
    other = tmp_path / "notes.json"
    other.write_text('{"a": 1}', encoding="utf-8")
    code, _, err = run_cli("launch", str(other), "--format", "slurm")
    assert code == 2 and "not a `gpuplan plan --json` document" in err and err.count("\n") == 1


def test_forced_launch_of_a_job_that_does_not_fit_warns_in_the_file_and_on_stderr(run_cli: RunCli) -> None:
    """QA3 F27.3: 8B full finetune on one RTX 4090 (141.7 GiB needed, 23.6 GiB usable): --force
    writes it, with a warning on the file's first line and one stderr line."""
    args = ("launch", "llama-3.1-8b", "--task", "finetune", "--gpu", "4090", "--set", "datacenter=false")
    code, out, err = run_cli(*args, "--format", "torchrun", "--force")
    first = out.splitlines()[0]  # the top of the file
    assert code == 0 and first.startswith("# WARNING: does not fit (")
    needed, usable = (float(x.split(" GiB")[0]) for x in first.split("(")[1].split(", ")[:2])
    assert needed == pytest.approx(141.7, abs=0.5) and usable == pytest.approx(23.6, abs=0.2)
    assert err.count("\n") == 1 and err.startswith("gpuplan: WARNING: does not fit (")
    # a job that fits carries no warning
    code, out, err = run_cli(
        *args[:3], "qlora", *args[4:], "--set", "activation_checkpointing=full", "--format", "torchrun"
    )
    assert code == 0 and "WARNING" not in out and "WARNING" not in err
