"""Condition `Exported` travels in the GpuFabric body the labeler already publishes, beside
SourceValid; republished only when it changes, its lastTransitionTime only moving with its status."""

from __future__ import annotations

from webhook.fabric.controller import FabricController

CONF = "SwitchName=s0 Nodes=a[1-2]\n"


def _conditions(body: dict[str, object] | None) -> dict[str, dict[str, str]]:
    assert body is not None
    status = body["status"]
    assert isinstance(status, dict)
    return {c["type"]: c for c in status["conditions"]}


def test_exported_condition_rides_on_the_gpufabric_body() -> None:
    times = iter(["t1", "t2", "t3"])
    c = FabricController(now=lambda: next(times))
    c.configmap({"topology.conf": CONF})
    c.refresh()
    assert c.refresh() == (False, None)
    down = {"status": "False", "reason": "APINotServed", "message": "the cluster does not serve X"}
    c.set_condition("Exported", down)
    changed, body = c.refresh()
    conds = _conditions(body)
    assert not changed and set(conds) == {"SourceValid", "Exported"}
    assert conds["Exported"] == {"type": "Exported", **down, "lastTransitionTime": "t2"}
    assert conds["SourceValid"]["status"] == "True"
    c.set_condition("Exported", down)  # the same again: nothing to publish
    assert c.refresh() == (False, None)
    c.set_condition("Exported", {**down, "message": "the cluster does not serve X, Y"})
    assert _conditions(c.refresh()[1])["Exported"]["lastTransitionTime"] == "t2"
    c.set_condition("Exported", {"status": "True", "reason": "Exported", "message": "ok"})
    assert _conditions(c.refresh()[1])["Exported"]["lastTransitionTime"] == "t3"
