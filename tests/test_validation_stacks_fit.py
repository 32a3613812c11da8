"""The constants fitted per software stack (planner/stack_fits.py): the committed values are what
the fit finds on the stacks file's split=fit rows, no held-out row can move a fit, and a constant
fitted on one stack moves no prediction of another stack's rows or of the vendor files' rows."""

from __future__ import annotations

import pytest

from gpuplan.estimators import engines
from gpuplan.planner import stack_fits
from gpuplan.planner.validation import bundled_rows, run_rows, stack_rows
from gpuplan.planner.validation_columns import Row
from gpuplan.specs.gpu import Catalog

ROWS = stack_rows()


def _committed() -> dict[str, float]:
    gemm, gemv = engines.AUTOAWQ_KERNELS["gemm"], engines.AUTOAWQ_KERNELS["gemv"]
    return {
        "AUTOAWQ_FT_BLOCK_BYTES_PER_S": engines.AUTOAWQ_FT_BLOCK_BYTES_PER_S,
        "AUTOAWQ_KERNELS[gemm] bandwidth": gemm[0],
        "FIRST_FORWARD_S[autoawq]": engines.FIRST_FORWARD_S["autoawq"],
        "AUTOAWQ_KERNELS[gemm] compute": gemm[1],
        "AUTOAWQ_KERNELS[gemv] compute": gemv[1],
        "REQUEST_HOST_S[sglang]": engines.REQUEST_HOST_S["sglang"],
    }


def test_the_committed_constants_are_what_the_fit_finds(catalog: Catalog) -> None:
    before = _committed()
    assert stack_fits.fit_all(ROWS, catalog) == pytest.approx(before, rel=1e-9)
    assert _committed() == before  # fitting leaves the engine tables as they were
    # the GEMV kernel's bandwidth share is every engine's weight-only GEMV share, not fitted
    assert engines.AUTOAWQ_KERNELS["gemv"][0] == 0.85


def test_fits_read_split_fit_rows_only(catalog: Catalog) -> None:
    for c in stack_fits.CONSTANTS:
        chosen = stack_fits.fit_rows(ROWS, c)
        assert chosen, c.name
        assert {r["split"] for r in chosen} == {"fit"}
        assert {r["stack"] for r in chosen} == {c.stack}
    # held-out rows' figures scaled 10x (and their ids kept): every fit comes out the same
    scaled = [Row({**r.fields, "value": repr(float(r["value"]) * 10)}) if r["split"] == "heldout" else r for r in ROWS]
    assert scaled != ROWS
    assert stack_fits.fit_all(scaled, catalog) == stack_fits.fit_all(ROWS, catalog)


def _predictions(rows: list[Row], catalog: Catalog) -> dict[str, float]:
    results, skipped = run_rows(rows, catalog)
    return {r.id: r.predicted for r in results} | {s.id: -1.0 for s in skipped}


@pytest.mark.parametrize("stack", sorted({c.stack for c in stack_fits.CONSTANTS}))
def test_a_stack_constant_moves_no_other_stack_nor_the_vendor_rows(catalog: Catalog, stack: str) -> None:
    others = [r for r in ROWS if r["stack"] != stack] + bundled_rows()
    mine = [r for r in ROWS if r["stack"] == stack]
    base_others, base_mine = _predictions(others, catalog), _predictions(mine, catalog)
    with stack_fits.restored():
        for c in stack_fits.CONSTANTS:
            if c.stack == stack:
                c.apply(c.grid[-1] if c.grid[0] == 0.0 else c.grid[0])  # each far from its fitted value
        assert _predictions(others, catalog) == base_others
        moved = _predictions(mine, catalog)
        assert sum(moved[k] != v for k, v in base_mine.items()) >= 20  # and they do move its own rows


def test_a_constant_is_fitted_on_the_rows_it_moves(catalog: Catalog) -> None:
    # AutoAWQ: each constant's rows are the autoawq speed rows of its kernel and phase: together, every
    # predicted autoawq speed row of split=fit, and no memory row
    fitted = {r["id"] for c in stack_fits.CONSTANTS if c.stack == "autoawq" for r in stack_fits.fit_rows(ROWS, c)}
    speed = {r["id"] for r in ROWS if r["stack"] == "autoawq" and r["split"] == "fit" and r["category"] == "inference"}
    results, _ = run_rows([r for r in ROWS if r["id"] in speed], catalog)
    assert {r.id for r in results} - stack_fits.NOT_YET_FITTED <= fitted <= speed
    # rows expressed after the fit are predicted fit rows the fit does not read (yet)
    assert stack_fits.NOT_YET_FITTED.issubset({r.id for r in results})
    assert not fitted & stack_fits.NOT_YET_FITTED
    assert {c.stack for c in stack_fits.CONSTANTS} == {"autoawq", "sglang"}


def test_sglangs_host_time_is_fitted_on_its_first_token_rows_and_moves_only_them(catalog: Catalog) -> None:
    (host,) = [c for c in stack_fits.CONSTANTS if c.stack == "sglang"]
    chosen = stack_fits.fit_rows(ROWS, host)
    assert {r["metric"] for r in chosen} == {"median_time_to_first_token"}
    assert len(chosen) >= 15
    sglang = [r for r in ROWS if r["stack"] == "sglang"]
    base = _predictions(sglang, catalog)
    before = dict(engines.REQUEST_HOST_S)
    with stack_fits.restored():
        host.apply(0.0)
        moved = {k: v for k, v in _predictions(sglang, catalog).items() if v != base[k]}
    assert before == engines.REQUEST_HOST_S  # restored
    metric = {r["id"]: r["metric"] for r in sglang}
    assert moved and {metric[k] for k in moved} == {"median_time_to_first_token"}
    # a first token comes exactly the host time earlier without it (ms), throughput and gaps unmoved
    assert all(base[k] - v == pytest.approx(before["sglang"] * 1e3, rel=1e-6) for k, v in moved.items())


@pytest.mark.parametrize("engine", sorted(engines.ARRIVAL_EXTRA_STEPS))
def test_an_engines_host_loop_steps_move_no_other_engines_rows(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    # the cited (not fitted) steps an engine's loop has taken up when a request arrives: changing
    # one engine's moves no row of another engine, stacks or vendor files
    rows = ROWS + bundled_rows()
    engine_of = {r.id: r.workload.get("engine", "vllm") for r in run_rows(rows, catalog)[0]}
    base = _predictions(rows, catalog)
    monkeypatch.setitem(engines.ARRIVAL_EXTRA_STEPS, engine, engines.ARRIVAL_EXTRA_STEPS[engine] + 2)
    moved = {k for k, v in _predictions(rows, catalog).items() if v != base[k]}
    assert moved, engine
    assert {engine_of[k] for k in moved} == {engine}
