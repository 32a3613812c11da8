"""torchtitan's FSDP2 under pipeline parallelism, the rule the memory estimate, the time estimate
and the layout search share: kept here, apart from estimators/parallel.py, so that a memory-only
command (`gpuplan fit`) loads none of the time estimators' collectives (tests/test_startup.py)."""

from __future__ import annotations

from typing import Final

# Frameworks whose FSDP (ZeRO-3) runs under pipeline parallelism with the stage's parameters gathered
# once per step. torchtitan's apply_fsdp sets reshard_after_forward=False on every block when PP is
# enabled ("to avoid per-microbatch all-gathers, which can be expensive and non-overlapped";
# pytorch/torchtitan:torchtitan/models/llama3/infra/parallelize.py@81c1243395b46ce693a0681cfe1bb20e9b9433fb,
# fsdp_reshard_after_forward "default"), and torch.distributed.pipelining's stage turns off
# reshard_after_backward and gradient sync for every micro-batch's backward, then runs FSDP's
# post-backward (the reduce-scatter) after the last one (torch/distributed/pipelining/stage.py,
# backward_maybe_with_nosync). Meanwhile FSDP2 accumulates the stage's unsharded gradients in its
# reduce dtype (_fsdp_param.py to_accumulated_grad_if_needed; torchtitan's mixed_precision_reduce
# defaults to float32). DeepSpeed refuses ZeRO-2/3 with its pipeline engine and Megatron-LM/NeMo
# have only the distributed optimizer (ZeRO-1), so the rule is torchtitan's alone.
FSDP_PP_GATHER_ONCE: Final = frozenset({"torchtitan"})
# torchtitan's default mixed_precision_reduce (JobConfig.Training): float32, 4 bytes per gradient
FSDP_PP_GRAD_BYTES: Final = 4.0


def fsdp_keeps_stage_gathered(framework: str | None, zero: int, pp: int, dp: float) -> bool:
    """Whether ZeRO-3 under pipeline parallelism keeps each stage's parameters gathered and its
    gradients unsharded for the whole step (torchtitan's FSDP2 + PP: FSDP_PP_GATHER_ONCE)."""
    return framework in FSDP_PP_GATHER_ONCE and zero >= 3 and pp > 1 and dp > 1
