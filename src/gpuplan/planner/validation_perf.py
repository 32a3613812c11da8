"""Speed rows of a measurement file: training throughput, prefill latency, decode speed, serving
throughput. A row's reading (its workload, and the `measure` flags that say how its figure is
compared: planner/validation_columns.py) goes through the performance model, and the result
carries a `kind` (what was timed, on which architecture) for the error bars.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import engines
from gpuplan.estimators.memory import estimate_memory
from gpuplan.estimators.perf import estimate_inference_time, estimate_training_time
from gpuplan.estimators.uncertainty import kind_of
from gpuplan.planner.serving import QueuedJob, queued_serving
from gpuplan.planner.validation_columns import Reading
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import make_workload

SPEED_CATEGORIES: Final = ("train_throughput", "inference")


@dataclass(frozen=True)
class SpeedPrediction:
    predicted: float
    kind: str  # e.g. "training/Hopper", "decode/Ada Lovelace"
    dominant: str
    workload: dict[str, Any]


def _kind(category: str, metric: str, gpu: GPU, model: ModelSpec, prompt_rate: bool = False) -> str:
    m = metric.lower()
    if category == "train_throughput":
        what = "training"
    elif "first_token" in m or "ttft" in m or prompt_rate:
        what = "prefill"
    elif "decode" in m or "per_output_token" in m or "inter_token" in m:
        what = "decode"
    else:
        what = "serving throughput"
    return kind_of(what, model.kind, gpu.architecture)


def predict_speed(row_fields: dict[str, str], reading: Reading, model: ModelSpec, gpu: GPU) -> SpeedPrediction:
    """The row's metric (its metric and unit columns) as the model predicts it for the reading."""
    wl = dict(reading.workload)
    measure = reading.measure
    metric = row_fields["metric"].lower()
    unit = row_fields.get("unit", "").lower()
    work = make_workload(wl)
    prompt_rate = bool(measure.get("prompt_rate"))
    kind = _kind(row_fields["category"], metric, gpu, model, prompt_rate)
    if work.is_training:
        t = estimate_training_time(model, work, gpu)
        dom = f"{t.bottleneck}; MFU {t.mfu:.0%}"
        if "tflops" in metric:
            # achieved TFLOP/s per GPU counted as the source counts them: Megatron-LM's formula
            # (Narayanan et al. 2021, eq. 3: 96 B s l h^2 (1 + s/6h + V/16lh) per iteration, the
            # recompute pass included) where the row says so (flops=megatron), else PaLM's model FLOPs
            if measure.get("flops") == "megatron":
                h, n_l, s_ = model.hidden_size, model.num_layers, float(work.seq_len)
                per_token = 96.0 * n_l * h * h * (1 + s_ / (6 * h) + model.vocab_size / (16 * n_l * h))
            else:
                per_token = t.model_flops_per_token
            value = t.tokens_per_s_per_gpu * per_token / 1e12
        elif "per_gpu" in metric or "/gpu" in unit:
            value = t.tokens_per_s_per_gpu
        elif "images_per_s" in metric:
            value = t.tokens_per_s
        elif "step_time" in metric:
            value = t.step_time_s * (1e3 if unit.startswith("ms") else 1.0)
        elif "gpu_hours" in metric:
            raise InvalidSettingError("whole-run GPU-hours: the cluster's parallel layout is not published")
        else:
            value = t.tokens_per_s
        return SpeedPrediction(value, kind, dom, wl)
    max_batch = held = None  # a best-batch measure's cap; held: the cap the estimate runs at
    if measure.get("max_batch"):
        mem = estimate_memory(model, work, gpu)
        max_batch = held = mem.serving.max_sequences if mem.serving else work.batch_size
    elif work.request_rate is None or work.num_prompts is not None:
        # a preallocating engine whose KV cache holds fewer sequences than the batch runs that many at
        # once and queues the rest (planner/serving.queued_serving; `gpuplan estimate` and `plan` the same)
        mem = estimate_memory(model, work, gpu)
        job = queued_serving(model, work, gpu, mem)
        if job is not None:
            return _queued(row_fields, reading, job, kind, wl, work.num_gpus)
        if work.num_prompts is not None and mem.serving:
            # a finite run's prompts in flight are at most what the KV cache holds, the rest waiting for a
            # slot (`gpuplan estimate` passes the same cap); its throughput stays the run's, not the best batch's
            held = mem.serving.max_sequences
    it = estimate_inference_time(model, work, gpu, max_batch=held)
    dom = it.bottleneck
    if prompt_rate and measure.get("cold"):
        # the first forward after loading (AutoAWQ's benchmark.py): the engine's first-call cost on top
        first = engines.FIRST_FORWARD_S.get(work.engine)
        if first is None:
            raise InvalidSettingError(f"measure cold: no first-forward cost is known for the {work.engine} engine")
        value = it.batch * max(work.input_len, 1) / (it.ttft_s + first)
    elif prompt_rate:
        value = it.prefill_tokens_per_s
    elif "images_per_s" in metric:
        value = it.output_tokens_per_s * (work.num_gpus if model.kind == "cnn" else 1)
    elif "first_token" in metric:
        # a closed loop's requests see the steady state's first token (ttft_single_s), not the batch's prefill
        value = (it.ttft_single_s if work.closed_loop else it.ttft_s) * 1e3
    elif "decode_tokens_per_s" in metric:
        # per sequence, or summed over the batch where the source multiplies by it (AutoAWQ's
        # benchmark.py: 1 / median step time x batch size)
        value = (it.batch if measure.get("batch_sum") else 1.0) / it.tpot_s
    elif "per_output_token" in metric or "inter_token_latency" in metric:
        # bench_serving's inter-token latency: the gap between streamed tokens, one decode step of
        # the running batch (its median, as the time per output token, leaves out the rare steps a
        # prefill joins: vllm benchmarks/benchmark_serving.py, sglang bench_serving.py)
        value = it.tpot_s * 1e3
    elif "output_token" in metric or "throughput" in metric:
        value = _as_reported(
            it.best_output_tokens_per_s if max_batch is not None else it.output_tokens_per_s,
            row_fields,
            reading,
            work.num_gpus,
        )
    else:
        raise InvalidSettingError(f"metric {row_fields['metric']!r} is not one gpuplan predicts")
    return SpeedPrediction(value, kind, dom, wl)


def _as_reported(tokens_per_s: float, row_fields: dict[str, str], reading: Reading, num_gpus: int) -> float:
    """An inference throughput (all GPUs) as the row reports it: per GPU where its unit or measure says so."""
    if "/gpu" in row_fields.get("unit", "").lower() or reading.measure.get("per_gpu"):
        return tokens_per_s / num_gpus
    return tokens_per_s


def _queued(
    row_fields: dict[str, str], reading: Reading, job: QueuedJob, kind: str, wl: dict[str, Any], num_gpus: int
) -> SpeedPrediction:
    """A row whose batch the engine's KV cache does not hold at once (planner/serving.queued_job):
    throughput over the whole job, the median request's time to first token, the median gap
    between tokens (a decode step of the running wave, with a waiting prompt's chunk where vLLM
    interleaves one into most steps)."""
    metric = row_fields["metric"].lower()
    it = job.running
    if "first_token" in metric:
        value = job.median_ttft_s * 1e3
    elif "per_output_token" in metric or "inter_token_latency" in metric:
        value = job.median_itl_s * 1e3
    elif "output_token" in metric or "throughput" in metric:
        value = _as_reported(job.output_tokens_per_s, row_fields, reading, num_gpus)
    else:
        raise InvalidSettingError(f"metric {row_fields['metric']!r}: not predicted for a batch its KV cache queues")
    return SpeedPrediction(value, kind, f"{it.bottleneck}; {job.held} at a time in {job.waves} waves", wl)
