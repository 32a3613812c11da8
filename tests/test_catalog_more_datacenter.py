"""Datasheet spot checks and lookups for the rows in data/gpus/nvidia-datacenter-more.toml.

GH200 (96 GB HBM3 / 144 GB HBM3e), H200 NVL, A30, B300, GB200 and GB300 (one GPU of an NVL72 rack),
Tesla P100 (PCIe / SXM2), Tesla P40, AMD Instinct MI325X and MI355X. Rates are dense (vendor "with
sparsity" figures halved); fp16 is the FP32-accumulate rate (FORMAT.md), which on Pascal is the FP32
CUDA-core rate.
"""

from __future__ import annotations

import pytest

from gpuplan.specs.gpu import Catalog
from gpuplan.specs.precision import compute_peak
from helpers.catalog import GB, TERA, check_datasheet

NEW_ROWS = [
    "GH200 96GB", "GH200 144GB", "H200 NVL 141GB", "A30", "B300", "GB200", "GB300",
    "P100 PCIe 16GB", "P100 SXM2 16GB", "P40", "AMD Instinct MI325X", "AMD Instinct MI355X",
]  # fmt: skip


def test_every_new_row_is_in_the_catalog(catalog: Catalog) -> None:
    names = {g.name for g in catalog}
    assert set(NEW_ROWS) <= names
    for name in NEW_ROWS:
        assert catalog.get(name).origin.endswith("nvidia-datacenter-more.toml"), name


# (name, memory GiB, bandwidth GB/s, {precision: dense TFLOPS or None for absent}, TDP W)
SPOT = [
    # NVIDIA GH200 datasheet (GH200 column; TF32 989*, BF16/FP16 1,979*, FP8/INT8 3,958* halved),
    # 96GB HBM3 | 144GB HBM3e, up to 4 | 4.9 TB/s, module power configurable 450-1000 W (max kept).
    ("GH200 96GB", 96, 4000, {"bf16": 989.5, "fp16": 989.5, "fp8": 1979, "tf32": 494.5, "fp64": 67, "fp32": 67}, 1000),
    ("GH200 144GB", 144, 4900, {"bf16": 989.5, "fp8": 1979, "int8": 1979, "int4": None}, 1000),
    # NVIDIA H200 table, H200 NVL column: TF32 835*, BF16/FP16 1,671*, FP8 3,341* halved; 141GB, 4.8TB/s, 600 W.
    ("H200 NVL 141GB", 141, 4800, {"bf16": 835.5, "fp8": 1670.5, "tf32": 417.5, "fp64": 60, "fp32": 60}, 600),
    # NVIDIA A30 datasheet (gpumap copy; aiconfigurator a30.yaml): TF32 165* halved, FP16/BF16 165, INT8 330,
    # INT4 661, FP64 tensor 10.3, 24 GB HBM2, 933 GB/s, 165 W; no FP8 on Ampere.
    ("A30", 24, 933, {"bf16": 165, "fp16": 165, "tf32": 82.5, "int8": 330, "int4": 661, "fp8": None}, 165),
    # NVIDIA HGX B300 table / aiconfigurator b300_sxm.yaml: BF16 4.5 PF*, FP8 9 PF* halved; 270 GB, 7.7 TB/s,
    # 1,100 W; FP64 1.2; INT8 (307 TOPS*) deliberately omitted.
    ("B300", 270, 7700, {"bf16": 2250, "fp8": 4500, "tf32": 1100, "fp32": 75, "fp64": 1.2, "int8": None}, 1100),
    # NVIDIA GB200 NVL72 per-GPU table / aiconfigurator gb200.yaml: BF16 5 PF*, FP8 and INT8 10 P*, TF32 2.5 PF*
    # halved; FP32 80, FP64 40; 186 GB (MIG doc), 8 TB/s, up to 1,200 W per GPU.
    ("GB200", 186, 8000, {"bf16": 2500, "fp16": 2500, "fp8": 5000, "int8": 5000, "tf32": 1250, "fp32": 80, "fp64": 40}, 1200),
    # NVIDIA GB300 NVL72 per-GPU table / aiconfigurator gb300.yaml: BF16 5 PF*, FP8 10 PF*, TF32 2.5 PF* halved;
    # FP32 80, FP64 1.3; 279 GB, 8 TB/s, up to 1,400 W; INT8 (330 TOPS*) deliberately omitted as on B300.
    ("GB300", 279, 8000, {"bf16": 2500, "fp8": 5000, "tf32": 1250, "fp32": 80, "fp64": 1.3, "int8": None}, 1400),
    # NVIDIA Tesla P100 PCIe datasheet: 4.7 / 9.3 / 18.7 (half2) TFLOPS, 16 GB HBM2, 732 GB/s, 250 W.
    ("P100 PCIe 16GB", 16, 732, {"fp32": 9.3, "fp16": 9.3, "fp64": 4.7, "bf16": None, "tf32": None}, 250),
    # Pascal whitepaper (Volta whitepaper table): P100 SXM2 5.3 / 10.6 / 21.2 (half2), 732 GB/s, 300 W.
    ("P100 SXM2 16GB", 16, 732, {"fp32": 10.6, "fp16": 10.6, "fp64": 5.3, "fp8": None, "int8": None}, 300),
    # NVIDIA Tesla P40 datasheet: 47 INT8 TOPS (dp4a), 24 GB GDDR5, 346 GB/s, 250 W; FP32 11.76 at boost.
    ("P40", 24, 346, {"fp32": 11.76, "fp16": 11.76, "int8": 47, "bf16": None, "tf32": None, "fp8": None}, 250),
    # AMD MI325X spec (awesomeagents/svethardware copies; ROCm MI300 table for the unchanged compute die):
    # FP8 2,614.9 dense, FP16/BF16 1,307.4, TF32 653.7, 256 GiB HBM3E, 6 TB/s, 1,000 W TBP.
    ("AMD Instinct MI325X", 256, 6000, {"bf16": 1307.4, "fp8": 2614.9, "tf32": 653.7, "fp64": 163.4}, 1000),
    # AMD MI355X datasheet GD-176 dense rows (FP8 5.0332 PF, MXFP4 10.0663 PF), FP32 157.3, FP64 78.6,
    # 288 GiB HBM3E, 8 TB/s, 1,400 W TBP; no native TF32 on CDNA 4.
    ("AMD Instinct MI355X", 288, 8000, {"bf16": 2516.6, "fp8": 5033.2, "fp32": 157.3, "fp64": 78.6, "tf32": None}, 1400),
]  # fmt: skip


@pytest.mark.parametrize(("name", "mem_gib", "bw_gbps", "peaks", "tdp"), SPOT)
def test_datasheet_spot_checks(
    catalog: Catalog, name: str, mem_gib: float, bw_gbps: float, peaks: dict[str, float | None], tdp: float
) -> None:
    check_datasheet(catalog, name, mem_gib, bw_gbps, peaks, tdp)


@pytest.mark.parametrize(
    ("name", "fp4"),
    [
        ("B300", 14000),  # HGX B300 table: FP4 '18 PFLOPS | 14 PFLOPS' (sparse | dense)
        ("GB200", 10000),  # GB200 NVL72 table: NVFP4 1,440 | 720 PF per rack (sparse | dense) / 72; aiconfigurator 10 P
        ("GB300", 15000),  # GB300 NVL72 table: FP4 '20 PFLOPS | 15 PFLOPS' (sparse | dense); aiconfigurator 15 P
        ("AMD Instinct MI355X", 10066.3),  # AMD GD-176: MXFP4 10.0663 PF dense (20.1 PF is with sparsity)
        ("GH200 96GB", None),  # Hopper: no FP4
        ("AMD Instinct MI325X", None),
    ],
)
def test_fp4_rates(catalog: Catalog, name: str, fp4: float | None) -> None:
    g = catalog.get(name)
    if fp4 is None:
        assert g.fp4_flop_per_s is None
    else:
        assert g.fp4_flop_per_s == pytest.approx(fp4 * TERA, rel=1e-3)


def test_pascal_fp16_is_the_fp32_accumulate_rate(catalog: Catalog) -> None:
    # GP100: half2 runs at 2x FP32 but accumulates in FP16; FP32-accumulate FP16 GEMMs run at the FP32 rate.
    for name, half2 in (("P100 PCIe 16GB", 18.7), ("P100 SXM2 16GB", 21.2)):
        g = catalog.get(name)
        assert g.peak_flop_per_s["fp16"] == g.peak_flop_per_s["fp32"], name
        assert g.fp16_fp16acc_flop_per_s == pytest.approx(half2 * TERA, rel=1e-3), name
    # GP102: native FP16 is 1/64 rate, so there is no faster FP16-accumulate figure to record.
    p40 = catalog.get("P40")
    assert p40.peak_flop_per_s["fp16"] == p40.peak_flop_per_s["fp32"]
    assert p40.fp16_fp16acc_flop_per_s is None
    assert p40.compute_capability == "6.1" and catalog.get("P100").compute_capability == "6.0"
    # no tensor cores: bf16 work runs at the fp32 rate, with the reason given
    p = compute_peak(catalog.get("P100"), "bf16")
    assert p.runs_as == "fp32" and "BF16" in p.reason


@pytest.mark.parametrize(
    ("name", "fp16"),
    [
        ("B300", 2250),  # INT8 307 TOPS sparse = 153.5 dense (HGX B300 table; aiconfigurator b300_sxm.yaml)
        ("GB300", 2500),  # INT8 330 TOPS sparse = 165 dense (GB300 NVL72 table; aiconfigurator gb300.yaml)
    ],
)
def test_blackwell_ultra_int8_omitted_runs_at_16_bit_rate(catalog: Catalog, name: str, fp16: float) -> None:
    # Blackwell Ultra's INT8 is far below its BF16 rate; the rows omit it on purpose.
    p = compute_peak(catalog.get(name), "int8")
    assert p.runs_as == "fp16" and p.flop_per_s == pytest.approx(fp16 * TERA)
    assert "INT8" in catalog.get(name).notes


def test_grace_blackwell_rows_are_per_gpu_blackwell(catalog: Catalog) -> None:
    # CUDA GPUs page: 10.0 'NVIDIA GB200, NVIDIA B200', 10.3 'NVIDIA GB300, NVIDIA B300' (aiconfigurator sm_100 / sm_103)
    for name, cc in (("GB200", "10.0"), ("GB300", "10.3")):
        g = catalog.get(name)
        assert g.architecture == "Blackwell" and g.compute_capability == cc, name
        assert g.graphics == "none" and g.nvenc == 0 and g.nvdec == 7, name
        assert "per GPU" in g.notes and "Grace CPU" in g.notes, name


def test_mi355x_has_no_tf32(catalog: Catalog) -> None:
    p = compute_peak(catalog.get("MI355X"), "tf32")
    assert p.runs_as == "fp32" and p.flop_per_s == pytest.approx(157.3 * TERA)


@pytest.mark.parametrize(
    ("name", "nvlink_gbps", "domain", "mig", "multi_node"),
    [
        ("GH200 96GB", 900, 4, 7, True),  # JUPITER quad node: 3 x 300 GB/s per GPU
        ("GH200 144GB", 900, 2, 7, True),  # GH200 NVL2
        ("H200 NVL 141GB", 900, 4, 7, True),  # 2- or 4-way NVLink bridge, 900 GB/s per GPU
        ("A30", 200, 2, 4, True),  # NVLink bridge for two cards; MIG 4 x 6 GB
        ("B300", 1800, 8, 7, True),  # HGX B300
        ("GB200", 1800, 72, 7, True),  # NVL72 rack: 72 GPUs on NVLink 5 (aiconfigurator); MIG doc 7
        ("GB300", 1800, 72, 7, True),  # NVL72 rack; NVIDIA table MIG 7, mig-parted all-1g.35gb x 7
        ("P100 PCIe 16GB", 0, 1, 0, False),
        ("P100 SXM2 16GB", 160, 8, 0, True),  # NVLink 1.0, DGX-1 hybrid cube-mesh
        ("P40", 0, 1, 0, False),
        ("AMD Instinct MI325X", 896, 8, 0, True),  # 7 Infinity Fabric links x 128 GB/s
        ("AMD Instinct MI355X", 1075.2, 8, 0, True),  # 7 links x 153.6 GB/s
    ],
)
def test_interconnect_and_partitioning(
    catalog: Catalog, name: str, nvlink_gbps: float, domain: int, mig: int, multi_node: bool
) -> None:
    g = catalog.get(name)
    assert g.nvlink_bandwidth_bytes_per_s == pytest.approx(nvlink_gbps * GB)
    assert g.nvlink_domain == domain
    assert g.mig_instances == mig
    assert g.multi_node is multi_node


def test_gh200_tdp_is_the_module_maximum_and_explained(catalog: Catalog) -> None:
    for name in ("GH200 96GB", "GH200 144GB"):
        g = catalog.get(name)
        assert g.tdp_watts == 1000
        assert "450 to 1000" in g.notes and "NVLink-C2C" in g.notes
        assert g.graphics == "none" and g.nvenc == 0


def test_unverified_values_are_few_and_explained(catalog: Catalog) -> None:
    unverified = {(g.name, f) for g in catalog if g.name in NEW_ROWS for f, s in g.sources.items() if not s.verified}
    assert unverified == {
        ("GH200 96GB", "form_factor"),
        ("GH200 144GB", "form_factor"),
        ("GB200", "form_factor"),  # soldered on the Bianca board: no superchip value in the list
        ("GB300", "form_factor"),
    }
    for name, _ in unverified:
        assert "unverified" in catalog.get(name).notes, name


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("GH200", "GH200 96GB"),
        ("gh200-96gb", "GH200 96GB"),
        ("NVIDIA GH200 480GB", "GH200 96GB"),  # nvidia-smi name of the 96 GB part
        ("Grace Hopper", "GH200 96GB"),
        ("GH200 144GB", "GH200 144GB"),
        ("NVIDIA GH200 144G HBM3e", "GH200 144GB"),  # nvidia-smi name of the HBM3e part
        ("h200 nvl", "H200 NVL 141GB"),
        ("H200", "H200 SXM 141GB"),  # bare H200 stays the SXM part
        ("a30", "A30"),
        ("NVIDIA A30", "A30"),
        ("b300", "B300"),
        ("HGX B300", "B300"),
        ("GB200", "GB200"),
        ("gb200-nvl72", "GB200"),
        ("NVIDIA GB200", "GB200"),  # nvidia-smi / MLPerf name
        ("GB200-186GB", "GB200"),  # MLPerf system name GB200-NVL72_GB200-186GB
        ("B200 on GB200", "GB200"),
        ("Grace Blackwell", "GB200"),
        ("B200", "B200"),  # bare B200 stays the HGX part
        ("GB300 NVL72", "GB300"),
        ("NVIDIA GB300", "GB300"),  # nvidia-smi name
        ("gb300-288gb", "GB300"),  # MLPerf system name GB300-NVL72_GB300-288GB
        ("Grace Blackwell Ultra", "GB300"),
        ("p100", "P100 PCIe 16GB"),
        ("Tesla P100-PCIE-16GB", "P100 PCIe 16GB"),
        ("Tesla P100-SXM2-16GB", "P100 SXM2 16GB"),
        ("p100 sxm2", "P100 SXM2 16GB"),
        ("Tesla P40", "P40"),
        ("p40", "P40"),
        ("mi325x", "AMD Instinct MI325X"),
        ("AMD Instinct MI355X", "AMD Instinct MI355X"),
        ("MI355X", "AMD Instinct MI355X"),
        ("MI300X", "AMD Instinct MI300X"),  # unchanged
    ],
)
def test_lookup_by_common_names(catalog: Catalog, query: str, expected: str) -> None:
    assert catalog.get(query).name == expected
