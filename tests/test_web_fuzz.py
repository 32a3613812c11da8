"""Schemathesis against the web API's own OpenAPI schema: requests generated from the schema
(and from its negations: wrong types, missing keys, malformed bodies) never get a 5xx, and every
status code answered is one the schema documents.

Random strings rarely name a model or GPU, so half of the generated workloads get a bundled preset
and a catalog GPU swapped in (chosen from the generated body itself, so a run is reproducible):
that sends them past validation into the estimators, where the arithmetic can fail. Examples per
operation: GPUPLAN_FUZZ_EXAMPLES (default 60); CI runs the default, derandomized, and
GPUPLAN_FUZZ_RANDOM=1 draws new examples each run.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import content_type_conformance, status_code_conformance
from schemathesis.specs.openapi.checks import response_schema_conformance

from gpuplan.interfaces import api
from gpuplan.interfaces.web import create_app

EXAMPLES = int(os.environ.get("GPUPLAN_FUZZ_EXAMPLES", "60"))
RANDOM = os.environ.get("GPUPLAN_FUZZ_RANDOM") == "1"  # fresh examples each run (hunting), not CI's fixed set
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app())
PRESETS = sorted(m["name"] for m in api.list_models())
GPUS = sorted(g.name for g in api.catalog())


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a generated 'org/name' must not reach for the hub


def steer(body: Any) -> None:
    """Swap a real preset and GPU into some generated workloads, picked by the body's own hash."""
    if not isinstance(body, dict):
        return
    h = int.from_bytes(hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).digest()[:8], "little")
    if h % 4:  # most cases: no pasted config, so the preset below is the model
        body.pop("config", None)
    if h % 3:
        body["model"] = PRESETS[h % len(PRESETS)]
    if h % 2 == 0 and "gpu" in body:
        body["gpu"] = GPUS[(h >> 8) % len(GPUS)]


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case: schemathesis.Case[Any]) -> None:
    steer(case.body)
    response = case.call()
    assert response.status_code < 500, (response.status_code, response.text[:500], case.body)
    case.validate_response(
        response, checks=[status_code_conformance, content_type_conformance, response_schema_conformance]
    )
    if response.status_code >= 400 and response.status_code != 405:
        detail = response.json()["detail"]
        assert isinstance(detail, str) and "Traceback" not in detail and "\n" not in detail
