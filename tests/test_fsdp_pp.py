"""ZeRO-3 (FSDP2) with pipeline parallelism under torchtitan: the layout search tries it, the
estimators model it as torchtitan runs it, and the torchtitan TOML writes it.

torchtitan's apply_fsdp sets reshard_after_forward=False when PP is enabled ("to avoid per-microbatch
all-gathers"; pytorch/torchtitan:torchtitan/models/llama3/infra/parallelize.py@81c1243395b46ce693a0681cfe1bb20e9b9433fb),
and torch.distributed.pipelining's stage disables reshard_after_backward and gradient sync until
the last micro-batch's backward (torch/distributed/pipelining/stage.py backward_maybe_with_nosync):
each stage is all-gathered once and reduce-scattered once per step, and holds its parameters
gathered and its gradients unsharded (fp32, FSDP2's reduce dtype: _fsdp_param.py
to_accumulated_grad_if_needed) through the micro-batches. DeepSpeed and Megatron-LM/NeMo do not
combine ZeRO-2/3 with pipelines, so their searches still reject it.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import comm
from gpuplan.estimators.memory import estimate_memory
from gpuplan.estimators.parallel import compose
from gpuplan.estimators.perf import estimate_training_time, training_ops
from gpuplan.interfaces import api
from gpuplan.planner.layouts import _enumerate, _parallel_axes, search_layouts
from gpuplan.specs.cluster import parse_cluster
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import Workload

EXAMPLE = str(Path(__file__).parent.parent / "examples" / "pretrain-70b-cluster.yaml")
GIB = 2**30
DP_OP = "data-parallel gradients/parameters exposed"


def _layout(framework: str | None) -> Workload:
    """Llama 2 70B on 64 x 8 H100 as TP8 PP4 DP16 ZeRO-3, micro-batch 1 x 64 (global batch 1024)."""
    keys = {"tp": 8, "pp": 4, "zero": 3, "batch_size": 1, "activation_checkpointing": "selective"}
    return api.build_workload(EXAMPLE, {**keys, **({"framework": framework} if framework else {})})


def _dp_exposed(w: Workload) -> float:
    cl = parse_cluster(str(w.cluster), api.catalog())
    t = estimate_training_time(load_model(str(w.model)), w.with_(cluster=None), cl.gpu, cl)
    return sum(o.time_s for o in t.ops if o.name == DP_OP)


def test_torchtitan_gathers_each_stage_once_per_step() -> None:
    """Per micro-batch re-gathering (the framework-less ZeRO-3 model) costs 15.8 s of a step on this
    layout; torchtitan's one gather (prefetched behind the first micro-batch's forward) and one
    reduce-scatter (after the last backward, exposed) cost 0.25 s, measured on this tree."""
    tt, bare = _dp_exposed(_layout("torchtitan")), _dp_exposed(_layout(None))
    assert tt == pytest.approx(0.253, rel=0.03)
    assert bare == pytest.approx(15.8, rel=0.03)
    # the torchtitan figure is the composition's: exposed(gather, first forward) + reduce-scatter
    w = _layout("torchtitan")
    cl = parse_cluster(str(w.cluster), api.catalog())
    p = training_ops(load_model("llama-2-70b"), w, cl.gpu).profile
    dpc, mp = w.dp * w.cp, w.tp * w.pp
    k = comm.members_per_node(cl, dpc, w.tp)
    ag = comm.gather(cl, dpc, k, p.dense_params / mp * p.param_b) + comm.gather(cl, dpc, k, 0.0)
    rs = comm.gather(cl, dpc, k, p.dense_trainable / mp * p.grad_b) + comm.gather(cl, dpc, k, 0.0)
    share = 1.0 / w.pp  # 80 layers over 4 stages
    want = comm.exposed(ag, p.layer_fwd_s * share) + rs
    for m in (8, 64):  # once per step: the same for any number of micro-batches
        parts = compose(p, cl, w.tp, w.cp, w.ep, w.pp, w.vp, w.dp, 3, m, "fsdp", True)
        assert float(parts.dp) == pytest.approx(float(want), rel=1e-9)
    per_micro = [float(compose(p, cl, w.tp, w.cp, w.ep, w.pp, w.vp, w.dp, 3, m, "fsdp").dp) for m in (8, 64)]
    assert per_micro[1] > 7 * per_micro[0]  # the per-micro-batch model grows with the micro-batches


def test_torchtitan_holds_the_stage_gathered_and_its_gradients_unsharded() -> None:
    """Forward/backward: the stage's 16-bit parameters gathered (N x 2 B / (tp x pp)) and its fp32
    gradients unsharded (N x 4 B / (tp x pp)); the optimizer step: resharded (no gathered line)."""
    model = load_model("llama-2-70b")
    w = _layout("torchtitan")
    mem = estimate_memory(model, w.with_(cluster=None, num_gpus=512), api.catalog().get("H100"))
    lines = {x.name: x.bytes for x in mem.lines}
    assert mem.peak_phase == "forward/backward"
    assert lines["gathered parameters"] == pytest.approx(model.total_params * 2.0 / 32, rel=1e-9)
    assert lines["gathered parameters"] / GIB == pytest.approx(4.01, abs=0.01)
    assert lines["gradients"] == pytest.approx(model.total_params * 4.0 / 32, rel=1e-9)
    assert lines["gradients"] / GIB == pytest.approx(8.03, abs=0.01)
    bare = estimate_memory(model, _layout(None).with_(cluster=None, num_gpus=512), api.catalog().get("H100"))
    bare_lines = {x.name: x.bytes for x in bare.lines}
    assert bare_lines["gathered parameters"] < lines["gathered parameters"] / 10  # two layers, not 20
    assert bare_lines["gradients"] == pytest.approx(model.total_params * 2.0 / 512, rel=1e-9)  # sharded
    # the step phase drops the gathered stage and the unsharded gradients: 12 GiB less at least
    assert mem.phases["forward/backward"] - mem.phases["optimizer step"] > 12.0 * GIB


@pytest.mark.parametrize("framework", [None, "megatron", "deepspeed"])
def test_other_searches_still_reject_zero3_with_pipelines(framework: str | None) -> None:
    """DeepSpeed refuses ZeRO-2/3 with its pipeline engine; Megatron-LM/NeMo have only ZeRO-1."""
    keys = {"framework": framework} if framework else {}
    w = api.build_workload(EXAMPLE, keys)
    model, cl = load_model("llama-2-70b"), parse_cluster("64x8:H100", api.catalog())
    rejected: Counter[str] = Counter()
    pinned, tps, cps, eps = _parallel_axes(model, w, cl, False, rejected)
    kept, _ = _enumerate(cl.num_gpus, 1024, 80, pinned, (tps, cps, eps), rejected)
    for *_, ok, _mb, pp_g, _vp, _dp, _m, z_g in kept:
        assert not np.any(ok & (z_g >= 2) & (pp_g > 1))
    assert rejected["ZeRO-2/3 with pipeline parallelism, or ZeRO without data parallelism"] > 3000
    best = search_layouts(model, w, cl, top=5).best
    assert best and not any(r.layout.zero >= 2 and r.layout.pp > 1 for r in best)


def test_torchtitan_search_finds_fsdp_with_pipelines_and_launch_writes_it() -> None:
    """64 x 8 H100, Llama 2 70B: the torchtitan search ranks FSDP + PP layouts among its best (vp 1 or
    2, what its looped schedules run without pipeline_parallel_layers_per_stage), within 3% of the
    fastest (FSDP with context parallelism: 128 micro-batches of 1 pay more kernel issue), and `launch`
    writes such a layout's [parallelism] with torchtitan's JobConfig names."""
    from test_frameworks import TORCHTITAN_FIELDS  # pytest puts tests/ on sys.path (no __init__.py)

    w = api.build_workload(EXAMPLE, {"framework": "torchtitan"})
    model, cl = load_model("llama-2-70b"), parse_cluster("64x8:H100", api.catalog())
    res = search_layouts(model, w, cl, top=10)
    fsdp_pp = [r for r in res.best if r.layout.zero == 3 and r.layout.pp > 1]
    assert fsdp_pp and all(r.layout.vp <= 2 for r in res.best)
    assert fsdp_pp[0].time.tokens_per_s > 0.97 * res.best[0].time.tokens_per_s
    top = res.best[0].layout
    assert top.zero == 3 and (top.tp, top.pp, top.cp, top.dp) == (1, 1, 2, 256)  # measured on this tree
    assert api.launch(EXAMPLE, "", {"framework": "torchtitan"}).layout == top.label
    best = fsdp_pp[0].layout
    assert (best.tp, best.pp, best.vp, best.cp, best.dp) == (2, 8, 2, 4, 8)
    pinned = {"framework": "torchtitan", "tp": 2, "pp": 8, "vp": 2, "cp": 4, "zero": 3}
    pinned |= {"sequence_parallel": best.sequence_parallel, "activation_checkpointing": best.checkpointing}
    pinned |= {"batch_size": best.micro_batch}
    rec = api.launch(EXAMPLE, "", pinned)
    assert rec.format == "torchtitan" and rec.layout == best.label
    doc = tomllib.loads(rec.text)
    for section, table in doc.items():
        assert section in TORCHTITAN_FIELDS and set(table) <= TORCHTITAN_FIELDS[section], section
    par, tr = doc["parallelism"], doc["training"]
    assert par == {
        "data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1, "tensor_parallel_degree": 2,
        "pipeline_parallel_degree": 8, "context_parallel_degree": 4, "expert_parallel_degree": 1,
        "pipeline_parallel_schedule": "Interleaved1F1B", "pipeline_parallel_microbatch_size": best.micro_batch,
        "fsdp_reshard_after_forward": "default",
    }  # fmt: skip
    # the local batch holds the step's micro-batches (n_microbatches = local_batch_size // microbatch size)
    assert tr["local_batch_size"] == best.micro_batch * best.micro_batches == 128
    assert tr["global_batch_size"] == tr["local_batch_size"] * best.dp == 1024


def test_torchtitan_toml_pipeline_keys_and_refusals() -> None:
    """1F1B for vp 1; a vp torchtitan's default split does not run is refused in one line."""
    keys = {"framework": "torchtitan", "tp": 8, "pp": 4, "zero": 3, "batch_size": 2}
    doc = tomllib.loads(api.launch(EXAMPLE, "", keys).text)
    assert doc["parallelism"]["pipeline_parallel_schedule"] == "1F1B"
    assert doc["parallelism"]["pipeline_parallel_microbatch_size"] == 2
    assert doc["training"]["local_batch_size"] == 2 * 1024 // (2 * 16)  # mb x micro-batches per DP rank
    with pytest.raises(InvalidSettingError, match="2 virtual stages per rank"):
        api.launch(EXAMPLE, "", {**keys, "vp": 4})
