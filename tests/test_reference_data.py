"""The suite runs from a clone alone: the reference data it replays is in tests/fixtures/ (with
provenance), and only tests/reference.py reaches ../shared, for the files this repository may not
carry, skipping with the file's name and source where it is absent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import reference
from tests.webhook.fabric.helpers import NOT_COPIED, ref_path

TESTS = Path(__file__).resolve().parent
# A path built to ../shared: `/ "shared"`, "../shared/...", "/work/shared/...".
OUTSIDE = re.compile(r'/\s*"shared"|"(?:\.\./|/work/)shared')


def test_only_tests_reference_reads_beside_the_clone() -> None:
    offenders = [
        str(p.relative_to(TESTS))
        for p in TESTS.rglob("*.py")
        if p.name not in {"reference.py", Path(__file__).name} and OUTSIDE.search(p.read_text())
    ]
    assert offenders == []


def fixture_folders() -> list[Path]:
    return [p for p in (TESTS / "fixtures").iterdir() if p.is_dir()]


def test_every_fixture_folder_says_where_its_data_comes_from() -> None:
    for folder in fixture_folders():
        provenance = folder / "PROVENANCE.md"
        assert provenance.is_file(), folder.name
        text = provenance.read_text()
        # The copyright notices and licence texts the upstreams ask to travel with their files.
        assert "](../NOTICES.md)" in text, folder.name
        for f in folder.rglob("*"):
            if f.is_file() and f.name != "PROVENANCE.md" and folder.name in {"k8s-wire", "hosts"}:
                assert f.stem.split(".")[0] in text, (folder.name, f.name)


def test_a_file_that_may_not_be_copied_skips_naming_it_and_its_source(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(reference, "SHARED", tmp_path / "absent")
    for path, source in NOT_COPIED.items():
        assert not (reference.FIXTURES / "fabric" / path).exists(), path  # not carried here
        with pytest.raises(pytest.skip.Exception) as skipped:
            ref_path(path)
        assert f"../shared/reference/fabric/{path}" in str(skipped.value)
        assert source in str(skipped.value)
        assert re.match(r"(GPL-[23]\.0|no licence)", source), source


def test_the_wire_copies_are_the_captured_bytes() -> None:
    copies = [p for p in reference.WIRE.rglob("*") if p.is_file() and p.suffix != ".md"]
    assert copies
    source = reference.SHARED / "k8s-wire"
    if not source.is_dir():
        pytest.skip("needs ../shared/reference/k8s-wire to compare the copies with")
    for copy in copies:
        assert copy.read_bytes() == (source / copy.relative_to(reference.WIRE)).read_bytes(), copy


def test_every_third_party_copy_has_its_notice_and_every_notice_a_copy() -> None:
    fixtures = TESTS / "fixtures"
    named = re.findall(
        r"`((?:nccl-topo|hosts|fabric|schedulers)/[^`\s]+)`", (fixtures / "NOTICES.md").read_text()
    )
    covered = {p for pattern in named for p in fixtures.glob(pattern)}
    assert [n for n in named if not any(fixtures.glob(n))] == []  # no notice for a file gone
    # Every file of these folders is a copy of a third party's published file.
    copies = [
        p
        for folder in ("nccl-topo", "fabric", "schedulers")
        for p in (fixtures / folder).rglob("*")
        if p.is_file() and p.name != "PROVENANCE.md"
    ]
    assert [str(p.relative_to(fixtures)) for p in copies if p not in covered] == []
