"""Fuzz the admission decision with many damaged AdmissionReviews (issue 11's measure).

Each review starts from the one kube-apiserver really sent (tests/fixtures/admission) for a pod
with gpufabric annotations and is damaged at random: values of any JSON type put at any path, deep
nesting, byte flips, cuts and insertions. Every body goes through webhook.server.app.reply, the function
/mutate answers with. Counted: answers other than HTTP 200/400, and pods with gpufabric annotations
admitted without every requirement they asked for in every required node-selector term.

    .venv/bin/python bench/webhook_fuzz.py [--reviews 100000] [--seed 1]
    .venv/bin/python bench/webhook_fuzz.py --rss [--reviews 200000] [--warmup 20000] [--src DIR]
        [--concurrency 32] [--large]

`--rss` (issue 17) measures memory instead: `serve`'s HTTPS site (webhook.server.app, golden
cache, its own process) is sent reviews over TLS from this process, half of them well-formed pods
of many shapes (every annotation, GPU counts, nodeSelectors and required terms on our labels,
preferred-HCA lists and `In` lists from 1 to 5,000 entries: what fills every memo keyed by a pod's
shape), half damaged as above. The server's RSS is read from /proc after `--warmup` reviews and
every 10,000 after; the bar is <= +30 MB from the warm-up reading to the end. `--src DIR` runs the
server from another checkout (e.g. the code before issue 17) for a before/after pair. Issue 22's
hostile soak adds `--concurrency 32 --large`: one body in 500 is 10 MB (over the 8 MiB limit),
6 MB, or nested 200,000 deep.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import datetime as dt
import json
import random
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jsonpatch  # noqa: E402

from common import api  # noqa: E402
from tests.webhook.helpers import golden_cache  # noqa: E402
from webhook.admission.placement import Settings, plan  # noqa: E402
from webhook.admission.requirements import check  # noqa: E402
from webhook.admission.review import has_fabric_annotations  # noqa: E402
from webhook.server.app import reply  # noqa: E402

RAW = (ROOT / "tests" / "fixtures" / "admission" / "pod-create.review.json").read_bytes()
BASE: dict[str, Any] = json.loads(RAW)
VALUES: list[Any] = [None, True, 0, -1, 2**64, 1.5, "", "x", "required", "8", [], {}, [1], {"a": 1}]


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if len(prefix) > 30:  # a deep value put there by an earlier change: do not walk into it
        return out
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    )
    for k, v in items:
        out += paths(v, (*prefix, k))
    return out


def structured(rng: random.Random) -> bytes:
    doc = copy.deepcopy(BASE)
    for _ in range(rng.randint(1, 4)):
        path = rng.choice(paths(doc)[1:])
        value: Any = copy.deepcopy(rng.choice(VALUES))
        if rng.random() < 0.1:
            depth = rng.choice([10, 100, 900, 5000])
            value = json.loads("[" * min(depth, 900) + "]" * min(depth, 900))
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return json.dumps(doc).encode()


def damaged(rng: random.Random) -> bytes:
    body = bytearray(RAW)
    for _ in range(rng.randint(1, 12)):
        pos = rng.randrange(len(body))
        op = rng.random()
        if op < 0.4:
            body[pos] = rng.randrange(256)
        elif op < 0.7:
            del body[pos : pos + rng.randint(1, 20)]
        else:
            body[pos:pos] = rng.choice(
                [b"null", b"[]", b'"x"', b"{}", b"-1", b"1e999", b"[" * 5000]
            )
    return bytes(body)


def unconstrained(body: bytes, out: Any, cache: Any) -> bool:
    resp = out.body.get("response", {})
    if out.status != 200 or not resp.get("allowed"):
        return False
    pod = json.loads(body)["request"]["object"]
    if not isinstance(pod, dict) or not has_fabric_annotations(pod):
        return False
    req, _ = check(pod, "team-a", cache.claim)
    if req is None:
        return True  # admitted although invalid
    patch = json.loads(base64.b64decode(resp["patch"])) if "patch" in resp else []
    patched = jsonpatch.apply_patch(pod, patch)
    needs = plan(req).required
    if not needs:
        return False
    terms = patched["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return not all(n.expr in t.get("matchExpressions", []) for n in needs for t in terms)


LABELS = sorted(api.ALL_LABELS)
SIZES = (1, 2, 8, 50, 500, 5000)


def shaped(rng: random.Random) -> bytes:
    """A well-formed pod review of a random shape (see the module doc); some values are invalid
    (REQUIRED, too many GPUs for any node) as users write them."""
    doc = copy.deepcopy(BASE)
    doc["request"]["uid"] = f"{rng.getrandbits(64):016x}"
    obj = doc["request"]["object"]
    obj["metadata"]["name"] = f"p{rng.getrandbits(32)}"
    ann: dict[str, str] = {}
    if rng.random() < 0.8:
        ann[api.ANN_RDMA] = rng.choice(["required", "preferred", "REQUIRED"])
    if rng.random() < 0.5:
        ann[api.ANN_RDMA_MIN_PORTS] = str(rng.randint(1, 16))
    if rng.random() < 0.5:
        names = (f"mlx5_{rng.randrange(10_000)}" for _ in range(rng.choice(SIZES)))
        ann[api.ANN_PREFERRED_HCAS] = ",".join(names)
    if rng.random() < 0.5:
        ann[api.ANN_TOPOLOGY] = rng.choice(["any", "same-socket", "nvlink"])
    if rng.random() < 0.5:
        ann[api.ANN_MIN_NVLINK_BW] = str(rng.randint(1, 2000))
    if rng.random() < 0.3:
        ann[api.ANN_CUFILE] = rng.choice(["required", "preferred"])
    if rng.random() < 0.3:
        ann["gpufabric.io/group"] = f"g{rng.getrandbits(20)}"
        ann["gpufabric.io/group-size"] = str(rng.randint(1, 64))
    obj["metadata"]["annotations"] = ann
    spec = obj["spec"]
    if rng.random() < 0.5:
        spec["nodeSelector"] = {rng.choice(LABELS): str(rng.getrandbits(20)) for _ in range(2)}
    if rng.random() < 0.5:
        terms = [
            {
                "matchExpressions": [
                    {
                        "key": rng.choice(LABELS),
                        "operator": rng.choice(["In", "NotIn"]),
                        "values": [str(rng.getrandbits(30)) for _ in range(rng.choice(SIZES))],
                    }
                ]
            }
            for _ in range(rng.randint(1, 3))
        ]
        required = {"nodeSelectorTerms": terms}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(rng.randint(1, 16))}}
    return json.dumps(doc).encode()


def large(rng: random.Random, i: int) -> bytes:
    """A hostile body of megabytes (issue 22): a 10 MB review (over the 8 MiB limit), a 6 MB one
    the server must parse, or one nested 200,000 deep."""
    kind = (i // LARGE_EVERY) % 3
    if kind == 2:
        return b'{"request":' + b'{"a":' * 200_000 + b"1" + b"}" * 200_001
    doc = copy.deepcopy(BASE)
    size = 10_000_000 if kind == 0 else 6_000_000
    value = "".join(rng.choice("abcdef0123456789") for _ in range(64)) * (size // 64)
    doc["request"]["object"]["metadata"]["annotations"]["note"] = value
    return json.dumps(doc).encode()


LARGE_EVERY = 500  # --large: one body in this many is large


def mixed(rng: random.Random, i: int, big: bool = False) -> bytes:
    if big and i % LARGE_EVERY == LARGE_EVERY - 1:
        return large(rng, i)
    return shaped(rng) if i % 2 else structured(rng) if i % 4 == 0 else damaged(rng)


def rss(args: argparse.Namespace) -> None:
    """Server RSS over `args.reviews` mixed reviews sent over TLS (see the module doc)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import aiohttp
    from webhook_connections_bench import SERVER, rss_mb

    from certs.pki import make_ca, make_serving

    now = dt.datetime.now(dt.UTC)
    tmp = Path(tempfile.mkdtemp())
    ca = make_ca("bench", now)
    serving = make_serving(ca, ["localhost", "127.0.0.1"], now)
    for name, pem in (("ca", ca.cert_pem), ("tls.crt", serving.cert_pem)):
        (tmp / name).write_bytes(pem)
    (tmp / "tls.key").write_bytes(serving.key_pem)
    src = Path(args.src).resolve() if args.src else ROOT
    code = SERVER.format(root=str(src), cert=str(tmp / "tls.crt"), key=str(tmp / "tls.key"))
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "bounded"], stdout=subprocess.PIPE, text=True, cwd=src
    )
    rng = random.Random(args.seed)
    readings: list[tuple[int, float]] = []
    closed: list[int] = []  # large bodies whose connection the server closed

    async def send() -> None:
        assert proc.stdout is not None
        url = f"https://localhost:{int(proc.stdout.readline())}/mutate"
        readings.append((0, rss_mb(proc.pid)))
        ctx = ssl.create_default_context(cafile=str(tmp / "ca"))
        headers = {"Content-Type": "application/json"}
        connector = aiohttp.TCPConnector(ssl=ctx, limit=args.concurrency)
        async with aiohttp.ClientSession(connector=connector) as s:

            async def one(body: bytes, again: bool = True) -> int:
                try:
                    async with s.post(url, data=body, headers=headers) as r:
                        await r.read()
                        return r.status
                except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                    if proc.poll() is not None:
                        raise
                    # A large body the server refused (over the limit, or not received in time)
                    # is answered and the connection closed before it is all sent.
                    if len(body) > 1_000_000:
                        closed.append(len(body))
                        return 400
                    if again:  # a kept-alive connection the server had just closed as idle
                        return await one(body, again=False)
                    raise

            step = 1000
            for start in range(0, args.reviews, step):
                bodies = [mixed(rng, i, args.large) for i in range(start, start + step)]
                codes = await asyncio.gather(*map(one, bodies))
                if any(c not in (200, 400) for c in codes):
                    raise SystemExit(f"an answer other than 200/400 near review {start}")
                done = start + step
                if done == args.warmup or (done > args.warmup and done % 10_000 == 0):
                    readings.append((done, rss_mb(proc.pid)))
                    print(f"{done:8d} reviews: RSS {readings[-1][1]:6.1f} MB", flush=True)

    started = time.perf_counter()
    try:
        asyncio.run(send())
    finally:
        proc.kill()
        proc.wait()
    warm = next(mb for n, mb in readings if n == args.warmup)
    top = max(mb for n, mb in readings if n >= args.warmup)
    print(
        f"{args.reviews} mixed reviews over TLS in {time.perf_counter() - started:.0f} s "
        f"(seed {args.seed}, server from {src}): RSS {readings[0][1]:.1f} MB at start, "
        f"{warm:.1f} MB after {args.warmup} (warm-up), at most {top:.1f} MB after "
        f"(+{top - warm:.1f} MB; bar +30 MB), {readings[-1][1]:.1f} MB at the end; "
        f"{len(closed)} large bodies refused with the connection closed"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviews", type=int, default=None, help="default: 100000 (--rss: 200000)")
    parser.add_argument("--seed", type=int, default=1, help="default: 1")
    parser.add_argument("--rss", action="store_true", help="server RSS over TLS (issue 17)")
    parser.add_argument("--warmup", type=int, default=20_000, help="--rss: default 20000")
    parser.add_argument("--src", default="", help="--rss: run the server from this checkout")
    parser.add_argument("--concurrency", type=int, default=8, help="--rss: connections (8)")
    parser.add_argument(
        "--large", action="store_true", help="--rss: 1 body in 500 of 6-10 MB or nested deep"
    )
    args = parser.parse_args()
    if args.rss:
        args.reviews = args.reviews or 200_000
        rss(args)
        return
    args.reviews = args.reviews or 100_000
    rng = random.Random(args.seed)
    cache, settings = golden_cache(), Settings(inject_nccl_tuning=True)
    statuses: dict[int, int] = {}
    outcomes: dict[str, int] = {}
    bad = 0
    started = time.perf_counter()
    for i in range(args.reviews):
        body = structured(rng) if i % 2 else damaged(rng)
        out = reply(body, cache, settings)
        statuses[out.status] = statuses.get(out.status, 0) + 1
        outcomes[out.outcome] = outcomes.get(out.outcome, 0) + 1
        bad += unconstrained(body, out, cache)
    seconds = time.perf_counter() - started
    print(f"{args.reviews} fuzzed reviews in {seconds:.1f} s (seed {args.seed})")
    print("HTTP status:", dict(sorted(statuses.items())))
    print("outcomes:", dict(sorted(outcomes.items())))
    print(f"not 200/400: {sum(v for k, v in statuses.items() if k not in (200, 400))}")
    print(f"fabric pods admitted without their constraints: {bad}")


if __name__ == "__main__":
    main()
