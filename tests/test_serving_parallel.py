"""Serving on several GPUs: data-parallel replicas, expert parallelism, attention data parallelism
(vLLM --data-parallel-size with --enable-expert-parallel, SGLang --enable-dp-attention,
TensorRT-LLM enable_attention_dp) and MLA's replicated latent cache.

The assertions are conservation laws of the layouts: work and bytes that a layout moves between
GPUs without creating or losing any, checked to floating-point precision, and the all-to-all's
bytes against the formula written out here.
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import engines
from gpuplan.estimators.memory import MemoryEstimate, estimate_memory
from gpuplan.estimators.perf import Op, estimate_inference_time
from gpuplan.interfaces import api
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.precision import storage_format
from gpuplan.specs.workload import Workload, make_workload

SERVE: dict[str, Any] = {"task": "inference", "engine": "vllm", "input_len": 1000, "output_len": 500, "batch_size": 32}


def _w(model: str, **kw: Any) -> Workload:
    return make_workload({"model": model, **SERVE, **kw})


def _ops(ops: tuple[Op, ...], prefix: str) -> list[Op]:
    return [o for o in ops if o.name.startswith(prefix)]


def _line(e: MemoryEstimate, prefix: str) -> float:
    return next(line.bytes for line in (*e.lines, *e.not_at_peak) if line.name.startswith(prefix))


def _weights_line(e: MemoryEstimate) -> float:
    return _line(e, "weights")


def test_data_parallel_replicas_add_throughput(catalog: Catalog) -> None:
    """num_gpus = 2 x tp x pp: two replicas, each its own `batch_size` sequences at the one-GPU step."""
    m, gpu = load_model("llama-3.1-8b"), catalog.get("H100")
    one = estimate_inference_time(m, _w("llama-3.1-8b", gpu=gpu.name), gpu, max_batch=256)
    two = estimate_inference_time(m, _w("llama-3.1-8b", gpu=gpu.name, num_gpus=2), gpu, max_batch=256)
    assert two.replicas == 2 and one.replicas == 1
    assert two.tpot_s == pytest.approx(one.tpot_s, rel=1e-12)
    assert two.ttft_s == pytest.approx(one.ttft_s, rel=1e-12)
    assert two.output_tokens_per_s == pytest.approx(2 * one.output_tokens_per_s, rel=1e-12)
    assert two.best_output_tokens_per_s == pytest.approx(2 * one.best_output_tokens_per_s, rel=1e-12)
    assert two.prefill_tokens_per_s == pytest.approx(2 * one.prefill_tokens_per_s, rel=1e-12)
    # per-GPU memory does not change: each replica holds the whole model and its own sequences
    e1 = estimate_memory(m, _w("llama-3.1-8b"), gpu)
    e2 = estimate_memory(m, _w("llama-3.1-8b", num_gpus=2), gpu)
    assert _weights_line(e2) == _weights_line(e1)


def test_batch_generation_plan_weighs_replicas_against_tensor_parallelism(catalog: Catalog) -> None:
    """A batch job (`tokens`) counts throughput: on n GPUs the plan tries n/t replicas of t-way TP,
    the job's concurrent sequences shared among them, and keeps the fastest; a service keeps one
    copy over all GPUs (the lowest per-token latency), and so does a MoE model."""
    from gpuplan.planner.recommend import REPLICA_MIN_GAIN, evaluate

    m, h100 = load_model("llama-3.1-8b"), catalog.get("H100")
    job = _w("llama-3.1-8b", gpu=h100.name, tokens=1e9, batch_size=512)
    o = evaluate(m, job, h100, 8, None)
    tp, bs = o.layout["tp"], o.layout["batch_size"]
    replicas = 8 // tp
    assert replicas > 1 and bs * replicas >= 512 and bs == -(-512 // replicas)
    assert o.inference is not None and o.inference.replicas == replicas
    # it is the fastest of the layouts it was chosen from, TP8 by more than the margin
    for t in (1, 2, 4, 8):
        w_t = job.with_(num_gpus=8, tp=t, batch_size=-(-512 // (8 // t)))
        if not estimate_memory(m, w_t, h100).fits:
            continue
        rate = estimate_inference_time(m, w_t, h100, max_batch=w_t.batch_size).output_tokens_per_s
        assert o.throughput is not None and o.throughput >= rate * (1 - 1e-9)
        if t == 8:
            assert o.throughput > rate * (1 + REPLICA_MIN_GAIN)
    assert f"{replicas} data-parallel replicas" in o.why
    # a service of the same streams stays one tensor-parallel copy: latency per token is what counts
    service = evaluate(m, job.with_(tokens=None), h100, 8, None)
    assert service.layout == {"num_gpus": 8, "tp": 8, "pp": 1}
    # MoE: replicas would each hold every expert; the plan keeps tensor parallelism
    qwen = load_model("qwen3-30b-a3b")
    moe = evaluate(qwen, _w("qwen3-30b-a3b", gpu=h100.name, tokens=1e9, batch_size=512), h100, 8, None)
    assert moe.layout == {"num_gpus": 8, "tp": 8, "pp": 1}


def test_expert_parallel_in_one_replica_conserves_work(catalog: Catalog) -> None:
    """tp = ep = 4, one replica: whole experts on a quarter of the GPUs each instead of a quarter of
    every expert; the same FLOPs and weight bytes per GPU, the same two all-reduces a layer
    (every GPU holds all tokens), and no all-to-all."""
    m, gpu = load_model("qwen3-30b-a3b"), catalog.get("H100")
    tp = estimate_inference_time(m, _w("qwen3-30b-a3b", num_gpus=4, tp=4), gpu)
    ep = estimate_inference_time(m, _w("qwen3-30b-a3b", num_gpus=4, tp=4, ep=4), gpu)
    for phase in ("prefill_ops", "decode_ops"):
        a, b = _ops(getattr(tp, phase), "linear mlp.experts"), _ops(getattr(ep, phase), "linear mlp.experts")
        assert [o.name for o in a] == [o.name for o in b]
        for x, y in zip(a, b, strict=True):
            assert y.flops == pytest.approx(x.flops, rel=1e-12)
        assert not _ops(getattr(ep, phase), "expert-parallel")
        ar_tp = _ops(getattr(tp, phase), "tensor-parallel all-reduce")[0]
        ar_ep = _ops(getattr(ep, phase), "tensor-parallel all-reduce")[0]
        assert ar_ep.time_s == pytest.approx(ar_tp.time_s, rel=1e-12)
    assert _weights_line(estimate_memory(m, _w("qwen3-30b-a3b", num_gpus=4, tp=4, ep=4), gpu)) == pytest.approx(
        _weights_line(estimate_memory(m, _w("qwen3-30b-a3b", num_gpus=4, tp=4), gpu)), rel=1e-12
    )


def test_attention_data_parallel_with_experts_spread(catalog: Catalog) -> None:
    """tp = 1, ep = 8 on 8 GPUs: eight attention replicas, the experts spread one eighth a GPU."""
    m, gpu = load_model("qwen3-30b-a3b"), catalog.get("H100")
    single = _w("qwen3-30b-a3b", gpu=gpu.name)
    dpep = _w("qwen3-30b-a3b", gpu=gpu.name, num_gpus=8, ep=8)
    # memory: attention, embeddings and the head whole on every GPU, the experts / 8
    fmt = storage_format("bf16")
    experts = sum(g.total for g in m.groups if g.role == "expert") * fmt.bytes_per_value
    w1 = _weights_line(estimate_memory(m, single, gpu))
    w8 = _weights_line(estimate_memory(m, dpep, gpu))
    assert w8 == pytest.approx(w1 - experts + experts / 8, rel=1e-12)
    t1 = estimate_inference_time(m, single, gpu)
    t8 = estimate_inference_time(m, dpep, gpu)
    assert t8.replicas == 8
    # each GPU computes its eighth of the experts for the tokens of all eight replicas: the same
    # expert FLOPs as one GPU serving one replica's batch alone
    for phase in ("prefill_ops", "decode_ops"):
        a, b = _ops(getattr(t1, phase), "linear mlp.experts"), _ops(getattr(t8, phase), "linear mlp.experts")
        assert sum(o.flops for o in b) == pytest.approx(sum(o.flops for o in a), rel=1e-9)
    # the all-to-all: each token once to every expert group one of its top-8 experts sits in
    # (8 x (1 - (7/8)^8) = 5.2511 of the 8 under uniform routing), 2 bytes a value each way,
    # over the 48 MoE layers
    a2a = _ops(t8.decode_ops, "expert-parallel dispatch + combine")[0]
    groups_hit = 8 * (1 - (7 / 8) ** 8)
    assert groups_hit == pytest.approx(5.2511, abs=1e-4)
    assert a2a.bytes == pytest.approx(32 * groups_hit * m.hidden_size * (2 + 2) * 48, rel=1e-12)
    assert a2a.time_s > 0
    # 32 kept in flight per replica: each finished request's slot waits out the step(s) vLLM's engine
    # loop has taken up (engines.closed_loop_gap_steps)
    gap = engines.closed_loop_gap_steps("vllm")
    assert gap == 1
    assert t8.output_tokens_per_s == pytest.approx(
        8 * 32 * SERVE["output_len"] / (t8.ttft_s + (SERVE["output_len"] - 1 + gap) * t8.tpot_s), rel=1e-12
    )


def test_fp8_experts_dispatch_one_byte(catalog: Catalog) -> None:
    """FP8 experts: the dispatch moves 1 byte a value, the combine 2 (DeepEP: FP8 dispatch, BF16 combine)."""
    m, gpu = load_model("qwen3-30b-a3b"), catalog.get("H100")
    t = estimate_inference_time(m, _w("qwen3-30b-a3b", num_gpus=8, ep=8, weight_dtype="fp8"), gpu)
    a2a = _ops(t.decode_ops, "expert-parallel dispatch + combine")[0]
    assert a2a.bytes == pytest.approx(32 * 8 * (1 - (7 / 8) ** 8) * m.hidden_size * (1 + 2) * 48, rel=1e-12)


def test_mla_latent_cache_is_replicated_under_tp(catalog: Catalog) -> None:
    """vLLM keeps MLA's latent cache whole on every TP rank (get_num_kv_heads returns 1 for MLA);
    a GQA model's KV heads are divided among the ranks."""
    gpu = catalog.get("H200")
    mla = load_model("deepseek-v3")

    def kv(model: Any, name: str, tp: int) -> float:
        """KV bytes per cached token on one GPU (the serving view's figure)."""
        e = estimate_memory(model, _w(name, num_gpus=tp, tp=tp), gpu)
        assert e.serving is not None
        return e.serving.kv_bytes_per_token

    assert kv(mla, "deepseek-v3", 8) == pytest.approx(kv(mla, "deepseek-v3", 1), rel=1e-12)
    notes = estimate_memory(mla, _w("deepseek-v3", num_gpus=8, tp=8), gpu).notes
    assert any("latent KV cache whole on each of the tp=8 ranks" in n and "ep: 8" in n for n in notes)
    gqa = load_model("llama-3.1-70b")  # 8 KV heads
    assert kv(gqa, "llama-3.1-70b", 8) == pytest.approx(kv(gqa, "llama-3.1-70b", 1) / 8, rel=1e-12)


def test_layout_errors_are_one_line(catalog: Catalog) -> None:
    gpu = catalog.get("H100")
    with pytest.raises(InvalidSettingError, match="needs a mixture-of-experts model"):
        estimate_memory(load_model("llama-3.1-8b"), _w("llama-3.1-8b", num_gpus=2, ep=2), gpu)
    with pytest.raises(InvalidSettingError, match="must divide the 128 experts"):
        estimate_inference_time(load_model("qwen3-30b-a3b"), _w("qwen3-30b-a3b", num_gpus=3, ep=3), gpu)
    with pytest.raises(ValueError, match="etp is a training key"):
        _w("qwen3-30b-a3b", num_gpus=8, ep=4, etp=2)


def test_vllm_launch_for_attention_dp(tmp_path: Any, run_cli: RunCli) -> None:
    import yaml

    job = tmp_path / "dsv3.yaml"
    job.write_text(yaml.safe_dump({"model": "deepseek-v3", **SERVE, "gpu": "H200", "num_gpus": 8, "tp": 1, "ep": 8}))
    text = api.launch(str(job), "vllm").text
    assert "--data-parallel-size=8" in text and "--enable-expert-parallel" in text
    assert "layout: TP1 PP1 DP8 EP8 (attention data parallel)" in text
    code, _, err = run_cli("launch", str(job), "--format", "vllm", "--set", "ep=4")
    assert code == 2 and "Set ep: 8" in err and "Traceback" not in err


def test_enforce_eager_issues_every_op_from_the_host(catalog: Catalog) -> None:
    """vLLM --enforce-eager (and vLLM before its CUDA-graph runner): decode pays eager PyTorch's
    per-op host time where a graph replays the kernels back to back."""
    from gpuplan.planner.validation_prose_speed import _vllm_before_graphs

    m, gpu = load_model("llama-2-70b"), catalog.get("A100 PCIe 80GB")
    keys: dict[str, Any] = {"num_gpus": 4, "tp": 4, "batch_size": 1, "input_len": 7, "output_len": 256}
    graph = estimate_inference_time(m, _w("llama-2-70b", **keys), gpu)
    eager = estimate_inference_time(m, _w("llama-2-70b", **keys, enforce_eager=True), gpu)
    assert _ops(graph.decode_ops, "kernel launches (graph)")
    assert _ops(eager.decode_ops, "kernel launches (CPU-bound eager)")
    assert eager.tpot_s > 1.5 * graph.tpot_s
    # MLC-012 (mlc-ai/llm-perf-bench: vLLM acbed3e of 10/06/2023, 17.64 tok/s) ran before the runner
    assert 1.0 / eager.tpot_s == pytest.approx(17.64, rel=0.2)
    assert _vllm_before_graphs("commits used: vLLM acbed3e 10/06/2023")
    assert not _vllm_before_graphs("vLLM 1a2b3c4 01/05/2024") and not _vllm_before_graphs("vLLM v0.6.3")
