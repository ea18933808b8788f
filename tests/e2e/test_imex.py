"""IMEX channels as installed, with NVIDIA's real ComputeDomain controller (issue 37): groups whose
members ask fewer GPUs than a tray has never share a tray's one channel, whether the other group
was bound before (no node label yet) or decided in the same burst; a Job deleted with Background
or Foreground propagation leaves its ComputeDomain until its last member is gone. Times are
printed (`-s`) for docs: creation to all bound (the placer ungates once the template exists)."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e import imex as lab
from tests.e2e import pods
from tests.e2e.env import Env, bring_up, tear_down
from tests.e2e.fleet import Fleet
from tests.e2e.waits import wait_until

TRAYS = 4  # trays per rack here (18 in a real NVL72 rack)
HOLD = "e2e.gpufabric.io/hold"  # keeps a member Terminating, as a slow container would
FINALIZER = "gpufabric.io/group-members"  # the placer's, on the ComputeDomains it makes


@pytest.fixture(scope="module")
def imex_env(k8s_tools: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[lab.Imex]:
    why = lab.controller_missing(k8s_tools)
    if why:
        pytest.skip(why)
    env = bring_up(k8s_tools, tmp_path_factory.mktemp("imex"))
    made: lab.Imex | None = None
    try:
        made = lab.serve_compute_domains(env, k8s_tools)
        yield made
    finally:
        if made is not None:
            env = made.env
            try:  # while NVIDIA's controller still runs: its finalizers hold ComputeDomains
                env.wait_dropped()
            finally:
                lab.stop_controller(made)
        tear_down(env)


@pytest.fixture(scope="module")
def layout(
    imex_env: lab.Imex, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, list[str]]]:
    fleet = Fleet(imex_env.env.cluster, tmp_path_factory.mktemp("imex-fleet"))
    try:
        yield lab.racks(fleet, 3, TRAYS)
    finally:
        lab.drop_slices(fleet)
        fleet.cleanup()


@pytest.fixture
def ns(imex_env: lab.Imex, request: pytest.FixtureRequest) -> Iterator[str]:
    env = imex_env.env
    name = env.new_namespace(re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-"))
    try:
        yield name
    finally:
        for p in pods.listed(env.core, name):  # our hold, if a test left one
            if HOLD in (p.metadata.finalizers or []):
                release(env.core, name, p.metadata.name)
        env.drop_namespace(name)


def members(group: str, size: int) -> list[dict[str, Any]]:
    ann = pods.group_annotations(group, size, compute_domain="required")
    return [pods.pod(f"{group}-{i}", 1, ann) for i in range(size)]


def bound_nodes(env: Env, ns: str, group: str, size: int) -> tuple[set[str], float]:
    """The nodes of the group's members once all are bound, and when that was."""
    found = pods.wait_bound(env.core, ns, size, selector=f"gpufabric.io/group={group}", timeout=90)
    return {p.spec.node_name for p in found}, time.monotonic()


def test_groups_of_one_gpu_members_never_share_a_trays_channel(
    imex_env: lab.Imex, layout: dict[str, list[str]], ns: str
) -> None:
    env = imex_env.env
    started = time.monotonic()
    pods.create(env.core, ns, members("imex1", 3))
    first, at = bound_nodes(env, ns, "imex1", 3)
    took = {"imex1": at - started}
    # race: right after imex1 bound, before any node label: 3 of imex1's rack hold a channel
    started = time.monotonic()
    pods.create(env.core, ns, members("race", 3))
    race, at = bound_nodes(env, ns, "race", 3)
    took["race"] = at - started
    # q1 and q2 in one burst: decided together, before either is bound
    started = time.monotonic()
    pods.create(env.core, ns, members("q1", 2) + members("q2", 2))
    q1, _ = bound_nodes(env, ns, "q1", 2)
    q2, at = bound_nodes(env, ns, "q2", 2)
    took["q1+q2"] = at - started
    groups = [first, race, q1, q2]
    assert sum(map(len, groups)) == len(set().union(*groups)) == 10, groups
    nodes, pending = lab.channels(env.cluster.client(), ns)
    assert pending == 0 and sorted(nodes) == sorted(set(nodes)) and len(nodes) == 10
    for group in groups:  # each group in one NVLink domain
        assert sum(1 for trays in layout.values() if group <= set(trays)) == 1, (group, layout)
    print(f"\nIMEX creation to all bound (s): { {k: round(v, 2) for k, v in took.items()} }")


def release(core: client.CoreV1Api, ns: str, name: str) -> None:
    """Our hold off the member (the kubelet stand-in has confirmed its deletion already)."""
    for _ in range(10):
        have = core.read_namespaced_pod(name, ns).metadata.finalizers or []
        ops = [
            {"op": "test", "path": "/metadata/finalizers", "value": have},
            {
                "op": "replace",
                "path": "/metadata/finalizers",
                "value": [f for f in have if f != HOLD],
            },
        ]
        try:
            core.patch_namespaced_pod(name, ns, ops, _content_type="application/json-patch+json")
            return
        except ApiException as err:
            if err.status == 404:
                return
            if err.status != 422:
                raise


@pytest.mark.parametrize("propagation", ["Background", "Foreground"])
def test_a_deleted_jobs_compute_domain_outlives_its_last_member(
    imex_env: lab.Imex, layout: dict[str, list[str]], ns: str, propagation: str
) -> None:
    env, api = imex_env.env, imex_env.env.cluster.client()
    size = 3
    pod = members("train", size)[0]
    template = {"metadata": pod["metadata"], "spec": pod["spec"]}
    template["metadata"].pop("name")
    template["metadata"]["finalizers"] = [HOLD]
    template["spec"]["restartPolicy"] = "Never"
    job = {
        "metadata": {"name": "train"},
        "spec": {
            "completions": size,
            "parallelism": size,
            "completionMode": "Indexed",
            "template": template,
        },
    }
    client.BatchV1Api(api).create_namespaced_job(ns, job)
    bound_nodes(env, ns, "train", size)
    cd = lab.compute_domain(api, ns, "train")
    assert cd is not None
    assert FINALIZER in cd["metadata"]["finalizers"]
    assert [r["kind"] for r in cd["metadata"]["ownerReferences"]] == ["Job"]
    client.BatchV1Api(api).delete_namespaced_job("train", ns, propagation_policy=propagation)
    wait_until(
        lambda: all(p.metadata.deletion_timestamp for p in pods.listed(env.core, ns)),
        30,
        "every member Terminating",
    )
    time.sleep(2)  # the garbage collector has acted on the ComputeDomain by now
    held = []
    for p in pods.listed(env.core, ns):
        held.append(lab.compute_domain(api, ns, "train") is not None)
        release(env.core, ns, p.metadata.name)
        name = p.metadata.name
        wait_until(lambda n=name: not _exists(env.core, ns, n), 30, f"member {name} gone")
    gone_at = time.monotonic()
    wait_until(lambda: lab.compute_domain(api, ns, "train") is None, 10, "ComputeDomain gone")
    after = time.monotonic() - gone_at
    assert held == [True] * size, held  # there until the last member was gone
    print(f"\n{propagation}: ComputeDomain gone {after:.2f} s after the last member")


def _exists(core: client.CoreV1Api, ns: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, ns)
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


def test_a_group_is_ungated_only_once_the_controller_made_its_template(
    imex_env: lab.Imex, layout: dict[str, list[str]], ns: str
) -> None:
    env = imex_env.env
    os.kill(imex_env.pid, signal.SIGSTOP)  # a busy controller: no template for now
    try:
        pods.create(env.core, ns, members("slow", 2))
        said = wait_until(
            lambda: [e for e in pods.events(env.core, ns, "GroupWaiting") if "ResourceClaim" in e],
            30,
            "the group saying it waits for the template",
        )
        assert (
            "waiting for NVIDIA's ComputeDomain controller to make ResourceClaimTemplate "
            in said[0]
        )
        assert all(p.spec.scheduling_gates for p in pods.listed(env.core, ns))  # still gated
    finally:
        os.kill(imex_env.pid, signal.SIGCONT)
    bound_nodes(env, ns, "slow", 2)


def test_a_driver_that_requires_num_nodes_gets_the_groups_node_count(
    imex_env: lab.Imex, layout: dict[str, list[str]], ns: str
) -> None:
    # v25.3-v25.12's CRD requires spec.numNodes; there the IMEX daemons may wait for that many
    cluster, api = imex_env.env.cluster, imex_env.env.cluster.client()
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(lab.CRD_V25))
    try:
        pods.create(imex_env.env.core, ns, members("sized", 3))
        bound_nodes(imex_env.env, ns, "sized", 3)
        cd = lab.compute_domain(api, ns, "sized")
        assert cd is not None and cd["spec"].get("numNodes") == 3, cd
    finally:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(lab.CRD_NOW))


def test_a_compute_domain_lost_while_its_group_runs_is_made_again(
    imex_env: lab.Imex, layout: dict[str, list[str]], ns: str
) -> None:
    env, api = imex_env.env, imex_env.env.cluster.client()
    pods.create(env.core, ns, members("lost", 2))
    bound_nodes(env, ns, "lost", 2)
    first = lab.compute_domain(api, ns, "lost")
    assert first is not None
    uid = first["metadata"]["uid"]
    # deleted by hand with the placer's finalizer taken off: NVIDIA's controller removes its own
    # once it has cleaned up, and the ComputeDomain is gone while its members run
    at = f"/metadata/finalizers/{first['metadata']['finalizers'].index(FINALIZER)}"
    objects = client.CustomObjectsApi(api)
    ops = [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": at, "value": FINALIZER},
        {"op": "remove", "path": at},
    ]
    kind = (*lab.CD[:2], ns, lab.CD[2], "lost")
    objects.patch_namespaced_custom_object(*kind, ops, _content_type="application/json-patch+json")
    started = time.monotonic()
    objects.delete_namespaced_custom_object(*kind)

    def made_again() -> dict[str, Any] | None:
        cd = lab.compute_domain(api, ns, "lost")
        return cd if cd is not None and cd["metadata"]["uid"] != uid else None

    again = wait_until(made_again, 15, "the lost ComputeDomain made again")
    took = time.monotonic() - started
    assert FINALIZER in again["metadata"]["finalizers"]
    assert again["spec"]["channel"] == first["spec"]["channel"]
    assert not again["metadata"].get("deletionTimestamp")
    print(f"\nlost ComputeDomain made again {took:.2f} s after its delete")
