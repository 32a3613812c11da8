"""The long fuzz run: many hostile files of every kind through the real command line.

    .venv/bin/python bench/fuzz_files.py --cases 100000 [--workers 2] [--seed 1]

The cases are tests/helpers/fuzz_files.py's (real documents mutated by hypothesis: NaN, infinity, huge
integers, control characters, #SBATCH lines, deep nesting, alias bombs, cut and spliced text), the
rule the same as in `make test`: each command answers (exit 0, strict JSON) or refuses in one
bounded line with exit 2. Unlike the test, a broken rule does not stop the run: every failure is
counted and the first few are printed with their input. Prints the cases run, the failures, the
time per case (median, 99th percentile, max) and each worker's peak memory.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _chunk(job: tuple[str, int, int]) -> dict[str, Any]:
    """Run `n` cases of one kind with hypothesis seeded by `seed`; failures are recorded, not raised."""
    kind_name, n, seed_value = job
    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis import strategies as st

    from helpers.fuzz_files import KINDS, check_answer, draw_text, run

    kind = KINDS[kind_name]
    times: list[float] = []
    failures: list[str] = []

    @seed(seed_value)
    @settings(
        max_examples=n, deadline=None, database=None, phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(data=st.data())
    def case(data: st.DataObject) -> None:
        text = draw_text(kind, data)
        start = time.perf_counter()
        try:
            check_answer(run(kind, text))
        except Exception as exc:
            tb = traceback.format_exception(exc)
            failures.append(f"{kind_name}: {type(exc).__name__}: {str(exc)[:300]!r}\n  input: {text[:300]!r}\n  at: "
                            + "".join(tb[-3:])[:800])  # fmt: skip
        times.append(time.perf_counter() - start)

    case()
    return {
        "kind": kind_name,
        "times": times,
        "failures": failures,
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100_000, help="cases in all, shared among the kinds")
    ap.add_argument("--workers", type=int, default=2, help="processes")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=2_000, help="cases per hypothesis run")
    ap.add_argument("--kinds", nargs="*", default=None, help="only these kinds (workload config catalog prices lab)")
    args = ap.parse_args()
    from helpers.fuzz_files import KINDS

    kinds = args.kinds or sorted(KINDS)
    per_kind = max(1, args.cases // len(kinds))
    jobs: list[tuple[str, int, int]] = []
    for k in kinds:
        left, i = per_kind, 0
        while left > 0:
            n = min(args.chunk, left)
            jobs.append((k, n, args.seed * 1_000_003 + len(jobs)))
            left -= n
            i += 1
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
        results = pool.map(_chunk, jobs, chunksize=1)
    wall = time.perf_counter() - started
    times = [t for r in results for t in r["times"]]
    failures = [f for r in results for f in r["failures"]]
    print(f"fuzz_files: {len(times):,} cases ({', '.join(kinds)}), {args.workers} workers, {wall:,.0f} s")
    for k in kinds:
        kt = [t for r in results if r["kind"] == k for t in r["times"]]
        kf = sum(len(r["failures"]) for r in results if r["kind"] == k)
        q = statistics.quantiles(kt, n=100) if len(kt) > 1 else kt * 99
        print(f"  {k:9s} {len(kt):7,} cases  {kf:4} failures  per case: median {statistics.median(kt) * 1e3:6.1f} ms, "
              f"p99 {q[98] * 1e3:7.1f} ms, max {max(kt) * 1e3:7.1f} ms")  # fmt: skip
    print(f"  peak memory of a worker: {max(r['peak_rss_kib'] for r in results) / 1024:,.0f} MiB")
    print(f"  failures: {len(failures)}")
    for f in failures[:10]:
        print("  - " + f.replace("\n", "\n    "))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
