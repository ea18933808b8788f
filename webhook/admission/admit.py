"""review -> requirements -> cache -> patch: the admission decision, wired from the pure steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from webhook.admission import review as rv
from webhook.admission.placement import Settings, mutate
from webhook.admission.requirements import Invalid, requirements
from webhook.admission.review import annotations_of, asks_fabric
from webhook.fleet.cache import FabricCache
from webhook.groups.admission.admit import admit_group
from webhook.groups.decision.capacity import pod_gpus
from webhook.groups.extensions.imex.inject import admit_imex
from webhook.groups.model.names import ANN_GROUP

Outcome = Literal["mutated", "untouched", "denied", "warned", "error"]


@dataclass(frozen=True, slots=True)
class Answer:
    response: rv.Response
    outcome: Outcome


def admit(
    request: rv.Request, cache: FabricCache, settings: Settings, owned: bool = False
) -> Answer:
    """`owned`: the caller hands over the request (freshly decoded, read by no one after), so the
    pod is edited in place rather than copied; the answer is the same."""
    uid = request["uid"]
    pod: dict[str, Any] = request["object"]
    annotations = annotations_of(pod)
    namespace = (
        request.get("namespace") or (pod.get("metadata") or {}).get("namespace") or "default"
    )
    if request["operation"] not in ("CREATE", "UPDATE") or not asks_fabric(annotations):
        # a pod of a user's ComputeDomain outside any group: kept in one NVLink domain
        lone = admit_imex(pod, request["operation"], namespace, None, settings.imex).ops
        return Answer(rv.allowed(uid, lone or None, []), "mutated" if lone else "untouched")
    if not cache.synced:
        return Answer(
            rv.denied(
                uid,
                "gpufabric webhook is starting and its caches are not synced yet; "
                "retry in a few seconds",
                503,
            ),
            "denied",
        )
    grouped = annotations.get(ANN_GROUP) is not None  # only a group uses the GPU count
    group = admit_group(
        pod,
        request["operation"],
        settings.largest_spine_gpus,
        pod_gpus(pod["spec"] if isinstance(pod.get("spec"), dict) else {}) if grouped else 0,
        settings.placer,
        settings.native_gang() if settings.native_gang is not None else False,
    )
    if group.retry:
        return Answer(rv.denied(uid, group.retry, 503), "denied")
    try:
        req = requirements(pod, namespace, cache.claim)
    except Invalid as err:
        problems = "; ".join([str(err), *group.problems])
        return Answer(rv.denied(uid, f"gpufabric: {problems}"), "denied")
    if group.problems:
        return Answer(rv.denied(uid, f"gpufabric: {'; '.join(group.problems)}"), "denied")
    fleet, own = cache.scope_for(pod)  # the pod's own constraints, read once
    decision = mutate(pod, req, fleet, settings, in_place=owned, group_env=group.env, own=own)
    # After mutate's ops, against the pod they make: claims, or a lone pod's label and affinity.
    imex = admit_imex(decision.pod, request["operation"], namespace, group.spec, settings.imex)
    if imex.problems:
        return Answer(rv.denied(uid, f"gpufabric: {'; '.join(imex.problems)}"), "denied")
    # Disjoint paths: gate and label vs the rest (most pods have no group: nothing to join).
    ops = decision.ops + group.ops if group.ops else decision.ops
    warnings = decision.warnings + group.warnings if group.warnings else decision.warnings
    if imex.ops or imex.warnings:
        ops, warnings = ops + imex.ops, warnings + imex.warnings
    outcome: Outcome = "warned" if warnings else "mutated" if ops else "untouched"
    return Answer(rv.allowed(uid, ops, warnings), outcome)
