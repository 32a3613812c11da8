"""Nothing the user owns is lost (issue 24): `lab submit` writes only into an empty folder (or
with --force), never through a symlink, and keeps a true submitted.json after every sbatch, so a
failure, a hang or a kill midway leaves a record that `lab status` reads. Malformed records and
plan files get one line. Slurm's commands are stand-ins on PATH that log what they were asked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import RunCli
from gpuplan.interfaces import lab as lab_api

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "examples" / "lab.yaml"

# A stand-in sbatch: it logs each call with the submitted.json it sees at that moment, then
# behaves as FAKE_SBATCH_PLAN says for the n-th call: "ok" (prints an id), "fail" (stderr, exit 1)
# or "hang" (sleeps far past the timeout).
FAKE_SBATCH = """#!/usr/bin/env python3
import json, os, sys, time
log = os.environ["FAKE_LOG"]
calls = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
n = len(calls)
seen = json.load(open("submitted.json")) if os.path.exists("submitted.json") else None
with open(log, "a") as fh:
    fh.write(json.dumps({"argv": sys.argv[1:], "seen": seen}) + "\\n")
plan = os.environ.get("FAKE_SBATCH_PLAN", "").split(",")
what = plan[n] if n < len(plan) and plan[n] else "ok"
if what == "fail":
    sys.stderr.write("sbatch: error: Batch job submission failed: Invalid account\\n")
    sys.exit(1)
if what == "hang":
    time.sleep(30)
print(f"{1000 + n};cluster")
"""
FAKE_SQUEUE = """#!/usr/bin/env python3
import sys
ids = sys.argv[sys.argv.index("-j") + 1].split(",")
for i in ids:
    print(f"{i}|RUNNING|1:00:00|None")
"""


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("squeue", FAKE_SQUEUE)):
        (bin_dir / name).write_text(text, encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "sbatch-calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(log))
    return log


def _calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def _one_line(err: str) -> None:
    assert err.startswith("gpuplan: error: ") and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_non_empty_folder_is_refused_unless_forced(tmp_path: Path, run_cli: RunCli) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    code, _, err = run_cli("lab", "submit", str(LAB), "--dry-run", "-o", str(out))
    assert code == 2
    _one_line(err)
    assert "not empty" in err and "--force" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # nothing written
    code, _, err = run_cli("lab", "submit", str(LAB), "--dry-run", "-o", str(out), "--force")
    assert code == 0, err
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine" and (out / "lora-8b.sbatch").is_file()


def test_a_planted_symlink_is_never_written_through(tmp_path: Path, run_cli: RunCli) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / "lora-8b.sbatch").symlink_to(victim)
    for force in ((), ("--force",)):
        code, _, err = run_cli("lab", "submit", str(LAB), "--dry-run", "-o", str(out), *force)
        assert victim.read_text(encoding="utf-8") == "precious", force
    # with --force the link itself is replaced by a real file (rename), the victim untouched
    assert code == 0, err
    assert not (out / "lora-8b.sbatch").is_symlink()
    assert (out / "lora-8b.sbatch").read_text(encoding="utf-8").startswith("#!/bin/bash")


def test_a_symlinked_output_folder_is_refused(tmp_path: Path, run_cli: RunCli) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir()
    (tmp_path / "out").symlink_to(real)
    code, _, err = run_cli("lab", "submit", str(LAB), "--dry-run", "-o", str(tmp_path / "out"))
    assert code == 2 and "symlink" in err
    assert not any(real.iterdir())


def test_the_record_is_true_after_each_sbatch_and_after_a_failure(
    tmp_path: Path, run_cli: RunCli, fake_slurm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SBATCH_PLAN", "ok,fail,ok")
    out = tmp_path / "out"
    code, _, err = run_cli("lab", "submit", str(LAB), "-o", str(out), "--json")
    assert code == 0, err
    calls = _calls(fake_slurm)
    # before the first sbatch the record lists every job, none submitted; before the n-th, exactly
    # the n-1 earlier answers are recorded (ids and the failure)
    first = calls[0]["seen"]
    assert isinstance(first, dict) and first["complete"] is False
    assert [j["job_id"] for j in first["jobs"]] == [None] * len(first["jobs"])
    third = calls[2]["seen"]
    assert isinstance(third, dict)
    assert third["jobs"][0]["job_id"] == "1000" and third["jobs"][1]["job_id"] is None
    assert "Invalid account" in third["jobs"][1]["error"][0]
    final = json.loads((out / "submitted.json").read_text(encoding="utf-8"))
    assert final["complete"] is True and len(calls) == len(final["jobs"])
    assert final["jobs"][2]["job_id"] == "1002"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind


def test_a_hung_sbatch_is_one_line_and_leaves_a_true_partial_record(
    tmp_path: Path, run_cli: RunCli, fake_slurm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SBATCH_PLAN", "ok,ok,hang")
    monkeypatch.setattr(lab_api, "SLURM_CALL_TIMEOUT_S", 1.0)
    out = tmp_path / "out"
    code, _, err = run_cli("lab", "submit", str(LAB), "-o", str(out))
    assert code == 2
    _one_line(err)
    assert "no answer in 1 s" in err and "submitted.json" in err
    record = json.loads((out / "submitted.json").read_text(encoding="utf-8"))
    assert record["complete"] is False
    ids = [j["job_id"] for j in record["jobs"]]
    assert ids[:2] == ["1000", "1001"] and set(ids[2:]) == {None}
    # lab status reads the partial record: the two submitted jobs from squeue, the rest never sent
    code, text, err = run_cli("lab", "status", str(out), "--json")
    assert code == 0, err
    rows = json.loads(text)
    assert rows["complete"] is False
    assert [r["state"] for r in rows["jobs"][:3]] == ["RUNNING", "RUNNING", "NOT SUBMITTED"]


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", '{"jobs": 3}', '{"jobs": [1]}', '{"jobs": [{"name": "a"}]}',
     '{"jobs": [{"name": "a", "gpu": "x", "gres": "g", "estimate_s": "soon", "job_id": null}]}',
     '{"jobs": [{"name": "a", "gpu": "x", "gres": "g", "estimate_s": NaN, "job_id": null}]}',
     '{"jobs": ' + "[" * 500 + "]" * 500 + "}"],
)  # fmt: skip
def test_a_malformed_record_is_one_line(tmp_path: Path, run_cli: RunCli, content: str) -> None:
    (tmp_path / "submitted.json").write_text(content, encoding="utf-8")
    code, _, err = run_cli("lab", "status", str(tmp_path))
    assert code == 2
    _one_line(err)


def test_a_record_that_is_a_fifo_or_huge_is_one_line(tmp_path: Path, run_cli: RunCli) -> None:
    os.mkfifo(tmp_path / "submitted.json")
    code, _, err = run_cli("lab", "status", str(tmp_path))
    assert code == 2 and "not a regular file" in err
    big = tmp_path / "big"
    big.mkdir()
    with open(big / "submitted.json", "wb") as fh:
        fh.truncate(100 * 2**20)
    code, _, err = run_cli("lab", "status", str(big))
    assert code == 2 and "over the limit" in err


@pytest.mark.parametrize(
    "plan",
    [{"workload": {"model": "llama-3.2-1b"}, "options": [1]},
     {"workload": {"model": "llama-3.2-1b"}, "options": [{"gpu": "H100"}]},
     {"workload": {"model": "llama-3.2-1b"}, "mode": "cluster", "layouts": [{"keys": {}}], "cluster": 3},
     {"workload": {"model": "llama-3.2-1b"}, "mode": "cluster", "layouts": ["x"]},
     {"workload": {"model": "llama-3.2-1b"}},
     {"workload": 5}],
)  # fmt: skip
def test_a_malformed_plan_json_is_one_line(tmp_path: Path, run_cli: RunCli, plan: object) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    code, out, err = run_cli("launch", str(path), "--format", "torchrun")
    assert code == 2 and out == ""
    _one_line(err)


def test_a_real_plan_json_still_launches(tmp_path: Path, run_cli: RunCli) -> None:
    code, text, err = run_cli("plan", str(ROOT / "examples" / "pretrain-1b.yaml"), "--top", "3", "--json")
    assert code == 0, err
    path = tmp_path / "plan.json"
    path.write_text(text, encoding="utf-8")
    code, out, err = run_cli("launch", str(path), "--format", "torchrun")
    assert code == 0, err
    assert "torchrun" in out
