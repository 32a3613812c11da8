"""The prose converter's speed part: the model a speed row spells out, the layout, batch and engine
words speed rows use on top of the generic reading (planner/validation_prose.py), and the words
that say how the row's figure is compared (the `measure` column).

Models a row names by architecture rather than by a preset (MPT-70b with d_model, n_layers, ...;
GPT-J-6B with its layers and width) are built from those numbers as a config.json would give them.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.planner.named_models import gpt3_config, llama1_config, named_model, nemotron_config
from gpuplan.specs.model import ModelSpec, model_from_config
from gpuplan.specs.workload import TRAINING_TASKS

# Tables whose throughput is per GPU though a header said "out tok/s": TensorRT-LLM's v0.6.1
# performance doc (commit 138f96d) headed its L40S and A100 tables "out tok/s"; the next revision of
# the same data (commit 77d24b5) heads all three tables "out tok/s/GPU"
PER_GPU_SOURCES: Final = ("NVIDIA/TensorRT-LLM:docs/source/performance.md@138f96d",)
# vLLM captures decode in CUDA graphs since PR #1926 ("Optimize model execution with CUDA graph",
# vllm-project/vllm, reviewed and merged 2023-12-17); a row naming an older vLLM commit ran eager
VLLM_GRAPHS_SINCE: Final = dt.date(2023, 12, 17)


def _num(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text, re.IGNORECASE)
    return int(m.group(1).replace(",", "")) if m else None


def model_from_prose(text: str, seq_hint: int) -> ModelSpec:
    """A preset by name, or a model built from the shape a row spells out."""
    base = text.split("(", 1)[0].strip()
    named = named_model(base)
    if named is not None:
        return named
    layers = _num(r"n_layers=(\d+)", text) or _num(r"(\d+) layers", text)
    d = _num(r"d_model=(\d+)", text) or _num(r"(\d+) (?:dim|hidden)\b", text) or _num(r"\bdim (\d+)", text)
    heads = _num(r"n_heads=(\d+)", text) or _num(r"(\d+) heads", text)
    if heads is None and d:
        hd = _num(r"head dim (\d+)", text)
        heads = d // hd if hd else None
    vocab = _num(r"vocab(?:_size)?[= ](\d+)", text)
    if not (layers and d and heads):
        raise InvalidSettingError(f"model {base!r} is not a bundled preset and the row gives no full shape")
    low = base.lower()
    pos = max(seq_hint, 2048)
    if low.startswith("mpt"):
        ratio = _num(r"expansion=(\d+)", text) or 4
        cfg: dict[str, Any] = {
            "model_type": "mpt",
            "d_model": d,
            "n_layers": layers,
            "n_heads": heads,
            "vocab_size": vocab or 50368,
            "expansion_ratio": ratio,
            "max_seq_len": pos,
            "no_bias": True,
        }
    elif low.startswith(("gpt3", "gpt-3")):
        # GPT-3 shapes (Brown et al. 2020, table 2.1) with the GPT-2 tokenizer, padded to 50304
        cfg = gpt3_config(layers, d, heads, vocab=vocab or 50304, positions=pos)
    elif low.startswith("gpt-j"):
        # GPT-J: parallel attention + MLP with rotary; the GPT-NeoX layout has the same matmuls
        cfg = {
            "model_type": "gpt_neox",
            "hidden_size": d,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "vocab_size": vocab or 50400,
            "intermediate_size": 4 * d,
            "max_position_embeddings": pos,
            "attention_bias": False,
        }
    elif low.startswith("llama"):
        # LLaMA-1 FFN: 2/3 of 4d rounded up to a multiple of 256 (facebookresearch/llama model.py)
        ff = _num(r"ffn (\d+)", text) or 256 * math.ceil(8 * d / 3 / 256)
        kv = _num(r"(\d+) KV heads", text)
        cfg = llama1_config(layers, d, heads, ff, kv=kv, vocab=vocab or 32000, positions=pos)
    elif low.startswith("bloom"):
        # BLOOM (BigScience 2022): GPT-3 style with ALiBi, embedding LayerNorm, tied embeddings
        cfg = {"model_type": "bloom", "hidden_size": d, "n_layer": layers, "n_head": heads}
        cfg["vocab_size"] = vocab or 250880
    elif low.startswith("grok") and (experts := _num(r"(\d+) experts", text)):
        # Grok-1 (xai-org/grok-1 model.py): GQA attention and top-k SwiGLU experts, the Mixtral layout
        cfg = {
            "model_type": "mixtral",
            "hidden_size": d,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": _num(r"(\d+) KV heads", text) or heads,
            "intermediate_size": _num(r"ffn (\d+)", text) or 4 * d,
            "num_local_experts": experts,
            "num_experts_per_tok": _num(r"top-(\d+)", text) or 2,
            "vocab_size": vocab or 131072,
            "max_position_embeddings": pos,
            "tie_word_embeddings": True,
        }
    elif low.startswith("nemotron"):
        ff = _num(r"ffn (\d+)", text) or 4 * d
        kv = _num(r"(\d+) KV heads", text)
        cfg = nemotron_config(layers, d, heads, ff, kv=kv, vocab=vocab or 256000, positions=pos)
    else:
        raise InvalidSettingError(f"model {base!r} is not a bundled preset and its family is not one gpuplan builds")
    return model_from_config(cfg, base)


def _engine(text: str) -> str | None:
    for pattern, engine in (
        (r"TRT-?LLM|TensorRT-LLM|trtllm", "tensorrt-llm"),
        (r"\bMLC\b", "mlc"),
        (r"\bollama\b", "ollama"),  # before llama.cpp, which Ollama's rows may name as its backend
        (r"llama\.cpp", "llama.cpp"),
        (r"\bvLLM\b", "vllm"),
        (r"SGLang", "sglang"),
        (r"\bTGI\b|text-generation-inference", "tgi"),
        (r"transformers|generate\(\)|HF |litgpt|eager PyTorch", "transformers"),
    ):
        if re.search(pattern, text, re.IGNORECASE):
            return engine
    return None


def _vllm_before_graphs(text: str) -> bool:
    """A row's vLLM build predates CUDA graphs: "vLLM <commit> MM/DD/YYYY" earlier than the runner."""
    m = re.search(r"vLLM\s+[0-9a-f]{6,40}\s+(\d{1,2})/(\d{1,2})/(\d{4})", text)
    if not m:
        return False
    month, day, year = (int(x) for x in m.groups())
    try:
        return dt.date(year, month, day) < VLLM_GRAPHS_SINCE
    except ValueError:
        return False


def speed_workload(row_fields: dict[str, str], base: dict[str, Any], model: ModelSpec) -> dict[str, Any]:
    """Layout, batch and engine words of speed rows on top of the generic reading."""
    w = dict(base)
    extra = row_fields.get("extra_config", "")
    prose = " ".join(row_fields.get(k, "") for k in ("task", "extra_config", "precision", "notes", "seq_len", "batch"))
    _layout_keys(w, row_fields, extra)
    _batch_keys(w, row_fields, extra)
    if w.get("task") == "inference":
        _serving_keys(w, row_fields, prose, model)
    else:
        w.pop("engine", None)
        fused = r"fused (MLP|dense|LayerNorm)|Transformer Engine|(?<!no )torch\.compile|compile on"
        if w.get("compile") is not False and re.search(fused, prose, re.IGNORECASE):
            w["compile"] = True  # fused elementwise kernels (a row that says it ran uncompiled stays eager)
    if model.kind == "cnn" and _nchw(" ".join(row_fields.values())):
        w["channels_last"] = False
    if w.get("precision") == "fp8" and w.get("task") != "inference":
        w["master_weights"] = "fp32"
    return w


def _layout_keys(w: dict[str, Any], row_fields: dict[str, str], extra: str) -> None:
    """TP/PP/CP/VP/EP/ETP, sequence parallelism, checkpointing and ZeRO as extra_config gives them,
    and NeMo's recipe defaults."""
    for key, name in (("tp", "TP"), ("pp", "PP"), ("cp", "CP"), ("vp", "VP"), ("ep", "EP"), ("etp", "ETP")):
        v = _num(rf"\b{name}\s*=\s*(\d+)", extra)
        if v:
            w[key] = v
    if re.search(r"sequence[_ ]parallel\s*=\s*(yes|true|on)", extra, re.IGNORECASE):
        w["sequence_parallel"] = True
    ckpt = re.search(r"act_ckpt\s*=\s*(full|selective|none)", extra, re.IGNORECASE)
    if ckpt:
        w["activation_checkpointing"] = ckpt.group(1).lower()
        if re.search(r"(op-based|per-op) selective", extra, re.IGNORECASE):
            # torchtitan's op-level policy (selective_ac_option "op"), not Megatron's attention-only one
            w["activation_checkpointing"] = "selective-op"
    zero = _num(r"\bzero\s*=\s*(\d)", extra)
    if zero is not None:
        w["zero"] = zero
    elif w.get("zero") == 3 and "fsdp" not in extra.lower():
        w.pop("zero")  # "FSDP" named only in the notes ("DDP (FSDP=0)"): no sharding
    source = row_fields.get("source", "") + row_fields.get("source_ref", "")
    if re.search(r"NeMo|Megatron-Bridge|dgxc", source):
        # NeMo / Megatron-Bridge performance recipes: Megatron's distributed optimizer (ZeRO-1);
        # with TP, sequence parallelism and Transformer Engine's TP communication overlap on
        # (NeMo's llm recipes: sequence_parallel=True, tp_comm_overlap=True on H100/B200)
        if "zero" not in w and "fsdp" not in extra.lower():
            w["zero"] = 1
        if int(w.get("tp", 1)) > 1 and not re.search(r"sequence_parallel\s*=\s*no", extra, re.IGNORECASE):
            w["sequence_parallel"] = True
            w["tp_comm_overlap"] = True
        # their attention is Transformer Engine's DotProductAttention, cuDNN fused attention on Hopper
        w.setdefault("attention_impl", "fa3")


def _batch_keys(w: dict[str, Any], row_fields: dict[str, str], extra: str) -> None:
    """The per-GPU micro-batch and the gradient accumulation a global batch implies."""
    mb = _num(r"micro_batch\s*=\s*(\d+)", extra)
    if w.get("task") != "inference" and not mb and row_fields.get("batch", "").lower().startswith(("global", "16m")):
        raise InvalidSettingError("the per-GPU micro-batch is not published (only the global batch)")
    if mb:
        w["batch_size"] = mb
    gb = _num(r"global_batch\s*=\s*(\d+)", extra)
    if gb and mb and "grad_accum" not in w:
        n = int(w.get("num_gpus", 1))
        dp = max(n // (int(w.get("tp", 1)) * int(w.get("pp", 1)) * int(w.get("cp", 1))), 1)
        w["grad_accum"] = max(gb // (dp * mb), 1)


def _serving_keys(w: dict[str, Any], row_fields: dict[str, str], prose: str, model: ModelSpec) -> None:
    """Output length, weight and KV formats, the engine, and the layout of several serving GPUs."""
    out = (
        _num(r"\bout(?:put)?(?:_len)?\s*[=:]\s*(\d+)", prose)
        or _num(r"input \d+; output (\d+)", prose)
        or _num(r"(\d+) (?:generated|output) tokens", prose)
        or _num(r"(\d+) output\b", prose)
    )
    w["output_len"] = out if out is not None else 1
    if re.search(r"1 output token|first-token", prose, re.IGNORECASE):
        w["output_len"] = 1
    if re.search(r"fp8 kv", prose, re.IGNORECASE) or (
        w.get("weight_dtype") == "fp8" and re.search(r"weights\s*(?:\+|and)\s*KV", prose, re.IGNORECASE)
    ):
        w["kv_dtype"] = "fp8"  # "FP8 (weights+KV)": an fp8 row quantises its KV cache too
    prec = row_fields.get("precision", "").lower()
    for fmt in ("q4_0", "q4_k_m", "q8_0"):
        if fmt in prec.replace(" ", "_"):
            w["weight_dtype"] = fmt
    if "q4f16" in prec:
        w["weight_dtype"] = "int4"
    if "fp16" in prec and "weight_dtype" not in w:
        w["precision"] = "fp16"
    # the framework the row names wins over the publisher's name (MLC's tables include llama.cpp and vLLM runs)
    engine = _engine(row_fields.get("extra_config", "")) or _engine(row_fields.get("source", ""))
    if engine:
        w["engine"] = engine
    if engine == "vllm" and _vllm_before_graphs(" ".join(row_fields.values())):
        w["enforce_eager"] = True
    n = int(w.get("num_gpus", 1))
    if n > 1 and "tp" not in w and "pp" not in w:
        # several GPUs serving one model: split by tensor parallelism where the heads allow
        # (what the rows' "tensor parallel across GPUs" and the engines' defaults do), else layers
        # llama.cpp splits by layers unless told otherwise (--split-mode layer, its default)
        layer_split = w.get("engine") == "llama.cpp" or re.search(r"pipeline", prose, re.IGNORECASE)
        if model.tp_splits_heads(n) and not layer_split:
            w["tp"] = n
        else:
            w["pp"] = n


def _nchw(text: str) -> bool:
    """A CNN row that ran with NCHW activations: it says so, or it gives DeepLearningExamples'
    ConvNets command line (main.py) without `--memory-format nhwc`, whose default is nchw
    (PyTorch/Classification/ConvNets/main.py); its configs.yml sets nhwc for AMP, rows say NHWC."""
    if re.search(r"\bNHWC\b|channels[_ -]last", text, re.IGNORECASE):
        return False
    return bool(re.search(r"\bNCHW\b|channels[_ -]first", text, re.IGNORECASE) or re.search(r"\bmain\.py\s+--", text))


def _prompt_rate(row_fields: dict[str, str]) -> bool:
    """A prompt-processing rate (llama-bench pp512): prefill tokens per second."""
    text = " ".join((row_fields.get("task", ""), row_fields.get("notes", ""))).lower()
    return "throughput" in row_fields["metric"].lower() and bool(re.search(r"prompt processing|\bpp\d+", text))


def speed_measure(row_fields: dict[str, str], wl: dict[str, Any]) -> dict[str, Any]:
    """How a speed row's figure is compared (the measure column), where it matters: a prompt rate
    also names an inference row's kind of figure, the others only what its timing predicts."""
    out: dict[str, Any] = {}
    training = wl.get("task") in TRAINING_TASKS
    if _prompt_rate(row_fields) and (row_fields.get("category") != "train_throughput" or not training):
        out["prompt_rate"] = True
    if training:
        # Megatron-LM's count (Narayanan et al. 2021, eq. 3), the recompute pass included, where the
        # row says so (Megatron-DeepSpeed's logger, BigScience's "4*2 co-efficient")
        if re.search(r"96\s*\*\s*B\s*\*\s*s|4\s*\*\s*2 co-?efficient", row_fields.get("notes", "")):
            out["flops"] = "megatron"
        return out
    if row_fields.get("batch", "").lower().startswith("max"):
        out["max_batch"] = True
    if row_fields.get("source_ref", "").startswith(PER_GPU_SOURCES):
        out["per_gpu"] = True
    return out
