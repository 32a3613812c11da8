"""The web app's computing side: estimates, fits, plans and rooflines run in worker processes (the
estimators are CPU-bound Python, so threads of one process share one core under the GIL), and
their answers are kept in a bounded LRU cache keyed by the normalised request, the endpoint and
the version of the catalog and prices, so a repeated question is answered without computing.

The web app's bounded thread pool (web._Pool: the queue limit, the time budget, the cheap
endpoints kept free) still admits each request; its thread hands the work to a process here and
waits. A worker process reads the server's catalog and price files once, at its start, and sends
back the answer's JSON bytes (the same bytes the endpoint used to serialise).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Final

from gpuplan import __version__
from gpuplan.errors import GpuplanError
from gpuplan.interfaces import api
from gpuplan.interfaces.web_schemas import PlanIn
from gpuplan.results.base import plain
from gpuplan.specs.context import Context
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload, check_keys_apply, make_workload

# Answers kept per server process, by count and by size: a plan's JSON is 20-150 KB, a cluster
# plan's up to a few hundred KB, so 1,024 answers stay well under the byte bound.
CACHE_ENTRIES: Final = 1_024
CACHE_BYTES: Final = 128 * 1024 * 1024
# The environment a worker process computes with: the user's catalog, prices and TOML cache, and
# whether hub ids may reach the network. A pool started under other values is another pool.
ENV_KEYS: Final = ("GPUPLAN_CATALOG", "GPUPLAN_PRICES", "GPUPLAN_CACHE_DIR", "HF_HUB_OFFLINE", "HF_HOME")
PLAN_KEYS: Final = frozenset(PlanIn.model_fields) - frozenset(Workload.model_fields)
KINDS: Final = ("estimate", "fit", "plan", "roofline")


def machine_cpus() -> int:
    """CPUs this process may run on (its affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def pool_size(server_processes: int = 1) -> int:
    """Worker processes per server process: the machine's CPUs shared among `serve --workers N`."""
    return max(1, machine_cpus() // max(1, server_processes))


class AnswerCache:
    """A thread-safe LRU map from a request's key to its answer's JSON bytes, bounded by entries and
    by total bytes (the oldest answers leave first)."""

    def __init__(self, max_entries: int = CACHE_ENTRIES, max_bytes: int = CACHE_BYTES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = self.misses = 0
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> bytes | None:
        with self._lock:
            body = self._items.get(key)
            if body is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return body

    def put(self, key: str, body: bytes) -> None:
        if len(body) > self.max_bytes or self.max_entries < 1:
            return
        with self._lock:
            old = self._items.pop(key, None)
            self.bytes -= len(old) if old is not None else 0
            self._items[key] = body
            self.bytes += len(body)
            while len(self._items) > self.max_entries or self.bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self.bytes -= len(dropped)


class SharedAnswers:
    """The answers the server processes of one `serve --workers N` share: one file per answer, named
    by its request key, in a private directory `serve` makes (mode 0700) and removes at its end.
    An answer is written whole (a temporary file renamed into place: a reader sees all of it or
    none); the files are bounded by count and bytes like AnswerCache, the least recently used
    (by modification time, renewed on each hit) leaving first. A file that cannot be read or
    written is a miss, never an error: each process still has its own AnswerCache."""

    def __init__(self, directory: str, max_entries: int = CACHE_ENTRIES, max_bytes: int = CACHE_BYTES) -> None:
        self.directory = directory
        self.max_entries = max_entries
        self.max_bytes = max_bytes

    def get(self, key: str) -> bytes | None:
        path = os.path.join(self.directory, key)
        try:
            with open(path, "rb") as f:
                body = f.read()
            os.utime(path)  # most recently used
        except OSError:
            return None
        return body

    def put(self, key: str, body: bytes) -> None:
        if len(body) > self.max_bytes or self.max_entries < 1:
            return
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".part-")
            with os.fdopen(fd, "wb") as f:
                f.write(body)
            os.replace(tmp, os.path.join(self.directory, key))
            self._trim()
        except OSError:
            return

    def _trim(self) -> None:
        """Remove the least recently used answers past the bounds (another process may be removing
        them too: one already gone is skipped)."""
        entries = []
        with os.scandir(self.directory) as it:
            for e in it:
                if not e.name.startswith("."):
                    with contextlib.suppress(OSError):
                        st = e.stat()
                        entries.append((st.st_mtime_ns, st.st_size, e.path))
        total = sum(size for _, size, _ in entries)
        entries.sort()
        while entries and (len(entries) > self.max_entries or total > self.max_bytes):
            _, size, path = entries.pop(0)
            with contextlib.suppress(OSError):
                os.remove(path)
            total -= size


def catalog_version(ctx: Context) -> str:
    """A digest of what answers depend on besides the request: gpuplan's version, every catalog row
    (with the user's rows and calibrations) and the prices, on demand and spot."""
    h = hashlib.sha256(__version__.encode())
    for g in ctx.catalog:
        h.update(repr(g).encode())
    for spot in (False, True):
        h.update(repr(sorted(ctx.prices(spot).items())).encode())
    return h.hexdigest()[:16]


def request_key(kind: str, payload: Mapping[str, Any], version: str) -> str:
    """The cache key of a request: its endpoint, its keys as validated (sorted, so the order and
    spacing of the JSON sent do not matter; only keys the request set, as the answer depends on
    which keys are set) and the catalog version."""
    text = json.dumps([kind, payload, version], sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


# --- the worker side -----------------------------------------------------------------------------

_CONTEXT: list[Context] = []  # the worker's context, read once in `_start`


def _orphan_watch(parent: int, every_s: float = 1.0) -> None:
    """Exit when the server that started this worker is gone: a server killed outright (SIGKILL,
    a crash) cannot stop its workers, which would otherwise wait for work forever."""
    while True:
        time.sleep(every_s)
        if os.getppid() != parent:
            os._exit(0)


def _start(files: Sequence[str], price_file: str | None, env: Mapping[str, str | None]) -> None:
    """A worker process's start: a watch on its server, the server's environment, then its catalog
    and prices, read once."""
    threading.Thread(target=_orphan_watch, args=(os.getppid(),), daemon=True).start()
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    _CONTEXT[:] = [Context.of(files, price_file).check()]


def workload_of(payload: Mapping[str, Any]) -> tuple[Workload, ModelSpec | None]:
    """The library's workload (keys the request set stay set) and its model: pasted, a preset or a
    hub id, never a file on the server (None for graphics jobs that name no model)."""
    w = make_workload({k: v for k, v in payload.items() if k != "config" and k not in PLAN_KEYS})
    check_keys_apply(w)  # a key the task ignores is refused in one line, as the CLI refuses it
    config = payload.get("config")
    if config is not None:
        return w, api.model_from_json(config, w.model)
    return w, (api.get_model(w.model, files=False) if w.model else None)


def render(content: Any) -> bytes:
    """JSON bytes exactly as starlette's JSONResponse renders them; NaN or infinity raises (a bug:
    the JSON standard has neither)."""
    return json.dumps(plain(content), ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


def compute(kind: str, payload: Mapping[str, Any], ctx: Context | None = None) -> tuple[bool, bytes | str]:
    """(True, the answer's JSON) or (False, the one-line message of bad input)."""
    ctx = ctx if ctx is not None else (_CONTEXT[0] if _CONTEXT else Context())
    try:
        w, spec = workload_of(payload)
        if kind == "estimate":
            rec: Any = api.estimate(w, ctx, model=spec)
        elif kind == "fit":
            rec = api.fit(w, ctx, model=spec)
        elif kind == "roofline":
            rec = api.roofline(w, ctx, model=spec)
        else:
            rec = api.plan(
                w, ctx, gpus=payload.get("gpus") or (), top=payload.get("top"), spot=payload.get("spot", False),
                carbon_g_per_kwh=payload.get("carbon_g_per_kwh"),
                allow_cross_node_tp=payload.get("allow_cross_node_tp", False), model=spec,
            )  # fmt: skip
    except GpuplanError as exc:
        return False, str(exc)
    return True, render(rec)


def _ready(_: int = 0) -> int:
    return os.getpid()


# --- the server side -----------------------------------------------------------------------------

_POOLS: dict[tuple[Any, ...], ProcessPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool_key(files: Sequence[str], price_file: str | None, size: int) -> tuple[Any, ...]:
    env = {k: os.environ.get(k) for k in ENV_KEYS}
    return (tuple(files), price_file, size, tuple(sorted(env.items(), key=lambda kv: kv[0])))


def close_pool(files: Sequence[str], price_file: str | None, size: int) -> None:
    """Stop the worker processes of this key, if started (queued work is cancelled)."""
    with _POOLS_LOCK:
        pool = _POOLS.pop(_pool_key(files, price_file, size), None)
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def process_pool(files: Sequence[str], price_file: str | None, size: int) -> ProcessPoolExecutor:
    """The worker processes for this catalog, price file, environment and size, started on first use
    and shared by the apps of this process (tests build many) until one's end closes them; they stop
    when the process exits, and on their own when it dies. Spawned, not forked: a fork of a server
    with threads and an event loop can deadlock."""
    env = {k: os.environ.get(k) for k in ENV_KEYS}
    key = _pool_key(files, price_file, size)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = ProcessPoolExecutor(
                size, mp_context=multiprocessing.get_context("spawn"), initializer=_start,
                initargs=(list(files), price_file, env),
            )  # fmt: skip
            _POOLS[key] = pool
        return pool


class Computer:
    """What a compute endpoint calls from its pool thread: the cache, else a worker process (or this
    thread where `processes` is 0)."""

    def __init__(
        self, ctx: Context, files: Sequence[str], price_file: str | None, processes: int, shared: str | None = None
    ) -> None:
        self.ctx = ctx
        self.files = [str(f) for f in files]
        self.price_file = price_file
        self.processes = processes
        self.cache = AnswerCache()
        # `serve --workers N`: the answers of the other server processes too (a repeated question
        # reaches the process that computed it only one time in N)
        self.shared = SharedAnswers(shared) if shared else None
        self.version = catalog_version(ctx)

    def warm(self) -> None:
        """Start the worker processes and wait until each has read the catalog (before serving)."""
        if self.processes > 0:
            pool = process_pool(self.files, self.price_file, self.processes)
            list(pool.map(_ready, range(self.processes)))

    def close(self) -> None:
        """Stop this app's worker processes (the app's end; a later request would start new ones)."""
        if self.processes > 0:
            close_pool(self.files, self.price_file, self.processes)

    def answer(self, kind: str, payload: dict[str, Any]) -> bytes:
        """The JSON bytes of the answer; bad input raises GpuplanError with its one line."""
        key = request_key(kind, payload, self.version)
        body = self.cache.get(key)
        if body is None and self.shared is not None:
            body = self.shared.get(key)
            if body is not None:
                self.cache.put(key, body)
        if body is not None:
            return body
        ok, out = self._compute(kind, payload)
        if not ok:
            raise GpuplanError(str(out))
        assert isinstance(out, bytes)
        self.cache.put(key, out)
        if self.shared is not None:
            self.shared.put(key, out)
        return out

    def _compute(self, kind: str, payload: dict[str, Any]) -> tuple[bool, bytes | str]:
        if self.processes > 0:
            pool = process_pool(self.files, self.price_file, self.processes)
            try:
                return pool.submit(compute, kind, payload).result()
            except BrokenProcessPool:  # a worker died (killed, out of memory): a fresh pool next time
                with _POOLS_LOCK:
                    for k, v in list(_POOLS.items()):
                        if v is pool:
                            del _POOLS[k]
        return compute(kind, payload, self.ctx)  # this once, in this thread
