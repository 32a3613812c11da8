"""engine: autoawq (estimators/engines.py, AutoAWQ v0.1.6's fused runtime; the cache's default from
the current release): its fused cache of
num_ctx tokens allocated up front, its eager prompt attention's 10 bytes per score, its decode
overlapped with the host's issue, its FasterTransformer decode attention per query head, and the
keys only it reads; against figures worked out here from the model's shapes."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import engines
from gpuplan.estimators.activations import stack_shapes
from gpuplan.estimators.memory import MemoryEstimate, estimate_memory
from gpuplan.estimators.perf import estimate_inference_time
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import Workload, check_keys_apply, make_workload


def _w(**kw: Any) -> Workload:
    base = {"model": "mistral-7b", "task": "inference", "precision": "fp16", "engine": "autoawq"}
    return make_workload({**base, **kw})


@pytest.fixture(scope="module")
def mistral() -> ModelSpec:
    return load_model("mistral-7b")


def _line(e: MemoryEstimate, prefix: str) -> float:
    return next(x.bytes for x in (*e.lines, *e.not_at_peak) if x.name.startswith(prefix))


def test_autoawq_loads_awq_weights_and_allocates_its_window_up_front(catalog: Catalog, mistral: ModelSpec) -> None:
    card = catalog.get("RTX 4090")
    w = _w(batch_size=8, input_len=64, output_len=64, num_ctx=2048)
    assert w.effective_weight_dtype == "awq"
    e = estimate_memory(mistral, w, card)
    # 8 sequences x 2048 tokens x 32 layers x (K + V) x 8 KV heads x 128 x 2 bytes, whatever the prompt
    assert _line(e, "KV cache") == pytest.approx(8 * 2048 * 32 * 2 * 8 * 128 * 2, rel=1e-9)
    # unset: current AutoAWQ's from_quantized(max_seq_len=2048) (casper-hansen/AutoAWQ@00c3dfa
    # awq/models/auto.py), not v0.1.6's max_position_embeddings (32,768 for Mistral)
    assert engines.autoawq_cache_tokens(_w(), mistral) == 2048 != mistral.max_position_embeddings


def test_autoawq_prompt_attention_keeps_ten_bytes_per_score(catalog: Catalog, mistral: ModelSpec) -> None:
    card = catalog.get("RTX 4090")
    kw: dict[str, Any] = {"batch_size": 2, "input_len": 1024, "output_len": 16, "weight_dtype": "awq"}
    fused = _line(estimate_memory(mistral, _w(num_ctx=1024, **kw), card), "prefill activations")
    plain = _line(estimate_memory(mistral, _w(engine="transformers", **kw), card), "prefill activations")
    # fp16 scores + their fp32 copy + the fp32 softmax: 2 x 32 heads x 1024 x 1024 x 10 bytes more
    assert fused - plain == pytest.approx(2 * 32 * 1024 * 1024 * 10.0, rel=1e-9)


def test_autoawq_decode_is_its_gpu_work_when_the_host_keeps_ahead(catalog: Catalog, mistral: ModelSpec) -> None:
    card = catalog.get("RTX 4090")
    w = _w(batch_size=1, input_len=64, output_len=64, num_ctx=64, awq_version="gemv")
    t = estimate_inference_time(mistral, w, card)
    names = [o.name for o in t.decode_ops]
    assert not any("CPU-bound" in n for n in names)  # ~11 kernels a layer at 10 us < the weight reads
    gpu = sum(o.time_s for o in t.decode_ops if o.bound != "launch")
    assert t.tpot_s == pytest.approx(gpu, rel=1e-9)
    # transformers' eager generate on the same checkpoint is launch-bound: over 1.5x slower
    eager = estimate_inference_time(
        mistral, w.with_(engine="transformers", weight_dtype="awq", awq_version=None, num_ctx=None), card
    )
    assert eager.tpot_s > 1.5 * t.tpot_s


def test_autoawq_decode_attention_is_one_block_per_query_head(catalog: Catalog, mistral: ModelSpec) -> None:
    card = catalog.get("RTX 4090")
    w = _w(batch_size=1, input_len=2048, output_len=2048, num_ctx=2048, awq_version="gemv")
    attn = next(o for o in estimate_inference_time(mistral, w, card).decode_ops if o.name == "attention")
    s = stack_shapes(mistral)[0]
    # the window caps the context at 2048; one KV head's keys and values, 32 layers, at the block rate
    per_block = 2048 * (s.k + s.v) / mistral.num_kv_heads * 2
    assert attn.time_s == pytest.approx(32 * per_block / engines.AUTOAWQ_FT_BLOCK_BYTES_PER_S, rel=1e-9)


def test_autoawq_keys_need_the_autoawq_engine() -> None:
    with pytest.raises(InvalidSettingError, match="'awq_version' key is read only by the autoawq engine"):
        check_keys_apply(make_workload({"model": "mistral-7b", "engine": "vllm", "awq_version": "gemv"}))
    check_keys_apply(_w(num_ctx=2048, awq_version="gemv"))  # no refusal
    with pytest.raises(InvalidSettingError):
        make_workload({"model": "mistral-7b", "engine": "autoawq", "awq_version": "marlin"})


def test_autoawq_default_cache_and_fixes_follow_the_current_release() -> None:
    """QA F9: Llama 3.1 8B AWQ, batch 8 on an A100: the unset cache is 8 x 2,048 tokens x 128 KiB =
    2 GiB (not 8 x 131,072 = 128 GiB, which v0.1.6 semantics gave), so it fits; asked for the whole
    context it does not, and the fixes offer num_ctx, never an fp8 KV cache AutoAWQ does not have."""
    import gpuplan

    job = {"model": "llama-3.1-8b", "gpu": "A100", "engine": "autoawq", "weight_dtype": "awq", "batch_size": 8}
    r = gpuplan.estimate(job)
    assert r.verdict.fits and r.memory.breakdown["KV cache"] == pytest.approx(8 * 2048 * 131072, rel=1e-9)
    big = gpuplan.estimate({**job, "num_ctx": 131072})
    changes = [f.changes for f in big.verdict.fixes]
    assert not big.verdict.fits and {"num_ctx": 256} in changes  # 128 + 128 tokens: the job's own length
    assert all("kv_dtype" not in c for c in changes)
