"""Reading a config.json: typed access with one clear error per missing or bad key, and the
bounds past which a config describes no model."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from gpuplan.errors import ModelConfigError

# Sanity bounds on what a config may ask for: integers past 2**53 are not exact as floats (FLOPs
# and bytes are floats), and the model is built layer by layer.
MAX_CONFIG_INT: Final = 2**53
MAX_LAYERS: Final = 100_000

# Bounds on a transformer's shape, far above every real model (the widest published, Megatron's 1T
# GPT, has hidden 25,600 and 128 heads of 200; vocabularies reach ~260k; DeepSeek-V3 has 256 routed
# experts), so only nonsense is refused: a 1e12 hidden size would otherwise price a 6e17-parameter
# model without a word.
MAX_HIDDEN: Final = 1_000_000
MAX_HEAD_DIM: Final = 65_536
MAX_FFN: Final = 10_000_000
MAX_VOCAB: Final = 100_000_000
MAX_EXPERTS: Final = 100_000
# the longest context a config may claim: 100x Llama 4 Scout's 10,485,760 tokens
MAX_CONTEXT: Final = 1_000_000_000
MAX_BLOCKS: Final = 10_000  # ResNet blocks, listed one by one (see builders.resnet)
# Whatever the keys, the whole model: 10**15 parameters is ~500x the largest published (~2e12), and
# keeps every byte and FLOP count far from float overflow (1e15 x 1e18 tokens x 6 = 6e33).
MAX_PARAMS: Final = 10**15


class Cfg:
    """Typed access to a config dict, with one clear error per missing or bad key."""

    def __init__(self, raw: Mapping[str, Any], name: str) -> None:
        self.raw = raw
        self.name = name

    def has(self, *keys: str) -> bool:
        return any(k in self.raw and self.raw[k] is not None for k in keys)

    def get_int(self, *keys: str, default: int | None = None) -> int:
        for k in keys:
            v = self.raw.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v != int(v) or v < 0:
                raise ModelConfigError(f"{self.name}: config key {k!r} must be a non-negative integer. Got {v!r}.")
            if v > MAX_CONFIG_INT:
                raise ModelConfigError(f"{self.name}: config key {k!r} = {v!r} is too large for a model size.")
            return int(v)
        if default is not None:
            return default
        raise ModelConfigError(
            f"{self.name}: config.json lacks {' / '.join(repr(k) for k in keys)}, needed for a "
            f"{self.raw.get('model_type')!r} model."
        )

    def int_list(self, key: str, default: list[int] | None = None) -> list[int]:
        """A list of non-negative integers (resnet depths, mlp_only_layers, ...)."""
        v = self.raw.get(key)
        if v is None:
            if default is not None:
                return default
            raise ModelConfigError(f"{self.name}: config.json lacks {key!r}, a list of integers.")
        if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in v):
            raise ModelConfigError(
                f"{self.name}: config key {key!r} must be a list of non-negative integers. Got {v!r}."
            )
        return list(v)

    def sub(self, key: str) -> Cfg:
        """A nested object (e.g. MPT's attn_config) with the same typed access."""
        v = self.raw.get(key) or {}
        if not isinstance(v, Mapping):
            raise ModelConfigError(f"{self.name}: config key {key!r} must be an object. Got {v!r}.")
        return Cfg(v, f"{self.name}: {key}")

    def layers(self, *keys: str, default: int | None = None, minimum: int = 1) -> int:
        """A layer count (named by the first key): at least `minimum`, at most MAX_LAYERS."""
        n = self.get_int(*keys, default=default)
        if minimum > 0:
            self.positive(n, keys[0])
        if n > MAX_LAYERS:
            raise ModelConfigError(
                f"{self.name}: config key {keys[0]!r} = {n} layers is more than gpuplan models ({MAX_LAYERS:,})."
            )
        return n

    def opt_int(self, *keys: str) -> int | None:
        return self.get_int(*keys) if self.has(*keys) else None

    def get_bool(self, key: str, default: bool) -> bool:
        v = self.raw.get(key, default)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise ModelConfigError(f"{self.name}: config key {key!r} must be true or false. Got {v!r}.")
        return v

    def get_str(self, key: str, default: str) -> str:
        v = self.raw.get(key, default)
        return default if v is None else str(v)

    def positive(self, value: int, key: str) -> int:
        if value <= 0:
            raise ModelConfigError(f"{self.name}: config key {key!r} must be positive. Got {value}.")
        return value
