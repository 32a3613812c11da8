"""The local web app (`gpuplan serve`): a FastAPI JSON API over `gpuplan.interfaces.api`, and one
page (static/index.html) that draws its answers with Plotly, vendored so it works offline.

The API is the library API over HTTP: every number the page shows comes from these endpoints,
which return what the CLI's `--json` prints. Bad input gets a 4xx with one line in `detail`
(the CLI's message), never a 5xx or a stack trace. Bodies over MAX_BODY_BYTES get 413. By
default the server listens on loopback only and answers only to loopback host names, so a web
page elsewhere cannot reach it through DNS rebinding. It reads no files named in a request: a
model is a bundled preset, a hub id, or a config.json pasted into the request (`config`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import json
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Final

import anyio.to_thread
from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.middleware.gzip import GZipMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import Response as StarletteResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from gpuplan import __version__
from gpuplan.errors import GpuplanError, InvalidSettingError, UnknownNameError
from gpuplan.interfaces import api
from gpuplan.interfaces.web_compute import Computer, pool_size
from gpuplan.interfaces.web_schemas import ErrorOut, ModelIn, PlanIn, WorkloadIn
from gpuplan.results.base import plain
from gpuplan.safeio import one_line
from gpuplan.specs.context import Context
from gpuplan.specs.workload import describe_error

# The largest request body: a config.json is a few KB, but ones that carry a label map (ViT on
# ImageNet-21k's 21,843 classes) reach ~1 MB.
MAX_BODY_BYTES: Final = 2 * 1024 * 1024
LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "[::1]", "::1")
STATIC: Final = Path(str(resources.files("gpuplan.interfaces") / "static"))

# Requests computed at once (the rest queue in arrival order): the estimators are CPU-bound Python,
# so more threads than this only share the same cores and make every answer late together.
COMPUTE_THREADS: Final = 4
# Computing requests waiting for a thread, at most: beyond it the server answers 503 with
# Retry-After at once instead of piling up work (and bodies) without end. 200 requests sent at the
# same moment (bench/web_load.py) all queue; thousands more get 503.
MAX_QUEUED: Final = 1_000
# A computing request's wall-clock budget from arrival, queue included: past it the client gets
# 503 (the thread cannot be stopped, so it finishes and its answer is dropped). The layout search's
# own budget (planner.layouts.MAX_SEARCH_LAYOUTS) keeps any one computation to ~2 s here; this
# bounds what a client waits behind a long queue.
REQUEST_BUDGET_S: Final = 120.0
# Connection limits for uvicorn (uvicorn.Config): more open connections than this get 503 at once;
# a kept-alive connection idle this long is closed; a request head (line and headers) is at most
# this large (h11's default, 16 KiB) and must arrive within HEADER_TIMEOUT_S of the connection
# opening (nginx's client_header_timeout, Apache's RequestReadTimeout: a slow or silent client
# does not hold a connection forever).
LIMIT_CONCURRENCY: Final = 2_048
KEEP_ALIVE_S: Final = 5
MAX_HEAD_BYTES: Final = 16 * 1024
HEADER_TIMEOUT_S: Final = 10.0
# A request body (at most MAX_BODY_BYTES) must be all in within this long of the request head: a
# client trickling a body a byte at a time gets 408 (nginx's client_body_timeout, 60 s between
# reads, bounds the gaps only; this bounds the whole body: 2 MiB in 30 s is 70 KB/s).
BODY_TIMEOUT_S: Final = 30.0
# Connections the kernel queues before uvicorn accepts them (listen(2)'s backlog; Linux caps it at
# net.core.somaxconn, 4,096 since 5.4): uvicorn's default, written here so that every serve states it.
BACKLOG: Final = 2_048

# Responses of 1,000 bytes or more are gzipped for clients that accept it (Starlette's GZipMiddleware):
# Plotly's 1.19 MB goes as 396 KB. Level 6 (zlib's default), not Starlette's 9: it runs on the event
# loop, and a LoRA plan's 335 KB took 3.7 ms at 6 against 16 ms at 9 here (42 KB against 40 KB).
GZIP_MIN_BYTES: Final = 1_000
GZIP_LEVEL: Final = 6
# How long a browser may keep the vendored files (Plotly, MIT) without asking again: they change
# only with a gpuplan release. The page's own files are revalidated on every load (ETag).
VENDOR_MAX_AGE_S: Final = 86_400

# The page's own files only: Plotly draws into SVG with inline styles, and uploads are read in the
# page (FileReader), so nothing else is needed. The URL carries the plan, so no Referer leaves.
SECURITY_HEADERS: Final = (
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
        b"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)


# --- request bodies ------------------------------------------------------------------------------


ERRORS: Final[dict[int | str, dict[str, Any]]] = {
    400: {"model": ErrorOut, "description": "Malformed request (not JSON, bad host)."},
    413: {"model": ErrorOut, "description": f"Request body over {MAX_BODY_BYTES} bytes."},
    422: {"model": ErrorOut, "description": "A valid request that names something unknown or impossible."},
    408: {"model": ErrorOut, "description": f"The request body did not arrive within {BODY_TIMEOUT_S:g} s."},
    503: {"model": ErrorOut, "description": "The server is busy or the request ran past its time; see Retry-After."},
}


# --- middleware ------------------------------------------------------------------------------------


class _TooLarge(HTTPException):
    def __init__(self) -> None:
        super().__init__(413, f"The request body is over the limit of {MAX_BODY_BYTES:,} bytes.")


class GuardMiddleware:
    """Caps request bodies (by Content-Length, and by counting a streamed body) and adds the
    security headers to every response."""

    def __init__(
        self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES, body_timeout_s: float = BODY_TIMEOUT_S
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            status = 413 if length.isdigit() else 400
            detail = str(_TooLarge().detail) if status == 413 else "The Content-Length header is not a number."
            await _send_json(send, status, {"detail": detail})
            return
        seen = 0
        body_done = False
        deadline = anyio.current_time() + self.body_timeout_s

        async def counted() -> Message:
            nonlocal seen, body_done
            if body_done:  # past the body (a response listening for a disconnect): no deadline
                return await receive()
            try:
                with anyio.fail_after(max(deadline - anyio.current_time(), 0.0)):
                    message = await receive()
            except TimeoutError:
                raise HTTPException(  # and close: the rest of the body may still come
                    408,
                    f"The request body did not arrive within {self.body_timeout_s:g} s; send it at once.",
                    headers={"connection": "close"},
                ) from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise _TooLarge()
                body_done = not message.get("more_body", False)
            else:
                body_done = True
            return message

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, counted, with_headers)


async def _send_json(send: Send, status: int, body: Mapping[str, Any]) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": data})


# --- the app ---------------------------------------------------------------------------------------


def _answer(content: Any) -> JSONResponse:
    """The endpoint's JSON, serialised in the endpoint's own worker thread: returned as a plain
    dict, FastAPI would queue its serialisation behind every request still waiting for a thread,
    so under load no answer would leave before the last one was computed. NaN or infinity is a
    bug here, and raises (the JSON standard has neither). A typed result is sent as its
    `to_dict()`: the same document the CLI prints with --json."""
    return JSONResponse(plain(content))


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": one_line(detail)}, status_code=status)


class _Busy(HTTPException):
    def __init__(self, detail: str) -> None:
        super().__init__(503, detail, headers={"retry-after": "5"})


def _return_memory() -> None:
    """Hand freed memory back to the system after a large computation: CPython keeps freed blocks
    in its arenas and glibc's malloc keeps them in its heap; gc + malloc_trim(0) (glibc's
    malloc_trim(3)) returns what is free. No-op where glibc is absent."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class _Pool:
    """The bounded compute pool: estimates, fits and plans run in `threads` worker threads, never
    on the event loop (the cheap endpoints stay answerable however many plans are queued); past
    `threads + max_queued` requests a new one gets 503, and one that waits and runs longer than
    `budget_s` gets 503 too."""

    def __init__(self, threads: int, max_queued: int, budget_s: float) -> None:
        self.limiter = anyio.CapacityLimiter(threads)
        self.capacity = threads + max_queued
        self.budget_s = budget_s
        self.waiting = 0  # computing requests in the server (running or queued)

    async def run(self, fn: Callable[[], Response], *, large: bool = False) -> Response:
        if self.waiting >= self.capacity:
            raise _Busy(f"The server is busy ({self.waiting:,} requests computing or queued); retry in a few seconds.")
        self.waiting += 1
        try:
            with anyio.fail_after(self.budget_s):
                result = await anyio.to_thread.run_sync(fn, limiter=self.limiter, abandon_on_cancel=True)
        except TimeoutError:
            raise _Busy(f"The request took over {self.budget_s:g} s in a busy server; retry, or narrow it.") from None
        finally:
            self.waiting -= 1
        if large and self.waiting == 0:
            await anyio.to_thread.run_sync(_return_memory, limiter=self.limiter)
        return result


def _cached(fn: Callable[[], Any]) -> Callable[[], Any]:
    """`fn`'s answer, computed once (under a lock: threads may ask at the same time), then kept:
    the catalog and presets do not change while the server runs."""
    lock = threading.Lock()
    memo: list[Any] = []

    def get() -> Any:
        with lock:
            if not memo:
                memo.append(fn())
            return memo[0]

    return get


def _install_error_handlers(app: FastAPI) -> None:
    """Bad input is one line with 4xx; a bug is 500 with no trace in the answer."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        if not errors:
            return _error(422, "The request is not valid.")
        err = dict(errors[0])
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        if err.get("type") == "json_invalid":
            return _error(400, f"The request body is not valid JSON: {err.get('ctx', {}).get('error', 'parse error')}.")
        if not loc and err.get("type") in ("model_attributes_type", "dict_type", "model_type"):
            return _error(422, 'The request body must be a JSON object of workload keys (e.g. {"model": ...}).')
        if err.get("type") == "missing" and not loc:
            return _error(422, "The request needs a JSON body (the workload).")
        if loc and loc[0] in ("query", "path"):
            return _error(422, f"The {loc[-1]!r} {loc[0]} parameter: {err.get('msg', 'invalid value')}.")
        err["loc"] = loc
        body_model = ModelIn if request.url.path == "/api/model" else PlanIn
        return _error(422, describe_error(err, body_model.model_fields))

    @app.exception_handler(GpuplanError)
    async def _input(_: Request, exc: GpuplanError) -> JSONResponse:
        return _error(422, str(exc))

    @app.exception_handler(Exception)
    async def _bug(_: Request, exc: Exception) -> JSONResponse:  # a bug, not bad input: no trace leaves
        return _error(500, f"gpuplan failed on this request ({type(exc).__name__}); please report it.")


def _catalog_routes(app: FastAPI, ctx: Context, pool: _Pool, relative: Callable[[], Any]) -> None:
    """The catalog, the presets and the reference chart: answered on the event loop from what is
    cached (a model lookup, which may read a config, goes to the pool)."""
    gpu_records = _cached(lambda: [api.gpu_record(g) for g in ctx.catalog])
    gpu_menu = _cached(lambda: [api.gpu_menu_record(g) for g in ctx.catalog])
    model_list = _cached(api.list_models)

    @app.get("/api/health", tags=["meta"])
    async def health() -> JSONResponse:
        """Liveness: the version running."""
        return _answer({"status": "ok", "version": __version__})

    @app.get("/api/gpus", tags=["catalog"], responses=ERRORS)
    async def gpus(
        min_memory_gb: Annotated[
            float | None, Query(ge=0, le=1e6, description="At least this much memory (GB).")
        ] = None,
        dtype: Annotated[
            str | None, Query(max_length=16, description="Has native tensor cores for this precision.")
        ] = None,
        vendor: Annotated[str | None, Query(max_length=40)] = None,
        multi_node: Annotated[bool | None, Query()] = None,
        graphics: Annotated[bool | None, Query()] = None,
    ) -> JSONResponse:  # async: a filter over ~70 catalog rows takes well under a millisecond
        """The GPU catalog (`gpuplan gpus --json`), optionally filtered."""
        if all(v is None for v in (min_memory_gb, dtype, vendor, multi_node, graphics)):
            return _answer(list(gpu_records()))
        chosen = api.list_gpus(
            min_memory_gb=min_memory_gb, dtype=dtype, vendor=vendor, multi_node=multi_node, graphics=graphics,
            ctx=ctx,
        )  # fmt: skip
        return _answer([api.gpu_record(g) for g in chosen])

    @app.get("/api/gpu-menu", tags=["catalog"])
    async def gpu_menu_list() -> JSONResponse:
        """The catalog in brief, for a GPU menu: each GPU's name, vendor, memory (bytes) and
        whether it has a graphics mode (a few KB where `/api/gpus` is over 500 KB)."""
        return _answer(list(gpu_menu()))

    @app.get("/api/gpus/{name}", tags=["catalog"], responses={404: {"model": ErrorOut}, **ERRORS})
    async def gpu(name: str) -> JSONResponse:
        """One GPU (`gpuplan gpus NAME --json`); aliases and case-insensitive names work."""
        try:
            return _answer(api.gpu_record(api.get_gpu(name, ctx)))
        except UnknownNameError as exc:
            raise HTTPException(404, str(exc)) from None

    @app.get("/api/models", tags=["models"])
    async def models() -> JSONResponse:
        """The bundled model presets with their parameter counts (`gpuplan models --json`)."""
        return _answer(list(model_list()))

    @app.get("/api/models/{name:path}", tags=["models"], responses={404: {"model": ErrorOut}, **ERRORS})
    async def model(name: str, seq_len: Annotated[int | None, Query(ge=1, le=10_000_000)] = None) -> Response:
        """A preset or hub id (`gpuplan model NAME --json`): parameters, shapes, KV cache, FLOPs."""
        try:
            return await pool.run(lambda: _answer(api.model_record(api.get_model(name, files=False), seq_len)))
        except UnknownNameError as exc:
            raise HTTPException(404, str(exc)) from None

    @app.get("/api/charts/relative", tags=["charts"])
    async def chart_relative() -> JSONResponse:
        """Each GPU's speed relative to the H100 SXM on three reference workloads (`gpuplan chart relative`)."""
        return _answer(dict(relative()))


def _compute_routes(app: FastAPI, computer: Computer, pool: _Pool) -> None:
    """The endpoints that compute: admitted by the bounded pool (its queue limit and time budget),
    answered from the cache or computed in a worker process (web_compute.py)."""

    @app.post("/api/model", tags=["models"], responses=ERRORS)
    async def inspect_model(body: ModelIn) -> Response:
        """A pasted config.json read as `gpuplan model --json` reads a file."""
        return await pool.run(
            lambda: _answer(api.model_record(api.model_from_json(body.config, body.name), body.seq_len))
        )

    def computed(kind: str, body: WorkloadIn) -> Callable[[], Response]:
        payload = body.model_dump(exclude_unset=True)  # the keys the request set, as validated
        return lambda: Response(computer.answer(kind, payload), media_type="application/json")

    @app.post("/api/estimate", tags=["plan"], responses=ERRORS)
    async def estimate(body: WorkloadIn) -> Response:
        """Memory, time, cost and energy of one workload on its GPU (`gpuplan estimate --json`)."""
        return await pool.run(computed("estimate", body))

    @app.post("/api/fit", tags=["plan"], responses=ERRORS)
    async def fit(body: WorkloadIn) -> Response:
        """Whether it fits (`gpuplan fit --json`): with `gpu`, the breakdown and what would make it fit;
        without, every catalog GPU with its memory breakdown and the fewest GPUs of that type."""
        return await pool.run(computed("fit", body))

    @app.post("/api/plan", tags=["plan"], responses=ERRORS)
    async def plan(body: PlanIn) -> Response:
        """Ranked GPU options with reasons and the time-cost Pareto front (`gpuplan plan --json`);
        with a `cluster`, the best parallel layouts of a training job on it."""
        return await pool.run(computed("plan", body), large=body.cluster is not None)

    @app.post("/api/roofline", tags=["plan"], responses=ERRORS)
    async def roofline(body: WorkloadIn) -> Response:
        """The workload's operators on its GPU's roofline: intensity against achieved FLOP/s."""
        return await pool.run(computed("roofline", body))


def create_app(
    catalog_files: Sequence[str | Path] = (),
    price_file: str | Path | None = None,
    trusted_hosts: Iterable[str] | None = None,
    *,
    compute_threads: int = COMPUTE_THREADS,
    max_queued: int = MAX_QUEUED,
    request_budget_s: float = REQUEST_BUDGET_S,
    body_timeout_s: float = BODY_TIMEOUT_S,
    processes: int | None = None,
    shared_cache_dir: str | None = None,
) -> FastAPI:
    """The web app. `catalog_files` and `price_file` as the CLI's --catalog and --prices;
    `trusted_hosts`: the Host names it answers (None: any, for a server bound to loopback only);
    `processes`: worker processes that compute (default: one per CPU; 0 computes in the threads)."""
    # read once: a malformed user catalog or price file fails here, at start-up, in one line (exit
    # 2), not on every request; every request then plans with this one context
    ctx = Context.of(catalog_files, price_file).check()
    pool = _Pool(compute_threads, max_queued, request_budget_s)
    files = [str(f) for f in catalog_files]
    prices = str(price_file) if price_file is not None else None
    computer = Computer(ctx, files, prices, pool_size() if processes is None else processes, shared_cache_dir)
    relative = _cached(lambda: api.chart_relative(ctx))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(relative)  # the one costly reference answer, computed before serving
        await anyio.to_thread.run_sync(computer.warm)  # worker processes started, each with the catalog read
        yield
        await anyio.to_thread.run_sync(computer.close)  # and stopped with the app

    app = FastAPI(
        lifespan=lifespan,
        title="gpuplan",
        version=__version__,
        summary="What can I run, on which GPU, how fast and at what cost.",
        description="The JSON API of gpuplan's web app: the same library as the `gpuplan` command, "
        "whose `--json` output each endpoint returns. SI units: bytes, seconds, FLOP/s, USD.",
        docs_url=None,  # FastAPI's docs pages load their scripts from a CDN: not offline; the schema is served
        redoc_url=None,
    )
    app.add_middleware(GuardMiddleware, body_timeout_s=body_timeout_s)
    app.add_middleware(GZipMiddleware, minimum_size=GZIP_MIN_BYTES, compresslevel=GZIP_LEVEL)
    if trusted_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(trusted_hosts))
    _install_error_handlers(app)
    _catalog_routes(app, ctx, pool, relative)
    _compute_routes(app, computer, pool)

    @app.get("/", include_in_schema=False)
    async def index() -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-cache"})

    app.mount("/static", _StaticFiles(directory=STATIC), name="static")
    return app


class _StaticFiles(StaticFiles):
    """The page's files: vendored ones cached for a day, the page's own revalidated (ETag) on every load."""

    def file_response(self, full_path: Any, *args: Any, **kwargs: Any) -> StarletteResponse:
        response = super().file_response(full_path, *args, **kwargs)
        vendored = Path(str(full_path)).parent.name == "vendor"
        response.headers["cache-control"] = f"public, max-age={VENDOR_MAX_AGE_S}" if vendored else "no-cache"
        return response


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS or host.startswith("127.")


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on the request head: uvicorn closes idle kept-alive
    connections (timeout_keep_alive) but holds a connection that opened and sent nothing, or half a
    request line, forever. Here a connection whose request line and headers are not all in within
    HEADER_TIMEOUT_S of it opening (or of the last response) is closed. A module-level class, so
    that `serve --workers N` can hand it to its worker processes."""

    _head_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._head_timeout)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
            self.transport.close()  # no request under way: a silent or too-slow client

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm()  # a whole request head arrived

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def _uvicorn_limits() -> dict[str, Any]:
    """The connection limits every `serve` uses, one process or many."""
    return {
        "http": GuardedH11Protocol,
        "limit_concurrency": LIMIT_CONCURRENCY,
        "timeout_keep_alive": KEEP_ALIVE_S,
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
        "backlog": BACKLOG,
    }


SERVE_ENV: Final = "GPUPLAN_SERVE_SETTINGS"  # how `serve` hands its settings to worker processes


def app_from_env() -> FastAPI:
    """The app of one uvicorn worker process (`serve --workers N`), from the settings `serve` put
    in the environment."""
    settings = json.loads(os.environ.get(SERVE_ENV, "{}"))
    return create_app(
        settings.get("catalog_files", ()), settings.get("price_file"), settings.get("trusted_hosts"),
        processes=pool_size(settings.get("workers", 1)),  # the machine's CPUs shared among the server's processes
        shared_cache_dir=settings.get("cache_dir"),  # the answers all of them computed
    )  # fmt: skip


def check_serve_options(port: int, workers: int) -> None:
    """One InvalidSettingError line for a TCP port (1-65535) or a worker count (1-256) that cannot
    serve; `gpuplan serve` calls it before its banner, so a bad value is the only line printed."""
    if not 0 < port < 65536:
        raise InvalidSettingError(f"The 'port' parameter must be 1-65535. Got {port}.")
    if not 1 <= workers <= 256:
        raise InvalidSettingError(f"The 'workers' parameter must be 1-256. Got {workers}.")


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    catalog_files: Sequence[str | Path] = (),
    price_file: str | Path | None = None,
    workers: int = 1,
    log_level: str = "info",
) -> None:
    """Run the app with uvicorn until interrupted. On loopback it answers loopback names only.
    `workers` processes share the port (each computes on its own core)."""
    import socket

    import uvicorn

    check_serve_options(port, workers)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:  # a clear line, not uvicorn's log, if taken
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            raise InvalidSettingError(
                f"Cannot listen on {host}:{port}: {exc.strerror or exc}. Pick another port with --port."
            ) from None
    trusted = list(LOOPBACK_HOSTS) if is_loopback(host) else None
    files = [str(Path(f).resolve()) for f in catalog_files]
    prices = str(Path(price_file).resolve()) if price_file else None
    if workers == 1:
        uvicorn.run(
            create_app(files, prices, trusted), host=host.strip("[]"), port=port, log_level=log_level,
            **_uvicorn_limits(),
        )  # fmt: skip
        return
    Context.of(files, prices).check()  # a malformed catalog or price file fails here, in one line, not per worker
    import shutil
    import tempfile

    shared = tempfile.mkdtemp(prefix="gpuplan-answers-")  # private (0700), removed at the end
    os.environ[SERVE_ENV] = json.dumps(
        {
            "catalog_files": files,
            "price_file": prices,
            "trusted_hosts": trusted,
            "workers": workers,
            "cache_dir": shared,
        }
    )
    try:
        uvicorn.run(
            "gpuplan.interfaces.web:app_from_env", factory=True, workers=workers, host=host.strip("[]"), port=port,
            log_level=log_level, **_uvicorn_limits(),
        )  # fmt: skip
    finally:
        shutil.rmtree(shared, ignore_errors=True)
