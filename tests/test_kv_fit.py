"""A preallocating engine's KV budget is part of the fit (estimators/memory/base.py MemoryEstimate.fits):
vLLM sizes its KV cache from gpu_memory_utilization of the card less the weights and its profile
run, and refuses to start when that cannot hold one sequence of max_model_len tokens (`gpuplan
launch` sets it to input_len + output_len). A budget that holds fewer sequences than the batch is
not a miss: vLLM runs that many at once and queues the rest."""

from __future__ import annotations

from typing import Any

import pytest

import gpuplan
from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.results import Estimate, InferenceSpeed

CHAT = "examples/chat-7b.yaml"  # mistral-7b bf16, batch 8, 512 in / 256 out, vLLM at 0.9
# The cards below (T4, L4, A10) ship with ECC on, showing 1/16 less memory; these cases are about
# the KV budget on the whole card, so they switch ECC off (all 16 or 24 GiB) unless a test says so.
ECC_OFF: dict[str, Any] = {"ecc": False}
KV_LIMIT = "vLLM's KV cache at gpu_memory_utilization 0.9"


def _est(**keys: Any) -> Estimate:
    r = gpuplan.estimate(CHAT, **{**ECC_OFF, **keys})
    assert isinstance(r, Estimate)
    return r


def _speed(r: Estimate) -> InferenceSpeed:
    assert isinstance(r.time, InferenceSpeed)
    return r.time


def test_t4_fits_its_bytes_but_vllm_has_no_kv_cache_so_it_does_not_fit() -> None:
    r = _est(gpu="T4")
    v, m = r.verdict, r.memory
    assert m.serving is not None and m.serving.engine == "vLLM"
    # vLLM's start-up view: weights, profile run and CUDA context (no pool: the budget is below zero) are
    # within the 15.76 GiB the T4 gives, so the bytes alone would say "fits"; one sequence's KV does not
    cap0 = m.capacity_bytes
    assert (
        cap0 is not None and m.headroom_bytes is not None and m.headroom_bytes / 2**30 == pytest.approx(0.79, abs=0.01)
    )
    # headroom = the (1 - 0.9) vLLM leaves + the (negative) budget = 0.1 x cap + one sequence - its shortfall
    by_hand = 0.1 * cap0 + m.serving.sequence_kv_bytes - m.serving.kv_short_bytes
    assert m.headroom_bytes == pytest.approx(by_hand, rel=1e-9) and m.breakdown.get("KV cache (pool)", 0.0) == 0.0
    assert v.fits is False and m.fits is False and v.limit == KV_LIMIT and v.headroom_bytes is None
    # short_by = one sequence's KV (768 tokens x 128 KiB, whole 16-token blocks) less the budget,
    # which is negative here (0.79 GiB below zero): 0.88 GiB
    assert m.serving.sequence_kv_bytes == 48 * 16 * 131072
    assert v.short_by_bytes == m.serving.kv_short_bytes and v.short_by_bytes is not None
    assert v.short_by_bytes / 2**30 == pytest.approx(0.877, abs=0.002)
    # and it is what the budget lacks: raising gpu_memory_utilization by d adds d x the usable memory
    cap = m.capacity_bytes
    assert cap is not None
    v92 = _est(gpu="T4", gpu_memory_utilization=0.92).verdict
    assert v92.short_by_bytes == pytest.approx(v.short_by_bytes - 0.02 * cap, rel=1e-9)
    enough = 0.9 + v.short_by_bytes / cap
    assert _est(gpu="T4", gpu_memory_utilization=enough + 1e-4).verdict.fits is True
    assert _est(gpu="T4", gpu_memory_utilization=enough - 1e-4).verdict.fits is False
    # no time, cost or energy for a job that would not start
    assert r.time is None and r.cost is None and r.notes and "cannot hold one sequence" in r.notes[0]


def test_t4_fixes_each_give_a_kv_budget_of_at_least_one_sequence() -> None:
    r = _est(gpu="T4")
    fixes = r.verdict.fixes
    changes = [f.changes for f in fixes]
    assert {"weight_dtype": "int8"} in changes and {"num_gpus": 2, "tp": 2} in changes
    # 0.95 is not enough on a T4 (0.09 GiB short still): it is not offered
    assert all("gpu_memory_utilization" not in c for c in changes)
    assert _est(gpu="T4", gpu_memory_utilization=0.95).verdict.fits is False
    for f in fixes:
        fixed = _est(**{"gpu": "T4", **f.changes})
        s = fixed.memory.serving
        assert fixed.verdict.fits is True and s is not None, f.changes
        assert s.kv_budget_bytes >= s.sequence_kv_bytes and s.max_sequences >= 1 and s.kv_short_bytes == 0
        assert fixed.memory.per_gpu_bytes == pytest.approx(f.per_gpu_bytes, rel=0.01)
        assert (fixed.gpu, fixed.num_gpus) == (f.gpu, f.num_gpus)


def test_gpu_memory_utilization_is_the_fix_where_it_suffices() -> None:
    """The 70B fp8 example on one H100: at vLLM's default 0.9 the budget is 3.13 GiB short of one
    2,560-token sequence; 0.95 holds 3 sequences (the example sets it)."""
    r = gpuplan.estimate("examples/serve-70b.yaml", gpu_memory_utilization=0.9)
    v = r.verdict
    assert v.fits is False and v.limit == KV_LIMIT and v.short_by_bytes is not None
    assert v.short_by_bytes / 2**30 == pytest.approx(3.13, abs=0.01)
    first = v.fixes[0]
    assert first.changes == {"gpu_memory_utilization": 0.95}  # the least change: same job, same card
    fixed = gpuplan.estimate("examples/serve-70b.yaml", **first.changes)
    assert fixed.verdict.fits is True and fixed.memory.serving is not None
    assert fixed.memory.serving.max_sequences == 3


def test_fits_with_room_where_the_kv_budget_holds_the_batch() -> None:
    r = _est(gpu="L4")
    v, s = r.verdict, r.memory.serving
    assert v.fits is True and v.limit == "memory at start-up" and v.short_by_bytes is None and v.fixes == []
    # the pool fills gpu_memory_utilization 0.9 of the card: 10% of its 23.64 GiB usable stays free
    assert v.headroom_bytes is not None and v.headroom_bytes / 2**30 == pytest.approx(2.36, abs=0.01)
    assert r.memory.capacity_bytes is not None
    assert v.headroom_bytes == pytest.approx(0.1 * r.memory.capacity_bytes, rel=1e-9)
    assert s is not None and s.kv_short_bytes == 0 and s.max_sequences == 67 >= 8
    assert v.notes == [] and _speed(r).batch == 8


def test_fewer_sequences_than_the_batch_is_a_note_not_a_miss() -> None:
    """72 sequences on an A10: the peak fits (0.35 GiB spare), vLLM's cache holds 67 of them at once.
    It runs, 67 at once and the other 5 after (planner/serving.queued_job: 2 waves), with a note
    that leads the verdict in estimate and the plan row."""
    r = _est(gpu="A10", batch_size=72)
    v = r.verdict
    assert v.fits is True and v.short_by_bytes is None
    assert r.memory.serving is not None and r.memory.serving.max_sequences == 67
    assert v.notes[0].startswith("67 of the 72 requests run at once and the other 5 wait")
    t = _speed(r)
    assert t.batch == 67 and r.cost is not None and t.queue is not None and t.queue.waves == 2
    at67 = _est(gpu="A10", batch_size=67)
    rate67 = _speed(at67).output_tokens_per_s
    assert at67.verdict.notes == [] and _speed(at67).queue is None
    # the second wave of 5 runs alone, slower per token than 67 at once: the whole job's rate is lower
    assert t.output_tokens_per_s < 0.95 * rate67
    assert t.queue.wave_output_tokens_per_s == pytest.approx(rate67, rel=1e-9)
    # the job's 72 x 256 output tokens over the whole batch's time
    assert t.job_s == pytest.approx(72 * 256 / t.output_tokens_per_s, rel=1e-12)
    assert t.job_s == pytest.approx(t.queue.batch_s, rel=1e-9)
    p = gpuplan.plan(CHAT, gpus=["A10"], batch_size=72, top=None, **ECC_OFF)
    assert isinstance(p, gpuplan.Plan)
    one = next(o for o in p.options if o.num_gpus == 1)
    assert one.fits and one.verdict.fits and one.why.startswith("67 of the 72 requests run at once")
    assert one.throughput == t.output_tokens_per_s  # ranked by the same whole-batch rate


def test_estimate_fit_plan_and_launch_agree_on_the_t4(run_cli: RunCli) -> None:
    e = _est(gpu="T4").verdict
    f = gpuplan.fit(CHAT, gpu="T4", **ECC_OFF)
    assert isinstance(f, gpuplan.FitResult)
    assert (f.verdict.fits, f.verdict.limit, f.verdict.short_by_bytes) == (False, e.limit, e.short_by_bytes)
    table = gpuplan.fit(CHAT, **ECC_OFF)
    assert isinstance(table, gpuplan.FitTable)
    row = next(x for x in table.gpus if x.gpu == "T4")
    assert row.fits is False and row.min_gpus == 2
    p = gpuplan.plan(CHAT, gpus=["T4"], top=None, **ECC_OFF)
    assert isinstance(p, gpuplan.Plan)
    one = next(o for o in p.options if o.num_gpus == 1)
    assert (
        not one.fits and one.verdict.limit == e.limit and one.verdict.short_by_bytes == pytest.approx(e.short_by_bytes)
    )
    assert "0.88 GiB short of one sequence" in one.why
    with pytest.raises(InvalidSettingError, match=r"0\.88 GiB short of one sequence"):
        gpuplan.launch(CHAT, "vllm", gpu="T4", **ECC_OFF)
    code, out, err = run_cli("launch", CHAT, "--format", "vllm", "--set", "gpu=T4", "--set", "ecc=false")
    assert code == 2 and out == "" and "short of one sequence" in err and "Best fix" in err
    code, out, err = run_cli(
        "launch", CHAT, "--format", "vllm", "--set", "gpu=T4", "--set", "weight_dtype=int8", "--set", "ecc=false"
    )
    assert code == 0 and "--max-model-len=768" in out, err
    code, out, _ = run_cli("launch", CHAT, "--format", "vllm", "--set", "gpu=T4", "--force", "--set", "ecc=false")
    assert code == 0 and "--gpu-memory-utilization=0.9" in out


def test_the_cli_says_it_once(run_cli: RunCli) -> None:
    code, out, err = run_cli("estimate", CHAT, "--set", "gpu=T4", "--set", "ecc=false")
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith("✗ Does not fit on 1× T4") and KV_LIMIT in first
    assert "✓" not in out and "it would not start" in out and "Time, cost and energy are left out" in out


def test_the_t4_as_it_ships_lacks_the_bytes_too() -> None:
    """With ECC on, as the T4 ships, it shows 15,360 MiB: 14.77 GiB usable, below the weights, the
    profile run and the CUDA context vLLM needs before any KV cache, so the bytes alone miss (ECC off:
    0.79 GiB to spare, and only the KV cache misses)."""
    r = gpuplan.estimate(CHAT, gpu="T4")
    assert isinstance(r, Estimate)
    m = r.memory
    assert m.capacity_bytes is not None and m.capacity_bytes / 2**30 == pytest.approx(15360 / 1024 * 0.985, rel=1e-9)
    # the start-up view (weights, profile run, context) is 0.19 GiB over what the card gives
    assert m.headroom_bytes is not None and m.headroom_bytes / 2**30 == pytest.approx(-0.19, abs=0.01)
    assert r.verdict.fits is False


@pytest.mark.parametrize(
    ("engine", "shown"),
    [("vllm", "serving (vLLM"), ("sglang", "serving (SGLang"), ("tgi", "serving (TGI"), ("llama.cpp", ""),
     ("transformers", "")],
)  # fmt: skip
def test_serving_line_only_for_engines_that_size_a_kv_budget(run_cli: RunCli, engine: str, shown: str) -> None:
    """The CLI's serving line is the engine's own KV budget: vLLM, SGLang and TGI size one; llama.cpp
    and transformers do not, so no vLLM figures are printed for them."""
    extra = ["--weight-dtype", "q4_k_m"] if engine == "llama.cpp" else []
    code, out, err = run_cli(
        "estimate", "llama-3.1-8b", "--task", "inference", "--gpu", "RTX 4090", "--engine", engine, *extra
    )
    assert code == 0, err
    lines = [x for x in out.splitlines() if x.startswith("serving (")]
    assert (lines[0].startswith(shown) and len(lines) == 1) if shown else lines == []


def test_paged_engine_verdict_is_start_up_feasibility_not_the_batch() -> None:
    """QA F17: vLLM's memory is gpu_memory_utilization x the card, fixed at start-up; its 1.20 GiB pool
    (7,872 tokens) holds 3 sequences of 2,048 + 512, and 16 requests queue exactly as 8 do. The verdict
    does not flip with batch_size, the KV row is the pool, and no fix offers a smaller batch."""
    eight = gpuplan.estimate("examples/serve-70b.yaml")
    sixteen = gpuplan.estimate("examples/serve-70b.yaml", batch_size=16)
    for r in (eight, sixteen):
        m, s = r.memory, r.memory.serving
        assert r.verdict.fits is True and r.verdict.fixes == [] and s is not None and m.capacity_bytes is not None
        assert s.max_sequences == 3 and s.max_tokens == 7872
        assert m.breakdown["KV cache (pool)"] == s.kv_budget_bytes
        assert s.kv_budget_bytes / 2**30 == pytest.approx(1.20, abs=0.005)
        assert m.per_gpu_bytes == pytest.approx(0.95 * m.capacity_bytes, rel=1e-9)  # 74.86 of 78.80 GiB
        assert _speed(r).batch == 3 and r.verdict.notes[0].startswith(f"3 of the {r.workload['batch_size']} requests")
    assert eight.memory.per_gpu_bytes == sixteen.memory.per_gpu_bytes
    # both run waves of 3 (8: 3 + 3 + 2; 16: five of 3 + 1), each wave the same batch of 3
    q8, q16 = _speed(eight).queue, _speed(sixteen).queue
    assert q8 is not None and q16 is not None and (q8.waves, q16.waves) == (3, 6)
    assert q8.wave_output_tokens_per_s == q16.wave_output_tokens_per_s
    assert q16.batch_s == pytest.approx(2 * q8.batch_s, rel=0.05)  # twice the requests, twice the time
    f = gpuplan.fit("examples/serve-70b.yaml", batch_size=16)
    assert isinstance(f, gpuplan.FitResult) and f.verdict.fits and f.largest_batch == 3
    # TGI (engine None in the serving view) keeps the per-batch view: its fit still moves with the batch
    tgi = gpuplan.estimate(CHAT, engine="tgi", gpu="L4", **ECC_OFF)
    assert "KV cache" in tgi.memory.breakdown and "KV cache (pool)" not in tgi.memory.breakdown
