"""A preallocating engine's KV budget is part of the fit (estimators/memory/base.py MemoryEstimate.fits):
vLLM sizes its KV cache from gpu_memory_utilization of the card less the weights and its profile
run, and refuses to start when that cannot hold one sequence of max_model_len tokens (`gpuplan
launch` sets it to input_len + output_len). A budget that holds fewer sequences than the batch is
not a miss: vLLM runs that many at once and queues the rest."""

from __future__ import annotations

import json
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


# `gpuplan fit` without a GPU, on an engine that preallocates: the memory estimate's per_gpu_bytes is
# gpu_memory_utilization x the card (vLLM takes it at start-up), so the table says what the job needs
LLAMA8 = "llama-3.1-8b"
GIB = 2**30
LLAMA8_BF16_WEIGHTS = 16_060_522_496  # 8.03B parameters x 2 bytes
LLAMA8_KV_PER_TOKEN = 32 * 8 * 128 * 2 * 2  # layers x KV heads x head dim x (K, V) x bf16: 128 KiB


def _table(**keys: Any) -> dict[str, gpuplan.FitRow]:
    t = gpuplan.fit(LLAMA8, task="inference", **keys)
    assert isinstance(t, gpuplan.FitTable)
    return {r.gpu: r for r in t.gpus}


def test_fit_table_says_what_a_vllm_job_needs_not_what_vllm_reserves() -> None:
    rows = _table()
    a4500, l4, a10, h100 = rows["RTX A4500"], rows["L4"], rows["A10"], rows["H100 SXM5 80GB"]
    for r in (a4500, l4, a10, h100):
        s = r.serving
        assert s is not None and s.engine == "vLLM" and s.batch_size == 1 and r.fits
        assert r.capacity_bytes is not None
        # what vLLM takes at start-up: gpu_memory_utilization 0.9 of the usable memory
        assert s.reserved_bytes == pytest.approx(0.9 * r.capacity_bytes, rel=1e-12)
        # the need's terms: the weights, one sequence of 128 + 128 tokens of KV, the profile run, the CUDA context
        assert r.breakdown["weights (bf16)"] == LLAMA8_BF16_WEIGHTS
        assert r.breakdown["KV cache"] == 256 * LLAMA8_KV_PER_TOKEN
        assert r.breakdown["CUDA context"] == 400 * 2**20
        assert sum(r.breakdown.values()) == pytest.approx(r.per_gpu_bytes, rel=1e-12)
        assert r.headroom_bytes == pytest.approx(r.capacity_bytes - r.per_gpu_bytes, rel=1e-12)
        assert s.start_bytes == pytest.approx(r.per_gpu_bytes, rel=1e-12)  # a batch of one: the start is the batch
    # the old figure was vLLM's share: 17.73 GiB on the 20 GiB A4500, 19.94 on the 24 GiB L4
    assert a4500.serving is not None and a4500.serving.reserved_bytes / GIB == pytest.approx(17.73, abs=0.005)
    assert l4.serving is not None and l4.serving.reserved_bytes / GIB == pytest.approx(19.94, abs=0.005)
    # the need does not grow with the card: 17.20 GiB on every card whose vLLM schedules 256 sequences a step
    assert a4500.per_gpu_bytes / GIB == pytest.approx(17.20, abs=0.005)
    assert a4500.per_gpu_bytes == l4.per_gpu_bytes == a10.per_gpu_bytes == rows["A100 SXM4 80GB"].per_gpu_bytes
    # on an H100 (>= 70 GiB, not an A100) vLLM's profile run samples 1,024 sequences, not 256: that alone differs
    sampler = (1024 - 256) * 128_256 * 32.0  # sequences x vocabulary x VLLM_SAMPLER_BYTES_PER_LOGIT
    assert h100.per_gpu_bytes - l4.per_gpu_bytes == pytest.approx(sampler, rel=1e-9)
    assert h100.per_gpu_bytes == rows["B200"].per_gpu_bytes
    # how many sequences the pool holds: the memory estimate's ServingCapacity.max_sequences
    for name, held in (("RTX A4500", 17), ("L4", 88)):
        e = gpuplan.estimate(LLAMA8, task="inference", gpu=name)
        assert isinstance(e, Estimate) and e.memory.serving is not None
        s = rows[name].serving
        assert s is not None and s.max_sequences == e.memory.serving.max_sequences == held
        # the estimate's per_gpu_bytes is what vLLM reserves, the fit row's what the job needs
        assert e.memory.per_gpu_bytes == pytest.approx(s.reserved_bytes, rel=1e-9)


def test_fit_table_counts_the_batch_a_vllm_pool_holds_and_the_rest_wait(run_cli: RunCli) -> None:
    """64 requests of 2,048 + 512 tokens: the job needs their whole KV cache (64 x 2,560 tokens x 128
    KiB = 20 GiB) beside the weights; an L4's pool holds 8 of them, which run at once while 56 wait."""
    rows = _table(batch_size=64, input_len=2048, output_len=512)
    one = _table(input_len=2048, output_len=512)
    l4 = rows["L4"]
    assert l4.serving is not None and l4.fits
    batch_kv = 64 * 2560 * LLAMA8_KV_PER_TOKEN
    assert l4.breakdown["KV cache"] == batch_kv
    assert l4.per_gpu_bytes - l4.serving.start_bytes == pytest.approx(batch_kv - 2560 * LLAMA8_KV_PER_TOKEN, rel=1e-12)
    assert l4.serving.start_bytes == pytest.approx(one["L4"].per_gpu_bytes, rel=1e-12)
    assert (l4.serving.max_sequences, l4.serving.runs_at_once) == (8, 8)
    for r in rows.values():
        s = r.serving
        assert s is not None
        # the fit is the start-up check's; the whole batch runs at once exactly when its KV fits the pool
        assert r.fits == (s.start_bytes <= s.reserved_bytes)
        if r.fits:
            assert (s.runs_at_once == 64) == (r.per_gpu_bytes <= s.reserved_bytes)
            assert s.runs_at_once == min(s.max_sequences, 64)
    code, out, err = run_cli(
        "fit",
        LLAMA8,
        "--task",
        "inference",
        "--set",
        "batch_size=64",
        "--set",
        "input_len=2048",
        "--set",
        "output_len=512",
    )
    assert code == 0, err
    first = " ".join(out.split("; 49 of")[0].split())
    assert first == (
        "✓ Fits on 1× RTX A4500 (needs 37.17 GiB per GPU for its batch of 64, 17.48 GiB to start with one; vLLM "
        "reserves 17.73 GiB at gpu_memory_utilization 0.9), the smallest that holds it; it runs 1 of the 64 "
        "sequences at once and the rest wait (all 64 at once from 1× L40)"
    )
    row = next(line for line in out.splitlines() if line.startswith("│ L4 "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[2].startswith("37.17 GiB") and cells[3:7] == ["17.48 GiB", "19.94 GiB", "yes", "8 of 64 (56 wait)"]


def test_fit_table_cli_and_json_of_a_vllm_job(run_cli: RunCli) -> None:
    code, out, err = run_cli("fit", LLAMA8, "--task", "inference")
    assert code == 0, err
    assert out.startswith(
        "✓ Fits on 1× RTX A4500 (needs 17.20 GiB per GPU for its batch of 1; vLLM reserves 17.73 GiB at "
        "gpu_memory_utilization 0.9), the smallest that holds it; 49 of"
    )
    assert "to start" not in out  # a batch of one starts with what it needs
    row = next(line for line in out.splitlines() if line.startswith("│ L4 "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[2].startswith("17.20 GiB") and cells[3:6] == ["19.94 GiB", "yes", "all 1 (holds 88)"]
    t4 = next(line for line in out.splitlines() if line.startswith("│ T4 "))
    assert "2 (TP 2, 9.41 GiB each)" in t4  # what two need each, not vLLM's share of them
    code, out, err = run_cli("fit", LLAMA8, "--task", "inference", "--json")
    assert code == 0, err
    rows = {r["gpu"]: r for r in json.loads(out)["gpus"]}
    assert rows["L4"]["serving"] == {
        "engine": "vLLM",
        "gpu_memory_utilization": 0.9,
        "reserved_bytes": pytest.approx(0.9 * rows["L4"]["capacity_bytes"], rel=1e-12),
        "start_bytes": rows["L4"]["per_gpu_bytes"],
        "max_sequences": 88,
        "batch_size": 1,
        "runs_at_once": 1,
    }
    assert rows["T4"]["fits"] is False and rows["T4"]["serving"]["runs_at_once"] == 0


@pytest.mark.parametrize("keys", [{"engine": "transformers"}, {"engine": "llama.cpp"}, {"engine": "tgi"}])
def test_fit_table_of_an_engine_that_does_not_preallocate_is_its_estimate(keys: dict[str, Any]) -> None:
    rows = _table(**keys)
    e = gpuplan.estimate(LLAMA8, task="inference", gpu="L4", **keys)
    assert isinstance(e, Estimate)
    assert rows["L4"].serving is None and "serving" not in rows["L4"].to_dict()
    assert rows["L4"].per_gpu_bytes == e.memory.per_gpu_bytes and rows["L4"].headroom_bytes == e.memory.headroom_bytes
