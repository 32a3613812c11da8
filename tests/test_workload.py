"""Workload files and keys: DESIGN.md's YAML, safe loading, one clear error per bad key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.errors import InvalidSettingError
from gpuplan.specs.durations import parse_duration_s
from gpuplan.specs.workload import make_workload, read_workload_file

DESIGN_EXAMPLE = """\
model: llama-3.1-8b
task: lora
precision: bf16
gpu: A100-SXM4-80GB
num_gpus: 1
batch_size: 2
seq_len: 2048
grad_accum: 1
optimizer: adamw
activation_checkpointing: none
zero: 0
tp: 1
pp: 1
lora_rank: 8
input_len: 128
output_len: 128
weight_dtype: bf16
kv_dtype: bf16
tokens: 1.0e9
master_weights: fp32
objective: time
deadline: 24h
budget: 500
"""


def test_design_example_reads(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(DESIGN_EXAMPLE)
    w = read_workload_file(f)
    assert w.task == "lora" and w.batch_size == 2 and w.deadline == 24 * 3600 and w.tokens == 1e9
    # flags override the file
    assert read_workload_file(f, {"batch_size": 4}).batch_size == 4


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("model: x\nbatchsize: 2\n", "Unknown workload key 'batchsize'.*batch_size"),
        ("model: x\ntask: [1, 2\n", "not valid YAML"),
        ("- a\n- b\n", "must hold a mapping"),
        ("model: x\nzero: 5\n", "'zero'"),
        ("model: x\noptimizer: adamm\n", "adamw"),
        ("model: x\nweight_dtype: int3\n", "weight_dtype"),
        ("model: x\nnum_gpus: 4\ntp: 3\n", "multiple of tp x pp"),
        ("model: x\ntask: finetune\noffload: optimizer\n", "needs ZeRO"),
        ("model: x\ndeadline: soon\n", "duration"),
        ("task: lora\n", "needs 'model'"),
        ("model: !!python/object/apply:os.system ['echo hi']\n", "not valid YAML"),
        ("model: x\ngpu: 4090\ngpu: H100\n", r"line 3 \(first on line 2\): the key 'gpu' is given twice"),
        ("model: x\ntask: lora\nseq_len: 1.5e0\n", r"'seq_len' key must be a whole number\. Got '1\.5e0' \(= 1\.5\)"),
        ("model: x\ntask: lora\nbatch_size: 2.5\n", r"'batch_size' key must be a whole number\. Got 2\.5"),
        ("model: x\ntask: lora\nseq_len: 1e40\n", r"'seq_len' key is '1e40', beyond any sensible value"),
    ],
)
def test_bad_files_give_one_clear_line(tmp_path: Path, text: str, match: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(InvalidSettingError, match=match) as info:
        read_workload_file(f)
    assert "\n" not in str(info.value)


def test_integer_keys_read_integral_scientific_notation(tmp_path: Path) -> None:
    """`seq_len: 1e4` is a string to YAML 1.1 (PyYAML's float needs a dot and a signed exponent)
    and `1.0e+4` a float: an integer key reads either as the integer it writes, as tokens: 1e9 does."""
    f = tmp_path / "w.yaml"
    f.write_text("model: x\ntask: lora\nseq_len: 1e4\nbatch_size: 1.6e+1\nlora_rank: 6.4E1\nnum_gpus: 2.0\n")
    w = read_workload_file(f)
    assert (w.seq_len, w.batch_size, w.lora_rank, w.num_gpus) == (10_000, 16, 64, 2)
    assert all(isinstance(v, int) for v in (w.seq_len, w.batch_size, w.lora_rank, w.num_gpus))
    # --set values arrive as YAML scalars too; the key's own bounds still apply after the reading
    assert make_workload({"model": "x", "task": "lora", "batch_size": "1e3"}).batch_size == 1000
    assert make_workload({"model": "x", "task": "lora", "seq_len": "2.5e3"}).seq_len == 2500
    with pytest.raises(InvalidSettingError, match=r"'zero' key: Input should be less than or equal to 3"):
        make_workload({"model": "x", "task": "lora", "zero": "4e0"})
    # a float key keeps its fraction; a non-number string is the key's own error, as before
    assert make_workload({"model": "x", "lora_dropout": "5e-2"}).lora_dropout == pytest.approx(0.05, abs=1e-12)
    with pytest.raises(InvalidSettingError, match="unable to parse string as an integer"):
        make_workload({"model": "x", "task": "lora", "seq_len": "lots"})


def test_optimizer_aliases_and_durations() -> None:
    assert make_workload({"model": "x", "optimizer": "paged_adamw_8bit"}).optimizer == "paged-adamw-8bit"
    assert make_workload({"model": "x", "optimizer": "adamw_torch"}).optimizer == "adamw-foreach"
    assert make_workload({"model": "x", "weight_dtype": "Q4_K_M"}).weight_dtype == "q4_k_m"
    assert parse_duration_s("90 min") == 5400 and parse_duration_s("2d") == 172800
    assert make_workload({"model": "x", "task": "qlora"}).effective_weight_dtype == "nf4"


def test_every_workload_key_is_documented_and_the_reference_is_current() -> None:
    """docs/workload.md is generated from the Workload model and KEY_DOCS: every key has its line,
    and the file in the repository is what the generator writes today."""
    import subprocess
    import sys
    from pathlib import Path

    from gpuplan.specs.workload import Workload
    from gpuplan.specs.workload_docs import KEY_DOCS

    assert set(KEY_DOCS) == set(Workload.model_fields), "document every workload key in specs/workload_docs.py"
    assert all(len(v) > 15 for v in KEY_DOCS.values())
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "docs" / "workload_reference.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_encoder_decoder_defaults_to_transformers_and_refuses_vllm() -> None:
    from gpuplan.interfaces.api.workloads import engine_for_model
    from gpuplan.specs.models import load_model

    t0pp = load_model("t0pp")
    w = make_workload({"model": "t0pp", "task": "inference"})
    assert w.engine == "vllm"  # the unset default
    assert engine_for_model(w, t0pp).engine == "transformers"
    for engine in ("vllm", "sglang"):
        with pytest.raises(InvalidSettingError, match="set engine: transformers"):
            engine_for_model(make_workload({"model": "t0pp", "task": "inference", "engine": engine}), t0pp)
    tgi = make_workload({"model": "t0pp", "task": "inference", "engine": "tgi"})
    assert engine_for_model(tgi, t0pp).engine == "tgi"  # TGI serves T5 (its Seq2SeqLM)
    llama = load_model("llama-3.1-8b")
    assert engine_for_model(make_workload({"model": "llama-3.1-8b", "task": "inference"}), llama).engine == "vllm"
