"""gpuplan measure runs what the workload says (interfaces/measure.py), so that a measurement is
set beside the estimate of the same run: the dtypes of the parameters it builds, the quantised
layers, the optimizer, and what it refuses. Checked on the CPU on tiny models of the same family;
the stored bytes of what it builds are compared with the estimator's own weight lines."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators.memory import estimate_memory
from gpuplan.interfaces import measure as m
from gpuplan.specs.model import model_from_config
from gpuplan.specs.models import presets
from gpuplan.specs.precision import storage_format
from gpuplan.specs.workload import make_workload

bnb = pytest.importorskip("bitsandbytes")


def stored_bytes(p: torch.nn.Parameter) -> float:
    """Bytes a parameter holds, with a bitsandbytes 4-bit weight's block scales (absmax; nested:
    the 8-bit absmax and their fp32 scales), without the per-tensor code tables."""
    b = float(p.numel() * p.element_size())
    qs = getattr(p, "quant_state", None)
    if qs is not None:
        b += qs.absmax.numel() * qs.absmax.element_size()
        if qs.nested:
            b += qs.state2.absmax.numel() * qs.state2.absmax.element_size()
    return b


def built(keys: dict[str, Any]) -> tuple[Any, dict[str, float]]:
    w = make_workload(keys)
    model = m._model(w, "cpu", tiny=True)
    spec = model_from_config(m.config_dict(w, tiny=True), "tiny")
    return model, {x.name: x.bytes for x in estimate_memory(spec, w).lines}


@pytest.mark.parametrize("fmt", ["nf4", "nf4-no-dq"])
def test_bitsandbytes_4bit_storage_is_what_the_estimator_counts(fmt: str) -> None:
    # QLoRA sec. 3: 4-bit NF4 in blocks of 64 with an absmax each; double quantisation stores the
    # absmax in 8 bits with an fp32 scale per 256 of them: 4 + 8/64 + 32/(64*256) = 4.127 bits
    quant_type, double = m.BNB_4BIT[fmt]
    w = torch.randn(1024, 2048)
    p = bnb.nn.Params4bit(w, requires_grad=False, compress_statistics=double, quant_type=quant_type).to("cpu")
    bits = stored_bytes(p) * 8 / w.numel()
    assert bits == pytest.approx(storage_format(fmt).bits_per_value, rel=1e-9)


def test_lora_builds_a_16_bit_base_and_fp32_adapters_byte_for_byte() -> None:
    model, lines = built({"model": "llama-3.2-1b", "task": "lora", "precision": "bf16"})
    base = [p for p in model.parameters() if not p.requires_grad]
    adapters = [p for p in model.parameters() if p.requires_grad]
    assert {p.dtype for p in base} == {torch.bfloat16} and {p.dtype for p in adapters} == {torch.float32}
    assert sum(map(stored_bytes, base)) == lines["frozen base weights (bf16)"]
    assert sum(map(stored_bytes, adapters)) == lines["LoRA adapters"]
    # pure 16-bit training keeps the adapters like the model (torchtune)
    model, lines = built({"model": "llama-3.2-1b", "task": "lora", "master_weights": "none"})
    adapters = [p for p in model.parameters() if p.requires_grad]
    assert {p.dtype for p in adapters} == {torch.bfloat16}
    assert sum(map(stored_bytes, adapters)) == lines["LoRA adapters"]


@pytest.mark.parametrize("model_name", ["llama-3.2-1b", "qwen2.5-0.5b"])
def test_qlora_quantises_the_block_linears_and_keeps_the_rest_fp32(model_name: str) -> None:
    model, lines = built({"model": model_name, "task": "qlora", "lora_targets": "all-linear"})
    quantised = [mod for mod in model.modules() if isinstance(mod, bnb.nn.Linear4bit)]
    assert quantised and all(q.weight.quant_type == "nf4" and q.weight.compress_statistics for q in quantised)
    head = model.get_output_embeddings()
    assert not isinstance(head, bnb.nn.Linear4bit)  # the head stays unquantised (transformers' bnb default)
    base = [p for p in model.parameters() if not p.requires_grad]
    # PEFT's prepare_model_for_kbit_training casts embeddings, norms and head to fp32
    assert {p.dtype for p in base if not isinstance(p, bnb.nn.Params4bit)} == {torch.float32}
    # the estimator's frozen-base line counts the same bytes, but for each small matrix's last, partial
    # group of 256 block scales (4 bytes; and the 1 KiB code tables stored_bytes leaves out): nothing at 1B scale
    assert sum(map(stored_bytes, base)) == pytest.approx(lines["frozen base weights (nf4)"], rel=5e-4)
    adapters = [p for p in model.parameters() if p.requires_grad]
    assert sum(map(stored_bytes, adapters)) == lines["LoRA adapters"]


def test_int8_inference_is_llm_int8_with_the_estimators_weight_bytes() -> None:
    """load_in_8bit: every block linear a bitsandbytes Linear8bitLt (int8 weight, fp32 scale per output
    row, outlier threshold 6.0); the head and embeddings stay 16-bit. The estimator counts 1 byte per
    quantised weight and leaves out the row scales: 4 / in_features of that (0.2% at 2048 and wider)."""
    model, lines = built({"model": "llama-3.2-1b", "task": "inference", "weight_dtype": "int8"})
    int8 = [mod for mod in model.modules() if isinstance(mod, bnb.nn.Linear8bitLt)]
    assert int8 and all(q.weight.dtype == torch.int8 and q.state.threshold == 6.0 for q in int8)
    assert not isinstance(model.get_output_embeddings(), bnb.nn.Linear8bitLt)
    weights = sum(q.weight.numel() for q in int8)
    assert sum(q.weight.SCB.numel() for q in int8) == sum(q.out_features for q in int8)
    est = next(v for k, v in lines.items() if k.startswith("weights"))
    rest = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if p.dtype != torch.int8)
    assert weights + rest == pytest.approx(est, rel=1e-9)


def test_full_training_under_amp_keeps_fp32_parameters_and_pure_16_bit_does_not() -> None:
    model, lines = built({"model": "llama-3.2-1b", "task": "finetune", "precision": "bf16"})
    params = list(model.parameters())
    assert {p.dtype for p in params} == {torch.float32}  # AMP: the fp32 parameters are the master weights
    assert sum(map(stored_bytes, params)) == lines["master weights (fp32)"]
    model, lines = built({"model": "llama-3.2-1b", "task": "finetune", "master_weights": "none"})
    params = list(model.parameters())
    assert {p.dtype for p in params} == {torch.bfloat16}
    assert sum(map(stored_bytes, params)) == lines["weights (bf16)"]
    assert "master weights (fp32)" not in lines


@pytest.mark.parametrize(
    ("name", "cls"),
    [("adamw", "AdamW"), ("adamw-foreach", "AdamW"), ("sgd-momentum", "SGD"), ("adamw-8bit", "AdamW8bit")],
)
def test_the_workloads_optimizer_is_the_one_built(name: str, cls: str) -> None:
    w = make_workload({"model": "llama-3.2-1b", "task": "finetune", "optimizer": name})
    opt = m._optimizer(w, [torch.nn.Parameter(torch.zeros(4))], torch)
    assert type(opt).__name__ == cls
    if name == "adamw":
        assert opt.defaults["fused"] is True  # the estimator's "adamw" has no step temporaries
    if name == "adamw-foreach":
        assert opt.defaults["foreach"] is True and not opt.defaults["fused"]


@pytest.mark.parametrize(
    ("keys", "pattern"),
    [
        ({"task": "finetune", "zero": 3, "num_gpus": 2}, r"one GPU in one process"),
        ({"task": "finetune", "offload": "optimizer", "zero": 2}, r"no ZeRO/FSDP"),
        ({"task": "finetune", "precision": "fp8"}, r"fp8 training needs Transformer Engine"),
        ({"task": "finetune", "activation_checkpointing": "selective"}, r"whole layers"),
        ({"task": "finetune", "loss_impl": "chunked"}, r"loss_impl upcast"),
        ({"task": "finetune", "optimizer": "lion"}, r"'lion' optimizer"),
        ({"task": "qlora", "weight_dtype": "gptq"}, r"bitsandbytes"),
        ({"task": "inference", "engine": "vllm"}, r"engine=transformers"),
        ({"task": "inference", "weight_dtype": "awq"}, r"not 'awq'"),
        ({"task": "inference", "kv_dtype": "fp8"}, r"KV cache"),
    ],
)
def test_what_it_cannot_reproduce_is_refused_with_the_reason(keys: dict[str, Any], pattern: str) -> None:
    with pytest.raises(InvalidSettingError, match=pattern):
        m.measure(make_workload({"model": "llama-3.2-1b", **keys}), steps=2, device="cpu")


@pytest.mark.parametrize(
    "keys",
    [
        {"task": "qlora", "batch_size": 2, "seq_len": 32, "activation_checkpointing": "full"},
        {"task": "finetune", "batch_size": 2, "seq_len": 32, "precision": "fp16", "optimizer": "adamw-foreach"},
        {"task": "finetune", "batch_size": 2, "seq_len": 32, "precision": "tf32", "optimizer": "sgd"},
        {"task": "inference", "batch_size": 2, "input_len": 16, "output_len": 4, "weight_dtype": "nf4"},
        {"task": "inference", "batch_size": 1, "input_len": 16, "output_len": 4, "weight_dtype": "int8"},
    ],
)
def test_measure_runs_each_mode_on_the_cpu(keys: dict[str, Any]) -> None:
    rec = m.measure(make_workload({"model": "llama-3.2-1b", **keys}), steps=2, device="cpu")
    assert rec["tiny"] and (rec.get("step_time_s") or rec.get("ttft_s", 0)) > 0
    if keys["task"] == "inference":
        assert rec["workload"]["engine"] == "transformers"  # what ran, and what the estimate is made for
    assert torch.backends.cuda.matmul.allow_tf32 is False  # tf32 is switched back off afterwards


# --- our measurements as a validation category (planner/measured.py) -----------------------------


@pytest.mark.parametrize("name", sorted(n for n in presets() if n != "resnet-50"))
def test_every_presets_cpu_check_is_tiny(name: str) -> None:
    """The CPU check shrinks nested text/vision configs, experts and MLA ranks too: a 109B Llama 4
    used to be built at full size there (and killed for memory)."""
    cfg = m.config_dict(make_workload({"model": name, "task": "inference"}), tiny=True)
    assert model_from_config(cfg, name).total_params < 1_000_000


@pytest.mark.parametrize(
    ("model", "keys"),
    [
        ("llama-4-scout", {"task": "lora", "batch_size": 1, "seq_len": 16}),  # PEFT has no llama4_text entry
        # nor gpt_oss, which transformers builds with eager attention only
        ("gpt-oss-20b", {"task": "lora", "batch_size": 1, "seq_len": 16, "attention_impl": "eager"}),
        ("deepseek-v3", {"task": "inference", "input_len": 8, "output_len": 2}),  # MLA: kv heads = heads
        ("qwen3-30b-a3b", {"task": "finetune", "batch_size": 1, "seq_len": 16, "precision": "fp32"}),
    ],
)
def test_moe_and_multimodal_families_run_on_the_cpu(model: str, keys: dict[str, Any]) -> None:
    rec = m.measure(make_workload({"model": model, **keys}), steps=2, device="cpu")
    assert rec["tiny"] is True
    if keys["task"] == "lora":
        built_model = m._model(make_workload({"model": model, **keys}), "cpu", tiny=True)
        adapted = {n.split(".lora_A")[0].rsplit(".", 1)[-1] for n, _ in built_model.named_parameters() if "lora_A" in n}
        assert adapted == {"q_proj", "v_proj"}  # what the estimate counts (estimators/lora.py)


def test_an_architecture_without_sdpa_asks_for_eager_attention() -> None:
    with pytest.raises(InvalidSettingError, match="attention_impl: eager"):
        m.measure(make_workload({"model": "gpt-oss-20b", "task": "lora", "seq_len": 16}), steps=2, device="cpu")


def test_category_names() -> None:
    from gpuplan.planner.measured import category_for

    assert category_for("H200 SXM 141GB") == "measured-h200"
    assert category_for("H100 SXM5 80GB") == "measured-h100"
    assert category_for("GeForce RTX 4090") == "measured-rtx-4090"
    assert category_for("A100 PCIe 40GB") == "measured-a100"


def test_a_measured_report_is_validated_as_the_estimate_beside_each_run(tmp_path: Any) -> None:
    """The script's report -> measured-h200.csv -> gpuplan validate: each figure is read back into
    the run's own workload and predicted exactly as `measure` predicted it beside the run."""
    from gpuplan.interfaces import api
    from gpuplan.planner import measured

    runs = []
    for keys in (
        {"task": "lora", "batch_size": 4, "seq_len": 2048, "lora_targets": ["q_proj", "v_proj"]},
        {"task": "finetune", "batch_size": 2, "seq_len": 1024, "activation_checkpointing": "full", "grad_accum": 2},
        {"task": "qlora", "batch_size": 2, "seq_len": 512, "master_weights": "none"},
        {"task": "inference", "batch_size": 8, "input_len": 512, "output_len": 64},
    ):
        w = make_workload({"model": "llama-3.2-1b", **keys})
        rec = m.measure(w, steps=2, device="cpu")  # the record as the script stores it ...
        # ... with the figures a GPU adds (any values: this checks the reading, not the error)
        rec |= {"status": "ok", "gpu": "H200 SXM 141GB", "max_memory_allocated_bytes": 9.0 * 2**30,
                "max_memory_reserved_bytes": 10.0 * 2**30}  # fmt: skip
        rec |= {"step_time_s": 0.5} if w.is_training else {"ttft_s": 0.05, "tpot_s": 0.02}
        runs.append(rec)
    oom = {"status": "OutOfMemoryError", "gpu": "H200 SXM 141GB",
           "workload": {"model": "llama-3.1-70b", "task": "finetune", "batch_size": 8, "seq_len": 4096}}  # fmt: skip
    path = tmp_path / "measured-h200.csv"
    path.write_text(measured.csv_text({"runs": [*runs, oom]}), encoding="utf-8")

    rec = api.validate(path, category="measured-h200").to_dict()
    assert not rec["skipped"], rec["skipped"]
    assert {k: v["n"] for k, v in rec["summary"].items()} == {
        "measured-h200 (memory)": 8, "measured-h200 (time)": 5, "measured-h200 (fit verdicts)": 1}  # fmt: skip
    by_run: dict[int, list[dict[str, Any]]] = {}
    for r in rec["rows"]:
        by_run.setdefault(int(r["id"].split("-")[2]), []).append(r)
    for i, run in enumerate(runs, 1):
        w = make_workload(run["workload"]).with_(gpu="H200 SXM 141GB")
        est = api.estimate(w).to_dict()
        expect = {"peak_memory_allocated": est["memory"]["allocated_bytes"],
                  "peak_memory_reserved": est["memory"]["reserved_bytes"]}  # fmt: skip
        if w.is_training:
            expect["step_time_ms"] = est["time"]["step_time_s"] * 1e3
        else:
            expect |= {"time_to_first_token_ms": est["time"]["prefill_batch_s"] * 1e3,
                       "time_per_output_token_ms": est["time"]["tpot_s"] * 1e3}  # fmt: skip
        got = {r["metric"]: r["predicted"] for r in by_run[i]}
        assert got == pytest.approx(expect, rel=1e-9), (i, run["workload"])
    (verdict,) = by_run[5]
    assert verdict["unit"] == "fits" and verdict["published"] == 0.0 and verdict["predicted"] == 0.0  # 70B OOMs


def test_bundled_measured_files_are_found_by_name(tmp_path: Any) -> None:
    from gpuplan.planner.validation import measured_files

    for name in ("measured-h200.csv", "measured-rtx-4090.csv", "published.csv", "measured-h200.json"):
        (tmp_path / name).write_text("id\n", encoding="utf-8")
    assert measured_files(tmp_path) == ["measured-h200.csv", "measured-rtx-4090.csv"]
