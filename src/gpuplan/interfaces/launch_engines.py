"""Which launch format an inference workload gets: its engine's own (vLLM: `vllm serve`), or a
one-line refusal that names the engine and the command it is started with.

A serving estimate describes its engine (llama.cpp's layer offload, TGI's and SGLang's memory
shares, AutoAWQ's fused cache), so a file for another engine would launch a job that was never
estimated: `--format vllm` for a llama.cpp workload is refused, not re-targeted.

The engines' own start-up commands, as the refusals spell them:
- llama.cpp: `llama-server -m FILE.gguf -ngl N -c CTX -np SLOTS` (ggml-org/llama.cpp
  tools/server/README.md: -m/--model, -ngl/--n-gpu-layers, -c/--ctx-size, the total over the
  -np/--parallel slots).
- Ollama: a Modelfile's `PARAMETER num_ctx` / `PARAMETER num_gpu` (ollama/ollama docs/modelfile.md).
- TGI: `text-generation-launcher --model-id ID --num-shard N --max-input-tokens I --max-total-tokens T`
  (huggingface/text-generation-inference docs/source/reference/launcher.md).
- SGLang: `python -m sglang.launch_server --model-path ID --tp-size N --mem-fraction-static F
  --context-length L` (sgl-project/sglang docs/advanced_features/server_arguments.md).
"""

from __future__ import annotations

from typing import Final

from gpuplan.errors import InvalidSettingError
from gpuplan.specs.workload import Workload

# the launch formats gpuplan writes for a serving workload, by engine
SERVING_FORMATS: Final[dict[str, str]] = {"vllm": "vllm"}


def engine_command(w: Workload, model_id: str) -> str:
    """The engine's own start-up command for the workload, in one line."""
    ctx = w.input_len + w.output_len
    if w.engine in ("llama.cpp", "ollama"):
        quant = (w.effective_weight_dtype or "q4_k_m").upper()
        ngl = w.gpu_layers if w.gpu_layers is not None else 999
        if w.engine == "ollama":
            return f"an Ollama Modelfile with PARAMETER num_ctx {w.num_ctx or ctx} and PARAMETER num_gpu {ngl}"
        slots = max(w.batch_size, 1)
        name = model_id.rsplit("/", 1)[-1]
        return f"llama-server -m <{name}-{quant}.gguf> -ngl {ngl} -c {ctx * slots} -np {slots}"
    if w.engine == "tgi":
        return (
            f"text-generation-launcher --model-id {model_id} --num-shard {w.tp} --max-input-tokens {w.input_len} "
            f"--max-total-tokens {ctx}"
        )
    if w.engine == "sglang":
        return (
            f"python -m sglang.launch_server --model-path {model_id} --tp-size {w.tp} "
            f"--mem-fraction-static {w.gpu_memory_utilization:g} --context-length {ctx}"
        )
    if w.engine == "autoawq":
        return f"a Python script: AutoAWQForCausalLM.from_quantized('{model_id}', max_seq_len={w.num_ctx or ctx})"
    if w.engine == "transformers":
        return f"a Python script: AutoModelForCausalLM.from_pretrained('{model_id}') and generate()"
    return f"{w.engine}'s own server for {model_id}"


def serving_format(w: Workload, fmt: str, model_id: str) -> str:
    """The launch format for inference workload `w` (`fmt` as asked, "" for the default): its
    engine's own where gpuplan writes one, else a one-line refusal with the engine's command."""
    own = SERVING_FORMATS.get(w.engine)
    if own is not None and fmt in ("", own):
        return own
    start = f"use --format {own} (or leave --format out)" if own else f"start it with {engine_command(w, model_id)}"
    if fmt and fmt not in SERVING_FORMATS.values():
        raise InvalidSettingError(f"--format {fmt} launches training; this workload serves (task: inference): {start}.")
    if fmt:  # another engine's file: it would launch a job that was never estimated
        offload = " (vLLM cannot keep layers in host memory)" if w.engine in ("llama.cpp", "ollama") else ""
        raise InvalidSettingError(
            f"This workload's engine is {w.engine}; --format {fmt} would serve it with {fmt}{offload}, which was not "
            f"estimated: {start}, or set engine: {fmt} to estimate and launch that."
        )
    raise InvalidSettingError(
        f"This workload's engine is {w.engine}, which gpuplan writes no launch file for: {start}."
    )
