"""Lab mode (specs/lab.py, planner/lab.py, interfaces/lab.py): the lab file, the throughput
matrix, Gavel's allocation LPs, the baselines, and the Slurm files. The real-Slurm tests are in
tests/test_lab_slurm.py."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from conftest import RunCli
from gpuplan.estimators.perf import estimate_training_time
from gpuplan.interfaces import api
from gpuplan.interfaces import lab as lab_api
from gpuplan.planner import lab as plan_lab
from gpuplan.specs.models import load_model

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "lab.yaml"


def write(tmp_path: Path, data: dict[str, Any], name: str = "lab.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


SMALL: dict[str, Any] = {
    "nodes": [{"name": "fast", "gpus": {"A100 SXM4 80GB": 1}}, {"name": "slow", "gpus": {"RTX 3090": 1}}],
    "members": [{"name": "ana", "share": 1}, {"name": "ben", "share": 1, "gpu_hours_per_month": 10}],
    "jobs": [
        {"name": "big", "owner": "ana", "model": "llama-3.2-1b", "task": "lora", "batch_size": 4,
         "seq_len": 2048, "activation_checkpointing": "full", "tokens": 2e8},
        {"name": "small", "owner": "ben", "model": "gpt2", "task": "pretrain", "batch_size": 8, "seq_len": 1024,
         "tokens": 5e8},
    ],
}  # fmt: skip


# --- the lab file ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (lambda d: d["nodes"][0]["gpus"].update({"A1000": 2}), r"Unknown GPU 'A1000'"),
        (lambda d: d["jobs"][0].update(owner="zoe"), r"job 'big': owner 'zoe' is not a member"),
        (lambda d: d["jobs"][0].pop("tokens"), r"job 'big' needs its size: 'tokens'"),
        (lambda d: d["jobs"][0].update(gpu="H100"), r"leave out 'gpu'"),
        (lambda d: d["jobs"][0].update(batch_size=0), r"job 'big': The 'batch_size' key"),
        (lambda d: d["jobs"][1].update(name="big"), r"job names must be unique"),
        (lambda d: d["members"][0].update(share=-1), r"share must be a number from 0.001"),
        (lambda d: d.update(queue=[]), r"unknown key 'queue'"),
        (lambda d: d["nodes"][0].update(name="bad name"), r"node name must be"),
    ],
)
def test_bad_lab_files_get_one_line_and_exit_2(tmp_path: Path, run_cli: RunCli, change: Any, pattern: str) -> None:
    data = json.loads(json.dumps(SMALL))
    change(data)
    code, out, err = run_cli("lab", "check", str(write(tmp_path, data)))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and re.search(pattern, err), err


def test_malformed_yaml(tmp_path: Path, run_cli: RunCli) -> None:
    p = tmp_path / "lab.yaml"
    p.write_text("nodes: [\n", encoding="utf-8")
    code, _, err = run_cli("lab", "check", str(p))
    assert code == 2 and "is not valid YAML" in err


# --- check: the throughput matrix -------------------------------------------------------------------


def test_check_is_gpuplans_own_estimate(tmp_path: Path) -> None:
    rec = lab_api.check(write(tmp_path, SMALL)).to_dict()
    assert [i["gpu"] for i in rec["inventory"]] == ["A100 SXM4 80GB", "GeForce RTX 3090"]
    assert [i["gres"] for i in rec["inventory"]] == ["a100", "rtx3090"]
    big = next(j for j in rec["jobs"] if j["name"] == "big")
    for o in big["options"]:
        assert o["fits"] and o["num_gpus"] == 1
        w = api.build_workload(None, {**{k: v for k, v in SMALL["jobs"][0].items() if k not in ("name", "owner")},
                                      "gpu": o["gpu"]})  # fmt: skip
        t = estimate_training_time(load_model("llama-3.2-1b"), w, api.catalog().get(o["gpu"]))
        assert o["tokens_per_s"] == pytest.approx(t.tokens_per_s, rel=1e-12)
        assert o["hours"] == pytest.approx(2e8 / t.tokens_per_s / 3600, rel=1e-12)
    # the A100 runs it faster than the 3090, so its billing weight is higher
    w = rec["speed_weights"]
    assert w["GeForce RTX 3090"] == 1.0 and w["A100 SXM4 80GB"] > 1.5


def test_a_job_too_big_for_every_node_is_refused_with_reasons() -> None:
    rec = lab_api.check(EXAMPLE).to_dict()
    huge = next(j for j in rec["jobs"] if j["name"] == "huge-70b")
    assert not huge["fits_anywhere"]
    assert all(o["num_gpus"] == 0 and o["tokens_per_s"] == 0 and "does not fit" in o["reason"] for o in huge["options"])
    eight = next(j for j in rec["jobs"] if j["name"] == "full-ft-8b")
    reasons = {o["gpu"]: o["reason"] for o in eight["options"]}
    assert reasons["GeForce RTX 2080 Ti"] == "asks for 8 GPUs; a node has 4"


# --- the allocation LPs ------------------------------------------------------------------------------


def test_maxmin_lp_matches_the_hand_solution() -> None:
    """Two jobs; one A100 and two 2080 Ti. Rates [[4, 1], [1.2, 1]]: job 1 gains 4x on the A100,
    job 2 1.2x. An equal split (every job half the A100 and one 2080 Ti, scaled to a whole job's
    time) gives rates 2 and 16/15. The max-min LP gives job 2 a share a of the A100 (job 1 takes a
    2080 Ti meanwhile): (4 - 3a)/2 = (1 + 0.2a)/(16/15), so a = 0.6296 and z = 1.0556; a grid
    search over every split agrees."""
    rate = np.array([[4.0, 1.0], [1.2, 1.0]])
    gpus = np.ones((2, 2))
    cap = np.array([1.0, 2.0])
    eq = (plan_lab.equal_split(rate, gpus, cap) * rate).sum(1)
    assert eq == pytest.approx([2.0, 16 / 15])
    x = plan_lab._solve_maxmin(rate, gpus, cap, eq)
    z = min((x * rate).sum(1) / eq)
    a = (4 - 2 / (16 / 15)) / (3 + 0.4 / (16 / 15))
    assert a == pytest.approx(0.6296, abs=1e-4)
    assert z == pytest.approx((4 - 3 * a) / 2, rel=1e-5)
    assert (x.sum(1) <= 1 + 1e-9).all() and ((x * gpus).sum(0) <= cap + 1e-9).all()
    grid = np.linspace(0, 1, 1001)
    best = max(
        min((4 * x1 + (1 - x1)) / eq[0], (1.2 * x2 + (1 - x2)) / eq[1])
        for x1 in grid
        for x2 in grid[: round((1 - x1) * 1000) + 1]
    )
    assert z == pytest.approx(best, abs=2e-3)


def schedule_is_feasible(rec: dict[str, Any], lab_file: Path) -> None:
    """At every instant no GPU type is over-committed, and every job gets all its tokens."""
    ld = lab_api.load(lab_file)
    inv = ld.lab.inventory()
    segs = rec["segments"]
    cuts = sorted({s["start_s"] for s in segs} | {s["end_s"] for s in segs})
    for t0, t1 in itertools.pairwise(cuts):
        mid = (t0 + t1) / 2
        for g, count in inv.items():
            used = sum(s["share"] * s["num_gpus"] for s in segs if s["gpu"] == g and s["start_s"] <= mid < s["end_s"])
            assert used <= count * (1 + 1e-6), (g, used, count)
    for j in rec["jobs"]:
        rate = {o.gpu: o.tokens_per_s for o in ld.options[j["name"]]}
        done = sum(s["share"] * rate[s["gpu"]] * (s["end_s"] - s["start_s"]) for s in segs if s["job"] == j["name"])
        job = next(x for x in ld.lab.jobs if x.name == j["name"])
        assert done == pytest.approx(plan_lab.work_tokens(job), rel=1e-6)
        assert j["expected_finish_s"] == pytest.approx(max(s["end_s"] for s in segs if s["job"] == j["name"]))


@pytest.mark.parametrize("policy", ["fair", "makespan"])
def test_allocation_beats_both_baselines_on_the_example(policy: str) -> None:
    rec = lab_api.allocate(EXAMPLE, policy).to_dict()
    schedule_is_feasible(rec, EXAMPLE)
    assert [r["name"] for r in rec["refused"]] == ["huge-70b"]
    assert len(rec["jobs"]) == 11
    # Gavel's claim, on gpuplan's predicted matrix: heterogeneity-aware beats both baselines
    assert rec["gain_vs_equal_split"] > 1.2 and rec["gain_vs_fcfs"] > 1.2
    metric = rec["metric"]
    assert rec["gain_vs_equal_split"] == pytest.approx(rec["equal_split"][metric] / rec["schedule"][metric])
    # members' GPU-hours add up to the schedule's
    total = sum(s["share"] * s["num_gpus"] * (s["end_s"] - s["start_s"]) for s in rec["segments"]) / 3600
    assert sum(m["gpu_hours"] for m in rec["members"]) == pytest.approx(total)


def test_cost_policy_rents_only_what_a_deadline_needs(tmp_path: Path, run_cli: RunCli) -> None:
    data = json.loads(json.dumps(SMALL))
    data["nodes"] = [{"name": "slow", "gpus": {"RTX 3090": 1}}]
    data["jobs"] = [data["jobs"][0] | {"deadline": "2h"}]
    path = write(tmp_path, data)
    ld = lab_api.load(path)
    r3 = ld.options["big"][0].tokens_per_s
    work = 2e8
    assert work / r3 > 7200  # the 3090 alone misses the deadline
    rec = lab_api.allocate(path, "cost").to_dict()
    assert rec["cloud_usd"] > 0
    job = rec["jobs"][0]
    secs = job["seconds_by_type"]
    assert sum(secs.values()) <= 7200 * (1 + 1e-6)  # one type at a time, within the deadline
    rates = {o.gpu: o for o in ld.options["big"]}
    usd = done = 0.0
    cat = api.catalog()
    for t, sec in secs.items():
        name = t.removeprefix("cloud:")
        o = rates[name] if name in rates else plan_lab.job_option(ld.models["big"], ld.lab.jobs[0], cat.get(name), 8)
        done += o.tokens_per_s * sec
        if t.startswith("cloud:"):
            usd += api.prices()[name].usd_per_hour * o.num_gpus * sec / 3600
    assert done == pytest.approx(work, rel=1e-6)  # it finishes
    assert rec["cloud_usd"] == pytest.approx(usd, rel=1e-6)  # and pays exactly for the rented seconds
    # renting for the whole job on its cheapest cloud option costs at least as much (the LP's optimum)
    whole = min(
        api.prices()[g.name].usd_per_hour * o.num_gpus * work / o.tokens_per_s / 3600
        for g in cat
        if g.name in api.prices()
        for o in [plan_lab.job_option(ld.models["big"], ld.lab.jobs[0], g, 8)]
        if o.fits and work / o.tokens_per_s <= 7200
    )
    assert rec["cloud_usd"] <= whole * (1 + 1e-9)
    # without renting, the deadline cannot be met: one line, exit 2
    code, _, err = run_cli("lab", "allocate", str(path), "--policy", "cost", "--no-burst")
    assert code == 2 and "No allocation meets every deadline" in err


@pytest.mark.parametrize("command", ["check", "allocate", "slurm-config"])
def test_json_output_is_one_document(run_cli: RunCli, command: str) -> None:
    code, out, err = run_cli("lab", command, str(EXAMPLE), "--json")
    assert code == 0, err
    rec = json.loads(out)
    if command == "allocate":  # the contract the issue names
        assert rec["gain_vs_equal_split"] > 1 and {"name", "gpu", "num_gpus", "expected_finish_s"} <= set(
            rec["jobs"][0]
        )
    if command == "check":
        assert {"name", "options"} <= set(rec["jobs"][0])
        assert {"gpu", "fits", "num_gpus", "hours"} <= set(rec["jobs"][0]["options"][0])


def test_gantt_png(tmp_path: Path, run_cli: RunCli) -> None:
    png = tmp_path / "gantt.png"
    code, out, _ = run_cli("lab", "allocate", str(EXAMPLE), "--png", str(png))
    assert code == 0 and "better" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


# --- Slurm files ----------------------------------------------------------------------------------


def test_slurm_config_lines() -> None:
    rec = lab_api.slurm_config(EXAMPLE)
    gres = rec["gres_conf"].splitlines()
    assert "NodeName=n1 Name=gpu Type=rtx2080ti File=/dev/nvidia[0-3]" in gres
    assert "NodeName=n5 Name=gpu Type=rtx3090 File=/dev/nvidia0" in gres
    conf = rec["slurm_conf"]
    assert "NodeName=n6 Gres=gpu:a100:8 State=UNKNOWN" in conf
    assert "PartitionName=rtx2080ti Nodes=n1,n2,n3 " in conf
    w = rec["speed_weights"]
    assert (
        f'PartitionName=a100 Nodes=n6 MaxTime=INFINITE State=UP TRESBillingWeights="CPU=0,GRES/gpu={w["A100 SXM4 40GB"]:.3g}"'
        in conf
    )
    assert f'GRES/gpu:a100={w["A100 SXM4 40GB"]:.3g}"' in conf  # the shared partition names the types
    assert "PriorityDecayHalfLife=0" in conf and "PriorityUsageResetPeriod=MONTHLY" in conf
    acct = rec["sacctmgr"].splitlines()
    assert "sacctmgr -i add account ana parent=lab Fairshare=2 GrpTRESMins=billing=120000" in acct  # 2000 h x 60
    assert "sacctmgr -i add user dev Account=dev" in acct


def test_lab_gres_names_stay_apart(tmp_path: Path) -> None:
    data = json.loads(json.dumps(SMALL))
    data["nodes"] = [{"name": "a", "gpus": {"A100 SXM4 40GB": 2}}, {"name": "b", "gpus": {"A100 SXM4 80GB": 2}}]
    rec = lab_api.check(write(tmp_path, data)).to_dict()
    assert [i["gres"] for i in rec["inventory"]] == ["a100_40g", "a100_80g"]


def test_submit_dry_run_writes_one_script_per_runnable_job(tmp_path: Path) -> None:
    rec = lab_api.submit(EXAMPLE, "fair", tmp_path / "out", dry_run=True)
    alloc = lab_api.allocate(EXAMPLE, "fair").to_dict()
    assert [j["name"] for j in rec["jobs"]] == [j["name"] for j in alloc["jobs"]]
    assert [r["name"] for r in rec["refused"]] == ["huge-70b"]
    assert not (tmp_path / "out" / "huge-70b.sbatch").exists()
    for j, a in zip(rec["jobs"], alloc["jobs"], strict=True):
        text = Path(j["script"]).read_text()
        gres = lab_api.lab_gres(lab_api.load(EXAMPLE).lab)[a["gpu"]]
        assert f"#SBATCH --gres=gpu:{gres}:{a['num_gpus']}" in text
        assert f"#SBATCH --account={a['owner']}" in text and f"#SBATCH --partition={gres}" in text
        m = re.search(r"#SBATCH --time=(\d+)-(\d\d):(\d\d):(\d\d)", text)
        assert m
        d, h, mi, s = map(int, m.groups())
        limit = ((d * 24 + h) * 60 + mi) * 60 + s
        assert limit == pytest.approx(a["hours_alone_on_gpu"] * 3600 * lab_api.TIME_MARGIN + lab_api.TIME_PAD_S, abs=1)


def test_the_readme_example_runs_end_to_end(tmp_path: Path, run_cli: RunCli) -> None:
    """check -> allocate -> slurm-config -> submit --dry-run, as the README shows them."""
    assert run_cli("lab", "check", str(EXAMPLE))[0] == 0
    code, out, _ = run_cli("lab", "allocate", str(EXAMPLE), "--policy", "fair", "--png", str(tmp_path / "g.png"))
    assert code == 0 and "refused huge-70b" in out
    code, _, _ = run_cli("lab", "slurm-config", str(EXAMPLE), "-o", str(tmp_path / "slurm"))
    assert code == 0
    assert {p.name for p in (tmp_path / "slurm").iterdir()} == {"gres.conf", "slurm.conf.lab", "sacctmgr.sh"}
    code, out, _ = run_cli("lab", "submit", str(EXAMPLE), "--dry-run", "-o", str(tmp_path / "sbatch"))
    assert code == 0 and "refused huge-70b (not submitted)" in out
    assert len(list((tmp_path / "sbatch").glob("*.sbatch"))) == 11
