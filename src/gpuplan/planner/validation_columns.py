"""The explicit columns of a measurement row: what gpuplan predicts for it, spelled out so that
reading the row needs no prose.

- `workload`: the workload keys as `key=value` pairs joined by "; ", model and gpu among them
  (`model=llama-3.1-8b; task=lora; ...; gpu=H100 SXM5 80GB`). `true`/`false` are booleans, a
  number is an int or a float, a list (lora_targets) joins its items with "+", anything else is text.
- `model_config`: the model's config.json keys in the same form where the model is no bundled
  preset (a shape a row spells out: MPT, GPT-3, Nemotron, ...); empty for a preset.
- `measure`: how the figure is compared where metric and unit do not say it alone (MEASURE_KEYS).
- `skip_reason`: why gpuplan cannot express the row; the other three are then empty.

Every bundled row has them, filled from its prose by the converter (planner/validation_prose.py),
and a test keeps the two equal; a row without them (a user's file) is read from its prose.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.safeio import clip_repr
from gpuplan.specs.gpu import GPU, Catalog
from gpuplan.specs.model import ModelSpec, model_from_config
from gpuplan.specs.models import load_model

EXPLICIT_COLUMNS: Final = ("workload", "model_config", "measure", "skip_reason")
LIST_KEYS: Final = frozenset({"lora_targets"})  # '+' joins their items
_LIST_WORDS: Final = ("default", "all-linear")  # lora_targets' named sets (a string, not a list)
# measure keys and their allowed values
MEASURE_KEYS: Final[dict[str, tuple[str | bool, ...]]] = {
    "measured_as": ("allocated", "reserved", "device"),  # memory: torch's allocated or reserved peak, or the device
    "prompt_rate": (True, False),  # a prompt-processing rate (llama-bench ppN): prefill tokens/s
    "max_batch": (True, False),  # served at the largest batch that fits
    "flops": ("model", "megatron"),  # TFLOP/s: model FLOPs, or Megatron's count with the recompute pass
    "per_gpu": (True, False),  # a throughput table per GPU whatever its unit says
    "batch_sum": (True, False),  # a decode rate summed over the batch: batch / time per output token
    "cold": (True, False),  # the prefill is the first forward after loading: the engine's first-call cost
}
# the number formats the columns hold (str(int), repr(float)): a grammar, not prose
_INT: Final = re.compile(r"-?[0-9]+")
_FLOAT: Final = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


@dataclass(frozen=True)
class Row:
    fields: dict[str, str]

    def __getitem__(self, key: str) -> str:
        return self.fields.get(key, "") or ""


@dataclass(frozen=True)
class Reading:
    """What a row's prediction needs: its workload, its model where no preset, how it compares."""

    workload: dict[str, Any]
    model_config: dict[str, Any] = field(default_factory=dict)
    measure: dict[str, Any] = field(default_factory=dict)


def is_fit_verdict(row: Row) -> bool:
    """A memory row that says whether the job fitted, not how much memory it took."""
    return "fits" in row["metric"].lower() or row["unit"].lower().startswith("boolean")


# --- the key=value grammar --------------------------------------------------------------------


def _value(key: str, text: str) -> Any:
    if key in LIST_KEYS:
        return text if text in _LIST_WORDS else [v for v in text.split("+") if v]
    if text in ("true", "false"):
        return text == "true"
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


def parse_pairs(text: str, column: str) -> dict[str, Any]:
    """`a=1; b=x` -> {"a": 1, "b": "x"}, in order."""
    out: dict[str, Any] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise InvalidSettingError(f"{column}: {clip_repr(part)} is not key=value")
        if key in out:
            raise InvalidSettingError(f"{column}: {key} is given twice")
        out[key] = _value(key, value)
    return out


def _text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | tuple) and key in LIST_KEYS:
        return "+".join(str(v) for v in value)
    raise InvalidSettingError(f"{key}: a {type(value).__name__} is not a column value")


def format_pairs(values: dict[str, Any], column: str) -> str:
    """The pairs' text; refused unless it reads back as the same keys, values and types."""
    text = "; ".join(f"{k}={_text(k, v)}" for k, v in values.items())
    if json.dumps(parse_pairs(text, column)) != json.dumps(values):
        raise InvalidSettingError(f"{column}: {clip_repr(text)} does not read back as written")
    return text


# --- reading and writing a row's columns -------------------------------------------------------


def _check_measure(measure: dict[str, Any]) -> None:
    for key, value in measure.items():
        allowed = MEASURE_KEYS.get(key)
        if allowed is None:
            raise InvalidSettingError(f"measure: unknown key {key!r}. Known: {', '.join(MEASURE_KEYS)}")
        if not any(type(value) is type(a) and value == a for a in allowed):
            raise InvalidSettingError(f"measure: {key} is one of {', '.join(_text(key, a) for a in allowed)}")


def explicit_reading(row: Row) -> Reading | None:
    """The row's explicit columns, or None when it has none (then its prose is read). A row with a
    skip reason raises it."""
    if row["skip_reason"]:
        raise InvalidSettingError(row["skip_reason"])
    if not row["workload"]:
        if row["model_config"] or row["measure"]:
            raise InvalidSettingError("model_config and measure need the workload column")
        return None
    workload = parse_pairs(row["workload"], "workload")
    for key in ("model", "gpu"):
        if not isinstance(workload.get(key), str):
            raise InvalidSettingError(f"workload: no {key}=")
    measure = parse_pairs(row["measure"], "measure")
    _check_measure(measure)
    return Reading(workload, parse_pairs(row["model_config"], "model_config"), measure)


def columns_of(reading: Reading | None, skip_reason: str = "") -> dict[str, str]:
    """The explicit columns' text for a reading, or for a row gpuplan cannot express."""
    if reading is None:
        return {"workload": "", "model_config": "", "measure": "", "skip_reason": skip_reason}
    return {
        "workload": format_pairs(reading.workload, "workload"),
        "model_config": format_pairs(reading.model_config, "model_config"),
        "measure": format_pairs(reading.measure, "measure"),
        "skip_reason": "",
    }


def model_of(reading: Reading) -> ModelSpec:
    """The model a reading names: built from its config, else the preset (or config.json, hub id)."""
    name = str(reading.workload["model"])
    return model_from_config(reading.model_config, name) if reading.model_config else load_model(name)


def gpu_of(reading: Reading, catalog: Catalog) -> GPU:
    return catalog.get(str(reading.workload["gpu"]))
