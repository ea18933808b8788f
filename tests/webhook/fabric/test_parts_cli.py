"""`topology --source F -o configmaps` and `--source` reading such a List back (issue 22)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes.fabric_dump import FatTree
from tests.webhook.fabric.helpers import REF
from webhook.__main__ import main
from webhook.fabric.sources.parts import PART_LABEL
from webhook.fabric.sources.split import configmaps, split

MIB = 1 << 20
PSMN = REF / "ibnetdiscover" / "psmn-x5.topofile"
PSMN_MAP = REF / "ibnetdiscover" / "psmn-x5.map"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["topology", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def stored_size(obj: dict[str, Any]) -> int:
    """The object as the API server takes it (compact JSON, binaryData base64)."""
    return len(json.dumps(obj, separators=(",", ":")).encode())


def test_a_4096_node_dump_as_configmaps_gives_the_same_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 4,096 8-rail nodes: 13 MiB of ibnetdiscover, ~1 MiB gzipped: two parts. The 65,536-node
    # check (222 MB, ~24 parts) is bench/topology_parts_bench.py: too slow for the suite.
    text, _ = FatTree(128, 32, rails=8, spines=16, tiers=3, pod_size=4).render()
    dump = tmp_path / "fabric.topo"
    dump.write_text(text)
    rc, out, _ = run(capsys, "--source", str(dump), "-o", "configmaps")
    assert rc == 0
    doc = yaml.safe_load(out)
    assert (doc["apiVersion"], doc["kind"]) == ("v1", "List")
    items = doc["items"]
    assert len(items) >= 2 and all(stored_size(o) < MIB for o in items)
    assert [o["metadata"]["namespace"] for o in items] == ["gpufabric-system"] * len(items)
    assert [o["metadata"]["labels"][PART_LABEL] for o in items] == [
        str(i) for i in range(len(items))
    ]
    parts = tmp_path / "parts.yaml"
    parts.write_text(out)
    rc, from_parts, _ = run(capsys, "--source", str(parts), "-o", "labels")
    rc_raw, from_raw, _ = run(capsys, "--source", str(dump), "-o", "labels")
    assert rc == rc_raw == 0
    assert from_parts == from_raw and len(from_raw.splitlines()) == 4096


def test_a_small_source_is_one_readable_configmap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "fabric")
    rc, out, _ = run(capsys, "--source", str(PSMN), "-o", "configmaps")
    assert rc == 0
    (item,) = yaml.safe_load(out)["items"]
    assert item["metadata"]["name"] == "gpufabric-topology"
    assert item["metadata"]["namespace"] == "fabric"
    assert item["data"] == {"ibnetdiscover": PSMN.read_text()}
    # `kubectl get configmap gpufabric-topology -o yaml` of it reads back as the dump does.
    single = tmp_path / "cm.yaml"
    single.write_text(yaml.safe_dump(item))
    from_cm = run(capsys, "--source", str(single), "--status", str(PSMN_MAP), "-o", "labels")
    raw = run(capsys, "--source", str(PSMN), "--status", str(PSMN_MAP), "-o", "labels")
    assert from_cm == raw and raw[0] == 0 and raw[1]
    # And cut again from the ConfigMap: the same ConfigMap.
    assert run(capsys, "--source", str(single), "-o", "configmaps", "--namespace", "fabric") == (
        0,
        out,
        "",
    )


def test_namespace_flag(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "--source", str(PSMN), "-o", "configmaps", "--namespace", "ops")
    assert rc == 0 and yaml.safe_load(out)["items"][0]["metadata"]["namespace"] == "ops"


def _parts_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """Parts as `-o configmaps` prints them, cut small (a real dump that big is slow here)."""
    text, _ = FatTree(4, 4, rails=8, spines=4).render()
    items = list(configmaps(split([text.encode()], "ibnetdiscover", 2048), "gpufabric-system"))
    assert len(items) >= 3
    return items


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda items: {"apiVersion": "v1", "kind": "List", "items": []}, "no ConfigMap"),
        (
            lambda items: {"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node"}]},
            "no ConfigMap",
        ),
        (
            lambda items: {"apiVersion": "v1", "kind": "List", "items": items[:1] + items[2:]},
            "part 1 of ",
        ),
        (
            lambda items: {"apiVersion": "v1", "kind": "List", "items": items[1:]},
            "part 0 missing",
        ),
    ],
    ids=["empty-list", "no-configmap", "gap", "no-part-0"],
)
def test_bad_configmaps_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, message: str
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({"kind": "List", "items": _parts_file(tmp_path, capsys)}))
    assert run(capsys, "--source", str(good), "-o", "labels")[0] == 0
    path = tmp_path / "parts.yaml"
    path.write_text(yaml.safe_dump(edit(_parts_file(tmp_path, capsys))))
    for output in ("labels", "configmaps"):
        rc, out, err = run(capsys, "--source", str(path), "-o", output)
        assert (rc, out) == (2, "")
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_configmaps_of_node_labels_or_a_binary_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = run(capsys, "--source", str(PSMN), "--topology-labels", "aws", "-o", "configmaps")
    assert rc == 2 and "not node labels" in err
    binary = tmp_path / "ibnetdiscover"
    binary.write_bytes(b"Switch 36 \xff\xfe\n" * 10)
    rc, _, err = run(capsys, "--source", str(binary), "-o", "configmaps")
    assert rc == 2 and "not UTF-8 text (byte offset 10)" in err
    assert len(err.strip().splitlines()) == 1
