"""Input files the offline commands refuse with one line and exit 2 instead of a traceback, a
read that never ends, or one that blocks (issue 17 item 13): devices, FIFOs, directories where a
file is meant, binary text; and python -m certs' out-of-range numbers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from certs.__main__ import main as certs_main
from tests.webhook.cli.test_cli import TP8, one_line, run
from tests.webhook.helpers import GOLDEN

FABRIC = "tests/fixtures/fabric/ibnetdiscover/psmn-x5.topofile"


def _fifo(tmp_path: Path) -> str:
    path = tmp_path / "fifo.yaml"
    os.mkfifo(path)  # nobody writes: a read would wait forever
    return str(path)


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
@pytest.mark.parametrize(
    "argv",
    [
        ["mutate", "--pod", "{}", "--status", str(GOLDEN)],
        ["explain", "--pod", "{}", "--status", str(GOLDEN)],
        ["mutate", "--pod", TP8, "--status", "{}"],
        ["explain", "--pod", TP8, "--status", "{}"],
        ["mutate", "--pod", TP8, "--status", str(GOLDEN), "--claim", "{}"],
        ["mutate", "--pod", TP8, "--status", str(GOLDEN), "--cufile-policy", "{}"],
        ["topology", "--source", "{}"],
        ["topology", "--source", FABRIC, "--status", "{}"],
    ],
)
def test_devices_and_fifos_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], special: str, argv: list[str]
) -> None:
    path = _fifo(tmp_path) if special == "fifo" else special
    code, _, err = run(capsys, *(a.replace("{}", path) for a in argv))
    assert code == 2
    assert one_line(err) == f"gpufabric-webhook: {path}: not a regular file"


def test_a_binary_cufile_policy_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "policy.json"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe")
    code, _, err = run(
        capsys, "mutate", "--pod", TP8, "--status", str(GOLDEN), "--cufile-policy", str(binary)
    )
    assert code == 2
    assert one_line(err) == f"gpufabric-webhook: {binary}: not UTF-8 text (byte 0xff at offset 8)"


def test_a_directory_as_the_pod_or_source_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["mutate", "--pod", str(tmp_path), "--status", str(GOLDEN)],
                 ["topology", "--source", str(tmp_path)]):  # fmt: skip
        code, _, err = run(capsys, *argv)
        assert code == 2
        assert one_line(err) == f"gpufabric-webhook: {tmp_path}: a directory, not a file"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--renew-before-days", "-1"], "--renew-before-days -1: accepted values: 0 to 364"),
        (["--renew-before-days", "100000000"], "--renew-before-days 100000000: accepted values"),
        (["--loop", "-5"], "--loop -5: accepted values: 0 (once) or 1 to 86400 seconds"),
        (["--loop", "1e300"], "--loop 1e+300: accepted values"),
        (["--loop", "nan"], "--loop nan: accepted values"),
    ],
)
def test_certs_numbers_out_of_range_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    code = certs_main(["bootstrap", *argv, "--kubeconfig", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert code == 2 and said in one_line(err)
