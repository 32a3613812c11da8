"""Checks every catalog row must pass, and datasheet spot checks of the seed's GPUs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.errors import CatalogError, UnknownGPUError
from gpuplan.specs.gpu import GIB, Catalog, bundled_catalog, load_catalog, parse_catalog_text
from gpuplan.specs.gpu_rows import VALUE_FIELDS
from helpers.catalog import GB, TERA, USER_CATALOG, check_datasheet

REQUIRED = [
    "H100 SXM5 80GB", "H100 PCIe 80GB", "H100 NVL 94GB", "H200 SXM 141GB", "B200",
    "A100 SXM4 40GB", "A100 SXM4 80GB", "A100 PCIe 40GB", "A100 PCIe 80GB",
    "L40", "L40S", "L4", "V100 SXM2 16GB", "V100 SXM2 32GB", "V100 PCIe 16GB", "T4", "A10", "A10G",
    "A40", "RTX A6000", "RTX 6000 Ada", "Quadro RTX 8000", "GeForce RTX 2080 Ti", "GeForce RTX 3090",
    "GeForce RTX 3090 Ti", "GeForce RTX 4090", "GeForce RTX 5090", "AMD Instinct MI250X", "AMD Instinct MI300X",
]  # fmt: skip


def test_catalog_has_every_required_variant(catalog: Catalog) -> None:
    names = {g.name for g in catalog}
    assert set(REQUIRED) <= names
    assert len(catalog) >= 29


def test_every_value_has_a_dated_source(catalog: Catalog) -> None:
    today = dt.date.today()
    for g in catalog:
        present = {f for f in VALUE_FIELDS if f in g.sources}
        assert present, g.name
        for field, src in g.sources.items():
            assert src.title and src.url and src.where, (g.name, field)
            assert dt.date(2020, 1, 1) <= src.read <= today, (g.name, field, src.read)
        # the catalog's own numbers all carry a source
        for field in ("memory_bandwidth_GBps", "fp32_TFLOPS", "tdp_W", "compute_capability", "launch_year"):
            assert field in g.sources, (g.name, field)


def test_units_are_plausible(catalog: Catalog) -> None:
    for g in catalog:
        p = g.peak_flop_per_s
        assert 8 * GIB <= g.memory_bytes <= 300 * GIB, g.name
        assert 200 * GB <= g.memory_bandwidth_bytes_per_s <= 10_000 * GB, g.name
        assert 5 * TERA <= p["fp32"] <= 200 * TERA, g.name  # type: ignore[operator]
        assert 50 <= g.tdp_watts <= 1500, g.name
        assert 2012 <= g.launch_year <= 2026, g.name
        fp16 = p["fp16"]
        assert fp16 is not None and fp16 >= p["fp32"], g.name  # type: ignore[operator]
        if p["tf32"] is not None:
            assert p["tf32"] <= fp16, g.name
        if p["bf16"] is not None:
            assert p["bf16"] == pytest.approx(fp16, rel=0.02), g.name  # bf16 and fp16 share units
        if p["fp8"] is not None:
            assert p["fp8"] == pytest.approx(2 * fp16, rel=0.02), g.name  # fp8 doubles the 16-bit rate
        if p["int8"] is not None and g.vendor == "NVIDIA":
            assert p["int8"] >= fp16, g.name
        if g.fp16_fp16acc_flop_per_s is not None:
            assert g.fp16_fp16acc_flop_per_s >= fp16, g.name
        # headline "with sparsity" figures doubled by mistake would break these bounds
        assert fp16 <= 3000 * TERA, g.name


def test_precision_support_follows_compute_capability(catalog: Catalog) -> None:
    for g in catalog:
        cc = g.cc
        if cc is None:
            assert g.vendor != "NVIDIA", g.name
            continue
        if cc < (8, 0):
            assert g.peak_flop_per_s["bf16"] is None, f"{g.name}: bf16 needs CC 8.0"
            assert g.peak_flop_per_s["tf32"] is None, f"{g.name}: tf32 came with Ampere"
        else:
            assert g.peak_flop_per_s["bf16"] is not None, g.name
            assert g.peak_flop_per_s["tf32"] is not None, g.name
        if cc < (8, 9):
            assert g.peak_flop_per_s["fp8"] is None, f"{g.name}: fp8 needs CC 8.9"
        else:
            assert g.peak_flop_per_s["fp8"] is not None, g.name


def test_no_graphics_mode_on_h100_and_a100_class(catalog: Catalog) -> None:
    for g in catalog:
        if g.name.startswith(("H100", "H200", "A100", "B200")):
            assert g.graphics == "none", g.name
            assert g.display_outputs == 0 and g.rt_cores == 0 and g.nvenc == 0, g.name
            assert g.multi_node, g.name


def test_geforce_licence_flag(catalog: Catalog) -> None:
    for g in catalog:
        # the GeForce driver licence covers "GeForce or Titan branded hardware products" (clause 2.1.3)
        assert g.geforce_eula == g.name.startswith(("GeForce", "TITAN")), g.name


def test_single_host_cards_are_not_multi_node(catalog: Catalog) -> None:
    for name in ("L4", "L40", "L40S", "GeForce RTX 4090", "GeForce RTX 3090", "T4"):
        assert not catalog.get(name).multi_node, name


# Spot checks against the vendors' datasheets (dense figures; sparse headline / 2):
# NVIDIA H100 datasheet (SXM column), A100 datasheet, L4 / L40 datasheets, V100 datasheet,
# Turing whitepaper (2080 Ti Founders Edition 260 W; Quadro RTX 8000 datasheet 295 W max), GA102 whitepaper (RTX 3090).
SPOT = [
    ("H100 SXM5 80GB", 80, 3350, {"bf16": 989.5, "fp8": 1979, "tf32": 494.5, "fp64": 67}, 700),
    ("A100 SXM4 80GB", 80, 2039, {"bf16": 312, "tf32": 156, "int8": 624, "fp8": None}, 400),
    ("A100 SXM4 40GB", 40, 1555, {"bf16": 312, "fp8": None}, 400),
    ("L4", 24, 300, {"bf16": 121, "fp8": 242.5, "fp32": 30.3}, 72),
    ("L40", 48, 864, {"fp16": 181.05, "fp8": 362, "fp32": 90.5}, 300),
    ("L40S", 48, 864, {"fp16": 362.05, "fp8": 733}, 350),
    ("V100 SXM2 16GB", 16, 900, {"fp16": 125, "bf16": None, "tf32": None, "fp8": None}, 300),
    ("V100 SXM2 32GB", 32, 900, {"fp16": 125, "fp32": 15.7}, 300),
    ("GeForce RTX 2080 Ti", 11, 616, {"fp16": 56.9, "bf16": None}, 260),
    ("GeForce RTX 3090", 24, 936, {"fp16": 71, "bf16": 71, "tf32": 35.6, "fp8": None}, 350),
    ("GeForce RTX 4090", 24, 1008, {"fp16": 165.2, "fp8": 330.3, "fp32": 82.6}, 450),
    ("Quadro RTX 8000", 48, 672, {"fp16": 130.5, "bf16": None}, 295),
]


@pytest.mark.parametrize(("name", "mem_gib", "bw_gbps", "peaks", "tdp"), SPOT)
def test_datasheet_spot_checks(
    catalog: Catalog, name: str, mem_gib: float, bw_gbps: float, peaks: dict[str, float | None], tdp: float
) -> None:
    check_datasheet(catalog, name, mem_gib, bw_gbps, peaks, tdp)


def test_geforce_half_rate_fp32_accumulate(catalog: Catalog) -> None:
    # GA102 / Ada whitepapers: FP16 tensor with FP32 accumulate is half the FP16-accumulate rate
    for name, full in (("GeForce RTX 3090", 142), ("GeForce RTX 4090", 330.3)):
        g = catalog.get(name)
        assert g.fp16_fp16acc_flop_per_s == pytest.approx(full * TERA, rel=1e-3)
        assert g.peak_flop_per_s["fp16"] == pytest.approx(full / 2 * TERA, rel=2e-3)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("h100", "H100 SXM5 80GB"),
        ("H100-SXM", "H100 SXM5 80GB"),
        ("NVIDIA H100", "H100 SXM5 80GB"),
        ("4090", "GeForce RTX 4090"),
        ("rtx 4090", "GeForce RTX 4090"),
        ("a100 80gb", "A100 SXM4 80GB"),
        ("A100-40GB", "A100 SXM4 40GB"),
        ("a100", "A100 SXM4 80GB"),
        ("l40s", "L40S"),
        ("L4", "L4"),
        ("2080ti", "GeForce RTX 2080 Ti"),
        ("v100", "V100 SXM2 32GB"),
        ("mi300x", "AMD Instinct MI300X"),
        ("rtx 8000", "Quadro RTX 8000"),
        ("Tesla T4", "T4"),
    ],
)
def test_lookup_by_name_or_alias(catalog: Catalog, query: str, expected: str) -> None:
    assert catalog.get(query).name == expected


def test_unknown_gpu_suggests(catalog: Catalog) -> None:
    with pytest.raises(UnknownGPUError, match=r"Unknown GPU 'h1000'\. Did you mean: .*H100"):
        catalog.get("h1000")
    with pytest.raises(KeyError):  # also a KeyError for generic handlers
        catalog.get("no-such-card")


@given(st.text(max_size=40))
def test_lookup_never_crashes(query: str) -> None:
    cat = bundled_catalog()
    found = cat.find(query)
    assert found is None or found in list(cat)


def test_user_file_adds_and_overrides(tmp_path: Path) -> None:
    f = tmp_path / "lab.toml"
    f.write_text(USER_CATALOG)
    cat = load_catalog([f], use_env=False)
    g = cat.get("LAB4090")
    assert g.tdp_watts == 300 and g.origin == str(f)
    # override a bundled row by name
    f.write_text(USER_CATALOG.replace('name = "Lab RTX 4090 (power-capped)"', 'name = "L4"').replace("lab4090", "l4x"))
    cat2 = load_catalog([f], use_env=False)
    assert cat2.get("L4").tdp_watts == 300
    assert len(cat2) == len(load_catalog(use_env=False))


def test_user_file_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "lab.toml"
    f.write_text(USER_CATALOG)
    monkeypatch.setenv("GPUPLAN_CATALOG", str(f))
    assert load_catalog().get("lab4090").name == "Lab RTX 4090 (power-capped)"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace('"*" = "lab"', 'fp32_TFLOPS = "lab"'), "has no source"),
        (lambda t: t.replace('"*" = "lab"', '"*" = "nope"'), "not defined in the file"),
        (lambda t: t.replace("memory_GiB = 24", "memory_GiB = 24\nmemory_GB = 25"), "exactly one of"),
        (lambda t: t.replace("tdp_W = 300", "tdp_W = -3"), "tdp_W"),
        (lambda t: t.replace("read = 2026-11-30", 'read = "yesterday"'), "read"),
        (lambda t: t.replace('form_factor = "PCIe"', 'form_factor = "USB"'), "form_factor"),
        (lambda t: t + "\nbogus = [", "not valid TOML"),
        (lambda t: t.replace("nvdec = 1", "nvdec = 1\ncolour = 3"), "colour"),
    ],
)
def test_malformed_user_file_is_one_clear_error(edit: object, message: str) -> None:
    text = edit(USER_CATALOG)  # type: ignore[operator]
    with pytest.raises(CatalogError, match=message) as info:
        parse_catalog_text(text, "lab.toml")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("lab.toml")


def test_alias_clash_is_reported(tmp_path: Path) -> None:
    f = tmp_path / "clash.toml"
    f.write_text(USER_CATALOG.replace('aliases = ["lab4090"]', 'aliases = ["h100"]'))
    with pytest.raises(CatalogError, match="already used by 'H100 SXM5 80GB'"):
        load_catalog([f], use_env=False)


def test_unverified_values_are_explained_in_notes(catalog: Catalog) -> None:
    unverified = 0
    for g in catalog:
        for field, src in g.sources.items():
            if not src.verified:
                unverified += 1
                assert "unverified" in g.notes.lower(), (g.name, field)
    # a handful at most: the catalog is meant to be sourced value by value
    assert unverified <= 20
