"""Graphics and video workloads: each kind, the seed's claims, and the catalog rules behind them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import RunCli
from gpuplan.estimators.graphics import graphics_capacity, nvdec_streams, nvenc_streams, pixels
from gpuplan.planner.graphics import plan_graphics
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import make_workload

DATACENTER_COMPUTE = ("H100", "H200", "B200", "A100 80GB", "A100 40GB", "MI300X")


def cap(catalog: Catalog, gpu: str, **keys: Any) -> Any:
    w = make_workload(keys)
    return graphics_capacity(catalog.get(gpu), w, load_model(w.model) if w.model else None)


def test_nvenc_and_nvdec_by_hand(catalog: Catalog) -> None:
    # NVENC app note 13.0: Ada H.264 P1 low-latency 910 fps per engine at 1080p; L4 has 2 engines
    assert nvenc_streams(catalog.get("L4"), "h264", "p1", 60, pixels("1080p")) == pytest.approx(2 * 910 / 60)
    assert nvenc_streams(catalog.get("L4"), "h264", "p1", 60, pixels("4k")) == pytest.approx(2 * 910 / 240)
    assert nvenc_streams(catalog.get("H100"), "h264", "p1", 30, pixels("1080p")) == 0  # no NVENC
    # NVDEC app note: Hopper decodes like Turing, 771 fps H.264 per engine; H100 has 7
    assert nvdec_streams(catalog.get("H100"), "h264", 30, pixels("1080p")) == pytest.approx(7 * 771 / 30)


@pytest.mark.parametrize("task", ["streaming", "vdi", "render"])
def test_h100_and_a100_unsuitable_for_graphics(catalog: Catalog, task: str) -> None:
    for name in DATACENTER_COMPUTE:
        c = cap(catalog, name, task=task)
        assert not c.suitable
        assert "no graphics mode" in c.reason


def test_l40_class_is_the_4k_choice(catalog: Catalog) -> None:
    w = make_workload({"task": "streaming", "resolution": "4k", "streams": 24})
    options, _ = plan_graphics(w, catalog)
    top = [o.capacity.gpu.name for o in options[:2]]
    rtx_pro = {"RTX PRO 6000 WS", "RTX PRO 6000 Max-Q", "RTX PRO 6000 Server"}
    assert set(top) <= {"L40", "L40S", "RTX 6000 Ada"} | rtx_pro
    assert cap(catalog, "L40S", task="streaming", resolution="4k").per_gpu >= 3
    assert cap(catalog, "L4", task="streaming", resolution="4k").per_gpu == 1


def test_l4_is_the_efficient_1080p_choice(catalog: Catalog) -> None:
    w = make_workload({"task": "streaming", "resolution": "1080p", "streams": 24, "objective": "energy"})
    options, _ = plan_graphics(w, catalog)
    assert options[0].capacity.gpu.name == "L4"
    # GameLift's gen6n_medium class: 6 GB and a quarter of an L4 per 1080p60 stream -> 4 per L4
    assert cap(catalog, "L4", task="streaming", resolution="1080p").per_gpu == 4


def test_v100_is_a_possible_virtual_workstation_card(catalog: Catalog) -> None:
    c = cap(catalog, "V100 SXM2 32GB", task="vdi", persona="light")
    assert c.suitable and c.per_gpu == 8  # 32 GB / 4 GB vWS light profile
    assert not cap(catalog, "V100 SXM2 32GB", task="render").suitable  # no RT cores


def test_vdi_profiles_cap_at_32(catalog: Catalog) -> None:
    assert cap(catalog, "L40", task="vdi", persona="knowledge").per_gpu == 32  # L40-1Q: 32 (vGPU 20.0)
    assert cap(catalog, "L4", task="vdi", persona="knowledge").per_gpu == 24
    assert cap(catalog, "L40", task="vdi", persona="heavy").per_gpu == 3


def test_render_from_blender_scores(catalog: Catalog) -> None:
    # RTX 4090 Blender 5.2.0 median 11568.16 samples/min over 3 scenes of 1.74 Mpx: at 1080p, 128 spp
    c = cap(catalog, "4090", task="render", resolution="1080p", spp=128, datacenter=False)
    assert c.per_gpu == pytest.approx(11568.16 / 3 * 60 / 128 * 1740629 / (1920 * 1080))
    l40, l4 = cap(catalog, "L40", task="render"), cap(catalog, "L4", task="render")
    assert l40.per_gpu > l4.per_gpu > 0


def test_ai_video_decode_bound_and_encode_requirement(catalog: Catalog) -> None:
    h100 = cap(catalog, "H100", task="ai-video", model="resnet-50", resolution="1080p", fps=30)
    assert h100.suitable and h100.bottleneck == "decode (NVDEC)"
    enc = cap(catalog, "H100", task="ai-video", model="resnet-50", encode_output=True)
    assert not enc.suitable and "NVENC" in enc.reason
    assert cap(catalog, "L4", task="ai-video", model="resnet-50").per_gpu > 0


def test_geforce_licence(catalog: Catalog) -> None:
    assert "licence" in cap(catalog, "4090", task="streaming").reason
    home = cap(catalog, "4090", task="streaming", datacenter=False)
    assert home.suitable and "GeForce encode-session cap" in home.limits


def test_plan_cli_contract(run_cli: RunCli, tmp_path: Path) -> None:
    f = tmp_path / "g.yaml"
    f.write_text("task: streaming\nresolution: 1080p\nstreams: 20\nobjective: cost\n")
    code, out, err = run_cli("plan", str(f), "--json")
    assert code == 0, err
    rec = json.loads(out)
    for o in rec["options"]:
        assert {"gpu", "num_gpus", "fits", "time_s", "cost_usd", "energy_kwh", "bottleneck", "why"} <= set(o)
    costs = [o["cost_usd"] for o in rec["options"] if o["cost_usd"] is not None]
    assert costs == sorted(costs)
    assert any(u["gpu"] == "H100 SXM5 80GB" and "graphics" in u["why"] for u in rec["unsuitable"])
    code, out, err = run_cli("fit", str(f))
    assert code == 0 and "Unsuitable" in out
    code, _out, err = run_cli("plan", str(f), "--set", "resolution=8k")
    assert code == 2 and "resolution" in err
    g = tmp_path / "llm.yaml"
    g.write_text("model: llama-3.1-8b\ntask: lora\n")
    code, out, err = run_cli("plan", str(g), "--json")  # LLM workloads are planned too (issue 4)
    assert code == 0, err
    assert json.loads(out)["mode"] == "training"


def test_a10g_streams_and_is_one_workstation_per_gpu(catalog: Catalog) -> None:
    # AWS G5 (A10G) is sold for remote workstations and cloud gaming and runs NVIDIA's GRID drivers
    # on the whole GPU: a graphics mode ('passthrough'), with GA102's 1 NVENC / 2 NVDEC engines
    a10g = catalog.get("A10G")
    assert a10g.graphics == "passthrough" and (a10g.nvenc, a10g.nvdec) == (1, 2)
    s = cap(catalog, "A10G", task="streaming", resolution="1080p")
    # 1080p60 medium scenes: 6 GB each -> 24 GiB / 6 = 4 streams; NVENC 868/60 = 14.5; shader 31.2/(0.25x30.3) = 4.1
    assert s.suitable and s.per_gpu == 4 and s.bottleneck == "memory"
    assert s.limits["encode (NVENC)"] == pytest.approx(868 / 60)
    v = cap(catalog, "A10G", task="vdi", persona="knowledge")
    # passthrough: one VM per GPU, though 24 x 1 GB vPC profiles would fit a vGPU-partitioned A10
    assert v.suitable and v.per_gpu == 1 and v.bottleneck == "one VM per GPU (passthrough)"
    assert cap(catalog, "A10", task="vdi", persona="knowledge").per_gpu == 24
    assert cap(catalog, "A10G", task="render").suitable  # 72 gen-2 RT cores


def test_a10g_in_graphics_plans(run_cli: RunCli, tmp_path: Path) -> None:
    f = tmp_path / "g.yaml"
    f.write_text("task: streaming\nresolution: 1080p\nstreams: 20\nobjective: cost\n")
    code, out, err = run_cli("plan", str(f), "--json", "--top", "100")
    assert code == 0, err
    rec = json.loads(out)
    row = next(o for o in rec["options"] if o["gpu"] == "A10G")
    assert row["num_gpus"] == 5 and row["per_gpu"] == 4  # 20 streams at 4 per GPU
    assert all(u["gpu"] != "A10G" for u in rec["unsuitable"])
    code, out, err = run_cli("gpus", "show", "A10G")
    assert code == 0, err
    assert "passed through to one VM" in out and "No graphics mode: no display outputs" not in out
