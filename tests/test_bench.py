"""gpuplan bench and measure (interfaces/bench.py, interfaces/measure.py) and calibration files
(specs/calibration.py). This machine has no GPU: the measuring functions run on the CPU (the same
code, timed with perf_counter), the commands must refuse cleanly, and a calibration file must
change the estimate exactly as its measured figures say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from conftest import RunCli
from gpuplan.estimators import efficiency as eff
from gpuplan.interfaces import api, bench
from gpuplan.interfaces.measure import measure
from gpuplan.specs.context import Context
from gpuplan.specs.workload import make_workload

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")


def test_measuring_functions_on_the_cpu() -> None:
    flops = bench.matmul_flops("cpu", "fp32", [64, 128], repeats=3)
    assert set(flops) == {64, 128} and all(1e6 < f < 1e13 for f in flops.values())  # a CPU: MFLOP/s to TFLOP/s
    bw = bench.copy_bandwidth("cpu", 8 << 20, repeats=3)
    assert 1e8 < bw < 1e12  # a CPU's memory: 0.1-1000 GB/s
    assert bench.host_to_device_bandwidth("cpu") is None


@NO_GPU
def test_bench_without_a_gpu_says_so_in_one_line(run_cli: RunCli) -> None:
    code, out, err = run_cli("bench")
    assert code == 2 and out == ""
    assert err.startswith("gpuplan: error: No GPU to measure") and len(err.strip().splitlines()) == 1


@NO_GPU
def test_measure_without_a_gpu_points_to_the_cpu_check(run_cli: RunCli) -> None:
    code, _, err = run_cli("measure", "llama-3.2-1b", "--set", "task=lora")
    assert code == 2 and "--device cpu" in err and len(err.strip().splitlines()) == 1


def calibration_for(gpu: str, matmul_share: float, bandwidth_share: float) -> dict[str, Any]:
    g = api.catalog().get(gpu)
    rec = {
        "gpu": g.name,
        "device_name": f"NVIDIA {g.name}",
        "matmul_flop_per_s": {"bf16": matmul_share * g.peak_flop_per_s["bf16"]},  # type: ignore[operator]
        "memory_bandwidth_bytes_per_s": bandwidth_share * g.memory_bandwidth_bytes_per_s,
        "host_to_device_bytes_per_s": 5e10,
        "environment": {"torch": "test"},
    }
    return bench.calibration(rec)


def test_a_calibration_file_replaces_the_efficiencies(tmp_path: Path, run_cli: RunCli) -> None:
    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump(calibration_for("H100", 0.5, 0.5)), encoding="utf-8")
    cat = api.catalog(Context.of([path]))
    h100 = cat.get("H100")
    assert eff.gemm_efficiency(h100, "bf16").value == pytest.approx(0.5)
    assert eff.bandwidth_efficiency(h100) == pytest.approx(0.5)
    assert eff.gemm_efficiency(h100, "fp8").value == eff.gemm_efficiency(api.catalog().get("H100"), "fp8").value
    assert api.catalog().get("H100").measured_matmul_flop_per_s == {}  # the bundled catalog is untouched

    train = make_workload({"model": "llama-3.2-3b", "task": "pretrain", "gpu": "H100", "batch_size": 4,
                           "activation_checkpointing": "full"})  # fmt: skip
    base, cal = api.estimate(train).to_dict(), api.estimate(train, Context.of([path])).to_dict()
    # compute-bound GEMMs at 0.5 of peak instead of the built-in ~0.7: the step is slower by about that ratio
    ratio = cal["time"]["step_time_s"] / base["time"]["step_time_s"]
    builtin = eff.gemm_efficiency(api.catalog().get("H100"), "bf16").value
    assert 1.0 < ratio < builtin / 0.5 * 1.05
    serve = make_workload({"model": "llama-3.1-8b", "task": "inference", "gpu": "H100", "batch_size": 1})
    # decode at batch 1 streams the weights: memory-bound, so TPOT follows the bandwidth share 0.80 -> 0.5
    tpot = (
        api.estimate(serve, Context.of([path])).to_dict()["time"]["tpot_s"]
        / api.estimate(serve).to_dict()["time"]["tpot_s"]
    )
    assert tpot == pytest.approx(eff.KERNEL_BW_EFF / 0.5, rel=0.15)
    # the CLI takes it as --calibration
    code, out, err = run_cli("estimate", "llama-3.1-8b", "--gpu", "H100", "--set", "task=inference",
                             "--calibration", str(path), "--json")  # fmt: skip
    assert code == 0, err
    import json

    assert json.loads(out)["time"]["tpot_s"] == pytest.approx(
        api.estimate(serve, Context.of([path])).to_dict()["time"]["tpot_s"]
    )


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ({"gpus": []}, r"not a gpuplan calibration file"),
        ({"gpuplan_calibration": 1, "gpus": [{"gpu": "H1000"}]}, r"Unknown GPU 'H1000'"),
        ({"gpuplan_calibration": 1, "gpus": [{"gpu": "H100", "matmul_flop_per_s": {"bf16": -1}}]},
         r"matmul_flop_per_s.bf16 must be a positive number"),
        ({"gpuplan_calibration": 1, "gpus": [{"gpu": "H100", "matmul_flop_per_s": {"int3": 1e12}}]},
         r"unknown precision 'int3'"),
    ],
)  # fmt: skip
def test_bad_calibration_files(tmp_path: Path, run_cli: RunCli, content: dict[str, Any], pattern: str) -> None:
    import re

    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump(content), encoding="utf-8")
    code, _, err = run_cli("estimate", "llama-3.1-8b", "--gpu", "H100", "--calibration", str(path))
    assert code == 2 and re.search(pattern, err) and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "keys",
    [
        {"model": "llama-3.2-1b", "task": "lora", "batch_size": 2, "seq_len": 64, "activation_checkpointing": "full"},
        {"model": "gpt2", "task": "pretrain", "batch_size": 2, "seq_len": 64, "grad_accum": 2},
        {"model": "qwen2.5-0.5b", "task": "inference", "batch_size": 2, "input_len": 16, "output_len": 4},
    ],
)
def test_measure_runs_the_same_code_on_a_tiny_model_on_the_cpu(keys: dict[str, Any]) -> None:
    rec = measure(make_workload(keys), steps=3, device="cpu")
    assert rec["tiny"] and rec["device"] == "cpu" and "estimate" not in rec  # nothing to compare on a CPU
    if keys["task"] == "inference":
        assert rec["ttft_s"] > 0 and rec["tpot_s"] >= 0
    else:
        assert rec["step_time_s"] > 0
        assert rec["tokens_per_s"] == pytest.approx(
            keys["batch_size"] * 64 * keys.get("grad_accum", 1) / rec["step_time_s"]
        )
    assert rec["environment"]["torch"] == torch.__version__
