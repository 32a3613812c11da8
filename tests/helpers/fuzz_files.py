"""Hostile files for gpuplan's readers, and the one rule every answer must keep.

Each kind of file a user hands gpuplan (workload YAML, config.json, catalog TOML, price CSV, lab
YAML) starts from a real, valid document; hypothesis then mutates it the way an attacker or a
careless user would: a value replaced by NaN, infinity, a negative, a 1,000-digit integer, a
1e300, a string with a newline, an `#SBATCH` line or a terminal escape, a 70,000-character name or
a 100-level nest; a key deleted or an unknown one added; the text cut short or spliced with junk;
or the whole file replaced by a known attack (an alias bomb, 500-level nesting, a 5,000-digit
number). The file is written to disk and given to the real command line in-process.

The rule (`check_answer`): the command either answers (exit 0; with --json, strict JSON) or
refuses in one line `gpuplan: error: ...` of bounded length with exit 2; never a traceback (any
other exception propagates out of `cli.main` and fails the case), never a raw control character
on the terminal.

tests/test_fuzz_files.py runs a few thousand cases in `make test`; bench/fuzz_files.py runs as
many as asked (the README states a 100,000-case run).
"""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import json
import math
import os
import re
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from gpuplan.interfaces.cli import main
from gpuplan.safeio import MAX_MESSAGE

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "gpuplan" / "data"

# --- values an attacker or a careless user puts where a number or a name belongs -----------------

SPECIAL_VALUES: list[Any] = [
    0,
    -1,
    1,
    2**31,
    2**63,
    -(2**63) - 1,
    10**300,
    10**1000,
    1e300,
    -1e300,
    5e-324,
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    True,
    False,
    None,
    "",
    " ",
    "nan",
    ".inf",
    "1e309",
    "-1h",
    "24h",
    "0",
    "H100",
    "RTX 4090",
    "llama-3.1-8b",
    "/dev/zero",
    "../../../../etc/passwd",
    "org/name",
    "a\nb",
    "x\n#SBATCH --account=other",
    "#SBATCH --qos=high",
    "\x1b[2J\x1b[31mred",
    "\u202eevil",
    "$(touch pwned) `id` 'q' \"d\"",
    "x" * 70_000,
    [],
    {},
    [1, 2, 3],
    {"a": 1},
]

scalars = st.one_of(
    st.sampled_from(SPECIAL_VALUES).map(copy.deepcopy),  # a fresh copy: later edits may append to a drawn list
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)


def _nest(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


values = st.one_of(
    scalars,
    st.integers(min_value=2, max_value=120).map(_nest),
    st.lists(scalars, max_size=5),
    st.dictionaries(st.text(max_size=10), scalars, max_size=4),
)

# Whole-file attacks, in any format: each is refused in one line.
BOMB = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
    ]
)
ATTACKS = [
    BOMB,
    "a:" + " [" * 500 + "]" * 500,
    "[" * 500 + "]" * 500,
    '{"a":' * 500 + "1" + "}" * 500,
    "batch_size: " + "9" * 5000,
    "frames: 1" + "0" * 309,
    "x = " + "[" * 500 + "]" * 500,
    "x = 1" + "0" * 5000,
    "\x00\x01\x02",
    "\ufeff" + "model: llama-3.1-8b",
    "&a [*a]",
    "a: &a\n  b: *a",
    "!!python/object/apply:os.system ['touch pwned']",
    "",
    "---\n---\n",
]


# --- mutating a parsed document ------------------------------------------------------------------


def _containers(tree: Any) -> list[Any]:
    out: list[Any] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict | list):
            out.append(node)
            stack.extend(node.values() if isinstance(node, dict) else node)
    return out


def mutate(tree: Any, data: st.DataObject, keys: list[str]) -> Any:
    """1-3 edits of a deep copy of `tree`: replace a value, delete a key or item, add a key
    (known or random) with a hostile value."""
    tree = json.loads(json.dumps(tree, default=str))
    for _ in range(data.draw(st.integers(min_value=1, max_value=3), label="edits")):
        nodes = _containers(tree)
        if not nodes:
            return data.draw(values, label="root")
        node = data.draw(st.sampled_from(nodes), label="node")
        action = data.draw(st.sampled_from(["replace", "replace", "delete", "add"]), label="action")
        if isinstance(node, dict):
            if action == "add" or not node:
                key = data.draw(st.one_of(st.sampled_from(keys or ["x"]), st.text(max_size=12)), label="key")
                node[key] = data.draw(values, label="value")
            else:
                key = data.draw(st.sampled_from(sorted(node)), label="key")
                if action == "delete":
                    del node[key]
                else:
                    node[key] = data.draw(values, label="value")
        else:
            if action == "add" or not node:
                node.append(data.draw(values, label="value"))
            else:
                i = data.draw(st.integers(min_value=0, max_value=len(node) - 1), label="index")
                if action == "delete":
                    del node[i]
                else:
                    node[i] = data.draw(values, label="value")
    return tree


def corrupt(text: str, data: st.DataObject) -> str:
    """Text-level damage: cut short, junk spliced in, or a whole-file attack."""
    how = data.draw(st.sampled_from(["none", "none", "none", "cut", "splice", "attack"]), label="corrupt")
    if how == "cut" and text:
        return text[: data.draw(st.integers(min_value=0, max_value=len(text)), label="cut")]
    if how == "splice":
        at = data.draw(st.integers(min_value=0, max_value=len(text)), label="at")
        junk = data.draw(st.text(max_size=20), label="junk")
        return text[:at] + junk + text[at:]
    if how == "attack":
        return data.draw(st.sampled_from(ATTACKS), label="attack")
    return text


# --- writing documents ---------------------------------------------------------------------------


def _big_ints_as_text(tree: Any) -> Any:
    """int -> text conversion stops at 4,300 digits (Python's guard): keep larger ones as strings."""
    if isinstance(tree, dict):
        return {k: _big_ints_as_text(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_big_ints_as_text(v) for v in tree]
    if isinstance(tree, int) and not isinstance(tree, bool) and tree.bit_length() > 14_000:
        return str(tree)
    return tree


def to_yaml(tree: Any) -> str:
    return yaml.safe_dump(_big_ints_as_text(tree), allow_unicode=True, sort_keys=False, width=10_000)


def to_json(tree: Any) -> str:
    return json.dumps(_big_ints_as_text(tree), allow_nan=True)  # NaN / Infinity tokens on purpose


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        if _DATE.match(value):  # a source's `read` date went through JSON as text: a TOML date again
            return value
        return json.dumps(value)  # JSON string escapes are valid TOML basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items() if v is not None)
        return "{" + inner + "}"
    return json.dumps(str(value))


def to_toml(tree: Any) -> str:
    """A catalog document ({gpu: [rows], source: {key: table}}) as TOML; other shapes as inline values."""
    if not isinstance(tree, dict):
        return f"x = {_toml_value(tree)}\n"
    lines: list[str] = []
    for key, value in tree.items():
        if value is None:
            continue
        if key == "gpu" and isinstance(value, list) and all(isinstance(r, dict) for r in value):
            for row in value:
                lines.append("[[gpu]]")
                lines += [f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in row.items() if v is not None]
        elif key == "source" and isinstance(value, dict) and all(isinstance(s, dict) for s in value.values()):
            for name, table in value.items():
                lines.append(f"[source.{_toml_key(str(name))}]")
                lines += [f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in table.items() if v is not None]
        else:
            lines.insert(0, f"{_toml_key(str(key))} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def to_csv(rows: Any) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for row in rows if isinstance(rows, list) else [[rows]]:
        cells = row if isinstance(row, list) else [row]
        writer.writerow(["" if c is None else str(c)[:100_000] for c in cells])
    return buf.getvalue()


# --- seeds: real, valid documents ----------------------------------------------------------------

WORKLOAD_SEED: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "lora-4090.yaml").read_text(encoding="utf-8"))
CONFIG_SEED: dict[str, Any] = json.loads((DATA / "models" / "llama-3.2-1b.json").read_text(encoding="utf-8"))


def _catalog_seed() -> dict[str, Any]:
    doc = tomllib.loads((DATA / "gpus" / "nvidia-pcie-pro.toml").read_text(encoding="utf-8"))
    row = dict(next(r for r in doc["gpu"] if r["name"] == "L4"))
    row["name"], row["aliases"] = "Fuzz GPU", ["fuzzgpu"]
    cited = set(row.get("sources", {}).values())
    return {"gpu": [row], "source": {k: v for k, v in doc["source"].items() if k in cited}}


CATALOG_SEED = _catalog_seed()
PRICE_SEED: list[list[str]] = [
    ["gpu", "provider", "price_per_hour_usd", "date_or_version", "source"],
    ["H100 SXM5 80GB", "my cloud on-demand 1x", "2.50", "2026-12", "my invoice"],
    ["RTX 4090", "my cloud spot 1x", "0.40", "2026-12", "my invoice"],
]
LAB_SEED: dict[str, Any] = {
    "nodes": [{"name": "n1", "gpus": {"RTX 3090": 2}}, {"name": "n2", "gpus": {"A100 SXM4 40GB": 2}}],
    "members": [{"name": "ana", "share": 2, "gpu_hours_per_month": 200}, {"name": "ben", "share": 1}],
    "jobs": [
        {"name": "lora-1b", "owner": "ana", "model": "llama-3.2-1b", "task": "lora", "batch_size": 2,
         "seq_len": 1024, "tokens": 1.0e7, "command": "python train.py"},
        {"name": "eval-1b", "owner": "ben", "model": "llama-3.2-1b", "task": "inference", "batch_size": 4,
         "input_len": 512, "output_len": 128, "tokens": 1.0e6, "command": "python eval.py"},
    ],
}  # fmt: skip


@dataclass(frozen=True)
class Kind:
    """One kind of user file: its seed, the keys worth adding, how it is written, and the command
    that reads it (`{file}` is the file's path)."""

    name: str
    seed: Any
    keys: list[str]
    write: Callable[[Any], str]
    suffix: str
    argv: list[str]


def _workload_keys() -> list[str]:
    from gpuplan.specs.workload import Workload

    return sorted(Workload.model_fields)


KINDS: dict[str, Kind] = {
    "workload": Kind("workload", WORKLOAD_SEED, _workload_keys(), to_yaml, ".yaml", ["estimate", "{file}", "--json"]),
    "config": Kind(
        "config", CONFIG_SEED, sorted(CONFIG_SEED), to_json, ".json",
        ["estimate", "{file}", "--gpu", "A100 SXM4 80GB", "--set", "task=lora", "--json"],
    ),
    "catalog": Kind(
        "catalog", CATALOG_SEED, sorted(CATALOG_SEED["gpu"][0]), to_toml, ".toml",
        ["estimate", "llama-3.2-1b", "--catalog", "{file}", "--gpu", "Fuzz GPU", "--json"],
    ),
    "prices": Kind(
        "prices", PRICE_SEED, ["gpu", "provider", "price_per_hour_usd"], to_csv, ".csv",
        ["estimate", str(ROOT / "examples" / "lora-4090.yaml"), "--gpu", "H100", "--prices", "{file}", "--json"],
    ),
    "lab": Kind(
        "lab", LAB_SEED, ["nodes", "members", "jobs", "share", "gpu_hours_per_month", "command", "gpus", "owner"],
        to_yaml, ".yaml", ["lab", "check", "{file}", "--json"],
    ),
}  # fmt: skip


def draw_text(kind: Kind, data: st.DataObject) -> str:
    """A hostile document of this kind: the seed mutated, written, perhaps corrupted as text."""
    tree = mutate(kind.seed, data, kind.keys)
    try:
        text = kind.write(tree)
    except (ValueError, TypeError, yaml.YAMLError):  # a value its own format cannot write
        text = kind.write(kind.seed)
    return corrupt(text, data)


@dataclass(frozen=True)
class Answer:
    code: int
    stdout: str
    stderr: str


def run(kind: Kind, text: str) -> Answer:
    """Write `text` as the kind's file and run its command in-process, offline."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"input{kind.suffix}"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        argv = [a.replace("{file}", str(path)) for a in kind.argv]
        out, err = io.StringIO(), io.StringIO()
        old = os.environ.get("HF_HUB_OFFLINE")
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(argv)
        finally:
            if old is None:
                os.environ.pop("HF_HUB_OFFLINE", None)
            else:
                os.environ["HF_HUB_OFFLINE"] = old
    return Answer(code, out.getvalue(), err.getvalue())


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} in --json output")


def check_answer(answer: Answer, json_output: bool = True) -> None:
    """The rule: an answer or one bounded error line; strict JSON; no raw control characters."""
    assert answer.code in (0, 2), (answer.code, answer.stderr[-500:])
    assert "Traceback" not in answer.stderr
    for stream in (answer.stdout, answer.stderr):
        assert "\x1b" not in stream and "\x9b" not in stream, stream[:300]
    if answer.code == 2:
        lines = answer.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpuplan: error: "), answer.stderr[:500]
        assert len(lines[0]) <= MAX_MESSAGE + 40, len(lines[0])
    elif json_output:
        json.loads(answer.stdout, parse_constant=_no_constant)
