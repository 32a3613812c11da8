"""The web app's JSON API (gpuplan.interfaces.web), in-process through FastAPI's test client:
every endpoint answers what the library API (and so the CLI's --json) answers, bad input gets a
4xx with one line, and the server reads no file a request names."""

from __future__ import annotations

import hashlib
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from conftest import RunCli
from gpuplan.interfaces import api, web
from gpuplan.planner.recommend import pareto_front
from gpuplan.specs import frameworks
from gpuplan.specs.models import find_preset, preset_config
from gpuplan.specs.workload import make_workload

LORA = {"model": "llama-3.1-8b", "task": "lora", "gpu": "A100 SXM4 80GB", "batch_size": 2, "tokens": 5e7}
SERVE = {"model": "llama-3.1-8b", "task": "inference", "gpu": "L40S", "batch_size": 16, "input_len": 1024}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(web.create_app()) as c:
        yield c


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # hub ids resolve from the cache only: no network in tests


def same(a: Any, b: Any) -> None:
    """Equal after the JSON round trip the HTTP answer went through."""
    assert json.loads(json.dumps(a)) == json.loads(json.dumps(b))


# --- answers equal the library's ----------------------------------------------------------------


def test_estimate_equals_the_library(client: TestClient) -> None:
    for body in (LORA, SERVE):
        r = client.post("/api/estimate", json=body)
        assert r.status_code == 200, r.text
        same(r.json(), api.estimate(make_workload(body)).to_dict())
    # the figures DESIGN.md's contract names are there
    rec = client.post("/api/estimate", json=LORA).json()
    assert rec["memory"]["fits"] is True and rec["time"]["mfu"] > 0 and rec["cost"]["usd"] > 0


def test_fit_lists_every_gpu_with_its_breakdown(client: TestClient) -> None:
    body = {k: v for k, v in LORA.items() if k != "gpu"}
    rec = client.post("/api/fit", json=body).json()
    same(rec, api.fit(make_workload(body)).to_dict())
    assert {g["gpu"] for g in rec["gpus"]} == {g.name for g in api.catalog()}
    for g in rec["gpus"]:
        # the stacked bar's terms add up to the figure the table shows (1e-9 relative)
        assert sum(g["breakdown"].values()) == pytest.approx(g["per_gpu_bytes"], rel=1e-9)


def test_plan_marks_the_pareto_front(client: TestClient) -> None:
    rec = client.post("/api/plan", json={k: v for k, v in LORA.items() if k != "gpu"}).json()
    pts = [(o["time_s"], o["cost_usd"], o["pareto"]) for o in rec["options"] if o["usable"] and o["cost_usd"]]
    front = [(t, c) for t, c, on in pts if on]
    assert front, "a priced, fitting LoRA job has a front"
    for t, c, on in pts:
        dominated = any(t2 <= t and c2 <= c and (t2, c2) != (t, c) for t2, c2, _ in pts)
        assert on == (not dominated), (t, c, on)
    # unusable or unpriced options are never on it
    assert not any(o["pareto"] for o in rec["options"] if not o["usable"] or o["cost_usd"] is None)


@given(
    st.lists(
        st.one_of(
            st.none(),
            st.tuples(st.floats(0, 1e6), st.floats(0, 1e6)),
            st.tuples(st.integers(0, 4).map(float), st.integers(0, 4).map(float)),  # ties in time, cost or both
        ),
        max_size=30,
    )
)
def test_pareto_front_is_the_set_of_undominated_points(points: list[tuple[float, float] | None]) -> None:
    on = pareto_front(points)
    valid = [p for p in points if p is not None]
    for p, flag in zip(points, on, strict=True):
        if p is None:
            assert not flag
            continue
        dominated = any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in valid)
        assert flag == (not dominated)
    if valid:  # the fastest of the cheapest is always on it
        assert on[points.index(min(valid, key=lambda q: (q[1], q[0])))]


def test_a_serving_plan_prices_output_tokens_within_the_latency_target(client: TestClient) -> None:
    gpus = ["L40S", "A40", "H100 SXM5 80GB"]
    body = {**SERVE, "max_tpot_ms": 30, "gpus": gpus}
    rec = client.post("/api/plan", json=body).json()
    w = make_workload({k: v for k, v in body.items() if k != "gpus"})
    same(rec, api.plan(w, gpus=gpus).to_dict())
    fitting = [o for o in rec["options"] if o["fits"]]
    assert fitting and all(o["serving"] is not None for o in fitting)
    for o in fitting:
        s = o["serving"]
        if s["batch"] is None:
            assert s["limited_by"].startswith("no batch meets"), s
            continue
        # the batch quoted meets the target, and its $/Mtok is the hour's price over the hour's tokens (1e-9)
        assert s["tpot_s"] <= 0.030 and s["batch"] >= 1
        assert s["usd_per_million_tokens"] == pytest.approx(
            o["usd_per_hour"] / (s["tokens_per_s"] * 3600) * 1e6, rel=1e-9
        )
    # the page's estimate shows a missed target in its verdict; fit (memory only) refuses a target in one line
    miss = client.post("/api/estimate", json={**SERVE, "max_tpot_ms": 1}).json()["verdict"]["notes"]
    assert len(miss) == 1 and re.fullmatch(
        r"misses its latency target max_tpot_ms=1 \(batch 16 takes .* ms/token\)", miss[0]
    )
    r = client.post("/api/fit", json={**SERVE, "max_tpot_ms": 30})
    assert r.status_code == 422 and r.json()["detail"].startswith(
        "fit answers memory only and does not read max_tpot_ms"
    )


def test_a_framework_fills_the_keys_a_training_request_leaves_unset(client: TestClient) -> None:
    rec = client.post("/api/estimate", json={**LORA, "framework": "unsloth"}).json()
    same(rec, api.estimate(make_workload({**LORA, "framework": "unsloth"})).to_dict())
    assert rec["workload"]["activation_checkpointing"] == "full" and rec["workload"]["optimizer"] == "adamw-8bit"
    # a key the request sets wins over the framework's
    mine = client.post(
        "/api/estimate", json={**LORA, "framework": "unsloth", "activation_checkpointing": "none"}
    ).json()
    assert mine["workload"]["activation_checkpointing"] == "none"
    assert mine["memory"]["per_gpu_bytes"] > rec["memory"]["per_gpu_bytes"]


def test_the_page_offers_the_librarys_frameworks() -> None:
    html = (web.STATIC / "index.html").read_text()
    menu = re.search(r'<select id="framework" name="framework">(.*?)</select>', html, re.S)
    assert menu is not None
    assert re.findall(r"<option(?: value=\"\")?>([^<]*)</option>", menu.group(1)) == ["—", *frameworks.names()]


def test_roofline_points_never_beat_the_roof(client: TestClient) -> None:
    for body in (LORA, SERVE, {**SERVE, "gpu": "T4", "weight_dtype": "awq"}, {**LORA, "gpu": "V100"}):
        rec = client.post("/api/roofline", json=body).json()
        same(rec, api.roofline(make_workload(body)))
        assert rec["ridge_flop_per_byte"] == pytest.approx(rec["peak_flop_per_s"] / rec["memory_bandwidth_bytes_per_s"])
        assert rec["points"]
        for p in rec["points"]:
            assert p["intensity_flop_per_byte"] == pytest.approx(p["flops"] / p["bytes"])
            roof = min(rec["peak_flop_per_s"], p["intensity_flop_per_byte"] * rec["memory_bandwidth_bytes_per_s"])
            assert p["roof_flop_per_s"] == pytest.approx(roof)
            # the estimate runs each operator at an efficiency <= 1 under its roof (Williams et al. 2009)
            assert p["achieved_flop_per_s"] <= p["roof_flop_per_s"] * (1 + 1e-9), p
    # T4 has no BF16 tensor cores: the estimate times bf16 as fp16, and so does the roof
    t4 = client.post("/api/roofline", json={**SERVE, "gpu": "T4"}).json()
    assert t4["peak_runs_as"] == "fp16" and t4["peak_flop_per_s"] == pytest.approx(65e12, rel=0.01)


def test_catalog_models_and_chart_equal_the_library(client: TestClient) -> None:
    same(client.get("/api/gpus").json(), [api.gpu_record(g) for g in api.catalog()])
    same(
        client.get("/api/gpus?min_memory_gb=100").json(), [api.gpu_record(g) for g in api.list_gpus(min_memory_gb=100)]
    )
    assert client.get("/api/gpus/h100").json()["name"] == "H100 SXM5 80GB"  # alias, any case
    same(client.get("/api/models").json(), api.list_models())
    same(client.get("/api/models/llama-3.1-8b").json(), api.model_record(api.get_model("llama-3.1-8b")))
    same(client.get("/api/charts/relative").json(), api.chart_relative())


def test_a_pasted_config_is_the_same_model_as_its_preset(client: TestClient) -> None:
    preset = find_preset("qwen2.5-7b")
    assert preset is not None
    config = preset_config(preset)
    rec = client.post("/api/model", json={"config": config, "name": "mine"}).json()
    assert rec["name"] == "mine"
    assert rec["total_params"] == api.get_model("qwen2.5-7b").total_params == 7_615_616_512  # Qwen2.5-7B model card
    body = {**SERVE, "model": "qwen2.5-7b"}
    pasted = client.post("/api/estimate", json={**body, "model": "mine", "config": config}).json()
    named = client.post("/api/estimate", json=body).json()
    assert pasted["model"] == "mine"
    assert pasted["memory"]["per_gpu_bytes"] == named["memory"]["per_gpu_bytes"]
    assert pasted["time"]["tpot_s"] == named["time"]["tpot_s"]
    # with no name, the config's own _name_or_path names it
    anon = client.post("/api/estimate", json={**body, "model": None, "config": {**config, "_name_or_path": "org/x"}})
    assert anon.json()["model"] == "org/x"


def test_a_cluster_plan_searches_layouts(client: TestClient) -> None:
    body = {"model": "llama-3.1-8b", "task": "pretrain", "cluster": "2x8:H100", "global_batch": 256, "tokens": 1e10}
    rec = client.post("/api/plan", json={**body, "top": 3}).json()
    assert rec["mode"] == "cluster" and rec["cluster"]["num_gpus"] == 16
    assert 1 <= len(rec["layouts"]) <= 3 and rec["search"]["evaluated"] > 100


# --- bad input: 4xx with one line, never 5xx ------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "pattern"),
    [
        ({**LORA, "gpu": "A999"}, 422, r"Unknown GPU 'A999'"),
        ({**LORA, "batch_size": 0}, 422, r"'batch_size' key: .*greater than or equal to 1\. Got 0\."),
        ({**LORA, "bogus": 1}, 422, r"Unknown workload key 'bogus'"),
        # a key the task ignores is refused, as the CLI refuses it (the page sends only the task's fields)
        ({**LORA, "input_len": 512}, 422, r"'input_len' key is read only by inference jobs; .* task is lora"),
        ({**SERVE, "seq_len": 4096}, 422, r"'seq_len' key is read only by training .*task is inference"),
        ({"task": "streaming", "streams": 4, "lora_rank": 8}, 422, r"'lora_rank' key is read only by adapter"),
        ({**LORA, "tp": 3}, 422, r"num_gpus=1 must be a multiple of tp"),
        # the page shows the latency targets for inference only and the framework for training only
        ({**LORA, "max_tpot_ms": 50}, 422, r"'max_tpot_ms' key is read only by inference jobs; .* task is lora"),
        ({**SERVE, "framework": "unsloth"}, 422, r"'framework' key is read only by training .*task is inference"),
        ({**LORA, "framework": "nemo2"}, 422, r"'framework' key: must be one of megatron, nemo, .*Got 'nemo2'"),
        ({**LORA, "deadline": {}}, 422, r"'deadline' key: expected a duration"),
        ({**LORA, "model": "no-such-model"}, 422, r"Unknown model 'no-such-model'"),
        ({**LORA, "model": "org/not-cached"}, 422, r"not in the local Hugging Face cache"),
        ({**LORA, "config": {"model_type": "weird"}}, 422, r"model_type 'weird' is not supported"),
        ({**LORA, "config": {"model_type": "llama"}}, 422, r"config"),
        ([1, 2], 422, r"must be a JSON object"),
    ],
)
def test_bad_workloads_get_one_clear_line(client: TestClient, body: Any, status: int, pattern: str) -> None:
    r = client.post("/api/estimate", json=body)
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and "Traceback" not in detail
    assert re.search(pattern, detail), detail


def test_malformed_and_oversized_bodies(client: TestClient) -> None:
    r = client.post("/api/plan", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["detail"].startswith("The request body is not valid JSON")
    assert client.post("/api/plan").status_code == 422
    big = b" " * (web.MAX_BODY_BYTES + 1)
    r = client.post("/api/estimate", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "over the limit" in r.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        for _ in range(3):
            yield b" " * (web.MAX_BODY_BYTES // 2 + 1)

    r = client.post("/api/estimate", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_the_server_reads_no_file_a_request_names(client: TestClient, tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(preset_config(find_preset("gpt2"))))  # type: ignore[arg-type]
    for name in (str(cfg), str(tmp_path), "/etc/passwd", "../config.json", "x" * 5000):
        r = client.post("/api/estimate", json={**SERVE, "model": name})
        assert r.status_code == 422, (name, r.text)
        assert "paste" in r.json()["detail"] or "Unknown model" in r.json()["detail"]
        assert client.get(f"/api/models/{name.lstrip('/')}").status_code == 404


def test_unknown_names_in_paths_are_404(client: TestClient) -> None:
    r = client.get("/api/gpus/zz-not-a-gpu")
    assert r.status_code == 404 and r.json()["detail"].startswith("Unknown GPU")
    assert client.get("/api/models/zz-not-a-model").status_code == 404
    r = client.get("/api/gpus?dtype=fp7")
    assert r.status_code == 422 and "'dtype' filter" in r.json()["detail"]


def test_only_loopback_host_names_when_serving_loopback() -> None:
    app = web.create_app(trusted_hosts=web.LOOPBACK_HOSTS)
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        assert c.get("/api/health").status_code == 200
    with TestClient(app, base_url="http://attacker.example") as c:  # DNS rebinding
        assert c.get("/api/health").status_code == 400


# --- the page and its files ---------------------------------------------------------------------


def test_page_and_vendored_chart_library_are_served_locally(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    scripts = re.findall(r'<script src="([^"]+)"', r.text)
    assert scripts == ["/static/vendor/plotly-basic.min.js", "/static/render.js", "/static/app.js"]
    assert "http" not in "".join(re.findall(r'(?:src|href)="([^"]+)"', r.text.split("<body>")[0]))  # nothing remote
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    for path in [*scripts, "/static/app.css", "/static/favicon.svg"]:
        assert client.get(path).status_code == 200, path
    # the vendored file is the npm release its README names, byte for byte
    readme = (web.STATIC / "vendor" / "README.md").read_text()
    sha = re.search(r"sha256 ([0-9a-f]{64})", readme)
    assert sha and hashlib.sha256(client.get(scripts[0]).content).hexdigest() == sha.group(1)


def test_responses_are_compressed_and_vendored_files_cached(client: TestClient) -> None:
    def fetch(path: str, encoding: str = "gzip") -> tuple[Any, int, int]:
        """The response, its bytes on the wire and its decoded length."""
        with client.stream("GET", path, headers={"accept-encoding": encoding}) as r:
            wire = b"".join(r.iter_raw())
        return r, len(wire), len(client.get(path).content)

    plotly, wire, size = fetch("/static/vendor/plotly-basic.min.js")
    assert plotly.headers["content-encoding"] == "gzip"
    assert size > 1_000_000 and wire < size / 3, (wire, size)  # 1.19 MB of minified JS gzips over 3x
    assert plotly.headers["cache-control"] == f"public, max-age={web.VENDOR_MAX_AGE_S}"
    assert "script-src 'self'" in plotly.headers["content-security-policy"]  # the guard's headers survive
    app, _, _ = fetch("/static/app.js")
    assert app.headers["cache-control"] == "no-cache" and app.headers["etag"]  # revalidated on every load
    gpus, wire, size = fetch("/api/gpus")
    assert gpus.headers["content-encoding"] == "gzip" and wire < size / 4, (wire, size)
    plain, wire, size = fetch("/api/gpus", "identity")
    assert "content-encoding" not in plain.headers and wire == size


def test_the_gpu_menu_is_the_catalog_in_brief(client: TestClient) -> None:
    menu = client.get("/api/gpu-menu")
    full = client.get("/api/gpus").json()
    assert [g["name"] for g in menu.json()] == [g["name"] for g in full]
    for brief, g in zip(menu.json(), full, strict=True):
        assert brief == {"name": g["name"], "vendor": g["vendor"], "memory_bytes": g["memory_bytes"],
                         "graphics": g["graphics"] != "none"}  # fmt: skip
    assert len(menu.content) * 50 < len(client.get("/api/gpus").content)  # a few KB against over 500 KB


def test_openapi_documents_the_api(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    for path, method in [
        ("/api/estimate", "post"),
        ("/api/plan", "post"),
        ("/api/gpus", "get"),
        ("/api/models", "get"),
    ]:
        assert method in doc["paths"][path]
    est = doc["paths"]["/api/estimate"]["post"]
    assert {"413", "422"} <= set(est["responses"])
    schema = doc["components"]["schemas"]["WorkloadIn"]["properties"]
    assert {"model", "task", "precision", "gpu", "num_gpus", "batch_size", "config"} <= set(schema)
    assert {"type": "string"} in schema["deadline"]["anyOf"]  # '24h' is accepted, and documented


# --- the command ------------------------------------------------------------------------------------


def test_serve_refuses_a_taken_port_in_one_line(run_cli: RunCli) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        code, _, err = run_cli("serve", "--port", str(port))
    assert code == 2
    assert f"Cannot listen on 127.0.0.1:{port}" in err and "--port" in err and "Traceback" not in err
    code, _, err = run_cli("serve", "--port", "70000")
    assert code == 2 and "'port' parameter must be 1-65535" in err
