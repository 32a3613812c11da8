"""A batch a serving engine's KV pool does not hold at once (planner/serving.py queued_job,
admitted_at_once; planner/validation_perf.py): it runs in waves of what the pool holds to the end,
the median request's first token comes with the first prefill when the engine admits it at once,
and SGLang sizes its pool by its own --mem-fraction-static default (estimators/engines.py), with no
profile run taken out of it. Checked against the llm-ie-benchmarks DeepSeek-R1 rows of
data/validation/stacks.csv (8x H200, SGLang 0.4.5.post3 and vLLM 0.8.4, bf16 KV: neither command
sets --kv-cache-dtype, whose default "auto" is the model's dtype)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

import gpuplan
from conftest import RunCli
from gpuplan.estimators import engines, runtime
from gpuplan.estimators.memory import estimate_memory
from gpuplan.estimators.perf import estimate_inference_time
from gpuplan.interfaces import api
from gpuplan.planner.serving import (
    SGLANG_INIT_NEW_TOKEN_RATIO,
    admitted_at_once,
    engine_cap,
    queued_job,
    queued_serving,
    running_batch,
)
from gpuplan.results import InferenceSpeed, Validation
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import Workload, make_workload


def _r1(engine: str, batch: int, input_len: int, output_len: int, **more: object) -> Workload:
    return make_workload(
        {
            "model": "deepseek-r1",
            "task": "inference",
            "precision": "fp8",
            "kv_dtype": "bf16",
            "num_gpus": 8,
            "tp": 8,
            "batch_size": batch,
            "input_len": input_len,
            "output_len": output_len,
            "engine": engine,
            **more,
        }
    )


@pytest.fixture(scope="module")
def validation() -> Validation:
    return api.validate()


def test_sglang_sizes_its_pool_by_its_own_mem_fraction_static(catalog: Catalog) -> None:
    # sglang server_args.py (v0.4.x): 0.81 at tp 8, 0.85 at tp 4, 0.88 at tp 1; a set value wins
    assert engines.serving_memory_fraction(_r1("sglang", 1, 1000, 100)) == 0.81
    assert engines.serving_memory_fraction(_r1("sglang", 1, 1000, 100, tp=4, num_gpus=4)) == 0.85
    assert engines.serving_memory_fraction(_r1("sglang", 1, 1000, 100, tp=1, num_gpus=1)) == 0.88
    assert engines.serving_memory_fraction(_r1("sglang", 1, 1000, 100, gpu_memory_utilization=0.7)) == 0.7
    assert engines.serving_memory_fraction(_r1("vllm", 1, 1000, 100)) == 0.9  # vLLM's own default
    model, gpu = load_model("deepseek-r1"), catalog.get("H200 SXM 141GB")
    sgl = estimate_memory(model, _r1("sglang", 1, 1000, 100), gpu).serving
    vll = estimate_memory(model, _r1("vllm", 1, 1000, 100, gpu_memory_utilization=0.81), gpu).serving
    assert sgl is not None and vll is not None
    assert sgl.gpu_memory_utilization == 0.81
    # the same share of the card; SGLang's activations live outside it, so no profile run is taken
    # out: its pool is larger than vLLM's at 0.81 by that run's working set, tens of MiB to a few GiB
    assert 0.01 * 2**30 < sgl.kv_budget_bytes - vll.kv_budget_bytes < 8 * 2**30
    # about 36 GB of bf16 latent KV per GPU (70 KiB a token, every rank holding it whole): about
    # 500k tokens, 84 sequences of 5,000 + 1,000
    assert sgl.kv_bytes_per_token == pytest.approx(61 * 576 * 2, rel=1e-6)
    assert sgl.max_tokens == pytest.approx(507_000, rel=0.05)


def test_admitted_at_once_follows_each_engines_admission_rule(catalog: Catalog) -> None:
    model, gpu = load_model("deepseek-r1"), catalog.get("H200 SXM 141GB")
    for engine in ("sglang", "vllm"):
        w = _r1(engine, 200, 5000, 1000)
        s = estimate_memory(model, w, gpu).serving
        assert s is not None
        got = admitted_at_once(w, s, engine_cap(w, gpu))
        if engine == "sglang":  # prompt + 0.7 x the output reserved (SGLang's init_new_token_ratio)
            assert got == s.max_tokens // (5000 + SGLANG_INIT_NEW_TOKEN_RATIO * 1000)
        else:  # the prompt's 16-token blocks only
            assert got == min(200, s.max_tokens // (math.ceil(5000 / runtime.VLLM_BLOCK_TOKENS) * 16))
        assert s.max_sequences < got <= 200  # more start than the pool holds to the end


def test_a_batch_the_pool_does_not_hold_runs_in_waves(catalog: Catalog) -> None:
    model, gpu = load_model("deepseek-r1"), catalog.get("H200 SXM 141GB")
    w = _r1("sglang", 200, 5000, 1000)
    mem = estimate_memory(model, w, gpu)
    held, note = running_batch(w, mem)
    assert 60 <= held < 100 and "queues the rest" in note
    job = queued_job(model, w, gpu, held, admitted=held)
    full, rest = divmod(200, held)
    one = estimate_inference_time(model, w.with_(batch_size=held), gpu, max_batch=held)
    last = estimate_inference_time(model, w.with_(batch_size=rest), gpu, max_batch=rest)
    assert job.waves == full + 1
    # a wave holds its slots for its requests' latency less SGLang's host time (no step waits for it)
    host = engines.REQUEST_HOST_S["sglang"]
    total = full * (one.request_latency_s - host) + last.request_latency_s - host
    assert job.output_tokens_per_s == pytest.approx(200 * 1000 / total, rel=1e-9)
    # the median request (the 100th) waits for the first wave, then its own wave's prefill
    assert job.median_ttft_s == pytest.approx(one.request_latency_s - host + one.ttft_s, rel=1e-9)
    static = estimate_inference_time(model, w, gpu, max_batch=200)
    assert job.output_tokens_per_s < 0.75 * static.output_tokens_per_s  # batch 200 at once was the old figure
    # admitted with the first prefill: its first token then, not after a wave
    early = queued_job(model, w, gpu, held, admitted=150)
    first = estimate_inference_time(model, w.with_(batch_size=150), gpu)
    assert early.median_ttft_s == pytest.approx(first.ttft_s, rel=1e-9)


def test_deepseek_r1_rows_the_pool_queues(validation: Validation) -> None:
    """Measured (Michaelvll/llm-ie-benchmarks sgl/logs, SGLang 0.4.5.post3, 8x H200, 10/s arrivals):
    200 prompts of 1,000 + 2,000 tokens 3,279 tok/s (IEB-013), of 5,000 + 1,000 1,322 tok/s (IEB-016);
    200 of 30,000 + 100: median ITL 36.6 ms (IEB-024). Before: batch 200 at once, +38%, +104% and
    +157% (an ITL of 200 sequences of 30,000 tokens the pool cannot hold)."""
    rows = {r.id: r for r in validation.rows}
    assert rows["IEB-013"].published == pytest.approx(3276.3, rel=0.01)
    # 200 x (1,000 + 2,000): the decode step now comes out 3% fast (IEB-015; the experts read at the
    # fused MoE kernel's bandwidth, engines.FUSED_MOE_BW_SHARE), the throughput 24% low: the waves run
    # the last 32 alone after the first 168, where SGLang admits on prompt + 0.7 x output and has
    # ~169 decoding on average (3,276 tok/s x 51.5 ms)
    assert abs(rows["IEB-013"].error) < 0.3
    assert abs(rows["IEB-015"].error) < 0.1
    assert abs(rows["IEB-016"].error) < 0.25
    assert abs(rows["IEB-024"].error) < 0.40
    assert rows["IEB-024"].predicted < rows["IEB-024"].published  # the pool's ~17 run: faster than measured
    assert "waves" in rows["IEB-016"].dominant


def test_vllm_fills_decode_steps_with_a_waiting_prompts_chunk(catalog: Catalog, validation: Validation) -> None:
    """vLLM V1 puts a waiting prompt's max_num_batched_tokens (8,192) chunk into the decode steps once
    the queue runs; past half the steps carrying one, the median gap does. Measured (llm-ie-benchmarks,
    vLLM 0.8.4): 50 prompts of 30,000 + 100, median ITL 494.8 ms (IEB-036) and 474.3 ms in the vLLM
    team's harness (VBS-012); 200 of them 580.9 ms (IEB-048). Before: a decode step, 92-94% fast."""
    model, gpu = load_model("deepseek-r1"), catalog.get("H200 SXM 141GB")
    long = _r1("vllm", 50, 30000, 100)
    held, _ = running_batch(long, estimate_memory(model, long, gpu))
    job = queued_job(model, long, gpu, held, admitted=held)
    one = estimate_inference_time(model, long.with_(batch_size=1), gpu, max_batch=1).ttft_s
    assert math.ceil(30000 / runtime.VLLM_PROFILE_TOKENS) * held / 100 > 0.5  # most steps carry a chunk
    assert job.median_itl_s == pytest.approx(job.running.tpot_s + one * 8192 / 30000, rel=1e-9)
    assert job.median_itl_s > 5 * job.running.tpot_s
    # SGLang runs its prefill batches apart (no mixed chunk by default): the gap stays a decode step
    sgl = queued_job(model, _r1("sglang", 50, 30000, 100), gpu, held, admitted=held)
    assert sgl.median_itl_s == sgl.running.tpot_s
    # 1,000-token outputs: about a tenth of the steps carry a 5,000-token prompt, the median gap none
    short = _r1("vllm", 200, 5000, 1000)
    held, _ = running_batch(short, estimate_memory(model, short, gpu))
    job = queued_job(model, short, gpu, held, admitted=held)
    assert job.median_itl_s == job.running.tpot_s
    rows = {r.id: r for r in validation.rows}
    assert rows["IEB-036"].published == pytest.approx(494.8, rel=0.01)
    assert abs(rows["IEB-036"].error) < 0.3
    assert abs(rows["VBS-012"].error) < 0.3  # a held-out row
    assert abs(rows["IEB-048"].error) < 0.4


# --- the user's answer is validation's: `gpuplan estimate` and `plan` take the same queued job --------
QUEUED_ROWS = {  # (throughput, median TTFT, median ITL / TPOT) rows of one workload each
    "sglang": ("IEB-016", "IEB-017", "IEB-018"),  # DeepSeek-R1, 8x H200, 200 x (5,000 + 1,000)
    "vllm": ("IEB-040", "IEB-041", "IEB-042"),  # the same on vLLM 0.8.4
    "vllm-l4": ("HPV-088", None, "HPV-090"),  # Llama 2 7B fp16 on one L4, 32 x (135 + 256)
}


@pytest.mark.parametrize("case", sorted(QUEUED_ROWS))
def test_estimate_json_is_the_validated_queued_figure(
    case: str, validation: Validation, run_cli: RunCli, tmp_path: Path
) -> None:
    """A queued row's workload through `gpuplan estimate --json` gives, to the last bit, what
    validation predicts for the row (both call planner/serving.queued_serving): the whole batch's
    output tokens/s, the median request's time to first token and the median gap between tokens."""
    rows = {r.id: r for r in validation.rows}
    rate_id, ttft_id, itl_id = QUEUED_ROWS[case]
    wl = rows[rate_id].workload
    assert "waves" in rows[rate_id].dominant
    f = tmp_path / "w.yaml"
    f.write_text(json.dumps(wl))  # JSON is YAML
    code, out, err = run_cli("estimate", str(f), "--json")
    assert code == 0, err
    doc = json.loads(out)
    t, q = doc["time"], doc["time"]["queue"]
    assert t["output_tokens_per_s"] == q["output_tokens_per_s"] == rows[rate_id].predicted
    assert t["tpot_s"] * 1e3 == q["median_itl_s"] * 1e3 == rows[itl_id].predicted
    if ttft_id:
        assert t["ttft_s"] * 1e3 == q["median_ttft_s"] * 1e3 == rows[ttft_id].predicted
    n, held = q["requests"], q["held"]
    # the DeepSeek-R1 rows state their run as num_prompts sent at request_rate (no --max-concurrency)
    assert n == wl.get("num_prompts", wl.get("batch_size")) and 1 <= held < n and t["batch"] == held
    assert q["waves"] == -(-n // held) and f"{q['waves']} waves" in rows[rate_id].dominant
    # the whole batch's time: its output tokens over that rate (one replica), and the cost priced on it
    assert q["batch_s"] == pytest.approx(n * wl["output_len"] / t["output_tokens_per_s"], rel=1e-12)
    assert t["job_s"] == pytest.approx(q["batch_s"], rel=1e-12)
    assert q["wave_output_tokens_per_s"] > t["output_tokens_per_s"]  # the waits cost throughput
    # the answer first: how many run at once, and that the rest wait
    assert doc["verdict"]["notes"][0].startswith(
        f"{held} of the {n} requests run at once and the other {n - held} wait"
    )


def test_plan_ranks_a_queued_option_by_the_whole_batchs_rate(validation: Validation) -> None:
    """`gpuplan plan` prices and ranks a queued option by the same whole-batch rate (HPV-088's
    workload on the L4 it was measured on, and its median request's latency as the service time)."""
    rows = {r.id: r for r in validation.rows}
    wl = dict(rows["HPV-088"].workload)
    gpu = wl.pop("gpu")
    p = gpuplan.plan(make_workload(wl), gpus=[gpu], top=None)
    assert isinstance(p, gpuplan.Plan)
    one = next(o for o in p.options if o.gpu == gpu and o.num_gpus == 1)
    assert one.throughput == rows["HPV-088"].predicted
    assert one.tpot_s is not None and one.tpot_s * 1e3 == rows["HPV-090"].predicted
    assert re.match(r"\d+ of the 32 requests run at once", one.why)
    assert one.time_s == pytest.approx((one.ttft_s or 0.0) + (wl["output_len"] - 1) * one.tpot_s, rel=1e-12)


def test_a_batch_the_pool_holds_is_timed_as_before(catalog: Catalog) -> None:
    """8 requests on 2 H100s (the 70B example's pool then holds them all): no queue, no note, the
    figures estimate_inference_time gives for the batch itself."""
    e = api.estimate(
        make_workload(
            {
                "model": "llama-3.1-70b",
                "task": "inference",
                "gpu": "H100",
                "num_gpus": 2,
                "tp": 2,
                "batch_size": 8,
                "input_len": 2048,
                "output_len": 512,
                "precision": "bf16",
                "weight_dtype": "fp8",
            }
        )
    )
    t = e.time
    assert isinstance(t, InferenceSpeed) and t.queue is None and "queue" not in e.to_dict()["time"]
    assert not any("run at once" in n for n in e.verdict.notes)
    model, gpu = load_model("llama-3.1-70b"), catalog.get("H100")
    w = make_workload({**e.workload})
    mem = estimate_memory(model, w, gpu)
    assert mem.serving is not None and mem.serving.max_sequences >= 8
    it = estimate_inference_time(model, w, gpu, max_batch=mem.serving.max_sequences)
    assert (t.output_tokens_per_s, t.ttft_s, t.tpot_s, t.batch) == (
        it.output_tokens_per_s, it.ttft_single_s, it.tpot_s, 8,
    )  # fmt: skip


def test_request_rate_keeps_the_open_loop(catalog: Catalog) -> None:
    """With a request_rate the requests arrive over time (estimate_inference_time's open loop): no
    queued job; the batch the pool holds is timed, with its note, as before."""
    e = gpuplan.estimate("examples/serve-70b.yaml", request_rate=1.0)
    t = e.time
    assert isinstance(t, InferenceSpeed) and t.queue is None and t.batch == 3
    assert e.verdict.notes == [
        "vLLM's KV cache at gpu_memory_utilization 0.95 holds 3 of the 8 sequences at once: it runs 3 and "
        "queues the rest (time and throughput at batch 3)"
    ]
    model, gpu = load_model("llama-3.1-70b"), catalog.get("H100")
    w = make_workload(e.workload)
    assert queued_serving(model, w, gpu, estimate_memory(model, w, gpu)) is None


def test_a_tokens_job_keeps_the_pool_full() -> None:
    """A `tokens` job is a stream of requests the engine's own queue refills a slot from at the next
    step: the 3 the pool holds keep running, so it is timed at batch 3 (a full wave's rate, no tail
    wave), with the note, as before."""
    batch = gpuplan.estimate("examples/serve-70b.yaml")
    job = gpuplan.estimate("examples/serve-70b.yaml", tokens=1_000_000)
    t, b = job.time, batch.time
    assert isinstance(t, InferenceSpeed) and isinstance(b, InferenceSpeed) and b.queue is not None
    assert t.queue is None and t.batch == 3
    # a refilled batch of 3 (a slot refilled at the next step) against a static wave of 3: within 1%
    assert t.output_tokens_per_s == pytest.approx(b.queue.wave_output_tokens_per_s, rel=0.01)
    assert t.output_tokens_per_s > b.output_tokens_per_s * 1.05  # no tail wave of 2 to wait for
    assert t.job_s == pytest.approx(1e6 / t.output_tokens_per_s, rel=1e-12)
    assert any(n.endswith("(time and throughput at batch 3)") for n in job.verdict.notes)


def test_the_table_says_how_many_run_at_once(run_cli: RunCli) -> None:
    """The 70B example (8 requests, a pool of 3 on one H100): the verdict leads with the 3 of 8 and the
    time table's first row says so, then the whole batch's time and rate."""
    code, out, err = run_cli("estimate", "examples/serve-70b.yaml")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].strip().startswith("! 3 of the 8 requests run at once and the other 5 wait")
    rows = [re.sub(r"\s+", " ", x).strip("│┃ ") for x in lines if "│" in x]
    at_once = next(i for i, x in enumerate(rows) if x.startswith("requests at once"))
    assert rows[at_once].endswith("3 of 8; the other 5 wait")
    assert rows[at_once + 1].startswith("whole batch (3 waves)")
    assert rows[at_once + 2].startswith("output tokens/s over the whole batch")
    assert any(x.startswith("time to first token (median request)") for x in rows)
