"""Every fixture host's status against its reviewed golden file and the CRD schema."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from agent.assemble import Assembled
from agent.output import status_object
from tests.conftest import HOSTS

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
CRD = ROOT / "daemonset" / "base" / "crds" / "gpunodestatuses.yaml"


def crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("host", HOSTS)
def test_golden_status_matches_reviewed_file(host: str, probed: dict[str, Assembled]) -> None:
    actual = status_object(host, probed[host])
    path = GOLDEN / f"{host}.yaml"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(yaml.safe_dump(actual, sort_keys=True))
    assert path.exists(), f"no golden for {host}; run with UPDATE_GOLDEN=1 and review it"
    assert actual == yaml.safe_load(path.read_text())


@pytest.mark.parametrize("host", HOSTS)
def test_golden_status_validates_against_crd_schema(host: str) -> None:
    golden = yaml.safe_load((GOLDEN / f"{host}.yaml").read_text())
    jsonschema.validate(golden, crd_schema())


def test_crd_schema_rejects_wrong_types() -> None:
    golden = yaml.safe_load((GOLDEN / "hgx-h100.yaml").read_text())
    golden["status"]["gpus"][0]["index"] = "zero"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(golden, crd_schema())
    golden = yaml.safe_load((GOLDEN / "hgx-h100.yaml").read_text())
    golden["status"]["summary"]["cufile"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(golden, crd_schema())


def test_hgx_h100_status_fits_16_kib(probed: dict[str, Assembled]) -> None:
    from agent.output import canonical_json

    size = len(canonical_json(status_object("hgx-h100", probed["hgx-h100"])).encode())
    assert size <= 16 * 1024, size


def test_committed_crds_equal_generated() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_crds", ROOT / "hack" / "gen_crds.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, text in module.render().items():
        assert (CRD.parent / name).read_text() == text, f"{name} is stale: run hack/gen_crds.py"
