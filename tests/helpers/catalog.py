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
