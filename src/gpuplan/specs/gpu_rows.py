"""The catalog files' rows as written, validated (pydantic) and converted to `GPU`s in SI units.

Loaded only where a catalog file is parsed: a user's file, or the bundled files when their parsed
form is not yet cached (specs/gpu_cache.py); a command that reads the cached bundled catalog
builds none of these models.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from collections.abc import Mapping
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gpuplan.errors import CatalogError, InvalidSettingError
from gpuplan.safeio import check_numbers, clip, clip_repr, has_controls, value_problem
from gpuplan.specs import tomlcache
from gpuplan.specs.gpu import (
    COUNT_MAX,
    GB,
    GBPS_MAX,
    GBPS_MIN,
    GIB,
    GPU,
    MEM_MAX,
    MEM_MIN,
    MIB,
    PEAK_COLUMNS,
    SKYPILOT_NAME_PATTERN,
    TERA,
    TFLOPS_MAX,
    TFLOPS_MIN,
    Source,
)


class _Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=3)
    url: str = Field(min_length=3)
    where: str = Field(min_length=2)
    read: dt.date


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
    memory_GiB: float | None = Field(default=None, ge=MEM_MIN, le=MEM_MAX, allow_inf_nan=False)
    memory_GB: float | None = Field(default=None, ge=MEM_MIN, le=MEM_MAX, allow_inf_nan=False)
    # What nvidia-smi shows with ECC on where ECC takes capacity (GDDR inline ECC), on cards that ship
    # with ECC on; absent: ECC costs no capacity (HBM sideband ECC), or the card ships with it off
    memory_ecc_MiB: float | None = Field(default=None, ge=MEM_MIN, le=MEM_MAX * 1024, allow_inf_nan=False)
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
    mig_instances: int = Field(ge=0, le=COUNT_MAX)
    display_outputs: int = Field(ge=0, le=COUNT_MAX)
    # "passthrough": graphics drivers (NVIDIA vWS/GRID, gaming) on the whole GPU, passed through to one
    # VM (AWS G5's A10G): a graphics mode, but no vGPU profiles to share the card among users
    vgpu: Literal["none", "compute", "graphics", "passthrough"]
    rt_cores: int = Field(ge=0, le=COUNT_MAX)
    rt_core_gen: int = Field(ge=0, le=100)
    nvenc: int = Field(ge=0, le=COUNT_MAX)
    nvdec: int = Field(ge=0, le=COUNT_MAX)
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
VALUE_FIELDS: Final = tuple(f for f in _Row.model_fields if f not in _UNSOURCED)


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
        if f != "*" and f not in VALUE_FIELDS:
            raise CatalogError(f"{origin}: GPU {row.name!r}: sources names unknown field {f!r}.")
    for f in VALUE_FIELDS:
        if getattr(row, f) is None:
            continue  # an absent value (the chip lacks it) needs no source
        key = row.sources.get(f, default)
        if key is None:
            raise CatalogError(f"{origin}: GPU {row.name!r}: field {f!r} has no source (and no '*' default).")
        if key not in sources:
            raise CatalogError(f"{origin}: GPU {row.name!r}: source {key!r} of {f!r} is not defined in the file.")
        resolved[f] = sources[key]
    return resolved
