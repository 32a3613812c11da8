"""PNG charts (matplotlib, an optional extra: pip install 'gpuplan[chart]'), imported only when a
chart is asked for so the CLI starts without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuplan.errors import InvalidSettingError
from gpuplan.results import LabAllocation, LabCostAllocation


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise InvalidSettingError(
            "--png needs matplotlib: pip install 'gpuplan[chart]' (the table works without it)."
        ) from None
    return plt


def _save(plt: Any, fig: Any, path: Path, dpi: int = 120) -> None:
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=dpi)
    except OSError as exc:
        raise InvalidSettingError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)


def relative_png(rec: dict[str, Any], path: Path) -> None:
    """Grouped horizontal bars: each GPU's 16-bit training, 16-bit and 8-bit inference speed
    relative to the reference GPU (= 100%)."""
    plt = _pyplot()
    rows = list(reversed(rec["rows"]))
    names = [r["gpu"] for r in rows]
    series = (
        ("train_16bit_pct", "16-bit training", "#4C72B0"),
        ("infer_16bit_pct", "16-bit inference", "#55A868"),
        ("infer_8bit_pct", "8-bit inference", "#C44E52"),
    )
    height = 0.27
    fig, ax = plt.subplots(figsize=(10, max(4.0, 0.42 * len(rows) + 1.5)))
    for i, (key, label, color) in enumerate(series):
        ys = [j + (i - 1) * height for j in range(len(rows))]
        ax.barh(ys, [r[key] for r in rows], height=height, label=label, color=color)
    ax.axvline(100, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(names, fontsize=8)
    ax.set_xlabel(f"speed relative to {rec['reference_gpu']} 16-bit = 100%")
    w = rec["workloads"]
    ax.set_title(f"gpuplan: relative GPU speed ({w['model']}; estimates, not measurements)", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    _save(plt, fig, path)


def gantt_png(rec: LabAllocation | LabCostAllocation, path: Path) -> None:
    """A lab allocation (`gpuplan lab allocate --json`) as a Gantt chart: a row per job, bars
    coloured by GPU type, their height the share of the job's time on that type."""
    segs = rec.segments if isinstance(rec, LabAllocation) else []
    if not segs:
        raise InvalidSettingError("--png draws the fair and makespan policies' schedules (the cost policy has none).")
    plt = _pyplot()
    from matplotlib.patches import Patch

    jobs = [j.name for j in rec.jobs]
    types = sorted({s.gpu for s in segs})
    cmap = plt.get_cmap("tab10")
    colours = {t: cmap(i % 10) for i, t in enumerate(types)}
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(jobs) + 1.6))
    for s in segs:
        hours = (s.end_s - s.start_s) / 3600
        ax.barh(jobs.index(s.job), hours, left=s.start_s / 3600, height=0.8 * s.share, color=colours[s.gpu])
    ax.set_yticks(range(len(jobs)), jobs)
    ax.invert_yaxis()
    ax.set_xlabel("hours from now")
    ax.set_title(f"gpuplan lab allocate --policy {rec.policy}: bar height = share of the job's time on that GPU type")
    ax.legend([Patch(color=colours[t]) for t in types], types, loc="lower right", fontsize=8)
    _save(plt, fig, path, dpi=110)
