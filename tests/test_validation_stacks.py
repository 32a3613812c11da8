"""The everyday-stacks measurements (data/validation/stacks.csv, planner/validation_stacks.py): the
file parses, every row cites its source at a commit or a dated URL and spells out its workload, a
third of each source is held out by a rule anyone can recompute, held-out rows never reach the error
bars, every row gpuplan cannot express says why, and `validate` reports medians per stack and per
source with each source's skip count while the per-category summary stays the vendor files'."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import pytest

from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces import api
from gpuplan.planner.validation import COLUMNS, bundled_rows, run_rows, stack_rows, summary, summary_by_kind
from gpuplan.planner.validation_columns import EXPLICIT_COLUMNS, explicit_reading, format_pairs, parse_pairs
from gpuplan.planner.validation_stacks import SPLITS, split_of
from gpuplan.results import Validation
from gpuplan.specs.gpu import Catalog

ROWS = stack_rows()
_COMMIT = re.compile(r"[\w.-]+/[\w.-]+:\S+@[0-9a-f]{40}")  # owner/repo:path@commit
_DATED_URL = re.compile(r"https://\S+ .*\b20\d\d-\d\d-\d\d\b")  # a URL and the date of the text cited


@pytest.fixture(scope="module")
def validation() -> Validation:
    return api.validate()


def test_the_file_parses_with_every_column() -> None:
    assert len(ROWS) >= 150
    for row in ROWS:
        assert set((*COLUMNS, "stack", "split", *EXPLICIT_COLUMNS)) <= set(row.fields), row["id"]
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids))
    assert not set(ids) & {r["id"] for r in bundled_rows()}  # no id shared with the vendor files


def test_sources_are_new_and_cited_at_a_commit_or_a_dated_url() -> None:
    sources = Counter(r["source"] for r in ROWS)
    assert len(sources) >= 12
    assert not set(sources) & {r["source"] for r in bundled_rows()}  # none already used
    vendor_refs = " ".join(r["source_ref"] for r in bundled_rows())
    for row in ROWS:
        ref = row["source_ref"]
        cited = _COMMIT.search(ref) or _DATED_URL.search(ref)
        assert cited, (row["id"], ref)
        document = cited.group(0).split("@")[0].split()[0]  # owner/repo:path, or the URL
        assert document not in vendor_refs, (row["id"], document)  # no document the vendor files cite


def test_every_row_spells_out_its_workload_and_figure() -> None:
    for row in ROWS:
        for col in ("model", "gpu", "num_gpus", "precision", "task", "metric", "unit", "stack"):
            assert row[col], (row["id"], col)
        assert int(row["num_gpus"]) >= 1
        assert float(row["value"]) >= 0
        assert row["split"] in SPLITS
        assert row["workload"] or row["skip_reason"], row["id"]
        if row["workload"]:  # the columns parse and read back as written, whatever the library makes of them
            for col in ("workload", "measure"):
                assert format_pairs(parse_pairs(row[col], col), col) == row[col], (row["id"], col)
            try:
                read = explicit_reading(row)
            except InvalidSettingError as exc:  # a row's own skip reason raises first
                assert str(exc) == row["skip_reason"], row["id"]
            else:
                assert read is not None and read.workload["model"] and read.workload["gpu"], row["id"]


def test_a_third_of_each_source_is_held_out_by_the_rule() -> None:
    assert {r["id"]: r["split"] for r in ROWS} == split_of(ROWS)  # no hand-picked split
    for source in {r["source"] for r in ROWS}:
        mine = [r for r in ROWS if r["source"] == source]
        held = sum(r["split"] == "heldout" for r in mine)
        assert abs(held - len(mine) / 3) <= 1, source


def test_every_row_is_predicted_or_skipped_with_a_reason(catalog: Catalog) -> None:
    results, skipped = run_rows(ROWS, catalog)
    assert len(results) + len(skipped) == len(ROWS)
    assert all(s.reason.strip() for s in skipped)
    reasons = {s.id: s.reason for s in skipped}
    for row in ROWS:
        if row["skip_reason"]:
            assert reasons[row["id"]] == row["skip_reason"].rstrip("."), row["id"]
    # a key the reader does not know yet is skipped with the reader's own words, not dropped
    sdpa = next(r for r in ROWS if "attention_impl=sdpa" in r["workload"] and not r["skip_reason"])
    assert sdpa["id"] in reasons or sdpa["id"] in {r.id for r in results}


def test_held_out_rows_never_reach_the_error_bars(validation: Validation) -> None:
    held = [r for r in validation.rows if r.split == "heldout"]
    assert held, "some held-out rows are predicted"
    # by default the stacks stay out of the error bars (the committed residuals are the vendor files')
    vendor = [r for r in validation.rows if not r.stack]
    assert api.residual_file(validation) == api.residual_file(dataclasses.replace(validation, rows=vendor))
    # asked to count them, only the fit split counts: absurd held-out errors change nothing
    table = api.residual_file(validation, stacks=True)
    wild = [dataclasses.replace(r, error=99.0) if r.split == "heldout" else r for r in validation.rows]
    assert api.residual_file(dataclasses.replace(validation, rows=wild), stacks=True) == table
    counted = sum(len(v) for v in table["kinds"].values())
    want = sum(1 for r in validation.rows if r.unit != "fits" and r.kind and r.split != "heldout")
    assert counted == want > len([r for r in vendor if r.unit != "fits" and r.kind])


def test_the_report_has_stacks_and_sources_and_the_summary_stays_the_vendor_files(
    validation: Validation, catalog: Catalog
) -> None:
    vendor, _ = run_rows(bundled_rows(), catalog)
    assert validation.summary == summary(vendor)  # the stacks leave the per-category figures alone
    assert validation.by_kind == summary_by_kind(vendor)  # and the per-kind ones the error bars show
    assert validation.by_stack and validation.by_source
    skipped = Counter(s.source for s in validation.skipped)
    predicted = Counter(r.source for r in validation.rows)
    for source in {r["source"] for r in ROWS}:
        cell = validation.by_source[source]
        assert (cell["n"], cell["skipped"]) == (predicted[source], skipped[source]), source
    stacks = {r["stack"] for r in ROWS}
    for key, cell in validation.by_stack.items():
        stack, *rest = key.split(" / ")
        assert stack in stacks, key
        assert rest[-1] in ("fit", "heldout", "skipped"), key
        if rest[-1] != "skipped":
            rows = [r for r in validation.rows if r.stack == stack and r.split == rest[-1]]
            assert cell["n"] <= len(rows) and cell["median_abs_error"] >= 0


def test_validate_prints_the_stack_and_source_tables(run_cli: RunCli) -> None:
    code, out, err = run_cli("validate")
    assert code == 0, err
    assert "By stack (held-out rows are never fitted)" in out and "By source" in out
    line = next(x for x in out.splitlines() if "TGI v3 overview benchmarks" in x)
    assert re.search(r"\b0\s+│\s+24\b", line), line  # 0 predicted, 24 skipped (no tgi engine yet)


# AnswerDotAI/fsdp_qlora:train.py@7242daa5c6c5ba370c4236b8044d90f7416c046f main(): lora_dropout 0.1 and
# lora_target_modules "all" = ["k_proj", "q_proj", "v_proj", "up_proj", "down_proj", "gate_proj"] (no o_proj)
_FSDP_QLORA_TARGETS = ["q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "down_proj"]


def test_fsdp_qlora_rows_run_train_py_lora_defaults() -> None:
    rows = [r for r in ROWS if r["stack"] == "fsdp-qlora" and "lora" in r["workload"]]
    assert len(rows) == 57
    for r in rows:
        wl = parse_pairs(r["workload"], "workload")
        assert (wl["lora_targets"], wl["lora_dropout"], wl["lora_rank"]) == (_FSDP_QLORA_TARGETS, 0.1, 64), r["id"]


def test_fsdp_qlora_memory_on_rows_it_never_saw(validation: Validation) -> None:
    # issue 27's target for a stack's held-out memory rows: median |error| <= 8% (measured 5.1% with
    # train.py's LoRA defaults and the root FSDP unit gathered for the whole step; 3.4% without that
    # unit, when the fit rows were 12% low; 9.4% when the rows adapted o_proj too and had no dropout)
    assert validation.by_stack is not None
    cell = validation.by_stack["fsdp-qlora / memory / heldout"]
    assert cell["n"] == 9  # 8 Llama/Mistral rows and one Yi-34B row (its preset bundled since)
    assert cell["median_abs_error"] == pytest.approx(0.051, abs=0.01)
    assert abs(cell["median_error"]) < 0.04  # no side: the -3.4% bias is -2.9%
    fit = validation.by_stack["fsdp-qlora / memory / fit"]
    assert fit["median_error"] == pytest.approx(-0.072, abs=0.01)  # was -12.0% without the root unit
    # benchmarks_03_2024.md@23fafdfb4af403d0808038adafbfd74de265d33a (NB under 'LoRA context length'): LoRA
    # Llama-2 7B, batch 1, 2x RTX 3090: peak reserved 10.22 GiB at 2048 tokens (AQ-007)
    row = next(r for r in validation.rows if r.id == "AQ-007")
    assert row.published == pytest.approx(10.22 * 2**30)
    # -4.9% before the root unit's 0.24 GiB (embed_tokens + lm_head of Llama-2 7B in bf16, half of it
    # already counted as this GPU's shard); -6.1% without the dropout copies
    assert row.error == pytest.approx(-0.024, abs=0.01)


def test_hugging_face_stack_rows_derive_their_figures_and_say_why_they_skip(validation: Validation) -> None:
    by_id = {r["id"]: r for r in ROWS}
    # transformers docs perf_train_gpu_many.md@9426c8c3: 200 steps x 2 GPUs x 4 x 1024-token blocks
    # of gpt2 in train_runtime 101.9003 s (DDP over NVLink)
    assert float(by_id["HFDDP-001"]["value"]) == pytest.approx(200 * 2 * 4 * 1024 / 101.9003, abs=0.1)
    # peft docs/source/accelerate/deepspeed.md@781cac46: 64 GB (80%) per H100 and 36.6 GB per 40 GB card
    rows = {r.id: r for r in validation.rows}
    assert rows["PEFTDS-001"].published == pytest.approx(64 * 2**30)
    assert rows["PEFTDS-002"].published == pytest.approx(36.6 * 2**30)
    # measured with gpuplan at this commit: both ZeRO-3 rows under-predicted by about 6 GiB
    assert rows["PEFTDS-001"].error == pytest.approx(-0.10, abs=0.03)
    assert rows["PEFTDS-002"].error == pytest.approx(-0.182, abs=0.03)  # -16.7% with fp32 embeddings
    # Phil Schmid's Llama 3 70B QLoRA, FSDP with parameter offload on 4x A10G: 22 GB per GPU; +13.5%
    # while its root unit (embeddings, head) was counted in fp32: TRL skips PEFT's kbit cast for
    # sharded QLoRA, so they stay bf16
    assert rows["PSFSDP-001"].published == pytest.approx(22e9)
    assert rows["PSFSDP-001"].error == pytest.approx(-0.066, abs=0.03)
    # GPT-2 XL under accelerate DDP on a 24 GB TITAN RTX: fp32 states alone (16 B x 1.56B) do not fit
    assert all(rows[f"HFFSDP-00{i}"].predicted == 0.0 for i in (1, 2, 3))
    skipped = {s.id: s.reason for s in validation.skipped}
    assert all(i in skipped for i in by_id if i.startswith(("UNSB-", "LFQ-")))


def test_rows_of_the_bundled_qwen_v1_and_deepseek_coder_presets_are_predicted(validation: Validation) -> None:
    """Qwen-7B (v1, model_type qwen) and DeepSeek-Coder 33B were skipped as unbundled; with their
    presets every row runs, split unchanged, nothing refitted. Errors as measured at this commit."""
    rows = {r.id: r for r in validation.rows}
    skipped = {s.id for s in validation.skipped}
    ids = [r["id"] for r in ROWS if r["id"].startswith("QWEN1-")] + [f"AWQ-0{n}" for n in range(67, 73)]
    assert len(ids) == 18 and not skipped & set(ids)
    # Qwen README (finetune.py LoRA, A100 80GB): memory 5-12% low; at 256 tokens the step is set by
    # eager PyTorch's launch floor with the LoRA adapters' kernels counted, joined with the GPU time
    # at the roofline's corner (1.2 s published, 1.29 s predicted; 1.14 s as the plain max, 0.62 s
    # before the adapters' kernels: tests/test_lora_launch.py); at 512 tokens floor and GPU time are
    # about equal and the step 7% slow (24% fast as their max), 5% fast at 8192 tokens
    assert rows["QWEN1-001"].error == pytest.approx(-0.091, abs=0.02)
    assert rows["QWEN1-002"].error == pytest.approx(0.078, abs=0.02)
    assert rows["QWEN1-004"].error == pytest.approx(0.067, abs=0.02)
    assert rows["QWEN1-012"].error == pytest.approx(-0.052, abs=0.02)
    # AutoAWQ DeepSeek 33B on the 4090: decode 9% and 4% slow, memory 11% and 1% low; the 64-token
    # prefill 50% slow, where the table's 1160 tok/s (55 ms) beats its own CodeLlama 34B (682 tok/s)
    # and Llama 2 13B (820 tok/s) rows at the same 64 tokens
    assert rows["AWQ-067"].error == pytest.approx(-0.089, abs=0.02)
    assert rows["AWQ-068"].error == pytest.approx(-0.503, abs=0.03)
    assert rows["AWQ-071"].error == pytest.approx(-0.071, abs=0.02)
    assert rows["AWQ-072"].error == pytest.approx(-0.006, abs=0.02)


def test_the_vllm_harness_sglang_rows_name_their_data_parallel_attention(validation: Validation) -> None:
    """simon-mo/vLLM-Benchmark:Justfile@d538cdc (2025-04-19, the day before the logged run) starts
    SGLang for DeepSeek-R1 with --enable-dp-attention --dp-size 8 and no expert parallelism: a layout
    gpuplan does not express, so its 12 rows are skipped saying so, while the same harness's vLLM rows
    (TP 8) are predicted."""
    vbs = [r for r in ROWS if r["id"].startswith("VBS-")]
    sgl = [r for r in vbs if r["stack"] == "sglang"]
    assert len(vbs) == 24 and len(sgl) == 12
    skipped = {s.id: s.reason for s in validation.skipped}
    assert all("--enable-dp-attention --dp-size 8" in skipped[r["id"]] for r in sgl)
    predicted = {r.id for r in validation.rows}
    assert all(r["id"] in predicted for r in vbs if r["stack"] == "vllm")
