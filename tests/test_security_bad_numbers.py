"""Bad numbers get one line and exit 2 (CLI) or a 422 (API), never a traceback, a 500 or a NaN in
JSON (issue 24): NaN/infinity/negative/absurd values in price and catalog files, options, lab
budgets, workloads and config.json."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import RunCli
from gpuplan.errors import GpuplanError
from gpuplan.interfaces import api
from gpuplan.interfaces.web import create_app
from gpuplan.specs.model import model_from_config
from gpuplan.specs.workload import make_workload

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "gpuplan" / "data"
WORKLOAD = str(ROOT / "examples" / "lora-4090.yaml")
STREAM = str(ROOT / "examples" / "stream-4k.yaml")
HEADER = "gpu,provider,price_per_hour_usd,date_or_version,source\n"


def _one_line(err: str, *words: str) -> None:
    assert err.startswith("gpuplan: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


@pytest.mark.parametrize("price", ["nan", "inf", "-inf", "-2", "1e300", "NaN"])
def test_a_price_that_is_not_a_finite_positive_number_is_refused(tmp_path: Path, run_cli: RunCli, price: str) -> None:
    f = tmp_path / "p.csv"
    f.write_text(HEADER + f"H100 SXM5 80GB,my cloud,{price},2026-12,invoice\n", encoding="utf-8")
    code, out, err = run_cli("estimate", WORKLOAD, "--gpu", "H100", "--prices", str(f), "--json")
    assert code == 2 and out == ""
    _one_line(err, "price_per_hour_usd", "line 2")


@pytest.mark.parametrize("value", ["inf", "nan", "-80", "0"])
def test_a_catalog_value_that_is_not_finite_and_positive_is_refused(
    tmp_path: Path, run_cli: RunCli, value: str
) -> None:
    text = (DATA / "gpus" / "nvidia-pcie-pro.toml").read_text(encoding="utf-8")
    f = tmp_path / "cat.toml"
    f.write_text(re.sub(r"memory_bandwidth_GBps = [0-9.]+", f"memory_bandwidth_GBps = {value}", text, count=1))
    code, _, err = run_cli("gpus", "--catalog", str(f), "--json")
    assert code == 2
    _one_line(err, "memory_bandwidth_GBps")


@pytest.mark.parametrize(
    "argv",
    [["estimate", WORKLOAD, "--carbon", "nan"], ["plan", WORKLOAD, "--carbon", "inf"], ["plan", WORKLOAD, "--top", "-3"],
     ["plan", WORKLOAD, "--top", "0"], ["plan", WORKLOAD, "--budget", "nan"], ["gpus", "--min-memory", "nan"],
     ["gpus", "--min-memory", "-5"], ["rent-vs-buy", "4090", "--years", "inf"], ["rent-vs-buy", "4090", "--price", "nan"],
     ["estimate", WORKLOAD, "--set", "batch_size=" + "9" * 5000], ["estimate", WORKLOAD, "--set", "tokens=.nan"],
     ["estimate", WORKLOAD, "--set", "tokens=1e400"], ["estimate", WORKLOAD, "--set", "seq_len=-1"],
     ["estimate", WORKLOAD, "--set", "seq_len=1.5e0"], ["estimate", WORKLOAD, "--set", "batch_size=1e999999999"],
     ["plan", WORKLOAD, "--set", "batch_size=0.5"]],
)  # fmt: skip
def test_bad_numeric_options_are_one_line(run_cli: RunCli, argv: list[str]) -> None:
    code, out, err = run_cli(*argv)
    assert code == 2 and out == "", (argv, out[:200])
    _one_line(err)


def test_integral_scientific_notation_is_an_integer_and_a_fraction_is_named(run_cli: RunCli) -> None:
    """`--set batch_size=1e3` (YAML 1.1 reads "1e3" as a string) is the integer 1,000, as
    `tokens: 1e9` is a number; `seq_len=1.5e0` is one line naming the key and the value it writes."""
    code, out, err = run_cli("estimate", WORKLOAD, "--set", "batch_size=1e0", "--set", "seq_len=1.024e3", "--json")
    assert code == 0, err
    w = json.loads(out)["workload"]
    assert (w["batch_size"], w["seq_len"]) == (1, 1024)
    code, out, err = run_cli("estimate", WORKLOAD, "--set", "seq_len=1.5e0")
    assert code == 2 and out == ""
    _one_line(err, "'seq_len' key must be a whole number", "'1.5e0' (= 1.5)", "write e.g. 2")
    code, out, err = run_cli("estimate", WORKLOAD, "--set", "batch_size=1e999999999")
    assert code == 2 and out == ""
    _one_line(err, "'batch_size' key is '1e999999999', beyond any sensible value")


@pytest.mark.parametrize("budget", [".nan", ".inf", "1e300", "-1"])
def test_lab_budgets_must_be_finite(tmp_path: Path, run_cli: RunCli, budget: str) -> None:
    data = yaml.safe_load((ROOT / "examples" / "lab.yaml").read_text(encoding="utf-8"))
    text = yaml.safe_dump(data).replace("gpu_hours_per_month: 800", f"gpu_hours_per_month: {budget}", 1)
    f = tmp_path / "lab.yaml"
    f.write_text(text, encoding="utf-8")
    code, _, err = run_cli("lab", "check", str(f))
    assert code == 2
    _one_line(err, "gpu_hours_per_month")


LLAMA = json.loads((DATA / "models" / "llama-3.2-1b.json").read_text(encoding="utf-8"))
MIXTRAL = json.loads((DATA / "models" / "mixtral-8x7b.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("base", "key", "value"),
    [(LLAMA, "head_dim", 0), (LLAMA, "max_position_embeddings", 0), (LLAMA, "hidden_size", 1e12),
     (LLAMA, "hidden_size", 10**12), (MIXTRAL, "num_experts_per_tok", 0), (MIXTRAL, "num_experts_per_tok", 9),
     (LLAMA, "num_key_value_heads", 64), (LLAMA, "num_hidden_layers", -1), (LLAMA, "vocab_size", 10**9)],
)  # fmt: skip
def test_config_json_nonsense_is_refused_by_key(base: dict[str, Any], key: str, value: Any) -> None:
    cfg = copy.deepcopy(base)
    cfg[key] = value
    with pytest.raises(GpuplanError, match=key):
        model_from_config(cfg, "m")
    # and through the API, as a pasted config: a 422 naming the key, never a 500
    r = TestClient(create_app()).post("/api/model", json={"config": cfg})
    assert r.status_code == 422 and key in r.json()["detail"]


def test_real_configs_pass_the_shape_bounds() -> None:
    for m in api.list_models():
        assert api.get_model(m["name"]).total_params > 0


@pytest.mark.parametrize(
    "body",
    ['{"model": "llama-3.1-8b", "task": "ai-video", "frames": 1' + "0" * 309 + "}",
     '{"model": "llama-3.1-8b", "batch_size": 1e309}', '{"model": "llama-3.1-8b", "tokens": NaN}',
     '{"model": "llama-3.1-8b", "gpu": "H100", "deadline": -1}'],
)  # fmt: skip
def test_the_api_answers_422_not_500(body: str) -> None:
    r = TestClient(create_app()).post("/api/estimate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert len(r.json()["detail"]) < 600


def test_duplicate_gpus_in_a_plan_are_planned_once() -> None:
    r = TestClient(create_app()).post(
        "/api/plan", json={"model": "llama-3.2-1b", "gpus": ["H100", "h100 sxm", "H100 SXM5 80GB"] * 50}
    )
    assert r.status_code == 200
    rows = [(o["gpu"], o["num_gpus"]) for o in r.json()["options"]]
    assert len(rows) == len(set(rows)) and {g for g, _ in rows} == {"H100 SXM5 80GB"}


def _no_constant(token: str) -> Any:
    raise ValueError(token)


NUMERIC_KEYS = ["batch_size", "seq_len", "num_gpus", "tokens", "lora_rank", "grad_accum", "input_len", "output_len"]


@settings(max_examples=200, deadline=None)
@given(
    key=st.sampled_from(NUMERIC_KEYS),
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.sampled_from([0, 1, 2**31, 10**15, 1e300, 10**400]),
    ),
)
def test_any_number_in_any_key_gives_an_estimate_or_one_error(key: str, value: float) -> None:
    """Every number in every numeric key either gives an estimate whose JSON is strict, or an
    input error: never another exception, never a NaN in the answer."""
    try:
        w = make_workload({"model": "llama-3.2-1b", "task": "lora", "gpu": "H100", key: value})
        rec = api.estimate(w).to_dict()
    except GpuplanError:
        return
    text = json.dumps(rec, allow_nan=False)
    json.loads(text, parse_constant=_no_constant)
    assert math.isfinite(rec["memory"]["per_gpu_bytes"])


# --- catalog rows: every value finite and within a bound far beyond any card -----------------------

PRO = (DATA / "gpus" / "nvidia-pcie-pro.toml").read_text(encoding="utf-8")  # its first row is the L40


def _first_row_with(tmp_path: Path, **values: str) -> Path:
    text = PRO
    for key, value in values.items():
        text = re.sub(rf"^{key} = [0-9.]+$", f"{key} = {value}", text, count=1, flags=re.MULTILINE)
    if "memory_GB" in values:  # the L40 gives its memory in GiB: say it in GB instead
        text = re.sub(r"^memory_GiB = [0-9.]+$", f"memory_GB = {values['memory_GB']}", text, count=1, flags=re.M)
    f = tmp_path / "cat.toml"
    f.write_text(text, encoding="utf-8")
    return f


@pytest.mark.parametrize(
    ("key", "value"),
    [("memory_GB", "-80"), ("memory_GiB", "1e300"), ("memory_GiB", "0"), ("tdp_W", "nan"), ("tdp_W", "1e300"),
     ("memory_bandwidth_GBps", "1e300"), ("memory_bandwidth_GBps", "1e-300"), ("fp32_TFLOPS", "1e300"),
     ("bf16_TFLOPS", "-inf"), ("nvlink_domain", "1000000000"), ("nvenc", "-1"), ("memory_ecc_MiB", "1e300")],
)  # fmt: skip
def test_a_catalog_row_out_of_bounds_is_one_line_naming_file_gpu_and_field(
    tmp_path: Path, run_cli: RunCli, key: str, value: str
) -> None:
    """1e300 GB/s overflowed to infinity in bytes/s: `gpus --json` died with a ValueError traceback."""
    f = _first_row_with(tmp_path, **{key: value})
    for argv in (["gpus", "--json"], ["estimate", WORKLOAD, "--gpu", "L40", "--json"]):
        code, out, err = run_cli(*argv, "--catalog", str(f))
        assert code == 2 and out == "", (argv, out[:200])
        _one_line(err, key, "cat.toml")
        assert "L40" in err or "gpu[0]" in err, err


@pytest.mark.parametrize(
    "bound",
    [{"memory_GiB": "0.1", "memory_ecc_MiB": "0.1", "memory_bandwidth_GBps": "1", "fp32_TFLOPS": "0.001", "bf16_TFLOPS": "0.001",
      "fp16_TFLOPS": "0.001", "tf32_TFLOPS": "0.001", "fp8_TFLOPS": "0.001", "tdp_W": "1", "nvlink_GBps": "0"},
     {"memory_GiB": "100000", "memory_ecc_MiB": "102400000", "memory_bandwidth_GBps": "1000000", "fp32_TFLOPS": "10000000", "bf16_TFLOPS": "10000000",
      "tdp_W": "100000", "nvlink_GBps": "1000000", "nvlink_domain": "100000"}],
    ids=["lowest", "highest"],
)  # fmt: skip
def test_a_catalog_row_at_its_bounds_gives_strict_json(tmp_path: Path, run_cli: RunCli, bound: dict[str, str]) -> None:
    f = _first_row_with(tmp_path, **bound)
    for argv in (
        ["estimate", "llama-3.1-405b", "--set", "task=pretrain", "--set", "tokens=1e18", "--gpu", "L40"],
        ["estimate", "llama-3.2-1b", "--set", "task=inference", "--set", "tokens=1e18", "--gpu", "L40"],
        ["plan", "llama-3.2-1b", "--set", "task=pretrain", "--set", "tokens=1e15", "--cluster", "100x8:L40"],
        ["fit", "llama-3.2-1b", "--gpu", "L40"],
        ["compare", "L40", "H100"],
    ):
        code, out, err = run_cli(*argv, "--catalog", str(f), "--json")
        assert code == 0, (argv, err)
        json.loads(out, parse_constant=_no_constant)


@pytest.mark.parametrize(
    ("key", "value"),
    [("matmul_flop_per_s", "{bf16: 1.0e-300}"), ("matmul_flop_per_s", "{bf16: 1.0e+300}"),
     ("memory_bandwidth_bytes_per_s", "1.0e-300"), ("memory_bandwidth_bytes_per_s", "5.0e+20")],
)  # fmt: skip
def test_a_calibration_rate_outside_the_catalogs_bounds_is_one_line(
    tmp_path: Path, run_cli: RunCli, key: str, value: str
) -> None:
    """A measured 1e-300 FLOP/s was a ZeroDivisionError traceback (and an inf at --json); a
    calibration is held to the catalog's own bounds (1 GFLOP/s-10 EFLOP/s, 1 GB/s-1 PB/s)."""
    f = tmp_path / "cal.yaml"
    f.write_text(f"gpuplan_calibration: 1\ngpus:\n  - gpu: H100\n    {key}: {value}\n", encoding="utf-8")
    argv = ["estimate", "llama-3.1-405b", "--set", "task=pretrain", "--set", "tokens=1e18", "--gpu", "H100"]
    code, out, err = run_cli(*argv, "--calibration", str(f), "--json")
    assert code == 2 and out == ""
    _one_line(err, "cal.yaml", key)


# --- purchase prices, lab files ----------------------------------------------------------------------


@pytest.mark.parametrize("price", ["nan", "inf", "-1", "0", "1e300"])
def test_a_purchase_price_must_be_finite_and_bounded(tmp_path: Path, run_cli: RunCli, price: str) -> None:
    f = tmp_path / "buy.csv"
    f.write_text(f"gpu,price_usd,kind,date,source\n4090,{price},msrp,2022,invoice\n", encoding="utf-8")
    code, out, err = run_cli("rent-vs-buy", "4090", "--purchase-prices", str(f), "--json")
    assert code == 2 and out == ""
    _one_line(err, "buy.csv line 2", "price_usd", "100,000,000")


def _lab(tmp_path: Path, change: Any) -> Path:
    data = yaml.safe_load((ROOT / "examples" / "lab.yaml").read_text(encoding="utf-8"))
    change(data)
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump(data), encoding="utf-8")
    return f


@pytest.mark.parametrize(
    ("change", "words"),
    [(lambda d: d["members"][0].update(share=float("nan")), ["share"]),
     (lambda d: d["members"][0].update(share=1e300), ["share", "1,000,000"]),
     (lambda d: d["members"][0].update(share=0), ["share"]),
     (lambda d: d["members"][0].update(share=1e-300), ["share", "0.001"]),
     (lambda d: d["members"][1].update(gpu_hours_per_month=float("inf")), ["gpu_hours_per_month"]),
     (lambda d: d["nodes"][0]["gpus"].update({"RTX 2080 Ti": 0}), ["count of", "1-64"]),
     (lambda d: d["nodes"][0]["gpus"].update({"RTX 2080 Ti": 10**30}), ["RTX 2080 Ti"]),
     (lambda d: d["jobs"][0].update(submitted=float("nan")), ["submitted"]),
     (lambda d: d["jobs"][0].update(tokens=1e300), ["tokens"]),
     (lambda d: d["jobs"][0].update(deadline="99999999d"), ["deadline", "100 years"])],
)  # fmt: skip
def test_lab_numbers_are_one_line_naming_the_field(
    tmp_path: Path, run_cli: RunCli, change: Any, words: list[str]
) -> None:
    code, out, err = run_cli("lab", "check", str(_lab(tmp_path, change)))
    assert code == 2 and out == ""
    _one_line(err, *words)


def test_a_lab_submitted_position_must_be_finite_in_parse_lab_too() -> None:
    """parse_lab takes any mapping (not only the bounded YAML reader's): a NaN position would scramble
    the queue order, a 400-digit one overflowed math.isfinite."""
    from gpuplan.specs.gpu import bundled_catalog
    from gpuplan.specs.lab import parse_lab

    for bad in (float("nan"), 10**400, "first"):
        data = yaml.safe_load((ROOT / "examples" / "lab.yaml").read_text(encoding="utf-8"))
        data["jobs"][0]["submitted"] = bad
        with pytest.raises(GpuplanError, match="'submitted'"):
            parse_lab(data, bundled_catalog(), "lab.yaml")


# --- workload keys: every numeric key bounded --------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "key", "value"),
    [("render", "frames", 1_000_000_001), ("render", "frames", 10**309), ("inference", "deadline", 1e300),
     ("inference", "deadline", "99999999999d"), ("inference", "budget", 1e300), ("pretrain", "tokens", 1e19),
     ("streaming", "fps", 1e6), ("vdi", "users", 10**7), ("render", "spp", 10**9)],
)  # fmt: skip
def test_every_numeric_workload_key_has_a_bound(task: str, key: str, value: Any) -> None:
    body = {"task": task, key: value, **({} if task in ("render", "streaming", "vdi") else {"model": "llama-3.2-1b"})}
    with pytest.raises(GpuplanError, match=key):
        make_workload(body)
    r = TestClient(create_app()).post("/api/plan", json=body)
    assert r.status_code == 422 and key in r.json()["detail"], r.text


def test_a_yaml_frames_of_310_digits_is_one_line(tmp_path: Path, run_cli: RunCli) -> None:
    f = tmp_path / "render.yaml"
    f.write_text("task: render\nframes: 1" + "0" * 309 + "\n", encoding="utf-8")
    code, out, err = run_cli("plan", str(f), "--json")
    assert code == 2 and out == ""
    _one_line(err, "frames", "render.yaml")


@pytest.mark.parametrize(
    "argv",
    [["estimate", WORKLOAD, "--set", "tokens=1e15"], ["estimate", WORKLOAD, "--set", "seq_len=10000000"],
     ["estimate", "gpt2", "--set", "task=pretrain", "--set", "tokens=1e18", "--gpu", "T4"],
     ["estimate", "qwen3-0.6b", "--set", "task=inference", "--set", "input_len=10000000", "--set", "output_len=0",
      "--set", "tokens=1", "--gpu", "H100"],
     ["estimate", "llama-3.2-1b", "--set", "task=pretrain", "--set", "epochs=1e6", "--set", "dataset_tokens=1e18",
      "--gpu", "H100", "--set", "num_gpus=100000"],
     ["estimate", "llama-3.2-1b", "--set", "task=inference", "--set", "deadline=36500d", "--gpu", "H100"],
     ["plan", STREAM, "--set", "task=render", "--set", "frames=1000000000", "--set", "spp=1000000"],
     ["plan", STREAM, "--set", "streams=1000000", "--set", "fps=1000"],
     ["fit", "resnet-50", "--set", "batch_size=1000000", "--gpu", "H100"]],
)  # fmt: skip
def test_extreme_but_valid_values_give_strict_json(run_cli: RunCli, argv: list[str]) -> None:
    """--json never carries NaN/Infinity: _emit_json is strict, so a NaN would be a traceback here."""
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    json.loads(out, parse_constant=_no_constant)


# --- CLI options -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "words"),
    [(["model", "llama-3.2-1b", "--seq-len", str(10**17)], ["seq-len", "10,000,000"]),
     (["model", "llama-3.2-1b", "--seq-len", "9" * 5000], ["seq-len"]),
     (["serve", "--port", "70000"], ["'port'", "1-65535"]), (["serve", "--workers", "0"], ["'workers'", "1-256"]),
     (["plan", WORKLOAD, "--top", "-3"], ["--top"]), (["plan", WORKLOAD, "--top", "0"], ["--top"]),
     (["gpus", "--min-memory", "nan"], ["--min-memory"]), (["gpus", "--min-memory", "-5"], ["min-memory"]),
     (["plan", WORKLOAD, "--budget", "inf"], ["--budget"]), (["estimate", WORKLOAD, "--carbon", "nan"], ["--carbon"]),
     (["rent-vs-buy", "4090", "--price", "nan"], ["--price"]), (["rent-vs-buy", "4090", "--price", "1e300"], ["price"]),
     (["plan", WORKLOAD, "--deadline", "1e300"], ["deadline"])],
)  # fmt: skip
def test_each_bad_option_is_one_line_naming_it(run_cli: RunCli, argv: list[str], words: list[str]) -> None:
    """`serve --port 70000` printed its banner before the error (two lines); now the error alone."""
    code, out, err = run_cli(*argv)
    assert code == 2 and out == "", (argv, out[:200])
    _one_line(err, *words)


def test_duplicate_gpus_in_a_cli_plan_are_planned_once(run_cli: RunCli) -> None:
    code, out, err = run_cli("plan", WORKLOAD, "--gpus", "H100,h100 sxm,H100 SXM5 80GB,4090,rtx 4090", "--json")
    assert code == 0, err
    rows = [(o["gpu"], o["num_gpus"]) for o in json.loads(out)["options"]]
    assert len(rows) == len(set(rows)) and {g for g, _ in rows} <= {"H100 SXM5 80GB", "GeForce RTX 4090"}


# --- config.json: more shapes no model has, and the API's pasted configs ----------------------------

QWEN_MOE = json.loads((DATA / "models" / "qwen3-30b-a3b.json").read_text(encoding="utf-8"))
DEEPSEEK = json.loads((DATA / "models" / "deepseek-v3.json").read_text(encoding="utf-8"))
GPT2 = json.loads((DATA / "models" / "gpt2.json").read_text(encoding="utf-8"))
RESNET = json.loads((DATA / "models" / "resnet-50.json").read_text(encoding="utf-8"))
VIT = json.loads((DATA / "models" / "vit-b-16.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("base", "key", "value"),
    [(MIXTRAL, "num_local_experts", 0), (MIXTRAL, "num_local_experts", 10**6), (QWEN_MOE, "num_experts", 0),
     (QWEN_MOE, "moe_intermediate_size", 0), (QWEN_MOE, "num_experts_per_tok", 129), (DEEPSEEK, "n_routed_experts", 10**6),
     (DEEPSEEK, "num_experts_per_tok", 257), (DEEPSEEK, "moe_intermediate_size", 0), (GPT2, "n_embd", 10**7),
     (GPT2, "n_positions", 0), (LLAMA, "max_position_embeddings", 10**15), (LLAMA, "num_attention_heads", 0),
     (LLAMA, "intermediate_size", 0), (LLAMA, "vocab_size", -1), (LLAMA, "num_key_value_heads", 5),
     (LLAMA, "num_hidden_layers", True), (LLAMA, "num_hidden_layers", 1.5), (LLAMA, "rope_theta", float("inf")),
     (LLAMA, "rms_norm_eps", float("nan")), (RESNET, "depths", [3, 4, 6, 10**8]),
     (RESNET, "hidden_sizes", [256, 512, 1024, 2**62]), (VIT, "image_size", 10**9)],
)  # fmt: skip
def test_more_config_nonsense_is_refused_by_key(base: dict[str, Any], key: str, value: Any) -> None:
    """num_local_experts: 0 was a ZeroDivisionError (a 500 in the API); depths of 10**8 ResNet blocks
    were listed one by one (a hang); NaN reached the model through a pasted config."""
    cfg = copy.deepcopy(base)
    cfg[key] = value
    with pytest.raises(GpuplanError, match=key):
        model_from_config(cfg, "m")
    body = json.dumps({"config": cfg})  # NaN/Infinity as JSON tokens, as Python's json writes them
    r = TestClient(create_app()).post("/api/model", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and key in r.json()["detail"], r.text


def test_a_model_beyond_1e15_parameters_is_refused_whatever_the_keys() -> None:
    cfg = {**LLAMA, "num_hidden_layers": 100_000, "hidden_size": 1_000_000, "intermediate_size": 10_000_000,
           "num_attention_heads": 1000, "num_key_value_heads": 1000, "head_dim": 1000}  # fmt: skip
    with pytest.raises(GpuplanError, match="parameters, beyond any model"):
        model_from_config(cfg, "m")


# --- the hypothesis sweep over every numeric workload key ---------------------------------------------


def _numeric_keys() -> list[str]:
    """Every Workload field that takes a number (derived, so a new key is swept without a change here)."""
    from typing import get_args

    from gpuplan.specs.workload import Workload

    keys = []
    for key, f in Workload.model_fields.items():
        kinds = get_args(f.annotation) or (f.annotation,)
        if key == "deadline" or any(k in (int, float) for k in kinds):
            keys.append(key)
    return keys


ALL_NUMERIC_KEYS = _numeric_keys()


@settings(max_examples=200, deadline=None)
@given(
    task=st.sampled_from(["pretrain", "lora", "inference", "render", "streaming", "vdi", "ai-video"]),
    model=st.sampled_from(["llama-3.2-1b", "qwen3-30b-a3b", "gpt2", "bert-base", "resnet-50"]),
    values=st.dictionaries(
        st.sampled_from(ALL_NUMERIC_KEYS),
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(min_value=-(2**80), max_value=2**80),
            st.sampled_from([0, 1, 2, 8, 1024, 10**7, 10**9, 2**63, 1e-300, 1e18, 1e300, 10**400]),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_any_numbers_in_any_keys_of_any_task_give_strict_json_or_one_error(
    task: str, model: str, values: dict[str, Any]
) -> None:
    assert {"deadline", "budget", "frames", "fps", "streams", "users", "spp", "tokens"} <= set(ALL_NUMERIC_KEYS)
    graphics = task in ("render", "streaming", "vdi", "ai-video")
    try:
        w = make_workload({"model": model, "task": task, "gpu": "H100", **values})
        rec = (api.plan(w, gpus=["H100", "T4"]) if graphics else api.estimate(w)).to_dict()
    except GpuplanError:
        return
    json.loads(json.dumps(rec, allow_nan=False), parse_constant=_no_constant)


@pytest.mark.parametrize("gpu", ["3090", "RTX 5090", "4080"])
def test_ecc_on_a_geforce_card_without_ecc_is_refused(run_cli: RunCli, gpu: str) -> None:
    """GeForce cards other than the RTX 3090 Ti and 4090 have no ECC setting: ecc: true is an error."""
    code, out, err = run_cli("fit", "llama-3.1-8b", "--task", "inference", "--gpu", gpu, "--set", "ecc=true")
    assert code == 2 and out == ""
    _one_line(err, "has no memory ECC", "ecc: true")


def test_ecc_on_a_card_with_the_setting_is_taken() -> None:
    """The RTX 4090's driver offers ECC (GDDR6X: 1/16 of its 24 GiB hidden); the 3090 has none."""
    from gpuplan.interfaces.api.workloads import gpu_for
    from gpuplan.specs.gpu import load_catalog

    cat = load_catalog()
    w = make_workload({"model": "llama-3.1-8b", "task": "inference", "gpu": "4090", "ecc": True})
    gpu = gpu_for(w, cat)
    assert gpu is not None and gpu.has_ecc
    assert gpu.visible_memory_bytes(True) == pytest.approx(24 * 2**30 * 15 / 16, rel=1e-9)
    assert not cat.get("RTX 3090").has_ecc and cat.get("L40S").has_ecc and cat.get("RTX 3090 Ti").has_ecc
