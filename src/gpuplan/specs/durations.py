"""Durations in workload keys (`deadline`): '24h', '90 min', '2d' or a number of seconds."""

from __future__ import annotations

import math
import re
from typing import Final

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(s|sec|m|min|h|hr|hours?|d|days?|w|weeks?)?\s*$", re.IGNORECASE)
_DURATION_S: Final = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "w": 604800}
# The longest deadline: a century. No plan looks further, and a service priced over 1e300 s
# would overflow its cost to infinity.
MAX_DURATION_S: Final = 100 * 365.25 * 86400


def parse_duration_s(value: str | float | int) -> float:
    """'24h', '90 min', '2d' or a number of seconds -> seconds."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a duration such as '24h' or '2d'. Got {value!r}.")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an integer beyond any float
            raise ValueError(f"a duration must be at most 100 years. Got {value!r}.") from None
    else:
        m = _DURATION.match(value)
        if not m:
            raise ValueError(f"expected a duration such as '24h', '90min' or '2d'. Got {value!r}.")
        unit = (m.group(2) or "s").lower()
        unit = {"hour": "h", "hours": "h", "day": "d", "days": "d", "week": "w", "weeks": "w"}.get(unit, unit)
        seconds = float(m.group(1)) * _DURATION_S[unit]
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a duration must be positive. Got {value!r}.")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"a duration must be at most 100 years ({MAX_DURATION_S:,.0f} s). Got {value!r}.")
    return seconds
