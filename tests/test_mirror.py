"""The tests mirror the code: every module of gpuplan names the test module(s) that test it, or the
reason it has none of its own. A new module without an entry fails here, as does an entry that names
a test file that does not exist."""

from __future__ import annotations

from pathlib import Path

import gpuplan

SRC = Path(gpuplan.__file__).parent
TESTS = Path(__file__).parent

REEXPORTS = "re-exports its package's modules; tested through them"

# module (relative to src/gpuplan, without .py) -> test modules, or "why: ..." where none is its own
TESTED_BY: dict[str, str] = {
    "__init__": "test_library.py",
    "_lazy": "test_library.py test_startup.py",
    "library": "test_library.py",
    "errors": "why: the error types; every bad-input test (test_security_*.py) asserts their one-line messages",
    "safeio": "test_security_bad_files.py test_security_bad_numbers.py test_fuzz_files.py",
    "yamlsafe": "test_security_bad_files.py test_fuzz_files.py test_startup.py",
    "data/__init__": "why: marks the package data folder (no code)",
    # results
    "results/__init__": "test_results.py test_startup.py",
    "results/base": "test_results.py",
    "results/estimate": "test_results.py test_library.py test_golden.py",
    "results/plan": "test_results.py test_library.py test_golden.py",
    "results/layouts": "test_results.py test_golden.py test_parallel.py test_library.py",
    "results/graphics": "test_results.py test_golden.py test_graphics.py",
    "results/validation": "test_results.py test_golden.py test_validation.py",
    "results/ownership": "test_ownership.py test_golden.py",
    "results/lab": "test_lab.py test_golden.py test_results.py",
    # specs
    "specs/durations": "test_workload.py",
    "specs/__init__": f"why: {REEXPORTS}",
    "specs/calibration": "test_bench.py",
    "specs/cluster": "test_parallel.py test_context.py",
    "specs/context": "test_context.py",
    "specs/gpu": "test_catalog.py test_catalog_card_facts.py test_catalog_more_datacenter.py test_catalog_more_workstation.py",
    "specs/lab": "test_lab.py test_security_scripts.py",
    "specs/models": "test_model.py test_model_presets_older.py",
    "specs/precision": "test_precision.py",
    "specs/engine_formats": "test_engines.py",
    "specs/request_lengths": "test_request_lengths.py",
    "specs/prices": "test_prices.py",
    "specs/purchase": "test_ownership.py",
    "specs/tomlcache": "test_tomlcache.py",
    "specs/gpu_cache": "test_gpu_cache.py test_startup.py",
    "specs/gpu_rows": "test_catalog.py test_catalog_card_facts.py test_gpu_cache.py",
    "specs/workload": "test_workload.py test_workload_fast.py test_frameworks.py test_launch_qa4.py",
    "specs/workload_derived": "test_workload_fast.py test_workload.py test_frameworks.py",
    "specs/workload_schema": "test_workload_fast.py test_workload.py test_web.py",
    "specs/workload_table": "test_workload_fast.py",
    "specs/frameworks": "test_frameworks.py",
    "specs/workload_docs": "test_workload.py",
    "specs/workload_keys": "test_workload.py test_frameworks.py test_launch_qa4.py",
    "specs/model/__init__": "test_model.py",
    "specs/model/spec": "test_model.py",
    "specs/model/config": "test_model.py test_security_bad_files.py",
    "specs/model/groups": "test_model.py",
    "specs/model/reader": "test_model.py test_reference.py",
    "specs/model/record": "test_families.py",
    "specs/model/families": "test_families.py test_model_families.py",
    "specs/model/builders/__init__": "test_families.py",
    "specs/model/builders/llama": "test_model.py test_reference.py",
    "specs/model/builders/multimodal": "test_model_families.py test_reference.py",
    "specs/model/builders/deepseek": "test_model_families.py test_reference.py",
    "specs/model/builders/gpt": "test_model_families.py test_reference.py",
    "specs/model/builders/encoders": "test_model_families.py test_reference.py",
    "specs/model/builders/resnet": "test_perf.py",
    "specs/model/builders/hub": "test_hub_families.py test_families.py",
    # estimators
    "estimators/__init__": f"why: {REEXPORTS}",
    "estimators/activations": "test_memory.py test_checkpointing_op.py",
    "estimators/comm": "test_parallel.py",
    "estimators/cost": "test_perf.py",
    "estimators/efficiency": "test_perf.py test_catalog_card_facts.py",
    "estimators/engines": "test_engines.py test_engine_autoawq.py",
    "estimators/graphics": "test_graphics.py",
    "estimators/lora": "test_memory.py test_families.py test_hub_families.py test_launch_qa4.py",
    "estimators/optimizer": "test_memory.py",
    "estimators/ownership": "test_ownership.py",
    "estimators/parallel": "test_parallel.py test_fsdp_pp.py",
    "estimators/fsdp_pp": "test_fsdp_pp.py",
    "estimators/runtime": "test_memory.py",
    "estimators/uncertainty": "test_perf.py",
    "estimators/memory/__init__": "test_memory.py",
    "estimators/memory/base": "test_memory.py test_kv_fit.py test_qlora_kernel.py",
    "estimators/memory/training": "test_memory.py test_fsdp_pp.py",
    "estimators/memory/inference": "test_memory.py test_serving_parallel.py",
    "estimators/perf/__init__": "test_perf.py",
    "estimators/perf/ops": "test_perf.py",
    "estimators/perf/training": "test_perf.py test_parallel.py test_checkpointing_op.py test_lora_launch.py",
    "estimators/perf/cnn": "test_perf.py",
    "estimators/perf/offload": "test_engines.py",
    "estimators/perf/inference": "test_perf.py test_serving_parallel.py test_burst.py",
    "estimators/perf/step_ops": "test_perf.py test_engines.py test_prefix_cache.py test_fused_moe.py",
    # planner
    "planner/__init__": f"why: {REEXPORTS}",
    "planner/fit": "test_fit.py test_qa_verdict_fixes.py",
    "planner/graphics": "test_graphics.py",
    "planner/lab": "test_lab.py",
    "planner/lab_allocate": "test_lab.py test_context.py",
    "planner/launch_plan": "test_launch.py test_launch_qa4.py",
    "planner/verdict": "test_verdict.py test_kv_fit.py test_qa_verdict_fixes.py",
    "planner/serving": "test_plan_serving.py",
    "planner/dedupe": "test_plan_serving.py",
    "planner/layouts": "test_parallel.py test_security_server.py test_fsdp_pp.py",
    "planner/measured": "test_measure.py",
    "planner/named_models": "test_validation.py",
    "planner/recommend": "test_perf.py test_serving_parallel.py",
    "planner/screening": "test_screening.py test_golden.py",
    "planner/use_cases": "test_use_cases.py",
    "planner/validation": "test_validation.py",
    "planner/validation_columns": "test_validation_columns.py",
    "planner/validation_perf": "test_validation.py test_validation_columns.py",
    "planner/validation_prose": "test_validation_columns.py",
    "planner/validation_prose_speed": "test_validation_columns.py",
    "planner/validation_stacks": "test_validation_stacks.py",
    "planner/stack_fits": "test_validation_stacks_fit.py",
    # interfaces
    "interfaces/__init__": f"why: {REEXPORTS}",
    "interfaces/api/__init__": "test_library.py",
    "interfaces/api/catalog": "test_cli.py test_golden.py",
    "interfaces/api/charts": "test_web.py test_golden.py",
    "interfaces/api/estimate": "test_library.py test_golden.py test_qa_verdict_fixes.py",
    "interfaces/api/launch": "test_launch.py test_launch_qa4.py",
    "interfaces/api/models": "test_model.py test_golden.py",
    "interfaces/api/plan": "test_library.py test_golden.py test_qa_verdict_fixes.py",
    "interfaces/api/records": "test_golden.py test_results.py test_qa_verdict_fixes.py",
    "interfaces/api/rent": "test_ownership.py",
    "interfaces/api/validate": "test_validation.py test_validation_stacks.py",
    "interfaces/api/workloads": "test_workload.py test_cli.py",
    "interfaces/bench": "test_bench.py",
    "interfaces/charts": "test_perf.py",
    "interfaces/lab": "test_lab.py test_security_data_loss.py test_lab_slurm.py",
    "interfaces/launch": "test_launch.py test_security_scripts.py test_launch_qa4.py",
    "interfaces/launch_engines": "test_launch_engines.py",
    "interfaces/launch_frameworks": "test_frameworks.py test_launch_qa4.py test_fsdp_pp.py",
    "interfaces/launch_torchtune": "test_frameworks.py",
    "interfaces/launch_megatron": "test_launch.py",
    "interfaces/launch_trainers": "test_frameworks.py test_launch_qa4.py",
    "interfaces/measure": "test_measure.py",
    "interfaces/quoting": "test_security_scripts.py",
    "interfaces/web": "test_web.py test_security_server.py test_web_fuzz.py",
    "interfaces/web_schemas": "test_web.py test_web_fuzz.py",
    "interfaces/web_compute": "test_web_compute.py test_web_load.py test_security_server.py",
    "interfaces/cli/__init__": "test_cli.py test_startup.py",
    "interfaces/cli/__main__": "test_security_bad_files.py",
    "interfaces/cli/common": "test_cli.py test_cli_flags.py",
    "interfaces/cli/answers": "test_cli_fast.py test_cli.py test_golden.py",
    "interfaces/cli/fast": "test_cli_fast.py test_startup.py",
    "interfaces/cli/catalog": "test_cli.py test_golden.py",
    "interfaces/cli/estimate": "test_cli.py test_cli_flags.py test_golden.py",
    "interfaces/cli/plan": "test_cli.py test_cli_flags.py test_golden.py",
    "interfaces/cli/tools": "test_cli.py test_launch.py test_golden.py",
    "interfaces/cli/lab": "test_lab.py test_golden.py",
    "interfaces/cli/rent": "test_ownership.py test_golden.py",
}


def _modules() -> list[str]:
    return sorted(str(p.relative_to(SRC).with_suffix("")) for p in SRC.rglob("*.py"))


def test_every_module_names_its_tests() -> None:
    missing = [m for m in _modules() if m not in TESTED_BY]
    assert not missing, f"name the test module(s) of {missing} in tests/test_mirror.py (or why it has none)"
    stale = sorted(set(TESTED_BY) - set(_modules()))
    assert not stale, f"tests/test_mirror.py names modules that are gone: {stale}"


def test_the_named_test_modules_exist() -> None:
    for module, entry in TESTED_BY.items():
        if entry.startswith("why: "):
            assert len(entry) > 20, f"{module}: give the reason"
            continue
        for name in entry.split():
            assert (TESTS / name).is_file(), f"{module}: no tests/{name}"


def test_helpers_live_in_helpers() -> None:
    """The top of tests/ holds test modules and conftest only; shared code is in tests/helpers/."""
    stray = sorted(p.name for p in TESTS.glob("*.py") if not p.name.startswith("test_") and p.name != "conftest.py")
    assert not stray, f"move {stray} into tests/helpers/"
