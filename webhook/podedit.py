"""A writable copy of a pod and the JSONPatch that turns the original into it, built together.

The mutation only adds: keys to objects and items at the end of lists. `PodEdit` copies just the
dicts and lists on the paths it may write (metadata.annotations, spec, the node affinity down to
each term's matchExpressions, containers with their env and volumeMounts, volumes); the rest is
shared with the original, which is never changed. Each edit records one JSONPatch "add", except
inside an object the edit itself created: that object's own op carries it (ops hold the live
objects and are serialized after the last edit). So no diff of the whole pod is needed;
tests/webhook/patch_oracle.py computes the same patch from the outside, and the property tests
hold the two together. In place (the server's review, whose pod is dropped after its ops are sent)
nothing is copied, and the plan's constant expressions go into the pod as they are.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from common import api

Expr = dict[str, Any]  # a NodeSelectorRequirement
Node = tuple[Any, str, bool]  # (dict or list in the new pod, its JSON pointer, created here)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _copied(obj: Any, *lists: str) -> Any:
    """A dict copied with the named list members copied (shallow); anything else as it is."""
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    for key in lists:
        if isinstance(out.get(key), list):
            out[key] = list(out[key])
    return out


def _writable(pod: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(pod)
    if isinstance(pod.get("metadata"), dict):
        out["metadata"] = meta = dict(pod["metadata"])
        if isinstance(meta.get("annotations"), dict):
            meta["annotations"] = dict(meta["annotations"])
    if not isinstance(pod.get("spec"), dict):
        return out
    spec = out["spec"] = dict(pod["spec"])
    affinity = spec.get("affinity")
    if isinstance(affinity, dict):
        affinity = spec["affinity"] = dict(affinity)
        node = affinity.get("nodeAffinity")
        if isinstance(node, dict):
            node = affinity["nodeAffinity"] = dict(node)
            required = node.get(REQUIRED)
            if isinstance(required, dict):
                required = node[REQUIRED] = dict(required)
                if isinstance(required.get("nodeSelectorTerms"), list):
                    required["nodeSelectorTerms"] = [
                        _copied(t, "matchExpressions") for t in required["nodeSelectorTerms"]
                    ]
            if isinstance(node.get(PREFERRED), list):
                node[PREFERRED] = list(node[PREFERRED])
    if isinstance(spec.get("containers"), list):
        spec["containers"] = [_copied(c, "env", "volumeMounts") for c in spec["containers"]]
    if isinstance(spec.get("volumes"), list):
        spec["volumes"] = list(spec["volumes"])
    return out


def _escape(key: str) -> str:
    if "~" in key or "/" in key:
        return key.replace("~", "~0").replace("/", "~1")
    return key


class PodEdit:
    """Edits that only add, each recorded as one JSONPatch "add".

    Member keys passed to `get` are the pod's own field names (no "~" or "/": their JSON pointer
    needs no escaping); annotation keys, which do, go through `annotate`.
    """

    __slots__ = ("_created", "_node_affinity", "_spec", "ops", "pod", "root", "shared")

    def __init__(self, pod: Mapping[str, Any], in_place: bool = False) -> None:
        # in_place: the caller owns the pod and needs only the ops (the server, whose pod was
        # just decoded from the request body): edit it directly instead of copying the paths,
        # and let constant values (the plan's expressions) go in without a copy of their own,
        # since the pod is serialised as ops and dropped, never edited or dumped again.
        self.pod = pod if in_place and isinstance(pod, dict) else _writable(pod)
        self.shared = in_place
        self.ops: list[dict[str, Any]] = []
        self.root: Node = (self.pod, "", False)
        # Objects this edit created (alive in self.pod, so their ids stay unique): an edit that
        # reaches one again by another path must not record an op its creator's op carries.
        self._created: set[int] = set()
        self._spec: Node | None = None
        self._node_affinity: Node | None = None

    def get(self, at: Node, key: str, kind: type[dict[str, Any]] | type[list[Any]]) -> Node:
        """The member `key` of the object at `at`, created (empty, of `kind`) when absent."""
        obj, path, fresh = at
        value = obj.get(key)
        if value is not None:
            created = self._created  # usually empty: the pod had every object the edit reaches
            return (value, f"{path}/{key}", fresh or (bool(created) and id(value) in created))
        value = obj[key] = kind()
        self._created.add(id(value))
        if not fresh:
            self.ops.append({"op": "add", "path": f"{path}/{key}", "value": value})
        return (value, f"{path}/{key}", True)

    def append(self, at: Node, item: Any, revisit: bool = False) -> None:
        """Add item at the end of the list at `at`; `revisit` when later edits reach into it."""
        items, path, fresh = at
        items.append(item)
        if revisit:
            self._created.add(id(item))
        if not fresh:
            self.ops.append({"op": "add", "path": f"{path}/{len(items) - 1}", "value": item})

    def spec(self) -> Node:
        if self._spec is None:
            self._spec = self.get(self.root, "spec", dict)
        return self._spec

    def node_affinity(self) -> Node:
        if self._node_affinity is None:
            affinity = self.get(self.spec(), "affinity", dict)
            self._node_affinity = self.get(affinity, "nodeAffinity", dict)
        return self._node_affinity

    def add_required(self, exprs: Sequence[Expr]) -> None:
        """ANDed into every existing nodeSelectorTerm (a new term would loosen the pod)."""
        required = self.get(self.node_affinity(), REQUIRED, dict)
        terms, path, fresh = self.get(required, "nodeSelectorTerms", list)
        if not terms:
            self.append((terms, path, fresh), {"matchExpressions": []}, revisit=True)
        ops, own, created = self.ops, self._own, self._created
        for i, term in enumerate(terms):
            have = term.get("matchExpressions")
            if have is None or created:  # an object to create, or one this edit made: get() knows
                at = (term, f"{path}/{i}", fresh or id(term) in created)
                have, at_path, at_fresh = self.get(at, "matchExpressions", list)
            else:  # the usual pod: the list is there and the edit has created nothing yet
                at_path, at_fresh = f"{path}/{i}/matchExpressions", fresh
            n = len(have)
            for expr in exprs:
                if expr not in have:
                    item = own(expr)
                    have.append(item)
                    if not at_fresh:
                        ops.append({"op": "add", "path": f"{at_path}/{n}", "value": item})
                    n += 1

    def add_preferred(self, terms: Sequence[dict[str, Any]]) -> None:
        """Weighted preferred terms ({weight, preference: {matchExpressions}}), each unless the
        pod has it already."""
        prefs = self.get(self.node_affinity(), PREFERRED, list)
        for term in terms:
            if term not in prefs[0]:
                self.append(prefs, self._own(term))

    def gpu_containers(self) -> list[Node]:
        """The containers that ask for GPUs (all of them when none does)."""
        items, path, fresh = self.get(self.spec(), "containers", list)
        with_gpu = [
            i
            for i, c in enumerate(items)
            if ((c.get("resources") or {}).get("limits") or {}).get(api.GPU_RESOURCE)
            not in (None, "0", 0)
        ] or range(len(items))
        created = self._created
        return [(items[i], f"{path}/{i}", fresh or id(items[i]) in created) for i in with_gpu]

    @staticmethod
    def has_env(container: Node, name: str) -> bool:
        for e in container[0].get("env") or ():  # noqa: SIM110 (a loop: no generator per call)
            if e.get("name") == name:
                return True
        return False

    def set_env(self, container: Node, pairs: Sequence[tuple[str, str]]) -> None:
        """Add each (name, value) the container does not set itself (its own value wins)."""
        env = self.get(container, "env", list)
        have = {n for e in env[0] if isinstance(n := e.get("name"), str)}  # any type may come
        for name, value in pairs:
            if name not in have:
                self.append(env, {"name": name, "value": value})

    def annotate(self, key: str, value: str) -> None:
        """Set an annotation unless the pod has it already (then the pod's own value stays)."""
        meta = self.get(self.root, "metadata", dict)
        annotations = self.get(meta, "annotations", dict)
        if key not in annotations[0]:
            annotations[0][key] = value
            if not annotations[2]:
                self.ops.append(
                    {"op": "add", "path": f"{annotations[1]}/{_escape(key)}", "value": value}
                )

    def _own(self, value: dict[str, Any]) -> dict[str, Any]:
        """A constant value (the plan's, cufile's) as it goes into the pod: itself in place, else
        a copy of its own (a pod that outlives the review may be edited or dumped later)."""
        return value if self.shared else copy.deepcopy(value)

    def add_volume(self, volume: dict[str, Any]) -> None:
        volumes = self.get(self.spec(), "volumes", list)
        name = volume["name"]
        for v in volumes[0]:
            if v.get("name") == name:
                return
        self.append(volumes, self._own(volume))

    def add_mount(self, container: Node, mount: dict[str, Any]) -> None:
        mounts = self.get(container, "volumeMounts", list)
        name, where = mount["name"], mount["mountPath"]
        for m in mounts[0]:
            if m.get("name") == name or m.get("mountPath") == where:
                return
        self.append(mounts, self._own(mount))
