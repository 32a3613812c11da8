"""The library API: one function per user action, returning plain JSON-ready data.

The CLI (and later the web app) are thin adapters over these functions; all numbers they show
come from here, in SI units.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from gpuplan.errors import InvalidSettingError, ModelConfigError, did_you_mean
from gpuplan.estimators import uncertainty
from gpuplan.estimators.cost import CostEnergy, busy_share, cost_and_energy, training_job
from gpuplan.estimators.memory import MemoryEstimate, estimate_memory
from gpuplan.estimators.perf import (
    InferenceTime,
    Op,
    TrainingTime,
    compute_roof,
    estimate_inference_time,
    estimate_training_time,
)
from gpuplan.planner.recommend import Option, pareto_front, plan_options
from gpuplan.safeio import YamlSyntaxError, clip, clip_repr, load_json, load_yaml
from gpuplan.specs.cluster import Cluster, parse_cluster
from gpuplan.specs.context import Context
from gpuplan.specs.gpu import GB, GPU, Catalog, source_summary
from gpuplan.specs.model import ModelSpec, model_from_config
from gpuplan.specs.models import find_preset, load_model, presets
from gpuplan.specs.precision import COMPUTE_PRECISIONS, compute_peak
from gpuplan.specs.prices import Price
from gpuplan.specs.workload import Workload, make_workload, read_user_text, read_workload_file

DEFAULT_CONTEXT: Final = 2048  # tokens; the context at which `model` reports FLOPs per token


def context(ctx: Context | None = None) -> Context:
    """The caller's context, or a fresh one with no user files (the environment still applies)."""
    return ctx if ctx is not None else Context()


def catalog(ctx: Context | None = None) -> Catalog:
    """The bundled catalog plus the context's files (and $GPUPLAN_CATALOG): catalog rows (TOML)
    and calibration files (YAML from `gpuplan bench`), which replace the efficiencies of the GPUs
    they measured."""
    return context(ctx).catalog


def precision_support(gpu: GPU) -> dict[str, dict[str, Any]]:
    """For each compute precision: the peak a matmul gets, what runs it, and why if it falls back."""
    out: dict[str, dict[str, Any]] = {}
    for p in COMPUTE_PRECISIONS:
        peak = compute_peak(gpu, p)
        out[p] = {
            "native": peak.reason == "",
            "runs_as": peak.runs_as,
            "flop_per_s": peak.flop_per_s,
            "reason": peak.reason,
        }
    return out


def quirks(gpu: GPU) -> list[str]:
    """What a planner must know about a GPU beyond its headline numbers, as sentences."""
    q: list[str] = []
    if gpu.fp16_fp16acc_flop_per_s and gpu.peak_flop_per_s.get("fp16"):
        ratio = gpu.fp16_fp16acc_flop_per_s / gpu.peak_flop_per_s["fp16"]  # type: ignore[operator]
        if ratio > 1.01:
            q.append(
                f"FP16/BF16 tensor math with FP32 accumulate (what mixed-precision training uses) runs at "
                f"1/{ratio:.0f} of the FP16-accumulate rate ({gpu.fp16_fp16acc_flop_per_s / 1e12:.0f} TFLOP/s)."
            )
    for p in ("bf16", "tf32", "fp8", "int8", "int4"):
        reason = compute_peak(gpu, p).reason
        if reason:
            q.append(reason)
    if gpu.graphics == "none":
        q.append("No graphics mode: no display outputs and no graphics vGPU; compute only.")
    if gpu.geforce_eula:
        q.append("GeForce driver licence (clause 2.1.3) forbids datacenter deployment.")
    if not gpu.multi_node:
        q.append("Meant for one host: no scale-out fabric; multi-node jobs only over Ethernet/PCIe NICs.")
    if gpu.nvlink_domain <= 1:
        q.append("No NVLink: GPU-to-GPU traffic goes over PCIe.")
    elif gpu.nvlink_domain == 2:
        q.append("NVLink bridge joins pairs only; beyond two GPUs traffic goes over PCIe.")
    return q


def gpu_record(gpu: GPU) -> dict[str, Any]:
    """A GPU as JSON (DESIGN.md's `gpus --json` keys, SI units)."""
    return {
        "name": gpu.name,
        "aliases": list(gpu.aliases),
        "vendor": gpu.vendor,
        "architecture": gpu.architecture,
        "chip": gpu.chip,
        "compute_capability": gpu.compute_capability or None,
        "form_factor": gpu.form_factor,
        "memory_bytes": gpu.memory_bytes,
        "memory_unit_stated": gpu.memory_unit_stated,
        "memory_type": gpu.memory_type,
        "memory_bandwidth_bytes_per_s": gpu.memory_bandwidth_bytes_per_s,
        "peak_flop_per_s": dict(gpu.peak_flop_per_s),
        "fp16_fp16acc_flop_per_s": gpu.fp16_fp16acc_flop_per_s,
        "fp4_flop_per_s": gpu.fp4_flop_per_s,
        "tdp_watts": gpu.tdp_watts,
        "nvlink_bandwidth_bytes_per_s": gpu.nvlink_bandwidth_bytes_per_s,
        "nvlink_domain": gpu.nvlink_domain,
        "pcie_gen": gpu.pcie_gen,
        "multi_node": gpu.multi_node,
        "mig_instances": gpu.mig_instances,
        "graphics": gpu.graphics,
        "display_outputs": gpu.display_outputs,
        "vgpu": gpu.vgpu,
        "rt_cores": gpu.rt_cores,
        "rt_core_gen": gpu.rt_core_gen,
        "nvenc": gpu.nvenc,
        "nvdec": gpu.nvdec,
        "launch_year": gpu.launch_year,
        "geforce_eula_forbids_datacenter": gpu.geforce_eula,
        "precision_support": precision_support(gpu),
        "quirks": quirks(gpu),
        "notes": gpu.notes,
        "sources": source_summary(gpu),
    }


def list_gpus(
    *,
    min_memory_gb: float | None = None,
    dtype: str | None = None,
    graphics: bool | None = None,
    multi_node: bool | None = None,
    vendor: str | None = None,
    ctx: Context | None = None,
) -> list[GPU]:
    """Catalog GPUs passing every given filter (memory in decimal GB, as on datasheets)."""
    if dtype is not None and dtype.lower() not in COMPUTE_PRECISIONS:
        raise InvalidSettingError(
            f"The 'dtype' filter must be one of {', '.join(COMPUTE_PRECISIONS)}. Got {dtype!r} instead."
        )
    if min_memory_gb is not None and min_memory_gb < 0:
        raise InvalidSettingError(f"The 'min-memory' filter must be >= 0 GB. Got {min_memory_gb} instead.")
    out = []
    for g in catalog(ctx):
        if min_memory_gb is not None and g.memory_bytes < min_memory_gb * GB:
            continue
        if dtype is not None and not g.supports(dtype.lower()):
            continue
        if graphics is not None and (g.graphics != "none") != graphics:
            continue
        if multi_node is not None and g.multi_node != multi_node:
            continue
        if vendor is not None and g.vendor.lower() != vendor.lower():
            continue
        out.append(g)
    return out


def get_gpu(name: str, ctx: Context | None = None) -> GPU:
    return catalog(ctx).get(name)


def compare_gpus(names: Sequence[str], ctx: Context | None = None) -> list[GPU]:
    if len(names) < 2:
        raise InvalidSettingError(f"compare needs at least two GPUs. Got {len(names)}.")
    cat = catalog(ctx)
    return [cat.get(n) for n in names]


def get_model(name_or_path: str, files: bool = True) -> ModelSpec:
    """A preset, a local config.json (unless `files` is False) or a hub id."""
    return load_model(name_or_path, files)


def default_context(spec: ModelSpec) -> int:
    """The context for FLOPs per token when none is given: 2048 tokens, or the model's own
    maximum where it is shorter (BERT 512; ViT-B/16 at 224 px sees 197 tokens)."""
    if spec.max_position_embeddings:
        return min(DEFAULT_CONTEXT, spec.max_position_embeddings)
    return DEFAULT_CONTEXT


# the longest context `model --seq-len` takes: the workload's own seq_len bound (specs/workload.py)
MAX_CONTEXT_LEN: Final = 10_000_000


def model_record(spec: ModelSpec, context_len: int | None = None) -> dict[str, Any]:
    """A model as JSON (DESIGN.md's `model --json` keys): parameters, shapes, KV and FLOPs."""
    if context_len is None:
        context_len = default_context(spec)
    if not 0 < context_len <= MAX_CONTEXT_LEN:
        raise InvalidSettingError(
            f"The 'seq-len' parameter must be a positive number of tokens, at most {MAX_CONTEXT_LEN:,}. "
            f"Got {clip(context_len)}."
        )
    preset = find_preset(spec.name)
    windows = sorted({a.window for a in spec.attention_layers if a.window})
    return {
        "name": spec.name,
        "model_type": spec.model_type,
        "kind": spec.kind,
        "total_params": spec.total_params,
        "active_params": spec.active_params,
        "embedding_params": spec.embedding_params,
        "params_by_role": spec.params_by_role(),
        "num_layers": spec.num_layers,
        "hidden_size": spec.hidden_size,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "intermediate_size": spec.intermediate_size,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_position_embeddings,
        "tie_word_embeddings": spec.tie_word_embeddings,
        "attention_type": spec.attention_type,
        "sliding_windows": windows,
        "num_experts": spec.num_experts,
        "experts_per_token": spec.experts_per_token,
        "num_shared_experts": spec.num_shared_experts,
        "kv_bytes_per_token": spec.kv_bytes_per_token(2.0),
        "kv_bytes_per_token_beyond_windows": spec.kv_bytes_per_token(2.0, past_windows=True),
        "cross_kv_bytes_per_input_token": spec.cross_kv_bytes_per_input_token(2.0),
        "flops_per_token": spec.flops_per_token(context_len),
        "flops_per_token_context": context_len if spec.kind != "cnn" else None,
        "flops_per_token_unit": "image" if spec.kind == "cnn" else "token",
        "matmul_flops_per_token": spec.matmul_flops_per_token() if spec.kind != "cnn" else None,
        "linear_layers": [
            {"name": g.name, "in_features": g.linear[0], "out_features": g.linear[1], "count": g.count}
            for g in spec.linear_layers()
            if g.linear is not None
        ],
        "preset": None
        if preset is None
        else {
            "hf_id": preset.hf_id,
            "source": preset.source,
            "published_params": preset.published_params,
            "published_params_source": preset.published_params_source,
        },
    }


def model_from_json(config: Any, name: str | None = None) -> ModelSpec:
    """A model from a config.json's parsed content (pasted or uploaded, e.g. in the web app). It is
    read as data only, as `load_model` reads a file: no code from the model's repository runs."""
    if not isinstance(config, Mapping):
        raise ModelConfigError(f"A config.json must hold a JSON object. Got {type(config).__name__}.")
    label = (name or "").strip() or str(config.get("_name_or_path") or "") or "custom model"
    return model_from_config(config, label)


def list_models() -> list[dict[str, Any]]:
    """The bundled presets with their sizes."""
    out = []
    for p in presets().values():
        spec = load_model(p.name)
        out.append(
            {
                "name": p.name,
                "hf_id": p.hf_id,
                "model_type": spec.model_type,
                "total_params": spec.total_params,
                "active_params": spec.active_params,
            }
        )
    return out


# --- memory: estimate, fit, validate ------------------------------------------------------------


def build_workload(source: str | None, overrides: Mapping[str, Any] | None = None) -> Workload:
    """A workload from a YAML file, or from a model name plus keys (CLI flags win over the file)."""
    keys = {k: v for k, v in (overrides or {}).items() if v is not None}
    if source is not None and source.lower().endswith((".yaml", ".yml")):
        return read_workload_file(source, keys)
    if source is not None:
        keys["model"] = source  # a preset, a config.json (or its folder), or a hub id
    if "model" not in keys:
        raise InvalidSettingError(
            "Give a workload YAML file or a model name (e.g. gpuplan fit llama-3.1-8b --gpu 4090)."
        )
    return make_workload(keys)


def parse_set_options(items: Iterable[str]) -> dict[str, Any]:
    """`--set key=value` pairs, values read as YAML scalars (safe loader)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise InvalidSettingError(f"--set needs KEY=VALUE. Got {clip_repr(item)}.")
        key, value = item.split("=", 1)
        try:  # the bounded loader: an alias bomb, deep nesting or a 5,000-digit integer is one line
            out[key.strip()] = load_yaml(value, f"--set {key.strip()}") if value.strip() else None
        except YamlSyntaxError:  # not YAML at all: the text as it is
            out[key.strip()] = value
    return out


def _gpu_for(w: Workload, cat: Catalog) -> GPU | None:
    return cat.get(w.gpu) if w.gpu else None


def resolve_cluster(w: Workload, cat: Catalog, spec: str | None = None) -> tuple[Workload, Cluster | None]:
    """The workload with `gpu` and `num_gpus` taken from its cluster (the `cluster` key or `spec`),
    and the cluster; (w, None) when neither names one. A `gpu` or `num_gpus` that contradicts the
    cluster is an error."""
    text = spec or w.cluster
    if not text:
        return w, None
    cl = parse_cluster(text, cat)
    if w.gpu and cat.get(w.gpu).name != cl.gpu.name:
        raise InvalidSettingError(f"gpu: {w.gpu} contradicts the cluster {text!r} ({cl.gpu.name}); drop one of them.")
    if "num_gpus" in w.model_fields_set and w.num_gpus not in (1, cl.num_gpus):
        raise InvalidSettingError(
            f"num_gpus: {w.num_gpus} contradicts the cluster {text!r} ({cl.num_gpus} GPUs); drop one of them."
        )
    return w.with_(gpu=cl.gpu.name, num_gpus=cl.num_gpus, cluster=cl.label), cl


def memory_record(e: MemoryEstimate) -> dict[str, Any]:
    """The memory part of DESIGN.md's estimate contract, with the breakdown's notes."""
    rec: dict[str, Any] = {}
    _with_band(rec, "per_gpu_bytes", e.per_gpu_bytes, f"memory/{e.gpu.architecture}" if e.gpu else "memory/none")
    rec |= {
        "breakdown": e.breakdown(),
        "fits": e.fits,
        "capacity_bytes": e.capacity_bytes,
        "headroom_bytes": e.headroom_bytes,
        "allocated_bytes": e.allocated_bytes,
        "reserved_bytes": e.reserved_bytes,
        "host_bytes": e.host_bytes,
        "paged_spill_bytes": e.paged_spill_bytes,
        "on_card_bytes": e.on_card_bytes,
        "peak_phase": e.peak_phase,
        "phases": e.phases,
        "trainable_params": e.trainable_params,
        "lines": [{"name": x.name, "bytes": x.bytes, "kind": x.kind, "note": x.note} for x in e.lines],
        "not_at_peak": {x.name: x.bytes for x in e.not_at_peak},
        "notes": list(e.notes),
    }
    if e.serving is not None:
        s = e.serving
        rec["serving"] = {
            "gpu_memory_utilization": s.gpu_memory_utilization,
            "kv_budget_bytes": s.kv_budget_bytes,
            "kv_bytes_per_token": s.kv_bytes_per_token,
            "max_tokens": s.max_tokens,
            "max_sequences": s.max_sequences,
        }
    return rec


def _with_band(rec: dict[str, Any], key: str, value: float | None, kind: str, time: bool = False) -> None:
    """rec[key] = value, plus rec[key_low] / rec[key_high] from the validation residuals of `kind`
    (`time`: the figure is a duration, whose error runs opposite to its rate's)."""
    rec[key] = value
    if value is None:
        return
    b = uncertainty.band(kind)
    if b is not None:
        low, high = b.range(value, time)
        rec[f"{key}_low"], rec[f"{key}_high"] = low, high


def _ops_record(ops: Iterable[Op]) -> list[dict[str, Any]]:
    """Operators merged by (name, phase), largest time first."""
    merged: dict[tuple[str, str], list[float]] = {}
    bound: dict[tuple[str, str], str] = {}
    for o in ops:
        key = (o.name, o.phase)
        acc = merged.setdefault(key, [0.0, 0.0, 0.0])
        acc[0] += o.time_s
        acc[1] += o.flops
        acc[2] += o.bytes
        bound[key] = o.bound
    order = sorted(merged, key=lambda k: -merged[k][0])
    return [
        {"name": k[0], "phase": k[1], "time_s": merged[k][0], "flops": merged[k][1], "bytes": merged[k][2],
         "bound": bound[k]}
        for k in order
    ]  # fmt: skip


def time_record(t: TrainingTime | InferenceTime, arch: str, model_kind: str = "decoder") -> dict[str, Any]:
    """The time part of DESIGN.md's estimate contract, each figure with its validation range."""
    rec: dict[str, Any] = {}

    def k(what: str) -> str:
        return uncertainty.kind_of(what, model_kind, arch)

    if isinstance(t, TrainingTime):
        kind = k("training")
        _with_band(rec, "step_time_s", t.step_time_s, kind, time=True)
        _with_band(rec, "tokens_per_s", t.tokens_per_s, kind)
        rec["tokens_per_s_per_gpu"] = t.tokens_per_s_per_gpu
        rec["tokens_per_step"] = t.tokens_per_step
        rec["mfu"] = t.mfu
        rec["hfu"] = t.hfu
        rec["model_flops_per_token"] = t.model_flops_per_token
        _with_band(rec, "time_to_train_s", t.time_to_train_s, kind, time=True)
        rec["train_tokens"] = t.train_tokens
        rec["bottleneck"] = t.bottleneck
        rec["compute_s"] = t.compute_s
        rec["exposed_comm_s"] = t.exposed_comm_s
        rec["bubble_s"] = t.bubble_s
        rec["ops"] = _ops_record(t.ops)
        b = uncertainty.band(kind)
        rec["uncertainty"] = b.record(t.tokens_per_s) if b else None
    else:
        _with_band(rec, "ttft_s", t.ttft_s, k("prefill"), time=True)
        rec["ttft_single_request_s"] = t.ttft_single_s
        _with_band(rec, "tpot_s", t.tpot_s, k("decode"), time=True)
        _with_band(rec, "output_tokens_per_s", t.output_tokens_per_s, k("serving throughput"))
        rec["request_latency_s"] = t.request_latency_s
        rec["batch"] = t.batch
        rec["replicas"] = t.replicas
        rec["max_batch"] = t.max_batch
        _with_band(rec, "best_output_tokens_per_s", t.best_output_tokens_per_s, k("serving throughput"))
        rec["best_batch"] = t.best_batch
        rec["prefill_tokens_per_s"] = t.prefill_tokens_per_s
        rec["bottleneck"] = t.bottleneck
        rec["prefill_ops"] = _ops_record(t.prefill_ops)
        rec["decode_ops"] = _ops_record(t.decode_ops)
        b = uncertainty.band(k("serving throughput"))
        rec["uncertainty"] = b.record(t.output_tokens_per_s) if b else None
    rec["notes"] = list(t.notes)
    return rec


def cost_record(ce: CostEnergy) -> dict[str, Any]:
    return {
        "usd": ce.usd,
        "usd_per_gpu_hour": ce.usd_per_gpu_hour,
        "price_source": ce.price_source,
        "gpu_hours": ce.gpu_hours,
        "usd_per_million_tokens": ce.usd_per_million_tokens,
    }


def energy_record(ce: CostEnergy) -> dict[str, Any]:
    return {
        "kwh": ce.energy_kwh,
        "avg_power_w_per_gpu": ce.avg_power_w,
        "kwh_per_million_tokens": ce.kwh_per_million_tokens,
        "co2_kg": ce.co2_kg,
        "basis": "GPU board power = TDP x (0.2 + 0.8 x busy share), busy from the operators' bounds; GPU only",
    }


def prices(ctx: Context | None = None, spot: bool = False) -> dict[str, Price]:
    """The cheapest offer per GPU: a user's price file (same columns) overrides the bundled one."""
    return context(ctx).prices(spot)


def estimate(
    w: Workload,
    ctx: Context | None = None,
    carbon_g_per_kwh: float | None = None,
    model: ModelSpec | None = None,
) -> dict[str, Any]:
    """`gpuplan estimate`: memory, time, cost and energy of one workload (DESIGN.md's contract).
    `model` (e.g. from a pasted config.json) stands in for the workload's `model` name."""
    cat = catalog(ctx)
    model = model or load_model(w.model)
    w, cl = resolve_cluster(w, cat)
    gpu = _gpu_for(w, cat)
    e = estimate_memory(model, w, gpu)
    mem = memory_record(e)
    out: dict[str, Any] = {
        "workload": w.model_dump(exclude_none=True),
        "model": model.name,
        "gpu": gpu.name if gpu else None,
        "num_gpus": w.num_gpus,
        "throughput_unit": "images/s" if model.kind == "cnn" else "tokens/s",
        "memory": mem,
    }
    if gpu is None:
        out["time"] = None
        out["notes"] = ["no GPU given: time, cost and energy need one (gpu: NAME)"]
        return out
    price = prices(ctx).get(gpu.name)
    t: TrainingTime | InferenceTime
    if w.is_training:
        t = estimate_training_time(model, w, gpu, cl)
        seconds, ce = training_job(t, gpu, w.num_gpus, price, carbon_g_per_kwh)
    else:
        cap = e.serving.max_sequences if e.serving else w.batch_size
        t = estimate_inference_time(model, w, gpu, max_batch=max(cap, w.batch_size))
        rate = t.output_tokens_per_s
        # one batch of requests: its output tokens, or the images / input tokens of a one-pass model
        tokens = w.tokens or (w.batch_size * max(w.output_len, 1) if t.decode_ops else rate * t.ttft_s)
        seconds = tokens / rate if rate > 0 else t.request_latency_s
        busy = busy_share((o.bound, o.time_s) for o in t.running_ops)
        ce = cost_and_energy(gpu, w.num_gpus, seconds, busy, price, tokens, carbon_g_per_kwh)
    out["time"] = time_record(t, gpu.architecture, model.kind)
    out["time"]["job_s"] = seconds
    out["cost"] = cost_record(ce)
    out["energy"] = energy_record(ce)
    return out


def fit(w: Workload, ctx: Context | None = None, model: ModelSpec | None = None) -> dict[str, Any]:
    """`gpuplan fit`: with a GPU, the breakdown, inverse questions and suggestions; without one,
    every catalog GPU with whether it fits (and its breakdown at num_gpus) and the fewest GPUs of
    that type that do. `model` stands in for the workload's `model` name."""
    # imported here: only `fit` needs the inverse questions (keeps `gpuplan plan` start-up short)
    from gpuplan.planner.fit import (
        GpuCount,
        best_precision,
        largest_batch,
        longest_context,
        smallest_gpu_count,
        suggestions,
    )

    if w.is_graphics:
        return plan(w, ctx, model=model)
    cat = catalog(ctx)
    model = model or load_model(w.model)
    w, _ = resolve_cluster(w, cat)
    gpu = _gpu_for(w, cat)
    if gpu is not None:
        e = estimate_memory(model, w, gpu)
        count = smallest_gpu_count(model, w, gpu)
        out: dict[str, Any] = {
            "model": model.name,
            "gpu": gpu.name,
            "num_gpus": w.num_gpus,
            "workload": w.model_dump(exclude_none=True),
            "memory": memory_record(e),
            "min_gpus": count.num_gpus,
            "min_gpus_layout": count.layout,
            "largest_batch": largest_batch(model, w, gpu),
            "longest_context": longest_context(model, w, gpu),
            "suggestions": [
                {"label": s.label, "change": s.change, "per_gpu_bytes": s.per_gpu_bytes, "fits": s.fits, "cost": s.cost}
                for s in suggestions(model, w, gpu)
            ],
        }
        if not w.is_training:
            best = best_precision(model, w, gpu)
            out["best_precision"] = {"weight_dtype": best[0], "kv_dtype": best[1]} if best else None
        return out
    rows = []
    for g in cat:
        e = estimate_memory(model, w, g)
        need: GpuCount | None = smallest_gpu_count(model, w, g) if not e.fits else None
        row: dict[str, Any] = {"gpu": g.name, "memory_bytes": g.memory_bytes, "fits": e.fits}
        _with_band(row, "per_gpu_bytes", e.per_gpu_bytes, f"memory/{g.architecture}")
        row["capacity_bytes"] = e.capacity_bytes
        row["breakdown"] = e.breakdown()
        rows.append(
            row
            | {
                "headroom_bytes": e.headroom_bytes,
                "paged_spill_bytes": e.paged_spill_bytes,
                "min_gpus": w.num_gpus if e.fits else (need.num_gpus if need else None),
                "min_gpus_layout": {} if e.fits or need is None else need.layout,
                "min_gpus_per_gpu_bytes": e.per_gpu_bytes
                if e.fits
                else (need.estimate.per_gpu_bytes if need and need.estimate else None),
            }
        )
    rows.sort(key=lambda r: (r["min_gpus"] is None, r["min_gpus"] or 0, r["memory_bytes"]))
    return {"model": model.name, "num_gpus": w.num_gpus, "workload": w.model_dump(exclude_none=True), "gpus": rows}


def validate(file: str | Path | None = None, ctx: Context | None = None, category: str | None = None) -> dict[str, Any]:
    """`gpuplan validate`: predicted vs published for every row gpuplan can express (of one category,
    e.g. measured-h200, when `category` is given)."""
    from gpuplan.planner.validation import bundled_rows, file_rows, result_record, run_rows, summary, summary_by_kind

    rows = file_rows(file) if file is not None else bundled_rows()
    if category is not None:
        known = sorted({r["category"] for r in rows})
        if category not in known:
            raise InvalidSettingError(f"No validation rows of category {category!r}. Categories: {', '.join(known)}.")
        rows = [r for r in rows if r["category"] == category]
    results, skipped = run_rows(rows, catalog(ctx))
    return {
        "rows": [dict(result_record(r)) for r in results],
        "summary": summary(results),
        "by_kind": summary_by_kind(results),
        "skipped": [{"id": s.id, "category": s.category, "reason": s.reason} for s in skipped],
    }


def residual_file(validation: Mapping[str, Any]) -> dict[str, Any]:
    """The residuals file (error bars) from a `validate` result: bundled rows only, fit verdicts excluded."""
    pairs = []
    for r in validation["rows"]:
        if r["unit"] == "fits" or not r["kind"]:
            continue
        err = float(r["error"])
        metric = str(r["metric"]).lower()
        if r["unit"].strip().lower() in ("ms", "s") or "first_token" in metric or "per_output_token" in metric:
            err = 1.0 / (1.0 + err) - 1.0  # a time's error as its rate's: predicted/true speed - 1
        pairs.append((r["kind"], err))
    return uncertainty.residual_table(pairs)


def use_case_record(gpu: GPU) -> dict[str, Any]:
    """`gpus --use-cases`: suitability for compute, graphics and multi-node work, and advice."""
    from gpuplan.planner.use_cases import use_cases

    u = use_cases(gpu)
    return {
        "name": u.name,
        "compute": u.compute,
        "graphics": u.graphics,
        "graphics_class": u.graphics_class,
        "multi_node": u.multi_node,
        "recommendation": u.recommendation,
    }


def plan(
    w: Workload,
    ctx: Context | None = None,
    gpus: Sequence[str] = (),
    top: int | None = None,
    spot: bool = False,
    carbon_g_per_kwh: float | None = None,
    cluster: str | None = None,
    allow_cross_node_tp: bool = False,
    model: ModelSpec | None = None,
) -> dict[str, Any]:
    """`gpuplan plan`: ranked options (DESIGN.md's plan contract) for any workload; with a cluster
    (`cluster` or the `cluster` key) and a training job, the best parallel layouts on it. Each
    option says whether it is on the time-cost Pareto front (`pareto`)."""
    cat = catalog(ctx)
    if w.is_graphics:
        return _plan_graphics(w, cat, model)
    model = model or load_model(w.model)
    if (cluster or w.cluster) and w.is_training:
        return plan_cluster(w, cat, model, cluster, top or 5, ctx, spot, carbon_g_per_kwh, allow_cross_node_tp)
    # each GPU once, however often (or under however many aliases) it is named: "H100" and
    # "h100 sxm" are one card, and a request listing it 200 times plans it once
    chosen = list({g.name: g for g in (cat.get(name) for name in gpus)}.values()) if gpus else None
    opts = plan_options(model, w, cat, prices(ctx, spot), chosen, carbon_g_per_kwh=carbon_g_per_kwh)
    shown = opts if top is None else opts[:top]
    service = not w.is_training and w.tokens is None
    records = [option_record(o, model.kind) for o in shown]
    # the front is taken over the usable options: a cheap one that misses the deadline is no choice
    front = pareto_front([_time_cost(r) if r["usable"] else None for r in records])
    for r, on in zip(records, front, strict=True):
        r["pareto"] = on
    return {
        "workload": w.model_dump(exclude_none=True),
        "model": model.name,
        "objective": w.objective,
        "mode": "training" if w.is_training else ("service" if service else "batch inference"),
        "deadline_s": w.deadline,
        "budget_usd": w.budget,
        "options": records,
        "considered": len(opts),
        "throughput_unit": "images/s" if model.kind == "cnn" else "tokens/s",
    }


def _time_cost(r: Mapping[str, Any]) -> tuple[float, float] | None:
    """An option's (time, cost) point for the Pareto front: for a service, request latency against
    the cost of serving for the deadline (an hour when none is given)."""
    t, usd = r.get("time_s"), r.get("cost_usd")
    if t is None or usd is None:
        return None
    return float(t), float(usd)


def plan_cluster(
    w: Workload,
    cat: Catalog,
    model: ModelSpec,
    spec: str | None,
    top: int,
    ctx: Context | None = None,
    spot: bool = False,
    carbon_g_per_kwh: float | None = None,
    allow_cross_node_tp: bool = False,
) -> dict[str, Any]:
    """The best layouts of a training job on a cluster (`gpuplan plan --cluster`)."""
    from gpuplan.planner.layouts import search_layouts

    w, cl = resolve_cluster(w, cat, spec)
    assert cl is not None
    res = search_layouts(model, w, cl, top=top, allow_cross_node_tp=allow_cross_node_tp)
    price = prices(ctx, spot).get(cl.gpu.name)
    kind = uncertainty.kind_of("training", model.kind, cl.gpu.architecture)
    layouts = []
    for r in res.best:
        t = r.time
        _, ce = training_job(t, cl.gpu, cl.num_gpus, price, carbon_g_per_kwh)
        rec: dict[str, Any] = {"layout": r.layout.label, "keys": r.layout.keys(), "dp": r.layout.dp}
        rec["micro_batches"] = r.layout.micro_batches
        _with_band(rec, "step_time_s", t.step_time_s, kind, time=True)
        _with_band(rec, "tokens_per_s", t.tokens_per_s, kind)
        rec["tokens_per_s_per_gpu"] = t.tokens_per_s_per_gpu
        rec["mfu"] = t.mfu
        _with_band(rec, "per_gpu_bytes", r.memory.per_gpu_bytes, f"memory/{cl.gpu.architecture}")
        rec["comm_share"] = r.comm_share
        rec["bubble_share"] = r.bubble_share
        rec["bottleneck"] = t.bottleneck
        if t.time_to_train_s is not None:
            _with_band(rec, "time_to_train_s", t.time_to_train_s, kind, time=True)
        rec["cost_usd"] = ce.usd
        rec["energy_kwh"] = ce.energy_kwh
        rec["breakdown_s"] = {o.name: o.time_s for o in t.ops if o.phase in ("communication", "optimizer", "launch")}
        layouts.append(rec)
    return {
        "workload": w.model_dump(exclude_none=True),
        "model": model.name,
        "mode": "cluster",
        "cluster": {
            "spec": cl.label,
            "gpu": cl.gpu.name,
            "nodes": cl.nodes,
            "gpus_per_node": cl.gpus_per_node,
            "num_gpus": cl.num_gpus,
            "interconnect": cl.fabric.name,
            "interconnect_note": cl.fabric.source,
        },
        "global_batch": res.global_batch,
        "layouts": layouts,
        "search": {
            "evaluated": res.evaluated,
            "fitting": res.fitting,
            "micro_batch_shapes": res.shapes,
            "seconds": res.seconds,
            "rejected": dict(res.rejected),
        },
        "notes": res.notes,
    }


def option_record(o: Option, model_kind: str = "decoder") -> dict[str, Any]:
    arch = o.gpu.architecture
    rec: dict[str, Any] = {
        "gpu": o.gpu.name,
        "num_gpus": o.num_gpus,
        "fits": o.fits,
        "layout": o.layout,
    }
    _with_band(rec, "per_gpu_bytes", o.memory.per_gpu_bytes if o.memory else None, f"memory/{arch}")
    kind = uncertainty.kind_of("training" if o.training else "serving throughput", model_kind, arch)
    _with_band(rec, "time_s", o.time_s, kind, time=True)
    _with_band(rec, "throughput", o.throughput, kind)
    rec["cost_usd"] = o.cost.usd if o.cost else None
    rec["usd_per_hour"] = o.cost.usd_per_gpu_hour * o.num_gpus if o.cost and o.cost.usd_per_gpu_hour else None
    rec["usd_per_million_tokens"] = o.cost.usd_per_million_tokens if o.cost else None
    rec["energy_kwh"] = o.cost.energy_kwh if o.cost else None
    rec["kwh_per_million_tokens"] = o.cost.kwh_per_million_tokens if o.cost else None
    rec["bottleneck"] = o.bottleneck
    rec["why"] = o.why
    rec["meets_deadline"] = o.meets_deadline
    rec["within_budget"] = o.within_budget
    rec["too_slow"] = o.too_slow
    rec["licence_barred"] = o.licence_barred
    rec["usable"] = o.ok  # fits, fast enough, licence-clean, within deadline and budget
    if o.training:
        rec["mfu"] = o.training.mfu
    if o.inference:
        rec["ttft_s"] = o.inference.ttft_s
        rec["tpot_s"] = o.inference.tpot_s
    return rec


def _plan_graphics(w: Workload, cat: Catalog, model: ModelSpec | None = None) -> dict[str, Any]:
    from gpuplan.planner.graphics import plan_graphics

    model = model or (load_model(w.model) if w.model else None)
    options, unsuitable = plan_graphics(w, cat, model)
    return {
        "workload": w.model_dump(exclude_none=True),
        "objective": w.objective,
        "options": [
            {
                "gpu": o.capacity.gpu.name,
                "num_gpus": o.num_gpus,
                "fits": True,
                "per_gpu": o.capacity.per_gpu,
                "unit": o.capacity.unit,
                "demand": o.demand,
                "hours": o.hours,
                "time_s": o.time_s,
                "cost_usd": o.cost_usd,
                "usd_per_hour": o.usd_per_hour,
                "energy_kwh": o.energy_kwh,
                "bottleneck": o.capacity.bottleneck,
                "limits": o.capacity.limits,
                "why": o.why,
            }
            for o in options
        ],
        "unsuitable": [{"gpu": u.gpu.name, "fits": False, "why": u.reason} for u in unsuitable],
    }


# --- the roofline ------------------------------------------------------------------------------


def roofline(w: Workload, ctx: Context | None = None, model: ModelSpec | None = None) -> dict[str, Any]:
    """The workload's operators on the roofline of its GPU (Williams, Waterman & Patterson,
    CACM 2009): each operator's arithmetic intensity (FLOPs per byte of memory traffic) against
    the FLOP/s it achieves in gpuplan's estimate, under the roofs min(peak, intensity x bandwidth).
    Operators without both FLOPs and bytes (communication, launch gaps) are listed apart."""
    if w.is_graphics:
        raise InvalidSettingError(f"A roofline needs a training or inference workload. Got task {w.task!r}.")
    cat = catalog(ctx)
    model = model or load_model(w.model)
    w, cl = resolve_cluster(w, cat)
    gpu = _gpu_for(w, cat)
    if gpu is None:
        raise InvalidSettingError("A roofline needs a GPU: set 'gpu' (e.g. gpu: H100).")
    if w.is_training:
        groups = [("step", estimate_training_time(model, w, gpu, cl).ops)]
    else:
        it = estimate_inference_time(model, w, gpu)
        groups = [("prefill", it.prefill_ops), ("decode", it.decode_ops)]
    runs_as, peak_flop_per_s = compute_roof(model, w, gpu)
    bandwidth = gpu.memory_bandwidth_bytes_per_s
    points: list[dict[str, Any]] = []
    off: list[dict[str, Any]] = []
    for stage, ops in groups:
        for o in _ops_record(ops):
            rec = {"stage": stage, **o}
            if o["flops"] > 0 and o["bytes"] > 0 and o["time_s"] > 0:
                intensity = o["flops"] / o["bytes"]
                rec["intensity_flop_per_byte"] = intensity
                rec["achieved_flop_per_s"] = o["flops"] / o["time_s"]
                rec["roof_flop_per_s"] = min(peak_flop_per_s, intensity * bandwidth)
                points.append(rec)
            else:
                off.append(rec)
    return {
        "gpu": gpu.name,
        "model": model.name,
        "task": w.task,
        "precision": w.precision,
        "peak_flop_per_s": peak_flop_per_s,
        "peak_runs_as": runs_as,
        "memory_bandwidth_bytes_per_s": bandwidth,
        "ridge_flop_per_byte": peak_flop_per_s / bandwidth,
        "points": points,
        "not_on_roofline": off,
    }


# --- the relative-performance chart -------------------------------------------------------------

# The reference workloads of `gpuplan chart relative` (speed only: memory fit is reported, not
# required, so every card gets a figure). 16-bit runs as bf16 where the card has it, else fp16.
CHART_MODEL: Final = "llama-3.1-8b"
CHART_TRAIN: Final = {"task": "pretrain", "seq_len": 2048, "batch_size": 4, "compile": True}
CHART_INFER: Final = {"task": "inference", "input_len": 1024, "output_len": 128, "batch_size": 64}
CHART_REFERENCE_GPU: Final = "H100 SXM5 80GB"


def chart_relative(ctx: Context | None = None) -> dict[str, Any]:
    """Each GPU's speed relative to H100 SXM = 100% on three reference workloads."""

    cat = catalog(ctx)
    model = load_model(CHART_MODEL)
    rows: list[dict[str, Any]] = []
    for g in cat:
        p16 = "bf16" if g.supports("bf16") else "fp16"
        train = make_workload({"model": CHART_MODEL, "gpu": g.name, "precision": p16, **CHART_TRAIN})
        inf16 = make_workload(
            {"model": CHART_MODEL, "gpu": g.name, "precision": p16, "weight_dtype": p16, "kv_dtype": p16, **CHART_INFER}
        )
        inf8 = inf16.with_(weight_dtype="fp8")
        rows.append(
            {
                "gpu": g.name,
                "architecture": g.architecture,
                "train_tokens_per_s": estimate_training_time(model, train, g).tokens_per_s,
                "infer16_tokens_per_s": estimate_inference_time(model, inf16, g).output_tokens_per_s,
                "infer8_tokens_per_s": estimate_inference_time(model, inf8, g).output_tokens_per_s,
                "fp8_native": g.supports("fp8"),
                "fits_train": bool(estimate_memory(model, train.with_(activation_checkpointing="full"), g).fits),
                "fits_infer16": bool(estimate_memory(model, inf16, g).fits),
            }
        )
    ref = next(r for r in rows if r["gpu"] == CHART_REFERENCE_GPU)
    for r in rows:
        r["train_16bit_pct"] = 100 * r["train_tokens_per_s"] / ref["train_tokens_per_s"]
        r["infer_16bit_pct"] = 100 * r["infer16_tokens_per_s"] / ref["infer16_tokens_per_s"]
        r["infer_8bit_pct"] = 100 * r["infer8_tokens_per_s"] / ref["infer16_tokens_per_s"]
        r["speedup_8bit_vs_16bit"] = r["infer8_tokens_per_s"] / r["infer16_tokens_per_s"]
    rows.sort(key=lambda r: -float(r["train_16bit_pct"]))
    return {
        "reference_gpu": CHART_REFERENCE_GPU,
        "workloads": {
            "model": CHART_MODEL,
            "training_16bit": {**CHART_TRAIN, "precision": "bf16 (fp16 where no bf16)"},
            "inference_16bit": {**CHART_INFER, "weights": "bf16", "kv": "bf16"},
            "inference_8bit": {
                **CHART_INFER,
                "weights": "fp8 (W8A8 on FP8 tensor cores; weight-only W8A16 where the card has none)",
                "kv": "bf16 (as the 16-bit run)",
            },
            "note": "speed of one GPU; memory fit is reported (fits_*), not required. 8-bit is relative to "
            "the H100's 16-bit figure, so the H100's own 8-bit gain shows.",
        },
        "rows": rows,
    }


# --- launch files ------------------------------------------------------------------------------


def _workload_from_plan(path: Path) -> tuple[Workload, str | None]:
    """A workload (with the best layout's keys) from `gpuplan plan --json` output."""
    text = read_user_text(path, "plan file", "Pass a workload YAML or the JSON `gpuplan plan --json` prints.")
    rec = load_json(text, path.name)  # bounded nesting, no NaN tokens, integers within 64 bits
    if not isinstance(rec, dict) or not isinstance(rec.get("workload"), dict):
        raise InvalidSettingError(f"{path.name} is not a `gpuplan plan --json` document (no 'workload').")
    keys = dict(rec["workload"])
    spec: str | None = None
    try:  # the document's shape, checked as it is read: a wrong one is one line, not a traceback
        if rec.get("mode") == "cluster" and rec.get("layouts"):
            keys.update(rec["layouts"][0]["keys"])
            keys["global_batch"] = rec.get("global_batch")
            spec = rec["cluster"]["spec"]
            if not isinstance(spec, str):
                raise TypeError("cluster.spec is not text")
            keys.update({"cluster": spec, "num_gpus": rec["cluster"]["num_gpus"], "gpu": rec["cluster"]["gpu"]})
        elif rec.get("options"):
            best = next((o for o in rec["options"] if o.get("usable")), rec["options"][0])
            keys.update({"gpu": best["gpu"], "num_gpus": best["num_gpus"]})
            keys.update({k: v for k, v in (best.get("layout") or {}).items() if k in Workload.model_fields})
        else:
            raise InvalidSettingError(f"{clip(path.name)} holds no plan options or layouts to launch.")
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        what = f"no {exc}" if isinstance(exc, KeyError) else clip(str(exc) or type(exc).__name__)
        raise InvalidSettingError(
            f"{clip(path.name)} is not a `gpuplan plan --json` document ({what}). Pass what `gpuplan plan --json` "
            "printed, unedited, or a workload YAML."
        ) from None
    return make_workload(keys), spec


def launch(
    source: str,
    fmt: str,
    overrides: Mapping[str, Any] | None = None,
    cluster: str | None = None,
    script: str = "train.py",
    script_args: Sequence[str] = (),
    ctx: Context | None = None,
    partition: str | None = None,
    gres: str | None = None,
    time_limit: str | None = None,
) -> dict[str, Any]:
    """`gpuplan launch`: the launch file for a workload (or a plan's best option) in `fmt`."""
    from gpuplan.interfaces.launch import FORMATS, plan_launch, render

    if fmt not in FORMATS:
        hint = did_you_mean(fmt, FORMATS)
        raise InvalidSettingError(f"Unknown launch format {fmt!r}.{hint} Known: {', '.join(FORMATS)}.")
    cat = catalog(ctx)
    if source.lower().endswith(".json"):
        w, spec = _workload_from_plan(Path(source))
        if overrides:
            w = w.with_(**{k: v for k, v in overrides.items() if v is not None})
        cluster = cluster or spec
    else:
        w = build_workload(source, overrides)
    w, cl = resolve_cluster(w, cat, cluster)
    model = load_model(w.model)
    lp = plan_launch(model, w.model, w, cl, cat, script, tuple(script_args))
    opts = {"partition": partition, "gres": gres, "time_limit": time_limit} if fmt == "slurm" else {}
    text = render(lp, fmt, **opts)
    return {
        "format": fmt,
        "text": text,
        "layout": lp.layout_label,
        "workload": lp.w.model_dump(exclude_none=True),
        "cluster": lp.cluster.label,
    }


def rent_vs_buy(
    gpu_name: str,
    hours_per_month: float = 200.0,
    years: float = 3.0,
    *,
    price_usd: float | None = None,
    purchase_price_file: str | Path | None = None,
    rent_usd_per_hour: float | None = None,
    usd_per_kwh: float | None = None,
    pue: float | None = None,
    hosting_usd_per_month: float | None = None,
    resale_fraction: float | None = None,
    ctx: Context | None = None,
) -> dict[str, Any]:
    """`gpuplan rent-vs-buy`: owning one GPU for `years` at `hours_per_month` against renting it
    on demand and on spot; USD, hours and watts (estimators/ownership.py holds the sourced defaults)."""
    from gpuplan.estimators import ownership as ow
    from gpuplan.specs.purchase import PURCHASE_COLUMNS, purchase_prices

    cat = catalog(ctx)
    gpu = cat.get(gpu_name)
    numbers = {
        "hours_per_month": hours_per_month,
        "years": years,
        "price": price_usd,
        "rent_usd_per_hour": rent_usd_per_hour,
        "usd_per_kwh": usd_per_kwh,
        "pue": pue,
        "hosting_usd_per_month": hosting_usd_per_month,
        "resale_fraction": resale_fraction,
    }
    for name, value in numbers.items():
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            raise InvalidSettingError(f"The '{name}' parameter must be a number. Got {value!r} instead.")
    if price_usd is not None:
        bought: dict[str, Any] = {"usd": float(price_usd), "kind": "user", "date": None, "source": "--price"}
    else:
        table = purchase_prices(cat, Path(purchase_price_file) if purchase_price_file else None)
        row = table.get(gpu.name)
        if row is None:
            raise InvalidSettingError(
                f"No purchase price for {gpu.name} in purchase.csv. Pass --price USD, or --purchase-prices FILE "
                f"with columns {', '.join(PURCHASE_COLUMNS)}. Listed: {', '.join(sorted(table))}."
            )
        bought = {"usd": row.usd, "kind": row.kind, "date": row.date, "source": f"{row.origin}: {row.source}"}
    o = ow.Ownership(
        purchase_usd=bought["usd"],
        years=float(years),
        hours_per_month=float(hours_per_month),
        board_power_w=ow.board_power_w(gpu),
        pue=ow.DEFAULT_PUE if pue is None else float(pue),
        usd_per_kwh=ow.DEFAULT_USD_PER_KWH if usd_per_kwh is None else float(usd_per_kwh),
        hosting_usd_per_month=(
            ow.DEFAULT_HOSTING_USD_PER_MONTH if hosting_usd_per_month is None else float(hosting_usd_per_month)
        ),
        resale_fraction=None if resale_fraction is None else float(resale_fraction),
    )
    own = ow.ownership_cost(o)  # validates every setting
    given = {"pue": pue, "usd_per_kwh": usd_per_kwh, "hosting_usd_per_month": hosting_usd_per_month}
    user_set = {key for key, value in {**given, "resale_fraction": resale_fraction}.items() if value is not None}
    offers: dict[str, tuple[float, str] | None] = {}
    if rent_usd_per_hour is not None:
        ow.check_rent(float(rent_usd_per_hour))
        offers["on_demand"] = (float(rent_usd_per_hour), "--rent-usd-per-hour")
    else:
        p = prices(ctx, spot=False).get(gpu.name)
        offers["on_demand"] = (p.usd_per_hour, f"{p.provider} ({p.version})") if p else None
    sp = prices(ctx, spot=True).get(gpu.name)
    offers["spot"] = (sp.usd_per_hour, f"{sp.provider} ({sp.version})") if sp else None

    rent: dict[str, Any] = {}
    for kind, offer in offers.items():
        if offer is None:
            rent[kind] = None
            continue
        c = ow.compare(o, offer[0])
        rent[kind] = {
            "usd_per_hour": c.usd_per_hour,
            "price_source": offer[1],
            "total_usd": c.total_usd,
            "usd_per_year": c.usd_per_year,
            "break_even_hours_per_month": c.break_even_hours_per_month,
            "break_even_share_of_month": c.break_even_share_of_month,
            "break_even_reachable": (
                c.break_even_hours_per_month is not None and c.break_even_hours_per_month <= ow.MAX_HOURS_PER_MONTH
            ),
            "payback_months": c.payback_months,
            "cheaper": "buy" if c.buy_is_cheaper else "rent",
        }
    return {
        "gpu": gpu.name,
        "hours_per_month": o.hours_per_month,
        "years": o.years,
        "purchase": bought,
        "own": {
            "total_usd": own.total_usd,
            "usd_per_year": own.usd_per_year,
            "usd_per_used_hour": own.usd_per_used_hour,
            "used_hours": own.used_hours,
            "breakdown": {
                "purchase_usd": own.purchase_usd,
                "hosting_usd": own.hosting_usd,
                "electricity_usd": own.electricity_usd,
                "resale_usd": -own.resale_usd,
            },
            "energy_kwh": own.energy_kwh,
        },
        "rent": rent,
        "settings": {
            "board_power_w": o.board_power_w,
            "pue": o.pue,
            "usd_per_kwh": o.usd_per_kwh,
            "electricity_usd_per_hour": ow.electricity_usd_per_hour(o),
            "hosting_usd_per_month": o.hosting_usd_per_month,
            "resale_fraction": o.resale,
        },
        "basis": {
            **{key: ("set by the caller" if key in user_set else text) for key, text in ow.BASIS.items()},
            "break_even": "GPU-hours a month above which owning costs less than renting over the horizon",
            "payback_months": "months of use at these hours until the rent saved repays the purchase less resale",
            "not_counted": ow.NOT_COUNTED,
        },
    }
