"""The `--json` fast path (gpuplan/interfaces/cli/fast.py): estimate, fit and plan answered without
Typer give the same bytes and exit codes as the Typer commands; whatever it does not read is left to
Typer (help, usage errors); its option table is held equal to the Typer commands' options."""

from __future__ import annotations

import io
import re
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from gpuplan.interfaces.cli import _typer_main, load_commands, main
from gpuplan.interfaces.cli.fast import OPTIONS, parse

EX = Path(__file__).resolve().parent.parent / "examples"


def _run(fn: Any, args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        monkeypatch.setattr(sys, "stdout", out)
        code = fn(list(args))
    return code, out.getvalue(), err.getvalue()


def _timeless(run: tuple[int, str, str]) -> tuple[int, str, str]:
    """A cluster plan reports how long its layout search took (search.seconds): not an answer."""
    code, out, err = run
    return code, re.sub(r'"seconds": [0-9.e-]+', '"seconds": 0', out), err


SAME = [
    ["estimate", str(EX / "lora-4090.yaml"), "--json"],
    ["estimate", "--json", str(EX / "serve-70b.yaml")],
    ["estimate", "llama-3.1-8b", "--task", "qlora", "--gpu", "RTX 3090", "--seq-len=1024", "--json"],
    [
        "estimate",
        "llama-3.1-8b",
        "--task",
        "inference",
        "--gpu",
        "L4",
        "--set",
        "batch_size=8",
        "--set",
        "kv_dtype=fp8",
        "--json",
    ],
    ["estimate", str(EX / "lora-4090.yaml"), "--carbon", "400", "--batch-size", "2", "--batch-size", "4", "--json"],
    ["estimate", "llama-3.1-70b", "--task", "finetune", "--gpu", "H100", "--json"],  # does not fit: the fixes
    ["estimate", str(EX / "stream-4k.yaml"), "--json"],
    ["fit", "llama-3.1-8b", "--task", "lora", "--json"],
    ["fit", "mistral-7b", "--gpu", "A100 80GB", "--num-gpus", "2", "--json"],
    ["plan", str(EX / "pretrain-1b.yaml"), "--json"],
    ["plan", str(EX / "chat-7b.yaml"), "--gpus", "L4,A100", "--top", "3", "--objective", "cost", "--spot", "--json"],
    ["plan", str(EX / "pretrain-70b-cluster.yaml"), "--json"],
    ["plan", str(EX / "course-lora-3b.yaml"), "--have", "2x RTX 3090", "--budget", "50", "--json"],
    # bad input: the same one line and exit code 2 both ways
    ["estimate", "no-such-model-xyz", "--gpu", "H100", "--json"],
    ["estimate", str(EX / "lora-4090.yaml"), "--gpu", "no-such-gpu", "--json"],
    ["fit", "llama-3.1-8b", "--set", "zero=7", "--json"],
    ["plan", str(EX / "pretrain-1b.yaml"), "--cluster", "2x8:nope", "--json"],
]


@pytest.mark.parametrize("args", SAME, ids=[" ".join(a[:3]) for a in SAME])
def test_the_fast_path_answers_byte_for_byte_as_typer(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse(args[0], args[1:]) is not None  # the fast path reads this line
    fast = _run(main, args, monkeypatch)
    slow = _run(_typer_main, args, monkeypatch)
    assert _timeless(fast) == _timeless(slow)
    code, out, err = fast
    assert (code == 0 and out.startswith("{") and err == "") or (code == 2 and out == "" and err.count("\n") == 1)


LEFT_TO_TYPER = [
    ["--help"],
    ["--json", "--help"],
    [str(EX / "lora-4090.yaml")],  # no --json: tables
    [str(EX / "lora-4090.yaml"), "--json", "--no-such-option", "1"],
    [str(EX / "lora-4090.yaml"), "--json", "--gpu"],  # value missing
    [str(EX / "lora-4090.yaml"), "--json=1"],  # a flag given a value
    [str(EX / "lora-4090.yaml"), "llama-3.1-8b", "--json"],  # two arguments
    [str(EX / "lora-4090.yaml"), "--num-gpus", "two", "--json"],
    [str(EX / "lora-4090.yaml"), "--carbon", "nan", "--json"],
    [str(EX / "lora-4090.yaml"), "--carbon", "9000", "--json"],
    [str(EX / "lora-4090.yaml"), "--gpu", "--json"],  # a value that looks like an option
    ["--", str(EX / "lora-4090.yaml"), "--json"],
]


@pytest.mark.parametrize("args", LEFT_TO_TYPER)
def test_lines_it_does_not_read_go_to_typer(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse("estimate", args) is None
    assert _run(main, ["estimate", *args], monkeypatch) == _run(_typer_main, ["estimate", *args], monkeypatch)


@pytest.mark.parametrize("args", [["--top", "0"], ["--top", "100001"], ["--budget", "inf"], ["--spot=yes"]])
def test_plan_values_typer_refuses_go_to_typer(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    line = ["plan", str(EX / "pretrain-1b.yaml"), *args, "--json"]
    assert parse("plan", line[1:]) is None
    code, out, err = _run(main, line, monkeypatch)
    assert (code, out) == (2, "") and err.startswith("gpuplan: error:")


def test_a_repeated_option_keeps_the_last_and_set_accumulates() -> None:
    v = parse("estimate", ["m", "--gpu", "L4", "--gpu=H100", "--set", "a=1", "--set=b=2", "--tokens", "1e9", "--json"])
    assert v is not None
    assert (v["gpu"], v["set_"], v["tokens"], v["workload"]) == ("H100", ["a=1", "b=2"], 1e9, "m")


@pytest.mark.parametrize("command", sorted(OPTIONS))
def test_the_option_table_is_the_typer_commands(command: str) -> None:
    import typer.main

    from gpuplan.interfaces.cli import app

    load_commands([command])
    click_command = typer.main.get_group(app).commands[command]
    declared: dict[str, tuple[str, str, bool]] = {}
    kinds = {str: "str", int: "int", float: "float", Path: "path", bool: "flag"}
    for p in click_command.params:
        if p.param_type_name != "option" or p.name == "help":
            continue
        assert not getattr(p, "secondary_opts", []), p.name  # no --no-X forms to read
        (opt,) = p.opts
        # the parameter's declared type (typer keeps the annotation: Optional[int], list[Path], bool)
        ann = click_command.callback.__annotations__[p.name]
        base = next(t for t in (bool, int, float, Path, str) if t.__name__ in str(ann))
        declared[opt] = (p.name, kinds[base], bool(p.multiple))
    assert declared == dict(OPTIONS[command])


def test_estimate_json_loads_no_command_line_framework() -> None:
    import subprocess

    code = (
        "import sys\nfrom gpuplan.interfaces.cli import main\n"
        f"main(['estimate', {str(EX / 'lora-4090.yaml')!r}, '--json'])\n"
        "sys.stderr.write(' '.join(m for m in sys.modules if m.split('.')[0] in ('typer', 'click', 'rich')))\n"
    )
    src = str(Path(__file__).resolve().parent.parent / "src")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": src}, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.startswith("{")
    assert proc.stderr == ""


def test_an_interrupt_is_an_abort_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during a fast-path answer ends as Typer's does: 'gpuplan: aborted', exit code 1."""
    from gpuplan.interfaces.cli import fast

    def interrupted(*_: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(fast, "estimate_answer", interrupted)
    code, out, err = _run(main, ["estimate", str(EX / "lora-4090.yaml"), "--json"], monkeypatch)
    assert (code, out, err) == (1, "", "\ngpuplan: aborted\n")
