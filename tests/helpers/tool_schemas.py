"""Check emitted launch files against the real tools' own parsers and config classes.

Each checker imports its tool lazily (a test that uses it is skipped where the tool's package is not
installed at all, and fails where it is installed but broken, e.g. a dependency missing; with
GPUPLAN_REQUIRE_LAUNCH_TOOLS=1 in the environment a missing tool fails too), runs the tool's own parsing/validation code on the emitted text or argv, and
raises AssertionError naming every unknown key or flag and quoting the tool's own error otherwise.

What each one covers, and what it cannot (these tools run on a CPU-only machine, offline):

- check_torchrun: torch.distributed.run's own argparse parser (abbreviations off, so every flag must
  be spelled in full), then its config_from_args, which checks --nnodes, --nproc-per-node and the
  rendezvous settings. Only flags before the training script are torchrun's; the rest is the script's.
- check_accelerate_yaml: accelerate's ClusterConfig/SageMakerConfig loader (unknown top-level keys
  are an error there), then the keys of each section (fsdp_config, deepspeed_config, ...): accelerate
  never rejects those itself, it copies each onto `accelerate launch`'s argument namespace, where a
  key that no launcher reads is ignored without a word; here such keys are errors. Then the launch
  steps that turn the file into the environment the training process reads, and the FSDP or DeepSpeed
  plugin built from that environment (which checks the values: sharding strategy, state dict type,
  offload devices, clashes with a deepspeed_config_file, ...).
- check_deepspeed_json: deepspeed.runtime.config.DeepSpeedConfig, the class deepspeed.initialize
  builds (batch-size arithmetic for the given world size, fp16/bf16 exclusivity, the pydantic
  sections such as zero_optimization, bf16, fp16 and their offload sub-sections, which forbid unknown
  keys). DeepSpeed ignores unknown top-level keys and unknown keys in its older, dict-read sections
  (optimizer, scheduler, activation_checkpointing, flops_profiler, checkpoint, ...): here a key that
  DeepSpeedConfig never looks up is an error. Opaque dicts (optimizer.params, scheduler.params, which
  go to the optimizer/scheduler constructors) are not checked. HF's "auto" values are not DeepSpeed's.
- check_skypilot_yaml: sky.Task.from_yaml, which validates the task against SkyPilot's JSON schemas
  (task, resources, file mounts, envs) and builds the Resources. Offline and without credentials it
  cannot check that an accelerator name (H100) is in a cloud catalog.
- check_vllm_serve: the `vllm serve` parser itself (vllm.entrypoints.common.cli_args.make_arg_parser),
  with every flag spelled exactly as vllm declares it, then the checks vllm makes on the values that
  need no model or GPU: --quantization among the registered methods, CacheConfig (kv-cache dtype,
  gpu-memory-utilization) and ParallelConfig (tensor/pipeline/data parallel sizes).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import importlib.util
import inspect
import io
import json
import os
import re
import tempfile
from collections.abc import Iterator, KeysView, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

# --- shared helpers -------------------------------------------------------------------------------


def _tool(module: str, package: str) -> Any:
    """Import module from the pip package `package`: skip if that package is not installed at all.

    Not pytest.importorskip(module): that also skips when the tool is there but one of its own
    imports fails (a missing dependency), which would hide a broken install behind a skip.
    """
    if importlib.util.find_spec(module.split(".")[0]) is None:
        if os.environ.get("GPUPLAN_REQUIRE_LAUNCH_TOOLS"):
            pytest.fail(f"{package} is not installed (GPUPLAN_REQUIRE_LAUNCH_TOOLS is set)")
        pytest.skip(f"{package} is not installed")
    return importlib.import_module(module)


def _parse_argv(parser: argparse.ArgumentParser, argv: Sequence[str], tool: str) -> argparse.Namespace:
    """parser.parse_args(argv), with argparse's exit turned into an AssertionError carrying its message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(list(argv))
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        raise AssertionError(f"{tool} rejects {list(argv)}: {lines[-1] if lines else 'parse error'}") from None
    except argparse.ArgumentError as e:
        raise AssertionError(f"{tool} rejects {list(argv)}: {e}") from None


def _strip_command(argv: Sequence[str], *prefixes: Sequence[str]) -> list[str]:
    """argv without a leading command (e.g. `torchrun`, `python -m torch.distributed.run`, `vllm serve`)."""
    args = list(argv)
    for prefix in prefixes:
        head = args[: len(prefix)]
        if len(head) == len(prefix) and all(
            a == p or (p.startswith("python") and Path(a).name.startswith("python")) or Path(a).name == p
            for a, p in zip(head, prefix, strict=True)
        ):
            return args[len(prefix) :]
    return args


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {s for action in parser._actions for s in action.option_strings}


def _flags_in(argv: Sequence[str]) -> list[str]:
    """The tokens of argv that are flags (`--x`, `--x=v`, `-x`), without their `=value`."""
    return [tok.split("=", 1)[0] for tok in argv if re.match(r"^--?[A-Za-z]", tok)]


# --- torchrun -------------------------------------------------------------------------------------

_DEVICE_NPROC = {"gpu", "cuda", "xpu", "npu", "hpu", "mps"}


def check_torchrun(argv: Sequence[str]) -> argparse.Namespace:
    """Parse a torchrun command line with torch.distributed.run's own parser and config_from_args.

    argv may start with `torchrun` or `python -m torch.distributed.run`. Returns the parsed namespace.
    """
    run = _tool("torch.distributed.run", "torch")
    args = _strip_command(argv, ["torchrun"], ["python", "-m", "torch.distributed.run"])
    parser = run.get_args_parser()
    parser.prog = "torchrun"
    parser.allow_abbrev = False  # torchrun would take `--nproc_per_nod`; an emitted file should not rely on that
    ns: argparse.Namespace = _parse_argv(parser, args, "torchrun")
    probe = copy.copy(ns)
    if str(probe.nproc_per_node) in _DEVICE_NPROC:  # counted on the device at launch; none here
        probe.nproc_per_node = "1"
    with mock.patch.dict(os.environ):  # config_from_args sets OMP_NUM_THREADS
        try:
            run.config_from_args(probe)
        except (ValueError, RuntimeError, AssertionError) as e:
            raise AssertionError(f"torchrun rejects {args}: {e}") from None
    return ns


# --- accelerate -----------------------------------------------------------------------------------

# How `accelerate launch` names the keys of each section on its namespace (commands/launch.py,
# _validate_launch_command): fsdp_config.x -> fsdp_x, fp8_config.x -> fp8_x, dynamo_config.x ->
# dynamo_x; every other section's keys are used as they are.
_ACCELERATE_SECTION_PREFIX = {"fsdp_config": "fsdp_", "fp8_config": "fp8_", "dynamo_config": "dynamo_"}


def _accelerate_namespace_key(section: str, key: str) -> str:
    prefix = _ACCELERATE_SECTION_PREFIX.get(section)
    return prefix + key if prefix is not None and not key.startswith(prefix) else key


def _accelerate_read_attrs() -> set[str]:
    """Every attribute `accelerate launch` reads from its namespace: the launch parser's dests, plus
    the ones only a config file can set (read with getattr/hasattr, e.g. fsdp_ignored_modules)."""
    launch = _tool("accelerate.commands.launch", "accelerate")
    utils_launch = _tool("accelerate.utils.launch", "accelerate")
    attrs = {action.dest for action in launch.launch_command_parser()._actions}
    for module in (launch, utils_launch):
        attrs |= set(re.findall(r"(?:getattr|hasattr)\(\s*args\s*,\s*[\"'](\w+)[\"']", inspect.getsource(module)))
    return attrs


def check_accelerate_yaml(text: str, *, deepspeed_json: str | None = None) -> Any:
    """Load an accelerate config YAML as `accelerate launch --config_file` does; returns the config object.

    deepspeed_json: the text of the DeepSpeed JSON that deepspeed_config.deepspeed_config_file names,
    if any; with it the DeepSpeed plugin is built from that file too (accelerate rejects accelerate
    config keys that clash with it). Without it, a config that names a DeepSpeed file is checked up to
    the plugin.
    """
    config_args = _tool("accelerate.commands.config.config_args", "accelerate")
    launch = _tool("accelerate.commands.launch", "accelerate")
    utils_launch = _tool("accelerate.utils.launch", "accelerate")
    accelerate_utils = _tool("accelerate.utils", "accelerate")
    accelerate_dataclasses = _tool("accelerate.utils.dataclasses", "accelerate")
    torch = _tool("torch", "torch")

    data = yaml.safe_load(text)
    assert isinstance(data, dict), f"accelerate config is not a mapping: {data!r}"
    with tempfile.TemporaryDirectory(prefix="gpuplan-accelerate-") as tmp:
        ds_section = data.get("deepspeed_config")
        ds_file = ds_section.get("deepspeed_config_file") if isinstance(ds_section, dict) else None
        if ds_file is not None and deepspeed_json is not None:
            ds_path = Path(tmp) / "deepspeed.json"
            ds_path.write_text(deepspeed_json, encoding="utf-8")
            data = copy.deepcopy(data)
            data["deepspeed_config"]["deepspeed_config_file"] = str(ds_path)
            text = yaml.safe_dump(data)
        path = Path(tmp) / "accelerate.yaml"
        path.write_text(text, encoding="utf-8")

        # 1. the config class: unknown top-level keys are accelerate's own error
        try:
            config = config_args.load_config_from_file(str(path))
        except (ValueError, TypeError, KeyError) as e:
            raise AssertionError(f"accelerate rejects the config: {e}") from None

        # 2. the sections' keys: accelerate copies them onto the launch namespace, unchecked
        read = _accelerate_read_attrs()
        unknown = [
            f"{section}.{key}"
            for section, value in vars(config).items()
            if isinstance(value, dict)
            for key in value
            if _accelerate_namespace_key(section, key) not in read
        ]
        assert not unknown, f"accelerate launch ignores these keys (no launcher reads them): {unknown}"

        # 3. the launch: namespace -> environment -> the plugin the training process builds
        if config.compute_environment.value != "LOCAL_MACHINE":
            return config
        ns = _parse_argv(launch.launch_command_parser(), ["--config_file", str(path), "train.py"], "accelerate launch")
        try:
            ns, defaults, mp_from_config = launch._validate_launch_command(ns)
            plugin_env: dict[str, str] | None = None
            if ns.use_deepspeed:
                fields = list(defaults.deepspeed_config.keys()) + (["mixed_precision"] if mp_from_config else [])
                ns.deepspeed_fields_from_accelerate_config = ",".join(fields)
                _, plugin_env = utils_launch.prepare_deepspeed_cmd_env(ns)
            elif ns.use_fsdp or ns.multi_gpu or ns.use_megatron_lm:
                plugin_env = utils_launch.prepare_multi_gpu_env(ns)
            if plugin_env is not None:
                # the plugins are built on the GPU nodes: say so, or FSDP1's sync_module_states is refused on CPU
                on_gpu = mock.patch.object(
                    accelerate_dataclasses, "get_torch_accelerator_backend", return_value=("cuda", torch.cuda)
                )
                with mock.patch.dict(os.environ, plugin_env), on_gpu:
                    if ns.use_fsdp:
                        accelerate_utils.FullyShardedDataParallelPlugin()
                    elif ns.use_deepspeed and (ds_file is None or deepspeed_json is not None):
                        accelerate_utils.DeepSpeedPlugin()
        except (ValueError, TypeError, KeyError, AttributeError, AssertionError) as e:
            raise AssertionError(f"accelerate launch rejects the config: {type(e).__name__}: {e}") from None
    return config


# --- DeepSpeed ------------------------------------------------------------------------------------


class _ReadRecorder(dict[str, Any]):
    """A dict that notes which keys are looked up (get, [], in, `in .keys()`, pop, setdefault)."""

    def __init__(self, data: dict[str, Any], seen: set[str] | None = None) -> None:
        super().__init__(data)
        self.seen: set[str] = set() if seen is None else seen

    def __getitem__(self, key: str) -> Any:
        self.seen.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.seen.add(key)
        return super().__contains__(key)

    def pop(self, key: str, *default: Any) -> Any:
        self.seen.add(key)
        return super().pop(key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        return super().setdefault(key, default)

    def keys(self) -> KeysView[str]:  # type: ignore[override]
        return _RecordingKeys(self)

    def __copy__(self) -> _ReadRecorder:
        return _ReadRecorder(dict(super().items()), self.seen)


class _RecordingKeys(KeysView[str]):
    def __init__(self, owner: _ReadRecorder) -> None:
        super().__init__(owner)
        self._owner = owner

    def __contains__(self, key: object) -> bool:
        return key in self._owner

    def __iter__(self) -> Iterator[str]:
        return iter(dict.keys(self._owner))


def _deepspeed_config(ds_config: Any, params: dict[str, Any], world_size: int) -> Any:
    """DeepSpeedConfig(params) as on a data-parallel world of world_size ranks (no process group)."""
    with (
        mock.patch.object(ds_config.dist, "get_rank", return_value=0),
        mock.patch.object(ds_config.dist, "get_world_size", return_value=world_size),
    ):
        return ds_config.DeepSpeedConfig(params)


def check_deepspeed_json(text: str, *, world_size: int = 1) -> Any:
    """Build deepspeed's DeepSpeedConfig from the JSON text, as deepspeed.initialize does on world_size
    data-parallel ranks (train_batch_size must equal micro batch x accumulation x world_size).
    Returns the DeepSpeedConfig."""
    ds_config = _tool("deepspeed.runtime.config", "deepspeed")
    ds_config_utils = _tool("deepspeed.runtime.config_utils", "deepspeed")
    try:  # deepspeed loads its config files refusing duplicate keys
        params = json.loads(text, object_pairs_hook=ds_config_utils.dict_raise_error_on_duplicate_keys)
    except (ValueError, KeyError) as e:
        raise AssertionError(f"DeepSpeed config is not valid JSON: {e}") from None
    assert isinstance(params, dict), f"DeepSpeed config is not a JSON object: {params!r}"

    def build(p: dict[str, Any]) -> Any:
        try:
            return _deepspeed_config(ds_config, p, world_size)
        except Exception as e:  # assertions, pydantic ValidationError, DeepSpeedConfigError, TypeError on bad values
            raise AssertionError(f"DeepSpeed rejects the config: {type(e).__name__}: {e}") from None

    sections = {k: _ReadRecorder(v) for k, v in params.items() if isinstance(v, dict)}
    top = _ReadRecorder({**params, **sections})
    config = build(top)

    unknown = sorted(set(params) - top.seen)
    for name, section in sections.items():
        if not section.seen:
            continue  # an opaque dict handed on whole (or a pydantic model's input): judged below or not at all
        probe = copy.deepcopy(params)
        probe[name]["__gpuplan_probe__"] = 1
        try:
            build(probe)
        except AssertionError:
            continue  # a pydantic section: it forbids unknown keys itself, and the config passed
        unknown += [f"{name}.{key}" for key in sorted(set(section) - section.seen)]
    assert not unknown, f"DeepSpeed never reads these keys (they would be ignored): {unknown}"
    return config


# --- SkyPilot -------------------------------------------------------------------------------------


def check_skypilot_yaml(text: str) -> Any:
    """Load a SkyPilot task YAML with sky.Task.from_yaml (schema validation, Resources); returns the Task."""
    sky = _tool("sky", "skypilot")
    with tempfile.TemporaryDirectory(prefix="gpuplan-sky-") as tmp:
        path = Path(tmp) / "task.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            return sky.Task.from_yaml(str(path))
        except Exception as e:  # sky.exceptions.InvalidSkyPilotConfigError (a ValueError), ValueError
            raise AssertionError(f"SkyPilot rejects the task: {type(e).__name__}: {e}") from None


# --- vLLM -----------------------------------------------------------------------------------------


def check_vllm_serve(argv: Sequence[str]) -> argparse.Namespace:
    """Parse a `vllm serve` command line with vllm's own parser; returns the parsed namespace.

    argv may start with `vllm serve`. Every flag must be spelled as vllm declares it (vllm also takes
    `--tensor_parallel_size` and abbreviations; an emitted file should not rely on that).
    """
    env = {}
    if "VLLM_TARGET_DEVICE" not in os.environ:
        torch = _tool("torch", "torch")
        if not torch.cuda.is_available():
            env["VLLM_TARGET_DEVICE"] = "cpu"  # else vllm cannot pick a platform and its parser fails
    with mock.patch.dict(os.environ, env):
        cli_args = _tool("vllm.entrypoints.common.cli_args", "vllm")
        argparse_utils = _tool("vllm.utils.argparse_utils", "vllm")
        args = _strip_command(argv, ["vllm", "serve"])
        parser = cli_args.make_arg_parser(argparse_utils.FlexibleArgumentParser(prog="vllm serve"))
        known = _option_strings(parser)
        unknown = [flag for flag in _flags_in(args) if flag not in known]
        assert not unknown, f"vllm serve has no such flags: {unknown}"
        ns: argparse.Namespace = _parse_argv(parser, args, "vllm serve")
        _check_vllm_values(ns)
    return ns


def _check_vllm_values(ns: argparse.Namespace) -> None:
    """The checks vllm makes on these values when it builds its configs, where they need no model or GPU."""
    config = _tool("vllm.config", "vllm")
    quantization = _tool("vllm.model_executor.layers.quantization", "vllm")
    if ns.quantization is not None and ns.quantization not in quantization.QUANTIZATION_METHODS:
        raise AssertionError(f"vllm serve: unknown --quantization {ns.quantization!r}")
    try:
        config.CacheConfig(cache_dtype=ns.kv_cache_dtype, gpu_memory_utilization=ns.gpu_memory_utilization)
        config.ParallelConfig(
            tensor_parallel_size=ns.tensor_parallel_size,
            pipeline_parallel_size=ns.pipeline_parallel_size,
            data_parallel_size=ns.data_parallel_size,
        )
    except Exception as e:  # pydantic ValidationError
        raise AssertionError(f"vllm serve rejects the values: {e}") from None
