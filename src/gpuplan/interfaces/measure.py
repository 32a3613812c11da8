"""`gpuplan measure WORKLOAD`: run the workload for real on the local GPU and set the measured step
time and peak memory beside gpuplan's estimate.

The model is built from its config.json with random weights (transformers' from_config, on the
device itself: no download, never trust_remote_code): decoder (causal LM) models. What runs is what
the workload says, so that the estimate it is set beside describes the same run:
- training: forward, backward and the workload's optimizer (torch's fused AdamW by default), under
  PyTorch AMP (fp32 parameters, 16-bit autocast) when master weights are fp32, in pure 16 bits when
  they are `none`; activation checkpointing of whole layers; LoRA through peft (adapters in fp32
  under AMP); QLoRA with the block linears quantised by bitsandbytes (NF4, double quantisation);
- inference: transformers' generate (the estimate takes engine=transformers): the prefill of the
  prompt, then the decode of the output tokens with the KV cache; weights in the compute precision,
  or quantised by bitsandbytes as load_in_4bit (nf4, nf4-no-dq, fp4) or load_in_8bit (int8) do.
Anything it cannot reproduce (several GPUs, ZeRO, fp8, a compiled or chunked loss, ...) is refused
with the reason. Memory is torch.cuda.max_memory_allocated / max_memory_reserved over the measured
steps; times are medians after a warm-up step.

On the CPU (`--device cpu`) the same code runs a tiny model of the same family (2 layers, width
64): a check of the code path, whose figures are not compared with an estimate.
"""

from __future__ import annotations

import importlib
import inspect
import statistics
import time
from typing import Any, Final

from gpuplan.errors import GpuplanError, InvalidSettingError
from gpuplan.interfaces import api
from gpuplan.interfaces.bench import TORCH_DTYPES, NoGPUError, environment, load_torch
from gpuplan.results import InferenceSpeed, TrainingSpeed
from gpuplan.specs.context import Context
from gpuplan.specs.models import resolve_model_config
from gpuplan.specs.workload import Workload

TINY: Final = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
               "num_key_value_heads": 2, "vocab_size": 1024, "head_dim": 16,
               "n_layer": 2, "n_embd": 64, "n_head": 4, "n_inner": 128,  # GPT-2's names
               "d_model": 64, "n_layers": 2, "n_heads": 4,  # MPT's
               "num_layers": 2, "num_decoder_layers": 2, "num_heads": 4, "d_ff": 128, "d_kv": 16}  # T5's  # fmt: skip


# MoE, MLA and per-layer lists shrunk with it (experts, their widths, the low-rank attention)
TINY_MOE: Final = {"num_local_experts": 4, "num_experts": 4, "n_routed_experts": 4, "moe_intermediate_size": 32,
                   "shared_expert_intermediate_size": 64, "intermediate_size_mlp": 128, "q_lora_rank": 32,
                   "kv_lora_rank": 16, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16}  # fmt: skip
# a multimodal config's vision tower (built, never run by measure): one narrow layer
TINY_VISION: Final = {"num_hidden_layers": 1, "hidden_size": 64, "intermediate_size": 256, "num_attention_heads": 4,
                      "image_size": 56, "projector_input_dim": 64, "projector_output_dim": 64,
                      "vision_output_dim": 64}  # fmt: skip
TINY_MAX_PARAMS: Final = 50_000_000  # the CPU check's model stays small (a few hundred MB at fp32)


def _shrink(cfg: dict[str, Any], sizes: dict[str, Any]) -> dict[str, Any]:
    out = cfg | {k: v for k, v in sizes.items() if k in cfg} | {k: v for k, v in TINY_MOE.items() if k in cfg}
    if "kv_lora_rank" in out and "num_attention_heads" in out:  # MLA: one KV head per query head
        out["num_key_value_heads"] = out["num_attention_heads"]
    if "num_experts_per_tok" in out:
        out["num_experts_per_tok"] = min(int(out["num_experts_per_tok"]), 2)
    for key in ("first_k_dense_replace", "n_group", "topk_group"):  # DeepSeek routing within the tiny model
        if key in out:
            out[key] = 1
    layers = out.get("num_hidden_layers")
    if isinstance(layers, int):
        for key in ("layer_types", "no_rope_layers"):  # one entry per layer: the first tiny-many
            if isinstance(out.get(key), list):
                out[key] = out[key][:layers]
        for key in ("moe_layers", "mlp_only_layers"):  # layer indices: those within the tiny model
            if isinstance(out.get(key), list):
                out[key] = [i for i in out[key] if isinstance(i, int) and 0 <= i < layers]
    out.pop("rope_scaling", None)
    for k in ("bos_token_id", "eos_token_id", "pad_token_id"):  # inside the tiny vocabulary
        if k in out:
            out[k] = 1
    return out


def config_dict(w: Workload, tiny: bool) -> dict[str, Any]:
    """The config.json `measure` builds the model from: the workload's, or its tiny variant on the CPU
    (nested text and vision configs of multimodal checkpoints shrunk too)."""
    _, cfg = resolve_model_config(w.model)
    cfg = {k: v for k, v in cfg.items() if k not in ("architectures", "auto_map", "_name_or_path")}
    if tiny:
        cfg = _shrink(cfg, TINY)
        if isinstance(cfg.get("text_config"), dict):
            cfg["text_config"] = _shrink(cfg["text_config"], TINY)
        if isinstance(cfg.get("vision_config"), dict):
            cfg["vision_config"] = _shrink(cfg["vision_config"], TINY_VISION)
    if not cfg.get("model_type"):
        raise InvalidSettingError(f"{w.model}: its config.json has no model_type to build it from.")
    if tiny:
        from gpuplan.specs.model import model_from_config

        n = model_from_config(cfg, "tiny").total_params
        if n > TINY_MAX_PARAMS:
            raise InvalidSettingError(
                f"{w.model}: its tiny CPU variant would still have {n:,} parameters (a key gpuplan does not "
                f"shrink); the CPU check builds at most {TINY_MAX_PARAMS:,}. Run `gpuplan measure` on a GPU instead."
            )
    return cfg


def _config(w: Workload, tiny: bool) -> Any:
    from transformers import AutoConfig

    cfg = config_dict(w, tiny)
    from gpuplan.specs.model import family_of

    fam = family_of(str(cfg.get("model_type")))
    if fam is not None and fam.hub_code:
        raise InvalidSettingError(
            f"{w.model}: a {fam.model_type!r} model's code ships with the checkpoint ({fam.hub_code}, "
            "trust_remote_code), which gpuplan never runs; measure it with your own script."
        )
    return AutoConfig.for_model(cfg.pop("model_type"), **cfg)


# Optimizers measure builds, by the workload's name (estimators/optimizer.py describes the same ones):
# torch's fused AdamW/Adam (the Trainer's and torchtune's default), foreach AdamW, SGD; bitsandbytes'
# 8-bit and paged ones when bitsandbytes is installed.
TORCH_OPTIMIZERS: Final = ("adamw", "adam", "adamw-foreach", "sgd", "sgd-momentum", "adafactor")
BNB_OPTIMIZERS: Final = {"adamw-8bit": "AdamW8bit", "paged-adamw": "PagedAdamW32bit",
                         "paged-adamw-8bit": "PagedAdamW8bit", "lion-8bit": "Lion8bit",
                         "paged-lion-8bit": "PagedLion8bit"}  # fmt: skip
# 4-bit formats bitsandbytes stores (QLoRA sec. 3; bitsandbytes Linear4bit): format -> (quant_type, double quant)
BNB_4BIT: Final = {"nf4": ("nf4", True), "nf4-no-dq": ("nf4", False), "fp4": ("fp4", True)}
# Inference weights bitsandbytes holds: the 4-bit ones and LLM.int8 (Linear8bitLt with transformers'
# load_in_8bit defaults: int8 weights with an fp32 scale per row, outlier threshold 6.0)
BNB_FORMATS: Final = (*BNB_4BIT, "int8")
LLM_INT8_THRESHOLD: Final = 6.0


def unsupported(w: Workload) -> str | None:
    """Why `gpuplan measure` cannot run `w` as written (one GPU, one process, eager transformers), or None.
    A measurement of something else than the workload says would be compared with the wrong estimate."""
    if w.is_graphics:
        return "gpuplan measure runs training and inference workloads."
    if w.precision == "fp8":
        return "gpuplan measure runs fp32/tf32/fp16/bf16 (fp8 training needs Transformer Engine)."
    if w.num_gpus != 1 or w.tp * w.pp * w.cp * w.ep != 1:
        return "gpuplan measure runs one GPU in one process: set num_gpus, tp, pp, cp and ep to 1."
    if w.is_training:
        if w.zero or w.offload != "none" or w.activation_offloading:
            return "gpuplan measure runs plain PyTorch training: no ZeRO/FSDP sharding or offloading."
        if w.activation_checkpointing in ("selective", "selective-op"):
            return "transformers checkpoints whole layers: use activation_checkpointing full or none."
        if w.compile or w.loss_impl != "upcast" or w.optimizer_in_backward or not w.grads_set_to_none:
            return ("gpuplan measure runs eager transformers training (loss_impl upcast, no compile, "
                    "optimizer after backward, gradients set to None).")  # fmt: skip
        if w.optimizer not in TORCH_OPTIMIZERS and w.optimizer not in BNB_OPTIMIZERS:
            return f"gpuplan measure does not build the {w.optimizer!r} optimizer."
        fmt = (w.weight_dtype or "nf4") if w.task == "qlora" else None
        if fmt is not None and fmt not in BNB_4BIT:
            return f"QLoRA measurement quantises with bitsandbytes ({', '.join(BNB_4BIT)}), not {fmt!r}."
    else:
        if "engine" in w.model_fields_set and w.engine != "transformers":
            return f"gpuplan measure times transformers' generate, not {w.engine}: set engine=transformers."
        fmt = w.effective_weight_dtype
        if fmt != w.precision and fmt not in BNB_FORMATS and not (w.precision == "tf32" and fmt == "fp32"):
            return (f"gpuplan measure runs inference weights in {w.precision} or bitsandbytes "
                    f"({', '.join(BNB_FORMATS)}), not {fmt!r}.")  # fmt: skip
        if w.cache_implementation == "static":
            return "gpuplan measure times generate with transformers' DynamicCache: drop cache_implementation."
        if w.effective_kv_dtype not in (w.precision, "fp32" if w.precision == "tf32" else w.precision):
            return "gpuplan measure keeps the KV cache in the compute precision (transformers' DynamicCache)."
    return None


def _dtypes(w: Workload, torch: Any) -> tuple[Any, Any, bool]:
    """(parameter dtype, autocast dtype or None, adapters in fp32) for the workload's precision.

    Mixed precision with fp32 master weights is PyTorch AMP: fp32 parameters, gradients and
    optimizer states, 16-bit autocast (Micikevicius et al. 2018; what the estimator's `_autocast`
    counts). `master_weights: none` is pure 16-bit training (torchtune, Lightning bf16-true).
    LoRA keeps the frozen base in 16 bits and, under AMP, the adapters in fp32 (PEFT's
    autocast_adapter_dtype=True)."""
    half = getattr(torch, TORCH_DTYPES[w.precision]) if w.precision in ("fp16", "bf16") else None
    if half is None:
        return torch.float32, None, False
    amp = w.is_training and w.master_weights == "fp32"
    if w.task in ("pretrain", "finetune"):
        return (torch.float32 if amp else half), (half if amp else None), False
    return half, (half if amp else None), amp


def _quantise(model: Any, torch: Any, fmt: str, compute_dtype: Any, device: str) -> None:
    """Replace every block linear (not the output head: transformers' get_keys_to_not_convert) by a
    bitsandbytes Linear4bit or Linear8bitLt holding the same random weights in `fmt`, quantised on `device`."""
    try:
        bnb: Any = importlib.import_module("bitsandbytes")
    except ImportError:
        raise InvalidSettingError(f"Measuring {fmt} weights needs bitsandbytes: pip install bitsandbytes.") from None
    head = model.get_output_embeddings()
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is not torch.nn.Linear or child is head:
                continue
            shape = (child.in_features, child.out_features)
            if fmt == "int8":
                q = bnb.nn.Linear8bitLt(*shape, bias=child.bias is not None, has_fp16_weights=False,
                                        threshold=LLM_INT8_THRESHOLD, device="meta")  # fmt: skip
                q.weight = bnb.nn.Int8Params(child.weight.data, requires_grad=False, has_fp16_weights=False)
            else:
                quant_type, double = BNB_4BIT[fmt]
                q = bnb.nn.Linear4bit(*shape, bias=child.bias is not None, compute_dtype=compute_dtype,
                                      compress_statistics=double, quant_type=quant_type, device="meta")  # fmt: skip
                q.weight = bnb.nn.Params4bit(child.weight.data, requires_grad=False, compress_statistics=double,
                                             quant_type=quant_type, module=q)  # fmt: skip
            if child.bias is not None:
                q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
            setattr(parent, name, q.to(device))  # Params4bit.to / Int8Params.to quantise
    if fmt == "int8":
        model.is_loaded_in_8bit = True
    else:
        model.is_loaded_in_4bit = True


def _default_targets(w: Workload) -> list[str] | None:
    from gpuplan.estimators.lora import default_targets

    model_type = config_dict(w, False).get("model_type")
    names = default_targets(model_type) if isinstance(model_type, str) else ()
    return list(names) if names else None


def _model(w: Workload, device: str, tiny: bool) -> Any:
    torch = load_torch()
    from transformers import AutoModelForCausalLM

    cfg = _config(w, tiny)
    dtype, _, adapters_fp32 = _dtypes(w, torch)
    attn = "sdpa" if w.attention_impl != "eager" else "eager"  # SDPA runs the flash kernel on Ampere and later
    try:
        with torch.device(device):  # initialised where it runs: an 8B model in seconds, not minutes on the CPU
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=attn)  # type: ignore[no-untyped-call]
    except ValueError as exc:
        if "does not support an attention implementation" in str(exc):
            raise InvalidSettingError(
                f"transformers builds {w.model} only with eager attention (no SDPA for it): set "
                "attention_impl: eager to measure it, and the estimate counts the attention scores that way."
            ) from None
        raise InvalidSettingError(f"gpuplan measure builds decoder (causal LM) models; {w.model}: {exc}") from None
    fmt = (w.weight_dtype or "nf4") if w.task == "qlora" else w.effective_weight_dtype
    if fmt in BNB_FORMATS:
        _quantise(model, torch, fmt, dtype, device)
    if w.task in ("lora", "qlora"):
        from peft import LoraConfig, get_peft_model

        if w.task == "qlora" and adapters_fp32:
            from peft import prepare_model_for_kbit_training

            # casts the embeddings, norms and head to fp32 (what the estimator counts for QLoRA under AMP)
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)  # type: ignore[no-untyped-call]
        # the default targets the estimate counts (PEFT's per-family mapping, and q/v for families it
        # lacks: gpt-oss, Llama 4 built from its text config)
        targets = "all-linear" if w.lora_targets == "all-linear" else (
            _default_targets(w) if w.lora_targets == "default" else list(w.lora_targets))  # fmt: skip
        model = get_peft_model(model, LoraConfig(r=w.lora_rank, lora_alpha=w.effective_lora_alpha, target_modules=targets,
                                                 lora_dropout=w.lora_dropout, task_type="CAUSAL_LM"),
                               autocast_adapter_dtype=adapters_fp32)  # fmt: skip
    if w.is_training and w.activation_checkpointing != "none":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def _optimizer(w: Workload, params: list[Any], torch: Any) -> Any:
    name, lr = w.optimizer, 1e-4
    if name in BNB_OPTIMIZERS:
        try:
            bnb: Any = importlib.import_module("bitsandbytes")
        except ImportError:
            raise InvalidSettingError(f"The {name!r} optimizer needs bitsandbytes: pip install bitsandbytes.") from None
        return getattr(bnb.optim, BNB_OPTIMIZERS[name])(params, lr=lr)
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=lr, scale_parameter=False, relative_step=False)  # type: ignore[no-untyped-call]
    if name in ("sgd", "sgd-momentum"):
        return torch.optim.SGD(params, lr=lr, momentum=0.9 if name == "sgd-momentum" else 0.0)
    cls = torch.optim.Adam if name == "adam" else torch.optim.AdamW
    if name == "adamw-foreach":
        return cls(params, lr=lr, foreach=True)
    return cls(params, lr=lr, fused=True)  # estimators/optimizer.py: fused, no step temporaries


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(w: Workload, steps: int = 5, device: str | None = None, ctx: Context | None = None) -> dict[str, Any]:
    """Measured step time and peak memory of `w` on the local device, beside gpuplan's estimate."""
    if not 2 <= steps <= 1000:
        raise InvalidSettingError(f"The 'steps' parameter must be 2-1000 (the first is a warm-up). Got {steps}.")
    why = unsupported(w)
    if why:
        raise InvalidSettingError(why)
    if not w.is_training:
        w = w.with_(engine="transformers")  # what runs: transformers' generate, eager PyTorch
    torch = load_torch()
    if device is None:
        if not torch.cuda.is_available():
            raise NoGPUError(
                "No GPU to measure on (torch.cuda.is_available() is False). `--device cpu` runs a tiny "
                "model of the same family on the CPU, to check the code path."
            )
        device = "cuda"
    tiny = device == "cpu"
    cuda = device.startswith("cuda")
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = w.precision == "tf32"
    try:
        rec = _run(torch, w, steps, device, tiny)
    except GpuplanError:
        raise
    except (RuntimeError, ValueError, TypeError) as exc:  # torch, transformers or PEFT refused the run
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GpuplanError(f"the measurement of {w.model} ({w.task}) failed: {first}") from None
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    if cuda:
        rec["gpu"], known = local_gpu(torch, ctx)
        if known:
            rec["estimate"] = _compare(w.with_(gpu=rec["gpu"], num_gpus=1), rec, ctx)
    rec["workload"] = w.model_dump(exclude_unset=True)
    rec["environment"] = environment(torch)
    return rec


def local_gpu(torch: Any, ctx: Context | None = None) -> tuple[str, bool]:
    """The current CUDA device's catalog name (True), or the driver's name for a card not in the catalog (False)."""
    name = torch.cuda.get_device_name()
    gpu = api.catalog(ctx).find(name)
    return (gpu.name, True) if gpu else (name, False)


def _run(torch: Any, w: Workload, steps: int, device: str, tiny: bool) -> dict[str, Any]:
    cuda = device.startswith("cuda")
    model = _model(w, device, tiny)
    vocab = model.config.vocab_size
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()  # the peaks of the measured steps alone, not of building the model
    times: list[float] = []
    rec: dict[str, Any] = {"model": w.model, "task": w.task, "device": device, "tiny": tiny, "steps": steps}
    _, amp, _ = _dtypes(w, torch)
    dev_type = "cuda" if cuda else "cpu"
    if w.is_training:
        params = [p for p in model.parameters() if p.requires_grad]
        opt = _optimizer(w, params, torch)
        seq = min(w.seq_len, 128) if tiny else w.seq_len
        batch = torch.randint(0, vocab, (w.batch_size, seq), device=device)
        model.train()
        # fp16 autocast trains with dynamic loss scaling (Micikevicius et al. 2018; torch.amp.GradScaler),
        # as an fp16 AMP run does: its unscale and inf check are part of the step timed
        scaler = torch.amp.GradScaler(dev_type, enabled=amp is torch.float16 and cuda)
        for _ in range(steps):
            t0 = time.perf_counter()
            for _ in range(w.micro_batches):
                with torch.autocast(dev_type, dtype=amp, enabled=amp is not None):
                    loss = model(input_ids=batch, labels=batch).loss
                scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            _sync(torch, device)
            times.append(time.perf_counter() - t0)
        rec["step_time_s"] = statistics.median(times[1:])
        rec["tokens_per_s"] = w.batch_size * seq * w.micro_batches / rec["step_time_s"]
    else:
        model.eval()
        prompt = torch.randint(0, vocab, (w.batch_size, max(w.input_len, 1)), device=device)
        out_len = max(w.output_len, 1)
        # generate computes the last position's logits only (transformers' logits_to_keep=1): so does the prefill timed here
        keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
        prefill, total = [], []
        with torch.no_grad():
            for _ in range(steps):
                t0 = time.perf_counter()
                model(input_ids=prompt, use_cache=True, **keep)
                _sync(torch, device)
                prefill.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                model.generate(prompt, max_new_tokens=out_len, min_new_tokens=out_len, do_sample=False,
                               pad_token_id=0)  # fmt: skip
                _sync(torch, device)
                total.append(time.perf_counter() - t0)
        rec["ttft_s"] = statistics.median(prefill[1:])
        rec["tpot_s"] = max(statistics.median(total[1:]) - rec["ttft_s"], 0.0) / max(out_len - 1, 1)
    if cuda:
        rec["max_memory_allocated_bytes"] = float(torch.cuda.max_memory_allocated())
        rec["max_memory_reserved_bytes"] = float(torch.cuda.max_memory_reserved())
    return rec


def _compare(w: Workload, rec: dict[str, Any], ctx: Context | None = None) -> dict[str, Any]:
    """gpuplan's estimate of the same workload and the signed error of each figure."""
    try:
        est = api.estimate(w, ctx)
    except GpuplanError as exc:
        return {"error": str(exc)}
    m, t = est.memory, est.time
    out: dict[str, Any] = {"allocated_bytes": m.allocated_bytes, "reserved_bytes": m.reserved_bytes}
    pairs = [("allocated_bytes", "max_memory_allocated_bytes"), ("reserved_bytes", "max_memory_reserved_bytes")]
    if isinstance(t, TrainingSpeed):
        out["step_time_s"] = t.step_time_s
        pairs.append(("step_time_s", "step_time_s"))
    elif isinstance(t, InferenceSpeed):
        out["ttft_s"], out["tpot_s"] = t.prefill_batch_s, t.tpot_s  # the prefill of the whole batch, as timed
        pairs += [("ttft_s", "ttft_s"), ("tpot_s", "tpot_s")]
    out["error"] = {k: out[k] / rec[m_] - 1 for k, m_ in pairs if rec.get(m_) and out.get(k) is not None}
    return out
