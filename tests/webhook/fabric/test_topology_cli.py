"""`gpufabric-webhook topology`: output forms and bad input (one line, exit 2, no traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.webhook.fabric.helpers import REF, hca, ref_path, status
from webhook.__main__ import main


def test_labels_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "topology",
                "--source",
                str(ref_path("slurm/circe-leaves-only-topology.conf")),
                "-o",
                "labels",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "circe-n001 gpufabric.io/spine=s0 gpufabric.io/leaf-quad=s0 gpufabric.io/leaf-pair=s0 gpufabric.io/leaf=s0"
    )
    assert not any(line.startswith("circe-n051 ") for line in lines)  # unplaced: omitted
    # s0: 001-016 + n019, n020 = 18; s1: 017-018, 021-036 = 18; s2: 041-058 = 18;
    # s3: 040, 060, 062-077 = 18; s4: 037-039, 051, 061, 078-080 = 8. 80 entries, 79 names
    # (n051 twice), and n051 is unplaced: 78 lines.
    assert len(lines) == 78


def test_yaml_output_with_statuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # jabl-2: switch S-000b8cffff0053ee holds compute-00-01 (H-0002c902002789ac) and compute-00-00.
    docs = [
        {
            "apiVersion": "gpufabric.io/v1alpha1",
            "kind": "GpuNodeStatus",
            "metadata": {"name": name},
            "status": st,
        }
        for name, st in (
            ("c1", status(hca("mlx5_0", 0x0002C902002789AC))),
            ("c9", status(hca("mlx5_0", 0x1))),
        )
    ]
    (tmp_path / "st.yaml").write_text(yaml.safe_dump_all(docs))
    src = REF / "ibnetdiscover/jabl-2-ibm-one-switch.topo"
    assert (
        main(
            ["topology", "--source", str(src), "--status", str(tmp_path / "st.yaml"), "-o", "yaml"]
        )
        == 0
    )
    out = yaml.safe_load(capsys.readouterr().out)
    assert out["spines"][0]["leaves"][0]["nodes"] == ["c1"]
    assert out["unplaced"][0]["node"] == "c9"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("hello world\n", "unknown topology format"),
        ("SwitchName=s0 Nodes=a[1-\n", "line 1: "),
        ('vendid=0x2c9\nSwitch\t36 "S-0021283a8389a0a0"\n[1] garbage\n', "line 3: "),
        # A repeated switch: either entry taken alone would drop the other's nodes.
        (
            "SwitchName=leaf1 Nodes=a[1-2]\nSwitchName=leaf2 Nodes=b[1-2]\n"
            "SwitchName=leaf1 Nodes=c[1-2]\nSwitchName=sp Switches=leaf[1-2]\n",
            "switch leaf1 is defined twice (line 1 and line 3)",
        ),
        (
            "- topology: t\n  tree:\n    switches:\n"
            "      - {switch: s, nodes: a1}\n      - {switch: s, nodes: a2}\n",
            "switch s is defined twice (topology 't' switches[0] and topology 't' switches[1])",
        ),
        # nodes.yaml entries that are no node name, no mapping with a name.
        (
            "leaves:\n  - name: l1\n    nodes: [1, null, {a: b}]\n",
            "leaf l1: nodes[0] is 1, not a node name or hostlist (quote it)",
        ),
        (
            "leaves:\n  - name: l1\n    nodes: [a1, null]\n",
            "leaf l1: nodes[1] is None, not a node name or hostlist",
        ),
        (
            "leaves:\n  - name: l1\n    nodes: [a1, {a: b}]\n",
            "leaf l1: nodes[1] is {'a': 'b'}, not a node name or hostlist",
        ),
        ("leaves:\n  - name: l1\n    nodes: 7\n", "leaf l1: nodes[0] is 7"),
        ("leaves:\n  - name: l1\n    nodes: [a1]\n  - 3\n", "leaves[1] needs a `name`"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    src = tmp_path / "topo"
    src.write_text(content)
    assert main(["topology", "--source", str(src)]) == 2
    out, err = capsys.readouterr()
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == ""


IB = REF / "ibnetdiscover"


def _status_doc(name: str, body: object) -> dict[str, object]:
    return {
        "apiVersion": "gpufabric.io/v1alpha1",
        "kind": "GpuNodeStatus",
        "metadata": {"name": name},
        "status": body,
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"hcas": 7}, "n1: unreadable GpuNodeStatus: status.hcas: expected a list, got int"),
        ({"hcas": [{"ports": 3}]}, "status.hcas[0].ports: expected a list, got int"),
        ({"gpus": 7}, "status.gpus: expected a list, got int"),  # explain's own message
        (["x"], "status: expected an object, got list"),
    ],
)
def test_a_status_of_the_wrong_shape_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: object, message: str
) -> None:
    st = tmp_path / "st.yaml"
    st.write_text(
        yaml.safe_dump_all([_status_doc("n0", status(hca("mlx5_0", 0x1))), _status_doc("n1", body)])
    )
    assert main(["topology", "--source", str(IB / "psmn-x5.topofile"), "--status", str(st)]) == 2
    err = capsys.readouterr().err
    assert f"{st}: " in err and message in err and len(err.strip().splitlines()) == 1


def test_the_preview_says_which_hcas_it_skipped_and_suggests_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # psmn-x5's HCAs keep the firmware's NodeDescription ("MT25408 ConnectX Mellanox Technologies").
    assert main(["topology", "--source", str(IB / "psmn-x5.topofile")]) == 0
    out = capsys.readouterr().out
    assert "skipped 89 cabled HCA(s) whose NodeDescription is not `host device`" in out
    assert "--status" in out
    assert "no node's HCA is cabled to a switch" not in out  # they are: only unnamed


def test_the_preview_counts_no_switchs_aggregation_node(capsys: pytest.CaptureFixture[str]) -> None:
    # The GB200 dump's 109 unnamed CAs: 69 `MT4129 ConnectX7` HCAs a node could own, and the
    # SHARP Aggregation Node on port 65 of each of its 40 switches, which no node owns.
    assert main(["topology", "--source", str(IB / "topograph-gb200-railopt-example.out")]) == 0
    assert "skipped 69 cabled HCA(s)" in capsys.readouterr().out


def test_the_preview_names_no_node_after_a_switchs_own_ca(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """jabl-2 (one switch, two named hosts) plus a CA in the switch's GUID block whose one-word
    NodeDescription would name a host, and an Aggregation Node by its NodeDescription alone."""
    cas = {
        "000b8cffff0053fe": "MF0;sw1:MQM9701/U1",  # the switch's GUID + 0x10, as on a Quantum-2
        "0002c9aaaa000001": "Mellanox Technologies Aggregation Node",
    }
    ports = "".join(
        f'[{port}]\t"H-{guid}"[1]({guid.lstrip("0")})\t\t# "{desc}" lid {port} 4xNDR\n'
        for port, (guid, desc) in enumerate(cas.items(), start=3)
    )
    blocks = "".join(
        f'\nvendid=0x2c9\ndevid=0xcf09\ncaguid=0x{guid.lstrip("0")}\nCa\t1 "H-{guid}"\t\t# "{desc}"'
        f'\n[1]({guid.lstrip("0")})\t"S-000b8cffff0053ee"[{port}]\t\t# lid {port} lmc 0 '
        '"MT43132 Mellanox Technologies" lid 3 4xNDR\n'
        for port, (guid, desc) in enumerate(cas.items(), start=3)
    )
    text = (IB / "jabl-2-ibm-one-switch.topo").read_text()
    at = text.index("\n\nvendid=0x2c9\ndevid=0x5a44") + 1
    text = text[:at] + ports + text[at:] + blocks
    dump = tmp_path / "dump.topo"
    dump.write_text(text)
    assert main(["topology", "--source", str(dump), "-o", "labels"]) == 0
    nodes = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert nodes == ["compute-00-00", "compute-00-01"]
    assert main(["topology", "--source", str(dump)]) == 0
    assert "skipped" not in capsys.readouterr().out


def test_the_preview_of_named_hcas_skips_none(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "--source", str(IB / "jabl-2-ibm-one-switch.topo")]) == 0
    assert "skipped" not in capsys.readouterr().out


def test_slurm_block_refusal_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "topology",
        "--source",
        str(IB / "psmn-x5.topofile"),
        "--status",
        str(IB / "psmn-x5.map"),
    ]
    assert main([*argv, "-o", "slurm-block", "--slurm-version", "24.11"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1


def test_dash_v_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["-V"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("gpufabric-webhook 0.")


@pytest.mark.parametrize("module", ["agent", "certs"])
def test_dash_v_is_version_for_every_command(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "-V"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.split()[-1].startswith("0."), done
