"""What a person reads from gpufabric-webhook and python -m certs (issue 7): one line and exit
code 2 for bad input, never a traceback; help with defaults; --version; machine-readable mutate;
explain that says why not a node."""

from __future__ import annotations

import argparse
import io
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from certs.__main__ import build_parser as certs_parser
from certs.__main__ import main as certs_main
from tests.webhook.helpers import GOLDEN, ROOT, SAMPLES
from webhook.__main__ import build_parser, main

TP8 = str(SAMPLES / "pods" / "tp8-ib.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"\xff\xfe not utf-8", "not UTF-8 text (byte 0xff at offset 0)"),
        (b"kind: Pod\n  bad: [indent\n", "not YAML or JSON"),
        (b"- just\n- a list\n", "not one Pod or object with a pod template"),
    ],
    ids=["binary", "not-yaml", "not-a-pod"],
)
def test_bad_pod_file_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, needle: str
) -> None:
    bad = tmp_path / "pod.yaml"
    bad.write_bytes(content)
    code, _, err = run(capsys, "mutate", "--pod", str(bad), "--status", str(GOLDEN))
    assert code == 2
    line = one_line(err)
    assert str(bad) in line and needle in line


def test_bad_status_files_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = tmp_path / "s.yaml"
    status.write_bytes(b"\x80\x81")
    code, _, err = run(capsys, "explain", "--pod", TP8, "--status", str(status))
    assert code == 2 and str(status) in one_line(err)
    status.write_text("apiVersion: gpufabric.io/v1alpha1\nkind: GpuNodeStatus\nstatus: {}\n")
    code, _, err = run(capsys, "explain", "--pod", TP8, "--status", str(status))
    assert code == 2 and "without metadata.name" in one_line(err) and str(status) in err
    code, _, err = run(capsys, "explain", "--pod", TP8, "--status", str(tmp_path / "missing"))
    assert code == 2 and "missing" in one_line(err)


def test_log_level_after_the_subcommand_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(
        ["explain", "--pod", "p", "--status", "s", "--log-level", "debug"]
    )
    assert args.log_level == "debug"
    args = build_parser().parse_args(
        ["--log-level", "error", "explain", "--pod", "p", "--status", "s"]
    )
    assert args.log_level == "error"
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("gpufabric-webhook ")


def _actions(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.Action]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += [(f"{name} {a}", b) for a, b in _actions(sub)]
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            out.append(
                (parser.prog + " " + "/".join(action.option_strings or [action.dest]), action)
            )
    return out


@pytest.mark.parametrize("parser", [build_parser(), certs_parser()], ids=["webhook", "certs"])
def test_every_option_has_help_with_its_default(parser: argparse.ArgumentParser) -> None:
    for name, action in _actions(parser):
        assert action.help, name
        has_default = action.default not in (None, False, argparse.SUPPRESS, [])
        if has_default or isinstance(action, argparse._StoreTrueAction):
            assert "default" in action.help, name


def _serve(cert: str, key: str, metrics_port: int, *more: str) -> subprocess.CompletedProcess[str]:
    """`gpufabric-webhook serve` as a real process (a bad start must neither print a traceback
    nor abort with SIGABRT), on any free port."""
    serve = ["serve", "--tls-cert", cert, "--tls-key", key, "--port", "0"]
    return subprocess.run(
        [sys.executable, "-m", "webhook", *serve, "--metrics-port", str(metrics_port), *more],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def _pair(tmp_path: Path) -> tuple[str, str]:
    import datetime as dt

    from certs.pki import make_ca, make_serving

    now = dt.datetime.now(dt.UTC)
    serving = make_serving(make_ca("t", now), ["localhost"], now)
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    return str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")


def test_serve_on_a_taken_metrics_port_says_so(tmp_path: Path) -> None:
    cert, key = _pair(tmp_path)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))  # noqa: S104 - the server binds all addresses too
        taken.listen()
        port = taken.getsockname()[1]
        proc = _serve(cert, key, port, "--kubeconfig", str(tmp_path / "none"))
    assert proc.returncode == 2, proc.stderr
    assert f"cannot listen on --metrics-port {port}" in one_line(proc.stderr)


def test_serve_without_cluster_configuration_says_so(tmp_path: Path) -> None:
    cert, key = _pair(tmp_path)
    (tmp_path / "kubeconfig").write_text("not: a kubeconfig\n")
    proc = _serve(cert, key, 0, "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert proc.returncode == 2, proc.stderr
    assert "no usable cluster configuration" in one_line(proc.stderr)


def test_certs_without_cluster_configuration_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = certs_main(["bootstrap", "--kubeconfig", str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert code == 2 and "no usable cluster configuration" in one_line(err)


def test_missing_optional_dependency_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "jsonpatch", None)  # import jsonpatch -> ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "webhook.cli.offline", raising=False)
    code, _, err = run(capsys, "mutate", "--pod", TP8, "--status", str(GOLDEN))
    assert code == 2
    assert "jsonpatch is not installed: pip install 'gpufabric[webhook]'" in one_line(err)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_mutate_prints_one_machine_readable_document(
    capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    code, out, _ = run(capsys, "mutate", "--pod", TP8, "--status", str(GOLDEN), "-o", fmt)
    assert code == 0
    doc: dict[str, Any] = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert set(doc) == {"allowed", "warnings", "patch", "pod"} and doc["allowed"] is True
    import jsonpatch

    original = yaml.safe_load(Path(TP8).read_text())
    assert jsonpatch.apply_patch(original, doc["patch"]) == doc["pod"]
    terms = doc["pod"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]} in terms[
        0
    ]["matchExpressions"]
    denied = str(SAMPLES / "pods" / "bad-value.yaml")
    code, out, _ = run(capsys, "mutate", "--pod", denied, "--status", str(GOLDEN), "-o", fmt)
    doc = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert code == 1 and doc["allowed"] is False and "gpufabric.io/rdma" in doc["message"]


def _explain(capsys: pytest.CaptureFixture[str], pod: str, *extra: str) -> str:
    code, out, err = run(capsys, "explain", "--pod", pod, "--status", *extra)
    assert code == 0, err
    return out


def test_explain_names_the_hca_pin_gpus_and_the_condition_behind_a_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = _explain(capsys, TP8, str(GOLDEN), "--node", "hgx-h100-nodriver")
    assert out.splitlines()[3] == "hgx-h100-nodriver: REJECTS"
    # Island size 0 because NVML could not load: the condition as the golden status has it.
    conds = yaml.safe_load((GOLDEN / "hgx-h100-nodriver.yaml").read_text())["status"]["conditions"]
    nvml = next(c for c in conds if c["type"] == "NvmlAvailable")
    assert (nvml["status"], nvml["reason"]) == ("False", "LibraryNotFound")
    assert (
        "node has gpufabric.io/nvlink-island-size=0 (because NvmlAvailable=False LibraryNotFound: "
        f"{nvml['message']})" in out
    )
    out = _explain(capsys, TP8, str(GOLDEN), "--node", "azure-ndv5")

    # azure-ndv5 meets every requirement but has another HCA layout than the pin, which is the
    # layout of hgx-h100 (the only node that meets all the rest); values from the golden statuses.
    def profile(node: str) -> str:
        return str(
            yaml.safe_load((GOLDEN / f"{node}.yaml").read_text())["status"]["summary"]["hcaProfile"]
        )

    pinned, azure = profile("hgx-h100"), profile("azure-ndv5")
    assert pinned != azure
    assert (
        "[FAIL] hca-profile pin (nodes differ in usable HCAs; only layouts holding NCCL_IB_HCA): "
        "gpufabric.io/hca-profile "
        f"In [{pinned}]: node has gpufabric.io/hca-profile={azure}" in out
    )
    out = _explain(capsys, TP8, str(GOLDEN), "--node", "esc8000a-pcie")
    assert "[FAIL] the pod asks for 8 GPUs: node has gpufabric.io/gpu-count=4" in out


def test_explain_evaluates_the_pods_own_affinity_against_node_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "hgx-h100", "labels": {"topology.kubernetes.io/zone": "zone-b"}},
    }
    (tmp_path / "node.yaml").write_text(yaml.safe_dump(node))
    out = _explain(capsys, TP8, str(GOLDEN), str(tmp_path / "node.yaml"), "--node", "hgx-h100")
    assert "hgx-h100: REJECTS" in out
    assert (
        "[FAIL] the pod's own node affinity: no term holds: term 1: topology.kubernetes.io/zone "
        "In [zone-a]: node has topology.kubernetes.io/zone=zone-b" in out
    )
    node["metadata"]["labels"] = {"topology.kubernetes.io/zone": "zone-a"}
    (tmp_path / "node.yaml").write_text(yaml.safe_dump(node))
    out = _explain(capsys, TP8, str(GOLDEN), str(tmp_path / "node.yaml"), "--node", "hgx-h100")
    assert "hgx-h100: ADMITS" in out and "[FAIL]" not in out


def test_explain_node_without_status_and_pod_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.yaml").write_text(
        "apiVersion: gpufabric.io/v1alpha1\nkind: GpuNodeStatus\nmetadata: {name: fresh}\n"
    )
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(Path(TP8).read_bytes())))
    out = _explain(capsys, "-", str(GOLDEN), str(tmp_path / "s.yaml"), "--node", "fresh")
    assert "fresh: REJECTS" in out
    assert "no status yet (its GpuNodeStatus has no status)" in out
    code, _, err = run(capsys, "explain", "--pod", TP8, "--status", str(GOLDEN), "--node", "nope")
    assert code == 2 and "--node nope: no GpuNodeStatus or Node of that name" in one_line(err)


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        ("jsonpatch", ["mutate", "--pod", TP8, "--status", str(GOLDEN)]),
        ("aiohttp", ["serve", "--tls-cert", "c", "--tls-key", "k"]),
        ("cryptography", ["serve", "--tls-cert", "c", "--tls-key", "k"]),
    ],
)
def test_a_missing_extra_is_named_even_at_import_time(module: str, argv: list[str]) -> None:
    blocked = "jsonpatch aiohttp cryptography" if module == "cryptography" else module
    code = (
        "import sys\n"
        f"for m in {blocked.split()!r}: sys.modules[m] = None\n"
        "from webhook.__main__ import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'gpufabric[webhook]'" in one_line(proc.stderr)


def test_a_reader_that_leaves_early_is_not_an_error() -> None:
    # `gpufabric-webhook mutate ... | head -c 10`: stdout closes before the document is written.
    argv = ["mutate", "--pod", TP8, "--status", str(GOLDEN), "-o", "json"]
    with subprocess.Popen(
        [sys.executable, "-m", "webhook", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0
    assert "Broken pipe" not in err and "Traceback" not in err
