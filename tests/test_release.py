"""Images, first install and upgrade, from the rendered manifests: every container runs this
release's image, pulled only when absent; applying the next release never meets the old bootstrap
Job's immutable pod template; the webhook pod starts before its certificate exists and is out of
the Service until it serves; the images build for arm64 (Grace: GH200, GB200) as well as x86_64."""

from __future__ import annotations

import re
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.manifests import DAEMONSET, INSTALLS, ROOT, find, kustomize, render
from tests.test_host_mounts import pod_templates

VERSION: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
IMAGES = {"gpufabric-agent", "gpufabric-webhook"}


def containers(docs: tuple[dict[str, Any], ...]) -> Iterator[dict[str, Any]]:
    for _, pod in pod_templates(docs):
        yield from pod.get("initContainers", []) + pod["containers"]


@pytest.mark.parametrize("components", INSTALLS, ids=lambda c: "+".join(c) or "default")
def test_every_container_runs_this_release_pulled_only_when_absent(
    components: tuple[str, ...],
) -> None:
    seen = set()
    for c in containers(render(*components)):
        name, _, tag = c["image"].partition(":")
        assert name in IMAGES and tag == VERSION, c["image"]
        # A bare name means :latest and pull Always: every pod start would hit the registry.
        assert c["imagePullPolicy"] == "IfNotPresent", c["name"]
        seen.add(name)
    assert seen == IMAGES


def jobs(docs: tuple[dict[str, Any], ...]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "Job"}


def refused_by_apply(
    installed: tuple[dict[str, Any], ...], applied: tuple[dict[str, Any], ...]
) -> list[str]:
    """What `kubectl apply` of APPLIED over INSTALLED refuses: a Job of the same name whose pod
    template differs (spec.template is immutable; the old Job lives for its TTL after finishing)."""
    old = jobs(installed)
    return [
        name
        for name, job in jobs(applied).items()
        if name in old and old[name]["spec"]["template"] != job["spec"]["template"]
    ]


def test_the_next_release_applies_over_this_one(tmp_path: Path) -> None:
    # The next release: this tree with the version bumped wherever the manifests carry it.
    nxt = "0.99.0" if VERSION != "0.99.0" else "0.98.0"
    shutil.copytree(DAEMONSET, tmp_path / "daemonset")
    for f in (tmp_path / "daemonset").rglob("*.yaml"):
        text = f.read_text()
        text = text.replace(VERSION, nxt).replace(
            "v" + VERSION.replace(".", "-"), "v" + nxt.replace(".", "-")
        )
        f.write_text(text)
    now, later = render(), kustomize(tmp_path / "daemonset")
    (job,) = jobs(now).values()
    assert {c["image"].partition(":")[2] for c in containers(later)} == {nxt}
    assert refused_by_apply(now, later) == []
    # The Job's name follows the version its pod runs, so a bump cannot forget it.
    tag = job["spec"]["template"]["spec"]["containers"][0]["image"].partition(":")[2]
    assert job["metadata"]["name"] == "gpufabric-certs-bootstrap-v" + tag.replace(".", "-")
    # Found by label in docs/install.md and by the cert-manager component, whatever its name.
    assert job["metadata"]["labels"]["app.kubernetes.io/name"] == "gpufabric-certs-bootstrap"
    assert "Job" not in {d["kind"] for d in render("cert-manager")}
    # Re-applying the same release changes nothing.
    assert refused_by_apply(now, now) == []


@pytest.mark.parametrize("components", INSTALLS, ids=lambda c: "+".join(c) or "default")
def test_the_webhook_starts_before_its_certificate_and_stays_unready_until_it_serves(
    components: tuple[str, ...],
) -> None:
    docs = render(*components)
    pod = find(docs, "Deployment", "gpufabric-webhook")["spec"]["template"]["spec"]
    c = pod["containers"][0]
    cert = Path(next(a.split("=", 1)[1] for a in c["args"] if a.startswith("--tls-cert=")))
    (mount,) = [m for m in c["volumeMounts"] if cert.is_relative_to(m["mountPath"])]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    # Without optional the kubelet holds the pod in ContainerCreating until the Secret exists;
    # with it the pod starts, and the kubelet fills the volume once the bootstrap Job (or
    # cert-manager) has written the Secret.
    assert volume["secret"] == {"secretName": "gpufabric-webhook-tls", "optional": True}
    ready, live = c["readinessProbe"]["httpGet"], c["livenessProbe"]["httpGet"]
    assert (ready["path"], ready["port"]) == ("/readyz", "metrics")
    assert (live["path"], live["port"]) == ("/healthz", "metrics")
    service = find(docs, "Service", "gpufabric-webhook")["spec"]
    assert not service.get("publishNotReadyAddresses")  # the API server reaches ready pods only


def test_the_images_build_for_arm64_too() -> None:
    for name in ("agent.Dockerfile", "webhook.Dockerfile"):
        text = (ROOT / "docker" / name).read_text()
        # Official multi-arch bases, never pinned to one platform; no architecture in any path.
        assert set(re.findall(r"^FROM (\S+)", text, re.M)) == {"python:3.11-slim"}, name
        assert not re.search(r"x86_64|amd64|aarch64|arm64|i386|--platform", text), name
    doc = (ROOT / "docs" / "install.md").read_text()
    assert f"TAG={VERSION}\n" in doc
    multi = re.findall(r"^docker buildx build (.*)$", doc, re.M)
    assert len(multi) == 2
    for line in multi:
        assert "--platform linux/amd64,linux/arm64" in line and "--push" in line
    built = {re.search(r'-t "(\S+)"', line).group(1) for line in multi}  # type: ignore[union-attr]
    assert built == {"$REGISTRY/gpufabric-agent:$TAG", "$REGISTRY/gpufabric-webhook:$TAG"}
    # Nothing in the manifests keeps arm64 nodes away from the agent.
    ds = find(render(), "DaemonSet", "gpufabric-agent")["spec"]["template"]["spec"]
    assert "kubernetes.io/arch" not in str(ds.get("nodeSelector", {})) + str(ds.get("affinity", {}))


def test_the_licence_pyproject_names_is_shipped() -> None:
    import hashlib

    assert (
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    )
    text = (ROOT / "LICENSE").read_bytes()
    # The text as apache.org publishes it (LICENSE-2.0.txt), byte for byte.
    assert hashlib.md5(text).hexdigest() == "3b83ef96387f14655fc854ddc3c6bd57"  # noqa: S324
