"""The explicit columns of measurement rows (planner/validation_columns.py): every bundled row has
them, they say what the prose says (the converter that filled them agrees row by row), a bundled
row is predicted from them alone, and a user's file without them still validates from its prose."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import RunCli
from gpuplan.errors import GpuplanError, InvalidSettingError
from gpuplan.interfaces import api
from gpuplan.planner import validation
from gpuplan.planner.validation import COLUMNS, bundled_rows, compared_as, run_rows
from gpuplan.planner.validation_columns import (
    EXPLICIT_COLUMNS,
    Reading,
    Row,
    columns_of,
    explicit_reading,
    format_pairs,
    gpu_of,
    is_fit_verdict,
    model_of,
    parse_pairs,
)
from gpuplan.planner.validation_prose import first_int, prose_reading, resolve_model
from gpuplan.planner.validation_prose_speed import model_from_prose
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import make_workload

ROWS = bundled_rows()


def _prose_columns(row: Row, catalog: Catalog) -> dict[str, str]:
    """What the converter reads from a row's prose, as column text (bench/fill_validation_columns.py)."""
    try:
        return columns_of(prose_reading(row, compared_as(row), catalog))
    except (GpuplanError, ValueError, KeyError) as exc:
        return columns_of(None, str(exc).rstrip("."))


def _prose_model(row: Row) -> ModelSpec:
    """The model as the converter resolves it (validation_prose.prose_reading)."""
    if compared_as(row) == "memory":
        return resolve_model(row["model"])
    return model_from_prose(row["model"], first_int(row["seq_len"]) or 2048)


def test_every_bundled_row_has_the_columns_and_they_make_a_workload(catalog: Catalog) -> None:
    assert len(ROWS) == 667
    skipped = 0
    for row in ROWS:
        assert set(EXPLICIT_COLUMNS) <= set(row.fields), row["id"]
        assert bool(row["workload"]) != bool(row["skip_reason"]), row["id"]  # one or the other
        if row["skip_reason"]:
            skipped += 1
            assert not (row["model_config"] or row["measure"]), row["id"]
            with pytest.raises(InvalidSettingError, match=f"^{re.escape(row['skip_reason'])}$"):
                explicit_reading(row)
            continue
        read = explicit_reading(row)
        assert read is not None
        work = make_workload(read.workload)  # the library accepts the workload as written
        assert work.model == read.workload["model"] and work.gpu == gpu_of(read, catalog).name
        assert model_of(read).name == read.workload["model"]
        measured = "measured_as" in read.measure
        assert measured == (compared_as(row) == "memory" and not is_fit_verdict(row)), row["id"]
    assert skipped == 8  # unpublished micro-batches (5), Stable Diffusion's UNet (3)


def test_the_columns_say_what_the_prose_says(catalog: Catalog) -> None:
    """The converter reads every bundled row's prose into exactly its columns (or its skip reason),
    and the columns rebuild the very model the prose names: the two cannot drift apart."""
    differ = [r["id"] for r in ROWS if _prose_columns(r, catalog) != {k: r[k] for k in EXPLICIT_COLUMNS}]
    assert differ == [], f"rerun bench/fill_validation_columns.py or fix the converter: {differ[:10]}"
    for row in ROWS:
        read = explicit_reading(row) if not row["skip_reason"] else None
        if read is not None:
            assert model_of(read) == _prose_model(row), row["id"]


def test_the_converter_ignores_the_columns_it_fills(catalog: Catalog) -> None:
    """A row's prose alone is read: the columns' words (channels_last=false, ...) are no prose."""
    row = next(r for r in ROWS if r["id"] == "LAMBDA-006")
    bare = Row({k: v for k, v in row.fields.items() if k not in EXPLICIT_COLUMNS})
    assert prose_reading(row, "train_throughput", catalog) == prose_reading(bare, "train_throughput", catalog)


def test_bundled_rows_are_predicted_from_their_columns_alone(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_prose(*_: Any) -> Reading:
        raise AssertionError("a bundled row was read from its prose")

    monkeypatch.setattr(validation, "prose_reading", no_prose)
    results, skipped = run_rows(ROWS, catalog)
    assert (len(results), len(skipped)) == (653, 14)


def _csv(rows: list[dict[str, str]], columns: tuple[str, ...]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: r.get(k, "") for k in columns} for r in rows)
    return buf.getvalue()


def test_a_user_file_without_the_columns_validates_from_its_prose(tmp_path: Path, run_cli: RunCli) -> None:
    """`gpuplan validate --file` on the columns of published.csv alone: the same predictions."""
    ids = ("TTM-003", "HFB-02", "PEFTB-02", "PEFT-008", "MEG-001", "TRT061-010", "LCPP-003", "TRT10-032", "FA-002")
    picked = [r.fields for r in ROWS if r["id"] in ids]
    path = tmp_path / "mine.csv"
    path.write_text(_csv(picked, COLUMNS), encoding="utf-8")
    assert "workload" not in path.read_text().splitlines()[0]
    code, out, err = run_cli("validate", "--file", str(path), "--json")
    assert code == 0, err
    mine = json.loads(out)
    bundled = api.validate().to_dict()
    want_rows = [r for r in bundled["rows"] if r["id"] in ids]
    assert mine["rows"] == want_rows and len(want_rows) == 8
    assert mine["skipped"] == [s for s in bundled["skipped"] if s["id"] in ids]  # FA-002, with its reason


def test_a_user_file_may_give_the_columns_instead_of_prose(tmp_path: Path, catalog: Catalog) -> None:
    """The explicit columns work in a user's file too, with no prose at all; a row without them
    beside it is read from its prose."""
    explicit = {
        "id": "X-1", "category": "memory", "model": "Llama 3.1 8B (any words)", "metric": "peak_memory", "value": "20",
        "unit": "GiB", "workload": "model=llama-3.1-8b; task=lora; precision=bf16; num_gpus=1; seq_len=2048; "
        "batch_size=2; lora_targets=q_proj+v_proj; gpu=H100 SXM5 80GB", "measure": "measured_as=reserved",
    }  # fmt: skip
    prose = {"id": "X-2", "category": "memory", "model": "llama-3.1-8b", "gpu": "H100 80GB", "precision": "bf16",
             "task": "LoRA finetune",
             "seq_len": "2048", "batch": "2", "extra_config": "lora_targets=q_proj+v_proj", "metric": "peak_memory",
             "value": "20", "unit": "GiB", "notes": "torch.cuda.max_memory_reserved"}  # fmt: skip
    path = tmp_path / "mine.csv"
    path.write_text(_csv([explicit, prose], (*COLUMNS, *EXPLICIT_COLUMNS)), encoding="utf-8")
    rec = api.validate(path).to_dict()
    assert not rec["skipped"]
    one, two = rec["rows"]
    assert one["workload"]["lora_targets"] == ["q_proj", "v_proj"] and one["measured_as"] == "reserved"
    assert one["predicted"] == two["predicted"] and one["workload"] == two["workload"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"workload": "model=llama-3.1-8b; task=lora"}, "workload: no gpu="),
        ({"workload": "model=llama-3.1-8b; gpu=L4; batch"}, "not key=value"),
        ({"workload": "model=a; gpu=L4; model=b"}, "model is given twice"),
        ({"workload": "model=llama-3.1-8b; gpu=L4", "measure": "measured_as=peak"}, "measured_as is one of"),
        ({"workload": "model=llama-3.1-8b; gpu=L4", "measure": "max_batch=yes"}, "max_batch is one of"),
        ({"workload": "model=llama-3.1-8b; gpu=L4", "measure": "speed=fast"}, "unknown key 'speed'"),
        ({"measure": "max_batch=true"}, "need the workload column"),
        ({"skip_reason": "no shape given", "workload": "model=x; gpu=L4"}, "^no shape given$"),
    ],
)
def test_bad_columns_are_one_line(fields: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidSettingError, match=message):
        explicit_reading(Row(fields))


def test_pairs_keep_types_and_order() -> None:
    values: dict[str, Any] = {"model": "gpt-j-6b", "batch_size": 2, "lora_dropout": 0.05, "compile": False,
                              "lora_targets": ["q_proj"], "tokens": 1e18, "gpu": "H100 SXM5 80GB"}  # fmt: skip
    text = format_pairs(values, "workload")
    assert text == ("model=gpt-j-6b; batch_size=2; lora_dropout=0.05; compile=false; lora_targets=q_proj; "
                    "tokens=1e+18; gpu=H100 SXM5 80GB")  # fmt: skip
    assert json.dumps(parse_pairs(text, "workload")) == json.dumps(values)
    assert parse_pairs("lora_targets=all-linear; zero=3", "w") == {"lora_targets": "all-linear", "zero": 3}
    for bad in ({"optimizer": "true"}, {"gpu": "a; b"}, {"notes": " padded"}, {"x": {"a": 1}}):
        with pytest.raises(InvalidSettingError):
            format_pairs(bad, "workload")
