"""The cluster cuFile policy reaches cuFile pods in every namespace, by value.

Before, the webhook mounted a configMap volume named after the policy ConfigMap, which exists only
in the install namespace: kubelet looks a configMap volume up in the pod's own namespace, so cuFile
pods anywhere else stayed in ContainerCreating. Here the patched pod is checked as kubelet would
mount it: every volume must be satisfiable without objects in the pod's namespace, and the file
CUFILE_ENV_PATH_JSON names must hold the policy.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
import yaml

from common.jsonc import loads
from tests.fakes.http import reply, start
from tests.manifests import find, render
from tests.webhook.helpers import POLICY, golden_cache, pod, review
from webhook.admission import cufile
from webhook.admission.admit import admit
from webhook.admission.placement import Settings

# Volume sources that name an object kubelet must find in the pod's namespace.
NAMESPACED_SOURCES = ("configMap", "secret", "persistentVolumeClaim")


def admitted(p: dict[str, Any], policy: str | None = POLICY) -> dict[str, Any]:
    answer = admit(review(p)["request"], golden_cache(), Settings(policy))
    assert answer.response["allowed"], answer.response
    if "patch" not in answer.response:
        return p
    ops = json.loads(base64.b64decode(answer.response["patch"]))
    patched: dict[str, Any] = jsonpatch.apply_patch(p, ops)
    return patched


def kubelet_files(p: dict[str, Any], container: str) -> dict[str, str]:
    """The files kubelet puts into one container: downwardAPI items, by absolute path."""
    volumes = {v["name"]: v for v in p["spec"].get("volumes", [])}
    files = {}
    c = next(c for c in p["spec"]["containers"] if c["name"] == container)
    for m in c.get("volumeMounts", []):
        v = volumes[m["name"]]
        for source in NAMESPACED_SOURCES:
            assert source not in v, f"volume {v['name']} needs a {source} in the pod's namespace"
        for projected in v.get("projected", {}).get("sources", []):
            assert not set(projected) & {"configMap", "secret"}, v
        for item in v.get("downwardAPI", {}).get("items", []):
            field = item["fieldRef"]["fieldPath"]
            key = re.fullmatch(r"metadata\.annotations\['([^']+)'\]", field)
            assert key, field
            files[f"{m['mountPath']}/{item['path']}"] = p["metadata"]["annotations"][key.group(1)]
    return files


@pytest.mark.parametrize("namespace", ["team-a", "ml-prod", "gpufabric-system"])
def test_cufile_pods_in_any_namespace_get_the_policy_file(namespace: str) -> None:
    p = pod({"gpufabric.io/cufile": "preferred"})
    p["metadata"]["namespace"] = namespace
    patched = admitted(p)
    kubernetes_validate.validate(patched, "1.30.0", strict=True)
    main = patched["spec"]["containers"][0]  # the GPU container; the sidecar is left alone
    env = {e["name"]: e["value"] for e in main.get("env", [])}
    text = kubelet_files(patched, main["name"])[env["CUFILE_ENV_PATH_JSON"]]
    assert text == POLICY
    assert loads(text)["properties"]["allow_compat_mode"] is True
    assert admitted(patched) == patched  # reinvocation adds nothing


def test_the_users_own_cufile_path_wins_and_pods_without_cufile_get_nothing() -> None:
    mine = {"name": "CUFILE_ENV_PATH_JSON", "value": "/etc/mine/cufile.json"}
    p = pod({"gpufabric.io/cufile": "required"})
    p["spec"]["containers"][0]["env"] = [dict(mine)]
    patched = admitted(p)
    assert patched["spec"]["containers"][0]["env"] == [mine]
    plain = admitted(pod({"gpufabric.io/rdma": "preferred"}))
    assert "volumes" not in plain["spec"]
    assert cufile.ANNOTATION not in plain["metadata"]["annotations"]
    no_policy = admitted(pod({"gpufabric.io/cufile": "required"}), policy=None)
    assert "volumes" not in no_policy["spec"]


def test_the_installed_component_fits_the_webhook() -> None:
    docs = render("cufile-policy")
    dep = find(docs, "Deployment", "gpufabric-webhook")
    namespace = dep["metadata"]["namespace"]
    (arg,) = [
        a
        for a in dep["spec"]["template"]["spec"]["containers"][0]["args"]
        if a.startswith("--cufile-configmap=")
    ]
    name = arg.split("=", 1)[1]
    cm = find(docs, "ConfigMap", name)
    assert cm["metadata"]["namespace"] == namespace
    assert cufile.from_configmap(cm, namespace, name) == cm["data"]["cufile.json"]
    role = find(docs, "Role", "gpufabric-cufile-policy")
    assert role["metadata"]["namespace"] == namespace
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [name], "verbs": ["get"]}
    ]
    binding = find(docs, "RoleBinding", "gpufabric-cufile-policy")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpufabric-webhook", "namespace": namespace}
    ]


@pytest.mark.parametrize(
    ("configmap", "message"),
    [
        (None, "ConfigMap ns/p not found"),
        ({"data": {"other": "{}"}}, "has no key 'cufile.json'"),
        ({"data": {"cufile.json": '{"properties": {'}}, "not valid cufile.json"),
        ({"data": {"cufile.json": "[1, 2]"}}, "top level is not an object"),
        ({"data": {"cufile.json": '{"x": "' + "a" * 70000 + '"}'}}, "more than the 65536"),
    ],
)
def test_a_policy_libcufile_could_not_use_is_refused(
    configmap: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(cufile.PolicyError, match=re.escape(message)):
        cufile.from_configmap(configmap, "ns", "p")


# ---------------------------------------------------------------- serve reads the ConfigMap
# Status bodies as kube-apiserver 1.36 sends them (shape of
# ../shared/reference/k8s-wire/errors/404-missing-gpunodestatus.json and
# 403-rbac-resourcenames-lease.json, for a configmap).
NOT_FOUND = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": 'configmaps "nope" not found',
    "reason": "NotFound",
    "details": {"name": "nope", "kind": "configmaps"},
    "code": 404,
}
FORBIDDEN = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": 'configmaps "secret-cm" is forbidden: User '
    '"system:serviceaccount:gpufabric-system:gpufabric-webhook" cannot get resource '
    '"configmaps" in API group "" in the namespace "gpufabric-system"',
    "reason": "Forbidden",
    "details": {"name": "secret-cm", "kind": "configmaps"},
    "code": 403,
}


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[Path]:
    cm = {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": "gpufabric-cufile-policy", "namespace": "gpufabric-system"},
        "data": {"cufile.json": POLICY},
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = "/api/v1/namespaces/gpufabric-system/configmaps/"
            name = self.path.split("?")[0].removeprefix(path)
            code, body = (
                (200, cm)
                if name == "gpufabric-cufile-policy"
                else (403, FORBIDDEN)
                if name == "secret-cm"
                else (404, NOT_FOUND)
            )
            reply(self, code, json.dumps(body).encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = start(Handler)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    yield kubeconfig
    server.shutdown()
    server.server_close()


def test_read_configmap_gets_one_by_name(apiserver: Path) -> None:
    from common.kube import load_api_client
    from webhook.kube.client import ApiError, read_configmap

    api = load_api_client(str(apiserver))
    got = read_configmap(api, "gpufabric-system", "gpufabric-cufile-policy")
    assert got is not None and got["data"]["cufile.json"] == POLICY
    assert read_configmap(api, "gpufabric-system", "nope") is None
    with pytest.raises(ApiError, match="cannot read ConfigMap gpufabric-system/secret-cm: 403"):
        read_configmap(api, "gpufabric-system", "secret-cm")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nope", "ConfigMap gpufabric-system/nope not found (--cufile-configmap names it)"),
        ("secret-cm", "cannot read ConfigMap gpufabric-system/secret-cm: 403 Forbidden"),
    ],
)
def test_serve_stops_with_one_line_when_the_policy_cannot_be_read(
    apiserver: Path,
    name: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from webhook.__main__ import main

    monkeypatch.setenv("POD_NAMESPACE", "gpufabric-system")
    args = ["serve", "--tls-cert", "/nonexistent/crt", "--tls-key", "/nonexistent/key"]
    code = main([*args, "--kubeconfig", str(apiserver), f"--cufile-configmap={name}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"gpufabric-webhook: {message}\n"


def test_offline_mutate_injects_a_policy_file(tmp_path: Path) -> None:
    from webhook.__main__ import main

    root = Path(__file__).resolve().parents[3]
    policy = root / "daemonset" / "components" / "cufile-policy" / "cufile.json"
    args = ["mutate", "--pod", str(root / "samples" / "pods" / "claim-cufile.yaml")]
    args += [
        "--status",
        str(root / "tests" / "golden"),
        "--claim",
        str(root / "samples" / "claims"),
    ]
    assert main([*args, "--cufile-policy", str(policy)]) == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main([*args, "--cufile-policy", str(bad)]) == 2
