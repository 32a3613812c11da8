"""Search the parallel layouts of a training job on a cluster: which split of data, layers,
tensors, sequences and experts, with which ZeRO stage, micro-batch and checkpointing, runs
fastest within each GPU's memory.

Every layout is enumerated under Megatron-Core's rules (tp divides the attention heads and the
KV groups and stays inside an NVLink domain unless allowed; pp x vp divides the layers; cp splits
the sequence into 2 x cp load-balanced chunks; ep divides the experts and the data-parallel x
context-parallel ranks; ZeRO-2/3 do not combine with pipeline parallelism (DeepSpeed; Megatron's
distributed optimizer is ZeRO-1) except under torchtitan, whose FSDP2 shards each pipeline stage
(estimators/fsdp_pp.FSDP_PP_GATHER_ONCE); the interleaved schedule needs micro-batches divisible by pp;
the global batch divides into micro-batches). A micro-batch's compute depends on only a few of
these (tp, cp, ep, micro-batch, checkpointing, sequence parallelism): it is computed once per
such shape by the operator roofline (perf.training_ops), and the step of every layout sharing it
is composed in one vectorised pass (estimators/parallel.compose), the same arithmetic
`gpuplan estimate` runs for one layout. Memory is screened the same way (the memory model's
per-parameter state bytes and per-micro-batch activations, split by the layout), and the best
layouts are then confirmed by the full memory estimate.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import comm, runtime
from gpuplan.estimators.fsdp_pp import FSDP_PP_GATHER_ONCE, FSDP_PP_GRAD_BYTES
from gpuplan.estimators.memory import MemoryEstimate, activation_lines, estimate_memory
from gpuplan.estimators.parallel import MicroProfile, compose, stage_share
from gpuplan.estimators.perf import TrainingTime, estimate_training_time, training_ops, with_checkpointing
from gpuplan.specs import frameworks
from gpuplan.specs.cluster import Cluster
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload

CHECKPOINTING: Final = ("none", "selective", "full")
ZERO_STAGES: Final = (0, 1, 2, 3)
# The ZeRO stages a framework's launch runs (interfaces/launch_frameworks.py and launch_megatron.py):
# torchtitan shards fully with FSDP2 or replicates (zero 1/2 refused); NeMo's and Megatron-LM's
# Megatron strategy shards optimizer states only (the distributed optimizer: zero 1; NeMo refuses
# zero >= 2, Megatron's args have no ZeRO-2/3). The search tries only these, so `plan` ranks what
# the framework's launch accepts (QA F28).
FRAMEWORK_ZERO_STAGES: Final[dict[str, tuple[int, ...]]] = {
    "torchtitan": (0, 3),
    "nemo": (0, 1),
    "megatron": (0, 1),
}
# The most interleaved virtual stages per rank a framework's launch writes: torchtitan's looped
# schedules run 2 per rank unless pipeline_parallel_layers_per_stage is set (pytorch/torchtitan:
# torchtitan/distributed/pipeline_parallel.py pipeline_llm), which its launch does not write.
FRAMEWORK_MAX_VP: Final[dict[str, int]] = {"torchtitan": 2}
MAX_MICRO_BATCH: Final = 64
# virtual chunks tried where pp does not divide the layers (an uneven split): DeepSeek-V3's
# published layouts use vp 4 on pp 8 (Megatron-Bridge deepseek_v3 recipe) and 1 on pp 16
UNEVEN_VP: Final = (1, 2, 4)
MAX_CP: Final = 64
# The most candidate layouts (shape x pipeline pair x ZeRO stage, after the batch and ZeRO rules)
# one search weighs: every job in bench/search.py and 8B-405B dense or 47B-671B MoE jobs on up to
# 8,192 nodes within the NVLink domain weigh under 300,000 (0.1-1.7 s here); a 235B-671B MoE on
# 8,192 x 8 GPUs with cross-node TP weighs 0.5-1M (DeepSeek-V3: 483,432; 2-3.5 s, ~420 MB), which
# one request must not impose on a shared server: it is refused with what to narrow. The count is taken before any
# layout is profiled (the enumeration's masks only), so a refusal costs milliseconds, not the search.
MAX_SEARCH_LAYOUTS: Final = 400_000
# Layout keys a workload can hold fixed in the search by setting them (`tp: 8`): the search then
# tries only that value (the narrowing the over-limit message suggests).
PINNABLE: Final = ("tp", "pp", "cp", "ep")
# How many of the screened layouts the full memory estimate confirms before giving up.
CONFIRM: Final = 200
# Memory states and the ZeRO stage from which each is sharded over the data-parallel group
# (Rajbhandari et al. 2020: stage 1 optimizer states, 2 gradients, 3 parameters).
_STATE_STAGE: Final = {
    "weights": 3,
    "frozen base weights": 3,
    "LoRA adapters": 3,
    "master weights": 1,
    "gradients": 2,
    "optimizer states": 1,
}
# DeepSpeed ZeRO-1/2 reduce bucket (reduce_bucket_size = 5e8 elements, deepspeed/runtime/zero/config.py)
_ZERO_BUCKET_ELEMENTS: Final = 5e8


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    vp: int
    cp: int
    ep: int
    dp: int
    zero: int
    micro_batch: int
    micro_batches: int
    checkpointing: str
    sequence_parallel: bool

    def keys(self) -> dict[str, object]:
        """The workload keys that select this layout."""
        return {
            "tp": self.tp,
            "pp": self.pp,
            "vp": self.vp,
            "cp": self.cp,
            "ep": self.ep,
            "zero": self.zero,
            "batch_size": self.micro_batch,
            "activation_checkpointing": self.checkpointing,
            "sequence_parallel": self.sequence_parallel,
        }

    @property
    def label(self) -> str:
        parts = [f"TP{self.tp}" + ("+SP" if self.sequence_parallel else ""), f"PP{self.pp}"]
        if self.vp > 1:
            parts.append(f"VP{self.vp}")
        if self.cp > 1:
            parts.append(f"CP{self.cp}")
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        parts.append(f"DP{self.dp}")
        if self.zero:
            parts.append(f"ZeRO-{self.zero}")
        parts.append(f"mb{self.micro_batch}x{self.micro_batches}")
        parts.append(
            {"none": "no ckpt", "selective": "sel. ckpt", "selective-op": "op ckpt", "full": "full ckpt"}[
                self.checkpointing
            ]
        )
        return " ".join(parts)


@dataclass(frozen=True)
class LayoutResult:
    layout: Layout
    workload: Workload
    time: TrainingTime
    memory: MemoryEstimate
    screened_bytes: float  # the vectorised screen's per-GPU memory (before confirmation)
    comm_share: float  # exposed communication / step
    bubble_share: float


@dataclass
class SearchResult:
    cluster: Cluster
    global_batch: int
    evaluated: int  # layouts whose step and memory were computed
    fitting: int  # of them, within memory by the screen
    shapes: int  # distinct micro-batch shapes (operator rooflines computed)
    seconds: float  # wall time of the search (enumeration, composition, confirmation)
    best: list[LayoutResult]
    rejected: Counter[str] = field(default_factory=Counter)  # layouts ruled out, by rule
    notes: list[str] = field(default_factory=list)


# One (tp, cp, ep) of the enumeration: its mask of passing cells and the cells' micro-batch, pp,
# vp, dp, micro-batch count and ZeRO stage.
_Cells = tuple[int, int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _pow2_upto(n: int) -> list[int]:
    return [1 << i for i in range(int(math.log2(max(n, 1))) + 1)]


def _divisors(n: int) -> list[int]:
    """n's divisors, ascending, by trial division up to sqrt(n) (65,536 GPUs: 256 trials, not 65,536)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _state_bytes(model: ModelSpec, w: Workload) -> dict[str, tuple[float, int]]:
    """Per-GPU bytes of each model state at tp = pp = 1 without ZeRO, and its ZeRO stage."""
    probe = w.with_(
        tp=1, pp=1, vp=1, cp=1, ep=1, num_gpus=1, zero=0, grad_accum=2, global_batch=None, batch_size=1,
        activation_checkpointing="full", offload="none", cluster=None,
    )  # fmt: skip
    est = estimate_memory(model, probe, None)
    out: dict[str, tuple[float, int]] = {}
    for line in est.lines:
        for prefix, stage in _STATE_STAGE.items():
            if line.name.startswith(prefix):
                out[line.name] = (line.bytes, stage)
    return out


def _shape(w: Workload, tp: int, cp: int, ep: int, mb: int, ckpt: str, sp: bool) -> Workload:
    """The one-stage workload whose micro-batch has this shape (validated keys, copied unchecked:
    the search enumerates only legal values)."""
    return w.model_copy(
        update={
            "tp": tp, "cp": cp, "ep": ep, "etp": None, "pp": 1, "vp": 1, "num_gpus": tp * cp * ep, "zero": 0, "grad_accum": 1,
            "global_batch": None, "batch_size": mb, "activation_checkpointing": ckpt, "sequence_parallel": sp,
            "cluster": None,
        }
    )  # fmt: skip


def _pipeline_pairs(rest: int, layers: int) -> list[tuple[int, int]]:
    """Pipeline (pp, vp) pairs: pp divides the GPUs left after tp x cp; where it also divides the
    layers, vp any divisor of the layers per stage, else an uneven split (Megatron-Core's pipeline
    layout) with up to UNEVEN_VP chunks and at least one layer a virtual stage."""
    return [
        (pp, vp)
        for pp in _divisors(rest)
        if pp <= layers
        for vp in (
            [1]
            if pp == 1
            else _divisors(layers // pp)
            if layers % pp == 0
            else [v for v in UNEVEN_VP if pp * v <= layers]
        )
    ]


@dataclass
class _Grid:
    """The search's candidates: a profile and activations per shape (tp, cp, ep, micro-batch,
    checkpointing, sequence parallelism), and per candidate layout its shape and its own axes."""

    shape_keys: list[tuple[int, int, int, int, str, bool]] = field(default_factory=list)
    prof_rows: list[MicroProfile] = field(default_factory=list)
    act_rows: list[tuple[float, float, float]] = field(default_factory=list)
    axes: dict[str, list[np.ndarray]] = field(
        default_factory=lambda: {k: [] for k in ("shape", "pp", "vp", "dp", "m", "z")}
    )


def _check_searchable(model: ModelSpec, w: Workload) -> None:
    if not w.is_training:
        raise InvalidSettingError(
            "The layout search plans training jobs; for serving use `gpuplan plan` or `launch --format vllm`."
        )
    if model.kind not in ("decoder", "encoder", "encoder-decoder"):
        raise InvalidSettingError(f"The layout search covers transformers; {model.name} is a {model.kind}.")


def _parallel_axes(
    model: ModelSpec, w: Workload, cluster: Cluster, allow_cross_node_tp: bool, rejected: Counter[str]
) -> tuple[dict[str, int], list[int], list[int], list[int]]:
    """The held keys and the tp, cp and ep values the search tries (a key the workload sets is
    held fixed: PINNABLE)."""
    n = cluster.num_gpus
    tp_cap = cluster.gpus_per_node if not allow_cross_node_tp else n
    if cluster.gpu.nvlink_bandwidth_bytes_per_s > 0 and not allow_cross_node_tp:
        tp_cap = min(tp_cap, cluster.gpu.nvlink_domain)
    pinned: dict[str, int] = {k: int(getattr(w, k)) for k in PINNABLE if k in w.model_fields_set}
    tps = [t for t in ([pinned["tp"]] if "tp" in pinned else _pow2_upto(n)) if model.tp_splits_heads(t)]
    rejected["tp beyond the NVLink domain / node"] += sum(1 for t in tps if t > tp_cap)
    tps = [t for t in tps if t <= tp_cap]
    cps = [
        c
        for c in ([pinned["cp"]] if "cp" in pinned else _pow2_upto(min(n, MAX_CP)))
        if w.seq_len % (2 * c) == 0 or c == 1
    ]
    eps = [
        e for e in ([pinned["ep"]] if "ep" in pinned else _pow2_upto(n)) if model.is_moe and model.num_experts % e == 0
    ] or [1]
    return pinned, tps, cps, eps


def _enumerate(
    n: int,
    gb: int,
    layers: int,
    pinned: dict[str, int],
    axes: tuple[list[int], list[int], list[int]],
    rejected: Counter[str],
    ckpts: tuple[str, ...] = CHECKPOINTING,
    stages: tuple[int, ...] = ZERO_STAGES,
    zero_with_pp: bool = False,
    max_vp: int = MAX_MICRO_BATCH,
) -> tuple[list[_Cells], int]:
    """Every (tp, cp, ep) x (micro-batch, pipeline pair, ZeRO stage) that passes the rules, as masks
    (cheap), and the number of candidate layouts they make (counted against MAX_SEARCH_LAYOUTS
    before any profile is built). `zero_with_pp`: ZeRO-2/3 may combine with pp > 1 (torchtitan);
    `max_vp`: the most virtual stages per rank the framework runs (FRAMEWORK_MAX_VP)."""
    tps, cps, eps = axes
    zeros = np.array(stages, dtype=np.float64)
    mbs = np.arange(1, MAX_MICRO_BATCH + 1, dtype=np.float64)
    kept: list[_Cells] = []
    weighed = 0  # candidate layouts (each shape x pipeline pair x ZeRO stage that passed the rules)
    for tp, cp in itertools.product(tps, cps):
        if n % (tp * cp):
            continue
        rest = n // (tp * cp)
        pairs = [(p, v) for p, v in _pipeline_pairs(rest, layers) if p == pinned.get("pp", p) and v <= max_vp]
        if not pairs:
            continue
        pp_a = np.array([p for p, _ in pairs], dtype=np.float64)
        vp_a = np.array([v for _, v in pairs], dtype=np.float64)
        dp_a = rest / pp_a
        # every (micro-batch, pipeline pair, ZeRO stage) at once
        grid = np.meshgrid(mbs, np.arange(len(pairs), dtype=np.float64), zeros, indexing="ij")
        mb_g, z_g = grid[0].ravel(), grid[2].ravel()
        pair_g = grid[1].ravel().astype(np.int64)
        pp_g, vp_g, dp_g = pp_a[pair_g], vp_a[pair_g], dp_a[pair_g]
        m_g = gb / (mb_g * dp_g)
        ok_batch = (m_g >= 1) & (np.mod(m_g, 1.0) == 0) & ((vp_g == 1) | (np.mod(m_g, pp_g) == 0))
        # ZeRO-2/3 do not combine with pipeline parallelism (DeepSpeed), except under torchtitan's
        # FSDP2 (zero_with_pp); ZeRO needs dp x cp > 1
        ok_zero = ((z_g <= 1) | (pp_g == 1) | zero_with_pp) & ((z_g == 0) | (dp_g * cp > 1))
        for ep in eps:
            ok_ep = np.mod(dp_g * cp, ep) == 0
            ok = ok_batch & ok_zero & ok_ep
            rejected["global batch does not split into micro-batches (or the interleaved schedule's pp)"] += int(
                (~ok_batch).sum()
            )
            rejected["ZeRO-2/3 with pipeline parallelism, or ZeRO without data parallelism"] += int(
                (ok_batch & ~ok_zero).sum()
            )
            rejected["ep does not divide dp x cp"] += int((ok_batch & ok_zero & ~ok_ep).sum())
            if not ok.any():
                continue
            # each passing cell is weighed once per (sequence parallelism, checkpointing) shape
            weighed += int(ok.sum()) * (2 if tp > 1 else 1) * len(ckpts)
            kept.append((tp, cp, ep, ok, mb_g, pp_g, vp_g, dp_g, m_g, z_g))
    return kept, weighed


def _profile(
    model: ModelSpec, w: Workload, cluster: Cluster, kept: list[_Cells], ckpts: tuple[str, ...] = CHECKPOINTING
) -> _Grid:
    """One operator profile and activation split per shape the kept cells use, and each cell's axes."""
    g = _Grid()
    for tp, cp, ep, ok, mb_g, pp_g, vp_g, dp_g, m_g, z_g in kept:
        for mb in np.unique(mb_g[ok]).astype(int):
            sel = ok & (mb_g == mb)
            for sp in (False, True) if tp > 1 else (False,):
                mo = training_ops(model, _shape(w, tp, cp, ep, int(mb), "none", sp), cluster.gpu)
                for ckpt in ckpts:
                    g.prof_rows.append(with_checkpointing(mo, ckpt))
                    acts = {
                        x.name: x.bytes for x in activation_lines(model, _shape(w, tp, cp, ep, int(mb), ckpt, sp))[0]
                    }
                    g.act_rows.append(
                        (
                            acts.get("activations", 0.0),
                            acts.get("embedding and final norm", 0.0) + acts.get("logits and loss", 0.0),
                            acts.get("recomputed layer", 0.0),
                        )
                    )
                    g.shape_keys.append((tp, cp, ep, int(mb), ckpt, sp))
                    k = int(sel.sum())
                    g.axes["shape"].append(np.full(k, len(g.shape_keys) - 1))
                    for name, arr in (("pp", pp_g), ("vp", vp_g), ("dp", dp_g), ("m", m_g), ("z", z_g)):
                        g.axes[name].append(arr[sel])
    return g


def _screen_memory(
    model: ModelSpec, w: Workload, cluster: Cluster, acts_a: np.ndarray, lay: dict[str, np.ndarray]
) -> np.ndarray:
    """Per-GPU memory of every candidate at once: the memory model's pieces (states by ZeRO stage,
    buffers, activations in flight, runtime) split by the layout, the screen before the full estimate."""
    gpu, n = cluster.gpu, cluster.num_gpus
    layers = max(model.num_layers, 1)
    pp_s, vp_s, dp_s, m_s, z_s, tp_s, cp_s, ep_s = (lay[k] for k in ("pp", "vp", "dp", "m", "z", "tp", "cp", "ep"))
    c_bytes = 4.0 if w.precision in ("fp32", "tf32") else 2.0
    pure = w.master_weights == "none" or c_bytes == 4.0
    expert_share = float(sum(g.total for g in model.groups if g.role == "expert")) / max(model.total_params, 1)
    per_layer_params = (model.total_params - model.embedding_params) / layers
    a_layers, a_once, a_rec = acts_a[:, 0], acts_a[:, 1], acts_a[:, 2]
    # the fullest pipeline rank's share of the layers (1/pp unless the split is uneven)
    share = stage_share(layers, pp_s, vp_s)
    in_flight = np.minimum(pp_s, m_s) * share * np.where(vp_s > 1, 1 + (pp_s - 1) / (pp_s * vp_s), 1.0)
    act = a_layers * in_flight + a_once + a_rec
    ep_factor = 1.0 - expert_share + expert_share / ep_s
    dpc = dp_s * cp_s
    mp = tp_s / share
    # torchtitan FSDP + PP: the stage stays gathered, its gradients unsharded in fp32 (parallel.py)
    kept = (z_s >= 3) & (pp_s > 1) & (dpc > 1) & (w.framework in FSDP_PP_GATHER_ONCE)
    mem_states = np.zeros_like(pp_s)
    grads = np.zeros_like(pp_s)
    for name, (b0, stage) in _state_bytes(model, w).items():
        b = np.full_like(pp_s, b0)
        if name.startswith("gradients") and not pure:
            # mixed precision keeps fp32 gradients without ZeRO, 16-bit ones with it (memory.py)
            b = np.where(z_s >= 1, b0 * c_bytes / 4.0, b0)
        local = np.where(z_s >= stage, b / (mp * dpc), b * ep_factor / mp)
        if name.startswith("gradients"):
            grads = local
            local = np.where(kept, b / c_bytes * FSDP_PP_GRAD_BYTES / mp, local)  # elements x fp32
        mem_states += local
    buffers = np.where((z_s == 0) & (dpc > 1), grads, 0.0)
    buffers += np.where(
        z_s >= 3, np.where(kept, model.total_params * c_bytes / mp, 2 * per_layer_params * c_bytes / tp_s), 0.0
    )
    buffers += np.where(
        (z_s >= 1) & (z_s <= 2), np.minimum(_ZERO_BUCKET_ELEMENTS, model.total_params / mp) * c_bytes, 0.0
    )
    runtime_const = (
        runtime.CUDA_CONTEXT_BYTES + runtime.cublas_workspace_bytes(gpu.cc) + (runtime.NCCL_BYTES if n > 1 else 0.0)
    )
    mem: np.ndarray = (mem_states + buffers + act) * (1 + runtime.ALLOCATOR_SLACK_FRACTION) + runtime_const
    return mem


def _rank(
    model: ModelSpec, w: Workload, cluster: Cluster, g: _Grid, gb: int, top: int, rejected: Counter[str]
) -> tuple[list[LayoutResult], int, int]:
    """Every candidate's step time and screened memory at once; then the fastest that fit, confirmed
    by the full memory and time estimates. Returns (best, evaluated, fitting)."""
    gpu, n = cluster.gpu, cluster.num_gpus
    sh = np.concatenate(g.axes["shape"])
    lay = {k: np.concatenate(g.axes[k]) for k in ("pp", "vp", "dp", "m", "z")}
    keys = np.array([k[:4] for k in g.shape_keys], dtype=np.float64)
    lay |= {"tp": keys[sh, 0], "cp": keys[sh, 1], "ep": keys[sh, 2]}
    fields = {
        f.name: np.array([getattr(r, f.name) for r in g.prof_rows], dtype=np.float64)[sh]
        for f in dataclasses.fields(MicroProfile)
    }
    parts = compose(
        MicroProfile(**fields), cluster, lay["tp"], lay["cp"], lay["ep"], lay["pp"], lay["vp"], lay["dp"], lay["z"],
        lay["m"], w.sharding, w.framework in FSDP_PP_GATHER_ONCE,
    )  # fmt: skip
    mem = _screen_memory(model, w, cluster, np.array(g.act_rows, dtype=np.float64)[sh], lay)
    fits = mem <= runtime.usable_memory_bytes(gpu, w.ecc)
    evaluated, fitting = len(lay["pp"]), int(fits.sum())
    best: list[LayoutResult] = []
    order = np.argsort(np.where(fits, parts.step, np.inf), kind="stable")
    for rank in order[: min(CONFIRM, fitting)]:
        tp, cp, ep, mb, ckpt, sp = g.shape_keys[int(sh[rank])]
        pp, vp, z, m = (int(lay[k][rank]) for k in ("pp", "vp", "z", "m"))
        layout = Layout(tp, pp, vp, cp, ep, n // (tp * cp * pp), z, mb, m, ckpt, sp)
        wl = w.with_(gpu=gpu.name, num_gpus=n, global_batch=gb, grad_accum=1, cluster=None, **layout.keys())
        memory = estimate_memory(model, wl, gpu)
        if not memory.fits:
            rejected["over memory on the full estimate"] += 1
            continue
        t = estimate_training_time(model, wl, gpu, cluster)
        comm = t.exposed_comm_s / t.step_time_s
        best.append(LayoutResult(layout, wl, t, memory, float(mem[rank]), comm, t.bubble_s / t.step_time_s))
        if len(best) >= top:
            break
    best.sort(key=lambda r: r.time.step_time_s)
    return best, evaluated, fitting


def search_layouts(
    model: ModelSpec,
    w: Workload,
    cluster: Cluster,
    top: int = 5,
    allow_cross_node_tp: bool = False,
    checkpointing: tuple[str, ...] = CHECKPOINTING,
) -> SearchResult:
    """The `top` fastest layouts of training workload `w` on `cluster` that fit in memory: the
    candidates enumerated as masks and counted first, then one operator profile per shape, every
    layout's step and memory screened at once (numpy), and the fastest confirmed in full.
    `checkpointing` limits the activation-checkpointing modes tried (a launch keeps the workload's)."""
    _check_searchable(model, w)
    if not w.nvlink:
        cluster = dataclasses.replace(cluster, gpu=comm.without_nvlink(cluster.gpu))
    t0 = time.perf_counter()
    n = cluster.num_gpus
    gb = w.global_batch or w.batch_size * w.grad_accum * n
    rejected: Counter[str] = Counter()
    # an adapter job (LoRA/QLoRA) runs under PEFT trainers (accelerate, FSDP, DeepSpeed, Axolotl,
    # LLaMA-Factory, torchtune), which split no tensors, pipelines, sequences or experts: data
    # parallel layouts only, unless the workload sets those keys itself
    # data parallel layouts only, as for a framework that runs nothing else (frameworks.toml `parallel`)
    dp_only = w.task in ("lora", "qlora") or (
        w.framework is not None and frameworks.frameworks()[w.framework].data_parallel
    )
    held = [k for k in PINNABLE if k not in w.model_fields_set] if dp_only else []
    w = w.with_(**dict.fromkeys(held, 1)) if held else w
    pinned, tps, cps, eps = _parallel_axes(model, w, cluster, allow_cross_node_tp, rejected)
    stages = FRAMEWORK_ZERO_STAGES.get(w.framework or "", ZERO_STAGES)
    axes = (tps, cps, eps)
    zero_pp = w.framework in FSDP_PP_GATHER_ONCE
    max_vp = FRAMEWORK_MAX_VP.get(w.framework or "", MAX_MICRO_BATCH)
    kept, weighed = _enumerate(
        n, gb, max(model.num_layers, 1), pinned, axes, rejected, checkpointing, stages, zero_pp, max_vp
    )
    if weighed > MAX_SEARCH_LAYOUTS:
        raise InvalidSettingError(
            f"The layout search for {model.name} on {cluster.label} weighs {weighed:,} candidate layouts, over its "
            f"limit of {MAX_SEARCH_LAYOUTS:,}. Narrow it: fewer nodes, no cross-node tensor parallelism "
            "(allow_cross_node_tp), or fix tp, pp, cp or ep in the workload (e.g. tp: 8)."
        )
    g = _profile(model, w, cluster, kept, checkpointing)
    best: list[LayoutResult] = []
    evaluated = fitting = 0
    if g.shape_keys:
        best, evaluated, fitting = _rank(model, w, cluster, g, gb, top, rejected)
    notes = cluster.warnings()
    if set(pinned) - set(held):
        notes.append(
            "held as the workload sets them: " + ", ".join(f"{k} {v}" for k, v in pinned.items() if k not in held)
        )
    if stages != ZERO_STAGES:
        notes.append(f"framework {w.framework}: ZeRO stages {', '.join(map(str, stages))} only (what its launch runs)")
    if held:
        who = f"framework {w.framework}" if w.task not in ("lora", "qlora") else w.task
        notes.append(f"{who}: data-parallel layouts only (PEFT trainers split no tensors, pipelines or sequences)")
    if not best:
        notes.append(
            "no layout fits: add GPUs, lower the micro-batch or sequence length, or use a GPU with more memory"
        )
    return SearchResult(
        cluster=cluster,
        global_batch=gb,
        evaluated=evaluated,
        fitting=fitting,
        shapes=len(g.shape_keys),
        seconds=time.perf_counter() - t0,
        best=best,
        rejected=rejected,
        notes=notes,
    )
