"""`lab`: share a mixed GPU pool fairly, on Slurm."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuplan.errors import GpuplanError
from gpuplan.interfaces.cli.common import (
    CatalogOpt,
    JsonOpt,
    PricesOpt,
    app,
    console,
    emit_json,
    fmt_dur,
)

# --- lab mode ----------------------------------------------------------------------------------

lab_app = typer.Typer(help="Lab mode: share a mixed GPU pool fairly, on Slurm.", no_args_is_help=True)
app.add_typer(lab_app, name="lab")
LabFile = Annotated[Path, typer.Argument(help="The lab file (YAML: nodes, members, jobs).")]
PolicyOpt = Annotated[str, typer.Option("--policy", help="fair | makespan | cost")]


@lab_app.command("check")
def lab_check(lab_file: LabFile, catalog: CatalogOpt = None, as_json: JsonOpt = False) -> None:
    """Per job, on each of the lab's GPU types: does it fit, on how many GPUs, how many hours."""
    from rich.markup import escape
    from rich.table import Table

    from gpuplan.interfaces import lab as lab_api
    from gpuplan.specs.context import Context

    rec = lab_api.check(lab_file, Context.of(catalog or []))
    if as_json:
        emit_json(rec)
        return
    c = console()
    types = [i.gpu for i in rec.inventory]
    inv = ", ".join(f"{i.count}x {i.gpu} ({i.gres})" for i in rec.inventory)
    t = Table(title=f"{len(rec.jobs)} jobs on {inv}")
    t.add_column("job")
    t.add_column("owner")
    for g in types:
        t.add_column(g)
    for j in rec.jobs:
        cells = []
        for o in j.options:
            cells.append(f"{o.num_gpus} GPU · {o.hours or 0.0:,.1f} h" if o.fits else f"✗ {escape(o.reason)}")
        t.add_row(j.name, j.owner, *cells)
    c.print(t)
    w = rec.speed_weights
    c.print("speed per GPU (slowest = 1): " + ", ".join(f"{g} {w[g]:.2f}" for g in types))


@lab_app.command("allocate")
def lab_allocate(
    lab_file: LabFile,
    policy: PolicyOpt = "fair",
    png: Annotated[Path | None, typer.Option("--png", help="Draw the schedule as a Gantt chart.")] = None,
    no_burst: Annotated[bool, typer.Option("--no-burst", help="cost policy: no cloud GPUs.")] = False,
    spot: Annotated[bool, typer.Option("--spot", help="cost policy: rent at spot prices.")] = False,
    prices: PricesOpt = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A heterogeneity-aware allocation (Gavel's LP): each job's GPU type, count and finish."""
    from rich.table import Table

    from gpuplan.interfaces import lab as lab_api
    from gpuplan.results import LabAllocation, LabCostAllocation, LabJob
    from gpuplan.specs.context import Context

    rec = lab_api.allocate(lab_file, policy, Context.of(catalog or [], prices), burst=not no_burst, spot=spot)
    if png is not None:
        from gpuplan.interfaces.charts import gantt_png

        gantt_png(rec, png)
    if as_json:
        emit_json(rec)
        return
    c = console()
    t = Table(title=f"gpuplan lab allocate --policy {policy}")
    for col in ("job", "owner", "GPU type", "GPUs", "time on it", "expected finish"):
        t.add_column(col)
    for j in rec.jobs:
        main = j.time_shares.get(j.gpu) if isinstance(j, LabJob) else None
        t.add_row(j.name, j.owner, j.gpu, str(j.num_gpus), "—" if main is None else f"{main:.0%}",
                  fmt_dur(j.expected_finish_s))  # fmt: skip
    c.print(t)
    if isinstance(rec, LabAllocation):
        m = Table(title="members (GPU-hours; normalised: 1 h on the slowest type = 1)")
        for col in ("member", "share", "GPU-hours", "normalised", "budget / month"):
            m.add_column(col)
        for r in rec.members:
            budget = "—" if r.budget_gpu_hours_per_month is None else f"{r.budget_gpu_hours_per_month:,.0f}"
            if r.over_budget:
                budget += " (over)"
            m.add_row(r.name, f"{r.share:g}", f"{r.gpu_hours:,.1f}", f"{r.normalised_gpu_hours:,.1f}", budget)
        c.print(m)
    for x in rec.refused:
        c.print(f"refused {x.name}: fits on no GPU type ({'; '.join(f'{g}: {why}' for g, why in x.reasons.items())})")
    if isinstance(rec, LabCostAllocation):
        c.print(f"cloud spend ${rec.cloud_usd:,.2f}; an equal split would rent ${rec.equal_split.cloud_usd:,.2f} "
                f"and first-come-first-served ${rec.fcfs.cloud_usd:,.2f} to meet the same deadlines")  # fmt: skip
    else:
        what = "makespan" if rec.metric == "makespan_s" else "average job completion time"
        ours, eq, ff = (getattr(s, rec.metric) for s in (rec.schedule, rec.equal_split, rec.fcfs))
        c.print(f"{what}: {fmt_dur(ours)}; equal split {fmt_dur(eq)} ({rec.gain_vs_equal_split:.2f}x better), "
                f"first-come-first-served {fmt_dur(ff)} ({rec.gain_vs_fcfs:.2f}x better)")  # fmt: skip
    if png is not None:
        sys.stderr.write(f"gpuplan: wrote {png}\n")


@lab_app.command("slurm-config")
def lab_slurm_config(
    lab_file: LabFile,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write gres.conf, slurm.conf.lab, sacctmgr.sh here.")
    ] = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """gres.conf and slurm.conf lines for the inventory (billing weights from speed), and sacctmgr for members."""
    from gpuplan.interfaces import lab as lab_api
    from gpuplan.specs.context import Context

    rec = lab_api.slurm_config(lab_file, Context.of(catalog or []))
    if as_json:
        emit_json(rec)
        return
    parts = (("gres.conf", rec["gres_conf"]), ("slurm.conf.lab", rec["slurm_conf"]), ("sacctmgr.sh", rec["sacctmgr"]))
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            for name, text in parts:
                (out / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise GpuplanError(f"Cannot write to {str(out)!r}: {exc.strerror or exc}.") from None
        sys.stderr.write(f"gpuplan: wrote {', '.join(n for n, _ in parts)} to {out}\n")
        return
    for name, text in parts:
        sys.stdout.write(f"# --- {name} ---\n{text}\n")


@lab_app.command("submit")
def lab_submit(
    lab_file: LabFile,
    policy: PolicyOpt = "fair",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Folder for the sbatch scripts.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write the scripts; do not call sbatch.")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a non-empty folder: scripts of the same name are replaced by rename (a symlink is "
            "replaced, never written through); an earlier submitted.json is kept as submitted-N.json.",
        ),
    ] = False,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One sbatch per job on the GPU type the allocation chose (--gres=gpu:TYPE:N, --time, --account).
    The folder must be empty (or --force); submitted.json is rewritten after each sbatch, so
    `gpuplan lab status` reads what was sent even if the submission stops midway. Exit code 1 when
    sbatch refused a job (the others are still sent)."""
    from rich.markup import escape
    from rich.table import Table

    from gpuplan.interfaces import lab as lab_api
    from gpuplan.specs.context import Context

    rec = lab_api.submit(lab_file, policy, out, dry_run, ctx=Context.of(catalog or []), force=force)
    failed = [j["name"] for j in rec["jobs"] if j.get("sbatch") == "failed"]
    if as_json:
        emit_json(rec)
        _sbatch_refused(failed, rec)
        return
    c = console()
    t = Table(title=f"{'scripts written (dry run)' if dry_run else 'submitted'} to {rec['folder']}")
    for col in ("job", "GPU type", "gres", "estimate", "job id"):
        t.add_column(col)
    for j in rec["jobs"]:
        ident = j["job_id"] or ("—" if dry_run else f"✗ {escape(' '.join(j.get('error') or []))}")
        t.add_row(j["name"], j["gpu"], j["gres"], fmt_dur(j["estimate_s"]), ident)
    c.print(t)
    for r in rec["refused"]:
        c.print(f"refused {r['name']} (not submitted): it fits on no GPU type: "
                + "; ".join(f"{g}: {escape(x)}" for g, x in r["reasons"].items()))  # fmt: skip
    _sbatch_refused(failed, rec)


def _sbatch_refused(failed: list[str], rec: dict[str, Any]) -> None:
    """One stderr line and exit code 1 when sbatch refused some of `lab submit`'s jobs."""
    from gpuplan.safeio import clip

    if failed:
        names = ", ".join(failed[:5]) + (", ..." if len(failed) > 5 else "")
        record = clip(str(Path(rec["folder"]) / "submitted.json"))
        sys.stderr.write(f"gpuplan: sbatch refused {len(failed)} of {len(rec['jobs'])} jobs ({names}); "
                         f"{record} records each outcome\n")  # fmt: skip
        raise typer.Exit(1)


@lab_app.command("status")
def lab_status(
    folder: Annotated[Path, typer.Argument(help="The folder `gpuplan lab submit` wrote (its submitted.json).")],
    as_json: JsonOpt = False,
) -> None:
    """Submitted jobs from squeue/sacct: state and elapsed time against the estimate."""
    from rich.markup import escape
    from rich.table import Table

    from gpuplan.interfaces import lab as lab_api
    from gpuplan.safeio import clip

    rec = lab_api.status(folder)
    if as_json:
        emit_json(rec)
        return
    title = f"lab jobs submitted from {escape(rec['folder'])}"
    if not rec.get("complete", True):
        title += " (the submission stopped midway: jobs NOT SUBMITTED were never sent)"
    t = Table(title=title)
    for col in ("job", "id", "gres", "state", "elapsed", "estimate", "progress"):
        t.add_column(col)
    for j in rec["jobs"]:  # squeue's words and the record's, printed as text (no markup, no control codes)
        state = clip(j["state"]) + (f" ({clip(j['reason'])})" if j["reason"] and j["reason"] != "None" else "")
        prog = "—" if j["progress"] is None else f"{j['progress']:.0%}"
        t.add_row(escape(j["name"]), escape(str(j["job_id"] or "—")), escape(clip(j["gres"])), escape(state),
                  fmt_dur(j["elapsed_s"]), fmt_dur(j["estimate_s"]), prog)  # fmt: skip
    console().print(t)
