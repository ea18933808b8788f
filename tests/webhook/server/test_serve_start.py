"""serve's start (issue 17 items 9, 11, 13, 15): it waits for certificate files that do not exist
yet (healthy, not ready) instead of crash-looping; a wrong file or port is one line and exit 2;
--metrics-port 0 opens no metrics endpoint."""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from common.cli import UsageError
from tests.webhook.cli.test_cli import _pair, _serve, one_line
from tests.webhook.helpers import ROOT
from webhook.__main__ import build_parser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_serve_waits_for_the_certificate_files_healthy_but_not_ready(tmp_path: Path) -> None:
    metrics = _free_port()
    certs = tmp_path / "tls"
    certs.mkdir()
    cmd = [sys.executable, "-m", "webhook", "serve", "--port", "0", "--metrics-port", str(metrics)]
    cmd += ["--tls-cert", str(certs / "tls.crt"), "--tls-key", str(certs / "tls.key")]
    cmd += ["--kubeconfig", str(tmp_path / "missing")]
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = _get(metrics, "/healthz")
                break
            except OSError:
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert health == (200, "ok\n")
        status, text = _get(metrics, "/readyz")
        assert status == 503 and f"--tls-cert {certs / 'tls.crt'}" in text, text
        time.sleep(1.5)
        assert proc.poll() is None  # still waiting, not crashed
        _pair(certs)  # the Secret arrives: it goes on (and stops at the missing kubeconfig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert "waiting for the certificate secret" in lines[0]
    assert "Traceback" not in err and "no usable cluster configuration" in lines[-1]


@pytest.mark.parametrize(
    ("what", "expect"),
    [
        ("directory", "a directory, not a PEM file"),
        ("garbage", "not a PEM certificate and its key"),
        ("fifo", "not a regular file"),
    ],
)
def test_a_certificate_path_that_can_never_work_is_one_line(
    tmp_path: Path, what: str, expect: str
) -> None:
    _, key = _pair(tmp_path)
    bad = tmp_path / "bad"
    if what == "directory":
        bad.mkdir()
    elif what == "garbage":
        bad.write_bytes(b"\x00garbage\xff" * 10)
    else:
        import os

        os.mkfifo(bad)
    proc = _serve(str(bad), key, 0)
    assert proc.returncode == 2, proc.stderr
    line = one_line(proc.stderr)
    assert f"--tls-cert {bad}" in line and expect in line, line
    assert "no such file" not in line


@pytest.mark.parametrize(
    ("flag", "value"), [("--port", "70000"), ("--metrics-port", "-1"), ("--port", "99999999")]
)
def test_a_port_out_of_range_is_one_line(tmp_path: Path, flag: str, value: str) -> None:
    cert, key = _pair(tmp_path)
    proc = _serve(cert, key, 0, flag, value)
    assert proc.returncode == 2, proc.stderr
    assert one_line(proc.stderr) == f"gpufabric-webhook: {flag} {value}: not a TCP port (0-65535)"


def _run_serve(tmp_path: Path, metrics_port: int, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """serve in this process until it reaches the (missing) cluster; the metrics sites it
    opened, by port."""
    from webhook.serve import serve

    opened: list[int] = []

    class Site:
        def __init__(self, runner: Any, host: str, port: int) -> None:
            opened.append(port)

        async def start(self) -> None:
            pass

    monkeypatch.setattr(web, "TCPSite", Site)
    cert, key = _pair(tmp_path)
    argv = ["serve", "--port", "0", "--tls-cert", cert, "--tls-key", key]
    argv += ["--metrics-port", str(metrics_port), "--kubeconfig", str(tmp_path / "missing")]
    args: argparse.Namespace = build_parser().parse_args(argv)
    with pytest.raises(UsageError, match="no usable cluster configuration"):
        asyncio.run(serve(args))
    return opened


def test_metrics_port_0_opens_no_metrics_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _run_serve(tmp_path, 0, monkeypatch) == []
    assert _run_serve(tmp_path, 9401, monkeypatch) == [9401]
