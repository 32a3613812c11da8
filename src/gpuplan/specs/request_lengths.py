"""Variable-length requests: the tail request a serving engine must hold whole."""

from __future__ import annotations

from gpuplan.errors import InvalidSettingError
from gpuplan.specs.workload import Workload


def tail_sequence_len(w: Workload) -> int:
    """Tokens of the longest request the engine must hold whole: input_len + output_len, or with
    variable-length requests the 90th-percentile prompt plus the 90th-percentile output
    (input_len_p90, output_len_p90; taken together, an upper bound on the p90 request). vLLM checks
    at start-up that one max_model_len sequence fits the KV budget (vllm/v1/core/kv_cache_utils.py
    _check_enough_kv_cache_memory) and refuses a longer prompt; its paged cache then holds requests
    at the lengths they reach (PagedAttention: blocks allocated as a sequence grows), so the cache's
    capacity and the speed stay at the means."""
    n_in = w.input_len if w.input_len_p90 is None else w.input_len_p90
    n_out = w.output_len if w.output_len_p90 is None else w.output_len_p90
    if n_in < w.input_len or n_out < w.output_len:
        raise InvalidSettingError(
            f"input_len_p90 {n_in} / output_len_p90 {n_out} lie below the means input_len {w.input_len} / "
            f"output_len {w.output_len}: a 90th percentile of lengths with a long tail is at least the mean. "
            "Give the means in input_len and output_len and the percentiles in the _p90 keys."
        )
    return max(n_in + n_out, 1)
