"""The GPU catalog: sourced rows read from package data, in SI units, with lookup by name or alias.

The rows live in `gpuplan/data/gpus/*.toml` (format: `data/gpus/FORMAT.md`). Vendor units sit in
the keys there (`memory_GiB`, `memory_bandwidth_GBps`, `bf16_TFLOPS`) and are converted here, once.
A user's own file in the same format adds rows or overrides bundled ones by name.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Final

from gpuplan.errors import CatalogError, InvalidSettingError, UnknownGPUError, did_you_mean
from gpuplan.safeio import MAX_TABLE_BYTES, clip, clip_repr, read_capped

# Units, converted once here. GiB = 2**30 bytes (IEC 80000-13); GB, TFLOPS, GB/s are decimal.
GIB: Final = 2.0**30
GB: Final = 1e9
MIB: Final = 2.0**20
TERA: Final = 1e12

CATALOG_ENV: Final = "GPUPLAN_CATALOG"  # extra catalog files, separated by os.pathsep

# Catalog column -> precision key of `GPU.peak_flop_per_s` (the gpus --json contract).
PEAK_COLUMNS: Final = {
    "fp64": "fp64_TFLOPS",
    "fp32": "fp32_TFLOPS",
    "tf32": "tf32_TFLOPS",
    "fp16": "fp16_TFLOPS",
    "bf16": "bf16_TFLOPS",
    "fp8": "fp8_TFLOPS",
    "int8": "int8_TOPS",
    "int4": "int4_TOPS",
}


# Bounds on a catalog row's values, each far beyond any card (the bundled rows span 8-288 GiB,
# 224-8,000 GB/s, 0.19-15,000 TFLOPS, 70-1,400 W, NVLink domains of 1-72): only a typo or nonsense
# is refused. Without them a user's `memory_bandwidth_GBps = 1e300` overflowed to infinity once
# converted to bytes/s (a traceback at --json), and 1e-300 made every time estimate infinite.
MEM_MIN, MEM_MAX = 0.1, 100_000  # GB or GiB: 100 MB to 100 TB
GBPS_MIN, GBPS_MAX = 1, 1_000_000  # memory bandwidth, GB/s: 1 GB/s to 1 PB/s (a calibration's too)
TFLOPS_MIN, TFLOPS_MAX = 0.001, 10_000_000  # 1 GFLOPS to 10 EFLOPS, dense (a calibration's too)
COUNT_MAX: Final = 100_000  # RT cores, video engines, MIG slices, display outputs
# SkyPilot accelerator names as `sky show-gpus` prints them ("H100", "A100-80GB", "Gaudi HL-205"): letters,
# digits, ".", "_", "-" and inner spaces; never ":", which separates the name from the count in a task.
SKYPILOT_NAME_PATTERN: Final = r"^[A-Za-z0-9](?:[A-Za-z0-9 ._-]{0,62}[A-Za-z0-9])?$"


# The per-card facts above: sourced like every value, but not (yet) among the keys of `gpus --json`,
# whose source lists (source_summary) leave them out so that the record stays as it was.
CARD_FACT_FIELDS: Final = ("mamf_bf16", "mamf_fp8", "mamf_fp4", "memory_bandwidth_share", "skypilot_name")
# Sourced like every value, and also left out of `gpus --json`'s source lists (the record stays as it was).
ECC_FIELDS: Final = ("memory_ecc_MiB",)
# GeForce cards whose driver offers "Change ECC State" (RTX 3090 Ti and RTX 4090; not the RTX 5090):
# notebookcheck.net "Nvidia GeForce RTX 5090 ... drops VRAM ECC" (2025); Chaos support "ECC State for
# Nvidia GPUs". Other GeForce cards have no ECC setting.
GEFORCE_WITH_ECC: Final = frozenset({"GeForce RTX 3090 Ti", "GeForce RTX 4090"})
# GDDR inline ECC: "On GPUs with GDDR memory with ECC enabled the available DRAM is reduced by 6.25%"
# (CUDA C++ Best Practices Guide, quoted in the NVIDIA forum thread "NVIDIA T4 has only 15g of
# memory?"); nvidia-smi agrees: T4 15360 of 16384 MiB, L40S 46068 of 49140 MiB (15/16 less 12 MiB).
GDDR_ECC_VISIBLE: Final = 15 / 16


@dataclass(frozen=True)
class Source:
    """Where a catalog value was read, and when."""

    key: str
    title: str
    url: str
    where: str
    read: dt.date

    @property
    def verified(self) -> bool:
        """False for the `unverified` placeholder: a value no stored source confirmed (see notes)."""
        return self.key != UNVERIFIED


# The source key a catalog file uses for values no source confirmed; the row's notes say why.
UNVERIFIED: Final = "unverified"


@dataclass(frozen=True)
class GPU:
    """One GPU variant, every quantity in SI base units."""

    name: str
    aliases: tuple[str, ...]
    vendor: str
    architecture: str
    chip: str
    compute_capability: str
    form_factor: str
    memory_bytes: float
    memory_unit_stated: str  # "GiB" or "GB": the unit the catalog row gives the capacity in
    memory_type: str
    memory_bandwidth_bytes_per_s: float
    peak_flop_per_s: Mapping[str, float | None]  # dense; fp16/bf16 with fp32 accumulate
    fp16_fp16acc_flop_per_s: float | None
    fp4_flop_per_s: float | None
    tdp_watts: float
    nvlink_bandwidth_bytes_per_s: float  # both directions together
    nvlink_domain: int
    pcie_gen: int
    multi_node: bool
    mig_instances: int
    display_outputs: int
    vgpu: str
    rt_cores: int
    rt_core_gen: int
    nvenc: int
    nvdec: int
    launch_year: int
    geforce_eula: bool
    notes: str
    sources: Mapping[str, Source] = field(repr=False)  # value field -> its source
    origin: str = ""  # the catalog file the row came from
    # measured on this very card by `gpuplan bench` (a calibration file); empty / None: not measured
    measured_matmul_flop_per_s: Mapping[str, float] = field(default_factory=dict)  # precision -> best
    measured_bandwidth_bytes_per_s: float | None = None  # device memory, copy kernel (read + write)
    # per-card facts the catalog row states (None: not stated; efficiency.py's defaults apply)
    mamf_bf16: float | None = None  # best 16-bit matmul, share of peak_flop_per_s["bf16"]
    mamf_fp8: float | None = None  # best 8-bit matmul, share of peak_flop_per_s["fp8"]
    mamf_fp4: float | None = None  # best FP4 matmul, share of fp4_flop_per_s
    memory_bandwidth_share: float | None = None  # memory-bound kernels, share of memory_bandwidth_bytes_per_s
    skypilot_name: str | None = None  # the accelerator name SkyPilot tasks ask for
    # what nvidia-smi shows with ECC on, on a card that ships with ECC on and pays capacity for it
    # (GDDR inline ECC); None: ECC costs no capacity (HBM sideband ECC) or the card ships with it off
    memory_ecc_bytes: float | None = None

    def visible_memory_bytes(self, ecc: bool | None = None) -> float:
        """The memory the driver shows with ECC as set: `ecc` None is the card's default (on for the
        rows that state `memory_ecc_MiB`), False the full capacity. ECC switched on where the row
        states no figure costs GDDR cards 1/16 (GDDR_ECC_VISIBLE) and HBM cards nothing (HBM2 keeps
        ECC bits in a sideband region: "ECC can be active without a bandwidth or capacity penalty",
        Tesla V100 whitepaper, ECC Memory Resiliency)."""
        if ecc is False:
            return self.memory_bytes
        if self.memory_ecc_bytes is not None:
            return self.memory_ecc_bytes
        if ecc and self.memory_type.upper().startswith("GDDR"):
            return self.memory_bytes * GDDR_ECC_VISIBLE
        return self.memory_bytes

    @property
    def has_ecc(self) -> bool:
        """Whether the card's memory ECC can be switched on: datacenter and workstation cards, and of
        the GeForce cards only those whose driver offers the toggle (GEFORCE_WITH_ECC)."""
        return not self.geforce_eula or self.name in GEFORCE_WITH_ECC

    @property
    def cc(self) -> tuple[int, int] | None:
        """Compute capability as (major, minor), or None for non-NVIDIA parts."""
        m = re.fullmatch(r"(\d+)\.(\d+)", self.compute_capability)
        return (int(m.group(1)), int(m.group(2))) if m else None

    @property
    def graphics(self) -> str:
        """Graphics mode: 'none', 'vGPU', 'display', 'display + vGPU' or 'passthrough' (whole-GPU
        graphics drivers in one VM)."""
        parts = []
        if self.display_outputs > 0:
            parts.append("display")
        if self.vgpu == "graphics":
            parts.append("vGPU")
        elif self.vgpu == "passthrough":
            parts.append("passthrough")
        return " + ".join(parts) if parts else "none"

    def supports(self, precision: str) -> bool:
        """True where the GPU has native tensor/vector units for `precision`."""
        return self.peak_flop_per_s.get(precision) is not None


def _norm(name: str) -> str:
    """Lookup key: case, spaces, hyphens and underscores do not matter."""
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


# Vendor words people prepend; tried only after an exact miss.
_PREFIXES: Final = ("nvidia", "geforce", "tesla", "quadro", "amd", "instinct")


def parse_catalog_text(text: str, origin: str) -> list[GPU]:
    """The GPUs of one catalog file's text; every value must resolve to a dated source
    (specs/gpu_rows.py, loaded here: the cached bundled catalog needs none of its models)."""
    from gpuplan.specs.gpu_rows import parse_catalog_text as parse

    return parse(text, origin)


def _bundled_texts() -> Iterator[tuple[str, str]]:
    folder = resources.files("gpuplan") / "data" / "gpus"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            yield f"gpuplan/data/gpus/{entry.name}", entry.read_text(encoding="utf-8")


class Catalog:
    """A set of GPUs with case-insensitive lookup by name or alias."""

    def __init__(self, gpus: Iterable[GPU]) -> None:
        self._by_name: dict[str, GPU] = {}
        for g in gpus:
            self._by_name[g.name] = g  # later rows (user files) override earlier ones by name
        self._index: dict[str, GPU] = {}
        for g in self._by_name.values():
            for label in (g.name, *g.aliases):
                k = _norm(label)
                other = self._index.get(k)
                if other is not None and other.name != g.name:
                    raise CatalogError(
                        f"GPU name or alias {label!r} of {g.name!r} ({g.origin}) is already used by "
                        f"{other.name!r} ({other.origin}); aliases must be unique."
                    )
                self._index[k] = g

    def __iter__(self) -> Iterator[GPU]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def find(self, name: str) -> GPU | None:
        """The GPU called `name`, or None."""
        k = _norm(name)
        if k in self._index:
            return self._index[k]
        for p in _PREFIXES:  # "NVIDIA H100", "GeForce RTX 4090", "Tesla V100"
            if k.startswith(p) and k[len(p) :] in self._index:
                return self._index[k[len(p) :]]
        return None

    def get(self, name: str) -> GPU:
        """The GPU called `name` (case-insensitive, aliases allowed), or UnknownGPUError."""
        gpu = self.find(name)
        if gpu is None:
            labels = [label for g in self for label in (g.name, *g.aliases)]
            hint = did_you_mean(name, labels) or " Run `gpuplan gpus` for the list."
            raise UnknownGPUError(f"Unknown GPU {clip_repr(name)}.{hint}")
        return gpu


def load_catalog(extra_files: Iterable[str | Path] = (), *, use_env: bool = True) -> Catalog:
    """The bundled catalog, plus the user's files (later files override earlier rows by name)."""
    from gpuplan.specs.gpu_cache import bundled_gpus  # imports this module

    gpus = bundled_gpus(list(_bundled_texts()))  # validated once, then read back from the cache
    paths = [Path(p) for p in extra_files]
    if use_env and os.environ.get(CATALOG_ENV):
        paths = [Path(p) for p in os.environ[CATALOG_ENV].split(os.pathsep) if p] + paths
    for path in paths:
        try:  # a regular file of at most MAX_TABLE_BYTES: never /dev/zero, a FIFO or a folder
            text = read_capped(path, "catalog file", MAX_TABLE_BYTES, "See data/gpus/FORMAT.md for the format.")
        except InvalidSettingError as exc:
            raise CatalogError(str(exc)) from None
        gpus.extend(parse_catalog_text(text, clip(str(path))))
    return Catalog(gpus)


@lru_cache(maxsize=1)
def bundled_catalog() -> Catalog:
    """The catalog shipped in the package (cached; no user files)."""
    return load_catalog(use_env=False)


def source_summary(gpu: GPU) -> list[dict[str, Any]]:
    """The distinct sources of a GPU's values, each with the fields it supports."""
    by_key: dict[str, dict[str, Any]] = {}
    for f, s in gpu.sources.items():
        if f in CARD_FACT_FIELDS or f in ECC_FIELDS:
            continue
        entry = by_key.setdefault(
            s.key,
            {
                "key": s.key,
                "title": s.title,
                "url": s.url,
                "where": s.where,
                "read": s.read.isoformat(),
                "verified": s.verified,
                "fields": [],
            },
        )
        entry["fields"].append(f)
    return list(by_key.values())
