"""Graphics and video workloads: streams, users or frames one GPU sustains, and what limits it.

Four kinds (workload `task`):
- streaming: game/app streaming. Per stream: a share of the GPU's shader throughput and
  framebuffer (AWS GameLift Streams sizes its L4 classes so), and one NVENC encode.
- vdi: virtual desktops/workstations. Users = vGPU profiles of the persona's framebuffer that fit
  (NVIDIA's vGPU profiles cap at 32 per GPU); each user's display is encoded by NVENC.
- render: ray-traced frames per hour from Blender Cycles throughput (median Blender Open Data
  scores; per RT core and generation where a card was not measured).
- ai-video: decode (NVDEC) -> model -> optional encode (NVENC); streams are bounded by each stage.
Requirements come from catalog facts (graphics mode, RT cores, NVENC/NVDEC, the GeForce licence);
a GPU that misses one is unsuitable with the reason. Constants live in data/graphics.toml.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.specs import tomlcache
from gpuplan.specs.gpu import GIB, GPU
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload

RESOLUTIONS: Final = {"720p": (1280, 720), "1080p": (1920, 1080), "1440p": (2560, 1440), "4k": (3840, 2160)}
_REF_PIXELS: Final = 1920 * 1080
_ARCH: Final = {
    "pascal": "volta",  # graphics.toml's Volta NVENC/NVDEC rows are the app note's Pascal figures
    "volta": "volta",
    "turing": "turing",
    "ampere": "ampere",
    "ada lovelace": "ada",
    "hopper": "hopper",
    "blackwell": "blackwell",
}


@lru_cache(maxsize=1)
def constants() -> dict[str, Any]:
    text = (resources.files("gpuplan") / "data" / "graphics.toml").read_text(encoding="utf-8")
    return tomlcache.loads(text)


def _arch(gpu: GPU) -> str | None:
    a = _ARCH.get(gpu.architecture.lower())
    if a == "ampere" and gpu.name.startswith("A100"):
        return "ampere-ga100"
    return a


def pixels(resolution: str | None) -> int:
    key = (resolution or "1080p").lower().replace(" ", "")
    key = {"2160p": "4k", "uhd": "4k", "fhd": "1080p", "qhd": "1440p", "hd": "720p"}.get(key, key)
    if key not in RESOLUTIONS:
        raise InvalidSettingError(
            f"The 'resolution' key must be one of {', '.join(RESOLUTIONS)}. Got {resolution!r} instead."
        )
    w, h = RESOLUTIONS[key]
    return w * h


@dataclass(frozen=True)
class GraphicsCapacity:
    gpu: GPU
    suitable: bool
    reason: str  # why unsuitable, or what limits the capacity
    per_gpu: float  # streams, users, or frames per hour on one GPU
    unit: str  # "streams", "users", "frames/hour"
    limits: dict[str, float]  # each stage's own capacity (encode, decode, compute, memory, vgpu)
    bottleneck: str


def _unsuitable(gpu: GPU, unit: str, reason: str) -> GraphicsCapacity:
    return GraphicsCapacity(gpu, False, reason, 0.0, unit, {}, "unsuitable")


def nvenc_streams(gpu: GPU, codec: str, preset: str, fps: float, pix: int) -> float:
    """Concurrent encodes the card's NVENC engines sustain (fps scales with pixel count)."""
    table = constants()["nvenc_fps_1080p"].get(_arch(gpu) or "", {})
    per_engine = table.get(codec, {}).get(preset)
    if not gpu.nvenc or per_engine is None:
        return 0.0
    return float(gpu.nvenc * per_engine / (fps * pix / _REF_PIXELS))


def nvdec_streams(gpu: GPU, codec: str, fps: float, pix: int) -> float:
    table = constants()["nvdec_fps_1080p"].get(_arch(gpu) or "", {})
    per_engine = table.get(codec)
    if not gpu.nvdec or per_engine is None:
        return 0.0
    return float(gpu.nvdec * per_engine / (fps * pix / _REF_PIXELS))


def _common_requirements(gpu: GPU, w: Workload, unit: str, *, graphics: bool) -> GraphicsCapacity | None:
    if graphics and gpu.graphics == "none":
        why = "vGPU is compute-only" if gpu.vgpu == "compute" else "no display outputs or graphics vGPU"
        return _unsuitable(gpu, unit, f"no graphics mode ({why})")
    if gpu.geforce_eula and w.datacenter:
        return _unsuitable(gpu, unit, "GeForce licence: not licensed for datacenter deployment (sec. 2.1.3)")
    return None


def _min_limit(limits: dict[str, float]) -> tuple[float, str]:
    name = min(limits, key=lambda k: limits[k])
    return limits[name], name


def _result(gpu: GPU, limits: dict[str, float], unit: str) -> GraphicsCapacity:
    cap, why = _min_limit(limits)
    n = float(math.floor(cap))
    if n < 1:
        return GraphicsCapacity(gpu, False, f"too slow: {why} sustains {cap:.2f} {unit}", 0.0, unit, limits, why)
    return GraphicsCapacity(gpu, True, why, n, unit, limits, why)


def streaming_capacity(gpu: GPU, w: Workload) -> GraphicsCapacity:
    c = constants()["streaming"]
    bad = _common_requirements(gpu, w, "streams", graphics=True)
    if bad:
        return bad
    if gpu.nvenc == 0:
        return _unsuitable(gpu, "streams", "no NVENC encoder")
    pix, fps = pixels(w.resolution), w.fps or 60.0
    cls = w.scene
    # compute: the stream's share of an L4 at 1080p60, scaled by pixels x fps, against fp32 rate
    ref_fp32 = c["reference_fp32_TFLOPS"] * 1e12  # the GameLift classes are shares of one L4
    need = c["l4_share"][cls] * ref_fp32 * (pix / _REF_PIXELS) * (fps / 60.0)
    limits = {
        "encode (NVENC)": nvenc_streams(gpu, w.codec, "p1", fps, pix),
        "shader compute": (gpu.peak_flop_per_s.get("fp32") or 0.0) / need,
        "memory": gpu.memory_bytes / GIB / c["vram_GB"][cls],
    }
    if gpu.geforce_eula:
        limits["GeForce encode-session cap"] = float(c["geforce_session_cap"])
    return _result(gpu, limits, "streams")


def vdi_capacity(gpu: GPU, w: Workload) -> GraphicsCapacity:
    c = constants()["vgpu"]
    bad = _common_requirements(gpu, w, "users", graphics=True)
    if bad:
        return bad
    if gpu.vgpu not in ("graphics", "passthrough"):
        return _unsuitable(gpu, "users", "no graphics vGPU (vWS/vPC) profiles for this card")
    profile_gb = c["persona_GB"][w.persona]
    mem_gb = gpu.memory_bytes / GIB
    pix, fps = pixels(w.resolution), w.fps or 30.0
    # passthrough (AWS G5): the whole GPU goes to one VM, one virtual workstation per GPU
    # (AWS: G5 for "remote workstations"); vGPU profiles share the card among VMs
    sessions = float(min(math.floor(mem_gb / profile_gb), c["max_instances"]))
    limits = {
        ("one VM per GPU (passthrough)" if gpu.vgpu == "passthrough" else "vGPU profiles"): (
            min(sessions, 1.0) if gpu.vgpu == "passthrough" else sessions
        ),
        "encode (NVENC)": nvenc_streams(gpu, w.codec, "p1", fps, pix) if gpu.nvenc else float("inf"),
    }
    return _result(gpu, limits, "users")


def blender_score(gpu: GPU) -> tuple[float, str]:
    """Blender Cycles samples per minute (median, Blender 5.2.0), measured or per RT core."""
    r = constants()["render"]
    if gpu.name in r["measured_score"]:
        return float(r["measured_score"][gpu.name]), "Blender Open Data median"
    per_core = r["score_per_rt_core"].get(str(gpu.rt_core_gen))
    if not gpu.rt_cores or per_core is None:
        return 0.0, "no RT cores"
    return gpu.rt_cores * float(
        per_core
    ), f"{gpu.rt_cores} gen-{gpu.rt_core_gen} RT cores x {per_core:g} (GeForce medians)"


def render_capacity(gpu: GPU, w: Workload) -> GraphicsCapacity:
    bad = _common_requirements(gpu, w, "frames/hour", graphics=False)
    if bad:
        return bad
    if gpu.rt_cores == 0:
        why = "no graphics mode and no RT cores" if gpu.graphics == "none" else "no RT cores"
        return _unsuitable(gpu, "frames/hour", f"{why}: ray tracing would run on the shader cores alone")
    r = constants()["render"]
    score, how = blender_score(gpu)
    # score = samples/min summed over 3 scenes of ~1.74 Mpx; a frame of `spp` samples at `pixels`
    per_scene = score / r["scenes"]
    frames_per_hour = per_scene * 60.0 / w.spp * (r["scene_mean_pixels"] / pixels(w.resolution))
    return GraphicsCapacity(gpu, True, how, frames_per_hour, "frames/hour", {"ray tracing": frames_per_hour}, how)


def ai_video_capacity(gpu: GPU, w: Workload, model: ModelSpec) -> GraphicsCapacity:
    bad = _common_requirements(gpu, w, "streams", graphics=False)
    if bad:
        return bad
    if gpu.nvdec == 0:
        return _unsuitable(gpu, "streams", "no NVDEC video decoder")
    if w.encode_output and gpu.nvenc == 0:
        return _unsuitable(gpu, "streams", "no NVENC encoder for the annotated output")
    pix, fps = pixels(w.resolution), w.fps or 30.0
    eff = constants()["ai_video"]["inference_efficiency"]
    peak = gpu.peak_flop_per_s.get("int8") or gpu.peak_flop_per_s.get("fp16") or 0.0
    per_frame = model.flops_per_token()  # per image at the model's input size (frames are resized)
    limits = {
        "decode (NVDEC)": nvdec_streams(gpu, w.codec, fps, pix),
        "model compute": peak * eff / (per_frame * fps) if per_frame > 0 else float("inf"),
    }
    if w.encode_output:
        limits["encode (NVENC)"] = nvenc_streams(gpu, w.codec, "p3", fps, pix)
    return _result(gpu, limits, "streams")


def graphics_capacity(gpu: GPU, w: Workload, model: ModelSpec | None = None) -> GraphicsCapacity:
    if w.task == "streaming":
        return streaming_capacity(gpu, w)
    if w.task == "vdi":
        return vdi_capacity(gpu, w)
    if w.task == "render":
        return render_capacity(gpu, w)
    if w.task == "ai-video":
        if model is None:
            raise InvalidSettingError("task 'ai-video' needs a vision model (e.g. model: resnet-50).")
        return ai_video_capacity(gpu, w, model)
    raise InvalidSettingError(f"task {w.task!r} is not a graphics workload.")
