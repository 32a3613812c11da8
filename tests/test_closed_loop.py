"""`closed_loop: true`: batch_size requests kept in flight, each finished one replaced. A request's
first token is the steady state's (the step(s) the engine has taken up when it arrives, then the
step that prefills it beside the others' decodes), not the batch's prefill; validated on the HPML
Llama 2 7B vLLM concurrency sweep on one L4 (bencyna/hpml-llama2-tgi@41df14bd, stacks.csv HPV-*)."""

from __future__ import annotations

import statistics

import pytest

from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import engines
from gpuplan.estimators.perf import estimate_inference_time
from gpuplan.estimators.perf.inference import _prefill_ops
from gpuplan.estimators.perf.ops import make_ctx, total_time
from gpuplan.interfaces import api
from gpuplan.specs.models import load_model

HPML = {"model": "llama-2-7b", "task": "inference", "gpu": "L4", "batch_size": 8, "input_len": 68, "output_len": 128}


@pytest.mark.parametrize(("engine", "gap"), [("vllm", 1), ("sglang", 2)])
def test_steady_first_token_is_the_wait_then_the_prefilling_step(engine: str, gap: int) -> None:
    model, gpu = load_model("llama-2-7b"), api.catalog().get("L4")
    w = api.build_workload(None, {**HPML, "engine": engine})
    loop = w.with_(closed_loop=True)
    at_once, steady = estimate_inference_time(model, w, gpu), estimate_inference_time(model, loop, gpu)
    assert engines.closed_loop_gap_steps(engine) == gap
    one = total_time(_prefill_ops(make_ctx(model, loop, gpu), 1))
    host = engines.REQUEST_HOST_S.get(engine, 0.0)  # the engine's host time per request (SGLang's, fitted)
    assert steady.ttft_single_s == pytest.approx(gap * steady.tpot_s + max(steady.tpot_s, one) + host, rel=1e-12)
    # the batch's prefill, the decode step and the throughput are the sent-at-once estimate's
    assert (steady.ttft_s, steady.tpot_s, steady.output_tokens_per_s) == (
        at_once.ttft_s,
        at_once.tpot_s,
        at_once.output_tokens_per_s,
    )
    assert steady.request_latency_s == pytest.approx(steady.ttft_single_s + 127 * steady.tpot_s, rel=1e-12)
    if engine == "vllm":
        # HPML measured 115.7-119.6 ms at 8 in flight (HPV-011/029/047/065/083): two ~59 ms steps
        assert 0.110 < steady.ttft_single_s < 0.130 and steady.ttft_single_s > 1.9 * at_once.ttft_single_s


def test_one_in_flight_and_unset_are_unchanged() -> None:
    model, gpu = load_model("llama-2-7b"), api.catalog().get("L4")
    one = api.build_workload(None, {**HPML, "batch_size": 1})
    assert estimate_inference_time(model, one.with_(closed_loop=True), gpu) == estimate_inference_time(model, one, gpu)
    w = api.build_workload(None, HPML)
    assert w.closed_loop is None and "closed_loop" not in w.model_dump(exclude_unset=True)


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"request_rate": 2}, "request_rate (an open loop)"),
        ({"tokens": 1e6}, "tokens (a batch job)"),
        ({"engine": "tgi"}, "read only by the vllm and sglang engines"),
        ({"task": "lora"}, "closed_loop"),
    ],
)
def test_closed_loop_refusals(extra: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidSettingError, match=words.replace("(", r"\(").replace(")", r"\)")):
        api.build_workload(None, {**HPML, "closed_loop": True, **extra})


def test_the_cli_labels_the_steady_first_token(run_cli: RunCli) -> None:
    base = ("estimate", "llama-2-7b", "--task", "inference", "--gpu", "L4", "--batch-size", "8")
    code, out, _ = run_cli(*base, "--input-len", "68", "--output-len", "128", "--set", "closed_loop=true")
    assert code == 0 and "time to first token (8 kept in flight)" in out
    code, _, err = run_cli(*base, "--set", "closed_loop=true", "--set", "request_rate=1")
    assert code == 2 and "\n" not in err.strip() and "closed_loop" in err


def test_the_hpml_sweeps_first_tokens_in_a_closed_loop() -> None:
    """The 25 rows at 2-32 in flight: median |error| within 6% (they were 39-50% low read as the batch's
    prefill), fit and held-out rows alike; 2-8 in flight within 6% each."""
    rows = [r for r in api.validate().rows if r.id.startswith("HPV-") and "first_token" in r.metric]
    multi = [r for r in rows if r.workload["batch_size"] > 1]
    assert len(multi) == 25 and all(r.workload.get("closed_loop") for r in multi)
    for split in ("fit", "heldout"):
        errs = [abs(r.error) for r in multi if r.split == split]
        assert errs and statistics.median(errs) < 0.06, (split, errs)
    assert all(abs(r.error) < 0.06 for r in multi if r.workload["batch_size"] <= 8)


def test_the_keys_engine_lists_are_the_estimators_own() -> None:
    """specs/ may not import the estimators, so the engines that read closed_loop and
    cached_prefix_tokens are written out in specs/workload_keys.py: they must be the engines whose
    step loop (ARRIVAL_EXTRA_STEPS) and prefix cache (PREFIX_CACHE_BLOCK_TOKENS) the estimators know."""
    from gpuplan.specs.workload_keys import ENGINE_ONLY

    assert set(ENGINE_ONLY["closed_loop"]) == set(engines.ARRIVAL_EXTRA_STEPS)
    assert set(ENGINE_ONLY["cached_prefix_tokens"]) == set(engines.PREFIX_CACHE_BLOCK_TOKENS)
