"""The web API's request and error bodies (pydantic models; FastAPI validates each request against
them and publishes them in the OpenAPI schema)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from gpuplan.specs.workload_schema import WorkloadSchema


class WorkloadIn(WorkloadSchema):
    """A workload as JSON: the workload keys (docs/workload.md, as in the YAML file), plus `config`, the content of a
    model's config.json, for a model that is neither a preset nor on the hub."""

    config: dict[str, Any] | None = Field(
        None,
        description="A model's config.json as a JSON object; it replaces the preset or hub id in 'model', "
        "which then only names it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _name_pasted_model(cls, data: Any) -> Any:
        """A pasted config names the model itself when `model` is not given."""
        if isinstance(data, dict) and isinstance(data.get("config"), dict) and not data.get("model"):
            name = data["config"].get("_name_or_path")
            data = {**data, "model": name if isinstance(name, str) and name.strip() else "custom model"}
        return data


class PlanIn(WorkloadIn):
    """A workload plus the plan's own options (those of `gpuplan plan`)."""

    gpus: list[str] | None = Field(None, max_length=200, description="Only these GPUs (catalog names or aliases).")
    top: int | None = Field(None, ge=1, le=10_000, description="Show only the best N options.")
    spot: bool = Field(False, description="Price with spot/preemptible offers instead of on-demand.")
    carbon_g_per_kwh: float | None = Field(None, ge=0, le=5_000, description="Grid carbon intensity for CO2.")
    allow_cross_node_tp: bool = Field(False, description="Let tensor parallelism cross nodes (cluster plans).")


class ModelIn(BaseModel):
    """A config.json to inspect: parameters, shapes, KV cache and FLOPs, as `gpuplan model --json`."""

    model_config = {"extra": "forbid"}
    config: dict[str, Any] = Field(description="A model's config.json as a JSON object.")
    name: str | None = Field(None, max_length=200, description="A display name (default: its _name_or_path).")
    seq_len: int | None = Field(None, ge=1, le=10_000_000, description="Context for FLOPs per token.")


class ErrorOut(BaseModel):
    detail: str = Field(description="What is wrong with the request, in one line, with a suggestion.")
