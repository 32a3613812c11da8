"""Speed benchmark for gpuplan's performance targets (issues 4 and 29), in one run:

- start-up: each command end to end (Python start-up included) as a ratio to a bare
  `python -c pass` timed in the same run, interleaved with it, so that a busy machine slows both;
- in-process: one estimate, one plan over the whole catalog;
- with --web: a real `gpuplan serve` under N requests sent at the same moment (one connection
  each, each a different workload): 50 `/api/plan` on one process, and 200 mixed estimate / fit /
  plan on one process and on `--workers 2`; p50/p99/max latency and requests per second.

Run: .venv/bin/python bench/speed.py [--runs N] [--web] [--rounds R] [--readme]. Prints one JSON
document; with --readme it also rewrites the README's speed table (between `<!-- speed:begin -->`
and `<!-- speed:end -->`) from this run's figures, each against its target (issue 29).
Not a test: timings depend on the machine; the figures go into the README and closing notes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"

# The commands timed against a bare start-up: (label, arguments after `gpuplan`).
COMMANDS: list[tuple[str, list[str]]] = [
    ("gpuplan --help", ["--help"]),
    ("estimate --json", ["estimate", str(EX / "lora-4090.yaml"), "--json"]),
    ("estimate (table)", ["estimate", str(EX / "lora-4090.yaml")]),
    ("fit, all GPUs --json", ["fit", "llama-3.1-8b", "--task", "lora", "--json"]),
    ("plan, whole catalog --json", ["plan", str(EX / "pretrain-1b.yaml"), "--json"]),
    ("plan, whole catalog (table)", ["plan", str(EX / "chat-7b.yaml")]),
    ("plan --cluster 64x8:H100 --json", ["plan", str(EX / "pretrain-70b-cluster.yaml"), "--json"]),
]


def _per_call(fn: Callable[[], Any], n: int) -> float:
    fn()  # warm caches (catalog, presets)
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def _wall(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of `cmd`: its CPU time (user + system, from the
    kernel's accounting of finished children) barely moves when other processes share the CPUs,
    where the wall time stretches."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def startup(runs: int) -> dict[str, Any]:
    """Each command's median wall time and CPU time, and their ratios to the bare start-up's, all
    timed in every round (bare, then each command), so that load on the machine hits them alike."""
    exe = Path(sys.executable).parent / "gpuplan"
    gp = [str(exe)] if exe.exists() else [sys.executable, "-m", "gpuplan.interfaces.cli"]
    # as installed: bytecode cached (the warm-up run writes it even where the shell sets
    # PYTHONDONTWRITEBYTECODE), and the TOML cache in its usual place
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    bare = [sys.executable, "-c", "pass"]
    for _, args in COMMANDS:  # warm: bytecode and caches written
        subprocess.run([*gp, *args], check=True, capture_output=True, env=env)
    walls: dict[str, list[float]] = {"bare python": [], **{label: [] for label, _ in COMMANDS}}
    cpus: dict[str, list[float]] = {label: [] for label in walls}
    for _ in range(runs):
        for label, cmd in (("bare python", bare), *((lb, [*gp, *args]) for lb, args in COMMANDS)):
            wall, cpu = _wall(cmd, env)
            walls[label].append(wall)
            cpus[label].append(cpu)
    base, base_cpu = statistics.median(walls["bare python"]), statistics.median(cpus["bare python"])
    out: dict[str, Any] = {"runs": runs, "bare python -c pass s": round(base, 4), "its CPU s": round(base_cpu, 4)}
    for label, _ in COMMANDS:
        med, cpu = statistics.median(walls[label]), statistics.median(cpus[label])
        # per-round ratios too: their median is robust to one slow round of either
        per_round = statistics.median(w / b for w, b in zip(walls[label], walls["bare python"], strict=True))
        out[label] = {
            "median_s": round(med, 4),
            "x_bare": round(med / base, 1),
            "x_bare_per_round": round(per_round, 1),
            "cpu_s": round(cpu, 4),
            "cpu_x_bare": round(cpu / base_cpu, 1),
        }
    return out


def in_process() -> dict[str, float]:
    from gpuplan.estimators.memory import estimate_memory
    from gpuplan.estimators.perf import estimate_inference_time, estimate_training_time
    from gpuplan.interfaces import api
    from gpuplan.specs.models import load_model

    cat = api.catalog()
    train_w = api.build_workload(str(EX / "lora-4090.yaml"))
    infer_w = api.build_workload(str(EX / "serve-70b.yaml"))
    plan_w = api.build_workload(str(EX / "pretrain-1b.yaml"))
    m8, m70 = load_model(train_w.model), load_model(infer_w.model)
    g4090, h100 = cat.get("RTX 4090"), cat.get("H100")
    return {
        "training_estimate_ms": 1e3 * _per_call(lambda: estimate_training_time(m8, train_w, g4090), 200),
        "training_memory_plus_time_ms": 1e3
        * _per_call(lambda: (estimate_memory(m8, train_w, g4090), estimate_training_time(m8, train_w, g4090)), 200),
        "inference_estimate_ms (static batch)": 1e3
        * _per_call(lambda: estimate_inference_time(m70, infer_w, h100), 200),
        "inference_estimate_ms (with best-batch search)": 1e3
        * _per_call(lambda: estimate_inference_time(m70, infer_w, h100, max_batch=512), 50),
        "plan whole catalog in-process ms": 1e3 * _per_call(lambda: api.plan(plan_w), 2),
    }


def web(rounds: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "tests"))
    from web_load import fire_mixed, mixed, plan_bodies, summary

    from helpers.web_server import served

    out: dict[str, Any] = {}
    cases = (  # each round asks new questions: the server's cache answers none of them
        ("50 concurrent /api/plan, 1 process", 1, lambda r: [("/api/plan", b) for b in plan_bodies(50, 50 * r)]),
        ("200 concurrent mixed estimate/fit/plan, 1 process", 1, lambda r: mixed(200, 200 * r)),
        ("200 concurrent mixed estimate/fit/plan, --workers 2", 2, lambda r: mixed(200, 200 * r)),
    )
    for label, workers, requests in cases:
        with served(workers=workers) as url:
            out[label] = summary([fire_mixed(url, requests(r)) for r in range(rounds)])
            # the first round's requests again: answered from the cache
            out[label + ", repeated (cached)"] = summary([fire_mixed(url, requests(0))])
    return out


def reference_ms() -> float:
    """A fixed pure-Python loop, timed (median of 5): the machine's speed at that moment, so that
    figures from a busy machine can be told apart from slower code."""
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        sum(i * i for i in range(300_000))
        samples.append(time.perf_counter() - t0)
    return round(1e3 * statistics.median(samples), 2)


STARTUP_KEY = "start-up (end to end, ratio to a bare python start-up)"
# (case, the figure the target reads, the target): issue 29's targets, measured in one run
STARTUP_TARGETS: dict[str, float] = {"estimate --json": 12.0, "plan, whole catalog --json": 16.0}
WEB_TARGETS: dict[str, tuple[str, float]] = {
    "50 concurrent /api/plan, 1 process": ("p50_s", 1.5),
    "200 concurrent mixed estimate/fit/plan, --workers 2": ("p99_s", 5.0),
}


def _met(value: float, target: float | None) -> str:
    return "" if target is None else ("met" if value <= target else "**not met**")


def readme_table(out: dict[str, Any]) -> str:
    """The README's speed table from one run's figures: each case, its figure, its target."""
    when = datetime.date.today().isoformat()
    load = f"load average {out['load average at start']:.2f} at the start, {out['load average at end']:.2f} at the end"
    head = (
        f"Measured {when} on this project's machine ({out['machine cpus']} CPUs; {load}; a reference loop "
        f"{out['reference loop ms at start']} ms at the start, {out['reference loop ms at end']} ms at the end) "
        f"by `python bench/speed.py {out['arguments']}`, which wrote this table:"
    )
    lines = [
        *textwrap.wrap(head, 100, break_on_hyphens=False),
        "",
        "| case | figure | target | |",
        "|---|---|---|---|",
    ]
    st = out.get(STARTUP_KEY)
    if st:
        bare = st["bare python -c pass s"]
        lines.append(f"| bare `python -c pass` | {bare * 1e3:.1f} ms (the unit below) | | |")
        for label, args in COMMANDS:
            r = st[label]
            target = STARTUP_TARGETS.get(label)
            cmd = " ".join(f"examples/{Path(a).name}" if a.startswith(str(EX)) else a for a in args)
            fig = f"{r['x_bare_per_round']:.1f}x ({r['median_s']:.2f} s; CPU {r['cpu_x_bare']:.1f}x)"
            lines.append(
                f"| `gpuplan {cmd}` | {fig} | {f'at most {target:g}x' if target else ''} "
                f"| {_met(r['x_bare_per_round'], target)} |"
            )
    for label, r in out.get("web", {}).items():
        key, target = WEB_TARGETS.get(label, ("", None))
        fig = f"p50 {r['p50_s']:.2f} s, p99 {r['p99_s']:.2f} s, {r['requests_per_s']:.0f}/s"
        fig += f" ({r['answered_200']} of {r['requests']} answered)"
        goal = f"{key[:3]} at most {target:g} s" if target is not None else ""
        lines.append(f"| {label} | {fig} | {goal} | {_met(r[key], target) if target is not None else ''} |")
    return "\n".join(lines)


def write_readme(table: str, path: Path = ROOT / "README.md") -> None:
    text = path.read_text(encoding="utf-8")
    begin, end = "<!-- speed:begin -->", "<!-- speed:end -->"
    if text.count(begin) != 1 or text.count(end) != 1:
        raise SystemExit(f"{path.name}: expected one {begin} ... {end} block")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    path.write_text(f"{head}{begin}\n{table}\n{end}{tail}", encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7, help="rounds of the start-up timings (0: none)")
    ap.add_argument("--web", action="store_true", help="also time a real `gpuplan serve` under load")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each web load case")
    ap.add_argument("--skip-in-process", action="store_true")
    ap.add_argument("--readme", action="store_true", help="rewrite the README's speed table from this run")
    args = ap.parse_args()
    out: dict[str, Any] = {"machine": f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start"}
    out["machine cpus"], out["load average at start"] = os.cpu_count(), round(os.getloadavg()[0], 2)
    out["arguments"] = " ".join(sys.argv[1:])
    out["reference loop ms at start"] = reference_ms()
    if args.runs > 0:
        out["start-up (end to end, ratio to a bare python start-up)"] = startup(args.runs)
    if not args.skip_in_process:
        out["in-process"] = in_process()
    if args.web:
        out["web"] = web(args.rounds)
    out["reference loop ms at end"] = reference_ms()
    out["load average at end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=1))
    if args.readme:
        write_readme(readme_table(out))


if __name__ == "__main__":
    main()
