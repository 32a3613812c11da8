"""The inference step's operators: its linear layers and its attention, over per-context tables of
their step-invariant terms (a plan runs ~2,800 engine steps)."""

from __future__ import annotations

import itertools
from typing import Any, Final, NamedTuple

from gpuplan.estimators import efficiency as eff
from gpuplan.estimators import engines
from gpuplan.estimators.activations import StackShape, stack_shapes
from gpuplan.estimators.memory import is_quantised, kv_shards
from gpuplan.estimators.perf.ops import (
    GEMV_ROWS,
    LAST_TOKEN_LOGITS_ENGINES,
    NF4_DEQUANT_BYTES,
    ROOF_P,
    TINYGEMM_INT4_GEMV_SHARE,
    WEIGHT_ONLY_COMPUTE_SHARE,
    WEIGHT_ONLY_GEMV_BW_SHARE,
    WEIGHT_ONLY_GEMV_BW_SHARE_BY_ENGINE,
    Ctx,
    Op,
    attn_kernel,
    avg_context,
    eager_scores_op,
    elementwise_bytes,
    gemm,
    roof,
    shard_dims,
)
from gpuplan.specs.model import ModelSpec, ParamGroup
from gpuplan.specs.precision import storage_format

# roof()'s exponent and Op's constructor without NamedTuple's keyword-taking __new__ (the steps'
# inner loops build ~40,000 operators a plan)
_ROOF_EXP: Final = 1.0 / ROOF_P
_new_op: Final = tuple.__new__


def weight_bytes_per_element(c: Ctx) -> tuple[float, bool, float]:
    """(bytes per block-linear weight, weight-only dequant?, bytes per embedding/head weight)."""
    fmt = c.weights.fmt
    b = storage_format(fmt).bytes_per_value
    other = 4.0 if fmt == "fp32" else 2.0
    if fmt.startswith(("q", "iq")) and fmt not in ("qlora",):
        other = b  # GGUF files quantise the embeddings and output too
    weight_only = b < 2.0 and not (c.runs_as == "fp8" and fmt == "fp8") and c.runs_as != "fp4"
    return b, weight_only and c.runs_as != "fp32", other


_UNSET: Final = object()


def bnb_kernel(c: Ctx) -> str | None:
    """The bitsandbytes path transformers runs a quantised checkpoint through, if any: "int8"
    (load_in_8bit: LLM.int8), "4bit" (load_in_4bit) or "4bit-dq" (with double quantisation)."""
    hit = c.memo.get("bnb", _UNSET)  # the memo read first: once() takes a closure a call
    return c.once("bnb", lambda: _bnb_kernel(c)) if hit is _UNSET else hit


def _bnb_kernel(c: Ctx) -> str | None:
    if c.w.engine != "transformers":
        return None
    fmt = storage_format(c.weights.fmt).name
    return {"int8": "int8", "nf4": "4bit-dq", "fp4": "4bit-dq", "nf4-no-dq": "4bit"}.get(fmt)


class _Linear(NamedTuple):
    """The step-invariant terms of one linear group on a context (`_linear_layers`)."""

    g: ParamGroup
    stack: str  # g's
    role: str
    af: float  # g.active_fraction
    name: str  # its operators' name
    is_ep: bool  # expert-parallel
    k_in: float  # shard in
    n_out: float  # shard out
    per_elt: float  # bytes per weight element
    quantised: bool  # read through a weight-only dequantising kernel
    per_stage: float  # g.count / pp (/ ep when expert-parallel); the head's comes from the step
    nkw: float  # n_out x k_in x per_elt: the weight bytes of one GEMM
    bw: float  # the streaming bandwidth its GEMMs read at (gemm's, rows >= GEMV_ROWS)
    bw_gemv: float  # the same below GEMV_ROWS (weight-only GEMV shares)
    fn: float  # gemm_size_factor's column and depth terms
    fk: float
    wo: float  # weight-only share of the tensor-core rate
    same: int  # the first earlier row with all the terms above but g and name alike (k and v, gate and up), else -1


# (what _linear_rows reads of a context) -> its rows: shared by the contexts of one model's parameter
# groups (by value: each request loads its model afresh, and the groups are frozen dataclasses), weight
# format, precision, layout, engine and bandwidth (a plan makes ~670 contexts, of ~170 such kinds). The
# groups stand in the key as a token, one per distinct groups tuple (_GROUPS), found once per model
# object (_MODEL_GROUPS, which keeps the model so that its id cannot be another's): comparing the
# groups themselves on every lookup costs as much as a step
_LINEAR_ROWS: dict[tuple[Any, ...], list[_Linear]] = {}
_GROUPS: dict[tuple[ParamGroup, ...], int] = {}
_MODEL_GROUPS: dict[int, tuple[ModelSpec, int]] = {}
# tokens are never reused, not even after a clear: a thread still holding an old token (the web app
# answers in threads where it runs no worker processes) cannot then find another groups' rows by it
_TOKENS: Final = itertools.count()


def _groups_token(model: ModelSpec) -> int:
    """The token of the model's parameter groups in _GROUPS (equal groups, one token)."""
    hit = _MODEL_GROUPS.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    if len(_GROUPS) > 256 or len(_MODEL_GROUPS) > 64:
        _GROUPS.clear()
        _MODEL_GROUPS.clear()
        _LINEAR_ROWS.clear()
    token = _GROUPS.get(model.groups)
    if token is None:
        token = _GROUPS.setdefault(model.groups, next(_TOKENS))
    _MODEL_GROUPS[id(model)] = (model, token)
    return token


def _linear_layers(c: Ctx, ep: int, etp: int) -> list[_Linear]:
    """The step-invariant terms of each linear group on this context (`_Linear`), once per context
    and layout (the memo read first: once() takes a closure a call)."""
    key = ("linear", ep, etp)
    hit: list[_Linear] | None = c.memo.get(key)
    return hit if hit is not None else c.once(key, lambda: _shared_linear_rows(c, ep, etp))


def _shared_linear_rows(c: Ctx, ep: int, etp: int) -> list[_Linear]:
    """_linear_rows, shared through _LINEAR_ROWS."""
    w, iw = c.w, c.weights
    # the experts' bandwidth share read now, not kept: it follows engines.FUSED_MOE_BW_SHARE as it is
    share = engines.expert_bw_share(w.engine)
    key = (_groups_token(c.model), iw.fmt, iw.kept, c.runs_as, w.tp, w.pp, ep, etp, w.engine, share, c.bw, c.bw_eff)
    rows = _LINEAR_ROWS.get(key)
    if rows is None:
        if len(_LINEAR_ROWS) > 4096:
            _LINEAR_ROWS.clear()  # the tokens stay valid: only _groups_token clears _GROUPS, and none is reused
        rows = _LINEAR_ROWS[key] = _linear_rows(c, ep, etp)
    return rows


def _linear_rows(c: Ctx, ep: int, etp: int) -> list[_Linear]:
    """Each linear group's `_Linear`: the operands gemm() derives from it, in its order of operations.
    Reads the model's groups (nothing else of it), the weights' format, the precision the GEMMs run
    at, tp, pp, ep, etp, the engine, its experts' bandwidth share and the bandwidth (the key of
    _LINEAR_ROWS)."""
    wb, weight_only, other_b = weight_bytes_per_element(c)
    w, pp = c.w, c.w.pp
    out: list[_Linear] = []
    for g in c.model.groups:
        if g.linear is None:
            continue
        is_ep = g.role == "expert" and ep > 1
        k_in, n_out = shard_dims(g, etp if is_ep else w.tp)
        # stored in the weight format as the memory estimate counts it (block linears, less what
        # the checkpoint leaves at 16 bits: gpt-oss's attention and router); the head apart
        stored = is_quantised(g, c.weights.fmt, c.weights.kept) and g.role != "head"
        per_elt, quantised = wb if stored else other_b, weight_only and stored
        count = g.count / pp
        if is_ep:
            count /= ep
        bw = c.bw * c.bw_eff
        share = engines.expert_bw_share(w.engine) if g.role == "expert" else 1.0
        if share != 1.0:
            bw *= share
        bw_gemv = bw
        if quantised:
            bw_gemv *= WEIGHT_ONLY_GEMV_BW_SHARE_BY_ENGINE.get(w.engine or "", WEIGHT_ONLY_GEMV_BW_SHARE)
            bw_gemv *= TINYGEMM_INT4_GEMV_SHARE if c.weights.fmt.startswith("int4-g") else 1.0
        fn = n_out / (n_out + eff.GEMM_HALF_DIM) if n_out > 0 else 0.0
        fk = k_in / (k_in + eff.GEMM_HALF_DIM) if k_in > 0 else 0.0
        wo = WEIGHT_ONLY_COMPUTE_SHARE if quantised else 1.0
        nkw = n_out * k_in * per_elt
        terms = (is_ep, k_in, n_out, per_elt, quantised, count, nkw, bw, bw_gemv, fn, fk, wo)
        key = (g.stack, g.role, g.active_fraction, terms)
        same = next((i for i, r in enumerate(out) if (r.stack, r.role, r.af, r[5:17]) == key), -1)
        out.append(_Linear(g, g.stack, g.role, g.active_fraction, f"linear {g.name}", *terms, same))
    return out


def linear_step_ops(
    c: Ctx, batch: float, tokens: float, phase: str, ep: int, etp: int, dp: int, head_passes: float = 1.0
) -> tuple[list[Op], float, float]:
    """The step's linear layers (on this pipeline stage) in their stored formats, with bitsandbytes'
    dequantisation where it applies; returns (ops, linear calls, quantised calls). Each GEMM is
    gemm() and roof() written out over the context's `_Linear` rows (a plan runs ~25,000 of them):
    the same arithmetic in the same order; AutoAWQ's kernels and bitsandbytes' dequantised copies
    go through gemm() itself."""
    model, w = c.model, c.w
    pp = w.pp
    bnb = bnb_kernel(c)
    bnb4 = bnb is not None and bnb.startswith("4bit")
    slow = engines.autoawq_kernel(w) is not None
    last_token_logits = phase == "decode" or w.engine in LAST_TOKEN_LOGITS_ENGINES
    decode = phase == "decode"
    prefill_encdec = model.kind == "encoder-decoder" and phase == "prefill"
    act_b, gemm_eff, peak, fp4 = c.act_b, c.gemm_eff, c.peak, c.runs_as == "fp4"
    gemv_rate = c.fp32_peak * eff.FP32_CORE_EFF
    ops: list[Op] = []
    gemv_rows, half_rows, p, inv_p, new, append = GEMV_ROWS, eff.GEMM_HALF_ROWS, ROOF_P, _ROOF_EXP, _new_op, ops.append
    calls = qcalls = 0.0  # linear-layer calls this step (per pipeline stage), quantised ones
    made: list[tuple[float, float, float, float, float, str] | None] = []  # each row's numbers
    for row in _linear_layers(c, ep, etp):
        _, stack, role, af, name, is_ep, k_in, n_out, _, quantised, per_stage, nkw, bw_mem, bw_gemv, fn, fk, wo, same = (
            row
        )  # fmt: skip
        if decode and stack == "encoder":
            made.append(None)
            continue  # an encoder-decoder's encoder runs once, in the prefill (T5: generate() encodes first)
        hit = made[same] if same >= 0 else None
        if hit is not None:
            # the same terms as an earlier row of this step: the same numbers
            count, n, flops, nbytes, t, bound = hit
            calls += n
            qcalls += n if quantised else 0.0
            made.append(hit)
            op = new(Op, (name, phase, flops, nbytes, t, bound))
            if fp4:
                op = _fp4_launches(model, op, role, count)
            append(op)
            continue
        # per stage, and _inference_step runs a stage's ops pp times. The output layer sits on the
        # last stage, which runs it once per micro-batch passing it a step (head_passes)
        count = per_stage if role != "head" else head_passes / pp
        m = tokens * af
        if is_ep:
            # expert parallelism: this GPU holds 1/ep of the experts (each split over etp GPUs)
            # and computes them for the tokens of every data-parallel replica
            m *= dp
        if role == "head":
            m = batch if last_token_logits else tokens  # logits for the last position only, or all
        if prefill_encdec and stack == "decoder":
            m = batch  # the prompt goes to the encoder; the decoder starts from one start token
        touched = 1.0
        if role == "expert" and af < 1.0:
            # experts one step touches: 1 - (1 - top_k/E)^tokens of them (uniform routing)
            routed = tokens * (dp if is_ep else 1)
            touched = max(1.0 - (1.0 - af) ** max(routed, 1.0), 1e-9)
        rows = m / touched
        n = count * touched
        calls += n
        qcalls += n if quantised else 0.0
        if slow or (bnb4 and quantised and rows > 1.0):
            op = _slow_gemm(c, row, phase, rows, (count, touched), bnb4, ops)
            made.append(None)
        else:
            # gemm() and roof(), written out (max(e, 1e-6) as max picks it: e unless e < 1e-6, NaN included)
            flops = 2.0 * rows * n_out * k_in * n
            nbytes = n * (nkw + (rows * k_in + rows * n_out) * act_b)
            if rows < gemv_rows:
                rate, bw = gemv_rate, bw_gemv
            else:
                fm = rows / (rows + half_rows) if rows > 0 else 0.0
                e = gemm_eff * (fm * fn * fk) * wo
                rate, bw = peak * (1e-6 if e < 1e-6 else e), bw_mem
            t_c = flops / rate if flops > 0 else 0.0
            t_m = nbytes / bw if nbytes > 0 else 0.0
            t = (t_c**p + t_m**p) ** inv_p
            bound = "compute" if t_c >= t_m else "memory"
            made.append((count, n, flops, nbytes, t, bound))
            op = new(Op, (name, phase, flops, nbytes, t, bound))
        if fp4:
            op = _fp4_launches(model, op, role, count)
        append(op)
    return ops, calls, qcalls


def _fp4_launches(model: ModelSpec, op: Op, role: str, count: float) -> Op:
    """One (grouped) block-scaled GEMM launch per layer and projection: its fixed latency added."""
    launches = count / model.num_experts if role == "expert" and model.num_experts else count
    return Op(op.name, op.phase, op.flops, op.bytes, op.time_s + launches * eff.FP4_GEMM_LATENCY_S, op.bound)


def _slow_gemm(
    c: Ctx, row: _Linear, phase: str, rows: float, calls: tuple[float, float], bnb4: bool, ops: list[Op]
) -> Op:
    """gemm() itself, for AutoAWQ's kernels and bitsandbytes' 4-bit path: with more than one token,
    bitsandbytes dequantises the 4-bit weight to a 16-bit copy (an op added to `ops`) and runs a plain
    GEMM on it (its gemv_4bit kernel takes a single token only)."""
    (count, touched), per_elt, quantised = calls, row.per_elt, row.quantised
    if bnb4 and quantised and rows > 1.0:
        dequant = row.n_out * row.k_in * count * touched * NF4_DEQUANT_BYTES
        ops.append(roof(f"{row.g.name} 4-bit dequantise", phase, 0.0, dequant, 1.0, c.bw * eff.COPY_BW_EFF))
        per_elt, quantised = 2.0, False
    share = engines.expert_bw_share(c.w.engine) if row.g.role == "expert" else 1.0
    return gemm(c, row.name, phase, rows, row.n_out, row.k_in, count * touched, per_elt, quantised, share)


class _Stack(NamedTuple):
    """The step-invariant terms of one attention stack on a context (`_attention_stacks`)."""

    s: StackShape
    layers: float  # on this pipeline stage
    kv_per_tok: float  # cached elements per token and layer
    kv_shards: int
    qkv: float  # 2 q + kv_per_tok: prefill activations read and written per token and layer
    qo: float  # q + attn_out: score and value FLOPs per key / 2
    e_prefill: float  # the kernel's attention efficiency (before the prompt's size factor)
    rate_decode: float  # the decode kernel's rate: 16-bit peak x efficiency x its GQA size factor
    ew: float  # elementwise bytes per token and layer
    cross: bool  # an encoder-decoder's decoder with cross-attention


# (model id, what _attention_terms reads of a context) -> (the model, its terms): shared by a plan's
# contexts of one model, KV format, kernel, layout, GPU architecture and rates; the model is kept, and
# compared, so that its id cannot be another model's
_ATTENTION: dict[tuple[Any, ...], tuple[ModelSpec, tuple[float, str, str, list[_Stack]]]] = {}


def _attention_stacks(c: Ctx) -> tuple[float, str, str, list[_Stack]]:
    """(KV bytes per value, prefill kernel, decode kernel, each stack's `_Stack`), once per context
    (the memo read first: once() takes a closure a call)."""
    hit: tuple[float, str, str, list[_Stack]] | None = c.memo.get("attention")
    return hit if hit is not None else c.once("attention", lambda: _shared_attention_terms(c))


def _shared_attention_terms(c: Ctx) -> tuple[float, str, str, list[_Stack]]:
    """_attention_terms, shared through _ATTENTION."""
    w = c.w
    key = (
        id(c.model), w.effective_kv_dtype, w.engine, w.attention_impl, w.is_training, w.tp, w.pp,
        c.gpu.architecture, c.peak16, c.act_b, c.fused,
    )  # fmt: skip
    hit = _ATTENTION.get(key)
    if hit is not None and hit[0] is c.model:
        return hit[1]
    if len(_ATTENTION) > 4096:
        _ATTENTION.clear()
    terms = _attention_terms(c)
    _ATTENTION[key] = (c.model, terms)
    return terms


def _attention_terms(c: Ctx) -> tuple[float, str, str, list[_Stack]]:
    """`_attention_stacks`' terms. Reads the model, the workload's KV format, engine, attention_impl,
    task, tp and pp, the GPU's architecture (attention_efficiency), the 16-bit rate, the activation
    bytes and whether the elementwise kernels are fused (the key of _ATTENTION)."""
    model, w = c.model, c.w
    kv_b = storage_format(w.effective_kv_dtype).bytes_per_value
    kernel = attn_kernel(c)
    # AutoAWQ decodes one query with FasterTransformer's fused single_query_attention kernel
    dec_kernel = "fa2" if w.engine == "autoawq" else kernel
    # queries sharing one cached head (MLA's latent: all of them, decode runs as MQA)
    gqa = model.num_heads / (1 if model.attention_type == "mla" else max(model.num_kv_heads, 1))
    e_dec = eff.attention_efficiency(c.gpu, kernel=dec_kernel) * eff.size_factor(gqa * 16)
    out = []
    for a in stack_shapes(model):
        kv_per_tok = (a.k + a.v) if model.attention_type != "mla" else a.latent
        cross = bool(a.cross_layers) and a.stack == "decoder" and model.kind == "encoder-decoder"
        out.append(
            _Stack(
                a,
                a.layers / w.pp,
                kv_per_tok,
                kv_shards(model, w.tp),
                2 * a.q + kv_per_tok,
                a.q + a.attn_out,
                eff.attention_efficiency(c.gpu, kernel=kernel),
                c.peak16 * e_dec,
                elementwise_bytes(a, c),
                cross,
            )
        )
    return kv_b, kernel, dec_kernel, out


def attention_step_ops(c: Ctx, batch: float, tokens: float, new_tokens: float, ctx_len: float, phase: str) -> list[Op]:
    """Attention over the KV cache (prefill: the prompt's square; decode: one query per sequence
    over its context), eager attention's materialised scores, and each layer's elementwise work."""
    model, w = c.model, c.w
    tp = w.tp
    ops: list[Op] = []
    kv_b, kernel, dec_kernel, stacks = _attention_stacks(c)
    prefill = phase == "prefill"
    if not prefill:
        kernel = dec_kernel
    awq = w.engine == "autoawq"
    bw, copy_bw = c.bw * c.bw_eff, c.bw * eff.COPY_BW_EFF
    for st in stacks:
        a_stack, layers, kv_per_tok = st.s, st.layers, st.kv_per_tok
        if prefill:
            attn_ctx = avg_context(new_tokens, a_stack.window, a_stack.stack == "decoder")
            if ctx_len > 0:  # a cached prefix: the new tokens attend to its keys too
                attn_ctx = after_prefix_context(new_tokens, ctx_len, a_stack.window)
            qtok = tokens
        else:
            if a_stack.stack == "encoder":
                continue  # the encoder runs once, in the prefill
            full = ctx_len if a_stack.window is None else min(ctx_len, a_stack.window)
            if awq:  # its fused cache rolls at its window (estimators/engines.py)
                full = min(full, engines.autoawq_cache_tokens(w, model))
            attn_ctx = full
            qtok = batch
        # key-layer products: an encoder-decoder's decoder layer attends to its own decoder tokens
        # and, in cross-attention, to the input's K/V (memory.inference counts the same cache)
        key_layers = attn_ctx * layers
        written = qtok * layers  # K/V the step writes to the cache
        if st.cross:
            self_ctx = 1.0 if prefill else max(ctx_len - w.input_len, 1.0)
            key_layers = self_ctx * layers + w.input_len * a_stack.cross_layers
            if prefill:  # one start token per sequence; the cross K/V of the input written once
                qtok = batch
                written = batch * layers + batch * w.input_len * a_stack.cross_layers
        flops = 2.0 * qtok * key_layers * st.qo / tp
        if prefill:
            nbytes = qtok * st.qkv * c.act_b / tp * layers
            nbytes += written * kv_per_tok * kv_b / st.kv_shards  # KV write
            if ctx_len > 0:  # the cached prefix's K/V, read once per sequence and layer
                seen = ctx_len if a_stack.window is None else min(ctx_len, a_stack.window)
                nbytes += batch * seen * layers * kv_per_tok * kv_b / st.kv_shards
            rate = c.peak16 * (st.e_prefill * eff.size_factor(new_tokens))
        else:
            nbytes = batch * key_layers * kv_per_tok * kv_b / st.kv_shards
            rate = st.rate_decode
        # roof(), written out (as below)
        t_c = flops / rate if flops > 0 else 0.0
        t_m = nbytes / bw if nbytes > 0 else 0.0
        t = (t_c**ROOF_P + t_m**ROOF_P) ** _ROOF_EXP
        op = _new_op(Op, ("attention", phase, flops, nbytes, t, "compute" if t_c >= t_m else "memory"))
        if awq and not prefill:
            # FasterTransformer's masked MHA: one thread block per query head and sequence streams
            # its KV head's cache at a per-block rate (estimators/engines.py)
            per_block = attn_ctx * (a_stack.k + a_stack.v) / max(model.num_kv_heads, 1) * kv_b
            t_block = layers * per_block / engines.AUTOAWQ_FT_BLOCK_BYTES_PER_S
            op = Op(op.name, op.phase, op.flops, op.bytes, max(op.time_s, t_block), op.bound)
        ops.append(op)
        if kernel == "eager":
            # eager attention materialises every query's scores over the whole context (the causal
            # mask hides half of a prefill's square without saving its traffic); no dropout
            square = new_tokens if a_stack.window is None else min(new_tokens, a_stack.window)
            keys = square if prefill else attn_ctx
            ops.append(eager_scores_op(c, phase, qtok * keys * max(a_stack.heads, 1) / tp * layers, False))
        ew = st.ew * tokens * layers / tp
        t_c, t_m = 0.0, ew / copy_bw if ew > 0 else 0.0  # no FLOPs: roof()'s compute term is 0
        t = (t_c**ROOF_P + t_m**ROOF_P) ** _ROOF_EXP
        ops.append(
            _new_op(Op, ("norms, activations, residuals", phase, 0.0, ew, t, "compute" if t_c >= t_m else "memory"))
        )
    return ops


def after_prefix_context(new: float, prefix: float, window: float | None) -> float:
    """Mean keys a causal query attends to when `new` tokens follow `prefix` cached ones: the keys
    of positions prefix .. prefix + new - 1, the whole square's less the prefix's own (prefix +
    (new + 1) / 2 without a window; avg_context's ramp with one)."""
    whole = avg_context(prefix + new, window, True) * (prefix + new)
    return (whole - avg_context(prefix, window, True) * prefix) / new
