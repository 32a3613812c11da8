"""Submit sbatch scripts to the local test Slurm that tests/slurm/cluster-up.sh starts.

Only that cluster is used: the one SLURM_CONF names, or else the one under $GPUPLAN_SLURM_DIR
(default /tmp/gpuplan-slurm) if it is there, never a site Slurm picked up from /etc/slurm.
Nodes and GPU types: see cluster-up.sh (gres gpu:h100 and gpu:a100, 8 per node, on 4 nodes each;
gpu:l40s and gpu:l4 on one node each).

The accounting helpers (sacctmgr, restart_slurmctld, tres_minutes_used, ...) need a cluster
started with GPUPLAN_SLURM_ACCOUNTING=1 (slurmdbd: fair-share, billing weights, GrpTRESMins
budgets): call require_accounting() first, or get such a cluster from accounting_cluster(),
which starts one of its own when SLURM_CONF's has no accounting.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = [
    "ACCOUNTING_CLUSTER",
    "accounting_available",
    "accounting_cluster",
    "billing_weights",
    "job_info",
    "live_gpu_types",
    "require_accounting",
    "require_slurm",
    "restart_slurmctld",
    "sacctmgr",
    "sbatch_accepts",
    "sbatch_run",
    "sbatch_submit",
    "scancel",
    "slurm_available",
    "slurm_command",
    "slurm_conf",
    "tres_minutes_used",
    "wait_for_job",
]

# How far ahead sbatch_accepts sets --begin: long enough that the job never starts before it is
# cancelled. (Not --hold: a held job skips sbatch's feasibility check, so even an unknown GPU type
# would be "accepted".)
_BEGIN = "now+1hour"
_FINAL_STATES = frozenset(
    {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT"}
)
_SCRIPTS = Path(__file__).resolve().parents[1] / "slurm"
_MADE_BY = "tests/slurm/cluster-up.sh"  # in the first line of every slurm.conf that script writes

# The accounting cluster that accounting_cluster() starts (cluster-up.sh's environment, besides its
# directory and port): two GPU types, billed per GPU by type on their partitions and on `gpu`.
ACCOUNTING_CLUSTER = {
    "GPUPLAN_SLURM_ACCOUNTING": "1",
    "GPUPLAN_SLURM_GPUS": "a100:8:2 rtx3090:4:1",
    "GPUPLAN_SLURM_NODES": "4",
    "GPUPLAN_SLURM_BILLING": "gpu:CPU=0,GRES/gpu:a100=3.2,GRES/gpu:rtx3090=1.4"
    " a100:CPU=0,GRES/gpu:a100=3.2 rtx3090:CPU=0,GRES/gpu:rtx3090=1.4",
}
# Where: away from the default cluster's /tmp/gpuplan-slurm and ports 16817+ (and not a name that
# starts with it: cluster-up.sh tells its /etc/hosts lines apart by the directory as a prefix).
_ACCOUNTING_DIR = "/tmp/gpuplan-accounting-slurm"
_ACCOUNTING_PORT = "18817"


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


def _skip_or_fail(why: str) -> NoReturn:
    if os.environ.get("GPUPLAN_REQUIRE_SLURM") == "1":
        pytest.fail(f"GPUPLAN_REQUIRE_SLURM=1 but {why}", pytrace=False)
    pytest.skip(why)


def slurm_available() -> bool:
    """True when sbatch is installed and the test cluster's slurmctld answers."""
    conf = slurm_conf()
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None or conf is None or not conf.is_file():
        return False  # (scontrol retries a missing slurm.conf for a minute)
    return _answers(str(conf))


@functools.cache
def _answers(conf: str) -> bool:  # cached per cluster: the accounting tests switch SLURM_CONF
    try:
        return _run(["scontrol", "ping"], timeout=15).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def require_slurm() -> None:
    """Skip the calling test without a Slurm; fail it instead when GPUPLAN_REQUIRE_SLURM=1 (CI)."""
    if slurm_available():
        return
    _skip_or_fail(f"no Slurm to submit to (start one with tests/slurm/cluster-up.sh; SLURM_CONF={slurm_conf()})")


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


def sbatch_submit(script_text: str, *options: str) -> str:
    """Submit the script with extra sbatch options (they override its #SBATCH lines) and return the
    job id, without waiting: the caller waits (wait_for_job) and cancels (scancel). AssertionError
    with sbatch's stderr if it is rejected. The job runs in the temporary directory ($TMPDIR or
    /tmp); its output goes to /dev/null unless the script or the options say --output.
    """
    says_output = re.search(r"^#SBATCH\s+(-o|--output)\b", script_text, re.M) or any(
        o.startswith(("-o", "--output")) for o in options
    )
    output = [] if says_output else ["--output=/dev/null"]
    with tempfile.TemporaryDirectory(prefix="gpuplan-sbatch-") as tmp:
        script = _write_script(Path(tmp), script_text)
        args = ["sbatch", "--parsable", *output, *options, str(script)]
        result = _run(args, cwd=Path(tempfile.gettempdir()))
        if result.returncode != 0:
            _rejected(result)
    return _job_id(result.stdout)


def scancel(*job_ids: str) -> None:
    """Cancel the jobs (those already ended are left as they are)."""
    if job_ids:
        _run(["scancel", *job_ids])


# sacct's fields for a job that slurmctld has forgotten (MinJobAge), as scontrol names them
_SACCT_FIELDS = {
    "JobID": "JobId",
    "JobName": "JobName",
    "State": "JobState",
    "Reason": "Reason",
    "Partition": "Partition",
    "Account": "Account",
    "QOS": "QOS",
    "AllocTRES": "TRES",
    "ReqTRES": "ReqTRES",
    "NodeList": "NodeList",
    "Start": "StartTime",
    "End": "EndTime",
}


def job_info(job_id: str) -> dict[str, str]:
    """What Slurm says of a job, by scontrol's names (`scontrol show job -o`): JobState (PENDING,
    RUNNING, COMPLETED, ...), Reason (e.g. Resources, AssocGrpBillingMinutes), Partition,
    Account, NodeList, TRES (allocated, e.g. "cpu=1,mem=8000M,node=1,billing=16,gres/gpu=5,
    gres/gpu:a100=5"), ReqTRES, StdOut, ... A job slurmctld no longer holds (MinJobAge, 10 min)
    comes from sacct on an accounting cluster, with the fields of _SACCT_FIELDS (its Reason is the
    one slurmdbd was sent, often the first, not the last). {} if unknown.
    """
    result = _run(["scontrol", "show", "job", "--oneliner", job_id])
    if result.returncode == 0 and result.stdout.strip():
        # "Key=Value Key=Value ..."; values have no spaces except a few we do not read (e.g. Command)
        return dict(re.findall(r"(\w+)=(\S*)", result.stdout))
    result = _run(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", ",".join(_SACCT_FIELDS)])
    rows = [line.split("|") for line in result.stdout.splitlines()] if result.returncode == 0 else []
    for row in rows:
        if len(row) == len(_SACCT_FIELDS) and row[0] == job_id:
            info = dict(zip(_SACCT_FIELDS.values(), row, strict=True))
            info["JobState"] = info["JobState"].split()[0]  # "CANCELLED by 0"
            return info
    return {}


def wait_for_job(
    job_id: str, states: Iterable[str] = _FINAL_STATES, *, reason: str | None = None, timeout: float = 60
) -> dict[str, str]:
    """Wait until the job is in one of `states` (default: any final state) and, if given, pends or
    runs for `reason`; return its job_info. AssertionError after `timeout` seconds (the job is left
    as it is)."""
    wanted = frozenset(states)
    deadline = time.monotonic() + timeout
    info = job_info(job_id)
    while info.get("JobState") not in wanted or (reason is not None and info.get("Reason") != reason):
        if time.monotonic() > deadline:
            got = f"{info.get('JobState')} ({info.get('Reason')})"
            raise AssertionError(f"job {job_id} is {got} after {timeout} s, not {sorted(wanted)} ({reason})")
        time.sleep(0.2)
        info = job_info(job_id)
    return info


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
        try:
            fields = wait_for_job(job_id, timeout=timeout)
        except AssertionError as e:
            _run(["scancel", job_id])
            raise AssertionError(f"job {job_id} did not end within {timeout} s") from e
        state = fields["JobState"]
        stdout = Path(fields.get("StdOut", ""))
        output = stdout.read_text(errors="replace") if stdout.is_file() else ""
    return state, output


def slurm_command(*args: str, timeout: float = 30) -> str:
    """Run a Slurm client command (sinfo, squeue, sshare, sacct, scontrol, ...) against the test
    cluster and return its stdout; AssertionError with its stderr if it fails."""
    result = _run(list(args), timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed (exit {result.returncode}):\n{result.stderr.strip()}")
    return result.stdout


def live_gpu_types() -> dict[str, int]:
    """The GPU types that have a running node (sinfo hides the FUTURE ones), with GPUs per node."""
    types: dict[str, int] = {}
    for line in slurm_command("sinfo", "-h", "-N", "-o", "%G").splitlines():
        for gres in line.split(","):
            if m := re.fullmatch(r"gpu:([^:(]+):(\d+)(\(.*\))?", gres.strip()):
                types[m[1]] = max(types.get(m[1], 0), int(m[2]))
    return types


def billing_weights(partition: str) -> dict[str, float]:
    """A partition's TRESBillingWeights as {TRES as written: weight}, e.g. {"CPU": 0.0,
    "GRES/gpu:a100": 3.2}; {} when it has none (Slurm then bills a job its CPU count)."""
    out = slurm_command("scontrol", "show", "partition", "--oneliner", partition)
    m = re.search(r"\bTRESBillingWeights=(\S+)", out)
    if m is None or m[1] == "(null)":
        return {}
    weights = (item.partition("=") for item in m[1].split(","))
    return {name: float(value) for name, _, value in weights}


# --- accounting (cluster-up.sh with GPUPLAN_SLURM_ACCOUNTING=1) -----------------------------------


def accounting_available() -> bool:
    """True when the test cluster answers and stores its accounting in a slurmdbd that answers."""
    return slurm_available() and shutil.which("sacctmgr") is not None and _accounts(str(slurm_conf()))


@functools.cache
def _accounts(conf: str) -> bool:
    try:
        config = _run(["scontrol", "show", "config"], timeout=15)
        if not re.search(r"^AccountingStorageType\s*=\s*accounting_storage/slurmdbd$", config.stdout, re.M):
            return False
        clusters = _run(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"], timeout=15)
        return clusters.returncode == 0 and bool(clusters.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        return False


def require_accounting() -> None:
    """Skip the calling test unless the test cluster has accounting (slurmdbd) and this runs as root
    (sacctmgr's changes and restart_slurmctld need it); fail it instead when
    GPUPLAN_REQUIRE_SLURM=1."""
    require_slurm()
    if not accounting_available():
        _skip_or_fail(
            f"the Slurm at SLURM_CONF={slurm_conf()} has no accounting "
            "(start one with GPUPLAN_SLURM_ACCOUNTING=1 tests/slurm/cluster-up.sh)"
        )
    if os.geteuid() != 0:
        _skip_or_fail("the accounting tests change associations and restart slurmctld: run them as root")


def sacctmgr(*args: str) -> str:
    """Run `sacctmgr -i ARGS` (no confirmation) against the test cluster's slurmdbd; return its
    stdout. AssertionError if it fails, except for an add that finds everything there already
    ("Nothing new added", which sacctmgr reports with exit status 1)."""
    result = _run(["sacctmgr", "-i", *args])
    if result.returncode != 0 and "Nothing new added" not in result.stdout:
        output = (result.stdout + result.stderr).strip()
        raise AssertionError(f"sacctmgr {' '.join(args)} failed (exit {result.returncode}):\n{output}")
    return result.stdout


def tres_minutes_used(account: str, user: str = "") -> dict[str, int]:
    """The TRES minutes that slurmctld has charged to an association (the account's, or with
    `user` that user's in it), as GrpTRESMins limits count them: e.g. {"billing": 2, "gres/gpu": 0,
    ...}. A job's usage is charged every PriorityCalcPeriod (1 minute) and when slurmctld starts
    (restart_slurmctld)."""
    out = slurm_command("scontrol", "show", "assoc_mgr", f"accounts={account}", "flags=assoc")
    for record in re.split(r"\n(?=ClusterName=)", out):
        m = re.search(r"\bAccount=(\S+) UserName=(\S*)", record)
        if m and m[1] == account and m[2].split("(")[0] == user:
            tres = re.search(r"\bGrpTRESMins=(\S+)", record)
            used = re.findall(r"([^,=]+)=[^(,]*\((\d+)\)", tres[1]) if tres else []
            return {name: int(value) for name, value in used}
    raise AssertionError(f"slurmctld has no association account={account} user={user!r}:\n{out}")


def _own_conf() -> Path:
    conf = slurm_conf()
    if conf is None or not conf.is_file() or _MADE_BY not in conf.read_text(errors="replace").split("\n", 1)[0]:
        raise AssertionError(f"SLURM_CONF={conf} was not written by {_MADE_BY}: not restarting its slurmctld")
    return conf


def _setting(conf: Path, key: str) -> str:
    values = re.findall(rf"^\s*{key}\s*=\s*(\S+)", conf.read_text(errors="replace"), re.M | re.I)
    if not values:
        raise AssertionError(f"{conf} has no {key}")
    return str(values[-1])  # the last one wins, as in Slurm


def _pid_of(pid_file: Path, comm: str) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
        return pid if Path(f"/proc/{pid}/comm").read_text().strip() == comm else None
    except (OSError, ValueError):
        return None


def restart_slurmctld(timeout: float = 60) -> None:
    """Stop the test cluster's slurmctld (SIGTERM, by its pid file: it saves its state) and start
    it again from that state; return once `scontrol ping` answers. Only for a cluster that
    cluster-up.sh started; run as root. Jobs keep their ids and states, running ones keep running.
    On an accounting cluster, slurmctld's start also charges the usage of the jobs that ended since
    the last PriorityCalcPeriod (1 minute) to their associations (tres_minutes_used, sshare).
    """
    conf = _own_conf()
    pid_file = Path(_setting(conf, "SlurmctldPidFile"))
    deadline = time.monotonic() + timeout
    if (pid := _pid_of(pid_file, "slurmctld")) is not None:
        os.kill(pid, signal.SIGTERM)
        while _pid_of(pid_file, "slurmctld") == pid:
            if time.monotonic() > deadline:
                raise AssertionError(f"slurmctld ({pid}) did not stop within {timeout} s")
            time.sleep(0.1)
    _answers.cache_clear()
    slurmctld = shutil.which("slurmctld") or shutil.which("slurmctld", path="/usr/sbin:/sbin") or "slurmctld"
    started = subprocess.run(
        [slurmctld], env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False
    )
    while _run(["scontrol", "ping"], timeout=15).returncode != 0:
        if started.returncode != 0 or time.monotonic() > deadline:
            log = Path(_setting(conf, "SlurmctldLogFile"))
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:]) if log.is_file() else ""
            raise AssertionError(f"slurmctld did not come back (exit {started.returncode}):\n{started.stderr}{tail}")
        time.sleep(0.1)


def _start_problem() -> str | None:
    """Why accounting_cluster() cannot start a cluster here, or None."""
    if os.geteuid() != 0:
        return "starting an accounting cluster needs root"
    if shutil.which("bash") is None:
        return "no bash to run tests/slurm/cluster-up.sh"
    sbin = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    tools = ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "mariadb-install-db", "sacctmgr", "sbatch")
    if all(shutil.which(tool, path=sbin) for tool in tools):
        return None
    if shutil.which("apt-get", path=sbin) and os.environ.get("GPUPLAN_REQUIRE_SLURM") == "1":
        return None  # cluster-up.sh installs what is missing (as .ci/run has it do for slurm-wlm)
    return "slurmdbd and mariadb-server are not installed (cluster-up.sh installs them with GPUPLAN_REQUIRE_SLURM=1)"


def _cluster_script(name: str, env: dict[str, str], *args: str, timeout: float) -> tuple[int, str]:
    # output to a file, not a pipe: the daemons it starts must not hold our pipe open
    with tempfile.TemporaryFile("w+") as log:
        try:
            command = ["bash", str(_SCRIPTS / name), *args]
            done = subprocess.run(
                command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, timeout=timeout, check=False
            )
            rc = done.returncode
        except subprocess.TimeoutExpired:
            rc = 124
        log.seek(0)
        return rc, log.read()


@contextlib.contextmanager
def accounting_cluster() -> Iterator[Path]:
    """The slurm.conf of a test cluster with accounting, for the time of the `with`.

    SLURM_CONF's cluster when it has accounting (cluster-up.sh with GPUPLAN_SLURM_ACCOUNTING=1; it
    is left running). Otherwise, as root, it starts one of its own with cluster-up.sh, shaped as
    ACCOUNTING_CLUSTER, under $GPUPLAN_ACCOUNTING_SLURM_DIR (default /tmp/gpuplan-accounting-slurm)
    with slurmctld on $GPUPLAN_ACCOUNTING_SLURM_PORT (default 18817; slurmd, slurmdbd and MariaDB
    on the ports after it, see cluster-up.sh), and stops it afterwards. Missing packages are
    installed only when GPUPLAN_REQUIRE_SLURM=1 (CI). Skips the test (fails it when
    GPUPLAN_REQUIRE_SLURM=1) when there is no such cluster and none can be started.

    The helpers follow SLURM_CONF: set it to the path yielded while using them (monkeypatch.setenv).
    """
    if accounting_available():
        yield Path(str(slurm_conf()))
        return
    if (problem := _start_problem()) is not None:
        _skip_or_fail(f"no Slurm with accounting at SLURM_CONF={slurm_conf()}, and {problem}")
    directory = os.environ.get("GPUPLAN_ACCOUNTING_SLURM_DIR", _ACCOUNTING_DIR)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPLAN_SLURM_") and k != "SLURM_CONF"}
    env.update(ACCOUNTING_CLUSTER)
    env["GPUPLAN_SLURM_DIR"] = directory
    env["GPUPLAN_SLURM_PORT"] = os.environ.get("GPUPLAN_ACCOUNTING_SLURM_PORT", _ACCOUNTING_PORT)
    rc, log = _cluster_script("cluster-up.sh", env, timeout=900)  # a first package install included
    if rc != 0:
        tail = "\n".join(log.splitlines()[-30:])
        _cluster_script("cluster-down.sh", env, timeout=120)
        _skip_or_fail(f"tests/slurm/cluster-up.sh could not start an accounting cluster in {directory}:\n{tail}")
    try:
        yield Path(directory) / "slurm.conf"
    finally:
        _cluster_script("cluster-down.sh", env, timeout=120)
