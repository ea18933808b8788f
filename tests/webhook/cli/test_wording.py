"""What a person reads from explain and mutate (issue 17 item 15): counts agree with their nouns,
and a GPU count that is not a small integer is shown as it is, never as 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.webhook.cli.test_cli import TP8, run
from tests.webhook.helpers import GOLDEN


def test_one_node_is_one_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.yaml").write_text((GOLDEN / "hgx-h100.yaml").read_text())
    code, out, _ = run(capsys, "explain", "--pod", TP8, "--status", str(tmp_path))
    assert code == 0 and "1 of 1 node admits this pod." in out and "1 nodes" not in out


def test_a_huge_gpu_count_is_shown_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (GOLDEN / "hgx-h100.yaml").read_text()
    assert "    gpuCount: 8\n" in text
    huge = "1" + "0" * 30
    (tmp_path / "s.yaml").write_text(text.replace("    gpuCount: 8\n", f"    gpuCount: {huge}\n"))
    code, out, _ = run(capsys, "explain", "--pod", TP8, "--status", str(tmp_path))
    assert code == 0
    assert f"the pod asks for 8 GPUs: node has gpufabric.io/gpu-count={huge}" in out
    assert "gpu-count=0" not in out
