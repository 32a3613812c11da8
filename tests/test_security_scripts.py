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
     ("--time", "1:00:00\n#SBATCH --qos=high"), ("--partition", ""), ("--partition", 'gpu" --qos="high'),
     ("--partition", "gpu\\ --qos=high"), ("--gres-type", "h100#x"), ("--time", "'1:00:00'"),
     ("--partition", "gpu\u2028x"), ("--time", "\t")],
)  # fmt: skip
def test_sbatch_option_values_are_refused_unless_one_word(tmp_path: Path, run_cli: RunCli, option: Any) -> None:
    flag, value = option
    w = _workload(tmp_path, "llama-3.2-1b", "slurm")
    code, out, err = run_cli("launch", str(w), "--format", "slurm", flag, value)
    assert code == 2 and out == ""
    assert err.startswith("gpuplan: error: ") and err.count("\n") == 1
    assert "#SBATCH line" in err


def _user_catalog(tmp_path: Path, name: str) -> Path:
    from helpers.catalog import USER_CATALOG

    cat = tmp_path / f"cat-{len(list(tmp_path.glob('cat-*')))}.toml"
    cat.write_text(USER_CATALOG.replace('name = "Lab RTX 4090 (power-capped)"', f"name = {json.dumps(name)}"))
    return cat


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_catalog_gpu_name_with_a_newline_never_reaches_a_script(tmp_path: Path, run_cli: RunCli, fmt: str) -> None:
    cat = _user_catalog(tmp_path, "L4x\n#SBATCH --account=evil")  # JSON's \n is TOML's: a real newline
    code, out, err = run_cli("launch", "llama-3.2-1b", "--format", fmt, "--catalog", str(cat),
                             "--cluster", "1x2:lab4090")  # fmt: skip
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "control characters" in err and "\\n#SBATCH" in err


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_hostile_catalog_gpu_name_is_one_comment_line_in_every_format(
    tmp_path: Path, run_cli: RunCli, fmt: str
) -> None:
    """A GPU name from a user's catalog reaches the header comment (and the GRES type): it stays one
    comment line there, and the file parses as for a plain name."""
    task = "task=inference" if fmt == "vllm" else "task=lora"
    results = []
    for name in ("Lab RTX 4090 (power-capped)", HOSTILE):
        cat = _user_catalog(tmp_path, name)
        results.append(run_cli("launch", "llama-3.2-1b", "--format", fmt, "--catalog", str(cat),
                               "--cluster", "1x2:lab4090", "--set", task))  # fmt: skip
    (code0, plain, err0), (code, out, err) = results
    if fmt == "skypilot":  # no SkyPilot accelerator of either name: one line, the name clipped
        assert code == code0 == 2 and err.count("\n") == 1 and "SkyPilot lists no accelerator" in err
        return
    assert code == code0 == 0, (err0, err)
    assert len(out.splitlines()) == len(plain.splitlines())
    directives = [x.split("=")[0] for x in out.splitlines() if x.startswith("#SBATCH")]
    assert directives == [x.split("=")[0] for x in plain.splitlines() if x.startswith("#SBATCH")]
    assert all(
        x.split("=", 1)[1].replace(":", "").isalnum() for x in out.splitlines() if x.startswith("#SBATCH --gres")
    )
    head = [x for x in out.splitlines() if "touch pwned" in x]
    assert len(head) == (fmt != "deepspeed") and all(x.startswith("# gpuplan: ") for x in head)  # JSON: no comment
    if fmt in ("torchrun", "slurm", "vllm"):
        assert subprocess.run(["bash", "-n"], input=out, text=True, check=False).returncode == 0
    elif fmt == "deepspeed":
        assert json.loads(out) == json.loads(plain)
    else:  # accelerate, fsdp: YAML after the comment lines
        assert yaml.safe_load(out) == yaml.safe_load(plain)


def _lab_with_command(tmp_path: Path, command: str) -> Path:
    data = yaml.safe_load(LAB.read_text(encoding="utf-8"))
    data["jobs"][1]["command"] = command
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "command",
    ["#SBATCH --account=ana\npython train.py", "python train.py\n#SBATCH --qos=high", "  #SBATCH --account=x",
     "#sbatch --account=x", "#SLURM --account=x\npython x.py",  # sbatch still reads the old #SLURM prefix
     "#PBS -A other\npython x.py",
     # sbatch reads #PBS/#BSUB lines AFTER the first command too, and applies them last (xlate.c)
     "python x.py\n#PBS -A other", "python x.py\n\t#BSUB -P other"],
)  # fmt: skip
def test_a_lab_command_that_reads_as_a_directive_is_refused(tmp_path: Path, run_cli: RunCli, command: str) -> None:
    lab = _lab_with_command(tmp_path, command)
    for argv in (["lab", "check", str(lab)], ["lab", "submit", str(lab), "--dry-run", "-o", str(tmp_path / "o")]):
        code, out, err = run_cli(*argv)
        assert code == 2 and out == "", (argv, err)
        assert err.startswith("gpuplan: error: ") and err.count("\n") == 1
        assert "directive" in err and "qlora-8b" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


@pytest.mark.parametrize(
    ("command", "shown"),
    [("python x.py\r\n#SBATCH --account=ana", "\\r"), ("echo \x1b[2J done", "\\x1b"),
     ("python x.py \u202e#yp.niart", "\\u202e"), ("python a.py\u2028#SBATCH --account=ana", "\\u2028")],
)  # fmt: skip
def test_a_lab_command_with_control_characters_is_refused(
    tmp_path: Path, run_cli: RunCli, command: str, shown: str
) -> None:
    """A carriage return, an escape sequence, a bidi override or a Unicode line separator is no part
    of a shell command (each can hide a line from whoever reads the lab file)."""
    lab = _lab_with_command(tmp_path, command)
    for argv in (["lab", "check", str(lab)], ["lab", "submit", str(lab), "--dry-run", "-o", str(tmp_path / "o")]):
        code, out, err = run_cli(*argv)
        assert code == 2 and out == "", (argv, err)
        assert err.count("\n") == 1 and "control character" in err and shown in err and "qlora-8b" in err


def test_comments_and_multi_line_commands_are_kept(tmp_path: Path, run_cli: RunCli) -> None:
    """Only what sbatch reads as a directive is refused: ordinary comments, tabs and lines stay."""
    command = (
        "# SBATCH is not read with a space\ncd $HOME/run\t# tab\n#$ a Grid Engine line sbatch ignores\npython x.py"
    )
    lab = _lab_with_command(tmp_path, command)
    code, _, err = run_cli("lab", "submit", str(lab), "--dry-run", "-o", str(tmp_path / "o"))
    assert code == 0, err
    script = (tmp_path / "o" / "qlora-8b.sbatch").read_text(encoding="utf-8")
    assert script.endswith(command + "\n")
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0


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
        "#SBATCH --time", "#SBATCH --output", "#SBATCH --ignore-pbs",
    ]  # fmt: skip


def test_a_plain_command_follows_the_no_op_that_ends_the_directives(tmp_path: Path, run_cli: RunCli) -> None:
    lab = _lab_with_command(tmp_path, "python train.py --lr 1e-4")
    code, _, err = run_cli("lab", "submit", str(lab), "--dry-run", "-o", str(tmp_path / "o"))
    assert code == 0, err
    lines = (tmp_path / "o" / "qlora-8b.sbatch").read_text(encoding="utf-8").splitlines()
    at = lines.index("python train.py --lr 1e-4")
    assert lines[at - 1] == ": end of the directives gpuplan wrote"
    assert all(line.startswith("#") for line in lines[: at - 1])  # only the header and the directives before it
    assert sum(line.startswith("#SBATCH") for line in lines) == 8


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


# --- every value that reaches a command: the model folder, --script, a plan JSON's workload ---------

NEWLINE_FOLDER = "my model $(touch pwned) `x` 'q' \"d\"\nline2"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_folder_name_with_a_newline_is_a_comment_escape_or_refused(tmp_path: Path, run_cli: RunCli, fmt: str) -> None:
    """Where the folder reaches only the header comment, its newline is written as \\n (one line);
    where it would be a word of a command (vLLM's model), the launch is refused in one line."""
    plain = _model_dir(tmp_path, "plain")
    folder = _model_dir(tmp_path, NEWLINE_FOLDER)
    (tmp_path / "a").mkdir()
    code0, benign, err0 = run_cli("launch", str(_workload(tmp_path / "a", str(plain), fmt)), "--format", fmt)
    code, out, err = run_cli("launch", str(_workload(tmp_path, str(folder), fmt)), "--format", fmt)
    assert code0 == 0, err0
    if fmt == "vllm":
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "control character" in err and "\\nline2" in err
        return
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == len(benign.splitlines())
    assert not any(line.startswith("line2") for line in lines)
    assert sum(line.startswith("#SBATCH") for line in lines) == sum(
        x.startswith("#SBATCH") for x in benign.splitlines()
    )
    if fmt != "deepspeed":
        assert any(line.startswith("# gpuplan: ") and "\\nline2" in line for line in lines)


def test_a_hostile_script_path_is_one_word_in_every_command(tmp_path: Path, run_cli: RunCli) -> None:
    script = "my train $(touch pwned) `touch pwned2` 'q' \"d\" #SBATCH --account=evil.py"
    w = str(_workload(tmp_path, "llama-3.2-1b", "torchrun"))
    code, out, err = run_cli("launch", w, "--format", "torchrun", "--script", script)
    assert code == 0, err
    argv = _run_with_fake(tmp_path, "torchrun", out)
    # bash hands the path over whole; after it come only the adapter's flags (--use_peft, --lora_r=...)
    assert script in argv and all(a.startswith("--") for a in argv[argv.index(script) + 1 :])
    code, out, err = run_cli("launch", w, "--format", "slurm", "--script", script)
    assert code == 0, err
    assert subprocess.run(["bash", "-n"], input=out, text=True, check=False).returncode == 0
    srun = out[out.index("srun ") :].replace("\\\n", "")  # the continuation lines, as bash joins them
    words = shlex.split(srun, comments=True)
    assert script in words and all(w.startswith("--") for w in words[words.index(script) + 1 :])
    assert [x for x in out.splitlines() if x.startswith("#SBATCH")] == _sbatch_directives(out)
    code, out, err = run_cli("launch", w, "--format", "skypilot", "--script", script)
    assert code == 0, err
    run = shlex.split(yaml.safe_load(out)["run"].splitlines()[-1])
    assert script in run and all(a.startswith("--") for a in run[run.index(script) + 1 :])
    code, out, err = run_cli("launch", w, "--format", "torchrun", "--script", "train.py\n#SBATCH --account=evil")
    assert code == 2 and out == "" and err.count("\n") == 1 and "control character" in err


def test_a_model_folder_named_like_an_option_stays_a_path(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _model_dir(tmp_path, "--trust-remote-code")
    code, out, err = run_cli("launch", str(_workload(tmp_path, "--trust-remote-code", "vllm")), "--format", "vllm")
    assert code == 0, err
    argv = _run_with_fake(tmp_path, "vllm", out)
    assert argv[:2] == ["serve", "./--trust-remote-code"] and "--trust-remote-code" not in argv


def test_a_plan_json_hands_its_model_path_over_as_one_word(tmp_path: Path, run_cli: RunCli) -> None:
    folder = _model_dir(tmp_path, HOSTILE)
    code, plan, err = run_cli("plan", str(_workload(tmp_path, str(folder), "vllm")), "--json")
    assert code == 0, err
    path = tmp_path / "plan.json"
    path.write_text(plan, encoding="utf-8")
    code, out, err = run_cli("launch", str(path), "--format", "vllm")
    assert code == 0, err
    assert _run_with_fake(tmp_path, "vllm", out)[:2] == ["serve", str(folder)]
    # the same plan naming a folder whose name holds a newline: refused, not written
    bad = _model_dir(tmp_path, "m\n#SBATCH --account=evil")
    rec = json.loads(plan)
    rec["workload"]["model"] = str(bad)
    path.write_text(json.dumps(rec), encoding="utf-8")
    code, out, err = run_cli("launch", str(path), "--format", "vllm")
    assert code == 2 and out == "" and err.count("\n") == 1 and "control character" in err


# --- the rules themselves, against what sbatch does --------------------------------------------------


def _sbatch_reads(script: str) -> list[str]:
    """The lines Slurm's sbatch takes options from, written from its source independently of gpuplan:
    "#SBATCH"/"#SLURM" at the start of a line until the first line that is not blank or a comment
    (src/sbatch/opt.c, _opt_batch_script), and "#PBS"/"#BSUB" at the start of any line
    (src/sbatch/xlate.c); lines end at "\\n" only (next_line)."""
    read, commands_started = [], False
    for line in script.split("\n"):
        sbatch_line = line.startswith(("#SBATCH", "#SLURM")) and not commands_started
        if sbatch_line or line.startswith(("#PBS", "#BSUB")):
            read.append(line)
        elif line.strip() and not line.lstrip().startswith("#"):
            commands_started = True
    return read


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["#SBATCH --account=x", "#SLURM -A x", "#PBS -A x", "#BSUB -P x", "  #SBATCH",
                                 "#sbatch", "python x.py", "# a comment", "", "\t#PBS", "echo '#PBS'", "\r"]),
                max_size=6).map("\n".join) | st.text(max_size=80))  # fmt: skip
def test_a_command_gpuplan_accepts_adds_nothing_sbatch_reads(command: str) -> None:
    from gpuplan.interfaces.lab import sbatch_script
    from gpuplan.specs.lab import Job
    from gpuplan.specs.workload import make_workload

    try:
        refuse_directives(command, "job 'x'")
    except InvalidSettingError as exc:
        assert "\n" not in str(exc)
        return
    w = make_workload({"model": "llama-3.2-1b", "task": "lora", "tokens": 1_000_000})
    script = sbatch_script(Job("x", "ana", w, command, 0), "H100", "h100", 1, 1.0)
    plain = sbatch_script(Job("x", "ana", w, "python x.py", 0), "H100", "h100", 1, 1.0)
    assert _sbatch_reads(script) == _sbatch_reads(plain)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_an_sbatch_value_is_one_word_as_sbatch_reads_it(text: str) -> None:
    try:
        value = sbatch_value(text, "--partition")
    except InvalidSettingError as exc:
        assert "\n" not in str(exc)
        return
    line = f"#SBATCH --partition={value}"
    assert len(line.split()) == 2 and line.splitlines() == [line]
    assert not set(value) & set("\"'\\#")  # sbatch's own quoting, escapes and comments
