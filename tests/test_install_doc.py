"""docs/install.md, run as written: the shell blocks a user copies build, push and install what the
repository holds. There is no cluster or registry here, so `docker` only records its arguments and
`kubectl apply -k DIR` renders DIR with kustomize instead of sending it; every other line runs
verbatim in a copy of the repository's daemonset/."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from common import api
from tests.manifests import K8S_VERSION, find, ingress_allows, kustomize, render
from tests.test_host_mounts import pod_templates
from webhook.fabric.levels import NETWORK_LABELS

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "install.md").read_text()
BLOCKS = re.findall(r"```bash\n(.*?)```", DOC, re.S)
SHIMS = """set -euo pipefail
docker() { echo "$*" >> "$DOCKER_LOG"; }
kubectl() {
  if [ "$1" = apply ] && [ "$2" = -k ]; then command kubectl kustomize "$3" > "$APPLIED";
  else command kubectl "$@"; fi
}
"""


def block(starts: str, containing: str = "") -> str:
    found = [b for b in BLOCKS if b.startswith(starts) and containing in b]
    assert len(found) == 1, (starts, containing, len(found))
    return found[0]


def run_doc(tmp: Path, *blocks: str) -> tuple[tuple[dict[str, Any], ...], list[list[str]]]:
    shutil.copytree(ROOT / "daemonset", tmp / "daemonset")
    script = SHIMS + "\n".join(blocks)
    env = {"PATH": "/usr/bin:/bin", "DOCKER_LOG": str(tmp / "docker.log")}
    env["APPLIED"] = str(tmp / "applied.yaml")
    out = subprocess.run(
        ["bash", "-c", script], cwd=tmp, env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    docs = tuple(d for d in yaml.safe_load_all((tmp / "applied.yaml").read_text()) if d)
    calls = [shlex.split(line) for line in (tmp / "docker.log").read_text().splitlines()]
    return docs, calls


def images(docs: tuple[dict[str, Any], ...]) -> set[str]:
    return {
        c["image"]
        for _, pod in pod_templates(docs)
        for c in pod.get("initContainers", []) + pod["containers"]
    }


def test_build_push_and_apply_install_the_images_that_were_pushed(tmp_path: Path) -> None:
    build = block("REGISTRY=")
    docs, calls = run_doc(tmp_path, build, block("mkdir -p my-gpufabric"))
    built = {c[c.index("-t") + 1] for c in calls if c[0] == "build"}
    pushed = {c[1] for c in calls if c[0] == "push"}
    for c in calls:
        if c[0] == "build":
            assert (ROOT / c[c.index("-f") + 1]).is_file() and c[-1] == "."
    assert (
        built
        == pushed
        == images(docs)
        == {
            "registry.example.com/gpufabric/gpufabric-agent:0.1.0",
            "registry.example.com/gpufabric/gpufabric-webhook:0.1.0",
        }
    )
    for doc in docs:
        with contextlib.suppress(kubernetes_validate.SchemaNotFoundError):  # cert-manager kinds
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    args = find(docs, "Deployment", "gpufabric-webhook")["spec"]["template"]["spec"]["containers"][
        0
    ]["args"]
    assert "--cufile-configmap=gpufabric-cufile-policy" in args
    assert "--inject-nccl-tuning" in args
    # The review file is exactly what apply sends.
    assert kustomize(tmp_path / "my-gpufabric") == docs
    reviewed = (tmp_path / "my-gpufabric.yaml").read_text()
    assert tuple(d for d in yaml.safe_load_all(reviewed) if d) == docs


def test_the_network_policy_example_narrows_admission_to_the_range_given(tmp_path: Path) -> None:
    docs, _ = run_doc(
        tmp_path,
        block("REGISTRY="),
        block("mkdir -p my-gpufabric"),
        block("cat > my-gpufabric/kustomization.yaml", "network-policy"),
    )
    policy = find(docs, "NetworkPolicy", "gpufabric-webhook")
    assert ingress_allows(policy, "172.16.0.5", 8443, labels=False)
    assert not ingress_allows(policy, "10.0.0.1", 8443, labels=False)
    prometheus = policy["spec"]["ingress"][1]["from"][0]["namespaceSelector"]["matchLabels"]
    assert prometheus == {"kubernetes.io/metadata.name": "observability"}
    assert images(docs) == {
        "registry.example.com/gpufabric/gpufabric-agent:0.1.0",
        "registry.example.com/gpufabric/gpufabric-webhook:0.1.0",
    }


def test_another_namespace_example_leaves_no_gpufabric_system_behind(tmp_path: Path) -> None:
    docs, _ = run_doc(
        tmp_path,
        block("REGISTRY="),
        block("mkdir -p my-gpufabric"),
        block("cat > my-gpufabric/kustomization.yaml", "namespace: gpu-ops"),
    )
    for d in docs:
        assert "gpufabric-system" not in yaml.safe_dump(d), (d["kind"], d["metadata"]["name"])
    cert = find(docs, "Certificate", "gpufabric-webhook")
    assert cert["metadata"]["namespace"] == "gpu-ops"
    assert cert["spec"]["dnsNames"] == [
        "gpufabric-webhook.gpu-ops.svc",
        "gpufabric-webhook.gpu-ops.svc.cluster.local",
    ]
    hook = find(docs, "MutatingWebhookConfiguration", "gpufabric-webhook")
    assert hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        "gpu-ops/gpufabric-webhook"
    )
    assert hook["webhooks"][0]["clientConfig"]["service"]["namespace"] == "gpu-ops"


def test_verify_commands_name_objects_and_flags_that_exist() -> None:
    from agent.config import build_parser

    verify = block("kubectl -n gpufabric-system wait")
    base = render()
    for kind, short in (("Job", "job"), ("Deployment", "deploy"), ("DaemonSet", "ds")):
        for name in re.findall(rf"\b{short}/([\w-]+)", verify):
            assert find(base, kind, name)["metadata"]["namespace"] == "gpufabric-system"
    # The bootstrap Job is named per release: the doc waits for it by label.
    selector = re.search(r"\bjob -l (\S+)=(\S+)", verify)
    assert selector, "the verify step waits for the bootstrap Job"
    (job,) = [d for d in base if d["kind"] == "Job"]
    assert job["metadata"]["labels"][selector.group(1)] == selector.group(2)
    # Every namespace a sample lives in is created before the sample is sent.
    for m in re.finditer(r"-f (samples/\S+)", verify):
        namespace = yaml.safe_load((ROOT / m.group(1)).read_text())["metadata"]["namespace"]
        assert f"kubectl create namespace {namespace} " in verify[: m.start()], namespace
    shown = re.search(r"get nodes -L (\S+)", verify)
    assert shown and set(shown.group(1).split(",")) <= set(api.ALL_LABELS)
    assert (ROOT / re.search(r"-f (\w\S+)", verify).group(1)).is_file()  # type: ignore[union-attr]
    assert find(render("cert-manager"), "Certificate", "gpufabric-webhook")
    inside = block("NODE=")
    ds = find(base, "DaemonSet", "gpufabric-agent")
    selector = re.search(r"-l (\S+)", inside).group(1)  # type: ignore[union-attr]
    key, value = selector.split("=")
    assert ds["spec"]["template"]["metadata"]["labels"][key] == value
    assert "--host-root=/host" in ds["spec"]["template"]["spec"]["containers"][0]["args"]
    for line in inside.splitlines():
        if "gpufabric-agent probe" in line:
            argv = shlex.split(line.split(" -- gpufabric-agent ", 1)[1])
            assert argv[argv.index("--host-root") + 1] == "/host"
            build_parser().parse_args(argv)


def test_uninstall_removes_every_label_the_labeler_writes() -> None:
    uninstall = block("kubectl delete mutatingwebhookconfiguration").replace("\\\n", " ")
    command = next(line for line in uninstall.splitlines() if "label nodes" in line)
    removed = {w.removesuffix("-") for w in shlex.split(command) if w.startswith("gpufabric.io/")}
    assert removed == set(api.ALL_LABELS) | set(NETWORK_LABELS) | {api.LABEL_NVLINK_DOMAIN}
    assert "kubectl delete -k my-gpufabric/" in uninstall


def test_install_doc_names_only_components_that_exist() -> None:
    named = set(re.findall(r"daemonset/components/([\w-]+)", DOC))
    named |= set(re.findall(r"^\| `([\w-]+)` \|", DOC, re.M))
    assert named == {p.name for p in (ROOT / "daemonset" / "components").iterdir()}
    assert "overlays" not in DOC


def nvml_variants() -> list[list[dict[str, Any]]]:
    """The section's patches as a user combines them: without NVML; privileged with the host's
    NVML; that plus the driver container's root."""
    section = DOC[DOC.index("### NVML without") : DOC.index("### VMs")]
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.S)]
    assert len(blocks) == 3
    driver = [*blocks[1], *blocks[2]]
    preload = "/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
    assert preload in section
    driver = [
        {**op, "value": {"name": "LD_PRELOAD", "value": preload}}
        if op["path"].endswith("/env/-")
        else op
        for op in driver
    ]
    return [blocks[0], blocks[1], driver]


def test_the_nvml_patches_apply_and_still_write_nothing_on_the_host(tmp_path: Path) -> None:
    from tests.test_host_mounts import MUST_EXIST

    shutil.copytree(ROOT / "daemonset", tmp_path / "daemonset")
    for i, ops in enumerate(nvml_variants()):
        mine = tmp_path / f"mine{i}"
        mine.mkdir()
        (mine / "kustomization.yaml").write_text(
            yaml.safe_dump(
                {
                    "resources": ["../daemonset/base"],
                    "patches": [
                        {
                            "target": {"kind": "DaemonSet", "name": "gpufabric-agent"},
                            "patch": yaml.safe_dump(ops),
                        }
                    ],
                }
            )
        )
        ds = find(kustomize(mine), "DaemonSet", "gpufabric-agent")
        kubernetes_validate.validate(ds, K8S_VERSION, strict=True)
        pod = ds["spec"]["template"]["spec"]
        agent = pod["containers"][0]
        assert "runtimeClassName" not in pod
        host = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
        # A device node as a hostPath opens nowhere but in a privileged container: none is offered.
        assert all(h["type"] in MUST_EXIST - {"CharDevice"} for h in host.values())
        mounts = {m["mountPath"]: m for m in agent["volumeMounts"]}
        for m in mounts.values():
            if m["name"] in host:
                assert m["readOnly"] is True and m["recursiveReadOnly"] == "IfPossible", m
        env = {e["name"]: e.get("value") for e in agent["env"]}
        assert "LD_LIBRARY_PATH" not in env  # would load the host's libc into the image's Python
        sc = agent["securityContext"]
        if i == 0:
            assert "LD_PRELOAD" not in env and "privileged" not in sc
            continue
        # The API refuses privileged with allowPrivilegeEscalation false (the schema cannot say so).
        assert sc["privileged"] is True and sc["allowPrivilegeEscalation"] is True
        preload = Path(env["LD_PRELOAD"])
        assert preload.name == "libnvidia-ml.so.1"
        assert any(preload.is_relative_to(m) and mounts[m]["readOnly"] for m in mounts), preload
    assert host["driver"] == {"path": "/run/nvidia/driver", "type": "Directory"}


def test_what_the_install_doc_creates_in_the_checkout_is_ignored_by_git() -> None:
    import fnmatch

    ignored = [
        line.rstrip("/")
        for line in (ROOT / ".gitignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    made = set(re.findall(r"mkdir -p (\S+)", DOC)) | set(re.findall(r"> ([\w.-]+\.yaml)\b", DOC))
    assert {"my-gpufabric", "my-gpufabric.yaml"} <= made
    for path in made:
        top = path.split("/")[0]
        assert any(fnmatch.fnmatch(top, pattern) for pattern in ignored), path


def test_uninstall_releases_gated_group_pods_and_only_our_gate(tmp_path: Path) -> None:
    from webhook.groups.model.names import GATE, LABEL_GROUP

    release = block("kubectl get pods -A -l gpufabric.io/group")
    log = tmp_path / "patches"
    shim = f"""set -euo pipefail
kubectl() {{
  if [ "$1" = get ]; then
    [[ "$*" == *"-l {LABEL_GROUP} "* ]] || exit 9
    printf 'team-a llama-0\\nteam-b llama-1\\n'
  else printf '%q ' "$@" >> {log}; echo >> {log}; fi
}}
"""
    subprocess.run(["bash", "-c", shim + release], check=True)
    calls = log.read_text().splitlines()
    assert [c.split(" patch pod ")[0] for c in calls] == ["-n team-a", "-n team-b"]
    for call in calls:
        argv = shlex.split(call)
        assert "--type" not in call  # kubectl's default for patch: strategic merge
        patch = json.loads(argv[argv.index("-p") + 1])
        assert patch == {"spec": {"schedulingGates": [{"name": GATE, "$patch": "delete"}]}}
