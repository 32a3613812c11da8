"""Lab mode's faces on Slurm (`gpuplan lab slurm-config | submit | status`): the files Slurm reads
and the calls to it. What fits where and the allocation (`lab check | allocate`) are planned in
planner/lab_allocate.py and re-exported here for the CLI.

Slurm: the lab's inventory becomes gres.conf and slurm.conf lines (a partition per GPU type,
TRESBillingWeights from gpuplan's speed ratios so fair-share charges speed-normalised GPU-hours),
members become accounts with a fair-share and a monthly GPU-minute budget (GrpTRESMins on
billing), and each job one sbatch script on the GPU type its allocation gives it most of.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from gpuplan.errors import GpuplanError, InvalidSettingError
from gpuplan.interfaces.launch import fmt_time
from gpuplan.interfaces.quoting import comment, refuse_directives, sbatch_value, shell_line
from gpuplan.planner import lab as plan_lab
from gpuplan.planner.lab_allocate import (
    Loaded,
    allocate,
    allocate_loaded,
    check,
    lab_gres,
    load,
    option_record,
    refused_of,
)
from gpuplan.results import LabAllocation
from gpuplan.safeio import MAX_JSON_BYTES, clip, clip_repr, has_controls, load_json, read_capped, write_atomically
from gpuplan.specs.context import Context
from gpuplan.specs.lab import Job

__all__ = [
    "Loaded",
    "allocate",
    "allocate_loaded",
    "check",
    "lab_gres",
    "load",
    "option_record",
    "refused_of",
    "sbatch_script",
    "slurm_config",
    "status",
    "submit",
]

# sbatch --time: the estimate alone on the GPU type, with the margin launch files use
# (interfaces/launch.py: slow end x 1.15 + 15 min); here the estimate's validation range is not
# applied per type, so the margin is on the estimate itself: x 1.5 + 15 min.
TIME_MARGIN: Final = 1.5
TIME_PAD_S: Final = 15 * 60
STATE_FILE: Final = "submitted.json"  # what `lab submit` sent, for `lab status`


# --- Slurm ---------------------------------------------------------------------------------------


def _hostlist(names: Sequence[str]) -> str:
    return ",".join(names)


def slurm_config(path: str | Path, ctx: Context | None = None) -> dict[str, Any]:
    """`gpuplan lab slurm-config`: gres.conf, slurm.conf (nodes, partitions, accounting) and
    sacctmgr lines for the inventory, members and budgets."""
    ld = load(path, ctx)
    lab = ld.lab
    weights = plan_lab.speed_weights(lab, ld.options)
    inv = lab.inventory()
    gn = lab_gres(lab)
    gres = [
        f"NodeName={n.name} Name=gpu Type={gn[t]} File=/dev/nvidia[{start}-{start + c - 1}]"
        if c > 1
        else f"NodeName={n.name} Name=gpu Type={gn[t]} File=/dev/nvidia{start}"
        for n in lab.nodes
        for start, (t, c) in _offsets(n.gpus)
    ]
    # typed weights bill only requests that name the type; plain GRES/gpu on a one-type partition
    # bills untyped requests too (Slurm 22.05). Slurm rounds a job's billing down to an integer.
    billing = "CPU=0," + ",".join(f"GRES/gpu:{gn[t]}={weights[t]:.3g}" for t in inv)
    conf = [
        "# gpuplan lab slurm-config: nodes, partitions and fair-share for this lab",
        "GresTypes=gpu",
        # fair-share from the accounting database (slurm.conf: PriorityType, AccountingStorage*)
        "PriorityType=priority/multifactor",
        "PriorityWeightFairshare=100000",
        "PriorityWeightAge=1000",
        # GrpTRESMins is a hard monthly budget only when usage does not decay and is reset monthly
        # (slurm.conf man page, PriorityDecayHalfLife / PriorityUsageResetPeriod; resource_limits.html)
        "PriorityDecayHalfLife=0",
        "PriorityUsageResetPeriod=MONTHLY",
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageEnforce=associations,limits,qos,safe",
        "AccountingStorageTRES=gres/gpu," + ",".join(f"gres/gpu:{gn[t]}" for t in inv),
        "# CPUs= and RealMemory= as `slurmd -C` prints them on each node",
    ]
    conf += [f"NodeName={n.name} Gres=" + ",".join(f"gpu:{gn[t]}:{c}" for t, c in n.gpus.items())
             + " State=UNKNOWN" for n in lab.nodes]  # fmt: skip
    conf.append(f'PartitionName=gpu Nodes={_hostlist([n.name for n in lab.nodes])} Default=YES MaxTime=INFINITE '
                f'State=UP TRESBillingWeights="{billing}"')  # fmt: skip
    for t in inv:
        nodes = [n.name for n in lab.nodes if t in n.gpus]
        conf.append(f'PartitionName={gn[t]} Nodes={_hostlist(nodes)} MaxTime=INFINITE State=UP '
                    f'TRESBillingWeights="CPU=0,GRES/gpu={weights[t]:.3g}"')  # fmt: skip
    acct = ["sacctmgr -i add account lab Description=gpuplan-lab"]
    for m in lab.members:
        limit = ""
        if m.gpu_hours_per_month is not None:
            # billing minutes = speed-normalised GPU-minutes (the partition's TRESBillingWeights)
            limit = f" GrpTRESMins=billing={round(m.gpu_hours_per_month * 60)}"
        acct.append(shell_line(["sacctmgr", "-i", "add", "account", m.name, "parent=lab", f"Fairshare={m.share:g}",
                                *([limit.strip()] if limit else [])]))  # fmt: skip
        acct.append(shell_line(["sacctmgr", "-i", "add", "user", m.name, f"Account={m.name}"]))
    return {
        "gres_conf": "\n".join(gres) + "\n",
        "slurm_conf": "\n".join(conf) + "\n",
        "sacctmgr": "\n".join(acct) + "\n",
        "speed_weights": weights,
    }


def _offsets(gpus: Mapping[str, int]) -> list[tuple[int, tuple[str, int]]]:
    out, start = [], 0
    for t, c in gpus.items():
        out.append((start, (t, c)))
        start += c
    return out


def sbatch_script(job: Job, gpu: str, gres: str, num_gpus: int, hours: float, partition: str | None = None) -> str:
    """One job's sbatch script on `num_gpus` of `gpu` (GRES type `gres`, one node), with --time
    from the estimate."""
    lines = [
        "#!/bin/bash",
        comment(f"# gpuplan lab: {job.name} ({job.workload.model}, {job.workload.task}) on {num_gpus} x {gpu}"),
        f"# estimate alone on this type: {hours:.2f} h; --time = estimate x {TIME_MARGIN:g} + {TIME_PAD_S // 60} min",
        f"#SBATCH --job-name={sbatch_value(job.name, 'job name')}",
        f"#SBATCH --account={sbatch_value(job.owner, 'account')}",
        f"#SBATCH --partition={sbatch_value(partition or gres, '--partition')}",
        "#SBATCH --nodes=1",
        f"#SBATCH --gres=gpu:{sbatch_value(gres, 'GRES type')}:{num_gpus}",
        f"#SBATCH --time={fmt_time(hours * 3600 * TIME_MARGIN + TIME_PAD_S)}",
        f"#SBATCH --output={sbatch_value(job.name, 'job name')}-%j.out",
        # sbatch would also read "#PBS"/"#BSUB" lines anywhere in the script, after the #SBATCH ones
        # (Slurm's src/sbatch/xlate.c); --ignore-pbs (sbatch(1), Slurm 2.6 on) turns that off
        "#SBATCH --ignore-pbs",
        # sbatch reads #SBATCH lines only until "the first non-comment, non-whitespace line" (sbatch(1)):
        # this no-op (`:` does nothing and succeeds, POSIX's colon utility) ends the directive block,
        # so nothing in the job's own command can add one
        ": end of the directives gpuplan wrote",
    ]
    if job.command:
        lines.append(refuse_directives(job.command, f"job {job.name!r}"))
    else:
        lines.append(f"echo 'gpuplan lab: job {job.name} has no command in the lab file' >&2; exit 2")
    return "\n".join(lines) + "\n"


# How long one sbatch / squeue / sacct call may take before gpuplan gives up on it: Slurm's clients
# wait MessageTimeout (10 s by default, slurm.conf(5)) for slurmctld's answer, so a minute is far
# beyond a working controller.
SLURM_CALL_TIMEOUT_S: Final = 60.0
# A job id as `sbatch --parsable` prints it ("<id>[;<cluster>]", sbatch(1)) and squeue -j takes it:
# digits, with an array task (_N) or heterogeneous component (+N). An id from an edited record
# that is not one (say "--help") never reaches squeue's command line.
_JOB_ID: Final = re.compile(r"^[0-9]{1,20}(?:[_+][0-9]{1,10})?$")
_JOB_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # specs/lab.py's rule for a job's name
MAX_RECORD_JOBS: Final = 10_000  # jobs in one submitted.json (a lab file of 1,000 jobs is a large lab)
IDS_PER_CALL: Final = 500  # job ids per squeue / sacct call: far below the kernel's ARG_MAX (execve(2))
# What the record says of each job's sbatch: "in flight" is written just before the call, so a
# kill during it leaves the truth (sbatch ran; whether Slurm queued the job is unknown).
SBATCH_OUTCOMES: Final = ("not reached", "in flight", "submitted", "failed", "no answer")


def _write_new(folder: Path, name: str, text: str, force: bool) -> Path:
    """`text` as folder/name, created exclusively and never through a symlink (O_EXCL | O_NOFOLLOW);
    with `force`, an existing file is replaced by rename (the old name's target is never written)."""
    path = folder / name
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        if not force:
            raise GpuplanError(
                f"{clip_repr(str(path))} already exists; gpuplan does not overwrite a file it did not write. "
                "Pass another --out folder, or --force to replace it."
            ) from None
        _replace_atomically(path, text)
        return path
    except OSError as exc:
        raise GpuplanError(f"Cannot write {clip_repr(str(path))}: {exc.strerror or exc}.") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:  # a full disk: the half-written file is gpuplan's own, so it goes
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise GpuplanError(f"Cannot write {clip_repr(str(path))}: {exc.strerror or exc}.") from None
    return path


def _replace_atomically(path: Path, text: str) -> None:
    """safeio.write_atomically, durable (fsync of the file and its folder), or one line."""
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise GpuplanError(f"Cannot write {clip_repr(str(path))}: {exc.strerror or exc}.") from None


def _keep_earlier_record(state: Path) -> Path | None:
    """With --force into a folder an earlier `lab submit` used, its submitted.json (the only list of
    those jobs' ids) is kept as submitted-N.json, a name not yet taken, before the new record
    replaces it. A hard link when the file system has them, else an exclusive copy."""
    if state.is_symlink() or not state.is_file():
        return None  # a link is replaced by rename, its target never touched
    for n in range(1, 10_000):
        kept = state.with_name(f"{state.stem}-{n}{state.suffix}")
        try:
            os.link(state, kept, follow_symlinks=False)
            return kept
        except FileExistsError:
            continue
        except OSError:
            pass
        try:
            with open(state, "rb") as src:
                data = src.read(MAX_JSON_BYTES + 1)
            _write_new(state.parent, kept.name, data.decode("utf-8", "replace"), force=False)
            return kept
        except GpuplanError:
            if kept.exists() or kept.is_symlink():
                continue
            raise
        except OSError as exc:
            raise GpuplanError(
                f"Cannot keep the earlier {clip_repr(str(state))} as {kept.name}: {exc.strerror or exc}."
            ) from None
    raise GpuplanError(f"{clip_repr(str(state.parent))} holds 9,999 earlier records; pass another --out folder.")


def _out_folder(folder: Path, force: bool) -> None:
    """Create the output folder, or accept an empty one; a non-empty one only with --force."""
    try:
        if folder.is_symlink():
            raise GpuplanError(f"{clip_repr(str(folder))} is a symlink; pass a real folder with --out.")
        folder.mkdir(parents=True, exist_ok=True)
        if not folder.is_dir():
            raise GpuplanError(f"{clip_repr(str(folder))} is not a folder.")
        if any(folder.iterdir()) and not force:
            raise GpuplanError(
                f"{clip_repr(str(folder))} is not empty; gpuplan writes its scripts only into an empty folder so "
                "that nothing of yours is overwritten. Pass another --out folder, or --force."
            )
    except OSError as exc:
        raise GpuplanError(f"Cannot create {clip_repr(str(folder))}: {exc.strerror or exc}.") from None


def submit(
    path: str | Path,
    policy: str = "fair",
    out_dir: str | Path | None = None,
    dry_run: bool = False,
    per_type_partitions: bool = True,
    ctx: Context | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """`gpuplan lab submit`: one sbatch script per job on the GPU type its allocation gives it most
    time on (Slurm runs it there to completion), written to `out_dir`, then `sbatch` unless dry-run.
    Jobs that fit on no GPU type are refused before submission, with the reason.

    Nothing of the user's is overwritten: the folder must be empty (or `force`), each script is
    created exclusively, never through a symlink. submitted.json is rewritten atomically after
    every sbatch, so a kill, a timeout or a failure midway leaves a true record of what was sent
    (`complete` false, the jobs not reached listed) that `lab status` reads."""
    if policy not in ("fair", "makespan"):
        raise InvalidSettingError(
            f"`lab submit` places jobs by the fair or makespan policy (the cost policy rents cloud GPUs). Got {policy!r}."
        )
    ld = load(path, ctx)
    rec = allocate_loaded(ld, policy)
    folder = Path(out_dir) if out_dir else Path(path).parent / f"{Path(path).stem}-sbatch"
    sbatch = shutil.which("sbatch")
    if not dry_run:
        if sbatch is None:
            raise GpuplanError("No `sbatch` on PATH: run on a Slurm login node, or use --dry-run to write the scripts.")
        missing = [j.name for j in ld.lab.jobs if j.command is None and any(o.fits for o in ld.options[j.name])]
        if missing:
            raise InvalidSettingError(f"job {missing[0]!r} has no 'command' to run; add one to the lab file.")
    assert isinstance(rec, LabAllocation)  # fair or makespan: the cost policy was refused above
    scripts = _render_scripts(ld, rec, folder, per_type_partitions)
    _out_folder(folder, force)
    for entry, text in scripts:
        _write_new(folder, Path(entry["script"]).name, text, force)
    out = [entry for entry, _ in scripts]
    result: dict[str, Any] = {
        "policy": rec.policy,
        "dry_run": dry_run,
        "folder": str(folder),
        "complete": dry_run,
        "jobs": out,
        "refused": [r.to_dict() for r in rec.refused],
    }
    if dry_run:
        return result
    assert sbatch is not None
    state = folder / STATE_FILE
    if force:
        _keep_earlier_record(state)

    def save() -> None:  # after every change: a kill at any point leaves a true record
        _replace_atomically(state, json.dumps(result, indent=2))

    for entry in out:
        entry["sbatch"] = "not reached"
    save()  # the record exists before the first sbatch
    for entry in out:
        entry["sbatch"] = "in flight"
        save()
        _sbatch_one(sbatch, folder, entry, state, save)
        save()
    result["complete"] = True
    save()
    return result


def _render_scripts(
    ld: Loaded, rec: LabAllocation, folder: Path, per_type_partitions: bool
) -> list[tuple[dict[str, Any], str]]:
    """Every job's sbatch script and its record entry, all rendered (and checked) before anything
    is written."""
    by_name = {j.name: j for j in ld.lab.jobs}
    gn = lab_gres(ld.lab)
    scripts: list[tuple[dict[str, Any], str]] = []
    for a in rec.jobs:
        job = by_name[a.name]
        hours = a.hours_alone_on_gpu or 0.0
        text = sbatch_script(job, a.gpu, gn[a.gpu], a.num_gpus, hours, None if per_type_partitions else "gpu")
        entry: dict[str, Any] = {"name": job.name, "gpu": a.gpu, "gres": f"gpu:{gn[a.gpu]}:{a.num_gpus}",
                                 "estimate_s": hours * 3600, "script": str(folder / f"{job.name}.sbatch"),
                                 "job_id": None}  # fmt: skip
        scripts.append((entry, text))
    return scripts


def _sbatch_one(sbatch: str, folder: Path, entry: dict[str, Any], state: Path, save: Callable[[], None]) -> None:
    """`sbatch` one script; its outcome (and job id) go into `entry`. A hung or missing sbatch stops
    the submission with the record saved: what was sent before it stays recorded in `state`."""
    try:
        done = subprocess.run([sbatch, "--parsable", Path(entry["script"]).name], cwd=folder, capture_output=True,
                              text=True, check=False, timeout=SLURM_CALL_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        entry["sbatch"] = "no answer"
        entry["error"] = [f"sbatch gave no answer in {SLURM_CALL_TIMEOUT_S:g} s; the job may or may not be queued"]
        save()
        raise GpuplanError(
            f"sbatch gave no answer in {SLURM_CALL_TIMEOUT_S:g} s for job {entry['name']!r} (is slurmctld up?); "
            f"stopped there. What was submitted before it is recorded in {clip_repr(str(state))}."
        ) from None
    except OSError as exc:  # sbatch vanished or cannot be executed: every later call would fail too
        entry["sbatch"] = "failed"
        entry["error"] = [clip(f"sbatch could not be run: {exc.strerror or exc}")]
        save()
        raise GpuplanError(
            f"Cannot run {clip_repr(sbatch)}: {exc.strerror or exc}; stopped at job {entry['name']!r}. "
            f"What was submitted before it is recorded in {clip_repr(str(state))}."
        ) from None
    answer = (done.stdout or "").strip().splitlines()
    if done.returncode != 0:
        lines = (done.stderr or done.stdout or "").strip().splitlines()
        entry["sbatch"] = "failed"
        entry["error"] = [clip(lines[-1])] if lines else [f"sbatch failed (exit code {done.returncode})"]
    else:
        entry["sbatch"] = "submitted"
        job_id = answer[0].split(";")[0].strip() if answer else ""
        if _JOB_ID.match(job_id):
            entry["job_id"] = job_id
        else:  # queued (exit 0), but with no id to follow it by: said so, not guessed
            entry["error"] = [f"sbatch printed no job id ({clip_repr(done.stdout or '')}); find the job by name"]


def _record(data: Any, name: str) -> tuple[list[dict[str, Any]], bool]:
    """The jobs of a submitted.json and whether the submission completed, checked field by field:
    one line naming the first thing that is not what `lab submit` writes (an edited or foreign file)."""
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise InvalidSettingError(f"{clip(name)} is not what `gpuplan lab submit` writes (no 'jobs' list).")
    complete = data.get("complete", True)
    if not isinstance(complete, bool):
        raise InvalidSettingError(f"{clip(name)}: 'complete' must be true or false. Got {clip_repr(complete)}.")
    if len(data["jobs"]) > MAX_RECORD_JOBS:
        raise InvalidSettingError(
            f"{clip(name)} lists {len(data['jobs']):,} jobs, over the limit of {MAX_RECORD_JOBS:,}. Was the file edited?"
        )
    jobs: list[dict[str, Any]] = []
    for i, j in enumerate(data["jobs"]):
        where = f"{clip(name)}: job {i + 1}"
        if not isinstance(j, dict):
            raise InvalidSettingError(f"{where} is not a mapping. Was the file edited?")
        problem = _record_problem(j)
        if problem:
            raise InvalidSettingError(f"{where}: {problem} (as `gpuplan lab submit` writes it). Was the file edited?")
        job_id = j.get("job_id")
        jobs.append({**j, "job_id": None if job_id is None else str(job_id)})
    return jobs, complete


def _record_problem(j: Mapping[str, Any]) -> str | None:
    """What is wrong with one job of a record, or None."""
    name, job_id, est, outcome, error = (j.get(k) for k in ("name", "job_id", "estimate_s", "sbatch", "error"))
    if not isinstance(name, str) or not _JOB_NAME.match(name):
        return f"'name' must be a job name (1-64 letters, digits, '.', '_', '-'); got {clip_repr(name)}"
    for key in ("gpu", "gres"):
        v = j.get(key)
        if not isinstance(v, str) or not v or len(v) > 200 or has_controls(v):
            return f"{key!r} must be a short line of text; got {clip_repr(v)}"
    if isinstance(est, bool) or not isinstance(est, int | float) or not 0 <= est <= 1e10:
        return f"'estimate_s' must be seconds (0 to 1e10); got {clip_repr(est)}"
    if isinstance(job_id, bool) or not (
        job_id is None
        or (isinstance(job_id, int) and 0 < job_id < 2**63)
        or (isinstance(job_id, str) and _JOB_ID.match(job_id))
    ):
        return f"'job_id' must be a Slurm job id or null; got {clip_repr(job_id)}"
    if outcome is not None and outcome not in SBATCH_OUTCOMES:
        return f"'sbatch' must be one of {', '.join(SBATCH_OUTCOMES)}; got {clip_repr(outcome)}"
    if error is not None and not (isinstance(error, list) and all(isinstance(e, str) for e in error)):
        return f"'error' must be a list of lines; got {clip_repr(error)}"
    return None


def _unsent_state(j: Mapping[str, Any]) -> tuple[str, str | None]:
    """State and reason of a recorded job with no id: never sent, refused by sbatch, or unknown
    (sbatch was running when gpuplan stopped, or gave no answer). Records written before the
    `sbatch` field existed say it by their error alone."""
    error = "; ".join(j.get("error") or [])
    outcome = j.get("sbatch") or ("failed" if error else "not reached")
    if outcome in ("in flight", "no answer"):
        why = clip(error or "sbatch was running when gpuplan stopped")
        return "UNKNOWN", f"{why}; look for the job by name in squeue"
    if outcome == "submitted":
        return "UNKNOWN", clip(error or "sbatch printed no job id")
    if outcome == "failed":
        return "NOT SUBMITTED", "sbatch failed: " + clip(error)
    return "NOT SUBMITTED", "the submission stopped before this job"


def status(folder: str | Path) -> dict[str, Any]:
    """`gpuplan lab status`: what `lab submit` sent (its folder's submitted.json, complete or cut
    short), with each job's state and elapsed time from squeue / sacct against its estimate."""
    state = Path(folder) / STATE_FILE
    if Path(folder).is_file():
        state = Path(folder)
    if not state.exists() and not state.is_symlink():
        raise InvalidSettingError(
            f"No {STATE_FILE} in {clip_repr(str(folder))}: pass the folder `gpuplan lab submit` wrote."
        )
    text = read_capped(state, STATE_FILE, MAX_JSON_BYTES)
    data = load_json(text, state.name)
    jobs, complete = _record(data, state.name)
    info = _slurm_jobs([j["job_id"] for j in jobs if j["job_id"]])
    rows = []
    for j in jobs:
        s = info.get(j["job_id"], {}) if j["job_id"] else {}
        elapsed = s.get("elapsed_s")
        if j["job_id"]:
            st, reason = s.get("state", "UNKNOWN"), s.get("reason")
        else:
            st, reason = _unsent_state(j)
        rows.append(
            {
                "name": j["name"],
                "job_id": j["job_id"],
                "gpu": j["gpu"],
                "gres": j["gres"],
                "state": st,
                "reason": reason,
                "elapsed_s": elapsed,
                "estimate_s": j["estimate_s"],
                "progress": (elapsed / j["estimate_s"]) if elapsed is not None and j["estimate_s"] else None,
            }
        )
    return {"folder": str(Path(state).parent), "complete": complete, "jobs": rows}


def _seconds(text: str) -> float | None:
    """Slurm's [D-]HH:MM:SS / MM:SS elapsed time in seconds."""
    m = re.match(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$", text.strip())
    if not m:
        return None
    d, h, mi, s = (int(x) if x else 0 for x in m.groups())
    return float(((d * 24 + h) * 60 + mi) * 60 + s)


def _slurm_call(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """squeue / sacct with a timeout: a hung controller is one line, not a wait without end."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=SLURM_CALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise GpuplanError(
            f"{Path(argv[0]).name} gave no answer in {SLURM_CALL_TIMEOUT_S:g} s (is slurmctld up?)."
        ) from None
    except OSError as exc:
        raise GpuplanError(f"Cannot run {clip_repr(argv[0])}: {exc.strerror or exc}.") from None


def _slurm_jobs(ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """State, reason and elapsed time of job ids: squeue for queued/running, sacct for the rest."""
    out: dict[str, dict[str, Any]] = {}
    ids = [i for i in dict.fromkeys(ids) if _JOB_ID.match(i)]  # once each; never an option-like word
    if not ids:
        return out
    squeue = shutil.which("squeue")
    if squeue is None:
        raise GpuplanError("No `squeue` on PATH: run `gpuplan lab status` on a Slurm login node.")
    for k in range(0, len(ids), IDS_PER_CALL):
        q = _slurm_call([squeue, "-h", "-j", ",".join(ids[k : k + IDS_PER_CALL]), "-o", "%i|%T|%M|%r"])
        for line in q.stdout.splitlines():
            parts = line.split("|")
            if len(parts) == 4:
                out[parts[0]] = {"state": parts[1], "elapsed_s": _seconds(parts[2]), "reason": parts[3]}
    rest = [i for i in ids if i not in out]
    sacct = shutil.which("sacct")
    for k in range(0, len(rest) if sacct else 0, IDS_PER_CALL):
        chunk = ",".join(rest[k : k + IDS_PER_CALL])
        a = _slurm_call([str(sacct), "-n", "-P", "-X", "-j", chunk, "--format=JobID,State,Elapsed"])
        for line in a.stdout.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[1].split():
                out[parts[0]] = {"state": parts[1].split()[0], "elapsed_s": _seconds(parts[2]), "reason": None}
    return out
