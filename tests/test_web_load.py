"""Load: 200 requests at the same moment to a real `gpuplan serve` (uvicorn, one process) are all
answered, each with the figures the library gives for its workload. Latency is not asserted (it
depends on the machine); bench/web_load.py measures and prints p50/p99."""

from __future__ import annotations

import pytest

from gpuplan.interfaces import api
from gpuplan.specs.workload import make_workload
from helpers.web_server import fire, served

CONCURRENT = 200


def test_200_concurrent_estimates_are_all_answered_correctly() -> None:
    # 200 different workloads: batch 1-50 x four tasks, so no answer can be a copy of another's
    tasks = ("inference", "lora", "qlora", "finetune")
    bodies = [
        {"model": "llama-3.1-8b", "task": tasks[i % 4], "gpu": "H100", "batch_size": 1 + i // 4, "tokens": 1e8}
        for i in range(CONCURRENT)
    ]
    with served() as url:
        answers = fire(url, "/api/estimate", bodies)
    assert len(answers) == CONCURRENT
    failed = [(i, a.status, a.body) for i, a in enumerate(answers) if a.status != 200]
    assert not failed, failed[:3]
    for body, answer in zip(bodies, answers, strict=True):
        want = api.estimate(make_workload(body)).to_dict()
        assert answer.body["memory"]["per_gpu_bytes"] == pytest.approx(want["memory"]["per_gpu_bytes"], rel=1e-12)
        assert answer.body["verdict"]["fits"] == want["verdict"]["fits"]
        if "cost" in want:  # a job that fits has its cost; one that does not has none (it would not run)
            assert answer.body["cost"]["usd"] == pytest.approx(want["cost"]["usd"], rel=1e-12)
        else:
            assert "cost" not in answer.body and answer.body["time"] is None


def test_worker_processes_serve_the_same_answers() -> None:
    """`serve --workers 2`: each worker builds its app from the settings serve hands down."""
    bodies = [{"model": "qwen2.5-7b", "task": "inference", "gpu": "L4", "batch_size": b} for b in range(1, 21)]
    with served(workers=2) as url:
        answers = fire(url, "/api/estimate", bodies)
    assert [a.status for a in answers] == [200] * len(bodies)
    for body, answer in zip(bodies, answers, strict=True):
        assert answer.body["time"]["tpot_s"] == pytest.approx(
            api.estimate(make_workload(body)).to_dict()["time"]["tpot_s"]
        )
