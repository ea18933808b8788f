"""Refused writes are never silent (issue 36): the API server's answers to the placer's patch as
captured from a real kube-apiserver 1.36.2 (tests/fixtures/placer-wire), read over the wire by
KubePlacerApi; then the placer on the fake API server answering the same way: one log line and
one Event with the API's message, the waiting message, a counter, retries that back off; and a
preemption whose placement admission refuses evicts nothing."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, generate_latest

from tests.fakes.http import api_client, reply
from tests.reference import FIXTURES
from tests.webhook.groups.fabric import fabric, gpu_pod
from tests.webhook.groups.fake_api import FakeApi
from tests.webhook.groups.preempt_world import HIGH, evicted, full, group, leave
from webhook.groups.framework.refusals import FIRST, LONGEST, Rejected, wait_after
from webhook.groups.model.names import ANN_RANK
from webhook.groups.placer.kube import KubePlacerApi
from webhook.groups.placer.placer import Placer
from webhook.kube.status import status_words
from webhook.server.metrics import WebhookMetrics

WIRE = FIXTURES / "placer-wire"
OPS = [{"op": "add", "path": "/metadata/annotations/gpufabric.io~1rank", "value": "0"}]


def capture(name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((WIRE / f"{name}.json").read_text())
    return out


def denied_words() -> str:
    """What the placer policy as shipped before issue 36 said of the placer's real patch."""
    message = str(capture("placer-patch-vap-denied-422")["response"]["body"]["message"])
    return message.split("denied request: ", 1)[1]


# -- the wire --------------------------------------------------------------------------------
@pytest.fixture
def replay() -> Iterator[tuple[KubePlacerApi, list[dict[str, Any]], dict[str, Any]]]:
    """KubePlacerApi against a loopback server answering each PATCH with `answer` (a capture's
    status and body, or a 500); `seen` the requests."""
    seen: list[dict[str, Any]] = []
    answer: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_PATCH(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            url = urlsplit(self.path)
            seen.append(
                {
                    "path": url.path,
                    "query": {k: v[0] for k, v in parse_qs(url.query).items()},
                    "type": self.headers.get("Content-Type"),
                    "body": json.loads(self.rfile.read(length)),
                }
            )
            body = answer["body"]
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            reply(self, answer["status"], data)

        def log_message(self, *args: Any) -> None:
            pass

    with api_client(Handler) as api:
        yield KubePlacerApi(api), seen, answer


def test_a_policy_refusal_comes_back_with_the_api_servers_words(
    replay: tuple[KubePlacerApi, list[dict[str, Any]], dict[str, Any]],
) -> None:
    api, seen, answer = replay
    captured = capture("placer-patch-vap-denied-422")
    answer.update(captured["response"])
    with pytest.raises(Rejected) as refused:
        api.patch_pod("team-a", "w-0", OPS)
    err = refused.value
    assert (err.write, err.code, err.pod) == ("pods/patch", 422, "w-0")
    assert err.what == "placement patch of pod team-a/w-0"
    assert err.message == captured["response"]["body"]["message"]  # the cause repeats it
    assert "ValidatingAdmissionPolicy 'gpufabric-placer-pods'" in err.message
    assert seen[0]["type"] == "application/json-patch+json"
    assert seen[0]["query"] == {"fieldManager": "gpufabric-placer"}  # no dryRun: a real write


def test_a_dry_run_asks_dry_run_all_and_is_refused_by_the_same_policy(
    replay: tuple[KubePlacerApi, list[dict[str, Any]], dict[str, Any]],
) -> None:
    api, seen, answer = replay
    captured = capture("placer-patch-dry-run-vap-denied-422")
    assert captured["request"]["query"]["dryRun"] == "All"
    answer.update(captured["response"])
    with pytest.raises(Rejected) as refused:
        api.patch_pod("team-a", "w-0", OPS, dry_run=True)
    assert seen[0]["query"] == {"dryRun": "All", "fieldManager": "gpufabric-placer"}
    assert refused.value.write == "pods/patch-dry-run"
    assert refused.value.what == "placement patch of pod team-a/w-0 (dry run)"
    answer.update(status=200, body=json.dumps(gpu_pod("w-0", gated=True)))  # admitted
    api.patch_pod("team-a", "w-0", OPS, dry_run=True)


@pytest.mark.parametrize(
    ("name", "code", "words"),
    [
        ("placer-patch-missing-404", 404, 'pods "gone-0" not found'),
        (
            "placer-patch-test-failed-422",
            422,
            "the server rejected our request due to an error in our request",
        ),
    ],
)
def test_every_4xx_is_a_refusal_with_its_message(
    replay: tuple[KubePlacerApi, list[dict[str, Any]], dict[str, Any]],
    name: str,
    code: int,
    words: str,
) -> None:
    api, _, answer = replay
    answer.update(capture(name)["response"])
    with pytest.raises(Rejected) as refused:
        api.patch_pod("team-a", "w-0", OPS)
    assert (refused.value.code, refused.value.message) == (code, words)


def test_a_server_error_is_not_a_refusal(
    replay: tuple[KubePlacerApi, list[dict[str, Any]], dict[str, Any]],
) -> None:
    api, _, answer = replay
    answer.update(status=500, body='{"kind":"Status","message":"etcdserver: timeout"}')
    with pytest.raises(ApiException):
        api.patch_pod("team-a", "w-0", OPS)


def test_status_words_add_only_the_causes_that_say_more() -> None:
    body = {"message": "Cannot evict", "details": {"causes": [{"message": "budget db"}]}}
    assert status_words(429, json.dumps(body)) == "Cannot evict; budget db"
    assert status_words(403, "not json") == "HTTP 403"
    assert status_words(429, b"{}") == "TooManyRequests"


# -- the placer ------------------------------------------------------------------------------
def refusing_api() -> FakeApi:
    """The fake API server with the placer policy as shipped before issue 36: no rank."""
    api = FakeApi()
    words = denied_words()

    def admission(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        before, after = old["metadata"]["annotations"], new["metadata"]["annotations"]
        return [words] if ANN_RANK in after and ANN_RANK not in before else []

    api.admission = admission
    return api


def members(api: FakeApi, placer: Placer, size: int = 4) -> None:
    for i in range(size):
        pod = gpu_pod(f"w-{i}", 8, group="llama", size=size, gated=True)
        placer.pod_event("ADDED", api.create(pod))
    placer.reconcile()


def refused_text(metrics: WebhookMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_the_fake_refuses_as_kube_apiserver_does() -> None:
    api = refusing_api()
    placer = Placer(api, clock=lambda: api.now)
    placer.nodes_listed(fabric(8))
    members(api, placer)
    (name, code, message, dry) = api.refusals[0]
    real = capture("placer-patch-vap-denied-422")["response"]["body"]["message"]
    assert (code, dry) == (422, False)
    assert message == real.replace('"w-0"', f'"{name}"')


def test_a_refused_patch_is_logged_told_counted_and_said_while_the_group_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = refusing_api()
    metrics = WebhookMetrics(CollectorRegistry())
    placer = Placer(api, clock=lambda: api.now, metrics=metrics)
    placer.nodes_listed(fabric(8))
    with caplog.at_level(logging.WARNING, logger="webhook.groups.framework.refusals"):
        members(api, placer)
    assert api.patches == []  # nothing placed, every member still gated
    words = denied_words()
    lines = [r for r in caplog.records if r.getMessage() == "write refused"]
    assert len(lines) == 1
    assert words in str(lines[0].__dict__["why"])
    told = [e for e in api.events if e[1] == "GroupWriteRefused"]
    assert len(told) == 1
    assert told[0][0] == "w-0"  # on the pod whose patch was refused
    assert "placement patch of pod team-a/w-0 (HTTP 422)" in told[0][2]
    assert words in told[0][2]
    waiting = placer.waiting[("team-a", "llama")]
    assert words in waiting
    assert f"tried again in {FIRST:.0f}s" in waiting
    assert 'gpufabric_placer_refused_writes_total{code="422",write="pods/patch"} 1.0' in (
        refused_text(metrics)
    )


def test_retries_back_off_and_a_fixed_policy_places_the_group() -> None:
    api = refusing_api()
    placer = Placer(api, clock=lambda: api.now)
    placer.nodes_listed(fabric(8))
    members(api, placer)
    tries, seen = [api.now], len(api.refusals)
    for step in range(40):  # 20 s of the loop's half-second turns, with the 5 s retry tick
        api.now += 0.5
        if step % 10 == 9:
            placer.retry_all()
        placer.reconcile()
        if len(api.refusals) > seen:
            tries.append(api.now)
            seen = len(api.refusals)
    # 0 s, 5 s, 15 s: not every half second; each try sends the group's 4 patches together
    assert len(tries) == 3 and len(api.refusals) == 3 * 4
    assert [b - a for a, b in itertools.pairwise(tries)] == [wait_after(1), wait_after(2)]
    assert len([e for e in api.events if e[1] == "GroupWriteRefused"]) == 1  # same words
    api.admission = None  # the policy is fixed
    api.now += LONGEST
    placer.reconcile()
    assert len(api.patches) == 4
    assert ("team-a", "llama") not in placer.refusals.backoff
    assert ("team-a", "llama") not in placer.waiting


def test_a_write_with_no_answer_waits_too(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    placer = Placer(api, clock=lambda: api.now)
    placer.nodes_listed(fabric(8))
    calls: list[str] = []

    def no_answer(ns: str, name: str, ops: list[dict[str, Any]], dry_run: bool = False) -> None:
        calls.append(name)
        raise TimeoutError("read timed out")

    api.patch_pod = no_answer  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="webhook.groups.placer.placer"):
        members(api, placer)
        for _ in range(8):  # 4 s of the loop's turns: not tried again yet
            api.now += 0.5
            placer.reconcile()
    group = [f"w-{i}" for i in range(4)]  # its patches go out together (groups/framework/writes.py)
    assert sorted(calls) == group
    assert [r.getMessage() for r in caplog.records] == ["group placement failed"]
    api.now += 1.0
    placer.reconcile()
    assert sorted(calls) == sorted(group * 2)


def test_the_wait_doubles_up_to_five_minutes() -> None:
    assert [wait_after(n) for n in (1, 2, 3, 4)] == [5.0, 10.0, 20.0, 40.0]
    assert wait_after(7) == wait_after(100) == LONGEST


# -- preemption ------------------------------------------------------------------------------
def test_a_preemption_whose_placement_admission_refuses_evicts_nothing() -> None:
    api, placer = full()
    api.admission = refusing_api().admission
    group(api, placer, "train", 4, HIGH)  # fits nowhere: it would free a leaf
    assert api.dry_runs  # the evictions' dry runs passed
    assert api.evictions == []  # ... and nothing was evicted
    refused = [r for r in api.refusals if r[3]]
    assert len(refused) == 1  # the first member's dry-run patch: the plan stops there
    assert api.patches == []
    told = [e for e in api.events if e[1] == "GroupWriteRefused"]
    assert len(told) == 1
    assert "(dry run) (HTTP 422)" in told[0][2]
    assert "no pod is evicted" in told[0][2]
    assert not [e for e in api.events if e[1] in ("GroupPreempting", "Preempted")]
    assert "no pod is evicted" in placer.waiting[("team-a", "train")]
    api.now += LONGEST  # tried again after its wait: refused again, still nothing evicted
    placer.retry_all()
    placer.reconcile()
    assert len([r for r in api.refusals if r[3]]) == 2
    assert api.evictions == []


def test_a_preemption_asks_its_placement_as_a_dry_run_before_the_first_eviction() -> None:
    api, placer = full()
    order: list[str] = []
    patch, evict = api.patch_pod, api.evict_pod

    def patch_pod(ns: str, name: str, ops: list[dict[str, Any]], dry_run: bool = False) -> None:
        order.append(f"patch{' dry' if dry_run else ''} {name}")
        patch(ns, name, ops, dry_run)

    def evict_pod(ns: str, name: str, dry_run: bool = False, uid: str = "") -> Any:
        order.append(f"evict{' dry' if dry_run else ''} {name}")
        return evict(ns, name, dry_run, uid)

    api.patch_pod = patch_pod  # type: ignore[method-assign]
    api.evict_pod = evict_pod  # type: ignore[method-assign]
    group(api, placer, "train", 4, HIGH)
    first_eviction = next(i for i, o in enumerate(order) if o.startswith("evict run"))
    dry_patches = [i for i, o in enumerate(order) if o.startswith("patch dry")]
    assert len(dry_patches) == 4
    assert max(dry_patches) < first_eviction
    assert len(evicted(api)) == 4
    # The dry-run patches are the placer's own: into the freed leaf, ranked, gate removed.
    leaf = {
        o["value"].get("nodeAffinity") is not None
        for _, ops in api.dry_patches
        for o in ops
        if o["path"] == "/spec/affinity"
    }
    assert leaf == {True}
    paths = {o["path"] for _, ops in api.dry_patches for o in ops}
    assert {"/metadata/annotations/gpufabric.io~1rank", "/spec/schedulingGates/0"} <= paths
    leave(api, placer, evicted(api))
    assert len(api.patches) == 4  # then placed for real


def test_the_wire_fixtures_are_where_their_provenance_says() -> None:
    text = (WIRE / "PROVENANCE.md").read_text()
    for f in sorted(Path(WIRE).glob("*.json")):
        assert f.name in text
