"""Lab mode's user actions (`gpuplan lab check | allocate | slurm-config | submit | status`), as
plain JSON-ready records; the CLI prints them. The arithmetic is in planner/lab.py.

Slurm: the lab's inventory becomes gres.conf and slurm.conf lines (a partition per GPU type,
TRESBillingWeights from gpuplan's speed ratios so fair-share charges speed-normalised GPU-hours),
members become accounts with a fair-share and a monthly GPU-minute budget (GrpTRESMins on
billing), and each job one sbatch script on the GPU type its allocation gives it most of.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gpuplan.errors import GpuplanError, InvalidSettingError
from gpuplan.interfaces import api
from gpuplan.interfaces.launch import fmt_time, gres_name
from gpuplan.interfaces.quoting import comment, refuse_directives, sbatch_value, shell_line
from gpuplan.planner import lab as plan_lab
from gpuplan.planner.lab import JobOption, Schedule
from gpuplan.safeio import MAX_JSON_BYTES, clip, clip_repr, load_json, read_capped
from gpuplan.specs.lab import Job, Lab, read_lab_file
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.models import load_model

# sbatch --time: the estimate alone on the GPU type, with the margin launch files use
# (interfaces/launch.py: slow end x 1.15 + 15 min); here the estimate's validation range is not
# applied per type, so the margin is on the estimate itself: x 1.5 + 15 min.
TIME_MARGIN: Final = 1.5
TIME_PAD_S: Final = 15 * 60
STATE_FILE: Final = "submitted.json"  # what `lab submit` sent, for `lab status`


@dataclass(frozen=True)
class Loaded:
    lab: Lab
    models: dict[str, ModelSpec]
    options: dict[str, list[JobOption]]


def lab_gres(lab: Lab) -> dict[str, str]:
    """GRES type per lab GPU type (launch.gres_name), with the memory appended where two of the
    lab's types would share a name (A100 40GB and 80GB: "a100_40g", "a100_80g")."""
    base = {t: gres_name(t) for t in lab.inventory()}
    out = {}
    for t, g in base.items():
        twins = [u for u, h in base.items() if h == g]
        out[t] = g if len(twins) == 1 else f"{g}_{round(lab.gpus[t].memory_bytes / 2**30)}g"  # the "40GB" of the name
    return out


def load(path: str | Path, catalog_files: Iterable[str | Path] = ()) -> Loaded:
    cat = api.catalog(catalog_files)
    lab = read_lab_file(path, cat)
    models: dict[str, ModelSpec] = {}
    for j in lab.jobs:
        try:
            models[j.name] = load_model(j.workload.model)
        except GpuplanError as exc:
            raise type(exc)(f"job {j.name!r}: {exc}") from None
    return Loaded(lab, models, plan_lab.job_options(lab, models))


# --- check ---------------------------------------------------------------------------------------


def option_record(o: JobOption) -> dict[str, Any]:
    return {
        "gpu": o.gpu,
        "fits": o.fits,
        "num_gpus": o.num_gpus,
        "hours": o.hours,
        "tokens_per_s": o.tokens_per_s,
        "layout": o.layout,
        "reason": o.reason,
    }


def check(path: str | Path, catalog_files: Iterable[str | Path] = ()) -> dict[str, Any]:
    """`gpuplan lab check`: per job, on each of the lab's GPU types, whether it fits, on how many
    GPUs, and the hours to finish alone (0 throughput where it does not fit)."""
    ld = load(path, catalog_files)
    inv = ld.lab.inventory()
    gn = lab_gres(ld.lab)
    return {
        "inventory": [{"gpu": t, "count": c, "gres": gn[t], "per_node": ld.lab.per_node(t)} for t, c in inv.items()],
        "jobs": [
            {
                "name": j.name,
                "owner": j.owner,
                "model": ld.models[j.name].name,
                "task": j.workload.task,
                "tokens": plan_lab.work_tokens(j),
                "fits_anywhere": any(o.fits for o in ld.options[j.name]),
                "options": [option_record(o) for o in ld.options[j.name]],
            }
            for j in ld.lab.jobs
        ],
        "speed_weights": plan_lab.speed_weights(ld.lab, ld.options),
    }


# --- allocate ------------------------------------------------------------------------------------


def refused_of(ld: Loaded) -> list[dict[str, Any]]:
    """Jobs that fit on none of the lab's GPU types, with each type's reason."""
    return [
        {"name": j.name, "owner": j.owner, "reasons": {o.gpu: o.reason for o in ld.options[j.name]}}
        for j in ld.lab.jobs
        if not any(o.fits for o in ld.options[j.name])
    ]


def _job_weights(lab: Lab) -> dict[str, float]:
    """A member's share split evenly over the member's jobs (Gavel's weights per job)."""
    count = {m.name: sum(1 for j in lab.jobs if j.owner == m.name) for m in lab.members}
    return {j.name: lab.member(j.owner).share / count[j.owner] for j in lab.jobs}


def _main_type(sched: Schedule, job: str) -> tuple[str, int, dict[str, float]]:
    """The type a job spends most GPU-time on, its count there, and its share of time by type."""
    by_type: dict[str, float] = {}
    gpus: dict[str, int] = {}
    for s in sched.segments:
        if s.job == job:
            by_type[s.gpu] = by_type.get(s.gpu, 0.0) + s.share * (s.end_s - s.start_s)
            gpus[s.gpu] = s.num_gpus
    total = sum(by_type.values()) or 1.0
    main = max(by_type, key=lambda t: by_type[t])
    return main, gpus[main], {t: v / total for t, v in by_type.items()}


def _gpu_hours(sched: Schedule, jobs: Sequence[Job], weights: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """Member -> (GPU-hours, speed-normalised GPU-hours) used by the schedule."""
    owner = {j.name: j.owner for j in jobs}
    out: dict[str, list[float]] = {}
    for s in sched.segments:
        h = s.share * s.num_gpus * (s.end_s - s.start_s) / 3600
        acc = out.setdefault(owner[s.job], [0.0, 0.0])
        acc[0] += h
        acc[1] += h * weights.get(s.gpu, 1.0)
    return {m: (v[0], v[1]) for m, v in out.items()}


def _schedule_record(s: Schedule) -> dict[str, Any]:
    return {"average_jct_s": s.average_jct_s, "makespan_s": s.makespan_s, "finish_s": s.finish_s}


def allocate(
    path: str | Path,
    policy: str = "fair",
    catalog_files: Iterable[str | Path] = (),
    burst: bool = True,
    spot: bool = False,
) -> dict[str, Any]:
    """`gpuplan lab allocate`: a heterogeneity-aware allocation (planner/lab.py) with each job's
    type, count and expected finish, each member's GPU-hours, and the gain over an equal split
    and over first-come-first-served."""
    return allocate_loaded(load(path, catalog_files), policy, burst, spot)


def allocate_loaded(ld: Loaded, policy: str = "fair", burst: bool = True, spot: bool = False) -> dict[str, Any]:
    """`allocate` of a lab already loaded (its throughput matrix computed)."""
    if policy not in plan_lab.POLICIES:
        raise InvalidSettingError(
            f"The 'policy' parameter must be one of {', '.join(plan_lab.POLICIES)}. Got {policy!r}."
        )
    lab = ld.lab
    types = list(lab.inventory())
    weights = plan_lab.speed_weights(lab, ld.options)
    runnable = [j for j in lab.jobs if any(o.fits for o in ld.options[j.name])]
    refused = refused_of(ld)
    if not runnable:
        raise InvalidSettingError("No job fits on any of the lab's GPU types; see `gpuplan lab check`.")
    jw = _job_weights(lab)
    equal = plan_lab.simulate(runnable, types, lab.inventory(), ld.options, "equal")
    fcfs = plan_lab.simulate(runnable, types, lab.inventory(), ld.options, "fcfs")
    out: dict[str, Any] = {"policy": policy, "speed_weights": weights, "refused": refused}
    if policy == "cost":
        return out | _cost(ld, types, equal, fcfs, burst, spot)
    ours = plan_lab.simulate(runnable, types, lab.inventory(), ld.options, policy, jw)
    jobs = []
    for j in runnable:
        main, n, shares = _main_type(ours, j.name)
        alone = next(o for o in ld.options[j.name] if o.gpu == main)
        jobs.append(
            {
                "name": j.name,
                "owner": j.owner,
                "gpu": main,
                "num_gpus": n,
                "time_shares": shares,
                "expected_finish_s": ours.finish_s[j.name],
                "hours_alone_on_gpu": alone.hours,
                "deadline_s": j.workload.deadline,
                "meets_deadline": None
                if j.workload.deadline is None
                else bool(ours.finish_s[j.name] <= j.workload.deadline),
            }
        )
    metric = "makespan_s" if policy == "makespan" else "average_jct_s"
    out |= {
        "jobs": jobs,
        "members": _members(lab, ours, weights),
        "schedule": _schedule_record(ours),
        "equal_split": _schedule_record(equal),
        "fcfs": _schedule_record(fcfs),
        "metric": metric,
        "gain_vs_equal_split": getattr(equal, metric) / getattr(ours, metric),
        "gain_vs_fcfs": getattr(fcfs, metric) / getattr(ours, metric),
        "segments": [s.__dict__ for s in ours.segments],
    }
    return out


def _members(lab: Lab, sched: Schedule, weights: Mapping[str, float]) -> list[dict[str, Any]]:
    used = _gpu_hours(sched, lab.jobs, weights)
    rows = []
    for m in lab.members:
        raw, norm = used.get(m.name, (0.0, 0.0))
        rows.append(
            {
                "name": m.name,
                "share": m.share,
                "gpu_hours": raw,
                "normalised_gpu_hours": norm,
                "budget_gpu_hours_per_month": m.gpu_hours_per_month,
                "over_budget": None if m.gpu_hours_per_month is None else bool(norm > m.gpu_hours_per_month),
            }
        )
    return rows


def _cost(ld: Loaded, types: Sequence[str], equal: Schedule, fcfs: Schedule, burst: bool, spot: bool) -> dict[str, Any]:
    """The cost policy: the least cloud spend that meets every deadline (horizon: 30 days). With
    bursting, a job too big for the lab runs on rented GPUs (up to 8 per instance) instead of
    being refused."""
    lab = ld.lab
    cloud: dict[str, tuple[float, dict[str, JobOption]]] = {}
    if burst:
        cat = api.catalog()
        for name, price in api.prices(spot=spot).items():
            gpu = cat.get(name)
            opts = {j.name: plan_lab.job_option(ld.models[j.name], j, gpu, 8) for j in lab.jobs}
            if any(o.fits for o in opts.values()):
                cloud[name] = (price.usd_per_hour, opts)
    in_cloud = {j for _, opts in cloud.values() for j, o in opts.items() if o.fits}
    runnable = [j for j in lab.jobs if any(o.fits for o in ld.options[j.name]) or j.name in in_cloud]
    seconds, usd = plan_lab.solve_cost(runnable, types, lab.inventory(), ld.options, cloud)

    def baseline(s: Schedule) -> float:
        """Cloud spend to rescue, on each job's cheapest cloud type, the work a schedule leaves
        undone at the job's deadline (the horizon where it has none)."""
        total = 0.0
        for j in runnable:
            limit = j.workload.deadline or plan_lab.HORIZON_S
            if s.finish_s.get(j.name, math.inf) <= limit:
                continue
            rate = {o.gpu: o.tokens_per_s for o in ld.options[j.name]}
            done = sum(x.share * rate[x.gpu] * max(0.0, min(x.end_s, limit) - x.start_s)
                       for x in s.segments if x.job == j.name)  # fmt: skip
            left = max(plan_lab.work_tokens(j) - done, 0.0)
            costs = [p * o.num_gpus * left / o.tokens_per_s / 3600
                     for p, opts in cloud.values() for o in [opts[j.name]] if o.fits]  # fmt: skip
            total += min(costs) if costs else float("nan")
        return total

    eq_usd, fcfs_usd = baseline(equal), baseline(fcfs)
    jobs = []
    for j in runnable:
        by = seconds.get(j.name, {})
        main = max(by, key=lambda t: by[t]) if by else types[0]
        opts = {o.gpu: o for o in ld.options[j.name]}
        n = (
            opts[main].num_gpus
            if main in opts and opts[main].fits
            else cloud[main.removeprefix("cloud:")][1][j.name].num_gpus
        )
        jobs.append(
            {
                "name": j.name,
                "owner": j.owner,
                "gpu": main,
                "num_gpus": n,
                "seconds_by_type": by,
                "expected_finish_s": sum(by.values()),
                "deadline_s": j.workload.deadline or plan_lab.HORIZON_S,
            }
        )
    return {
        "jobs": jobs,
        "refused": [r for r in refused_of(ld) if r["name"] not in {j.name for j in runnable}],
        "cloud_usd": usd,
        "equal_split": {"cloud_usd": eq_usd, **_schedule_record(equal)},
        "fcfs": {"cloud_usd": fcfs_usd, **_schedule_record(fcfs)},
        "metric": "cloud_usd",
        "gain_vs_equal_split": (eq_usd / usd) if usd > 0 else (None if eq_usd > 0 else 1.0),
        "gain_vs_fcfs": (fcfs_usd / usd) if usd > 0 else (None if fcfs_usd > 0 else 1.0),
        "horizon_s": plan_lab.HORIZON_S,
        "spot": spot,
    }


# --- Slurm ---------------------------------------------------------------------------------------


def _hostlist(names: Sequence[str]) -> str:
    return ",".join(names)


def slurm_config(path: str | Path, catalog_files: Iterable[str | Path] = ()) -> dict[str, Any]:
    """`gpuplan lab slurm-config`: gres.conf, slurm.conf (nodes, partitions, accounting) and
    sacctmgr lines for the inventory, members and budgets."""
    ld = load(path, catalog_files)
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
        f"#SBATCH --output={job.name}-%j.out",
        # sbatch reads #SBATCH lines only "before any executable commands" (sbatch(1)): this no-op
        # ends the directive block, so nothing in the job's own command can add one
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
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def _replace_atomically(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, flush it to disk, then rename it over `path`
    (rename replaces the name, never writes through a symlink: rename(2)); a crash leaves the old
    file or the new one, never half of one."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise GpuplanError(f"Cannot write {clip_repr(str(path))}: {exc.strerror or exc}.") from None


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
    catalog_files: Iterable[str | Path] = (),
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
    ld = load(path, catalog_files)
    rec = allocate_loaded(ld, policy)
    folder = Path(out_dir) if out_dir else Path(path).parent / f"{Path(path).stem}-sbatch"
    sbatch = shutil.which("sbatch")
    if not dry_run:
        if sbatch is None:
            raise GpuplanError("No `sbatch` on PATH: run on a Slurm login node, or use --dry-run to write the scripts.")
        missing = [j.name for j in ld.lab.jobs if j.command is None and any(o.fits for o in ld.options[j.name])]
        if missing:
            raise InvalidSettingError(f"job {missing[0]!r} has no 'command' to run; add one to the lab file.")
    by_name = {j.name: j for j in ld.lab.jobs}
    gn = lab_gres(ld.lab)
    scripts: list[tuple[dict[str, Any], str]] = []
    for a in rec["jobs"]:  # every script rendered (and checked) before anything is written
        job = by_name[a["name"]]
        hours = a["hours_alone_on_gpu"]
        text = sbatch_script(job, a["gpu"], gn[a["gpu"]], a["num_gpus"], hours, None if per_type_partitions else "gpu")
        entry: dict[str, Any] = {"name": job.name, "gpu": a["gpu"], "gres": f"gpu:{gn[a['gpu']]}:{a['num_gpus']}",
                                 "estimate_s": hours * 3600, "script": str(folder / f"{job.name}.sbatch"),
                                 "job_id": None}  # fmt: skip
        scripts.append((entry, text))
    _out_folder(folder, force)
    for entry, text in scripts:
        _write_new(folder, Path(entry["script"]).name, text, force)
    out = [entry for entry, _ in scripts]
    result: dict[str, Any] = {
        "policy": rec["policy"],
        "dry_run": dry_run,
        "folder": str(folder),
        "complete": dry_run,
        "jobs": out,
        "refused": rec["refused"],
    }
    if dry_run:
        return result
    assert sbatch is not None
    state = folder / STATE_FILE
    _replace_atomically(state, json.dumps(result, indent=2))  # the record exists before the first sbatch
    for entry in out:
        try:
            done = subprocess.run([sbatch, "--parsable", Path(entry["script"]).name], cwd=folder, capture_output=True,
                                  text=True, check=False, timeout=SLURM_CALL_TIMEOUT_S)  # fmt: skip
        except subprocess.TimeoutExpired:
            entry["error"] = [f"sbatch gave no answer in {SLURM_CALL_TIMEOUT_S:g} s"]
            _replace_atomically(state, json.dumps(result, indent=2))
            raise GpuplanError(
                f"sbatch gave no answer in {SLURM_CALL_TIMEOUT_S:g} s for job {entry['name']!r} (is slurmctld up?); "
                f"stopped there. What was submitted before it is recorded in {clip_repr(str(state))}."
            ) from None
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            entry["error"] = [clip(lines[-1])] if lines else ["sbatch failed"]
        else:
            entry["job_id"] = clip(done.stdout.strip().split(";")[0], 40)
        _replace_atomically(state, json.dumps(result, indent=2))  # after EACH sbatch: a true record
    result["complete"] = True
    _replace_atomically(state, json.dumps(result, indent=2))
    return result


def _record(data: Any, name: str) -> list[dict[str, Any]]:
    """The jobs of a submitted.json, checked: one line for a file of the wrong shape."""
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise InvalidSettingError(f"{name} is not what `gpuplan lab submit` writes (no 'jobs' list).")
    jobs: list[dict[str, Any]] = []
    for i, j in enumerate(data["jobs"]):
        ok = (
            isinstance(j, dict)
            and isinstance(j.get("name"), str)
            and isinstance(j.get("gpu"), str)
            and isinstance(j.get("gres"), str)
            and isinstance(j.get("estimate_s"), int | float)
            and not isinstance(j.get("estimate_s"), bool)
            and (j.get("job_id") is None or isinstance(j.get("job_id"), str | int))
        )
        if not ok:
            raise InvalidSettingError(
                f"{name}: job {i + 1} is not what `gpuplan lab submit` writes (it needs name, gpu, gres, estimate_s "
                "and job_id). Was the file edited?"
            )
        jobs.append(j)
    return jobs


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
    jobs = _record(data, state.name)
    ids = [str(j["job_id"]) for j in jobs if j.get("job_id")]
    info = _slurm_jobs(ids)
    rows = []
    for j in jobs:
        s = info.get(str(j.get("job_id")), {})
        elapsed = s.get("elapsed_s")
        rows.append(
            {
                "name": j["name"],
                "job_id": j.get("job_id"),
                "gpu": j["gpu"],
                "gres": j["gres"],
                "state": s.get("state", "UNKNOWN" if j.get("job_id") else "NOT SUBMITTED"),
                "reason": s.get("reason"),
                "elapsed_s": elapsed,
                "estimate_s": j["estimate_s"],
                "progress": (elapsed / j["estimate_s"]) if elapsed is not None and j["estimate_s"] else None,
            }
        )
    return {"folder": str(Path(state).parent), "complete": bool(data.get("complete", True)), "jobs": rows}


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


def _slurm_jobs(ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """State, reason and elapsed time of job ids: squeue for queued/running, sacct for the rest."""
    out: dict[str, dict[str, Any]] = {}
    if not ids:
        return out
    squeue = shutil.which("squeue")
    if squeue is None:
        raise GpuplanError("No `squeue` on PATH: run `gpuplan lab status` on a Slurm login node.")
    q = _slurm_call([squeue, "-h", "-j", ",".join(ids), "-o", "%i|%T|%M|%r"])
    for line in q.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 4:
            out[parts[0]] = {"state": parts[1], "elapsed_s": _seconds(parts[2]), "reason": parts[3]}
    rest = [i for i in ids if i not in out]
    sacct = shutil.which("sacct")
    if rest and sacct:
        a = _slurm_call([sacct, "-n", "-P", "-X", "-j", ",".join(rest), "--format=JobID,State,Elapsed"])
        for line in a.stdout.splitlines():
            parts = line.split("|")
            if len(parts) == 3:
                out[parts[0]] = {"state": parts[1].split()[0], "elapsed_s": _seconds(parts[2]), "reason": None}
    return out
