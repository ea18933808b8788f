"""`topology -o kueue|kai|volcano|slurm-tree|slurm-block`: from the same model as `-o labels`,
NVLink domains from the statuses and Node objects given."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.webhook.export.fabrics import UUID, cel_failures, crd_schema
from webhook.__main__ import main
from webhook.fabric.sources.slurm import parse_conf

CONF = (
    "SwitchName=s0 Nodes=gpu[1-2]\nSwitchName=s1 Nodes=gpu[3-4]\nSwitchName=top Switches=s[0-1]\n"
)


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str, *status: Path) -> str:
    (tmp_path / "topology.conf").write_text(CONF)
    argv = ["topology", "--source", str(tmp_path / "topology.conf"), "-o", output]
    if status:
        argv += ["--status", *map(str, status)]
    assert main(argv) == 0
    return capsys.readouterr().out


def _status(name: str, clique: int) -> dict[str, object]:
    fabric = {"clusterUuid": UUID, "cliqueId": clique}
    return {
        "apiVersion": "gpufabric.io/v1alpha1",
        "kind": "GpuNodeStatus",
        "metadata": {"name": name},
        "status": {"gpus": [{"index": 0, "fabric": fabric}, {"index": 1, "fabric": fabric}]},
    }


def test_kueue_without_statuses_has_only_the_network_topology(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = list(yaml.safe_load_all(_run(tmp_path, capsys, "kueue")))
    assert [d["metadata"]["name"] for d in docs] == ["gpufabric"]


def test_nvlink_domains_from_statuses_and_clique_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu3", "labels": {"nvidia.com/gpu.clique": f"{UUID}.7"}},
    }
    files = tmp_path / "objs.yaml"
    files.write_text(yaml.safe_dump_all([_status("gpu1", 5), _status("gpu2", 5), node]))
    docs = list(yaml.safe_load_all(_run(tmp_path, capsys, "kai", files)))
    assert [d["metadata"]["name"] for d in docs] == ["gpufabric", "gpufabric-nvlink"]
    hns = list(yaml.safe_load_all(_run(tmp_path, capsys, "volcano", files)))
    tier1 = {h["metadata"]["name"] for h in hns if h["spec"]["tier"] == 1}
    assert tier1 == {f"nvlink-domain-{UUID}.5", f"nvlink-domain-{UUID}.7", "no-nvlink-s1"}


@pytest.mark.parametrize("output", ["slurm-tree", "slurm-block"])
def test_slurm_outputs_read_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    back = parse_conf(_run(tmp_path, capsys, output))
    assert sorted(back.nodes) == ["gpu1", "gpu2", "gpu3", "gpu4"]
    assert [leaf.nodes for leaf in back.leaves] == [("gpu1", "gpu2"), ("gpu3", "gpu4")]


def test_unknown_output_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "topology.conf").write_text(CONF)
    with pytest.raises(SystemExit) as exit_info:
        main(["topology", "--source", str(tmp_path / "topology.conf"), "-o", "slurm"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "version", "crd"),
    [
        ([], "v1beta2", "kueue-topology-crd.yaml"),
        (["--kueue-api", "v1beta1"], "v1beta1", "kueue-topology-crd.yaml"),
        (["--kueue-api", "v1alpha1"], "v1alpha1", "kueue-0.13-topology-crd-v1alpha1.yaml"),
    ],
)
def test_kueue_api_picks_the_version_and_validates_against_that_kueues_crd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], version: str, crd: str
) -> None:
    (tmp_path / "topology.conf").write_text(CONF)
    assert (
        main(["topology", "--source", str(tmp_path / "topology.conf"), "-o", "kueue", *argv]) == 0
    )
    (topology,) = yaml.safe_load_all(capsys.readouterr().out)
    assert topology["apiVersion"] == f"kueue.x-k8s.io/{version}"
    schema = crd_schema(crd, version)
    jsonschema.validate(topology, schema)
    assert cel_failures(topology, schema) == []


def test_unknown_kueue_api_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "topology.conf").write_text(CONF)
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "topology",
                "--source",
                str(tmp_path / "topology.conf"),
                "-o",
                "kueue",
                "--kueue-api",
                "v2",
            ]
        )
    assert exit_info.value.code == 2 and "invalid choice" in capsys.readouterr().err
