"""The everyday-stacks measurements (data/validation/stacks.csv): published figures of the software
researchers run (HF Trainer/accelerate, answer.ai FSDP+QLoRA, LitGPT, torchtitan and torchao,
Unsloth, AutoAWQ/transformers generate, TGI, SGLang, vLLM, llama.cpp), each with its `stack` (the
software family) and its `split`.

A deterministic third of each source's rows is `heldout`: ordered by the SHA-256 of the row id,
the first round(n/3) of a source. Held-out rows are reported but never fitted: the residual file
(the error bars) leaves the stacks out unless asked, and then takes their `fit` rows only
(interfaces/api/validate.residual_file), so a constant tuned on the stacks can be judged on rows it
never saw. A row may keep its intended workload with a skip reason (a model whose config is not
bundled), and a row whose workload names what gpuplan cannot read yet (a `framework:`, an engine
such as `tgi`, `attention_impl: sdpa`) is skipped with the reader's own error, so it expresses
itself as soon as the reader learns the key.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Protocol

STACK_FILES: Final = ("stacks.csv",)
SPLITS: Final = ("fit", "heldout")
HELDOUT_FRACTION: Final = 1 / 3  # issue 27: a third of the new rows kept out of every fit


class _Keyed(Protocol):
    def __getitem__(self, key: str) -> str: ...


def _order(row_id: str) -> str:
    return hashlib.sha256(row_id.encode("utf-8")).hexdigest()


def split_of(rows: Sequence[_Keyed]) -> dict[str, str]:
    """Row id -> "heldout" or "fit": per source, the round(n/3) ids first by SHA-256 are held out."""
    by_source: dict[str, list[str]] = {}
    for r in rows:
        by_source.setdefault(r["source"], []).append(r["id"])
    out: dict[str, str] = {}
    for ids in by_source.values():
        held = set(sorted(ids, key=_order)[: round(len(ids) * HELDOUT_FRACTION)])
        out.update({i: "heldout" if i in held else "fit" for i in ids})
    return out


def _stats(errors: Sequence[float]) -> dict[str, float]:
    if not errors:
        return {"n": 0}
    return {
        "n": len(errors),
        "median_abs_error": statistics.median(abs(e) for e in errors),
        "median_error": statistics.median(errors),
    }


class _Scored(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def error(self) -> float: ...
    @property
    def unit(self) -> str: ...


def _family(category: str, unit: str) -> str:
    """What a figure is, for the per-stack targets: training throughput, inference, memory, fit verdict."""
    if unit == "fits":
        return "fit verdict"
    if unit == "bytes":
        return "memory"
    return "training" if category == "train_throughput" else "inference"


def by_stack(
    results: Iterable[_Scored], tags: Mapping[str, Mapping[str, str]], skipped_ids: Iterable[str]
) -> dict[str, dict[str, float]]:
    """Per "stack / figure / split" (e.g. "llama.cpp / inference / heldout"): n, median |error|,
    median error; rows of no stack are left out. `tags` maps a row id to its source, stack, split
    and category; skipped rows are counted per stack ("stack / skipped")."""
    groups: dict[str, list[float]] = {}
    for r in results:
        tag = tags.get(r.id)
        if not tag or not tag["stack"]:
            continue
        key = f"{tag['stack']} / {_family(tag['category'], r.unit)} / {tag['split'] or 'fit'}"
        groups.setdefault(key, []).append(r.error)
    out = {k: _stats(v) for k, v in sorted(groups.items())}
    for rid in skipped_ids:
        tag = tags.get(rid)
        if tag and tag["stack"]:
            cell = out.setdefault(f"{tag['stack']} / skipped", {"n": 0})
            cell["n"] += 1
    return dict(sorted(out.items()))


def by_source(
    results: Iterable[_Scored], tags: Mapping[str, Mapping[str, str]], skipped_ids: Iterable[str]
) -> dict[str, dict[str, float]]:
    """Per source (every file's `source` column): rows predicted, rows skipped, median |error| over
    the predicted rows that are figures (fit verdicts apart), and over the held-out ones."""
    figures: dict[str, list[float]] = {}
    held: dict[str, list[float]] = {}
    counts: dict[str, dict[str, float]] = {}
    for r in results:
        src = tags.get(r.id, {}).get("source", "") or "(no source)"
        counts.setdefault(src, {"n": 0, "skipped": 0})["n"] += 1
        if r.unit != "fits":
            figures.setdefault(src, []).append(abs(r.error))
            if tags.get(r.id, {}).get("split") == "heldout":
                held.setdefault(src, []).append(abs(r.error))
    for rid in skipped_ids:
        src = tags.get(rid, {}).get("source", "") or "(no source)"
        counts.setdefault(src, {"n": 0, "skipped": 0})["skipped"] += 1
    for src, cell in counts.items():
        if figures.get(src):
            cell["median_abs_error"] = statistics.median(figures[src])
        if held.get(src):
            cell["heldout_median_abs_error"] = statistics.median(held[src])
    return dict(sorted(counts.items()))
