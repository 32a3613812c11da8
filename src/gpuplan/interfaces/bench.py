"""`gpuplan bench`: measure the local GPUs and write a calibration file (specs/calibration.py).

Needs PyTorch (the `bench` extra); nvidia-ml-py adds the driver, clocks and power limit. What is
measured, per device:
- matmul FLOP/s per precision (fp32, tf32, fp16, bf16; fp8 through torch._scaled_mm on compute
  capability 8.9+) over a sweep of square sizes, the best kept: Stas Bekman's "maximum achievable
  matmul FLOPS" method (ml-engineering, compute/accelerator/benchmarks/mamf-finder.py), which the
  built-in efficiency tables come from; 2 n^3 FLOPs per n x n matmul;
- device memory bandwidth: a large tensor copy, bytes read plus written per second (as STREAM's
  copy counts them, McCalpin 1995);
- host-to-device bandwidth: a pinned host tensor copied to the device.
Timing uses CUDA events after warm-up; the median of the repeats. The same functions run on the
CPU (device "cpu", perf_counter) so that tests cover them on machines without a GPU.
"""

from __future__ import annotations

import datetime as dt
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from gpuplan.errors import GpuplanError
from gpuplan.interfaces import api
from gpuplan.specs.calibration import FORMAT_VERSION
from gpuplan.specs.context import Context

SIZES: Final = (1024, 2048, 4096, 8192, 12288)  # square matmul sizes; the peak sits at the large end
QUICK_SIZES: Final = (1024, 4096)
COPY_BYTES: Final = 1 << 30  # 1 GiB: far beyond any L2 cache
H2D_BYTES: Final = 256 << 20
REPEATS: Final = 10
TORCH_DTYPES: Final = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}  # torch names


class NoGPUError(GpuplanError):
    """No GPU to measure (or no PyTorch to measure it with)."""


def load_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise NoGPUError("gpuplan bench and measure need PyTorch: pip install 'gpuplan[bench]'.") from None
    return torch


def _timed(torch: Any, device: str, fn: Callable[[], Any], repeats: int = REPEATS) -> float:
    """Median seconds of fn() after two warm-up calls."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return float(statistics.median(times))


def matmul_flops(device: str, precision: str, sizes: Sequence[int], repeats: int = REPEATS) -> dict[int, float]:
    """FLOP/s of an n x n matmul at each size (2 n^3 FLOPs)."""
    torch = load_torch()
    out: dict[int, float] = {}
    if precision == "fp8":
        if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
            return out
        scale = torch.tensor(1.0, device=device)
        for n in sizes:
            a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
            b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants

            def fp8(a: Any = a, b: Any = b) -> Any:
                return torch._scaled_mm(a, b, scale, scale, out_dtype=torch.bfloat16)

            out[n] = 2 * n**3 / _timed(torch, device, fp8, repeats)
        return out
    dtype = getattr(torch, TORCH_DTYPES[precision])
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    for n in sizes:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)

        def mm(a: Any = a, b: Any = b) -> Any:
            return a @ b

        out[n] = 2 * n**3 / _timed(torch, device, mm, repeats)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
    return out


def copy_bandwidth(device: str, nbytes: int = COPY_BYTES, repeats: int = REPEATS) -> float:
    """Device memory bandwidth: bytes read plus written per second by a tensor copy."""
    torch = load_torch()
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    return 2 * nbytes / _timed(torch, device, lambda: dst.copy_(src), repeats)


def host_to_device_bandwidth(device: str, nbytes: int = H2D_BYTES, repeats: int = REPEATS) -> float | None:
    """Bytes per second from pinned host memory to the device (None on the CPU)."""
    if not device.startswith("cuda"):
        return None
    torch = load_torch()
    src = torch.empty(nbytes // 4, dtype=torch.float32).pin_memory()
    dst = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    return nbytes / _timed(torch, device, lambda: dst.copy_(src, non_blocking=True), repeats)


def _nvml(index: int) -> dict[str, Any]:
    """Driver, clocks and power limit from NVML, where nvidia-ml-py is installed ({} otherwise)."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        info = {
            "driver": pynvml.nvmlSystemGetDriverVersion(),
            "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "max_memory_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000,
        }
        pynvml.nvmlShutdown()
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in info.items()}
    except Exception as exc:  # NVML missing or refusing: the measurement goes on without it
        return {"nvml_error": str(exc)}


def environment(torch: Any) -> dict[str, Any]:
    import importlib.metadata as md

    def version(pkg: str) -> str | None:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    return {
        "torch": torch.__version__,
        "cuda": getattr(torch.version, "cuda", None),
        "transformers": version("transformers"),
        "peft": version("peft"),
        "python": platform.python_version(),
        "date": dt.date.today().isoformat(),
    }


def devices(ctx: Context | None = None) -> list[dict[str, Any]]:
    """The local CUDA devices, each mapped to its catalog row. NoGPUError without one."""
    torch = load_torch()
    if not torch.cuda.is_available():
        raise NoGPUError(
            "No GPU to measure: torch.cuda.is_available() is False (no NVIDIA GPU or driver, or a CPU-only "
            "torch). Run gpuplan bench on the machine with the GPU."
        )
    cat = api.catalog(ctx)
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        match = cat.find(p.name)
        out.append(
            {
                "index": i,
                "device_name": p.name,
                "gpu": match.name if match else None,
                "memory_bytes": float(p.total_memory),
                "compute_capability": f"{p.major}.{p.minor}",
                "multiprocessors": p.multi_processor_count,
                **_nvml(i),
            }
        )
    return out


def bench(quick: bool = False, device_index: int = 0, ctx: Context | None = None) -> dict[str, Any]:
    """Measure one local GPU (`gpuplan bench`): the record and, under 'calibration', the file."""
    torch = load_torch()
    devs = devices(ctx)
    if not 0 <= device_index < len(devs):
        raise NoGPUError(f"No GPU {device_index}: this machine has {len(devs)} (0-{len(devs) - 1}).")
    d = devs[device_index]
    device = f"cuda:{device_index}"
    torch.cuda.set_device(device_index)
    sizes = QUICK_SIZES if quick else SIZES
    cc = tuple(int(x) for x in d["compute_capability"].split("."))
    precisions = ["fp32", "tf32", "fp16", "bf16"] + (["fp8"] if cc >= (8, 9) else [])
    if cc < (8, 0):
        precisions = [p for p in precisions if p not in ("tf32", "bf16")]  # no TF32/BF16 tensor cores
    sweep = {p: matmul_flops(device, p, sizes) for p in precisions}
    best = {p: max(v.values()) for p, v in sweep.items() if v}
    rec: dict[str, Any] = {
        **d,
        "matmul_flop_per_s_by_size": {p: {str(n): f for n, f in v.items()} for p, v in sweep.items()},
        "matmul_flop_per_s": best,
        "memory_bandwidth_bytes_per_s": copy_bandwidth(device),
        "host_to_device_bytes_per_s": host_to_device_bandwidth(device),
        "environment": environment(torch),
    }
    if d["gpu"] is not None:
        g = api.catalog(ctx).get(d["gpu"])
        rec["share_of_datasheet"] = {
            **{p: best[p] / peak for p in best if (peak := g.peak_flop_per_s.get(p))},
            "memory_bandwidth": rec["memory_bandwidth_bytes_per_s"] / g.memory_bandwidth_bytes_per_s,
        }
    rec["calibration"] = calibration(rec)
    return rec


def calibration(rec: dict[str, Any]) -> dict[str, Any]:
    """The calibration file's content for one measured device (specs/calibration.py)."""
    if rec.get("gpu") is None:
        raise NoGPUError(
            f"{rec.get('device_name')!r} matches no catalog GPU: add it with --catalog (see "
            "src/gpuplan/data/gpus/FORMAT.md) before calibrating it."
        )
    entry = {k: rec[k] for k in ("gpu", "device_name", "matmul_flop_per_s", "memory_bandwidth_bytes_per_s",
                                  "host_to_device_bytes_per_s", "environment") if k in rec}  # fmt: skip
    return {"gpuplan_calibration": FORMAT_VERSION, "gpus": [entry]}
