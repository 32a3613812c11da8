"""End to end in a real headless Chromium (Debian's, driven by Playwright): the page served by a
real `gpuplan serve` picks a model and GPU like a user, and every figure it shows equals the JSON
API's answer for the same workload. The page must load nothing from the internet (its CSP allows
only its own origin) and log no errors."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from gpuplan.specs.models import find_preset, preset_config
from helpers.web_server import chromium, served

GIB = 2**30
TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with served() as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    exe = chromium()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    # a test of bad input expects the API's 4xx answers (Chromium logs each); otherwise any is a fault
    expected_4xx = request.node.get_closest_marker("bad_input") is not None
    pg.on(
        "console",
        lambda m: (
            errors.append(m.text)
            if m.type == "error" and not (expected_4xx and "responded with a status of 4" in m.text)
            else None
        ),
    )
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("request", lambda r: errors.append(f"left the machine: {r.url}") if "127.0.0.1" not in r.url else None)
    yield pg
    pg.close()
    assert not errors, errors


def finished(page: Page, run: int) -> None:
    page.wait_for_selector(f"body[data-state=done][data-run='{run}']", state="attached", timeout=TIMEOUT_MS)


def raw(value: str) -> Any:
    return json.loads(value)


def api(base_url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(f"{base_url}{path}", json=body, timeout=60)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def dig(rec: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        rec = rec[part]
    return rec


def shown_estimate(page: Page) -> dict[str, Any]:
    return {
        str(c.get_attribute("data-key")): raw(c.get_attribute("data-raw") or "null")
        for c in page.query_selector_all("#estimate [data-key]")
    }


def check_page_equals_api(page: Page, base_url: str, workload: dict[str, Any]) -> None:
    """Every figure the page shows, against the API's answer for `workload`."""
    est = api(base_url, "/api/estimate", workload)
    cards = shown_estimate(page)
    assert len(cards) >= 7, cards
    for key, value in cards.items():
        assert value == dig(est, key), key
    # the formatting matches the raw value (GiB with two decimals, as the CLI)
    mem = page.inner_text("#estimate [data-key='memory.per_gpu_bytes'] dd")
    assert mem.startswith(f"{est['memory']['per_gpu_bytes'] / GIB:.2f} GiB"), mem
    lines = page.query_selector_all("#breakdown-table tr[data-line]")
    assert [ln.get_attribute("data-line") for ln in lines] == [x["name"] for x in est["memory"]["lines"]]

    no_gpu = {k: v for k, v in workload.items() if k != "gpu"}
    plan = api(base_url, "/api/plan", no_gpu)
    rows = page.query_selector_all("#plan-table tbody tr")
    assert len(rows) == len(plan["options"]) > 0
    for row, opt in zip(rows, plan["options"], strict=True):
        assert row.get_attribute("data-gpu") == opt["gpu"]
        assert int(row.get_attribute("data-n") or 0) == opt["num_gpus"]
        for field in ("time_s", "throughput", "cost_usd"):
            cell = row.query_selector(f"td[data-field={field}]")
            assert cell is not None and raw(cell.get_attribute("data-raw") or "null") == opt[field], field
    assert sum("★" in (r.query_selector("td") or r).inner_text() for r in rows) == sum(
        o["pareto"] for o in plan["options"]
    )

    fit = api(base_url, "/api/fit", no_gpu)
    rows = page.query_selector_all("#fit-table tbody tr")
    assert [r.get_attribute("data-gpu") for r in rows] == [g["gpu"] for g in fit["gpus"]]
    for row, g in zip(rows, fit["gpus"], strict=True):
        for field in ("per_gpu_bytes", "fits", "min_gpus"):
            cell = row.query_selector(f"td[data-field={field}]")
            assert cell is not None and raw(cell.get_attribute("data-raw") or "null") == g[field], (g["gpu"], field)

    # every chart is drawn: Plotly's SVG, with as many series as the data has
    for chart in ("chart-pareto", "chart-memory", "chart-roofline", "chart-relative"):
        assert page.query_selector(f"#{chart} svg.main-svg") is not None, chart
    parts = {k for g in fit["gpus"] for k in g["breakdown"]}
    assert len(page.query_selector_all("#chart-memory g.trace.bars")) == len(parts)
    assert len(page.query_selector_all("#chart-relative g.trace.bars")) == 3
    roof = api(base_url, "/api/roofline", workload)
    groups = {(p["stage"], p["phase"]) for p in roof["points"]}
    assert len(page.query_selector_all("#chart-roofline g.trace.scatter")) == 1 + len(groups)


def plan_in_page(page: Page, base_url: str, fill: dict[str, str], select: dict[str, str]) -> None:
    """As a user: open the page, pick options and type values, press Plan, wait for the answer."""
    page.goto(base_url)
    page.wait_for_selector("body[data-state=ready]", state="attached", timeout=TIMEOUT_MS)
    if "config" in fill:
        page.click("#config-box summary")  # the paste box is folded away
    for field, value in select.items():
        page.select_option(f"#{field}", value)
    for field, value in fill.items():
        page.fill(f"#{field}", value)
    page.click("#run")
    finished(page, 1)
    assert page.is_hidden("#error"), page.inner_text("#error")


def test_pick_a_model_and_gpu_and_the_numbers_equal_the_api(page: Page, base_url: str, browser: Browser) -> None:
    plan_in_page(page, base_url, {"model": "llama-3.1-8b", "batch_size": "2", "tokens": "5e7"},
                 {"task": "lora", "gpu": "A100 SXM4 80GB"})  # fmt: skip
    assert page.locator("#gpu option").count() > 20  # the catalog, from /api/gpus
    page.wait_for_selector("#model-info:has-text('llama-3.1-8b: 8.03B parameters')", timeout=TIMEOUT_MS)
    workload = {"model": "llama-3.1-8b", "task": "lora", "gpu": "A100 SXM4 80GB", "batch_size": 2, "tokens": 5e7}
    check_page_equals_api(page, base_url, workload)
    assert math.isclose(shown_estimate(page)["cost.usd"], api(base_url, "/api/estimate", workload)["cost"]["usd"])

    # the state lives in the URL: the link alone reproduces the plan
    query = parse_qs(urlparse(page.url).query)
    assert query["model"] == ["llama-3.1-8b"] and query["task"] == ["lora"] and query["gpu"] == ["A100 SXM4 80GB"]
    first = shown_estimate(page)
    shared = browser.new_page()  # a fresh page, as someone who was sent the link
    shared.goto(page.url)
    finished(shared, 1)
    assert shown_estimate(shared) == first
    shared.close()


def test_a_pasted_config_json(page: Page, base_url: str) -> None:
    preset = find_preset("qwen2.5-7b")
    assert preset is not None
    config = {**preset_config(preset), "_name_or_path": "my-org/my-qwen"}
    plan_in_page(page, base_url, {"config": json.dumps(config), "batch_size": "8"}, {"task": "inference", "gpu": "L4"})
    page.wait_for_selector("#model-info:has-text('my-org/my-qwen')", timeout=TIMEOUT_MS)
    check_page_equals_api(page, base_url, {"config": config, "task": "inference", "gpu": "L4", "batch_size": 8})
    assert "#config=" in page.url  # a pasted model travels in the link too


def test_a_cnn_shows_images_not_tokens(page: Page, base_url: str) -> None:
    page.goto(f"{base_url}/?model=resnet-50&task=inference&gpu=T4&batch_size=64")
    finished(page, 1)
    assert page.is_hidden("#error"), page.inner_text("#error")
    est = api(base_url, "/api/estimate", {"model": "resnet-50", "task": "inference", "gpu": "T4", "batch_size": 64})
    cards = shown_estimate(page)
    for key, value in cards.items():
        assert value == dig(est, key), key
    rate = page.inner_text("#estimate [data-key='time.output_tokens_per_s']")
    assert "images/s" in rate and "img/s" in rate and "tok" not in rate
    assert "time.tpot_s" not in cards  # no decode steps


def test_a_cluster_plan_shows_the_best_layout(page: Page, base_url: str) -> None:
    query = "model=llama-3.1-70b&task=pretrain&cluster=4x8:H100&tokens=1e10&batch_size=1&seq_len=4096"
    page.goto(f"{base_url}/?{query}")
    finished(page, 1)
    assert page.is_hidden("#error")
    workload = {"model": "llama-3.1-70b", "task": "pretrain", "cluster": "4x8:H100", "tokens": 1e10,
                "batch_size": 1, "seq_len": 4096}  # fmt: skip
    plan = api(base_url, "/api/plan", workload)
    rows = page.query_selector_all("#plan-table tbody tr")
    assert [r.get_attribute("data-layout") for r in rows] == [x["layout"] for x in plan["layouts"]]
    best = plan["layouts"][0]
    assert plan["layouts"][0]["layout"] in page.inner_text("#estimate-gpu")
    # the estimate shown is the best layout's, which reproduces the search's figures
    est = api(base_url, "/api/estimate", {**workload, **best["keys"], "global_batch": plan["global_batch"]})
    cards = shown_estimate(page)
    for key, value in cards.items():
        assert value == dig(est, key), key
    assert cards["time.step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)
    assert cards["memory.per_gpu_bytes"] == pytest.approx(best["per_gpu_bytes"], rel=1e-9)
    assert page.is_hidden("#chart-pareto")  # one cluster: cost is proportional to time


@pytest.mark.bad_input
def test_bad_input_shows_the_api_message(page: Page, base_url: str) -> None:
    page.goto(f"{base_url}/?model=no-such-model&task=inference")
    finished(page, 1)
    message = page.inner_text("#error")
    r = httpx.post(f"{base_url}/api/estimate", json={"model": "no-such-model", "task": "inference"}, timeout=30)
    assert r.status_code == 422 and r.json()["detail"] in message
