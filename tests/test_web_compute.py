"""The web app's computing side (interfaces/web_compute.py): the LRU answer cache and its keys, the
answers a worker computes (the library's, byte for byte as JSON), a repeated request answered from
the cache, and compressed answers."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

import gpuplan
from gpuplan.interfaces import api, web
from gpuplan.interfaces.web_compute import (
    AnswerCache,
    SharedAnswers,
    catalog_version,
    compute,
    pool_size,
    request_key,
)
from gpuplan.specs.context import Context
from gpuplan.specs.workload import make_workload
from helpers.web_server import free_port

PLAN = {"model": "llama-3.1-8b", "task": "lora", "batch_size": 2, "tokens": 5e7}


def test_the_cache_drops_the_least_recently_used_answer_first() -> None:
    c = AnswerCache(max_entries=3, max_bytes=1_000)
    for k in "abc":
        c.put(k, k.encode() * 10)
    assert c.get("a") == b"a" * 10  # a is now the most recent
    c.put("d", b"d" * 10)
    assert c.get("b") is None and c.get("a") is not None and len(c) == 3
    assert (c.hits, c.misses) == (2, 1)


def test_the_cache_is_bounded_by_bytes_too() -> None:
    c = AnswerCache(max_entries=100, max_bytes=100)
    c.put("x", b"x" * 60)
    c.put("y", b"y" * 60)  # 120 bytes: x leaves
    assert c.get("x") is None and c.get("y") == b"y" * 60 and c.bytes == 60
    c.put("huge", b"h" * 101)  # larger than the whole cache: not kept, nothing dropped for it
    assert c.get("huge") is None and c.bytes == 60
    c.put("y", b"y" * 10)  # replaced: its old size is given back
    assert c.bytes == 10 and len(c) == 1


def test_request_keys_ignore_key_order_and_tell_kinds_and_catalogs_apart() -> None:
    a = request_key("plan", {"model": "m", "task": "lora", "batch_size": 2}, "v1")
    assert a == request_key("plan", {"batch_size": 2, "task": "lora", "model": "m"}, "v1")
    assert a != request_key("fit", {"model": "m", "task": "lora", "batch_size": 2}, "v1")
    assert a != request_key("plan", {"model": "m", "task": "lora", "batch_size": 2}, "v2")
    assert a != request_key("plan", {"model": "m", "task": "lora", "batch_size": 3}, "v1")


def test_the_catalog_version_follows_the_catalog(tmp_path: Path) -> None:
    assert catalog_version(Context()) == catalog_version(Context())  # stable: one digest per content
    # a user's price file changes the answers' costs, so it changes the version
    prices = tmp_path / "p.csv"
    prices.write_text("gpu,provider,price_per_hour_usd,date_or_version,source\nH100,our lab,0.5,2026-12,own\n")
    assert catalog_version(Context.of([], prices)) != catalog_version(Context())


def test_a_computed_answer_is_the_librarys_json() -> None:
    ok, body = compute("plan", PLAN)
    assert ok and isinstance(body, bytes)
    want = api.plan(make_workload(PLAN)).to_dict()
    assert json.loads(body) == json.loads(json.dumps(want))
    ok, line = compute("estimate", {"model": "llama-3.1-8b", "gpu": "no-such-gpu"})
    assert not ok and isinstance(line, str) and "no-such-gpu" in line and "\n" not in line


def test_shared_answers_are_seen_by_every_server_process_and_bounded(tmp_path: Path) -> None:
    """`serve --workers N`: an answer one process computed is read by another (its own instance
    on the same directory), whole; the files are bounded by count and bytes, the least recently
    used leaving first; an unreadable or vanished directory is a miss, not an error."""
    one, two = SharedAnswers(str(tmp_path), max_entries=3, max_bytes=100), SharedAnswers(str(tmp_path), 3, 100)
    one.put("a" * 64, b"A" * 10)
    assert two.get("a" * 64) == b"A" * 10 and one.get("b" * 64) is None
    for k in "bc":
        two.put(k * 64, k.encode() * 10)
    old = time.time() - 100
    for i, k in enumerate("abc"):  # a the oldest, then b, then c
        os.utime(tmp_path / (k * 64), (old + i, old + i))
    assert one.get("a" * 64) == b"A" * 10  # read: now the most recently used
    one.put("d" * 64, b"d" * 10)  # four answers, three kept: b (the least recently used) leaves
    assert sorted(p.name[0] for p in tmp_path.iterdir()) == ["a", "c", "d"]
    two.put("f" * 64, b"f" * 95)  # over the bytes with the rest: the oldest leave until it fits
    assert one.get("f" * 64) == b"f" * 95 and sum(p.stat().st_size for p in tmp_path.iterdir()) <= 100
    two.put("g" * 64, b"g" * 101)  # larger than the bound: not kept
    assert one.get("g" * 64) is None
    gone = SharedAnswers(str(tmp_path / "removed"))
    gone.put("h" * 64, b"h")
    assert gone.get("h" * 64) is None


def test_a_server_process_answers_from_what_another_computed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpuplan.interfaces.web_compute import Computer

    ctx = Context()
    first = Computer(ctx, [], None, 0, str(tmp_path))
    body = first.answer("fit", dict(PLAN))
    assert json.loads(body) == json.loads(json.dumps(api.fit(make_workload(PLAN)).to_dict()))

    def no_compute(*_: object) -> tuple[bool, bytes | str]:
        raise AssertionError("computed again")

    second = Computer(ctx, [], None, 0, str(tmp_path))  # another server process: its own memory cache
    monkeypatch.setattr(second, "_compute", no_compute)
    assert second.answer("fit", dict(PLAN)) == body
    assert second.cache.get(request_key("fit", PLAN, second.version)) == body  # and kept in its memory


def test_the_pool_shares_the_cpus_among_server_processes() -> None:
    assert pool_size(1) >= 1 and pool_size(1) >= pool_size(2) >= 1
    assert pool_size(10_000) == 1


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(web.create_app(processes=1)) as c:  # one worker process
        yield c


def test_a_repeated_request_is_answered_from_the_cache(client: TestClient) -> None:
    first = client.post("/api/plan", json=PLAN)
    assert first.status_code == 200
    again = client.post("/api/plan", json=dict(reversed(list(PLAN.items()))))  # same keys, another order
    assert again.status_code == 200 and again.content == first.content
    assert first.json() == json.loads(json.dumps(api.plan(make_workload(PLAN)).to_dict()))
    other = client.post("/api/plan", json={**PLAN, "batch_size": 4})
    assert other.status_code == 200 and other.content != first.content
    bad = client.post("/api/estimate", json={"model": "llama-3.1-8b", "gpu": "no-such-gpu"})
    assert bad.status_code == 422 and "no-such-gpu" in bad.json()["detail"]


def test_answers_are_compressed_for_clients_that_accept_gzip(client: TestClient) -> None:
    r = client.post("/api/fit", json={"model": "llama-3.1-8b", "task": "lora"}, headers={"accept-encoding": "gzip"})
    assert r.status_code == 200 and r.headers["content-encoding"] == "gzip"
    raw = len(r.content)  # httpx gives the decoded body
    assert raw > 10_000 and int(r.headers["content-length"]) < raw / 3  # JSON compresses well over 3x
    assert "content-security-policy" in r.headers  # the security headers survive compression
    plain = client.post(
        "/api/fit", json={"model": "llama-3.1-8b", "task": "lora"}, headers={"accept-encoding": "identity"}
    )
    assert "content-encoding" not in plain.headers and plain.content == r.content
    assert gzip.compress(plain.content)  # the same document either way


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_worker_processes_stop_with_the_server(how: signal.Signals) -> None:
    """Stopped (SIGTERM: the app's end closes them) or killed outright (SIGKILL: each worker sees
    its server gone within a second), a server leaves no worker process behind."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(gpuplan.__file__).parent.parent)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuplan.interfaces.cli", "serve", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.post(f"{url}/api/estimate", json={"model": "gpt2", "gpu": "L4"}, timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "the server did not start"
            time.sleep(0.3)
        workers = [p for p in _children(proc.pid) if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()]
        assert workers, "no worker process"
        proc.send_signal(how)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in workers if _alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
