"""Submit sbatch scripts to the local test Slurm that tests/slurm/cluster-up.sh starts.

Only that cluster is used: the one SLURM_CONF names, or else the one under $GPUPLAN_SLURM_DIR
(default /tmp/gpuplan-slurm) if it is there, never a site Slurm picked up from /etc/slurm.
Nodes and GPU types: see cluster-up.sh (gres gpu:h100 and gpu:a100, 8 per node, on 4 nodes each;
gpu:l40s and gpu:l4 on one node each).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = ["require_slurm", "sbatch_accepts", "sbatch_run", "slurm_available", "slurm_conf"]

# How far ahead sbatch_accepts sets --begin: long enough that the job never starts before it is
# cancelled. (Not --hold: a held job skips sbatch's feasibility check, so even an unknown GPU type
# would be "accepted".)
_BEGIN = "now+1hour"
_FINAL_STATES = frozenset(
    {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT"}
)


def slurm_conf() -> Path | None:
    """The test cluster's slurm.conf: $SLURM_CONF if set, else cluster-up.sh's default if present."""
    if conf := os.environ.get("SLURM_CONF"):
        return Path(conf)
    default = Path(os.environ.get("GPUPLAN_SLURM_DIR", "/tmp/gpuplan-slurm")) / "slurm.conf"
    return default if default.is_file() else None


def _env() -> dict[str, str]:
    env = dict(os.environ)
    if (conf := slurm_conf()) is not None:
        env["SLURM_CONF"] = str(conf)
    return env


def _run(args: list[str], *, timeout: float = 30, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=cwd, check=False)


@functools.cache
def slurm_available() -> bool:
    """True when sbatch is installed and the test cluster's slurmctld answers."""
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None or slurm_conf() is None:
        return False
    try:
        return _run(["scontrol", "ping"], timeout=15).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def require_slurm() -> None:
    """Skip the calling test without a Slurm; fail it instead when GPUPLAN_REQUIRE_SLURM=1 (CI)."""
    if slurm_available():
        return
    why = f"no Slurm to submit to (start one with tests/slurm/cluster-up.sh; SLURM_CONF={slurm_conf()})"
    if os.environ.get("GPUPLAN_REQUIRE_SLURM") == "1":
        pytest.fail(f"GPUPLAN_REQUIRE_SLURM=1 but {why}", pytrace=False)
    pytest.skip(why)


def _write_script(directory: Path, script_text: str) -> Path:
    script = directory / "job.sbatch"
    script.write_text(script_text)
    script.chmod(0o755)
    return script


def _job_id(stdout: str) -> str:
    # --parsable prints "jobid" or "jobid;cluster"
    job_id = stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise AssertionError(f"sbatch printed no job id: {stdout!r}")
    return job_id


def _rejected(result: subprocess.CompletedProcess[str]) -> NoReturn:
    raise AssertionError(f"sbatch rejected the script (exit {result.returncode}):\n{result.stderr.strip()}")


def sbatch_accepts(script_text: str) -> str:
    """Submit the script and return its job id if Slurm accepts it; AssertionError with sbatch's
    stderr if it is rejected. The job is submitted with --begin in an hour and cancelled at once,
    so nothing runs, but it is checked against the cluster like any job (GPU types and counts,
    nodes, CPUs, memory, partition, options). A script that itself says --hold skips that check.
    """
    with tempfile.TemporaryDirectory(prefix="gpuplan-sbatch-") as tmp:
        script = _write_script(Path(tmp), script_text)
        result = _run(["sbatch", "--parsable", f"--begin={_BEGIN}", str(script)], cwd=Path(tmp))
        if result.returncode != 0:
            _rejected(result)
        job_id = _job_id(result.stdout)
        _run(["scancel", job_id])
    return job_id


def _job_fields(job_id: str) -> dict[str, str]:
    result = _run(["scontrol", "show", "job", "--oneliner", job_id])
    if result.returncode != 0:
        return {}
    # "Key=Value Key=Value ..."; values have no spaces except a few we do not read (e.g. Command)
    return dict(re.findall(r"(\w+)=(\S*)", result.stdout))


def sbatch_run(script_text: str, timeout: float = 60) -> tuple[str, str]:
    """Submit the script, wait for the job to end and return (final state, its output file).

    For single-node scripts with a trivial command. The job runs in a temporary directory (relative
    --output paths land there). State is Slurm's, e.g. "COMPLETED", "FAILED", "TIMEOUT". Raises
    AssertionError if sbatch rejects the script or the job has not ended within `timeout` seconds
    (it is cancelled then).
    """
    with tempfile.TemporaryDirectory(prefix="gpuplan-sbatch-") as tmp:
        script = _write_script(Path(tmp), script_text)
        result = _run(["sbatch", "--parsable", str(script)], cwd=Path(tmp))
        if result.returncode != 0:
            _rejected(result)
        job_id = _job_id(result.stdout)
        deadline = time.monotonic() + timeout
        fields = _job_fields(job_id)
        while fields.get("JobState") not in _FINAL_STATES:
            if time.monotonic() > deadline:
                _run(["scancel", job_id])
                raise AssertionError(f"job {job_id} did not end within {timeout} s: {fields.get('JobState')}")
            time.sleep(0.2)
            fields = _job_fields(job_id)
        state = fields["JobState"]
        stdout = Path(fields.get("StdOut", ""))
        output = stdout.read_text(errors="replace") if stdout.is_file() else ""
    return state, output
