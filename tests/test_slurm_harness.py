"""The local Slurm harness (tests/slurm/cluster-up.sh + helpers/slurm.py) accepts, runs and rejects
what a real Slurm would: the ground the sbatch-script tests stand on. Skipped without a Slurm,
unless GPUPLAN_REQUIRE_SLURM=1 (CI), where a missing Slurm fails them.

The accounting tests (the `accounting` fixture) check the accounting stage (slurmdbd: typed GPU
TRES, billing weights, GrpTRESMins budgets, a slurmctld restart) on SLURM_CONF's cluster if it has
accounting, else on one that the session starts as root (helpers.slurm.accounting_cluster).
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.slurm import (
    billing_weights,
    job_info,
    live_gpu_types,
    require_accounting,
    require_slurm,
    restart_slurmctld,
    sacctmgr,
    sbatch_accepts,
    sbatch_run,
    sbatch_submit,
    scancel,
    slurm_command,
    tres_minutes_used,
    wait_for_job,
)


@pytest.fixture(autouse=True)
def _slurm(request: pytest.FixtureRequest) -> None:
    if "accounting" not in request.fixturenames:  # those bring a cluster of their own
        require_slurm()


def script(*directives: str, command: str = "srun true") -> str:
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), command]
    return "\n".join(lines) + "\n"


MULTI_NODE = script(
    "--job-name=gpuplan-llama-3.1-8b",
    "--nodes=2",
    "--ntasks-per-node=1",
    "--gres=gpu:h100:8",
    "--cpus-per-task=16",
    "--time=1-02:30:00",
    "--output=%x-%j.out",
    command="srun torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=$head:29500 train.py",
)


def test_single_node_job_runs_to_completion() -> None:
    state, output = sbatch_run(
        script(
            "--job-name=gpuplan-smoke",
            "--nodes=1",
            "--ntasks-per-node=1",
            "--gres=gpu:h100:1",
            "--cpus-per-task=4",
            "--time=00:05:00",
            "--output=%x-%j.out",
            command='echo "gpus=$CUDA_VISIBLE_DEVICES nodes=$SLURM_JOB_NUM_NODES"; srun echo step-ok',
        ),
        timeout=60,
    )
    assert state == "COMPLETED", output
    assert "gpus=0 nodes=1" in output
    assert "step-ok" in output


def test_two_node_job_runs_a_step_on_each_node() -> None:
    state, output = sbatch_run(
        script(
            "--nodes=2",
            "--ntasks-per-node=1",
            "--gres=gpu:h100:8",
            "--time=00:05:00",
            command="srun bash -c 'echo node=$SLURM_NODEID gpus=$CUDA_VISIBLE_DEVICES'",
        ),
        timeout=60,
    )
    assert state == "COMPLETED", output
    assert sorted(line for line in output.splitlines() if line.startswith("node=")) == [
        "node=0 gpus=0,1,2,3,4,5,6,7",
        "node=1 gpus=0,1,2,3,4,5,6,7",
    ]


def test_failing_job_reports_failed() -> None:
    state, _ = sbatch_run(script("--time=00:01:00", command="exit 3"), timeout=60)
    assert state == "FAILED"


@pytest.mark.parametrize("nodes", [2, 4, 64])
def test_multi_node_h100_script_is_accepted(nodes: int) -> None:
    job_id = sbatch_accepts(MULTI_NODE.replace("--nodes=2", f"--nodes={nodes}"))
    assert job_id.isdigit()


def test_a100_script_is_accepted() -> None:
    assert sbatch_accepts(script("--nodes=2", "--ntasks-per-node=8", "--gres=gpu:a100:8", "--cpus-per-task=8"))


@pytest.mark.parametrize(
    ("directive", "stderr_says"),
    [
        ("--gres=gpu:nosuchgpu:1", "Requested node configuration is not available"),
        ("--nosuchoption=1", "unrecognized option"),
        ("--gres=gpu:h100:9", "Requested node configuration is not available"),  # 8 per node
        ("--partition=nosuchpartition", "Invalid partition name"),
        ("--time=forever", "Invalid --time specification"),
    ],
)
def test_bad_directive_is_rejected(directive: str, stderr_says: str) -> None:
    with pytest.raises(AssertionError, match=stderr_says):
        sbatch_accepts(script("--nodes=1", directive))


def test_more_nodes_than_the_cluster_has_are_rejected() -> None:
    # cluster-up.sh sets EnforcePartLimits=ALL, as many sites do; Slurm's default (NO) would accept
    # this job and leave it pending forever (Reason=PartitionConfig)
    with pytest.raises(AssertionError, match="Batch job submission failed"):
        sbatch_accepts(MULTI_NODE.replace("--nodes=2", "--nodes=100000"))


# --- the accounting stage (cluster-up.sh with GPUPLAN_SLURM_ACCOUNTING=1) ---------------------------


@pytest.fixture
def accounting(accounting_conf: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Point the helpers at the accounting cluster; yields a list for the test's job ids, which
    are cancelled afterwards."""
    monkeypatch.setenv("SLURM_CONF", str(accounting_conf))
    require_accounting()
    jobs: list[str] = []
    yield jobs
    scancel(*jobs)


_accounts = itertools.count()


def new_account() -> str:
    """A new account under root, with user root in it (a cluster may be reused across sessions)."""
    name = f"t{int(time.time()) % 10**7}p{os.getpid()}n{next(_accounts)}"
    sacctmgr("add", "account", name, "parent=root", "fairshare=1")
    sacctmgr("add", "user", "root", f"account={name}")
    return name


def tres(info: dict[str, str], key: str = "TRES") -> dict[str, str]:
    """A job's TRES ("cpu=1,mem=8000M,billing=9,gres/gpu:a100=3") as a dict."""
    return dict(item.split("=", 1) for item in info.get(key, "").split(",") if "=" in item)


def sacct_alloc_tres(job_id: str, timeout: float = 20) -> dict[str, str]:
    """The job's AllocTRES as slurmdbd recorded it (slurmctld sends it a moment after the job ends)."""
    deadline = time.monotonic() + timeout
    while True:
        out = slurm_command("sacct", "-X", "-n", "-P", "-j", job_id, "-o", "JobID,State,AllocTRES")
        rows = [line.split("|") for line in out.splitlines()]
        row = next((r for r in rows if r[0] == job_id and r[1] == "COMPLETED" and r[2]), None)
        if row is not None:
            return dict(item.split("=", 1) for item in row[2].split(","))
        assert time.monotonic() < deadline, f"slurmdbd has no completed job {job_id} after {timeout} s: {out!r}"
        time.sleep(0.5)


def test_typed_gpu_job_runs_on_its_type_and_is_accounted(accounting: list[str]) -> None:
    account = new_account()
    types = dict(list(live_gpu_types().items())[:3])
    assert types, "the cluster has no GPU node"
    for gpu_type, per_node in types.items():
        gpus = min(2, per_node)
        job = sbatch_submit(
            script("--nodes=1", f"--gres=gpu:{gpu_type}:{gpus}", "--time=00:05:00", command="true"),
            f"--account={account}",
        )
        accounting.append(job)
        info = wait_for_job(job, timeout=60)
        assert info["JobState"] == "COMPLETED", info
        assert info["Account"] == account
        assert info["NodeList"].startswith(f"{gpu_type}-"), info["NodeList"]
        assert tres(info).get(f"gres/gpu:{gpu_type}") == str(gpus), info["TRES"]
        assert tres(info).get("gres/gpu") == str(gpus), info["TRES"]
        assert sacct_alloc_tres(job).get(f"gres/gpu:{gpu_type}") == str(gpus)


def test_slurmctld_restart_keeps_running_and_pending_jobs(accounting: list[str]) -> None:
    account = new_account()
    gpu_type = next(iter(live_gpu_types()))
    body = script(f"--gres=gpu:{gpu_type}:1", "--time=00:10:00", command="sleep 300")
    running = sbatch_submit(body, f"--account={account}")
    later = sbatch_submit(body, f"--account={account}", "--begin=now+1hour")
    held = sbatch_submit(body, f"--account={account}", "--hold")
    accounting += [running, later, held]
    wait_for_job(running, {"RUNNING"}, timeout=30)
    wait_for_job(later, {"PENDING"}, reason="BeginTime", timeout=15)
    wait_for_job(held, {"PENDING"}, reason="JobHeldUser", timeout=15)
    before = {job: job_info(job) for job in accounting}

    restart_slurmctld()

    for job, was in before.items():
        now = job_info(job)
        assert now.get("JobId") == job, now
        for key in ("JobState", "Reason", "Account", "NodeList", "TRES"):
            assert now.get(key) == was.get(key), (job, key, was.get(key), now.get(key))
    # the new slurmctld schedules (and the old job ids are not reused)
    state, _ = sbatch_run(script("--time=00:01:00", command="true"), timeout=60)
    assert state == "COMPLETED"
    out = slurm_command("sacct", "-X", "-n", "-P", "-j", ",".join(accounting), "-o", "JobID,Account")
    assert sorted(out.split()) == sorted(f"{job}|{account}" for job in accounting)


def test_account_over_its_budget_is_held_while_another_runs(accounting: list[str]) -> None:
    spent, funded = new_account(), new_account()
    gpu_type, per_node = next(iter(live_gpu_types().items()))
    gpus = f"--gres=gpu:{gpu_type}:{per_node}"
    # use a whole node (its GPUs, and CPUs: what a partition without billing weights bills) long
    # enough for at least a billing-minute
    job = sbatch_submit(
        script(gpus, "--cpus-per-task=16", "--time=00:10:00", command="sleep 300"), f"--account={spent}"
    )
    accounting.append(job)
    billing = int(tres(wait_for_job(job, {"RUNNING"}, timeout=30))["billing"])
    assert billing >= 1, f"a job with {per_node} {gpu_type} GPUs and 16 CPUs is billed {billing}"
    time.sleep(min(30, 75 / billing))
    scancel(job)
    wait_for_job(job, timeout=30)
    restart_slurmctld()  # charges the job's usage now, not at the next PriorityCalcPeriod (1 min)
    deadline = time.monotonic() + 75
    while (used := tres_minutes_used(spent)["billing"]) < 1:
        assert time.monotonic() < deadline, f"no billing minutes charged to {spent}: {tres_minutes_used(spent)}"
        time.sleep(1)

    sacctmgr("modify", "account", spent, "set", f"GrpTRESMins=billing={used}")  # its budget: used up
    small = script(f"--gres=gpu:{gpu_type}:1", "--time=00:01:00", command="true")
    over = sbatch_submit(small, f"--account={spent}")
    within = sbatch_submit(small, f"--account={funded}")
    accounting += [over, within]
    wait_for_job(over, {"PENDING"}, reason="AssocGrpBillingMinutes", timeout=30)
    assert wait_for_job(within, timeout=60)["JobState"] == "COMPLETED"
    assert job_info(over)["JobState"] == "PENDING"

    # fair-share: root's association in the account that used GPUs ranks below the one in the other
    rows = slurm_command("sshare", "-n", "-P", "-a", "-A", f"{spent},{funded}", "-o", "Account,User,FairShare")
    share = {fields[0].strip(): float(fields[2]) for fields in (r.split("|") for r in rows.splitlines()) if fields[1]}
    assert share[spent] < share[funded], share


def test_billing_is_the_partitions_gpu_weight_times_gpus(accounting: list[str]) -> None:
    weighted: dict[str, tuple[int, dict[str, float]]] = {}
    for gpu_type, per_node in live_gpu_types().items():
        weights = {name.lower(): w for name, w in billing_weights(gpu_type).items()}
        if f"gres/gpu:{gpu_type}" in weights and set(weights) <= {"cpu", "gres/gpu", f"gres/gpu:{gpu_type}"}:
            weighted[gpu_type] = (per_node, weights)
    if not weighted:
        pytest.skip("no GPU type's partition has TRESBillingWeights for it (set GPUPLAN_SLURM_BILLING)")
    account = new_account()
    for gpu_type, (per_node, weights) in weighted.items():
        gpus = min(3, per_node)
        job = sbatch_submit(
            script(f"--gres=gpu:{gpu_type}:{gpus}", "--cpus-per-task=2", "--time=00:05:00", command="true"),
            f"--account={account}",
            f"--partition={gpu_type}",
        )
        accounting.append(job)
        info = wait_for_job(job, timeout=60)
        assert info["JobState"] == "COMPLETED", info
        alloc = tres(info)
        # Slurm sums weight x count over the TRES (the typed and any untyped GPU weight, and the
        # CPUs') and truncates the sum to an integer: e.g. 3 GPUs at 1.4 bill 4
        per_gpu = weights[f"gres/gpu:{gpu_type}"] + weights.get("gres/gpu", 0.0)
        expected = int(per_gpu * gpus + weights.get("cpu", 0.0) * int(alloc["cpu"]))
        assert alloc[f"gres/gpu:{gpu_type}"] == str(gpus), info["TRES"]
        assert int(alloc["billing"]) == expected, (weights, info["TRES"])
        assert sacct_alloc_tres(job)["billing"] == alloc["billing"]
