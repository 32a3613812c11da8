"""The prose converter: a measurement row that describes its setup in words (the columns of
`published.csv` without the explicit ones) read into a Reading, as the explicit columns would give
it (planner/validation_columns.py). It filled the bundled files' explicit columns once, and it reads
a user's file that has none.

A row is read by keywords (a model name the presets know, "LoRA", "rank 8", "activation
checkpointing", "ZeRO-3 CPU offload", ...); `key=value` pairs naming workload keys in
`extra_config` are taken literally and win. Speed rows add their layout and engine words
(planner/validation_prose_speed.py).
"""

from __future__ import annotations

import re
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.planner.named_models import named_model
from gpuplan.planner.validation_columns import EXPLICIT_COLUMNS, Reading, Row, is_fit_verdict
from gpuplan.planner.validation_prose_speed import model_from_prose, speed_measure, speed_workload
from gpuplan.specs.gpu import GPU, Catalog
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.models import find_preset, load_model
from gpuplan.specs.precision import STORAGE_FORMATS
from gpuplan.specs.workload import Workload


def prose_reading(row: Row, compared: str, catalog: Catalog) -> Reading:
    """A row's reading from its prose, for the comparison it gets ("memory" or a speed category).
    Raises (GpuplanError, ValueError, KeyError) where the row cannot be expressed."""
    row = Row({k: v for k, v in row.fields.items() if k not in EXPLICIT_COLUMNS})  # the prose alone
    if compared == "memory":
        model = resolve_model(row["model"])
        gpu = resolve_gpu(row["gpu"], catalog)
        wl = row_workload(row, model)
        measure: dict[str, Any] = {} if is_fit_verdict(row) else {"measured_as": measured_as(row)}
    else:
        model = model_from_prose(row["model"], first_int(row["seq_len"]) or 2048)
        gpu = resolve_gpu(row["gpu"], catalog)
        fields = {**row.fields, "category": compared}
        wl = speed_workload(fields, row_workload(row, model), model)
        measure = speed_measure(fields, wl)
    wl["gpu"] = gpu.name
    return Reading(wl, model_config(model), measure)


def model_config(model: ModelSpec) -> dict[str, Any]:
    """{} for a bundled preset (its name says it all), else the config the model was built from."""
    preset = find_preset(model.name)
    if preset is not None and preset.name == model.name and load_model(preset.name) == model:
        return {}
    return dict(model.config)


def first_int(text: str) -> int | None:
    m = re.search(r"(\d[\d,]*)", text)
    return int(m.group(1).replace(",", "")) if m else None


def resolve_model(text: str) -> ModelSpec:
    base = re.sub(r"\(.*?\)", "", text).strip()
    named = named_model(base)
    if named is not None:
        return named
    tried = [re.sub(r"\s+", "-", base), base.split()[0] if base.split() else base, text.strip()]
    for cand in tried:
        if cand and find_preset(cand) is not None:
            return load_model(cand)
    raise InvalidSettingError(f"model {base!r} is not a bundled preset (pass its config.json in a file of your own)")


def resolve_gpu(text: str, catalog: Catalog) -> GPU:
    raw = re.sub(r"^\d+\s*[x×]\s*", "", text.strip())  # "8x A100 80GB": the count is num_gpus
    if re.search(r"\bPCIe\b", raw, re.IGNORECASE) and not re.search(r"pcie", raw.split("(")[0], re.IGNORECASE):
        # "A100 (80GB; PCIe interconnect)": the PCIe card, not the SXM module the bare name means
        mem_ = re.search(r"(\d+)\s*GB", raw, re.IGNORECASE)
        stem_ = raw.split("(")[0].strip()
        for cand in ([f"{stem_} PCIe {mem_.group(1)}GB"] if mem_ else []) + [f"{stem_} PCIe"]:
            g = catalog.find(cand)
            if g is not None:
                return g
    mem = re.search(r"(\d+)\s*GB", raw, re.IGNORECASE)
    base = re.sub(r"\(.*?\)", "", raw).strip()
    cands = [raw, base]
    if mem:
        stem = re.sub(r"[-\s]*\d+\s*GB", "", base, flags=re.IGNORECASE).strip()
        cands += [f"{stem} {mem.group(1)}GB", f"{stem}-{mem.group(1)}GB"]
        cands += [stem]
    words = base.split()
    cands += [" ".join(words[:2]), words[0]] if words else []
    for c in cands:
        g = catalog.find(c) if c else None
        if g is not None:
            return g
    raise InvalidSettingError(f"GPU {raw!r} is not in the catalog")


def measured_as(row: Row) -> str:
    """What a memory figure measured: the whole device (nvidia-smi), torch's reserved or allocated peak."""
    text = " ".join((row["metric"], row["notes"], row["source"], row["extra_config"])).lower()
    if re.search(r"nvidia-smi|nvml|gpu memory occupied|device used|whole-gpu", text):
        return "device"
    if "reserved" in text:
        return "reserved"
    return "allocated"


# --- the workload keys ------------------------------------------------------------------------

_KV = re.compile(r"\b([a-z_]+)\s*=\s*([A-Za-z0-9_.+\-]+)")


def _has(text: str, *words: str) -> bool:
    return any(re.search(w, text, re.IGNORECASE) for w in words)


def row_workload(row: Row, model: ModelSpec) -> dict[str, Any]:
    """The workload keys a row describes (before validation), in the order they are read."""
    prose = " ".join((row["task"], row["extra_config"], row["precision"], row["notes"]))
    prose = re.sub(r"\w*offload\w*\s*=\s*(?:no|false|none)\b", "", prose, flags=re.IGNORECASE)  # "offload=no"
    w: dict[str, Any] = {"model": model.name, "task": _task(row["task"])}
    _precision_keys(w, row["precision"].lower(), prose)
    _size_keys(w, row, prose)
    _training_keys(w, prose)
    _runtime_keys(w, row, prose)
    _explicit_keys(w, row["extra_config"])
    if w["task"] == "qlora" and "torchtune" in row["source_ref"]:
        w["qlora_kernel"] = "torchao"  # torchtune's QLoRA runs torchao's NF4 linear (data/frameworks.toml)
    if w["task"] in ("lora", "qlora") and "litgpt" in row["source_ref"].lower() and _has(row["task"], r"fine-?tune"):
        # LitGPT's finetune scripts: its own lm_head beside a tied embedding, Lightning's bitsandbytes
        # plugin for --quantize (estimators/memory/training.py litgpt_own_head, lightning_bnb)
        w["framework"] = "litgpt"
    group = re.search(r"group\s*[-_ ]?size\s*[=:]?\s*(\d+)", " ".join((row["precision"].lower(), prose)), re.IGNORECASE)
    if w.get("weight_dtype") == "int4" and group and f"int4-g{group.group(1)}" in STORAGE_FORMATS:
        w["weight_dtype"] = f"int4-g{group.group(1)}"  # grouped int4 (torchao, gpt-fast): scales and zeros count
    return w


def _task(task: str) -> str:
    text = task.lower()
    if "qlora" in text or "nf4" in text:
        return "qlora"
    if "lora" in text:
        return "lora"
    if _has(text, r"inference", r"generat", r"serving", r"decode", r"prefill"):
        return "inference"
    if "pretrain" in text:
        return "pretrain"
    if _has(text, r"fine-?tun", r"\bfull\b", r"\btrain"):
        return "finetune"
    raise InvalidSettingError(f"task {task!r} names no training or inference workload")


def _precision_keys(w: dict[str, Any], prec: str, prose: str) -> None:
    found = [(prec.find(p), p) for p in ("fp32", "tf32", "bf16", "fp16", "fp8") if p in prec]
    if found:
        w["precision"] = min(found)[1]  # the first named: "fp8 (Transformer Engine; bf16 master)" is fp8
    if w["task"] != "inference":
        return
    for fmt in ("nf4", "int4", "int8", "fp8", "awq", "gptq", "mxfp4", "nvfp4", "fp4"):
        if re.search(rf"\b{fmt}\b", prec):
            # a bare "FP4" is NVFP4 (TensorRT-LLM / ModelOpt, vLLM, SGLang) unless bitsandbytes ran it
            bnb = _has(prose, r"bitsandbytes", r"\bbnb\b", r"load_in_4bit")
            w["weight_dtype"] = "nvfp4" if fmt == "fp4" and not bnb else fmt
            w["precision"] = "bf16"
            if fmt in ("mxfp4", "nvfp4"):
                break  # "FP4 (NVFP4 ...)": the named block format, not the bare word after it


def _size_keys(w: dict[str, Any], row: Row, prose: str) -> None:
    """num_gpus, the lengths and the batch."""
    w["num_gpus"] = first_int(row["num_gpus"]) or 1
    seq = first_int(row["seq_len"])
    batch = first_int(row["batch"])
    if seq is None:
        raise InvalidSettingError(f"sequence length {row['seq_len']!r} is not a number")
    if w["task"] == "inference":
        w["input_len"] = seq
        out = re.search(r"output[_ ]len\w*\s*[=:]?\s*(\d+)|(\d+)\s*new tokens", prose, re.IGNORECASE)
        w["output_len"] = int(out.group(1) or out.group(2)) if out else 0
    else:
        w["seq_len"] = seq
    w["batch_size"] = batch or 1


def _training_keys(w: dict[str, Any], prose: str) -> None:
    """Adapters, checkpointing, ZeRO and offload, the optimizer."""
    rank = re.search(r"\b(?:rank|r)\s*[=:]?\s*(\d+)\b", prose, re.IGNORECASE)
    if rank and w["task"] in ("lora", "qlora"):
        w["lora_rank"] = int(rank.group(1))
    drop = re.search(r"lora_dropout\s*[=:]?\s*(0?\.\d+)", prose, re.IGNORECASE)
    if drop and w["task"] in ("lora", "qlora"):
        w["lora_dropout"] = float(drop.group(1))
    if _has(prose, r"no (activation|gradient) checkpointing", r"act_ckpt=no", r"\bAC off\b"):
        w["activation_checkpointing"] = "none"
    elif _has(prose, r"op-based selective", r"per-op selective", r"selective_ac_option\s*=\s*\"?op"):
        # torchtitan's op-level policy (selective_ac_option "op"), not Megatron's attention-only one
        w["activation_checkpointing"] = "selective-op"
    elif _has(prose, r"selective"):
        w["activation_checkpointing"] = "selective"
    elif _has(prose, r"(activation|gradient) checkpointing", r"act_ckpt=yes", r"\bAC on\b"):
        w["activation_checkpointing"] = "full"
    zero = re.search(r"zero[- _]?(?:stage[- _]?)?([0-3])", prose, re.IGNORECASE)
    if zero:
        w["zero"] = int(zero.group(1))
    elif _has(prose, r"\bFSDP\b", r"FULL_SHARD"):
        w["zero"] = 3
    offload = _has(prose, r"cpu offload", r"offload_optimizer", r"offload")
    # "activation offload" alone moves no optimizer state
    moved = not _has(prose, r"activation offload") or _has(prose, r"cpu offload", r"offload_optimizer")
    if w.get("zero") and w["num_gpus"] >= 1 and offload and moved:
        both = w["zero"] == 3 and not _has(prose, r"optimizer offload only")
        w["offload"] = "optimizer+params" if both else "optimizer"
    if _has(prose, r"activation offload"):
        w["activation_offloading"] = True
    for patterns, name in _OPTIMIZERS:
        if _has(prose, *patterns):
            w["optimizer"] = "sgd-momentum" if name == "sgd" and _has(prose, r"momentum") else name
            break


# the optimizer words, first match wins
_OPTIMIZERS: Final = (
    ((r"paged\s*adamw\s*8", r"pagedadamw8bit"), "paged-adamw-8bit"),
    ((r"paged\s*adamw", r"pagedadamw"), "paged-adamw"),
    ((r"8-?bit adam", r"adamw?8bit", r"adam8bit"), "adamw-8bit"),
    ((r"adafactor",), "adafactor"),
    ((r"\blion\b",), "lion"),
    ((r"\bsgd\b",), "sgd"),
)


def _runtime_keys(w: dict[str, Any], row: Row, prose: str) -> None:
    """Loss, compile and attention kernels, CUDA-era defaults, the framework's sharding and master weights."""
    framework = " ".join((row["source"], row["source_ref"]))
    if _has(prose, r"chunked"):
        w["loss_impl"] = "chunked"
    elif _has(framework, r"torchtune", r"litgpt") and not _has(prose, r"CrossEntropyLoss"):
        # torchtune's and LitGPT's shipped recipes use chunked cross-entropy (CEWithChunkedOutputLoss,
        # litgpt chunked_cross_entropy) unless a row says otherwise
        w["loss_impl"] = "chunked"
    elif _has(prose, r"fused (linear )?cross", r"liger"):
        w["loss_impl"] = "fused"
    if _has(prose, r"no (torch\.)?compile", r"compile off", r"compile=false"):
        w["compile"] = False
    elif _has(prose, r"compile on", r"torch\.compile", r"compile=true", r"\bcompile\b"):
        w["compile"] = True
    if _has(prose, r"optimizer.in.b(ac)?kw?a?r?d", r"optimizer_in_bwd", r"fuse optimizer step"):
        w["optimizer_in_backward"] = True
    if _has(prose, r"flash") is False and _has(prose, r"eager attention", r"materiali[sz]ed"):
        w["attention_impl"] = "eager"
    elif (
        _has(" ".join((framework, prose)), r"DeepLearningExamples", r"\bDLE\b")
        and _has(" ".join((row["task"], prose)), r"squad")
        and _has(row["model"], r"bert")
    ):
        # DeepLearningExamples' BERT self-attention materialises the scores (matmul, scale, mask,
        # softmax, dropout: PyTorch/LanguageModeling/BERT/modeling.py) and run_squad.py runs it
        # eagerly, where run_pretraining.py scripts the model with NVFuser (torch.jit.script)
        w["attention_impl"] = "eager"
    cuda = re.search(r"CUDA\s*(\d+)\.(\d+)", " ".join((prose, row["source"])))
    if cuda and (int(cuda.group(1)), int(cuda.group(2))) < (11, 7):
        # before CUDA 11.7 (PyTorch 1.x): kernels load eagerly, zero_grad keeps gradients
        w["cuda_lazy_loading"] = False
        w["grads_set_to_none"] = False
    if _has(prose, r"deepspeed"):
        w["sharding"] = "deepspeed"
    # pure 16-bit training: torchtune and LitGPT bf16-true keep no fp32 copies
    if _has(" ".join((row["source"], prose)), r"torchtune", r"bf16-true", r"pure bf16", r"no fp32 master"):
        w["master_weights"] = "none"
    ga = re.search(r"grad(?:ient)?[_ ]accum\w*\s*[=:]?\s*(\d+)", prose, re.IGNORECASE)
    if ga and not _has(prose, r"no grad accum"):
        w["grad_accum"] = int(ga.group(1))


def _explicit_keys(w: dict[str, Any], extra: str) -> None:
    """`key=value` pairs in extra_config that name workload keys win."""
    known = set(Workload.model_fields)
    for key, value in _KV.findall(extra):
        # framework=: the rows' extra_config names the publisher's software (MLC, vLLM, ...), which
        # the converter reads into engine and the software keys; the `framework:` key is explicit-only
        if key in known and key not in ("model", "framework"):
            if key == "sharding" and value.lower() not in ("fsdp", "deepspeed"):
                continue  # FSDP's own strategy names (FULL_SHARD, ...): zero= carries the stage
            if key == "task":
                value = _TASK_WORDS.get(value.lower(), value.lower())
            w[key] = _coerce(value) if key == "lora_targets" else _scalar(value)


# task words rows use for the workload's task names
_TASK_WORDS: Final = {
    "pretraining": "pretrain",
    "training": "pretrain",
    "fine-tune": "finetune",
    "fine-tuning": "finetune",
    "finetuning": "finetune",
    "full": "finetune",
    "sft": "finetune",
    "generation": "inference",
    "serving": "inference",
}


def _coerce(value: str) -> Any:
    """A list value (lora_targets): items joined by '+' (CSV cells hold no commas)."""
    if value.lower() in ("default", "all-linear"):
        return value.lower()
    return [v for v in re.split(r"[+,]", value) if v]


def _scalar(value: str) -> Any:
    low = value.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value
