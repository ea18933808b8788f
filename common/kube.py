"""Finding the cluster like kubectl does (shared by both programs; a kubernetes backend module)."""

from __future__ import annotations

from kubernetes import client, config


def load_api_client(kubeconfig: str | None) -> client.ApiClient:
    """In-cluster config inside a pod, else --kubeconfig / $KUBECONFIG / ~/.kube/config."""
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig)
    else:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
    return client.ApiClient()
