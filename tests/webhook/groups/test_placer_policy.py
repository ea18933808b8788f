"""The ValidatingAdmissionPolicy that confines the placer's pod patches, evaluated with CEL the
way the API server does (variables, then validations), against the patches the placer itself
sends: the real Placer runs groups of every level (NVLink domain, leaf, pair, quad, spine, none)
with ranks, members held to their own lowest domain and replacements, over the fake API server,
and every patch it sent must pass the shipped policy. A new kind of patch in enforce.py either
passes the policy or fails here; the denials are edits of those same patches."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator
from typing import Any

import celpy
import jsonpatch
import pytest

from tests.manifests import find, render
from tests.nvl72 import racks_under_leaves
from tests.webhook.groups.fabric import fabric, gpu_pod
from tests.webhook.groups.fake_api import FakeApi
from webhook.groups.extensions.preempt.extension import Preemption
from webhook.groups.model.indexes import COMPLETION_INDEX
from webhook.groups.model.names import ANN_PLACEMENT, ANN_RANK, LEVELS, level_key
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.placer import Placer
from webhook.kube.nodeselector import REQUIRED

PLACER = "system:serviceaccount:gpufabric-system:gpufabric-webhook"
POLICY = "gpufabric-placer-pods"
Pod = dict[str, Any]


@functools.cache
def _programs(policy: str) -> tuple[Any, list[tuple[str, Any]], list[tuple[str, Any]]]:
    """A shipped policy's match condition, variables and validations, compiled once."""
    spec = find(render(), "ValidatingAdmissionPolicy", policy)["spec"]
    env = celpy.Environment()

    def compiled(expression: str) -> Any:
        return env.program(env.compile(expression))

    (match,) = spec["matchConditions"]
    return (
        compiled(match["expression"]),
        [(v["name"], compiled(v["expression"])) for v in spec["variables"]],
        [(v["message"].strip(), compiled(v["expression"])) for v in spec["validations"]],
    )


def policy_failures(old: Pod, new: Pod, user: str = PLACER, policy: str = POLICY) -> list[str]:
    """The messages of the validations of `policy` this UPDATE fails (empty: admitted)."""
    match, variables, validations = _programs(policy)
    act: dict[str, Any] = {
        "request": celpy.json_to_cel({"operation": "UPDATE", "userInfo": {"username": user}}),
        "object": celpy.json_to_cel(new),
        "oldObject": celpy.json_to_cel(old),
    }
    if not bool(match.evaluate(act)):
        return []
    values: dict[str, Any] = {}
    for name, program in variables:
        values[name] = program.evaluate({**act, "variables": celpy.json_to_cel(values)})
    act["variables"] = celpy.json_to_cel(values)
    return [message for message, program in validations if not bool(program.evaluate(act))]


class Recording(FakeApi):
    """The fake API server, keeping each patched pod as it was before and after."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[Pod, list[dict[str, Any]]]] = []

    def patch_pod(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> None:
        old = copy.deepcopy(self.pods.get((namespace, name)))
        super().patch_pod(namespace, name, ops)
        if old is not None:
            self.sent.append((old, copy.deepcopy(ops)))


def _run(
    nodes: list[Pod], pods: list[Pod], then: Callable[[Recording, Placer], None] | None = None
) -> Recording:
    api = Recording()
    placer = Placer(api, extensions=Extensions(Preemption(api)))
    placer.nodes_listed(nodes)
    placer.pods_listed([])
    for pod in pods:
        placer.pod_event("ADDED", api.create(pod))
        placer.reconcile()
    for obj in list(api.pods.values()):  # the watch reports the patched pods
        placer.pod_event("MODIFIED", obj)
    placer.reconcile()
    if then is not None:
        then(api, placer)
    assert all(not (p["spec"].get("schedulingGates") or []) for p in api.pods.values()), [
        n for (_, n), p in api.pods.items() if p["spec"].get("schedulingGates")
    ]
    return api


def _member(i: int, group: str, size: int, gpus: int = 8, **kw: Any) -> Pod:
    return gpu_pod(f"{group}-{i:02d}", gpus, group=group, size=size, gated=True, **kw)


# What users' pods already carry when the placer patches them: every shape of affinity the
# patch has to extend (none, required terms, only preferences, only pod anti-affinity).
_TERM = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]}
_AFFINITIES: list[dict[str, Any] | None] = [
    None,
    {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [copy.deepcopy(_TERM)]}}},
    {
        "nodeAffinity": {
            REQUIRED: {
                "nodeSelectorTerms": [
                    copy.deepcopy(_TERM),
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "NotIn", "values": ["nowhere"]}
                        ]
                    },
                ]
            }
        }
    },
    {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": copy.deepcopy(_TERM)}
            ]
        }
    },
    {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "x"}},
                    },
                }
            ]
        }
    },
]


def _members(group: str, size: int, gpus: int = 8, **kw: Any) -> list[Pod]:
    return [
        _member(
            i, group, size, gpus, affinity=copy.deepcopy(_AFFINITIES[i % len(_AFFINITIES)]), **kw
        )
        for i in range(size)
    ]


def _indexed(size: int) -> list[Pod]:
    pods = _members("train", size)
    for i, pod in enumerate(pods):
        pod["metadata"]["annotations"][COMPLETION_INDEX] = str(i)
    return pods


def _replace_one(api: Recording, placer: Placer) -> None:
    """A placed member dies and its Job makes a replacement: placed again inside the group's
    recorded domain (the recovery path)."""
    gone = api.pods.pop(("team-a", "train-03"))
    placer.pod_event("DELETED", gone)
    again = _member(3, "train", 8, affinity=None)
    again["metadata"]["name"] = again["metadata"]["uid"] = "train-03-again"
    again["metadata"]["annotations"][COMPLETION_INDEX] = "3"
    placer.pod_event("ADDED", api.create(again))
    placer.reconcile()


def _unlabelled(n: int) -> list[Pod]:
    nodes = fabric(n)
    for node in nodes:
        labels = node["metadata"]["labels"]
        node["metadata"]["labels"] = {"kubernetes.io/hostname": labels["kubernetes.io/hostname"]}
    return nodes


# Every kind of group the placer places: (nodes, pods, what happens after).
SCENARIOS: dict[str, Callable[[], Recording]] = {
    "nvlink-domain": lambda: _run(racks_under_leaves(2), _members("moe", 4, gpus=4)),
    "leaf-pair-held-to-nvlink": lambda: _run(racks_under_leaves(4), _members("big", 20, gpus=4)),
    "leaf": lambda: _run(fabric(16), _members("small", 4)),
    "leaf-pair-indexed-replaced": lambda: _run(fabric(16), _indexed(8), _replace_one),
    "leaf-quad": lambda: _run(fabric(32), _members("quad", 16)),
    "spine": lambda: _run(fabric(64), _members("wide", 20)),
    "no-labels-preferred": lambda: _run(_unlabelled(4), _members("any", 2, locality="preferred")),
}


@functools.cache
def sent() -> tuple[tuple[str, Pod, tuple[dict[str, Any], ...]], ...]:
    """(scenario, the pod before, the patch) for every patch the placer sent."""
    return tuple(
        (name, old, tuple(ops)) for name, run in SCENARIOS.items() for old, ops in run().sent
    )


def applied(old: Pod, ops: Any) -> Pod:
    out: Pod = jsonpatch.JsonPatch(list(ops)).apply(copy.deepcopy(old))
    return out


def _added_expressions(ops: Any) -> Iterator[dict[str, Any]]:
    for op in ops:
        value = op.get("value")
        if op["op"] != "add" or not isinstance(value, dict | list):
            continue
        text = repr(value)
        if "matchExpressions" in text or "operator" in text:
            stack: list[Any] = [value]
            while stack:
                v = stack.pop()
                if isinstance(v, dict) and "operator" in v:
                    yield v
                elif isinstance(v, dict):
                    stack += list(v.values())
                elif isinstance(v, list):
                    stack += v


def test_the_scenarios_cover_every_kind_of_patch_the_placer_sends() -> None:
    patches = sent()
    keys = {e["key"] for _, _, ops in patches for e in _added_expressions(ops)}
    assert keys == {level_key(lv) for lv in LEVELS}  # every level, NVLink domain included
    placements = {
        applied(o, ops)["metadata"]["annotations"][ANN_PLACEMENT] for _, o, ops in patches
    }
    assert {p.partition("=")[0] for p in placements} == {*LEVELS, "none"}
    assert all(ANN_RANK in applied(o, ops)["metadata"]["annotations"] for _, o, ops in patches)
    held = [ops for _, _, ops in patches if len(list(_added_expressions(ops))) == 2]
    assert {e["key"] for ops in held for e in _added_expressions(ops)} >= {
        level_key("nvlink-domain"),
        level_key("leaf"),
    }  # members held to their own lowest domain, an NVLink domain or a leaf
    assert "train-03-again" in {o["metadata"]["name"] for _, o, _ in patches}  # a replacement


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_patch_the_placer_sends_is_allowed(scenario: str) -> None:
    patches = [(old, ops) for name, old, ops in sent() if name == scenario]
    assert patches
    for old, ops in patches:
        assert policy_failures(old, applied(old, ops)) == [], (old["metadata"]["name"], ops)


def placed_member() -> tuple[Pod, Pod]:
    """A member before and after the placer's own patch: a leaf-pair group's member held to its
    leaf, with a user's required term already there."""
    old, ops = next(
        (o, ops)
        for name, o, ops in sent()
        if name == "leaf-pair-indexed-replaced"
        and len(list(_added_expressions(ops))) == 2
        and o["spec"].get("affinity")
    )
    return old, applied(old, ops)


def _expressions(pod: Pod) -> list[dict[str, Any]]:
    terms = pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    out: list[dict[str, Any]] = terms[0]["matchExpressions"]
    return out


def _gate(pod: Pod) -> None:
    pod["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]


def _label(pod: Pod) -> None:
    pod["metadata"]["labels"]["x"] = "y"


def _other_annotation(pod: Pod) -> None:
    pod["metadata"]["annotations"]["other"] = "1"


def _dropped_annotation(pod: Pod) -> None:
    del pod["metadata"]["annotations"][COMPLETION_INDEX]


def _bad_rank(pod: Pod) -> None:
    pod["metadata"]["annotations"][ANN_RANK] = "-1"


def _bad_placement(pod: Pod) -> None:
    pod["metadata"]["annotations"][ANN_PLACEMENT] = "rack=r1"


def _image(pod: Pod) -> None:
    pod["spec"]["containers"][0]["image"] = "evil"


def _toleration(pod: Pod) -> None:
    pod["spec"]["tolerations"] = [{"operator": "Exists"}]


def _foreign_key(pod: Pod) -> None:
    _expressions(pod).append({"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]})


def _two_values(pod: Pod) -> None:
    _expressions(pod)[-1]["values"].append("leaf-9")


def _not_in(pod: Pod) -> None:
    _expressions(pod)[-1]["operator"] = "NotIn"


def _match_fields(pod: Pod) -> None:
    terms = pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    terms[0]["matchFields"] = [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]


def _anti_affinity(pod: Pod) -> None:
    pod["spec"]["affinity"]["podAntiAffinity"] = {REQUIRED: []}


DENIED: list[tuple[Callable[[Pod], None], str]] = [
    (_gate, "remove only the gpufabric.io/group scheduling gate"),
    (_label, "may not change labels"),
    (_other_annotation, "may write only the annotations"),
    (_dropped_annotation, "may write only the annotations"),
    (_bad_rank, "may write only the annotations"),
    (_bad_placement, "may write only the annotations"),
    (_image, "may not change images"),
    (_toleration, "may not change tolerations, nodeSelector or activeDeadlineSeconds"),
    (_foreign_key, "add to the required node affinity only"),
    (_two_values, "add to the required node affinity only"),
    (_not_in, "add to the required node affinity only"),
    (_match_fields, "add to the required node affinity only"),
    (_anti_affinity, "may change only the required node affinity"),
]


@pytest.mark.parametrize(("edit", "message"), DENIED, ids=[e.__name__[1:] for e, _ in DENIED])
def test_anything_beyond_the_placers_patch_is_denied(
    edit: Callable[[Pod], None], message: str
) -> None:
    old, new = placed_member()
    assert policy_failures(old, new) == []
    edit(new)
    failures = policy_failures(old, new)
    assert any(message in f for f in failures), failures


def test_other_identities_are_not_matched() -> None:
    old, new = placed_member()
    _label(new)
    assert policy_failures(old, new, user="system:serviceaccount:x:y") == []
    assert policy_failures(old, new) != []


_TERM = {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}


@pytest.mark.parametrize(
    ("old_affinity", "new_affinity", "kept"),
    [
        (None, None, True),
        ({"podAffinity": {REQUIRED: [_TERM]}}, {"podAffinity": {REQUIRED: [_TERM]}}, True),
        (
            {"podAffinity": {REQUIRED: [_TERM]}},
            {"podAffinity": {REQUIRED: [{**_TERM, "topologyKey": "zone"}]}},
            False,
        ),
        ({"podAntiAffinity": {REQUIRED: [_TERM]}}, {}, False),
        (None, {"podAntiAffinity": {REQUIRED: [_TERM]}}, False),
    ],
    ids=["both-absent", "same", "changed", "removed", "added"],
)
def test_pod_affinity_is_kept_whether_present_or_not(
    old_affinity: dict[str, Any] | None, new_affinity: dict[str, Any] | None, kept: bool
) -> None:
    """Presence is compared first, then the values where both sides have them (the policy's
    type-checkable form): a (anti-)affinity added, removed or changed is denied."""

    def pod(affinity: dict[str, Any] | None) -> Pod:
        spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
        return {
            "metadata": {"name": "p"},
            "spec": spec | ({"affinity": affinity} if affinity is not None else {}),
        }

    failures = policy_failures(pod(old_affinity), pod(new_affinity))
    assert failures == (
        [] if kept else ["the group placer may change only the required node affinity"]
    )
