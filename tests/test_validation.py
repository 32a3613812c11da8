"""Validation: rows are read from their prose (the converter a user's file goes through), compared on
what they measured, and summarised. The bundled rows' explicit columns: tests/test_validation_columns.py."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpuplan.errors import InvalidSettingError
from gpuplan.planner.validation import bundled_rows, file_rows, run_rows, summary
from gpuplan.planner.validation_columns import Row
from gpuplan.planner.validation_prose import resolve_gpu, resolve_model, row_workload
from gpuplan.planner.validation_prose_speed import speed_workload
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.models import load_model

HEADER = "id,category,source,source_ref,model,params_b,gpu,num_gpus,precision,task,seq_len,batch,extra_config,metric,value,unit,notes"


def _row(**kw: str) -> Row:
    base = dict.fromkeys(HEADER.split(","), "")
    base.update(kw)
    return Row(base)


def test_shared_torchtune_row_is_read_faithfully() -> None:
    row = _row(
        id="X", category="memory", source="torchtune README memory and speed table", model="Llama-3.1-8B",
        gpu="RTX 4090 24GB", num_gpus="1", precision="bf16", task="finetune (QLoRA (NF4 base))",
        seq_len="2048 (packed)", batch="2 per device (no grad accum)",
        extra_config="torch.compile on; packed dataset seq 2048; batch 2; 8B_qlora_single_device: rank 8; "
        "activation checkpointing",
        metric="peak_gpu_memory_per_gpu", value="7.4", unit="GiB",
    )  # fmt: skip
    w = row_workload(row, load_model("llama-3.1-8b"))
    assert w["task"] == "qlora" and w["lora_rank"] == 8 and w["batch_size"] == 2 and w["seq_len"] == 2048
    assert w["activation_checkpointing"] == "full" and w["compile"] is True
    assert w["master_weights"] == "none" and w["loss_impl"] == "chunked"  # torchtune's recipes
    assert "grad_accum" not in w


def test_keywords_for_offload_optimizers_and_explicit_keys() -> None:
    m = load_model("bloomz-7b1")
    w = row_workload(
        _row(task="causal LM finetune (LoRA + DeepSpeed ZeRO-3 CPU offload)", seq_len="64", batch="8",
             precision="fp32 weights (no AMP)", extra_config="LoRA r=8; ZeRO-3 CPU offload; lora_targets=query_key_value"),
        m,
    )  # fmt: skip
    assert w["zero"] == 3 and w["offload"] == "optimizer+params" and w["sharding"] == "deepspeed"
    assert w["precision"] == "fp32" and w["lora_targets"] == ["query_key_value"]
    w2 = row_workload(_row(task="full finetune", seq_len="512", batch="1",
                           extra_config="8-bit AdamW; gradient checkpointing; CUDA 11.2"), m)  # fmt: skip
    assert w2["optimizer"] == "adamw-8bit" and w2["activation_checkpointing"] == "full"
    assert w2["cuda_lazy_loading"] is False and w2["grads_set_to_none"] is False


def test_dle_bert_squad_runs_eager_attention_and_its_pretraining_does_not() -> None:
    """DeepLearningExamples' BERT materialises the attention scores (modeling.py BertSelfAttention);
    run_squad.py runs it eagerly, run_pretraining.py scripts it with NVFuser (torch.jit.script)."""
    m = load_model("bert-large")
    squad = _row(source="NVIDIA DeepLearningExamples PyTorch BERT-large SQuAD fine-tuning", model="bert-large",
                 task="finetune (full; SQuAD v1.1)", seq_len="384", batch="32", precision="AMP (fp16)")  # fmt: skip
    assert row_workload(squad, m)["attention_impl"] == "eager"
    lambda_fork = _row(source="Lambda deeplearning-benchmark (PyTorch NGC; DLE models)", model="bert-large",
                       task="finetune (full; SQuAD v1.1)", seq_len="384", batch="16", precision="AMP (fp16)",
                       extra_config="Lambda fork of NVIDIA DeepLearningExamples; DLE BERT run_squad.sh train")  # fmt: skip
    assert row_workload(lambda_fork, m)["attention_impl"] == "eager"
    pretrain = _row(source="NVIDIA DeepLearningExamples PyTorch BERT-large pretraining", model="bert-large",
                    task="pretraining (phase 1; MLM+NSP)", seq_len="128", batch="256", precision="AMP (fp16)")  # fmt: skip
    assert "attention_impl" not in row_workload(pretrain, m)
    other = _row(source="a SQuAD fine-tuning blog", model="bert-large", task="finetune (SQuAD)", seq_len="384",
                 batch="8", precision="fp16")  # fmt: skip
    assert "attention_impl" not in row_workload(other, m)


def test_grouped_int4_counts_its_scales_and_zeros() -> None:
    """gpt-fast's int4 (groupsize 32) stores a bf16 scale and zero per 32 weights: 5 bits a weight."""
    m = load_model("llama-2-7b")
    row = _row(source="gpt-fast README benchmarks (batch-1 decode)", model="llama-2-7b", task="single-stream decode",
               seq_len="in=5; out=200", batch="1", precision="bf16 activations; int4 weight-only (groupsize 32)",
               extra_config="torch.compile; task=inference; weight_dtype=int4; compile=true")  # fmt: skip
    assert row_workload(row, m)["weight_dtype"] == "int4-g32"
    plain = _row(model="llama-2-7b", task="inference", seq_len="128", batch="1", precision="int4 (q4f16_1)")
    assert row_workload(plain, m)["weight_dtype"] == "int4"


def test_fp8_rows_that_quantise_weights_and_kv_read_both() -> None:
    """TensorRT-LLM v0.12's perf overview: "quantization FP8 where listed (weights+KV)". An fp8 row
    gets an fp8 KV cache; an fp16 row of the same table keeps its 16-bit one."""
    m = load_model("llama-3.1-8b")
    text = "TP=1; trtllm-bench throughput; quantization FP8 where listed (weights+KV)"
    fp8 = _row(model="llama-3.1-8b", task="offline max-throughput serving (input 128; output 2048)",
               seq_len="in=128; out=2048", batch="max", precision="fp8", extra_config=text)  # fmt: skip
    w = speed_workload(fp8.fields, row_workload(fp8, m), m)
    assert w["weight_dtype"] == "fp8" and w["kv_dtype"] == "fp8"
    fp16 = _row(model="llama-3.1-8b", task="offline max-throughput serving (input 128; output 2048)",
                seq_len="in=128; out=2048", batch="max", precision="fp16 (mixed)", extra_config=text)  # fmt: skip
    assert "kv_dtype" not in speed_workload(fp16.fields, row_workload(fp16, m), m)


def test_a_row_that_ran_uncompiled_stays_eager() -> None:
    """torchtitan's Table 1 'FSDP' row: compile=false, noted '(no torch.compile; no Float8)'."""
    m = load_model("llama-3.1-8b")
    row = _row(source="torchtitan performance benchmarks (PyTorch)", model="llama-3.1-8b", task="pretraining",
               seq_len="8192", batch="global=16 seqs", precision="bf16", num_gpus="8",
               extra_config="FSDP; TP=1; micro_batch=2; global_batch=16; compile=false; act_ckpt=selective",
               notes="Row 'FSDP' (no torch.compile; no Float8).")  # fmt: skip
    w = speed_workload(row.fields, row_workload(row, m), m)
    assert w["compile"] is False
    compiled = _row(**{**row.fields, "extra_config": "FSDP; TP=1; micro_batch=2; torch.compile", "notes": ""})
    assert speed_workload(compiled.fields, row_workload(compiled, m), m)["compile"] is True


def test_cnn_rows_read_their_memory_format() -> None:
    """DeepLearningExamples' ConvNets main.py defaults to --memory-format nchw (its configs.yml sets
    nhwc for AMP): a row giving the command line without nhwc ran NCHW; one saying NHWC did not."""
    m = load_model("resnet-50")
    lam = _row(source="Lambda deeplearning-benchmark (PyTorch NGC; DLE models)", model="resnet-50",
               task="pretraining", seq_len="224x224 images", batch="1280 per GPU", precision="AMP (fp16)",
               num_gpus="1", extra_config="Lambda fork of NVIDIA DeepLearningExamples; DLE ConvNets main.py "
               "--amp --data-backend synthetic --prof 100; batch_size=1280")  # fmt: skip
    assert speed_workload(lam.fields, row_workload(lam, m), m)["channels_last"] is False
    dle = _row(**{**lam.fields, "precision": "AMP (fp16 autocast; NHWC; static loss scale 128)"})
    assert "channels_last" not in speed_workload(dle.fields, row_workload(dle, m), m)
    said = _row(**{**lam.fields, "extra_config": "torchvision reference train.py; NCHW"})
    assert speed_workload(said.fields, row_workload(said, m), m)["channels_last"] is False
    plain = _row(**{**lam.fields, "extra_config": "torchvision reference train.py"})
    assert "channels_last" not in speed_workload(plain.fields, row_workload(plain, m), m)
    # an LLM row's command line is not a memory format
    llm = load_model("llama-3.1-8b")
    other = _row(**{**lam.fields, "model": "llama-3.1-8b", "seq_len": "2048", "batch": "8"})
    assert "channels_last" not in speed_workload(other.fields, row_workload(other, llm), llm)


def test_nemo_rows_run_transformer_engine_attention() -> None:
    """NeMo's recipes attend through Transformer Engine (cuDNN fused attention on Hopper)."""
    m = load_model("llama-3.1-8b")
    row = _row(source="NVIDIA NeMo Framework performance summary (24.07)", model="llama-3.1-8b",
               task="pretraining", seq_len="8192", batch="global=128 seqs", precision="bf16", num_gpus="8",
               extra_config="TP=1; PP=1; CP=2; micro_batch=1; global_batch=128")  # fmt: skip
    assert speed_workload(row.fields, row_workload(row, m), m)["attention_impl"] == "fa3"
    other = _row(**{**row.fields, "source": "torchtitan performance benchmarks (PyTorch)"})
    assert "attention_impl" not in speed_workload(other.fields, row_workload(other, m), m)


def test_trt_llm_v061_tables_are_per_gpu(catalog: Catalog) -> None:
    """TensorRT-LLM's v0.6.1 doc headed its A100 table 'out tok/s'; the next revision of the same
    data heads it 'out tok/s/GPU', so a TP=2 row is compared per GPU (half the total)."""
    row = _row(id="T", category="inference", source="NVIDIA TensorRT-LLM performance doc (v0.6.1; static batching)",
               source_ref="NVIDIA/TensorRT-LLM:docs/source/performance.md@138f96d45f90b9667426f7c47297d8c06bafac73",
               model="llama-2-7b", gpu="A100-SXM4-80GB", num_gpus="2", precision="fp16",
               task="offline generation (input 2048; output 2048)", seq_len="in=2048; out=2048", batch="64",
               extra_config="TP=2; batch=64; TRT-LLM gptSessionBenchmark static batching",
               metric="output_token_throughput", value="782", unit="output tokens/s")  # fmt: skip
    (per_gpu,), _ = run_rows([row], catalog)
    (total,), _ = run_rows([_row(**{**row.fields, "source_ref": "elsewhere"})], catalog)
    assert per_gpu.predicted == pytest.approx(total.predicted / 2, rel=1e-9)


def test_fp4_rows_name_their_block_format() -> None:
    """A bare "FP4" on a serving row is NVFP4 (TensorRT-LLM / ModelOpt); bitsandbytes' FP4 stays fp4."""
    m = load_model("llama-3.1-70b")
    base = dict(model="llama-3.1-70b", gpu="B200", num_gpus="1", task="offline serving", seq_len="128",
                batch="8", metric="output_token_throughput", value="1", unit="output tokens/s")  # fmt: skip
    for prec, extra, want in (
        ("FP4", "", "nvfp4"),
        ("fp4 (NVFP4 ModelOpt checkpoint)", "", "nvfp4"),
        ("MXFP4 experts", "", "mxfp4"),
        ("fp4", "transformers bitsandbytes load_in_4bit", "fp4"),
    ):
        row = _row(**base, precision=prec, extra_config=extra)
        assert row_workload(row, m)["weight_dtype"] == want, prec


def test_bundled_validation_runs_every_memory_row(catalog: Catalog) -> None:
    rows = bundled_rows()
    results, skipped = run_rows(rows, catalog)
    memory_rows = [r for r in rows if r["category"] == "memory"]
    assert len(memory_rows) >= 45
    mem_results = [r for r in results if r.category == "memory"]
    assert len(mem_results) + len([s for s in skipped if s.category == "memory"]) == len(memory_rows)
    assert all(math.isfinite(r.error) for r in results)
    # the only memory rows left out are the Stable Diffusion ones (no UNet model)
    assert {s.id for s in skipped if s.category == "memory"} == {"PEFT-010", "PEFT-011", "PEFT-012"}
    s = summary(results)
    assert s["memory"]["n"] >= 40
    # regression guard, well above the reported figure (see README): catches a broken term
    assert s["memory"]["median_abs_error"] < 0.10
    assert s["memory (fit verdicts)"]["mean_abs_error"] == 0  # OOM rows predicted OOM


def test_units_and_what_was_measured(catalog: Catalog) -> None:
    row = _row(id="U", category="memory", model="llama-2-7b", gpu="A100 40GB", num_gpus="1", precision="bf16",
               task="inference", seq_len="6", batch="1", extra_config="output_len=50", metric="max_memory_allocated",
               value="13.52", unit="GB")  # fmt: skip
    (r,), _ = run_rows([row], catalog)
    assert r.measured_as == "allocated" and r.published == 13.52e9
    smi = _row(**{**row.fields, "notes": "nvidia-smi", "value": "13000", "unit": "MiB"})
    (r2,), _ = run_rows([smi], catalog)
    assert r2.measured_as == "device" and r2.published == 13000 * 2**20 and r2.predicted > r.predicted


def test_bad_files(tmp_path: Path) -> None:
    f = tmp_path / "m.csv"
    f.write_text("a,b\n1,2\n")
    with pytest.raises(InvalidSettingError, match="missing column"):
        file_rows(f)
    with pytest.raises(InvalidSettingError, match="No measurement file"):
        file_rows(tmp_path / "none.csv")


@pytest.mark.parametrize(
    ("gpu", "name"),
    [
        ("A100 (80GB assumed)", "A100 SXM4 80GB"),
        ("RTX 4090 24GB", "GeForce RTX 4090"),
        ("8x A100 80GB", "A100 SXM4 80GB"),
        ("H100-SXM-80GB", "H100 SXM5 80GB"),
        ("A100-40GB", "A100 SXM4 40GB"),
    ],
)
def test_gpu_names_in_rows(catalog: Catalog, gpu: str, name: str) -> None:
    assert resolve_gpu(gpu, catalog).name == name


def test_model_names_in_rows() -> None:
    assert resolve_model("Llama 3.1 8B").name == "llama-3.1-8b"
    assert resolve_model("bigscience/mt0-xxl (mT5-XXL enc-dec)").name == "mt0-xxl"
    with pytest.raises(InvalidSettingError, match="not a bundled preset"):
        resolve_model("CompVis/stable-diffusion-v1-4 (UNet)")


@pytest.mark.parametrize(
    ("name", "preset"),
    [
        ("LLAMA3-70B", "llama-3.1-70b"),  # NeMo tables: Llama 3 and 3.1 share the 70B shape
        ("Meta-Llama-3-8B-Instruct", "llama-3.1-8b"),
        ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b"),
        ("Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
        ("llama 7B", "llama-2-7b"),  # llama-bench's name for the LLaMA/Llama 2 7B shape
        ("Vicuna-13B", "llama-2-13b"),
        ("Qwen2-72B", "qwen2.5-72b"),
        ("BLOOM-7B1", "bloomz-7b1"),
    ],
)
def test_names_in_rows_find_their_preset(name: str, preset: str) -> None:
    from gpuplan.planner.named_models import named_model

    m = named_model(name)
    assert m is not None and m.name == preset


def test_family_shapes_by_name_have_their_published_sizes() -> None:
    """Shapes from NeMo's recipes and the LLaMA paper, counted by the config.json reader: totals
    within 1% of the size in the name (GPT-3 175B: Brown et al. 2020 table 2.1 = 175.0B; LLaMA-65B
    = 65.2B in Touvron et al. 2023 table 2; Mixtral 8x22B = 141B in Mistral's announcement)."""
    from gpuplan.planner.named_models import named_model

    for name, billions in (("GPT3-175B", 175.0), ("GPT3-20B", 20.3), ("LLaMA-65B", 65.2), ("Mixtral 8x22B", 141.0)):
        m = named_model(name)
        assert m is not None
        assert m.total_params / 1e9 == pytest.approx(billions, rel=0.01)
    assert named_model("Mixtral 8x22B").num_experts == 8  # type: ignore[union-attr]
    assert named_model("CompVis/stable-diffusion-v1-4") is None


def test_megatron_deepspeed_hardware_tflops_count_the_recompute(catalog: Catalog) -> None:
    """BigScience's BLOOM log counts TFLOP/s with the '4*2 co-efficient' (the recompute forward
    included): the row is compared in the same units, 96 B s l h^2 (1 + s/6h + V/16lh)."""
    row = next(r for r in bundled_rows() if r["id"] == "BLOOM-001")
    (r,), _ = run_rows([row], catalog)
    assert r.workload["tp"] == 4 and r.workload["pp"] == 12
    assert abs(r.error) < 0.15  # -20% when compared with model FLOPs (no recompute)
