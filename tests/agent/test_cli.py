"""What a person reads from gpufabric-agent: one line and exit 2 for bad input, never a traceback;
help text with defaults everywhere; --version; --log-level after the subcommand."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import logging
import os
import resource
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from agent.__main__ import main
from agent.cli import build_parser
from tests.agent.test_host_reader import build_host
from tests.conftest import FIXTURES

HGX = FIXTURES / "hgx-h100.tar.gz"


def one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("gpufabric-agent: ")
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


def _archive(tmp_path: Path, members: dict[str, bytes]) -> Path:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "a.tar.gz"
    path.write_bytes(gzip.compress(raw.getvalue()))
    return path


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (lambda b: b[: len(b) // 2], "truncated"),
        (lambda b: b[:200] + bytes(x ^ 0x5A for x in b[200:400]) + b[400:], "corrupt"),
        (lambda b: b"", "cannot read gather archive"),
        (lambda b: gzip.decompress(b)[:1000], "truncated tar"),
    ],
    ids=["truncated", "corrupt", "empty", "truncated-tar"],
)
def test_broken_archive_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: object, needle: str
) -> None:
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(damage(HGX.read_bytes()))  # type: ignore[operator]
    assert main(["probe", "--from", str(bad)]) == 2
    one_line_error(capsys, str(bad), needle)


def test_non_utf8_archive_contents_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _archive(tmp_path, {"gather.json": b'{"format": 1, "node": "\xff\xfe"}'})
    assert main(["probe", "--from", str(bad)]) == 2
    one_line_error(capsys, "gather.json is not valid JSON")
    raw = bytearray(gzip.decompress(HGX.read_bytes()))
    raw[0:4] = b"\xff\xfe\xfd\xfc"  # first member's name, checksum fixed below
    raw[148:156] = b" " * 8
    raw[148:155] = f"{sum(raw[:512]):06o}\0".encode()
    (tmp_path / "names.tar").write_bytes(bytes(raw))
    assert main(["probe", "--from", str(tmp_path / "names.tar")]) == 2
    one_line_error(capsys, "not UTF-8")


def test_archive_without_gather_json_or_wrong_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["probe", "--from", str(_archive(tmp_path, {"host/x": b"1"}))]) == 2
    one_line_error(capsys, "not a gpufabric gather archive")
    assert main(["probe", "--from", str(_archive(tmp_path, {"gather.json": b"[1]"}))]) == 2
    one_line_error(capsys, "not a JSON object")
    meta = json.dumps({"format": 99}).encode()
    assert main(["probe", "--from", str(_archive(tmp_path, {"gather.json": meta}))]) == 2
    one_line_error(capsys, "unsupported gather format 99")
    assert main(["probe", "--from", str(tmp_path / "nope.tar.gz")]) == 2
    one_line_error(capsys, "nope.tar.gz", "No such file")


def test_unwritable_output_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_host(tmp_path / "host")
    target = tmp_path / "no-such-dir" / "g.tar.gz"
    args = ["gather", "--host-root", str(tmp_path / "host"), "--nvml", "none", "-o", str(target)]
    assert main(args) == 2
    one_line_error(capsys, str(target), "cannot write")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_without_cluster_configuration_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    build_host(tmp_path / "host")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path))
    args = ["run", "--node-name", "n", "--host-root", str(tmp_path / "host"), "--nvml", "none"]
    assert main([*args, "--metrics-port", str(_free_port())]) == 2
    one_line_error(capsys, "cluster configuration", "--kubeconfig")


KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_metrics_port_in_use_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_host(tmp_path / "host")
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))  # noqa: S104 - the agent binds all interfaces too
        busy.listen()
        port = busy.getsockname()[1]
        args = [
            "run",
            "--node-name",
            "n",
            "--host-root",
            str(tmp_path / "host"),
            "--nvml",
            "none",
            "--no-udev",
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
            "--metrics-port",
            str(port),
        ]
        assert main(args) == 2
    one_line_error(capsys, f"--metrics-port {port}")


def test_missing_nvml_library_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    build_host(tmp_path / "host")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.delitem(sys.modules, "agent.nvml.pynvml_backend", raising=False)
    assert main(["probe", "--host-root", str(tmp_path / "host"), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    nvml = next(c for c in doc["status"]["conditions"] if c["type"] == "NvmlAvailable")
    assert nvml["reason"] == "LibraryNotFound"
    assert "pip install 'gpufabric[agent]'" in nvml["message"]


def test_missing_dependency_of_a_command_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    build_host(tmp_path / "host")
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    for name in ("agent.runner", "agent.metrics"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    args = ["run", "--node-name", "n", "--host-root", str(tmp_path / "host"), "--nvml", "none"]
    assert main(args) == 2
    one_line_error(capsys, "prometheus_client is not installed")


def test_a_bug_is_one_line_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent.probe

    def boom(*args: object, **kwargs: object) -> object:
        raise RuntimeError("assembler bug")

    monkeypatch.setattr(agent.probe, "probe_node", boom)
    assert main(["probe", "--from", str(HGX)]) == 1
    one_line_error(capsys, "internal error: RuntimeError: assembler bug")


def _actions(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.Action]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += [(f"{name} {a.dest}", a) for a in sub._actions]
        else:
            out.append((action.dest, action))
    return out


def test_every_flag_has_help_with_its_default() -> None:
    for name, action in _actions(build_parser()):
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        assert action.help, name
        if name == "version" or action.required:
            continue
        assert "default" in action.help, f"{name}: {action.help}"
    for name, sub in build_parser()._subparsers._group_actions[0].choices.items():  # type: ignore[union-attr]
        assert sub.description, name


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("gpufabric-agent ")


def test_log_level_is_accepted_after_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--from", str(HGX), "-o", "labels", "--log-level", "debug"]) == 0
    assert logging.getLogger().level == logging.DEBUG
    assert main(["--log-level", "error", "probe", "--from", str(HGX), "-o", "labels"]) == 0
    assert logging.getLogger().level == logging.ERROR
    assert (
        main(["--log-level", "error", "probe", "--log-level", "warning", "--from", str(HGX)]) == 0
    )
    assert logging.getLogger().level == logging.WARNING
    capsys.readouterr()
    logging.getLogger().setLevel(logging.WARNING)


def test_metrics_port_is_not_dcgm_exporters_and_0_means_no_endpoint() -> None:
    # Issue 17 item 9: 9400 is dcgm-exporter's port on the same host network.
    from agent.metrics import AgentMetrics, Health, serve

    parser = build_parser()
    assert parser.parse_args(["run"]).metrics_port == 9410
    assert parser.parse_args(["run", "--metrics-port", "0"]).metrics_port == 0
    assert serve(0, AgentMetrics(), Health(60.0)) is None  # not a random port


def test_agent_manifest_uses_the_agents_metrics_port() -> None:
    import yaml

    path = Path(__file__).resolve().parents[2] / "daemonset" / "base" / "agent" / "daemonset.yaml"
    pod = yaml.safe_load(path.read_text())["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert "--metrics-port=9410" in container["args"]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9410}]
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "9410"


def _bounded_main(*args: str) -> subprocess.CompletedProcess[str]:
    """The agent in a child that cannot block this run or eat its memory (what the old code did
    with a FIFO and /dev/zero as --from)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
        check=False,
    )


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory"])
def test_from_something_not_a_file_is_one_line(tmp_path: Path, kind: str) -> None:
    # Issue 17 item 13: /dev/zero read until MemoryError, a FIFO blocked forever.
    path = {"dev-zero": Path("/dev/zero"), "fifo": tmp_path / "fifo", "directory": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    proc = _bounded_main("probe", "--from", str(path))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    why = "is a directory" if kind == "directory" else "not a regular file"
    assert proc.stderr == f"gpufabric-agent: {path}: cannot read ({why})\n"


def test_from_an_archive_over_the_size_bound_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent import tarball

    monkeypatch.setattr(tarball, "MAX_ARCHIVE", 1 << 20)
    big = tmp_path / "big.tar.gz"
    big.write_bytes(HGX.read_bytes() + bytes(2 << 20))
    assert main(["probe", "--from", str(big)]) == 2
    one_line_error(capsys, str(big), "larger than 1 MiB")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "Is a directory;"),
        (
            "clusters: [\n",
            "not valid YAML: expected the node content, but found '<stream end>' at ",
        ),
        ("just a string\n", "not a kubeconfig (TypeError: "),
    ],
    ids=["directory", "bad-yaml", "not-a-mapping"],
)
def test_a_bad_kubeconfig_is_one_line_naming_it_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, why: str
) -> None:
    # Issue 17 item 15: "(kubeconfig D): [Errno 21] Is a directory: 'D'"; bad YAML was an
    # "internal error" over three lines.
    build_host(tmp_path / "host")
    kubeconfig = tmp_path / "kc"
    if content is None:
        kubeconfig.mkdir()
    else:
        kubeconfig.write_text(content)
    args = ["run", "--node-name", "n", "--host-root", str(tmp_path / "host"), "--nvml", "none"]
    assert main([*args, "--kubeconfig", str(kubeconfig)]) == 2
    err = one_line_error(capsys, f"(kubeconfig {kubeconfig}): {why}")
    assert err.count(str(kubeconfig)) == 1
