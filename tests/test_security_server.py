"""The server stays up for everyone (issue 24): expensive requests run in a bounded pool with a
queue limit and a time budget, cheap endpoints answer meanwhile, an oversized layout search is a
422 naming what to narrow, silent or slow clients are disconnected, and a bad price or catalog file
stops `serve` at start in one line. Runs a real `gpuplan serve` (tests/web_server.py) where the
network matters, the app in-process elsewhere; about 40 s in all."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpuplan.interfaces import web
from web_server import served

BIG_PLAN = {"model": "deepseek-v3", "task": "pretrain", "cluster": "256x8:H100", "seq_len": 4096}
HUGE_PLAN = {"model": "deepseek-v3", "task": "pretrain", "cluster": "8192x8:H100", "allow_cross_node_tp": True}
GPUPLAN = [str(Path(sys.executable).with_name("gpuplan"))]


@pytest.mark.parametrize(
    ("args", "words"),
    [(["--prices", "/nonexistent/prices.csv"], ["No price file"]), (["--catalog", "{bad}"], ["not valid TOML"])],
)
def test_serve_refuses_a_bad_file_at_start(tmp_path: Path, args: list[str], words: list[str]) -> None:
    bad = tmp_path / "cat.toml"
    bad.write_text("x", encoding="utf-8")
    argv = [a.replace("{bad}", str(bad)) for a in args]
    done = subprocess.run([*GPUPLAN, "serve", "--port", "1", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gpuplan: error: "), done.stderr
    assert all(w in done.stderr for w in words)


def test_cheap_endpoints_answer_while_plans_compute_and_a_huge_search_is_refused() -> None:
    with served() as url:
        results: list[int] = []

        def plans() -> None:
            with httpx.Client(timeout=300) as c:
                for _ in range(2):  # 2 x 3 concurrent layout searches of a 671B MoE on 2,048 GPUs
                    ts = [threading.Thread(target=lambda: results.append(c.post(f"{url}/api/plan",
                                                                                json=BIG_PLAN).status_code))
                          for _ in range(3)]  # fmt: skip
                    for t in ts:
                        t.start()
                    for t in ts:
                        t.join()

        load = threading.Thread(target=plans)
        load.start()
        time.sleep(1.0)
        worst = 0.0
        with httpx.Client(timeout=30) as c:
            while load.is_alive():
                for path in ("/api/health", "/api/gpus", "/api/models", "/"):
                    t0 = time.perf_counter()
                    assert c.get(url + path).status_code == 200
                    worst = max(worst, time.perf_counter() - t0)
                time.sleep(0.2)
            load.join()
            assert results == [200] * 6
            assert worst < 1.0, worst  # never behind the compute pool
            t0 = time.perf_counter()
            r = c.post(f"{url}/api/plan", json=HUGE_PLAN, timeout=60)
            assert r.status_code == 422 and "Narrow it" in r.json()["detail"], r.text
            assert time.perf_counter() - t0 < 20


def test_a_full_queue_answers_503_and_a_slow_request_its_budget() -> None:
    async def run(app: Any, n: int) -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return list(await asyncio.gather(*(c.post("/api/plan", json={"model": "llama-3.1-8b"}) for _ in range(n))))

    answers = asyncio.run(run(web.create_app(compute_threads=1, max_queued=1), 6))
    codes = sorted(a.status_code for a in answers)
    assert codes.count(200) >= 2 and codes.count(503) >= 1, codes
    busy = next(a for a in answers if a.status_code == 503)
    assert busy.headers["retry-after"] == "5" and "busy" in busy.json()["detail"]

    slow = asyncio.run(run(web.create_app(request_budget_s=0.01), 1))[0]
    assert slow.status_code == 503 and "took over 0.01 s" in slow.json()["detail"]


def _closed_within(url: str, payload: bytes, limit_s: float) -> float:
    """Open a raw connection, send `payload` (maybe nothing), and time until the server closes it."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        if payload:
            s.sendall(payload)
        s.settimeout(limit_s)
        t0 = time.monotonic()
        while s.recv(4096):  # an answer (after a complete request) is read past
            pass
        return time.monotonic() - t0


def test_silent_and_slow_clients_are_disconnected() -> None:
    with served() as url:
        margin = web.HEADER_TIMEOUT_S + 5
        silent = _closed_within(url, b"", margin)
        half = _closed_within(url, b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a", margin)
        assert silent < margin and half < margin
        assert silent > web.HEADER_TIMEOUT_S - 1 and half > web.HEADER_TIMEOUT_S - 1
        # a kept-alive connection idle after its answer is closed after the keep-alive time
        idle = _closed_within(url, b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", margin)
        assert idle < web.KEEP_ALIVE_S + 2
        # and a head growing past the size limit is refused, not buffered while it grows
        big = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (web.MAX_HEAD_BYTES + 1024)
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as s:
            s.sendall(big)  # no end of head in sight
            s.settimeout(10)
            assert s.recv(100).startswith(b"HTTP/1.1 400")
