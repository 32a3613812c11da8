"""What each GPU is for: compute, graphics and multi-node suitability, and a one-line advice.

Every verdict is a rule over catalog facts (dense bf16/fp16 rate, memory, FP8, graphics mode,
RT cores, NVENC, TDP, multi-node support, the GeForce licence), never a per-card table, so a
card added to the catalog gets a verdict too. The thresholds are stated where they are used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gpuplan.specs.gpu import GIB, GPU

TERA: Final = 1e12

# Compute tiers by dense 16-bit tensor rate (fp32 accumulate), the rate training gets:
# Hopper/Blackwell/MI300X >= 700 TF, A100-class >= 250 TF, L40S/4090-class >= 100 TF.
_TOP_TF: Final = 700.0
_HIGH_TF: Final = 250.0
_GOOD_TF: Final = 100.0
# Low-profile cards powered from the slot (PCIe CEM: 75 W) are the "entry" datacenter cards.
_SLOT_POWER_W: Final = 75.0
# Graphics classes: 4K streaming/rendering needs a large framebuffer (NVIDIA positions the
# 48 GB Ada cards for 4K; L4 24 GB for 1080p) and a recent RT core generation.
_4K_MEMORY_GIB: Final = 48.0


def _tf16(g: GPU) -> float:
    rates = [g.peak_flop_per_s.get("bf16"), g.peak_flop_per_s.get("fp16")]
    return max((r for r in rates if r is not None), default=0.0) / TERA


@dataclass(frozen=True)
class UseCases:
    name: str
    compute: str
    graphics: str
    graphics_class: str  # "none", "vws" (virtual workstation only), "1080p", "1440p", "4k"
    multi_node: str
    recommendation: str


def compute_suitability(g: GPU) -> str:
    tf = _tf16(g)
    mem = g.memory_bytes / GIB
    fp8 = g.peak_flop_per_s.get("fp8") is not None
    bf16 = g.peak_flop_per_s.get("bf16") is not None
    facts = f"{tf:,.0f} TFLOP/s 16-bit, {mem:,.0f} GiB" + (", FP8" if fp8 else "") + ("" if bf16 else ", no BF16")
    if not bf16:
        tier = "legacy"  # pre-Ampere NVIDIA: fp16 with loss scaling only
    elif tf >= _TOP_TF:
        tier = "top"
    elif tf >= _HIGH_TF:
        tier = "high"
    elif tf >= _GOOD_TF:
        tier = "good"
    else:
        tier = "entry"
    return f"{tier}: {facts}"


def graphics_class(g: GPU) -> str:
    if g.graphics == "none":
        return "none"
    if g.rt_cores == 0:
        return "vws"  # vGPU graphics without RT cores: virtual desktops / workstations
    mem = g.memory_bytes / GIB
    if mem >= _4K_MEMORY_GIB and g.rt_core_gen >= 2:
        return "4k"
    if g.tdp_watts <= _SLOT_POWER_W or mem < 20:
        return "1080p"
    return "1440p"


def _workstations(g: GPU) -> str:
    if g.vgpu == "graphics":
        return ", virtual workstations"
    return ", one virtual workstation per GPU (passthrough)" if g.vgpu == "passthrough" else ""


def graphics_suitability(g: GPU) -> str:
    cls = graphics_class(g)
    if cls == "none":
        why = "vGPU is compute-only" if g.vgpu == "compute" else "no display outputs or graphics vGPU"
        return f"none: no graphics mode ({why})"
    parts = {
        "vws": "virtual workstations and desktops (vGPU; no RT cores)",
        "1080p": "1080p streaming, video" + (", virtual desktops" if g.vgpu == "graphics" else ""),
        "1440p": "1440p streaming, rendering" + _workstations(g),
        "4k": "4K streaming, ray-traced rendering" + _workstations(g),
    }[cls]
    extra = []
    if g.rt_cores:
        extra.append(f"{g.rt_cores} RT cores (gen {g.rt_core_gen})")
    extra.append(f"{g.nvenc} NVENC" if g.nvenc else "no NVENC")
    if g.geforce_eula:
        extra.append("GeForce licence: no datacenter deployment")
    return f"{cls}: {parts} — " + ", ".join(extra)


def multi_node_suitability(g: GPU) -> str:
    if g.multi_node:
        link = f"NVLink {g.nvlink_bandwidth_bytes_per_s / 1e9:,.0f} GB/s" if g.nvlink_bandwidth_bytes_per_s else "PCIe"
        return f"yes: scales across hosts ({link} in the node, InfiniBand/RoCE between)"
    return "single host: no multi-node support (scale within one server)"


def recommendation(g: GPU) -> str:
    tf = _tf16(g)
    fp8 = g.peak_flop_per_s.get("fp8") is not None
    bf16 = g.peak_flop_per_s.get("bf16") is not None
    cls = graphics_class(g)
    if g.geforce_eula:
        return "desk-side research: fine-tuning and inference on one card (the GeForce licence bars datacenters)"
    if cls == "none":
        if g.multi_node and fp8 and tf >= _TOP_TF:
            return "LLMs and transformers: distributed training and inference"
        if g.multi_node and not fp8:
            return "value for single-node CNN training (16-bit, no FP8)"
        return "compute: training and inference"
    if cls == "4k" and fp8:
        return "generative inference and visual computing"
    if g.tdp_watts <= _SLOT_POWER_W and fp8:
        return "affordable general-purpose entry card: inference, video and 1080p graphics"
    if g.tdp_watts <= _SLOT_POWER_W:
        return "entry inference, video transcoding and virtual desktops"
    if cls == "vws" and not bf16:
        return "legacy 16-bit training still found in clouds; possible virtual-workstation card"
    if cls == "4k":
        return "visual computing: rendering, virtual workstations, mid-size inference"
    return "graphics and mid-range inference: virtual workstations, streaming, small-model serving"


def use_cases(g: GPU) -> UseCases:
    return UseCases(
        name=g.name,
        compute=compute_suitability(g),
        graphics=graphics_suitability(g),
        graphics_class=graphics_class(g),
        multi_node=multi_node_suitability(g),
        recommendation=recommendation(g),
    )
