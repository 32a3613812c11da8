"""PNG charts (matplotlib, an optional extra: pip install 'gpuplan[chart]'), imported only when a
chart is asked for so the CLI starts without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuplan.errors import InvalidSettingError


def relative_png(rec: dict[str, Any], path: Path) -> None:
    """Grouped horizontal bars: each GPU's 16-bit training, 16-bit and 8-bit inference speed
    relative to the reference GPU (= 100%)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise InvalidSettingError(
            "--png needs matplotlib: pip install 'gpuplan[chart]' (the table works without it)."
        ) from None
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
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise InvalidSettingError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
