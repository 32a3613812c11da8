"""Variable-length requests (specs/request_lengths.py): input_len and output_len are the means,
input_len_p90 and output_len_p90 the 90th percentiles. The tail sizes what must hold one request
whole (vLLM's start-up check, `launch`'s --max-model-len); the means size the paged cache's
capacity and the speed."""

from __future__ import annotations

from typing import Any

import pytest

import gpuplan
from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.results import Estimate, InferenceSpeed
from gpuplan.specs.request_lengths import tail_sequence_len
from gpuplan.specs.workload import check_keys_apply, make_workload

CHAT = "examples/chat-7b.yaml"  # mistral-7b bf16, batch 8, 512 in / 256 out, vLLM at 0.9
KV_PER_TOKEN = 32 * 8 * 128 * 2 * 2  # Mistral 7B: 32 layers x 8 KV heads x 128 dims x K and V x 2 bytes = 128 KiB


def _est(**keys: Any) -> Estimate:
    r = gpuplan.estimate(CHAT, gpu="L4", ecc=False, **keys)
    assert isinstance(r, Estimate)
    return r


def test_the_tail_sizes_one_sequence_and_the_means_the_capacity_and_speed() -> None:
    plain, skewed = _est(), _est(input_len_p90=2048, output_len_p90=1024)
    p, s = plain.memory.serving, skewed.memory.serving
    assert p is not None and s is not None
    assert p.kv_bytes_per_token == s.kv_bytes_per_token == KV_PER_TOKEN
    # one sequence: 512 + 256 = 768 tokens at the means, 2,048 + 1,024 = 3,072 at the tail (16-token blocks)
    assert p.sequence_kv_bytes == 768 * KV_PER_TOKEN and s.sequence_kv_bytes == 3072 * KV_PER_TOKEN
    # the paged cache holds 51,680 tokens either way: 67 sequences of 768 (the means)
    assert p.max_tokens == s.max_tokens == 51680 and p.max_sequences == s.max_sequences == 67
    assert isinstance(plain.time, InferenceSpeed) and isinstance(skewed.time, InferenceSpeed)
    assert skewed.time.output_tokens_per_s == plain.time.output_tokens_per_s
    assert plain.verdict.fits is True and skewed.verdict.fits is True


def test_a_tail_the_kv_budget_cannot_hold_does_not_fit() -> None:
    """An L4's 6.31 GiB budget holds 51,680 tokens: a 60,000 + 4,000-token tail request does not
    fit whole, though the 768-token mean does: short by 64,000 x 128 KiB less the budget."""
    r = _est(input_len_p90=60000, output_len_p90=4000)
    s = r.memory.serving
    assert s is not None and s.kv_budget_bytes / 2**30 == pytest.approx(6.309, abs=0.001)
    assert r.verdict.fits is False and r.verdict.limit == "vLLM's KV cache at gpu_memory_utilization 0.9"
    assert r.verdict.short_by_bytes == pytest.approx(64000 * KV_PER_TOKEN - s.kv_budget_bytes, rel=1e-12)
    assert r.verdict.short_by_bytes is not None and r.verdict.short_by_bytes / 2**30 == pytest.approx(1.504, abs=0.001)
    assert _est().verdict.fits is True


def test_tgi_holds_the_tail_request_token_by_token() -> None:
    """TGI's check counts tokens, not 16-token blocks: 2,000 + 1,001 = 3,001 tokens."""
    r = _est(engine="tgi", input_len_p90=2000, output_len_p90=1001)
    s = r.memory.serving
    assert s is not None and s.sequence_kv_bytes == pytest.approx(3001 * s.kv_bytes_per_token, rel=1e-12)


def test_launch_sets_max_model_len_to_the_tail(run_cli: RunCli) -> None:
    f = gpuplan.launch(CHAT, "vllm", gpu="L4", input_len_p90=2048, output_len_p90=1024)
    assert "--max-model-len=3072" in f.text
    assert "--max-model-len=768" in gpuplan.launch(CHAT, "vllm", gpu="L4").text
    w = make_workload({"model": "mistral-7b", "input_len": 512, "output_len": 256, "output_len_p90": 900})
    assert tail_sequence_len(w) == 512 + 900  # an unset percentile stays at its mean


def test_a_percentile_below_its_mean_is_refused_in_one_line(run_cli: RunCli) -> None:
    with pytest.raises(InvalidSettingError, match=r"input_len_p90 100 .* below the means input_len 512"):
        _est(input_len_p90=100)
    code, out, err = run_cli("estimate", CHAT, "--set", "gpu=L4", "--set", "output_len_p90=10")
    assert code == 2 and out == "" and "output_len_p90 10 lie below" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_the_percentiles_are_inference_keys() -> None:
    w = make_workload({"model": "llama-3.1-8b", "task": "lora", "input_len_p90": 2000})
    with pytest.raises(InvalidSettingError, match=r"'input_len_p90' key is read only by inference"):
        check_keys_apply(w)
