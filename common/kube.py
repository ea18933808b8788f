"""Finding the cluster like kubectl does (shared by both programs; a kubernetes backend module)."""

from __future__ import annotations

from kubernetes import client, config


class NoClusterConfig(RuntimeError):
    """Neither in a pod nor given a kubeconfig: the command cannot reach a cluster."""


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
    except (config.ConfigException, OSError) as err:
        raise NoClusterConfig(
            f"no cluster configuration ({err}); run in a pod, or pass --kubeconfig FILE "
            "or set KUBECONFIG"
        ) from None
    return client.ApiClient()
