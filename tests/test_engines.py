"""The engines beyond vLLM (estimators/engines.py): TGI, Ollama, transformers' static cache, and
llama.cpp's partial GPU offload (perf/offload.py), against figures worked out here by hand from the
model's tensors and the engines' cited defaults; and the examples that use them."""

from __future__ import annotations

import math
from typing import Any

import pytest

import gpuplan
from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import comm, engines, runtime
from gpuplan.estimators.memory import MemoryEstimate, estimate_memory
from gpuplan.estimators.perf import Op, estimate_inference_time
from gpuplan.results import InferenceSpeed
from gpuplan.specs.gpu import GPU, Catalog
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import Workload, check_keys_apply, make_workload

Q4KM_BYTES = 4.84 / 8  # GGUF Q4_K_M bits per weight, whole-file average (specs/precision.py)
GB = 1e9


def _w(**kw: Any) -> Workload:
    return make_workload({"model": "llama-3.1-8b", "task": "inference", **kw})


def _line(e: MemoryEstimate, prefix: str) -> float:
    return next(x.bytes for x in (*e.lines, *e.not_at_peak) if x.name.startswith(prefix))


def _parts(m: ModelSpec) -> tuple[float, float, float]:
    """Q4_K_M bytes of the repeating layers, the token embeddings and the (untied) output layer."""
    block = sum(g.total for g in m.groups if g.role not in ("embedding", "position", "head")) * Q4KM_BYTES
    embed = sum(g.total for g in m.groups if g.role in ("embedding", "position")) * Q4KM_BYTES
    head = sum(g.total for g in m.groups if g.role == "head") * Q4KM_BYTES
    return block, embed, head


def _op_time(ops: tuple[Op, ...], prefix: str) -> float:
    return sum(o.time_s for o in ops if o.name.startswith(prefix))


@pytest.fixture(scope="module")
def m8b() -> ModelSpec:
    return load_model("llama-3.1-8b")


@pytest.fixture(scope="module")
def card(catalog: Catalog) -> GPU:
    return catalog.get("RTX 3070")  # 8 GiB


# --- llama.cpp partial offload -------------------------------------------------------------------
OFF: dict[str, Any] = {"engine": "llama.cpp", "weight_dtype": "q4_k_m", "input_len": 512, "output_len": 128}


def test_offload_memory_holds_only_the_gpu_layers(m8b: ModelSpec, card: GPU) -> None:
    """-ngl 20: the output layer and 19 of the 32 layers on the GPU (llama.cpp counts the output
    layer in -ngl and places it first); 13 layers and the embeddings in host RAM."""
    block, embed, head = _parts(m8b)
    assert head == pytest.approx(128_256 * 4096 * Q4KM_BYTES)  # Llama 3.1 8B's untied lm_head
    e = estimate_memory(m8b, _w(**OFF, gpu_layers=20), card)
    assert _line(e, "weights") == pytest.approx(block * 19 / 32 + head, rel=1e-9)
    kv_all = 512 * m8b.kv_bytes_per_token()  # after the prefill, 2-byte KV
    assert _line(e, "KV cache") == pytest.approx(kv_all * 19 / 32, rel=1e-6)
    kv_end = (512 + 128) * m8b.kv_bytes_per_token()
    assert e.host_bytes == pytest.approx(block * 13 / 32 + embed + kv_end * 13 / 32, rel=1e-6)
    assert e.serving is None  # no vLLM-style KV budget for a split model
    # -ngl 0: nothing on the GPU, the output layer in host RAM too
    e0 = estimate_memory(m8b, _w(**OFF, gpu_layers=0), card)
    assert _line(e0, "weights") == 0.0
    assert e0.host_bytes == pytest.approx(block + embed + head + kv_end, rel=1e-6)


def test_offload_decode_is_gpu_bytes_at_gpu_bandwidth_plus_cpu_bytes_at_host_bandwidth(
    m8b: ModelSpec, card: GPU
) -> None:
    """tpot(ngl) = the GPU's share (ngl - 1 of 32 layers) of the all-GPU step, its output layer and
    kernel launches whole, + the host layers' bytes / host bandwidth (and their KV, < 2% here)."""
    block, _, _ = _parts(m8b)
    full = estimate_inference_time(m8b, _w(**OFF), card)
    launch = _op_time(full.decode_ops, "kernel launches")
    head_t = _op_time(full.decode_ops, "linear lm_head")
    for ngl in (8, 20, 28):
        share = (ngl - 1) / 32
        t = estimate_inference_time(m8b, _w(**OFF, gpu_layers=ngl), card)
        cpu_bytes = block * (1 - share)
        expected = launch + head_t + (full.tpot_s - launch - head_t) * share + cpu_bytes / (89.6 * GB)
        assert t.tpot_s == pytest.approx(expected, rel=0.02), ngl
        cpu = [o for o in t.decode_ops if o.name.startswith("CPU:")]
        assert len(cpu) == 1 and cpu[0].bytes == pytest.approx(cpu_bytes, rel=0.03)  # + the host layers' KV


def test_cpu_only_decode_reads_everything_at_host_bandwidth(m8b: ModelSpec, card: GPU) -> None:
    block, _, head = _parts(m8b)
    t = estimate_inference_time(m8b, _w(**OFF, gpu_layers=0), card)
    # 8B Q4_K_M: (6.98B block + 0.53B head params) x 0.605 B = 4.54 GB per token / 89.6 GB/s = 50.7 ms
    assert (block + head) / (89.6 * GB) == pytest.approx(0.0507, rel=0.01)
    # + the KV cache at the mean decode context (512 + 129 / 2 tokens x 128 KiB), and the graph's
    # kernel launches, which stay on the GPU
    kv = (512 + 129 / 2) * m8b.kv_bytes_per_token()
    launches = sum(o.time_s for o in t.decode_ops if o.phase == "launch")
    assert t.tpot_s == pytest.approx((block + head + kv) / (89.6 * GB) + launches, rel=0.01)
    faster = estimate_inference_time(m8b, _w(**OFF, gpu_layers=0, host_memory_bandwidth=179.2), card)
    assert faster.tpot_s == pytest.approx(t.tpot_s / 2, rel=0.03)


def test_offload_prefill_copies_the_host_layers_over_pcie_per_micro_batch(m8b: ModelSpec, card: GPU) -> None:
    """A prompt of >= 32 tokens runs on the GPU, the host layers' weights copied per 512-token
    micro-batch (not the embeddings: a row lookup stays on the CPU)."""
    block, _, head = _parts(m8b)
    for ngl, n_in, ubatches in ((20, 512, 1), (20, 1500, 3), (0, 512, 1)):
        t = estimate_inference_time(m8b, _w(**{**OFF, "input_len": n_in}, gpu_layers=ngl), card)
        (copy,) = [o for o in t.prefill_ops if "over PCIe" in o.name]
        host = block * 13 / 32 if ngl else block + head
        assert copy.bytes == pytest.approx(host * ubatches, rel=1e-6)
        assert copy.time_s == pytest.approx(copy.bytes / comm.host_link_bandwidth(card), rel=1e-9)


def test_all_layers_on_the_gpu_is_the_unchanged_estimate(m8b: ModelSpec, card: GPU) -> None:
    """-ngl 33 (32 layers and the output) or more is everything; -ngl 32 leaves one layer behind."""
    base = estimate_inference_time(m8b, _w(**OFF), card)
    for ngl in (33, 99):
        same = estimate_inference_time(m8b, _w(**OFF, gpu_layers=ngl), card)
        assert (same.tpot_s, same.ttft_s) == (base.tpot_s, base.ttft_s)
    assert estimate_inference_time(m8b, _w(**OFF, gpu_layers=32), card).tpot_s > base.tpot_s
    assert estimate_memory(m8b, _w(**OFF, gpu_layers=99), card).per_gpu_bytes == pytest.approx(
        estimate_memory(m8b, _w(**OFF), card).per_gpu_bytes, rel=1e-12
    )


def test_offload_keys_need_an_engine_that_reads_them() -> None:
    with pytest.raises(InvalidSettingError, match=r"'gpu_layers'.*llama\.cpp and ollama.*engine is vllm"):
        check_keys_apply(_w(gpu_layers=20))
    with pytest.raises(InvalidSettingError, match=r"'cache_implementation'.*transformers"):
        check_keys_apply(_w(engine="tgi", cache_implementation="static"))
    with pytest.raises(InvalidSettingError, match=r"'num_ctx'.*ollama"):
        check_keys_apply(_w(engine="llama.cpp", num_ctx=8192))
    with pytest.raises(InvalidSettingError, match=r"'gpu_layers'.*inference"):
        check_keys_apply(make_workload({"model": "llama-3.1-8b", "task": "lora", "gpu_layers": 4}))
    check_keys_apply(_w(engine="ollama", gpu_layers=10, num_ctx=8192, host_memory_bandwidth=60))
    with pytest.raises(InvalidSettingError, match="gpu_layers"):
        _w(engine="llama.cpp", gpu_layers=-1)


def test_engine_refuses_a_weight_format_it_cannot_load() -> None:
    """AutoAWQ loads AWQ only; llama.cpp and Ollama load GGUF only (specs/engine_formats.py)."""
    with pytest.raises(InvalidSettingError, match=r"autoawq engine loads weights only \(awq\).*weight_dtype is gptq"):
        check_keys_apply(_w(engine="autoawq", weight_dtype="gptq"))
    with pytest.raises(InvalidSettingError, match=r"autoawq.*weight_dtype is q4_k_m"):
        check_keys_apply(_w(engine="autoawq", weight_dtype="q4_k_m"))
    with pytest.raises(
        InvalidSettingError, match=r"llama\.cpp engine loads GGUF weights only \(fp32, fp16, bf16, q8_0.*awq"
    ):
        check_keys_apply(_w(engine="llama.cpp", weight_dtype="awq"))
    with pytest.raises(InvalidSettingError, match=r"ollama engine loads GGUF.*weight_dtype is fp8"):
        check_keys_apply(_w(engine="ollama", weight_dtype="fp8"))
    for engine, fmt in (("autoawq", "awq"), ("llama.cpp", "q4_k_m"), ("ollama", "q8_0"), ("llama.cpp", "fp16")):
        check_keys_apply(_w(engine=engine, weight_dtype=fmt))
    check_keys_apply(_w(engine="vllm", weight_dtype="gptq"))  # vLLM loads many formats: no refusal
    check_keys_apply(_w(engine="ollama"))  # its default (q4_k_m) is GGUF


# --- TGI ---------------------------------------------------------------------------------------
def test_tgi_max_batch_prefill_tokens_is_its_compute_optimum(catalog: Catalog, m8b: ModelSpec) -> None:
    """Llama 3.1 8B in TGI's Config::flop: 32 x (2 x 4096 x 128 x (3 x 32 + 2 x 8) + 6 x 4096 x 14336)
    = 15,032,385,536 FLOPs a token; A10G 125 TFLOP/s in TGI's table -> 8,315 tokens; H100 900 ->
    59,870; a card TGI does not know (RTX 4090, whose nvidia-smi name it does not match) -> 4,096."""
    assert engines.tgi_model_flop(m8b) == 15_032_385_536
    assert engines.tgi_max_batch_prefill_tokens(m8b, catalog.get("A10G"), 1) == 8315
    assert engines.tgi_max_batch_prefill_tokens(m8b, catalog.get("H100"), 1) == 59_870
    assert engines.tgi_max_batch_prefill_tokens(m8b, catalog.get("H100"), 4) == 131_072  # the context caps it
    assert engines.tgi_max_batch_prefill_tokens(m8b, catalog.get("RTX 4090"), 1) == 4096


def test_tgi_kv_budget_is_the_card_less_wiggle_room_weights_warmup_and_context(
    catalog: Catalog, m8b: ModelSpec
) -> None:
    a10g = catalog.get("A10G")
    w = _w(engine="tgi", batch_size=32, input_len=1000, output_len=250, ecc=False)  # all 24 GiB
    e = estimate_memory(m8b, w, a10g)
    assert e.serving is not None and e.serving.gpu_memory_utilization == 1.0
    weights = _line(e, "weights")
    warmup = _line(e, "prefill activations")  # one prefill of the 8,315-token --max-batch-prefill-tokens
    usable = a10g.memory_bytes * runtime.USABLE_MEMORY_FRACTION * 0.90  # TGI_WIGGLE_ROOM
    expected = usable - weights - warmup - runtime.CUDA_CONTEXT_BYTES
    assert e.serving.kv_budget_bytes == pytest.approx(expected, rel=1e-9)
    # as AWS ships it, ECC on: nvidia-smi shows 23,028 MiB (catalog memory_ecc_MiB), 996 MiB less,
    # all of it out of the KV budget (5.07 GiB -> 3.73 GiB)
    ecc_on = estimate_memory(m8b, w.with_(ecc=None), a10g).serving
    lost = (24 * 1024 - 23_028) * 2**20 * runtime.USABLE_MEMORY_FRACTION * 0.90
    assert ecc_on is not None and ecc_on.kv_budget_bytes == pytest.approx(expected - lost, rel=1e-9)
    assert ecc_on.kv_budget_bytes / 2**30 == pytest.approx(3.73, abs=0.005)
    per_token = m8b.kv_bytes_per_token()  # 128 KiB: 32 layers x 2 x 8 KV heads x 128 x 2 bytes
    assert per_token == 131_072
    assert e.serving.max_tokens == math.floor(expected / per_token)
    set_fraction = estimate_memory(m8b, w.with_(gpu_memory_utilization=0.8), a10g)
    assert set_fraction.serving is not None and set_fraction.serving.gpu_memory_utilization == 0.8
    assert set_fraction.serving.kv_budget_bytes == pytest.approx(expected - usable * 0.2, rel=1e-9)


def test_tgi_prefill_activation_peak_is_one_max_batch_prefill(catalog: Catalog, m8b: ModelSpec) -> None:
    a10g = catalog.get("A10G")
    tgi = estimate_memory(m8b, _w(engine="tgi", batch_size=32, input_len=1000), a10g)
    # transformers prefills the whole batch at once (vLLM's pool view shows its profile run instead)
    whole = estimate_memory(m8b, _w(engine="transformers", batch_size=32, input_len=1000), a10g)
    assert _line(tgi, "prefill activations") == pytest.approx(_line(whole, "prefill activations") * 8315 / 32000)


def _launch(ops: tuple[Op, ...]) -> Op:
    return next(o for o in ops if o.phase == "launch")


def test_tgi_cuda_graphs_up_to_batch_32_and_at_most_128_requests(catalog: Catalog, m8b: ModelSpec) -> None:
    h100 = catalog.get("H100")
    small = estimate_inference_time(m8b, _w(engine="tgi", batch_size=32), h100)
    big = estimate_inference_time(m8b, _w(engine="tgi", batch_size=64), h100)
    assert _launch(small.decode_ops).name == "kernel launches (graph)"
    assert _launch(big.decode_ops).name.startswith("kernel launches (no CUDA graph")
    assert _launch(big.decode_ops).time_s >= _launch(small.decode_ops).time_s
    t = estimate_inference_time(m8b, _w(engine="tgi", batch_size=8), h100, max_batch=5000)
    assert t.max_batch == 128 and t.best_batch <= 128


def test_tgi_runs_what_its_kv_cache_and_request_cap_hold(catalog: Catalog, m8b: ModelSpec) -> None:
    """TGI, like vLLM, runs min(the sequences its KV cache holds, --max-concurrent-requests 128) at
    once: the A10G example's 3.73 GiB KV budget holds 24 of 32 sequences of 1,250 tokens (24 at once,
    the other 8 wait: the whole batch in 2 waves), and batch 200 on an H100 runs 128 (the rest refused,
    HTTP 429, and retried)."""
    from gpuplan.planner.serving import running_batch

    r = gpuplan.estimate("examples/tgi-8b.yaml")
    assert r.memory.serving is not None and r.memory.serving.max_sequences == 24
    assert isinstance(r.time, InferenceSpeed) and r.time.batch == 24
    assert r.time.queue is not None and (r.time.queue.held, r.time.queue.waves) == (24, 2)
    assert r.verdict.notes[0].startswith(
        "24 of the 32 requests run at once and the other 8 wait (TGI's KV cache holds 24)"
    )
    h100 = catalog.get("H100")
    w = _w(engine="tgi", batch_size=200, input_len=1000, output_len=250)
    mem = estimate_memory(m8b, w, h100)
    assert mem.serving is not None and mem.serving.max_sequences > 200  # the KV cache is not what binds
    held, note = running_batch(w, mem)
    assert held == engines.TGI_MAX_CONCURRENT_REQUESTS == 128
    assert "--max-concurrent-requests 128 admits 128 of the 200" in note and "refuses the rest" in note
    big = gpuplan.estimate("examples/tgi-8b.yaml", gpu="H100", batch_size=200)
    assert isinstance(big.time, InferenceSpeed) and big.time.batch == 128
    assert big.time.queue is not None and big.time.queue.waves == 2  # 128, then the 72 refused and retried
    assert "--max-concurrent-requests 128 refuses them (HTTP 429)" in big.verdict.notes[0]
    assert running_batch(w.with_(batch_size=100), mem) == (100, "")


# --- Ollama ------------------------------------------------------------------------------------
def test_ollama_defaults_q4_k_m_and_one_request(catalog: Catalog, m8b: ModelSpec) -> None:
    w = _w(engine="ollama")
    assert w.effective_weight_dtype == "q4_k_m"
    assert _w(engine="ollama", weight_dtype="q8_0").effective_weight_dtype == "q8_0"
    t = estimate_inference_time(m8b, w, catalog.get("RTX 4090"), max_batch=500)
    assert t.max_batch == 1


@pytest.mark.parametrize(("gpu", "ctx"), [("RTX 3070", 4096), ("RTX 4090", 32_768), ("H100", 131_072)])
def test_ollama_allocates_num_ctx_by_gpu_memory(catalog: Catalog, m8b: ModelSpec, gpu: str, ctx: int) -> None:
    """Under 23 GiB: 4k, 23-47 GiB: 32k, 47 GiB and more: 256k (ollama server/routes.go@fb307609),
    capped at Llama 3.1's 131,072 trained positions."""
    card = catalog.get(gpu)
    e = estimate_memory(m8b, _w(engine="ollama", input_len=100, output_len=100), card)
    assert engines.ollama_num_ctx(_w(engine="ollama"), m8b, card) == ctx
    assert _line(e, "KV cache") == pytest.approx(ctx * 131_072, rel=1e-9)
    assert e.serving is None
    e2 = estimate_memory(m8b, _w(engine="ollama", num_ctx=8192), card)
    assert _line(e2, "KV cache") == pytest.approx(8192 * 131_072, rel=1e-9)
    short = estimate_memory(m8b, _w(engine="ollama", num_ctx=1024, input_len=1000, output_len=100), card)
    assert any("drops the start of the prompt" in n for n in short.notes)
    assert not any("drops" in n for n in e2.notes)


@pytest.mark.parametrize(
    ("gpu", "ctx"),
    # the L4 and A10G show 23,034 and 23,028 MiB with ECC on (22.5 GiB); an L40S 46,068 MiB (45 GiB);
    # an RTX A6000 with ECC off its full 48 GiB
    [("L4", 4096), ("A10G", 4096), ("L40S", 32_768), ("RTX A6000", 131_072)],
)
def test_ollamas_default_context_thresholds_are_its_codes(catalog: Catalog, m8b: ModelSpec, gpu: str, ctx: int) -> None:
    """routes.go compares with 23 and 47 GiB (its docs say 24 and 48), on the memory the driver
    shows, summed over all the GPUs it finds, wherever the layers then go."""
    assert engines.OLLAMA_CTX_BY_VRAM == ((23 * 2**30, 4096), (47 * 2**30, 32_768))
    assert engines.ollama_num_ctx(_w(engine="ollama"), m8b, catalog.get(gpu)) == ctx
    for layout in ({"pp": 2}, {}):  # split over both, or on one of them: the default reads both
        two = engines.ollama_num_ctx(_w(engine="ollama", num_gpus=2, **layout), m8b, catalog.get(gpu))
        assert two == {4096: 32_768, 32_768: 131_072}.get(ctx, ctx)  # 45 GiB: 32k; 90 GiB: 256k, capped


def test_ollama_splits_a_model_that_does_not_fit_itself(catalog: Catalog) -> None:
    """num_gpu unset: the output layer and as many layers as fit (Qwen2.5-14B Q4_K_M, 4k context, on
    8 GiB: 40 = the output and 39 of 48), the same estimate as gpu_layers: 40; one more would not fit."""
    m, card = load_model("qwen2.5-14b"), catalog.get("RTX 3070")
    w = make_workload({"model": "qwen2.5-14b", "task": "inference", "engine": "ollama"})
    n = engines.ollama_gpu_layers(m, w, card)
    assert n == 40
    auto, explicit = estimate_memory(m, w, card), estimate_memory(m, w.with_(gpu_layers=n), card)
    assert auto.per_gpu_bytes == pytest.approx(explicit.per_gpu_bytes, rel=1e-12)
    usable = card.memory_bytes * runtime.USABLE_MEMORY_FRACTION
    assert auto.per_gpu_bytes <= usable < estimate_memory(m, w.with_(gpu_layers=n + 1), card).per_gpu_bytes
    assert estimate_inference_time(m, w, card).tpot_s == estimate_inference_time(m, w.with_(gpu_layers=n), card).tpot_s
    # a model that fits keeps every layer on the GPU
    assert engines.offload_of(load_model("llama-3.1-8b"), _w(engine="ollama"), card) is None


def test_validation_prose_names_tgi_and_ollama() -> None:
    from gpuplan.planner.validation_prose_speed import _engine

    assert _engine("HF text-generation-inference 2.0, 16 concurrent users") == "tgi"
    assert _engine("TGI on one A10G") == "tgi"
    assert _engine("ollama 0.5 (llama.cpp backend), q4_K_M") == "ollama"
    assert _engine("llama.cpp b3000 -ngl 99") == "llama.cpp"


# --- a serving benchmark's request rate ---------------------------------------------------------
def _q(m: ModelSpec, w: Workload, gpu: GPU, most: int | None) -> float:
    """The engine time one arriving prompt's prefill takes: the share of a batched prefill at the
    most in flight (default the engine's cap, vLLM's max_num_seqs on the card), at most one
    prompt's own prefill."""
    one = estimate_inference_time(m, w.with_(batch_size=1, request_rate=None), gpu)
    most = most or runtime.vllm_max_num_seqs(gpu)
    full = estimate_inference_time(m, w.with_(batch_size=most, request_rate=None), gpu, max_batch=most)
    return min(one.ttft_s, full.ttft_s / most)


def _latency(m: ModelSpec, w: Workload, gpu: GPU, k: int, rate: float, most: int | None = None) -> float:
    """L(k), worked from plain estimates: one prompt's prefill and the decode step at batch k,
    both stretched by rho = rate x q (the engine's time arriving prompts take)."""
    one = estimate_inference_time(m, w.with_(batch_size=1, request_rate=None), gpu)
    at_k = estimate_inference_time(m, w.with_(batch_size=k, request_rate=None), gpu)
    rho = rate * _q(m, w, gpu, most)
    return (one.ttft_s + (w.output_len - 1) * at_k.tpot_s) / (1 - rho)


@pytest.mark.parametrize(("rate", "k"), [(0.5, 1), (2.0, 4), (8.0, 20)])
def test_request_rate_runs_littles_law_concurrency(catalog: Catalog, m8b: ModelSpec, rate: float, k: int) -> None:
    """k is the least batch with k >= rate x L(k) (Llama 3.1 8B, 1,000 + 250 tokens, one H100)."""
    h100 = catalog.get("H100")
    w = _w(input_len=1000, output_len=250, request_rate=rate)
    t = estimate_inference_time(m8b, w, h100)
    assert t.batch == k
    assert k >= rate * _latency(m8b, w, h100, k, rate)
    assert k == 1 or k - 1 < rate * _latency(m8b, w, h100, k - 1, rate)
    assert any(n.startswith(f"request_rate {rate:g}/s:") for n in t.notes)
    # two replicas share the arrivals: each sees half the rate
    two = estimate_inference_time(m8b, w.with_(num_gpus=2, request_rate=2 * rate), h100)
    assert two.batch == k and two.replicas == 2


def test_request_rate_prefills_each_prompt_on_arrival(catalog: Catalog, m8b: ModelSpec) -> None:
    """At a rate the engine serves, a prompt's time to first token is its own prefill stretched by
    1 / (1 - rho), plus half the running decode step; not the prefill of all k in flight (Llama 3.1
    8B, 1,000 + 250 tokens, one H100, 8 requests/s: k = 20). Past capacity the batch's prefill stays."""
    h100 = catalog.get("H100")
    w = _w(input_len=1000, output_len=250, request_rate=8.0)
    t = estimate_inference_time(m8b, w, h100)
    one = estimate_inference_time(m8b, w.with_(batch_size=1, request_rate=None), h100)
    at_k = estimate_inference_time(m8b, w.with_(batch_size=t.batch, request_rate=None), h100)
    rho = 8.0 * _q(m8b, w, h100, None)
    assert t.batch == 20 and 0.0 < rho < 1.0
    assert t.ttft_s == pytest.approx(one.ttft_s / (1 - rho) + at_k.tpot_s / 2, rel=1e-9)
    assert t.ttft_s < 0.25 * at_k.ttft_s  # the batch of 20 prefilled together would take over four times as long
    over = estimate_inference_time(m8b, w.with_(request_rate=100), h100, max_batch=329)
    full = estimate_inference_time(m8b, w.with_(batch_size=329, request_rate=None), h100)
    assert over.ttft_s == pytest.approx(full.ttft_s, rel=1e-9)


def test_request_rate_past_capacity_says_so(catalog: Catalog, m8b: ModelSpec) -> None:
    h100 = catalog.get("H100")
    w = _w(input_len=1000, output_len=250, request_rate=100)
    t = estimate_inference_time(m8b, w, h100, max_batch=329)
    assert t.batch == 329 and any("more than it serves" in n for n in t.notes)
    capped = estimate_inference_time(m8b, w.with_(batch_size=16), h100, max_batch=329)  # --max-concurrency 16
    assert capped.batch == 16 and any("more than it serves" in n for n in capped.notes)
    with pytest.raises(InvalidSettingError, match=r"'request_rate'.*inference"):
        check_keys_apply(make_workload({"model": "llama-3.1-8b", "task": "lora", "request_rate": 2}))


@pytest.mark.parametrize(("rate", "k", "batch_k_rate"), [(2.0, 4, 555), (8.0, 20, 2062)])
def test_request_rate_delivers_the_arrivals_tokens(
    catalog: Catalog, m8b: ModelSpec, rate: float, k: int, batch_k_rate: float
) -> None:
    """QA F14: in steady state an open loop delivers rate x output_len tokens/s (2 x 250 = 500,
    8 x 250 = 2,000), not batch k's saturated rate (555, 2,062: k is Little's law rounded up), and
    $/Mtok is priced at what is delivered (the GPU-hour is paid busy or not)."""
    h100 = catalog.get("H100")
    w = _w(input_len=1000, output_len=250, request_rate=rate)
    t = estimate_inference_time(m8b, w, h100)
    at_k = estimate_inference_time(m8b, w.with_(batch_size=k, request_rate=None), h100)
    assert t.batch == k and at_k.output_tokens_per_s == pytest.approx(batch_k_rate, rel=0.005)
    assert t.output_tokens_per_s == pytest.approx(rate * 250, rel=1e-9) and t.offered_tokens_per_s == rate * 250
    assert t.tpot_s == pytest.approx(at_k.tpot_s, rel=1e-9)  # batch k stays the latency basis
    job = {"model": "llama-3.1-8b", "gpu": "H100", "input_len": 1000, "output_len": 250, "request_rate": rate}
    e = gpuplan.estimate(job)
    assert isinstance(e.time, InferenceSpeed) and e.cost is not None and e.time.output_tokens_per_s_high == rate * 250
    assert e.cost.usd_per_gpu_hour is not None and e.cost.usd_per_million_tokens is not None
    by_hand = e.cost.usd_per_gpu_hour / 3600 / (rate * 250) * 1e6  # one GPU's hour over what it delivers
    assert e.cost.usd_per_million_tokens == pytest.approx(by_hand, rel=1e-3)
    # past capacity the engine delivers what batch `most` serves, below the arrivals
    over = estimate_inference_time(m8b, w.with_(request_rate=100), h100, max_batch=329)
    assert over.output_tokens_per_s < 100 * 250 and over.offered_tokens_per_s == 25_000


def _served(notes: tuple[str, ...]) -> float:
    note = next(n for n in notes if "more than it serves" in n)
    return float(note.split("about ")[1].split(" requests/s")[0])


def test_request_rate_capacity_does_not_depend_on_the_offered_rate(catalog: Catalog, m8b: ModelSpec) -> None:
    """What batch 32 serves (Llama 3.1 8B, 1,000 + 250 tokens, one L40S, --max-concurrency 32) is
    one figure, whatever the arrivals: 32 over the request latency of a batch of 32 within 2%
    (3.27 requests/s against 32 x 250 / 824 tokens/s = 3.30), and a rate below it runs fewer."""
    l40s = catalog.get("L40S")
    w = _w(input_len=1000, output_len=250, batch_size=32)
    plain = estimate_inference_time(m8b, w, l40s, max_batch=32)
    by_hand = 32 / plain.request_latency_s
    served = [_served(estimate_inference_time(m8b, w.with_(request_rate=r), l40s).notes) for r in (5, 10, 50, 1e6)]
    assert served == [served[0]] * 4
    assert served[0] == pytest.approx(by_hand, rel=0.02)
    assert served[0] == pytest.approx(3.27, abs=0.005)
    rate = 0.95 * by_hand
    below = estimate_inference_time(m8b, w.with_(request_rate=rate), l40s)
    assert not any("more than it serves" in n for n in below.notes)
    k = below.batch
    assert k <= 32 and k >= rate * _latency(m8b, w, l40s, k, rate, 32)
    assert k - 1 < rate * _latency(m8b, w, l40s, k - 1, rate, 32)


# --- transformers' static cache ----------------------------------------------------------------
def test_static_cache_preallocates_and_compiles_decode(catalog: Catalog, m8b: ModelSpec) -> None:
    h100 = catalog.get("H100")
    dyn = _w(engine="transformers", input_len=512, output_len=256)
    static = dyn.with_(cache_implementation="static")
    e_dyn, e_static = estimate_memory(m8b, dyn, h100), estimate_memory(m8b, static, h100)
    per_token = m8b.kv_bytes_per_token()
    assert _line(e_dyn, "KV cache") == pytest.approx(512 * per_token)  # after the prefill
    after_prefill = [x for x in (*e_static.lines, *e_static.not_at_peak) if x.name == "KV cache"]
    assert all(x.bytes == pytest.approx(768 * per_token) for x in after_prefill)
    t_dyn = estimate_inference_time(m8b, dyn, h100)
    t_static = estimate_inference_time(m8b, static, h100)
    assert _launch(t_static.decode_ops).name == "kernel launches (graph)"
    assert t_static.tpot_s < t_dyn.tpot_s * 0.9  # eager generate is CPU-bound at batch 1
    assert t_static.ttft_s == pytest.approx(t_dyn.ttft_s, rel=1e-12)  # the prefill stays eager
    # unset is transformers' default, the dynamic cache: the same numbers as before
    assert estimate_inference_time(m8b, dyn.with_(cache_implementation="dynamic"), h100).tpot_s == t_dyn.tpot_s


# --- the examples ------------------------------------------------------------------------------
def test_tgi_example() -> None:
    r = gpuplan.estimate("examples/tgi-8b.yaml")
    assert r.verdict.fits and r.time is not None
    assert r.memory.serving is not None and r.memory.serving.gpu_memory_utilization == 1.0
    # 32 x 1,250 tokens x 128 KiB of KV = 4.88 GiB at the end of decode
    assert r.memory.breakdown["KV cache"] == pytest.approx(32 * 1250 * 131_072, rel=1e-9)


def test_laptop_offload_example() -> None:
    """-ngl 37: the output layer and 36 of Qwen2.5-14B's 48 layers on the 8 GB card."""
    r = gpuplan.estimate("examples/laptop-offload.yaml")
    m = load_model("qwen2.5-14b")
    block, embed, head = _parts(m)
    assert r.verdict.fits
    assert r.memory.breakdown["weights (q4_k_m)"] == pytest.approx(block * 36 / 48 + head, rel=1e-9)
    assert r.memory.host_bytes > block * 12 / 48 + embed
    assert isinstance(r.time, InferenceSpeed)
    # the 12 host layers: ~2.2 GB a token at 89.6 GB/s = ~24 ms of each step
    cpu_s = block * 12 / 48 / (89.6 * GB)
    assert 0.020 < cpu_s < 0.030
    assert r.time.tpot_s > cpu_s


def test_llama_cpp_layer_split_runs_the_output_layer_once_a_step(catalog: Catalog, m8b: ModelSpec) -> None:
    # -sm layer passes the token through the stages in turn: the output layer (on the last stage)
    # runs once a step, so splitting over 8 cards adds only the hops between them
    card = catalog.get("RTX 3090")
    kw: dict[str, Any] = {"engine": "llama.cpp", "weight_dtype": "fp16", "input_len": 0, "output_len": 512}
    one = estimate_inference_time(m8b, _w(**kw), card)
    eight = estimate_inference_time(m8b, _w(num_gpus=8, pp=8, **kw), card)
    head = [o.time_s for o in one.decode_ops if o.name == "linear lm_head"]
    assert [o.time_s for o in eight.decode_ops if o.name == "linear lm_head"] == pytest.approx(head, rel=1e-9)
    hops = sum(o.time_s for o in eight.decode_ops if o.name == "pipeline send/recv")
    assert hops > 0
    assert eight.tpot_s == pytest.approx(one.tpot_s + hops, rel=1e-6)


def test_ngl_counts_the_output_layer_first_as_current_llama_cpp_does() -> None:
    """QA F6, checked against the source: current llama.cpp (src/llama-model.cpp load_tensors,
    i_gpu_start = max(n_layer_all + 1 - n_gpu_layers, 0), the output layer at index n_layer_all) puts
    the output layer on the GPU first, then the last N - 1 repeating layers; builds up to
    ggml-org/llama.cpp@00342301 (i_gpu_start = max(n_layer - n_gpu_layers, 0)) offloaded it last.
    Qwen2.5-14B has 48 layers: -ngl 37 holds the output and 36 layers, -ngl 48 leaves one layer on
    the CPU, -ngl 49 (n_layer + 1) holds everything."""
    m = load_model("qwen2.5-14b")
    assert m.num_layers == 48

    def split(ngl: int) -> engines.Offload | None:
        w = make_workload({"model": "qwen2.5-14b", "task": "inference", "engine": "llama.cpp",
                           "weight_dtype": "q4_k_m", "gpu_layers": ngl})  # fmt: skip
        return engines.offload_of(m, w)

    o37, o48 = split(37), split(48)
    assert o37 is not None and (o37.head_on_gpu, o37.gpu_blocks, o37.cpu_layers) == (True, 36, 12)
    assert o37.gpu_share == pytest.approx(36 / 48)
    assert o48 is not None and (o48.gpu_blocks, o48.cpu_layers) == (47, 1)
    assert split(49) is None
    zero = split(0)
    assert zero is not None and (zero.head_on_gpu, zero.gpu_blocks) == (False, 0)


def test_gguf_and_transformers_labels_name_their_engine(run_cli: Any) -> None:
    """QA F27.4: a Q4_K_M llama.cpp job's title names its weights, its peak is not called torch's,
    and its runtime rows say the PyTorch figures are kept for ggml; a transformers job's best batch
    is the best within memory (no KV pool). vLLM keeps its own labels."""
    base = ["estimate", "qwen2.5-14b", "--gpu", "RTX 3070", "--set", "datacenter=false", "--engine", "llama.cpp"]
    code, out, err = run_cli(*base, "--weight-dtype", "q4_k_m", "--set", "gpu_layers=43")
    assert code == 0, err
    assert "· bf16, q4_k_m weights on GeForce RTX 3070" in out and "allocated (peak) 6.99 GiB" in out
    assert "torchtune #1348" not in out and "pytorch/pytorch#109888" not in out and "kept for ggml's" in out
    code, out, _ = run_cli(*base, "--weight-dtype", "q4_k_m")  # too big: the offload fix, per output token
    assert (
        code == 0 and "gpu_layers=43 → 7.74 GiB per GPU" in out and "37.0 ms per output token" in out.replace("\n", "")
    )
    code, out, err = run_cli(
        "estimate", "llama-3.1-8b", "--gpu", "A100", "--engine", "transformers", "--batch-size", "4"
    )
    assert code == 0, err
    assert "best within memory (batch 1024)" in out and "KV cache (batch" not in out
    assert "allocated (torch peak)" in out and "· bf16 on A100" in out
    code, out, err = run_cli("estimate", "llama-3.1-8b", "--gpu", "A100", "--batch-size", "4")
    assert code == 0 and "best within the KV cache (batch 256)" in out and "allocated (torch peak)" in out


def test_sglang_decodes_eagerly_above_its_cuda_graph_batches(catalog: Catalog) -> None:
    # sglang server_args.py (v0.4.x): --cuda-graph-max-bs 160 on cards of 25,000 MiB and more, 8 below
    # them at TP < 4 (80 at TP >= 4); a larger decode batch is issued from Python kernel by kernel.
    # An RTX 4090 shows 24,564 MiB
    assert engines.graph_max_batch("sglang", 24_564 * 2**20, 1) == 8
    assert engines.graph_max_batch("sglang", 24_564 * 2**20, 4) == 80
    assert engines.graph_max_batch("sglang", 80e9, 1) == 160
    assert engines.graph_max_batch("tgi", 80e9, 1) == engines.TGI_CUDA_GRAPH_MAX_BATCH
    assert engines.graph_max_batch("vllm", 80e9, 1) is None
    model, small = load_model("llama-3.1-8b"), catalog.get("GeForce RTX 4090")

    def launches(gpu: GPU, batch: int) -> Op:
        w = _w(engine="sglang", precision="bf16", batch_size=batch, input_len=512, output_len=128)
        it = estimate_inference_time(model, w, gpu)
        return next(o for o in it.decode_ops if o.name.startswith("kernel launches"))

    assert launches(small, 8).name == "kernel launches (graph)"
    eager = launches(small, 16)
    assert eager.name == "kernel launches (no CUDA graph above batch 8)"
    # at least the graph's per-kernel gaps (32 layers' kernels + 4, 2 us each), here the issue time
    # that the GPU's ~16 ms of weight reads (16 GB at about 1 TB/s) does not hide
    graph = launches(small, 8)
    assert eager.time_s >= graph.time_s * 0.999
    assert launches(catalog.get("H100 SXM5 80GB"), 16).name == "kernel launches (graph)"


def test_closed_loop_successor_misses_the_steps_the_engine_loop_has_taken_up(catalog: Catalog) -> None:
    # vLLM V1's EngineCoreProc takes new requests between steps (vllm/v1/engine/core.py): a request
    # sent when one finishes joins the step after the one under way; SGLang's overlap scheduler has
    # scheduled one batch more (scheduler.py event_loop_overlap). Engines without an entry: no gap
    assert engines.closed_loop_gap_steps("vllm") == 1
    assert engines.closed_loop_gap_steps("sglang") == 2
    assert engines.closed_loop_gap_steps("tgi") == 0 and engines.closed_loop_gap_steps("tensorrt-llm") == 0
    # HPML's Llama 2 7B sweep on one L4 (vllm bench sweep, Dec 2025; stacks.csv HPV-004): 15-token
    # prompts, 5 output tokens, 2 in flight: 30.32 output tokens/s measured
    model, l4 = load_model("llama-2-7b"), catalog.get("L4")
    w = make_workload(
        {"model": "llama-2-7b", "task": "inference", "precision": "fp16", "input_len": 15, "output_len": 5}
        | {"batch_size": 2, "engine": "vllm"}
    )
    it = estimate_inference_time(model, w, l4)
    # each slot: the request's prefill and 4 decode steps, then 1 step empty: 2 x 5 / (ttft + 5 x tpot)
    assert it.output_tokens_per_s == pytest.approx(2 * 5 / (it.ttft_s + 5 * it.tpot_s), rel=1e-9)
    assert it.output_tokens_per_s == pytest.approx(30.32, rel=0.05)  # 29.5 predicted
    static = 2 * 5 / it.request_latency_s  # the static batch's figure, without the empty step: 17% high
    assert static / 30.32 - 1 > 0.15
    # one in flight: the engine is idle when the successor arrives, so no step is missed
    one = estimate_inference_time(model, w.with_(batch_size=1), l4)
    assert one.output_tokens_per_s == pytest.approx(5 / one.request_latency_s, rel=1e-9)
    # a batch job is fed from the engine's own queue: the slot is refilled at the next step
    job = estimate_inference_time(model, w.with_(tokens=1e6), l4)
    assert job.output_tokens_per_s == pytest.approx(2 * 5 / job.request_latency_s, rel=1e-9)
    # an engine without an entry keeps the static batch's figure
    tgi = estimate_inference_time(model, w.with_(engine="tgi"), l4)
    assert tgi.output_tokens_per_s == pytest.approx(2 * 5 / tgi.request_latency_s, rel=1e-9)


def test_sglang_overlap_scheduler_delays_an_arriving_prompt_one_step(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DataCrunch's SGLang bench_serving run (Dec 2024; stacks.csv DCH-026): Llama 3.1 405B on 8 H200s,
    # random prompts (mean 515 in / 515 out) at 2/s: 244.26 ms median time to first token
    model, h200 = load_model("llama-3.1-405b"), catalog.get("H200 SXM 141GB")
    w = make_workload(
        {"model": "llama-3.1-405b", "task": "inference", "precision": "bf16", "num_gpus": 8, "tp": 8}
        | {"input_len": 515, "output_len": 515, "request_rate": 2, "engine": "sglang"}
    )
    it = estimate_inference_time(model, w, h200)
    monkeypatch.setitem(engines.ARRIVAL_EXTRA_STEPS, "sglang", 0)
    without = estimate_inference_time(model, w, h200)
    # the same prefill, after one more decode step of the running batch (about 45 ms here)
    assert it.ttft_s - without.ttft_s == pytest.approx(it.tpot_s, rel=1e-9)
    assert it.tpot_s == without.tpot_s and it.output_tokens_per_s == without.output_tokens_per_s
    # 260 ms predicted: 178 ms of prefill and waits, the step it adds (45 ms), 37 ms of host time
    assert it.ttft_s * 1e3 == pytest.approx(244.26, rel=0.12)
    assert (without.ttft_s - engines.REQUEST_HOST_S["sglang"]) * 1e3 < 244.26 * 0.75
