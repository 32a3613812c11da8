"""Per-card facts in the catalog rows: measured matmul and bandwidth shares, SkyPilot's name.

They sit beside the datasheet values they qualify, each with its source, and a user's row may state
its own; a row without them takes efficiency.py's defaults by architecture.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from conftest import RunCli
from gpuplan.errors import CatalogError
from gpuplan.estimators import efficiency as eff
from gpuplan.specs.gpu import CARD_FACT_FIELDS, SKYPILOT_NAME_PATTERN, Catalog, parse_catalog_text, source_summary
from helpers.catalog import USER_CATALOG


def _user_row(**facts: str) -> str:
    """USER_CATALOG with `key = value` lines (TOML as written) added to its row."""
    lines = "".join(f"{k} = {v}\n" for k, v in facts.items())
    return USER_CATALOG.replace("geforce_eula = true\n", f"geforce_eula = true\n{lines}")


def test_measured_shares_and_names_are_sourced(catalog: Catalog) -> None:
    h100 = catalog.get("H100 SXM5 80GB")
    assert (h100.mamf_bf16, h100.mamf_fp8) == (794.5 / 989, 1402.6 / 1979)  # exactly the MAMF table's ratios
    assert h100.skypilot_name == "H100"
    mamf = h100.sources["mamf_bf16"]
    assert mamf.key == "stas-mamf-table" and "744d01e18b79512572f64a6bbd8b5f4a725203a7" in mamf.url
    assert "794.5" in mamf.where and "1402.6" in h100.sources["mamf_fp8"].where
    assert "show-gpus" in h100.sources["skypilot_name"].url
    a100 = catalog.get("A100 SXM4 80GB")
    assert (a100.mamf_bf16, a100.mamf_fp8, a100.skypilot_name) == (271.2 / 312, None, "A100-80GB")
    assert catalog.get("A100 PCIe 40GB").skypilot_name == "A100"
    assert catalog.get("RTX 6000 Ada").skypilot_name == "RTX6000-Ada"
    assert catalog.get("AMD Instinct MI300X").skypilot_name == "MI300X"  # `sky show-gpus -a` lists it
    mi250x = catalog.get("MI250X")
    assert mi250x.mamf_bf16 == 147.0 / 191.5 and "f0cca2fa" in mi250x.sources["mamf_bf16"].url
    se = catalog.get("RTX PRO 6000 Server")
    assert (se.mamf_bf16, se.mamf_fp8, se.mamf_fp4) == (436.0 / 467.8, 828.0 / 935.6, 1537.0 / 1871.2)
    assert se.memory_bandwidth_share == 1492.0 / 1597.0
    assert {se.sources[f].key for f in ("mamf_bf16", "mamf_fp4", "memory_bandwidth_share")} == {
        "aic-rtxpro6000-se-kernels"
    }
    # a card with none of them states none, and takes its architecture's derived share
    l20 = catalog.get("L20")
    assert all(getattr(l20, f) is None for f in CARD_FACT_FIELDS)
    assert not set(CARD_FACT_FIELDS) & set(l20.sources)
    k = eff.sustained_share(l20)
    assert eff.gemm_efficiency(l20, "bf16").value == pytest.approx(0.75 * k, rel=1e-12)
    assert eff.gemm_efficiency(l20, "fp8").value == pytest.approx(0.66 * k, rel=1e-12)
    assert eff.bandwidth_efficiency(l20) == eff.KERNEL_BW_EFF


def test_every_bundled_fact_is_in_range_and_cited(catalog: Catalog) -> None:
    stated = 0
    for g in catalog:
        for f in CARD_FACT_FIELDS:
            value = getattr(g, f)
            if value is None:
                continue
            stated += 1
            assert g.sources[f].verified, (g.name, f)
            if f == "skypilot_name":
                assert re.fullmatch(SKYPILOT_NAME_PATTERN, value), (g.name, value)
            else:
                assert 0 < value <= 1, (g.name, f, value)
    assert stated >= 30  # 22 SkyPilot names, 10 16-bit shares, 4 8-bit, 1 FP4, 1 bandwidth


def test_gpus_json_keeps_its_keys(catalog: Catalog) -> None:
    """The facts are not (yet) part of `gpus --json`: its source lists name only the datasheet fields."""
    for g in catalog:
        listed = {f for s in source_summary(g) for f in s["fields"]}
        assert not listed & set(CARD_FACT_FIELDS), g.name


def test_a_user_row_states_its_own_shares() -> None:
    (gpu,) = parse_catalog_text(_user_row(mamf_bf16="0.6", memory_bandwidth_share="0.9"), "lab.toml")
    k = eff.sustained_share(gpu)
    assert gpu.sources["mamf_bf16"].key == "lab"  # the row's "*" source covers them like any value
    assert eff.gemm_efficiency(gpu, "bf16").value == pytest.approx(0.6 * k, rel=1e-12)
    # no 8-bit share stated: the row's own 16-bit one, scaled as for any card without an fp8 MAMF
    assert eff.gemm_efficiency(gpu, "fp8").value == pytest.approx(0.6 * eff.FP8_SHARE_OF_BF16_EFF * k, rel=1e-12)
    assert eff.bandwidth_efficiency(gpu) == 0.9
    # only an 8-bit share: 16-bit from the architecture (Ada Lovelace, 0.75), 8-bit from the row
    (fp8_only,) = parse_catalog_text(_user_row(mamf_fp8="0.5", mamf_fp4="0.4"), "lab.toml")
    assert eff.gemm_efficiency(fp8_only, "bf16").value == pytest.approx(0.75 * k, rel=1e-12)
    assert eff.gemm_efficiency(fp8_only, "fp8").value == pytest.approx(0.5 * k, rel=1e-12)
    assert eff.gemm_efficiency(fp8_only, "fp4").value == pytest.approx(0.4 * k, rel=1e-12)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("mamf_bf16", "1.5", "less than or equal to 1"),
        ("mamf_fp8", "0", "greater than 0"),
        ("mamf_fp4", "-0.2", "greater than 0"),
        ("memory_bandwidth_share", "nan", "mamf|memory_bandwidth_share"),
        ("skypilot_name", '"H100:8"', "SkyPilot accelerator name"),
        ("skypilot_name", '"H100\\n#SBATCH"', "SkyPilot accelerator name"),
        ("skypilot_name", '""', "SkyPilot accelerator name"),
        ("skypilot_name", '"H100 "', "SkyPilot accelerator name"),
        ("skypilot_name", "80", "string"),
        ("memory_ecc_MiB", "99999", "more than the card's"),
        ("memory_ecc_MiB", "-1", "greater than or equal"),
    ],
)
def test_a_bad_fact_is_one_clear_error(key: str, value: str, message: str) -> None:
    with pytest.raises(CatalogError, match=message) as info:
        parse_catalog_text(_user_row(**{key: value}), "lab.toml")
    text = str(info.value)
    assert "\n" not in text and text.startswith("lab.toml") and key in text


def test_a_bad_share_stops_the_cli_in_one_line(tmp_path: Path, run_cli: RunCli) -> None:
    f = tmp_path / "lab.toml"
    f.write_text(_user_row(mamf_bf16="1.5"))
    for argv in (["gpus", "--catalog", str(f)], ["estimate", "llama-3.2-1b", "--gpu", "lab4090", "--catalog", str(f)]):
        code, out, err = run_cli(*argv)
        assert code == 2 and out == "", argv
        assert err.count("\n") == 1 and str(f) in err and "mamf_bf16" in err and "1.5" in err, err


def test_a_user_rows_skypilot_name_reaches_the_task(tmp_path: Path, run_cli: RunCli) -> None:
    f = tmp_path / "lab.toml"
    f.write_text(_user_row(skypilot_name='"RTX4090"'))
    argv = ["launch", "llama-3.2-1b", "--format", "skypilot", "--cluster", "1x2:lab4090", "--set", "task=lora"]
    code, out, err = run_cli(*argv, "--catalog", str(f))
    assert code == 0, err
    task = yaml.safe_load(out)  # the header lines are YAML comments
    assert task["resources"]["accelerators"] == "RTX4090:2"
    # without it: one line, which names the field to set
    f.write_text(USER_CATALOG)
    code, out, err = run_cli(*argv, "--catalog", str(f))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "SkyPilot lists no accelerator for Lab RTX 4090" in err and "skypilot_name" in err


def test_ecc_capacities_are_cited_and_below_the_card(catalog: Catalog) -> None:
    """Cards that ship with ECC on and pay capacity for it (datacenter GDDR) state what nvidia-smi
    shows, from a cited log; HBM cards and GeForce / RTX workstation cards state none."""
    stated = {g.name: g for g in catalog if g.memory_ecc_bytes is not None}
    assert set(stated) == {"L40", "L40S", "L20", "L4", "T4", "A10", "A10G", "A40"}
    for g in stated.values():
        assert g.memory_ecc_bytes is not None
        assert g.memory_type.startswith("GDDR") and not g.geforce_eula
        src = g.sources["memory_ecc_MiB"]
        assert src.verified and f"{g.memory_ecc_bytes / 2**20:,.0f}".replace(",", "") in src.where.replace(",", "")
        assert 15 / 16 * g.memory_bytes - 12 * 2**20 <= g.memory_ecc_bytes <= 15 / 16 * g.memory_bytes
        assert "ecc: false" in g.notes
    for g in catalog:
        if g.memory_type.upper().startswith("HBM"):
            assert g.memory_ecc_bytes is None and g.visible_memory_bytes(True) == g.memory_bytes
    # left out of `gpus --json`'s source lists, like the card facts
    assert all("memory_ecc_MiB" not in s["fields"] for g in stated.values() for s in source_summary(g))


def test_a_user_row_states_its_ecc_capacity() -> None:
    (g,) = parse_catalog_text(_user_row(memory_ecc_MiB="23040"), "lab.toml")
    assert g.visible_memory_bytes() == 23040 * 2**20 and g.visible_memory_bytes(False) == g.memory_bytes
