"""A real `gpuplan serve` on a free loopback port, for the browser and load tests.

It runs the installed command (the CLI, uvicorn, the app) in a child process, waits for
/api/health, and stops it afterwards. The child runs offline (HF_HUB_OFFLINE=1). Only
127.0.0.1 is ever used: the tests send no traffic anywhere else.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

__all__ = ["Answer", "chromium", "fire", "free_port", "served"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(timeout_s: float = 60.0, workers: int = 1) -> Iterator[str]:
    """The base URL (http://127.0.0.1:PORT) of a `gpuplan serve` started for the caller."""
    port = free_port()
    exe = Path(sys.executable).with_name("gpuplan")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "gpuplan.interfaces.cli"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [*cmd, "serve", "--port", str(port), "--workers", str(workers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"gpuplan serve exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
                )
            try:
                if httpx.get(f"{url}/api/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"gpuplan serve did not answer on {url} within {timeout_s:.0f} s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def chromium() -> str:
    """Debian's chromium (installed by .ci/run or `make browser`); skip without it, or fail when
    GPUPLAN_REQUIRE_BROWSER=1 (CI)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        why = "no chromium on PATH (apt-get install chromium, or `make browser`)"
        if os.environ.get("GPUPLAN_REQUIRE_BROWSER") == "1":
            pytest.fail(f"GPUPLAN_REQUIRE_BROWSER=1 but {why}", pytrace=False)
        pytest.skip(why)
    return path


@dataclass(frozen=True)
class Answer:
    status: int
    seconds: float  # from sending the request to the whole answer read
    body: Any


async def _fire(url: str, path: str, bodies: Sequence[dict[str, Any]], timeout_s: float) -> list[Answer]:
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout_s) as client:
        start = asyncio.Event()

        async def one(body: dict[str, Any]) -> Answer:
            await start.wait()  # all at once
            t0 = time.perf_counter()
            try:
                r = await client.post(path, json=body)
            except httpx.HTTPError as exc:  # an unanswered request counts, with its error
                return Answer(0, time.perf_counter() - t0, repr(exc))
            return Answer(r.status_code, time.perf_counter() - t0, r.json())

        tasks = [asyncio.create_task(one(b)) for b in bodies]
        await asyncio.sleep(0)
        start.set()
        return list(await asyncio.gather(*tasks))


def fire(url: str, path: str, bodies: Sequence[dict[str, Any]], timeout_s: float = 300.0) -> list[Answer]:
    """POST every body to url+path at the same moment, one connection each; the answers in order.
    Bounded: len(bodies) requests, each with a timeout, to a loopback server only."""
    if not url.startswith("http://127.0.0.1:"):
        raise ValueError(f"load is only sent to a server on this machine's loopback, not {url}")
    return asyncio.run(_fire(url, path, bodies, timeout_s))
