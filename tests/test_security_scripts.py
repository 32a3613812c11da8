"""Generated scripts carry nothing more than the user asked for (issue 24, script injection).

Every value that reaches a script gpuplan writes (a model folder, a GPU name, a job's command, a
partition) is one shell word, one comment line, or refused: checked with bash's own parser
(`bash -n`), shlex, YAML, and by counting the #SBATCH lines sbatch would read.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import RunCli
from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces.quoting import ShellExpr, comment, refuse_directives, sbatch_value, shell_join, shell_word

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "src" / "gpuplan" / "data" / "models" / "llama-3.2-1b.json"
LAB = ROOT / "examples" / "lab.yaml"
# a folder name a careless user (or an attacker sharing a disk) can make: spaces, $, backticks, quotes
HOSTILE = "my model $(touch pwned) `touch pwned2` 'q' \"d\" ; rm -rf x & #SBATCH --account=evil"
FORMATS = ("torchrun", "accelerate", "deepspeed", "fsdp", "slurm", "skypilot", "vllm")


def _model_dir(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True)
    shutil.copy(CONFIG, folder / "config.json")
    return folder


def _workload(tmp_path: Path, model: str, fmt: str) -> Path:
    task = "inference" if fmt == "vllm" else "lora"
    path = tmp_path / f"w-{fmt}.yaml"
    path.write_text(yaml.safe_dump({"model": model, "task": task, "gpu": "H100", "num_gpus": 2}), encoding="utf-8")
    return path


def _sbatch_directives(script: str) -> list[str]:
    """The #SBATCH lines sbatch reads: those before the first line that is neither blank nor a comment
    (sbatch(1): options "before any executable commands")."""
    out = []
    for line in script.splitlines()[1:]:
        s = line.strip()
        if s and not s.startswith("#"):
            break
        if s.startswith("#SBATCH"):
            out.append(s)
    return out


def _run_with_fake(tmp_path: Path, tool: str, script: str) -> list[str]:
    """Run `script` with bash, `tool` on PATH a stand-in that writes its argv as JSON; nothing else
    may run (no file named pwned appears)."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    fake = bin_dir / tool
    fake.write_text('#!/usr/bin/env python3\nimport json, sys\njson.dump(sys.argv[1:], open("argv.json", "w"))\n')
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work)}
    done = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert not list(work.glob("pwned*")) and not list(tmp_path.glob("pwned*"))
    argv: list[str] = json.loads((work / "argv.json").read_text())
    return argv


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_hostile_model_folder_is_one_word_and_no_line_of_its_own(tmp_path: Path, run_cli: RunCli, fmt: str) -> None:
    benign = _model_dir(tmp_path, "plain")
    hostile = _model_dir(tmp_path, HOSTILE)
    (tmp_path / "a").mkdir()
    code, plain, err = run_cli("launch", str(_workload(tmp_path / "a", str(benign), fmt)), "--format", fmt)
    assert code == 0, err
    code, out, err = run_cli("launch", str(_workload(tmp_path, str(hostile), fmt)), "--format", fmt)
    assert code == 0, err
    # the same lines as for a plain folder: the name neither adds nor removes a line
    assert len(out.splitlines()) == len(plain.splitlines())
    assert not any(line.lstrip().startswith("#SBATCH --account") for line in out.splitlines())
    if fmt in ("torchrun", "slurm", "vllm"):
        assert subprocess.run(["bash", "-n"], input=out, text=True, check=False).returncode == 0
        # the same directives (the job name is the model's slug: letters, digits, '.', '-')
        assert [d.split("=")[0] for d in _sbatch_directives(out)] == [
            d.split("=")[0] for d in _sbatch_directives(plain)
        ]
        if fmt == "vllm":  # run it, with a stand-in `vllm` that records its arguments
            argv = _run_with_fake(tmp_path, "vllm", out)
            assert argv[:2] == ["serve", str(hostile)]  # the path arrives whole, as one argument
    if fmt == "skypilot":
        task = yaml.safe_load(out)
        assert set(task) == set(yaml.safe_load(plain))
        assert shlex.split(task["run"].splitlines()[-1])[0] == "torchrun"
    if fmt == "deepspeed":
        json.loads(out[out.index("{") :])


def test_a_newline_in_a_model_path_is_refused_not_written(tmp_path: Path, run_cli: RunCli) -> None:
    folder = _model_dir(tmp_path, "m\n#SBATCH --account=evil")
    code, out, err = run_cli("launch", str(_workload(tmp_path, str(folder), "vllm")), "--format", "vllm")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "control character" in err and "\\n" in err


@pytest.mark.parametrize(
    "option",
    [("--partition", "gpu\n#SBATCH --account=evil"), ("--partition", "a b"), ("--gres-type", "h100 --qos=hi"),
     ("--time", "1:00:00\n#SBATCH --qos=high"), ("--partition", "")],
)  # fmt: skip
def test_sbatch_option_values_are_refused_unless_one_word(tmp_path: Path, run_cli: RunCli, option: Any) -> None:
    flag, value = option
    w = _workload(tmp_path, "llama-3.2-1b", "slurm")
    code, out, err = run_cli("launch", str(w), "--format", "slurm", flag, value)
    assert code == 2 and out == ""
    assert err.startswith("gpuplan: error: ") and err.count("\n") == 1
    assert "#SBATCH line" in err


def test_a_catalog_gpu_name_with_a_newline_never_reaches_a_script(tmp_path: Path, run_cli: RunCli) -> None:
    cat = tmp_path / "cat.toml"
    base = (ROOT / "src" / "gpuplan" / "data" / "gpus" / "nvidia-pcie-pro.toml").read_text(encoding="utf-8")
    cat.write_text(base.replace('name = "L4"', 'name = "L4\\n#SBATCH --account=evil"', 1), encoding="utf-8")
    code, out, err = run_cli("launch", "llama-3.2-1b", "--format", "slurm", "--catalog", str(cat),
                             "--cluster", "1x1:L4")  # fmt: skip
    assert code == 2 and "#SBATCH --account=evil" not in out
    assert err.count("\n") == 1


def _lab_with_command(tmp_path: Path, command: str) -> Path:
    data = yaml.safe_load(LAB.read_text(encoding="utf-8"))
    data["jobs"][1]["command"] = command
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "command",
    ["#SBATCH --account=ana\npython train.py", "python train.py\n#SBATCH --qos=high", "  #SBATCH --account=x",
     "#PBS -A other\npython x.py"],
)  # fmt: skip
def test_a_lab_command_that_reads_as_a_directive_is_refused(tmp_path: Path, run_cli: RunCli, command: str) -> None:
    lab = _lab_with_command(tmp_path, command)
    for argv in (["lab", "check", str(lab)], ["lab", "submit", str(lab), "--dry-run", "-o", str(tmp_path / "o")]):
        code, _, err = run_cli(*argv)
        assert code == 2, (argv, err)
        assert err.count("\n") == 1 and "directive" in err and "qlora-8b" in err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_the_directive_block_ends_before_the_users_command(tmp_path: Path, run_cli: RunCli) -> None:
    """A command starting with a comment of its own (allowed) still lands after a real command line."""
    lab = _lab_with_command(tmp_path, "# train the model\npython train_qlora.py")
    code, _, err = run_cli("lab", "submit", str(lab), "--dry-run", "-o", str(tmp_path / "o"))
    assert code == 0, err
    script = (tmp_path / "o" / "qlora-8b.sbatch").read_text(encoding="utf-8")
    lines = script.splitlines()
    first_command = next(i for i, line in enumerate(lines[1:], 1) if line.strip() and not line.startswith("#"))
    assert lines[first_command].startswith(":")  # the no-op gpuplan writes
    assert lines.index("# train the model") > first_command
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
    assert [d.split("=")[0] for d in _sbatch_directives(script)] == [
        "#SBATCH --job-name", "#SBATCH --account", "#SBATCH --partition", "#SBATCH --nodes", "#SBATCH --gres",
        "#SBATCH --time", "#SBATCH --output",
    ]  # fmt: skip


# --- the quoting functions themselves --------------------------------------------------------------

printable = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=60)


@settings(max_examples=300, deadline=None)
@given(printable)
def test_shell_word_is_always_one_word(text: str) -> None:
    assert shlex.split(shell_word(text)) == [text]
    joined = shell_join(["cmd", text, "x"]).replace("\\\n", "")  # bash drops backslash-newline (a continuation)
    assert shlex.split(joined) == ["cmd", text, "x"]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_a_comment_is_always_one_line(text: str) -> None:
    assert len(("# " + comment(text)).splitlines()) == 1


def test_gpuplans_own_shell_expressions_stay_unquoted_and_controls_are_refused() -> None:
    assert shell_word(ShellExpr("--rdzv-id=$SLURM_JOB_ID")) == "--rdzv-id=$SLURM_JOB_ID"
    assert shell_word("--rdzv-id=$SLURM_JOB_ID") == "'--rdzv-id=$SLURM_JOB_ID'"
    with pytest.raises(InvalidSettingError):
        shell_word("a\nb")
    with pytest.raises(InvalidSettingError):
        sbatch_value("gpu --qos=high", "--partition")
    assert refuse_directives("python x.py  # SBATCH in a comment is fine", "job") == (
        "python x.py  # SBATCH in a comment is fine"
    )
