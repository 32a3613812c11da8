"""Lab mode on a real Slurm with accounting (slurmctld + slurmd + slurmdbd + MariaDB, fake typed
GPUs: tests/slurm/cluster-up.sh through helpers.slurm.accounting_cluster, shaped as
helpers.slurm.ACCOUNTING_CLUSTER: 2 nodes of 8 a100, 1 node of 4 rtx3090, billed per GPU type).

`gpuplan lab slurm-config`'s sacctmgr lines create the members; `gpuplan lab submit` sends the
jobs through the real sbatch. Checked: each job lands on the GPU type the allocation chose, a job
that fits nowhere is refused before submission, restarting slurmctld mid-queue loses no job, a
member over budget is held while another's jobs run, and `lab status` reads them back.
Skips without root/Slurm; fails under GPUPLAN_REQUIRE_SLURM=1 (CI)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuplan.interfaces import lab as lab_api
from helpers.slurm import job_info, require_accounting, restart_slurmctld, sacctmgr, scancel, wait_for_job

RUNNING_OR_DONE = {"RUNNING", "COMPLETING", "COMPLETED"}
QUEUED = {"PENDING", *RUNNING_OR_DONE}


@pytest.fixture
def lab_cluster(accounting_conf: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The accounting cluster, a lab file for it (member names unique per run: the cluster may be
    reused), its members created from `lab slurm-config`'s own sacctmgr lines; jobs cancelled after."""
    monkeypatch.setenv("SLURM_CONF", str(accounting_conf))
    require_accounting()
    tag = f"{int(time.time()) % 10**6}{os.getpid() % 1000}"
    ana, ben = f"ana{tag}", f"ben{tag}"
    lab = {
        "nodes": [
            {"name": "a100-001", "gpus": {"A100 SXM4 40GB": 8}},
            {"name": "a100-002", "gpus": {"A100 SXM4 40GB": 8}},
            {"name": "rtx3090-001", "gpus": {"RTX 3090": 4}},
        ],
        "members": [
            {"name": ana, "share": 2},
            # 0.02 GPU-hours = 1 billing minute: any job's --time exceeds it, so Slurm's "safe"
            # enforcement holds every job of this member (AccountingStorageEnforce=...,safe)
            {"name": ben, "share": 1, "gpu_hours_per_month": 0.02},
        ],
        "jobs": [
            {"name": f"lora3b-{tag}", "owner": ana, "model": "llama-3.2-3b", "task": "lora", "batch_size": 4,
             "seq_len": 2048, "activation_checkpointing": "full", "tokens": 2e7, "command": "sleep 20"},
            {"name": f"gpt2-{tag}", "owner": ana, "model": "gpt2", "task": "pretrain", "batch_size": 8,
             "seq_len": 1024, "tokens": 1e8, "command": "sleep 20"},
            {"name": f"qlora8b-{tag}", "owner": ben, "model": "llama-3.1-8b", "task": "qlora", "batch_size": 2,
             "seq_len": 2048, "activation_checkpointing": "full", "tokens": 1e7, "command": "sleep 5"},
            {"name": f"ft4-{tag}", "owner": ana, "model": "llama-3.2-1b", "task": "pretrain", "num_gpus": 4,
             "batch_size": 4, "seq_len": 2048, "activation_checkpointing": "full", "zero": 1, "tokens": 1e9,
             "command": "sleep 20"},
            {"name": f"huge-{tag}", "owner": ana, "model": "llama-3.1-70b", "task": "finetune", "batch_size": 1,
             "seq_len": 4096, "tokens": 1e8, "command": "sleep 1"},
        ],
    }  # fmt: skip
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(lab), encoding="utf-8")
    for line in lab_api.slurm_config(path)["sacctmgr"].splitlines():
        args = line.split()[2:]  # "sacctmgr -i add account ..." -> "add account ..."
        sacctmgr(*args)  # "Nothing new added" (the lab account from an earlier run) counts as done
        if args[:2] == ["add", "user"]:
            # the members are Slurm users; the test submits as root: root joins each member's account
            sacctmgr("add", "user", "root", f"account={args[2]}")
    ids: list[str] = []
    yield {"path": path, "ana": ana, "ben": ben, "tag": tag, "ids": ids, "out": tmp_path / "sbatch"}
    scancel(*ids)


def test_lab_jobs_land_where_the_plan_put_them_and_survive_a_restart(lab_cluster: dict[str, Any]) -> None:
    path, ids = lab_cluster["path"], lab_cluster["ids"]
    plan = {j["name"]: j for j in lab_api.allocate(path, "fair").to_dict()["jobs"]}
    rec = lab_api.submit(path, "fair", lab_cluster["out"])
    sent = {j["name"]: j for j in rec["jobs"]}
    ids += [j["job_id"] for j in rec["jobs"] if j["job_id"]]
    # the 70B job fits on no GPU type: refused before submission, with each type's reason
    assert [r["name"] for r in rec["refused"]] == [f"huge-{lab_cluster['tag']}"]
    assert all("does not fit" in why for why in rec["refused"][0]["reasons"].values())
    assert set(sent) == set(plan) and all(j["job_id"] for j in rec["jobs"]), rec["jobs"]

    # each job went to the partition and GPU type the allocation chose, with its account
    gres = lab_api.lab_gres(lab_api.load(path).lab)
    for name, job in sent.items():
        info = job_info(job["job_id"])
        want = gres[plan[name]["gpu"]]
        assert info["Partition"] == want, (name, info)
        n = plan[name]["num_gpus"]
        asked = info.get("TresPerNode", "") + " " + info.get("ReqTRES", "") + " " + info.get("TRES", "")
        assert f"gpu:{want}:{n}" in asked or f"gres/gpu:{want}={n}" in asked, (name, asked)
        owner = next(j for j in lab_api.load(path).lab.jobs if j.name == name).owner
        assert info["Account"] == owner

    # the member over budget is held; the other member's jobs run, on nodes of their type
    ben_job = next(j for n, j in sent.items() if n.startswith("qlora8b-"))
    held = wait_for_job(ben_job["job_id"], {"PENDING"}, reason="AssocGrpBillingMinutes", timeout=60)
    assert held["Account"] == lab_cluster["ben"]
    for name, job in sent.items():
        if job is ben_job:
            continue
        info = wait_for_job(job["job_id"], RUNNING_OR_DONE, timeout=90)
        assert info["NodeList"].startswith(gres[plan[name]["gpu"]] + "-"), (name, info["NodeList"])

    # restart slurmctld mid-queue: every job is still there, none went backwards or vanished
    before = {j: job_info(j)["JobState"] for j in ids}
    restart_slurmctld()
    for j, state in before.items():
        after = job_info(j)
        assert after, f"job {j} was lost across the restart"
        assert after["JobState"] in (QUEUED if state == "PENDING" else RUNNING_OR_DONE), (j, state, after)
    assert job_info(ben_job["job_id"])["Reason"] == "AssocGrpBillingMinutes"

    # lab status reads the same states back, against the estimates
    status = {j["name"]: j for j in lab_api.status(lab_cluster["out"])["jobs"]}
    assert status[ben_job["name"]]["state"] == "PENDING"
    assert status[ben_job["name"]]["reason"] == "AssocGrpBillingMinutes"
    for name, job in sent.items():
        assert status[name]["job_id"] == job["job_id"] and status[name]["estimate_s"] == job["estimate_s"]
        if job is not ben_job:
            assert status[name]["state"] in RUNNING_OR_DONE
