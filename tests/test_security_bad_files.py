"""Bad FILES get one line and exit 2: never a traceback, a hang or gigabytes (issue 24, "bad input").

Every file gpuplan reads (workload and lab YAML, config.json, catalog TOML, price, purchase and
measurement CSV, calibration YAML, plan JSON) is read through gpuplan.safeio: a regular file of
bounded size (never /dev/zero, a FIFO, a socket or a folder), parsed with bounded nesting, alias
expansion and numbers, and any value echoed back is clipped with control characters escaped.
Each class is driven through the real command line: in-process where that is safe, in a
subprocess (with a timeout and a memory limit) where a regression would hang or eat the machine.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import RunCli
from gpuplan.errors import did_you_mean
from gpuplan.interfaces.api import parse_set_options
from gpuplan.safeio import load_yaml
from gpuplan.specs.gpu import Catalog

MAX_LINE = 2_100  # safeio.MAX_MESSAGE (2,000) plus the "gpuplan: error: " prefix and the newline
PRICE_HEADER = "gpu,provider,price_per_hour_usd,date_or_version,source\n"
PURCHASE_HEADER = "gpu,price_usd,kind,date,source\n"
MEASUREMENT_HEADER = "id,category,model,metric,value\n"
# nine lists of nine: 9**7 = 4.8 million strings once expanded, from a file of ~400 bytes
ALIAS_BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdef", "bcdefg", strict=True)
)
DEEP_YAML = "model: llama-3.1-8b\nx: " + "[" * 500 + "]" * 500 + "\n"


def assert_one_line(code: int, out: str, err: str, *fragments: str) -> None:
    """Exit 2, nothing on stdout, exactly one bounded `gpuplan: error:` line on stderr."""
    assert code == 2, (code, err[-500:])
    assert out == ""
    assert err.startswith("gpuplan: error: ") and err.endswith("\n") and err.count("\n") == 1, err[:500]
    assert "Traceback" not in err
    assert len(err) <= MAX_LINE, len(err)
    assert "\x1b" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))


def run_sub(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str, str]:
    """`gpuplan ARGS` in a child process with 30 s and 2 GiB: a FIFO read that blocks, or a
    /dev/zero read that grows, fails the test instead of hanging it or the machine."""
    full = {k: v for k, v in os.environ.items() if k not in ("GPUPLAN_CATALOG", "GPUPLAN_PRICES")}
    full |= {"COLUMNS": "200", "NO_COLOR": "1", "GPUPLAN_CACHE_DIR": ""} | (env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "gpuplan.interfaces.cli", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=full,
        cwd=cwd,
        preexec_fn=_limit_memory,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(autouse=True)
def _no_toml_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPLAN_CACHE_DIR", "")  # parse every catalog afresh; write nothing to ~/.cache
    monkeypatch.delenv("GPUPLAN_PRICES", raising=False)


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    yield path


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    try:
        yield path
    finally:
        s.close()


# --- YAML: alias bombs and deep nesting, in every YAML file -------------------------------------------


@pytest.mark.parametrize(("text", "fragment"), [(ALIAS_BOMB, "expands to more than"), (DEEP_YAML, "levels deep")])
def test_yaml_bombs_in_workload_lab_and_calibration_files(
    run_cli: RunCli, tmp_path: Path, text: str, fragment: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    for args in (
        ("estimate", str(bad), "--gpu", "h100"),
        ("lab", "check", str(bad)),
        ("estimate", "llama-3.1-8b", "--gpu", "h100", "--calibration", str(bad)),
    ):
        start = time.perf_counter()
        assert_one_line(*run_cli(*args), "bad.yaml", fragment)
        assert time.perf_counter() - start < 10, args


def test_a_key_given_twice_is_one_line_naming_key_and_lines(run_cli: RunCli, tmp_path: Path) -> None:
    """PyYAML keeps the last of two equal keys silently (`gpu: 4090` then `gpu: H100` ran on an
    H100); every YAML gpuplan reads refuses it, naming the key, its line and the first one's."""
    bad = tmp_path / "dup.yaml"
    bad.write_text("model: llama-3.1-8b\ngpu: 4090\ntask: lora\ngpu: H100\n")
    assert_one_line(*run_cli("estimate", str(bad)), "dup.yaml", "line 4 (first on line 2)", "'gpu'", "twice")
    lab = tmp_path / "lab.yaml"
    lab.write_text("nodes:\n  - {name: n1, gpus: {T4: 1}}\nmembers: []\nnodes: []\n")
    assert_one_line(*run_cli("lab", "check", str(lab)), "lab.yaml", "line 4 (first on line 1)", "'nodes'")
    cal = tmp_path / "cal.yaml"
    cal.write_text("h100:\n  mfu: 0.5\n  mfu: 0.4\n")
    args = ("estimate", "llama-3.1-8b", "--gpu", "h100", "--calibration", str(cal))
    assert_one_line(*run_cli(*args), "cal.yaml", "line 3 (first on line 2)", "'mfu'")
    # in one flow mapping, on one line; in --set
    assert_one_line(*run_cli("estimate", "llama-3.1-8b", "--set", "notes={a: 1, a: 2}"), "--set notes", "line 1", "'a'")


def test_a_merge_key_may_still_be_overridden(tmp_path: Path, run_cli: RunCli) -> None:
    """YAML's merge key (`<<: *base`) brings keys a mapping may override: that is not a duplicate."""
    f = tmp_path / "merge.yaml"
    f.write_text("base: &b {model: llama-3.1-8b, task: lora, gpu: 4090}\njob:\n  <<: *b\n  gpu: H100\n")
    assert load_yaml(f.read_text(), "merge.yaml")["job"] == {"model": "llama-3.1-8b", "task": "lora", "gpu": "H100"}


def test_set_option_is_bounded_like_a_file(run_cli: RunCli) -> None:
    huge = "1" + "0" * 5000
    assert_one_line(*run_cli("estimate", "llama-3.1-8b", "--gpu", "h100", "--set", f"batch_size={huge}"), "--set")
    assert_one_line(*run_cli("estimate", "llama-3.1-8b", "--gpu", "h100", "--set", f"batch_size={'9' * 100}"), "beyond")
    bomb = "[" * 500 + "]" * 500
    assert_one_line(*run_cli("estimate", "llama-3.1-8b", "--gpu", "h100", "--set", f"notes={bomb}"), "levels deep")
    # text that is not YAML at all is still taken as it is, as before
    assert parse_set_options(["command=echo a: b: c", "x=[1"]) == {"command": "echo a: b: c", "x": "[1"}


# --- config.json ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"model_type": "llama", "x": ' + "[" * 500 + "]" * 500 + "}", "levels deep"),
        ('{"model_type": "llama", "hidden_size": NaN}', "NaN is not a JSON number"),
        ('{"model_type": "llama", "hidden_size": Infinity}', "Infinity is not a JSON number"),
        ('{"model_type": "llama", "hidden_size": 1' + "0" * 400 + "}", "beyond any sensible value"),
    ],
)
def test_hostile_config_json_file_and_folder(run_cli: RunCli, tmp_path: Path, text: str, fragment: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(text)
    assert_one_line(*run_cli("model", str(folder)), fragment)
    assert_one_line(*run_cli("estimate", str(folder / "config.json"), "--gpu", "h100"), fragment)


# --- not a regular file: devices, FIFOs, sockets, folders -----------------------------------------------


def test_dev_zero_as_every_kind_of_file() -> None:
    dev = "/dev/zero"
    for args in (
        ("estimate", dev, "--gpu", "h100"),  # read as a config.json: was killed for memory
        ("model", dev),
        ("estimate", "llama-3.1-8b", "--gpu", "h100", "--catalog", dev),
        ("estimate", "llama-3.1-8b", "--gpu", "h100", "--prices", dev),
        ("rent-vs-buy", "h100", "--purchase-prices", dev),
        ("validate", "--file", dev),
    ):
        assert_one_line(*run_sub(*args), "not a regular file")
    assert_one_line(*run_sub("gpus", env={"GPUPLAN_CATALOG": dev}), "not a regular file")
    assert_one_line(*run_sub("plan", "llama-3.1-8b", env={"GPUPLAN_PRICES": dev}), "not a regular file")


def test_fifo_as_every_kind_of_file_never_blocks(tmp_path: Path, fifo: Path) -> None:
    yaml_fifo = tmp_path / "work.yaml"
    os.mkfifo(yaml_fifo)
    folder = tmp_path / "model"
    folder.mkdir()
    os.mkfifo(folder / "config.json")
    f = str(fifo)
    for args in (
        ("estimate", str(yaml_fifo), "--gpu", "h100"),  # workload YAML
        ("lab", "check", str(yaml_fifo)),
        ("estimate", f, "--gpu", "h100"),  # a config.json
        ("model", str(folder)),  # a model folder whose config.json is a FIFO
        ("estimate", "llama-3.1-8b", "--gpu", "h100", "--catalog", f),
        ("estimate", "llama-3.1-8b", "--gpu", "h100", "--calibration", str(yaml_fifo)),
        ("estimate", "llama-3.1-8b", "--gpu", "h100", "--prices", f),
        ("rent-vs-buy", "h100", "--purchase-prices", f),
        ("validate", "--file", f),
    ):
        assert_one_line(*run_sub(*args), "not a regular file")
    assert_one_line(*run_sub("gpus", env={"GPUPLAN_CATALOG": f}), "not a regular file")
    assert_one_line(*run_sub("plan", "llama-3.1-8b", env={"GPUPLAN_PRICES": f}), "not a regular file")


def test_socket_and_folder_where_a_file_is_expected(run_cli: RunCli, tmp_path: Path, unix_socket: Path) -> None:
    s = str(unix_socket)
    for args in (
        ("model", s),
        ("estimate", "llama-3.1-8b", "--gpu", "h100", "--catalog", s),
        ("estimate", "llama-3.1-8b", "--gpu", "h100", "--prices", s),
    ):
        code, out, err = run_cli(*args)
        assert_one_line(code, out, err)
        assert "not a regular file" in err or "Cannot read" in err
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    for args_ in (
        ("estimate", "llama-3.1-8b", "--gpu", "h100", "--catalog", str(folder)),
        ("estimate", "llama-3.1-8b", "--gpu", "h100", "--prices", str(folder)),
        ("validate", "--file", str(folder)),
    ):
        assert_one_line(*run_cli(*args_), "is a folder, not a file")


# --- size caps ------------------------------------------------------------------------------------------


def test_100_mb_files_are_refused_by_size(run_cli: RunCli, tmp_path: Path) -> None:
    big = tmp_path / "prices.csv"
    with big.open("wb") as f:
        f.truncate(100 * 2**20)  # sparse: the test writes nothing
    start = time.perf_counter()
    assert_one_line(*run_cli("estimate", "llama-3.1-8b", "--gpu", "h100", "--prices", str(big)), "over the limit")
    assert_one_line(*run_cli("estimate", "llama-3.1-8b", "--gpu", "h100", "--catalog", str(big)), "over the limit")
    assert_one_line(*run_cli("model", str(big)), "over the limit")
    assert time.perf_counter() - start < 10


# --- CSV ------------------------------------------------------------------------------------------------


def test_csv_field_over_the_limit_is_one_line(run_cli: RunCli, tmp_path: Path, catalog: Catalog) -> None:
    h100 = catalog.get("h100").name
    field = '"' + "a" * 200_000 + '"'
    prices = tmp_path / "prices.csv"
    prices.write_text(PRICE_HEADER + f"{h100},x,1,2024,y\n{field},x,1,2024,y\n")
    assert_one_line(
        *run_cli("estimate", "llama-3.1-8b", "--gpu", "h100", "--prices", str(prices)), "prices.csv line 3", "limit"
    )
    purchase = tmp_path / "purchase.csv"
    purchase.write_text(PURCHASE_HEADER + f"{field},100,msrp,2024,x\n")
    assert_one_line(*run_cli("rent-vs-buy", "h100", "--purchase-prices", str(purchase)), "limit")
    measured = tmp_path / "measured.csv"
    measured.write_text(MEASUREMENT_HEADER + f"m1,memory,{field},peak_memory_gib,1\n")
    assert_one_line(*run_cli("validate", "--file", str(measured)), "measured.csv line 2", "limit")


def test_csv_nul_bom_and_extra_columns(run_cli: RunCli, tmp_path: Path, catalog: Catalog) -> None:
    h100 = catalog.get("h100").name
    nul = tmp_path / "nul.csv"
    nul.write_bytes((PRICE_HEADER + f"{h100}\0,x,1,2024,y\n").encode())
    assert_one_line(*run_cli("estimate", "llama-3.1-8b", "--gpu", "h100", "--prices", str(nul)), "NUL byte")
    utf16 = tmp_path / "utf16.csv"
    utf16.write_bytes((PRICE_HEADER + f"{h100},x,1,2024,y\n").encode("utf-16-le"))
    assert_one_line(*run_cli("estimate", "llama-3.1-8b", "--gpu", "h100", "--prices", str(utf16)), "UTF-16")
    extra = tmp_path / "extra.csv"
    extra.write_text(PRICE_HEADER + f"{h100},x,1,2024,y,z,w\n")
    assert_one_line(
        *run_cli("estimate", "llama-3.1-8b", "--gpu", "h100", "--prices", str(extra)),
        "extra.csv line 2: 7 fields, the header has 5",
    )
    measured = tmp_path / "measured.csv"
    measured.write_text(MEASUREMENT_HEADER + "m1,memory,llama-3.1-8b,peak_memory_gib,1,surplus\n")
    assert_one_line(*run_cli("validate", "--file", str(measured)), "6 fields, the header has 5")
    # a byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name: the file is read
    bom = tmp_path / "bom.csv"
    bom.write_text("\ufeff" + PRICE_HEADER + f"{h100},my cloud,0.5,2024,me\n", encoding="utf-8")
    code, out, err = run_cli("estimate", "llama-3.1-8b", "--gpu", "h100", "--prices", str(bom), "--json")
    assert code == 0, err
    assert '"price_source": "my cloud (2024)"' in out and '"usd_per_gpu_hour": 0.5' in out


# --- TOML -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("x = " + "[" * 500 + "]" * 500 + "\n", "nests too deep"),
        ("x = " + "{a = " * 500 + "1" + "}" * 500 + "\n", "nests too deep"),
        ("x = " + "[" * 100 + "]" * 100 + "\n", "levels deep"),  # parsed by tomllib, refused after
        ("x = 1" + "0" * 5000 + "\n", "an integer of over 4,300 digits"),
        ("x = 1" + "0" * 100 + "\n", "beyond any sensible value"),
        ("x = nan\n", "finite number"),
        ("x = -inf\n", "finite number"),
        ("source = 1\n", "'source' must be tables"),  # valid TOML, the wrong shape: was an AttributeError
        ("gpu = 1\n", "'gpu' must be an array of tables"),
    ],
)
def test_hostile_catalog_toml(run_cli: RunCli, tmp_path: Path, text: str, fragment: str) -> None:
    cat = tmp_path / "cat.toml"
    cat.write_text(text)
    assert_one_line(*run_cli("gpus", "--catalog", str(cat)), "cat.toml", fragment)


def test_hostile_catalog_toml_through_the_cache(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the parsed-TOML cache on, a hostile document is refused the same way, first and second time."""
    monkeypatch.setenv("GPUPLAN_CACHE_DIR", str(tmp_path / "cache"))
    cat = tmp_path / "cat.toml"
    cat.write_text("x = " + "[" * 200 + "]" * 200 + "\n")  # deep enough to refuse, shallow enough to parse
    for _ in range(2):
        assert_one_line(*run_cli("gpus", "--catalog", str(cat)), "levels deep")


def test_catalog_gpu_name_with_control_characters_is_refused(run_cli: RunCli, tmp_path: Path) -> None:
    from helpers.catalog import USER_CATALOG

    cat = tmp_path / "cat.toml"
    # TOML refuses a raw control character in a string, but not its escape
    cat.write_text(USER_CATALOG.replace('name = "Lab RTX 4090 (power-capped)"', 'name = "Lab\\u001b[2J4090"'))
    assert_one_line(*run_cli("gpus", "--catalog", str(cat)), "control characters", "\\x1b[2J")


# --- long names: clipped, answered at once --------------------------------------------------------------


def test_60_kb_model_and_gpu_names_are_clipped_and_fast(run_cli: RunCli) -> None:
    name = "x" * 60_000
    for args, fragment in (
        (("model", name), "Unknown model"),
        (("estimate", "llama-3.1-8b", "--gpu", name), "Unknown GPU"),
        (("gpus", "show", name), "Unknown GPU"),
    ):
        start = time.perf_counter()
        code, out, err = run_cli(*args)
        assert time.perf_counter() - start < 2, args
        assert_one_line(code, out, err, fragment, "(60,000 characters)")
        assert len(err) < 600  # the name is clipped to ~200 characters, not to the whole line's 2,000


def test_did_you_mean_is_bounded_on_long_names() -> None:
    """difflib's ratio is quadratic: 20,000-character names against 20,000-character choices took
    0.4 s (60,000: seconds) before the 100-character cap; now nothing that long is compared."""
    import random

    rng = random.Random(1)

    def word(n: int) -> str:
        return "".join(chr(0x4E00 + rng.randrange(5000)) for _ in range(n))

    name, choices = word(60_000), [word(60_000) for _ in range(3)]
    start = time.perf_counter()
    assert did_you_mean(name, choices) == ""
    assert did_you_mean("h100 sxm", [*choices, "H100 SXM5 80GB"]) == " Did you mean: H100 SXM5 80GB?"
    assert time.perf_counter() - start < 0.5


# --- terminal escape codes in names ---------------------------------------------------------------------


def test_escape_sequences_in_a_model_folder_name_are_not_printed_raw(run_cli: RunCli, tmp_path: Path) -> None:
    from importlib import resources

    folder = tmp_path / "weird\x1b[2J\x1b]0;pwned\x07dir"
    folder.mkdir()
    (folder / "config.json").write_text((resources.files("gpuplan") / "data" / "models" / "gpt2.json").read_text())
    for args in (
        ("model", str(folder)),
        ("estimate", str(folder), "--gpu", "h100"),
        ("fit", str(folder)),
        ("plan", str(folder), "--top", "3"),
    ):
        code, out, err = run_cli(*args)
        assert code == 0, err
        assert "\x1b" not in out and "\x07" not in out and "\x1b" not in err, args
        assert "weird\\x1b[2J" in out
    # the same name in an error line (a missing file under it) is escaped too
    assert_one_line(*run_cli("estimate", str(folder / "missing.json"), "--gpu", "h100"), "\\x1b[2J")
    # the folder name echoed by a refusal (a FIFO as its config.json) as well
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")
    assert_one_line(*run_cli("model", str(folder)), "\\x1b]0;pwned\\x07", "not a regular file")


def test_rich_markup_in_a_model_folder_name_is_printed_as_it_is(run_cli: RunCli, tmp_path: Path) -> None:
    from importlib import resources

    folder = tmp_path / "a[bold]b"
    folder.mkdir()
    (folder / "config.json").write_text((resources.files("gpuplan") / "data" / "models" / "gpt2.json").read_text())
    for args in (("model", str(folder)), ("estimate", str(folder), "--gpu", "h100")):
        code, out, err = run_cli(*args)
        assert code == 0, err
        assert "a[bold]b" in out, args
