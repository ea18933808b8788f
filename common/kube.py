"""Finding the cluster like kubectl does (shared by both programs; a kubernetes backend module)."""

from __future__ import annotations

from kubernetes import client, config

from common.cli import UsageError


class NoClusterConfig(UsageError):
    """Neither in-cluster configuration nor a usable kubeconfig."""


def load_api_client(kubeconfig: str | None) -> client.ApiClient:
    """In-cluster config inside a pod, else --kubeconfig / $KUBECONFIG / ~/.kube/config."""
    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig)
        else:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
    except (config.ConfigException, OSError, ValueError, TypeError, KeyError) as err:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster or ~/.kube/config"
        detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise NoClusterConfig(
            f"no usable cluster configuration ({where}): {detail}; "
            "run inside a pod, or pass --kubeconfig FILE or set KUBECONFIG"
        ) from None
    return client.ApiClient()
