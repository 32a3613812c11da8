"""Hub families whose modeling code ships with the checkpoint (trust_remote_code): Qwen v1, Baichuan,
ChatGLM, InternLM and InternLM 2, read from their plain-JSON config.json only; and the names people
write for LoRA targets and attention kernels.

The fixtures in tests/hub_configs/ were written for these tests from the public config.json of each
hub repository (the keys the builders read, values as published; nothing else copied):
  qwen-7b.json            Qwen/Qwen-7B config.json
  chatglm3-6b.json        THUDM/chatglm3-6b config.json
  baichuan2-7b-base.json  baichuan-inc/Baichuan2-7B-Base config.json
  internlm2-7b.json       internlm/internlm2-7b config.json
  internlm-7b.json        internlm/internlm-7b config.json
The published sizes the totals are checked against are the parameter counts the hub shows on each
model page (from the checkpoint's safetensors): Qwen-7B 7.72B, chatglm3-6b 6.24B, Baichuan2-7B 7.5B,
internlm2-7b 7.74B. The exact totals below are recounted by hand from each family's modeling file
(named in builders/hub.py) in the comments, independently of the builders.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import RunCli
from gpuplan.errors import InvalidSettingError, ModelConfigError
from gpuplan.estimators.activations import stack_shapes
from gpuplan.estimators.lora import lora_param_count, lora_targets
from gpuplan.results import TrainingSpeed
from gpuplan.specs.model import FAMILIES, ModelSpec, model_from_config
from gpuplan.specs.workload import make_workload

CONFIGS = Path(__file__).parent / "hub_configs"


def _config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / f"{name}.json").read_text())
    return data


def _model(name: str) -> ModelSpec:
    return model_from_config(_config(name), name)


d = 4096
# Qwen-7B: wte + lm_head 151936 x 4096 each; per layer c_attn 4096 -> 3 x 4096 with a bias, c_proj
# 4096 -> 4096, w1 and w2 4096 -> 22016 / 2 = 11008, c_proj 11008 -> 4096, two RMSNorms; ln_f
QWEN_7B = 2 * 151936 * d + 32 * (d * 3 * d + 3 * d + d * d + 3 * d * 11008 + 2 * d) + d
# chatglm3-6b: word embeddings + output_layer 65024 x 4096; per GLMBlock query_key_value
# 4096 -> 4096 + 2 x 2 x 128 = 4608 with a bias (add_qkv_bias), dense 4096 -> 4096, dense_h_to_4h
# 4096 -> 2 x 13696, dense_4h_to_h 13696 -> 4096, two RMSNorms; final_layernorm
CHATGLM3_6B = 2 * 65024 * d + 28 * (d * 4608 + 4608 + d * d + d * 2 * 13696 + 13696 * d + 2 * d) + d
# Baichuan2-7B: embed_tokens + lm_head (NormHead) 125696 x 4096; per layer W_pack 4096 -> 3 x 4096,
# o_proj, gate/up/down 4096 <-> 11008, two RMSNorms; norm
BAICHUAN2_7B = 2 * 125696 * d + 32 * (4 * d * d + 3 * d * 11008 + 2 * d) + d
# internlm2-7b: tok_embeddings + output 92544 x 4096; per layer wqkv 4096 -> (32 + 2 x 8) x 128, wo,
# w1/w3/w2 4096 <-> 14336, two RMSNorms; norm
INTERNLM2_7B = 2 * 92544 * d + 32 * (d * 6144 + d * d + 3 * d * 14336 + 2 * d) + d
# internlm-7b: Llama's layer with q/k/v/o biases (bias: true); vocabulary 103168
INTERNLM_7B = 2 * 103168 * d + 32 * (4 * (d * d + d) + 3 * d * 11008 + 2 * d) + d

EXACT = {
    "qwen-7b": QWEN_7B,
    "chatglm3-6b": CHATGLM3_6B,
    "baichuan2-7b-base": BAICHUAN2_7B,
    "internlm2-7b": INTERNLM2_7B,
    "internlm-7b": INTERNLM_7B,
}
PUBLISHED_B = {"qwen-7b": 7.72, "chatglm3-6b": 6.24, "baichuan2-7b-base": 7.5, "internlm2-7b": 7.74}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_totals_are_the_modeling_files_tensors(name: str) -> None:
    m = _model(name)
    assert m.total_params == EXACT[name]
    assert sum(m.params_by_role().values()) == m.total_params
    assert m.kind == "decoder" and not m.is_moe


@pytest.mark.parametrize("name", sorted(PUBLISHED_B))
def test_totals_match_the_published_parameter_counts(name: str) -> None:
    # the hub rounds to two decimals (Baichuan2-7B is published as 7.5B): within 0.5%
    assert _model(name).total_params / 1e9 == pytest.approx(PUBLISHED_B[name], rel=0.005)


def test_known_totals_to_the_parameter() -> None:
    assert _model("qwen-7b").total_params == 7_721_324_544
    assert _model("chatglm3-6b").total_params == 6_243_584_000
    assert _model("baichuan2-7b-base").total_params == 7_505_973_248
    assert _model("internlm2-7b").total_params == 7_737_708_544


def test_qwen_v1_mlp_is_half_of_intermediate_size() -> None:
    """QWenMLP: ff_dim_in = intermediate_size // 2 (the config counts gate and up together)."""
    m = _model("qwen-7b")
    widths = {g.name: g.linear for g in m.groups if g.role == "mlp" and g.linear is not None}
    assert widths == {"mlp.w1": (d, 11008), "mlp.w2": (d, 11008), "mlp.c_proj": (11008, d)}
    assert m.intermediate_size == 11008
    assert m.max_position_embeddings == 32768  # max_position_embeddings wins over seq_length 8192


def test_kv_cache_per_token_follows_each_attention_layout() -> None:
    two_bytes = 2
    assert _model("qwen-7b").kv_bytes_per_token() == 32 * 2 * 32 * 128 * two_bytes  # MHA
    assert _model("baichuan2-7b-base").kv_bytes_per_token() == 32 * 2 * 32 * 128 * two_bytes
    # ChatGLM: multi_query_group_num = 2 groups of kv_channels 128
    assert _model("chatglm3-6b").kv_bytes_per_token() == 28 * 2 * 2 * 128 * two_bytes
    assert _model("internlm2-7b").kv_bytes_per_token() == 32 * 2 * 8 * 128 * two_bytes
    kinds = {n: _model(n).attention_type for n in EXACT}
    assert kinds == {
        "qwen-7b": "mha",
        "chatglm3-6b": "gqa",
        "baichuan2-7b-base": "mha",
        "internlm2-7b": "gqa",
        "internlm-7b": "mha",
    }


def test_chatglm_fused_gate_up_counts_as_a_gated_mlp() -> None:
    """dense_h_to_4h holds gate and up (2 x 13696) and is chunked before SwiGLU: gated, like
    Llama's two matrices, so the activation terms match a gate_proj/up_proj model of width 13696."""
    (s,) = stack_shapes(_model("chatglm3-6b"))
    assert s.gated and s.mlp_up == 2 * 13696
    (q,) = stack_shapes(_model("qwen-7b"))
    assert q.gated and q.mlp_up == 2 * 11008


def test_default_lora_targets_are_the_fused_attention_layers() -> None:
    r = 8
    assert lora_param_count(_model("qwen-7b"), "default", r) == r * (d + 3 * d) * 32  # c_attn
    assert lora_param_count(_model("chatglm3-6b"), "default", r) == r * (d + 4608) * 28  # query_key_value
    assert lora_param_count(_model("baichuan2-7b-base"), "default", r) == r * (d + 3 * d) * 32  # W_pack
    assert lora_param_count(_model("internlm2-7b"), "default", r) == r * (d + 6144) * 32  # wqkv
    assert lora_param_count(_model("internlm-7b"), "default", r) == r * 2 * (d + d) * 32  # q_proj, v_proj


def test_hub_families_name_their_modeling_file_and_are_never_imported() -> None:
    for t in ("qwen", "baichuan", "chatglm", "internlm", "internlm2"):
        assert FAMILIES[t].hub_code.endswith(".py"), t
    before = set(sys.modules)
    cfg = {**_config("qwen-7b"), "auto_map": {"AutoModelForCausalLM": "modeling_qwen.QWenLMHeadModel"}}
    assert model_from_config(cfg, "qwen").total_params == QWEN_7B  # auto_map is ignored, not followed
    assert not {m for m in set(sys.modules) - before if "qwen" in m.lower()}


def test_chatglm_v1_config_is_refused_by_name() -> None:
    """ChatGLM-6B (v1) has no ffn_hidden_size: one line naming the key, not a wrong model."""
    v1 = {"model_type": "chatglm", "hidden_size": 4096, "inner_hidden_size": 16384, "num_layers": 28,
          "num_attention_heads": 32, "vocab_size": 130528}  # fmt: skip
    with pytest.raises(ModelConfigError, match="ffn_hidden_size"):
        model_from_config(v1, "chatglm-6b")


def test_a_hub_config_json_estimates_end_to_end(tmp_path: Path) -> None:
    import gpuplan

    (tmp_path / "config.json").write_text(json.dumps(_config("chatglm3-6b")))
    r = gpuplan.estimate(
        {"model": str(tmp_path), "task": "lora", "gpu": "RTX 4090", "seq_len": 1024, "lora_targets": "default"}
    )
    assert r.memory.fits
    # the frozen bf16 base: 6,243,584,000 parameters x 2 bytes, the embeddings counted apart (within
    # 0.5%: the memory lines keep a few small tensors at their own widths)
    base = r.memory.breakdown["frozen base weights (bf16)"] + r.memory.breakdown["embedding and final norm"]
    assert base == pytest.approx(6_243_584_000 * 2, rel=0.005)
    # LoRA on a frozen base: forward 2N and the input gradients 2N, no weight gradients (+ attention)
    assert isinstance(r.time, TrainingSpeed)
    assert r.time.model_flops_per_token == pytest.approx(4 * 6_243_584_000, rel=0.03)


# --- LoRA target names -------------------------------------------------------------------------
LLAMA_TINY = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256}  # fmt: skip
T5_TINY = {"model_type": "t5", "d_model": 64, "num_layers": 2, "num_heads": 4, "d_ff": 128, "d_kv": 16,
           "vocab_size": 256}  # fmt: skip


def _leaves(groups: list[Any]) -> list[str]:
    return sorted(g.name.rsplit(".", 1)[-1] for g in groups)


@pytest.mark.parametrize("written", ["q,v", "q_proj,v_proj", "Q, V", "W_q,W_v", "self_attn.q_proj,v"])
def test_lora_targets_as_people_write_them(written: str) -> None:
    m = model_from_config(LLAMA_TINY, "tiny")
    w = make_workload({"model": "llama-3.1-8b", "task": "lora", "lora_targets": written})
    assert _leaves(lora_targets(m, w.lora_targets)) == ["q_proj", "v_proj"]
    # rank 8: q 64 -> 64, v 64 -> 32 (2 KV heads of 16), two layers
    assert lora_param_count(m, w.lora_targets, 8) == 8 * ((64 + 64) + (64 + 32)) * 2


def test_short_names_keep_a_family_that_has_them() -> None:
    """T5's own modules are q and v: they are not renamed to q_proj."""
    m = model_from_config(T5_TINY, "t5-tiny")
    assert set(_leaves(lora_targets(m, ["q", "v"]))) == {"q", "v"}


@pytest.mark.parametrize("written", ["all-linear", "all_linear", "all", "ALL-LINEAR"])
def test_all_linear_spellings(written: str) -> None:
    w = make_workload({"model": "llama-3.1-8b", "task": "lora", "lora_targets": written})
    assert w.lora_targets == "all-linear"


def test_short_names_on_a_fused_family_say_what_it_has() -> None:
    with pytest.raises(InvalidSettingError, match="query_key_value"):
        lora_targets(_model("chatglm3-6b"), ["q", "v"])


# --- attention kernel names ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("written", "kernel"),
    [
        ("sdpa", "flash"),
        ("SDPA", "flash"),
        ("flash_attention_2", "flash"),
        ("flash-attention-2", "flash"),
        ("flash_attention_3", "fa3"),
        ("eager", "eager"),
        ("flash", "flash"),
        ("fa3", "fa3"),
    ],
)
def test_attention_impl_accepts_transformers_names(written: str, kernel: str) -> None:
    assert make_workload({"model": "llama-3.1-8b", "attention_impl": written}).attention_impl == kernel


def test_an_unknown_attention_name_is_one_line() -> None:
    with pytest.raises(InvalidSettingError, match="attention_impl") as exc:
        make_workload({"model": "llama-3.1-8b", "attention_impl": "xformers"})
    assert "\n" not in str(exc.value)


def test_sdpa_estimates_as_flash_and_eager_materialises_scores() -> None:
    import gpuplan

    base = {"model": "llama-3.1-8b", "task": "finetune", "gpu": "H100", "seq_len": 4096}
    sdpa = gpuplan.estimate({**base, "attention_impl": "sdpa"})
    flash = gpuplan.estimate({**base, "attention_impl": "flash"})
    eager = gpuplan.estimate({**base, "attention_impl": "eager"})
    assert sdpa.memory.per_gpu_bytes == flash.memory.per_gpu_bytes
    assert eager.memory.per_gpu_bytes > flash.memory.per_gpu_bytes * 1.05


def test_measure_refuses_a_hub_family_instead_of_running_its_code(run_cli: RunCli) -> None:
    code, _, err = run_cli("measure", str(CONFIGS / "qwen-7b.json"), "--set", "task=inference", "--device", "cpu")
    assert code == 2
    assert "trust_remote_code" in err and "never runs" in err and "Traceback" not in err


def test_launch_files_say_the_checkpoint_needs_its_own_code(run_cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(_config("chatglm3-6b")))
    code, out, _ = run_cli("launch", str(tmp_path), "--format", "vllm", "--set", "gpu=A100 SXM4 80GB")
    assert code == 0
    assert "# chatglm: its modeling code ships with the checkpoint (THUDM/chatglm3-6b modeling_chatglm.py)" in out
    assert "--trust-remote-code \\" not in out  # gpuplan never adds it for the user
