"""`gpuplan measure WORKLOAD`: run the workload for real on the local GPU and set the measured step
time and peak memory beside gpuplan's estimate.

The model is built from its config.json with random weights (transformers' from_config: no
download, never trust_remote_code): decoder (causal LM) models. Training runs forward, backward
and the optimizer (AdamW), with activation checkpointing as the workload says and LoRA through
peft; inference times the prefill of the prompt and the decode of the output tokens with the KV
cache. Memory is torch.cuda.max_memory_allocated / max_memory_reserved over the measured steps.

On the CPU (`--device cpu`) the same code runs a tiny model of the same family (2 layers, width
64): a check of the code path, whose figures are not compared with an estimate.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Final

from gpuplan.errors import GpuplanError, InvalidSettingError
from gpuplan.interfaces import api
from gpuplan.interfaces.bench import TORCH_DTYPES, NoGPUError, environment, load_torch
from gpuplan.specs.models import resolve_model_config
from gpuplan.specs.workload import Workload

TINY: Final = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
               "num_key_value_heads": 2, "vocab_size": 1024, "head_dim": 16,
               "n_layer": 2, "n_embd": 64, "n_head": 4, "n_inner": 128}  # GPT-2's names  # fmt: skip


def _config(w: Workload, tiny: bool) -> Any:
    from transformers import AutoConfig

    _, cfg = resolve_model_config(w.model)
    cfg = {k: v for k, v in cfg.items() if k not in ("architectures", "auto_map", "_name_or_path")}
    if tiny:
        cfg |= {k: v for k, v in TINY.items() if k in cfg}
        cfg.pop("rope_scaling", None)
        for k in ("bos_token_id", "eos_token_id", "pad_token_id"):  # inside the tiny vocabulary
            if k in cfg:
                cfg[k] = 1
    model_type = cfg.pop("model_type", None)
    if not model_type:
        raise InvalidSettingError(f"{w.model}: its config.json has no model_type to build it from.")
    return AutoConfig.for_model(model_type, **cfg)


def _model(w: Workload, device: str, tiny: bool) -> Any:
    torch = load_torch()
    from transformers import AutoModelForCausalLM

    cfg = _config(w, tiny)
    if w.precision == "fp8":
        raise InvalidSettingError("gpuplan measure runs fp32/tf32/fp16/bf16 (fp8 needs Transformer Engine).")
    dtype = getattr(torch, TORCH_DTYPES[w.precision]) if device != "cpu" else torch.float32
    try:
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)  # type: ignore[no-untyped-call]
    except ValueError as exc:
        raise InvalidSettingError(f"gpuplan measure builds decoder (causal LM) models; {w.model}: {exc}") from None
    if w.task in ("lora", "qlora"):
        if w.task == "qlora":
            raise InvalidSettingError("QLoRA measurement needs bitsandbytes on a CUDA GPU; it is not wired in yet.")
        from peft import LoraConfig, get_peft_model

        targets = "all-linear" if w.lora_targets == "all-linear" else (
            None if w.lora_targets == "default" else list(w.lora_targets))  # fmt: skip
        model = get_peft_model(model, LoraConfig(r=w.lora_rank, lora_alpha=2 * w.lora_rank, target_modules=targets,
                                                 lora_dropout=w.lora_dropout, task_type="CAUSAL_LM"))  # fmt: skip
    model.to(device)
    if w.is_training and w.activation_checkpointing != "none":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(w: Workload, steps: int = 5, device: str | None = None) -> dict[str, Any]:
    """Measured step time and peak memory of `w` on the local device, beside gpuplan's estimate."""
    if not 2 <= steps <= 1000:
        raise InvalidSettingError(f"The 'steps' parameter must be 2-1000 (the first is a warm-up). Got {steps}.")
    if w.is_graphics:
        raise InvalidSettingError("gpuplan measure runs training and inference workloads.")
    torch = load_torch()
    if device is None:
        if not torch.cuda.is_available():
            raise NoGPUError(
                "No GPU to measure on (torch.cuda.is_available() is False). `--device cpu` runs a tiny "
                "model of the same family on the CPU, to check the code path."
            )
        device = "cuda"
    tiny = device == "cpu"
    model = _model(w, device, tiny)
    vocab = model.config.vocab_size
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    times: list[float] = []
    rec: dict[str, Any] = {"model": w.model, "task": w.task, "device": device, "tiny": tiny, "steps": steps}
    if w.is_training:
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
        seq = min(w.seq_len, 128) if tiny else w.seq_len
        batch = torch.randint(0, vocab, (w.batch_size, seq), device=device)
        model.train()
        for _ in range(steps):
            t0 = time.perf_counter()
            for _ in range(w.micro_batches):
                loss = model(input_ids=batch, labels=batch).loss
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            _sync(torch, device)
            times.append(time.perf_counter() - t0)
        rec["step_time_s"] = statistics.median(times[1:])
        rec["tokens_per_s"] = w.batch_size * seq * w.micro_batches / rec["step_time_s"]
    else:
        model.eval()
        prompt = torch.randint(0, vocab, (w.batch_size, max(w.input_len, 1)), device=device)
        out_len = max(w.output_len, 1)
        prefill, total = [], []
        with torch.no_grad():
            for _ in range(steps):
                t0 = time.perf_counter()
                model(input_ids=prompt, use_cache=True)
                _sync(torch, device)
                prefill.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                model.generate(prompt, max_new_tokens=out_len, min_new_tokens=out_len, do_sample=False,
                               pad_token_id=0)  # fmt: skip
                _sync(torch, device)
                total.append(time.perf_counter() - t0)
        rec["ttft_s"] = statistics.median(prefill[1:])
        rec["tpot_s"] = max(statistics.median(total[1:]) - rec["ttft_s"], 0.0) / max(out_len - 1, 1)
    if device.startswith("cuda"):
        rec["max_memory_allocated_bytes"] = float(torch.cuda.max_memory_allocated())
        rec["max_memory_reserved_bytes"] = float(torch.cuda.max_memory_reserved())
        name = torch.cuda.get_device_name()
        gpu = api.catalog().find(name)
        rec["gpu"] = gpu.name if gpu else name
        if gpu is not None:
            rec["estimate"] = _compare(w.with_(gpu=gpu.name, num_gpus=1), rec)
    rec["environment"] = environment(torch)
    return rec


def _compare(w: Workload, rec: dict[str, Any]) -> dict[str, Any]:
    """gpuplan's estimate of the same workload and the signed error of each figure."""
    try:
        est = api.estimate(w)
    except GpuplanError as exc:
        return {"error": str(exc)}
    m, t = est["memory"], est["time"]
    out: dict[str, Any] = {"allocated_bytes": m["allocated_bytes"], "reserved_bytes": m["reserved_bytes"]}
    pairs = [("allocated_bytes", "max_memory_allocated_bytes"), ("reserved_bytes", "max_memory_reserved_bytes")]
    if w.is_training:
        out["step_time_s"] = t["step_time_s"]
        pairs.append(("step_time_s", "step_time_s"))
    else:
        out["ttft_s"], out["tpot_s"] = t["ttft_single_request_s"] if w.batch_size == 1 else t["ttft_s"], t["tpot_s"]
        pairs += [("ttft_s", "ttft_s"), ("tpot_s", "tpot_s")]
    out["error"] = {k: out[k] / rec[m_] - 1 for k, m_ in pairs if rec.get(m_) and out.get(k) is not None}
    return out
