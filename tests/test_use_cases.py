"""`gpus --use-cases`: the seed's claims must come out of the rules, for every catalog GPU."""

from __future__ import annotations

import json

from conftest import RunCli
from gpuplan.planner.use_cases import use_cases
from gpuplan.specs.gpu import Catalog


def test_seed_recommendations(catalog: Catalog) -> None:
    assert use_cases(catalog.get("L4")).recommendation.startswith("affordable general-purpose entry card")
    assert use_cases(catalog.get("L40")).recommendation == "generative inference and visual computing"
    assert use_cases(catalog.get("A100")).recommendation.startswith("value for single-node CNN training")
    assert use_cases(catalog.get("H100")).recommendation.startswith("LLMs and transformers")
    assert "distributed training and inference" in use_cases(catalog.get("H100")).recommendation


def test_graphics_classes_from_rules(catalog: Catalog) -> None:
    cls = {g.name: use_cases(g).graphics_class for g in catalog}
    assert cls["H100 SXM5 80GB"] == cls["A100 SXM4 80GB"] == cls["B200"] == "none"
    assert cls["L40"] == cls["L40S"] == "4k"
    assert cls["L4"] == "1080p"
    assert cls["V100 SXM2 32GB"] == "vws"
    assert "GeForce licence" in use_cases(catalog.get("4090")).graphics


def test_multi_node_and_every_row(catalog: Catalog) -> None:
    for g in catalog:
        u = use_cases(g)
        assert u.compute and u.graphics and u.multi_node and u.recommendation
        assert u.multi_node.startswith("yes") == g.multi_node
    assert use_cases(catalog.get("L4")).multi_node.startswith("single host")


def test_use_cases_cli(run_cli: RunCli) -> None:
    code, out, err = run_cli("gpus", "--use-cases", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert {"name", "compute", "graphics", "multi_node", "recommendation"} <= set(rows[0])
    assert len(rows) >= 29
    code, out, err = run_cli("gpus", "--use-cases")
    assert code == 0 and "generative inference and visual computing" in out
