"""QA round 3 (training launch files): every framework's launch agrees with `estimate` on the same
workload, data-parallel frameworks get no tensor/pipeline layouts, and the files carry the settings
the estimate assumed in the tools' own spelling."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces import api
from gpuplan.results import LayoutPlan
from gpuplan.specs import frameworks

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
GIB = 2**30


def _words(text: str) -> list[str]:
    return shlex.split(text.replace("\\\n", " "), comments=True)


# --- F3: LLaMA-Factory QLoRA -------------------------------------------------------------------


def test_llama_factory_qlora_leaves_quantization_method_at_its_bitsandbytes_default() -> None:
    """LLaMA-Factory spells bitsandbytes "bnb" since c3c0efba (QuantizationMethod.BNB) and quantises
    only on an exact match; the default is bitsandbytes in every release, so the key is left out."""
    rec = api.launch("llama-3.1-8b", "", {"task": "qlora", "gpu": "RTX 4090", "framework": "llama-factory"})
    cfg = yaml.safe_load(rec.text)
    assert "quantization_method" not in cfg
    assert (cfg["quantization_bit"], cfg["quantization_type"], cfg["finetuning_type"]) == (4, "nf4", "lora")


# --- F1 + F2: one rule for every framework ----------------------------------------------------


def _launchable() -> list[str]:
    return [f.name for f in frameworks.frameworks().values() if f.launch != "none"]


@pytest.mark.parametrize("name", _launchable())
def test_launch_refuses_exactly_when_estimate_does_with_the_same_best_fix(name: str) -> None:
    """Llama 3.1 8B full fine-tune (batch 1 x 2048) on 8 x H100 with each framework's defaults:
    `launch` writes a file when `estimate` says it fits, and otherwise refuses with the shortfall and
    the best fix `estimate` lists first (same GiB figure, to 0.01 GiB)."""
    n = 1 if frameworks.frameworks()[name].max_gpus == 1 else 8
    keys = {"task": "finetune", "gpu": "H100", "num_gpus": n, "framework": name}
    w = api.build_workload("llama-3.1-8b", keys)
    verdict = api.estimate(w).verdict
    if verdict.fits:
        rec = api.launch("llama-3.1-8b", "", keys)
        # the layout written is the workload's own (the one estimate judged): nothing changed
        for k in ("tp", "pp", "cp", "zero", "batch_size", "activation_checkpointing"):
            assert rec.workload[k] == getattr(w, k), (name, k)
        assert not any("changed from the workload" in x for x in rec.notes)
        return
    with pytest.raises(InvalidSettingError) as exc:
        api.launch("llama-3.1-8b", "", keys)
    msg = str(exc.value)
    short = (verdict.per_gpu_bytes - (verdict.capacity_bytes or 0)) / GIB
    assert f"{short:,.2f} GiB short per GPU" in msg, (name, msg)
    best = verdict.fixes[0]
    sets = " ".join(f"--set {k}={v}" for k, v in best.changes.items())
    assert f"({sets}), {best.per_gpu_bytes / GIB:,.2f} GiB per GPU" in msg, (name, msg)
    assert "\n" not in msg


def test_the_fixed_frameworks_give_the_same_answer_before_and_after() -> None:
    """The finding's cases: axolotl and llama-factory refused with estimate's zero=3 (before: a ZeRO-1
    and a ZeRO-3 file); with that fix set, all five data-parallel frameworks write a file."""
    base = {"task": "finetune", "gpu": "H100", "num_gpus": 8}
    for name in ("deepspeed", "axolotl", "llama-factory", "hf-trainer", "lightning"):
        with pytest.raises(InvalidSettingError, match=r"does not fit: .*Best fix: ZeRO-3 .*\(--set zero=3\)"):
            api.launch("llama-3.1-8b", "", {**base, "framework": name})
        rec = api.launch("llama-3.1-8b", "", {**base, "framework": name, "zero": 3})
        assert rec.layout.startswith("TP1 PP1 DP8 ZeRO-3"), (name, rec.layout)


def test_deepspeed_json_batch_passes_deepspeeds_batch_check(run_cli: RunCli) -> None:
    """train_batch_size = micro x accumulation x data-parallel world (DeepSpeedConfig._batch_assertion,
    run by the installed DeepSpeed with world_size 8); the layout and run command go to stderr."""
    from helpers.tool_schemas import check_deepspeed_json

    keys = {"task": "finetune", "gpu": "H100", "num_gpus": 8, "framework": "deepspeed", "zero": 3, "batch_size": 2}
    rec = api.launch("llama-3.1-8b", "", {**keys, "grad_accum": 4})
    cfg = json.loads(rec.text)
    assert (cfg["train_micro_batch_size_per_gpu"], cfg["gradient_accumulation_steps"]) == (2, 4)
    assert cfg["train_batch_size"] == 2 * 4 * 8 == 64
    check_deepspeed_json(rec.text, world_size=8)
    code, out, err = run_cli("launch", "llama-3.1-8b", "--task", "finetune", "--gpu", "H100", "--num-gpus", "8",
                             "--set", "framework=deepspeed", "--set", "zero=3")  # fmt: skip
    assert code == 0 and json.loads(out)["zero_optimization"]["stage"] == 3
    assert "gpuplan: layout TP1 PP1 DP8 ZeRO-3" in err and "deepspeed --num_gpus 8 train.py --deepspeed" in err
    # a tensor-parallel layout is no DeepSpeed ZeRO job: one line, in estimate as in launch
    for cmd in ("estimate", "launch"):
        code, _, err = run_cli(cmd, "llama-3.1-8b", "--task", "finetune", "--gpu", "H100", "--num-gpus", "8",
                               "--set", "framework=deepspeed", "--set", "tp=2")  # fmt: skip
        assert code == 2 and "framework deepspeed splits no tensors, pipelines or sequences" in err
        assert err.count("\n") == 1


@pytest.mark.parametrize("name", [f.name for f in frameworks.frameworks().values() if f.data_parallel])
def test_data_parallel_frameworks_are_searched_over_data_parallel_layouts_only(name: str) -> None:
    """`gpuplan plan` on a cluster (the layout search) keeps tp, pp, cp, ep at 1 for them."""
    if frameworks.frameworks()[name].max_gpus == 1:
        pytest.skip("one GPU: no layout to search")
    from gpuplan.planner.layouts import search_layouts
    from gpuplan.specs.cluster import parse_cluster
    from gpuplan.specs.gpu import bundled_catalog
    from gpuplan.specs.models import load_model

    w = api.build_workload("llama-3.1-8b", {"task": "finetune", "cluster": "2x8:H100", "framework": name})
    best = search_layouts(load_model("llama-3.1-8b"), w, parse_cluster("2x8:H100", bundled_catalog()), top=3).best
    assert best, name
    for r in best:
        assert (r.layout.tp, r.layout.pp, r.layout.cp, r.layout.ep, r.layout.dp) == (1, 1, 1, 1, 16), name


def test_a_search_that_changes_the_workload_says_so(run_cli: RunCli) -> None:
    """No framework, --format accelerate: the search keeps to data parallelism (accelerate runs no
    TP/PP) and names each setting it changed, in the header and on stderr."""
    code, out, err = run_cli("launch", "llama-3.1-8b", "--task", "finetune", "--gpu", "H100", "--num-gpus", "8",
                             "--format", "accelerate")  # fmt: skip
    assert code == 0
    header = [x for x in out.splitlines() if x.startswith("# ")]
    assert header[1].startswith("# layout: TP1 PP1 DP8 ZeRO-")
    line = next(x for x in header if "changed from the workload" in x)
    assert "zero 0 -> " in line and "as written it does not fit, 94.97 GiB short per GPU" in line
    assert line[2:] in err


# --- F19: FSDP + QLoRA -------------------------------------------------------------------------


def _run_words(text: str) -> list[str]:
    """The `# run: ...` command of a config file, as shell words."""
    line = next(x for x in text.splitlines() if x.startswith("# run: "))
    return shlex.split(line.removeprefix("# run: "))


def test_fsdp_qlora_stores_the_4bit_base_in_bf16_and_keeps_orig_params_off() -> None:
    """answer.ai's 70B QLoRA on 2 x 3090 (FSDP, params offloaded): the 4-bit weights stored as
    bfloat16 (FSDP shards float tensors only) and fsdp_use_orig_params false; accelerate reads the
    config and transformers builds the BitsAndBytesConfig from the flag."""
    from helpers.tool_schemas import check_accelerate_yaml

    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    for fmt in ("accelerate", "fsdp"):
        text = api.launch(str(EXAMPLES / "qlora-70b-2x3090.yaml"), fmt).text
        cfg = yaml.safe_load(text)
        assert cfg["distributed_type"] == "FSDP" and cfg["fsdp_config"]["fsdp_use_orig_params"] is False
        check_accelerate_yaml(text)
        words = _run_words(text)
        assert "--bnb_4bit_quant_storage=bfloat16" in words and "--load_in_4bit" in words
        storage = next(x for x in words if x.startswith("--bnb_4bit_quant_storage=")).split("=")[1]
        bnb = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_storage=storage)
        assert bnb.bnb_4bit_quant_storage == torch.bfloat16
    # one GPU (nothing sharded): the default uint8 storage, and LoRA keeps use_orig_params on
    one = api.launch(str(EXAMPLES / "course-qlora-8b.yaml"), "accelerate", {"gpu": "A100"}).text
    assert "--bnb_4bit_quant_storage" not in one
    lora = api.launch(str(EXAMPLES / "qlora-70b-2x3090.yaml"), "fsdp", {"task": "lora"}, force=True).text
    assert yaml.safe_load(lora)["fsdp_config"]["fsdp_use_orig_params"] is True
    assert "--bnb_4bit_quant_storage" not in lora


# --- F13: the PEFT script's training settings ------------------------------------------------------


def _training_arguments(words: list[str]) -> tuple[object, list[str]]:
    """transformers' own parser over the script's flags: (TrainingArguments, the flags it left)."""
    transformers = pytest.importorskip("transformers")
    parser = transformers.HfArgumentParser(transformers.TrainingArguments)
    # --use_cpu: TrainingArguments checks --bf16 against the GPU of the machine parsing it (none here)
    args, rest = parser.parse_args_into_dataclasses([*words, "--use_cpu"], return_remaining_strings=True)
    return args, rest


def test_peft_script_carries_batch_accumulation_length_checkpointing_and_optimizer() -> None:
    """The finding's torchrun LoRA (batch 2, grad_accum 4, full checkpointing) on a 4090: the flags
    TRL's sft.py reads; transformers' TrainingArguments parser accepts them with those values."""
    rec = api.launch(
        "llama-3.1-8b",
        "torchrun",
        {"task": "lora", "gpu": "RTX 4090", "batch_size": 2, "grad_accum": 4, "activation_checkpointing": "full"},
    )
    words = _words(rec.text)
    script = words[words.index("train.py") + 1 :]
    args, rest = _training_arguments(script)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (2, 4)  # type: ignore[attr-defined]
    assert args.gradient_checkpointing is True and args.optim == "adamw_torch_fused"  # type: ignore[attr-defined]
    # what is left is TRL's (ModelConfig's adapter, SFTConfig's max_length)
    assert "--max_length=2048" in rest and "--use_peft" in rest and "--lora_r=8" in rest
    # no checkpointing is written as False: SFTConfig turns it on by default
    off = api.launch("llama-3.2-1b", "torchrun", {"task": "lora", "gpu": "H100", "activation_checkpointing": "none"})
    assert "--gradient_checkpointing=False" in _words(off.text)


def test_unsloth_says_what_script_it_drives_and_passes_the_settings() -> None:
    """The finding's Unsloth full fine-tune (batch 4 x 4096 on a 4090): the TrainingArguments flags,
    8-bit AdamW as the estimate assumed, and a header naming the script and the Unsloth calls."""
    rec = api.launch(
        "llama-3.2-1b", "", {"task": "finetune", "gpu": "RTX 4090", "framework": "unsloth", "batch_size": 4,
                             "seq_len": 4096},
    )  # fmt: skip
    words = _words(rec.text)
    args, rest = _training_arguments(words[words.index("train.py") + 1 :])
    assert (args.per_device_train_batch_size, args.optim, args.bf16) == (4, "adamw_bnb_8bit", True)  # type: ignore[attr-defined]
    assert args.gradient_checkpointing is True and rest == ["--max_length=4096"]  # type: ignore[attr-defined]
    assert "TRL sft.py's spelling" in rec.text and "full_finetuning=True" in rec.text
    lora = api.launch("llama-3.1-8b", "", {"task": "lora", "gpu": "RTX 4090", "framework": "unsloth"}).text
    assert 'get_peft_model(r=8, lora_alpha=16, use_gradient_checkpointing="unsloth")' in lora


# --- F4 + F5: torchtune's LoRA targets and QLoRA kernel -------------------------------------------


def test_torchtune_lora_trains_its_configs_targets_and_the_launch_writes_them() -> None:
    """torchtune's LoRA configs adapt q_proj, v_proj, output_proj and the MLP, not the output head
    (recipes/configs/llama3_1/8B_lora_single_device.yaml at TORCHTUNE_COMMIT): the estimate counts
    those adapters (8B, rank 8: 32 x (65,536 + 40,960 + 65,536 + 3 x 147,456) = 19,660,800 params)
    and the command passes them, as it passes any lora_targets the user sets."""
    from gpuplan.estimators.lora import lora_param_count
    from gpuplan.specs.models import load_model

    keys = {"task": "lora", "gpu": "RTX 4090", "framework": "torchtune"}
    w = api.build_workload("llama-3.1-8b", keys)
    assert w.lora_targets == ["q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert lora_param_count(load_model("llama-3.1-8b"), w.lora_targets, 8) == 19_660_800
    words = _words(api.launch("llama-3.1-8b", "", keys).text)
    assert {"model.lora_attn_modules=[q_proj,v_proj,output_proj]", "model.apply_lora_to_mlp=True",
            "model.apply_lora_to_output=False"} <= set(words)  # fmt: skip
    for targets, attn, mlp in (
        ("all-linear", "q_proj,k_proj,v_proj,output_proj", "True"),
        ("q,v", "q_proj,v_proj", "False"),
    ):
        words = _words(api.launch("llama-3.1-8b", "", {**keys, "lora_targets": targets}).text)
        assert f"model.lora_attn_modules=[{attn}]" in words and f"model.apply_lora_to_mlp={mlp}" in words, targets
    with pytest.raises(InvalidSettingError, match=r"the whole MLP .* together"):
        api.launch("llama-3.1-8b", "", {**keys, "lora_targets": "q,v,gate_proj"})


def test_qlora_header_names_the_kernel_the_estimate_used() -> None:
    keys = {"task": "qlora", "gpu": "RTX 4090"}
    tune = api.launch("llama-3.1-8b", "", {**keys, "framework": "torchtune"}).text
    assert "on a frozen 4-bit NF4 (torchao NF4Tensor) base" in tune and "bitsandbytes" not in tune
    ax = api.launch("llama-3.1-8b", "", {**keys, "framework": "axolotl"}).text
    assert "on a frozen 4-bit NF4 (bitsandbytes) base" in ax


# --- F12 + F16 + F15: what a framework cannot run, refused alike in every face ----------------------


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"task": "lora", "framework": "torchtitan"}, "framework torchtitan does not run task lora"),
        ({"task": "lora", "framework": "megatron"}, "framework megatron does not run task lora"),
        ({"task": "qlora", "framework": "nemo"}, "framework nemo does not run task qlora"),
        ({"task": "pretrain", "framework": "torchtune"}, "framework torchtune does not run task pretrain"),
        ({"task": "pretrain", "framework": "torchtitan", "precision": "fp8", "fp8_recipe": "delayed"},
         "framework torchtitan has no fp8_recipe delayed"),
        ({"task": "pretrain", "framework": "megatron", "precision": "fp8", "fp8_recipe": "rowwise"},
         "framework megatron has no fp8_recipe rowwise"),
        ({"task": "finetune", "framework": "axolotl", "pp": 2}, "framework axolotl splits no tensors"),
    ],
)  # fmt: skip
def test_framework_limits_are_one_line_in_estimate_fit_plan_and_launch(
    run_cli: RunCli, keys: dict[str, object], message: str
) -> None:
    sets = [x for k, v in keys.items() for x in ("--set", f"{k}={v}")]
    for cmd in ("estimate", "fit", "plan", "launch"):
        gpu = ["--gpu", "H100", "--num-gpus", "8"] if cmd != "plan" else []
        code, _, err = run_cli(cmd, "llama-3.1-8b", *gpu, *sets)
        assert code == 2 and message in err and err.count("\n") == 1, (cmd, err)


def test_what_the_frameworks_do_run_still_estimates() -> None:
    """NeMo fine-tunes LoRA adapters natively (finetune_recipe peft_scheme 'lora', its LoRA on every
    block linear): estimate takes it and launch writes the recipe with the adapter as peft overrides."""
    w = api.build_workload("llama-3.1-8b", {"task": "lora", "gpu": "H100", "num_gpus": 8, "framework": "nemo"})
    assert api.estimate(w).verdict.fits is True and w.lora_targets == "all-linear"
    words = _words(api.launch(w, "").text)
    assert words[:5] == ["nemo", "llm", "finetune", "--factory", 'llama31_8b(peft_scheme="lora")']
    assert {"peft.dim=8", "peft.alpha=16", "peft.dropout=0",
            "peft.target_modules=[linear_qkv,linear_proj,linear_fc1,linear_fc2]"} <= set(words)  # fmt: skip
    qv = api.launch(w.with_(lora_targets="q,v"), "").text
    assert "peft.target_modules=[linear_qkv]" in _words(qv) and "linear_qkv is q, k and v together" in qv
    tt = api.build_workload("llama-3.1-8b", {"task": "pretrain", "gpu": "H100", "num_gpus": 8, "framework":
                                             "torchtitan", "precision": "fp8"})  # fmt: skip
    assert tt.fp8_recipe == "tensorwise"


def test_torchtitan_names_only_models_it_has() -> None:
    """Llama-architecture models are torchtitan's llama3 (a preset flavor only for Llama 3.x's own
    sizes and tokenizer, else the ModelArgs to register); other architectures are refused like NeMo's."""
    keys = {"task": "pretrain", "gpu": "H100", "num_gpus": 8, "framework": "torchtitan"}
    for model in ("gpt-j-6b", "qwen2.5-7b"):
        with pytest.raises(InvalidSettingError, match=f"torchtitan has no model for {model} .*--format torchrun"):
            api.launch(model, "", keys)
    one = api.launch("llama-3.2-1b", "", keys).text
    assert 'name = "llama3"' in one and 'flavor = "custom"' in one
    assert "dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, vocab_size=128256, rope_theta=500000" in one
    eight = api.launch("llama-3.1-8b", "", keys).text
    assert 'flavor = "8B"' in eight and "register" not in eight
    # Llama 2 70B is 70B but not Llama 3's tokenizer or RoPE base: not the "70B" flavor
    l2 = api.launch("llama-2-70b", "", {**keys, "num_gpus": 64, "zero": 3}, force=True).text
    assert 'flavor = "custom"' in l2 and "vocab_size=32000, rope_theta=10000" in l2


# --- F11: Megatron-LM builds the preset's model ------------------------------------------------------


def _megatron_flags(text: str) -> tuple[list[str], dict[str, str]]:
    words = _words(text)
    script = words[words.index("pretrain_gpt.py") + 1 :]
    return script, dict(zip(script, [*script[1:], ""], strict=True))


def test_megatron_flags_carry_rope_base_norm_epsilon_qkv_bias_and_rope_scaling() -> None:
    """Megatron-LM's defaults are --rotary-base 10000, --norm-epsilon 1e-5, no QKV bias and no RoPE
    scaling: Qwen2.5 7B needs theta 1e6, eps 1e-6 and q/k/v biases; Llama 3.1 8B theta 500,000 and
    llama3 scaling (factor 8); a fine-tune loads the converted checkpoint."""
    keys = {"gpu": "H100", "num_gpus": 8, "framework": "megatron", "activation_checkpointing": "full"}
    qwen, f = _megatron_flags(api.launch("qwen2.5-7b", "", {**keys, "task": "pretrain"}).text)
    assert (f["--rotary-base"], f["--norm-epsilon"]) == ("1000000", "1e-06") and "--add-qkv-bias" in qwen
    assert "--use-rope-scaling" not in qwen and "--finetune" not in qwen
    rec = api.launch("llama-3.1-8b", "", {**keys, "task": "finetune"})
    llama, f = _megatron_flags(rec.text)
    assert (f["--rotary-base"], f["--use-rope-scaling"], f["--rope-scaling-factor"]) == (
        "500000",
        "--rope-scaling-factor",
        "8",
    )
    assert "--norm-epsilon" not in llama and "--add-qkv-bias" not in llama  # 1e-5 and no bias: Megatron's own
    assert {"--finetune", "--load=$CHECKPOINT_DIR", "--no-load-optim", "--no-load-rng"} <= set(llama)
    assert "# fine-tune: set CHECKPOINT_DIR" in rec.text
    _, f = _megatron_flags(api.launch("yi-34b", "", {**keys, "task": "pretrain", "num_gpus": 16, "tp": 8}).text)
    assert f["--rotary-base"] == "5000000"


def test_deepspeed_json_stderr_runs_the_peft_script_for_an_adapter_job(run_cli: RunCli) -> None:
    """ZeRO-3 QLoRA on 2 x 3090 as a DeepSpeed JSON: stderr's command carries the adapter, the
    4-bit storage in bf16 (ZeRO-3 shards the base) and the training flags."""
    code, out, err = run_cli("launch", str(EXAMPLES / "qlora-70b-2x3090.yaml"), "--format", "deepspeed",
                             "--set", "sharding=deepspeed")  # fmt: skip
    assert code == 0 and json.loads(out)["zero_optimization"]["stage"] == 3
    assert "run: deepspeed --num_gpus 2 train.py --use_peft --lora_r=64" in err
    assert "--bnb_4bit_quant_storage=bfloat16" in err and "--per_device_train_batch_size=2" in err


@pytest.mark.parametrize("name", ["torchtitan", "megatron"])
def test_on_a_named_cluster_a_framework_launch_runs_plans_best_layout(name: str) -> None:
    """QA F28: Llama 2 70B on 64 x 8 H100 (examples/pretrain-70b-cluster.yaml) with `framework:` and
    no layout keys: the file's layout and estimate are `gpuplan plan --cluster`'s first row (searched
    among what the framework's launch runs), and a note names what changed from the workload as
    written; before, torchtitan's file ran its defaults (10% slower) and Megatron's refused."""
    ex = str(Path(__file__).resolve().parent.parent / "examples" / "pretrain-70b-cluster.yaml")
    w = api.build_workload(ex, {"framework": name})
    best = api.plan(w)
    assert isinstance(best, LayoutPlan)
    rec = api.launch(ex, "", {"framework": name})
    assert rec.layout == best.layouts[0].layout
    assert f"{best.layouts[0].tokens_per_s:,.0f} tokens/s" in rec.text  # the header's estimate is plan's
    assert any("changed from the workload" in x for x in rec.notes)
    # the same framework on GPUs named by gpu and num_gpus writes the workload as estimated (QA F2)
    keys = {"task": "finetune", "gpu": "H100", "num_gpus": 8, "framework": name}
    on_gpus = api.launch("llama-3.1-8b", "", keys)
    assert not any("changed from the workload" in x for x in on_gpus.notes)
