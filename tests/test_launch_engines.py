"""A serving workload's launch: its engine's own format by default (vLLM: `vllm serve`), and a
one-line refusal naming the engine's own command where gpuplan writes none, or where the format asked
for is another engine's or a trainer's (QA F7, F8)."""

from __future__ import annotations

import shlex

import pytest

from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces import api


def test_vllm_workload_launches_vllm_without_format() -> None:
    # examples/serve-70b.yaml: engine vllm (the default), batch 8 of 2048 + 512 tokens at 0.95
    f = api.launch("examples/serve-70b.yaml", "")
    assert f.format == "vllm"
    argv = shlex.split(f.text.replace("\\\n", " "), comments=True)
    assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B"]
    assert "--max-model-len=2560" in argv and "--gpu-memory-utilization=0.95" in argv


def test_llama_cpp_offload_is_not_launched_as_vllm(run_cli: RunCli) -> None:
    # examples/laptop-offload.yaml: qwen2.5-14b Q4_K_M, -ngl 37 on an 8 GB RTX 3070, 1024 + 256 tokens;
    # vLLM would load the 16-bit 14B (~29.5 GB) with no layers in host memory
    code, out, err = run_cli("launch", "examples/laptop-offload.yaml", "--format", "vllm")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "engine is llama.cpp" in err and "vLLM cannot keep layers in host memory" in err
    assert "llama-server -m <Qwen2.5-14B-Q4_K_M.gguf> -ngl 37 -c 1280 -np 1" in err
    code, _, err = run_cli("launch", "examples/laptop-offload.yaml")  # no format: the same command named
    assert code == 2 and "writes no launch file for" in err and "-ngl 37 -c 1280" in err


def test_tgi_workload_names_its_launcher() -> None:
    with pytest.raises(InvalidSettingError) as exc:
        api.launch("examples/tgi-8b.yaml", "vllm")
    msg = str(exc.value)
    assert "engine is tgi" in msg and "set engine: vllm" in msg
    assert (
        "text-generation-launcher --model-id meta-llama/Llama-3.1-8B --num-shard 1 --max-input-tokens 1000 "
        "--max-total-tokens 1250" in msg
    )


def test_training_format_for_a_serving_workload_names_the_serving_one() -> None:
    with pytest.raises(InvalidSettingError, match=r"--format torchrun launches training;.*use --format vllm"):
        api.launch("examples/serve-70b.yaml", "torchrun")
    with pytest.raises(InvalidSettingError, match=r"--format axolotl launches training;.*llama-server"):
        api.launch("examples/laptop-offload.yaml", "axolotl")
