"""Bytes per stored value and per-GPU compute fallbacks."""

from __future__ import annotations

import pytest

from gpuplan.errors import InvalidSettingError
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.precision import (
    bytes_per_value,
    checkpoint_format,
    compute_peak,
    kept_unquantised,
    storage_format,
)


@pytest.mark.parametrize(
    ("dtype", "bits"),
    [
        ("fp32", 32),
        ("tf32", 32),
        ("bf16", 16),
        ("fp16", 16),
        ("fp8", 8),
        ("fp8_e4m3", 8),
        ("int8", 8),
        ("int4", 4),
        # QLoRA sec. 3: 4 + 8/64 + 32/(64*256) = 4.127 bits with double quantisation
        ("nf4", 4.127),
        ("nf4-no-dq", 4.5),
        # GPTQ/AWQ group 128: 4 + (16 + 4)/128
        ("gptq", 4.156),
        ("awq", 4.156),
        # torchao / gpt-fast int4: a bf16 scale and a bf16 zero per group -> 4 + 32/g
        ("int4-g32", 5.0),
        ("int4-g64", 4.5),
        ("int4-g128", 4.25),
        ("int4-g256", 4.125),
        # NVFP4: an E4M3 scale per 16 values; OCP MXFP4: an E8M0 scale per 32
        ("nvfp4", 4.5),
        ("mxfp4", 4.25),
        # ggml blocks: q8_0 34 B / 32 weights, q4_0 18 B / 32
        ("q8_0", 8.5),
        ("q4_0", 4.5),
        # llama.cpp quantize README, Llama 2 7B bits per weight
        ("q6_k", 6.56),
        ("q5_k_m", 5.68),
        ("q4_k_m", 4.84),
        ("q3_k_m", 3.91),
        ("q2_k", 3.35),
    ],
)
def test_bits_per_value(dtype: str, bits: float) -> None:
    assert storage_format(dtype).bits_per_value == pytest.approx(bits, abs=1e-3)


def test_aliases_and_bytes() -> None:
    assert bytes_per_value("bfloat16") == 2.0
    assert bytes_per_value("Q4_K_M") == pytest.approx(4.84 / 8)
    with pytest.raises(InvalidSettingError, match=r"Unknown weight/KV dtype 'q4km'.*Did you mean"):
        bytes_per_value("q4km")


def test_native_peaks(catalog: Catalog) -> None:
    h100 = catalog.get("H100")
    p = compute_peak(h100, "fp8")
    assert (p.runs_as, p.flop_per_s, p.reason) == ("fp8", 1979e12, "")
    assert compute_peak(catalog.get("4090"), "fp8").reason == ""


def test_fp8_on_a100_runs_at_bf16_rate(catalog: Catalog) -> None:
    p = compute_peak(catalog.get("A100"), "fp8")
    assert p.runs_as == "bf16" and p.flop_per_s == 312e12
    assert "no FP8 tensor cores" in p.reason and "8.9" in p.reason


def test_v100_has_no_bf16(catalog: Catalog) -> None:
    p = compute_peak(catalog.get("V100"), "bf16")
    assert p.runs_as == "fp32" and p.flop_per_s == pytest.approx(15.7e12)
    assert "use fp16" in p.reason
    assert compute_peak(catalog.get("V100"), "fp16").flop_per_s == 125e12


def test_t4_tf32_falls_back_to_fp32(catalog: Catalog) -> None:
    p = compute_peak(catalog.get("T4"), "tf32")
    assert p.runs_as == "fp32" and "TF32" in p.reason


def test_every_gpu_has_a_peak_for_every_precision(catalog: Catalog) -> None:
    for g in catalog:
        for prec in ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4"):
            assert compute_peak(g, prec).flop_per_s > 0


def test_unknown_precision(catalog: Catalog) -> None:
    with pytest.raises(InvalidSettingError, match="The 'precision' parameter must be one of"):
        compute_peak(catalog.get("L4"), "fp6")


@pytest.mark.parametrize(
    ("qc", "fmt"),
    [
        ({"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}, "mxfp4"),
        ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}, "fp8"),
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "awq"),
        ({"quant_method": "gptq", "bits": 4}, "gptq"),
        ({"quant_method": "gptq", "bits": 8}, None),  # 8-bit GPTQ: no matching storage format
        (
            {
                "quant_method": "bitsandbytes",
                "load_in_4bit": True,
                "bnb_4bit_quant_type": "nf4",
                "bnb_4bit_use_double_quant": True,
            },
            "nf4",
        ),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, "nf4-no-dq"),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "int8"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}, "nvfp4"),
        ({"quant_method": "compressed-tensors"}, None),
    ],
)
def test_checkpoint_formats_from_quantization_config(qc: dict[str, object], fmt: str | None) -> None:
    """config.json's quantization_config names the storage format a pre-quantised checkpoint ships in."""
    got = checkpoint_format({"quantization_config": qc})
    assert (got.fmt if got else None) == fmt


def test_unquantised_module_patterns_match_parameter_groups() -> None:
    """gpt-oss's modules_to_not_convert keeps attention and router at 16 bits, not the experts."""
    keep = ("model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head")
    assert kept_unquantised("self_attn.q_proj", keep) and kept_unquantised("mlp.router", keep)
    assert kept_unquantised("lm_head", keep) and kept_unquantised("embed_tokens", keep)
    assert not kept_unquantised("mlp.experts.gate_up_proj", keep)


def test_a_canonical_storage_name_is_its_own_normalised_form_and_no_alias() -> None:
    """storage_format answers a canonical name from its table at once: right only while no
    canonical name is also an alias or changes when normalised (lower case, no spaces)."""
    from gpuplan.specs import precision

    for name in precision.STORAGE_FORMATS:
        assert name == name.strip().lower().replace(" ", "")
        assert name not in precision._STORAGE_ALIASES
        assert storage_format(name) is precision.STORAGE_FORMATS[name]
    assert storage_format(" BF16 ") is precision.STORAGE_FORMATS["bf16"]
