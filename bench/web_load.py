"""Latency of the web app under load (issue 6): N requests sent at the same moment, one connection
each, to a real `gpuplan serve` on a loopback port (uvicorn, one process), per endpoint.

Run: .venv/bin/python bench/web_load.py [--concurrent 200] [--rounds 3]. Prints one JSON document:
per endpoint, every request answered or not, and the latency p50/p99/max (seconds, from sending
to the whole answer read) pooled over the rounds, plus requests per second of each round's wall
time. Workloads differ per request (batch sizes), so no answer repeats another's. Not a test:
timings depend on the machine; tests/test_web_load.py checks that every request is answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.web_server import Answer, fire, served


def bodies(endpoint: str, n: int, start: int = 0) -> list[dict[str, Any]]:
    """n different workloads (task and batch size vary); `start` shifts the batch sizes, so that
    every round of a benchmark asks new questions (none answered from the server's cache)."""
    tasks = ("inference", "lora", "qlora", "finetune")
    out = []
    for i in range(start, start + n):
        b: dict[str, Any] = {"model": "llama-3.1-8b", "task": tasks[i % 4], "batch_size": 1 + i // 4, "tokens": 1e8}
        if endpoint in ("/api/estimate", "/api/roofline"):
            b["gpu"] = "H100"
        out.append(b)
    return out


def plan_bodies(n: int, start: int = 0) -> list[dict[str, Any]]:
    """n different plan requests (batch sizes and tasks differ), as `bodies` gives."""
    return bodies("/api/plan", n, start)


def mixed(n: int, start: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """n different requests, estimate / fit (every GPU) / plan in turn."""
    eps = ("/api/estimate", "/api/fit", "/api/plan")
    return [(eps[i % 3], body) for i, body in enumerate(bodies("/api/fit", n, start))]


async def _fire_mixed(url: str, requests: Sequence[tuple[str, dict[str, Any]]], timeout_s: float) -> list[Answer]:
    limits = httpx.Limits(max_connections=len(requests), max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout_s) as client:
        start = asyncio.Event()

        async def one(path: str, body: dict[str, Any]) -> Answer:
            if path == "/api/estimate":
                body = {**body, "gpu": "H100"}
            await start.wait()  # all at once
            t0 = time.perf_counter()
            try:
                r = await client.post(path, json=body)
            except httpx.HTTPError as exc:
                return Answer(0, time.perf_counter() - t0, repr(exc))
            return Answer(r.status_code, time.perf_counter() - t0, None)

        tasks = [asyncio.create_task(one(p, b)) for p, b in requests]
        await asyncio.sleep(0)
        start.set()
        return list(await asyncio.gather(*tasks))


def fire_mixed(
    url: str, requests: Sequence[tuple[str, dict[str, Any]]], timeout_s: float = 300.0
) -> tuple[float, list[Answer]]:
    """POST each (path, body) at the same moment to a loopback server; the wall time and answers."""
    if not url.startswith("http://127.0.0.1:"):
        raise ValueError(f"load is only sent to a server on this machine's loopback, not {url}")
    t0 = time.perf_counter()
    answers = asyncio.run(_fire_mixed(url, requests, timeout_s))
    return time.perf_counter() - t0, answers


def summary(rounds: Sequence[tuple[float, list[Answer]]]) -> dict[str, Any]:
    """Latencies pooled over rounds; requests per second per round's wall time (median)."""
    lat = [a.seconds for _, answers in rounds for a in answers]
    return {
        "requests": len(lat),
        "answered_200": sum(a.status == 200 for _, answers in rounds for a in answers),
        "p50_s": round(quantile(lat, 0.50), 3),
        "p99_s": round(quantile(lat, 0.99), 3),
        "max_s": round(max(lat), 3),
        "requests_per_s": round(statistics.median(len(a) / wall for wall, a in rounds), 1),
    }


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrent", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1, help="gpuplan serve --workers")
    ap.add_argument("--endpoints", nargs="*", default=["/api/estimate", "/api/roofline", "/api/fit", "/api/plan"])
    args = ap.parse_args()
    report: dict[str, Any] = {"concurrent": args.concurrent, "rounds": args.rounds, "workers": args.workers}
    report["endpoints"] = {}
    with served(workers=args.workers) as url:
        for ep in args.endpoints:
            lat: list[float] = []
            rates: list[float] = []
            answered = failed = 0
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                answers = fire(url, ep, bodies(ep, args.concurrent))
                wall = time.perf_counter() - t0
                rates.append(len(answers) / wall)
                answered += sum(a.status == 200 for a in answers)
                failed += sum(a.status != 200 for a in answers)
                lat += [a.seconds for a in answers]
            report["endpoints"][ep] = {
                "requests": len(lat),
                "answered_200": answered,
                "not_200": failed,
                "p50_s": round(quantile(lat, 0.50), 4),
                "p99_s": round(quantile(lat, 0.99), 4),
                "max_s": round(max(lat), 4),
                "requests_per_s": round(statistics.median(rates), 1),
            }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
