"""One context: a GPU that exists only in the user's catalog file, and a price that exists only in
the user's price file, reach every command and face (--catalog / --prices, and $GPUPLAN_CATALOG /
$GPUPLAN_PRICES), and the library reads each file once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from conftest import RunCli
from gpuplan.errors import GpuplanError
from gpuplan.interfaces.web import create_app
from gpuplan.specs.context import Context
from helpers.catalog import USER_CATALOG
from helpers.golden_cases import EXAMPLES

LAB = "Lab RTX 4090 (power-capped)"  # defined only in USER_CATALOG; its alias is lab4090
PRICE = 0.123  # USD per GPU-hour, only in the user's price file
LORA = str(EXAMPLES / "lora-4090.yaml")
CHAT = str(EXAMPLES / "chat-7b.yaml")
PRETRAIN = str(EXAMPLES / "pretrain-1b.yaml")


@pytest.fixture
def user_files(tmp_path: Path) -> tuple[Path, Path]:
    cat = tmp_path / "mycat.toml"
    cat.write_text(USER_CATALOG)
    prices = tmp_path / "myprices.csv"
    prices.write_text(f"gpu,provider,price_per_hour_usd,date_or_version,source\nlab4090,our lab,{PRICE},2026-12,own\n")
    return cat, prices


def _lab_file(tmp_path: Path) -> Path:
    lab = tmp_path / "lab.yaml"
    lab.write_text(
        "nodes:\n  - {name: n1, gpus: {lab4090: 4}}\n"
        "members:\n  - {name: ana, share: 1}\n"
        "jobs:\n  - {name: lora, owner: ana, model: llama-3.2-1b, task: lora, batch_size: 2, seq_len: 1024,\n"
        "     tokens: 1.0e7, command: 'python train.py'}\n"
    )
    return lab


def _commands(tmp_path: Path) -> list[list[str]]:
    """Every command that reads the catalog, each naming the user's GPU."""
    lab = str(_lab_file(tmp_path))
    return [
        ["gpus", "--json"],
        ["gpus", "show", "lab4090", "--json"],
        ["compare", "lab4090", "4090", "--json"],
        ["fit", LORA, "--set", "gpu=lab4090", "--json"],
        ["fit", "llama-3.2-1b", "--json"],
        ["estimate", LORA, "--set", "gpu=lab4090", "--json"],
        ["plan", CHAT, "--gpus", "lab4090", "--json"],
        ["plan", PRETRAIN, "--cluster", "2x4:lab4090", "--set", "model=gpt2", "--json"],
        ["launch", LORA, "--format", "torchrun", "--set", "gpu=lab4090", "--json"],
        ["launch", LORA, "--format", "slurm", "--set", "gpu=lab4090", "--json"],
        ["chart", "relative", "--json"],
        ["rent-vs-buy", "lab4090", "--price", "1500", "--json"],
        ["lab", "check", lab, "--json"],
        ["lab", "allocate", lab, "--json"],
        ["lab", "slurm-config", lab],
        ["lab", "submit", lab, "--dry-run", "--out", str(tmp_path / "sbatch"), "--json"],
    ]


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_user_catalog_gpu_reaches_every_command(
    how: str, user_files: tuple[Path, Path], tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, _ = user_files
    for argv in _commands(tmp_path):
        if how == "option":
            argv = [*argv, "--catalog", str(cat)]
        else:
            monkeypatch.setenv("GPUPLAN_CATALOG", str(cat))
        if argv[0] == "lab" and argv[1] == "submit":
            for f in (tmp_path / "sbatch").glob("*"):
                f.unlink()
        code, out, err = run_cli(*argv)
        assert code == 0, f"{argv}: {err}"
        # slurm-config names the card by its GRES type (launch.gres_name: "lab")
        assert LAB in out or "lab4090" in out or "Type=lab " in out, argv


def test_without_the_user_catalog_the_gpu_is_unknown(tmp_path: Path, run_cli: RunCli) -> None:
    for argv in _commands(tmp_path)[1:]:
        if (argv[0] in ("gpus", "chart") and len(argv) < 4) or argv[1] == "llama-3.2-1b":
            continue  # the tables over the whole catalog: they run, without the user's GPU
        code, _, err = run_cli(*argv)
        assert code == 2 and "lab4090" in err.lower(), (argv, err)


def test_launch_honours_the_user_catalog(user_files: tuple[Path, Path], run_cli: RunCli) -> None:
    """The bug that asked for one context: `launch --catalog` said "Unknown GPU" for a GPU of the
    user's catalog unless --cluster was also given."""
    cat, _ = user_files
    code, out, err = run_cli("launch", LORA, "--format", "torchrun", "--set", "gpu=lab4090", "--catalog", str(cat))
    assert code == 0, err
    assert "torchrun" in out and "--nproc-per-node=1" in out


def test_user_prices_reach_plan_estimate_rent_and_lab(
    user_files: tuple[Path, Path], tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, prices = user_files
    files = ["--catalog", str(cat), "--prices", str(prices)]
    code, out, err = run_cli("estimate", LORA, "--set", "gpu=lab4090", "--set", "tokens=1e7", *files, "--json")
    assert code == 0, err
    assert json.loads(out)["cost"]["usd_per_gpu_hour"] == pytest.approx(PRICE)
    code, out, err = run_cli("plan", CHAT, "--gpus", "lab4090", *files, "--json")
    assert code == 0, err
    assert json.loads(out)["options"][0]["usd_per_hour"] == pytest.approx(PRICE)
    code, out, err = run_cli("rent-vs-buy", "lab4090", "--price", "1500", *files, "--json")
    assert code == 0, err
    assert json.loads(out)["rent"]["on_demand"]["usd_per_hour"] == pytest.approx(PRICE)
    # the cost policy rents the user's priced GPU, not only the bundled snapshot's
    lab = _lab_file(tmp_path)
    big = tmp_path / "big.yaml"  # a job too large for the lab's own 4 cards: it must burst to rented GPUs
    big.write_text(
        lab.read_text()
        + "  - {name: full, owner: ana, model: llama-3.1-8b, task: finetune, batch_size: 4, seq_len: 2048,\n"
        "     tokens: 1.0e7, deadline: 2d, command: 'python train.py'}\n"
    )
    code, out, err = run_cli("lab", "allocate", str(big), "--policy", "cost", *files, "--json")
    assert code == 0, err
    assert LAB in out
    # the same through the environment
    monkeypatch.setenv("GPUPLAN_CATALOG", str(cat))
    monkeypatch.setenv("GPUPLAN_PRICES", str(prices))
    code, out, err = run_cli("plan", CHAT, "--gpus", "lab4090", "--json")
    assert code == 0, err
    assert json.loads(out)["options"][0]["usd_per_hour"] == pytest.approx(PRICE)


def test_the_web_app_plans_with_the_user_context(user_files: tuple[Path, Path]) -> None:
    cat, prices = user_files
    client = TestClient(create_app([cat], prices))
    assert LAB in {g["name"] for g in client.get("/api/gpus").json()}
    r = client.post("/api/estimate", json={"model": "llama-3.2-1b", "gpu": "lab4090", "tokens": 1e7})
    assert r.status_code == 200, r.text
    assert r.json()["cost"]["usd_per_gpu_hour"] == pytest.approx(PRICE)


def test_a_context_reads_its_files_once(user_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    cat, prices = user_files
    ctx = Context.of([cat], prices).check()
    assert ctx.catalog.get("lab4090").name == LAB
    cat.write_text("not toml [[[")  # read already: the context keeps what it read
    prices.unlink()
    assert ctx.catalog.get("lab4090").name == LAB
    assert ctx.prices()[LAB].usd_per_hour == pytest.approx(PRICE)
    with pytest.raises(GpuplanError, match=r"mycat\.toml"):
        Context.of([cat]).check()


def test_calibration_and_catalog_files_are_told_apart(tmp_path: Path) -> None:
    ctx = Context.of([tmp_path / "a.toml", tmp_path / "cal.yaml", tmp_path / "b.YML"], tmp_path / "p.csv")
    assert ctx.catalog_files == (tmp_path / "a.toml",)
    assert ctx.calibration_files == (tmp_path / "cal.yaml", tmp_path / "b.YML")
    assert ctx.price_file == tmp_path / "p.csv"
