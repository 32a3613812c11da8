"""`num_prompts`: a finite open-loop run, N prompts sent at `request_rate` (vLLM benchmark_serving
and SGLang bench_serving --num-prompts with --request-rate). Where the arrival window N / rate is
short against a request's latency all N are in flight together, each prompt prefilled as it comes;
where the prefill work arrives faster than the engine prefills (rho = rate x q > 1) the prompts
queue and the median one waits for the prefills ahead of it (estimators/perf/inference.py
_burst_at_rate)."""

from __future__ import annotations

import json

import pytest

from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import engines
from gpuplan.estimators.perf import estimate_inference_time
from gpuplan.estimators.perf.inference import BURST_ENGINES
from gpuplan.interfaces import api
from gpuplan.specs.models import load_model
from gpuplan.specs.workload_keys import ENGINE_ONLY

# Llama 3.1 8B on one H100: 8000-token prompts cost ~0.1-0.2 s of prefill each, so 10 a second
# arrive faster than it prefills them
LONG = {"model": "llama-3.1-8b", "task": "inference", "gpu": "H100", "input_len": 8000, "output_len": 200}
MOST = 64  # the KV cache's cap passed in as max_batch, as `gpuplan estimate` passes its own


def _queue_by_events(prompts: int, rate: float, q: float, first: float) -> float:
    """The median time to first token of `prompts` arriving every 1 / rate and prefilled one after
    another, first come first served, the first taking `first` and each later one q: an event walk,
    independent of the closed form it checks."""
    free, waits = 0.0, []
    for i in range(prompts):
        arrive = i / rate
        start = max(arrive, free)
        free = start + (first if i == 0 else q)
        waits.append(free - arrive)
    return sorted(waits)[prompts // 2]


def test_a_burst_faster_than_the_prefill_queues_the_median_prompt() -> None:
    """sglang, 40 prompts at 10/s: the median prompt (k = 20) waits for the prefills of the 20 ahead,
    (k + 1) q - k / rate, q the batched prefill's share per prompt (ttft(64) / 64, at most one
    prompt's own prefill). Against the hand calculation from the batch-1 and batch-64 estimates to
    1e-9, and against an event walk of the same queue to one q (its first prompt's own prefill)."""
    model, gpu = load_model("llama-3.1-8b"), api.catalog().get("H100")
    burst = api.build_workload(None, {**LONG, "engine": "sglang", "request_rate": 10, "num_prompts": 40})
    it = estimate_inference_time(model, burst, gpu, max_batch=MOST)
    one = estimate_inference_time(model, burst.with_(request_rate=None, num_prompts=None, batch_size=1), gpu)
    batch = estimate_inference_time(model, burst.with_(request_rate=None, num_prompts=None, batch_size=MOST), gpu)
    host = engines.REQUEST_HOST_S["sglang"]  # SGLang's host time per request: outside the engine's queue
    q = min(one.ttft_s - host, (batch.ttft_s - host) / MOST)
    assert 10 * q > 1.2  # the prompts do queue
    k = 20
    queue = (k + 1) * q - k / 10
    wait = it.tpot_s * (0.5 + engines.ARRIVAL_EXTRA_STEPS["sglang"])
    one_engine = one.ttft_s - host
    assert it.ttft_s == pytest.approx(max(one_engine + wait, queue) + host, rel=1e-9)
    assert it.ttft_s == pytest.approx(queue + host, rel=1e-9)  # the queue, not the step wait, sets it here
    assert abs(it.ttft_s - host - _queue_by_events(40, 10.0, q, q)) < q
    # all 40 overlap (8000 tokens of prefill each, 200 of decode: far longer than the 3.9 s window)
    assert it.batch == 40
    # the run: the last prompt's prefill ends after all 40 (40 q from the first arrival), then it
    # decodes its 199 further tokens; throughput is the 40 x 200 output tokens over that
    engine_ttft = it.ttft_s - host
    assert it.output_tokens_per_s == pytest.approx(40 * 200 / (max(39 / 10 + engine_ttft, 40 * q) + 199 * it.tpot_s))


def test_one_prompt_is_one_request() -> None:
    """N = 1: the engine is idle when it arrives, so its time to first token, step and throughput are
    one request's sent alone (batch_size 1, no rate), exactly."""
    model, gpu = load_model("llama-3.1-8b"), api.catalog().get("H100")
    for engine in sorted(BURST_ENGINES):
        base = {**LONG, "engine": engine, "input_len": 1000}
        alone = estimate_inference_time(model, api.build_workload(None, {**base, "batch_size": 1}), gpu)
        burst = api.build_workload(None, {**base, "request_rate": 0.5, "num_prompts": 1})
        one = estimate_inference_time(model, burst, gpu, max_batch=MOST)
        assert one.batch == 1
        assert (one.ttft_s, one.tpot_s) == (alone.ttft_s, alone.tpot_s), engine
        assert one.output_tokens_per_s == pytest.approx(alone.output_tokens_per_s, rel=1e-12), engine


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_long_window_is_the_steady_state(engine: str) -> None:
    """N / rate far longer than a request (10^7 prompts at 2/s against a few seconds each): the batch,
    first token and step are the endless stream's (request_rate alone) exactly; throughput within
    1e-4 (the run's one extra latency over its 5 x 10^6 s)."""
    model, gpu = load_model("llama-3.1-8b"), api.catalog().get("H100")
    stream = api.build_workload(None, {**LONG, "engine": engine, "input_len": 1000, "request_rate": 2})
    steady = estimate_inference_time(model, stream, gpu, max_batch=MOST)
    long = estimate_inference_time(model, stream.with_(num_prompts=10**7), gpu, max_batch=MOST)
    assert (long.batch, long.ttft_s, long.tpot_s) == (steady.batch, steady.ttft_s, steady.tpot_s)
    assert long.output_tokens_per_s == pytest.approx(steady.output_tokens_per_s, rel=1e-4)
    assert steady.output_tokens_per_s == pytest.approx(2 * 200, rel=1e-9)  # it delivers the arrivals


def test_a_short_window_runs_all_prompts_each_prefilled_on_arrival() -> None:
    """1000-token prompts at 10/s (rho < 1), 50 of them, 2000 tokens out each: all 50 overlap and the
    median prompt's first token is one prompt's prefill stretched by rho, not the batch of 50's."""
    model, gpu = load_model("llama-3.1-8b"), api.catalog().get("H100")
    base = {**LONG, "engine": "vllm", "input_len": 1000, "output_len": 2000}
    burst = estimate_inference_time(
        model, api.build_workload(None, {**base, "request_rate": 10, "num_prompts": 50}), gpu, max_batch=MOST
    )
    at_once = estimate_inference_time(model, api.build_workload(None, {**base, "batch_size": 50}), gpu)
    assert burst.batch == 50 and burst.tpot_s == at_once.tpot_s
    assert burst.ttft_s < at_once.ttft_s / 5
    one = estimate_inference_time(model, api.build_workload(None, {**base, "batch_size": 1}), gpu).ttft_s
    assert one < burst.ttft_s < one / (1 - 10 * one) + burst.tpot_s * 0.5 + 1e-12


def test_unset_leaves_the_workload_and_answer_as_they_were() -> None:
    model, gpu = load_model("llama-3.1-8b"), api.catalog().get("H100")
    w = api.build_workload(None, {**LONG, "engine": "vllm", "request_rate": 3})
    assert w.num_prompts is None and "num_prompts" not in w.model_dump(exclude_none=True)
    assert estimate_inference_time(model, w, gpu) == estimate_inference_time(model, w.with_(num_prompts=None), gpu)


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"num_prompts": 50}, "set request_rate too"),
        ({"num_prompts": 50, "request_rate": 10, "engine": "llama.cpp"}, "read only by the vllm, sglang, tgi"),
        ({"num_prompts": 50, "task": "lora", "input_len": None, "output_len": None}, "num_prompts"),
    ],
)
def test_refusals(extra: dict[str, object], words: str) -> None:
    given = {k: v for k, v in {**LONG, **extra}.items() if v is not None}
    with pytest.raises(InvalidSettingError, match=words):
        api.build_workload(None, given)


def test_the_cli_refuses_num_prompts_without_a_rate(run_cli: RunCli) -> None:
    code, _, err = run_cli(
        "estimate", "llama-3.1-8b", "--task", "inference", "--gpu", "H100", "--set", "num_prompts=50"
    )
    assert code == 2 and "\n" not in err.strip() and "num_prompts=50" in err and "request_rate" in err


def test_the_keys_engine_list_is_the_estimators_own() -> None:
    assert set(ENGINE_ONLY["num_prompts"]) == set(BURST_ENGINES)


def test_the_deepseek_bursts_short_prompts_first_tokens() -> None:
    """The llm-ie-benchmarks DeepSeek-R1 rows (50 or 200 prompts at 10/s on 8x H200) now state the run
    (num_prompts at request_rate, no batch_size: no --max-concurrency was set). Read as one batch of
    50/200 their 1000-token prompts' median first token was 4-18x the published 282-328 ms; prefilled
    on arrival it is between a quarter of it and it (the estimate prefills faster than these runs did)."""
    rows = [
        r
        for r in api.validate().rows
        if r.id.startswith(("IEB-", "VBS-")) and "first_token" in r.metric and r.workload["input_len"] == 1000
    ]
    # IEB's four (SGLang and vLLM, 50 and 200 prompts) and the vLLM harness's vLLM row; its SGLang row
    # is skipped (data-parallel attention, stacks.csv skip_reason)
    assert len(rows) == 5 and all(r.workload["num_prompts"] in (50, 200) for r in rows)
    assert all(r.workload.get("request_rate") == 10 and "batch_size" not in r.workload for r in rows)
    ieb = [r for r in rows if r.id.startswith("IEB-")]
    assert len(ieb) == 4 and all(0.25 < r.predicted / r.published < 1.0 for r in ieb), [
        (r.id, r.predicted) for r in ieb
    ]


def test_a_burst_the_pool_cannot_hold_runs_in_waves_from_its_arrivals() -> None:
    """SGLang, DeepSeek-R1 on 8x H200, 200 prompts of 10,000 + 500 at 10/s (IEB-019..021): the pool
    holds fewer than 200 to the end and the arrivals outrun what those serve, so the prompts queue for
    slots like the 200 sent at once (planner/serving.queued_job), the median one's wait counted from
    its arrival (99 / 10 s after the first) and the run lasting at least the arrival window."""
    from gpuplan.estimators.memory import estimate_memory
    from gpuplan.planner.serving import admitted_at_once, engine_cap, queued_job, queued_serving, running_batch

    model, gpu = load_model("deepseek-r1"), api.catalog().get("H200 SXM 141GB")
    spec = {
        "model": "deepseek-r1", "task": "inference", "precision": "fp8", "kv_dtype": "bf16", "num_gpus": 8,
        "tp": 8, "input_len": 10000, "output_len": 500, "engine": "sglang", "gpu": "H200 SXM 141GB",
    }  # fmt: skip
    burst = api.build_workload(None, {**spec, "request_rate": 10, "num_prompts": 200})
    sent = api.build_workload(None, {**spec, "batch_size": 200})
    mem = estimate_memory(model, sent, gpu)
    held, _ = running_batch(sent, mem)
    admitted = admitted_at_once(sent, mem.serving, engine_cap(sent, gpu)) if mem.serving else 0
    assert 1 <= held <= admitted <= 99  # the median prompt (index 99) waits for a slot
    at_once = queued_job(model, sent, gpu, held, admitted)
    job = queued_serving(model, burst, gpu, estimate_memory(model, burst, gpu))
    assert job is not None and (job.held, job.waves, job.median_itl_s) == (held, at_once.waves, at_once.median_itl_s)
    arrival = estimate_inference_time(model, burst, gpu, max_batch=admitted).ttft_s
    assert job.median_ttft_s == pytest.approx(max(at_once.median_ttft_s - 99 / 10, arrival), rel=1e-12)
    assert job.batch_s == pytest.approx(max(at_once.batch_s, 199 / 10 + at_once.running.request_latency_s))
    assert job.output_tokens_per_s == pytest.approx(200 * 500 / job.batch_s, rel=1e-12)


def test_the_cli_labels_the_median_prompts_first_token(run_cli: RunCli) -> None:
    """`gpuplan estimate` shows a finite run's first token as its median prompt's (the queue's), not
    one request's prefill, and prices the run's num_prompts x output_len tokens."""
    base = ("estimate", "llama-3.1-8b", "--task", "inference", "--gpu", "H100", "--input-len", "8000")
    run = ("--output-len", "200", "--set", "engine=sglang", "--set", "request_rate=10", "--set", "num_prompts=40")
    code, out, err = run_cli(*base, *run)
    assert code == 0, err
    assert "time to first token (the median of 40 prompts sent at 10/s)" in out and "prefill of the batch" not in out
    code, out, _ = run_cli(*base, *run, "--json")
    t = json.loads(out)["time"]
    model, gpu = load_model("llama-3.1-8b"), api.catalog().get("H100")
    w = api.build_workload(None, {**LONG, "engine": "sglang", "request_rate": 10, "num_prompts": 40})
    assert t["ttft_s"] == pytest.approx(estimate_inference_time(model, w, gpu, max_batch=t["max_batch"]).ttft_s)
    assert t["job_s"] == pytest.approx(40 * 200 / t["output_tokens_per_s"], rel=1e-9)
