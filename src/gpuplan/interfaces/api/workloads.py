"""Workloads from YAML, model names and `--set KEY=VALUE`, and the cluster they name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuplan.errors import InvalidSettingError
from gpuplan.safeio import YamlSyntaxError, clip, clip_repr, load_yaml
from gpuplan.specs.cluster import Cluster, parse_cluster
from gpuplan.specs.gpu import GPU, Catalog
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload, check_keys_apply, make_workload, read_workload_file


def build_workload(source: str | None, overrides: Mapping[str, Any] | None = None) -> Workload:
    """A workload from a YAML file, or from a model name plus keys (CLI flags win over the file)."""
    keys = {k: v for k, v in (overrides or {}).items() if v is not None}
    if source is not None and source.lower().endswith((".yaml", ".yml")):
        w = read_workload_file(source, keys)
        check_keys_apply(w)
        return w
    if source is not None:
        keys["model"] = source  # a preset, a config.json (or its folder), or a hub id
    if "model" not in keys:
        raise InvalidSettingError(
            "Give a workload YAML file or a model name (e.g. gpuplan fit llama-3.1-8b --gpu 4090)."
        )
    w = make_workload(keys)
    check_keys_apply(w)
    return w


def parse_set_options(items: Iterable[str]) -> dict[str, Any]:
    """`--set key=value` pairs, values read as YAML scalars (safe loader)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise InvalidSettingError(f"--set needs KEY=VALUE. Got {clip_repr(item)}.")
        key, value = item.split("=", 1)
        if not value.strip():  # `--set attention_impl=` would silently mean the default
            name = clip(key.strip(), 60)
            raise InvalidSettingError(f"--set {name}= has no value: give one ({name}=VALUE) or leave it out.")
        try:  # the bounded loader: an alias bomb, deep nesting or a 5,000-digit integer is one line
            out[key.strip()] = load_yaml(value, f"--set {key.strip()}")
        except YamlSyntaxError:  # not YAML at all: the text as it is
            out[key.strip()] = value
    return out


def gpu_for(w: Workload, cat: Catalog) -> GPU | None:
    """The workload's GPU; `ecc: true` on a card with no ECC setting is refused in one line."""
    gpu = cat.get(w.gpu) if w.gpu else None
    if gpu is not None and w.ecc and not gpu.has_ecc:
        raise InvalidSettingError(
            f"{gpu.name} has no memory ECC to switch on (a GeForce card without the driver's ECC setting); "
            "drop ecc: true or choose a datacenter or workstation GPU."
        )
    return gpu


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


# Serving engines with no encoder-decoder (T5) model: vLLM never shipped T5 (vllm-project/vllm#187:
# "T5ForConditionalGeneration ... not supported"; vllm#31004: "vLLM dropped encoder-decoder
# support") and SGLang's model registry (python/sglang/srt/models) holds no T5. TGI serves T5
# (huggingface/text-generation-inference#59) and llama.cpp does (ggml-org/llama.cpp#8141).
NO_ENCODER_DECODER_ENGINES = ("vllm", "sglang")


def engine_for_model(w: Workload, model: ModelSpec) -> Workload:
    """An encoder-decoder model's inference engine: transformers' generate when `engine` is unset
    (the vllm default cannot load it); a serving engine without encoder-decoder models is refused."""
    if w.task != "inference" or model.kind != "encoder-decoder":
        return w
    if "engine" not in w.model_fields_set:
        return w.with_(engine="transformers")
    if w.engine in NO_ENCODER_DECODER_ENGINES:
        raise InvalidSettingError(
            f"{model.name} is an encoder-decoder model, which the {w.engine} engine does not serve; "
            "set engine: transformers (or tgi, llama.cpp)."
        )
    return w
