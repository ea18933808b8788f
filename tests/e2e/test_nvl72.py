"""NVL72 groups as installed: each tray's NVLink domain comes from its status's gpus[].fabric (as
the agent writes it) or, without one, from the node's nvidia.com/gpu.clique label; a group that one
NVLink domain holds is placed in one (level `nvlink-domain`, the placer's `In` on that label)."""

from __future__ import annotations

from tests import nvl72
from tests.e2e import pods
from tests.e2e.env import Env
from tests.e2e.fleet import Fleet
from tests.e2e.groupcheck import check_group

TRAYS = 4  # trays per rack here (a real NVL72 rack has 18): one group of 4 fills a rack


def test_nvl72_groups_each_in_one_nvlink_domain(cluster_env: Env, fleet: Fleet, ns: str) -> None:
    racks: dict[int, list[str]] = {}
    for rack in (0, 1):
        for tray in range(TRAYS):
            name = f"{fleet.prefix}-{nvl72.tray_name(rack, tray)}"
            if rack == 0:  # the fabric manager has formed the domain: the status says it
                status = nvl72.tray_status(rack, tray)["status"]
                labels = {}
            else:  # no fabric in the status (yet): the GPU Operator's clique label says it
                status = nvl72.tray_status(rack, tray, cliques=(None,) * nvl72.GPUS)["status"]
                labels = {"nvidia.com/gpu.clique": nvl72.domain(rack)}
            fleet.add_node(name, nvl72.GPUS, status, labels)
            racks.setdefault(rack, []).append(name)

    def domains() -> dict[int, set[str | None]] | None:
        found = {
            r: {fleet.labels(n).get("gpufabric.io/nvlink-domain") for n in names}
            for r, names in racks.items()
        }
        return found if all(len(v) == 1 and None not in v for v in found.values()) else None

    found = pods.wait_for(domains, 60, "one nvlink-domain label per rack on every tray")
    assert found[0] != found[1], f"two racks, one domain: {found}"
    layout = {next(iter(found[r])): names for r, names in racks.items()}

    for group in ("ring-a", "ring-b"):
        pods.create(
            cluster_env.core,
            ns,
            (
                pods.pod(f"{group}-{i}", nvl72.GPUS, pods.group_annotations(group, TRAYS))
                for i in range(TRAYS)
            ),
        )
    for group in ("ring-a", "ring-b"):
        bound = pods.wait_bound(cluster_env.core, ns, TRAYS, selector=f"gpufabric.io/group={group}")
        check_group(cluster_env.core, bound, group, TRAYS, "nvlink-domain", layout)
