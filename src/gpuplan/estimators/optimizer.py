"""Optimizer state memory per trainable parameter, for each optimizer a workload may name.

Sizes are per element of the trainable parameters. "State dtype" follows what the libraries do:
torch.optim creates its moments like the parameter (fp32 under mixed precision with fp32 master
weights; bf16 when training purely in bf16); bitsandbytes' 8-bit optimizers store 1 byte per
moment plus one fp32 absmax per block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# bitsandbytes 8-bit optimizers (Dettmers et al. 2022, "8-bit Optimizers via Block-wise
# Quantization", sec. 2): 1 byte per state value + one fp32 absmax per block of 256 values
# (bitsandbytes/optim/optimizer.py Optimizer8bit: blockwise=True, block size 256 in the kernels).
_BNB_BLOCK: Final = 256
BNB_8BIT_BYTES_PER_STATE: Final = 1.0 + 4.0 / _BNB_BLOCK
# bitsandbytes keeps tensors with fewer than min_8bit_size = 4096 elements in 32-bit state.
BNB_MIN_8BIT_SIZE: Final = 4096


@dataclass(frozen=True)
class OptimizerInfo:
    name: str
    moments: int  # state tensors per parameter (Adam: exp_avg and exp_avg_sq)
    eight_bit: bool
    paged: bool  # bitsandbytes paged (unified-memory) states: evicted to host under pressure
    factored: bool  # Adafactor: factored second moment for matrices
    # transient bytes per trainable element during optimizer.step(): torch's foreach AdamW
    # materialises sqrt(exp_avg_sq) for all parameters at once (torch/optim/adamw.py,
    # _multi_tensor_adamw: torch._foreach_sqrt); bitsandbytes and SGD update in place
    step_temp_elements: float
    source: str


OPTIMIZER_INFO: Final[dict[str, OptimizerInfo]] = {
    # fused AdamW (torch fused=True; the transformers Trainer and torchtune default) updates in place
    "adamw": OptimizerInfo("AdamW", 2, False, False, False, 0.0, "Loshchilov & Hutter 2019; torch.optim.AdamW fused"),
    "adamw-foreach": OptimizerInfo(
        "AdamW (foreach)", 2, False, False, False, 1.0, "torch.optim.AdamW foreach=True: one fp32 temporary per param"
    ),
    "adam": OptimizerInfo("Adam", 2, False, False, False, 0.0, "Kingma & Ba 2015; torch.optim.Adam fused"),
    "paged-adamw": OptimizerInfo("paged AdamW (32-bit)", 2, False, True, False, 0.0, "bitsandbytes PagedAdamW32bit"),
    "adamw-8bit": OptimizerInfo("AdamW 8-bit", 2, True, False, False, 0.0, "bitsandbytes AdamW8bit"),
    "paged-adamw-8bit": OptimizerInfo("paged AdamW 8-bit", 2, True, True, False, 0.0, "bitsandbytes PagedAdamW8bit"),
    "sgd": OptimizerInfo("SGD", 0, False, False, False, 0.0, "torch.optim.SGD, momentum=0: no state"),
    "sgd-momentum": OptimizerInfo("SGD with momentum", 1, False, False, False, 0.0, "torch.optim.SGD momentum_buffer"),
    # Adafactor (Shazeer & Stern 2018, sec. 3): no first moment by default (beta1=None in
    # transformers.optimization.Adafactor); second moment factored into row and column sums
    "adafactor": OptimizerInfo("Adafactor", 1, False, False, True, 0.0, "Shazeer & Stern 2018, sec. 3"),
    # Lion (Chen et al. 2023, Alg. 1): one momentum buffer
    "lion": OptimizerInfo("Lion", 1, False, False, False, 0.0, "Chen et al. 2023, Algorithm 1"),
    "lion-8bit": OptimizerInfo("Lion 8-bit", 1, True, False, False, 0.0, "bitsandbytes Lion8bit"),
    "paged-lion-8bit": OptimizerInfo("paged Lion 8-bit", 1, True, True, False, 0.0, "bitsandbytes PagedLion8bit"),
}


def optimizer_state_bytes(
    optimizer: str,
    trainable: list[tuple[int, int, int | None]],
    state_bytes: float,
) -> float:
    """Optimizer state bytes for the trainable tensors.

    `trainable` lists (numel, count, rows) per tensor group, rows being the first dimension of a
    matrix (None for vectors); `state_bytes` is the size of a 32-bit-or-param-dtype moment.
    """
    info = OPTIMIZER_INFO[optimizer]
    total = 0.0
    for numel, count, rows in trainable:
        if info.factored and rows is not None and rows > 1 and numel // rows > 1:
            # Adafactor: row and column accumulators, r + c values instead of r x c
            per = rows + numel // rows
            total += per * count * state_bytes
        elif info.eight_bit and numel >= BNB_MIN_8BIT_SIZE:
            total += info.moments * numel * count * BNB_8BIT_BYTES_PER_STATE
        else:
            total += info.moments * numel * count * state_bytes
    return total
