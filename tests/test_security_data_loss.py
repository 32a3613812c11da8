"""Nothing the user owns is lost (issue 24): `lab submit` writes only into an empty folder (or
with --force), never through a symlink, and keeps a true submitted.json after every sbatch, so a
failure, a hang or a kill midway leaves a record that `lab status` reads. Malformed records and
plan files get one line. Slurm's commands are stand-ins on PATH that log what they were asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import RunCli
from gpuplan.interfaces import lab as lab_api

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "examples" / "lab.yaml"
GPUPLAN = Path(sys.executable).parent / "gpuplan"

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
if what == "kill":  # gpuplan itself is killed while this sbatch runs (SIGKILL: no cleanup at all)
    os.kill(os.getppid(), 9)
    time.sleep(5)
if what == "noid":
    print("Submitted, but where?")
    sys.exit(0)
print(f"{1000 + n};cluster")
"""
# squeue knows the ids below 5000 (running); sacct answers for the rest (finished). Both log argv.
FAKE_SQUEUE = """#!/usr/bin/env python3
import os, sys, time
with open(os.environ["FAKE_LOG"] + ".squeue", "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_SQUEUE_HANG"):
    time.sleep(30)
ids = sys.argv[sys.argv.index("-j") + 1].split(",")
for i in ids:
    if int(i.split("_")[0]) < 5000:
        print(f"{i}|RUNNING|1:00:00|" + os.environ.get("FAKE_REASON", "None"))
"""
FAKE_SACCT = """#!/usr/bin/env python3
import os, sys
with open(os.environ["FAKE_LOG"] + ".sacct", "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
for i in sys.argv[sys.argv.index("-j") + 1].split(","):
    print(f"{i}|COMPLETED|2:00:00")
"""


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("squeue", FAKE_SQUEUE), ("sacct", FAKE_SACCT)):
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
    code, text, err = run_cli("lab", "submit", str(LAB), "-o", str(out), "--json")
    # the other jobs are still sent; the exit code and one stderr line say that one was refused
    assert code == 1 and json.loads(text)["complete"] is True
    assert err == f"gpuplan: sbatch refused 1 of 11 jobs (qlora-8b); {out / 'submitted.json'} records each outcome\n"
    calls = _calls(fake_slurm)
    # while the n-th sbatch runs, the record holds the n-1 earlier answers (ids, the failure), the
    # n-th "in flight" and the rest "not reached": exactly what was submitted at that moment
    for n, call in enumerate(calls):
        seen = call["seen"]
        assert isinstance(seen, dict) and seen["complete"] is False
        outcomes = [j["sbatch"] for j in seen["jobs"]]
        ids = [j["job_id"] for j in seen["jobs"]]
        assert outcomes[n:] == ["in flight"] + ["not reached"] * (len(outcomes) - n - 1), n
        assert ids[n:] == [None] * (len(ids) - n)
        assert outcomes[:n] == (["submitted", "failed"] + ["submitted"] * 9)[:n]
        assert ids[:n] == (["1000", None] + [str(1000 + k) for k in range(2, 11)])[:n]
        assert call["argv"] == ["--parsable", Path(seen["jobs"][n]["script"]).name]
    final = json.loads((out / "submitted.json").read_text(encoding="utf-8"))
    assert final["complete"] is True and len(calls) == len(final["jobs"]) == 11
    assert final["jobs"][1]["error"] == ["sbatch: error: Batch job submission failed: Invalid account"]
    assert final["jobs"][2]["job_id"] == "1002"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind
    code, text, err = run_cli("lab", "status", str(out), "--json")
    assert code == 0, err
    row = json.loads(text)["jobs"][1]
    assert row["state"] == "NOT SUBMITTED" and "Invalid account" in row["reason"]


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
    assert [j["sbatch"] for j in record["jobs"][:4]] == ["submitted", "submitted", "no answer", "not reached"]
    # lab status reads the partial record: the two submitted jobs from squeue; the hung one may or
    # may not be queued (said so, not guessed); the rest never sent
    code, text, err = run_cli("lab", "status", str(out), "--json")
    assert code == 0, err
    rows = json.loads(text)
    assert rows["complete"] is False
    assert [r["state"] for r in rows["jobs"][:4]] == ["RUNNING", "RUNNING", "UNKNOWN", "NOT SUBMITTED"]
    code, text, err = run_cli("lab", "status", str(out))
    assert code == 0 and "stopped midway" in text and err == ""


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


def test_a_kill_during_sbatch_leaves_a_true_record(tmp_path: Path, fake_slurm: Path) -> None:
    # gpuplan (a real process here) is SIGKILLed by the 2nd sbatch: nothing of it runs after that
    out = tmp_path / "out"
    env = {**os.environ, "FAKE_SBATCH_PLAN": "ok,kill", "NO_COLOR": "1"}
    gpuplan = [sys.executable, "-m", "gpuplan"] if not GPUPLAN.exists() else [str(GPUPLAN)]
    done = subprocess.run([*gpuplan, "lab", "submit", str(LAB), "-o", str(out)], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == -9, done.stderr
    record = json.loads((out / "submitted.json").read_text(encoding="utf-8"))
    assert record["complete"] is False
    outcomes = [j["sbatch"] for j in record["jobs"]]
    assert outcomes == ["submitted", "in flight"] + ["not reached"] * 9
    assert [j["job_id"] for j in record["jobs"][:2]] == ["1000", None]
    done = subprocess.run([*gpuplan, "lab", "status", str(out), "--json"], env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["jobs"]
    assert [r["state"] for r in rows[:3]] == ["RUNNING", "UNKNOWN", "NOT SUBMITTED"]
    assert "sbatch was running when gpuplan stopped" in rows[1]["reason"]


def test_an_sbatch_that_cannot_run_is_one_line(tmp_path: Path, run_cli: RunCli, fake_slurm: Path) -> None:
    sbatch = fake_slurm.parent / "bin" / "sbatch"
    sbatch.write_text("#!/nonexistent/interpreter\n", encoding="utf-8")
    out = tmp_path / "out"
    code, _, err = run_cli("lab", "submit", str(LAB), "-o", str(out))
    assert code == 2
    _one_line(err)
    assert "Cannot run" in err and "lora-8b" in err
    record = json.loads((out / "submitted.json").read_text(encoding="utf-8"))
    assert record["complete"] is False and record["jobs"][0]["sbatch"] == "failed"
    assert [j["sbatch"] for j in record["jobs"][1:]] == ["not reached"] * 10


def test_an_sbatch_answer_without_a_job_id_is_recorded_as_such(
    tmp_path: Path, run_cli: RunCli, fake_slurm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SBATCH_PLAN", "noid")
    out = tmp_path / "out"
    code, _, err = run_cli("lab", "submit", str(LAB), "-o", str(out), "--json")
    assert code == 0, err
    first = json.loads((out / "submitted.json").read_text(encoding="utf-8"))["jobs"][0]
    assert first["sbatch"] == "submitted" and first["job_id"] is None
    assert "printed no job id" in first["error"][0]
    code, text, err = run_cli("lab", "status", str(out), "--json")
    assert code == 0, err
    assert json.loads(text)["jobs"][0]["state"] == "UNKNOWN"


def test_force_keeps_the_earlier_record(
    tmp_path: Path, run_cli: RunCli, fake_slurm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    assert run_cli("lab", "submit", str(LAB), "-o", str(out))[0] == 0
    first = (out / "submitted.json").read_text(encoding="utf-8")
    code, _, err = run_cli("lab", "submit", str(LAB), "-o", str(out))
    assert code == 2 and "not empty" in err  # a second submit into the same folder needs --force
    for _ in range(2):
        code, _, err = run_cli("lab", "submit", str(LAB), "-o", str(out), "--force")
        assert code == 0, err
    # each earlier record is kept under a new name, none overwritten; lab status reads any of them
    assert (out / "submitted-1.json").read_text(encoding="utf-8") == first
    ids = [json.loads((out / f).read_text(encoding="utf-8"))["jobs"][0]["job_id"]
           for f in ("submitted-1.json", "submitted-2.json", "submitted.json")]  # fmt: skip
    assert ids == ["1000", "1011", "1022"]
    code, text, err = run_cli("lab", "status", str(out / "submitted-1.json"), "--json")
    assert code == 0 and json.loads(text)["jobs"][0]["job_id"] == "1000", err


def test_a_planted_record_symlink_is_replaced_not_written_through(
    tmp_path: Path, run_cli: RunCli, fake_slurm: Path
) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text("precious", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / "submitted.json").symlink_to(victim)
    code, _, err = run_cli("lab", "submit", str(LAB), "-o", str(out), "--force")
    assert code == 0, err
    assert victim.read_text(encoding="utf-8") == "precious"
    assert not (out / "submitted.json").is_symlink()


def test_a_hung_squeue_is_one_line(
    tmp_path: Path, run_cli: RunCli, fake_slurm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    assert run_cli("lab", "submit", str(LAB), "-o", str(out))[0] == 0
    monkeypatch.setenv("FAKE_SQUEUE_HANG", "1")
    monkeypatch.setattr(lab_api, "SLURM_CALL_TIMEOUT_S", 1.0)
    code, _, err = run_cli("lab", "status", str(out))
    assert code == 2
    _one_line(err)
    assert "squeue gave no answer in 1 s" in err


def _record_file(folder: Path, jobs: list[dict[str, object]], **extra: object) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "submitted.json").write_text(json.dumps({"jobs": jobs, **extra}), encoding="utf-8")


GOOD_JOB = {"name": "a", "gpu": "H100 SXM5 80GB", "gres": "gpu:h100:1", "estimate_s": 3600.0, "job_id": "42"}


def test_many_ids_go_to_squeue_and_sacct_in_bounded_calls(tmp_path: Path, run_cli: RunCli, fake_slurm: Path) -> None:
    # 4,000 running (squeue) and 2,000 finished (sacct): no "argument list too long"
    jobs = [{**GOOD_JOB, "name": f"j{i}", "job_id": str(1000 + i)} for i in range(6000)]
    _record_file(tmp_path / "rec", jobs)
    code, text, err = run_cli("lab", "status", str(tmp_path / "rec"), "--json")
    assert code == 0, err
    states = [r["state"] for r in json.loads(text)["jobs"]]
    assert states == ["RUNNING"] * 4000 + ["COMPLETED"] * 2000
    squeue = Path(str(fake_slurm) + ".squeue").read_text(encoding="utf-8").splitlines()
    sacct = Path(str(fake_slurm) + ".sacct").read_text(encoding="utf-8").splitlines()
    assert len(squeue) == 12 and len(sacct) == 4
    assert max(len(line.split()[2].split(",")) for line in squeue) == lab_api.IDS_PER_CALL


@pytest.mark.parametrize(
    ("job", "extra", "word"),
    [({**GOOD_JOB, "job_id": "--help"}, {}, "job_id"),
     ({**GOOD_JOB, "job_id": "1,2"}, {}, "job_id"),
     ({**GOOD_JOB, "job_id": True}, {}, "job_id"),
     ({**GOOD_JOB, "name": "\x1b]0;owned\x07"}, {}, "name"),
     ({**GOOD_JOB, "gres": "gpu\nx"}, {}, "gres"),
     ({**GOOD_JOB, "estimate_s": -5}, {}, "estimate_s"),
     ({**GOOD_JOB, "estimate_s": 1e300}, {}, "estimate_s"),
     ({**GOOD_JOB, "sbatch": "maybe"}, {}, "sbatch"),
     ({**GOOD_JOB, "error": "oops"}, {}, "error"),
     (GOOD_JOB, {"complete": "no"}, "complete")],
)  # fmt: skip
def test_a_record_field_of_the_wrong_kind_is_one_line_naming_it(
    tmp_path: Path, run_cli: RunCli, fake_slurm: Path, job: dict[str, object], extra: dict[str, object], word: str
) -> None:
    _record_file(tmp_path / "rec", [job], **extra)
    code, _, err = run_cli("lab", "status", str(tmp_path / "rec"))
    assert code == 2
    _one_line(err)
    assert f"'{word}'" in err and "\x1b" not in err
    assert not Path(str(fake_slurm) + ".squeue").exists()  # nothing of it reached squeue


def test_a_record_with_too_many_jobs_is_one_line(tmp_path: Path, run_cli: RunCli) -> None:
    _record_file(tmp_path / "rec", [GOOD_JOB] * (lab_api.MAX_RECORD_JOBS + 1))
    code, _, err = run_cli("lab", "status", str(tmp_path / "rec"))
    assert code == 2 and "over the limit of 10,000" in err
    _one_line(err)


def test_status_prints_slurm_words_as_text(
    tmp_path: Path, run_cli: RunCli, fake_slurm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_REASON", "[bold]x[/bold]\x1b[2J")
    _record_file(tmp_path / "rec", [{**GOOD_JOB, "gres": "gpu:[red]h100[/red]:1"}])
    code, text, err = run_cli("lab", "status", str(tmp_path / "rec"))
    assert code == 0, err
    assert "gpu:[red]h100[/red]:1" in text and "[bold]x[/bold]\\x1b[2J" in text and "\x1b" not in text


@pytest.mark.parametrize(
    ("text", "says"),
    [("{not json", "not valid JSON"),
     ("[1, 2]", "no 'workload'"),
     ('{"workload": {"model": "llama-3.2-1b", "seq_len": NaN}, "options": [{"gpu": "H100", "num_gpus": 1}]}', "NaN"),
     ('{"workload": {"model": "llama-3.2-1b"}, "options": [{"gpu": "H100", "num_gpus": "eight", "usable": true}]}',
      "num_gpus"),
     ('{"workload": {"model": "llama-3.2-1b"}, "mode": "cluster", "layouts": [{"keys": {}}], "cluster": {"spec": "'
      + "a" * 60_000 + '"}}', "no 'num_gpus'")],
)  # fmt: skip
def test_a_plan_json_that_is_not_one_is_one_line(tmp_path: Path, run_cli: RunCli, text: str, says: str) -> None:
    path = tmp_path / "plan.json"
    path.write_text(text, encoding="utf-8")
    code, out, err = run_cli("launch", str(path), "--format", "slurm")
    assert code == 2 and out == ""
    _one_line(err)
    assert says in err and len(err) < 500


def test_a_plan_json_that_is_a_fifo_or_huge_is_one_line(tmp_path: Path, run_cli: RunCli) -> None:
    os.mkfifo(tmp_path / "fifo.json")
    code, _, err = run_cli("launch", str(tmp_path / "fifo.json"), "--format", "torchrun")
    assert code == 2 and "not a regular file" in err
    with open(tmp_path / "big.json", "wb") as fh:
        fh.truncate(100 * 2**20)
    code, _, err = run_cli("launch", str(tmp_path / "big.json"), "--format", "torchrun")
    assert code == 2 and "over the limit" in err
    _one_line(err)
