"""The command line: tables, JSON contracts (DESIGN.md) and one-line errors with exit code 2."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import RunCli
from gpuplan.interfaces.cli.common import fmt_energy, fmt_usd
from gpuplan.specs.workload import Workload

PEAK_KEYS = {"fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4"}


def test_gpus_json_contract(run_cli: RunCli) -> None:
    code, out, err = run_cli("gpus", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) >= 29
    for r in rows:
        for key in (
            "name", "aliases", "memory_bytes", "memory_bandwidth_bytes_per_s", "peak_flop_per_s",
            "tdp_watts", "form_factor", "multi_node", "graphics", "sources",
        ):  # fmt: skip
            assert key in r, key
        assert set(r["peak_flop_per_s"]) == PEAK_KEYS
        assert r["sources"] and all(s["read"] for s in r["sources"])
    h100 = next(r for r in rows if r["name"] == "H100 SXM5 80GB")
    assert h100["peak_flop_per_s"]["bf16"] == 989.5e12
    assert h100["peak_flop_per_s"]["int4"] is None
    assert h100["memory_bytes"] == 80 * 2**30


def test_gpus_filters(run_cli: RunCli) -> None:
    code, out, _ = run_cli("gpus", "--min-memory", "40", "--dtype", "fp8", "--json")
    names = {r["name"] for r in json.loads(out)}
    assert code == 0
    assert {"H100 SXM5 80GB", "L40S", "L40", "RTX 6000 Ada", "AMD Instinct MI300X"} <= names
    assert "A100 SXM4 80GB" not in names  # no fp8
    assert "L4" not in names  # 24 GiB
    _, out, _ = run_cli("gpus", "--graphics", "--json")
    graphics = {r["name"] for r in json.loads(out)}
    assert "L40" in graphics and "H100 SXM5 80GB" not in graphics and "A100 SXM4 80GB" not in graphics
    _, out, _ = run_cli("gpus", "--multi-node", "--json")
    multi = {r["name"] for r in json.loads(out)}
    assert "H100 SXM5 80GB" in multi and "A100 PCIe 40GB" in multi and "L4" not in multi


def test_gpus_table(run_cli: RunCli) -> None:
    code, out, _ = run_cli("gpus", "--vendor", "amd")
    assert code == 0
    assert "AMD Instinct MI300X" in out and "192 GiB" in out and "H100" not in out


def test_gpus_show(run_cli: RunCli) -> None:
    code, out, _ = run_cli("gpus", "show", "l4")
    assert code == 0
    assert "L4" in out and "300 GB/s" in out and "242.5" in out
    code, out, _ = run_cli("gpus", "show", "a100 80gb", "--json")
    rec = json.loads(out)
    assert rec["name"] == "A100 SXM4 80GB"
    assert rec["precision_support"]["fp8"]["runs_as"] == "bf16"


def test_compare_shows_the_seed_differences(run_cli: RunCli) -> None:
    code, out, err = run_cli("compare", "H100", "A100", "L4", "L40", "V100")
    assert code == 0, err
    # memory and bandwidth
    for s in ("80 GiB HBM3", "80 GiB HBM2e", "24 GiB GDDR6", "48 GiB GDDR6", "3.35 TB/s", "300 GB/s", "864 GB/s"):
        assert s in out, s
    # fp8 only on Hopper and Ada; SXM vs PCIe; graphics mode; multi-node
    assert "no FP8 tensor cores" in out  # A100 and V100
    assert "SXM5" in out and "PCIe" in out
    assert "No graphics mode" in out and "display + vGPU" in out
    assert "no (one host)" in out
    assert "no BF16 tensor cores" in out  # V100


def test_compare_json(run_cli: RunCli) -> None:
    code, out, _ = run_cli("compare", "h100", "4090", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["H100 SXM5 80GB", "GeForce RTX 4090"]
    assert any("1/2 of the FP16-accumulate rate" in q for q in rows[1]["quirks"])
    assert rows[1]["geforce_eula_forbids_datacenter"] is True


def test_model_json_contract(run_cli: RunCli) -> None:
    code, out, err = run_cli("model", "llama-3.1-8b", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["name"] == "llama-3.1-8b"
    assert rec["total_params"] == 8_030_261_248
    assert rec["active_params"] == 8_030_261_248
    assert rec["kv_bytes_per_token"] == 131_072
    assert rec["kv_bytes_per_token_beyond_windows"] == 131_072  # no sliding windows
    # gpt-oss: 12 of 24 layers slide over 128 tokens; past them only the full layers grow
    # (8 KV heads x 64 dims x K and V x 2 bytes = 2 KiB per layer)
    code, out, err = run_cli("model", "gpt-oss-20b", "--json")
    oss = json.loads(out)
    assert (oss["kv_bytes_per_token"], oss["kv_bytes_per_token_beyond_windows"]) == (24 * 2048, 12 * 2048)
    assert rec["flops_per_token"] == pytest.approx(2 * (8_030_261_248 - 128256 * 4096) + 4 * 32 * 4096 * 2048, rel=1e-4)


def test_model_table(run_cli: RunCli) -> None:
    code, out, _ = run_cli("model", "mixtral-8x7b")
    assert code == 0
    assert "46,702,792,704" in out and "2 of 8 experts" in out and "GQA" in out


def test_models_list(run_cli: RunCli) -> None:
    code, out, _ = run_cli("models", "--json")
    assert code == 0
    assert {"llama-3.1-8b", "gpt2", "deepseek-v3"} <= {r["name"] for r in json.loads(out)}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("gpus", "show", "h1000"), "Unknown GPU 'h1000'. Did you mean"),
        (("compare", "h100", "rtx9090"), "Unknown GPU 'rtx9090'"),
        (("compare", "h100"), "compare needs at least two GPUs"),
        (("gpus", "--dtype", "fp6"), "The 'dtype' filter must be one of"),
        (("model", "llama-9"), "Unknown model 'llama-9'"),
        (("model", "no/such.json"), "No such file"),
        (("model", "gpt2", "--seq-len", "0"), "'seq-len' parameter must be a positive"),
        (("gpus", "--min-memory", "lots"), "Invalid value"),
        (("frobnicate",), "No such command"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run_cli: RunCli, args: tuple[str, ...], message: str) -> None:
    code, out, err = run_cli(*args)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert out == ""


def test_malformed_config_and_catalog_files(run_cli: RunCli, tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama", "hidden_size": 4096')
    code, _, err = run_cli("model", str(bad))
    assert code == 2 and "not valid JSON" in err and err.count("\n") == 1
    unsupported = tmp_path / "rwkv.json"
    unsupported.write_text('{"model_type": "rwkv"}')
    code, _, err = run_cli("model", str(unsupported))
    assert code == 2 and "not supported" in err
    cat = tmp_path / "cat.toml"
    cat.write_text("[[gpu]]\nname = 'x'\n")
    code, _, err = run_cli("gpus", "--catalog", str(cat))
    assert code == 2 and "cat.toml" in err and err.count("\n") == 1


def test_user_catalog_on_the_command_line(run_cli: RunCli, tmp_path: Path) -> None:
    from helpers.catalog import USER_CATALOG

    f = tmp_path / "lab.toml"
    f.write_text(USER_CATALOG)
    code, out, err = run_cli("gpus", "show", "lab4090", "--catalog", str(f), "--json")
    assert code == 0, err
    assert json.loads(out)["tdp_watts"] == 300
    code, out, _ = run_cli("gpus", "--catalog", str(f), "show", "LAB4090")
    assert code == 0 and "our own nvidia-smi" in out
    code, out, _ = run_cli("compare", "lab4090", "4090", "--catalog", str(f))
    assert code == 0 and "Lab RTX 4090" in out


def test_model_flops_context_defaults_to_the_models_maximum(run_cli: RunCli) -> None:
    # BERT has 512 positions, ViT-B/16 at 224 px sees 196 patches + [CLS]
    for name, ctx in (("bert-base", 512), ("vit-b-16", 197), ("llama-3.1-8b", 2048)):
        code, out, _ = run_cli("model", name, "--json")
        assert code == 0 and json.loads(out)["flops_per_token_context"] == ctx


# --- memory commands ---------------------------------------------------------------------------


def test_fit_one_gpu_breakdown(run_cli: RunCli) -> None:
    code, out, err = run_cli("fit", "llama-3.1-8b", "--task", "lora", "--gpu", "4090", "--batch-size", "2",
                             "--seq-len", "2048", "--checkpointing", "full")  # fmt: skip
    assert code == 0, err
    for text in ("frozen base weights (bf16)", "LoRA adapters", "logits and loss", "CUDA context", "✓ fits"):
        assert text in out
    assert "largest batch that fits" in out


def test_fit_table_over_catalog(run_cli: RunCli) -> None:
    code, out, err = run_cli("fit", "llama-3.1-70b", "--task", "inference", "--json")
    assert code == 0, err
    rec = json.loads(out)
    rows = {r["gpu"]: r for r in rec["gpus"]}
    assert len(rows) >= 29
    assert rows["B200"]["fits"] and not rows["H100 SXM5 80GB"]["fits"]
    # one H200 holds what the job needs (1.40 GiB spare), but 131 GiB of bf16 weights exceed vLLM's 0.9
    # of the card: no KV cache, vLLM would not start; two (TP 2) do
    h200 = rows["H200 SXM 141GB"]
    assert not h200["fits"] and h200["headroom_bytes"] > 0 and h200["min_gpus"] == 2
    assert h200["serving"]["reserved_bytes"] < h200["per_gpu_bytes"] < h200["capacity_bytes"]
    assert rows["H100 SXM5 80GB"]["min_gpus"] == 2 and rows["H100 SXM5 80GB"]["min_gpus_layout"]["tp"] == 2


def test_estimate_json_contract(run_cli: RunCli, tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text("model: llama-3.1-8b\ntask: qlora\ngpu: RTX 4090\nbatch_size: 2\nseq_len: 2048\n"
                 "activation_checkpointing: full\n")  # fmt: skip
    code, out, err = run_cli("estimate", str(f), "--json")
    assert code == 0, err
    mem = json.loads(out)["memory"]
    assert mem["fits"] is True and mem["per_gpu_bytes"] == pytest.approx(sum(mem["breakdown"].values()))
    code, out, _ = run_cli("estimate", str(f), "--set", "batch_size=64", "--json")
    assert json.loads(out)["memory"]["fits"] is False


def test_validate_json_contract(run_cli: RunCli) -> None:
    code, out, err = run_cli("validate", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert {"id", "predicted", "published", "error"} <= set(rec["rows"][0])
    assert {"n", "median_abs_error", "mean_abs_error"} <= set(rec["summary"]["memory"])
    code, out, err = run_cli("validate")
    assert code == 0 and "Summary per category" in out and "not expressed" in out


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("fit", "llama-3.1-8b", "--gpu", "H1000"), "H1000"),
        (("fit", "llama-9b"), "llama-9b"),
        (("fit", "llama-3.1-8b", "--task", "dance"), "task"),
        (("fit", "llama-3.1-8b", "--set", "nonsense"), "KEY=VALUE"),
        (("estimate", "missing.yaml"), "No workload file"),
        (("validate", "--file", "missing.csv"), "No measurement file"),
        (("fit", "llama-3.1-8b", "--set", "tp=5", "--gpu", "H100"), "tp"),
        # an empty value is refused, not read as the default
        (
            ("estimate", "llama-3.1-8b", "--gpu", "H100", "--set", "attention_impl="),
            "--set attention_impl= has no value",
        ),
    ],
)
def test_memory_commands_bad_input(run_cli: RunCli, args: tuple[str, ...], match: str) -> None:
    code, _out, err = run_cli(*args)
    assert code == 2
    assert match in err and err.count("\n") == 1 and "Traceback" not in err


def test_bundled_examples(run_cli: RunCli) -> None:
    root = Path(__file__).resolve().parents[1] / "examples"
    code, out, err = run_cli("estimate", str(root / "lora-4090.yaml"), "--json")
    assert code == 0, err
    assert json.loads(out)["memory"]["fits"] is True  # torchtune runs this setting on a 4090
    code, out, err = run_cli("estimate", str(root / "serve-70b.yaml"), "--set", "weight_dtype=awq", "--json")
    assert code == 0, err
    serving = json.loads(out)["memory"]["serving"]
    assert serving["max_tokens"] > 100_000 and serving["max_sequences"] >= 16
    # gpt-oss-20b from its MXFP4 checkpoint (12.8 GiB of weights) fits a 24 GB card with room for the cache
    code, out, err = run_cli("estimate", str(root / "serve-gpt-oss-20b.yaml"), "--json")
    assert code == 0, err
    mem = json.loads(out)["memory"]
    assert mem["fits"] is True and "weights (mxfp4)" in mem["breakdown"]


# --- QA polish: words, not dicts; one full stop; --have spellings; figures that never round to zero ---


def test_fit_names_the_fewest_gpus_layout_in_words(run_cli: RunCli) -> None:
    code, out, err = run_cli("fit", "llama-3.1-8b", "--task", "finetune", "--gpu", "A100-40GB")
    assert code == 0, err
    assert "fewest A100 SXM4 40GB that fit: 8 (ZeRO-3)\n" in out and "{'" not in out
    code, out, err = run_cli("fit", "llama-3.1-70b", "--gpu", "A100-40GB")
    assert code == 0, err
    assert "fewest A100 SXM4 40GB that fit: 4 (TP 4)\n" in out and "{'" not in out


@pytest.mark.parametrize(("key", "value", "ends"), [("framework", "nemoo", "Did you mean: nemo?\n"),
                                                    ("optimizer", "adamx", "Did you mean: adam, adamw, adamw-8bit?\n")])  # fmt: skip
def test_a_hint_ends_the_line_without_a_second_full_stop(run_cli: RunCli, key: str, value: str, ends: str) -> None:
    code, out, err = run_cli("estimate", "llama-3.1-8b", "--task", "lora", "--gpu", "4090", "--set", f"{key}={value}")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.endswith(ends) and "?." not in err


@pytest.mark.parametrize("have", ["3090x2", "2x3090", "2 x 3090", "3090 x2", "3090 x 2", "RTX 3090 x2", "2× RTX 3090"])
def test_have_reads_count_first_and_name_first(run_cli: RunCli, have: str) -> None:
    code, out, err = run_cli("plan", "llama-3.2-1b", "--task", "lora", "--have", have, "--top", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["have"] == {"GeForce RTX 3090": 2}


@pytest.mark.parametrize(
    ("have", "message"),
    [("3090 2", "--have lists GPUs as COUNTx NAME (or NAMExCOUNT)"), ("4 RTX 3090", "Got '4 RTX 3090'"),
     ("3099x2", "Unknown GPU '3099'. Did you mean: 3090"), ("2x NoSuchGPU", "Unknown GPU 'NoSuchGPU'")],
)  # fmt: skip
def test_a_have_neither_way_round_is_one_clear_line(run_cli: RunCli, have: str, message: str) -> None:
    code, out, err = run_cli("plan", "llama-3.2-1b", "--task", "lora", "--have", have)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert message in err and "Unknown GPU '2'" not in err


def test_a_long_have_item_is_refused_at_once(run_cli: RunCli) -> None:
    """The item patterns backtrack quadratically on a run of spaces (20,000: ~5 s): a length cap first."""
    start = time.perf_counter()
    code, out, err = run_cli("plan", "llama-3.2-1b", "--task", "lora", "--have", "2x a" + " " * 20_000 + "y")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "an item of 20,005 characters is longer than any GPU name" in err
    assert time.perf_counter() - start < 2.0


def test_small_costs_and_energies_keep_three_significant_figures() -> None:
    cases = [(0.0030474, "$0.00305", "3.05 Wh"), (0.14, "$0.14", "140 Wh"), (0.0001, "$0.0001", "0.1 Wh"),
             (0.9996, "$1.00", "1.00 kWh"), (12.345, "$12.35", "12.35 kWh"), (0.0, "$0.00", "0.00 kWh")]  # fmt: skip
    for value, usd, energy in cases:
        assert (fmt_usd(value), fmt_energy(value)) == (usd, energy), value


def test_plan_on_owned_gpus_never_shows_zero_cost_or_energy(run_cli: RunCli) -> None:
    """Electricity for one LoRA step on owned cards is ~$0.003 per million tokens and ~1 Wh: the
    table showed $0.00/Mtok and 0.00 kWh on every row."""
    args = ("plan", "llama-3.1-8b", "--task", "lora", "--batch-size", "2", "--checkpointing", "full",
            "--have", "examples/lab.yaml")  # fmt: skip
    code, out, err = run_cli(*args)
    assert code == 0, err
    assert "$0.00/" not in out and "0.00 kWh" not in out
    code, js, err = run_cli(*args, "--json")
    assert code == 0, err
    first = json.loads(js)["options"][0]
    assert 1e-4 < first["usd_per_million_tokens"] < 0.1 and first["energy_kwh"] < 0.01  # what rounded to zero
    row = next(line for line in out.splitlines() if line.startswith("│ 1 "))
    assert f"{fmt_usd(first['usd_per_million_tokens'])}/Mtok" in row and fmt_energy(first["energy_kwh"]) in row


def test_validate_skip_reasons_do_not_deny_the_request_rate_key(run_cli: RunCli) -> None:
    """`request_rate` is a workload key: the SGLang ShareGPT rows are skipped for their length
    distribution, and their reason must not say a request-rate key is missing."""
    assert "request_rate" in Workload.model_fields
    code, out, err = run_cli("validate", "--json")
    assert code == 0, err
    skipped = json.loads(out)["skipped"]
    sgl = [s for s in skipped if s["id"].startswith("SGL-")]
    assert len(sgl) == 20
    assert all("length" in s["reason"] and "prompt" in s["reason"] for s in sgl)  # what is missing: the lengths
    assert not [s["id"] for s in skipped if "request rate yet" in s["reason"]]
