"""fp8 training's scaling recipes (`fp8_recipe`): torchao.float8's dynamic recipes add their amax
and cast kernels (torchao's roofline model), rowwise runs its GEMMs below tensorwise and
rowwise_with_gw_hp keeps the weight gradient in bf16; Transformer Engine's delayed scaling (the
default) adds nothing, so no bundled row moves. Also the two shares that came with it: MI300X's
measured FlashAttention-2 at the whole-step share and torchao's int4 (tinygemm) GEMV streaming share."""

from __future__ import annotations

from typing import Any

import pytest

import gpuplan
from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import efficiency as eff
from gpuplan.estimators.perf import estimate_inference_time, estimate_training_time
from gpuplan.estimators.perf import training as perf_training
from gpuplan.planner.validation import bundled_rows, run_rows, stack_rows
from gpuplan.specs import frameworks
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import make_workload

# the torchao float8 README's training benchmarks: Llama3-8B in torchtitan on 8 GPUs, batch 1,
# sequence 8192, torch.compile, FSDP2, per-op SAC
# (pytorch/ao:torchao/float8/README.md@9519bebbc397d60274982a74c084f9dff18e61a6, 'Training benchmarks')
TORCHTITAN_8B: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "task": "pretrain",
    "num_gpus": 8,
    "seq_len": 8192,
    "batch_size": 1,
    "activation_checkpointing": "selective-op",
    "zero": 3,
    "sharding": "fsdp",
    "compile": True,
    "attention_impl": "sdpa",
}


def _step(catalog: Catalog, gpu: str, **keys: Any) -> float:
    w = make_workload({**TORCHTITAN_8B, "gpu": gpu, **keys})
    return estimate_training_time(load_model(w.model), w, catalog.get(gpu)).step_time_s


def test_tensorwise_cast_bytes_by_hand(catalog: Catalog) -> None:
    # Llama 3.1 8B, 8192 tokens: the linears' input widths per layer are q, k, v, o, gate, up 4096 and
    # down 14336 (38,912), over 32 layers, plus the head's 4096; their weights 218,103,808 a layer and
    # 4096 x 128256 for the head. Forward: 6 B per input element (amax 2, cast 2 + 2 x 1) and 5 B
    # per weight element (amax 2, cast 2 + 1) on the 1/8 shard FSDP's float8 all-gather sends.
    w = make_workload({**TORCHTITAN_8B, "gpu": "H100 SXM5 80GB", "precision": "fp8", "fp8_recipe": "tensorwise"})
    mo = perf_training.training_ops(load_model(w.model), w, catalog.get("H100 SXM5 80GB"))
    fwd = next(o for o in mo.fwd if o.name == "fp8 casts")
    weights = 32 * 218_103_808 + 4096 * 128256
    assert fwd.bytes == pytest.approx(6 * 8192 * (32 * 38912 + 4096) + 5 * weights / 8, rel=1e-12)
    # backward: 6 B per output-gradient element (widths 4096+1024+1024+4096+14336+14336+4096 = 43,008
    # a layer, 128,256 for the head) and the weights' second cast, 3 B
    bwd = next(o for o in mo.bwd if o.name == "fp8 casts")
    assert bwd.bytes == pytest.approx(6 * 8192 * (32 * 43008 + 128256) + 3 * weights / 8, rel=1e-12)
    # per-op SAC runs half the casts again with the half of the matmuls it recomputes
    rec = next(o for o in mo.recompute if o.name == "fp8 casts")
    assert rec.bytes == pytest.approx(0.5 * fwd.bytes, rel=1e-12)


def test_speedups_over_bf16_match_the_torchao_readme_on_h100(catalog: Catalog) -> None:
    # README, 'NVIDIA H100' table: bf16 6150, tensorwise with float8 all-gather 7689.5 (+25.03%),
    # rowwise with bf16 all-gather 6768 (+10.05%) median tokens/s
    bf16 = _step(catalog, "H100 SXM5 80GB", precision="bf16")
    tensorwise = _step(catalog, "H100 SXM5 80GB", precision="fp8", fp8_recipe="tensorwise")
    rowwise = _step(catalog, "H100 SXM5 80GB", precision="fp8", fp8_recipe="rowwise")
    assert bf16 / tensorwise == pytest.approx(7689.5 / 6150, rel=0.03)
    assert bf16 / rowwise == pytest.approx(6768 / 6150, rel=0.06)
    # without the cast kernels (Transformer Engine's delayed scaling) fp8 gains far more
    delayed = _step(catalog, "H100 SXM5 80GB", precision="fp8")
    assert bf16 / delayed > 1.3 > bf16 / tensorwise


def test_rowwise_with_gw_hp_runs_its_weight_gradient_in_bf16(catalog: Catalog) -> None:
    g = catalog.get("AMD Instinct MI300X")

    def wgrads(**keys: Any) -> dict[str, float]:
        w = make_workload({**TORCHTITAN_8B, "gpu": g.name, **keys})
        mo = perf_training.training_ops(load_model(w.model), w, g)
        return {o.name: o.time_s for o in mo.bwd if o.name.endswith("wgrad")}

    hp = wgrads(precision="fp8", fp8_recipe="rowwise_with_gw_hp")
    assert hp == pytest.approx(wgrads(precision="bf16"), rel=1e-12)
    rowwise = wgrads(precision="fp8", fp8_recipe="rowwise")
    assert all(rowwise[n] < hp[n] for n in hp)


def test_rowwise_gemms_run_at_a_share_of_tensorwise(catalog: Catalog) -> None:
    g = catalog.get("H100 SXM5 80GB")

    def gemm_flop_rate(recipe: str) -> float:
        w = make_workload({**TORCHTITAN_8B, "gpu": g.name, "precision": "fp8", "fp8_recipe": recipe})
        op = next(o for o in perf_training.training_ops(load_model(w.model), w, g).fwd if o.name.endswith("gate_proj"))
        return op.flops / op.time_s

    # compute-bound (8192 x 4096 x 14336): the rate scales with the share (pytorch/pytorch #147971)
    assert gemm_flop_rate("rowwise") / gemm_flop_rate("tensorwise") == pytest.approx(0.9, rel=0.01)


def test_fp8_recipe_needs_fp8_training() -> None:
    with pytest.raises(InvalidSettingError, match=r"fp8_recipe.*precision is bf16"):
        gpuplan.workload({**TORCHTITAN_8B, "precision": "bf16", "fp8_recipe": "rowwise"})
    with pytest.raises(InvalidSettingError, match="fp8_recipe"):
        gpuplan.workload({"model": "llama-3.1-8b", "task": "inference", "fp8_recipe": "rowwise"})
    assert gpuplan.workload({**TORCHTITAN_8B, "precision": "fp8", "fp8_recipe": "rowwise"}).fp8_recipe == "rowwise"


def test_torchtitan_framework_default_is_tensorwise() -> None:
    d = next(x for x in frameworks.frameworks()["torchtitan"].defaults if x.key == "fp8_recipe")
    assert d.value == "tensorwise" and "recipe_name" in d.source
    w = make_workload({**TORCHTITAN_8B, "precision": "fp8", "framework": "torchtitan"})
    assert w.fp8_recipe == "tensorwise"


def test_no_row_without_a_torchao_recipe_moves(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the recipe tables emptied, every row that does not name a torchao recipe (all bundled
    rows, every stack row but torchao-float8's fp8 ones) is predicted as before."""
    rows = [r for r in (*bundled_rows(), *stack_rows()) if "fp8_recipe=" not in r["workload"]]
    assert len(rows) > 500
    before, _ = run_rows(rows, catalog)
    monkeypatch.setattr(perf_training, "FP8_CAST_BYTES", {})
    monkeypatch.setattr(perf_training, "FP8_ROWWISE_GEMM_SHARE", float("nan"))
    after, _ = run_rows(rows, catalog)
    assert {r.id: r.predicted for r in after} == {r.id: r.predicted for r in before}


def test_mi300x_attention_is_its_measured_fa2_at_the_whole_step_share(catalog: Catalog) -> None:
    # ROCm/flash-attention issue #142 (MI300X, head dim 128, sequence 16384): forward 355.5 and
    # backward 206.7 TFLOP/s at best, of a 1,307.4 TFLOP/s peak; a whole step reaches 0.22/0.35 of
    # a best case, as FA2 on H100 does (0.22 of the peak against its best 0.35)
    h100, mi300x = catalog.get("H100 SXM5 80GB"), catalog.get("AMD Instinct MI300X")
    assert eff.attention_efficiency(h100) == pytest.approx(0.22, rel=1e-9)
    fwd = eff.attention_efficiency(mi300x)
    assert fwd == pytest.approx(355.5 / 1307.4 * 0.22 / 0.35, rel=1e-9)
    assert eff.attention_efficiency(mi300x, backward=True) / fwd == pytest.approx(206.7 / 355.5, rel=1e-9)
    # the other CDNA parts, unmeasured, take H100's best case at the same step share
    mi250x = catalog.get("MI250X")
    assert eff.attention_efficiency(mi250x) == pytest.approx(0.34 * 0.22 / 0.35, rel=1e-9)


def test_torchao_int4_decode_streams_below_int8(catalog: Catalog) -> None:
    # gpt-fast README (pytorch-labs/gpt-fast, 'Benchmarks', A100-80GB at 330 W): Llama-2-7B int8
    # 155.58 tok/s, int4 (G=32) 196.80 tok/s
    g = catalog.get("A100 SXM4 80GB")
    base = {"model": "llama-2-7b", "task": "inference", "batch_size": 1, "input_len": 5, "output_len": 200,
            "compile": True, "gpu": g.name}  # fmt: skip

    def tok_s(dtype: str) -> float:
        w = make_workload({**base, "weight_dtype": dtype})
        return 1.0 / estimate_inference_time(load_model(w.model), w, g).tpot_s

    assert tok_s("int4-g32") == pytest.approx(196.80, rel=0.10)
    assert tok_s("int4-g32") / tok_s("int8") == pytest.approx(196.80 / 155.58, rel=0.06)


def test_fp8_training_on_a_card_without_fp8_is_refused_before_memory(catalog: Catalog) -> None:
    # QA F10: a 141.75 GiB fp8 pretrain on one A100 used to get a memory verdict ("62.95 GiB short")
    # and fixes that all kept fp8 on the A100; the card's units, not its memory, rule it out
    job: dict[str, Any] = {"model": "llama-3.1-8b", "task": "pretrain", "precision": "fp8"}
    with pytest.raises(InvalidSettingError, match=r"fp8 training needs FP8 tensor cores; A100 SXM4 80GB has none"):
        gpuplan.estimate(job, gpu="A100")
    with pytest.raises(InvalidSettingError, match=r"A100 SXM4 80GB has none"):
        gpuplan.fit(job, gpu="A100", num_gpus=8, zero=3)  # would fit in memory (33 GiB per GPU)
    # on an H100 the same job does not fit; every verified fix runs fp8 on a card that has it
    r = gpuplan.estimate(job, gpu="H100")
    assert not r.verdict.fits and len(r.verdict.fixes) >= 3
    # fp8 training keeps 16-bit weights (cast per GEMM): the row says bf16, 8.03B x 2 B
    assert r.memory.breakdown["weights (bf16)"] == 8_030_261_248 * 2
    for f in r.verdict.fixes:
        assert "precision" not in f.changes and catalog.get(f.gpu).supports("fp8"), f.gpu
        applied = gpuplan.estimate({**job, "gpu": "H100", **f.changes})  # each fix runs as it says
        assert applied.verdict.fits and applied.time is not None, f.label


def test_plan_and_fit_name_the_missing_fp8_units() -> None:
    job: dict[str, Any] = {"model": "llama-3.1-8b", "task": "pretrain", "precision": "fp8"}
    p = gpuplan.plan(job, gpus=["A100", "H100"])
    assert isinstance(p, gpuplan.Plan)
    a100 = [o for o in p.options if o.gpu == "A100 SXM4 80GB"]
    assert len(a100) == 4 and all(not o.fits and o.bottleneck == "unsupported precision" for o in a100)
    assert isinstance(a100[0], gpuplan.PlanOption) and a100[0].verdict.limit == "precision"
    assert a100[0].why == "fp8 training needs FP8 tensor cores; A100 SXM4 80GB has none"
    assert any(o.fits for o in p.options if o.gpu == "H100 SXM5 80GB")
    t = gpuplan.fit(job)
    assert isinstance(t, gpuplan.FitTable)
    assert {"A100 SXM4 80GB", "V100 SXM2 32GB", "GeForce RTX 3090"} <= set(t.cannot_run)
    assert "H100 SXM5 80GB" not in t.cannot_run and "H100 SXM5 80GB" in {row.gpu for row in t.gpus}
    assert not {row.gpu for row in t.gpus} & set(t.cannot_run)
