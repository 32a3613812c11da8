"""The catalog face: GPUs, their records, filters and comparisons, and the context they come from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuplan.errors import InvalidSettingError
from gpuplan.specs.context import Context
from gpuplan.specs.gpu import GB, GPU, Catalog, source_summary
from gpuplan.specs.precision import COMPUTE_PRECISIONS, compute_peak
from gpuplan.specs.prices import Price


def context(ctx: Context | None = None) -> Context:
    """The caller's context, or a fresh one with no user files (the environment still applies)."""
    return ctx if ctx is not None else Context()


def catalog(ctx: Context | None = None) -> Catalog:
    """The bundled catalog plus the context's files (and $GPUPLAN_CATALOG): catalog rows (TOML)
    and calibration files (YAML from `gpuplan bench`), which replace the efficiencies of the GPUs
    they measured."""
    return context(ctx).catalog


def precision_support(gpu: GPU) -> dict[str, dict[str, Any]]:
    """For each compute precision: the peak a matmul gets, what runs it, and why if it falls back."""
    out: dict[str, dict[str, Any]] = {}
    for p in COMPUTE_PRECISIONS:
        peak = compute_peak(gpu, p)
        out[p] = {
            "native": peak.reason == "",
            "runs_as": peak.runs_as,
            "flop_per_s": peak.flop_per_s,
            "reason": peak.reason,
        }
    return out


def quirks(gpu: GPU) -> list[str]:
    """What a planner must know about a GPU beyond its headline numbers, as sentences."""
    q: list[str] = []
    if gpu.fp16_fp16acc_flop_per_s and gpu.peak_flop_per_s.get("fp16"):
        ratio = gpu.fp16_fp16acc_flop_per_s / gpu.peak_flop_per_s["fp16"]  # type: ignore[operator]
        if ratio > 1.01:
            q.append(
                f"FP16/BF16 tensor math with FP32 accumulate (what mixed-precision training uses) runs at "
                f"1/{ratio:.0f} of the FP16-accumulate rate ({gpu.fp16_fp16acc_flop_per_s / 1e12:.0f} TFLOP/s)."
            )
    for p in ("bf16", "tf32", "fp8", "int8", "int4"):
        reason = compute_peak(gpu, p).reason
        if reason:
            q.append(reason)
    if gpu.graphics == "none":
        q.append("No graphics mode: no display outputs and no graphics vGPU; compute only.")
    elif gpu.vgpu == "passthrough":
        q.append(
            "Graphics as a whole GPU passed through to one VM (GRID/gaming drivers): no vGPU profiles to share it."
        )
    if gpu.geforce_eula:
        q.append("GeForce driver licence (clause 2.1.3) forbids datacenter deployment.")
    if not gpu.multi_node:
        q.append("Meant for one host: no scale-out fabric; multi-node jobs only over Ethernet/PCIe NICs.")
    if gpu.nvlink_domain <= 1:
        q.append("No NVLink: GPU-to-GPU traffic goes over PCIe.")
    elif gpu.nvlink_domain == 2:
        q.append("NVLink bridge joins pairs only; beyond two GPUs traffic goes over PCIe.")
    return q


def gpu_record(gpu: GPU) -> dict[str, Any]:
    """A GPU as JSON (the `gpus --json` keys, SI units)."""
    return {
        "name": gpu.name,
        "aliases": list(gpu.aliases),
        "vendor": gpu.vendor,
        "architecture": gpu.architecture,
        "chip": gpu.chip,
        "compute_capability": gpu.compute_capability or None,
        "form_factor": gpu.form_factor,
        "memory_bytes": gpu.memory_bytes,
        "memory_unit_stated": gpu.memory_unit_stated,
        "memory_type": gpu.memory_type,
        "memory_bandwidth_bytes_per_s": gpu.memory_bandwidth_bytes_per_s,
        "peak_flop_per_s": dict(gpu.peak_flop_per_s),
        "fp16_fp16acc_flop_per_s": gpu.fp16_fp16acc_flop_per_s,
        "fp4_flop_per_s": gpu.fp4_flop_per_s,
        "tdp_watts": gpu.tdp_watts,
        "nvlink_bandwidth_bytes_per_s": gpu.nvlink_bandwidth_bytes_per_s,
        "nvlink_domain": gpu.nvlink_domain,
        "pcie_gen": gpu.pcie_gen,
        "multi_node": gpu.multi_node,
        "mig_instances": gpu.mig_instances,
        "graphics": gpu.graphics,
        "display_outputs": gpu.display_outputs,
        "vgpu": gpu.vgpu,
        "rt_cores": gpu.rt_cores,
        "rt_core_gen": gpu.rt_core_gen,
        "nvenc": gpu.nvenc,
        "nvdec": gpu.nvdec,
        "launch_year": gpu.launch_year,
        "geforce_eula_forbids_datacenter": gpu.geforce_eula,
        "precision_support": precision_support(gpu),
        "quirks": quirks(gpu),
        "notes": gpu.notes,
        "sources": source_summary(gpu),
    }


def gpu_menu_record(gpu: GPU) -> dict[str, Any]:
    """A GPU in brief, for a menu: the `gpu_record` keys a picker needs."""
    return {
        "name": gpu.name,
        "vendor": gpu.vendor,
        "memory_bytes": gpu.memory_bytes,
        "graphics": gpu.graphics != "none",
    }


def list_gpus(
    *,
    min_memory_gb: float | None = None,
    dtype: str | None = None,
    graphics: bool | None = None,
    multi_node: bool | None = None,
    vendor: str | None = None,
    ctx: Context | None = None,
) -> list[GPU]:
    """Catalog GPUs passing every given filter (memory in decimal GB, as on datasheets)."""
    if dtype is not None and dtype.lower() not in COMPUTE_PRECISIONS:
        raise InvalidSettingError(
            f"The 'dtype' filter must be one of {', '.join(COMPUTE_PRECISIONS)}. Got {dtype!r} instead."
        )
    if min_memory_gb is not None and min_memory_gb < 0:
        raise InvalidSettingError(f"The 'min-memory' filter must be >= 0 GB. Got {min_memory_gb} instead.")
    out = []
    for g in catalog(ctx):
        if min_memory_gb is not None and g.memory_bytes < min_memory_gb * GB:
            continue
        if dtype is not None and not g.supports(dtype.lower()):
            continue
        if graphics is not None and (g.graphics != "none") != graphics:
            continue
        if multi_node is not None and g.multi_node != multi_node:
            continue
        if vendor is not None and g.vendor.lower() != vendor.lower():
            continue
        out.append(g)
    return out


def get_gpu(name: str, ctx: Context | None = None) -> GPU:
    return catalog(ctx).get(name)


def compare_gpus(names: Sequence[str], ctx: Context | None = None) -> list[GPU]:
    if len(names) < 2:
        raise InvalidSettingError(f"compare needs at least two GPUs. Got {len(names)}.")
    cat = catalog(ctx)
    return [cat.get(n) for n in names]


def prices(ctx: Context | None = None, spot: bool = False) -> dict[str, Price]:
    """The cheapest offer per GPU: a user's price file (same columns) overrides the bundled one."""
    return context(ctx).prices(spot)


def use_case_record(gpu: GPU) -> dict[str, Any]:
    """`gpus --use-cases`: suitability for compute, graphics and multi-node work, and advice."""
    from gpuplan.planner.use_cases import use_cases

    u = use_cases(gpu)
    return {
        "name": u.name,
        "compute": u.compute,
        "graphics": u.graphics,
        "graphics_class": u.graphics_class,
        "multi_node": u.multi_node,
        "recommendation": u.recommendation,
    }
