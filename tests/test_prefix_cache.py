"""The workload's cached_prefix_tokens: a serving engine's prefix cache (vLLM's automatic prefix
caching, SGLang's radix cache, TGI v3, TensorRT-LLM's block reuse, llama.cpp's per-slot
cache_prompt): what each engine reuses, the prefill it leaves, the sequences its pool holds, and
the one-line refusals."""

from __future__ import annotations

import math
from typing import Any

import pytest

from conftest import RunCli
from gpuplan.estimators import engines
from gpuplan.estimators.memory import estimate_memory
from gpuplan.estimators.perf import estimate_inference_time
from gpuplan.estimators.perf.inference import _inference_step, _prefill_ops
from gpuplan.estimators.perf.ops import make_ctx
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import Workload, make_workload

MODEL = "llama-3.1-8b"


def _w(**kw: Any) -> Workload:
    base = {"model": MODEL, "task": "inference", "precision": "bf16", "gpu": "H100", "input_len": 2048}
    return make_workload({**base, "output_len": 128, "batch_size": 1, **kw})


def _flops(ops: list[Any], name: str) -> float:
    return float(sum(o.flops for o in ops if o.name.startswith(name)))


@pytest.mark.parametrize(
    ("engine", "input_len", "cached", "reused"),
    [
        ("vllm", 2048, 1000, 992),  # 62 whole 16-token blocks
        ("vllm", 2048, 2048, 2032),  # capped at 2,047 (the last token computed), then whole blocks
        ("vllm", 15, 15, 0),  # no full block: nothing reused
        ("vllm", 135, 135, 128),
        ("sglang", 2048, 2048, 2047),  # token by token, the last one computed
        ("tgi", 2048, 1000, 1000),
        ("tensorrt-llm", 2048, 1000, 992),  # 31 whole 32-token blocks
        ("llama.cpp", 2048, 1000, 1000),
        ("vllm", 2048, 0, 0),
    ],
)
def test_each_engine_reuses_whole_blocks_and_computes_the_last_token(
    engine: str, input_len: int, cached: int, reused: int
) -> None:
    w = _w(engine=engine, input_len=input_len, cached_prefix_tokens=cached)
    assert engines.prefix_reused_tokens(w) == reused
    # llama.cpp's cache is per slot: nothing held once for several sequences
    assert engines.prefix_shared_tokens(w) == (0 if engine == "llama.cpp" else reused)


def test_a_cached_prefix_leaves_the_uncached_tokens_attending_over_the_whole_prompt(catalog: Catalog) -> None:
    model, gpu = load_model(MODEL), catalog.get("H100")
    w = _w(cached_prefix_tokens=1024)  # 1,024 is 64 whole blocks: all reused
    c = make_ctx(model, w, gpu)
    cached = _prefill_ops(c, 1)
    assert cached == _inference_step(c, 1, 1024.0, 1024.0, "prefill")
    fresh_1024 = _inference_step(make_ctx(model, _w(input_len=1024), gpu), 1, 1024.0, 0.0, "prefill")
    whole = _inference_step(make_ctx(model, _w(), gpu), 1, 2048.0, 0.0, "prefill")
    # the linear layers run on the 1,024 uncached tokens only: exactly those of a 1,024-token prompt
    assert _flops(cached, "linear") == pytest.approx(_flops(fresh_1024, "linear"), rel=1e-12)
    assert _flops(cached, "linear") == pytest.approx(_flops(whole, "linear") / 2, rel=1e-3)  # head too
    # attention: each of the 1,024 queries sees the 1,024 cached keys plus (n + 1) / 2 causal ones,
    # against (n + 1) / 2 for a fresh 1,024-token prompt: (1024 + 512.5) / 512.5 = 2.998 times
    ratio = _flops(cached, "attention") / _flops(fresh_1024, "attention")
    assert ratio == pytest.approx((1024 + 1025 / 2) / (1025 / 2), rel=1e-12)
    # and the whole 2,048-token square less the cached prefix's own (queries 1,024 .. 2,047)
    keys_whole, keys_prefix = 2048 * 2049 / 2, 1024 * 1025 / 2
    assert _flops(cached, "attention") / _flops(whole, "attention") == pytest.approx(
        (keys_whole - keys_prefix) / keys_whole, rel=1e-12
    )


def test_time_to_first_token_and_prefill_throughput_follow(catalog: Catalog) -> None:
    model, gpu = load_model(MODEL), catalog.get("H100")
    base = estimate_inference_time(model, _w(batch_size=8), gpu)
    half = estimate_inference_time(model, _w(batch_size=8, cached_prefix_tokens=1024), gpu)
    # a compute-bound 8 x 2,048 prefill: about half the linear work, a bit more attention: 45-60% less
    assert 0.40 < half.ttft_s / base.ttft_s < 0.55
    assert half.prefill_tokens_per_s == pytest.approx(8 * 2048 / half.ttft_s, rel=1e-12)
    assert half.tpot_s == base.tpot_s  # decode reads the same cache either way
    # a 15-token prompt holds no full vLLM block: nothing changes
    short = {"input_len": 15, "output_len": 5}
    assert estimate_inference_time(model, _w(**short, cached_prefix_tokens=15), gpu) == estimate_inference_time(
        model, _w(**short), gpu
    )


def test_a_shared_prefix_is_held_once_so_the_pool_holds_more_sequences(catalog: Catalog) -> None:
    model, gpu = load_model(MODEL), catalog.get("H100")
    s0 = estimate_memory(model, _w(), gpu).serving
    s1 = estimate_memory(model, _w(cached_prefix_tokens=1024), gpu).serving
    assert s0 is not None and s1 is not None
    assert s1.max_tokens == s0.max_tokens  # the same pool
    blocks = s0.max_tokens // 16
    assert s0.max_sequences == blocks // math.ceil(2176 / 16)  # 136 blocks a sequence
    # 64 blocks held once, 72 more each
    assert s1.max_sequences == (blocks - 64) // 72
    assert s1.max_sequences > 1.8 * s0.max_sequences
    # llama.cpp's per-slot cache_prompt saves the prefill, not memory
    lc = {"engine": "llama.cpp", "batch_size": 4}
    kv0 = estimate_memory(model, _w(**lc), gpu)
    kv1 = estimate_memory(model, _w(**lc, cached_prefix_tokens=1024), gpu)
    assert kv1.per_gpu_bytes == kv0.per_gpu_bytes


def test_tgi_holds_the_shared_prefix_once_in_its_static_kv_line(catalog: Catalog) -> None:
    model, gpu = load_model(MODEL), catalog.get("H100")
    kv = model.kv_bytes_per_token(2.0)
    e0 = estimate_memory(model, _w(engine="tgi", batch_size=4), gpu)
    e1 = estimate_memory(model, _w(engine="tgi", batch_size=4, cached_prefix_tokens=1024), gpu)

    def line(e: Any) -> float:
        return float(next(x.bytes for x in (*e.lines, *e.not_at_peak) if x.name == "KV cache"))

    assert line(e0) - line(e1) == pytest.approx(3 * 1024 * kv, rel=1e-9)  # 3 of the 4 copies saved


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--set", "cached_prefix_tokens=3000"), "cached_prefix_tokens=3000 is more than the prompt (input_len=2048)"),
        (
            ("--set", "cached_prefix_tokens=-1"),
            "'cached_prefix_tokens' key: Input should be greater than or equal to 0",
        ),
        (("--set", "engine=transformers", "--set", "cached_prefix_tokens=10"), "engine is transformers"),
        (("--set", "engine=mlc", "--set", "cached_prefix_tokens=10"), "engine is mlc"),
    ],
)
def test_refusals_are_one_line_exit_2(run_cli: RunCli, args: tuple[str, ...], says: str) -> None:
    code, out, err = run_cli(
        "estimate", MODEL, "--task", "inference", "--gpu", "H100", "--set", "input_len=2048", *args
    )
    assert code == 2, (out, err)
    assert says in err and len(err.strip().splitlines()) == 1
