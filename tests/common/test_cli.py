"""`--kubeconfig` is one argument in every program (common.cli.add_kubeconfig): $KUBECONFIG as
its default, read when the parser is built, and the flag over it."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from agent.cli import build_parser as agent_parser
from certs.__main__ import build_parser as certs_parser
from webhook.__main__ import build_parser as webhook_parser

PROGRAMS: dict[str, tuple[Callable[[], argparse.ArgumentParser], list[str]]] = {
    "agent": (agent_parser, ["run", "--node-name", "n"]),
    "webhook": (webhook_parser, ["serve", "--tls-cert", "c", "--tls-key", "k"]),
    "certs": (certs_parser, ["bootstrap"]),
}


@pytest.mark.parametrize("program", list(PROGRAMS))
def test_kubeconfig_defaults_to_the_environment_and_the_flag_wins(
    program: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    build, argv = PROGRAMS[program]
    monkeypatch.setenv("KUBECONFIG", "/from/env")
    parser = build()
    assert parser.parse_args(argv).kubeconfig == "/from/env"
    assert parser.parse_args([*argv, "--kubeconfig", "/flag"]).kubeconfig == "/flag"
    monkeypatch.delenv("KUBECONFIG")
    assert build().parse_args(argv).kubeconfig is None
