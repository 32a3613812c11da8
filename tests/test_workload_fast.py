"""The workload reader without pydantic (specs/workload.py): where it takes an input itself it must
give what the pydantic schema (specs/workload_schema.py) gives, values and set keys alike; anything
else it hands to the schema, so every error is the schema's. Its table is derived from the schema."""

from __future__ import annotations

import ast
import inspect
import pickle
import subprocess
import sys
import textwrap
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.errors import InvalidSettingError
from gpuplan.specs import workload_table
from gpuplan.specs.workload import FIELD_NAMES, Workload, _fast, make_workload
from gpuplan.specs.workload_derived import WorkloadDerived
from gpuplan.specs.workload_schema import WorkloadSchema


def _schema(data: dict[str, Any]) -> tuple[dict[str, Any], set[str]] | str:
    try:
        v = WorkloadSchema.model_validate(data)
    except Exception as exc:  # the schema's refusal, whatever its class
        return type(exc).__name__
    return v.model_dump(), set(v.model_fields_set)


def test_the_table_is_the_schemas() -> None:
    assert workload_table.main([]) == 0, "run python -m gpuplan.specs.workload_table --write"
    assert tuple(WorkloadSchema.model_fields) == FIELD_NAMES
    # the configuration the fast reader mirrors, and nothing else that would change what it accepts
    assert {k: v for k, v in WorkloadSchema.model_config.items() if k != "defer_build"} == workload_table.CONFIG


def test_the_type_declarations_are_the_schemas() -> None:
    """WorkloadDerived declares every key for type checkers (a TYPE_CHECKING block, so read from its
    source); the names and types are the schema's."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(WorkloadDerived)))
    block = next(n for n in tree.body[0].body if isinstance(n, ast.If))  # type: ignore[attr-defined]
    declared = {
        n.target.id: eval(ast.unparse(n.annotation), {"Literal": typing.Literal})
        for n in block.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    assert list(declared) == list(WorkloadSchema.model_fields)
    for name, field in WorkloadSchema.model_fields.items():
        assert declared[name] == field.annotation, name


# every example's keys and the common CLI shapes: read without pydantic, equal to the schema's reading
CASES: list[dict[str, Any]] = [
    {"model": "llama-3.1-8b", "task": "lora", "gpu": "RTX 4090", "batch_size": 4, "lora_targets": "all-linear"},
    {"model": "llama-3.1-8b", "task": "qlora", "gpu": 4090, "lora_targets": ["q_proj", "v_proj"], "optimizer": "paged_adamw_8bit"},
    {"model": "llama-3.2-1b", "task": "pretrain", "tokens": "2.0e10", "deadline": "7d", "budget": 5000},
    {"model": "llama-3.1-70b", "task": "inference", "engine": "sglang", "request_rate": 10, "num_prompts": 50, "kv_dtype": "fp8"},
    {"model": "llama-3.1-8b", "task": "finetune", "framework": "torchtitan", "num_gpus": 8},
    {"model": "llama-3.1-8b", "task": "finetune", "framework": "nemo", "num_gpus": 8, "tp": 2},
    {"model": "llama-3.1-8b", "task": "lora", "attention_impl": "sdpa", "framework": "hf-trainer"},
    {"task": "streaming", "resolution": "1080p", "streams": 4, "codec": "av1"},
    {"model": "llama-3.1-8b", "cluster": "2x8:H100", "task": "pretrain"},
    {"model": "llama-3.1-8b", "have": "4x RTX 3090", "ecc": False, "gpu_memory_utilization": 0.85},
]  # fmt: skip


@pytest.mark.parametrize("data", CASES)
def test_the_fast_reading_is_the_schemas(data: dict[str, Any]) -> None:
    fast = _fast(dict(data))
    assert fast is not None, data
    assert (fast.model_dump(), fast.model_fields_set) == _schema(data)


# what the fast reader leaves to the schema: a type the schema converts or refuses, a bound, a rule
LEFT: list[dict[str, Any]] = [
    {"model": "x", "batch_size": "8"},  # text for an int: the schema converts
    {"model": "x", "batch_size": 0},  # below its bound
    {"model": "x", "task": " lora "},  # padded name the schema refuses
    {"model": "x", "nvlink": "yes"},  # text for a bool
    {"model": "x", "bogus": 1},  # unknown key
    {"model": "x", "num_gpus": 3, "tp": 2},  # a rule across keys
    {"model": "x", "tokens": "1e400"},  # not finite
    {"model": "x", "precision": "fp4"},
]


@pytest.mark.parametrize("data", LEFT)
def test_what_it_cannot_vouch_for_goes_to_the_schema(data: dict[str, Any]) -> None:
    assert _fast(dict(data)) is None
    schema = _schema(data)
    if isinstance(schema, str):  # refused: make_workload words the schema's error in one line
        with pytest.raises(InvalidSettingError):
            make_workload(data)
    else:
        w = make_workload(data)
        assert (w.model_dump(), w.model_fields_set) == schema


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5000), st.floats(-1, 1e6, allow_nan=False),
    st.sampled_from(["", "lora", "qlora", "fp8", "bf16", "flash", "sdpa", " x ", "all-linear", "q,v", "H100", "2.5e3", "7d"]),
    st.lists(st.sampled_from(["q_proj", "v_proj", " k "]), max_size=3),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELD_NAMES), _VALUES, max_size=6))
def test_any_input_reads_as_the_schema_reads_it(data: dict[str, Any]) -> None:
    data = {"model": "llama-3.1-8b", **data}
    fast = _fast(dict(data))
    if fast is not None:
        assert (fast.model_dump(), fast.model_fields_set) == _schema(data)


def test_it_behaves_as_the_model_did() -> None:
    w = make_workload({"model": "llama-3.1-8b", "task": "lora", "batch_size": 2, "lora_targets": ["q_proj"]})
    with pytest.raises(AttributeError):
        w.batch_size = 3
    c = w.model_copy(update={"gpu": "H100"})
    assert c.gpu == "H100" and "gpu" in c.model_fields_set and w.gpu is None
    assert w.model_dump(exclude_unset=True) == {
        "model": "llama-3.1-8b",
        "task": "lora",
        "batch_size": 2,
        "lora_targets": ["q_proj"],
    }
    assert w.model_dump()["lora_targets"] is not w.lora_targets  # a copy, as pydantic's dump
    assert pickle.loads(pickle.dumps(w)) == w and pickle.loads(pickle.dumps(w)).model_fields_set == w.model_fields_set
    assert w.with_(batch_size=4).batch_size == 4 and Workload(**w.model_dump()) == w
    assert w.model_dump_json() == WorkloadSchema.model_validate(w.model_dump()).model_dump_json()
    assert "request_rate" in Workload.model_fields and Workload.model_json_schema()["title"] == "WorkloadSchema"


def test_an_estimate_reads_its_workload_without_pydantic() -> None:
    code = (
        "import sys; from gpuplan.specs.workload import read_workload_file; "
        "read_workload_file('examples/pretrain-1b.yaml'); read_workload_file('examples/qlora-70b-2x3090.yaml'); "
        "print(any(m.split('.')[0] == 'pydantic' for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
