"""Re-derive the kernel efficiencies gpuplan takes from NVIDIA's aiconfigurator kernel tables.

ai-dynamo/aiconfigurator ships, per system, TensorRT-LLM kernel timings measured on the card
(`aic-core/src/aiconfigurator_core/systems/data/<system>/gemm/trtllm/<version>/gemm_perf.parquet`,
`.../attention/trtllm/<version>/generation_attention_perf.parquet`). The RTX PRO 6000 Server
Edition's catalog row (`mamf_*`, `memory_bandwidth_share`) and `estimators/efficiency.py` cite
figures from them; this script recomputes those figures and the same ones for every other system in
the checkout, for comparison:

- the best GEMM of the m, n, k >= 4096 shapes per dtype, as a share of the catalog's dense peak;
- memory-bound GEMVs (m <= 8) over >= 512 MB of weights: median bandwidth as a share of the
  catalog's datasheet bandwidth (smaller weights partly stay in the L2);
- decode attention reading >= 1 GB of KV cache: median bandwidth, likewise.

The tables are data of another project: nothing of them is committed here. Point the script at a
checkout (a git work tree, or a bare mirror with --rev) and run it where pyarrow is installed:
    python3 -m venv /tmp/aic && /tmp/aic/bin/pip install pyarrow
    /tmp/aic/bin/python bench/aiconfigurator_kernels.py PATH [--rev COMMIT] [--json]
It imports gpuplan only for the catalog's peaks (src/ is put on the path).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

DATA = "aic-core/src/aiconfigurator_core/systems/data"
# aiconfigurator system directory -> gpuplan catalog name
SYSTEMS = {
    "a100_sxm": "A100 SXM4 80GB",
    "b200_sxm": "B200",
    "b300_sxm": "B300",
    "gb200": "GB200",
    "h100_sxm": "H100 SXM5 80GB",
    "h200_sxm": "H200 SXM 141GB",
    "l40s": "L40S",
    "rtx_pro_6000_server": "RTX PRO 6000 Server",
}
# gemm_dtype -> (catalog peak key, bytes per weight element incl. NVFP4's block scales)
DTYPES = {"bfloat16": ("bf16", 2.0), "fp8": ("fp8", 1.0), "nvfp4": ("fp4", 4.5 / 8)}
KV_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0}


class Source:
    """Files of an aiconfigurator checkout: a work tree, or a git directory read at `rev`."""

    def __init__(self, path: Path, rev: str | None) -> None:
        self.path, self.rev = path, rev
        self.git = rev is not None or not (path / DATA).exists()

    def list(self) -> list[str]:
        if not self.git:
            return [str(p.relative_to(self.path)) for p in (self.path / DATA).rglob("*.parquet")]
        out = subprocess.run(
            ["git", "--git-dir", str(self.path), "ls-tree", "-r", "--name-only", self.rev or "HEAD", DATA],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return [line for line in out.splitlines() if line.endswith(".parquet")]

    def read(self, name: str) -> bytes:
        if not self.git:
            return (self.path / name).read_bytes()
        return subprocess.run(
            ["git", "--git-dir", str(self.path), "show", f"{self.rev or 'HEAD'}:{name}"],
            capture_output=True,
            check=True,
        ).stdout


def _version_key(path: str) -> list[int]:
    version = path.split("/")[-2]
    return [int(x) for x in re.findall(r"\d+", version)]


def _newest(files: list[str], system: str, kind: str, table: str) -> str | None:
    hits = [f for f in files if f.startswith(f"{DATA}/{system}/{kind}/trtllm/") and f.endswith(table)]
    return max(hits, key=_version_key) if hits else None


def _rows(src: Source, name: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq  # type: ignore[import-not-found,import-untyped,unused-ignore]

    return pq.read_table(io.BytesIO(src.read(name))).to_pylist()  # type: ignore[no-any-return]


def measure(src: Source) -> dict[str, Any]:
    from gpuplan.specs.gpu import load_catalog

    catalog = load_catalog(use_env=False)
    files = src.list()
    out: dict[str, Any] = {}
    for system, gpu_name in SYSTEMS.items():
        gpu = catalog.find(gpu_name)
        gemm = _newest(files, system, "gemm", "gemm_perf.parquet")
        if gpu is None or gemm is None:
            continue
        rec: dict[str, Any] = {"gpu": gpu.name, "gemm_table": gemm}
        rows = _rows(src, gemm)
        for dtype, (peak_key, wbytes) in DTYPES.items():
            peak = gpu.fp4_flop_per_s if peak_key == "fp4" else gpu.peak_flop_per_s.get(peak_key)
            sel = [r for r in rows if r["gemm_dtype"] == dtype]
            big = [
                2 * r["m"] * r["n"] * r["k"] / (r["latency"] * 1e-3) for r in sel if min(r["m"], r["n"], r["k"]) >= 4096
            ]
            gemv = [
                r["n"] * r["k"] * wbytes / (r["latency"] * 1e-3)
                for r in sel
                if r["m"] <= 8 and r["n"] * r["k"] * wbytes >= 512e6
            ]
            if big and peak:
                rec[f"{dtype} best GEMM share of peak"] = round(max(big) / peak, 3)
                rec[f"{dtype} best GEMM TFLOP/s"] = round(max(big) / 1e12, 1)
            if gemv:
                rec[f"{dtype} GEMV median share of bandwidth"] = round(
                    statistics.median(gemv) / gpu.memory_bandwidth_bytes_per_s, 3
                )
        attn = _newest(files, system, "attention", "generation_attention_perf.parquet")
        if attn:
            bw = []
            for r in _rows(src, attn):
                kv = r["batch_size"] * (r["isl"] + r["step"]) * r["num_key_value_heads"] * r["head_dim"] * 2
                nbytes = kv * KV_BYTES.get(r["kv_cache_dtype"], 1.0)
                if nbytes >= 1e9:
                    bw.append(nbytes / (r["latency"] * 1e-3))
            if bw:
                rec["decode attention median share of bandwidth"] = round(
                    statistics.median(bw) / gpu.memory_bandwidth_bytes_per_s, 3
                )
        out[system] = rec
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path, help="aiconfigurator checkout (work tree or git directory)")
    ap.add_argument("--rev", help="commit to read from a git directory (default HEAD)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        import pyarrow  # type: ignore[import-not-found,import-untyped,unused-ignore]  # noqa: F401
    except ImportError:
        sys.exit("bench/aiconfigurator_kernels.py: needs pyarrow (pip install pyarrow) to read the parquet tables")
    result = measure(Source(args.path, args.rev))
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for system, rec in result.items():
        print(f"{system} ({rec.pop('gpu')}, {rec.pop('gemm_table').split('/')[-2]})")
        for key, value in rec.items():
            print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
