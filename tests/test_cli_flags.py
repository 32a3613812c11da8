"""The common workload flags of `fit`, `estimate` and `plan` (one definition, the same name, help and
meaning in all three: a flag is `--set KEY=VALUE`), and plans on what the user owns: `--have` with a
list of GPUs or a lab file, and the GeForce licence for cards the user owns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer

import gpuplan
from conftest import RunCli
from gpuplan.interfaces.cli import app, load_commands
from gpuplan.interfaces.cli.common import WORKLOAD_FLAGS

COMMANDS = ("fit", "estimate", "plan")
MODEL = "llama-3.2-1b"
# per flag: a value, and the --set keys that make the flag's key apply (a task that reads it)
CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "task": ("lora", ()),
    "gpu": ("4090", ()),
    "num_gpus": ("2", ()),
    "batch_size": ("4", ()),
    "seq_len": ("1024", ("task=lora",)),
    "precision": ("fp16", ()),
    "optimizer": ("adamw-8bit", ("task=finetune",)),
    "checkpointing": ("full", ("task=finetune",)),
    "zero": ("3", ("task=finetune", "num_gpus=2")),
    "tp": ("2", ("num_gpus=2",)),
    "lora_rank": ("64", ("task=lora",)),
    "input_len": ("512", ()),
    "output_len": ("64", ()),
    "weight_dtype": ("int8", ()),
    "kv_dtype": ("fp8", ()),
    "engine": ("sglang", ()),
    "tokens": ("1e8", ("task=lora",)),
}


def _argv(command: str, *extra: str) -> list[str]:
    """One small job: `fit` and `estimate` on one GPU, `plan` over one GPU type (--gpus)."""
    where = ["--gpus", "L4"] if command == "plan" else []
    gpu = [] if command == "plan" or "--gpu" in extra or "gpu=4090" in extra else ["--set", "gpu=L4"]
    return [command, MODEL, *where, *gpu, *extra, "--json"]


def test_every_common_flag_is_a_workload_key_with_its_doc() -> None:
    assert {f.param for f in WORKLOAD_FLAGS} == set(CASES)
    assert len({f.flag for f in WORKLOAD_FLAGS}) == len(WORKLOAD_FLAGS)
    assert all(f.key in gpuplan.Workload.model_fields for f in WORKLOAD_FLAGS)


def test_fit_estimate_and_plan_take_the_same_flags_with_the_same_help() -> None:
    """The three commands' workload options: the same names, types and help (from one table)."""
    load_commands([])  # every command module registers its commands (run alone, no other test has)
    group = typer.main.get_command(app)
    seen: dict[str, dict[str, tuple[Any, ...]]] = {}
    for name in COMMANDS:
        cmd = group.commands[name]  # type: ignore[attr-defined]
        seen[name] = {
            p.name: (tuple(p.opts), getattr(getattr(p, "type", None), "name", None), getattr(p, "help", None))
            for p in cmd.params
            if p.name
        }
    for f in WORKLOAD_FLAGS:
        first = seen["fit"][f.param]
        assert first[0] == (f.flag,), first
        assert all(seen[c][f.param] == first for c in COMMANDS), f.param
    for shared in ("set_", "workload"):
        assert all(seen[c][shared][2] == seen["fit"][shared][2] for c in COMMANDS), shared
    assert "docs/workload.md" in seen["fit"]["set_"][2]


def _json(run_cli: RunCli, argv: list[str]) -> dict[str, Any]:
    code, out, err = run_cli(*argv)
    assert code == 0, (argv, err)
    data: dict[str, Any] = json.loads(out)
    return data


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("param", sorted(CASES))
def test_a_flag_is_set_key_value(param: str, command: str, run_cli: RunCli) -> None:
    """Each common flag gives the same answer (the whole JSON document) as --set KEY=VALUE, in each
    of fit, estimate and plan; and the key reaches the workload."""
    flag = next(f for f in WORKLOAD_FLAGS if f.param == param)
    value, needs = CASES[param]
    base = [a for k in needs for a in ("--set", k)]
    by_flag = _json(run_cli, _argv(command, *base, flag.flag, value))
    by_set = _json(run_cli, _argv(command, *base, "--set", f"{flag.key}={value}"))
    assert by_flag == by_set
    got = by_flag["workload"][flag.key]
    assert got == pytest.approx(float(value)) if flag.kind is not str else got == value, (got, value)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_flag_the_task_ignores_is_one_line(command: str, run_cli: RunCli) -> None:
    """A training flag on an inference job (no --task) asks for the task, as --set does."""
    for argv in (_argv(command, "--seq-len", "4096"), _argv(command, "--lora-rank", "16", "--task", "finetune")):
        code, out, err = run_cli(*argv[:-1])
        assert code == 2 and out == "" and err.count("\n") == 1, (argv, err)
        assert "read only by" in err and "--task" in err and "Traceback" not in err


def test_fit_model_with_training_flags_and_no_task_asks_for_the_task(run_cli: RunCli) -> None:
    code, out, err = run_cli("fit", "llama-3.1-8b", "--gpu", "4090", "--seq-len", "4096", "--batch-size", "4")
    assert code == 2 and out == ""
    assert "'seq_len' key is read only by training" in err and "--task" in err


def test_flags_override_the_workload_file_in_every_command(run_cli: RunCli) -> None:
    """examples/lora-4090.yaml says batch 2 on a 4090; --batch-size 1 --gpu L4 win in each command."""
    for command in COMMANDS:
        extra = ["--gpus", "L4"] if command == "plan" else []
        rec = _json(run_cli, [command, "examples/lora-4090.yaml", "--batch-size", "1", "--gpu", "L4", *extra, "--json"])
        assert rec["workload"]["batch_size"] == 1 and rec["workload"]["gpu"] == "L4", command


# --- plans on what the user owns -----------------------------------------------------------------

LAB = "examples/lab.yaml"
# examples/lab.yaml: 3 nodes of 4 RTX 2080 Ti, a node of 4 and one of 1 RTX 3090, a node of 8 A100
# 40GB; a job runs on one node, so the plan may use up to 4, 4 and 8 of them
LAB_ONE_NODE = {"GeForce RTX 2080 Ti": 4, "GeForce RTX 3090": 4, "A100 SXM4 40GB": 8}


def test_have_a_lab_file_plans_on_its_gpus(run_cli: RunCli) -> None:
    rec = _json(run_cli, ["plan", "examples/course-lora-3b.yaml", "--have", LAB, "--top", "100", "--json"])
    assert rec["have"] == LAB_ONE_NODE
    assert {o["gpu"] for o in rec["options"]} <= set(LAB_ONE_NODE)
    assert all(o["num_gpus"] <= LAB_ONE_NODE[o["gpu"]] for o in rec["options"])
    assert any(o["gpu"] == "A100 SXM4 40GB" and o["num_gpus"] == 8 for o in rec["options"])
    assert rec["rent_options"] and all(o["num_gpus"] > rec["have"].get(o["gpu"], 0) for o in rec["rent_options"])
    # the same as naming the GPUs by hand, and as the library with the lab file's Path
    by_hand = _json(
        run_cli,
        ["plan", "examples/course-lora-3b.yaml", "--have", "4x 2080 Ti, 4x 3090, 8x A100 40GB", "--top", "100",
         "--json"],
    )  # fmt: skip
    assert by_hand["options"] == rec["options"]
    p = gpuplan.plan("examples/course-lora-3b.yaml", have=Path(LAB), top=100)
    assert isinstance(p, gpuplan.Plan) and p.have == LAB_ONE_NODE
    code, out, _ = run_cli("plan", "examples/course-lora-3b.yaml", "--have", LAB)
    assert code == 0 and "one node's worth" in out and "on your GPUs" in out


@pytest.mark.parametrize(
    ("text", "match"),
    [("no-such-lab.yaml", "no-such-lab.yaml"), ("examples/chat-7b.yaml", "chat-7b.yaml")],
)
def test_a_bad_lab_file_is_one_line(text: str, match: str, run_cli: RunCli) -> None:
    code, out, err = run_cli("plan", "examples/course-lora-3b.yaml", "--have", text)
    assert code == 2 and out == "" and err.count("\n") == 1 and match in err and "Traceback" not in err


def test_a_geforce_card_you_own_is_a_note_not_a_licence_miss(run_cli: RunCli) -> None:
    """The GeForce driver licence bars datacenter deployment: a rented GeForce (a cloud's
    datacenter) is marked; the user's own card is usable, with a note, unless they say it sits in
    a datacenter (datacenter: true)."""
    job = ["plan", "examples/course-lora-3b.yaml", "--top", "100", "--json"]
    owned = _json(run_cli, [*job, "--have", "4x RTX 3090"])["options"]
    fits = [o for o in owned if o["fits"]]
    assert fits and all(o["gpu"] == "GeForce RTX 3090" for o in fits)
    assert all(not o["licence_barred"] and o["usable"] and "your own GeForce" in o["why"] for o in fits)
    rented = _json(run_cli, [*job, "--gpus", "3090"])["options"]
    assert [o for o in rented if o["fits"]] and all(o["licence_barred"] for o in rented if o["fits"])
    in_dc = _json(run_cli, [*job, "--have", "4x RTX 3090", "--set", "datacenter=true"])["options"]
    assert all(o["licence_barred"] and not o["usable"] for o in in_dc if o["fits"])
    desk = _json(run_cli, [*job, "--gpus", "3090", "--set", "datacenter=false"])["options"]
    assert all(not o["licence_barred"] and "licence" not in o["why"] for o in desk if o["fits"])
    # ownership changes the mark, not the estimate: the same times as on a workstation
    times = {o["num_gpus"]: o["time_s"] for o in desk if o["fits"]}
    assert all(o["time_s"] == pytest.approx(times[o["num_gpus"]], rel=1e-12) for o in fits)


def test_your_own_gpus_cost_their_electricity_not_rent() -> None:
    """No rent on cards the user owns: an owned option's cost is its GPU energy x the EIA 2022 US
    commercial electricity price (estimators/ownership.py); what renting would add keeps its price."""
    from gpuplan.estimators.ownership import DEFAULT_USD_PER_KWH

    p = gpuplan.plan("examples/course-lora-3b.yaml", have="4x RTX 3090", top=100, datacenter=False)
    rented = gpuplan.plan("examples/course-lora-3b.yaml", gpus=["3090"], top=100, datacenter=False)
    assert isinstance(p, gpuplan.Plan) and isinstance(rented, gpuplan.Plan)
    for o in (o for o in p.options if o.fits):
        assert o.energy_kwh is not None
        assert o.cost_usd == pytest.approx(o.energy_kwh * DEFAULT_USD_PER_KWH, rel=1e-9)
        same = next(r for r in rented.options if r.num_gpus == o.num_gpus)
        assert same.cost_usd is not None and (o.cost_usd or 0) < same.cost_usd / 5  # $0.08 vs $0.90 rent
    owned = max(o.cost_usd or 0 for o in p.options if o.fits)
    assert p.rent_options and all((r.cost_usd or 0) > 5 * owned for r in p.rent_options[:3])  # rent: $0.4-1.8
