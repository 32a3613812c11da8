"""QA round 4 (launch files and workload keys): LoRA alpha as a key every launch writer reads,
the LoRA target names people write, --force's warning, empty values, multi-node Axolotl and the
keys LLaMA-Factory and Axolotl require."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces import api
from gpuplan.results.estimate import TrainingSpeed
from gpuplan.specs.workload import make_workload

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _words(text: str) -> list[str]:
    return shlex.split(text.replace("\\\n", " "), comments=True)


def _comment_words(text: str, prefix: str = "# run: ") -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(prefix))
    return shlex.split(line.removeprefix(prefix))


# --- lora_alpha ------------------------------------------------------------------------------------

LORA = {"model": "llama-3.1-8b", "task": "lora", "gpu": "A100", "lora_rank": 32}


def test_lora_alpha_defaults_to_twice_the_rank_and_is_validated() -> None:
    assert make_workload(LORA).effective_lora_alpha == 64  # unset: 2 x r (LLaMA-Factory's default)
    assert make_workload({**LORA, "lora_alpha": 16}).effective_lora_alpha == 16
    for bad in (0, -16):
        with pytest.raises(InvalidSettingError, match=r"^The 'lora_alpha' key: .*greater than 0\. Got "):
            make_workload({**LORA, "lora_alpha": bad})


def test_lora_alpha_does_not_move_the_estimate() -> None:
    a, b = api.estimate(make_workload(LORA)), api.estimate(make_workload({**LORA, "lora_alpha": 7}))
    assert a.memory.per_gpu_bytes == b.memory.per_gpu_bytes
    assert isinstance(a.time, TrainingSpeed) and isinstance(b.time, TrainingSpeed)
    assert a.time.step_time_s == b.time.step_time_s


@pytest.mark.parametrize(
    ("fmt", "expect"),
    [
        ("accelerate", "--lora_alpha=16"),  # TRL sft.py's flag, in the file's run line
        ("torchtune", "model.lora_alpha=16"),
        ("unsloth", "lora_alpha=16,"),
        ("nemo", "peft.alpha=16"),
    ],
)
def test_every_writer_writes_the_workload_lora_alpha(fmt: str, expect: str) -> None:
    keys = {**LORA, "lora_alpha": 16}
    if fmt == "nemo":
        keys |= {"num_gpus": 8}
    text = api.launch(make_workload(keys), fmt).text
    assert expect in text and "alpha=64" not in text and "alpha 64" not in text
    assert "adapter: lora r=32 alpha=16 " in text  # the header line says the same


def test_yaml_trainers_write_the_workload_lora_alpha() -> None:
    keys = {**LORA, "lora_alpha": 16}
    ax = yaml.safe_load(api.launch(make_workload(keys), "axolotl").text)
    lf = yaml.safe_load(api.launch(make_workload(keys), "llama-factory").text)
    assert (ax["lora_r"], ax["lora_alpha"]) == (32, 16)
    assert (lf["lora_rank"], lf["lora_alpha"]) == (32, 16)
    # unset: 2 x r, written out (LLaMA-Factory would derive the same; Axolotl has no default)
    assert yaml.safe_load(api.launch(make_workload(LORA), "llama-factory").text)["lora_alpha"] == 64


def test_fsdp_qlora_example_reproduces_train_py_lora_alpha(run_cli: RunCli) -> None:
    """AnswerDotAI/fsdp_qlora train.py@1a9fddfb main(): lora_rank 64, lora_alpha 16 (not 2 x 64)."""
    code, out, err = run_cli("launch", str(EXAMPLES / "qlora-70b-2x3090.yaml"), "--format", "fsdp")
    assert code == 0, err
    words = _comment_words(out)
    assert "--lora_r=64" in words and "--lora_alpha=16" in words


# --- LoRA target names ---------------------------------------------------------------------------

TUNE_NAMES = {**LORA, "lora_targets": "q_proj,v_proj,output_proj,w1,w2,w3"}


def test_torchtune_names_count_as_the_model_modules() -> None:
    """torchtune's output_proj and w1/w2/w3 (torchtune/models/convert_weights.py _FROM_HF: gate_proj ->
    w1, down_proj -> w2, up_proj -> w3) adapt the same Llama layers as the HF names."""
    hf = {**LORA, "lora_targets": "q_proj,v_proj,o_proj,gate_proj,down_proj,up_proj"}
    a, b = api.estimate(make_workload(TUNE_NAMES)), api.estimate(make_workload(hf))
    assert a.memory.trainable_params == b.memory.trainable_params
    # 8B, r=32: q 4096x4096, v 4096x1024, o 4096x4096, 3 MLP 4096x14336; 32 layers: r x (in + out) each
    per_layer = 32 * ((4096 + 4096) + (4096 + 1024) + (4096 + 4096) + 3 * (4096 + 14336))
    assert a.memory.trainable_params == 32 * per_layer


@pytest.mark.parametrize("fmt", ["accelerate", "axolotl", "llama-factory", "unsloth"])
def test_launch_files_write_the_model_module_names(fmt: str) -> None:
    """PEFT (and Axolotl, LLaMA-Factory through it) match module names and skip a listed name that
    matches nothing beside names that do: the files name the model's modules, with a note."""
    text = api.launch(make_workload(TUNE_NAMES), fmt).text
    if fmt == "axolotl":
        written = yaml.safe_load(text)["lora_target_modules"]
    elif fmt == "llama-factory":
        written = yaml.safe_load(text)["lora_target"].split(",")
    else:
        words = _words(text) if fmt == "unsloth" else _comment_words(text)
        i = words.index("--lora_target_modules")
        written = [x for x in words[i + 1 :] if not x.startswith("-")][:6]
    assert written == ["q_proj", "v_proj", "o_proj", "gate_proj", "down_proj", "up_proj"]
    assert "output_proj -> o_proj, w1 -> gate_proj, w2 -> down_proj, w3 -> up_proj" in text


def test_torchtune_launch_reads_short_and_hf_names_into_its_own() -> None:
    text = api.launch(make_workload({**LORA, "lora_targets": "q,v,output_proj"}), "torchtune").text
    assert "model.lora_attn_modules=[q_proj,v_proj,output_proj]" in text


def test_a_target_matching_no_layer_in_a_mixed_list_is_refused(run_cli: RunCli) -> None:
    for cmd in ("estimate", "launch"):
        fmt = ["--format", "axolotl"] if cmd == "launch" else []
        code, out, err = run_cli(cmd, "llama-3.1-8b", "--task", "lora", "--gpu", "A100", *fmt,
                                 "--set", "lora_targets=q_proj,v_proj,output_proj,bogus")  # fmt: skip
        assert code == 2 and out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "['bogus']" in lines[0] and "output_proj" not in lines[0]
        assert "Its linear layers: down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj" in lines[0]


# --- launch --force on a job that does not fit ---------------------------------------------------

FORCED = ("launch", "llama-3.1-8b", "--task", "finetune", "--gpu", "4090", "--set", "datacenter=false", "--force")


def _needed_usable(line: str) -> tuple[float, float]:
    needed, usable = (float(x.split(" GiB")[0]) for x in line.split("(", 1)[1].split(", ")[:2])
    return needed, usable


@pytest.mark.parametrize("fmt", ["torchrun", "slurm", "accelerate", "axolotl", "llama-factory", "torchtitan"])
def test_forced_file_warns_on_its_first_comment_line_and_on_stderr(run_cli: RunCli, fmt: str) -> None:
    """8B full fine-tune on one RTX 4090: ~141.7 GiB needed (less with the framework's checkpointing),
    23.6 GiB usable (24 GiB less the CUDA context's reserve)."""
    code, out, err = run_cli(*FORCED, "--format", fmt)
    assert code == 0, err
    lines = out.splitlines()
    top = lines[1] if lines[0] == "#!/bin/bash" else lines[0]  # a Slurm script's shebang stays first
    assert top.startswith("# WARNING: does not fit (") and "GiB needed" in top and "GiB usable" in top
    needed, usable = _needed_usable(top)
    assert needed > 2 * usable and usable == pytest.approx(23.6, abs=0.2)
    warned = [x for x in err.splitlines() if "WARNING" in x]
    assert warned == ["gpuplan: " + top.removeprefix("# ")]


def test_forced_deepspeed_json_warns_on_stderr(run_cli: RunCli) -> None:
    """A DeepSpeed config is JSON (no comments): the warning is stderr's first line, once."""
    code, out, err = run_cli(*FORCED, "--format", "deepspeed")
    assert code == 0 and out.lstrip().startswith("{"), err
    lines = err.splitlines()
    assert lines[0].startswith("gpuplan: WARNING: does not fit (") and err.count("WARNING") == 1
    needed, usable = _needed_usable(lines[0])
    assert needed == pytest.approx(141.7, abs=0.5) and usable == pytest.approx(23.6, abs=0.2)


# --- the data keys LLaMA-Factory and Axolotl need ------------------------------------------------


def _edit_comment_then(text: str, key: str) -> None:
    """The key is written under an EDIT comment, after the settings (a user finds what to change)."""
    lines = text.splitlines()
    at = lines.index(next(x for x in lines if x.startswith(f"{key}:")))
    assert any(x.startswith("# EDIT: the data to train on") for x in lines[at - 5 : at])


@pytest.mark.parametrize("task", ["lora", "qlora", "finetune"])
def test_llama_factory_config_names_a_bundled_dataset_and_a_template(task: str) -> None:
    """hparams/parser.py get_train_args refuses training without `dataset`; stages other than pt need
    a `template`: alpaca_en_demo (bundled in LLaMA-Factory's data/, as its llama3_lora_sft example uses)
    and `default` (its README's choice for base models)."""
    keys: dict[str, object] = {"model": "llama-3.2-1b", "task": task, "gpu": "A100"}
    text = api.launch(make_workload(keys), "llama-factory").text
    cfg = yaml.safe_load(text)
    assert (cfg["stage"], cfg["dataset"], cfg["template"]) == ("sft", "alpaca_en_demo", "default")
    assert cfg["output_dir"] == "saves/gpuplan"
    _edit_comment_then(text, "dataset")
    pt = yaml.safe_load(api.launch(make_workload({**keys, "task": "pretrain"}), "llama-factory").text)
    assert (pt["stage"], pt["dataset"]) == ("pt", "c4_demo") and "template" not in pt


def test_llama_factory_flags_an_instruct_model_template() -> None:
    text = api.launch(make_workload({"model": "llama-3.3-70b", "task": "qlora", "gpu": "H100"}), "llama-factory").text
    assert "meta-llama/Llama-3.3-70B-Instruct is an instruct/chat model: set its own" in text


@pytest.mark.parametrize("task", ["lora", "finetune", "pretrain"])
def test_axolotl_config_names_datasets_and_output_dir(task: str) -> None:
    """Axolotl's Llama 3 example (examples/llama-3/lora-8b.yml): datasets [{path: mhenrichsen/alpaca_2k_test,
    type: alpaca}] and an output_dir; pre-training reads the same rows as plain text (type: completion)."""
    text = api.launch(make_workload({"model": "llama-3.2-1b", "task": task, "gpu": "A100"}), "axolotl").text
    cfg = yaml.safe_load(text)
    want = {"path": "mhenrichsen/alpaca_2k_test", "type": "alpaca"}
    if task == "pretrain":
        want = {"path": "mhenrichsen/alpaca_2k_test", "type": "completion", "field": "output"}
    assert cfg["datasets"] == [want] and cfg["output_dir"] == "./outputs/gpuplan"
    _edit_comment_then(text, "datasets")
    assert "<" not in text.split("# run:", 1)[1]  # no <placeholder> left for the tool to choke on
