"""Clusters, collectives, the composed training step and the layout search (issue 5)."""

from __future__ import annotations

import contextlib
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.errors import GpuplanError, InvalidSettingError, UnknownGPUError
from gpuplan.estimators import comm
from gpuplan.estimators.memory import estimate_memory
from gpuplan.estimators.parallel import compose
from gpuplan.estimators.perf import estimate_training_time, training_ops, with_checkpointing
from gpuplan.interfaces import api
from gpuplan.planner.layouts import FRAMEWORK_ZERO_STAGES, SearchResult, search_layouts
from gpuplan.specs.cluster import FABRICS, implied_cluster, parse_cluster
from gpuplan.specs.gpu import GB, Catalog
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import Workload, make_workload

# --- clusters -------------------------------------------------------------------------------------


def test_cluster_parse(catalog: Catalog) -> None:
    cl = parse_cluster("16x8:H100", catalog)
    assert (cl.nodes, cl.gpus_per_node, cl.num_gpus) == (16, 8, 128)
    assert cl.gpu.name == "H100 SXM5 80GB"
    assert cl.fabric.name == "ib-ndr"  # Hopper's reference fabric (DGX H100: ConnectX-7 NDR)
    assert parse_cluster("2x8:A100:roce", catalog).fabric.name == "roce"
    assert parse_cluster("8:A100", catalog).nodes == 1
    assert parse_cluster("4x2:RTX 4090:10gbe", catalog).fabric.name == "ethernet-10g"


def test_cluster_errors(catalog: Catalog) -> None:
    with pytest.raises(InvalidSettingError, match="NODESxGPUS_PER_NODE"):
        parse_cluster("H100", catalog)
    with pytest.raises(UnknownGPUError, match="Unknown GPU"):
        parse_cluster("2x8:H1000", catalog)
    with pytest.raises(InvalidSettingError, match="Unknown interconnect 'infiniband-x'"):
        parse_cluster("2x8:H100:infiniband-x", catalog)
    with pytest.raises(InvalidSettingError, match="at most 16"):
        parse_cluster("1x64:H100", catalog)


def test_pcie_cards_across_hosts_are_flagged(catalog: Catalog) -> None:
    """The seed: L4 and L40 are limited to what one host holds; planning across hosts is allowed
    over Ethernet but flagged."""
    cl = parse_cluster("4x8:L4", catalog)
    assert cl.fabric.name == "ethernet"
    assert any("not built for multi-node" in x for x in cl.warnings())
    assert not parse_cluster("4x8:H100", catalog).warnings()
    assert not parse_cluster("1x8:L4", catalog).warnings()


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=30))
def test_cluster_parse_never_crashes(catalog: Catalog, text: str) -> None:
    with contextlib.suppress(GpuplanError):  # anything else is a bug
        parse_cluster(text, catalog)


# --- collectives ------------------------------------------------------------------------------------


def test_allreduce_inside_a_node(catalog: Catalog) -> None:
    """8x H100 NVLink: 2(n-1)/n x bytes at 80% of 450 GB/s one-way, + 14 ring steps x 2.5 us."""
    cl = implied_cluster(catalog.get("H100"), 8)
    t = float(comm.allreduce(cl, 8, 8, 1e9))
    expected = 2 * 7 / 8 * 1e9 / (450e9 * 0.8) + 2 * 7 * 2.5e-6
    assert t == pytest.approx(expected, rel=1e-9)


def test_allreduce_across_nodes_uses_the_fabric(catalog: Catalog) -> None:
    gpu = catalog.get("H100")
    cl = parse_cluster("4x8:H100:ib-ndr", catalog)
    # one GPU per node (a data-parallel group under tp = 8): one 400 Gb/s NIC at 80%
    bw, lat, crosses = comm.group_link(cl, 4, 1)
    assert bool(crosses) and float(bw) == pytest.approx(400 / 8 * GB * 0.8)
    assert float(lat) == FABRICS["ib-ndr"].latency_s
    # eight GPUs per node: eight rails, capped by NVLink inside the node
    bw8, _, _ = comm.group_link(cl, 32, 8)
    assert float(bw8) == pytest.approx(min(8 * 50 * GB * 0.8, gpu.nvlink_bandwidth_bytes_per_s / 2 * 0.8))
    eth = parse_cluster("4x8:H100:ethernet", catalog)
    assert float(comm.group_link(eth, 32, 8)[0]) == pytest.approx(100 / 8 * GB * 0.6)  # one shared port


def test_all_to_all_splits_local_and_remote_traffic(catalog: Catalog) -> None:
    cl = parse_cluster("2x8:H100", catalog)
    inside = float(comm.all_to_all(cl, 8, 8, 1e9))
    across = float(comm.all_to_all(cl, 16, 8, 1e9))
    assert across > inside  # half the buffer leaves through 50 GB/s NICs instead of NVLink
    # 16 GPUs, 8 per node: 8/16 of the buffer crosses at 40 GB/s per GPU
    assert across == pytest.approx(0.5e9 / (50 * GB * 0.8) + 14e-6, rel=1e-6)


def test_collectives_are_vectorised(catalog: Catalog) -> None:
    cl = parse_cluster("8x8:A100", catalog)
    n = np.array([2.0, 8.0, 64.0])
    t = comm.allreduce(cl, n, np.minimum(n, 8), 1e8)
    assert isinstance(t, np.ndarray) and t.shape == (3,) and t[0] < t[1] < t[2]


# --- the composed step --------------------------------------------------------------------------


def _w(**k: object) -> Workload:
    base = {"model": "llama-3.1-8b", "task": "pretrain", "seq_len": 4096, "precision": "bf16"}
    base.update(k)
    return make_workload(base)


def test_checkpointing_profiles_match_direct_build(catalog: Catalog) -> None:
    """The search derives checkpointing variants from one operator build; they equal a direct build."""
    model, gpu = load_model("llama-3.1-8b"), catalog.get("H100")
    mo = training_ops(model, _w(tp=2, num_gpus=2, sequence_parallel=True), gpu)
    for ckpt in ("none", "selective", "full"):
        direct = training_ops(
            model,
            _w(tp=2, num_gpus=2, sequence_parallel=True, activation_checkpointing=ckpt),
            gpu,
        ).profile
        derived = with_checkpointing(mo, ckpt)
        for f in ("layer_rec_s", "attn_s", "launch_floor_s", "tp_collectives", "cp_passes", "ep_collectives"):
            assert getattr(derived, f) == pytest.approx(getattr(direct, f), rel=1e-12), f


def test_bubble_and_interleaving(catalog: Catalog) -> None:
    """1F1B bubble: (pp-1) stage times per step; interleaving divides it by vp (Narayanan et al. 2021)."""
    model, gpu = load_model("llama-3.1-70b"), catalog.get("H100")
    w1 = _w(model="llama-3.1-70b", num_gpus=64, tp=8, pp=4, global_batch=64, zero=1)
    w2 = w1.with_(vp=5)
    t1 = estimate_training_time(model, w1, gpu)
    t2 = estimate_training_time(model, w2, gpu)
    assert t1.bubble_s > 0
    assert t2.bubble_s == pytest.approx(t1.bubble_s / 5, rel=0.05)
    assert t2.step_time_s < t1.step_time_s


def test_context_parallel_halves_the_tokens_per_gpu(catalog: Catalog) -> None:
    model, gpu = load_model("llama-3.1-8b"), catalog.get("H100")
    a = training_ops(model, _w(seq_len=8192, num_gpus=1), gpu).profile
    b = training_ops(model, _w(seq_len=8192, num_gpus=2, cp=2), gpu).profile
    assert b.layer_fwd_s == pytest.approx(a.layer_fwd_s / 2, rel=0.03)
    assert b.cp_bytes > 0 and a.cp_bytes == 0


def test_expert_parallel_moves_tokens_and_splits_experts(catalog: Catalog) -> None:
    model, gpu = load_model("mixtral-8x7b"), catalog.get("H100")
    w = _w(model="mixtral-8x7b", num_gpus=8, ep=8, zero=1, global_batch=64)
    t = estimate_training_time(model, w, gpu)
    assert any(o.name == "expert-parallel all-to-all" and o.time_s > 0 for o in t.ops)
    m1 = estimate_memory(model, w.with_(ep=1), gpu)
    m8 = estimate_memory(model, w, gpu)
    assert m8.per_gpu_bytes < m1.per_gpu_bytes


def test_expert_tensor_parallelism_folds_the_expert_group_into_the_node(catalog: Catalog) -> None:
    """Megatron-Core lays expert ranks out etp-ep-dp-pp: with etp = 1 an ep = 8 group is one node's
    8 GPUs (NVLink), with etp = tp = 4 its members sit 4 apart and span 4 nodes. The expert GEMMs
    do the same FLOPs either way; only their shapes and the all-to-all's reach change."""
    model = load_model("mixtral-8x7b")
    cl = parse_cluster("8x8:H100", catalog)
    base = dict(model="mixtral-8x7b", num_gpus=64, tp=4, ep=8, sequence_parallel=True, zero=1, global_batch=64)
    folded = _w(**base, etp=1)
    legacy = _w(**base)
    a2a = {}
    for name, w in (("etp1", folded), ("etp4", legacy)):
        t = estimate_training_time(model, w, cl.gpu, cl)
        a2a[name] = next(o.time_s for o in t.ops if o.name == "expert-parallel all-to-all")
        mo = training_ops(model, w, cl.gpu)
        assert mo.profile.ep_stride == (1.0 if name == "etp1" else 4.0)
        flops = sum(o.flops for o in mo.fwd if "experts" in o.name)
        a2a[name + "_flops"] = flops
    # NVLink (450 GB/s a direction) against a 400 Gb/s NIC per GPU: several times faster, and the
    # etp = 1 ranks send 1/tp of the tokens each
    assert a2a["etp1"] < a2a["etp4"] / 4
    assert a2a["etp1_flops"] == pytest.approx(a2a["etp4_flops"], rel=1e-9)
    # memory: each GPU keeps 1/(ep x etp) of the experts instead of 1/(ep x tp)
    m1 = estimate_memory(model, folded, cl.gpu).per_gpu_bytes
    m4 = estimate_memory(model, legacy, cl.gpu).per_gpu_bytes
    assert m1 > m4
    with pytest.raises(GpuplanError, match="etp=2 with ep=1"):
        _w(model="mixtral-8x7b", num_gpus=8, tp=4, etp=2)
    with pytest.raises(GpuplanError, match="ep x etp"):
        _w(model="mixtral-8x7b", num_gpus=8, ep=8, etp=2)


def test_folded_expert_group_keeps_an_eighth_of_the_experts(catalog: Catalog) -> None:
    """tp = ep = 8 on 8 GPUs, etp unset: the ep group folds over the TP ranks (etp = 1), so each GPU
    holds 1/8 of the experts whole, in memory as in the step time (not 1/(ep x tp) = 1/64)."""
    model, gpu = load_model("mixtral-8x7b"), catalog.get("H100")
    w = _w(model="mixtral-8x7b", num_gpus=8, tp=8, ep=8, sequence_parallel=True, global_batch=8)
    assert w.expert_tp == 1
    assert training_ops(model, w, gpu).profile.ep_stride == 1.0
    experts = sum(g.total for g in model.groups if g.role == "expert")
    dense = model.total_params - experts
    weights = next(x.bytes for x in estimate_memory(model, w, gpu).lines if x.name.startswith("weights"))
    assert weights == pytest.approx(2.0 * (dense / 8 + experts / 8), rel=1e-12)  # bf16


def test_uneven_pipeline_is_timed_on_the_fullest_rank(catalog: Catalog) -> None:
    """pp x vp that do not divide the layers: Megatron-Core's --pipeline-model-parallel-layout puts
    ceil(layers / (pp x vp)) on the fullest virtual stages; the step is timed on that rank."""
    from gpuplan.estimators.parallel import stage_share

    assert float(stage_share(80, 8)) == pytest.approx(1 / 8, rel=1e-15)  # even: unchanged
    assert float(stage_share(126, 16)) == pytest.approx(8 / 126, rel=1e-15)  # 405B on pp 16
    assert float(stage_share(61, 8, 4)) == pytest.approx(2 * 4 / 61, rel=1e-15)  # DeepSeek-V3
    model, gpu = load_model("llama-3.1-70b"), catalog.get("H100")
    base = dict(model="llama-3.1-70b", num_gpus=24, tp=8, global_batch=48, seq_len=4096)
    three = estimate_training_time(model, _w(**base, pp=3), gpu)  # 80 layers: 27 on the fullest stage
    assert any("uneven pipeline" in n and "up to 27" in n for n in three.notes)
    layers = sum(o.time_s for o in three.ops if o.phase == "forward" and o.name.startswith("linear mlp"))
    ops = training_ops(model, _w(**base, pp=3), gpu)
    whole = sum(o.time_s for o in ops.fwd if o.name.startswith("linear mlp"))
    assert layers == pytest.approx(whole * 27 / 80, rel=1e-12)

    # memory on that rank: 27 of the 80 layers' weights (tp 8 splits them the same way in both)
    def weights(pp: int) -> float:
        e = estimate_memory(model, _w(**{**base, "num_gpus": 8 * pp}, pp=pp), gpu)
        return next(x.bytes for x in e.lines if x.name.startswith("weights"))

    assert weights(3) == pytest.approx(weights(1) * 27 / 80, rel=1e-12)
    with pytest.raises(InvalidSettingError, match="virtual stages is more than the 80 layers"):
        estimate_training_time(model, _w(**base, pp=3, vp=30), gpu)


def test_search_pipelines_a_model_whose_layers_no_stage_count_divides(catalog: Catalog) -> None:
    """DeepSeek-V3's 61 layers (prime): only uneven pipeline splits exist, as Megatron-Bridge's own
    recipes use them (pp 8 x vp 4, pp 16); the search now weighs them with the rest."""
    model = load_model("deepseek-v3")
    cl = parse_cluster("32x8:H100", catalog)
    w = _w(model="deepseek-v3", num_gpus=256, seq_len=4096, global_batch=1024)
    best = search_layouts(model, w, cl, top=5).best
    assert best and any(b.layout.pp > 1 and 61 % (b.layout.pp * b.layout.vp) for b in best)


def test_layout_rules(catalog: Catalog) -> None:
    model, gpu = load_model("llama-3.1-8b"), catalog.get("H100")
    with pytest.raises(InvalidSettingError, match="tp=3 must divide"):
        estimate_training_time(model, _w(tp=3, num_gpus=3), gpu)
    with pytest.raises(InvalidSettingError, match="mixture-of-experts"):
        estimate_training_time(model, _w(ep=2, num_gpus=2), gpu)
    with pytest.raises(InvalidSettingError, match="multiple of pp"):
        estimate_training_time(model, _w(pp=4, vp=2, num_gpus=4, global_batch=6), gpu)
    with pytest.raises(GpuplanError, match="global_batch=10 must be a multiple"):
        _w(num_gpus=4, global_batch=10)
    with pytest.raises(GpuplanError, match="vp"):
        _w(vp=2)
    with pytest.raises(GpuplanError, match="tp x pp x cp"):
        _w(num_gpus=6, cp=4)


# --- the search ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def search70b() -> SearchResult:
    cat = api.catalog()
    cl = parse_cluster("16x8:H100", cat)
    w = _w(model="llama-2-70b", num_gpus=cl.num_gpus, global_batch=256)
    return search_layouts(load_model("llama-2-70b"), w, cl, top=5)


def test_search_finds_fitting_layouts(search70b: SearchResult) -> None:
    res = search70b
    assert res.evaluated > 5000
    best = res.best
    assert len(best) == 5
    steps = [b.time.step_time_s for b in best]
    assert steps == sorted(steps)
    for b in best:
        assert b.memory.fits
        lay = b.layout
        assert lay.tp * lay.pp * lay.cp * lay.dp == 128
        assert lay.tp <= 8 and 64 % lay.tp == 0  # inside the NVLink domain, heads divisible
        assert b.layout.micro_batch * b.layout.micro_batches * lay.dp == 256
        # the vectorised screen is the memory model's own arithmetic: equal within 1%
        assert b.screened_bytes == pytest.approx(b.memory.per_gpu_bytes, rel=0.01)
        # a 70B model cannot train with plain data parallelism on 80 GB cards
        assert not (lay.tp == lay.pp == lay.cp == 1 and lay.zero == 0)


def test_search_step_equals_the_estimate(search70b: SearchResult) -> None:
    """The search composes the same arithmetic `gpuplan estimate` runs for one layout."""
    cat = api.catalog()
    cl = parse_cluster("16x8:H100", cat)
    model = load_model("llama-2-70b")
    for b in search70b.best:
        mo = training_ops(model, b.workload.with_(pp=1, vp=1, num_gpus=b.layout.tp * b.layout.cp * b.layout.ep,
                                                   zero=0, global_batch=None), cl.gpu)  # fmt: skip
        lay = b.layout
        parts = compose(mo.profile, cl, lay.tp, lay.cp, lay.ep, lay.pp, lay.vp, lay.dp, lay.zero, lay.micro_batches)
        assert float(parts.step) == pytest.approx(b.time.step_time_s, rel=1e-9)


def test_search_respects_small_clusters(catalog: Catalog) -> None:
    """8x RTX 4090 over PCIe without P2P, 8B pretraining: a sharded layout that fits in 24 GB."""
    cl = parse_cluster("1x8:RTX 4090", catalog)
    res = search_layouts(load_model("llama-3.1-8b"), _w(num_gpus=8, global_batch=64), cl, top=3)
    assert res.best
    for b in res.best:
        assert b.memory.per_gpu_bytes <= cl.gpu.memory_bytes
        assert b.layout.zero >= 1 or b.layout.tp * b.layout.pp > 1


def test_search_says_when_nothing_fits(catalog: Catalog) -> None:
    cl = parse_cluster("1x2:T4", catalog)
    res = search_layouts(load_model("llama-2-70b"), _w(model="llama-2-70b", num_gpus=2, global_batch=8), cl)
    assert res.best == [] and any("no layout fits" in n for n in res.notes)


def test_multi_gpu_validation_error() -> None:
    """Issue 5's target: median absolute error of tokens/s on the multi-GPU training rows <= 15%
    (bundled published.csv rows plus multinode.csv; measured 9.8% over 87 rows when written)."""
    rec = api.validate().to_dict()
    multi = [
        abs(r["error"])
        for r in rec["rows"]
        if r["category"] == "train_throughput" and int(r["workload"].get("num_gpus", 1)) > 1
    ]
    assert len(multi) >= 60
    assert statistics.median(multi) <= 0.15
    assert not math.isnan(statistics.mean(multi))


def test_cluster_key_sets_the_gpu_count() -> None:
    w = _w(model="llama-2-70b", cluster="4x8:H100", tp=8, pp=4)
    assert w.num_gpus == 32 and w.dp == 1
    w2, cl = api.resolve_cluster(w, api.catalog())
    assert cl is not None and w2.gpu == "H100 SXM5 80GB" and cl.fabric.name == "ib-ndr"


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(["H100", "A100 PCIe 80GB", "L40S", "RTX 4090", "B200", "RTX PRO 6000 Server", "MI300X"]),
    n=st.sampled_from([2, 3, 4, 8, 16, 64]),
    nbytes=st.floats(min_value=1.0, max_value=1e11),
)
def test_scalar_collectives_equal_the_array_formulas(name: str, n: int, nbytes: float) -> None:
    """allreduce_time / gather_time keep a + b x bytes per (GPU, group): the same times as the
    array formulas the layout search uses, to rounding."""
    gpu = api.catalog().get(name)
    cl, k = implied_cluster(gpu, n), min(n, implied_cluster(gpu, n).gpus_per_node)
    assert comm.allreduce_time(gpu, n, nbytes)[0] == pytest.approx(float(comm.allreduce(cl, n, k, nbytes)), rel=1e-12)
    assert comm.gather_time(gpu, n, nbytes)[0] == pytest.approx(float(comm.gather(cl, n, k, nbytes)), rel=1e-12)


@pytest.mark.parametrize("spec", ["1x8:H100", "16x8:H100", "4x8:H100:ethernet", "2x4:RTX 4090", "8x8:MI300X"])
def test_one_layout_on_floats_equals_the_array_code_exactly(catalog: Catalog, spec: str) -> None:
    """Given plain numbers, the collectives and `compose` run on Python floats (no numpy): the same
    IEEE double arithmetic as the array code, so every figure is bit-for-bit equal (group sizes
    below 1,621, where numpy's log2 and math.log2 first differ by one ulp)."""

    def first(x: object) -> float:
        assert isinstance(x, np.ndarray) and x.shape == (1,)
        return float(x[0])

    cl = parse_cluster(spec, catalog)
    for n in (1, 2, 3, 6, 8, 16, 24, 64, 128, 1024):
        for k in (1, 2, 4, 8):
            for b in (0.0, 1.0, 3.3e6, 1e9, 7.7e10):
                for fn in (comm.allreduce, comm.gather, comm.all_to_all):
                    one = fn(cl, n, k, b)
                    assert type(one) is float
                    assert one == first(fn(cl, np.array([n]), np.array([k]), np.array([b]))), (fn, n, k, b)
                for crosses in (False, True):
                    assert comm.p2p(cl, crosses, b) == first(comm.p2p(cl, np.array([crosses]), np.array([b])))
            assert comm.members_per_node(cl, n, k) == first(comm.members_per_node(cl, np.array([n]), np.array([k])))
    model = load_model("mixtral-8x7b")
    for tp, pp, vp, ep, zero, sharding in (
        (1, 1, 1, 1, 0, "fsdp"),
        (2, 2, 2, 2, 1, "deepspeed"),
        (8, 4, 1, 8, 3, "fsdp"),
    ):
        w = _w(model="mixtral-8x7b", gpu=cl.gpu.name, num_gpus=tp * ep, tp=tp, ep=ep)
        prof = training_ops(model, w, cl.gpu).profile
        arrays = type(prof)(**{f: np.array([v]) for f, v in vars(prof).items()})
        for dp, m in ((1, 1), (4, 8), (16, 3)):
            parts = compose(prof, cl, tp, 1, ep, pp, vp, dp, zero, m, sharding)
            a = [np.array([x]) for x in (tp, 1, ep, pp, vp, dp, zero, m)]
            many = compose(arrays, cl, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], sharding)
            for f, v in vars(parts).items():
                assert type(v) is float and v == first(getattr(many, f)), (f, tp, pp, dp, m)


def test_scalar_collective_cache_follows_the_gpu_not_its_name() -> None:
    """A catalog override (same name, other links) gets its own coefficients."""
    from dataclasses import replace

    h100 = api.catalog().get("H100")
    slow = replace(h100, nvlink_bandwidth_bytes_per_s=h100.nvlink_bandwidth_bytes_per_s / 4)
    fast_t = comm.allreduce_time(h100, 8, 1e9)[0]
    slow_t = comm.allreduce_time(slow, 8, 1e9)[0]
    assert slow_t > 3 * fast_t
    assert comm.allreduce_time(h100, 8, 1e9)[0] == fast_t


def test_geforce_p2p_limit_is_not_a_host_link_limit() -> None:
    """GeForce cards since the RTX 40 series move GPU-to-GPU traffic at ~27 GB/s whatever their
    PCIe generation (P2P disabled); their link to host RAM runs at the generation's rate."""
    g5090, g4090 = api.catalog().get("RTX 5090"), api.catalog().get("RTX 4090")
    assert comm.host_link_bandwidth(g5090) == pytest.approx(63.0 * GB * 0.8)  # PCIe 5.0 x16 at 80%
    assert comm.pcie_bandwidth(g5090) == pytest.approx(27.0 * GB)
    assert comm.host_link_bandwidth(g4090) == comm.pcie_bandwidth(g4090) == pytest.approx(31.5 * GB * 0.8)


def test_adapter_jobs_search_data_parallel_layouts_only(catalog: Catalog) -> None:
    """LoRA/QLoRA run under PEFT trainers: no TP/PP/CP candidates unless the workload sets them;
    `checkpointing` limits the modes tried (a launch keeps the workload's)."""
    model = load_model("llama-3.1-8b")
    cl = parse_cluster("1x4:RTX 4090", catalog)
    w = make_workload({"model": "llama-3.1-8b", "task": "lora", "batch_size": 2, "seq_len": 2048})
    res = search_layouts(model, w, cl, top=50, checkpointing=("full",))
    assert res.best and all((r.layout.tp, r.layout.pp, r.layout.cp, r.layout.dp) == (1, 1, 1, 4) for r in res.best)
    assert {r.layout.checkpointing for r in res.best} == {"full"}
    assert any("data-parallel layouts only" in n for n in res.notes)
    # the same job as full fine-tuning also weighs tensor, pipeline and context parallel shapes
    lora = search_layouts(model, w, cl, top=1)
    full = search_layouts(model, w.with_(task="finetune"), cl, top=1)
    assert lora.shapes == 6 and full.shapes > 10 * lora.shapes  # 6: micro-batch 1/2 x 3 checkpointing modes


# --- FSDP under LoRA: nested adapter units, host-offloaded shards, cards without NVLink (issue 27) ---


def _dp_exposed(w: Workload, gpu_name: str) -> float:
    t = estimate_training_time(load_model(str(w.model)), w, api.catalog().get(gpu_name))
    return sum(o.time_s for o in t.ops if o.name == "data-parallel gradients/parameters exposed")


# Answer.AI's 2x RTX 4090 box (AnswerDotAI/fsdp_qlora:benchmarks_03_2024.md@23fafdfb4af403d0808038adafbfd74de265d33a,
# 'Llama-2 7B'): LoRA, FSDP full shard, batch 6 x 2048, reentrant checkpointing, train.py's adapters
_FSDP_LORA_4090 = {
    "model": "llama-2-7b", "task": "lora", "precision": "bf16", "num_gpus": 2, "seq_len": 2048, "batch_size": 6,
    "activation_checkpointing": "full", "zero": 3, "lora_rank": 64, "lora_dropout": 0.1, "optimizer": "adamw",
    "lora_targets": "q_proj,k_proj,v_proj,gate_proj,up_proj,down_proj", "master_weights": "none",
}  # fmt: skip


def test_adapter_units_leave_the_backward_gathers_exposed() -> None:
    """With each adapter its own FSDP unit, the two backward gathers of a step (recompute and
    backward, full checkpointing) wait in line; the forward one still hides behind compute."""
    layer = make_workload(_FSDP_LORA_4090)
    nested = layer.with_(fsdp_wrap="adapters")
    # one all-gather of the bf16 base: half of 6.74B x 2 B over the 4090s' PCIe 4.0 x16 (25.2 GB/s)
    ag = 0.5 * load_model("llama-2-7b").total_params * 2 / (31.5 * GB * 0.8)
    assert ag == pytest.approx(0.267, rel=0.01)
    gap = _dp_exposed(nested, "RTX 4090") - _dp_exposed(layer, "RTX 4090")
    assert gap == pytest.approx(2 * ag * comm.OVERLAP_EFF, rel=0.02)  # the two backward gathers, no longer hidden
    t = estimate_training_time(load_model("llama-2-7b"), nested, api.catalog().get("RTX 4090"))
    # published: 1024 samples x 2048 tokens in 481 s = 4,360 tokens/s on the pair; was +10.9% with the
    # gathers hidden, +2.6% with them exposed, -9.4% since each adapter's own elementwise kernels
    # (PEFT's dropout, scaling, residual add, the 4-bit clone) count: the fsdp_qlora 4090 rows at
    # 2,048 tokens come out 7-13% slow (README, everyday stacks)
    assert t.tokens_per_s == pytest.approx(1024 * 2048 / 481, rel=0.12)
    # a job without adapters, or a layer-wrapped one (torchtune, torchtitan), is untouched
    full = make_workload({**_FSDP_LORA_4090, "task": "finetune"})
    with pytest.raises(InvalidSettingError):
        make_workload({**_FSDP_LORA_4090, "fsdp_wrap": "blocks"})
    assert _dp_exposed(full.with_(fsdp_wrap="adapters"), "RTX 4090") == _dp_exposed(full, "RTX 4090")


def test_offloaded_shards_cross_the_host_link_before_every_gather() -> None:
    """FSDP CPUOffload(offload_params=True): each gather first copies this GPU's shard to the device,
    so a 70B QLoRA on two 4090s moves its 18 GB shard over PCIe three times a step."""
    base = {**_FSDP_LORA_4090, "model": "llama-2-70b", "task": "qlora", "batch_size": 2, "fsdp_wrap": "adapters"}
    on_gpu, offloaded = make_workload(base), make_workload({**base, "offload": "optimizer+params"})
    shard = load_model("llama-2-70b").total_params * 0.53 / 2  # NF4 as gathered, over 2 GPUs
    h2d = shard / (31.5 * GB * 0.8)
    assert h2d == pytest.approx(0.72, rel=0.02)
    # the forward copy hides behind compute (85%), the two backward ones do not; + the first layer's
    gap = _dp_exposed(offloaded, "RTX 4090") - _dp_exposed(on_gpu, "RTX 4090")
    assert gap == pytest.approx(h2d * (1 - comm.OVERLAP_EFF + 2 + 3 / 80), rel=0.02)
    t = estimate_training_time(load_model("llama-2-70b"), offloaded, api.catalog().get("RTX 4090"))
    # benchmarks_03_2024.md 'Llama-2 70B' on the 4090s: 4,399 s for 1024 x 2048 tokens (476.7 tokens/s);
    # -12.8% since the adapters' elementwise kernels count (above)
    assert t.tokens_per_s == pytest.approx(1024 * 2048 / 4399, rel=0.15)


def test_cards_without_their_nvlink_bridge_talk_over_pcie() -> None:
    """Two RTX 3090s (NVLink bridge in the catalog) without the bridge: PCIe 4.0 x16 at 80%."""
    g = api.catalog().get("RTX 3090")
    assert comm.link(g, 2)[2] == "NVLink" and comm.link(g, 2)[0] == pytest.approx(112.5 * GB / 2 * 0.8)
    bw, _, name = comm.link(comm.without_nvlink(g), 2)
    assert name == "PCIe" and bw == pytest.approx(31.5 * GB * 0.8)
    w = make_workload({**_FSDP_LORA_4090, "fsdp_wrap": "adapters"})
    bridged, bare = _dp_exposed(w, "RTX 3090"), _dp_exposed(w.with_(nvlink=False), "RTX 3090")
    assert bare / bridged == pytest.approx(45.0 / 25.2, rel=0.01)  # every gather at the slower link


@pytest.mark.parametrize(
    ("framework", "model", "zero"), [("torchtitan", "llama-2-70b", 3), ("nemo", "llama-3.1-70b", 1)]
)
def test_plan_ranks_only_layouts_the_frameworks_launch_accepts(framework: str, model: str, zero: int) -> None:
    """QA F28: Llama 2 70B on 64 x 8 H100 (examples/pretrain-70b-cluster.yaml). torchtitan runs
    FSDP2 (zero 3) or replication (zero 0), NeMo the distributed optimizer (zero 1): the search tries
    only those stages, and the plan's best layout, set as the workload's keys, is launched by the
    framework's own format without error, with that layout (NeMo 2 has no Llama 2 recipe: 3.1 70B)."""
    from gpuplan.results import LayoutPlan

    example = str(Path(__file__).parent.parent / "examples" / "pretrain-70b-cluster.yaml")
    keys = {"framework": framework, "model": model}
    p = api.plan(api.build_workload(example, keys), top=3)
    assert isinstance(p, LayoutPlan) and p.layouts
    assert all(row.keys["zero"] in FRAMEWORK_ZERO_STAGES[framework] for row in p.layouts)
    best = p.layouts[0]
    assert best.keys["zero"] == zero
    assert any(f"framework {framework}: ZeRO stages" in n for n in p.notes)
    rec = api.launch(example, "", {**keys, **best.keys})
    assert rec.layout == best.layout
