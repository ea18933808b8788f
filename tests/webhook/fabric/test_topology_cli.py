"""`gpufabric-webhook topology`: output forms and bad input (one line, exit 2, no traceback)."""

from __future__ import annotations

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
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    src = tmp_path / "topo"
    src.write_text(content)
    assert main(["topology", "--source", str(src)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
