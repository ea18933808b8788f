"""The cluster cuFile policy, injected by value into pods that ask for cuFile. Pure.

A configMap volume only mounts a ConfigMap from the pod's own namespace, so a policy kept in the
install namespace would leave every cuFile pod elsewhere in ContainerCreating. Instead the pod
carries the policy itself: an annotation holds cufile.json, a downwardAPI volume turns that
annotation into a file (kubelet writes it; it needs nothing in the pod's namespace), and
CUFILE_ENV_PATH_JSON points libcufile at the file. Every addition is check-before-add, so applying
twice gives the same pod, and a pod that already carries a policy annotation keeps its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.jsonc import JsoncError, loads

ANNOTATION = "cufile.gpufabric.io/policy"  # outside gpufabric.io/: written by us, not a request
VOLUME = "gpufabric-cufile"
MOUNT = "/etc/gpufabric/cufile"
FILE = "cufile.json"
ENV = "CUFILE_ENV_PATH_JSON"
KEY = "cufile.json"  # the ConfigMap key that holds the policy
# Annotations share 256 KiB per object with everything else on the pod; a policy is a few KiB.
MAX_BYTES = 64 * 1024


class PolicyError(ValueError):
    """The configured policy cannot be used; the message says which ConfigMap and why."""


def check(text: str, where: str) -> str:
    """The policy text if libcufile could read it: a JSON object (comments allowed), small."""
    size = len(text.encode())
    if size > MAX_BYTES:
        raise PolicyError(f"{where}: {size} bytes, more than the {MAX_BYTES} a pod can carry")
    try:
        value = loads(text)
    except JsoncError as err:
        raise PolicyError(f"{where}: not valid cufile.json: {err}") from None
    if not isinstance(value, dict):
        raise PolicyError(f"{where}: not valid cufile.json: the top level is not an object")
    return text


def from_configmap(configmap: Mapping[str, Any] | None, namespace: str, name: str) -> str:
    where = f"ConfigMap {namespace}/{name}"
    if configmap is None:
        raise PolicyError(f"{where} not found (--cufile-configmap names it)")
    text = (configmap.get("data") or {}).get(KEY)
    if not isinstance(text, str):
        raise PolicyError(f"{where} has no key {KEY!r}")
    return check(text, where)


def volume() -> dict[str, Any]:
    field = f"metadata.annotations['{ANNOTATION}']"
    return {
        "name": VOLUME,
        "downwardAPI": {"items": [{"path": FILE, "fieldRef": {"fieldPath": field}}]},
    }


def mount() -> dict[str, Any]:
    return {"name": VOLUME, "mountPath": MOUNT, "readOnly": True}
