"""The local Slurm harness (tests/slurm/cluster-up.sh + slurm_helpers) accepts, runs and rejects
what a real Slurm would: the ground the sbatch-script tests stand on. Skipped without a Slurm,
unless GPUPLAN_REQUIRE_SLURM=1 (CI), where a missing Slurm fails them."""

from __future__ import annotations

import pytest

from slurm_helpers import require_slurm, sbatch_accepts, sbatch_run


@pytest.fixture(autouse=True)
def _slurm() -> None:
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
