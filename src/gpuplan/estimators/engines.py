"""What the inference engines beyond vLLM do by default, where the estimate depends on it, each
default cited: text-generation-inference (TGI), Ollama, transformers' static cache, AutoAWQ's fused
runtime, and llama.cpp's (and Ollama's) partial GPU offload. The memory and speed estimators read these; the numbers of the
engines that were there before (vllm, tensorrt-llm, sglang, mlc, llama.cpp with every layer on the
GPU, transformers with its dynamic cache) do not go through here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gpuplan.estimators import runtime
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec, ParamGroup
from gpuplan.specs.precision import storage_format
from gpuplan.specs.workload import Workload

GiB: Final = 2**30

# --- text-generation-inference (TGI) ---------------------------------------------------------------
# Read at huggingface/text-generation-inference@db931fcf42da018a3657580c64bf2720f167f9ab (2026-01-08)
# and its launcher reference (docs/source/reference/launcher.md):
# --cuda-memory-fraction [default: 1.0] (server/text_generation_server/utils/dist.py MEMORY_FRACTION)
TGI_CUDA_MEMORY_FRACTION: Final = 1.0
# the KV cache gets the memory free after a warm-up prefill, less (1 - fraction x TGI_WIGGLE_ROOM)
# of the card (models/flash_causal_lm.py warmup; utils/import_utils.py get_cuda_free_memory);
# TGI_WIGGLE_ROOM defaults to 0.90 (models/globals.py)
TGI_WIGGLE_ROOM: Final = 0.90
# --max-concurrent-requests [default: 128]: more concurrent requests are refused, not batched
TGI_MAX_CONCURRENT_REQUESTS: Final = 128
# --cuda-graphs: default [1, 2, 4, 8, 16, 32] (launcher/src/main.rs): decode batches above 32 run
# without a CUDA graph
TGI_CUDA_GRAPH_MAX_BATCH: Final = 32
# SGLang captures CUDA graphs for decode batches up to --cuda-graph-max-bs: 160 by default on cards of
# 25,000 MiB and more (nvidia-smi's memory.total), 8 at TP < 4 below that and 80 at TP >= 4
# (sgl-project/sglang python/sglang/srt/server_args.py ServerArgs.__post_init__, v0.4.x); larger
# batches run eagerly
SGLANG_CUDA_GRAPH_MAX_BS: Final = 160
SGLANG_SMALL_GPU_BYTES: Final = 25_000 * 2**20


# vLLM and SGLang run a MoE layer's routed experts as one fused grouped GEMM (Triton fused_moe:
# vllm/model_executor/layers/fused_moe/fused_moe.py; sglang's copy in layers/moe/fused_moe_triton),
# which streams the experts' weights below a plain GEMV. Its kernel times at decode batches, read
# as time = fixed + touched-expert bytes / bandwidth: Qwen3-235B-A22B FP8 at TP8 on an H200, the
# default configs, 66.87 us at batch 8 (122 MB of touched experts) and 124.99 us at batch 32
# (264 MB): 2.44 TB/s, 0.51 of the 4.8 TB/s datasheet (sgl-project/sglang#11730, 2025-10);
# DeepSeek-R1 w8a8 at TP8 on a B200, 95.47 us at batch 8 (315 MB) and 175.80 us at batch 24
# (747 MB): 5.4 TB/s, 0.67 of 8 TB/s (sgl-project/sglang#11816, 2025-10). Against what a plain
# streaming kernel reaches on those cards (aiconfigurator's GEMVs: H200 0.85, B200 0.79;
# efficiency.py KERNEL_BW_EFF) that is 0.60 and 0.85: the fused kernel streams at their mean, 0.72
# of a GEMV's rate, in decode and prefill alike (a prefill's experts are compute-bound anyway).
FUSED_MOE_BW_SHARE: Final = 0.72
FUSED_MOE_ENGINES: Final = frozenset({"vllm", "sglang"})


def expert_bw_share(engine: str | None) -> float:
    """The share of a streaming kernel's bandwidth a routed-expert layer reads its weights at:
    FUSED_MOE_BW_SHARE under the engines that run Triton's fused_moe, else 1."""
    return FUSED_MOE_BW_SHARE if engine in FUSED_MOE_ENGINES else 1.0


def graph_max_batch(engine: str, gpu_bytes: float, tp: int) -> int | None:
    """The largest decode batch the engine replays as a CUDA graph, where it caps one (TGI, SGLang)."""
    if engine == "tgi":
        return TGI_CUDA_GRAPH_MAX_BATCH
    if engine == "sglang":
        if gpu_bytes < SGLANG_SMALL_GPU_BYTES:
            return 8 if tp < 4 else 80
        return SGLANG_CUDA_GRAPH_MAX_BS
    return None


# How an engine's host loop takes up a request that reaches it while a step runs (the time the
# request spends in the API server, the IPC and the client is hidden behind that step; what is not
# hidden is the step(s) it then waits for). vLLM V1: EngineCoreProc's busy loop drains its input
# queue, then runs one step (schedule, execute, update) to its end (vllm-project/vllm
# vllm/v1/engine/core.py@ac3cb2e2 run_busy_loop, _process_input_queue, _process_engine_step), so
# a request that arrives mid-step joins the next step: 0 extra steps. SGLang's overlap scheduler (on
# by default since v0.4: "zero-overhead batch scheduler", LMSYS blog 2024-12-04) receives requests
# and schedules batch n+1 as batch n starts on the GPU, and processes batch n's results while n+1
# runs (sgl-project/sglang python/sglang/srt/managers/scheduler.py@d51c1c21 event_loop_overlap):
# a request that arrives while batch n runs is received when n+1 starts and runs in n+2, one step
# later than in vLLM. Other engines: not modelled (no entry).
ARRIVAL_EXTRA_STEPS: Final[dict[str, int]] = {"vllm": 0, "sglang": 1}


def closed_loop_gap_steps(engine: str) -> int:
    """Decode steps a finished request's slot stays empty under a client that keeps a fixed number of
    requests in flight and sends the next one when one finishes (vllm bench serve / SGLang
    bench_serving --max-concurrency: a semaphore). The last token reaches the client after the engine
    has taken up its next step (vLLM), or the two next ones (SGLang streams batch n's tokens while
    n+1 runs, and the successor then waits for n+2), so the successor misses them: 1 + the arrival's
    extra steps, where ARRIVAL_EXTRA_STEPS knows the engine, else 0."""
    extra = ARRIVAL_EXTRA_STEPS.get(engine)
    return 0 if extra is None else 1 + extra


# --max-batch-prefill-tokens unset (launcher/src/main.rs): compute_optimal = the cards' f16 FLOP/s
# / the model's FLOPs per token (Config::flop), else 4,096 where it cannot tell, at most
# max_position_embeddings; the warm-up prefill runs that many tokens, and no prefill runs more
TGI_DEFAULT_PREFILL_TOKENS: Final = 4096
# TGI's card table (launcher/src/main.rs, ComputeType::f16_flop), keyed by the lower-cased,
# dash-joined name nvidia-smi reports: the catalog cards whose nvidia-smi name it matches ("NVIDIA
# H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA A10G" ...). The others ("Tesla T4", "NVIDIA
# GeForce RTX 4090", "NVIDIA H100 PCIe", "NVIDIA A10" ...) are Unknown to it: 4,096 tokens.
TGI_CARD_F16_FLOPS: Final = {
    "H100 SXM5 80GB": 900e12,
    "H100 NVL 94GB": 900e12,
    "H200 SXM 141GB": 989e12,
    "A100 SXM4 40GB": 312e12,
    "A100 SXM4 80GB": 312e12,
    "A100 PCIe 80GB": 312e12,
    "L40": 181e12,
    "L40S": 363e12,
    "L4": 121e12,
    "A10G": 125e12,
    "A40": 149e12,
}


def tgi_model_flop(model: ModelSpec) -> float:
    """TGI's FLOPs per token of a model (launcher/src/main.rs, Config::flop): per layer 2 x hidden x
    head_dim x (3 x heads + 2 x KV heads) for q, k, v, the attention and o, and 6 x hidden x
    intermediate (x the routed + shared experts) for the MLP."""
    h, hd = model.hidden_size, model.head_dim
    ff = model.intermediate_size * (max(model.experts_per_token, 1) + model.num_shared_experts)
    attn = 2 * h * hd * (3 * model.num_heads + 2 * model.num_kv_heads)
    return float((attn + 6 * h * ff) * model.num_layers)


def tgi_max_batch_prefill_tokens(model: ModelSpec, gpu: GPU, shards: int) -> int:
    """TGI's default --max-batch-prefill-tokens: the shards' f16 FLOP/s from its card table over
    tgi_model_flop, at most the model's context; 4,096 for a card it does not know or where that
    ratio is not over 100 (TGI: "most likely an error"). TGI also caps it at what its own VRAM
    estimate allows, which is not modelled."""
    peak = TGI_CARD_F16_FLOPS.get(gpu.name, 0.0)
    flop = tgi_model_flop(model)
    optimal = int(peak * shards / flop) if flop > 0 else 0
    value = optimal if optimal > 100 else TGI_DEFAULT_PREFILL_TOKENS
    return min(value, model.max_position_embeddings) if model.max_position_embeddings else value


# Engines that spread a model over GPUs by whole layers: llama.cpp's default --split-mode layer
# (common/arg.cpp, -sm: "layer (default): split layers and KV across GPUs"), which Ollama runs
# too; modelled as pipeline stages run in turn (pp; perf/inference.py), not tensor parallelism.
# The same two are the GGUF engines: partial offload (gpu_layers), ggml's own CUDA pool, no NCCL.
LAYER_SPLIT_ENGINES: Final = ("llama.cpp", "ollama")

# --- Ollama (llama.cpp underneath) ------------------------------------------------------------
# The library's default tags are 4-bit K-quants: a model pulled without a quantisation tag loads as
# Q4_K_M (ollama.com/library/llama3.1: `8b` is `8b-instruct-q4_K_M`, 4.7-4.9 GB; as third-party guides
# say, e.g. devtoolkit.sh/examples/llama/quantization: "ollama pull llama3.1:8b # default Q4_K_M")
OLLAMA_DEFAULT_WEIGHTS: Final = "q4_k_m"
# OLLAMA_NUM_PARALLEL unset: one request at a time per loaded model (Ollama 0.20.3's server log reads
# "Parallel:1" with the variable absent, a dated run of 2026-11-04: baeseokjae.github.io
# research/evidence/ollama-concurrent-requests-latency-2026/method.md); each parallel slot gets a
# whole num_ctx of cache (the runner's KvSize is num_ctx x parallel)
OLLAMA_NUM_PARALLEL: Final = 1
# Default context by the GPUs' memory (ollama docs/context-length.mdx@948f69330acf96a2310f1b53fdfc211731a386d8:
# "< 24 GiB VRAM: 4k context - 24-48 GiB VRAM: 32k context - >= 48 GiB VRAM: 256k context"). The code
# (ollama/ollama server/routes.go@fb30760996871fa9460115c753afd2c60d4ab0f7, Serve, since Feb 2026)
# compares with "slightly lower thresholds (47/23 GiB vs. 48/24 GiB)", so that a 24 GB card the
# driver shows as 24,564 MiB (an RTX 4090) still gets 32k: the code's figures are used. The code sums
# TotalMemory less OLLAMA_GPU_OVERHEAD (0 unset) over every GPU it finds (the workload's num_gpus),
# so two 24 GiB cards get 256k, capped at the model's context, wherever the layers then go
OLLAMA_CTX_BY_VRAM: Final = ((23 * GiB, 4096), (47 * GiB, 32_768))
OLLAMA_CTX_LARGE: Final = 262_144

# --- llama.cpp partial offload ----------------------------------------------------------------
# A prompt is processed in micro-batches of n_ubatch tokens (llama.cpp common/common.h: n_ubatch =
# 512); for a micro-batch of at least 32 tokens the CUDA backend copies the weights of the layers
# left in host memory to the GPU and runs them there (ggml-cuda.cu, ggml_backend_cuda_device_offload_op:
# min_batch_size = 32), so prefill reads the host layers over PCIe once per micro-batch
LLAMA_CPP_UBATCH: Final = 512
GGML_CUDA_OFFLOAD_MIN_BATCH: Final = 32


# --- AutoAWQ's fused runtime (engine: autoawq) ------------------------------------------------
# AutoAWQForCausalLM.from_quantized(..., fuse_layers=True), as its examples/benchmark.py and README
# run it. Read at casper-hansen/AutoAWQ@5c7e368 (2023-11-05, "New benchmarks in README", v0.1.6:
# the commit that published the README's benchmark tables and the benchmark.py that made them).
# Its fused attention (awq/modules/fused/attn.py, QuantAttentionFused) keeps a WindowedCache of
# batch x max_seq_len tokens, allocated at load (torch.zeros) and rolled when exceeded. v0.1.6 sized
# it from from_quantized's max_new_tokens, else the model's max_position_embeddings; current AutoAWQ
# defaults from_quantized(max_seq_len=2048) and reads max_new_tokens only as a deprecated alias
# (casper-hansen/AutoAWQ@00c3dfa8d7a84229150733129fe8fba84cbfdff4 awq/models/auto.py), so an unset
# num_ctx is 2048 tokens, as a user of a current release gets. The validation rows, measured on
# v0.1.6, each set num_ctx to what that run allocated (data/validation/stacks.csv).
AUTOAWQ_DEFAULT_CACHE_TOKENS: Final = 2048
# The cache's batch is fixed at load (from_quantized batch_size; another batch raises "Batch size
# is incorrectly set"): no continuous batching, so the estimate runs the batch given and no larger.
# A prompt (seqlen > 1) runs eager attention: torch.matmul scores (fp16), F.softmax(scores.float())
# (an fp32 copy and an fp32 result), .type_as back to fp16: at the softmax, 2 + 4 + 4 bytes per
# materialised score are live. Decode runs FasterTransformer's single_query_attention kernel.
AUTOAWQ_SCORE_BYTES: Final = 10.0
# A fused LlamaLikeBlock (awq/modules/fused/block.py) issues one kernel per module
# (FasterTransformerRMSNorm, fused qkv, the FT attention, o_proj, residual add, norm, gate, up,
# act x up, down, add), about the kernels a fused engine launches, with no CUDA graph and no host
# sync inside the step (benchmark.py syncs once per forward): eager issue at one op per kernel,
# overlapped with the GPU's work (perf/inference.py).
AUTOAWQ_OPS_PER_KERNEL: Final = 1.0
# Its decode attention, FasterTransformer's decoder_masked_multihead_attention (awq_cuda/attention,
# built as ft_inference_engine on Linux), launches grid(num_heads, batch): one thread block per
# query head and sequence streams its KV head's keys and values. A few dozen blocks (batch 1) leave
# most SMs idle, so a layer takes at least one block's cache / its streaming rate. That rate is
# fitted on the autoawq decode rows of split=fit (RTX 4090 only: another card's rate is assumed equal).
AUTOAWQ_FT_BLOCK_BYTES_PER_S: float = 19e9
AUTOAWQ_DEFAULT_VERSION: Final = "gemm"  # from_quantized(version="GEMM"); quant_config "version"
# The first forward after loading pays once for what later ones reuse (CUDA's lazy loading of each
# kernel module on first launch, the caching allocator's first cudaMalloc of each block size):
# AutoAWQ's benchmark.py times its prefill as that first forward, after a torch.mm warm-up only. A
# validation row says so with `measure: cold=true`; estimates are of the warm engine. Fitted on the
# autoawq prefill rows of split=fit (planner/stack_fits.py).
FIRST_FORWARD_S: dict[str, float] = {"autoawq": 0.05}

# Host time on a request's way to its first token that no engine step holds: the HTTP server and
# tokenizer, the hops between the server, scheduler and detokenizer processes, the stream back to
# the client. SGLang's is fitted on its split=fit time-to-first-token rows (planner/stack_fits.py):
# DataCrunch's H200 runs of a 70B on four GPUs and a 405B on eight come out a near-constant 21-35 ms
# low at 1-8 requests/s, the same on both models (one to two decode steps of the 70B, half a step of
# the 405B), so a fixed host cost, not steps. The one published floor found is smaller: SGLang with
# a CPU mock forward of 2.6 ms, 128-token prompts, one in flight, a median first token of 9.5 ms
# (tenstorrent/tt-inference-server#3560, 2026-05); the rest of the fitted time is not placed.
# A request's engine work is unchanged (throughput does not move); other engines: none charged.
REQUEST_HOST_S: dict[str, float] = {"sglang": 0.037}


# AutoAWQ's kernels by version: (share of the weight-streaming bandwidth, share of the fp16 GEMM
# efficiency in tensor-core tiles, most rows run as a matrix-vector product). WQLinear_GEMV runs
# gemv_forward_cuda up to 8 rows and gemmv2_forward_cuda above (awq/modules/linear.py: "if
# inputs.shape[0] > 8"); WQLinear_GEMM runs gemm_forward_cuda for every row count. The GEMV share
# is the weight-only GEMV share every engine gets (perf/ops.py WEIGHT_ONLY_GEMV_BW_SHARE); the
# others are fitted on the autoawq rows of split=fit only (planner/validation_stacks.fit_constant,
# tests/test_validation_stacks_fit.py).
AUTOAWQ_KERNELS: dict[str, tuple[float, float, float]] = {
    "gemm": (0.80, 0.56, 0.0),
    "gemv": (0.85, 0.09, 8.0),
}


def autoawq_kernel(w: Workload) -> tuple[float, float, float] | None:
    """(bandwidth share, tensor-core share, GEMV rows) of AutoAWQ's quantised linear kernels; None
    for any other engine."""
    if w.engine != "autoawq" or w.task != "inference":
        return None
    return AUTOAWQ_KERNELS[w.awq_version or AUTOAWQ_DEFAULT_VERSION]


def autoawq_cache_tokens(w: Workload, model: ModelSpec) -> int:
    """Tokens of AutoAWQ's fused cache per sequence: num_ctx (from_quantized's max_seq_len) as set,
    else its current default, 2048 (AUTOAWQ_DEFAULT_CACHE_TOKENS). `model` is kept for the callers."""
    del model
    return w.num_ctx if w.num_ctx is not None else AUTOAWQ_DEFAULT_CACHE_TOKENS


def ollama_num_ctx(w: Workload, model: ModelSpec, gpu: GPU | None) -> int:
    """The context Ollama allocates per request: num_ctx as set, else its default by the memory of
    all the workload's GPUs together (OLLAMA_CTX_BY_VRAM); at most the model's trained context
    (ollama llm/server.go clamps opts.NumCtx to the GGUF's context_length, warning "requested
    context size too large for model", and asks the runner for KvSize = NumCtx x parallel)."""
    if w.num_ctx is not None:
        ctx = w.num_ctx
    elif gpu is None:
        ctx = OLLAMA_CTX_BY_VRAM[0][1]
    else:
        # what the driver reports (ECC on takes 1/16 of GDDR), summed over the cards
        vram = gpu.visible_memory_bytes(w.ecc) * w.num_gpus
        ctx = next((n for limit, n in OLLAMA_CTX_BY_VRAM if vram < limit), OLLAMA_CTX_LARGE)
    return min(ctx, model.max_position_embeddings) if model.max_position_embeddings else ctx


def kv_tokens_per_sequence(w: Workload, model: ModelSpec, gpu: GPU | None) -> tuple[int, int]:
    """(tokens cached after the prefill, tokens cached at the end) per sequence, as the engine
    allocates them: Ollama its whole num_ctx up front, transformers' static cache the whole
    input + output up front (StaticCache, max_cache_len = the generation's max_length), AutoAWQ its
    fused cache's window up front, the others what the sequence has produced."""
    n_in, n_out = w.input_len, w.output_len
    if w.engine == "ollama":
        ctx = ollama_num_ctx(w, model, gpu)
        return ctx, ctx
    if w.engine == "transformers" and w.cache_implementation == "static":
        return n_in + n_out, n_in + n_out
    if w.engine == "autoawq":
        ctx = autoawq_cache_tokens(w, model)
        return ctx, ctx
    return n_in, n_in + n_out


@dataclass(frozen=True)
class Offload:
    """llama.cpp's -ngl split as current builds make it (src/llama-model.cpp load_tensors:
    i_gpu_start = max(n_layer_all + 1 - n_gpu_layers, 0), act_gpu_layers = min(n_gpu_layers,
    n_layer_all + 1), the output layer placed as layer n_layer_all, so -ngl counts it and it goes to
    the GPU first; the input layer always on the CPU: "there is very little benefit to offloading
    the input layer"). With -ngl N >= 1: the output layer and N - 1 repeating layers, with their KV
    cache, on the GPU; the other layers and the token embeddings in host memory. Ollama's num_gpu
    counts the same way (its 33/33 layers for Llama 3.1 8B's 32 and the output).
    Older builds offloaded the output layer last: ggml-org/llama.cpp@00342301d01add50835550e8a916f12097d94517
    has i_gpu_start = max(n_layer - n_gpu_layers, 0), so -ngl N put the last N repeating layers on the
    GPU and the output layer only when N > n_layer; on such a build -ngl N here reads as -ngl N + 1."""

    gpu_layers: int  # N as given: counts the output layer
    layers: int  # the model's repeating layers

    @property
    def head_on_gpu(self) -> bool:
        return self.gpu_layers >= 1

    @property
    def gpu_blocks(self) -> int:
        return max(self.gpu_layers - 1, 0)

    @property
    def gpu_share(self) -> float:
        """The repeating layers' share on the GPU."""
        return self.gpu_blocks / self.layers

    @property
    def cpu_layers(self) -> int:
        return self.layers - self.gpu_blocks


def offload_of(model: ModelSpec, w: Workload, gpu: GPU | None = None) -> Offload | None:
    """The partial offload of a llama.cpp / Ollama workload; None when everything is on the GPU
    (gpu_layers above the model's layers, like -ngl 99, or unset: llama.cpp's every layer, and
    Ollama's own split on `gpu`, which is every layer when they fit)."""
    if w.task != "inference" or w.engine not in LAYER_SPLIT_ENGINES or model.kind != "decoder":
        return None
    n = w.gpu_layers
    if n is None and w.engine == "ollama" and gpu is not None:
        n = ollama_gpu_layers(model, w, gpu)
    layers = model.num_layers
    if n is None or layers <= 0 or n > layers:
        return None
    return Offload(n, layers)


def split_weight_bytes(model: ModelSpec, w: Workload) -> tuple[float, float, float]:
    """(repeating layers, output layer as the GPU holds it, untied output weights) in bytes, in the
    format the workload loads: a tied output reuses the embeddings, which llama.cpp duplicates onto
    the output layer's device (TENSOR_DUPLICATED), so the GPU holds vocab x hidden either way."""
    # memory.base imports this module: imported here, when called
    from gpuplan.estimators.memory.base import inference_weights, is_quantised, weight_bytes

    iw = inference_weights(model, w)
    other = 4.0 if iw.fmt == "fp32" else 2.0
    block = weight_bytes([g for g in model.groups if is_block(g)], iw.fmt, other, iw.kept)
    heads = [g for g in model.groups if g.role == "head" and g.linear is not None]
    per = storage_format(iw.fmt).bytes_per_value
    output = sum(g.linear[0] * g.linear[1] * (per if is_quantised(g, iw.fmt) else other) for g in heads if g.linear)
    untied = weight_bytes(heads, iw.fmt, other, iw.kept)
    return block, output, untied


def ollama_gpu_layers(model: ModelSpec, w: Workload, gpu: GPU) -> int:
    """Ollama's split when num_gpu is unset: the output layer, then as many layers, each with its
    share of the num_ctx KV cache, as fit on `gpu` beside the CUDA context, the prefill's working
    set, the logits and the allocator's slack, as gpuplan's memory estimate counts them (Ollama
    runs the rest on the CPU: `ollama ps` shows the split, docs/context-length.mdx)."""
    from gpuplan.estimators.activations import prefill_working_bytes_per_token, stack_shapes
    from gpuplan.estimators.memory.base import act_bytes

    block, output, _ = split_weight_bytes(model, w)
    kv_b = storage_format(w.effective_kv_dtype).bytes_per_value
    b = w.batch_size
    kv = b * model.kv_cache_bytes(ollama_num_ctx(w, model, gpu), kv_b, input_len=w.input_len)
    c = act_bytes(w.precision)
    work = max(prefill_working_bytes_per_token(s, c, 1) for s in stack_shapes(model)) * b * max(w.input_len, 1)
    logits = b * model.vocab_size * (c + 4.0)
    fixed = runtime.CUDA_CONTEXT_BYTES + runtime.cublas_workspace_bytes(gpu.cc)
    # the layers spread evenly over the pp cards (-sm layer), as the memory estimate counts them;
    # each card has its context and working set, and the one with the output layer and the logits,
    # the fullest, sets how many fit on each
    room = (runtime.usable_memory_bytes(gpu, w.ecc) - fixed) / (1 + runtime.ALLOCATOR_SLACK_FRACTION)
    room = (room - work - logits - output) * w.pp
    if room < 0:
        return 0
    per_layer = (block + kv) / model.num_layers
    return min(model.num_layers + 1, 1 + int(room // per_layer))


# Contexts tried, largest first, when Ollama's default pushes layers onto the CPU (powers of two, as
# its own tiers and the num_ctx values its docs show)
OLLAMA_CTX_STEPS: Final = (131_072, 65_536, 32_768, 16_384, 8192, 4096, 2048)


def ollama_context_that_fits(model: ModelSpec, w: Workload, gpu: GPU) -> int | None:
    """Where Ollama's default context (num_ctx and num_gpu unset) leaves layers on the CPU: the largest
    num_ctx of OLLAMA_CTX_STEPS below it that still holds the request (prompt + output), with which
    the same split (ollama_gpu_layers) puts every layer on the GPU and the memory estimate, all of
    it counted, fits; None where there is none."""
    from gpuplan.estimators.memory import estimate_memory  # it imports this module: imported here

    if w.engine != "ollama" or w.num_ctx is not None or w.gpu_layers is not None or model.kind != "decoder":
        return None
    if offload_of(model, w, gpu) is None:
        return None
    default = ollama_num_ctx(w, model, gpu)
    need = w.input_len + w.output_len
    for ctx in OLLAMA_CTX_STEPS:
        if need <= ctx < default:
            smaller = w.with_(num_ctx=ctx)
            if offload_of(model, smaller, gpu) is None and estimate_memory(model, smaller, gpu).fits:
                return ctx
    return None


def is_block(g: ParamGroup) -> bool:
    """A tensor of the repeated layers (what -ngl moves), not the embeddings or the output layer."""
    return g.role not in ("embedding", "position", "head")


def host_link_note(off: Offload, auto: bool = False) -> str:
    why = "Ollama's own split: as many as fit" if auto else f"gpu_layers {off.gpu_layers}"
    where = "the output layer and " if off.head_on_gpu else ""
    host = "the embeddings" + ("" if off.head_on_gpu else " and the output layer")
    return (
        f"{where}{off.gpu_blocks} of {off.layers} layers on the GPU ({why}); {off.cpu_layers} layers and "
        f"{host} in host memory"
    )


# SGLang's --mem-fraction-static default (weights + KV pool; activations and CUDA graphs take the
# rest) by tensor-parallel size, largest first: 0.79 at tp >= 16, 0.81 at >= 8, 0.85 at >= 4, 0.87
# at >= 2, 0.88 at 1 (sgl-project/sglang python/sglang/srt/server_args.py ServerArgs.__post_init__,
# v0.4.x; v0.3 had 0.83 at tp >= 8). vLLM's gpu_memory_utilization default 0.9 is the workload's own.
SGLANG_MEM_FRACTION_STATIC: Final = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))


def serving_memory_fraction(w: Workload) -> float:
    """The share of the card a preallocating engine sizes its weights and KV pool in: the workload's
    gpu_memory_utilization where set; else vLLM's 0.9 and SGLang's mem_fraction_static by TP size."""
    if w.engine != "sglang" or "gpu_memory_utilization" in w.model_fields_set:
        return w.gpu_memory_utilization
    return next(f for tp, f in SGLANG_MEM_FRACTION_STATIC if w.tp >= tp)


# --- prefix cache (the workload's cached_prefix_tokens) ---------------------------------------
# Tokens a cache hit is counted in, for the engines whose prefix cache is on by default:
# - vLLM: automatic prefix caching, on by default in its V1 engine (CacheConfig.enable_prefix_caching),
#   hashes full 16-token blocks (runtime.VLLM_BLOCK_TOKENS); a request reuses the full blocks of its
#   prompt already cached, up to num_tokens - 1 so the last token is always computed
#   (vllm/v1/core/kv_cache_manager.py get_computed_blocks: "When all tokens hit the cache, we must
#   recompute the last token to obtain logits", max_cache_hit_length = request.num_tokens - 1; the
#   finder takes max_cache_hit_length // block_size whole blocks).
# - SGLang: the radix cache, on unless --disable-radix-cache, matches token by token (page_size 1
#   by default) and also leaves the last prompt token to compute (managers/schedule_batch.py Req:
#   max_prefix_len = input_len - 1, "to enable logprob computation").
# - TGI v3: prefix caching on by default (launcher/src/main.rs resolve_attention: prefix_caching
#   unset reads "true", with the flashinfer attention it then defaults to; off on paged attention or a
#   model flashinfer does not run), token by token (server/text_generation_server/models/globals.py:
#   BLOCK_SIZE 1 under flashinfer).
# - TensorRT-LLM: KV cache block reuse, on by default in the LLM API (KvCacheConfig.enable_block_reuse
#   = True, tokens_per_block = 32; the older executor API defaulted it off), whole blocks.
# - llama.cpp server: cache_prompt true by default (tools/server/README.md: "Re-use KV cache from a
#   previous request if possible ... Default: true"): a slot keeps its last prompt's KV and reuses the
#   common prefix token by token, always evaluating at least one token (server.cpp: "must eval >= 1
#   token"), but only within that slot: no block is shared between sequences.
# transformers' generate keeps no cache across calls; Ollama, MLC and AutoAWQ: not modelled (refused).
PREFIX_CACHE_BLOCK_TOKENS: Final[dict[str, int]] = {
    "vllm": runtime.VLLM_BLOCK_TOKENS,
    "sglang": 1,
    "tgi": 1,
    "tensorrt-llm": 32,
    "llama.cpp": 1,
}
# engines whose cached blocks are shared by every sequence that holds the prefix, stored once in the
# pool (vLLM's BlockPool hands the same block to each request whose block hash matches, ref-counted)
PREFIX_SHARING_ENGINES: Final = frozenset({"vllm", "sglang", "tgi", "tensorrt-llm"})


def prefix_reused_tokens(w: Workload) -> int:
    """Prompt tokens of each request the engine takes from its prefix cache instead of computing:
    the cached prefix in whole cache blocks, leaving at least the prompt's last token to compute
    (PREFIX_CACHE_BLOCK_TOKENS). 0 without a cached prefix."""
    block = PREFIX_CACHE_BLOCK_TOKENS.get(w.engine)
    if not w.cached_prefix_tokens or block is None or w.input_len < 2:
        return 0
    hit = min(w.cached_prefix_tokens, w.input_len - 1)
    return hit // block * block


def prefix_shared_tokens(w: Workload) -> int:
    """Tokens of each sequence's KV cache held once for all sequences (the reused prefix's blocks),
    where the engine shares them across sequences; 0 for llama.cpp's per-slot cache."""
    return prefix_reused_tokens(w) if w.engine in PREFIX_SHARING_ENGINES else 0
