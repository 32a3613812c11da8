"""The datasheet spot check every catalog test file runs on its rows (tests/test_catalog*.py)."""

from __future__ import annotations

import pytest

from gpuplan.specs.gpu import GIB, Catalog

TERA = 1e12
GB = 1e9


def check_datasheet(
    catalog: Catalog, name: str, mem_gib: float, bw_gbps: float, peaks: dict[str, float | None], tdp: float
) -> None:
    """The row's memory, bandwidth, dense peaks (None: the precision is absent) and board power."""
    g = catalog.get(name)
    assert g.memory_bytes == pytest.approx(mem_gib * GIB)
    assert g.memory_bandwidth_bytes_per_s == pytest.approx(bw_gbps * GB)
    for p, v in peaks.items():
        if v is None:
            assert g.peak_flop_per_s[p] is None, (name, p)
        else:
            assert g.peak_flop_per_s[p] == pytest.approx(v * TERA, rel=1e-3), (name, p)
    assert g.tdp_watts == tdp


# A valid user catalog file: one GPU ("Lab RTX 4090 (power-capped)", alias lab4090), every value
# sourced to "lab"; the tests use it wherever a GPU must exist only in the user's catalog.
USER_CATALOG = """
[[gpu]]
name = "Lab RTX 4090 (power-capped)"
aliases = ["lab4090"]
vendor = "NVIDIA"
architecture = "Ada Lovelace"
chip = "AD102"
compute_capability = "8.9"
form_factor = "PCIe"
memory_GiB = 24
memory_type = "GDDR6X"
memory_bandwidth_GBps = 1008
fp32_TFLOPS = 60
tf32_TFLOPS = 60
fp16_TFLOPS = 120
bf16_TFLOPS = 120
fp8_TFLOPS = 240
tdp_W = 300
nvlink_GBps = 0
nvlink_domain = 1
pcie_gen = 4
multi_node = false
mig_instances = 0
display_outputs = 4
vgpu = "none"
rt_cores = 128
rt_core_gen = 3
nvenc = 2
nvdec = 1
launch_year = 2022
geforce_eula = true
[gpu.sources]
"*" = "lab"
[source.lab]
title = "our own nvidia-smi and gpu-burn run"
url = "lab wiki"
where = "node n3"
read = 2026-11-30
"""
