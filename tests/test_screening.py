"""planner/screening.py: a plan validates each layout's workload once and copies it per GPU; the
copy must be the workload `Workload.with_` would validate (values and set keys), the same errors
must be raised, and a plan's options must be those of options evaluated one at a time."""

from __future__ import annotations

import pytest

from gpuplan.errors import GpuplanError
from gpuplan.interfaces import api
from gpuplan.planner.recommend import evaluate
from gpuplan.planner.screening import Candidates
from gpuplan.specs.workload import make_workload

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
