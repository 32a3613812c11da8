"""The plan behind a launch file: the layout (the workload's own, or the best one the layout search
finds on the cluster), its memory and time estimates, the Slurm time limit they give, and the
weight format the serving engine loads. interfaces/launch.py renders it into each format's file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import uncertainty
from gpuplan.estimators.lora import model_target_names
from gpuplan.estimators.memory import MemoryEstimate, estimate_memory, inference_weights
from gpuplan.estimators.perf import InferenceTime, TrainingTime, estimate_inference_time, estimate_training_time
from gpuplan.planner.layouts import CHECKPOINTING, Layout, search_layouts
from gpuplan.specs.cluster import Cluster, implied_cluster
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.model import ModelSpec, family_of
from gpuplan.specs.models import find_preset
from gpuplan.specs.workload import Workload

# Slurm --time: the estimate's pessimistic end (the validation band's slow side) x 1.15, plus
# 15 minutes for start-up, data loading and checkpoints (a margin, not a measurement).
TIME_MARGIN: Final = 1.15
TIME_SETUP_S: Final = 15 * 60
NO_BAND_MARGIN: Final = 1.25  # the slow end when no validation band covers the job (a margin)
DEFAULT_TIME_S: Final = 4 * 3600
SEARCH_TOP: Final = 40  # layouts ranked when the workload fixes batch_size/grad_accum (the first that keeps them wins)


@dataclass(frozen=True)
class LaunchPlan:
    model: ModelSpec
    model_id: str  # what the engines load: a hub id or a local path
    w: Workload  # with the layout's keys
    cluster: Cluster
    layout_label: str
    training: TrainingTime | None
    inference: InferenceTime | None
    memory: MemoryEstimate
    script: str
    script_args: tuple[str, ...]
    time_limit_s: float  # a Slurm --time that covers the job's slow end, with a margin
    time_limit_note: str  # how it was reached, for the script's header
    weight_format: str  # the weights' storage format as the engine loads them (e.g. fp8, awq)
    weights_from_checkpoint: bool  # pre-quantised: the engine reads the format from config.json
    # where the file's settings differ from the workload's: bf16 written as fp16 on a card without
    # BF16, or no searched layout fitting (the workload's own layout is planned instead)
    notes: tuple[str, ...] = ()
    searched_none: bool = False  # the layout search found no layout that fits

    @property
    def remote_code_note(self) -> str | None:
        """A hub family whose modeling code ships with the checkpoint (specs/model/families.py)."""
        fam = family_of(self.model.model_type)
        if fam is None or not fam.hub_code:
            return None
        return (
            f"{fam.model_type}: its modeling code ships with the checkpoint ({fam.hub_code}); loading it needs "
            "trust_remote_code (vLLM/TGI --trust-remote-code), which gpuplan does not add: read that code first"
        )

    @property
    def checkpoint_note(self) -> str | None:
        """A serving engine quantises 16-bit weights on load only for some formats (vLLM: fp8,
        bitsandbytes nf4, mxfp4 for gpt-oss); the others need a checkpoint already in that format,
        whose config.json's quantization_config the engine reads (vLLM docs, features/quantization)."""
        kind = NEEDS_QUANTIZED_CHECKPOINT.get(self.weight_format)
        if self.w.is_training or self.weights_from_checkpoint or kind is None:
            return None
        return f"{self.weight_format} weights: serve {kind} checkpoint of {self.model_id} (this id is the 16-bit one)"


# weight formats an engine cannot make from a 16-bit checkpoint on load (vLLM docs, features/quantization:
# AWQ, GPTQ, INT8 W8A16/W8A8 (compressed-tensors), ModelOpt NVFP4 and GGUF are loaded pre-quantised)
NEEDS_QUANTIZED_CHECKPOINT: Final = {
    "awq": "an AWQ",
    "int4": "an AWQ",
    "gptq": "a GPTQ",
    "int8": "an INT8 (W8A16 or W8A8, compressed-tensors)",
    "nvfp4": "a ModelOpt NVFP4",
    "q4_k_m": "a GGUF Q4_K_M",
}


def model_id(model: ModelSpec, name: str) -> str:
    """What the engines and trainers load: a preset's hub id, a local model's folder (from_pretrained
    and the serving engines take the directory holding config.json, not the file), else the name."""
    p = find_preset(name)
    if p is not None and p.hf_id:
        return p.hf_id
    path = Path(name)
    if path.name.lower().endswith(".json") and path.is_file():
        return str(path.parent)
    return name


def job_seconds(model: ModelSpec, cluster: Cluster, t: TrainingTime | None) -> tuple[float, str]:
    """A time limit for the job: the slow end of its validation range x TIME_MARGIN + TIME_SETUP_S,
    and how it was reached; DEFAULT_TIME_S when there are no `tokens` to estimate from."""
    if t is not None and t.time_to_train_s is not None:
        band = uncertainty.band(uncertainty.kind_of("training", model.kind, cluster.gpu.architecture))
        high = band.range(t.time_to_train_s, time=True)[1] if band else t.time_to_train_s * NO_BAND_MARGIN
        secs = high * TIME_MARGIN + TIME_SETUP_S
        return (
            secs,
            f"estimate {t.time_to_train_s / 3600:,.1f} h; slow end {high / 3600:,.1f} h x {TIME_MARGIN} + 15 min",
        )
    return DEFAULT_TIME_S, "no `tokens` to estimate from: 4 h default"


def plan_launch(
    model: ModelSpec,
    name: str,
    w: Workload,
    cluster: Cluster | None,
    catalog: Catalog,
    script: str = "train.py",
    script_args: tuple[str, ...] = (),
    search: bool = True,
    data_parallel: bool = False,
) -> LaunchPlan:
    """The launch plan: the workload's own layout when it sets one or names a framework (the layout
    `gpuplan estimate` judges, so both refuse alike), else the best searched layout (training on a
    cluster or several GPUs; `data_parallel`: for a format that splits no tensors, pipelines or
    sequences), with a note naming each setting it changed; or the fewest GPUs that hold an
    inference job."""
    if w.gpu is None and cluster is None:
        raise InvalidSettingError("A launch file needs a GPU: set gpu: NAME (and num_gpus) or cluster: NODESxGPUS:GPU.")
    named_cluster = cluster is not None  # a cluster the workload names, not gpu x num_gpus
    if cluster is None:
        gpu = catalog.get(w.gpu or "")
        cluster = implied_cluster(gpu, w.num_gpus)
    layout_keys = {"tp", "pp", "cp", "ep", "etp", "vp", "zero", "sequence_parallel"}
    # the layout keys the user sets fix the layout (the one `gpuplan estimate` judges, refused with its
    # best fix where it does not fit). So does a framework on GPUs named by gpu and num_gpus: its file
    # is written for the workload as estimated, refused alike in every framework (QA F2). On a named
    # cluster, `gpuplan plan --cluster`'s face, the file runs plan's best layout: the search finds it
    # among what the framework's launch runs (its ZeRO stages, data parallel only for the PEFT
    # trainers: planner/layouts.py), checkpointing searched as plan searches it (QA F28)
    fixed = bool(layout_keys & w.model_fields_set) or (w.framework is not None and not named_cluster)
    label = ""
    searched_none = False
    notes: list[str] = []
    if w.is_training and search and not fixed and cluster.num_gpus > 1:
        asked = w.with_(gpu=cluster.gpu.name, num_gpus=cluster.num_gpus)
        pinned = w.with_(**{k: 1 for k in ("tp", "pp", "cp", "ep") if k not in w.model_fields_set})
        found = _search(model, pinned if data_parallel else w, cluster)
        if found is not None:
            w, label = found
            if label:
                notes += changed_note(model, asked, w, cluster)
        else:  # the workload's own layout, planned so the refusal shows its shortfall and best fix
            searched_none = True
            notes.append(f"no layout the search tried fits on {cluster.num_gpus} x {cluster.gpu.name}")
    if not label:
        w = w.with_(gpu=cluster.gpu.name, num_gpus=cluster.num_gpus)
        label = _label(w)
    if w.precision == "bf16" and not cluster.gpu.supports("bf16") and cluster.gpu.supports("fp16"):
        # vLLM refuses bf16 below compute capability 8.0 ("Bfloat16 is only supported on GPUs with
        # compute capability of at least 8.0 ... --dtype=half": vllm-project/vllm vllm/worker/worker.py
        # _check_if_gpu_supports_dtype); trainers' bf16 autocast has no tensor cores there: fp16 it is
        w = w.with_(precision="fp16")
        notes.append(f"{cluster.gpu.name} has no BF16 (compute capability < 8.0): written as fp16")
    w, renamed = _model_target_names(model, w)
    notes += renamed
    mem = estimate_memory(model, w, cluster.gpu)
    training = estimate_training_time(model, w, cluster.gpu, cluster) if w.is_training else None
    inference = None if w.is_training else estimate_inference_time(model, w, cluster.gpu)
    secs, note = job_seconds(model, cluster, training)
    iw = inference_weights(model, w)
    return LaunchPlan(
        model, model_id(model, name), w, cluster, label, training, inference, mem, script, script_args,
        secs, note, iw.fmt, iw.from_checkpoint, tuple(notes), searched_none,
    )  # fmt: skip


def _model_target_names(model: ModelSpec, w: Workload) -> tuple[Workload, list[str]]:
    """An adapter job's listed lora_targets as the model names its modules (torchtune's output_proj
    -> o_proj, w1/w2/w3 -> gate/down/up_proj, q -> q_proj: estimators/lora.py), so the file's PEFT,
    Axolotl or LLaMA-Factory adapter matches them; PEFT would skip a name that matches no module
    beside names that do. A note names each one renamed."""
    if w.task not in ("lora", "qlora") or not isinstance(w.lora_targets, list):
        return w, []
    names = model_target_names(model, w.lora_targets)
    if names == w.lora_targets:
        return w, []
    each = [(a, model_target_names(model, [a])[0]) for a in w.lora_targets]
    renamed = [f"{a} -> {b}" for a, b in each if a != b]
    note = f"lora_targets written as {model.name} names its modules: {', '.join(dict.fromkeys(renamed))}"
    return w.with_(lora_targets=names), [note] if renamed else []


def _search(model: ModelSpec, w: Workload, cluster: Cluster) -> tuple[Workload, str] | None:
    """The fastest searched layout and its label ("" where none keeps the workload's batch_size and
    grad_accum: its own layout), or None where none fits: `gpuplan plan`'s first. The activation
    checkpointing the workload sets is kept; an adapter job (LoRA/QLoRA) is searched over data
    parallel layouts only (planner/layouts.py search_layouts)."""
    held = "activation_checkpointing" in w.model_fields_set
    ckpts = (w.activation_checkpointing,) if held else CHECKPOINTING
    # a micro-batch and accumulation the workload sets are kept: only layouts that run them
    keep = {k: getattr(w, k) for k in ("batch_size", "grad_accum") if k in w.model_fields_set}
    res = search_layouts(model, w, cluster, top=SEARCH_TOP if keep else 1, checkpointing=ckpts)
    if not res.best:
        return None
    best = [r for r in res.best if all(getattr(r.workload, k) == v for k, v in keep.items())]
    # none of the ranked layouts runs the workload's micro-batch: its own layout is planned ("" label)
    return (best[0].workload, best[0].layout.label) if best else (w, "")


CHANGED_KEYS: Final = ("tp", "pp", "cp", "ep", "vp", "zero", "sequence_parallel", "batch_size", "grad_accum",
                       "activation_checkpointing")  # fmt: skip


def changed_note(model: ModelSpec, asked: Workload, got: Workload, cluster: Cluster) -> list[str]:
    """One line naming the settings the searched layout changed from the workload as written (the
    layout `gpuplan estimate` judges), and why; none where it changed nothing."""
    diff = [
        f"{k} {getattr(asked, k)} -> {getattr(got, k)}" for k in CHANGED_KEYS if getattr(asked, k) != getattr(got, k)
    ]
    if not diff:
        return []
    try:
        mem = estimate_memory(model, asked, cluster.gpu)
        short = (mem.per_gpu_bytes - (mem.capacity_bytes or 0)) / 2**30
        why = "as written it fits" if mem.fits else f"as written it does not fit, {short:,.2f} GiB short per GPU"
    except InvalidSettingError:
        why = "as written it is not a layout gpuplan can estimate"
    return [
        f"changed from the workload (what `gpuplan estimate` judges): {', '.join(diff)}: the fastest layout the "
        f"search found that fits; {why}; set these keys to keep yours"
    ]


def _label(w: Workload) -> str:
    if w.is_training:
        return Layout(
            w.tp, w.pp, w.vp, w.cp, w.ep, w.dp, w.zero, w.batch_size, w.micro_batches,
            w.activation_checkpointing, w.sequence_parallel,
        ).label  # fmt: skip
    label = f"TP{w.tp} PP{w.pp}"
    if w.dp > 1:
        label += f" DP{w.dp}" + (f" EP{w.ep} (attention data parallel)" if w.ep > 1 else " (replicas)")
    elif w.ep > 1:
        label += f" EP{w.ep}"
    return label
