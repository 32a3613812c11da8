"""planner/screening.py: a plan validates each layout's workload once and copies it per GPU; the
copy must be the workload `Workload.with_` would validate (values and set keys), the same errors
must be raised, and a plan's options must be those of options evaluated one at a time."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.errors import GpuplanError
from gpuplan.interfaces import api
from gpuplan.planner.recommend import evaluate
from gpuplan.planner.screening import Candidates
from gpuplan.specs.workload import Workload, make_workload

TRAIN = make_workload({"model": "llama-3.1-8b", "task": "lora", "batch_size": 2, "tokens": 1e8})


@pytest.mark.parametrize(
    "layout",
    [
        {"num_gpus": 1, "tp": 1, "pp": 1, "zero": 0},
        {"num_gpus": 4, "tp": 1, "pp": 1, "zero": 3, "activation_checkpointing": "full"},
        {"num_gpus": 8, "tp": 2, "pp": 1, "batch_size": 3},
    ],
)
def test_a_copied_candidate_is_the_validated_one(layout: dict[str, object]) -> None:
    cands = Candidates(TRAIN)
    for gpu in ("H100 SXM5 80GB", "GeForce RTX 4090", "L4", "H100 SXM5 80GB"):
        got = cands.get(TRAIN, gpu, layout)
        want = TRAIN.with_(gpu=gpu, **layout)
        assert got == want and got.model_fields_set == want.model_fields_set
        assert got.model_dump(exclude_unset=True) == want.model_dump(exclude_unset=True)
    assert len(cands._done) == 1  # validated once for all four GPUs


def test_a_layout_the_workload_refuses_is_refused_for_every_gpu() -> None:
    cands = Candidates(TRAIN)
    bad = {"num_gpus": 2, "tp": 4, "pp": 1}  # tp over more GPUs than the job has
    with pytest.raises(GpuplanError) as first:
        TRAIN.with_(gpu="L4", **bad)
    for gpu in ("L4", "H100"):
        with pytest.raises(GpuplanError) as exc:
            cands.get(TRAIN, gpu, bad)
        assert str(exc.value) == str(first.value)


def test_shared_candidates_give_the_options_of_one_at_a_time() -> None:
    model = api.get_model(TRAIN.model)
    cat = api.catalog()
    prices = api.context().prices()
    cands = Candidates(TRAIN)
    for gpu in list(cat)[:12]:
        for n in (1, 2, 4, 8):
            shared = evaluate(model, TRAIN, gpu, n, prices.get(gpu.name), None, cands)
            alone = evaluate(model, TRAIN, gpu, n, prices.get(gpu.name), None)
            assert shared == alone, (gpu.name, n)


def test_a_fit_table_with_shared_candidates_is_the_one_without() -> None:
    from gpuplan.planner.fit import smallest_gpu_count

    model = api.get_model("llama-3.1-70b")
    w = make_workload({"model": "llama-3.1-70b", "task": "finetune", "batch_size": 1})
    cands = Candidates(w)
    for gpu in list(api.catalog())[:20]:
        assert smallest_gpu_count(model, w, gpu, candidates=cands) == smallest_gpu_count(model, w, gpu), gpu.name


# --- shared training memory estimates and validated workloads (screening.memory, with_changes) ---

TASKS = ("pretrain", "finetune", "lora", "qlora")
MODELS = ("llama-3.2-1b", "llama-3.1-8b", "qwen2.5-0.5b", "mixtral-8x7b", "gpt2")


def _random_workloads(seed: int, n: int) -> list[dict[str, object]]:
    """Seeded random training workloads over tasks, models, batches, lengths, layouts and savings."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        d: dict[str, object] = {
            "model": rng.choice(MODELS),
            "task": rng.choice(TASKS),
            "batch_size": rng.choice((1, 2, 3, 8, 16)),
            "seq_len": rng.choice((512, 2048, 4096)),
        }
        if rng.random() < 0.5:
            d["activation_checkpointing"] = rng.choice(("none", "selective", "full"))
        if rng.random() < 0.3:
            d["optimizer"] = rng.choice(("adamw", "adamw-8bit", "sgd"))
        if rng.random() < 0.3:
            d["num_gpus"], d["zero"] = rng.choice(((2, 1), (4, 3), (8, 2)))
        if rng.random() < 0.2:
            d["ecc"] = rng.random() < 0.5
        if rng.random() < 0.3:
            d["precision"] = rng.choice(("fp16", "fp32", "fp8"))
        out.append(d)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_shared_training_memory_estimate_is_the_fresh_one_on_every_gpu(seed: int) -> None:
    """Every field of the shared estimate (the copy made for another GPU of the same cuBLAS
    workspace) equals a fresh `estimate_memory`, on every catalog GPU, errors included."""
    from gpuplan.estimators.memory import estimate_memory
    from gpuplan.planner.screening import memory, shared_estimates

    cat = list(api.catalog())
    shared = 0
    for d in _random_workloads(seed, 8):
        w = make_workload(d)
        model = api.get_model(str(d["model"]))
        with shared_estimates():
            for gpu in cat:
                cand = w.model_copy(update={"gpu": gpu.name})
                try:
                    want = estimate_memory(model, cand, gpu)
                except GpuplanError as exc:
                    with pytest.raises(GpuplanError, match="^" + __import__("re").escape(str(exc)) + "$"):
                        memory(model, cand, gpu)
                    continue
                got = memory(model, cand, gpu)
                shared += got is not want
                assert got == want, (d, gpu.name)
                assert (got.fits, got.capacity_bytes, got.headroom_bytes) == (
                    want.fits,
                    want.capacity_bytes,
                    want.headroom_bytes,
                )
                assert got.gpu is gpu and got.workload is cand
    assert shared > 0  # the estimates were shared, not computed anew for each GPU


def test_outside_shared_estimates_memory_is_estimated_each_time() -> None:
    from gpuplan.planner.screening import memory

    model = api.get_model(TRAIN.model)
    gpu = api.catalog().get("L4")
    assert memory(model, TRAIN, gpu) is not memory(model, TRAIN, gpu)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_shared_validated_workload_is_the_one_with_validates(seed: int) -> None:
    """`with_changes` (validated once per workload but its GPU) gives what `Workload.with_` gives:
    values, set keys and refusals, for the same workload on many GPUs."""
    from gpuplan.planner.screening import shared_estimates, with_changes

    changes: list[dict[str, object]] = [
        {},
        {"num_gpus": 4, "zero": 3, "tp": 1, "pp": 1},
        {"activation_checkpointing": "full"},
        {"num_gpus": 2, "tp": 4, "pp": 1},  # refused: tp over more GPUs than the job has
        {"gpu": "A100 80GB"},
        {"gpu": "L4", "num_gpus": 8, "tp": 1, "pp": 1, "zero": 3},
    ]
    for d in _random_workloads(seed, 4):
        base = make_workload(d)
        with shared_estimates():
            for gpu in ("H100", "L4", "GeForce RTX 4090", "H100"):
                w = base.with_(gpu=gpu)
                for change in changes:
                    try:
                        want = w.with_(**change)
                    except GpuplanError as exc:
                        with pytest.raises(GpuplanError) as got_exc:
                            with_changes(w, change)
                        assert str(got_exc.value) == str(exc)
                        continue
                    got = with_changes(w, change)
                    assert got == want and got.model_fields_set == want.model_fields_set, (d, gpu, change)
                    assert got.model_dump(exclude_unset=True) == want.model_dump(exclude_unset=True)


@pytest.mark.parametrize("seed", [3, 4])
def test_plans_fits_and_estimates_with_shared_estimates_are_those_without(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: the JSON of `plan` (every row), `fit` over the catalog and `estimate` with its
    fixes (the search over other GPU types) is the same with the estimates shared as without,
    for seeded random training jobs that fit nowhere, somewhere and everywhere, and a serving job."""
    import contextlib

    import gpuplan.planner.recommend as recommend
    import gpuplan.planner.screening as screening
    import gpuplan.planner.verdict as verdict

    def answers(w: Workload) -> list[dict[str, Any]]:
        on_h100 = w.with_(gpu="H100")
        return [api.plan(w).to_dict(), api.fit(w).to_dict(), api.estimate(on_h100).to_dict()]

    workloads = [make_workload(d) for d in _random_workloads(seed, 3)]
    # and a serving job one H100 cannot hold: its fixes try other formats, counts and GPU types
    workloads.append(make_workload({"model": "llama-3.1-70b", "task": "inference", "batch_size": 1 + seed}))
    shared = [answers(w) for w in workloads]
    for module in (screening, recommend, verdict):
        monkeypatch.setattr(module, "shared_estimates", contextlib.nullcontext)
    alone = [answers(w) for w in workloads]
    assert shared == alone
    assert any(o["fits"] for a in shared for o in a[0]["options"])  # not only jobs that fit nowhere


def test_a_memory_estimate_copies_as_dataclasses_replace_would() -> None:
    """screening.memory copies a shared estimate with copy.copy and two fields set, which equals
    dataclasses.replace only while MemoryEstimate has no __post_init__ and no init=False field."""
    import dataclasses

    from gpuplan.estimators.memory import MemoryEstimate

    assert not hasattr(MemoryEstimate, "__post_init__")
    assert all(f.init for f in dataclasses.fields(MemoryEstimate))


@pytest.mark.parametrize("seed", [5, 6])
def test_the_fewest_gpus_found_from_shared_tries_are_those_of_the_walk(seed: int) -> None:
    """`smallest_gpu_count` within `shared_estimates()` (screening.first_fit: each try's training
    estimate made once per cuBLAS workspace, then compared with every card's capacity) finds the
    count, layout and estimate of the walk that estimates every try on every card, over the whole
    catalog (cards that refuse the precision among them), for seeded random training jobs."""
    from gpuplan.planner.fit import smallest_gpu_count
    from gpuplan.planner.screening import first_fit, shared_estimates

    cat = list(api.catalog())
    found = 0
    for d in _random_workloads(seed, 6):
        w = make_workload(d)
        model = api.get_model(str(d["model"]))
        alone = [smallest_gpu_count(model, w, gpu) for gpu in cat]
        with shared_estimates():
            shared = [smallest_gpu_count(model, w, gpu) for gpu in cat]
        for a, s in zip(alone, shared, strict=True):
            assert (s.num_gpus, s.layout, s.estimate) == (a.num_gpus, a.layout, a.estimate), (d, a.gpu.name)
            found += s.num_gpus is not None
    assert found > 0  # some jobs fit some card: the comparison is not of empty answers only
    h100 = api.catalog().get("H100")
    with shared_estimates():  # and the shared walk is the one taken: a training job on a card that runs it
        assert first_fit(api.get_model(TRAIN.model), TRAIN, h100, [{}], lambda c: TRAIN.with_(**c)) == 0


def test_fits_within_the_cards_capacity_is_fits() -> None:
    """MemoryEstimate.fits is fits_within(capacity_bytes), paged optimizer states spilling or not."""
    from gpuplan.estimators.memory import estimate_memory

    cat = api.catalog()
    for d in ({"optimizer": "paged-adamw-8bit", "task": "qlora"}, {"task": "finetune"}, {"task": "inference"}):
        w = make_workload({"model": "llama-3.1-8b", "batch_size": 4, **d})
        for name in ("L4", "GeForce RTX 4090", "H100", "T4"):
            e = estimate_memory(api.get_model(w.model), w, cat.get(name))
            assert e.capacity_bytes is not None and e.fits_within(e.capacity_bytes) is e.fits, (d, name)
