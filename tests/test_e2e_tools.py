"""Where the e2e tier finds its control plane (tests/e2e/cluster.py find_tools): the directory
$GPUFABRIC_E2E_K8S names, else ../shared/tools/k8s beside the clone; without either, a reason
naming every path looked at. A unit test: it starts nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.e2e.cluster import SHARED_TOOLS, TOOLS_ENV, find_tools


def _tools(path: Path) -> Path:
    path.mkdir(parents=True)
    for script in ("up.sh", "down.sh"):
        (path / script).write_text("#!/bin/sh\n")
    return path


def test_the_environment_variable_wins_over_shared(tmp_path: Path) -> None:
    mine, shared = _tools(tmp_path / "mine"), _tools(tmp_path / "beside")
    assert find_tools({TOOLS_ENV: str(mine)}, shared).path == mine


def test_a_directory_without_up_and_down_falls_back_to_shared(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "up.sh").write_text("")  # no down.sh: not a control plane
    shared = _tools(tmp_path / "beside")
    assert find_tools({TOOLS_ENV: str(tmp_path / "empty")}, shared).path == shared


def test_neither_skips_naming_both_paths(tmp_path: Path) -> None:
    found = find_tools({TOOLS_ENV: str(tmp_path / "nowhere")}, tmp_path / "none-beside")
    assert found.path is None
    assert str(tmp_path / "nowhere") in found.reason
    assert str(tmp_path / "none-beside") in found.reason


def test_the_default_place_is_shared_tools_beside_the_clone() -> None:
    assert SHARED_TOOLS.parts[-3:] == ("shared", "tools", "k8s")
    assert SHARED_TOOLS.parent.parent.parent == Path(__file__).resolve().parents[2]
    found = find_tools({}, Path("/nonexistent/k8s"))
    assert found.reason.endswith("no up.sh/down.sh in /nonexistent/k8s")


def test_test_sh_help_documents_the_unit_flag_and_runs_nothing() -> None:
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        ["bash", str(root / "hack" / "test.sh"), "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "--unit   the unit tests alone" in out.stdout
    assert "GPUFABRIC_E2E_K8S" in out.stdout
    assert "All checks passed" not in out.stdout + out.stderr  # ruff did not run
