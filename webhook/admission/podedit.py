"""A writable copy of a pod and the JSONPatch that turns the original into it, built together.

The mutation only adds: keys to objects and items at the end of lists. `PodEdit` copies just the
dicts and lists on the paths it may write (metadata.annotations, spec, the node affinity down to
each term's matchExpressions, containers with their env and volumeMounts, volumes); the rest is
shared with the original, which is never changed. Each edit records one JSONPatch "add", except
inside an object the edit itself created: that object's own op carries it (ops hold the live
objects and are serialized after the last edit), and inside a term's matchExpressions: one "add" of
the whole list as it ends up carries them all. So no diff of the whole pod is needed;
tests/webhook/patch_oracle.py computes an equivalent patch from the outside, and the property
tests hold the two together. In place (the server's review, whose pod is dropped after its ops are
sent) nothing is copied, and the plan's constant expressions go into the pod as they are.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from common import api
from webhook.kube.nodeselector import PREFERRED, REQUIRED

Expr = dict[str, Any]  # a NodeSelectorRequirement
Slot = tuple[Any, bool]  # (dict or list in the new pod, created by this edit or inside such)
Container = tuple[dict[str, Any], str]  # (one of the pod's containers, its JSON pointer)


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


@functools.lru_cache(maxsize=64)  # the few annotation keys the webhook writes
def _escape(key: str) -> str:
    if "~" in key or "/" in key:
        return key.replace("~", "~0").replace("/", "~1")
    return key


# The objects the edit reaches are at fixed places, so their JSON pointers are constants.
_SPEC = "/spec"
_AFFINITY = "/spec/affinity"
_NODE_AFFINITY = "/spec/affinity/nodeAffinity"
_REQUIRED = f"{_NODE_AFFINITY}/{REQUIRED}"
_TERMS = f"{_REQUIRED}/nodeSelectorTerms"
_PREFERRED = f"{_NODE_AFFINITY}/{PREFERRED}"
_CONTAINERS = "/spec/containers"
_VOLUMES = "/spec/volumes"
_METADATA = "/metadata"
_ANNOTATIONS = "/metadata/annotations"


class PodEdit:
    """Edits that only add, each recorded as one JSONPatch "add".

    The pod has passed review.pod_problems (every caller holds its Requirements): each field the
    edit reaches is absent or of its Kubernetes type, so it is read without type guards.
    """

    __slots__ = (
        "_annotations",
        "_created",
        "_names",
        "_node_affinity",
        "_spec",
        "ops",
        "pod",
        "shared",
    )

    def __init__(self, pod: Mapping[str, Any], in_place: bool = False) -> None:
        # in_place: the caller owns the pod and needs only the ops (the server, whose pod was
        # just decoded from the request body): edit it directly instead of copying the paths,
        # and let constant values (the plan's expressions) go in without a copy of their own,
        # since the pod is serialised as ops and dropped, never edited or dumped again.
        self.pod = pod if in_place and isinstance(pod, dict) else _writable(pod)
        self.shared = in_place
        self.ops: list[dict[str, Any]] = []
        # Objects this edit created (alive in self.pod, so their ids stay unique): an edit that
        # reaches one again must not record an op its creator's op carries.
        self._created: set[int] = set()
        self._spec: Slot | None = None
        self._node_affinity: Slot | None = None
        self._annotations: Slot | None = None
        self._names: dict[str, set[Any]] = {}  # env names by container pointer

    def _member(self, at: Slot, path: str, key: str, kind: type[Any]) -> Slot:
        """The member `key` of the object at `at`, whose pointer is `path`, created empty (of
        `kind`) when absent: (the value, whether this edit created it or an object above it)."""
        obj, fresh = at
        value = obj.get(key)
        if value is not None:
            created = self._created  # usually empty: the pod had every object the edit reaches
            return value, fresh or (bool(created) and id(value) in created)
        value = obj[key] = kind()
        self._created.add(id(value))
        if not fresh:
            self.ops.append({"op": "add", "path": f"{path}/{key}", "value": value})
        return value, True

    def _append(self, at: Slot, path: str, item: Any) -> None:
        """Add item at the end of the list at `at`, whose pointer is `path`."""
        items, fresh = at
        items.append(item)
        if not fresh:
            self.ops.append({"op": "add", "path": f"{path}/{len(items) - 1}", "value": item})

    def spec(self) -> Slot:
        if self._spec is None:
            self._spec = self._member((self.pod, False), "", "spec", dict)
        return self._spec

    def node_affinity(self) -> Slot:
        if self._node_affinity is None:
            affinity = self._member(self.spec(), _SPEC, "affinity", dict)
            self._node_affinity = self._member(affinity, _AFFINITY, "nodeAffinity", dict)
        return self._node_affinity

    def add_required(self, exprs: Sequence[Expr]) -> None:
        """ANDed into every existing nodeSelectorTerm (a new term would loosen the pod). The
        exprs are distinct (a plan's: one per label), so each is looked for among the term's own
        expressions only."""
        required = self._member(self.node_affinity(), _NODE_AFFINITY, REQUIRED, dict)
        terms, fresh = self._member(required, _REQUIRED, "nodeSelectorTerms", list)
        if not terms:  # the term this edit adds is its own: its op carries what goes in
            self._append((terms, fresh), _TERMS, {"matchExpressions": []})
            fresh = True
        shared, created = self.shared, self._created
        for i, term in enumerate(terms):
            have = term.get("matchExpressions")
            at_fresh = fresh
            if have is None or created:  # an object to create, or one this edit made
                slot = (term, fresh or id(term) in created)
                have, at_fresh = self._member(slot, f"{_TERMS}/{i}", "matchExpressions", list)
            new = [e for e in exprs if e not in have]
            if not new:
                continue
            have.extend(new if shared else copy.deepcopy(new))  # see _own
            if not at_fresh:
                # One op for the term: its list as it ends up (an "add" of a member the term
                # has replaces it), where one op per expression cost 5 ops for the usual term.
                path = f"{_TERMS}/{i}/matchExpressions"
                self.ops.append({"op": "add", "path": path, "value": have})

    def add_preferred(self, terms: Sequence[dict[str, Any]]) -> None:
        """Weighted preferred terms ({weight, preference: {matchExpressions}}), each unless the
        pod has it already."""
        prefs, fresh = self._member(self.node_affinity(), _NODE_AFFINITY, PREFERRED, list)
        for term in terms:
            if term not in prefs:
                item = self._own(term)
                prefs.append(item)
                if not fresh:
                    path = f"{_PREFERRED}/{len(prefs) - 1}"
                    self.ops.append({"op": "add", "path": path, "value": item})

    def gpu_containers(self) -> list[Container]:
        """The containers that ask for GPUs (all of them when none does)."""
        items, _ = self._member(self.spec(), _SPEC, "containers", list)
        # A container is the pod's own (an edit adds none), so never one this edit created.
        found = []
        for i, c in enumerate(items):  # a loop: resources and limits are usually there
            limits = (c.get("resources") or {}).get("limits")
            if limits is not None and limits.get(api.GPU_RESOURCE) not in (None, "0", 0):
                found.append((c, f"{_CONTAINERS}/{i}"))
        return found or [(c, f"{_CONTAINERS}/{i}") for i, c in enumerate(items)]

    def containers(self) -> list[Container]:
        """Every container of the pod."""
        items, _ = self._member(self.spec(), _SPEC, "containers", list)
        return [(c, f"{_CONTAINERS}/{i}") for i, c in enumerate(items)]

    def add_env(self, container: Container, items: Sequence[dict[str, Any]]) -> None:
        """Add each env item (a value or a valueFrom) whose name the container does not set."""
        c, path = container
        have = self._env_names(container)
        env, fresh = self._member((c, False), path, "env", list)
        for item in items:
            if item["name"] not in have:
                have.add(item["name"])
                self._append((env, fresh), f"{path}/env", self._own(item))

    def _env_names(self, container: Container) -> set[Any]:
        """The names a container's env sets, read once per edit (set_env adds its own)."""
        c, path = container
        names = self._names.get(path)
        if names is None:
            env = c.get("env")
            if not env:  # none: no comprehension (a function call of its own) to build nothing
                names = set()
            else:
                try:  # a name of another type never equals one of ours, and costs nothing here
                    names = {e.get("name") for e in env}
                except TypeError:  # but one that cannot be hashed (only a fuzzed review has it)
                    names = {n for e in env if isinstance(n := e.get("name"), str)}
            self._names[path] = names
        return names

    def lacks_env(self, containers: Sequence[Container], name: str) -> bool:
        """Whether one of the containers does not set `name` itself."""
        for c in containers:  # noqa: SIM110 (a loop: no generator per call)
            if name not in self._env_names(c):
                return True
        return False

    def set_env(self, container: Container, pairs: Sequence[tuple[str, str]]) -> None:
        """Add each (name, value) the container does not set itself (its own value wins)."""
        c, path = container
        have = self._env_names(container)
        env, fresh = self._member((c, False), path, "env", list)
        for name, value in pairs:
            if name not in have:
                have.add(name)
                item = {"name": name, "value": value}
                env.append(item)
                if not fresh:
                    self.ops.append(
                        {"op": "add", "path": f"{path}/env/{len(env) - 1}", "value": item}
                    )

    def annotate(self, key: str, value: str) -> None:
        """Set an annotation unless the pod has it already (then the pod's own value stays)."""
        if self._annotations is None:
            meta = self._member((self.pod, False), "", "metadata", dict)
            self._annotations = self._member(meta, _METADATA, "annotations", dict)
        annotations, fresh = self._annotations
        if key not in annotations:
            annotations[key] = value
            if not fresh:
                path = f"{_ANNOTATIONS}/{_escape(key)}"
                self.ops.append({"op": "add", "path": path, "value": value})

    def _own(self, value: dict[str, Any]) -> dict[str, Any]:
        """A constant value (the plan's, cufile's) as it goes into the pod: itself in place, else
        a copy of its own (a pod that outlives the review may be edited or dumped later)."""
        return value if self.shared else copy.deepcopy(value)

    def add_volume(self, volume: dict[str, Any]) -> None:
        volumes = self._member(self.spec(), _SPEC, "volumes", list)
        name = volume["name"]
        for v in volumes[0]:
            if v.get("name") == name:
                return
        self._append(volumes, _VOLUMES, self._own(volume))

    def add_mount(self, container: Container, mount: dict[str, Any]) -> None:
        c, path = container
        mounts = self._member((c, False), path, "volumeMounts", list)
        name, where = mount["name"], mount["mountPath"]
        for m in mounts[0]:
            if m.get("name") == name or m.get("mountPath") == where:
                return
        self._append(mounts, f"{path}/volumeMounts", self._own(mount))
