"""End to end in a real headless Chromium (Debian's, driven by Playwright): the page served by a
real `gpuplan serve` picks a model and GPU like a user, and every figure it shows equals the JSON
API's answer for the same workload. The page must load nothing from the internet (its CSP allows
only its own origin) and log no errors."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import httpx
import pytest
from playwright.sync_api import Browser, Page, Response, ViewportSize, sync_playwright

from gpuplan.specs import frameworks
from gpuplan.specs.models import find_preset, preset_config
from gpuplan.specs.prices import OWN_POWER
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
    plan = api(base_url, "/api/plan", workload)
    check_plan_tables(page, plan)

    fit = api(base_url, "/api/fit", no_gpu)
    rows = page.query_selector_all("#fit-table tbody tr")
    assert [r.get_attribute("data-gpu") for r in rows] == [g["gpu"] for g in fit["gpus"]]
    for row, g in zip(rows, fit["gpus"], strict=True):
        for field in ("per_gpu_bytes", "fits", "min_gpus"):
            cell = row.query_selector(f"td[data-field={field}]")
            assert cell is not None and raw(cell.get_attribute("data-raw") or "null") == g[field], (g["gpu"], field)
        # an engine that preallocates its KV cache: what it reserves and the batch it runs at once, beside the need
        for field in ("reserved_bytes", "runs_at_once"):
            cell = row.query_selector(f"td[data-field={field}]")
            if "serving" not in g:
                assert cell is None, (g["gpu"], field)
            else:
                assert cell is not None and raw(cell.get_attribute("data-raw") or "null") == g["serving"][field]

    # every chart is drawn: Plotly's SVG, with as many series as the data has
    for chart in ("chart-pareto", "chart-memory", "chart-roofline", "chart-relative"):
        assert page.query_selector(f"#{chart} svg.main-svg") is not None, chart
    # the fit chart: horizontal bars, every GPU on it labelled, the GPUs on both sides of the line
    labelled = [t.text_content() or "" for t in page.query_selector_all("#chart-memory .ytick text")]
    by_name = {g["gpu"]: g for g in fit["gpus"]}
    shown = [by_name[n] for n in labelled]
    assert 2 <= len(shown) <= 17 and any(g["fits"] for g in shown) and any(not g["fits"] for g in shown)
    parts = {k for g in shown for k in g["breakdown"]}
    assert len(page.query_selector_all("#chart-memory g.trace.bars")) == len(parts)
    # every GPU of the relative chart is labelled; the roofline's legend names each group once
    rel = httpx.get(f"{base_url}/api/charts/relative", timeout=60).json()
    assert sorted(t.text_content() or "" for t in page.query_selector_all("#chart-relative .ytick text")) == sorted(
        r["gpu"] for r in rel["rows"]
    )
    assert len(page.query_selector_all("#chart-relative g.trace.bars")) == 3
    roof = api(base_url, "/api/roofline", workload)
    groups = {(p["stage"], p["phase"]) for p in roof["points"]}
    assert len(page.query_selector_all("#chart-roofline g.trace.scatter")) == 1 + len(groups)
    legend = [t.text_content() or "" for t in page.query_selector_all("#chart-roofline .legendtext")]
    assert not any(": " in t and t.split(": ")[0] == t.split(": ")[1] for t in legend), legend  # no "prefill: prefill"


def check_plan_tables(page: Page, plan: dict[str, Any]) -> None:
    """The plan as the page shows it: rentable (priced) options that fit first, ten until "show all",
    the unpriced apart, the chosen GPU marked, misses in their own column."""
    fitting = [o for o in plan["options"] if o["fits"]]
    priced = [o for o in fitting if o["usd_per_hour"] is not None]
    unpriced = [o for o in fitting if o["usd_per_hour"] is None]
    assert len(page.query_selector_all("#plan-table tbody tr")) == min(10, len(priced))
    if len(priced) > 10:
        page.click("#plan-more")
    rows = page.query_selector_all("#plan-table tbody tr")
    assert len(rows) == len(priced) > 0
    for table, options in (("plan-table", priced), ("unpriced-table", unpriced)):
        rows = page.query_selector_all(f"#{table} tbody tr")
        assert len(rows) == len(options)
        for row, opt in zip(rows, options, strict=True):
            assert row.get_attribute("data-gpu") == opt["gpu"]
            assert int(row.get_attribute("data-n") or 0) == opt["num_gpus"]
            for field in ("time_s", "throughput", "cost_usd"):
                cell = row.query_selector(f"td[data-field={field}]")
                assert cell is not None and raw(cell.get_attribute("data-raw") or "null") == opt[field], field
            # a row folds in the cards with its very figures (`same_as`), named in its GPU cell
            same_as = opt.get("same_as") or []
            mine = plan["chosen_gpu"] in (opt["gpu"], *same_as)
            assert ("chosen" in (row.get_attribute("class") or "")) == mine
            assert ("(your pick)" in row.inner_text()) == mine  # no `have`: the workload's pick, not owned
            assert raw(row.get_attribute("data-same-as") or "null") == (same_as or None)
            gpu_cell = (row.query_selector("td:nth-child(2)") or row).text_content() or ""  # folded-away rows too
            assert (f"(= {', '.join(same_as)})" in gpu_cell) == bool(same_as), gpu_cell
            misses = (row.query_selector("td[data-field=misses]") or row).inner_text()
            assert ("deadline" in misses) == (opt["meets_deadline"] is False)
    stars = sum("★" in (r.query_selector("td") or r).inner_text() for r in page.query_selector_all("#plan-box tr"))
    assert stars == sum(o["pareto"] for o in plan["options"])


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


def test_a_batch_the_kv_cache_queues_shows_the_median_request(page: Page, base_url: str) -> None:
    """64 requests of 2,048 + 512 tokens at once on one L4, whose vLLM cache holds 8 of them: the
    cards are the median request's and the whole batch's, and say so."""
    body = {"model": "llama-3.1-8b", "task": "inference", "gpu": "L4", "batch_size": 64, "input_len": 2048,
            "output_len": 512}  # fmt: skip
    page.goto(f"{base_url}/?" + "&".join(f"{k}={v}" for k, v in body.items()))
    finished(page, 1)
    assert page.is_hidden("#error"), page.inner_text("#error")
    est = api(base_url, "/api/estimate", body)
    q = est["time"]["queue"]
    assert q is not None and q["held"] < q["requests"] == 64
    cards = shown_estimate(page)
    for key, value in cards.items():
        assert value == dig(est, key), key
    assert "median request" in page.inner_text("#estimate [data-key='time.ttft_s']")
    rate = page.inner_text("#estimate [data-key='time.output_tokens_per_s']")
    assert f"{q['held']} of 64 at once, {q['waves']} waves" in rate


def test_a_vllm_fit_table_shows_what_the_job_needs_and_what_vllm_reserves(page: Page, base_url: str) -> None:
    """The fit table of 64 requests of 2,048 + 512 tokens on vLLM: "needs per GPU" is the job's (the
    weights, activations and the whole batch's KV, the same on every 24 GiB card), vLLM's 0.9 of the
    card a column of its own, and an L4 runs 8 of the 64 at once while the rest wait."""
    body = {"model": "llama-3.1-8b", "task": "inference", "gpu": "L4", "batch_size": 64, "input_len": 2048,
            "output_len": 512}  # fmt: skip
    page.goto(f"{base_url}/?" + "&".join(f"{k}={v}" for k, v in body.items()))
    finished(page, 1)
    assert page.is_hidden("#error"), page.inner_text("#error")
    fit = api(base_url, "/api/fit", {k: v for k, v in body.items() if k != "gpu"})
    heads = [h.inner_text() for h in page.query_selector_all("#fit-table thead th")]
    assert heads == [
        "GPU",
        "memory",
        "needs per GPU",
        "vLLM reserves",
        "fits on 1",
        "runs at once",
        "fewest GPUs",
        "layout",
    ]
    by_name = {g["gpu"]: g for g in fit["gpus"]}
    l4, a10 = by_name["L4"], by_name["A10"]
    assert l4["per_gpu_bytes"] == a10["per_gpu_bytes"] and l4["serving"]["reserved_bytes"] < l4["per_gpu_bytes"]
    row = page.query_selector("#fit-table tr[data-gpu='L4']")
    assert row is not None
    cells = [c.inner_text() for c in row.query_selector_all("td")]
    assert (
        cells[2] == f"{l4['per_gpu_bytes'] / GIB:.2f} GiB"
        and cells[3] == f"{l4['serving']['reserved_bytes'] / GIB:.2f} GiB"
    )
    assert cells[5] == "8 of 64 (56 wait)"
    l40 = page.query_selector("#fit-table tr[data-gpu='L40'] td[data-field=runs_at_once]")
    assert l40 is not None and l40.inner_text().startswith("all 64 (holds ")
    # the chart's bars are the need's terms: the batch's KV cache, not vLLM's pool
    assert "KV cache" in l4["breakdown"] and "KV cache (pool)" not in l4["breakdown"]
    assert "vLLM reserves gpu_memory_utilization 0.9 of each card" in page.inner_text("#fit-caption")


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
    # it fits with 0.2 GiB to spare, but the validation range reaches past the card: the answer says so
    m = est["memory"]
    assert est["verdict"]["fits"] and m["per_gpu_bytes_high"] > m["capacity_bytes"]
    assert page.is_visible("#tight") and f"{m['per_gpu_bytes_high'] / GIB:.2f} GiB" in page.inner_text("#tight")
    # every GPU's fit is of the best layout on as many GPUs as the cluster has
    assert page.inner_text("#fit-table thead").count("fits on 32") == 1
    h100 = page.query_selector("#fit-table tr[data-gpu='H100 SXM5 80GB'] td[data-field=per_gpu_bytes]")
    assert h100 is not None and raw(h100.get_attribute("data-raw") or "null") == pytest.approx(
        m["per_gpu_bytes"], rel=1e-9
    )


@pytest.mark.bad_input
def test_bad_input_shows_the_api_message(page: Page, base_url: str) -> None:
    page.goto(f"{base_url}/?model=no-such-model&task=inference")
    finished(page, 1)
    message = page.inner_text("#error")
    r = httpx.post(f"{base_url}/api/estimate", json={"model": "no-such-model", "task": "inference"}, timeout=30)
    assert r.status_code == 422 and r.json()["detail"] in message


# --- the answer first, on a laptop and on a phone -------------------------------------------------

LAPTOP: ViewportSize = {"width": 1440, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}
FITS = {"model": "llama-3.1-8b", "task": "lora", "gpu": "A100 SXM4 80GB", "batch_size": 2, "tokens": 5e7}
NO_FIT = {"model": "llama-3.1-8b", "task": "lora", "gpu": "GeForce RTX 4090"}
STREAMS = {"task": "streaming", "resolution": "4k", "fps": 60, "streams": 24, "codec": "hevc", "objective": "cost"}


def link(base_url: str, workload: dict[str, Any]) -> str:
    return f"{base_url}/?{urlencode({k: str(v) for k, v in workload.items()})}"


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], width  # type: ignore[index]


def plan_button_on_screen(page: Page) -> None:
    """The Plan button is inside the viewport and on top (nothing covers its centre)."""
    box = page.locator("#run").bounding_box()
    view = page.viewport_size
    assert box is not None and view is not None
    assert box["y"] >= 0 and box["y"] + box["height"] <= view["height"], box
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    assert page.evaluate(f"document.elementFromPoint({x}, {y}).id") == "run"


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1440x900", "390x844"])
def test_the_answer_comes_first_for_a_job_that_fits_and_one_that_does_not(
    browser: Browser, base_url: str, viewport: ViewportSize
) -> None:
    page = browser.new_page(viewport=viewport)
    page.goto(link(base_url, FITS))
    finished(page, 1)
    v = api(base_url, "/api/estimate", FITS)["verdict"]
    assert page.inner_text("#verdict") == f"Fits on 1× A100 SXM4 80GB with {v['headroom_bytes'] / GIB:.1f} GiB to spare"
    assert page.get_attribute("#answer-box", "data-fits") == "true"
    assert v["limit"] in page.inner_text("#binds") and "compute-bound" in page.inner_text("#binds")
    assert page.locator("#verdict").is_visible() and page.is_hidden("#fixes-box")
    top = page.locator("#answer-box").bounding_box()
    assert top is not None and top["y"] < viewport["height"]  # in view without scrolling (the phone scrolls to it)
    no_sideways_scroll(page)

    page.goto(link(base_url, NO_FIT))
    finished(page, 1)
    est = api(base_url, "/api/estimate", NO_FIT)
    v = est["verdict"]
    assert (
        page.inner_text("#verdict") == f"Does not fit: {v['short_by_bytes'] / GIB:.1f} GiB short on 1× GeForce RTX 4090"
    )
    assert page.get_attribute("#answer-box", "data-fits") == "false"
    assert v["limit"] in page.inner_text("#binds")
    # a job that would not run shows no time, cost or roofline; its memory is marked as such
    assert est["time"] is None and not any(k.startswith(("time.", "cost.")) for k in shown_estimate(page))
    assert page.is_visible("#would-not-run") and page.is_hidden("#roofline-box") and page.is_hidden("#headline")
    no_sideways_scroll(page)
    # the library's top fixes are buttons; one applies exactly its changes and plans again
    buttons = page.query_selector_all("#fixes button.fix")
    assert [raw(b.get_attribute("data-changes") or "null") for b in buttons] == [f["changes"] for f in v["fixes"][:3]]
    fix = v["fixes"][0]
    buttons[0].click()
    finished(page, 2)
    query = {k: vs[0] for k, vs in parse_qs(urlparse(page.url).query).items()}
    after = {**NO_FIT, **fix["changes"]}
    for key, value in fix["changes"].items():
        assert query.get(key) == str(value) or raw(query.get("extra", "{}")).get(key) == value, key
    v2 = api(base_url, "/api/estimate", after)["verdict"]
    assert v2["fits"] and v2["per_gpu_bytes"] == pytest.approx(fix["per_gpu_bytes"], rel=1e-9)
    assert page.inner_text("#verdict").startswith("Fits on")
    assert page.is_hidden("#would-not-run")
    no_sideways_scroll(page)
    page.close()


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1440x900", "390x844"])
def test_the_plan_button_is_on_screen_at_any_scroll_position(
    browser: Browser, base_url: str, viewport: ViewportSize
) -> None:
    page = browser.new_page(viewport=viewport)
    page.goto(link(base_url, FITS))
    finished(page, 1)
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height > 3 * viewport["height"]  # a long page
    for y in (0, height // 3, 2 * height // 3, height):
        page.evaluate(f"window.scrollTo(0, {y})")
        plan_button_on_screen(page)
    page.close()


def test_a_graphics_plan_from_the_form_sends_only_its_fields(browser: Browser, base_url: str) -> None:
    page = browser.new_page(viewport=PHONE)
    page.goto(base_url)
    page.wait_for_selector("body[data-state=ready]", state="attached", timeout=TIMEOUT_MS)
    page.select_option("#task", "lora")
    page.fill("#batch_size", "4")  # typed for another task: neither shown nor sent once the task changes
    assert page.is_hidden("#streams") and page.is_hidden("#input_len") and page.is_visible("#lora_rank")
    page.select_option("#task", "streaming")
    for hidden in ("#model", "#batch_size", "#lora_rank", "#gpu", "#have", "#users", "#frames"):
        assert page.is_hidden(hidden), hidden
    page.select_option("#resolution", "4k")
    page.select_option("#codec", "hevc")
    page.select_option("#objective", "cost")
    page.fill("#fps", "60")
    page.fill("#streams", "24")
    with page.expect_request("**/api/plan") as sent:
        page.click("#run")
    finished(page, 1)
    assert raw(sent.value.post_data or "null") == STREAMS
    plan = api(base_url, "/api/plan", STREAMS)
    rows = page.query_selector_all("#graphics-table tbody tr")
    assert [(r.get_attribute("data-gpu"), int(r.get_attribute("data-n") or 0)) for r in rows] == [
        (o["gpu"], o["num_gpus"]) for o in plan["options"]
    ]
    for row, o in zip(rows, plan["options"], strict=True):
        cell = row.query_selector("td[data-field=cost_usd]")
        assert cell is not None and raw(cell.get_attribute("data-raw") or "null") == o["cost_usd"]
    best = plan["options"][0]
    assert page.inner_text("#verdict").startswith(f"Runs on {best['num_gpus']}× {best['gpu']}")
    assert len(page.query_selector_all("#unsuitable-list li")) == len(plan["unsuitable"])
    for box in ("#estimate-box", "#plan-box", "#fit-box", "#roofline-box"):
        assert page.is_hidden(box), box
    assert "batch_size" not in page.url and "model" not in page.url
    no_sideways_scroll(page)
    page.close()


def test_i_have_bounds_the_plan(browser: Browser, base_url: str) -> None:
    page = browser.new_page(viewport=LAPTOP)
    have = {**NO_FIT, "have": "2x RTX 4090"}
    page.goto(link(base_url, have))
    finished(page, 1)
    plan = api(base_url, "/api/plan", have)
    rows = page.query_selector_all("#plan-table tbody tr")
    shown = [(r.get_attribute("data-gpu"), int(r.get_attribute("data-n") or 0)) for r in rows]
    assert shown == [(o["gpu"], o["num_gpus"]) for o in plan["options"] if o["fits"]][:10]
    assert shown and all(g == "GeForce RTX 4090" and n <= 2 for g, n in shown)
    # the workload's GPU is in `have`: "(yours)", not "(your pick)"
    assert all("(yours)" in r.inner_text() and "(your pick)" not in r.inner_text() for r in rows)
    assert page.inner_text("#plan-title") == "On the GPUs you have"
    rent = page.query_selector_all("#rent-table tbody tr")
    assert [r.get_attribute("data-gpu") for r in rent] == [o["gpu"] for o in plan["rent_options"]]
    # your own GPUs cost electricity only, labelled as the CLI labels it; renting is rental cost
    owned_head = [h.inner_text() for h in page.query_selector_all("#plan-table thead th")]
    rent_head = [h.inner_text() for h in page.query_selector_all("#rent-table thead th")]
    assert "power cost per step" in owned_head and "power $/h (all GPUs)" in owned_head, owned_head
    assert "cost per step" in rent_head and not any("power" in h for h in rent_head), rent_head
    assert page.inner_text("#own-note") == (
        f"Power cost on your GPUs: {OWN_POWER}; what renting would add is priced at rental rates."
    )
    page.close()


def test_busy_state_while_planning_and_an_error_replaces_the_old_answer(browser: Browser, base_url: str) -> None:
    page = browser.new_page(viewport=LAPTOP)
    page.goto(link(base_url, FITS))
    finished(page, 1)
    held: list[Any] = []
    page.route("**/api/plan", lambda route: held.append(route))  # the plan waits until released
    page.fill("#batch_size", "1")
    page.click("#run")
    page.wait_for_function("document.getElementById('run').disabled", timeout=TIMEOUT_MS)
    assert page.get_attribute("#results", "aria-busy") == "true"
    assert page.is_visible("#progress") and page.is_visible("#busy-note")
    opacity = page.evaluate("getComputedStyle(document.getElementById('answer-box')).opacity")
    assert float(opacity) < 0.5  # the old answer stays dimmed, not passed off as the new one
    page.wait_for_timeout(300)
    assert held and page.get_attribute("body", "data-state") == "busy"
    for route in held:
        route.continue_()
    page.unroute("**/api/plan")
    finished(page, 2)
    assert not page.locator("#run").is_disabled() and page.get_attribute("#results", "aria-busy") == "false"
    assert page.is_hidden("#progress")

    page.fill("#model", "no-such-model")
    page.click("#run")
    finished(page, 3)
    assert "Unknown model 'no-such-model'" in page.inner_text("#error")
    for box in ("#answer-box", "#estimate-box", "#plan-box", "#fit-box"):
        assert page.is_hidden(box), box  # the error replaces the previous plan's results
    page.close()


def test_back_and_forward_move_between_plans(browser: Browser, base_url: str) -> None:
    page = browser.new_page(viewport=LAPTOP)
    page.goto(base_url)
    page.wait_for_selector("body[data-state=ready]", state="attached", timeout=TIMEOUT_MS)
    page.goto(link(base_url, FITS))
    finished(page, 1)
    first, first_verdict = page.url, page.inner_text("#verdict")
    page.select_option("#gpu", "GeForce RTX 4090")
    page.click("#run")
    finished(page, 2)
    second, second_verdict = page.url, page.inner_text("#verdict")
    assert second != first and second_verdict.startswith("Does not fit")
    page.go_back()
    finished(page, 3)
    assert page.url == first and page.inner_text("#verdict") == first_verdict
    assert page.input_value("#gpu") == "A100 SXM4 80GB"
    page.go_forward()
    finished(page, 4)
    assert page.url == second and page.inner_text("#verdict") == second_verdict
    page.go_back()
    page.go_back()
    page.wait_for_url(f"{base_url}/", timeout=TIMEOUT_MS)  # the empty page before the first plan, still the app


def test_the_page_loads_compressed_and_light(browser: Browser, base_url: str) -> None:
    page = browser.new_page(viewport=LAPTOP)
    answers: dict[str, dict[str, str]] = {}

    def seen(r: Response) -> None:
        answers.setdefault(urlparse(r.url).path, r.all_headers())

    page.on("response", seen)
    page.goto(link(base_url, FITS))
    finished(page, 1)
    for path in ("/static/vendor/plotly-basic.min.js", "/static/app.js", "/api/gpu-menu", "/api/plan", "/api/fit"):
        assert answers[path].get("content-encoding") == "gzip", path
    assert answers["/static/vendor/plotly-basic.min.js"]["cache-control"].startswith("public, max-age=")
    assert "/api/gpus" not in answers  # the menu comes from the brief list, not the 500 KB catalog
    page.close()


AXE = Path(__file__).parent / "browser" / "vendor" / "axe.min.js"


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1440x900", "390x844"])
def test_axe_finds_no_serious_violations(browser: Browser, base_url: str, viewport: ViewportSize) -> None:
    sha = re.search(r"sha256 ([0-9a-f]{64})", (AXE.parent / "README.md").read_text())
    assert sha and hashlib.sha256(AXE.read_bytes()).hexdigest() == sha.group(1)  # the npm release, unchanged
    page = browser.new_page(viewport=viewport)
    for workload in (NO_FIT, STREAMS):
        page.goto(link(base_url, workload))
        finished(page, 1)
        assert not axe_serious(page)
    # the check can fail: an unlabelled image is a critical violation
    page.evaluate("document.body.append(document.createElement('img'))")
    found = page.evaluate("async () => (await axe.run(document)).violations.map(v => v.id)")
    assert "image-alt" in found
    page.close()


def axe_serious(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it stands."""
    page.evaluate(AXE.read_text())  # through DevTools, not a <script>: the page's CSP stays as served
    found = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))}))"
    )
    return [v for v in found if v["impact"] in ("serious", "critical")]


# --- serving plans, latency targets, folded rows, frameworks ----------------------------------------

SERVING = {"model": "mistral-7b", "task": "inference", "precision": "bf16", "gpu": "A40", "batch_size": 8,
           "input_len": 512, "output_len": 256, "max_tpot_ms": 50, "objective": "cost"}  # fmt: skip


def test_a_serving_plan_prices_tokens_at_the_latency_target(browser: Browser, base_url: str) -> None:
    page = browser.new_page(viewport=PHONE)
    page.goto(base_url)
    page.wait_for_selector("body[data-state=ready]", state="attached", timeout=TIMEOUT_MS)
    page.select_option("#task", "lora")  # the latency targets are inference keys: neither shown nor sent here
    assert page.is_hidden("#max_tpot_ms") and page.is_hidden("#max_ttft_ms") and page.is_visible("#framework")
    page.select_option("#task", "inference")
    assert page.is_visible("#max_tpot_ms") and page.is_visible("#max_ttft_ms") and page.is_hidden("#framework")
    page.fill("#model", "mistral-7b")
    page.select_option("#gpu", "A40")
    page.select_option("#objective", "cost")
    for key in ("batch_size", "input_len", "output_len", "max_tpot_ms"):
        page.fill(f"#{key}", str(SERVING[key]))
    sent: dict[str, Any] = {}
    page.on("request", lambda r: sent.update({urlparse(r.url).path: raw(r.post_data or "null")}))
    page.click("#run")
    finished(page, 1)
    assert page.is_hidden("#error"), page.inner_text("#error")
    assert sent["/api/plan"] == SERVING and sent["/api/estimate"] == SERVING
    assert "max_tpot_ms" not in sent["/api/fit"]  # fit answers memory only and refuses a latency target

    plan = api(base_url, "/api/plan", SERVING)
    priced = [o for o in plan["options"] if o["fits"] and o["usd_per_hour"] is not None]
    assert len(priced) > 10
    page.click("#plan-more")
    heads = [h.inner_text() for h in page.query_selector_all("#plan-table thead th")]
    assert "$/Mtok @ batch" in heads and "cost per hour" in heads, heads
    rows = page.query_selector_all("#plan-table tbody tr")
    assert len(rows) == len(priced)
    for row, opt in zip(rows, priced, strict=True):
        s = opt["serving"]
        cell = row.query_selector("td[data-field=serving]")
        assert cell is not None
        assert raw(cell.get_attribute("data-raw") or "") == s["usd_per_million_tokens"]
        assert raw(cell.get_attribute("data-batch") or "") == s["batch"]
        assert cell.get_attribute("title") == f"limited by {s['limited_by']}"
        text = cell.inner_text()
        if s["batch"] is None:
            assert text == "misses target", text
        else:  # "$0.09 @ 106"
            assert text.endswith(f" @ {s['batch']:,}") and text.startswith("$"), text
            shown = float(text[1:].split(" @ ")[0].replace(",", ""))  # cents (two decimals) or two digits below $0.01
            assert shown == pytest.approx(s["usd_per_million_tokens"], abs=0.0051), text
    assert any(o["serving"]["batch"] is None for o in priced)  # a card that cannot meet 50 ms at any batch
    assert any(o["serving"]["batch"] > SERVING["batch_size"] for o in priced)  # the target allows more than 8
    # GPUs with the very same figures are one row, the others named in its GPU cell (under vLLM's
    # start-up sizing a larger card is a larger KV pool, so memory variants are folded here only
    # where every figure agrees; tests/test_plan_serving.py checks the fold itself)
    for row, opt in ((r, o) for r, o in zip(rows, priced, strict=True) if o.get("same_as")):
        assert f"{opt['gpu']} (= {', '.join(opt['same_as'])})" in row.inner_text()
    first = priced[0]
    note = page.inner_text("#serving-note")
    assert note.startswith("$/Mtok @ batch: $ per million output tokens at the largest batch that fits and meets "
                           "max_tpot_ms=50 (concurrent sequences)"), note  # fmt: skip
    assert f"on 1× {first['gpu']}, batch {first['serving']['batch']:,}: a larger one is limited by " in note
    assert first["serving"]["limited_by"] in note
    # the chosen GPU meets 50 ms per token at batch 8: no miss in the answer
    assert api(base_url, "/api/estimate", SERVING)["verdict"]["notes"] == [] and page.is_hidden("#target-miss")
    no_sideways_scroll(page)
    assert not axe_serious(page)

    # a target it cannot meet: the answer says which, by how much
    page.fill("#max_tpot_ms", "10")
    page.click("#run")
    finished(page, 2)
    notes = api(base_url, "/api/estimate", {**SERVING, "max_tpot_ms": 10})["verdict"]["notes"]
    assert len(notes) == 1 and notes[0].startswith("misses its latency target max_tpot_ms=10 (batch 8 takes ")
    miss = page.inner_text("#target-miss")
    assert miss.startswith(f"M{notes[0][1:]}."), miss
    assert page.get_attribute("#answer-box", "data-fits") == "true" and page.locator("#target-miss").is_visible()
    assert "max_tpot_ms=10" in page.inner_text("#serving-note")
    no_sideways_scroll(page)
    page.close()


def test_a_framework_fills_the_training_keys_left_unset(browser: Browser, base_url: str) -> None:
    page = browser.new_page(viewport=LAPTOP)
    page.goto(base_url)
    page.wait_for_selector("body[data-state=ready]", state="attached", timeout=TIMEOUT_MS)
    page.select_option("#task", "lora")
    assert page.input_value("#framework") == "" and page.inner_text("#framework option:checked") == "—"
    # the menu is the library's frameworks
    names = page.eval_on_selector_all("#framework option", "os => os.map((o) => o.value)")
    assert names == ["", *frameworks.names()]
    page.fill("#model", "llama-3.1-8b")
    page.select_option("#gpu", "A100 SXM4 80GB")
    page.select_option("#framework", "unsloth")
    with page.expect_request("**/api/estimate") as sent:
        page.click("#run")
    finished(page, 1)
    assert page.is_hidden("#error"), page.inner_text("#error")
    body = raw(sent.value.post_data or "null")
    # checkpointing left at "—" is not sent, so the framework's value (unsloth: full) applies
    assert body == {"model": "llama-3.1-8b", "task": "lora", "gpu": "A100 SXM4 80GB", "precision": "bf16",
                    "objective": "time", "framework": "unsloth"}  # fmt: skip
    est = api(base_url, "/api/estimate", body)
    assert est["workload"]["activation_checkpointing"] == "full"
    plain = api(base_url, "/api/estimate", {k: v for k, v in body.items() if k != "framework"})
    assert est["memory"]["per_gpu_bytes"] < 0.9 * plain["memory"]["per_gpu_bytes"]  # the framework's keys count
    for key, value in shown_estimate(page).items():
        assert value == dig(est, key), key
    assert parse_qs(urlparse(page.url).query)["framework"] == ["unsloth"]
    # your key wins over the framework's
    page.select_option("#activation_checkpointing", "none")
    with page.expect_request("**/api/estimate") as sent2:
        page.click("#run")
    finished(page, 2)
    mine = raw(sent2.value.post_data or "null")
    assert mine == {**body, "activation_checkpointing": "none"}
    assert (
        shown_estimate(page)["memory.per_gpu_bytes"] == api(base_url, "/api/estimate", mine)["memory"]["per_gpu_bytes"]
    )
    # a training key: not shown, not sent for inference
    page.select_option("#task", "inference")
    assert page.is_hidden("#framework")
    with page.expect_request("**/api/plan") as sent3:
        page.click("#run")
    finished(page, 3)
    assert "framework" not in raw(sent3.value.post_data or "null") and "framework" not in page.url
    page.close()
