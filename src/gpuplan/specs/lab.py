"""A lab: its GPU nodes, its members (shares, monthly GPU-hour budgets) and its job queue.

Read from a YAML file (safe loader only), validated once with one clear line per problem:

    nodes:
      - {name: n1, gpus: {"RTX 2080 Ti": 4}}
      - {name: n4, gpus: {"A100 SXM4 40GB": 8}}
    members:
      - {name: ana, share: 1, gpu_hours_per_month: 500}
    jobs:
      - {name: lora-8b, owner: ana, model: llama-3.1-8b, task: lora, precision: bf16,
         batch_size: 2, seq_len: 2048, num_gpus: 1, tokens: 5.0e7}

A job is a workload (the keys of docs/workload.md) plus `name`, `owner` (a member), optionally `command` (what
`gpuplan lab submit` runs) and `submitted` (its place in a first-come-first-served queue: file
order when absent). Its size is `tokens` (or `epochs` x `dataset_tokens`); `deadline` is optional.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gpuplan.errors import InvalidSettingError, did_you_mean
from gpuplan.safeio import clip_repr, finite, refuse_directives
from gpuplan.specs.gpu import GPU, Catalog
from gpuplan.specs.workload import Workload, make_workload, read_user_text, safe_yaml

JOB_KEYS: Final = ("name", "owner", "command", "submitted")
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # safe as a Slurm job/account/node name


@dataclass(frozen=True)
class Node:
    name: str
    gpus: dict[str, int]  # catalog GPU name -> count


@dataclass(frozen=True)
class Member:
    name: str
    share: float  # relative fair share (Slurm's fairshare)
    gpu_hours_per_month: float | None  # budget in speed-normalised GPU-hours; None: unlimited


@dataclass(frozen=True)
class Job:
    name: str
    owner: str
    workload: Workload
    command: str | None
    order: int  # first-come-first-served position (0 first)


@dataclass(frozen=True)
class Lab:
    nodes: tuple[Node, ...]
    members: tuple[Member, ...]
    jobs: tuple[Job, ...]
    gpus: dict[str, GPU]  # catalog name -> GPU, for every type in the inventory

    def inventory(self) -> dict[str, int]:
        """GPU type -> count over all nodes."""
        out: dict[str, int] = {}
        for n in self.nodes:
            for g, c in n.gpus.items():
                out[g] = out.get(g, 0) + c
        return out

    def per_node(self, gpu: str) -> int:
        """The most GPUs of this type on one node (a job is placed on one node here)."""
        return max((n.gpus.get(gpu, 0) for n in self.nodes), default=0)

    def member(self, name: str) -> Member:
        return next(m for m in self.members if m.name == name)


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value.strip()):
        raise InvalidSettingError(
            f"The {what} name must be 1-64 letters, digits, '.', '_' or '-' (it becomes a Slurm name). Got {value!r}."
        )
    return value.strip()


def _list(data: Mapping[str, Any], key: str, origin: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list) or not value:
        raise InvalidSettingError(f"{origin}: '{key}' must be a non-empty list (see `gpuplan lab --help`).")
    return value


def _nodes(data: Mapping[str, Any], catalog: Catalog, origin: str) -> tuple[list[Node], dict[str, GPU]]:
    """The lab's nodes and the catalog GPUs they hold (names unique, 1-64 of a GPU a node)."""
    nodes: list[Node] = []
    gpus: dict[str, GPU] = {}
    for i, raw in enumerate(_list(data, "nodes", origin)):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("gpus"), Mapping) or not raw["gpus"]:
            raise InvalidSettingError(f"{origin}: node {i + 1} needs 'name' and 'gpus' ({{GPU name: count}}).")
        name = _name(raw.get("name"), "node")
        counts: dict[str, int] = {}
        for gname, count in raw["gpus"].items():
            gpu = catalog.get(str(gname))  # UnknownGPUError with did-you-mean
            if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 64:
                raise InvalidSettingError(
                    f"{origin}: node {name!r}: the count of {gname!r} must be 1-64. Got {count!r}."
                )
            gpus[gpu.name] = gpu
            counts[gpu.name] = counts.get(gpu.name, 0) + count
        nodes.append(Node(name, counts))
    if len({n.name for n in nodes}) != len(nodes):
        raise InvalidSettingError(f"{origin}: node names must be unique.")
    return nodes, gpus


def _members(data: Mapping[str, Any], origin: str) -> list[Member]:
    """The members with their fair shares and monthly budgets (names unique)."""
    members: list[Member] = []
    for i, raw in enumerate(_list(data, "members", origin)):
        if not isinstance(raw, Mapping):
            raise InvalidSettingError(f"{origin}: member {i + 1} must be a mapping with 'name'.")
        extra = set(raw) - {"name", "share", "gpu_hours_per_month"}
        if extra:
            raise InvalidSettingError(
                f"{origin}: member {raw.get('name')!r}: unknown key {sorted(extra)[0]!r} "
                "(a member has name, share, gpu_hours_per_month)."
            )
        share = raw.get("share", 1)
        budget = raw.get("gpu_hours_per_month")
        # a relative fair share (Slurm's Fairshare=, a whole number there): a billion to one between two
        # members is beyond any policy, and a share of 1e-300 left the allocation LP unbounded (HiGHS);
        # NaN fails every comparison, so it is refused here too
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0.001 <= share <= 1e6:
            raise InvalidSettingError(
                f"{origin}: member {clip_repr(raw.get('name'))}: share must be a number from 0.001 to "
                f"1,000,000. Got {clip_repr(share)}."
            )
        # a month's budget in GPU-hours: 1e7 is ~13,700 GPUs busy all month, beyond any lab
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int | float) or not 0 <= budget <= 1e7
        ):
            raise InvalidSettingError(
                f"{origin}: member {clip_repr(raw.get('name'))}: gpu_hours_per_month must be a number from 0 to "
                f"10,000,000. Got {clip_repr(budget)}."
            )
        members.append(
            Member(_name(raw.get("name"), "member"), float(share), None if budget is None else float(budget))
        )
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        raise InvalidSettingError(f"{origin}: member names must be unique.")
    return members


def _job(raw: Any, i: int, names: list[str], origin: str) -> Job:
    """One job of the queue: a workload (no GPU: the allocation picks it), its owner and command."""
    if not isinstance(raw, Mapping):
        raise InvalidSettingError(f"{origin}: job {i + 1} must be a mapping of workload keys plus name and owner.")
    name = _name(raw.get("name"), "job")
    owner = raw.get("owner")
    if owner not in names:
        hint = did_you_mean(str(owner), names)
        raise InvalidSettingError(f"{origin}: job {name!r}: owner {owner!r} is not a member.{hint}")
    keys = {k: v for k, v in raw.items() if k not in JOB_KEYS}
    if "gpu" in keys or "cluster" in keys:
        raise InvalidSettingError(
            f"{origin}: job {name!r}: leave out 'gpu'/'cluster': the allocation chooses among the lab's GPU types."
        )
    try:
        w = make_workload(keys)
    except InvalidSettingError as exc:
        raise InvalidSettingError(f"{origin}: job {name!r}: {exc}") from None
    if w.is_graphics:
        raise InvalidSettingError(f"{origin}: job {name!r}: lab mode schedules training and inference jobs.")
    if w.is_training and w.train_tokens is None:
        raise InvalidSettingError(
            f"{origin}: job {name!r} needs its size: 'tokens' (or 'epochs' with 'dataset_tokens')."
        )
    if not w.is_training and w.tokens is None:
        raise InvalidSettingError(f"{origin}: job {name!r}: an inference job needs 'tokens' (tokens to generate).")
    command = raw.get("command")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise InvalidSettingError(f"{origin}: job {name!r}: 'command' must be a shell command line.")
    if isinstance(command, str):
        refuse_directives(command, f"{origin}: job {name!r}")
    submitted = raw.get("submitted", i)
    finite(submitted, f"{origin}: job {name!r}: 'submitted' (its queue position)")  # NaN would scramble the order
    return Job(name, str(owner), w, command.strip() if command else None, int(i))


def parse_lab(data: Any, catalog: Catalog, origin: str = "lab file") -> Lab:
    """Validate a lab mapping (the parsed YAML)."""
    if not isinstance(data, Mapping):
        raise InvalidSettingError(f"{origin} must hold a mapping with 'nodes', 'members' and 'jobs'.")
    unknown = set(data) - {"nodes", "members", "jobs"}
    if unknown:
        key = sorted(unknown)[0]
        hint = did_you_mean(key, ["nodes", "members", "jobs"])
        raise InvalidSettingError(f"{origin}: unknown key {key!r}.{hint} A lab file has nodes, members and jobs.")
    nodes, gpus = _nodes(data, catalog, origin)
    members = _members(data, origin)
    names = [m.name for m in members]
    jobs = [_job(raw, i, names, origin) for i, raw in enumerate(_list(data, "jobs", origin))]
    if len({j.name for j in jobs}) != len(jobs):
        raise InvalidSettingError(f"{origin}: job names must be unique.")
    order = sorted(range(len(jobs)), key=lambda k: (float(_list(data, "jobs", origin)[k].get("submitted", k)), k))
    jobs = [Job(j.name, j.owner, j.workload, j.command, order.index(k)) for k, j in enumerate(jobs)]
    return Lab(tuple(nodes), tuple(members), tuple(jobs), gpus)


def read_lab_file(path: str | Path, catalog: Catalog) -> Lab:
    """Read and validate a lab YAML file."""
    p = Path(path)
    text = read_user_text(p, "lab file", "Pass a lab YAML file (nodes, members, jobs).")
    return parse_lab(safe_yaml(text, p.name), catalog, p.name)
