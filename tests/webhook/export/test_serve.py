"""serve --export: refused without --labeler or with an unknown target (one line, exit 2); the
exporter rides on the labeler's Lease and the shared feeds, and waits for their first lists."""

from __future__ import annotations

import argparse

import pytest

from tests.webhook.export.fabrics import UUID
from webhook.__main__ import main
from webhook.fleet.cache import FabricCache
from webhook.kube.watch import one_page
from webhook.server.metrics import WebhookMetrics
from webhook.wiring import Serving, add_cache_watches, add_export, add_labeler, add_network

SERVE = ["serve", "--tls-cert", "/nonexistent.crt", "--tls-key", "/nonexistent.key"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--export", "kueue"], "--export needs --labeler"),
        (["--labeler", "--export", "kueue,slurm"], "unknown target 'slurm'"),
        # Slurm reads a file, not an API object: offline only (`topology -o slurm-*`).
        (["--labeler", "--export", "slurm-block"], "unknown target 'slurm-block'"),
        (["--labeler", "--export", "slurm-tree"], "unknown target 'slurm-tree'"),
        (["--labeler", "--export", " , "], "--export: no target given"),
    ],
)
def test_bad_export_flags_are_one_line_and_exit_2(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*SERVE, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_exporter_rides_on_the_labeler_lease_and_feeds() -> None:
    s = Serving(argparse.Namespace(topology_labels=None), None, FabricCache(), WebhookMetrics())
    add_cache_watches(s)
    add_labeler(s)
    add_network(s)
    work = s.elected["gpufabric-labeler"]
    exporter = add_export(s, ("kueue", "volcano"))  # no API call: serve starts while it is down
    assert s.elected["gpufabric-labeler"] is not work
    assert sorted(s.elected) == ["gpufabric-labeler"]
    assert exporter.sync() == 0  # not listed yet: nothing decided
    fab = {"clusterUuid": UUID, "cliqueId": 4}
    one_page(
        s.statuses,
        [{"metadata": {"name": "gpu-1"}, "status": {"gpus": [{"index": 0, "fabric": fab}]}}],
    )
    one_page(
        s.nodes,
        [{"metadata": {"name": "gpu-2", "labels": {"nvidia.com/gpu.clique": f"{UUID}.5"}}}],
    )
    assert exporter.domains() == {"gpu-1": f"{UUID}.4", "gpu-2": f"{UUID}.5"}
