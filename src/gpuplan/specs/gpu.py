"""The GPU catalog: sourced rows read from package data, in SI units, with lookup by name or alias.

The rows live in `gpuplan/data/gpus/*.toml` (format: `data/gpus/FORMAT.md`). Vendor units sit in
the keys there (`memory_GiB`, `memory_bandwidth_GBps`, `bf16_TFLOPS`) and are converted here, once.
A user's own file in the same format adds rows or overrides bundled ones by name.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gpuplan.errors import CatalogError, InvalidSettingError, UnknownGPUError, did_you_mean
from gpuplan.safeio import MAX_TABLE_BYTES, check_numbers, clip, clip_repr, has_controls, read_capped, value_problem
from gpuplan.specs import tomlcache

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


class _Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=3)
    url: str = Field(min_length=3)
    where: str = Field(min_length=2)
    read: dt.date


# Bounds on a catalog row's values, each far beyond any card (the bundled rows span 8-288 GiB,
# 224-8,000 GB/s, 0.19-15,000 TFLOPS, 70-1,400 W, NVLink domains of 1-72): only a typo or nonsense
# is refused. Without them a user's `memory_bandwidth_GBps = 1e300` overflowed to infinity once
# converted to bytes/s (a traceback at --json), and 1e-300 made every time estimate infinite.
_MEM_MIN, _MEM_MAX = 0.1, 100_000  # GB or GiB: 100 MB to 100 TB
GBPS_MIN, GBPS_MAX = 1, 1_000_000  # memory bandwidth, GB/s: 1 GB/s to 1 PB/s (a calibration's too)
TFLOPS_MIN, TFLOPS_MAX = 0.001, 10_000_000  # 1 GFLOPS to 10 EFLOPS, dense (a calibration's too)
_COUNT_MAX: Final = 100_000  # RT cores, video engines, MIG slices, display outputs
# SkyPilot accelerator names as `sky show-gpus` prints them ("H100", "A100-80GB", "Gaudi HL-205"): letters,
# digits, ".", "_", "-" and inner spaces; never ":", which separates the name from the count in a task.
SKYPILOT_NAME_PATTERN: Final = r"^[A-Za-z0-9](?:[A-Za-z0-9 ._-]{0,62}[A-Za-z0-9])?$"


class _Row(BaseModel):
    """One `[[gpu]]` table exactly as written in a catalog file."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    vendor: str
    architecture: str
    chip: str
    compute_capability: str
    form_factor: Literal["SXM2", "SXM4", "SXM5", "SXM6", "PCIe", "OAM"]
    memory_GiB: float | None = Field(default=None, ge=_MEM_MIN, le=_MEM_MAX, allow_inf_nan=False)
    memory_GB: float | None = Field(default=None, ge=_MEM_MIN, le=_MEM_MAX, allow_inf_nan=False)
    # What nvidia-smi shows with ECC on where ECC takes capacity (GDDR inline ECC), on cards that ship
    # with ECC on; absent: ECC costs no capacity (HBM sideband ECC), or the card ships with it off
    memory_ecc_MiB: float | None = Field(default=None, ge=_MEM_MIN, le=_MEM_MAX * 1024, allow_inf_nan=False)
    memory_type: str
    memory_bandwidth_GBps: float = Field(ge=GBPS_MIN, le=GBPS_MAX, allow_inf_nan=False)
    fp64_TFLOPS: float | None = Field(default=None, ge=TFLOPS_MIN, le=TFLOPS_MAX, allow_inf_nan=False)
    fp32_TFLOPS: float = Field(ge=TFLOPS_MIN, le=TFLOPS_MAX, allow_inf_nan=False)
    tf32_TFLOPS: float | None = Field(default=None, ge=TFLOPS_MIN, le=TFLOPS_MAX, allow_inf_nan=False)
    fp16_TFLOPS: float | None = Field(default=None, ge=TFLOPS_MIN, le=TFLOPS_MAX, allow_inf_nan=False)
    fp16_fp16acc_TFLOPS: float | None = Field(default=None, ge=TFLOPS_MIN, le=TFLOPS_MAX, allow_inf_nan=False)
    bf16_TFLOPS: float | None = Field(default=None, ge=TFLOPS_MIN, le=TFLOPS_MAX, allow_inf_nan=False)
    fp8_TFLOPS: float | None = Field(default=None, ge=TFLOPS_MIN, le=TFLOPS_MAX, allow_inf_nan=False)
    int8_TOPS: float | None = Field(default=None, ge=TFLOPS_MIN, le=TFLOPS_MAX, allow_inf_nan=False)
    int4_TOPS: float | None = Field(default=None, ge=TFLOPS_MIN, le=TFLOPS_MAX, allow_inf_nan=False)
    fp4_TFLOPS: float | None = Field(default=None, ge=TFLOPS_MIN, le=TFLOPS_MAX, allow_inf_nan=False)
    tdp_W: float = Field(ge=1, le=100_000, allow_inf_nan=False)  # W: a whole rack is ~130 kW
    nvlink_GBps: float = Field(ge=0, le=GBPS_MAX, allow_inf_nan=False)
    nvlink_domain: int = Field(ge=1, le=100_000)  # GPUs in one NVLink domain (GB200 NVL72: 72)
    pcie_gen: int = Field(ge=1, le=6)
    multi_node: bool
    mig_instances: int = Field(ge=0, le=_COUNT_MAX)
    display_outputs: int = Field(ge=0, le=_COUNT_MAX)
    # "passthrough": graphics drivers (NVIDIA vWS/GRID, gaming) on the whole GPU, passed through to one
    # VM (AWS G5's A10G): a graphics mode, but no vGPU profiles to share the card among users
    vgpu: Literal["none", "compute", "graphics", "passthrough"]
    rt_cores: int = Field(ge=0, le=_COUNT_MAX)
    rt_core_gen: int = Field(ge=0, le=100)
    nvenc: int = Field(ge=0, le=_COUNT_MAX)
    nvdec: int = Field(ge=0, le=_COUNT_MAX)
    launch_year: int = Field(ge=2010, le=2030)
    geforce_eula: bool
    # Per-card facts, optional: the shares of this row's peaks and bandwidth that real kernels were
    # measured to reach, in (0, 1] (absent: the defaults by architecture in estimators/efficiency.py),
    # and the card's accelerator name in SkyPilot.
    mamf_bf16: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)  # 16-bit (and TF32) matmul
    mamf_fp8: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)  # 8-bit (fp8, int8) matmul
    mamf_fp4: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)  # FP4 matmul
    memory_bandwidth_share: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)  # memory-bound
    skypilot_name: str | None = None
    notes: str = ""
    sources: dict[str, str]

    @field_validator("skypilot_name")
    @classmethod
    def _skypilot_name(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(SKYPILOT_NAME_PATTERN, v):
            raise ValueError(
                "must be a SkyPilot accelerator name as `sky show-gpus` prints it: letters, digits, '.', '_', '-' "
                "and inner spaces, at most 64 characters, no ':'"
            )
        return v

    @model_validator(mode="after")
    def _one_memory_unit(self) -> _Row:
        if (self.memory_GiB is None) == (self.memory_GB is None):
            raise ValueError("give exactly one of memory_GiB and memory_GB")
        full = self.memory_GiB * 1024 if self.memory_GiB is not None else (self.memory_GB or 0) * GB / MIB
        if self.memory_ecc_MiB is not None and self.memory_ecc_MiB > full:
            raise ValueError(f"memory_ecc_MiB {self.memory_ecc_MiB:g} is more than the card's {full:g} MiB")
        return self


# Fields that carry a value and so need a source.
_UNSOURCED: Final = frozenset({"name", "aliases", "notes", "sources"})
_VALUE_FIELDS: Final = tuple(f for f in _Row.model_fields if f not in _UNSOURCED)
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


def _row_to_gpu(row: _Row, sources: Mapping[str, Source], origin: str) -> GPU:
    def tera(v: float | None) -> float | None:
        return None if v is None else v * TERA

    if row.memory_GiB is not None:
        mem, unit = row.memory_GiB * GIB, "GiB"
    else:
        assert row.memory_GB is not None  # guaranteed by _Row._one_memory_unit
        mem, unit = row.memory_GB * GB, "GB"
    peaks = {p: tera(getattr(row, col)) for p, col in PEAK_COLUMNS.items()}
    return GPU(
        name=row.name,
        aliases=tuple(row.aliases),
        vendor=row.vendor,
        architecture=row.architecture,
        chip=row.chip,
        compute_capability=row.compute_capability,
        form_factor=row.form_factor,
        memory_bytes=mem,
        memory_unit_stated=unit,
        memory_type=row.memory_type,
        memory_bandwidth_bytes_per_s=row.memory_bandwidth_GBps * GB,
        peak_flop_per_s=peaks,
        fp16_fp16acc_flop_per_s=tera(row.fp16_fp16acc_TFLOPS),
        fp4_flop_per_s=tera(row.fp4_TFLOPS),
        tdp_watts=row.tdp_W,
        nvlink_bandwidth_bytes_per_s=row.nvlink_GBps * GB,
        nvlink_domain=row.nvlink_domain,
        pcie_gen=row.pcie_gen,
        multi_node=row.multi_node,
        mig_instances=row.mig_instances,
        display_outputs=row.display_outputs,
        vgpu=row.vgpu,
        rt_cores=row.rt_cores,
        rt_core_gen=row.rt_core_gen,
        nvenc=row.nvenc,
        nvdec=row.nvdec,
        launch_year=row.launch_year,
        geforce_eula=row.geforce_eula,
        notes=row.notes,
        sources=sources,
        origin=origin,
        mamf_bf16=row.mamf_bf16,
        mamf_fp8=row.mamf_fp8,
        mamf_fp4=row.mamf_fp4,
        memory_bandwidth_share=row.memory_bandwidth_share,
        skypilot_name=row.skypilot_name,
        memory_ecc_bytes=None if row.memory_ecc_MiB is None else row.memory_ecc_MiB * MIB,
    )


def parse_catalog_text(text: str, origin: str) -> list[GPU]:
    """The GPUs of one catalog file's text; every value must resolve to a dated source."""
    try:
        doc = tomlcache.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{origin}: not valid TOML ({clip(str(exc))}). See data/gpus/FORMAT.md.") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table (~300 levels overflow)
        raise CatalogError(f"{origin}: refused: it nests too deep. See data/gpus/FORMAT.md.") from None
    except ValueError as exc:  # int() of 4,300+ digits (CPython's int_max_str_digits), a date out of range
        raise CatalogError(f"{origin}: holds a value gpuplan cannot read: {value_problem(exc)}.") from None
    try:  # NaN, infinity (TOML has both), integers beyond 64 bits, nesting beyond safeio.MAX_DEPTH
        check_numbers(doc, origin)
    except InvalidSettingError as exc:
        raise CatalogError(str(exc)) from None
    unknown = set(doc) - {"gpu", "source"}
    if unknown:
        raise CatalogError(
            f"{origin}: unknown top-level table(s) {clip(sorted(unknown))}; expected [[gpu]] and [source.*]."
        )
    raw_sources = doc.get("source", {})
    if not isinstance(raw_sources, dict):  # `source = 1`: TOML allows it, the format does not
        raise CatalogError(f"{origin}: 'source' must be tables ([source.KEY]). See data/gpus/FORMAT.md.")
    rows = doc.get("gpu", [])
    if not isinstance(rows, list):
        raise CatalogError(f"{origin}: 'gpu' must be an array of tables ([[gpu]]). See data/gpus/FORMAT.md.")
    sources: dict[str, Source] = {}
    for key, body in raw_sources.items():
        try:
            s = _Source.model_validate(body)
        except ValidationError as exc:
            raise CatalogError(f"{origin}: source {clip_repr(key)}: {_first_error(exc)}") from None
        sources[key] = Source(key, s.title, s.url, s.where, s.read)
    gpus = []
    for i, body in enumerate(rows):
        label = body.get("name", f"row {i + 1}") if isinstance(body, dict) else f"row {i + 1}"
        try:
            row = _Row.model_validate(body)
        except ValidationError as exc:
            raise CatalogError(f"{origin}: GPU {clip_repr(label)}: {_first_error(exc)}") from None
        for text_value in (row.name, *row.aliases):  # printed in tables, headers and launch files
            if has_controls(text_value):
                raise CatalogError(
                    f"{origin}: GPU name or alias {clip_repr(text_value)} holds control characters; use plain text."
                )
        gpus.append(_row_to_gpu(row, _resolve_sources(row, sources, origin), origin))
    return gpus


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = clip(".".join(str(p) for p in err["loc"])) or "row"
    got = "" if isinstance(err.get("input"), dict) else f". Got {clip_repr(err.get('input'))}"
    return f"{loc}: {err['msg']}{got}."


def _resolve_sources(row: _Row, sources: Mapping[str, Source], origin: str) -> dict[str, Source]:
    default = row.sources.get("*")
    resolved: dict[str, Source] = {}
    for f in row.sources:
        if f != "*" and f not in _VALUE_FIELDS:
            raise CatalogError(f"{origin}: GPU {row.name!r}: sources names unknown field {f!r}.")
    for f in _VALUE_FIELDS:
        if getattr(row, f) is None:
            continue  # an absent value (the chip lacks it) needs no source
        key = row.sources.get(f, default)
        if key is None:
            raise CatalogError(f"{origin}: GPU {row.name!r}: field {f!r} has no source (and no '*' default).")
        if key not in sources:
            raise CatalogError(f"{origin}: GPU {row.name!r}: source {key!r} of {f!r} is not defined in the file.")
        resolved[f] = sources[key]
    return resolved


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
    gpus: list[GPU] = []
    for origin, text in _bundled_texts():
        gpus.extend(parse_catalog_text(text, origin))
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
