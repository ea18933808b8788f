"""The HTTP/TLS transport: real AdmissionReview v1 bodies, a real aiohttp client over TLS."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import random
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from certs.pki import make_ca, make_serving
from tests.webhook.helpers import GOLDEN, POLICY, golden_cache, pod, review
from webhook.admission.placement import Settings
from webhook.fleet.cache import FabricCache
from webhook.server.app import CertReloader, make_app, tls_context

NOW = dt.datetime.now(dt.UTC)


def decode(resp: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(base64.b64decode(resp["response"]["patch"]))


@pytest.fixture
async def client(aiohttp_client: Any) -> TestClient[Any, Any]:
    return await aiohttp_client(make_app(golden_cache(), Settings(cufile_policy=POLICY)))


async def test_mutate_answers_a_real_review_with_a_jsonpatch(client: TestClient[Any, Any]) -> None:
    body = review(pod({"gpufabric.io/topology": "nvlink", "gpufabric.io/rdma": "required"}))
    r = await client.post("/mutate", json=body)
    assert r.status == 200
    out = await r.json()
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == body["request"]["uid"]
    assert out["response"]["allowed"] is True and out["response"]["patchType"] == "JSONPatch"
    ops = decode(out)
    exprs = next(o for o in ops if o["path"] == "/spec/affinity")["value"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "gpufabric.io/nvlink-island-size", "operator": "Gt", "values": ["7"]} in exprs
    assert {"key": "gpufabric.io/rdma", "operator": "In", "values": ["true"]} in exprs


async def test_untouched_pod_gets_no_patch(client: TestClient[Any, Any]) -> None:
    r = await client.post("/mutate", json=review(pod({"example.com/x": "1"})))
    out = await r.json()
    assert out["response"] == {"uid": review(pod())["request"]["uid"], "allowed": True}


async def test_bad_value_is_denied_with_the_annotation_named(client: TestClient[Any, Any]) -> None:
    r = await client.post("/mutate", json=review(pod({"gpufabric.io/cufile": "yes"})))
    out = (await r.json())["response"]
    assert out["allowed"] is False and out["status"]["code"] == 400
    assert "gpufabric.io/cufile" in out["status"]["message"]
    assert "required, preferred" in out["status"]["message"]


async def test_unsynced_cache_denies_fabric_pods_with_retry(aiohttp_client: Any) -> None:
    c = await aiohttp_client(make_app(FabricCache(), Settings()))
    out = await (
        await c.post("/mutate", json=review(pod({"gpufabric.io/rdma": "required"})))
    ).json()
    assert out["response"]["allowed"] is False and "retry" in out["response"]["status"]["message"]
    assert (await c.get("/readyz")).status == 503
    untouched = await (await c.post("/mutate", json=review(pod({})))).json()
    assert untouched["response"]["allowed"] is True


async def test_no_node_satisfies_admits_with_a_warning(client: TestClient[Any, Any]) -> None:
    body = review(pod({"gpufabric.io/rdma-min-ports": "64"}))
    out = (await (await client.post("/mutate", json=body)).json())["response"]
    assert out["allowed"] is True
    assert any("at least 64 ACTIVE GPUDirect RDMA ports" in w for w in out["warnings"])


@pytest.mark.parametrize(
    ("body", "ctype"),
    [
        (b"{not json", "application/json"),
        (b"[]", "application/json"),
        (json.dumps({"apiVersion": "v1", "kind": "Pod"}).encode(), "application/json"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            "application/json",
        ),
        (json.dumps(review(pod({}))).encode(), "text/plain"),
        (b"\xff\xfe\x00", "application/json"),
    ],
    ids=["not-json", "array", "not-a-review", "no-request", "wrong-content-type", "binary"],
)
async def test_malformed_requests_get_400(
    client: TestClient[Any, Any], body: bytes, ctype: str
) -> None:
    r = await client.post("/mutate", data=body, headers={"Content-Type": ctype})
    assert r.status == 400
    assert "error" in await r.json()


@pytest.mark.parametrize(
    "ctype", ["application/json", "application/json; charset=utf-8", "Application/JSON"]
)
async def test_json_content_type_in_any_spelling_is_read(
    client: TestClient[Any, Any], ctype: str
) -> None:
    # The exact header is compared first; any other spelling is parsed as aiohttp reads it.
    body = json.dumps(review(pod({"gpufabric.io/rdma": "required"}))).encode()
    r = await client.post("/mutate", data=body, headers={"Content-Type": ctype})
    assert r.status == 200
    assert (await r.json())["response"]["allowed"] is True


async def test_oversized_body_gets_400(client: TestClient[Any, Any]) -> None:
    import io

    r = await client.post(
        "/mutate",
        data=io.BytesIO(b"{" + b" " * (4 * 1024 * 1024) + b"}"),
        headers={"Content-Type": "application/json"},
    )
    assert r.status == 400


async def test_fuzzed_bodies_never_5xx(client: TestClient[Any, Any]) -> None:
    rng = random.Random(7)
    base = json.dumps(
        review(pod({"gpufabric.io/rdma": "required", "gpufabric.io/topology": "nvlink"}))
    ).encode()
    for i in range(300):
        data = bytearray(base)
        for _ in range(rng.randint(1, 12)):
            op = rng.random()
            pos = rng.randrange(len(data))
            if op < 0.4:
                data[pos] = rng.randrange(256)
            elif op < 0.7:
                del data[pos : pos + rng.randint(1, 20)]
            else:
                data[pos:pos] = rng.choice([b"null", b"[]", b'"x"', b"{}", b"-1", b"1e999"])
        r = await client.post(
            "/mutate", data=bytes(data), headers={"Content-Type": "application/json"}
        )
        assert r.status in (200, 400), (i, r.status)
    # Structured garbage in the right places.
    for value in (
        None,
        1,
        "s",
        [],
        {"spec": 5},
        {"metadata": {"annotations": {"gpufabric.io/rdma": 5}}},
    ):
        body = review(pod({}))
        body["request"]["object"] = value
        r = await client.post("/mutate", json=body)
        assert r.status in (200, 400)
    assert (await client.get("/healthz")).status == 200


async def test_metrics_expose_outcomes_and_cache(client: TestClient[Any, Any]) -> None:
    await client.post("/mutate", json=review(pod({"gpufabric.io/rdma": "required"})))
    text = await (await client.get("/metrics")).text()
    assert "gpufabric_webhook_admission_duration_seconds_bucket" in text
    assert 'gpufabric_webhook_admissions_total{outcome="mutated"}' in text or "warned" in text
    assert f"gpufabric_webhook_cache_nodes {len(list(GOLDEN.glob('*.yaml')))}.0" in text


def write_pair(dir: Path, ca_name: str) -> tuple[Path, Path, Path]:
    ca = make_ca(ca_name, NOW)
    serving = make_serving(ca, ["localhost", "127.0.0.1"], NOW)
    (dir / "ca.crt").write_bytes(ca.cert_pem)
    (dir / "tls.crt").write_bytes(serving.cert_pem)
    (dir / "tls.key").write_bytes(serving.key_pem)
    return dir / "ca.crt", dir / "tls.crt", dir / "tls.key"


async def test_tls_end_to_end_and_certificate_reload(tmp_path: Path) -> None:
    ca1, cert, key = write_pair(tmp_path, "ca-one")
    ca1_pem = ca1.read_bytes()
    ctx = tls_context(cert, key)
    runner = web.AppRunner(make_app(golden_cache(), Settings()))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    url = f"https://localhost:{port}/mutate"
    try:
        client_ctx = ssl.create_default_context(cadata=ca1_pem.decode())
        async with aiohttp.ClientSession() as s:
            async with s.post(
                url, json=review(pod({"gpufabric.io/rdma": "required"})), ssl=client_ctx
            ) as r:
                assert r.status == 200
                assert (await r.json())["response"]["allowed"] is True
            # Rotate: new CA and serving pair written in place, picked up without a restart.
            reloader = CertReloader(ctx, cert, key)
            ca2, _, _ = write_pair(tmp_path, "ca-two")
            assert reloader.check()
            ctx2 = ssl.create_default_context(cadata=ca2.read_text())
            async with (
                aiohttp.ClientSession() as s2,
                s2.get(f"https://localhost:{port}/healthz", ssl=ctx2) as r2,
            ):
                assert r2.status == 200
            # A half-written key keeps the old pair in service.
            key.write_text("garbage")
            assert not reloader.check()
        assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    finally:
        await runner.cleanup()
        await asyncio.sleep(0)
