"""hack/ scripts: --help explains and writes nothing; bad arguments get one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OUTPUTS = (ROOT / "daemonset" / "base" / "crds", ROOT / "tests" / "fixtures" / "hosts")


def stamps() -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for d in OUTPUTS for p in d.iterdir()}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("script", "mentions"),
    [
        ("hack/gen_crds.py", ("--check", "--out", "daemonset/base/crds")),
        ("hack/make_fixtures.py", ("REFERENCE_DIR", "--out", "--only", "tests/fixtures/hosts")),
    ],
)
def test_help_explains_and_writes_nothing(script: str, mentions: tuple[str, ...]) -> None:
    before = stamps()
    out = run(script, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: {script}")
    for word in mentions:
        assert word in out.stdout
    assert stamps() == before


def test_gen_crds_check_reports_stale_files_without_writing(tmp_path: Path) -> None:
    assert run("hack/gen_crds.py", "--check").returncode == 0  # the committed CRDs are current
    (tmp_path / "gpuclaims.yaml").write_text("# old\n")
    out = run("hack/gen_crds.py", "--check", "--out", str(tmp_path))
    assert out.returncode == 1
    assert "gpuclaims.yaml is stale" in out.stderr and "gpunodestatuses.yaml" in out.stderr
    assert (tmp_path / "gpuclaims.yaml").read_text() == "# old\n"
    assert run("hack/gen_crds.py", "--out", str(tmp_path)).returncode == 0
    assert run("hack/gen_crds.py", "--check", "--out", str(tmp_path)).returncode == 0


def test_make_fixtures_refuses_a_missing_reference_dir_in_one_line(tmp_path: Path) -> None:
    before = stamps()
    out = run("hack/make_fixtures.py", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"))
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "nowhere" in out.stderr
    assert "Traceback" not in out.stderr
    assert stamps() == before and not (tmp_path / "o").exists()
