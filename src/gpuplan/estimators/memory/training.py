"""Training memory: model states (ZeRO stages, LoRA/QLoRA adapters, offload), buffers,
activations, and CNN training."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators.fsdp_pp import FSDP_PP_GRAD_BYTES, fsdp_keeps_stage_gathered
from gpuplan.estimators.lora import adapter_params, lora_targets
from gpuplan.estimators.memory.base import (
    QUANTISED_ROLES,
    MemoryEstimate,
    MemoryLine,
    act_bytes,
    activation_lines,
    check_parallel,
    finish,
    has_lm_head,
    pipeline_ranks,
    weight_bytes,
)
from gpuplan.estimators.optimizer import OPTIMIZER_INFO, optimizer_state_bytes
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec, ParamGroup
from gpuplan.specs.precision import storage_format
from gpuplan.specs.workload import Workload

# Feature-map elements autograd keeps per 224x224 image in ResNet-50 training: each bottleneck
# block saves its convolutions' outputs (BatchNorm's input) and the ReLU outputs (the next conv's
# input): stem 1.8M, stage 1 3 x 2.4M, stage 2 4 x 1.2M, stage 3 6 x 0.6M, stage 4 3 x 0.3M
# = 18.3M (layer shapes from He et al. 2016, table 1). Other CNNs scale by their FLOPs per image.
CNN_SAVED_ELEMENTS_PER_IMAGE: Final = 18.3e6
CNN_REFERENCE_FLOPS: Final = 8.2e9  # ResNet-50 forward at 224x224, 2 FLOPs per multiply-add
# cuDNN convolution workspace: PyTorch lets cuDNN pick algorithms with up to ~1 GiB of workspace
# on large GPUs (benchmark mode); 512 MiB is the typical working figure.
CNN_WORKSPACE_BYTES: Final = 512 * 2**20


def cnn_training_memory(model: ModelSpec, w: Workload, gpu: GPU | None) -> MemoryEstimate:
    """CNN training (data parallel): fp32 weights, gradients and optimizer states, the saved
    feature maps of every layer, and cuDNN's workspace."""
    if w.task in ("lora", "qlora") or w.tp > 1 or w.pp > 1:
        raise InvalidSettingError(
            f"{model.name} is a CNN: train it with task pretrain or finetune, data-parallel (tp = pp = 1)."
        )
    c = act_bytes(w.precision)
    n = model.total_params
    info = OPTIMIZER_INFO[w.optimizer]
    shard = w.dp if w.zero >= 1 else 1
    per_state = 1.0 if info.eight_bit else 4.0
    states = n * info.moments * per_state / shard
    scale = model.conv_flops_per_sample / CNN_REFERENCE_FLOPS if model.conv_flops_per_sample else 1.0
    acts = CNN_SAVED_ELEMENTS_PER_IMAGE * scale * c * w.batch_size
    lines = [
        MemoryLine("weights (fp32)", n * 4.0 / (w.dp if w.zero >= 3 else 1), f"{n / 1e6:.1f}M params", "model"),
        MemoryLine("gradients (fp32)", n * 4.0 / (w.dp if w.zero >= 2 else 1), "one per weight", "grad"),
        MemoryLine(
            f"optimizer states ({w.optimizer})", states, f"{info.moments} x {per_state:g} B per param", "optimizer"
        ),
        MemoryLine(
            "saved feature maps",
            acts,
            f"{w.batch_size} images x {CNN_SAVED_ELEMENTS_PER_IMAGE * scale / 1e6:.1f}M values x {c:g} B "
            "(conv and ReLU outputs, ResNet-50 shapes)",
            "activation",
        ),
        MemoryLine("cuDNN workspace", CNN_WORKSPACE_BYTES, "convolution algorithm scratch space", "buffer"),
    ]
    return finish(model, w, gpu, {"forward/backward": lines}, 0.0, n, [])


# --- training ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Split:
    """How a training job's model states divide over its GPUs."""

    mp: float  # model-parallel divisor: tp x the fullest pipeline rank's share
    dp: float  # ranks holding the same weights: dp x cp
    zero: int
    c: float  # bytes per 16-bit (2) or fp32/tf32 (4) value
    pure: bool  # no fp32 master copy (pure 16-bit, or fp32 training)
    ep_factor: float  # the expert split's effect on a replicated state

    def shard(self, stage: int) -> float:
        """GPUs a state is split over: tp x pp (/ the expert split), and the data-parallel group
        from ZeRO `stage` on."""
        return self.mp * self.dp if self.zero >= stage else self.mp / self.ep_factor


@dataclass
class _States:
    """The model states per GPU as the steps of `training_memory` build them."""

    model_lines: list[MemoryLine]
    grads_lines: list[MemoryLine]
    opt: float
    step_temp: float
    n_train: int


def _split(model: ModelSpec, w: Workload) -> _Split:
    c = act_bytes(w.precision)  # 16-bit compute -> 2, fp32/tf32 -> 4
    # expert parallelism splits the MoE experts over ep ranks; ZeRO then shards experts and the
    # rest alike over the data-parallel (x context-parallel) group (Megatron-Core distributed optimizer)
    expert_share = sum(g.total for g in model.groups if g.role == "expert") / max(model.total_params, 1)
    # (an expert's GEMMs split over etp ranks rather than tp: as set, or folded to 1 where ep
    # spans the tensor-parallel ranks, the same split the step time uses)
    ep_factor = 1.0 - expert_share + expert_share * w.tp / (w.ep * w.expert_tp)
    return _Split(
        mp=w.tp * pipeline_ranks(model, w),
        dp=w.dp * w.cp,
        zero=w.zero,
        c=c,
        pure=w.master_weights == "none" or c == 4.0,
        ep_factor=ep_factor,
    )


def _full_states(model: ModelSpec, w: Workload, sp: _Split) -> _States:
    """Pretraining and full fine-tuning: 16-bit (or fp32) weights, the fp32 master copy, gradients
    and optimizer states (ZeRO paper, sec. 3.1)."""
    c, z, total = sp.c, sp.zero, model.total_params
    info = OPTIMIZER_INFO[w.optimizer]
    w_shard = sp.shard(3)
    lines = [
        MemoryLine(
            # fp8 training keeps 16-bit weights and casts them per GEMM (Transformer Engine, torchao.float8)
            f"weights ({('bf16' if w.precision == 'fp8' else w.precision) if c == 2 else 'fp32'})",
            total * c / w_shard,
            f"{total / 1e9:.3g}B params x {c:g} B" + (f" / {w_shard:g} (ZeRO-3 / FSDP shards)" if z >= 3 else ""),
            "model",
        )
    ]
    if not sp.pure:
        lines.append(
            MemoryLine(
                "master weights (fp32)",
                total * 4.0 / sp.shard(1),
                "mixed precision keeps an fp32 copy (Micikevicius et al. 2018)",
                "model",
            )
        )
    fp32_grads = not (z >= 1 or sp.pure)
    grad_bytes = (4.0 if fp32_grads else c) * total / sp.shard(2)
    grad_note = (
        "fp32 gradients (PyTorch AMP / Megatron main_grad)"
        if fp32_grads
        else f"{c:g}-byte gradients" + (" sharded by ZeRO-2/3" if z >= 2 else "")
    )
    state_b = c if sp.pure and c == 2.0 else 4.0
    spec = [(g.numel, g.count, _rows(model, g)) for g in model.groups if g.total > 0]
    return _States(
        model_lines=lines,
        grads_lines=[MemoryLine("gradients", grad_bytes, grad_note, "model")],
        opt=optimizer_state_bytes(w.optimizer, spec, state_b) / sp.shard(1),
        step_temp=info.step_temp_elements * total * state_b / sp.shard(1),
        n_train=total,
    )


def _adapter_states(model: ModelSpec, w: Workload, sp: _Split) -> _States:
    """LoRA and QLoRA: the frozen base (16-bit, NF4 or the given format), the adapters with their
    gradients and optimizer states, and the dequantisation buffer of a quantised base."""
    c, total, groups = sp.c, model.total_params, list(model.groups)
    info = OPTIMIZER_INFO[w.optimizer]
    targets = lora_targets(model, w.lora_targets)
    r = w.lora_rank
    n_train = adapter_params(targets, r)
    base_fmt: str = "nf4" if w.task == "qlora" else ("fp32" if c == 4.0 else w.precision)
    if w.task == "qlora" and w.weight_dtype is not None:
        base_fmt = w.weight_dtype
    rest = _non_quantised_bytes(w, sp)
    w_shard = sp.shard(3)
    lbnb = lightning_bnb(w)
    per = storage_format(base_fmt).bytes_per_value
    own_head = litgpt_own_head(model, w)
    frozen = weight_bytes(groups, base_fmt, rest) + own_head * (per if lbnb else rest)
    if lbnb:  # the model's own head is quantised too, not kept at `rest`
        frozen -= sum(g.total for g in groups if g.role == "head" and g.linear) * (rest - per)
    # PEFT keeps adapters in fp32 under 16-bit compute (autocast_adapter_dtype=True);
    # pure 16-bit training (torchtune) keeps them like the model
    ab = c if sp.pure else 4.0
    lines = [
        MemoryLine(
            f"frozen base weights ({base_fmt})",
            frozen / w_shard,
            f"{total / 1e9:.3g}B params; block linears at {storage_format(base_fmt).bits_per_value:.3g} bits, "
            + ("lm_head too (Lightning's bitsandbytes plugin), embeddings/norms" if lbnb else "embeddings/norms/head")
            + f" at {8 * rest:g}"
            + (f"; + LitGPT's own {own_head / 1e6:.0f}M-param lm_head beside the tied embedding" if own_head else ""),
            "model",
        ),
        MemoryLine(
            "LoRA adapters",
            n_train * ab / w_shard,
            f"rank {r} on {', '.join(sorted({g.name.rsplit('.', 1)[-1] for g in targets}))}: "
            f"{n_train / 1e6:.3g}M params x {ab:g} B (Hu et al. 2021)",
            "model",
        ),
    ]
    if w.task == "qlora" or storage_format(base_fmt).bits_per_value < 16:
        largest = max((g.numel for g in groups if g.linear and g.role in QUANTISED_ROLES), default=0)
        note = "the largest quantised matrix dequantised to 16 bits per matmul (bitsandbytes)"
        deq = 2.0
        if lbnb:
            largest = max(largest, model.vocab_size * model.hidden_size)
            deq = lightning_dequant_bytes(w)
            note = (
                f"the largest quantised matrix (lm_head) dequantised to fp16 and cast to {w.precision}: "
                f"{deq:g} B per element (Lightning quantises from fp16; bitsandbytes MatMul4Bit)"
            )
        lines.append(MemoryLine("dequantisation buffer", largest * deq / w.tp, note, "model"))
    spec: list[tuple[int, int, int | None]] = [
        (r * (g.linear[0] + g.linear[1]), g.count, None) for g in targets if g.linear
    ]
    return _States(
        model_lines=lines,
        grads_lines=[MemoryLine("gradients", n_train * ab / sp.shard(2), "LoRA adapters only", "model")],
        opt=optimizer_state_bytes(w.optimizer, spec, ab) / sp.shard(1),
        step_temp=info.step_temp_elements * n_train * ab / sp.shard(1),
        n_train=n_train,
    )


def litgpt_own_head(model: ModelSpec, w: Workload) -> int:
    """Elements of the lm_head LitGPT builds for a model whose checkpoint ties it to the embedding
    (0 elsewhere). LitGPT's GPT always has its own lm_head Linear beside the wte Embedding, and its
    checkpoint converter copies wte into lm_head where the HF checkpoint has none, so a tied model
    (Gemma, Falcon) holds two vocab x d matrices (Lightning-AI/litgpt:litgpt/model.py and
    litgpt/lora.py GPT.__init__, litgpt/scripts/convert_hf_checkpoint.py
    @03ffc5515b251fb7e3a461efd0e3c163e45b6b3b). Counted for LoRA/QLoRA, where that head is frozen."""
    if w.framework != "litgpt" or w.task not in ("lora", "qlora") or not has_lm_head(model):
        return 0
    held = sum(g.total for g in model.groups if g.role == "head" and g.linear)  # 0 where tied
    return 0 if held else model.vocab_size * model.hidden_size


def lightning_bnb(w: Workload) -> bool:
    """QLoRA through Lightning Fabric's BitsandbytesPrecision (litgpt/finetune/lora.py `--quantize
    bnb.nf4`): its module_init_context swaps every torch.nn.Linear made under init_module for a
    bitsandbytes Linear4bit, lm_head included (litgpt passes no ignore_modules), and
    _Linear4bit.quantize converts each weight to fp16 before quantize_4bit, so the stored
    quant_state dtype is fp16
    (Lightning-AI/pytorch-lightning:src/lightning/fabric/plugins/precision/bitsandbytes.py
    @b19eba3ac7361d04d016e6774606588aa0a25529, the lightning 2.4.0.dev20240728 that litgpt
    @03ffc5515b251fb7e3a461efd0e3c163e45b6b3b pins; the same head quantisation and fp16 cast at
    @71aed751f7f0ca8422ddca256e602099070f490b, which lit-gpt 8641822 of the resource tables pins)."""
    return w.framework == "litgpt" and w.task == "qlora" and w.qlora_kernel == "bitsandbytes"


def lightning_dequant_bytes(w: Workload) -> float:
    """Bytes per element of one dequantised matrix under Lightning's plugin: MatMul4Bit runs
    F.dequantize_4bit(B, quant_state).to(A.dtype) in forward and again for grad_A in backward
    (bitsandbytes-foundation/bitsandbytes:bitsandbytes/autograd/_functions.py@4870580f17767a4165ec05d954dff2b5c25b694d,
    the 0.42.0 LitGPT pins; 0.41.0 the same), so the fp16
    dequantised copy and its cast to the compute dtype are both live while the cast runs (one fp16
    copy when the compute dtype is fp16 itself)."""
    return 2.0 if w.precision == "fp16" else 2.0 + act_bytes(w.precision)


def _non_quantised_bytes(w: Workload, sp: _Split) -> float:
    """Bytes of each parameter the quantiser leaves alone (embeddings, norms, head) under QLoRA.
    PEFT's prepare_model_for_kbit_training casts them to fp32 (peft/utils/other.py); pure 16-bit
    recipes (torchtune) keep them 16-bit, and so does sharded QLoRA (ZeRO-3 / FSDP), where TRL's
    SFTTrainer skips that cast ("one should never call ... prepare_model_for_kbit_training when doing
    QLoRA + FSDP / DS-Zero3": huggingface/trl:trl/trainer/sft_trainer.py@58c08889) and the base loads
    in its 16-bit quant-storage dtype."""
    return 4.0 if (w.task == "qlora" and not sp.pure and sp.zero < 3) else sp.c


def _optimizer_and_offload(model: ModelSpec, w: Workload, sp: _Split, st: _States, notes: list[str]) -> float:
    """Adds the optimizer states to `st.model_lines`, moving states to the host under offload;
    returns the host bytes per GPU."""
    info = OPTIMIZER_INFO[w.optimizer]
    opt_note = f"{info.name}: {info.source}" + (" (bitsandbytes 8-bit blocks)" if info.eight_bit else "")
    opt_line = MemoryLine("optimizer states", st.opt, opt_note, "paged" if info.paged else "model")
    host = 0.0
    if w.offload != "none":
        # ZeRO-Offload (Ren et al. 2021): fp32 master weights, moments and the fp32 gradient
        # partition live in host memory; the GPU keeps 16-bit parameters and gradients
        host += (
            st.opt
            + sum(x.bytes for x in st.model_lines if x.name.startswith("master"))
            + sum(x.bytes for x in st.grads_lines) * (4.0 / sp.c)
        )
        st.model_lines = [x for x in st.model_lines if not x.name.startswith("master")]
        # gradients stream to the host as they are reduced; one layer's worth is in flight
        g_gpu = min(st.grads_lines[0].bytes, _gathered_layers(model, sp.c, sp.mp, 1))
        st.grads_lines = [MemoryLine("gradients", g_gpu, "streamed to host (offload); one layer in flight", "model")]
        opt_line = MemoryLine("optimizer states", 0.0, "offloaded to host (ZeRO-Offload)", "model")
        st.step_temp = 0.0
        notes.append(f"host RAM for offloaded optimizer states: {host / 2**30:.1f} GiB per GPU")
        if w.offload == "optimizer+params":
            # ZeRO-Infinity: parameters live on the host; the GPU holds the layers being computed
            weights_line = st.model_lines[0]
            host += weights_line.bytes
            st.model_lines[0] = MemoryLine(weights_line.name, 0.0, "parameters offloaded to host RAM", "model")
    st.model_lines.append(opt_line)
    return host


def _buffers(model: ModelSpec, w: Workload, sp: _Split, st: _States) -> list[MemoryLine]:
    """Communication buffers: DDP's gradient buckets, ZeRO-3's gathered layers, ZeRO-1/2's reduce bucket."""
    buffers: list[MemoryLine] = []
    if sp.dp > 1 and sp.zero == 0:
        # torch DDP: bucket buffers the size of the gradients (gradient_as_bucket_view=False default)
        buffers.append(
            MemoryLine(
                "DDP gradient buckets",
                sum(x.bytes for x in st.grads_lines),
                "torch DDP copies gradients into buckets (gradient_as_bucket_view=False)",
                "model",
            )
        )
    if sp.zero >= 3 and (sp.dp > 1 or w.offload == "optimizer+params"):
        # gathered at the stored precision: NF4 bases stay 4-bit until each matmul dequantises
        stored = (
            st.model_lines[0].bytes * sp.shard(3) / max(model.total_params, 1) if w.task in ("lora", "qlora") else 0.0
        )
        if fsdp_keeps_stage_gathered(w.framework, sp.zero, w.pp, sp.dp):
            buffers.append(_stage_gathered_line(model, sp))
        else:
            buffers.append(_gathered_line(model, w, stored or sp.c, sp.mp))
        if w.sharding == "fsdp" and w.fsdp_wrap == "adapters" and w.task in ("lora", "qlora"):
            buffers.append(_root_unit_line(model, w, sp))
    elif sp.dp > 1 and sp.zero >= 1:
        # DeepSpeed ZeRO-1/2 reduce bucket: reduce_bucket_size = 5e8 elements (deepspeed/runtime/zero/config.py)
        bucket = min(5e8, st.n_train / sp.mp) * sp.c
        buffers.append(MemoryLine("ZeRO reduce bucket", bucket, "DeepSpeed reduce_bucket_size 5e8 elements", "model"))
    return buffers


def _update_in_backward(model: ModelSpec, w: Workload, st: _States) -> None:
    """optimizer_in_backward: each parameter is updated in backward as its gradient arrives; at most
    the largest tensor's gradient is alive (torchtune optimizer_in_bwd, PyTorch
    register_post_accumulate_grad_hook)."""
    if w.micro_batches > 1:
        raise InvalidSettingError("optimizer_in_backward needs grad_accum: 1 (there is no gradient to accumulate).")
    largest = max((g.numel for g in model.groups), default=0) if w.task in ("pretrain", "finetune") else 0
    g0 = st.grads_lines[0]
    per_el = g0.bytes / max(st.n_train, 1)
    st.grads_lines = [
        MemoryLine("gradients", largest * per_el if largest else g0.bytes, "one tensor at a time", "model")
    ]
    st.step_temp = 0.0


def training_memory(model: ModelSpec, w: Workload, gpu: GPU | None) -> MemoryEstimate:
    """Transformer training: the model states, buffers and activations at the two moments of a
    step (the end of forward/backward, and the optimizer step), the larger being the peak."""
    check_parallel(model, w)
    sp = _split(model, w)
    notes: list[str] = []
    st = _full_states(model, w, sp) if w.task in ("pretrain", "finetune") else _adapter_states(model, w, sp)
    host = _optimizer_and_offload(model, w, sp, st, notes)
    buffers = _buffers(model, w, sp, st)
    if w.optimizer_in_backward:
        _update_in_backward(model, w, st)
    act_lines, act_host = activation_lines(model, w)
    host += act_host
    grads_present = w.micro_batches > 1 or sp.zero >= 1 or w.optimizer_in_backward or not w.grads_set_to_none
    head_grads = 0.0
    if not grads_present and w.task in ("pretrain", "finetune"):
        head = sum(g.total for g in model.groups if g.role == "head")
        head_grads = head * (st.grads_lines[0].bytes / max(model.total_params, 1))
    fwd = st.model_lines + buffers + act_lines
    if grads_present:
        fwd = fwd + _no_sync_grads(w, sp, st.grads_lines)
    elif head_grads:
        fwd = [*fwd, MemoryLine("gradients", head_grads, "the output head's gradients arrive first", "model")]
    # torchtitan FSDP + PP reshards the gathered stage after the last backward, before the step
    kept = fsdp_keeps_stage_gathered(w.framework, sp.zero, w.pp, sp.dp)
    step = st.model_lines + [b for b in buffers if not (kept and b.name == "gathered parameters")] + st.grads_lines
    if st.step_temp:
        step = [*step, MemoryLine("optimizer step temporaries", st.step_temp, "torch foreach AdamW: sqrt(v)", "model")]
    phases = {"forward/backward": fwd, "optimizer step": step}
    if OPTIMIZER_INFO[w.optimizer].paged:
        notes.append("paged optimizer states can spill to host RAM under memory pressure (bitsandbytes paging)")
    if w.offload == "none" and w.zero == 0 and sp.dp > 1:
        notes.append("plain data parallelism replicates all model states; zero: 1-3 shards them")
    return finish(model, w, gpu, phases, host, st.n_train, notes)


def _no_sync_grads(w: Workload, sp: _Split, grads: list[MemoryLine]) -> list[MemoryLine]:
    """Gradient accumulation inside FSDP's no_sync: "FSDP will accumulate the full model gradients
    (instead of gradient shards) until the eventual sync" (PyTorch FullyShardedDataParallel.no_sync
    docstring), so through the forward/backward of every micro-batch each GPU holds the unsharded
    gradients; the sync's reduce-scatter leaves the shard the optimizer step reads. LitGPT's
    finetune/full.py accumulates under fabric.no_backward_sync, which is FSDP's no_sync
    (Lightning-AI/litgpt@03ffc5515b251fb7e3a461efd0e3c163e45b6b3b). Under torchtitan's pipeline the
    same holds without fsdp_no_sync: the stage's gradients stay unsharded, in the fp32 reduce dtype,
    until the last micro-batch's backward (fsdp_pp.FSDP_PP_GATHER_ONCE)."""
    if fsdp_keeps_stage_gathered(w.framework, sp.zero, w.pp, sp.dp):
        return [
            MemoryLine(
                g.name,
                g.bytes * sp.dp * FSDP_PP_GRAD_BYTES / sp.c,
                "unsharded fp32 (reduce dtype): the stage's gradients accumulate until the last micro-batch "
                "(torchtitan FSDP + PP)",
                g.kind,
            )
            for g in grads
        ]
    if not (w.fsdp_no_sync and w.sharding == "fsdp" and sp.zero >= 2 and w.micro_batches > 1 and sp.dp > 1):
        return grads
    return [
        MemoryLine(
            g.name, g.bytes * sp.dp, "unsharded: accumulated under FSDP no_sync until the last micro-batch", g.kind
        )
        for g in grads
    ]


# DeepSpeed ZeRO-3 defaults (deepspeed/runtime/zero/config.py): stage3_max_live_parameters = 1e9
# elements stay gathered (and stage3_max_reuse_distance = 1e9 keeps soon-reused ones); a tensor
# larger than that is still gathered whole.
DEEPSPEED_MAX_LIVE_PARAMETERS: Final = 1e9


def _rows(model: ModelSpec, g: ParamGroup) -> int | None:
    """First dimension of a matrix parameter (embeddings are vocab x d), None for vectors."""
    if g.linear is not None:
        return g.linear[0]
    d = model.hidden_size
    if g.role in ("embedding", "position") and d and g.numel % d == 0 and g.numel > d:
        return g.numel // d
    return None


def _gathered_line(model: ModelSpec, w: Workload, bytes_per: float, mp: float) -> MemoryLine:
    """Parameters all-gathered on the GPU under ZeRO-3 / FSDP, `bytes_per` bytes each."""
    if w.sharding == "deepspeed":
        largest = max((g.numel for g in model.groups), default=0)
        n = min(model.total_params / mp, DEEPSPEED_MAX_LIVE_PARAMETERS + largest)
        return MemoryLine(
            "gathered parameters",
            n * bytes_per,
            "DeepSpeed ZeRO-3: up to stage3_max_live_parameters (1e9) gathered, plus the largest tensor",
            "model",
        )
    return MemoryLine(
        "gathered parameters",
        _gathered_layers(model, bytes_per, mp, 2),
        "FSDP: the current and the prefetched layer all-gathered",
        "model",
    )


def _root_unit_line(model: ModelSpec, w: Workload, sp: _Split) -> MemoryLine:
    """The root FSDP unit unsharded for the whole step: PEFT's fsdp_auto_wrap_policy (and fsdp_qlora's
    policy) wrap the decoder layers and the adapters only, so embed_tokens, the final norm and lm_head
    stay in the root, and FSDP1 does not free the root's parameters after forward
    (pytorch/pytorch:torch/distributed/fsdp/_runtime_utils.py@3ade90a6aaa939cd6238e314c321b9f920db1471
    _post_forward_reshard: free only `not state._is_root`). Its shard is already counted with the
    weights (unless offloaded); the rest of it is gathered, at the non-quantised parameters' bytes."""
    rest = _non_quantised_bytes(w, sp)
    root = sum(g.total for g in model.groups if g.role in ("embedding", "position", "head")) * rest / sp.mp
    held = 0.0 if w.offload == "optimizer+params" else root / sp.shard(3)
    return MemoryLine(
        "gathered root unit",
        root - held,
        "FSDP1 keeps the root unit (embeddings, final norm, head) unsharded from forward through backward",
        "model",
    )


def _stage_gathered_line(model: ModelSpec, sp: _Split) -> MemoryLine:
    """torchtitan FSDP + PP: the whole stage's parameters stay gathered from the first forward to the
    last backward of a step (reshard_after_forward off under PP: fsdp_pp.FSDP_PP_GATHER_ONCE)."""
    return MemoryLine(
        "gathered parameters",
        model.total_params * sp.c / sp.mp,
        "torchtitan FSDP + PP: the stage's parameters stay gathered through the step (no reshard after forward)",
        "model",
    )


def _gathered_layers(model: ModelSpec, c: float, mp: float, layers: int) -> float:
    """16-bit bytes of `layers` transformer layers (all-gathered by ZeRO-3 / FSDP per unit)."""
    per_layer = sum(g.total for g in model.groups if g.role in ("attention", "mlp", "expert", "router", "norm"))
    n = max(model.num_layers, 1)
    return layers * per_layer / n * c / mp
