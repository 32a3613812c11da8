"""Error bars from the validation residuals: how far a figure of a given kind has been off.

`data/validation/residuals.json` holds, per kind ("training/Hopper", "decode/Ampere",
"memory/Ada Lovelace", ...), the signed errors (predicted - published) / published of every
bundled validation row of that kind. It is written by `gpuplan validate --write-residuals` and a
test checks it matches the bundled rows, so the error bars move whenever the model or the rows do.

Speed residuals are kept as errors of a rate (predicted / true - 1; a time's error is turned into
its rate's), so times and throughputs of one kind share them. A figure's range is where the truth
would lie if this prediction erred like the middle 80% of its kind (10th-90th percentile): a
rate's truth = predicted / (1 + error), a time's = predicted x (1 + error). A kind with fewer than MIN_ROWS rows
borrows from the same measurement on every architecture, and then from everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Final

from gpuplan.safeio import load_json

MIN_ROWS: Final = 8  # fewer rows than this and the 10th/90th percentiles are the extremes
LOW_Q: Final = 0.10
HIGH_Q: Final = 0.90
RESIDUALS_FILE: Final = "residuals.json"


@dataclass(frozen=True)
class Band:
    kind: str  # the kind whose residuals set the band (may be a fallback)
    n: int
    err_low: float  # 10th percentile of signed errors
    err_high: float  # 90th percentile
    median_abs: float

    def range(self, predicted: float, time: bool = False) -> tuple[float, float]:
        """(low, high) for the true value of a `predicted` figure. Speed residuals are errors of a
        rate (predicted / true - 1): a rate's truth is predicted / (1 + e), a time's predicted x (1 + e).
        The range always holds the estimate itself: where past rows of a kind all erred one way, the
        band runs from the estimate to their far quantile, never past the estimate ("2.3 s (2.4-3.7 s)"
        read as a contradiction)."""
        if time:
            a, b = predicted * (1.0 + self.err_low), predicted * (1.0 + self.err_high)
        else:
            a = predicted / (1.0 + self.err_high) if self.err_high > -0.99 else predicted
            b = predicted / (1.0 + self.err_low) if self.err_low > -0.99 else predicted * 100
        return (min(a, b, predicted), max(a, b, predicted))

    def record(self, predicted: float) -> dict[str, Any]:
        low, high = self.range(predicted)
        return {
            "low": low,
            "high": high,
            "basis": f"10th-90th percentile of {self.n} validation errors for {self.kind}",
            "median_abs_error": self.median_abs,
        }


def decode_time_band(b: Band, tpot_s: float, roofline_s: float | None) -> tuple[float, float]:
    """The band of a mean decode step (TPOT), its optimistic end no faster than the memory roofline:
    a decode step streams the weights and the KV cache from device memory at least once, so it takes
    at least their bytes / peak bandwidth (Williams, Waterman & Patterson 2009, the roofline model).
    The band always holds the estimate."""
    low, high = b.range(tpot_s, time=True)
    if roofline_s is not None and roofline_s > 0:
        low = min(tpot_s, max(low, roofline_s))
    return low, high


def decode_rate_band(rate: float, tpot_s: float, tpot_band: tuple[float, float]) -> tuple[float, float]:
    """The band of a decode throughput from its TPOT band, so the two never disagree: tokens/s =
    batch x replicas / TPOT (at batch 1, 1 / TPOT), so the rate's truth is the estimate scaled by
    TPOT / TPOT's truth: low = rate x TPOT / TPOT_high, high = rate x TPOT / TPOT_low. The same
    ratios hold at any batch (the band is a relative one), and the roofline cap on TPOT_low caps
    the rate's optimistic end."""
    t_low, t_high = tpot_band
    if tpot_s <= 0 or t_low <= 0:
        return rate, rate
    return rate * tpot_s / t_high, rate * tpot_s / t_low


def kind_of(what: str, model_kind: str, architecture: str) -> str:
    """The residual kind of a figure: what was timed, for which model family, on which architecture
    ("training/Hopper", "training (CNN)/Volta", "decode/Ampere")."""
    family = {"cnn": " (CNN)", "encoder": " (encoder)", "vision-transformer": " (encoder)"}.get(model_kind, "")
    return f"{what}{family}/{architecture}"


def _quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@lru_cache(maxsize=1)
def residuals() -> dict[str, list[float]]:
    path = resources.files("gpuplan") / "data" / "validation" / RESIDUALS_FILE
    try:
        # package data, strict all the same: no NaN token may reach a band (gpuplan.safeio)
        data = load_json(path.read_text(encoding="utf-8"), RESIDUALS_FILE)
    except FileNotFoundError:
        return {}
    return {str(k): [float(x) for x in v] for k, v in data.get("kinds", {}).items()}


def _median(xs: list[float]) -> float:
    """statistics.median's rule, the middle value or the mean of the middle two, in the same
    arithmetic; written out because importing statistics (with fractions and decimal) costs an
    estimate ~3 ms of start-up."""
    s = sorted(xs)
    i = len(s) // 2
    return s[i] if len(s) % 2 else (s[i - 1] + s[i]) / 2


@lru_cache(maxsize=512)  # the residuals are package data, fixed while the process runs
def band(kind: str) -> Band | None:
    """The error band for `kind` ("what/architecture"), with fallbacks when its rows are few."""
    table = residuals()
    what = kind.split("/", 1)[0]
    base_what = what.split(" (", 1)[0]
    memory = base_what == "memory"
    candidates = [
        (kind, table.get(kind, [])),
        (f"{what} on any GPU", [e for k, v in table.items() if k.split("/", 1)[0] == what for e in v]),
        (
            f"{base_what} on any GPU",
            [e for k, v in table.items() if k.split("/", 1)[0].split(" (")[0] == base_what for e in v],
        ),
        (
            "all memory figures" if memory else "all speed figures",
            [e for k, v in table.items() if k.startswith("memory") == memory for e in v],
        ),
    ]
    for name, errs in candidates:
        if len(errs) >= MIN_ROWS:
            return Band(
                name,
                len(errs),
                _quantile(errs, LOW_Q),
                _quantile(errs, HIGH_Q),
                _median([abs(e) for e in errs]),
            )
    return None


def residual_table(results: list[tuple[str, float]]) -> dict[str, Any]:
    """The residuals file's content from (kind, signed error) pairs."""
    kinds: dict[str, list[float]] = {}
    for kind, err in results:
        kinds.setdefault(kind, []).append(round(err, 4))
    return {
        "about": "signed errors (predicted - published) / published of the bundled validation rows, by kind; "
        "written by `gpuplan validate --write-residuals`",
        "kinds": {k: sorted(v) for k, v in sorted(kinds.items())},
    }
