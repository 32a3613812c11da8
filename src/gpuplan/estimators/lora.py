"""LoRA adapters: which linear layers they adapt and how many parameters they add.

LoRA (Hu et al. 2021, sec. 4.1) adds A (in x r) and B (r x out) beside a frozen W (in x out):
r x (in + out) trainable parameters per adapted matrix. The default targets per family are
PEFT's (peft/utils/constants.py, TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING), kept in the
family table (specs/model/families.py);
"all-linear" adapts every linear layer of the blocks, not the output head (PEFT's
`target_modules="all-linear"`, which also excludes the head).
"""

from __future__ import annotations

from typing import Final

from gpuplan.errors import InvalidSettingError
from gpuplan.specs.model import ModelSpec, ParamGroup, family_of


def default_targets(model_type: str) -> tuple[str, ...]:
    """PEFT's default target modules for `model_type` (the family table's lora_targets); () if none."""
    fam = family_of(model_type)
    return fam.lora_targets if fam is not None else ()


_BLOCK_ROLES: Final = ("attention", "mlp", "expert")

# The short names people write for a Llama-style block's projections (papers' W_q/W_v, "q,v" in
# tables and recipes): each is the `<name>_proj` module PEFT matches by suffix
# (peft/tuners/tuners_utils.py check_target_module_exists: the module name equals the target or
# ends with "." + target), so "q" alone would match no Llama module in PEFT itself
_SHORT: Final = ("q", "k", "v", "o", "gate", "up", "down")

# torchtune's module names for the same projections: lora_attn_modules takes q_proj, k_proj, v_proj,
# output_proj (torchtune/modules/peft/_utils.py LORA_ATTN_MODULES), and its MLP's w1, w2, w3 are
# HF's gate_proj, down_proj, up_proj (torchtune/models/convert_weights.py _FROM_HF)
_TORCHTUNE: Final = {"output_proj": "o_proj", "w1": "gate_proj", "w2": "down_proj", "w3": "up_proj"}


def _leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def lora_targets(model: ModelSpec, targets: str | list[str]) -> list[ParamGroup]:
    """The linear groups LoRA adapts for `targets` ("default", "all-linear" or module names)."""
    linears = [g for g in model.linear_layers() if g.numel > 0]
    if targets == "all-linear":
        chosen = [g for g in linears if g.role in _BLOCK_ROLES]
    else:
        names = default_targets(model.model_type) if targets == "default" else _resolve(linears, tuple(targets))
        chosen = [g for g in linears if _leaf(g.name) in names or g.name in names]
        # a name the user gave that is no linear layer is refused, not dropped beside the ones that
        # match (a tied head, lm_head on Gemma, is one: it holds no weight of its own to adapt)
        every = [g.name.split(" (", 1)[0] for g in model.linear_layers()]  # "lm_head (tied to ...)"
        found = {_leaf(n) for n in every} | set(every)
        unknown = [n for n in names if n not in found] if targets != "default" else []
        if not chosen or unknown:
            known = sorted({_leaf(g.name) for g in linears})
            what = f"{unknown!r} match" if chosen else f"{list(names) or targets!r} match"
            raise InvalidSettingError(
                f"The 'lora_targets' {what} no linear layer of {model.name}. "
                f"Its linear layers: {', '.join(known)} (or use 'all-linear')."
            )
    return chosen


def _resolve(linears: list[ParamGroup], names: tuple[str, ...]) -> tuple[str, ...]:
    """Module names as the model has them: a name the model has is kept (T5's own q and v), a short
    one (q, k, v, o, gate, up, down, any case, W_q style too) becomes its `_proj` module where the
    model has one (q -> q_proj), and torchtune's names theirs (output_proj -> o_proj, w1 -> gate_proj)."""
    leaves = {_leaf(g.name) for g in linears} | {g.name for g in linears}
    out = []
    for name in names:
        short = name.lower().removeprefix("w_")
        if name not in leaves and short in _SHORT and f"{short}_proj" in leaves:
            name = f"{short}_proj"
        elif name not in leaves and _TORCHTUNE.get(name.lower(), "") in leaves:
            name = _TORCHTUNE[name.lower()]
        out.append(name)
    return tuple(out)


def model_target_names(model: ModelSpec, names: list[str]) -> list[str]:
    """A list of target names as `model` names its modules (q -> q_proj, output_proj -> o_proj, w1 ->
    gate_proj on a Llama; the model's own names kept), each once, in the order given: what PEFT,
    Axolotl and LLaMA-Factory match module names against. Names it has no module for pass through
    unchanged (lora_targets refuses them)."""
    resolved = _resolve([g for g in model.linear_layers() if g.numel > 0], tuple(names))
    return list(dict.fromkeys(resolved))


def adapter_params(targets: list[ParamGroup], rank: int) -> int:
    """Trainable LoRA parameters: r x (in + out) per adapted matrix (Hu et al. 2021)."""
    return sum(rank * (g.linear[0] + g.linear[1]) * g.count for g in targets if g.linear is not None)


def lora_param_count(model: ModelSpec, targets: str | list[str], rank: int) -> int:
    """Trainable LoRA parameters for `targets` ("default", "all-linear" or module names)."""
    return adapter_params(lora_targets(model, targets), rank)
