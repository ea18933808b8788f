"""Fuzz the admission decision with many damaged AdmissionReviews (issue 11's measure).

Each review starts from the one kube-apiserver really sent (tests/fixtures/admission) for a pod
with gpufabric annotations and is damaged at random: values of any JSON type put at any path, deep
nesting, byte flips, cuts and insertions. Every body goes through webhook.server.app.reply, the function
/mutate answers with. Counted: answers other than HTTP 200/400, and pods with gpufabric annotations
admitted without every requirement they asked for in every required node-selector term.

    .venv/bin/python bench/webhook_fuzz.py [--reviews 100000] [--seed 1]
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jsonpatch  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviews", type=int, default=100_000, help="default: 100000")
    parser.add_argument("--seed", type=int, default=1, help="default: 1")
    args = parser.parse_args()
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
