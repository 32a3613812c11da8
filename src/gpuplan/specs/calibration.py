"""Calibration files: what `gpuplan bench` measured on a user's own cards, used by `estimate` and
`plan` (`--calibration FILE`) in place of the built-in efficiencies for those cards.

    gpuplan_calibration: 1
    gpus:
      - gpu: H200 SXM 141GB            # catalog name (bench maps the device to it)
        device_name: NVIDIA H200
        matmul_flop_per_s: {bf16: 7.1e14, fp16: 7.2e14, tf32: 3.7e14, fp32: 5.1e13, fp8: 1.3e15}
        memory_bandwidth_bytes_per_s: 4.1e12
        host_to_device_bytes_per_s: 5.3e10
        environment: {driver: ..., cuda: ..., torch: ...}

The matmul figures are the best over bench's size sweep (the "maximum achievable matmul FLOPS"
that the built-in tables hold from published runs); the bandwidth is a device copy's bytes read
plus written per second. Read with the safe YAML loader; one clear line per problem.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.safeio import clip_repr
from gpuplan.specs.gpu import GB, GBPS_MAX, GBPS_MIN, GPU, TERA, TFLOPS_MAX, TFLOPS_MIN, Catalog
from gpuplan.specs.precision import COMPUTE_PRECISIONS
from gpuplan.specs.workload import read_user_text, safe_yaml

FORMAT_VERSION: Final = 1
SUFFIXES: Final = (".yaml", ".yml")  # how a calibration file is told from a catalog file (TOML)


def _positive(value: Any, what: str, origin: str, low: float, high: float) -> float:
    """A measured rate within the catalog's own bounds for the figure (specs/gpu.py): a bandwidth
    of 1e-300 B/s made every time infinite (a ZeroDivisionError, a NaN at --json)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InvalidSettingError(f"{origin}: {what} must be a positive number. Got {clip_repr(value)}.")
    if not low <= value <= high:
        raise InvalidSettingError(f"{origin}: {what} must be from {low:.0e} to {high:.0e}. Got {clip_repr(value)}.")
    return float(value)


def calibrated_gpus(data: Any, catalog: Catalog, origin: str) -> list[GPU]:
    """The catalog rows a calibration mapping measures, with the measured figures filled in."""
    if not isinstance(data, dict) or data.get("gpuplan_calibration") != FORMAT_VERSION:
        raise InvalidSettingError(
            f"{origin} is not a gpuplan calibration file (no 'gpuplan_calibration: {FORMAT_VERSION}'); "
            "write one with `gpuplan bench --out FILE`."
        )
    entries = data.get("gpus")
    if not isinstance(entries, list) or not entries:
        raise InvalidSettingError(f"{origin}: 'gpus' must be a non-empty list.")
    out = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("gpu"), str):
            raise InvalidSettingError(f"{origin}: entry {i + 1} needs 'gpu' (a catalog name).")
        gpu = catalog.get(e["gpu"])
        matmul = e.get("matmul_flop_per_s") or {}
        if not isinstance(matmul, dict):
            raise InvalidSettingError(f"{origin}: {gpu.name}: matmul_flop_per_s must map precision to FLOP/s.")
        rates: dict[str, float] = {}
        for p, v in matmul.items():
            if p not in COMPUTE_PRECISIONS:
                raise InvalidSettingError(
                    f"{origin}: {gpu.name}: unknown precision {clip_repr(p)} (one of {', '.join(COMPUTE_PRECISIONS)})."
                )
            rates[p] = _positive(v, f"{gpu.name} matmul_flop_per_s.{p}", origin, TFLOPS_MIN * TERA, TFLOPS_MAX * TERA)
        bw = e.get("memory_bandwidth_bytes_per_s")
        bandwidth = (
            None
            if bw is None
            else _positive(bw, f"{gpu.name} memory_bandwidth_bytes_per_s", origin, GBPS_MIN * GB, GBPS_MAX * GB)
        )
        out.append(replace(gpu, measured_matmul_flop_per_s=rates, measured_bandwidth_bytes_per_s=bandwidth))
    return out


def apply_calibration(catalog: Catalog, path: str | Path) -> Catalog:
    """The catalog with the GPUs a calibration file measured replaced by their calibrated rows."""
    p = Path(path)
    data = safe_yaml(read_user_text(p, "calibration file", "Write one with `gpuplan bench --out FILE`."), p.name)
    return Catalog([*catalog, *calibrated_gpus(data, catalog, p.name)])
