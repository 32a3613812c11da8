"""QA findings on the answer-first verdict: pretraining fixes stay full-weight and lead on the job's
own GPUs; serving fixes keep tensor parallelism inside one host of a one-host card and always offer
quantised weights and other hardware; a bf16 job on a card without BF16 says it runs as fp16;
`estimate` on a graphics job points to fit/plan; `plan --have` leads with the verdict on the GPUs
owned when none holds the job; `plan` pins the workload's own GPU after the top N. QA pass 2: owned
serving options price tokens at electricity; the workload's GPU is "your pick" unless owned; more-GPU
and other-GPU fixes checkpoint before adding GPUs."""

from __future__ import annotations

import json
from typing import Any

import pytest

import gpuplan
from conftest import RunCli
from gpuplan.results import Plan

GIB = 2**30


def test_pretraining_fixes_lead_with_zero3_on_the_same_gpus_and_never_adapters() -> None:
    r = gpuplan.estimate("llama-3.1-8b", task="pretrain", gpu="3090", num_gpus=4)
    fixes = r.verdict.fixes
    assert r.verdict.fits is False and r.verdict.short_by_bytes == pytest.approx(150.10 * GIB, rel=0.005)
    assert not any("task" in f.changes for f in fixes)  # no LoRA/QLoRA for pretraining
    first = fixes[0]
    assert first.changes == {"zero": 3, "activation_checkpointing": "full", "offload": "optimizer"}
    assert (first.gpu, first.num_gpus) == ("GeForce RTX 3090", 4)
    assert first.per_gpu_bytes == pytest.approx(9.74 * GIB, rel=0.01)
    # the fix, applied as stated, fits on the same 4 cards
    fixed = gpuplan.estimate("llama-3.1-8b", task="pretrain", gpu="3090", num_gpus=4, **first.changes)
    assert fixed.verdict.fits is True and fixed.memory.per_gpu_bytes == pytest.approx(first.per_gpu_bytes, rel=0.01)
    # every same-GPU fix ranks before any fix on other hardware
    other = [i for i, f in enumerate(fixes) if "gpu" in f.changes]
    same = [i for i, f in enumerate(fixes) if "gpu" not in f.changes and "num_gpus" not in f.changes]
    assert other and same and max(same) < min(other)


def test_fine_tune_keeps_adapters_but_after_the_same_gpu_full_fine_tune_fixes() -> None:
    fixes = gpuplan.estimate("llama-3.1-8b", task="finetune", gpu="3090", num_gpus=4).verdict.fixes
    labels = [f.label for f in fixes]
    zero3 = labels.index(
        "ZeRO-3 / FSDP over the 4 GPUs + full activation checkpointing + CPU offload of optimizer states"
    )
    qlora = labels.index("QLoRA (NF4 base)")
    assert zero3 == 0 and qlora > zero3


def test_one_host_cards_keep_tensor_parallelism_in_one_node_and_fixes_offer_quantised_and_other_gpus() -> None:
    r = gpuplan.estimate("llama-3.1-405b", gpu="4090")
    fixes = r.verdict.fixes
    mine = [f for f in fixes if f.gpu == "GeForce RTX 4090"]
    assert mine and all(f.changes.get("tp", 1) <= 8 for f in mine)  # 4090: multi_node false
    plain = next(f for f in mine if "weight_dtype" not in f.changes)
    assert plain.changes == {"num_gpus": 64, "tp": 8, "pp": 8}
    awq = next(f for f in fixes if f.changes.get("weight_dtype") == "awq")
    assert awq.changes == {"weight_dtype": "awq", "num_gpus": 16, "tp": 8, "pp": 2}
    assert awq.usd_per_hour == pytest.approx(16 * 0.69, abs=0.01)
    other = [f for f in fixes if "gpu" in f.changes]
    assert len(other) == 1 and other[0].gpu != "GeForce RTX 4090"
    assert other[0].changes == {"gpu": "A40", "num_gpus": 32, "tp": 8, "pp": 4}
    # a scale-out card may still spread tensor parallelism over its NVLink domain and beyond
    from gpuplan.planner.fit import tp_limit
    from gpuplan.specs.gpu import bundled_catalog

    cat = bundled_catalog()
    assert tp_limit(cat.get("4090")) == 8 and tp_limit(cat.get("H100")) is None


def test_a_bf16_job_on_a_card_without_bf16_says_it_runs_as_fp16(run_cli: RunCli) -> None:
    note = "T4 runs as fp16 (no BF16 tensor cores): set precision: fp16"
    assert note in gpuplan.estimate("llama-3.2-1b", gpu="T4").verdict.notes
    assert gpuplan.estimate("llama-3.2-1b", gpu="T4", precision="fp16").verdict.notes == []
    assert gpuplan.estimate("llama-3.2-1b", gpu="L4").verdict.notes == []  # Ada has BF16
    v100 = gpuplan.estimate("llama-3.2-1b", task="lora", gpu="V100").verdict.notes
    assert v100 == ["V100 SXM2 32GB runs as fp16 (no BF16 tensor cores): set precision: fp16"]
    code, out, _ = run_cli("estimate", "llama-3.2-1b", "--gpu", "T4")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("✓ Fits on 1× T4") and lines[1] == f"  ! {note}"


def test_estimate_on_a_graphics_job_points_to_fit_and_plan(run_cli: RunCli) -> None:
    code, out, err = run_cli("estimate", "examples/stream-4k.yaml")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "`gpuplan fit`" in err and "`gpuplan plan`" in err and "task: streaming" in err
    code, out, err = run_cli("fit", "examples/stream-4k.yaml", "--json")
    assert code == 0 and json.loads(out)["options"], err


def test_a_job_that_does_not_fit_says_why_time_is_left_out_without_json_advice(run_cli: RunCli) -> None:
    code, out, _ = run_cli("estimate", "llama-3.1-8b", "--task", "finetune", "--gpu", "4090")
    assert code == 0
    assert (
        out.rstrip().splitlines()[-1]
        == "Time, cost and energy are left out: the job would not run (apply a fix above)."
    )
    assert "--json" not in out


def test_plan_have_leads_with_the_verdict_on_the_owned_gpus(run_cli: RunCli) -> None:
    argv = ["plan", "llama-3.1-70b", "--task", "lora", "--have", "1x RTX 3060", "--top", "2"]
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["options"] == [] or not any(o["fits"] for o in rec["options"])
    [v] = rec["owned_verdicts"]
    assert (v["gpu"], v["num_gpus"], v["fits"]) == ("GeForce RTX 3060", 1, False)
    assert v["short_by_bytes"] == pytest.approx(181.31 * GIB, rel=0.005)
    assert v["limit"] == "memory at forward/backward" and v["fixes"]
    assert len(rec["rent_options"]) == 2
    code, out, err = run_cli(*argv)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].startswith("✗ Does not fit on 1× GeForce RTX 3060: 181.31 GiB short per GPU")
    assert out.index("What makes it fit") < out.index("What renting would add")
    assert "Does not fit on the GPUs you have: 1× GeForce RTX 3060" in out and "up to 8" not in out


def test_plan_have_with_a_fitting_gpu_keeps_its_table_and_no_verdicts() -> None:
    rec = gpuplan.plan("llama-3.2-1b", task="lora", have="2x RTX 3090")
    assert isinstance(rec, Plan)
    assert rec.owned_verdicts is None and rec.options and all(o.gpu == "GeForce RTX 3090" for o in rec.options)


def test_plan_pins_the_workloads_gpu_after_the_top_n(run_cli: RunCli) -> None:
    code, out, err = run_cli("plan", "examples/lora-4090.yaml", "--json")
    assert code == 0, err
    opts = json.loads(out)["options"]
    top, pinned = opts[:10], opts[10:]
    assert not any(o.get("pinned") for o in top) and all("GeForce RTX 4090" not in o["gpu"] for o in top)
    assert pinned and all(o["pinned"] is True and o["gpu"] == "GeForce RTX 4090" for o in pinned)
    assert sorted(o["num_gpus"] for o in pinned) == [1, 2, 4, 8]
    ranks = [o["rank"] for o in pinned]
    assert all(r > 10 for r in ranks) and ranks == sorted(ranks)
    code, out, _ = run_cli("plan", "examples/lora-4090.yaml", "--top", "3")
    assert code == 0 and out.count("(your pick), pinned") == 4 and "(yours)" not in out
    assert "Pinned: GeForce RTX 4090's rows (the workload's gpu), ranked below the top 3" in out


def test_owned_serving_prices_its_tokens_at_the_electricity_of_its_cost_column() -> None:
    # QA2 #3: the owned 3090's $/Mtok came from the $0.43/h rental price ($0.227); it is the same
    # electricity-only $/h as the cost column: $/h x GPUs / (tokens/s x 3600) x 1e6
    rec = gpuplan.plan("examples/tgi-8b.yaml", have="1x RTX 3090")
    assert isinstance(rec, Plan) and rec.options
    o = rec.options[0]
    assert o.gpu == "GeForce RTX 3090" and o.serving is not None and o.cost_usd is not None
    assert o.serving.usd_per_million_tokens is not None and o.serving.tokens_per_s is not None
    by_hand = o.cost_usd * o.num_gpus / (o.serving.tokens_per_s * 3600) * 1e6  # a service's cost is $/h
    assert o.serving.usd_per_million_tokens == pytest.approx(by_hand, rel=1e-9)
    assert o.serving.usd_per_million_tokens == pytest.approx(0.00993, rel=0.02)  # $0.0188/h at 525 tokens/s
    # rented cards keep their rental $/Mtok (A40 at $0.44/h: about $0.22)
    assert rec.rent_options and rec.rent_options[0].serving is not None
    assert rec.rent_options[0].serving.usd_per_million_tokens == pytest.approx(0.22, rel=0.02)


def test_the_workloads_gpu_is_your_pick_and_yours_only_when_owned(run_cli: RunCli) -> None:
    code, out, err = run_cli("plan", "examples/tgi-8b.yaml", "--top", "3")
    assert code == 0, err
    assert "A10G (your pick)" in out and "(yours)" not in out  # named by `gpu:`, not owned
    code, out, err = run_cli("plan", "examples/tgi-8b.yaml", "--have", "1x A10G")
    assert code == 0 and "A10G (yours)" in out and "(your pick)" not in out, err


def _refit(model: str, base: dict[str, Any], changes: dict[str, Any]) -> float:
    """Per-GPU GiB of the job re-estimated with exactly the fix's changes (asserting it fits)."""
    r = gpuplan.estimate(model, **{**base, **changes})
    assert r.verdict.fits is True, changes
    return r.memory.per_gpu_bytes / GIB


def test_more_gpu_and_other_gpu_fixes_checkpoint_before_adding_gpus() -> None:
    # QA2 #9: a 70B full fine-tune on one B200 fits 8 x B200 ZeRO-3 with full checkpointing (32 without)
    job: dict[str, Any] = {"task": "finetune", "batch_size": 1, "seq_len": 4096}
    fixes = gpuplan.estimate("llama-3.1-70b", gpu="B200", **job).verdict.fixes
    more = next(f for f in fixes if "num_gpus" in f.changes and "gpu" not in f.changes)
    assert more.changes == {"activation_checkpointing": "full", "num_gpus": 8, "zero": 3}  # no fused loss: not needed
    assert more.per_gpu_bytes / GIB == pytest.approx(154.5, rel=0.01)
    assert _refit("llama-3.1-70b", {**job, "gpu": "B200"}, more.changes) == pytest.approx(154.5, rel=0.01)
    # `plan --have "1x RTX 3090"`: the owned verdict's fixes, each re-estimated with exactly its changes
    rec = gpuplan.plan({"model": "llama-3.1-70b", **job, "have": "1x RTX 3090"})
    assert isinstance(rec, Plan) and rec.owned_verdicts
    got = {f.label: f for f in rec.owned_verdicts[0].fixes}
    same = got[
        "128 x GeForce RTX 3090 (zero 3) with full activation checkpointing and fused linear cross-entropy (Liger)"
    ]
    other = got["32 x RTX A6000 (zero 3) with full activation checkpointing and fused linear cross-entropy (Liger)"]
    assert other.usd_per_hour == pytest.approx(15.68, abs=0.01)  # was 32 x B200 at $360.86/h
    for f, gib in ((same, 20.38), (other, 46.25)):
        assert f.per_gpu_bytes / GIB == pytest.approx(gib, rel=0.01)
        assert _refit("llama-3.1-70b", {**job, "gpu": "RTX 3090", "num_gpus": 1}, f.changes) == pytest.approx(
            gib, rel=0.01
        )


def test_an_other_gpu_fix_still_shows_when_its_checkpointed_form_only_adds_to_a_same_gpu_fix() -> None:
    # 512 x H100 for a 70B pretrain: ZeRO-3 + checkpointing fits on them, so a cheaper card with the
    # same two changes and a new GPU is a larger change; the other-GPU fix is the cheapest unchanged
    fixes = gpuplan.estimate("examples/pretrain-70b-cluster.yaml").verdict.fixes
    assert [f.changes for f in fixes] == [
        {"zero": 3, "activation_checkpointing": "full"},
        {"gpu": "H200 SXM 141GB", "zero": 3},
    ]
    assert fixes[1].per_gpu_bytes / GIB == pytest.approx(135.34, rel=0.01)
    assert fixes[1].usd_per_hour == pytest.approx(2042.88, abs=0.01)
